//! The OCI image layout on disk (`oci-layout`, `index.json`, `blobs/sha256/`): our content store
//! and archive format, readable by skopeo, podman and oras. Blobs are written aside (through the
//! shared checkpointed write, [`super::checkpointed`]), hashed as they are written, fsynced, and
//! renamed into place only when their digest matches, so a blob that is visible is always whole
//! and correct.

use super::checkpointed::{flush_and_sync, CheckpointedWrite};
use super::digest::{Digest, StreamHasher};
use super::stream::{ByteStream, OnBytes};
use crate::mirror::archive::reader::ArchiveReader;
use crate::mirror::archive::writer::ArchiveWriter;
use anyhow::{bail, Context, Result};
use futures_util::StreamExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::io::AsyncWriteExt;

/// The annotation that names an index entry (skopeo's `oci:DIR:NAME`).
pub const REF_NAME: &str = "org.opencontainers.image.ref.name";

/// Where blobs being written wait until they are verified; not part of the layout.
pub const PARTIAL_DIR: &str = ".partial";

/// One entry of `index.json`.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct IndexEntry {
    /// Media type of the manifest.
    pub media_type: String,
    /// Its digest.
    pub digest: Digest,
    /// Its size.
    pub size: u64,
    /// Annotations; `org.opencontainers.image.ref.name` names the entry.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub annotations: std::collections::BTreeMap<String, String>,
}

impl IndexEntry {
    /// The entry's ref name, if it has one.
    pub fn ref_name(&self) -> Option<&str> {
        self.annotations.get(REF_NAME).map(String::as_str)
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct IndexFile {
    schema_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    media_type: Option<String>,
    manifests: Vec<IndexEntry>,
}

/// An OCI image layout rooted at a directory.
#[derive(Clone, Debug)]
pub struct OciLayout {
    root: PathBuf,
    chunks: Option<Chunks>,
}

/// Where an archive's blobs lie: in chunks being written, or in a sealed archive's chunks.
#[derive(Clone, Debug)]
enum Chunks {
    Writer(Arc<ArchiveWriter>),
    Reader(Arc<ArchiveReader>),
}

impl OciLayout {
    /// Opens an existing layout; fails naming the directory when it is not one.
    pub fn open(root: &Path) -> Result<Self> {
        let marker = root.join("oci-layout");
        if !marker.is_file() {
            bail!(
                "{} is not an OCI image layout (no oci-layout file): name the directory a mirror to disk wrote",
                root.display()
            );
        }
        Ok(OciLayout {
            root: root.to_path_buf(),
            chunks: None,
        })
    }

    /// This layout with its blobs written into an archive's chunks (manifests and the small
    /// files stay files of the layout until the archive is sealed).
    pub fn with_writer(mut self, writer: Arc<ArchiveWriter>) -> Self {
        self.chunks = Some(Chunks::Writer(writer));
        self
    }

    /// This layout with its blobs read from a sealed archive's chunks.
    pub fn with_reader(mut self, reader: Arc<ArchiveReader>) -> Self {
        self.chunks = Some(Chunks::Reader(reader));
        self
    }

    /// The archive this layout's blobs are written into.
    pub fn archive_writer(&self) -> Option<&Arc<ArchiveWriter>> {
        match &self.chunks {
            Some(Chunks::Writer(w)) => Some(w),
            _ => None,
        }
    }

    /// The archive this layout's blobs are read from.
    pub fn archive_reader(&self) -> Option<&Arc<ArchiveReader>> {
        match &self.chunks {
            Some(Chunks::Reader(r)) => Some(r),
            _ => None,
        }
    }

    /// How the layout is named to a user: `file://DIR`, or `archive://DIR` for an archive.
    pub fn label(&self) -> String {
        match &self.chunks {
            Some(Chunks::Reader(r)) => format!("archive://{}", r.dir().display()),
            Some(Chunks::Writer(w)) => format!("archive://{}", w.dir().display()),
            None => format!("file://{}", self.root.display()),
        }
    }

    /// Where a blob's bytes lie: a file (from 0) or a range of an archive chunk, with the
    /// blob's size as the layout declares it (a file's length; the manifest's size).
    pub fn blob_location(&self, digest: &Digest) -> Option<(PathBuf, u64, u64)> {
        match &self.chunks {
            Some(Chunks::Reader(r)) if r.size(digest).is_some() => r.location(digest),
            Some(Chunks::Writer(w)) if w.places(digest) => {
                w.has(digest).and_then(|_| w.location(digest))
            }
            _ => {
                let path = self.blob_path(digest);
                let len = fs_err::metadata(&path).ok()?.len();
                Some((path, 0, len))
            }
        }
    }

    /// The blob's bytes from `offset`, unverified (the consumer hashes them): out of its
    /// chunk, or its file (one byte past `size` at most, so an overlong file shows).
    pub async fn blob_stream(
        &self,
        digest: &Digest,
        offset: u64,
        size: u64,
    ) -> std::io::Result<ByteStream> {
        match &self.chunks {
            Some(Chunks::Reader(r)) if r.size(digest).is_some() => {
                let (path, start, len) = r.location(digest).expect("sized blobs have a place");
                super::stream::range_stream(&path, start + offset.min(len), len - offset.min(len))
                    .await
            }
            _ => super::stream::file_stream(&self.blob_path(digest), offset, size).await,
        }
    }

    /// Opens the layout at `root`, creating it (and the directory) when absent.
    pub fn create(root: &Path) -> Result<Self> {
        fs_err::create_dir_all(root.join("blobs/sha256")).context("creating the OCI layout")?;
        fs_err::create_dir_all(root.join(PARTIAL_DIR))?;
        let layout = OciLayout {
            root: root.to_path_buf(),
            chunks: None,
        };
        if !root.join("oci-layout").is_file() {
            layout.write_file_atomic("oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#)?;
        }
        if !root.join("index.json").is_file() {
            layout.write_index(&[])?;
        }
        Ok(layout)
    }

    /// A handle on a directory that is not (yet) a layout; [`OciLayout::create`] makes it one.
    pub fn unopened(root: &Path) -> Self {
        OciLayout {
            root: root.to_path_buf(),
            chunks: None,
        }
    }

    /// The layout's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Path of a blob.
    pub fn blob_path(&self, digest: &Digest) -> PathBuf {
        self.root.join("blobs/sha256").join(digest.hex())
    }

    /// The size of a blob when the layout has it.
    pub fn blob_size(&self, digest: &Digest) -> Option<u64> {
        match &self.chunks {
            Some(Chunks::Reader(r)) => {
                if let Some(s) = r.size(digest) {
                    return Some(s);
                }
            }
            Some(Chunks::Writer(w)) => {
                if let Some(s) = w.has(digest) {
                    return Some(s);
                }
                if w.places(digest) {
                    return None;
                }
            }
            None => {}
        }
        fs_err::metadata(self.blob_path(digest))
            .ok()
            .map(|m| m.len())
    }

    /// Reads a small blob (a manifest or config) whole, verifying its digest.
    pub fn read_verified(&self, digest: &Digest) -> Result<bytes::Bytes> {
        let path = self.blob_path(digest);
        let bytes = match self.blob_location(digest) {
            Some((chunk, start, len)) if self.chunks.is_some() && chunk != path => {
                if len > crate::bounded::SMALL_BLOB_MAX {
                    bail!("blob {digest} is {len} bytes, too large to read whole");
                }
                crate::mirror::archive::reader::read_range(&chunk, start, len)?
            }
            _ => crate::bounded::read_regular(&path, crate::bounded::SMALL_BLOB_MAX)?,
        };
        let actual = Digest::of(&bytes);
        if &actual != digest {
            bail!(
                "blob {digest} of {} is corrupt: its content hashes to {actual}; run `bootstrap verify {}`",
                self.label(),
                self.label()
            );
        }
        Ok(bytes.into())
    }

    /// Takes the layout's lock for this process's lifetime (an exclusive `flock` on
    /// `.partial/lock`), so two runs never write the same partial blobs.
    pub fn lock(&self) -> Result<fs_err::File> {
        let path = self.root.join(PARTIAL_DIR).join("lock");
        match crate::fs::try_lock(&path)? {
            Some(file) => Ok(file),
            None => bail!(
                "{} is in use by another bootstrap run (it holds {}); wait for it to finish",
                self.root.display(),
                path.display()
            ),
        }
    }

    /// Bytes of a blob already written and checkpointed by an earlier, interrupted run.
    /// Where a write of it would resume (0 when nothing usable was checkpointed).
    pub fn partial_len(&self, digest: &Digest, size: u64) -> u64 {
        if let Some(w) = self.archive_writer().filter(|w| w.places(digest)) {
            return w.partial_len(digest, size);
        }
        CheckpointedWrite::own_file(self.partial_path(digest)).resumable_len(size)
    }

    fn partial_path(&self, digest: &Digest) -> PathBuf {
        self.root.join(PARTIAL_DIR).join(digest.hex())
    }

    /// Writes a blob into `.partial/` through the shared [`CheckpointedWrite`] (hashed while
    /// written, checked against `digest` and `size`, synced, checkpointed every
    /// [`CHECKPOINT_BYTES`](super::checkpointed::CHECKPOINT_BYTES) so an interrupted write
    /// continues from there: `open(offset)` must return the blob's bytes from `offset`), then
    /// renamed into `blobs/sha256/`. Content that does not match is deleted, and nothing
    /// becomes visible before it matched.
    pub async fn write_blob_from<F, Fut>(
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
        if let Some(w) = self.archive_writer().filter(|w| w.places(digest)) {
            return w.write_blob(digest, size, open, on_bytes).await;
        }
        let tmp = self.partial_path(digest);
        let partial = CheckpointedWrite::own_file(tmp.clone());
        partial.write(digest, size, open, on_bytes).await?;
        fs_err::tokio::rename(&tmp, self.blob_path(digest))
            .await
            .with_context(|| format!("moving {} into place", tmp.display()))?;
        partial.finished().await;
        Ok(())
    }

    /// Writes a blob whose digest is not known beforehand (content built here, such as a
    /// model layer): into `.partial/`, hashed while written, synced, then renamed to the
    /// digest it turned out to have. Returns that digest and the size. One pass over the
    /// content, however large.
    pub async fn write_new_blob(&self, mut body: ByteStream) -> Result<(Digest, u64)> {
        static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = self
            .root
            .join(PARTIAL_DIR)
            .join(format!("new-{}-{seq}", std::process::id()));
        let result = async {
            let mut file = fs_err::tokio::File::create(&tmp)
                .await
                .with_context(|| format!("creating {}", tmp.display()))?;
            let mut hasher = StreamHasher::new();
            while let Some(chunk) = body.next().await {
                let chunk = chunk.context("building a blob")?;
                hasher.update(&chunk);
                file.write_all(&chunk)
                    .await
                    .with_context(|| format!("writing {}", tmp.display()))?;
            }
            flush_and_sync(&mut file, &tmp).await?;
            let (digest, size) = hasher.finish();
            fs_err::tokio::rename(&tmp, self.blob_path(&digest))
                .await
                .with_context(|| format!("moving {} into place", tmp.display()))?;
            anyhow::Ok((digest, size))
        }
        .await;
        if result.is_err() {
            let _ = fs_err::tokio::remove_file(&tmp).await;
        }
        result
    }

    /// Writes a whole blob from a stream (see [`OciLayout::write_blob_from`]).
    pub async fn write_blob(&self, digest: &Digest, size: u64, body: ByteStream) -> Result<()> {
        let mut body = Some(body);
        self.write_blob_from(
            digest,
            size,
            |offset| {
                let body = body.take();
                async move {
                    match body {
                        Some(b) if offset == 0 => Ok(b),
                        _ => bail!("blob {digest}: a whole-body write cannot resume"),
                    }
                }
            },
            Arc::new(|_| {}),
        )
        .await
    }

    /// Writes bytes (a manifest) as a blob, verified like any other.
    pub async fn write_bytes(&self, digest: &Digest, bytes: bytes::Bytes) -> Result<()> {
        if self.blob_size(digest) == Some(bytes.len() as u64) {
            return Ok(());
        }
        let size = bytes.len() as u64;
        let stream: ByteStream = Box::pin(futures_util::stream::once(async move { Ok(bytes) }));
        self.write_blob(digest, size, stream).await
    }

    /// The entries of `index.json`.
    pub fn index(&self) -> Result<Vec<IndexEntry>> {
        let path = self.root.join("index.json");
        let text = crate::bounded::read_regular_to_string(&path, crate::bounded::LAYOUT_FILE_MAX)?;
        let index: IndexFile =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        Ok(index.manifests)
    }

    /// Adds entries to `index.json`, replacing any with the same ref name; written atomically.
    pub fn add_to_index(&self, entries: &[IndexEntry]) -> Result<()> {
        let mut current = self.index()?;
        for e in entries {
            current.retain(|c| c.ref_name().is_none() || c.ref_name() != e.ref_name());
            current.push(e.clone());
        }
        current.sort_by(|a, b| a.ref_name().cmp(&b.ref_name()));
        self.write_index(&current)
    }

    fn write_index(&self, entries: &[IndexEntry]) -> Result<()> {
        let index = IndexFile {
            schema_version: 2,
            media_type: Some(super::manifest::OCI_IMAGE_INDEX_MEDIA_TYPE.to_string()),
            manifests: entries.to_vec(),
        };
        let mut bytes = serde_json::to_vec_pretty(&index)?;
        bytes.push(b'\n');
        self.write_file_atomic("index.json", &bytes)
    }

    /// Writes a file at the layout's top level: temp file, fsync, rename.
    pub fn write_file_atomic(&self, name: &str, bytes: &[u8]) -> Result<()> {
        write_atomic(&self.root.join(name), bytes)
    }
}

// Kept here while other modules still import them from the layout; `crate::fs` owns them.
pub use crate::fs::{write_atomic, write_atomic_mode};
