//! The site process (`bootstrap-lab site-run --state DIR`, started detached by `bootstrap-lab up`): it
//! leaves the terminal's session, binds the rendezvous listener (`<rendezvousIP>:8090`) and the
//! cluster API listener (`<apiVIP>:6443`) inside the rendezvous host's namespace, announces
//! itself in `STATE/site-run.json`, and runs the BMC watcher, whose observations it records
//! (`STATE/observations.json`, and one log line per change) and hands over to the simulator.
//! Once a node has read the ISO it records the install's MachineConfigs
//! (`STATE/machineconfigs.json`, [`super::machineconfig`]).
//! It also runs the cluster's controllers (the OLM and Argo CD imitations, on the simulated
//! cluster's store) and, when the inventory's GitOps repository is on the lab gateway, the
//! lab's Git server (`STATE/git`).

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use tokio::sync::mpsc;

use super::watcher::{self, Observation, Target};
use super::{bmc, SiteRecord, OBSERVATIONS_FILE, READY_FILE};
use bootstrap::inventory;

/// The listeners the site process holds, bound in the rendezvous host's namespace; std sockets
/// already non-blocking, for `tokio::net::TcpListener::from_std`.
pub struct Listeners {
    /// `<rendezvousIP>:8090`: the agent API (assisted-service) of the rendezvous host.
    pub rendezvous: TcpListener,
    /// `<apiVIP>:6443`: the cluster's API.
    pub cluster_api: TcpListener,
}

/// The registry the lab catalog's bundle images name (the lab OLM never pulls them).
const LAB_CATALOG_REGISTRY: &str = "registry.lab.example.com:8443";

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
    // Before the site says it is ready: lab up's callers may push at once.
    let _git = match &record.git {
        Some(git) => Some(start_git(&record, git).await?),
        None => None,
    };
    // The vendor fronts answer at the BMC addresses before the site says it is ready.
    start_fronts(&record)?;
    let ready = Ready {
        pid: std::process::id(),
        rendezvous: listeners.rendezvous.local_addr()?,
        cluster_api: listeners.cluster_api.local_addr()?,
    };
    bootstrap::fs::write_json(&state.join(READY_FILE), &ready)?;
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

/// Binds and serves each vendor front ([`super::vendor`]) at its node's BMC address (TLS with
/// the emulator's certificate when the BMC speaks HTTPS), its emulator behind it.
fn start_fronts(record: &SiteRecord) -> Result<()> {
    use super::gate::{AcceptorFn, Gate, GatedListener, GatedTlsListener};
    use super::vendor::{router, Front};
    for em in &record.emulators {
        let Some(backend) = &em.backend else {
            continue;
        };
        let url = reqwest::Url::parse(&em.base_url)?;
        let host = url.host_str().context("a BMC address without a host")?;
        let ip: std::net::IpAddr = host.trim_matches(['[', ']']).parse()?;
        let port = url
            .port_or_known_default()
            .context("a BMC address without a port")?;
        let listener = std::net::TcpListener::bind(SocketAddr::new(ip, port))
            .with_context(|| format!("binding node {}'s BMC front at {}", em.node, em.base_url))?;
        let http = bmc::client(&fs_err::read_to_string(&record.ca)?)?;
        let front =
            std::sync::Arc::new(Front::new(&em.node, em.vendor, backend, &em.base_url, http));
        let app = router(front);
        let gate = Gate::default();
        gate.set(true);
        let node = em.node.clone();
        if em.tls {
            let acceptor = super::cluster_api::tls_acceptor(
                &fs_err::read_to_string(em.dir.join("tls.crt"))?,
                &fs_err::read_to_string(em.dir.join("tls.key"))?,
            )?;
            let acceptor: AcceptorFn = std::sync::Arc::new(move || Some(acceptor.clone()));
            let listener = GatedTlsListener::new(listener, gate, acceptor)?;
            tokio::spawn(async move {
                if let Err(e) = axum::serve(listener, app).await {
                    tracing::warn!("node {node}'s BMC front stopped: {e}");
                }
            });
        } else {
            let listener = GatedListener::new(listener, gate)?;
            tokio::spawn(async move {
                if let Err(e) = axum::serve(listener, app).await {
                    tracing::warn!("node {node}'s BMC front stopped: {e}");
                }
            });
        }
        tracing::info!(
            "node {}'s BMC answers as {} at {} (its emulator at {backend})",
            em.node,
            em.vendor,
            em.base_url
        );
    }
    Ok(())
}

/// Starts the lab's Git server with the site's (empty) repository; the password is the
/// inventory's `gitops.repository.password`.
async fn start_git(
    record: &SiteRecord,
    git: &super::GitSite,
) -> Result<super::git_server::GitServer> {
    let inv = crate::site::lab_inventory(&record.inventory)?;
    let repo = inv
        .site
        .gitops
        .as_ref()
        .map(|g| &g.repository)
        .context("site.yaml gitops.repository is gone since lab up")?;
    let pw_ref = repo.password.as_ref().context(
        "site.yaml gitops.repository.password is not set: the lab's Git server needs one for its user",
    )?;
    let password = inventory::secret_text(
        &inv,
        "gitops.repository.password",
        pw_ref,
        "the repository password",
    )?;
    let tls = super::git_server::GitTls {
        chain_pem: fs_err::read_to_string(&git.tls.cert)?,
        key_pem: fs_err::read_to_string(&git.tls.key)?,
        ca_pem: fs_err::read_to_string(&record.ca)?,
    };
    let server = super::git_server::GitServer::start(
        &git.root,
        git.listen,
        &git.user,
        bootstrap::secret::Secret::new(password.trim().to_string()),
        tls,
    )
    .await?;
    let url = server.create_repo(&git.repository)?;
    tracing::info!("lab Git server: {url} (user {})", git.user);
    Ok(server)
}

/// Every node's BMC with its credentials, as the watcher reads it.
fn targets(record: &SiteRecord) -> Result<Vec<Target>> {
    let inv = crate::site::lab_inventory(&record.inventory)?;
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
            system_url: em.machine_system_url(),
            credentials: bmc::credentials(&inv, node)?.map(|c| (c.user, c.password)),
            log: Some(em.log.clone()),
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
            if let Err(e) = bootstrap::fs::write_json(&file, &latest) {
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
    let state_dir = record.as_ref().map(|r| r.state_dir.clone());
    let feed = {
        let sim = sim.clone();
        async move {
            let mut recorded = false;
            while let Some(o) = observations.recv().await {
                let node = o.node.clone();
                let seen = super::simulator::Observation {
                    node: o.node,
                    powered_on: o.powered_on,
                    media: o.media,
                    boot_cd: o.boot_cd,
                    boots: o.boots,
                };
                if let Err(e) = sim.observe(seen).await {
                    tracing::warn!("simulator: {node}: {e:#}");
                }
                // What the install carries, for `bootstrap-lab repair`: once, when the first
                // node has read the ISO.
                if let (Some(dir), Some(configs), false) =
                    (&state_dir, sim.machine_configs(), recorded)
                {
                    match super::machineconfig::record(dir, &configs) {
                        Ok(()) => recorded = true,
                        Err(e) => tracing::warn!("recording the ISO's MachineConfigs: {e:#}"),
                    }
                }
            }
        }
    };
    // The cluster's controllers: OLM and the Argo CD application controller, on its store.
    if let Some(record) = &record {
        let olm = super::olm::OlmConfig::lab(LAB_CATALOG_REGISTRY)?;
        tokio::spawn(super::olm::run(sim.store(), olm));
        let argo = super::argocd::ArgoConfig {
            work_dir: record.state_dir.join("argocd"),
            kubectl: std::path::PathBuf::from("kubectl"),
            resync: std::time::Duration::from_secs(3),
        };
        let store = sim.store();
        tokio::spawn(async move {
            if let Err(e) = super::argocd::run(store, argo).await {
                tracing::error!("the Argo CD imitation stopped: {e:#}");
            }
        });
    }
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
