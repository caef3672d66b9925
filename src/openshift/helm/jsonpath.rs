//! The JSONPath subset image paths are written in (3. of the module documentation of `helm`):
//! `{.field.field[*].field[N]}`, applied to a parsed document.

use serde_json::Value;

/// A JSONPath in the subset `{.a.b[*].c[0]}`.
#[derive(Clone, Debug)]
pub(super) struct JsonPath(Vec<Step>);

#[derive(Clone, Debug)]
enum Step {
    Field(String),
    All,
    Index(usize),
}

impl JsonPath {
    pub(super) fn parse(text: &str) -> Option<JsonPath> {
        let inner = text.trim().strip_prefix('{')?.strip_suffix('}')?.trim();
        let mut steps = Vec::new();
        let mut rest = inner;
        while !rest.is_empty() {
            if let Some(r) = rest.strip_prefix('.') {
                let end = r.find(['.', '[']).unwrap_or(r.len());
                let name = &r[..end];
                if name.is_empty()
                    || !name
                        .chars()
                        .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
                {
                    return None;
                }
                steps.push(Step::Field(name.to_string()));
                rest = &r[end..];
            } else if let Some(r) = rest.strip_prefix('[') {
                let end = r.find(']')?;
                let idx = &r[..end];
                steps.push(if idx == "*" {
                    Step::All
                } else {
                    Step::Index(idx.parse().ok()?)
                });
                rest = &r[end + 1..];
            } else {
                return None;
            }
        }
        Some(JsonPath(steps))
    }

    /// The string values the path reaches (missing keys reach nothing).
    pub(super) fn strings(&self, root: &Value) -> Vec<String> {
        let mut cur = vec![root];
        for step in &self.0 {
            cur = cur
                .into_iter()
                .flat_map(|v| -> Vec<&Value> {
                    match step {
                        Step::Field(f) => v.get(f.as_str()).into_iter().collect(),
                        Step::All => v.as_array().map(|a| a.iter().collect()).unwrap_or_default(),
                        Step::Index(i) => v.get(*i).into_iter().collect(),
                    }
                })
                .collect();
        }
        cur.into_iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    }
}
