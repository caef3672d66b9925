//! The prep stage: host prep over SSH once the install is complete ([`crate::hostprep::prep`],
//! as `bootstrap prep` runs it): every node reached as `prep.ssh` says (host keys learned into
//! `RUN/ledger/known_hosts` on first contact, refused if they change), its hardware facts read and
//! checked against the inventory, then the inventory's `prep.playbooks`. One live line per
//! node; the task lines, every finding and each playbook's recap go to `logs/prep.log`.
//!
//! Once every node passed, the nodes' `labels` and `taints` of nodes.yaml go on their Nodes
//! ([`label_nodes`]; the cluster API is not contacted when no node has any).
//!
//! Outputs (`RUN/prep/`, [`rundir::prep_files`]): `facts/NODE.json`, `NODE.json` (the node's
//! verdict), `prep.json`, `ansible-inventory.yaml`, `pinned_known_hosts` and `labels.json`.
//! The stage fails when a node is unreachable, has a hardware problem or fails a playbook,
//! naming each such node.

use super::{Inputs, IsoServer, Stage, StageContext, StageWork};
use crate::hostprep::hosts;
use crate::hostprep::prep::{self, PrepOptions, PrepRun};
use crate::install::log::StageLog;
use crate::install::rundir::{self, RunDir, PREP_DIR, STAGING_DIR, WAIT_DIR};
use crate::inventory::Inventory;
use crate::output::NodeLines;
use anyhow::{anyhow, bail, Result};
use futures_util::StreamExt as _;
use std::path::Path;
use std::time::Duration;

/// How long a node that does not answer is tried again: after the install the machine-config
/// daemon may still be rebooting nodes one by one.
const REACHABLE_WITHIN: Duration = Duration::from_secs(15 * 60);

/// The prep stage.
pub struct Prep;

impl StageWork for Prep {
    fn inputs(&self, cx: &StageContext) -> Result<Inputs> {
        let mut inputs = Inputs::default();
        inputs.run_files(&cx.run, WAIT_DIR)?;
        // Read first: an inventory that does not load fails the inputs, naming it.
        cx.inventory()?;
        // The installed nodes' entries only: nodes added on day two are add-prep's.
        inputs.file("inventory:site.yaml", &cx.inventory.join("site.yaml"))?;
        super::installed_inputs(&mut inputs, cx)?;
        prep_inputs(&mut inputs, cx)?;
        Ok(inputs)
    }

    fn output_dir(&self) -> Option<&'static str> {
        Some(PREP_DIR)
    }

    fn run(
        &self,
        cx: &StageContext,
        _iso: &mut IsoServer,
        out: &Path,
        log: &mut StageLog,
    ) -> Result<String> {
        let mut inv = cx.inventory()?;
        // The installed nodes (all of them in a run directory that cannot tell): the nodes
        // added on day two are add-prep's.
        if let Ok(installed) = super::installed_nodes(&cx.run) {
            inv = super::only(inv, &installed);
        }
        let prepped = prep_nodes(cx, &inv, Stage::Prep, out, log)?;
        match label_nodes(cx, &inv, out, log)? {
            0 => Ok(prepped),
            n => Ok(format!(
                "{prepped}; labels and taints on {n} node{}",
                if n == 1 { "" } else { "s" }
            )),
        }
    }

    fn secrets(&self, cx: &StageContext) -> Vec<String> {
        super::inputs::inventory_secrets(&cx.inventory)
    }
}

/// What host prep and the labels depend on besides the nodes: the login key, the playbooks,
/// the API hosts allowed insecure.
pub(super) fn prep_inputs(inputs: &mut Inputs, cx: &StageContext) -> Result<()> {
    let inv = cx.inventory()?;
    if let Some(key) = &inv.site.prep.ssh.private_key {
        inputs.file("secret:prep.ssh.privateKey", &inv.resolve(&key.file))?;
    }
    for p in &inv.site.prep.playbooks {
        inputs.file(format!("playbook:{p}"), &inv.resolve(p))?;
    }
    if !cx.insecure_api.is_empty() {
        inputs.setting("insecureApi", &cx.insecure_api.join(","));
    }
    Ok(())
}

/// Host prep of `inv`'s nodes (the installed ones for the prep stage, the nodes added for
/// add-prep) into `out`, one live line per node under `stage`'s name.
pub(super) fn prep_nodes(
    cx: &StageContext,
    inv: &Inventory,
    stage: Stage,
    out: &Path,
    log: &mut StageLog,
) -> Result<String> {
    let paths: Vec<_> = inv
        .site
        .prep
        .playbooks
        .iter()
        .map(|p| inv.resolve(p))
        .collect();
    let playbooks = prep::load_playbooks(&paths).map_err(|e| anyhow!("{e}"))?;
    let hosts = hosts::site_hosts(inv, &cx.run.known_hosts()?, REACHABLE_WITHIN)?;
    let names: Vec<String> = hosts.iter().map(|h| h.name.clone()).collect();
    let lines = NodeLines::new(stage.name(), &names);
    let opts = PrepOptions {
        forks: inv.site.prep.forks() as usize,
        check: false,
        diff: false,
        limit: None,
        extra_vars: Default::default(),
        command_timeout: inv.site.prep.ssh.command_timeout(),
        reachable_within: REACHABLE_WITHIN,
    };
    let what = PrepRun {
        hosts,
        inventory: Some(inv),
        playbooks: &playbooks,
    };
    let task_lines = std::sync::Mutex::new(Vec::new());
    let files = rundir::prep_files(out);
    let report = tokio::runtime::Handle::current().block_on(prep::run(what, &opts, &files, &|e| {
        if let prep::PrepEvent::Play(ev) = &e {
            if let Some(line) = prep::event_line(ev) {
                task_lines.lock().expect("task lines").push(line);
            }
        }
        prep::show(&lines, e);
    }));
    lines.finish();
    for line in task_lines.into_inner().expect("task lines") {
        log.line(&line)?;
    }
    let report = report?;
    log.line(&report.to_string())?;
    let failed = report.failed();
    if !failed.is_empty() {
        let named: Vec<String> = failed.iter().map(|n| failure(n)).collect();
        bail!(
            "{} of {} nodes did not pass prep: {} ({} has every finding and task; RUN/{STAGING_DIR}/{}/NODE.json each verdict)",
            failed.len(),
            report.nodes.len(),
            named.join("; "),
            RunDir::log_name(stage.name()),
            stage.work().output_dir().unwrap_or(PREP_DIR)
        );
    }
    Ok(format!(
        "{} node{} reachable, hardware as the inventory says, {} playbook{} passed",
        report.nodes.len(),
        if report.nodes.len() == 1 { "" } else { "s" },
        playbooks.len(),
        if playbooks.len() == 1 { "" } else { "s" }
    ))
}

/// Puts each node's `labels` and `taints` (nodes.yaml) on its Node, once its prep passed
/// ([`crate::openshift::join::Join::label`]: labels merged by key, taints by key and effect,
/// what others set kept), `prep.forks` at once, into `out/labels.json`. The cluster API is not
/// contacted when no node has any. The number of nodes labelled.
pub(super) fn label_nodes(
    cx: &StageContext,
    inv: &Inventory,
    out: &Path,
    log: &mut StageLog,
) -> Result<usize> {
    let nodes: Vec<_> = inv
        .nodes
        .nodes
        .iter()
        .filter(|n| !n.labels.is_empty() || !n.taints.is_empty())
        .collect();
    if nodes.is_empty() {
        return Ok(0);
    }
    let handle = tokio::runtime::Handle::current();
    let join = crate::openshift::join::Join::new(handle.block_on(cx.cluster_api())?);
    // `prep.forks` Nodes at once: one after the other, two dozen nodes' labels took longer
    // than their prep.
    let results: Vec<Result<()>> = handle.block_on(
        futures_util::stream::iter(&nodes)
            .map(|node| join.label(&node.hostname, &node.labels, &node.taints))
            .buffered(inv.site.prep.forks().max(1) as usize)
            .collect(),
    );
    let mut labelled = Vec::new();
    for (node, result) in nodes.iter().zip(results) {
        result?;
        log.line(&format!(
            "{}: labels {:?}, taints {:?}",
            node.hostname, node.labels, node.taints
        ))?;
        labelled.push(serde_json::json!({
            "node": node.hostname,
            "labels": node.labels,
            "taints": node.taints,
        }));
    }
    crate::fs::write_json(
        &out.join(rundir::LABELS_FILE),
        &serde_json::json!({ "nodes": labelled }),
    )?;
    Ok(nodes.len())
}

/// A failed node in one phrase: unreachable (why), its first problem, or its failed playbooks.
fn failure(n: &prep::NodeVerdict) -> String {
    if let Some(e) = &n.error {
        return format!("{} unreachable ({e})", n.node);
    }
    let mut why: Vec<String> = n.findings.iter().take(2).cloned().collect();
    if n.findings.len() > 2 {
        why.push(format!("{} more", n.findings.len() - 2));
    }
    for (pb, r) in &n.playbooks {
        if r.failed > 0 || r.unreachable > 0 {
            why.push(format!(
                "{} failed {} task(s) of {pb}",
                n.node,
                r.failed + r.unreachable
            ));
        }
    }
    why.join(", ")
}
