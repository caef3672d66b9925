//! The lab's machine network, made of Linux network namespaces (iproute2 `ip`, as root): one
//! namespace per lab node holding its machine-network addresses (node 0's also the API and
//! ingress VIPs), each joined by a veth pair to a bridge in the root namespace that carries the
//! site's gateway address. So this machine reaches every node address as an engineer's laptop on
//! the machine network would, and a server bound inside a node's namespace ([`bind_in`]) answers
//! at that node's address. Every name derives from the lab id, so [`remove`] takes away exactly
//! what [`LabNet::create`] made, also after a crash.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::Command;

use bootstrap::inventory::model::{Node, Site};
use bootstrap::netaddr::{parse_prefixed, Cidr};

/// Where `ip netns add` mounts a namespace's handle.
const NETNS_DIR: &str = "/run/netns";

/// One node's namespace and link.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeNet {
    /// The node's hostname.
    pub node: String,
    /// Its network namespace (`ip netns` name).
    pub namespace: String,
    /// The interface inside the namespace, named as the inventory names the interface of the
    /// node's machine address (`enp1s0`).
    pub interface: String,
    /// That interface's MAC: the inventory NIC's when the interface is a NIC.
    pub mac: Option<String>,
    /// The veth end in the root namespace, a port of the bridge.
    pub host_veth: String,
    /// Addresses on the interface (`192.168.111.20/24`; VIPs as `/32`).
    pub addresses: Vec<String>,
}

/// The lab network: the bridge and every node's namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabNet {
    /// The bridge in the root namespace.
    pub bridge: String,
    /// The gateway address it carries (`192.168.111.1/24`).
    pub gateway: String,
    /// The nodes, in inventory order (node 0 is the rendezvous host).
    pub nodes: Vec<NodeNet>,
}

/// The bridge's name for a lab id.
fn bridge_name(lab_id: &str) -> String {
    format!("bsl{lab_id}br")
}

/// The prefix of every namespace of a lab id.
/// The root-namespace ends of the lab's veth pairs: `bsl<id>v<n>`.
fn host_veth_prefix(lab_id: &str) -> String {
    format!("bsl{lab_id}v")
}

fn namespace_prefix(lab_id: &str) -> String {
    format!("bsl-{lab_id}-")
}

impl LabNet {
    /// The network for `nodes` of `site`, named after `lab_id` (6 hex digits). Each node's
    /// machine-network addresses go on one interface; addresses in other networks (storage
    /// VLANs) are not built. The VIPs go on the rendezvous host's namespace.
    pub fn plan(lab_id: &str, site: &Site, nodes: &[Node]) -> Result<LabNet> {
        let machine: Cidr = site
            .networks
            .machine
            .first()
            .context("site.yaml networks.machine is empty; the lab needs the machine network")?
            .parse()
            .map_err(|e: String| anyhow::anyhow!("site.yaml networks.machine[0]: {e}"))?;
        let gateway: IpAddr = site.networks.gateway.parse().with_context(|| {
            format!(
                "site.yaml networks.gateway '{}' is not an IP address",
                site.networks.gateway
            )
        })?;
        if !machine.contains(gateway) {
            bail!(
                "site.yaml networks.gateway {gateway} is outside the machine network {machine}; the lab's bridge carries it"
            );
        }
        let rendezvous: IpAddr = site.cluster.rendezvous_ip.parse().with_context(|| {
            format!(
                "site.yaml cluster.rendezvousIP '{}' is not an IP address",
                site.cluster.rendezvous_ip
            )
        })?;
        let mut out = Vec::new();
        for (i, node) in nodes.iter().enumerate() {
            let mut interface = None;
            let mut addresses = Vec::new();
            for a in &node.addresses {
                let (ip, _) = parse_prefixed(&a.ip).map_err(|e| {
                    anyhow::anyhow!("node {}: address {}: {e}", node.hostname, a.ip)
                })?;
                if machine.contains(ip) {
                    interface.get_or_insert_with(|| a.interface.clone());
                    if interface.as_deref() == Some(a.interface.as_str()) {
                        addresses.push(a.ip.clone());
                    }
                }
            }
            let interface = interface.with_context(|| {
                format!(
                    "node {} has no address in the machine network {machine}; the lab gives each node one",
                    node.hostname
                )
            })?;
            let holds_rendezvous = addresses
                .iter()
                .any(|a| parse_prefixed(a).map(|(ip, _)| ip) == Ok(rendezvous));
            if holds_rendezvous {
                for vip in site
                    .cluster
                    .api_vips
                    .iter()
                    .chain(&site.cluster.ingress_vips)
                {
                    addresses.push(format!("{vip}/32"));
                }
            }
            let mac = node
                .nics
                .iter()
                .find(|n| n.name == interface)
                .map(|n| n.mac.to_ascii_lowercase());
            out.push(NodeNet {
                node: node.hostname.clone(),
                namespace: format!("{}{i}", namespace_prefix(lab_id)),
                interface,
                mac,
                host_veth: format!("{}{i}", host_veth_prefix(lab_id)),
                addresses,
            });
        }
        Ok(LabNet {
            bridge: bridge_name(lab_id),
            gateway: format!("{gateway}/{}", machine.prefix),
            nodes: out,
        })
    }

    /// Creates the bridge, the namespaces and their links. Refuses when another interface
    /// already carries the gateway address (another lab, or a real network).
    pub fn create(&self) -> Result<()> {
        let gateway = self.gateway.split('/').next().unwrap_or_default();
        if let Some(other) = interface_with_address(gateway)? {
            bail!(
                "the lab gateway {gateway} is already an address of interface {other}; another lab may be up (bootstrap-lab down --state ...), or change networks.gateway"
            );
        }
        ip(&["link", "add", &self.bridge, "type", "bridge"])?;
        ip(&["addr", "add", &self.gateway, "dev", &self.bridge])?;
        ip(&["link", "set", &self.bridge, "up"])?;
        for n in &self.nodes {
            self.create_node(n)
                .with_context(|| format!("building node {}'s namespace {}", n.node, n.namespace))?;
        }
        Ok(())
    }

    fn create_node(&self, n: &NodeNet) -> Result<()> {
        let ns = n.namespace.as_str();
        ip(&["netns", "add", ns])?;
        ip(&[
            "link",
            "add",
            &n.host_veth,
            "type",
            "veth",
            "peer",
            "name",
            &n.interface,
            "netns",
            ns,
        ])?;
        ip(&["link", "set", &n.host_veth, "master", &self.bridge])?;
        ip(&["link", "set", &n.host_veth, "up"])?;
        ip(&["-n", ns, "link", "set", "lo", "up"])?;
        if let Some(mac) = &n.mac {
            ip(&["-n", ns, "link", "set", &n.interface, "address", mac])?;
        }
        for a in &n.addresses {
            ip(&["-n", ns, "addr", "add", a, "dev", &n.interface])?;
        }
        ip(&["-n", ns, "link", "set", &n.interface, "up"])?;
        let gateway = self.gateway.split('/').next().unwrap_or_default();
        ip(&["-n", ns, "route", "add", "default", "via", gateway])?;
        Ok(())
    }

    /// The namespace of `node`.
    pub fn namespace_of(&self, node: &str) -> Result<&str> {
        self.nodes
            .iter()
            .find(|n| n.node == node)
            .map(|n| n.namespace.as_str())
            .with_context(|| format!("node {node} is not a node of this lab"))
    }
}

/// Removes every veth pair, namespace and the bridge of `lab_id` that exist; nothing else.
/// Returns what was removed. The veth pairs are deleted by their root-namespace ends first: a
/// deleted namespace lives on (and its veth with it) while a socket still holds it, such as a
/// connection in TIME_WAIT, and lab down must leave no link behind.
pub fn remove(lab_id: &str) -> Result<Vec<String>> {
    let mut removed = Vec::new();
    let veths = host_veth_prefix(lab_id);
    for link in list_links()? {
        if link.starts_with(&veths) {
            ip(&["link", "del", &link])?;
            removed.push(link);
        }
    }
    let prefix = namespace_prefix(lab_id);
    for ns in list_namespaces()? {
        if ns.starts_with(&prefix) {
            ip(&["netns", "del", &ns])?;
            removed.push(ns);
        }
    }
    let bridge = bridge_name(lab_id);
    if link_exists(&bridge)? {
        ip(&["link", "del", &bridge])?;
        removed.push(bridge);
    }
    Ok(removed)
}

/// The namespaces `ip netns list` shows.
pub fn list_namespaces() -> Result<Vec<String>> {
    let out = ip_output(&["netns", "list"])?;
    Ok(out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect())
}

/// The links of the root namespace, by name (`ip -o link show`; `veth0@if3` read as `veth0`).
fn list_links() -> Result<Vec<String>> {
    let out = ip_output(&["-o", "link", "show"])?;
    Ok(out
        .lines()
        .filter_map(|l| l.split(':').nth(1))
        .map(|name| {
            name.trim()
                .split('@')
                .next()
                .unwrap_or_default()
                .to_string()
        })
        .collect())
}

/// True when the link exists in the root namespace.
pub fn link_exists(name: &str) -> Result<bool> {
    let out = Command::new("ip")
        .args(["-o", "link", "show", "dev", name])
        .output()
        .context("running ip (iproute2)")?;
    Ok(out.status.success())
}

/// The root namespace's interface holding `addr`, if any.
fn interface_with_address(addr: &str) -> Result<Option<String>> {
    let out = ip_output(&["-o", "addr", "show"])?;
    Ok(out.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let at = f.iter().position(|w| *w == "inet" || *w == "inet6")?;
        let ip = f.get(at + 1)?.split('/').next()?;
        (ip == addr).then(|| f.get(1).unwrap_or(&"?").to_string())
    }))
}

/// A TCP listener bound to `addr` inside network namespace `namespace`: a fresh thread moves
/// into the namespace and binds, and the socket keeps that namespace for its life, wherever it
/// is used. The listener is blocking, as `std` makes it (set it non-blocking before handing it to
/// tokio).
pub fn bind_in(namespace: &str, addr: SocketAddr) -> Result<TcpListener> {
    let handle = PathBuf::from(NETNS_DIR).join(namespace);
    let ns = namespace.to_string();
    std::thread::spawn(move || -> Result<TcpListener> {
        let file = fs_err::File::open(&handle)
            .with_context(|| format!("opening network namespace {ns}; is the lab up?"))?;
        rustix::thread::move_into_link_name_space(
            std::os::fd::AsFd::as_fd(&file),
            Some(rustix::thread::LinkNameSpaceType::Network),
        )
        .with_context(|| format!("entering network namespace {ns} (root is needed)"))?;
        TcpListener::bind(addr).with_context(|| format!("binding {addr} in namespace {ns}"))
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the thread binding {addr} in {namespace} panicked"))?
}

/// A command run inside `namespace` (`ip netns exec NS PROGRAM ARGS...`): for servers and tools
/// that must live at a node's address (an sshd test host, a probe).
pub fn command_in(namespace: &str, program: &str) -> Command {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", namespace, program]);
    cmd
}

fn ip(args: &[&str]) -> Result<()> {
    ip_output(args).map(drop)
}

fn ip_output(args: &[&str]) -> Result<String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .context("running ip (iproute2; scripts/install-deps.sh)")?;
    if !out.status.success() {
        bail!(
            "ip {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lab() -> (Site, Vec<Node>) {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../inventory/lab");
        let inv = bootstrap::inventory::load(&dir).unwrap();
        (inv.site, inv.nodes.nodes)
    }

    /// Every name fits the kernel's 15 characters and derives from the lab id; node 0 (the
    /// rendezvous host) carries the VIPs; each interface takes its NIC's MAC.
    #[test]
    fn the_plan_names_everything_after_the_lab_id() {
        let (site, nodes) = lab();
        let net = LabNet::plan("a1b2c3", &site, &nodes).unwrap();
        assert_eq!(net.bridge, "bsla1b2c3br");
        assert_eq!(net.gateway, "192.168.111.1/24");
        let n0 = &net.nodes[0];
        assert_eq!(n0.namespace, "bsl-a1b2c3-0");
        assert_eq!(n0.interface, "enp1s0");
        assert_eq!(n0.mac.as_deref(), Some("aa:bb:cc:00:00:01"));
        assert_eq!(
            n0.addresses,
            ["192.168.111.20/24", "192.168.111.5/32", "192.168.111.4/32"]
        );
        assert_eq!(net.nodes[1].addresses, ["192.168.111.21/24"]);
        for n in &net.nodes {
            assert!(n.host_veth.len() <= 15 && n.interface.len() <= 15, "{n:?}");
        }
    }
}
