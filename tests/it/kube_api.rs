//! The lab's Kubernetes API stand-in with real `kubectl` as the protocol peer: server-side
//! apply (field managers, conflicts, `--force-conflicts`), server dry run, strict field
//! validation against a CRD's schema, tables, delete, and RBAC refusals worded as the API
//! server words them. What the hand-off and the Argo CD imitation rely on, checked against the
//! client every engineer uses.

use bootstrap_lab::site::kube::http::{random_token, serve_loopback, LoopbackApi};
use bootstrap_lab::site::kube::Store;
use serde_json::Value;
use std::process::{Command, Output};

struct Lab {
    api: LoopbackApi,
    dir: tempfile::TempDir,
}

impl Lab {
    async fn start() -> Lab {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::lab_cluster().unwrap();
        bootstrap_lab::site::olm::seed(&store).unwrap();
        let api = serve_loopback(store, &dir.path().join("api"))
            .await
            .unwrap();
        Lab { api, dir }
    }

    /// `kubectl` with the admin kubeconfig (and its own cache, so runs do not share one).
    fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut c = Command::new("kubectl");
        c.arg("--kubeconfig")
            .arg(&self.api.kubeconfig)
            .arg("--cache-dir")
            .arg(self.dir.path().join("cache"))
            .args(args);
        match stdin {
            None => c.output().unwrap(),
            Some(text) => {
                let file = self.dir.path().join("in.yaml");
                fs_err::write(&file, text).unwrap();
                c.arg("-f").arg(&file).output().unwrap()
            }
        }
    }

    fn ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let o = self.kubectl(args, stdin);
        assert!(
            o.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut a = args.to_vec();
        a.extend(["-o", "json", "--show-managed-fields"]);
        serde_json::from_str(&self.ok(&a, None)).unwrap()
    }
}

fn err(o: &Output) -> String {
    assert!(!o.status.success(), "{o:?}");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn managers(obj: &Value) -> Vec<String> {
    obj["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["manager"].as_str().unwrap().to_string())
        .collect()
}

const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: default\ndata:\n  gpus: \"8\"\n";

/// Apply creates, a reapply changes nothing, another manager's change of an owned field
/// conflicts until forced, and a server dry run writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_with_field_managers_conflicts_and_dry_run() {
    let lab = Lab::start().await;
    let out = lab.ok(&["apply", "--server-side"], Some(CM));
    assert!(
        out.contains("configmap/settings serverside-applied"),
        "{out}"
    );
    let first = lab.json(&["get", "configmap", "settings", "-n", "default"]);
    assert_eq!(managers(&first), ["kubectl"]);
    lab.ok(&["apply", "--server-side"], Some(CM));
    let again = lab.json(&["get", "configmap", "settings", "-n", "default"]);
    assert_eq!(
        again["metadata"]["resourceVersion"], first["metadata"]["resourceVersion"],
        "a reapply of the same object wrote"
    );

    let other = CM.replace("\"8\"", "\"4\"");
    let refused = err(&lab.kubectl(
        &["apply", "--server-side", "--field-manager", "tenant-admin"],
        Some(&other),
    ));
    assert!(
        refused.contains("conflict")
            && refused.contains(".data.gpus")
            && refused.contains("kubectl"),
        "{refused}"
    );
    let dry = lab.ok(
        &[
            "apply",
            "--server-side",
            "--field-manager",
            "tenant-admin",
            "--force-conflicts",
            "--dry-run=server",
        ],
        Some(&other),
    );
    assert!(dry.contains("server dry run"), "{dry}");
    let after_dry = lab.json(&["get", "configmap", "settings", "-n", "default"]);
    assert_eq!(after_dry["data"]["gpus"], "8", "the dry run wrote");
    assert_eq!(
        after_dry["metadata"]["resourceVersion"],
        first["metadata"]["resourceVersion"]
    );

    lab.ok(
        &[
            "apply",
            "--server-side",
            "--field-manager",
            "tenant-admin",
            "--force-conflicts",
        ],
        Some(&other),
    );
    let forced = lab.json(&["get", "configmap", "settings", "-n", "default"]);
    assert_eq!(forced["data"]["gpus"], "4");
    let owner = forced["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["fieldsV1"]["f:data"].get("f:gpus").is_some())
        .map(|m| m["manager"].clone());
    assert_eq!(owner, Some(Value::from("tenant-admin")), "{forced}");

    let deleted = lab.ok(&["delete", "configmap", "settings", "-n", "default"], None);
    assert!(deleted.contains("deleted"), "{deleted}");
    let gone = err(&lab.kubectl(&["get", "configmap", "settings", "-n", "default"], None));
    assert!(
        gone.contains("NotFound") || gone.contains("not found"),
        "{gone}"
    );
}

/// An unknown field in a CRD-backed object is refused under strict validation, naming the
/// field; wrong types are refused whatever the validation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_validation_against_the_crd_schema() {
    let lab = Lab::start().await;
    let sub = "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: nfd\n  namespace: openshift-operators\nspec:\n  chanel: stable\n  name: nfd\n  source: cs-redhat-operator-index-v4-18\n  sourceNamespace: openshift-marketplace\n";
    let refused = err(&lab.kubectl(&["apply", "--server-side", "--validate=strict"], Some(sub)));
    // The API server's own words for an unknown field under server-side apply.
    assert!(
        refused.contains(".spec.chanel: field not declared in schema"),
        "{refused}"
    );
    let typed = sub.replace("chanel: stable", "channel: [stable]");
    let refused = err(&lab.kubectl(&["apply", "--server-side"], Some(&typed)));
    assert!(refused.contains("spec.channel"), "{refused}");
    lab.ok(
        &["apply", "--server-side", "--validate=strict"],
        Some(&sub.replace("chanel", "channel")),
    );
    let got = lab.json(&[
        "get",
        "subscriptions.operators.coreos.com",
        "nfd",
        "-n",
        "openshift-operators",
    ]);
    assert_eq!(got["spec"]["channel"], "stable");
}

/// `kubectl get` prints the server's tables (the columns a real cluster prints).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_for_kubectl_get() {
    let lab = Lab::start().await;
    let table = lab.ok(&["get", "namespaces"], None);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "STATUS", "AGE"], "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("openshift-marketplace") && l.contains("Active")),
        "{table}"
    );
    let sources = lab.ok(&["get", "catalogsources", "-A"], None);
    assert!(
        sources.lines().next().unwrap().starts_with("NAMESPACE"),
        "{sources}"
    );
    assert!(sources.contains("redhat-operators"), "{sources}");
}

/// A service account without rights is refused in the API server's words; once bound to a
/// role it may do exactly what the role allows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_refuses_in_the_api_servers_words() {
    let lab = Lab::start().await;
    let token = random_token();
    let user = "system:serviceaccount:team-a:reader";
    lab.api.auth.add_token(
        bootstrap::oci::digest::Digest::of(token.as_bytes()).hex(),
        user,
    );
    let as_reader = |args: &[&str]| {
        let mut a = vec!["--token", token.as_str()];
        a.extend(args);
        lab.kubectl(&a, None)
    };
    let refused = err(&as_reader(&["get", "configmaps", "-n", "default"]));
    assert!(
        refused.contains(&format!("configmaps is forbidden: User \"{user}\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\"")),
        "{refused}"
    );
    let rbac = "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: read-configmaps\n  namespace: default\nrules:\n- apiGroups: [\"\"]\n  resources: [configmaps]\n  verbs: [get, list]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: reader\n  namespace: default\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: read-configmaps\nsubjects:\n- kind: ServiceAccount\n  name: reader\n  namespace: team-a\n";
    lab.ok(&["apply", "--server-side"], Some(rbac));
    let listed = as_reader(&["get", "configmaps", "-n", "default"]);
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    let write = err(&as_reader(&[
        "delete",
        "role",
        "read-configmaps",
        "-n",
        "default",
    ]));
    assert!(
        write.contains("forbidden") && write.contains("cannot delete resource \"roles\""),
        "{write}"
    );
}

/// `kubectl certificate approve` and `deny` go through the `/approval` subresource (only the
/// conditions change), `kubectl get csr` prints the API server's CSR columns, and an approved
/// CSR cannot be denied afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_approves_and_denies_csrs() {
    use bootstrap_lab::site::join::kubelet;
    let lab = Lab::start().await;
    let made =
        |node: &str| kubelet::create(&lab.api.store, kubelet::client_csr(node).unwrap()).unwrap();
    let (good, bad) = (made("worker-0"), made("rogue-worker-0"));
    let table = lab.ok(&["get", "csr"], None);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "AGE",
            "SIGNERNAME",
            "REQUESTOR",
            "REQUESTEDDURATION",
            "CONDITION"
        ],
        "{table}"
    );
    assert!(
        table.contains(kubelet::NODE_BOOTSTRAPPER) && table.contains("Pending"),
        "{table}"
    );
    let out = lab.ok(&["certificate", "approve", &good], None);
    assert!(
        out.contains(&format!(
            "certificatesigningrequest.certificates.k8s.io/{good} approved"
        )),
        "{out}"
    );
    let out = lab.ok(&["certificate", "deny", &bad], None);
    assert!(out.contains("denied"), "{out}");
    let approved = lab.json(&["get", "csr", &good]);
    let cond = &approved["status"]["conditions"][0];
    assert_eq!(
        (
            cond["type"].as_str(),
            cond["status"].as_str(),
            cond["reason"].as_str()
        ),
        (Some("Approved"), Some("True"), Some("KubectlApprove"))
    );
    assert_eq!(approved["spec"]["signerName"], kubelet::CLIENT_SIGNER);
    let table = lab.ok(&["get", "csr"], None);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with(&good) && l.trim_end().ends_with("Approved")),
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.starts_with(&bad) && l.trim_end().ends_with("Denied")),
        "{table}"
    );
    let refused = err(&lab.kubectl(&["certificate", "deny", &good], None));
    assert!(
        refused.contains(&format!(
            "certificate signing request \"{good}\" is already Approved"
        )),
        "{refused}"
    );
}

/// `kubectl label node` (a merge patch) and `kubectl taint node` (a strategic merge patch)
/// change the Node; `kubectl get nodes` prints STATUS and ROLES as the API server does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_labels_and_taints_nodes() {
    use bootstrap_lab::site::join::kubelet;
    let lab = Lab::start().await;
    kubelet::register_node(
        &lab.api.store,
        "worker-0",
        "worker",
        &["192.168.111.30".into()],
    )
    .unwrap();
    let table = lab.ok(&["get", "nodes", "-o", "wide"], None);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        &header[..6],
        ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP"],
        "{table}"
    );
    assert!(
        table
            .lines()
            .nth(1)
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>()[..3]
            == ["worker-0", "NotReady", "worker"],
        "{table}"
    );
    lab.ok(
        &["label", "node", "worker-0", "nvidia.com/gpu.present=true"],
        None,
    );
    lab.ok(
        &[
            "taint",
            "node",
            "worker-0",
            "nvidia.com/gpu=true:NoSchedule",
        ],
        None,
    );
    kubelet::mark_ready(&lab.api.store, "worker-0").unwrap();
    let node = lab.json(&["get", "node", "worker-0"]);
    assert_eq!(node["metadata"]["labels"]["nvidia.com/gpu.present"], "true");
    let taints = node["spec"]["taints"].as_array().unwrap();
    assert_eq!(
        taints.len(),
        1,
        "the not-ready taint is gone, the engineer's stays: {taints:?}"
    );
    assert_eq!(taints[0]["key"], "nvidia.com/gpu");
    assert_eq!(taints[0]["effect"], "NoSchedule");
    let table = lab.ok(&["get", "nodes"], None);
    assert!(
        table.contains("Ready") && !table.contains("NotReady"),
        "{table}"
    );
    lab.ok(&["taint", "node", "worker-0", "nvidia.com/gpu-"], None);
    let node = lab.json(&["get", "node", "worker-0"]);
    assert!(
        node["spec"]["taints"]
            .as_array()
            .is_none_or(|t| t.is_empty()),
        "{node}"
    );
}
