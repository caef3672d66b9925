//! `bootstrap/` (the root Application and the `platform` AppProject, applied by the handoff
//! stage) and `apps/` (one child Application per component, ordered by sync waves: operators,
//! then their policies, then the KAI queues and priority classes, then the tenants).

use super::cluster::{KAI_NAMESPACE, OPERATORS};
use super::{object, source, Component, Files};
use crate::inventory::model::Gitops;
use anyhow::Result;
use serde_json::{json, Value};

/// Where OpenShift GitOps' default instance runs, and its Applications live.
pub const ARGOCD_NAMESPACE: &str = "openshift-gitops";
/// The AppProject of the root and every child.
pub const PROJECT: &str = "platform";
/// The root Application.
pub const ROOT: &str = "root";
/// The cluster Argo CD runs in.
pub const IN_CLUSTER: &str = "https://kubernetes.default.svc";

/// What one child deploys beyond its folder: its destination namespace (None: its objects are
/// cluster-scoped or name their own), and whether its folder holds custom resources whose CRD
/// another child installs.
struct Child {
    component: Component,
    namespace: Option<&'static str>,
    custom_resources: bool,
    /// Its folder creates its namespace itself (a Namespace object).
    owns_namespace: bool,
}

fn children() -> Vec<Child> {
    let child =
        |name: &str, path: String, wave, namespace, custom_resources, owns_namespace| Child {
            component: Component {
                name: name.to_string(),
                path,
                wave,
            },
            namespace,
            custom_resources,
            owns_namespace,
        };
    let mut out: Vec<Child> = OPERATORS
        .iter()
        .map(|op| {
            child(
                op.component,
                format!("cluster/{}", op.component),
                0,
                Some(op.namespace),
                false,
                true,
            )
        })
        .collect();
    out.push(child(
        "kai-scheduler",
        "cluster/kai-scheduler".into(),
        0,
        Some(KAI_NAMESPACE),
        false,
        true,
    ));
    // The policies: the NodeFeatureDiscovery lives in NFD's namespace, the others are
    // cluster-scoped.
    for (name, ns) in [
        ("nfd-instance", Some("openshift-nfd")),
        ("gpu-cluster-policy", None),
        ("nic-cluster-policy", None),
        ("datasciencecluster", None),
    ] {
        out.push(child(name, format!("cluster/{name}"), 1, ns, true, false));
    }
    out.push(child(
        "kai-queues",
        "cluster/kai-queues".into(),
        2,
        None,
        true,
        false,
    ));
    // Every tenant object names its namespace, and the bundle creates it.
    out.push(child("tenants", "tenants".into(), 3, None, true, true));
    out
}

/// The child Applications, by wave.
pub(super) fn components() -> Vec<Component> {
    children().into_iter().map(|c| c.component).collect()
}

/// Writes `bootstrap/` and `apps/`.
pub(super) fn write(files: &mut Files, g: &Gitops) -> Result<()> {
    files.yaml("bootstrap/project.yaml", &[project(g)])?;
    files.yaml("bootstrap/root.yaml", &[root(g)])?;
    files.kustomization("bootstrap", &["project.yaml".into(), "root.yaml".into()])?;
    let mut resources = Vec::new();
    for c in children() {
        let file = format!("{}.yaml", c.component.name);
        files.yaml(format!("apps/{file}"), &[application(g, &c)])?;
        resources.push(file);
    }
    files.kustomization("apps", &resources)
}

/// The AppProject: the site's repository only, this cluster only, and the cluster-scoped
/// kinds the children create (nothing else cluster-wide).
fn project(g: &Gitops) -> Value {
    let cluster_kinds: Vec<Value> = [
        ("", "Namespace"),
        ("apiextensions.k8s.io", "CustomResourceDefinition"),
        ("scheduling.k8s.io", "PriorityClass"),
        ("scheduling.run.ai", "Queue"),
        ("nvidia.com", "ClusterPolicy"),
        ("mellanox.com", "NicClusterPolicy"),
        ("datasciencecluster.opendatahub.io", "DataScienceCluster"),
    ]
    .into_iter()
    .map(|(group, kind)| json!({"group": group, "kind": kind}))
    .collect();
    object(
        "argoproj.io/v1alpha1",
        "AppProject",
        PROJECT,
        Some(ARGOCD_NAMESPACE),
        json!({
            "spec": {
                "description": "The GPU platform: operators, policies, KAI queues and tenants, from the site's GitOps repository.",
                "sourceRepos": [g.repository.url],
                "destinations": [{"server": IN_CLUSTER, "namespace": "*"}],
                "clusterResourceWhitelist": cluster_kinds,
            },
        }),
    )
}

/// The automated sync every Application uses.
fn automated() -> Value {
    json!({"prune": true, "selfHeal": true})
}

/// The root Application (app of apps): `apps/` of the repository.
fn root(g: &Gitops) -> Value {
    let mut app = object(
        "argoproj.io/v1alpha1",
        "Application",
        ROOT,
        Some(ARGOCD_NAMESPACE),
        json!({
            "spec": {
                "project": PROJECT,
                "source": source(g, "apps"),
                "destination": {"server": IN_CLUSTER, "namespace": ARGOCD_NAMESPACE},
                "syncPolicy": {"automated": automated()},
            },
        }),
    );
    app["metadata"]["finalizers"] = json!(["resources-finalizer.argocd.argoproj.io"]);
    app
}

/// A child Application, in its wave, retried with backoff (an operator's CRDs take minutes).
fn application(g: &Gitops, c: &Child) -> Value {
    let mut options = Vec::new();
    // A namespace its folder does not create (the operator's, from an earlier wave): created
    // if it is missing rather than failing the sync.
    if c.namespace.is_some() && !c.owns_namespace {
        options.push("CreateNamespace=true");
    }
    if c.custom_resources {
        options.push("SkipDryRunOnMissingResource=true");
    }
    let mut sync = json!({
        "automated": automated(),
        "retry": {"limit": 10, "backoff": {"duration": "10s", "factor": 2, "maxDuration": "5m"}},
    });
    if !options.is_empty() {
        sync["syncOptions"] = json!(options);
    }
    let mut destination = json!({"server": IN_CLUSTER});
    if let Some(ns) = c.namespace {
        destination["namespace"] = ns.into();
    }
    let mut app = object(
        "argoproj.io/v1alpha1",
        "Application",
        &c.component.name,
        Some(ARGOCD_NAMESPACE),
        json!({
            "spec": {
                "project": PROJECT,
                "source": source(g, &c.component.path),
                "destination": destination,
                "syncPolicy": sync,
            },
        }),
    );
    app["metadata"]["annotations"] =
        json!({"argocd.argoproj.io/sync-wave": c.component.wave.to_string()});
    app
}
