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

use super::journal::{Journal, UploadEntry};
use super::plan::{placement_annotations, rewrite_index, BlobNode, ResolvedImage, Source};
use crate::oci::digest::{Digest, DigestMismatch, StreamHasher};
use crate::oci::layout::{IndexEntry, OciLayout, REF_NAME};
use crate::oci::manifest::RawManifest;
use crate::oci::reference::RegistryTarget;
use crate::oci::registry::{ErrorCode, Mount, RegistryClient, RegistryError};
use crate::oci::retry::{self, RetryPolicy};
use crate::oci::stall::{self, StallPolicy};
use crate::oci::stream::{file_stream, response_stream, ByteStream, OnBytes, VerifiedReader};
use crate::openshift::record::{ImageRecord, ManifestRecord};
use crate::output::{human_bytes, Progress};
use anyhow::{Context, Result};
use futures_util::StreamExt;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
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

/// Default number of blobs in flight.
pub const DEFAULT_CONCURRENCY: usize = 8;

/// Default size of one upload chunk: a broken connection costs at most this much again.
pub const DEFAULT_CHUNK_MIB: u64 = 64;

/// How a transfer behaves: limits, chunking, and what to do about failures.
#[derive(Clone, Debug)]
pub struct TransferSettings {
    /// Blobs in flight at once.
    pub concurrency: usize,
    /// Blob transfers talking to one registry at once.
    pub connections_per_registry: usize,
    /// Bytes per upload chunk; blobs no larger go in one request.
    pub chunk_size: u64,
    /// Retries of transient failures.
    pub retry: RetryPolicy,
    /// When a stream counts as stalled.
    pub stall: StallPolicy,
    /// Keep going after a blob failed (the images needing it fail; the rest complete).
    pub continue_on_error: bool,
}

impl Default for TransferSettings {
    fn default() -> Self {
        TransferSettings {
            concurrency: DEFAULT_CONCURRENCY,
            connections_per_registry: DEFAULT_CONCURRENCY,
            chunk_size: DEFAULT_CHUNK_MIB * 1024 * 1024,
            retry: RetryPolicy::default(),
            stall: StallPolicy::default(),
            continue_on_error: false,
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
        }
    }

    /// Copies every blob of the graph. A failure stops new blobs from starting unless
    /// `continue_on_error` is set; either way every failure is returned, not just the first.
    pub async fn copy_blobs(&self, nodes: Vec<BlobNode>) -> BlobOutcome {
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
            .buffer_unordered(self.settings.concurrency.max(1))
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
                Arc::new(Semaphore::new(
                    self.settings.connections_per_registry.max(1),
                ))
            })
            .clone()
    }

    /// Permits for the registries a blob's transfer talks to, always taken source first so
    /// two transfers never wait on each other.
    async fn permits(&self, node: &BlobNode) -> Vec<tokio::sync::OwnedSemaphorePermit> {
        let mut hosts = Vec::new();
        if let Source::Registry(_) = &self.source {
            hosts.push(node.from.registry.clone());
        }
        if let Destination::Registry { client, .. } = &self.dest {
            if !hosts.iter().any(|h| h == client.host()) {
                hosts.push(client.host().to_string());
            }
        }
        let mut permits = Vec::new();
        for host in hosts {
            if let Ok(p) = self.gate(&host).acquire_owned().await {
                permits.push(p);
            }
        }
        permits
    }

    /// The blob's bytes from `offset`, unverified (the consumer hashes them).
    async fn open(&self, node: &BlobNode, offset: u64) -> Result<ByteStream> {
        let d = &node.blob.digest;
        if let Some(bytes) = &node.generated {
            let rest = bytes.slice((offset as usize).min(bytes.len())..);
            return Ok(Box::pin(futures_util::stream::once(async move {
                Ok::<_, std::io::Error>(rest)
            })));
        }
        match &self.source {
            Source::Registry(regs) => {
                let client = regs.client(&node.from.registry)?;
                let resp = client.get_blob(&node.from.repository, d, offset).await?;
                Ok(response_stream(resp))
            }
            Source::Layout(layout) => Ok(file_stream(&layout.blob_path(d), offset).await?),
        }
    }

    /// How far into `node`'s blob the progress display has been moved, across attempts.
    fn credit(&self, node: &BlobNode) -> Arc<AtomicU64> {
        let mut credits = self.credits.lock().expect("credit map poisoned");
        credits.entry(node.blob.digest.clone()).or_default().clone()
    }

    /// Moves the progress display to byte `to` of `node`'s blob, unless it was already there:
    /// bytes sent again after a retry, or found already present, are not counted twice.
    fn advance(&self, credit: &AtomicU64, to: u64) {
        let before = credit.fetch_max(to, Ordering::Relaxed);
        if to > before {
            self.progress.inc(to - before);
        }
    }

    /// Counts the bytes of an attempt that starts at byte `start` of the blob: on the progress
    /// display (once per byte of the blob, however often it is sent), the run's counters
    /// (every byte sent) and `moved` (the stall detector's view of this attempt).
    fn on_bytes(&self, node: &BlobNode, moved: Arc<AtomicU64>, start: u64) -> OnBytes {
        let bar = Arc::new(self.progress.blob(
            &format!("{} {}", node.from.repository, node.blob.digest.short()),
            node.blob.size,
        ));
        let credit = self.credit(node);
        self.advance(&credit, start);
        bar.inc(start);
        let progress = self.progress.clone();
        let stats = self.stats.clone();
        let position = AtomicU64::new(start);
        Arc::new(move |n| {
            let at = position.fetch_add(n, Ordering::Relaxed) + n;
            let before = credit.fetch_max(at, Ordering::Relaxed);
            if at > before {
                progress.inc(at - before);
            }
            bar.inc(n);
            stats.bytes.fetch_add(n, Ordering::Relaxed);
            moved.fetch_add(n, Ordering::Relaxed);
        })
    }

    /// Copies one blob, retrying transient failures; each retry continues where the last
    /// attempt stopped.
    async fn copy_blob(&self, node: &BlobNode) -> Result<()> {
        let _permits = self.permits(node).await;
        let policy = self.settings.retry;
        let started = Instant::now();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let err = match self.copy_blob_once(node).await {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            if retry::is_disk_full(&err) {
                return Err(err.context(
                    "the disk is full: free space (or pass a destination with more) and run the same command again; it continues where it stopped",
                ));
            }
            if attempt >= policy.attempts || !retry::is_transient(&err) {
                if attempt == 1 {
                    return Err(err);
                }
                return Err(err.context(format!(
                    "gave up after {attempt} attempts in {:.0?}",
                    started.elapsed()
                )));
            }
            let delay = policy.delay(attempt, retry::retry_after(&err));
            self.stats.retries.fetch_add(1, Ordering::Relaxed);
            self.progress.println(&format!(
                "blob {} of {}: {err:#}; trying again in {delay:.1?} (attempt {} of {})",
                node.blob.digest.short(),
                node.from,
                attempt + 1,
                policy.attempts
            ));
            tokio::time::sleep(delay).await;
        }
    }

    async fn copy_blob_once(&self, node: &BlobNode) -> Result<()> {
        let d = &node.blob.digest;
        match &self.dest {
            Destination::Layout(layout) => {
                if layout.blob_size(d) == Some(node.blob.size) {
                    self.stats.blobs_present.fetch_add(1, Ordering::Relaxed);
                    self.advance(&self.credit(node), node.blob.size);
                    return Ok(());
                }
                let resumed = layout.partial_len(d, node.blob.size);
                self.stats
                    .bytes_resumed
                    .fetch_add(resumed, Ordering::Relaxed);
                let moved = Arc::new(AtomicU64::new(0));
                let write = layout.write_blob_from(
                    d,
                    node.blob.size,
                    |offset| self.open(node, offset),
                    self.on_bytes(node, moved.clone(), resumed),
                );
                stall::watch(self.settings.stall, &moved, write)
                    .await
                    .map_err(anyhow::Error::from)
                    .and_then(|r| r)
                    .with_context(|| format!("copying blob {d} of {} to disk", node.from))?;
                self.stats.blobs_copied.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Destination::Registry { client, target } => {
                self.copy_blob_to_registry(client, target, node).await
            }
        }
    }

    async fn copy_blob_to_registry(
        &self,
        client: &RegistryClient,
        target: &RegistryTarget,
        node: &BlobNode,
    ) -> Result<()> {
        let d = &node.blob.digest;
        let repos: Vec<String> = node
            .repositories
            .iter()
            .map(|r| target.repository_for(r))
            .collect();
        let mut holder: Option<String> = None;
        let mut missing = Vec::new();
        for repo in &repos {
            match client.head_blob(repo, d).await? {
                Some(size) if size == node.blob.size => {
                    holder.get_or_insert_with(|| repo.clone());
                }
                _ => missing.push(repo.clone()),
            }
        }
        if missing.is_empty() {
            self.stats.blobs_present.fetch_add(1, Ordering::Relaxed);
            self.advance(&self.credit(node), node.blob.size);
            return Ok(());
        }
        for repo in missing {
            let in_flight = self
                .journal
                .as_ref()
                .is_some_and(|j| j.load(client.host(), &repo, d).is_some());
            let session = match &holder {
                Some(from) if !in_flight => match client.mount_blob(&repo, d, from).await? {
                    Mount::Mounted => {
                        self.stats.blobs_mounted.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    Mount::Upload(location) => Some(location),
                },
                _ => None,
            };
            self.push_blob(client, &repo, node, session)
                .await
                .with_context(|| {
                    format!(
                        "copying blob {d} of {} to {}/{repo}",
                        node.from, target.registry
                    )
                })?;
            holder = Some(repo);
        }
        Ok(())
    }

    /// Pushes one blob into `repo`, continuing a journaled upload session when there is one.
    async fn push_blob(
        &self,
        client: &RegistryClient,
        repo: &str,
        node: &BlobNode,
        session: Option<String>,
    ) -> Result<()> {
        let d = &node.blob.digest;
        let (location, hasher) = self.upload_start(client, repo, node, session).await?;
        let moved = Arc::new(AtomicU64::new(0));
        let on_bytes = self.on_bytes(node, moved.clone(), hasher.len());
        let send = async {
            let stream = self.open(node, hasher.len()).await?;
            let reader = VerifiedReader::new(
                stream,
                hasher,
                d.clone(),
                node.blob.size,
                format!("blob {d} from {}", node.from.name()),
                on_bytes,
            );
            self.send_rest(client, repo, location, reader).await
        };
        let result = stall::watch(self.settings.stall, &moved, send)
            .await
            .map_err(anyhow::Error::from)
            .and_then(|r| r);
        match &result {
            Ok(()) => {
                self.stats.blobs_copied.fetch_add(1, Ordering::Relaxed);
                self.forget(client, repo, d);
            }
            // Bytes already in the session may be the bad ones: the blob starts over.
            Err(e) if is_corrupt(e) => self.forget(client, repo, d),
            Err(_) => {}
        }
        result
    }

    fn forget(&self, client: &RegistryClient, repo: &str, digest: &Digest) {
        if let Some(j) = &self.journal {
            j.remove(client.host(), repo, digest);
        }
    }

    /// Where a push starts: the journaled session when the registry still holds exactly
    /// what we recorded (with our hash state at that offset), else a new session.
    async fn upload_start(
        &self,
        client: &RegistryClient,
        repo: &str,
        node: &BlobNode,
        session: Option<String>,
    ) -> Result<(String, StreamHasher)> {
        let d = &node.blob.digest;
        let earlier = self
            .journal
            .as_ref()
            .and_then(|j| j.load(client.host(), repo, d))
            .filter(|e| e.size == node.blob.size);
        if let Some(entry) = earlier {
            let status = client.upload_status(repo, &entry.location).await?;
            match (status, entry.hasher()) {
                (Some(st), Some(hasher)) if st.offset == entry.offset && st.offset > 0 => {
                    if let Some(s) = session {
                        client.cancel_upload(repo, &s).await;
                    }
                    self.stats
                        .bytes_resumed
                        .fetch_add(entry.offset, Ordering::Relaxed);
                    self.progress.println(&format!(
                        "resuming blob {} in {repo} at {} of {}",
                        d.short(),
                        human_bytes(entry.offset),
                        human_bytes(node.blob.size)
                    ));
                    return Ok((st.location, hasher));
                }
                // The registry holds other than what we recorded (a chunk it accepted just
                // before we were stopped): this blob starts over.
                (Some(st), _) => client.cancel_upload(repo, &st.location).await,
                // The session is gone: purged, or refused because part of a cut chunk reached
                // it (Distribution 2.x then deletes it).
                (None, _) => {}
            }
            self.forget(client, repo, d);
        }
        let location = match session {
            Some(l) => l,
            None => client.start_upload(repo).await?,
        };
        Ok((location, StreamHasher::new()))
    }

    /// Sends the blob from the reader's offset: one committing PUT for a small blob, else
    /// chunks, each journaled once the registry acknowledged it, then the commit.
    async fn send_rest(
        &self,
        client: &RegistryClient,
        repo: &str,
        mut location: String,
        mut reader: VerifiedReader,
    ) -> Result<()> {
        let size = reader.size();
        let digest = reader.digest().clone();
        let chunk = self.settings.chunk_size.max(1);
        if reader.offset() == 0 && size <= chunk {
            let (body, _) = reader.take(size);
            client
                .put_upload(repo, &location, &digest, size, body)
                .await?;
            return Ok(());
        }
        while reader.offset() < size {
            let offset = reader.offset();
            let len = (size - offset).min(chunk);
            let (body, back) = reader.take(len);
            let status = client
                .patch_chunk(repo, &location, offset, len, body)
                .await?;
            reader = back
                .await
                .context("the registry acknowledged a chunk it was not sent whole")?;
            location = status.location;
            if let Some(j) = &self.journal {
                j.save(&UploadEntry {
                    registry: client.host().to_string(),
                    repository: repo.to_string(),
                    digest: digest.clone(),
                    size,
                    location: location.clone(),
                    offset: reader.offset(),
                    hash_state: reader.hasher().encoded_state(),
                })?;
            }
        }
        match client.finish_upload(repo, &location, &digest).await {
            Ok(()) => Ok(()),
            // A commit whose answer was lost and was sent again finds its session gone.
            Err(e) if client.head_blob(repo, &digest).await.ok().flatten() == Some(size) => {
                tracing::info!("commit of {digest} in {repo} answered {e} but the blob is there");
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Writes or pushes every image's manifests (children first) and returns what the record
    /// says of each, in the order of `images`, or why that image failed. `rewrite_filtered`
    /// pushes an index of only the kept children to a registry (a new digest) instead of the
    /// source's index verbatim. Registry pushes run `concurrency` images at a time; each
    /// image's children still go before its index.
    pub async fn push_manifests(
        &self,
        images: &[&ResolvedImage],
        rewrite_filtered: bool,
    ) -> Result<Vec<Result<ImageRecord>>> {
        match &self.dest {
            Destination::Layout(layout) => {
                let mut records = Vec::new();
                let mut index_entries = Vec::new();
                for image in images {
                    match write_image(layout, image).await {
                        Ok(entry) => {
                            index_entries.push(entry);
                            records.push(Ok(self.image_record(image, &image.root)));
                        }
                        Err(e) => records.push(Err(e)),
                    }
                }
                layout.add_to_index(&index_entries)?;
                Ok(records)
            }
            Destination::Registry { client, target } => Ok(futures_util::stream::iter(images)
                .map(|image| async move {
                    let root = push_image(client, target, image, rewrite_filtered).await?;
                    Ok(self.image_record(image, &root))
                })
                .buffered(self.settings.concurrency.max(1))
                .collect()
                .await),
        }
    }

    /// For each image, the record when the destination already holds it exactly as this run
    /// would leave it (the tag points at the same manifest digest, or a layout's index entry
    /// does), so its blobs and manifests need not be looked at again. A registry only
    /// accepts a manifest whose blobs it holds, so the tag alone proves the image whole.
    pub async fn already_mirrored(
        &self,
        images: &[ResolvedImage],
        rewrite_filtered: bool,
    ) -> Vec<Option<ImageRecord>> {
        let layout_index: HashMap<String, Digest> = match &self.dest {
            Destination::Layout(layout) => layout
                .index()
                .unwrap_or_default()
                .into_iter()
                .filter_map(|e| Some((e.ref_name()?.to_string(), e.digest.clone())))
                .collect(),
            Destination::Registry { .. } => HashMap::new(),
        };
        let layout_index = &layout_index;
        futures_util::stream::iter(images)
            .map(|image| async move {
                let root = match (!image.dropped.is_empty() && rewrite_filtered)
                    .then(|| rewrite_index(image))
                {
                    Some(Ok(rewritten)) => rewritten,
                    Some(Err(_)) => return None,
                    None => image.root.clone(),
                };
                let present = match &self.dest {
                    Destination::Layout(layout) => {
                        layout_index.get(&image.source.to_string()) == Some(&root.digest)
                            && layout.blob_size(&root.digest).is_some()
                    }
                    Destination::Registry { client, target } => {
                        let repo = target.repository_for(image.dest_path());
                        let reference = image.dest_reference(&root);
                        matches!(client.head_manifest(&repo, &reference).await,
                            Ok(Some(d)) if d == root.digest)
                    }
                };
                present.then(|| self.image_record(image, &root))
            })
            .buffered(self.settings.concurrency.max(1) * 2)
            .collect()
            .await
    }

    /// What the record would say of `image` mirrored as it is (for a dry run).
    pub fn planned_record(&self, image: &ResolvedImage) -> ImageRecord {
        self.image_record(image, &image.root)
    }

    fn image_record(&self, image: &ResolvedImage, root: &RawManifest) -> ImageRecord {
        let destination = match &self.dest {
            Destination::Layout(layout) => {
                format!("oci:{}:{}", layout.root().display(), image.source)
            }
            Destination::Registry { target, .. } => {
                let repo = target.repository_for(image.dest_path());
                let mut r = image.source.moved_to(&target.registry, &repo);
                if image.placement.tag.is_some() {
                    r.tag = image.placement.tag.clone();
                }
                if root.digest != image.root.digest || image.rebuilt_from.is_some() {
                    r.digest = Some(root.digest.clone());
                }
                r.to_string()
            }
        };
        ImageRecord {
            source: image.source.to_string(),
            path: image.dest_path().to_string(),
            tag: image.placement.tag.clone(),
            category: (image.placement.category != crate::openshift::cluster::Category::Generic)
                .then(|| image.placement.category.name().to_string()),
            destination,
            digest: root.digest.clone(),
            source_digest: image
                .rebuilt_from
                .clone()
                .or_else(|| (root.digest != image.root.digest).then(|| image.root.digest.clone())),
            media_type: root.media_type.clone(),
            size: root.bytes.len() as u64,
            total_size: image.total_size(),
            platforms: image.platforms.clone(),
            platforms_dropped: image.dropped.clone(),
            manifests: image
                .children
                .iter()
                .map(|c| ManifestRecord {
                    digest: c.manifest.digest.clone(),
                    media_type: c.manifest.media_type.clone(),
                    size: c.manifest.bytes.len() as u64,
                    platform: c.platform.clone(),
                })
                .collect(),
            blobs: image.blobs.iter().map(|b| b.digest.clone()).collect(),
        }
    }
}

/// Writes one image's manifests into a layout (children first); returns its index entry.
async fn write_image(layout: &OciLayout, image: &ResolvedImage) -> Result<IndexEntry> {
    let root = &image.root;
    for c in &image.children {
        layout
            .write_bytes(&c.manifest.digest, c.manifest.bytes.clone())
            .await?;
    }
    layout.write_bytes(&root.digest, root.bytes.clone()).await?;
    let mut annotations = std::collections::BTreeMap::new();
    annotations.insert(REF_NAME.to_string(), image.source.to_string());
    annotations.extend(placement_annotations(&image.placement));
    Ok(IndexEntry {
        media_type: root.media_type.clone(),
        digest: root.digest.clone(),
        size: root.bytes.len() as u64,
        annotations,
    })
}

/// Pushes one image's manifests to a registry, children first; returns the top manifest as
/// pushed (the source's, or the rewritten index).
async fn push_image(
    client: &RegistryClient,
    target: &RegistryTarget,
    image: &ResolvedImage,
    rewrite_filtered: bool,
) -> Result<RawManifest> {
    let repo = target.repository_for(image.dest_path());
    for c in &image.children {
        client
            .put_manifest(&repo, &c.manifest.digest.to_string(), &c.manifest)
            .await
            .with_context(|| format!("pushing a child manifest of {}", image.source))?;
    }
    let sparse = !image.dropped.is_empty();
    let root = if sparse && rewrite_filtered {
        rewrite_index(image)?
    } else {
        image.root.clone()
    };
    let reference = image.dest_reference(&root);
    if let Err(e) = client.put_manifest(&repo, &reference, &root).await {
        let rejected_sparse = sparse
            && (e.has_code(ErrorCode::ManifestBlobUnknown)
                || e.has_code(ErrorCode::ManifestUnknown));
        if rejected_sparse {
            anyhow::bail!(
                "{registry} refused the index of {source} because it lists platforms that were filtered out ({dropped}); this registry does not accept sparse indexes. Rerun with --rewrite-filtered-indexes to push an index of only the kept platforms (a new digest, recorded beside the source's), or keep those architectures in mirror.platform.architectures",
                registry = target.registry,
                source = image.source,
                dropped = image.dropped.join(", ")
            );
        }
        return Err(anyhow::Error::new(e).context(format!("pushing {}", image.source)));
    }
    Ok(root)
}

/// True when `err` says content did not match its digest (ours or the registry's check):
/// bytes already sent may be the bad ones, so the blob starts over.
pub fn is_corrupt(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<DigestMismatch>().is_some()
            || c.downcast_ref::<io::Error>().is_some_and(|e| {
                e.get_ref()
                    .is_some_and(|i| i.downcast_ref::<DigestMismatch>().is_some())
            })
            || c.downcast_ref::<RegistryError>()
                .is_some_and(|e| e.has_code(ErrorCode::DigestInvalid))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mirror::plan::BlobDesc;
    use crate::oci::reference::ImageRef;

    /// Regression: bytes sent again after a retry were counted again, so progress went past
    /// 100%. The display counts each byte of a blob once; the run's byte counter counts every
    /// byte sent.
    #[test]
    fn progress_counts_resent_bytes_once() {
        let dir = tempfile::tempdir().unwrap();
        let layout = OciLayout::unopened(dir.path());
        let transfer = Transfer::new(
            Source::Layout(layout.clone()),
            Destination::Layout(layout),
            TransferSettings::default(),
            None,
            Progress::new("test", 100),
        );
        let node = BlobNode {
            blob: BlobDesc {
                digest: Digest::of(b"x"),
                size: 100,
                media_type: String::new(),
            },
            from: ImageRef::parse("registry.example/a/b:1").unwrap(),
            repositories: BTreeSet::new(),
            generated: None,
        };
        let moved = Arc::new(AtomicU64::new(0));
        let first = transfer.on_bytes(&node, moved.clone(), 0);
        first(60);
        // The retry resumes from a checkpoint at 40 and sends the rest.
        let second = transfer.on_bytes(&node, moved, 40);
        second(30);
        second(30);
        assert_eq!(transfer.progress.done(), 100);
        assert_eq!(transfer.stats.bytes.load(Ordering::Relaxed), 120);
        transfer.advance(&transfer.credit(&node), 100);
        assert_eq!(transfer.progress.done(), 100);
    }
}
