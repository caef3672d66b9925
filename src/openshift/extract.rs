//! `oc adm release extract --command`, done by bootstrap against the site registry: the
//! installer (`openshift-install`, or `openshift-baremetal-install`) or `oc`, taken out of the
//! release payload that the mirror placed there, by digest, and pinned to that release.
//!
//! The release image (by digest; an index is narrowed to `linux/ARCH`) names its components in
//! `release-manifests/image-references`. The mirror puts them, by digest, in the
//! `openshift/release` repository beside the release's `openshift/release-images` (oc-mirror's
//! placement), which is where they are read from. The component's layers are read top layer first
//! until one holds the binary (see [`crate::oci::layerfile`]); each layer is streamed from the
//! registry, hashed as it passes, and must match its digest before the binary is kept. The binary
//! is written under a temporary name in the target directory, its release placeholders
//! overwritten on the way (see [`super::pin`]), then made executable and renamed into place: a
//! failed or killed extraction leaves no binary under the final name. A binary without the release
//! image placeholder is refused: it would install the release compiled into it.

use super::pin::{self, Replacement};
use super::release::{self, COMPONENTS_REPO, IMAGE_REFERENCES, RELEASE_IMAGES_REPO};
use crate::oci::blob_read::{read_image_dir, BlobRead};
use crate::oci::digest::Digest;
use crate::oci::digest::StreamHasher;
use crate::oci::layerfile::{self, Found};
use crate::oci::manifest::{select_entries, OciImageManifest, Parsed};
use crate::oci::reference::ImageRef;
use crate::oci::registry::Registries;
use anyhow::{bail, Context, Result};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A binary a release carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tool {
    /// `openshift-install`, from the `installer` image.
    OpenshiftInstall,
    /// `openshift-baremetal-install`, from the `baremetal-installer` image.
    OpenshiftBaremetalInstall,
    /// `oc`, from the `cli` image.
    Oc,
}

impl Tool {
    /// Every tool, as `--command` names them.
    pub const ALL: [Tool; 3] = [
        Tool::OpenshiftInstall,
        Tool::OpenshiftBaremetalInstall,
        Tool::Oc,
    ];

    /// The name `--command` takes and the file written.
    pub fn name(self) -> &'static str {
        match self {
            Tool::OpenshiftInstall => "openshift-install",
            Tool::OpenshiftBaremetalInstall => "openshift-baremetal-install",
            Tool::Oc => "oc",
        }
    }

    /// The release component (image-references tag) that carries it.
    pub fn component(self) -> &'static str {
        match self {
            Tool::OpenshiftInstall => "installer",
            Tool::OpenshiftBaremetalInstall => "baremetal-installer",
            Tool::Oc => "cli",
        }
    }

    /// Its path inside the component image (`oc adm release extract`'s mapping for linux).
    pub fn path_in_image(self) -> &'static str {
        match self {
            Tool::OpenshiftInstall => "usr/bin/openshift-install",
            Tool::OpenshiftBaremetalInstall => "usr/bin/openshift-install",
            Tool::Oc => "usr/bin/oc",
        }
    }
}

impl std::str::FromStr for Tool {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Tool::ALL
            .into_iter()
            .find(|t| {
                t.name() == s
                    || (s == "openshift-install-baremetal" && *t == Tool::OpenshiftBaremetalInstall)
            })
            .ok_or_else(|| {
                let names: Vec<&str> = Tool::ALL.iter().map(|t| t.name()).collect();
                format!("unknown command '{s}': one of {}", names.join(", "))
            })
    }
}

/// What to extract, from where, to where.
#[derive(Clone, Debug)]
pub struct ExtractRequest {
    /// The release image in the site registry, by digest.
    pub release: ImageRef,
    /// The binary.
    pub tool: Tool,
    /// The directory the binary is written to (created when missing).
    pub to: PathBuf,
    /// The architecture (`amd64`) an index is narrowed to.
    pub arch: String,
}

/// A binary extracted and pinned.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Extracted {
    /// The binary.
    pub tool: Tool,
    /// Where it was written.
    pub path: PathBuf,
    /// Its sha256 (as written, pinned).
    pub sha256: String,
    /// Its size in bytes.
    pub size: u64,
    /// The release pullspec written into it.
    pub release: String,
    /// The release version (its `io.openshift.release` label), written into the version
    /// placeholder when the binary has one.
    pub version: Option<String>,
    /// The component image it came from, by digest.
    pub component: String,
    /// The layer that held it.
    pub layer: String,
    /// Whether the binary had a version placeholder (filled).
    pub version_pinned: bool,
}

impl std::fmt::Display for Extracted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{} {} ({} bytes, sha256 {})",
            self.tool.name(),
            self.path.display(),
            self.size,
            self.sha256
        )?;
        writeln!(f, "  pinned to {}", self.release)?;
        if let Some(v) = &self.version {
            writeln!(f, "  release version {v}")?;
        }
        writeln!(f, "  from {} (layer {})", self.component, self.layer)
    }
}

/// Extracts `request.tool` from the release and pins it; see the module doc.
pub async fn extract(regs: &Arc<Registries>, request: &ExtractRequest) -> Result<Extracted> {
    let release_ref = &request.release;
    let Some(release_digest) = release_ref.digest.clone() else {
        bail!("{release_ref}: name the release by digest (REGISTRY/REPO@sha256:...), as the mirror record gives it: a tag can move, and the binary is pinned to exactly one release");
    };
    let pullspec = format!(
        "{}/{}@{release_digest}",
        release_ref.registry, release_ref.repository
    );
    let (release_manifest, _) = image_manifest(regs, release_ref, &request.arch).await?;
    let config = small_blob(regs, release_ref, &release_manifest.config.digest).await?;
    let version = release::version_label(&config);
    let files = read_image_dir(regs, release_ref, &release_manifest, "/release-manifests").await?;
    let refs = files
        .get("image-references")
        .with_context(|| format!("{pullspec} has no {IMAGE_REFERENCES}: is it a release image?"))?;
    let components = release::components(refs, &pullspec)?;
    let wanted = request.tool.component();
    let component = components
        .iter()
        .find(|c| c.name == wanted)
        .with_context(|| {
            format!("{pullspec}: its {IMAGE_REFERENCES} lists no '{wanted}' component, which carries {}", request.tool.name())
        })?;
    let located = component_in_site(release_ref, component.image.digest.as_ref())?;
    let (manifest, _) = image_manifest(regs, &located, &request.arch)
        .await
        .with_context(|| {
            format!(
                "the '{wanted}' component {} of {pullspec}, mirrored as {located}",
                component.image
            )
        })?;
    let mut replacements = vec![Replacement::release_image(&pullspec)?];
    if let Some(v) = &version {
        replacements.push(Replacement::release_version(v)?);
    }
    fs_err::create_dir_all(&request.to)
        .with_context(|| format!("creating the target directory {}", request.to.display()))?;
    let target = request.to.join(request.tool.name());
    let temp = request.to.join(format!(
        ".{}.partial-{}",
        request.tool.name(),
        std::process::id()
    ));
    let result = copy_out(regs, &located, &manifest, request.tool, &temp, replacements).await;
    let written = match result {
        Ok(w) => w,
        Err(e) => {
            let _ = fs_err::remove_file(&temp);
            return Err(e);
        }
    };
    if written.offsets.first().copied().flatten().is_none() {
        let _ = fs_err::remove_file(&temp);
        bail!(
            "{} in {located} carries no release image placeholder (\\0_RELEASE_IMAGE_LOCATION_\\0 and 300 X): refusing it, since it would install the release compiled into it rather than {pullspec}",
            request.tool.path_in_image()
        );
    }
    crate::fs::publish(&temp, &target, 0o755)
        .with_context(|| format!("writing {}", target.display()))?;
    Ok(Extracted {
        tool: request.tool,
        path: target,
        sha256: written.sha256,
        size: written.size,
        release: pullspec,
        version,
        component: located.to_string(),
        layer: written.layer,
        version_pinned: written.offsets.get(1).copied().flatten().is_some(),
    })
}

/// Where the mirror put a release component: by digest, in `openshift/release` beside the
/// release's `openshift/release-images`.
fn component_in_site(release: &ImageRef, digest: Option<&Digest>) -> Result<ImageRef> {
    let Some(prefix) = release.repository.strip_suffix(RELEASE_IMAGES_REPO) else {
        bail!(
            "{release}: the release is not in a '{RELEASE_IMAGES_REPO}' repository, so where its components were mirrored is unknown; pass the release as the mirror placed it (its record names it)"
        );
    };
    let digest = digest.context("a release component without a digest")?;
    Ok(ImageRef {
        registry: release.registry.clone(),
        repository: format!("{prefix}{COMPONENTS_REPO}"),
        tag: None,
        digest: Some(digest.clone()),
    })
}

/// The single-platform manifest of `image` for `linux/arch` (the image itself, or the index
/// entry for that platform).
async fn image_manifest(
    regs: &Arc<Registries>,
    image: &ImageRef,
    arch: &str,
) -> Result<(Box<OciImageManifest>, Digest)> {
    let client = regs.client(&image.registry)?;
    let raw = client
        .get_manifest(&image.repository, &image.reference())
        .await
        .with_context(|| format!("reading the manifest of {image}"))?;
    match raw.parse().with_context(|| format!("{image}"))? {
        Parsed::Image(m) => Ok((m, raw.digest)),
        Parsed::Index(index) => {
            let archs = [arch.to_string()];
            let entry = select_entries(&index, &archs)
                .into_iter()
                .find(|e| e.platform.is_some())
                .with_context(|| format!("{image} has no linux/{arch} image"))?;
            let child = client
                .get_manifest(&image.repository, &entry.digest)
                .await
                .with_context(|| format!("reading the linux/{arch} manifest of {image}"))?;
            match child.parse().with_context(|| format!("{image}"))? {
                Parsed::Image(m) => Ok((m, child.digest)),
                Parsed::Index(_) => bail!("{image}: nested indexes are not supported"),
            }
        }
    }
}

/// A small blob (a config) whole, verified.
async fn small_blob(regs: &Arc<Registries>, image: &ImageRef, digest: &str) -> Result<Vec<u8>> {
    let digest: Digest = digest.parse()?;
    let client = regs.client(&image.registry)?;
    let resp = client.get_blob(&image.repository, &digest, 0).await?;
    let bytes = crate::oci::stream::read_body(resp, crate::oci::stream::CONFIG_BODY_MAX)
        .await
        .with_context(|| format!("reading config {digest} of {image}"))?;
    if Digest::of(&bytes) != digest {
        bail!("config {digest} of {image} does not match its digest");
    }
    Ok(bytes.to_vec())
}

/// What [`copy_out`] wrote.
struct Written {
    sha256: String,
    size: u64,
    layer: String,
    offsets: Vec<Option<u64>>,
}

/// Finds the tool in the component's layers (top first) and writes it, pinned, to `temp`.
async fn copy_out(
    regs: &Arc<Registries>,
    image: &ImageRef,
    manifest: &OciImageManifest,
    tool: Tool,
    temp: &Path,
    replacements: Vec<Replacement>,
) -> Result<Written> {
    let path = tool.path_in_image();
    for (index, layer) in manifest.layers.iter().enumerate().rev() {
        let digest: Digest = layer.digest.parse()?;
        let mut reader = BlobRead::new(
            regs.clone(),
            image.clone(),
            digest.clone(),
            layer.size.max(0) as u64,
        );
        let temp = temp.to_path_buf();
        let replacements = replacements.clone();
        let what = format!("{image}: layer {digest}");
        let outcome = tokio::task::spawn_blocking(move || -> Result<(Found, Option<Written>)> {
            let mut written = None;
            let found = layerfile::find_in_layer(index, &mut reader, path, &mut |file| {
                let w = write_pinned(file, &temp, &replacements)?;
                let size = w.1;
                written = Some(w);
                Ok(size)
            })
            .map_err(|e| anyhow::anyhow!("{what}: {e}"))?;
            // The layer is trusted only once every byte of it matched its digest.
            reader.drain().with_context(|| what.clone())?;
            Ok((
                found,
                written.map(|(sha256, size, offsets)| Written {
                    sha256,
                    size,
                    layer: String::new(),
                    offsets,
                }),
            ))
        })
        .await
        .context("the layer reader task failed")??;
        match outcome {
            (Found::File(_), Some(mut w)) => {
                w.layer = layer.digest.clone();
                return Ok(w);
            }
            (Found::Removed(by), _) => {
                bail!(
                    "{image}: {path} is not in the image (layer {} removes it: {by})",
                    layer.digest
                )
            }
            _ => continue,
        }
    }
    bail!(
        "{image} has no {path}: is it the '{}' component?",
        tool.component()
    )
}

/// Writes `file` to `temp` with the placeholders replaced; its sha256, size and where each
/// replacement was made.
fn write_pinned(
    file: &mut dyn Read,
    temp: &Path,
    replacements: &[Replacement],
) -> io::Result<(String, u64, Vec<Option<u64>>)> {
    let out = fs_err::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(temp)?;
    let mut w = HashingWriter {
        inner: io::BufWriter::with_capacity(1 << 20, out),
        hasher: StreamHasher::new(),
    };
    let offsets = pin::copy_and_replace(file, &mut w, replacements)?;
    w.inner.flush()?;
    let HashingWriter { inner, hasher } = w;
    inner.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    let (digest, len) = hasher.finish();
    Ok((digest.hex().to_string(), len, offsets))
}

/// Hashes what passes through it.
struct HashingWriter<W: Write> {
    inner: W,
    hasher: StreamHasher,
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}
