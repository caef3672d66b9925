//! The hosts of a prep run: every node of the site inventory as an SSH host with the groups and
//! variables playbooks see, or the hosts of an Ansible inventory file (`-i FILE`); and the
//! Ansible inventory prep writes, so `ansible-playbook` reaches the same hosts the same way
//! (same address, user, key file and host-key pins).

use super::checks::{expectations, ssh_address};
use super::known_hosts::KnownHosts;
use super::playbook::inventory::AnsibleInventory;
use super::playbook::Host;
use super::ssh::{Endpoint, KeySource, SshConfig, SshHost};
use crate::inventory::model::{Node, DEFAULT_SSH_USER};
use crate::inventory::Inventory;
use anyhow::{bail, Result};
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The MTU of an interface the inventory gives none.
const DEFAULT_MTU: u32 = 1500;

/// One host to prepare: its SSH connection and what playbooks see of it.
pub struct PrepHost {
    /// The node (or the Ansible inventory's host name).
    pub name: String,
    /// Its SSH endpoint: address, port, user, pinned keys.
    pub endpoint: Endpoint,
    /// Its connection settings (key, bastion, known_hosts, timeouts).
    pub config: Arc<SshConfig>,
    /// The connection, opened on first use and shared by facts and playbooks.
    pub ssh: Arc<SshHost>,
    /// Its groups (not `all`).
    pub groups: Vec<String>,
    /// Its variables.
    pub vars: Map<String, Value>,
}

impl PrepHost {
    fn new(
        endpoint: Endpoint,
        config: Arc<SshConfig>,
        groups: Vec<String>,
        vars: Map<String, Value>,
    ) -> Self {
        let ssh = Arc::new(SshHost::new(endpoint.clone(), config.clone()));
        PrepHost {
            name: endpoint.name.clone(),
            endpoint,
            config,
            ssh,
            groups,
            vars,
        }
    }

    /// The playbook engine's view of it.
    pub fn host(&self) -> Host {
        Host {
            name: self.name.clone(),
            groups: self.groups.clone(),
            vars: self.vars.clone(),
            user: self.endpoint.user.clone(),
            remote: self.ssh.clone(),
        }
    }
}

/// Every node of the site inventory, reached as `prep.ssh` says; host keys are learned into,
/// and checked against, the file `known_hosts` (OpenSSH's format; the caller names it).
pub fn site_hosts(
    inv: &Inventory,
    known_hosts: &Path,
    reconnect_for: Duration,
) -> Result<Vec<PrepHost>> {
    let ssh = &inv.site.prep.ssh;
    let key = match (&ssh.private_key, ssh.agent) {
        (Some(file), false) => {
            let path = inv.resolve(&file.file);
            // Refused before any node is connected to, by the rule validation applies (a run
            // with --from prep, or `bootstrap prep`, does not validate first).
            if let Ok(Some(mode)) = crate::secret::open_mode(&path) {
                let e = super::ssh::LoginKeyError::Exposed { path, mode };
                bail!("site.yaml prep.ssh.privateKey.file: {e}");
            }
            KeySource::File(path)
        }
        (None, true) => KeySource::Agent,
        (Some(_), true) => bail!("site.yaml prep.ssh: give privateKey or agent: true, not both"),
        // As ssh does: the agent's keys when one runs.
        (None, false) if std::env::var_os("SSH_AUTH_SOCK").is_some() => KeySource::Agent,
        (None, false) => bail!(
            "site.yaml prep.ssh: no key to log in with and no ssh-agent running (SSH_AUTH_SOCK); set prep.ssh.privateKey.file to the private key of references.sshPublicKey, or start ssh-agent with that key added"
        ),
    };
    let bastion = ssh.bastion.as_ref().map(|b| Endpoint {
        name: "bastion".to_string(),
        address: b.address.clone(),
        port: b.port.unwrap_or(22),
        user: b.user.clone().unwrap_or_else(|| ssh.user().to_string()),
        pinned: b.host_keys.clone(),
    });
    let known = Arc::new(KnownHosts::new(known_hosts));
    let mut config = SshConfig::new(key, bastion, known);
    config.connect_timeout = ssh.connect_timeout();
    config.reconnect_for = reconnect_for;
    let config = Arc::new(config);
    let mut hosts = Vec::new();
    for node in &inv.nodes.nodes {
        let Some(address) = ssh_address(inv, node) else {
            bail!(
                "node {}: no address in networks.machine to reach it by SSH; give it one, or set sshAddress",
                node.hostname
            );
        };
        let endpoint = Endpoint {
            name: node.hostname.clone(),
            address,
            port: ssh.port(),
            user: ssh.user().to_string(),
            pinned: node.host_keys.clone(),
        };
        let (groups, vars) = node_groups_and_vars(inv, node, &endpoint);
        hosts.push(PrepHost::new(endpoint, config.clone(), groups, vars));
    }
    Ok(hosts)
}

/// A node's groups (its role, its class, `gpu` when GPUs are expected) and variables.
fn node_groups_and_vars(
    inv: &Inventory,
    node: &Node,
    endpoint: &Endpoint,
) -> (Vec<String>, Map<String, Value>) {
    let expect = expectations(inv, node);
    let mut groups = vec![expect.role.clone()];
    groups.extend(node.class.clone());
    let mut vars = connection_vars(endpoint);
    vars.insert("site_ntp".into(), json!(inv.site.networks.ntp));
    vars.insert("machine_mtu".into(), json!(machine_mtu(inv, node)));
    if let Some(g) = &expect.gpus {
        groups.push("gpu".to_string());
        vars.insert("expected_gpus".into(), json!(g.count));
        vars.insert("gpu_model".into(), json!(g.model));
        if let Some(id) = &g.pci_id {
            vars.insert("gpu_pci_id".into(), json!(id));
        }
    }
    groups.sort();
    groups.dedup();
    (groups, vars)
}

fn connection_vars(endpoint: &Endpoint) -> Map<String, Value> {
    let mut vars = Map::new();
    vars.insert("ansible_host".into(), json!(endpoint.address));
    vars.insert("ansible_port".into(), json!(endpoint.port));
    vars.insert("ansible_user".into(), json!(endpoint.user));
    vars
}

/// The MTU the node's machine-network interface must have: the inventory's for that NIC, bond
/// or VLAN interface, else 1500.
pub fn machine_mtu(inv: &Inventory, node: &Node) -> u32 {
    let Some((_, interface)) = crate::render::files::machine_address(inv, node) else {
        return DEFAULT_MTU;
    };
    let nic = node
        .nics
        .iter()
        .find(|n| n.name == interface)
        .and_then(|n| n.mtu);
    let bond = node
        .bonds
        .iter()
        .find(|b| b.name == interface)
        .and_then(|b| b.mtu);
    let vlan = node
        .vlans
        .iter()
        .find(|v| v.name.as_deref() == Some(interface.as_str()))
        .and_then(|v| inv.site.networks.vlans.iter().find(|n| n.name == v.network))
        .and_then(|n| n.mtu);
    nic.or(bond).or(vlan).unwrap_or(DEFAULT_MTU)
}

/// The hosts of an Ansible inventory file: `ansible_host`, `ansible_port`, `ansible_user`
/// (default `core`) and `ansible_ssh_private_key_file` (else the running ssh-agent), their
/// groups and variables. Host keys are learned into, and checked against, the file
/// `known_hosts` (the caller names it).
pub fn ansible_hosts(
    ai: &AnsibleInventory,
    known_hosts: &Path,
    connect_timeout: Duration,
    reconnect_for: Duration,
) -> Result<Vec<PrepHost>> {
    let known = Arc::new(KnownHosts::new(known_hosts));
    let mut hosts = Vec::new();
    for h in &ai.hosts {
        let key = match h.key_file() {
            Some(file) => KeySource::File(PathBuf::from(file)),
            None if std::env::var_os("SSH_AUTH_SOCK").is_some() => KeySource::Agent,
            None => bail!(
                "host {}: no ansible_ssh_private_key_file and no ssh-agent (SSH_AUTH_SOCK); give the host its key file",
                h.name
            ),
        };
        let mut config = SshConfig::new(key, None, known.clone());
        config.connect_timeout = connect_timeout;
        config.reconnect_for = reconnect_for;
        let endpoint = Endpoint {
            name: h.name.clone(),
            address: h.address(),
            port: h.port().unwrap_or(22),
            user: h.user().unwrap_or_else(|| DEFAULT_SSH_USER.to_string()),
            pinned: Vec::new(),
        };
        let mut vars = h.vars.clone();
        for (k, v) in connection_vars(&endpoint) {
            vars.entry(k).or_insert(v);
        }
        hosts.push(PrepHost::new(
            endpoint,
            Arc::new(config),
            h.groups.clone(),
            vars,
        ));
    }
    Ok(hosts)
}

/// The hosts as an Ansible inventory (YAML) for `ansible-playbook -i FILE`: the same address,
/// port, user and key file (by path: the key itself is never copied), the host keys pinned
/// through `RUN/known_hosts` and `pinned` (the keys the inventory pins, [`pinned_known_hosts`]),
/// the bastion as a ProxyCommand held to the same pins, and every group and variable prep gives the playbooks.
pub fn ansible_inventory_yaml(hosts: &[PrepHost], pinned: &Path) -> Result<String> {
    let mut all_hosts = Map::new();
    let mut groups: std::collections::BTreeMap<String, Map<String, Value>> = Default::default();
    for h in hosts {
        let mut vars = h.vars.clone();
        if let KeySource::File(key) = &h.config.key {
            let key = std::path::absolute(key).unwrap_or_else(|_| key.clone());
            vars.insert(
                "ansible_ssh_private_key_file".into(),
                json!(key.display().to_string()),
            );
        }
        vars.insert(
            "ansible_ssh_common_args".into(),
            json!(ssh_common_args(&h.config, pinned)),
        );
        all_hosts.insert(h.name.clone(), Value::Object(vars));
        for g in &h.groups {
            groups
                .entry(g.clone())
                .or_default()
                .insert(h.name.clone(), Value::Null);
        }
    }
    let children: Map<String, Value> = groups
        .into_iter()
        .map(|(g, members)| (g, json!({ "hosts": members })))
        .collect();
    let doc = json!({ "all": { "hosts": all_hosts, "children": children } });
    Ok(crate::yaml::to_string(&doc)?)
}

/// OpenSSH options that make `ssh` (under ansible-playbook) trust exactly what prep trusts.
fn ssh_common_args(config: &SshConfig, pinned: &Path) -> String {
    let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let trust = format!(
        "UserKnownHostsFile={} {}",
        abs(config.known_hosts.path()).display(),
        abs(pinned).display()
    );
    let timeout = config.connect_timeout.as_secs().max(1);
    let mut args = format!("-o '{trust}' -o StrictHostKeyChecking=yes -o ConnectTimeout={timeout}");
    // Not ProxyJump: its ssh would check the bastion against ~/.ssh/known_hosts, not these pins.
    if let Some(b) = &config.bastion {
        let key = match &config.key {
            KeySource::File(k) => format!(" -i {}", abs(k).display()),
            KeySource::Agent => String::new(),
        };
        args.push_str(&format!(
            " -o 'ProxyCommand=ssh -o \"{trust}\" -o StrictHostKeyChecking=yes -o ConnectTimeout={timeout}{key} -W %h:%p -p {} {}@{}'",
            b.port, b.user, b.address
        ));
    }
    args
}

/// The host keys the inventory pins (nodes' `hostKeys`, the bastion's), as known_hosts lines.
pub fn pinned_known_hosts(hosts: &[PrepHost]) -> String {
    let mut lines = Vec::new();
    let mut add = |e: &Endpoint| {
        let field = super::known_hosts::host_field(&e.address, e.port);
        lines.extend(e.pinned.iter().map(|k| format!("{field} {}", k.trim())));
    };
    for h in hosts {
        add(&h.endpoint);
        if let Some(b) = &h.config.bastion {
            add(b);
        }
    }
    lines.sort();
    lines.dedup();
    lines.iter().map(|l| format!("{l}\n")).collect()
}
