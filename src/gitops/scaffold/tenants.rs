//! `tenants/`: the standard tenant (`base/`: Namespace, RoleBindings for the directory groups,
//! deny-by-default NetworkPolicies with same-namespace and DNS allowed, a ResourceQuota with
//! its GPU cap, a LimitRange, the KAI queue) and one overlay per tenant that names the
//! namespace and sets the groups and the numbers with JSON patches.
//!
//! The tenant's KAI queue lives in its overlay, not in `cluster/kai-queues`: one tenant is one
//! folder and one pull request, and the queue's GPU quota and the ResourceQuota's GPU cap come
//! from the same number, so they cannot drift apart.

use super::cluster::{queue, PARENT_QUEUE};
use super::{object, Files};
use crate::inventory::model::{Gitops, Tenant};
use anyhow::Result;
use serde_json::{json, Value};

/// The placeholder name of the base's namespace and queue (each overlay renames them).
const BASE_NAME: &str = "tenant";
/// The GPU resource of the quota (the device plugin's).
pub const GPU_QUOTA: &str = "requests.nvidia.com/gpu";
/// The roles a tenant's groups get in its namespace: (field in the inventory, ClusterRole).
const ROLES: [&str; 3] = ["admin", "edit", "view"];

/// Writes `tenants/base/`, one overlay per tenant, and `tenants/kustomization.yaml`.
pub(super) fn write(files: &mut Files, g: &Gitops) -> Result<()> {
    base(files)?;
    for t in &g.tenants {
        files.yaml(
            format!("tenants/{}/kustomization.yaml", t.name),
            &[overlay(t)?],
        )?;
    }
    let overlays: Vec<String> = g.tenants.iter().map(|t| t.name.clone()).collect();
    files.kustomization("tenants", &overlays)
}

fn base(files: &mut Files) -> Result<()> {
    let ns = object("v1", "Namespace", BASE_NAME, None, json!({}));
    files.yaml("tenants/base/namespace.yaml", &[ns])?;
    let bindings: Vec<Value> = ROLES
        .iter()
        .map(|role| {
            object("rbac.authorization.k8s.io/v1", "RoleBinding", &format!("tenant-{role}"), None, json!({
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [],
            }))
        })
        .collect();
    files.yaml("tenants/base/rolebindings.yaml", &bindings)?;
    files.yaml("tenants/base/networkpolicies.yaml", &network_policies())?;
    let quota = object(
        "v1",
        "ResourceQuota",
        "tenant-quota",
        None,
        json!({
            "spec": {"hard": {GPU_QUOTA: "0"}},
        }),
    );
    files.yaml("tenants/base/resourcequota.yaml", &[quota])?;
    files.yaml("tenants/base/limitrange.yaml", &[limit_range()])?;
    files.yaml(
        "tenants/base/queue.yaml",
        &[queue(BASE_NAME, Some(PARENT_QUEUE), 0, 0)],
    )?;
    let resources = [
        "namespace",
        "rolebindings",
        "networkpolicies",
        "resourcequota",
        "limitrange",
        "queue",
    ];
    let resources: Vec<String> = resources.iter().map(|r| format!("{r}.yaml")).collect();
    files.kustomization("tenants/base", &resources)
}

/// Deny every ingress and egress by default; allow the namespace's pods to reach each other,
/// and DNS (the cluster's resolvers in openshift-dns, on 53 and the pods' 5353).
fn network_policies() -> Vec<Value> {
    let np = |name: &str, spec: Value| {
        object(
            "networking.k8s.io/v1",
            "NetworkPolicy",
            name,
            None,
            json!({"spec": spec}),
        )
    };
    let dns_ports: Vec<Value> = [("UDP", 53), ("TCP", 53), ("UDP", 5353), ("TCP", 5353)]
        .into_iter()
        .map(|(protocol, port)| json!({"protocol": protocol, "port": port}))
        .collect();
    vec![
        np(
            "default-deny",
            json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}),
        ),
        np(
            "allow-same-namespace",
            json!({
                "podSelector": {},
                "policyTypes": ["Ingress", "Egress"],
                "ingress": [{"from": [{"podSelector": {}}]}],
                "egress": [{"to": [{"podSelector": {}}]}],
            }),
        ),
        np(
            "allow-dns",
            json!({
                "podSelector": {},
                "policyTypes": ["Egress"],
                "egress": [{
                    "to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "openshift-dns"}}}],
                    "ports": dns_ports,
                }],
            }),
        ),
    ]
}

/// Defaults for containers that state no requests or limits (the quota counts requests, so
/// every pod needs them); GPUs are never defaulted: a pod asks for them.
fn limit_range() -> Value {
    object(
        "v1",
        "LimitRange",
        "tenant-limits",
        None,
        json!({
            "spec": {"limits": [{
                "type": "Container",
                "defaultRequest": {"cpu": "100m", "memory": "256Mi"},
                "default": {"cpu": "1", "memory": "1Gi"},
            }]},
        }),
    )
}

/// A JSON 6902 operation.
fn op(op: &str, path: &str, value: Value) -> Value {
    json!({"op": op, "path": path, "value": value})
}

/// `tenants/<name>/kustomization.yaml`: the base in the tenant's namespace, its groups, its
/// quota, its queue.
fn overlay(t: &Tenant) -> Result<Value> {
    let mut patches = vec![patch(
        json!({"kind": "ResourceQuota", "name": "tenant-quota"}),
        &quota_ops(t),
    )?];
    for (role, groups) in ROLES
        .iter()
        .zip([&t.groups.admin, &t.groups.edit, &t.groups.view])
    {
        let target = json!({"kind": "RoleBinding", "name": format!("tenant-{role}")});
        let ops = if groups.is_empty() {
            vec![json!({"op": "remove", "path": "/subjects"})]
        } else {
            let subjects: Vec<Value> = groups
                .iter()
                .map(|g| json!({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": g}))
                .collect();
            vec![op("replace", "/subjects", json!(subjects))]
        };
        patches.push(patch(target, &ops)?);
    }
    let queue_ops = [
        op("replace", "/metadata/name", json!(t.name)),
        op("replace", "/spec/resources/gpu/quota", json!(t.gpus)),
        op("replace", "/spec/resources/gpu/limit", json!(t.gpus)),
    ];
    patches.push(patch(
        json!({"group": "scheduling.run.ai", "kind": "Queue", "name": BASE_NAME}),
        &queue_ops,
    )?);
    Ok(json!({
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "namespace": t.name,
        "resources": ["../base"],
        "patches": patches,
        // Queues are cluster-scoped, which kustomize cannot know of a custom kind: the
        // namespace it gave the queue is taken off again, after it (transformers run last).
        "transformers": [queue_scope()?],
    }))
}

/// The ResourceQuota's numbers: the GPU cap, and CPU and memory when the tenant sets them.
fn quota_ops(t: &Tenant) -> Vec<Value> {
    let mut ops = vec![op(
        "replace",
        "/spec/hard/requests.nvidia.com~1gpu",
        json!(t.gpus.to_string()),
    )];
    for (key, value) in [("requests.cpu", &t.cpu), ("requests.memory", &t.memory)] {
        if let Some(v) = value {
            ops.push(op("add", &format!("/spec/hard/{key}"), json!(v)));
        }
    }
    ops
}

/// A kustomize patch: `ops` on `target`, written as YAML.
fn patch(target: Value, ops: &[Value]) -> Result<Value> {
    let text = crate::yaml::to_string(&ops)?;
    Ok(json!({"target": target, "patch": text}))
}

/// The PatchTransformer that takes the namespace off the tenant's Queue.
fn queue_scope() -> Result<String> {
    let transformer = json!({
        "apiVersion": "builtin",
        "kind": "PatchTransformer",
        "metadata": {"name": "queues-are-cluster-scoped"},
        "target": {"group": "scheduling.run.ai", "kind": "Queue"},
        "patch": "[{\"op\": \"remove\", \"path\": \"/metadata/namespace\"}]",
    });
    Ok(crate::yaml::to_string(&transformer)?)
}
