//! install-config.yaml's rules on their own: names and secrets, machine pools, networks,
//! platform and VIPs, mirrors, other settings.

use super::Report;
use crate::installer::checks;
use crate::installer::install_config::{Baremetal, ImageSource, InstallConfig, MachinePool};
use crate::installer::Loaded;
use crate::netaddr::Cidr;
use crate::yaml::{quote, Problem};
use std::collections::HashMap;
use std::net::IpAddr;

/// The machine network the installer assumes when none is written.
pub(super) const DEFAULT_MACHINE_NETWORK: &str = "10.0.0.0/16";
const ARCHITECTURES: [&str; 4] = ["amd64", "arm64", "ppc64le", "s390x"];
/// Every rule of install-config.yaml on its own.
pub fn install_config(file: &Loaded<InstallConfig>) -> Vec<Problem> {
    let mut r = Report::new(file);
    let c = &file.value;
    names(&mut r, c);
    secrets(&mut r, c);
    pools(&mut r, c);
    let nets = networks(&mut r, c);
    platform(&mut r, c, &nets.machine);
    image_sources(&mut r, c);
    settings(&mut r, c);
    r.problems.extend(crate::yaml::unquoted_non_strings(
        file,
        &super::STRING_FIELDS,
    ));
    r.problems
}

fn names(r: &mut Report<InstallConfig>, c: &InstallConfig) {
    match c.metadata.as_ref().and_then(|m| m.name.as_deref()) {
        None | Some("") => r.push(
            "metadata.name",
            "is missing; name the cluster, e.g. `metadata: {name: ai}` (its API is then api.<name>.<baseDomain>)",
        ),
        Some(name) => r.check("metadata.name", checks::cluster_name(name)),
    }
    match c.base_domain.as_deref() {
        None | Some("") => r.push(
            "baseDomain",
            "is missing; give the DNS domain the cluster lives under, e.g. `baseDomain: example.com`",
        ),
        Some(domain) => r.check("baseDomain", checks::base_domain(domain)),
    }
}

fn secrets(r: &mut Report<InstallConfig>, c: &InstallConfig) {
    match c.pull_secret.as_ref().map(|s| s.expose().trim()) {
        None | Some("") => r.push(
            "pullSecret",
            r#"is missing; give the registry credentials as JSON, e.g. '{"auths":{"registry.example:8443":{"auth":"..."}}}'"#,
        ),
        Some(text) => r.check("pullSecret", checks::pull_secret(text)),
    }
    if let Some(keys) = c.ssh_key.as_deref() {
        r.check("sshKey", checks::ssh_authorized_keys(keys));
    }
    if let Some(bundle) = c.additional_trust_bundle.as_deref() {
        r.check("additionalTrustBundle", checks::pem_bundle(bundle));
    }
    if let Some(policy) = c.additional_trust_bundle_policy.as_deref() {
        r.check(
            "additionalTrustBundlePolicy",
            checks::trust_bundle_policy(policy),
        );
    }
}

fn pools(r: &mut Report<InstallConfig>, c: &InstallConfig) {
    if let Some(cp) = &c.control_plane {
        if let Some(name) = cp.name.as_deref().filter(|n| *n != "master") {
            r.push(
                "controlPlane.name",
                format!("must be 'master', found {}", quote(name)),
            );
        }
        if let Some(n) = cp.replicas {
            let arbiter = c.arbiter.is_some();
            r.check(
                "controlPlane.replicas",
                checks::control_plane_size(n, arbiter, c.has_fencing()),
            );
        }
        pool_settings(r, "controlPlane", cp);
    }
    if let Some(arbiter) = &c.arbiter {
        arbiter_pool(r, c, arbiter);
    }
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (i, pool) in c.compute.iter().enumerate() {
        let base = format!("compute[{i}]");
        match pool.name.as_deref() {
            Some("worker") | None => {}
            Some(other) => r.push(
                format!("{base}.name"),
                format!("must be 'worker' on bare metal, found {}", quote(other)),
            ),
        }
        if let Some(first) = seen.insert(pool.name.as_deref().unwrap_or("worker"), i) {
            r.push(
                format!("{base}.name"),
                format!(
                    "compute pool 'worker' is defined twice (also compute[{first}]); merge them"
                ),
            );
        }
        compute_replicas(r, c, &base, pool);
        pool_settings(r, &base, pool);
    }
}

fn compute_replicas(
    r: &mut Report<InstallConfig>,
    c: &InstallConfig,
    base: &str,
    pool: &MachinePool,
) {
    let single = c.control_plane_replicas() == 1;
    match pool.replicas {
        Some(n) if n < 0 => r.push(
            format!("{base}.replicas"),
            format!("must be 0 or more, found {n}"),
        ),
        Some(n) if n > 0 && single => r.push(
            format!("{base}.replicas"),
            format!("must be 0 for a single-node cluster (controlPlane.replicas: 1), found {n}; add workers after installation"),
        ),
        None if single => r.push(
            format!("{base}.replicas"),
            "must be written as 0 for a single-node cluster (controlPlane.replicas: 1); the default is 3",
        ),
        _ => {}
    }
}

/// The arbiter pool of a two-node cluster with an arbiter (the installer's
/// `validateSNOConfiguration` and arbiter checks).
fn arbiter_pool(r: &mut Report<InstallConfig>, c: &InstallConfig, arbiter: &MachinePool) {
    if let Some(name) = arbiter.name.as_deref().filter(|n| *n != "arbiter") {
        r.push(
            "arbiter.name",
            format!("must be 'arbiter', found {}", quote(name)),
        );
    }
    match arbiter.replicas {
        Some(n) if n < 0 => r.push("arbiter.replicas", format!("must be 0 or more, found {n}")),
        Some(n) if n > 0 && c.control_plane_replicas() == 1 => r.push(
            "arbiter.replicas",
            format!("must be 0 for a single-node cluster (controlPlane.replicas: 1), found {n}"),
        ),
        _ => {}
    }
    pool_settings(r, "arbiter", arbiter);
}

fn pool_settings(r: &mut Report<InstallConfig>, base: &str, pool: &MachinePool) {
    if let Some(arch) = pool.architecture.as_deref() {
        let hint = match arch {
            "x86_64" | "x86-64" => " (write amd64)",
            "aarch64" => " (write arm64)",
            _ => "",
        };
        if !ARCHITECTURES.contains(&arch) {
            r.push(
                format!("{base}.architecture"),
                format!(
                    "unknown architecture {}{hint}; expected one of {}",
                    quote(arch),
                    ARCHITECTURES.join(", ")
                ),
            );
        }
    }
    if let Some(ht) = pool.hyperthreading.as_deref() {
        r.check(
            format!("{base}.hyperthreading"),
            checks::one_of(ht, &["Enabled", "Disabled"]),
        );
    }
}

/// The networks as parsed, with their paths, for the rules that compare them.
struct Networks {
    machine: Vec<(Cidr, String)>,
}

fn cidr_at(r: &mut Report<InstallConfig>, path: String, text: &str) -> Option<(Cidr, String)> {
    match text.parse::<Cidr>() {
        Ok(c) => Some((c, path)),
        Err(e) => {
            r.push(path, format!("is not a network: {e}"));
            None
        }
    }
}

fn networks(r: &mut Report<InstallConfig>, c: &InstallConfig) -> Networks {
    let Some(n) = &c.networking else {
        let default = DEFAULT_MACHINE_NETWORK.parse().ok();
        return Networks {
            machine: default
                .map(|d| (d, "networking.machineNetwork".to_string()))
                .into_iter()
                .collect(),
        };
    };
    if let Some(ty) = n.network_type.as_deref().filter(|t| *t != "OVNKubernetes") {
        let why = if ty == "OpenShiftSDN" {
            "OpenShiftSDN can no longer be installed"
        } else {
            "it is the only network type for new clusters"
        };
        r.push(
            "networking.networkType",
            format!("must be OVNKubernetes, found {} ({why})", quote(ty)),
        );
    }
    let mut machine: Vec<_> = n
        .machine_network
        .iter()
        .enumerate()
        .filter_map(|(i, m)| cidr_at(r, format!("networking.machineNetwork[{i}].cidr"), &m.cidr))
        .collect();
    let mut cluster = Vec::new();
    for (i, net) in n.cluster_network.iter().enumerate() {
        let Some((cidr, path)) =
            cidr_at(r, format!("networking.clusterNetwork[{i}].cidr"), &net.cidr)
        else {
            continue;
        };
        let max = if cidr.addr.is_ipv4() { 32 } else { 128 };
        if let Some(h) = net.host_prefix {
            if h < i64::from(cidr.prefix) || h > max {
                r.push(
                    format!("networking.clusterNetwork[{i}].hostPrefix"),
                    format!(
                        "must be from {} (the network's own prefix) to {max}, found {h}",
                        cidr.prefix
                    ),
                );
            }
        }
        cluster.push((cidr, path));
    }
    let service: Vec<_> = n
        .service_network
        .iter()
        .enumerate()
        .filter_map(|(i, s)| cidr_at(r, format!("networking.serviceNetwork[{i}]"), s))
        .collect();
    no_overlaps(r, &machine, &cluster, &service);
    if n.machine_network.is_empty() {
        if let Ok(d) = DEFAULT_MACHINE_NETWORK.parse() {
            machine.push((d, "networking.machineNetwork".into()));
        }
    }
    Networks { machine }
}

/// Service and cluster networks share no address with the machine networks or each other.
fn no_overlaps(
    r: &mut Report<InstallConfig>,
    machine: &[(Cidr, String)],
    cluster: &[(Cidr, String)],
    service: &[(Cidr, String)],
) {
    for (kind, nets) in [("service", service), ("cluster", cluster)] {
        for (net, path) in nets {
            for (m, mpath) in machine {
                if net.overlaps(m) {
                    r.push(
                        path.clone(),
                        format!("{kind} network {net} overlaps the machine network {m} ({mpath}); pick a range the hosts do not use"),
                    );
                }
            }
        }
    }
    for (s, spath) in service {
        for (cn, cpath) in cluster {
            if s.overlaps(cn) {
                r.push(
                    spath.clone(),
                    format!("service network {s} overlaps the cluster network {cn} ({cpath}); they must be separate ranges"),
                );
            }
        }
    }
}

fn platform(r: &mut Report<InstallConfig>, c: &InstallConfig, machine: &[(Cidr, String)]) {
    let Some(p) = &c.platform else {
        r.push(
            "platform",
            "is missing; write `platform: {baremetal: {apiVIPs: [ADDRESS], ingressVIPs: [ADDRESS]}}`, or `platform: {none: {}}` for a single node",
        );
        return;
    };
    let set: Vec<&str> = [
        ("baremetal", p.baremetal.is_some()),
        ("none", p.none.is_some()),
        ("external", p.external.is_some()),
    ]
    .into_iter()
    .filter_map(|(n, s)| s.then_some(n))
    .collect();
    if set.len() != 1 {
        let found = if set.is_empty() {
            "none is set (write `none: {}`, not `none:`)".to_string()
        } else {
            format!("found {}", set.join(" and "))
        };
        r.push(
            "platform",
            format!("set exactly one of baremetal, none or external; {found}"),
        );
        return;
    }
    let Some(bm) = &p.baremetal else { return };
    baremetal_hosts(r, bm);
    if c.control_plane_replicas() == 1 {
        r.push(
            "platform.baremetal",
            "a single-node cluster (controlPlane.replicas: 1) needs platform none or external; write `platform: {none: {}}`",
        );
        return;
    }
    let api = vips(r, "apiVIPs", "API", &bm.api_vips, machine);
    let ingress = vips(r, "ingressVIPs", "ingress", &bm.ingress_vips, machine);
    for (ip, path) in &ingress {
        if let Some((_, apath)) = api.iter().find(|(a, _)| a == ip) {
            r.push(
                path.clone(),
                format!("{ip} is also the API VIP ({apath}); the API and ingress VIPs must be different addresses"),
            );
        }
    }
}

/// `platform.baremetal.hosts[]`: the facts agent-config's hosts are held to (MACs, root
/// device hints), and each boot MAC once.
fn baremetal_hosts(r: &mut Report<InstallConfig>, bm: &Baremetal) {
    let mut macs: HashMap<String, usize> = HashMap::new();
    for (i, host) in bm.hosts.iter().enumerate() {
        let base = format!("platform.baremetal.hosts[{i}]");
        if let Some(mac) = host.boot_mac_address.as_deref() {
            match checks::mac(mac) {
                Err(f) => r.finding(format!("{base}.bootMACAddress"), f),
                Ok(canonical) => {
                    if let Some(first) = macs.insert(canonical, i) {
                        r.push(
                            format!("{base}.bootMACAddress"),
                            format!("{} is already the boot MAC of platform.baremetal.hosts[{first}] (compared ignoring case); each host boots from its own NIC", quote(mac)),
                        );
                    }
                }
            }
        }
        if let Some(hints) = &host.root_device_hints {
            for (key, f) in checks::root_device_hints(hints) {
                r.finding(format!("{base}.rootDeviceHints.{key}"), f);
            }
        }
    }
}

fn vips(
    r: &mut Report<InstallConfig>,
    key: &str,
    what: &str,
    list: &[String],
    machine: &[(Cidr, String)],
) -> Vec<(IpAddr, String)> {
    let base = format!("platform.baremetal.{key}");
    if list.is_empty() {
        r.push(
            base,
            format!("is missing; a bare-metal cluster needs its {what} virtual IP, an unused address in the machine network, e.g. `{key}: [10.20.0.5]`"),
        );
        return Vec::new();
    }
    let mut out = Vec::new();
    for (i, text) in list.iter().enumerate() {
        let path = format!("{base}[{i}]");
        let Ok(ip) = text.parse::<IpAddr>() else {
            r.push(
                path,
                format!(
                    "{} is not an IP address; write the address alone, e.g. 10.20.0.5",
                    quote(text)
                ),
            );
            continue;
        };
        // No machine network parsed (each was reported): nothing to compare with.
        if !machine.is_empty() && !machine.iter().any(|(m, _)| m.contains(ip)) {
            let nets: Vec<String> = machine.iter().map(|(m, _)| m.to_string()).collect();
            r.push(
                path.clone(),
                format!("{ip} is not in a machine network ({}); the {what} VIP must be an address on the hosts' network", nets.join(", ")),
            );
        }
        out.push((ip, path));
    }
    out
}

fn image_sources(r: &mut Report<InstallConfig>, c: &InstallConfig) {
    for (key, list) in [
        ("imageDigestSources", &c.image_digest_sources),
        ("imageContentSources", &c.image_content_sources),
    ] {
        for (i, entry) in list.iter().enumerate() {
            image_source(r, &format!("{key}[{i}]"), entry);
        }
    }
    if !c.image_content_sources.is_empty() && !c.image_digest_sources.is_empty() {
        r.push(
            "imageContentSources",
            "cannot be used together with imageDigestSources; move its entries to imageDigestSources (same source and mirrors fields) and remove it",
        );
    }
}

fn image_source(r: &mut Report<InstallConfig>, base: &str, entry: &ImageSource) {
    let mut check = |path: String, repo: &str| {
        if let Some(message) = repository_problem(repo) {
            r.push(path, message);
        }
    };
    check(format!("{base}.source"), &entry.source);
    for (j, m) in entry.mirrors.iter().enumerate() {
        check(format!("{base}.mirrors[{j}]"), m);
    }
}

/// A repository (`registry.example:8443/ocp/release`): no tag, no digest, no scheme.
fn repository_problem(repo: &str) -> Option<String> {
    let example = "e.g. registry.example:8443/openshift/release";
    if repo.trim().is_empty() {
        return Some(format!("is empty; give a repository, {example}"));
    }
    if repo.contains("://") {
        return Some(format!(
            "{} has a URL scheme; write the repository without it, {example}",
            quote(repo)
        ));
    }
    if repo.chars().any(char::is_whitespace) {
        return Some(format!(
            "{} contains whitespace; a repository has none",
            quote(repo)
        ));
    }
    if let Some((name, _)) = repo.split_once('@') {
        return Some(format!(
            "{} has a digest; give the repository only ({name})",
            quote(repo)
        ));
    }
    let last = repo.rsplit('/').next().unwrap_or(repo);
    // A ':' in the first component is a registry port when a path follows.
    if repo.contains('/') && last.contains(':') {
        let name = &repo[..repo.len() - (last.len() - last.find(':').unwrap_or(0))];
        return Some(format!(
            "{} has a tag; give the repository only ({name})",
            quote(repo)
        ));
    }
    None
}

fn settings(r: &mut Report<InstallConfig>, c: &InstallConfig) {
    if let Some(publish) = c.publish.as_deref() {
        r.check(
            "publish",
            checks::one_of(publish, &["External", "Internal"]),
        );
    }
    if let Some(mode) = c.cpu_partitioning_mode.as_deref() {
        r.check(
            "cpuPartitioningMode",
            checks::one_of(mode, &["None", "AllNodes"]),
        );
    }
    if let Some(set) = c
        .capabilities
        .as_ref()
        .and_then(|cap| cap.baseline_capability_set.as_deref())
    {
        let versioned = set
            .strip_prefix("v4.")
            .is_some_and(|m| !m.is_empty() && m.chars().all(|ch| ch.is_ascii_digit()));
        if !(set == "None" || set == "vCurrent" || versioned) {
            r.push(
                "capabilities.baselineCapabilitySet",
                format!(
                    "unknown value {}; expected None, vCurrent or v4.N (e.g. v4.16)",
                    quote(set)
                ),
            );
        }
    }
    if let Some(proxy) = &c.proxy {
        for (key, value, schemes) in [
            ("httpProxy", &proxy.http_proxy, &["http"][..]),
            ("httpsProxy", &proxy.https_proxy, &["http", "https"][..]),
        ] {
            let Some(url) = value.as_deref() else {
                continue;
            };
            let ok = url
                .split_once("://")
                .is_some_and(|(s, rest)| schemes.contains(&s) && !rest.is_empty());
            if !ok {
                r.push(
                    format!("proxy.{key}"),
                    format!(
                        "{} is not a proxy URL; write {}://HOST:PORT",
                        quote(url),
                        schemes[0]
                    ),
                );
            }
        }
    }
}
