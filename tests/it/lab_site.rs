//! `bootstrap-lab up|down|status`: the lab site against the real sushy-tools emulator (the lab
//! venv that scripts/install-deps.sh makes) and real network namespaces (the tests run as
//! root). inventory/lab is copied with free BMC ports, in its shipped plain variant and in the
//! TLS + Basic auth variant. Every test uses the inventory's one machine network
//! (192.168.111.0/24), so they run one at a time (the `lab-site` group of .config/nextest.toml).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support;
use crate::support::labsite::{lab_inventory, run_lab, with_spare, SiteLab as Lab};
use crate::support::run::failed;

/// The user and password of inventory/lab/secrets/bmc.example.
const ADMIN: (&str, &str) = ("admin", "lab-bmc-pass");

/// An HTTP client trusting only `ca` (a PEM file).
fn client(ca: &Path) -> reqwest::Client {
    let pem = fs_err::read(ca).unwrap();
    reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(&pem).unwrap()])
        .no_proxy()
        .build()
        .unwrap()
}

async fn get(c: &reqwest::Client, url: &str, auth: Option<(&str, &str)>) -> reqwest::Response {
    let mut r = c.get(url);
    if let Some((u, p)) = auth {
        r = r.basic_auth(u, Some(p));
    }
    r.send()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e:#}"))
}

async fn json(c: &reqwest::Client, url: &str, auth: Option<(&str, &str)>) -> Value {
    let r = get(c, url, auth).await;
    assert!(r.status().is_success(), "GET {url}: {}", r.status());
    r.json().await.unwrap()
}

async fn post(c: &reqwest::Client, url: &str, body: Value, auth: Option<(&str, &str)>) {
    let mut r = c.post(url).json(&body);
    if let Some((u, p)) = auth {
        r = r.basic_auth(u, Some(p));
    }
    let resp = r.send().await.unwrap();
    let status = resp.status();
    assert!(
        status.is_success(),
        "POST {url}: {status} {}",
        resp.text().await.unwrap()
    );
}

/// Each system the BMC at `base` serves: its UUID and the MACs of its EthernetInterfaces.
async fn systems(
    c: &reqwest::Client,
    base: &str,
    auth: Option<(&str, &str)>,
) -> Vec<(String, String, Vec<String>)> {
    let list = json(c, &format!("{base}/redfish/v1/Systems"), auth).await;
    let mut out = Vec::new();
    for m in list["Members"].as_array().unwrap() {
        let sys = json(
            c,
            &format!("{base}{}", m["@odata.id"].as_str().unwrap()),
            auth,
        )
        .await;
        let nics = json(
            c,
            &format!(
                "{base}{}",
                sys["EthernetInterfaces"]["@odata.id"].as_str().unwrap()
            ),
            auth,
        )
        .await;
        let mut macs = Vec::new();
        for n in nics["Members"].as_array().unwrap() {
            let nic = json(
                c,
                &format!("{base}{}", n["@odata.id"].as_str().unwrap()),
                auth,
            )
            .await;
            macs.push(nic["MACAddress"].as_str().unwrap().to_string());
        }
        out.push((
            sys["Name"].as_str().unwrap().to_string(),
            sys["UUID"].as_str().unwrap().to_string(),
            macs,
        ));
    }
    out
}

/// Inserts `image` into the system's CD, sets the boot override to Cd and powers it on, as the
/// boot stage will.
async fn boot_from(c: &reqwest::Client, system_url: &str, image: &str, auth: Option<(&str, &str)>) {
    let base = system_url.split("/redfish/").next().unwrap();
    let sys = json(c, system_url, auth).await;
    let id = sys["@odata.id"].as_str().unwrap();
    let media = json(
        c,
        &format!(
            "{base}{}",
            sys["VirtualMedia"]["@odata.id"].as_str().unwrap()
        ),
        auth,
    )
    .await;
    let cd = media["Members"][0]["@odata.id"].as_str().unwrap();
    post(
        c,
        &format!("{base}{cd}/Actions/VirtualMedia.InsertMedia"),
        serde_json::json!({"Image": image}),
        auth,
    )
    .await;
    let mut patch = c.patch(format!("{base}{id}")).json(
        &serde_json::json!({"Boot": {"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once"}}),
    );
    if let Some((u, p)) = auth {
        patch = patch.basic_auth(u, Some(p));
    }
    assert!(patch.send().await.unwrap().status().is_success());
    post(
        c,
        &format!("{base}{id}/Actions/ComputerSystem.Reset"),
        serde_json::json!({"ResetType": "On"}),
        auth,
    )
    .await;
}

/// `bootstrap serve iso` on a small file: the child and the ISO's URL.
struct IsoServer(std::process::Child);

impl Drop for IsoServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve_iso(dir: &Path) -> (IsoServer, String) {
    let file = dir.join("agent.x86_64.iso");
    fs_err::write(&file, vec![7u8; 64 * 1024]).unwrap();
    serve_file(&file)
}

/// `bootstrap serve iso FILE`: the child and the URL.
fn serve_file(file: &Path) -> (IsoServer, String) {
    use std::io::BufRead;
    let mut child = support::run::command(&[
        "serve",
        "iso",
        file.to_str().unwrap(),
        "--bind",
        "127.0.0.1:0",
    ])
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .split(" at ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap()
        .to_string();
    (IsoServer(child), url)
}

/// Polls `bootstrap-lab status` until `node`'s observation satisfies `want` (the fake driver applies a
/// power change 1 to 11 s after the reset).
fn wait_observation(lab: &Lab, node: &str, want: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let status = lab.status();
        let n = status["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["node"] == node)
            .unwrap()
            .clone();
        if want(&n["observation"]) {
            return n;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "node {node} never observed as wanted; last: {n}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn namespaces() -> String {
    String::from_utf8(
        std::process::Command::new("ip")
            .args(["netns", "list"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
}

fn links() -> String {
    String::from_utf8(
        std::process::Command::new("ip")
            .args(["-o", "link"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
}

fn alive(pid: u64) -> bool {
    bootstrap_lab::site::process::alive(pid as u32)
}

/// Every pid lab status shows: the emulators' and the site process's.
fn pids(status: &Value) -> Vec<u64> {
    let mut p: Vec<u64> = status["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["pid"].as_u64().unwrap())
        .collect();
    p.push(status["site"]["pid"].as_u64().unwrap());
    p.extend(["dns", "ntp"].map(|d| status[d]["pid"].as_u64().unwrap()));
    p
}

/// inventory/lab as shipped (master-0's and master-1's BMCs TLS + Basic auth, master-2's plain) end to end: each
/// node's BMC serves one system with the inventory's UUID and MACs; an InsertMedia (downloaded from bootstrap's ISO server), a Cd override and a reset show
/// up in the watcher's observations and in the reset counts; a listener bound in a node's
/// namespace answers at its address from this (root) namespace, as does the site process's at
/// the rendezvous IP; the site's DNS and NTP servers answer on the gateway; lab down leaves no
/// process, namespace or link behind.
#[test]
fn the_shipped_lab_serves_the_inventory_and_the_watcher_sees_a_boot() {
    let dir = tempfile::tempdir().unwrap();
    let (inv, ports) = lab_inventory(dir.path(), false);
    let (lab, status) = Lab::up(&inv, &dir.path().join("state"), &[]);
    assert_eq!(status["phase"], "ready");
    let variants: Vec<&str> = status["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["bmcVariant"].as_str().unwrap())
        .collect();
    assert_eq!(variants, ["tls+basic", "tls+basic", "plain"]);
    let inventory = bootstrap::inventory::load(&inv).unwrap();
    let (_iso, iso_url) = serve_iso(dir.path());
    let ca = lab.record().ca;
    support::block_on(async {
        let c = client(&ca);
        for (node, port) in inventory.nodes.nodes.iter().zip(&ports) {
            let scheme = node.bmc.address.split("://").next().unwrap();
            let auth = node.bmc.credentials.as_ref().map(|_| ADMIN);
            let found = systems(&c, &format!("{scheme}://127.0.0.1:{port}"), auth).await;
            let macs: Vec<String> = node.nics.iter().map(|n| n.mac.clone()).collect();
            assert_eq!(
                found,
                [(
                    node.hostname.clone(),
                    node.bmc.system_uuid.clone().unwrap(),
                    macs
                )]
            );
        }
        boot_from(
            &c,
            &inventory.nodes.nodes[1].bmc.address,
            &iso_url,
            Some(ADMIN),
        )
        .await;
    });
    let n = wait_observation(&lab, "master-1", |o| o["poweredOn"] == true);
    assert_eq!(n["observation"]["media"], iso_url.as_str());
    assert_eq!(n["observation"]["bootCd"], true);
    let log = fs_err::read_to_string(&lab.record().site.log).unwrap();
    assert!(log.contains(&format!("observation {{\"node\":\"master-1\",\"poweredOn\":true,\"media\":\"{iso_url}\",\"bootCd\":true,\"boots\":1}}")), "{log}");
    let resets = bootstrap_lab::site::reset_counts(&lab.state).unwrap();
    assert_eq!(
        resets.into_iter().collect::<Vec<_>>(),
        [
            ("master-0".to_string(), 0),
            ("master-1".to_string(), 1),
            ("master-2".to_string(), 0)
        ]
    );
    assert_eq!(lab.status()["nodes"][1]["resets"], 1);

    // master-2's namespace holds its address on an interface named and MAC'd as its NIC.
    let ip = |args: &[&str]| {
        let o = lab
            .record()
            .command_in("master-2", "ip")
            .unwrap()
            .args(args)
            .output()
            .unwrap();
        String::from_utf8(o.stdout).unwrap()
    };
    assert!(ip(&["-o", "addr", "show", "dev", "enp1s0"]).contains("inet 192.168.111.22/24"));
    assert!(ip(&["-o", "link", "show", "dev", "enp1s0"]).contains("link/ether aa:bb:cc:00:00:03"));
    // A listener of our own in master-2's namespace, reached from here at master-2's address.
    let listener = lab
        .record()
        .bind_in("master-2", "192.168.111.22:0".parse().unwrap())
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, peer) = listener.accept().unwrap();
        s.write_all(b"hello from master-2").unwrap();
        peer
    });
    let mut reply = String::new();
    TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .unwrap()
        .read_to_string(&mut reply)
        .unwrap();
    assert_eq!(reply, "hello from master-2");
    assert_eq!(
        server.join().unwrap().ip().to_string(),
        "192.168.111.1",
        "the root namespace reaches the node through the bridge's gateway address"
    );
    // The site process's listeners: the rendezvous host's address and the API VIP accept.
    for a in ["192.168.111.20:8090", "192.168.111.5:6443"] {
        TcpStream::connect_timeout(&a.parse::<SocketAddr>().unwrap(), Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("{a}: {e}"));
    }

    // The site's DNS and NTP servers (dnsmasq, chronyd) answer on the gateway, from the
    // inventory: the API name to the API VIP, a wildcard *.apps name to the ingress VIP.
    support::block_on(async {
        use bootstrap::preflight::dns::{query, Limits, RecordType};
        let dns: SocketAddr = "192.168.111.1:53".parse().unwrap();
        let domain = "lab.rehearsal.example.com";
        for (name, want) in [("api", "192.168.111.5"), ("any.apps", "192.168.111.4")] {
            let got = query(
                dns,
                &format!("{name}.{domain}"),
                RecordType::A,
                Limits::default(),
            )
            .await
            .unwrap();
            assert_eq!(got, [want.parse::<std::net::IpAddr>().unwrap()], "{name}");
        }
        let ntp = "192.168.111.1:123".parse().unwrap();
        let time = bootstrap::preflight::ntp::query(ntp, Duration::from_secs(2), 2)
            .await
            .unwrap();
        assert_eq!(time.stratum, 10);
    });

    let before = lab.status();
    // Without --hosts-up no node's SSH host runs before the simulated install says it finished.
    assert_eq!(before["hosts"], serde_json::json!([]), "{before:#}");
    let id = before["labId"].as_str().unwrap().to_string();
    let removed = lab.down();
    assert_eq!(
        removed["processes"].as_array().unwrap().len(),
        6,
        "{removed}"
    );
    for pid in pids(&before) {
        assert!(!alive(pid), "pid {pid} still runs after lab down");
    }
    assert!(
        !namespaces().contains(&format!("bsl-{id}-")),
        "{}",
        namespaces()
    );
    assert!(!links().contains(&format!("bsl{id}")), "{}", links());
    assert!(failed(&run_lab(&[
        "status",
        "--state",
        lab.state.to_str().unwrap()
    ]))
    .contains("no lab is up"));
}

/// The TLS + Basic auth variant: lab up writes the lab CA to the inventory's bmc.ca file, the
/// BMCs verify against it (and against no other trust), refuse a request without or with wrong
/// credentials, and the watcher (over TLS, with the credentials) sees a boot; the password is in
/// no file of the state dir and in no output; lab down removes the CA file it wrote.
#[test]
fn tls_bmcs_verify_against_the_inventory_ca_and_want_the_password() {
    let dir = tempfile::tempdir().unwrap();
    let (inv, ports) = lab_inventory(dir.path(), true);
    const PASSWORD: &str = "s3cret-lab-pw-4242";
    fs_err::write(
        inv.join("secrets/bmc.example"),
        format!("admin:{PASSWORD}\n"),
    )
    .unwrap();
    let ca_file = inv.join("secrets/bmc-ca.pem");
    let (lab, status) = Lab::up(&inv, &dir.path().join("state"), &[]);
    assert_eq!(status["nodes"][0]["bmcVariant"], "tls+basic");
    assert!(
        ca_file.is_file(),
        "lab up did not write {}",
        ca_file.display()
    );
    let inventory = bootstrap::inventory::load(&inv).unwrap();
    let (_iso, iso_url) = serve_iso(dir.path());
    let auth = Some(("admin", PASSWORD));
    support::block_on(async {
        let c = client(&ca_file);
        let base = format!("https://127.0.0.1:{}", ports[0]);
        let found = systems(&c, &base, auth).await;
        assert_eq!(
            found[0].1,
            inventory.nodes.nodes[0].bmc.system_uuid.clone().unwrap()
        );
        assert_eq!(found[0].2, ["aa:bb:cc:00:00:01"]);
        let systems_url = format!("{base}/redfish/v1/Systems");
        assert_eq!(get(&c, &systems_url, None).await.status(), 401);
        assert_eq!(
            get(&c, &systems_url, Some(("admin", "wrong")))
                .await
                .status(),
            401
        );
        let untrusting = reqwest::Client::builder().no_proxy().build().unwrap();
        assert!(
            untrusting.get(&systems_url).send().await.is_err(),
            "the lab certificate must not verify against the system roots"
        );
        boot_from(&c, &inventory.nodes.nodes[0].bmc.address, &iso_url, auth).await;
    });
    let n = wait_observation(&lab, "master-0", |o| o["poweredOn"] == true);
    assert_eq!(n["observation"]["media"], iso_url.as_str());
    assert_eq!(n["resets"], 1);
    assert!(!status.to_string().contains(PASSWORD));
    let mut files = vec![lab.state.clone()];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(fs_err::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else {
            let bytes = fs_err::read(&path).unwrap();
            let text = String::from_utf8_lossy(&bytes);
            assert!(
                !text.contains(PASSWORD),
                "the BMC password is in {}",
                path.display()
            );
        }
    }
    let removed = lab.down();
    assert_eq!(removed["files"][0], ca_file.to_str().unwrap());
    assert!(!ca_file.exists());
    assert!(lab.inv.join("secrets/bmc.example").exists());
}

/// After a crash (the site process killed with SIGKILL, the emulators left running) the next lab
/// up of the same state dir clears the stale lab (its ports and namespaces would collide) and
/// starts afresh: new processes, reset counts from zero.
#[test]
fn a_crashed_lab_is_cleared_by_the_next_lab_up() {
    let dir = tempfile::tempdir().unwrap();
    let (inv, ports) = lab_inventory(dir.path(), false);
    let state = dir.path().join("state");
    let (first, status) = Lab::up(&inv, &state, &[]);
    let old = pids(&status);
    support::block_on(async {
        let c = reqwest::Client::builder().no_proxy().build().unwrap();
        let url = format!(
            "http://127.0.0.1:{}/redfish/v1/Systems/master-2/Actions/ComputerSystem.Reset",
            ports[2]
        );
        let r = c
            .post(&url)
            .json(&serde_json::json!({"ResetType": "On"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 204);
    });
    assert_eq!(
        bootstrap_lab::site::reset_counts(&state).unwrap()["master-2"],
        1
    );
    let site = status["site"]["pid"].as_u64().unwrap();
    std::process::Command::new("kill")
        .args(["-9", &site.to_string()])
        .status()
        .unwrap();
    std::mem::forget(first);
    let (again, status) = Lab::up(&inv, &state, &[]);
    for pid in old {
        assert!(!alive(pid), "pid {pid} of the crashed lab still runs");
    }
    assert!(pids(&status).iter().all(|p| alive(*p)));
    assert_eq!(
        bootstrap_lab::site::reset_counts(&state).unwrap()["master-2"],
        0
    );
    drop(again);
}

/// A bmc.ca file lab up did not write is never overwritten: lab up stops naming it and the fix,
/// and leaves nothing running.
#[test]
fn a_ca_file_lab_up_did_not_write_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (inv, _) = lab_inventory(dir.path(), true);
    let ca_file = inv.join("secrets/bmc-ca.pem");
    fs_err::write(&ca_file, "the site's own CA\n").unwrap();
    let state = dir.path().join("state");
    let err = failed(&run_lab(&[
        "up",
        "--inventory",
        inv.to_str().unwrap(),
        "--state",
        state.to_str().unwrap(),
    ]));
    assert!(
        err.contains("bmc-ca.pem exists and was not written by lab up"),
        "{err}"
    );
    assert_eq!(
        fs_err::read_to_string(&ca_file).unwrap(),
        "the site's own CA\n"
    );
    let id = bootstrap_lab::site::lab_id(&state);
    assert!(!namespaces().contains(&format!("bsl-{id}-")));
}

/// The spare machine of `inventory/lab/spares.yaml` is built like the masters (its BMC, its
/// namespace at its address), powered off, while the inventory the product reads keeps the
/// three masters.
#[test]
fn a_spare_machine_is_built_powered_off_outside_the_products_inventory() {
    let dir = tempfile::tempdir().unwrap();
    let (inv, _) = lab_inventory(dir.path(), false);
    let port = with_spare(&inv);
    let (lab, status) = Lab::up(&inv, &dir.path().join("state"), &[]);
    assert_eq!(status["phase"], "ready");
    let names: Vec<&str> = status["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["node"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["master-0", "master-1", "master-2", "worker-0"],
        "{status}"
    );
    let product = bootstrap::inventory::load(&inv).unwrap();
    assert_eq!(product.nodes.nodes.len(), 3);
    let system = support::block_on(async {
        let c = client(&lab.record().ca);
        json(
            &c,
            &format!("http://127.0.0.1:{port}/redfish/v1/Systems/worker-0"),
            None,
        )
        .await
    });
    assert_eq!(system["PowerState"], "Off", "{system}");
    let o = lab
        .record()
        .command_in("worker-0", "ip")
        .unwrap()
        .args(["-o", "addr", "show", "dev", "enp1s0"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).contains("inet 192.168.111.23/24"));
}

/// The spare machine booted from a node ISO through its BMC (as the product's day-two path
/// does) is read by the site process as a day-two join: it walks the day-two install and its
/// SSH host starts at its address.
#[test]
fn the_spare_booted_from_a_node_iso_starts_its_day_two_install() {
    let dir = tempfile::tempdir().unwrap();
    let (inv, _) = lab_inventory(dir.path(), false);
    let port = with_spare(&inv);
    let (lab, _) = Lab::up(&inv, &dir.path().join("state"), &["--step", "300ms"]);
    let staging = dir.path().join("iso");
    fs_err::create_dir_all(&staging).unwrap();
    fs_err::write(staging.join("nodes-config.yaml"), "hosts:\n- hostname: worker-0\n  role: worker\n  interfaces:\n  - name: enp1s0\n    macAddress: aa:bb:cc:00:00:04\n  networkConfig:\n    interfaces:\n    - name: enp1s0\n      type: ethernet\n      state: up\n      ipv4:\n        enabled: true\n        address:\n        - ip: 192.168.111.23\n          prefix-length: 24\n").unwrap();
    let iso = dir.path().join("node.x86_64.iso");
    let made = std::process::Command::new("xorriso")
        .args(["-as", "mkisofs", "-quiet", "-R", "-J", "-o"])
        .arg(&iso)
        .arg(&staging)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let (_server, url) = serve_file(&iso);
    support::block_on(async {
        let c = client(&lab.record().ca);
        boot_from(
            &c,
            &format!("http://127.0.0.1:{port}/redfish/v1/Systems/worker-0"),
            &url,
            None,
        )
        .await;
    });
    let start = Instant::now();
    loop {
        let log = fs_err::read_to_string(&lab.record().site.log).unwrap();
        let hosts = lab.status()["hosts"].clone();
        let up = hosts
            .as_array()
            .into_iter()
            .flatten()
            .any(|h| h["node"] == "worker-0" && h["running"] == true);
        if up {
            assert!(
                log.contains("worker-0 booted the node ISO and starts its day-two install"),
                "{log}"
            );
            assert!(log.contains("worker-0: Rebooting"), "{log}");
            let h = hosts
                .as_array()
                .unwrap()
                .iter()
                .find(|h| h["node"] == "worker-0")
                .unwrap();
            assert_eq!(h["address"], "192.168.111.23:22");
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "worker-0 never joined: {log}\n{hosts}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}
