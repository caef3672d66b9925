//! The prep stage's part of the inventory: `prep` of site.yaml (SSH user, key, bastion,
//! timeouts, playbooks, forks, clock skew) and the hardware expectations of nodes.yaml
//! (`classes`, each node's `class`, `gpus`, NIC `driver`, `hostKeys`, `sshAddress`).

use super::Validator;
use crate::inventory::model::{is_pci_address, is_pci_id, Gpus, GPU_MODELS};
use crate::inventory::InventoryFile;
use crate::netaddr::is_dns_name;
use crate::yaml::quote;
use std::net::IpAddr;

impl Validator<'_> {
    /// `prep` of site.yaml.
    pub(super) fn prep_site(&mut self) {
        let prep = &self.inv.site.prep;
        let ssh = &prep.ssh;
        if let Some(user) = &ssh.user {
            self.login_user("prep.ssh.user", user);
        }
        match (&ssh.private_key, ssh.agent) {
            (Some(_), true) => self.site(
                "prep.ssh",
                "set privateKey (a key file) or agent: true (the ssh-agent's keys), not both",
            ),
            (Some(key), false) => self.private_key(&key.file),
            (None, _) => {}
        }
        if ssh.port == Some(0) {
            self.site(
                "prep.ssh.port",
                "port 0 cannot be connected to; the nodes' sshd listens on 22",
            );
        }
        for (field, value) in [
            ("connectTimeout", &ssh.connect_timeout),
            ("commandTimeout", &ssh.command_timeout),
        ] {
            self.duration(&format!("prep.ssh.{field}"), value);
        }
        self.duration("prep.maxClockSkew", &prep.max_clock_skew);
        if let Some(b) = &ssh.bastion {
            if !is_host(&b.address) {
                self.site(
                    "prep.ssh.bastion.address",
                    format!(
                        "{} is neither an IP address nor a DNS name",
                        quote(&b.address)
                    ),
                );
            }
            if b.port == Some(0) {
                self.site(
                    "prep.ssh.bastion.port",
                    "port 0 cannot be connected to; sshd listens on 22",
                );
            }
            if let Some(user) = &b.user {
                self.login_user("prep.ssh.bastion.user", user);
            }
            self.host_keys(
                InventoryFile::Site,
                "prep.ssh.bastion.hostKeys",
                &b.host_keys,
            );
        }
        if let Some(forks) = prep.forks {
            if !(1..=256).contains(&forks) {
                self.site(
                    "prep.forks",
                    format!("{forks}: work on between 1 and 256 nodes at once"),
                );
            }
        }
        for (i, playbook) in prep.playbooks.iter().enumerate() {
            if let Some(m) = self.missing_file(playbook) {
                self.site(format!("prep.playbooks[{i}]"), m);
            }
        }
    }

    fn login_user(&mut self, path: &str, user: &str) {
        let ok = !user.is_empty()
            && !user.starts_with('-')
            && user
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
        if !ok {
            self.site(
                path,
                format!(
                    "{} is not a login name; RHCOS nodes log in as core",
                    quote(user)
                ),
            );
        }
    }

    fn duration(&mut self, path: &str, value: &Option<String>) {
        if let Some(v) = value {
            if let Err(e) = crate::output::parse_duration_ms(v) {
                self.site(path, e);
            }
        }
    }

    /// The private key file: present, and its owner's alone (refused otherwise, as OpenSSH
    /// refuses it at the first login: checked here so that no stage touches a host first). Its
    /// content is never read here.
    fn private_key(&mut self, file: &str) {
        self.secret_file(
            InventoryFile::Site,
            "prep.ssh.privateKey.file",
            file,
            super::Secret::PrivateKey,
        );
    }

    /// OpenSSH public key lines (`ssh-ed25519 AAAA... [comment]`).
    fn host_keys(&mut self, file: InventoryFile, path: &str, keys: &[String]) {
        for (i, key) in keys.iter().enumerate() {
            if let Err(e) = russh::keys::ssh_key::PublicKey::from_openssh(key.trim()) {
                let p = self.inv.problem(file, format!("{path}[{i}]"), format!("{} is not an OpenSSH public key ({e}); write the line of the host's /etc/ssh/ssh_host_ed25519_key.pub (ssh-ed25519 AAAA...), or ssh-keyscan's", shorten(key)));
                self.problems.push(p);
            }
        }
    }

    /// nodes.yaml's classes and each node's prep fields.
    pub(super) fn prep_nodes(&mut self) {
        let inv = self.inv;
        for (name, class) in &inv.nodes.classes {
            let p = format!("classes.{name}");
            if let Some(g) = &class.gpus {
                self.gpus(&format!("{p}.gpus"), g);
            }
            for (field, list) in [
                ("expectModules", &class.expect_modules),
                ("forbidModules", &class.forbid_modules),
            ] {
                for (i, m) in list.iter().enumerate() {
                    if !is_module_name(m) {
                        self.node(
                            format!("{p}.{field}[{i}]"),
                            format!("{} is not a kernel module name (e.g. mlx5_core)", quote(m)),
                        );
                    }
                }
            }
        }
        for (n, node) in inv.nodes.nodes.iter().enumerate() {
            let p = format!("nodes[{n}]");
            if let Some(class) = &node.class {
                if !inv.nodes.classes.contains_key(class) {
                    let known: Vec<&str> = inv.nodes.classes.keys().map(String::as_str).collect();
                    let known = if known.is_empty() {
                        "none; define it under classes".to_string()
                    } else {
                        known.join(", ")
                    };
                    self.node(
                        format!("{p}.class"),
                        format!(
                            "{} is not a class of nodes.yaml (classes: {known})",
                            quote(class)
                        ),
                    );
                }
            }
            if let Some(g) = &node.gpus {
                self.gpus(&format!("{p}.gpus"), g);
            }
            self.host_keys(
                InventoryFile::Nodes,
                &format!("{p}.hostKeys"),
                &node.host_keys,
            );
            if let Some(a) = &node.ssh_address {
                if !is_host(a) {
                    self.node(format!("{p}.sshAddress"), format!("{} is neither an IP address nor a DNS name (write it without a prefix or port)", quote(a)));
                }
            }
            for (i, nic) in node.nics.iter().enumerate() {
                if let Some(d) = nic.driver.as_deref().filter(|d| !is_module_name(d)) {
                    self.node(
                        format!("{p}.nics[{i}].driver"),
                        format!(
                            "{} is not a kernel driver name (e.g. mlx5_core, ice)",
                            quote(d)
                        ),
                    );
                }
            }
        }
    }

    fn gpus(&mut self, p: &str, g: &Gpus) {
        match &g.pci_id {
            Some(id) if !is_pci_id(id) => self.node(format!("{p}.pciId"), format!("{} is not a PCI id; write VENDOR:DEVICE in hex, e.g. 10de:2335 (lspci -nn shows it)", quote(id))),
            Some(_) => {}
            None if g.pci_id().is_none() => {
                let known: Vec<&str> = GPU_MODELS.iter().map(|(m, _)| *m).collect();
                self.node(format!("{p}.model"), format!("{} is not a known GPU model ({}); name one of those, or give its pciId (VENDOR:DEVICE, e.g. 10de:2335)", quote(&g.model), known.join(", ")));
            }
            None => {}
        }
        if g.count > 64 {
            self.node(
                format!("{p}.count"),
                format!("{}: a node carries at most 64 GPUs", g.count),
            );
        }
        for (i, a) in g.addresses.iter().enumerate() {
            if !is_pci_address(a) {
                self.node(format!("{p}.addresses[{i}]"), format!("{} is not a PCI address; write DOMAIN:BUS:DEVICE.FUNCTION, e.g. 0000:18:00.0", quote(a)));
            }
        }
        if !g.addresses.is_empty() && g.addresses.len() != g.count as usize {
            self.node(
                format!("{p}.addresses"),
                format!(
                    "{} addresses for a count of {}; list one per GPU",
                    g.addresses.len(),
                    g.count
                ),
            );
        }
    }
}

fn is_host(s: &str) -> bool {
    s.parse::<IpAddr>().is_ok() || (!s.is_empty() && is_dns_name(s))
}

/// A kernel module or driver name: letters, digits, `_` and `-`.
pub(crate) fn is_module_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// A key as messages show it: its first 40 characters.
fn shorten(key: &str) -> String {
    let short: String = key.chars().take(40).collect();
    if short.len() < key.len() {
        format!("{}...", quote(&short))
    } else {
        quote(key)
    }
}
