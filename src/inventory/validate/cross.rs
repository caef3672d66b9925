//! The rules that tie site.yaml to nodes.yaml: the control plane's size, the VIPs against the
//! nodes' addresses, the rendezvous host.

use super::{role_name, NodeAddress, Validator};
use crate::installer::checks;
use crate::inventory::model::Role;
use crate::inventory::InventoryFile;
use crate::netaddr::parse_prefixed;
use crate::yaml::quote;
use std::net::IpAddr;

impl<'a> Validator<'a> {
    /// The control plane's size is the installer's (controlPlane.replicas is the master
    /// count; arbiter nodes are refused per node, so no arbiter pool is rendered).
    pub(super) fn control_plane(&mut self) {
        let nodes = &self.inv.nodes.nodes;
        let masters = nodes.iter().filter(|n| n.role == Role::Master).count();
        let workers = nodes.iter().filter(|n| n.role == Role::Worker).count();
        if !nodes.is_empty() {
            let replicas = i64::try_from(masters).unwrap_or(i64::MAX);
            if let Err(f) = checks::control_plane_size(replicas, false, false) {
                self.finding(
                    InventoryFile::Nodes,
                    "nodes",
                    checks::Finding {
                        message: format!("{masters} control-plane (role: master) nodes; controlPlane.replicas {}", f.message),
                        ..f
                    },
                );
            }
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

    pub(super) fn vips_and_rendezvous(&mut self) {
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
