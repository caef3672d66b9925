//! Reading a configuration: the strict YAML loader with the schema, then the few rewrites
//! oc-mirror makes on what it read (`docker://` dropped), then the rules of `validate.rs`.

use super::schema::RawConfig;
use super::{validate, ConfigError, ImageSetConfig, Mirror, API_VERSION};
use crate::yaml::{self, LoadError, Positions};
use std::path::Path;

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
    let mut config = ImageSetConfig {
        // oc-mirror sets the group, version and kind it read the file as.
        api_version: API_VERSION.to_string(),
        kind: raw.kind,
        archive_size: raw.archive_size,
        mirror,
        index: loaded.index,
        warnings: loaded.warnings,
    };
    if !config.mirror.samples.is_empty() {
        // oc-mirror v2 decodes `samples` and never reads it again (api/v2alpha1
        // type_config.go: "This is currently not implemented"); v1 logged "sample images
        // full not implemented". Read the same way, and said.
        let at = config.key_location("mirror.samples");
        config.warnings.push(crate::yaml::Problem::warning(
            at,
            "mirror.samples",
            "read and ignored: oc-mirror does not mirror samples either (v2 reads the field \
             and does nothing with it; v1 logged \"sample images full not implemented\"); \
             nothing is mirrored for it",
        ));
    }
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
