//! The lab mirror rehearsal: the air-gap journey in miniature, on one machine. It starts a local
//! source registry, seeds it with `bootstrap-lab seed` (4.18 release payloads and their update
//! graph, an operator catalog of seven real packages, a modelcar; see docs/lab.md), mirrors
//! `mirrorsets/lab.yaml` to disk with `bootstrap mirror` (releases from the graph, the catalog
//! filtered and rebuilt), verifies the disk mirror, pushes it on to a second local registry (as
//! on the far side of the air gap) with its cluster resources, verifies that registry against
//! the record, then brings up the lab site (`bootstrap-lab up`: a sushy-tools Redfish BMC per
//! node, each over TLS verified against the lab CA with Basic auth; a network namespace per
//! node; the rendezvous and cluster API stand-ins, the Git server; dnsmasq and chronyd serving
//! the site's DNS and NTP), runs the read-only site preflight (`bootstrap preflight --output
//! json`: every check green, nothing changed on a BMC), writes the
//! site's GitOps repository (`bootstrap gitops init`, checked, pushed with real git to the
//! lab's Git server) and runs `bootstrap install` with the lab inventory pointed at that
//! registry (the release's own openshift-install and oc, lab stand-ins, extracted and pinned;
//! the agent ISO built and served; every node booted over Redfish; the simulated install
//! watched to the end; host prep over SSH on the lab's sshd hosts, which stops the run on the
//! seven GPUs and the irdma the lab plants). Then the engineer's part: `bootstrap-lab repair`
//! reseats master-1's GPU and reboots master-2 with its MachineConfig in effect (no BMC
//! touched), and the same `bootstrap install` again continues at prep (nothing before it runs
//! again) and ends with the handoff stage: the root and every child Application Synced and
//! Healthy. Then day two: the lab's spare machine (worker-0, built powered off) is appended to
//! nodes.yaml and the same command adds it (the node ISO from the release's `oc adm node-image
//! create`, worker-0's BMC alone reset, its CSRs approved while the rogue ones the lab injects
//! stay pending, prep, its labels and taint). The rehearsal checks from JSON that all twelve
//! stages are done, that validate..wait kept their first run's times, and that each BMC was
//! reset exactly once; `bootstrap gather` writes the support bundle; it prints the
//! Applications, the lab's status and the stage table, and takes the lab site down. The site
//! registry speaks TLS with its own CA and Basic auth, as a site's does. Everything listens on
//! 127.0.0.1 or in the lab's namespaces and stops at exit.
//!
//! Run it with `scripts/lab-rehearsal.sh` (which installs the registry and builds the tool).

#[path = "../tests/it/support/mod.rs"]
#[allow(dead_code, unused_imports)]
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use support::Registry;

fn run(bin: &str, args: &[String]) {
    run_allowing(bin, args, &[0]);
}

/// Runs `BIN ARGS` (`bootstrap` or `bootstrap-lab`); exits the rehearsal unless its status is
/// one of `ok`.
fn run_allowing(bin: &str, args: &[String], ok: &[i32]) {
    let name = std::path::Path::new(bin)
        .file_name()
        .map_or_else(|| bin.into(), |n| n.to_string_lossy());
    eprintln!("\n$ {name} {}", args.join(" "));
    let status = Command::new(bin)
        .args(args)
        .status()
        .unwrap_or_else(|e| panic!("running {bin}: {e}"));
    if !status.code().is_some_and(|c| ok.contains(&c)) {
        // A panic, not an exit: the lab site's guard still takes it down.
        panic!("lab rehearsal FAILED at: {name} {}", args.join(" "));
    }
}

/// `bootstrap preflight --output json` on the lab site: every check ok (the BMCs over verified
/// TLS, the cluster's names on the lab's dnsmasq, the lab's chronyd, the site registry with its
/// CA and the release by digest, the ISO server's address); the table shown.
fn preflight(bin: &str, inventory: &Path) {
    let dir = inventory.display().to_string();
    eprintln!("\n$ bootstrap preflight --inventory {dir} --output json");
    let out = Command::new(bin)
        .args(["preflight", "--inventory", &dir, "--output", "json"])
        .output()
        .unwrap_or_else(|e| panic!("running {bin}: {e}"));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "lab rehearsal FAILED: bootstrap preflight printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let checks = report["checks"].as_array().expect("the report's checks");
    for c in checks {
        eprintln!(
            "  {:<13} {:<36} {:<4} {}",
            c["area"].as_str().unwrap_or_default(),
            c["subject"].as_str().unwrap_or_default(),
            c["status"].as_str().unwrap_or_default(),
            c["detail"].as_str().unwrap_or_default()
        );
    }
    let not_green: Vec<&serde_json::Value> =
        checks.iter().filter(|c| c["status"] != "ok").collect();
    if !out.status.success() || !not_green.is_empty() || checks.len() < 19 {
        panic!("lab rehearsal FAILED: bootstrap preflight is not all green: {not_green:#?}");
    }
}

/// Host prep again on its own (`bootstrap prep`, as an engineer reruns it): every node reached
/// over SSH, master-0 passes, master-1 and master-2 fail on exactly the problem their fixture
/// plants, one line each, and the shipped playbooks pass on all three without changing them.
fn check_prep(bin: &str, inventory: &std::path::Path, run: &std::path::Path) {
    let args = [
        "prep",
        "--inventory",
        &inventory.display().to_string(),
        "--run",
        &run.display().to_string(),
        "--output",
        "json",
    ];
    eprintln!("\n$ bootstrap {}", args.join(" "));
    let out = Command::new(bin)
        .args(args)
        .output()
        .expect("running bootstrap");
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("prep's JSON report");
    let findings = |node: &str| -> Vec<String> {
        let n = report["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["node"] == node)
            .unwrap();
        assert_eq!(
            n["reachable"], true,
            "lab rehearsal FAILED: {node} unreachable: {n}"
        );
        n["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap().to_string())
            .collect()
    };
    let (m0, m1, m2) = (
        findings("master-0"),
        findings("master-1"),
        findings("master-2"),
    );
    assert!(m0.is_empty(), "lab rehearsal FAILED: master-0: {m0:?}");
    assert!(
        m1.len() == 1 && m1[0].starts_with("master-1: 7 of 8 H200 found, missing 0000:9a:00.0"),
        "lab rehearsal FAILED: master-1: {m1:?}"
    );
    assert!(
        m2.len() == 1 && m2[0].contains("irdma"),
        "lab rehearsal FAILED: master-2: {m2:?}"
    );
    for (path, pb) in report["playbooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (&p[0], &p[1]))
    {
        for (host, r) in pb["recap"].as_object().unwrap() {
            assert!(
                r["failed"] == 0 && r["changed"] == 0,
                "lab rehearsal FAILED: {path}: {host}: {r}"
            );
        }
    }
    eprintln!(
        "prep found what the lab plants, and nothing else:\n  {}\n  {}",
        m1[0], m2[0]
    );
}

/// The lab site, taken down when the rehearsal ends however it ends.
struct LabSite {
    /// The `bootstrap-lab` binary.
    bin: String,
    state: PathBuf,
}

impl Drop for LabSite {
    fn drop(&mut self) {
        eprintln!("\n$ bootstrap-lab down --state {}", self.state.display());
        let _ = Command::new(&self.bin)
            .args(["down", "--state"])
            .arg(&self.state)
            .status();
    }
}

/// The site's GitOps repository, before the install so that its handoff stage finds it: written
/// by `bootstrap gitops init` (the mirror's cluster resources beside the record the inventory
/// names), checked by `bootstrap gitops check`, and pushed with real `git` to the lab's Git
/// server (HTTPS verified against the CA lab up wrote into the inventory, the password through
/// GIT_ASKPASS).
fn site_repository(bin: &str, inventory: &Path, work: &Path) {
    let s = |v: &str| v.to_string();
    support::run::copy_dir(
        &work.join("cluster-resources"),
        &inventory.join("cluster-resources"),
    );
    let repo = work.join("gitops");
    for verb in ["init", "check"] {
        run(
            bin,
            &[
                s("gitops"),
                s(verb),
                repo.display().to_string(),
                s("--inventory"),
                inventory.display().to_string(),
            ],
        );
    }
    eprintln!(
        "\n$ git push https://192.168.111.1:8443/site.git main   (in {})",
        repo.display()
    );
    support::labsite::push_site_repository(&repo, inventory, work);
}

/// `BIN ARGS --output json`, parsed (exits the rehearsal unless it succeeds).
fn json(bin: &str, args: &[&str]) -> serde_json::Value {
    let out = Command::new(bin)
        .args(args)
        .args(["--output", "json"])
        .output()
        .unwrap_or_else(|e| panic!("running {bin}: {e}"));
    assert!(
        out.status.success(),
        "lab rehearsal FAILED at: {bin} {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("a JSON report")
}

/// Each stage's status and its last attempt's (started, ended, seconds), from
/// `bootstrap gather` of the finished run into `WORK/support-bundle.tar.gz`, extracted beside
/// it and checked with `sha256sum -c SHA256SUMS`, as a support engineer would open it.
fn support_bundle(bin: &str, inventory: &Path, run_dir: &Path, work: &Path) {
    let bundle = work.join("support-bundle.tar.gz");
    run(
        bin,
        &[
            "gather".to_string(),
            "--inventory".to_string(),
            inventory.display().to_string(),
            "--run".to_string(),
            run_dir.display().to_string(),
            "--out".to_string(),
            bundle.display().to_string(),
        ],
    );
    let dir = work.join("support-bundle");
    fs_err::create_dir_all(&dir).expect("creating the bundle's folder");
    let st = Command::new("tar")
        .arg("xzf")
        .arg(&bundle)
        .arg("-C")
        .arg(&dir)
        .status()
        .expect("running tar");
    assert!(
        st.success(),
        "lab rehearsal FAILED: tar xzf {}",
        bundle.display()
    );
    let top = fs_err::read_dir(&dir)
        .expect("reading the bundle's folder")
        .next()
        .expect("the bundle holds one folder")
        .expect("reading the bundle's folder")
        .path();
    let st = Command::new("sha256sum")
        .args(["-c", "--quiet", "SHA256SUMS"])
        .current_dir(&top)
        .status()
        .expect("running sha256sum");
    assert!(
        st.success(),
        "lab rehearsal FAILED: sha256sum -c SHA256SUMS in {}",
        top.display()
    );
}

/// `bootstrap install status --output json`.
fn stages(bin: &str, run_dir: &Path) -> Vec<(String, String, serde_json::Value)> {
    let status = json(
        bin,
        &["install", "status", "--run", &run_dir.display().to_string()],
    );
    status["stages"]
        .as_array()
        .expect("install status lists its stages")
        .iter()
        .map(|s| {
            let attempt = serde_json::json!([s["started"], s["ended"], s["seconds"]]);
            (
                s["stage"].as_str().unwrap_or_default().to_string(),
                s["status"].as_str().unwrap_or_default().to_string(),
                attempt,
            )
        })
        .collect()
}

/// Every BMC's reset count, from `bootstrap-lab status --output json`: exactly one each, or
/// the rehearsal fails.
fn assert_reset_once(lab: &str, state: &Path, when: &str, spare: u64) {
    let status = json(lab, &["status", "--state", &state.display().to_string()]);
    for n in status["nodes"]
        .as_array()
        .expect("lab status lists its nodes")
    {
        // The spare machine is reset only once day two adds it.
        let want = if n["node"] == SPARE { spare } else { 1 };
        assert_eq!(
            n["resets"], want,
            "lab rehearsal FAILED: {when}: {} was reset {} times, not {want}",
            n["node"], n["resets"]
        );
    }
}

/// The lab's spare machine (inventory/lab/spares.yaml), which day two adds.
const SPARE: &str = "worker-0";

/// Day two: the spare machine's entry appended to nodes.yaml as the engineer adds a server,
/// and the same `bootstrap install` again: the stages that installed the cluster are kept,
/// add-image makes the node ISO with the release's `oc adm node-image create`, add-boot resets
/// worker-0 alone, add-join approves its two CSRs and leaves the rogue ones the lab injects,
/// add-prep preps it and puts its labels and taint on its Node.
fn day_two(bin: &str, inventory: &Path, install: &[String], run_dir: &Path) {
    let spares = fs_err::read_to_string(inventory.join("spares.yaml")).expect("spares.yaml");
    let entry = &spares[spares
        .find(&format!("- hostname: {SPARE}"))
        .expect("the spare in spares.yaml")..];
    let nodes = inventory.join("nodes.yaml");
    let text = fs_err::read_to_string(&nodes).expect("nodes.yaml");
    fs_err::write(&nodes, format!("{}\n{entry}", text.trim_end())).expect("nodes.yaml");
    eprintln!("\nday two: {SPARE} appended to {}", nodes.display());
    run(bin, install);
    let after = stages(bin, run_dir);
    assert_eq!(after.len(), 12, "lab rehearsal FAILED: {after:?}");
    for (stage, status, _) in &after {
        assert_eq!(
            status, "done",
            "lab rehearsal FAILED: after day two {stage} is {status}"
        );
    }
    let join: serde_json::Value = serde_json::from_slice(
        &fs_err::read(run_dir.join("add-join/join.json")).expect("add-join/join.json"),
    )
    .expect("join.json");
    let left = join["left"].as_array().cloned().unwrap_or_default();
    assert!(
        join["nodes"][SPARE]["approved"]
            .as_array()
            .map_or(0, Vec::len)
            == 2
            && left.iter().any(|l| l["node"] == "rogue-worker-0"),
        "lab rehearsal FAILED: {SPARE}'s CSRs approved, the rogue ones left: {join}"
    );
    let node = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(run_dir.join("iso/work/auth/kubeconfig"))
        .args(["get", "node", SPARE, "-o", "json"])
        .output()
        .expect("running kubectl");
    let node: serde_json::Value =
        serde_json::from_slice(&node.stdout).expect("kubectl get node's JSON");
    let ready = node["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    });
    assert!(
        ready && node["metadata"]["labels"]["nvidia.com/gpu.present"] == "true",
        "lab rehearsal FAILED: {SPARE} is not Ready and labelled: {node}"
    );
    let st = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(run_dir.join("iso/work/auth/kubeconfig"))
        .args(["get", "nodes,csr"])
        .status()
        .expect("running kubectl");
    assert!(st.success(), "kubectl get nodes,csr failed");
}

fn main() {
    let bin = std::env::var("BOOTSTRAP_BIN").unwrap_or_else(|_| "target/release/bootstrap".into());
    let lab = std::env::var("BOOTSTRAP_LAB_BIN")
        .unwrap_or_else(|_| "target/release/bootstrap-lab".into());
    let work = std::env::var("LAB_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(".lab"));
    let _ = fs_err::remove_dir_all(&work);
    fs_err::create_dir_all(&work).expect("creating the lab directory");

    eprintln!("starting the connected-side registry and the site registry on 127.0.0.1");
    let upstream = Registry::plain();
    let site = Registry::tls_basic("site-puller", "site-pull-secret-lab");
    let auth = work.join("site-auth.json");
    support::write_merged_authfile(&auth, &[&site]);
    let site_access = |args: &mut Vec<String>| {
        args.extend([
            "--authfile".to_string(),
            auth.display().to_string(),
            "--ca-bundle".to_string(),
            site.ca_pem().unwrap().display().to_string(),
        ])
    };
    let s = |v: &str| v.to_string();
    let seed_dir = work.join("seed");
    run(
        &lab,
        &[
            s("seed"),
            format!("docker://{}", upstream.host()),
            s("--plain-http"),
            upstream.host(),
            s("--out"),
            seed_dir.display().to_string(),
        ],
    );
    // mirrorsets/lab.yaml names the upstream 127.0.0.1:5000; this run's registry has its own
    // port.
    let lab_yaml =
        fs_err::read_to_string("mirrorsets/lab.yaml").expect("reading mirrorsets/lab.yaml");
    let cfg = work.join("lab.yaml");
    fs_err::write(&cfg, lab_yaml.replace("127.0.0.1:5000", &upstream.host()))
        .expect("writing lab.yaml");
    let graph_url = format!("file://{}", seed_dir.join("graph.json").display());
    let disk = format!("file://{}", work.join("archive").display());
    let record = work.join("site-record.json");

    run(
        &bin,
        &[
            s("mirror"),
            s("-c"),
            cfg.display().to_string(),
            s("--graph-url"),
            graph_url,
            disk.clone(),
            s("--plain-http"),
            upstream.host(),
        ],
    );
    run(&bin, &[s("verify"), disk.clone()]);
    let mut push = vec![
        s("mirror"),
        s("--from"),
        disk.clone(),
        format!("docker://{}/mirror", site.host()),
        s("--record"),
        record.display().to_string(),
        s("--status-file"),
        work.join("site-status.json").display().to_string(),
        s("--workdir"),
        work.join("site-state").display().to_string(),
    ];
    site_access(&mut push);
    run(&bin, &push);
    let mut check = vec![
        s("verify"),
        s("--record"),
        record.display().to_string(),
        format!("docker://{}/mirror", site.host()),
    ];
    site_access(&mut check);
    run(&bin, &check);

    // The lab site, then the install pipeline through wait, with the lab inventory pointed at
    // the site registry and every BMC over TLS verified against the lab CA.
    let inventory = support::labsite::site_inventory(&work, &site, &record, "4.18.3");
    let bmcs = support::labsite::site_bmcs(&inventory, &[8001, 8002, 8003]);
    // The spare machine, built powered off, for day two.
    support::labsite::with_spare(&inventory);
    support::labsite::verify_every_bmc(&inventory, &bmcs);
    let state = work.join("site");
    let _site = LabSite {
        bin: lab.clone(),
        state: state.clone(),
    };
    run(
        &lab,
        &[
            s("up"),
            s("--inventory"),
            inventory.display().to_string(),
            s("--state"),
            state.display().to_string(),
            s("--step"),
            s("1s"),
            s("--inject-validation-failure"),
            s("master-1"),
            // With the first node to join, a client CSR for a host nobody adds and a serving
            // CSR in its name with an address not its own: day two must leave both pending.
            s("--inject-rogue-csr"),
            // Three vendors' BMCs, so the rehearsal boots each as a site would: a Dell
            // iDRAC 9 (the OEM import), a SuperMicro X12 (UsbCd) and sushy-tools as it is.
            s("--vendor"),
            s("master-0=dell-idrac9"),
            s("--vendor"),
            s("master-1=supermicro-x12"),
        ],
    );
    // The read-only site preflight before anything is installed: every check green.
    preflight(&bin, &inventory);
    // The site's GitOps repository first: the install's own handoff stage hands the cluster
    // to Argo CD from it.
    site_repository(&bin, &inventory, &work);
    let run_dir = work.join("run");
    let install = [
        s("install"),
        s("--inventory"),
        inventory.display().to_string(),
        s("--run"),
        run_dir.display().to_string(),
    ];
    // 1: prep finds what the lab's hardware fixtures plant (seven GPUs on master-1, irdma on
    // master-2), checked below.
    run_allowing(&bin, &install, &[1]);
    check_prep(&bin, &inventory, &run_dir);
    let first = stages(&bin, &run_dir);
    for (stage, status, _) in &first {
        let expected = match stage.as_str() {
            "prep" => "failed",
            "handoff" => "pending",
            s if s.starts_with("add-") => "pending",
            _ => "done",
        };
        assert_eq!(
            status, expected,
            "lab rehearsal FAILED: after the first run {stage} is {status}"
        );
    }
    assert_reset_once(&lab, &state, "after the first run", 0);

    // The engineer reseats master-1's GPU and reboots master-2 into its MachineConfig; then
    // the same command again continues at prep.
    run(
        &lab,
        &[s("repair"), s("--state"), state.display().to_string()],
    );
    run(&bin, &install);
    let second = stages(&bin, &run_dir);
    for ((stage, status, attempt), (_, _, before)) in second.iter().zip(&first) {
        assert_eq!(
            status, "done",
            "lab rehearsal FAILED: after the second run {stage} is {status}"
        );
        if !matches!(stage.as_str(), "prep" | "handoff") && !stage.starts_with("add-") {
            assert_eq!(
                attempt, before,
                "lab rehearsal FAILED: {stage} ran again in the second run"
            );
        }
    }
    assert_eq!(second.len(), 12, "lab rehearsal FAILED: {second:?}");
    assert_reset_once(&lab, &state, "after the second run", 0);
    let st = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(run_dir.join("iso/work/auth/kubeconfig"))
        .args(["get", "applications", "-A"])
        .status()
        .expect("running kubectl");
    assert!(st.success(), "kubectl get applications -A failed");
    day_two(&bin, &inventory, &install, &run_dir);
    assert_reset_once(&lab, &state, "after day two", 1);
    run(
        &lab,
        &[s("status"), s("--state"), state.display().to_string()],
    );
    run(
        &bin,
        &[
            s("install"),
            s("status"),
            s("--run"),
            run_dir.display().to_string(),
        ],
    );
    support_bundle(&bin, &inventory, &run_dir, &work);
    eprintln!(
        "\nlab rehearsal OK: the lab set (releases, filtered catalog, modelcar) mirrored to disk ({}) and on to {}; bootstrap install stopped at prep on the two findings the lab plants, the lab repaired them, and the same command continued at prep and handed the cluster to Argo CD (root and every child Application Synced and Healthy); day two added worker-0 (its node ISO from the release's oc, its BMC alone reset, its CSRs approved and the rogue ones left pending, Ready and labelled): all twelve stages done in {}, every BMC reset once; a support bundle checked with sha256sum -c; records and cluster-resources/ in {}",
        disk,
        site.host(),
        run_dir.display(),
        work.display()
    );
}
