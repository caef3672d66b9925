//! `bootstrap mirror`: copy images from registries to an OCI layout on disk, from a layout to a
//! registry, or from registry to registry, verified and recorded for auditors.

pub mod cache;
pub mod config;
pub mod content;
pub mod dryrun;
pub mod journal;
pub mod plan;
pub mod resolve;
pub mod space;
pub mod status;
pub mod transfer;

use crate::cli::{MirrorArgs, RegistryArgs};
use crate::oci::auth::AuthFile;
use crate::oci::digest::Digest;
use crate::oci::layout::OciLayout;
use crate::oci::reference::{ImageRef, RegistryTarget};
use crate::oci::registry::{Registries, RegistryOptions};
use crate::oci::retry::RetryPolicy;
use crate::oci::stall::StallPolicy;
use crate::openshift::{cluster, record, release};
use crate::output::{human_bytes, OutputFormat, Progress};
use anyhow::{bail, Context, Result};
use content::WantedImage;
use futures_util::StreamExt;
use plan::{ResolvedImage, Source};
use record::{BlobRecord, ConfigInfo, MirrorRecord, RunInfo};
use status::{ImageStatus, Outcome, StatusFile};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use transfer::{Destination, Transfer, TransferSettings};

/// A mirror location given on the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// `file://DIR`.
    Disk(PathBuf),
    /// `docker://HOST[:PORT][/PREFIX]`.
    Registry(RegistryTarget),
}

impl Location {
    /// Parses `file://DIR` or `docker://HOST[/PREFIX]`; `what` names the argument in errors.
    pub fn parse(input: &str, what: &str) -> Result<Self> {
        if let Some(dir) = input.strip_prefix("file://") {
            if dir.is_empty() {
                bail!("{what} '{input}' names no directory: write file://DIR");
            }
            return Ok(Location::Disk(PathBuf::from(dir)));
        }
        if let Some(rest) = input.strip_prefix("docker://") {
            return Ok(Location::Registry(
                RegistryTarget::parse(rest).with_context(|| format!("{what} '{input}'"))?,
            ));
        }
        bail!("{what} '{input}' must start with file:// (a directory) or docker:// (a registry)")
    }
}

/// Builds registry clients from the command line's registry flags.
pub fn registries(args: &RegistryArgs) -> Result<Registries> {
    registries_with(
        args,
        RetryPolicy::with_attempts(RetryPolicy::default().attempts),
    )
}

/// Builds registry clients that retry transient failures under `retry`.
pub fn registries_with(args: &RegistryArgs, retry: RetryPolicy) -> Result<Registries> {
    let authfile = AuthFile::load(args.authfile.as_deref())?;
    Registries::new(RegistryOptions {
        authfile,
        ca_bundle: args.ca_bundle.clone(),
        plain_http: args.plain_http.clone(),
        insecure_tls: args.insecure_skip_tls_verify.clone(),
        retry,
    })
}

/// What a run was asked to mirror.
struct Wanted {
    images: Vec<WantedImage>,
    /// Rebuilt catalogs, already resolved.
    catalogs: Vec<ResolvedImage>,
    /// Images left out by `mirror.blockedImages`, with the pattern that matched.
    blocked: Vec<(ImageRef, String)>,
    architectures: Vec<String>,
    config: Option<ConfigInfo>,
    source_label: String,
    releases: Vec<content::ReleaseInfo>,
    catalog_reports: Vec<content::CatalogInfo>,
}

async fn wanted_from_config(
    path: &Path,
    regs: &Arc<Registries>,
    graph_url: &str,
) -> Result<Wanted> {
    let origin = path.display().to_string();
    let cfg = config::load(path)?;
    cfg.ensure_supported(&origin)?;
    let mut problems = Vec::new();
    let mut additional = Vec::new();
    let patterns = cfg.blocked_images();
    let mut blocked = Vec::new();
    for entry in cfg.additional_images() {
        match ImageRef::parse(entry.name) {
            // Matched as written too (`ubi9:latest`), not only normalised.
            Ok(r) => match blocked_by(&patterns, entry.name, &r) {
                Some(pattern) => blocked.push((r, pattern)),
                None => additional.push(WantedImage::generic(r)),
            },
            Err(e) => problems.push(entry.error(&origin, e.reason).to_string()),
        }
    }
    if !problems.is_empty() {
        bail!("{}", problems.join("\n"));
    }
    let architectures = cfg.architectures();
    let content = content::resolve(&cfg, &origin, regs, graph_url, &architectures).await?;
    let mut images = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for w in content.images.into_iter().chain(additional) {
        if !seen.insert(w.source.clone()) {
            continue;
        }
        match blocked_by(&patterns, &w.source.to_string(), &w.source) {
            Some(pattern) => blocked.push((w.source, pattern)),
            None => images.push(w),
        }
    }
    if images.is_empty() && blocked.is_empty() && content.catalogs.is_empty() {
        bail!("{origin}: names nothing to mirror: add mirror.platform, mirror.operators or mirror.additionalImages");
    }
    if images.is_empty() && content.catalogs.is_empty() {
        bail!("{origin}: mirror.blockedImages blocks every image: there is nothing to mirror");
    }
    blocked.sort();
    blocked.dedup();
    let hosts: std::collections::BTreeSet<String> = images
        .iter()
        .map(|w| format!("docker://{}", w.source.registry))
        .chain(
            content
                .catalogs
                .iter()
                .map(|c| format!("docker://{}", c.source.registry)),
        )
        .collect();
    let source_label = hosts.into_iter().collect::<Vec<_>>().join(", ");
    let bytes = fs_err::read(path).context("reading the ImageSetConfiguration")?;
    Ok(Wanted {
        images,
        catalogs: content.catalogs,
        blocked,
        architectures,
        config: Some(ConfigInfo {
            path: origin,
            sha256: Digest::of(&bytes).hex().to_string(),
        }),
        source_label,
        releases: content.releases,
        catalog_reports: content.catalog_reports,
    })
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

fn wanted_from_layout(layout: &OciLayout) -> Result<Wanted> {
    let mut images = Vec::new();
    let index_path = layout.root().join("index.json");
    for entry in layout.index()? {
        let Some(name) = entry.ref_name() else {
            continue;
        };
        let r = ImageRef::parse(name).with_context(|| {
            format!(
                "{}/index.json names an image '{name}' that is not a full reference; was it written by bootstrap mirror?",
                layout.root().display()
            )
        })?;
        let placement = plan::placement_from_annotations(
            &entry.annotations,
            &format!("{} entry {name}", index_path.display()),
        )?;
        images.push(WantedImage {
            source: r,
            digest: Some(entry.digest.clone()),
            placement,
        });
    }
    if images.is_empty() {
        bail!(
            "{} holds no images (index.json is empty)",
            layout.root().display()
        );
    }
    Ok(Wanted {
        images,
        catalogs: Vec::new(),
        blocked: Vec::new(),
        architectures: Vec::new(),
        config: None,
        source_label: format!("file://{}", layout.root().display()),
        releases: Vec::new(),
        catalog_reports: Vec::new(),
    })
}

/// The summary a run prints.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Source.
    pub source: String,
    /// Destination.
    pub destination: String,
    /// Images mirrored.
    pub images: usize,
    /// Unique blobs in the set.
    pub blobs: usize,
    /// Blobs copied this run.
    pub blobs_copied: u64,
    /// Blobs mounted from another repository.
    pub blobs_mounted: u64,
    /// Blobs the destination already had.
    pub blobs_present: u64,
    /// Images the destination already held exactly; nothing of theirs was sent.
    pub images_unchanged: usize,
    /// Images that failed or were skipped (see the status file).
    pub images_failed: usize,
    /// Bytes moved this run.
    pub bytes_transferred: u64,
    /// Bytes an interrupted attempt or run had moved and this run continued from.
    pub bytes_resumed: u64,
    /// Transient failures that were retried.
    pub retries: u64,
    /// Bytes of the whole set.
    pub bytes_total: u64,
    /// Seconds the run took.
    pub seconds: f64,
    /// Where the mirror record was written.
    pub record: String,
    /// Where the per-image status was written.
    pub status: String,
    /// Where the cluster's mirror configuration (IDMS, ITMS, install-config snippet) was
    /// written; registry destinations only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_resources: Option<String>,
    /// Release payloads chosen (mirror.platform).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub releases: Vec<content::ReleaseInfo>,
    /// Catalogs filtered and rebuilt (mirror.operators).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub catalogs: Vec<content::CatalogInfo>,
}

/// Runs `bootstrap mirror`.
pub async fn run(args: MirrorArgs, output: OutputFormat) -> Result<ExitCode> {
    let started = record::now_rfc3339();
    let clock = std::time::Instant::now();
    let dest_loc = Location::parse(&args.destination, "the destination")?;
    let settings = transfer_settings(&args);
    let regs = Arc::new(registries_with(&args.registry, settings.retry)?);
    if let Some(dir) = &args.release_signatures {
        if !dir.is_dir() {
            bail!(
                "--release-signatures {}: not a directory (give the directory holding sha256=<hex>/signature-1 files)",
                dir.display()
            );
        }
    }
    if args.from.is_some() && matches!(dest_loc, Location::Disk(_)) {
        bail!("--from file://DIR pushes a disk mirror to a registry: the destination must be docker://HOST[/PREFIX]");
    }
    // Bad input is refused before anything is contacted; a configuration's releases and
    // catalogs are read only once the destination answered.
    let early = match (&args.from, &args.config) {
        (Some(_), _) => Some(source_and_wanted(&args, &regs).await?),
        (None, Some(path)) => {
            config::load(path)?.ensure_supported(&path.display().to_string())?;
            None
        }
        (None, None) => None,
    };
    let dest = connect_destination(&dest_loc, &regs).await?;
    let (source, mut wanted) = match early {
        Some(sw) => sw,
        None => source_and_wanted(&args, &regs).await?,
    };
    // A disk mirror that does not exist yet gets nothing written before input is known good,
    // and a dry run writes nothing at all.
    let cache = (!args.dry_run && !matches!(&dest, Destination::Layout(l) if !l.root().exists()))
        .then(|| cache::ResolveCache::new(&workdir_for(&dest, args.workdir.as_deref())));
    let resolved = resolve_all(&source, &wanted, settings.concurrency, cache.as_ref()).await;
    let mut statuses: Vec<ImageStatus> = wanted
        .blocked
        .iter()
        .map(|(image, pattern)| ImageStatus::blocked(image, pattern))
        .collect();
    let mut images = std::mem::take(&mut wanted.catalogs);
    for (image, result) in wanted.images.iter().map(|w| &w.source).zip(resolved) {
        match result {
            Ok(r) => images.push(r),
            // Bad input fails before anything is written, unless told to carry on.
            Err(e) if !args.continue_on_error => return Err(e),
            Err(e) => statuses.push(ImageStatus::failed(image, &e)),
        }
    }
    if args.dry_run {
        return dry_run(&args, source, dest, settings, &images, &wanted, output).await;
    }
    let fresh_dir = matches!(&dest, Destination::Layout(l) if !l.root().exists());
    let (dest, _lock, workdir) = open_destination(dest, args.workdir.as_deref())?;
    let journal = match &dest {
        Destination::Registry { .. } => {
            space::preflight_workdir(&workdir, args.ignore_free_space)?;
            Some(journal::Journal::open(&workdir)?)
        }
        Destination::Layout(_) => None,
    };
    let progress = Progress::new("mirror", 0);
    let transfer = Transfer::new(source, dest.clone(), settings, journal, progress);
    let unchanged = transfer
        .already_mirrored(&images, args.rewrite_filtered_indexes)
        .await;
    let mut done = Vec::new();
    let mut todo = Vec::new();
    for (image, record) in images.iter().zip(unchanged) {
        match record {
            Some(r) => done.push((image, r)),
            None => todo.push(image),
        }
    }
    let unchanged = done.len();
    let nodes = plan::blob_graph(todo.iter().copied());
    let total: u64 = nodes.iter().map(|n| n.blob.size).sum();
    if let Destination::Layout(layout) = &dest {
        if let Err(e) = space::preflight(layout, &nodes, args.ignore_free_space) {
            if fresh_dir {
                // Refused before anything was written: leave no empty layout behind.
                let _ = fs_err::remove_dir_all(layout.root());
            }
            return Err(e);
        }
    }
    transfer.progress.set_total(total);
    transfer.progress.println(&format!(
        "mirroring {} images ({} already at the destination; {} unique blobs, {}) from {} to {}",
        images.len(),
        unchanged,
        nodes.len(),
        human_bytes(total),
        wanted.source_label,
        args.destination
    ));
    let outcome = transfer.copy_blobs(nodes).await;
    transfer.progress.finish();
    for (digest, err) in &outcome.failed {
        // Said now: writing the record and status may fail too (a full disk), and this is
        // the cause.
        eprintln!("error: blob {digest}: {err}");
    }
    let (pushable, mut blocked) = status::split_by_blobs(&todo, &outcome);
    let pushed = transfer
        .push_manifests(&pushable, args.rewrite_filtered_indexes)
        .await?;
    let mut image_records = Vec::new();
    let mut mirrored = Vec::new();
    for (image, rec) in done {
        statuses.push(ImageStatus::ok(&image.source, &rec));
        image_records.push(rec);
        mirrored.push(image);
    }
    for (image, result) in pushable.iter().zip(pushed) {
        match result {
            Ok(rec) => {
                statuses.push(ImageStatus::ok(&image.source, &rec));
                image_records.push(rec);
                mirrored.push(image);
            }
            Err(e) => statuses.push(ImageStatus::failed(&image.source, &e)),
        }
    }
    statuses.append(&mut blocked);
    let stats = &transfer.stats;
    let run = RunInfo {
        tool: format!("bootstrap {}", env!("CARGO_PKG_VERSION")),
        config: wanted.config.clone(),
        source: wanted.source_label.clone(),
        destination: args.destination.clone(),
        started: started.clone(),
        finished: record::now_rfc3339(),
        images: image_records.len(),
        bytes_transferred: stats.bytes.load(Ordering::Relaxed),
    };
    let blobs = plan::blob_graph(mirrored.iter().copied())
        .iter()
        .map(|n| BlobRecord {
            digest: n.blob.digest.clone(),
            size: n.blob.size,
        })
        .collect();
    let mut rec = MirrorRecord::new(run, image_records, blobs);
    let stamp = file_stamp();
    let status = StatusFile::new(&wanted.source_label, &args.destination, started, statuses);
    let status_path = match (&args.status_file, &dest) {
        (Some(p), _) => p.clone(),
        (None, Destination::Layout(layout)) => layout.root().join(status::STATUS_FILE),
        (None, Destination::Registry { .. }) => {
            PathBuf::from(format!("mirror-status-{stamp}.json"))
        }
    };
    // Before the record: inside a disk mirror it is one of the files SHA256SUMS covers.
    status.write(&status_path)?;
    let record_path = write_record(&dest, &mut rec, args.record.clone(), &stamp)?;
    let cluster_dir = write_cluster_resources(
        &dest,
        &mirrored,
        &record_path,
        args.release_signatures.as_deref(),
    )?;
    let failed = status.failed + status.skipped;
    let summary = Summary {
        source: wanted.source_label,
        destination: args.destination,
        images: mirrored.len(),
        blobs: rec.blobs.len(),
        blobs_copied: stats.blobs_copied.load(Ordering::Relaxed),
        blobs_mounted: stats.blobs_mounted.load(Ordering::Relaxed),
        blobs_present: stats.blobs_present.load(Ordering::Relaxed),
        images_unchanged: unchanged,
        images_failed: failed,
        bytes_transferred: stats.bytes.load(Ordering::Relaxed),
        bytes_resumed: stats.bytes_resumed.load(Ordering::Relaxed),
        retries: stats.retries.load(Ordering::Relaxed),
        bytes_total: rec.blobs.iter().map(|b| b.size).sum(),
        seconds: clock.elapsed().as_secs_f64(),
        record: record_path.display().to_string(),
        status: status_path.display().to_string(),
        cluster_resources: cluster_dir.map(|d| d.display().to_string()),
        releases: wanted.releases,
        catalogs: wanted.catalog_reports,
    };
    print_summary(&summary, &mirrored, output)?;
    if failed > 0 {
        report_failures(&status, &status_path);
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// For a registry destination, writes the cluster's mirror configuration into
/// `cluster-resources/` beside the record; returns the directory when anything was written.
fn write_cluster_resources(
    dest: &Destination,
    mirrored: &[&ResolvedImage],
    record_path: &Path,
    signatures: Option<&Path>,
) -> Result<Option<PathBuf>> {
    let Destination::Registry { target, .. } = dest else {
        return Ok(None);
    };
    let images: Vec<cluster::MirroredImage> = mirrored
        .iter()
        .map(|img| cluster::MirroredImage {
            source: img.source.clone(),
            registry: target.registry.clone(),
            repository: target.repository_for(img.dest_path()),
            category: img.placement.category,
        })
        .collect();
    let dir = record_path
        .parent()
        .unwrap_or(Path::new("."))
        .join(cluster::DIR);
    let mut resources = cluster::ClusterResources::new(&images);
    for img in mirrored
        .iter()
        .filter(|i| i.placement.category == cluster::Category::Catalog)
    {
        let mut at = img
            .source
            .moved_to(&target.registry, &target.repository_for(img.dest_path()));
        at.tag = img.placement.tag.clone().or_else(|| img.source.tag.clone());
        at.digest = at.tag.is_none().then(|| img.root.digest.clone());
        resources.add_catalog(at);
    }
    if let Some(sig_dir) = signatures {
        for img in mirrored
            .iter()
            .filter(|i| i.placement.repository.as_deref() == Some(release::RELEASE_IMAGES_REPO))
        {
            let sigs = release_signatures(sig_dir, &img.root.digest)?;
            if sigs.is_empty() {
                eprintln!(
                    "warning: {} has no signature in {}: a cluster will not update to it without one",
                    img.source,
                    sig_dir.display()
                );
            }
            resources.add_signatures(img.root.digest.clone(), sigs);
        }
    }
    let written = resources.write(&dir)?;
    Ok((!written.is_empty()).then_some(dir))
}

/// The signatures of release `digest` in `dir`: `sha256=<hex>/signature-<n>` (the signature
/// store's layout) or `sha256-<hex>-<n>`, for n = 1, 2, ... until one is missing.
fn release_signatures(dir: &Path, digest: &Digest) -> Result<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    for n in 1.. {
        let store = dir
            .join(format!("sha256={}", digest.hex()))
            .join(format!("signature-{n}"));
        let flat = dir.join(format!("{}-{n}", digest.dashed()));
        match [store, flat].into_iter().find(|p| p.is_file()) {
            Some(p) => out.push(fs_err::read(&p).context("reading a release signature")?),
            None => break,
        }
    }
    Ok(out)
}

/// `--dry-run`: reports the plan and touches neither destination nor working directory.
async fn dry_run(
    args: &MirrorArgs,
    source: Source,
    dest: Destination,
    settings: TransferSettings,
    images: &[ResolvedImage],
    wanted: &Wanted,
    output: OutputFormat,
) -> Result<ExitCode> {
    let transfer = Transfer::new(source, dest, settings, None, Progress::new("plan", 0));
    let unchanged: Vec<bool> = transfer
        .already_mirrored(images, args.rewrite_filtered_indexes)
        .await
        .iter()
        .map(Option::is_some)
        .collect();
    let mut plan = dryrun::DryRun::new(
        &transfer,
        images,
        &unchanged,
        &wanted.source_label,
        &args.destination,
    );
    plan.releases = wanted.releases.clone();
    plan.catalogs = wanted.catalog_reports.clone();
    plan.report(
        &PathBuf::from(format!("mirror-dry-run-{}.json", file_stamp())),
        output,
    )?;
    Ok(ExitCode::SUCCESS)
}

/// The transfer's limits and failure handling, from the command line.
fn transfer_settings(args: &MirrorArgs) -> TransferSettings {
    TransferSettings {
        concurrency: args.max_concurrent_blobs.max(1),
        connections_per_registry: args.max_connections_per_registry.max(1),
        chunk_size: args.chunk_size * 1024 * 1024,
        retry: RetryPolicy::with_attempts(args.retries),
        stall: StallPolicy {
            window: std::time::Duration::from_secs(args.stall_timeout),
            floor: args.stall_floor,
        },
        continue_on_error: args.continue_on_error,
    }
}

/// Where images are read from and which: a disk mirror (`--from`) or the configuration's
/// registries (`-c`).
async fn source_and_wanted(args: &MirrorArgs, regs: &Arc<Registries>) -> Result<(Source, Wanted)> {
    match (&args.from, &args.config) {
        (Some(from), _) => match Location::parse(from, "--from")? {
            Location::Disk(dir) => {
                let layout = OciLayout::open(&dir)?;
                let wanted = wanted_from_layout(&layout)?;
                Ok((Source::Layout(layout), wanted))
            }
            Location::Registry(_) => bail!(
                "--from takes a disk mirror (file://DIR); to mirror from registries, name them in the ImageSetConfiguration (-c)"
            ),
        },
        (None, Some(cfg)) => Ok((
            Source::Registry(regs.clone()),
            wanted_from_config(cfg, regs, &args.graph_url).await?,
        )),
        (None, None) => bail!("name what to mirror: -c CONFIG, or --from file://DIR"),
    }
}

/// Says on stderr which images were not mirrored, why, and what to do.
fn report_failures(status: &StatusFile, status_path: &Path) {
    let not_mirrored = |s: &&ImageStatus| matches!(s.outcome, Outcome::Failed | Outcome::Skipped);
    for s in status.images.iter().filter(not_mirrored) {
        eprintln!(
            "error: {} {}: {}",
            s.source,
            s.outcome.as_str(),
            s.error.as_deref().unwrap_or("")
        );
    }
    eprintln!(
        "error: {} of {} images were not mirrored (see {}); run the same command again to continue",
        status.failed + status.skipped,
        status.images.len(),
        status_path.display()
    );
}

/// Reaches a registry destination first: an unreachable or refusing registry should fail in
/// seconds, not after the whole set was resolved. A disk destination is only checked here;
/// it is created after every image resolved, so bad input leaves nothing behind.
async fn connect_destination(dest: &Location, regs: &Registries) -> Result<Destination> {
    match dest {
        Location::Registry(target) => {
            let client = regs.client(&target.registry)?;
            client
                .ping()
                .await
                .context("checking the destination registry")?;
            Ok(Destination::Registry {
                client,
                target: target.clone(),
            })
        }
        Location::Disk(dir) => {
            if dir.exists() && !dir.is_dir() {
                bail!(
                    "destination {} exists and is not a directory",
                    dir.display()
                );
            }
            Ok(Destination::Layout(OciLayout::unopened(dir)))
        }
    }
}

/// The working directory: `--workdir`, else `DIR/.bootstrap` inside a disk mirror (hidden
/// files stay out of SHA256SUMS), else `./.bootstrap-work`.
fn workdir_for(dest: &Destination, workdir: Option<&Path>) -> PathBuf {
    match (workdir, dest) {
        (Some(w), _) => w.to_path_buf(),
        (None, Destination::Layout(l)) => l.root().join(".bootstrap"),
        (None, Destination::Registry { .. }) => PathBuf::from(".bootstrap-work"),
    }
}

/// Creates a disk destination and takes its lock; picks the working directory.
fn open_destination(
    dest: Destination,
    workdir: Option<&Path>,
) -> Result<(Destination, Option<std::fs::File>, PathBuf)> {
    let workdir = workdir_for(&dest, workdir);
    match dest {
        Destination::Layout(l) => {
            let layout = OciLayout::create(l.root())?;
            let lock = layout.lock()?;
            Ok((Destination::Layout(layout), Some(lock), workdir))
        }
        d => Ok((d, None, workdir)),
    }
}

/// `YYYYMMDDTHHMMSSZ`, for default file names.
fn file_stamp() -> String {
    time::OffsetDateTime::now_utc()
        .format(time::macros::format_description!(
            "[year][month][day]T[hour][minute][second]Z"
        ))
        .unwrap_or_default()
}

/// Writes the mirror record: inside a disk mirror (merged with the earlier runs' and with
/// `SHA256SUMS` renewed), or beside the run for a registry.
fn write_record(
    dest: &Destination,
    rec: &mut MirrorRecord,
    path: Option<PathBuf>,
    stamp: &str,
) -> Result<PathBuf> {
    match dest {
        Destination::Layout(layout) => {
            let path = layout.root().join(record::RECORD_FILE);
            if path.is_file() {
                let earlier = MirrorRecord::load(&path)?;
                rec.merge_earlier(earlier);
            }
            rec.write(&path)?;
            record::write_sums(layout.root())?;
            Ok(path)
        }
        Destination::Registry { .. } => {
            let path = path.unwrap_or_else(|| PathBuf::from(format!("mirror-record-{stamp}.json")));
            rec.write(&path)?;
            Ok(path)
        }
    }
}

async fn resolve_all(
    source: &Source,
    wanted: &Wanted,
    concurrency: usize,
    cache: Option<&cache::ResolveCache>,
) -> Vec<Result<ResolvedImage>> {
    futures_util::stream::iter(&wanted.images)
        .map(|w| async move {
            let arches = &wanted.architectures;
            let mut resolved = plan::resolve(source, &w.source, w.digest.as_ref(), arches, cache)
                .await
                .with_context(|| format!("resolving {}", w.source))?;
            resolved.placement = w.placement.clone();
            Ok(resolved)
        })
        .buffered(concurrency.max(1))
        .collect()
        .await
}

fn print_summary(s: &Summary, images: &[&ResolvedImage], output: OutputFormat) -> Result<()> {
    match output {
        OutputFormat::Json => println!("{}", serde_json::to_string_pretty(s)?),
        OutputFormat::Text => {
            for img in images {
                let platforms = if img.platforms.is_empty() {
                    String::new()
                } else {
                    format!(" [{}]", img.platforms.join(", "))
                };
                println!("{}  {}{}", img.root.digest, img.source, platforms);
            }
            println!(
                "mirrored {} images to {}: {} blobs ({} copied, {} mounted, {} already present), {} moved of {}, in {:.1}s",
                s.images,
                s.destination,
                s.blobs,
                s.blobs_copied,
                s.blobs_mounted,
                s.blobs_present,
                human_bytes(s.bytes_transferred),
                human_bytes(s.bytes_total),
                s.seconds
            );
            if s.bytes_resumed > 0 || s.retries > 0 {
                println!(
                    "continued {} from interrupted transfers; {} transient failures retried",
                    human_bytes(s.bytes_resumed),
                    s.retries
                );
            }
            if s.images_unchanged > 0 {
                println!(
                    "{} images were already at the destination",
                    s.images_unchanged
                );
            }
            for r in &s.releases {
                println!(
                    "release {} ({}): {} components, {}",
                    r.version, r.arch, r.components, r.image
                );
            }
            for c in &s.catalogs {
                let packages: Vec<String> = c
                    .bundles
                    .iter()
                    .map(|(p, b)| format!("{p} ({})", b.join(", ")))
                    .collect();
                println!(
                    "catalog {}: {} images; kept {}",
                    c.catalog,
                    c.images,
                    packages.join("; ")
                );
            }
            println!("record: {}", s.record);
            if let Some(dir) = &s.cluster_resources {
                println!("cluster resources: {dir}");
            }
            println!("status: {}", s.status);
        }
    }
    Ok(())
}
