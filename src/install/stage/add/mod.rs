//! Day two from the same inventory: once the cluster is installed (the wait done), the nodes
//! nodes.yaml has beyond those the cluster was installed with are added by four stages after
//! the hand-off, and nothing else is touched:
//!
//! 1. **add-image**: which nodes to add ([`crate::install::daytwo::plan`]: a removed node, an
//!    installed node's changed NICs or a role other than worker are refused), checked against
//!    the running cluster (no Node of that name bootstrap did not add, no other Node with its
//!    addresses), their `nodes-config.yaml` ([`crate::render::nodes_config`]) and the node ISO
//!    from the pinned `oc adm node-image create` of the mirrored release (openshift/oc
//!    `pkg/cli/admin/nodeimage/create.go`), with the pull secret and the installer's trust;
//! 2. **add-boot**: those nodes booted from the node ISO through their BMCs, as the boot stage
//!    boots (the same checks, vendor handling and reset ledger); no other BMC is logged into;
//! 3. **add-join**: what `oc adm node-image monitor` watches (installer
//!    `pkg/agent/monitoraddnodes.go`): each node's kubelet CSRs, approved only when they name
//!    that node with its inventory addresses ([`crate::openshift::csr`]), until its Node is
//!    Ready and its serving certificate approved; a CSR that does not match is left pending
//!    and reported;
//! 4. **add-prep**: host prep of the new nodes (facts, checks, playbooks), then the inventory's
//!    labels and taints on their Nodes.
//!
//! With no node to add each stage says so and does nothing. How far each node got is kept in
//! `RUN/ledger/add/NODE.json` as the stages go (a failed or killed run keeps it; `bootstrap
//! install status` shows it).

mod boot;
mod image;
mod join;
mod prep;

pub use boot::AddBoot;
pub use image::AddImage;
pub use join::AddJoin;
pub use prep::{AddPrep, LABELLED_STEP};

use super::StageContext;
use crate::install::rundir::{RunDir, ADD_IMAGE_DIR, ADD_PLAN_FILE};
use crate::inventory::Inventory;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// What add-image decided (`RUN/add-image/plan.json`), which the later day-two stages follow.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// The nodes the cluster was installed with.
    pub installed: Vec<String>,
    /// The nodes to add, in nodes.yaml's order.
    pub added: Vec<String>,
    /// The node ISO made for them, when there are any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iso: Option<NodeIso>,
}

/// The node ISO `oc adm node-image create` made.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct NodeIso {
    /// Its file name in the add-image folder.
    pub file: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its sha256.
    pub sha256: String,
}

/// The nodes to add now: the inventory's nodes that the installed agent-config.yaml does not
/// have. An error carrying every problem when the inventory asks for more than adding nodes.
pub(super) fn decide(cx: &StageContext) -> Result<(Inventory, Plan)> {
    let inv = cx.inventory()?;
    let installed = cluster_nodes(&cx.run)?;
    let plan = match crate::install::daytwo::plan(&inv.nodes.nodes, &installed) {
        Ok(Some(d)) => Plan {
            installed: d.installed,
            added: d.added,
            iso: None,
        },
        Ok(None) => Plan {
            installed: installed.into_iter().map(|i| i.hostname).collect(),
            added: Vec::new(),
            iso: None,
        },
        Err(problems) => anyhow::bail!(
            "nodes.yaml asks for what adding nodes cannot do (the cluster of {}):\n{}",
            cx.run.root().display(),
            problems.join("\n")
        ),
    };
    Ok((inv, plan))
}

/// The nodes the cluster has: those it was installed with (the hosts of the agent-config.yaml
/// the render stage wrote) and those day two added to the end (their ledger says prepped and
/// labelled), with the MACs each was installed or added with. A node day two is still adding
/// is not among them: the day-two stages go on with it.
pub fn cluster_nodes(run: &RunDir) -> Result<Vec<crate::install::daytwo::Installed>> {
    let path = run
        .root()
        .join(crate::install::rundir::CONFIG_DIR)
        .join(crate::render::AGENT_CONFIG_FILE);
    let mut nodes = crate::install::daytwo::installed(&path)?;
    for added in added_nodes(run) {
        let added = added.map_err(anyhow::Error::msg)?;
        if added.reached(super::Stage::AddPrep.name(), LABELLED_STEP)
            && !nodes.iter().any(|n| n.hostname == added.node)
        {
            nodes.push(crate::install::daytwo::Installed {
                hostname: added.node.clone(),
                macs: added.macs.iter().cloned().collect(),
            });
        }
    }
    Ok(nodes)
}

/// The plan add-image published.
pub(super) fn published_plan(run: &RunDir) -> Result<Plan> {
    let path = run.root().join(ADD_IMAGE_DIR).join(ADD_PLAN_FILE);
    let bytes = fs_err::read(&path).context("add-image's plan: run add-image first")?;
    serde_json::from_slice(&bytes).with_context(|| format!("reading {}", path.display()))
}

/// The names of the nodes nodes.yaml has beyond those the cluster was installed with (for a
/// day-two stage's inputs: a node added or removed changes them; a node day two finished
/// adding stays among them, so that a rerun with nothing new skips the day-two stages and
/// keeps their records).
pub(super) fn beyond_installed(cx: &StageContext) -> Result<Vec<String>> {
    let inv = cx.inventory()?;
    let installed = super::installed_nodes(&cx.run)?;
    Ok(inv
        .nodes
        .nodes
        .iter()
        .map(|n| n.hostname.clone())
        .filter(|n| !installed.contains(n))
        .collect())
}

/// How far day two got with one node: `RUN/ledger/add/NODE.json`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Added {
    /// The node.
    pub node: String,
    /// Each step reached, in order, with its time (RFC 3339, UTC).
    pub steps: Vec<AddedStep>,
    /// Its MACs as nodes.yaml had them when its node ISO was made (normalised): a later change
    /// is refused as for an installed node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub macs: Vec<String>,
    /// The last problem, until a later step clears it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One step of a node being added.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AddedStep {
    /// The stage.
    pub stage: String,
    /// What happened.
    pub what: String,
    /// When.
    pub at: String,
}

impl Added {
    /// The last step, in words.
    pub fn last(&self) -> &str {
        self.steps.last().map_or("", |s| s.what.as_str())
    }

    /// Whether a step of `stage` said `what`.
    pub fn reached(&self, stage: &str, what: &str) -> bool {
        self.steps
            .iter()
            .any(|s| s.stage == stage && s.what == what)
    }
}

/// Appends a step to `node`'s day-two ledger (a step equal to the last is not repeated); an
/// error is kept until a later step without one.
pub(super) fn note(
    run: &RunDir,
    node: &str,
    stage: super::Stage,
    what: &str,
    error: Option<&str>,
) -> Result<()> {
    update(run, node, |rec| {
        let same = rec
            .steps
            .last()
            .is_some_and(|s| s.stage == stage.name() && s.what == what);
        if !same {
            rec.steps.push(AddedStep {
                stage: stage.name().to_string(),
                what: what.to_string(),
                at: crate::install::state::now(),
            });
        }
        rec.error = error.map(str::to_string);
    })
}

/// Records `node`'s MACs in its day-two ledger.
pub(super) fn set_macs(run: &RunDir, node: &str, macs: Vec<String>) -> Result<()> {
    update(run, node, |rec| rec.macs = macs)
}

/// Reads `node`'s day-two ledger (a new one when there is none), changes it with `change` and
/// writes it back.
fn update(run: &RunDir, node: &str, change: impl FnOnce(&mut Added)) -> Result<()> {
    let path = run.added_ledger(node);
    let mut rec = read_added(&path)?.unwrap_or_else(|| Added {
        node: node.to_string(),
        ..Default::default()
    });
    change(&mut rec);
    if let Some(dir) = path.parent() {
        fs_err::create_dir_all(dir)?;
    }
    crate::fs::write_json(&path, &rec)
}

/// One node's day-two ledger, `None` when day two never reached it.
pub fn read_added(path: &Path) -> Result<Option<Added>> {
    match fs_err::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .with_context(|| format!("{} cannot be read", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Every node's day-two ledger in the run, by name (what could not be read is said so).
pub fn added_nodes(run: &RunDir) -> Vec<std::result::Result<Added, String>> {
    let dir = run
        .root()
        .join(crate::install::rundir::LEDGER_DIR)
        .join(crate::install::rundir::ADD_LEDGER_DIR);
    let Ok(entries) = fs_err::read_dir(&dir) else {
        return Vec::new();
    };
    let mut paths: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|e| e == "json")
                && p.file_name()
                    .is_some_and(|n| n != crate::install::rundir::ISO_SERVER_FILE)
        })
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| match read_added(p) {
            Ok(Some(a)) => Ok(a),
            Ok(None) => Err(format!("{} is gone", p.display())),
            Err(e) => Err(format!("{e:#}")),
        })
        .collect()
}

/// The one line of a day-two stage with nothing to add.
pub(super) fn nothing_to_add(plan: &Plan) -> String {
    format!(
        "no nodes to add: nodes.yaml has the {} the cluster was installed with",
        plural(plan.installed.len())
    )
}

fn plural(n: usize) -> String {
    if n == 1 {
        "1 node".to_string()
    } else {
        format!("{n} nodes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Steps accumulate in order, a repeated step is kept once, an error stays until a step
    /// without one.
    #[test]
    fn a_nodes_ledger_keeps_its_steps_and_last_error() {
        let tmp = tempfile::tempdir().unwrap();
        let run = RunDir::new(tmp.path());
        note(&run, "w0", super::super::Stage::AddBoot, "reset", None).unwrap();
        note(&run, "w0", super::super::Stage::AddBoot, "reset", None).unwrap();
        note(
            &run,
            "w0",
            super::super::Stage::AddJoin,
            "waiting",
            Some("no CSR yet"),
        )
        .unwrap();
        let rec = read_added(&run.added_ledger("w0")).unwrap().unwrap();
        assert_eq!(rec.steps.len(), 2, "{rec:?}");
        assert_eq!(rec.last(), "waiting");
        assert_eq!(rec.error.as_deref(), Some("no CSR yet"));
        assert!(rec.reached("add-boot", "reset"));
        note(&run, "w0", super::super::Stage::AddJoin, "Ready", None).unwrap();
        let rec = read_added(&run.added_ledger("w0")).unwrap().unwrap();
        assert_eq!(rec.error, None);
        let all = added_nodes(&run);
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].as_ref().unwrap().node, "w0");
    }
}
