//! The CustomResourceDefinitions each operator package owns, as the projects ship them in their
//! bundles (files under `crds/`, their sources in `crds/README.md`; Argo CD's Application and
//! AppProject are the files `bootstrap::gitops` validates against, not a second copy). An
//! InstallPlan creates them; a package missing here installs no CRDs.

use serde_json::Value;

/// One CRD file: its `metadata.name` and its YAML.
#[derive(Clone, Copy, Debug)]
pub struct CrdFile {
    /// `metadata.name`, e.g. `argocds.argoproj.io`.
    pub name: &'static str,
    /// The file, whole.
    pub yaml: &'static str,
}

const ARGOCDS: CrdFile = CrdFile {
    name: "argocds.argoproj.io",
    yaml: include_str!("crds/argoproj.io_argocds.yaml"),
};
const APPLICATIONS: CrdFile = CrdFile {
    name: "applications.argoproj.io",
    yaml: bootstrap::gitops::crd::APPLICATION_CRD_YAML,
};
const APPPROJECTS: CrdFile = CrdFile {
    name: "appprojects.argoproj.io",
    yaml: bootstrap::gitops::crd::APPPROJECT_CRD_YAML,
};
const NODE_FEATURE_DISCOVERIES: CrdFile = CrdFile {
    name: "nodefeaturediscoveries.nfd.openshift.io",
    yaml: include_str!("crds/nfd.openshift.io_nodefeaturediscoveries.yaml"),
};
const CLUSTER_POLICIES: CrdFile = CrdFile {
    name: "clusterpolicies.nvidia.com",
    yaml: include_str!("crds/nvidia.com_clusterpolicies.yaml"),
};
const NVIDIA_DRIVERS: CrdFile = CrdFile {
    name: "nvidiadrivers.nvidia.com",
    yaml: include_str!("crds/nvidia.com_nvidiadrivers.yaml"),
};
const NIC_CLUSTER_POLICIES: CrdFile = CrdFile {
    name: "nicclusterpolicies.mellanox.com",
    yaml: include_str!("crds/mellanox.com_nicclusterpolicies.yaml"),
};
const DATA_SCIENCE_CLUSTERS: CrdFile = CrdFile {
    name: "datascienceclusters.datasciencecluster.opendatahub.io",
    yaml: include_str!("crds/datasciencecluster.opendatahub.io_datascienceclusters.yaml"),
};
const DSC_INITIALIZATIONS: CrdFile = CrdFile {
    name: "dscinitializations.dscinitialization.opendatahub.io",
    yaml: include_str!("crds/dscinitialization.opendatahub.io_dscinitializations.yaml"),
};

/// Package -> the CRDs its CSV owns.
const OWNED: &[(&str, &[CrdFile])] = &[
    (
        "openshift-gitops-operator",
        &[ARGOCDS, APPLICATIONS, APPPROJECTS],
    ),
    ("nfd", &[NODE_FEATURE_DISCOVERIES]),
    (
        "gpu-operator-certified",
        &[CLUSTER_POLICIES, NVIDIA_DRIVERS],
    ),
    ("nvidia-network-operator", &[NIC_CLUSTER_POLICIES]),
    (
        "rhods-operator",
        &[DATA_SCIENCE_CLUSTERS, DSC_INITIALIZATIONS],
    ),
];

/// The CRDs `package` owns (none for a package the table does not list).
pub fn owned_by(package: &str) -> &'static [CrdFile] {
    OWNED
        .iter()
        .find(|(p, _)| *p == package)
        .map(|(_, files)| *files)
        .unwrap_or(&[])
}

/// The CRD file named `name`, from any package.
pub fn by_name(name: &str) -> Option<CrdFile> {
    OWNED
        .iter()
        .flat_map(|(_, files)| files.iter())
        .find(|f| f.name == name)
        .copied()
}

/// What a CSV's `spec.customresourcedefinitions.owned[]` says of a CRD: name, kind and storage
/// version.
pub fn owned_entry(file: &CrdFile) -> anyhow::Result<Value> {
    let crd = parse(file)?;
    let kind = crd["spec"]["names"]["kind"].clone();
    let storage = crd["spec"]["versions"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["storage"] == true))
        .map(|v| v["name"].clone())
        .unwrap_or_default();
    Ok(serde_json::json!({
        "name": file.name,
        "kind": kind,
        "displayName": kind,
        "version": storage,
    }))
}

/// The CRD document of `file`.
fn parse(file: &CrdFile) -> anyhow::Result<Value> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(file.yaml)
        .map_err(|e| anyhow::anyhow!("reading the CRD file of {}: {e}", file.name))?;
    docs.into_iter()
        .find(|d| !d.is_null())
        .ok_or_else(|| anyhow::anyhow!("the CRD file of {} is empty", file.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_owned_crd_file_is_the_crd_it_is_named_for() {
        for (package, files) in OWNED {
            for f in *files {
                let docs: Vec<Value> = serde_saphyr::from_multiple(f.yaml).unwrap();
                let docs: Vec<&Value> = docs.iter().filter(|d| !d.is_null()).collect();
                assert_eq!(docs.len(), 1, "{package}: {}", f.name);
                let crd = docs[0];
                assert_eq!(crd["kind"], "CustomResourceDefinition");
                assert_eq!(crd["metadata"]["name"], f.name);
                let entry = owned_entry(f).unwrap();
                assert!(
                    entry["kind"].as_str().is_some_and(|k| !k.is_empty()),
                    "{}",
                    f.name
                );
                assert!(
                    entry["version"]
                        .as_str()
                        .is_some_and(|v| v.starts_with('v')),
                    "{}",
                    f.name
                );
            }
        }
    }

    #[test]
    fn gitops_owns_argo_cd_kinds_and_unknown_packages_own_nothing() {
        let names: Vec<&str> = owned_by("openshift-gitops-operator")
            .iter()
            .map(|f| f.name)
            .collect();
        assert_eq!(
            names,
            [
                "argocds.argoproj.io",
                "applications.argoproj.io",
                "appprojects.argoproj.io"
            ]
        );
        assert!(owned_by("kubernetes-nmstate-operator").is_empty());
        assert_eq!(
            by_name("clusterpolicies.nvidia.com").unwrap().name,
            "clusterpolicies.nvidia.com"
        );
    }
}
