//! The site inventory: one directory (`site.yaml`, `nodes.yaml`) from which a delivery engineer
//! gets the agent installer's files. [`model`] is the format as written, [`load`] reads it
//! strictly (file, line and column on every problem), [`validate()`] checks every rule the agent
//! installer enforces on what the files become, and those it misses, all at once.

pub mod model;
mod references;
pub mod validate;

pub use references::{bmc_credentials, read_referenced, secret_text, BmcCredentials, Referenced};

pub use validate::validate;

use crate::yaml::{self, render_problems, Index, LoadError, Location, Positions, Problem, Schema};
use model::{NodeList, Site, API_VERSION, NODES_FILE, NODES_KIND, SITE_FILE, SITE_KIND};
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
        match file {
            InventoryFile::Site => &self.site_index,
            InventoryFile::Nodes => &self.nodes_index,
        }
        .locate(path)
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
    load_with(dir, Positions::Index)
}

/// [`load`] and [`validate()`] together, the common case first at half the cost: a valid
/// inventory needs no positions, so both files are read once into their schemas without the
/// position index and the rules run; only when anything is wrong (a warning too) are the files
/// read again with positions, so every problem carries its line and column.
pub fn load_validated(
    dir: &Path,
) -> Result<(Inventory, Vec<(InventoryFile, Problem)>), InventoryError> {
    let inv = load_with(dir, Positions::Skip)?;
    if validate::validate(&inv).is_empty() {
        return Ok((inv, Vec::new()));
    }
    let inv = load(dir)?;
    let problems = validate::validate(&inv);
    Ok((inv, problems))
}

/// [`validate::validate_for_install`] on a loaded inventory: `bootstrap install`'s own rules.
/// When any refuses, the files are read again with positions (a valid inventory may have been
/// loaded without them), so every problem carries its line and column.
pub fn install_problems(inv: &Inventory) -> Result<Vec<(InventoryFile, Problem)>, InventoryError> {
    if validate::validate_for_install(inv).is_empty() {
        return Ok(Vec::new());
    }
    Ok(validate::validate_for_install(&load(&inv.dir)?))
}

fn load_with(dir: &Path, positions: Positions) -> Result<Inventory, InventoryError> {
    let site = read_file::<Site>(dir, InventoryFile::Site, positions)?;
    let nodes = read_file::<NodeList>(dir, InventoryFile::Nodes, positions)?;
    match (site, nodes) {
        (Ok(site), Ok(nodes)) => Ok(Inventory {
            dir: dir.to_path_buf(),
            site: site.value,
            nodes: nodes.value,
            site_index: site.index,
            nodes_index: nodes.index,
        }),
        (site, nodes) => {
            let problems = [
                (InventoryFile::Site, site.err()),
                (InventoryFile::Nodes, nodes.err()),
            ]
            .into_iter()
            .filter_map(|(file, p)| p.map(|p| (file, p)))
            .collect();
            Err(InventoryError::Invalid {
                dir: dir.to_path_buf(),
                problems,
            })
        }
    }
}

/// One file: its value and index, or its one problem; `Err` only when it cannot be read.
fn read_file<T: yaml::Document>(
    dir: &Path,
    file: InventoryFile,
    positions: Positions,
) -> Result<Result<yaml::Loaded<T>, Problem>, InventoryError> {
    let path = dir.join(file.name());
    match yaml::load_file::<T>(&path, positions) {
        Ok(loaded) => Ok(Ok(loaded)),
        Err(LoadError::Invalid(problem)) => Ok(Err(problem)),
        Err(LoadError::Read(message)) => Err(InventoryError::Read { path, message }),
    }
}

/// Files larger than this are refused before parsing (a 500-node nodes.yaml is about 1 MiB).
const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// `site.yaml`'s schema.
static SITE_SCHEMA: Schema = Schema {
    document: "a Site file",
    name: SITE_KIND,
    api_version: API_VERSION,
    other_versions: &[],
    kind: SITE_KIND,
    kind_required: true,
    other_kinds: &[(
        NODES_KIND,
        "expected 'Site', found 'Nodes' (a Nodes belongs in nodes.yaml)",
    )],
    hint,
    unknown_note: None,
    keys_ignore_case: None,
    max_bytes: MAX_FILE_BYTES,
};

/// `nodes.yaml`'s schema.
static NODES_SCHEMA: Schema = Schema {
    document: "a Nodes file",
    name: NODES_KIND,
    api_version: API_VERSION,
    other_versions: &[],
    kind: NODES_KIND,
    kind_required: true,
    other_kinds: &[(
        SITE_KIND,
        "expected 'Nodes', found 'Site' (a Site belongs in site.yaml)",
    )],
    hint,
    unknown_note: None,
    keys_ignore_case: None,
    max_bytes: MAX_FILE_BYTES,
};

impl yaml::Document for Site {
    const SCHEMA: &'static Schema = &SITE_SCHEMA;

    fn header(&self) -> yaml::Header {
        yaml::Header {
            api_version: Some(self.api_version.clone()),
            kind: Some(self.kind.clone()),
        }
    }
}

impl yaml::Document for NodeList {
    const SCHEMA: &'static Schema = &NODES_SCHEMA;

    fn header(&self) -> yaml::Header {
        yaml::Header {
            api_version: Some(self.api_version.clone()),
            kind: Some(self.kind.clone()),
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
        match yaml::parse::<Site>(text, Positions::Skip) {
            Ok(_) => Vec::new(),
            Err(p) => vec![p],
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
