//! `bootstrap-lab repair`: what the delivery engineer does about the hardware findings the lab
//! plants, once host prep has reported them. Each node with something to repair goes down (its
//! SSH host stops and every session on it ends), is repaired, and comes back up with the same
//! host key, as a node the engineer shuts down from its OS and powers on again at the chassis:
//! no Redfish request, so its BMC's reset count stays as the install left it.
//!
//! - A GPU missing from a slot (seven H200s on master-1) is reseated: the slot shows its GPU
//!   again ([`fixture::reseat_gpus`]).
//! - Every node rebooted boots with the kernel arguments of the MachineConfigs its pool
//!   carries in the installed cluster ([`machineconfig`]: those of the ISO the nodes booted):
//!   `module_blacklist=irdma` from the iso stage's `99-<role>-blacklist-irdma` keeps irdma from
//!   loading ([`fixture::boot`]), as the machine-config operator's reboot into the rendered
//!   config does on a real node. A node with irdma loaded whose pool has no such MachineConfig is
//!   refused before anything changes: a reboot would load it again.
//!
//! It needs a running lab whose nodes have been installed (their SSH hosts run).

use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::fmt;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::fixture::{self, NodeHardware};
use super::hosts::{self, HostRecord, DOWN_MARKER};
use super::machineconfig::{self, MachineConfig};
use super::{absolute_state, process, Phase, SiteRecord};
use bootstrap::inventory::{model::Role, Inventory};

/// How long a node has to go down, and to come back up.
const REBOOT_LIMIT: Duration = Duration::from_secs(30);

/// What `bootstrap-lab repair` did.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Repaired {
    /// The lab's state dir.
    pub state_dir: PathBuf,
    /// Every node asked about, in the lab's order.
    pub nodes: Vec<NodeRepair>,
}

/// What was done to one node.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeRepair {
    /// The node.
    pub node: String,
    /// The GPU slots reseated (PCI addresses).
    pub reseated: Vec<String>,
    /// Whether it was rebooted (down and up again; its BMC untouched).
    pub rebooted: bool,
    /// The MachineConfigs of its pool it booted with.
    pub machine_configs: Vec<String>,
    /// The kernel arguments it booted with.
    pub kernel_arguments: Vec<String>,
    /// Modules loaded before that its boot no longer loads.
    pub unloaded: Vec<String>,
    /// The GPUs it shows now.
    pub gpus: usize,
}

impl fmt::Display for Repaired {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for n in &self.nodes {
            if !n.rebooted {
                writeln!(f, "{}: nothing to repair", n.node)?;
                continue;
            }
            let mut did = Vec::new();
            for gpu in &n.reseated {
                did.push(format!("GPU {gpu} reseated ({} GPUs seen)", n.gpus));
            }
            let configs = if n.machine_configs.is_empty() {
                "no MachineConfig".to_string()
            } else {
                format!("MachineConfig {}", n.machine_configs.join(", "))
            };
            let args = if n.kernel_arguments.is_empty() {
                String::new()
            } else {
                format!(" ({})", n.kernel_arguments.join(" "))
            };
            did.push(format!("rebooted with {configs}{args} in effect"));
            for m in &n.unloaded {
                did.push(format!("{m} no longer loaded"));
            }
            writeln!(f, "{}: {}; its BMC untouched", n.node, did.join(", "))?;
        }
        Ok(())
    }
}

/// One node's plan, checked before any node is touched.
struct Plan {
    host: HostRecord,
    hw: NodeHardware,
    fixture: PathBuf,
    missing_gpus: Vec<&'static str>,
    configs: Vec<MachineConfig>,
    loaded: Vec<String>,
}

impl Plan {
    fn kernel_arguments(&self) -> Vec<String> {
        self.configs
            .iter()
            .flat_map(|c| c.kernel_arguments.clone())
            .collect()
    }

    fn to_do(&self) -> bool {
        let blacklisted = machineconfig::blacklisted_modules(&self.kernel_arguments());
        !self.missing_gpus.is_empty() || self.loaded.iter().any(|m| blacklisted.contains(m))
    }
}

/// Repairs `nodes` (when empty, every node of the inventory's nodes.yaml: not the spares) of
/// the running lab at `state`.
pub fn repair(state: &Path, nodes: &[String]) -> Result<Repaired> {
    let state = absolute_state(state)?;
    let record = SiteRecord::read(&state)?;
    running(&record)?;
    let inv = crate::site::lab_inventory(&record.inventory)?;
    let all: Vec<String> = record.emulators.iter().map(|e| e.node.clone()).collect();
    for n in nodes {
        if !all.contains(n) {
            bail!(
                "{n} is not a node of the lab at {}; its nodes are {}",
                state.display(),
                all.join(", ")
            );
        }
    }
    let configs = machineconfig::read(&state)?;
    let hosts = hosts::read(&state);
    // Every node: the product's (nodes.yaml); a spare machine nobody installed has nothing
    // to repair until day two adds it.
    let product = bootstrap::inventory::load(&record.inventory)?;
    let installable = |n: &String| product.nodes.nodes.iter().any(|p| &p.hostname == n);
    let mut plans = Vec::new();
    for name in all.iter().filter(|n| {
        if nodes.is_empty() {
            installable(n)
        } else {
            nodes.contains(n)
        }
    }) {
        plans.push(plan(&state, &inv, &hosts, configs.as_deref(), name)?);
    }
    let mut done = Vec::new();
    for p in plans {
        let mut r = NodeRepair {
            node: p.host.node.clone(),
            reseated: Vec::new(),
            rebooted: false,
            machine_configs: Vec::new(),
            kernel_arguments: Vec::new(),
            unloaded: Vec::new(),
            gpus: fixture::gpus_seen(&p.fixture),
        };
        if p.to_do() {
            reboot(&state, &p, &mut r)?;
        }
        done.push(r);
    }
    Ok(Repaired {
        state_dir: state,
        nodes: done,
    })
}

/// Refuses a lab that is not up: its record starting (a crashed lab up) or its site process
/// gone.
fn running(record: &SiteRecord) -> Result<()> {
    let alive = record.site.pid.is_some_and(process::alive);
    if record.phase != Phase::Ready || !alive {
        bail!(
            "the lab at {} is not running (site process {}): bring it up with bootstrap-lab up and install with bootstrap install first",
            record.state_dir.display(),
            record
                .site
                .pid
                .map_or("never started".to_string(), |p| format!("pid {p} gone"))
        );
    }
    Ok(())
}

/// What repairing `name` takes; refused when its SSH host is not running (not installed) or
/// when it has irdma loaded and its pool no MachineConfig keeping it out.
fn plan(
    state: &Path,
    inv: &Inventory,
    hosts: &[HostRecord],
    configs: Option<&[MachineConfig]>,
    name: &str,
) -> Result<Plan> {
    let (index, node) = inv
        .nodes
        .nodes
        .iter()
        .enumerate()
        .find(|(_, n)| n.hostname == name)
        .with_context(|| format!("node {name} is no longer in the lab's inventory"))?;
    let host = hosts
        .iter()
        .find(|h| h.node == name && h.pid.is_some_and(process::alive))
        .cloned()
        .with_context(|| {
            format!(
                "{name} is not up: its SSH host is not running (the lab starts it when the simulated install finishes the node); run bootstrap install first"
            )
        })?;
    let role = match node.role {
        Role::Master => "master",
        Role::Worker => "worker",
        Role::Arbiter => "arbiter",
    };
    let fixture = hosts::node_dir(state, name).join("fixture");
    let loaded = fixture::loaded_modules(&fixture)?;
    let seen = configs.is_some();
    let configs: Vec<MachineConfig> = configs
        .map(|c| {
            machineconfig::of_role(c, role)
                .into_iter()
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    let p = Plan {
        host,
        hw: NodeHardware::of(inv, index, node),
        missing_gpus: fixture::missing_gpus(&fixture),
        fixture,
        configs,
        loaded,
    };
    let irdma = p.loaded.iter().any(|m| m == "irdma");
    if irdma && !machineconfig::blacklisted_modules(&p.kernel_arguments()).contains(&"irdma".into())
    {
        let have: Vec<&str> = p.configs.iter().map(|c| c.name.as_str()).collect();
        let known = match (seen, have.is_empty()) {
            (false, _) => "no node of this lab has booted an ISO, so the cluster has none".into(),
            (true, true) => format!("the ISO the nodes booted had none for {role}"),
            (true, false) => format!("the pool has {}", have.join(", ")),
        };
        bail!(
            "{name}: irdma is loaded and no MachineConfig of pool {role} has kernelArguments module_blacklist=irdma ({known}; {}), so a reboot would load it again: add {role} to day1.blacklistIrdma in site.yaml and install again (the iso stage writes 99-{role}-blacklist-irdma)",
            state.join(machineconfig::FILE).display()
        );
    }
    Ok(p)
}

/// Takes the node down, repairs it, boots it with its pool's kernel arguments, and waits until
/// its SSH host answers again.
fn reboot(state: &Path, p: &Plan, r: &mut NodeRepair) -> Result<()> {
    let name = &p.host.node;
    let marker = hosts::node_dir(state, name).join(DOWN_MARKER);
    fs_err::write(&marker, "rebooting (bootstrap-lab repair)\n")?;
    let result = (|| {
        go_down(state, &p.host)?;
        r.reseated = fixture::reseat_gpus(&p.fixture)?
            .into_iter()
            .map(str::to_string)
            .collect();
        let args = p.kernel_arguments();
        fixture::boot(&p.fixture, &p.hw, &args)?;
        let now = fixture::loaded_modules(&p.fixture)?;
        r.unloaded = p
            .loaded
            .iter()
            .filter(|m| !now.contains(m))
            .cloned()
            .collect();
        r.machine_configs = p.configs.iter().map(|c| c.name.clone()).collect();
        r.kernel_arguments = args;
        r.gpus = fixture::gpus_seen(&p.fixture);
        Ok::<(), anyhow::Error>(())
    })();
    fs_err::remove_file(&marker)?;
    result?;
    come_up(state, &p.host)?;
    r.rebooted = true;
    Ok(())
}

/// Stops the node's sshd and every session on it, and waits until the site process has seen
/// it go.
fn go_down(state: &Path, host: &HostRecord) -> Result<()> {
    if let Some(pid) = host.pid {
        let namespace = fs_err::read_link(format!("/proc/{pid}/ns/mnt")).ok();
        process::stop(&[pid], Duration::from_secs(2));
        if let Some(namespace) = namespace {
            process::kill_mount_namespace(&namespace);
        }
    }
    wait(REBOOT_LIMIT, || {
        !hosts::read(state).iter().any(|h| h.node == host.node)
    })
    .with_context(|| {
        format!(
            "{} did not go down: the site process did not see its SSH host end (see {})",
            host.node,
            state.join(super::SITE_LOG).display()
        )
    })
}

/// Waits until the site process has started the node's sshd again and it accepts connections.
fn come_up(state: &Path, before: &HostRecord) -> Result<()> {
    wait(REBOOT_LIMIT, || {
        hosts::read(state).iter().any(|h| {
            h.node == before.node
                && h.pid != before.pid
                && h.pid.is_some_and(process::alive)
                && TcpStream::connect_timeout(&h.address, Duration::from_millis(300)).is_ok()
        })
    })
    .with_context(|| {
        format!(
            "{} did not come back up: its SSH host did not start again (see {})",
            before.node,
            state.join(super::SITE_LOG).display()
        )
    })
}

fn wait(limit: Duration, mut done: impl FnMut() -> bool) -> Result<()> {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > limit {
            bail!("not within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}
