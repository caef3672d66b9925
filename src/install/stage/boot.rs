//! The boot stage: every node started from the agent ISO through its BMC, in parallel (at most
//! `boot.parallel` at once), with one live line per node: connected -> checked -> media inserted
//! -> boot set -> reset -> powered on.
//!
//! The BMCs fetch the ISO themselves, so first the ISO is made reachable ([`super::served`]:
//! served by bootstrap, or the site's URL checked byte for byte) before any BMC is touched.
//!
//! The Redfish sequence is the client's ([`crate::redfish::Client::boot_from_cd`]); the checks
//! before it are the preflight's ([`crate::preflight::bmc::inspect`]: the system, its MACs and
//! UUID, its virtual CD, read-only; [`crate::preflight::site::iso_reach`]: the ISO's address one
//! the BMCs reach), run on the client the node is then booted with; this stage gives it each
//! node and keeps the record. Before it changes anything on a node, the
//! node is checked to be the one the inventory means: every MAC address the inventory gives it
//! must be among those its BMC's `EthernetInterfaces` report, and its `UUID` must be
//! `bmc.systemUUID` when that is given. A mismatch (the classic wrong cable, wrong server) stops
//! that node, naming both sides.
//!
//! A node is reset at most once: the reset is entered in `RUN/ledger/boot/NODE.json` *before*
//! it is sent, and a later run (a rerun after a failure or a kill) only reads such a node's
//! state and leaves it alone, unless `--reboot NODE` asks for it again; a ledger that cannot be
//! read fails its node rather than be taken for "never reset". A failed node does not stop the
//! others; the stage fails naming every failed node with its BMC's own message. Each
//! node's result (what was checked and done, the BMC calls as method, path and status) is
//! `RUN/boot/NODE.json`, with the vendor profile the boot followed (`redfish::vendor`: vendor,
//! model and firmware as the BMC reports them, or `bmc.vendor`); `RUN/boot/boot.json` says where
//! the ISO was served.

use super::evidence::{await_boots, Registrations, Sources, Verdict, Watched};
use super::served::{iso_source, IsoReads, IsoSource};
use super::{Inputs, IsoServer, StageContext, StageWork};
use crate::install::log::StageLog;
use crate::install::rundir::{
    InstallerDir, RunDir, BOOT_DIR, BOOT_FILE, ISO_DIR, WAIT_DIR, WAIT_FILE,
};
use crate::inventory::model::Node;
use crate::inventory::Inventory;
use crate::output::NodeLines;
use crate::preflight::bmc::{self as checks, BmcTarget};
use crate::preflight::Status;
use crate::redfish::{self, BootStep, BootSteps, Client, SystemInfo};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

/// Nodes booted at once when the inventory does not say.
const DEFAULT_PARALLEL: u32 = 8;

/// The boot stage.
pub struct Boot;

impl StageWork for Boot {
    fn inputs(&self, cx: &StageContext) -> Result<Inputs> {
        let mut inputs = Inputs::default();
        inputs.run_files(&cx.run, ISO_DIR)?;
        let inv = cx.inventory()?;
        bmc_inputs(&mut inputs, &inv, |_| true)?;
        Ok(inputs)
    }

    fn output_dir(&self) -> Option<&'static str> {
        Some(BOOT_DIR)
    }

    fn must_run(&self, cx: &StageContext) -> Option<String> {
        (!cx.reboot.is_empty()).then(|| format!("--reboot {}", cx.reboot.join(", ")))
    }

    fn run(
        &self,
        cx: &StageContext,
        iso: &mut IsoServer,
        out: &Path,
        log: &mut StageLog,
    ) -> Result<String> {
        let inv = cx.inventory()?;
        check_reboot_names(&inv, &cx.reboot)?;
        let plans = plan(&inv, &cx.reboot)?;
        let handle = tokio::runtime::Handle::current();
        let source = handle.block_on(iso_source(cx, iso, &inv, &cx.run.installer().iso()))?;
        log.line(&format!("the BMCs fetch the ISO from {}", source.url))?;
        check_reach(&source, &plans, log)?;
        let names: Vec<String> = plans.iter().map(|p| p.name.clone()).collect();
        let bmc_ips = handle.block_on(own_bmc_ips(&plans));
        let lines = NodeLines::new("boot", &names);
        let parallel = parallel(&inv);
        // The rendezvous host's API is read from now on: a node's agent may register, and node 0
        // move on, before the last node is through its reset.
        let (registrations, watching) = {
            let _enter = handle.enter();
            Registrations::watch(
                rendezvous_client(&cx.run.installer()).map_err(|e| format!("{e:#}")),
                super::wait::poll_interval(),
            )
        };
        let mut results = handle.block_on(boot_all(
            plans,
            &source,
            &cx.run,
            &lines,
            parallel,
            cx.cancel.clone(),
        ));
        let reads = (source.by == "served").then(|| iso.reads());
        handle.block_on(prove_boots(
            cx,
            &inv,
            registrations,
            reads,
            &bmc_ips,
            &mut results,
            &lines,
        ));
        watching.abort();
        lines.finish();
        record(super::Stage::Boot, &results, &source, out, log)?;
        Ok(detail(&results, &source))
    }

    fn secrets(&self, cx: &StageContext) -> Vec<String> {
        super::inputs::inventory_secrets(&cx.inventory)
    }
}

/// The boot's inputs for the nodes `wanted` picks (by index in nodes.yaml: day one boots them
/// all, day two the nodes it adds): each one's name, BMC, trust, UUID, MACs and credentials
/// (hashed), and where the ISO is served from.
pub(super) fn bmc_inputs(
    inputs: &mut Inputs,
    inv: &Inventory,
    wanted: impl Fn(&Node) -> bool,
) -> Result<()> {
    for (i, node) in inv.nodes.nodes.iter().enumerate() {
        if !wanted(node) {
            continue;
        }

        let b = &node.bmc;
        let at = format!("nodes[{i}]");
        inputs.setting(&format!("{at}.hostname"), &node.hostname);
        inputs.setting(&format!("{at}.bmc.address"), &b.address);
        inputs.setting(&format!("{at}.bmc.trust"), &checks::trust_label(node));
        inputs.setting(
            &format!("{at}.bmc.systemUUID"),
            b.system_uuid.as_deref().unwrap_or(""),
        );
        inputs.setting(&format!("{at}.macs"), &macs(node).join(","));
        if let Some(v) = b.vendor {
            // Only when set, so runs from before the setting keep their inputs.
            inputs.setting(&format!("{at}.bmc.vendor"), v.as_str());
        }
        if let Some(c) = &b.credentials {
            inputs.secret(&format!("{at}.bmc.credentials"), inv, c)?;
        }
        if let Some(ca) = &b.ca {
            inputs.file(format!("inventory:{}", ca.file), &inv.resolve(&ca.file))?;
        }
    }
    let boot = &inv.site.boot;
    inputs.setting("boot.isoURL", boot.iso_url.as_deref().unwrap_or(""));
    let server = boot.iso_server.as_ref();
    inputs.setting(
        "boot.isoServer.listen",
        server.map_or("", |s| s.listen.as_str()),
    );
    inputs.setting(
        "boot.isoServer.advertise",
        server.and_then(|s| s.advertise.as_deref()).unwrap_or(""),
    );
    if let Some(tls) = server.and_then(|s| s.tls.as_ref()) {
        inputs.file(
            format!("inventory:{}", tls.certificate.file),
            &inv.resolve(&tls.certificate.file),
        )?;
    }
    Ok(())
}

/// Nodes worked on at once (booted here, their media ejected after the install):
/// `boot.parallel`, else [`DEFAULT_PARALLEL`].
pub(super) fn parallel(inv: &Inventory) -> usize {
    inv.site.boot.parallel.unwrap_or(DEFAULT_PARALLEL).max(1) as usize
}

fn nodes(n: usize) -> &'static str {
    if n == 1 {
        "node"
    } else {
        "nodes"
    }
}

/// Each node's calls and outcome into the log and `NODE.json`, where the ISO was served into
/// `boot.json`; an error naming every node that failed.
pub(super) fn record(
    stage: super::Stage,
    results: &[NodeResult],
    source: &IsoSource,
    out: &Path,
    log: &mut StageLog,
) -> Result<()> {
    fs_err::create_dir_all(out)?;
    let mut failed = Vec::new();
    for r in results {
        for call in &r.calls {
            let status = call
                .status
                .map_or("no answer".to_string(), |s| s.to_string());
            log.line(&format!(
                "{}: {} {} -> {status}",
                r.node, call.method, call.path
            ))?;
        }
        log.line(&format!("{}: {}", r.node, r.outcome))?;
        let bytes = serde_json::to_vec_pretty(r)?;
        crate::fs::write_atomic(&out.join(format!("{}.json", r.node)), &bytes)?;
        if let Some(e) = &r.error {
            failed.push(format!("{} (BMC {}): {e}", r.node, r.bmc));
        }
    }
    crate::fs::write_atomic(&out.join(BOOT_FILE), &serde_json::to_vec_pretty(source)?)?;
    if !failed.is_empty() {
        bail!(
            "{} of {} nodes failed to boot: {}; the others went on ({} has each node's steps and BMC calls)",
            failed.len(),
            results.len(),
            failed.join("; "),
            RunDir::log_name(stage.name())
        );
    }
    Ok(())
}

/// The stage's one line: how many nodes booted, from where, and any BMC not verified.
pub(super) fn detail(results: &[NodeResult], source: &IsoSource) -> String {
    let booted = results.iter().filter(|r| r.reset.is_some()).count();
    let earlier = results.len() - booted;
    let unverified: Vec<&str> = results
        .iter()
        .filter(|r| r.trust.starts_with("NOT VERIFIED"))
        .map(|r| r.node.as_str())
        .collect();
    let warning = match unverified.is_empty() {
        true => String::new(),
        false => format!("; BMC TLS NOT VERIFIED for {}", unverified.join(", ")),
    };
    let detail = match earlier {
        0 => format!("{booted} {} booted from {}", nodes(booted), source.url),
        _ => format!(
            "{booted} {} booted, {earlier} booted earlier and left alone, from {}",
            nodes(booted),
            source.url
        ),
    };
    detail + &warning
}

/// Each node's BMC address, when it is an IP (or resolves to one) that no other node's BMC
/// has: the ISO server's reads from it are that node's.
async fn own_bmc_ips(plans: &[NodePlan]) -> BTreeMap<String, IpAddr> {
    let mut found: Vec<(String, IpAddr)> = Vec::new();
    for p in plans {
        let Ok(url) = reqwest::Url::parse(&p.target.endpoint.address) else {
            continue;
        };
        let Some(host) = url.host_str() else {
            continue;
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let ip = match host.parse::<IpAddr>() {
            Ok(ip) => Some(ip),
            Err(_) => {
                let port = url.port_or_known_default().unwrap_or(443);
                tokio::net::lookup_host((host, port))
                    .await
                    .ok()
                    .and_then(|mut a| a.next())
                    .map(|a| a.ip())
            }
        };
        if let Some(ip) = ip {
            found.push((p.name.clone(), ip));
        }
    }
    found
        .iter()
        .filter(|(_, ip)| found.iter().filter(|(_, other)| other == ip).count() == 1)
        .cloned()
        .collect()
}

/// The rendezvous host of the inventory: the node with the rendezvous IP among its addresses.
fn rendezvous_node(inv: &Inventory) -> Option<(String, IpAddr)> {
    let ip: IpAddr = inv.site.cluster.rendezvous_ip.parse().ok()?;
    inv.nodes
        .nodes
        .iter()
        .find(|n| n.ips().contains(&ip))
        .map(|n| (n.hostname.clone(), ip))
}

/// Waits for the sign that each node booted the ISO ([`super::evidence`]): every node reset in
/// this run, and every node an earlier run reset whose ledger has no sign yet; a node whose
/// ledger says it booted something else is said to again. Each verdict goes into the node's
/// result and ledger: a node without the sign fails.
async fn prove_boots(
    cx: &StageContext,
    inv: &Inventory,
    registrations: Registrations,
    reads: Option<IsoReads>,
    bmc_ips: &BTreeMap<String, IpAddr>,
    results: &mut [NodeResult],
    lines: &NodeLines,
) {
    let node0 = rendezvous_node(inv);
    let stage_start = (std::time::SystemTime::now(), std::time::Instant::now());
    let mut watched = Vec::new();
    for r in results.iter_mut() {
        if r.error.is_some() {
            continue;
        }
        let since = match (&r.reset_sent, &r.earlier) {
            (Some(sent), _) => *sent,
            (None, Some((Some(evidence), _))) => {
                r.evidence = Some(format!("{evidence} (an earlier run)"));
                continue;
            }
            (None, Some((None, Some(something_else)))) => {
                let e = format!("an earlier run found it {something_else}");
                lines.set(&r.node, &e);
                r.error = Some(e);
                continue;
            }
            (None, _) => stage_start,
        };
        watched.push(Watched {
            node: r.node.clone(),
            bmc_ip: bmc_ips.get(&r.node).copied(),
            since: since.0,
            started: since.1,
            profile: r.profile.clone(),
            rendezvous: node0.as_ref().is_some_and(|(n, _)| n == &r.node),
        });
    }
    if watched.is_empty() {
        return;
    }
    // A node reset again (`--reboot`) after the install: the rendezvous host is gone for good,
    // so no agent can be seen. Said so, and not waited for.
    let installed = cx.run.root().join(WAIT_DIR).join(WAIT_FILE);
    if installed.is_file() {
        for r in results.iter_mut() {
            if watched.iter().any(|w| w.node == r.node) {
                let note = format!(
                    "reset; not confirmed: the cluster is installed ({}), so no rendezvous host can show its agent: check the node's console",
                    installed.display()
                );
                lines.set(&r.node, &note);
                r.outcome = note;
            }
        }
        return;
    }
    let down = node0.as_ref().and_then(|(n, _)| {
        results
            .iter()
            .find(|r| &r.node == n)
            .filter(|r| r.error.is_some())
            .map(|r| r.node.clone())
    });
    let sources = Sources {
        rest: registrations,
        rendezvous: node0.as_ref().map(|(_, ip)| *ip),
        reads,
    };
    let verdicts = await_boots(
        &watched,
        &sources,
        cx.wait_limits.boot,
        super::wait::poll_interval(),
        down.as_deref(),
        lines,
        &cx.cancel,
    )
    .await;
    for r in results.iter_mut() {
        let Some(verdict) = verdicts.get(&r.node) else {
            continue;
        };
        let path = cx.run.boot_ledger(&r.node);
        let mut ledger = read_ledger(&path).unwrap_or_default();
        match verdict {
            Verdict::Booted(how) => {
                r.evidence = Some(how.clone());
                r.outcome = format!("booted the ISO: {how}");
                ledger.evidence = Some(how.clone());
                ledger.something_else = None;
            }
            Verdict::SomethingElse(why) => {
                lines.set(&r.node, "booted something else");
                r.outcome = "no sign of the ISO".to_string();
                r.error = Some(why.clone());
                ledger.something_else = Some(why.clone());
            }
            Verdict::Unconfirmed(why) => {
                lines.set(&r.node, format!("not confirmed: {why}"));
                r.error = Some(format!("not confirmed to have booted the ISO: {why}"));
                continue;
            }
        }
        if let Err(e) = write_ledger(&path, &ledger) {
            r.error = Some(format!("{e:#}"));
        }
    }
}

/// The rendezvous host's API with the installer's watcher token, from the iso stage's work
/// folder.
fn rendezvous_client(work: &InstallerDir) -> Result<crate::openshift::assisted::Client> {
    let ip_file = work.rendezvous_ip();
    let ip: IpAddr = fs_err::read_to_string(&ip_file)?
        .trim()
        .parse()
        .with_context(|| format!("{}: not an IP address", ip_file.display()))?;
    let token = crate::openshift::watch::watcher_token(&work.state())?;
    crate::openshift::assisted::Client::rendezvous(ip, token)
}

/// `--reboot` names only nodes of the inventory.
pub(super) fn check_reboot_names(inv: &Inventory, reboot: &[String]) -> Result<()> {
    let known: BTreeSet<&str> = inv
        .nodes
        .nodes
        .iter()
        .map(|n| n.hostname.as_str())
        .collect();
    for name in reboot {
        if !known.contains(name.as_str()) {
            bail!(
                "--reboot {name}: no such node in the inventory; the nodes are {}",
                known.iter().copied().collect::<Vec<_>>().join(", ")
            );
        }
    }
    Ok(())
}

/// The inventory's MAC addresses of a node, lower-cased.
fn macs(node: &Node) -> Vec<String> {
    node.nics
        .iter()
        .map(|n| n.mac.to_ascii_lowercase())
        .collect()
}

/// What the stage will do to one node: its BMC as the preflight checks it, and whether
/// `--reboot` names it.
pub(super) struct NodePlan {
    pub(super) name: String,
    target: BmcTarget,
    reboot: bool,
}

/// Every node's plan; an unreadable credential or CA names the node and field.
pub(super) fn plan(inv: &Inventory, reboot: &[String]) -> Result<Vec<NodePlan>> {
    Ok(checks::targets(inv)?
        .into_iter()
        .map(|target| NodePlan {
            name: target.node.clone(),
            reboot: reboot.contains(&target.node),
            target,
        })
        .collect())
}

/// The preflight's ISO-server check on the URL the BMCs are given: an address no BMC can
/// reach stops the stage before any BMC is touched.
pub(super) fn check_reach(
    source: &IsoSource,
    plans: &[NodePlan],
    log: &mut StageLog,
) -> Result<()> {
    let Some(host) = reqwest::Url::parse(&source.url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
    else {
        return Ok(());
    };
    let targets = plans.iter().map(|p| &p.target);
    let check = crate::preflight::site::iso_reach(&host, targets, &source.url);
    log.line(&format!("ISO server: {}", check.detail))?;
    if check.status == Status::Fail {
        bail!(
            "the BMCs cannot fetch the ISO from {}: {}; {} (bootstrap preflight checks this too)",
            source.url,
            check.detail,
            check.fix.unwrap_or_default()
        );
    }
    Ok(())
}

/// A node's entry in the ledger: what was sent to it, kept across runs and attempts.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Ledger {
    /// When the reset was about to be sent (written before it is).
    reset_requested_at: Option<String>,
    /// When the node, found on, was powered off and read Off (the first half of its restart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    powered_off_at: Option<String>,
    /// Which reset, once the BMC accepted it.
    reset: Option<String>,
    /// When the BMC accepted it.
    reset_at: Option<String>,
    /// The ISO (sha256) it was booted from.
    iso_sha256: Option<String>,
    /// How many times bootstrap reset it (1, or more after `--reboot`).
    resets: u32,
    /// What showed that its last reset booted the ISO ([`super::evidence`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    evidence: Option<String>,
    /// Its last reset showed no sign of the ISO within the bound: what was said (a later run
    /// says it again, until `--reboot` resets it once more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    something_else: Option<String>,
}

/// One node's result, `RUN/boot/NODE.json`.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeResult {
    /// The node.
    pub node: String,
    /// Its BMC (the address, no credentials).
    pub bmc: String,
    /// How its certificate is trusted.
    pub trust: String,
    /// `session`, `basic` or `none`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<String>,
    /// The system as the BMC describes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system: Option<redfish::SystemInfo>,
    /// The MAC addresses the BMC reports.
    pub bmc_macs: Vec<String>,
    /// Vendor, model, firmware and the profile the boot followed, in one line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vendor: Option<String>,
    /// The vendor profile the boot followed, and what the BMC said it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<redfish::Profile>,
    /// The image the CD holds after the stage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub media: Option<String>,
    /// The reset this run sent, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reset: Option<String>,
    /// How often bootstrap has reset this node in all.
    pub resets: u32,
    /// What showed that it booted the ISO (its agent at the rendezvous host, or its BMC
    /// reading the ISO after the reset).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
    /// The last step reached, or what was found.
    pub outcome: String,
    /// Why it failed, in the BMC's words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Every call made to the BMC.
    pub calls: Vec<redfish::Call>,
    /// When this run decided to reset it (the wall clock for the ISO server's reads, the
    /// monotonic one for the bound).
    #[serde(skip)]
    reset_sent: Option<(std::time::SystemTime, std::time::Instant)>,
    /// What the ledger says of an earlier run's reset left alone: its evidence, or that it
    /// booted something else.
    #[serde(skip)]
    earlier: Option<(Option<String>, Option<String>)>,
}

/// Every node booted, at most `parallel` at once, each with its ledger entry in `run`; one
/// result per node, in the plans' order.
pub(super) async fn boot_all(
    plans: Vec<NodePlan>,
    source: &IsoSource,
    run: &RunDir,
    lines: &NodeLines,
    parallel: usize,
    cancel: Arc<std::sync::atomic::AtomicBool>,
) -> Vec<NodeResult> {
    let gate = Arc::new(tokio::sync::Semaphore::new(parallel));
    let mut tasks = tokio::task::JoinSet::new();
    for (index, plan) in plans.into_iter().enumerate() {
        let gate = gate.clone();
        let source = source.clone();
        let ledger = run.boot_ledger(&plan.name);
        let lines = lines.clone();
        let cancel = cancel.clone();
        tasks.spawn(async move {
            let _permit = gate.acquire_owned().await;
            let mut result = NodeResult {
                node: plan.name.clone(),
                bmc: crate::secret::redact_url(&plan.target.endpoint.address),
                trust: plan.target.trust.clone(),
                ..Default::default()
            };
            if cancel.load(std::sync::atomic::Ordering::SeqCst) {
                result.outcome = "not started: the run was interrupted".to_string();
                result.error = Some(result.outcome.clone());
                return (index, result);
            }
            if let Err(e) = boot_node(&plan, &source, &ledger, &lines, &mut result).await {
                let message = format!("{e:#}");
                lines.set(
                    &plan.name,
                    format!("FAILED at {}: {message}", result.outcome),
                );
                result.error = Some(message);
            }
            (index, result)
        });
    }
    super::in_node_order(tasks, |why| NodeResult {
        node: "?".to_string(),
        error: Some(why),
        ..Default::default()
    })
    .await
}

/// One node, step by step; `result.outcome` is the last step reached.
async fn boot_node(
    plan: &NodePlan,
    source: &IsoSource,
    ledger_path: &Path,
    lines: &NodeLines,
    result: &mut NodeResult,
) -> Result<()> {
    let name = &plan.name;
    result.outcome = "reading its ledger".to_string();
    let mut ledger = match read_ledger(ledger_path) {
        Ok(ledger) => ledger,
        // Asked for by name, once the engineer has checked the node: the entry is written anew.
        Err(e) if plan.reboot => {
            tracing::warn!(node = %name, "--reboot: replacing an unreadable ledger entry ({e:#})");
            Ledger::default()
        }
        Err(e) => return Err(e),
    };
    result.resets = ledger.resets;
    step(result, lines, name, "connecting");
    let client = Client::connect(&plan.target.endpoint, redfish::Options::default()).await?;
    let outcome = on_node(
        plan,
        source,
        ledger_path,
        &mut ledger,
        lines,
        result,
        &client,
    )
    .await;
    result.calls = client.calls();
    client.logout().await;
    outcome
}

/// A connected node: checked to be the one meant, then left alone when an earlier run reset
/// it (unless `--reboot` names it), else booted from the ISO with its reset in the ledger
/// before it is sent.
async fn on_node(
    plan: &NodePlan,
    source: &IsoSource,
    ledger_path: &Path,
    ledger: &mut Ledger,
    lines: &NodeLines,
    result: &mut NodeResult,
    client: &Client,
) -> Result<()> {
    let name = &plan.name;
    result.auth = Some(client.auth_kind().to_string());
    step(result, lines, name, "connected");
    // The preflight's checks, on this client, read-only: the node meant, its vendor profile
    // (chosen before anything changes, and recorded even for a node left alone), its virtual
    // CD there.
    let mut seen = checks::Inspection::default();
    let checked =
        checks::inspect(client, &plan.target.identity, plan.target.vendor, &mut seen).await;
    if let Some(found) = &seen.found {
        result.bmc_macs = found.macs.clone();
        result.system = Some(found.system.clone());
    }
    if let Some(profile) = &seen.profile {
        result.vendor = Some(profile.summary());
        result.profile = Some(profile.clone());
    }
    checked?;
    let (Some(found), Some(profile)) = (seen.found, seen.profile) else {
        bail!("the BMC's system was not read");
    };
    step(result, lines, name, "checked");
    let interrupted_off = ledger.reset_requested_at.is_some()
        && ledger.reset.is_none()
        && ledger.powered_off_at.is_some()
        && found.system.power_state.as_deref() == Some("Off");
    if interrupted_off && !plan.reboot {
        // A run killed between the power-off and the power-on of this node's one reset: the
        // node is off, so powering it on completes that reset and reboots nothing.
        let mut steps = NodeSteps {
            name,
            source,
            ledger_path,
            ledger,
            lines,
            result,
        };
        self::step(
            steps.result,
            lines,
            name,
            "completing the reset an earlier run began (powered off, not yet on)",
        );
        if let Some(now) = client.finish_boot(&found.system, &mut steps).await? {
            result.system = Some(now);
        }
        return Ok(());
    }
    if ledger.reset_requested_at.is_some() && !plan.reboot {
        let outcome = left_alone(ledger, &found.system, source, name);
        result.earlier = Some((ledger.evidence.clone(), ledger.something_else.clone()));
        step(result, lines, name, &outcome);
        return Ok(());
    }
    let mut steps = NodeSteps {
        name,
        source,
        ledger_path,
        ledger,
        lines,
        result,
    };
    if let Some(now) = client
        .boot_from_cd(&found.system, &source.url, &profile, &mut steps)
        .await?
    {
        result.system = Some(now);
    }
    Ok(())
}

/// What is said of a node an earlier run reset, which this run leaves alone.
fn left_alone(ledger: &Ledger, system: &SystemInfo, source: &IsoSource, name: &str) -> String {
    let power = system.power_state.as_deref().unwrap_or("unknown");
    let when = ledger
        .reset_at
        .as_deref()
        .or(ledger.reset_requested_at.as_deref())
        .unwrap_or_default();
    let older = ledger
        .iso_sha256
        .as_deref()
        .is_some_and(|s| s != source.sha256);
    let mut outcome = format!("booted earlier (reset {when}), power {power}: left alone");
    if older {
        outcome.push_str(&format!(
            "; it booted an older ISO: --reboot {name} boots it from this one"
        ));
    } else if ledger.reset.is_none() {
        outcome.push_str(&format!(
            "; the reset was sent but not confirmed: check the node, --reboot {name} resets it again"
        ));
    }
    outcome
}

/// The boot's steps as the stage records them: the node's live line and result, and its
/// ledger around the reset.
struct NodeSteps<'a> {
    name: &'a str,
    source: &'a IsoSource,
    ledger_path: &'a Path,
    ledger: &'a mut Ledger,
    lines: &'a NodeLines,
    result: &'a mut NodeResult,
}

impl BootSteps for NodeSteps<'_> {
    fn resetting(&mut self) -> Result<(), String> {
        // Entered before it is sent: a run killed in between never resets the node again
        // unasked.
        self.ledger.reset_requested_at = Some(crate::install::state::now());
        self.ledger.powered_off_at = None;
        self.ledger.evidence = None;
        self.ledger.something_else = None;
        self.result.reset_sent = Some((std::time::SystemTime::now(), std::time::Instant::now()));
        self.ledger.reset = None;
        self.ledger.iso_sha256 = Some(self.source.sha256.clone());
        write_ledger(self.ledger_path, self.ledger).map_err(|e| format!("{e:#}"))
    }

    fn reached(&mut self, step: BootStep) -> Result<(), String> {
        match step {
            BootStep::MediaInserted => self.result.media = Some(self.source.url.clone()),
            BootStep::PoweredOff => {
                self.ledger.powered_off_at = Some(crate::install::state::now());
                write_ledger(self.ledger_path, self.ledger).map_err(|e| format!("{e:#}"))?;
            }
            BootStep::Reset(kind) => {
                let kind = match self.ledger.powered_off_at {
                    Some(_) => format!("ForceOff, then {kind}"),
                    None => kind.to_string(),
                };
                self.ledger.reset = Some(kind.clone());
                self.ledger.reset_at = Some(crate::install::state::now());
                self.ledger.resets += 1;
                write_ledger(self.ledger_path, self.ledger).map_err(|e| format!("{e:#}"))?;
                self.result.reset = Some(kind);
                self.result.resets = self.ledger.resets;
            }
            BootStep::BootSet | BootStep::PoweredOn => {}
        }
        self::step(self.result, self.lines, self.name, &step.to_string());
        Ok(())
    }
}

fn step(result: &mut NodeResult, lines: &NodeLines, name: &str, what: &str) {
    result.outcome = what.to_string();
    lines.set(name, what);
}

/// A node's ledger entry, empty when there is none yet. One that cannot be read fails the
/// node: taking it for "never reset" would reset the node again.
fn read_ledger(path: &Path) -> Result<Ledger> {
    let bytes = match fs_err::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Ledger::default()),
        Err(e) => return Err(e).context("reading the boot ledger"),
    };
    serde_json::from_slice(&bytes).with_context(|| {
        format!(
            "the boot ledger {} is not what bootstrap writes, so whether this node was reset is unknown and nothing was sent to it: check the node, then give --reboot NODE to boot it again",
            path.display()
        )
    })
}

fn write_ledger(path: &Path, ledger: &Ledger) -> Result<()> {
    if let Some(dir) = path.parent() {
        fs_err::create_dir_all(dir)?;
    }
    crate::fs::write_atomic(path, &serde_json::to_vec_pretty(ledger)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ledger that is there but unreadable fails the node instead of being taken for "never
    /// reset", which would reset the node a second time; a missing one is an empty ledger.
    #[test]
    fn an_unreadable_ledger_fails_the_node_rather_than_resetting_it_again() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("master-0.json");
        assert_eq!(read_ledger(&path).unwrap().resets, 0);
        fs_err::write(&path, "{\"resets\": 1, \"resetRequestedAt\": \"2026-01").unwrap();
        let e = read_ledger(&path).unwrap_err();
        assert!(
            e.to_string().contains("is not what bootstrap writes"),
            "{e:#}"
        );
        fs_err::write(
            &path,
            "{\"resets\": 1, \"resetRequestedAt\": \"2026-01-01T00:00:00Z\"}",
        )
        .unwrap();
        let read = read_ledger(&path).unwrap();
        assert_eq!(
            (read.resets, read.reset_requested_at.as_deref()),
            (1, Some("2026-01-01T00:00:00Z"))
        );
    }
}
