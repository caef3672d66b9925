//! site.yaml's rules: the cluster's identity and release, its networks (machine, cluster,
//! service, VLANs: shapes, sizes, overlaps), and the files it references.

use super::Validator;
use crate::installer::checks;
use crate::inventory::InventoryFile;
use crate::netaddr::{is_dns_label, is_dns_name, Cidr};
use crate::oci::reference::ImageRef;
use crate::openshift::record::MirrorRecord;
use crate::yaml::quote;
use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;

impl Validator<'_> {
    /// `boot`: one way for the BMCs to reach the ISO, an address to serve it on, TLS files
    /// that exist, a sensible parallelism.
    pub(super) fn boot(&mut self) {
        let b = &self.inv.site.boot;
        let site = InventoryFile::Site;
        match (&b.iso_server, &b.iso_url) {
            (Some(_), Some(_)) => self.site(
                "boot",
                "set isoServer (bootstrap serves the ISO) or isoURL (the site serves it), not both",
            ),
            (None, None) => self.finding(
                site,
                "boot",
                checks::Finding::warning("neither boot.isoServer nor boot.isoURL: the boot stage needs one (isoServer: {listen: ADDRESS:PORT} on the BMC network)"),
            ),
            _ => {}
        }
        if let Some(server) = &b.iso_server {
            if server.listen.parse::<std::net::SocketAddr>().is_err() {
                self.site(
                    "boot.isoServer.listen",
                    format!("{} is not ADDRESS:PORT; write this machine's address on the BMC network, e.g. 10.30.0.5:8080 ([v6]:8080 for IPv6)", quote(&server.listen)),
                );
            }
            if let Some(host) = &server.advertise {
                if host.is_empty() || host.contains(['/', ' ', '@']) {
                    self.site(
                        "boot.isoServer.advertise",
                        format!("{} is not a host name or address", quote(host)),
                    );
                }
            }
            if let Some(tls) = &server.tls {
                self.file_ref(
                    site,
                    "boot.isoServer.tls.certificate",
                    &tls.certificate.file,
                    checks::pem_bundle,
                );
                self.secret_file(
                    site,
                    "boot.isoServer.tls.key.file",
                    &tls.key.file,
                    super::Secret::Other,
                );
            }
        }
        if let Some(url) = &b.iso_url {
            let ok = url
                .strip_prefix("https://")
                .or_else(|| url.strip_prefix("http://"))
                .is_some_and(|rest| {
                    rest.split('/')
                        .next()
                        .is_some_and(|h| !h.is_empty() && !h.contains('@'))
                });
            if !ok {
                self.site(
                    "boot.isoURL",
                    format!("{} is not an http(s) URL without credentials; write e.g. http://10.30.0.5:8080/agent.x86_64.iso", quote(url)),
                );
            }
        }
        if let Some(n) = b.parallel {
            if !(1..=64).contains(&n) {
                self.site(
                    "boot.parallel",
                    format!("{n}: boot between 1 and 64 nodes at once"),
                );
            }
        }
    }

    pub(super) fn cluster_identity(&mut self) {
        let c = &self.inv.site.cluster;
        let site = InventoryFile::Site;
        self.check(site, "cluster.name", checks::cluster_name(&c.name));
        self.check(
            site,
            "cluster.baseDomain",
            checks::base_domain(&c.base_domain),
        );
        if let Some(policy) = &c.trust_bundle_policy {
            self.check(
                site,
                "cluster.trustBundlePolicy",
                checks::trust_bundle_policy(policy),
            );
        }
    }

    pub(super) fn release(&mut self) {
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

    pub(super) fn networks(&mut self) {
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
        self.host_services();
    }

    /// What every node is given on the machine network: the gateway, DNS and NTP.
    fn host_services(&mut self) {
        let n = &self.inv.site.networks;
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
            self.check(
                InventoryFile::Site,
                format!("networks.ntp[{i}]"),
                checks::ntp_source(s),
            );
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

    pub(super) fn references(&mut self) {
        let r = &self.inv.site.references;
        self.secret_ref(InventoryFile::Site, "references.pullSecret", &r.pull_secret);
        self.file_ref(
            InventoryFile::Site,
            "references.sshPublicKey",
            &r.ssh_public_key.file,
            checks::ssh_authorized_keys,
        );
        if let Some(ca) = &r.registry_ca {
            self.file_ref(
                InventoryFile::Site,
                "references.registryCA",
                &ca.file,
                checks::pem_bundle,
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
        if record.release(version).is_none() {
            self.site(
                "cluster.release.version",
                format!("release {version} is not in the mirror record {}; mirror it, or name a release the record holds", self.inv.site.references.mirror_record.as_ref().map(|r| r.file.as_str()).unwrap_or("")),
            );
        }
    }
}
