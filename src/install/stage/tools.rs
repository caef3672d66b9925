//! The tools stage: `openshift-install` (or `openshift-baremetal-install`, as the inventory's
//! `cluster.release.installer` asks) and `oc` taken out of the release that the mirror record
//! places in the site registry, by digest, through the site's CA and pull secret, and pinned to
//! that release ([`crate::openshift::extract`]), into `RUN/tools/`. `--installer PATH` uses a
//! given binary instead: its sha256 is recorded with a warning that bootstrap did not pin it, and
//! a binary whose release placeholder was never rewritten is refused (it would install its
//! compiled-in release). The components are found through the mirror record's digest mirror
//! set, as oc finds them. `RUN/tools/tools.json` says what each binary is, which placeholders
//! oc fills in it and what was written there; its installer name is the one every later stage
//! runs ([`installer`]).

use super::{Inputs, IsoServer, StageContext, StageWork};
use crate::install::log::StageLog;
use crate::install::rundir::{TOOLS_DIR, TOOLS_FILE};
use crate::inventory::model::InstallerBinary;
use crate::inventory::{self, Inventory};
use crate::oci::auth::AuthFile;
use crate::oci::reference::ImageRef;
use crate::oci::registry::{Registries, RegistryOptions};
use crate::openshift::extract::{self, ExtractRequest, Extracted, Tool};
use crate::openshift::mirrors::DigestMirrors;
use crate::openshift::record::MirrorRecord;
use anyhow::{bail, Context, Result};
use std::path::Path;
use std::sync::Arc;

/// The architecture the tools are taken for (the agent ISO is `x86_64`).
const ARCH: &str = "amd64";

/// The tools stage.
pub struct Tools;

impl StageWork for Tools {
    fn inputs(&self, cx: &StageContext) -> Result<Inputs> {
        // Only what the tools depend on: the release as site.yaml names it, the mirror record,
        // the pull secret and the CA; a node's MAC changes nothing here.
        let mut inputs = Inputs::default();
        inputs.setting("bootstrapVersion", env!("CARGO_PKG_VERSION"));
        let inv = cx.inventory()?;
        let release = &inv.site.cluster.release;
        inputs.setting("cluster.release", &format!("{release:?}"));
        let refs = &inv.site.references;
        inputs.secret("references.pullSecret", &inv, &refs.pull_secret)?;
        for f in [refs.registry_ca.as_ref(), refs.mirror_record.as_ref()]
            .into_iter()
            .flatten()
        {
            inputs.file(format!("inventory:{}", f.file), &inv.resolve(&f.file))?;
        }
        inputs.setting("arch", ARCH);
        match &cx.installer {
            Some(path) => inputs.file("setting:installer", path)?,
            None => inputs.setting("installer", "extracted"),
        }
        Ok(inputs)
    }

    fn output_dir(&self) -> Option<&'static str> {
        Some(TOOLS_DIR)
    }

    fn run(
        &self,
        cx: &StageContext,
        _iso: &mut IsoServer,
        out: &Path,
        log: &mut StageLog,
    ) -> Result<String> {
        let inv = cx.inventory()?;
        let release = site_release(&inv)?;
        log.line(&format!("release in the site registry: {release}"))?;
        let registries = Arc::new(site_registries(&inv)?);
        fs_err::create_dir_all(out)?;
        let installer_tool = match inv.site.cluster.release.installer {
            InstallerBinary::OpenshiftInstall => Tool::OpenshiftInstall,
            InstallerBinary::OpenshiftBaremetalInstall => Tool::OpenshiftBaremetalInstall,
        };
        let mirrors = site_mirrors(&inv)?;
        let handle = tokio::runtime::Handle::current();
        let take = |tool: Tool, log: &mut StageLog| -> Result<Described> {
            let request = ExtractRequest {
                release: release.clone(),
                tool,
                to: out.to_path_buf(),
                arch: ARCH.to_string(),
                mirrors: mirrors.clone(),
            };
            let e = handle
                .block_on(extract::extract(&registries, &request))
                .with_context(|| format!("taking {} out of {release}", tool.name()))?;
            log.line(&e.to_string())?;
            // validate checks the version site.yaml or the mirror record gives; a release
            // named only by digest shows its version here.
            if let Some(v) = &e.version {
                if crate::inventory::validate::issues_watcher_token(v) == Some(false) {
                    bail!("release {v} ({release}) cannot be installed by bootstrap install: its wait stage authenticates as `openshift-install agent wait-for` does, with the watcher token the agent installer issues from 4.18 on, and this installer issues none; install 4.18 or later");
                }
            }
            for m in e.missing() {
                // As oc does: a placeholder the binary lacks is a warning, not an error (the
                // installer's release image placeholder is refused by the extraction).
                log.line(&format!(
                    "warning: {} has no {} placeholder: oc would not have written it either",
                    tool.name(),
                    m.marker.name()
                ))?;
            }
            Ok(Described::from(&e))
        };
        // The installer first: it is the binary the install stands on, and the one a release
        // can lack (openshift-baremetal-install is optional in a payload).
        let installer = match &cx.installer {
            None => take(installer_tool, log)?,
            Some(path) => given_installer(path, out, installer_tool, log)?,
        };
        let oc = take(Tool::Oc, log)?;
        let summary = ToolsFile {
            release: release.to_string(),
            installer,
            oc,
        };
        crate::fs::write_json(&out.join(TOOLS_FILE), &summary)?;
        if cx.cancelled() {
            bail!("interrupted");
        }
        let installer = &summary.installer;
        Ok(format!(
            "{} ({}) and oc, {}",
            installer.name,
            if installer.pinned {
                "pinned"
            } else {
                "given, NOT pinned by bootstrap"
            },
            release
        ))
    }
}

/// `RUN/tools/tools.json`: the release, and each binary as written.
#[derive(serde::Serialize, serde::Deserialize)]
struct ToolsFile {
    release: String,
    installer: Described,
    oc: Described,
}

/// The release the tools stage took the binaries from (`tools.json`), by digest.
pub fn release(run: &Path) -> Result<String> {
    Ok(recorded(run)?.1.release)
}

fn recorded(run: &Path) -> Result<(std::path::PathBuf, ToolsFile)> {
    let file = run.join(TOOLS_DIR).join(TOOLS_FILE);
    let text = match fs_err::read(&file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("{} is missing: run the tools stage first", file.display())
        }
        Err(e) => return Err(e.into()),
    };
    let described: ToolsFile = serde_json::from_slice(&text)
        .with_context(|| format!("{} is not the tools stage's record", file.display()))?;
    Ok((file, described))
}

/// The installer the tools stage wrote, by the name it recorded in `tools.json` (the one the
/// inventory's `cluster.release.installer` asks for): every later stage runs this one.
pub fn installer(run: &Path) -> Result<std::path::PathBuf> {
    let tools = run.join(TOOLS_DIR);
    let (file, described) = recorded(run)?;
    let name = &described.installer.name;
    let tool: Tool = name
        .parse()
        .map_err(|e: String| anyhow::anyhow!("{}: installer.name: {e}", file.display()))?;
    if tool == Tool::Oc {
        bail!("{}: installer.name is oc, not an installer", file.display());
    }
    let path = tools.join(tool.name());
    if !path.is_file() {
        bail!(
            "{} is missing although {} names it: run the tools stage again",
            path.display(),
            file.display()
        );
    }
    Ok(path)
}

/// A binary in `tools.json`.
#[derive(serde::Serialize, serde::Deserialize)]
struct Described {
    name: String,
    sha256: String,
    size: u64,
    /// Pinned by bootstrap to the release (false for `--installer PATH`).
    pinned: bool,
    from: String,
    /// The placeholders oc fills in this binary: each with the value written and where, or
    /// no offset when the binary has none (empty for `--installer PATH`).
    #[serde(default)]
    markers: Vec<serde_json::Value>,
}

impl From<&Extracted> for Described {
    fn from(e: &Extracted) -> Self {
        Described {
            name: e.tool.name().to_string(),
            sha256: e.sha256.clone(),
            size: e.size,
            pinned: true,
            from: e.component.clone(),
            markers: e
                .markers
                .iter()
                .map(|m| serde_json::to_value(m).unwrap_or_default())
                .collect(),
        }
    }
}

/// `--installer PATH`: copied in as the installer, with a warning; refused when its release
/// placeholder was never rewritten.
fn given_installer(path: &Path, out: &Path, tool: Tool, log: &mut StageLog) -> Result<Described> {
    let target = out.join(tool.name());
    let (sha256, size) = copy_given(path, &target)?;
    log.line(&format!(
        "warning: --installer {} (sha256 {sha256}) is used as given: bootstrap did not pin it to the release",
        path.display()
    ))?;
    Ok(Described {
        name: tool.name().to_string(),
        sha256,
        size,
        pinned: false,
        from: path.display().to_string(),
        markers: Vec::new(),
    })
}

/// Copies the given installer `path` to `target` (mode 0755) through one buffer, hashing it and
/// looking for its release image placeholder on the way (some 500 MB: never held whole); its
/// sha256 and size. A copy that still has the placeholder is deleted and refused.
fn copy_given(path: &Path, target: &Path) -> Result<(String, u64)> {
    use crate::openshift::pin::{Marker, Replacement};
    use std::io::Read;
    // openshift-install is some 500-700 MB; nothing that size twice over is one.
    const MAX_INSTALLER: u64 = 4 << 30;
    let shown = || format!("--installer {}", path.display());
    let (file, size) =
        crate::bounded::open_regular(path).with_context(|| format!("reading {}", shown()))?;
    if size > MAX_INSTALLER {
        bail!(
            "{}: {size} bytes, more than an installer may be ({MAX_INSTALLER})",
            shown()
        );
    }
    let dir = target.parent().unwrap_or(Path::new("."));
    fs_err::create_dir_all(dir)?;
    let name = target.file_name().unwrap_or_default().to_string_lossy();
    let temp = dir.join(format!(".{name}.partial-{}", std::process::id()));
    // Only to find the placeholder: a copy in which it was found is never kept.
    let probe = Replacement::new(Marker::ReleaseImage, "")?;
    let written = extract::write_pinned(&mut file.take(MAX_INSTALLER + 1), &temp, &[probe])
        .with_context(|| format!("copying {} to {}", shown(), temp.display()));
    let refused = match &written {
        Ok((_, len, _)) if *len > MAX_INSTALLER => Some(format!(
            "{}: grew past {MAX_INSTALLER} bytes while read, more than an installer may be",
            shown()
        )),
        Ok((_, _, found)) if found.first().is_some_and(Option::is_some) => Some(format!(
            "{}: its release placeholder was never rewritten, so it would install the release compiled into it; extract it from the mirrored release (bootstrap release extract) or leave --installer out",
            shown()
        )),
        _ => None,
    };
    if written.is_err() || refused.is_some() {
        let _ = fs_err::remove_file(&temp);
    }
    let (sha256, len, _) = written?;
    if let Some(why) = refused {
        bail!(why);
    }
    crate::fs::publish(&temp, target, 0o755)
        .with_context(|| format!("writing {}", target.display()))?;
    Ok((sha256, len))
}

/// The release in the site registry, by digest: the mirror record's release image for the
/// inventory's `cluster.release` (image by digest, or version).
pub fn site_release(inv: &Inventory) -> Result<ImageRef> {
    let Some(rec) = &inv.site.references.mirror_record else {
        bail!("the tools stage needs references.mirrorRecord in site.yaml: the mirror record says where the release is in the site registry");
    };
    let path = inv.resolve(&rec.file);
    let record = MirrorRecord::load(&path)
        .with_context(|| format!("reading the mirror record {}", path.display()))?;
    let release = &inv.site.cluster.release;
    let found = match (&release.image, &release.version) {
        (Some(image), _) => {
            let digest = ImageRef::parse(image)
                .ok()
                .and_then(|r| r.digest)
                .with_context(|| {
                    format!("cluster.release.image {image} is not pinned by digest")
                })?;
            record.release_by_digest(&digest)
        }
        (None, Some(version)) => record.release(version),
        (None, None) => bail!("site.yaml names no cluster.release (image or version)"),
    };
    let found = found.with_context(|| {
        format!(
            "the mirror record {} holds no release image for cluster.release ({}): mirror that release first",
            path.display(),
            release
                .image
                .as_deref()
                .or(release.version.as_deref())
                .unwrap_or_default()
        )
    })?;
    let dest = ImageRef::parse(&found.destination)
        .map_err(|e| anyhow::anyhow!("the mirror record {}: {e}", path.display()))?;
    Ok(ImageRef {
        tag: None,
        digest: Some(found.digest.clone()),
        ..dest
    })
}

/// Where the mirror put the release's components: the mirror record's image digest mirror set,
/// the same pairs install-config's `imageDigestSources` gets.
fn site_mirrors(inv: &Inventory) -> Result<DigestMirrors> {
    let Some(rec) = &inv.site.references.mirror_record else {
        bail!("the tools stage needs references.mirrorRecord in site.yaml: the mirror record says where the release is in the site registry");
    };
    let path = inv.resolve(&rec.file);
    let record = MirrorRecord::load(&path)
        .with_context(|| format!("reading the mirror record {}", path.display()))?;
    let sources = record
        .digest_sources()
        .map_err(|e| anyhow::anyhow!("the mirror record {}: {e}", path.display()))?;
    Ok(DigestMirrors::new(sources))
}

/// The site registry as the inventory reaches it: the pull secret's credentials, the registry
/// CA beside the system's roots, TLS verified.
pub fn site_registries(inv: &Inventory) -> Result<Registries> {
    let referenced = inventory::read_referenced(inv).map_err(|problems| {
        let lines: Vec<String> = problems.iter().map(|(_, p)| p.message.clone()).collect();
        anyhow::anyhow!("reading the inventory's references: {}", lines.join("; "))
    })?;
    let authfile = AuthFile::parse(
        referenced.pull_secret.expose(),
        Path::new("references.pullSecret"),
    )?;
    Registries::new(RegistryOptions {
        authfile,
        ca_bundle: inv
            .site
            .references
            .registry_ca
            .as_ref()
            .map(|c| inv.resolve(&c.file)),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oci::digest::Digest;

    /// A given installer of 3 MiB, with the release image placeholder across the first 1 MiB
    /// read buffer's end when `unpinned`.
    fn given(dir: &Path, unpinned: bool) -> (std::path::PathBuf, Vec<u8>) {
        let mut bytes: Vec<u8> = (0..3u32 << 20).map(|i| (i % 251) as u8 + 1).collect();
        if unpinned {
            let m = crate::openshift::pin::release_image_placeholder();
            let at = (1 << 20) - 100;
            bytes[at..at + m.len()].copy_from_slice(&m);
        }
        let path = dir.join("openshift-install-given");
        fs_err::write(&path, &bytes).unwrap();
        (path, bytes)
    }

    /// `--installer` is copied through a buffer, not read whole: the copy, its hash and size
    /// are the file's, executable.
    #[test]
    fn a_given_installer_is_copied_and_hashed_as_it_is() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let (path, bytes) = given(tmp.path(), false);
        let target = tmp.path().join("tools/openshift-install");
        let (sha256, size) = copy_given(&path, &target).unwrap();
        assert_eq!(fs_err::read(&target).unwrap(), bytes);
        assert_eq!(
            (sha256.as_str(), size),
            (Digest::of(&bytes).hex(), bytes.len() as u64)
        );
        let mode = fs_err::metadata(&target).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
        let left: Vec<_> = fs_err::read_dir(tmp.path().join("tools"))
            .unwrap()
            .collect();
        assert_eq!(left.len(), 1, "only the installer: {left:?}");
    }

    /// An unpinned installer is refused although its placeholder straddles two reads, and
    /// leaves nothing behind.
    #[test]
    fn an_unpinned_given_installer_is_refused_leaving_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let (path, _) = given(tmp.path(), true);
        let target = tmp.path().join("tools/openshift-install");
        let e = copy_given(&path, &target).unwrap_err().to_string();
        assert!(e.contains("release placeholder was never rewritten"), "{e}");
        assert!(e.contains(&path.display().to_string()), "{e}");
        assert_eq!(
            fs_err::read_dir(tmp.path().join("tools")).unwrap().count(),
            0
        );
    }
}
