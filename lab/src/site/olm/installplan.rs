//! InstallPlans: made for a resolved Subscription (one step per owned CRD, then the CSV, whose
//! manifest the step carries), approved at once when the Subscription's approval is
//! `Automatic` (or when someone sets `spec.approved`), then executed: the CRDs created (the lab
//! store establishes them), the CSV created with its OperatorGroup's annotations, and the plan
//! `Complete` with its `Installed` condition.

use super::crds;
use super::objects::{self, name, namespace, OLM_V1, OLM_V1ALPHA1};
use crate::site::kube::Store;
use anyhow::{bail, Context, Result};
use bootstrap::openshift::fbc::Bundle;
use serde_json::{json, Value};

const FIELD_MANAGER: &str = "catalog-operator";

/// The label OLM puts on what an operator owns: `operators.coreos.com/<package>.<namespace>`.
pub fn package_label(package: &str, namespace: &str) -> String {
    format!("operators.coreos.com/{package}.{namespace}")
}

/// Creates (or finds, on a rerun) the InstallPlan installing `bundle` for `sub` from catalog
/// source `cs`, with its status planned; returns it.
pub fn create(store: &Store, sub: &Value, bundle: &Bundle, cs: &Value) -> Result<Value> {
    let ns = namespace(sub);
    let seed = format!(
        "{}/{}",
        sub["metadata"]["uid"].as_str().unwrap_or_default(),
        bundle.name
    );
    let plan_name = format!("install-{}", objects::suffix(&seed));
    let automatic = sub["spec"]["installPlanApproval"]
        .as_str()
        .unwrap_or("Automatic")
        != "Manual";
    let plan = json!({
        "apiVersion": OLM_V1ALPHA1, "kind": "InstallPlan",
        "metadata": {
            "name": plan_name, "namespace": ns,
            "labels": {package_label(&bundle.package, ns): ""},
            "ownerReferences": [{
                "apiVersion": OLM_V1ALPHA1, "kind": "Subscription", "name": name(sub),
                "uid": sub["metadata"]["uid"], "blockOwnerDeletion": false, "controller": false,
            }],
        },
        "spec": {
            "approval": if automatic { "Automatic" } else { "Manual" },
            "approved": automatic,
            "clusterServiceVersionNames": [bundle.name],
            "generation": 1,
        },
    });
    objects::create_absent(store, plan, FIELD_MANAGER)?;
    let r = objects::reference(OLM_V1ALPHA1, "InstallPlan", Some(ns), &plan_name);
    let created = objects::get(store, &r)?.context("the InstallPlan just created is gone")?;
    if created["status"]["phase"].is_null() {
        let status = json!({
            "phase": if automatic { "Installing" } else { "RequiresApproval" },
            "catalogSources": [],
            "plan": steps(sub, bundle, cs)?,
            "startTime": objects::now(),
        });
        objects::write_status(store, &created, status, FIELD_MANAGER)?;
    }
    Ok(objects::get(store, &r)?.unwrap_or(created))
}

/// The plan: one step per CRD the package owns, then its CSV.
fn steps(sub: &Value, bundle: &Bundle, cs: &Value) -> Result<Vec<Value>> {
    let step = |group: &str, version: &str, kind: &str, name: &str, manifest: Option<String>| {
        let mut resource = json!({
            "sourceName": objects::name(cs), "sourceNamespace": namespace(cs),
            "group": group, "version": version, "kind": kind, "name": name,
        });
        if let Some(m) = manifest {
            resource["manifest"] = json!(m);
        }
        json!({"resolving": bundle.name, "resource": resource, "status": "Unknown"})
    };
    let mut out: Vec<Value> = crds::owned_by(&bundle.package)
        .iter()
        .map(|f| {
            step(
                "apiextensions.k8s.io",
                "v1",
                "CustomResourceDefinition",
                f.name,
                None,
            )
        })
        .collect();
    let csv = csv_manifest(sub, bundle)?;
    out.push(step(
        "operators.coreos.com",
        "v1alpha1",
        "ClusterServiceVersion",
        &bundle.name,
        Some(csv.to_string()),
    ));
    Ok(out)
}

/// The CSV of `bundle`: named as the bundle, its version, related images and owned CRDs. No
/// deployments: the lab runs no operator pods.
fn csv_manifest(sub: &Value, bundle: &Bundle) -> Result<Value> {
    let ns = namespace(sub);
    let owned = crds::owned_by(&bundle.package)
        .iter()
        .map(crds::owned_entry)
        .collect::<Result<Vec<_>>>()?;
    let properties = bundle.properties();
    let display = properties
        .iter()
        .find(|p| p.property_type == "olm.csv.metadata")
        .and_then(|p| p.value["displayName"].as_str())
        .unwrap_or(&bundle.package);
    let related: Vec<Value> = bundle
        .related_images
        .iter()
        .filter_map(|r| Some(json!({"name": r.name.as_ref()?, "image": r.image})))
        .collect();
    Ok(json!({
        "apiVersion": OLM_V1ALPHA1, "kind": "ClusterServiceVersion",
        "metadata": {"name": bundle.name, "namespace": ns, "labels": {package_label(&bundle.package, ns): ""}},
        "spec": {
            "displayName": display,
            "version": bundle.version.to_string(),
            "install": {"strategy": "deployment", "spec": {"deployments": []}},
            "customresourcedefinitions": {"owned": owned},
            "relatedImages": related,
        },
    }))
}

/// Moves every InstallPlan on: an approved `RequiresApproval` plan to `Installing`, an
/// `Installing` plan executed to `Complete`.
pub fn reconcile(store: &Store) -> Result<()> {
    for plan in store.list(OLM_V1ALPHA1, "InstallPlan", None, None)? {
        let result = match plan["status"]["phase"].as_str() {
            Some("RequiresApproval") if plan["spec"]["approved"] == true => {
                let mut status = plan["status"].clone();
                status["phase"] = json!("Installing");
                objects::write_status(store, &plan, status, FIELD_MANAGER).map(|_| ())
            }
            Some("Installing") => execute(store, &plan),
            _ => Ok(()),
        };
        if let Err(e) = result {
            tracing::warn!("{}: {e:#}", objects::describe(&plan));
        }
    }
    Ok(())
}

fn execute(store: &Store, plan: &Value) -> Result<()> {
    let mut status = plan["status"].clone();
    let steps = status["plan"]
        .as_array_mut()
        .context("the InstallPlan has no status.plan")?;
    for step in steps.iter_mut() {
        let resource = &step["resource"];
        let outcome = match resource["kind"].as_str() {
            Some("CustomResourceDefinition") => {
                ensure_crd(store, resource["name"].as_str().unwrap_or_default())?
            }
            Some("ClusterServiceVersion") => create_csv(store, plan, resource)?,
            other => bail!("step of kind {other:?}: the lab's OLM makes only CRDs and CSVs"),
        };
        step["status"] = json!(outcome);
    }
    let now = objects::now();
    status["phase"] = json!("Complete");
    status["conditions"] = json!([{"type": "Installed", "status": "True", "lastUpdateTime": now, "lastTransitionTime": now}]);
    objects::write_status(store, plan, status, FIELD_MANAGER)?;
    Ok(())
}

/// Creates the CRD `name` from the operator's file unless it exists: `Created` or `Present`.
fn ensure_crd(store: &Store, name: &str) -> Result<&'static str> {
    let r = objects::reference(objects::CRD_V1, "CustomResourceDefinition", None, name);
    if objects::get(store, &r)?.is_some() {
        return Ok("Present");
    }
    let file = crds::by_name(name).with_context(|| format!("no CRD file for {name}"))?;
    store
        .load_crds(file.yaml)
        .with_context(|| format!("creating CustomResourceDefinition {name}"))?;
    Ok("Created")
}

/// Creates the CSV of a step's manifest, annotated with the namespace's OperatorGroup as the
/// olm-operator annotates it.
fn create_csv(store: &Store, plan: &Value, resource: &Value) -> Result<&'static str> {
    let manifest = resource["manifest"]
        .as_str()
        .context("the CSV step has no manifest")?;
    let mut csv: Value =
        serde_json::from_str(manifest).context("reading the CSV step's manifest")?;
    let ns = namespace(plan);
    let groups = store.list(OLM_V1, "OperatorGroup", Some(ns), None)?;
    let [og] = groups.as_slice() else {
        bail!(
            "expected 1 OperatorGroup in namespace {ns}, found {}",
            groups.len()
        );
    };
    let targets: Vec<&str> = og["spec"]["targetNamespaces"]
        .as_array()
        .map(|t| t.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    csv["metadata"]["annotations"] = json!({
        "olm.operatorGroup": name(og),
        "olm.operatorNamespace": ns,
        "olm.targetNamespaces": targets.join(","),
    });
    Ok(match objects::create_absent(store, csv, "olm-operator")? {
        true => "Created",
        false => "Present",
    })
}
