//! `bootstrap install status --run DIR`: the stages as `state.json` records them, read without
//! the lock (a run may be going on). A stage recorded `running` whose process is gone is shown
//! as interrupted, as the next run will treat it. Each node the boot stage recorded is shown
//! with whether the wait stage ejected its virtual media after the install (`wait/media.json`,
//! or the staged one of a wait attempt that failed since).

use super::lock::read_holder;
use super::rundir::{RunDir, BOOT_DIR, BOOT_FILE, MEDIA_FILE, STATE_FILE, WAIT_DIR};
use super::stage::eject::MediaRecord;
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
    /// Each node being added on day two (`RUN/ledger/add/NODE.json`): every step it reached,
    /// with its time, and its last problem.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub added: Vec<AddedStatus>,
}

/// A node being added on day two, as the day-two stages recorded it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AddedStatus {
    /// The node.
    pub node: String,
    /// The last step reached (`reset to boot the node ISO`, `joined: Node Ready`, ...).
    pub last: String,
    /// When.
    pub at: Option<String>,
    /// Whether day two is done with it (prepped and labelled).
    pub done: bool,
    /// Its last problem, or why its record cannot be read.
    pub error: Option<String>,
    /// Every step, in order.
    pub steps: Vec<super::stage::AddedStep>,
}

fn added(dir: &RunDir) -> Vec<AddedStatus> {
    super::stage::added_nodes(dir)
        .into_iter()
        .map(|a| match a {
            Ok(a) => AddedStatus {
                last: a.last().to_string(),
                at: a.steps.last().map(|s| s.at.clone()),
                done: a.reached(Stage::AddPrep.name(), super::stage::LABELLED_STEP),
                node: a.node,
                error: a.error,
                steps: a.steps,
            },
            Err(why) => AddedStatus {
                node: "?".to_string(),
                last: String::new(),
                at: None,
                done: false,
                error: Some(why),
                steps: Vec::new(),
            },
        })
        .collect()
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
    /// Its virtual media after the install; none until the wait stage has handled it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub media: Option<MediaStatus>,
}

/// A node's virtual media as the wait stage left them after the install.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MediaStatus {
    /// True when they were ejected (or held nothing).
    pub ejected: bool,
    /// When.
    pub at: Option<String>,
    /// What was done, or why they may still be inserted.
    pub detail: String,
}

impl fmt::Display for MediaStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ejected {
            true => write!(
                f,
                "media ejected {}",
                self.at.as_deref().unwrap_or_default()
            ),
            false => write!(f, "media still inserted: {}", self.detail),
        }
    }
}

/// Each node's media as the wait stage recorded them, by node: the staged record of a wait
/// attempt that failed (the newest: a run clears the staging folder when it starts), else the
/// published one; empty when the wait stage has not reached the nodes. A record that cannot be
/// read is said so for `nodes`.
fn media(dir: &RunDir, nodes: &[String]) -> std::collections::BTreeMap<String, MediaStatus> {
    let rel = Path::new(WAIT_DIR).join(MEDIA_FILE);
    let staged = dir.staging().join(&rel);
    let path = match staged.is_file() {
        true => staged,
        false => dir.root().join(&rel),
    };
    let bytes = match fs_err::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Default::default(),
        Err(e) => return unreadable(nodes, &format!("{e}")),
    };
    let record: MediaRecord = match serde_json::from_slice(&bytes) {
        Ok(r) => r,
        Err(e) => return unreadable(nodes, &format!("{} cannot be read: {e}", path.display())),
    };
    record
        .nodes
        .into_iter()
        .map(|n| {
            let status = MediaStatus {
                ejected: n.ejected_at.is_some() && n.error.is_none(),
                at: n.ejected_at.or(Some(n.at)),
                detail: n.error.unwrap_or(n.outcome),
            };
            (n.node, status)
        })
        .collect()
}

fn unreadable(nodes: &[String], why: &str) -> std::collections::BTreeMap<String, MediaStatus> {
    nodes
        .iter()
        .map(|n| {
            let status = MediaStatus {
                ejected: false,
                at: None,
                detail: format!("unknown: {why}"),
            };
            (n.clone(), status)
        })
        .collect()
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
                media: None,
            }
        })
        .collect()
}

/// The boot stage's node records with each node's media after the install.
fn nodes(dir: &RunDir) -> Vec<NodeBoot> {
    let mut nodes = boot_nodes(dir);
    let names: Vec<String> = nodes.iter().map(|n| n.node.clone()).collect();
    let mut media = media(dir, &names);
    for n in &mut nodes {
        n.media = media.remove(&n.node);
    }
    nodes
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
        nodes: nodes(&dir),
        added: added(&dir),
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
            if let Some(e) = &n.error {
                write!(f, ": {e}")?;
            }
            match &n.media {
                Some(m) => writeln!(f, "; {m}")?,
                None => writeln!(f)?,
            }
        }
        for a in &self.added {
            let state = if a.done { "added" } else { "being added" };
            write!(f, "day two {} ({state}): {}", a.node, a.last)?;
            if let Some(at) = &a.at {
                write!(f, " at {at}")?;
            }
            match &a.error {
                Some(e) => writeln!(f, "; {e}")?,
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
            added: Vec::new(),
        };
        let text = report.to_string();
        assert!(text.contains("node master-0: dell-idrac10 (Dell Inc. PowerEdge R770, manager 17G Monolithic, firmware 1.20.25.00, detected): powered on"), "{text}");
        assert!(
            text.contains("node master-1: vendor not read: ") && text.contains("cannot be read"),
            "{text}"
        );
    }

    fn booted_run() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        let boot = tmp.path().join(BOOT_DIR);
        fs_err::create_dir_all(&boot).unwrap();
        for node in ["master-0", "master-1"] {
            fs_err::write(
                boot.join(format!("{node}.json")),
                format!(r#"{{"node": "{node}", "outcome": "powered on"}}"#),
            )
            .unwrap();
        }
        tmp
    }

    fn report(nodes: Vec<NodeBoot>) -> String {
        StatusReport {
            run: "r".into(),
            inventory: "i".into(),
            running: None,
            stages: Vec::new(),
            nodes,
            added: Vec::new(),
        }
        .to_string()
    }

    /// After the install each node says whether its virtual media were ejected, from
    /// `wait/media.json`; the staged record of a wait attempt that failed since wins; before
    /// the wait stage reached them nothing is said, as before.
    #[test]
    fn status_says_per_node_whether_the_media_were_ejected_after_the_install() {
        let tmp = booted_run();
        let dir = RunDir::new(tmp.path());
        let before = nodes(&dir);
        assert!(before.iter().all(|n| n.media.is_none()), "{before:?}");
        assert!(!report(before).contains("media"));
        let wait = tmp.path().join(WAIT_DIR);
        fs_err::create_dir_all(&wait).unwrap();
        fs_err::write(
            wait.join(MEDIA_FILE),
            r#"{"nodes": [
                {"node": "master-0", "bmc": "https://b0", "at": "2026-01-01T00:00:00Z", "ejectedAt": "2026-01-01T00:00:00Z", "devices": [], "outcome": "media ejected (1 CD/DVD)"},
                {"node": "master-1", "bmc": "https://b1", "at": "2026-01-01T00:00:01Z", "devices": [], "outcome": "media may still be inserted", "error": "connecting to https://b1: timed out"}
            ]}"#,
        )
        .unwrap();
        let found = nodes(&dir);
        assert_eq!(
            found[0].media,
            Some(MediaStatus {
                ejected: true,
                at: Some("2026-01-01T00:00:00Z".into()),
                detail: "media ejected (1 CD/DVD)".into()
            })
        );
        let json = serde_json::to_value(&found[1]).unwrap();
        assert_eq!(json["media"]["ejected"], false, "{json}");
        let text = report(found);
        assert!(
            text.contains(
                "node master-0: vendor not read: powered on; media ejected 2026-01-01T00:00:00Z"
            ),
            "{text}"
        );
        assert!(
            text.contains("node master-1: vendor not read: powered on; media still inserted: connecting to https://b1: timed out"),
            "{text}"
        );
        // A failed attempt since: its staged record is the newer.
        let staged = dir.staging().join(WAIT_DIR);
        fs_err::create_dir_all(&staged).unwrap();
        fs_err::write(
            staged.join(MEDIA_FILE),
            r#"{"nodes": [{"node": "master-0", "bmc": "b", "at": "t2", "outcome": "media may still be inserted", "error": "refused"}]}"#,
        )
        .unwrap();
        let found = nodes(&dir);
        assert_eq!(found[0].media.as_ref().map(|m| m.ejected), Some(false));
        assert!(found[1].media.is_none(), "{found:?}");
    }

    /// A media record that is not what the wait stage writes is said so on every node, not a
    /// panic and not taken for "ejected".
    #[test]
    fn a_corrupt_media_record_is_said_so_per_node() {
        let tmp = booted_run();
        let wait = tmp.path().join(WAIT_DIR);
        fs_err::create_dir_all(&wait).unwrap();
        fs_err::write(wait.join(MEDIA_FILE), "{\"nodes\": [{\"node\"").unwrap();
        let found = nodes(&RunDir::new(tmp.path()));
        assert_eq!(found.len(), 2);
        for n in &found {
            let m = n.media.as_ref().unwrap();
            assert!(!m.ejected);
            assert!(m.detail.contains("media.json cannot be read"), "{m:?}");
        }
        let text = report(found);
        assert!(
            text.contains("master-1: vendor not read: powered on; media still inserted: unknown: "),
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
