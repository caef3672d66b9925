//! Reading an archive in place: the manifest says which chunk holds each blob and where its
//! bytes start, so a blob is streamed straight out of its chunk (no extraction; each byte read
//! once). Only the layout's small files (`index.json`, the mirror record, the status) are
//! copied out, into a working directory, checked against the manifest's sha256.

use super::{ArchiveManifest, MANIFEST_FILE};
use crate::oci::digest::Digest;
use crate::oci::layout::OciLayout;
use anyhow::{bail, Context, Result};
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// An archive opened for reading.
#[derive(Debug)]
pub struct ArchiveReader {
    dir: PathBuf,
    manifest: ArchiveManifest,
    /// sha256 of manifest.json's bytes.
    manifest_sha256: String,
    blobs: HashMap<Digest, (usize, u64, u64)>,
    base: HashMap<Digest, u64>,
}

impl ArchiveReader {
    /// Opens the archive at `dir`: reads its manifest and checks that every chunk is there at
    /// its size, naming every missing or truncated one before anything is read.
    pub fn open(dir: &Path) -> Result<Self> {
        let path = dir.join(MANIFEST_FILE);
        if !path.is_file() {
            if dir.join(super::STAGING_DIR).is_dir() {
                bail!(
                    "{} is an unfinished archive (it has no {MANIFEST_FILE} yet): run the mirror that writes it again to finish it",
                    dir.display()
                );
            }
            bail!(
                "{} is not a bootstrap archive: it has no {MANIFEST_FILE}",
                dir.display()
            );
        }
        let (manifest, text) = ArchiveManifest::load(&path)?;
        let mut problems = Vec::new();
        for c in &manifest.chunks {
            match fs_err::metadata(dir.join(&c.name)) {
                Ok(m) if m.is_file() && m.len() == c.size => {}
                Ok(m) if m.is_file() => problems.push(format!(
                    "{} is {} bytes, the manifest says {} (copied only in part?)",
                    c.name,
                    m.len(),
                    c.size
                )),
                Ok(_) => problems.push(format!("{} is not a regular file", c.name)),
                Err(_) => problems.push(format!("{} is missing", c.name)),
            }
        }
        if !problems.is_empty() {
            bail!(
                "archive {} cannot be read, so nothing was read from it:\n  {}\ncopy the missing chunks from the removable media into {} and run the same command again",
                dir.display(),
                problems.join("\n  "),
                dir.display()
            );
        }
        let index: HashMap<&str, usize> = manifest
            .chunks
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name.as_str(), i))
            .collect();
        let mut blobs = HashMap::new();
        for b in &manifest.blobs {
            let Some(&i) = index.get(b.chunk.as_str()) else {
                bail!(
                    "{}: blob {} lies in {}, which the manifest does not list",
                    path.display(),
                    b.digest,
                    b.chunk
                );
            };
            if b.offset
                .checked_add(b.size)
                .is_none_or(|end| end > manifest.chunks[i].size)
            {
                bail!(
                    "{}: blob {} runs past the end of {}",
                    path.display(),
                    b.digest,
                    b.chunk
                );
            }
            blobs.insert(b.digest.clone(), (i, b.offset, b.size));
        }
        let base = manifest
            .base_blobs
            .iter()
            .map(|b| (b.digest.clone(), b.size))
            .collect();
        Ok(ArchiveReader {
            dir: dir.to_path_buf(),
            manifest_sha256: Digest::of(text.as_bytes()).hex().to_string(),
            manifest,
            blobs,
            base,
        })
    }

    /// The archive's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Its manifest.
    pub fn manifest(&self) -> &ArchiveManifest {
        &self.manifest
    }

    /// sha256 of its manifest.json.
    pub fn manifest_sha256(&self) -> &str {
        &self.manifest_sha256
    }

    /// Where a blob's bytes lie: the chunk, the offset, the size.
    pub fn location(&self, digest: &Digest) -> Option<(PathBuf, u64, u64)> {
        self.blobs.get(digest).map(|(i, offset, size)| {
            (
                self.dir.join(&self.manifest.chunks[*i].name),
                *offset,
                *size,
            )
        })
    }

    /// The size of a blob the archive carries.
    pub fn size(&self, digest: &Digest) -> Option<u64> {
        self.blobs.get(digest).map(|(_, _, s)| *s)
    }

    /// The size of a blob a delta's base carried (expected at the destination, not here).
    pub fn base_size(&self, digest: &Digest) -> Option<u64> {
        self.base.get(digest).copied()
    }

    /// Copies the layout's small files out into `into` (each checked against the manifest)
    /// and returns the layout they make, reading its blobs from the chunks.
    pub fn open_layout(self, into: &Path) -> Result<OciLayout> {
        fs_err::create_dir_all(into)?;
        for f in &self.manifest.files {
            let rel = Path::new(&f.path);
            if rel.is_absolute()
                || rel
                    .components()
                    .any(|c| !matches!(c, std::path::Component::Normal(_)))
            {
                bail!(
                    "{}: file '{}' climbs out of the layout; the manifest was not written by bootstrap",
                    self.dir.join(MANIFEST_FILE).display(),
                    f.path
                );
            }
            let (chunk, _, _) = self
                .manifest
                .chunks
                .iter()
                .enumerate()
                .find(|(_, c)| c.name == f.chunk)
                .map(|(i, c)| (c.name.clone(), i, ()))
                .with_context(|| format!("file {} lies in an unlisted chunk", f.path))?;
            let bytes = read_range(&self.dir.join(&chunk), f.offset, f.size)?;
            if Digest::of(&bytes).hex() != f.sha256 {
                bail!(
                    "{} in {} is corrupt (its sha256 is not the manifest's); run `bootstrap verify archive://{}`",
                    f.path,
                    chunk,
                    self.dir.display()
                );
            }
            let dest = into.join(rel);
            if let Some(parent) = dest.parent() {
                fs_err::create_dir_all(parent)?;
            }
            crate::fs::write_atomic(&dest, &bytes)?;
        }
        let layout = OciLayout::open(into)?;
        Ok(layout.with_reader(std::sync::Arc::new(self)))
    }
}

/// Reads `len` bytes at `offset` of a regular file (a small file out of a chunk).
pub fn read_range(path: &Path, offset: u64, len: u64) -> Result<Vec<u8>> {
    if len > crate::bounded::LAYOUT_FILE_MAX {
        bail!("{}: {len} bytes is too large to read whole", path.display());
    }
    let (file, _) = crate::bounded::open_regular(path)?;
    let mut file = file.into_parts().0;
    file.seek(SeekFrom::Start(offset))?;
    let mut buf = vec![0u8; len as usize];
    file.read_exact(&mut buf)
        .with_context(|| format!("reading {} bytes at {offset} of {}", len, path.display()))?;
    Ok(buf)
}
