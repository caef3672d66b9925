//! After the install, the wait stage ejects the virtual media of every node bootstrap booted,
//! so a later reboot boots the disk and not the agent ISO again (the installed node would
//! start the agent a second time, or sit in its installer). A node is one bootstrap booted
//! when the boot stage entered a reset in its ledger (`RUN/ledger/boot/NODE.json`); nodes never
//! booted by bootstrap are not logged into.
//!
//! Each node's BMC is reached as the boot stage reaches it (the preflight's
//! [`checks::targets`]: address, credentials, TLS), and its system is checked to be the node
//! meant ([`redfish::NodeIdentity::check`]: MACs and UUID) before anything changes, so the wrong
//! server is never touched. Then [`Client::eject_cds`] ejects every CD/DVD holding an image,
//! the System's and the managers', as ironic `redfish/boot.py` `_eject_vmedia` does. At most
//! `boot.parallel` nodes at once, as the boot stage.
//!
//! A BMC that cannot be reached, is not the node meant or refuses the eject fails the node;
//! the others go on, and the stage fails naming each failed node, its BMC and the fix. A device
//! that still reads `Inserted` after an eject the BMC accepted (iDRAC keeps a stale `Inserted`)
//! is recorded as such, not a failure. A rerun ejects again, harmlessly: a device holding
//! nothing is left alone. Every node's record is [`MEDIA_FILE`] in the stage's folder.

use super::boot;
use crate::install::log::StageLog;
use crate::install::rundir::{RunDir, MEDIA_FILE};
use crate::inventory::Inventory;
use crate::output::NodeLines;
use crate::preflight::bmc::{self as checks, BmcTarget};
use crate::redfish::{self, Client, Ejected};
use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The fix for a node whose media may still hold the ISO.
pub const FIX: &str = "check the BMC, then rerun `bootstrap install`: the wait stage sees the cluster installed at once and ejects again; or eject it in the BMC's UI";

/// [`MEDIA_FILE`]: each booted node's virtual media after the install.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MediaRecord {
    /// One entry per node bootstrap booted, in the inventory's order.
    pub nodes: Vec<NodeMedia>,
}

/// One node's virtual media after the install.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeMedia {
    /// The node.
    pub node: String,
    /// Its BMC (the address, no credentials).
    pub bmc: String,
    /// When the node was handled.
    pub at: String,
    /// When its media were ejected (or found empty); none when they may still be inserted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ejected_at: Option<String>,
    /// Each device that held an image: its path, the image (URL redacted), the BMC's refusal,
    /// and whether it still reads `Inserted`.
    #[serde(default)]
    pub devices: Vec<Ejected>,
    /// What was done, in one line.
    pub outcome: String,
    /// Why the media may still be inserted, naming the BMC's own words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Every call made to the BMC (logged, not kept).
    #[serde(skip)]
    pub calls: Vec<redfish::Call>,
}

/// The nodes the boot stage entered a reset for, in the inventory's order.
pub fn booted(inv: &Inventory, run: &RunDir) -> Vec<String> {
    inv.nodes
        .nodes
        .iter()
        .map(|n| n.hostname.clone())
        .filter(|n| run.boot_ledger(n).is_file())
        .collect()
}

/// Whether the boot stage entered a reset for any node (a ledger entry is there), read
/// without the inventory.
pub fn any_booted(run: &RunDir) -> bool {
    let Some(dir) = run.boot_ledger("_").parent().map(Path::to_path_buf) else {
        return false;
    };
    fs_err::read_dir(dir).is_ok_and(|mut entries| {
        entries.any(|e| e.is_ok_and(|e| e.path().extension().is_some_and(|x| x == "json")))
    })
}

/// Ejects the media of `nodes` (their BMCs as the boot stage reaches them), at most
/// `parallel` at once, each node's progress on `lines`; one record per node, in order.
pub async fn eject_all(
    inv: &Inventory,
    nodes: &[String],
    lines: &NodeLines,
    cancel: Arc<AtomicBool>,
) -> Result<Vec<NodeMedia>> {
    let targets: Vec<BmcTarget> = checks::targets(inv)?
        .into_iter()
        .filter(|t| nodes.contains(&t.node))
        .collect();
    let gate = Arc::new(tokio::sync::Semaphore::new(boot::parallel(inv)));
    let mut tasks = tokio::task::JoinSet::new();
    for (index, target) in targets.into_iter().enumerate() {
        let gate = gate.clone();
        let lines = lines.clone();
        let cancel = cancel.clone();
        tasks.spawn(async move {
            let _permit = gate.acquire_owned().await;
            let mut rec = NodeMedia {
                node: target.node.clone(),
                bmc: crate::secret::redact_url(&target.endpoint.address),
                ..Default::default()
            };
            if cancel.load(Ordering::SeqCst) {
                rec.outcome = "not started: the run was interrupted".to_string();
                rec.error = Some(rec.outcome.clone());
            } else {
                eject_node(&target, &lines, &mut rec).await;
            }
            (index, rec)
        });
    }
    Ok(super::in_node_order(tasks, |why| NodeMedia {
        node: "?".to_string(),
        error: Some(why),
        ..Default::default()
    })
    .await)
}

/// One node: connected, checked to be the node meant, its CDs ejected; the outcome (or why
/// not) in `rec` and on its line.
async fn eject_node(target: &BmcTarget, lines: &NodeLines, rec: &mut NodeMedia) {
    let name = &target.node;
    lines.set(name, "ejecting the virtual media");
    rec.at = crate::install::state::now();
    let result = match Client::connect(&target.endpoint, redfish::Options::default()).await {
        Ok(client) => {
            let ejected = checked_eject(&client, target).await;
            rec.calls = client.calls();
            client.logout().await;
            ejected
        }
        Err(e) => Err(anyhow::Error::from(e)),
    };
    match result {
        Ok(devices) => {
            rec.devices = devices
                .into_iter()
                .map(|d| Ejected {
                    image: d.image.as_deref().map(crate::secret::redact_url),
                    ..d
                })
                .collect();
            judge(rec);
        }
        Err(e) => {
            rec.outcome = "media may still be inserted".to_string();
            rec.error = Some(format!("{e:#}"));
        }
    }
    match &rec.error {
        None => lines.set(name, &rec.outcome),
        Some(e) => lines.set(name, format!("media NOT ejected: {e}")),
    }
}

/// The identity check (the boot stage's: MACs and UUID), then the eject; GETs only until the
/// system is known to be the node meant.
async fn checked_eject(client: &Client, target: &BmcTarget) -> Result<Vec<Ejected>> {
    let found = client.identify().await?;
    target.identity.check(&found)?;
    Ok(client.eject_cds(&found.system).await?)
}

/// The outcome of the devices ejected: a refusal is a failure; a device that reads `Inserted`
/// after an accepted eject is said so, not failed.
fn judge(rec: &mut NodeMedia) {
    let refused: Vec<String> = rec
        .devices
        .iter()
        .filter_map(|d| d.refused.as_ref().map(|r| format!("{}: {r}", d.path)))
        .collect();
    if !refused.is_empty() {
        rec.outcome = "media may still be inserted: the BMC refused the eject".to_string();
        rec.error = Some(format!("the BMC refused to eject {}", refused.join("; ")));
        return;
    }
    rec.ejected_at = Some(rec.at.clone());
    let stale: Vec<&str> = rec
        .devices
        .iter()
        .filter(|d| d.reads_inserted)
        .map(|d| d.path.as_str())
        .collect();
    rec.outcome = match (rec.devices.len(), stale.is_empty()) {
        (0, _) => "media ejected (no virtual CD held an image)".to_string(),
        (n, true) => format!("media ejected ({n} CD/DVD)"),
        (n, false) => format!(
            "media ejected ({n} CD/DVD); {} still reads Inserted after the eject the BMC accepted (a stale flag, as iDRAC keeps)",
            stale.join(", ")
        ),
    };
}

/// Each node's calls and outcome into the log, every record into [`MEDIA_FILE`] in `out`; an
/// error naming every node whose media may still be inserted, its BMC and the fix.
pub fn record(records: &[NodeMedia], out: &Path, log: &mut StageLog) -> Result<()> {
    let mut failed = Vec::new();
    for r in records {
        for call in &r.calls {
            let status = call
                .status
                .map_or("no answer".to_string(), |s| s.to_string());
            log.line(&format!(
                "{}: {} {} -> {status}",
                r.node, call.method, call.path
            ))?;
        }
        for d in &r.devices {
            log.line(&format!(
                "{}: {} held {}{}{}",
                r.node,
                d.path,
                d.image.as_deref().unwrap_or("no image"),
                d.refused
                    .as_deref()
                    .map(|e| format!(", eject refused: {e}"))
                    .unwrap_or_default(),
                if d.reads_inserted {
                    ", still reads Inserted"
                } else {
                    ""
                }
            ))?;
        }
        log.line(&format!("{}: {}", r.node, r.outcome))?;
        if let Some(e) = &r.error {
            failed.push(format!("{} (BMC {}): {e}", r.node, r.bmc));
        }
    }
    fs_err::create_dir_all(out)?;
    let record = MediaRecord {
        nodes: records.to_vec(),
    };
    crate::fs::write_json(&out.join(MEDIA_FILE), &record)?;
    if !failed.is_empty() {
        bail!(
            "the cluster is installed, but the virtual media of {} of {} nodes may still hold the ISO, which a node may boot again at its next reboot: {}; {FIX}",
            failed.len(),
            records.len(),
            failed.join("; "),
        );
    }
    Ok(())
}

/// The stage's words for the records: `media ejected on N nodes`.
pub fn detail(records: &[NodeMedia]) -> String {
    match records.len() {
        0 => String::new(),
        n => format!(
            ", virtual media ejected on {n} {}",
            if n == 1 { "node" } else { "nodes" }
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(refused: Option<&str>, reads_inserted: bool) -> Ejected {
        Ejected {
            path: "/redfish/v1/Systems/1/VirtualMedia/Cd".to_string(),
            image: Some("http://10.0.0.1/agent.x86_64.iso".to_string()),
            refused: refused.map(str::to_string),
            reads_inserted,
        }
    }

    /// A BMC that cannot be reached fails its node, not the others: its record says why and
    /// is written, and the stage's error names the node, its BMC and the fix (a node that still
    /// holds the ISO may boot it again), after the nodes that were ejected.
    #[tokio::test]
    async fn an_unreachable_bmc_fails_the_stage_naming_the_node_its_bmc_and_the_fix() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let address = format!("http://127.0.0.1:{port}");
        let target = BmcTarget {
            node: "master-1".to_string(),
            index: 1,
            endpoint: redfish::Endpoint {
                address: address.clone(),
                credentials: None,
                trust: redfish::Trust::Insecure,
            },
            identity: redfish::NodeIdentity {
                macs: Vec::new(),
                uuid: None,
            },
            trust: "none".to_string(),
            credentials_ref: None,
            vendor: None,
        };
        let lines = NodeLines::new("wait", &[]);
        let mut failed = NodeMedia {
            node: "master-1".to_string(),
            bmc: address.clone(),
            ..Default::default()
        };
        eject_node(&target, &lines, &mut failed).await;
        assert!(failed.ejected_at.is_none(), "{failed:?}");
        assert!(failed.error.is_some(), "{failed:?}");
        let mut ok = NodeMedia {
            node: "master-0".to_string(),
            at: "t".to_string(),
            ..Default::default()
        };
        judge(&mut ok);

        let tmp = tempfile::tempdir().unwrap();
        let mut log = StageLog::open(&tmp.path().join("wait.log"), Vec::new()).unwrap();
        let out = tmp.path().join("wait");
        let e = record(&[ok, failed], &out, &mut log)
            .unwrap_err()
            .to_string();
        assert!(e.contains("1 of 2 nodes may still hold the ISO"), "{e}");
        assert!(e.contains(&format!("master-1 (BMC {address}): ")), "{e}");
        assert!(!e.contains("master-0"), "{e}");
        assert!(e.ends_with(FIX), "{e}");
        let written: MediaRecord =
            serde_json::from_slice(&fs_err::read(out.join(MEDIA_FILE)).unwrap()).unwrap();
        let outcome: Vec<(&str, bool)> = written
            .nodes
            .iter()
            .map(|n| (n.node.as_str(), n.ejected_at.is_some()))
            .collect();
        assert_eq!(outcome, [("master-0", true), ("master-1", false)]);
    }

    /// iDRAC keeps `Inserted` after an eject it did: recorded as such and not a failure; a
    /// refusal is a failure that names the device and the BMC's words.
    #[test]
    fn a_stale_inserted_is_recorded_and_a_refusal_fails() {
        let mut rec = NodeMedia {
            at: "t".to_string(),
            devices: vec![device(None, true)],
            ..Default::default()
        };
        judge(&mut rec);
        assert!(rec.error.is_none(), "{rec:?}");
        assert_eq!(rec.ejected_at.as_deref(), Some("t"));
        assert!(rec.outcome.contains("still reads Inserted"), "{rec:?}");

        let mut rec = NodeMedia {
            devices: vec![device(Some("HTTP 500: Base.GeneralError"), true)],
            ..Default::default()
        };
        judge(&mut rec);
        assert!(rec.ejected_at.is_none(), "{rec:?}");
        let e = rec.error.unwrap();
        assert!(e.contains("VirtualMedia/Cd: HTTP 500"), "{e}");
    }
}
