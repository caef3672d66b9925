//! `bootstrap mirror`: copy images from registries to an OCI layout on disk, from a layout to a
//! registry, or from registry to registry, verified and recorded for auditors.

pub mod config;
pub mod plan;
pub mod record;
pub mod transfer;

use crate::cli::{MirrorArgs, RegistryArgs};
use crate::oci::auth::AuthFile;
use crate::oci::digest::Digest;
use crate::oci::layout::OciLayout;
use crate::oci::reference::{ImageRef, RegistryTarget};
use crate::oci::registry::{Registries, RegistryOptions};
use crate::output::{human_bytes, OutputFormat, Progress};
use anyhow::{bail, Context, Result};
use futures_util::StreamExt;
use plan::{ResolvedImage, Source};
use record::{BlobRecord, ConfigInfo, MirrorRecord, RunInfo};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use transfer::{Destination, Stats, Transfer};

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
    let authfile = AuthFile::load(args.authfile.as_deref())?;
    Registries::new(RegistryOptions {
        authfile,
        ca_bundle: args.ca_bundle.clone(),
        plain_http: args.plain_http.clone(),
        insecure_tls: args.insecure_skip_tls_verify.clone(),
    })
}

/// What a run was asked to mirror.
struct Wanted {
    images: Vec<(ImageRef, Option<Digest>)>,
    architectures: Vec<String>,
    config: Option<ConfigInfo>,
    source_label: String,
}

fn wanted_from_config(path: &Path) -> Result<Wanted> {
    let origin = path.display().to_string();
    let cfg = config::load(path)?;
    cfg.ensure_supported(&origin)?;
    let mut images = Vec::new();
    let mut problems = Vec::new();
    for entry in cfg.additional_images() {
        match ImageRef::parse(entry.name) {
            Ok(r) => images.push((r, None)),
            Err(e) => problems.push(entry.error(&origin, e.reason).to_string()),
        }
    }
    if !problems.is_empty() {
        bail!("{}", problems.join("\n"));
    }
    if images.is_empty() {
        bail!("{origin}: mirror.additionalImages is empty: there is nothing to mirror");
    }
    images.sort();
    images.dedup();
    let registries_label = |images: &[(ImageRef, Option<Digest>)]| {
        let hosts: std::collections::BTreeSet<String> = images
            .iter()
            .map(|(r, _)| format!("docker://{}", r.registry))
            .collect();
        hosts.into_iter().collect::<Vec<_>>().join(", ")
    };
    let source_label = registries_label(&images);
    let bytes = fs_err::read(path).context("reading the ImageSetConfiguration")?;
    Ok(Wanted {
        images,
        architectures: cfg.architectures(),
        config: Some(ConfigInfo {
            path: origin,
            sha256: Digest::of(&bytes).hex().to_string(),
        }),
        source_label,
    })
}

fn wanted_from_layout(layout: &OciLayout) -> Result<Wanted> {
    let mut images = Vec::new();
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
        images.push((r, Some(entry.digest.clone())));
    }
    if images.is_empty() {
        bail!(
            "{} holds no images (index.json is empty)",
            layout.root().display()
        );
    }
    Ok(Wanted {
        images,
        architectures: Vec::new(),
        config: None,
        source_label: format!("file://{}", layout.root().display()),
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
    /// Bytes moved this run.
    pub bytes_transferred: u64,
    /// Bytes of the whole set.
    pub bytes_total: u64,
    /// Seconds the run took.
    pub seconds: f64,
    /// Where the mirror record was written.
    pub record: String,
}

/// Runs `bootstrap mirror`.
pub async fn run(args: MirrorArgs, output: OutputFormat) -> Result<ExitCode> {
    let started = record::now_rfc3339();
    let clock = std::time::Instant::now();
    let dest_loc = Location::parse(&args.destination, "the destination")?;
    let regs = Arc::new(registries(&args.registry)?);
    let (source, wanted) = match (&args.from, &args.config) {
        (Some(from), _) => match Location::parse(from, "--from")? {
            Location::Disk(dir) => {
                let layout = OciLayout::open(&dir)?;
                let wanted = wanted_from_layout(&layout)?;
                (Source::Layout(layout), wanted)
            }
            Location::Registry(_) => bail!(
                "--from takes a disk mirror (file://DIR); to mirror from registries, name them in the ImageSetConfiguration (-c)"
            ),
        },
        (None, Some(cfg)) => (Source::Registry(regs.clone()), wanted_from_config(cfg)?),
        (None, None) => bail!("name what to mirror: -c CONFIG, or --from file://DIR"),
    };
    if matches!(source, Source::Layout(_)) && matches!(dest_loc, Location::Disk(_)) {
        bail!("--from file://DIR pushes a disk mirror to a registry: the destination must be docker://HOST[/PREFIX]");
    }
    // Reach the destination first: an unreachable or refusing registry should fail in a second,
    // not after the whole set was resolved.
    let dest = match &dest_loc {
        Location::Registry(target) => {
            let client = regs.client(&target.registry)?;
            client
                .ping()
                .await
                .context("checking the destination registry")?;
            Destination::Registry {
                client,
                target: target.clone(),
            }
        }
        Location::Disk(dir) => {
            if dir.exists() && !dir.is_dir() {
                bail!(
                    "destination {} exists and is not a directory",
                    dir.display()
                );
            }
            // Created only after every image resolved, so a bad input leaves nothing behind.
            Destination::Layout(OciLayout::unopened(dir))
        }
    };
    let images = resolve_all(&source, &wanted, args.max_concurrent_blobs).await?;
    let dest = match dest {
        Destination::Layout(l) => Destination::Layout(OciLayout::create(l.root())?),
        d => d,
    };
    let nodes = plan::blob_graph(&images);
    let total: u64 = nodes.iter().map(|n| n.blob.size).sum();
    let blob_count = nodes.len();
    let progress = Progress::new("mirror", total);
    progress.println(&format!(
        "mirroring {} images ({} unique blobs, {}) from {} to {}",
        images.len(),
        blob_count,
        human_bytes(total),
        wanted.source_label,
        args.destination
    ));
    let transfer = Transfer {
        source,
        dest: dest.clone(),
        concurrency: args.max_concurrent_blobs,
        progress: progress.clone(),
        stats: Arc::new(Stats::default()),
    };
    let copied = transfer.copy_blobs(nodes.clone()).await;
    progress.finish();
    copied?;
    let image_records = transfer
        .push_manifests(&images, args.rewrite_filtered_indexes)
        .await?;
    let stats = &transfer.stats;
    let run = RunInfo {
        tool: format!("bootstrap {}", env!("CARGO_PKG_VERSION")),
        config: wanted.config.clone(),
        source: wanted.source_label.clone(),
        destination: args.destination.clone(),
        started,
        finished: record::now_rfc3339(),
        images: images.len(),
        bytes_transferred: stats.bytes.load(Ordering::Relaxed),
    };
    let blobs = nodes
        .iter()
        .map(|n| BlobRecord {
            digest: n.blob.digest.clone(),
            size: n.blob.size,
        })
        .collect();
    let mut rec = MirrorRecord::new(run, image_records, blobs);
    let record_path = match &dest {
        Destination::Layout(layout) => {
            let path = layout.root().join(record::RECORD_FILE);
            if path.is_file() {
                let earlier = MirrorRecord::load(&path)?;
                rec.merge_earlier(earlier);
            }
            rec.write(&path)?;
            record::write_sums(layout.root())?;
            // The in-progress directory is empty after a clean run; leave no clutter behind.
            let _ = std::fs::remove_dir(layout.root().join(crate::oci::layout::PARTIAL_DIR));
            path
        }
        Destination::Registry { .. } => {
            let path = args.record.clone().unwrap_or_else(|| {
                PathBuf::from(format!(
                    "mirror-record-{}.json",
                    time::OffsetDateTime::now_utc()
                        .format(time::macros::format_description!(
                            "[year][month][day]T[hour][minute][second]Z"
                        ))
                        .unwrap_or_default()
                ))
            });
            rec.write(&path)?;
            path
        }
    };
    let summary = Summary {
        source: wanted.source_label,
        destination: args.destination,
        images: images.len(),
        blobs: blob_count,
        blobs_copied: stats.blobs_copied.load(Ordering::Relaxed),
        blobs_mounted: stats.blobs_mounted.load(Ordering::Relaxed),
        blobs_present: stats.blobs_present.load(Ordering::Relaxed),
        bytes_transferred: stats.bytes.load(Ordering::Relaxed),
        bytes_total: total,
        seconds: clock.elapsed().as_secs_f64(),
        record: record_path.display().to_string(),
    };
    print_summary(&summary, &images, output)?;
    Ok(ExitCode::SUCCESS)
}

async fn resolve_all(
    source: &Source,
    wanted: &Wanted,
    concurrency: usize,
) -> Result<Vec<ResolvedImage>> {
    let results: Vec<Result<ResolvedImage>> = futures_util::stream::iter(&wanted.images)
        .map(|(image, digest)| async move {
            plan::resolve(source, image, digest.as_ref(), &wanted.architectures)
                .await
                .with_context(|| format!("resolving {image}"))
        })
        .buffered(concurrency.max(1))
        .collect()
        .await;
    results.into_iter().collect()
}

fn print_summary(s: &Summary, images: &[ResolvedImage], output: OutputFormat) -> Result<()> {
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
            println!("record: {}", s.record);
        }
    }
    Ok(())
}
