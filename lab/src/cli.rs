//! `bootstrap-lab`'s command line: one Args struct per subcommand, a doc comment on every flag
//! (they are the `--help` text).

use bootstrap::cli::RegistryArgs;
use bootstrap::output::{parse_duration_ms, OutputFormat};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// The rehearsal lab for `bootstrap`: a scaled-down upstream and a site on one machine.
///
/// What it imitates, each from the upstream code named in docs/lab.md: Red Hat's registries
/// (`seed`: OpenShift release payloads and their update graph, an operator catalog of real
/// packages, a modelcar); and the site (`up`): Redfish BMCs (sushy-tools behind a layer of the
/// vendors' quirks), the nodes' SSH hosts (OpenSSH sshd in a network namespace per node), the
/// agent installer's rendezvous host (assisted-service's REST API), the new cluster's
/// Kubernetes API with OLM and Argo CD, and a Git server; and the release's
/// `openshift-install` and `oc` (stand-ins the seeded release images carry). The site binary,
/// `bootstrap`, holds none of it: the same product code runs against the lab as at a site.
#[derive(Debug, Parser)]
#[command(
    name = "bootstrap-lab",
    version,
    propagate_version = true,
    max_term_width = 100
)]
pub struct Cli {
    /// How results are printed on stdout: text for people, json for machines.
    #[arg(long, global = true, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,

    /// Log level for stderr (error, warn, info, debug, trace), or a tracing filter.
    #[arg(long, global = true, default_value = "warn", env = "BOOTSTRAP_LOG")]
    pub log: String,

    /// The command to run.
    #[command(subcommand)]
    pub command: LabCmd,
}

/// The lab's commands.
#[derive(Debug, Subcommand)]
pub enum LabCmd {
    /// Push a realistic, scaled-down upstream into a registry: OpenShift 4.18.1-4.18.4 release
    /// payloads (about 23 components each), redhat/redhat-operator-index:v4.18 with six
    /// packages whose bundle and related images all exist, and a modelcar; write the update
    /// graph (DIR/graph.json) and what was pushed (DIR/seed.json). Deterministic and
    /// idempotent: a rerun sends nothing the registry already has.
    Seed(LabSeedArgs),
    /// Run a lab stand-in for the release's openshift-install or oc (what the lab's release
    /// images carry; see docs/lab.md). Not for direct use.
    #[command(hide = true)]
    StandIn(LabStandInArgs),
    /// Bring the lab site up for an inventory: a sushy-tools Redfish emulator per node at its
    /// bmc.address (TLS with a lab CA and Basic auth for https:// BMCs), a network namespace per
    /// node on a bridge carrying networks.gateway, and a detached site process holding the
    /// rendezvous and cluster API listeners and watching the BMCs. Clears a stale lab of the same
    /// state dir first. Needs root and the lab venv (scripts/install-deps.sh).
    Up(LabUpArgs),
    /// Take the lab site down: its processes, namespaces and bridge, and the files lab up wrote
    /// (the inventory's bmc.ca file); the logs stay in the state dir.
    Down(LabStateArgs),
    /// Show the lab site: processes, addresses, each BMC's reset count and what the watcher
    /// last saw of each machine.
    Status(LabStateArgs),
    /// Do what the engineer does about the hardware findings the lab plants, on installed
    /// nodes of a running lab: reseat a missing GPU, and reboot the node (from its OS, not its
    /// BMC: reset counts stay) with the kernel arguments of its pool's MachineConfigs in the
    /// installed cluster, so `module_blacklist=irdma` keeps irdma out. A node with nothing to
    /// repair is left alone; one with irdma loaded whose pool has no such MachineConfig is
    /// refused. See docs/lab.md, "Repairing what prep found".
    Repair(LabRepairArgs),
    /// The lab site's background process (started by `bootstrap-lab up`). Not for direct use.
    #[command(hide = true)]
    SiteRun(LabStateArgs),
}

/// `bootstrap-lab up`.
#[derive(Debug, Args)]
pub struct LabUpArgs {
    /// The inventory directory (site.yaml, nodes.yaml), e.g. inventory/lab.
    #[arg(long, value_name = "DIR")]
    pub inventory: PathBuf,

    /// The lab's state.
    #[command(flatten)]
    pub state: LabStateArgs,

    /// One step of the simulated install (a host's stage, a cluster status), e.g. 3s, 300ms.
    #[arg(long, value_name = "DURATION", default_value = "3s", value_parser = parse_duration_ms)]
    pub step: std::time::Duration,

    /// Make this node's host validation fail for its first steps, as a real one whose NTP is
    /// not synced yet (the wait stage must print it once).
    #[arg(long, value_name = "NODE")]
    pub inject_validation_failure: Option<String>,

    /// Make this node (not the rendezvous host) boot the ISO again when it reboots, as one whose
    /// boot order puts the virtual CD first: it goes installing-pending-user-action (the wait
    /// stage must fail at once, naming it and the fix).
    #[arg(long, value_name = "NODE")]
    pub inject_pending_user_action: Option<String>,

    /// Keep this ClusterOperator Available=True but Progressing=True for some steps after
    /// ClusterVersion says done, as one still rolling out (the wait stage must wait for it).
    #[arg(long, value_name = "OPERATOR")]
    pub inject_operator_progressing: Option<String>,

    /// Day two: beside a joining node's own CSRs, create a client CSR for a host no
    /// nodes-config names and a serving CSR in the joining node's name with an address it does
    /// not have (an approver must leave both pending).
    #[arg(long)]
    pub inject_rogue_csr: bool,

    /// Make NODE's BMC behave as VENDOR's (dell-idrac9, supermicro-x12 or generic, the default):
    /// a front at the BMC address answers as that vendor's BMC does, as sushy, sushy-oem-idrac
    /// and ironic document it, including what the machine then boots. Repeatable.
    #[arg(long = "vendor", value_name = "NODE=VENDOR", value_parser = parse_vendor)]
    pub vendors: Vec<(String, crate::site::vendor::Vendor)>,

    /// Start every node's SSH host at once, as if installed (prep rehearsals and tests without
    /// an install); otherwise each starts when the simulated install says its node finished.
    #[arg(long)]
    pub hosts_up: bool,
}

/// `bootstrap-lab repair`.
#[derive(Debug, Args)]
pub struct LabRepairArgs {
    /// The lab's state.
    #[command(flatten)]
    pub state: LabStateArgs,

    /// The nodes to repair (every node of the lab when none is named).
    #[arg(value_name = "NODE")]
    pub nodes: Vec<String>,
}

/// The lab site's state dir.
#[derive(Debug, Args)]
pub struct LabStateArgs {
    /// The lab site's state dir (its record, logs, certificates, emulator state).
    #[arg(long, value_name = "DIR", default_value = crate::site::DEFAULT_STATE)]
    pub state: PathBuf,
}

/// `bootstrap-lab stand-in`.
#[derive(Debug, Args)]
pub struct LabStandInArgs {
    /// openshift-install or oc.
    #[arg(value_name = "NAME")]
    pub name: String,

    /// The stand-in script that was run (it carries the pinned release).
    #[arg(long = "self", value_name = "FILE")]
    pub self_path: PathBuf,

    /// The arguments the script was given.
    #[arg(last = true, value_name = "ARGS")]
    pub args: Vec<String>,
}

/// `bootstrap-lab seed`.
#[derive(Debug, Args)]
pub struct LabSeedArgs {
    /// The lab registry, docker://HOST:PORT (no path: the upstream's repositories are kept).
    #[arg(value_name = "docker://HOST:PORT")]
    pub registry_url: String,

    /// Where to write graph.json, seed.json and the modelcar's model directory and layout.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,

    /// Registry access.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// `NODE=VENDOR`.
fn parse_vendor(s: &str) -> Result<(String, crate::site::vendor::Vendor), String> {
    let (node, vendor) = s
        .split_once('=')
        .ok_or_else(|| format!("'{s}': expected NODE=VENDOR, e.g. master-1=dell-idrac9"))?;
    Ok((node.to_string(), vendor.parse()?))
}
