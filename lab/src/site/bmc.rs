//! The lab's BMCs: one sushy-tools Redfish emulator (`sushy-emulator --config FILE`, the fake
//! driver: no libvirt) per lab node, at the host and port of the node's inventory
//! `bmc.address`, holding one fake system named after the node with the inventory's
//! `systemUUID` and NIC MACs. The variant comes from the inventory itself: an `http://` address
//! without credentials runs plain; an `https://` one runs TLS with a certificate from the lab CA
//! and Basic auth from an htpasswd (bcrypt) file made from the node's credentials. Each
//! emulator's request log (werkzeug's lines) is kept in the state dir; [`reset_counts`] reads
//! the `ComputerSystem.Reset` POSTs out of it.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::pki::LabCa;
use bootstrap::inventory::model::Node;
use bootstrap::inventory::Inventory;

/// The environment variable naming the lab's Python venv (default
/// `$HOME/.cache/bootstrap/lab-venv`, where `scripts/install-deps.sh` makes it).
pub const VENV_ENV: &str = "BOOTSTRAP_LAB_VENV";

/// One node's emulator, as `site.json` records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Emulator {
    /// The node it is the BMC of.
    pub node: String,
    /// Its Redfish service root (`https://127.0.0.1:8001`).
    pub base_url: String,
    /// The node's system as the inventory addresses it (`bmc.address`).
    pub system_url: String,
    /// The fake system's UUID (the inventory's `systemUUID`, else derived from the node name).
    pub uuid: String,
    /// TLS with a lab CA certificate.
    pub tls: bool,
    /// Basic auth (htpasswd, bcrypt).
    pub basic_auth: bool,
    /// Its directory in the state dir (config, state, certificate, htpasswd, log).
    pub dir: PathBuf,
    /// Its request log (stdout and stderr of the emulator).
    pub log: PathBuf,
    /// Its process id, once started.
    #[serde(default)]
    pub pid: Option<u32>,
    /// The vendor its BMC behaves as ([`super::vendor`]).
    #[serde(default)]
    pub vendor: super::vendor::Vendor,
    /// With a vendor: the emulator's own base URL behind the vendor front (the front answers
    /// at `base_url`); the machine's truth, which the BMC watcher reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
}

impl Emulator {
    /// Where the emulator itself answers: behind the front when there is one.
    pub fn machine_base(&self) -> &str {
        self.backend.as_deref().unwrap_or(&self.base_url)
    }

    /// The node's system URL at the emulator itself.
    pub fn machine_system_url(&self) -> String {
        match &self.backend {
            Some(b) => self.system_url.replacen(&self.base_url, b, 1),
            None => self.system_url.clone(),
        }
    }
}

pub use bootstrap::inventory::BmcCredentials as Credentials;

/// Reads node `node`'s BMC credentials, when it has any.
pub fn credentials(inv: &Inventory, node: &Node) -> Result<Option<Credentials>> {
    bootstrap::inventory::bmc_credentials(inv, node)
}

/// The emulator for `node` under `state/bmc/NODE`, from its inventory BMC, behaving as `vendor`
/// (a vendor other than generic puts the emulator on a free port behind a front).
pub fn plan(state: &Path, node: &Node, vendor: super::vendor::Vendor) -> Result<Emulator> {
    let address = &node.bmc.address;
    let url = reqwest::Url::parse(address).with_context(|| {
        format!(
            "node {}: bmc.address '{address}' is not a URL",
            node.hostname
        )
    })?;
    let tls = match url.scheme() {
        "https" => true,
        "http" => false,
        other => bail!(
            "node {}: bmc.address scheme {other} is neither http nor https",
            node.hostname
        ),
    };
    listen_addr(&url)
        .with_context(|| format!("node {}: bmc.address '{address}'", node.hostname))?;
    let uuid = node
        .bmc
        .system_uuid
        .clone()
        .unwrap_or_else(|| derived_uuid(&node.hostname));
    if let Some(id) = url.path().strip_prefix("/redfish/v1/Systems/") {
        let id = id.trim_end_matches('/');
        if id != node.hostname && !id.eq_ignore_ascii_case(&uuid) {
            bail!(
                "node {}: bmc.address names system '{id}', but the lab's fake system is named {} (UUID {uuid}); write .../Systems/{} or no path",
                node.hostname,
                node.hostname,
                node.hostname
            );
        }
    }
    if tls && node.bmc.fingerprint.is_some() {
        bail!(
            "node {}: bmc.fingerprint cannot match a lab certificate, which is new on every lab up; use bmc.ca (lab up writes the lab CA there)",
            node.hostname
        );
    }
    let dir = state.join("bmc").join(&node.hostname);
    let listen = listen_addr(&url)?;
    let backend = match vendor {
        super::vendor::Vendor::Generic => None,
        _ => {
            let free = std::net::TcpListener::bind(SocketAddr::new(listen.ip(), 0))?
                .local_addr()?
                .port();
            let host = match listen.ip() {
                IpAddr::V6(ip) => format!("[{ip}]"),
                ip => ip.to_string(),
            };
            Some(format!("{}://{host}:{free}", url.scheme()))
        }
    };
    Ok(Emulator {
        vendor,
        backend,
        node: node.hostname.clone(),
        base_url: format!("{}://{}", url.scheme(), host_port(&url)?),
        system_url: address.clone(),
        uuid,
        tls,
        basic_auth: node.bmc.credentials.is_some(),
        log: dir.join("emulator.log"),
        dir,
        pid: None,
    })
}

fn host_port(url: &reqwest::Url) -> Result<String> {
    let host = url.host_str().context("no host")?;
    let port = url.port_or_known_default().context("no port")?;
    Ok(format!("{host}:{port}"))
}

/// The address the emulator listens on: the BMC address's host, which must be an IP address of
/// this machine's root namespace (`127.0.0.1`).
fn listen_addr(url: &reqwest::Url) -> Result<SocketAddr> {
    let host = url.host_str().context("no host")?;
    let ip: IpAddr = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .with_context(|| format!("the lab's emulators listen on an IP address, not '{host}'"))?;
    Ok(SocketAddr::new(
        ip,
        url.port_or_known_default().unwrap_or(443),
    ))
}

/// A stable UUID for a node without `systemUUID`: the first 16 bytes of sha256(name), as a
/// version-4-shaped UUID.
fn derived_uuid(name: &str) -> String {
    use sha2::Digest as _;
    let h = sha2::Sha256::digest(name.as_bytes());
    let x: String = h[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-4{}-8{}-{}",
        &x[0..8],
        &x[8..12],
        &x[13..16],
        &x[17..20],
        &x[20..32]
    )
}

/// A Python string literal (a JSON string is one).
fn py_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// Writes the emulator's files: config, fresh state dir, and for TLS its certificate, for
/// credentials its htpasswd (bcrypt, made by `htpasswd -B` with the password on stdin).
pub fn prepare(em: &Emulator, node: &Node, creds: Option<&Credentials>, ca: &LabCa) -> Result<()> {
    let state = em.dir.join("state");
    let tmp = em.dir.join("tmp");
    for d in [&state, &tmp] {
        fs_err::create_dir_all(d)?;
    }
    let url = reqwest::Url::parse(&em.machine_system_url())?;
    let listen = listen_addr(&url)?;
    let nics: Vec<serde_json::Value> = node
        .nics
        .iter()
        .map(|n| {
            let ip = node
                .addresses
                .iter()
                .find(|a| a.interface == n.name)
                .and_then(|a| a.ip.split('/').next())
                .unwrap_or_default();
            serde_json::json!({"mac": n.mac.to_ascii_lowercase(), "ip": ip})
        })
        .collect();
    let systems = serde_json::json!([{
        "uuid": em.uuid, "name": em.node, "power_state": "Off", "nics": nics,
    }]);
    let mut conf = format!(
        "# sushy-emulator config written by bootstrap-lab up for node {node}\nimport json\n# INFO, as plain messages: the emulator's own 'power state set to' line names each ResetType\n# (sushy_tools/emulator/main.py system_reset_action), which the lab counts boots from.\nimport logging\nlogging.basicConfig(level=logging.INFO, format='%(message)s')\nSUSHY_EMULATOR_LISTEN_IP = {ip}\nSUSHY_EMULATOR_LISTEN_PORT = {port}\nSUSHY_EMULATOR_FAKE_DRIVER = True\nSUSHY_EMULATOR_STATE_DIR = {state}\nSUSHY_EMULATOR_FEATURE_SET = 'full'\nSUSHY_EMULATOR_FAKE_SYSTEMS = json.loads({systems})\n",
        node = em.node,
        ip = py_str(&listen.ip().to_string()),
        port = listen.port(),
        state = py_str(&state.display().to_string()),
        systems = py_str(&systems.to_string()),
    );
    if em.tls {
        let pem = ca.server(&[listen.ip()], &["localhost".to_string()])?;
        let (cert, key) = (em.dir.join("tls.crt"), em.dir.join("tls.key"));
        bootstrap::fs::write_atomic(&cert, pem.cert.as_bytes())?;
        bootstrap::fs::write_atomic_mode(&key, pem.key.as_bytes(), 0o600)?;
        conf += &format!(
            "SUSHY_EMULATOR_SSL_CERT = {}\nSUSHY_EMULATOR_SSL_KEY = {}\n",
            py_str(&cert.display().to_string()),
            py_str(&key.display().to_string())
        );
    }
    if let Some(c) = creds {
        let file = em.dir.join("htpasswd");
        htpasswd(&file, c).with_context(|| format!("making node {}'s BMC htpasswd", em.node))?;
        conf += &format!(
            "SUSHY_EMULATOR_AUTH_FILE = {}\n",
            py_str(&file.display().to_string())
        );
    }
    bootstrap::fs::write_atomic(&em.dir.join("emulator.conf"), conf.as_bytes())
}

fn htpasswd(file: &Path, c: &Credentials) -> Result<()> {
    let mut child = Command::new("htpasswd")
        .args(["-B", "-i", "-c"])
        .arg(file)
        .arg(&c.user)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("running htpasswd (apache2-utils; scripts/install-deps.sh installs it)")?;
    child
        .stdin
        .take()
        .context("htpasswd's stdin")?
        .write_all(c.password.expose().as_bytes())?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "htpasswd failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    // A bcrypt hash is still a trace of the password: readable by its owner only.
    use std::os::unix::fs::PermissionsExt as _;
    fs_err::set_permissions(file, std::fs::Permissions::from_mode(0o600))?;
    Ok(())
}

/// The `sushy-emulator` of the lab venv: `$BOOTSTRAP_LAB_VENV/bin/sushy-emulator`, else
/// `$HOME/.cache/bootstrap/lab-venv/bin/sushy-emulator`.
pub fn emulator_program() -> Result<PathBuf> {
    let venv = match std::env::var_os(VENV_ENV) {
        Some(v) => PathBuf::from(v),
        None => PathBuf::from(std::env::var_os("HOME").context("HOME is not set")?)
            .join(".cache/bootstrap/lab-venv"),
    };
    let program = venv.join("bin/sushy-emulator");
    if !program.is_file() {
        bail!(
            "{} is missing: run scripts/install-deps.sh (it makes the lab venv with sushy-tools), or set {VENV_ENV} to a venv that has it",
            program.display()
        );
    }
    Ok(program)
}

/// Starts the emulator in a process group of its own (so a terminal's Ctrl-C after `bootstrap-lab up`
/// does not reach it), its output appended to its log; returns its pid. Downloads of inserted
/// media go to its `tmp/`.
pub fn spawn(em: &Emulator, program: &Path) -> Result<u32> {
    use std::os::unix::process::CommandExt as _;
    let log = fs_err::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&em.log)?;
    let child = Command::new(program)
        .arg("--config")
        .arg(em.dir.join("emulator.conf"))
        .env("TMPDIR", em.dir.join("tmp"))
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(log.file().try_clone()?)
        .stderr(log.into_file())
        .process_group(0)
        .spawn()
        .with_context(|| format!("starting {} for node {}", program.display(), em.node))?;
    Ok(child.id())
}

/// An HTTP client that trusts only the lab CA (or speaks plain HTTP).
pub fn client(ca_pem: &str) -> Result<reqwest::Client> {
    let ca = reqwest::Certificate::from_pem(ca_pem.as_bytes()).context("reading the lab CA")?;
    reqwest::Client::builder()
        .tls_certs_only([ca])
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .context("building the lab's HTTP client")
}

/// Waits until every emulator answers `GET /redfish/v1/` (TLS verified against the lab CA), or
/// fails naming the node: its process ended (with its log's last lines), or `timeout` passed.
pub async fn wait_ready(emulators: &[Emulator], ca_pem: &str, timeout: Duration) -> Result<()> {
    let http = client(ca_pem)?;
    let start = Instant::now();
    for em in emulators {
        let url = format!("{}/redfish/v1/", em.machine_base());
        loop {
            let last = match http.get(&url).send().await {
                Ok(r) if r.status().is_success() => break,
                Ok(r) => format!("HTTP {}", r.status()),
                Err(e) => format!("{e:#}"),
            };
            if let Some(pid) = em.pid {
                if !super::process::alive(pid) {
                    bail!(
                        "node {}'s BMC emulator exited before answering {url}; its log {} ends:\n{}",
                        em.node,
                        em.log.display(),
                        tail(&em.log, 15)
                    );
                }
            }
            if start.elapsed() > timeout {
                bail!(
                    "node {}'s BMC emulator did not answer {url} within {}s (last: {last}); see {}",
                    em.node,
                    timeout.as_secs(),
                    em.log.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    Ok(())
}

/// The last `n` lines of a log file (empty when it cannot be read).
pub fn tail(path: &Path, n: usize) -> String {
    let text = fs_err::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The resets that started the machine, from an emulator's log: sushy-tools logs each reset
/// it carried out as `System "ID" power state set to "TYPE"` (sushy_tools/emulator/main.py
/// `system_reset_action`, at INFO, which the lab's config turns on), and those of a type that
/// starts the machine (`On`, `ForceOn`, `ForceRestart`, `GracefulRestart`, `PowerCycle`) count.
/// A `ForceOff` does not: the boot stage's power-off and power-on of a running node are one
/// boot. A refused reset, a redirect and colour codes do not count.
pub fn count_resets(log: &str) -> u32 {
    const STARTS: [&str; 5] = [
        "On",
        "ForceOn",
        "ForceRestart",
        "GracefulRestart",
        "PowerCycle",
    ];
    let mut n = 0;
    for line in log.lines() {
        let line = strip_ansi(line);
        let Some((_, kind)) = line.split_once("\" power state set to \"") else {
            continue;
        };
        if STARTS.contains(&kind.trim_end().trim_end_matches('"')) {
            n += 1;
        }
    }
    n
}

/// The requests in an emulator's log that asked the BMC to change something: werkzeug's
/// access lines (`ADDR - - [DATE] "METHOD PATH HTTP/1.1" STATUS -`) whose method is not a read
/// (`GET`, `HEAD`, `OPTIONS`), answered or not. The BMC watcher reads a machine often only after
/// one ([`super::watcher`]).
pub fn count_changes(log: &str) -> u32 {
    changes(log, |_| true)
}

/// Those of [`count_changes`] on virtual media (a path with `/VirtualMedia`: insert, eject, a
/// PATCH of the device): the only ones that change what a CD holds.
pub fn count_media_changes(log: &str) -> u32 {
    changes(log, |path| path.contains("/VirtualMedia"))
}

/// Those of [`count_changes`] on power (a path with `ComputerSystem.Reset`): the only ones
/// sushy-tools carries out later (its fake driver's `set_power_state`: "hardware actions are
/// not immediate", 1-11 s); a boot override or a virtual media request is applied before its
/// answer.
pub fn count_power_changes(log: &str) -> u32 {
    changes(log, |path| path.contains("ComputerSystem.Reset"))
}

fn changes(log: &str, on: impl Fn(&str) -> bool) -> u32 {
    let mut n = 0;
    for line in log.lines() {
        let line = strip_ansi(line);
        let Some((_, request)) = line.split_once("] \"") else {
            continue;
        };
        let mut words = request.split(' ');
        let method = words.next().unwrap_or_default();
        let path = words.next().unwrap_or_default();
        if matches!(method, "POST" | "PATCH" | "PUT" | "DELETE") && on(path) {
            n += 1;
        }
    }
    n
}

fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Resets per node, from each emulator's request log (a node whose log is missing counts 0).
pub fn reset_counts_of(emulators: &[Emulator]) -> BTreeMap<String, u32> {
    emulators
        .iter()
        .map(|em| {
            let text = fs_err::read_to_string(&em.log).unwrap_or_default();
            (em.node.clone(), count_resets(&text))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each reset the emulator carried out counts once when it starts the machine: a ForceOff
    /// (the first half of a seen restart) does not, nor do werkzeug's request lines (a 307 and
    /// the 204 of the same reset), a refused reset, or colour codes.
    #[test]
    fn a_reset_counts_once_from_the_emulator_log() {
        let log = "\
 * Running on https://127.0.0.1:8001
127.0.0.1 - - [03/Dec/2026 14:59:38] \"GET /redfish/v1/ HTTP/1.1\" 200 -
127.0.0.1 - - [03/Dec/2026 14:59:38] \"\x1b[32mPOST /redfish/v1/Systems/master-0/Actions/ComputerSystem.Reset HTTP/1.1\x1b[0m\" 307 -
System \"1111\" power state set to \"On\"
127.0.0.1 - - [03/Dec/2026 14:59:38] \"\x1b[35m\x1b[1mPOST /redfish/v1/Systems/1111/Actions/ComputerSystem.Reset HTTP/1.1\x1b[0m\" 204 -
127.0.0.1 - - [03/Dec/2026 14:59:39] \"POST /redfish/v1/Systems/1111/Actions/ComputerSystem.Reset HTTP/1.1\" 400 -
System \"1111\" power state set to \"ForceOff\"
127.0.0.1 - - [03/Dec/2026 14:59:40] \"POST /redfish/v1/Systems/1111/Actions/ComputerSystem.Reset HTTP/1.1\" 204 -
System \"1111\" power state set to \"On\"
127.0.0.1 - - [03/Dec/2026 14:59:41] \"POST /redfish/v1/Systems/1111/Actions/ComputerSystem.Reset HTTP/1.1\" 204 -
\x1b[33mSystem \"1111\" power state set to \"ForceRestart\"\x1b[0m
";
        assert_eq!(count_resets(log), 3);
        // The requests that asked for a change: the five POSTs, the refused one too; not the
        // GET, and not the emulator's own lines.
        assert_eq!(count_changes(log), 5);
        assert_eq!(count_power_changes(log), 5);
        let media = "127.0.0.1 - - [03/Dec/2026 14:59:37] \"\x1b[35m\x1b[1mPOST /redfish/v1/Systems/1111/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia HTTP/1.1\x1b[0m\" 204 -\n";
        assert_eq!(count_media_changes(&format!("{log}{media}")), 1);
        assert_eq!(count_changes(&format!("{log}{media}")), 6);
        assert_eq!(count_power_changes(&format!("{log}{media}")), 5);
    }

    /// A derived UUID is stable and shaped as a UUID.
    #[test]
    fn a_node_without_system_uuid_gets_a_stable_one() {
        let u = derived_uuid("master-0");
        assert_eq!(u, derived_uuid("master-0"));
        assert_eq!(u.len(), 36);
        assert_eq!(u.matches('-').count(), 4);
        assert_ne!(u, derived_uuid("master-1"));
    }
}
