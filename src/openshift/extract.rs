//! `oc adm release extract --command`, done by bootstrap against the site registry: the
//! installer (`openshift-install`, or `openshift-baremetal-install`) or `oc`, taken out of the
//! release payload that the mirror placed there, by digest, and pinned to that release
//! (openshift/oc `pkg/cli/admin/release/extract_tools.go`).
//!
//! The release image (by digest; an index is narrowed to `linux/ARCH`) names its components in
//! `release-manifests/image-references`, at their source. Each is found where the digest mirror
//! set maps it ([`super::mirrors`]: the mirror record's, or an ImageDigestMirrorSet file), as oc
//! finds it with `--idms-file`, whatever layout the mirroring tool chose. The component's
//! layers are read top layer first until one holds the binary (see [`crate::oci::layerfile`]);
//! each layer is streamed from the registry, hashed as it passes, and must match its digest
//! before the binary is kept. The binary is written under a temporary name in the target
//! directory, the release placeholders oc fills for that binary overwritten on the way
//! ([`Tool::markers`], [`super::pin`]), then made executable and renamed into place: a failed
//! or killed extraction leaves no binary under the final name. An installer without the release
//! image placeholder is refused: it would install the release compiled into it. A placeholder
//! that is not there otherwise is recorded as not rewritten, as oc warns and goes on.

use super::mirrors::DigestMirrors;
use super::pin::{self, Marker, Replacement};
use super::release::{self, IMAGE_REFERENCES};
use crate::oci::blob_read::{read_image_dir, BlobRead};
use crate::oci::digest::Digest;
use crate::oci::digest::StreamHasher;
use crate::oci::layerfile;
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

    /// The placeholders oc fills in it (`extract_tools.go`'s `InjectRelease*` for the linux
    /// target): `oc` the version only, the installers the image, version and architecture.
    pub fn markers(self) -> &'static [Marker] {
        match self {
            Tool::Oc => &[Marker::ReleaseVersion],
            Tool::OpenshiftInstall | Tool::OpenshiftBaremetalInstall => &[
                Marker::ReleaseImage,
                Marker::ReleaseVersion,
                Marker::ReleaseArchitecture,
            ],
        }
    }

    /// Whether a binary without the release image placeholder must be refused: an installer
    /// without one installs the release compiled into it.
    pub fn needs_release_image(self) -> bool {
        self.markers().contains(&Marker::ReleaseImage)
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
    /// Where the release's components were mirrored (empty: where image-references names
    /// them).
    pub mirrors: DigestMirrors,
}

/// A placeholder of the binary and what became of it.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PinnedMarker {
    /// Which.
    pub marker: Marker,
    /// The value written.
    pub value: String,
    /// Where in the binary it was written; absent when the binary has no such placeholder.
    pub offset: Option<u64>,
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
    /// The release, by digest, it was taken from (and, for an installer, pinned to).
    pub release: String,
    /// The release version (oc's preferred name: `release-metadata`'s version).
    pub version: Option<String>,
    /// The component image it came from, by digest, where it was found.
    pub component: String,
    /// The layer that held it.
    pub layer: String,
    /// Each placeholder oc fills in this binary, and whether it was there to fill.
    pub markers: Vec<PinnedMarker>,
}

impl Extracted {
    /// The placeholders that were rewritten.
    pub fn rewritten(&self) -> impl Iterator<Item = &PinnedMarker> {
        self.markers.iter().filter(|m| m.offset.is_some())
    }

    /// The placeholders oc fills in this binary that it does not have.
    pub fn missing(&self) -> impl Iterator<Item = &PinnedMarker> {
        self.markers.iter().filter(|m| m.offset.is_none())
    }
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
        writeln!(f, "  from release {}", self.release)?;
        for m in &self.markers {
            match m.offset {
                Some(at) => writeln!(f, "  {}: {} (at byte {at})", m.marker.name(), m.value)?,
                None => writeln!(f, "  {}: no placeholder, not written", m.marker.name())?,
            }
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
    let release = platform_manifest(regs, release_ref, &request.arch).await?;
    let config = small_blob(regs, release_ref, &release.manifest.config.digest).await?;
    let files = read_image_dir(regs, release_ref, &release.manifest, "/release-manifests").await?;
    let refs = files
        .get("image-references")
        .with_context(|| format!("{pullspec} has no {IMAGE_REFERENCES}: is it a release image?"))?;
    let version = release::preferred_name(files.get("release-metadata").map(Vec::as_slice), refs);
    let components = release::components(refs, &pullspec)?;
    let wanted = request.tool.component();
    let component = components
        .iter()
        .find(|c| c.name == wanted)
        .with_context(|| {
            format!("{pullspec}: its {IMAGE_REFERENCES} lists no '{wanted}' component, which carries {}", request.tool.name())
        })?;
    let (located, manifest) = locate(regs, &request.mirrors, &component.image, &request.arch)
        .await
        .with_context(|| {
            format!(
                "the '{wanted}' component of {pullspec} ({})",
                component.image
            )
        })?;
    let values = [
        (Marker::ReleaseImage, Some(pullspec.clone())),
        (Marker::ReleaseVersion, version.clone()),
        (
            Marker::ReleaseArchitecture,
            Some(platform(&config, release.from_index)),
        ),
    ];
    let mut replacements = Vec::new();
    for marker in request.tool.markers() {
        if let Some((_, Some(value))) = values.iter().find(|(m, _)| m == marker) {
            replacements.push(Replacement::new(*marker, value)?);
        }
    }
    fs_err::create_dir_all(&request.to)
        .with_context(|| format!("creating the target directory {}", request.to.display()))?;
    let target = request.to.join(request.tool.name());
    let temp = request.to.join(format!(
        ".{}.partial-{}",
        request.tool.name(),
        std::process::id()
    ));
    let result = copy_out(
        regs,
        &located,
        &manifest,
        request.tool,
        &temp,
        replacements.clone(),
    )
    .await;
    let written = match result {
        Ok(w) => w,
        Err(e) => {
            let _ = fs_err::remove_file(&temp);
            return Err(e);
        }
    };
    let markers: Vec<PinnedMarker> = replacements
        .iter()
        .zip(&written.offsets)
        .map(|(r, at)| PinnedMarker {
            marker: r.marker,
            value: r.value().to_string(),
            offset: *at,
        })
        .collect();
    let image_pinned = markers
        .iter()
        .any(|m| m.marker == Marker::ReleaseImage && m.offset.is_some());
    if request.tool.needs_release_image() && !image_pinned {
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
        markers,
    })
}

/// The release's platform as oc writes it into the architecture placeholder (oc's
/// `ReleaseInfo.Platform`): `OS/ARCH` from the image's config, `multi (OS/ARCH)` when the
/// release was given as an index.
fn platform(config: &[u8], from_index: bool) -> String {
    let v: serde_json::Value = serde_json::from_slice(config).unwrap_or_default();
    let field = |k: &str| {
        v.get(k)
            .and_then(|s| s.as_str())
            .filter(|s| !s.is_empty())
            .unwrap_or("unknown")
            .to_string()
    };
    let p = format!("{}/{}", field("os"), field("architecture"));
    if from_index {
        format!("multi ({p})")
    } else {
        p
    }
}

/// The component where the mirror set puts it: the first candidate whose manifest answers.
async fn locate(
    regs: &Arc<Registries>,
    mirrors: &DigestMirrors,
    image: &ImageRef,
    arch: &str,
) -> Result<(ImageRef, Box<OciImageManifest>)> {
    let candidates = mirrors.candidates(image);
    let mut tried = Vec::new();
    for candidate in candidates {
        match platform_manifest(regs, &candidate, arch).await {
            Ok(found) => return Ok((candidate, found.manifest)),
            Err(e) => tried.push(format!("{candidate}: {e:#}")),
        }
    }
    if mirrors.is_empty() {
        bail!(
            "not found where image-references names it, and no mirror set was given: {}; pass the mirror record (or the ImageDigestMirrorSet the mirror wrote) so that it is looked for where it was mirrored",
            tried.join("; ")
        );
    }
    bail!(
        "not found at any mirror the mirror set gives for it: {}",
        tried.join("; ")
    )
}

/// A single-platform manifest, and whether it was reached through an index.
pub struct PlatformManifest {
    /// The image manifest.
    pub manifest: Box<OciImageManifest>,
    /// Whether `image` was an index narrowed to the platform.
    pub from_index: bool,
}

/// The single-platform manifest of `image` for `linux/arch` (the image itself, or the index
/// entry for that platform).
pub async fn platform_manifest(
    regs: &Arc<Registries>,
    image: &ImageRef,
    arch: &str,
) -> Result<PlatformManifest> {
    let client = regs.client(&image.registry)?;
    let raw = client
        .get_manifest(&image.repository, &image.reference())
        .await
        .with_context(|| format!("reading the manifest of {image}"))?;
    match raw.parse().with_context(|| format!("{image}"))? {
        Parsed::Image(manifest) => Ok(PlatformManifest {
            manifest,
            from_index: false,
        }),
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
                Parsed::Image(manifest) => Ok(PlatformManifest {
                    manifest,
                    from_index: true,
                }),
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
        let outcome =
            tokio::task::spawn_blocking(move || -> Result<(layerfile::Found, Option<Written>)> {
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
            (layerfile::Found::File(_), Some(mut w)) => {
                w.layer = layer.digest.clone();
                return Ok(w);
            }
            (layerfile::Found::Removed(by), _) => {
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

/// Writes `file` to `temp` with the placeholders replaced, through one buffer; its sha256,
/// size and where each replacement was made.
pub(crate) fn write_pinned(
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
