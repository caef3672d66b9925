//! The rules a parsed ImageSetConfiguration must follow: those oc-mirror checks (no duplicate
//! channels, catalogs or packages, version ranges not mixed with `full`), and bootstrap's shape
//! checks (image references, architectures, blocked-image patterns), all reported at once.

use super::{ImageSetConfig, IncludePackage, Operator, Problem, ARCHITECTURES};
use crate::yaml::quote;
use std::collections::HashMap;

/// oc-mirror's rules and bootstrap's shape checks on a parsed configuration: every problem,
/// placed by the configuration's index.
pub(super) fn validate(config: &ImageSetConfig) -> Vec<Problem> {
    let mut v = Validator {
        config,
        problems: Vec::new(),
    };
    v.archive_size();
    v.additional_images();
    v.blocked_images();
    v.architectures();
    v.channels();
    v.operators();
    v.helm();
    v.problems
}

struct Validator<'a> {
    config: &'a ImageSetConfig,
    problems: Vec<Problem>,
}

impl Validator<'_> {
    fn push(&mut self, path: String, message: String) {
        let location = self.config.location(&path);
        self.problems.push(Problem::new(location, path, message));
    }

    fn archive_size(&mut self) {
        if let Some(size) = self.config.archive_size {
            if size <= 0 {
                self.push(
                    "archiveSize".into(),
                    format!(
                        "must be a positive number of GiB (e.g. 4), found {size}; or leave it out"
                    ),
                );
            }
        }
    }

    /// Only the shape of each reference: src/oci/reference.rs parses it fully (registry,
    /// repository, tag, digest) and reports through [`ImageEntry::error`].
    ///
    /// A reference without a registry host (`ubi9/ubi:latest`) is *not* refused here: oc-mirror
    /// accepts it (its image library normalises it to docker.io, as every container tool does),
    /// and bootstrap follows oc-mirror so existing configurations keep working. The reference
    /// parser normalises it the same way and records the full reference, so the implied
    /// docker.io is visible in the mirror record rather than hidden.
    fn additional_images(&mut self) {
        for (i, img) in self.config.mirror.additional_images.iter().enumerate() {
            let path = format!("mirror.additionalImages[{i}].name");
            if let Some(message) = reference_shape_problem(&img.name) {
                self.push(path, message);
            }
        }
    }

    /// Each name is a regular expression, as oc-mirror compiles it; an empty one would block
    /// everything and is surely a mistake.
    fn blocked_images(&mut self) {
        for (i, img) in self.config.mirror.blocked_images.iter().enumerate() {
            let path = format!("mirror.blockedImages[{i}].name");
            if img.name.trim().is_empty() {
                self.push(
                    path,
                    "is empty; give the image (pattern) to block, or remove the entry".into(),
                );
            } else if let Err(e) = regex::Regex::new(&img.name) {
                let why = e
                    .to_string()
                    .lines()
                    .last()
                    .unwrap_or_default()
                    .trim()
                    .to_string();
                self.push(
                    path,
                    format!("is not a valid regular expression ({why}); escape special characters such as . with \\ or fix the pattern"),
                );
            }
        }
    }

    fn architectures(&mut self) {
        let platform = &self.config.mirror.platform;
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for (i, arch) in platform.architectures.iter().enumerate() {
            let path = format!("mirror.platform.architectures[{i}]");
            if !ARCHITECTURES.contains(&arch.as_str()) {
                let hint = match arch.as_str() {
                    "x86_64" | "x86-64" | "amd64/linux" | "linux/amd64" => " (write amd64)",
                    "aarch64" | "arm" | "linux/arm64" => " (write arm64)",
                    "ppc64" | "power" => " (write ppc64le)",
                    "all" | "*" | "any" => " (write multi to keep every architecture)",
                    _ => "",
                };
                self.push(
                    path,
                    format!(
                        "unknown architecture {}{hint}; expected one of {}",
                        quote(arch),
                        ARCHITECTURES.join(", ")
                    ),
                );
            } else if let Some(first) = seen.get(arch.as_str()) {
                let first_at = self
                    .config
                    .location(&format!("mirror.platform.architectures[{first}]"))
                    .map(|l| format!(" (first at line {})", l.line))
                    .unwrap_or_default();
                self.push(
                    path,
                    format!("{} is listed twice{first_at}; remove one", quote(arch)),
                );
            } else {
                seen.insert(arch, i);
            }
        }
        if !platform.platforms.is_empty() && !platform.architectures.is_empty() {
            self.push(
                "mirror.platform.platforms".into(),
                "platform.platforms and platform.architectures cannot be used together (oc-mirror refuses this too); keep one of them".into(),
            );
        }
    }

    fn channels(&mut self) {
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for (i, ch) in self.config.mirror.platform.channels.iter().enumerate() {
            let path = format!("mirror.platform.channels[{i}]");
            if ch.name.trim().is_empty() {
                self.push(
                    format!("{path}.name"),
                    "is empty; name the release channel, e.g. stable-4.16".into(),
                );
            } else if let Some(first) = seen.insert(&ch.name, i) {
                self.push(
                    format!("{path}.name"),
                    format!(
                        "release channel {} is listed twice (also mirror.platform.channels[{first}]); oc-mirror refuses duplicates: merge them",
                        quote(&ch.name)
                    ),
                );
            }
        }
    }

    fn operators(&mut self) {
        let mut catalogs: HashMap<(&str, &str, &str), usize> = HashMap::new();
        for (i, op) in self.config.mirror.operators.iter().enumerate() {
            let base = format!("mirror.operators[{i}]");
            if op.catalog.trim().is_empty() {
                self.push(
                    format!("{base}.catalog"),
                    "is empty; name the catalog image, e.g. registry.redhat.io/redhat/redhat-operator-index:v4.16".into(),
                );
            } else {
                let key = (
                    op.catalog.as_str(),
                    op.target_catalog.as_deref().unwrap_or(""),
                    op.target_tag.as_deref().unwrap_or(""),
                );
                if let Some(first) = catalogs.insert(key, i) {
                    self.push(
                        format!("{base}.catalog"),
                        format!(
                            "catalog {} is listed twice (also mirror.operators[{first}]) with the same target; oc-mirror refuses duplicates: merge their packages",
                            quote(&op.catalog)
                        ),
                    );
                }
            }
            let mut packages: HashMap<&str, usize> = HashMap::new();
            for (j, pkg) in op.packages.iter().enumerate() {
                let pbase = format!("{base}.packages[{j}]");
                if pkg.name.trim().is_empty() {
                    self.push(
                        format!("{pbase}.name"),
                        "is empty; name the operator package".into(),
                    );
                } else if let Some(first) = packages.insert(&pkg.name, j) {
                    self.push(
                        format!("{pbase}.name"),
                        format!(
                            "package {} is listed twice in this catalog (also {base}.packages[{first}]); oc-mirror refuses duplicates: merge them",
                            quote(&pkg.name)
                        ),
                    );
                }
                let pkg_range = range_field(&pkg.min_version, &pkg.max_version);
                if op.full {
                    if let Some(field) = pkg_range {
                        self.push(
                            format!("{pbase}.{field}"),
                            format!("cannot be combined with `full: true` on {base} (oc-mirror: \"Full: true cannot be mixed with versionRange\"); full mirrors every version, so remove full or the version range"),
                        );
                    }
                }
                self.channels_of(op, &base, &pbase, pkg, pkg_range);
            }
        }
    }

    /// A package's channels: named, listed once, version ranges not mixed with `full` or with
    /// the package's own range.
    fn channels_of(
        &mut self,
        op: &Operator,
        base: &str,
        pbase: &str,
        pkg: &IncludePackage,
        pkg_range: Option<&'static str>,
    ) {
        let mut channels: HashMap<&str, usize> = HashMap::new();
        for (k, ch) in pkg.channels.iter().enumerate() {
            let cbase = format!("{pbase}.channels[{k}]");
            if ch.name.trim().is_empty() {
                self.push(format!("{cbase}.name"), "is empty; name the channel".into());
            } else if let Some(first) = channels.insert(&ch.name, k) {
                self.push(
                    format!("{cbase}.name"),
                    format!(
                        "channel {} is listed twice in package {} (also {pbase}.channels[{first}]); oc-mirror refuses duplicates: merge them",
                        quote(&ch.name),
                        quote(&pkg.name)
                    ),
                );
            }
            if let Some(field) = range_field(&ch.min_version, &ch.max_version) {
                if op.full {
                    self.push(
                        format!("{cbase}.{field}"),
                        format!("cannot be combined with `full: true` on {base} (oc-mirror: \"Full: true cannot be mixed with versionRange\"); full mirrors every version, so remove full or the version range"),
                    );
                }
                if let Some(pkg_field) = pkg_range {
                    self.push(
                        format!("{cbase}.{field}"),
                        format!("package {} already sets {pkg_field} ({pbase}.{pkg_field}); a version range goes on the package or on its channels, not both (oc-mirror refuses this too)", quote(&pkg.name)),
                    );
                }
            }
        }
    }

    fn helm(&mut self) {
        let helm = &self.config.mirror.helm;
        for (i, repo) in helm.repositories.iter().enumerate() {
            let base = format!("mirror.helm.repositories[{i}]");
            if repo.name.trim().is_empty() {
                self.push(
                    format!("{base}.name"),
                    "is empty; name the Helm repository".into(),
                );
            }
            if repo.url.trim().is_empty() {
                self.push(
                    format!("{base}.url"),
                    "is empty; give the Helm repository's URL".into(),
                );
            }
            for (j, chart) in repo.charts.iter().enumerate() {
                if chart.name.trim().is_empty() {
                    self.push(
                        format!("{base}.charts[{j}].name"),
                        "is empty; name the chart".into(),
                    );
                }
            }
        }
        for (i, chart) in helm.local.iter().enumerate() {
            if chart.name.trim().is_empty() {
                self.push(
                    format!("mirror.helm.local[{i}].name"),
                    "is empty; name the chart".into(),
                );
            }
        }
    }
}

/// Which of minVersion/maxVersion is set (the first), if any.
fn range_field(min: &Option<String>, max: &Option<String>) -> Option<&'static str> {
    let set = |v: &Option<String>| v.as_deref().is_some_and(|s| !s.is_empty());
    if set(min) {
        Some("minVersion")
    } else if set(max) {
        Some("maxVersion")
    } else {
        None
    }
}

/// The basic shape of an image reference: non-empty, no whitespace, no URL scheme.
fn reference_shape_problem(name: &str) -> Option<String> {
    const EXAMPLE: &str = "quay.io/org/image:tag or quay.io/org/image@sha256:<64 hex>";
    if name.trim().is_empty() {
        return Some(format!(
            "is empty; give the full image reference, e.g. {EXAMPLE}"
        ));
    }
    if name.chars().any(char::is_whitespace) {
        return Some(format!(
            "{} contains whitespace; an image reference has none, e.g. {EXAMPLE}",
            quote(name)
        ));
    }
    if let Some((scheme, rest)) = name.split_once("://") {
        return Some(match scheme {
            "docker" => format!(
                "{} starts with docker://; leave the scheme out: write {}",
                quote(name),
                quote(rest)
            ),
            "oci" => format!(
                "{} names a local OCI layout; bootstrap mirrors additionalImages from registries only: name the image in its registry",
                quote(name)
            ),
            _ => format!(
                "{} has a URL scheme ({scheme}://); write the bare reference, e.g. {EXAMPLE}",
                quote(name)
            ),
        });
    }
    None
}
