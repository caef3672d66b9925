//! From image references to concrete content: each image's manifests (kept verbatim), the
//! platforms kept by its platform filter, and the blobs it needs; then the blob graph over
//! the whole set, so each unique blob is transferred once.

use super::cache::ResolveCache;
use crate::oci::digest::Digest;
use crate::oci::layout::OciLayout;
use crate::oci::made::MadeBlob;
use crate::oci::manifest::{platform_of, Parsed, RawManifest};
use crate::oci::platform::PlatformFilter;
use crate::oci::reference::ImageRef;
use crate::oci::registry::Registries;
use crate::openshift::cluster::Category;
use anyhow::{bail, Context, Result};
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Where images are read from.
#[derive(Clone)]
pub enum Source {
    /// Live registries (mirror to disk, mirror to mirror).
    Registry(Arc<Registries>),
    /// An OCI layout a mirror to disk wrote (disk to mirror).
    Layout(OciLayout),
}

/// A blob an image needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlobDesc {
    /// Its digest.
    pub digest: Digest,
    /// Its size.
    pub size: u64,
    /// Its media type (for reports).
    pub media_type: String,
}

/// A child manifest kept from an index.
#[derive(Clone, Debug)]
pub struct Child {
    /// The manifest, verbatim.
    pub manifest: RawManifest,
    /// The platform the index gives it.
    pub platform: Option<String>,
}

/// One image, resolved to its manifests and blobs.
#[derive(Clone, Debug)]
pub struct ResolvedImage {
    /// The reference it was mirrored from.
    pub source: ImageRef,
    /// The top manifest, verbatim.
    pub root: RawManifest,
    /// For an index, the children kept (in index order).
    pub children: Vec<Child>,
    /// Platforms kept.
    pub platforms: Vec<String>,
    /// Platforms the index offered that were not kept.
    pub dropped: Vec<String>,
    /// The filter that chose the kept platforms (every platform when none was asked for).
    pub filter: PlatformFilter,
    /// Blobs needed, each once.
    pub blobs: Vec<BlobDesc>,
    /// Where it goes and what kind of content it is.
    pub placement: Placement,
    /// Blobs this run made (a rebuilt catalog's configs layer and config), with their bytes
    /// (a layer in a temporary file): they exist at no source.
    pub generated: Vec<(Digest, MadeBlob)>,
    /// For an image this run rebuilt (a filtered catalog), the source's digest.
    pub rebuilt_from: Option<Digest>,
    /// For a signature, attestation or referrer: the image it belongs to
    /// ([`super::signatures`]).
    pub attached: Option<super::signatures::Attached>,
    /// For an image read from an OCI layout the configuration names (an `oci://` catalog):
    /// the layout its blobs are read from instead of the run's source, and how the
    /// configuration names it (`oci:///abs/path`), which records and reports give as its source.
    pub local: Option<LocalOrigin>,
}

/// An OCI image layout on disk an image of a registry run is read from (`oci://` catalogs).
#[derive(Clone, Debug)]
pub struct LocalOrigin {
    /// The layout.
    pub layout: OciLayout,
    /// `oci://` and the layout's absolute path, as oc-mirror names the catalog.
    pub label: String,
}

/// Where an image goes under the destination prefix, and what kind of content it is.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Placement {
    /// The destination repository under the prefix; default: the source's repository path.
    pub repository: Option<String>,
    /// The destination tag; default: the source's tag, else the digest alone.
    pub tag: Option<String>,
    /// What kind of content it is (which mirror set maps it).
    pub category: Category,
}

impl ResolvedImage {
    /// A resolved image of one manifest and no blobs yet, placed by default.
    pub fn new(source: ImageRef, root: RawManifest) -> Self {
        ResolvedImage {
            source,
            root,
            children: Vec::new(),
            platforms: Vec::new(),
            dropped: Vec::new(),
            filter: PlatformFilter::all(),
            blobs: Vec::new(),
            placement: Placement::default(),
            generated: Vec::new(),
            rebuilt_from: None,
            attached: None,
            local: None,
        }
    }

    /// The source as records and reports name it: the `oci://` path of an image read from a
    /// layout the configuration names, else the source reference.
    pub fn source_label(&self) -> String {
        match &self.local {
            Some(l) => l.label.clone(),
            None => self.source.to_string(),
        }
    }

    /// The destination repository path under the prefix.
    pub fn dest_path(&self) -> &str {
        self.placement
            .repository
            .as_deref()
            .unwrap_or(&self.source.repository)
    }

    /// The tag a registry destination holds this image under: its placement's, else the
    /// source's, else its [`digest_tag`](Self::digest_tag).
    pub fn dest_reference(&self, root: &RawManifest) -> String {
        match self.placement.tag.as_ref().or(self.source.tag.as_ref()) {
            Some(t) => t.clone(),
            None => root.digest.dashed(),
        }
    }

    /// For content with no tag of its own (an image pinned by digest), the tag a registry
    /// destination keeps it under, as oc-mirror v2 names it: `sha256-<hex>` of the manifest
    /// pushed (`root`: the source's, or a catalog this run filtered, as oc-mirror tags it by
    /// the filtered digest). Without a tag, registries that collect untagged manifests (Quay,
    /// Harbor, Distribution's garbage collection) may delete what the cluster pulls by digest.
    /// `None` when the placement or the source gives a tag.
    pub fn digest_tag(&self, root: &RawManifest) -> Option<String> {
        (self.placement.tag.is_none() && self.source.tag.is_none()).then(|| root.digest.dashed())
    }

    /// Bytes of every manifest and blob this image needs.
    pub fn total_size(&self) -> u64 {
        self.root.bytes.len() as u64
            + self
                .children
                .iter()
                .map(|c| c.manifest.bytes.len() as u64)
                .sum::<u64>()
            + self.blobs.iter().map(|b| b.size).sum::<u64>()
    }
}

impl Source {
    async fn manifest(&self, image: &ImageRef, reference: &str) -> Result<Option<RawManifest>> {
        match self {
            Source::Registry(regs) => {
                let client = regs.client(&image.registry)?;
                Ok(Some(
                    client.get_manifest(&image.repository, reference).await?,
                ))
            }
            Source::Layout(layout) => {
                let digest: Digest = reference
                    .parse()
                    .with_context(|| format!("layout lookup of {image} by {reference}"))?;
                if layout.blob_size(&digest).is_none() {
                    return Ok(None);
                }
                let bytes = layout.read_verified(&digest)?;
                Ok(Some(RawManifest::new(bytes, None)))
            }
        }
    }

    /// The platform an image config names, read once per digest in a run: a config is the same
    /// bytes wherever it is (verified on its first read), so images sharing one cost one
    /// request. None when the config cannot be read or names none.
    pub(crate) async fn config_platform(
        &self,
        image: &ImageRef,
        digest: &Digest,
    ) -> Option<String> {
        let read = || async {
            let bytes = self.small_blob(image, digest).await?;
            anyhow::Ok(platform_from_config(&bytes))
        };
        match self {
            // A failed read is not kept: the next image sharing the config tries again.
            Source::Registry(regs) => regs
                .config_platform(digest)
                .get_or_try_init(read)
                .await
                .ok()
                .cloned()
                .flatten(),
            Source::Layout(_) => read().await.ok().flatten(),
        }
    }

    /// Reads a small blob (an image config) whole, verified.
    pub(crate) async fn small_blob(&self, image: &ImageRef, digest: &Digest) -> Result<Bytes> {
        match self {
            Source::Registry(regs) => {
                let client = regs.client(&image.registry)?;
                let resp = client.get_blob(&image.repository, digest, 0).await?;
                let bytes =
                    crate::oci::stream::read_body(resp, crate::oci::stream::CONFIG_BODY_MAX)
                        .await
                        .with_context(|| format!("reading config {digest} of {image}"))?;
                if Digest::of(&bytes) != *digest {
                    bail!("config {digest} of {image} does not match its digest");
                }
                Ok(bytes)
            }
            Source::Layout(layout) => layout.read_verified(digest),
        }
    }
}

/// Resolves one image: fetches its top manifest (by the layout's recorded digest when reading a
/// layout), keeps the children of an index `platforms` selects, and collects every blob.
pub async fn resolve(
    source: &Source,
    image: &ImageRef,
    layout_digest: Option<&Digest>,
    platforms: &PlatformFilter,
    cache: Option<&ResolveCache>,
) -> Result<ResolvedImage> {
    let (Source::Registry(_), Some(cache)) = (source, cache) else {
        return resolve_fetching(source, image, layout_digest, platforms).await;
    };
    // The top manifest is read either way: its digest tells whether an earlier run already
    // resolved this very manifest (one request, where a HEAD first made it two on a miss).
    let root = source
        .manifest(image, &image.reference())
        .await?
        .with_context(|| format!("manifest {} of {image} is missing", image.reference()))?;
    if let Some(hit) = cache.load(image, &root.digest, platforms) {
        return Ok(hit);
    }
    let resolved = resolve_root(source, image, root, platforms).await?;
    cache.save(&resolved, platforms);
    Ok(resolved)
}

/// Resolves `image` from `source` itself: its top manifest, then for an index each child the
/// platform filter keeps (a layout: each child it holds), with the blobs of every image kept.
async fn resolve_fetching(
    source: &Source,
    image: &ImageRef,
    layout_digest: Option<&Digest>,
    platforms: &PlatformFilter,
) -> Result<ResolvedImage> {
    let reference = match layout_digest {
        Some(d) => d.to_string(),
        None => image.reference(),
    };
    let root = source
        .manifest(image, &reference)
        .await?
        .with_context(|| format!("manifest {reference} of {image} is missing from the layout"))?;
    resolve_root(source, image, root, platforms).await
}

/// Resolves `image` from its top manifest `root`, already read (for an index, each child the
/// platform filter keeps; a layout: each child it holds), with the blobs of every image kept.
pub async fn resolve_root(
    source: &Source,
    image: &ImageRef,
    root: RawManifest,
    platforms: &PlatformFilter,
) -> Result<ResolvedImage> {
    let mut resolved = ResolvedImage::new(image.clone(), root.clone());
    resolved.filter = platforms.clone();
    match root.parse().with_context(|| format!("reading {image}"))? {
        Parsed::Image(m) => add_single(source, image, &m, &mut resolved).await?,
        Parsed::Index(index) => {
            let kept = match source {
                // A disk mirror holds exactly what an earlier run kept (pushed with every
                // platform): keep what is present.
                Source::Layout(_) if platforms.is_all() => index.manifests.iter().collect(),
                // A registry, or a layout read for a configuration (an `oci://` catalog
                // with `platforms`).
                _ => kept_entries(image, &index, platforms)?,
            };
            let kept_digests: BTreeSet<&str> = kept.iter().map(|e| e.digest.as_str()).collect();
            add_children(source, image, &index, &kept_digests, &mut resolved).await?;
            if resolved.children.is_empty() {
                let offered = resolved.dropped.join(", ");
                match platforms.origin() {
                    o if o.is_empty() => bail!(
                        "{image} offers platforms {offered} but the source holds none of their manifests"
                    ),
                    o => bail!(
                        "{image} offers platforms {offered} but {o} keeps none of them ({platforms}): add one of these platforms"
                    ),
                }
            }
        }
    }
    Ok(resolved)
}

/// A single-platform image: its config (read for the platform it names, when it can be) and
/// layers.
async fn add_single(
    source: &Source,
    image: &ImageRef,
    m: &crate::oci::manifest::OciImageManifest,
    resolved: &mut ResolvedImage,
) -> Result<()> {
    let config = BlobDesc {
        digest: m.config.digest.parse()?,
        size: declared_size(&m.config.digest, m.config.size)
            .with_context(|| format!("reading {image}"))?,
        media_type: m.config.media_type.clone(),
    };
    resolved
        .platforms
        .extend(source.config_platform(image, &config.digest).await);
    add_image_blobs(&mut resolved.blobs, &mut BTreeSet::new(), m)
        .with_context(|| format!("reading {image}"))
}

/// The children of an index: those in `kept` (and present at the source) with their blobs;
/// the platforms of the rest recorded as dropped. A child that does not match its digest, or
/// is an index itself, fails the image.
async fn add_children(
    source: &Source,
    image: &ImageRef,
    index: &crate::oci::manifest::OciImageIndex,
    kept: &BTreeSet<&str>,
    resolved: &mut ResolvedImage,
) -> Result<()> {
    let mut seen = BTreeSet::new();
    for entry in &index.manifests {
        let platform = platform_of(entry);
        if !kept.contains(entry.digest.as_str()) {
            resolved.dropped.extend(platform);
            continue;
        }
        let Some(child) = source.manifest(image, &entry.digest).await? else {
            resolved.dropped.extend(platform);
            continue;
        };
        if child.digest.to_string() != entry.digest {
            bail!(
                "{image}: child manifest {} does not match its digest",
                entry.digest
            );
        }
        match child.parse()? {
            Parsed::Image(m) => add_image_blobs(&mut resolved.blobs, &mut seen, &m)
                .with_context(|| format!("reading {image}"))?,
            Parsed::Index(_) => bail!(
                "{image}: index entry {} is itself an index; nested indexes are not supported",
                entry.digest
            ),
        }
        resolved.platforms.extend(platform.clone());
        resolved.children.push(Child {
            manifest: child,
            platform,
        });
    }
    Ok(())
}

/// The entries of `index` that `platforms` keeps; a platform it names by OS and architecture
/// that the index does not offer fails the image, as oc-mirror v2 fails it ("no instances
/// found for platform"), rather than mirroring less than was asked for.
fn kept_entries<'a>(
    image: &ImageRef,
    index: &'a crate::oci::manifest::OciImageIndex,
    platforms: &PlatformFilter,
) -> Result<Vec<&'a crate::oci::manifest::ImageIndexEntry>> {
    let selected = platforms.select(index);
    if !selected.missing.is_empty() {
        let offered: Vec<String> = index.manifests.iter().filter_map(platform_of).collect();
        bail!(
            "{image} offers platforms {} but {} asks for {}, which it does not offer: remove {} from the list",
            offered.join(", "),
            platforms.origin(),
            selected.missing.join(", "),
            if selected.missing.len() == 1 { "it" } else { "them" }
        );
    }
    Ok(selected.kept)
}

fn add_image_blobs(
    out: &mut Vec<BlobDesc>,
    seen: &mut BTreeSet<Digest>,
    m: &crate::oci::manifest::OciImageManifest,
) -> Result<()> {
    for d in std::iter::once(&m.config).chain(m.layers.iter()) {
        if d.urls.as_ref().is_some_and(|u| !u.is_empty()) {
            // Foreign (non-distributable) layers live elsewhere; they are not ours to copy.
            continue;
        }
        let digest: Digest = d.digest.parse()?;
        if seen.insert(digest.clone()) {
            out.push(BlobDesc {
                digest,
                size: declared_size(&d.digest, d.size)?,
                media_type: d.media_type.clone(),
            });
        }
    }
    Ok(())
}

/// A descriptor's size as a byte count: a negative one (the spec's int64 allows it to parse)
/// is a corrupt or hostile manifest, refused rather than read as 0.
fn declared_size(digest: &str, size: i64) -> Result<u64> {
    u64::try_from(size).map_err(|_| {
        anyhow::anyhow!(
            "blob {digest} declares a negative size ({size}): the manifest is corrupt or hostile"
        )
    })
}

/// `os/arch[/variant]` from an image config.
pub fn platform_from_config(bytes: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Config {
        architecture: Option<String>,
        os: Option<String>,
        variant: Option<String>,
    }
    let c: Config = serde_json::from_slice(bytes).ok()?;
    // A signature's config names no platform (`"os": ""`).
    let (os, arch) = (
        c.os.filter(|o| !o.is_empty())?,
        c.architecture.filter(|a| !a.is_empty())?,
    );
    let mut s = format!("{os}/{arch}");
    if let Some(v) = c.variant {
        s.push('/');
        s.push_str(&v);
    }
    Some(s)
}

/// A blob to move once for the whole set, with every destination repository that needs it.
#[derive(Clone, Debug)]
pub struct BlobNode {
    /// Digest and size.
    pub blob: BlobDesc,
    /// Where to read it (the first image that needs it).
    pub from: ImageRef,
    /// Destination repositories (paths under the prefix) that need it.
    pub repositories: BTreeSet<String>,
    /// Its bytes, when this run made it (no source holds it).
    pub generated: Option<MadeBlob>,
    /// The OCI layout it is read from, when that is not the run's source (an `oci://`
    /// catalog's blobs).
    pub layout: Option<OciLayout>,
}

/// The blob graph of a set: every unique blob once, largest first so the link stays busy with
/// the long transfers while small ones fill the gaps.
pub fn blob_graph<'a>(images: impl IntoIterator<Item = &'a ResolvedImage>) -> Vec<BlobNode> {
    let mut nodes: BTreeMap<Digest, BlobNode> = BTreeMap::new();
    for img in images {
        for b in &img.blobs {
            let generated = img
                .generated
                .iter()
                .find(|(d, _)| *d == b.digest)
                .map(|(_, bytes)| bytes.clone());
            let node = nodes.entry(b.digest.clone()).or_insert_with(|| BlobNode {
                blob: b.clone(),
                from: img.source.clone(),
                repositories: BTreeSet::new(),
                generated: None,
                layout: img.local.as_ref().map(|l| l.layout.clone()),
            });
            if node.generated.is_none() {
                node.generated = generated;
            }
            node.repositories.insert(img.dest_path().to_string());
        }
    }
    let mut out: Vec<BlobNode> = nodes.into_values().collect();
    out.sort_by(|a, b| {
        b.blob
            .size
            .cmp(&a.blob.size)
            .then(a.blob.digest.cmp(&b.blob.digest))
    });
    out
}

/// The index bytes with only the kept children: for registries that refuse an index whose
/// children are not all present. The result has a new digest, which the record keeps beside the
/// source's.
pub fn rewrite_index(image: &ResolvedImage) -> Result<RawManifest> {
    let mut value: serde_json::Value = serde_json::from_slice(&image.root.bytes)
        .with_context(|| format!("reading the index of {}", image.source))?;
    let kept: BTreeSet<String> = image
        .children
        .iter()
        .map(|c| c.manifest.digest.to_string())
        .collect();
    let manifests = value
        .get_mut("manifests")
        .and_then(|m| m.as_array_mut())
        .with_context(|| format!("the index of {} has no manifests array", image.source))?;
    manifests.retain(|e| {
        e.get("digest")
            .and_then(|d| d.as_str())
            .is_some_and(|d| kept.contains(d))
    });
    let bytes = serde_json::to_vec(&value)?;
    Ok(RawManifest::new(
        Bytes::from(bytes),
        Some(&image.root.media_type),
    ))
}

/// Index annotation of a disk mirror naming an image's destination repository and tag when
/// they are not the source's (`openshift/release:4.18.3-x86_64-etcd`), so a push from disk
/// puts it where a mirror to mirror would.
pub const DESTINATION_ANNOTATION: &str = "dev.bootstrap.mirror.destination";
/// Index annotation of a disk mirror naming an image's category (`release`, `operator`,
/// `catalog`); absent for additional images.
pub const CATEGORY_ANNOTATION: &str = "dev.bootstrap.mirror.category";

/// The index annotations that keep `placement` across the air gap.
pub fn placement_annotations(placement: &Placement) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if placement.repository.is_some() || placement.tag.is_some() {
        let mut value = placement.repository.clone().unwrap_or_default();
        if let Some(tag) = &placement.tag {
            value.push(':');
            value.push_str(tag);
        }
        out.push((DESTINATION_ANNOTATION.to_string(), value));
    }
    if placement.category != Category::Generic {
        out.push((
            CATEGORY_ANNOTATION.to_string(),
            placement.category.name().to_string(),
        ));
    }
    out
}

/// The placement the annotations of a disk mirror's index entry record; `origin` names the
/// entry in errors.
pub fn placement_from_annotations(
    annotations: &BTreeMap<String, String>,
    origin: &str,
) -> Result<Placement> {
    let mut placement = Placement::default();
    if let Some(value) = annotations.get(DESTINATION_ANNOTATION) {
        let (repo, tag) = match value.rsplit_once(':') {
            Some((r, t)) if !t.contains('/') => (r, Some(t)),
            _ => (value.as_str(), None),
        };
        if !repo.is_empty() {
            crate::oci::reference::ImageRef::parse(&format!(
                "localhost/{repo}:{}",
                tag.unwrap_or("latest")
            ))
            .map_err(|e| {
                anyhow::anyhow!("{origin}: {DESTINATION_ANNOTATION} '{value}': {}", e.reason)
            })?;
            placement.repository = Some(repo.to_string());
        }
        placement.tag = tag.map(str::to_string);
    }
    if let Some(value) = annotations.get(CATEGORY_ANNOTATION) {
        placement.category = Category::from_name(value).with_context(|| {
            format!("{origin}: {CATEGORY_ANNOTATION} '{value}' is not release, operator, catalog or generic")
        })?;
    }
    Ok(placement)
}

#[cfg(test)]
mod placement_tests {
    use super::*;

    /// Regression: a negative declared size (int64 in the spec) was read as 0; it is refused,
    /// naming the blob.
    #[test]
    fn a_negative_declared_size_is_refused() {
        assert_eq!(declared_size("sha256:ab", 7).unwrap(), 7);
        let err = declared_size("sha256:ab", -1).unwrap_err().to_string();
        assert!(
            err.contains("sha256:ab") && err.contains("negative size (-1)"),
            "{err}"
        );
    }

    /// Regression: content pinned by digest was pushed untagged; a registry holds it under
    /// oc-mirror v2's `sha256-<hex>` tag, of the manifest pushed.
    #[test]
    fn digest_only_content_gets_a_digest_tag() {
        let root = RawManifest::new(Bytes::from_static(b"{}"), None);
        let hex = root.digest.hex().to_string();
        let pinned = ImageRef::parse(&format!("q.io/a/b@{}", root.digest)).unwrap();
        let mut image = ResolvedImage::new(pinned, root.clone());
        assert_eq!(image.digest_tag(&root), Some(format!("sha256-{hex}")));
        assert_eq!(image.dest_reference(&root), format!("sha256-{hex}"));
        image.placement.tag = Some("4.18.3-x86_64-etcd".into());
        assert_eq!(image.digest_tag(&root), None);
        assert_eq!(image.dest_reference(&root), "4.18.3-x86_64-etcd");
        let tagged = ResolvedImage::new(ImageRef::parse("q.io/a/b:v1").unwrap(), root.clone());
        assert_eq!(tagged.digest_tag(&root), None);
        assert_eq!(tagged.dest_reference(&root), "v1");
    }

    #[test]
    fn placement_survives_the_index_annotations() {
        for p in [
            Placement::default(),
            Placement {
                repository: Some("openshift/release".into()),
                tag: Some("4.18.3-x86_64-etcd".into()),
                category: Category::Release,
            },
            Placement {
                repository: None,
                tag: Some("v1".into()),
                category: Category::Catalog,
            },
        ] {
            let annotations: BTreeMap<String, String> =
                placement_annotations(&p).into_iter().collect();
            assert_eq!(placement_from_annotations(&annotations, "t").unwrap(), p);
        }
        let bad = BTreeMap::from([(CATEGORY_ANNOTATION.to_string(), "x".to_string())]);
        assert!(placement_from_annotations(&bad, "t").is_err());
    }
}
