//! The lab site's DNS and NTP servers: real daemons from Debian on the lab bridge's gateway
//! address, as a site's infrastructure serves its machine network, so that `bootstrap
//! preflight` (and anything else that asks) is answered by what sites run. dnsmasq
//! (`dnsmasq-base`) answers what the agent installer requires of a site's DNS (its
//! documentation's "DNS requirements": `api` and `api-int` to the API VIP, `*.apps` to the
//! ingress VIP) and each node's hostname under the cluster domain, from the inventory, and
//! nothing else (no upstream, no /etc/hosts, no DHCP); chronyd (`chrony`) serves NTP from its
//! local clock (`local stratum 10`, as an isolated site's time server does) to the machine
//! network, without adjusting this machine's clock (`-x`). Each has its own configuration, pid
//! file and log under `STATE/dns` and `STATE/ntp`; no system file is read or touched. Both run
//! only when the inventory names the gateway in `networks.dns` / `networks.ntp`.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bootstrap::inventory::Inventory;
use bootstrap::netaddr::parse_prefixed;
use bootstrap::preflight::{dns, ntp};

/// Debian's dnsmasq (package `dnsmasq-base`).
pub const DNSMASQ: &str = "/usr/sbin/dnsmasq";
/// Debian's chronyd (package `chrony`).
pub const CHRONYD: &str = "/usr/sbin/chronyd";
/// The DNS records file dnsmasq reads (again on SIGHUP), in its dir.
pub const HOSTS_FILE: &str = "hosts";

/// One daemon of the lab.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Daemon {
    /// The program.
    pub program: PathBuf,
    /// Where it answers (the gateway, port 53 or 123).
    pub listen: SocketAddr,
    /// Its directory: configuration, pid file, log (and dnsmasq's records, chronyd's drift).
    pub dir: PathBuf,
    /// Its configuration file.
    pub config: PathBuf,
    /// Its log.
    pub log: PathBuf,
    /// Its pid, once started.
    pub pid: Option<u32>,
}

/// The daemons for `inv`: DNS when `networks.dns` names the gateway, NTP when `networks.ntp`
/// does.
pub fn plan(state: &Path, inv: &Inventory) -> Result<(Option<Daemon>, Option<Daemon>)> {
    let n = &inv.site.networks;
    let gateway: IpAddr = n.gateway.parse().with_context(|| {
        format!(
            "site.yaml networks.gateway '{}' is not an IP address",
            n.gateway
        )
    })?;
    let names = |list: &[String]| {
        list.iter()
            .any(|s| s.parse::<IpAddr>().ok() == Some(gateway))
    };
    let daemon = |program: &str, port: u16, dir: &str, config: &str, log: &str| {
        let dir = state.join(dir);
        Daemon {
            program: program.into(),
            listen: SocketAddr::new(gateway, port),
            config: dir.join(config),
            log: dir.join(log),
            dir,
            pid: None,
        }
    };
    let dns = names(&n.dns).then(|| daemon(DNSMASQ, 53, "dns", "dnsmasq.conf", "dnsmasq.log"));
    let ntp = names(&n.ntp).then(|| daemon(CHRONYD, 123, "ntp", "chrony.conf", "chronyd.log"));
    if dns.is_none() || ntp.is_none() {
        tracing::info!(
            "networks.dns / networks.ntp do not both name the lab gateway {gateway}: the lab serves only those that do"
        );
    }
    Ok((dns, ntp))
}

/// The cluster domain, `<name>.<baseDomain>`.
fn cluster_domain(inv: &Inventory) -> String {
    let c = &inv.site.cluster;
    format!("{}.{}", c.name, c.base_domain)
}

/// dnsmasq's records, as a hosts file: `api` and `api-int` to each API VIP, each node's
/// hostname (under the cluster domain unless it has dots) to each of its addresses.
pub fn records(inv: &Inventory) -> String {
    let domain = cluster_domain(inv);
    let mut lines = Vec::new();
    for vip in &inv.site.cluster.api_vips {
        lines.push(format!("{vip} api.{domain}"));
        lines.push(format!("{vip} api-int.{domain}"));
    }
    for node in &inv.nodes.nodes {
        let name = match node.hostname.contains('.') {
            true => node.hostname.clone(),
            false => format!("{}.{domain}", node.hostname),
        };
        for a in &node.addresses {
            if let Ok((ip, _)) = parse_prefixed(&a.ip) {
                lines.push(format!("{ip} {name}"));
            }
        }
    }
    lines.join("\n") + "\n"
}

/// dnsmasq's configuration: only the gateway, only the inventory's names (`*.apps` as an
/// `address=` wildcard), the base domain answered locally (NXDOMAIN for the rest).
fn dnsmasq_conf(d: &Daemon, inv: &Inventory) -> String {
    let domain = cluster_domain(inv);
    let mut c = vec![
        "# Written by bootstrap-lab up (lab/src/site/dns_ntp.rs); removed by bootstrap-lab down."
            .to_string(),
        "no-resolv".into(),
        "no-hosts".into(),
        "keep-in-foreground".into(),
        "bind-interfaces".into(),
        format!("listen-address={}", d.listen.ip()),
        format!("port={}", d.listen.port()),
        "user=root".into(),
        format!("pid-file={}", d.dir.join("dnsmasq.pid").display()),
        format!("log-facility={}", d.log.display()),
        "log-queries".into(),
        format!("local=/{}/", inv.site.cluster.base_domain),
        format!("addn-hosts={}", d.dir.join(HOSTS_FILE).display()),
    ];
    for vip in &inv.site.cluster.ingress_vips {
        c.push(format!("address=/apps.{domain}/{vip}"));
    }
    c.join("\n") + "\n"
}

/// chronyd's configuration: its local clock served at stratum 10 to the machine network, on
/// the gateway only, no command port, its files in its dir.
fn chrony_conf(d: &Daemon, inv: &Inventory) -> String {
    let mut c = vec![
        "# Written by bootstrap-lab up (lab/src/site/dns_ntp.rs); removed by bootstrap-lab down."
            .to_string(),
        "local stratum 10".into(),
        format!("bindaddress {}", d.listen.ip()),
        format!("port {}", d.listen.port()),
        "cmdport 0".into(),
        format!("pidfile {}", d.dir.join("chronyd.pid").display()),
        format!("driftfile {}", d.dir.join("drift").display()),
    ];
    for net in &inv.site.networks.machine {
        c.push(format!("allow {net}"));
    }
    c.join("\n") + "\n"
}

/// Writes the daemon's files and starts it in its own process group, its output in its log.
pub fn start(d: &mut Daemon, inv: &Inventory) -> Result<()> {
    use std::os::unix::process::CommandExt as _;
    if !d.program.exists() {
        bail!(
            "{} is missing: the lab serves the site's DNS and NTP with dnsmasq and chronyd (scripts/install-deps.sh installs dnsmasq-base and chrony)",
            d.program.display()
        );
    }
    fs_err::create_dir_all(&d.dir)?;
    let mut cmd = Command::new(&d.program);
    if d.program.ends_with("dnsmasq") {
        bootstrap::fs::write_atomic(&d.dir.join(HOSTS_FILE), records(inv).as_bytes())?;
        bootstrap::fs::write_atomic(&d.config, dnsmasq_conf(d, inv).as_bytes())?;
        cmd.arg(format!("--conf-file={}", d.config.display()));
    } else {
        bootstrap::fs::write_atomic(&d.config, chrony_conf(d, inv).as_bytes())?;
        // -n: foreground; -x: never adjust this machine's clock; -u root: no user switch.
        cmd.args(["-n", "-x", "-u", "root", "-f"]).arg(&d.config);
    }
    let log = fs_err::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&d.log)?;
    let child = cmd
        .stdin(Stdio::null())
        .stdout(log.file().try_clone()?)
        .stderr(log.into_file())
        .process_group(0)
        .spawn()
        .with_context(|| format!("starting {}", d.program.display()))?;
    d.pid = Some(child.id());
    Ok(())
}

/// Waits until each daemon answers a real question (DNS: the API name; NTP: an SNTP
/// exchange), or fails with its log when it exits or does not answer in `timeout`.
pub async fn wait_ready(
    dns: Option<&Daemon>,
    ntp: Option<&Daemon>,
    inv: &Inventory,
    timeout: Duration,
) -> Result<()> {
    let start = Instant::now();
    let api = format!("api.{}", cluster_domain(inv));
    let short = dns::Limits {
        timeout: Duration::from_millis(300),
        tries: 1,
    };
    for d in [dns, ntp].into_iter().flatten() {
        loop {
            let answered = match d.listen.port() {
                53 => dns::query(d.listen, &api, dns::RecordType::A, short)
                    .await
                    .is_ok(),
                _ => ntp::query(d.listen, Duration::from_millis(300), 1)
                    .await
                    .is_ok(),
            };
            if answered {
                break;
            }
            let alive = d.pid.is_some_and(super::process::alive);
            if !alive || start.elapsed() > timeout {
                bail!(
                    "{} did not answer at {}{}; {} ends:\n{}",
                    d.program.display(),
                    d.listen,
                    if alive { "" } else { " (it exited)" },
                    d.log.display(),
                    super::bmc::tail(&d.log, 15)
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

/// Removes the daemons' files under `state` (their logs stay unless `fresh`).
pub fn clear(state: &Path, fresh: bool) -> Result<()> {
    for (dir, log) in [("dns", "dnsmasq.log"), ("ntp", "chronyd.log")] {
        let dir = state.join(dir);
        if !dir.exists() {
            continue;
        }
        if fresh {
            fs_err::remove_dir_all(&dir)?;
            continue;
        }
        for entry in fs_err::read_dir(&dir)? {
            let entry = entry?;
            if entry.file_name() != log {
                fs_err::remove_file(entry.path())?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lab inventory's records: the VIP names and every node's name; dnsmasq's wildcard for
    /// `*.apps`; chronyd serving the machine network from the gateway.
    #[test]
    fn the_lab_serves_the_names_and_time_the_inventory_asks_for() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../inventory/lab");
        let inv = bootstrap::inventory::load(&dir).unwrap();
        let state = Path::new("/x/.lab/site");
        let (dns, ntp) = plan(state, &inv).unwrap();
        let (dns, ntp) = (dns.unwrap(), ntp.unwrap());
        assert_eq!(dns.listen.to_string(), "192.168.111.1:53");
        assert_eq!(ntp.listen.to_string(), "192.168.111.1:123");
        let r = records(&inv);
        for line in [
            "192.168.111.5 api.lab.rehearsal.example.com",
            "192.168.111.5 api-int.lab.rehearsal.example.com",
            "192.168.111.20 master-0.lab.rehearsal.example.com",
            "192.168.111.22 master-2.lab.rehearsal.example.com",
        ] {
            assert!(r.lines().any(|l| l == line), "{line} missing from:\n{r}");
        }
        let conf = dnsmasq_conf(&dns, &inv);
        assert!(conf.contains("address=/apps.lab.rehearsal.example.com/192.168.111.4\n"));
        assert!(conf.contains("listen-address=192.168.111.1\n") && conf.contains("no-resolv"));
        let conf = chrony_conf(&ntp, &inv);
        assert!(conf.contains("allow 192.168.111.0/24\n") && conf.contains("local stratum 10"));
        assert!(
            conf.contains("pidfile /x/.lab/site/ntp/chronyd.pid"),
            "{conf}"
        );
    }
}
