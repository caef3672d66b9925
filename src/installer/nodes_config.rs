//! nodes-config.yaml as `oc adm node-image create` reads it to build the ISO of nodes added to
//! a running cluster: openshift/installer `pkg/asset/agent/joiner/addnodesconfig.go` (`Config`;
//! oc itself only checks that the file is YAML, create.go `validateConfigFile`, and ships it to
//! the node-joiner). Its hosts are agent-config.yaml's own type (`pkg/types/agent`
//! `agent.Host`), so [`super::agent_config::Host`] is reused, `N` being a host's NMState.
//!
//! The installer's rules for it (`finish()`, and `AgentHosts` for the add-nodes workflow):
//! at least one host ("at least one host must be defined"); each with at least one interface
//! ("at least one interface must be defined for each node"), each interface with a MAC ("each
//! interface must have a MAC address defined"), no MAC twice ("duplicate MAC address found");
//! roles `master` or `worker`, though only workers are added (`numMasters = 0` in
//! `pkg/asset/agent/image/ignition.go`). [`NodesConfig::check`] applies them to what bootstrap
//! renders, so a mistake is bootstrap's error before oc runs, in the installer's words.

use super::agent_config::Host;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;

/// The file's name, in the folder `oc adm node-image create --dir` reads.
pub const FILE: &str = "nodes-config.yaml";

/// nodes-config.yaml.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodesConfig<N = Value> {
    /// The new nodes' architecture (`x86_64`, `aarch64`...); default the control plane's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_architecture: Option<String>,
    /// The `core` user's SSH public key; default the workers' MachineConfig `99-worker-ssh`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_key: Option<String>,
    /// Where PXE artifacts are served from (`--pxe` only).
    #[serde(
        default,
        rename = "bootArtifactsBaseURL",
        skip_serializing_if = "Option::is_none"
    )]
    pub boot_artifacts_base_url: Option<String>,
    /// The nodes to add.
    #[serde(default = "Vec::new")]
    pub hosts: Vec<Host<N>>,
}

impl<N> NodesConfig<N> {
    /// The installer's rules, in its words with the field (`hosts[0].interfaces[1].macAddress`);
    /// every problem, not only the first.
    pub fn check(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.hosts.is_empty() {
            problems.push("hosts: Required value: at least one host must be defined".into());
        }
        let mut macs = BTreeSet::new();
        for (i, h) in self.hosts.iter().enumerate() {
            let at = format!("Hosts[{i}]");
            if h.interfaces.is_empty() {
                problems.push(format!(
                    "{at}.Interfaces: Required value: at least one interface must be defined for each node"
                ));
            }
            for (j, nic) in h.interfaces.iter().enumerate() {
                let field = format!("{at}.Interfaces[{j}].macAddress");
                match nic.mac_address.as_deref() {
                    None | Some("") => problems.push(format!(
                        "{field}: Required value: each interface must have a MAC address defined"
                    )),
                    Some(mac) if !macs.insert(mac.to_ascii_lowercase()) => problems.push(format!(
                        "{field}: Invalid value: \"{mac}\": duplicate MAC address found"
                    )),
                    Some(_) => {}
                }
            }
            match h.role.as_deref() {
                None | Some("worker") => {}
                Some("master") => problems.push(format!(
                    "{at}.Role: Unsupported value: \"master\": bootstrap adds workers only, as \
                     the add-nodes workflow does (a control-plane node is replaced, not added)"
                )),
                Some(r) => problems.push(format!(
                    "{at}.Role: Invalid value: \"{r}\": host role has incorrect value. Role must either be 'master' or 'worker'"
                )),
            }
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::installer::agent_config::Interface;

    fn host(name: &str, macs: &[&str], role: &str) -> Host {
        Host {
            hostname: Some(name.into()),
            role: Some(role.into()),
            interfaces: macs
                .iter()
                .map(|m| Interface {
                    name: Some("eno1".into()),
                    mac_address: Some(m.to_string()),
                })
                .collect(),
            ..Host::default()
        }
    }

    /// The installer's rules: hosts, interfaces, MACs, duplicates, roles.
    #[test]
    fn the_installers_rules_are_applied_in_its_words() {
        let none: NodesConfig = NodesConfig::default();
        assert_eq!(
            none.check(),
            ["hosts: Required value: at least one host must be defined"]
        );
        let cfg = NodesConfig {
            hosts: vec![
                host("w0", &["52:54:00:00:00:01"], "worker"),
                host("w1", &["52:54:00:00:00:01"], "worker"),
                host("w2", &[], "worker"),
                host("m3", &["52:54:00:00:00:03"], "master"),
                host("x4", &["52:54:00:00:00:04"], "infra"),
            ],
            ..NodesConfig::default()
        };
        let p = cfg.check();
        assert_eq!(p.len(), 4, "{p:#?}");
        assert!(
            p[0].contains("Hosts[1].Interfaces[0].macAddress") && p[0].contains("duplicate MAC")
        );
        assert!(p[1].contains("Hosts[2].Interfaces") && p[1].contains("at least one interface"));
        assert!(p[2].contains("Hosts[3].Role") && p[2].contains("workers only"));
        assert!(p[3].contains("Hosts[4].Role") && p[3].contains("'master' or 'worker'"));
    }

    /// The file reads back as the installer's field names.
    #[test]
    fn it_is_written_with_the_installers_field_names() {
        let cfg: NodesConfig = NodesConfig {
            cpu_architecture: Some("x86_64".into()),
            hosts: vec![host("w0", &["52:54:00:00:00:01"], "worker")],
            ..NodesConfig::default()
        };
        let text = crate::yaml::to_string(&cfg).unwrap();
        assert!(text.contains("cpuArchitecture: x86_64"), "{text}");
        assert!(!text.contains("bootArtifactsBaseURL"), "{text}");
        let back: Value = serde_saphyr::from_str(&text).unwrap();
        assert_eq!(
            back["hosts"][0]["interfaces"][0]["macAddress"], "52:54:00:00:00:01",
            "{text}"
        );
    }
}
