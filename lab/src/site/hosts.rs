//! The lab's SSH hosts: one real OpenSSH sshd ([`super::sshd`]) per lab node, in the node's
//! network namespace at its machine-network address, port 22, started by the site process when
//! the simulator says the node finished installing (or all at once with `bootstrap-lab up --hosts-up`).
//!
//! Each node has `STATE/hosts/NODE/`: `sshd/` (the daemon's config, its host key, kept while
//! the state dir lives, and its log) and `fixture/`, the files the hardware facts are read from,
//! mounted in the daemon's own mount namespace over the paths a node's commands read
//! ([`mounts`]): PCI devices of a Dell XE9680 with eight H200s (seven on node index 1), the
//! loaded modules (`irdma` on node index 2), block devices and their by-path names, stand-ins
//! for `chronyc`, `systemctl`, `modprobe` and `journalctl` ([`super::standins`]), and the node's
//! own `/etc` (a writable overlay, so a playbook's edit of `/etc/sysctl.conf` lands in the node's
//! fixture, never in this machine's file). docs/lab.md, "SSH hosts", says what is real.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use super::sshd::{Mount, Sshd, SshdSpec};
use super::SiteRecord;
use bootstrap::inventory::{model::Node, Inventory};

/// `STATE/hosts.json`: the SSH hosts running.
pub const HOSTS_FILE: &str = "hosts.json";
/// `STATE/hosts/NODE/`: each host's daemon files and fixture.
pub const HOSTS_DIR: &str = "hosts";
/// The port every lab node's sshd listens on.
pub const SSH_PORT: u16 = 22;
/// `STATE/hosts/NODE/down`: the node is down (`bootstrap-lab repair` rebooting it); its SSH
/// host does not start again until the file is gone.
pub const DOWN_MARKER: &str = "down";

/// Whether `node` is marked down ([`DOWN_MARKER`]).
pub fn is_down(state: &Path, node: &str) -> bool {
    node_dir(state, node).join(DOWN_MARKER).exists()
}

/// One running SSH host, as `STATE/hosts.json` and `bootstrap-lab status` show it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostRecord {
    /// The node.
    pub node: String,
    /// Where its sshd listens (`<machine address>:22`).
    pub address: SocketAddr,
    /// Its host key, one OpenSSH public-key line.
    pub host_key: String,
    /// The daemon's pid.
    pub pid: Option<u32>,
}

/// Reads `STATE/hosts.json` (empty when no host was started).
pub fn read(state: &Path) -> Vec<HostRecord> {
    fs_err::read_to_string(state.join(HOSTS_FILE))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

/// The nodes whose SSH host should start now: every node with `hosts_up`, else those the
/// simulator reports installed; never one already `running`.
pub fn to_start(
    nodes: &[String],
    hosts_up: bool,
    installed: &[String],
    running: &BTreeSet<String>,
) -> Vec<String> {
    nodes
        .iter()
        .filter(|n| hosts_up || installed.contains(n))
        .filter(|n| !running.contains(*n))
        .cloned()
        .collect()
}

/// Runs the lab's SSH hosts until dropped (the site process ends): every ~0.5 s starts the
/// sshd of each node [`to_start`] names from `installed()` (the simulator's view), side by
/// side, and records the running ones in `STATE/hosts.json`. A host that fails to start is logged once and not
/// tried again. A host whose sshd ended (its node went down: `bootstrap-lab repair`) starts
/// again once its node is no longer marked down ([`DOWN_MARKER`]), with the same host key.
/// Dropping the future stops every sshd and its sessions.
pub async fn run(record: SiteRecord, installed: impl Fn() -> Vec<String>) -> Result<()> {
    let inv = crate::site::lab_inventory(&record.inventory)?;
    let nodes: Vec<String> = record
        .network
        .nodes
        .iter()
        .map(|n| n.node.clone())
        .collect();
    let mut running: BTreeMap<String, Sshd> = BTreeMap::new();
    let mut given_up: BTreeSet<String> = BTreeSet::new();
    write_records(&record, &running)?;
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(500));
    loop {
        tick.tick().await;
        let ended: Vec<String> = running
            .iter_mut()
            .filter_map(|(name, sshd)| sshd.exited().then(|| name.clone()))
            .collect();
        if !ended.is_empty() {
            for name in &ended {
                tracing::info!("ssh host {name} went down; it starts again when its node is up");
                running.remove(name);
            }
            write_records(&record, &running)?;
        }
        let down = nodes
            .iter()
            .filter(|n| is_down(&record.state_dir, n))
            .cloned();
        let busy: BTreeSet<String> = running
            .keys()
            .chain(&given_up)
            .cloned()
            .chain(down)
            .collect();
        // Started side by side, as the nodes come up: one after the other, two dozen nodes
        // that finish installing together waited on each other's daemon and fixture.
        let names = to_start(&nodes, record.simulation.hosts_up, &installed(), &busy);
        let started =
            futures_util::future::join_all(names.iter().map(|name| start(&record, &inv, name)))
                .await;
        for (name, result) in names.into_iter().zip(started) {
            match result {
                Ok(sshd) => {
                    tracing::info!(
                        "ssh host {name} listening at {} (pid {:?})",
                        sshd.listen,
                        sshd.pid()
                    );
                    running.insert(name, sshd);
                    write_records(&record, &running)?;
                }
                Err(e) => {
                    tracing::warn!("ssh host {name} did not start: {e:#}");
                    given_up.insert(name);
                }
            }
        }
    }
}

/// Writes `name`'s fixture when missing and starts its sshd, off the runtime's thread (both
/// block), so that several start side by side.
async fn start(record: &SiteRecord, inv: &Inventory, name: &str) -> Result<Sshd> {
    let (record, inv, name) = (record.clone(), inv.clone(), name.to_string());
    tokio::task::spawn_blocking(move || {
        let node = inv
            .nodes
            .nodes
            .iter()
            .find(|n| n.hostname == name)
            .with_context(|| format!("node {name} is no longer in the inventory"))?;
        Sshd::start(&spec(&record, &inv, node)?)
    })
    .await?
}

fn write_records(record: &SiteRecord, running: &BTreeMap<String, Sshd>) -> Result<()> {
    let hosts: Vec<HostRecord> = running
        .iter()
        .map(|(node, sshd)| HostRecord {
            node: node.clone(),
            address: sshd.listen,
            host_key: sshd.host_key.clone(),
            pid: sshd.pid(),
        })
        .collect();
    bootstrap::fs::write_json(&record.state_dir.join(HOSTS_FILE), &hosts)
}

/// `node`'s directory under the state dir.
pub fn node_dir(state: &Path, node: &str) -> PathBuf {
    state.join(HOSTS_DIR).join(node)
}

/// What `node`'s sshd serves: its machine address, port 22, in its namespace; the inventory's
/// `references.sshPublicKey` authorized (what the installer authorizes for `core`); its fixture
/// (written now when missing, kept across site restarts) mounted over the node's paths.
pub fn spec(record: &SiteRecord, inv: &Inventory, node: &Node) -> Result<SshdSpec> {
    let index = inv
        .nodes
        .nodes
        .iter()
        .position(|n| n.hostname == node.hostname)
        .with_context(|| format!("node {} is not in the inventory", node.hostname))?;
    let net = record
        .network
        .nodes
        .iter()
        .find(|n| n.node == node.hostname)
        .with_context(|| format!("node {} has no namespace in this lab", node.hostname))?;
    let address = net
        .addresses
        .first()
        .and_then(|a| a.split('/').next())
        .with_context(|| format!("node {} has no machine-network address", node.hostname))?;
    let ip: IpAddr = address.parse()?;
    let key_file = inv.resolve(&inv.site.references.ssh_public_key.file);
    let authorized_keys = fs_err::read_to_string(&key_file).with_context(|| {
        format!(
            "site.yaml references.sshPublicKey: cannot read {}; the lab authorizes that key on every SSH host",
            key_file.display()
        )
    })?;
    let dir = node_dir(&record.state_dir, &node.hostname);
    let fixture = dir.join("fixture");
    if !fixture.exists() {
        let tmp = dir.join("fixture.new");
        if tmp.exists() {
            fs_err::remove_dir_all(&tmp)?;
        }
        super::fixture::write(&tmp, &super::fixture::NodeHardware::of(inv, index, node))?;
        fs_err::rename(&tmp, &fixture)?;
    }
    own_hosts_entry(&fixture, &node.hostname)?;
    Ok(SshdSpec {
        dir: dir.join("sshd"),
        listen: SocketAddr::new(ip, SSH_PORT),
        namespace: Some(net.namespace.clone()),
        authorized_keys,
        mounts: mounts(&fixture)?,
        hostname: Some(node.hostname.clone()),
    })
}

/// The node's `/etc/hosts` (in its own `/etc`, the overlay's upper layer): this machine's
/// entries and the node's own name, as a real node resolves its host name. Without it `sudo`
/// on a node (which has a UTS namespace and a name of its own) waits on DNS for its name.
fn own_hosts_entry(fixture: &Path, name: &str) -> Result<()> {
    let machine = fs_err::read_to_string("/etc/hosts").unwrap_or_default();
    let mut hosts = machine.trim_end().to_string();
    hosts.push_str(&format!("\n127.0.1.1 {name}\n"));
    fs_err::create_dir_all(fixture.join("etc"))?;
    bootstrap::fs::write_atomic(&fixture.join("etc/hosts"), hosts.trim_start().as_bytes())
}

/// The fixture's mounts, in order. `/proc/modules` is bound over when this kernel has one;
/// a kernel without loadable modules has none and procfs cannot be given one, so `/proc` is
/// then the fixture's `proc/` (its `modules` and a link per other entry into a real procfs,
/// the daemon in a PID namespace of its own: [`Mount::Proc`]).
/// `/dev/disk` likewise: bound over when it exists, else `fixture/dev` is laid over `/dev`.
pub fn mounts(fixture: &Path) -> Result<Vec<Mount>> {
    let f = |p: &str| fixture.join(p);
    let mut m = vec![
        Mount::Bind(f("sys/bus/pci/devices"), "/sys/bus/pci/devices".into()),
        Mount::Bind(f("sys/block"), "/sys/block".into()),
        Mount::Bind(f("usr/local/bin"), "/usr/local/bin".into()),
        Mount::Overlay {
            target: "/etc".into(),
            lower: None,
            upper: Some((f("etc"), f(".work/etc"))),
            scratch: f(".work/scratch-etc"),
        },
    ];
    if Path::new("/dev/disk").is_dir() {
        m.push(Mount::Bind(f("dev/disk"), "/dev/disk".into()));
    } else {
        m.push(Mount::Overlay {
            target: "/dev".into(),
            lower: Some(f("dev")),
            upper: None,
            scratch: f(".work/scratch-dev"),
        });
    }
    if Path::new("/proc/modules").exists() {
        m.push(Mount::Bind(f("proc/modules"), "/proc/modules".into()));
    } else {
        super::fixture::link_procfs(&f("proc"), super::fixture::PROC_PIDS)?;
        m.push(Mount::Proc {
            root: f("proc"),
            pids: super::fixture::PROC_PIDS,
        });
    }
    m.push(Mount::SysctlNetOnly);
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// Without `--hosts-up` no host starts until the simulator reports its node installed;
    /// a running one is not started twice; `--hosts-up` starts every node at once.
    #[test]
    fn hosts_start_when_installed_or_all_with_hosts_up() {
        let nodes = names(&["master-0", "master-1", "master-2"]);
        let none = BTreeSet::new();
        let sim = super::super::simulator::Simulator::new(Default::default()).unwrap();
        assert!(sim.installed().is_empty());
        assert!(to_start(&nodes, false, &sim.installed(), &none).is_empty());
        let installed = names(&["master-1"]);
        assert_eq!(
            to_start(&nodes, false, &installed, &none),
            names(&["master-1"])
        );
        let running: BTreeSet<String> = ["master-1".to_string()].into();
        assert!(to_start(&nodes, false, &installed, &running).is_empty());
        assert_eq!(
            to_start(&nodes, true, &[], &running),
            names(&["master-0", "master-2"])
        );
    }
}
