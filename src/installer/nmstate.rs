//! A host's NMState `networkConfig`, both ways. Written: the typed [`NetworkConfig`] render
//! builds (interfaces, DNS, the default route). Read: the document stays a generic value, as the
//! installer passes it through to nmstate, and [`read`] takes what the rules need: the
//! interfaces it defines, its static addresses and the interface names it refers to (bond ports,
//! VLAN base interfaces, bridge ports, route next hops), each with its field path.

use serde::Serialize;
use serde_json::Value;
use std::net::IpAddr;

/// A host's NMState as render writes it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct NetworkConfig {
    /// NICs, bonds and VLAN interfaces.
    pub interfaces: Vec<Interface>,
    /// DNS servers and search domains.
    pub dns_resolver: DnsResolver,
    /// The default route.
    pub routes: Routes,
}

/// `interfaces[]`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Interface {
    /// The kernel name.
    pub name: String,
    /// `ethernet`, `bond` or `vlan`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// `up`.
    pub state: &'static str,
    /// The NIC's MAC (ethernet only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mac_address: Option<String>,
    /// MTU, when not the default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// A bond's mode and ports.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link_aggregation: Option<LinkAggregation>,
    /// A VLAN's base interface and id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vlan: Option<Vlan>,
    /// IPv4 settings.
    pub ipv4: IpConfig,
    /// IPv6 settings.
    pub ipv6: IpConfig,
}

/// `link-aggregation`.
#[derive(Clone, Debug, Serialize)]
pub struct LinkAggregation {
    /// `802.3ad`, `active-backup`, ...
    pub mode: String,
    /// Member NICs.
    pub port: Vec<String>,
}

/// `vlan`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Vlan {
    /// The NIC or bond it sits on.
    pub base_iface: String,
    /// 802.1Q id.
    pub id: u16,
}

/// `ipv4` / `ipv6`.
#[derive(Clone, Debug, Serialize)]
pub struct IpConfig {
    /// False when the interface has no address of this family.
    pub enabled: bool,
    /// False for static addresses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dhcp: Option<bool>,
    /// False for static IPv6 addresses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub autoconf: Option<bool>,
    /// Static addresses.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub address: Vec<IpAddress>,
}

/// `address[]`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct IpAddress {
    /// The address.
    pub ip: String,
    /// Its prefix length.
    pub prefix_length: u8,
}

/// `dns-resolver`.
#[derive(Clone, Debug, Serialize)]
pub struct DnsResolver {
    /// Its configuration.
    pub config: DnsConfig,
}

/// `dns-resolver.config`.
#[derive(Clone, Debug, Serialize)]
pub struct DnsConfig {
    /// DNS servers.
    pub server: Vec<String>,
    /// Search domains.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub search: Vec<String>,
}

/// `routes`.
#[derive(Clone, Debug, Serialize)]
pub struct Routes {
    /// The routes.
    pub config: Vec<Route>,
}

/// `routes.config[]`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Route {
    /// `0.0.0.0/0` or `::/0`.
    pub destination: String,
    /// The gateway.
    pub next_hop_address: String,
    /// The interface the gateway is reached on.
    pub next_hop_interface: String,
    /// 254, the main table.
    pub table_id: u32,
}

/// One host's NMState, as the rules see it.
#[derive(Debug, Default)]
pub struct HostNetwork {
    /// Names of the interfaces the NMState defines.
    pub names: Vec<String>,
    /// Static addresses with the path of their `ip` field.
    pub addresses: Vec<(IpAddr, String)>,
    /// Interface names referred to: (name, path of the reference, what refers).
    pub references: Vec<(String, String, &'static str)>,
    /// Values that are not what NMState expects: (path, message).
    pub problems: Vec<(String, String)>,
}

/// True when `path` lies in a host's `networkConfig` and NMState reads a string there
/// (interface names and types, addresses, route hops, DNS servers and search domains): a plain
/// `no` or `0123` there reaches nmstate as a boolean or number. Keys NMState reads as booleans
/// or numbers (`enabled`, `dhcp`, `mtu`, `id`, `prefix-length`) are left alone.
pub fn expects_string(path: &str) -> bool {
    let Some((_, inner)) = path.split_once(".networkConfig.") else {
        return false;
    };
    let last = inner.rsplit('.').next().unwrap_or(inner);
    let key = last.split('[').next().unwrap_or(last);
    let item = last.ends_with(']');
    match key {
        "port" | "slaves" | "server" | "search" => item,
        "name" | "type" | "state" | "mac-address" | "base-iface" | "ip" | "destination"
        | "next-hop-address" | "next-hop-interface" | "profile-name" => !item,
        _ => false,
    }
}

/// Walks `config` (the value of `base`, e.g. `hosts[0].networkConfig`).
pub fn read(config: &Value, base: &str) -> HostNetwork {
    let mut net = HostNetwork::default();
    let Some(interfaces) = config.get("interfaces").and_then(Value::as_array) else {
        return net;
    };
    for (j, iface) in interfaces.iter().enumerate() {
        let path = format!("{base}.interfaces[{j}]");
        if let Some(name) = iface.get("name").and_then(Value::as_str) {
            net.names.push(name.to_string());
        }
        for family in ["ipv4", "ipv6"] {
            addresses(iface, family, &path, &mut net);
        }
        if let Some(lag) = iface.get("link-aggregation") {
            for key in ["port", "slaves"] {
                names_in(
                    lag.get(key),
                    &format!("{path}.link-aggregation.{key}"),
                    "bond port",
                    &mut net,
                );
            }
        }
        if let Some(base_iface) = iface
            .get("vlan")
            .and_then(|v| v.get("base-iface"))
            .and_then(Value::as_str)
        {
            net.references.push((
                base_iface.to_string(),
                format!("{path}.vlan.base-iface"),
                "VLAN base-iface",
            ));
        }
        if let Some(ports) = iface
            .get("bridge")
            .and_then(|b| b.get("port"))
            .and_then(Value::as_array)
        {
            for (k, port) in ports.iter().enumerate() {
                if let Some(name) = port.get("name").and_then(Value::as_str) {
                    net.references.push((
                        name.to_string(),
                        format!("{path}.bridge.port[{k}].name"),
                        "bridge port",
                    ));
                }
            }
        }
    }
    if let Some(routes) = config
        .get("routes")
        .and_then(|r| r.get("config"))
        .and_then(Value::as_array)
    {
        for (k, route) in routes.iter().enumerate() {
            if let Some(name) = route.get("next-hop-interface").and_then(Value::as_str) {
                net.references.push((
                    name.to_string(),
                    format!("{base}.routes.config[{k}].next-hop-interface"),
                    "route next-hop-interface",
                ));
            }
        }
    }
    net
}

/// The static addresses of one family, unless that family is disabled.
fn addresses(iface: &Value, family: &str, path: &str, net: &mut HostNetwork) {
    let Some(settings) = iface.get(family) else {
        return;
    };
    if settings.get("enabled") == Some(&Value::Bool(false)) {
        return;
    }
    let Some(list) = settings.get("address").and_then(Value::as_array) else {
        return;
    };
    for (k, entry) in list.iter().enumerate() {
        let ip_path = format!("{path}.{family}.address[{k}].ip");
        match entry.get("ip").and_then(Value::as_str) {
            Some(text) => match text.parse::<IpAddr>() {
                Ok(ip) if ip.is_ipv4() == (family == "ipv4") => net.addresses.push((ip, ip_path)),
                Ok(_) => net.problems.push((
                    ip_path,
                    format!("{} is not an {family} address; put it under the other family", crate::yaml::quote(text)),
                )),
                Err(_) => net.problems.push((
                    ip_path,
                    format!(
                        "{} is not an IP address; write the address alone (the prefix goes in prefix-length)",
                        crate::yaml::quote(text)
                    ),
                )),
            },
            None if entry.get("ip").is_some() => net.problems.push((
                ip_path,
                "is not an IP address; write the address as text, e.g. 10.20.0.11".into(),
            )),
            None => net.problems.push((
                format!("{path}.{family}.address[{k}]"),
                "has no ip; write `ip: ADDRESS` and `prefix-length: N`".into(),
            )),
        }
    }
}

/// Interface names in a list of strings (bond ports).
fn names_in(list: Option<&Value>, path: &str, what: &'static str, net: &mut HostNetwork) {
    let Some(items) = list.and_then(Value::as_array) else {
        return;
    };
    for (k, item) in items.iter().enumerate() {
        if let Some(name) = item.as_str() {
            net.references
                .push((name.to_string(), format!("{path}[{k}]"), what));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_addresses_and_references() {
        let v: Value = serde_json::json!({
            "interfaces": [
                {"name": "bond0", "type": "bond",
                 "link-aggregation": {"mode": "active-backup", "port": ["eno1", "eno2"]},
                 "ipv4": {"enabled": true, "address": [{"ip": "10.0.0.5", "prefix-length": 24}]}},
                {"name": "bond0.10", "type": "vlan", "vlan": {"base-iface": "bond0", "id": 10},
                 "ipv4": {"enabled": false, "address": [{"ip": "10.0.1.5"}]}}
            ],
            "routes": {"config": [{"destination": "0.0.0.0/0", "next-hop-interface": "bond0"}]}
        });
        let net = read(&v, "hosts[0].networkConfig");
        assert_eq!(net.names, ["bond0", "bond0.10"]);
        assert_eq!(net.addresses.len(), 1);
        assert_eq!(
            net.addresses[0].1,
            "hosts[0].networkConfig.interfaces[0].ipv4.address[0].ip"
        );
        let refs: Vec<&str> = net.references.iter().map(|r| r.0.as_str()).collect();
        assert_eq!(refs, ["eno1", "eno2", "bond0", "bond0"]);
    }
}
