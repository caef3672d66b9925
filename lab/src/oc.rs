//! The lab `oc` stand-in's two registry calls: the ones `openshift-install agent create image`
//! makes to take the CoreOS base ISO out of the release (openshift/installer
//! `pkg/asset/agent/image/oc.go`, `GetBaseIso`):
//!
//! - `oc adm release info --image-for=NAME --insecure=true [--icsp-file=F] RELEASE
//!   --registry-config=F` prints the pullspec `release-manifests/image-references` gives the
//!   component NAME (as the payload names it, at its source); `--insecure=true` lets oc skip
//!   TLS verification for the release (openshift/oc `pkg/cli/admin/release/info.go`).
//! - `oc image extract --path SRC:DIR --confirm [--icsp-file=F] IMAGE --registry-config=F`
//!   writes the file SRC of IMAGE into DIR (openshift/oc `pkg/cli/image/extract`), the image
//!   looked for at the mirrors the ImageContentSourcePolicy file gives for it. Without
//!   `--insecure` the registry's certificate is verified against the system's roots, which a
//!   Go program on Linux reads from `SSL_CERT_FILE` when it is set (Go `crypto/x509`
//!   `root_unix.go`); the stand-in's TLS stack (rustls-native-certs) honours the same variable.
//!   This is where an installer run without the site registry's CA fails, as the real one does.
//!
//! The pull secret is the `--registry-config` file (the installer writes the install-config's
//! `pullSecret` there). Everything else oc can do is refused by name.

use anyhow::{bail, Context, Result};
use bootstrap::oci::auth::AuthFile;
use bootstrap::oci::blob_read::read_image_dir;
use bootstrap::oci::manifest::OciImageManifest;
use bootstrap::oci::reference::ImageRef;
use bootstrap::oci::registry::{Registries, RegistryOptions};
use bootstrap::openshift::extract::platform_manifest;
use bootstrap::openshift::mirrors::DigestMirrors;
use bootstrap::openshift::release;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The arguments of one call, oc style: `--flag=value` or `--flag value`, and positionals.
#[derive(Debug, Default)]
struct Args {
    flags: Vec<(String, String)>,
    positional: Vec<String>,
}

impl Args {
    fn parse(args: &[&str], known: &[&str], switches: &[&str]) -> Result<Args> {
        let mut out = Args::default();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let Some(flag) = a.strip_prefix("--") else {
                out.positional.push(a.to_string());
                continue;
            };
            let (name, value) = match flag.split_once('=') {
                Some((n, v)) => (n.to_string(), v.to_string()),
                None if switches.contains(&flag) => (flag.to_string(), "true".to_string()),
                None => (
                    flag.to_string(),
                    it.next()
                        .with_context(|| format!("flag needs an argument: --{flag}"))?
                        .to_string(),
                ),
            };
            if !known.contains(&name.as_str()) && !switches.contains(&name.as_str()) {
                bail!("unknown flag: --{name}");
            }
            out.flags.push((name, value));
        }
        Ok(out)
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.flags
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// `oc adm release info --image-for=NAME ...`: the component's pullspec.
pub fn release_info(args: &[&str]) -> Result<String> {
    let a = Args::parse(
        args,
        &["image-for", "insecure", "icsp-file", "registry-config"],
        &[],
    )?;
    let name = a
        .get("image-for")
        .context("the lab's oc does only `adm release info --image-for=NAME`")?
        .to_string();
    let [release] = a.positional.as_slice() else {
        bail!("adm release info takes one release image");
    };
    let release = parse_ref(release)?;
    let insecure = a.get("insecure") == Some("true");
    let regs = registries(
        a.get("registry-config"),
        insecure.then(|| release.registry.clone()),
    )?;
    let mirrors = icsp(a.get("icsp-file"))?;
    block_on(async move {
        let (found, manifest) = locate(&regs, &mirrors, &release).await?;
        let files = read_image_dir(&regs, &found, &manifest, "/release-manifests").await?;
        let refs = files
            .get("image-references")
            .with_context(|| format!("{found} has no {}", release::IMAGE_REFERENCES))?;
        let components = release::components(refs, &found.to_string())?;
        let c = components
            .iter()
            .find(|c| c.name == name)
            .with_context(|| {
                format!("no image tag \"{name}\" exists in the release image {release}")
            })?;
        Ok(format!("{}\n", c.image))
    })
}

/// `oc image extract --path SRC:DIR --confirm ... IMAGE`: SRC written into DIR.
pub fn image_extract(args: &[&str]) -> Result<()> {
    let a = Args::parse(
        args,
        &["path", "icsp-file", "registry-config"],
        &["confirm"],
    )?;
    let path = a
        .get("path")
        .context("the lab's oc does only `image extract --path SRC:DIR`")?;
    let (src, dir) = path.rsplit_once(':').context("--path must be SRC:DIR")?;
    let [image] = a.positional.as_slice() else {
        bail!("image extract takes one image");
    };
    let image = parse_ref(image)?;
    let regs = registries(a.get("registry-config"), None)?;
    let mirrors = icsp(a.get("icsp-file"))?;
    let (parent, file) = src
        .rsplit_once('/')
        .context("--path SRC must be an absolute file path")?;
    let (parent, file) = (
        if parent.is_empty() { "/" } else { parent }.to_string(),
        file.to_string(),
    );
    let dir = PathBuf::from(dir);
    let wanted = src.to_string();
    let name = file.clone();
    let bytes = block_on(async move {
        let (found, manifest) = locate(&regs, &mirrors, &image).await?;
        let mut files = read_image_dir(&regs, &found, &manifest, &parent).await?;
        files
            .remove(&name)
            .with_context(|| format!("{found}: no file {wanted} in the image"))
    })?;
    fs_err::create_dir_all(&dir)?;
    bootstrap::fs::write_atomic(&dir.join(Path::new(&file)), &bytes)?;
    Ok(())
}

fn parse_ref(s: &str) -> Result<ImageRef> {
    ImageRef::parse(s.strip_prefix("docker://").unwrap_or(s))
        .map_err(|e| anyhow::anyhow!("invalid image reference {s}: {e}"))
}

fn icsp(path: Option<&str>) -> Result<DigestMirrors> {
    match path {
        None => Ok(DigestMirrors::default()),
        Some(p) => {
            let text = fs_err::read_to_string(p)?;
            DigestMirrors::from_icsp_yaml(&text).with_context(|| p.to_string())
        }
    }
}

/// The registries as oc reaches them: the pull secret, the system's roots (`SSL_CERT_FILE`
/// honoured), TLS verification skipped only for `insecure`.
fn registries(registry_config: Option<&str>, insecure: Option<String>) -> Result<Arc<Registries>> {
    let authfile = match registry_config {
        Some(p) => AuthFile::parse(&fs_err::read_to_string(p)?, Path::new(p))?,
        None => AuthFile::default(),
    };
    Ok(Arc::new(Registries::new(RegistryOptions {
        authfile,
        insecure_tls: insecure.into_iter().collect(),
        ..Default::default()
    })?))
}

/// The image at the first of its mirrors that has it (the image itself when none maps it),
/// narrowed to linux/amd64.
async fn locate(
    regs: &Arc<Registries>,
    mirrors: &DigestMirrors,
    image: &ImageRef,
) -> Result<(ImageRef, Box<OciImageManifest>)> {
    let mut errors = Vec::new();
    for candidate in mirrors.candidates(image) {
        match platform_manifest(regs, &candidate, "amd64").await {
            Ok(found) => return Ok((candidate, found.manifest)),
            Err(e) => errors.push(format!("{candidate}: {e:#}")),
        }
    }
    bail!("unable to read image {image}: {}", errors.join("; "))
}

/// Runs `f` on a runtime of its own (the stand-in may be called from inside one).
pub(crate) fn block_on<T: Send>(
    f: impl std::future::Future<Output = Result<T>> + Send,
) -> Result<T> {
    std::thread::scope(|s| {
        s.spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?
                .block_on(f)
        })
        .join()
        .map_err(|_| anyhow::anyhow!("the registry thread panicked"))?
    })
}
