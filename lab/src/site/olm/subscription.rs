//! Subscriptions and OperatorGroups, as OLM's catalog operator treats them: the catalog health
//! of every Subscription (`catalogHealth` and the `CatalogSourcesUnhealthy` condition, with
//! OLM's reasons and messages), resolution of the channel head into an InstallPlan (or the
//! `ResolutionFailed` condition in the resolver's words), and, once the InstallPlan made the
//! CSV, `installedCSV` and `state: AtLatestKnown`.

use super::catalogs::{self, MARKETPLACE};
use super::installplan;
use super::objects::{self, name, namespace, set_condition, OLM_V1, OLM_V1ALPHA1};
use super::OlmConfig;
use crate::site::kube::Store;
use anyhow::Result;
use serde_json::{json, Value};

const FIELD_MANAGER: &str = "catalog-operator";

/// Reconciles every Subscription; one that fails is logged and the others go on.
pub fn reconcile(store: &Store, cfg: &OlmConfig) -> Result<()> {
    for sub in store.list(OLM_V1ALPHA1, "Subscription", None, None)? {
        if let Err(e) = reconcile_one(store, cfg, &sub) {
            tracing::warn!("{}: {e:#}", objects::describe(&sub));
        }
    }
    Ok(())
}

fn reconcile_one(store: &Store, cfg: &OlmConfig, sub: &Value) -> Result<()> {
    let mut status = match &sub["status"] {
        s @ Value::Object(_) => s.clone(),
        _ => json!({}),
    };
    catalog_health(store, sub, &mut status)?;
    let groups = store.list(OLM_V1, "OperatorGroup", Some(namespace(sub)), None)?;
    if groups.len() != 1 {
        // OLM's step resolver refuses the namespace with these words (the namespace sync
        // logs them before it gets there; the lab surfaces them where an engineer looks).
        let message = format!(
            "expected 1 OperatorGroup in the namespace, found {}",
            groups.len()
        );
        let cond = ("True", "ErrorPreventedResolution", message.as_str());
        set_condition(&mut status, "ResolutionFailed", Some(cond));
    } else if status["installPlanRef"].is_null() {
        resolve(store, cfg, sub, &mut status)?;
    } else {
        track(store, sub, &mut status)?;
    }
    status["lastUpdated"] = json!(objects::now());
    objects::write_status(store, sub, status, FIELD_MANAGER)?;
    Ok(())
}

/// `catalogHealth` (the catalogs of the Subscription's namespace and the global ones, sorted)
/// and the `CatalogSourcesUnhealthy` condition, by OLM's rules (subscription/state.go).
fn catalog_health(store: &Store, sub: &Value, status: &mut Value) -> Result<()> {
    let ns = namespace(sub);
    let mut sources = store.list(OLM_V1ALPHA1, "CatalogSource", Some(ns), None)?;
    if ns != MARKETPLACE {
        sources.extend(store.list(OLM_V1ALPHA1, "CatalogSource", Some(MARKETPLACE), None)?);
    }
    sources.sort_by_key(|s| format!("{}{}", namespace(s), name(s)));
    let now = objects::now();
    let health: Vec<Value> = sources
        .iter()
        .map(|s| {
            json!({"catalogSourceRef": catalog_ref(s), "healthy": catalogs::healthy(s), "lastUpdated": now})
        })
        .collect();
    let (state, mut reason, mut message) = health_condition(sub, status, &sources);
    let old = status["catalogHealth"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if health.len() > old.len() {
        reason = "CatalogSourcesAdded";
    } else if health.len() < old.len() {
        reason = "CatalogSourcesDeleted";
    } else if health.is_empty() {
        reason = "NoCatalogSourcesFound";
        message = "dependency resolution requires at least one catalogsource".into();
    } else if !same_health(&old, &health) {
        reason = "CatalogSourcesUpdated";
    }
    set_condition(
        status,
        "CatalogSourcesUnhealthy",
        Some((state, reason, &message)),
    );
    if let Some(m) = status.as_object_mut() {
        match health.is_empty() {
            true => m.remove("catalogHealth"),
            false => m.insert("catalogHealth".into(), json!(health)),
        };
    }
    Ok(())
}

/// The condition's status, reason and message from the health of the targeted source and
/// the others (a message OLM does not set stays as it was).
fn health_condition(
    sub: &Value,
    status: &Value,
    sources: &[Value],
) -> (&'static str, &'static str, String) {
    let (target_ns, target) = (
        source_namespace(sub),
        sub["spec"]["source"].as_str().unwrap_or_default(),
    );
    let targeted = sources
        .iter()
        .find(|s| namespace(s) == target_ns && name(s) == target);
    let old_message = objects::condition(&status["conditions"], "CatalogSourcesUnhealthy")
        .and_then(|c| c["message"].as_str())
        .unwrap_or_default()
        .to_string();
    match targeted {
        None => (
            "True",
            "UnhealthyCatalogSourceFound",
            format!("targeted catalogsource {target_ns}/{target} missing"),
        ),
        Some(t) if !catalogs::healthy(t) => (
            "True",
            "UnhealthyCatalogSourceFound",
            format!("targeted catalogsource {target_ns}/{target} unhealthy"),
        ),
        Some(_) if !sources.iter().all(catalogs::healthy) => {
            ("True", "UnhealthyCatalogSourceFound", old_message)
        }
        Some(_) => (
            "False",
            "AllCatalogSourcesHealthy",
            "all available catalogsources are healthy".into(),
        ),
    }
}

fn same_health(old: &[Value], new: &[Value]) -> bool {
    old.iter().zip(new).all(|(o, n)| {
        o["catalogSourceRef"] == n["catalogSourceRef"] && o["healthy"] == n["healthy"]
    })
}

fn catalog_ref(source: &Value) -> Value {
    json!({
        "apiVersion": OLM_V1ALPHA1, "kind": "CatalogSource",
        "name": name(source), "namespace": namespace(source),
        "resourceVersion": source["metadata"]["resourceVersion"],
        "uid": source["metadata"]["uid"],
    })
}

fn source_namespace(sub: &Value) -> &str {
    sub["spec"]["sourceNamespace"].as_str().unwrap_or_default()
}

/// Resolves the channel head and creates its InstallPlan, or says why not as OLM does.
fn resolve(store: &Store, cfg: &OlmConfig, sub: &Value, status: &mut Value) -> Result<()> {
    let sub_name = name(sub);
    let (source, source_ns) = (
        sub["spec"]["source"].as_str().unwrap_or_default(),
        source_namespace(sub),
    );
    let unsatisfiable =
        |why: String| format!("constraints not satisfiable: subscription {sub_name} exists, {why}");
    let cs = objects::get(
        store,
        &objects::reference(OLM_V1ALPHA1, "CatalogSource", Some(source_ns), source),
    )?;
    let Some(cs) = cs else {
        let why = format!("no operators found from catalog {source} in namespace {source_ns} referenced by subscription {sub_name}");
        return failed(status, "ConstraintsNotSatisfiable", &unsatisfiable(why));
    };
    let Some(catalog) = catalogs::content(&cfg.catalogs, &cfg.unreachable_registries, &cs) else {
        let why = format!("error using catalogsource {source_ns}/{source}: failed to list bundles: rpc error: code = Unavailable desc = connection error");
        return failed(status, "ErrorPreventedResolution", &why);
    };
    let package = sub["spec"]["name"].as_str().unwrap_or_default();
    let channel = sub["spec"]["channel"].as_str();
    let bundle = match catalogs::channel_head_bundle(catalog, package, channel, sub_name) {
        Ok(b) => b,
        Err(why) => return failed(status, "ConstraintsNotSatisfiable", &unsatisfiable(why)),
    };
    let plan = installplan::create(store, sub, bundle, &cs)?;
    set_condition(status, "ResolutionFailed", None);
    status["currentCSV"] = json!(bundle.name);
    status["installPlanGeneration"] = json!(1);
    status["installPlanRef"] = json!({
        "apiVersion": OLM_V1ALPHA1, "kind": "InstallPlan",
        "name": name(&plan), "namespace": namespace(&plan),
        "resourceVersion": plan["metadata"]["resourceVersion"], "uid": plan["metadata"]["uid"],
    });
    status["installplan"] = json!({
        "apiVersion": OLM_V1ALPHA1, "kind": "InstallPlan",
        "name": name(&plan), "uuid": plan["metadata"]["uid"],
    });
    status["state"] = json!("UpgradePending");
    Ok(())
}

fn failed(status: &mut Value, reason: &str, message: &str) -> Result<()> {
    set_condition(status, "ResolutionFailed", Some(("True", reason, message)));
    Ok(())
}

/// Follows the referenced InstallPlan and the CSV it makes (ensureSubscriptionCSVState: the
/// CSV existing is enough for `installedCSV` and `AtLatestKnown`).
fn track(store: &Store, sub: &Value, status: &mut Value) -> Result<()> {
    let ns = namespace(sub);
    let plan_name = status["installPlanRef"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let plan = objects::get(
        store,
        &objects::reference(OLM_V1ALPHA1, "InstallPlan", Some(ns), &plan_name),
    )?;
    match &plan {
        None => {
            let message = format!("installplan {ns}/{plan_name} not found");
            set_condition(
                status,
                "InstallPlanMissing",
                Some(("True", "ReferencedInstallPlanNotFound", &message)),
            );
        }
        Some(p) => {
            set_condition(status, "InstallPlanMissing", None);
            let phase = p["status"]["phase"].as_str().unwrap_or_default();
            let message = p["status"]["message"].as_str().unwrap_or_default();
            match phase {
                "Complete" => set_condition(status, "InstallPlanPending", None),
                "Failed" => set_condition(
                    status,
                    "InstallPlanFailed",
                    Some(("True", "InstallPlanFailed", message)),
                ),
                "" => set_condition(
                    status,
                    "InstallPlanPending",
                    Some(("True", "InstallPlanNotYetReconciled", message)),
                ),
                _ => set_condition(status, "InstallPlanPending", Some(("True", phase, message))),
            }
        }
    }
    let current = status["currentCSV"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let csv = objects::get(
        store,
        &objects::reference(OLM_V1ALPHA1, "ClusterServiceVersion", Some(ns), &current),
    )?;
    if csv.is_some() {
        status["installedCSV"] = json!(current);
        status["state"] = json!("AtLatestKnown");
    } else {
        status["state"] = json!("UpgradePending");
    }
    Ok(())
}

/// Every OperatorGroup's `status.namespaces`: its target namespaces, or `[""]` (all).
pub fn reconcile_groups(store: &Store) -> Result<()> {
    for og in store.list(OLM_V1, "OperatorGroup", None, None)? {
        let targets = match og["spec"]["targetNamespaces"].as_array() {
            Some(t) if !t.is_empty() => json!(t),
            _ => json!([""]),
        };
        let status = json!({"namespaces": targets, "lastUpdated": objects::now()});
        objects::write_status(store, &og, status, "olm-operator")?;
    }
    Ok(())
}
