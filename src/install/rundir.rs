//! The run directory, every name in it in one place, and the two file operations the pipeline
//! needs: hashing a stage's published outputs, and publishing a staging folder whole.
//!
//! ```text
//! RUN/state.json        per stage: status, start, end, input and output hashes
//! RUN/lock              the running process (pid, host, start); absent when none runs
//! RUN/logs/STAGE.log    each stage's log, appended per attempt, secrets redacted
//! RUN/config/           render: install-config.yaml (0600), agent-config.yaml
//! RUN/tools/            tools: openshift-install, oc (pinned to the release), tools.json
//! RUN/iso/              iso: work/ (agent.x86_64.iso, rendezvousIP, auth/, the state file), iso.json
//! RUN/boot/             boot: NODE.json per node (checks, steps, BMC calls), boot.json
//! RUN/prep/             prep: facts/NODE.json, NODE.json (verdicts), prep.json, ansible-inventory.yaml
//! RUN/known_hosts       the nodes' SSH host keys learned on first contact (OpenSSH format)
//! RUN/ledger/boot/      each node's resets, written before a reset is sent; kept across attempts
//! RUN/logs/iso-access.log  every answer of the ISO server (peer, method, path, range, status)
//! RUN/cache/            the installer's cache (XDG_CACHE_HOME), kept across runs
//! RUN/.staging/STAGE/   a stage's outputs while it runs; renamed into place when it succeeds
//! ```

use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The render stage's folder.
pub const CONFIG_DIR: &str = "config";
/// The tools stage's folder: openshift-install, oc, tools.json.
pub const TOOLS_DIR: &str = "tools";
/// The iso stage's folder: work/ (the installer's directory: the ISO, rendezvousIP, auth/, the
/// state file) and iso.json.
pub const ISO_DIR: &str = "iso";
/// The prep stage's folder: facts, verdicts, the Ansible inventory.
pub const PREP_DIR: &str = "prep";
/// The boot stage's folder: NODE.json per node, boot.json (where the ISO was served).
pub const BOOT_DIR: &str = "boot";
/// What stages did to the outside world that must outlive a failed attempt (a stage's own
/// folder is replaced whole only when it succeeds): `ledger/boot/NODE.json`, the resets sent.
pub const LEDGER_DIR: &str = "ledger";
/// The installer's cache (the CoreOS ISO it downloads or extracts), kept across runs.
pub const CACHE_DIR: &str = "cache";
/// The state file.
pub const STATE_FILE: &str = "state.json";
/// The lock file.
pub const LOCK_FILE: &str = "lock";
/// The logs folder.
pub const LOGS_DIR: &str = "logs";
/// The ISO server's access log, appended across runs: the runner holds the server
/// ([`crate::install::stage::IsoServer`]) and names its log, beside the stages' own.
pub const ISO_ACCESS_LOG: &str = "logs/iso-access.log";
/// Where stages write while they run (hidden: never taken for a finished output).
pub const STAGING_DIR: &str = ".staging";

/// A run directory.
#[derive(Clone, Debug)]
pub struct RunDir {
    root: PathBuf,
}

impl RunDir {
    /// The run directory at `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        RunDir { root: root.into() }
    }

    /// Its path.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `RUN/state.json`.
    pub fn state(&self) -> PathBuf {
        self.root.join(STATE_FILE)
    }

    /// `RUN/lock`.
    pub fn lock(&self) -> PathBuf {
        self.root.join(LOCK_FILE)
    }

    /// `logs/STAGE.log`, relative to the run directory (as state.json records it).
    pub fn log_name(stage: &str) -> String {
        format!("{LOGS_DIR}/{stage}.log")
    }

    /// A path relative to the run directory, made whole.
    pub fn join(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// `RUN/.staging`.
    pub fn staging(&self) -> PathBuf {
        self.root.join(STAGING_DIR)
    }

    /// Every file under `RUN/DIR`, by its path relative to the run directory, with its sha256
    /// (empty when the folder does not exist).
    pub fn hash_outputs(&self, dir: &str) -> Result<BTreeMap<String, String>> {
        let mut out = BTreeMap::new();
        let root = self.root.join(dir);
        if !root.exists() {
            return Ok(out);
        }
        let mut pending = vec![root];
        while let Some(d) = pending.pop() {
            for entry in fs_err::read_dir(&d)? {
                let path = entry?.path();
                let meta = fs_err::symlink_metadata(&path)?;
                if meta.is_dir() {
                    pending.push(path);
                } else {
                    let bytes = fs_err::read(&path)?;
                    let rel = path
                        .strip_prefix(&self.root)
                        .unwrap_or(&path)
                        .to_string_lossy()
                        .into_owned();
                    out.insert(
                        rel,
                        crate::oci::digest::Digest::of(&bytes).hex().to_string(),
                    );
                }
            }
        }
        Ok(out)
    }

    /// Puts the folder `staged` in place of `RUN/DIR` in one step: exchanged with the old
    /// folder (`renameat2(RENAME_EXCHANGE)`), whose remains are then deleted, or renamed when
    /// there was none. A reader sees the old outputs or the new ones, never a mix.
    pub fn publish(&self, staged: &Path, dir: &str) -> Result<()> {
        use rustix::fs::{renameat_with, RenameFlags, CWD};
        let target = self.root.join(dir);
        if target.exists() {
            renameat_with(CWD, staged, CWD, &target, RenameFlags::EXCHANGE).with_context(|| {
                format!("exchanging {} with {}", staged.display(), target.display())
            })?;
            fs_err::remove_dir_all(staged)?;
        } else {
            fs_err::rename(staged, &target)?;
        }
        if let Ok(d) = fs_err::File::open(&self.root) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}
