//! `bootstrap mirror`: copy images from registries to an OCI layout on disk, from a layout to a
//! registry, or from registry to registry, verified and recorded for auditors.
//!
//! [`run`] is the run as named steps: prepare (check input, reach the destination, read what
//! is wanted), resolve, copy blobs, push manifests, and leave the record, the status and the
//! cluster resources behind.

pub mod archive;
pub mod cache;
pub mod config;
pub mod content;
mod destination;
pub mod dryrun;
pub mod graph_image;
pub mod helm;
pub mod journal;
mod outputs;
pub mod plan;
pub mod recorded;
pub mod report;
pub mod resolve;
pub mod settings;
pub mod signatures;
pub mod space;
pub mod status;
pub mod transfer;
mod wanted;

use crate::oci::reference::RegistryTarget;
use crate::oci::registry::Registries;
use crate::openshift::record;
use crate::output::{human_bytes, Progress};
use anyhow::{bail, Context, Result};
use plan::{ResolvedImage, Source};
use record::{BlobRecord, ImageRecord, MirrorRecord, RunInfo};
use report::{MirrorReport, MirrorResult, MirroredImage, Summary};
pub use settings::{MirrorInput, MirrorSettings};
use status::{ImageStatus, StatusFile};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use transfer::{Destination, Transfer};
use wanted::Wanted;

/// A mirror location given on the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// `file://DIR`.
    Disk(PathBuf),
    /// `docker://HOST[:PORT][/PREFIX]`.
    Registry(RegistryTarget),
    /// `archive://DIR`: tar chunks for removable media.
    Archive(PathBuf),
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
        if input.starts_with("archive://") {
            return archive::parse_location(input)
                .map(Location::Archive)
                .with_context(|| {
                    format!("{what} '{input}' names no directory: write archive://DIR")
                });
        }
        if let Some(rest) = input.strip_prefix("docker://") {
            return Ok(Location::Registry(
                RegistryTarget::parse(rest).with_context(|| format!("{what} '{input}'"))?,
            ));
        }
        bail!("{what} '{input}' must start with file:// (a directory), archive:// (tar chunks for removable media) or docker:// (a registry)")
    }
}

/// Runs `bootstrap mirror`: the report of what was mirrored (or, for a dry run, the plan).
/// Images that failed are in the report (and the status file); the run itself fails only when
/// it could not go on at all.
pub async fn run(settings: MirrorSettings) -> Result<MirrorResult> {
    let started = record::now_rfc3339();
    let clock = Instant::now();
    let regs = Arc::new(Registries::new(settings.registry.clone())?);
    let base = match (&settings.since, &settings.destination) {
        (Some(path), Location::Archive(_)) => Some(archive::writer::Base::load(path)?),
        (Some(_), _) => {
            bail!("--since writes a delta archive: the destination must be archive://DIR")
        }
        (None, _) => None,
    };
    let (source, mut wanted, dest) = prepare(&settings, &regs).await?;
    warn_unmet_dependencies(&wanted);
    let (images, statuses) = resolve_images(&settings, &source, &mut wanted, &dest).await?;
    let images = match &base {
        Some(b) => only_new(images, b)?,
        None => images,
    };
    if let Source::Layout(layout) = &source {
        recorded::check_blob_files(layout, &images)?;
        if let (Some(_), Destination::Registry { client, target }) =
            (layout.archive_reader(), &dest)
        {
            archive::push::check_base(client, target, layout, &images).await?;
        }
    }
    if settings.dry_run {
        return dry_run(&settings, source, dest, &images, &wanted, &statuses)
            .await
            .map(MirrorResult::Planned);
    }
    let fresh_dir = matches!(&dest, Destination::Layout(l) if !l.root().exists());
    let dest = attach_archive(&settings, dest, &images, base)?;
    let (dest, _lock, workdir) = destination::open_destination(dest, settings.workdir.as_deref())?;
    let journal = match &dest {
        Destination::Registry { .. } => {
            space::preflight_workdir(&workdir, settings.ignore_free_space)?;
            Some(journal::Journal::open(&workdir)?)
        }
        Destination::Layout(_) => None,
    };
    let progress = Progress::new("mirror", 0);
    let mut transfer_settings = settings.transfer.clone();
    transfer_settings.spool_dir = Some(workdir.join("spool"));
    let transfer = Transfer::new(source, dest, transfer_settings, journal, progress);
    let copied = copy(&settings, &transfer, &images, &wanted, fresh_dir).await?;
    let started = Started { at: started, clock };
    let (source_label, config) = (wanted.source_label.clone(), wanted.config.clone());
    let result = finish(&settings, &transfer, wanted, copied, statuses, started)?;
    match &transfer.dest {
        Destination::Layout(layout) if layout.archive_writer().is_some() => {
            seal_archive(&settings, layout, result, &source_label, config).await
        }
        _ => Ok(result),
    }
}

/// For a delta archive: the images the base did not carry (by top manifest); none is an error.
fn only_new(
    images: Vec<ResolvedImage>,
    base: &archive::writer::Base,
) -> Result<Vec<ResolvedImage>> {
    let total = images.len();
    // An image is left out only when the base carried all of it: its top manifest, every
    // child kept and every blob (a platform added since, under the same index, is carried).
    let whole_in_base = |i: &ResolvedImage| {
        base.images.contains(&i.root.digest)
            && i.children
                .iter()
                .all(|c| base.blobs.contains_key(&c.manifest.digest))
            && i.blobs.iter().all(|b| base.blobs.contains_key(&b.digest))
    };
    let kept: Vec<ResolvedImage> = images.into_iter().filter(|i| !whole_in_base(i)).collect();
    if kept.is_empty() {
        let from = base
            .reference
            .as_ref()
            .map(|b| b.path.as_str())
            .unwrap_or("");
        bail!("nothing is new since {from}: all {total} images are in it; no archive was written");
    }
    Ok(kept)
}

/// For an `archive://` destination: the writer, with every blob and manifest placed.
fn attach_archive(
    settings: &MirrorSettings,
    dest: Destination,
    images: &[ResolvedImage],
    base: Option<archive::writer::Base>,
) -> Result<Destination> {
    let (Location::Archive(dir), Destination::Layout(layout)) = (&settings.destination, &dest)
    else {
        return Ok(dest);
    };
    let nodes = plan::blob_graph(images.iter());
    // Refused before a chunk is laid out for them.
    space::check_blob_sizes(&nodes, settings.max_blob_size)?;
    let blobs = nodes
        .iter()
        .map(|n| (n.blob.digest.clone(), n.blob.size))
        .collect();
    let mut manifests = Vec::new();
    for img in images {
        manifests.push((img.root.digest.clone(), img.root.bytes.len() as u64));
        for c in &img.children {
            manifests.push((c.manifest.digest.clone(), c.manifest.bytes.len() as u64));
        }
    }
    let writer = archive::writer::ArchiveWriter::open(
        dir,
        settings.archive_size,
        blobs,
        manifests,
        base.unwrap_or_default(),
    )?;
    Ok(Destination::Layout(
        layout.clone().with_writer(Arc::new(writer)),
    ))
}

/// Seals a complete archive (the small files into the last chunk, manifest.json, SHA256SUMS,
/// the signature) and points the report at it. An archive with failed images stays
/// unfinished, to be completed by a rerun.
async fn seal_archive(
    settings: &MirrorSettings,
    layout: &crate::oci::layout::OciLayout,
    result: MirrorResult,
    source_label: &str,
    config: Option<record::ConfigInfo>,
) -> Result<MirrorResult> {
    let MirrorResult::Mirrored(mut report) = result else {
        return Ok(result);
    };
    let writer = layout.archive_writer().expect("an archive destination");
    if !report.complete() {
        tracing::warn!(
            "the archive in {} is not sealed: {} images did not make it; run the same command again to finish it",
            writer.dir().display(),
            report.summary.images_failed
        );
        return Ok(MirrorResult::Mirrored(report));
    }
    let (_, sealed) = writer.seal(layout, source_label, config).await?;
    report.summary.signature = sign_archive(settings, Path::new(&sealed.manifest))?;
    writer.finish()?;
    report.summary.record = sealed.manifest.clone();
    report.summary.status = format!(
        "{} in {}/{}",
        status::STATUS_FILE,
        sealed.dir,
        sealed.metadata_chunk
    );
    report.summary.archive = Some(Box::new(sealed));
    Ok(MirrorResult::Mirrored(report))
}

/// Signs an archive's manifest with `--sign-key` into `manifest.json.sig`.
fn sign_archive(
    settings: &MirrorSettings,
    manifest: &Path,
) -> Result<Option<Box<report::RecordSignature>>> {
    let Some(key) = &settings.sign_key else {
        return Ok(None);
    };
    let s = crate::sshsig::sign_file(key, manifest)
        .with_context(|| format!("signing the archive manifest {}", manifest.display()))?;
    // SHA256SUMS too: an auditor with OpenSSH alone checks it before `sha256sum -c`.
    let sums = manifest.with_file_name(archive::SUMS_FILE);
    crate::sshsig::sign_file(key, &sums).with_context(|| format!("signing {}", sums.display()))?;
    Ok(Some(Box::new(s.into())))
}

/// Checks the input, reaches the destination and reads what is wanted. Bad input is refused
/// before anything is contacted; a configuration's releases and catalogs are read only once
/// the destination answered.
async fn prepare(
    settings: &MirrorSettings,
    regs: &Arc<Registries>,
) -> Result<(Source, Wanted, Destination)> {
    check_record_target(settings)?;
    if let Some(dir) = &settings.release_signatures {
        if !dir.is_dir() {
            bail!(
                "--release-signatures {}: not a directory (give the directory holding sha256=<hex>/signature-1 files)",
                dir.display()
            );
        }
    }
    let graph = &wanted::Upstream::of(settings);
    let early = match &settings.input {
        MirrorInput::Disk(_) | MirrorInput::Archive(_) => Some(
            wanted::source_and_wanted(
                &settings.input,
                regs,
                (graph, settings.dependencies),
                (settings.accept_unrecorded, settings.remove_signatures),
                settings.workdir.as_deref(),
            )
            .await?,
        ),
        MirrorInput::Config(path) => {
            // Every check of the file that needs no network, before the first request.
            let cfg = config::load(path)?;
            let origin = path.display().to_string();
            cfg.ensure_supported(&origin)?;
            cfg.check_offline(&origin)?;
            None
        }
    };
    let dest = destination::connect_destination(&settings.destination, regs).await?;
    let (source, wanted) = match early {
        Some(sw) => sw,
        None => {
            wanted::source_and_wanted(
                &settings.input,
                regs,
                (graph, settings.dependencies),
                (settings.accept_unrecorded, settings.remove_signatures),
                None,
            )
            .await?
        }
    };
    Ok((source, wanted, dest))
}

/// Resolves every wanted image; the rebuilt catalogs come already resolved. Blocked images and
/// (with `--continue-on-error`) images that failed to resolve become statuses.
async fn resolve_images(
    settings: &MirrorSettings,
    source: &Source,
    wanted: &mut Wanted,
    dest: &Destination,
) -> Result<(Vec<ResolvedImage>, Vec<ImageStatus>)> {
    // A disk mirror that does not exist yet gets nothing written before input is known good,
    // and a dry run writes nothing at all.
    let cache = (!settings.dry_run
        && !matches!(dest, Destination::Layout(l) if !l.root().exists()))
    .then(|| {
        cache::ResolveCache::new(&destination::workdir_for(dest, settings.workdir.as_deref()))
    });
    let resolves = settings.transfer.concurrency.resolves();
    let finder = match source {
        Source::Registry(regs) if !settings.remove_signatures => {
            Some(signatures::Finder::new(regs.clone()))
        }
        _ => None,
    };
    let resolved =
        wanted::resolve_all(source, wanted, resolves, cache.as_ref(), finder.as_ref()).await;
    let mut statuses: Vec<ImageStatus> = wanted
        .blocked
        .iter()
        .map(|(image, pattern)| ImageStatus::blocked(image, pattern))
        .chain(
            wanted
                .ignored
                .iter()
                .map(|(image, why)| ImageStatus::ignored(image, why)),
        )
        .collect();
    let mut images = std::mem::take(&mut wanted.catalogs);
    for (image, result) in wanted.images.iter().map(|w| &w.source).zip(resolved) {
        match result {
            Ok(found) => {
                for r in found {
                    // Two tags of one image find the same signatures once.
                    let twin = |i: &ResolvedImage| {
                        r.attached.is_some()
                            && i.source == r.source
                            && i.dest_path() == r.dest_path()
                    };
                    if !images.iter().any(twin) {
                        images.push(r);
                    }
                }
            }
            // Bad input fails before anything is written, unless told to carry on.
            Err(e) if !settings.transfer.continue_on_error => return Err(e),
            Err(e) => statuses.push(ImageStatus::failed(image, &e)),
        }
    }
    Ok((images, statuses))
}

/// Every requirement of a kept bundle that nothing in the configuration mirrors, on stderr
/// before anything is resolved or copied; the plan and the report list them too.
fn warn_unmet_dependencies(wanted: &Wanted) {
    let progress = Progress::lines("mirror");
    for line in wanted.catalog_reports.iter().flat_map(|c| c.warnings()) {
        progress.warn(line);
    }
    // Architectures platform.kubeVirtContainer has no boot image key for.
    let once: std::collections::BTreeSet<&String> = wanted
        .releases
        .iter()
        .flat_map(|r| r.warnings.iter())
        .collect();
    for line in once {
        progress.warn(line);
    }
    // Images a chart references that could not be resolved are not mirrored: say which.
    for line in wanted.charts.iter().flat_map(|c| c.warnings()) {
        progress.warn(line);
    }
}

/// `--dry-run`: the plan, also written as JSON to `./mirror-dry-run-<time>.json`; touches
/// neither the destination nor the working directory.
async fn dry_run(
    settings: &MirrorSettings,
    source: Source,
    dest: Destination,
    images: &[ResolvedImage],
    wanted: &Wanted,
    statuses: &[ImageStatus],
) -> Result<dryrun::DryRun> {
    // The plan of a run that would be refused is refused the same way.
    space::check_blob_sizes(&plan::blob_graph(images), settings.max_blob_size)?;
    let progress = Progress::new("plan", 0);
    let transfer = Transfer::new(source, dest, settings.transfer.clone(), None, progress);
    let unchanged: Vec<bool> = transfer
        .already_mirrored(images, settings.rewrite_filtered_indexes)
        .await
        .iter()
        .map(Option::is_some)
        .collect();
    let mut plan = dryrun::DryRun::new(
        &transfer,
        images,
        &unchanged,
        &wanted.source_label,
        &settings.destination_label,
    );
    plan.releases = wanted.releases.clone();
    plan.catalogs = wanted.catalog_reports.clone();
    plan.charts = wanted.charts.clone();
    plan.graph = wanted.graph.clone();
    plan.failed = statuses
        .iter()
        .filter(|s| matches!(s.outcome, status::Outcome::Failed))
        .map(|s| dryrun::FailedImage {
            source: s.source.clone(),
            error: s.error.clone().unwrap_or_default(),
        })
        .collect();
    plan.write(outputs::stamped_name(
        "mirror-dry-run",
        &outputs::file_stamp(),
    ))?;
    Ok(plan)
}

/// What the copy step did.
struct Copied<'a> {
    /// The record of every image now at the destination.
    records: Vec<ImageRecord>,
    /// Those images.
    mirrored: Vec<&'a ResolvedImage>,
    /// How many of them were there before the run.
    unchanged: usize,
    /// Images that failed or were not tried.
    statuses: Vec<ImageStatus>,
    /// The images this run set out to copy that did not make it (some of their blobs may
    /// have arrived).
    unfinished: Vec<&'a ResolvedImage>,
}

/// Copies what the destination lacks: the blobs of every image not already there, then their
/// manifests (an image whose blobs failed is not pushed).
async fn copy<'a>(
    settings: &MirrorSettings,
    transfer: &Transfer,
    images: &'a [ResolvedImage],
    wanted: &Wanted,
    fresh_dir: bool,
) -> Result<Copied<'a>> {
    let rewrite = settings.rewrite_filtered_indexes;
    let present = transfer.already_mirrored(images, rewrite).await;
    let (mut copied, todo) = Copied::sort_present(images, present);
    let nodes = plan::blob_graph(todo.iter().copied());
    let total: u64 = nodes.iter().map(|n| n.blob.size).sum();
    preflight(settings, transfer, &nodes, fresh_dir)?;
    transfer.progress.set_total(total);
    transfer.progress.println(&format!(
        "mirroring {} images ({} already at the destination; {} unique blobs, {}) from {} to {}",
        images.len(),
        copied.unchanged,
        nodes.len(),
        human_bytes(total),
        wanted.source_label,
        settings.destination_label
    ));
    let outcome = transfer.copy_blobs(nodes).await;
    transfer.progress.finish();
    for (digest, err) in &outcome.failed {
        // Said now: writing the record and status may fail too (a full disk), and this is
        // the cause.
        transfer
            .progress
            .error(format_args!("blob {digest}: {err}"));
    }
    let (pushable, mut blocked) = status::split_by_blobs(&todo, &outcome);
    let pushed = transfer.push_manifests(&pushable, rewrite).await?;
    for (image, result) in pushable.iter().zip(pushed) {
        match result {
            Ok(rec) => copied.at_destination(image, rec),
            Err(e) => copied.statuses.push(ImageStatus::failed(&image.source, &e)),
        }
    }
    copied.statuses.append(&mut blocked);
    list_referrers(transfer, &copied.mirrored).await;
    copied.unfinished = todo
        .into_iter()
        .filter(|img| !copied.mirrored.iter().any(|m| std::ptr::eq(*m, *img)))
        .collect();
    Ok(copied)
}

impl<'a> Copied<'a> {
    /// The images the destination already holds, counted as unchanged, and the rest to copy.
    fn sort_present(
        images: &'a [ResolvedImage],
        present: Vec<Option<ImageRecord>>,
    ) -> (Self, Vec<&'a ResolvedImage>) {
        let mut copied = Copied {
            records: Vec::new(),
            mirrored: Vec::new(),
            unchanged: 0,
            statuses: Vec::new(),
            unfinished: Vec::new(),
        };
        let mut todo = Vec::new();
        for (image, record) in images.iter().zip(present) {
            match record {
                Some(rec) => copied.at_destination(image, rec),
                None => todo.push(image),
            }
        }
        copied.unchanged = copied.mirrored.len();
        (copied, todo)
    }

    /// `image` is at the destination, as `rec` records it.
    fn at_destination(&mut self, image: &'a ResolvedImage, rec: ImageRecord) {
        self.statuses.push(ImageStatus::ok(&rec));
        self.records.push(rec);
        self.mirrored.push(image);
    }
}

/// Refuses blobs over `--max-blob-size` and, for a disk mirror, a run the disk cannot hold,
/// before anything is written; a layout directory this run would have created is not left
/// behind empty.
fn preflight(
    settings: &MirrorSettings,
    transfer: &Transfer,
    nodes: &[plan::BlobNode],
    fresh_dir: bool,
) -> Result<()> {
    let checked = space::check_blob_sizes(nodes, settings.max_blob_size).and_then(|()| {
        match &transfer.dest {
            Destination::Layout(layout) => {
                space::preflight(layout, nodes, settings.ignore_free_space)
            }
            Destination::Registry { .. } => Ok(()),
        }
    });
    if let Err(e) = checked {
        if let (Destination::Layout(layout), true) = (&transfer.dest, fresh_dir) {
            // Refused before anything was written: leave no empty layout behind.
            let _ = fs_err::remove_dir_all(layout.root());
        }
        return Err(e);
    }
    Ok(())
}

/// For a registry destination: every referrer mirrored listed where clients look for it
/// (see [`signatures::write_referrer_indexes`]); what could not be listed is said on stderr.
async fn list_referrers(transfer: &Transfer, mirrored: &[&ResolvedImage]) {
    let Destination::Registry { client, target } = &transfer.dest else {
        return;
    };
    match signatures::write_referrer_indexes(client, target, mirrored).await {
        Ok(indexes) => {
            for i in &indexes {
                let why = match i.outcome {
                    signatures::ReferrersOutcome::KeptImageTag => {
                        "keeps the image itself (digest-only content, kept from garbage collection)"
                    }
                    signatures::ReferrersOutcome::TagTaken => {
                        "holds another manifest that is not a referrers index (left alone)"
                    }
                    signatures::ReferrersOutcome::Api | signatures::ReferrersOutcome::Written => {
                        continue
                    }
                };
                transfer.progress.warn(format_args!(
                    "{}@{}: the referrers tag {} {why}, so its referrers are not listed there; they are at the destination under their own sha256-<hex> tags, and a registry with the OCI referrers API lists them itself",
                    i.repository,
                    i.subject,
                    i.subject.dashed()
                ));
            }
        }
        Err(e) => transfer.progress.error(format_args!("{e:#}")),
    }
}

/// The record of this run: what it was asked, what is now at the destination (every image
/// and the unique blobs they need), and what it moved.
fn new_record(
    wanted: &Wanted,
    destination: &str,
    started: &str,
    image_records: Vec<ImageRecord>,
    mirrored: &[&ResolvedImage],
    transfer: &Transfer,
) -> MirrorRecord {
    let run = RunInfo {
        tool: format!("bootstrap {}", env!("CARGO_PKG_VERSION")),
        config: wanted.config.clone(),
        source: wanted.source_label.clone(),
        destination: destination.to_string(),
        started: started.to_string(),
        finished: record::now_rfc3339(),
        images: image_records.len(),
        bytes_transferred: transfer.stats.bytes.load(Ordering::Relaxed),
    };
    let blobs = plan::blob_graph(mirrored.iter().copied())
        .iter()
        .map(|n| BlobRecord {
            digest: n.blob.digest.clone(),
            size: n.blob.size,
        })
        .collect();
    MirrorRecord::new(run, image_records, blobs)
}

/// Writes the per-image status; returns where: `--status-file` (replaced: it is the latest
/// run's report a script reads), else inside a disk mirror (replaced, covered by the record's
/// `SHA256SUMS`), else a stamped name beside the run, created exclusively so no other run's
/// status is lost.
fn write_status(
    settings: &MirrorSettings,
    dest: &Destination,
    status: &StatusFile,
    stamp: &str,
) -> Result<PathBuf> {
    let path = match (&settings.status_file, dest) {
        (Some(p), _) => p.clone(),
        (None, Destination::Layout(layout)) => layout.root().join(status::STATUS_FILE),
        (None, Destination::Registry { .. }) => {
            let bytes = crate::fs::json_bytes(Path::new("the status file"), status)?;
            return crate::fs::write_unique(outputs::stamped_name("mirror-status", stamp), &bytes)
                .context("writing the status file");
        }
    };
    status.write(&path)?;
    Ok(path)
}

/// Checks a `--record` that names an existing file before anything is contacted: the run is
/// added to it only if it is a mirror record of this same destination (a rerun of the same
/// command); anything else is refused, since an audit record is never replaced.
fn check_record_target(settings: &MirrorSettings) -> Result<()> {
    match &settings.record {
        Some(path) if matches!(settings.destination, Location::Registry(_)) => {
            outputs::earlier_record(path, &settings.destination_label).map(drop)
        }
        _ => Ok(()),
    }
}

/// When the run started: the time for the record, the clock for the report.
struct Started {
    at: String,
    clock: Instant,
}

/// Leaves the status file, the record and the cluster resources behind, and builds the report.
fn finish(
    settings: &MirrorSettings,
    transfer: &Transfer,
    wanted: Wanted,
    mut copied: Copied<'_>,
    mut statuses: Vec<ImageStatus>,
    started: Started,
) -> Result<MirrorResult> {
    statuses.append(&mut copied.statuses);
    let destination = &settings.destination_label;
    let mut rec = new_record(
        &wanted,
        destination,
        &started.at,
        std::mem::take(&mut copied.records),
        &copied.mirrored,
        transfer,
    );
    let mut status = StatusFile::new(&wanted.source_label, destination, started.at, statuses);
    status.layout_check = wanted.layout_check.clone();
    let written = write_outputs(settings, transfer, &mut rec, &status, &copied)?;
    let not_mirrored = report::not_mirrored(&status, &written.status);
    let mirrored = copied
        .mirrored
        .iter()
        .map(|img| MirroredImage {
            digest: img.root.digest.clone(),
            source: img.source_label(),
            platforms: img.platforms.clone(),
        })
        .collect();
    let summary = summary(
        transfer,
        wanted,
        &copied,
        &rec,
        &status,
        written,
        started.clock,
    );
    Ok(MirrorResult::Mirrored(MirrorReport {
        not_mirrored,
        summary,
        mirrored,
    }))
}

/// Where a run's outputs went.
struct Written {
    /// The per-image status.
    status: PathBuf,
    /// The mirror record.
    record: PathBuf,
    /// The cluster's mirror configuration (registry destinations only).
    cluster_resources: Option<PathBuf>,
    /// The record's signature, with `--sign-key`.
    signature: Option<Box<report::RecordSignature>>,
}

/// Writes the status file, then the record, signs the record, and writes the cluster
/// resources.
fn write_outputs(
    settings: &MirrorSettings,
    transfer: &Transfer,
    rec: &mut MirrorRecord,
    status: &StatusFile,
    copied: &Copied<'_>,
) -> Result<Written> {
    let stamp = outputs::file_stamp();
    // Before the record: inside a disk mirror it is one of the files SHA256SUMS covers.
    let status_path = write_status(settings, &transfer.dest, status, &stamp)?;
    let record = outputs::write_record(
        &transfer.dest,
        rec,
        settings.record.clone(),
        &stamp,
        &copied.unfinished,
    )?;
    let signature = sign_record(settings, &transfer.dest, &record)?;
    let cluster_resources = outputs::write_cluster_resources(
        &transfer.dest,
        &copied.mirrored,
        &record,
        settings.release_signatures.as_deref(),
        &transfer.progress,
    )?;
    Ok(Written {
        status: status_path,
        record,
        cluster_resources,
        signature,
    })
}

/// Signs the record with `--sign-key`; without it, removes the signature an earlier run left
/// (it no longer covers the record). An archive's manifest is signed once it is sealed, so an
/// archive's record is not signed here.
fn sign_record(
    settings: &MirrorSettings,
    dest: &Destination,
    record: &Path,
) -> Result<Option<Box<report::RecordSignature>>> {
    let archive = matches!(dest, Destination::Layout(l) if l.archive_writer().is_some());
    match &settings.sign_key {
        _ if archive => Ok(None),
        Some(key) => {
            let s = crate::sshsig::sign_file(key, record)
                .with_context(|| format!("signing the mirror record {}", record.display()))?;
            Ok(Some(Box::new(s.into())))
        }
        None => {
            // This run changed the record: a signature of an earlier run no longer covers it.
            let stale = crate::sshsig::sig_path(record);
            if stale.exists() {
                fs_err::remove_file(&stale)?;
                tracing::warn!(
                    "removed {}: it signed the record before this run; sign again with --sign-key",
                    stale.display()
                );
            }
            Ok(None)
        }
    }
}

/// The summary of a run that copied: what is at the destination, what this run moved, what it
/// carried besides images, and where its outputs are.
fn summary(
    transfer: &Transfer,
    wanted: Wanted,
    copied: &Copied<'_>,
    rec: &MirrorRecord,
    status: &StatusFile,
    written: Written,
    clock: Instant,
) -> Summary {
    let stats = &transfer.stats;
    let mirrored = &copied.mirrored;
    Summary {
        source: wanted.source_label,
        destination: status.destination.clone(),
        images: mirrored.len(),
        attachments: mirrored.iter().filter(|i| i.attached.is_some()).count(),
        blobs: rec.blobs.len(),
        blobs_copied: stats.blobs_copied.load(Ordering::Relaxed),
        blobs_mounted: stats.blobs_mounted.load(Ordering::Relaxed),
        blobs_present: stats.blobs_present.load(Ordering::Relaxed),
        images_unchanged: copied.unchanged,
        images_failed: status.failed + status.skipped,
        bytes_transferred: stats.bytes.load(Ordering::Relaxed),
        bytes_resumed: stats.bytes_resumed.load(Ordering::Relaxed),
        retries: stats.retries.load(Ordering::Relaxed),
        bytes_total: rec.blobs.iter().map(|b| b.size).sum(),
        seconds: clock.elapsed().as_secs_f64(),
        record: written.record.display().to_string(),
        status: written.status.display().to_string(),
        cluster_resources: written.cluster_resources.map(|d| d.display().to_string()),
        releases: wanted.releases,
        catalogs: wanted.catalog_reports,
        charts: wanted.charts,
        graph: wanted.graph,
        layout_check: wanted.layout_check,
        signature: written.signature,
        archive: None,
    }
}
