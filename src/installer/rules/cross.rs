//! The rules that need both files: host counts against replicas, VIPs against host addresses,
//! the rendezvous address against the machine networks, the two names.

use super::Report;
use crate::installer::agent_config::AgentConfig;
use crate::installer::install_config::InstallConfig;
use crate::installer::nmstate::{self, HostNetwork};
use crate::installer::Loaded;
use crate::netaddr::Cidr;
use crate::yaml::{quote, Problem};
use std::net::IpAddr;

/// The rules that need both files: host counts against replicas, VIPs against host addresses,
/// the rendezvous address against the machine networks, the two names. Each is reported in
/// agent-config.yaml, on the host field or name that differs from what install-config says.
pub fn cross(ic: &Loaded<InstallConfig>, ac: &Loaded<AgentConfig>) -> Vec<Problem> {
    let mut r = Report::new(ac);
    let i = &ic.value;
    let a = &ac.value;
    role_counts(&mut r, i, a);
    let nets: Vec<HostNetwork> = a
        .hosts
        .iter()
        .enumerate()
        .map(|(k, h)| {
            h.network_config
                .as_ref()
                .map(|v| nmstate::read(v, &format!("hosts[{k}].networkConfig")))
                .unwrap_or_default()
        })
        .collect();
    if let Some(bm) = i.platform.as_ref().and_then(|p| p.baremetal.as_ref()) {
        for (key, what, list) in [
            ("apiVIPs", "API", &bm.api_vips),
            ("ingressVIPs", "ingress", &bm.ingress_vips),
        ] {
            for (k, vip) in list.iter().enumerate() {
                let Ok(vip) = vip.parse::<IpAddr>() else {
                    continue;
                };
                for net in &nets {
                    for (_, path) in net.addresses.iter().filter(|(ip, _)| *ip == vip) {
                        r.push(
                            path.clone(),
                            format!("{vip} is the {what} VIP (install-config platform.baremetal.{key}[{k}]); a VIP moves between nodes and must not be a host's own address"),
                        );
                    }
                }
            }
        }
    }
    if let Some(ip) = a
        .rendezvous_ip
        .as_deref()
        .and_then(|s| s.parse::<IpAddr>().ok())
    {
        let machine: Vec<Cidr> = i
            .networking
            .as_ref()
            .map(|n| {
                n.machine_network
                    .iter()
                    .filter_map(|m| m.cidr.parse().ok())
                    .collect()
            })
            .unwrap_or_default();
        if !machine.is_empty() && !machine.iter().any(|m| m.contains(ip)) {
            let list: Vec<String> = machine.iter().map(Cidr::to_string).collect();
            r.push(
                "rendezvousIP",
                format!("{ip} is not in a machine network of install-config ({}); the rendezvous host's address must be on the cluster's network", list.join(", ")),
            );
        }
    }
    let ic_name = i.metadata.as_ref().and_then(|m| m.name.as_deref());
    let ac_name = a.metadata.as_ref().and_then(|m| m.name.as_deref());
    if let (Some(ic_name), Some(ac_name)) = (ic_name, ac_name) {
        if ic_name != ac_name {
            r.push(
                "metadata.name",
                format!("{} differs from install-config metadata.name {}; the installer does not require them to match (the cluster takes install-config's), but bootstrap does, so both files plainly describe one cluster", quote(ac_name), quote(ic_name)),
            );
        }
    }
    r.problems
}

fn role_counts(r: &mut Report<AgentConfig>, i: &InstallConfig, a: &AgentConfig) {
    let masters = i.control_plane_replicas();
    let workers: i64 = i.compute.iter().map(|p| p.replicas.unwrap_or(3)).sum();
    for (role, allowed, field) in [
        ("master", masters, "controlPlane.replicas"),
        ("arbiter", i.arbiter_replicas(), "arbiter.replicas"),
        ("worker", workers, "compute[].replicas"),
    ] {
        let hosts: Vec<usize> = a
            .hosts
            .iter()
            .enumerate()
            .filter(|(_, h)| h.role.as_deref() == Some(role))
            .map(|(k, _)| k)
            .collect();
        if let Some(&extra) = hosts.get(usize::try_from(allowed.max(0)).unwrap_or(usize::MAX)) {
            r.push(
                format!("hosts[{extra}].role"),
                format!(
                    "{} host{} with role {role}, more than install-config {field} ({allowed}); raise {field} or change the roles",
                    hosts.len(),
                    if hosts.len() == 1 { "" } else { "s" }
                ),
            );
        }
    }
}
