//! What a run was asked to mirror: the images an ImageSetConfiguration names (releases,
//! catalogs, additional images, minus the blocked ones) or those a disk mirror holds, and
//! their resolution to manifests and blobs.

use super::content::{self, WantedImage};
use super::plan::{self, ResolvedImage, Source};
use super::resolve::select::Dependencies;
use super::settings::MirrorInput;
use super::signatures::{Attached, Finder};
use super::{cache, config, recorded};
use crate::oci::digest::Digest;
use crate::oci::layout::OciLayout;
use crate::oci::reference::{valid_repository, ImageRef};
use crate::oci::registry::Registries;
use crate::openshift::record::ConfigInfo;
use anyhow::{bail, Context, Result};
use futures_util::StreamExt;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What a run was asked to mirror.
pub(super) struct Wanted {
    pub(super) images: Vec<WantedImage>,
    /// Images this run built, already resolved: rebuilt catalogs, packed Helm charts, OCI
    /// charts (resolved to read them) and the graph data image.
    pub(super) catalogs: Vec<ResolvedImage>,
    /// Images left out by `mirror.blockedImages`, with the pattern that matched.
    pub(super) blocked: Vec<(ImageRef, String)>,
    /// Additional images left out as oc-mirror leaves them out (an invalid `targetRepo`), with
    /// oc-mirror's warning.
    pub(super) ignored: Vec<(ImageRef, String)>,
    pub(super) config: Option<ConfigInfo>,
    pub(super) source_label: String,
    pub(super) releases: Vec<content::ReleaseInfo>,
    pub(super) catalog_reports: Vec<content::CatalogInfo>,
    /// For a disk mirror: how it was checked against its record.
    pub(super) layout_check: Option<recorded::LayoutCheck>,
    /// For a disk mirror: the entries that are signatures, attestations or referrers of
    /// another, by source reference.
    pub(super) attached: HashMap<ImageRef, Attached>,
    /// The Helm charts (`mirror.helm`), for reports; the charts themselves are in `catalogs`.
    pub(super) charts: Vec<super::helm::ChartInfo>,
    /// The update graph data image (`platform.graph`), for reports; the image is in `catalogs`.
    pub(super) graph: Option<super::graph_image::GraphInfo>,
}

/// Where a configuration's upstream content that is not in registries comes from: the update
/// graphs (`--graph-url`, `--okd-graph-url`), and for `platform.graph` the graph data (`--graph-data-url`) and the
/// image it is layered on (`--graph-base-image`).
pub(super) struct Upstream<'a> {
    pub(super) graph_url: &'a str,
    pub(super) okd_graph_url: &'a str,
    pub(super) graph_data_url: &'a str,
    pub(super) graph_base_image: &'a str,
}

impl<'a> Upstream<'a> {
    /// The run's upstream settings.
    pub(super) fn of(settings: &'a super::settings::MirrorSettings) -> Self {
        Upstream {
            graph_url: &settings.graph_url,
            okd_graph_url: &settings.okd_graph_url,
            graph_data_url: &settings.graph_data_url,
            graph_base_image: &settings.graph_base_image,
        }
    }

    /// The update graphs release channels are resolved against.
    pub(super) fn graphs(&self) -> content::GraphUrls<'a> {
        content::GraphUrls {
            ocp: self.graph_url,
            okd: self.okd_graph_url,
        }
    }
}

/// What an ImageSetConfiguration asks for: its additional images, releases, catalogs, charts
/// and graph image, each image once, minus the blocked ones.
async fn wanted_from_config(
    path: &Path,
    regs: &Arc<Registries>,
    upstream: &Upstream<'_>,
    dependencies: Dependencies,
) -> Result<Wanted> {
    let origin = path.display().to_string();
    let cfg = config::load(path)?;
    cfg.ensure_supported(&origin)?;
    cfg.check_offline(&origin)?;
    let patterns = cfg.blocked_images();
    let mut blocked = Vec::new();
    let mut ignored = Vec::new();
    let additional = additional_images(&cfg, &origin, &patterns, &mut blocked, &mut ignored)?;
    let mut content =
        content::resolve(&cfg, &origin, regs, upstream.graphs(), dependencies).await?;
    let helm = super::helm::resolve(&cfg, &origin, regs).await?;
    content.catalogs.extend(helm.charts);
    let graph = if cfg.mirror.platform.graph {
        let (image, info) =
            super::graph_image::build(regs, upstream.graph_data_url, upstream.graph_base_image)
                .await?;
        content.catalogs.push(image);
        Some(info)
    } else {
        None
    };
    let wanted = content
        .images
        .into_iter()
        .chain(additional)
        .chain(helm.images);
    let images = each_once_unblocked(wanted, &patterns, &mut blocked);
    if images.is_empty() && blocked.is_empty() && content.catalogs.is_empty() {
        bail!("{origin}: names nothing to mirror: add mirror.platform, mirror.operators, mirror.additionalImages or mirror.helm");
    }
    if images.is_empty() && content.catalogs.is_empty() {
        bail!("{origin}: mirror.blockedImages blocks every image: there is nothing to mirror");
    }
    blocked.sort();
    blocked.dedup();
    let source_label = registries_label(&images, &content.catalogs);
    let bytes = fs_err::read(path).context("reading the ImageSetConfiguration")?;
    Ok(Wanted {
        images,
        catalogs: content.catalogs,
        blocked,
        ignored,
        config: Some(ConfigInfo {
            path: origin,
            sha256: Digest::of(&bytes).hex().to_string(),
        }),
        source_label,
        releases: content.releases,
        catalog_reports: content.catalog_reports,
        layout_check: None,
        attached: HashMap::new(),
        charts: helm.reports,
        graph,
    })
}

/// `mirror.additionalImages` as references, those a pattern blocks added to `blocked`; every
/// name that is not a reference is reported, all at once, before anything is contacted.
///
/// `targetRepo` and `targetTag` place an image as oc-mirror places it
/// (`resolveAdditionalImageSrcDest` in internal/pkg/additional/local_stored_collector.go): at
/// `<destination>/<targetRepo, else its own path>:<targetTag, else its own tag>`; an image by
/// tag and digest is pulled by digest and tagged as that. A `targetRepo` that is not a
/// repository path (oc-mirror's `IsValidPathComponent`) is not an error of the file: oc-mirror
/// warns `invalid targetRepo R for image I : SKIPPING` and goes on without the image (its e2e
/// test for config-88132-invalid.yaml expects exit 0), and so does bootstrap, the image's
/// status `ignored` with those words.
fn additional_images(
    cfg: &config::ImageSetConfig,
    origin: &str,
    patterns: &[(String, regex::Regex)],
    blocked: &mut Vec<(ImageRef, String)>,
    ignored: &mut Vec<(ImageRef, String)>,
) -> Result<Vec<WantedImage>> {
    let mut problems = Vec::new();
    let mut additional = Vec::new();
    for entry in cfg.additional_images() {
        let spec = &cfg.mirror.additional_images[entry.index];
        let target_repo = spec.target_repo.as_deref().filter(|t| !t.is_empty());
        let target_tag = spec.target_tag.as_deref().filter(|t| !t.is_empty());
        match ImageRef::parse(entry.name) {
            // Matched as written too (`ubi9:latest`), not only normalised.
            Ok(r) => match blocked_by(patterns, entry.name, &r) {
                Some(pattern) => blocked.push((r, pattern)),
                None if target_repo.is_some_and(|t| !valid_repository(t)) => ignored.push((
                    r,
                    format!(
                        "invalid targetRepo {} for image {} : SKIPPING (mirror.additionalImages[{}].targetRepo is not a repository path; oc-mirror leaves the image out the same way)",
                        target_repo.unwrap_or_default(),
                        entry.name,
                        entry.index
                    ),
                )),
                None => {
                    let mut w = WantedImage {
                        platforms: cfg.image_platforms(entry.index),
                        ..WantedImage::generic(r)
                    };
                    w.placement.repository = target_repo.map(str::to_string);
                    w.placement.tag = target_tag.map(str::to_string);
                    additional.push(w);
                }
            },
            Err(e) => problems.push(entry.error(origin, e.reason).to_string()),
        }
    }
    if !problems.is_empty() {
        bail!("{}", problems.join("\n"));
    }
    Ok(additional)
}

/// The wanted images, each once, in the order first wanted; those a pattern blocks added to
/// `blocked`.
fn each_once_unblocked(
    wanted: impl Iterator<Item = WantedImage>,
    patterns: &[(String, regex::Regex)],
    blocked: &mut Vec<(ImageRef, String)>,
) -> Vec<WantedImage> {
    let mut images: Vec<WantedImage> = Vec::new();
    let mut seen = std::collections::HashMap::new();
    for w in wanted {
        // An image wanted twice (two catalogs, a catalog and additionalImages) is mirrored
        // once, where it was first wanted, keeping every platform either use keeps.
        if let Some(&at) = seen.get(&w.source) {
            let first: &mut WantedImage = &mut images[at];
            first.platforms = first.platforms.union(&w.platforms);
            continue;
        }
        match blocked_by(patterns, &w.source.to_string(), &w.source) {
            Some(pattern) => blocked.push((w.source, pattern)),
            None => {
                seen.insert(w.source.clone(), images.len());
                images.push(w);
            }
        }
    }
    images
}

/// The source of a configuration's run as reports name it: every registry an image or a
/// built image comes from, `docker://HOST`, and every OCI layout a catalog is read from,
/// `oci://PATH`; sorted, comma-separated.
fn registries_label(images: &[WantedImage], built: &[ResolvedImage]) -> String {
    let hosts: std::collections::BTreeSet<String> = images
        .iter()
        .map(|w| format!("docker://{}", w.source.registry))
        .chain(built.iter().map(|c| match &c.local {
            Some(l) => l.label.clone(),
            None => format!("docker://{}", c.source.registry),
        }))
        .collect();
    hosts.into_iter().collect::<Vec<_>>().join(", ")
}

/// The `mirror.blockedImages` pattern that blocks an image, if any. Like oc-mirror, a pattern
/// blocks an image when it matches anywhere in the reference; both the reference as written
/// and its normalised form (`docker.io/library/...`) are tried.
fn blocked_by(patterns: &[(String, regex::Regex)], written: &str, r: &ImageRef) -> Option<String> {
    let normalised = r.to_string();
    patterns
        .iter()
        .find(|(_, re)| re.is_match(written) || re.is_match(&normalised))
        .map(|(path, _)| path.clone())
}

/// What a disk mirror holds, checked against its mirror record before anything is pushed
/// (see [`recorded`]); with `remove_signatures`, without the signatures, attestations and
/// referrers it carries.
fn wanted_from_layout(
    layout: &OciLayout,
    accept_unrecorded: bool,
    remove_signatures: bool,
) -> Result<Wanted> {
    let listed = recorded::layout_images(layout)?;
    if listed.is_empty() {
        bail!(
            "{} holds no images (index.json is empty)",
            layout.root().display()
        );
    }
    let layout_check = recorded::check(layout, &listed, accept_unrecorded)?;
    let listed: Vec<_> = listed
        .into_iter()
        .filter(|i| !(remove_signatures && i.attached.is_some()))
        .collect();
    let attached = listed
        .iter()
        .filter_map(|i| Some((i.source.clone(), i.attached.clone()?)))
        .collect();
    let images = listed
        .into_iter()
        .map(|i| WantedImage {
            source: i.source,
            digest: Some(i.digest),
            placement: i.placement,
            // A disk mirror holds what its run kept; every child present is pushed.
            platforms: crate::oci::platform::PlatformFilter::all(),
        })
        .collect();
    Ok(Wanted {
        images,
        catalogs: Vec::new(),
        blocked: Vec::new(),
        ignored: Vec::new(),
        config: None,
        source_label: layout.label(),
        releases: Vec::new(),
        catalog_reports: Vec::new(),
        layout_check: Some(layout_check),
        attached,
        charts: Vec::new(),
        graph: None,
    })
}

/// Where images are read from and which: a disk mirror (`--from`) or the configuration's
/// registries (`-c`, its catalogs selected following dependencies or not as `dependencies`
/// says).
pub(super) async fn source_and_wanted(
    input: &MirrorInput,
    regs: &Arc<Registries>,
    (upstream, dependencies): (&Upstream<'_>, Dependencies),
    (accept_unrecorded, remove_signatures): (bool, bool),
    workdir: Option<&Path>,
) -> Result<(Source, Wanted)> {
    match input {
        MirrorInput::Disk(dir) => {
            let layout = OciLayout::open(dir)?;
            let wanted = wanted_from_layout(&layout, accept_unrecorded, remove_signatures)?;
            Ok((Source::Layout(layout), wanted))
        }
        MirrorInput::Archive(dir) => {
            let reader = super::archive::reader::ArchiveReader::open(dir)?;
            // Only the small files come out (index.json, the record): the blobs stay in
            // their chunks.
            let into = workdir
                .map(Path::to_path_buf)
                .unwrap_or_else(|| PathBuf::from(".bootstrap-work"))
                .join(format!("archive-{}", &reader.manifest_sha256()[..16]));
            let layout = reader.open_layout(&into)?;
            let wanted = wanted_from_layout(&layout, accept_unrecorded, remove_signatures)?;
            Ok((Source::Layout(layout), wanted))
        }
        MirrorInput::Config(cfg) => Ok((
            Source::Registry(regs.clone()),
            wanted_from_config(cfg, regs, upstream, dependencies).await?,
        )),
    }
}

/// Resolves every wanted image (`resolves` at a time), each to its manifests and blobs: per
/// image, the image and then the signatures, attestations and referrers `finder` found for
/// it at the source (none without a finder).
pub(super) async fn resolve_all(
    source: &Source,
    wanted: &Wanted,
    resolves: usize,
    cache: Option<&cache::ResolveCache>,
    finder: Option<&Finder>,
) -> Vec<Result<Vec<ResolvedImage>>> {
    futures_util::stream::iter(&wanted.images)
        .map(|w| async move {
            let mut resolved =
                plan::resolve(source, &w.source, w.digest.as_ref(), &w.platforms, cache)
                    .await
                    .with_context(|| format!("resolving {}", w.source))?;
            resolved.placement = w.placement.clone();
            resolved.attached = wanted.attached.get(&w.source).cloned();
            let attachments = match finder {
                Some(f) => f.attached_to(&resolved).await?,
                None => Vec::new(),
            };
            Ok(std::iter::once(resolved).chain(attachments).collect())
        })
        .buffered(resolves)
        .collect()
        .await
}
