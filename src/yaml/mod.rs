//! Strict YAML files with positions, read one way for every file bootstrap reads (the
//! ImageSetConfiguration, the inventory, the installer's install-config.yaml and
//! agent-config.yaml): [`load_file`] reads a file with a size bound and [`parse`] parses it
//! strictly into its serde type ([`Document`], described by a [`Schema`]); every problem is a
//! [`Problem`], one line `file:line:col: path: message`.
//!
//! The data types of each file stay plain serde structs; the positions live in a side index
//! (`index.rs`) built from a generic pass over the same text, and serde-saphyr's errors are
//! reshaped into one line naming the field and the fix (`reshape.rs`). Writing goes through
//! [`to_string`], so what bootstrap writes reads back the same in Go's YAML readers.

mod emit;
mod index;
mod load;
mod reshape;
mod scalar;

pub use emit::to_string;
pub use index::Header;
pub(crate) use index::{index as index_text, Index};
pub use load::{
    io_reason, load_file, parse, read_text, Document, IgnoreCase, LoadError, Loaded, Positions,
    Schema,
};
pub(crate) use reshape::did_you_mean;
pub(crate) use reshape::problem as reshape_error;
pub use scalar::{unquoted_non_strings, StringFields};

use std::fmt;

/// Longest user-supplied value quoted in a message; longer ones are cut.
const MAX_QUOTED_CHARS: usize = 120;

/// A 1-based line and column (counted in characters) in a YAML file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Location {
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1, in characters.
    pub column: usize,
}

impl Location {
    /// The top of a file, where problems about the whole file or an absent field are placed.
    pub const START: Location = Location { line: 1, column: 1 };

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

/// How much a problem matters: an error refuses the file, a warning is reported and the file is
/// still used (what the installer accepts but a site should know, such as an older apiVersion).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Reported; the file is still used.
    Warning,
    /// The file cannot be used.
    #[default]
    Error,
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
    /// Error (the file is refused) or warning.
    pub severity: Severity,
}

impl Problem {
    /// An error at `location` about `path`.
    pub fn new(
        location: Option<Location>,
        path: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Problem {
            location,
            path: path.into(),
            message: message.into(),
            severity: Severity::Error,
        }
    }

    /// A warning at `location` about `path`.
    pub fn warning(
        location: Option<Location>,
        path: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Problem {
            severity: Severity::Warning,
            ..Problem::new(location, path, message)
        }
    }

    /// True for an error (the file is refused).
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// Renders `ORIGIN[:LINE:COL]: [warning: ][PATH: ]MESSAGE`.
    pub fn render(&self, origin: &str, out: &mut String) {
        out.push_str(origin);
        if let Some(loc) = self.location {
            out.push_str(&format!(":{loc}"));
        }
        out.push_str(": ");
        if self.severity == Severity::Warning {
            out.push_str("warning: ");
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_say_so_before_the_path() {
        let mut out = String::new();
        Problem::warning(Some(Location::START), "apiVersion", "older").render("f.yaml", &mut out);
        assert_eq!(out, "f.yaml:1:1: warning: apiVersion: older");
        let mut out = String::new();
        Problem::new(None, "", "unreadable").render("f.yaml", &mut out);
        assert_eq!(out, "f.yaml: unreadable");
    }
}
