//! nodes.yaml's rules, node by node (name, role, BMC, root device, NICs, bonds, VLANs,
//! addresses, labels), and what must be unique across nodes (host names, MACs, addresses, BMCs).

use super::{join, vlan_name, Validator};
use crate::installer::agent_config::RootDeviceHints;
use crate::installer::checks;
use crate::inventory::model::{Node, Role};
use crate::inventory::InventoryFile;
use crate::netaddr::{is_dns_label, is_dns_name, parse_prefixed, Cidr};
use crate::yaml::quote;
use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;

/// The interface names a node defines (NICs, bonds, VLAN interfaces), each with where, and
/// which NICs are bond members (with where).
#[derive(Default)]
struct Interfaces {
    names: HashMap<String, String>,
    in_bond: HashMap<String, String>,
}

/// Linux interface names are at most this long (IFNAMSIZ - 1).
const MAX_IFNAME: usize = 15;
/// Bond modes NMState knows.
const BOND_MODES: [&str; 7] = [
    "balance-rr",
    "active-backup",
    "balance-xor",
    "broadcast",
    "802.3ad",
    "balance-tlb",
    "balance-alb",
];

impl Validator<'_> {
    pub(super) fn nodes(&mut self) {
        let inv = self.inv;
        let nodes = &inv.nodes.nodes;
        if nodes.is_empty() {
            self.node("nodes", "at least one node is required");
        }
        let mut hostnames: HashMap<&str, usize> = HashMap::new();
        let mut macs: HashMap<String, String> = HashMap::new();
        let mut ips: HashMap<IpAddr, String> = HashMap::new();
        let mut bmcs: HashMap<String, usize> = HashMap::new();
        for (n, node) in nodes.iter().enumerate() {
            let p = format!("nodes[{n}]");
            if !is_dns_label(&node.hostname) {
                self.node(format!("{p}.hostname"), format!("{} is not a DNS label; use 1 to 63 lower-case letters, digits and '-' (e.g. gpu-worker-01)", quote(&node.hostname)));
            }
            if let Some(first) = hostnames.insert(&node.hostname, n) {
                self.node(
                    format!("{p}.hostname"),
                    format!(
                        "{} is already nodes[{first}]'s hostname",
                        quote(&node.hostname)
                    ),
                );
            }
            if node.role == Role::Arbiter {
                self.node(format!("{p}.role"), "arbiter (two-node) clusters are not supported by bootstrap; use master or worker");
            }
            self.bmc(n, node, &mut bmcs);
            self.root_device(n, node);
            self.interfaces(n, node, &mut macs);
            self.addresses(n, node, &mut ips);
            self.labels(n, node);
        }
    }

    fn bmc(&mut self, n: usize, node: &Node, seen: &mut HashMap<String, usize>) {
        let p = format!("nodes[{n}].bmc");
        let b = &node.bmc;
        match bmc_host(&b.address, b.credentials.is_some()) {
            Ok(key) => {
                if let Some(first) = seen.insert(key, n) {
                    self.node(
                        format!("{p}.address"),
                        format!(
                            "{} is already nodes[{first}]'s BMC; each node has its own",
                            quote(&b.address)
                        ),
                    );
                }
            }
            Err(m) => self.node(format!("{p}.address"), m),
        }
        if let Some(credentials) = &b.credentials {
            self.secret_ref(
                InventoryFile::Nodes,
                &format!("{p}.credentials"),
                credentials,
            );
        }
        let plain = b.address.starts_with("http://");
        if plain && (b.ca.is_some() || b.fingerprint.is_some() || b.insecure_skip_tls_verify) {
            self.node(&p, "ca, fingerprint and insecureSkipTLSVerify are for https:// BMCs; this address is plain HTTP");
        }
        match (&b.ca, &b.fingerprint) {
            (Some(_), Some(_)) => self.node(&p, "set ca or fingerprint, not both: one way of trusting the BMC's certificate"),
            _ if b.insecure_skip_tls_verify && (b.ca.is_some() || b.fingerprint.is_some()) => self.node(&p, "insecureSkipTLSVerify: true turns off what ca or fingerprint sets; keep one of them"),
            (Some(ca), None) => self.file_ref(InventoryFile::Nodes, &format!("{p}.ca"), &ca.file, checks::pem_bundle),
            (None, Some(fp)) if !is_fingerprint(fp) => self.node(
                format!("{p}.fingerprint"),
                format!("{} is not a SHA-256 fingerprint; write 32 hex bytes, e.g. sha256:AB:CD:... (openssl x509 -fingerprint -sha256)", quote(fp)),
            ),
            _ => {}
        }
    }

    /// The root device hints: at least one, and the installer's facts about each (through the
    /// one conversion to the installer's type).
    fn root_device(&mut self, n: usize, node: &Node) {
        let p = format!("nodes[{n}].rootDevice");
        let hints = RootDeviceHints::from(&node.root_device);
        if hints == RootDeviceHints::default() {
            self.node(&p, "give at least one hint, normally deviceName: /dev/disk/by-path/...; without one the installer picks the first disk it finds");
        }
        for (key, f) in checks::root_device_hints(&hints) {
            self.finding(InventoryFile::Nodes, format!("{p}.{key}"), f);
        }
    }

    /// A node's interfaces: NICs (each MAC once across nodes), bonds over them, VLANs over
    /// either, and the interface each address is on.
    fn interfaces(&mut self, n: usize, node: &Node, macs: &mut HashMap<String, String>) {
        let p = format!("nodes[{n}]");
        if node.nics.is_empty() {
            self.node(format!("{p}.nics"), "at least one NIC is required (the installer identifies a host by its MAC addresses)");
        }
        let mut ifs = Interfaces::default();
        self.nics(&p, node, macs, &mut ifs);
        self.bonds(&p, node, &mut ifs);
        self.node_vlans(&p, node, &mut ifs);
        self.address_interfaces(&p, node, &ifs);
    }

    /// `name` is a valid interface name, used once on the node.
    fn claim(&mut self, ifs: &mut Interfaces, path: String, name: &str) {
        if let Some(m) = ifname_problem(name) {
            self.node(path.clone(), m);
        }
        if let Some(first) = ifs.names.insert(name.to_string(), path.clone()) {
            self.node(
                path,
                format!("{} is already the name of {first}", quote(name)),
            );
        }
    }

    fn nics(
        &mut self,
        p: &str,
        node: &Node,
        macs: &mut HashMap<String, String>,
        ifs: &mut Interfaces,
    ) {
        for (i, nic) in node.nics.iter().enumerate() {
            let np = format!("{p}.nics[{i}]");
            self.claim(ifs, format!("{np}.name"), &nic.name);
            match checks::mac(&nic.mac) {
                Ok(mac) => {
                    let owner = format!("{} ({np}.mac)", node.hostname);
                    if let Some(first) = macs.insert(mac.clone(), owner) {
                        self.node(format!("{np}.mac"), format!("{mac} is already the MAC of {first}; MACs are compared without regard to case"));
                    }
                }
                Err(f) => self.finding(InventoryFile::Nodes, format!("{np}.mac"), f),
            }
            if let Some(mtu) = nic.mtu {
                self.mtu(InventoryFile::Nodes, &format!("{np}.mtu"), mtu);
            }
        }
    }

    fn bonds(&mut self, p: &str, node: &Node, ifs: &mut Interfaces) {
        let nic_names: BTreeSet<&str> = node.nics.iter().map(|x| x.name.as_str()).collect();
        for (b, bond) in node.bonds.iter().enumerate() {
            let bp = format!("{p}.bonds[{b}]");
            self.claim(ifs, format!("{bp}.name"), &bond.name);
            if !BOND_MODES.contains(&bond.mode.as_str()) {
                self.node(
                    format!("{bp}.mode"),
                    format!(
                        "unknown bond mode {}; expected one of {}",
                        quote(&bond.mode),
                        BOND_MODES.join(", ")
                    ),
                );
            }
            if bond.members.is_empty() {
                self.node(
                    format!("{bp}.members"),
                    "a bond needs at least one member NIC",
                );
            }
            for (m, member) in bond.members.iter().enumerate() {
                let mp = format!("{bp}.members[{m}]");
                if !nic_names.contains(member.as_str()) {
                    self.node(
                        mp,
                        format!(
                            "{} is not a NIC of {} (its nics: {})",
                            quote(member),
                            node.hostname,
                            join(&nic_names)
                        ),
                    );
                } else if let Some(first) = ifs.in_bond.insert(member.clone(), mp.clone()) {
                    self.node(
                        mp,
                        format!(
                            "{} is already a member at {first}; a NIC belongs to one bond",
                            quote(member)
                        ),
                    );
                }
            }
            if let Some(mtu) = bond.mtu {
                self.mtu(InventoryFile::Nodes, &format!("{bp}.mtu"), mtu);
            }
        }
    }

    fn node_vlans(&mut self, p: &str, node: &Node, ifs: &mut Interfaces) {
        let nic_names: BTreeSet<&str> = node.nics.iter().map(|x| x.name.as_str()).collect();
        let bond_names: BTreeSet<&str> = node.bonds.iter().map(|x| x.name.as_str()).collect();
        let inv = self.inv;
        let vlans = &inv.site.networks.vlans;
        for (v, vlan) in node.vlans.iter().enumerate() {
            let vp = format!("{p}.vlans[{v}]");
            let net = vlans.iter().find(|x| x.name == vlan.network);
            if net.is_none() {
                let known: BTreeSet<&str> = vlans.iter().map(|x| x.name.as_str()).collect();
                self.node(
                    format!("{vp}.network"),
                    format!(
                        "{} is not a VLAN of site.yaml networks.vlans (known: {})",
                        quote(&vlan.network),
                        join(&known)
                    ),
                );
            }
            let base = vlan.base.as_str();
            if !nic_names.contains(base) && !bond_names.contains(base) {
                self.node(
                    format!("{vp}.base"),
                    format!("{} is not a NIC or bond of {}", quote(base), node.hostname),
                );
            } else if let Some(bond) = ifs.in_bond.get(base) {
                self.node(
                    format!("{vp}.base"),
                    format!(
                        "{} is a bond member ({bond}); put the VLAN on the bond",
                        quote(base)
                    ),
                );
            }
            let name = vlan_name(vlan, net.map(|x| x.id));
            let path = if vlan.name.is_some() {
                format!("{vp}.name")
            } else {
                vp.clone()
            };
            if vlan.name.is_none() && name.len() > MAX_IFNAME {
                self.node(vp, format!("the default name {} is longer than {MAX_IFNAME} characters; set name (e.g. vlan{})", quote(&name), net.map(|x| x.id).unwrap_or(0)));
            } else {
                self.claim(ifs, path, &name);
            }
        }
    }

    fn address_interfaces(&mut self, p: &str, node: &Node, ifs: &Interfaces) {
        for (a, addr) in node.addresses.iter().enumerate() {
            let ap = format!("{p}.addresses[{a}].interface");
            let name = addr.interface.as_str();
            if let Some(member) = ifs.in_bond.get(name) {
                self.node(ap, format!("{} is a bond member ({member}); a NIC in a bond has no address of its own: put it on the bond", quote(name)));
            } else if !ifs.names.contains_key(name) {
                let mut known: Vec<&str> = ifs.names.keys().map(String::as_str).collect();
                known.sort();
                self.node(
                    ap,
                    format!(
                        "{} is not an interface of {} (its interfaces: {})",
                        quote(name),
                        node.hostname,
                        known.join(", ")
                    ),
                );
            }
        }
    }

    fn addresses(&mut self, n: usize, node: &Node, ips: &mut HashMap<IpAddr, String>) {
        let p = format!("nodes[{n}]");
        let inv = self.inv;
        let vlans = &inv.site.networks.vlans;
        let mut in_machine = false;
        for (a, addr) in node.addresses.iter().enumerate() {
            let ap = format!("{p}.addresses[{a}].ip");
            let (ip, prefix) = match parse_prefixed(&addr.ip) {
                Ok(x) => x,
                Err(m) => {
                    self.node(ap, m);
                    continue;
                }
            };
            if let Some(first) = ips.insert(ip, format!("{} ({p}.addresses[{a}])", node.hostname)) {
                self.node(&ap, format!("{ip} is already the address of {first}"));
            }
            let machine = self.machine.iter().find(|c| c.contains(ip)).copied();
            if let Some(m) = machine {
                in_machine = true;
                if m.prefix != prefix {
                    self.node(&ap, format!("the prefix /{prefix} differs from the machine network's ({m}); write {ip}/{}", m.prefix));
                }
            }
            let vlan = node.vlans.iter().find(|v| {
                let id = vlans.iter().find(|x| x.name == v.network).map(|x| x.id);
                vlan_name(v, id) == addr.interface
            });
            if let Some(v) = vlan {
                if let Some(net) = vlans.iter().find(|x| x.name == v.network) {
                    if let Ok(c) = net.cidr.parse::<Cidr>() {
                        if !c.contains(ip) {
                            self.node(
                                &ap,
                                format!("{ip} is not in VLAN {}'s network {c}", net.name),
                            );
                        }
                    }
                }
            } else if machine.is_none() && !self.machine.is_empty() {
                self.node(
                    &ap,
                    format!(
                        "{ip} is in no machine network ({}) and is not on a VLAN interface",
                        self.machine_list()
                    ),
                );
            }
        }
        if !in_machine && !self.machine.is_empty() {
            self.node(
                format!("{p}.addresses"),
                format!(
                    "{} has no address in a machine network ({}); every node needs one",
                    node.hostname,
                    self.machine_list()
                ),
            );
        }
    }

    fn labels(&mut self, n: usize, node: &Node) {
        for (k, v) in &node.labels {
            let path = format!("nodes[{n}].labels.{k}");
            if let Some(m) = label_key_problem(k) {
                self.node(&path, m);
            }
            if !is_label_value(v) {
                self.node(&path, format!("{} is not a label value: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit (or empty)", quote(v)));
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, t) in node.taints.iter().enumerate() {
            let path = format!("nodes[{n}].taints[{i}]");
            if let Some(m) = label_key_problem(&t.key) {
                self.node(format!("{path}.key"), m);
            }
            if let Some(v) = t.value.as_deref().filter(|v| !is_label_value(v)) {
                self.node(format!("{path}.value"), format!("{} is not a label value: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit (or empty)", quote(v)));
            }
            if !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&t.effect.as_str()) {
                self.node(
                    format!("{path}.effect"),
                    format!(
                        "{} is not a taint effect: NoSchedule, PreferNoSchedule or NoExecute",
                        quote(&t.effect)
                    ),
                );
            }
            // The API refuses two taints with the same key and effect (core/v1 validation).
            if !seen.insert((t.key.as_str(), t.effect.as_str())) {
                self.node(
                    &path,
                    format!(
                        "a second taint {} with effect {}: a node has one taint per key and effect",
                        quote(&t.key),
                        t.effect
                    ),
                );
            }
        }
    }
}

fn ifname_problem(name: &str) -> Option<String> {
    let bad = name.is_empty()
        || name.len() > MAX_IFNAME
        || name == "."
        || name == ".."
        || name
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control());
    bad.then(|| {
        format!(
            "{} is not an interface name: 1 to {MAX_IFNAME} characters, no '/', ':' or spaces",
            quote(name)
        )
    })
}

/// The BMC address's identity (scheme-less, host lower-cased) for duplicate checks, or why it is
/// refused.
/// A plain-HTTP address is refused when the BMC has credentials (they would cross in clear);
/// without credentials (an emulator in a lab) it is allowed.
fn bmc_host(address: &str, has_credentials: bool) -> Result<String, String> {
    let plain = address.strip_prefix("http://");
    if let (Some(rest), true) = (plain, has_credentials) {
        return Err(format!("{} is plain HTTP: BMC credentials would cross the network in clear; use https://{rest} (Redfish over TLS)", quote(address)));
    }
    let Some(rest) = address.strip_prefix("https://").or(plain) else {
        return Err(format!(
            "{} is not a Redfish address; write https://HOST[:PORT][/redfish/v1/Systems/ID]",
            quote(address)
        ));
    };
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    if host.is_empty() || host.contains('@') || host.chars().any(char::is_whitespace) {
        return Err(format!("{} has no valid host (credentials go in credentials, never in the address); write https://HOST[:PORT]", quote(address)));
    }
    Ok(format!(
        "{}{}",
        host.to_ascii_lowercase(),
        path.trim_end_matches('/')
    ))
}

fn is_fingerprint(fp: &str) -> bool {
    let hex: String = fp
        .strip_prefix("sha256:")
        .or_else(|| fp.strip_prefix("SHA256:"))
        .unwrap_or(fp)
        .chars()
        .filter(|c| *c != ':')
        .collect();
    hex.len() == 64 && hex.chars().all(|c| c.is_ascii_hexdigit())
}

fn label_key_problem(k: &str) -> Option<String> {
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    if let Some(p) = prefix {
        if !is_dns_name(p) {
            return Some(format!(
                "the label key's prefix {} is not a DNS name",
                quote(p)
            ));
        }
    }
    (name.is_empty() || !is_label_value(name))
        .then(|| format!("{} is not a label key: [prefix/]name, name at most 63 letters, digits, '-', '_' or '.'", quote(k)))
}

fn is_label_value(v: &str) -> bool {
    v.is_empty()
        || (v.len() <= 63
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && v.starts_with(|c: char| c.is_ascii_alphanumeric())
            && v.ends_with(|c: char| c.is_ascii_alphanumeric()))
}
