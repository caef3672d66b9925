//! A stage's published outputs by sha256 (the runner's "outputs intact" check, and the inputs a
//! later stage reads), in memory bounded by one read buffer whatever the files' sizes (the agent
//! ISO is about 1.2 GB, the installer about 500 MB, and a run hashes them several times), and
//! without reading again a file that has not changed since it was last hashed:
//! `RUN/cache/hashes.json` keeps each file's sha256 beside what identifies that version of it.
//!
//! An entry is trusted only when both hold:
//! - the file's size, mtime, ctime, inode and device are the entry's. A new file renamed over
//!   the old one has another inode; a write moves mtime and ctime; `touch -d` or `cp -p` can set
//!   mtime back, but not ctime, which the kernel sets to now on every change.
//! - the file's mtime and ctime were older than [`RACY_WINDOW`] when the entry was hashed
//!   (git's racy-git rule). Timestamps have a granularity (the kernel's clock tick, 2 s on FAT),
//!   so a file written again within the tick in which it was hashed keeps the same times with
//!   other bytes; a file last changed well before it was hashed cannot. An output hashed just
//!   after it was written is therefore read again on the next run, and trusted from then on.
//!
//! A cache that cannot be read, does not parse or was written by another version is ignored
//! (every output is read again) and rewritten; deleting it has the same effect. Times come
//! from this machine's clock: a filesystem stamping files with another clock (an NFS server's
//! running behind) could defeat the second rule, as it does git's.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The cache file's format; another is ignored.
const VERSION: u32 = 1;

/// How much older than its hashing a file's mtime and ctime must be for its entry to be
/// trusted: more than the coarsest timestamps a Linux filesystem keeps (FAT's 2 s) plus a
/// clock tick.
pub const RACY_WINDOW: Duration = Duration::from_secs(3);

/// What identifies one version of a file, as `fstat` gives it (times in ns since the epoch).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Identity {
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
    dev: u64,
    ino: u64,
}

impl Identity {
    fn of(meta: &std::fs::Metadata) -> Self {
        let ns = |s: i64, n: i64| s.saturating_mul(1_000_000_000).saturating_add(n);
        Identity {
            size: meta.size(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
            dev: meta.dev(),
            ino: meta.ino(),
        }
    }
}

/// A file's sha256 and the version of it that was hashed.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Entry {
    #[serde(flatten)]
    identity: Identity,
    /// When the hashing began (ns since the epoch).
    hashed_ns: i64,
    sha256: String,
}

impl Entry {
    /// Whether the entry still holds for a file that is now `identity` (see the module doc).
    fn holds_for(&self, identity: &Identity, window: Duration) -> bool {
        let window = i64::try_from(window.as_nanos()).unwrap_or(i64::MAX);
        let settled = self.hashed_ns.saturating_sub(window);
        self.identity == *identity && identity.mtime_ns < settled && identity.ctime_ns < settled
    }
}

/// `RUN/cache/hashes.json`: entries by path relative to the run directory.
#[derive(Default, Serialize, Deserialize)]
struct CacheFile {
    version: u32,
    files: BTreeMap<String, Entry>,
}

/// Hashes output folders through the cache, counting what it had to read.
pub struct OutputHasher {
    cache: PathBuf,
    files: BTreeMap<String, Entry>,
    changed: bool,
    window: Duration,
    bytes_read: u64,
}

impl OutputHasher {
    /// A hasher with the cache at `cache` (empty when the file is missing or not one this
    /// version wrote).
    pub fn load(cache: PathBuf) -> Self {
        let files = fs_err::read(&cache)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<CacheFile>(&bytes).ok())
            .filter(|c| c.version == VERSION)
            .map(|c| c.files)
            .unwrap_or_default();
        OutputHasher {
            cache,
            files,
            changed: false,
            window: RACY_WINDOW,
            bytes_read: 0,
        }
    }

    /// Bytes read to hash so far (none for a file whose entry held).
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    /// Every file under `root/dir`, by its path relative to `root`, with its sha256 (empty
    /// when the folder does not exist). Entries of files under `dir` that are gone are dropped.
    pub fn hash_dir(&mut self, root: &Path, dir: &str) -> Result<BTreeMap<String, String>> {
        let mut out = BTreeMap::new();
        let top = root.join(dir);
        if top.exists() {
            let mut pending = vec![top];
            while let Some(d) = pending.pop() {
                for entry in fs_err::read_dir(&d)? {
                    let path = entry?.path();
                    let meta = fs_err::symlink_metadata(&path)?;
                    let rel = path
                        .strip_prefix(root)
                        .unwrap_or(&path)
                        .to_string_lossy()
                        .into_owned();
                    if meta.is_dir() {
                        pending.push(path);
                    } else if meta.is_file() {
                        let sha256 = self.regular(&rel, &path)?;
                        out.insert(rel, sha256);
                    } else {
                        // Not ours to write (a symlink): hashed as before, through it, uncached.
                        let (digest, len) = fs_err::File::open(&path)
                            .and_then(crate::bounded::hash_reader)
                            .with_context(|| format!("hashing {}", path.display()))?;
                        self.bytes_read += len;
                        out.insert(rel, digest.hex().to_string());
                    }
                }
            }
        }
        let prefix = format!("{dir}/");
        let before = self.files.len();
        self.files
            .retain(|rel, _| !rel.starts_with(&prefix) || out.contains_key(rel));
        self.changed |= self.files.len() != before;
        Ok(out)
    }

    /// A regular file's sha256: its entry's when that holds, else read (and the entry renewed
    /// unless the file changed while it was read).
    fn regular(&mut self, rel: &str, path: &Path) -> Result<String> {
        let hashed_ns = now_ns();
        let (file, size) = crate::bounded::open_regular(path)
            .with_context(|| format!("opening {}", path.display()))?;
        let identity = Identity::of(&file.metadata()?);
        if let Some(entry) = self.files.get(rel) {
            if entry.holds_for(&identity, self.window) {
                return Ok(entry.sha256.clone());
            }
        }
        let (digest, len) = crate::bounded::hash_opened(&file, size, path)
            .with_context(|| format!("hashing {}", path.display()))?;
        self.bytes_read += len;
        let sha256 = digest.hex().to_string();
        if Identity::of(&file.metadata()?) == identity {
            let entry = Entry {
                identity,
                hashed_ns,
                sha256: sha256.clone(),
            };
            self.files.insert(rel.to_string(), entry);
            self.changed = true;
        }
        Ok(sha256)
    }

    /// Writes the cache (atomically) when an entry was added, renewed or dropped.
    pub fn save(self) -> Result<()> {
        if !self.changed {
            return Ok(());
        }
        if let Some(dir) = self.cache.parent() {
            fs_err::create_dir_all(dir)?;
        }
        let file = CacheFile {
            version: VERSION,
            files: self.files,
        };
        crate::fs::write_json(&self.cache, &file)
            .with_context(|| format!("writing the hash cache {}", self.cache.display()))
    }
}

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oci::digest::Digest;

    /// A run directory with `iso/work/agent.x86_64.iso` (3 MiB: more than one read buffer)
    /// and `iso/iso.json`, and the hash cache's path.
    fn run_with_outputs() -> (tempfile::TempDir, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let work = tmp.path().join("iso/work");
        fs_err::create_dir_all(&work).unwrap();
        let iso: Vec<u8> = (0..3 << 20).map(|i: u32| (i % 251) as u8).collect();
        fs_err::write(work.join("agent.x86_64.iso"), iso).unwrap();
        fs_err::write(tmp.path().join("iso/iso.json"), "{}").unwrap();
        let cache = tmp.path().join("cache/hashes.json");
        (tmp, cache)
    }

    /// A hasher that trusts an entry as soon as the file's times are before its hashing (the
    /// racy window is the subject of its own test).
    fn hasher(cache: &Path) -> OutputHasher {
        let mut h = OutputHasher::load(cache.to_path_buf());
        h.window = Duration::ZERO;
        h
    }

    fn hash(cache: &Path, root: &Path) -> (BTreeMap<String, String>, u64) {
        let mut h = hasher(cache);
        let out = h.hash_dir(root, "iso").unwrap();
        let read = h.bytes_read();
        h.save().unwrap();
        (out, read)
    }

    #[test]
    fn outputs_hash_to_the_sha256_of_their_bytes() {
        let (tmp, cache) = run_with_outputs();
        let (out, read) = hash(&cache, tmp.path());
        let want = |rel: &str| Digest::of(&fs_err::read(tmp.path().join(rel)).unwrap());
        let iso = "iso/work/agent.x86_64.iso";
        assert_eq!(out.keys().collect::<Vec<_>>(), ["iso/iso.json", iso]);
        assert_eq!(out[iso], want(iso).hex());
        assert_eq!(out["iso/iso.json"], want("iso/iso.json").hex());
        assert_eq!(read, (3 << 20) + 2);
        let mut h = hasher(&cache);
        assert!(h.hash_dir(tmp.path(), "absent").unwrap().is_empty());
    }

    /// The point of the cache: a second run does not read the ISO again, and says the same.
    #[test]
    fn an_unchanged_output_is_not_read_again() {
        let (tmp, cache) = run_with_outputs();
        let (first, _) = hash(&cache, tmp.path());
        let (second, read) = hash(&cache, tmp.path());
        assert_eq!(second, first);
        assert_eq!(read, 0);
    }

    /// Same size, mtime set back to the cached one: the write still moved ctime, so the file is
    /// read again and its new hash reported. So is a file renamed over the output (another
    /// inode), even with the same bytes.
    #[test]
    fn a_rewritten_output_is_read_again_even_with_its_mtime_set_back() {
        use rustix::fs::{utimensat, AtFlags, Timespec, Timestamps, CWD};
        let (tmp, cache) = run_with_outputs();
        let iso = tmp.path().join("iso/work/agent.x86_64.iso");
        let (first, _) = hash(&cache, tmp.path());
        let before = fs_err::metadata(&iso).unwrap();
        let mut bytes = fs_err::read(&iso).unwrap();
        bytes[7] ^= 0xff;
        // Past the kernel's timestamp tick (at most 10 ms), so the write gets another ctime:
        // a write within the tick is the racy window's business, not this test's.
        std::thread::sleep(Duration::from_millis(20));
        fs_err::write(&iso, &bytes).unwrap();
        let mtime = Timespec {
            tv_sec: before.mtime(),
            tv_nsec: before.mtime_nsec() as _,
        };
        let times = Timestamps {
            last_access: mtime,
            last_modification: mtime,
        };
        utimensat(CWD, &iso, &times, AtFlags::empty()).unwrap();
        let after = fs_err::metadata(&iso).unwrap();
        assert_eq!(
            (after.len(), after.modified().unwrap()),
            (before.len(), before.modified().unwrap())
        );
        let (second, read) = hash(&cache, tmp.path());
        let rel = "iso/work/agent.x86_64.iso";
        assert_eq!(read, 3 << 20);
        assert_eq!(second[rel], Digest::of(&bytes).hex());
        assert_ne!(second[rel], first[rel]);

        let aside = tmp.path().join("iso/work/new.iso");
        fs_err::write(&aside, &bytes).unwrap();
        fs_err::rename(&aside, &iso).unwrap();
        let (third, read) = hash(&cache, tmp.path());
        assert_eq!(read, 3 << 20);
        assert_eq!(third, second);
    }

    /// Racy-git: a file changed less than [`RACY_WINDOW`] before it was hashed could change
    /// again within the same timestamp tick, so its entry is not trusted yet.
    #[test]
    fn an_output_hashed_just_after_it_was_written_is_read_again() {
        let (tmp, cache) = run_with_outputs();
        for _ in 0..2 {
            let mut h = OutputHasher::load(cache.clone());
            h.hash_dir(tmp.path(), "iso").unwrap();
            assert_eq!(h.bytes_read(), (3 << 20) + 2);
            h.save().unwrap();
        }
    }

    /// A cache that is not JSON, or is another version's, is ignored: every output is read
    /// again and the cache rewritten whole. A file gone from the folder leaves the cache.
    #[test]
    fn a_corrupt_cache_is_ignored_and_rewritten() {
        let (tmp, cache) = run_with_outputs();
        let (first, _) = hash(&cache, tmp.path());
        let valid = fs_err::read_to_string(&cache).unwrap();
        for corrupt in [
            "{\"version\":1,\"files\":{\"iso/iso.json\":".to_string(),
            valid.replace("\"version\": 1", "\"version\": 0"),
        ] {
            fs_err::write(&cache, &corrupt).unwrap();
            let (again, read) = hash(&cache, tmp.path());
            assert_eq!(again, first);
            assert_eq!(read, (3 << 20) + 2, "{corrupt}");
        }
        fs_err::remove_file(tmp.path().join("iso/iso.json")).unwrap();
        hash(&cache, tmp.path());
        let kept: CacheFile = serde_json::from_slice(&fs_err::read(&cache).unwrap()).unwrap();
        assert_eq!(
            kept.files.keys().collect::<Vec<_>>(),
            ["iso/work/agent.x86_64.iso"]
        );
    }
}
