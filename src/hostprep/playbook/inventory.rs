//! Ansible inventory files (`-i FILE`), INI or YAML: hosts, groups (`[g:children]`,
//! `children:`), variables (`[g:vars]`, `vars:`, per host), so that `bootstrap prep` and
//! `ansible-playbook` can be pointed at the same hosts. Opening SSH is the caller's business;
//! this reads names, groups and merged variables (host vars over group vars over `all`'s vars;
//! a child group's over its parent's, as Ansible orders them). A file that cannot be read or
//! that Ansible would not read either is an [`InventoryFileError`], `FILE:LINE: what; the fix`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// Why an Ansible inventory file was refused.
#[derive(Debug, thiserror::Error)]
pub enum InventoryFileError {
    /// The file could not be read.
    #[error("{}: cannot read: {}", path.display(), crate::yaml::io_reason(source))]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A line of it is not what Ansible reads: bad input, fixed in the file.
    #[error("{}:{line}: {problem}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Where, from 1.
        line: usize,
        /// What, and the fix.
        problem: InventoryProblem,
    },
}

/// What is wrong with a line of an inventory file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InventoryProblem {
    /// An INI section that is not `[g]`, `[g:vars]` or `[g:children]`.
    #[error("unknown section [{head}]; write [{group}], [{group}:vars] or [{group}:children]")]
    UnknownSection {
        /// The section as written.
        head: String,
        /// Its group.
        group: String,
    },
    /// A line of `[g:vars]` that is not `NAME=VALUE`.
    #[error("expected NAME=VALUE in [{group}:vars], found '{line}'")]
    NotAGroupVar {
        /// The group.
        group: String,
        /// The line.
        line: String,
    },
    /// A word after a host that is not `NAME=VALUE`.
    #[error("expected NAME=VALUE after host {host}, found '{word}'")]
    NotAHostVar {
        /// The host.
        host: String,
        /// The word.
        word: String,
    },
    /// A host range (`gpu-0[1:3]`).
    #[error("host ranges ('{name}') are not supported; list the hosts one per line")]
    HostRange {
        /// The host as written.
        name: String,
    },
    /// A quote never closed.
    #[error("unclosed quote")]
    UnclosedQuote,
    /// The YAML parser refused the text.
    #[error("not valid YAML: {detail}")]
    NotYaml {
        /// Its first line of explanation.
        detail: String,
    },
    /// The YAML document is not a mapping of groups.
    #[error("an inventory is a mapping of groups (all: {{hosts: ..., children: ...}})")]
    NotGroups,
    /// A YAML group, or its hosts, children or vars, not a mapping.
    #[error("{path}: {what} is a mapping{}", if .what == "a group" { " (hosts, children, vars)" } else { "" })]
    NotAMapping {
        /// Where (`all.children.gpu`).
        path: String,
        /// `a group`, `hosts`, `children` or `vars`.
        what: String,
    },
    /// A YAML group key other than hosts, children and vars.
    #[error("{path}: unknown group key '{key}'; a group has hosts, children and vars")]
    UnknownGroupKey {
        /// Where.
        path: String,
        /// The key.
        key: String,
    },
}

impl InventoryProblem {
    /// Where in a YAML inventory the problem is, for its line.
    fn yaml_path(&self) -> Option<&str> {
        match self {
            InventoryProblem::NotAMapping { path, .. }
            | InventoryProblem::UnknownGroupKey { path, .. } => Some(path),
            _ => None,
        }
    }
}

/// A problem on a line, before the file is named.
struct AtLine(usize, InventoryProblem);

/// The hosts an inventory file names.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AnsibleInventory {
    /// In the order the file first names them.
    pub hosts: Vec<InventoryHost>,
}

/// One host: its groups (not `all` nor `ungrouped`) and its merged variables.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InventoryHost {
    /// The inventory name.
    pub name: String,
    /// Every group it belongs to, directly or through `children`, sorted.
    pub groups: Vec<String>,
    /// Its variables, merged.
    pub vars: Map<String, Value>,
}

impl InventoryHost {
    fn var(&self, key: &str) -> Option<String> {
        self.vars.get(key).map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    }

    /// `ansible_host`, else the name.
    pub fn address(&self) -> String {
        self.var("ansible_host")
            .unwrap_or_else(|| self.name.clone())
    }

    /// `ansible_port`.
    pub fn port(&self) -> Option<u16> {
        self.var("ansible_port").and_then(|p| p.parse().ok())
    }

    /// `ansible_user`.
    pub fn user(&self) -> Option<String> {
        self.var("ansible_user")
    }

    /// `ansible_ssh_private_key_file`.
    pub fn key_file(&self) -> Option<String> {
        self.var("ansible_ssh_private_key_file")
    }
}

/// The inventory as written: groups with their direct hosts, children and variables.
#[derive(Default)]
struct Raw {
    order: Vec<String>,
    host_vars: BTreeMap<String, Map<String, Value>>,
    groups: BTreeMap<String, Group>,
}

#[derive(Default)]
struct Group {
    hosts: BTreeSet<String>,
    children: BTreeSet<String>,
    vars: Map<String, Value>,
}

impl Raw {
    fn group(&mut self, name: &str) -> &mut Group {
        self.groups.entry(name.to_string()).or_default()
    }

    fn add_host(&mut self, group: &str, name: &str, vars: Map<String, Value>) {
        if !self.host_vars.contains_key(name) {
            self.order.push(name.to_string());
        }
        self.host_vars
            .entry(name.to_string())
            .or_default()
            .extend(vars);
        self.group(group).hosts.insert(name.to_string());
    }

    /// Every host with its groups (through children) and merged variables.
    fn resolve(&self) -> AnsibleInventory {
        let mut parents: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (name, g) in &self.groups {
            for c in &g.children {
                parents.entry(c.as_str()).or_default().push(name.as_str());
            }
        }
        let mut hosts = Vec::new();
        for name in &self.order {
            let direct = self
                .groups
                .iter()
                .filter(|(_, g)| g.hosts.contains(name))
                .map(|(n, _)| n.as_str());
            let mut all: BTreeSet<&str> = BTreeSet::new();
            let mut todo: Vec<&str> = direct.collect();
            while let Some(g) = todo.pop() {
                if all.insert(g) {
                    todo.extend(parents.get(g).into_iter().flatten().copied());
                }
            }
            let mut ordered: Vec<(usize, &str)> =
                all.iter().map(|g| (depth(g, &parents, 0), *g)).collect();
            ordered.sort();
            let mut vars = self
                .groups
                .get("all")
                .map(|g| g.vars.clone())
                .unwrap_or_default();
            for (_, g) in &ordered {
                vars.extend(self.groups[*g].vars.clone());
            }
            vars.extend(self.host_vars[name].clone());
            let groups = all
                .into_iter()
                .filter(|g| !matches!(*g, "all" | "ungrouped"))
                .map(str::to_string)
                .collect();
            hosts.push(InventoryHost {
                name: name.clone(),
                groups,
                vars,
            });
        }
        AnsibleInventory { hosts }
    }
}

/// A group's distance from the top (its longest chain of parents).
fn depth(g: &str, parents: &BTreeMap<&str, Vec<&str>>, seen: usize) -> usize {
    if seen > 64 {
        return seen;
    }
    parents
        .get(g)
        .into_iter()
        .flatten()
        .map(|p| 1 + depth(p, parents, seen + 1))
        .max()
        .unwrap_or(0)
}

/// Reads an Ansible inventory: YAML when the name ends in `.yml`, `.yaml` or `.json`, or the
/// text starts with a mapping; INI otherwise. Errors read `FILE:LINE: what; the fix`.
pub fn load_ansible_inventory(path: &Path) -> Result<AnsibleInventory, InventoryFileError> {
    let text = fs_err::read_to_string(path).map_err(|source| InventoryFileError::Unreadable {
        path: path.to_path_buf(),
        source,
    })?;
    let yaml_name = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| matches!(e, "yml" | "yaml" | "json"));
    let first = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with(['#', ';']));
    let yaml_text =
        first.is_some_and(|l| l.ends_with(':') || l.starts_with("---") || l.starts_with('{'));
    let raw = if yaml_name || yaml_text {
        yaml(&text)
    } else {
        ini(&text)
    };
    let raw = raw.map_err(|AtLine(line, problem)| InventoryFileError::Invalid {
        path: path.to_path_buf(),
        line,
        problem,
    })?;
    Ok(raw.resolve())
}

/// INI: `[group]`, `[group:vars]`, `[group:children]`, host lines `name k=v ...`; lines before
/// any section are ungrouped hosts.
fn ini(text: &str) -> Result<Raw, AtLine> {
    let mut raw = Raw::default();
    let mut section = ("ungrouped".to_string(), "hosts".to_string());
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        let at = n + 1;
        if line.is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        if let Some(head) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let (group, kind) = head.split_once(':').unwrap_or((head, "hosts"));
            if !matches!(kind, "hosts" | "vars" | "children") {
                return Err(AtLine(
                    at,
                    InventoryProblem::UnknownSection {
                        head: head.to_string(),
                        group: group.to_string(),
                    },
                ));
            }
            raw.group(group);
            section = (group.to_string(), kind.to_string());
            continue;
        }
        ini_line(&mut raw, &section.0, &section.1, line).map_err(|e| AtLine(at, e))?;
    }
    raw.group("all");
    Ok(raw)
}

fn ini_line(raw: &mut Raw, group: &str, kind: &str, line: &str) -> Result<(), InventoryProblem> {
    match kind {
        "vars" => {
            let (k, v) = line
                .split_once('=')
                .ok_or_else(|| InventoryProblem::NotAGroupVar {
                    group: group.to_string(),
                    line: line.to_string(),
                })?;
            raw.group(group)
                .vars
                .insert(k.trim().to_string(), literal(v.trim()));
        }
        "children" => {
            raw.group(group).children.insert(line.to_string());
            raw.group(line);
        }
        _ => {
            let words = split_words(line)?;
            let name = &words[0];
            if name.contains('[') {
                return Err(InventoryProblem::HostRange { name: name.clone() });
            }
            let mut vars = Map::new();
            for w in &words[1..] {
                let (k, v) = w
                    .split_once('=')
                    .ok_or_else(|| InventoryProblem::NotAHostVar {
                        host: name.clone(),
                        word: w.clone(),
                    })?;
                vars.insert(k.to_string(), literal(v));
            }
            raw.add_host(group, name, vars);
        }
    }
    Ok(())
}

/// Words split on blanks, quotes grouping (`a="b c"` is one word, `a=b c`).
fn split_words(line: &str) -> Result<Vec<String>, InventoryProblem> {
    let (mut words, mut cur, mut quote) = (Vec::new(), String::new(), None::<char>);
    for c in line.chars() {
        match (quote, c) {
            (None, '#') if cur.is_empty() => break,
            (None, c) if c.is_whitespace() => {
                if !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
            }
            (None, '"' | '\'') => {
                quote = Some(c);
                cur.push(c);
            }
            (Some(q), c) if c == q => {
                quote = None;
                cur.push(c);
            }
            (_, c) => cur.push(c),
        }
    }
    if quote.is_some() {
        return Err(InventoryProblem::UnclosedQuote);
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    Ok(words)
}

/// An INI value as Ansible reads it (a Python literal where it is one): numbers, `True` and
/// `False`, quoted strings without their quotes; the rest as text.
fn literal(v: &str) -> Value {
    if let Some(inner) = v
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .or_else(|| v.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')))
    {
        return Value::String(inner.to_string());
    }
    if let Ok(i) = v.parse::<i64>() {
        return Value::from(i);
    }
    match v {
        "True" | "true" => Value::Bool(true),
        "False" | "false" => Value::Bool(false),
        _ => v
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite() && v.contains('.'))
            .map_or_else(|| Value::String(v.to_string()), Value::from),
    }
}

/// YAML: `all: {hosts: {h: {k: v}}, children: {g: {...}}, vars: {...}}`.
fn yaml(text: &str) -> Result<Raw, AtLine> {
    let value: Value = serde_saphyr::from_str(text).map_err(|e| {
        let line = e.location().map_or(1, |l| l.line() as usize);
        let detail = e.to_string().lines().next().unwrap_or("").to_string();
        AtLine(line, InventoryProblem::NotYaml { detail })
    })?;
    let index = crate::yaml::index_text(text)
        .ok()
        .flatten()
        .unwrap_or_default();
    let line = |path: &str| index.locate(path).map_or(1, |l| l.line);
    let mut raw = Raw::default();
    let Some(top) = value.as_object() else {
        return Err(AtLine(1, InventoryProblem::NotGroups));
    };
    for (name, g) in top {
        yaml_group(&mut raw, name, g, name)
            .map_err(|e| AtLine(e.yaml_path().map_or(1, line), e))?;
    }
    raw.group("all");
    Ok(raw)
}

fn yaml_group(raw: &mut Raw, name: &str, g: &Value, path: &str) -> Result<(), InventoryProblem> {
    raw.group(name);
    let Some(map) = g.as_object() else {
        return if g.is_null() {
            Ok(())
        } else {
            Err(InventoryProblem::NotAMapping {
                path: path.into(),
                what: "a group".into(),
            })
        };
    };
    for (key, v) in map {
        let here = format!("{path}.{key}");
        let entries = || {
            v.as_object()
                .cloned()
                .ok_or_else(|| InventoryProblem::NotAMapping {
                    path: here.clone(),
                    what: key.clone(),
                })
        };
        match key.as_str() {
            "hosts" if v.is_null() => {}
            "hosts" => {
                for (h, hv) in entries()? {
                    let vars = hv.as_object().cloned().unwrap_or_default();
                    raw.add_host(name, &h, vars);
                }
            }
            "vars" if v.is_null() => {}
            "vars" => raw.group(name).vars.extend(entries()?),
            "children" if v.is_null() => {}
            "children" => {
                for (c, cv) in entries()? {
                    raw.group(name).children.insert(c.clone());
                    yaml_group(raw, &c, &cv, &format!("{here}.{c}"))?;
                }
            }
            other => {
                return Err(InventoryProblem::UnknownGroupKey {
                    path: here,
                    key: other.to_string(),
                })
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(name: &str, text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        fs_err::write(&path, text).unwrap();
        (dir, path)
    }

    #[test]
    fn ini_groups_children_and_vars_merge_as_ansible() {
        let (_d, path) = write("hosts", "bastion ansible_host=10.0.0.1\n[gpu]\ngpu-01 ansible_host=10.0.1.1 ansible_port=2222 machine_mtu=9000\ngpu-02 ansible_user=\"core\"\n[gpu:vars]\nmachine_mtu=1500\nrole=gpu\n[workers:children]\ngpu\n[workers:vars]\nrole=worker\nzone=a\n[all:vars]\nzone=z\nansible_ssh_private_key_file=/k/id\n");
        let inv = load_ansible_inventory(&path).unwrap();
        let names: Vec<&str> = inv.hosts.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["bastion", "gpu-01", "gpu-02"]);
        let g1 = &inv.hosts[1];
        assert_eq!(g1.groups, ["gpu", "workers"]);
        assert_eq!(
            (g1.address(), g1.port(), g1.key_file().as_deref()),
            ("10.0.1.1".to_string(), Some(2222), Some("/k/id"))
        );
        assert_eq!(g1.vars["machine_mtu"], Value::from(9000));
        assert_eq!(g1.vars["role"], Value::from("gpu"));
        assert_eq!(g1.vars["zone"], Value::from("a"));
        assert_eq!(inv.hosts[2].user().as_deref(), Some("core"));
        assert_eq!(inv.hosts[2].vars["machine_mtu"], Value::from(1500));
        assert_eq!(inv.hosts[0].groups, Vec::<String>::new());
        let (_d, bad) = write("hosts", "[gpu]\ngpu-0[1:3]\n");
        let e = load_ansible_inventory(&bad).unwrap_err();
        assert!(
            matches!(
                e,
                InventoryFileError::Invalid {
                    line: 2,
                    problem: InventoryProblem::HostRange { .. },
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            format!(
                "{}:2: host ranges ('gpu-0[1:3]') are not supported; list the hosts one per line",
                bad.display()
            )
        );
    }

    #[test]
    fn yaml_inventory_reads_the_same() {
        let (_d, path) = write("inv.yaml", "all:\n  vars:\n    zone: z\n  hosts:\n    bastion:\n      ansible_host: 10.0.0.1\n  children:\n    gpu:\n      vars:\n        zone: g\n      hosts:\n        gpu-01:\n          ansible_port: 2222\n        gpu-02:\n");
        let inv = load_ansible_inventory(&path).unwrap();
        let host = |n: &str| inv.hosts.iter().find(|h| h.name == n).unwrap();
        assert_eq!(inv.hosts.len(), 3);
        assert_eq!(host("gpu-01").groups, ["gpu"]);
        assert_eq!(host("gpu-01").port(), Some(2222));
        assert_eq!(host("gpu-02").vars["zone"], Value::from("g"));
        assert_eq!(host("bastion").vars["zone"], Value::from("z"));
        assert_eq!(host("bastion").address(), "10.0.0.1");
        let (_d, bad) = write(
            "inv.yaml",
            "all:\n  children:\n    gpu:\n      hostz:\n        a: {}\n",
        );
        assert_eq!(
            load_ansible_inventory(&bad).unwrap_err().to_string(),
            format!("{}:4: all.children.gpu.hostz: unknown group key 'hostz'; a group has hosts, children and vars", bad.display())
        );
        let missing = load_ansible_inventory(&bad.with_file_name("absent.yaml")).unwrap_err();
        assert!(
            matches!(missing, InventoryFileError::Unreadable { .. }),
            "{missing:?}"
        );
    }
}
