//! The agent installer's two files as serde types, in the order and with the names
//! openshift/installer reads (`pkg/types/installconfig.go`, `pkg/types/agent/agent_config_type.go`,
//! NMState for `networkConfig`), and their construction from a valid inventory. Everything that
//! is a set is sorted, so the same inventory gives the same bytes.

use crate::inventory::model::{Node, Role};
use crate::inventory::validate::vlan_name;
use crate::inventory::Inventory;
use crate::netaddr::{normalize_mac, parse_prefixed, Cidr};
use crate::secret::Secret;
use serde::{Serialize, Serializer};
use std::net::IpAddr;

/// install-config.yaml.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InstallConfig {
    pub api_version: &'static str,
    pub base_domain: String,
    pub metadata: Metadata,
    pub compute: Vec<MachinePool>,
    pub control_plane: MachinePool,
    pub networking: Networking,
    pub platform: Platform,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_trust_bundle: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_trust_bundle_policy: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub image_digest_sources: Vec<DigestSource>,
    pub pull_secret: Exposed,
    pub ssh_key: String,
}

/// A [`Secret`] that is written into the file (and only there).
pub(crate) struct Exposed(pub Secret);

impl Serialize for Exposed {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0.expose())
    }
}

#[derive(Serialize)]
pub(crate) struct Metadata {
    pub name: String,
}

#[derive(Serialize)]
pub(crate) struct MachinePool {
    pub name: &'static str,
    pub replicas: usize,
    pub architecture: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hyperthreading: Option<&'static str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Networking {
    pub network_type: &'static str,
    pub machine_network: Vec<CidrEntry>,
    pub cluster_network: Vec<ClusterNetworkEntry>,
    pub service_network: Vec<String>,
}

#[derive(Serialize)]
pub(crate) struct CidrEntry {
    pub cidr: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ClusterNetworkEntry {
    pub cidr: String,
    pub host_prefix: u8,
}

#[derive(Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Platform {
    Baremetal {
        #[serde(rename = "apiVIPs")]
        api_vips: Vec<String>,
        #[serde(rename = "ingressVIPs")]
        ingress_vips: Vec<String>,
    },
    None {},
}

/// `imageDigestSources[]` (and the mirror snippet read back from `ClusterResources`).
#[derive(Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DigestSource {
    pub source: String,
    pub mirrors: Vec<String>,
}

/// agent-config.yaml.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AgentConfig {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub metadata: Metadata,
    #[serde(rename = "rendezvousIP")]
    pub rendezvous_ip: String,
    #[serde(rename = "additionalNTPSources", skip_serializing_if = "Vec::is_empty")]
    pub additional_ntp_sources: Vec<String>,
    pub hosts: Vec<Host>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Host {
    pub hostname: String,
    pub role: &'static str,
    pub interfaces: Vec<HostInterface>,
    pub root_device_hints: RootDeviceHints,
    pub network_config: NetworkConfig,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HostInterface {
    pub name: String,
    pub mac_address: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RootDeviceHints {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hctl: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vendor: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub serial_number: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_size_gigabytes: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wwn: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rotational: Option<bool>,
}

/// NMState.
#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct NetworkConfig {
    pub interfaces: Vec<Interface>,
    pub dns_resolver: DnsResolver,
    pub routes: Routes,
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct Interface {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mac_address: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link_aggregation: Option<LinkAggregation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vlan: Option<Vlan>,
    pub ipv4: IpConfig,
    pub ipv6: IpConfig,
}

#[derive(Serialize)]
pub(crate) struct LinkAggregation {
    pub mode: String,
    pub port: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct Vlan {
    pub base_iface: String,
    pub id: u16,
}

#[derive(Serialize)]
pub(crate) struct IpConfig {
    pub enabled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dhcp: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub autoconf: Option<bool>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub address: Vec<IpAddress>,
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct IpAddress {
    pub ip: String,
    pub prefix_length: u8,
}

#[derive(Serialize)]
pub(crate) struct DnsResolver {
    pub config: DnsConfig,
}

#[derive(Serialize)]
pub(crate) struct DnsConfig {
    pub server: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub search: Vec<String>,
}

#[derive(Serialize)]
pub(crate) struct Routes {
    pub config: Vec<Route>,
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct Route {
    pub destination: String,
    pub next_hop_address: String,
    pub next_hop_interface: String,
    pub table_id: u32,
}

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
    image_digest_sources: Vec<DigestSource>,
) -> InstallConfig {
    let c = &inv.site.cluster;
    let n = &inv.site.networks;
    let (masters, workers) = counts(inv);
    let platform = if masters == 1 && workers == 0 {
        Platform::None {}
    } else {
        Platform::Baremetal {
            api_vips: c.api_vips.clone(),
            ingress_vips: c.ingress_vips.clone(),
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
        api_version: "v1",
        base_domain: c.base_domain.clone(),
        metadata: Metadata {
            name: c.name.clone(),
        },
        compute: vec![MachinePool {
            name: "worker",
            replicas: workers,
            architecture: "amd64",
            hyperthreading: None,
        }],
        control_plane: MachinePool {
            name: "master",
            replicas: masters,
            architecture: "amd64",
            hyperthreading: Some("Enabled"),
        },
        networking: Networking {
            network_type: "OVNKubernetes",
            machine_network: n
                .machine
                .iter()
                .map(|m| CidrEntry { cidr: cidr(m) })
                .collect(),
            cluster_network: n
                .cluster
                .iter()
                .map(|x| ClusterNetworkEntry {
                    cidr: cidr(&x.cidr),
                    host_prefix: x.host_prefix,
                })
                .collect(),
            service_network: n.service.iter().map(cidr).collect(),
        },
        platform,
        additional_trust_bundle: trust_bundle,
        additional_trust_bundle_policy: policy,
        image_digest_sources,
        pull_secret: Exposed(pull_secret),
        ssh_key,
    }
}

/// agent-config.yaml's content.
pub(crate) fn agent_config(inv: &Inventory) -> AgentConfig {
    let mut nodes: Vec<&Node> = inv.nodes.nodes.iter().collect();
    nodes.sort_by(|a, b| (a.role, &a.hostname).cmp(&(b.role, &b.hostname)));
    AgentConfig {
        api_version: "v1beta1",
        kind: "AgentConfig",
        metadata: Metadata {
            name: inv.site.cluster.name.clone(),
        },
        rendezvous_ip: inv.site.cluster.rendezvous_ip.clone(),
        additional_ntp_sources: inv.site.networks.ntp.clone(),
        hosts: nodes.into_iter().map(|n| host(inv, n)).collect(),
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

fn host(inv: &Inventory, node: &Node) -> Host {
    let r = &node.root_device;
    Host {
        hostname: node.hostname.clone(),
        role: role_name(node.role),
        interfaces: node
            .nics
            .iter()
            .map(|n| HostInterface {
                name: n.name.clone(),
                mac_address: mac(&n.mac),
            })
            .collect(),
        root_device_hints: RootDeviceHints {
            device_name: r.device_name.clone(),
            hctl: r.hctl.clone(),
            model: r.model.clone(),
            vendor: r.vendor.clone(),
            serial_number: r.serial_number.clone(),
            min_size_gigabytes: r.min_size_gigabytes,
            wwn: r.wwn.clone(),
            rotational: r.rotational,
        },
        network_config: network_config(inv, node),
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
