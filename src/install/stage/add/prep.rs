//! add-prep: host prep of the nodes added, as the prep stage preps the installed ones (their
//! host keys learned into the same `RUN/ledger/known_hosts`, facts read and checked, the
//! inventory's playbooks), then, once every node passed, the inventory's `labels` and `taints`
//! put on their Nodes (`oc label node` / `oc adm taint nodes` as one strategic merge patch:
//! [`crate::openshift::join::Join::label`]). Labels come last: what the GitOps repository's
//! policies select on (the GPU operator's node selectors) reaches a node only once its
//! hardware checked out. Outputs: the prep files of these nodes and `labels.json`.

use super::super::prep::{label_nodes, prep_nodes};
use super::super::{Inputs, IsoServer, Stage, StageContext, StageWork};
use super::{note, published_plan};
use crate::install::log::StageLog;
use crate::install::rundir::{ADD_JOIN_DIR, ADD_PREP_DIR};
use anyhow::Result;
use std::path::Path;

/// The add-prep stage.
pub struct AddPrep;

impl StageWork for AddPrep {
    fn inputs(&self, cx: &StageContext) -> Result<Inputs> {
        let mut inputs = Inputs::default();
        inputs.run_files(&cx.run, ADD_JOIN_DIR)?;
        inputs.file("inventory:site.yaml", &cx.inventory.join("site.yaml"))?;
        inputs.nodes(&cx.inventory, &super::beyond_installed(cx)?)?;
        super::super::prep::prep_inputs(&mut inputs, cx)?;
        Ok(inputs)
    }

    fn output_dir(&self) -> Option<&'static str> {
        Some(ADD_PREP_DIR)
    }

    fn run(
        &self,
        cx: &StageContext,
        _iso: &mut IsoServer,
        out: &Path,
        log: &mut StageLog,
    ) -> Result<String> {
        fs_err::create_dir_all(out)?;
        let plan = published_plan(&cx.run)?;
        if plan.added.is_empty() {
            return Ok(super::nothing_to_add(&plan));
        }
        let inv = super::super::only(cx.inventory()?, &plan.added);
        let prepped = match prep_nodes(cx, &inv, Stage::AddPrep, out, log) {
            Ok(detail) => detail,
            Err(e) => {
                for node in &plan.added {
                    note(
                        &cx.run,
                        node,
                        Stage::AddPrep,
                        "prep failed",
                        Some(&format!("{e:#}")),
                    )?;
                }
                return Err(e);
            }
        };
        for node in &plan.added {
            note(&cx.run, node, Stage::AddPrep, "prepped", None)?;
        }
        label_nodes(cx, &inv, out, log)?;
        for node in &plan.added {
            note(&cx.run, node, Stage::AddPrep, LABELLED_STEP, None)?;
        }
        Ok(format!(
            "{prepped}; labels and taints on {}",
            plan.added.join(", ")
        ))
    }
}

/// The ledger step of a node whose labels and taints are on its Node: day two is done with it.
pub const LABELLED_STEP: &str = "prepped and labelled";
