//! The lab's OLM imitation against the lab's Kubernetes store (in process, with the lab
//! cluster's CRDs and `olm::seed`): a Subscription without an
//! OperatorGroup says so; with one it goes through an InstallPlan to a CSV that walks its
//! phases, creating the operator's CRDs; a wrong source or package fails resolution in OLM's
//! words; OpenShift GitOps' CSV brings the default ArgoCD `Available` with a controller that
//! cannot write ResourceQuotas; the OperatorHub's `disableAllDefaultSources` removes the
//! default sources. Every wait is on the store's changes, with a generous limit.

use bootstrap_lab::site::kube::{ObjectRef, Store, WriteOptions};
use bootstrap_lab::site::olm::{self, OlmConfig};
use serde_json::{json, Value};
use std::time::Duration;

const V1ALPHA1: &str = "operators.coreos.com/v1alpha1";
const MARKETPLACE: &str = "openshift-marketplace";
/// The mirrored catalog's CatalogSource, as the mirror writes it (`cs-<repo>-<tag>`).
const MIRRORED: &str = "cs-redhat-operator-index-v4-18";
const GITOPS_NS: &str = "openshift-gitops-operator";
const GITOPS_CSV: &str = "openshift-gitops-operator.v1.15.1";
const CONTROLLER: &str =
    "system:serviceaccount:openshift-gitops:openshift-gitops-argocd-application-controller";
/// Far beyond what a pass takes; only a stuck controller reaches it.
const LIMIT: Duration = Duration::from_secs(120);

/// A lab store with the OLM imitation running on it; the task stops on drop.
struct Lab {
    store: Store,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The lab cluster's start (its CRDs: OLM, OpenShift config, ...) and `olm::seed`.
fn lab() -> Lab {
    // The controllers' warnings, in a failing test's output.
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    let store = Store::lab_cluster().unwrap();
    olm::seed(&store).unwrap();
    let cfg = OlmConfig {
        step: Duration::ZERO,
        ..OlmConfig::lab("mirror.lab:8443").unwrap()
    };
    let task = tokio::spawn(olm::run(store.clone(), cfg));
    Lab { store, task }
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

fn get(
    store: &Store,
    api_version: &str,
    kind: &str,
    ns: Option<&str>,
    name: &str,
) -> Option<Value> {
    store.get(&r(api_version, kind, ns, name)).ok()
}

/// Waits until `check` returns something, re-checking on every change of the store.
async fn wait_for<T>(store: &Store, what: &str, check: impl Fn(&Store) -> Option<T>) -> T {
    let wait = async {
        loop {
            let seen = store.revision();
            if let Some(v) = check(store) {
                return v;
            }
            store.changed(seen).await;
        }
    };
    match tokio::time::timeout(LIMIT, wait).await {
        Ok(v) => v,
        Err(_) => panic!("waiting for {what}: not within {LIMIT:?}"),
    }
}

fn apply(store: &Store, obj: Value) {
    store.apply(obj, &admin()).unwrap();
}

/// The mirror's CatalogSource for the lab catalog, and the default sources disabled, as the
/// hand-off does before it subscribes.
fn mirrored_catalog(store: &Store) {
    apply(
        store,
        json!({"apiVersion": V1ALPHA1, "kind": "CatalogSource",
        "metadata": {"name": MIRRORED, "namespace": MARKETPLACE},
        "spec": {"sourceType": "grpc", "image": "mirror.lab:8443/redhat/redhat-operator-index:v4.18"}}),
    );
    apply(
        store,
        json!({"apiVersion": "config.openshift.io/v1", "kind": "OperatorHub",
        "metadata": {"name": "cluster"}, "spec": {"disableAllDefaultSources": true}}),
    );
}

fn namespace(store: &Store, ns: &str) {
    apply(
        store,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
    );
}

fn operator_group(store: &Store, ns: &str) {
    apply(
        store,
        json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
        "metadata": {"name": ns, "namespace": ns}, "spec": {}}),
    );
}

fn subscribe(store: &Store, ns: &str, package: &str, channel: &str, source: &str) {
    apply(
        store,
        json!({"apiVersion": V1ALPHA1, "kind": "Subscription",
        "metadata": {"name": package, "namespace": ns},
        "spec": {"name": package, "channel": channel, "source": source,
                 "sourceNamespace": MARKETPLACE, "installPlanApproval": "Automatic"}}),
    );
}

fn condition<'a>(obj: &'a Value, kind: &str) -> Option<&'a Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

fn subscription(store: &Store, ns: &str, name: &str) -> Value {
    get(store, V1ALPHA1, "Subscription", Some(ns), name).unwrap()
}

/// Installs OpenShift GitOps as the hand-off does and waits for its CSV to Succeed.
async fn install_gitops(store: &Store) -> Value {
    mirrored_catalog(store);
    namespace(store, GITOPS_NS);
    operator_group(store, GITOPS_NS);
    subscribe(
        store,
        GITOPS_NS,
        "openshift-gitops-operator",
        "latest",
        MIRRORED,
    );
    wait_for(store, "the GitOps CSV to succeed", |s| {
        get(
            s,
            V1ALPHA1,
            "ClusterServiceVersion",
            Some(GITOPS_NS),
            GITOPS_CSV,
        )
        .filter(|c| c["status"]["phase"] == "Succeeded")
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_without_an_operator_group_says_so_and_installs_once_there_is_one() {
    let lab = lab();
    let store = &lab.store;
    mirrored_catalog(store);
    namespace(store, "nfd-test");
    subscribe(store, "nfd-test", "nfd", "stable", MIRRORED);
    let cond = wait_for(store, "the ResolutionFailed condition", |s| {
        condition(&subscription(s, "nfd-test", "nfd"), "ResolutionFailed").cloned()
    })
    .await;
    assert_eq!(cond["status"], "True");
    assert_eq!(cond["reason"], "ErrorPreventedResolution");
    assert_eq!(
        cond["message"],
        "expected 1 OperatorGroup in the namespace, found 0"
    );
    let plans = store
        .list(V1ALPHA1, "InstallPlan", Some("nfd-test"), None)
        .unwrap();
    assert!(
        plans.is_empty(),
        "an InstallPlan without an OperatorGroup: {plans:?}"
    );

    operator_group(store, "nfd-test");
    let sub = wait_for(store, "nfd installed", |s| {
        Some(subscription(s, "nfd-test", "nfd")).filter(|s| s["status"]["state"] == "AtLatestKnown")
    })
    .await;
    assert_eq!(sub["status"]["installedCSV"], "nfd.4.18.0-202503041405");
    assert!(condition(&sub, "ResolutionFailed").is_none(), "{sub:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_installs_the_channel_head_through_an_install_plan_and_csv_phases() {
    let lab = lab();
    let store = &lab.store;
    let csv = install_gitops(store).await;
    let sub = wait_for(store, "the Subscription at its latest", |s| {
        Some(subscription(s, GITOPS_NS, "openshift-gitops-operator"))
            .filter(|s| s["status"]["state"] == "AtLatestKnown")
    })
    .await;
    let status = &sub["status"];
    assert_eq!(status["installedCSV"], GITOPS_CSV);
    assert_eq!(status["currentCSV"], GITOPS_CSV);
    let health = condition(&sub, "CatalogSourcesUnhealthy").unwrap();
    assert_eq!(health["status"], "False", "{sub:#}");
    let catalogs = status["catalogHealth"].as_array().unwrap();
    assert_eq!(
        catalogs.len(),
        1,
        "only the mirrored source is left: {catalogs:?}"
    );
    assert_eq!(catalogs[0]["catalogSourceRef"]["name"], MIRRORED);
    assert_eq!(catalogs[0]["healthy"], true);

    let plan_name = completed_plan(store, status);

    let phases: Vec<&str> = csv["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["phase"].as_str().unwrap())
        .collect();
    assert_eq!(
        phases,
        ["Pending", "InstallReady", "Installing", "Succeeded"]
    );
    assert_eq!(csv["status"]["reason"], "InstallSucceeded");
    assert_eq!(
        csv["metadata"]["annotations"]["olm.operatorGroup"], GITOPS_NS,
        "{:#}",
        csv["metadata"]
    );
    for crd in [
        "argocds.argoproj.io",
        "applications.argoproj.io",
        "appprojects.argoproj.io",
    ] {
        let obj = get(
            store,
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            None,
            crd,
        )
        .unwrap_or_else(|| panic!("{crd} was not created"));
        assert_eq!(
            condition(&obj, "Established").unwrap()["status"],
            "True",
            "{crd}"
        );
    }
    assert!(store.is_established("argoproj.io/v1beta1", "ArgoCD"));
    audit_order(store, plan_name);
}

/// The Subscription's InstallPlan: automatic, approved, for the channel head, Complete with
/// every step made; its name.
fn completed_plan<'a>(store: &Store, status: &'a Value) -> &'a str {
    let plan_name = status["installPlanRef"]["name"].as_str().unwrap();
    assert_eq!(status["installplan"]["name"], plan_name);
    let plan = get(store, V1ALPHA1, "InstallPlan", Some(GITOPS_NS), plan_name).unwrap();
    assert_eq!(plan["spec"]["approval"], "Automatic");
    assert_eq!(plan["spec"]["approved"], true);
    assert_eq!(
        plan["spec"]["clusterServiceVersionNames"],
        json!([GITOPS_CSV])
    );
    assert_eq!(plan["status"]["phase"], "Complete");
    assert!(plan["status"]["plan"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["status"] == "Created"));
    plan_name
}

/// The audit: the Subscription, then its InstallPlan, the CRDs, the CSV, then the CSV's four
/// phase writes, each by its controller.
fn audit_order(store: &Store, plan_name: &str) {
    let audit = store.audit();
    let first = |pred: &dyn Fn(&bootstrap_lab::site::kube::AuditEvent) -> bool| {
        audit
            .iter()
            .position(|e| e.code < 300 && pred(e))
            .expect("no such call")
    };
    let writes = |e: &bootstrap_lab::site::kube::AuditEvent| e.verb != "get" && e.verb != "list";
    let sub = first(&|e| writes(e) && e.kind == "Subscription" && e.subresource.is_none());
    let plan =
        first(&|e| writes(e) && e.kind == "InstallPlan" && e.name.as_deref() == Some(plan_name));
    let crd = first(&|e| writes(e) && e.name.as_deref() == Some("argocds.argoproj.io"));
    let csv = first(&|e| writes(e) && e.kind == "ClusterServiceVersion" && e.subresource.is_none());
    assert!(
        sub < plan && plan < crd && crd < csv,
        "order: sub {sub}, plan {plan}, crd {crd}, csv {csv}"
    );
    let phase_writes: Vec<_> = audit
        .iter()
        .filter(|e| {
            e.kind == "ClusterServiceVersion"
                && e.subresource.as_deref() == Some("status")
                && writes(e)
                && e.code < 300
        })
        .collect();
    assert_eq!(
        phase_writes.len(),
        4,
        "one status write per phase: {phase_writes:#?}"
    );
    assert!(phase_writes
        .iter()
        .all(|e| e.field_manager.as_deref() == Some("olm-operator")));
    assert!(
        audit
            .iter()
            .position(|e| std::ptr::eq(e, phase_writes[0]))
            .unwrap()
            > csv
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_source_or_package_fails_resolution_in_olms_words() {
    let lab = lab();
    let store = &lab.store;
    mirrored_catalog(store);
    namespace(store, "wrong");
    operator_group(store, "wrong");
    subscribe(store, "wrong", "nfd", "stable", "no-such-catalog");
    subscribe(store, "wrong", "no-such-package", "stable", MIRRORED);
    let failed = |name: &'static str| {
        move |s: &Store| condition(&subscription(s, "wrong", name), "ResolutionFailed").cloned()
    };
    let cond = wait_for(store, "nfd's resolution to fail", failed("nfd")).await;
    assert_eq!(cond["reason"], "ConstraintsNotSatisfiable");
    assert_eq!(cond["message"], "constraints not satisfiable: subscription nfd exists, no operators found from catalog no-such-catalog in namespace openshift-marketplace referenced by subscription nfd");
    let sub = subscription(store, "wrong", "nfd");
    let health = condition(&sub, "CatalogSourcesUnhealthy").unwrap();
    assert_eq!(health["status"], "True");
    assert_eq!(
        health["message"],
        "targeted catalogsource openshift-marketplace/no-such-catalog missing"
    );
    let cond = wait_for(
        store,
        "the unknown package's resolution to fail",
        failed("no-such-package"),
    )
    .await;
    assert_eq!(cond["message"], "constraints not satisfiable: subscription no-such-package exists, no operators found in package no-such-package in the catalog referenced by subscription no-such-package");
    assert!(store
        .list(V1ALPHA1, "InstallPlan", Some("wrong"), None)
        .unwrap()
        .is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gitops_brings_the_default_argocd_available_and_a_controller_without_quota_rights() {
    let lab = lab();
    let store = &lab.store;
    install_gitops(store).await;
    let argocd = wait_for(store, "the default ArgoCD Available", |s| {
        get(
            s,
            "argoproj.io/v1beta1",
            "ArgoCD",
            Some("openshift-gitops"),
            "openshift-gitops",
        )
        .filter(|a| a["status"]["phase"] == "Available")
    })
    .await;
    assert_eq!(argocd["status"]["applicationController"], "Running");
    let argo_status_writes: Vec<_> = store
        .audit()
        .into_iter()
        .filter(|e| {
            e.kind == "ArgoCD"
                && e.subresource.as_deref() == Some("status")
                && e.code < 300
                && e.verb != "get"
        })
        .collect();
    assert_eq!(
        argo_status_writes.len(),
        2,
        "Pending, then Available: {argo_status_writes:#?}"
    );
    for cm in [
        "argocd-cm",
        "argocd-rbac-cm",
        "argocd-tls-certs-cm",
        "argocd-ssh-known-hosts-cm",
    ] {
        assert!(
            get(store, "v1", "ConfigMap", Some("openshift-gitops"), cm).is_some(),
            "{cm}"
        );
    }
    assert!(get(
        store,
        "argoproj.io/v1alpha1",
        "AppProject",
        Some("openshift-gitops"),
        "default"
    )
    .is_some());
    let role = "openshift-gitops-openshift-gitops-argocd-application-controller";
    let cluster_role = get(
        store,
        "rbac.authorization.k8s.io/v1",
        "ClusterRole",
        None,
        role,
    )
    .unwrap();
    for rule in cluster_role["rules"].as_array().unwrap() {
        let writes = rule["verbs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| !["get", "list", "watch"].contains(&v.as_str().unwrap()));
        let core_or_all = rule["apiGroups"]
            .as_array()
            .is_some_and(|g| g.iter().any(|g| g == "" || g == "*"));
        let names = |r: &str| {
            rule["resources"]
                .as_array()
                .is_some_and(|rs| rs.iter().any(|x| x == r || x == "*"))
        };
        assert!(
            !(writes && core_or_all && (names("resourcequotas") || names("limitranges"))),
            "{rule}"
        );
    }
    // The store's RBAC agrees: the controller may make a namespace's ConfigMap, not its quota.
    let as_controller = WriteOptions {
        field_manager: "argocd-controller".into(),
        user: CONTROLLER.into(),
        ..WriteOptions::default()
    };
    namespace(store, "tenant-a");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "tenant-a"}});
    store.create(cm, &as_controller).unwrap();
    let quota = json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "tenant-a"}, "spec": {"hard": {"pods": "10"}}});
    let refused = store.create(quota, &as_controller).unwrap_err();
    assert_eq!(refused.code, 403, "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_health_check_in_the_argocd_spec_reaches_argocd_cm() {
    let lab = lab();
    let store = &lab.store;
    install_gitops(store).await;
    let argocd = r(
        "argoproj.io/v1beta1",
        "ArgoCD",
        Some("openshift-gitops"),
        "openshift-gitops",
    );
    wait_for(store, "the default ArgoCD", |s| s.get(&argocd).ok()).await;
    let patch = json!({"spec": {"resourceHealthChecks": [{"group": "argoproj.io", "kind": "Application", "check": "hs = {}\nreturn hs\n"}]}});
    store.merge_patch(&argocd, patch, &admin(), None).unwrap();
    let data = wait_for(store, "the health check in argocd-cm", |s| {
        let cm = get(s, "v1", "ConfigMap", Some("openshift-gitops"), "argocd-cm")?;
        cm["data"]
            .get("resource.customizations.health.argoproj.io_Application")
            .cloned()
    })
    .await;
    assert_eq!(data, "hs = {}\nreturn hs\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabling_all_default_sources_removes_them_and_the_hub_says_so() {
    let lab = lab();
    let store = &lab.store;
    let defaults = [
        "certified-operators",
        "community-operators",
        "redhat-marketplace",
        "redhat-operators",
    ];
    // An air-gapped cluster cannot read its default sources.
    wait_for(store, "the default sources failing", |s| {
        defaults
            .iter()
            .all(|d| {
                get(s, V1ALPHA1, "CatalogSource", Some(MARKETPLACE), d).is_some_and(|c| {
                    c["status"]["connectionState"]["lastObservedState"] == "TRANSIENT_FAILURE"
                })
            })
            .then_some(())
    })
    .await;
    mirrored_catalog(store);
    let hub = wait_for(store, "the hub's status to say disabled", |s| {
        let hub = get(s, "config.openshift.io/v1", "OperatorHub", None, "cluster")?;
        let sources = hub["status"]["sources"].as_array()?.clone();
        (sources.len() == 4 && sources.iter().all(|x| x["disabled"] == true)).then_some(sources)
    })
    .await;
    assert!(hub.iter().all(|x| x["status"] == "Success"), "{hub:?}");
    let left: Vec<String> = store
        .list(V1ALPHA1, "CatalogSource", Some(MARKETPLACE), None)
        .unwrap()
        .iter()
        .map(|c| c["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(left, [MIRRORED]);
    wait_for(store, "the mirrored source READY", |s| {
        get(s, V1ALPHA1, "CatalogSource", Some(MARKETPLACE), MIRRORED)
            .filter(|c| c["status"]["connectionState"]["lastObservedState"] == "READY")
    })
    .await;
    // A source enabled by name comes back, as the marketplace operator honours the override.
    apply(
        store,
        json!({"apiVersion": "config.openshift.io/v1", "kind": "OperatorHub", "metadata": {"name": "cluster"},
        "spec": {"disableAllDefaultSources": true, "sources": [{"name": "redhat-operators", "disabled": false}]}}),
    );
    wait_for(store, "redhat-operators back", |s| {
        get(
            s,
            V1ALPHA1,
            "CatalogSource",
            Some(MARKETPLACE),
            "redhat-operators",
        )
    })
    .await;
}
