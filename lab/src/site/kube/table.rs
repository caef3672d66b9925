//! Server-side printing (`as=Table`), which `kubectl get` asks for: a CRD kind's
//! additionalPrinterColumns read with their (simple) JSONPath, NAME and AGE otherwise; rows
//! carry the object's metadata so `-A` can show the namespace.

use super::kinds::KindInfo;
use serde_json::{json, Value};

/// The Table of these objects.
pub fn table(kind: &KindInfo, objects: &[Value], revision: u64) -> Value {
    if let Some(t) = super::printers::table(kind, objects, revision) {
        return t;
    }
    let name_col = json!({"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace.", "priority": 0});
    let mut columns = vec![name_col];
    let printer = printer_columns(kind);
    if printer.is_empty() {
        columns.push(json!({"name": "Age", "type": "date", "format": "", "description": "CreationTimestamp", "priority": 0}));
    } else {
        for c in &printer {
            columns.push(json!({"name": c["name"], "type": c["type"], "format": c.get("format").cloned().unwrap_or(json!("")),
                "description": c.get("description").cloned().unwrap_or(json!("")), "priority": c.get("priority").cloned().unwrap_or(json!(0))}));
        }
    }
    let rows: Vec<Value> = objects.iter().map(|o| row(kind, o)).collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": revision.to_string()},
        "columnDefinitions": columns, "rows": rows})
}

fn row(kind: &KindInfo, obj: &Value) -> Value {
    let mut cells = vec![obj["metadata"]["name"].clone()];
    let printer = printer_columns(kind);
    if printer.is_empty() {
        cells.push(json!(age(obj["metadata"]["creationTimestamp"].as_str())));
    } else {
        for c in &printer {
            let found = json_path(obj, c["jsonPath"].as_str().unwrap_or_default());
            let cell = match (c["type"].as_str(), found.first()) {
                (_, None) => Value::Null,
                (Some("date"), Some(v)) => json!(age(v.as_str())),
                (Some("string"), _) => json!(found
                    .iter()
                    .map(|v| scalar(v))
                    .collect::<Vec<_>>()
                    .join(",")),
                (_, Some(v)) => (*v).clone(),
            };
            cells.push(cell);
        }
    }
    let meta = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]});
    json!({"cells": cells, "object": meta})
}

/// A CRD kind's additionalPrinterColumns; for the built-in kinds whose columns the API server
/// prints beyond NAME and AGE and that a JSONPath can express, those (Namespace: STATUS).
fn printer_columns(kind: &KindInfo) -> Vec<Value> {
    if !kind.printer_columns.is_empty() {
        return kind.printer_columns.clone();
    }
    match (kind.group.as_str(), kind.kind.as_str()) {
        ("", "Namespace") => vec![
            json!({"name": "Status", "type": "string", "description": "The status of the namespace", "jsonPath": ".status.phase"}),
            json!({"name": "Age", "type": "date", "description": "CreationTimestamp", "jsonPath": ".metadata.creationTimestamp"}),
        ],
        _ => Vec::new(),
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The values a simple JSONPath (`.a.b`, `.a[0].b`, `.a[?(@.type=="X")].status`) selects.
pub fn json_path<'v>(obj: &'v Value, path: &str) -> Vec<&'v Value> {
    let mut current = vec![obj];
    for step in split(path) {
        let mut next = Vec::new();
        for v in current {
            if let Some(filter) = step
                .strip_prefix("[?(@.")
                .and_then(|f| f.strip_suffix(")]"))
            {
                let (field, want) = filter.split_once("==").unwrap_or((filter, ""));
                let want = want.trim_matches(|c| c == '"' || c == '\'');
                next.extend(
                    v.as_array()
                        .into_iter()
                        .flatten()
                        .filter(|i| i[field].as_str() == Some(want)),
                );
            } else if let Some(i) = step.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
                next.extend(i.parse::<usize>().ok().and_then(|i| v.get(i)));
            } else {
                next.extend(v.get(step.as_str()).filter(|v| !v.is_null()));
            }
        }
        current = next;
    }
    current
}

fn split(path: &str) -> Vec<String> {
    let (mut out, mut cur, mut depth) = (Vec::new(), String::new(), 0);
    for c in path.chars() {
        match c {
            '.' if depth == 0 => out.push(std::mem::take(&mut cur)),
            '[' if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                cur.push(c);
                depth += 1;
            }
            '[' => {
                cur.push(c);
                depth += 1;
            }
            ']' => {
                cur.push(c);
                depth -= 1;
                if depth == 0 {
                    out.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    out.push(cur);
    out.retain(|s| !s.is_empty());
    out
}

/// A creation time as kubectl's AGE column prints it (`5s`, `3m`, `2h`, `4d`).
pub(crate) fn age(ts: Option<&str>) -> String {
    let Some(t) = ts.and_then(parse_utc) else {
        return "<unknown>".into();
    };
    let secs = (time::OffsetDateTime::now_utc() - t).whole_seconds().max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 3 * 3600 => format!("{}m", s / 60),
        s if s < 48 * 3600 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ`, as the store writes times.
fn parse_utc(ts: &str) -> Option<time::OffsetDateTime> {
    let n = |r: std::ops::Range<usize>| ts.get(r).and_then(|s| s.parse::<u32>().ok());
    let month = time::Month::try_from(n(5..7)? as u8).ok()?;
    let date = time::Date::from_calendar_date(n(0..4)? as i32, month, n(8..10)? as u8).ok()?;
    let t = time::Time::from_hms(n(11..13)? as u8, n(14..16)? as u8, n(17..19)? as u8).ok()?;
    Some(time::PrimitiveDateTime::new(date, t).assume_utc())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The printer columns' paths as CRDs write them.
    #[test]
    fn simple_json_paths_select_values() {
        let o = json!({"status": {"sync": {"status": "Synced"}, "ingress": [{"host": "h",
            "conditions": [{"type": "Admitted", "status": "True"}, {"type": "Other", "status": "False"}]}]}});
        assert_eq!(json_path(&o, ".status.sync.status"), vec![&json!("Synced")]);
        assert_eq!(json_path(&o, ".status.ingress[0].host"), vec![&json!("h")]);
        assert_eq!(
            json_path(
                &o,
                ".status.ingress[0].conditions[?(@.type==\"Admitted\")].status"
            ),
            vec![&json!("True")]
        );
        assert!(json_path(&o, ".status.health.status").is_empty());
    }
}
