//! Waiting for an agent-based install as `openshift-install agent wait-for install-complete`
//! does (REFERENCE section 7), from the rendezvous host's address, the installer's watcher
//! token and its admin kubeconfig.
//!
//! Until bootstrap completes, each poll is the installer's `IsBootstrapComplete`
//! (openshift/installer pkg/agent/cluster.go), in its order: first the cluster's API with the
//! kubeconfig ([`super::readiness`]): bootstrap is complete when ConfigMap
//! `kube-system/bootstrap` says so, which bootkube writes on node 0 before node 0 reboots, so
//! while the rendezvous host still answers; then the rendezvous host's assisted-service
//! ([`super::assisted`], the four watcher endpoints only), while it answers: the cluster's
//! status and progress, one line per host (status, stage, percentage), each failed validation
//! and each new warning or error event told once to a [`WaitView`] (remembered in a file the
//! caller names, so a rerun does not tell them again). A host in
//! `installing-pending-user-action` (assisted-service internal/host/statemachine.go: it booted
//! the discovery ISO again after writing its disk, or never came up from that disk) ends the
//! wait at once with its fix: the installer counts it as errored (`HasErrored`), and nothing
//! but the user moves it on. Then the install is complete when ClusterVersion is Available (not
//! Progressing, not Failing), the console Route is admitted and every ClusterOperator is
//! stable; the ClusterOperators not yet stable are told while it waits. The limits are the
//! installer's (`--bootstrap-timeout`, `--install-timeout`), and a timeout is a
//! [`WaitFailure`] in the installer's words.

use super::assisted::{self, ApiError, Cluster, EventQuery};
use super::readiness::{ClusterApi, InstallStatus};
use super::record::now_rfc3339 as now;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often the installer polls.
pub const POLL: Duration = Duration::from_secs(2);
/// How long the cluster may stay `ready` before the installer gives up.
const READY_LIMIT: Duration = Duration::from_secs(60);

/// How long the wait waits, as `openshift-install agent wait-for` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitLimits {
    /// For bootstrap to complete (default 60 minutes).
    pub bootstrap: Duration,
    /// Then for the install to complete (default 90 minutes).
    pub install: Duration,
    /// For each node, after its reset, to show it booted the ISO (its agent at the rendezvous
    /// host, or its BMC reading the ISO): the boot stage's bound (default 30 minutes: a GPU
    /// server's POST alone can take ten).
    pub boot: Duration,
}

impl Default for WaitLimits {
    fn default() -> Self {
        WaitLimits {
            bootstrap: Duration::from_secs(60 * 60),
            install: Duration::from_secs(90 * 60),
            boot: Duration::from_secs(30 * 60),
        }
    }
}

/// The watcher token of the installer state file `state`
/// (`"*gencrypto.AuthConfig".WatcherAuthToken`).
pub fn watcher_token(state: &Path) -> Result<String> {
    watcher_token_in(&fs_err::read_to_string(state)?, state)
}

/// The watcher token in `text`, the contents of the installer state file `state`.
pub fn watcher_token_in(text: &str, state: &Path) -> Result<String> {
    let v: serde_json::Value =
        serde_json::from_str(text).with_context(|| format!("{} is not JSON", state.display()))?;
    v["*gencrypto.AuthConfig"]["WatcherAuthToken"]
        .as_str()
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .with_context(|| {
            format!(
                "{} has no \"*gencrypto.AuthConfig\".WatcherAuthToken (an installer older than 4.18?)",
                state.display()
            )
        })
}

/// What the watcher watches, and how.
pub struct Watch {
    /// The rendezvous host's API, `HOST:PORT` (`<rendezvousIP>:8090`).
    pub rendezvous: String,
    /// The watcher token (a secret).
    pub token: String,
    /// The installer's admin kubeconfig.
    pub kubeconfig: PathBuf,
    /// Dialled instead of the kubeconfig's server, when given (the lab's tests).
    pub api_address: Option<SocketAddr>,
    /// The API hosts the operator named with `--insecure-api` (plain HTTP or unverified TLS
    /// allowed for them).
    pub insecure_api: Vec<String>,
    /// The limits.
    pub limits: WaitLimits,
    /// How often to poll.
    pub poll: Duration,
    /// Where what was printed is remembered across runs.
    pub seen_file: Option<PathBuf>,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch")
            .field("rendezvous", &self.rendezvous)
            .field("kubeconfig", &self.kubeconfig)
            .finish_non_exhaustive()
    }
}

/// How a wait ended badly, in the installer's words.
#[derive(Debug, thiserror::Error)]
pub enum WaitFailure {
    /// The bootstrap limit passed (the installer exits 5).
    #[error("bootstrap process timed out: context deadline exceeded (waited {0:?}; --bootstrap-timeout waits longer)")]
    BootstrapTimedOut(Duration),
    /// The install limit passed (the installer exits 6).
    #[error("Cluster installation timed out: context deadline exceeded (waited {0:?} after bootstrap; --install-timeout waits longer)")]
    InstallTimedOut(Duration),
    /// The cluster was cancelled on the rendezvous host.
    #[error("bootstrap process returned error: cluster installation was cancelled")]
    Cancelled,
    /// The cluster stayed `ready` and never started installing.
    #[error("bootstrap process returned error: failed to progress after all hosts available")]
    StuckReady,
    /// Hosts wait for the user (`installing-pending-user-action`): each host's name with its
    /// `status_info` (an empty name: the cluster is in that status and no host says which).
    #[error("bootstrap process returned error: {}", pending_user_action(.0))]
    PendingUserAction(Vec<(String, String)>),
    /// The run was interrupted.
    #[error("interrupted while waiting; run again to resume waiting")]
    Interrupted,
}

/// What is wrong with each host waiting for the user, and the fix. assisted-service puts a host
/// there when it registers from the discovery ISO again while `Rebooting` ("Wrong boot order
/// detection") or does not come back from its reboot in time (its `statusRebootTimeout`); it
/// stays there until the host boots its installation disk (internal/host/statemachine.go).
fn pending_user_action(hosts: &[(String, String)]) -> String {
    let each: Vec<String> = hosts
        .iter()
        .map(|(name, info)| {
            let info = if info.is_empty() {
                "no status_info"
            } else {
                info.trim_end_matches('.')
            };
            // A cluster in that status whose hosts do not say which: the name is empty.
            let (who, host) = if name.is_empty() {
                ("the cluster".to_string(), "the host")
            } else {
                (format!("host {name}"), name.as_str())
            };
            format!(
                "{who} is installing-pending-user-action: {info}. A host booted the agent ISO again instead of the disk it was installed to, or never came up from that disk. Fix: in {host}'s BMC make the installation disk boot first (or eject the virtual media), then reboot {host}; if the image went to a disk its firmware does not boot, correct {host}'s rootDevice in nodes.yaml (bootstrap install then makes a new ISO and boots again)"
            )
        })
        .collect();
    format!(
        "{}; then run bootstrap install again to resume waiting",
        each.join("; ")
    )
}

impl WaitFailure {
    /// The installer's exit code for it (5 bootstrap, 6 install).
    pub fn exit_code(&self) -> i32 {
        match self {
            WaitFailure::InstallTimedOut(_) => 6,
            _ => 5,
        }
    }
}

/// Where the wait's lines go: one live line per host, and messages.
pub trait WaitView {
    /// The current line of host `name` (replaces its previous one).
    fn host(&mut self, name: &str, line: &str);
    /// A message, printed once.
    fn say(&mut self, line: &str);
    /// A detail worth keeping in a log but not showing.
    fn trace(&mut self, _line: &str) {}
}

/// What `wait/result.json` holds.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitResult {
    /// The cluster as last seen on the rendezvous host.
    pub cluster: Option<ClusterSummary>,
    /// Each host as last seen, by name.
    pub hosts: BTreeMap<String, HostSummary>,
    /// When this wait started.
    pub started: String,
    /// When the rendezvous API was seen going away.
    pub rest_api_gone: Option<String>,
    /// When bootstrap was seen complete.
    pub bootstrap_complete: Option<String>,
    /// When the install was seen complete.
    pub install_complete: Option<String>,
    /// The cluster's version.
    pub version: Option<String>,
    /// The console's host.
    pub console: Option<String>,
    /// The warning and error events seen, and the failed validations, as printed.
    pub events: Vec<String>,
    /// How the cluster's API was trusted, when not verified ([`super::api::ApiTrust::label`]:
    /// the operator allowed it with `--insecure-api`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_trust: Option<String>,
}

/// A cluster's last status.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSummary {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its status.
    pub status: String,
    /// Why.
    pub status_info: String,
    /// Its total percentage.
    pub percentage: Option<i64>,
}

/// A host's last status.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HostSummary {
    /// Its role.
    pub role: String,
    /// Its status.
    pub status: String,
    /// Its stage.
    pub stage: Option<String>,
    /// Its percentage.
    pub percentage: Option<i64>,
}

/// What a rerun remembers (in [`Watch::seen_file`]).
#[derive(Default, Serialize, Deserialize)]
struct Remembered {
    printed: BTreeSet<String>,
    result: Option<WaitResult>,
}

impl Watch {
    /// The watch of an install whose rendezvous host is `rendezvous_ip` (assisted-service on
    /// its port 8090), with the installer's watcher token and admin kubeconfig; polling every
    /// 2 s, remembering nothing across runs.
    pub fn new(
        rendezvous_ip: IpAddr,
        token: String,
        kubeconfig: PathBuf,
        limits: WaitLimits,
    ) -> Watch {
        Watch {
            rendezvous: SocketAddr::new(rendezvous_ip, assisted::PORT).to_string(),
            token,
            kubeconfig,
            api_address: None,
            insecure_api: Vec::new(),
            limits,
            poll: POLL,
            seen_file: None,
        }
    }

    /// Waits for bootstrap, then for the install, until done, a limit, or `cancel`. A token the
    /// rendezvous host refuses ends it at once with [`ApiError::Refused`].
    pub async fn run(&self, cancel: &AtomicBool, view: &mut dyn WaitView) -> Result<WaitResult> {
        let mut w = Watcher::new(self, view)?;
        let api =
            ClusterApi::from_kubeconfig(&self.kubeconfig, self.api_address, &self.insecure_api)
                .await?;
        if !api.trust.verified() {
            let label = api.trust.label();
            w.view.say(&format!("the cluster API's TLS: {label}"));
            w.result.api_trust = Some(label);
        }
        self.until_bootstrap(&mut w, &api, cancel).await?;
        w.result.bootstrap_complete = Some(now());
        w.view.say("cluster bootstrap is complete");
        w.save();
        self.until_installed(&mut w, &api, cancel).await?;
        w.result.install_complete = Some(now());
        w.view.say(&format!(
            "Cluster is installed{}",
            w.result
                .version
                .as_ref()
                .map(|v| format!(": version {v}"))
                .unwrap_or_default()
        ));
        w.save();
        Ok(w.result)
    }

    /// Polls until bootstrap is complete, as the installer's `IsBootstrapComplete` does: the
    /// cluster's API first, then the rendezvous host while it answers. The poll that finds
    /// bootstrap complete still reads the rendezvous host, as the installer's does, so the
    /// hosts' last lines are current.
    async fn until_bootstrap(
        &self,
        w: &mut Watcher<'_>,
        api: &ClusterApi,
        cancel: &AtomicBool,
    ) -> Result<()> {
        let started = Instant::now();
        let mut api_seen = false;
        loop {
            if cancel.load(Ordering::SeqCst) {
                return Err(WaitFailure::Interrupted.into());
            }
            if started.elapsed() > self.limits.bootstrap {
                return Err(WaitFailure::BootstrapTimedOut(self.limits.bootstrap).into());
            }
            let complete = match api.bootstrap_complete().await {
                Ok(complete) => {
                    if !api_seen {
                        api_seen = true;
                        w.view.say("Bootstrap Kube API Initialized");
                    }
                    complete
                }
                Err(e) => {
                    w.trace(&format!("cluster API: {e:#}"));
                    false
                }
            };
            w.rest_poll().await?;
            if complete {
                return Ok(());
            }
            tokio::time::sleep(self.poll).await;
        }
    }

    /// Reads the cluster's API until the install is complete, telling the ClusterOperators not
    /// yet healthy.
    async fn until_installed(
        &self,
        w: &mut Watcher<'_>,
        api: &ClusterApi,
        cancel: &AtomicBool,
    ) -> Result<()> {
        let since = Instant::now();
        loop {
            if cancel.load(Ordering::SeqCst) {
                return Err(WaitFailure::Interrupted.into());
            }
            if since.elapsed() > self.limits.install {
                return Err(WaitFailure::InstallTimedOut(self.limits.install).into());
            }
            match api.install_status().await {
                Ok(st) if st.complete() => {
                    w.result.version = st.version.clone();
                    w.result.console = st.console.clone();
                    return Ok(());
                }
                Ok(st) => w.install_progress(&st),
                Err(e) => w.trace(&format!("cluster API: {e:#}")),
            }
            tokio::time::sleep(self.poll).await;
        }
    }
}

/// The wait's memory between polls.
struct Watcher<'a> {
    rest: assisted::Client,
    rendezvous: String,
    last_trace: String,
    view: &'a mut dyn WaitView,
    seen_file: Option<PathBuf>,
    printed: BTreeSet<String>,
    result: WaitResult,
    cluster_id: Option<String>,
    infra_env_id: Option<String>,
    rest_seen: bool,
    waiting_said: bool,
    previous_status: String,
    ready_since: Option<Instant>,
    operators: String,
}

impl<'a> Watcher<'a> {
    fn new(watch: &Watch, view: &'a mut dyn WaitView) -> Result<Self> {
        let remembered: Remembered = watch
            .seen_file
            .as_ref()
            .and_then(|f| fs_err::read(f).ok())
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        let mut result = remembered.result.unwrap_or_default();
        result.started = now();
        result.bootstrap_complete = None;
        result.install_complete = None;
        for (name, h) in &result.hosts {
            view.host(name, &host_line(name, h));
        }
        Ok(Watcher {
            rest: assisted::Client::new(
                &watch.rendezvous,
                watch.token.clone(),
                Duration::from_secs(10),
            )?,
            rendezvous: watch.rendezvous.clone(),
            last_trace: String::new(),
            view,
            seen_file: watch.seen_file.clone(),
            printed: remembered.printed,
            result,
            cluster_id: None,
            infra_env_id: None,
            rest_seen: false,
            waiting_said: false,
            previous_status: String::new(),
            ready_since: None,
            operators: String::new(),
        })
    }

    /// Polls the rendezvous host once; an API that does not answer is no error.
    async fn rest_poll(&mut self) -> Result<()> {
        let Err(e) = self.rest_once().await else {
            return Ok(());
        };
        match e.downcast::<ApiError>() {
            Ok(ApiError::Unreachable { reason, .. }) => {
                self.unreachable(&reason);
                Ok(())
            }
            // A refused token stays refused: no use waiting out the limit.
            Ok(refused @ ApiError::Refused { .. }) => Err(refused.into()),
            Ok(other) => {
                self.trace(&format!("rendezvous API: {other}"));
                Ok(())
            }
            Err(other) => Err(other),
        }
    }

    /// The rendezvous host did not answer: not up yet, or gone for good once it answered
    /// (node 0 reboots into the cluster); each told once.
    fn unreachable(&mut self, reason: &str) {
        if self.rest_seen && self.result.rest_api_gone.is_none() {
            self.result.rest_api_gone = Some(now());
            self.view.say("The rendezvous host's API went away (node 0 is rebooting into the cluster); waiting on the cluster API");
            self.save();
        }
        if !self.rest_seen && !self.waiting_said {
            self.waiting_said = true;
            self.view.say(&format!(
                "Waiting for the rendezvous host's API at {} (node 0 is not up yet, or has rebooted into the cluster)",
                self.rendezvous
            ));
        }
        self.trace(&format!("rendezvous API: {reason}"));
    }

    async fn rest_once(&mut self) -> Result<()> {
        if self.cluster_id.is_none() {
            let clusters = self.rest.clusters().await?;
            self.cluster_id = clusters.first().map(|c| c.id.clone());
        }
        if self.infra_env_id.is_none() {
            let envs = self.rest.infra_envs().await?;
            self.infra_env_id = envs.first().map(|e| e.id.clone());
        }
        let Some(id) = self.cluster_id.clone() else {
            self.say_once(
                "rest:nocluster",
                "Waiting for the cluster to be registered on the rendezvous host",
            );
            return Ok(());
        };
        let cluster = self.rest.cluster(&id).await?;
        if !self.rest_seen {
            self.rest_seen = true;
            self.view.say(&format!(
                "Connected to the rendezvous host's API ({})",
                self.rendezvous
            ));
        }
        self.cluster_status(&cluster)?;
        self.validations(&cluster);
        self.hosts(&cluster);
        if let Some(env) = self.infra_env_id.clone() {
            self.events(env).await?;
        }
        self.save();
        pending_user_action_of(&cluster)
    }

    /// Tells each new warning or error event of the infra-env once.
    async fn events(&mut self, infra_env_id: String) -> Result<()> {
        let q = EventQuery {
            infra_env_id: Some(infra_env_id),
            severities: ["warning", "error", "critical"].map(String::from).to_vec(),
            ..Default::default()
        };
        for e in self.rest.events(&q).await? {
            if e.is_warning_or_worse() {
                let line = format!("{}: {}", e.severity, e.message);
                if self.say_once(&format!("event:{}", e.key()), &line) {
                    self.result.events.push(line);
                }
            }
        }
        Ok(())
    }

    fn cluster_status(&mut self, c: &Cluster) -> Result<()> {
        let pct = c.progress.as_ref().and_then(|p| p.total_percentage);
        if c.status != self.previous_status {
            self.view.say(&format!(
                "Cluster {}: {}{}",
                c.status,
                c.status_info,
                pct.map(|p| format!(" ({p}%)")).unwrap_or_default()
            ));
        }
        if c.status == "ready" {
            let since = *self.ready_since.get_or_insert_with(Instant::now);
            if self.previous_status == "preparing-for-installation" || since.elapsed() > READY_LIMIT
            {
                return Err(WaitFailure::StuckReady.into());
            }
        } else {
            self.ready_since = None;
        }
        if c.status == "cancelled" {
            return Err(WaitFailure::Cancelled.into());
        }
        self.previous_status = c.status.clone();
        self.result.cluster = Some(ClusterSummary {
            id: c.id.clone(),
            name: c.name.clone(),
            status: c.status.clone(),
            status_info: c.status_info.clone(),
            percentage: pct,
        });
        Ok(())
    }

    fn validations(&mut self, c: &Cluster) {
        let mut sources = vec![("Cluster validation".to_string(), c.validations_info.clone())];
        for h in &c.hosts {
            sources.push((
                format!("Host {} validation", h.requested_hostname),
                h.validations_info.clone(),
            ));
        }
        for (prefix, info) in sources {
            let Some(info) = info else { continue };
            let Ok(parsed) = assisted::validations(&info) else {
                self.trace(&format!("{prefix}: validations_info is not JSON"));
                continue;
            };
            for v in parsed.into_values().flatten().filter(|v| v.failed()) {
                let line = format!("{prefix}: {}", v.message);
                if self.say_once(
                    &format!("validation:{prefix}:{}:{}", v.id, v.message),
                    &line,
                ) {
                    self.result.events.push(line);
                }
            }
        }
    }

    fn hosts(&mut self, c: &Cluster) {
        for h in &c.hosts {
            let name = host_name(h);
            let summary = HostSummary {
                role: h.role.clone(),
                status: h.status.clone(),
                stage: h.progress.as_ref().and_then(|p| p.current_stage.clone()),
                percentage: h.progress.as_ref().and_then(|p| p.installation_percentage),
            };
            if self.result.hosts.get(&name) != Some(&summary) {
                self.view.host(&name, &host_line(&name, &summary));
                self.result.hosts.insert(name, summary);
            }
        }
    }

    fn install_progress(&mut self, st: &InstallStatus) {
        let unstable: Vec<String> = st
            .unhealthy_operators
            .iter()
            .filter_map(|o| Some(format!("{} ({})", o.name, o.unstable_reason()?)))
            .collect();
        let line = format!(
            "Waiting for the install: ClusterVersion {}{}; console {}; ClusterOperators not yet stable: {}",
            if st.available && !st.progressing && !st.failing {
                "available"
            } else if st.available {
                "available, not yet done"
            } else {
                "not available"
            },
            st.message
                .as_ref()
                .map(|m| format!(" ({m})"))
                .unwrap_or_default(),
            if st.console.is_some() {
                "admitted"
            } else {
                "not admitted"
            },
            if unstable.is_empty() {
                "none".to_string()
            } else {
                unstable.join(", ")
            }
        );
        if line != self.operators {
            self.view.say(&line);
            self.operators = line;
        }
    }

    /// Says `line` unless `key` was said before (in this run or an earlier one); true if said.
    fn say_once(&mut self, key: &str, line: &str) -> bool {
        if !self.printed.insert(key.to_string()) {
            return false;
        }
        self.view.say(line);
        self.save();
        true
    }

    /// A detail for the log only, when it differs from the previous one (a down API is
    /// reported once, not every two seconds).
    fn trace(&mut self, line: &str) {
        if line != self.last_trace {
            self.view.trace(line);
            self.last_trace = line.to_string();
        }
    }

    fn save(&self) {
        let Some(f) = &self.seen_file else { return };
        let r = Remembered {
            printed: self.printed.clone(),
            result: Some(self.result.clone()),
        };
        if let Some(dir) = f.parent() {
            let _ = fs_err::create_dir_all(dir);
        }
        let _ = crate::fs::write_json(f, &r);
    }
}

/// [`WaitFailure::PendingUserAction`] when a host of `c` waits for the user, or the cluster
/// does (`installing-pending-user-action` either way: the cluster's status is its hosts').
fn pending_user_action_of(c: &Cluster) -> Result<()> {
    const PENDING: &str = "installing-pending-user-action";
    let mut hosts: Vec<(String, String)> = c
        .hosts
        .iter()
        .filter(|h| h.status == PENDING)
        .map(|h| (host_name(h), h.status_info.clone()))
        .collect();
    if hosts.is_empty() && c.status == PENDING {
        hosts.push((String::new(), c.status_info.clone()));
    }
    if hosts.is_empty() {
        return Ok(());
    }
    Err(WaitFailure::PendingUserAction(hosts).into())
}

/// A host's name: the one it was given, or its id.
fn host_name(h: &assisted::Host) -> String {
    if h.requested_hostname.is_empty() {
        h.id.clone()
    } else {
        h.requested_hostname.clone()
    }
}

fn host_line(name: &str, h: &HostSummary) -> String {
    format!(
        "{name:<16} {:<8} {:<26} {}{}",
        h.role,
        h.status,
        h.stage.as_deref().unwrap_or("-"),
        h.percentage.map(|p| format!(" {p}%")).unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every host in `installing-pending-user-action` is named with its status_info; a cluster
    /// in that status whose hosts do not say which is named itself; any other status passes.
    #[test]
    fn pending_user_action_names_each_host_or_the_cluster() {
        let host = |name: &str, status: &str| assisted::Host {
            requested_hostname: name.into(),
            status: status.into(),
            status_info: format!("{name} booted the installation image."),
            ..Default::default()
        };
        let mut c = Cluster {
            name: "lab".into(),
            status: "installing".into(),
            hosts: vec![
                host("master-0", "installing-in-progress"),
                host("master-1", "installing-pending-user-action"),
            ],
            ..Default::default()
        };
        let err = pending_user_action_of(&c).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("host master-1 is installing-pending-user-action: master-1 booted the installation image. A host booted"), "{text}");
        assert!(!text.contains("master-0"), "{text}");
        c.hosts.pop();
        assert!(pending_user_action_of(&c).is_ok());
        c.status = "installing-pending-user-action".into();
        c.status_info = "Cluster has hosts pending user action".into();
        let text = pending_user_action_of(&c).unwrap_err().to_string();
        assert!(
            text.contains("the cluster is installing-pending-user-action: Cluster has hosts pending user action. A host booted"),
            "{text}"
        );
        assert!(text.contains("in the host's BMC"), "{text}");
    }
}
