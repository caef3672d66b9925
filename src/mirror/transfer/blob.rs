//! One blob from source to destination: HEAD first, a cross-repository mount when the
//! destination holds it elsewhere, else a streamed copy (into the layout, or an upload in
//! journaled chunks), hashed in flight; transient failures retried under one budget, each try
//! continuing where the last one stopped.

use super::{Destination, Transfer};
use crate::mirror::journal::UploadEntry;
use crate::mirror::plan::{BlobNode, Source};
use crate::oci::digest::{Digest, DigestMismatch, StreamHasher};
use crate::oci::ranged::Piece;
use crate::oci::reference::RegistryTarget;
use crate::oci::registry::{ErrorCode, Mount, Ranged, RegistryClient, RegistryError};
use crate::oci::retry;
use crate::oci::stall;
use crate::oci::stream::{response_stream, ByteStream, OnBytes, VerifiedReader};
use crate::output::human_bytes;
use anyhow::{Context, Result};
use futures_util::StreamExt;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

impl Transfer {
    /// The blob's bytes from `offset`, unverified (the consumer hashes them).
    async fn open(&self, node: &BlobNode, offset: u64) -> Result<ByteStream> {
        let d = &node.blob.digest;
        if let Some(made) = &node.generated {
            return Ok(made.stream_from(offset));
        }
        if let Some(layout) = &node.layout {
            return Ok(layout.blob_stream(d, offset, node.blob.size).await?);
        }
        match &self.source {
            Source::Registry(regs) => {
                let client = regs.client(&node.from.registry)?;
                if let Some(stream) = self.open_split(&client, node, offset).await? {
                    return Ok(stream);
                }
                let resp = client.get_blob(&node.from.repository, d, offset).await?;
                Ok(response_stream(resp))
            }
            Source::Layout(layout) => Ok(layout.blob_stream(d, offset, node.blob.size).await?),
        }
    }

    /// The rest of a large blob from `offset` as parallel `Range` reads spooled in order (see
    /// [`crate::oci::ranged::adaptive`]): split at once when the source registry has
    /// connections free (`--max-connections-per-registry`), else when it has some later; or
    /// `None` when it is never split here: splitting is off, the rest is too short, or the
    /// spool has too little room.
    async fn open_split(
        &self,
        client: &Arc<RegistryClient>,
        node: &BlobNode,
        offset: u64,
    ) -> Result<Option<ByteStream>> {
        let split = crate::oci::ranged::Split {
            from_size: self.split_from(),
            ..self.settings.split
        };
        let Some(dir) = &self.settings.spool_dir else {
            return Ok(None);
        };
        if !split.splits(node.blob.size - offset) {
            return Ok(None);
        }
        // Not where the spool's ring would fill the disk.
        fs_err::create_dir_all(dir)?;
        let room = crate::mirror::space::free_bytes(dir).unwrap_or(0);
        if room < 2 * split.spool_bytes() {
            tracing::debug!(
                "not splitting blob {}: little room in {}",
                node.blob.digest,
                dir.display()
            );
            return Ok(None);
        }
        let (repo, d) = (node.from.repository.clone(), node.blob.digest.clone());
        let single = {
            let (client, repo, d) = (client.clone(), repo.clone(), d.clone());
            move |from| {
                let (client, repo, d) = (client.clone(), repo.clone(), d.clone());
                async move {
                    let resp = client.get_blob(&repo, &d, from).await?;
                    Ok(response_stream(resp))
                }
            }
        };
        let client = client.clone();
        let open = move |start, end, once| {
            let (client, repo, d) = (client.clone(), repo.clone(), d.clone());
            async move {
                Ok(
                    match client.get_blob_range(&repo, &d, (start, end), once).await? {
                        Ranged::Partial(resp) => Piece::Range(response_stream(resp)),
                        Ranged::Whole(resp) => {
                            tracing::debug!("{}: blob {d} is not served in ranges", client.host());
                            Piece::Whole(response_stream(resp))
                        }
                    },
                )
            }
        };
        let gate = self.gate(&node.from.registry);
        let range = (offset, node.blob.size);
        let stream = crate::oci::ranged::adaptive(dir, split, range, gate, single, open).await?;
        Ok(Some(stream))
    }

    fn split_from(&self) -> u64 {
        self.split_from.load(Ordering::Relaxed)
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
    pub(super) async fn copy_blob(&self, node: &BlobNode) -> Result<()> {
        let _permits = self.permits(node).await;
        let policy = self.settings.retry;
        let budget = retry::RetryBudget::new(&policy);
        let started = Instant::now();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let err = match budget.scope(self.copy_blob_once(node)).await {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            if retry::is_disk_full(&err) {
                return Err(err.context(
                    "the disk is full: free space (or pass a destination with more) and run the same command again; it continues where it stopped",
                ));
            }
            if !(retry::is_transient(&err) || is_session_lost(&err)) || !budget.take() {
                if attempt == 1 {
                    // Nothing retried at this level: a request loop that did says so itself.
                    return Err(err);
                }
                return Err(err.context(format!(
                    "gave up after {} attempts in {:.0?}",
                    budget.tries(),
                    started.elapsed()
                )));
            }
            let delay = policy.delay(attempt, retry::retry_after(&err));
            self.stats.retries.fetch_add(1, Ordering::Relaxed);
            self.progress.println(&format!(
                "blob {} of {}: {err:#}; trying again in {delay:.1?} (attempt {} of {})",
                node.blob.digest.short(),
                node.from,
                budget.tries(),
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
        let (location, hasher, held) = self.upload_start(client, repo, node, session).await?;
        let moved = Arc::new(AtomicU64::new(0));
        let on_bytes = self.on_bytes(node, moved.clone(), held);
        let send = async {
            let hasher = self.catch_up(node, hasher, held, &moved).await?;
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
            // Bytes already in the session may be the bad ones, or the registry dropped the
            // session it had just reported: the blob starts over.
            Err(e) if is_corrupt(e) || is_session_lost(e) => self.forget(client, repo, d),
            Err(_) => {}
        }
        result.map_err(|e| {
            let from_source = e.chain().any(|c| {
                matches!(
                    c.downcast_ref::<RegistryError>(),
                    Some(RegistryError::CorruptBody(_))
                )
            });
            if from_source {
                // Our reader caught the source's bytes: the source is at fault, not `repo`.
                e.context(format!(
                    "{} sent corrupt content for blob {d}",
                    self.source_name(node)
                ))
            } else {
                e
            }
        })
    }

    /// Where a blob's bytes come from, as the user named it: the source registry, or the disk
    /// mirror.
    fn source_name(&self, node: &BlobNode) -> String {
        if let Some(layout) = &node.layout {
            return format!("oci://{}", layout.root().display());
        }
        match &self.source {
            Source::Registry(_) => node.from.registry.clone(),
            Source::Layout(layout) => layout.label(),
        }
    }

    fn forget(&self, client: &RegistryClient, repo: &str, digest: &Digest) {
        if let Some(j) = &self.journal {
            j.remove(client.host(), repo, digest);
        }
    }

    /// Where a push starts: the journaled session when the registry still holds at least what
    /// we recorded, else a new session. Returns its location, our hash state at the journaled
    /// offset and the bytes the registry holds (more than that offset when it kept part of a
    /// cut chunk: [`Self::catch_up`] hashes the difference).
    async fn upload_start(
        &self,
        client: &RegistryClient,
        repo: &str,
        node: &BlobNode,
        session: Option<String>,
    ) -> Result<(String, StreamHasher, u64)> {
        let d = &node.blob.digest;
        let earlier = self
            .journal
            .as_ref()
            .and_then(|j| j.load(client.host(), repo, d))
            .filter(|e| e.size == node.blob.size);
        if let Some(entry) = earlier {
            let status = client.upload_status(repo, &entry.location).await?;
            match (status, entry.hasher()) {
                (Some(st), Some(hasher))
                    if st.offset > 0 && (entry.offset..=node.blob.size).contains(&st.offset) =>
                {
                    if let Some(s) = session {
                        client.cancel_upload(repo, &s).await;
                    }
                    // A registry that keeps what it read of a cut chunk (Zot, GitLab's) holds
                    // more than we journaled: those bytes are hashed, not sent again.
                    self.stats
                        .bytes_resumed
                        .fetch_add(st.offset, Ordering::Relaxed);
                    self.progress.println(&format!(
                        "resuming blob {} in {repo} at {} of {}",
                        d.short(),
                        human_bytes(st.offset),
                        human_bytes(node.blob.size)
                    ));
                    return Ok((st.location, hasher, st.offset));
                }
                // The registry holds less than we recorded, or nothing: this blob starts over.
                (Some(st), _) => client.cancel_upload(repo, &st.location).await,
                // The session is gone: purged, or refused because part of a cut chunk reached
                // it (Distribution 2.x then deletes it: its state, signed into the location,
                // no longer matches what it holds).
                (None, _) => {}
            }
            self.forget(client, repo, d);
        }
        let location = match session {
            Some(l) => l,
            None => client.start_upload(repo).await?,
        };
        Ok((location, StreamHasher::new(), 0))
    }

    /// Brings `hasher` forward to byte `to` of `node`'s blob over the source's bytes, sending
    /// nothing: the registry already holds them. Whether they are the same bytes is decided at
    /// the commit, where the registry checks the digest (a mismatch starts the blob over). The
    /// bytes read count as movement for the stall detector (`moved`).
    async fn catch_up(
        &self,
        node: &BlobNode,
        mut hasher: StreamHasher,
        to: u64,
        moved: &AtomicU64,
    ) -> Result<StreamHasher> {
        if hasher.len() >= to {
            return Ok(hasher);
        }
        let mut stream = self.open(node, hasher.len()).await?;
        while hasher.len() < to {
            let Some(bytes) = stream.next().await.transpose()? else {
                anyhow::bail!(
                    "{} ended at byte {} of blob {}, before the {} bytes the destination holds",
                    self.source_name(node),
                    hasher.len(),
                    node.blob.digest,
                    to
                );
            };
            let want = (to - hasher.len()).min(bytes.len() as u64) as usize;
            hasher.update(&bytes[..want]);
            moved.fetch_add(want as u64, Ordering::Relaxed);
        }
        Ok(hasher)
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
        let chunk = self.settings.chunk_size.get();
        if reader.offset() == 0 && size <= chunk {
            let (body, _) = reader.take(size);
            client
                .put_upload(repo, &location, &digest, size, body)
                .await?;
            return Ok(());
        }
        if reader.offset() == 0 {
            // Journaled before the first byte: a registry that keeps what it read of a cut
            // first chunk can be continued too.
            self.journal_progress(client, repo, &location, &reader)?;
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
            self.journal_progress(client, repo, &location, &reader)?;
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
}

impl Transfer {
    /// Records where an upload session stands: its location, the bytes the registry
    /// acknowledged, our hash state over them.
    fn journal_progress(
        &self,
        client: &RegistryClient,
        repo: &str,
        location: &str,
        reader: &VerifiedReader,
    ) -> Result<()> {
        let Some(j) = &self.journal else {
            return Ok(());
        };
        j.save(&UploadEntry {
            registry: client.host().to_string(),
            repository: repo.to_string(),
            digest: reader.digest().clone(),
            size: reader.size(),
            location: location.to_string(),
            offset: reader.offset(),
            hash_state: reader.hasher().encoded_state(),
        })
    }
}

/// True when the registry refused an upload session it had taken (`BLOB_UPLOAD_INVALID`,
/// `BLOB_UPLOAD_UNKNOWN`): Distribution 2.x deletes a session that received part of a cut
/// chunk, and its status `GET` may still answer with the old offset just before it does, so
/// the resumed `PATCH` is refused. The blob starts over in a new session, as a retry.
pub fn is_session_lost(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<RegistryError>().is_some_and(|e| {
            e.has_code(ErrorCode::BlobUploadInvalid) || e.has_code(ErrorCode::BlobUploadUnknown)
        })
    })
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
    use crate::mirror::transfer::TransferSettings;
    use crate::oci::layout::OciLayout;
    use crate::oci::reference::ImageRef;
    use crate::output::Progress;
    use std::collections::BTreeSet;

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
            layout: None,
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

    /// A registry that is both source and destination is two connections per transfer (the
    /// read and the upload), as far as its limit allows; never more than the limit, so a limit
    /// of one does not wait forever.
    #[tokio::test]
    async fn one_registry_both_ways_counts_both_connections() {
        use crate::oci::reference::RegistryTarget;
        use crate::oci::registry::{Registries, RegistryOptions};
        let regs = Arc::new(Registries::new(RegistryOptions::default()).unwrap());
        let node = BlobNode {
            blob: BlobDesc {
                digest: Digest::of(b"x"),
                size: 1,
                media_type: String::new(),
            },
            from: ImageRef::parse("registry.example/a/b:1").unwrap(),
            repositories: BTreeSet::new(),
            generated: None,
            layout: None,
        };
        for (limit, taken) in [(3, 2), (1, 1)] {
            let mut settings = TransferSettings::default();
            settings.concurrency.per_registry = std::num::NonZeroUsize::new(limit).unwrap();
            let transfer = Transfer::new(
                Source::Registry(regs.clone()),
                Destination::Registry {
                    client: regs.client("registry.example").unwrap(),
                    target: RegistryTarget::parse("registry.example/m").unwrap(),
                },
                settings,
                None,
                Progress::new("test", 1),
            );
            let permits =
                tokio::time::timeout(std::time::Duration::from_secs(5), transfer.permits(&node))
                    .await
                    .expect("waited for permits that cannot come");
            let gate = transfer.gate("registry.example");
            assert_eq!(gate.available_permits(), limit - taken, "limit {limit}");
            drop(permits);
            assert_eq!(gate.available_permits(), limit);
        }
    }
}
