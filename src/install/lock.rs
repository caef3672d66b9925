//! `RUN/lock`: one run at a time on a run directory. The lock file is created exclusively (it
//! appears whole, holding the pid, host and start of its holder, or not at all); a second run
//! is refused naming the holder. A lock whose process is gone (same host, no such pid) is stale
//! and taken over with a warning. The file is removed when the run ends.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};

/// Who holds a lock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockHolder {
    /// Its process id.
    pub pid: u32,
    /// Its host name.
    pub host: String,
    /// When it took the lock (RFC 3339).
    pub started: String,
}

impl LockHolder {
    fn me() -> Self {
        LockHolder {
            pid: std::process::id(),
            host: hostname(),
            started: super::state::now(),
        }
    }

    /// Whether the holder still runs: a process of that pid exists and is not a zombie. A
    /// holder on another host cannot be checked and counts as alive.
    pub fn alive(&self) -> bool {
        if self.host != hostname() {
            return true;
        }
        match fs_err::read_to_string(format!("/proc/{}/stat", self.pid)) {
            // The state follows the command name's closing parenthesis.
            Ok(stat) => stat
                .rsplit_once(')')
                .is_none_or(|(_, rest)| !rest.trim_start().starts_with('Z')),
            Err(_) => false,
        }
    }
}

impl fmt::Display for LockHolder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pid {} on {} since {}",
            self.pid, self.host, self.started
        )
    }
}

/// This machine's name.
pub fn hostname() -> String {
    fs_err::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".to_string())
}

/// Why the lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another run holds it.
    #[error("{} is held by {holder}: another bootstrap install is running on this run directory; wait for it to end (if that process is gone, remove {})", path.display(), path.display())]
    Held {
        /// The lock file.
        path: PathBuf,
        /// Its holder.
        holder: LockHolder,
    },
    /// The lock file is there but does not say who holds it.
    #[error("{} exists but does not name its holder; if no bootstrap install runs on this directory, remove it", path.display())]
    Unreadable {
        /// The lock file.
        path: PathBuf,
    },
    /// Creating or reading it failed.
    #[error(transparent)]
    Io(#[from] anyhow::Error),
}

/// A held lock; released (the file removed) on drop.
#[derive(Debug)]
pub struct RunLock {
    path: PathBuf,
    holder: LockHolder,
}

impl RunLock {
    /// Takes the lock at `path`. A stale lock is taken over: its former holder is returned so
    /// the caller can warn.
    pub fn acquire(path: &Path) -> Result<(RunLock, Option<LockHolder>), LockError> {
        let me = LockHolder::me();
        let bytes = crate::fs::json_bytes(path, &me)?;
        let mut stale = None;
        for _ in 0..3 {
            if crate::fs::write_new(path, &bytes)? {
                let lock = RunLock {
                    path: path.to_path_buf(),
                    holder: me,
                };
                return Ok((lock, stale));
            }
            match read_holder(path)? {
                // Gone between our try and the read: try again.
                None => continue,
                Some(Err(())) => {
                    return Err(LockError::Unreadable {
                        path: path.to_path_buf(),
                    })
                }
                Some(Ok(holder)) if holder.alive() => {
                    return Err(LockError::Held {
                        path: path.to_path_buf(),
                        holder,
                    })
                }
                Some(Ok(holder)) => {
                    if take_aside(path, &holder)? {
                        stale = Some(holder);
                    }
                }
            }
        }
        Err(LockError::Io(anyhow::anyhow!(
            "{}: could not take the lock after three tries (another run keeps taking it?)",
            path.display()
        )))
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        // Only our own lock: never one a later run took over.
        if let Ok(Some(Ok(h))) = read_holder(&self.path) {
            if h == self.holder {
                let _ = fs_err::remove_file(&self.path);
            }
        }
    }
}

/// Removes the stale lock of `holder` at `path`, and only that one: the file is first renamed
/// to a name of our own and read back, so a lock another run took over in the meantime is put
/// back rather than deleted. `false` when the lock was not (or no longer) the stale one.
fn take_aside(path: &Path, holder: &LockHolder) -> Result<bool> {
    let aside = path.with_file_name(format!(".lock.stale.{}", std::process::id()));
    match fs_err::rename(path, &aside) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e.into()),
    }
    if let Ok(Some(Ok(h))) = read_holder(&aside) {
        if &h == holder {
            fs_err::remove_file(&aside)?;
            return Ok(true);
        }
    }
    // Not the lock we judged stale: a live run's; give it back.
    fs_err::rename(&aside, path)?;
    Ok(false)
}

/// The lock's holder: `None` when there is no lock file, `Some(Err(()))` when it does not parse.
pub fn read_holder(path: &Path) -> Result<Option<Result<LockHolder, ()>>> {
    match fs_err::read_to_string(path) {
        Ok(text) => Ok(Some(serde_json::from_str(&text).map_err(|_| ()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading the lock {}", path.display())),
    }
}
