//! The rules install-config.yaml and agent-config.yaml must follow: those the agent-based
//! installer applies (openshift/installer `pkg/asset/agent/`, `pkg/types/validation/`,
//! `pkg/types/baremetal/validation/`), and those it misses but that break or confuse an
//! installation (the rendezvous host, VIPs and static addresses, NMState references, duplicate
//! names). Facts shared with the inventory come from [`super::checks`]. Every rule reports
//! through a field path, so a problem lands on the line the fix goes on. docs/agent.md lists
//! them with example messages.

mod agent_config;
mod cross;
mod install_config;

pub use agent_config::agent_config;
pub use cross::cross;
pub use install_config::install_config;

use super::checks::{Check, Finding};
use super::Loaded;
use crate::yaml::{Problem, StringFields};

/// The string fields of both installer files, for the check of unquoted scalars the
/// installer reads as booleans or numbers: every field the types read as a string, and the
/// NMState fields inside `networkConfig`; passwords and the pull secret are not printed.
const STRING_FIELDS: StringFields = StringFields {
    free_form: super::nmstate::expects_string,
    secret: |path| path == "pullSecret" || path.ends_with(".password"),
};

/// Problems collected against one file.
struct Report<'a, T> {
    file: &'a Loaded<T>,
    problems: Vec<Problem>,
}

impl<'a, T> Report<'a, T> {
    fn new(file: &'a Loaded<T>) -> Self {
        Report {
            file,
            problems: Vec::new(),
        }
    }

    /// An error at `path`.
    fn push(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.problems.push(self.file.problem(path, message));
    }

    /// A check's finding at `path`, with its severity.
    fn finding(&mut self, path: impl Into<String>, f: Finding) {
        self.problems
            .push(self.file.finding(f.severity, path, f.message));
    }

    /// A check's verdict at `path`: its finding, if any.
    fn check(&mut self, path: impl Into<String>, verdict: Check) {
        if let Err(f) = verdict {
            self.finding(path, f);
        }
    }
}
