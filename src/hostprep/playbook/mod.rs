//! Playbooks: a subset of Ansible's playbook format with Ansible's semantics
//! (../shared/REFERENCE.md section 9), run against any [`crate::hostprep::Remote`].
//!
//! - [`load`] reads a playbook and checks everything before any host is touched: play keys,
//!   task keywords, modules (`ansible.builtin.x` accepted), module arguments
//!   ([`crate::hostprep::modules::check_args`]) and the syntax of every Jinja expression and
//!   template. Each problem is a [`crate::yaml::Problem`] at its `file:line:col`; all are
//!   collected. `gather_facts: true` is refused (bootstrap prep reads hardware facts itself).
//! - [`run`] runs it: per play, tasks in order, each by the hosts still active in parallel (at
//!   most [`RunOptions::forks`] at once); a failed or unreachable host runs nothing more;
//!   handlers notified by changed tasks run once at the end of the play, in definition order.
//!   Task keywords: `name`, `when`, `register`, `loop` (+ `loop_control: {loop_var, label}`),
//!   `changed_when`, `failed_when`, `until`/`retries`/`delay`, `notify`, `become`,
//!   `ignore_errors`, `check_mode`, `args`, `vars`, `tags` (ignored), `listen` (handlers).
//!   Variables, lowest first: host (and group) vars, play vars, `set_fact` and registered
//!   results, task vars, extra vars; then the magic ones (`inventory_hostname`, `group_names`,
//!   `groups`, `hostvars` (the inventory's variables), `ansible_check_mode`, `playbook_dir`).
//!   `debug`, `assert`, `fail` and `set_fact` run in the engine; every other module through
//!   [`crate::hostprep::modules::run`] on the host.
//! - [`Report`]: per play, task and host the result, the recap per host counted as
//!   ansible-playbook does ([`Report::recap_text`] prints it the same way), [`Report::success`].
//! - [`inventory`]: Ansible inventory files (INI and YAML), for `-i FILE`.
//!
//! Expressions are minijinja with Ansible's filters, tests and Python's string and dict
//! methods ([`expr`]). No event or log line carries variables: only a task's own message.

mod engine;
pub mod expr;
pub mod inventory;
pub mod model;
mod parse;
pub mod recap;
mod run;

pub use model::{Play, Playbook, Task};
pub use parse::{load, parse};
pub use recap::{HostResult, ItemResult, PlayReport, Recap, Report, Status, TaskReport};
pub use run::{matches, run, Event, Host, RunOptions};
