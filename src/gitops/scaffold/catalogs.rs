//! Which mirrored CatalogSource each operator comes from: the inventory's choice
//! (`gitops.operators.<package>.catalog`, `gitops.operator.catalog`), else the CatalogSource the
//! mirror wrote (`cluster-resources/` beside `references.mirrorRecord`) whose catalog image is
//! the index that carries the package by Red Hat's usual split: redhat-operator-index for Red
//! Hat's operators, certified-operator-index for NVIDIA's.

use crate::inventory::model::{Gitops, OperatorChoice};
use crate::inventory::{render_inventory_problems, Inventory, InventoryFile};
use crate::oci::reference::ImageRef;
use crate::openshift::cluster;
use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::path::Path;

/// A mirrored CatalogSource: its name in `openshift-marketplace` and the index it serves
/// (the last path component of its image's repository, `redhat-operator-index`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatalogSource {
    /// `metadata.name`.
    pub name: String,
    /// The catalog image's repository's last component.
    pub index: String,
}

/// The package of OpenShift GitOps (the handoff stage subscribes to it).
pub const GITOPS_PACKAGE: &str = "openshift-gitops-operator";

/// The index that usually carries `package`.
fn usual_index(package: &str) -> Option<&'static str> {
    match package {
        "nfd" | "rhods-operator" | GITOPS_PACKAGE => Some("redhat-operator-index"),
        "gpu-operator-certified" | "nvidia-network-operator" => Some("certified-operator-index"),
        _ => None,
    }
}

#[derive(Deserialize)]
struct Doc {
    kind: Option<String>,
    metadata: Option<Meta>,
    spec: Option<Spec>,
}

#[derive(Deserialize)]
struct Meta {
    name: Option<String>,
}

#[derive(Deserialize)]
struct Spec {
    image: Option<String>,
}

/// The CatalogSources in `cluster-resources/` beside the inventory's mirror record, sorted by
/// name; none when the inventory names no record or the record has no such folder.
pub fn read_catalog_sources(inv: &Inventory) -> Result<Vec<CatalogSource>> {
    let Some(record) = &inv.site.references.mirror_record else {
        return Ok(Vec::new());
    };
    let record = inv.resolve(&record.file);
    let dir = record.parent().unwrap_or(Path::new(".")).join(cluster::DIR);
    let entries = match fs_err::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let mut out = Vec::new();
    for entry in entries {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "yaml") {
            out.extend(catalog_source(&path)?);
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The CatalogSource in `path`, or None for another kind (the mirror sets).
fn catalog_source(path: &Path) -> Result<Option<CatalogSource>> {
    let text = fs_err::read_to_string(path)?;
    let mut found = None;
    for doc in serde_saphyr::from_multiple::<Doc>(&text)
        .with_context(|| format!("reading {}", path.display()))?
    {
        if doc.kind.as_deref() != Some("CatalogSource") {
            continue;
        }
        let name = doc.metadata.and_then(|m| m.name);
        let image = doc.spec.and_then(|s| s.image);
        let (Some(name), Some(image)) = (name, image) else {
            bail!("{}: a CatalogSource without metadata.name or spec.image; rerun bootstrap mirror to write cluster-resources/ again", path.display());
        };
        let image =
            ImageRef::parse(&image).with_context(|| format!("{}: spec.image", path.display()))?;
        let index = image
            .repository
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_string();
        found = Some(CatalogSource { name, index });
    }
    Ok(found)
}

/// The CatalogSource `package` is subscribed from: `choice.catalog`, else the one mirrored
/// CatalogSource whose index usually carries it. `field` is the inventory path of `choice`
/// (`gitops.operators.nfd`), named in the error with its line and column.
pub fn catalog_for(
    inv: &Inventory,
    catalogs: &[CatalogSource],
    package: &str,
    choice: Option<&OperatorChoice>,
    field: &str,
) -> Result<String> {
    if let Some(c) = choice.and_then(|c| c.catalog.clone()) {
        return Ok(c);
    }
    let index = usual_index(package);
    let matching: Vec<&CatalogSource> = catalogs
        .iter()
        .filter(|c| Some(c.index.as_str()) == index)
        .collect();
    if let [only] = matching.as_slice() {
        return Ok(only.name.clone());
    }
    let known = if catalogs.is_empty() {
        "the inventory's mirror has no cluster-resources/ CatalogSource".to_string()
    } else {
        let names: Vec<&str> = catalogs.iter().map(|c| c.name.as_str()).collect();
        format!("mirrored CatalogSources: {}", names.join(", "))
    };
    let why = match (index, matching.len()) {
        (Some(i), 0) => format!("no mirrored CatalogSource serves {i}"),
        (Some(i), _) => format!("more than one mirrored CatalogSource serves {i}"),
        (None, _) => "no usual catalog is known for it".to_string(),
    };
    let p = inv.problem(InventoryFile::Site, format!("{field}.catalog"), format!("operator package {package}: {why} ({known}); set {field}.catalog to the CatalogSource's name in openshift-marketplace"));
    bail!("{}", render_inventory_problems(&inv.dir, &[p]))
}

/// The inventory's choice for `package` (`gitops.operators.<package>`), and its field path.
pub fn choice<'a>(g: &'a Gitops, package: &str) -> (Option<&'a OperatorChoice>, String) {
    if package == GITOPS_PACKAGE {
        return (Some(&g.operator), "gitops.operator".to_string());
    }
    (
        g.operators.get(package),
        format!("gitops.operators.{package}"),
    )
}
