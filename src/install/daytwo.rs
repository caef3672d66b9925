//! Day two from the same inventory: which nodes a run whose cluster is installed is asked to
//! add. The installed nodes are the hosts of the agent-config.yaml the render stage wrote for
//! the install (`RUN/config/agent-config.yaml`); the inventory's other nodes are the ones to add.
//!
//! What cannot be done by adding nodes is refused before anything is touched, with the reason:
//! a node installed but gone from nodes.yaml (removing a node is draining it and deleting its
//! Node, which this command does not do), an installed node whose NICs changed (the cluster
//! knows the machine by them; a new machine is a new node), and a node to add that is not a
//! worker (the add-nodes workflow adds workers only: installer
//! `pkg/asset/agent/image/ignition.go`, `numMasters = 0`).

use crate::installer::agent_config::AgentConfig;
use crate::inventory::model::{Node, Role};
use crate::netaddr::normalize_mac;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;

/// What day two would do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DayTwo {
    /// The nodes the cluster was installed with, by name.
    pub installed: Vec<String>,
    /// The inventory's nodes to add, by name, in the inventory's order.
    pub added: Vec<String>,
}

/// A node as installed: its name and MACs (normalised, sorted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Installed {
    /// Its host name.
    pub hostname: String,
    /// Its NICs' MACs.
    pub macs: BTreeSet<String>,
}

/// The installed nodes, from the agent-config.yaml the install rendered (`path`).
pub fn installed(path: &Path) -> anyhow::Result<Vec<Installed>> {
    use anyhow::Context as _;
    let text = fs_err::read_to_string(path)?;
    let config: AgentConfig<Value> = serde_saphyr::from_str(&text)
        .with_context(|| format!("reading the installed nodes from {}", path.display()))?;
    Ok(config
        .hosts
        .iter()
        .map(|h| Installed {
            hostname: h.hostname.clone().unwrap_or_default(),
            macs: h
                .interfaces
                .iter()
                .filter_map(|i| i.mac_address.as_deref().map(mac))
                .collect(),
        })
        .collect())
}

fn mac(s: &str) -> String {
    normalize_mac(s).unwrap_or_else(|_| s.to_ascii_lowercase())
}

/// The nodes of `nodes` to add to a cluster installed with `installed`: `None` when there are
/// none; every problem (node named, with the way out) when the inventory asks for more than
/// adding nodes.
pub fn plan(nodes: &[Node], installed: &[Installed]) -> Result<Option<DayTwo>, Vec<String>> {
    let mut problems = Vec::new();
    for i in installed {
        match nodes.iter().find(|n| n.hostname == i.hostname) {
            None => problems.push(format!(
                "node {}: the cluster has it (installed with it, or added on day two), but \
                 nodes.yaml no longer has it; \
                 bootstrap adds nodes, it does not remove them (drain it, delete its Node and \
                 power it off yourself), so put it back in nodes.yaml",
                i.hostname
            )),
            Some(n) => {
                let now: BTreeSet<String> = n.nics.iter().map(|c| mac(&c.mac)).collect();
                if now != i.macs {
                    problems.push(format!(
                        "node {}: installed with the NICs {}, nodes.yaml now says {}; the \
                         cluster knows the machine by them, so a changed machine is a new node \
                         under a new name: restore its nics",
                        i.hostname,
                        i.macs.iter().cloned().collect::<Vec<_>>().join(", "),
                        now.into_iter().collect::<Vec<_>>().join(", ")
                    ));
                }
            }
        }
    }
    let names: BTreeSet<&str> = installed.iter().map(|i| i.hostname.as_str()).collect();
    let added: Vec<&Node> = nodes
        .iter()
        .filter(|n| !names.contains(n.hostname.as_str()))
        .collect();
    for n in &added {
        if n.role != Role::Worker {
            problems.push(format!(
                "node {}: role {} cannot be added to a running cluster; the add-nodes workflow \
                 adds workers only: make it role: worker, or leave it out",
                n.hostname,
                crate::render::files::role_name(n.role)
            ));
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    if added.is_empty() {
        return Ok(None);
    }
    Ok(Some(DayTwo {
        installed: installed.iter().map(|i| i.hostname.clone()).collect(),
        added: added.iter().map(|n| n.hostname.clone()).collect(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, role: &str, mac: &str) -> Node {
        let yaml = format!(
            "hostname: {name}\nrole: {role}\nbmc: {{address: 'https://10.0.0.1'}}\n\
             rootDevice: {{deviceName: /dev/sda}}\nnics: [{{name: eno1, mac: '{mac}'}}]\n\
             addresses: [{{interface: eno1, ip: 10.20.0.9/24}}]\n"
        );
        serde_saphyr::from_str(&yaml).unwrap_or_else(|e| panic!("{e}: {yaml}"))
    }

    fn was(name: &str, mac: &str) -> Installed {
        Installed {
            hostname: name.into(),
            macs: [mac.to_string()].into_iter().collect(),
        }
    }

    /// Nothing new: no day two. A new worker: day two adds it alone.
    #[test]
    fn a_new_worker_is_the_only_node_added() {
        let installed = [was("m0", "52:54:00:00:00:01")];
        let mut nodes = vec![node("m0", "master", "52:54:00:00:00:01")];
        assert_eq!(plan(&nodes, &installed), Ok(None));
        nodes.push(node("w0", "worker", "52:54:00:00:00:02"));
        assert_eq!(
            plan(&nodes, &installed),
            Ok(Some(DayTwo {
                installed: vec!["m0".into()],
                added: vec!["w0".into()]
            }))
        );
    }

    /// A node removed, an installed node's NICs changed, a master to add: each refused, named.
    #[test]
    fn what_adding_nodes_cannot_do_is_refused_naming_the_node() {
        let installed = [
            was("m0", "52:54:00:00:00:01"),
            was("m1", "52:54:00:00:00:03"),
        ];
        let nodes = vec![
            node("m0", "master", "52:54:00:00:00:0A"),
            node("m2", "master", "52:54:00:00:00:04"),
        ];
        let p = plan(&nodes, &installed).unwrap_err();
        assert_eq!(p.len(), 3, "{p:#?}");
        assert!(
            p[0].starts_with("node m0:") && p[0].contains("52:54:00:00:00:0a"),
            "{}",
            p[0]
        );
        assert!(
            p[1].starts_with("node m1:") && p[1].contains("does not remove"),
            "{}",
            p[1]
        );
        assert!(
            p[2].starts_with("node m2:") && p[2].contains("workers only"),
            "{}",
            p[2]
        );
    }
}
