//! The lab's Git server (real `git http-backend` behind HTTPS and Basic auth) and the Argo CD
//! imitation against the lab's Kubernetes store: an app-of-apps served by the Git server, the
//! controller acting as OpenShift GitOps' default instance under the store's RBAC. Every wait
//! is on the store's revision (`Store::changed`), bounded by a generous limit.

use bootstrap::secret::Secret;
use bootstrap_lab::site::argocd::{self, ArgoConfig, CONTROLLER_USER};
use bootstrap_lab::site::git_server::{git_command, GitAccess, GitServer, GitTls};
use bootstrap_lab::site::kube::{ObjectRef, Store, WriteOptions};
use bootstrap_lab::site::pki::LabCa;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

const USER: &str = "lab";
const PASSWORD: &str = "lab-git-pass";
/// How long any one wait may take (a loaded CI machine; the waits are event-driven).
const LIMIT: Duration = Duration::from_secs(120);

async fn git_server(dir: &Path) -> (GitServer, String) {
    let ca = LabCa::generate().unwrap();
    let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let tls = GitTls::from_ca(&ca, listen, &["localhost".into()]).unwrap();
    let server = GitServer::start(&dir.join("repos"), listen, USER, Secret::new(PASSWORD), tls)
        .await
        .unwrap();
    let url = server.create_repo("site").unwrap();
    (server, url)
}

fn access(ca: Option<&str>, password: &str) -> GitAccess {
    GitAccess {
        credentials: Some((USER.into(), Secret::new(password))),
        ca_pem: ca.map(String::from),
        insecure: false,
    }
}

/// Runs git in `work` (its HOME) with `access`; its output.
async fn git(work: &Path, access: &GitAccess, args: &[&str]) -> std::process::Output {
    let mut cmd = git_command(work, access).unwrap();
    cmd.args(["-c", "user.name=lab", "-c", "user.email=lab@bootstrap"])
        .args(args);
    cmd.output().await.unwrap()
}

async fn git_ok(work: &Path, access: &GitAccess, args: &[&str]) {
    let out = git(work, access, args).await;
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Writes `files` into a clone of `url` and pushes them as one commit.
async fn push(work: &Path, url: &str, a: &GitAccess, files: &[(&str, String)]) {
    let clone = work.join("clone");
    if !clone.exists() {
        git_ok(work, a, &["clone", "--quiet", url, clone.to_str().unwrap()]).await;
    }
    for (path, text) in files {
        let p = clone.join(path);
        fs_err::create_dir_all(p.parent().unwrap()).unwrap();
        fs_err::write(&p, text).unwrap();
    }
    let dir = clone.to_str().unwrap();
    git_ok(work, a, &["-C", dir, "add", "-A"]).await;
    git_ok(work, a, &["-C", dir, "commit", "--quiet", "-m", "change"]).await;
    git_ok(
        work,
        a,
        &["-C", dir, "push", "--quiet", "origin", "HEAD:main"],
    )
    .await;
}

#[tokio::test]
async fn git_server_clones_and_pushes_over_https_with_the_lab_user() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, url) = git_server(tmp.path()).await;
    let good = access(Some(&server.ca_pem), PASSWORD);
    push(
        &tmp.path().join("a"),
        &url,
        &good,
        &[("README", "hello\n".into())],
    )
    .await;
    let b = tmp.path().join("b");
    git_ok(
        &b,
        &good,
        &["clone", "--quiet", &url, b.join("c").to_str().unwrap()],
    )
    .await;
    assert_eq!(
        fs_err::read_to_string(b.join("c/README")).unwrap(),
        "hello\n"
    );

    let wrong = git(
        &tmp.path().join("w"),
        &access(Some(&server.ca_pem), "nope"),
        &["ls-remote", &url],
    )
    .await;
    assert!(!wrong.status.success());
    let err = String::from_utf8_lossy(&wrong.stderr);
    assert!(err.contains("Authentication failed"), "{err}");
    assert!(!err.contains("nope"), "the password is not echoed: {err}");

    let no_ca = git(
        &tmp.path().join("n"),
        &access(None, PASSWORD),
        &["ls-remote", &url],
    )
    .await;
    assert!(!no_ca.status.success());
    let err = String::from_utf8_lossy(&no_ca.stderr);
    assert!(err.contains("certificate"), "{err}");

    let pem = reqwest::Certificate::from_pem(server.ca_pem.as_bytes()).unwrap();
    let client = reqwest::Client::builder()
        .tls_certs_only([pem])
        .no_proxy()
        .build()
        .unwrap();
    let r = client
        .get(format!("{url}/info/refs?service=git-upload-pack"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert!(r.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .starts_with("Basic realm="));
}

fn admin() -> WriteOptions {
    WriteOptions {
        field_manager: "test".into(),
        ..WriteOptions::default()
    }
}

fn r(api_version: &str, kind: &str, ns: Option<&str>, name: &str) -> ObjectRef {
    ObjectRef {
        api_version: api_version.into(),
        kind: kind.into(),
        namespace: ns.map(String::from),
        name: name.into(),
    }
}

fn app_ref(name: &str) -> ObjectRef {
    r(
        "argoproj.io/v1alpha1",
        "Application",
        Some("openshift-gitops"),
        name,
    )
}

/// The operator's ArgoCD CRD, reduced to what the controller reads.
const ARGOCD_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: argocds.argoproj.io}
spec:
  group: argoproj.io
  names: {kind: ArgoCD, listKind: ArgoCDList, plural: argocds, singular: argocd}
  scope: Namespaced
  versions:
  - name: v1beta1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"#;

/// The objects the operator makes for the default instance: its namespace, a controller
/// role without ResourceQuota and LimitRange, and the ArgoCD resource, Available.
fn cluster(app_check: bool) -> Store {
    let store = Store::new();
    let crd = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/gitops/crds/application-crd.yaml"
    );
    store
        .load_crds(&fs_err::read_to_string(crd).unwrap())
        .unwrap();
    store.load_crds(ARGOCD_CRD).unwrap();
    let ns =
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "openshift-gitops"}});
    store.apply(ns, &admin()).unwrap();
    let rules = json!([
        {"apiGroups": [""], "resources": ["namespaces", "configmaps", "secrets", "serviceaccounts", "services"], "verbs": ["*"]},
        {"apiGroups": ["argoproj.io"], "resources": ["*"], "verbs": ["*"]},
        {"apiGroups": ["rbac.authorization.k8s.io", "networking.k8s.io"], "resources": ["*"], "verbs": ["*"]},
    ]);
    grant(&store, "argocd-controller-lab", rules);
    let mut spec = json!({});
    if app_check {
        let check = "hs = {}\nhs.status = \"Progressing\"\nif obj.status ~= nil and obj.status.health ~= nil then\n  hs.status = obj.status.health.status\nend\nreturn hs\n";
        spec["resourceHealthChecks"] =
            json!([{"group": "argoproj.io", "kind": "Application", "check": check}]);
    }
    let argocd = json!({"apiVersion": "argoproj.io/v1beta1", "kind": "ArgoCD",
        "metadata": {"name": "openshift-gitops", "namespace": "openshift-gitops"}, "spec": spec});
    store.apply(argocd.clone(), &admin()).unwrap();
    let mut status = argocd;
    status["status"] = json!({"phase": "Available"});
    store.apply_status(status, &admin()).unwrap();
    store
}

/// A ClusterRole with `rules`, bound to the application controller.
fn grant(store: &Store, name: &str, rules: Value) {
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": name}, "rules": rules});
    store.apply(role, &admin()).unwrap();
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "openshift-gitops-argocd-application-controller", "namespace": "openshift-gitops"}]});
    store.apply(binding, &admin()).unwrap();
}

fn application(name: &str, url: &str, path: &str, wave: &str, dest_ns: &str) -> String {
    format!(
        r#"apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: {name}
  namespace: openshift-gitops
  annotations:
    argocd.argoproj.io/sync-wave: "{wave}"
  finalizers:
  - resources-finalizer.argocd.argoproj.io
spec:
  project: default
  source:
    repoURL: {url}
    path: {path}
    targetRevision: main
  destination:
    server: https://kubernetes.default.svc
    namespace: {dest_ns}
  syncPolicy:
    automated:
      prune: true
      selfHeal: true
    syncOptions:
    - CreateNamespace=true
    - ServerSideApply=true
    retry:
      limit: -1
      backoff:
        duration: 1s
        factor: 1
        maxDuration: 1s
"#
    )
}

/// The site repository: root/ holds two child Applications (waves 1 and 2); apps/a (a
/// kustomization) a Namespace and a ConfigMap; apps/b a ResourceQuota.
fn site_files(url: &str, greeting: &str) -> Vec<(&'static str, String)> {
    vec![
        ("root/a.yaml", application("child-a", url, "apps/a", "1", "team-a")),
        ("root/b.yaml", application("child-b", url, "apps/b", "2", "team-b")),
        ("apps/a/kustomization.yaml", "resources:\n- namespace.yaml\n- configmap.yaml\n".into()),
        ("apps/a/namespace.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\n".into()),
        ("apps/a/configmap.yaml", format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: greeting\n  namespace: team-a\ndata:\n  text: \"{greeting}\"\n")),
        ("apps/b/quota.yaml", "apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: gpu\nspec:\n  hard:\n    requests.nvidia.com/gpu: \"4\"\n".into()),
    ]
}

fn root_app(url: &str) -> Value {
    let text = application("root", url, "root", "0", "openshift-gitops");
    serde_saphyr::from_str(&text).unwrap()
}

/// The controller, stopped on drop.
struct Controller(tokio::task::JoinHandle<anyhow::Result<()>>);

impl Drop for Controller {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn start_controller(store: &Store, work: &Path) -> Controller {
    let cfg = ArgoConfig {
        work_dir: work.to_path_buf(),
        kubectl: "kubectl".into(),
        resync: Duration::from_secs(180),
    };
    Controller(tokio::spawn(argocd::run(store.clone(), cfg)))
}

/// Waits until `pred` holds, re-checking on every store change; fails after LIMIT with `what`
/// and the Applications' statuses.
async fn wait_for(store: &Store, what: &str, pred: impl Fn(&Store) -> bool) {
    let deadline = tokio::time::Instant::now() + LIMIT;
    loop {
        let seen = store.revision();
        if pred(store) {
            return;
        }
        if tokio::time::timeout_at(deadline, store.changed(seen))
            .await
            .is_err()
        {
            let apps = store
                .list("argoproj.io/v1alpha1", "Application", None, None)
                .unwrap();
            let statuses: Vec<_> = apps
                .iter()
                .map(|a| (&a["metadata"]["name"], &a["status"]))
                .collect();
            panic!("{what}: not within {LIMIT:?}; the Applications: {statuses:#?}");
        }
    }
}

fn app_status(store: &Store, name: &str) -> Value {
    store
        .get(&app_ref(name))
        .map(|a| a["status"].clone())
        .unwrap_or(Value::Null)
}

fn synced_and_healthy(store: &Store, name: &str) -> bool {
    let s = app_status(store, name);
    s["sync"]["status"] == "Synced" && s["health"]["status"] == "Healthy"
}

fn comparison_error(store: &Store, name: &str) -> String {
    let s = app_status(store, name);
    s["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "ComparisonError")
        .and_then(|c| c["message"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// The audit sequence number of the controller's first successful apply of `kind`/`name`.
fn applied_at(store: &Store, kind: &str, name: &str) -> u64 {
    store
        .audit()
        .into_iter()
        .find(|e| {
            e.user == CONTROLLER_USER
                && e.verb == "apply"
                && e.kind == kind
                && e.name.as_deref() == Some(name)
                && e.code < 300
        })
        .unwrap_or_else(|| panic!("the controller never applied {kind} {name}"))
        .seq
}

fn repo_secret(url: &str) -> Value {
    let b = |s: &str| base64_encode(s.as_bytes());
    json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "site-repo", "namespace": "openshift-gitops",
            "labels": {"argocd.argoproj.io/secret-type": "repository"}},
        "data": {"type": b("git"), "url": b(url), "username": b(USER), "password": b(PASSWORD)}})
}

fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn tls_certs(ca_pem: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "argocd-tls-certs-cm", "namespace": "openshift-gitops"},
        "data": {"127.0.0.1": ca_pem}})
}

#[tokio::test]
async fn app_of_apps_syncs_in_waves_under_the_controllers_rbac() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, url) = git_server(tmp.path()).await;
    let author = access(Some(&server.ca_pem), PASSWORD);
    push(
        &tmp.path().join("author"),
        &url,
        &author,
        &site_files(&url, "hello"),
    )
    .await;
    let store = cluster(true);
    store.apply(root_app(&url), &admin()).unwrap();
    let _ctl = start_controller(&store, &tmp.path().join("argocd"));

    wait_for(&store, "root: x509 error without the CA", |s| {
        comparison_error(s, "root").contains("x509: certificate signed by unknown authority")
    })
    .await;
    store.apply(tls_certs(&server.ca_pem), &admin()).unwrap();
    wait_for(
        &store,
        "root: authentication required without the Secret",
        |s| comparison_error(s, "root").contains("authentication required"),
    )
    .await;
    assert!(comparison_error(&store, "root").starts_with("Failed to load target state"));
    assert_eq!(app_status(&store, "root")["sync"]["status"], "Unknown");
    store.apply(repo_secret(&url), &admin()).unwrap();

    wait_for(&store, "child-a Synced and Healthy", |s| {
        synced_and_healthy(s, "child-a")
    })
    .await;
    wait_for(&store, "child-b refused ResourceQuota", |s| {
        app_status(s, "child-b")["operationState"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("resourcequotas \"gpu\" is forbidden"))
    })
    .await;
    let b = app_status(&store, "child-b");
    assert_ne!(b["health"]["status"], "Healthy", "{b:#}");
    assert!(
        !synced_and_healthy(&store, "root"),
        "root waits on child-b's health"
    );
    // Wave 1's child was Healthy (its ConfigMap applied) before wave 2's was applied.
    assert!(
        applied_at(&store, "ConfigMap", "greeting") < applied_at(&store, "Application", "child-b")
    );

    grant(
        &store,
        "tenant-quotas",
        json!([{"apiGroups": [""], "resources": ["resourcequotas", "limitranges"], "verbs": ["*"]}]),
    );
    wait_for(&store, "every Application Synced and Healthy", |s| {
        ["root", "child-a", "child-b"]
            .iter()
            .all(|a| synced_and_healthy(s, a))
    })
    .await;
    let quota = store
        .get(&r("v1", "ResourceQuota", Some("team-b"), "gpu"))
        .unwrap();
    assert_eq!(
        quota["metadata"]["annotations"]["argocd.argoproj.io/tracking-id"],
        "child-b:/ResourceQuota:team-b/gpu"
    );
    let root = app_status(&store, "root");
    let revision = root["sync"]["revision"].as_str().unwrap().to_string();
    assert_eq!(revision.len(), 40, "{root:#}");
    assert_eq!(root["operationState"]["phase"], "Succeeded");

    push(
        &tmp.path().join("author"),
        &url,
        &author,
        &[(
            "apps/a/configmap.yaml",
            site_files(&url, "changed")[4].1.clone(),
        )],
    )
    .await;
    let refresh = json!({"metadata": {"annotations": {"argocd.argoproj.io/refresh": "normal"}}});
    store
        .merge_patch(&app_ref("child-a"), refresh, &admin(), None)
        .unwrap();
    wait_for(&store, "the pushed change synced", |s| {
        s.get(&r("v1", "ConfigMap", Some("team-a"), "greeting"))
            .is_ok_and(|c| c["data"]["text"] == "changed")
    })
    .await;
    wait_for(&store, "child-a at the new commit", |s| {
        app_status(s, "child-a")["sync"]["revision"]
            .as_str()
            .is_some_and(|r| r != revision)
    })
    .await;
}

#[tokio::test]
async fn without_the_application_health_check_the_root_does_not_wait_for_its_children() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, url) = git_server(tmp.path()).await;
    let author = access(Some(&server.ca_pem), PASSWORD);
    push(
        &tmp.path().join("author"),
        &url,
        &author,
        &site_files(&url, "hello"),
    )
    .await;
    let store = cluster(false);
    store.apply(tls_certs(&server.ca_pem), &admin()).unwrap();
    store.apply(repo_secret(&url), &admin()).unwrap();
    grant(
        &store,
        "tenant-quotas",
        json!([{"apiGroups": [""], "resources": ["resourcequotas", "limitranges"], "verbs": ["*"]}]),
    );
    store.apply(root_app(&url), &admin()).unwrap();
    let _ctl = start_controller(&store, &tmp.path().join("argocd"));

    wait_for(&store, "every Application Synced and Healthy", |s| {
        ["root", "child-a", "child-b"]
            .iter()
            .all(|a| synced_and_healthy(s, a))
    })
    .await;
    // Wave 2's child was applied before wave 1's child had synced anything.
    assert!(
        applied_at(&store, "Application", "child-b") < applied_at(&store, "ConfigMap", "greeting")
    );

    // Deleting the root cascades through the finalizers to every child and its resources.
    let opts = admin();
    store.delete(&app_ref("root"), &opts).unwrap();
    wait_for(&store, "the cascade", |s| {
        s.get(&app_ref("root")).is_err()
            && s.get(&app_ref("child-a")).is_err()
            && s.get(&r("v1", "ConfigMap", Some("team-a"), "greeting"))
                .is_err()
    })
    .await;
}
