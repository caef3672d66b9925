//! A valid inventory becomes the agent installer's two files, as the installer's own types
//! ([`crate::installer::install_config::InstallConfig`], [`crate::installer::agent_config::AgentConfig`]
//! with typed NMState). Everything that is a set is sorted, so the same inventory gives the same
//! bytes.

use crate::installer::agent_config::{self as ac, AgentConfig, RootDeviceHints};
use crate::installer::install_config::{
    self as ic, Baremetal, ClusterNetwork, Empty, ImageSource, InstallConfig, MachineNetwork,
    MachinePool, Networking, Platform,
};
use crate::installer::nmstate::{
    DnsConfig, DnsResolver, Interface, IpAddress, IpConfig, LinkAggregation, NetworkConfig, Route,
    Routes, Vlan,
};
use crate::installer::InlineSecret;
use crate::inventory::model::{Node, Role};
use crate::inventory::validate::vlan_name;
use crate::inventory::Inventory;
use crate::netaddr::{normalize_mac, parse_prefixed, Cidr};
use crate::secret::Secret;
use std::net::IpAddr;

/// The main routing table.
const MAIN_TABLE: u32 = 254;

/// Counts of control-plane and compute nodes.
pub(crate) fn counts(inv: &Inventory) -> (usize, usize) {
    let n = &inv.nodes.nodes;
    (
        n.iter().filter(|x| x.role == Role::Master).count(),
        n.iter().filter(|x| x.role == Role::Worker).count(),
    )
}

/// install-config.yaml's content; secrets and files already resolved.
pub(crate) fn install_config(
    inv: &Inventory,
    pull_secret: Secret,
    ssh_key: String,
    trust_bundle: Option<String>,
    image_digest_sources: Vec<ImageSource>,
) -> InstallConfig {
    let c = &inv.site.cluster;
    let n = &inv.site.networks;
    let (masters, workers) = counts(inv);
    let platform = if masters == 1 && workers == 0 {
        Platform {
            none: Some(Empty {}),
            ..Platform::default()
        }
    } else {
        Platform {
            baremetal: Some(Baremetal {
                api_vips: c.api_vips.clone(),
                ingress_vips: c.ingress_vips.clone(),
                ..Baremetal::default()
            }),
            ..Platform::default()
        }
    };
    let cidr = |s: &String| {
        s.parse::<Cidr>()
            .map(|c| c.to_string())
            .unwrap_or(s.clone())
    };
    let policy = trust_bundle.as_ref().map(|_| {
        c.trust_bundle_policy
            .clone()
            .unwrap_or_else(|| "Always".to_string())
    });
    InstallConfig {
        api_version: ic::API_VERSION.to_string(),
        base_domain: Some(c.base_domain.clone()),
        metadata: Some(metadata(&c.name)),
        compute: vec![MachinePool {
            name: Some("worker".into()),
            replicas: Some(count(workers)),
            architecture: Some("amd64".into()),
            ..MachinePool::default()
        }],
        control_plane: Some(MachinePool {
            name: Some("master".into()),
            replicas: Some(count(masters)),
            architecture: Some("amd64".into()),
            hyperthreading: Some("Enabled".into()),
            ..MachinePool::default()
        }),
        networking: Some(Networking {
            network_type: Some("OVNKubernetes".into()),
            machine_network: n
                .machine
                .iter()
                .map(|m| MachineNetwork { cidr: cidr(m) })
                .collect(),
            cluster_network: n
                .cluster
                .iter()
                .map(|x| ClusterNetwork {
                    cidr: cidr(&x.cidr),
                    host_prefix: Some(i64::from(x.host_prefix)),
                    host_subnet_length: None,
                })
                .collect(),
            service_network: n.service.iter().map(cidr).collect(),
            ..Networking::default()
        }),
        platform: Some(platform),
        additional_trust_bundle: trust_bundle,
        additional_trust_bundle_policy: policy,
        image_digest_sources,
        pull_secret: Some(InlineSecret(pull_secret)),
        ssh_key: Some(ssh_key),
        ..InstallConfig::default()
    }
}

/// `metadata: {name: NAME}`.
fn metadata(name: &str) -> ic::Metadata {
    ic::Metadata {
        name: Some(name.to_string()),
        ..ic::Metadata::default()
    }
}

/// A node count as a replica count.
fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// agent-config.yaml's content.
pub(crate) fn agent_config(inv: &Inventory) -> AgentConfig<NetworkConfig> {
    let mut nodes: Vec<&Node> = inv.nodes.nodes.iter().collect();
    nodes.sort_by(|a, b| (a.role, &a.hostname).cmp(&(b.role, &b.hostname)));
    AgentConfig {
        api_version: ac::API_VERSION.to_string(),
        kind: ac::KIND.to_string(),
        metadata: Some(metadata(&inv.site.cluster.name)),
        rendezvous_ip: Some(inv.site.cluster.rendezvous_ip.clone()),
        additional_ntp_sources: inv.site.networks.ntp.clone(),
        hosts: nodes.into_iter().map(|n| host(inv, n)).collect(),
        boot_artifacts_base_url: None,
        minimal_iso: None,
    }
}

/// nodes-config.yaml's content for `nodes` (nodes to add to the running cluster): each host as
/// agent-config.yaml would have it (NICs, root device hints, NMState), so a node added on day
/// two is configured exactly as it would have been on day one.
pub(crate) fn nodes_config(
    inv: &Inventory,
    nodes: &[&Node],
) -> crate::installer::nodes_config::NodesConfig<NetworkConfig> {
    crate::installer::nodes_config::NodesConfig {
        cpu_architecture: None,
        ssh_key: None,
        boot_artifacts_base_url: None,
        hosts: nodes.iter().map(|n| host(inv, n)).collect(),
    }
}

/// The node's role as agent-config.yaml names it.
pub(crate) fn role_name(role: Role) -> &'static str {
    match role {
        Role::Master => "master",
        Role::Worker => "worker",
        Role::Arbiter => "arbiter",
    }
}

fn mac(s: &str) -> String {
    normalize_mac(s).unwrap_or_else(|_| s.to_string())
}

fn host(inv: &Inventory, node: &Node) -> ac::Host<NetworkConfig> {
    ac::Host {
        hostname: Some(node.hostname.clone()),
        role: Some(role_name(node.role).to_string()),
        interfaces: node
            .nics
            .iter()
            .map(|n| ac::Interface {
                name: Some(n.name.clone()),
                mac_address: Some(mac(&n.mac)),
            })
            .collect(),
        root_device_hints: Some(RootDeviceHints::from(&node.root_device)),
        network_config: Some(network_config(inv, node)),
        bmc: None,
    }
}

/// The node's addresses on `interface`, split by family.
fn ip_configs(node: &Node, interface: &str) -> (IpConfig, IpConfig) {
    let mut v4 = Vec::new();
    let mut v6 = Vec::new();
    for a in node.addresses.iter().filter(|a| a.interface == interface) {
        if let Ok((ip, prefix)) = parse_prefixed(&a.ip) {
            let entry = IpAddress {
                ip: ip.to_string(),
                prefix_length: prefix,
            };
            if ip.is_ipv4() {
                v4.push(entry);
            } else {
                v6.push(entry);
            }
        }
    }
    let config = |address: Vec<IpAddress>, v6: bool| {
        if address.is_empty() {
            IpConfig {
                enabled: false,
                dhcp: None,
                autoconf: None,
                address,
            }
        } else {
            IpConfig {
                enabled: true,
                dhcp: Some(false),
                autoconf: v6.then_some(false),
                address,
            }
        }
    };
    (config(v4, false), config(v6, true))
}

fn network_config(inv: &Inventory, node: &Node) -> NetworkConfig {
    let net = &inv.site.networks;
    let mut interfaces = Vec::new();
    for nic in &node.nics {
        let (ipv4, ipv6) = ip_configs(node, &nic.name);
        interfaces.push(Interface {
            name: nic.name.clone(),
            kind: "ethernet",
            state: "up",
            mac_address: Some(mac(&nic.mac)),
            mtu: nic.mtu,
            link_aggregation: None,
            vlan: None,
            ipv4,
            ipv6,
        });
    }
    for bond in &node.bonds {
        let (ipv4, ipv6) = ip_configs(node, &bond.name);
        interfaces.push(Interface {
            name: bond.name.clone(),
            kind: "bond",
            state: "up",
            mac_address: None,
            mtu: bond.mtu,
            link_aggregation: Some(LinkAggregation {
                mode: bond.mode.clone(),
                port: bond.members.clone(),
            }),
            vlan: None,
            ipv4,
            ipv6,
        });
    }
    for v in &node.vlans {
        let site_vlan = net.vlans.iter().find(|x| x.name == v.network);
        let id = site_vlan.map(|x| x.id).unwrap_or(0);
        let name = vlan_name(v, Some(id));
        let (ipv4, ipv6) = ip_configs(node, &name);
        interfaces.push(Interface {
            name,
            kind: "vlan",
            state: "up",
            mac_address: None,
            mtu: site_vlan.and_then(|x| x.mtu),
            link_aggregation: None,
            vlan: Some(Vlan {
                base_iface: v.base.clone(),
                id,
            }),
            ipv4,
            ipv6,
        });
    }
    NetworkConfig {
        interfaces,
        dns_resolver: DnsResolver {
            config: DnsConfig {
                server: net.dns.clone(),
                search: net.dns_search.clone(),
            },
        },
        routes: Routes {
            config: default_route(inv, node).into_iter().collect(),
        },
    }
}

/// The node's machine-network address and the interface carrying it.
pub(crate) fn machine_address(inv: &Inventory, node: &Node) -> Option<(IpAddr, String)> {
    let machine: Vec<Cidr> = inv
        .site
        .networks
        .machine
        .iter()
        .filter_map(|m| m.parse().ok())
        .collect();
    node.addresses.iter().find_map(|a| {
        let (ip, _) = parse_prefixed(&a.ip).ok()?;
        machine
            .iter()
            .any(|c| c.contains(ip))
            .then(|| (ip, a.interface.clone()))
    })
}

fn default_route(inv: &Inventory, node: &Node) -> Option<Route> {
    let gateway: IpAddr = inv.site.networks.gateway.parse().ok()?;
    let (_, interface) = machine_address(inv, node)?;
    Some(Route {
        destination: if gateway.is_ipv4() {
            "0.0.0.0/0"
        } else {
            "::/0"
        }
        .to_string(),
        next_hop_address: gateway.to_string(),
        next_hop_interface: interface,
        table_id: MAIN_TABLE,
    })
}
