//! add-boot: the nodes to add booted from the node ISO through their BMCs, exactly as the boot
//! stage boots ([`super::super::boot`]: the node checked to be the one meant by its MACs and
//! UUID, its vendor's profile, the reset entered in `RUN/ledger/boot/NODE.json` before it is
//! sent, a node an earlier run reset left alone unless `--reboot NODE`). Only the nodes added
//! are planned: no installed node's BMC is connected to. The ISO is served as the agent ISO
//! was (`boot.isoServer`), at the address a resumed run served it before.
//!
//! There is no rendezvous host on day two (each new node runs its own assisted-service), so
//! the proof that a node booted the node ISO is its kubelet's CSR, which add-join waits for.

use super::super::boot::{self as day_one, bmc_inputs};
use super::super::served::node_iso_source;
use super::super::{Inputs, IsoServer, Stage, StageContext, StageWork};
use super::{note, published_plan};
use crate::install::log::StageLog;
use crate::install::rundir::{ADD_BOOT_DIR, ADD_IMAGE_DIR, NODE_ISO_FILE};
use crate::output::NodeLines;
use anyhow::Result;
use std::path::Path;

/// The ledger step of a node add-boot reset (or found reset by an earlier run).
pub(super) const RESET_STEP: &str = "reset to boot the node ISO";

/// The add-boot stage.
pub struct AddBoot;

impl StageWork for AddBoot {
    fn inputs(&self, cx: &StageContext) -> Result<Inputs> {
        let mut inputs = Inputs::default();
        inputs.run_files(&cx.run, ADD_IMAGE_DIR)?;
        let inv = cx.inventory()?;
        let added = super::beyond_installed(cx)?;
        bmc_inputs(&mut inputs, &inv, |n| added.contains(&n.hostname))?;
        Ok(inputs)
    }

    fn output_dir(&self) -> Option<&'static str> {
        Some(ADD_BOOT_DIR)
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
        fs_err::create_dir_all(out)?;
        let plan = published_plan(&cx.run)?;
        // `--reboot` of a node day one installs is the boot stage's (a run whose cluster is
        // installed refuses it before any stage).
        if plan.added.is_empty() {
            return Ok(super::nothing_to_add(&plan));
        }
        let inv = super::super::only(cx.inventory()?, &plan.added);
        day_one::check_reboot_names(&inv, &cx.reboot)?;
        let plans = day_one::plan(&inv, &cx.reboot)?;
        let handle = tokio::runtime::Handle::current();
        let node_iso = cx.run.root().join(ADD_IMAGE_DIR).join(NODE_ISO_FILE);
        let source = handle.block_on(node_iso_source(cx, iso, &inv, &node_iso))?;
        log.line(&format!("the BMCs fetch the node ISO from {}", source.url))?;
        day_one::check_reach(&source, &plans, log)?;
        let names: Vec<String> = plans.iter().map(|p| p.name.clone()).collect();
        let lines = NodeLines::new(Stage::AddBoot.name(), &names);
        let results = handle.block_on(day_one::boot_all(
            plans,
            &source,
            &cx.run,
            &lines,
            day_one::parallel(&inv),
            cx.cancel.clone(),
        ));
        lines.finish();
        for r in &results {
            let (what, error) = match (&r.error, r.resets) {
                (Some(e), _) => (r.outcome.as_str(), Some(e.as_str())),
                (None, n) if n > 0 => (RESET_STEP, None),
                (None, _) => (r.outcome.as_str(), None),
            };
            note(&cx.run, &r.node, Stage::AddBoot, what, error)?;
        }
        day_one::record(Stage::AddBoot, &results, &source, out, log)?;
        Ok(day_one::detail(&results, &source))
    }
}
