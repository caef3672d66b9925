//! `bootstrap install status --run DIR`: the stages as `state.json` records them, read without
//! the lock (a run may be going on). A stage recorded `running` whose process is gone is shown
//! as interrupted, as the next run will treat it.

use super::lock::read_holder;
use super::rundir::{RunDir, BOOT_DIR, BOOT_FILE, STATE_FILE};
use super::stage::Stage;
use super::state::{RunState, Status};
use anyhow::Result;
use serde::Serialize;
use std::fmt;
use std::path::Path;

/// One stage's line.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StageStatus {
    /// The stage.
    pub stage: Stage,
    /// pending, running, done, failed or interrupted.
    pub status: String,
    /// When its last attempt started.
    pub started: Option<String>,
    /// When it ended.
    pub ended: Option<String>,
    /// How long it took, in seconds.
    pub seconds: Option<f64>,
    /// One line: what it produced or why it failed.
    pub detail: String,
    /// Its log, relative to the run directory.
    pub log: Option<String>,
}

/// `bootstrap install status`'s result.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusReport {
    /// The run directory.
    pub run: String,
    /// The inventory of its last run.
    pub inventory: String,
    /// The run holding the lock now (`pid N on HOST since T`), if any.
    pub running: Option<String>,
    /// Every stage, in order.
    pub stages: Vec<StageStatus>,
    /// Each node the boot stage recorded (`RUN/boot/NODE.json`): its BMC's vendor, model,
    /// firmware and the profile followed, and the last step reached.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NodeBoot>,
}

/// A node as the boot stage recorded it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeBoot {
    /// The node.
    pub node: String,
    /// `PROFILE (MANUFACTURER MODEL, manager M, firmware F, detected|bmc.vendor: V)`.
    pub vendor: Option<String>,
    /// The last step reached, or what was found.
    pub outcome: String,
    /// Why it failed.
    pub error: Option<String>,
}

/// The boot stage's node records, by name; none when the stage has not run. A record that
/// cannot be read is shown as such, not skipped.
fn boot_nodes(dir: &RunDir) -> Vec<NodeBoot> {
    let Ok(entries) = fs_err::read_dir(dir.root().join(BOOT_DIR)) else {
        return Vec::new();
    };
    let mut paths: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter(|p| p.file_name().is_some_and(|n| n != BOOT_FILE))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|path| {
            let name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let record = fs_err::read(path)
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok());
            let text = |key: &str| {
                record
                    .as_ref()
                    .and_then(|r| r.get(key))
                    .and_then(|v| v.as_str())
                    .map(str::to_string)
            };
            NodeBoot {
                node: text("node").unwrap_or(name),
                vendor: text("vendor"),
                outcome: match &record {
                    Some(_) => text("outcome").unwrap_or_default(),
                    None => format!("{} cannot be read", path.display()),
                },
                error: text("error"),
            }
        })
        .collect()
}

/// Reads `run`'s state; an error when it has none.
pub fn status(run: &Path) -> Result<StatusReport> {
    let dir = RunDir::new(run);
    anyhow::ensure!(
        dir.state().exists(),
        "{} has no {STATE_FILE}: no bootstrap install has run there (bootstrap install --inventory DIR --run {} starts one)",
        run.display(),
        run.display()
    );
    let state = RunState::load(&dir.state())?;
    let holder = match read_holder(&dir.lock())? {
        Some(Ok(h)) if h.alive() => Some(h.to_string()),
        _ => None,
    };
    let stages = state
        .stages
        .iter()
        .map(|rec| {
            let gone = rec.status == Status::Running && holder.is_none();
            let status = match gone {
                true => Status::Interrupted,
                false => rec.status,
            };
            let detail = match &rec.detail {
                Some(d) => d.clone(),
                None if gone => "its process ended while it ran".to_string(),
                None => String::new(),
            };
            StageStatus {
                stage: rec.stage,
                status: status.name().to_string(),
                started: rec.started.clone(),
                ended: rec.ended.clone(),
                seconds: rec.seconds,
                detail,
                log: rec.log.clone(),
            }
        })
        .collect();
    Ok(StatusReport {
        run: run.display().to_string(),
        inventory: state.inventory,
        running: holder,
        stages,
        nodes: boot_nodes(&dir),
    })
}

/// `12.3s`, `4m05s`, `1h02m`.
fn duration(seconds: f64) -> String {
    let s = seconds.max(0.0);
    if s < 60.0 {
        format!("{s:.1}s")
    } else if s < 3600.0 {
        format!("{}m{:02}s", (s / 60.0) as u64, (s as u64) % 60)
    } else {
        format!("{}h{:02}m", (s / 3600.0) as u64, ((s as u64) / 60) % 60)
    }
}

impl fmt::Display for StatusReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "run {} (inventory {})", self.run, self.inventory)?;
        if let Some(h) = &self.running {
            writeln!(f, "running now: {h}")?;
        }
        let rows: Vec<[String; 4]> = self
            .stages
            .iter()
            .map(|s| {
                [
                    s.stage.name().to_string(),
                    s.status.clone(),
                    s.seconds.map(duration).unwrap_or_else(|| "-".to_string()),
                    s.detail.clone(),
                ]
            })
            .collect();
        let header = ["STAGE", "STATUS", "DURATION", "DETAIL"].map(String::from);
        let mut width = [0usize; 3];
        for r in std::iter::once(&header).chain(&rows) {
            for (w, c) in width.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        for r in std::iter::once(&header).chain(&rows) {
            let line = format!(
                "{:<a$}  {:<b$}  {:>c$}  {}",
                r[0],
                r[1],
                r[2],
                r[3],
                a = width[0],
                b = width[1],
                c = width[2]
            );
            writeln!(f, "{}", line.trim_end())?;
        }
        for n in &self.nodes {
            let vendor = n.vendor.as_deref().unwrap_or("vendor not read");
            write!(f, "node {}: {vendor}: {}", n.node, n.outcome)?;
            match &n.error {
                Some(e) => writeln!(f, ": {e}")?,
                None => writeln!(f)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each node the boot stage recorded shows its BMC's vendor line and outcome; `boot.json`
    /// is not a node, and an unreadable record is said to be so.
    #[test]
    fn status_names_each_booted_node_with_its_vendor_profile() {
        let tmp = tempfile::tempdir().unwrap();
        let boot = tmp.path().join(BOOT_DIR);
        fs_err::create_dir_all(&boot).unwrap();
        fs_err::write(
            boot.join("master-0.json"),
            r#"{"node": "master-0", "outcome": "powered on", "vendor": "dell-idrac10 (Dell Inc. PowerEdge R770, manager 17G Monolithic, firmware 1.20.25.00, detected)"}"#,
        )
        .unwrap();
        fs_err::write(boot.join("master-1.json"), "{").unwrap();
        fs_err::write(boot.join(BOOT_FILE), r#"{"url": "http://x"}"#).unwrap();
        let nodes = boot_nodes(&RunDir::new(tmp.path()));
        assert_eq!(nodes.len(), 2, "{nodes:?}");
        let report = StatusReport {
            run: "r".into(),
            inventory: "i".into(),
            running: None,
            stages: Vec::new(),
            nodes,
        };
        let text = report.to_string();
        assert!(text.contains("node master-0: dell-idrac10 (Dell Inc. PowerEdge R770, manager 17G Monolithic, firmware 1.20.25.00, detected): powered on"), "{text}");
        assert!(
            text.contains("node master-1: vendor not read: ") && text.contains("cannot be read"),
            "{text}"
        );
    }

    #[test]
    fn durations_read_as_people_say_them() {
        assert_eq!(super::duration(0.04), "0.0s");
        assert_eq!(super::duration(125.0), "2m05s");
        assert_eq!(super::duration(3725.0), "1h02m");
    }
}
