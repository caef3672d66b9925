//! agent-config.yaml's rules on their own: the top level, each host (identity, interfaces, root
//! device, NMState references), static addresses across hosts, the rendezvous host.

use super::Report;
use crate::installer::agent_config::{AgentConfig, Host};
use crate::installer::checks;
use crate::installer::nmstate::{self, HostNetwork};
use crate::installer::Loaded;
use crate::netaddr::is_dns_name;
use crate::yaml::{quote, Problem};
use std::collections::HashMap;
use std::net::IpAddr;

const ROLES: [&str; 3] = ["master", "worker", "arbiter"];

/// Every rule of agent-config.yaml on its own.
pub fn agent_config(file: &Loaded<AgentConfig>) -> Vec<Problem> {
    let mut r = Report::new(file);
    let c = &file.value;
    top_level(&mut r, c);
    let nets: Vec<HostNetwork> = c
        .hosts
        .iter()
        .enumerate()
        .map(|(i, h)| {
            h.network_config
                .as_ref()
                .map(|v| nmstate::read(v, &format!("hosts[{i}].networkConfig")))
                .unwrap_or_default()
        })
        .collect();
    let mut macs: HashMap<String, String> = HashMap::new();
    let mut hostnames: HashMap<&str, usize> = HashMap::new();
    for (i, host) in c.hosts.iter().enumerate() {
        host_identity(&mut r, i, host, &mut hostnames);
        interfaces(&mut r, i, host, &mut macs);
        root_device(&mut r, i, host);
        host_network(&mut r, host, &nets[i]);
    }
    static_addresses(&mut r, &nets);
    rendezvous(&mut r, c, &nets);
    r.problems.extend(crate::yaml::unquoted_non_strings(
        file,
        &super::STRING_FIELDS,
    ));
    r.problems
}

fn top_level(r: &mut Report<AgentConfig>, c: &AgentConfig) {
    if let Some(ip) = c.rendezvous_ip.as_deref() {
        if ip.parse::<IpAddr>().is_err() {
            r.push(
                "rendezvousIP",
                format!("{} is not an IP address; write the static address of the control-plane host that starts the installation, e.g. 10.20.0.11", quote(ip)),
            );
        }
    }
    for (i, source) in c.additional_ntp_sources.iter().enumerate() {
        r.check(
            format!("additionalNTPSources[{i}]"),
            checks::ntp_source(source),
        );
    }
    if let Some(url) = c.boot_artifacts_base_url.as_deref() {
        let ok = url.split_once("://").is_some_and(|(scheme, rest)| {
            !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || "+-.".contains(ch))
                && !rest.is_empty()
                && !rest.starts_with('/')
        }) && !url.chars().any(char::is_whitespace);
        if !ok {
            r.push(
                "bootArtifactsBaseURL",
                format!("{} is not a URL with a scheme and host; write e.g. http://10.20.0.2:8080/artifacts", quote(url)),
            );
        }
    }
}

fn host_identity<'c>(
    r: &mut Report<AgentConfig>,
    i: usize,
    host: &'c Host,
    seen: &mut HashMap<&'c str, usize>,
) {
    let base = format!("hosts[{i}]");
    if let Some(name) = host.hostname.as_deref() {
        if !is_dns_name(name) {
            r.push(
                format!("{base}.hostname"),
                format!("{} is not a valid host name; use lowercase DNS labels (letters, digits, '-', at most 63 characters each), e.g. gpu-worker-01", quote(name)),
            );
        } else if let Some(first) = seen.insert(name, i) {
            r.push(
                format!("{base}.hostname"),
                format!(
                    "{} is also the hostname of hosts[{first}]; every host needs its own name",
                    quote(name)
                ),
            );
        }
    }
    if let Some(role) = host.role.as_deref() {
        if !ROLES.contains(&role) {
            r.push(
                format!("{base}.role"),
                format!(
                    "unknown role {}; expected master, worker or arbiter (or leave it out)",
                    quote(role)
                ),
            );
        }
    }
}

fn interfaces(
    r: &mut Report<AgentConfig>,
    i: usize,
    host: &Host,
    macs: &mut HashMap<String, String>,
) {
    let base = format!("hosts[{i}].interfaces");
    if host.interfaces.is_empty() {
        r.push(
            base.clone(),
            "is missing; each host needs at least one interface (name and macAddress) so the agent can recognise it",
        );
    }
    for (j, iface) in host.interfaces.iter().enumerate() {
        let path = format!("{base}[{j}].macAddress");
        let Some(mac) = iface.mac_address.as_deref().filter(|m| !m.is_empty()) else {
            r.push(
                path,
                "is missing; each interface needs its MAC address, e.g. b8:3f:d2:4a:10:01",
            );
            continue;
        };
        match checks::mac(mac) {
            Err(f) => r.finding(path, f),
            Ok(canonical) => {
                if let Some(first) = macs.get(&canonical) {
                    r.push(
                        path,
                        format!("{} is already the MAC address of {first} (compared ignoring case); each NIC appears once", quote(mac)),
                    );
                } else {
                    macs.insert(canonical, path);
                }
            }
        }
    }
}

fn root_device(r: &mut Report<AgentConfig>, i: usize, host: &Host) {
    let Some(hints) = &host.root_device_hints else {
        return;
    };
    for (key, f) in checks::root_device_hints(hints) {
        r.finding(format!("hosts[{i}].rootDeviceHints.{key}"), f);
    }
}

fn host_network(r: &mut Report<AgentConfig>, host: &Host, net: &HostNetwork) {
    for (path, message) in &net.problems {
        r.push(path.clone(), message.clone());
    }
    let known = |name: &str| {
        net.names.iter().any(|n| n == name)
            || host
                .interfaces
                .iter()
                .any(|i| i.name.as_deref() == Some(name))
    };
    for (name, path, what) in &net.references {
        if !known(name) {
            r.push(
                path.clone(),
                format!("{what} {} is not an interface of this host; define it under networkConfig.interfaces or list it in the host's interfaces", quote(name)),
            );
        }
    }
}

fn static_addresses(r: &mut Report<AgentConfig>, nets: &[HostNetwork]) {
    let mut seen: HashMap<IpAddr, &str> = HashMap::new();
    for net in nets {
        for (ip, path) in &net.addresses {
            if let Some(first) = seen.get(ip) {
                r.push(
                    path.clone(),
                    format!(
                        "{ip} is already assigned at {first}; every static address must be unique"
                    ),
                );
            } else {
                seen.insert(*ip, path);
            }
        }
    }
}

fn rendezvous(r: &mut Report<AgentConfig>, c: &AgentConfig, nets: &[HostNetwork]) {
    let Some(ip) = c
        .rendezvous_ip
        .as_deref()
        .and_then(|s| s.parse::<IpAddr>().ok())
    else {
        return;
    };
    let mut on_control_plane = false;
    for (i, (host, net)) in c.hosts.iter().zip(nets).enumerate() {
        let Some((_, path)) = net.addresses.iter().find(|(a, _)| *a == ip) else {
            continue;
        };
        if host.role.as_deref() == Some("worker") {
            r.push(
                format!("hosts[{i}].role"),
                format!("this host holds the rendezvousIP {ip} ({path}) but has role worker; the rendezvous host must be a control-plane host"),
            );
        } else {
            on_control_plane = true;
        }
    }
    let any_static = nets.iter().any(|n| !n.addresses.is_empty());
    if any_static && !on_control_plane {
        let candidates: Vec<String> = c
            .hosts
            .iter()
            .zip(nets)
            .enumerate()
            .filter(|(_, (h, _))| h.role.as_deref() != Some("worker"))
            .flat_map(|(i, (_, n))| {
                n.addresses
                    .iter()
                    .map(move |(a, _)| format!("{a} (hosts[{i}])"))
            })
            .collect();
        let choose = if candidates.is_empty() {
            "no host without role worker has a static address".to_string()
        } else {
            format!("use one of {}", candidates.join(", "))
        };
        r.push(
            "rendezvousIP",
            format!("{ip} is not the static address of any control-plane host in hosts[].networkConfig; {choose}"),
        );
    }
}
