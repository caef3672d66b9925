//! The rules install-config.yaml and agent-config.yaml must follow: those the agent-based
//! installer applies (openshift/installer `pkg/asset/agent/agentconfig/`,
//! `pkg/types/validation/`, `pkg/types/baremetal/validation/`), and those it misses but that
//! break or confuse an installation (the rendezvous host, VIPs and static addresses, NMState
//! references, duplicate names). Every rule reports through a field path, so a problem lands on
//! the line the fix goes on. docs/agent.md lists them with example messages.

use super::agent_config::{AgentConfig, Host};
use super::install_config::{ImageSource, InstallConfig};
use super::nmstate::{self, HostNetwork};
use super::Loaded;
use crate::netaddr::{is_dns_label, is_dns_name, normalize_mac, Cidr};
use crate::yaml::{quote, Problem};
use std::collections::HashMap;
use std::net::IpAddr;

/// The machine network the installer assumes when none is written.
const DEFAULT_MACHINE_NETWORK: &str = "10.0.0.0/16";
const ARCHITECTURES: [&str; 4] = ["amd64", "arm64", "ppc64le", "s390x"];
const ROLES: [&str; 3] = ["master", "worker", "arbiter"];
const SSH_KEY_TYPES: [&str; 7] = [
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
];

/// Problems collected against one file.
struct Report<'a, T> {
    file: &'a Loaded<T>,
    problems: Vec<Problem>,
}

impl<'a, T> Report<'a, T> {
    fn new(file: &'a Loaded<T>) -> Self {
        Report {
            file,
            problems: Vec::new(),
        }
    }

    fn push(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.problems.push(self.file.problem(path, message));
    }
}

// ---------------------------------------------------------------------------------------------
// install-config.yaml
// ---------------------------------------------------------------------------------------------

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
    r.problems
}

fn names(r: &mut Report<InstallConfig>, c: &InstallConfig) {
    match c.metadata.as_ref().and_then(|m| m.name.as_deref()) {
        None | Some("") => r.push(
            "metadata.name",
            "is missing; name the cluster, e.g. `metadata: {name: ai}` (its API is then api.<name>.<baseDomain>)",
        ),
        Some(name) if !is_dns_label(name) => r.push(
            "metadata.name",
            format!("{} is not a valid cluster name; use lowercase letters, digits and '-', at most 63 characters, starting and ending with a letter or digit", quote(name)),
        ),
        _ => {}
    }
    match c.base_domain.as_deref() {
        None | Some("") => r.push(
            "baseDomain",
            "is missing; give the DNS domain the cluster lives under, e.g. `baseDomain: example.com`",
        ),
        Some(domain) if !is_dns_name(&domain.trim_end_matches('.').to_ascii_lowercase()) => r.push(
            "baseDomain",
            format!("{} is not a DNS domain; write dot-separated labels, e.g. example.com", quote(domain)),
        ),
        _ => {}
    }
}

fn secrets(r: &mut Report<InstallConfig>, c: &InstallConfig) {
    match c.pull_secret.as_ref().map(|s| s.expose().trim()) {
        None | Some("") => r.push(
            "pullSecret",
            r#"is missing; give the registry credentials as JSON, e.g. '{"auths":{"registry.example:8443":{"auth":"..."}}}'"#,
        ),
        Some(text) => {
            let auths = serde_json::from_str::<serde_json::Value>(text)
                .ok()
                .and_then(|v| v.get("auths").map(serde_json::Value::is_object));
            if auths != Some(true) {
                r.push(
                    "pullSecret",
                    r#"is not a pull secret; expected JSON with an "auths" object, e.g. '{"auths":{"registry.example:8443":{"auth":"..."}}}' (quote it in single quotes)"#,
                );
            }
        }
    }
    if let Some(keys) = c.ssh_key.as_deref() {
        for line in keys.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut fields = line.split_whitespace();
            let ty = fields.next().unwrap_or("");
            let blob = fields.next().unwrap_or("");
            let base64 = !blob.is_empty()
                && blob
                    .chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || "+/=".contains(ch));
            if !SSH_KEY_TYPES.contains(&ty) || !base64 {
                r.push(
                    "sshKey",
                    format!("{} is not an SSH public key; write `TYPE BASE64 [comment]`, e.g. the line of ~/.ssh/id_ed25519.pub (ssh-ed25519 AAAA... user@host)", quote(line)),
                );
            }
        }
    }
    if let Some(bundle) = c.additional_trust_bundle.as_deref() {
        if !bundle.contains("-----BEGIN CERTIFICATE-----") {
            r.push(
                "additionalTrustBundle",
                "holds no PEM certificate; paste the CA certificate(s) (-----BEGIN CERTIFICATE----- ...) as a block scalar (`additionalTrustBundle: |`)",
            );
        }
    }
    if let Some(policy) = c.additional_trust_bundle_policy.as_deref() {
        one_of(
            r,
            "additionalTrustBundlePolicy",
            policy,
            &["Proxyonly", "Always"],
        );
    }
}

fn one_of<T>(r: &mut Report<T>, path: &str, value: &str, allowed: &[&str]) {
    if !allowed.contains(&value) {
        let near = allowed
            .iter()
            .find(|a| a.eq_ignore_ascii_case(value))
            .map(|a| format!(" (write {a})"))
            .unwrap_or_default();
        r.push(
            path,
            format!(
                "unknown value {}{near}; expected one of {}",
                quote(value),
                allowed.join(", ")
            ),
        );
    }
}

fn pools(r: &mut Report<InstallConfig>, c: &InstallConfig) {
    let single = c.control_plane_replicas() == 1;
    if let Some(cp) = &c.control_plane {
        if let Some(name) = cp.name.as_deref().filter(|n| *n != "master") {
            r.push(
                "controlPlane.name",
                format!("must be 'master', found {}", quote(name)),
            );
        }
        if let Some(n) = cp.replicas.filter(|n| ![1, 3, 4, 5].contains(n)) {
            r.push(
                "controlPlane.replicas",
                format!("must be 1 (single node), 3, 4 or 5, found {n}"),
            );
        }
        pool_settings(r, "controlPlane", cp);
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
        pool_settings(r, &base, pool);
    }
}

fn pool_settings(
    r: &mut Report<InstallConfig>,
    base: &str,
    pool: &super::install_config::MachinePool,
) {
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
        one_of(
            r,
            &format!("{base}.hyperthreading"),
            ht,
            &["Enabled", "Disabled"],
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
    for (kind, nets) in [("service", &service), ("cluster", &cluster)] {
        for (net, path) in nets {
            for (m, mpath) in &machine {
                if net.overlaps(m) {
                    r.push(
                        path.clone(),
                        format!("{kind} network {net} overlaps the machine network {m} ({mpath}); pick a range the hosts do not use"),
                    );
                }
            }
        }
    }
    for (s, spath) in &service {
        for (cn, cpath) in &cluster {
            if s.overlaps(cn) {
                r.push(
                    spath.clone(),
                    format!("service network {s} overlaps the cluster network {cn} ({cpath}); they must be separate ranges"),
                );
            }
        }
    }
    if n.machine_network.is_empty() {
        if let Ok(d) = DEFAULT_MACHINE_NETWORK.parse() {
            machine.push((d, "networking.machineNetwork".into()));
        }
    }
    Networks { machine }
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
        one_of(r, "publish", publish, &["External", "Internal"]);
    }
    if let Some(mode) = c.cpu_partitioning_mode.as_deref() {
        one_of(r, "cpuPartitioningMode", mode, &["None", "AllNodes"]);
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

// ---------------------------------------------------------------------------------------------
// agent-config.yaml
// ---------------------------------------------------------------------------------------------

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
        let name = source.trim_end_matches('.').to_ascii_lowercase();
        if source.parse::<IpAddr>().is_err() && !is_dns_name(&name) {
            r.push(
                format!("additionalNTPSources[{i}]"),
                format!("{} is neither a domain name nor an IP address; write e.g. ntp.example.com or 10.20.0.1 (no scheme, no port)", quote(source)),
            );
        }
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
        match normalize_mac(mac) {
            Err(e) => r.push(path, e),
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
    let base = format!("hosts[{i}].rootDeviceHints");
    if let Some(dev) = hints.device_name.as_deref() {
        let rest = dev.strip_prefix("/dev/");
        let leaf = rest.map(|r| r.strip_prefix("disk/by-path/").unwrap_or(r));
        let message = match (rest, leaf) {
            (None, _) => Some(format!("{} is not a /dev/ path; write e.g. /dev/sda or /dev/disk/by-path/pci-0000:03:00.0-scsi-0:2:0:0", quote(dev))),
            (Some(r), _) if r.starts_with("disk/by-id/") => Some(format!("{} is a /dev/disk/by-id/ path, which the installer refuses; use /dev/NAME, /dev/disk/by-path/..., or the wwn or serialNumber hint", quote(dev))),
            (_, Some(l)) if l.is_empty() || l.contains('/') => Some(format!("{} must be /dev/NAME or /dev/disk/by-path/NAME", quote(dev))),
            _ => None,
        };
        if let Some(m) = message {
            r.push(format!("{base}.deviceName"), m);
        }
    }
    if hints.wwn_with_extension.is_some() {
        r.push(
            format!("{base}.wwnWithExtension"),
            "is not supported by the agent-based installer; use wwn (or serialNumber) instead",
        );
    }
    if hints.wwn_vendor_extension.is_some() {
        r.push(
            format!("{base}.wwnVendorExtension"),
            "is not supported by the agent-based installer; use wwn (or serialNumber) instead",
        );
    }
    if let Some(n) = hints.min_size_gigabytes.filter(|n| *n < 0) {
        r.push(
            format!("{base}.minSizeGigabytes"),
            format!("must be 0 or more, found {n}"),
        );
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

// ---------------------------------------------------------------------------------------------
// Both files
// ---------------------------------------------------------------------------------------------

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
