//! The support matrix: which sections of a valid ImageSetConfiguration this version of bootstrap
//! can act on. A configuration oc-mirror accepts is parsed whole; what bootstrap cannot mirror
//! yet is refused here, section by section, with what to do instead.

use super::{ConfigError, ImageSetConfig, Problem};

impl ImageSetConfig {
    /// The sections this configuration uses that this version of bootstrap cannot mirror yet,
    /// in file-schema order: `mirror.operators[].targetCatalogSourceTemplate` (`mirror.samples`
    /// is read and ignored with a warning, as oc-mirror ignores it). A section counts only when
    /// it would change what is mirrored.
    pub fn unsupported_sections(&self) -> Vec<&'static str> {
        self.unsupported().into_iter().map(|u| u.section).collect()
    }

    /// Refuses a configuration that uses any of [`ImageSetConfig::unsupported_sections`], with
    /// one line per section, e.g. `isc.yaml:14:3: mirror.samples is not supported yet by this
    /// version of bootstrap (...); remove it or mirror it with oc-mirror`.
    pub fn ensure_supported(&self, origin: &str) -> Result<(), ConfigError> {
        let problems: Vec<Problem> = self
            .unsupported()
            .into_iter()
            .map(|u| {
                Problem::new(
                    self.key_location(&u.path),
                    "",
                    format!(
                        "{} is not supported yet by this version of bootstrap ({}); {}",
                        u.path, u.why, u.fix
                    ),
                )
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Unsupported {
                origin: origin.to_string(),
                problems,
            })
        }
    }

    fn unsupported(&self) -> Vec<Unsupported> {
        let mut out = Vec::new();
        self.unsupported_operators(&mut out);
        out
    }

    fn unsupported_operators(&self, out: &mut Vec<Unsupported>) {
        let mut add = |section, path, why, fix| out.push(Unsupported::new(section, path, why, fix));
        for (i, op) in self.mirror.operators.iter().enumerate() {
            if op
                .target_catalog_source_template
                .as_deref()
                .is_some_and(|s| !s.is_empty())
            {
                add(
                    "mirror.operators[].targetCatalogSourceTemplate",
                    format!("mirror.operators[{i}].targetCatalogSourceTemplate"),
                    "CatalogSources are written from bootstrap's own template",
                    "remove it and edit the written cs-*.yaml if needed",
                );
            }
        }
    }
}

/// One section this version cannot act on: which, where, why and what to do instead.
struct Unsupported {
    section: &'static str,
    path: String,
    why: &'static str,
    fix: &'static str,
}

impl Unsupported {
    fn new(section: &'static str, path: String, why: &'static str, fix: &'static str) -> Self {
        Unsupported {
            section,
            path,
            why,
            fix,
        }
    }
}
