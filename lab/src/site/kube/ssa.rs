//! Server-side apply as the API server does it (structured-merge-diff): the set of fields an
//! object or an applied configuration holds, in the `fieldsV1` form of `managedFields`
//! (`f:name`, `k:{"name":"x"}`, `v:"value"`, `.` for an element itself); the merge of an applied
//! configuration into the live object, lists merged by key where the schema says
//! `x-kubernetes-list-type: map` (or, for built-in kinds without a schema here, for the lists the
//! Kubernetes types mark so: containers, env, ports, volumes, conditions ...); conflicts with
//! other managers; and the removal of fields a manager stopped applying.

use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// One step of a field path: `f:name`, `k:{json}`, `v:json` or `i:N`.
pub type Step = String;
/// A field path, from the object's root.
pub type Path = Vec<Step>;
/// A set of fields.
pub type Fields = BTreeSet<Path>;

/// How a list merges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListType {
    /// Replaced as a whole.
    Atomic,
    /// A set of scalars (`v:` elements).
    Set,
    /// Elements merged by these keys (`k:` elements).
    Map(Vec<String>),
}

/// Where in an object's schema a value sits: the CRD's structural schema, or a built-in kind's
/// well-known list fields.
#[derive(Clone, Copy, Debug)]
pub struct Shape<'a> {
    schema: Option<&'a Value>,
    field: &'a str,
}

impl<'a> Shape<'a> {
    /// The root of an object with this openAPIV3Schema (None: a built-in kind).
    pub fn root(schema: Option<&'a Value>) -> Shape<'a> {
        Shape { schema, field: "" }
    }

    /// The schema of the field `key` of a map.
    pub fn prop(&self, key: &'a str) -> Shape<'a> {
        let schema = self.schema.and_then(|s| {
            s.get("properties")
                .and_then(|p| p.get(key))
                .or_else(|| s.get("additionalProperties").filter(|a| a.is_object()))
        });
        Shape { schema, field: key }
    }

    /// The schema of a list's elements.
    pub fn items(&self) -> Shape<'a> {
        Shape {
            schema: self.schema.and_then(|s| s.get("items")),
            field: self.field,
        }
    }

    /// A map that merges as a whole (`x-kubernetes-map-type: atomic`).
    fn atomic_map(&self) -> bool {
        self.schema
            .and_then(|s| s.get("x-kubernetes-map-type"))
            .and_then(Value::as_str)
            == Some("atomic")
    }

    /// How the list at this field merges.
    pub fn list_type(&self, items: &[Value]) -> ListType {
        if let Some(s) = self.schema {
            return match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
                Some("map") => ListType::Map(
                    s.get("x-kubernetes-list-map-keys")
                        .and_then(Value::as_array)
                        .map(|k| {
                            k.iter()
                                .filter_map(|k| k.as_str().map(String::from))
                                .collect()
                        })
                        .unwrap_or_default(),
                ),
                Some("set") => ListType::Set,
                _ => ListType::Atomic,
            };
        }
        builtin_list_type(self.field, items)
    }
}

/// The built-in types' list-map fields (from their `+listType=map` markers), for kinds whose
/// schema the store does not hold.
fn builtin_list_type(field: &str, items: &[Value]) -> ListType {
    let keys: &[&str] = match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "hostAliases" => &["name"],
        "conditions" => &["type"],
        "volumeMounts" => &["mountPath"],
        "ports" if items.iter().any(|i| i.get("containerPort").is_some()) => {
            &["containerPort", "protocol"]
        }
        "ports" => &["port", "protocol"],
        _ => return ListType::Atomic,
    };
    ListType::Map(keys.iter().map(|k| (*k).to_string()).collect())
}

/// The `k:` step of a list-map element: its keys, in the list's key order, as compact JSON.
fn key_step(item: &Value, keys: &[String]) -> Step {
    let mut m = Map::new();
    for k in keys {
        if let Some(v) = item.get(k) {
            m.insert(k.clone(), v.clone());
        }
    }
    format!("k:{}", Value::Object(m))
}

/// Every field `v` holds (leaves, list elements), below `prefix`.
pub fn fields_of(v: &Value, shape: Shape<'_>) -> Fields {
    let mut out = Fields::new();
    walk_fields(v, shape, &mut Vec::new(), &mut out);
    out
}

fn walk_fields(v: &Value, shape: Shape<'_>, prefix: &mut Path, out: &mut Fields) {
    match v {
        Value::Object(m) if !m.is_empty() && !shape.atomic_map() => {
            for (k, child) in m {
                prefix.push(format!("f:{k}"));
                walk_fields(child, shape.prop(k), prefix, out);
                prefix.pop();
            }
        }
        Value::Array(items) if !items.is_empty() => match shape.list_type(items) {
            ListType::Atomic => {
                out.insert(prefix.clone());
            }
            ListType::Set => {
                for i in items {
                    let mut p = prefix.clone();
                    p.push(format!("v:{i}"));
                    out.insert(p);
                }
            }
            ListType::Map(keys) => {
                for i in items {
                    prefix.push(key_step(i, &keys));
                    out.insert(prefix.clone());
                    walk_fields(i, shape.items(), prefix, out);
                    prefix.pop();
                }
            }
        },
        _ => {
            out.insert(prefix.clone());
        }
    }
}

/// The `fieldsV1` tree of a field set.
pub fn to_fields_v1(fields: &Fields) -> Value {
    fn insert(node: &mut BTreeMap<String, Node>, path: &[Step]) {
        let Some((first, rest)) = path.split_first() else {
            return;
        };
        let n = node.entry(first.clone()).or_default();
        if rest.is_empty() {
            n.member = true;
        } else {
            insert(&mut n.children, rest);
        }
    }
    #[derive(Default)]
    struct Node {
        member: bool,
        children: BTreeMap<String, Node>,
    }
    fn render(children: &BTreeMap<String, Node>) -> Value {
        let mut m = Map::new();
        for (k, n) in children {
            let mut v = render(&n.children);
            if n.member && !n.children.is_empty() {
                v.as_object_mut()
                    .map(|o| o.insert(".".into(), Value::Object(Map::new())));
            }
            m.insert(k.clone(), v);
        }
        Value::Object(m)
    }
    let mut root = BTreeMap::new();
    for p in fields {
        insert(&mut root, p);
    }
    render(&root)
}

/// The field set of a `fieldsV1` tree.
pub fn from_fields_v1(tree: &Value) -> Fields {
    fn walk(v: &Value, prefix: &mut Path, out: &mut Fields) {
        let Some(m) = v.as_object() else { return };
        if m.is_empty() && !prefix.is_empty() {
            out.insert(prefix.clone());
        }
        for (k, child) in m {
            if k == "." {
                out.insert(prefix.clone());
                continue;
            }
            prefix.push(k.clone());
            walk(child, prefix, out);
            prefix.pop();
        }
    }
    let mut out = Fields::new();
    walk(tree, &mut Vec::new(), &mut out);
    out
}

/// The value at `path` in `v`, if there is one.
pub fn value_at<'v>(v: &'v Value, path: &[Step]) -> Option<&'v Value> {
    let Some((first, rest)) = path.split_first() else {
        return Some(v);
    };
    let next = if let Some(name) = first.strip_prefix("f:") {
        v.as_object()?.get(name)?
    } else {
        v.as_array()?.iter().find(|i| element_matches(i, first))?
    };
    value_at(next, rest)
}

/// Whether list element `item` is the one step `step` (`k:`, `v:` or `i:`) names.
fn element_matches(item: &Value, step: &str) -> bool {
    if let Some(keys) = step.strip_prefix("k:") {
        let Ok(Value::Object(keys)) = serde_json::from_str::<Value>(keys) else {
            return false;
        };
        keys.iter().all(|(k, v)| item.get(k) == Some(v))
    } else if let Some(v) = step.strip_prefix("v:") {
        serde_json::from_str::<Value>(v).ok().as_ref() == Some(item)
    } else {
        false
    }
}

/// The applied configuration merged into the live object: maps field by field, list-maps
/// element by key, sets by union, anything else replaced.
pub fn merge(live: &Value, applied: &Value, shape: Shape<'_>) -> Value {
    match (live, applied) {
        (Value::Object(l), Value::Object(a)) if !shape.atomic_map() => {
            let mut out = l.clone();
            for (k, av) in a {
                let merged = match l.get(k) {
                    Some(lv) => merge(lv, av, shape.prop(k)),
                    None => av.clone(),
                };
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (Value::Array(l), Value::Array(a)) => match shape.list_type(a) {
            ListType::Atomic => applied.clone(),
            ListType::Set => {
                let mut out = l.clone();
                out.extend(a.iter().filter(|i| !l.contains(i)).cloned());
                Value::Array(out)
            }
            ListType::Map(keys) => {
                let mut out = l.clone();
                for ai in a {
                    let step = key_step(ai, &keys);
                    match out.iter_mut().find(|li| key_step(li, &keys) == step) {
                        Some(li) => *li = merge(li, ai, shape.items()),
                        None => out.push(ai.clone()),
                    }
                }
                Value::Array(out)
            }
        },
        _ => applied.clone(),
    }
}

/// Removes the fields `remove` names from `obj`, except those with a descendant in `keep`
/// (another manager still owns something inside).
pub fn remove_fields(obj: &mut Value, remove: &Fields, keep: &Fields) {
    let mut paths: Vec<&Path> = remove.iter().collect();
    paths.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for p in paths {
        if keep.iter().any(|k| k.len() > p.len() && k.starts_with(p)) {
            continue;
        }
        remove_one(obj, p);
    }
}

fn remove_one(obj: &mut Value, path: &[Step]) {
    let Some((last, parent)) = path.split_last() else {
        return;
    };
    let Some(parent) = value_at_mut(obj, parent) else {
        return;
    };
    if let Some(name) = last.strip_prefix("f:") {
        if let Some(m) = parent.as_object_mut() {
            m.remove(name);
        }
    } else if let Some(items) = parent.as_array_mut() {
        items.retain(|i| !element_matches(i, last));
    }
}

fn value_at_mut<'v>(v: &'v mut Value, path: &[Step]) -> Option<&'v mut Value> {
    let Some((first, rest)) = path.split_first() else {
        return Some(v);
    };
    let next = if let Some(name) = first.strip_prefix("f:") {
        v.as_object_mut()?.get_mut(name)?
    } else {
        v.as_array_mut()?
            .iter_mut()
            .find(|i| element_matches(i, first))?
    };
    value_at_mut(next, rest)
}

/// The fields of `new` that `old` lacks or holds with another value (what an Update writes).
pub fn changed_fields(old: &Value, new: &Value, shape: Shape<'_>) -> Fields {
    fields_of(new, shape)
        .into_iter()
        .filter(|p| {
            let is_element = p.last().is_some_and(|s| !s.starts_with("f:"));
            match value_at(old, p) {
                None => true,
                Some(_) if is_element => false,
                Some(o) => Some(o) != value_at(new, p),
            }
        })
        .collect()
}

/// A field path as the API server prints it in conflicts: `.spec.containers[name="x"].image`.
pub fn path_string(p: &[Step]) -> String {
    let mut s = String::new();
    for step in p {
        if let Some(name) = step.strip_prefix("f:") {
            s.push('.');
            s.push_str(name);
        } else if let Some(keys) = step.strip_prefix("k:") {
            let keys: Map<String, Value> = serde_json::from_str(keys).unwrap_or_default();
            let inner: Vec<String> = keys.iter().map(|(k, v)| format!("{k}={v}")).collect();
            s.push_str(&format!("[{}]", inner.join(",")));
        } else if let Some(v) = step.strip_prefix("v:") {
            s.push_str(&format!("[={v}]"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(paths: &[&[&str]]) -> Fields {
        paths
            .iter()
            .map(|p| p.iter().map(|s| (*s).to_string()).collect())
            .collect()
    }

    /// Containers merge by name: an applied container updates its namesake and a new one is
    /// appended; the fieldsV1 form has `k:{"name":..}` elements with `.` and their fields.
    #[test]
    fn list_maps_merge_by_key_and_render_as_k_steps() {
        let shape = Shape::root(None);
        let live = json!({"spec": {"containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]}});
        let applied = json!({"spec": {"containers": [{"name": "b", "image": "b:2"}, {"name": "c", "image": "c:1"}]}});
        let merged = merge(&live, &applied, shape);
        assert_eq!(
            merged["spec"]["containers"],
            json!([{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:2"}, {"name": "c", "image": "c:1"}])
        );
        let f = to_fields_v1(&fields_of(&applied, shape));
        assert_eq!(
            f["f:spec"]["f:containers"]["k:{\"name\":\"b\"}"],
            json!({".": {}, "f:image": {}, "f:name": {}})
        );
        assert_eq!(from_fields_v1(&f), fields_of(&applied, shape));
    }

    /// A CRD schema's `x-kubernetes-list-type: map` decides; without it a list is atomic.
    #[test]
    fn crd_schema_list_types_decide_the_merge() {
        let schema = json!({"properties": {"spec": {"properties": {
            "byKey": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["id"],
                "items": {"type": "object"}},
            "whole": {"type": "array", "items": {"type": "object"}}}}}});
        let shape = Shape::root(Some(&schema));
        let live = json!({"spec": {"byKey": [{"id": 1, "v": "x"}], "whole": [{"id": 1}]}});
        let applied = json!({"spec": {"byKey": [{"id": 2}], "whole": [{"id": 2}]}});
        let m = merge(&live, &applied, shape);
        assert_eq!(m["spec"]["byKey"], json!([{"id": 1, "v": "x"}, {"id": 2}]));
        assert_eq!(m["spec"]["whole"], json!([{"id": 2}]));
        let f = fields_of(&applied, shape);
        assert!(f.contains(&vec!["f:spec".to_string(), "f:whole".to_string()]));
    }

    /// Fields a manager stopped applying go, unless another manager owns something inside.
    #[test]
    fn removal_spares_fields_another_manager_owns_inside() {
        let mut obj = json!({"data": {"a": "1", "b": "2"}, "spec": {"containers": [{"name": "x", "image": "i", "env": []}]}});
        let remove = set(&[
            &["f:data", "f:a"],
            &["f:spec", "f:containers", "k:{\"name\":\"x\"}"],
            &["f:spec", "f:containers", "k:{\"name\":\"x\"}", "f:image"],
        ]);
        let keep = set(&[&["f:spec", "f:containers", "k:{\"name\":\"x\"}", "f:env"]]);
        remove_fields(&mut obj, &remove, &keep);
        assert_eq!(
            obj,
            json!({"data": {"b": "2"}, "spec": {"containers": [{"name": "x", "env": []}]}})
        );
    }

    /// An Update owns what it changed, not what it left alone; paths print as the API server's.
    #[test]
    fn update_owns_changed_fields_only() {
        let shape = Shape::root(None);
        let old = json!({"data": {"a": "1", "b": "2"}});
        let new = json!({"data": {"a": "1", "b": "3", "c": "4"}});
        let f = changed_fields(&old, &new, shape);
        assert_eq!(f, set(&[&["f:data", "f:b"], &["f:data", "f:c"]]));
        assert_eq!(
            path_string(&[
                "f:spec".into(),
                "f:containers".into(),
                "k:{\"name\":\"x\"}".into(),
                "f:image".into()
            ]),
            ".spec.containers[name=\"x\"].image"
        );
    }
}
