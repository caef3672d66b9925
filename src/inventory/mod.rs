//! The site inventory: one directory (`site.yaml`, `nodes.yaml`) from which a delivery engineer
//! gets the agent installer's files. [`model`] is the format as written, [`load`] reads it
//! strictly (file, line and column on every problem), [`validate()`] checks every rule the agent
//! installer enforces on what the files become, and those it misses, all at once.

pub mod model;
pub mod validate;

pub use validate::validate;

use crate::yaml::{self, quote, render_problems, Index, Location, Problem, Shape};
use model::{NodeList, Site, API_VERSION, NODES_FILE, NODES_KIND, SITE_FILE, SITE_KIND};
use serde::Deserialize;
use std::fmt;
use std::path::{Path, PathBuf};

/// One of the inventory's two files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum InventoryFile {
    /// `site.yaml`.
    Site,
    /// `nodes.yaml`.
    Nodes,
}

impl InventoryFile {
    /// Its file name inside the inventory directory.
    pub fn name(self) -> &'static str {
        match self {
            InventoryFile::Site => SITE_FILE,
            InventoryFile::Nodes => NODES_FILE,
        }
    }

    fn kind(self) -> &'static str {
        match self {
            InventoryFile::Site => SITE_KIND,
            InventoryFile::Nodes => NODES_KIND,
        }
    }
}

impl fmt::Display for InventoryFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A loaded inventory: both files, strictly parsed, with the positions of every field.
#[derive(Clone, Debug)]
pub struct Inventory {
    /// The inventory directory as the user named it; relative file references resolve here.
    pub dir: PathBuf,
    /// `site.yaml`.
    pub site: Site,
    /// `nodes.yaml`.
    pub nodes: NodeList,
    site_index: Index,
    nodes_index: Index,
}

impl Inventory {
    /// Where the value at `path` (`cluster.apiVIPs[0]`, `nodes[2].nics[0].mac`) is written in
    /// `file`; for a path not written (an absent optional field) the nearest written parent.
    pub fn location(&self, file: InventoryFile, path: &str) -> Option<Location> {
        let index = match file {
            InventoryFile::Site => &self.site_index,
            InventoryFile::Nodes => &self.nodes_index,
        };
        let mut p = path;
        loop {
            if let Some(l) = index.location(p) {
                return Some(l);
            }
            if p.is_empty() {
                return None;
            }
            p = &p[..p.rfind(['.', '[']).unwrap_or(0)];
        }
    }

    /// `file` as messages name it: the inventory directory joined with its name.
    pub fn origin(&self, file: InventoryFile) -> String {
        origin(&self.dir, file)
    }

    /// A file reference (`secrets/pull-secret.json`) resolved against the inventory directory
    /// (absolute paths stay as they are).
    pub fn resolve(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    /// A problem about `path` in `file`, placed by the index.
    pub fn problem(
        &self,
        file: InventoryFile,
        path: impl Into<String>,
        message: impl Into<String>,
    ) -> (InventoryFile, Problem) {
        let path = path.into();
        (
            file,
            Problem::new(self.location(file, &path), path, message),
        )
    }
}

fn origin(dir: &Path, file: InventoryFile) -> String {
    dir.join(file.name()).display().to_string()
}

/// Why an inventory could not be loaded or is not valid.
#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    /// A file could not be read.
    #[error("reading {}: {message}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why, e.g. `No such file or directory`.
        message: String,
    },
    /// A file is not valid YAML of its kind, or the inventory breaks a rule: every problem,
    /// one line each (`inventory/site.yaml:12:5: cluster.apiVIPs[0]: message`).
    #[error("{}", render_inventory_problems(dir, problems))]
    Invalid {
        /// The inventory directory as the user named it.
        dir: PathBuf,
        /// Every problem found, with its file.
        problems: Vec<(InventoryFile, Problem)>,
    },
}

impl InventoryError {
    /// The problems this error reports (empty for [`InventoryError::Read`]).
    pub fn problems(&self) -> &[(InventoryFile, Problem)] {
        match self {
            InventoryError::Read { .. } => &[],
            InventoryError::Invalid { problems, .. } => problems,
        }
    }
}

/// Every problem as `DIR/FILE:LINE:COL: PATH: MESSAGE`, one line each, in the order given.
pub fn render_inventory_problems(dir: &Path, problems: &[(InventoryFile, Problem)]) -> String {
    problems
        .iter()
        .map(|(file, p)| render_problems(&origin(dir, *file), std::slice::from_ref(p)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Reads `dir/site.yaml` and `dir/nodes.yaml` strictly: YAML syntax, `apiVersion` and `kind`,
/// then every key known (an unknown key is an error with its line, column and the key meant)
/// and every value of the right type. Both files are read before failing, so one run reports
/// the problems of both. The inventory's rules are checked by [`validate()`].
pub fn load(dir: &Path) -> Result<Inventory, InventoryError> {
    let site = read_file::<Site>(dir, InventoryFile::Site)?;
    let nodes = read_file::<NodeList>(dir, InventoryFile::Nodes)?;
    match (site, nodes) {
        (Ok((site, site_index)), Ok((nodes, nodes_index))) => Ok(Inventory {
            dir: dir.to_path_buf(),
            site,
            nodes,
            site_index,
            nodes_index,
        }),
        (site, nodes) => {
            let mut problems = Vec::new();
            for (file, result) in [
                (InventoryFile::Site, site.err()),
                (InventoryFile::Nodes, nodes.err()),
            ] {
                problems.extend(result.into_iter().flatten().map(|p| (file, p)));
            }
            Err(InventoryError::Invalid {
                dir: dir.to_path_buf(),
                problems,
            })
        }
    }
}

/// [`load`] and [`validate`] together, the common case first at half the cost: a valid
/// inventory needs no positions, so both files are read once into their schemas without the
/// position index and the rules run; only when anything is wrong are the files read again with
/// positions, so every problem carries its line and column.
pub fn load_validated(
    dir: &Path,
) -> Result<(Inventory, Vec<(InventoryFile, Problem)>), InventoryError> {
    let read = |file: InventoryFile| {
        let path = dir.join(file.name());
        std::fs::read_to_string(&path).map_err(|e| InventoryError::Read {
            message: io_reason(&e),
            path,
        })
    };
    let (site_text, nodes_text) = (read(InventoryFile::Site)?, read(InventoryFile::Nodes)?);
    let quick = (
        serde_saphyr::from_str_with_options::<Site>(&site_text, yaml::options()),
        serde_saphyr::from_str_with_options::<NodeList>(&nodes_text, yaml::options()),
    );
    if let (Ok(site), Ok(nodes)) = quick {
        let headers_ok = site.api_version == API_VERSION
            && site.kind == SITE_KIND
            && nodes.api_version == API_VERSION
            && nodes.kind == NODES_KIND;
        if headers_ok {
            let inv = Inventory {
                dir: dir.to_path_buf(),
                site,
                nodes,
                site_index: Index::default(),
                nodes_index: Index::default(),
            };
            if validate::validate(&inv).is_empty() {
                return Ok((inv, Vec::new()));
            }
        }
    }
    let inv = load(dir)?;
    let problems = validate::validate(&inv);
    Ok((inv, problems))
}

/// A parsed file and its index, or its problems; `Err` only when it cannot be read.
type Parsed<T> = Result<(T, Index), Vec<Problem>>;

fn read_file<T: for<'de> Deserialize<'de>>(
    dir: &Path,
    file: InventoryFile,
) -> Result<Parsed<T>, InventoryError> {
    let path = dir.join(file.name());
    let text = std::fs::read_to_string(&path).map_err(|e| InventoryError::Read {
        message: io_reason(&e),
        path,
    })?;
    Ok(parse_text(&text, file))
}

/// The OS error without Rust's " (os error N)" suffix.
pub(crate) fn io_reason(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.rfind(" (os error ") {
        Some(i) if s.ends_with(')') => s[..i].to_string(),
        _ => s,
    }
}

/// Parses one file's text: index, header, strict schema.
fn parse_text<T: for<'de> Deserialize<'de>>(text: &str, file: InventoryFile) -> Parsed<T> {
    let kind = file.kind();
    let start = format!("`apiVersion: {API_VERSION}` and `kind: {kind}`");
    // Pass 1: positions of every field path.
    let index = match yaml::index(text) {
        Ok(Some(index)) => index,
        Ok(None) => {
            return Err(vec![Problem::new(
                None,
                "",
                format!("holds no YAML document; a {kind} file starts with {start}"),
            )])
        }
        Err(e) => return Err(vec![yaml::problem(&e, &Index::default(), kind, hint)]),
    };
    if let Some(root) = index.get("") {
        if root.shape != Shape::Map {
            return Err(vec![Problem::new(
                Location::from_yaml(root.value),
                "",
                format!(
                    "expected a mapping starting with {start}, found {}",
                    root.found()
                ),
            )]);
        }
    }
    // Pass 2: apiVersion and kind, so another kind of file is named as such.
    check_header(&index.header(), &index, kind)?;
    // Pass 3: the strict schema.
    let value: T = serde_saphyr::from_str_with_options(text, yaml::options())
        .map_err(|e| vec![yaml::problem(&e, &index, kind, hint)])?;
    Ok((value, index))
}

fn check_header(header: &yaml::Header, index: &Index, kind: &str) -> Result<(), Vec<Problem>> {
    let at = |path: &str| {
        index
            .location(path)
            .or(Some(Location { line: 1, column: 1 }))
    };
    let fail = |path: &str, message: String| Err(vec![Problem::new(at(path), path, message)]);
    match header.api_version.as_deref() {
        Some(API_VERSION) => {}
        None => {
            return fail(
                "",
                format!("apiVersion is missing; add `apiVersion: {API_VERSION}`"),
            )
        }
        Some(other) => {
            return fail(
                "apiVersion",
                format!("expected '{API_VERSION}', found {}", quote(other)),
            )
        }
    }
    match header.kind.as_deref() {
        Some(k) if k == kind => Ok(()),
        None => fail("", format!("kind is missing; add `kind: {kind}`")),
        Some(other) => {
            let other_file = [SITE_KIND, NODES_KIND]
                .iter()
                .find(|k| **k == other)
                .map(|k| {
                    let name = if *k == SITE_KIND {
                        SITE_FILE
                    } else {
                        NODES_FILE
                    };
                    format!(" (a {k} belongs in {name})")
                })
                .unwrap_or_default();
            fail(
                "kind",
                format!("expected '{kind}', found {}{other_file}", quote(other)),
            )
        }
    }
}

/// Keys that are not misspellings but are refused on purpose.
fn hint(field: &str, parent: &str) -> Option<&'static str> {
    let in_root_device = parent.ends_with(".rootDevice");
    match field {
        "wwnWithExtension" | "wwnVendorExtension" if in_root_device => Some(
            "the agent installer forbids WWN extensions in rootDeviceHints; use wwn (the base WWN) or deviceName",
        ),
        "password" | "username" | "user" if parent.ends_with(".bmc") => Some(
            "credentials are never written in the inventory; use `credentials: {file: ...}` or `credentials: {env: ...}`",
        ),
        "pullSecret" | "sshKey" if parent == "cluster" => {
            Some("secrets and keys are referenced under references (references.pullSecret, references.sshPublicKey)")
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site_problems(text: &str) -> Vec<Problem> {
        match parse_text::<Site>(text, InventoryFile::Site) {
            Ok(_) => Vec::new(),
            Err(p) => p,
        }
    }

    #[test]
    fn header_is_checked_before_the_schema() {
        let p = site_problems("apiVersion: v1\nkind: Site\nfoo: 1\n");
        assert_eq!(p[0].path, "apiVersion");
        assert!(p[0].message.contains(API_VERSION), "{}", p[0].message);
        let p = site_problems(&format!("apiVersion: {API_VERSION}\nkind: Nodes\n"));
        assert!(
            p[0].message.contains("belongs in nodes.yaml"),
            "{}",
            p[0].message
        );
        let p = site_problems("- a\n");
        assert!(
            p[0].message.contains("expected a mapping"),
            "{}",
            p[0].message
        );
        let p = site_problems("");
        assert!(p[0].message.contains("holds no YAML document"));
    }
}
