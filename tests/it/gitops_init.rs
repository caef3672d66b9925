//! `bootstrap gitops init`: the site's GitOps repository scaffolded from inventory/lab and
//! inventory/example-site into a temporary directory; every folder built with the real
//! `kubectl kustomize`, and the built objects read back: the tenants' quota, network policies
//! and role bindings, the Applications' waves, the Subscriptions' catalogs. A rerun is
//! byte-identical, a non-empty directory is refused, and a bad inventory is refused naming
//! site.yaml:line:col and the field.

use crate::support::run::{bootstrap, copy_dir, failed, ok, shipped_inventory};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Scaffolds `inventory` into `dir`; the JSON summary.
fn init(inventory: &Path, dir: &Path, extra: &[&str]) -> Value {
    let mut args = vec![
        "--output",
        "json",
        "gitops",
        "init",
        dir.to_str().unwrap(),
        "--inventory",
        inventory.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    serde_json::from_str(&ok(&bootstrap(&args))).expect("the summary is JSON")
}

/// `kubectl kustomize dir`, parsed: every object.
fn build(dir: &Path) -> Vec<Value> {
    let o = Command::new("kubectl")
        .args(["kustomize"])
        .arg(dir)
        .output()
        .expect("running kubectl");
    assert!(
        o.status.success(),
        "kubectl kustomize {} failed:\n{}",
        dir.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    let text = String::from_utf8(o.stdout).unwrap();
    serde_saphyr::from_multiple::<Value>(&text).expect("kustomize output is YAML")
}

/// Every folder of the repository that holds a kustomization.yaml.
fn folders(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        if dir.join("kustomization.yaml").is_file() {
            out.push(dir.clone());
        }
        for e in fs_err::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// Every file under `root` with its bytes.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in fs_err::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                out.insert(e.path(), fs_err::read(e.path()).unwrap());
            }
        }
    }
    out
}

/// The object of `kind` named `name` (in `namespace` when given).
fn find<'a>(objs: &'a [Value], kind: &str, name: &str, namespace: Option<&str>) -> &'a Value {
    objs.iter()
        .find(|o| {
            o["kind"] == kind
                && o["metadata"]["name"] == name
                && namespace.is_none_or(|ns| o["metadata"]["namespace"] == ns)
        })
        .unwrap_or_else(|| panic!("no {kind} {name} in {namespace:?}"))
}

#[test]
fn the_lab_repository_builds_and_holds_the_tenants_and_the_waves() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("site");
    let summary = init(&shipped_inventory("lab"), &dir, &[]);
    assert_eq!(summary["tenants"], serde_json::json!(["team-a", "team-b"]));
    assert!(summary["changed"].as_array().unwrap().is_empty());
    let all = folders(&dir);
    for f in [
        "apps",
        "bootstrap",
        "tenants",
        "tenants/base",
        "tenants/team-a",
        "cluster/kai-scheduler",
        "cluster/nvidia-gpu-operator",
    ] {
        assert!(all.contains(&dir.join(f)), "{f} has no kustomization.yaml");
    }
    for f in &all {
        assert!(!build(f).is_empty(), "{} builds to nothing", f.display());
    }
    let tenants = build(&dir.join("tenants"));
    tenant_a(&tenants);
    // team-b has no edit group: its edit binding binds nobody.
    let edit_b = find(&tenants, "RoleBinding", "tenant-edit", Some("team-b"));
    assert!(edit_b.get("subjects").is_none(), "{edit_b}");
    assert_eq!(
        find(&tenants, "Queue", "team-b", None)["spec"]["resources"]["gpu"]["quota"],
        2
    );
    waves(&build(&dir.join("apps")));
    root(&build(&dir.join("bootstrap")));
    let sub = build(&dir.join("cluster/nvidia-gpu-operator"));
    let sub = find(
        &sub,
        "Subscription",
        "gpu-operator-certified",
        Some("nvidia-gpu-operator"),
    );
    assert_eq!(sub["spec"]["source"], "cs-redhat-operator-index-v4-18");
    assert_eq!(sub["spec"]["sourceNamespace"], "openshift-marketplace");
    assert_eq!(sub["spec"]["channel"], "stable");
    let queues = build(&dir.join("cluster/kai-queues"));
    assert_eq!(
        find(&queues, "Queue", "tenants", None)["spec"]["resources"]["gpu"]["quota"],
        6
    );
    let value = |n| {
        find(&queues, "PriorityClass", n, None)["value"]
            .as_i64()
            .unwrap()
    };
    assert!(value("gpu-interactive") > value("gpu-inference"));
    assert!(value("gpu-inference") > value("gpu-training"));
    assert!(value("gpu-training") < 100, "KAI preempts only below 100");
}

/// team-a's namespace: quota, network policies, role bindings, queue.
fn tenant_a(objs: &[Value]) {
    find(objs, "Namespace", "team-a", None);
    let hard = &find(objs, "ResourceQuota", "tenant-quota", Some("team-a"))["spec"]["hard"];
    assert_eq!(hard["requests.nvidia.com/gpu"], "4");
    assert_eq!(hard["requests.cpu"], "32");
    assert_eq!(hard["requests.memory"], "256Gi");
    let deny = &find(objs, "NetworkPolicy", "default-deny", Some("team-a"))["spec"];
    assert_eq!(deny["podSelector"], serde_json::json!({}));
    assert_eq!(
        deny["policyTypes"],
        serde_json::json!(["Ingress", "Egress"])
    );
    assert!(deny.get("ingress").is_none() && deny.get("egress").is_none());
    let same = &find(
        objs,
        "NetworkPolicy",
        "allow-same-namespace",
        Some("team-a"),
    )["spec"];
    assert_eq!(
        same["ingress"][0]["from"][0]["podSelector"],
        serde_json::json!({})
    );
    let dns = &find(objs, "NetworkPolicy", "allow-dns", Some("team-a"))["spec"]["egress"][0];
    assert_eq!(
        dns["to"][0]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
        "openshift-dns"
    );
    for (role, group) in [
        ("admin", "team-a-admins"),
        ("edit", "team-a-developers"),
        ("view", "auditors"),
    ] {
        let rb = find(
            objs,
            "RoleBinding",
            &format!("tenant-{role}"),
            Some("team-a"),
        );
        assert_eq!(rb["roleRef"]["name"], role);
        assert_eq!(
            rb["subjects"],
            serde_json::json!([{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": group}])
        );
    }
    find(objs, "LimitRange", "tenant-limits", Some("team-a"));
    let q = find(objs, "Queue", "team-a", None);
    assert!(
        q["metadata"].get("namespace").is_none(),
        "a Queue is cluster-scoped: {q}"
    );
    assert_eq!(q["spec"]["parentQueue"], "tenants");
    assert_eq!(q["spec"]["resources"]["gpu"]["quota"], 4);
    assert_eq!(q["spec"]["resources"]["gpu"]["limit"], 4);
}

/// The children's waves: operators, then policies, then queues, then tenants.
fn waves(apps: &[Value]) {
    let wave = |name: &str| -> i64 {
        let w = &find(apps, "Application", name, Some("openshift-gitops"))["metadata"]
            ["annotations"]["argocd.argoproj.io/sync-wave"];
        w.as_str()
            .unwrap_or_else(|| panic!("{name}'s wave is not a string: {w}"))
            .parse()
            .unwrap()
    };
    let operators = [
        "nfd",
        "nvidia-gpu-operator",
        "nvidia-network-operator",
        "openshift-ai",
        "kai-scheduler",
    ];
    let policies = [
        "nfd-instance",
        "gpu-cluster-policy",
        "nic-cluster-policy",
        "datasciencecluster",
    ];
    for o in operators {
        for p in policies {
            assert!(wave(o) < wave(p), "{o} before {p}");
            assert!(wave(p) < wave("kai-queues"), "{p} before kai-queues");
        }
    }
    assert!(wave("kai-queues") < wave("tenants"));
    let policy = find(apps, "Application", "gpu-cluster-policy", None);
    let options = policy["spec"]["syncPolicy"]["syncOptions"]
        .as_array()
        .unwrap();
    assert!(
        options
            .iter()
            .any(|o| o == "SkipDryRunOnMissingResource=true"),
        "{policy}"
    );
    assert!(policy["spec"]["syncPolicy"]["retry"]["backoff"]["duration"].is_string());
    assert_eq!(policy["spec"]["syncPolicy"]["automated"]["selfHeal"], true);
}

/// The root Application and the AppProject.
fn root(objs: &[Value]) {
    let root = find(objs, "Application", "root", Some("openshift-gitops"));
    assert_eq!(root["spec"]["project"], "platform");
    assert_eq!(
        root["spec"]["source"]["repoURL"],
        "https://192.168.111.1:8443/site.git"
    );
    assert_eq!(root["spec"]["source"]["path"], "apps");
    assert_eq!(
        root["spec"]["destination"]["server"],
        "https://kubernetes.default.svc"
    );
    assert_eq!(
        root["spec"]["syncPolicy"]["automated"],
        serde_json::json!({"prune": true, "selfHeal": true})
    );
    assert_eq!(
        root["metadata"]["finalizers"],
        serde_json::json!(["resources-finalizer.argocd.argoproj.io"])
    );
    let project = find(objs, "AppProject", "platform", Some("openshift-gitops"));
    assert_eq!(
        project["spec"]["sourceRepos"],
        serde_json::json!(["https://192.168.111.1:8443/site.git"])
    );
}

#[test]
fn the_example_site_takes_red_hat_operators_from_the_mirrors_catalog_source() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("site");
    init(&shipped_inventory("example-site"), &dir, &[]);
    for f in folders(&dir) {
        build(&f);
    }
    let nfd = build(&dir.join("cluster/nfd"));
    let sub = find(&nfd, "Subscription", "nfd", Some("openshift-nfd"));
    assert_eq!(
        sub["spec"]["source"], "cs-redhat-operator-index-v4-18",
        "from mirror/cluster-resources/"
    );
    assert!(
        sub["spec"].get("channel").is_none(),
        "no channel set: the package's default"
    );
    let gpu = build(&dir.join("cluster/nvidia-gpu-operator"));
    assert_eq!(
        find(&gpu, "Subscription", "gpu-operator-certified", None)["spec"]["source"],
        "cs-certified-operator-index-v4-18"
    );
    let root = build(&dir.join("bootstrap"));
    assert_eq!(
        find(&root, "Application", "root", None)["spec"]["source"]["targetRevision"],
        "main"
    );
}

#[test]
fn a_rerun_is_byte_identical_and_a_non_empty_directory_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("site");
    let inv = shipped_inventory("lab");
    init(&inv, &dir, &[]);
    let first = snapshot(&dir);
    let args = [
        "gitops",
        "init",
        dir.to_str().unwrap(),
        "--inventory",
        inv.to_str().unwrap(),
    ];
    let err = failed(&bootstrap(&args));
    assert!(
        err.contains("is not empty") && err.contains("--force"),
        "{err}"
    );
    let summary = init(&inv, &dir, &["--force"]);
    assert_eq!(snapshot(&dir), first, "a rerun changes no byte");
    assert!(
        summary["changed"].as_array().unwrap().is_empty(),
        "{summary}"
    );
    assert!(
        summary["created"].as_array().unwrap().is_empty(),
        "{summary}"
    );
    // --force rewrites the files it owns and leaves the others alone.
    let quota = dir.join("tenants/base/resourcequota.yaml");
    fs_err::write(&quota, "edited by hand\n").unwrap();
    fs_err::write(dir.join("NOTES.md"), "ours\n").unwrap();
    let summary = init(&inv, &dir, &["--force"]);
    assert_eq!(
        summary["changed"],
        serde_json::json!(["tenants/base/resourcequota.yaml"])
    );
    assert_eq!(fs_err::read(&quota).unwrap(), first[&quota]);
    assert_eq!(
        fs_err::read_to_string(dir.join("NOTES.md")).unwrap(),
        "ours\n"
    );
}

/// inventory/lab with `from` replaced by `to` in site.yaml.
fn mutated_lab(tmp: &Path, name: &str, from: &str, to: &str) -> PathBuf {
    let inv = tmp.join(name);
    copy_dir(&shipped_inventory("lab"), &inv);
    let site = inv.join("site.yaml");
    let text = fs_err::read_to_string(&site).unwrap();
    assert!(text.contains(from), "{from:?} not in the lab's site.yaml");
    fs_err::write(&site, text.replacen(from, to, 1)).unwrap();
    inv
}

/// The `LINE:COL` where `needle` starts in `inv`'s site.yaml.
fn position(inv: &Path, needle: &str) -> (usize, usize) {
    let text = fs_err::read_to_string(inv.join("site.yaml")).unwrap();
    let at = text.find(needle).unwrap();
    let line = text[..at].matches('\n').count() + 1;
    let col = at - text[..at].rfind('\n').map_or(0, |n| n + 1) + 1;
    (line, col)
}

#[test]
fn a_bad_inventory_is_refused_naming_the_place_and_the_field() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = [
        (
            "caps",
            "- name: team-a",
            "- name: Team-A",
            "Team-A",
            "gitops.tenants[0].name",
            "DNS-1123",
        ),
        (
            "reserved",
            "- name: team-b",
            "- name: openshift-ai",
            "name: openshift-ai",
            "gitops.tenants[1].name",
            "platform's",
        ),
        (
            "ssh-password",
            "url: https://192.168.111.1:8443/site.git",
            "url: ssh://git@192.168.111.1/site.git",
            "password:\n      file: secrets/git-password",
            "gitops.repository.password",
            "only over https",
        ),
        (
            "quantity",
            "memory: 256Gi",
            "memory: 256GB",
            "256GB",
            "gitops.tenants[0].memory",
            "Kubernetes quantity",
        ),
    ];
    for (name, from, to, at, field, words) in cases {
        let inv = mutated_lab(tmp.path(), name, from, to);
        let dir = tmp.path().join(format!("{name}-out"));
        let err = failed(&bootstrap(&[
            "gitops",
            "init",
            dir.to_str().unwrap(),
            "--inventory",
            inv.to_str().unwrap(),
        ]));
        let (line, _) = position(&inv, at);
        let prefix = format!("{}:{line}:", inv.join("site.yaml").display());
        let hit = err.lines().any(|l| {
            l.starts_with(&prefix) && l.contains(&format!(": {field}: ")) && l.contains(words)
        });
        assert!(
            hit,
            "{name}: expected {prefix}COL: {field}: ...{words}... in\n{err}"
        );
        assert!(!dir.exists(), "{name}: nothing is written");
    }
}

#[test]
fn an_operator_without_a_catalog_is_refused_naming_the_field_to_set() {
    let tmp = tempfile::tempdir().unwrap();
    let inv = tmp.path().join("example");
    copy_dir(&shipped_inventory("example-site"), &inv);
    let site = inv.join("site.yaml");
    let text = fs_err::read_to_string(&site).unwrap();
    let from = "    gpu-operator-certified:\n      catalog: cs-certified-operator-index-v4-18\n";
    assert!(text.contains(from));
    fs_err::write(
        &site,
        text.replacen(from, "    gpu-operator-certified:\n", 1),
    )
    .unwrap();
    let dir = tmp.path().join("out");
    let err = failed(&bootstrap(&[
        "gitops",
        "init",
        dir.to_str().unwrap(),
        "--inventory",
        inv.to_str().unwrap(),
    ]));
    assert!(
        err.contains("gitops.operators.gpu-operator-certified.catalog"),
        "{err}"
    );
    assert!(
        err.contains("certified-operator-index") && err.contains("cs-redhat-operator-index-v4-18"),
        "{err}"
    );
    assert!(
        err.contains(&format!("{}:", site.display())),
        "names site.yaml with its place: {err}"
    );
}
