//! The run directory, every name in it in one place, and the two file operations the pipeline
//! needs: hashing a stage's published outputs, and publishing a staging folder whole.
//!
//! ```text
//! RUN/state.json           per stage: status, start, end, input and output hashes
//! RUN/lock                 the running process (pid, host, start); absent when none runs
//! RUN/logs/STAGE.log       each stage's log, appended per attempt, secrets redacted
//! RUN/logs/iso-access.log  every answer of the ISO server (peer, method, path, range, status)
//! RUN/config/              render: install-config.yaml (0600), agent-config.yaml
//! RUN/tools/               tools: openshift-install (or openshift-baremetal-install), oc, tools.json
//! RUN/iso/                 iso: work/ (the installer's directory: agent.x86_64.iso, rendezvousIP,
//!                          auth/, its state file and whatever else it leaves there), iso.json
//! RUN/boot/                boot: NODE.json per node (checks, steps, BMC calls), boot.json
//! RUN/wait/                wait: result.json, media.json (the virtual media ejected after it)
//! RUN/prep/                prep: facts/NODE.json, NODE.json (verdicts), prep.json,
//!                          ansible-inventory.yaml, pinned_known_hosts
//! RUN/handoff/             handoff: applied.json, handoff.json
//! RUN/add-image/           day two, add-image: plan.json, nodes-config.yaml, node.x86_64.iso
//! RUN/add-boot/            day two, add-boot: NODE.json per node added, boot.json
//! RUN/add-join/            day two, add-join: join.json (CSRs approved and left, Nodes Ready)
//! RUN/add-prep/            day two, add-prep: the prep files of the nodes added, labels.json
//! RUN/ledger/boot/         each node's resets, written before a reset is sent
//! RUN/ledger/known_hosts   the nodes' SSH host keys learned on first contact (OpenSSH format)
//! RUN/ledger/add/          each node added on day two: how far it got (NODE.json), and where
//!                          the node ISO was served (iso-server.json)
//! RUN/cache/               the installer's cache (XDG_CACHE_HOME), wait.json, hashes.json
//! RUN/gather/              `bootstrap gather`: support bundles, gather-<UTC time>.tar.gz
//! RUN/.staging/DIR/        a stage's outputs while it runs; put in place of RUN/DIR when it succeeds
//! ```
//!
//! The runner writes `state.json`, `lock` and `logs/`; a stage writes only under its own folder
//! (through its staging folder), the ledger (what it did to the outside world, which must
//! outlive a failed attempt) and the cache (kept across runs). [`names`] says whether a path is
//! one of these; a test walks a finished run with it.

use crate::openshift::extract::Tool;
use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

/// The state file.
pub const STATE_FILE: &str = "state.json";
/// The lock file.
pub const LOCK_FILE: &str = "lock";
/// The logs folder: `STAGE.log` and the ISO server's access log.
pub const LOGS_DIR: &str = "logs";
/// The ISO server's access log, appended across runs: the runner holds the server
/// ([`crate::install::stage::IsoServer`]) and names its log, beside the stages' own.
pub const ISO_ACCESS_LOG: &str = "logs/iso-access.log";
/// Where stages write while they run (hidden: never taken for a finished output):
/// `.staging/DIR/` becomes `DIR/` when the stage succeeds.
pub const STAGING_DIR: &str = ".staging";

/// The render stage's folder: [`crate::render::INSTALL_CONFIG_FILE`],
/// [`crate::render::AGENT_CONFIG_FILE`].
pub const CONFIG_DIR: &str = "config";
/// The tools stage's folder: the binaries by [`Tool::name`], and [`TOOLS_FILE`].
pub const TOOLS_DIR: &str = "tools";
/// What each tool is (in the tools folder).
pub const TOOLS_FILE: &str = "tools.json";
/// The iso stage's folder: [`INSTALLER_DIR`] and [`ISO_FILE`].
pub const ISO_DIR: &str = "iso";
/// The installer's directory (in the iso folder): what `openshift-install agent create image
/// --dir` reads and leaves ([`InstallerDir`]).
pub const INSTALLER_DIR: &str = "work";
/// What the iso stage made (in the iso folder): the ISO's size and sha256, rendezvousIP, the
/// extra manifests.
pub const ISO_FILE: &str = "iso.json";
/// In the iso stage's folder: the installer's TLS roots (its `SSL_CERT_FILE`).
pub const TRUST_BUNDLE_FILE: &str = "trust-bundle.pem";
/// The boot stage's folder: `NODE.json` per node and [`BOOT_FILE`].
pub const BOOT_DIR: &str = "boot";
/// Where the BMCs fetch the ISO (in the boot folder).
pub const BOOT_FILE: &str = "boot.json";
/// The wait stage's folder: [`WAIT_FILE`], [`MEDIA_FILE`].
pub const WAIT_DIR: &str = "wait";
/// The cluster's and hosts' last status, the times, the events seen (in the wait folder).
pub const WAIT_FILE: &str = "result.json";
/// Each booted node's virtual media ejected after the install (in the wait folder).
pub const MEDIA_FILE: &str = "media.json";
/// The prep stage's folder: `NODE.json` (verdicts), [`FACTS_DIR`], [`PREP_FILE`],
/// [`ANSIBLE_INVENTORY_FILE`], [`PINNED_KNOWN_HOSTS_FILE`].
pub const PREP_DIR: &str = "prep";
/// Each node's facts, `NODE.json` (in the prep folder).
pub const FACTS_DIR: &str = "facts";
/// The whole prep report (in the prep folder).
pub const PREP_FILE: &str = "prep.json";
/// The hosts for ansible-playbook (in the prep folder).
pub const ANSIBLE_INVENTORY_FILE: &str = "ansible-inventory.yaml";
/// The host keys the inventory pins, for ansible-playbook (in the prep folder).
pub const PINNED_KNOWN_HOSTS_FILE: &str = "pinned_known_hosts";
/// The handoff stage's folder: [`APPLIED_FILE`], [`HANDOFF_FILE`].
pub const HANDOFF_DIR: &str = "handoff";
/// Every object the hand-off applied (in the handoff folder).
pub const APPLIED_FILE: &str = "applied.json";
/// The hand-off's summary (in the handoff folder).
pub const HANDOFF_FILE: &str = "handoff.json";

/// Day two's first stage's folder: [`ADD_PLAN_FILE`], the nodes-config.yaml it gave `oc adm
/// node-image create` and the node ISO it made ([`NODE_ISO_FILE`]).
pub const ADD_IMAGE_DIR: &str = "add-image";
/// Which nodes day two adds (in the add-image folder).
pub const ADD_PLAN_FILE: &str = "plan.json";
/// The node ISO (in the add-image folder): installer `agentimage.go`'s `node.%s.iso`.
pub const NODE_ISO_FILE: &str = "node.x86_64.iso";
/// The nodes-config.yaml given to `oc adm node-image create` (in the add-image folder).
pub const NODES_CONFIG_FILE: &str = "nodes-config.yaml";
/// Day two's boot stage's folder: `NODE.json` per node added and [`BOOT_FILE`].
pub const ADD_BOOT_DIR: &str = "add-boot";
/// Day two's join stage's folder: [`JOIN_FILE`].
pub const ADD_JOIN_DIR: &str = "add-join";
/// The CSRs approved and left and each node's Node (in the add-join folder).
pub const JOIN_FILE: &str = "join.json";
/// Day two's prep stage's folder: the prep files of the nodes added, [`LABELS_FILE`].
pub const ADD_PREP_DIR: &str = "add-prep";
/// The labels and taints put on each node added (in the add-prep folder).
pub const LABELS_FILE: &str = "labels.json";
/// In the ledger: each node added on day two, and where the node ISO was served.
pub const ADD_LEDGER_DIR: &str = "add";

/// What stages did to the outside world that must outlive a failed attempt (a stage's own
/// folder is replaced whole only when it succeeds): `ledger/boot/NODE.json`, the resets sent,
/// and `ledger/known_hosts`, the host keys learned.
pub const LEDGER_DIR: &str = "ledger";
/// In the ledger: where the ISO was last served ([`RunDir::iso_server_ledger`]).
pub const ISO_SERVER_FILE: &str = "iso-server.json";
/// The installer's cache (the CoreOS ISO it downloads or extracts), the wait's memory of what
/// it showed and the outputs' hashes, kept across runs.
pub const CACHE_DIR: &str = "cache";
/// The wait's memory of what it showed (in the cache).
pub const WAIT_CACHE_FILE: &str = "wait.json";
/// The outputs' sha256 by path, size, times and inode, so an unchanged ISO is not read again
/// on every run (in the cache; [`crate::install::hashes`]).
pub const HASH_CACHE_FILE: &str = "hashes.json";
/// `bootstrap gather`'s support bundles (and, hidden, the one being built): not a stage's.
pub const GATHER_DIR: &str = "gather";
/// The learned host keys' file name: `ledger/known_hosts`, and `RUN/known_hosts` in run
/// directories made before the ledger held them.
const KNOWN_HOSTS_FILE: &str = "known_hosts";

// The installer's files, as `openshift-install agent create image` leaves them.
const ISO_IMAGE: &str = "agent.x86_64.iso";
const RENDEZVOUS_IP: &str = "rendezvousIP";
const KUBECONFIG: &str = "auth/kubeconfig";
const KUBEADMIN_PASSWORD: &str = "auth/kubeadmin-password";
const INSTALLER_STATE: &str = ".openshift_install_state.json";
const EXTRA_MANIFESTS_DIR: &str = "openshift";

/// Every file a run directory may hold, relative to it: `*` stands for one name (a node's, a
/// stage's), `**` for anything below (the installer's own directory and cache).
fn file_patterns() -> Vec<String> {
    let mut stage_files = vec![
        format!("{CONFIG_DIR}/{}", crate::render::INSTALL_CONFIG_FILE),
        format!("{CONFIG_DIR}/{}", crate::render::AGENT_CONFIG_FILE),
        format!("{TOOLS_DIR}/{TOOLS_FILE}"),
        format!("{ISO_DIR}/{INSTALLER_DIR}/**"),
        format!("{ISO_DIR}/{ISO_FILE}"),
        format!("{ISO_DIR}/{TRUST_BUNDLE_FILE}"),
        format!("{BOOT_DIR}/*.json"),
        format!("{WAIT_DIR}/{WAIT_FILE}"),
        format!("{WAIT_DIR}/{MEDIA_FILE}"),
        format!("{PREP_DIR}/{FACTS_DIR}/*.json"),
        format!("{PREP_DIR}/*.json"),
        format!("{PREP_DIR}/{ANSIBLE_INVENTORY_FILE}"),
        format!("{PREP_DIR}/{PINNED_KNOWN_HOSTS_FILE}"),
        format!("{HANDOFF_DIR}/{APPLIED_FILE}"),
        format!("{HANDOFF_DIR}/{HANDOFF_FILE}"),
        format!("{ADD_IMAGE_DIR}/{ADD_PLAN_FILE}"),
        format!("{ADD_IMAGE_DIR}/{NODES_CONFIG_FILE}"),
        format!("{ADD_IMAGE_DIR}/{NODE_ISO_FILE}"),
        format!("{ADD_IMAGE_DIR}/report.json"),
        format!("{ADD_BOOT_DIR}/*.json"),
        format!("{ADD_JOIN_DIR}/{JOIN_FILE}"),
        format!("{ADD_PREP_DIR}/{FACTS_DIR}/*.json"),
        format!("{ADD_PREP_DIR}/*.json"),
        format!("{ADD_PREP_DIR}/{ANSIBLE_INVENTORY_FILE}"),
        format!("{ADD_PREP_DIR}/{PINNED_KNOWN_HOSTS_FILE}"),
    ];
    for tool in [
        Tool::OpenshiftInstall,
        Tool::OpenshiftBaremetalInstall,
        Tool::Oc,
    ] {
        stage_files.push(format!("{TOOLS_DIR}/{}", tool.name()));
    }
    let staged: Vec<String> = stage_files
        .iter()
        .map(|f| format!("{STAGING_DIR}/{f}"))
        .collect();
    let mut all = vec![
        STATE_FILE.to_string(),
        LOCK_FILE.to_string(),
        format!("{LOGS_DIR}/*.log"),
        format!("{LEDGER_DIR}/{BOOT_DIR}/*.json"),
        format!("{LEDGER_DIR}/{KNOWN_HOSTS_FILE}"),
        format!("{LEDGER_DIR}/{ISO_SERVER_FILE}"),
        format!("{LEDGER_DIR}/{ADD_LEDGER_DIR}/*.json"),
        format!("{CACHE_DIR}/**"),
        format!("{GATHER_DIR}/**"),
    ];
    all.extend(stage_files);
    all.extend(staged);
    all
}

/// Whether `rel`, the path of a file relative to a run directory, is one this module names
/// (a stage's output, staged or published, a log, the ledger, the cache, the state or the
/// lock). A file it does not name is one something wrote where nothing should.
pub fn names(rel: &Path) -> bool {
    let path = components(rel);
    file_patterns()
        .iter()
        .any(|p| matches(&p.split('/').collect::<Vec<_>>(), &path, false))
}

/// Whether `rel`, the path of a folder relative to a run directory, is one that files this
/// module names live under.
pub fn names_dir(rel: &Path) -> bool {
    let path = components(rel);
    file_patterns()
        .iter()
        .any(|p| matches(&p.split('/').collect::<Vec<_>>(), &path, true))
}

fn components(rel: &Path) -> Vec<String> {
    rel.components()
        .map(|c| match c {
            Component::Normal(n) => n.to_string_lossy().into_owned(),
            // `..`, `/`: never one of ours.
            _ => "/".to_string(),
        })
        .collect()
}

/// `path` against `pattern`, whole or (`dir`) as a folder on the way to it.
fn matches(pattern: &[&str], path: &[String], dir: bool) -> bool {
    match (pattern.split_first(), path.split_first()) {
        (Some((&"**", _)), Some(_)) => true,
        (_, None) => dir || pattern.is_empty(),
        (None, Some(_)) => false,
        (Some((p, rest)), Some((name, names))) => {
            glob(p, name) && matches(rest, names, dir) && !(dir && rest.is_empty())
        }
    }
}

/// One name against one pattern component: `*` is any name, `*.json` any name ending so.
fn glob(pattern: &str, name: &str) -> bool {
    match pattern.strip_prefix('*') {
        Some(suffix) => name.ends_with(suffix) && name.len() > suffix.len(),
        None => pattern == name,
    }
}

/// The installer's directory, `iso/work/` (or its staging twin while the iso stage runs):
/// what `openshift-install agent create image --dir` reads and leaves there.
#[derive(Clone, Debug)]
pub struct InstallerDir(PathBuf);

impl InstallerDir {
    /// The installer's directory inside the iso stage's folder `iso` (published or staging).
    pub fn in_iso(iso: &Path) -> Self {
        InstallerDir(iso.join(INSTALLER_DIR))
    }

    /// Its files' names relative to it (`rendezvousIP`, `auth/kubeconfig`, ...), for messages.
    pub fn relative() -> Self {
        InstallerDir(PathBuf::new())
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// `install-config.yaml` or `agent-config.yaml`, the files the installer consumes.
    pub fn input(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// `openshift/`: the extra manifests the installer adds to the cluster.
    pub fn extra_manifests(&self) -> PathBuf {
        self.0.join(EXTRA_MANIFESTS_DIR)
    }

    /// The agent ISO (x86_64).
    pub fn iso(&self) -> PathBuf {
        self.0.join(ISO_IMAGE)
    }

    /// `rendezvousIP`: node 0's address.
    pub fn rendezvous_ip(&self) -> PathBuf {
        self.0.join(RENDEZVOUS_IP)
    }

    /// `auth/kubeconfig`: the cluster's admin kubeconfig (a secret).
    pub fn kubeconfig(&self) -> PathBuf {
        self.0.join(KUBECONFIG)
    }

    /// `auth/kubeadmin-password` (a secret).
    pub fn kubeadmin_password(&self) -> PathBuf {
        self.0.join(KUBEADMIN_PASSWORD)
    }

    /// `.openshift_install_state.json`: the installer's state, with the watcher token (a
    /// secret).
    pub fn state(&self) -> PathBuf {
        self.0.join(INSTALLER_STATE)
    }
}

/// Where a prep run writes its files in the folder `prep` (published, staging, or
/// `bootstrap prep --run RUN`'s `RUN/prep`).
pub fn prep_files(prep: &Path) -> crate::hostprep::prep::PrepFiles {
    crate::hostprep::prep::PrepFiles {
        verdicts: prep.to_path_buf(),
        facts: prep.join(FACTS_DIR),
        report: prep.join(PREP_FILE),
        ansible_inventory: prep.join(ANSIBLE_INVENTORY_FILE),
        pinned_known_hosts: prep.join(PINNED_KNOWN_HOSTS_FILE),
    }
}

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

    /// `RUN/.staging/DIR`: where the stage whose folder is `DIR` writes while it runs.
    pub fn staging_for(&self, dir: &str) -> PathBuf {
        self.staging().join(dir)
    }

    /// `RUN/logs/iso-access.log`.
    pub fn iso_access_log(&self) -> PathBuf {
        self.root.join(ISO_ACCESS_LOG)
    }

    /// `RUN/iso/work`, the installer's directory as the iso stage published it.
    pub fn installer(&self) -> InstallerDir {
        InstallerDir::in_iso(&self.root.join(ISO_DIR))
    }

    /// `RUN/boot/boot.json`: where the boot stage served the ISO.
    pub fn boot_file(&self) -> PathBuf {
        self.root.join(BOOT_DIR).join(BOOT_FILE)
    }

    /// `RUN/ledger/iso-server.json`: where bootstrap last served the ISO to the BMCs, kept even
    /// when the boot stage failed, so that a rerun serves at the URL the BMCs were given.
    pub fn iso_server_ledger(&self) -> PathBuf {
        self.root.join(LEDGER_DIR).join(ISO_SERVER_FILE)
    }

    /// `RUN/ledger/boot/NODE.json`: the resets sent to `node`.
    pub fn boot_ledger(&self, node: &str) -> PathBuf {
        self.root
            .join(LEDGER_DIR)
            .join(BOOT_DIR)
            .join(format!("{node}.json"))
    }

    /// `RUN/ledger/add/NODE.json`: how far day two got with adding `node`, written by each
    /// day-two stage as it goes (`bootstrap install status` reads it).
    pub fn added_ledger(&self, node: &str) -> PathBuf {
        self.root
            .join(LEDGER_DIR)
            .join(ADD_LEDGER_DIR)
            .join(format!("{node}.json"))
    }

    /// `RUN/ledger/add/iso-server.json`: where bootstrap last served the node ISO.
    pub fn node_iso_server_ledger(&self) -> PathBuf {
        self.root
            .join(LEDGER_DIR)
            .join(ADD_LEDGER_DIR)
            .join(ISO_SERVER_FILE)
    }

    /// `RUN/ledger/known_hosts`: the nodes' host keys learned on first contact. A run
    /// directory made before the ledger held it kept it at `RUN/known_hosts`; it is moved here
    /// first, so no learned key is forgotten (and learned again from whoever answers).
    pub fn known_hosts(&self) -> Result<PathBuf> {
        let path = self.root.join(LEDGER_DIR).join(KNOWN_HOSTS_FILE);
        let old = self.root.join(KNOWN_HOSTS_FILE);
        if old.is_file() && !path.exists() {
            fs_err::create_dir_all(self.root.join(LEDGER_DIR))?;
            fs_err::rename(&old, &path)?;
        }
        Ok(path)
    }

    /// `RUN/cache`: the installer's `XDG_CACHE_HOME`.
    pub fn cache(&self) -> PathBuf {
        self.root.join(CACHE_DIR)
    }

    /// `RUN/gather`: where `bootstrap gather` writes its bundles unless told otherwise.
    pub fn gather_dir(&self) -> PathBuf {
        self.root.join(GATHER_DIR)
    }

    /// `RUN/cache/wait.json`: what the wait showed, so a rerun does not show it again.
    pub fn wait_cache(&self) -> PathBuf {
        self.cache().join(WAIT_CACHE_FILE)
    }

    /// `RUN/cache/hashes.json`: the outputs' hashes, kept across runs.
    pub fn hash_cache(&self) -> PathBuf {
        self.cache().join(HASH_CACHE_FILE)
    }

    /// Every file under `RUN/DIR`, by its path relative to the run directory, with its sha256
    /// (empty when the folder does not exist): streamed, and taken from [`RunDir::hash_cache`]
    /// for a file unchanged since it was hashed ([`crate::install::hashes`]).
    pub fn hash_outputs(&self, dir: &str) -> Result<BTreeMap<String, String>> {
        let mut hasher = crate::install::hashes::OutputHasher::load(self.hash_cache());
        let out = hasher.hash_dir(&self.root, dir)?;
        hasher.save()?;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file a stage, the runner or the installer writes is named, staged under its
    /// folder's name or published; anything else is not: a stray at the top or in a stage's
    /// folder, a temporary left behind, a folder where a file goes, a path leaving the run.
    #[test]
    fn names_the_run_directory_and_nothing_else() {
        for named in [
            "state.json",
            "lock",
            "logs/boot.log",
            "logs/iso-access.log",
            "config/install-config.yaml",
            ".staging/config/agent-config.yaml",
            "tools/oc",
            "tools/openshift-baremetal-install",
            "tools/tools.json",
            "iso/iso.json",
            "iso/work/agent.x86_64.iso",
            "iso/work/auth/kubeconfig",
            "iso/work/.openshift_install_state.json",
            "boot/master-0.json",
            "boot/boot.json",
            "wait/result.json",
            "prep/master-0.json",
            "prep/facts/master-0.json",
            "prep/prep.json",
            "prep/ansible-inventory.yaml",
            "prep/pinned_known_hosts",
            ".staging/prep/facts/master-1.json",
            "handoff/applied.json",
            "handoff/handoff.json",
            "ledger/boot/master-0.json",
            "ledger/known_hosts",
            "cache/wait.json",
            "cache/hashes.json",
            "cache/agent/files_cache/coreos.iso",
        ] {
            assert!(names(Path::new(named)), "{named} is not named");
        }
        for stray in [
            "known_hosts",
            "notes.txt",
            "config/extra.yaml",
            "tools/tools.json.tmp",
            "wait/other.json",
            "boot/.json",
            "logs/iso.txt",
            "ledger/known_hosts.old",
            ".staging/render/install-config.yaml",
            ".staging/validate/report.json",
            "iso/work",
            "../state.json",
            "/state.json",
        ] {
            assert!(!names(Path::new(stray)), "{stray} is named");
        }
        for dir in [
            "iso",
            "iso/work/auth",
            "prep/facts",
            ".staging",
            ".staging/prep/facts",
            "ledger",
            "ledger/boot",
            "cache/agent",
        ] {
            assert!(names_dir(Path::new(dir)), "folder {dir} is not named");
        }
        for dir in [
            "stray",
            "wait/result.json",
            "boot/sub",
            "ledger/known_hosts",
        ] {
            assert!(!names_dir(Path::new(dir)), "folder {dir} is named");
        }
    }

    /// `RUN/known_hosts` of a run directory made before the ledger held it moves into the
    /// ledger, so the keys learned then are still enforced; one already there is kept.
    #[test]
    fn learned_host_keys_move_into_the_ledger() {
        let tmp = tempfile::tempdir().unwrap();
        let run = RunDir::new(tmp.path());
        fs_err::write(tmp.path().join("known_hosts"), "old\n").unwrap();
        let path = run.known_hosts().unwrap();
        assert_eq!(path, tmp.path().join("ledger/known_hosts"));
        assert_eq!(fs_err::read_to_string(&path).unwrap(), "old\n");
        assert!(!tmp.path().join("known_hosts").exists());
        fs_err::write(tmp.path().join("known_hosts"), "stray\n").unwrap();
        run.known_hosts().unwrap();
        assert_eq!(fs_err::read_to_string(&path).unwrap(), "old\n");
    }
}
