//! What a playbook holds once loaded and checked: plays, tasks and handlers, with their
//! expressions still as text (compiled once at load to refuse bad syntax, evaluated per host).

use std::path::PathBuf;

use serde_json::{Map, Value};

/// A loaded playbook: every play, checked before any host is touched.
#[derive(Clone, Debug)]
pub struct Playbook {
    /// The file it was read from.
    pub path: PathBuf,
    /// Its directory (`playbook_dir`; where `files/` and `templates/` are looked up).
    pub dir: PathBuf,
    /// The plays, in order.
    pub plays: Vec<Play>,
}

/// One play: hosts, variables, tasks and handlers.
#[derive(Clone, Debug, Default)]
pub struct Play {
    /// `name` (the hosts pattern when absent, as Ansible prints it).
    pub name: String,
    /// `hosts`: a pattern (`all`, groups, host names, `a:b`, `!x`, `&x`).
    pub hosts: String,
    /// `vars`.
    pub vars: Map<String, Value>,
    /// `tasks`.
    pub tasks: Vec<Task>,
    /// `handlers`.
    pub handlers: Vec<Task>,
    /// `become`.
    pub become_: Option<bool>,
    /// `check_mode`.
    pub check_mode: Option<bool>,
    /// `ignore_errors`.
    pub ignore_errors: Option<bool>,
}

/// One task (or handler).
#[derive(Clone, Debug, Default)]
pub struct Task {
    /// `name`; when absent the module's name, as Ansible prints it.
    pub name: String,
    /// Where it is in the file (`plays[0].tasks[2]`), for messages.
    pub path: String,
    /// The module's short name (`command`, `set_fact`, ...).
    pub module: &'static str,
    /// The module's arguments as written (free form in `_raw_params`), templated per host.
    pub args: Map<String, Value>,
    /// `when`: every expression must be true.
    pub when: Vec<String>,
    /// `register`.
    pub register: Option<String>,
    /// `loop`: a list, or a template that gives one.
    pub loop_: Option<Value>,
    /// `loop_control.loop_var` (`item`).
    pub loop_var: String,
    /// `loop_control.label`: a template shown for each item instead of the item.
    pub label: Option<String>,
    /// `changed_when`: changed when every expression is true.
    pub changed_when: Option<Vec<String>>,
    /// `failed_when`: failed when every expression is true.
    pub failed_when: Option<Vec<String>>,
    /// `until`: retried until every expression is true.
    pub until: Option<Vec<String>>,
    /// `retries`.
    pub retries: Option<u32>,
    /// `delay` in seconds.
    pub delay: Option<f64>,
    /// `notify`: handler names or `listen` topics.
    pub notify: Vec<String>,
    /// `listen` (handlers).
    pub listen: Vec<String>,
    /// `become`.
    pub become_: Option<bool>,
    /// `ignore_errors`.
    pub ignore_errors: Option<bool>,
    /// `check_mode`.
    pub check_mode: Option<bool>,
    /// `vars`.
    pub vars: Map<String, Value>,
}

impl Task {
    /// Whether a handler answers `name` (its name or one of its `listen` topics).
    pub fn answers(&self, name: &str) -> bool {
        self.name == name || self.listen.iter().any(|l| l == name)
    }
}
