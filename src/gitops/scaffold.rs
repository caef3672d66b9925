//! The site's GitOps repository, scaffolded from its inventory (`bootstrap gitops init`): the
//! root Application and its AppProject (`bootstrap/`), one child Application per component
//! ordered by sync waves (`apps/`), the GPU platform's operators and their policies from the
//! mirrored catalogs (`cluster/`), the standard tenant and one overlay per tenant (`tenants/`),
//! and a README. Pure: an inventory and the mirror's CatalogSources in, `(path, bytes)` out;
//! [`write`] puts them in a directory. The same inventory gives the same bytes.

mod apps;
pub mod catalogs;
mod cluster;
mod readme;
pub mod selfcheck;
mod tenants;

pub use catalogs::{catalog_for, choice, read_catalog_sources, CatalogSource, GITOPS_PACKAGE};

use crate::inventory::model::Gitops;
use crate::inventory::Inventory;
use anyhow::{bail, Context, Result};
use serde::Serialize;
use serde_json::Value;
use std::path::Path;

/// One file of the repository: its path relative to the repository root and its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepoFile {
    /// Relative path, `/`-separated (`tenants/base/namespace.yaml`).
    pub path: String,
    /// The file's content.
    pub bytes: Vec<u8>,
}

/// One child Application: what it deploys, from where, in which wave.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Component {
    /// The Application's name (`nvidia-gpu-operator`).
    pub name: String,
    /// Its folder in the repository (`cluster/nvidia-gpu-operator`).
    pub path: String,
    /// Its `argocd.argoproj.io/sync-wave`.
    pub wave: i32,
}

/// The scaffolded repository.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scaffold {
    /// Every file, sorted by path.
    pub files: Vec<RepoFile>,
    /// The child Applications, by wave.
    pub components: Vec<Component>,
    /// The tenants' names, as the inventory lists them.
    pub tenants: Vec<String>,
}

/// The repository for `inv`'s `gitops` section; `catalogs` are the mirror's CatalogSources
/// ([`read_catalog_sources`]). Fails when the inventory has no `gitops` section or an operator
/// has no catalog, naming the field to set.
pub fn scaffold(inv: &Inventory, catalogs: &[CatalogSource]) -> Result<Scaffold> {
    let Some(g) = &inv.site.gitops else {
        bail!("{}: no gitops section; add gitops.repository.url (the site's GitOps repository as Argo CD clones it) and the tenants", inv.origin(crate::inventory::InventoryFile::Site));
    };
    let mut files = Files::default();
    let components = apps::components();
    cluster::write(&mut files, inv, catalogs)?;
    tenants::write(&mut files, g)?;
    apps::write(&mut files, g)?;
    files.text("README.md", readme::text(g, &components));
    let mut files = files.0;
    files.sort_by(|a, b| a.path.cmp(&b.path));
    let violations = selfcheck::check(&files);
    if !violations.is_empty() {
        bail!("the scaffold breaks the API's schemas (a bug of bootstrap's; nothing was written):\n{}", violations.join("\n"));
    }
    Ok(Scaffold {
        files,
        components,
        tenants: g.tenants.iter().map(|t| t.name.clone()).collect(),
    })
}

/// The files being gathered.
#[derive(Default)]
struct Files(Vec<RepoFile>);

impl Files {
    fn text(&mut self, path: impl Into<String>, text: String) {
        self.0.push(RepoFile {
            path: path.into(),
            bytes: text.into_bytes(),
        });
    }

    /// `docs` as one YAML file (documents separated by `---`).
    fn yaml(&mut self, path: impl Into<String>, docs: &[Value]) -> Result<()> {
        let path = path.into();
        let text = yaml_docs(docs).with_context(|| format!("writing {path}"))?;
        self.text(path, text);
        Ok(())
    }

    /// A folder's `kustomization.yaml` listing `resources`.
    fn kustomization(&mut self, dir: &str, resources: &[String]) -> Result<()> {
        self.yaml(
            format!("{dir}/kustomization.yaml"),
            &[kustomization(resources)],
        )
    }
}

/// A Kustomization listing `resources`.
fn kustomization(resources: &[String]) -> Value {
    serde_json::json!({
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": resources,
    })
}

/// YAML documents as bootstrap writes them ([`crate::yaml::to_string`]: strings Go would
/// misread are quoted).
fn yaml_docs(docs: &[Value]) -> Result<String> {
    let mut out = String::new();
    for (i, d) in docs.iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        out.push_str(&crate::yaml::to_string(d)?);
    }
    Ok(out)
}

/// `kind` `name` in `namespace` (None: cluster-scoped), with `rest` merged in at the top.
fn object(
    api_version: &str,
    kind: &str,
    name: &str,
    namespace: Option<&str>,
    rest: Value,
) -> Value {
    let mut metadata = serde_json::json!({ "name": name });
    if let Some(ns) = namespace {
        metadata["namespace"] = ns.into();
    }
    let mut obj = serde_json::json!({
        "apiVersion": api_version,
        "kind": kind,
        "metadata": metadata,
    });
    if let (Some(o), Value::Object(r)) = (obj.as_object_mut(), rest) {
        o.extend(r);
    }
    obj
}

/// What [`write`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WriteReport {
    /// Files that did not exist.
    pub created: Vec<String>,
    /// Files that existed with other content and were rewritten (`--force`).
    pub changed: Vec<String>,
    /// Files that already held these bytes.
    pub unchanged: Vec<String>,
}

/// Writes `files` into `dir` (created when missing), each atomically. A `dir` that holds
/// anything is refused unless `force`; with `force` only the scaffold's own files are
/// rewritten, and only those whose bytes differ.
pub fn write(dir: &Path, files: &[RepoFile], force: bool) -> Result<WriteReport> {
    if !force && dir_has_entries(dir)? {
        bail!("{} is not empty; scaffold into a new directory, or pass --force to rewrite the files gitops init owns (others are left alone)", dir.display());
    }
    let mut report = WriteReport::default();
    for f in files {
        let path = dir.join(&f.path);
        let list = match fs_err::read(&path) {
            Ok(old) if old == f.bytes => {
                report.unchanged.push(f.path.clone());
                continue;
            }
            Ok(_) => &mut report.changed,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => &mut report.created,
            Err(e) => return Err(e.into()),
        };
        if let Some(parent) = path.parent() {
            fs_err::create_dir_all(parent)?;
        }
        crate::fs::write_atomic(&path, &f.bytes)?;
        list.push(f.path.clone());
    }
    Ok(report)
}

fn dir_has_entries(dir: &Path) -> Result<bool> {
    match fs_err::read_dir(dir) {
        Ok(mut entries) => Ok(entries.next().is_some()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// The repository's URL and revision, as every Application's source names them.
fn source(g: &Gitops, path: &str) -> Value {
    serde_json::json!({
        "repoURL": g.repository.url,
        "targetRevision": g.repository.revision(),
        "path": path,
    })
}

/// What `bootstrap gitops init` reports: where, what it wrote, the components and tenants.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InitSummary {
    /// The repository directory.
    pub dir: String,
    /// How many files the scaffold has.
    pub files: usize,
    /// What was written.
    #[serde(flatten)]
    pub report: WriteReport,
    /// The child Applications, by wave.
    pub components: Vec<Component>,
    /// The tenants.
    pub tenants: Vec<String>,
}

impl std::fmt::Display for InitSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let r = &self.report;
        writeln!(
            f,
            "{}: {} files ({} created, {} changed, {} unchanged)",
            self.dir,
            self.files,
            r.created.len(),
            r.changed.len(),
            r.unchanged.len()
        )?;
        for path in &r.changed {
            writeln!(f, "changed {path}")?;
        }
        for c in &self.components {
            writeln!(f, "wave {}: {} ({})", c.wave, c.name, c.path)?;
        }
        writeln!(f, "tenants: {}", self.tenants.join(", "))
    }
}
