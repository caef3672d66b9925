//! Lab stand-ins for the release's `openshift-install` and `oc`: what the lab's `installer` and
//! `cli` images carry at `usr/bin/openshift-install` and `usr/bin/oc`, so the install pipeline
//! extracts, pins and runs them exactly as it would the real binaries.
//!
//! Each is a short `/bin/sh` script that hands over to `bootstrap-lab stand-in NAME`, followed by
//! the release placeholders the real binaries carry. Extraction rewrites those as it rewrites the
//! real ones; the stand-ins read their own file and refuse to start while the image placeholder
//! is still there, as a real installer would install its compiled-in release instead.
//!
//! What they imitate (openshift-install 4.18 and oc 4.18, for the calls the pipeline makes):
//! - `openshift-install version` and `oc version --client`: the version, the release image.
//! - `openshift-install agent create image --dir D`: reads and checks `D/install-config.yaml` and
//!   `D/agent-config.yaml` with the installer's own rules (bootstrap's `validate`), includes
//!   every `D/openshift/*.yaml|yml` as an extra manifest, writes `D/agent.x86_64.iso` (a real ISO
//!   9660 image, made with `xorriso`, holding the two files and the manifests), `D/rendezvousIP`,
//!   `D/auth/kubeconfig` and `D/auth/kubeadmin-password` (mode 0600), and
//!   `D/.openshift_install_state.json` with an ES256 `WatcherAuthToken` (claim `auth_scheme:
//!   watcherAuth`, as 4.18 writes it). The ISO also carries, under `lab/`, what the lab's
//!   simulated nodes learn from it ([`crate::site::simulator`]): the watcher public key,
//!   the cluster API's serving certificate and key (signed by the CA the kubeconfig carries in
//!   `certificate-authority-data`) and the sha256 of the kubeconfig's admin token. The
//!   kubeconfig's `server:` is `https://<first apiVIP>:6443` with `tls-server-name:
//!   api.NAME.DOMAIN`: the lab has no DNS. Then it consumes its inputs (the two files and
//!   `openshift/` are removed), as the real installer does. Log lines go to stderr as
//!   `level=info msg=...`; a failure is a `level=fatal` line and exit status 1.
//!
//! What they do not: boot anything, embed a CoreOS image (the ISO holds only the inputs), or
//! answer any other subcommand (each is refused by name).

use anyhow::{bail, Context, Result};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use bootstrap::openshift::pin;
use std::path::{Path, PathBuf};

/// The line that precedes the placeholders in a stand-in script.
const PLACEHOLDERS_LINE: &[u8] = b"\n# release placeholders (rewritten when extracted):\n";

/// Which stand-in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tool {
    /// `openshift-install`, the `installer` component's `usr/bin/openshift-install`.
    OpenshiftInstall,
    /// `openshift-baremetal-install`, the `baremetal-installer` component's
    /// `usr/bin/openshift-install`: the same installer built with the baremetal platform.
    OpenshiftBaremetalInstall,
    /// `oc`.
    Oc,
}

impl Tool {
    /// The stand-in's name (`bootstrap-lab stand-in NAME`).
    pub fn name(self) -> &'static str {
        match self {
            Tool::OpenshiftInstall => "openshift-install",
            Tool::OpenshiftBaremetalInstall => "openshift-baremetal-install",
            Tool::Oc => "oc",
        }
    }

    /// The placeholders the real binary carries, as `oc adm release extract` fills them
    /// (openshift/oc `extract_tools.go`; the installer's `pkg/version/version.go` and
    /// `pkg/asset/releaseimage`): `oc` only the version, the installers image, version and
    /// architecture.
    pub fn markers(self) -> &'static [pin::Marker] {
        match self {
            Tool::Oc => &[pin::Marker::ReleaseVersion],
            Tool::OpenshiftInstall | Tool::OpenshiftBaremetalInstall => &[
                pin::Marker::ReleaseImage,
                pin::Marker::ReleaseVersion,
                pin::Marker::ReleaseArchitecture,
            ],
        }
    }

    fn is_installer(self) -> bool {
        self != Tool::Oc
    }
}

impl std::str::FromStr for Tool {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "openshift-install" => Ok(Tool::OpenshiftInstall),
            "openshift-baremetal-install" => Ok(Tool::OpenshiftBaremetalInstall),
            "oc" => Ok(Tool::Oc),
            _ => Err(format!(
                "no lab stand-in '{s}': openshift-install, openshift-baremetal-install or oc"
            )),
        }
    }
}

/// The label before a placeholder in a stand-in script.
fn label(marker: pin::Marker) -> Vec<u8> {
    format!("# {}:\n", marker.name()).into_bytes()
}

/// The script the lab image carries for `tool`: it runs `bootstrap-lab` (this very binary, by its
/// absolute path, so the images are tied to the machine that seeded them) and ends with the
/// placeholders the real binary has ([`Tool::markers`]), each after a label line. `oc` also
/// carries oc's own search constants (each marker with `!` for its first byte), as the real
/// `oc` binary does: extraction must not take them for placeholders. `build` is the release
/// build (`4.18.3`) it reports.
pub fn script(tool: Tool, lab: &Path, build: &str) -> Vec<u8> {
    let quoted = lab.display().to_string().replace('\'', r"'\''");
    let mut s = format!(
        "#!/bin/sh\n# bootstrap-lab stand-in for {name} {build} (docs/lab.md): it boots nothing.\nexec '{quoted}' stand-in {name} --self \"$0\" -- \"$@\"\n",
        name = tool.name()
    )
    .into_bytes();
    if tool == Tool::Oc {
        s.extend_from_slice(b"\n# oc's own search constants (never rewritten):\n");
        for m in [
            pin::Marker::ReleaseImage,
            pin::Marker::ReleaseVersion,
            pin::Marker::ReleaseArchitecture,
        ] {
            s.extend(m.search_constant());
        }
        s.push(b'\n');
    }
    s.extend_from_slice(PLACEHOLDERS_LINE);
    for m in tool.markers() {
        s.extend(label(*m));
        s.extend(m.placeholder());
        s.push(b'\n');
    }
    s
}

/// What a stand-in prints and how it ends.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Its standard output.
    pub stdout: String,
    /// Its log (standard error), one line each.
    pub log: Vec<String>,
    /// Its exit status.
    pub status: u8,
}

impl Outcome {
    fn info(&mut self, msg: impl AsRef<str>) {
        self.log.push(format!("level=info msg={:?}", msg.as_ref()));
    }

    /// How oc ends on an error: `error: ...` and status 1.
    fn oc_error(mut self, e: anyhow::Error) -> Self {
        self.log.push(format!("error: {e:#}"));
        self.status = 1;
        self
    }

    fn warn(&mut self, msg: impl AsRef<str>) {
        self.log
            .push(format!("level=warning msg={:?}", msg.as_ref()));
    }

    fn fatal(mut self, msg: impl AsRef<str>) -> Self {
        self.log.push(format!("level=fatal msg={:?}", msg.as_ref()));
        self.status = 1;
        self
    }
}

/// What extraction wrote into a stand-in, read from its own file as the real binaries read
/// their placeholders (the installer's `pkg/version`): a placeholder still as built reads as
/// `None`.
#[derive(Debug, PartialEq, Eq)]
pub struct Pinned {
    /// The release pullspec by digest (installers only).
    pub release: Option<String>,
    /// The release version.
    pub version: Option<String>,
    /// The release platform as oc writes it (`linux/amd64`, `multi (linux/amd64)`).
    pub architecture: Option<String>,
}

/// Reads what extraction wrote into a stand-in script of `tool`; an installer whose release
/// image placeholder is still there refuses (it would install its compiled-in release).
pub fn pinned(tool: Tool, script: &[u8]) -> Result<Pinned> {
    let start = script
        .windows(PLACEHOLDERS_LINE.len())
        .position(|w| w == PLACEHOLDERS_LINE)
        .context("not a lab stand-in script: its placeholder line is missing")?
        + PLACEHOLDERS_LINE.len();
    let read = |marker: pin::Marker| -> Result<Option<String>> {
        let label = label(marker);
        let Some(at) = script[start..]
            .windows(label.len())
            .position(|w| w == label.as_slice())
        else {
            return Ok(None);
        };
        let from = start + at + label.len();
        let len = marker.placeholder().len();
        let region = script
            .get(from..from + len)
            .context("a lab stand-in script cut short")?;
        if region.first() == Some(&0) {
            return Ok(None);
        }
        Ok(Some(c_string(region)).filter(|v| !v.is_empty()))
    };
    let pinned = Pinned {
        release: read(pin::Marker::ReleaseImage)?,
        version: read(pin::Marker::ReleaseVersion)?,
        architecture: read(pin::Marker::ReleaseArchitecture)?,
    };
    if tool.is_installer() && pinned.release.is_none() {
        bail!("the release image placeholder was not rewritten: this binary must be extracted from a release (oc adm release extract --command, or bootstrap release extract)");
    }
    Ok(pinned)
}

fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// Runs stand-in `tool`, whose script is `self_path`, with `args`.
pub fn run(tool: Tool, self_path: &Path, args: &[String]) -> Outcome {
    let out = Outcome::default();
    let script = match fs_err::read(self_path) {
        Ok(s) => s,
        Err(e) => return out.fatal(format!("reading myself: {e}")),
    };
    let pinned = match pinned(tool, &script) {
        Ok(p) => p,
        Err(e) => return out.fatal(format!("{e:#}")),
    };
    let (kubeconfig, args) = global_kubeconfig(args);
    match (tool, args.as_slice()) {
        (Tool::Oc, ["adm", "node-image", "create", rest @ ..]) => {
            let run = crate::nodeimage::create(rest, kubeconfig);
            Outcome {
                stdout: run.stdout,
                log: run.stderr,
                status: run.status,
            }
        }
        (Tool::OpenshiftInstall | Tool::OpenshiftBaremetalInstall, ["version"]) => Outcome {
            // As cmd/openshift-install/version.go prints it; the architecture cleaned as
            // pkg/version's cleanArch does.
            stdout: format!(
                "{} {}\nbuilt from commit lab-stand-in\nrelease image {}\nrelease architecture {}\n",
                tool.name(),
                pinned.version.as_deref().unwrap_or("unknown"),
                pinned.release.as_deref().unwrap_or_default(),
                clean_arch(pinned.architecture.as_deref())
            ),
            ..out
        },
        (
            Tool::OpenshiftInstall | Tool::OpenshiftBaremetalInstall,
            ["agent", "create", "image", rest @ ..],
        ) => {
            match dir_arg(rest) {
                Ok(dir) => create_image(&dir, &pinned, out),
                Err(e) => out.fatal(e),
            }
        }
        (Tool::Oc, ["adm", "release", "info", rest @ ..]) => {
            match crate::oc::release_info(rest) {
                Ok(stdout) => Outcome { stdout, ..out },
                Err(e) => out.oc_error(e),
            }
        }
        (Tool::Oc, ["image", "extract", rest @ ..]) => match crate::oc::image_extract(rest) {
            Ok(()) => out,
            Err(e) => out.oc_error(e),
        },
        (Tool::Oc, ["version", "--client"] | ["version"]) => Outcome {
            stdout: format!(
                "Client Version: {}\n",
                pinned.version.as_deref().unwrap_or("unknown")
            ),
            ..out
        },
        (tool, args) => out.fatal(format!(
            "the lab stand-in for {} does not do '{}' (it imitates only what the install pipeline calls; see docs/lab.md)",
            tool.name(),
            args.join(" ")
        )),
    }
}

/// oc's global `--kubeconfig K` (or `--kubeconfig=K`), wherever it stands, and the rest.
fn global_kubeconfig(args: &[String]) -> (Option<&str>, Vec<&str>) {
    let (mut kubeconfig, mut rest) = (None, Vec::new());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.strip_prefix("--kubeconfig") {
            Some("") => kubeconfig = it.next().map(String::as_str),
            Some(v) if v.starts_with('=') => kubeconfig = Some(&v[1..]),
            _ => rest.push(a.as_str()),
        }
    }
    (kubeconfig, rest)
}

/// The installer's `cleanArch`: `multi (linux/amd64)` is `multi`, `linux/amd64` is `amd64`; a
/// placeholder left as built is `unknown`.
fn clean_arch(platform: Option<&str>) -> String {
    match platform {
        None => "unknown".into(),
        Some(p) if p.starts_with("multi") => "multi".into(),
        Some(p) => p.replace("linux/", ""),
    }
}

/// `--dir D` or `--dir=D` (and the `--log-level` the pipeline may pass).
fn dir_arg(args: &[&str]) -> Result<PathBuf, String> {
    let mut dir = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match *a {
            "--dir" => dir = it.next().map(PathBuf::from),
            a if a.starts_with("--dir=") => dir = Some(PathBuf::from(&a[6..])),
            "--log-level" => {
                it.next();
            }
            a if a.starts_with("--log-level=") => {}
            other => return Err(format!("unknown flag {other}")),
        }
    }
    dir.ok_or_else(|| "agent create image needs --dir DIR".to_string())
}

/// `agent create image --dir D`.
fn create_image(dir: &Path, pinned: &Pinned, mut out: Outcome) -> Outcome {
    match build_image(dir, pinned, &mut out) {
        Ok(()) => out,
        Err(e) => out.fatal(format!("failed to fetch Agent Installer ISO: {e:#}")),
    }
}

fn build_image(dir: &Path, pinned: &Pinned, out: &mut Outcome) -> Result<()> {
    let install_config = dir.join("install-config.yaml");
    let agent_config = dir.join("agent-config.yaml");
    let read = |p: &Path| {
        fs_err::read_to_string(p).with_context(|| {
            format!(
                "{} is needed in {}",
                p.file_name().unwrap_or_default().to_string_lossy(),
                dir.display()
            )
        })
    };
    let (ic, ac) = (read(&install_config)?, read(&agent_config)?);
    let problems = bootstrap::installer::validate_files(
        Some((&install_config.display().to_string(), &ic)),
        Some((&agent_config.display().to_string(), &ac)),
    );
    if let Some(p) = problems.iter().find(|p| p.problem.is_error()) {
        bail!("invalid install configuration: {p}");
    }
    let agent: serde_json::Value =
        serde_saphyr::from_str(&ac).context("agent-config.yaml does not parse")?;
    let install: serde_json::Value =
        serde_saphyr::from_str(&ic).context("install-config.yaml does not parse")?;
    let rendezvous = agent["rendezvousIP"]
        .as_str()
        .context("agent-config.yaml has no rendezvousIP")?
        .to_string();
    let manifests = extra_manifests(dir)?;
    out.info(format!(
        "Configuration has {} master replicas and {} worker replicas",
        install["controlPlane"]["replicas"].as_u64().unwrap_or(0),
        install["compute"][0]["replicas"].as_u64().unwrap_or(0)
    ));
    for m in &manifests {
        out.info(format!("Adding extra manifest openshift/{m}"));
    }
    let base = base_iso(dir, &install, pinned, out)?;
    let lab = LabCluster::generate(&install)?;
    let iso = write_iso(
        dir,
        &install_config,
        &agent_config,
        &manifests,
        pinned,
        &lab,
        &base,
    )?;
    write_outputs(dir, &install, &rendezvous, &lab)?;
    // The installer consumes the assets it read.
    fs_err::remove_file(&install_config)?;
    fs_err::remove_file(&agent_config)?;
    let _ = fs_err::remove_dir_all(dir.join("openshift"));
    out.info(format!("Generated ISO at {}", iso.display()));
    Ok(())
}

/// The CoreOS base ISO the agent ISO is made from: where it came from and its sha256.
struct BaseIso {
    from: String,
    sha256: String,
}

/// The base ISO as the installer gets it (`pkg/asset/agent/image/baseiso.go`): from
/// `OPENSHIFT_INSTALL_OS_IMAGE_OVERRIDE` when set (the real installer downloads that URL; the
/// lab takes a local path or `file://` URL), else out of the release payload with `oc`
/// (`oc.go`: `oc adm release info --image-for=machine-os-images --insecure=true`, then `oc image
/// extract --path /coreos/coreos-x86_64.iso:CACHE --confirm`, both with the install-config's
/// pull secret as `--registry-config` and its `imageDigestSources` as an ICSP file) into
/// `$XDG_CACHE_HOME/agent/image_cache`. When that fails the real installer warns and downloads
/// the ISO named in its rhcos.json from the Internet, which an air-gapped site cannot reach:
/// the stand-in fails there with the installer's words.
fn base_iso(
    dir: &Path,
    install: &serde_json::Value,
    pinned: &Pinned,
    out: &mut Outcome,
) -> Result<BaseIso> {
    if let Some(over) = std::env::var_os("OPENSHIFT_INSTALL_OS_IMAGE_OVERRIDE") {
        out.warn("Found override for OS Image. Please be warned, this is not advised");
        let over = over.to_string_lossy().into_owned();
        let path = over.strip_prefix("file://").unwrap_or(&over).to_string();
        let bytes = fs_err::read(&path).context("failed to get base ISO image")?;
        return Ok(BaseIso {
            from: over,
            sha256: bootstrap::oci::digest::Digest::of(&bytes).hex().to_string(),
        });
    }
    out.info("Extracting base ISO from release payload");
    match extract_base_iso(dir, install, pinned) {
        Ok(found) => Ok(found),
        Err(e) => {
            out.warn(format!("{e:#}"));
            out.warn(
                "Failed to extract base ISO from release payload - check registry configuration",
            );
            out.info("Downloading base ISO");
            bail!("failed to get base ISO image: failed to download base ISO image https://rhcos.mirror.openshift.com/art/storage/prod/streams/4.18-9.4/builds/418.94.202501221327-0/x86_64/rhcos-418.94.202501221327-0-live.x86_64.iso: the lab is air-gapped, as a site is")
        }
    }
}

fn extract_base_iso(dir: &Path, install: &serde_json::Value, pinned: &Pinned) -> Result<BaseIso> {
    let release = pinned
        .release
        .as_deref()
        .context("the installer was not pinned to a release")?;
    let scratch = dir.join(".stand-in-oc");
    let _ = fs_err::remove_dir_all(&scratch);
    fs_err::create_dir_all(&scratch)?;
    let result = (|| -> Result<BaseIso> {
        let registry_config = scratch.join("registry-config");
        let secret = install["pullSecret"].as_str().unwrap_or_default();
        bootstrap::fs::write_atomic_mode(&registry_config, secret.as_bytes(), 0o600)?;
        let mut mirror_args = Vec::new();
        if let Some(icsp) = icsp_file(install) {
            let path = scratch.join("icsp-file");
            fs_err::write(&path, icsp)?;
            mirror_args.push(format!("--icsp-file={}", path.display()));
        }
        let oc = |args: Vec<String>| -> Result<String> {
            let mut all = args;
            all.push(format!("--registry-config={}", registry_config.display()));
            let done = std::process::Command::new("oc")
                .args(&all)
                .output()
                .context("command 'oc' is not available")?;
            if !done.status.success() {
                bail!(
                    "command 'oc {}' exited with non-zero exit code {}: {}",
                    all.join(" "),
                    done.status.code().unwrap_or(-1),
                    String::from_utf8_lossy(&done.stderr).trim()
                );
            }
            Ok(String::from_utf8_lossy(&done.stdout).trim().to_string())
        };
        let mut info = vec![
            "adm".to_string(),
            "release".into(),
            "info".into(),
            "--image-for=machine-os-images".into(),
            "--insecure=true".into(),
        ];
        info.extend(mirror_args.iter().cloned());
        info.push(release.to_string());
        let image = oc(info)?;
        let cache = cache_dir()?;
        fs_err::create_dir_all(&cache)?;
        let mut extract = vec![
            "image".to_string(),
            "extract".into(),
            "--path".into(),
            format!("/coreos/coreos-x86_64.iso:{}", cache.display()),
            "--confirm".into(),
        ];
        extract.extend(mirror_args.iter().cloned());
        extract.push(image.clone());
        oc(extract)?;
        let bytes = fs_err::read(cache.join("coreos-x86_64.iso"))?;
        Ok(BaseIso {
            from: image,
            sha256: bootstrap::oci::digest::Digest::of(&bytes).hex().to_string(),
        })
    })();
    let _ = fs_err::remove_dir_all(&scratch);
    result
}

/// The installer's image cache: `$XDG_CACHE_HOME/agent/image_cache` (`GetCacheDir`).
fn cache_dir() -> Result<PathBuf> {
    let base = match std::env::var_os("XDG_CACHE_HOME") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(
            std::env::var_os("HOME").context("neither XDG_CACHE_HOME nor HOME is set")?,
        )
        .join(".cache"),
    };
    Ok(base.join("agent").join("image_cache"))
}

/// The install-config's digest mirrors as the ImageContentSourcePolicy the installer hands
/// `oc` (`getIcspContents`: one entry per source and mirror); `None` without mirrors.
fn icsp_file(install: &serde_json::Value) -> Option<String> {
    let mut entries = String::new();
    for key in ["imageDigestSources", "imageContentSources"] {
        for e in install[key].as_array().into_iter().flatten() {
            let Some(source) = e["source"].as_str() else {
                continue;
            };
            for m in e["mirrors"].as_array().into_iter().flatten() {
                if let Some(m) = m.as_str() {
                    entries.push_str(&format!("  - mirrors:\n    - {m}\n    source: {source}\n"));
                }
            }
        }
    }
    (!entries.is_empty()).then(|| {
        format!("apiVersion: operator.openshift.io/v1alpha1\nkind: ImageContentSourcePolicy\nmetadata:\n  name: image-policy\nspec:\n  repositoryDigestMirrors:\n{entries}")
    })
}

/// `D/agent.x86_64.iso`: the two files, the manifests under `openshift/` and the release
/// pullspec, as an ISO 9660 image with Rock Ridge and Joliet names, made by xorriso.
fn write_iso(
    dir: &Path,
    install_config: &Path,
    agent_config: &Path,
    manifests: &[String],
    pinned: &Pinned,
    lab: &LabCluster,
    base: &BaseIso,
) -> Result<PathBuf> {
    let staging = dir.join(".stand-in-iso");
    let _ = fs_err::remove_dir_all(&staging);
    fs_err::create_dir_all(staging.join("openshift"))?;
    fs_err::copy(install_config, staging.join("install-config.yaml"))?;
    fs_err::copy(agent_config, staging.join("agent-config.yaml"))?;
    for m in manifests {
        fs_err::copy(
            dir.join("openshift").join(m),
            staging.join("openshift").join(m),
        )?;
    }
    fs_err::write(
        staging.join("release-image"),
        format!("{}\n", pinned.release.as_deref().unwrap_or_default()),
    )?;
    fs_err::write(
        staging.join("base-iso"),
        format!("{} sha256:{}\n", base.from, base.sha256),
    )?;
    lab.write_iso_files(&staging.join(LAB_ISO_DIR))?;
    let iso = dir.join("agent.x86_64.iso");
    xorriso_iso(&staging, &iso)?;
    Ok(iso)
}

/// Writes the folder `staging` as the ISO 9660 image `iso` (Rock Ridge and Joliet, volume
/// `agent-installer`) with xorriso, then removes `staging`.
pub(crate) fn xorriso_iso(staging: &Path, iso: &Path) -> Result<()> {
    let made = std::process::Command::new("xorriso")
        .args([
            "-as",
            "mkisofs",
            "-quiet",
            "-R",
            "-J",
            "-V",
            "agent-installer",
            "-o",
        ])
        .arg(iso)
        .arg(staging)
        .output()
        .context("running xorriso to write the ISO (install xorriso)")?;
    fs_err::remove_dir_all(staging)?;
    if !made.status.success() {
        bail!(
            "xorriso failed: {}",
            String::from_utf8_lossy(&made.stderr).trim()
        );
    }
    Ok(())
}

/// The `openshift/*.yaml|yml` files of `dir`, by name, sorted.
fn extra_manifests(dir: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    let Ok(entries) = fs_err::read_dir(dir.join("openshift")) else {
        return Ok(names);
    };
    for e in entries {
        let name = e?.file_name().to_string_lossy().into_owned();
        if name.ends_with(".yaml") || name.ends_with(".yml") {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

/// `rendezvousIP`, `auth/kubeconfig`, `auth/kubeadmin-password` and the state file.
fn write_outputs(
    dir: &Path,
    install: &serde_json::Value,
    rendezvous: &str,
    lab: &LabCluster,
) -> Result<()> {
    fs_err::write(dir.join("rendezvousIP"), format!("{rendezvous}\n"))?;
    fs_err::create_dir_all(dir.join("auth"))?;
    bootstrap::fs::write_atomic_mode(
        &dir.join("auth/kubeconfig"),
        lab.kubeconfig(install).as_bytes(),
        0o600,
    )?;
    bootstrap::fs::write_atomic_mode(
        &dir.join("auth/kubeadmin-password"),
        random_token(18)?.as_bytes(),
        0o600,
    )?;
    let state = serde_json::json!({
        "*gencrypto.AuthConfig": {
            "PublicKey": lab.watcher_public_key,
            "WatcherAuthToken": lab.watcher_token,
        },
        "*agent.rendezvousIP": rendezvous,
    });
    bootstrap::fs::write_atomic_mode(
        &dir.join(".openshift_install_state.json"),
        &serde_json::to_vec_pretty(&state)?,
        0o600,
    )?;
    Ok(())
}

/// The folder of the stand-in's ISO that carries what the lab's simulated nodes learn from it
/// (a real agent ISO carries the same facts in its ignition: the watcher's public key for
/// assisted-service, the API's serving certificate and the admin credentials).
pub const LAB_ISO_DIR: &str = "lab";
/// `lab/watcher-public-key`: the install's ES256 public key (SEC1, base64url), which the
/// rendezvous stand-in checks the watcher token against.
pub const LAB_WATCHER_KEY: &str = "watcher-public-key";
/// `lab/api.crt`: the cluster API's serving certificate (PEM), signed by the kubeconfig's CA.
pub const LAB_API_CERT: &str = "api.crt";
/// `lab/api.key`: its private key (PKCS#8 PEM).
pub const LAB_API_KEY: &str = "api.key";
/// `lab/admin-token.sha256`: the hex sha256 of the kubeconfig's admin token.
pub const LAB_ADMIN_TOKEN_SHA256: &str = "admin-token.sha256";

/// One lab install's credentials: the watcher token and its key, the cluster API's CA and
/// serving certificate, and the admin token, made fresh for each `agent create image`.
struct LabCluster {
    watcher_token: String,
    watcher_public_key: String,
    admin_token: String,
    ca_pem: String,
    api_cert_pem: String,
    api_key_pem: String,
}

impl LabCluster {
    fn generate(install: &serde_json::Value) -> Result<Self> {
        let (watcher_token, watcher_public_key) = watcher_token()?;
        let (name, domain) = cluster_name(install);
        let mut names = vec![
            format!("api.{name}.{domain}"),
            format!("api-int.{name}.{domain}"),
        ];
        names.extend(api_vips(install));
        let (ca_pem, api_cert_pem, api_key_pem) = api_certificates(&names)?;
        Ok(LabCluster {
            watcher_token,
            watcher_public_key,
            admin_token: random_token(32)?,
            ca_pem,
            api_cert_pem,
            api_key_pem,
        })
    }

    fn write_iso_files(&self, dir: &Path) -> Result<()> {
        fs_err::create_dir_all(dir)?;
        fs_err::write(dir.join(LAB_WATCHER_KEY), &self.watcher_public_key)?;
        fs_err::write(dir.join(LAB_API_CERT), &self.api_cert_pem)?;
        fs_err::write(dir.join(LAB_API_KEY), &self.api_key_pem)?;
        let sha = bootstrap::oci::digest::Digest::of(self.admin_token.as_bytes());
        fs_err::write(dir.join(LAB_ADMIN_TOKEN_SHA256), sha.hex())?;
        Ok(())
    }

    /// The admin kubeconfig: the server is the first API VIP (the lab has no DNS), the
    /// certificate is checked for `api.NAME.DOMAIN` (`tls-server-name`) against the CA.
    fn kubeconfig(&self, install: &serde_json::Value) -> String {
        let (name, domain) = cluster_name(install);
        let vip = api_vips(install)
            .into_iter()
            .next()
            .unwrap_or_else(|| format!("api.{name}.{domain}"));
        let host = if vip.contains(':') {
            format!("[{vip}]")
        } else {
            vip
        };
        let ca = base64::engine::general_purpose::STANDARD.encode(&self.ca_pem);
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: https://{host}:6443\n    tls-server-name: api.{name}.{domain}\n    certificate-authority-data: {ca}\ncontexts:\n- name: admin\n  context:\n    cluster: {name}\n    user: admin\ncurrent-context: admin\npreferences: {{}}\nusers:\n- name: admin\n  user:\n    token: {token}\n",
            token = self.admin_token
        )
    }
}

fn cluster_name(install: &serde_json::Value) -> (&str, &str) {
    (
        install["metadata"]["name"].as_str().unwrap_or("cluster"),
        install["baseDomain"].as_str().unwrap_or("example.com"),
    )
}

/// `platform.baremetal.apiVIPs` (or the older `apiVIP`).
fn api_vips(install: &serde_json::Value) -> Vec<String> {
    let bm = &install["platform"]["baremetal"];
    let mut vips: Vec<String> = bm["apiVIPs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    if let Some(v) = bm["apiVIP"].as_str() {
        vips.push(v.to_string());
    }
    vips
}

/// A CA and a serving certificate for `names` signed by it: (CA PEM, cert PEM, key PEM).
fn api_certificates(names: &[String]) -> Result<(String, String, String)> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose, PKCS_ECDSA_P256_SHA256,
    };
    let ca_key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.distinguished_name
        .push(DnType::CommonName, "kube-apiserver-lab-signer");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca, &ca_key);
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let mut leaf = CertificateParams::new(names.to_vec())?;
    leaf.distinguished_name.push(
        DnType::CommonName,
        names.first().cloned().unwrap_or_default(),
    );
    leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf.use_authority_key_identifier_extension = true;
    let cert = leaf.signed_by(&key, &issuer)?;
    Ok((ca_cert.pem(), cert.pem(), key.serialize_pem()))
}

fn random_token(bytes: usize) -> Result<String> {
    let mut buf = vec![0u8; bytes];
    aws_lc_rs::rand::fill(&mut buf).map_err(|_| anyhow::anyhow!("no randomness"))?;
    Ok(URL_SAFE_NO_PAD.encode(buf))
}

/// An ES256 JWT with `auth_scheme: watcherAuth`, signed by a fresh per-install key; the key's
/// public half (SEC1, base64url) so a rendezvous stand-in can check it.
fn watcher_token() -> Result<(String, String)> {
    use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
    let key = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING)
        .map_err(|_| anyhow::anyhow!("generating the install's key"))?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"ES256","typ":"JWT"}"#);
    let claims = URL_SAFE_NO_PAD.encode(
        serde_json::json!({"auth_scheme": "watcherAuth", "iat": now, "exp": now + 48 * 3600})
            .to_string(),
    );
    let input = format!("{header}.{claims}");
    let sig = key
        .sign(&aws_lc_rs::rand::SystemRandom::new(), input.as_bytes())
        .map_err(|_| anyhow::anyhow!("signing the watcher token"))?;
    Ok((
        format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref())),
        URL_SAFE_NO_PAD.encode(key.public_key().as_ref()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh installer script refuses to start; pinned by the extraction code with the
    /// markers oc fills in it, it reports the release, version and architecture it was pinned
    /// to. `oc` carries only the version placeholder (and oc's own `!` constants, untouched).
    #[test]
    fn a_stand_in_reads_the_release_it_was_pinned_to() {
        let s = script(
            Tool::OpenshiftBaremetalInstall,
            Path::new("/opt/bootstrap-lab"),
            "4.18.3",
        );
        assert!(pinned(Tool::OpenshiftBaremetalInstall, &s).is_err());
        let release = "site:5000/ocp/openshift/release-images@sha256:ab";
        let reps = [
            pin::Replacement::release_image(release).unwrap(),
            pin::Replacement::release_version("4.18.3").unwrap(),
            pin::Replacement::new(pin::Marker::ReleaseArchitecture, "linux/amd64").unwrap(),
        ];
        let mut out = Vec::new();
        let found = pin::copy_and_replace(&mut s.as_slice(), &mut out, &reps).unwrap();
        assert!(found.iter().all(Option::is_some));
        assert_eq!(
            pinned(Tool::OpenshiftBaremetalInstall, &out).unwrap(),
            Pinned {
                release: Some(release.into()),
                version: Some("4.18.3".into()),
                architecture: Some("linux/amd64".into()),
            }
        );
        let text = String::from_utf8_lossy(&s);
        assert!(text.starts_with("#!/bin/sh\n"));
        assert!(text.contains(
            "exec '/opt/bootstrap-lab' stand-in openshift-baremetal-install --self \"$0\" -- \"$@\""
        ));

        let oc = script(Tool::Oc, Path::new("/opt/bootstrap-lab"), "4.18");
        assert_eq!(
            pin::unpinned_marker(&oc),
            None,
            "oc has no image placeholder"
        );
        let mut out = Vec::new();
        let found = pin::copy_and_replace(&mut oc.as_slice(), &mut out, &reps).unwrap();
        assert_eq!(
            (found[0], found[1].is_some(), found[2]),
            (None, true, None),
            "only the version placeholder is in oc"
        );
        assert_eq!(
            pinned(Tool::Oc, &out).unwrap(),
            Pinned {
                release: None,
                version: Some("4.18.3".into()),
                architecture: None,
            }
        );
    }
}
