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
