//! ClusterServiceVersions, as OLM's olm-operator walks them: `Pending` (requirements not yet
//! checked), `InstallReady` once every owned CRD is present and Established, `Installing`,
//! `Succeeded`; one phase per pass, each with OLM's reason and message and a `conditions`
//! entry, so a client waiting on the CSV sees it move.

use super::objects::{self, OLM_V1ALPHA1};
use crate::site::kube::Store;
use anyhow::Result;
use serde_json::{json, Value};

const FIELD_MANAGER: &str = "olm-operator";

/// A phase with OLM's reason and message for it.
type Phase = (&'static str, &'static str, &'static str);

const PENDING: Phase = (
    "Pending",
    "RequirementsUnknown",
    "requirements not yet checked",
);
const NOT_MET: Phase = (
    "Pending",
    "RequirementsNotMet",
    "one or more requirements couldn't be found",
);
const INSTALL_READY: Phase = (
    "InstallReady",
    "AllRequirementsMet",
    "all requirements found, attempting install",
);
const INSTALLING: Phase = (
    "Installing",
    "InstallSucceeded",
    "waiting for install components to report healthy",
);
const SUCCEEDED: Phase = (
    "Succeeded",
    "InstallSucceeded",
    "install strategy completed with no errors",
);

/// Moves every CSV one phase on.
pub fn reconcile(store: &Store) -> Result<()> {
    for csv in store.list(OLM_V1ALPHA1, "ClusterServiceVersion", None, None)? {
        if let Err(e) = step(store, &csv) {
            tracing::warn!("{}: {e:#}", objects::describe(&csv));
        }
    }
    Ok(())
}

fn step(store: &Store, csv: &Value) -> Result<()> {
    let requirements = requirement_status(store, csv)?;
    let met = requirements.iter().all(|r| r["status"] == "Present");
    let next = match csv["status"]["phase"].as_str().unwrap_or_default() {
        "" => PENDING,
        "Pending" if met => INSTALL_READY,
        "Pending" => NOT_MET,
        "InstallReady" => INSTALLING,
        "Installing" => SUCCEEDED,
        _ => return Ok(()),
    };
    let current = (
        csv["status"]["phase"].as_str(),
        csv["status"]["reason"].as_str(),
    );
    if current == (Some(next.0), Some(next.1)) {
        return Ok(());
    }
    let status = status_with(csv, next, (next != PENDING).then_some(requirements));
    objects::write_status(store, csv, status, FIELD_MANAGER)?;
    Ok(())
}

fn status_with(
    csv: &Value,
    (phase, reason, message): Phase,
    requirements: Option<Vec<Value>>,
) -> Value {
    let now = objects::now();
    let mut conditions = csv["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    conditions.push(json!({
        "phase": phase, "reason": reason, "message": message,
        "lastUpdateTime": now, "lastTransitionTime": now,
    }));
    let mut status = json!({
        "phase": phase, "reason": reason, "message": message,
        "lastUpdateTime": now, "lastTransitionTime": now,
        "conditions": conditions,
    });
    if let Some(r) = requirements {
        status["requirementStatus"] = json!(r);
    }
    status
}

/// One entry per owned CRD: `Present` when it exists and is Established, as OLM reports it.
fn requirement_status(store: &Store, csv: &Value) -> Result<Vec<Value>> {
    let owned = csv["spec"]["customresourcedefinitions"]["owned"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut out = Vec::new();
    for o in &owned {
        let name = o["name"].as_str().unwrap_or_default();
        let r = objects::reference(objects::CRD_V1, "CustomResourceDefinition", None, name);
        let crd = objects::get(store, &r)?;
        let established = crd.as_ref().is_some_and(|c| {
            objects::condition(&c["status"]["conditions"], "Established")
                .is_some_and(|e| e["status"] == "True")
        });
        let (status, message) = match (&crd, established) {
            (Some(_), true) => (
                "Present",
                "CRD is present and Established condition is true",
            ),
            (Some(_), false) => ("NotPresent", "CRD is not yet Established"),
            (None, _) => ("NotPresent", "CRD is not present"),
        };
        let mut entry = json!({
            "group": "apiextensions.k8s.io", "version": "v1", "kind": "CustomResourceDefinition",
            "name": name, "status": status, "message": message,
        });
        if let Some(uid) = crd.as_ref().and_then(|c| c["metadata"]["uid"].as_str()) {
            entry["uuid"] = json!(uid);
        }
        out.push(entry);
    }
    Ok(out)
}

/// Whether the CSV of `package` in any namespace has Succeeded.
pub fn succeeded(store: &Store, package: &str) -> Result<bool> {
    let csvs = store.list(OLM_V1ALPHA1, "ClusterServiceVersion", None, None)?;
    Ok(csvs.iter().any(|c| {
        let label = super::installplan::package_label(package, objects::namespace(c));
        c["metadata"]["labels"].get(&label).is_some() && c["status"]["phase"] == "Succeeded"
    }))
}
