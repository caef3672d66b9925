//! The lab cluster's MachineConfigs: the ISO's extra manifests (`openshift/*.yaml|yml`) of kind
//! MachineConfig, which the agent installer applies to the new cluster and the machine-config
//! operator renders onto every node of the pool its `machineconfiguration.openshift.io/role`
//! label names (kernel arguments take effect when the node next boots). The site process
//! records them in `STATE/machineconfigs.json` once the simulated nodes have read the ISO
//! ([`super::simulator`]), so `bootstrap-lab repair` ([`super::repair`]) reboots a node with
//! exactly the kernel arguments the install carried, never ones the lab assumes.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// `STATE/machineconfigs.json`: the MachineConfigs of the ISO the nodes booted.
pub const FILE: &str = "machineconfigs.json";

/// The role label of a MachineConfig (its MachineConfigPool).
const ROLE_LABEL: &str = "machineconfiguration.openshift.io/role";

/// One MachineConfig, as much of it as the lab acts on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfig {
    /// `metadata.name` (`99-master-blacklist-irdma`).
    pub name: String,
    /// Its pool (`master`, `worker`), from its role label; empty when it has none.
    pub role: String,
    /// `spec.kernelArguments`.
    pub kernel_arguments: Vec<String>,
    /// The manifest it came from, in the ISO (`openshift/99-master-blacklist-irdma.yaml`).
    pub manifest: String,
}

/// Every MachineConfig in the `*.yaml|yml` files of `dir` (the ISO's `openshift/`), by name;
/// none when `dir` does not exist (an ISO without extra manifests).
pub fn from_manifests(dir: &Path) -> Result<Vec<MachineConfig>> {
    let mut found = Vec::new();
    if !dir.is_dir() {
        return Ok(found);
    }
    let mut files: Vec<_> = fs_err::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    for file in files {
        let text = fs_err::read_to_string(&file)?;
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text)
            .with_context(|| format!("reading the ISO's manifest {}", file.display()))?;
        let manifest = format!(
            "openshift/{}",
            file.file_name().unwrap_or_default().to_string_lossy()
        );
        for doc in docs.iter().filter(|d| d["kind"] == "MachineConfig") {
            let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
            found.push(MachineConfig {
                name: text(&doc["metadata"]["name"]),
                role: text(&doc["metadata"]["labels"][ROLE_LABEL]),
                kernel_arguments: doc["spec"]["kernelArguments"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(text)
                    .collect(),
                manifest: manifest.clone(),
            });
        }
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(found)
}

/// Writes `STATE/machineconfigs.json`.
pub fn record(state: &Path, configs: &[MachineConfig]) -> Result<()> {
    bootstrap::fs::write_json(&state.join(FILE), &configs)
}

/// Reads `STATE/machineconfigs.json`: `None` when no node has read an ISO yet.
pub fn read(state: &Path) -> Result<Option<Vec<MachineConfig>>> {
    let path = state.join(FILE);
    match fs_err::read_to_string(&path) {
        Ok(text) => Ok(Some(
            serde_json::from_str(&text).with_context(|| format!("reading {}", path.display()))?,
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The MachineConfigs of pool `role`, in the order the operator merges them (by name).
pub fn of_role<'a>(configs: &'a [MachineConfig], role: &str) -> Vec<&'a MachineConfig> {
    configs.iter().filter(|c| c.role == role).collect()
}

/// The modules `module_blacklist=a,b` kernel arguments keep from loading.
pub fn blacklisted_modules(kernel_arguments: &[String]) -> Vec<String> {
    kernel_arguments
        .iter()
        .filter_map(|a| a.strip_prefix("module_blacklist="))
        .flat_map(|list| list.split(','))
        .filter(|m| !m.is_empty())
        .map(|m| m.replace('-', "_"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The iso stage's irdma MachineConfig and an inventory manifest without kernel arguments
    /// are both read, with their pool; a file of another kind is not a MachineConfig.
    #[test]
    fn the_isos_machine_configs_are_read_with_their_pool_and_kernel_arguments() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("openshift");
        fs_err::create_dir_all(&dir).unwrap();
        fs_err::write(
            dir.join("99-master-blacklist-irdma.yaml"),
            "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 99-master-blacklist-irdma\n  labels:\n    machineconfiguration.openshift.io/role: master\nspec:\n  kernelArguments:\n  - module_blacklist=irdma\n",
        )
        .unwrap();
        fs_err::write(
            dir.join("50-chrony.yml"),
            "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 50-master-chrony\n  labels:\n    machineconfiguration.openshift.io/role: master\n",
        )
        .unwrap();
        fs_err::write(
            dir.join("cm.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
        )
        .unwrap();
        let found = from_manifests(&dir).unwrap();
        let names: Vec<&str> = found.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["50-master-chrony", "99-master-blacklist-irdma"]);
        let args: Vec<String> = of_role(&found, "master")
            .iter()
            .flat_map(|c| c.kernel_arguments.clone())
            .collect();
        assert_eq!(blacklisted_modules(&args), ["irdma"]);
        assert!(of_role(&found, "worker").is_empty());
        assert!(from_manifests(&tmp.path().join("none")).unwrap().is_empty());
    }
}
