//! Moving content: every unique blob once (HEAD first, a cross-repository mount when the
//! destination already holds it elsewhere, else a streamed upload in chunks), bounded
//! concurrency, each byte hashed in flight; then manifests, children before their index,
//! verbatim.
//!
//! Every blob survives faults: transient failures are retried with backoff, a stalled stream
//! is abandoned and retried, and each retry (or a rerun after kill -9) continues where the
//! last one stopped: a pull from the partial file's checkpoint with a `Range` request, a push
//! from the upload session the journal recorded. Content that does not match its digest is
//! thrown away and the blob starts over; it is never committed.

mod blob;
mod manifests;

pub use blob::is_corrupt;

use super::journal::Journal;
use super::plan::{BlobNode, Source};
use crate::concurrency::Concurrency;
use crate::oci::digest::Digest;
use crate::oci::layout::OciLayout;
use crate::oci::ranged::Split;
use crate::oci::reference::RegistryTarget;
use crate::oci::registry::RegistryClient;
use crate::oci::retry::RetryPolicy;
use crate::oci::stall::StallPolicy;
use crate::output::Progress;
use anyhow::Result;
use futures_util::StreamExt;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::num::NonZeroU64;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::Semaphore;

/// Where content goes.
#[derive(Clone)]
pub enum Destination {
    /// An OCI layout on disk.
    Layout(OciLayout),
    /// A registry, under a prefix.
    Registry {
        /// The client.
        client: Arc<RegistryClient>,
        /// Host and prefix.
        target: RegistryTarget,
    },
}

/// Counters of one run.
#[derive(Debug, Default)]
pub struct Stats {
    /// Blob bytes actually sent or written (resent bytes included).
    pub bytes: AtomicU64,
    /// Blobs uploaded or written.
    pub blobs_copied: AtomicU64,
    /// Blobs mounted from another repository.
    pub blobs_mounted: AtomicU64,
    /// Blobs the destination already had.
    pub blobs_present: AtomicU64,
    /// Bytes an earlier attempt or run had already moved, continued rather than sent again.
    pub bytes_resumed: AtomicU64,
    /// Blob attempts that failed transiently and were tried again.
    pub retries: AtomicU64,
}

/// Default size of one upload chunk: a broken connection costs at most this much again.
pub const DEFAULT_CHUNK_MIB: u64 = 64;

/// How a transfer behaves: limits, chunking, and what to do about failures.
#[derive(Clone, Debug)]
pub struct TransferSettings {
    /// Blobs in flight, and transfers per registry.
    pub concurrency: Concurrency,
    /// Bytes per upload chunk; blobs no larger go in one request.
    pub chunk_size: NonZeroU64,
    /// Tries per blob, shared by the blob's own retries and those of every request it makes
    /// (see [`crate::oci::retry::RetryBudget`]).
    pub retry: RetryPolicy,
    /// When a stream counts as stalled.
    pub stall: StallPolicy,
    /// Keep going after a blob failed (the images needing it fail; the rest complete).
    pub continue_on_error: bool,
    /// How a large blob pulled from a registry is split into parallel `Range` reads.
    pub split: Split,
    /// Where split reads are spooled (unnamed files); no splitting without one.
    pub spool_dir: Option<PathBuf>,
}

/// Default connections of one split blob.
pub const DEFAULT_RANGE_PARTS: usize = 4;

/// Bytes per `Range` request of a split blob: the spool holds at most `--range-parts` of them
/// (32 MiB by default), which is also what a kill can throw away beyond the last checkpoint.
pub const RANGE_PIECE: u64 = 8 * 1024 * 1024;

/// Blobs smaller than this are never split, whatever their share of the run (see
/// [`Transfer::copy_blobs`]): a few pieces' worth, below which the pieces' round trips cost
/// more than the parallel connections give.
pub const SPLIT_FROM: u64 = 64 * 1024 * 1024;

impl Default for TransferSettings {
    fn default() -> Self {
        TransferSettings {
            concurrency: Concurrency::default(),
            chunk_size: NonZeroU64::new(DEFAULT_CHUNK_MIB * 1024 * 1024).expect("not zero"),
            retry: RetryPolicy::default(),
            stall: StallPolicy::default(),
            continue_on_error: false,
            split: Split {
                parts: DEFAULT_RANGE_PARTS,
                piece: RANGE_PIECE,
                from_size: SPLIT_FROM,
            },
            spool_dir: None,
        }
    }
}

/// What became of the blobs that did not make it.
#[derive(Debug, Default)]
pub struct BlobOutcome {
    /// Blobs that failed, with the error.
    pub failed: BTreeMap<Digest, String>,
    /// Blobs never tried because the run stopped at an earlier failure.
    pub not_attempted: BTreeSet<Digest>,
}

/// One transfer from a source to a destination.
pub struct Transfer {
    /// Where content is read.
    pub source: Source,
    /// Where it goes.
    pub dest: Destination,
    /// Limits and failure handling.
    pub settings: TransferSettings,
    /// Uploads in flight, for resuming pushes (registry destinations).
    pub journal: Option<Journal>,
    /// Progress display.
    pub progress: Progress,
    /// Counters.
    pub stats: Arc<Stats>,
    /// One gate per registry host, bounding its concurrent blob transfers.
    pub gates: std::sync::Mutex<HashMap<String, Arc<Semaphore>>>,
    /// Per blob, how far the progress display has been moved (see [`Transfer::on_bytes`]).
    credits: std::sync::Mutex<HashMap<Digest, Arc<AtomicU64>>>,
    /// The size from which a blob is split in this run (see [`Transfer::copy_blobs`]).
    split_from: AtomicU64,
}

impl Transfer {
    /// A transfer with fresh counters.
    pub fn new(
        source: Source,
        dest: Destination,
        settings: TransferSettings,
        journal: Option<Journal>,
        progress: Progress,
    ) -> Self {
        Transfer {
            source,
            dest,
            settings,
            journal,
            progress,
            stats: Arc::new(Stats::default()),
            gates: Default::default(),
            credits: Default::default(),
            split_from: AtomicU64::new(u64::MAX),
        }
    }

    /// Copies every blob of the graph. A failure stops new blobs from starting unless
    /// `continue_on_error` is set; either way every failure is returned, not just the first.
    ///
    /// A blob is split into parallel range reads (see [`crate::oci::ranged`]) only when it is
    /// larger than its fair share of the run, the bytes of all blobs over the blobs in flight:
    /// only such a blob would still be moving, alone on one connection, after the rest are
    /// done. Smaller ones fill the link together, and splitting them would only add the spool's
    /// pass over their bytes.
    pub async fn copy_blobs(&self, nodes: Vec<BlobNode>) -> BlobOutcome {
        let total: u64 = nodes.iter().map(|n| n.blob.size).sum();
        let share = total / self.settings.concurrency.blobs.get() as u64;
        self.split_from
            .store(share.max(self.settings.split.from_size), Ordering::Relaxed);
        let stop = AtomicBool::new(false);
        let results: Vec<(Digest, Option<Result<()>>)> = futures_util::stream::iter(nodes)
            .map(|node| {
                let stop = &stop;
                async move {
                    if stop.load(Ordering::Relaxed) {
                        return (node.blob.digest.clone(), None);
                    }
                    let r = self.copy_blob(&node).await;
                    if r.is_err() && !self.settings.continue_on_error {
                        stop.store(true, Ordering::Relaxed);
                    }
                    (node.blob.digest.clone(), Some(r))
                }
            })
            .buffer_unordered(self.settings.concurrency.blobs.get())
            .collect()
            .await;
        let mut outcome = BlobOutcome::default();
        for (digest, r) in results {
            match r {
                None => {
                    outcome.not_attempted.insert(digest);
                }
                Some(Err(e)) => {
                    outcome.failed.insert(digest, format!("{e:#}"));
                }
                Some(Ok(())) => {}
            }
        }
        outcome
    }

    fn gate(&self, host: &str) -> Arc<Semaphore> {
        let mut gates = self.gates.lock().expect("gate map poisoned");
        gates
            .entry(host.to_string())
            .or_insert_with(|| {
                Arc::new(Semaphore::new(self.settings.concurrency.per_registry.get()))
            })
            .clone()
    }

    /// Permits for the registries a blob's transfer talks to, always taken source first so
    /// two transfers never wait on each other: one per connection, so a registry that is both
    /// source and destination gives two (as many as its limit allows).
    async fn permits(&self, node: &BlobNode) -> Vec<tokio::sync::OwnedSemaphorePermit> {
        let mut hosts: Vec<(String, u32)> = Vec::new();
        if let (Source::Registry(_), None) = (&self.source, &node.layout) {
            hosts.push((node.from.registry.clone(), 1));
        }
        if let Destination::Registry { client, .. } = &self.dest {
            match hosts.iter_mut().find(|(h, _)| h == client.host()) {
                Some((_, n)) => *n += 1,
                None => hosts.push((client.host().to_string(), 1)),
            }
        }
        let limit = u32::try_from(self.settings.concurrency.per_registry.get()).unwrap_or(u32::MAX);
        let mut permits = Vec::new();
        for (host, n) in hosts {
            if let Ok(p) = self.gate(&host).acquire_many_owned(n.min(limit)).await {
                permits.push(p);
            }
        }
        permits
    }
}
