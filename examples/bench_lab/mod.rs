//! What the two lab benchmarks of issue 31 share (`bench_install_scale`, `bench_prep`): the lab
//! inventory grown to N nodes, the lab site as a guard, and running a command under GNU
//! `/usr/bin/time -v` for its wall time and peak RSS.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// `inventory/lab`'s nodes.yaml (already copied to `inv`) rewritten for `n` nodes: the three
/// masters, then `worker-3`.. as GPU workers of the same class, each with its own BMC on
/// `127.0.0.1:PORT` (free ports), TLS with Basic auth verified against the CA `bootstrap-lab
/// up` writes to `secrets/bmc-ca.pem` (as on a site), its own UUID, MAC and address on the lab's
/// machine network (192.168.111.20 + index: node 0 keeps the rendezvous IP). The system is
/// addressed by its UUID, the id sushy-tools serves it at, as a site's inventory names a BMC's
/// fixed system id (`System.Embedded.1`); by name every request to it would be two (a 307 to
/// the UUID first), which on two cores halves what the emulators answer.
pub fn grow_nodes(inv: &Path, n: usize) {
    assert!(
        (3..=200).contains(&n),
        "the lab's machine network holds 3 to 200 nodes, not {n}"
    );
    let path = inv.join("nodes.yaml");
    let shipped = fs_err::read_to_string(&path).expect("reading nodes.yaml");
    let classes = &shipped[shipped.find("classes:").expect("nodes.yaml has classes")
        ..shipped.find("\nnodes:").expect("nodes.yaml has nodes")];
    let mut text = format!(
        "apiVersion: bootstrap.openshift-ai.dev/v1alpha1\nkind: Nodes\n{classes}\nnodes:\n"
    );
    for (i, port) in free_ports(n).into_iter().enumerate() {
        let (name, role) = match i {
            0..=2 => (format!("master-{i}"), "master"),
            _ => (format!("worker-{i}"), "worker"),
        };
        let uuid = format!("6c9e1f2a-5b3d-4c8e-9f10-{i:012}");
        writeln!(
            text,
            "- hostname: {name}\n  role: {role}\n  class: xe9680\n  labels:\n    nvidia.com/gpu.present: \"true\"\n  bmc:\n    address: https://127.0.0.1:{port}/redfish/v1/Systems/{uuid}\n    credentials:\n      file: secrets/bmc.example\n    ca:\n      file: secrets/bmc-ca.pem\n    systemUUID: {uuid}\n  rootDevice:\n    deviceName: /dev/vda\n  nics:\n  - name: enp1s0\n    mac: aa:bb:cc:00:01:{i:02x}\n  addresses:\n  - interface: enp1s0\n    ip: 192.168.111.{}/24",
            20 + i
        )
        .unwrap();
    }
    fs_err::write(&path, text).expect("writing nodes.yaml");
}

/// `line` inserted under the top-level `section:` of site.yaml in `inv` (e.g. `  forks: 24`
/// under `prep:`).
pub fn site_setting(inv: &Path, section: &str, line: &str) {
    let path = inv.join("site.yaml");
    let text = fs_err::read_to_string(&path).expect("reading site.yaml");
    let head = format!("\n{section}:\n");
    let at = text
        .find(&head)
        .unwrap_or_else(|| panic!("site.yaml has no {section}: section"))
        + head.len();
    let text = format!("{}{line}\n{}", &text[..at], &text[at..]);
    fs_err::write(&path, text).expect("writing site.yaml");
}

/// `n` ports free on 127.0.0.1 when this returns.
fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("binding a free port"))
        .collect();
    held.iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

/// A lab site brought up by a bench, taken down when the bench ends however it ends.
pub struct LabSite {
    /// The `bootstrap-lab` binary.
    pub bin: String,
    /// Its state dir.
    pub state: PathBuf,
}

impl LabSite {
    /// `bootstrap-lab up --inventory INV --state STATE EXTRA...`; panics with its output when
    /// it fails.
    pub fn up(bin: &str, inv: &Path, state: &Path, extra: &[&str]) -> LabSite {
        let lab = LabSite {
            bin: bin.to_string(),
            state: state.to_path_buf(),
        };
        let mut cmd = Command::new(bin);
        cmd.arg("up")
            .arg("--inventory")
            .arg(inv)
            .arg("--state")
            .arg(state)
            .args(extra);
        checked(&mut cmd, "bootstrap-lab up");
        lab
    }

    /// The resident memory of the lab's processes (emulators, site process, sshds, dnsmasq,
    /// chronyd: those naming its state dir), in MiB, and how many there are.
    pub fn rss_mib(&self) -> (f64, usize) {
        let pids = bootstrap_lab::site::process::of_lab(&self.state);
        let kib: u64 = pids.iter().map(|p| status_kib(*p, "VmRSS:")).sum();
        (kib as f64 / 1024.0, pids.len())
    }

    /// `bootstrap-lab status --output json`.
    pub fn status(&self) -> serde_json::Value {
        let mut cmd = Command::new(&self.bin);
        cmd.arg("status")
            .arg("--state")
            .arg(&self.state)
            .args(["--output", "json"]);
        serde_json::from_slice(&checked(&mut cmd, "bootstrap-lab status").stdout)
            .expect("lab status JSON")
    }

    /// Waits (at most `limit`) until `n` SSH hosts run: the site process starts a node's once
    /// the simulated install finished it, a moment after the wait stage saw the cluster done.
    pub fn wait_hosts(&self, n: usize, limit: Duration) {
        let start = std::time::Instant::now();
        loop {
            let status = self.status();
            let running = status["hosts"]
                .as_array()
                .map_or(0, |h| h.iter().filter(|h| h["running"] == true).count());
            if running >= n {
                return;
            }
            assert!(
                start.elapsed() < limit,
                "{running} of {n} SSH hosts run after {limit:?}: {status}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Each node's reset count, from `bootstrap-lab status --output json`.
    pub fn resets(&self) -> Vec<(String, u64)> {
        let status = self.status();
        status["nodes"]
            .as_array()
            .expect("lab status lists its nodes")
            .iter()
            .map(|n| {
                (
                    n["node"].as_str().unwrap_or_default().to_string(),
                    n["resets"].as_u64().unwrap_or_default(),
                )
            })
            .collect()
    }
}

impl Drop for LabSite {
    fn drop(&mut self) {
        let _ = Command::new(&self.bin)
            .args(["down", "--state"])
            .arg(&self.state)
            .output();
    }
}

fn status_kib(pid: u32, field: &str) -> u64 {
    fs_err::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// The binary the variable `var` names (else `default`), as an absolute path: the benches run
/// some commands in another directory.
pub fn binary(var: &str, default: &str) -> String {
    let path = std::env::var(var).unwrap_or_else(|_| default.into());
    fs_err::canonicalize(&path)
        .unwrap_or_else(|e| panic!("{var}: {e} (build it, or name a binary)"))
        .display()
        .to_string()
}

/// Runs `cmd`; panics naming `what` with its output unless it succeeds.
pub fn checked(cmd: &mut Command, what: &str) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// What GNU time measured of one run.
#[derive(Clone, Copy, Debug, Default)]
pub struct Timed {
    /// Wall time.
    pub wall: Duration,
    /// Peak resident set size, MiB.
    pub rss_mib: f64,
    /// User + system CPU seconds.
    pub cpu: f64,
    /// CPU seconds the whole machine was busy while it ran (every process: the lab's emulators,
    /// sshds and the nodes' commands as well as the tool), from `/proc/stat`.
    pub machine_cpu: f64,
}

/// CPU seconds this machine has been busy since boot (`/proc/stat`: user, nice, system, irq,
/// softirq and steal; not idle or I/O wait), in the kernel's 1/100 s ticks.
pub fn machine_busy() -> f64 {
    let stat = fs_err::read_to_string("/proc/stat").expect("reading /proc/stat");
    let ticks: Vec<f64> = stat
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("cpu "))
        .expect("/proc/stat starts with the cpu line")
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0.0))
        .collect();
    let at = |i: usize| ticks.get(i).copied().unwrap_or(0.0);
    (at(0) + at(1) + at(2) + at(5) + at(6) + at(7)) / 100.0
}

/// Runs `program ARGS` under `/usr/bin/time -v` (its report in `report`); the measurements and
/// the output. Panics when GNU time is missing; the command's own status is the caller's.
pub fn timed(
    program: &str,
    args: &[String],
    env: &[(&str, &str)],
    report: &Path,
) -> (Timed, Output) {
    let busy = machine_busy();
    let out = Command::new("/usr/bin/time")
        .arg("-v")
        .arg("-o")
        .arg(report)
        .arg(program)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("running /usr/bin/time (apt-get install time)");
    let machine_cpu = machine_busy() - busy;
    let text = fs_err::read_to_string(report).expect("reading GNU time's report");
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(name))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| panic!("GNU time's report has no {name}: {text}"))
    };
    let wall = field("Elapsed (wall clock) time (h:mm:ss or m:ss):");
    let secs = wall.split(':').fold(0.0, |acc, part| {
        acc * 60.0 + part.parse::<f64>().unwrap_or(0.0)
    });
    let num = |name: &str| field(name).parse::<f64>().unwrap_or(0.0);
    let t = Timed {
        wall: Duration::from_secs_f64(secs),
        rss_mib: num("Maximum resident set size (kbytes):") / 1024.0,
        cpu: num("User time (seconds):") + num("System time (seconds):"),
        machine_cpu,
    };
    (t, out)
}
