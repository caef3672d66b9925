//! add-join: the nodes added join the cluster. What `oc adm node-image monitor` watches
//! (installer `pkg/agent/monitoraddnodes.go`: the first CSR pending, the second, the Node
//! joined, Ready), with the approvals a cluster without Machines leaves to a person (installer
//! `docs/user/agent/add-node/add-nodes.md`): each pass reads the Nodes and CSRs and approves a
//! kubelet CSR only when it names a node being added with that node's inventory addresses
//! ([`crate::openshift::csr::judge`], cluster-machine-approver's checks); any other pending
//! kubelet CSR is left pending and reported. A node is joined when its Node is Ready and its
//! serving CSR was approved (or none of its CSRs is pending for a minute after Ready: someone
//! approved it by hand). The bound is the install limit (`--install-timeout`) from the stage's
//! start; a node without any CSR by then did not boot the node ISO or did not install.

use super::super::{Inputs, IsoServer, Stage, StageContext, StageWork};
use super::{note, published_plan};
use crate::install::log::StageLog;
use crate::install::rundir::{ADD_BOOT_DIR, ADD_IMAGE_DIR, ADD_JOIN_DIR, JOIN_FILE};
use crate::openshift::csr::{Joining, Kind};
use crate::openshift::join::{Join, NodeState};
use crate::output::NodeLines;
use anyhow::{bail, Result};
use serde::Serialize;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;
use std::time::{Duration, Instant};

/// Passes that fail in a row before the stage gives up (each pass already retries transient
/// answers).
const FAILED_PASSES: u32 = 10;
/// How long a Ready node with nothing pending waits for a serving CSR before it counts as
/// joined (its serving certificate approved by someone else).
const SERVING_GRACE: Duration = Duration::from_secs(60);

/// The add-join stage.
pub struct AddJoin;

impl StageWork for AddJoin {
    fn inputs(&self, cx: &StageContext) -> Result<Inputs> {
        let mut inputs = Inputs::default();
        inputs.run_files(&cx.run, ADD_BOOT_DIR)?;
        inputs.run_file(
            &cx.run,
            &cx.run
                .root()
                .join(ADD_IMAGE_DIR)
                .join(crate::install::rundir::ADD_PLAN_FILE),
        )?;
        inputs.run_file(&cx.run, &cx.run.installer().kubeconfig())?;
        inputs.nodes(&cx.inventory, &super::beyond_installed(cx)?)?;
        if !cx.insecure_api.is_empty() {
            inputs.setting("insecureApi", &cx.insecure_api.join(","));
        }
        Ok(inputs)
    }

    fn output_dir(&self) -> Option<&'static str> {
        Some(ADD_JOIN_DIR)
    }

    fn run(
        &self,
        cx: &StageContext,
        iso: &mut IsoServer,
        out: &Path,
        log: &mut StageLog,
    ) -> Result<String> {
        fs_err::create_dir_all(out)?;
        let plan = published_plan(&cx.run)?;
        if plan.added.is_empty() {
            return Ok(super::nothing_to_add(&plan));
        }
        let inv = super::super::only(cx.inventory()?, &plan.added);
        let handle = tokio::runtime::Handle::current();
        // The BMCs read the node ISO while their nodes install: a resumed run serves it again.
        if let Some(url) = handle.block_on(super::super::served::serve_node_iso_again(cx, iso))? {
            log.line(&format!("serving the node ISO again at {url}"))?;
        }
        let domain = format!("{}.{}", inv.site.cluster.name, inv.site.cluster.base_domain);
        let joining: Vec<Joining> = inv
            .nodes
            .nodes
            .iter()
            .map(|n| Joining {
                hostname: n.hostname.clone(),
                fqdn: Some(format!("{}.{domain}", n.hostname)),
                addresses: n.ips(),
            })
            .collect();
        let lines = NodeLines::new(Stage::AddJoin.name(), &plan.added);
        let result = handle.block_on(watch(cx, &joining, &lines, log));
        lines.finish();
        let report = result?;
        crate::fs::write_json(&out.join(JOIN_FILE), &report)?;
        let approved = report
            .nodes
            .values()
            .map(|n| n.approved.len())
            .sum::<usize>();
        let mut detail = format!(
            "{} Ready, {approved} CSR{} approved",
            plan.added.join(", "),
            if approved == 1 { "" } else { "s" }
        );
        if !report.left.is_empty() {
            detail.push_str(&format!(
                "; {} left pending: {}",
                report.left.len(),
                left_words(&report.left)
            ));
        }
        Ok(detail)
    }
}

/// What add-join saw and did (`RUN/add-join/join.json`).
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    /// Each node added.
    nodes: BTreeMap<String, Joined>,
    /// The kubelet CSRs left pending at the end, with the node they name and why.
    left: Vec<Left>,
}

/// One node added.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct Joined {
    /// The CSRs approved in this run: (name, client or serving).
    approved: Vec<(String, Kind)>,
    /// Its Node's InternalIP addresses.
    internal_ips: Vec<IpAddr>,
    /// When its Node was first seen Ready in this run.
    ready_at: Option<String>,
}

/// A CSR left pending.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
struct Left {
    csr: String,
    node: Option<String>,
    why: String,
}

fn left_words(left: &[Left]) -> String {
    left.iter()
        .map(|l| match &l.node {
            Some(n) => format!("{} (names {n}: {})", l.csr, l.why),
            None => format!("{} ({})", l.csr, l.why),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Per node while watching.
#[derive(Default)]
struct Watching {
    serving_approved: bool,
    ready_since: Option<Instant>,
    done: bool,
}

/// Passes every poll until every node joined, the bound passed or the run was interrupted.
async fn watch(
    cx: &StageContext,
    joining: &[Joining],
    lines: &NodeLines,
    log: &mut StageLog,
) -> Result<Report> {
    let connected = cx.cluster_api().await?;
    log.line(&format!("the cluster API: {}", connected.trust.label()))?;
    let join = Join::new(connected);
    let poll = super::super::wait::poll_interval();
    let bound = cx.wait_limits.install;
    let start = Instant::now();
    let mut report = Report::default();
    let mut state: BTreeMap<String, Watching> = BTreeMap::new();
    for j in joining {
        report.nodes.insert(j.hostname.clone(), Joined::default());
        // A rerun after the serving CSR was approved: the ledger says so.
        let earlier = super::read_added(&cx.run.added_ledger(&j.hostname))
            .ok()
            .flatten()
            .is_some_and(|a| a.reached(Stage::AddJoin.name(), SERVING_STEP));
        state.insert(
            j.hostname.clone(),
            Watching {
                serving_approved: earlier,
                ..Default::default()
            },
        );
        lines.set(
            &j.hostname,
            "waiting for its kubelet's first CSR (the node installs from the node ISO first)",
        );
    }
    let mut failures = 0;
    let mut last_left: Vec<Left> = Vec::new();
    loop {
        if cx.cancelled() {
            bail!("interrupted while the nodes joined");
        }
        let now = crate::install::state::now();
        let pass = match join.pass(joining, &now).await {
            Ok(p) => {
                failures = 0;
                p
            }
            Err(e) => {
                failures += 1;
                log.line(&format!(
                    "reading the cluster failed ({failures} in a row): {e:#}"
                ))?;
                if failures >= FAILED_PASSES {
                    return Err(e.context(format!(
                        "the cluster API failed {FAILED_PASSES} passes in a row"
                    )));
                }
                tokio::time::sleep(poll).await;
                continue;
            }
        };
        for (csr, node, kind) in &pass.approved {
            let step = match kind {
                Kind::Client => CLIENT_STEP,
                Kind::Serving => SERVING_STEP,
            };
            log.line(&format!("{node}: approved {kind:?} CSR {csr}"))?;
            lines.set(node, format!("{step} ({csr})"));
            note(&cx.run, node, Stage::AddJoin, step, None)?;
            if let Some(j) = report.nodes.get_mut(node) {
                j.approved.push((csr.clone(), *kind));
            }
            if *kind == Kind::Serving {
                if let Some(w) = state.get_mut(node) {
                    w.serving_approved = true;
                }
            }
        }
        let left: Vec<Left> = pass
            .left
            .iter()
            .map(|(csr, node, why)| Left {
                csr: csr.clone(),
                node: node.clone(),
                why: why.clone(),
            })
            .collect();
        for l in left.iter().filter(|l| !last_left.contains(l)) {
            log.line(&format!(
                "left pending: {}",
                left_words(std::slice::from_ref(l))
            ))?;
        }
        last_left = left;
        for j in joining {
            let name = &j.hostname;
            let w = state.get_mut(name).expect("every node watched");
            if w.done {
                continue;
            }
            let pending_own = last_left.iter().any(|l| l.node.as_deref() == Some(name));
            match pass.nodes.get(name) {
                None => {}
                Some(NodeState { ready: false, .. }) => {
                    lines.set(name, "its Node registered, not Ready yet");
                    w.ready_since = None;
                }
                Some(n @ NodeState { ready: true, .. }) => {
                    let since = *w.ready_since.get_or_insert_with(Instant::now);
                    if let Some(j) = report.nodes.get_mut(name) {
                        j.internal_ips = n.internal_ips.clone();
                        j.ready_at.get_or_insert_with(|| now.clone());
                    }
                    if w.serving_approved || (!pending_own && since.elapsed() >= SERVING_GRACE) {
                        w.done = true;
                        lines.set(name, "joined: Node Ready, its CSRs approved");
                        note(&cx.run, name, Stage::AddJoin, JOINED_STEP, None)?;
                        log.line(&format!("{name}: Node Ready, joined"))?;
                    } else {
                        lines.set(name, "Node Ready; waiting for its serving CSR");
                    }
                }
            }
        }
        if state.values().all(|w| w.done) {
            report.left = last_left;
            return Ok(report);
        }
        if start.elapsed() >= bound {
            let mut why = Vec::new();
            for j in joining {
                let name = &j.hostname;
                if state[name].done {
                    continue;
                }
                let seen = match pass.nodes.get(name) {
                    None if !report.nodes[name].approved.is_empty() => {
                        "its client CSR was approved but no Node registered".to_string()
                    }
                    None => format!(
                        "no CSR of its kubelet: it did not boot the node ISO or did not \
                         install (check its console; {} has its BMC calls)",
                        crate::install::rundir::RunDir::log_name(Stage::AddBoot.name())
                    ),
                    Some(n) if !n.ready => "its Node never became Ready".to_string(),
                    Some(_) => "Ready, but its serving CSR was never approved".to_string(),
                };
                note(&cx.run, name, Stage::AddJoin, "not joined", Some(&seen))?;
                why.push(format!("{name}: {seen}"));
            }
            let mut message = format!(
                "{} of {} nodes did not join within {}: {}",
                why.len(),
                joining.len(),
                crate::output::human_duration(bound),
                why.join("; ")
            );
            if !last_left.is_empty() {
                message.push_str(&format!("; left pending: {}", left_words(&last_left)));
            }
            bail!(message);
        }
        tokio::time::sleep(poll).await;
    }
}

/// The ledger steps of add-join.
const CLIENT_STEP: &str = "client CSR approved";
const SERVING_STEP: &str = "serving CSR approved";
/// The step of a node that joined.
pub(super) const JOINED_STEP: &str = "joined: Node Ready";
