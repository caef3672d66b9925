//! Synthetic images pushed over the distribution API: Docker schema 2 and OCI manifests, an OCI
//! index and a Docker manifest list, layers shared across repositories, and one large layer
//! streamed in chunks — the shapes a mirror must copy byte for byte.
//!
//! Everything is derived from a seed: the same seed gives the same digests in every run, so a
//! test can state expectations up front. [`SyntheticSet::standard`] is the common fixture;
//! [`push_image`] and [`push_index`] push custom ones.

use std::collections::BTreeMap;

use anyhow::{bail, Result};
use serde_json::{json, Value};

use super::client::{BlobSource, RegistryClient};
use super::layers::{self, derive_seed, LayerInfo, LayerSpec};
use super::registry::Registry;

/// Docker image manifest, schema 2.
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// Docker manifest list.
pub const DOCKER_MANIFEST_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
/// Docker image config.
pub const DOCKER_CONFIG: &str = "application/vnd.docker.container.image.v1+json";
/// Docker gzip layer.
pub const DOCKER_LAYER: &str = "application/vnd.docker.image.rootfs.diff.tar.gzip";
/// OCI image manifest.
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// OCI image index.
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
/// OCI image config.
pub const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
/// OCI gzip layer.
pub const OCI_LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
/// Every manifest media type the harness writes (an `Accept` list).
pub const ALL_MANIFEST_TYPES: [&str; 4] = [
    OCI_INDEX,
    OCI_MANIFEST,
    DOCKER_MANIFEST_LIST,
    DOCKER_MANIFEST,
];

/// Default size of the standard set's large layer: big enough to need streaming and chunking,
/// small enough to keep tests fast.
pub const DEFAULT_LARGE_LAYER: u64 = 32 * 1024 * 1024;

/// A fixed creation time, so configs (and digests) depend on the seed only.
const CREATED: &str = "2024-01-01T00:00:00Z";

/// Docker or OCI media types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `application/vnd.docker.*` (schema 2 manifest, manifest list).
    Docker,
    /// `application/vnd.oci.image.*` (manifest, index).
    Oci,
}

impl Format {
    /// The image manifest media type.
    pub fn manifest_type(self) -> &'static str {
        match self {
            Format::Docker => DOCKER_MANIFEST,
            Format::Oci => OCI_MANIFEST,
        }
    }

    /// The multi-platform (list/index) media type.
    pub fn index_type(self) -> &'static str {
        match self {
            Format::Docker => DOCKER_MANIFEST_LIST,
            Format::Oci => OCI_INDEX,
        }
    }

    /// The config media type.
    pub fn config_type(self) -> &'static str {
        match self {
            Format::Docker => DOCKER_CONFIG,
            Format::Oci => OCI_CONFIG,
        }
    }

    /// The gzip layer media type.
    pub fn layer_type(self) -> &'static str {
        match self {
            Format::Docker => DOCKER_LAYER,
            Format::Oci => OCI_LAYER,
        }
    }
}

/// An OS/architecture(/variant) triple.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Platform {
    /// `linux`.
    pub os: String,
    /// `amd64`, `arm64`, …
    pub architecture: String,
    /// `v8`, …
    pub variant: Option<String>,
}

impl Platform {
    /// `linux/amd64`.
    pub fn linux_amd64() -> Self {
        Self::new("linux", "amd64", None)
    }

    /// `linux/arm64` (no variant).
    pub fn linux_arm64() -> Self {
        Self::new("linux", "arm64", None)
    }

    /// `linux/arm64/v8`.
    pub fn linux_arm64_v8() -> Self {
        Self::new("linux", "arm64", Some("v8"))
    }

    /// Any platform.
    pub fn new(os: &str, architecture: &str, variant: Option<&str>) -> Self {
        Platform {
            os: os.to_string(),
            architecture: architecture.to_string(),
            variant: variant.map(String::from),
        }
    }

    /// The manifest-list/index `platform` object.
    pub fn to_json(&self) -> Value {
        let mut v = json!({"os": self.os, "architecture": self.architecture});
        if let Some(variant) = &self.variant {
            v["variant"] = json!(variant);
        }
        v
    }
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(v) = &self.variant {
            write!(f, "/{v}")?;
        }
        Ok(())
    }
}

/// A single-platform image to build.
#[derive(Clone, Debug)]
pub struct ImageSpec {
    /// Docker or OCI media types.
    pub format: Format,
    /// The platform written into the config (and the index entry).
    pub platform: Platform,
    /// Layers, base first.
    pub layers: Vec<LayerSpec>,
    /// Config labels.
    pub labels: BTreeMap<String, String>,
}

impl ImageSpec {
    /// An image of `format` for `platform` with `layers` and no labels.
    pub fn new(format: Format, platform: Platform, layers: Vec<LayerSpec>) -> Self {
        ImageSpec {
            format,
            platform,
            layers,
            labels: BTreeMap::new(),
        }
    }

    /// Adds a config label.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_string(), value.to_string());
        self
    }
}

/// A multi-platform image: an OCI index ([`Format::Oci`]) or a Docker manifest list.
#[derive(Clone, Debug)]
pub struct IndexSpec {
    /// OCI index or Docker manifest list.
    pub format: Format,
    /// The per-platform images (pushed by digest before the index).
    pub children: Vec<ImageSpec>,
}

/// An image or an index.
#[derive(Clone, Debug)]
pub enum Artifact {
    /// Single-platform.
    Image(ImageSpec),
    /// Multi-platform.
    Index(IndexSpec),
}

/// One image of a [`SyntheticSet`]: where it goes and what it is.
#[derive(Clone, Debug)]
pub struct SetEntry {
    /// Repository under the push prefix, e.g. `base/app-a`.
    pub repo: String,
    /// Tag.
    pub tag: String,
    /// Content.
    pub artifact: Artifact,
}

/// A built (not yet pushed) single-platform image.
#[derive(Clone, Debug)]
pub struct BuiltImage {
    /// Manifest media type.
    pub media_type: &'static str,
    /// Manifest bytes as pushed.
    pub manifest: Vec<u8>,
    /// `sha256:` of the manifest.
    pub digest: String,
    /// Config bytes.
    pub config: Vec<u8>,
    /// `sha256:` of the config.
    pub config_digest: String,
    /// Layer digests, diff_ids and sizes, in order.
    pub layers: Vec<LayerInfo>,
}

/// Builds config and manifest for `spec` (layers are hashed, not kept).
pub fn build_image(spec: &ImageSpec) -> BuiltImage {
    let infos: Vec<LayerInfo> = spec.layers.iter().map(layers::layer_info).collect();
    let mut config = json!({
        "architecture": spec.platform.architecture,
        "os": spec.platform.os,
        "created": CREATED,
        "config": {
            "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
            "Cmd": ["/bin/sh"],
            "Labels": spec.labels,
        },
        "rootfs": {
            "type": "layers",
            "diff_ids": infos.iter().map(|i| i.diff_id.clone()).collect::<Vec<_>>(),
        },
        "history": spec.layers.iter().map(|l| json!({
            "created": CREATED,
            "created_by": format!("bootstrap synthetic layer {:016x} ({} bytes)", l.seed, l.size),
        })).collect::<Vec<_>>(),
    });
    if let Some(variant) = &spec.platform.variant {
        config["variant"] = json!(variant);
    }
    let config = serde_json::to_vec(&config).expect("config JSON");
    let config_digest = layers::sha256_digest(&config);
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": spec.format.manifest_type(),
        "config": {
            "mediaType": spec.format.config_type(),
            "size": config.len(),
            "digest": config_digest,
        },
        "layers": infos.iter().map(|i| json!({
            "mediaType": spec.format.layer_type(),
            "size": i.size,
            "digest": i.digest,
        })).collect::<Vec<_>>(),
    });
    let manifest = serde_json::to_vec_pretty(&manifest).expect("manifest JSON");
    BuiltImage {
        media_type: spec.format.manifest_type(),
        digest: layers::sha256_digest(&manifest),
        manifest,
        config,
        config_digest,
        layers: infos,
    }
}

/// A child of a pushed index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushedChild {
    /// Manifest digest.
    pub digest: String,
    /// Manifest media type.
    pub media_type: String,
    /// Manifest size in bytes.
    pub size: u64,
    /// `os/arch[/variant]`.
    pub platform: String,
    /// Config and layers: `(digest, size)`.
    pub blobs: Vec<(String, u64)>,
}

/// What was pushed, as the registry now holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushedImage {
    /// Full repository path (prefix included), e.g. `p/base/app-a`.
    pub repo: String,
    /// Tag; empty when pushed by digest only.
    pub tag: String,
    /// Digest of the top manifest (the index for multi-platform images).
    pub digest: String,
    /// Media type of the top manifest.
    pub media_type: String,
    /// `os/arch[/variant]` of the image, or of each child of an index.
    pub platforms: Vec<String>,
    /// Every blob (configs and layers, children's included, each once): `(digest, size)`.
    pub blobs: Vec<(String, u64)>,
    /// The top manifest's bytes.
    pub manifest: Vec<u8>,
    /// An index's children (empty for single-platform images).
    pub children: Vec<PushedChild>,
}

impl PushedImage {
    /// `repo:tag`.
    pub fn tagged(&self) -> String {
        format!("{}:{}", self.repo, self.tag)
    }

    /// Whether the top manifest is an index or manifest list.
    pub fn is_index(&self) -> bool {
        !self.children.is_empty()
    }
}

/// Pushes `spec`'s blobs and manifest to `repo`, tagged `tag` (by digest only when `None`).
pub async fn push_image(
    client: &RegistryClient,
    repo: &str,
    tag: Option<&str>,
    spec: &ImageSpec,
) -> Result<PushedImage> {
    let (built, blobs) = push_image_blobs(client, repo, spec).await?;
    let reference = tag.unwrap_or(&built.digest);
    let digest = client
        .put_manifest(repo, reference, built.media_type, &built.manifest)
        .await?;
    Ok(PushedImage {
        repo: repo.to_string(),
        tag: tag.unwrap_or_default().to_string(),
        digest,
        media_type: built.media_type.to_string(),
        platforms: vec![spec.platform.to_string()],
        blobs,
        manifest: built.manifest,
        children: Vec::new(),
    })
}

async fn push_image_blobs(
    client: &RegistryClient,
    repo: &str,
    spec: &ImageSpec,
) -> Result<(BuiltImage, Vec<(String, u64)>)> {
    let owned = spec.clone();
    let built = run_blocking(move || build_image(&owned)).await?;
    let mut blobs = Vec::new();
    for (layer, info) in spec.layers.iter().zip(&built.layers) {
        client
            .push_blob(repo, &info.digest, BlobSource::Layer(*layer))
            .await?;
        blobs.push((info.digest.clone(), info.size));
    }
    client
        .push_blob(
            repo,
            &built.config_digest,
            BlobSource::Bytes(built.config.clone().into()),
        )
        .await?;
    blobs.push((built.config_digest.clone(), built.config.len() as u64));
    Ok((built, blobs))
}

/// Pushes every child of `spec` by digest, then the index (or list) as `tag` (by digest only
/// when `None`).
pub async fn push_index(
    client: &RegistryClient,
    repo: &str,
    tag: Option<&str>,
    spec: &IndexSpec,
) -> Result<PushedImage> {
    let mut children = Vec::new();
    let mut entries = Vec::new();
    let mut blobs: Vec<(String, u64)> = Vec::new();
    for child in &spec.children {
        if child.format != spec.format {
            bail!(
                "an index of {:?} with a {:?} child",
                spec.format,
                child.format
            );
        }
        let (built, child_blobs) = push_image_blobs(client, repo, child).await?;
        client
            .put_manifest(repo, &built.digest, built.media_type, &built.manifest)
            .await?;
        entries.push(json!({
            "mediaType": built.media_type,
            "size": built.manifest.len(),
            "digest": built.digest,
            "platform": child.platform.to_json(),
        }));
        for b in &child_blobs {
            if !blobs.contains(b) {
                blobs.push(b.clone());
            }
        }
        children.push(PushedChild {
            digest: built.digest.clone(),
            media_type: built.media_type.to_string(),
            size: built.manifest.len() as u64,
            platform: child.platform.to_string(),
            blobs: child_blobs,
        });
    }
    let media_type = spec.format.index_type();
    let index = json!({
        "schemaVersion": 2,
        "mediaType": media_type,
        "manifests": entries,
    });
    let manifest = serde_json::to_vec_pretty(&index)?;
    let own_digest = layers::sha256_digest(&manifest);
    let digest = client
        .put_manifest(repo, tag.unwrap_or(&own_digest), media_type, &manifest)
        .await?;
    Ok(PushedImage {
        repo: repo.to_string(),
        tag: tag.unwrap_or_default().to_string(),
        digest,
        media_type: media_type.to_string(),
        platforms: children.iter().map(|c| c.platform.clone()).collect(),
        blobs,
        manifest,
        children,
    })
}

/// Pushes one artifact (image or index).
pub async fn push_artifact(
    client: &RegistryClient,
    repo: &str,
    tag: Option<&str>,
    artifact: &Artifact,
) -> Result<PushedImage> {
    match artifact {
        Artifact::Image(spec) => push_image(client, repo, tag, spec).await,
        Artifact::Index(spec) => push_index(client, repo, tag, spec).await,
    }
}

/// Runs CPU-bound work (hashing layers) off the async thread.
async fn run_blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    Ok(rx.await?)
}

/// A named set of synthetic images.
#[derive(Clone, Debug)]
pub struct SyntheticSet {
    /// The seed every layer is derived from.
    pub seed: u64,
    /// The images, in push order.
    pub entries: Vec<SetEntry>,
}

impl SyntheticSet {
    /// The standard fixture (repositories relative to the push prefix):
    ///
    /// - `base/app-a:1.0` Docker schema 2, `base/app-b:1.0` OCI, `base/app-c:1.0` Docker, all
    ///   linux/amd64 and sharing one base layer ([`Self::base_layer`]) plus their own layers;
    /// - `tools/multi:1.0` an OCI index of linux/amd64 and linux/arm64 OCI images;
    /// - `tools/multi-docker:1.0` a Docker manifest list of the same two platforms;
    /// - `data/large:1.0` OCI, a small layer and a large one ([`DEFAULT_LARGE_LAYER`], see
    ///   [`Self::with_large_layer_size`]) that is streamed in chunks.
    ///
    /// Sizes are KiBs except the large layer.
    pub fn standard(seed: u64) -> Self {
        let layer = |i: u64, kib: u64| LayerSpec::new(derive_seed(seed, i), kib * 1024);
        let base = layer(1, 48);
        let amd64 = Platform::linux_amd64();
        let arm64 = Platform::linux_arm64();
        let seed_label = seed.to_string();
        let image = |format, platform: &Platform, layers| {
            ImageSpec::new(format, platform.clone(), layers)
                .label("bootstrap.test/seed", &seed_label)
        };
        let entries = vec![
            SetEntry {
                repo: "base/app-a".into(),
                tag: "1.0".into(),
                artifact: Artifact::Image(image(Format::Docker, &amd64, vec![base, layer(2, 16)])),
            },
            SetEntry {
                repo: "base/app-b".into(),
                tag: "1.0".into(),
                artifact: Artifact::Image(image(
                    Format::Oci,
                    &amd64,
                    vec![base, layer(3, 24), layer(4, 8)],
                )),
            },
            SetEntry {
                repo: "base/app-c".into(),
                tag: "1.0".into(),
                artifact: Artifact::Image(image(Format::Docker, &amd64, vec![base, layer(5, 12)])),
            },
            SetEntry {
                repo: "tools/multi".into(),
                tag: "1.0".into(),
                artifact: Artifact::Index(IndexSpec {
                    format: Format::Oci,
                    children: vec![
                        image(Format::Oci, &amd64, vec![layer(6, 20)]),
                        image(Format::Oci, &arm64, vec![layer(7, 20)]),
                    ],
                }),
            },
            SetEntry {
                repo: "tools/multi-docker".into(),
                tag: "1.0".into(),
                artifact: Artifact::Index(IndexSpec {
                    format: Format::Docker,
                    children: vec![
                        image(Format::Docker, &amd64, vec![layer(8, 10)]),
                        image(Format::Docker, &arm64, vec![layer(9, 10)]),
                    ],
                }),
            },
            SetEntry {
                repo: "data/large".into(),
                tag: "1.0".into(),
                artifact: Artifact::Image(image(
                    Format::Oci,
                    &amd64,
                    vec![
                        layer(10, 4),
                        LayerSpec::new(derive_seed(seed, 11), DEFAULT_LARGE_LAYER),
                    ],
                )),
            },
        ];
        SyntheticSet { seed, entries }
    }

    /// The set without `data/large` (when a test needs no streaming, only speed).
    pub fn without_large(mut self) -> Self {
        self.entries.retain(|e| e.repo != "data/large");
        self
    }

    /// Sets the size of the large layer of `data/large`.
    pub fn with_large_layer_size(mut self, bytes: u64) -> Self {
        let seed = derive_seed(self.seed, 11);
        for e in &mut self.entries {
            if let Artifact::Image(spec) = &mut e.artifact {
                for l in &mut spec.layers {
                    if l.seed == seed {
                        l.size = bytes;
                    }
                }
            }
        }
        self
    }

    /// The layer `base/app-*` share.
    pub fn base_layer(&self) -> LayerSpec {
        LayerSpec::new(derive_seed(self.seed, 1), 48 * 1024)
    }

    /// Digest of the layer `base/app-*` share (what a mirror must send only once).
    pub fn shared_base_digest(&self) -> String {
        layers::layer_info(&self.base_layer()).digest
    }

    /// Pushes every entry to `registry` under `prefix` (`<prefix>/base/app-a`, …; no prefix
    /// when empty), in order, and returns what was pushed. Each unique blob is uploaded at most
    /// once per call (HEAD first, then a mount when already pushed to another repository).
    /// Synchronous (its own runtime on its own thread, so it works inside `#[tokio::test]`
    /// too); panics on failure. [`Self::try_push_to`] is the async, fallible form.
    pub fn push_to(&self, registry: &Registry, prefix: &str) -> Vec<PushedImage> {
        super::block_on(self.try_push_to(registry, prefix))
            .unwrap_or_else(|e| panic!("pushing the synthetic set to {}: {e:#}", registry.host()))
    }

    /// As [`Self::push_to`], async and returning errors.
    pub async fn try_push_to(&self, registry: &Registry, prefix: &str) -> Result<Vec<PushedImage>> {
        let client = RegistryClient::new(registry);
        self.push_with(&client, prefix).await
    }

    /// As [`Self::try_push_to`], with a given client (to inspect its token use, say).
    pub async fn push_with(
        &self,
        client: &RegistryClient,
        prefix: &str,
    ) -> Result<Vec<PushedImage>> {
        let mut pushed = Vec::new();
        for e in &self.entries {
            let repo = if prefix.is_empty() {
                e.repo.clone()
            } else {
                format!("{}/{}", prefix.trim_end_matches('/'), e.repo)
            };
            pushed.push(push_artifact(client, &repo, Some(&e.tag), &e.artifact).await?);
        }
        Ok(pushed)
    }
}

/// Finds the pushed image whose repository ends with `suffix` (e.g. `base/app-a`).
pub fn find<'a>(pushed: &'a [PushedImage], suffix: &str) -> &'a PushedImage {
    pushed
        .iter()
        .find(|p| p.repo == suffix || p.repo.ends_with(&format!("/{suffix}")))
        .unwrap_or_else(|| panic!("no pushed image {suffix}"))
}
