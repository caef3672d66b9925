//! The crash-safe record of uploads in flight, so that a rerun after kill -9 or a dropped link
//! continues a blob where the registry's upload session stands instead of sending it again.
//!
//! One small JSON file per blob and destination repository, replaced atomically (temp file,
//! rename) when the session opens and after every chunk the registry accepted: the session's
//! location, the bytes it holds, and our hash state at that offset. Not synced: after a power
//! cut an entry may be an older one or none, and either is safe (the registry's own status of
//! the session decides where a push continues, and bytes it holds beyond our entry are hashed
//! again, not trusted), while an fsync after every chunk stalled the transfer behind the
//! write-back of the registries' data (docs/bench.md, issue 31, point 6). What is committed needs no journal: a registry
//! answers HEAD for it and a layout has it under its digest. Partial blobs of a disk mirror
//! keep their own checkpoints beside them (see `OciLayout::write_blob_from`).

use crate::fs::replace_atomic;
use crate::oci::digest::{Digest, StreamHasher};
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// The upload journal in a working directory.
#[derive(Clone, Debug)]
pub struct Journal {
    dir: PathBuf,
}

/// An upload in flight.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UploadEntry {
    /// Destination registry host.
    pub registry: String,
    /// Destination repository.
    pub repository: String,
    /// The blob.
    pub digest: Digest,
    /// Its size.
    pub size: u64,
    /// The session location to continue at. It carries the registry's own upload state,
    /// never credentials (those go in headers).
    pub location: String,
    /// Bytes the registry acknowledged.
    pub offset: u64,
    /// Our sha256 state over those bytes (base64), so the rest can be verified in flight.
    pub hash_state: String,
}

impl UploadEntry {
    /// The hash state at `offset`, when it restores.
    pub fn hasher(&self) -> Option<StreamHasher> {
        StreamHasher::from_encoded_state(&self.hash_state, self.offset)
    }
}

impl Journal {
    /// Opens (creating) the journal under `workdir`.
    pub fn open(workdir: &Path) -> Result<Self> {
        let dir = workdir.join("uploads");
        fs_err::create_dir_all(&dir).context("creating the upload journal")?;
        Ok(Journal { dir })
    }

    /// Where the journal lives.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, registry: &str, repository: &str, digest: &Digest) -> PathBuf {
        let key = Digest::of(format!("{registry}/{repository}").as_bytes());
        self.dir
            .join(format!("{}-{}.json", &key.hex()[..16], digest.hex()))
    }

    /// The upload of `digest` into `registry/repository` an earlier run left, if any. An
    /// unreadable entry (a torn write cannot happen, but a hand edit can) counts as none.
    pub fn load(&self, registry: &str, repository: &str, digest: &Digest) -> Option<UploadEntry> {
        let bytes = fs_err::read(self.path(registry, repository, digest)).ok()?;
        let entry: UploadEntry = serde_json::from_slice(&bytes).ok()?;
        (entry.registry == registry && entry.repository == repository && &entry.digest == digest)
            .then_some(entry)
    }

    /// Records an upload's progress (atomically, not durably: see the module's doc).
    pub fn save(&self, entry: &UploadEntry) -> Result<()> {
        let path = self.path(&entry.registry, &entry.repository, &entry.digest);
        replace_atomic(&path, &serde_json::to_vec_pretty(entry)?)
            .with_context(|| format!("writing upload journal {}", path.display()))
    }

    /// Forgets an upload (committed, or abandoned to start over).
    pub fn remove(&self, registry: &str, repository: &str, digest: &Digest) {
        let _ = fs_err::remove_file(self.path(registry, repository, digest));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_round_trips_with_its_hash_state() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::open(dir.path()).unwrap();
        let digest = Digest::of(b"blob");
        let mut hasher = StreamHasher::new();
        hasher.update(b"bl");
        let entry = UploadEntry {
            registry: "r:5000".into(),
            repository: "a/b".into(),
            digest: digest.clone(),
            size: 4,
            location: "http://r:5000/v2/a/b/blobs/uploads/x?_state=y".into(),
            offset: 2,
            hash_state: hasher.encoded_state(),
        };
        journal.save(&entry).unwrap();
        let back = journal.load("r:5000", "a/b", &digest).unwrap();
        let mut h = back.hasher().unwrap();
        h.update(b"ob");
        assert_eq!(h.finish().0, digest);
        assert!(journal.load("r:5000", "a/c", &digest).is_none());
        journal.remove("r:5000", "a/b", &digest);
        assert!(journal.load("r:5000", "a/b", &digest).is_none());
    }
}
