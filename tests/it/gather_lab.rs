//! `bootstrap gather` against the lab site (`bootstrap-lab up --hosts-up`: a sushy-tools BMC and
//! a real sshd per node) after `bootstrap prep` has read every node: the bundle extracts, its
//! `SHA256SUMS` checks with `sha256sum -c`, each node has its Redfish and SSH sections, and no
//! secret the run knows is in it, in clear or in base64; a node whose BMC and sshd do not answer
//! is listed as not collected and the gather still succeeds. Uses the lab inventory's machine
//! network, so it runs in the `lab-site` group (.config/nextest.toml). The rendezvous host's and
//! the cluster API's parts are read from the simulator's stand-ins on a loopback address of
//! their own, as wait.rs does, without the lab's namespaces.

use crate::support::labsite::{lab_inventory, run_site, SiteLab};
use base64::Engine as _;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The lab inventory with its login key made private (git checks it out readable by all).
fn inventory(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let (inv, _) = lab_inventory(dir, false);
    let key = inv.join("secrets/id_ed25519");
    fs_err::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    inv
}

/// `bootstrap gather --output json`: exit status and the result.
fn gather(inv: &Path, run: &Path, extra: &[&str]) -> (Option<i32>, Value) {
    let (inv, run) = (inv.display().to_string(), run.display().to_string());
    let mut args = vec![
        "gather",
        "--inventory",
        &inv,
        "--run",
        &run,
        "--output",
        "json",
    ];
    args.extend_from_slice(extra);
    let o = run_site(&args);
    let json = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (o.status.code(), json)
}

/// The bundle extracted into `into`, `sha256sum -c SHA256SUMS` run in its folder (it must
/// pass); the folder.
pub(crate) fn extract_and_check(bundle: &Path, into: &Path) -> PathBuf {
    fs_err::create_dir_all(into).unwrap();
    let o = std::process::Command::new("tar")
        .arg("xzf")
        .arg(bundle)
        .arg("-C")
        .arg(into)
        .output()
        .unwrap();
    assert!(o.status.success(), "tar: {o:?}");
    let top: Vec<_> = fs_err::read_dir(into)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(top.len(), 1, "{top:?}");
    let dir = top[0].clone();
    let o = std::process::Command::new("sha256sum")
        .args(["-c", "--strict", "SHA256SUMS"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "sha256sum -c: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    dir
}

pub(crate) fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in fs_err::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

fn not_collected_of<'a>(result: &'a Value, node: &str) -> Vec<&'a Value> {
    result["notCollected"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["node"] == node)
        .collect()
}

/// Every secret the lab run knows is planted in a log of the run (and the installer's token
/// and kubeconfig beside it); the bundle holds each node's sections, checks with sha256sum,
/// and none of the secrets, in clear or in base64. The ISO, the tools and the installer's
/// credentials are left out, named in the manifest.
#[test]
fn a_lab_bundle_checks_with_sha256sum_and_holds_no_secret() {
    let tmp = tempfile::tempdir().unwrap();
    let inv = inventory(tmp.path());
    let (_lab, _) = SiteLab::up(&inv, &tmp.path().join("lab"), &["--hosts-up"]);
    let run = tmp.path().join("run");
    // prep reads every node (the lab's planted hardware fails two: exit 1) and pins its keys.
    let o = run_site(&[
        "prep",
        "--inventory",
        inv.to_str().unwrap(),
        "--run",
        run.to_str().unwrap(),
    ]);
    assert!(run.join("ledger/known_hosts").is_file(), "{o:?}");

    let kube_token = "sha256~planted-kube-token-0123456789abcdef";
    let watcher = "eyJwlanted-watcher-token-0123456789";
    let work = run.join("iso/work");
    fs_err::create_dir_all(work.join("auth")).unwrap();
    fs_err::write(
        work.join("auth/kubeconfig"),
        format!("apiVersion: v1\nclusters:\n- cluster:\n    server: https://127.0.0.1:1\n  name: lab\ncontexts:\n- context:\n    cluster: lab\n    user: admin\n  name: admin\ncurrent-context: admin\nkind: Config\nusers:\n- name: admin\n  user:\n    token: {kube_token}\n"),
    )
    .unwrap();
    fs_err::write(
        work.join(".openshift_install_state.json"),
        format!(r#"{{"*gencrypto.AuthConfig":{{"WatcherAuthToken":"{watcher}"}}}}"#),
    )
    .unwrap();
    fs_err::write(work.join("agent.x86_64.iso"), b"not really an ISO").unwrap();
    fs_err::create_dir_all(run.join("tools")).unwrap();
    fs_err::write(run.join("tools/oc"), b"\x7fELF not really oc").unwrap();
    let read = |f: &str| {
        fs_err::read_to_string(inv.join(f))
            .unwrap()
            .trim()
            .to_string()
    };
    let key = read("secrets/id_ed25519");
    let mut secrets = vec![
        "lab-bmc-pass".to_string(),
        read("secrets/bmc.example"),
        read("secrets/pull-secret.example.json"),
        "bGFiOmxhYi1wbGFjZWhvbGRlcg==".to_string(),
        read("secrets/git-password"),
        key.clone(),
        kube_token.to_string(),
        watcher.to_string(),
    ];
    secrets.extend(
        key.lines()
            .filter(|l| !l.starts_with("-----") && l.len() >= 16)
            .map(str::to_string),
    );
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let planted: String = secrets
        .iter()
        .map(|s| format!("leaked {s} and {}\n", b64(s)))
        .collect();
    fs_err::create_dir_all(run.join("logs")).unwrap();
    fs_err::write(run.join("logs/planted.log"), planted).unwrap();

    let (code, result) = gather(&inv, &run, &["--node-timeout", "90s"]);
    assert_eq!(code, Some(0), "{result:#}");
    let bundle = PathBuf::from(result["bundle"].as_str().unwrap());
    assert!(bundle.starts_with(run.join("gather")), "{bundle:?}");
    let dir = extract_and_check(&bundle, &tmp.path().join("x"));

    for node in ["master-0", "master-1", "master-2"] {
        assert_eq!(
            not_collected_of(&result, node),
            Vec::<&Value>::new(),
            "{result:#}"
        );
        for f in [
            "redfish/inventory.json",
            "redfish/calls.json",
            "ssh/commands.json",
            "ssh/journal-kubelet.txt",
            "ssh/dmesg.txt",
            "ssh/facts.json",
        ] {
            assert!(dir.join("nodes").join(node).join(f).is_file(), "{node}/{f}");
        }
    }
    // sushy-tools offers no LogServices: said, not a failure.
    let nothing = result["nothingToCollect"].to_string();
    assert!(nothing.contains("not offered by this BMC"), "{nothing}");
    let planted = fs_err::read_to_string(dir.join("run/logs/planted.log")).unwrap();
    assert!(
        planted.contains("leaked <redacted> and <redacted>"),
        "{planted}"
    );
    let manifest: Value =
        serde_json::from_str(&fs_err::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let left_out = manifest["leftOut"].to_string();
    for path in [
        "iso/work/agent.x86_64.iso",
        "tools/oc",
        "iso/work/auth/",
        "iso/work/.openshift_install_state.json",
    ] {
        assert!(left_out.contains(path), "{path} not left out: {left_out}");
    }
    for file in files(&dir) {
        let bytes = fs_err::read(&file).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        for s in &secrets {
            assert!(!text.contains(s.as_str()), "{} holds {s}", file.display());
            assert!(
                !text.contains(&b64(s)),
                "{} holds base64 of {s}",
                file.display()
            );
        }
    }
}

/// master-2's BMC moved to a port where nothing listens and its sshd to an address nothing
/// holds: its Redfish and SSH parts are listed as not collected, with why; the other nodes are
/// whole and the gather exits 0 with the bundle written, marked partial.
#[test]
fn an_unreachable_node_is_listed_not_collected_and_the_gather_succeeds() {
    let tmp = tempfile::tempdir().unwrap();
    let inv = inventory(tmp.path());
    let nodes = inv.join("nodes.yaml");
    let text = fs_err::read_to_string(&nodes).unwrap();
    let text = text.replacen(
        "- hostname: master-2\n",
        "- hostname: master-2\n  sshAddress: 192.168.111.99\n",
        1,
    );
    fs_err::write(&nodes, &text).unwrap();
    let (lab, _) = SiteLab::up(&inv, &tmp.path().join("lab"), &["--hosts-up"]);
    // After lab up (which started its emulator there): master-2's BMC at a dead port.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let text = fs_err::read_to_string(&nodes).unwrap();
    let at = text.find("/redfish/v1/Systems/master-2").unwrap();
    let start = text[..at].rfind(':').unwrap();
    let text = format!("{}:{dead}{}", &text[..start], &text[at..]);
    fs_err::write(&nodes, &text).unwrap();
    let run = tmp.path().join("run");
    fs_err::create_dir_all(&run).unwrap();

    let (code, result) = gather(&inv, &run, &["--node-timeout", "60s"]);
    assert_eq!(code, Some(0), "{result:#}");
    assert_eq!(result["partial"], true, "{result:#}");
    let down = not_collected_of(&result, "master-2");
    let why = |what: &str| {
        down.iter()
            .find(|m| m["what"] == what)
            .and_then(|m| m["why"].as_str())
            .unwrap_or_else(|| panic!("no {what} for master-2: {result:#}"))
            .to_string()
    };
    assert!(
        why("redfish").contains("BMC not answering"),
        "{}",
        why("redfish")
    );
    assert!(why("ssh").contains("192.168.111.99"), "{}", why("ssh"));
    assert_eq!(
        not_collected_of(&result, "master-0"),
        Vec::<&Value>::new(),
        "{result:#}"
    );
    let dir = extract_and_check(
        Path::new(result["bundle"].as_str().unwrap()),
        &tmp.path().join("x"),
    );
    assert!(dir.join("nodes/master-0/ssh/facts.json").is_file());
    assert!(!dir.join("nodes/master-2/ssh/facts.json").exists());
    drop(lab);
}

/// The cluster's part, without the lab's namespaces: the installer stand-in writes `iso/work`,
/// the simulator's rendezvous and cluster API stand-ins listen on a loopback address of their
/// own (as in wait.rs), and the wait stage's token and kubeconfig are the run's. After the
/// install runs, a bundle holds the rendezvous host's clusters and infra-envs; after it
/// completes, one holds the cluster's ClusterVersion and ClusterOperators; the nodes' BMCs
/// (nothing listens) are listed as not collected, and neither token is anywhere in either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_and_rendezvous_parts_are_read_with_the_runs_tokens_and_kept_out() {
    use bootstrap::openshift::watch::{watcher_token, Watch};
    use bootstrap_lab::site::simulator::{Observation, Simulator, SimulatorConfig};
    let dir = tempfile::tempdir().unwrap();
    let inv = dir.path().join("inv");
    crate::support::run::copy_dir(&crate::support::run::shipped_inventory("lab"), &inv);
    let run = dir.path().join("run");
    let work = run.join("iso/work");
    crate::wait::make_iso(dir.path(), &work);
    let n = std::process::id();
    let ip = format!("127.78.{}.{}", (n >> 8) & 0xff, (n & 0xff).max(1));
    fs_err::write(work.join("rendezvousIP"), format!("{ip}\n")).unwrap();
    let kubeconfig = fs_err::read_to_string(work.join("auth/kubeconfig")).unwrap();
    let kubeconfig =
        kubeconfig.replace("https://192.168.111.5:6443", &format!("https://{ip}:6443"));
    fs_err::write(work.join("auth/kubeconfig"), &kubeconfig).unwrap();
    let token = watcher_token(&work.join(".openshift_install_state.json")).unwrap();
    let admin = kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .unwrap()
        .to_string();

    let served = crate::wait::serve_iso(&work).await;
    let sim = std::sync::Arc::new(
        Simulator::new(SimulatorConfig {
            step: std::time::Duration::from_millis(150),
            ..SimulatorConfig::default()
        })
        .unwrap(),
    );
    let rest = std::net::TcpListener::bind(format!("{ip}:8090")).unwrap();
    let api = std::net::TcpListener::bind(format!("{ip}:6443")).unwrap();
    tokio::spawn(sim.clone().serve(rest, api));
    for node in ["master-0", "master-1", "master-2"] {
        sim.observe(Observation {
            node: node.to_string(),
            powered_on: true,
            media: Some(served.url.clone()),
            boot_cd: true,
            boots: None,
        })
        .await
        .unwrap();
    }
    // While the install runs, the rendezvous host answers: its clusters and infra-envs are read.
    let (code, early) = tokio::task::spawn_blocking({
        let (inv, run, out) = (inv.clone(), run.clone(), dir.path().join("early.tar.gz"));
        move || {
            gather(
                &inv,
                &run,
                &["--node-timeout", "20s", "--out", out.to_str().unwrap()],
            )
        }
    })
    .await
    .unwrap();
    assert_eq!(code, Some(0), "{early:#}");
    let e = extract_and_check(&dir.path().join("early.tar.gz"), &dir.path().join("e"));
    assert!(e.join("rendezvous/clusters.json").is_file(), "{early:#}");
    assert!(e.join("rendezvous/infra-envs.json").is_file(), "{early:#}");
    // Waited for as the wait stage waits, so the cluster's API answers.
    let limits = bootstrap::install::WaitLimits {
        bootstrap: std::time::Duration::from_secs(120),
        install: std::time::Duration::from_secs(120),
        ..Default::default()
    };
    let watch = Watch::new(
        ip.parse().unwrap(),
        token.clone(),
        work.join("auth/kubeconfig"),
        limits,
    );
    watch
        .run(&std::sync::atomic::AtomicBool::new(false), &mut Quiet)
        .await
        .unwrap();

    let (code, result) = tokio::task::spawn_blocking({
        let (inv, run) = (inv.clone(), run.clone());
        move || gather(&inv, &run, &["--node-timeout", "20s"])
    })
    .await
    .unwrap();
    assert_eq!(code, Some(0), "{result:#}");
    let bundle = PathBuf::from(result["bundle"].as_str().unwrap());
    let x = extract_and_check(&bundle, &dir.path().join("x"));
    assert!(
        x.join("cluster/clusterversions.json").is_file(),
        "{result:#}"
    );
    assert!(
        x.join("cluster/clusteroperators.json").is_file(),
        "{result:#}"
    );
    // The rendezvous host stops answering once the install is complete (as node 0 reboots).
    let rendezvous_said = result["notCollected"]
        .to_string()
        .contains("rendezvous host (assisted-service)");
    assert!(
        x.join("rendezvous/clusters.json").is_file() || rendezvous_said,
        "{result:#}"
    );
    let bmc = not_collected_of(&result, "master-0");
    assert!(bmc.iter().any(|m| m["what"] == "redfish"), "{result:#}");
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    for file in files(&x).into_iter().chain(files(&e)) {
        let text = String::from_utf8_lossy(&fs_err::read(&file).unwrap()).into_owned();
        for s in [&token, &admin] {
            assert!(
                !text.contains(s.as_str()) && !text.contains(&b64(s)),
                "{}",
                file.display()
            );
        }
    }
}

/// A wait view that shows nothing.
struct Quiet;

impl bootstrap::openshift::watch::WaitView for Quiet {
    fn host(&mut self, _: &str, _: &str) {}
    fn say(&mut self, _: &str) {}
}
