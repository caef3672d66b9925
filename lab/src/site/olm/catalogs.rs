//! CatalogSources and what they serve. A real cluster runs each CatalogSource's image as a
//! registry pod and asks it over gRPC for packages, channels and bundles; the lab reads the
//! same file-based catalog instead, from a [`CatalogIndex`] keyed by the catalog image's
//! repository (the lab's catalog is the one it seeded the registry with). A CatalogSource whose
//! image the index knows, on a registry the lab can reach, is `READY`; any other is
//! `TRANSIENT_FAILURE`, as a registry pod that cannot pull its image leaves it.

use super::objects::{self, OLM_V1ALPHA1};
use crate::site::kube::Store;
use anyhow::{Context, Result};
use bootstrap::mirror::resolve::select::channel_head;
use bootstrap::oci::reference::ImageRef;
use bootstrap::openshift::fbc::{Bundle, Catalog};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The namespace of the cluster's global catalogs.
pub const MARKETPLACE: &str = "openshift-marketplace";
/// `status.connectionState.lastObservedState` of a catalog whose content is known.
pub const READY: &str = "READY";
/// ... and of one whose registry cannot serve.
pub const TRANSIENT_FAILURE: &str = "TRANSIENT_FAILURE";
const FIELD_MANAGER: &str = "catalog-operator";

/// File-based catalogs by the repository of their image (`redhat/redhat-operator-index`).
#[derive(Clone, Debug, Default)]
pub struct CatalogIndex {
    by_repository: BTreeMap<String, Arc<Catalog>>,
}

impl CatalogIndex {
    /// An empty index.
    pub fn new() -> CatalogIndex {
        CatalogIndex::default()
    }

    /// Adds `catalog` as the content of images of `repository` (a repository path without its
    /// registry; mirrors that put it under a prefix match too).
    pub fn insert(&mut self, repository: &str, catalog: Catalog) {
        self.by_repository
            .insert(repository.trim_matches('/').to_string(), Arc::new(catalog));
    }

    /// The lab's catalog (`crate::catalog`), as the lab seeds it for `registry`.
    pub fn lab(registry: &str) -> Result<CatalogIndex> {
        let built = crate::catalog::build(registry)?;
        let catalog = Catalog::parse(&built.files).context("reading the lab's operator catalog")?;
        let mut index = CatalogIndex::new();
        index.insert(crate::catalog::CATALOG_REPO, catalog);
        Ok(index)
    }

    /// The catalog `image` serves: the one whose repository is the image's repository, or
    /// its last path components (a mirror's `PREFIX/redhat/redhat-operator-index`).
    pub fn for_image(&self, image: &ImageRef) -> Option<&Arc<Catalog>> {
        let repo = image.repository.as_str();
        self.by_repository.iter().find_map(|(key, catalog)| {
            let under_prefix = repo
                .strip_suffix(key.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.ends_with('/'));
            under_prefix.then_some(catalog)
        })
    }
}

/// What a CatalogSource serves, when the lab knows it.
pub fn content<'a>(
    index: &'a CatalogIndex,
    unreachable: &[String],
    source: &Value,
) -> Option<&'a Arc<Catalog>> {
    if source["spec"]["sourceType"].as_str() != Some("grpc") {
        return None;
    }
    let image = ImageRef::parse(source["spec"]["image"].as_str()?).ok()?;
    if unreachable.contains(&image.registry) {
        return None;
    }
    index.for_image(&image)
}

/// Sets every CatalogSource's connection state.
pub fn reconcile(store: &Store, index: &CatalogIndex, unreachable: &[String]) -> Result<()> {
    for source in store.list(OLM_V1ALPHA1, "CatalogSource", None, None)? {
        let state = match content(index, unreachable, &source) {
            Some(_) => READY,
            None => TRANSIENT_FAILURE,
        };
        let status = status_of(&source, state);
        objects::write_status(store, &source, status, FIELD_MANAGER)?;
    }
    Ok(())
}

fn status_of(source: &Value, state: &str) -> Value {
    let (name, ns) = (objects::name(source), objects::namespace(source));
    let now = objects::now();
    let mut status = source["status"].clone();
    if !status.is_object() {
        status = json!({});
    }
    status["connectionState"] = json!({
        "address": format!("{name}.{ns}.svc:50051"),
        "lastConnect": now,
        "lastObservedState": state,
    });
    status["registryService"] = json!({
        "createdAt": source["status"]["registryService"]["createdAt"].as_str().unwrap_or(&now),
        "port": "50051",
        "protocol": "grpc",
        "serviceName": name,
        "serviceNamespace": ns,
    });
    status
}

/// Whether a CatalogSource's registry answered at its last check.
pub fn healthy(source: &Value) -> bool {
    source["status"]["connectionState"]["lastObservedState"].as_str() == Some(READY)
}

/// The bundle a Subscription to `package`'s `channel` (its default channel when `None`)
/// installs: the channel's head. Errors carry OLM's resolver wording (without its
/// `constraints not satisfiable:` frame, which the caller adds).
pub fn channel_head_bundle<'a>(
    catalog: &'a Catalog,
    package: &str,
    channel: Option<&str>,
    subscription: &str,
) -> Result<&'a Bundle, String> {
    let no_package = || {
        format!("no operators found in package {package} in the catalog referenced by subscription {subscription}")
    };
    let pkg = catalog.packages.get(package).ok_or_else(no_package)?;
    let channel = channel
        .filter(|c| !c.is_empty())
        .unwrap_or(&pkg.default_channel);
    let no_channel = || {
        format!("no operators found in channel {channel} of package {package} in the catalog referenced by subscription {subscription}")
    };
    let entries = catalog
        .channels
        .get(package)
        .and_then(|c| c.get(channel))
        .ok_or_else(no_channel)?;
    let head =
        channel_head(entries).map_err(|e| format!("package {package} channel {channel}: {e}"))?;
    catalog.bundle(package, head).ok_or_else(no_channel)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lab() -> CatalogIndex {
        CatalogIndex::lab("mirror.lab:8443").unwrap()
    }

    fn source(image: &str) -> Value {
        json!({"metadata": {"name": "cs", "namespace": MARKETPLACE},
               "spec": {"sourceType": "grpc", "image": image}})
    }

    #[test]
    fn a_mirrored_catalog_is_known_by_its_repository_under_any_prefix() {
        let index = lab();
        let unreachable = vec!["registry.redhat.io".to_string()];
        for image in [
            "mirror.lab:8443/redhat/redhat-operator-index:v4.18",
            "mirror.lab:8443/olm/redhat/redhat-operator-index:v4.18",
        ] {
            assert!(
                content(&index, &unreachable, &source(image)).is_some(),
                "{image}"
            );
        }
        for image in [
            "mirror.lab:8443/xredhat/redhat-operator-index:v4.18",
            "mirror.lab:8443/redhat/certified-operator-index:v4.18",
            // The default source, on a registry an air-gapped cluster cannot reach.
            "registry.redhat.io/redhat/redhat-operator-index:v4.18",
        ] {
            assert!(
                content(&index, &unreachable, &source(image)).is_none(),
                "{image}"
            );
        }
    }

    #[test]
    fn the_head_of_a_channel_or_of_the_default_channel_is_installed() {
        let index = lab();
        let image = ImageRef::parse("m:1/redhat/redhat-operator-index:v4.18").unwrap();
        let catalog = index.for_image(&image).unwrap();
        let b = channel_head_bundle(
            catalog,
            "openshift-gitops-operator",
            Some("gitops-1.14"),
            "s",
        );
        assert_eq!(b.unwrap().name, "openshift-gitops-operator.v1.14.3");
        let b = channel_head_bundle(catalog, "openshift-gitops-operator", None, "s");
        assert_eq!(b.unwrap().name, "openshift-gitops-operator.v1.15.1");
        let e = channel_head_bundle(catalog, "nfd", Some("beta"), "s").unwrap_err();
        assert_eq!(e, "no operators found in channel beta of package nfd in the catalog referenced by subscription s");
        let e = channel_head_bundle(catalog, "nope", None, "s").unwrap_err();
        assert_eq!(
            e,
            "no operators found in package nope in the catalog referenced by subscription s"
        );
    }
}
