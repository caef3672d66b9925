//! Why an ImageSetConfiguration cannot be used, one problem a line with file, line and column:
//! the error type every step of reading (and the image reference parser after it) reports in.

use crate::yaml::{render_problems, Location, Problem};

/// Why a configuration cannot be used. `Display` gives one line per problem, each
/// `file:line:column: [field path: ]message`, e.g.
/// `isc.yaml:7:5: unknown field 'additionalImage' in mirror (did you mean 'additionalImages'?); expected one of ...`.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read (missing, unreadable, too large, not UTF-8).
    #[error("reading {origin}: {message}")]
    Read {
        /// The file as the user named it.
        origin: String,
        /// Why, e.g. `No such file or directory`.
        message: String,
    },
    /// The file is not a valid ImageSetConfiguration: YAML syntax, an unknown or missing key,
    /// a wrong type, a wrong `apiVersion`/`kind`, or a rule oc-mirror enforces.
    #[error("{}", render_problems(origin, problems))]
    Invalid {
        /// The file as the user named it.
        origin: String,
        /// Every problem found (YAML-level errors stop at the first one).
        problems: Vec<Problem>,
    },
    /// The configuration is valid but asks for content this version of bootstrap cannot mirror.
    #[error("{}", render_problems(origin, problems))]
    Unsupported {
        /// The file as the user named it.
        origin: String,
        /// One problem per unsupported section.
        problems: Vec<Problem>,
    },
}

impl ConfigError {
    /// An [`ConfigError::Invalid`] about one field, for checks done outside this module (the
    /// image reference parser): renders as `origin:line:col: path: message`.
    pub fn at(
        origin: &str,
        location: Option<Location>,
        path: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        ConfigError::Invalid {
            origin: origin.to_string(),
            problems: vec![Problem::new(location, path, message)],
        }
    }

    /// The problems this error reports (empty for [`ConfigError::Read`]).
    pub fn problems(&self) -> &[Problem] {
        match self {
            ConfigError::Read { .. } => &[],
            ConfigError::Invalid { problems, .. } | ConfigError::Unsupported { problems, .. } => {
                problems
            }
        }
    }

    pub(super) fn invalid(origin: &str, problems: Vec<Problem>) -> Self {
        ConfigError::Invalid {
            origin: origin.to_string(),
            problems,
        }
    }
}
