//! The support matrix: which sections of a valid ImageSetConfiguration this version of bootstrap
//! can act on. A configuration oc-mirror accepts is parsed whole; what bootstrap cannot mirror
//! yet is refused here, section by section, with what to do instead.

use super::{AdditionalImage, ConfigError, ImageSetConfig, PlatformType, Problem};

/// The reason [`ImageSetConfig::ensure_supported`] gives for `kubeVirtContainer`.
const LATER: &str = "KubeVirt containers arrive in a later release";

impl ImageSetConfig {
    /// The sections this configuration uses that this version of bootstrap cannot mirror yet,
    /// in file-schema order: `mirror.platform.kubeVirtContainer`,
    /// `mirror.platform.channels[].type: okd`,
    /// `mirror.operators[].targetCatalogSourceTemplate`,
    /// `mirror.additionalImages[].targetRepo`, `mirror.additionalImages[].targetTag`
    /// (`mirror.samples` is read and ignored with a warning, as oc-mirror ignores it). A section counts only when it would change what is mirrored
    /// (`kubeVirtContainer: false` does not).
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
        self.unsupported_platform(&mut out);
        self.unsupported_operators(&mut out);
        self.unsupported_images(&mut out);
        out
    }

    fn unsupported_platform(&self, out: &mut Vec<Unsupported>) {
        let p = &self.mirror.platform;
        let mut add = |section, path, why, fix| out.push(Unsupported::new(section, path, why, fix));
        if p.kube_virt_container {
            add(
                "mirror.platform.kubeVirtContainer",
                "mirror.platform.kubeVirtContainer".into(),
                LATER,
                OR_OC_MIRROR,
            );
        }
        // Never read as OCP: the same channel name in OCP's graph is another product's.
        for (i, ch) in p.channels.iter().enumerate() {
            if ch.platform_type == PlatformType::Okd {
                add(
                    "mirror.platform.channels[].type: okd",
                    format!("mirror.platform.channels[{i}].type"),
                    "type: okd; release channels are resolved against OCP's update graph only, and OKD has its own graph (origin-release.ci.openshift.org/graph) and release images",
                    "remove the channel, or mirror OKD releases with oc-mirror",
                );
            }
        }
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

    fn unsupported_images(&self, out: &mut Vec<Unsupported>) {
        let m = &self.mirror;
        let mut add = |section, path, why, fix| out.push(Unsupported::new(section, path, why, fix));
        let first = |f: fn(&AdditionalImage) -> bool| m.additional_images.iter().position(f);
        if let Some(i) = first(|a| a.target_repo.as_deref().is_some_and(|s| !s.is_empty())) {
            add(
                "mirror.additionalImages[].targetRepo",
                format!("mirror.additionalImages[{i}].targetRepo"),
                "images keep their source repository path under the destination prefix",
                "remove it or mirror that image with oc-mirror",
            );
        }
        if let Some(i) = first(|a| a.target_tag.as_deref().is_some_and(|s| !s.is_empty())) {
            add(
                "mirror.additionalImages[].targetTag",
                format!("mirror.additionalImages[{i}].targetTag"),
                "images keep their source tag",
                "remove it or mirror that image with oc-mirror",
            );
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

/// What to do with a section bootstrap does not mirror yet.
const OR_OC_MIRROR: &str = "remove it or mirror it with oc-mirror";
