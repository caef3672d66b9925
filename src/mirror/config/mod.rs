//! The oc-mirror v2 `ImageSetConfiguration` (`mirror.openshift.io/v2alpha1`), read strictly.
//!
//! Sites already describe what crosses the air gap in oc-mirror's format, so `bootstrap mirror`
//! reads the same file rather than inventing its own. It reads it more strictly than a YAML
//! library would by default: a misspelt key (`additionalImage:`) silently mirroring nothing is
//! the worst failure an air-gapped run can have, because it is only noticed on the far side of
//! the gap. So every key must be one oc-mirror knows (the structs of `schema.rs` follow
//! `internal/pkg/api/v2alpha1` of openshift/oc-mirror field for field), and every error names the
//! file, line and column, the key or field path involved, and what to write instead.
//!
//! Parsing ([`parse`], [`load`]) accepts everything oc-mirror v2 accepts and checks the rules
//! it checks (`validate.rs`, plus a few of bootstrap's own). What oc-mirror reads leniently is
//! read the same way with a warning ([`ImageSetConfig::warnings`]): an `apiVersion` of
//! `mirror.openshift.io/v1alpha2` (v2 never looks at it), and keys that differ from the schema
//! only in case (v2 decodes with Go's encoding/json). A `docker://` prefix on an additional
//! image or a catalog is dropped, as oc-mirror's reference parser drops it. Whether this
//! version of bootstrap can *act* on a section is a separate question, answered by
//! [`ImageSetConfig::unsupported_sections`] and [`ImageSetConfig::ensure_supported`].
//!
//! Locations: YAML positions are kept in a side index keyed by field path
//! (`mirror.additionalImages[1].name`), so the data types stay plain and callers that check a
//! value further (the image reference parser) can still point at it with
//! [`ImageSetConfig::location`] and [`ConfigError::at`].
//!
//! The parts: this file (the parsed configuration, its locations and entries), `error.rs`
//! (what is reported), `read.rs` (reading a file), `schema.rs` (the fields), `validate.rs`
//! (the rules), `platforms.rs` (what each image keeps of a multi-arch index) and `support.rs`
//! (what this version can mirror).

mod error;
pub mod layout_catalog;
mod offline;
mod platforms;
mod read;
mod schema;
mod support;
#[cfg(test)]
mod tests;
mod validate;

pub use crate::yaml::{Location, Problem};
pub use error::ConfigError;
pub use read::{load, parse};
pub use schema::{
    AdditionalImage, BlockedImage, Helm, HelmChart, HelmRepository, IncludeChannel, IncludePackage,
    Mirror, Operator, Platform, PlatformFilter, PlatformType, ReleaseChannel, SampleImage,
};

use crate::yaml::Index;

/// oc-mirror v2's `apiVersion`, the one every file is read as.
pub const API_VERSION: &str = "mirror.openshift.io/v2alpha1";

/// The only `kind` read.
pub const KIND: &str = "ImageSetConfiguration";

/// oc-mirror v1's `apiVersion`: read as [`API_VERSION`] with a warning, as oc-mirror v2 reads it.
const V1_API_VERSION: &str = "mirror.openshift.io/v1alpha2";

/// Values `mirror.platform.architectures` accepts: the architectures OpenShift release payloads
/// are built for, as the update service (Cincinnati) names them, plus `multi` (the multi-arch
/// payload; for bootstrap's image filter it means "keep every platform of an index").
pub const ARCHITECTURES: &[&str] = &["amd64", "arm64", "ppc64le", "s390x", "multi"];

/// The architecture used when `mirror.platform.architectures` is empty, as oc-mirror's
/// `DefaultPlatformArchitecture`.
pub const DEFAULT_ARCHITECTURE: &str = "amd64";

/// Files larger than this are refused before parsing: an ImageSetConfiguration is a few KiB.
const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// A parsed and validated ImageSetConfiguration.
#[derive(Clone, Debug)]
pub struct ImageSetConfig {
    /// `apiVersion` as the file is read: always [`API_VERSION`] (oc-mirror v2 reads a
    /// `v1alpha2` file as `v2alpha1`; [`ImageSetConfig::warnings`] says so).
    pub api_version: String,
    /// `kind`; always [`KIND`].
    pub kind: String,
    /// `archiveSize`: oc-mirror's archive segment size in GiB (positive when set). bootstrap
    /// writes an OCI layout directory, not archives, so it has no effect here.
    pub archive_size: Option<i64>,
    /// `mirror`: the content.
    pub mirror: Mirror,
    index: Index,
    warnings: Vec<Problem>,
}

/// One `mirror.additionalImages[]` entry with where it is written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageEntry<'a> {
    /// Position in `mirror.additionalImages`.
    pub index: usize,
    /// The reference as written.
    pub name: &'a str,
    /// `mirror.additionalImages[INDEX].name`, for messages.
    pub path: String,
    /// Where the name's value is in the file.
    pub location: Option<Location>,
}

impl ImageEntry<'_> {
    /// A [`ConfigError`] pointing at this entry's name:
    /// `origin:line:col: mirror.additionalImages[1].name: message`.
    pub fn error(&self, origin: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::at(origin, self.location, self.path.clone(), message)
    }
}

impl ImageSetConfig {
    /// What oc-mirror reads leniently and bootstrap read the same way, each placed at its
    /// line and column: an older `apiVersion`, a key in another case than the schema's. The
    /// configuration is usable; the caller shows them (library code does not print).
    pub fn warnings(&self) -> &[Problem] {
        &self.warnings
    }

    /// [`ImageSetConfig::warnings`] as lines `origin:line:col: path: message`, for a channel
    /// that puts `warning: ` before each line itself.
    pub fn warning_lines(&self, origin: &str) -> Vec<String> {
        self.warnings
            .iter()
            .map(|w| {
                let at = w.location.map(|l| format!(":{l}")).unwrap_or_default();
                let path = if w.path.is_empty() {
                    String::new()
                } else {
                    format!("{}: ", w.path)
                };
                format!("{origin}{at}: {path}{}", w.message)
            })
            .collect()
    }

    /// Where the value at `path` is written, e.g. `location("mirror.additionalImages[1].name")`
    /// or `location("mirror.platform.architectures")`. Paths use the YAML key names, `.` between
    /// keys and `[N]` for list items; the top level is `""`.
    pub fn location(&self, path: &str) -> Option<Location> {
        self.index.location(path)
    }

    /// Where the key of the mapping entry at `path` is written (`operators:` rather than its
    /// first item), falling back to the value's location for list items and the top level.
    pub fn key_location(&self, path: &str) -> Option<Location> {
        self.index.key_location(path)
    }

    /// The `mirror.blockedImages` patterns, compiled, each with its path for messages.
    /// Validation already refused patterns that do not compile; any left out here would be
    /// such a one.
    pub fn blocked_images(&self) -> Vec<(String, regex::Regex)> {
        self.mirror
            .blocked_images
            .iter()
            .enumerate()
            .filter_map(|(i, b)| {
                let re = regex::Regex::new(&b.name).ok()?;
                Some((format!("mirror.blockedImages[{i}] ({})", b.name), re))
            })
            .collect()
    }

    /// The `mirror.additionalImages` names with their field paths and locations, in file order.
    pub fn additional_images(&self) -> Vec<ImageEntry<'_>> {
        self.mirror
            .additional_images
            .iter()
            .enumerate()
            .map(|(i, img)| {
                let path = format!("mirror.additionalImages[{i}].name");
                ImageEntry {
                    index: i,
                    name: &img.name,
                    location: self.location(&path),
                    path,
                }
            })
            .collect()
    }
}
