//! One node's part of a support bundle, under `nodes/NODE/`: read-only over Redfish (the system
//! and its managers, the entries of every log service, the calls made), the run's boot ledger
//! for it, and over SSH with the run's pinned host keys (the journal of the agent, bootkube,
//! kubelet and crio units, `dmesg`, the hardware facts prep reads), each command's exit status
//! and stderr recorded as collected output. What does not answer is recorded as not collected,
//! with why; the node's time bound ends whatever is left, keeping what was read.

use super::bundle::Bundle;
use crate::hostprep::{facts, Exec, Remote};
use crate::preflight::bmc::BmcTarget;
use crate::redfish::{self, Client};
use serde::Serialize;
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Lines of each unit's journal (`journalctl -n`).
pub const JOURNAL_LINES: u32 = 20_000;
/// Bytes kept of one command's output (its beginning; the rest counted and dropped).
pub const OUTPUT_MAX: usize = 8 << 20;
/// Entries kept of one Redfish log (newest first as most BMCs list them).
pub const LOG_ENTRIES_MAX: usize = 2_000;
/// One command's time limit (within the node's).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// The units whose journal is collected: the agent installer's, then the cluster's.
const UNITS: [&str; 4] = ["agent", "bootkube", "kubelet", "crio"];

/// What a node's part is gathered from.
pub struct NodeSources {
    /// The node's name.
    pub node: String,
    /// Its BMC, or why it cannot be reached (an unreadable credential).
    pub bmc: Result<BmcTarget, String>,
    /// Its SSH connection, or why there is none (no login key).
    pub ssh: Result<Arc<dyn Remote>, String>,
    /// The run's boot ledger for it, when there is one.
    pub boot_ledger: Option<String>,
}

/// How one node's part ended, for the live line and the result.
#[derive(Clone, Debug, Serialize)]
pub struct NodeOutcome {
    /// The node.
    pub node: String,
    /// Whether the BMC's part was read.
    pub redfish: bool,
    /// Whether the SSH part was read.
    pub ssh: bool,
}

/// Gathers the node within `limit`; what the limit cuts is recorded as not collected.
pub async fn gather(
    bundle: Arc<Bundle>,
    src: NodeSources,
    limit: Duration,
    lines: crate::output::NodeLines,
) -> NodeOutcome {
    let node = src.node.clone();
    let dir = format!("nodes/{node}");
    match &src.boot_ledger {
        Some(text) => put(&bundle, &node, &format!("{dir}/boot-ledger.json"), text),
        None => bundle.nothing_to_collect(
            Some(&node),
            "boot ledger",
            "the run has none for this node (the boot stage never reset it)",
        ),
    }
    let rf_done = Arc::new(AtomicBool::new(false));
    let ssh_done = Arc::new(AtomicBool::new(false));
    let work = async {
        let rf = async {
            let ok = redfish_part(&bundle, &node, &src.bmc, &lines).await;
            rf_done.store(true, Ordering::SeqCst);
            ok
        };
        let ssh = async {
            let ok = ssh_part(&bundle, &node, &src.ssh, &lines).await;
            ssh_done.store(true, Ordering::SeqCst);
            ok
        };
        tokio::join!(rf, ssh)
    };
    let (redfish, ssh) = match tokio::time::timeout(limit, work).await {
        Ok(both) => both,
        Err(_) => {
            let why = format!(
                "the node's time bound ({}) ended it; what was read is kept (--node-timeout)",
                crate::output::human_duration(limit)
            );
            for (done, what) in [(&rf_done, "redfish"), (&ssh_done, "ssh")] {
                if !done.load(Ordering::SeqCst) {
                    bundle.not_collected(Some(&node), what, &why);
                }
            }
            (
                rf_done.load(Ordering::SeqCst),
                ssh_done.load(Ordering::SeqCst),
            )
        }
    };
    let mut parts = Vec::new();
    parts.push(if redfish { "BMC read" } else { "BMC not read" });
    parts.push(if ssh { "SSH read" } else { "SSH not read" });
    lines.set(&node, parts.join(", "));
    NodeOutcome { node, redfish, ssh }
}

fn put(bundle: &Bundle, node: &str, rel: &str, text: &str) {
    if let Err(e) = bundle.put_text(rel, text, false) {
        bundle.not_collected(Some(node), rel, format!("writing it: {e:#}"));
    }
}

fn put_json(bundle: &Bundle, node: &str, rel: &str, value: &impl Serialize) {
    if let Err(e) = bundle.put_json(rel, value) {
        bundle.not_collected(Some(node), rel, format!("writing it: {e:#}"));
    }
}

/// The BMC's part; false when the BMC could not be read at all.
async fn redfish_part(
    bundle: &Bundle,
    node: &str,
    bmc: &Result<BmcTarget, String>,
    lines: &crate::output::NodeLines,
) -> bool {
    let target = match bmc {
        Ok(t) => t,
        Err(why) => {
            bundle.not_collected(Some(node), "redfish", why);
            return false;
        }
    };
    lines.set(node, "BMC: connecting");
    let opts = redfish::Options {
        attempts: 2,
        timeout: Duration::from_secs(20),
        ..redfish::Options::default()
    };
    let client = match Client::connect(&target.endpoint, opts).await {
        Ok(c) => c,
        Err(e) => {
            bundle.not_collected(Some(node), "redfish", format!("BMC not answering: {e}"));
            return false;
        }
    };
    let dir = format!("nodes/{node}/redfish");
    let read = redfish_reads(bundle, node, &client, &dir, lines).await;
    put_json(bundle, node, &format!("{dir}/calls.json"), &client.calls());
    client.logout().await;
    read
}

async fn redfish_reads(
    bundle: &Bundle,
    node: &str,
    client: &Client,
    dir: &str,
    lines: &crate::output::NodeLines,
) -> bool {
    let sys = match client.system().await {
        Ok(s) => s,
        Err(e) => {
            bundle.not_collected(Some(node), "redfish", format!("reading the system: {e}"));
            return false;
        }
    };
    lines.set(node, "BMC: system inventory");
    match client.inventory(&sys).await {
        Ok(docs) => {
            let docs: Vec<_> = docs
                .into_iter()
                .map(|(path, doc)| json!({"path": path, "document": doc}))
                .collect();
            put_json(bundle, node, &format!("{dir}/inventory.json"), &docs);
        }
        Err(e) => bundle.not_collected(Some(node), "redfish inventory", e),
    }
    lines.set(node, "BMC: logs");
    let services = match client.log_services(&sys).await {
        Ok(s) => s,
        Err(e) => {
            bundle.not_collected(Some(node), "redfish logs", format!("listing them: {e}"));
            return true;
        }
    };
    if services.is_empty() {
        bundle.nothing_to_collect(
            Some(node),
            "redfish logs",
            "not offered by this BMC (no LogServices under the system or its managers)",
        );
    }
    for svc in services {
        let what = format!("redfish log {} {}", svc.owner, svc.id);
        match client.log_entries(&svc, LOG_ENTRIES_MAX).await {
            Ok(entries) => {
                let rel = format!("{dir}/log-{}-{}.json", svc.owner, svc.id);
                let doc = json!({"service": svc, "truncated": entries.truncated, "entries": entries.entries});
                put_json(bundle, node, &rel, &doc);
            }
            Err(e) => bundle.not_collected(Some(node), &what, e),
        }
    }
    true
}

/// One command of the node's SSH part: its file's name and its command line.
fn commands() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = UNITS
        .iter()
        .map(|u| {
            (
                format!("journal-{u}"),
                format!("journalctl --no-pager -o short-iso -n {JOURNAL_LINES} -u {u}.service"),
            )
        })
        .collect();
    out.push(("dmesg".to_string(), "dmesg".to_string()));
    out.into_iter()
        .map(|(name, cmd)| (name, privileged(&cmd)))
        .collect()
}

/// `cmd` through `sudo -n` when the login may use it without a password (core on RHCOS may),
/// else as the login: the journal and the kernel ring buffer may want root.
fn privileged(cmd: &str) -> String {
    format!("if sudo -n true 2>/dev/null; then sudo -n {cmd}; else {cmd}; fi")
}

/// What a command returned, beside its output file.
#[derive(Serialize)]
struct CommandRecord {
    name: String,
    command: String,
    status: Option<i32>,
    stderr: String,
    truncated: bool,
}

/// The SSH part; false when the node could not be reached.
async fn ssh_part(
    bundle: &Bundle,
    node: &str,
    ssh: &Result<Arc<dyn Remote>, String>,
    lines: &crate::output::NodeLines,
) -> bool {
    let remote = match ssh {
        Ok(r) => r,
        Err(why) => {
            bundle.not_collected(Some(node), "ssh", why);
            return false;
        }
    };
    let dir = format!("nodes/{node}/ssh");
    let mut records = Vec::new();
    for (name, command) in commands() {
        lines.set(node, format!("SSH: {name}"));
        let mut exec = Exec::new(&command).with_timeout(COMMAND_TIMEOUT);
        exec.output_cap = OUTPUT_MAX;
        match remote.exec(exec).await {
            Ok(out) => {
                let rel = format!("{dir}/{name}.txt");
                let text = String::from_utf8_lossy(&out.stdout);
                if let Err(e) = bundle.put_text(&rel, &text, out.truncated) {
                    bundle.not_collected(Some(node), &rel, format!("writing it: {e:#}"));
                }
                let stderr = out.stderr_text();
                records.push(CommandRecord {
                    name,
                    command,
                    status: out.status,
                    stderr: crate::secret::server_text(&stderr, 4096),
                    truncated: out.truncated,
                });
            }
            Err(e) if e.is_unreachable() && records.is_empty() => {
                bundle.not_collected(Some(node), "ssh", format!("not reached: {e}"));
                return false;
            }
            Err(e) => bundle.not_collected(Some(node), &format!("ssh {name}"), e),
        }
    }
    put_json(bundle, node, &format!("{dir}/commands.json"), &records);
    lines.set(node, "SSH: facts");
    match facts::gather(remote.as_ref()).await {
        Ok(f) => put_json(bundle, node, &format!("{dir}/facts.json"), &f),
        Err(e) => bundle.not_collected(Some(node), "ssh facts", e),
    }
    true
}
