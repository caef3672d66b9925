//! Strict YAML files with positions: every field path (`mirror.additionalImages[1].name`,
//! `hosts[2].interfaces[0].macAddress`) mapped to its line and column, serde-saphyr's errors
//! reshaped into one line naming the field and the fix, and [`Problem`], the one-line report
//! (`file:line:col: path: message`) every validator in bootstrap returns.
//!
//! The data types of each file stay plain serde structs; the positions live in a side
//! [`Index`] built from a generic pass over the same text.

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_saphyr::Spanned;
use std::collections::HashMap;
use std::fmt;

/// Longest user-supplied value quoted in a message; longer ones are cut.
const MAX_QUOTED_CHARS: usize = 120;

/// A document's `apiVersion` and `kind`, when written as scalars.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Header {
    /// `apiVersion`.
    pub(crate) api_version: Option<String>,
    /// `kind`.
    pub(crate) kind: Option<String>,
}

/// serde-saphyr options for reading: messages are reshaped into one line per problem, so no
/// rustc-style snippet.
pub(crate) fn options() -> serde_saphyr::Options {
    let mut options = serde_saphyr::Options::default();
    options.with_snippet = false;
    options
}

/// The position index of `text`, or `None` for an empty document. Duplicate keys pass here so
/// the strict pass can report them with their path.
pub(crate) fn index(text: &str) -> Result<Option<Index>, serde_saphyr::Error> {
    let mut tree_options = options();
    tree_options.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::PassThrough;
    match serde_saphyr::from_str_with_options::<Option<Node>>(text, tree_options) {
        Ok(Some(root)) => Ok(Some(Index::build(&root))),
        Ok(None) | Err(serde_saphyr::Error::Eof { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

impl Index {
    /// The top level's `apiVersion` and `kind` as written (scalars only), read from the index
    /// instead of a third parse of the text: large files (a 500-node agent-config) pay for
    /// every pass.
    pub(crate) fn header(&self) -> Header {
        let scalar = |path: &str| {
            self.get(path)
                .filter(|e| e.shape == Shape::Scalar)
                .and_then(|e| e.scalar.clone())
        };
        Header {
            api_version: scalar("apiVersion"),
            kind: scalar("kind"),
        }
    }

    /// Where the value at `path` is written.
    pub(crate) fn location(&self, path: &str) -> Option<Location> {
        self.get(path).and_then(|e| Location::from_yaml(e.value))
    }

    /// Where the key of the value at `path` is written (the value's place for list items).
    pub(crate) fn key_location(&self, path: &str) -> Option<Location> {
        self.get(path)
            .and_then(|e| Location::from_yaml(e.key.unwrap_or(e.value)))
    }
}

/// A 1-based line and column (counted in characters) in a YAML file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Location {
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1, in characters.
    pub column: usize,
}

impl Location {
    pub(crate) fn from_yaml(loc: serde_saphyr::Location) -> Option<Self> {
        if loc.line() == 0 {
            return None;
        }
        Some(Location {
            line: usize::try_from(loc.line()).unwrap_or(usize::MAX),
            column: usize::try_from(loc.column()).unwrap_or(usize::MAX),
        })
    }
}

impl fmt::Display for Location {
    /// `LINE:COLUMN`, ready to follow `file:`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// One thing wrong with a file: where, which field, what and how to fix it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Where in the file, when known.
    pub location: Option<Location>,
    /// The field path (`mirror.additionalImages[1].name`), or empty when `message` already says
    /// where (unknown or missing keys: "... in mirror") or the problem concerns the whole file.
    pub path: String,
    /// What is wrong and what to write instead.
    pub message: String,
}

impl Problem {
    /// A problem at `location` about `path`.
    pub fn new(
        location: Option<Location>,
        path: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Problem {
            location,
            path: path.into(),
            message: message.into(),
        }
    }

    /// Renders `ORIGIN[:LINE:COL]: [PATH: ]MESSAGE`.
    pub fn render(&self, origin: &str, out: &mut String) {
        out.push_str(origin);
        if let Some(loc) = self.location {
            out.push_str(&format!(":{loc}"));
        }
        out.push_str(": ");
        if !self.path.is_empty() {
            out.push_str(&self.path);
            out.push_str(": ");
        }
        out.push_str(&self.message);
    }
}

/// Every problem rendered, one line each.
pub fn render_problems(origin: &str, problems: &[Problem]) -> String {
    let mut out = String::new();
    for (i, p) in problems.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        p.render(origin, &mut out);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The location index: a generic pass over the YAML, keeping each node's position by path
// ---------------------------------------------------------------------------------------------

/// A YAML node with its position (serde-saphyr's `Spanned` gives the position).
pub(crate) struct Node {
    at: serde_saphyr::Location,
    kind: NodeKind,
}

pub(crate) enum NodeKind {
    Scalar(String),
    Null,
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let spanned = Spanned::<NodeKind>::deserialize(d)?;
        Ok(Node {
            at: spanned.referenced,
            kind: spanned.value,
        })
    }
}

impl<'de> Deserialize<'de> for NodeKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = NodeKind;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any YAML node")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<NodeKind, E> {
                Ok(NodeKind::Scalar(v.to_string()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<NodeKind, E> {
                Ok(NodeKind::Scalar(v))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<NodeKind, E> {
                Ok(NodeKind::Scalar(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<NodeKind, E> {
                Ok(NodeKind::Scalar(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<NodeKind, E> {
                Ok(NodeKind::Scalar(v.to_string()))
            }
            fn visit_i128<E: de::Error>(self, v: i128) -> Result<NodeKind, E> {
                Ok(NodeKind::Scalar(v.to_string()))
            }
            fn visit_u128<E: de::Error>(self, v: u128) -> Result<NodeKind, E> {
                Ok(NodeKind::Scalar(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<NodeKind, E> {
                Ok(NodeKind::Scalar(v.to_string()))
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<NodeKind, E> {
                Ok(NodeKind::Scalar(String::from_utf8_lossy(v).into_owned()))
            }
            fn visit_unit<E: de::Error>(self) -> Result<NodeKind, E> {
                Ok(NodeKind::Null)
            }
            fn visit_none<E: de::Error>(self) -> Result<NodeKind, E> {
                Ok(NodeKind::Null)
            }
            fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<NodeKind, D2::Error> {
                NodeKind::deserialize(d)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<NodeKind, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = a.next_element::<Node>()? {
                    items.push(item);
                }
                Ok(NodeKind::Seq(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<NodeKind, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = a.next_entry::<Node, Node>()? {
                    entries.push(entry);
                }
                Ok(NodeKind::Map(entries))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    Scalar,
    Null,
    Seq,
    Map,
}

/// One node of the document: its path, the position of its key (mapping values) and its own.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub(crate) path: String,
    depth: usize,
    pub(crate) key: Option<serde_saphyr::Location>,
    pub(crate) value: serde_saphyr::Location,
    pub(crate) shape: Shape,
    pub(crate) scalar: Option<String>,
}

impl Entry {
    /// How the node reads in "found ..." messages.
    pub(crate) fn found(&self) -> String {
        match self.shape {
            Shape::Scalar => quote(self.scalar.as_deref().unwrap_or("")),
            Shape::Null => "nothing (null)".into(),
            Shape::Seq => "a list".into(),
            Shape::Map => "a mapping".into(),
        }
    }

    pub(crate) fn parent_path(&self) -> &str {
        parent_path(&self.path)
    }
}

fn parent_path(path: &str) -> &str {
    let cut = path.rfind(['.', '[']).unwrap_or(0);
    &path[..cut]
}

fn same_span(a: serde_saphyr::Location, b: serde_saphyr::Location) -> bool {
    a.line() == b.line()
        && a.column() == b.column()
        && a.span().offset() == b.span().offset()
        && a.span().len() == b.span().len()
}

fn same_point(a: serde_saphyr::Location, b: serde_saphyr::Location) -> bool {
    a.line() == b.line() && a.column() == b.column()
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Index {
    entries: Vec<Entry>,
    /// Path to the first entry with that path (duplicated keys share a path).
    by_path: HashMap<String, usize>,
}

/// What an error's position was matched to.
enum Hit<'a> {
    /// The key of this entry (unknown, missing or duplicate keys).
    Key(&'a Entry),
    /// The node itself (wrong type or value).
    Value(&'a Entry),
}

impl Index {
    pub(crate) fn build(root: &Node) -> Self {
        let mut index = Index::default();
        index.add(root, String::new(), 0, None);
        index
    }

    fn add(
        &mut self,
        node: &Node,
        path: String,
        depth: usize,
        key: Option<serde_saphyr::Location>,
    ) {
        let (shape, scalar) = match &node.kind {
            NodeKind::Scalar(s) => (Shape::Scalar, Some(s.clone())),
            NodeKind::Null => (Shape::Null, None),
            NodeKind::Seq(_) => (Shape::Seq, None),
            NodeKind::Map(_) => (Shape::Map, None),
        };
        self.by_path
            .entry(path.clone())
            .or_insert(self.entries.len());
        self.entries.push(Entry {
            path: path.clone(),
            depth,
            key,
            value: node.at,
            shape,
            scalar,
        });
        match &node.kind {
            NodeKind::Seq(items) => {
                for (i, item) in items.iter().enumerate() {
                    self.add(item, format!("{path}[{i}]"), depth + 1, None);
                }
            }
            NodeKind::Map(entries) => {
                for (k, v) in entries {
                    let name = match &k.kind {
                        NodeKind::Scalar(s) => s.clone(),
                        NodeKind::Null => "~".into(),
                        _ => "?".into(),
                    };
                    let child = if path.is_empty() {
                        name
                    } else {
                        format!("{path}.{name}")
                    };
                    self.add(v, child, depth + 1, Some(k.at));
                }
            }
            _ => {}
        }
    }

    /// The first entry at `path` (the first of duplicated keys).
    pub(crate) fn get(&self, path: &str) -> Option<&Entry> {
        self.by_path.get(path).map(|&i| &self.entries[i])
    }

    /// The key written at `at`: exact span first, then same line and column.
    pub(crate) fn key_at(&self, at: serde_saphyr::Location) -> Option<&Entry> {
        let exact = self
            .entries
            .iter()
            .find(|e| e.key.is_some_and(|k| same_span(k, at)));
        exact.or_else(|| {
            self.entries
                .iter()
                .find(|e| e.key.is_some_and(|k| same_point(k, at)))
        })
    }

    /// The node written at `at`. A block list starts where its first item does, so several
    /// nodes can share a position: prefer the one whose shape is not `expected` (the one that
    /// is wrong), then the deepest.
    pub(crate) fn value_at(
        &self,
        at: serde_saphyr::Location,
        expected: Option<Shape>,
    ) -> Option<&Entry> {
        let pick = |same: fn(serde_saphyr::Location, serde_saphyr::Location) -> bool| {
            let candidates: Vec<&Entry> =
                self.entries.iter().filter(|e| same(e.value, at)).collect();
            let wrong: Vec<&Entry> = candidates
                .iter()
                .copied()
                .filter(|e| Some(e.shape) != expected)
                .collect();
            let pool = if wrong.is_empty() { candidates } else { wrong };
            pool.into_iter().max_by_key(|e| e.depth)
        };
        pick(same_span).or_else(|| pick(same_point))
    }

    fn find(
        &self,
        at: serde_saphyr::Location,
        want_key: bool,
        expected: Option<Shape>,
    ) -> Option<Hit<'_>> {
        if want_key {
            self.key_at(at)
                .map(Hit::Key)
                .or_else(|| self.value_at(at, expected).map(Hit::Value))
        } else {
            self.value_at(at, expected)
                .map(Hit::Value)
                .or_else(|| self.key_at(at).map(Hit::Key))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// serde-saphyr errors reshaped into one clear line
// ---------------------------------------------------------------------------------------------

/// "in mirror.operators[0]" / "at the top level".
pub(crate) fn where_in(path: &str) -> String {
    if path.is_empty() {
        "at the top level".into()
    } else {
        format!("in {path}")
    }
}

/// A serde-saphyr error as one clear problem, placed and named through `index`. `document`
/// names what the file should hold ("ImageSetConfiguration"); `hint` explains keys that are
/// not misspellings but belong elsewhere, given the key and its parent path.
pub(crate) fn problem(
    err: &serde_saphyr::Error,
    index: &Index,
    document: &str,
    hint: fn(&str, &str) -> Option<&'static str>,
) -> Problem {
    use serde_saphyr::Error as E;
    let mut inner = err.without_snippet();
    while let E::AliasError { error, .. } = inner {
        inner = error.without_snippet();
    }
    let at = inner
        .location()
        .or_else(|| err.location())
        .unwrap_or(serde_saphyr::Location::UNKNOWN);
    let mut location = Location::from_yaml(at);
    let mut path = String::new();
    let message = match inner {
        E::SerdeUnknownField {
            field, expected, ..
        } => {
            let parent = match index.find(at, true, None) {
                Some(Hit::Key(e)) => e.parent_path().to_string(),
                Some(Hit::Value(e)) => e.path.clone(),
                None => String::new(),
            };
            unknown_field_message(field, expected, &parent, hint)
        }
        E::SerdeMissingField { field, .. } => {
            let mapping = match index.find(at, true, Some(Shape::Map)) {
                Some(Hit::Key(e)) => index.get(e.parent_path()),
                Some(Hit::Value(e)) => Some(e),
                None => None,
            };
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
            let parent = match index.find(at, true, None) {
                Some(Hit::Key(e)) => e.parent_path().to_string(),
                _ => String::new(),
            };
            let first = key
                .as_deref()
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
        E::Unexpected { expected, .. } => {
            let (want, shape) = match *expected {
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
            };
            let hit = index.value_at(at, shape);
            if let Some(e) = hit {
                path = e.path.clone();
                format!("expected {want}, found {}", e.found())
            } else {
                format!("expected {want}")
            }
        }
        E::InvalidScalar { ty, .. } => {
            let want = match *ty {
                "bool" | "boolean" => "true or false",
                "i8" | "i16" | "i32" | "i64" | "i128" | "u8" | "u16" | "u32" | "u64" | "u128"
                | "isize" | "usize" => "a whole number",
                "f32" | "f64" => "a number",
                other => other,
            };
            match index.value_at(at, None) {
                Some(e) => {
                    path = e.path.clone();
                    format!("expected {want}, found {}", e.found())
                }
                None => format!("expected {want}"),
            }
        }
        E::NullIntoString { .. } => {
            if let Some(e) = index.value_at(at, None) {
                path = e.path.clone();
            }
            "a value is required here, found nothing (null)".into()
        }
        E::SerdeUnknownVariant {
            variant, expected, ..
        } => {
            if let Some(e) = index.value_at(at, None) {
                path = e.path.clone();
            }
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
            if let Some(e) = index.value_at(at, None) {
                path = e.path.clone();
            }
            format!("expected {expected}, found {unexpected}")
        }
        E::MultipleDocuments { .. } => {
            format!("holds more than one YAML document (a `---` separator); put one {document} in the file")
        }
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
    };
    Problem::new(location, path, sanitize(&message))
}

fn unknown_field_message(
    field: &str,
    expected: &[&'static str],
    parent: &str,
    hint: fn(&str, &str) -> Option<&'static str>,
) -> String {
    let mut message = format!("unknown field {} {}", quote(field), where_in(parent));
    if let Some(hint) = hint(field, parent) {
        message.push_str(&format!(": {hint}"));
    } else if let Some(near) = did_you_mean(field, expected) {
        message.push_str(&format!(" (did you mean '{near}'?)"));
    }
    if !expected.is_empty() {
        message.push_str(&format!("; expected one of {}", expected.join(", ")));
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

/// A user-supplied value for a message: single-quoted, control characters escaped (no terminal
/// escapes from a config file), cut to a readable length.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::from("'");
    for (n, c) in s.chars().enumerate() {
        if n == MAX_QUOTED_CHARS {
            out.push_str("...");
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    out
}

/// Control characters escaped in a whole message (serde-saphyr messages quote the input).
pub(crate) fn sanitize(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}
