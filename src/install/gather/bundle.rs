//! The support bundle as it is built: a staging folder whose every file passed the redactor
//! when it was put there, a record of what could not be collected and what was left out on
//! purpose, then `manifest.json` and `SHA256SUMS` (sha256sum's own format, paths relative to the
//! bundle's folder, so `sha256sum -c SHA256SUMS` checks it), a last scan of every file for each
//! secret the run knows and its base64 (fail closed: no bundle when one is found), and the
//! `tar.gz` written aside and renamed, so no partial bundle is ever visible.

use crate::gitops::kube::Redactor;
use crate::oci::digest::Digest;
use crate::secret::Secret;
use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The manifest's name inside the bundle.
pub const MANIFEST_FILE: &str = "manifest.json";
/// The checksums' name inside the bundle (it cannot list itself).
pub const SUMS_FILE: &str = "SHA256SUMS";

/// A file of the bundle.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct BundleFile {
    /// Its path relative to the bundle's folder.
    pub path: String,
    /// sha256 of its bytes (hex).
    pub sha256: String,
    /// Its size in bytes.
    pub size: u64,
    /// Whether only part of what was there is kept (a cap: its end for a log, its beginning for
    /// a command's output).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// Something the bundle should hold and does not, and why.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Missing {
    /// The node it concerns, when it concerns one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// What (`redfish`, `ssh journal-kubelet`, `cluster API`).
    pub what: String,
    /// Why, in the words of the error or of the rule.
    pub why: String,
}

/// A file of the run directory left out on purpose, and why.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct LeftOut {
    /// Its path relative to the run directory.
    pub path: String,
    /// Why (a secret, a binary, the ISO).
    pub why: String,
}

/// What `manifest.json` says.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// The bundle's folder name (`gather-20261205T185000Z`).
    pub bundle: String,
    /// When it was made (RFC 3339, UTC).
    pub created: String,
    /// The bootstrap that made it.
    pub bootstrap_version: String,
    /// The run directory it was made from.
    pub run: String,
    /// Every file but the manifest and `SHA256SUMS`.
    pub files: Vec<BundleFile>,
    /// What could not be collected (a node that did not answer, a command that failed to run).
    pub not_collected: Vec<Missing>,
    /// What there was nothing of to collect (a BMC that offers no log service, a stage not run).
    pub nothing_to_collect: Vec<Missing>,
    /// Files of the run directory left out on purpose.
    pub left_out: Vec<LeftOut>,
}

/// A bundle being built in a staging folder.
pub struct Bundle {
    dir: PathBuf,
    redactor: Redactor,
    secrets: Vec<String>,
    manifest: Mutex<Manifest>,
}

impl Bundle {
    /// A bundle built in `dir` (created; it must not exist), every text redacted of `secrets`.
    pub fn new(dir: &Path, secrets: &[String], manifest: Manifest) -> Result<Self> {
        fs_err::create_dir_all(dir)?;
        let wrapped: Vec<Secret> = secrets.iter().map(Secret::new).collect();
        let refs: Vec<&Secret> = wrapped.iter().collect();
        Ok(Bundle {
            dir: dir.to_path_buf(),
            redactor: Redactor::new(&refs),
            secrets: secrets.to_vec(),
            manifest: Mutex::new(manifest),
        })
    }

    /// `text` with every secret the bundle knows replaced by `<redacted>`.
    pub fn redact(&self, text: &str) -> String {
        self.redactor.redact(text)
    }

    /// Puts `text`, redacted, at `rel` (a path inside the bundle's folder).
    pub fn put_text(&self, rel: &str, text: &str, truncated: bool) -> Result<()> {
        let bytes = self.redact(text).into_bytes();
        let path = self.dir.join(rel);
        if let Some(parent) = path.parent() {
            fs_err::create_dir_all(parent)?;
        }
        fs_err::write(&path, &bytes)?;
        self.manifest
            .lock()
            .expect("manifest")
            .files
            .push(BundleFile {
                path: rel.to_string(),
                sha256: Digest::of(&bytes).hex().to_string(),
                size: bytes.len() as u64,
                truncated,
            });
        Ok(())
    }

    /// Puts `value` as pretty JSON, redacted, at `rel`.
    pub fn put_json(&self, rel: &str, value: &impl Serialize) -> Result<()> {
        let text = serde_json::to_string_pretty(value).context("serialising")? + "\n";
        self.put_text(rel, &text, false)
    }

    /// Records that `what` (of `node`) could not be collected, and why (redacted).
    pub fn not_collected(&self, node: Option<&str>, what: &str, why: impl std::fmt::Display) {
        let m = self.missing(node, what, why);
        self.manifest
            .lock()
            .expect("manifest")
            .not_collected
            .push(m);
    }

    /// Records that there was no `what` (of `node`) to collect, and why.
    pub fn nothing_to_collect(&self, node: Option<&str>, what: &str, why: impl std::fmt::Display) {
        let m = self.missing(node, what, why);
        self.manifest
            .lock()
            .expect("manifest")
            .nothing_to_collect
            .push(m);
    }

    fn missing(&self, node: Option<&str>, what: &str, why: impl std::fmt::Display) -> Missing {
        Missing {
            node: node.map(str::to_string),
            what: what.to_string(),
            why: self.redact(&why.to_string()),
        }
    }

    /// Records a run-directory file left out on purpose.
    pub fn left_out(&self, path: &str, why: &str) {
        let l = LeftOut {
            path: path.to_string(),
            why: why.to_string(),
        };
        self.manifest.lock().expect("manifest").left_out.push(l);
    }

    /// Writes `manifest.json` and `SHA256SUMS`, scans every file for the secrets, and writes
    /// the folder as `out` (`tar.gz`, its entries under the folder's name `top`), aside then
    /// renamed. Returns the manifest. Refuses, naming the file, when a secret is found.
    pub fn finish(self, top: &str, out: &Path) -> Result<Manifest> {
        let mut manifest = self.manifest.into_inner().expect("manifest");
        manifest.files.sort_by(|a, b| a.path.cmp(&b.path));
        sort_missing(&mut manifest.not_collected);
        sort_missing(&mut manifest.nothing_to_collect);
        manifest.left_out.sort_by(|a, b| a.path.cmp(&b.path));
        let json = serde_json::to_string_pretty(&manifest)? + "\n";
        let json = self.redactor.redact(&json);
        fs_err::write(self.dir.join(MANIFEST_FILE), &json)?;
        let mut sums = sha256sums(&manifest.files);
        sums.push_str(&format!(
            "{}  {MANIFEST_FILE}\n",
            Digest::of(json.as_bytes()).hex()
        ));
        fs_err::write(self.dir.join(SUMS_FILE), sums)?;
        scan(&self.dir, &self.secrets)?;
        write_tar_gz(&self.dir, top, out)?;
        Ok(manifest)
    }
}

fn sort_missing(list: &mut [Missing]) {
    list.sort_by(|a, b| (&a.node, &a.what).cmp(&(&b.node, &b.what)));
}

/// `SHA256SUMS` in sha256sum's text format: `HEX  PATH` a line.
pub fn sha256sums(files: &[BundleFile]) -> String {
    files
        .iter()
        .map(|f| format!("{}  {}\n", f.sha256, f.path))
        .collect()
}

/// Every file under `dir`, relative to it, sorted.
fn files_under(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in fs_err::read_dir(&d)? {
            let entry = entry?;
            let path = entry.path();
            if entry.file_type()?.is_dir() {
                todo.push(path);
            } else {
                out.push(path.strip_prefix(dir).unwrap_or(&path).to_path_buf());
            }
        }
    }
    out.sort();
    Ok(out)
}

/// A secret found in the bundle: the file, and the form it was in.
#[derive(Debug, thiserror::Error)]
#[error("refusing to write the support bundle: {file} holds a secret the run knows ({form}); nothing was written (report this: the redactor missed it)")]
pub struct SecretFound {
    /// The file, relative to the bundle's folder.
    pub file: String,
    /// `in clear` or `in base64`.
    pub form: &'static str,
}

/// The forms a secret is looked for in: itself and its base64 (with and without padding).
fn forms(secret: &str) -> Vec<(String, &'static str)> {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(secret.as_bytes());
    let unpadded = b64.trim_end_matches('=').to_string();
    vec![
        (secret.to_string(), "in clear"),
        (b64, "in base64"),
        (unpadded, "in base64"),
    ]
}

/// Fails on the first file under `dir` that holds one of `secrets` (at least 4 bytes; shorter
/// ones are not redacted either) in clear or in base64.
pub fn scan(dir: &Path, secrets: &[String]) -> std::result::Result<(), anyhow::Error> {
    let forms: Vec<(String, &'static str)> = secrets
        .iter()
        .filter(|s| s.len() >= 4)
        .flat_map(|s| forms(s))
        .collect();
    for rel in files_under(dir)? {
        let bytes = fs_err::read(dir.join(&rel))?;
        for (form, how) in &forms {
            if contains(&bytes, form.as_bytes()) {
                return Err(SecretFound {
                    file: rel.display().to_string(),
                    form: how,
                }
                .into());
            }
        }
    }
    Ok(())
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// `dir` as a gzip'd tar at `out`, its entries under `top/`: written to a temp name beside
/// `out`, synced, then renamed.
fn write_tar_gz(dir: &Path, top: &str, out: &Path) -> Result<()> {
    let tmp = out.with_file_name(format!(
        ".{}.partial-{}",
        out.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        std::process::id()
    ));
    let result = (|| -> Result<()> {
        let file = fs_err::File::create(&tmp)?;
        let gz = flate2::write::GzEncoder::new(file, flate2::Compression::default());
        let mut tar = tar::Builder::new(gz);
        let mtime = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        for rel in files_under(dir)? {
            let path = dir.join(&rel);
            let file = fs_err::File::open(&path)?;
            let mut header = tar::Header::new_gnu();
            header.set_size(file.metadata()?.len());
            header.set_mode(0o644);
            header.set_mtime(mtime);
            header.set_entry_type(tar::EntryType::Regular);
            tar.append_data(&mut header, Path::new(top).join(&rel), file)
                .with_context(|| format!("adding {} to the bundle", rel.display()))?;
        }
        let mut file = tar.into_inner()?.finish()?;
        file.flush()?;
        file.sync_all()?;
        Ok(())
    })();
    if let Err(e) = result {
        let _ = fs_err::remove_file(&tmp);
        return Err(e.context(format!("writing {}", out.display())));
    }
    crate::fs::publish(&tmp, out, 0o600)
}

/// Refuses an output path whose folder does not exist or that names a folder.
pub fn check_out(out: &Path) -> Result<()> {
    if out.is_dir() {
        bail!("--out {}: a folder; name the bundle's file", out.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> Manifest {
        Manifest {
            bundle: "gather-x".into(),
            ..Manifest::default()
        }
    }

    /// A planted secret that slipped past the redactor (written straight into the folder, as a
    /// bug would) stops the bundle, naming the file and the form, and no bundle appears.
    #[test]
    fn a_secret_in_clear_or_base64_refuses_the_bundle_naming_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let secrets = vec!["hunter2-long-secret".to_string()];
        for (planted, form) in [
            ("x hunter2-long-secret y", "in clear"),
            ("x aHVudGVyMi1sb25nLXNlY3JldA== y", "in base64"),
            ("x aHVudGVyMi1sb25nLXNlY3JldA y", "in base64"),
        ] {
            let dir = tmp.path().join("b");
            let _ = fs_err::remove_dir_all(&dir);
            let b = Bundle::new(&dir, &secrets, manifest()).unwrap();
            b.put_text("run/ok.log", "nothing here", false).unwrap();
            fs_err::create_dir_all(dir.join("nodes/n")).unwrap();
            fs_err::write(dir.join("nodes/n/leak.txt"), planted).unwrap();
            let out = tmp.path().join("bundle.tar.gz");
            let e = b.finish("gather-x", &out).unwrap_err();
            let found = e.downcast_ref::<SecretFound>().expect("SecretFound");
            assert_eq!(found.file, "nodes/n/leak.txt");
            assert_eq!(found.form, form);
            assert!(!out.exists());
        }
    }

    /// What goes through the bundle is redacted, in clear and in base64, even in a reason.
    #[test]
    fn texts_and_reasons_are_redacted_before_they_are_written() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("b");
        let b = Bundle::new(&dir, &["hunter2-long-secret".to_string()], manifest()).unwrap();
        b.put_text("a.txt", "pw hunter2-long-secret", false)
            .unwrap();
        b.not_collected(Some("n"), "ssh", "login hunter2-long-secret refused");
        let out = tmp.path().join("bundle.tar.gz");
        let m = b.finish("gather-x", &out).unwrap();
        assert_eq!(
            fs_err::read_to_string(dir.join("a.txt")).unwrap(),
            "pw <redacted>"
        );
        assert_eq!(m.not_collected[0].why, "login <redacted> refused");
        assert!(out.is_file());
    }

    /// SHA256SUMS is in sha256sum's format, lists the manifest, and not itself.
    #[test]
    fn sha256sums_lists_every_file_and_the_manifest_but_not_itself() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("b");
        let b = Bundle::new(&dir, &[], manifest()).unwrap();
        b.put_text("run/state.json", "{}\n", false).unwrap();
        b.finish("gather-x", &tmp.path().join("o.tar.gz")).unwrap();
        let sums = fs_err::read_to_string(dir.join(SUMS_FILE)).unwrap();
        let names: Vec<&str> = sums.lines().map(|l| &l[66..]).collect();
        assert_eq!(names, ["run/state.json", MANIFEST_FILE]);
        let state = sums.lines().next().unwrap();
        assert_eq!(&state[..64], Digest::of(b"{}\n").hex().to_string());
        assert_eq!(&state[64..66], "  ");
    }
}
