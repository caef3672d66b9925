//! `bootstrap gitops check`: a GitOps repository engineers edited by hand, checked before it is
//! pushed, with the checks the scaffold runs on what it writes. Every YAML document is read
//! with positions; every Application and AppProject is validated against the Argo CD CRDs
//! OpenShift GitOps installs, plus the rules Argo CD enforces that the CRD cannot say; built-in
//! kinds against their Kubernetes types; and every Kustomize folder is built with the real
//! `kubectl kustomize`. Each finding is `FILE:LINE:COL: PATH: MESSAGE`, placed on the field or
//! its nearest written parent.

use super::builtin::validate_builtin;
use super::crd::{argocd_crds, Crd};
use super::schema::Violation;
use crate::yaml::{
    index_text, read_text, reshape_error, sanitize, Index, Location, Problem, Schema,
};
use anyhow::{bail, Context, Result};
use regex::Regex;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Larger YAML files are refused: manifests in a GitOps repository are small.
const MAX_YAML_BYTES: u64 = 16 * 1024 * 1024;

/// Kustomize's file names, in the order kustomize looks for them.
const KUSTOMIZATION_FILES: [&str; 3] = ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// The sync-wave annotation; Argo CD reads it as an integer from a string.
const SYNC_WAVE: &str = "argocd.argoproj.io/sync-wave";

/// How to check.
#[derive(Clone, Debug)]
pub struct CheckOptions {
    /// The repository's own URL (the inventory's `gitops.repository.url`): an Application
    /// whose `repoURL` is this one must name a `path` that exists here.
    pub repo_url: Option<String>,
    /// The `kubectl` that builds Kustomize folders (`kubectl` on `PATH` by default).
    pub kubectl: PathBuf,
}

/// One thing wrong, where it is written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The file, relative to the repository.
    pub file: PathBuf,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// The field path (`spec.destination.server`); empty for the file or folder itself.
    pub path: String,
    /// What is wrong and, where it helps, the fix.
    pub message: String,
}

/// What a check found and covered (`--output json` in camelCase, as every other report).
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckReport {
    /// Every finding, by file, then line.
    pub violations: Vec<Finding>,
    /// The Kustomize folders built with `kubectl kustomize`, relative to the repository.
    pub folders_built: Vec<PathBuf>,
    /// Objects validated against a schema (Argo CD CRDs, built-in kinds).
    pub objects_checked: usize,
}

impl CheckReport {
    /// True when nothing was found.
    pub fn ok(&self) -> bool {
        self.violations.is_empty()
    }
}

impl fmt::Display for Finding {
    /// `FILE:LINE:COL: PATH: MESSAGE` (no `PATH: ` when the path is empty).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.file.display(), self.line, self.column)?;
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.message)
    }
}

impl fmt::Display for CheckReport {
    /// One finding a line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for finding in &self.violations {
            writeln!(f, "{finding}")?;
        }
        Ok(())
    }
}

/// Checks the repository at `dir`. `Err` when the check cannot run (no such folder, an
/// unreadable one, `kubectl` missing); what is wrong with the repository is in the report.
pub fn check_repository(dir: &Path, opts: &CheckOptions) -> Result<CheckReport> {
    if !dir.is_dir() {
        bail!(
            "{}: no such directory; name the GitOps repository's checkout",
            dir.display()
        );
    }
    let files = yaml_files(dir)?;
    let mut report = CheckReport::default();
    let crds = argocd_crds();
    for file in &files {
        check_file(dir, file, &crds, opts, &mut report);
    }
    for folder in kustomize_folders(dir, &files) {
        if let Some(finding) = build_folder(dir, &folder, &opts.kubectl)? {
            report.violations.push(finding);
        }
        report.folders_built.push(folder);
    }
    report
        .violations
        .sort_by(|a, b| (&a.file, a.line, a.column).cmp(&(&b.file, b.line, b.column)));
    Ok(report)
}

// ---------------------------------------------------------------------------------------------
// Files and documents
// ---------------------------------------------------------------------------------------------

/// Every `*.yaml`/`*.yml` file and every `Kustomization` under `dir`, relative to it, sorted;
/// `.git` and symbolic links to folders are not entered.
fn yaml_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(rel) = pending.pop() {
        let entries = fs_err::read_dir(dir.join(&rel))
            .with_context(|| format!("reading the folder {}", dir.join(&rel).display()))?;
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name();
            let path = rel.join(&name);
            let kind = entry.file_type()?;
            if kind.is_dir() {
                if name != ".git" {
                    pending.push(path);
                }
            } else if is_yaml_name(&name.to_string_lossy()) {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

fn is_yaml_name(name: &str) -> bool {
    name.ends_with(".yaml") || name.ends_with(".yml") || name == "Kustomization"
}

/// One YAML document of a file: its text, with the separator line blanked so columns hold,
/// and the number of lines before it in the file.
struct Doc {
    text: String,
    lines_before: usize,
}

/// The documents of a multi-document YAML text, split at `---` (and `...`) lines.
fn documents(text: &str) -> Vec<Doc> {
    let mut docs = Vec::new();
    let mut current = Doc {
        text: String::new(),
        lines_before: 0,
    };
    for (n, line) in text.split_inclusive('\n').enumerate() {
        let bare = line.trim_end_matches(['\r', '\n']);
        let marker = ["---", "..."]
            .iter()
            .find(|m| bare == **m || bare.starts_with(&format!("{m} ")));
        match marker {
            Some(m) => {
                docs.push(std::mem::replace(
                    &mut current,
                    Doc {
                        text: String::new(),
                        lines_before: n,
                    },
                ));
                // `--- {a: 1}` keeps its content, in place.
                current.text.push_str(&" ".repeat(m.len()));
                current.text.push_str(&line[m.len()..]);
            }
            None => current.text.push_str(line),
        }
    }
    docs.push(current);
    docs
}

/// A generic manifest for the YAML reader's messages (syntax errors, duplicate keys).
static MANIFEST: Schema = Schema {
    document: "a Kubernetes manifest",
    name: "manifest",
    api_version: "",
    other_versions: &[],
    kind: "",
    kind_required: false,
    other_kinds: &[],
    hint: |_, _| None,
    unknown_note: None,
    keys_ignore_case: None,
    max_bytes: MAX_YAML_BYTES,
};

/// Where findings of one file go: the file, and the number of lines before the document.
struct Sink<'a> {
    file: &'a Path,
    lines_before: usize,
    out: &'a mut Vec<Finding>,
}

impl Sink<'_> {
    fn push(&mut self, at: Option<Location>, path: &str, message: impl Into<String>) {
        let at = at.unwrap_or(Location::START);
        self.out.push(Finding {
            file: self.file.to_path_buf(),
            line: at.line + self.lines_before,
            column: at.column,
            path: path.to_string(),
            message: message.into(),
        });
    }

    fn problem(&mut self, p: &Problem) {
        self.push(p.location, &p.path, p.message.clone());
    }
}

fn check_file(
    dir: &Path,
    file: &Path,
    crds: &[Crd],
    opts: &CheckOptions,
    report: &mut CheckReport,
) {
    let mut sink = Sink {
        file,
        lines_before: 0,
        out: &mut report.violations,
    };
    let text = match read_text(&dir.join(file), MAX_YAML_BYTES, "a Kubernetes manifest") {
        Ok(text) => text,
        Err(reason) => return sink.push(None, "", reason),
    };
    for doc in documents(&text) {
        sink.lines_before = doc.lines_before;
        let Some((value, index)) = read_doc(&doc.text, &mut sink) else {
            continue;
        };
        let violations = check_object(dir, &value, crds, opts);
        if let Some(violations) = violations {
            report.objects_checked += 1;
            for v in violations {
                let path = index_path(&v.path);
                sink.push(index.locate(&path), &path, v.message);
            }
        }
    }
}

/// The document's value and position index, or `None` (after a finding for a YAML error) when
/// it is empty or unreadable.
fn read_doc(text: &str, sink: &mut Sink<'_>) -> Option<(Value, Index)> {
    let index = match index_text(text) {
        Ok(Some(index)) => index,
        Ok(None) => return None,
        Err(e) => {
            sink.problem(&reshape_error(&e, &Index::default(), &MANIFEST));
            return None;
        }
    };
    match serde_saphyr::from_str::<Value>(text) {
        Ok(value) => Some((value, index)),
        Err(e) => {
            sink.problem(&reshape_error(&e, &index, &MANIFEST));
            None
        }
    }
}

/// A violation's path as the position index writes it: map keys after a dot
/// (`metadata.labels[app]` is `metadata.labels.app`), list items in brackets.
fn index_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut rest = path;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let Some(close) = rest[open..].find(']').map(|c| open + c) else {
            break;
        };
        let inner = &rest[open + 1..close];
        if !inner.is_empty() && inner.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(&rest[open..=close]);
        } else {
            out.push('.');
            out.push_str(inner);
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

// ---------------------------------------------------------------------------------------------
// Objects
// ---------------------------------------------------------------------------------------------

/// Every violation of one object, or `None` for a document that is no object this check knows
/// (a kustomization, a patch's target kind it has no schema for, a values file). Argo CD's own
/// rules come first; a schema violation at a path they already named is not repeated.
fn check_object(
    dir: &Path,
    obj: &Value,
    crds: &[Crd],
    opts: &CheckOptions,
) -> Option<Vec<Violation>> {
    let api_version = obj.get("apiVersion")?.as_str()?;
    let kind = obj.get("kind")?.as_str()?;
    let schema_violations = match crds
        .iter()
        .find(|c| c.kind == kind && api_version.starts_with(&format!("{}/", c.group)))
    {
        Some(crd) => crd.validate(obj),
        None => validate_builtin(api_version, kind, obj)?,
    };
    let mut out = sync_wave(obj);
    if api_version == "argoproj.io/v1alpha1" && kind == "Application" {
        out.extend(application_rules(dir, obj, opts));
    }
    let named: BTreeSet<String> = out.iter().map(|v| index_path(&v.path)).collect();
    out.extend(
        schema_violations
            .into_iter()
            .filter(|v| !named.contains(&index_path(&v.path))),
    );
    Some(out)
}

/// The sync-wave annotation must be an integer written as a string: Argo CD reads the string;
/// a bare number is refused by the API server, and anything else breaks the ordering.
fn sync_wave(obj: &Value) -> Vec<Violation> {
    let Some(wave) = obj
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(SYNC_WAVE))
    else {
        return Vec::new();
    };
    let path = format!("metadata.annotations[{SYNC_WAVE}]");
    let message = match wave {
        Value::String(s) if s.trim().parse::<i32>().is_ok() => return Vec::new(),
        Value::String(s) => format!(
            "Invalid value: {}: a sync wave is an integer in a string, such as \"-1\" or \"5\"",
            Value::String(s.clone())
        ),
        Value::Number(n) => {
            format!(
                "Invalid value: {n}: annotation values are strings; quote the sync wave: \"{n}\""
            )
        }
        other => format!(
            "Invalid value: {other}: a sync wave is an integer in a string, such as \"-1\" or \"5\""
        ),
    };
    vec![Violation::new(path, message)]
}

/// What Argo CD refuses that the Application CRD allows: a destination with both or neither of
/// `server` and `name`, both or neither of `source` and `sources`, and a `path` into this
/// repository that does not exist.
fn application_rules(dir: &Path, app: &Value, opts: &CheckOptions) -> Vec<Violation> {
    let mut out = Vec::new();
    let Some(spec) = app.get("spec").filter(|s| s.is_object()) else {
        return out;
    };
    if let Some(dest) = spec.get("destination").filter(|d| d.is_object()) {
        // A value of the wrong type is still "set": the schema reports its type.
        let set = |k: &str| {
            dest.get(k)
                .is_some_and(|v| !v.is_null() && v.as_str() != Some(""))
        };
        match (set("server"), set("name")) {
            (true, true) => out.push(Violation::new(
                "spec.destination",
                "Invalid value: both server and name are set: set server or name, not both",
            )),
            (false, false) => out.push(Violation::new(
                "spec.destination",
                "Required value: set server (https://kubernetes.default.svc for this cluster) or name",
            )),
            _ => {}
        }
    }
    let sources: Vec<(String, &Value)> = match (spec.get("source"), spec.get("sources")) {
        (Some(_), Some(_)) => {
            out.push(Violation::new(
                "spec.sources",
                "Invalid value: both source and sources are set: set source (one) or sources (several), not both",
            ));
            Vec::new()
        }
        (None, None) => {
            out.push(Violation::new(
                "spec.source",
                "Required value: set source (one repository) or sources (several)",
            ));
            Vec::new()
        }
        (Some(s), None) => vec![("spec.source".to_string(), s)],
        (None, Some(list)) => list
            .as_array()
            .map(|l| {
                l.iter()
                    .enumerate()
                    .map(|(i, s)| (format!("spec.sources[{i}]"), s))
                    .collect()
            })
            .unwrap_or_default(),
    };
    if let Some(url) = &opts.repo_url {
        for (at, source) in sources {
            out.extend(local_path(dir, url, &at, source));
        }
    }
    out
}

/// A source in this repository whose `path` is not a folder of it.
fn local_path(dir: &Path, repo_url: &str, at: &str, source: &Value) -> Option<Violation> {
    let url = source.get("repoURL")?.as_str()?;
    if same_repository(url, repo_url) {
        let path = source.get("path")?.as_str()?;
        let relative = Path::new(path);
        let escapes = relative.is_absolute()
            || relative
                .components()
                .any(|c| c == std::path::Component::ParentDir);
        let message = if escapes {
            "must be relative to the repository's root, without '..'".to_string()
        } else if dir.join(relative).is_dir() {
            return None;
        } else {
            format!("no such folder in this repository ({repo_url}); create it or fix the path")
        };
        let shown = Value::String(path.to_string());
        return Some(Violation::new(
            format!("{at}.path"),
            format!("Invalid value: {shown}: {message}"),
        ));
    }
    None
}

/// The same repository, whatever the trailing `/` or `.git` and the host's case.
fn same_repository(a: &str, b: &str) -> bool {
    let norm = |u: &str| {
        let u = u.trim().trim_end_matches('/');
        u.strip_suffix(".git").unwrap_or(u).to_ascii_lowercase()
    };
    norm(a) == norm(b)
}

// ---------------------------------------------------------------------------------------------
// Kustomize folders
// ---------------------------------------------------------------------------------------------

/// The folders holding a kustomization file, sorted.
fn kustomize_folders(dir: &Path, files: &[PathBuf]) -> Vec<PathBuf> {
    let folders: BTreeSet<PathBuf> = files
        .iter()
        .filter(|f| {
            f.file_name()
                .is_some_and(|n| KUSTOMIZATION_FILES.iter().any(|k| n == *k))
        })
        .filter_map(|f| f.parent().map(Path::to_path_buf))
        .filter(|folder| dir.join(folder).is_dir())
        .collect();
    folders.into_iter().collect()
}

/// Builds `folder` with `kubectl kustomize`: `None` when it builds, else the finding (placed on
/// the `resources` entry kubectl names, when it names one). `Err` when kubectl cannot be run.
fn build_folder(dir: &Path, folder: &Path, kubectl: &Path) -> Result<Option<Finding>> {
    let output = Command::new(kubectl)
        .arg("kustomize")
        .arg(dir.join(folder))
        .output()
        .map_err(|e| {
            let hint = if e.kind() == std::io::ErrorKind::NotFound {
                "; install kubectl (it carries kustomize) or name it with --kubectl PATH"
            } else {
                ""
            };
            anyhow::anyhow!("running {} kustomize: {e}{hint}", kubectl.display())
        })?;
    if output.status.success() {
        return Ok(None);
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let reason = kubectl_reason(&stderr);
    let file = KUSTOMIZATION_FILES
        .iter()
        .map(|k| folder.join(k))
        .find(|f| dir.join(f).is_file())
        .unwrap_or_else(|| folder.join(KUSTOMIZATION_FILES[0]));
    let (at, path) =
        named_resource(&dir.join(&file), &stderr).unwrap_or((Location::START, String::new()));
    Ok(Some(Finding {
        file,
        line: at.line,
        column: at.column,
        path,
        message: format!(
            "kubectl kustomize {} fails: {reason}",
            if folder.as_os_str().is_empty() {
                Path::new(".")
            } else {
                folder
            }
            .display()
        ),
    }))
}

/// kubectl's error as one line: klog's header (`E1203 21:33:40.290747 14279 run.go:72]`) and
/// its `"command failed" err="..."` wrapping taken off.
fn kubectl_reason(stderr: &str) -> String {
    static KLOG: OnceLock<Regex> = OnceLock::new();
    let klog = KLOG.get_or_init(|| {
        Regex::new(r#"^[IWEF]\d{4} [0-9:.]+\s+\d+ \S+\] (?:"command failed" err=)?"#)
            .expect("klog pattern")
    });
    let lines: Vec<String> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| match klog.find(l) {
            Some(m) if l[m.end()..].starts_with('"') => {
                serde_json::from_str::<String>(&l[m.end()..])
                    .unwrap_or_else(|_| l[m.end()..].to_string())
            }
            Some(m) => l[m.end()..].to_string(),
            None => l.trim_start_matches("error: ").to_string(),
        })
        .collect();
    sanitize(&lines.join("; "))
}

/// The `resources` (or `components`) entry of the kustomization that kubectl's error names.
fn named_resource(file: &Path, stderr: &str) -> Option<(Location, String)> {
    let text = read_text(file, MAX_YAML_BYTES, "a kustomization").ok()?;
    let index = index_text(&text).ok()??;
    let value: Value = serde_saphyr::from_str(&text).ok()?;
    for list in ["resources", "components", "patchesStrategicMerge"] {
        let entries = value.get(list).and_then(Value::as_array);
        for (i, entry) in entries.into_iter().flatten().enumerate() {
            let Some(name) = entry.as_str() else { continue };
            if stderr.contains(name) {
                let path = format!("{list}[{i}]");
                return Some((index.locate(&path)?, path));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_keep_their_lines_and_columns() {
        let docs = documents("a: 1\n---\nb: 2\n--- {c: 3}\n...\n");
        let texts: Vec<(&str, usize)> = docs
            .iter()
            .map(|d| (d.text.as_str(), d.lines_before))
            .collect();
        assert_eq!(
            texts,
            [
                ("a: 1\n", 0),
                ("   \nb: 2\n", 1),
                ("    {c: 3}\n", 3),
                ("   \n", 4)
            ]
        );
    }

    #[test]
    fn violation_paths_become_index_paths() {
        assert_eq!(
            index_path("metadata.labels[app.kubernetes.io/name]"),
            "metadata.labels.app.kubernetes.io/name"
        );
        assert_eq!(
            index_path("spec.sources[0].repoURL"),
            "spec.sources[0].repoURL"
        );
        assert_eq!(index_path(""), "");
    }

    #[test]
    fn kubectl_errors_lose_klog_s_wrapping() {
        let stderr = "E1203 21:33:40.290747   14279 run.go:72] \"command failed\" err=\"accumulating resources: 'missing.yaml': no such file\"\n";
        assert_eq!(
            kubectl_reason(stderr),
            "accumulating resources: 'missing.yaml': no such file"
        );
        assert_eq!(
            kubectl_reason("error: no kustomization\n"),
            "no kustomization"
        );
    }

    #[test]
    fn the_same_repository_whatever_its_spelling() {
        assert!(same_repository(
            "https://Git.example.com/site.git/",
            "https://git.example.com/site"
        ));
        assert!(!same_repository(
            "https://git.example.com/other",
            "https://git.example.com/site"
        ));
    }
}
