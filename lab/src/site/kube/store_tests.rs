//! The store's behaviour in-process: apply ownership and conflicts, the status subresource,
//! generation, finalizers, namespaces, RBAC and the audit trail.

use super::store::*;
use serde_json::{json, Value};

fn as_manager(m: &str) -> WriteOptions {
    WriteOptions {
        field_manager: m.into(),
        ..Default::default()
    }
}

fn cm(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}, "data": data})
}

/// A rerun of the same apply writes nothing: same resourceVersion, same revision.
#[test]
fn a_repeated_apply_is_a_no_op() {
    let s = Store::new();
    let a = s.apply(cm(json!({"a": "1"})), &as_manager("one")).unwrap();
    let rev = s.revision();
    let b = s.apply(cm(json!({"a": "1"})), &as_manager("one")).unwrap();
    assert_eq!(
        a["metadata"]["resourceVersion"],
        b["metadata"]["resourceVersion"]
    );
    assert_eq!(s.revision(), rev);
    assert_eq!(
        b["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:data": {"f:a": {}}})
    );
}

/// Another manager setting an owned field to another value conflicts (409, the API server's
/// words); force takes the field over; the first manager's later apply without it removes
/// nothing the new owner holds.
#[test]
fn apply_conflicts_unless_forced() {
    let s = Store::new();
    s.apply(cm(json!({"a": "1", "b": "2"})), &as_manager("one"))
        .unwrap();
    let err = s
        .apply(cm(json!({"a": "9"})), &as_manager("two"))
        .unwrap_err();
    assert_eq!((err.code, err.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        err.message,
        "Apply failed with 1 conflict: conflict with \"one\": .data.a"
    );
    let same = s.apply(cm(json!({"a": "1"})), &as_manager("two")).unwrap();
    assert_eq!(
        same["metadata"]["managedFields"].as_array().unwrap().len(),
        2,
        "shared ownership"
    );
    let forced = s
        .apply(
            cm(json!({"a": "9"})),
            &WriteOptions {
                force: true,
                ..as_manager("two")
            },
        )
        .unwrap();
    assert_eq!(forced["data"], json!({"a": "9", "b": "2"}));
    let after = s.apply(cm(json!({"b": "2"})), &as_manager("one")).unwrap();
    assert_eq!(after["data"], json!({"a": "9", "b": "2"}));
    let dropped = s.apply(cm(json!({})), &as_manager("one")).unwrap();
    assert_eq!(
        dropped["data"],
        json!({"a": "9"}),
        "b was owned by one alone"
    );
}

/// Status writes change only status; main writes leave status alone for kinds with the
/// subresource; generation grows on spec changes only.
#[test]
fn status_subresource_and_generation() {
    let s = Store::new();
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "t"}, "spec": {}, "status": {"phase": "X"}});
    let created = s.apply(ns, &as_manager("m")).unwrap();
    assert_eq!(created["status"]["phase"], "Active");
    let svc = |port: i64| {
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "t"},
        "spec": {"ports": [{"port": port}]}, "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}})
    };
    let a = s.apply(svc(80), &as_manager("m")).unwrap();
    assert_eq!(
        (a["metadata"]["generation"].as_i64(), a.get("status")),
        (Some(1), None)
    );
    let b = s.apply_status(svc(81), &as_manager("ctl")).unwrap();
    assert_eq!(b["spec"]["ports"][0]["port"], 80);
    assert_eq!(b["status"]["loadBalancer"]["ingress"][0]["ip"], "1.2.3.4");
    assert_eq!(b["metadata"]["generation"], 1);
    let c = s.apply(svc(82), &as_manager("m")).unwrap();
    assert_eq!(
        (
            c["metadata"]["generation"].as_i64(),
            &c["status"]["loadBalancer"]["ingress"][0]["ip"]
        ),
        (Some(2), &json!("1.2.3.4"))
    );
}

/// An object with finalizers stays, marked, until they are emptied; a namespace's deletion
/// takes its objects.
#[test]
fn finalizers_and_namespace_deletion() {
    let s = Store::new();
    let admin = as_manager("m");
    s.create(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "t"}}),
        &admin,
    )
    .unwrap();
    let held = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "h", "namespace": "t", "finalizers": ["x/y"]}});
    s.create(held, &admin).unwrap();
    let r = ObjectRef {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: Some("t".into()),
        name: "h".into(),
    };
    let marked = s.delete(&r, &admin).unwrap();
    assert!(marked["metadata"]["deletionTimestamp"].is_string());
    let ns = ObjectRef {
        api_version: "v1".into(),
        kind: "Namespace".into(),
        namespace: None,
        name: "t".into(),
    };
    s.delete(&ns, &admin).unwrap();
    assert_eq!(s.get(&ns).unwrap()["status"]["phase"], "Terminating");
    let refused = s.create(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "n", "namespace": "t"}}), &admin).unwrap_err();
    assert_eq!(refused.code, 403, "{refused}");
    s.merge_patch(&r, json!({"metadata": {"finalizers": null}}), &admin, None)
        .unwrap();
    assert_eq!(s.get(&r).unwrap_err().code, 404);
    assert_eq!(s.get(&ns).unwrap_err().code, 404);
}

/// Strict validation refuses unknown fields in the API server's words; without it they are
/// pruned.
#[test]
fn unknown_fields_strict_or_pruned() {
    let s = Store::new();
    let mut bad = cm(json!({"a": "1"}));
    bad["spec"] = json!({"foo": 1});
    let err = s
        .create(
            bad.clone(),
            &WriteOptions {
                strict: true,
                ..as_manager("m")
            },
        )
        .unwrap_err();
    assert_eq!(err.message, "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"spec\"");
    let pruned = s.create(bad, &as_manager("m")).unwrap();
    assert!(pruned.get("spec").is_none());
}

/// A service account may do only what its bindings grant; the refusal is the API server's.
#[test]
fn rbac_grants_through_bindings() {
    let s = Store::new();
    let admin = as_manager("m");
    let sa = WriteOptions {
        user: "system:serviceaccount:gitops:ctl".into(),
        ..as_manager("ctl")
    };
    let quota = json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "default"}, "spec": {"hard": {"pods": "1"}}});
    let err = s.apply(quota.clone(), &sa).unwrap_err();
    assert_eq!(err.message, "resourcequotas \"q\" is forbidden: User \"system:serviceaccount:gitops:ctl\" cannot patch resource \"resourcequotas\" in API group \"\" in the namespace \"default\"");
    s.create(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "quota"},
        "rules": [{"apiGroups": [""], "resources": ["resourcequotas"], "verbs": ["get", "patch", "create"]}]}), &admin).unwrap();
    s.create(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "quota"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "quota"},
        "subjects": [{"kind": "ServiceAccount", "name": "ctl", "namespace": "gitops"}]}), &admin).unwrap();
    s.apply(quota, &sa).unwrap();
    let trail = s.audit();
    let last = trail.last().unwrap();
    assert_eq!(
        (last.verb.as_str(), last.code, last.user.as_str()),
        ("apply", 201, "system:serviceaccount:gitops:ctl")
    );
    assert!(trail
        .iter()
        .any(|e| e.code == 403 && e.kind == "ResourceQuota"));
}

/// A CRD registers its kind; objects are pruned against its schema; deleting it removes the
/// kind.
#[test]
fn crds_register_kinds() {
    let s = Store::new();
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}});
    assert!(!s.is_established("example.com/v1", "Widget"));
    let created = s.create(crd, &as_manager("m")).unwrap();
    assert_eq!(created["status"]["conditions"][1]["type"], "Established");
    assert!(s.is_established("example.com/v1", "Widget"));
    let w = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "default"}, "spec": {"size": 1, "colour": "red"}});
    let err = s
        .apply(
            w.clone(),
            &WriteOptions {
                strict: true,
                ..as_manager("m")
            },
        )
        .unwrap_err();
    assert_eq!(err.message, "failed to create typed patch object (default/w; example.com/v1, Kind=Widget): .spec.colour: field not declared in schema");
    let ok = s.apply(w, &as_manager("m")).unwrap();
    assert_eq!(ok["spec"], json!({"size": 1}));
}
