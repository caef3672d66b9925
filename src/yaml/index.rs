//! The position index: a generic pass over a YAML document that keeps, for every field path
//! (`mirror.additionalImages[1].name`, `hosts[2].interfaces[0].macAddress`), where its key and
//! its value are written, so a problem found on the typed value can name its line and column.

use super::{quote, Location};
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_saphyr::Spanned;
use std::collections::HashMap;
use std::fmt;

/// A document's `apiVersion` and `kind`, when written as scalars.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Header {
    /// `apiVersion`.
    pub api_version: Option<String>,
    /// `kind`.
    pub kind: Option<String>,
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
        Ok(Some(root)) => {
            let mut index = Index::build(&root);
            index.mark_plain(text);
            Ok(Some(index))
        }
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

    /// Where `path` is written, else its nearest written parent (`hosts[1].interfaces` absent:
    /// `hosts[1]`), else the top of the file. A scalar is placed at its value; a mapping or list
    /// at its key (`baremetal:`), where a reader looks for it, rather than at its first entry.
    /// An empty index (a file read without positions) places everything nowhere.
    pub(crate) fn locate(&self, path: &str) -> Option<Location> {
        if self.entries.is_empty() {
            return None;
        }
        let mut p = path;
        loop {
            let found = match self.get(p).map(|e| e.shape) {
                Some(Shape::Map | Shape::Seq) => self.key_location(p),
                Some(_) => self.location(p),
                None => None,
            };
            if let Some(loc) = found {
                return Some(loc);
            }
            if p.is_empty() {
                return Some(Location::START);
            }
            p = parent_path(p);
        }
    }

    /// True when the index holds no position (a file read without them, or an empty one).
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
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
    /// A plain (unquoted, untagged, not a block) scalar's text as written: `no` stays `no`
    /// here where `scalar` holds what serde-saphyr made of it (`false`).
    pub(crate) plain: Option<String>,
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

/// The plain scalar written at `at`, or `None` when it is quoted, a block scalar (whose place
/// is its first content line), tagged (`!!str no` is a string to every reader) or empty.
fn plain_text(lines: &[&str], at: serde_saphyr::Location) -> Option<String> {
    let row = usize::try_from(at.line()).ok()?.checked_sub(1)?;
    let line = lines.get(row)?;
    let line = line.strip_suffix('\r').unwrap_or(line);
    let column = usize::try_from(at.column()).ok()?.checked_sub(1)?;
    let start = line.char_indices().nth(column).map(|(i, _)| i)?;
    let (before, rest) = line.split_at(start);
    if rest.starts_with(['"', '\'', '|', '>', '!', '*']) {
        return None;
    }
    // The token before the value, on its line or the last one above with one.
    let above = lines[..row].iter().rev().map(|l| match l.find(" #") {
        Some(i) => &l[..i],
        None => l,
    });
    let token = std::iter::once(before)
        .chain(above)
        .find_map(|l| l.split_whitespace().last());
    if token.is_some_and(|t| t.starts_with(['!', '|', '>'])) {
        return None;
    }
    // The span counts characters; a plain scalar folded over lines is cut at its first line,
    // which no keyword or number continues.
    let len = usize::try_from(at.span().len()).unwrap_or(usize::MAX);
    let raw: String = rest.chars().take(len).collect();
    let raw = raw.trim_end();
    (!raw.is_empty()).then(|| raw.to_string())
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
pub(crate) enum Hit<'a> {
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
            plain: None,
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

    /// Every node, in document order.
    pub(crate) fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Keeps the text of each plain scalar (and plain null) as written in `text`: the value's
    /// place starts at its first character, which for a quoted scalar is the quote.
    fn mark_plain(&mut self, text: &str) {
        let lines: Vec<&str> = text.split('\n').collect();
        for e in &mut self.entries {
            if !matches!(e.shape, Shape::Scalar | Shape::Null) {
                continue;
            }
            e.plain = plain_text(&lines, e.value);
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

    pub(crate) fn find(
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The index keeps a plain scalar's text as written (`no`, where serde-saphyr's value is
    /// `false`), and nothing for a quoted, tagged or block scalar: only the plain ones are read
    /// as booleans or numbers by the installer.
    #[test]
    fn plain_scalars_keep_their_text_and_quoted_ones_none() {
        let text = "a: no\nb: \"no\"\nc: 'on'\nd: !!str off\ne: |\n  y\ni: >-\n\n  no\nf: [0123, \"1e3\"]\ng: ~\nh: &x Yes\nk: 0x1F  # comment\n";
        let index = index(text).unwrap().unwrap();
        let plain = |p: &str| index.get(p).unwrap().plain.clone();
        assert_eq!(plain("a").as_deref(), Some("no"));
        assert_eq!(plain("b"), None);
        assert_eq!(plain("c"), None);
        assert_eq!(plain("d"), None);
        assert_eq!(plain("e"), None);
        assert_eq!(plain("i"), None);
        assert_eq!(plain("f[0]").as_deref(), Some("0123"));
        assert_eq!(plain("f[1]"), None);
        assert_eq!(plain("g").as_deref(), Some("~"));
        assert_eq!(plain("h").as_deref(), Some("Yes"));
        assert_eq!(plain("k").as_deref(), Some("0x1F"));
    }
}
