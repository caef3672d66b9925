//! The modules a playbook task may call on a host, with Ansible's semantics
//! (../shared/REFERENCE.md section 9). Each runs through [`Remote::exec`] only.
//!
//! The engine ([`super::playbook`]) handles `assert`, `fail`, `debug` and `set_fact` itself
//! (they touch no host); everything in [`REMOTE`] is run here by [`run`].

use std::path::Path;

use serde_json::{Map, Value};

use super::Remote;

/// The modules run on a host, by their short names.
pub const REMOTE: &[&str] = &[
    "command",
    "shell",
    "copy",
    "template",
    "file",
    "lineinfile",
    "stat",
    "systemd_service",
    "systemd",
    "service",
    "sysctl",
    "modprobe",
    "wait_for",
];

/// The modules the engine runs itself.
pub const ENGINE: &[&str] = &["assert", "fail", "debug", "set_fact"];

/// A module name as a playbook may write it: `copy`, `ansible.builtin.copy`, and the
/// collections' names for sysctl and modprobe (`ansible.posix.sysctl`,
/// `community.general.modprobe`). Returns the short name, or `None` when it is not ours.
pub fn canonical(name: &str) -> Option<&'static str> {
    let short = name
        .strip_prefix("ansible.builtin.")
        .or_else(|| name.strip_prefix("ansible.posix."))
        .or_else(|| name.strip_prefix("community.general."))
        .unwrap_or(name);
    REMOTE.iter().chain(ENGINE).find(|m| **m == short).copied()
}

/// What a module call gets besides its arguments.
pub struct ModuleCtx<'a> {
    /// The host.
    pub remote: &'a dyn Remote,
    /// The login user (for `become`).
    pub user: &'a str,
    /// `become: true` on the task or play.
    pub become_: bool,
    /// `--check` or `check_mode: true`: report what would change, change nothing.
    pub check: bool,
    /// `--diff`: fill [`ModuleResult::diff`] for copy, template and lineinfile.
    pub diff: bool,
    /// The playbook's directory: relative `src` paths (copy, template) are looked up in
    /// `DIR/files/` and `DIR/templates/` first, then `DIR/`, as Ansible does.
    pub playbook_dir: &'a Path,
    /// Renders a template's text with the task's variables (the `template` module).
    pub render: &'a (dyn Fn(&str) -> Result<String, String> + Sync),
    /// Each command's timeout.
    pub timeout: std::time::Duration,
}

/// What a module call did.
#[derive(Clone, Debug, Default)]
pub struct ModuleResult {
    /// Whether it changed the host (or would have, in check mode).
    pub changed: bool,
    /// Whether it failed (before `failed_when` is applied by the engine).
    pub failed: bool,
    /// Whether it did nothing by its own rules (a command in check mode, `creates` present).
    pub skipped: bool,
    /// A message for a person.
    pub msg: Option<String>,
    /// A unified diff (before -> after) when `--diff` asked for one.
    pub diff: Option<String>,
    /// The result's other fields as Ansible names them (`rc`, `stdout`, `stdout_lines`,
    /// `stderr`, `stderr_lines`, `stat`, `state`, ...), for `register`.
    pub data: Map<String, Value>,
}

/// Why a module call could not be made at all (bad arguments, an unreachable host); a module
/// that ran and failed returns `Ok` with `failed: true`.
#[derive(Debug, thiserror::Error)]
pub enum ModuleError {
    /// The arguments do not fit the module: names the argument and what it expects.
    #[error("{0}")]
    Args(String),
    /// The host could not run the command.
    #[error(transparent)]
    Remote(#[from] super::RemoteError),
}

// TEMPORARY: replaced by the modules helper's. Just `command` and `shell`, so the playbook
// engine can be tested before the modules land.

/// Runs `module` on the host (TEMPORARY: command and shell only).
pub async fn run(module: &str, args: &Map<String, Value>, ctx: &ModuleCtx<'_>) -> Result<ModuleResult, ModuleError> {
    let raw = args.get("_raw_params").or_else(|| args.get("cmd")).and_then(Value::as_str).unwrap_or("");
    let command = match module {
        "shell" => raw.to_string(),
        "command" => raw.to_string(),
        other => return Err(ModuleError::Args(format!("{other}: not available yet"))),
    };
    if ctx.check {
        return Ok(ModuleResult { skipped: true, msg: Some("skipped in check mode".into()), ..ModuleResult::default() });
    }
    let command = super::with_become(&command, ctx.become_, ctx.user);
    let out = ctx.remote.exec(super::Exec::new(&command).with_timeout(ctx.timeout)).await?;
    let (stdout, stderr) = (out.stdout_text(), out.stderr_text());
    let mut data = Map::new();
    data.insert("rc".into(), Value::from(out.status.unwrap_or(-1)));
    data.insert("stdout_lines".into(), Value::from(stdout.lines().collect::<Vec<_>>()));
    data.insert("stderr_lines".into(), Value::from(stderr.lines().collect::<Vec<_>>()));
    data.insert("stdout".into(), Value::from(stdout));
    data.insert("stderr".into(), Value::from(stderr));
    let failed = !out.success();
    Ok(ModuleResult { changed: true, failed, msg: failed.then(|| "non-zero return code".into()), data, ..ModuleResult::default() })
}

/// Checks a module's arguments (TEMPORARY: command and shell only).
pub fn check_args(module: &str, args: &Map<String, Value>) -> Result<(), String> {
    let accepted = ["_raw_params", "cmd", "chdir", "creates", "removes"];
    match args.keys().find(|k| !accepted.contains(&k.as_str())) {
        Some(k) => Err(format!("{module} takes no argument '{k}'; it takes: {}", accepted[1..].join(", "))),
        None => Ok(()),
    }
}
