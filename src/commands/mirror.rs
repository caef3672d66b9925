//! `bootstrap mirror`: the command line resolved into [`MirrorSettings`], the run, its report.

use super::{exit_code, registry_options, Printer};
use crate::cli::MirrorArgs;
use crate::concurrency::Concurrency;
use crate::mirror::report::MirrorResult;
use crate::mirror::resolve::select::Dependencies;
use crate::mirror::transfer::TransferSettings;
use crate::mirror::{Location, MirrorInput, MirrorSettings};
use crate::oci::retry::RetryPolicy;
use crate::oci::stall::StallPolicy;
use anyhow::{bail, Result};
use std::num::NonZeroU64;
use std::process::ExitCode;
use std::time::Duration;

impl MirrorSettings {
    /// Resolves `bootstrap mirror`'s arguments: locations parsed, combinations checked, the
    /// auth file read. Nothing is contacted.
    pub fn resolve(args: MirrorArgs) -> Result<Self> {
        let destination = Location::parse(&args.destination, "the destination")?;
        let input = mirror_input(&args, &destination)?;
        let archive_size = archive_size(&args, &input, &destination)?;
        if let Some(key) = &args.sign_key {
            if matches!(destination, Location::Disk(_)) {
                bail!("--sign-key signs the mirror record of a registry destination or an archive's manifest; a disk mirror is covered by its SHA256SUMS (write archive://DIR for a signed one)");
            }
            // A key that cannot sign is found now, not after the copy.
            crate::sshsig::read_key(key).map_err(|e| anyhow::anyhow!("--sign-key: {e:#}"))?;
        }
        let transfer = transfer_settings(&args);
        Ok(MirrorSettings {
            input,
            destination,
            destination_label: args.destination,
            graph_url: args.graph_url,
            okd_graph_url: args.okd_graph_url,
            graph_data_url: args.graph_data_url,
            graph_base_image: args.graph_base_image,
            dependencies: if args.follow_dependencies {
                Dependencies::Follow
            } else {
                Dependencies::Report
            },
            release_signatures: args.release_signatures,
            registry: registry_options(&args.registry, transfer.retry)?,
            transfer,
            workdir: args.workdir,
            dry_run: args.dry_run,
            ignore_free_space: args.ignore_free_space,
            max_blob_size: args.max_blob_size,
            status_file: args.status_file,
            record: args.record,
            sign_key: args.sign_key,
            archive_size,
            since: args.since,
            rewrite_filtered_indexes: args.rewrite_filtered_indexes,
            accept_unrecorded: args.accept_unrecorded,
            remove_signatures: args.remove_signatures,
        })
    }
}

/// What is mirrored: a configuration (`-c`), or a disk mirror or archive (`--from`), which
/// only a registry destination takes.
fn mirror_input(args: &MirrorArgs, destination: &Location) -> Result<MirrorInput> {
    let input = match (&args.from, &args.config) {
        (Some(from), _) => match Location::parse(from, "--from")? {
            Location::Disk(dir) => MirrorInput::Disk(dir),
            Location::Archive(dir) => MirrorInput::Archive(dir),
            Location::Registry(_) => bail!(
                "--from takes a disk mirror (file://DIR); to mirror from registries, name them in the ImageSetConfiguration (-c)"
            ),
        },
        (None, Some(cfg)) => MirrorInput::Config(cfg.clone()),
        (None, None) => bail!("name what to mirror: -c CONFIG, or --from file://DIR"),
    };
    if matches!(input, MirrorInput::Disk(_) | MirrorInput::Archive(_))
        && !matches!(destination, Location::Registry(_))
    {
        bail!("--from pushes a disk mirror or an archive to a registry: the destination must be docker://HOST[/PREFIX] (to cut a disk mirror into an archive, use bootstrap archive create)");
    }
    Ok(input)
}

/// The chunk size of an archive destination: `--archive-size`, else the configuration's
/// `archiveSize` (GiB), else the default. The archive flags are refused for any other
/// destination.
fn archive_size(args: &MirrorArgs, input: &MirrorInput, destination: &Location) -> Result<u64> {
    let archive = matches!(destination, Location::Archive(_));
    if !archive && (args.archive_size.is_some() || args.since.is_some()) {
        bail!("--archive-size and --since are for an archive destination (archive://DIR)");
    }
    Ok(match (&args.archive_size, input) {
        (Some(s), _) => crate::mirror::archive::parse_size(s)
            .map_err(|e| anyhow::anyhow!("--archive-size: {e:#}"))?,
        (None, MirrorInput::Config(path)) if archive => {
            match crate::mirror::config::load(path)?.archive_size {
                Some(gib) if gib > 0 => {
                    (gib as u64)
                        .checked_mul(1024 * 1024 * 1024)
                        .ok_or_else(|| {
                            anyhow::anyhow!("{}: archiveSize {gib} is too large", path.display())
                        })?
                }
                _ => crate::mirror::archive::DEFAULT_ARCHIVE_SIZE,
            }
        }
        _ => crate::mirror::archive::DEFAULT_ARCHIVE_SIZE,
    })
}

/// How blobs and manifests move: concurrency, chunking, retries, stall detection, ranged
/// downloads.
fn transfer_settings(args: &MirrorArgs) -> TransferSettings {
    TransferSettings {
        concurrency: Concurrency {
            blobs: args.max_concurrent_blobs,
            per_registry: args.max_connections_per_registry,
        },
        chunk_size: NonZeroU64::new(args.chunk_size * 1024 * 1024)
            .expect("clap keeps --chunk-size in 1..=4096"),
        retry: RetryPolicy::with_attempts(args.retries),
        stall: StallPolicy {
            window: Duration::from_secs(args.stall_timeout),
            floor: args.stall_floor,
        },
        continue_on_error: args.continue_on_error,
        split: crate::oci::ranged::Split {
            parts: args.range_parts,
            piece: args.range_piece,
            from_size: args.range_from,
        },
        // Set once the working directory is known.
        spool_dir: None,
    }
}

/// Runs `bootstrap mirror`; exit 1 when any image was not mirrored.
pub async fn run(args: MirrorArgs, printer: &Printer) -> Result<ExitCode> {
    let settings = MirrorSettings::resolve(args)?;
    if let MirrorInput::Config(path) = &settings.input {
        // What oc-mirror reads leniently (an older apiVersion, a key in another case) is read
        // the same way; the site hears of it before anything is fetched.
        let config = crate::mirror::config::load(path)?;
        for line in config.warning_lines(&path.display().to_string()) {
            printer.warn(line);
        }
    }
    let result = crate::mirror::run(settings).await?;
    printer.result(&result)?;
    match &result {
        MirrorResult::Mirrored(report) => {
            for line in &report.not_mirrored {
                printer.error(line);
            }
            Ok(exit_code(report.complete()))
        }
        MirrorResult::Planned(plan) => Ok(exit_code(plan.complete())),
    }
}
