//! The rules a parsed ImageSetConfiguration must follow: those oc-mirror checks (no duplicate
//! channels, catalogs or packages, a `targetCatalog` that is a repository path, version ranges
//! not mixed with `full`), and bootstrap's own (image references, architectures, blocked-image
//! patterns, no two catalogs mirrored to one place), all reported at once.

use super::layout_catalog::{single_slash_refusal, LayoutCatalog};
use super::{ImageSetConfig, IncludePackage, Operator, Problem, ARCHITECTURES};
use crate::oci::reference::{valid_repository, ImageRef};
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
    v.platform_lists();
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
    /// repository, tag, digest) and reports through [`super::ImageEntry::error`].
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
    ///
    /// oc-mirror matches the patterns against references with their transport cut off
    /// (`excludeImages` in internal/pkg/cli/executor.go) and leaves the pattern as written, so
    /// a pattern holding `docker://` blocks nothing there. Mirroring what a site meant to keep
    /// out is the one outcome worse than a refused file, so it is refused rather than guessed.
    fn blocked_images(&mut self) {
        for (i, img) in self.config.mirror.blocked_images.iter().enumerate() {
            let path = format!("mirror.blockedImages[{i}].name");
            if img.name.trim().is_empty() {
                self.push(
                    path,
                    "is empty; give the image (pattern) to block, or remove the entry".into(),
                );
            } else if let Some((scheme, _)) = img.name.split_once("://") {
                let scheme = scheme.rsplit(['^', '(', '|']).next().unwrap_or(scheme);
                self.push(
                    path,
                    format!(
                        "{} holds {scheme}://, but oc-mirror matches blockedImages against references without a transport (quay.io/org/image:tag), so there this pattern blocks nothing: write {} to block what it names, or remove the entry",
                        quote(&img.name),
                        quote(&img.name.replacen(&format!("{scheme}://"), "", 1))
                    ),
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

    /// Every `platforms` list (the release's, each catalog's, each additional image's): an
    /// entry needs an OS and an architecture, as oc-mirror's `ValidatePlatforms` checks.
    fn platform_lists(&mut self) {
        let m = &self.config.mirror;
        let mut lists = vec![(
            "mirror.platform.platforms".to_string(),
            &m.platform.platforms,
        )];
        for (i, op) in m.operators.iter().enumerate() {
            lists.push((format!("mirror.operators[{i}].platforms"), &op.platforms));
        }
        for (i, img) in m.additional_images.iter().enumerate() {
            lists.push((
                format!("mirror.additionalImages[{i}].platforms"),
                &img.platforms,
            ));
        }
        for (list, entries) in lists {
            for (j, p) in entries.iter().enumerate() {
                for (key, value, example) in [
                    ("os", &p.os, "linux"),
                    ("architecture", &p.architecture, "arm64"),
                ] {
                    if value.trim().is_empty() {
                        self.push(
                            format!("{list}[{j}].{key}"),
                            format!("is empty; name the platform's {key}, e.g. {example}"),
                        );
                    }
                }
            }
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
        let mut destinations: HashMap<CatalogDestination, usize> = HashMap::new();
        for (i, op) in self.config.mirror.operators.iter().enumerate() {
            let base = format!("mirror.operators[{i}]");
            if op.catalog.trim().is_empty() {
                self.push(
                    format!("{base}.catalog"),
                    "is empty; name the catalog image, e.g. registry.redhat.io/redhat/redhat-operator-index:v4.16".into(),
                );
            }
            if let Some(why) = layout_catalog_problem(op) {
                self.push(format!("{base}.catalog"), why);
            }
            let target_ok = self.target_catalog(&base, op);
            if let Some(dest) = CatalogDestination::of(op).filter(|_| target_ok) {
                if let Some(&first) = destinations.get(&dest) {
                    self.same_destination(&base, op, first, &dest);
                } else {
                    destinations.insert(dest, i);
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

    /// oc-mirror's rule for `targetCatalog` (`IsValidPathComponent` in
    /// internal/pkg/api/v2alpha1/type_config.go, checked at load through `GetUniqueName`): a
    /// repository path, lower case, without tag or digest. False when it is not one.
    fn target_catalog(&mut self, base: &str, op: &Operator) -> bool {
        let Some(target) = op.target_catalog.as_deref().filter(|t| !t.is_empty()) else {
            return true;
        };
        if valid_repository(target) {
            return true;
        }
        let (path, digest) = match target.split_once('@') {
            Some((p, d)) => (p, Some(d)),
            None => (target, None),
        };
        let last_slash = path.rfind('/').map_or(0, |i| i + 1);
        let (path, tag) = match path[last_slash..].find(':') {
            Some(i) => (&path[..last_slash + i], Some(&path[last_slash + i + 1..])),
            None => (path, None),
        };
        let mut faults = Vec::new();
        if tag.is_some() {
            faults.push("a tag");
        }
        if digest.is_some() {
            faults.push("a digest");
        }
        if path.chars().any(|c| c.is_ascii_uppercase()) {
            faults.push("upper-case letters");
        }
        let lower = path.to_ascii_lowercase();
        let fix = if valid_repository(&lower) {
            match tag.filter(|t| !t.is_empty()) {
                Some(t) => format!("write `targetCatalog: {lower}` and `targetTag: {t}`"),
                None => format!("write `targetCatalog: {lower}`"),
            }
        } else {
            "write one or more path components of lower-case letters and digits, separated by '.', '_', '__' or '-', joined by '/', e.g. my-org/redhat-operators (put a tag in targetTag)".into()
        };
        let what = if faults.is_empty() {
            "is not a repository path".to_string()
        } else {
            format!("has {}", faults.join(" and "))
        };
        self.push(
            format!("{base}.targetCatalog"),
            format!(
                "{} {what}; targetCatalog is the catalog's repository path under the destination, and oc-mirror refuses this too (\"invalid target path component: should not contain a tag or digest\"): {fix}",
                quote(target)
            ),
        );
        false
    }

    /// A catalog mirrored where an earlier one already goes: pushed second, it would replace
    /// the first, whose operators would then vanish from the cluster.
    fn same_destination(
        &mut self,
        base: &str,
        op: &Operator,
        first: usize,
        dest: &CatalogDestination,
    ) {
        let earlier = &self.config.mirror.operators[first];
        let same_entry = earlier.catalog == op.catalog
            && earlier.target_catalog == op.target_catalog
            && earlier.target_tag == op.target_tag;
        if same_entry {
            self.push(
                format!("{base}.catalog"),
                format!(
                    "catalog {} is listed twice (also mirror.operators[{first}]) with the same target; oc-mirror refuses duplicates: merge their packages",
                    quote(&op.catalog)
                ),
            );
            return;
        }
        let field = if op.target_catalog.as_deref().is_some_and(|t| !t.is_empty()) {
            "targetCatalog"
        } else {
            "catalog"
        };
        // oc-mirror compares the catalogs' references with the target applied, registry
        // included (`GetUniqueName`); bootstrap places by path alone, so it also catches two
        // registries' catalogs meeting at one path, which oc-mirror lets overwrite each other.
        let oc_mirror = if same_registry(earlier, op) {
            " (oc-mirror refuses this too: \"duplicate found in configuration\")"
        } else {
            ""
        };
        self.push(
            format!("{base}.{field}"),
            format!(
                "catalog {} would be mirrored to {}, where mirror.operators[{first}] ({}) is mirrored too: pushed second, it would replace that catalog, whose operators would vanish from the cluster{oc_mirror}; give one of them another targetCatalog or targetTag",
                quote(&op.catalog),
                dest,
                quote(&earlier.catalog)
            ),
        );
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

/// Where a catalog lands under the destination: its repository path (`targetCatalog`, else the
/// source's path) and its tag (`targetTag`, else the source's tag), or for a catalog by digest
/// only, that digest. The registry is not part of it: every source registry's content goes
/// under the one destination prefix.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct CatalogDestination {
    repository: String,
    tag_or_digest: String,
}

impl CatalogDestination {
    /// `None` for a catalog whose reference does not parse (the reference parser reports it)
    /// or that is read from an OCI layout.
    fn of(op: &Operator) -> Option<Self> {
        if let Some(layout) = LayoutCatalog::parse(&op.catalog) {
            let layout = layout.ok()?;
            return Some(CatalogDestination {
                repository: layout.repository(op),
                tag_or_digest: LayoutCatalog::tag(op),
            });
        }
        let source = ImageRef::parse(&op.catalog).ok()?;
        let repository = op
            .target_catalog
            .clone()
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| source.repository.clone());
        let tag_or_digest = op
            .target_tag
            .clone()
            .filter(|t| !t.is_empty())
            .or_else(|| source.tag.clone())
            .or_else(|| source.digest.as_ref().map(|d| d.to_string()))?;
        Some(CatalogDestination {
            repository,
            tag_or_digest,
        })
    }
}

/// True when both catalogs come from one registry (then oc-mirror's own check, which compares
/// whole references with the target applied, sees their clash too).
fn same_registry(a: &Operator, b: &Operator) -> bool {
    let registry = |op: &Operator| ImageRef::parse(&op.catalog).ok().map(|r| r.registry);
    registry(a).is_some() && registry(a) == registry(b)
}

impl std::fmt::Display for CatalogDestination {
    /// `PREFIX/path:tag` or `PREFIX/path@sha256:...`, as the destination will hold it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sep = if self.tag_or_digest.contains(':') {
            '@'
        } else {
            ':'
        };
        write!(f, "'PREFIX/{}{sep}{}'", self.repository, self.tag_or_digest)
    }
}

/// Why an `oci:` catalog cannot be read: `oci:` without `//` (oc-mirror's refusal), a digest
/// that is none, or a destination repository (`targetCatalog`, else the directory's base name)
/// that is no repository name.
fn layout_catalog_problem(op: &Operator) -> Option<String> {
    if let Some(why) = single_slash_refusal(&op.catalog) {
        return Some(why);
    }
    let layout = match LayoutCatalog::parse(&op.catalog)? {
        Ok(l) => l,
        Err(why) => return Some(why),
    };
    let repository = layout.repository(op);
    (!valid_repository(&repository)).then(|| {
        format!(
            "{}: the layout directory's name {} is the catalog's repository under the destination, and it is not a repository name (lower-case letters and digits, separated by '.', '_', '__' or '-'): set targetCatalog",
            quote(&op.catalog),
            quote(&repository)
        )
    })
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
