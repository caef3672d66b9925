//! One prep run over every node: connect, read the hardware facts and check them against the
//! inventory, run the playbooks, and record a verdict per node. `bootstrap prep` and the
//! install's prep stage both run it.
//!
//! Its files ([`PrepFiles`], named by the caller: the install's run directory names them in
//! `RUN/prep/`): each node's facts (what it reported) and verdict, the whole report, and an
//! Ansible inventory with the pinned host keys (the same hosts for ansible-playbook). Host keys
//! learned on first contact go to the known_hosts file the hosts were made with.

use super::checks::{self, Finding};
use super::facts;
use super::hosts::{self, PrepHost};
use super::playbook::{self, Event, Playbook, Recap, Report as PlaybookReport, RunOptions};
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

/// Reads every reachable node's facts, saves them in `facts`, and checks them against the
/// inventory.
async fn check_all(
    inv: &Inventory,
    hosts: &[PrepHost],
    verdicts: &mut [NodeVerdict],
    forks: usize,
    facts: &Path,
    events: &(dyn Fn(PrepEvent) + Sync),
) -> Result<()> {
    use futures_util::StreamExt;
    let results: Vec<Option<Result<Vec<Finding>>>> =
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
                Some(check_one(inv, node, h, facts).await)
            })
            .buffered(forks.max(1))
            .collect()
            .await;
    for (v, r) in verdicts.iter_mut().zip(results) {
        match r {
            Some(Ok(findings)) => {
                let errors = findings
                    .iter()
                    .filter(|f| f.severity != Severity::Warning)
                    .count();
                let step = match errors {
                    0 => "hardware as the inventory says".to_string(),
                    n => format!("{n} hardware problem{}", if n == 1 { "" } else { "s" }),
                };
                events(PrepEvent::Node {
                    node: v.node.clone(),
                    step,
                });
                v.findings = findings.iter().map(ToString::to_string).collect();
                v.problems = errors;
            }
            Some(Err(e)) => {
                v.findings
                    .push(format!("{}: reading hardware facts failed: {e:#}", v.node));
                v.problems += 1;
            }
            None => {}
        }
    }
    Ok(())
}

async fn check_one(
    inv: &Inventory,
    node: &crate::inventory::model::Node,
    h: &PrepHost,
    facts_dir: &Path,
) -> Result<Vec<Finding>> {
    let facts = facts::gather(h.ssh.as_ref()).await?;
    let file = facts_dir.join(format!("{}.json", node.hostname));
    crate::fs::write_atomic(&file, facts.to_json().as_bytes())?;
    Ok(checks::check(
        node,
        &checks::expectations(inv, node),
        &facts,
    ))
}

/// Loads and checks every playbook before any host is touched; every problem of every one,
/// one line each (`FILE:LINE:COL: PATH: MESSAGE`).
pub fn load_playbooks(paths: &[PathBuf]) -> Result<Vec<(PathBuf, Playbook)>, String> {
    let mut loaded = Vec::new();
    let mut problems = String::new();
    for path in paths {
        match playbook::load(path) {
            Ok(pb) => loaded.push((path.clone(), pb)),
            Err(found) => problems.push_str(&crate::yaml::render_problems(
                &path.display().to_string(),
                &found,
            )),
        }
    }
    match problems.is_empty() {
        true => Ok(loaded),
        false => Err(problems.trim_end().to_string()),
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
