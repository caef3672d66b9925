//! `bootstrap validate`: install-config.yaml and agent-config.yaml checked as the agent-based
//! installer reads them, and further (rules the installer misses, cross-file rules), with every
//! problem reported at once as `file:line:col: path: message`.
//!
//! Each file is read in three passes (position index, header, strict schema, as
//! `mirror/config.rs` does); a failure there is the file's one problem and its rules are
//! skipped, but the other file is still checked. Then the rules of `rules.rs` run on each file,
//! and the cross-file rules when both files read cleanly.
//!
//! [`validate_files`] is the library entry: the renderer checks what it wrote with it.

pub mod agent_config;
pub mod install_config;
pub mod nmstate;
pub mod rules;

use crate::cli::ValidateArgs;
use crate::output::OutputFormat;
use crate::yaml::{self, quote, Index, Location, Problem, Shape};
use anyhow::Result;
use serde::de::DeserializeOwned;
use std::fmt;
use std::process::ExitCode;

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

/// A file read through the strict schema, with its position index for the rules.
#[derive(Debug)]
pub struct Loaded<T> {
    /// The parsed document.
    pub value: T,
    /// Field path to position.
    pub(crate) index: Index,
}

impl<T> Loaded<T> {
    /// A problem at `path`, placed where the field is written or, when it is absent, where its
    /// nearest written parent is.
    pub fn problem(&self, path: impl Into<String>, message: impl Into<String>) -> Problem {
        let path = path.into();
        Problem::new(locate(&self.index, &path), path, message)
    }
}

/// Where `path` is written, else its nearest written parent (`hosts[1].interfaces` absent:
/// `hosts[1]`), else the top of the file. A scalar is placed at its value; a mapping or list at
/// its key (`baremetal:`), where a reader looks for it, rather than at its first entry.
pub(crate) fn locate(index: &Index, path: &str) -> Option<Location> {
    let mut p = path;
    loop {
        let found = match index.get(p).map(|e| e.shape) {
            Some(Shape::Map | Shape::Seq) => index.key_location(p),
            Some(_) => index.location(p),
            None => None,
        };
        if let Some(loc) = found {
            return Some(loc);
        }
        if p.is_empty() {
            return Some(Location { line: 1, column: 1 });
        }
        let cut = p.rfind(['.', '[']).unwrap_or(0);
        p = &p[..cut];
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
    if all_valid_fast(install_config, agent_config) {
        return Vec::new();
    }
    let ic = install_config.map(|(origin, text)| (origin, install_config::parse(text)));
    let ac = agent_config.map(|(origin, text)| (origin, agent_config::parse(text)));
    let mut ic_problems = Vec::new();
    let mut ac_problems = Vec::new();
    if let Some((_, loaded)) = &ic {
        match loaded {
            Ok(l) => ic_problems.extend(rules::install_config(l)),
            Err(p) => ic_problems.push(p.clone()),
        }
    }
    if let Some((_, loaded)) = &ac {
        match loaded {
            Ok(l) => ac_problems.extend(rules::agent_config(l)),
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

/// The common case first, at half the cost: valid files need no positions, so each is read
/// once into its schema, without the position index, and the rules run against an empty index.
/// Any doubt (a parse error, a header, a rule) returns false and the caller does the full read,
/// whose problems carry their lines and columns.
fn all_valid_fast(
    install_config: Option<(&str, &str)>,
    agent_config: Option<(&str, &str)>,
) -> bool {
    fn quick<T: DeserializeOwned>(text: &str) -> Option<Loaded<T>> {
        let value = serde_saphyr::from_str_with_options(text, yaml::options()).ok()?;
        Some(Loaded {
            value,
            index: Index::default(),
        })
    }
    let ic = match install_config {
        Some((_, text)) => match quick::<install_config::InstallConfig>(text) {
            Some(l)
                if FileKind::INSTALL_CONFIG
                    .header_ok(&l.value.api_version, l.value.kind.as_deref()) =>
            {
                Some(l)
            }
            _ => return false,
        },
        None => None,
    };
    let ac = match agent_config {
        Some((_, text)) => match quick::<agent_config::AgentConfig>(text) {
            Some(l)
                if FileKind::AGENT_CONFIG.header_ok(&l.value.api_version, Some(&l.value.kind)) =>
            {
                Some(l)
            }
            _ => return false,
        },
        None => None,
    };
    if ic
        .as_ref()
        .is_some_and(|l| !rules::install_config(l).is_empty())
        || ac
            .as_ref()
            .is_some_and(|l| !rules::agent_config(l).is_empty())
    {
        return false;
    }
    match (&ic, &ac) {
        (Some(i), Some(a)) => rules::cross(i, a).is_empty(),
        _ => true,
    }
}

/// `bootstrap validate`: reads the files given, prints every problem (or an "ok" line) on stdout,
/// exit 1 when there is any problem.
pub fn run(args: ValidateArgs, output: OutputFormat) -> Result<ExitCode> {
    let mut problems = Vec::new();
    // A file that cannot be read is its one problem; the other is still checked.
    let mut read = |path: &Option<std::path::PathBuf>| -> Option<(String, String)> {
        let origin = path.as_ref()?.display().to_string();
        match fs_err::read_to_string(path.as_ref()?) {
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
    let ic = read(&args.install_config);
    let ac = read(&args.agent_config);
    problems.extend(validate_files(
        ic.as_ref().map(|(o, t)| (o.as_str(), t.as_str())),
        ac.as_ref().map(|(o, t)| (o.as_str(), t.as_str())),
    ));
    let checked: Vec<String> = [&args.install_config, &args.agent_config]
        .into_iter()
        .flatten()
        .map(|p| p.display().to_string())
        .collect();
    print(&problems, &checked, output)?;
    Ok(if problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The problems on stdout: one line each, or the JSON document.
fn print(problems: &[AgentProblem], checked: &[String], output: OutputFormat) -> Result<()> {
    match output {
        OutputFormat::Json => {
            let list: Vec<serde_json::Value> = problems
                .iter()
                .map(|p| {
                    serde_json::json!({
                        "file": p.origin,
                        "line": p.problem.location.map(|l| l.line),
                        "column": p.problem.location.map(|l| l.column),
                        "path": p.problem.path,
                        "message": p.problem.message,
                    })
                })
                .collect();
            let doc = serde_json::json!({ "problems": list, "ok": problems.is_empty() });
            println!("{}", serde_json::to_string_pretty(&doc)?);
        }
        OutputFormat::Text => {
            for p in problems {
                println!("{p}");
            }
            if problems.is_empty() {
                println!("ok: {} valid", checked.join(" and "));
            } else {
                eprintln!(
                    "{} problem{} found",
                    problems.len(),
                    if problems.len() == 1 { "" } else { "s" }
                );
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Loading: index, header, strict schema
// ---------------------------------------------------------------------------------------------

/// What distinguishes the two files when loading.
pub(crate) struct FileKind {
    /// How messages name the document.
    document: &'static str,
    api_version: &'static str,
    /// The kind; `required` false means it may be left out (install-config).
    kind: &'static str,
    kind_required: bool,
    /// Older apiVersions and what to do about them.
    old_versions: &'static [(&'static str, &'static str)],
    hint: fn(&str, &str) -> Option<&'static str>,
}

impl FileKind {
    /// True when `api_version` and `kind` are this file's, exactly.
    fn header_ok(&self, api_version: &str, kind: Option<&str>) -> bool {
        api_version == self.api_version
            && match kind {
                Some(k) => k == self.kind,
                None => !self.kind_required,
            }
    }

    pub(crate) const INSTALL_CONFIG: FileKind = FileKind {
        document: "install-config",
        api_version: install_config::API_VERSION,
        kind: "InstallConfig",
        kind_required: false,
        old_versions: &[],
        hint: install_config::hint,
    };
    pub(crate) const AGENT_CONFIG: FileKind = FileKind {
        document: "AgentConfig",
        api_version: agent_config::API_VERSION,
        kind: agent_config::KIND,
        kind_required: true,
        old_versions: &[(
            "v1alpha1",
            "v1alpha1 is the older AgentConfig format; set `apiVersion: v1beta1` (and rename ipxeBaseURL to bootArtifactsBaseURL if you use it)",
        )],
        hint: agent_config::hint,
    };
}

/// Reads `text` as `kind` describes: a YAML error, a wrong header or an unknown key is the one
/// problem returned.
pub(crate) fn load<T: DeserializeOwned>(text: &str, kind: &FileKind) -> Result<Loaded<T>, Problem> {
    let yaml_problem =
        |e: &serde_saphyr::Error, index: &Index| yaml::problem(e, index, kind.document, kind.hint);
    let start = format!("`apiVersion: {}`", kind.api_version);
    let index = match yaml::index(text) {
        Ok(Some(index)) => index,
        Ok(None) => {
            return Err(Problem::new(
                None,
                "",
                format!(
                    "holds no YAML document; an {} starts with {start}",
                    kind.document
                ),
            ))
        }
        Err(e) => return Err(yaml_problem(&e, &Index::default())),
    };
    if let Some(root) = index.get("").filter(|r| r.shape != Shape::Map) {
        return Err(Problem::new(
            Location::from_yaml(root.value),
            "",
            format!(
                "expected a mapping starting with {start} at the top level, found {}",
                root.found()
            ),
        ));
    }
    check_header(&index.header(), &index, kind)?;
    let value: T = serde_saphyr::from_str_with_options(text, yaml::options())
        .map_err(|e| yaml_problem(&e, &index))?;
    Ok(Loaded { value, index })
}

fn check_header(header: &yaml::Header, index: &Index, kind: &FileKind) -> Result<(), Problem> {
    let fail = |path: &str, message: String| Err(Problem::new(locate(index, path), path, message));
    match header.api_version.as_deref() {
        Some(v) if v == kind.api_version => {}
        None => {
            return fail(
                "",
                format!(
                    "apiVersion is missing; an {} starts with `apiVersion: {}`",
                    kind.document, kind.api_version
                ),
            )
        }
        Some(other) => {
            let message = kind
                .old_versions
                .iter()
                .find(|(old, _)| *old == other)
                .map(|(_, m)| m.to_string())
                .unwrap_or_else(|| {
                    format!("expected '{}', found {}", kind.api_version, quote(other))
                });
            return fail("apiVersion", message);
        }
    }
    match header.kind.as_deref() {
        Some(k) if k == kind.kind => Ok(()),
        None if !kind.kind_required => Ok(()),
        None => fail("", format!("kind is missing; set `kind: {}`", kind.kind)),
        Some(other) => fail(
            "kind",
            format!("expected '{}', found {}", kind.kind, quote(other)),
        ),
    }
}
