//! Field validation as the API server does it: unknown fields found against the kind's
//! structural schema (pruned, with a warning each, unless the request is strict, then refused),
//! and the schema's other rules checked through the project's schema checks
//! (`bootstrap::gitops`), whose violations the store answers with 422 Invalid.

use super::kinds::KindInfo;
use serde_json::{Map, Value};

pub use bootstrap::gitops::schema::Violation;

/// What the schema checks call an unknown field.
const UNKNOWN: &str = "field not declared in schema";

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

/// The fields of a request's object the kind does not know, removed from it: those the
/// structural pruning finds, then those the schema checks name (deep inside built-in kinds).
pub fn take_unknown(kind: &KindInfo, obj: &mut Value) -> Vec<String> {
    let mut unknown = prune_unknown(kind, obj);
    for v in checks(kind, obj)
        .into_iter()
        .filter(|v| v.message == UNKNOWN)
    {
        remove_path(obj, &v.path);
        unknown.push(v.path);
    }
    unknown
}

/// The violations of an object of a CRD kind (its version's schema) or of a built-in kind,
/// from the project's schema checks.
pub fn violations(kind: &KindInfo, obj: &Value) -> Vec<Violation> {
    checks(kind, obj)
}

fn checks(kind: &KindInfo, obj: &Value) -> Vec<Violation> {
    if let Some(crd) = &kind.checker {
        // The API server allows an object's type and ObjectMeta at the root whether or not
        // the CRD's schema declares them.
        let root = |p: &str| ["apiVersion", "kind", "metadata"].contains(&p);
        let mut found = crd.validate(obj);
        found.retain(|v| !(v.message == UNKNOWN && root(&v.path)));
        return found;
    }
    let api_version = obj["apiVersion"].as_str().unwrap_or_default();
    bootstrap::gitops::builtin::validate_builtin(api_version, &kind.kind, obj).unwrap_or_default()
}

/// The steps of a violation's path: `spec.egress[0].to`, `metadata.labels[app.kubernetes.io/name]`.
fn steps(path: &str) -> Vec<String> {
    let (mut out, mut cur, mut bracket) = (Vec::new(), String::new(), false);
    for c in path.chars() {
        match c {
            '.' if !bracket => out.push(std::mem::take(&mut cur)),
            '[' if !bracket => {
                out.push(std::mem::take(&mut cur));
                bracket = true;
            }
            ']' if bracket => {
                out.push(std::mem::take(&mut cur));
                bracket = false;
            }
            c => cur.push(c),
        }
    }
    out.push(cur);
    out.retain(|s| !s.is_empty());
    out
}

/// Removes the field a violation's path names.
fn remove_path(obj: &mut Value, path: &str) {
    let steps = steps(path);
    let Some((last, parents)) = steps.split_last() else {
        return;
    };
    let mut at = obj;
    for s in parents {
        let next = match at {
            Value::Object(m) => m.get_mut(s),
            Value::Array(a) => s.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
            _ => None,
        };
        match next {
            Some(n) => at = n,
            None => return,
        }
    }
    if let Value::Object(m) = at {
        m.remove(last);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Paths with indexes and bracketed map keys (holding dots) name the field to remove.
    #[test]
    fn violation_paths_remove_their_field() {
        let mut v = serde_json::json!({"spec": {"egress": [{"to": [{"x": 1, "y": 2}]}]},
            "metadata": {"labels": {"app.kubernetes.io/name": "a", "b": "c"}}});
        remove_path(&mut v, "spec.egress[0].to[0].x");
        remove_path(&mut v, "metadata.labels[app.kubernetes.io/name]");
        assert_eq!(
            v,
            serde_json::json!({"spec": {"egress": [{"to": [{"y": 2}]}]}, "metadata": {"labels": {"b": "c"}}})
        );
    }
}
