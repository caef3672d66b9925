//! The one strict loader: a file read with a size bound, its header (`apiVersion`, `kind`)
//! checked first so another kind of file is named as such, then parsed strictly into its serde
//! type (every key known, every value of the right type), every failure one [`Problem`] with
//! its line and column.
//!
//! Valid files are the common case and the index costs a second pass over the text, so a
//! caller may ask for [`Positions::Skip`]: the text is parsed once, and only when something is
//! wrong is it read again with the index, so the problem still carries its position.

use super::index::{index, options, Header, Index, Shape};
use super::reshape::{did_you_mean, innermost, problem};
use super::{quote, Location, Problem, Severity};
use serde::de::DeserializeOwned;
use std::borrow::Cow;
use std::io::Read;
use std::path::Path;

/// Most keys fixed for case in one file before giving up (each fix costs a parse).
const MAX_CASE_FIXES: usize = 64;

/// What a strict YAML file must be: how messages name it, its header, the keys that are not
/// misspellings, and how large it may be.
#[derive(Debug)]
pub struct Schema {
    /// The document with its article, as messages name it: "an ImageSetConfiguration".
    pub document: &'static str,
    /// The document alone: "ImageSetConfiguration".
    pub name: &'static str,
    /// The apiVersion read.
    pub api_version: &'static str,
    /// Other apiVersions recognised: read as this one with a warning, or refused, with the
    /// message saying why.
    pub other_versions: &'static [(&'static str, Severity, &'static str)],
    /// The kind read.
    pub kind: &'static str,
    /// False when `kind` may be left out (install-config.yaml).
    pub kind_required: bool,
    /// Other kinds recognised, with the whole message about each.
    pub other_kinds: &'static [(&'static str, &'static str)],
    /// Keys that are not misspellings but belong elsewhere, given the key and its parent path.
    pub hint: fn(&str, &str) -> Option<&'static str>,
    /// Added to every unknown-key message: what the tool that reads the file would do with it.
    pub unknown_note: Option<&'static str>,
    /// `Some` when the file is read by Go's encoding/json, which matches keys ignoring case:
    /// such a key (`apivips`) is read as the one meant, with a warning, instead of refused.
    pub keys_ignore_case: Option<IgnoreCase>,
    /// Larger files are refused before parsing.
    pub max_bytes: u64,
}

/// How a reader that matches keys ignoring case (Go's encoding/json behind sigs.k8s.io/yaml)
/// reads a file, for [`Schema::keys_ignore_case`].
#[derive(Debug)]
pub struct IgnoreCase {
    /// Who reads the file so, as warnings name it: "the installer", "oc-mirror".
    pub reader: &'static str,
    /// Top-level keys the reader nevertheless looks up exactly (oc-mirror reads `kind` and
    /// `mirror` from a plain map before decoding): in another case they stay unknown.
    pub exact_top_level: &'static [&'static str],
}

impl IgnoreCase {
    /// Every key matched ignoring case, by `reader`.
    pub const fn everywhere(reader: &'static str) -> Self {
        IgnoreCase {
            reader,
            exact_top_level: &[],
        }
    }
}

impl Schema {
    /// How the file starts: "`apiVersion: V` and `kind: K`" (kind left out when optional).
    fn start(&self) -> String {
        if self.kind_required {
            format!(
                "`apiVersion: {}` and `kind: {}`",
                self.api_version, self.kind
            )
        } else {
            format!("`apiVersion: {}`", self.api_version)
        }
    }
}

/// A serde type read through [`parse`].
pub trait Document: DeserializeOwned {
    /// What the file must be.
    const SCHEMA: &'static Schema;
    /// Its `apiVersion` and `kind` as parsed, for the read without positions.
    fn header(&self) -> Header;
}

/// Whether to build the position index up front.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Positions {
    /// Parse once, without the index; a file with a problem is read again with it.
    Skip,
    /// Build the index: every later problem on the value can be placed.
    Index,
}

/// A file read through its schema, with its position index (empty when read with
/// [`Positions::Skip`]) and the warnings of the reading (an older apiVersion, a key matched
/// ignoring case).
#[derive(Debug)]
pub struct Loaded<T> {
    /// The parsed document.
    pub value: T,
    /// Field path to position.
    pub(crate) index: Index,
    /// Warnings found while reading; the value is usable.
    pub warnings: Vec<Problem>,
}

impl<T> Loaded<T> {
    /// An error at `path`, placed where the field is written or, when it is absent, where its
    /// nearest written parent is.
    pub fn problem(&self, path: impl Into<String>, message: impl Into<String>) -> Problem {
        let path = path.into();
        Problem::new(self.index.locate(&path), path, message)
    }

    /// A problem of `severity` at `path`, placed as [`Loaded::problem`] does.
    pub fn finding(
        &self,
        severity: Severity,
        path: impl Into<String>,
        message: impl Into<String>,
    ) -> Problem {
        Problem {
            severity,
            ..self.problem(path, message)
        }
    }

    /// True when problems on this value can be placed (it was read with the index).
    pub fn has_positions(&self) -> bool {
        !self.index.is_empty()
    }
}

/// Why a file could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadError {
    /// It could not be read (missing, unreadable, too large, not UTF-8): why.
    Read(String),
    /// It is not a valid document of its kind.
    Invalid(Problem),
}

/// Reads `path` as text: at most `max_bytes` (a larger file is refused before it is parsed;
/// `document` names what it should be) and UTF-8. The message is the reason alone (`No such
/// file or directory`), for the caller to prefix with the file.
pub fn read_text(path: &Path, max_bytes: u64, document: &str) -> Result<String, String> {
    let file = fs_err::File::open(path).map_err(|e| io_reason(&e))?;
    let mut bytes = Vec::new();
    file.take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_reason(&e))?;
    if bytes.len() as u64 > max_bytes {
        let limit = if max_bytes >= 1024 * 1024 {
            format!("{} MiB", max_bytes / (1024 * 1024))
        } else {
            format!("{max_bytes} bytes")
        };
        return Err(format!(
            "larger than {limit}; {document} is a small YAML file: is this the right file?"
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "not UTF-8 text (invalid byte at offset {}); save the file as UTF-8",
            e.utf8_error().valid_up_to()
        )
    })
}

/// Reads and parses the file at `path` as `T` ([`read_text`] then [`parse`]).
pub fn load_file<T: Document>(path: &Path, positions: Positions) -> Result<Loaded<T>, LoadError> {
    let text = read_text(path, T::SCHEMA.max_bytes, T::SCHEMA.document).map_err(LoadError::Read)?;
    parse(&text, positions).map_err(LoadError::Invalid)
}

/// `std::io::Error`'s message without the ` (os error N)` suffix.
pub fn io_reason(e: &std::io::Error) -> String {
    let s = e.to_string();
    // fs-err's errors read "failed to open file `PATH`: REASON"; callers here name the path
    // themselves, so keep the reason.
    let s = match s.rfind("`: ") {
        Some(i) if e.get_ref().is_some() => s[i + 3..].to_string(),
        _ => s,
    };
    match s.rfind(" (os error ") {
        Some(i) if s.ends_with(')') => s[..i].to_string(),
        _ => s,
    }
}

/// Parses `text` as `T`, strictly. Checks, in order: YAML syntax; a mapping at the top level;
/// `apiVersion` and `kind` (so another kind of file is named as such rather than reported as a
/// list of unknown keys); every key known and every value of the right type. The first failure
/// is the one problem returned, with its position whatever `positions` asked.
pub fn parse<T: Document>(text: &str, positions: Positions) -> Result<Loaded<T>, Problem> {
    if positions == Positions::Skip {
        if let Ok(value) = serde_saphyr::from_str_with_options::<T>(text, options()) {
            if header_exact(&value.header(), T::SCHEMA) {
                return Ok(Loaded {
                    value,
                    index: Index::default(),
                    warnings: Vec::new(),
                });
            }
        }
    }
    parse_with_index(text)
}

fn header_exact(header: &Header, schema: &Schema) -> bool {
    header.api_version.as_deref() == Some(schema.api_version)
        && match header.kind.as_deref() {
            Some(k) => k == schema.kind,
            None => !schema.kind_required,
        }
}

fn parse_with_index<T: Document>(text: &str) -> Result<Loaded<T>, Problem> {
    let schema = T::SCHEMA;
    let index = match index(text) {
        Ok(Some(index)) => index,
        Ok(None) => {
            return Err(Problem::new(
                None,
                "",
                format!(
                    "holds no YAML document; {} starts with {}",
                    schema.document,
                    schema.start()
                ),
            ))
        }
        Err(e) => return Err(problem(&e, &Index::default(), schema)),
    };
    if let Some(root) = index.get("").filter(|r| r.shape != Shape::Map) {
        return Err(Problem::new(
            Location::from_yaml(root.value),
            "",
            format!(
                "expected a mapping starting with {} at the top level, found {}",
                schema.start(),
                root.found()
            ),
        ));
    }
    let mut text = Cow::Borrowed(text);
    let mut index = index;
    let mut warnings = Vec::new();
    if let Some((fixed, fixes)) = header_case_fix(&text, &index, schema) {
        index = reindex(&fixed, index);
        text = Cow::Owned(fixed);
        warnings.extend(fixes);
    }
    warnings.extend(check_header(&index.header(), &index, schema)?);
    for _ in 0..=MAX_CASE_FIXES {
        match serde_saphyr::from_str_with_options::<T>(&text, options()) {
            Ok(value) => {
                return Ok(Loaded {
                    value,
                    index,
                    warnings,
                })
            }
            Err(e) => match key_case_fix(&text, &e, &index, schema) {
                Some((fixed, warning)) => {
                    // Same bytes in another case: every position holds, and the paths now
                    // name the keys as the schema spells them.
                    index = reindex(&fixed, index);
                    text = Cow::Owned(fixed);
                    warnings.push(warning);
                }
                None => return Err(problem(&e, &index, schema)),
            },
        }
    }
    Err(Problem::new(
        None,
        "",
        format!("more than {MAX_CASE_FIXES} keys differ from their spelling only in case; write them as the schema does"),
    ))
}

/// The index of a text that differs from the one `old` was built from only in the case of
/// some keys (so it parses the same); `old` if it somehow does not.
fn reindex(text: &str, old: Index) -> Index {
    index(text).ok().flatten().unwrap_or(old)
}

/// `apiVersion` and `kind` against the schema: the warnings of a recognised older version, or
/// the one problem that stops the file.
fn check_header(header: &Header, index: &Index, schema: &Schema) -> Result<Vec<Problem>, Problem> {
    let fail = |path: &str, message: String| Err(Problem::new(index.locate(path), path, message));
    let mut warnings = Vec::new();
    match header.api_version.as_deref() {
        Some(v) if v == schema.api_version => {}
        None => {
            return fail(
                "",
                format!(
                    "apiVersion is missing; {} starts with {}",
                    schema.document,
                    schema.start()
                ),
            )
        }
        Some(other) => match schema.other_versions.iter().find(|(v, _, _)| *v == other) {
            Some((_, Severity::Warning, message)) => warnings.push(Problem::warning(
                index.locate("apiVersion"),
                "apiVersion",
                *message,
            )),
            Some((_, Severity::Error, message)) => return fail("apiVersion", message.to_string()),
            None => {
                return fail(
                    "apiVersion",
                    format!("expected '{}', found {}", schema.api_version, quote(other)),
                )
            }
        },
    }
    match header.kind.as_deref() {
        Some(k) if k == schema.kind => Ok(warnings),
        None if !schema.kind_required => Ok(warnings),
        None => fail("", format!("kind is missing; set `kind: {}`", schema.kind)),
        Some(other) => match schema.other_kinds.iter().find(|(k, _)| *k == other) {
            Some((_, message)) => fail("kind", message.to_string()),
            None => fail(
                "kind",
                format!("expected '{}', found {}", schema.kind, quote(other)),
            ),
        },
    }
}

/// For a file Go reads (keys matched ignoring case): an unknown key that is a known one in
/// another case is rewritten in place (same bytes, same positions) and reported as a warning.
/// A top-level key the reader looks up exactly stays unknown.
fn key_case_fix(
    text: &str,
    err: &serde_saphyr::Error,
    index: &Index,
    schema: &Schema,
) -> Option<(String, Problem)> {
    let ignore = schema.keys_ignore_case.as_ref()?;
    let (inner, at) = innermost(err);
    let serde_saphyr::Error::SerdeUnknownField {
        field, expected, ..
    } = inner
    else {
        return None;
    };
    let meant = did_you_mean(field, expected).filter(|m| m.eq_ignore_ascii_case(field))?;
    let key = index.key_at(at);
    if key.is_some_and(|e| e.parent_path().is_empty()) && ignore.exact_top_level.contains(&meant) {
        return None;
    }
    let fixed = rewrite_key(text, at, field, meant)?;
    let path = key.map(|e| e.path.clone()).unwrap_or_default();
    Some((
        fixed,
        case_warning(Location::from_yaml(at), path, field, meant, ignore),
    ))
}

/// `apiVersion` and `kind` written in another case at the top level (`apiversion:`), for a
/// reader that matches them ignoring case: rewritten in place, as [`key_case_fix`] does, so
/// the header is checked as the reader sees it.
fn header_case_fix(text: &str, index: &Index, schema: &Schema) -> Option<(String, Vec<Problem>)> {
    let ignore = schema.keys_ignore_case.as_ref()?;
    let mut fixed = Cow::Borrowed(text);
    let mut warnings = Vec::new();
    for meant in ["apiVersion", "kind"] {
        if index.get(meant).is_some() || ignore.exact_top_level.contains(&meant) {
            continue;
        }
        let written = index.entries().iter().find(|e| {
            e.key.is_some() && e.parent_path().is_empty() && e.path.eq_ignore_ascii_case(meant)
        });
        let Some((entry, at)) = written.and_then(|e| Some((e, e.key?))) else {
            continue;
        };
        if let Some(text) = rewrite_key(&fixed, at, &entry.path, meant) {
            fixed = Cow::Owned(text);
            warnings.push(case_warning(
                Location::from_yaml(at),
                entry.path.clone(),
                &entry.path,
                meant,
                ignore,
            ));
        }
    }
    match fixed {
        Cow::Owned(text) => Some((text, warnings)),
        Cow::Borrowed(_) => None,
    }
}

/// `text` with the key `field` written at `at` spelt `meant` (the same letters in another
/// case, so the same bytes and positions).
fn rewrite_key(text: &str, at: serde_saphyr::Location, field: &str, meant: &str) -> Option<String> {
    let start = usize::try_from(at.span().byte_offset()?).ok()?;
    // The span may start at a quote around the key.
    let start = [start, start + 1]
        .into_iter()
        .find(|s| text.get(*s..s + field.len()) == Some(field))?;
    let mut fixed = text.to_string();
    fixed.replace_range(start..start + field.len(), meant);
    Some(fixed)
}

fn case_warning(
    location: Option<Location>,
    path: String,
    field: &str,
    meant: &str,
    ignore: &IgnoreCase,
) -> Problem {
    Problem::warning(
        location,
        path,
        format!(
            "{} is read as '{meant}' ({} matches keys ignoring case); write '{meant}'",
            quote(field),
            ignore.reader
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct Doc {
        api_version: String,
        kind: String,
        #[serde(default, rename = "apiVIPs")]
        api_vips: Vec<String>,
    }

    static DOC: Schema = Schema {
        document: "a Doc",
        name: "Doc",
        api_version: "v1",
        other_versions: &[("v0", Severity::Warning, "v0 is read as v1")],
        kind: "Doc",
        kind_required: true,
        other_kinds: &[],
        hint: |_, _| None,
        unknown_note: Some("the reader would ignore it"),
        keys_ignore_case: Some(IgnoreCase::everywhere("the reader")),
        max_bytes: 64,
    };

    impl Document for Doc {
        const SCHEMA: &'static Schema = &DOC;
        fn header(&self) -> Header {
            Header {
                api_version: Some(self.api_version.clone()),
                kind: Some(self.kind.clone()),
            }
        }
    }

    #[test]
    fn a_valid_file_is_read_once_and_a_broken_one_with_positions() {
        let ok = parse::<Doc>("apiVersion: v1\nkind: Doc\n", Positions::Skip).unwrap();
        assert!(!ok.has_positions());
        let ok = parse::<Doc>("apiVersion: v1\nkind: Doc\n", Positions::Index).unwrap();
        assert!(ok.has_positions());
        let p = parse::<Doc>("apiVersion: v1\nkind: Doc\nfoo: 1\n", Positions::Skip).unwrap_err();
        assert_eq!(p.location, Some(Location { line: 3, column: 1 }));
        assert!(
            p.message.ends_with("(the reader would ignore it)"),
            "{}",
            p.message
        );
    }

    #[test]
    fn an_older_version_is_a_warning_even_without_positions_asked() {
        let l = parse::<Doc>("apiVersion: v0\nkind: Doc\n", Positions::Skip).unwrap();
        assert_eq!(l.warnings.len(), 1);
        assert_eq!(
            l.warnings[0].location,
            Some(Location {
                line: 1,
                column: 13
            })
        );
        assert!(!l.warnings[0].is_error());
    }

    /// Go's encoding/json reads `apivips` as `apiVIPs`: such a key is read, with a warning.
    #[test]
    fn keys_differing_only_in_case_are_read_with_a_warning() {
        let l = parse::<Doc>(
            "apiVersion: v1\nkind: Doc\n\"apivips\": [10.0.0.1]\n",
            Positions::Skip,
        )
        .unwrap();
        assert_eq!(l.value.api_vips, vec!["10.0.0.1"]);
        assert_eq!(l.warnings.len(), 1, "{:?}", l.warnings);
        assert!(l.warnings[0].message.contains("read as 'apiVIPs'"));
        assert_eq!(l.warnings[0].location.map(|l| l.line), Some(3));
    }

    /// A header key in another case (`apiversion`) is what Go reads as apiVersion: the header
    /// is checked as written in that key, with the same warning as any other key.
    #[test]
    fn a_header_key_in_another_case_is_read_with_a_warning() {
        let l = parse::<Doc>("apiversion: v0\nKIND: Doc\n", Positions::Skip).unwrap();
        let messages: Vec<&str> = l.warnings.iter().map(|w| w.message.as_str()).collect();
        assert_eq!(
            messages,
            vec![
                "'apiversion' is read as 'apiVersion' (the reader matches keys ignoring case); write 'apiVersion'",
                "'KIND' is read as 'kind' (the reader matches keys ignoring case); write 'kind'",
                "v0 is read as v1",
            ]
        );
        assert_eq!(l.warnings[1].location.map(|l| l.line), Some(2));
        assert_eq!(l.value.api_version, "v0");
    }

    #[test]
    fn files_are_read_with_a_size_bound() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("doc.yaml");
        fs_err::write(&path, "a".repeat(65)).unwrap();
        let e = read_text(&path, 64, "a Doc").unwrap_err();
        assert!(e.starts_with("larger than 64 bytes; a Doc"), "{e}");
        assert_eq!(
            read_text(&dir.path().join("nope"), 64, "a Doc").unwrap_err(),
            "No such file or directory"
        );
    }
}
