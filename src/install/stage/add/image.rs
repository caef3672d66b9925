//! add-image: the nodes to add, checked against the running cluster, and their node ISO from
//! the release's own `oc adm node-image create` (RUN/tools/oc, pinned to the mirrored release
//! by the tools stage). oc runs the node-joiner in the cluster, which reads the cluster's pull
//! secret, mirrors (IDMS), proxy and trust itself (installer
//! `pkg/asset/agent/joiner/clusterinfo.go`); oc is given the kubeconfig, the pull secret as
//! its registry config (for the release's `baremetal-installer` when the cluster has no
//! `openshift-config/installer-images` ConfigMap) and the installer's trust bundle (the
//! system's roots and the site registry's CA) as `SSL_CERT_FILE`.

use super::super::iso::{die_with_parent, stream_to_log};
use super::super::{Inputs, IsoServer, Stage, StageContext, StageWork};
use super::{decide, note, NodeIso, Plan};
use crate::install::log::StageLog;
use crate::install::rundir::{
    ADD_IMAGE_DIR, ADD_PLAN_FILE, CONFIG_DIR, ISO_DIR, NODES_CONFIG_FILE, NODE_ISO_FILE, TOOLS_DIR,
    TRUST_BUNDLE_FILE,
};
use crate::inventory::Inventory;
use crate::openshift::join::{Join, NodeState};
use anyhow::{bail, Context, Result};
use std::net::IpAddr;
use std::path::Path;
use std::process::{Command, Stdio};

/// The add-image stage.
pub struct AddImage;

impl StageWork for AddImage {
    fn inputs(&self, cx: &StageContext) -> Result<Inputs> {
        let mut inputs = Inputs::default();
        let run = cx.run.root();
        inputs.run_file(
            &cx.run,
            &run.join(CONFIG_DIR).join(crate::render::AGENT_CONFIG_FILE),
        )?;
        inputs.run_file(&cx.run, &run.join(TOOLS_DIR).join("oc"))?;
        inputs.run_file(&cx.run, &cx.run.installer().kubeconfig())?;
        inputs.file("inventory:site.yaml", &cx.inventory.join("site.yaml"))?;
        inputs.nodes(&cx.inventory, &super::beyond_installed(cx)?)?;
        let inv = cx.inventory()?;
        inputs.secret(
            "references.pullSecret",
            &inv,
            &inv.site.references.pull_secret,
        )?;
        inputs.setting("bootstrapVersion", env!("CARGO_PKG_VERSION"));
        if !cx.insecure_api.is_empty() {
            inputs.setting("insecureApi", &cx.insecure_api.join(","));
        }
        Ok(inputs)
    }

    fn output_dir(&self) -> Option<&'static str> {
        Some(ADD_IMAGE_DIR)
    }

    fn run(
        &self,
        cx: &StageContext,
        _iso: &mut IsoServer,
        out: &Path,
        log: &mut StageLog,
    ) -> Result<String> {
        fs_err::create_dir_all(out)?;
        let (inv, mut plan) = decide(cx)?;
        if plan.added.is_empty() {
            crate::fs::write_json(&out.join(ADD_PLAN_FILE), &plan)?;
            return Ok(super::nothing_to_add(&plan));
        }
        log.line(&format!(
            "adding {} to the cluster of {}",
            plan.added.join(", "),
            plan.installed.join(", ")
        ))?;
        let handle = tokio::runtime::Handle::current();
        let nodes = handle.block_on(async { Join::new(cx.cluster_api().await?).nodes().await })?;
        log.line(&format!(
            "the cluster has {} Nodes: {}",
            nodes.len(),
            nodes
                .iter()
                .map(|n| n.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))?;
        clashes(&inv, &plan, &nodes, cx)?;
        let config = crate::render::nodes_config(&inv, &plan.added)?;
        crate::fs::write_atomic(&out.join(NODES_CONFIG_FILE), config.as_bytes())?;
        log.line(&format!("{NODES_CONFIG_FILE}:\n{}", config.trim_end()))?;
        run_oc(cx, &inv, out, log)?;
        let iso = out.join(NODE_ISO_FILE);
        let (digest, size) = crate::bounded::hash_regular(&iso).with_context(|| {
            format!("oc adm node-image create left no {NODE_ISO_FILE} in its --dir")
        })?;
        plan.iso = Some(NodeIso {
            file: NODE_ISO_FILE.to_string(),
            size,
            sha256: digest.hex().to_string(),
        });
        crate::fs::write_json(&out.join(ADD_PLAN_FILE), &plan)?;
        for node in inv
            .nodes
            .nodes
            .iter()
            .filter(|n| plan.added.contains(&n.hostname))
        {
            let macs = node
                .nics
                .iter()
                .map(|c| crate::netaddr::normalize_mac(&c.mac).unwrap_or_else(|_| c.mac.clone()))
                .collect();
            super::set_macs(&cx.run, &node.hostname, macs)?;
            note(
                &cx.run,
                &node.hostname,
                Stage::AddImage,
                "in the node ISO",
                None,
            )?;
        }
        log.line(&format!(
            "{NODE_ISO_FILE}: {size} bytes, sha256 {}",
            digest.hex()
        ))?;
        Ok(format!(
            "{NODE_ISO_FILE} {} for {}",
            crate::output::human_bytes(size),
            plan.added.join(", ")
        ))
    }
}

/// The running cluster's facts against the nodes to add: a Node of the same name that
/// bootstrap did not add (its ledger has no reset from add-boot) is another machine; another
/// Node with one of the node's addresses would clash on the network.
fn clashes(inv: &Inventory, plan: &Plan, nodes: &[NodeState], cx: &StageContext) -> Result<()> {
    let mut problems = Vec::new();
    for name in &plan.added {
        let Some(node) = inv.nodes.nodes.iter().find(|n| &n.hostname == name) else {
            continue;
        };
        let ours = super::read_added(&cx.run.added_ledger(name))
            .ok()
            .flatten()
            .is_some_and(|a| a.reached(Stage::AddBoot.name(), super::boot::RESET_STEP));
        if let Some(n) = nodes.iter().find(|n| &n.name == name) {
            if !ours {
                problems.push(format!(
                    "node {name}: the cluster already has a Node {name} (InternalIP {}), which \
                     bootstrap did not add: name the new machine differently in nodes.yaml, or \
                     remove the old Node from the cluster first",
                    ips(&n.internal_ips)
                ));
            }
        }
        let addresses = node.ips();
        for other in nodes.iter().filter(|n| &n.name != name) {
            let shared: Vec<IpAddr> = other
                .internal_ips
                .iter()
                .filter(|ip| addresses.contains(ip))
                .copied()
                .collect();
            if !shared.is_empty() {
                problems.push(format!(
                    "node {name}: its address {} is Node {}'s InternalIP in the running \
                     cluster: give it an address of its own in nodes.yaml",
                    ips(&shared),
                    other.name
                ));
            }
        }
    }
    if !problems.is_empty() {
        bail!(
            "the nodes to add clash with the running cluster:\n{}",
            problems.join("\n")
        );
    }
    Ok(())
}

fn ips(ips: &[IpAddr]) -> String {
    if ips.is_empty() {
        return "none".to_string();
    }
    ips.iter()
        .map(IpAddr::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// `oc --kubeconfig K adm node-image create --dir OUT -a AUTHFILE`, its output into the log;
/// on a failure oc's own reason (its `report.json`'s `error_message` when it wrote one).
fn run_oc(cx: &StageContext, inv: &Inventory, out: &Path, log: &mut StageLog) -> Result<()> {
    let tools = cx.run.root().join(TOOLS_DIR);
    let oc = tools.join("oc");
    if !oc.is_file() {
        bail!("{} is missing: run the tools stage first", oc.display());
    }
    let bundle = cx.run.root().join(ISO_DIR).join(TRUST_BUNDLE_FILE);
    // The pull secret for oc's registry config: a private file in the run's cache (which
    // `bootstrap gather` leaves out), removed once oc ends; a killed run's copy is replaced.
    let referenced = crate::inventory::read_referenced(inv).map_err(|problems| {
        let lines: Vec<String> = problems.iter().map(|(_, p)| p.message.clone()).collect();
        anyhow::anyhow!("reading the inventory's references: {}", lines.join("; "))
    })?;
    let cache = cx.run.cache();
    fs_err::create_dir_all(&cache)?;
    let authfile = AuthFile(cache.join(AUTH_FILE));
    crate::fs::write_atomic_mode(
        &authfile.0,
        referenced.pull_secret.expose().as_bytes(),
        0o600,
    )?;
    let kubeconfig = cx.run.installer().kubeconfig();
    let mut cmd = Command::new(&oc);
    cmd.arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["adm", "node-image", "create", "--dir"])
        .arg(out)
        .arg("--registry-config")
        .arg(&authfile.0)
        .env_clear()
        .env(
            "PATH",
            format!("{}:/usr/local/bin:/usr/bin:/bin", tools.display()),
        )
        .env("SSL_CERT_FILE", &bundle)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Ok(home) = std::env::var("HOME") {
        cmd.env("HOME", home);
    }
    die_with_parent(&mut cmd);
    log.line(&format!(
        "running {} --kubeconfig {} adm node-image create --dir {} --registry-config (the pull secret)",
        oc.display(),
        kubeconfig.display(),
        out.display()
    ))?;
    let child = cmd
        .spawn()
        .with_context(|| format!("starting {}", oc.display()))?;
    let (status, last_error) = stream_to_log(child, cx, log, "oc")?;
    drop(authfile);
    if !status.success() {
        let reason = report_error(&out.join("report.json"))
            .or(last_error)
            .unwrap_or_else(|| format!("it exited with {status}"));
        bail!("oc adm node-image create failed: {reason}");
    }
    Ok(())
}

/// oc's registry config, in the run's cache.
const AUTH_FILE: &str = "node-image-auth.json";

/// The pull secret's copy for oc, removed when dropped.
struct AuthFile(std::path::PathBuf);

impl Drop for AuthFile {
    fn drop(&mut self) {
        let _ = fs_err::remove_file(&self.0);
    }
}

/// The `error_message` of the node-joiner's report.json (oc `create.go` saves it on failure).
fn report_error(path: &Path) -> Option<String> {
    let report: serde_json::Value = serde_json::from_slice(&fs_err::read(path).ok()?).ok()?;
    let result = &report["result"];
    if result["exit_code"].as_i64() == Some(0) {
        return None;
    }
    result["error_message"]
        .as_str()
        .or(result["detailed_error_message"].as_str())
        .map(str::to_string)
}
