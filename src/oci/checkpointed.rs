//! The one verified, checkpointed write of a blob, shared by the OCI layout (a blob written
//! into its own file under `.partial/`, see [`super::layout`]) and the archive writer (a blob
//! written into its place in a chunk laid out beforehand, see
//! [`crate::mirror::archive::writer`]).
//!
//! Every byte is hashed as it is written. Every [`CHECKPOINT_BYTES`] the file is synced and the
//! length and hash state are saved beside it (`{"offset":N,"state":"BASE64"}`, replaced
//! atomically but not synced: the blob's bytes up to it are, so a checkpoint a power cut took
//! back is an older one or none, and the write starts further back), so a write interrupted by
//! a dropped connection, kill -9 or a full disk resumes from its last checkpoint: the bytes
//! after it were never synced and are written again. A source that sends more than the blob's
//! size, or bytes that do not hash to its digest, is refused and what the write left is
//! discarded. Nothing is visible before it matched: the caller publishes the blob (a rename, a
//! line in the archive's done file) only after
//! [`CheckpointedWrite::write`] returned, then calls [`CheckpointedWrite::finished`].

use super::digest::{Digest, DigestMismatch, StreamHasher};
use super::stream::{ByteStream, OnBytes};
use anyhow::{bail, Context, Result};
use futures_util::StreamExt;
use std::path::{Path, PathBuf};
use tokio::io::{AsyncSeekExt, AsyncWriteExt};

/// Bytes written between two checkpoints of a partial blob: what an interruption can cost.
pub const CHECKPOINT_BYTES: u64 = 32 * 1024 * 1024;

/// Bytes gathered before one write into the file. tokio's `File` hands every write to its
/// blocking pool, and a network read is tens of KiB: one thread hand-off per read was most of a
/// mirror to disk's scheduling cost (docs/bench.md, issue 31, point 7).
const WRITE_BUF: usize = 256 * 1024;

/// Where one blob's bytes go and where its progress is saved.
#[derive(Clone, Debug)]
pub struct CheckpointedWrite {
    file: PathBuf,
    start: u64,
    own_file: bool,
    checkpoint: PathBuf,
    every: u64,
}

impl CheckpointedWrite {
    /// A blob written into a file of its own (created when absent, cut back to its checkpoint
    /// on resume, removed when its content is wrong); the checkpoint is `FILE.checkpoint`.
    pub fn own_file(file: PathBuf) -> Self {
        let mut checkpoint = file.clone().into_os_string();
        checkpoint.push(".checkpoint");
        CheckpointedWrite {
            file,
            start: 0,
            own_file: true,
            checkpoint: checkpoint.into(),
            every: CHECKPOINT_BYTES,
        }
    }

    /// A blob written into its place in `file`, from byte `start`: a file laid out beforehand at
    /// its full size (an archive chunk), which is neither created, cut nor removed here.
    pub fn in_place(file: PathBuf, start: u64, checkpoint: PathBuf) -> Self {
        CheckpointedWrite {
            file,
            start,
            own_file: false,
            checkpoint,
            every: CHECKPOINT_BYTES,
        }
    }

    /// The checkpoint saved beside the blob while it is written.
    pub fn checkpoint_path(&self) -> &Path {
        &self.checkpoint
    }

    /// Bytes of a blob of `size` bytes a write would resume from: its checkpoint's length when
    /// the file holds at least that much and the hash state restores, 0 otherwise.
    pub fn resumable_len(&self, size: u64) -> u64 {
        self.resumable(size).map_or(0, |h| h.len())
    }

    /// The hash state a write resumes from.
    fn resumable(&self, size: u64) -> Option<StreamHasher> {
        let file_len = fs_err::metadata(&self.file).map_or(0, |m| m.len());
        Checkpoint::load(&self.checkpoint)
            .filter(|c| c.offset <= size && self.start.saturating_add(c.offset) <= file_len)
            .and_then(|c| StreamHasher::from_encoded_state(&c.state, c.offset))
    }

    /// Writes the blob `digest` of `size` bytes from `open(offset)`'s stream (the blob's bytes
    /// from `offset`, where the last checkpoint left it), hashed as written and checkpointed;
    /// returns once every byte is synced and matched. Content that does not match is discarded
    /// with its checkpoint. The caller then makes the blob visible and calls
    /// [`CheckpointedWrite::finished`].
    pub async fn write<F, Fut>(
        &self,
        digest: &Digest,
        size: u64,
        open: F,
        on_bytes: OnBytes,
    ) -> Result<()>
    where
        F: FnOnce(u64) -> Fut,
        Fut: std::future::Future<Output = Result<ByteStream>>,
    {
        let what = format!("blob {digest}");
        let (file, mut hasher) = self.resume(size).await?;
        let mut file = tokio::io::BufWriter::with_capacity(WRITE_BUF, file);
        let mut saved = hasher.len();
        if saved > 0 {
            tracing::info!("resuming {what} at byte {saved} of {size}");
        }
        let mut body = open(saved).await?;
        while let Some(piece) = body.next().await {
            let piece = piece.with_context(|| format!("reading {what}"))?;
            hasher.update(&piece);
            if hasher.len() > size {
                self.discard().await;
                bail!(DigestMismatch::longer(what, digest, size));
            }
            file.write_all(&piece)
                .await
                .with_context(|| format!("writing {}", self.file.display()))?;
            on_bytes(piece.len() as u64);
            if hasher.len() - saved >= self.every {
                self.sync(&mut file).await?;
                Checkpoint::of(&hasher).save(&self.checkpoint)?;
                saved = hasher.len();
            }
        }
        self.sync(&mut file).await?;
        drop(file);
        self.check_written(hasher.len()).await?;
        if let Err(e) = hasher.verify(&what, digest, size) {
            self.discard().await;
            return Err(e.into());
        }
        Ok(())
    }

    /// Writes out what the buffer holds, then [`flush_and_sync`].
    async fn sync(&self, file: &mut tokio::io::BufWriter<fs_err::tokio::File>) -> Result<()> {
        file.flush()
            .await
            .with_context(|| format!("writing {}", self.file.display()))?;
        flush_and_sync(file.get_mut(), &self.file).await
    }

    /// Removes the checkpoint once the blob was made visible: nothing is left to resume.
    pub async fn finished(&self) {
        let _ = fs_err::tokio::remove_file(&self.checkpoint).await;
    }

    /// Opens the file where the last checkpoint left it (anything written after the checkpoint
    /// is written again: it was never synced), or at the blob's start when there is none.
    async fn resume(&self, size: u64) -> Result<(fs_err::tokio::File, StreamHasher)> {
        let hasher = self.resumable(size).unwrap_or_default();
        let mut file = fs_err::tokio::OpenOptions::new()
            .create(self.own_file)
            .write(true)
            .truncate(false)
            .open(&self.file)
            .await
            .with_context(|| format!("opening {}", self.file.display()))?;
        if self.own_file {
            file.set_len(hasher.len())
                .await
                .with_context(|| format!("truncating {}", self.file.display()))?;
        }
        file.seek(std::io::SeekFrom::Start(self.start + hasher.len()))
            .await
            .with_context(|| format!("seeking in {}", self.file.display()))?;
        Ok((file, hasher))
    }

    /// What reached the disk, not only what was hashed, must be whole: a file of the blob's own
    /// holds exactly the bytes hashed. (A chunk has its full size from the start; sealing reads
    /// it back.)
    async fn check_written(&self, hashed: u64) -> Result<()> {
        if !self.own_file {
            return Ok(());
        }
        let written = fs_err::tokio::metadata(&self.file)
            .await
            .map_or(0, |m| m.len());
        if written != hashed {
            bail!(
                "{} holds {written} bytes after writing {hashed}: the filesystem lost data",
                self.file.display()
            );
        }
        Ok(())
    }

    /// Removes what a write whose content was wrong left: the checkpoint, and the file when it
    /// is the blob's own (a place in a chunk is simply written again).
    async fn discard(&self) {
        if self.own_file {
            let _ = fs_err::tokio::remove_file(&self.file).await;
        }
        let _ = fs_err::tokio::remove_file(&self.checkpoint).await;
    }
}

/// The saved progress of a partial blob: its synced length and the hash state at that length.
#[derive(serde::Serialize, serde::Deserialize)]
struct Checkpoint {
    offset: u64,
    state: String,
}

/// A checkpoint as read: the archive writer saved `[offset, state]` before it shared this code,
/// so an archive interrupted by an older build still resumes.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum SavedCheckpoint {
    Named(Checkpoint),
    Pair(u64, String),
}

impl Checkpoint {
    fn of(hasher: &StreamHasher) -> Self {
        Checkpoint {
            offset: hasher.len(),
            state: hasher.encoded_state(),
        }
    }

    fn load(path: &Path) -> Option<Self> {
        let bytes = fs_err::read(path).ok()?;
        match serde_json::from_slice(&bytes).ok()? {
            SavedCheckpoint::Named(c) => Some(c),
            SavedCheckpoint::Pair(offset, state) => Some(Checkpoint { offset, state }),
        }
    }

    fn save(&self, path: &Path) -> Result<()> {
        crate::fs::replace_atomic(path, &serde_json::to_vec(self)?)
    }
}

/// Flushes tokio's write buffer and syncs. The flush matters: tokio's `File` writes in the
/// background and reports a failed write (ENOSPC) only on the next operation, and `sync_data`
/// does not report it; without the flush a short file could pass as whole.
pub(crate) async fn flush_and_sync(file: &mut fs_err::tokio::File, path: &Path) -> Result<()> {
    file.flush()
        .await
        .with_context(|| format!("writing {}", path.display()))?;
    file.sync_data()
        .await
        .with_context(|| format!("syncing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use std::sync::Arc;

    const BLOB: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCD";

    impl CheckpointedWrite {
        /// The same write with checkpoints every `n` bytes, so a test need not write 32 MiB.
        fn every(mut self, n: u64) -> Self {
            self.every = n;
            self
        }
    }

    /// `bytes` in pieces of five, then, when `cut`, a dropped connection.
    fn body(bytes: &[u8], cut: bool) -> ByteStream {
        let mut pieces: Vec<std::io::Result<Bytes>> = bytes
            .chunks(5)
            .map(|p| Ok(Bytes::copy_from_slice(p)))
            .collect();
        if cut {
            pieces.push(Err(std::io::Error::other("connection reset")));
        }
        Box::pin(futures_util::stream::iter(pieces))
    }

    async fn write(w: &CheckpointedWrite, bytes: &[u8], cut: bool) -> Result<u64> {
        let from = std::sync::Mutex::new(None);
        let bytes = bytes.to_vec();
        let result = w
            .write(
                &Digest::of(BLOB),
                BLOB.len() as u64,
                |offset| {
                    *from.lock().unwrap() = Some(offset);
                    let rest = bytes[offset.min(bytes.len() as u64) as usize..].to_vec();
                    async move { Ok(body(&rest, cut)) }
                },
                Arc::new(|_| {}),
            )
            .await;
        result.map(|()| from.into_inner().unwrap().unwrap())
    }

    /// The first 25 bytes arrive, then the connection drops: checkpoints were saved at 10
    /// and 20; the unsynced tail is not trusted.
    async fn interrupted(w: &CheckpointedWrite) {
        let e = write(w, &BLOB[..25], true).await.unwrap_err();
        assert!(format!("{e:#}").contains("connection reset"), "{e:#}");
        assert_eq!(w.resumable_len(BLOB.len() as u64), 20);
    }

    #[tokio::test]
    async fn an_interrupted_write_to_its_own_file_resumes_from_its_last_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("blob");
        let w = CheckpointedWrite::own_file(file.clone()).every(8);
        interrupted(&w).await;
        // Garbage after the checkpoint (written, never synced) is cut off, not kept.
        fs_err::OpenOptions::new()
            .append(true)
            .open(&file)
            .and_then(|mut f| std::io::Write::write_all(&mut f, b"garbage"))
            .unwrap();
        assert_eq!(write(&w, BLOB, false).await.unwrap(), 20);
        assert_eq!(fs_err::read(&file).unwrap(), BLOB);
        assert!(
            w.checkpoint_path().exists(),
            "kept until the blob is visible"
        );
        w.finished().await;
        assert!(!w.checkpoint_path().exists());
    }

    #[tokio::test]
    async fn an_interrupted_write_in_place_resumes_and_touches_nothing_around_it() {
        let dir = tempfile::tempdir().unwrap();
        let chunk = dir.path().join("chunk");
        fs_err::write(&chunk, [b'.'; 100]).unwrap();
        let w = CheckpointedWrite::in_place(chunk.clone(), 30, dir.path().join("b.checkpoint"))
            .every(8);
        interrupted(&w).await;
        assert_eq!(write(&w, BLOB, false).await.unwrap(), 20);
        let bytes = fs_err::read(&chunk).unwrap();
        assert_eq!(bytes.len(), 100);
        assert_eq!(&bytes[30..70], BLOB);
        assert!(bytes[..30].iter().chain(&bytes[70..]).all(|b| *b == b'.'));
    }

    #[tokio::test]
    async fn a_digest_mismatch_discards_the_partial_blob_and_its_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("blob");
        let w = CheckpointedWrite::own_file(file.clone()).every(8);
        interrupted(&w).await;
        let mut wrong = BLOB.to_vec();
        wrong[33] ^= 1;
        let e = write(&w, &wrong, false).await.unwrap_err();
        assert!(e.downcast_ref::<DigestMismatch>().is_some(), "{e:#}");
        assert!(!file.exists() && !w.checkpoint_path().exists());
        assert_eq!(w.resumable_len(BLOB.len() as u64), 0);

        // A source longer than the blob is refused at its first extra byte.
        let mut longer = BLOB.to_vec();
        longer.push(b'!');
        let e = write(&w, &longer, false).await.unwrap_err();
        assert!(e.downcast_ref::<DigestMismatch>().is_some(), "{e:#}");
        assert!(!file.exists() && !w.checkpoint_path().exists());

        // In a chunk, the place stays (it is written again); the checkpoint goes.
        let chunk = dir.path().join("chunk");
        fs_err::write(&chunk, [0u8; 64]).unwrap();
        let w =
            CheckpointedWrite::in_place(chunk.clone(), 8, dir.path().join("c.checkpoint")).every(8);
        interrupted(&w).await;
        assert!(write(&w, &wrong, false).await.is_err());
        assert!(chunk.exists() && !w.checkpoint_path().exists());
    }

    /// Writes are gathered into [`WRITE_BUF`] before they reach the file: a checkpoint taken
    /// in the middle of a gathered buffer must still cover exactly the bytes hashed, and a
    /// resumed write must leave the file byte for byte the blob.
    #[tokio::test]
    async fn gathered_writes_checkpoint_and_resume_exactly() {
        let blob: Vec<u8> = (0..WRITE_BUF * 3 + 4321)
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        let digest = Digest::of(&blob);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("blob");
        let every = (WRITE_BUF + 1000) as u64;
        let w = CheckpointedWrite::own_file(file.clone()).every(every);
        let pieces = |from: usize, cut_at: Option<usize>| -> ByteStream {
            let end = cut_at.unwrap_or(blob.len());
            let mut v: Vec<std::io::Result<Bytes>> = blob[from..end]
                .chunks(4093)
                .map(|p| Ok(Bytes::copy_from_slice(p)))
                .collect();
            if cut_at.is_some() {
                v.push(Err(std::io::Error::other("connection reset")));
            }
            Box::pin(futures_util::stream::iter(v))
        };
        let size = blob.len() as u64;
        let cut = WRITE_BUF * 2 + 777;
        let e = w
            .write(
                &digest,
                size,
                |_| async { Ok(pieces(0, Some(cut))) },
                Arc::new(|_| {}),
            )
            .await
            .unwrap_err();
        assert!(format!("{e:#}").contains("connection reset"), "{e:#}");
        // Checkpoints fall on the first piece boundary at least `every` past the last one.
        let mut expected = 0u64;
        for end in (4093..cut).step_by(4093) {
            if end as u64 - expected >= every {
                expected = end as u64;
            }
        }
        let resumed = w.resumable_len(size);
        assert!(expected > every, "the cut comes after a second checkpoint");
        assert_eq!(resumed, expected, "the last checkpoint");
        let on_disk = fs_err::read(&file).unwrap();
        assert_eq!(&on_disk[..resumed as usize], &blob[..resumed as usize]);
        let from = std::sync::Mutex::new(None);
        w.write(
            &digest,
            size,
            |offset| {
                *from.lock().unwrap() = Some(offset);
                let stream = pieces(offset as usize, None);
                async move { Ok(stream) }
            },
            Arc::new(|_| {}),
        )
        .await
        .unwrap();
        assert_eq!(from.into_inner().unwrap(), Some(resumed));
        assert_eq!(fs_err::read(&file).unwrap(), blob);
    }

    #[tokio::test]
    async fn a_checkpoint_is_trusted_only_within_the_file_and_the_blob() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("blob");
        let w = CheckpointedWrite::own_file(file.clone()).every(8);
        interrupted(&w).await;
        // The file lost its tail (a disk that lied about the sync): start over.
        fs_err::OpenOptions::new()
            .write(true)
            .open(&file)
            .and_then(|f| f.set_len(15))
            .unwrap();
        assert_eq!(w.resumable_len(BLOB.len() as u64), 0);
        // A checkpoint past the blob's size (the blob changed): start over.
        interrupted(&w).await;
        assert_eq!(w.resumable_len(19), 0);
    }

    #[tokio::test]
    async fn a_checkpoint_the_archive_writer_saved_as_a_pair_still_resumes() {
        let dir = tempfile::tempdir().unwrap();
        // A chunk whose blob got 20 bytes in before an older build was interrupted.
        let chunk = dir.path().join("chunk");
        let mut laid_out = [0u8; 64];
        laid_out[..20].copy_from_slice(&BLOB[..20]);
        fs_err::write(&chunk, laid_out).unwrap();
        let checkpoint = dir.path().join("d.checkpoint");
        let w = CheckpointedWrite::in_place(chunk.clone(), 0, checkpoint.clone());
        let mut hasher = StreamHasher::new();
        hasher.update(&BLOB[..20]);
        let pair = (hasher.len(), hasher.encoded_state());
        fs_err::write(&checkpoint, serde_json::to_vec(&pair).unwrap()).unwrap();
        assert_eq!(w.resumable_len(BLOB.len() as u64), 20);
        assert_eq!(write(&w, BLOB, false).await.unwrap(), 20);
        assert_eq!(&fs_err::read(&chunk).unwrap()[..40], BLOB);
    }
}
