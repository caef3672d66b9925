//! The pipeline's stages, in their fixed order, and what each one is: one table (`stages!`)
//! makes the enum (the order), the names and the one match ([`Stage::work`]) from a stage to its
//! adapter. An adapter declares its inputs (files and the settings that matter, each hashed;
//! secrets hashed and never stored), the run-directory folder its outputs go to, and does its
//! work into a staging folder that the runner publishes whole only when the stage succeeded.

mod add;
mod boot;
pub mod eject;
mod evidence;
pub mod handoff;
pub(crate) mod inputs;
mod iso;
mod prep;
mod render;
mod served;
mod tools;
mod validate;
mod wait;

pub use crate::openshift::watch::WaitLimits;
pub use add::{added_nodes, cluster_nodes, Added, AddedStep, LABELLED_STEP};
pub use inputs::Inputs;
pub use served::IsoServer;
pub use tools::{site_registries, site_release};

use super::log::StageLog;
use super::rundir::RunDir;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The stage table: each stage's variant, name and adapter, in the order the stages run. The
/// enum (whose order is the pipeline's), [`Stage::ALL`], [`Stage::NAMES`], [`Stage::name`],
/// [`Stage::work`] and the names in `state.json` are all made from this one list, so there is
/// nothing to keep in step by hand.
macro_rules! stages {
    ($($(#[$doc:meta])* $variant:ident = $name:literal => $work:expr;)+) => {
        /// One stage of `bootstrap install`, in pipeline order.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum Stage {
            $($(#[$doc])* #[serde(rename = $name)] $variant,)+
        }

        impl Stage {
            /// Every stage, in the order they run.
            pub const ALL: [Stage; [$($name),+].len()] = [$(Stage::$variant),+];

            /// Every stage's name, in order (what `--from` and `--until` accept).
            pub const NAMES: [&'static str; [$($name),+].len()] = [$($name),+];

            /// The stage's name (`render`).
            pub const fn name(self) -> &'static str {
                match self {
                    $(Stage::$variant => $name,)+
                }
            }

            /// The stage's adapter: the one match of the pipeline.
            pub fn work(self) -> &'static dyn StageWork {
                match self {
                    $(Stage::$variant => &$work,)+
                }
            }
        }
    };
}

stages! {
    /// The inventory and the installer's rules on what it becomes; writes nothing.
    Validate = "validate" => validate::Validate;
    /// install-config.yaml and agent-config.yaml under `RUN/config/`.
    Render = "render" => render::Render;
    /// openshift-install and oc from the mirrored release, pinned to it, under `RUN/tools/`.
    Tools = "tools" => tools::Tools;
    /// The agent ISO and the files the later stages read, under `RUN/iso/`.
    Iso = "iso" => iso::Iso;
    /// Nodes booted from the ISO through their BMCs; per node results under `RUN/boot/`.
    Boot = "boot" => boot::Boot;
    /// Waiting for the installation to complete, under `RUN/wait/`.
    Wait = "wait" => wait::Wait;
    /// Host preparation over SSH: facts, checks, playbooks.
    Prep = "prep" => prep::Prep;
    /// The hand-off to Argo CD: OpenShift GitOps, the repository, the root Application.
    Handoff = "handoff" => handoff::HandoffStage;
    /// Day two: the nodes nodes.yaml has beyond those installed, checked against the running
    /// cluster, and their node ISO (`oc adm node-image create`), under `RUN/add-image/`.
    AddImage = "add-image" => add::AddImage;
    /// Day two: the nodes added booted from the node ISO through their BMCs, under
    /// `RUN/add-boot/`; no other node's BMC is touched.
    AddBoot = "add-boot" => add::AddBoot;
    /// Day two: their kubelets' CSRs approved when they match the inventory, until each Node is
    /// Ready, under `RUN/add-join/`.
    AddJoin = "add-join" => add::AddJoin;
    /// Day two: host prep of the nodes added, then their labels and taints, under
    /// `RUN/add-prep/`.
    AddPrep = "add-prep" => add::AddPrep;
}

impl Stage {
    /// The stages that install the cluster (render to wait): once the wait is done they are
    /// never run again in that run directory, whatever changed since (the cluster runs; nodes
    /// added are day two's stages).
    pub const fn installs(self) -> bool {
        matches!(
            self,
            Stage::Render | Stage::Tools | Stage::Iso | Stage::Boot | Stage::Wait
        )
    }
}

/// The nodes the cluster was installed with: the hosts of the agent-config.yaml the render
/// stage wrote (`RUN/config/agent-config.yaml`), by name.
pub(crate) fn installed_nodes(run: &RunDir) -> Result<Vec<String>> {
    let path = run
        .root()
        .join(crate::install::rundir::CONFIG_DIR)
        .join(crate::render::AGENT_CONFIG_FILE);
    Ok(crate::install::daytwo::installed(&path)
        .with_context(|| format!("reading the installed nodes from {}", path.display()))?
        .into_iter()
        .map(|i| i.hostname)
        .collect())
}

/// The inputs of a stage after the install that works on the installed nodes (prep, handoff):
/// their entries of nodes.yaml ([`Inputs::nodes`]), so that a node added on day two does not
/// rerun it; the whole file in a run directory with no agent-config.yaml to tell them by.
pub(crate) fn installed_inputs(inputs: &mut Inputs, cx: &StageContext) -> Result<()> {
    let file = crate::inventory::model::NODES_FILE;
    match installed_nodes(&cx.run) {
        Ok(names) => inputs.nodes(&cx.inventory, &names),
        Err(_) => inputs.file(format!("inventory:{file}"), &cx.inventory.join(file)),
    }
}

/// `inv` with only the nodes `names` has.
pub(crate) fn only(
    mut inv: crate::inventory::Inventory,
    names: &[String],
) -> crate::inventory::Inventory {
    inv.nodes.nodes.retain(|n| names.contains(&n.hostname));
    inv
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Stage {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Stage::ALL
            .into_iter()
            .find(|st| st.name() == s)
            .ok_or_else(|| {
                format!(
                    "{s:?} is not a stage; the stages are {}",
                    Stage::NAMES.join(", ")
                )
            })
    }
}

/// What every stage is given.
#[derive(Clone, Debug)]
pub struct StageContext {
    /// The inventory directory.
    pub inventory: PathBuf,
    /// The run directory.
    pub run: RunDir,
    /// Set when SIGINT or SIGTERM arrived: the run has already recorded the stage as
    /// interrupted and is ending; a long stage checks [`StageContext::cancelled`] and returns.
    pub cancel: Arc<AtomicBool>,
    /// `--installer PATH`, when given.
    pub installer: Option<PathBuf>,
    /// `--reboot NODE`: nodes the boot stage resets again although an earlier run did.
    pub reboot: Vec<String>,
    /// `--insecure-api HOST`: cluster API hosts allowed plain HTTP or unverified TLS.
    pub insecure_api: Vec<String>,
    /// The wait stage's limits.
    pub wait_limits: WaitLimits,
    /// The cluster was installed (the wait done) when the run started: validation also checks
    /// what the inventory asks of a running cluster ([`crate::install::daytwo::plan`]).
    pub installed: bool,
    /// The run's progress (stderr): stages that work on every node at once make their live
    /// lines with [`crate::output::NodeLines`].
    pub progress: crate::output::Progress,
}

impl StageContext {
    /// Whether the run was interrupted (the stage's result will not be used).
    pub fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::SeqCst)
    }

    /// The new cluster's API through the installer's admin kubeconfig (verified TLS unless
    /// `--insecure-api` names its host; transient answers retried), for the stages after the
    /// install that read or change it.
    pub async fn cluster_api(&self) -> Result<crate::openshift::api::Connected> {
        crate::openshift::api::connect(
            &self.run.installer().kubeconfig(),
            None,
            &self.insecure_api,
            crate::openshift::api::Retry::API,
        )
        .await
    }

    /// The inventory, loaded; an error (its problems) when it does not load. A stage's inputs
    /// read it with this too: one that cannot be read fails the stage rather than leaving its
    /// settings out of the hash.
    pub fn inventory(&self) -> Result<crate::inventory::Inventory> {
        crate::inventory::load(&self.inventory)
            .map_err(|e| anyhow::anyhow!("{e}"))
            .context("loading the inventory")
    }
}

/// A stage's adapter: it reads what earlier stages wrote in the run directory (and the
/// inventory), and writes its own outputs. Adapters run on a blocking thread; one that needs
/// async I/O uses `tokio::runtime::Handle::current().block_on`.
pub trait StageWork: Sync {
    /// Everything the stage's result depends on, hashed: when these are unchanged and its
    /// outputs intact, the stage is not run again.
    fn inputs(&self, cx: &StageContext) -> Result<Inputs>;

    /// The folder of the run directory its outputs go to (`config`), or `None` when it writes
    /// no files. The folder is replaced whole, and only when the stage succeeds.
    fn output_dir(&self) -> Option<&'static str>;

    /// Does the stage's work, writing its outputs under `out` (a staging folder that becomes
    /// [`StageWork::output_dir`]); returns a one-line detail for the status table. An error's
    /// first line becomes the failure's detail; the log holds the rest. `iso` is the run's ISO
    /// server, which the runner holds from the stage that starts it to the end of the run and
    /// lends to each stage for its run; only the stages that serve the ISO (boot, wait) use it.
    fn run(
        &self,
        cx: &StageContext,
        iso: &mut IsoServer,
        out: &Path,
        log: &mut StageLog,
    ) -> Result<String>;

    /// Why the stage must run although its inputs and outputs are unchanged (the boot stage
    /// with `--reboot NODE`), or `None`.
    fn must_run(&self, _cx: &StageContext) -> Option<String> {
        None
    }

    /// Every secret the stage may meet (the pull secret, BMC passwords), so its log can never
    /// show them even if a message quoted one.
    fn secrets(&self, cx: &StageContext) -> Vec<String> {
        inputs::inventory_secrets(&cx.inventory)
    }
}

/// Every per-node task's result, in the nodes' order (each task returns its index with its
/// result); a task that panicked or was cancelled becomes `failed(why)` at the end.
pub(super) async fn in_node_order<T: 'static>(
    mut tasks: tokio::task::JoinSet<(usize, T)>,
    failed: impl Fn(String) -> T,
) -> Vec<T> {
    let mut results = Vec::new();
    while let Some(done) = tasks.join_next().await {
        match done {
            Ok(r) => results.push(r),
            Err(e) => results.push((usize::MAX, failed(format!("a node's task failed: {e}")))),
        }
    }
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stages after render read the inventory for their inputs (boot: every node's BMC,
    /// prep: the SSH key and playbooks, ...). One that does not load used to leave those out
    /// of the hash, so the stage could be taken for unchanged; now reading the inputs fails,
    /// naming the inventory.
    #[test]
    fn a_stage_whose_inventory_does_not_load_fails_reading_its_inputs() {
        let tmp = tempfile::tempdir().unwrap();
        let inventory = tmp.path().join("inv");
        fs_err::create_dir_all(&inventory).unwrap();
        fs_err::write(inventory.join("site.yaml"), "cluster: [not a site\n").unwrap();
        fs_err::write(inventory.join("nodes.yaml"), "nodes: []\n").unwrap();
        let cx = StageContext {
            inventory,
            run: RunDir::new(tmp.path().join("run")),
            cancel: Arc::new(AtomicBool::new(false)),
            installer: None,
            reboot: Vec::new(),
            insecure_api: Vec::new(),
            wait_limits: WaitLimits::default(),
            installed: false,
            progress: crate::output::Progress::lines("install"),
        };
        for stage in [
            Stage::Tools,
            Stage::Iso,
            Stage::Boot,
            Stage::Prep,
            Stage::Handoff,
        ] {
            match stage.work().inputs(&cx) {
                Ok(inputs) => panic!("{stage}: inputs read without the inventory: {inputs:?}"),
                Err(e) => assert_eq!(e.to_string(), "loading the inventory", "{stage}: {e:#}"),
            }
        }
    }
}
