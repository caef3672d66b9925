//! `RUN/state.json`: per stage its status, when it started and ended, the sha256 of each input
//! and output, a one-line detail and its log. Written atomically after every change of status,
//! so a killed run leaves the last true picture (a stage left `running` by a process that is
//! gone is read as interrupted).

use super::stage::{Inputs, Stage};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The state file's format version.
pub const STATE_VERSION: u32 = 1;

/// Where a stage stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Not run yet (or its inputs were never recorded).
    Pending,
    /// Running now, or its process died while it ran.
    Running,
    /// Finished; its outputs are recorded.
    Done,
    /// Failed; the detail says why and the log says more.
    Failed,
    /// Stopped by SIGINT or SIGTERM (or its process died); the next run does it again.
    Interrupted,
}

impl Status {
    /// Its name as state.json and the status table write it.
    pub fn name(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Running => "running",
            Status::Done => "done",
            Status::Failed => "failed",
            Status::Interrupted => "interrupted",
        }
    }
}

/// One stage's record.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StageRecord {
    /// The stage.
    pub stage: Stage,
    /// Its status.
    pub status: Status,
    /// When its last attempt started (RFC 3339, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<String>,
    /// When its last attempt ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
    /// How long its last attempt took, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// The sha256 of each input of its last attempt (secrets only hashed).
    #[serde(default)]
    pub inputs: Inputs,
    /// The sha256 of each output (paths relative to the run directory), once done.
    #[serde(default)]
    pub outputs: BTreeMap<String, String>,
    /// One line: what it produced, or why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Its log, relative to the run directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
}

impl StageRecord {
    fn pending(stage: Stage) -> Self {
        StageRecord {
            stage,
            status: Status::Pending,
            started: None,
            ended: None,
            seconds: None,
            inputs: Inputs::default(),
            outputs: BTreeMap::new(),
            detail: None,
            log: None,
        }
    }
}

/// The whole state file.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunState {
    /// [`STATE_VERSION`].
    pub version: u32,
    /// The inventory of the last run.
    #[serde(default)]
    pub inventory: String,
    /// Every stage, in order.
    pub stages: Vec<StageRecord>,
}

impl RunState {
    /// Every stage pending.
    pub fn new() -> Self {
        RunState {
            version: STATE_VERSION,
            inventory: String::new(),
            stages: Stage::ALL.into_iter().map(StageRecord::pending).collect(),
        }
    }

    /// Reads `path`; a fresh state when it does not exist. Stages missing from the file are
    /// added as pending.
    pub fn load(path: &Path) -> Result<Self> {
        let text = match fs_err::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(RunState::new()),
            Err(e) => return Err(e.into()),
        };
        let mut state: RunState = serde_json::from_str(&text).with_context(|| {
            format!(
                "reading {}: not a state file of bootstrap install; move it away to start the run afresh",
                path.display()
            )
        })?;
        anyhow::ensure!(
            state.version == STATE_VERSION,
            "{}: state version {} is not {STATE_VERSION}; this run directory was written by another bootstrap",
            path.display(),
            state.version
        );
        let mut stages = Vec::new();
        for stage in Stage::ALL {
            let rec = state.stages.iter().find(|r| r.stage == stage).cloned();
            stages.push(rec.unwrap_or_else(|| StageRecord::pending(stage)));
        }
        state.stages = stages;
        Ok(state)
    }

    /// Writes it to `path` atomically.
    pub fn save(&self, path: &Path) -> Result<()> {
        crate::fs::write_json(path, self)
    }

    /// `stage`'s record.
    pub fn get(&self, stage: Stage) -> &StageRecord {
        &self.stages[stage as usize]
    }

    /// `stage`'s record, to change.
    pub fn get_mut(&mut self, stage: Stage) -> &mut StageRecord {
        &mut self.stages[stage as usize]
    }
}

impl Default for RunState {
    fn default() -> Self {
        RunState::new()
    }
}

/// Now, RFC 3339 in UTC to the second.
pub fn now() -> String {
    let now = time::OffsetDateTime::now_utc();
    now.replace_nanosecond(0)
        .unwrap_or(now)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}
