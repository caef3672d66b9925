//! The lab's SSH hosts (`bootstrap-lab up --hosts-up`): a real OpenSSH sshd per node at its
//! machine-network address, reached with the real OpenSSH client as the `core` user with the
//! lab's key, each node showing its own fixture (seven GPUs on node 1, irdma on node 2), the
//! stand-ins behaving as the programs they imitate, writes to a node's /etc staying in the
//! node, and lab down leaving no sshd and no session. Uses the lab inventory's machine network,
//! so it runs in the `lab-site` group (.config/nextest.toml).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::labsite::{lab_inventory, SiteLab as Lab};
use crate::support::run::repo;

/// The real OpenSSH client logging in as `core` with the lab's key, learning host keys into a
/// known_hosts file of the test's own.
struct Client {
    key: PathBuf,
    known_hosts: PathBuf,
}

impl Client {
    fn new(dir: &Path) -> Client {
        let key = dir.join("id_ed25519");
        fs_err::copy(repo("inventory/lab/secrets/id_ed25519"), &key).unwrap();
        fs_err::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        Client {
            key,
            known_hosts: dir.join("known_hosts"),
        }
    }

    fn run(&self, ip: &str, command: &str) -> Output {
        Command::new("ssh")
            .arg("-i")
            .arg(&self.key)
            .arg("-o")
            .arg(format!("UserKnownHostsFile={}", self.known_hosts.display()))
            .args([
                "-o",
                "StrictHostKeyChecking=accept-new",
                "-o",
                "BatchMode=yes",
            ])
            .args(["-o", "ConnectTimeout=10", "-o", "LogLevel=ERROR"])
            .arg(format!("core@{ip}"))
            .arg(command)
            .output()
            .unwrap()
    }

    /// `command` on `ip`, which must succeed; its stdout.
    fn ok(&self, ip: &str, command: &str) -> String {
        let o = self.run(ip, command);
        assert!(
            o.status.success(),
            "{ip}: {command}: {}\n{}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    }

    /// `command` on `ip`, which must fail with `code`; its stderr.
    fn fails(&self, ip: &str, command: &str, code: i32) -> String {
        let o = self.run(ip, command);
        assert_eq!(o.status.code(), Some(code), "{ip}: {command}: {o:?}");
        String::from_utf8(o.stderr).unwrap()
    }
}

const NODE0: &str = "192.168.111.20";
const NODE1: &str = "192.168.111.21";
const NODE2: &str = "192.168.111.22";

/// The pids of processes whose command line contains `needle`.
fn processes(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in fs_err::read_dir("/proc").unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().to_string();
        if !name.bytes().all(|b| b.is_ascii_digit()) || name == std::process::id().to_string() {
            continue;
        }
        if let Ok(raw) = fs_err::read(format!("/proc/{name}/cmdline")) {
            let line = String::from_utf8_lossy(&raw).replace('\0', " ");
            if line.contains(needle) && bootstrap_lab::site::process::alive(name.parse().unwrap()) {
                found.push(format!("{name}: {line}"));
            }
        }
    }
    found
}

/// Every node's SSH host comes up with `--hosts-up` and is recorded (address, host key, pid)
/// in lab status; the OpenSSH client learns exactly the recorded host key.
fn check_recorded_hosts(status: &Value, client: &Client) {
    let hosts = status["hosts"].as_array().unwrap();
    let nodes: Vec<&str> = hosts.iter().map(|h| h["node"].as_str().unwrap()).collect();
    assert_eq!(nodes, ["master-0", "master-1", "master-2"], "{status:#}");
    for (h, ip) in hosts.iter().zip([NODE0, NODE1, NODE2]) {
        assert_eq!(h["address"], format!("{ip}:22"));
        assert_eq!(h["running"], true);
        assert_eq!(client.ok(ip, "hostname -I >/dev/null; echo ok"), "ok\n");
    }
    let known = fs_err::read_to_string(&client.known_hosts).unwrap();
    for h in hosts {
        assert!(
            known.contains(h["hostKey"].as_str().unwrap()),
            "{known}\nlacks {}",
            h["hostKey"]
        );
    }
}

/// The fixtures: eight H200s on node 0 and seven on node 1 (0000:9a:00.0 missing), irdma
/// loaded on node 2 only, the root disk behind its by-path name, chrony synced to the
/// inventory's NTP source, a journal with no hardware fault.
fn check_fixtures(c: &Client) {
    let gpus = "grep -l 0x2335 /sys/bus/pci/devices/*/device | wc -l";
    assert_eq!(c.ok(NODE0, gpus).trim(), "8");
    assert_eq!(c.ok(NODE1, gpus).trim(), "7");
    let missing = c.ok(NODE1, "ls /sys/bus/pci/devices/0000:9a:00.0 2>&1 || true");
    assert!(missing.contains("No such file"), "{missing}");
    assert_eq!(
        c.ok(NODE0, "basename $(readlink /sys/bus/pci/devices/0000:9a:00.0/driver); cat /sys/bus/pci/devices/0000:9a:00.0/numa_node"),
        "nvidia\n1\n"
    );
    let irdma = "awk '$1 == \"irdma\"' /proc/modules | wc -l";
    assert_eq!(c.ok(NODE2, irdma).trim(), "1");
    assert_eq!(c.ok(NODE0, irdma).trim(), "0");
    assert_eq!(
        c.ok(
            NODE1,
            "readlink -f /dev/disk/by-path/pci-0000:04:00.0; cat /sys/block/vda/queue/rotational"
        ),
        "/dev/vda\n0\n"
    );
    assert_eq!(
        c.ok(NODE0, "chronyc -n -c sources")
            .split(',')
            .take(3)
            .collect::<Vec<_>>(),
        ["^", "*", "192.168.111.1"]
    );
    assert!(c
        .ok(NODE0, "chronyc -n -c tracking")
        .trim_end()
        .ends_with(",Normal"));
    let journal = c.ok(NODE0, "journalctl -b -p err --no-pager");
    assert!(journal.lines().count() >= 3, "{journal}");
    let fault = regex::Regex::new(r"Xid|Hardware Error|EDAC|mlx5_core.*(fail|error)").unwrap();
    assert!(!fault.is_match(&journal), "{journal}");
}

/// sudo works for core; modprobe and systemctl behave as the real ones (root needed to change
/// anything, unknown names refused with their messages, state kept).
fn check_stand_ins(c: &Client) {
    assert_eq!(c.ok(NODE0, "sudo -n id -u").trim(), "0");
    let err = c.fails(NODE2, "sudo -n modprobe nosuch", 1);
    assert!(
        err.contains("modprobe: FATAL: Module nosuch not found"),
        "{err}"
    );
    let err = c.fails(NODE2, "modprobe -r irdma", 1);
    assert!(err.contains("Operation not permitted"), "{err}");
    let err = c.fails(NODE2, "sudo -n modprobe -r mlx5_core", 1);
    assert!(err.contains("Module mlx5_core is in use"), "{err}");
    c.ok(NODE2, "sudo -n modprobe -r irdma");
    assert_eq!(
        c.ok(NODE2, "grep -c irdma /proc/modules || true").trim(),
        "0"
    );
    c.ok(NODE2, "sudo -n modprobe irdma");
    assert_eq!(c.ok(NODE2, "grep -c '^irdma ' /proc/modules").trim(), "1");
    assert_eq!(c.ok(NODE0, "systemctl is-active crio"), "active\n");
    let err = c.fails(NODE0, "systemctl stop crio", 1);
    assert!(err.contains("Interactive authentication required"), "{err}");
    c.ok(NODE0, "sudo -n systemctl stop crio");
    let o = c.run(NODE0, "systemctl is-active crio");
    assert_eq!(
        (o.status.code(), o.stdout.as_slice()),
        (Some(3), &b"inactive\n"[..])
    );
    assert_eq!(
        c.ok(NODE1, "systemctl is-active crio"),
        "active\n",
        "another node's unit"
    );
    c.ok(
        NODE0,
        "sudo -n systemctl start crio && sudo -n systemctl daemon-reload",
    );
    assert_eq!(c.ok(NODE0, "systemctl is-active crio"), "active\n");
    let err = c.fails(NODE0, "sudo -n systemctl restart nosuch", 5);
    assert!(err.contains("Unit nosuch.service not found."), "{err}");
}

/// A node's /etc/sysctl.conf is its own: written (appended and replaced by rename, as Ansible
/// does) on node 0, this machine's file and node 1's stay as they were; kernel-wide sysctls
/// cannot be changed from a node.
fn check_etc_is_the_nodes(c: &Client) {
    let machine = fs_err::read("/etc/sysctl.conf").unwrap();
    let node1 = c.ok(NODE1, "cat /etc/sysctl.conf");
    c.ok(
        NODE0,
        "echo 'vm.swappiness = 10' | sudo -n tee -a /etc/sysctl.conf >/dev/null && \
         sudo -n sh -c 'cp /etc/sysctl.conf /etc/.s.tmp && mv /etc/.s.tmp /etc/sysctl.conf' && \
         echo 'net.ipv4.ip_forward = 1' | sudo -n tee /etc/sysctl.d/90-lab.conf >/dev/null",
    );
    assert!(c
        .ok(NODE0, "cat /etc/sysctl.conf")
        .contains("vm.swappiness = 10"));
    assert_eq!(
        fs_err::read("/etc/sysctl.conf").unwrap(),
        machine,
        "this machine's file changed"
    );
    assert!(!Path::new("/etc/sysctl.d/90-lab.conf").exists());
    assert_eq!(c.ok(NODE1, "cat /etc/sysctl.conf"), node1);
    let swappiness = fs_err::read_to_string("/proc/sys/vm/swappiness").unwrap();
    let o = c.run(NODE0, "sudo -n sysctl -w vm.swappiness=7");
    assert!(!o.status.success(), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("permission denied on key \"vm.swappiness\""),
        "{o:?}"
    );
    assert_eq!(
        fs_err::read_to_string("/proc/sys/vm/swappiness").unwrap(),
        swappiness
    );
}

#[test]
fn hosts_up_serves_every_node_over_real_ssh_and_lab_down_ends_every_session() {
    let dir = tempfile::tempdir().unwrap();
    let (inv, _) = lab_inventory(dir.path(), false);
    let (lab, status) = Lab::up(&inv, &dir.path().join("state"), &["--hosts-up"]);
    let client = Client::new(dir.path());
    check_recorded_hosts(&status, &client);
    check_fixtures(&client);
    check_stand_ins(&client);
    check_etc_is_the_nodes(&client);
    // A session left running on a node (its own session and process group, as nohup and
    // setsid make it) ends with the lab.
    client.ok(
        NODE1,
        "setsid sleep 4242 </dev/null >/dev/null 2>&1 & echo started",
    );
    // The shell returns once it has forked; the child execs `sleep` a moment later (seen
    // missing under load), so wait for it to be there before counting.
    let mut waited = 0;
    while processes("sleep 4242").is_empty() && waited < 100 {
        std::thread::sleep(std::time::Duration::from_millis(50));
        waited += 1;
    }
    assert_eq!(processes("sleep 4242").len(), 1);
    let state = lab.state.display().to_string();
    assert!(!processes(&format!("{state}/hosts/")).is_empty());
    let removed = lab.down();
    assert!(
        removed["processes"].as_array().unwrap().len() >= 6,
        "{removed}"
    );
    assert_eq!(processes("sleep 4242"), Vec::<String>::new());
    assert_eq!(processes(&format!("{state}/hosts/")), Vec::<String>::new());
}
