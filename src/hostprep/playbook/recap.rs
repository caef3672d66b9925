//! The run's report: per play, task and host what happened, and the recap per host counted as
//! ansible-playbook counts it, with its text rendering (`PLAY RECAP`).

use std::collections::BTreeMap;

use serde::Serialize;

/// What a task did on a host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Ran, changed nothing.
    Ok,
    /// Ran and changed the host (or would have, in check mode).
    Changed,
    /// `when` was false (for every item of a loop).
    Skipped,
    /// Failed; the host runs no further task.
    Failed,
    /// The host could not be reached; it runs no further task.
    Unreachable,
    /// Failed under `ignore_errors`; the host goes on.
    Ignored,
}

impl Status {
    /// The word ansible-playbook prints before `[host]`.
    pub fn word(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Changed => "changed",
            Status::Skipped => "skipping",
            Status::Failed => "fatal",
            Status::Unreachable => "unreachable",
            Status::Ignored => "failed (ignored)",
        }
    }
}

/// The whole run.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Each play, in order.
    pub plays: Vec<PlayReport>,
    /// Per host, its counts.
    pub recap: BTreeMap<String, Recap>,
}

/// One play.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlayReport {
    /// Its name.
    pub name: String,
    /// The hosts its pattern (and `--limit`) selected.
    pub hosts: Vec<String>,
    /// Each task run (handlers after the tasks, marked).
    pub tasks: Vec<TaskReport>,
}

/// One task of a play, on every host that ran it.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskReport {
    /// Its name.
    pub name: String,
    /// Whether it is a handler.
    pub handler: bool,
    /// Per host, what it did.
    pub hosts: BTreeMap<String, HostResult>,
}

/// One task on one host.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HostResult {
    /// What it did.
    pub status: Status,
    /// Whether it changed the host (also under `ignore_errors`).
    pub changed: bool,
    /// The module's message, or why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub msg: Option<String>,
    /// The change, with `--diff`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// A loop's items.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<ItemResult>,
}

/// One item of a loop.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ItemResult {
    /// The item, or its `loop_control.label`.
    pub item: String,
    /// What it did.
    pub status: Status,
    /// Its message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub msg: Option<String>,
}

/// A host's counts, as ansible-playbook's recap has them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Recap {
    /// Tasks that ran without failing (changed ones and ignored failures included).
    pub ok: u32,
    /// Tasks that changed the host.
    pub changed: u32,
    /// Tasks the host was unreachable for.
    pub unreachable: u32,
    /// Tasks that failed.
    pub failed: u32,
    /// Tasks skipped.
    pub skipped: u32,
    /// Always 0: `rescue` is not supported.
    pub rescued: u32,
    /// Failures under `ignore_errors`.
    pub ignored: u32,
}

impl Recap {
    /// Counts one task's result, as Ansible's stats do.
    pub fn count(&mut self, result: &HostResult) {
        match result.status {
            Status::Failed => self.failed += 1,
            Status::Unreachable => self.unreachable += 1,
            Status::Skipped => self.skipped += 1,
            Status::Ok | Status::Changed | Status::Ignored => {
                self.ok += 1;
                self.changed += u32::from(result.changed);
                self.ignored += u32::from(result.status == Status::Ignored);
            }
        }
    }
}

impl Report {
    /// No host failed or was unreachable.
    pub fn success(&self) -> bool {
        self.recap
            .values()
            .all(|r| r.failed == 0 && r.unreachable == 0)
    }

    /// The recap as ansible-playbook prints it.
    pub fn recap_text(&self) -> String {
        let mut out = banner("PLAY RECAP");
        for (host, r) in &self.recap {
            let fields = [
                ("ok", r.ok),
                ("changed", r.changed),
                ("unreachable", r.unreachable),
                ("failed", r.failed),
                ("skipped", r.skipped),
                ("rescued", r.rescued),
                ("ignored", r.ignored),
            ];
            let counts: Vec<String> = fields.iter().map(|(k, n)| format!("{k}={n:<4}")).collect();
            out.push_str(format!("{host:<26} : {}", counts.join(" ")).trim_end());
            out.push('\n');
        }
        out
    }
}

/// `TITLE ****...` to 80 characters, as Ansible's banners when not on a terminal (79 columns).
pub fn banner(title: &str) -> String {
    let stars = 79usize.saturating_sub(title.chars().count()).max(3);
    format!("{title} {}\n", "*".repeat(stars))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(status: Status, changed: bool) -> HostResult {
        HostResult {
            status,
            changed,
            msg: None,
            diff: None,
            items: Vec::new(),
        }
    }

    #[test]
    fn counts_and_text_follow_ansible() {
        let mut r = Recap::default();
        for (s, c) in [
            (Status::Ok, false),
            (Status::Changed, true),
            (Status::Ignored, true),
            (Status::Skipped, false),
        ] {
            r.count(&result(s, c));
        }
        assert_eq!(
            r,
            Recap {
                ok: 3,
                changed: 2,
                skipped: 1,
                ignored: 1,
                ..Recap::default()
            }
        );
        let mut report = Report::default();
        report.recap.insert("node-1".into(), r);
        assert!(report.success());
        let text = report.recap_text();
        assert!(text.starts_with("PLAY RECAP ****"));
        assert_eq!(text.lines().next().unwrap().len(), 80);
        assert_eq!(
            text.lines().nth(1).unwrap(),
            "node-1                     : ok=3    changed=2    unreachable=0    failed=0    skipped=1    rescued=0    ignored=1"
        );
        report.recap.get_mut("node-1").unwrap().unreachable = 1;
        assert!(!report.success());
    }
}
