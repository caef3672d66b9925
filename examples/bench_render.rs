//! Render benchmark: generates a deterministic 500-node inventory (3 control-plane nodes and 497
//! bonded GPU workers with three VLANs each, as in inventory/example-site) and times `bootstrap
//! render` on it (load, validate, render, write), best of BENCH_RUNS (default 5). Run through
//! `bench/render.sh`; BENCH_NODES changes the node count.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

const API: &str = "bootstrap.openshift-ai.dev/v1alpha1";

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// site.yaml and nodes.yaml for `nodes` nodes on a /20 machine network.
fn inventory(dir: &Path, nodes: usize) {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory/example-site/secrets");
    fs_err::create_dir_all(dir.join("secrets")).unwrap();
    for f in [
        "pull-secret.example.json",
        "id_ed25519.pub",
        "registry-ca.example.pem",
        "idrac-ca.example.pem",
    ] {
        fs_err::copy(example.join(f), dir.join("secrets").join(f)).unwrap();
    }
    fs_err::write(dir.join("secrets/bmc.example"), "root:placeholder\n").unwrap();
    let ip = |net: u32, n: usize| format!("10.{net}.{}.{}", 1 + (n + 10) / 250, (n + 10) % 250);
    let site = format!(
        "apiVersion: {API}\nkind: Site\ncluster:\n  name: bench\n  baseDomain: ai.example.com\n  release:\n    image: quay.io/openshift-release-dev/ocp-release@sha256:{}\n  apiVIPs: [10.20.0.5]\n  ingressVIPs: [10.20.0.6]\n  rendezvousIP: {}\nnetworks:\n  machine: [10.20.0.0/20]\n  cluster: [{{cidr: 10.128.0.0/14, hostPrefix: 23}}]\n  service: [172.30.0.0/16]\n  gateway: 10.20.0.1\n  dns: [10.20.0.2]\n  ntp: [10.20.0.4]\n  vlans:\n  - {{name: machine, id: 120, cidr: 10.20.0.0/20}}\n  - {{name: storage, id: 130, cidr: 10.30.0.0/20, mtu: 9000}}\n  - {{name: backup, id: 140, cidr: 10.40.0.0/20}}\nreferences:\n  pullSecret: {{file: secrets/pull-secret.example.json}}\n  sshPublicKey: {{file: secrets/id_ed25519.pub}}\n  registryCA: {{file: secrets/registry-ca.example.pem}}\n",
        "ab".repeat(32),
        ip(20, 0)
    );
    fs_err::write(dir.join("site.yaml"), site).unwrap();
    let mut text = format!("apiVersion: {API}\nkind: Nodes\nnodes:\n");
    for n in 0..nodes {
        let (host, role) = if n < 3 {
            (format!("cp-{n}"), "master")
        } else {
            (format!("gpu-{n:04}"), "worker")
        };
        let mac = |port: usize| format!("b8:3f:d2:{:02x}:{:02x}:{:02x}", n / 256, n % 256, port);
        writeln!(text, "- hostname: {host}\n  role: {role}\n  bmc:\n    address: https://{}/redfish/v1/Systems/System.Embedded.1\n    credentials: {{file: secrets/bmc.example}}\n    ca: {{file: secrets/idrac-ca.example.pem}}\n  rootDevice: {{deviceName: /dev/disk/by-path/pci-0000:c3:00.0-nvme-1}}\n  nics:\n  - {{name: ens1f0np0, mac: '{}', mtu: 9000}}\n  - {{name: ens1f1np1, mac: '{}', mtu: 9000}}\n  bonds:\n  - {{name: bond0, mode: 802.3ad, members: [ens1f0np0, ens1f1np1], mtu: 9000}}\n  vlans:\n  - {{network: machine, base: bond0}}\n  - {{network: storage, base: bond0}}\n  - {{network: backup, base: bond0}}\n  addresses:\n  - {{interface: bond0.120, ip: {}/20}}\n  - {{interface: bond0.130, ip: {}/20}}\n  - {{interface: bond0.140, ip: {}/20}}\n  labels: {{nvidia.com/gpu.product: NVIDIA-H200, node-role.kubernetes.io/gpu: ''}}",
            ip(10, n), mac(0), mac(1), ip(20, n), ip(30, n), ip(40, n)).unwrap();
    }
    fs_err::write(dir.join("nodes.yaml"), text).unwrap();
}

/// Where the bench writes: a temporary directory, or BENCH_DIR.
struct Kept(std::path::PathBuf);

impl Kept {
    fn path(&self) -> &Path {
        &self.0
    }
}

fn main() {
    let nodes = env_usize("BENCH_NODES", 500);
    let runs = env_usize("BENCH_RUNS", 5).max(1);
    let bin = std::env::var("BOOTSTRAP_BIN").expect("BOOTSTRAP_BIN: the release bootstrap binary");
    let tmp = tempfile::tempdir().unwrap();
    // BENCH_DIR keeps the generated inventory and outputs for a closer look (profiling).
    let tmp = match std::env::var_os("BENCH_DIR") {
        Some(dir) => Kept(std::path::PathBuf::from(dir)),
        None => Kept(tmp.path().to_path_buf()),
    };
    let inv = tmp.path().join("inventory");
    inventory(&inv, nodes);
    let size = fs_err::metadata(inv.join("nodes.yaml")).unwrap().len();
    let mut best = f64::MAX;
    for run in 0..runs {
        let out = tmp.path().join(format!("run-{run}"));
        let start = Instant::now();
        let o = Command::new(&bin)
            .args([
                "render",
                "--inventory",
                inv.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        let secs = start.elapsed().as_secs_f64();
        assert!(
            o.status.success(),
            "render failed:\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        best = best.min(secs);
        let agent = fs_err::metadata(out.join("agent-config.yaml"))
            .unwrap()
            .len();
        println!(
            "run {}: {nodes} nodes (nodes.yaml {} KiB, agent-config.yaml {} KiB): {secs:.3} s",
            run + 1,
            size / 1024,
            agent / 1024
        );
    }
    println!(
        "render of {nodes} nodes (load + validate + render + self-check + write): best {best:.3} s of {runs}"
    );
    // The rendered pair through `bootstrap validate`, as an engineer with hand-written files
    // would run it.
    let out = tmp.path().join("run-0");
    let mut best_validate = f64::MAX;
    for _ in 0..runs {
        let start = Instant::now();
        let o = Command::new(&bin)
            .args([
                "validate",
                "--install-config",
                out.join("install-config.yaml").to_str().unwrap(),
                "--agent-config",
                out.join("agent-config.yaml").to_str().unwrap(),
            ])
            .output()
            .unwrap();
        best_validate = best_validate.min(start.elapsed().as_secs_f64());
        assert!(
            o.status.success(),
            "validate failed:\n{}",
            String::from_utf8_lossy(&o.stdout)
        );
    }
    println!("validate of the rendered {nodes}-node pair: best {best_validate:.3} s of {runs}");
}
