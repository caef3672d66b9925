//! The whole journey against the lab site: `bootstrap install` stops at prep on the two
//! findings the lab plants, `bootstrap-lab repair` does what the engineer would (master-1's GPU
//! reseated, master-2 rebooted with its MachineConfig in effect, no BMC touched), and the same
//! install command continues at prep and hands the cluster to Argo CD, surviving a kill -9 in
//! its handoff stage. And the repair command on its own: refused without a running lab or an
//! installed node, refused for irdma without a MachineConfig to keep it out, and clearing
//! exactly the planted findings. Uses the lab inventory's machine network: the `lab-site` group.

use crate::install_lab::Lab;
use crate::support;
use crate::support::labsite::{lab_inventory, lab_prep, run_lab, run_site, SiteLab};
use crate::support::run::{json, ok};

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// `bootstrap-lab repair --state STATE NODES... --output json`.
fn repair(state: &Path, nodes: &[&str]) -> Output {
    let mut args = vec![
        "repair",
        "--state",
        state.to_str().unwrap(),
        "--output",
        "json",
    ];
    args.extend_from_slice(nodes);
    run_lab(&args)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A node of a repair report.
fn repaired<'a>(report: &'a Value, node: &str) -> &'a Value {
    report["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == node)
        .unwrap_or_else(|| panic!("{node} not in {report}"))
}

/// Each node's prep findings (`bootstrap prep --output json`).
fn findings(inv: &Path, run: &Path) -> Vec<(String, Vec<String>)> {
    let o = run_site(&[
        "prep",
        "--inventory",
        inv.to_str().unwrap(),
        "--run",
        run.to_str().unwrap(),
        "--output",
        "json",
    ]);
    let report: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {o:?}"));
    report["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            assert_eq!(n["reachable"], true, "{n}");
            let f = n["findings"].as_array().unwrap();
            let f = f.iter().map(|f| f.as_str().unwrap().to_string()).collect();
            (n["node"].as_str().unwrap().to_string(), f)
        })
        .collect()
}

/// The iso stage's MachineConfig for `role`, byte for byte as `install::stage::iso` writes it.
fn irdma_machine_config(role: &str) -> String {
    format!("apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 99-{role}-blacklist-irdma\n  labels:\n    machineconfiguration.openshift.io/role: {role}\nspec:\n  kernelArguments:\n  - module_blacklist=irdma\n")
}

/// Refused without a lab and on a node not installed; with every host up (no install, so no
/// ISO and no MachineConfig) master-2's irdma is refused before anything changes, while
/// master-1's GPU is reseated alone; once the cluster carries the iso stage's MachineConfig,
/// master-2 reboots without irdma and prep finds nothing. No node's BMC is touched, and a
/// rebooted node keeps its host key.
#[test]
fn repair_is_refused_without_a_running_lab_and_clears_exactly_the_planted_findings() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("site");
    let o = repair(&state, &[]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(stderr(&o).contains("no lab is up at"), "{}", stderr(&o));

    let (inv, _) = lab_inventory(tmp.path(), false);
    let site = inv.join("site.yaml");
    let mut lines: Vec<String> = fs_err::read_to_string(&site)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    lab_prep(&inv, &mut lines);
    fs_err::write(&site, lines.join("\n") + "\n").unwrap();

    // Up, but nothing installed: no node has an SSH host yet.
    let (lab, _) = SiteLab::up(&inv, &state, &[]);
    let o = repair(&state, &["master-1"]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(
        stderr(&o).contains("master-1 is not up: its SSH host is not running"),
        "{}",
        stderr(&o)
    );
    let o = repair(&state, &["master-9"]);
    assert!(
        stderr(&o).contains("master-9 is not a node of the lab"),
        "{}",
        stderr(&o)
    );
    lab.down();
    let o = repair(&state, &[]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(stderr(&o).contains("no lab is up at"), "{}", stderr(&o));
    drop(lab);

    let (lab, _) = SiteLab::up(&inv, &state, &["--hosts-up"]);
    let wait_hosts = Instant::now() + Duration::from_secs(60);
    while lab.status()["hosts"].as_array().map_or(0, Vec::len) < 3 {
        assert!(Instant::now() < wait_hosts, "{}", lab.status());
        std::thread::sleep(Duration::from_millis(200));
    }
    let run = tmp.path().join("run");
    let before = findings(&inv, &run);
    let planted: Vec<(&str, usize)> = before.iter().map(|(n, f)| (n.as_str(), f.len())).collect();
    assert_eq!(planted, [("master-0", 0), ("master-1", 1), ("master-2", 1)]);
    let keys = |lab: &SiteLab| -> Vec<(Value, Value)> {
        let status = lab.status();
        let hosts = status["hosts"].as_array().unwrap();
        hosts
            .iter()
            .map(|h| (h["node"].clone(), h["hostKey"].clone()))
            .collect()
    };
    let keys_before = keys(&lab);

    // No MachineConfig in the cluster (no ISO was ever booted): irdma is refused, and nothing
    // changed, not even master-1 asked for in the same command.
    let o = repair(&state, &[]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = stderr(&o);
    assert!(
        err.contains("master-2: irdma is loaded and no MachineConfig of pool master")
            && err.contains("day1.blacklistIrdma"),
        "{err}"
    );
    assert_eq!(findings(&inv, &run), before);

    let o = repair(&state, &["master-1"]);
    let r: Value = serde_json::from_str(&ok(&o)).unwrap();
    let m1 = repaired(&r, "master-1");
    assert_eq!(m1["reseated"], serde_json::json!(["0000:9a:00.0"]), "{r}");
    assert_eq!(
        (m1["rebooted"].clone(), m1["gpus"].clone()),
        (Value::from(true), Value::from(8))
    );
    assert_eq!(r["nodes"].as_array().unwrap().len(), 1, "{r}");
    let after = findings(&inv, &run);
    let after: Vec<(&str, usize)> = after.iter().map(|(n, f)| (n.as_str(), f.len())).collect();
    assert_eq!(after, [("master-0", 0), ("master-1", 0), ("master-2", 1)]);

    // The cluster as the site process records it from an ISO holding the iso stage's
    // MachineConfig for the control plane.
    let manifests = tmp.path().join("openshift");
    fs_err::create_dir_all(&manifests).unwrap();
    fs_err::write(
        manifests.join("99-master-blacklist-irdma.yaml"),
        irdma_machine_config("master"),
    )
    .unwrap();
    let configs = bootstrap_lab::site::machineconfig::from_manifests(&manifests).unwrap();
    bootstrap_lab::site::machineconfig::record(&state, &configs).unwrap();
    let o = repair(&state, &[]);
    let r: Value = serde_json::from_str(&ok(&o)).unwrap();
    assert_eq!(repaired(&r, "master-0")["rebooted"], false, "{r}");
    assert_eq!(repaired(&r, "master-1")["rebooted"], false, "{r}");
    let m2 = repaired(&r, "master-2");
    assert_eq!(m2["unloaded"], serde_json::json!(["irdma"]), "{r}");
    assert_eq!(
        m2["machineConfigs"],
        serde_json::json!(["99-master-blacklist-irdma"]),
        "{r}"
    );
    assert_eq!(
        m2["kernelArguments"],
        serde_json::json!(["module_blacklist=irdma"]),
        "{r}"
    );
    for (node, f) in findings(&inv, &run) {
        assert!(f.is_empty(), "{node}: {f:?}");
    }
    assert_eq!(
        keys(&lab),
        keys_before,
        "a rebooted node changed its host key"
    );
    for (node, resets) in lab.resets() {
        assert_eq!(resets, 0, "{node}'s BMC was reset");
    }
}

/// `bootstrap install` with the wait polling fast (the lab's steps are short).
fn install(lab: &Lab) -> Command {
    let run = lab.run_dir();
    let mut cmd = support::run::command(&[
        "install",
        "--inventory",
        lab.inventory.to_str().unwrap(),
        "--run",
        run.to_str().unwrap(),
    ]);
    cmd.env("BOOTSTRAP_TEST_WAIT_POLL_MS", "100")
        .env("NO_COLOR", "1");
    cmd
}

/// Each stage's (status, [started, ended, seconds]) from `bootstrap install status --output json`.
fn stages(run: &Path) -> Vec<(String, String, Value)> {
    let status: Value = serde_json::from_str(&ok(&support::run::bootstrap(&[
        "install",
        "status",
        "--run",
        run.to_str().unwrap(),
        "--output",
        "json",
    ])))
    .unwrap();
    status["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["stage"].as_str().unwrap().to_string(),
                s["status"].as_str().unwrap().to_string(),
                serde_json::json!([s["started"], s["ended"], s["seconds"]]),
            )
        })
        .collect()
}

/// The action a run's text report gives `stage` (`skipped`, `ran`).
fn action(stdout: &str, stage: &str) -> String {
    stdout
        .lines()
        .find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some(stage)).then(|| w.next().unwrap_or_default().to_string())
        })
        .unwrap_or_else(|| format!("no line for {stage} in:\n{stdout}"))
}

/// Install to the prep failure, repair, the same command again killed with -9 while its
/// handoff stage runs, then the same command once more: it continues at prep (validate..wait
/// keep their first run's times, no node is reset again) and ends with all eight stages done,
/// each BMC reset once, and Argo CD owning the cluster (the root and every child Application
/// Synced and Healthy, as real kubectl shows them).
#[test]
fn the_install_continues_at_prep_after_repair_and_survives_kill_9_in_the_handoff() {
    let lab = Lab::new();
    support::labsite::site_bmcs(&lab.inventory, &support::labsite::free_ports());
    // The spare machine, built powered off, for day two at the end.
    support::labsite::with_spare(&lab.inventory);
    // The mirror's cluster resources beside the record, with the lab catalog's CatalogSource
    // (this mirror holds releases only; the lab OLM knows the catalog by its repository).
    let mut resources = bootstrap::openshift::cluster::ClusterResources::new(&[]);
    resources.add_catalog(
        bootstrap::oci::reference::ImageRef::parse(
            "registry.lab.example.com:8443/mirror/redhat/redhat-operator-index:v4.18",
        )
        .unwrap(),
    );
    resources
        .write(&lab.inventory.join("cluster-resources"))
        .unwrap();
    let state = lab.dir.path().join("site");
    let (site, _) = SiteLab::up(
        &lab.inventory,
        &state,
        &["--step", "400ms", "--inject-rogue-csr"],
    );
    let repo = lab.dir.path().join("gitops");
    ok(&support::run::bootstrap(&[
        "gitops",
        "init",
        repo.to_str().unwrap(),
        "--inventory",
        lab.inventory.to_str().unwrap(),
    ]));
    support::labsite::push_site_repository(&repo, &lab.inventory, lab.dir.path());
    let run = lab.run_dir();

    let o = install(&lab).output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(1), "{stdout}\n{}", stderr(&o));
    assert!(
        stdout.contains(
            "2 of 3 nodes did not pass prep: master-1: 7 of 8 H200 found, missing 0000:9a:00.0"
        ) && stdout.contains("master-2: irdma is loaded beside mlx5_core"),
        "{stdout}"
    );
    let first = stages(&run);
    let statuses: Vec<&str> = first.iter().map(|(_, s, _)| s.as_str()).collect();
    assert_eq!(
        statuses,
        [
            "done", "done", "done", "done", "done", "done", "failed", "pending", "pending",
            "pending", "pending", "pending"
        ]
    );

    let o = repair(&state, &[]);
    let r: Value = serde_json::from_str(&ok(&o)).unwrap();
    assert_eq!(repaired(&r, "master-0")["rebooted"], false, "{r}");
    assert_eq!(
        repaired(&r, "master-1")["reseated"],
        serde_json::json!(["0000:9a:00.0"]),
        "{r}"
    );
    let m2 = repaired(&r, "master-2");
    assert_eq!(m2["unloaded"], serde_json::json!(["irdma"]), "{r}");
    // What the ISO carried: the inventory's own manifest and the iso stage's irdma one.
    assert_eq!(
        m2["machineConfigs"],
        serde_json::json!(["50-master-chrony", "99-master-blacklist-irdma"]),
        "{r}"
    );

    // The same command, killed with -9 while its handoff stage holds (after its work, before
    // publishing: the documented test hook).
    let mut child = install(&lab)
        .env("BOOTSTRAP_TEST_STAGE_PAUSE", "handoff")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let handoff_running = run.join("state.json").exists()
            && json(&run.join("state.json"))["stages"][7]["status"] == "running";
        if handoff_running && run.join(".staging/handoff/handoff.json").exists() {
            break;
        }
        if let Some(status) = child.try_wait().unwrap() {
            let log = fs_err::read_to_string(run.join("logs/handoff.log")).unwrap_or_default();
            panic!("install ended ({status}) before its handoff stage held:\n{log}");
        }
        assert!(Instant::now() < deadline, "the handoff stage never held");
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        !run.join("handoff").exists(),
        "a killed handoff published its outputs"
    );

    let o = install(&lab).output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{}", stderr(&o));
    for stage in ["validate", "render", "tools", "iso", "boot", "wait", "prep"] {
        assert_eq!(action(&stdout, stage), "skipped", "{stdout}");
    }
    assert_eq!(action(&stdout, "handoff"), "ran", "{stdout}");
    assert!(stdout.contains("was interrupted"), "{stdout}");
    // No node to add yet: the day-two stages say so.
    for stage in ["add-image", "add-boot", "add-join", "add-prep"] {
        assert_eq!(action(&stdout, stage), "ran", "{stdout}");
    }
    assert!(stdout.contains("no nodes to add"), "{stdout}");
    let last = stages(&run);
    for ((stage, status, attempt), (_, _, before)) in last.iter().zip(&first) {
        assert_eq!(status, "done", "{stage}: {last:?}");
        if !matches!(stage.as_str(), "prep" | "handoff") && !stage.starts_with("add-") {
            assert_eq!(attempt, before, "{stage} ran again");
        }
    }
    assert_eq!(resets(&site), "master-0:1 master-1:1 master-2:1 worker-0:0");

    let report = json(&run.join("handoff/handoff.json"));
    let apps = report["applications"].as_array().unwrap();
    assert!(apps.len() >= 6, "{report}");
    let kubectl = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(run.join("iso/work/auth/kubeconfig"))
        .args(["get", "applications", "-A"])
        .output()
        .unwrap();
    let table = ok(&kubectl);
    let rows: Vec<&str> = table.lines().skip(1).collect();
    assert_eq!(rows.len(), apps.len(), "{table}");
    assert!(
        rows.iter()
            .all(|r| r.contains("Synced") && r.contains("Healthy")),
        "{table}"
    );
    assert!(
        rows.iter()
            .any(|r| r.split_whitespace().nth(1) == Some("root")),
        "{table}"
    );

    day_two(&lab, &site, &run, &last);
}

/// Each lab BMC's resets, `NODE:N` by node name.
fn resets(site: &SiteLab) -> String {
    let mut r = site.resets();
    r.sort();
    let r: Vec<String> = r.iter().map(|(n, c)| format!("{n}:{c}")).collect();
    r.join(" ")
}

/// Day two on the installed lab: the spare machine's entry appended to nodes.yaml, the same
/// command killed with -9 while add-boot holds (after worker-0's reset), then again: only
/// worker-0's BMC was reset, once; the stages that installed the cluster, prep and the hand-off
/// keep their times; worker-0's two CSRs were approved and the rogue ones the lab injects (a
/// client CSR for a host nobody adds, a serving CSR in worker-0's name with an address it does
/// not have) are left pending and reported; worker-0 is Ready with the inventory's labels and
/// taint; `install status` shows it added. A third run changes nothing.
fn day_two(lab: &Lab, site: &SiteLab, run: &Path, installed: &[(String, String, Value)]) {
    let spares =
        fs_err::read_to_string(lab.inventory.join(bootstrap_lab::site::SPARES_FILE)).unwrap();
    let entry = &spares[spares.find("- hostname: worker-0").unwrap()..];
    let nodes = lab.inventory.join("nodes.yaml");
    let text = fs_err::read_to_string(&nodes).unwrap();
    fs_err::write(&nodes, format!("{}\n{entry}", text.trim_end())).unwrap();

    let mut child = install(lab)
        .env("BOOTSTRAP_TEST_STAGE_PAUSE", "add-boot")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let holding = json(&run.join("state.json"))["stages"][9]["status"] == "running"
            && run.join(".staging/add-boot/worker-0.json").exists();
        if holding {
            break;
        }
        if let Some(status) = child.try_wait().unwrap() {
            let log = fs_err::read_to_string(run.join("logs/add-image.log")).unwrap_or_default()
                + &fs_err::read_to_string(run.join("logs/add-boot.log")).unwrap_or_default();
            panic!("install ended ({status}) before add-boot held:\n{log}");
        }
        assert!(Instant::now() < deadline, "add-boot never held");
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(resets(site), "master-0:1 master-1:1 master-2:1 worker-0:1");
    let node_iso = run.join("add-image/node.x86_64.iso");
    assert!(node_iso.is_file(), "add-image published no node ISO");

    let o = install(lab).output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{}", stderr(&o));
    // The killed run validated the inventory with its new node already.
    assert_eq!(action(&stdout, "validate"), "skipped", "{stdout}");
    assert!(stdout.contains("day two adds worker-0"), "{stdout}");
    for stage in ["render", "boot"] {
        // Their inputs changed (a node more), but they installed the cluster: kept.
        assert_eq!(action(&stdout, stage), "kept", "{stdout}");
    }
    for stage in ["tools", "iso", "wait", "prep", "handoff", "add-image"] {
        assert_eq!(action(&stdout, stage), "skipped", "{stdout}");
    }
    for stage in ["add-boot", "add-join", "add-prep"] {
        assert_eq!(action(&stdout, stage), "ran", "{stdout}");
    }
    assert_eq!(
        resets(site),
        "master-0:1 master-1:1 master-2:1 worker-0:1",
        "a node was reset again"
    );
    let after = stages(run);
    for ((stage, status, attempt), (_, _, before)) in after.iter().zip(installed) {
        assert_eq!(status, "done", "{stage}: {after:?}");
        if !stage.starts_with("add-") && stage != "validate" {
            assert_eq!(attempt, before, "{stage} ran again on day two");
        }
    }
    let boot: Value = json(&run.join("add-boot/worker-0.json"));
    assert_eq!(boot["resets"], 1, "{boot}");
    let join = json(&run.join("add-join/join.json"));
    let approved = join["nodes"]["worker-0"]["approved"].as_array().unwrap();
    let kinds: Vec<&str> = approved.iter().map(|a| a[1].as_str().unwrap()).collect();
    assert_eq!(kinds, ["client", "serving"], "{join}");
    let left = join["left"].as_array().unwrap();
    assert!(
        left.iter().any(|l| l["node"] == "rogue-worker-0")
            && left.iter().any(|l| l["node"] == "worker-0"
                && l["why"].as_str().unwrap_or_default().contains("192.0.2.66")),
        "{join}"
    );
    let kubeconfig = run.join("iso/work/auth/kubeconfig");
    let kubectl = |args: &[&str]| {
        ok(&Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(args)
            .output()
            .unwrap())
    };
    let csrs = kubectl(&["get", "csr"]);
    let pending = csrs.lines().filter(|l| l.contains("Pending")).count();
    assert_eq!(pending, 2, "the rogue CSRs stay pending:\n{csrs}");
    let node: Value =
        serde_json::from_str(&kubectl(&["get", "node", "worker-0", "-o", "json"])).unwrap();
    assert_eq!(
        node["metadata"]["labels"]["nvidia.com/gpu.present"], "true",
        "{node}"
    );
    assert!(
        node["spec"]["taints"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["key"] == "nvidia.com/gpu" && t["effect"] == "NoSchedule"),
        "{node}"
    );
    assert!(
        node["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True"),
        "{node}"
    );
    // Day one's prep put the masters' labels on too (inventory/lab/nodes.yaml).
    let master: Value =
        serde_json::from_str(&kubectl(&["get", "node", "master-0", "-o", "json"])).unwrap();
    assert_eq!(
        master["metadata"]["labels"]["nvidia.com/gpu.present"], "true",
        "{master}"
    );
    let status = ok(&support::run::bootstrap(&[
        "install",
        "status",
        "--run",
        run.to_str().unwrap(),
    ]));
    assert!(
        status.contains("day two worker-0 (added): prepped and labelled"),
        "{status}"
    );

    // Once more: nothing to do, nobody reset.
    let o = install(lab).output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{}", stderr(&o));
    for stage in ["add-image", "add-boot", "add-join", "add-prep"] {
        assert_eq!(action(&stdout, stage), "skipped", "{stdout}");
    }
    assert_eq!(resets(site), "master-0:1 master-1:1 master-2:1 worker-0:1");
}
