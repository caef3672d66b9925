//! The node-joiner's `add-nodes`, as the lab runs it in place of the pod oc launches: the
//! workflow report (openshift/installer `pkg/asset/agent/workflow/report/report.go`, stage ids
//! and descriptions from `pkg/asset/agent/workflow/commons.go`), nodes-config.yaml's rules in
//! the installer's words (`pkg/asset/agent/joiner/addnodesconfig.go`, and
//! `pkg/asset/agent/agentconfig/agenthosts.go` with `baremetal/validation`
//! `ValidateHostRootDeviceHints`), the cluster facts it reads (`pkg/asset/agent/joiner/
//! clusterinfo.go`: ClusterVersion, the architecture from the first master Node) and the ISO
//! `node.<arch>.iso` (`pkg/asset/agent/image/agentimage.go`).

use serde::Serialize;
use serde_json::Value;

/// A stage of the report.
#[derive(Clone, Debug, Serialize)]
pub struct Stage {
    /// The stage id.
    pub id: String,
    /// Its description, which oc prints.
    #[serde(rename = "description", skip_serializing_if = "String::is_empty")]
    pub desc: String,
    /// Start.
    pub start_time: String,
    /// End.
    pub end_time: String,
    /// The stage's result (cluster inspection: its facts as JSON).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub result: String,
    /// Sub-stages.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sub_stages: Vec<Stage>,
}

/// The result.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Outcome {
    /// 0 or 1.
    pub exit_code: u8,
    /// The innermost error.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub error_message: String,
    /// The whole error.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub detailed_error_message: String,
}

/// `report.json`.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// `report-addnodes-<YYYYMMDDhhmm>`.
    pub id: String,
    /// Start.
    pub start_time: String,
    /// End (set when done).
    pub end_time: String,
    /// The stages so far.
    pub stages: Vec<Stage>,
    /// The result.
    pub result: Outcome,
}

impl Report {
    /// A report started now.
    pub fn start() -> Report {
        let now = time::OffsetDateTime::now_utc();
        let id = now
            .format(time::macros::format_description!(
                "[year][month][day][hour][minute]"
            ))
            .unwrap_or_default();
        Report {
            id: format!("report-addnodes-{id}"),
            start_time: rfc3339(),
            end_time: String::new(),
            stages: Vec::new(),
            result: Outcome::default(),
        }
    }

    /// Begins stage `id` (closing the previous one); its description.
    pub fn stage(&mut self, id: &str) -> &'static str {
        let desc = describe(id);
        if let Some(last) = self.stages.last_mut() {
            last.end_time = rfc3339();
        }
        self.stages.push(Stage {
            id: id.into(),
            desc: desc.into(),
            start_time: rfc3339(),
            end_time: String::new(),
            result: String::new(),
            sub_stages: Vec::new(),
        });
        desc
    }

    /// Ends the workflow with `err` (the installer's `Complete`): the chain's innermost
    /// message is `error_message`, the whole `detailed_error_message`.
    pub fn complete(&mut self, err: Option<&anyhow::Error>) {
        let now = rfc3339();
        if let Some(last) = self.stages.last_mut() {
            last.end_time = now.clone();
        }
        self.end_time = now;
        if let Some(e) = err {
            self.result = Outcome {
                exit_code: 1,
                error_message: e.root_cause().to_string(),
                detailed_error_message: format!("{e:#}"),
            };
        }
    }
}

/// `time.Now().UTC().Format(time.RFC3339)`.
pub fn rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

fn describe(id: &str) -> &'static str {
    match id {
        "add-nodes-cluster-inspection" => {
            "Gathering additional information from the target cluster"
        }
        "create-manifest" => "Creating internal configuration manifests",
        "ignition" => "Rendering ISO ignition",
        "fetch-base-iso" => "Retrieving the base ISO image",
        "create-agent-artifacts" => "Creating agent artifacts for the final image",
        "generate-iso" => "Assembling ISO image",
        _ => "",
    }
}

fn mac_ok(mac: &str) -> bool {
    let parts: Vec<&str> = mac.split([':', '-']).collect();
    parts.len() == 6
        && parts
            .iter()
            .all(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_hexdigit()))
}

/// nodes-config.yaml's rules, in the installer's words; the first failing group's message
/// (field errors joined as `field.ErrorList.ToAggregate` does).
pub fn validate(config: &Value) -> Result<(), String> {
    let hosts = config["hosts"].as_array().cloned().unwrap_or_default();
    if hosts.is_empty() {
        return Err("hosts: Required value: at least one host must be defined".into());
    }
    let mut errs: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (i, h) in hosts.iter().enumerate() {
        let ifaces = h["interfaces"].as_array().cloned().unwrap_or_default();
        if ifaces.is_empty() {
            errs.push(format!("Hosts[{i}].Interfaces: Required value: at least one interface must be defined for each node"));
        }
        for (j, iface) in ifaces.iter().enumerate() {
            let path = format!("Hosts[{i}].Interfaces[{j}].macAddress");
            match iface["macAddress"].as_str().unwrap_or_default() {
                "" => errs.push(format!(
                    "{path}: Required value: each interface must have a MAC address defined"
                )),
                mac if !mac_ok(mac) => errs.push(format!(
                    "{path}: Invalid value: \"{mac}\": address {mac}: invalid MAC address"
                )),
                mac if !seen.insert(mac.to_ascii_lowercase()) => errs.push(format!(
                    "{path}: Invalid value: \"{mac}\": duplicate MAC address found"
                )),
                _ => {}
            }
        }
        let hints = &h["rootDeviceHints"];
        if let Some(d) = hints["deviceName"].as_str() {
            if !d.starts_with("/dev/") {
                errs.push(format!("Hosts[{i}].RootDeviceHints.DeviceName: Invalid value: \"{d}\": Device Name of root device hint must be a /dev/ path"));
            } else if d.starts_with("/dev/disk/") && !d.starts_with("/dev/disk/by-path/") {
                errs.push(format!("Hosts[{i}].RootDeviceHints.DeviceName: Invalid value: \"{d}\": Device Name of root device hint must be path in /dev/ or /dev/disk/by-path/"));
            }
        }
        if hints.get("wwnWithExtension").is_some() {
            errs.push(format!("Hosts[{i}].RootDeviceHints.WWNWithExtension: Forbidden: WWN extensions are not supported in root device hints"));
        }
        if hints.get("wwnVendorExtension").is_some() {
            errs.push(format!("Hosts[{i}].RootDeviceHints.WWNVendorExtension: Forbidden: WWN vendor extensions are not supported in root device hints"));
        }
        if let Some(role) = h["role"].as_str().filter(|r| !r.is_empty()) {
            if role != "master" && role != "worker" {
                errs.push(format!("Hosts[{i}].Host: Forbidden: host role has incorrect value. Role must either be 'master' or 'worker'"));
            }
        }
    }
    match errs.len() {
        0 => Ok(()),
        1 => Err(errs.remove(0)),
        _ => Err(format!("[{}]", errs.join(", "))),
    }
}

/// The installer's architecture name for a Node's `nodeInfo.architecture`.
pub fn installer_arch(node_arch: &str) -> &str {
    match node_arch {
        "amd64" => "x86_64",
        "arm64" => "aarch64",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The installer's words for the rules a product must meet.
    #[test]
    fn nodes_config_rules_in_the_installers_words() {
        assert_eq!(
            validate(&json!({})).unwrap_err(),
            "hosts: Required value: at least one host must be defined"
        );
        let no_mac = json!({"hosts": [{"hostname": "w", "interfaces": [{"name": "eth0"}]}]});
        assert_eq!(validate(&no_mac).unwrap_err(), "Hosts[0].Interfaces[0].macAddress: Required value: each interface must have a MAC address defined");
        let dup = json!({"hosts": [{"interfaces": [{"name": "a", "macAddress": "aa:bb:cc:00:00:01"}]},
            {"interfaces": [{"name": "b", "macAddress": "AA:BB:CC:00:00:01"}]}]});
        assert!(validate(&dup)
            .unwrap_err()
            .contains("duplicate MAC address found"));
        let role = json!({"hosts": [{"role": "infra", "interfaces": [{"name": "a", "macAddress": "aa:bb:cc:00:00:01"}]}]});
        assert!(validate(&role)
            .unwrap_err()
            .contains("Role must either be 'master' or 'worker'"));
        let good = json!({"hosts": [{"hostname": "w", "role": "worker", "rootDeviceHints": {"deviceName": "/dev/disk/by-path/pci-0000:00:05.0"},
            "interfaces": [{"name": "a", "macAddress": "aa:bb:cc:00:00:01"}]}]});
        assert_eq!(validate(&good), Ok(()));
    }
}
