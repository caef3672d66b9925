//! The site's services as the nodes will use them: the cluster's names on the site's DNS servers
//! (`api`, `api-int` and `*.apps` to the VIPs, as the agent installer requires; each node's
//! hostname to its address), each NTP server (SNTP), the site registry (its certificate with
//! exactly the site CA, the release read by digest with the pull secret), and the ISO server's
//! address (this machine's, and one the BMCs can reach).

use super::bmc::BmcTarget;
use super::dns::{self, RecordType};
#[cfg(test)]
use super::Status;
use super::{ntp, Area, Check};
use crate::inventory::Inventory;
use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// The DNS, NTP, registry and ISO-server checks, run together.
pub async fn checks(inv: &Inventory, targets: &[BmcTarget], udp: Duration) -> Vec<Check> {
    let (dns, ntp, registry) = tokio::join!(
        dns_checks(inv, udp),
        ntp_checks(inv, udp),
        registry_checks(inv)
    );
    let mut all = dns;
    all.extend(ntp);
    all.extend(registry);
    all.push(iso_server(inv, targets).await);
    all
}

/// `<name>.<baseDomain>`.
pub fn cluster_domain(inv: &Inventory) -> String {
    let c = &inv.site.cluster;
    format!("{}.{}", c.name, c.base_domain)
}

/// The site's DNS servers (port 53), or the fix when one is not an address.
fn dns_servers(inv: &Inventory) -> Result<Vec<SocketAddr>, String> {
    let servers = &inv.site.networks.dns;
    if servers.is_empty() {
        return Err("site.yaml networks.dns lists no DNS server".into());
    }
    servers
        .iter()
        .map(|s| {
            s.parse::<IpAddr>()
                .map(|ip| SocketAddr::new(ip, 53))
                .map_err(|_| format!("site.yaml networks.dns: {s} is not an IP address"))
        })
        .collect()
}

/// A name to ask, the addresses that may answer it, and the fix when they do not.
struct Wanted {
    subject: String,
    names: Vec<String>,
    want: BTreeSet<IpAddr>,
    fix: String,
}

fn wanted_names(inv: &Inventory) -> Vec<Wanted> {
    let domain = cluster_domain(inv);
    let ips =
        |v: &[String]| -> BTreeSet<IpAddr> { v.iter().filter_map(|a| a.parse().ok()).collect() };
    let api = ips(&inv.site.cluster.api_vips);
    let ingress = ips(&inv.site.cluster.ingress_vips);
    let record = |name: &str, vips: &BTreeSet<IpAddr>, what: &str| {
        let list: Vec<String> = vips.iter().map(IpAddr::to_string).collect();
        format!(
            "add an {} record {name} -> {} on every server of networks.dns ({what})",
            if vips.iter().any(IpAddr::is_ipv6) {
                "A/AAAA"
            } else {
                "A"
            },
            list.join(", ")
        )
    };
    let mut out = vec![
        Wanted {
            subject: format!("api.{domain}"),
            names: vec![format!("api.{domain}")],
            fix: record(&format!("api.{domain}"), &api, "cluster.apiVIPs"),
            want: api.clone(),
        },
        Wanted {
            subject: format!("api-int.{domain}"),
            names: vec![format!("api-int.{domain}")],
            fix: record(&format!("api-int.{domain}"), &api, "cluster.apiVIPs"),
            want: api,
        },
        Wanted {
            subject: format!("*.apps.{domain}"),
            // A route every cluster has, and a name no one would add by hand: the wildcard.
            names: vec![
                format!("console-openshift-console.apps.{domain}"),
                format!(
                    "preflight-{:06x}.apps.{domain}",
                    std::process::id() & 0xff_ffff
                ),
            ],
            fix: record(
                &format!("*.apps.{domain}"),
                &ingress,
                "cluster.ingressVIPs; a wildcard",
            ),
            want: ingress,
        },
    ];
    for (i, node) in inv.nodes.nodes.iter().enumerate() {
        let name = match node.hostname.contains('.') {
            true => node.hostname.clone(),
            false => format!("{}.{domain}", node.hostname),
        };
        let want: BTreeSet<IpAddr> = node.ips().into_iter().collect();
        let list: Vec<String> = want.iter().map(IpAddr::to_string).collect();
        out.push(Wanted {
            fix: format!(
                "add an A record {name} -> {} (nodes[{i}].addresses) on every server of networks.dns",
                list.join(" or ")
            ),
            subject: name.clone(),
            names: vec![name],
            want,
        });
    }
    out
}

/// One row per name: every server gives for it only addresses it should have.
async fn dns_checks(inv: &Inventory, udp: Duration) -> Vec<Check> {
    let servers = match dns_servers(inv) {
        Ok(s) => s,
        Err(e) => {
            return vec![Check::fail(
                Area::Dns,
                "networks.dns",
                e,
                "list the site's DNS servers (IP addresses) in site.yaml networks.dns".into(),
            )]
        }
    };
    let limits = dns::Limits {
        timeout: udp,
        tries: 2,
    };
    let wanted = wanted_names(inv);
    let servers = &servers;
    let rows = wanted.iter().map(|w| async move {
        let kind = match w.want.iter().next() {
            Some(ip) => RecordType::of(*ip),
            None => RecordType::A,
        };
        let mut seen = Vec::new();
        let mut problems = Vec::new();
        for server in servers {
            for name in &w.names {
                match dns::query(*server, name, kind, limits).await {
                    Ok(got) if got.iter().all(|ip| w.want.contains(ip)) => {
                        seen.extend(got.iter().map(|ip| format!("{ip} from {}", server.ip())))
                    }
                    Ok(got) => {
                        let got: Vec<String> = got.iter().map(IpAddr::to_string).collect();
                        problems.push(format!(
                            "{} gives {name} -> {}",
                            server.ip(),
                            got.join(", ")
                        ))
                    }
                    Err(e) => problems.push(e.to_string()),
                }
            }
        }
        if problems.is_empty() {
            seen.dedup();
            Check::ok(Area::Dns, &w.subject, seen.join(", "))
        } else {
            Check::fail(Area::Dns, &w.subject, problems.join("; "), w.fix.clone())
        }
    });
    futures_util::future::join_all(rows).await
}

/// One row per NTP server; a name is resolved on the site's DNS servers, as the nodes will.
async fn ntp_checks(inv: &Inventory, udp: Duration) -> Vec<Check> {
    let servers = &inv.site.networks.ntp;
    if servers.is_empty() {
        return vec![Check::warn(
            Area::Ntp,
            "networks.ntp",
            "no NTP server listed: the nodes keep RHCOS's default public pools, unreachable from an air-gapped site".into(),
            "list the site's NTP servers in site.yaml networks.ntp".into(),
        )];
    }
    let rows = servers.iter().map(|s| async move {
        let fix = format!(
            "make {s} answer NTP (UDP 123) to the machine network, or correct site.yaml networks.ntp"
        );
        let ip = match s.parse::<IpAddr>() {
            Ok(ip) => ip,
            Err(_) => match resolve(inv, s, udp).await {
                Ok(ip) => ip,
                Err(e) => return Check::fail(Area::Ntp, s, format!("resolving {s}: {e}"), fix),
            },
        };
        match ntp::query(SocketAddr::new(ip, 123), udp, 2).await {
            Ok(r) => Check::ok(
                Area::Ntp,
                s,
                format!(
                    "stratum {}, this machine's offset {:+.3} s, delay {:.1} ms",
                    r.stratum,
                    r.offset,
                    r.delay * 1000.0
                ),
            ),
            Err(e) => Check::fail(Area::Ntp, s, e.to_string(), fix),
        }
    });
    futures_util::future::join_all(rows).await
}

/// `name`'s first address on the first site DNS server that gives one.
async fn resolve(inv: &Inventory, name: &str, udp: Duration) -> Result<IpAddr, String> {
    let mut last = String::from("no DNS server in networks.dns");
    for server in dns_servers(inv)? {
        let limits = dns::Limits {
            timeout: udp,
            tries: 2,
        };
        match dns::query(server, name, RecordType::A, limits).await {
            Ok(ips) => return Ok(ips[0]),
            Err(e) => last = e.to_string(),
        }
    }
    Err(last)
}

/// The site registry: its certificate verified with exactly `references.registryCA`, and the
/// release manifest read by digest with the pull secret's credentials.
async fn registry_checks(inv: &Inventory) -> Vec<Check> {
    let refs = &inv.site.references;
    if refs.mirror_record.is_none() {
        return vec![Check::skip(
            Area::Registry,
            "references.mirrorRecord",
            "no mirror record: the release is pulled as cluster.release.image names it".into(),
        )];
    }
    let release = match crate::install::stage::site_release(inv) {
        Ok(r) => r,
        Err(e) => {
            return vec![Check::fail(
            Area::Registry,
            "references.mirrorRecord",
            format!("{e:#}"),
            "point references.mirrorRecord at the record `bootstrap mirror` wrote for this release"
                .into(),
        )]
        }
    };
    let host = release.registry.clone();
    let mut rows = Vec::new();
    match &refs.registry_ca {
        Some(ca) => {
            let path = inv.resolve(&ca.file);
            rows.push(match crate::oci::registry::check_bundle(&host, &path).await {
                Ok(()) => Check::ok(Area::Registry, &host, format!("TLS verifies with references.registryCA {}", ca.file)),
                Err(e) => Check::fail(
                    Area::Registry,
                    &host,
                    format!("{e:#}"),
                    format!("references.registryCA ({}) must be the CA that signed {host}'s certificate: put that CA's PEM there (the nodes trust exactly it)", ca.file),
                ),
            });
        }
        None => rows.push(Check::ok(
            Area::Registry,
            &host,
            "no references.registryCA: the registry's certificate must verify with the system roots".into(),
        )),
    }
    rows.push(read_release(inv, &release).await);
    rows
}

async fn read_release(inv: &Inventory, release: &crate::oci::reference::ImageRef) -> Check {
    let digest = release
        .digest
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_default();
    let subject = format!("{}/{}@{digest}", release.registry, release.repository);
    let read = async {
        let registries = crate::install::stage::site_registries(inv)?;
        let client = registries.client(&release.registry)?;
        let m = client.get_manifest(&release.repository, &digest).await?;
        anyhow::Ok(m)
    };
    match read.await {
        Ok(m) => Check::ok(
            Area::Registry,
            &subject,
            format!("the pull secret reads the release by digest ({} bytes)", m.bytes.len()),
        ),
        Err(e) => Check::fail(
            Area::Registry,
            &subject,
            format!("{e:#}"),
            format!(
                "give references.pullSecret credentials for {} that can pull {}, and mirror the release there (bootstrap mirror)",
                release.registry, release.repository
            ),
        ),
    }
}

/// The ISO server: `boot.isoServer.listen` bound here (then let go) and reachable by every
/// BMC, or `boot.isoURL` answering a HEAD.
pub async fn iso_server(inv: &Inventory, targets: &[BmcTarget]) -> Check {
    let boot = &inv.site.boot;
    if let Some(url) = &boot.iso_url {
        return iso_url(url).await;
    }
    let listen = boot
        .iso_server
        .as_ref()
        .map_or("0.0.0.0:0", |s| s.listen.as_str());
    let subject = format!("boot.isoServer {listen}");
    let addr: SocketAddr = match listen.parse() {
        Ok(a) => a,
        Err(_) => return Check::fail(
            Area::IsoServer,
            &subject,
            format!("{listen} is not ADDRESS:PORT"),
            "write boot.isoServer.listen as this machine's address in the BMC network and a port"
                .into(),
        ),
    };
    let bound = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l.local_addr().map(|a| a.to_string()).unwrap_or_default(),
        Err(e) => {
            return Check::fail(
                Area::IsoServer,
                &subject,
                format!("binding {addr}: {e}"),
                "boot.isoServer.listen must be an address of this machine and a free port".into(),
            )
        }
    };
    let advertised = boot.iso_server.as_ref().and_then(|s| s.advertise.clone());
    let told = advertised.clone().unwrap_or_else(|| addr.ip().to_string());
    let mut check = iso_reach(&told, targets, &subject);
    check.detail = format!("binds here ({bound}); {}", check.detail);
    check
}

/// Whether the BMCs can reach an ISO server they are told is at `host`: not a wildcard, not
/// loopback unless every BMC is, and (when the BMC is an address) on the address this machine
/// itself uses towards the BMC.
pub fn iso_reach<'a>(
    host: &str,
    targets: impl IntoIterator<Item = &'a BmcTarget>,
    subject: &str,
) -> Check {
    let host = host.trim_matches(['[', ']']);
    let Ok(ip) = host.parse::<IpAddr>() else {
        return Check::ok(
            Area::IsoServer,
            subject,
            format!("the BMCs are told {host}: a name, which the BMCs must resolve"),
        );
    };
    let fix =
        "set boot.isoServer.listen (or .advertise) to this machine's address in the BMC network"
            .to_string();
    if ip.is_unspecified() {
        return Check::fail(
            Area::IsoServer,
            subject,
            format!("the BMCs would be told {ip}, which is no address"),
            fix,
        );
    }
    let (mut unreachable, mut elsewhere) = (Vec::new(), Vec::new());
    for t in targets {
        let Some(bmc) = bmc_ip(&t.endpoint.address) else {
            continue;
        };
        if ip.is_loopback() && !bmc.is_loopback() {
            unreachable.push(format!("{}'s BMC {bmc} cannot reach loopback {ip}", t.node));
        } else if let Some(src) = source_towards(bmc) {
            if src != ip && !bmc.is_loopback() {
                elsewhere.push(format!(
                    "this machine reaches {}'s BMC {bmc} from {src}, not from {ip}",
                    t.node
                ));
            }
        }
    }
    if !unreachable.is_empty() {
        unreachable.extend(elsewhere);
        return Check::fail(Area::IsoServer, subject, unreachable.join("; "), fix);
    }
    if !elsewhere.is_empty() {
        // The BMC network may still route to it; the boot stage goes on, warned.
        return Check::warn(
            Area::IsoServer,
            subject,
            elsewhere.join("; "),
            format!("make sure the BMC network routes to {ip}, or {fix}"),
        );
    }
    Check::ok(Area::IsoServer, subject, format!("the BMCs reach {ip}"))
}

fn bmc_ip(address: &str) -> Option<IpAddr> {
    let url = reqwest::Url::parse(address).ok()?;
    url.host_str()?.trim_matches(['[', ']']).parse().ok()
}

/// The address this machine sends from towards `ip` (the route's source; nothing is sent).
fn source_towards(ip: IpAddr) -> Option<IpAddr> {
    let bind: SocketAddr = match ip {
        IpAddr::V4(_) => "0.0.0.0:0".parse().ok()?,
        IpAddr::V6(_) => "[::]:0".parse().ok()?,
    };
    let s = std::net::UdpSocket::bind(bind).ok()?;
    s.connect(SocketAddr::new(ip, 9)).ok()?;
    Some(s.local_addr().ok()?.ip())
}

async fn iso_url(url: &str) -> Check {
    let shown = crate::secret::redact_url(url);
    let subject = format!("boot.isoURL {shown}");
    let fix = "make boot.isoURL answer HEAD (and Range requests) from this machine and the BMC network, or drop it to let bootstrap serve the ISO".to_string();
    let client = match reqwest::Client::builder()
        .timeout(Duration::from_secs(15))
        .build()
    {
        Ok(c) => c,
        Err(e) => return Check::fail(Area::IsoServer, &subject, e.to_string(), fix),
    };
    match client.head(url).send().await {
        Ok(r) if r.status().is_success() => Check::ok(
            Area::IsoServer,
            &subject,
            format!(
                "answers HEAD {}; the boot stage checks its bytes",
                r.status()
            ),
        ),
        Ok(r) => Check::fail(
            Area::IsoServer,
            &subject,
            format!("answers HEAD {}", r.status()),
            fix,
        ),
        Err(e) => Check::fail(
            Area::IsoServer,
            &subject,
            crate::secret::redact_url(&e.to_string()),
            fix,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redfish::{Endpoint, NodeIdentity, Trust};

    fn target(node: &str, address: &str) -> BmcTarget {
        BmcTarget {
            node: node.into(),
            index: 0,
            endpoint: Endpoint {
                address: address.into(),
                credentials: None,
                trust: Trust::System,
            },
            identity: NodeIdentity::default(),
            trust: "system roots".into(),
            credentials_ref: None,
            vendor: None,
        }
    }

    /// A loopback or wildcard ISO address is refused for BMCs elsewhere, named with the node;
    /// loopback BMCs (the lab's emulators) reach a loopback ISO server.
    #[test]
    fn the_iso_address_must_be_one_the_bmcs_reach() {
        let lab = [target("master-0", "https://127.0.0.1:8001")];
        assert_eq!(iso_reach("127.0.0.1", &lab, "s").status, Status::Ok);
        let site = [target("gpu-3", "https://192.0.2.17/redfish/v1/Systems/1")];
        let c = iso_reach("127.0.0.1", &site, "s");
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert!(c.detail.contains("gpu-3's BMC 192.0.2.17"), "{c:?}");
        assert!(c.fix.unwrap().contains("boot.isoServer.listen"));
        assert_eq!(iso_reach("0.0.0.0", &lab, "s").status, Status::Fail);
        assert_eq!(iso_reach("iso.example.com", &site, "s").status, Status::Ok);
    }

    /// The agent installer's names, under `<name>.<baseDomain>`, each with the VIPs it must
    /// resolve to and a fix naming the record; a node's short hostname goes under the domain.
    #[test]
    fn the_names_asked_are_the_installers_and_the_nodes() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory/lab");
        let inv = crate::inventory::load(&dir).unwrap();
        let w = wanted_names(&inv);
        let subjects: Vec<&str> = w.iter().map(|w| w.subject.as_str()).collect();
        assert_eq!(
            subjects,
            [
                "api.lab.rehearsal.example.com",
                "api-int.lab.rehearsal.example.com",
                "*.apps.lab.rehearsal.example.com",
                "master-0.lab.rehearsal.example.com",
                "master-1.lab.rehearsal.example.com",
                "master-2.lab.rehearsal.example.com",
            ]
        );
        assert!(w[2]
            .names
            .iter()
            .all(|n| n.ends_with(".apps.lab.rehearsal.example.com")));
        assert!(w[1]
            .fix
            .contains("api-int.lab.rehearsal.example.com -> 192.168.111.5"));
        assert!(w[3]
            .want
            .contains(&"192.168.111.20".parse::<IpAddr>().unwrap()));
    }
}
