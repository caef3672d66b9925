//! Discovery as kubectl reads it: `/version`, `/api`, `/apis` and each group version's
//! resource list (kinds, verbs, namespaced, short names, categories), built from the kinds the
//! store serves. Aggregated discovery is not offered: kubectl falls back to these documents.
//! OpenAPI v3 is published only as far as kubectl reads it before `apply --server-side`: the
//! index and, per group version, each kind's PATCH operation and its query parameters (no
//! schemas: validation is the server's, `fieldValidation=Strict`).

use super::kinds::KindInfo;
use serde_json::{json, Value};
use std::collections::BTreeMap;

const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// `/version`: the Kubernetes version of OpenShift 4.18.
pub fn version() -> Value {
    json!({"major": "1", "minor": "31", "gitVersion": "v1.31.6", "gitCommit": "", "gitTreeState": "clean",
        "buildDate": "2025-02-20T00:00:00Z", "goVersion": "go1.22.12", "compiler": "gc", "platform": "linux/amd64"})
}

/// `/api`.
pub fn core_versions() -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "0.0.0.0:6443"}]})
}

/// `/apis`: every group but the core one, its versions, preferred first.
pub fn groups(kinds: &[KindInfo]) -> Value {
    let mut by_group: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for k in kinds.iter().filter(|k| !k.group.is_empty()) {
        let vs = by_group.entry(&k.group).or_default();
        for v in &k.versions {
            if !vs.contains(&v.as_str()) {
                vs.push(v);
            }
        }
    }
    let groups: Vec<Value> = by_group
        .iter()
        .map(|(g, vs)| {
            let versions: Vec<Value> = vs
                .iter()
                .map(|v| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
                .collect();
            json!({"name": g, "versions": versions, "preferredVersion": versions[0]})
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/api/v1` or `/apis/GROUP/VERSION`, None when nothing is served there.
pub fn resources(kinds: &[KindInfo], group: &str, version: &str) -> Option<Value> {
    let mut list = Vec::new();
    for k in kinds
        .iter()
        .filter(|k| k.group == group && k.versions.iter().any(|v| v == version))
    {
        let mut r = json!({"name": k.plural, "singularName": k.singular, "namespaced": k.namespaced,
            "kind": k.kind, "verbs": VERBS});
        if !k.short_names.is_empty() {
            r["shortNames"] = json!(k.short_names);
        }
        if !k.categories.is_empty() {
            r["categories"] = json!(k.categories);
        }
        list.push(r);
        if k.status_subresource {
            list.push(json!({"name": format!("{}/status", k.plural), "singularName": "", "namespaced": k.namespaced,
                "kind": k.kind, "verbs": ["get", "patch", "update"]}));
        }
    }
    if list.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": list}),
    )
}

/// The group versions the store serves, as OpenAPI v3 paths (`api/v1`, `apis/GROUP/VERSION`).
fn openapi_paths(kinds: &[KindInfo]) -> Vec<(String, String, String)> {
    let mut out: Vec<(String, String, String)> = Vec::new();
    for k in kinds {
        for v in &k.versions {
            let path = if k.group.is_empty() {
                format!("api/{v}")
            } else {
                format!("apis/{}/{v}", k.group)
            };
            if !out.iter().any(|(p, _, _)| *p == path) {
                out.push((path, k.group.clone(), v.clone()));
            }
        }
    }
    out.sort();
    out
}

/// `/openapi/v3`: the index of group-version documents, as kubectl reads it before a
/// server-side apply to learn whether the server validates fields itself.
pub fn openapi_index(kinds: &[KindInfo]) -> Value {
    let paths: serde_json::Map<String, Value> = openapi_paths(kinds)
        .into_iter()
        .map(|(p, _, _)| {
            let url = format!("/openapi/v3/{p}");
            (p, json!({"serverRelativeURL": url}))
        })
        .collect();
    json!({"paths": paths})
}

/// `/openapi/v3/api/v1`, `/openapi/v3/apis/GROUP/VERSION`: each kind's PATCH operation with
/// its group-version-kind and the query parameters the store honours (`fieldValidation`,
/// `fieldManager`, `force`, `dryRun`). Schemas are not published: the store validates
/// server-side, so kubectl sends `fieldValidation` instead of validating itself.
pub fn openapi_document(kinds: &[KindInfo], path: &str) -> Option<Value> {
    let (_, group, version) = openapi_paths(kinds)
        .into_iter()
        .find(|(p, _, _)| p == path)?;
    let params: Vec<Value> = ["dryRun", "fieldManager", "fieldValidation", "force"]
        .iter()
        .map(|n| json!({"name": n, "in": "query", "schema": {"type": "string", "uniqueItems": true}}))
        .collect();
    let mut paths = serde_json::Map::new();
    for k in kinds
        .iter()
        .filter(|k| k.group == group && k.versions.contains(&version))
    {
        let scope = if k.namespaced {
            "namespaces/{namespace}/"
        } else {
            ""
        };
        let p = format!("/{path}/{scope}{}/{{name}}", k.plural);
        paths.insert(
            p,
            json!({"patch": {
                "operationId": format!("patch{}", k.kind),
                "parameters": params,
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": {"group": k.group, "version": version, "kind": k.kind},
                "responses": {"200": {"description": "OK"}}}}),
        );
    }
    Some(json!({"openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.31.6"},
        "paths": paths, "components": {"schemas": {}}}))
}
