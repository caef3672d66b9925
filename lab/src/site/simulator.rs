//! The lab's simulated install: what the nodes of a real site would do once booted from the
//! agent ISO, as a state machine the rendezvous stand-in ([`super::rendezvous`]) and the cluster
//! API stand-in ([`super::cluster_api`]) answer from.
//!
//! It learns only what a node learns: the BMC-watching loop reports each node's power, inserted
//! media and boot override ([`Simulator::observe`]); a node powered on with an ISO inserted and
//! the override on `Cd` has booted that ISO, which the simulator fetches from the media URL (as
//! the BMC does) and reads with xorriso: `agent-config.yaml` (the hosts, the rendezvous IP),
//! `install-config.yaml` (name, domain) and the stand-in installer's `lab/` files (the watcher
//! public key, the cluster API's serving certificate, the admin token's sha256), and the
//! MachineConfigs among its extra manifests (`openshift/`, [`super::machineconfig`]). Nothing
//! is shared with bootstrap behind the product's back.
//!
//! What it imitates: each booted node registers as a host (`discovering`, then `known`, or
//! `insufficient` for a few steps when a validation failure is injected for it); when every
//! host of agent-config is known the cluster goes `ready`, `preparing-for-installation`,
//! `installing`; each host walks the installer's stages one per step (node 0, the host whose
//! network config carries the rendezvous IP or else the first, stops at `Waiting for bootkube`
//! until the others are `Done`, then reboots). As on a site, node 0 runs the bootstrap control
//! plane: the cluster API answers from node 0's `Waiting for control plane` on, and
//! `kube-system/bootstrap` is complete when node 0 reports `Rebooting` (bootkube is done), one
//! step before the rendezvous API stops answering. After the reboot the ClusterOperators become
//! Available one per step and stop Progressing a step later (as a rolling-out operator reports
//! Available before it settles), and finally ClusterVersion is Available and the console Route
//! admitted. Events are recorded for registrations, status changes and failed validations.
//!
//! Injected faults, each as upstream shapes it: a node whose validation fails for its first
//! steps; a node that boots the ISO again when it reboots (assisted-service
//! internal/host/statemachine.go "Wrong boot order detection": the host registers while
//! `Rebooting` and goes `installing-pending-user-action` with transition.go
//! `PostRegisterDuringReboot`'s status_info; the cluster follows, internal/cluster/
//! statemachine.go); a ClusterOperator that stays Available=True, Progressing=True for some
//! steps after ClusterVersion says done (openshift/api config/v1 ClusterOperator conditions).
//!
//! What it does not: time anything as a real install does (a step is configurable, seconds on a
//! real site would be minutes), fail an install in other ways, or read disks or the network of
//! the nodes.

use anyhow::{bail, Context, Result};
use bootstrap::openshift::assisted::{Cluster, ClusterProgress, Event, Host, HostProgress};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::gate::Gate;

/// How the simulation runs.
#[derive(Clone, Debug)]
pub struct SimulatorConfig {
    /// One step of the install (a host's stage, a cluster status, an operator).
    pub step: Duration,
    /// A node (by name) whose `ntp-synced` validation fails for its first few steps.
    pub validation_failure: Option<String>,
    /// How many steps the injected failure lasts.
    pub failure_steps: u32,
    /// A node (by name, not the rendezvous host) that boots the ISO again when it reboots, as
    /// one whose boot order puts the virtual CD first: it goes `installing-pending-user-action`
    /// and stays there.
    pub pending_user_action: Option<String>,
    /// A ClusterOperator (one of [`OPERATORS`]) that stays Available=True, Progressing=True
    /// for `progressing_steps` steps after ClusterVersion says done.
    pub progressing_operator: Option<String>,
    /// How many steps the injected rollout lasts.
    pub progressing_steps: u32,
    /// The day-two fault switch: rogue CSRs beside a joining node's ([`super::join`]).
    pub rogue_csr: bool,
}

impl SimulatorConfig {
    /// Refuses an injected operator the lab cluster does not have.
    pub fn check(&self) -> Result<()> {
        if let Some(op) = &self.progressing_operator {
            if !OPERATORS.contains(&op.as_str()) {
                bail!(
                    "--inject-operator-progressing {op}: not a ClusterOperator of the lab cluster; name one of {}",
                    OPERATORS.join(", ")
                );
            }
        }
        Ok(())
    }
}

impl Default for SimulatorConfig {
    fn default() -> Self {
        SimulatorConfig {
            step: Duration::from_secs(3),
            validation_failure: None,
            failure_steps: 3,
            pending_user_action: None,
            progressing_operator: None,
            progressing_steps: 5,
            rogue_csr: false,
        }
    }
}

/// What the BMC-watching loop saw of one node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observation {
    /// The node's name (agent-config's `hosts[].hostname`).
    pub node: String,
    /// Powered on.
    pub powered_on: bool,
    /// The URL of the inserted virtual media, if any.
    pub media: Option<String>,
    /// The boot override is `Cd`.
    pub boot_cd: bool,
    /// How many times the machine has started, when the watcher knows (the emulator's reset
    /// lines): a node then boots only at the first observation after a start, so a machine
    /// already on that is merely given the ISO and the override does not boot it (a real one
    /// would not until reset). `None`: each observation on, with the ISO and `Cd`, boots.
    pub boots: Option<u32>,
}

/// The stages a host walks, with their percentage, as assisted-service reports them.
const STAGES: [(&str, i64); 7] = [
    ("Starting installation", 5),
    ("Installing", 10),
    ("Writing image to disk", 30),
    ("Rebooting", 60),
    ("Configuring", 75),
    ("Joined", 90),
    ("Done", 100),
];
/// Node 0's stage from which its bootstrap control plane answers.
const CONTROL_PLANE_STAGE: usize = 3;
const BOOTSTRAP_STAGES: [(&str, i64); 6] = [
    ("Starting installation", 5),
    ("Installing", 10),
    ("Writing image to disk", 30),
    ("Waiting for control plane", 40),
    ("Waiting for bootkube", 50),
    ("Rebooting", 60),
];

/// The ClusterOperators the cluster API reports, in the order they become Available.
pub const OPERATORS: [&str; 5] = [
    "etcd",
    "kube-apiserver",
    "authentication",
    "ingress",
    "console",
];

/// What the ISO told the simulated nodes.
pub(crate) struct Install {
    pub(crate) name: String,
    pub(crate) domain: String,
    pub(crate) hosts: Vec<(String, String)>,
    /// Each host's machine-network addresses (its NMState `networkConfig`'s).
    pub(crate) addresses: std::collections::BTreeMap<String, Vec<String>>,
    pub(crate) bootstrap_host: Option<String>,
    pub(crate) watcher_key: Vec<u8>,
    pub(crate) api_cert_pem: String,
    pub(crate) api_key_pem: String,
    pub(crate) admin_token_sha256: String,
    /// The ISO's MachineConfigs (its `openshift/` manifests of that kind).
    pub(crate) machine_configs: Vec<super::machineconfig::MachineConfig>,
}

struct SimHost {
    host: Host,
    stage: Option<usize>,
    failing_steps: u32,
    bootstrap: bool,
    /// Boots the ISO again when it reboots.
    boots_iso_again: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Discovering,
    Installing,
    /// Node 0 rebooted `n` steps ago.
    Rebooted(u32),
}

struct State {
    install: Option<Arc<Install>>,
    iso_url: Option<String>,
    cluster_id: String,
    infra_env_id: String,
    status: String,
    hosts: Vec<SimHost>,
    phase: Phase,
    events: Vec<Event>,
    /// Each node's start count at its last observation ([`Observation::boots`]).
    boots_seen: std::collections::HashMap<String, u32>,
}

/// The simulated site. Shared (`Arc`) between the stand-ins and the BMC-watching loop.
pub struct Simulator {
    config: SimulatorConfig,
    state: Mutex<State>,
    pub(crate) rendezvous_gate: Gate,
    pub(crate) api_gate: Gate,
    /// The cluster's objects, as its Kubernetes API serves them ([`super::cluster_api`]):
    /// the lab cluster's CRDs and OLM seed, the install's progress, and whatever clients and
    /// the lab's controllers (OLM, Argo CD) write.
    pub(crate) store: crate::site::kube::Store,
    /// The cluster API's tokens: the installer's admin token once the ISO is read.
    pub(crate) api_auth: crate::site::kube::http::Auth,
    /// The install's progress as last written into the store.
    reflected: Mutex<Option<ApiView>>,
    http: reqwest::Client,
    /// The machines joining the installed cluster (day two).
    pub(crate) joiner: super::join::Joiner,
}

impl Simulator {
    /// A site with no node booted yet; its cluster holds what a fresh lab cluster holds
    /// (fails only if the lab's own CRDs or catalog seed do not load).
    pub fn new(config: SimulatorConfig) -> Result<Self> {
        config.check()?;
        let joiner = super::join::Joiner::new(config.rogue_csr)?;
        let store = crate::site::kube::Store::lab_cluster()
            .map_err(|e| anyhow::anyhow!("the lab cluster's CRDs: {}", e.message))?;
        crate::site::olm::seed(&store)?;
        Ok(Simulator {
            config,
            state: Mutex::new(State {
                install: None,
                iso_url: None,
                cluster_id: uuid(),
                infra_env_id: uuid(),
                status: "insufficient".into(),
                hosts: Vec::new(),
                phase: Phase::Discovering,
                events: Vec::new(),
                boots_seen: Default::default(),
            }),
            rendezvous_gate: Gate::default(),
            api_gate: Gate::default(),
            store,
            api_auth: Default::default(),
            reflected: Mutex::new(None),
            http: reqwest::Client::new(),
            joiner,
        })
    }

    /// The cluster's objects (the lab's controllers run on them).
    pub fn store(&self) -> crate::site::kube::Store {
        self.store.clone()
    }

    /// Serves the rendezvous stand-in on `rendezvous` and the cluster API stand-in on
    /// `cluster_api` (both already bound), and runs the install's steps, until an error.
    pub async fn serve(
        self: Arc<Self>,
        rendezvous: std::net::TcpListener,
        cluster_api: std::net::TcpListener,
    ) -> Result<()> {
        let rest = super::rendezvous::serve(self.clone(), rendezvous);
        let api = super::cluster_api::serve(self.clone(), cluster_api);
        let steps = async {
            let mut tick = tokio::time::interval(self.config.step);
            tick.tick().await;
            loop {
                tick.tick().await;
                self.step();
            }
        };
        tokio::select! {
            r = rest => r.context("the rendezvous stand-in"),
            r = api => r.context("the cluster API stand-in"),
            () = steps => Ok(()),
        }
    }

    /// What the BMC loop saw of a node. A node powered on from an inserted ISO with the boot
    /// override on Cd boots it: the ISO is fetched (once per URL) and the node registers.
    pub async fn observe(&self, o: Observation) -> Result<()> {
        if let Some(boots) = o.boots {
            // A start is judged at the first observation that shows the machine on after it
            // (the emulator logs the reset a moment before its power state reads On).
            let mut st = self.lock();
            let last = st.boots_seen.entry(o.node.clone()).or_insert(0);
            if boots <= *last || !o.powered_on {
                return Ok(());
            }
            *last = boots;
        }
        let Some(url) = o.media.as_ref().filter(|_| o.powered_on && o.boot_cd) else {
            return Ok(());
        };
        let (known, have) = {
            let st = self.lock();
            (
                st.hosts.iter().any(|h| h.host.requested_hostname == o.node),
                st.iso_url.as_deref() == Some(url.as_str()),
            )
        };
        if known || self.joiner.booted_known(&o.node, url) {
            return Ok(());
        }
        if !have {
            let install = match super::booted_iso::read(&self.http, url)
                .await
                .with_context(|| format!("node {}: reading the ISO at {url}", o.node))?
            {
                super::booted_iso::Booted::Install(install) => *install,
                super::booted_iso::Booted::Join(iso) => {
                    self.joiner.boot(&o.node, url, iso);
                    return Ok(());
                }
            };
            let mut st = self.lock();
            if st.install.is_none() {
                st.install = Some(Arc::new(install));
                st.iso_url = Some(url.clone());
            } else if st.iso_url.as_deref() != Some(url.as_str()) {
                bail!("node {} booted {url}, another ISO than the other nodes' ({}): the lab simulates one install", o.node, st.iso_url.as_deref().unwrap_or_default());
            }
        }
        self.register(&o.node);
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn install(&self) -> Option<Arc<Install>> {
        self.lock().install.clone()
    }

    /// The MachineConfigs of the ISO the nodes booted; `None` before a node has read one.
    pub fn machine_configs(&self) -> Option<Vec<super::machineconfig::MachineConfig>> {
        self.lock()
            .install
            .as_ref()
            .map(|i| i.machine_configs.clone())
    }

    fn register(&self, node: &str) {
        let mut st = self.lock();
        let Some(install) = st.install.clone() else {
            return;
        };
        let role = install
            .hosts
            .iter()
            .find(|(n, _)| n == node)
            .map_or("auto-assign".to_string(), |(_, r)| r.clone());
        let bootstrap = install.bootstrap_host.as_deref() == Some(node);
        let failing = if self.config.validation_failure.as_deref() == Some(node) {
            self.config.failure_steps.max(1)
        } else {
            0
        };
        let host = Host {
            id: uuid(),
            infra_env_id: Some(st.infra_env_id.clone()),
            requested_hostname: node.to_string(),
            role,
            bootstrap,
            status: "discovering".into(),
            status_info: "Waiting for host to send hardware details".into(),
            progress: None,
            validations_info: Some(host_validations(failing > 0)),
        };
        if bootstrap {
            self.rendezvous_gate.set(true);
        }
        push_event(
            &mut st,
            "info",
            &format!("Host {node}: Successfully registered"),
            Some(&host.id),
        );
        if bootstrap && self.config.pending_user_action.as_deref() == Some(node) {
            tracing::warn!("simulated cluster: {node} is the rendezvous host, which the injected pending user action does not apply to");
        }
        st.hosts.push(SimHost {
            host,
            stage: None,
            failing_steps: failing,
            bootstrap,
            boots_iso_again: !bootstrap && self.config.pending_user_action.as_deref() == Some(node),
        });
    }

    /// One step of the install. The store has the step's progress before the cluster API
    /// first answers.
    pub fn step(&self) {
        let (rebooted, api_up) = {
            let mut st = self.lock();
            let rebooted = self.step_locked(&mut st);
            (rebooted, api_answers(&st))
        };
        self.reflect();
        if let Err(e) = self.joiner.step(&self.store) {
            tracing::warn!("simulated cluster: a joining node's step: {e:#}");
        }
        if rebooted {
            self.rendezvous_gate.set(false);
        }
        if api_up {
            self.api_gate.set(true);
        }
    }

    /// Writes the install's progress into the store when it changed since the last write, and
    /// lets the installer's admin token in.
    fn reflect(&self) {
        let view = self.cluster_api_view();
        let Some(install) = view.install.clone() else {
            return;
        };
        self.api_auth
            .add_token(&install.admin_token_sha256, crate::site::kube::rbac::ADMIN);
        let mut last = self.reflected.lock().unwrap_or_else(|e| e.into_inner());
        if last.as_ref() == Some(&view) {
            return;
        }
        match super::cluster_api::write_view(&self.store, &view, &install.name, &install.domain) {
            Ok(()) => *last = Some(view),
            Err(e) => tracing::warn!("simulated cluster: recording the install's progress: {e:#}"),
        }
    }

    /// Advances the state; whether node 0 rebooted into the cluster with this step.
    fn step_locked(&self, st: &mut State) -> bool {
        let before = (st.status.clone(), format!("{:?}", st.phase));
        let rebooted = advance(st);
        if before != (st.status.clone(), format!("{:?}", st.phase)) {
            tracing::info!(
                "simulated cluster: {} ({:?}), hosts {}",
                st.status,
                st.phase,
                st.hosts
                    .iter()
                    .map(|h| format!("{}={}", h.host.requested_hostname, h.host.status))
                    .collect::<Vec<_>>()
                    .join(" ")
            );
        }
        rebooted
    }
}

/// Whether the cluster API answers: node 0's bootstrap control plane is up from its
/// `Waiting for control plane` stage, and the cluster's own after its reboot.
fn api_answers(st: &State) -> bool {
    matches!(st.phase, Phase::Rebooted(_))
        || st
            .hosts
            .iter()
            .any(|h| h.bootstrap && h.stage >= Some(CONTROL_PLANE_STAGE))
}

/// Whether bootkube is done: node 0 reports `Rebooting` (its last stage), or has rebooted.
fn bootstrap_done(st: &State) -> bool {
    matches!(st.phase, Phase::Rebooted(_))
        || st
            .hosts
            .iter()
            .any(|h| h.bootstrap && h.stage == Some(BOOTSTRAP_STAGES.len() - 1))
}

/// One step of the state machine; whether node 0 rebooted into the cluster with it (the
/// rendezvous API goes away and the cluster API comes up).
fn advance(st: &mut State) -> bool {
    match st.phase {
        Phase::Discovering => discover(st),
        Phase::Installing => {
            if install_step(st) {
                st.phase = Phase::Rebooted(0);
                return true;
            }
        }
        Phase::Rebooted(n) => st.phase = Phase::Rebooted(n.saturating_add(1)),
    }
    false
}

impl Simulator {
    /// The cluster as `GET /v2/clusters/{id}` answers it.
    pub fn cluster(&self) -> Cluster {
        let st = self.lock();
        let install = st.install.clone();
        let total = cluster_percentage(&st);
        Cluster {
            id: st.cluster_id.clone(),
            name: install.as_ref().map(|i| i.name.clone()).unwrap_or_default(),
            status: st.status.clone(),
            status_info: cluster_status_info(&st.status).into(),
            progress: Some(ClusterProgress {
                total_percentage: Some(total),
                ..Default::default()
            }),
            hosts: st.hosts.iter().map(|h| h.host.clone()).collect(),
            validations_info: Some(
                json!({"network": [{"id": "api-vips-defined", "status": "success", "message": "API virtual IPs are defined."}]})
                    .to_string(),
            ),
            install_started_at: None,
            install_completed_at: None,
        }
    }

    /// The nodes that finished installing, whose SSH hosts may start: every host reported
    /// `installed`, and node 0 once it has rebooted into the cluster (the cluster API is up).
    pub fn installed(&self) -> Vec<String> {
        let st = self.lock();
        let rebooted = matches!(st.phase, Phase::Rebooted(_));
        st.hosts
            .iter()
            .filter(|h| h.host.status == "installed" || (h.bootstrap && rebooted))
            .map(|h| h.host.requested_hostname.clone())
            .chain(self.joiner.installed())
            .collect()
    }

    /// The cluster's and the infra-env's ids.
    pub fn ids(&self) -> (String, String) {
        let st = self.lock();
        (st.cluster_id.clone(), st.infra_env_id.clone())
    }

    /// Every event so far, oldest first.
    pub fn events(&self) -> Vec<Event> {
        self.lock().events.clone()
    }

    /// The cluster API's view. `n` steps after node 0's reboot, operator `i` is Available
    /// from `n >= i + 2` and stops Progressing a step later (the injected one
    /// `progressing_steps` after ClusterVersion is done, at `n >= OPERATORS.len() + 2`).
    pub(crate) fn cluster_api_view(&self) -> ApiView {
        let st = self.lock();
        let n = match st.phase {
            Phase::Rebooted(n) => n as usize,
            _ => 0,
        };
        let rebooted = matches!(st.phase, Phase::Rebooted(_));
        let done_at = OPERATORS.len() + 2;
        let operators = OPERATORS
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let settles = if self.config.progressing_operator.as_deref() == Some(*name) {
                    done_at + self.config.progressing_steps as usize
                } else {
                    i + 3
                };
                let available = rebooted && n >= i + 2;
                (available, !(rebooted && n >= settles))
            })
            .collect();
        ApiView {
            bootstrap_complete: bootstrap_done(&st),
            operators,
            installed: rebooted && n >= done_at,
            install: st.install.clone(),
        }
    }
}

/// What the cluster API stand-in answers from.
#[derive(Clone)]
pub(crate) struct ApiView {
    pub(crate) bootstrap_complete: bool,
    /// Each of [`OPERATORS`]: (Available, Progressing).
    pub(crate) operators: Vec<(bool, bool)>,
    /// ClusterVersion is done and the console Route admitted.
    pub(crate) installed: bool,
    pub(crate) install: Option<Arc<Install>>,
}

impl PartialEq for ApiView {
    fn eq(&self, other: &Self) -> bool {
        (self.bootstrap_complete, &self.operators, self.installed)
            == (other.bootstrap_complete, &other.operators, other.installed)
    }
}

fn host_validations(ntp_failing: bool) -> String {
    let ntp = if ntp_failing {
        json!({"id": "ntp-synced", "status": "failure", "message": "Host couldn't synchronize with any NTP server"})
    } else {
        json!({"id": "ntp-synced", "status": "success", "message": "Host NTP is synced"})
    };
    json!({
        "hardware": [{"id": "has-min-cpu-cores", "status": "success", "message": "Sufficient CPU cores"}],
        "network": [ntp],
    })
    .to_string()
}

fn discover(st: &mut State) {
    let mut events = Vec::new();
    for h in &mut st.hosts {
        let node = h.host.requested_hostname.clone();
        if h.failing_steps > 0 {
            if h.host.status != "insufficient" {
                h.host.status = "insufficient".into();
                h.host.status_info = "Host cannot be installed due to following failing validation(s): Host couldn't synchronize with any NTP server".into();
                events.push((
                    "warning",
                    format!("Host {node}: validation 'ntp-synced' is now failing"),
                    h.host.id.clone(),
                ));
            }
            h.failing_steps -= 1;
            if h.failing_steps == 0 {
                h.host.validations_info = Some(host_validations(false));
            }
        } else if h.host.status != "known" {
            h.host.status = "known".into();
            h.host.status_info = "Host is ready to be installed".into();
            events.push(("info", format!("Host {node}: updated status from discovering to known (Host is ready to be installed)"), h.host.id.clone()));
        }
    }
    for (sev, msg, id) in events {
        push_event(st, sev, &msg, Some(&id));
    }
    // No node has booted the ISO yet: nothing to discover, the cluster is not even defined.
    let Some(expected) = st.install.as_ref().map(|i| i.hosts.len().max(1)) else {
        return;
    };
    let all_known = st.hosts.len() >= expected && st.hosts.iter().all(|h| h.host.status == "known");
    let next = match (st.status.as_str(), all_known) {
        (_, false) => "insufficient",
        ("insufficient", true) => "ready",
        ("ready", true) => "preparing-for-installation",
        (_, true) => "installing",
    };
    if next != st.status {
        let msg = format!("Updated status of the cluster to {next}");
        st.status = next.to_string();
        push_event(st, "info", &msg, None);
    }
    if st.status == "installing" {
        st.phase = Phase::Installing;
        for h in &mut st.hosts {
            h.host.status = "installing".into();
            h.host.status_info = "Installation is in progress".into();
        }
    }
}

/// Moves each host one stage on; true when node 0, which reported `Rebooting` a step ago, has
/// now gone down.
fn install_step(st: &mut State) -> bool {
    if st
        .hosts
        .iter()
        .any(|h| h.bootstrap && h.stage == Some(BOOTSTRAP_STAGES.len() - 1))
    {
        return true;
    }
    let others_done = st
        .hosts
        .iter()
        .filter(|h| !h.bootstrap)
        .all(|h| h.stage == Some(STAGES.len() - 1));
    let mut pending = Vec::new();
    for h in &mut st.hosts {
        let stages: &[(&str, i64)] = if h.bootstrap {
            &BOOTSTRAP_STAGES
        } else {
            &STAGES
        };
        let next = h.stage.map_or(0, |s| s + 1);
        if next >= stages.len()
            || (h.bootstrap && next == stages.len() - 1 && !others_done)
            || h.host.status == PENDING_USER_ACTION
        {
            continue;
        }
        if h.boots_iso_again && h.stage.is_some_and(|s| STAGES[s].0 == "Rebooting") {
            boot_iso_again(h);
            pending.push(h.host.id.clone());
            continue;
        }
        h.stage = Some(next);
        let (stage, pct) = stages[next];
        let now = now();
        h.host.status = if next == STAGES.len() - 1 && !h.bootstrap {
            "installed"
        } else {
            "installing-in-progress"
        }
        .into();
        h.host.progress = Some(HostProgress {
            installation_percentage: Some(pct),
            current_stage: Some(stage.into()),
            progress_info: None,
            stage_started_at: Some(now.clone()),
            stage_updated_at: Some(now),
        });
    }
    for id in pending {
        let h = st.hosts.iter().find(|h| h.host.id == id).map(|h| {
            (
                h.host.requested_hostname.clone(),
                h.host.status_info.clone(),
            )
        });
        if let Some((node, info)) = h {
            let msg = format!("Host {node}: updated status from installing-in-progress to {PENDING_USER_ACTION} ({info})");
            push_event(st, "warning", &msg, Some(&id));
        }
        if st.status != PENDING_USER_ACTION {
            st.status = PENDING_USER_ACTION.into();
            push_event(
                st,
                "warning",
                "Updated status of the cluster to installing-pending-user-action",
                None,
            );
        }
    }
    if st.hosts.iter().any(|h| h.stage.is_some()) && st.status == "installing" && others_done {
        st.status = "finalizing".into();
        push_event(
            st,
            "info",
            "Updated status of the cluster to finalizing",
            None,
        );
    }
    false
}

const PENDING_USER_ACTION: &str = "installing-pending-user-action";

/// The host rebooted from its `Rebooting` stage into the discovery ISO and registered again:
/// assisted-service's "Wrong boot order detection" (internal/host/statemachine.go), with the
/// status_info transition.go `PostRegisterDuringReboot` writes (its installation disk's model,
/// serial, name and id).
fn boot_iso_again(h: &mut SimHost) {
    let node = &h.host.requested_hostname;
    h.host.status = PENDING_USER_ACTION.into();
    h.host.status_info = format!("Expected the host to boot from disk, but it booted the installation image - please reboot and fix boot order to boot from disk QEMU HARDDISK lab-{node}-disk0 (sda, /dev/disk/by-id/wwn-0x5000c500{:08x})", node.len());
}

fn cluster_percentage(st: &State) -> i64 {
    if st.hosts.is_empty() {
        return 0;
    }
    let sum: i64 = st
        .hosts
        .iter()
        .map(|h| {
            h.host
                .progress
                .as_ref()
                .and_then(|p| p.installation_percentage)
                .unwrap_or(0)
        })
        .sum();
    sum / st.hosts.len() as i64
}

fn cluster_status_info(status: &str) -> &'static str {
    match status {
        "insufficient" => "Cluster is not ready for install",
        "ready" => "Cluster ready to be installed",
        "preparing-for-installation" => "Preparing cluster for installation",
        "installing" => "Installation in progress",
        "finalizing" => "Finalizing cluster installation",
        PENDING_USER_ACTION => "Cluster has hosts pending user action",
        _ => "",
    }
}

fn push_event(st: &mut State, severity: &str, message: &str, host: Option<&str>) {
    let event = Event {
        name: None,
        cluster_id: Some(st.cluster_id.clone()),
        host_id: host.map(str::to_string),
        infra_env_id: Some(st.infra_env_id.clone()),
        severity: severity.into(),
        message: message.into(),
        event_time: now(),
    };
    st.events.push(event);
}

/// RFC 3339 with microseconds, as assisted-service writes times.
pub(crate) fn now() -> String {
    let t = time::OffsetDateTime::now_utc();
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// A random (version 4) UUID.
pub(crate) fn uuid() -> String {
    let mut b = [0u8; 16];
    let _ = aws_lc_rs::rand::fill(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node that is off, has no media, or boots from its disk (no `Cd` override) does not
    /// boot the ISO: nothing is fetched and no host registers.
    #[tokio::test]
    async fn only_a_node_booting_the_inserted_iso_registers() {
        let sim = Simulator::new(SimulatorConfig::default()).unwrap();
        let url = Some("http://127.0.0.1:1/agent.x86_64.iso".to_string());
        for (powered_on, media, boot_cd) in [
            (false, url.clone(), true),
            (true, None, true),
            (true, url.clone(), false),
        ] {
            let o = Observation {
                node: "master-0".into(),
                powered_on,
                media,
                boot_cd,
                boots: None,
            };
            sim.observe(o).await.unwrap();
        }
        assert!(sim.cluster().hosts.is_empty());
        assert!(!sim.rendezvous_gate.is_open());
        let booting = Observation {
            node: "master-0".into(),
            powered_on: true,
            media: url.clone(),
            boot_cd: true,
            boots: None,
        };
        let err = sim.observe(booting).await.unwrap_err();
        assert!(
            format!("{err:#}").contains("node master-0: reading the ISO at http://127.0.0.1:1/"),
            "{err:#}"
        );
    }

    /// With the machine's start count known, a machine already on that is merely given the ISO
    /// and the `Cd` override does not boot it (a Dell's OEM import sets the override before the
    /// reset): only the first observation after a start does, which then reads the ISO.
    #[tokio::test]
    async fn with_starts_known_only_a_start_boots_the_iso() {
        let sim = Simulator::new(SimulatorConfig::default()).unwrap();
        let seen = |boots| Observation {
            node: "master-0".into(),
            powered_on: true,
            media: Some("http://127.0.0.1:1/agent.x86_64.iso".to_string()),
            boot_cd: true,
            boots: Some(boots),
        };
        // A start seen while the machine still reads Off waits for it to read On.
        sim.observe(Observation {
            powered_on: false,
            ..seen(1)
        })
        .await
        .unwrap();
        sim.observe(seen(1)).await.unwrap_err();
        // The same start seen again, and a machine on without a new start: nothing is read.
        sim.observe(seen(1)).await.unwrap();
        sim.observe(seen(1)).await.unwrap();
        let err = sim.observe(seen(2)).await.unwrap_err();
        assert!(format!("{err:#}").contains("reading the ISO"), "{err:#}");
        assert!(sim.cluster().hosts.is_empty());
    }
}
