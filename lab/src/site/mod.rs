//! The lab site (`bootstrap-lab up|down|status`): what a real site offers the install pipeline,
//! on one machine. Every lab node gets a Redfish BMC (a sushy-tools emulator, [`bmc`]) and a
//! network namespace on a bridged machine network ([`netns`]); a detached site process
//! ([`site_run`]) holds the rendezvous and cluster API listeners inside node 0's namespace and
//! watches the BMCs ([`watcher`]); dnsmasq and chronyd serve the site's DNS and NTP on the
//! bridge's gateway ([`dns_ntp`]). Everything lab up makes is recorded in `STATE/site.json`
//! ([`SiteRecord`]) and named after the lab id (from the state dir's path), so `bootstrap-lab down`, or
//! the next `bootstrap-lab up` after a crash, removes exactly that.

pub mod argocd;
pub mod bmc;
mod booted_iso;
pub mod cluster_api;
pub mod dns_ntp;
pub mod fixture;
pub mod gate;
pub mod git_server;
pub mod hosts;
pub mod join;
pub mod kube;
pub mod machineconfig;
pub mod netns;
pub mod olm;
pub mod pki;
pub mod process;
pub mod rendezvous;
pub mod repair;
pub mod simulator;
pub mod site_run;
pub mod sshd;
mod status;
pub mod vendor;
pub mod watcher;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bmc::Emulator;
use bootstrap::inventory::{self, Inventory};
use netns::LabNet;
pub use status::{status, HostStatus, NodeStatus, SiteStatus, Status};
use watcher::Observation;

/// The default state dir.
pub const DEFAULT_STATE: &str = ".lab/site";
/// The site record, in the state dir.
pub const SITE_FILE: &str = "site.json";
/// Files lab up wrote outside the state dir (the inventory's CA file), with their sha256.
pub const WRITTEN_FILE: &str = "written.json";
/// The site process's readiness note (its pid and listeners), written once it listens.
pub const READY_FILE: &str = "site-run.json";
/// The watcher's latest observation per node.
pub const OBSERVATIONS_FILE: &str = "observations.json";
/// The site process's log.
pub const SITE_LOG: &str = "site.log";
/// The rendezvous host's agent API port (assisted-service).
pub const RENDEZVOUS_PORT: u16 = 8090;
/// The cluster API port.
pub const CLUSTER_API_PORT: u16 = 6443;

/// How long lab up waits for the emulators and for the site process.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// `STATE/site.json`: everything lab up made, for lab down, lab status, the site process and
/// the tests.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SiteRecord {
    /// Six hex digits from the state dir's path; every namespace and link is named after it.
    pub lab_id: String,
    /// The state dir, absolute.
    pub state_dir: PathBuf,
    /// The inventory directory, absolute.
    pub inventory: PathBuf,
    /// `starting` until everything answers, then `ready`.
    pub phase: Phase,
    /// The lab CA certificate (PEM) that signed every lab certificate.
    pub ca: PathBuf,
    /// The cluster API stand-in's certificate chain and key (PEM), for the API VIP and
    /// `api.`/`api-int.` names.
    pub cluster_api_tls: TlsFiles,
    /// The network namespaces and bridge.
    pub network: LabNet,
    /// One emulator per node, in inventory order.
    pub emulators: Vec<Emulator>,
    /// The site process.
    pub site: SiteProcess,
    /// How the site process simulates the install.
    #[serde(default)]
    pub simulation: Simulation,
    /// The lab's Git server, when the inventory's `gitops.repository.url` is an HTTPS URL on
    /// the lab gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<GitSite>,
    /// The site's DNS server (dnsmasq on the gateway), when `networks.dns` names the gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns: Option<dns_ntp::Daemon>,
    /// The site's NTP server (chronyd on the gateway), when `networks.ntp` names the gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ntp: Option<dns_ntp::Daemon>,
}

/// The lab's Git server (`git http-backend` over HTTPS, [`git_server`]), run by the site
/// process: the site's GitOps repository the hand-off points Argo CD at.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GitSite {
    /// Where it listens (the gateway address and the URL's port).
    pub listen: SocketAddr,
    /// The repository's name (`site` for `.../site.git`), created empty at start.
    pub repository: String,
    /// The HTTPS user.
    pub user: String,
    /// Its certificate (for the gateway address), signed by the lab CA.
    pub tls: TlsFiles,
    /// The bare repositories.
    pub root: PathBuf,
}

/// The lab Git server for `inv`'s `gitops.repository` when the lab can serve it: an `https://`
/// URL whose host is the lab gateway and whose path is one repository.
fn plan_git(state: &Path, inv: &Inventory) -> Result<Option<GitSite>> {
    let Some(repo) = inv.site.gitops.as_ref().map(|g| &g.repository) else {
        return Ok(None);
    };
    let Ok(url) = reqwest::Url::parse(&repo.url) else {
        return Ok(None);
    };
    let gateway: std::net::IpAddr = inv.site.networks.gateway.parse()?;
    let host_is_gateway = url
        .host_str()
        .and_then(|h| h.trim_matches(['[', ']']).parse::<std::net::IpAddr>().ok())
        == Some(gateway);
    if url.scheme() != "https" || !host_is_gateway {
        tracing::info!(
            "gitops.repository.url {} is not https on the lab gateway {gateway}: the lab serves no Git repository",
            repo.url
        );
        return Ok(None);
    }
    let name = url
        .path()
        .trim_matches('/')
        .trim_end_matches(".git")
        .to_string();
    if name.is_empty() {
        bail!(
            "site.yaml gitops.repository.url {}: no repository in the path; use https://{gateway}:PORT/NAME.git",
            repo.url
        );
    }
    Ok(Some(GitSite {
        listen: SocketAddr::new(gateway, url.port().unwrap_or(443)),
        repository: name,
        user: repo.username.clone().unwrap_or_else(|| "lab".into()),
        tls: TlsFiles {
            cert: state.join("pki/git-server.crt"),
            key: state.join("pki/git-server.key"),
        },
        root: state.join("git"),
    }))
}

/// How the simulated nodes install (`bootstrap-lab up --step`, `--inject-...`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Simulation {
    /// One step of the install, in milliseconds (0: the simulator's default).
    pub step_ms: u64,
    /// A node whose host validation fails for its first steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation_failure: Option<String>,
    /// A node that boots the ISO again when it reboots (`--inject-pending-user-action`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_user_action: Option<String>,
    /// A ClusterOperator still Progressing after ClusterVersion is done
    /// (`--inject-operator-progressing`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progressing_operator: Option<String>,
    /// Rogue CSRs beside a joining node's (`--inject-rogue-csr`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rogue_csr: bool,
    /// Every node's SSH host starts at once, as if installed (`bootstrap-lab up --hosts-up`).
    #[serde(default)]
    pub hosts_up: bool,
}

impl Simulation {
    /// The simulator's configuration.
    pub fn config(&self) -> simulator::SimulatorConfig {
        let mut c = simulator::SimulatorConfig::default();
        if self.step_ms > 0 {
            c.step = Duration::from_millis(self.step_ms);
        }
        c.validation_failure = self.validation_failure.clone();
        c.pending_user_action = self.pending_user_action.clone();
        c.progressing_operator = self.progressing_operator.clone();
        c.rogue_csr = self.rogue_csr;
        c
    }
}

/// A certificate chain and key, by path.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TlsFiles {
    /// The chain (server, then the lab CA).
    pub cert: PathBuf,
    /// The key.
    pub key: PathBuf,
}

/// Where lab up stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Being built (a record left in this phase is a crashed lab up).
    Starting,
    /// Everything answered.
    Ready,
}

/// The detached site process.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SiteProcess {
    /// Its pid, once started.
    pub pid: Option<u32>,
    /// Its log.
    pub log: PathBuf,
    /// The node whose namespace holds the listeners (the rendezvous host).
    pub node: String,
    /// The rendezvous listener (`<rendezvousIP>:8090`).
    pub rendezvous: SocketAddr,
    /// The cluster API listener (`<apiVIP>:6443`).
    pub cluster_api: SocketAddr,
}

/// A file lab up wrote outside its state dir.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Written {
    /// The file.
    pub path: PathBuf,
    /// The sha256 of what lab up wrote (a file changed since is left alone).
    pub sha256: String,
}

impl SiteRecord {
    /// Reads `STATE/site.json`.
    pub fn read(state: &Path) -> Result<SiteRecord> {
        let path = state.join(SITE_FILE);
        let text = fs_err::read_to_string(&path)
            .with_context(|| format!("no lab is up at {} (bootstrap-lab up)", state.display()))?;
        serde_json::from_str(&text).with_context(|| format!("reading {}", path.display()))
    }

    fn write(&self) -> Result<()> {
        bootstrap::fs::write_json(&self.state_dir.join(SITE_FILE), self)
    }

    /// A TCP listener bound to `addr` inside `node`'s namespace (see [`netns::bind_in`]).
    pub fn bind_in(&self, node: &str, addr: SocketAddr) -> Result<std::net::TcpListener> {
        netns::bind_in(self.network.namespace_of(node)?, addr)
    }

    /// A command run inside `node`'s namespace (see [`netns::command_in`]).
    pub fn command_in(&self, node: &str, program: &str) -> Result<std::process::Command> {
        Ok(netns::command_in(self.network.namespace_of(node)?, program))
    }

    /// The emulator of `node`.
    pub fn emulator(&self, node: &str) -> Result<&Emulator> {
        self.emulators
            .iter()
            .find(|e| e.node == node)
            .with_context(|| format!("node {node} is not a node of this lab"))
    }
}

/// The state dir as an absolute path (not resolved through symlinks: the path the user gave,
/// made absolute, names the lab).
pub fn absolute_state(state: &Path) -> Result<PathBuf> {
    std::path::absolute(state).with_context(|| format!("resolving {}", state.display()))
}

/// The lab id of a state dir: 6 hex digits of the sha256 of its absolute path.
pub fn lab_id(state: &Path) -> String {
    use sha2::Digest as _;
    let h = sha2::Sha256::digest(state.display().to_string().as_bytes());
    h[..3].iter().map(|b| format!("{b:02x}")).collect()
}

/// Successful `ComputerSystem.Reset` POSTs per node, from each emulator's request log: the
/// proof that no node was reset twice.
pub fn reset_counts(state: &Path) -> Result<BTreeMap<String, u32>> {
    let record = SiteRecord::read(&absolute_state(state)?)?;
    Ok(bmc::reset_counts_of(&record.emulators))
}

/// The watcher's latest observation per node (empty before the first).
pub fn observations(state: &Path) -> BTreeMap<String, Observation> {
    fs_err::read_to_string(state.join(OBSERVATIONS_FILE))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

/// `bootstrap-lab up`'s settings.
#[derive(Clone, Debug)]
pub struct UpSettings {
    /// The inventory directory.
    pub inventory: PathBuf,
    /// The state dir.
    pub state: PathBuf,
    /// This bootstrap binary (it runs the site process).
    pub program: PathBuf,
    /// How the install is simulated.
    pub simulation: Simulation,
    /// The vendor each named node's BMC behaves as (others: generic).
    pub vendors: BTreeMap<String, vendor::Vendor>,
}

/// Brings the lab up: clears a stale lab of the same state dir, writes the lab CA (and the
/// inventory's `bmc.ca` file when missing), builds the namespaces, starts and waits for the
/// emulators and the site process. On failure everything it made is removed again.
pub async fn up(settings: &UpSettings) -> Result<Status> {
    let state = absolute_state(&settings.state)?;
    let id = lab_id(&state);
    teardown(&state, &id, true)?;
    match build(&state, &id, settings).await {
        Ok(()) => status(&state),
        Err(e) => {
            if let Err(t) = teardown(&state, &id, false) {
                tracing::warn!("removing the half-built lab: {t:#}");
            }
            Err(e)
        }
    }
}

async fn build(state: &Path, id: &str, settings: &UpSettings) -> Result<()> {
    // Before anything is built: a missing venv is the commonest first-run problem.
    let emulator = bmc::emulator_program()?;
    let inv_dir = std::path::absolute(&settings.inventory)?;
    let inv = lab_inventory(&inv_dir)?;
    fs_err::create_dir_all(state.join("pki"))?;
    let ca = pki::LabCa::generate()?;
    let ca_path = state.join("pki/ca.pem");
    bootstrap::fs::write_atomic(&ca_path, ca.pem.cert.as_bytes())?;
    bootstrap::fs::write_atomic_mode(&state.join("pki/ca.key"), ca.pem.key.as_bytes(), 0o600)?;
    write_inventory_ca(state, &inv, &ca)?;
    check_inventory(&inv_dir)?;
    for node in settings.vendors.keys() {
        if !inv.nodes.nodes.iter().any(|n| &n.hostname == node) {
            bail!(
                "--vendor {node}=...: {node} is not a node of {}",
                inv_dir.display()
            );
        }
    }
    let mut record = plan(state, id, &inv, &ca_path, &settings.vendors)?;
    record.simulation = settings.simulation.clone();
    record.write()?;
    start(&mut record, &inv, &ca, &emulator, &settings.program).await
}

/// The lab-only file of spare machines beside nodes.yaml: `bootstrap-lab up` builds each (BMC,
/// namespace, SSH host), powered off, for a day-two rehearsal to add; the product reads only
/// site.yaml and nodes.yaml, so an install of the inventory does not see them.
pub const SPARES_FILE: &str = "spares.yaml";

/// The inventory as the lab builds it: the product's (`inventory::load`), its nodes followed by
/// the spare machines of `SPARES_FILE` when there is one (nodes.yaml's own format, kind Nodes),
/// so every piece of the lab treats a spare as a machine like the others.
pub fn lab_inventory(dir: &Path) -> Result<Inventory> {
    let mut inv = inventory::load(dir)?;
    let path = dir.join(SPARES_FILE);
    if path.exists() {
        let spares: bootstrap::inventory::model::NodeList =
            serde_saphyr::from_str(&fs_err::read_to_string(&path)?)
                .with_context(|| format!("reading {}", path.display()))?;
        for n in spares.nodes {
            // A spare nodes.yaml has too is the product's now (day two added it): the same
            // machine, built once, as nodes.yaml describes it.
            if !inv.nodes.nodes.iter().any(|m| m.hostname == n.hostname) {
                inv.nodes.nodes.push(n);
            }
        }
    }
    Ok(inv)
}

/// Validates the inventory as the product will (now that the CA file exists): errors stop lab up.
fn check_inventory(dir: &Path) -> Result<()> {
    let (inv, problems) = inventory::load_validated(dir)?;
    let errors: Vec<_> = problems.into_iter().filter(|(_, p)| p.is_error()).collect();
    if !errors.is_empty() {
        bail!(
            "{}",
            inventory::render_inventory_problems(&inv.dir, &errors)
        );
    }
    Ok(())
}

/// The record of the lab to build.
fn plan(
    state: &Path,
    id: &str,
    inv: &Inventory,
    ca: &Path,
    vendors: &BTreeMap<String, vendor::Vendor>,
) -> Result<SiteRecord> {
    let nodes = &inv.nodes.nodes;
    let network = LabNet::plan(id, &inv.site, nodes)?;
    let emulators = nodes
        .iter()
        .map(|n| {
            bmc::plan(
                state,
                n,
                vendors.get(&n.hostname).copied().unwrap_or_default(),
            )
        })
        .collect::<Result<Vec<_>>>()?;
    let rendezvous_ip = inv.site.cluster.rendezvous_ip.parse()?;
    let host = network
        .nodes
        .iter()
        .find(|n| {
            n.addresses
                .iter()
                .any(|a| a.starts_with(&format!("{rendezvous_ip}/")))
        })
        .with_context(|| format!("no lab node has the rendezvous IP {rendezvous_ip}"))?;
    let (dns, ntp) = dns_ntp::plan(state, inv)?;
    let api_vip = inv
        .site
        .cluster
        .api_vips
        .first()
        .context("site.yaml cluster.apiVIPs is empty")?
        .parse()?;
    Ok(SiteRecord {
        lab_id: id.to_string(),
        state_dir: state.to_path_buf(),
        inventory: inv.dir.clone(),
        phase: Phase::Starting,
        ca: ca.to_path_buf(),
        cluster_api_tls: TlsFiles {
            cert: state.join("pki/cluster-api.crt"),
            key: state.join("pki/cluster-api.key"),
        },
        network: network.clone(),
        emulators,
        site: SiteProcess {
            pid: None,
            log: state.join(SITE_LOG),
            node: host.node.clone(),
            rendezvous: SocketAddr::new(rendezvous_ip, RENDEZVOUS_PORT),
            cluster_api: SocketAddr::new(api_vip, CLUSTER_API_PORT),
        },
        simulation: Simulation::default(),
        git: plan_git(state, inv)?,
        dns,
        ntp,
    })
}

/// Writes the lab CA to every `bmc.ca` file the inventory names that is missing, or that lab up
/// wrote before (its marker in the state dir); refuses a file lab up did not write.
fn write_inventory_ca(state: &Path, inv: &Inventory, ca: &pki::LabCa) -> Result<()> {
    let mut files: Vec<(String, PathBuf)> = Vec::new();
    let mut add = |what: String, path: PathBuf| {
        if !files.iter().any(|(_, p)| *p == path) {
            files.push((what, path));
        }
    };
    for n in &inv.nodes.nodes {
        if let Some(f) = &n.bmc.ca {
            add(
                format!("node {}'s bmc.ca", n.hostname),
                inv.resolve(&f.file),
            );
        }
    }
    // The lab Git server's certificate is signed by the same CA.
    if let Some(f) = inv
        .site
        .gitops
        .as_ref()
        .and_then(|g| g.repository.ca.as_ref())
    {
        add("gitops.repository.ca".into(), inv.resolve(&f.file));
    }
    let mut written = Vec::new();
    for (what, path) in files {
        if path.exists() {
            bail!(
                "{what} {} exists and was not written by lab up: the lab signs its BMC and Git server certificates with a new CA on every lab up and cannot use that one; remove the file (lab up writes the lab CA there) or point {} elsewhere",
                path.display(),
                what.rsplit(' ').next().unwrap_or_default()
            );
        }
        if let Some(parent) = path.parent() {
            fs_err::create_dir_all(parent)?;
        }
        written.push(Written {
            path: path.clone(),
            sha256: bootstrap::oci::digest::Digest::of(ca.pem.cert.as_bytes())
                .hex()
                .to_string(),
        });
        // The marker first: a crash between the two leaves a marker for a missing file, which
        // is harmless; the other order could leave a file no marker owns.
        bootstrap::fs::write_json(&state.join(WRITTEN_FILE), &written)?;
        bootstrap::fs::write_atomic(&path, ca.pem.cert.as_bytes())?;
    }
    Ok(())
}

async fn start(
    record: &mut SiteRecord,
    inv: &Inventory,
    ca: &pki::LabCa,
    emulator: &Path,
    bootstrap: &Path,
) -> Result<()> {
    record.network.create()?;
    // On the bridge's gateway address, which exists from here on.
    for d in [&mut record.dns, &mut record.ntp].into_iter().flatten() {
        dns_ntp::start(d, inv)?;
    }
    for (em, node) in record.emulators.iter_mut().zip(&inv.nodes.nodes) {
        let creds = bmc::credentials(inv, node)?;
        bmc::prepare(em, node, creds.as_ref(), ca)?;
        em.pid = Some(bmc::spawn(em, emulator)?);
    }
    record.write()?;
    bmc::wait_ready(&record.emulators, &ca.pem.cert, READY_TIMEOUT).await?;
    dns_ntp::wait_ready(record.dns.as_ref(), record.ntp.as_ref(), inv, READY_TIMEOUT).await?;
    write_cluster_api_cert(record, inv, ca)?;
    if let Some(git) = &record.git {
        let pem = ca.server(&[git.listen.ip()], &[])?;
        bootstrap::fs::write_atomic(&git.tls.cert, pem.cert.as_bytes())?;
        bootstrap::fs::write_atomic_mode(&git.tls.key, pem.key.as_bytes(), 0o600)?;
    }
    record.site.pid = Some(spawn_site(record, bootstrap)?);
    record.write()?;
    wait_site(record).await?;
    if record.simulation.hosts_up {
        wait_hosts(record).await?;
    }
    record.phase = Phase::Ready;
    record.write()
}

fn write_cluster_api_cert(record: &SiteRecord, inv: &Inventory, ca: &pki::LabCa) -> Result<()> {
    let c = &inv.site.cluster;
    let domain = format!("{}.{}", c.name, c.base_domain);
    let pem = ca.server(
        &[record.site.cluster_api.ip()],
        &[format!("api.{domain}"), format!("api-int.{domain}")],
    )?;
    bootstrap::fs::write_atomic(&record.cluster_api_tls.cert, pem.cert.as_bytes())?;
    bootstrap::fs::write_atomic_mode(&record.cluster_api_tls.key, pem.key.as_bytes(), 0o600)
}

/// Starts `bootstrap-lab site-run --state STATE` detached (it calls setsid itself), its output
/// appended to the site log.
fn spawn_site(record: &SiteRecord, program: &Path) -> Result<u32> {
    let log = fs_err::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&record.site.log)?;
    let child = std::process::Command::new(program)
        .args(["--log", "info", "site-run", "--state"])
        .arg(&record.state_dir)
        .stdin(std::process::Stdio::null())
        .stdout(log.file().try_clone()?)
        .stderr(log.into_file())
        .spawn()
        .with_context(|| format!("starting {} site-run", program.display()))?;
    Ok(child.id())
}

/// Waits for the site process's readiness note, or fails with its log when it exits first.
async fn wait_site(record: &SiteRecord) -> Result<()> {
    let ready = record.state_dir.join(READY_FILE);
    let pid = record.site.pid.unwrap_or_default();
    let start = Instant::now();
    while !ready.exists() {
        if !process::alive(pid) {
            bail!(
                "the lab site process exited while starting; {} ends:\n{}",
                record.site.log.display(),
                bmc::tail(&record.site.log, 15)
            );
        }
        if start.elapsed() > READY_TIMEOUT {
            bail!(
                "the lab site process did not listen within {}s; see {}",
                READY_TIMEOUT.as_secs(),
                record.site.log.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// With `--hosts-up`: waits until the site process lists every node's SSH host in
/// `STATE/hosts.json`, or fails naming those missing and the site log.
async fn wait_hosts(record: &SiteRecord) -> Result<()> {
    let start = Instant::now();
    loop {
        let up: Vec<String> = hosts::read(&record.state_dir)
            .into_iter()
            .map(|h| h.node)
            .collect();
        let missing: Vec<&str> = record
            .network
            .nodes
            .iter()
            .map(|n| n.node.as_str())
            .filter(|n| !up.iter().any(|u| u == n))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let pid = record.site.pid.unwrap_or_default();
        if !process::alive(pid) || start.elapsed() > READY_TIMEOUT {
            bail!(
                "the SSH hosts of {} did not start; {} ends:\n{}",
                missing.join(", "),
                record.site.log.display(),
                bmc::tail(&record.site.log, 15)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What `bootstrap-lab down` removed.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Removed {
    /// The state dir.
    pub state_dir: PathBuf,
    /// Processes stopped (emulators, the site process).
    pub processes: Vec<u32>,
    /// Namespaces and links deleted.
    pub network: Vec<String>,
    /// Files lab up had written outside the state dir (the inventory's CA file).
    pub files: Vec<PathBuf>,
}

impl fmt::Display for Removed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "lab at {} down: {} processes stopped, {} namespaces and links removed, {} files removed",
            self.state_dir.display(),
            self.processes.len(),
            self.network.len(),
            self.files.len()
        )
    }
}

/// Takes the lab of `state` down: its processes, namespaces and bridge, the files it wrote
/// outside the state dir, and its record. The emulators' and site process's logs stay.
pub fn down(state: &Path) -> Result<Removed> {
    let state = absolute_state(state)?;
    let id = lab_id(&state);
    teardown(&state, &id, false)
}

/// Removes whatever a lab of this state dir left, recorded or not (`fresh`: the logs too).
fn teardown(state: &Path, id: &str, fresh: bool) -> Result<Removed> {
    let mut removed = Removed {
        state_dir: state.to_path_buf(),
        ..Removed::default()
    };
    // Found by command line, not by the recorded pids: that also finds a process started
    // before a crash kept lab up from recording it, and never a stranger that reused a pid.
    let pids = process::of_lab(state);
    let sessions = process::sshd_namespaces(&pids);
    removed.processes = process::stop(&pids, Duration::from_secs(5));
    for namespace in sessions {
        process::kill_mount_namespace(&namespace);
    }
    removed.network = netns::remove(id)?;
    removed.files = remove_written(state)?;
    for f in [
        SITE_FILE,
        READY_FILE,
        OBSERVATIONS_FILE,
        hosts::HOSTS_FILE,
        machineconfig::FILE,
    ] {
        let path = state.join(f);
        if path.exists() {
            fs_err::remove_file(path)?;
        }
    }
    if state.join("pki").exists() {
        fs_err::remove_dir_all(state.join("pki"))?;
    }
    clear_node_dirs(&state.join("bmc"), "emulator.log", fresh)?;
    dns_ntp::clear(state, fresh)?;
    // A new lab's SSH hosts get new host keys; lab down keeps only their logs.
    clear_node_dirs(&state.join(hosts::HOSTS_DIR), "sshd", fresh)?;
    if fresh && state.join(SITE_LOG).exists() {
        fs_err::remove_file(state.join(SITE_LOG))?;
    }
    Ok(removed)
}

/// Removes the per-node files under `dir` (`bmc/NODE/`: emulator state, downloaded media,
/// keys, htpasswd; `hosts/NODE/`: fixtures), all but the entry `keep` of each node (the
/// emulator's log, the sshd's directory); everything when `fresh` (lab up: a new lab's reset
/// counts start from zero, its SSH hosts get new host keys).
fn clear_node_dirs(dir: &Path, keep: &str, fresh: bool) -> Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    if fresh {
        return Ok(fs_err::remove_dir_all(dir)?);
    }
    for node in fs_err::read_dir(dir)? {
        for entry in fs_err::read_dir(node?.path())? {
            let entry = entry?;
            if entry.file_name() == keep {
                continue;
            }
            if entry.file_type()?.is_dir() {
                fs_err::remove_dir_all(entry.path())?;
            } else {
                fs_err::remove_file(entry.path())?;
            }
        }
    }
    Ok(())
}

/// Removes the files the marker lists when they still hold what lab up wrote.
fn remove_written(state: &Path) -> Result<Vec<PathBuf>> {
    let marker = state.join(WRITTEN_FILE);
    let Ok(text) = fs_err::read_to_string(&marker) else {
        return Ok(Vec::new());
    };
    let written: Vec<Written> =
        serde_json::from_str(&text).with_context(|| format!("reading {}", marker.display()))?;
    let mut removed = Vec::new();
    for w in written {
        match fs_err::read(&w.path) {
            Ok(bytes) if bootstrap::oci::digest::Digest::of(&bytes).hex() == w.sha256 => {
                fs_err::remove_file(&w.path)?;
                removed.push(w.path);
            }
            Ok(_) => tracing::warn!(
                "{} changed since lab up wrote it; left in place",
                w.path.display()
            ),
            Err(_) => {}
        }
    }
    fs_err::remove_file(&marker)?;
    Ok(removed)
}

/// `value` as a JSON response with `code` (axum's `Json` needs a feature this crate does not
/// build).
pub fn json_response<T: serde::Serialize>(
    code: axum::http::StatusCode,
    value: &T,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let body = serde_json::to_vec(value).unwrap_or_default();
    (
        code,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}
