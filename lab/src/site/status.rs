//! `bootstrap-lab status`: the site record read back with what is true now: each process
//! running or not, each node's reset count (from its emulator's log) and the watcher's latest
//! observation.

use anyhow::Result;
use serde::Serialize;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use super::dns_ntp::Daemon;
use super::hosts::HostRecord;
use super::watcher::Observation;
use super::{absolute_state, bmc, observations, process, Phase, SiteRecord};

/// `bootstrap-lab status`: the record, with each process's liveness, each node's reset count and latest
/// observation.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// The lab id.
    pub lab_id: String,
    /// The state dir.
    pub state_dir: PathBuf,
    /// `starting` or `ready`.
    pub phase: Phase,
    /// The lab CA file.
    pub ca: PathBuf,
    /// The site process.
    pub site: SiteStatus,
    /// Every node.
    pub nodes: Vec<NodeStatus>,
    /// The SSH hosts started (`STATE/hosts.json`).
    pub hosts: Vec<HostStatus>,
    /// The site's DNS server (dnsmasq), when the lab serves it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dns: Option<DaemonStatus>,
    /// The site's NTP server (chronyd), when the lab serves it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ntp: Option<DaemonStatus>,
}

/// dnsmasq or chronyd in [`Status`].
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DaemonStatus {
    /// As recorded: program, address, files, pid.
    #[serde(flatten)]
    pub daemon: Daemon,
    /// Whether it runs.
    pub running: bool,
}

fn daemon_status(d: &Option<Daemon>) -> Option<DaemonStatus> {
    d.as_ref().map(|d| DaemonStatus {
        running: d.pid.is_some_and(process::alive),
        daemon: d.clone(),
    })
}

/// One SSH host in [`Status`].
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HostStatus {
    /// As recorded: node, address, host key, pid.
    #[serde(flatten)]
    pub host: HostRecord,
    /// Whether its sshd runs.
    pub running: bool,
}

/// The site process in [`Status`].
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SiteStatus {
    /// Its pid.
    pub pid: Option<u32>,
    /// Whether it runs.
    pub running: bool,
    /// The rendezvous listener.
    pub rendezvous: SocketAddr,
    /// The cluster API listener.
    pub cluster_api: SocketAddr,
    /// Its log.
    pub log: PathBuf,
}

/// One node in [`Status`].
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatus {
    /// The node.
    pub node: String,
    /// Its namespace.
    pub namespace: String,
    /// Its addresses there.
    pub addresses: Vec<String>,
    /// Its BMC's service root.
    pub bmc: String,
    /// TLS (lab CA) and Basic auth, or plain.
    pub bmc_variant: String,
    /// The vendor the BMC behaves as.
    pub vendor: super::vendor::Vendor,
    /// The emulator's pid.
    pub pid: Option<u32>,
    /// Whether the emulator runs.
    pub running: bool,
    /// Resets that started the machine, from the emulator's log (`bmc::count_resets`).
    pub resets: u32,
    /// The watcher's latest observation.
    pub observation: Option<Observation>,
}

/// Reads the lab's status.
pub fn status(state: &Path) -> Result<Status> {
    let state = absolute_state(state)?;
    let record = SiteRecord::read(&state)?;
    let resets = bmc::reset_counts_of(&record.emulators);
    let mut seen = observations(&state);
    let nodes = record
        .emulators
        .iter()
        .zip(&record.network.nodes)
        .map(|(em, net)| NodeStatus {
            node: em.node.clone(),
            namespace: net.namespace.clone(),
            addresses: net.addresses.clone(),
            bmc: em.base_url.clone(),
            bmc_variant: match (em.tls, em.basic_auth) {
                (true, true) => "tls+basic",
                (true, false) => "tls",
                (false, true) => "basic",
                (false, false) => "plain",
            }
            .into(),
            vendor: em.vendor,
            pid: em.pid,
            running: em.pid.is_some_and(process::alive),
            resets: resets.get(&em.node).copied().unwrap_or(0),
            observation: seen.remove(&em.node),
        })
        .collect();
    Ok(Status {
        lab_id: record.lab_id.clone(),
        state_dir: record.state_dir.clone(),
        phase: record.phase,
        ca: record.ca.clone(),
        site: SiteStatus {
            pid: record.site.pid,
            running: record.site.pid.is_some_and(process::alive),
            rendezvous: record.site.rendezvous,
            cluster_api: record.site.cluster_api,
            log: record.site.log.clone(),
        },
        nodes,
        hosts: super::hosts::read(&state)
            .into_iter()
            .map(|host| HostStatus {
                running: host.pid.is_some_and(process::alive),
                host,
            })
            .collect(),
        dns: daemon_status(&record.dns),
        ntp: daemon_status(&record.ntp),
    })
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let run = |r: bool| if r { "running" } else { "STOPPED" };
        writeln!(
            f,
            "lab {} at {} ({:?}); CA {}",
            self.lab_id,
            self.state_dir.display(),
            self.phase,
            self.ca.display()
        )?;
        writeln!(
            f,
            "site process {}: rendezvous {}, cluster API {}, log {}",
            run(self.site.running),
            self.site.rendezvous,
            self.site.cluster_api,
            self.site.log.display()
        )?;
        for n in &self.nodes {
            let seen = match &n.observation {
                Some(o) => format!(
                    "power {}, boot {}, media {}",
                    if o.powered_on { "on" } else { "off" },
                    if o.boot_cd { "Cd" } else { "-" },
                    o.media.as_deref().unwrap_or("-")
                ),
                None => "not observed yet".into(),
            };
            writeln!(
                f,
                "{:<10} {} {} BMC {} ({}{}, {}), resets {}; {seen}",
                n.node,
                n.namespace,
                n.addresses.join(","),
                n.bmc,
                n.bmc_variant,
                match n.vendor {
                    super::vendor::Vendor::Generic => String::new(),
                    v => format!(" as {v}"),
                },
                run(n.running),
                n.resets
            )?;
        }
        for (what, d) in [("DNS", &self.dns), ("NTP", &self.ntp)] {
            match d {
                Some(d) => writeln!(
                    f,
                    "site {what} {} {} at {} (pid {}, log {})",
                    d.daemon.program.display(),
                    run(d.running),
                    d.daemon.listen,
                    d.daemon.pid.map_or("-".into(), |p| p.to_string()),
                    d.daemon.log.display()
                )?,
                None => writeln!(
                    f,
                    "site {what}: not served by the lab (networks names no lab gateway)"
                )?,
            }
        }
        if self.hosts.is_empty() {
            return writeln!(f, "ssh hosts: none started");
        }
        for h in &self.hosts {
            writeln!(
                f,
                "ssh host {:<10} {} ({}) pid {} {}",
                h.host.node,
                h.host.address,
                run(h.running),
                h.host.pid.map_or("-".into(), |p| p.to_string()),
                h.host.host_key
            )?;
        }
        Ok(())
    }
}
