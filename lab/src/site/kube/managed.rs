//! `metadata.managedFields`: who owns which field, kept as the API server keeps it. An Apply
//! takes the fields of the applied configuration (conflicting with other managers unless
//! forced, dropping what it stopped applying); an Update (create, replace, merge patch) takes
//! what it changed from everyone else.

use super::ssa::{self, Fields, Shape};
use super::store::ApiError;
use serde_json::{json, Value};

/// One managedFields entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// The field manager.
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// `status` for the status subresource.
    pub subresource: Option<String>,
    /// The apiVersion the manager wrote with.
    pub api_version: String,
    /// When the entry last changed.
    pub time: String,
    /// The fields owned.
    pub fields: Fields,
}

impl Entry {
    fn same_owner(&self, other: &Manager<'_>, operation: &str) -> bool {
        self.manager == other.name
            && self.operation == operation
            && self.subresource.as_deref() == other.subresource
    }

    fn describe(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if let Some(sub) = &self.subresource {
            s.push_str(&format!(" with subresource {sub:?}"));
        }
        if self.operation == "Update" {
            s.push_str(&format!(" using {} at {}", self.api_version, self.time));
        }
        s
    }
}

/// Who writes, and through which subresource.
#[derive(Clone, Copy, Debug)]
pub struct Manager<'a> {
    /// The field manager.
    pub name: &'a str,
    /// `status`, or None for the main resource.
    pub subresource: Option<&'a str>,
    /// The apiVersion of the request.
    pub api_version: &'a str,
    /// The kind has the status subresource.
    pub status_subresource: bool,
}

impl Manager<'_> {
    /// Whether a path belongs to what this manager's writes may own.
    fn in_scope(&self, p: &ssa::Path) -> bool {
        let first = p.first().map(String::as_str);
        let second = p.get(1).map(String::as_str);
        let meta_owned = matches!(
            second,
            Some("f:labels" | "f:annotations" | "f:finalizers" | "f:ownerReferences")
        );
        match first {
            Some("f:apiVersion" | "f:kind") | None => false,
            Some("f:metadata") => self.subresource.is_none() && meta_owned,
            Some("f:status") if self.status_subresource => self.subresource == Some("status"),
            _ => self.subresource.is_none(),
        }
    }

    fn fields(&self, v: &Value, shape: Shape<'_>) -> Fields {
        ssa::fields_of(v, shape)
            .into_iter()
            .filter(|p| self.in_scope(p))
            .collect()
    }
}

/// The entries of an object.
pub fn read(obj: &Value) -> Vec<Entry> {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    obj["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| Entry {
            manager: s(&e["manager"]),
            operation: s(&e["operation"]),
            subresource: e["subresource"].as_str().map(String::from),
            api_version: s(&e["apiVersion"]),
            time: s(&e["time"]),
            fields: ssa::from_fields_v1(&e["fieldsV1"]),
        })
        .collect()
}

/// Writes the entries (those owning anything) into the object.
pub fn write(obj: &mut Value, entries: &[Entry]) {
    let list: Vec<Value> = entries
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(|e| {
            let mut v = json!({"manager": e.manager, "operation": e.operation,
                "apiVersion": e.api_version, "time": e.time, "fieldsType": "FieldsV1",
                "fieldsV1": ssa::to_fields_v1(&e.fields)});
            if let Some(sub) = &e.subresource {
                v["subresource"] = json!(sub);
            }
            v
        })
        .collect();
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if list.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(list));
        }
    }
}

fn set_own(entries: &mut Vec<Entry>, m: &Manager<'_>, operation: &str, fields: Fields, now: &str) {
    match entries.iter_mut().find(|e| e.same_owner(m, operation)) {
        Some(e) if e.fields == fields => {}
        Some(e) => {
            e.fields = fields;
            e.time = now.to_string();
            e.api_version = m.api_version.to_string();
        }
        None => entries.push(Entry {
            manager: m.name.to_string(),
            operation: operation.to_string(),
            subresource: m.subresource.map(String::from),
            api_version: m.api_version.to_string(),
            time: now.to_string(),
            fields,
        }),
    }
}

/// Server-side apply of `applied` (already cut to what this subresource may write) onto
/// `live` (Null when absent): the merged object with its managedFields, or 409 Conflict.
pub fn apply(
    live: &Value,
    applied: &Value,
    m: &Manager<'_>,
    force: bool,
    shape: Shape<'_>,
    now: &str,
) -> Result<Value, ApiError> {
    let mut entries = read(live);
    let mut merged = if live.is_null() {
        applied.clone()
    } else {
        ssa::merge(live, applied, shape)
    };
    let want = m.fields(applied, shape);
    let mut conflicts: Vec<(String, String)> = Vec::new();
    for e in entries.iter_mut().filter(|e| !e.same_owner(m, "Apply")) {
        let clash: Fields = e
            .fields
            .intersection(&want)
            .filter(|p| p.last().is_some_and(|s| s.starts_with("f:")))
            .filter(|p| ssa::value_at(live, p) != ssa::value_at(&merged, p))
            .cloned()
            .collect();
        if force {
            e.fields.retain(|p| !clash.contains(p));
        } else {
            conflicts.extend(clash.iter().map(|p| (e.describe(), ssa::path_string(p))));
        }
    }
    if !conflicts.is_empty() {
        return Err(conflict_error(&conflicts));
    }
    let before = entries
        .iter()
        .find(|e| e.same_owner(m, "Apply"))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let others: Fields = entries
        .iter()
        .filter(|e| !e.same_owner(m, "Apply"))
        .flat_map(|e| e.fields.iter().cloned())
        .collect();
    let dropped: Fields = before
        .difference(&want)
        .filter(|p| !others.contains(*p))
        .cloned()
        .collect();
    let keep: Fields = others.union(&want).cloned().collect();
    ssa::remove_fields(&mut merged, &dropped, &keep);
    set_own(&mut entries, m, "Apply", want, now);
    write(&mut merged, &entries);
    Ok(merged)
}

/// An Update (create, replace, patch) from `old` (Null when created) to `new`: the writer owns
/// what it changed; fields gone from the object leave every entry.
pub fn update(old: &Value, new: &mut Value, m: &Manager<'_>, shape: Shape<'_>, now: &str) {
    let mut entries = read(old);
    let changed: Fields = ssa::changed_fields(old, new, shape)
        .into_iter()
        .filter(|p| m.in_scope(p))
        .collect();
    let present = ssa::fields_of(new, shape);
    let exists = |p: &ssa::Path| present.contains(p) || present.iter().any(|q| q.starts_with(p));
    for e in entries.iter_mut() {
        e.fields.retain(|p| !changed.contains(p) && exists(p));
    }
    let mut own = entries
        .iter()
        .find(|e| e.same_owner(m, "Update"))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    own.retain(|p| exists(p));
    own.extend(changed);
    set_own(&mut entries, m, "Update", own, now);
    write(new, &entries);
}

/// 409 Conflict as the API server words it.
fn conflict_error(conflicts: &[(String, String)]) -> ApiError {
    let message = if let [(manager, path)] = conflicts {
        format!("Apply failed with 1 conflict: conflict with {manager}: {path}")
    } else {
        let mut managers: Vec<&String> = conflicts.iter().map(|(m, _)| m).collect();
        managers.sort();
        managers.dedup();
        let mut lines = Vec::new();
        for m in managers {
            lines.push(format!("conflicts with {m}:"));
            lines.extend(
                conflicts
                    .iter()
                    .filter(|(n, _)| n == m)
                    .map(|(_, p)| format!("- {p}")),
            );
        }
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            lines.join("\n")
        )
    };
    ApiError::new(409, "Conflict", message)
}
