//! The site process (`bootstrap lab site-run --state DIR`, started detached by `lab up`): it
//! leaves the terminal's session, binds the rendezvous listener (`<rendezvousIP>:8090`) and the
//! cluster API listener (`<apiVIP>:6443`) inside the rendezvous host's namespace, announces
//! itself in `STATE/site-run.json`, and runs the BMC watcher, whose observations it records
//! (`STATE/observations.json`, and one log line per change) and hands over to the simulator.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use tokio::sync::mpsc;

use super::watcher::{self, Observation, Target};
use super::{bmc, SiteRecord, OBSERVATIONS_FILE, READY_FILE};
use crate::inventory;

/// The listeners the site process holds, bound in the rendezvous host's namespace; std sockets
/// already non-blocking, for `tokio::net::TcpListener::from_std`.
pub struct Listeners {
    /// `<rendezvousIP>:8090`: the agent API (assisted-service) of the rendezvous host.
    pub rendezvous: TcpListener,
    /// `<apiVIP>:6443`: the cluster's API.
    pub cluster_api: TcpListener,
}

/// `STATE/site-run.json`: the site process is up and listening.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ready {
    /// Its pid.
    pub pid: u32,
    /// The rendezvous listener's address.
    pub rendezvous: SocketAddr,
    /// The cluster API listener's address.
    pub cluster_api: SocketAddr,
}

/// Runs the site process for the lab of `state` until it is stopped (SIGTERM from lab down).
pub async fn run(state: &Path) -> Result<()> {
    // A new session: the terminal that ran lab up can close without taking the site along.
    // (Fails only for a process group leader, which lab up never makes of it.)
    if let Err(e) = rustix::process::setsid() {
        tracing::warn!("setsid: {e}; the site process stays in lab up's session");
    }
    let state = super::absolute_state(state)?;
    let record = SiteRecord::read(&state)?;
    let node = record.site.node.as_str();
    let listeners = Listeners {
        rendezvous: record.bind_in(node, record.site.rendezvous)?,
        cluster_api: record.bind_in(node, record.site.cluster_api)?,
    };
    listeners.rendezvous.set_nonblocking(true)?;
    listeners.cluster_api.set_nonblocking(true)?;
    let ready = Ready {
        pid: std::process::id(),
        rendezvous: listeners.rendezvous.local_addr()?,
        cluster_api: listeners.cluster_api.local_addr()?,
    };
    crate::fs::write_json(&state.join(READY_FILE), &ready)?;
    tracing::info!(
        "site listening in {node}'s namespace: rendezvous {}, cluster API {}",
        ready.rendezvous,
        ready.cluster_api
    );
    let targets = targets(&record)?;
    let http = bmc::client(&fs_err::read_to_string(&record.ca)?)?;
    let (seen_tx, seen_rx) = mpsc::channel(64);
    let (out_tx, out_rx) = mpsc::channel(64);
    tokio::spawn(watcher::watch(http, targets, seen_tx));
    tokio::spawn(record_observations(
        state.join(OBSERVATIONS_FILE),
        seen_rx,
        out_tx,
    ));
    let config = record.simulation.config();
    hand_over(listeners, out_rx, config, Some(record)).await
}

/// Every node's BMC with its credentials, as the watcher reads it.
fn targets(record: &SiteRecord) -> Result<Vec<Target>> {
    let inv = inventory::load(&record.inventory)?;
    let mut targets = Vec::new();
    for em in &record.emulators {
        let node = inv
            .nodes
            .nodes
            .iter()
            .find(|n| n.hostname == em.node)
            .with_context(|| format!("node {} is no longer in the inventory", em.node))?;
        targets.push(Target {
            node: em.node.clone(),
            system_url: em.system_url.clone(),
            credentials: bmc::credentials(&inv, node)?.map(|c| (c.user, c.password)),
        });
    }
    Ok(targets)
}

/// Keeps the latest observation per node in `file` and logs each change as
/// `observation {json}`; forwards every observation to `out`.
async fn record_observations(
    file: std::path::PathBuf,
    mut seen: mpsc::Receiver<Observation>,
    out: mpsc::Sender<Observation>,
) {
    let mut latest: BTreeMap<String, Observation> = BTreeMap::new();
    while let Some(obs) = seen.recv().await {
        if latest.get(&obs.node) != Some(&obs) {
            tracing::info!(
                "observation {}",
                serde_json::to_string(&obs).unwrap_or_default()
            );
            latest.insert(obs.node.clone(), obs.clone());
            if let Err(e) = crate::fs::write_json(&file, &latest) {
                tracing::warn!("recording observations: {e:#}");
            }
        }
        if out.send(obs).await.is_err() {
            return;
        }
    }
}

/// Hands the listeners and the watcher's observations to the simulator: the rendezvous and
/// cluster API stand-ins answer on the listeners, and every observation of a node (powered on,
/// the inserted ISO, the boot override) goes to it, as a real node acts on what its BMC does.
/// With the lab's `record`, each node's SSH host starts once the simulator says it finished
/// installing (or at once with `hosts_up`), and stops with the site process ([`super::hosts`]).
pub async fn hand_over(
    listeners: Listeners,
    mut observations: mpsc::Receiver<Observation>,
    config: super::simulator::SimulatorConfig,
    record: Option<SiteRecord>,
) -> Result<()> {
    let sim = std::sync::Arc::new(super::simulator::Simulator::new(config)?);
    let feed = {
        let sim = sim.clone();
        async move {
            while let Some(o) = observations.recv().await {
                let node = o.node.clone();
                let seen = super::simulator::Observation {
                    node: o.node,
                    powered_on: o.powered_on,
                    media: o.media,
                    boot_cd: o.boot_cd,
                };
                if let Err(e) = sim.observe(seen).await {
                    tracing::warn!("simulator: {node}: {e:#}");
                }
            }
        }
    };
    let hosts = {
        let sim = sim.clone();
        async move {
            match record {
                Some(record) => super::hosts::run(record, move || sim.installed()).await,
                None => std::future::pending().await,
            }
        }
    };
    tokio::select! {
        r = sim.serve(listeners.rendezvous, listeners.cluster_api) => r,
        () = feed => Ok(()),
        r = hosts => r.context("the lab's SSH hosts"),
    }
}
