//! Small helpers the OLM imitation's controllers share: references, optional reads, writes
//! that only happen when something changed, conditions and timestamps.

use crate::site::kube::{ObjectRef, Store, WriteOptions};
use anyhow::{Context, Result};
use serde_json::{json, Map, Value};

/// OLM's main API version (Subscription, InstallPlan, ClusterServiceVersion, CatalogSource).
pub const OLM_V1ALPHA1: &str = "operators.coreos.com/v1alpha1";
/// OperatorGroup's API version.
pub const OLM_V1: &str = "operators.coreos.com/v1";
/// CustomResourceDefinition's API version.
pub const CRD_V1: &str = "apiextensions.k8s.io/v1";

/// Keys that hold times: ignored when deciding whether a status changed, so a controller
/// pass that finds nothing new writes nothing (and the loop settles).
const TIME_KEYS: [&str; 7] = [
    "lastUpdated",
    "lastTransitionTime",
    "lastUpdateTime",
    "lastConnect",
    "startTime",
    "createdAt",
    "lastHeartbeatTime",
];

/// A reference to `kind` `namespace/name`.
pub fn reference(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> ObjectRef {
    ObjectRef {
        api_version: api_version.into(),
        kind: kind.into(),
        namespace: namespace.map(String::from),
        name: name.into(),
    }
}

/// Write options of a controller (`field_manager`), acting as the lab itself.
pub fn manager(field_manager: &str) -> WriteOptions {
    WriteOptions {
        field_manager: field_manager.into(),
        force: true,
        ..WriteOptions::default()
    }
}

/// `metadata.name`.
pub fn name(obj: &Value) -> &str {
    obj["metadata"]["name"].as_str().unwrap_or_default()
}

/// `metadata.namespace`.
pub fn namespace(obj: &Value) -> &str {
    obj["metadata"]["namespace"].as_str().unwrap_or_default()
}

/// `kind namespace/name`, for messages.
pub fn describe(obj: &Value) -> String {
    let kind = obj["kind"].as_str().unwrap_or("object");
    match namespace(obj) {
        "" => format!("{kind} {}", name(obj)),
        ns => format!("{kind} {ns}/{}", name(obj)),
    }
}

/// The object, or `None` when it does not exist.
pub fn get(store: &Store, r: &ObjectRef) -> Result<Option<Value>> {
    match store.get(r) {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.code == 404 => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {} {}", r.kind, r.name)),
    }
}

/// `a` and `b` are equal but for the times they hold.
pub fn same_but_times(a: &Value, b: &Value) -> bool {
    strip_times(a) == strip_times(b)
}

fn strip_times(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !TIME_KEYS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), strip_times(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_times).collect()),
        other => other.clone(),
    }
}

/// Replaces `obj`'s status with `status` (through the status subresource) unless only times
/// would change; whether it wrote.
pub fn write_status(
    store: &Store,
    obj: &Value,
    status: Value,
    field_manager: &str,
) -> Result<bool> {
    if same_but_times(&obj["status"], &status) {
        return Ok(false);
    }
    let mut next = obj.clone();
    next["status"] = status;
    strip_server_fields(&mut next);
    store
        .replace(next, &manager(field_manager), Some("status"))
        .with_context(|| format!("writing the status of {}", describe(obj)))?;
    Ok(true)
}

/// Drops what the server owns before an object is written back (managedFields); the
/// resourceVersion stays, so a concurrent change makes the write conflict instead of losing it.
fn strip_server_fields(obj: &mut Value) {
    if let Some(m) = obj["metadata"].as_object_mut() {
        m.remove("managedFields");
    }
}

/// Server-side applies `obj` as `field_manager` (a rerun with nothing new writes nothing).
pub fn apply(store: &Store, obj: Value, field_manager: &str) -> Result<Value> {
    let what = describe(&obj);
    store
        .apply(obj, &manager(field_manager))
        .with_context(|| format!("applying {what}"))
}

/// Creates `obj` unless an object of its name exists; whether it created it.
pub fn create_absent(store: &Store, obj: Value, field_manager: &str) -> Result<bool> {
    if get(store, &ObjectRef::of(&obj))?.is_some() {
        return Ok(false);
    }
    let what = describe(&obj);
    match store.create(obj, &manager(field_manager)) {
        Ok(_) => Ok(true),
        Err(e) if e.code == 409 => Ok(false),
        Err(e) => Err(e).with_context(|| format!("creating {what}")),
    }
}

/// The condition of `conditions` (a status's list) whose `type` is `kind`.
pub fn condition<'a>(conditions: &'a Value, kind: &str) -> Option<&'a Value> {
    conditions
        .as_array()?
        .iter()
        .find(|c| c["type"].as_str() == Some(kind))
}

/// Sets condition `kind` in `status.conditions` (keeping its transition time when its status
/// did not change), or removes it when `cond` is `None`.
pub fn set_condition(status: &mut Value, kind: &str, cond: Option<(&str, &str, &str)>) {
    let list = status
        .as_object_mut()
        .map(|m| m.entry("conditions").or_insert_with(|| json!([])))
        .and_then(Value::as_array_mut);
    let Some(list) = list else { return };
    let old = list.iter().position(|c| c["type"].as_str() == Some(kind));
    let Some((state, reason, message)) = cond else {
        if let Some(i) = old {
            list.remove(i);
        }
        return;
    };
    let now = now();
    let since = old
        .map(|i| &list[i])
        .filter(|c| c["status"].as_str() == Some(state))
        .and_then(|c| c["lastTransitionTime"].as_str())
        .map(String::from)
        .unwrap_or_else(|| now.clone());
    let mut c = Map::new();
    c.insert("type".into(), json!(kind));
    c.insert("status".into(), json!(state));
    c.insert("reason".into(), json!(reason));
    c.insert("message".into(), json!(message));
    c.insert("lastTransitionTime".into(), json!(since));
    match old {
        Some(i) => list[i] = Value::Object(c),
        None => list.push(Value::Object(c)),
    }
}

/// Now, as the API server writes times (RFC 3339, seconds, UTC).
pub fn now() -> String {
    bootstrap::openshift::record::now_rfc3339()
}

/// Five lower-case letters and digits derived from `seed`: the random suffix of a generated
/// name, reproducible so a rerun names the same object.
pub fn suffix(seed: &str) -> String {
    use sha2::Digest as _;
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    sha2::Sha256::digest(seed.as_bytes())
        .iter()
        .take(5)
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_differing_only_in_times_are_the_same() {
        let a =
            json!({"phase": "Succeeded", "conditions": [{"type": "A", "lastTransitionTime": "1"}]});
        let b =
            json!({"phase": "Succeeded", "conditions": [{"type": "A", "lastTransitionTime": "2"}]});
        assert!(same_but_times(&a, &b));
        let c = json!({"phase": "Installing", "conditions": [{"type": "A", "lastTransitionTime": "2"}]});
        assert!(!same_but_times(&a, &c));
    }

    #[test]
    fn a_condition_keeps_its_transition_time_while_its_status_holds() {
        let mut status =
            json!({"conditions": [{"type": "X", "status": "False", "lastTransitionTime": "then"}]});
        set_condition(&mut status, "X", Some(("False", "R", "m")));
        assert_eq!(status["conditions"][0]["lastTransitionTime"], "then");
        set_condition(&mut status, "X", Some(("True", "R", "m")));
        assert_ne!(status["conditions"][0]["lastTransitionTime"], "then");
        set_condition(&mut status, "X", None);
        assert_eq!(status["conditions"], json!([]));
    }

    #[test]
    fn generated_suffixes_are_reproducible_kubernetes_style() {
        let s = suffix("uid-1");
        assert_eq!(s, suffix("uid-1"));
        assert_eq!(s.len(), 5);
        assert!(s
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()));
    }
}
