//! The run directory's part of a support bundle: its state, records and stage logs (a failed
//! stage's staged outputs too), each passed through the redactor again, under `run/`. Left out
//! on purpose, each named in the manifest with why: the binaries and the ISO (large, and
//! recorded by digest in `tools/tools.json` and `iso/iso.json`), the installer's credentials
//! (`auth/`: the admin kubeconfig, the kubeadmin password) and its state file (tokens and
//! keys), any pull-secret copy, any file holding a private key (other than the run's own, redacted), the installer's cache, and
//! earlier bundles. A file larger than [`RUN_FILE_MAX`] keeps its end (a log's latest lines).

use super::bundle::Bundle;
use crate::install::rundir::{
    CACHE_DIR, GATHER_DIR, HASH_CACHE_FILE, INSTALLER_DIR, ISO_DIR, STAGING_DIR, TOOLS_DIR,
    TOOLS_FILE, WAIT_CACHE_FILE,
};
use anyhow::Result;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path};

/// The bytes kept of one run-directory file (its end).
pub const RUN_FILE_MAX: u64 = 8 << 20;

/// Why the file at `rel` (relative to the run directory) is left out of a bundle, or `None`
/// when it goes in. Decided by name alone; [`holds_private_key`] looks at the text.
pub fn left_out_why(rel: &Path) -> Option<&'static str> {
    let parts: Vec<String> = rel
        .components()
        .map(|c| match c {
            Component::Normal(n) => n.to_string_lossy().into_owned(),
            _ => "/".to_string(),
        })
        .collect();
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    // A failed stage's staged outputs obey the same rules as its published ones.
    let parts = match parts.as_slice() {
        [STAGING_DIR, rest @ ..] => rest,
        all => all,
    };
    let name = parts.last().copied().unwrap_or_default();
    match parts {
        [GATHER_DIR, ..] => Some("an earlier support bundle"),
        [TOOLS_DIR, n] if *n != TOOLS_FILE => {
            Some("a tool binary (tools/tools.json records its digest)")
        }
        [CACHE_DIR, n] if *n == WAIT_CACHE_FILE || *n == HASH_CACHE_FILE => None,
        [CACHE_DIR, ..] => Some("the installer's cache (the CoreOS image it downloaded)"),
        [ISO_DIR, INSTALLER_DIR, "auth", ..] => {
            Some("the installer's credentials (auth/kubeconfig, auth/kubeadmin-password): secrets")
        }
        _ if name == ".openshift_install_state.json" => {
            Some("the installer's state file: it holds tokens and private keys")
        }
        _ if name.ends_with(".iso") => {
            Some("an ISO (iso/iso.json and add-image/plan.json record their digests)")
        }
        _ if name.contains("pull-secret") || name.contains("pull_secret") => {
            Some("a pull secret copy")
        }
        _ => None,
    }
}

/// Whether a text holds a PEM private key (never put into a bundle, whatever file it is in).
pub fn holds_private_key(text: &str) -> bool {
    text.contains("PRIVATE KEY-----")
}

/// Puts every file of the run directory `run` into the bundle under `run/`, except those left
/// out (recorded with why).
pub fn collect(bundle: &Bundle, run: &Path) -> Result<()> {
    let mut todo = vec![run.to_path_buf()];
    let mut files = Vec::new();
    while let Some(dir) = todo.pop() {
        for entry in fs_err::read_dir(&dir)? {
            let entry = entry?;
            let path = entry.path();
            let rel = path.strip_prefix(run).unwrap_or(&path).to_path_buf();
            let kind = entry.file_type()?;
            if kind.is_dir() {
                match left_out_why(&rel) {
                    // A folder left out whole is one line, not one per file.
                    Some(why) if rel.components().count() == 1 || rel.ends_with("auth") => {
                        bundle.left_out(&format!("{}/", rel.display()), why);
                    }
                    _ => todo.push(path),
                }
            } else if kind.is_file() {
                files.push(rel);
            }
        }
    }
    files.sort();
    for rel in files {
        let shown = rel.display().to_string();
        if let Some(why) = left_out_why(&rel) {
            bundle.left_out(&shown, why);
            continue;
        }
        if shown.contains(['\n', '\\']) {
            bundle.left_out(&shown, "a name sha256sum cannot list");
            continue;
        }
        match read_tail(&run.join(&rel), RUN_FILE_MAX) {
            // Known keys are redacted first; one the run does not know leaves the file out.
            Ok((text, _)) if holds_private_key(&bundle.redact(&text)) => {
                bundle.left_out(&shown, "it holds a private key the run does not know");
            }
            Ok((text, truncated)) => {
                bundle.put_text(&format!("run/{shown}"), &text, truncated)?;
            }
            Err(e) => bundle.left_out(&shown, &format!("not read: {e}")),
        }
    }
    Ok(())
}

/// The last `max` bytes of the regular file at `path` as text (whether it was cut); an error
/// for a file that is not UTF-8 text (a binary).
fn read_tail(path: &Path, max: u64) -> std::io::Result<(String, bool)> {
    let (mut file, size) = crate::bounded::open_regular(path)?;
    let cut = size > max;
    if cut {
        file.seek(SeekFrom::Start(size - max))?;
    }
    let mut bytes = Vec::new();
    file.take(max).read_to_end(&mut bytes)?;
    if cut {
        // Start at a whole line (and a whole character).
        if let Some(nl) = bytes.iter().position(|b| *b == b'\n') {
            bytes.drain(..=nl);
        }
    }
    String::from_utf8(bytes)
        .map(|t| (t, cut))
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The binaries, the ISO, the installer's credentials and state, pull-secret copies, the
    /// cache and earlier bundles are left out, staged or published; state, records and logs go in.
    #[test]
    fn secrets_binaries_and_the_iso_are_left_out_and_records_go_in() {
        for out in [
            "tools/openshift-install",
            "tools/oc",
            "iso/work/agent.x86_64.iso",
            "iso/work/auth/kubeconfig",
            "iso/work/auth/kubeadmin-password",
            "iso/work/.openshift_install_state.json",
            ".staging/iso/work/.openshift_install_state.json",
            ".staging/tools/oc",
            "cache/agent/image_cache/coreos-x86_64.iso",
            "cache/rhcos.raw",
            "config/pull-secret.json",
            "gather/gather-20261205T185000Z.tar.gz",
        ] {
            assert!(left_out_why(Path::new(out)).is_some(), "{out} goes in");
        }
        for kept in [
            "state.json",
            "lock",
            "logs/boot.log",
            "tools/tools.json",
            "iso/iso.json",
            "iso/work/rendezvousIP",
            "iso/work/.openshift_install.log",
            "boot/master-0.json",
            "ledger/boot/master-0.json",
            "ledger/known_hosts",
            "prep/facts/master-0.json",
            ".staging/prep/prep.json",
            "cache/wait.json",
            "config/install-config.yaml",
        ] {
            assert_eq!(left_out_why(Path::new(kept)), None, "{kept} left out");
        }
        assert!(holds_private_key(
            "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n"
        ));
    }

    /// A file over the cap keeps its end, from a whole line, and says it was cut.
    #[test]
    fn a_long_log_keeps_its_latest_lines() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("x.log");
        fs_err::write(&path, "first line\nsecond\nthird\n").unwrap();
        assert_eq!(read_tail(&path, 10).unwrap(), ("third\n".to_string(), true));
        assert!(!read_tail(&path, 100).unwrap().1);
        fs_err::write(&path, [0xff, 0xfe, 0]).unwrap();
        assert!(read_tail(&path, 100).is_err());
    }
}
