//! The OCI image layout on disk (`oci-layout`, `index.json`, `blobs/sha256/`): our content store
//! and archive format, readable by skopeo, podman and oras. Blobs are written aside, hashed as
//! they are written, fsynced, and renamed into place only when their digest matches, so a blob
//! that is visible is always whole and correct.

use super::digest::{Digest, StreamHasher};
use super::stream::ByteStream;
use anyhow::{bail, Context, Result};
use futures_util::StreamExt;
use std::path::{Path, PathBuf};
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
        })
    }

    /// Opens the layout at `root`, creating it (and the directory) when absent.
    pub fn create(root: &Path) -> Result<Self> {
        fs_err::create_dir_all(root.join("blobs/sha256")).context("creating the OCI layout")?;
        fs_err::create_dir_all(root.join(PARTIAL_DIR))?;
        let layout = OciLayout {
            root: root.to_path_buf(),
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
        std::fs::metadata(self.blob_path(digest))
            .ok()
            .map(|m| m.len())
    }

    /// Reads a small blob (a manifest or config) whole, verifying its digest.
    pub fn read_verified(&self, digest: &Digest) -> Result<bytes::Bytes> {
        let path = self.blob_path(digest);
        let bytes = fs_err::read(&path)?;
        let actual = Digest::of(&bytes);
        if &actual != digest {
            bail!(
                "{} is corrupt: its content hashes to {actual}; run `bootstrap verify file://{}`",
                path.display(),
                self.root.display()
            );
        }
        Ok(bytes.into())
    }

    /// Writes a blob from a stream: into `.partial/`, hashed while written, fsynced, checked
    /// against `digest` and `size`, then renamed into `blobs/sha256/`. On any failure the
    /// partial file is removed and nothing becomes visible.
    pub async fn write_blob(&self, digest: &Digest, size: u64, mut body: ByteStream) -> Result<()> {
        let tmp =
            self.root
                .join(PARTIAL_DIR)
                .join(format!("{}.{}", digest.hex(), std::process::id()));
        let result = async {
            let mut file = tokio::fs::File::create(&tmp)
                .await
                .with_context(|| format!("creating {}", tmp.display()))?;
            let mut hasher = StreamHasher::new();
            while let Some(chunk) = body.next().await {
                let chunk = chunk.with_context(|| format!("reading blob {digest}"))?;
                hasher.update(&chunk);
                if hasher.len() > size {
                    bail!("blob {digest} is longer than its size of {size} bytes");
                }
                file.write_all(&chunk)
                    .await
                    .with_context(|| format!("writing {}", tmp.display()))?;
            }
            file.sync_all()
                .await
                .with_context(|| format!("syncing {}", tmp.display()))?;
            drop(file);
            hasher.verify(&format!("blob {digest}"), digest, size)?;
            tokio::fs::rename(&tmp, self.blob_path(digest))
                .await
                .with_context(|| format!("moving {} into place", tmp.display()))?;
            Ok(())
        }
        .await;
        if result.is_err() {
            let _ = tokio::fs::remove_file(&tmp).await;
        }
        result
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
        let text = fs_err::read_to_string(&path)?;
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

/// Writes `path` atomically: a temp file beside it, fsync, rename, fsync of the directory.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let result = (|| -> Result<()> {
        let mut f = fs_err::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs_err::rename(&tmp, path)?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
