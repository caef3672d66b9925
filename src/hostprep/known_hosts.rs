//! The host keys our SSH connections trust: `RUN/known_hosts`, in OpenSSH's own format, so that
//! `ssh -o UserKnownHostsFile=RUN/known_hosts` and `ssh-keygen -F HOST -f RUN/known_hosts` read
//! the same file. A key not yet known is learned on first contact (appended atomically, under a
//! lock, so many nodes may learn at once); a known host that presents another key is refused.
//!
//! Lines are `host ALG BASE64 [comment]` for port 22 and `[host]:port ALG BASE64` otherwise; a
//! host field may list several names separated by commas. Hashed names (`|1|...`), wildcard
//! patterns and `@cert-authority`/`@revoked` markers are written by other tools: such lines are
//! left as they are and never match (a host only they name is learned again, in plain text).

use russh::keys::ssh_key::{HashAlg, PublicKey};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// OpenSSH's fingerprint of `key`: `SHA256:` and the unpadded base64 of its SHA-256.
pub fn fingerprint(key: &PublicKey) -> String {
    key.fingerprint(HashAlg::Sha256).to_string()
}

/// The host field OpenSSH writes and looks up for `address` and `port`.
pub fn host_field(address: &str, port: u16) -> String {
    if port == 22 {
        address.to_string()
    } else {
        format!("[{address}]:{port}")
    }
}

/// What the file says about a presented key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The file already holds this key for the host.
    Known,
    /// The host was not in the file; its key is now (line number of the new entry).
    Learned { line: usize },
}

/// Why a presented key was refused, or the file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum KnownHostsError {
    /// The host is in the file with another key.
    #[error(
        "host key {presented} differs from the one known for {host} in {}:{line} ({known}); \
         if the node was reinstalled, remove the line with `ssh-keygen -R '{host}' -f {}`",
        file.display(),
        file.display()
    )]
    Changed {
        /// The host field (`10.0.0.1`, `[10.0.0.1]:2222`).
        host: String,
        /// The presented key's fingerprint.
        presented: String,
        /// The known key's fingerprint.
        known: String,
        /// The known_hosts file.
        file: PathBuf,
        /// The known key's line in it.
        line: usize,
    },
    /// The file could not be read (it not existing is no error: nothing is known yet).
    #[error("reading known hosts: {source}")]
    Read {
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The learned key could not be written to the file.
    #[error("writing known hosts: {source:#}")]
    Write {
        /// Why.
        #[source]
        source: anyhow::Error,
    },
    /// The presented key could not be written as an OpenSSH line (an algorithm the encoder
    /// does not know).
    #[error("host key {fingerprint} cannot be written as a known_hosts line: {source}")]
    Encode {
        /// The key's fingerprint.
        fingerprint: String,
        /// Why.
        #[source]
        source: russh::keys::ssh_key::Error,
    },
}

/// A known_hosts file shared by every connection of a run.
#[derive(Debug)]
pub struct KnownHosts {
    path: PathBuf,
    // One check-and-learn at a time: two nodes learning at once must not lose either line.
    lock: Mutex<()>,
}

impl KnownHosts {
    /// The file at `path` (created on the first key learned).
    pub fn new(path: impl Into<PathBuf>) -> KnownHosts {
        KnownHosts {
            path: path.into(),
            lock: Mutex::new(()),
        }
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Checks `key` presented by `address:port`: known, learned now, or refused as changed.
    pub fn check_or_learn(
        &self,
        address: &str,
        port: u16,
        key: &PublicKey,
    ) -> Result<Verdict, KnownHostsError> {
        let _guard = self
            .lock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let text = self.read()?;
        let host = host_field(address, port);
        let entries = entries_for(&text, &host);
        if entries.iter().any(|(_, known)| same_key(known, key)) {
            return Ok(Verdict::Known);
        }
        // Prefer naming the entry of the same algorithm: that is the one the node replaced.
        let differing = entries
            .iter()
            .find(|(_, known)| known.algorithm() == key.algorithm())
            .or(entries.first());
        if let Some((line, known)) = differing {
            return Err(KnownHostsError::Changed {
                host,
                presented: fingerprint(key),
                known: fingerprint(known),
                file: self.path.clone(),
                line: *line,
            });
        }
        let line = self.append(&text, &host, key)?;
        Ok(Verdict::Learned { line })
    }

    fn read(&self) -> Result<String, KnownHostsError> {
        match fs_err::read_to_string(&self.path) {
            Ok(text) => Ok(text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
            Err(source) => Err(KnownHostsError::Read { source }),
        }
    }

    /// Writes `text` plus the new entry with [`crate::fs::write_atomic`] (temp file, rename): a
    /// reader sees the old file or the new one, never half a line.
    fn append(&self, text: &str, host: &str, key: &PublicKey) -> Result<usize, KnownHostsError> {
        let mut new = text.to_string();
        if !new.is_empty() && !new.ends_with('\n') {
            new.push('\n');
        }
        let line = entry_line(host, key).map_err(|source| KnownHostsError::Encode {
            fingerprint: fingerprint(key),
            source,
        })?;
        new.push_str(&line);
        new.push('\n');
        let write = || -> anyhow::Result<()> {
            if let Some(dir) = self.path.parent().filter(|p| !p.as_os_str().is_empty()) {
                fs_err::create_dir_all(dir)?;
            }
            crate::fs::write_atomic(&self.path, new.as_bytes())
        };
        write().map_err(|source| KnownHostsError::Write { source })?;
        Ok(new.lines().count())
    }
}

/// `host ALG BASE64` (no comment: the node's own comment says nothing about where it was seen).
fn entry_line(host: &str, key: &PublicKey) -> russh::keys::ssh_key::Result<String> {
    let mut key = key.clone();
    key.set_comment("");
    Ok(format!("{host} {}", key.to_openssh()?.trim_end()))
}

/// The keys `text` holds for `host`, with their 1-based line numbers.
fn entries_for(text: &str, host: &str) -> Vec<(usize, PublicKey)> {
    text.lines()
        .enumerate()
        .filter_map(|(n, line)| {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with('@') {
                return None;
            }
            let (hosts, key) = line.split_once(char::is_whitespace)?;
            if !hosts.split(',').any(|h| h == host) {
                return None;
            }
            Some((n + 1, PublicKey::from_openssh(key.trim_start()).ok()?))
        })
        .collect()
}

/// Same algorithm and key data; comments do not count.
pub fn same_key(a: &PublicKey, b: &PublicKey) -> bool {
    a.key_data() == b.key_data()
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIH/+MoIdkoSEpGBf2Ugp7fXoPU1EW6vaw0qu2BawEgWk a@x";
    const B: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAINgYZ7SjOz4kOUi6l3OzJEuRvZmD/XCkso7hnBFw2oFy b@y";

    fn key(line: &str) -> PublicKey {
        PublicKey::from_openssh(line).unwrap()
    }

    #[test]
    fn learns_then_knows_then_refuses_a_change() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("known_hosts");
        let kh = KnownHosts::new(&file);
        assert_eq!(
            kh.check_or_learn("10.0.0.1", 2222, &key(A)).unwrap(),
            Verdict::Learned { line: 1 }
        );
        let text = fs_err::read_to_string(&file).unwrap();
        assert!(
            text.starts_with("[10.0.0.1]:2222 ssh-ed25519 AAAA"),
            "{text}"
        );
        assert!(!text.contains("a@x"), "comment kept: {text}");
        assert_eq!(
            kh.check_or_learn("10.0.0.1", 2222, &key(A)).unwrap(),
            Verdict::Known
        );
        assert_eq!(
            kh.check_or_learn("10.0.0.1", 22, &key(B)).unwrap(),
            Verdict::Learned { line: 2 }
        );
        assert!(fs_err::read_to_string(&file)
            .unwrap()
            .contains("\n10.0.0.1 ssh-ed25519 "));
        let err = kh
            .check_or_learn("10.0.0.1", 2222, &key(B))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&fingerprint(&key(A))) && err.contains(&fingerprint(&key(B))),
            "{err}"
        );
        assert!(err.contains(&format!("{}:1", file.display())), "{err}");
        assert!(err.contains("ssh-keygen -R '[10.0.0.1]:2222' -f"), "{err}");
    }

    #[test]
    fn comments_and_foreign_lines_are_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("known_hosts");
        let a = key(A);
        let b64 = A.split_whitespace().nth(1).unwrap();
        let text = format!(
            "# note\n@cert-authority * ssh-ed25519 {b64}\nother,h1 ssh-ed25519 {b64} old\n"
        );
        fs_err::write(&file, text).unwrap();
        let kh = KnownHosts::new(&file);
        assert_eq!(kh.check_or_learn("h1", 22, &a).unwrap(), Verdict::Known);
        assert_eq!(
            kh.check_or_learn("h2", 22, &a).unwrap(),
            Verdict::Learned { line: 4 }
        );
    }

    #[test]
    fn many_nodes_learning_at_once_lose_no_line() {
        let dir = tempfile::tempdir().unwrap();
        let kh = std::sync::Arc::new(KnownHosts::new(dir.path().join("known_hosts")));
        let a = key(A);
        std::thread::scope(|s| {
            for i in 0..16 {
                let (kh, a) = (kh.clone(), a.clone());
                s.spawn(move || kh.check_or_learn(&format!("node-{i}"), 22, &a).unwrap());
            }
        });
        let text = fs_err::read_to_string(kh.path()).unwrap();
        assert_eq!(text.lines().count(), 16, "{text}");
    }
}
