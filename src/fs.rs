//! One way to make a file appear whole: written beside its final name under a temp name no
//! other writer uses, synced, renamed over the final name, and the directory synced. A reader
//! sees the old file or the new one, never half of either; a crash leaves at most a hidden
//! temp file, which the next write of the same name does not trip over.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Writes `path` atomically: a temp file beside it, fsync, rename, fsync of the directory.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_with(path, bytes, None)
}

/// [`write_atomic`] with the file created with exactly `mode` (so a secret is never readable
/// by others, not even for a moment).
pub fn write_atomic_mode(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    write_atomic_with(path, bytes, Some(mode))
}

/// Writes `value` as pretty JSON with a final newline, atomically.
pub fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(value)
        .with_context(|| format!("serialising {}", path.display()))?;
    bytes.push(b'\n');
    write_atomic(path, &bytes)
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

fn write_atomic_with(path: &Path, bytes: &[u8], mode: Option<u32>) -> Result<()> {
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
        f.sync_all()
            .with_context(|| format!("syncing {}", tmp.display()))?;
        fs_err::rename(&tmp, path)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// Regression: the temp name was `.<name>.tmp.<pid>`, so two tasks of one process writing
    /// the same file at once removed each other's temp file mid-write.
    #[test]
    fn concurrent_writers_of_one_file_never_share_a_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        std::thread::scope(|s| {
            for i in 0..8u8 {
                let path = &path;
                s.spawn(move || {
                    for _ in 0..50 {
                        write_atomic(path, &[i; 4096]).unwrap();
                    }
                });
            }
        });
        let bytes = fs_err::read(&path).unwrap();
        assert_eq!(bytes.len(), 4096);
        assert!(bytes.iter().all(|b| *b == bytes[0]), "a torn file");
        let left: Vec<_> = fs_err::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "temp files left behind");
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
