use super::*;
use crate::site::join::kubelet;
use crate::site::kube::{serve_loopback, Store};
use crate::site::olm::objects;

const GOOD: &str = "hosts:\n- hostname: worker-0\n  role: worker\n  interfaces:\n  - name: enp1s0\n    macAddress: aa:bb:cc:00:00:04\n  rootDeviceHints:\n    deviceName: /dev/vda\n  networkConfig:\n    interfaces:\n    - name: enp1s0\n      type: ethernet\n      state: up\n      mac-address: aa:bb:cc:00:00:04\n      ipv4:\n        enabled: true\n        address:\n        - ip: 192.168.111.23\n          prefix-length: 24\n        dhcp: false\n";

/// A lab cluster at `version` with one master Node, served on loopback.
async fn cluster(version: &str, dir: &Path) -> crate::site::kube::LoopbackApi {
    let store = Store::lab_cluster().unwrap();
    let cv = objects::apply(&store, json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
        "metadata": {"name": "version"}, "spec": {"clusterID": "00000000-0000-4000-8000-000000000000"}}), "cvo").unwrap();
    objects::write_status(
        &store,
        &cv,
        json!({"desired": {"version": version,
        "image": format!("quay.io/openshift-release-dev/ocp-release:{version}-x86_64")},
        "availableUpdates": null, "observedGeneration": 1, "versionHash": "lab"}),
        "cvo",
    )
    .unwrap();
    kubelet::register_node(&store, "master-0", "master", &["192.168.111.20".into()]).unwrap();
    serve_loopback(store, &dir.join("api")).await.unwrap()
}

fn run_create(api: &crate::site::kube::LoopbackApi, extra: &[&str]) -> Run {
    let kc = api.kubeconfig.to_string_lossy().to_string();
    let args: Vec<&str> = extra.to_vec();
    std::thread::scope(|s| s.spawn(|| create(&args, Some(&kc))).join().unwrap())
}

/// A good nodes-config gives `node.x86_64.iso` holding it, oc's log lines, and the temporary
/// namespace with everything oc makes in it, deleted at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_image_create_writes_the_node_iso_and_cleans_up() {
    let tmp = tempfile::tempdir().unwrap();
    let api = cluster("4.18.3", tmp.path()).await;
    let dir = tmp.path().join("assets");
    fs_err::create_dir_all(&dir).unwrap();
    fs_err::write(dir.join(NODES_CONFIG), GOOD).unwrap();
    let d = dir.to_string_lossy().to_string();
    let run = run_create(&api, &["--dir", &d, "--insecure=false"]);
    assert_eq!(run.status, 0, "{run:?}");
    for line in run.stdout.lines() {
        let (ts, rest) = line.split_once(' ').unwrap();
        assert!(ts.len() == 20 && ts.ends_with('Z'), "{line}");
        assert!(rest.starts_with("[node-image create] "), "{line}");
    }
    assert!(
        run.stdout.contains("] Launching command\n"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.ends_with("] Command successfully completed\n"),
        "{}",
        run.stdout
    );
    let iso = dir.join("node.x86_64.iso");
    let listed = std::process::Command::new("xorriso")
        .args(["-indev"])
        .arg(&iso)
        .args(["-find", "/", "-type", "f"])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.contains("/nodes-config.yaml") && listed.contains("/lab/cluster-id"),
        "{listed}"
    );
    let made: Vec<(String, String)> = api
        .store
        .audit()
        .iter()
        .filter(|e| e.verb == "create" && e.user == crate::site::kube::rbac::ADMIN)
        .map(|e| (e.kind.clone(), e.name.clone().unwrap_or_default()))
        .collect();
    let kinds: Vec<&str> = made.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "Namespace",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "ConfigMap",
            "Pod"
        ],
        "{made:?}"
    );
    assert!(made[0].1.starts_with("openshift-node-joiner-"), "{made:?}");
    let left = api.store.list("v1", "Namespace", None, None).unwrap();
    assert!(
        left.iter()
            .all(|n| !objects::name(n).starts_with("openshift-node-joiner-")
                || !n["metadata"]["deletionTimestamp"].is_null()),
        "{left:?}"
    );
}

/// A host without a MAC address: exit 1, oc's "command execution failed" line and report.json
/// with the installer's words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_image_create_reports_an_invalid_nodes_config_in_the_installers_words() {
    let tmp = tempfile::tempdir().unwrap();
    let api = cluster("4.18.3", tmp.path()).await;
    let dir = tmp.path().to_path_buf();
    fs_err::write(
        dir.join(NODES_CONFIG),
        "hosts:\n- hostname: worker-0\n  interfaces:\n  - name: enp1s0\n",
    )
    .unwrap();
    let d = dir.to_string_lossy().to_string();
    let run = run_create(&api, &["--dir", &d]);
    assert_eq!(run.status, 1, "{run:?}");
    let why = "Hosts[0].Interfaces[0].macAddress: Required value: each interface must have a MAC address defined";
    assert!(
        run.stdout
            .contains(&format!("] command execution failed. Reason: {why}\n")),
        "{}",
        run.stdout
    );
    let report: Value =
        serde_json::from_str(&fs_err::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["result"]["exit_code"], 1);
    assert_eq!(report["result"]["error_message"], why);
    assert_eq!(
        report["result"]["detailed_error_message"],
        format!("invalid Hosts configuration: {why}")
    );
    assert_eq!(report["stages"][0]["id"], "add-nodes-cluster-inspection");
    assert!(!dir.join("node.x86_64.iso").exists());
}

/// Below 4.17, oc refuses in its own words before it makes anything; unknown upstream flags are
/// refused by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_image_create_refuses_old_clusters_and_flags_it_does_not_imitate() {
    let tmp = tempfile::tempdir().unwrap();
    let api = cluster("4.16.9", tmp.path()).await;
    fs_err::write(tmp.path().join(NODES_CONFIG), GOOD).unwrap();
    let d = tmp.path().to_string_lossy().to_string();
    let run = run_create(&api, &["--dir", &d]);
    assert_eq!(run.status, 1);
    assert_eq!(run.stderr, ["error: the 'oc adm node-image' command is only available for OpenShift versions 4.17 and later"]);
    assert!(api
        .store
        .audit()
        .iter()
        .all(|e| e.verb != "create" || e.user != crate::site::kube::rbac::ADMIN));
    let run = run_create(&api, &["--dir", &d, "--pxe"]);
    assert!(
        run.stderr[0].contains("does not do `adm node-image create --pxe`"),
        "{run:?}"
    );
    let missing = tempfile::tempdir().unwrap();
    let m = missing.path().to_string_lossy().to_string();
    let run = run_create(&api, &["--dir", &m]);
    assert_eq!(
        run.stderr,
        ["error: stat nodes-config.yaml: no such file or directory"]
    );
}
