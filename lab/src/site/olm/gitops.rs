//! What OpenShift GitOps does once its CSV Succeeded, as the gitops-operator (1.15) and the
//! argocd-operator it embeds do it: the `openshift-gitops` namespace (restricted pod security,
//! cluster monitoring), the default ArgoCD instance `openshift-gitops` (`argocd.NewCR`), and for
//! that instance the ConfigMaps `argocd-cm` (kept in step with the ArgoCD spec, health checks
//! included), `argocd-rbac-cm`, `argocd-tls-certs-cm` and `argocd-ssh-known-hosts-cm` (made
//! once: the hand-off patches them), the application controller's ServiceAccount, its
//! cluster-wide ClusterRole (`policyRulesForClusterConfig` of the gitops-operator:
//! read-all, write only to listed groups and, in the core group, namespaces, PVCs, PVs and
//! ConfigMaps; no ResourceQuota or LimitRange) with its binding, its namespaced Role
//! (`getPolicyRuleForApplicationController` plus the `admin` ClusterRole's rules, when the
//! cluster has one), and the AppProject `default` Argo CD makes at start. The ArgoCD's status
//! is `Pending` when made and `Available` (every component `Running`) one pass later. No pods,
//! Routes, Dex or Redis: the lab's Argo CD imitation runs in-process.

use super::objects::{self, name};
use crate::site::kube::Store;
use anyhow::Result;
use serde_json::{json, Map, Value};

/// The default instance's namespace.
pub const NAMESPACE: &str = "openshift-gitops";
/// The default ArgoCD's name.
pub const INSTANCE: &str = "openshift-gitops";
/// The package whose CSV brings all this.
pub const PACKAGE: &str = "openshift-gitops-operator";
/// The application controller's ServiceAccount.
pub const CONTROLLER_SA: &str = "openshift-gitops-argocd-application-controller";
/// Its ClusterRole and ClusterRoleBinding (`<name>-<namespace>-argocd-application-controller`).
pub const CONTROLLER_CLUSTER_ROLE: &str =
    "openshift-gitops-openshift-gitops-argocd-application-controller";
const ARGOCD_V1BETA1: &str = "argoproj.io/v1beta1";
const FIELD_MANAGER: &str = "gitops-operator";
/// The default `resource.exclusions` (`argocd.NewCR`: Tekton's runs).
const RESOURCE_EXCLUSIONS: &str =
    "- apiGroups:\n  - tekton.dev\n  clusters:\n  - '*'\n  kinds:\n  - TaskRun\n  - PipelineRun\n";
/// argocd-operator's `ArgoCDDefaultSSHKnownHosts` (common/defaults.go; see crds/README.md).
const DEFAULT_SSH_KNOWN_HOSTS: &str = include_str!("ssh_known_hosts");

/// Makes and keeps the default instance once the operator's CSV has Succeeded.
pub fn reconcile(store: &Store) -> Result<()> {
    if !super::csv::succeeded(store, PACKAGE)? || !store.is_established(ARGOCD_V1BETA1, "ArgoCD") {
        return Ok(());
    }
    objects::apply(store, namespace(), FIELD_MANAGER)?;
    objects::create_absent(store, default_argocd(), FIELD_MANAGER)?;
    let r = objects::reference(ARGOCD_V1BETA1, "ArgoCD", Some(NAMESPACE), INSTANCE);
    let Some(argocd) = objects::get(store, &r)? else {
        return Ok(());
    };
    instance_objects(store, &argocd)?;
    advance_status(store, &argocd)
}

fn namespace() -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE, "labels": {
        "openshift.io/cluster-monitoring": "true",
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "v1.29",
        "pod-security.kubernetes.io/audit": "restricted",
        "pod-security.kubernetes.io/audit-version": "latest",
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/warn-version": "latest",
    }}})
}

/// `argocd.NewCR("openshift-gitops", "openshift-gitops")` of gitops-operator 1.15.
fn default_argocd() -> Value {
    let res = |req_mem: &str, req_cpu: &str, lim_mem: &str, lim_cpu: &str| json!({"requests": {"memory": req_mem, "cpu": req_cpu}, "limits": {"memory": lim_mem, "cpu": lim_cpu}});
    let small = res("128Mi", "250m", "256Mi", "500m");
    json!({
        "apiVersion": ARGOCD_V1BETA1, "kind": "ArgoCD",
        "metadata": {"name": INSTANCE, "namespace": NAMESPACE},
        "spec": {
            "applicationSet": {"resources": res("512Mi", "250m", "1024Mi", "2000m")},
            "controller": {"resources": res("1024Mi", "250m", "2048Mi", "2000m")},
            "sso": {"provider": "dex", "dex": {"openShiftOAuth": true, "resources": small}},
            "grafana": {"enabled": false, "resources": small},
            "ha": {"enabled": false, "resources": small},
            "redis": {"resources": small},
            "repo": {"resources": res("256Mi", "250m", "1024Mi", "1000m")},
            "server": {"route": {"enabled": true}, "resources": res("128Mi", "125m", "256Mi", "500m")},
            "rbac": {
                "policy": "g, system:cluster-admins, role:admin\ng, cluster-admins, role:admin\n",
                "scopes": "[groups]",
                "defaultPolicy": "",
            },
            "resourceExclusions": RESOURCE_EXCLUSIONS,
        },
    })
}

fn instance_objects(store: &Store, argocd: &Value) -> Result<()> {
    objects::apply(
        store,
        config_map("argocd-cm", argocd_cm(argocd)),
        FIELD_MANAGER,
    )?;
    objects::apply(
        store,
        config_map("argocd-rbac-cm", rbac_cm(argocd)),
        FIELD_MANAGER,
    )?;
    objects::create_absent(
        store,
        config_map("argocd-tls-certs-cm", Map::new()),
        FIELD_MANAGER,
    )?;
    let known = Map::from_iter([(
        "ssh_known_hosts".to_string(),
        json!(DEFAULT_SSH_KNOWN_HOSTS),
    )]);
    objects::create_absent(
        store,
        config_map("argocd-ssh-known-hosts-cm", known),
        FIELD_MANAGER,
    )?;
    objects::apply(
        store,
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": CONTROLLER_SA, "namespace": NAMESPACE, "labels": labels(CONTROLLER_SA)}}),
        FIELD_MANAGER,
    )?;
    controller_rbac(store)?;
    objects::create_absent(store, default_project(), "argocd-server")?;
    Ok(())
}

fn labels(component: &str) -> Value {
    json!({"app.kubernetes.io/name": component, "app.kubernetes.io/part-of": "argocd", "app.kubernetes.io/managed-by": INSTANCE})
}

fn config_map(cm_name: &str, data: Map<String, Value>) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": cm_name, "namespace": NAMESPACE, "labels": labels(cm_name)}, "data": data})
}

/// `argocd-cm` as the argocd-operator computes it from the ArgoCD spec (the keys the lab's
/// Argo CD reads, and the health checks from `spec.resourceHealthChecks`).
fn argocd_cm(argocd: &Value) -> Map<String, Value> {
    let spec = &argocd["spec"];
    let text = |v: &Value, default: &str| json!(v.as_str().unwrap_or(default));
    let flag = |v: &Value| json!(v.as_bool().unwrap_or(false).to_string());
    let mut data = Map::new();
    data.insert(
        "admin.enabled".into(),
        json!((!spec["disableAdmin"].as_bool().unwrap_or(false)).to_string()),
    );
    data.insert(
        "application.instanceLabelKey".into(),
        text(
            &spec["applicationInstanceLabelKey"],
            "app.kubernetes.io/instance",
        ),
    );
    data.insert(
        "application.resourceTrackingMethod".into(),
        text(&spec["resourceTrackingMethod"], "label"),
    );
    data.insert(
        "kustomize.buildOptions".into(),
        text(&spec["kustomizeBuildOptions"], ""),
    );
    data.insert(
        "resource.exclusions".into(),
        text(&spec["resourceExclusions"], ""),
    );
    data.insert(
        "resource.inclusions".into(),
        text(&spec["resourceInclusions"], ""),
    );
    data.insert(
        "statusbadge.enabled".into(),
        flag(&spec["statusBadgeEnabled"]),
    );
    data.insert(
        "users.anonymous.enabled".into(),
        flag(&spec["usersAnonymousEnabled"]),
    );
    for check in spec["resourceHealthChecks"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let group = check["group"]
            .as_str()
            .filter(|g| !g.is_empty())
            .map(|g| format!("{g}_"))
            .unwrap_or_default();
        let key = format!(
            "resource.customizations.health.{group}{}",
            check["kind"].as_str().unwrap_or_default()
        );
        data.insert(key, text(&check["check"], ""));
    }
    data
}

fn rbac_cm(argocd: &Value) -> Map<String, Value> {
    let rbac = &argocd["spec"]["rbac"];
    let text = |v: &Value, default: &str| json!(v.as_str().unwrap_or(default));
    Map::from_iter([
        ("policy.csv".to_string(), text(&rbac["policy"], "")),
        (
            "policy.default".to_string(),
            text(&rbac["defaultPolicy"], "role:readonly"),
        ),
        ("scopes".to_string(), text(&rbac["scopes"], "[groups]")),
    ])
}

/// gitops-operator's `policyRulesForClusterConfig` (controllers/argocd/openshift/openshift.go).
pub fn cluster_config_rules() -> Value {
    let all = |group: &str| json!({"apiGroups": [group], "resources": ["*"], "verbs": ["*"]});
    json!([
        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]},
        {"nonResourceURLs": ["*"], "verbs": ["get", "list"]},
        all("operators.coreos.com"),
        all("operator.openshift.io"),
        all("user.openshift.io"),
        all("config.openshift.io"),
        all("console.openshift.io"),
        {"apiGroups": [""], "resources": ["namespaces", "persistentvolumeclaims", "persistentvolumes", "configmaps"], "verbs": ["*"]},
        all("rbac.authorization.k8s.io"),
        all("storage.k8s.io"),
        all("machine.openshift.io"),
        all("machineconfiguration.openshift.io"),
        {"apiGroups": ["compliance.openshift.io"], "resources": ["scansettingbindings"], "verbs": ["*"]},
    ])
}

/// gitops-operator's `getPolicyRuleForApplicationController`, the namespaced Role's base.
fn controller_role_rules() -> Vec<Value> {
    vec![
        json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]}),
        json!({"apiGroups": ["monitoring.coreos.com"], "resources": ["*"], "verbs": ["*"]}),
        json!({"apiGroups": ["argoproj.io"], "resources": ["applications", "applicationsets", "appprojects", "argocds"], "verbs": ["*"]}),
    ]
}

fn controller_rbac(store: &Store) -> Result<()> {
    let subject =
        json!([{"kind": "ServiceAccount", "name": CONTROLLER_SA, "namespace": NAMESPACE}]);
    let rbac = "rbac.authorization.k8s.io/v1";
    objects::apply(
        store,
        json!({"apiVersion": rbac, "kind": "ClusterRole",
        "metadata": {"name": CONTROLLER_CLUSTER_ROLE, "labels": labels(CONTROLLER_CLUSTER_ROLE)},
        "rules": cluster_config_rules()}),
        FIELD_MANAGER,
    )?;
    objects::apply(
        store,
        json!({"apiVersion": rbac, "kind": "ClusterRoleBinding",
        "metadata": {"name": CONTROLLER_CLUSTER_ROLE, "labels": labels(CONTROLLER_CLUSTER_ROLE)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": CONTROLLER_CLUSTER_ROLE},
        "subjects": subject}),
        FIELD_MANAGER,
    )?;
    let mut rules = controller_role_rules();
    let admin = objects::get(
        store,
        &objects::reference(rbac, "ClusterRole", None, "admin"),
    )?;
    rules.extend(
        admin
            .and_then(|a| a["rules"].as_array().cloned())
            .unwrap_or_default(),
    );
    objects::apply(
        store,
        json!({"apiVersion": rbac, "kind": "Role",
        "metadata": {"name": CONTROLLER_SA, "namespace": NAMESPACE, "labels": labels(CONTROLLER_SA)},
        "rules": rules}),
        FIELD_MANAGER,
    )?;
    objects::apply(
        store,
        json!({"apiVersion": rbac, "kind": "RoleBinding",
        "metadata": {"name": CONTROLLER_SA, "namespace": NAMESPACE, "labels": labels(CONTROLLER_SA)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": CONTROLLER_SA},
        "subjects": subject}),
        FIELD_MANAGER,
    )?;
    Ok(())
}

/// The project Argo CD's server makes at start when there is none.
fn default_project() -> Value {
    json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
        "metadata": {"name": "default", "namespace": NAMESPACE},
        "spec": {"sourceRepos": ["*"], "destinations": [{"namespace": "*", "server": "*"}],
                 "clusterResourceWhitelist": [{"group": "*", "kind": "*"}]}})
}

/// `Pending` with every component `Pending` first; `Available` with every component
/// `Running` on the next pass (reconcileStatusPhase).
fn advance_status(store: &Store, argocd: &Value) -> Result<()> {
    let (phase, component) = match argocd["status"]["phase"].as_str() {
        None => ("Pending", "Pending"),
        Some("Pending") => ("Available", "Running"),
        Some(_) => return Ok(()),
    };
    let status = json!({
        "phase": phase,
        "applicationController": component, "applicationSetController": component,
        "redis": component, "repo": component, "server": component, "sso": component,
    });
    objects::write_status(store, argocd, status, FIELD_MANAGER)?;
    tracing::info!("ArgoCD {NAMESPACE}/{}: {phase}", name(argocd));
    Ok(())
}
