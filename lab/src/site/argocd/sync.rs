//! Comparing and syncing as gitops-engine does: desired objects carry the tracking annotation
//! (`APP:GROUP/KIND:NAMESPACE/NAME`, Argo 3.x's default), are ordered by sync wave, then Argo's
//! kind order, then name, and applied one wave at a time; a wave must be Healthy before the
//! next is applied (resources without a health rule count as healthy). A sync step is
//! re-entrant: each controller pass continues the operation where the cluster stands.

use super::health::{self, Health, Status};
use super::{CONTROLLER_USER, FIELD_MANAGER, TRACKING_ANNOTATION};
use crate::site::kube::{ObjectRef, Store, WriteOptions};
use serde_json::{json, Value};

/// gitops-engine's kind order (sync_tasks.go, after Helm's); other kinds come after these.
const KIND_ORDER: &[&str] = &[
    "Namespace",
    "NetworkPolicy",
    "ResourceQuota",
    "LimitRange",
    "PodSecurityPolicy",
    "PodDisruptionBudget",
    "ServiceAccount",
    "Secret",
    "SecretList",
    "ConfigMap",
    "StorageClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleList",
    "ClusterRoleBinding",
    "ClusterRoleBindingList",
    "Role",
    "RoleList",
    "RoleBinding",
    "RoleBindingList",
    "Service",
    "DaemonSet",
    "Pod",
    "ReplicationController",
    "ReplicaSet",
    "Deployment",
    "HorizontalPodAutoscaler",
    "StatefulSet",
    "Job",
    "CronJob",
    "IngressClass",
    "Ingress",
    "APIService",
];

fn kind_rank(kind: &str) -> i64 {
    KIND_ORDER
        .iter()
        .position(|k| *k == kind)
        .map_or(0, |i| i as i64 - KIND_ORDER.len() as i64)
}

/// One desired object and what the cluster holds for it.
#[derive(Clone, Debug)]
pub struct Item {
    /// The object to apply (namespace defaulted, tracking annotation set).
    pub obj: Value,
    /// Its coordinates.
    pub r: ObjectRef,
    /// Its API group ("" for core).
    pub group: String,
    /// Its sync wave.
    pub wave: i64,
    /// The live object.
    pub live: Option<Value>,
    /// Live matches desired.
    pub synced: bool,
    /// Health, where Argo has a rule.
    pub health: Option<Health>,
}

impl Item {
    /// `group/Kind/name`, as Argo names a resource in messages.
    pub fn label(&self) -> String {
        format!("{}/{}/{}", self.group, self.r.kind, self.r.name)
    }

    /// The entry of `status.resources`.
    pub fn resource_status(&self) -> Value {
        let mut v = ref_json(&self.r);
        v["status"] = json!(if self.synced { "Synced" } else { "OutOfSync" });
        if let Some(h) = &self.health {
            v["health"] = h.to_json();
        }
        if self.wave != 0 {
            v["syncWave"] = json!(self.wave);
        }
        v
    }
}

/// `group`, `version`, `kind`, `namespace`, `name` of a reference.
pub fn ref_json(r: &ObjectRef) -> Value {
    let (group, version) = split(&r.api_version);
    let mut v = json!({"group": group, "version": version, "kind": r.kind, "name": r.name});
    if let Some(ns) = &r.namespace {
        v["namespace"] = json!(ns);
    }
    v
}

fn split(api_version: &str) -> (&str, &str) {
    api_version.split_once('/').unwrap_or(("", api_version))
}

/// Argo 3.x's tracking id.
pub fn tracking_id(app: &str, r: &ObjectRef) -> String {
    let (group, _) = split(&r.api_version);
    format!(
        "{app}:{group}/{}:{}/{}",
        r.kind,
        r.namespace.as_deref().unwrap_or(""),
        r.name
    )
}

/// The rendered objects as sync tasks in Argo's order: namespace defaulted to the
/// destination's for namespaced kinds, tracking annotation set.
pub fn prepare(
    store: &Store,
    app: &str,
    dest_ns: &str,
    objects: Vec<Value>,
) -> Result<Vec<Item>, String> {
    let crds: Vec<Value> = objects
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .cloned()
        .collect();
    let mut items = Vec::new();
    for mut obj in objects {
        let api_version = obj["apiVersion"].as_str().unwrap_or_default().to_string();
        let kind = obj["kind"].as_str().unwrap_or_default().to_string();
        if obj["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .is_empty()
        {
            return Err(format!(
                "{api_version}/{kind}: resource name may not be empty"
            ));
        }
        let namespaced = namespaced(store, &crds, &api_version, &kind);
        if namespaced
            && obj["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .is_empty()
            && !dest_ns.is_empty()
        {
            obj["metadata"]["namespace"] = json!(dest_ns);
        }
        if !namespaced {
            if let Some(m) = obj["metadata"].as_object_mut() {
                m.remove("namespace");
            }
        }
        let r = ObjectRef::of(&obj);
        obj["metadata"]["annotations"][TRACKING_ANNOTATION] = json!(tracking_id(app, &r));
        let wave = obj["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"]
            .as_str()
            .map_or(Ok(0), |w| w.trim().parse::<i64>())
            .map_err(|_| {
                format!(
                    "{kind}/{}: annotation argocd.argoproj.io/sync-wave is not an integer",
                    r.name
                )
            })?;
        let group = split(&api_version).0.to_string();
        items.push(Item {
            obj,
            r,
            group,
            wave,
            live: None,
            synced: false,
            health: None,
        });
    }
    items.sort_by(|a, b| {
        (a.wave, kind_rank(&a.r.kind), &a.r.name).cmp(&(b.wave, kind_rank(&b.r.kind), &b.r.name))
    });
    Ok(items)
}

fn namespaced(store: &Store, crds: &[Value], api_version: &str, kind: &str) -> bool {
    if let Some(k) = store.kind_info(api_version, kind) {
        return k.namespaced;
    }
    let group = split(api_version).0;
    crds.iter()
        .find(|c| c["spec"]["group"] == group && c["spec"]["names"]["kind"] == kind)
        .is_none_or(|c| c["spec"]["scope"] != "Cluster")
}

/// Reads each item's live object, whether it matches, and its health.
pub fn observe(store: &Store, items: &mut [Item], app_check: bool) {
    for it in items.iter_mut() {
        it.live = store.get(&it.r).ok();
        it.synced = it.live.as_ref().is_some_and(|l| contains(l, &it.obj, true));
        it.health = health::assess(&it.group, &it.r.kind, it.live.as_ref(), app_check);
    }
}

/// Whether every field of `want` is in `live` with the same value (status and the server's
/// metadata aside): Argo's diff, for objects applied with server-side apply.
fn contains(live: &Value, want: &Value, top: bool) -> bool {
    match (live, want) {
        (Value::Object(l), Value::Object(w)) => w.iter().all(|(k, wv)| {
            if top && k == "status" {
                return true;
            }
            l.get(k).is_some_and(|lv| contains(lv, wv, false))
                || (wv.is_null() && !l.contains_key(k))
        }),
        (Value::Array(l), Value::Array(w)) => {
            l.len() == w.len() && l.iter().zip(w).all(|(a, b)| contains(a, b, false))
        }
        (Value::Number(l), Value::Number(w)) => l.as_f64() == w.as_f64(),
        _ => live == want,
    }
}

/// Live objects this app tracked before (its last `status.resources`) that it no longer wants.
pub fn extraneous(store: &Store, app: &str, previous: &Value, items: &[Item]) -> Vec<ObjectRef> {
    let mut out = Vec::new();
    for res in previous.as_array().into_iter().flatten() {
        let s = |k: &str| res[k].as_str().unwrap_or_default().to_string();
        let group = s("group");
        let r = ObjectRef {
            api_version: if group.is_empty() {
                s("version")
            } else {
                format!("{group}/{}", s("version"))
            },
            kind: s("kind"),
            namespace: res["namespace"].as_str().map(String::from),
            name: s("name"),
        };
        if items.iter().any(|i| i.r == r) {
            continue;
        }
        let tracked = store.get(&r).ok().is_some_and(|l| {
            l["metadata"]["annotations"][TRACKING_ANNOTATION].as_str()
                == Some(tracking_id(app, &r).as_str())
        });
        if tracked {
            out.push(r);
        }
    }
    out
}

/// How a sync step ended.
#[derive(Clone, Debug)]
pub struct Step {
    /// Running (waiting on a wave's health), Succeeded or Failed.
    pub phase: &'static str,
    /// Argo's message.
    pub message: String,
    /// `syncResult.resources`.
    pub results: Vec<Value>,
}

/// What a sync is allowed to do.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Delete what is no longer wanted.
    pub prune: bool,
    /// `CreateNamespace=true`: the destination namespace.
    pub create_namespace: Option<String>,
    /// `SkipDryRunOnMissingResource=true`.
    pub skip_dry_run_on_missing: bool,
}

fn write_options() -> WriteOptions {
    WriteOptions {
        field_manager: FIELD_MANAGER.into(),
        force: true,
        user: CONTROLLER_USER.into(),
        ..WriteOptions::default()
    }
}

/// A `syncResult.resources` entry: unlike `status.resources`, Argo CD's ResourceResult always
/// carries `namespace` (the CRD requires it), empty for a cluster-scoped object.
fn result(r: &ObjectRef, ok: bool, message: String) -> Value {
    let mut v = ref_json(r);
    v["namespace"] = json!(r.namespace.clone().unwrap_or_default());
    v["status"] = json!(if ok { "Synced" } else { "SyncFailed" });
    v["message"] = json!(message);
    v["hookPhase"] = json!(if ok { "Running" } else { "Failed" });
    v["syncPhase"] = json!("Sync");
    v
}

/// The dry run before the first wave: a kind the cluster does not serve, and that no CRD of
/// this sync defines, fails the operation unless SkipDryRunOnMissingResource=true.
pub fn dry_run(store: &Store, items: &[Item], o: &Options) -> Option<Step> {
    let defined = |it: &Item| {
        items.iter().any(|c| {
            c.r.kind == "CustomResourceDefinition"
                && c.obj["spec"]["group"] == it.group.as_str()
                && c.obj["spec"]["names"]["kind"] == it.r.kind.as_str()
        })
    };
    let missing: Vec<Value> = items
        .iter()
        .filter(|it| !store.is_established(&it.r.api_version, &it.r.kind) && !defined(it) && !o.skip_dry_run_on_missing)
        .map(|it| {
            let msg = format!(
                "The Kubernetes API could not find {}/{} for requested resource {}/{}. Make sure the \"{}\" CRD is installed on the destination cluster.",
                it.group, it.r.kind, it.r.namespace.as_deref().unwrap_or(""), it.r.name, it.r.kind
            );
            result(&it.r, false, msg)
        })
        .collect();
    (!missing.is_empty()).then(|| Step {
        phase: "Failed",
        message: "one or more synchronization tasks are not valid".into(),
        results: missing,
    })
}

/// One pass of a sync operation: creates the namespace, applies the first wave not yet
/// synced and Healthy, and goes on while waves come out Healthy; prunes at the end.
pub fn step(
    store: &Store,
    items: &mut [Item],
    extraneous: &[ObjectRef],
    o: &Options,
    app_check: bool,
) -> Step {
    let mut results = Vec::new();
    if let Some(ns) = &o.create_namespace {
        if let Err(e) = create_namespace(store, ns) {
            return failed(results, e);
        }
    }
    let waves: Vec<i64> = {
        let mut w: Vec<i64> = items.iter().map(|i| i.wave).collect();
        w.dedup();
        w
    };
    for (n, wave) in waves.iter().enumerate() {
        for it in items.iter_mut().filter(|i| i.wave == *wave && !i.synced) {
            match store.apply(it.obj.clone(), &write_options()) {
                Ok(_) => results.push(result(
                    &it.r,
                    true,
                    format!(
                        "{}/{} serverside-applied",
                        it.r.kind.to_lowercase(),
                        it.r.name
                    ),
                )),
                Err(e) => {
                    results.push(result(&it.r, false, e.message.clone()));
                    return failed(results, e.message);
                }
            }
        }
        observe(store, items, app_check);
        let last = n + 1 == waves.len();
        let waiting: Vec<String> = items
            .iter()
            .filter(|i| {
                i.wave == *wave
                    && i.health
                        .as_ref()
                        .is_some_and(|h| h.status != Status::Healthy)
            })
            .map(Item::label)
            .collect();
        if !last && !waiting.is_empty() {
            return Step {
                phase: "Running",
                message: waiting_message(&waiting),
                results,
            };
        }
    }
    prune(store, extraneous, o, &mut results);
    Step {
        phase: "Succeeded",
        message: "successfully synced (all tasks run)".into(),
        results,
    }
}

fn waiting_message(waiting: &[String]) -> String {
    match waiting {
        [one] => format!("waiting for healthy state of {one}"),
        [first, rest @ ..] => format!(
            "waiting for healthy state of {first} and {} more resources",
            rest.len()
        ),
        [] => String::new(),
    }
}

fn failed(results: Vec<Value>, reason: String) -> Step {
    Step {
        phase: "Failed",
        message: format!("one or more objects failed to apply, reason: {reason}"),
        results,
    }
}

fn create_namespace(store: &Store, ns: &str) -> Result<(), String> {
    let r = ObjectRef {
        api_version: "v1".into(),
        kind: "Namespace".into(),
        namespace: None,
        name: ns.into(),
    };
    if store.get(&r).is_ok() {
        return Ok(());
    }
    let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
    store
        .apply(obj, &write_options())
        .map(|_| ())
        .map_err(|e| e.message)
}

fn prune(store: &Store, extraneous: &[ObjectRef], o: &Options, results: &mut Vec<Value>) {
    let mut refs: Vec<&ObjectRef> = extraneous.iter().collect();
    refs.sort_by_key(|r| std::cmp::Reverse(kind_rank(&r.kind)));
    for r in refs {
        let mut v = ref_json(r);
        v["namespace"] = json!(r.namespace.clone().unwrap_or_default());
        v["syncPhase"] = json!("Sync");
        if !o.prune {
            v["status"] = json!("PruneSkipped");
            v["message"] = json!("ignored (requires pruning)");
        } else {
            match store.delete(r, &write_options()) {
                Ok(_) => {
                    v["status"] = json!("Pruned");
                    v["message"] = json!("pruned");
                }
                Err(e) => {
                    v["status"] = json!("SyncFailed");
                    v["message"] = json!(e.message);
                }
            }
        }
        results.push(v);
    }
}

/// Deletes what an Application being deleted tracks (the resources finalizer's cascade);
/// true once none of it is left.
pub fn cascade(store: &Store, app: &str, resources: &Value) -> bool {
    let tracked = extraneous(store, app, resources, &[]);
    for r in &tracked {
        let _ = store.delete(r, &write_options());
    }
    extraneous(store, app, resources, &[]).is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_order_as_gitops_engine() {
        assert!(kind_rank("Namespace") < kind_rank("ResourceQuota"));
        assert!(kind_rank("ConfigMap") < kind_rank("CustomResourceDefinition"));
        assert!(kind_rank("APIService") < kind_rank("Application"));
        assert_eq!(kind_rank("Application"), 0);
    }

    #[test]
    fn tracking_ids_are_argo_3s() {
        let r = ObjectRef {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some("t".into()),
            name: "c".into(),
        };
        assert_eq!(tracking_id("app", &r), "app:/ConfigMap:t/c");
        let r = ObjectRef {
            api_version: "argoproj.io/v1alpha1".into(),
            kind: "Application".into(),
            namespace: Some("openshift-gitops".into()),
            name: "x".into(),
        };
        assert_eq!(
            tracking_id("root", &r),
            "root:argoproj.io/Application:openshift-gitops/x"
        );
    }

    #[test]
    fn desired_fields_are_compared_not_the_servers() {
        let live =
            json!({"metadata": {"name": "a", "uid": "u"}, "data": {"k": "v"}, "status": {"x": 1}});
        assert!(contains(
            &live,
            &json!({"metadata": {"name": "a"}, "data": {"k": "v"}}),
            true
        ));
        assert!(!contains(
            &live,
            &json!({"metadata": {"name": "a"}, "data": {"k": "w"}}),
            true
        ));
        assert!(contains(&live, &json!({"status": {"x": 2}}), true));
    }
}
