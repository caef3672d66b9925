//! serde-saphyr's errors reshaped into one clear line: placed through the position index on
//! the key or value involved, named by its field path, and saying what to write instead
//! ("unknown field 'additionalImage' in mirror (did you mean 'additionalImages'?)").

use super::index::{Entry, Hit, Index, Shape};
use super::load::Schema;
use super::{quote, sanitize, Location, Problem};
use serde_saphyr::Error as E;

/// "in mirror.operators[0]" / "at the top level".
pub(crate) fn where_in(path: &str) -> String {
    if path.is_empty() {
        "at the top level".into()
    } else {
        format!("in {path}")
    }
}

/// The innermost error (through aliases) and where it happened.
pub(crate) fn innermost(
    err: &serde_saphyr::Error,
) -> (&serde_saphyr::Error, serde_saphyr::Location) {
    let mut inner = err.without_snippet();
    while let E::AliasError { error, .. } = inner {
        inner = error.without_snippet();
    }
    let at = inner
        .location()
        .or_else(|| err.location())
        .unwrap_or(serde_saphyr::Location::UNKNOWN);
    (inner, at)
}

/// A serde-saphyr error as one clear problem, placed and named through `index`, worded for the
/// document `schema` describes (its name, its hints for keys that belong elsewhere, what the
/// tool reading it would do with an unknown key).
pub(crate) fn problem(err: &serde_saphyr::Error, index: &Index, schema: &Schema) -> Problem {
    let (inner, at) = innermost(err);
    let mut location = Location::from_yaml(at);
    let mut path = String::new();
    let mut value_path = |shape: Option<Shape>| {
        if let Some(e) = index.value_at(at, shape) {
            path = e.path.clone();
            Some(e.found())
        } else {
            None
        }
    };
    let message = match inner {
        E::SerdeUnknownField {
            field, expected, ..
        } => unknown_field_message(field, expected, &unknown_field_parent(index, at), schema),
        E::SerdeMissingField { field, .. } => {
            let mapping = missing_field_mapping(index, at);
            if let Some(m) = mapping {
                location = Location::from_yaml(m.value).or(location);
            }
            let parent = mapping.map(|m| m.path.as_str()).unwrap_or("");
            format!(
                "missing required field '{field}' {}; add `{field}:` there",
                where_in(parent)
            )
        }
        E::DuplicateMappingKey { key, .. } => {
            duplicate_key_message(index, at, key.as_deref(), location)
        }
        E::Unexpected { expected, .. } => {
            let (want, shape) = expected_shape(expected);
            match value_path(shape) {
                Some(found) => format!("expected {want}, found {found}"),
                None => format!("expected {want}"),
            }
        }
        E::InvalidScalar { ty, .. } => {
            let want = scalar_wanted(ty);
            match value_path(None) {
                Some(found) => format!("expected {want}, found {found}"),
                None => format!("expected {want}"),
            }
        }
        E::NullIntoString { .. } => {
            value_path(None);
            "a value is required here, found nothing (null)".into()
        }
        E::SerdeUnknownVariant {
            variant, expected, ..
        } => {
            value_path(None);
            format!(
                "unknown value {}; expected one of {}",
                quote(variant),
                expected.join(", ")
            )
        }
        E::SerdeInvalidType {
            unexpected,
            expected,
            ..
        }
        | E::SerdeInvalidValue {
            unexpected,
            expected,
            ..
        } => {
            value_path(None);
            format!("expected {expected}, found {unexpected}")
        }
        other => other_message(other, schema),
    };
    Problem::new(location, path, sanitize(&message))
}

/// The path of the mapping an unknown key is written in.
fn unknown_field_parent(index: &Index, at: serde_saphyr::Location) -> String {
    match index.find(at, true, None) {
        Some(Hit::Key(e)) => e.parent_path().to_string(),
        Some(Hit::Value(e)) => e.path.clone(),
        None => String::new(),
    }
}

/// The mapping a missing field belongs in: the one whose key or body the error points at.
fn missing_field_mapping(index: &Index, at: serde_saphyr::Location) -> Option<&Entry> {
    match index.find(at, true, Some(Shape::Map)) {
        Some(Hit::Key(e)) => index.get(e.parent_path()),
        Some(Hit::Value(e)) => Some(e),
        None => None,
    }
}

fn duplicate_key_message(
    index: &Index,
    at: serde_saphyr::Location,
    key: Option<&str>,
    location: Option<Location>,
) -> String {
    let parent = match index.find(at, true, None) {
        Some(Hit::Key(e)) => e.parent_path().to_string(),
        _ => String::new(),
    };
    let first = key
        .and_then(|k| {
            let p = if parent.is_empty() {
                k.to_string()
            } else {
                format!("{parent}.{k}")
            };
            index
                .get(&p)
                .and_then(|e| Location::from_yaml(e.key.unwrap_or(e.value)))
        })
        .filter(|l| Some(*l) != location)
        .map(|l| format!(" (first at line {})", l.line))
        .unwrap_or_default();
    match key {
        Some(k) => format!(
            "duplicate key {} {}{first}; a key may appear only once: merge or remove one",
            quote(k),
            where_in(&parent)
        ),
        None => format!(
            "duplicate key {}; a key may appear only once",
            where_in(&parent)
        ),
    }
}

/// serde-saphyr's "expected ..." in words, with the shape the value should have had.
fn expected_shape(expected: &str) -> (String, Option<Shape>) {
    match expected {
        "mapping start" => (
            "a mapping (key: value entries)".to_string(),
            Some(Shape::Map),
        ),
        "sequence start" => (
            "a list (entries starting with '- ')".to_string(),
            Some(Shape::Seq),
        ),
        "string scalar" => ("a single value".to_string(), Some(Shape::Scalar)),
        other => (other.to_string(), None),
    }
}

/// A Rust scalar type in words.
fn scalar_wanted(ty: &str) -> &str {
    match ty {
        "bool" | "boolean" => "true or false",
        "i8" | "i16" | "i32" | "i64" | "i128" | "u8" | "u16" | "u32" | "u64" | "u128" | "isize"
        | "usize" => "a whole number",
        "f32" | "f64" => "a number",
        other => other,
    }
}

/// Errors about the document as a whole.
fn other_message(err: &serde_saphyr::Error, schema: &Schema) -> String {
    match err {
        E::MultipleDocuments { .. } => format!(
            "holds more than one YAML document (a `---` separator); put one {} in the file",
            schema.name
        ),
        E::Eof { .. } => "unexpected end of file".into(),
        E::UnknownAnchor { .. } => {
            "this alias (*name) refers to no anchor (&name) defined before it".into()
        }
        other => {
            use serde_saphyr::MessageFormatter;
            serde_saphyr::UserMessageFormatter
                .format_message(other)
                .into_owned()
        }
    }
}

fn unknown_field_message(
    field: &str,
    expected: &[&'static str],
    parent: &str,
    schema: &Schema,
) -> String {
    let mut message = format!("unknown field {} {}", quote(field), where_in(parent));
    if let Some(hint) = (schema.hint)(field, parent) {
        message.push_str(&format!(": {hint}"));
    } else if let Some(near) = did_you_mean(field, expected) {
        message.push_str(&format!(" (did you mean '{near}'?)"));
    }
    if !expected.is_empty() {
        message.push_str(&format!("; expected one of {}", expected.join(", ")));
    }
    if let Some(note) = schema.unknown_note {
        message.push_str(&format!(" ({note})"));
    }
    message
}

/// The expected key closest to `field`: same letters ignoring case, or at most two edits away.
pub(crate) fn did_you_mean(field: &str, expected: &[&'static str]) -> Option<&'static str> {
    let lower = field.to_ascii_lowercase();
    if let Some(same) = expected.iter().find(|e| e.to_ascii_lowercase() == lower) {
        return Some(same);
    }
    expected
        .iter()
        .map(|e| (edit_distance(&lower, &e.to_ascii_lowercase()), *e))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, e)| e)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}
