//! Archives that cross the air gap: a mirror cut into self-contained tar chunks of at most a
//! given size (`mirror_000001.tar`, ... as oc-mirror names them), with a manifest beside them
//! (`manifest.json`: every image, every blob with its chunk and offset, every chunk with its
//! size and sha256) and `SHA256SUMS` over the chunks and the manifest, so the door can be kept
//! with coreutils and OpenSSH alone.
//!
//! Each blob lies whole in exactly one chunk, as a plain tar entry
//! (`blobs/sha256/<hex>`), so extracting every chunk gives the OCI layout a mirror to disk
//! writes. Nothing needs extracting, though: the manifest says where each blob's bytes start,
//! and readers ([`reader::ArchiveReader`]) stream them straight out of the chunk.
//!
//! Writing ([`writer::ArchiveWriter`]) places every blob before the first byte moves: the chunks
//! are laid out (tar headers, end blocks) up front, and each blob's bytes go from the source
//! straight to their place in the chunk, hashed as written, once. The small files of the
//! layout (`index.json`, the mirror record, the status) go into a last chunk when the archive
//! is sealed.

pub mod create;
pub mod push;
pub mod reader;
pub mod tarfmt;
pub mod verify;
pub mod writer;

use crate::oci::digest::Digest;
use crate::openshift::record::ConfigInfo;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The manifest's file name beside the chunks.
pub const MANIFEST_FILE: &str = "manifest.json";
/// The checksum file beside the chunks.
pub const SUMS_FILE: &str = "SHA256SUMS";
/// What the manifest's `kind` says.
pub const KIND: &str = "bootstrap-mirror-archive";
/// The manifest format version.
pub const MANIFEST_VERSION: u32 = 1;
/// The default chunk size when neither `--archive-size` nor `archiveSize` gives one.
pub const DEFAULT_ARCHIVE_SIZE: u64 = 4 * GIB;
/// Where an unfinished archive keeps its chunks and state until it is sealed.
pub const STAGING_DIR: &str = ".staging";

const GIB: u64 = 1024 * 1024 * 1024;

/// The name of chunk `n` (1-based), as oc-mirror names its archives.
pub fn chunk_name(n: usize) -> String {
    format!("mirror_{n:06}.tar")
}

/// Parses an archive size: `4GiB`, `256MiB`, `512KiB`, or a plain number of GiB (as
/// `archiveSize` is read).
pub fn parse_size(input: &str) -> Result<u64> {
    let s = input.trim();
    let units: [(&str, u64); 6] = [
        ("GiB", GIB),
        ("MiB", 1024 * 1024),
        ("KiB", 1024),
        ("G", GIB),
        ("M", 1024 * 1024),
        ("K", 1024),
    ];
    let (number, unit) = units
        .iter()
        .find_map(|(suffix, mult)| s.strip_suffix(suffix).map(|n| (n.trim(), *mult)))
        .unwrap_or((s, GIB));
    let n: u64 = number.parse().map_err(|_| {
        anyhow::anyhow!(
            "archive size '{input}': write a whole number with a unit, such as 4GiB or 256MiB"
        )
    })?;
    let bytes = n
        .checked_mul(unit)
        .with_context(|| format!("archive size '{input}' is too large"))?;
    // A chunk must at least hold a tar header, a block of data and the end blocks.
    if bytes < 4096 {
        bail!("archive size '{input}' is too small: give at least 4KiB (chunks are normally GiBs)");
    }
    Ok(bytes)
}

/// The manifest of an archive.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ArchiveManifest {
    /// Format version.
    pub manifest_version: u32,
    /// Always [`KIND`].
    pub kind: String,
    /// `bootstrap <version>`.
    pub tool: String,
    /// RFC 3339 UTC time the archive was sealed.
    pub created: String,
    /// Where the content came from (`docker://...` registries, or `file://LAYOUT`).
    pub source: String,
    /// The ImageSetConfiguration the content was mirrored with, when there was one.
    pub config: Option<ConfigInfo>,
    /// For a delta archive: the archive (or record) it adds to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<BaseRef>,
    /// The most bytes a chunk may hold (a blob larger than this goes alone in its chunk).
    pub archive_size: u64,
    /// Every image, as the layout's `index.json` names it.
    pub images: Vec<ArchiveImage>,
    /// Every blob carried, with where it lies.
    pub blobs: Vec<ArchiveBlob>,
    /// Blobs the images need that the base carried (a delta only): not in this archive, and
    /// expected at the destination before it is pushed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub base_blobs: Vec<BaseBlob>,
    /// A delta's base: the repositories its content was pushed to (under the destination's
    /// prefix), where a push looks for the base blobs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub base_repositories: Vec<String>,
    /// The layout's other files (`index.json`, `oci-layout`, the mirror record, the status).
    pub files: Vec<ArchiveFile>,
    /// Every chunk, in order.
    pub chunks: Vec<ArchiveChunk>,
}

/// What a delta archive adds to.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BaseRef {
    /// The path given with `--since`.
    pub path: String,
    /// sha256 of that file's bytes.
    pub sha256: String,
    /// What it is: `archive` (an archive's manifest.json) or `record` (a mirror record).
    pub kind: String,
}

/// One image of an archive.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ArchiveImage {
    /// The source reference it was mirrored from (the `index.json` name).
    pub name: String,
    /// Its top manifest.
    pub digest: Digest,
    /// The top manifest's media type.
    pub media_type: String,
    /// The repository it is pushed to, under the destination's prefix.
    pub repository: String,
}

/// One blob of an archive and where it lies.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ArchiveBlob {
    /// Its digest.
    pub digest: Digest,
    /// Its size.
    pub size: u64,
    /// The chunk holding it.
    pub chunk: String,
    /// Where its bytes start in the chunk (its tar header is the 512 bytes before).
    pub offset: u64,
}

/// A blob a delta's images need from its base.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BaseBlob {
    /// Its digest.
    pub digest: Digest,
    /// Its size.
    pub size: u64,
}

/// One of the layout's small files.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ArchiveFile {
    /// Its path in the layout (and in the chunk).
    pub path: String,
    /// Its size.
    pub size: u64,
    /// sha256 of its bytes (hex).
    pub sha256: String,
    /// The chunk holding it.
    pub chunk: String,
    /// Where its bytes start in the chunk.
    pub offset: u64,
}

/// One chunk.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ArchiveChunk {
    /// Its file name.
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// sha256 of its bytes (hex).
    pub sha256: String,
}

impl ArchiveManifest {
    /// Reads and checks `DIR/manifest.json`, or a manifest file named directly.
    pub fn load(path: &Path) -> Result<(Self, String)> {
        let text = crate::bounded::read_regular_to_string(path, crate::bounded::LAYOUT_FILE_MAX)
            .with_context(|| format!("reading the archive manifest {}", path.display()))?;
        let m = Self::parse(path, &text)?;
        Ok((m, text))
    }

    /// Parses a manifest's text; `path` names it in errors.
    pub fn parse(path: &Path, text: &str) -> Result<Self> {
        let m: ArchiveManifest = serde_json::from_str(text).map_err(|e| {
            anyhow::anyhow!(
                "{}:{}:{}: not a bootstrap archive manifest: {e}",
                path.display(),
                e.line(),
                e.column()
            )
        })?;
        if m.kind != KIND {
            bail!(
                "{}: kind is '{}', not '{KIND}': name the manifest.json that bootstrap mirror wrote beside the chunks",
                path.display(),
                m.kind
            );
        }
        if m.manifest_version != MANIFEST_VERSION {
            bail!(
                "{}: manifestVersion {} is not one this bootstrap reads ({MANIFEST_VERSION}); use the bootstrap that wrote it",
                path.display(),
                m.manifest_version
            );
        }
        for name in m.chunks.iter().map(|c| &c.name) {
            if !is_chunk_name(name) {
                bail!(
                    "{}: chunk name '{name}' is not mirror_NNNNNN.tar; the manifest was not written by bootstrap",
                    path.display()
                );
            }
        }
        Ok(m)
    }

    /// Every digest the archive's images can rely on: its own blobs and its base's.
    pub fn all_digests(&self) -> impl Iterator<Item = &Digest> {
        self.blobs
            .iter()
            .map(|b| &b.digest)
            .chain(self.base_blobs.iter().map(|b| &b.digest))
    }
}

/// True for `mirror_NNNNNN.tar` (a name that can never climb out of the directory).
pub fn is_chunk_name(name: &str) -> bool {
    name.strip_prefix("mirror_")
        .and_then(|r| r.strip_suffix(".tar"))
        .is_some_and(|n| n.len() == 6 && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Parses `archive://DIR`.
pub fn parse_location(input: &str) -> Option<PathBuf> {
    input
        .strip_prefix("archive://")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4GiB").unwrap(), 4 * GIB);
        assert_eq!(parse_size("256MiB").unwrap(), 256 * 1024 * 1024);
        assert_eq!(parse_size("2").unwrap(), 2 * GIB);
        assert!(parse_size("1.5GiB").is_err());
        assert!(parse_size("1KiB").is_err());
        assert!(parse_size("99999999999999GiB").is_err());
    }

    #[test]
    fn chunk_names() {
        assert_eq!(chunk_name(1), "mirror_000001.tar");
        assert!(is_chunk_name("mirror_000012.tar"));
        assert!(!is_chunk_name("mirror_../x.tar"));
        assert!(!is_chunk_name("mirror_1.tar"));
    }
}
