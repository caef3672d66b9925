//! OpenShift content: from `mirror.platform` and `mirror.operators` to the images they imply,
//! read from the source registries.
//!
//! - Release payloads: explicit `platform.release` images, and `platform.channels` resolved
//!   against the update graph ([`crate::openshift::graph`]); each release image's
//!   `release-manifests/image-references` lists its components ([`crate::openshift::release`]). The
//!   release image goes to `<prefix>/openshift/release-images:<version>-<arch>`, components to
//!   `<prefix>/openshift/release` by digest, as oc-mirror places them. `type: okd` channels are
//!   read from OKD's graph (`--okd-graph-url`) and tagged by version alone; with
//!   `platform.kubeVirtContainer` each release's KubeVirt container disk, named by its
//!   `coreos-bootimages` manifest, goes to `openshift/release` too.
//! - Operator catalogs: the catalog image's config directory is read out of its layers
//!   ([`crate::oci::layers`], streamed, verified, in memory), filtered by the entry's rules
//!   ([`super::resolve::select`]), and rebuilt as a new image ([`crate::openshift::rebuild`]);
//!   every kept bundle image and related image is mirrored at its source path.

use super::config::layout_catalog::LayoutCatalog;
use super::config::{ImageSetConfig, Operator, PlatformType, ReleaseChannel};
use super::plan::{self, Child, Placement, ResolvedImage, Source};
use super::resolve::select;
use crate::oci::blob_read::{read_image_dir, spool_image_dir_from, BlobOrigin};
use crate::oci::digest::Digest;
use crate::oci::layers;
use crate::oci::layout::OciLayout;
use crate::oci::made::MadeBlob;
use crate::oci::manifest::{OciImageManifest, Parsed, RawManifest};
use crate::oci::platform::PlatformFilter;
use crate::oci::reference::ImageRef;
use crate::oci::registry::Registries;
use crate::openshift::cluster::Category;
use crate::openshift::graph::{ChannelQuery, Graph};
use crate::openshift::{fbc, rebuild, release};
use anyhow::{bail, Context, Result};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The public update service.
pub const DEFAULT_GRAPH_URL: &str = "https://api.openshift.com/api/upgrades_info/v1/graph";
/// OKD's update service, where oc-mirror v2 reads `type: okd` channels
/// (`cincinnati.OkdUpdateURL`, internal/pkg/cincinnati/download.go).
pub const DEFAULT_OKD_GRAPH_URL: &str = "https://origin-release.ci.openshift.org/graph";

/// Where release channels are resolved: OCP's update graph and OKD's (each an http(s) URL or
/// `file://PATH`).
#[derive(Clone, Copy, Debug)]
pub struct GraphUrls<'a> {
    /// For `type: ocp` channels (`--graph-url`).
    pub ocp: &'a str,
    /// For `type: okd` channels (`--okd-graph-url`).
    pub okd: &'a str,
}

/// One image a configuration asks for, and where it goes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct WantedImage {
    /// The source reference.
    pub source: ImageRef,
    /// When read from a disk mirror: the manifest digest its index recorded.
    pub digest: Option<Digest>,
    /// Where it goes and what it is.
    pub placement: Placement,
    /// Which platforms of a multi-arch index it keeps.
    pub platforms: PlatformFilter,
}

impl WantedImage {
    /// An image placed by default (source path, generic), every platform kept.
    pub fn generic(source: ImageRef) -> Self {
        WantedImage {
            source,
            digest: None,
            placement: Placement::default(),
            platforms: PlatformFilter::all(),
        }
    }
}

/// A release chosen for mirroring, for reports.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ReleaseInfo {
    /// Its version.
    pub version: String,
    /// Its architecture as release tags spell it (`x86_64`).
    pub arch: String,
    /// Its payload image.
    pub image: String,
    /// How many components its image-references list.
    pub components: usize,
    /// Whether it was chosen from OKD's update graph.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub okd: bool,
    /// Its KubeVirt container disk images (`platform.kubeVirtContainer`), by digest.
    #[serde(rename = "kubeVirtContainer", skip_serializing_if = "Vec::is_empty")]
    pub kubevirt: Vec<String>,
    /// What was skipped, to say on stderr.
    #[serde(skip)]
    pub warnings: Vec<String>,
}

/// A catalog filtered for mirroring, for reports.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CatalogInfo {
    /// The source catalog image.
    pub catalog: String,
    /// Kept bundles by package.
    pub bundles: BTreeMap<String, Vec<String>>,
    /// Bundles added to satisfy dependencies (`package/bundle`).
    pub dependencies: Vec<String>,
    /// Whether `olm.package.required` was followed (`--follow-dependencies`, and the entry
    /// does not set `skipDependencies`); oc-mirror v2 never follows it.
    #[serde(rename = "dependenciesFollowed")]
    pub dependencies_followed: bool,
    /// Requirements of kept bundles that nothing in the configuration mirrors.
    #[serde(rename = "unmetDependencies")]
    pub unmet_dependencies: Vec<UnmetDependency>,
    /// Images the kept bundles need.
    pub images: usize,
}

impl CatalogInfo {
    /// One warning per unmet requirement, naming the bundle, the requirement and the way out.
    pub fn warnings(&self) -> Vec<String> {
        let way_out = if self.dependencies_followed {
            "add a catalog that has it to mirror.operators"
        } else {
            "oc-mirror v2 does not follow dependencies either: list the package in mirror.operators, or run with --follow-dependencies"
        };
        self.unmet_dependencies
            .iter()
            .map(|u| {
                format!(
                    "catalog {}: bundle '{}' of package '{}' requires package '{}' ({}), which this configuration does not mirror ({}); {way_out}",
                    self.catalog, u.bundle, u.package, u.required_package, u.version_range, u.reason
                )
            })
            .collect()
    }
}

/// A requirement (`olm.package.required`) of a kept bundle that no catalog of the
/// configuration keeps a bundle for, for reports.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UnmetDependency {
    /// The requiring bundle.
    pub bundle: String,
    /// Its package.
    pub package: String,
    /// The required package.
    pub required_package: String,
    /// The required version range, as written.
    pub version_range: String,
    /// Why the requiring bundle's catalog does not meet it.
    pub reason: String,
}

/// What `mirror.platform` and `mirror.operators` add to a run.
#[derive(Default)]
pub struct Content {
    /// Release payloads, their components, bundle and related images.
    pub images: Vec<WantedImage>,
    /// The rebuilt catalogs, resolved already (their new blobs carried in `generated`).
    pub catalogs: Vec<ResolvedImage>,
    /// Releases chosen.
    pub releases: Vec<ReleaseInfo>,
    /// Catalogs filtered.
    pub catalog_reports: Vec<CatalogInfo>,
    /// What each filtered catalog keeps, in the order of `catalog_reports`.
    provided: Vec<select::Provided>,
}

/// How release tags spell an architecture.
pub fn release_arch(arch: &str) -> &str {
    match arch {
        "amd64" => "x86_64",
        "arm64" => "aarch64",
        other => other,
    }
}

/// Reads `mirror.platform` and `mirror.operators` of `cfg` (`origin` names it in errors);
/// `dependencies` says whether catalog selections follow `olm.package.required`. Releases keep
/// the platforms `mirror.platform` names; a catalog's images those of its `platforms`, else all.
pub async fn resolve(
    cfg: &ImageSetConfig,
    origin: &str,
    regs: &Arc<Registries>,
    graphs: GraphUrls<'_>,
    dependencies: select::Dependencies,
) -> Result<Content> {
    let mut content = Content::default();
    releases(cfg, origin, regs, graphs, &mut content).await?;
    for (i, op) in cfg.mirror.operators.iter().enumerate() {
        let at = CatalogAt {
            op,
            index: i,
            dependencies,
        };
        catalog(cfg, origin, at, regs, &mut content).await?;
    }
    drop_met_elsewhere(&mut content);
    Ok(content)
}

/// One `mirror.operators[]` entry and how to select from it.
#[derive(Clone, Copy)]
struct CatalogAt<'a> {
    op: &'a Operator,
    index: usize,
    dependencies: select::Dependencies,
}

/// A requirement one catalog leaves unmet that another catalog's selection meets is met: OLM
/// resolves dependencies across every catalog source on the cluster.
fn drop_met_elsewhere(content: &mut Content) {
    let provided = std::mem::take(&mut content.provided);
    for (i, info) in content.catalog_reports.iter_mut().enumerate() {
        info.unmet_dependencies.retain(|u| {
            !provided
                .iter()
                .enumerate()
                .any(|(j, p)| j != i && p.meets(&u.required_package, &u.version_range))
        });
    }
}

impl<'a> From<&'a ReleaseChannel> for ChannelQuery<'a> {
    /// What a `mirror.platform.channels[]` entry asks of the update graph.
    fn from(c: &'a ReleaseChannel) -> Self {
        ChannelQuery {
            name: &c.name,
            min_version: c.min_version.as_deref(),
            max_version: c.max_version.as_deref(),
            shortest_path: c.shortest_path,
            full: c.full,
        }
    }
}

/// Fetches the update graph of `channel` for `arch` from `url`; `flag` names the option that
/// sets it.
async fn fetch_graph(url: &str, flag: &str, channel: &str, arch: &str) -> Result<Graph> {
    if let Some(path) = url.strip_prefix("file://") {
        let path = path.replace("{arch}", arch);
        let bytes =
            fs_err::read(&path).with_context(|| format!("reading the update graph ({flag})"))?;
        return Graph::from_json(&bytes, &path);
    }
    if !(url.starts_with("https://") || url.starts_with("http://")) {
        bail!("{flag} '{url}' must be an http(s) URL or file://PATH");
    }
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(60))
        .build()?;
    let resp = client
        .get(url)
        .query(&[("channel", channel), ("arch", arch)])
        .header("Accept", "application/json")
        .send()
        .await
        .map_err(|e| {
            anyhow::anyhow!(crate::oci::registry::describe_transport_error(url, &e)).context(
                format!(
                "fetching the update graph; on an air-gapped side pass {flag} file://GRAPH.json"
            ),
            )
        })?;
    if !resp.status().is_success() {
        bail!(
            "the update graph at {url} answered {} for channel {channel}, arch {arch}",
            resp.status()
        );
    }
    let bytes = crate::oci::stream::read_body(resp, crate::bounded::LAYOUT_FILE_MAX as usize)
        .await
        .with_context(|| format!("reading the update graph from {url}"))?;
    Graph::from_json(&bytes, url)
}

/// One release payload to mirror.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Payload {
    /// Its image.
    image: ImageRef,
    /// Its version, when the graph gave it.
    version: Option<String>,
    /// The graph architecture it was chosen for.
    arch: String,
    /// Chosen from OKD's graph.
    okd: bool,
}

impl Payload {
    /// The tag its release image lands under in `openshift/release-images`, which its
    /// components' and KubeVirt container disk's tags in `openshift/release` start with:
    /// `<version>-<arch>` as OCP's release images are tagged (`ocp-release:4.18.3-x86_64`), the
    /// version alone for OKD's (`scos-release:4.18.0-okd-scos.1`), so that it is the source
    /// tag, as oc-mirror v2 takes it from the release's `docker-reference`.
    fn release_tag(&self, version: &str) -> String {
        if self.okd {
            version.to_string()
        } else {
            format!("{version}-{}", release_arch(&self.arch))
        }
    }
}

async fn releases(
    cfg: &ImageSetConfig,
    origin: &str,
    regs: &Arc<Registries>,
    graphs: GraphUrls<'_>,
    content: &mut Content,
) -> Result<()> {
    let payloads = chosen_payloads(cfg, origin, graphs).await?;
    let platforms = cfg.release_platforms();
    let source = Source::Registry(regs.clone());
    for payload in payloads {
        let image = &payload.image;
        let resolved = plan::resolve(&source, image, None, &platforms, None)
            .await
            .with_context(|| format!("resolving release image {image}"))?;
        let (manifest, _) = first_image(&resolved)?;
        let config = read_blob(regs, image, &config_digest(&manifest)?).await?;
        let version = match &payload.version {
            Some(v) => v.clone(),
            None => release::version_label(&config).with_context(|| {
                format!("{image} has no io.openshift.release label: is it a release image?")
            })?,
        };
        let files = read_image_dir(regs, image, &manifest, "/release-manifests").await?;
        let refs = files.get("image-references").with_context(|| {
            format!(
                "{image} has no {}: is it a release image?",
                release::IMAGE_REFERENCES
            )
        })?;
        let components = release::components(refs, &image.to_string())?;
        let release_tag = payload.release_tag(&version);
        let mut kubevirt = Vec::new();
        let mut warnings = Vec::new();
        if cfg.mirror.platform.kube_virt_container {
            let (found, skipped) = kubevirt_images(cfg, image, &files)?;
            kubevirt = found;
            warnings = skipped;
        }
        let mut info = ReleaseInfo {
            version: version.clone(),
            arch: release_arch(&payload.arch).to_string(),
            image: image.to_string(),
            components: components.len(),
            okd: payload.okd,
            kubevirt: Vec::new(),
            warnings,
        };
        let mut want = |source: ImageRef, repository: &str, tag: String| {
            content.images.push(WantedImage {
                source,
                digest: None,
                placement: Placement {
                    repository: Some(repository.to_string()),
                    tag: Some(tag),
                    category: Category::Release,
                },
                platforms: platforms.clone(),
            })
        };
        want(
            payload.image.clone(),
            release::RELEASE_IMAGES_REPO,
            release_tag.clone(),
        );
        // Tagged as oc-mirror v2 tags them (`4.18.3-x86_64-etcd`), so a registry that
        // collects untagged manifests keeps them.
        for c in components {
            let tag = format!("{release_tag}-{}", c.name);
            want(c.image, release::COMPONENTS_REPO, tag);
        }
        let several = kubevirt.len() > 1;
        for k in kubevirt {
            let mut tag = format!("{release_tag}-{}", release::KUBEVIRT_NAME);
            if several {
                tag = format!("{tag}-{}", k.arch);
            }
            info.kubevirt.push(k.image.to_string());
            want(k.image, release::COMPONENTS_REPO, tag);
        }
        content.releases.push(info);
    }
    Ok(())
}

/// The KubeVirt container disk images of one release (`platform.kubeVirtContainer`), and the
/// architectures skipped, as warnings.
fn kubevirt_images(
    cfg: &ImageSetConfig,
    image: &ImageRef,
    files: &BTreeMap<String, Vec<u8>>,
) -> Result<(Vec<release::KubeVirtImage>, Vec<String>)> {
    let (keys, skipped) = cfg.kubevirt_arch_keys();
    let name = release::COREOS_BOOTIMAGES.trim_start_matches("release-manifests/");
    let found = release::kubevirt_images(
        files.get(name).map(Vec::as_slice),
        keys.as_deref(),
        &image.to_string(),
    )?;
    Ok((found, skipped))
}

/// The release payloads `mirror.platform` names: `release` as written, and each channel's
/// releases chosen from its product's update graph (OCP's, or OKD's for `type: okd`) per
/// architecture (the multi-arch graph when `platforms` filters the multi-arch payload); in
/// version order, once each. Each channel is read on its own: there is no cross-channel upgrade
/// calculation here for OKD channels to be left out of, as oc-mirror v2 leaves them out of its
/// own (`getCrossChannelDownloads`).
async fn chosen_payloads(
    cfg: &ImageSetConfig,
    origin: &str,
    graphs: GraphUrls<'_>,
) -> Result<Vec<Payload>> {
    let platform = &cfg.mirror.platform;
    let mut payloads: Vec<Payload> = Vec::new();
    let graph_arches = cfg.graph_architectures();
    if let Some(r) = platform.release.as_deref().filter(|r| !r.is_empty()) {
        let image = ImageRef::parse(r).map_err(|e| {
            anyhow::anyhow!("{origin}: mirror.platform.release '{r}': {}", e.reason)
        })?;
        payloads.push(Payload {
            image,
            version: None,
            arch: graph_arches[0].clone(),
            okd: false,
        });
    }
    for (i, channel) in platform.channels.iter().enumerate() {
        let path = format!("mirror.platform.channels[{i}]");
        let okd = channel.platform_type == PlatformType::Okd;
        let (url, flag) = if okd {
            (graphs.okd, "--okd-graph-url")
        } else {
            (graphs.ocp, "--graph-url")
        };
        for arch in &graph_arches {
            let graph = fetch_graph(url, flag, &channel.name, arch).await?;
            let chosen = graph
                .releases(&ChannelQuery::from(channel), &path)
                .with_context(|| format!("{origin}: {path} ({})", channel.name))?;
            for r in chosen {
                let image = ImageRef::parse(&r.payload).map_err(|e| {
                    anyhow::anyhow!(
                        "the update graph lists release {} with payload '{}': {}",
                        r.version,
                        r.payload,
                        e.reason
                    )
                })?;
                payloads.push(Payload {
                    image,
                    version: Some(r.version.to_string()),
                    arch: arch.to_string(),
                    okd,
                });
            }
        }
    }
    let key = |p: &Payload| {
        let version = p
            .version
            .as_deref()
            .and_then(|s| semver::Version::parse(s).ok());
        (version, p.arch.clone(), p.image.clone(), p.okd)
    };
    payloads.sort_by_key(key);
    payloads.dedup();
    Ok(payloads)
}

/// The first single-platform manifest of a resolved image (the image itself, or its first
/// kept child), parsed.
fn first_image(resolved: &ResolvedImage) -> Result<(Box<OciImageManifest>, RawManifest)> {
    let raw = match resolved.children.first() {
        Some(c) => c.manifest.clone(),
        None => resolved.root.clone(),
    };
    match raw.parse()? {
        Parsed::Image(m) => Ok((m, raw)),
        Parsed::Index(_) => bail!("{}: nested indexes are not supported", resolved.source),
    }
}

fn config_digest(m: &OciImageManifest) -> Result<Digest> {
    Ok(m.config.digest.parse()?)
}

/// Reads a small blob (a config) whole, verified.
async fn read_blob(regs: &Arc<Registries>, image: &ImageRef, digest: &Digest) -> Result<Bytes> {
    Source::Registry(regs.clone())
        .small_blob(image, digest)
        .await
}

/// Filters one catalog and rebuilds its image.
async fn catalog(
    cfg: &ImageSetConfig,
    origin: &str,
    at_entry: CatalogAt<'_>,
    regs: &Arc<Registries>,
    content: &mut Content,
) -> Result<()> {
    let CatalogAt {
        op,
        index,
        dependencies,
    } = at_entry;
    let path = format!("mirror.operators[{index}]");
    let at = |p: &str| place(cfg, origin, p);
    let platforms = cfg.catalog_platforms(index);
    let from = catalog_origin(op, &at(&format!("{path}.catalog")), regs)?;
    let CatalogOrigin {
        source,
        image,
        root,
        local,
    } = from;
    let label = local
        .as_ref()
        .map_or_else(|| image.to_string(), |l| l.label.clone());
    let resolved = match root {
        Some(root) => plan::resolve_root(&source, &image, root, &platforms).await,
        None => plan::resolve(&source, &image, None, &platforms, None).await,
    }
    .with_context(|| format!("resolving catalog {label} ({path})"))?;
    let (manifest, _) = first_image(&resolved)?;
    let config = source
        .small_blob(&image, &config_digest(&manifest)?)
        .await?;
    let config_dir = configs_label(&config).with_context(|| {
        format!(
            "{label} has no {} label: it is not a file-based catalog (opm 1.19 or later)",
            layers::CONFIGS_LABEL
        )
    })?;
    let blobs = match &source {
        Source::Registry(regs) => BlobOrigin::Registry(regs.clone()),
        Source::Layout(layout) => BlobOrigin::Layout(layout.clone()),
    };
    let files = spool_image_dir_from(&blobs, &image, &manifest, &config_dir).await?;
    let cache_dir = rebuild::cache_dir_of(&config);
    let (selection, layer) =
        select_and_layer(files, op, index, dependencies, &config_dir, cache_dir)
            .await
            .map_err(|e| match e.downcast_ref::<select::SelectError>() {
                Some(select::SelectError::Config { path, .. }) => {
                    anyhow::anyhow!("{}", e.to_string().replacen(path.as_str(), &at(path), 1))
                }
                Some(select::SelectError::Read(r)) => {
                    anyhow::anyhow!("reading catalog {label}: {r}")
                }
                Some(_) => anyhow::anyhow!("catalog {label}: {e}"),
                None => e.context(format!("catalog {label}")),
            })?;
    let known = (config_digest(&manifest)?, config.clone());
    let mut rebuilt = rebuild_image(
        &source,
        &resolved,
        &layer,
        Some(known),
        &rebuild::Rewrite::CATALOG,
    )
    .await?;
    rebuilt.placement = Placement {
        repository: op.target_catalog.clone().filter(|s| !s.is_empty()),
        tag: op.target_tag.clone().filter(|s| !s.is_empty()),
        category: Category::Catalog,
    };
    if local.is_some() {
        // As oc-mirror places an `oci://` catalog: the base name (or targetCatalog) at
        // targetTag, else `latest`.
        rebuilt.placement.repository = Some(image.repository.clone());
        rebuilt.placement.tag = image.tag.clone();
    }
    rebuilt.local = local;
    let followed = dependencies == select::Dependencies::Follow && !op.skip_dependencies;
    add_selection(&label, &selection, followed, &platforms, content)?;
    content.catalogs.push(rebuilt);
    Ok(())
}

/// The selection of `op` from a catalog's spooled files, and the rebuilt configs layer. Off the
/// runtime's threads: parsing a full-size catalog takes seconds of CPU. `full: true` without
/// packages is written into the layer as it is read ([`select::stream_whole`]); any other
/// selection is read keeping whole only what it keeps ([`select::select_reading`]).
async fn select_and_layer(
    files: layers::SpooledFiles,
    op: &Operator,
    index: usize,
    dependencies: select::Dependencies,
    config_dir: &str,
    cache_dir: Option<String>,
) -> Result<(select::Selection, rebuild::ConfigsLayer)> {
    let operator = op.clone();
    let config_dir = config_dir.to_string();
    tokio::task::spawn_blocking(move || {
        if operator.packages.is_empty() && operator.full {
            let keep = select::UnknownSchemas::Keep;
            return select::stream_whole(&files, keep, &config_dir, cache_dir.as_deref());
        }
        let mut read = |keep: fbc::Keep<'_>| {
            fbc::Catalog::read(files.iter(), keep).map(|(catalog, _)| catalog)
        };
        let selection = select::select_reading(&mut read, &operator, index, dependencies)?;
        let rendered = selection.render(select::UnknownSchemas::Keep);
        let layer = rebuild::configs_layer(&rendered, &config_dir, cache_dir.as_deref())?;
        Ok((selection, layer))
    })
    .await
    .context("the catalog reading task failed")?
}

/// Where a catalog is read from: its registry, or the OCI layout an `oci://` catalog names.
struct CatalogOrigin {
    /// Where its manifests and blobs are.
    source: Source,
    /// Its reference; for a layout, `localhost/` and where it goes (repository and tag), so
    /// a disk mirror names it by where it lands.
    image: ImageRef,
    /// For a layout, its top manifest, read already.
    root: Option<RawManifest>,
    /// For a layout, the layout and its `oci://` name.
    local: Option<plan::LocalOrigin>,
}

/// Where `op`'s catalog is read from (`at` names its field in errors).
fn catalog_origin(op: &Operator, at: &str, regs: &Arc<Registries>) -> Result<CatalogOrigin> {
    let Some(parsed) = LayoutCatalog::parse(&op.catalog) else {
        let image = ImageRef::parse(&op.catalog)
            .map_err(|e| anyhow::anyhow!("{at}: '{}': {}", op.catalog, e.reason))?;
        return Ok(CatalogOrigin {
            source: Source::Registry(regs.clone()),
            image,
            root: None,
            local: None,
        });
    };
    let catalog = parsed.map_err(|why| anyhow::anyhow!("{at}: {why}"))?;
    let label = catalog.label();
    let layout = OciLayout::open(&catalog.path).with_context(|| {
        format!("{at}: {label}: name a directory holding the catalog image as an OCI image layout (skopeo copy docker://CATALOG oci:DIR)")
    })?;
    let root = layout_root(&layout, &catalog, &label)?;
    let repository = catalog.repository(op);
    let tag = LayoutCatalog::tag(op);
    let image = ImageRef::parse(&format!("localhost/{repository}:{tag}"))
        .map_err(|e| anyhow::anyhow!("{at}: {label}: {}", e.reason))?;
    Ok(CatalogOrigin {
        source: Source::Layout(layout.clone()),
        image,
        root: Some(root),
        local: Some(plan::LocalOrigin { layout, label }),
    })
}

/// The catalog image of a layout, as oc-mirror v2 reads it (`extractOCIConfigLayers`,
/// `internal/pkg/operator/collector.go`): the manifest an `@sha256:` pins; else `index.json`'s
/// one entry; else, when it lists several (per-platform manifests), `index.json` itself read
/// as the image's index (`ConvertOCIIndexToSingleManifest`), digest and all.
fn layout_root(layout: &OciLayout, catalog: &LayoutCatalog, label: &str) -> Result<RawManifest> {
    let digest = match &catalog.digest {
        Some(d) => d.clone(),
        None => {
            let entries = layout.index()?;
            match entries.as_slice() {
                [] => bail!("{label}: index.json lists no image"),
                [one] => one.digest.clone(),
                _ => {
                    let bytes = fs_err::read(layout.root().join("index.json"))?;
                    return Ok(RawManifest::new(
                        Bytes::from(bytes),
                        Some(crate::oci::manifest::OCI_IMAGE_INDEX_MEDIA_TYPE),
                    ));
                }
            }
        }
    };
    if layout.blob_size(&digest).is_none() {
        bail!("{label}: the layout holds no manifest {digest}");
    }
    let bytes = layout
        .read_verified(&digest)
        .with_context(|| format!("{label}: reading manifest {digest}"))?;
    Ok(RawManifest::new(bytes, None))
}

/// A field's place in the configuration as `file:line:col: path`, or its nearest written
/// parent's (an absent defaultChannel is reported where its package is).
fn place(cfg: &ImageSetConfig, origin: &str, path: &str) -> String {
    let mut probe = path;
    loop {
        if let Some(l) = cfg.location(probe) {
            return format!("{origin}:{}:{}: {path}", l.line, l.column);
        }
        match probe.rfind(['.', '[']) {
            Some(i) => probe = &probe[..i],
            None => return format!("{origin}: {path}"),
        }
    }
}

/// Reports a catalog's selection and wants every image its kept bundles name.
fn add_selection(
    image: &str,
    selection: &select::Selection,
    followed: bool,
    platforms: &PlatformFilter,
    content: &mut Content,
) -> Result<()> {
    content.catalog_reports.push(CatalogInfo {
        catalog: image.to_string(),
        bundles: selection
            .bundle_names()
            .into_iter()
            .map(|(p, b)| (p.to_string(), b.into_iter().map(str::to_string).collect()))
            .collect(),
        dependencies: selection
            .dependencies
            .iter()
            .map(|d| format!("{}/{}", d.package, d.bundle))
            .collect(),
        dependencies_followed: followed,
        unmet_dependencies: selection
            .unmet
            .iter()
            .map(|u| UnmetDependency {
                bundle: u.bundle.clone(),
                package: u.package.clone(),
                required_package: u.required.clone(),
                version_range: u.range.clone(),
                reason: u.reason.clone(),
            })
            .collect(),
        images: selection.images.len(),
    });
    content.provided.push(select::Provided::of(selection));
    for name in &selection.images {
        let r = ImageRef::parse(name).map_err(|e| {
            anyhow::anyhow!(
                "catalog {image}: a kept bundle names image '{name}': {}",
                e.reason
            )
        })?;
        content.images.push(WantedImage {
            source: r,
            digest: None,
            placement: Placement {
                category: Category::Operator,
                ..Placement::default()
            },
            platforms: platforms.clone(),
        });
    }
    Ok(())
}

/// The config directory a catalog image's label names.
fn configs_label(config: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(config).ok()?;
    v.get("config")?
        .get("Labels")?
        .get(layers::CONFIGS_LABEL)?
        .as_str()
        .map(str::to_string)
}

/// The rebuilt catalog (or graph data image): every kept platform's manifest with `layer`
/// added and its config changed as `rewrite` says, and an index over them when the source was
/// an index. `known` is a config already read (digest, bytes).
pub(super) async fn rebuild_image(
    source: &Source,
    resolved: &ResolvedImage,
    layer: &rebuild::ConfigsLayer,
    known: Option<(Digest, Bytes)>,
    rewrite: &rebuild::Rewrite,
) -> Result<ResolvedImage> {
    let image = &resolved.source;
    let mut out = ResolvedImage::new(image.clone(), resolved.root.clone());
    out.rebuilt_from = Some(resolved.root.digest.clone());
    out.platforms = resolved.platforms.clone();
    out.dropped = resolved.dropped.clone();
    out.filter = resolved.filter.clone();
    out.generated
        .push((layer.digest.clone(), layer.bytes.clone()));
    let sources: Vec<(RawManifest, Option<String>)> = if resolved.children.is_empty() {
        vec![(resolved.root.clone(), None)]
    } else {
        resolved
            .children
            .iter()
            .map(|c| (c.manifest.clone(), c.platform.clone()))
            .collect()
    };
    let mut replaced = BTreeMap::new();
    let mut seen = std::collections::BTreeSet::new();
    for (raw, platform) in sources {
        let Parsed::Image(m) = raw.parse()? else {
            bail!("{image}: nested indexes are not supported");
        };
        // The first platform's config was read already, for the configs label.
        let digest = config_digest(&m)?;
        let config = match &known {
            Some((d, bytes)) if *d == digest => bytes.clone(),
            _ => source.small_blob(image, &digest).await?,
        };
        let new = rebuild::rebuild_manifest_with(&raw, &config, layer, rewrite)
            .with_context(|| format!("rebuilding {image}"))?;
        let Parsed::Image(nm) = new.manifest.parse()? else {
            bail!("{image}: the rebuilt manifest is not an image manifest");
        };
        for d in std::iter::once(&nm.config).chain(nm.layers.iter()) {
            let digest: Digest = d.digest.parse()?;
            if seen.insert(digest.clone()) {
                out.blobs.push(plan::BlobDesc {
                    digest,
                    size: d.size.max(0) as u64,
                    media_type: d.media_type.clone(),
                });
            }
        }
        out.generated.push((
            new.config_digest.clone(),
            MadeBlob::Memory(new.config.clone()),
        ));
        replaced.insert(raw.digest.to_string(), new.manifest.clone());
        out.children.push(Child {
            manifest: new.manifest,
            platform,
        });
    }
    if resolved.children.is_empty() {
        out.root = out.children.pop().expect("one manifest").manifest;
    } else {
        out.root = rebuild::rebuild_index(&resolved.root, &replaced)?;
        // Only the kept platforms are listed: nothing was dropped from the new index.
        out.dropped.clear();
    }
    Ok(out)
}
