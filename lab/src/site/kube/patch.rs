//! The patch formats besides apply: JSON merge patch (RFC 7386) and JSON patch (RFC 6902), and
//! label selectors (`a=b,c!=d,e in (f,g),!h`).

use super::store::ApiError;
use serde_json::Value;

/// RFC 7386: maps merge, `null` removes, anything else replaces.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    let t = target.as_object_mut().expect("made an object");
    for (k, v) in p {
        if v.is_null() {
            t.remove(k);
        } else {
            merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

fn bad(msg: String) -> ApiError {
    ApiError::new(422, "Invalid", msg)
}

/// RFC 6902 (add, remove, replace, test, copy, move).
pub fn json_patch(target: &mut Value, ops: &Value) -> Result<(), ApiError> {
    let ops = ops.as_array().ok_or_else(|| {
        ApiError::new(
            400,
            "BadRequest",
            "the JSON patch is not a list of operations".into(),
        )
    })?;
    for op in ops {
        let path = op["path"].as_str().unwrap_or_default();
        match op["op"].as_str().unwrap_or_default() {
            "add" => add(target, path, op["value"].clone())?,
            "remove" => {
                remove(target, path)?;
            }
            "replace" => {
                remove(target, path)?;
                add(target, path, op["value"].clone())?;
            }
            "test" if target.pointer(path) != Some(&op["value"]) => {
                return Err(bad(format!("testing value {path} failed")));
            }
            "test" => {}
            "copy" | "move" => {
                let from = op["from"].as_str().unwrap_or_default();
                let v = if op["op"] == "move" {
                    remove(target, from)?
                } else {
                    target
                        .pointer(from)
                        .cloned()
                        .ok_or_else(|| bad(format!("doc is missing path: \"{from}\"")))?
                };
                add(target, path, v)?;
            }
            other => {
                return Err(ApiError::new(
                    400,
                    "BadRequest",
                    format!("unexpected JSON patch operation \"{other}\""),
                ))
            }
        }
    }
    Ok(())
}

fn split(path: &str) -> Result<(&str, String), ApiError> {
    let (parent, last) = path
        .rsplit_once('/')
        .ok_or_else(|| bad(format!("invalid JSON patch path \"{path}\"")))?;
    Ok((parent, last.replace("~1", "/").replace("~0", "~")))
}

fn add(target: &mut Value, path: &str, v: Value) -> Result<(), ApiError> {
    let (parent, last) = split(path)?;
    match target.pointer_mut(parent) {
        Some(Value::Object(m)) => {
            m.insert(last, v);
        }
        Some(Value::Array(a)) if last == "-" => a.push(v),
        Some(Value::Array(a)) => {
            let i: usize = last
                .parse()
                .map_err(|_| bad(format!("invalid index in \"{path}\"")))?;
            if i > a.len() {
                return Err(bad(format!(
                    "add operation does not apply: doc is missing path: \"{path}\""
                )));
            }
            a.insert(i, v);
        }
        _ => {
            return Err(bad(format!(
                "add operation does not apply: doc is missing path: \"{path}\""
            )))
        }
    }
    Ok(())
}

fn remove(target: &mut Value, path: &str) -> Result<Value, ApiError> {
    let (parent, last) = split(path)?;
    let missing = || {
        bad(format!(
            "remove operation does not apply: doc is missing path: \"{path}\""
        ))
    };
    match target.pointer_mut(parent) {
        Some(Value::Object(m)) => m.remove(&last).ok_or_else(missing),
        Some(Value::Array(a)) => {
            let i: usize = last.parse().map_err(|_| missing())?;
            (i < a.len()).then(|| a.remove(i)).ok_or_else(missing)
        }
        _ => Err(missing()),
    }
}

/// Whether an object's labels match a label selector.
pub fn selector_matches(selector: &str, labels: &Value) -> Result<bool, ApiError> {
    for req in split_requirements(selector) {
        let req = req.trim();
        if req.is_empty() {
            continue;
        }
        if !requirement_matches(req, labels)? {
            return Ok(false);
        }
    }
    Ok(true)
}

fn split_requirements(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn requirement_matches(req: &str, labels: &Value) -> Result<bool, ApiError> {
    let get = |k: &str| labels.get(k.trim()).and_then(Value::as_str);
    if let Some(k) = req.strip_prefix('!') {
        return Ok(get(k).is_none());
    }
    for (op, negate) in [(" notin ", true), (" in ", false)] {
        if let Some((k, set)) = req.split_once(op) {
            let set = set.trim().trim_start_matches('(').trim_end_matches(')');
            let inside = get(k).is_some_and(|v| set.split(',').any(|s| s.trim() == v));
            return Ok(inside != negate);
        }
    }
    if let Some((k, v)) = req.split_once("!=") {
        return Ok(get(k) != Some(v.trim()));
    }
    if let Some((k, v)) = req.split_once("==").or_else(|| req.split_once('=')) {
        return Ok(get(k) == Some(v.trim()));
    }
    if req
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
    {
        return Ok(get(req).is_some());
    }
    Err(ApiError::new(
        400,
        "BadRequest",
        format!("unable to parse requirement: {req:?}"),
    ))
}
