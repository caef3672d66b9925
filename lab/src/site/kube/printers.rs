//! The API server's own printers for the built-in kinds whose columns a JSONPath cannot
//! express, as kubernetes `pkg/printers/internalversion/printers.go` writes them: Node
//! (`printNode`: STATUS from the Ready condition and `spec.unschedulable`, ROLES from the
//! `node-role.kubernetes.io/` labels, VERSION, and the wide columns) and
//! CertificateSigningRequest (`printCertificateSigningRequest`: SIGNERNAME, REQUESTOR,
//! REQUESTEDDURATION, CONDITION as `extractCSRStatus` words it).

use super::kinds::KindInfo;
use super::table::age;
use serde_json::{json, Value};

fn column(name: &str, kind: &str, priority: u8) -> Value {
    json!({"name": name, "type": kind, "format": if name == "Name" { "name" } else { "" },
        "description": "", "priority": priority})
}

/// A printer: one object's cells.
type Cells = fn(&Value) -> Vec<Value>;

/// The table of a kind printed by code, or None for the others.
pub fn table(kind: &KindInfo, objects: &[Value], revision: u64) -> Option<Value> {
    let (columns, cells): (Vec<Value>, Cells) = match (kind.group.as_str(), kind.kind.as_str()) {
        ("", "Node") => (
            [
                ("Name", "string", 0),
                ("Status", "string", 0),
                ("Roles", "string", 0),
                ("Age", "string", 0),
                ("Version", "string", 0),
                ("Internal-IP", "string", 1),
                ("External-IP", "string", 1),
                ("OS-Image", "string", 1),
                ("Kernel-Version", "string", 1),
                ("Container-Runtime", "string", 1),
            ]
            .iter()
            .map(|(n, t, p)| column(n, t, *p))
            .collect(),
            node_cells,
        ),
        ("certificates.k8s.io", "CertificateSigningRequest") => (
            [
                ("Name", "string"),
                ("Age", "date"),
                ("SignerName", "string"),
                ("Requestor", "string"),
                ("RequestedDuration", "string"),
                ("Condition", "string"),
            ]
            .iter()
            .map(|(n, t)| column(n, t, 0))
            .collect(),
            csr_cells,
        ),
        _ => return None,
    };
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let meta = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]});
            json!({"cells": cells(o), "object": meta})
        })
        .collect();
    Some(
        json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": revision.to_string()},
        "columnDefinitions": columns, "rows": rows}),
    )
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

fn or_none(s: String) -> String {
    if s.is_empty() {
        "<none>".into()
    } else {
        s
    }
}

fn node_cells(node: &Value) -> Vec<Value> {
    let ready = node["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready")
        .map(|c| c["status"].as_str().unwrap_or_default());
    let mut status = match ready {
        Some("True") => "Ready".to_string(),
        Some("False") => "NotReady".to_string(),
        _ => "Unknown".to_string(),
    };
    if node["spec"]["unschedulable"].as_bool() == Some(true) {
        status.push_str(",SchedulingDisabled");
    }
    let mut roles: Vec<String> = Vec::new();
    for (k, v) in node["metadata"]["labels"].as_object().into_iter().flatten() {
        if let Some(r) = k.strip_prefix("node-role.kubernetes.io/") {
            if !r.is_empty() {
                roles.push(r.to_string());
            }
        } else if k == "kubernetes.io/role" && !text(v).is_empty() {
            roles.push(text(v));
        }
    }
    roles.sort();
    roles.dedup();
    let address = |t: &str| {
        or_none(
            node["status"]["addresses"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|a| a["type"] == t)
                .map(|a| text(&a["address"]))
                .unwrap_or_default(),
        )
    };
    let info = &node["status"]["nodeInfo"];
    vec![
        node["metadata"]["name"].clone(),
        json!(status),
        json!(or_none(roles.join(","))),
        json!(age(node["metadata"]["creationTimestamp"].as_str())),
        json!(text(&info["kubeletVersion"])),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(or_none(text(&info["osImage"]))),
        json!(or_none(text(&info["kernelVersion"]))),
        json!(or_none(text(&info["containerRuntimeVersion"]))),
    ]
}

/// `extractCSRStatus`: Denied, else Approved, else Pending; then `,Failed` and `,Issued`.
pub fn csr_condition(csr: &Value) -> String {
    let conds: Vec<&str> = csr["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["type"].as_str())
        .collect();
    let mut s = if conds.contains(&"Denied") {
        "Denied".to_string()
    } else if conds.contains(&"Approved") {
        "Approved".to_string()
    } else {
        "Pending".to_string()
    };
    if conds.contains(&"Failed") {
        s.push_str(",Failed");
    }
    if !text(&csr["status"]["certificate"]).is_empty() {
        s.push_str(",Issued");
    }
    s
}

fn csr_cells(csr: &Value) -> Vec<Value> {
    let duration = csr["spec"]["expirationSeconds"]
        .as_u64()
        .map_or_else(|| "<none>".to_string(), duration);
    vec![
        csr["metadata"]["name"].clone(),
        json!(age(csr["metadata"]["creationTimestamp"].as_str())),
        json!(text(&csr["spec"]["signerName"])),
        json!(text(&csr["spec"]["username"])),
        json!(duration),
        json!(csr_condition(csr)),
    ]
}

/// `duration.HumanDuration`, for the few shapes a CSR's expirationSeconds takes.
fn duration(secs: u64) -> String {
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 3 * 3600 => format!("{}m", s / 60),
        s if s < 48 * 3600 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}
