//! The agent-based installer's inputs, one source of facts: install-config.yaml and
//! agent-config.yaml as typed values (read strictly, and written by `bootstrap render`),
//! and `bootstrap validate`, which checks them as the installer does and further (rules the
//! installer misses, cross-file rules), every problem reported at once as
//! `file:line:col: path: message`.
//!
//! Each file is read by the one strict loader ([`crate::yaml`]); a failure there is the file's
//! one problem and its rules are skipped, but the other file is still checked. Then the rules of
//! `rules.rs` run on each file, and the cross-file rules when both files read cleanly.
//!
//! [`validate_files`] is the library entry: the renderer checks what it wrote with it.

pub mod agent_config;
pub mod checks;
pub mod conversion;
pub mod install_config;
pub mod nmstate;
pub mod nodes_config;
pub mod rules;
mod sshkey;

use crate::yaml::{self, Positions, Problem};
use std::fmt;
use std::path::PathBuf;

pub use crate::yaml::Loaded;

use crate::secret::Secret;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Files larger than this are refused before parsing (a 500-node agent-config.yaml is about
/// 2 MiB).
pub(crate) const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// A secret an installer file carries in clear (the pull secret, a BMC password): read and
/// written as the plain string, printed (`{}`, `{:?}`) as `<redacted>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InlineSecret(pub Secret);

impl InlineSecret {
    /// The value, for the rules that judge it and the file that carries it.
    pub fn expose(&self) -> &str {
        self.0.expose()
    }
}

impl Serialize for InlineSecret {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0.expose())
    }
}

impl<'de> Deserialize<'de> for InlineSecret {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(InlineSecret(Secret::new(String::deserialize(d)?)))
    }
}

/// A problem in one of the two files: which file (its origin, as given) and the problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentProblem {
    /// The file the problem is in, as the caller named it.
    pub origin: String,
    /// Where, which field, what.
    pub problem: Problem,
}

impl fmt::Display for AgentProblem {
    /// `file:line:col: path: message` (line and column left out when unknown, path when empty).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        self.problem.render(&self.origin, &mut out);
        f.write_str(&out)
    }
}

/// Checks install-config.yaml and agent-config.yaml, each given as (origin, text); either may
/// be absent. Returns every problem found, in file order (install-config first), each naming
/// its origin. Empty means both files are valid. Cross-file rules (host counts against
/// replicas, VIPs against host addresses, matching names) run only when both are given and
/// both pass the schema.
pub fn validate_files(
    install_config: Option<(&str, &str)>,
    agent_config: Option<(&str, &str)>,
) -> Vec<AgentProblem> {
    // The common case first, at half the cost: valid files need no positions, so each is read
    // once without the position index; only when anything is found are they read again with
    // it, so every problem carries its line and column.
    let quick = check_files(install_config, agent_config, Positions::Skip);
    if quick.is_empty() {
        return quick;
    }
    check_files(install_config, agent_config, Positions::Index)
}

fn check_files(
    install_config: Option<(&str, &str)>,
    agent_config: Option<(&str, &str)>,
    positions: Positions,
) -> Vec<AgentProblem> {
    let mut ic_problems = Vec::new();
    let mut ac_problems = Vec::new();
    let ic = install_config.map(|(origin, text)| {
        let loaded = yaml::parse(text, positions).map(|mut l| {
            // The rules judge what the installer will use: deprecated fields up-converted.
            ic_problems.extend(conversion::upconvert(&mut l));
            l
        });
        (origin, loaded)
    });
    let ac = agent_config.map(|(origin, text)| (origin, yaml::parse(text, positions)));
    if let Some((_, loaded)) = &ic {
        match loaded {
            Ok(l) => {
                ic_problems.extend(l.warnings.iter().cloned());
                ic_problems.extend(rules::install_config(l));
            }
            Err(p) => ic_problems.push(p.clone()),
        }
    }
    if let Some((_, loaded)) = &ac {
        match loaded {
            Ok(l) => {
                ac_problems.extend(l.warnings.iter().cloned());
                ac_problems.extend(rules::agent_config(l));
            }
            Err(p) => ac_problems.push(p.clone()),
        }
    }
    if let (Some((_, Ok(i))), Some((_, Ok(a)))) = (&ic, &ac) {
        ac_problems.extend(rules::cross(i, a));
    }
    let mut out = Vec::new();
    for (origin, problems) in [
        (ic.as_ref().map(|(o, _)| *o), ic_problems),
        (ac.as_ref().map(|(o, _)| *o), ac_problems),
    ] {
        let Some(origin) = origin else { continue };
        let mut problems = problems;
        // File order reads best; the sort is stable, so problems at one place keep rule order.
        problems.sort_by_key(|p| p.location);
        out.extend(problems.into_iter().map(|problem| AgentProblem {
            origin: origin.to_string(),
            problem,
        }));
    }
    out
}

/// What `bootstrap validate` checks: either file or both (then the cross-file rules run too).
#[derive(Clone, Debug, Default)]
pub struct ValidateFiles {
    /// install-config.yaml.
    pub install_config: Option<PathBuf>,
    /// agent-config.yaml.
    pub agent_config: Option<PathBuf>,
}

/// What `bootstrap validate` found: every problem (errors and warnings) and the files checked.
#[derive(Clone, Debug)]
pub struct ValidationReport {
    /// Every problem, in file order.
    pub problems: Vec<AgentProblem>,
    /// The files checked, as named.
    pub checked: Vec<String>,
}

impl ValidationReport {
    /// Errors (warnings do not fail the files).
    pub fn errors(&self) -> usize {
        self.problems
            .iter()
            .filter(|p| p.problem.is_error())
            .count()
    }

    /// True when there is no error.
    pub fn ok(&self) -> bool {
        self.errors() == 0
    }
}

impl serde::Serialize for ValidationReport {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let list: Vec<serde_json::Value> = self
            .problems
            .iter()
            .map(|p| {
                serde_json::json!({
                    "file": p.origin,
                    "line": p.problem.location.map(|l| l.line),
                    "column": p.problem.location.map(|l| l.column),
                    "path": p.problem.path,
                    "message": p.problem.message,
                    "severity": p.problem.severity,
                })
            })
            .collect();
        serde_json::json!({ "problems": list, "ok": self.ok() }).serialize(s)
    }
}

impl fmt::Display for ValidationReport {
    /// One line per problem, then `ok: ...` when there is no error.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for p in &self.problems {
            writeln!(f, "{p}")?;
        }
        let errors = self.errors();
        let warnings = self.problems.len() - errors;
        let files = self.checked.join(" and ");
        match (errors, warnings) {
            (0, 0) => writeln!(f, "ok: {files} valid"),
            (0, 1) => writeln!(f, "ok: {files} valid, with 1 warning"),
            (0, n) => writeln!(f, "ok: {files} valid, with {n} warnings"),
            _ => Ok(()),
        }
    }
}

/// Runs `bootstrap validate`: reads and checks the files named. A file that cannot be read is
/// its one problem; the other is still checked.
pub fn validate(files: &ValidateFiles) -> ValidationReport {
    let mut problems = Vec::new();
    let mut read = |path: &Option<PathBuf>| -> Option<(String, String)> {
        let origin = path.as_ref()?.display().to_string();
        match yaml::read_text(path.as_ref()?, MAX_FILE_BYTES, "an installer file") {
            Ok(text) => Some((origin, text)),
            Err(e) => {
                problems.push(AgentProblem {
                    problem: Problem::new(None, "", format!("cannot be read: {e}")),
                    origin,
                });
                None
            }
        }
    };
    let ic = read(&files.install_config);
    let ac = read(&files.agent_config);
    problems.extend(validate_files(
        ic.as_ref().map(|(o, t)| (o.as_str(), t.as_str())),
        ac.as_ref().map(|(o, t)| (o.as_str(), t.as_str())),
    ));
    let checked = [&files.install_config, &files.agent_config]
        .into_iter()
        .flatten()
        .map(|p| p.display().to_string())
        .collect();
    ValidationReport { problems, checked }
}
