//! The built-in kinds a GitOps repository holds (Namespace, RBAC, NetworkPolicy, quotas ...),
//! checked as strictly as the CRD-backed ones: the object is read into its k8s-openapi type and
//! written back; a field that does not survive the round trip is one the API server does not
//! know (`field not declared in schema`), and a value of the wrong type fails the read, named
//! by its path (serde_path_to_error). `metadata` is checked as ObjectMeta with the API
//! server's name rules, which differ by kind (a ClusterRole may be `system:foo`, a Namespace
//! is a DNS label).

use super::schema::Violation;
use k8s_openapi::api::{apps, batch, core, networking, rbac, scheduling};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use regex::Regex;
use serde::{de::DeserializeOwned, Serialize};
use serde_json::Value;
use std::sync::OnceLock;

/// How a kind's `metadata.name` is checked (apimachinery's name validators).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameRule {
    /// DNS-1123 subdomain (most kinds, and every custom resource).
    Subdomain,
    /// DNS-1123 label (Namespace).
    Label,
    /// DNS-1035 label (Service).
    Dns1035,
    /// A path segment: anything but `.`, `..`, `/` and `%` (RBAC kinds: `system:foo`).
    PathSegment,
}

type Check = fn(&Value) -> Vec<Violation>;

/// Every violation of a built-in object, or `None` for a kind this module does not know.
pub fn validate_builtin(api_version: &str, kind: &str, obj: &Value) -> Option<Vec<Violation>> {
    let (check, rule) = checker(api_version, kind)?;
    let mut out = check(obj);
    match obj.get("metadata") {
        Some(meta) if meta.is_object() => out.extend(name_rules(meta, rule)),
        Some(_) => {}
        None => out.push(name_required()),
    }
    Some(out)
}

/// The round trip and name rule for one built-in kind.
fn checker(api_version: &str, kind: &str) -> Option<(Check, NameRule)> {
    use NameRule::*;
    let found: (Check, NameRule) = match (api_version, kind) {
        ("v1", "Namespace") => (roundtrip::<core::v1::Namespace>, Label),
        ("v1", "Secret") => (roundtrip::<core::v1::Secret>, Subdomain),
        ("v1", "ConfigMap") => (roundtrip::<core::v1::ConfigMap>, Subdomain),
        ("v1", "ServiceAccount") => (roundtrip::<core::v1::ServiceAccount>, Subdomain),
        ("v1", "Service") => (roundtrip::<core::v1::Service>, Dns1035),
        ("v1", "ResourceQuota") => (roundtrip::<core::v1::ResourceQuota>, Subdomain),
        ("v1", "LimitRange") => (roundtrip::<core::v1::LimitRange>, Subdomain),
        ("v1", "PersistentVolumeClaim") => {
            (roundtrip::<core::v1::PersistentVolumeClaim>, Subdomain)
        }
        ("v1", "Pod") => (roundtrip::<core::v1::Pod>, Subdomain),
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => {
            (roundtrip::<rbac::v1::ClusterRole>, PathSegment)
        }
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
            (roundtrip::<rbac::v1::ClusterRoleBinding>, PathSegment)
        }
        ("rbac.authorization.k8s.io/v1", "Role") => (roundtrip::<rbac::v1::Role>, PathSegment),
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => {
            (roundtrip::<rbac::v1::RoleBinding>, PathSegment)
        }
        ("networking.k8s.io/v1", "NetworkPolicy") => {
            (roundtrip::<networking::v1::NetworkPolicy>, Subdomain)
        }
        ("scheduling.k8s.io/v1", "PriorityClass") => {
            (roundtrip::<scheduling::v1::PriorityClass>, Subdomain)
        }
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => {
            (roundtrip::<CustomResourceDefinition>, Subdomain)
        }
        ("apps/v1", "Deployment") => (roundtrip::<apps::v1::Deployment>, Subdomain),
        ("apps/v1", "StatefulSet") => (roundtrip::<apps::v1::StatefulSet>, Subdomain),
        ("apps/v1", "DaemonSet") => (roundtrip::<apps::v1::DaemonSet>, Subdomain),
        ("batch/v1", "Job") => (roundtrip::<batch::v1::Job>, Subdomain),
        ("batch/v1", "CronJob") => (roundtrip::<batch::v1::CronJob>, Subdomain),
        _ => return None,
    };
    Some(found)
}

/// `metadata` of any object as ObjectMeta: known fields of the right types, then the name
/// rule, the namespace, labels and annotation keys. Paths start at `metadata`.
pub fn validate_metadata(meta: &Value, rule: NameRule) -> Vec<Violation> {
    if !meta.is_object() {
        return vec![Violation::new(
            "metadata",
            "Invalid value: \"metadata\" must be a mapping (ObjectMeta)",
        )];
    }
    let mut out = read_back::<ObjectMeta>(meta, "metadata");
    out.extend(name_rules(meta, rule));
    out
}

/// Reads `obj` as `T` and writes it back; see the module docs.
fn roundtrip<T: DeserializeOwned + Serialize>(obj: &Value) -> Vec<Violation> {
    read_back::<T>(obj, "")
}

fn read_back<T: DeserializeOwned + Serialize>(value: &Value, prefix: &str) -> Vec<Violation> {
    match serde_path_to_error::deserialize::<_, T>(value) {
        Err(e) => {
            let inner = e.path().to_string();
            let path = match (prefix, inner.as_str()) {
                (p, ".") => p.to_string(),
                ("", i) => i.to_string(),
                (p, i) => format!("{p}.{i}"),
            };
            vec![Violation::new(
                path,
                format!("Invalid value: {}", e.inner()),
            )]
        }
        Ok(typed) => {
            let back = serde_json::to_value(&typed).unwrap_or(Value::Null);
            let mut out = Vec::new();
            dropped_fields(value, &back, prefix, &mut out);
            out
        }
    }
}

/// Fields of `orig` that `back` (the typed round trip) lost: unknown to the kind. Nulls are
/// "not set" to the API server too, so they may vanish.
fn dropped_fields(orig: &Value, back: &Value, path: &str, out: &mut Vec<Violation>) {
    match (orig, back) {
        (Value::Object(o), Value::Object(b)) => {
            for (key, value) in o {
                let child = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match b.get(key) {
                    Some(kept) => dropped_fields(value, kept, &child, out),
                    None if value.is_null() => {}
                    None => out.push(Violation::new(child, "field not declared in schema")),
                }
            }
        }
        (Value::Array(o), Value::Array(b)) => {
            for (i, (value, kept)) in o.iter().zip(b).enumerate() {
                dropped_fields(value, kept, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

fn name_required() -> Violation {
    Violation::new(
        "metadata.name",
        "Required value: name or generateName is required",
    )
}

/// The name (or generateName's prefix) by `rule`, the namespace as a DNS label, label keys
/// and values, annotation keys.
fn name_rules(meta: &Value, rule: NameRule) -> Vec<Violation> {
    let mut out = Vec::new();
    let text = |k: &str| meta.get(k).and_then(Value::as_str);
    match (text("name"), text("generateName")) {
        (Some(name), _) if !name.is_empty() => {
            out.extend(check_name(name, rule).map(|m| invalid("metadata.name", name, &m)));
        }
        (_, Some(prefix)) if !prefix.is_empty() => {
            // generateName is completed by the server: the prefix alone may end in '-'.
            let sample = format!("{prefix}x");
            out.extend(
                check_name(&sample, rule).map(|m| invalid("metadata.generateName", prefix, &m)),
            );
        }
        _ => out.push(name_required()),
    }
    if let Some(ns) = text("namespace").filter(|ns| !ns.is_empty()) {
        out.extend(check_name(ns, NameRule::Label).map(|m| invalid("metadata.namespace", ns, &m)));
    }
    if let Some(labels) = meta.get("labels").and_then(Value::as_object) {
        for (key, value) in labels {
            let at = format!("metadata.labels[{key}]");
            out.extend(qualified_name(key).map(|m| invalid("metadata.labels", key, &m)));
            let value = value.as_str().unwrap_or_default();
            out.extend(label_value(value).map(|m| invalid(&at, value, &m)));
        }
    }
    if let Some(annotations) = meta.get("annotations").and_then(Value::as_object) {
        for key in annotations.keys() {
            out.extend(qualified_name(key).map(|m| invalid("metadata.annotations", key, &m)));
        }
    }
    out
}

fn invalid(path: &str, value: &str, message: &str) -> Violation {
    let shown = Value::String(value.to_string());
    Violation::new(path, format!("Invalid value: {shown}: {message}"))
}

fn re(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).expect("name pattern"))
}

const SUBDOMAIN: &str = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const LABEL: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1035: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const QUALIFIED: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";

fn full_match(cell: &'static OnceLock<Regex>, pattern: &str, s: &str) -> bool {
    re(cell, &format!("^(?:{pattern})$")).is_match(s)
}

/// apimachinery's message for a name that breaks `rule`, or `None`.
fn check_name(name: &str, rule: NameRule) -> Option<String> {
    static SUB: OnceLock<Regex> = OnceLock::new();
    static LAB: OnceLock<Regex> = OnceLock::new();
    static D1035: OnceLock<Regex> = OnceLock::new();
    let (ok, max, msg) = match rule {
        NameRule::Subdomain => (full_match(&SUB, SUBDOMAIN, name), 253, format!(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '{SUBDOMAIN}')")),
        NameRule::Label => (full_match(&LAB, LABEL, name), 63, format!(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '{LABEL}')")),
        NameRule::Dns1035 => (full_match(&D1035, DNS1035, name), 63, format!(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '{DNS1035}')")),
        NameRule::PathSegment => return path_segment(name),
    };
    if name.len() > max {
        return Some(format!("must be no more than {max} characters"));
    }
    (!ok).then_some(msg)
}

fn path_segment(name: &str) -> Option<String> {
    match name {
        "." | ".." => Some(format!("may not be '{name}'")),
        _ if name.contains('/') => Some("may not contain '/'".into()),
        _ if name.contains('%') => Some("may not contain '%'".into()),
        _ => None,
    }
}

/// A label or annotation key: `[prefix/]name`, the prefix a DNS subdomain.
fn qualified_name(key: &str) -> Option<String> {
    static NAME: OnceLock<Regex> = OnceLock::new();
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        if let Some(m) = check_name(p, NameRule::Subdomain) {
            return Some(format!("prefix part {m}"));
        }
    }
    if name.is_empty() {
        return Some("name part must be non-empty".into());
    }
    if name.len() > 63 {
        return Some("name part must be no more than 63 characters".into());
    }
    (!full_match(&NAME, QUALIFIED, name)).then(|| format!(
        "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '{QUALIFIED}')"))
}

fn label_value(value: &str) -> Option<String> {
    static VALUE: OnceLock<Regex> = OnceLock::new();
    if value.len() > 63 {
        return Some("must be no more than 63 characters".into());
    }
    let ok = value.is_empty() || full_match(&VALUE, QUALIFIED, value);
    (!ok).then(|| format!(
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '({QUALIFIED})?')"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(obj: Value) -> Vec<String> {
        let api = obj["apiVersion"].as_str().unwrap().to_string();
        let kind = obj["kind"].as_str().unwrap().to_string();
        validate_builtin(&api, &kind, &obj)
            .expect("a known kind")
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn a_good_quota_passes_and_a_number_where_a_map_is_wanted_fails() {
        let good = json!({"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": "gpu", "namespace": "team-a", "labels": {"app.kubernetes.io/part-of": "tenant"}},
            "spec": {"hard": {"requests.nvidia.com/gpu": 4, "limits.cpu": "8"}}});
        assert_eq!(check(good), Vec::<String>::new());
        let bad = json!({"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": "gpu"}, "spec": {"hard": 5}});
        let v = check(bad);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(
            v[0].starts_with("spec.hard: Invalid value: invalid type: integer `5`, expected a map"),
            "{v:?}"
        );
    }

    #[test]
    fn unknown_fields_are_named_by_path() {
        let np = json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "deny", "namespace": "t", "annotation": {}},
            "spec": {"podSelector": {}, "policyTypes": ["Ingress"], "ingres": [],
                     "egress": [{"to": [{"podSelector": {}, "nameSpaceSelector": {}}]}]}});
        assert_eq!(
            check(np),
            [
                "metadata.annotation: field not declared in schema",
                "spec.egress[0].to[0].nameSpaceSelector: field not declared in schema",
                "spec.ingres: field not declared in schema",
            ]
        );
    }

    #[test]
    fn names_follow_each_kind_s_rule() {
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team.a"}});
        assert!(check(ns)[0]
            .starts_with("metadata.name: Invalid value: \"team.a\": a lowercase RFC 1123 label"));
        let cr = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "system:quota-writer"}, "rules": []});
        assert_eq!(check(cr), Vec::<String>::new());
        let none =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"labels": {"a": "b c"}}});
        let v = check(none);
        assert!(
            v.contains(
                &"metadata.name: Required value: name or generateName is required".to_string()
            ),
            "{v:?}"
        );
        assert!(v.iter().any(|m| m.starts_with("metadata.labels[a]: Invalid value: \"b c\": a valid label")), "{v:?}");
    }

    #[test]
    fn unknown_kinds_are_left_to_the_caller() {
        assert!(validate_builtin("example.com/v1", "Widget", &json!({})).is_none());
    }
}
