//! One prep run over every node: connect, read the hardware facts and check them against the
//! inventory, run the playbooks, and record a verdict per node. `bootstrap prep` and the
//! install's prep stage both run it.
//!
//! Its files ([`PrepFiles`], named by the caller: the install's run directory names them in
//! `RUN/prep/`): each node's facts (what it reported) and verdict, the whole report, and an
//! Ansible inventory with the pinned host keys (the same hosts for ansible-playbook). Host keys
//! learned on first contact go to the known_hosts file the hosts were made with.

use super::checks;
use super::facts::{self, Facts, FactsError};
use super::hosts::{self, PrepHost};
use super::playbook::{self, Event, Playbook, Recap, Report as PlaybookReport, RunOptions};
use crate::inventory::model::Node;
use crate::inventory::Inventory;
use crate::yaml::Severity;
use anyhow::Result;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How a prep run goes.
#[derive(Clone, Debug)]
pub struct PrepOptions {
    /// Parallel hosts.
    pub forks: usize,
    /// `--check`: report what would change, change nothing.
    pub check: bool,
    /// `--diff`: show the changes of copy, template and lineinfile.
    pub diff: bool,
    /// `--limit`: only these hosts (an Ansible host pattern).
    pub limit: Option<String>,
    /// `-e KEY=VALUE`.
    pub extra_vars: serde_json::Map<String, serde_json::Value>,
    /// How long one command may run.
    pub command_timeout: Duration,
    /// How long a node that does not answer is tried again (it may be rebooting).
    pub reachable_within: Duration,
}

/// What the run reports as it goes (for live lines; library code prints nothing).
#[derive(Clone, Debug)]
pub enum PrepEvent {
    /// A node's step: `connecting`, `reading facts`, `checked: 2 problems`, ...
    Node { node: String, step: String },
    /// A playbook starts.
    Playbook { path: PathBuf },
    /// The playbook engine's own event.
    Play(Event),
}

/// One node's verdict.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeVerdict {
    /// The node.
    pub node: String,
    /// `address:port` it was reached at.
    pub address: String,
    /// Whether it answered.
    pub reachable: bool,
    /// Why it did not answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The SHA-256 fingerprint of the host key it presented.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_key: Option<String>,
    /// The checks' findings, one line each (errors and warnings).
    pub findings: Vec<String>,
    /// How many of the findings are errors (the rest are warnings).
    pub problems: usize,
    /// Per playbook (its path), the node's recap.
    pub playbooks: BTreeMap<String, Recap>,
    /// Reachable, no error finding, every playbook without failure.
    pub ok: bool,
}

/// The whole run.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PrepReport {
    /// Per node.
    pub nodes: Vec<NodeVerdict>,
    /// Each playbook's full report, by path.
    pub playbooks: Vec<(String, PlaybookReport)>,
}

impl PrepReport {
    /// Every node ok, and at least one node (a `--limit` that matches none is no pass).
    pub fn success(&self) -> bool {
        !self.nodes.is_empty() && self.nodes.iter().all(|n| n.ok)
    }

    /// The nodes that are not ok.
    pub fn failed(&self) -> Vec<&NodeVerdict> {
        self.nodes.iter().filter(|n| !n.ok).collect()
    }
}

/// What to run: the hosts, the inventory when the checks run (site hosts), the playbooks
/// (already loaded: a bad one was refused before any host was touched).
pub struct PrepRun<'a> {
    /// The hosts.
    pub hosts: Vec<PrepHost>,
    /// The site inventory, for the facts checks; `None` runs the playbooks only.
    pub inventory: Option<&'a Inventory>,
    /// The playbooks, in order, with their paths.
    pub playbooks: &'a [(PathBuf, Playbook)],
}

/// Where a prep run writes its files.
#[derive(Clone, Debug)]
pub struct PrepFiles {
    /// The folder of each node's verdict, `NODE.json`.
    pub verdicts: PathBuf,
    /// The folder of each node's facts, `NODE.json`.
    pub facts: PathBuf,
    /// The whole report.
    pub report: PathBuf,
    /// The hosts for ansible-playbook, reached as prep reached them.
    pub ansible_inventory: PathBuf,
    /// The host keys the inventory pins, which the Ansible inventory names.
    pub pinned_known_hosts: PathBuf,
}

/// Runs prep and writes its files where `files` says.
pub async fn run(
    what: PrepRun<'_>,
    opts: &PrepOptions,
    files: &PrepFiles,
    events: &(dyn Fn(PrepEvent) + Sync),
) -> Result<PrepReport> {
    fs_err::create_dir_all(&files.verdicts)?;
    fs_err::create_dir_all(&files.facts)?;
    let hosts: Vec<PrepHost> = what
        .hosts
        .into_iter()
        .filter(|h| {
            opts.limit
                .as_deref()
                .is_none_or(|l| playbook::matches(l, &h.host()))
        })
        .collect();
    write_ansible_inventory(&hosts, files)?;
    let mut verdicts = reach_all(&hosts, opts, events).await;
    if let Some(inv) = what.inventory {
        check_all(inv, &hosts, &mut verdicts, opts.forks, &files.facts, events).await?;
    }
    let reachable: Vec<_> = hosts
        .iter()
        .zip(&verdicts)
        .filter(|(_, v)| v.reachable)
        .map(|(h, _)| h.host())
        .collect();
    let mut report = PrepReport::default();
    for (path, pb) in what.playbooks {
        events(PrepEvent::Playbook { path: path.clone() });
        let run_opts = RunOptions {
            forks: opts.forks,
            check: opts.check,
            diff: opts.diff,
            limit: None,
            extra_vars: opts.extra_vars.clone(),
            timeout: opts.command_timeout,
        };
        let result =
            playbook::run(pb, &reachable, &run_opts, &|e| events(PrepEvent::Play(e))).await;
        let name = path.display().to_string();
        for v in verdicts.iter_mut().filter(|v| v.reachable) {
            v.playbooks.insert(
                name.clone(),
                result.recap.get(&v.node).copied().unwrap_or_default(),
            );
        }
        report.playbooks.push((name, result));
    }
    for v in &mut verdicts {
        v.ok = v.reachable
            && v.problems == 0
            && v.playbooks
                .values()
                .all(|r| r.failed == 0 && r.unreachable == 0);
        crate::fs::write_atomic(
            &files.verdicts.join(format!("{}.json", v.node)),
            &serde_json::to_vec_pretty(v)?,
        )?;
    }
    report.nodes = verdicts;
    crate::fs::write_atomic(&files.report, &serde_json::to_vec_pretty(&report)?)?;
    Ok(report)
}

/// The Ansible inventory and the pinned host keys it names.
fn write_ansible_inventory(hosts: &[PrepHost], files: &PrepFiles) -> Result<()> {
    let pinned = &files.pinned_known_hosts;
    crate::fs::write_atomic(pinned, hosts::pinned_known_hosts(hosts).as_bytes())?;
    let yaml = hosts::ansible_inventory_yaml(hosts, pinned)?;
    crate::fs::write_atomic(&files.ansible_inventory, yaml.as_bytes())
}

/// Connects to every host (at most `forks` at once), trying one that does not answer for
/// `reachable_within`; a verdict per host, in the hosts' order.
async fn reach_all(
    hosts: &[PrepHost],
    opts: &PrepOptions,
    events: &(dyn Fn(PrepEvent) + Sync),
) -> Vec<NodeVerdict> {
    use futures_util::StreamExt;
    futures_util::stream::iter(hosts)
        .map(|h| async move {
            events(PrepEvent::Node {
                node: h.name.clone(),
                step: "connecting".into(),
            });
            let mut v = NodeVerdict {
                node: h.name.clone(),
                address: format!("{}:{}", h.endpoint.address, h.endpoint.port),
                ..NodeVerdict::default()
            };
            match h.ssh.wait_reachable(opts.reachable_within).await {
                Ok(()) => {
                    v.reachable = true;
                    v.host_key = h.ssh.host_key_fingerprint();
                    events(PrepEvent::Node {
                        node: h.name.clone(),
                        step: "connected".into(),
                    });
                }
                Err(e) => {
                    events(PrepEvent::Node {
                        node: h.name.clone(),
                        step: format!("unreachable: {e}"),
                    });
                    v.error = Some(e.to_string());
                }
            }
            v
        })
        .buffered(opts.forks.max(1))
        .collect()
        .await
}

/// Reads every reachable node's facts, saves them in `facts_dir`, and checks them against the
/// inventory. A node lost while its facts are read is unreachable from then on (no playbook
/// runs on it); facts it answered but that could not be read are a problem of that node.
async fn check_all(
    inv: &Inventory,
    hosts: &[PrepHost],
    verdicts: &mut [NodeVerdict],
    forks: usize,
    facts_dir: &Path,
    events: &(dyn Fn(PrepEvent) + Sync),
) -> Result<()> {
    use futures_util::StreamExt;
    let results: Vec<Option<(&Node, Result<Facts, FactsError>)>> =
        futures_util::stream::iter(hosts.iter().zip(verdicts.iter()))
            .map(|(h, v)| async move {
                if !v.reachable {
                    return None;
                }
                let node = inv.nodes.nodes.iter().find(|n| n.hostname == h.name)?;
                events(PrepEvent::Node {
                    node: h.name.clone(),
                    step: "reading facts".into(),
                });
                Some((node, facts::gather(h.ssh.as_ref()).await))
            })
            .buffered(forks.max(1))
            .collect()
            .await;
    for (v, r) in verdicts.iter_mut().zip(results) {
        let Some((node, facts)) = r else { continue };
        let step = judge(inv, node, facts, v, facts_dir)?;
        events(PrepEvent::Node {
            node: v.node.clone(),
            step,
        });
    }
    Ok(())
}

/// One node's facts into its verdict (the facts saved, the findings, or why there are none);
/// returns the node's step for its live line.
fn judge(
    inv: &Inventory,
    node: &Node,
    facts: Result<Facts, FactsError>,
    v: &mut NodeVerdict,
    facts_dir: &Path,
) -> Result<String> {
    Ok(match facts {
        Ok(facts) => {
            let file = facts_dir.join(format!("{}.json", node.hostname));
            crate::fs::write_atomic(&file, facts.to_json().as_bytes())?;
            let findings = checks::check(node, &checks::expectations(inv, node), &facts);
            v.problems = findings
                .iter()
                .filter(|f| f.severity != Severity::Warning)
                .count();
            v.findings = findings.iter().map(ToString::to_string).collect();
            match v.problems {
                0 => "hardware as the inventory says".to_string(),
                n => format!("{n} hardware problem{}", if n == 1 { "" } else { "s" }),
            }
        }
        Err(e) if e.is_unreachable() => {
            v.reachable = false;
            v.error = Some(e.to_string());
            format!("unreachable: {e}")
        }
        Err(e) => {
            v.findings.push(facts_failure(&v.node, &e));
            v.problems += 1;
            "reading hardware facts failed".to_string()
        }
    })
}

/// The finding for facts a node answered but that could not be read: one line naming the
/// node once.
fn facts_failure(node: &str, e: &FactsError) -> String {
    match e {
        FactsError::Remote(e) => format!("{node}: reading hardware facts failed: {e}"),
        other => other.to_string(),
    }
}

/// Playbooks refused before any host was touched: every problem of every one, as
/// `FILE:LINE:COL: PATH: MESSAGE` lines.
#[derive(Debug, thiserror::Error)]
#[error("{}", render_refused(.0))]
pub struct RefusedPlaybooks(
    /// Each refused playbook with its problems, in the order given.
    pub Vec<(PathBuf, Vec<crate::yaml::Problem>)>,
);

fn render_refused(refused: &[(PathBuf, Vec<crate::yaml::Problem>)]) -> String {
    let rendered: Vec<String> = refused
        .iter()
        .map(|(path, found)| crate::yaml::render_problems(&path.display().to_string(), found))
        .collect();
    rendered.join("\n")
}

/// Loads and checks every playbook before any host is touched; every problem of every one.
pub fn load_playbooks(paths: &[PathBuf]) -> Result<Vec<(PathBuf, Playbook)>, RefusedPlaybooks> {
    let mut loaded = Vec::new();
    let mut refused = Vec::new();
    for path in paths {
        match playbook::load(path) {
            Ok(pb) => loaded.push((path.clone(), pb)),
            Err(found) => refused.push((path.clone(), found)),
        }
    }
    match refused.is_empty() {
        true => Ok(loaded),
        false => Err(RefusedPlaybooks(refused)),
    }
}

/// One event on stderr: a node's step on its live line, a task's result above the lines.
pub fn show(lines: &crate::output::NodeLines, event: PrepEvent) {
    match event {
        PrepEvent::Node { node, step } => lines.set(&node, step),
        PrepEvent::Playbook { path } => lines.println(&format!("playbook {}", path.display())),
        PrepEvent::Play(e) => {
            if let Some(line) = event_line(&e) {
                lines.println(&line);
            }
        }
    }
}

/// An engine event as ansible-playbook prints it (`TASK [name]`, `changed: [host]`), or `None`
/// for an event with nothing to say.
pub fn event_line(event: &Event) -> Option<String> {
    Some(match event {
        Event::PlayStart { name } => format!("PLAY [{name}]"),
        Event::TaskStart { name } => format!("TASK [{name}]"),
        Event::HandlerStart { name } => format!("RUNNING HANDLER [{name}]"),
        Event::HostResult {
            host,
            status,
            msg,
            diff,
            item,
            ..
        } => {
            let mut line = format!("{}: [{host}]", status.word());
            if let Some(item) = item {
                line.push_str(&format!(" => (item={item})"));
            }
            if let Some(msg) = msg.as_deref().filter(|m| !m.is_empty()) {
                line.push_str(&format!(" => {msg}"));
            }
            if let Some(diff) = diff {
                line.push('\n');
                line.push_str(diff.trim_end());
            }
            line
        }
    })
}

impl std::fmt::Display for PrepReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let width = self.nodes.iter().map(|n| n.node.len()).max().unwrap_or(0);
        for n in &self.nodes {
            let verdict = match (n.reachable, n.ok) {
                (false, _) => "UNREACHABLE",
                (true, true) => "ok",
                (true, false) => "FAILED",
            };
            writeln!(f, "{:width$}  {:<21}  {verdict}", n.node, n.address)?;
            if let Some(e) = &n.error {
                writeln!(f, "  {e}")?;
            }
            for finding in &n.findings {
                writeln!(f, "  {finding}")?;
            }
        }
        for (path, report) in &self.playbooks {
            writeln!(f, "\n{path}")?;
            write!(f, "{}", report.recap_text())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hostprep::RemoteError;

    /// A node that answered the connection but was lost while its facts were read (a reboot)
    /// was counted as one with a hardware problem, and playbooks still ran on it: it is
    /// unreachable. Facts it answered but that cannot be read stay a problem of the node.
    #[test]
    fn a_node_lost_while_its_facts_are_read_is_unreachable_not_a_hardware_problem() {
        let site = Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory/example-site");
        let inv = crate::inventory::load(&site).unwrap_or_else(|e| panic!("{e}"));
        let node = &inv.nodes.nodes[0];
        let out = tempfile::tempdir().unwrap();
        let verdict = || NodeVerdict {
            node: node.hostname.clone(),
            reachable: true,
            ..NodeVerdict::default()
        };

        let mut lost = verdict();
        let gone = FactsError::Remote(RemoteError::Unreachable {
            host: format!("{} (10.0.0.9:22)", node.hostname),
            detail: "connection lost".into(),
        });
        let step = judge(&inv, node, Err(gone), &mut lost, out.path()).unwrap();
        assert!(step.starts_with("unreachable: "), "{step}");
        assert!(!lost.reachable && lost.problems == 0 && lost.findings.is_empty());
        assert!(
            lost.error.as_deref().unwrap().contains("connection lost"),
            "{lost:?}"
        );

        let mut failed = verdict();
        let script = FactsError::Script {
            host: node.hostname.clone(),
            status: Some(1),
            truncated: false,
            stderr: "boom".into(),
        };
        judge(&inv, node, Err(script), &mut failed, out.path()).unwrap();
        assert!(failed.reachable && failed.error.is_none() && failed.problems == 1);
        assert_eq!(
            failed.findings,
            [format!(
                "{}: reading hardware facts failed (exit status Some(1)): boom",
                node.hostname
            )]
        );
    }

    /// Two refused playbooks' problems were joined without a line break (the last line of one
    /// and the first of the next on one line): one problem per line.
    #[test]
    fn two_refused_playbooks_print_one_problem_per_line() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, good) = (
            dir.path().join("a.yml"),
            dir.path().join("b.yml"),
            dir.path().join("good.yml"),
        );
        fs_err::write(&a, "- hosts: all\n  tasks:\n    - yum: {name: x}\n").unwrap();
        fs_err::write(&b, "- hosts: all\n  serial: 1\n  tasks: []\n").unwrap();
        fs_err::write(&good, "- hosts: all\n  tasks: []\n").unwrap();
        let refused = load_playbooks(&[a.clone(), good, b.clone()]).unwrap_err();
        let files: Vec<&PathBuf> = refused.0.iter().map(|(p, _)| p).collect();
        assert_eq!(files, [&a, &b]);
        let text = refused.to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0].starts_with(&format!("{}:3:7: ", a.display())),
            "{text}"
        );
        assert!(
            lines[1].starts_with(&format!("{}:2:3: ", b.display())),
            "{text}"
        );
    }
}
