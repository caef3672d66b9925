//! The inventory's rules: everything the agent installer enforces on the install-config.yaml and
//! agent-config.yaml rendered from it (openshift/installer pkg/asset/agent/agentconfig,
//! pkg/types/validation, pkg/types/baremetal/validation), and what it misses but a site pays
//! for later (duplicate addresses, a rendezvous IP on no control-plane node, a VLAN on a NIC that
//! is not there). Every problem is reported at once, each with its file, field path, line and
//! column. Only the inventory's own files are read (referenced files must exist); secrets are
//! never read here.

use super::model::{Node, Role, SecretRef};
use super::{Inventory, InventoryFile};
use crate::mirror::record::MirrorRecord;
use crate::netaddr::{is_dns_label, is_dns_name, normalize_mac, parse_prefixed, Cidr};
use crate::oci::reference::ImageRef;
use crate::yaml::{quote, Problem};
use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;

/// Control-plane sizes the installer accepts.
pub const CONTROL_PLANE_SIZES: [usize; 4] = [1, 3, 4, 5];
/// Linux interface names are at most this long (IFNAMSIZ - 1).
const MAX_IFNAME: usize = 15;
/// MTUs accepted: IPv6's minimum to the largest jumbo frame switches carry.
const MTU_RANGE: std::ops::RangeInclusive<u32> = 1280..=9216;
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

/// Every problem of `inv`, in file order (site.yaml, then nodes.yaml, each by field), each with
/// its file, field path, line and column. Empty when the inventory can be rendered.
pub fn validate(inv: &Inventory) -> Vec<(InventoryFile, Problem)> {
    let mut v = Validator {
        inv,
        problems: Vec::new(),
        machine: Vec::new(),
    };
    v.cluster_identity();
    v.release();
    v.networks();
    v.references();
    v.nodes();
    v.control_plane();
    v.vips_and_rendezvous();
    v.problems.sort_by(|a, b| {
        (a.0, a.1.location.map(|l| (l.line, l.column)))
            .cmp(&(b.0, b.1.location.map(|l| (l.line, l.column))))
    });
    v.problems
}

struct Validator<'a> {
    inv: &'a Inventory,
    problems: Vec<(InventoryFile, Problem)>,
    /// The machine networks that parsed.
    machine: Vec<Cidr>,
}

/// A node's static address, parsed.
struct NodeAddress<'a> {
    node: usize,
    index: usize,
    ip: IpAddr,
    hostname: &'a str,
    role: Role,
}

impl<'a> Validator<'a> {
    fn site(&mut self, path: impl Into<String>, message: impl Into<String>) {
        let p = self.inv.problem(InventoryFile::Site, path, message);
        self.problems.push(p);
    }

    fn node(&mut self, path: impl Into<String>, message: impl Into<String>) {
        let p = self.inv.problem(InventoryFile::Nodes, path, message);
        self.problems.push(p);
    }

    fn cluster_identity(&mut self) {
        let c = &self.inv.site.cluster;
        if !is_dns_label(&c.name) {
            self.site(
                "cluster.name",
                format!("{} is not a DNS label; use 1 to 63 lower-case letters, digits and '-', starting and ending with a letter or digit (e.g. gpu-prod)", quote(&c.name)),
            );
        }
        if !is_dns_name(&c.base_domain) {
            self.site(
                "cluster.baseDomain",
                format!("{} is not a DNS name; write lower-case labels separated by dots (e.g. ai.example.com)", quote(&c.base_domain)),
            );
        }
        if let Some(policy) = &c.trust_bundle_policy {
            if policy != "Proxyonly" && policy != "Always" {
                self.site(
                    "cluster.trustBundlePolicy",
                    format!("expected Proxyonly or Always, found {}", quote(policy)),
                );
            }
        }
    }

    fn release(&mut self) {
        let r = &self.inv.site.cluster.release;
        match (&r.image, &r.version) {
            (Some(_), Some(_)) | (None, None) => self.site(
                "cluster.release",
                "set exactly one of image (the release image by digest) or version (e.g. 4.18.3)",
            ),
            (Some(image), None) => match ImageRef::parse(image) {
                Ok(i) if i.digest.is_some() => {}
                Ok(_) => self.site(
                    "cluster.release.image",
                    format!("{} is not by digest; a tag can move: write REPOSITORY@sha256:<digest> (bootstrap mirror's record has it)", quote(image)),
                ),
                Err(e) => self.site("cluster.release.image", e.to_string()),
            },
            (None, Some(version)) => {
                if semver::Version::parse(version).is_err() {
                    self.site(
                        "cluster.release.version",
                        format!("{} is not a release version; write MAJOR.MINOR.PATCH, e.g. 4.18.3", quote(version)),
                    );
                } else if self.inv.site.references.mirror_record.is_none() {
                    self.site(
                        "cluster.release.version",
                        "a version is resolved against the mirror record: set references.mirrorRecord, or give release.image by digest",
                    );
                }
            }
        }
    }

    fn cidrs(&mut self, path: &str, values: &[String], required: bool) -> Vec<(usize, Cidr)> {
        if values.is_empty() && required {
            self.site(path, "at least one CIDR is required");
        }
        let mut out = Vec::new();
        for (i, s) in values.iter().enumerate() {
            match s.parse::<Cidr>() {
                Ok(c) => out.push((i, c)),
                Err(e) => self.site(format!("{path}[{i}]"), e),
            }
        }
        out
    }

    fn networks(&mut self) {
        let n = &self.inv.site.networks;
        let machine = self.cidrs("networks.machine", &n.machine, true);
        let service = self.cidrs("networks.service", &n.service, true);
        if n.cluster.is_empty() {
            self.site("networks.cluster", "at least one cluster network is required (e.g. {cidr: 10.128.0.0/14, hostPrefix: 23})");
        }
        let mut cluster = Vec::new();
        for (i, cn) in n.cluster.iter().enumerate() {
            let path = format!("networks.cluster[{i}]");
            match cn.cidr.parse::<Cidr>() {
                Ok(c) => {
                    self.host_prefix(&path, c, cn.host_prefix);
                    cluster.push((i, c));
                }
                Err(e) => self.site(format!("{path}.cidr"), e),
            }
        }
        for (name, list) in [("service", &service), ("cluster", &cluster)] {
            let mut families = BTreeSet::new();
            for (i, c) in list.iter() {
                if !families.insert(c.addr.is_ipv4()) {
                    self.site(
                        format!("networks.{name}[{i}]"),
                        "OVNKubernetes takes one network per IP family; remove this one",
                    );
                }
            }
        }
        // Pairs that must not share an address: machine/service/cluster/VLAN subnets.
        let mut all: Vec<(String, Cidr)> = Vec::new();
        for (i, c) in &machine {
            all.push((format!("networks.machine[{i}]"), *c));
        }
        for (i, c) in &cluster {
            all.push((format!("networks.cluster[{i}].cidr"), *c));
        }
        for (i, c) in &service {
            all.push((format!("networks.service[{i}]"), *c));
        }
        let mut vlan_cidrs = Vec::new();
        self.vlan_networks(&mut vlan_cidrs);
        for (a, (pa, ca)) in all.iter().enumerate() {
            for (pb, cb) in all.iter().skip(a + 1) {
                if ca.overlaps(cb) {
                    self.site(pb.clone(), format!("{cb} overlaps {pa} ({ca}); machine, cluster and service networks must not share addresses"));
                }
            }
        }
        for (pv, cv) in &vlan_cidrs {
            for (pa, ca) in all
                .iter()
                .filter(|(p, _)| !p.starts_with("networks.machine"))
            {
                if cv.overlaps(ca) {
                    self.site(pv.clone(), format!("{cv} overlaps {pa} ({ca}); pods and services would shadow this VLAN's hosts"));
                }
            }
        }
        self.machine = machine.into_iter().map(|(_, c)| c).collect();
        match n.gateway.parse::<IpAddr>() {
            Ok(gw) if !self.machine.is_empty() && !self.in_machine(gw) => self.site(
                "networks.gateway",
                format!("{gw} is not in a machine network ({}); the default route must be reachable on it", self.machine_list()),
            ),
            Ok(_) => {}
            Err(_) => self.site("networks.gateway", format!("{} is not an IP address", quote(&n.gateway))),
        }
        if n.dns.is_empty() {
            self.site("networks.dns", "at least one DNS server is required: nodes resolve api.<cluster>.<baseDomain> with it");
        }
        for (i, d) in n.dns.iter().enumerate() {
            if d.parse::<IpAddr>().is_err() {
                self.site(
                    format!("networks.dns[{i}]"),
                    format!("{} is not an IP address", quote(d)),
                );
            }
        }
        for (i, d) in n.dns_search.iter().enumerate() {
            if !is_dns_name(d) {
                self.site(
                    format!("networks.dnsSearch[{i}]"),
                    format!("{} is not a DNS name", quote(d)),
                );
            }
        }
        for (i, s) in n.ntp.iter().enumerate() {
            if s.parse::<IpAddr>().is_err() && !is_dns_name(s) {
                self.site(
                    format!("networks.ntp[{i}]"),
                    format!("{} is neither a domain name nor an IP address (the installer requires one of the two)", quote(s)),
                );
            }
        }
    }

    fn host_prefix(&mut self, path: &str, c: Cidr, host_prefix: u8) {
        let max = if c.addr.is_ipv4() { 30 } else { 64 };
        let nodes = self.inv.nodes.nodes.len().max(1) as u32;
        if c.addr.is_ipv6() && host_prefix != 64 {
            self.site(format!("{path}.hostPrefix"), format!("OVNKubernetes needs hostPrefix 64 for an IPv6 cluster network, found {host_prefix}"));
        } else if host_prefix < c.prefix || host_prefix > max {
            self.site(
                format!("{path}.hostPrefix"),
                format!("{host_prefix} must be between the network's prefix ({}) and {max}; 23 gives each node 510 pod addresses", c.prefix),
            );
        } else {
            let slices = 1u128 << u32::from(host_prefix - c.prefix).min(100);
            if slices < u128::from(nodes) {
                self.site(
                    format!("{path}.hostPrefix"),
                    format!("{c} holds only {slices} node slices of /{host_prefix}, fewer than the {nodes} nodes; widen the cidr or raise hostPrefix"),
                );
            }
        }
    }

    fn vlan_networks(&mut self, cidrs: &mut Vec<(String, Cidr)>) {
        let mut names = HashMap::new();
        let mut ids = HashMap::new();
        for (i, v) in self.inv.site.networks.vlans.iter().enumerate() {
            let path = format!("networks.vlans[{i}]");
            if !is_dns_label(&v.name) {
                self.site(format!("{path}.name"), format!("{} is not a simple name; use lower-case letters, digits and '-' (e.g. storage)", quote(&v.name)));
            }
            if let Some(first) = names.insert(v.name.as_str(), i) {
                self.site(
                    format!("{path}.name"),
                    format!(
                        "{} is already the name of networks.vlans[{first}]",
                        quote(&v.name)
                    ),
                );
            }
            if !(1..=4094).contains(&v.id) {
                self.site(
                    format!("{path}.id"),
                    format!("{} is not a VLAN id; 802.1Q ids are 1 to 4094", v.id),
                );
            } else if let Some(first) = ids.insert(v.id, i) {
                self.site(
                    format!("{path}.id"),
                    format!("VLAN {} is already networks.vlans[{first}]", v.id),
                );
            }
            match v.cidr.parse::<Cidr>() {
                Ok(c) => cidrs.push((format!("{path}.cidr"), c)),
                Err(e) => self.site(format!("{path}.cidr"), e),
            }
            if let Some(mtu) = v.mtu {
                self.mtu(InventoryFile::Site, &format!("{path}.mtu"), mtu);
            }
        }
    }

    fn mtu(&mut self, file: InventoryFile, path: &str, mtu: u32) {
        if !MTU_RANGE.contains(&mtu) {
            let p = self.inv.problem(
                file,
                path,
                format!(
                    "MTU {mtu} is out of range; use {} to {} (9000 for jumbo frames)",
                    MTU_RANGE.start(),
                    MTU_RANGE.end()
                ),
            );
            self.problems.push(p);
        }
    }

    fn in_machine(&self, ip: IpAddr) -> bool {
        self.machine.iter().any(|c| c.contains(ip))
    }

    fn machine_list(&self) -> String {
        self.machine
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// A secret reference: exactly one of file or env; the file must exist.
    fn secret_ref(&mut self, file: InventoryFile, path: &str, r: &SecretRef) {
        let problem = match (&r.file, &r.env) {
            (Some(_), Some(_)) | (None, None) => Some((
                path.to_string(),
                "set exactly one of file (a path) or env (an environment variable's name)".to_string(),
            )),
            (Some(f), None) => self.missing_file(f).map(|m| (format!("{path}.file"), m)),
            (None, Some(e)) => (!is_env_name(e)).then(|| {
                (format!("{path}.env"), format!("{} is not an environment variable name; use letters, digits and '_' (e.g. PULL_SECRET)", quote(e)))
            }),
        };
        if let Some((p, m)) = problem {
            let p = self.inv.problem(file, p, m);
            self.problems.push(p);
        }
    }

    /// Why `file` (relative to the inventory) cannot be used, or None.
    fn missing_file(&self, file: &str) -> Option<String> {
        let path = self.inv.resolve(file);
        match std::fs::metadata(&path) {
            Ok(m) if m.is_file() => None,
            Ok(_) => Some(format!("{} is not a file", path.display())),
            Err(e) => Some(format!(
                "{} cannot be read: {}",
                path.display(),
                crate::yaml::io_reason(&e)
            )),
        }
    }

    /// A referenced file: it must exist, and `check` its content.
    fn file_ref(
        &mut self,
        file: InventoryFile,
        path: &str,
        name: &str,
        check: fn(&str) -> Option<String>,
    ) {
        let at = format!("{path}.file");
        let p = match self.missing_file(name) {
            Some(m) => Some(m),
            None => match std::fs::read_to_string(self.inv.resolve(name)) {
                Ok(text) => {
                    check(&text).map(|m| format!("{}: {m}", self.inv.resolve(name).display()))
                }
                Err(e) => Some(format!(
                    "{} cannot be read: {}",
                    self.inv.resolve(name).display(),
                    crate::yaml::io_reason(&e)
                )),
            },
        };
        if let Some(m) = p {
            let p = self.inv.problem(file, at, m);
            self.problems.push(p);
        }
    }

    fn references(&mut self) {
        let r = &self.inv.site.references;
        self.secret_ref(InventoryFile::Site, "references.pullSecret", &r.pull_secret);
        self.file_ref(
            InventoryFile::Site,
            "references.sshPublicKey",
            &r.ssh_public_key.file,
            check_ssh_key,
        );
        if let Some(ca) = &r.registry_ca {
            self.file_ref(
                InventoryFile::Site,
                "references.registryCA",
                &ca.file,
                check_pem,
            );
        }
        if let Some(rec) = &r.mirror_record {
            if let Some(m) = self.missing_file(&rec.file) {
                self.site("references.mirrorRecord.file", m);
                return;
            }
            match MirrorRecord::load(&self.inv.resolve(&rec.file)) {
                Ok(record) => self.release_in_record(&record),
                Err(e) => self.site("references.mirrorRecord.file", format!("{e:#}")),
            }
        }
    }

    /// `cluster.release.version` must name a release image of the mirror record.
    fn release_in_record(&mut self, record: &MirrorRecord) {
        let Some(version) = &self.inv.site.cluster.release.version else {
            return;
        };
        if super::release_in_record(record, version).is_none() {
            self.site(
                "cluster.release.version",
                format!("release {version} is not in the mirror record {}; mirror it, or name a release the record holds", self.inv.site.references.mirror_record.as_ref().map(|r| r.file.as_str()).unwrap_or("")),
            );
        }
    }

    fn nodes(&mut self) {
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
        match bmc_host(&b.address) {
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
        self.secret_ref(
            InventoryFile::Nodes,
            &format!("{p}.credentials"),
            &b.credentials,
        );
        match (&b.ca, &b.fingerprint) {
            (Some(_), Some(_)) => self.node(&p, "set ca or fingerprint, not both: one way of trusting the BMC's certificate"),
            (Some(ca), None) => self.file_ref(InventoryFile::Nodes, &format!("{p}.ca"), &ca.file, check_pem),
            (None, Some(fp)) if !is_fingerprint(fp) => self.node(
                format!("{p}.fingerprint"),
                format!("{} is not a SHA-256 fingerprint; write 32 hex bytes, e.g. sha256:AB:CD:... (openssl x509 -fingerprint -sha256)", quote(fp)),
            ),
            _ => {}
        }
    }

    fn root_device(&mut self, n: usize, node: &Node) {
        let p = format!("nodes[{n}].rootDevice");
        let r = &node.root_device;
        let any = r.device_name.is_some()
            || r.hctl.is_some()
            || r.model.is_some()
            || r.vendor.is_some()
            || r.serial_number.is_some()
            || r.min_size_gigabytes.is_some()
            || r.wwn.is_some()
            || r.rotational.is_some();
        if !any {
            self.node(&p, "give at least one hint, normally deviceName: /dev/disk/by-path/...; without one the installer picks the first disk it finds");
        }
        if let Some(d) = &r.device_name {
            if let Some(m) = device_name_problem(d) {
                self.node(format!("{p}.deviceName"), m);
            }
        }
        if let Some(h) = &r.hctl {
            let ok = h.split(':').count() == 4
                && h.split(':')
                    .all(|x| !x.is_empty() && x.chars().all(|c| c.is_ascii_digit()));
            if !ok {
                self.node(
                    format!("{p}.hctl"),
                    format!("{} is not host:channel:target:lun, e.g. 1:0:0:0", quote(h)),
                );
            }
        }
        if let Some(w) = &r.wwn {
            let hex = w.strip_prefix("0x").unwrap_or("");
            if hex.len() != 16 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
                self.node(format!("{p}.wwn"), format!("{} is not a WWN: write 0x and 16 hex digits, without a vendor extension (the installer forbids extensions)", quote(w)));
            }
        }
        if r.min_size_gigabytes == Some(0) {
            self.node(format!("{p}.minSizeGigabytes"), "0 matches every disk; give the smallest size the root disk has, in GiB, or leave it out");
        }
    }

    fn interfaces(&mut self, n: usize, node: &Node, macs: &mut HashMap<String, String>) {
        let p = format!("nodes[{n}]");
        if node.nics.is_empty() {
            self.node(format!("{p}.nics"), "at least one NIC is required (the installer identifies a host by its MAC addresses)");
        }
        let mut names: HashMap<String, String> = HashMap::new();
        let mut claim = |v: &mut Self, path: String, name: &str| {
            if let Some(m) = ifname_problem(name) {
                v.node(path.clone(), m);
            }
            if let Some(first) = names.insert(name.to_string(), path.clone()) {
                v.node(
                    path,
                    format!("{} is already the name of {first}", quote(name)),
                );
            }
        };
        for (i, nic) in node.nics.iter().enumerate() {
            let np = format!("{p}.nics[{i}]");
            claim(self, format!("{np}.name"), &nic.name);
            match normalize_mac(&nic.mac) {
                Ok(mac) => {
                    let owner = format!("{} ({np}.mac)", node.hostname);
                    if let Some(first) = macs.insert(mac.clone(), owner) {
                        self.node(format!("{np}.mac"), format!("{mac} is already the MAC of {first}; MACs are compared without regard to case"));
                    }
                }
                Err(m) => self.node(format!("{np}.mac"), m),
            }
            if let Some(mtu) = nic.mtu {
                self.mtu(InventoryFile::Nodes, &format!("{np}.mtu"), mtu);
            }
        }
        let nic_names: BTreeSet<&str> = node.nics.iter().map(|x| x.name.as_str()).collect();
        let mut in_bond: HashMap<&str, String> = HashMap::new();
        for (b, bond) in node.bonds.iter().enumerate() {
            let bp = format!("{p}.bonds[{b}]");
            claim(self, format!("{bp}.name"), &bond.name);
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
                } else if let Some(first) = in_bond.insert(member, mp.clone()) {
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
            } else if let Some(bond) = in_bond.get(base) {
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
                claim(self, path, &name);
            }
        }
        for (a, addr) in node.addresses.iter().enumerate() {
            let ap = format!("{p}.addresses[{a}].interface");
            let name = addr.interface.as_str();
            if let Some(member) = in_bond.get(name) {
                self.node(ap, format!("{} is a bond member ({member}); a NIC in a bond has no address of its own: put it on the bond", quote(name)));
            } else if !names.contains_key(name) {
                let mut known: Vec<&String> = names.keys().collect();
                known.sort();
                let known: Vec<&str> = known.iter().map(|s| s.as_str()).collect();
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
    }

    fn control_plane(&mut self) {
        let nodes = &self.inv.nodes.nodes;
        let masters = nodes.iter().filter(|n| n.role == Role::Master).count();
        let workers = nodes.iter().filter(|n| n.role == Role::Worker).count();
        if !nodes.is_empty() && !CONTROL_PLANE_SIZES.contains(&masters) {
            self.node("nodes", format!("{masters} control-plane (role: master) nodes; the installer takes 1, 3, 4 or 5 (controlPlane.replicas)"));
        }
        if masters == 1 && workers > 0 {
            self.node("nodes", format!("a single-node cluster (one master) takes no workers, found {workers}; add masters for a multi-node cluster"));
        }
    }

    fn static_addresses(&self) -> Vec<NodeAddress<'a>> {
        let mut out = Vec::new();
        for (n, node) in self.inv.nodes.nodes.iter().enumerate() {
            for (index, a) in node.addresses.iter().enumerate() {
                if let Ok((ip, _)) = parse_prefixed(&a.ip) {
                    out.push(NodeAddress {
                        node: n,
                        index,
                        ip,
                        hostname: &node.hostname,
                        role: node.role,
                    });
                }
            }
        }
        out
    }

    fn vips_and_rendezvous(&mut self) {
        let inv = self.inv;
        let c = &inv.site.cluster;
        let addrs = self.static_addresses();
        let single = self
            .inv
            .nodes
            .nodes
            .iter()
            .filter(|n| n.role == Role::Master)
            .count()
            == 1
            && self.inv.nodes.nodes.len() == 1;
        let mut api = Vec::new();
        for (key, vips) in [("apiVIPs", &c.api_vips), ("ingressVIPs", &c.ingress_vips)] {
            let path = format!("cluster.{key}");
            if single {
                if !vips.is_empty() {
                    self.site(&path, "a single-node cluster uses platform none, which has no VIPs; remove them (DNS points at the node)");
                }
                continue;
            }
            if vips.is_empty() {
                self.site(&path, "required on bare metal: one address in the machine network (two for dual stack)");
            }
            if vips.len() > 2 {
                self.site(format!("{path}[2]"), "at most two VIPs, one per IP family");
            }
            for (i, v) in vips.iter().enumerate() {
                let vp = format!("{path}[{i}]");
                let Ok(ip) = v.parse::<IpAddr>() else {
                    self.site(vp, format!("{} is not an IP address", quote(v)));
                    continue;
                };
                if !self.machine.is_empty() && !self.in_machine(ip) {
                    self.site(
                        &vp,
                        format!("{ip} is not in a machine network ({})", self.machine_list()),
                    );
                }
                if let Some(a) = addrs.iter().find(|a| a.ip == ip) {
                    self.site(&vp, format!("{ip} is the address of {} (nodes[{}].addresses[{}]); a VIP must be free", a.hostname, a.node, a.index));
                }
                if key == "apiVIPs" {
                    api.push(ip);
                } else if api.contains(&ip) {
                    self.site(
                        &vp,
                        format!("{ip} is also an API VIP; the API and ingress VIPs must differ"),
                    );
                }
            }
        }
        let rv = &c.rendezvous_ip;
        let Ok(ip) = rv.parse::<IpAddr>() else {
            self.site(
                "cluster.rendezvousIP",
                format!("{} is not an IP address", quote(rv)),
            );
            return;
        };
        match addrs.iter().find(|a| a.ip == ip) {
            None => {
                let masters: Vec<String> = addrs.iter().filter(|a| a.role == Role::Master && self.in_machine(a.ip)).map(|a| a.ip.to_string()).collect();
                self.site("cluster.rendezvousIP", format!("{ip} is no node's static address; use a control-plane node's machine address ({})", masters.join(", ")));
            }
            Some(a) if a.role != Role::Master => self.site(
                "cluster.rendezvousIP",
                format!("{ip} is {} {}'s address; the rendezvous host must be a control-plane node (the installer refuses a worker)", role_name(a.role), a.hostname),
            ),
            Some(a) if !self.in_machine(a.ip) && !self.machine.is_empty() => self.site(
                "cluster.rendezvousIP",
                format!("{ip} is {}'s address outside the machine network ({}); the other hosts reach the rendezvous host there", a.hostname, self.machine_list()),
            ),
            Some(_) => {}
        }
    }
}

fn role_name(r: Role) -> &'static str {
    match r {
        Role::Master => "master",
        Role::Worker => "worker",
        Role::Arbiter => "arbiter",
    }
}

fn join(set: &BTreeSet<&str>) -> String {
    if set.is_empty() {
        "none".into()
    } else {
        set.iter().copied().collect::<Vec<_>>().join(", ")
    }
}

/// The VLAN interface's name: as written, or `<base>.<id>`.
pub(crate) fn vlan_name(v: &super::model::VlanInterface, id: Option<u16>) -> String {
    match &v.name {
        Some(n) => n.clone(),
        None => format!("{}.{}", v.base, id.unwrap_or(0)),
    }
}

fn is_env_name(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
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

/// Why a `deviceName` is refused, or None: the installer accepts `/dev/X` and
/// `/dev/disk/by-path/X` only.
fn device_name_problem(d: &str) -> Option<String> {
    if d.starts_with("/dev/disk/by-id/") {
        return Some(format!("{} is a by-id path, which the installer refuses: by-id names differ between the discovery image and the installed system; use /dev/disk/by-path/... (stable for a slot) or /dev/X", quote(d)));
    }
    let ok = match d.strip_prefix("/dev/disk/by-path/") {
        Some(rest) => !rest.is_empty() && !rest.contains('/'),
        None => d
            .strip_prefix("/dev/")
            .is_some_and(|rest| !rest.is_empty() && !rest.contains('/')),
    };
    (!ok).then(|| {
        format!(
            "{} is not /dev/X or /dev/disk/by-path/X (the only forms the installer accepts)",
            quote(d)
        )
    })
}

/// The BMC address's identity (scheme-less, host lower-cased) for duplicate checks, or why it is
/// refused.
fn bmc_host(address: &str) -> Result<String, String> {
    if let Some(rest) = address.strip_prefix("http://") {
        return Err(format!("{} is plain HTTP: BMC credentials would cross the network in clear; use https://{rest} (Redfish over TLS)", quote(address)));
    }
    let Some(rest) = address.strip_prefix("https://") else {
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

fn check_pem(text: &str) -> Option<String> {
    (!text.contains("-----BEGIN CERTIFICATE-----"))
        .then(|| "holds no PEM certificate (-----BEGIN CERTIFICATE-----)".to_string())
}

fn check_ssh_key(text: &str) -> Option<String> {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if text.contains("PRIVATE KEY") {
        return Some("is a private key; reference the public key (.pub)".into());
    }
    let ok = lines.len() == 1
        && ["ssh-", "ecdsa-sha2-", "sk-ssh-", "sk-ecdsa-"]
            .iter()
            .any(|p| lines[0].starts_with(p))
        && lines[0].split_whitespace().count() >= 2;
    (!ok).then(|| "is not one OpenSSH public key line (ssh-ed25519 AAAA... comment)".to_string())
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
