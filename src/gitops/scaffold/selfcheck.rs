//! The scaffold checks what it wrote before it is written, as the API server would take it:
//! every Application and AppProject against the Argo CD CRDs OpenShift GitOps installs, every
//! KAI Queue against the vendored Queue CRD, every built-in object (Namespace, RBAC,
//! NetworkPolicy, quotas, PriorityClass, the CRD itself) by its k8s-openapi type. Kinds whose
//! CRD comes with an operator (Subscription, ClusterPolicy, ...) have no schema here. A
//! violation is a bug of bootstrap's, reported with the file, the object and the field.

use super::RepoFile;
use crate::gitops::builtin::validate_builtin;
use crate::gitops::crd::{argocd_crds, Crd};
use serde_json::Value;
use std::sync::OnceLock;

/// The vendored KAI Queue CRD, parsed once.
fn kai_crds() -> &'static [Crd] {
    static CRDS: OnceLock<Vec<Crd>> = OnceLock::new();
    CRDS.get_or_init(|| {
        Crd::parse_yaml(super::cluster::KAI_QUEUE_CRD).expect("the vendored KAI Queue CRD parses")
    })
}

/// Every violation of `obj`, each as `FIELD: MESSAGE`; empty for a kind with no schema here.
pub fn violations(obj: &Value) -> Vec<String> {
    let api_version = obj["apiVersion"].as_str().unwrap_or_default();
    let kind = obj["kind"].as_str().unwrap_or_default();
    if let Some(v) = validate_builtin(api_version, kind, obj) {
        return v.iter().map(ToString::to_string).collect();
    }
    let group = api_version.split_once('/').map_or("", |(g, _)| g);
    let argocd = argocd_crds();
    argocd
        .iter()
        .chain(kai_crds())
        .find(|c| c.group == group && c.kind == kind)
        .map(|c| c.validate(obj).iter().map(ToString::to_string).collect())
        .unwrap_or_default()
}

/// `kind namespace/name` as messages name an object.
pub fn describe(obj: &Value) -> String {
    let kind = obj["kind"].as_str().unwrap_or("object");
    let name = obj["metadata"]["name"].as_str().unwrap_or("?");
    match obj["metadata"]["namespace"].as_str() {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// Every violation in `files`' YAML (kustomizations aside), as `PATH: OBJECT: FIELD: MESSAGE`.
pub(super) fn check(files: &[RepoFile]) -> Vec<String> {
    let mut out = Vec::new();
    for f in files.iter().filter(|f| f.path.ends_with(".yaml")) {
        if f.path.ends_with("kustomization.yaml") {
            continue;
        }
        let text = String::from_utf8_lossy(&f.bytes);
        let docs: Vec<Value> = match serde_saphyr::from_multiple(&text) {
            Ok(d) => d,
            Err(e) => {
                out.push(format!("{}: not YAML: {e}", f.path));
                continue;
            }
        };
        for doc in docs.iter().filter(|d| !d.is_null()) {
            for v in violations(doc) {
                out.push(format!("{}: {}: {v}", f.path, describe(doc)));
            }
        }
    }
    out
}
