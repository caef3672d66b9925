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
    /// `openshift-install`.
    OpenshiftInstall,
    /// `oc`.
    Oc,
}

impl Tool {
    /// The stand-in's name (`bootstrap-lab stand-in NAME`).
    pub fn name(self) -> &'static str {
        match self {
            Tool::OpenshiftInstall => "openshift-install",
            Tool::Oc => "oc",
        }
    }
}

impl std::str::FromStr for Tool {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "openshift-install" => Ok(Tool::OpenshiftInstall),
            "oc" => Ok(Tool::Oc),
            _ => Err(format!("no lab stand-in '{s}': openshift-install or oc")),
        }
    }
}

/// The script the lab image carries for `tool`: it runs `bootstrap-lab` (this very binary, by its
/// absolute path, so the images are tied to the machine that seeded them) and ends with the
/// placeholders. `build` is the release build (`4.18.3`) it reports.
pub fn script(tool: Tool, lab: &Path, build: &str) -> Vec<u8> {
    let quoted = lab.display().to_string().replace('\'', r"'\''");
    let mut s = format!(
        "#!/bin/sh\n# bootstrap-lab stand-in for {name} {build} (docs/lab.md): it boots nothing.\nexec '{quoted}' stand-in {name} --self \"$0\" -- \"$@\"\n",
        name = tool.name()
    )
    .into_bytes();
    s.extend_from_slice(PLACEHOLDERS_LINE);
    s.extend(pin::release_image_placeholder());
    s.extend(pin::release_version_placeholder());
    s.push(b'\n');
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

    fn fatal(mut self, msg: impl AsRef<str>) -> Self {
        self.log.push(format!("level=fatal msg={:?}", msg.as_ref()));
        self.status = 1;
        self
    }
}

/// The release a stand-in was pinned to: its pullspec and version, read from its own file.
#[derive(Debug, PartialEq, Eq)]
pub struct Pinned {
    /// The release pullspec by digest.
    pub release: String,
    /// The release version, when the version placeholder was filled.
    pub version: Option<String>,
}

/// Reads the pinned release out of a stand-in script; an error when the placeholder is still
/// there (never extracted from a release).
pub fn pinned(script: &[u8]) -> Result<Pinned> {
    if pin::unpinned_marker(script).is_some() {
        bail!("the release image placeholder was not rewritten: this binary must be extracted from a release (oc adm release extract --command, or bootstrap release extract)");
    }
    let start = script
        .windows(PLACEHOLDERS_LINE.len())
        .position(|w| w == PLACEHOLDERS_LINE)
        .context("not a lab stand-in script: its placeholder line is missing")?
        + PLACEHOLDERS_LINE.len();
    let image_len = pin::release_image_placeholder().len();
    let region = script
        .get(start..start + image_len)
        .context("a lab stand-in script cut short")?;
    let release = c_string(region);
    let version = script
        .get(start + image_len..)
        .map(c_string)
        .filter(|v| !v.starts_with('\0') && !v.contains("_RELEASE_VERSION_LOCATION_"));
    Ok(Pinned {
        release,
        version: version.filter(|v| !v.is_empty()),
    })
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
    let pinned = match pinned(&script) {
        Ok(p) => p,
        Err(e) => return out.fatal(format!("{e:#}")),
    };
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match (tool, args.as_slice()) {
        (Tool::OpenshiftInstall, ["version"]) => Outcome {
            stdout: format!(
                "openshift-install {}\nbuilt from commit lab-stand-in\nrelease image {}\nrelease architecture amd64\n",
                pinned.version.as_deref().unwrap_or("unknown"),
                pinned.release
            ),
            ..out
        },
        (Tool::OpenshiftInstall, ["agent", "create", "image", rest @ ..]) => {
            match dir_arg(rest) {
                Ok(dir) => create_image(&dir, &pinned, out),
                Err(e) => out.fatal(e),
            }
        }
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
    let lab = LabCluster::generate(&install)?;
    let iso = write_iso(
        dir,
        &install_config,
        &agent_config,
        &manifests,
        pinned,
        &lab,
    )?;
    write_outputs(dir, &install, &rendezvous, &lab)?;
    // The installer consumes the assets it read.
    fs_err::remove_file(&install_config)?;
    fs_err::remove_file(&agent_config)?;
    let _ = fs_err::remove_dir_all(dir.join("openshift"));
    out.info(format!("Generated ISO at {}", iso.display()));
    Ok(())
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
        format!("{}\n", pinned.release),
    )?;
    lab.write_iso_files(&staging.join(LAB_ISO_DIR))?;
    let iso = dir.join("agent.x86_64.iso");
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
        .arg(&iso)
        .arg(&staging)
        .output()
        .context("running xorriso to write the ISO (install xorriso)")?;
    fs_err::remove_dir_all(&staging)?;
    if !made.status.success() {
        bail!(
            "xorriso failed: {}",
            String::from_utf8_lossy(&made.stderr).trim()
        );
    }
    Ok(iso)
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

    /// A fresh script refuses to start; pinned by the extraction code, it reports the release
    /// and version it was pinned to.
    #[test]
    fn a_stand_in_reads_the_release_it_was_pinned_to() {
        let s = script(
            Tool::OpenshiftInstall,
            Path::new("/opt/bootstrap-lab"),
            "4.18.3",
        );
        assert!(pinned(&s).is_err());
        let reps = [
            pin::Replacement::release_image("site:5000/ocp/openshift/release-images@sha256:ab")
                .unwrap(),
            pin::Replacement::release_version("4.18.3").unwrap(),
        ];
        let mut out = Vec::new();
        let found = pin::copy_and_replace(&mut s.as_slice(), &mut out, &reps).unwrap();
        assert!(found.iter().all(Option::is_some));
        assert_eq!(
            pinned(&out).unwrap(),
            Pinned {
                release: "site:5000/ocp/openshift/release-images@sha256:ab".into(),
                version: Some("4.18.3".into()),
            }
        );
        let text = String::from_utf8_lossy(&s);
        assert!(text.starts_with("#!/bin/sh\n"));
        assert!(text.contains(
            "exec '/opt/bootstrap-lab' stand-in openshift-install --self \"$0\" -- \"$@\""
        ));
    }
}
