//! The CustomResourceDefinitions the lab cluster starts with, as their projects publish them
//! (OLM's `operators.coreos.com`, OLM v1's ClusterCatalog, OpenShift's `config.openshift.io` kinds the install and the
//! hand-off touch, and Route); `crds/README.md` names each file's repository, path and commit.

use super::store::{ApiError, Store};

/// (file, text) of each CRD file.
pub const LAB_CRDS: &[(&str, &str)] = &[
    (
        "operators.coreos.com_subscriptions.yaml",
        include_str!("crds/operators.coreos.com_subscriptions.yaml"),
    ),
    (
        "operators.coreos.com_clusterserviceversions.yaml",
        include_str!("crds/operators.coreos.com_clusterserviceversions.yaml"),
    ),
    (
        "operators.coreos.com_installplans.yaml",
        include_str!("crds/operators.coreos.com_installplans.yaml"),
    ),
    (
        "operators.coreos.com_operatorgroups.yaml",
        include_str!("crds/operators.coreos.com_operatorgroups.yaml"),
    ),
    (
        "operators.coreos.com_catalogsources.yaml",
        include_str!("crds/operators.coreos.com_catalogsources.yaml"),
    ),
    (
        "olm.operatorframework.io_clustercatalogs.yaml",
        include_str!("crds/olm.operatorframework.io_clustercatalogs.yaml"),
    ),
    (
        "0000_03_marketplace_01_operatorhubs.crd.yaml",
        include_str!("crds/0000_03_marketplace_01_operatorhubs.crd.yaml"),
    ),
    (
        "0000_10_config-operator_01_imagedigestmirrorsets.crd.yaml",
        include_str!("crds/0000_10_config-operator_01_imagedigestmirrorsets.crd.yaml"),
    ),
    (
        "0000_10_config-operator_01_imagetagmirrorsets.crd.yaml",
        include_str!("crds/0000_10_config-operator_01_imagetagmirrorsets.crd.yaml"),
    ),
    (
        "0000_00_cluster-version-operator_01_clusterversions-Default.crd.yaml",
        include_str!("crds/0000_00_cluster-version-operator_01_clusterversions-Default.crd.yaml"),
    ),
    (
        "0000_00_cluster-version-operator_01_clusteroperators.crd.yaml",
        include_str!("crds/0000_00_cluster-version-operator_01_clusteroperators.crd.yaml"),
    ),
    ("routes.crd.yaml", include_str!("crds/routes.crd.yaml")),
];

/// Creates the lab's CRDs in the store; their names.
pub fn install(store: &Store) -> Result<Vec<String>, ApiError> {
    let mut names = Vec::new();
    for (file, text) in LAB_CRDS {
        let loaded = store.load_crds(text).map_err(|e| ApiError {
            message: format!("{file}: {}", e.message),
            ..e
        })?;
        names.extend(loaded);
    }
    Ok(names)
}

impl Store {
    /// A store holding what a freshly installed lab cluster holds: the built-in kinds, the
    /// usual namespaces and the lab's CRDs.
    pub fn lab_cluster() -> Result<Store, ApiError> {
        let store = Store::new();
        install(&store)?;
        Ok(store)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every CRD file registers its kinds, served and established.
    #[test]
    fn the_lab_crds_register_their_kinds() {
        let store = Store::lab_cluster().unwrap();
        for (api_version, kind) in [
            ("operators.coreos.com/v1alpha1", "Subscription"),
            ("operators.coreos.com/v1alpha1", "ClusterServiceVersion"),
            ("operators.coreos.com/v1alpha1", "InstallPlan"),
            ("operators.coreos.com/v1", "OperatorGroup"),
            ("operators.coreos.com/v1alpha1", "CatalogSource"),
            ("olm.operatorframework.io/v1", "ClusterCatalog"),
            ("config.openshift.io/v1", "OperatorHub"),
            ("config.openshift.io/v1", "ImageDigestMirrorSet"),
            ("config.openshift.io/v1", "ImageTagMirrorSet"),
            ("config.openshift.io/v1", "ClusterVersion"),
            ("config.openshift.io/v1", "ClusterOperator"),
            ("route.openshift.io/v1", "Route"),
        ] {
            assert!(
                store.is_established(api_version, kind),
                "{api_version} {kind}"
            );
        }
    }
}
