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

mod schema;
mod support;
mod validate;

pub use crate::yaml::{Location, Problem};
pub use schema::{
    AdditionalImage, BlockedImage, Helm, HelmChart, HelmRepository, IncludeChannel, IncludePackage,
    Mirror, Operator, Platform, PlatformFilter, PlatformType, ReleaseChannel, SampleImage,
};

use crate::oci::platform::PlatformFilter as IndexFilter;
use crate::yaml::{self, render_problems, Index, LoadError, Positions};
use schema::RawConfig;
use std::path::Path;

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

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

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

    fn invalid(origin: &str, problems: Vec<Problem>) -> Self {
        ConfigError::Invalid {
            origin: origin.to_string(),
            problems,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The parsed configuration and its accessors
// ---------------------------------------------------------------------------------------------

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

    /// The `mirror.additionalImages` names with their field paths and locations, in file order.
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

    /// The architectures to keep of multi-arch indexes: `mirror.platform.architectures` as
    /// written, or `["amd64"]` when it is empty (oc-mirror's default). `multi` means "keep
    /// every platform"; the caller interprets it.
    pub fn architectures(&self) -> Vec<String> {
        if self.mirror.platform.architectures.is_empty() {
            vec![DEFAULT_ARCHITECTURE.to_string()]
        } else {
            self.mirror.platform.architectures.clone()
        }
    }

    /// The architectures whose update graphs release channels are read from:
    /// [`Self::architectures`], or `multi` alone when `mirror.platform.platforms` filters the
    /// multi-arch payload (as oc-mirror v2 does) or `architectures` keeps every one.
    pub fn graph_architectures(&self) -> Vec<String> {
        let arches = self.architectures();
        if !self.mirror.platform.platforms.is_empty() || arches.iter().any(|a| a == "multi") {
            vec!["multi".to_string()]
        } else {
            arches
        }
    }

    /// What release payloads and their components keep of a multi-arch index:
    /// `mirror.platform.platforms` (os/architecture pairs), else [`Self::architectures`] on
    /// any OS (`multi`: every platform). The two are exclusive (validation refuses both).
    pub fn release_platforms(&self) -> IndexFilter {
        let p = &self.mirror.platform;
        if p.platforms.is_empty() {
            IndexFilter::architectures(&self.architectures(), "mirror.platform.architectures")
        } else {
            IndexFilter::pairs(
                p.platforms
                    .iter()
                    .map(|f| (f.os.as_str(), f.architecture.as_str())),
                "mirror.platform.platforms",
            )
        }
    }

    /// What `mirror.operators[index]`'s catalog image, bundles and related images keep: its
    /// `platforms`, else every platform (oc-mirror v2's default: digests stay those CSVs pin).
    pub fn catalog_platforms(&self, index: usize) -> IndexFilter {
        self.mirror
            .operators
            .get(index)
            .map_or_else(IndexFilter::all, |op| {
                IndexFilter::pairs(
                    op.platforms
                        .iter()
                        .map(|f| (f.os.as_str(), f.architecture.as_str())),
                    &format!("mirror.operators[{index}].platforms"),
                )
            })
    }

    /// What `mirror.additionalImages[index]` keeps: its `platforms`, else every platform
    /// (oc-mirror v2's default: the digest stays the one users pin).
    pub fn image_platforms(&self, index: usize) -> IndexFilter {
        self.mirror
            .additional_images
            .get(index)
            .map_or_else(IndexFilter::all, |img| {
                IndexFilter::pairs(
                    img.platforms
                        .iter()
                        .map(|f| (f.os.as_str(), f.architecture.as_str())),
                    &format!("mirror.additionalImages[{index}].platforms"),
                )
            })
    }
}

// ---------------------------------------------------------------------------------------------
// Loading and parsing
// ---------------------------------------------------------------------------------------------

/// Reads and parses the ImageSetConfiguration at `path` ([`parse`] with the path as origin).
/// A missing file gives `reading isc.yaml: No such file or directory`.
pub fn load(path: &Path) -> Result<ImageSetConfig, ConfigError> {
    let origin = path.display().to_string();
    match yaml::load_file::<RawConfig>(path, Positions::Index) {
        Ok(loaded) => checked(loaded, &origin),
        Err(LoadError::Read(message)) => Err(ConfigError::Read { origin, message }),
        Err(LoadError::Invalid(problem)) => Err(ConfigError::invalid(&origin, vec![problem])),
    }
}

/// Parses and validates an ImageSetConfiguration. `origin` names the text in errors (the file
/// path as the user gave it). Checks, in order: YAML syntax; `apiVersion` and `kind`; every key
/// known and every value of the right type; then oc-mirror's rules and bootstrap's shape checks
/// (all problems of that last step are reported together). Support for the sections is checked
/// separately by [`ImageSetConfig::ensure_supported`].
pub fn parse(text: &str, origin: &str) -> Result<ImageSetConfig, ConfigError> {
    match yaml::parse::<RawConfig>(text, Positions::Index) {
        Ok(loaded) => checked(loaded, origin),
        Err(problem) => Err(ConfigError::invalid(origin, vec![problem])),
    }
}

/// The parsed file with its index, once oc-mirror's rules pass. The index is kept whole: the
/// image references and the support check place their problems with it later.
fn checked(loaded: yaml::Loaded<RawConfig>, origin: &str) -> Result<ImageSetConfig, ConfigError> {
    let raw = loaded.value;
    let mut mirror = raw.mirror;
    drop_docker_transport(&mut mirror);
    let config = ImageSetConfig {
        // oc-mirror sets the group, version and kind it read the file as.
        api_version: API_VERSION.to_string(),
        kind: raw.kind,
        archive_size: raw.archive_size,
        mirror,
        index: loaded.index,
        warnings: loaded.warnings,
    };
    let problems = validate::validate(&config);
    if problems.is_empty() {
        Ok(config)
    } else {
        Err(ConfigError::invalid(origin, problems))
    }
}

/// oc-mirror's reference parser (`ParseRef`, internal/pkg/image/image.go) takes a transport
/// prefix and treats `docker://` as no prefix at all, for additional images and catalogs
/// alike; so does bootstrap. Other transports are left for the shape checks to name.
fn drop_docker_transport(mirror: &mut Mirror) {
    const DOCKER: &str = "docker://";
    let names = mirror
        .additional_images
        .iter_mut()
        .map(|i| &mut i.name)
        .chain(mirror.operators.iter_mut().map(|o| &mut o.catalog));
    for name in names {
        if let Some(rest) = name.strip_prefix(DOCKER) {
            *name = rest.to_string();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\n";

    fn parse_ok(text: &str) -> ImageSetConfig {
        match parse(text, "isc.yaml") {
            Ok(c) => c,
            Err(e) => panic!("expected a valid config, got:\n{e}"),
        }
    }

    fn parse_err(text: &str) -> String {
        match parse(text, "isc.yaml") {
            Ok(_) => panic!("expected an error for:\n{text}"),
            Err(e) => e.to_string(),
        }
    }

    fn fixture(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/isc")
            .join(name)
    }

    /// A configuration as a site would write it for oc-mirror: release channel, operators,
    /// additional images, helm, blocked images.
    const REALISTIC: &str = r#"---
kind: ImageSetConfiguration
apiVersion: mirror.openshift.io/v2alpha1
archiveSize: 4
mirror:
  platform:
    channels:
    - name: stable-4.16
      type: ocp
      minVersion: 4.16.10
      maxVersion: 4.16.14
      shortestPath: true
    - name: eus-4.14
      full: false
    graph: true
    architectures:
    - amd64
    - multi
    kubeVirtContainer: false
  operators:
  - catalog: registry.redhat.io/redhat/redhat-operator-index:v4.16
    targetCatalog: my-org/redhat-operators
    targetTag: v4.16-site
    skipDependencies: false
    packages:
    - name: gpu-operator-certified
      defaultChannel: v24.6
      channels:
      - name: v24.6
        minVersion: 24.6.0
        maxVersion: 24.6.2
    - name: rhods-operator
      minVersion: 2.13.0
    - name: nfd
  - catalog: registry.redhat.io/redhat/certified-operator-index:v4.16
    full: true
  additionalImages:
  - name: registry.redhat.io/ubi9/ubi:latest
  - name: quay.io/openshift/origin-cli@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
    targetRepo: tools/origin-cli
    targetTag: pinned
  helm:
    repositories:
    - name: nvidia
      url: https://helm.ngc.nvidia.com/nvidia
      charts:
      - name: gpu-operator
        version: v24.6.2
    local:
    - name: site-chart
      path: /charts/site-chart-1.0.0.tgz
      imagePaths:
      - "{.spec.template.spec.containers[*].image}"
  blockedImages:
  - name: registry.redhat.io/rhel8/.*
"#;

    #[test]
    fn realistic_config_parses() {
        let c = parse_ok(REALISTIC);
        assert_eq!(c.api_version, API_VERSION);
        assert_eq!(c.kind, KIND);
        assert_eq!(c.archive_size, Some(4));
        let p = &c.mirror.platform;
        assert!(p.graph);
        assert_eq!(p.channels.len(), 2);
        assert_eq!(p.channels[0].name, "stable-4.16");
        assert_eq!(p.channels[0].platform_type, PlatformType::Ocp);
        assert_eq!(p.channels[0].min_version.as_deref(), Some("4.16.10"));
        assert!(p.channels[0].shortest_path);
        assert_eq!(c.architectures(), vec!["amd64", "multi"]);
        assert_eq!(c.mirror.operators.len(), 2);
        let op = &c.mirror.operators[0];
        assert_eq!(
            op.target_catalog.as_deref(),
            Some("my-org/redhat-operators")
        );
        assert_eq!(
            op.packages[0].channels[0].max_version.as_deref(),
            Some("24.6.2")
        );
        assert_eq!(op.packages[0].default_channel.as_deref(), Some("v24.6"));
        assert!(c.mirror.operators[1].full);
        assert_eq!(c.mirror.additional_images.len(), 2);
        assert_eq!(c.mirror.helm.repositories[0].charts[0].name, "gpu-operator");
        assert_eq!(c.mirror.helm.local[0].image_paths.len(), 1);
        assert_eq!(
            c.mirror.blocked_images[0].name,
            "registry.redhat.io/rhel8/.*"
        );

        // ... and is refused, section by section, by this version.
        assert_eq!(
            c.unsupported_sections(),
            vec![
                "mirror.additionalImages[].targetRepo",
                "mirror.additionalImages[].targetTag",
            ]
        );
        let e = c.ensure_supported("isc.yaml").unwrap_err();
        assert!(matches!(e, ConfigError::Unsupported { .. }));
        let text = e.to_string();
        assert_eq!(text.lines().count(), 2, "{text}");
        // platform.graph and mirror.helm are mirrored.
        assert!(!text.contains("mirror.platform.graph"), "{text}");
        assert!(!text.contains("mirror.helm"), "{text}");
        assert!(!text.contains("mirror.operators"), "{text}");
        assert!(
            text.contains("isc.yaml:40:5: mirror.additionalImages[1].targetRepo is not supported"),
            "{text}"
        );
        assert!(!text.contains("mirror.blockedImages"), "{text}");
    }

    #[test]
    fn additional_images_fixture_is_supported() {
        let c = load(&fixture("additional-images.yaml")).unwrap();
        assert!(c.unsupported_sections().is_empty());
        c.ensure_supported("additional-images.yaml").unwrap();
        assert_eq!(c.architectures(), vec!["amd64", "arm64"]);
        let images = c.additional_images();
        assert_eq!(images.len(), 5);
        assert_eq!(images[0].name, "registry.redhat.io/ubi9/ubi:9.4");
        assert_eq!(images[1].path, "mirror.additionalImages[1].name");
        assert_eq!(
            images[0].location,
            Some(Location {
                line: 12,
                column: 13
            })
        );
        assert!(images[2].name.contains("@sha256:"));
        // What the reference parser's errors look like through the accessor.
        assert_eq!(
            images[1].error("isc.yaml", "bad reference").to_string(),
            "isc.yaml:13:13: mirror.additionalImages[1].name: bad reference"
        );
    }

    #[test]
    fn unknown_key_fixture_names_file_line_column_and_key() {
        let path = fixture("unknown-key.yaml");
        let e = load(&path).unwrap_err().to_string();
        let origin = path.display().to_string();
        assert_eq!(
            e,
            format!("{origin}:8:3: unknown field 'additionalImage' in mirror (did you mean 'additionalImages'?); expected one of platform, operators, additionalImages, helm, blockedImages, samples")
        );
    }

    #[test]
    fn unknown_key_at_top_level() {
        let e = parse_err(&format!("{HEAD}mirror: {{}}\nmirrors: {{}}\n"));
        assert_eq!(
            e,
            "isc.yaml:4:1: unknown field 'mirrors' at the top level (did you mean 'mirror'?); expected one of apiVersion, kind, mirror, archiveSize"
        );
        let e = parse_err(&format!("{HEAD}mirror: {{}}\ndelete: {{}}\n"));
        assert!(e.starts_with("isc.yaml:4:1: unknown field 'delete' at the top level: delete belongs in a DeleteImageSetConfiguration"), "{e}");
    }

    /// oc-mirror decodes with Go's encoding/json, which matches keys ignoring case: a key in
    /// another case is read as the one meant, with a warning giving the right spelling, and the
    /// positions of what follows still name the keys as the schema spells them.
    #[test]
    fn keys_differing_only_in_case_are_read_with_a_warning() {
        let c = parse_ok(
            "apiversion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  AdditionalImages:\n  - Name: quay.io/a/b:1\n  operators:\n  - catalog: registry.redhat.io/redhat/redhat-operator-index:v4.16\n    targetcatalog: my-org/ops\n",
        );
        assert_eq!(c.mirror.additional_images[0].name, "quay.io/a/b:1");
        assert_eq!(
            c.mirror.operators[0].target_catalog.as_deref(),
            Some("my-org/ops")
        );
        assert_eq!(
            c.warning_lines("isc.yaml"),
            vec![
                "isc.yaml:1:1: apiversion: 'apiversion' is read as 'apiVersion' (oc-mirror matches keys ignoring case); write 'apiVersion'",
                "isc.yaml:4:3: mirror.AdditionalImages: 'AdditionalImages' is read as 'additionalImages' (oc-mirror matches keys ignoring case); write 'additionalImages'",
                "isc.yaml:5:5: mirror.additionalImages[0].Name: 'Name' is read as 'name' (oc-mirror matches keys ignoring case); write 'name'",
                "isc.yaml:8:5: mirror.operators[0].targetcatalog: 'targetcatalog' is read as 'targetCatalog' (oc-mirror matches keys ignoring case); write 'targetCatalog'",
            ]
        );
        assert!(c.warnings().iter().all(|w| !w.is_error()));
        assert_eq!(
            c.location("mirror.additionalImages[0].name"),
            Some(Location {
                line: 5,
                column: 11
            })
        );
        // Both spellings in one mapping: which one Go keeps is an accident; refused.
        let e = parse_err(&format!(
            "{HEAD}mirror:\n  additionalImages: []\n  additionalimages:\n  - name: quay.io/a/b:1\n"
        ));
        assert!(
            e.starts_with(
                "isc.yaml:5:3: duplicate key 'additionalImages' in mirror (first at line 4)"
            ),
            "{e}"
        );
    }

    /// oc-mirror looks `kind` and `mirror` up exactly in a plain map before decoding
    /// (internal/pkg/config/load.go), so those two are not matched ignoring case.
    #[test]
    fn kind_and_mirror_are_matched_exactly_as_oc_mirror_does() {
        let e = parse_err(
            "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nMirror: {}\n",
        );
        assert!(
            e.starts_with("isc.yaml:3:1: unknown field 'Mirror' at the top level: oc-mirror looks this key up exactly as `mirror`"),
            "{e}"
        );
        let e = parse_err(
            "apiVersion: mirror.openshift.io/v2alpha1\nKind: ImageSetConfiguration\nmirror: {}\n",
        );
        assert!(e.starts_with("isc.yaml:1:1: kind is missing"), "{e}");
    }

    #[test]
    fn unknown_key_in_operator_package() {
        let text = format!(
            "{HEAD}mirror:\n  operators:\n  - catalog: registry.redhat.io/redhat/redhat-operator-index:v4.16\n    packages:\n    - name: a\n    - name: nfd\n      minVersoin: 4.16.0\n"
        );
        let e = parse_err(&text);
        assert_eq!(
            e,
            "isc.yaml:9:7: unknown field 'minVersoin' in mirror.operators[0].packages[1] (did you mean 'minVersion'?); expected one of name, channels, defaultChannel, minVersion, maxVersion"
        );
    }

    #[test]
    fn unknown_key_in_flow_mapping() {
        let e = parse_err(&format!(
            "{HEAD}mirror:\n  additionalImages: [{{name: quay.io/a/b:1, tag: x}}]\n"
        ));
        assert!(
            e.starts_with("isc.yaml:4:44: unknown field 'tag' in mirror.additionalImages[0]"),
            "{e}"
        );
    }

    #[test]
    fn missing_required_field() {
        let e = parse_err(&format!(
            "{HEAD}mirror:\n  additionalImages:\n  - name: quay.io/a/b:1\n  - targetTag: x\n"
        ));
        assert_eq!(
            e,
            "isc.yaml:6:5: missing required field 'name' in mirror.additionalImages[1]; add `name:` there"
        );
        let e = parse_err(&format!("{HEAD}mirror:\n  additionalImages:\n  - {{}}\n"));
        assert_eq!(
            e,
            "isc.yaml:5:5: missing required field 'name' in mirror.additionalImages[0]; add `name:` there"
        );
        let e = parse_err(HEAD);
        assert!(
            e.starts_with("isc.yaml:1:1: missing required field 'mirror' at the top level"),
            "{e}"
        );
    }

    #[test]
    fn wrong_types_name_the_field() {
        let e = parse_err(&format!("{HEAD}archiveSize: four\nmirror: {{}}\n"));
        assert_eq!(
            e,
            "isc.yaml:3:14: archiveSize: expected a whole number, found 'four'"
        );
        let e = parse_err(&format!(
            "{HEAD}mirror:\n  additionalImages: quay.io/a/b:1\n"
        ));
        assert_eq!(
            e,
            "isc.yaml:4:21: mirror.additionalImages: expected a list (entries starting with '- '), found 'quay.io/a/b:1'"
        );
        // A block list starts where its first item does; the wrong node is still named.
        let e = parse_err(&format!(
            "{HEAD}mirror:\n  additionalImages:\n  - quay.io/a/b:1\n"
        ));
        assert_eq!(
            e,
            "isc.yaml:5:5: mirror.additionalImages[0]: expected a mapping (key: value entries), found 'quay.io/a/b:1'"
        );
        let e = parse_err(&format!("{HEAD}mirror:\n  platform:\n  - amd64\n"));
        assert_eq!(
            e,
            "isc.yaml:5:5: mirror.platform: expected a mapping (key: value entries), found a list"
        );
        let e = parse_err(&format!("{HEAD}mirror:\n  additionalImages:\n  - name:\n"));
        assert_eq!(
            e,
            "isc.yaml:5:9: mirror.additionalImages[0].name: a value is required here, found nothing (null)"
        );
        let e = parse_err(&format!("{HEAD}mirror:\n  platform:\n    channels:\n    - name: stable-4.16\n      type: rhel\n"));
        assert_eq!(
            e,
            "isc.yaml:7:13: mirror.platform.channels[0].type: unknown value 'rhel'; expected one of ocp, okd"
        );
    }

    #[test]
    fn duplicate_key_is_refused_with_path() {
        let e = parse_err(&format!("{HEAD}mirror:\n  additionalImages:\n  - name: quay.io/a/b:1\n    name: quay.io/a/b:2\n"));
        assert_eq!(
            e,
            "isc.yaml:6:5: duplicate key 'name' in mirror.additionalImages[0] (first at line 5); a key may appear only once: merge or remove one"
        );
    }

    #[test]
    fn yaml_syntax_error_has_location() {
        let e = parse_err(&format!(
            "{HEAD}mirror:\n  additionalImages:\n  - name: [quay.io/a/b:1\n"
        ));
        assert!(e.starts_with("isc.yaml:5:"), "{e}");
        let e = parse_err(&format!(
            "{HEAD}mirror:\n  additionalImages:\n\t- name: quay.io/a/b:1\n"
        ));
        assert!(e.starts_with("isc.yaml:5:"), "{e}");
    }

    #[test]
    fn empty_and_non_mapping_documents() {
        assert_eq!(
            parse_err(""),
            "isc.yaml: holds no YAML document; an ImageSetConfiguration starts with `apiVersion: mirror.openshift.io/v2alpha1` and `kind: ImageSetConfiguration`"
        );
        assert!(parse_err("# only a comment\n").starts_with("isc.yaml: holds no YAML document"));
        assert_eq!(
            parse_err("- a\n- b\n"),
            "isc.yaml:1:1: expected a mapping starting with `apiVersion: mirror.openshift.io/v2alpha1` and `kind: ImageSetConfiguration` at the top level, found a list"
        );
        assert!(
            parse_err(&format!("{HEAD}mirror: {{}}\n---\n{HEAD}mirror: {{}}\n"))
                .contains("more than one YAML document")
        );
    }

    #[test]
    fn wrong_kind() {
        let e = parse_err(
            "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfig\nmirror: {}\n",
        );
        assert_eq!(
            e,
            "isc.yaml:2:7: kind: expected 'ImageSetConfiguration', found 'ImageSetConfig'"
        );
        let e = parse_err("apiVersion: mirror.openshift.io/v2alpha1\nkind: DeleteImageSetConfiguration\ndelete: {}\n");
        assert!(e.starts_with("isc.yaml:2:7: kind: DeleteImageSetConfiguration (oc-mirror delete) is not supported"), "{e}");
        let e = parse_err("apiVersion: mirror.openshift.io/v2alpha1\nmirror: {}\n");
        assert!(e.starts_with("isc.yaml:1:1: kind is missing"), "{e}");
    }

    /// oc-mirror v2 never looks at apiVersion (its own e2e configurations say v1alpha2): such
    /// a file is read as v2alpha1 with a warning; what only v1 knew stays unknown.
    #[test]
    fn v1alpha2_is_read_as_v2alpha1_with_a_warning() {
        let c = parse_ok("apiVersion: mirror.openshift.io/v1alpha2\nkind: ImageSetConfiguration\nmirror:\n  additionalImages:\n  - name: quay.io/a/b:1\n");
        assert_eq!(c.api_version, API_VERSION);
        assert_eq!(
            c.warning_lines("isc.yaml"),
            vec!["isc.yaml:1:13: apiVersion: mirror.openshift.io/v1alpha2 is oc-mirror v1's apiVersion; oc-mirror v2 reads the file as v2alpha1, and so does bootstrap: set `apiVersion: mirror.openshift.io/v2alpha1`"]
        );
        let e = parse_err("apiVersion: mirror.openshift.io/v1alpha2\nkind: ImageSetConfiguration\nstorageConfig:\n  local:\n    path: ./meta\nmirror: {}\n");
        assert!(
            e.starts_with("isc.yaml:3:1: unknown field 'storageConfig' at the top level: storageConfig is oc-mirror v1 only"),
            "{e}"
        );
        let e = parse_err("apiVersion: mirror.openshift.io/v1alpha2\nkind: ImageSetConfiguration\nmirror:\n  operators:\n  - catalog: registry.redhat.io/redhat/redhat-operator-index:v4.16\n    targetName: ops\n");
        assert!(
            e.starts_with("isc.yaml:6:5: unknown field 'targetName' in mirror.operators[0]: targetName is oc-mirror v1 only; v2 replaced it with targetCatalog"),
            "{e}"
        );
    }

    #[test]
    fn wrong_api_version() {
        let e = parse_err("apiVersion: v1\nkind: ImageSetConfiguration\nmirror: {}\n");
        assert_eq!(
            e,
            "isc.yaml:1:13: apiVersion: expected 'mirror.openshift.io/v2alpha1', found 'v1'"
        );
        let e = parse_err("kind: ImageSetConfiguration\nmirror: {}\n");
        assert!(e.starts_with("isc.yaml:1:1: apiVersion is missing"), "{e}");
    }

    #[test]
    fn bad_and_duplicate_architectures() {
        let e = parse_err(&format!(
            "{HEAD}mirror:\n  platform:\n    architectures: [amd64, x86_64, arm64, amd64]\n"
        ));
        let lines: Vec<&str> = e.lines().collect();
        assert_eq!(
            lines,
            vec![
                "isc.yaml:5:28: mirror.platform.architectures[1]: unknown architecture 'x86_64' (write amd64); expected one of amd64, arm64, ppc64le, s390x, multi",
                "isc.yaml:5:43: mirror.platform.architectures[3]: 'amd64' is listed twice (first at line 5); remove one",
            ]
        );
    }

    #[test]
    fn default_architecture_is_amd64() {
        let c = parse_ok(&format!(
            "{HEAD}mirror:\n  additionalImages:\n  - name: quay.io/a/b:1\n"
        ));
        assert_eq!(c.architectures(), vec!["amd64"]);
    }

    #[test]
    fn full_with_version_range_is_refused() {
        let text = format!(
            "{HEAD}mirror:\n  operators:\n  - catalog: registry.redhat.io/redhat/redhat-operator-index:v4.16\n    full: true\n    packages:\n    - name: nfd\n      minVersion: 4.16.0\n"
        );
        let e = parse_err(&text);
        assert_eq!(
            e,
            "isc.yaml:9:19: mirror.operators[0].packages[0].minVersion: cannot be combined with `full: true` on mirror.operators[0] (oc-mirror: \"Full: true cannot be mixed with versionRange\"); full mirrors every version, so remove full or the version range"
        );
        let text = format!(
            "{HEAD}mirror:\n  operators:\n  - catalog: registry.redhat.io/redhat/redhat-operator-index:v4.16\n    full: true\n    packages:\n    - name: nfd\n      channels:\n      - name: stable\n        maxVersion: 4.16.3\n"
        );
        assert!(parse_err(&text).starts_with("isc.yaml:11:21: mirror.operators[0].packages[0].channels[0].maxVersion: cannot be combined with `full: true`"));
    }

    #[test]
    fn package_and_channel_ranges_are_refused() {
        let text = format!(
            "{HEAD}mirror:\n  operators:\n  - catalog: registry.redhat.io/redhat/redhat-operator-index:v4.16\n    packages:\n    - name: nfd\n      maxVersion: 4.16.5\n      channels:\n      - name: stable\n        minVersion: 4.16.0\n"
        );
        assert_eq!(
            parse_err(&text),
            "isc.yaml:11:21: mirror.operators[0].packages[0].channels[0].minVersion: package 'nfd' already sets maxVersion (mirror.operators[0].packages[0].maxVersion); a version range goes on the package or on its channels, not both (oc-mirror refuses this too)"
        );
    }

    #[test]
    fn duplicates_oc_mirror_refuses() {
        let text = format!(
            "{HEAD}mirror:\n  platform:\n    channels:\n    - name: stable-4.16\n    - name: stable-4.16\n  operators:\n  - catalog: registry.redhat.io/redhat/redhat-operator-index:v4.16\n    packages:\n    - name: nfd\n    - name: nfd\n"
        );
        let e = parse_err(&text);
        assert_eq!(e.lines().count(), 2, "{e}");
        assert!(e.contains("isc.yaml:7:13: mirror.platform.channels[1].name: release channel 'stable-4.16' is listed twice"), "{e}");
        assert!(e.contains("isc.yaml:12:13: mirror.operators[0].packages[1].name: package 'nfd' is listed twice"), "{e}");
    }

    #[test]
    fn archive_size_must_be_positive() {
        let e = parse_err(&format!("{HEAD}archiveSize: 0\nmirror: {{}}\n"));
        assert_eq!(
            e,
            "isc.yaml:3:14: archiveSize: must be a positive number of GiB (e.g. 4), found 0; or leave it out"
        );
    }

    #[test]
    fn additional_image_shapes() {
        let text = format!(
            "{HEAD}mirror:\n  additionalImages:\n  - name: \"\"\n  - name: docker://docker://quay.io/a/b:1\n  - name: \"quay.io/a/b :1\"\n  - name: oci:///srv/layout\n  - name: ubi9/ubi:latest\n"
        );
        let e = parse_err(&text);
        let lines: Vec<&str> = e.lines().collect();
        assert_eq!(lines.len(), 4, "{e}");
        assert!(lines[0].starts_with("isc.yaml:5:11: mirror.additionalImages[0].name: is empty; give the full image reference"));
        // One docker:// is oc-mirror's transport, dropped; a second one is not a reference.
        assert_eq!(lines[1], "isc.yaml:6:11: mirror.additionalImages[1].name: 'docker://quay.io/a/b:1' starts with docker://; leave the scheme out: write 'quay.io/a/b:1'");
        assert!(lines[2].starts_with(
            "isc.yaml:7:11: mirror.additionalImages[2].name: 'quay.io/a/b :1' contains whitespace"
        ));
        assert!(lines[3].contains("names a local OCI layout"));
        // no registry host: accepted here, as oc-mirror does (docker.io is implied)
        assert!(!e.contains("ubi9/ubi"));
    }

    #[test]
    fn blocked_images_must_be_non_empty_regular_expressions() {
        let e = parse_err(&format!("{HEAD}mirror:\n  blockedImages:\n  - name: ''\n"));
        assert!(
            e.starts_with("isc.yaml:5:11: mirror.blockedImages[0].name: is empty"),
            "{e}"
        );
        let e = parse_err(&format!(
            "{HEAD}mirror:\n  blockedImages:\n  - name: quay.io/bad/(.*\n"
        ));
        assert!(
            e.starts_with(
                "isc.yaml:5:11: mirror.blockedImages[0].name: is not a valid regular expression"
            ),
            "{e}"
        );
        let c = parse_ok(&format!(
            "{HEAD}mirror:\n  blockedImages:\n  - name: quay.io/bad/.*\n"
        ));
        assert!(c.unsupported_sections().is_empty());
        let blocked = c.blocked_images();
        assert!(blocked[0].1.is_match("quay.io/bad/image:1"));
        assert!(!blocked[0].1.is_match("quay.io/good/image:1"));
    }

    #[test]
    fn nulls_and_harmless_values_are_accepted() {
        // Go's decoder takes null for lists, flags and objects; empty sections change nothing.
        let c = parse_ok(&format!(
            "{HEAD}mirror:\n  platform:\n    graph: false\n    channels:\n    architectures:\n  operators: []\n  helm:\n  additionalImages:\n  - name: quay.io/a/b:1\n"
        ));
        assert!(c.unsupported_sections().is_empty());
        assert_eq!(c.architectures(), vec!["amd64"]);
        let c = parse_ok(&format!("{HEAD}mirror:\n"));
        assert!(c.mirror.additional_images.is_empty());
    }

    /// `platforms` lists are read per image as oc-mirror v2 reads them: the release's, each
    /// catalog's, each additional image's; no list keeps every platform, except for releases
    /// (`architectures`, default amd64).
    #[test]
    fn platforms_lists_filter_per_image() {
        let c = parse_ok(&format!(
            "{HEAD}mirror:\n  platform:\n    platforms:\n    - os: linux\n      architecture: arm64\n  operators:\n  - catalog: quay.io/a/index:v1\n    platforms:\n    - os: linux\n      architecture: s390x\n  - catalog: quay.io/a/other:v1\n  additionalImages:\n  - name: quay.io/a/b:1\n    platforms:\n    - os: linux\n      architecture: ppc64le\n  - name: quay.io/a/c:1\n"
        ));
        assert!(c.unsupported_sections().is_empty());
        assert_eq!(c.release_platforms().describe(), ["linux/arm64"]);
        assert_eq!(c.graph_architectures(), ["multi"]);
        assert_eq!(c.catalog_platforms(0).describe(), ["linux/s390x"]);
        assert!(c.catalog_platforms(1).is_all());
        assert_eq!(c.image_platforms(0).describe(), ["linux/ppc64le"]);
        assert_eq!(
            c.image_platforms(0).origin(),
            "mirror.additionalImages[0].platforms"
        );
        assert!(c.image_platforms(1).is_all());
        let c = parse_ok(&format!(
            "{HEAD}mirror:\n  platform:\n    architectures: [arm64]\n"
        ));
        assert_eq!(c.release_platforms().describe(), ["arm64"]);
        assert_eq!(c.graph_architectures(), ["arm64"]);
        let c = parse_ok(&format!(
            "{HEAD}mirror:\n  platform:\n    architectures: [multi]\n"
        ));
        assert!(c.release_platforms().is_all());
        let e = parse_err(&format!(
            "{HEAD}mirror:\n  platform:\n    architectures: [amd64]\n    platforms:\n    - os: linux\n      architecture: arm64\n"
        ));
        assert!(e.contains("cannot be used together"), "{e}");
        let e = parse_err(&format!(
            "{HEAD}mirror:\n  additionalImages:\n  - name: quay.io/a/b:1\n    platforms:\n    - os: linux\n      architecture: \"\"\n"
        ));
        assert_eq!(
            e,
            "isc.yaml:8:21: mirror.additionalImages[0].platforms[0].architecture: is empty; name the platform's architecture, e.g. arm64"
        );
    }

    #[test]
    fn location_accessors() {
        let c = parse_ok(&format!(
            "{HEAD}mirror:\n  platform:\n    architectures: [arm64]\n  additionalImages:\n  - name: quay.io/a/b:1\n"
        ));
        assert_eq!(
            c.location("mirror.platform.architectures[0]"),
            Some(Location {
                line: 5,
                column: 21
            })
        );
        assert_eq!(
            c.key_location("mirror.additionalImages"),
            Some(Location { line: 6, column: 3 })
        );
        assert_eq!(
            c.location("mirror.additionalImages[0].name"),
            Some(Location {
                line: 7,
                column: 11
            })
        );
        assert_eq!(c.location("mirror.nothing"), None);
        assert_eq!(
            Location {
                line: 7,
                column: 11
            }
            .to_string(),
            "7:11"
        );
    }

    #[test]
    fn missing_file() {
        let e = load(Path::new("does-not-exist/isc.yaml")).unwrap_err();
        assert!(matches!(e, ConfigError::Read { .. }));
        assert_eq!(
            e.to_string(),
            "reading does-not-exist/isc.yaml: No such file or directory"
        );
    }

    #[test]
    fn unreadable_inputs() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("isc.yaml");
        fs_err::write(&bin, b"apiVersion: \xff\xfe\n").unwrap();
        let e = load(&bin).unwrap_err().to_string();
        assert!(
            e.ends_with(
                "isc.yaml: not UTF-8 text (invalid byte at offset 12); save the file as UTF-8"
            ),
            "{e}"
        );
        let e = load(dir.path()).unwrap_err().to_string();
        assert!(e.starts_with("reading "), "{e}");
    }

    #[test]
    fn control_characters_are_escaped_in_messages() {
        let e = parse_err("apiVersion: \"\\e[31mred\"\nkind: ImageSetConfiguration\nmirror: {}\n");
        assert!(!e.contains('\u{1b}'), "{e:?}");
        assert!(e.contains("\\u{1b}[31mred"), "{e}");
    }

    #[test]
    fn bom_is_accepted() {
        parse_ok(&format!("\u{feff}{HEAD}mirror: {{}}\n"));
    }

    /// oc-mirror's reference parser takes `docker://` as no transport at all, on additional
    /// images and catalogs alike: the prefix is dropped, silently, as there.
    #[test]
    fn docker_transport_is_dropped_from_images_and_catalogs() {
        let c = parse_ok(&format!(
            "{HEAD}mirror:\n  additionalImages:\n  - name: docker://quay.io/a/b:1\n  operators:\n  - catalog: docker://registry.redhat.io/redhat/redhat-operator-index:v4.16\n"
        ));
        assert_eq!(c.additional_images()[0].name, "quay.io/a/b:1");
        assert_eq!(
            c.mirror.operators[0].catalog,
            "registry.redhat.io/redhat/redhat-operator-index:v4.16"
        );
        assert!(c.warnings().is_empty());
        assert!(c.unsupported_sections().is_empty());
    }

    /// oc-mirror cuts the transport off the references it matches blockedImages against, not
    /// off the pattern: there a pattern holding docker:// blocks nothing. Refused, not guessed.
    #[test]
    fn docker_transport_in_a_blocked_pattern_is_refused() {
        let e = parse_err(&format!(
            "{HEAD}mirror:\n  blockedImages:\n  - name: docker://quay.io/bad/.*\n  - name: ^docker://quay.io/worse/.*\n"
        ));
        let lines: Vec<&str> = e.lines().collect();
        assert_eq!(
            lines,
            vec![
                "isc.yaml:5:11: mirror.blockedImages[0].name: 'docker://quay.io/bad/.*' holds docker://, but oc-mirror matches blockedImages against references without a transport (quay.io/org/image:tag), so there this pattern blocks nothing: write 'quay.io/bad/.*' to block what it names, or remove the entry",
                "isc.yaml:6:11: mirror.blockedImages[1].name: '^docker://quay.io/worse/.*' holds docker://, but oc-mirror matches blockedImages against references without a transport (quay.io/org/image:tag), so there this pattern blocks nothing: write '^quay.io/worse/.*' to block what it names, or remove the entry",
            ]
        );
    }

    /// oc-mirror's `IsValidPathComponent`: a targetCatalog is a repository path, lower case,
    /// with no tag or digest (the tag goes in targetTag).
    #[test]
    fn target_catalog_with_a_tag_digest_or_upper_case_is_refused() {
        let op = |target: &str| {
            format!(
                "{HEAD}mirror:\n  operators:\n  - catalog: registry.redhat.io/redhat/redhat-operator-index:v4.16\n    targetCatalog: \"{target}\"\n"
            )
        };
        assert_eq!(
            parse_err(&op("my-org/ops:v1")),
            "isc.yaml:6:20: mirror.operators[0].targetCatalog: 'my-org/ops:v1' has a tag; targetCatalog is the catalog's repository path under the destination, and oc-mirror refuses this too (\"invalid target path component: should not contain a tag or digest\"): write `targetCatalog: my-org/ops` and `targetTag: v1`"
        );
        let e = parse_err(&op("My-Org/Ops"));
        assert!(
            e.ends_with("'My-Org/Ops' has upper-case letters; targetCatalog is the catalog's repository path under the destination, and oc-mirror refuses this too (\"invalid target path component: should not contain a tag or digest\"): write `targetCatalog: my-org/ops`"),
            "{e}"
        );
        let e = parse_err(&op(
            "a/b@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ));
        assert!(
            e.contains("has a digest;") && e.ends_with("write `targetCatalog: a/b`"),
            "{e}"
        );
        let e = parse_err(&op("/ops"));
        assert!(
            e.contains("'/ops' is not a repository path;")
                && e.ends_with("e.g. my-org/redhat-operators (put a tag in targetTag)"),
            "{e}"
        );
        parse_ok(&op("my-org/sub.team__x/red-hat--ops"));
    }

    /// Regression: two catalogs with one targetCatalog used to be accepted, and the second
    /// replaced the first at the destination, so its operators vanished from the cluster.
    #[test]
    fn two_catalogs_with_one_target_catalog_are_refused() {
        let e = parse_err(&format!(
            "{HEAD}mirror:\n  operators:\n  - catalog: registry.redhat.io/redhat/redhat-operator-index:v4.16\n    targetCatalog: site/operators\n  - catalog: registry.redhat.io/redhat/certified-operator-index:v4.16\n    targetCatalog: site/operators\n"
        ));
        assert_eq!(
            e,
            "isc.yaml:8:20: mirror.operators[1].targetCatalog: catalog 'registry.redhat.io/redhat/certified-operator-index:v4.16' would be mirrored to 'PREFIX/site/operators:v4.16', where mirror.operators[0] ('registry.redhat.io/redhat/redhat-operator-index:v4.16') is mirrored too: pushed second, it would replace that catalog, whose operators would vanish from the cluster (oc-mirror refuses this too: \"duplicate found in configuration\"); give one of them another targetCatalog or targetTag"
        );
        // Told apart by targetTag, or by their own tags: two places, as oc-mirror accepts.
        parse_ok(&format!(
            "{HEAD}mirror:\n  operators:\n  - catalog: registry.redhat.io/redhat/redhat-operator-index:v4.16\n    targetCatalog: site/operators\n  - catalog: registry.redhat.io/redhat/certified-operator-index:v4.16\n    targetCatalog: site/operators\n    targetTag: certified\n  - catalog: registry.redhat.io/redhat/redhat-operator-index:v4.17\n    targetCatalog: site/operators\n"
        ));
    }

    /// A catalog without targetCatalog lands at its source path; another catalog's
    /// targetCatalog (or one from another registry at the same path) can land there too.
    /// oc-mirror compares references registry included and lets such two overwrite each
    /// other; bootstrap places by path alone, so it refuses them.
    #[test]
    fn a_catalog_landing_where_another_lands_is_refused() {
        let e = parse_err(&format!(
            "{HEAD}mirror:\n  operators:\n  - catalog: registry.redhat.io/redhat/redhat-operator-index:v4.16\n  - catalog: quay.io/me/my-index:v4.16\n    targetCatalog: redhat/redhat-operator-index\n  - catalog: quay.io/redhat/redhat-operator-index:v4.16\n"
        ));
        let lines: Vec<&str> = e.lines().collect();
        assert_eq!(lines.len(), 2, "{e}");
        assert!(lines[0].starts_with("isc.yaml:7:20: mirror.operators[1].targetCatalog: catalog 'quay.io/me/my-index:v4.16' would be mirrored to 'PREFIX/redhat/redhat-operator-index:v4.16', where mirror.operators[0]"), "{e}");
        assert!(lines[1].starts_with("isc.yaml:8:14: mirror.operators[2].catalog: catalog 'quay.io/redhat/redhat-operator-index:v4.16' would be mirrored to"), "{e}");
        assert!(!e.contains("oc-mirror refuses"), "{e}");
        // The same entry twice keeps its own message.
        let e = parse_err(&format!(
            "{HEAD}mirror:\n  operators:\n  - catalog: quay.io/a/index:v1\n  - catalog: docker://quay.io/a/index:v1\n"
        ));
        assert_eq!(
            e,
            "isc.yaml:6:14: mirror.operators[1].catalog: catalog 'quay.io/a/index:v1' is listed twice (also mirror.operators[0]) with the same target; oc-mirror refuses duplicates: merge their packages"
        );
    }

    /// bootstrap resolves channels against OCP's update graph only; an OKD channel is refused
    /// with the reason, never read as OCP.
    #[test]
    fn okd_channels_are_refused_not_read_as_ocp() {
        let c = parse_ok(&format!(
            "{HEAD}mirror:\n  platform:\n    channels:\n    - name: stable-4.16\n    - name: stable-4\n      type: okd\n"
        ));
        assert_eq!(
            c.unsupported_sections(),
            vec!["mirror.platform.channels[].type: okd"]
        );
        assert_eq!(
            c.ensure_supported("isc.yaml").unwrap_err().to_string(),
            "isc.yaml:8:7: mirror.platform.channels[1].type is not supported yet by this version of bootstrap (type: okd; release channels are resolved against OCP's update graph only, and OKD has its own graph (origin-release.ci.openshift.org/graph) and release images); remove the channel, or mirror OKD releases with oc-mirror"
        );
        // oc-mirror reads an unknown type (even `OKD`) as OCP; bootstrap names it.
        let e = parse_err(&format!(
            "{HEAD}mirror:\n  platform:\n    channels:\n    - name: stable-4\n      type: OKD\n"
        ));
        assert!(
            e.contains("unknown value 'OKD'; expected one of ocp, okd"),
            "{e}"
        );
    }
}
