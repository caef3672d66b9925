//! One way to make a file appear whole: written beside its final name under a temp name no
//! other writer uses, synced, renamed over the final name, and the directory synced. A reader
//! sees the old file or the new one, never half of either; a crash leaves at most a hidden
//! temp file, which the next write of the same name does not trip over.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Writes `path` atomically: a temp file beside it, fsync, rename, fsync of the directory.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_with(path, bytes, None, Place::Replace)
}

/// Replaces `path` atomically but without an fsync: a temp file beside it renamed over the
/// name. A reader (this run, or the next one after a kill -9) sees the old file or the new one,
/// never half of either; after a power cut it may find the old one, or none. Only for records
/// whose loss costs work, never correctness, and which a transfer writes often: an upload's
/// journal entry or a partial blob's checkpoint (an older one, or none, means starting further
/// back). An fsync there waits for the filesystem journal's commit, which waits for the
/// write-back of every other file's dirty data (the registries' on a loopback run): that wait
/// was a slow round's stall (docs/bench.md, issue 31, point 6).
pub fn replace_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_with(path, bytes, None, Place::Unsynced)
}

/// [`write_atomic`] with the file created with exactly `mode` (so a secret is never readable
/// by others, not even for a moment).
pub fn write_atomic_mode(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    write_atomic_with(path, bytes, Some(mode), Place::Replace)
}

/// [`write_atomic`] that never replaces: the file appears whole under `path` only if no file
/// of that name exists (a rename that refuses to overwrite, or a hard link where the
/// filesystem has no such rename). `Ok(false)` when `path` already exists; nothing is written.
pub fn write_new(path: &Path, bytes: &[u8]) -> Result<bool> {
    match write_atomic_with(path, bytes, None, Place::New) {
        Ok(()) => Ok(true),
        Err(e) if already_exists(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Writes `bytes` under the first name of `name(0)`, `name(1)`, ... that no file has yet, with
/// [`write_new`]; returns that name. So no earlier file (an audit record of another run) is
/// ever replaced, however many runs pick the same name at once.
pub fn write_unique(name: impl Fn(u32) -> PathBuf, bytes: &[u8]) -> Result<PathBuf> {
    const TRIES: u32 = 1000;
    for n in 0..TRIES {
        let path = name(n);
        if write_new(&path, bytes)? {
            return Ok(path);
        }
    }
    anyhow::bail!(
        "writing {}: {TRIES} files of this name and its numbered variants exist already; move them away",
        name(0).display()
    )
}

fn already_exists(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::AlreadyExists)
    })
}

/// Gives a finished, synced temp file (written beside `path`, e.g. while streaming) its final
/// name with exactly `mode`: the mode set, renamed over `path`, the directory synced.
pub fn publish(tmp: &Path, path: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs_err::set_permissions(tmp, std::fs::Permissions::from_mode(mode))?;
    fs_err::rename(tmp, path)?;
    if let Ok(d) = fs_err::File::open(path.parent().unwrap_or(Path::new("."))) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Writes `value` as pretty JSON with a final newline, atomically.
pub fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<()> {
    write_atomic(path, &json_bytes(path, value)?)
}

/// `value` as pretty JSON with a final newline; `path` names it in the error.
pub fn json_bytes(path: &Path, value: &impl serde::Serialize) -> Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(value)
        .with_context(|| format!("serialising {}", path.display()))?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// A temp name beside `path` that no other writer in this or another process uses: the
/// process id and a per-process counter, so two tasks writing the same file at once never
/// share (or delete) each other's temp file.
fn temp_path(path: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    dir.join(format!(".{name}.tmp.{}.{n}", std::process::id()))
}

/// How the temp file takes its final name.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Over whatever file has the name.
    Replace,
    /// Over whatever file has the name, with neither the file nor the directory synced.
    Unsynced,
    /// Only if no file has the name (an `AlreadyExists` error otherwise).
    New,
}

/// Gives `tmp` the name `path` without ever replacing a file: `renameat2(RENAME_NOREPLACE)`,
/// or where the filesystem lacks it, a hard link (which fails on an existing name too) and the
/// temp name removed.
fn place_new(tmp: &Path, path: &Path) -> std::io::Result<()> {
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    use rustix::io::Errno;
    match renameat_with(CWD, tmp, CWD, path, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        Err(Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP) => {
            fs_err::hard_link(tmp, path)?;
            fs_err::remove_file(tmp)
        }
        Err(e) => Err(std::io::Error::new(
            std::io::Error::from(e).kind(),
            format!("renaming {} to {}: {e}", tmp.display(), path.display()),
        )),
    }
}

fn write_atomic_with(path: &Path, bytes: &[u8], mode: Option<u32>, place: Place) -> Result<()> {
    use fs_err::os::unix::fs::OpenOptionsExt;
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = temp_path(path);
    let result = (|| -> Result<()> {
        let mut options = fs_err::OpenOptions::new();
        options.write(true).create_new(true);
        if let Some(mode) = mode {
            options.mode(mode);
        }
        let mut f = options
            .open(&tmp)
            .with_context(|| format!("creating {}", tmp.display()))?;
        if let Some(mode) = mode {
            // The umask may have narrowed the mode; set it exactly.
            f.set_permissions(std::fs::Permissions::from_mode(mode))
                .with_context(|| format!("setting the mode of {}", tmp.display()))?;
        }
        f.write_all(bytes)
            .with_context(|| format!("writing {}", tmp.display()))?;
        if place == Place::Unsynced {
            return Ok(fs_err::rename(&tmp, path)?);
        }
        f.sync_all()
            .with_context(|| format!("syncing {}", tmp.display()))?;
        match place {
            Place::Replace | Place::Unsynced => fs_err::rename(&tmp, path)?,
            Place::New => place_new(&tmp, path)?,
        }
        if let Ok(d) = fs_err::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs_err::remove_file(&tmp);
    }
    result
}

/// Takes an exclusive `flock` on `path` (created when absent) for as long as the returned file
/// lives; `None` when another process holds it.
pub fn try_lock(path: &Path) -> Result<Option<fs_err::File>> {
    let file = fs_err::File::create(path)?;
    match file.file().try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("locking {}", path.display()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// Regression: the temp name was `.<name>.tmp.<pid>`, so two tasks of one process writing
    /// the same file at once removed each other's temp file mid-write.
    /// The same for the unsynced replacement (upload journal, checkpoints), whose readers run
    /// beside its writers: every read finds one writer's whole file.
    #[test]
    fn concurrent_writers_of_one_file_never_share_a_temp_file() {
        type Write = fn(&Path, &[u8]) -> Result<()>;
        for write in [write_atomic as Write, replace_atomic] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("state.json");
            write(&path, &[9; 4096]).unwrap();
            std::thread::scope(|s| {
                for i in 0..8u8 {
                    let path = &path;
                    s.spawn(move || {
                        for _ in 0..50 {
                            write(path, &[i; 4096]).unwrap();
                            let bytes = fs_err::read(path).unwrap();
                            assert_eq!(bytes.len(), 4096, "a torn file");
                            assert!(bytes.iter().all(|b| *b == bytes[0]), "a torn file");
                        }
                    });
                }
            });
            let bytes = fs_err::read(&path).unwrap();
            assert!(bytes[0] < 8, "the last write did not replace the first");
            let left: Vec<_> = fs_err::read_dir(dir.path()).unwrap().collect();
            assert_eq!(left.len(), 1, "temp files left behind");
        }
    }

    /// Regression: audit records were written with a rename that replaced an earlier run's
    /// record of the same name; `write_new` never replaces, and `write_unique` moves on.
    #[test]
    fn an_existing_file_is_never_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("record.json");
        assert!(write_new(&path, b"first").unwrap());
        assert!(!write_new(&path, b"second").unwrap());
        assert_eq!(fs_err::read(&path).unwrap(), b"first");
        let name = |n: u32| dir.path().join(format!("r-{n}.json"));
        let written: Vec<PathBuf> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8u8)
                .map(|i| s.spawn(move || write_unique(name, &[i]).unwrap()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let distinct: std::collections::BTreeSet<_> = written.iter().collect();
        assert_eq!(distinct.len(), 8, "two writers got one name: {written:?}");
        let left = fs_err::read_dir(dir.path()).unwrap().count();
        assert_eq!(left, 9, "temp files left behind or a file replaced");
    }

    #[test]
    fn a_mode_is_exact_whatever_the_umask() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        write_atomic_mode(&path, b"x", 0o600).unwrap();
        let mode = fs_err::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        write_json(&dir.path().join("a.json"), &serde_json::json!({"a": 1})).unwrap();
        assert_eq!(
            fs_err::read_to_string(dir.path().join("a.json")).unwrap(),
            "{\n  \"a\": 1\n}\n"
        );
    }
}
