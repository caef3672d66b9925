//! Which bundles of a catalog one `mirror.operators[]` entry keeps, by oc-mirror v2's rules.
//!
//! oc-mirror v2 filters a catalog with the mirror filter of operator-framework's catalog
//! filter (`mirror-config/v1alpha1`); the rules below follow it, so a site moving from
//! oc-mirror gets the same bundles:
//! - no `packages` and `full: true`: the catalog as it is;
//! - no `packages` and `full: false`: every package, every channel, only each channel's head;
//! - listed packages: only those; per package, the listed channels (all when none are listed);
//!   per channel, everything with `full: true`, the version range when one is set on the
//!   channel or the package (not both; not with `full`), otherwise only the head;
//! - a version range keeps the part of the channel's replaces chain that covers every bundle
//!   in range (so the channel keeps a single head and an upgrade path), plus the in-range
//!   bundles that chain skips; `minVersion` alone runs to the channel head; `minVersion` equal
//!   to `maxVersion` keeps exactly that version;
//! - the range compares versions as Masterminds/semver does in oc-mirror: a version with a
//!   pre-release part (`4.16.0-202407111006`) only satisfies a bound that has one as well;
//! - a channel a range empties is dropped, unless it is the default channel (an error);
//! - if the kept channels do not include the package's default channel, `defaultChannel` must
//!   name one that is kept.
//!
//! Where bootstrap is stricter than oc-mirror, on purpose, because an air-gapped mirror that
//! silently lacks something is only found out on the far side: a listed package or channel the
//! catalog does not have is an error, not a warning.
//!
//! Dependencies (`olm.package.required`) are not followed by default, as in oc-mirror v2, whose
//! filter keeps only what is listed (its `skipDependencies` field is read but used nowhere):
//! each requirement of a kept bundle that no kept bundle meets is returned in
//! [`Selection::unmet`], for the caller to check against the configuration's other catalogs and
//! report. Following them is an explicit choice ([`Dependencies::Follow`]; `skipDependencies`
//! still opts one entry out): for each such requirement one bundle is added, preferring kept
//! channels, then the default channel, then channel heads, then the highest version; a package
//! pulled in this way also keeps its default channel's head, so the rebuilt catalog stays valid.
//! `olm.gvk.required` is not followed.
//!
//! The parts: `rules.rs` (a listed package's channels, entries and default channel),
//! `channel.rs` (a channel's upgrade graph), `range.rs` (version ranges), `dependencies.rs`
//! (following `olm.package.required`) and `filtered.rs` (the filtered catalog and its files).

mod channel;
mod dependencies;
mod filtered;
mod range;
mod rules;

use crate::mirror::config::Operator;
use crate::openshift::fbc::{self, Bundle, Catalog, Channel, Other, Package};
use channel::ChannelGraph;
use dependencies::{follow_dependencies, unmet};
use filtered::{build, images_of};
use rules::select_package;
use std::collections::{BTreeMap, BTreeSet};

/// Why a selection could not be made.
#[derive(Debug, thiserror::Error)]
pub enum SelectError {
    /// The operator entry asks for something the rules or this catalog refuse. `path` is the
    /// ImageSetConfiguration field path (`mirror.operators[0].packages[1].defaultChannel`);
    /// callers holding the parsed configuration can add its location with
    /// `ImageSetConfig::location(&path)`.
    #[error("{path}: {message}")]
    Config {
        /// The field path.
        path: String,
        /// What is wrong and what to write instead.
        message: String,
    },
    /// A channel's upgrade graph cannot be walked (no or several heads, a cycle, an entry
    /// without a bundle): opm would refuse the catalog too.
    #[error("{origin}: package '{package}' channel '{channel}': {message}")]
    Graph {
        /// The package.
        package: String,
        /// The channel.
        channel: String,
        /// Where the channel is defined.
        origin: fbc::Origin,
        /// What is wrong.
        message: String,
    },
}

/// Whether a selection follows `olm.package.required`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Dependencies {
    /// As oc-mirror v2: add nothing; report what the selection leaves unmet.
    #[default]
    Report,
    /// Add a bundle for each requirement the selection leaves unmet, transitively
    /// (`--follow-dependencies`), unless the entry sets `skipDependencies`.
    Follow,
}

/// A requirement (`olm.package.required`) of a kept bundle that no kept bundle meets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnmetRequirement {
    /// The requiring bundle's package.
    pub package: String,
    /// The requiring bundle.
    pub bundle: String,
    /// The required package.
    pub required: String,
    /// The required version range, as written.
    pub range: String,
    /// Why this catalog's selection does not meet it.
    pub reason: String,
}

/// What one operator entry keeps of a catalog.
#[derive(Clone, Debug, PartialEq)]
pub struct Selection {
    /// Kept packages by name; `default_channel` (and `raw.defaultChannel`) is the one to write.
    pub packages: BTreeMap<String, Package>,
    /// Kept channels by package and name, holding only the kept entries (`raw.entries` too).
    pub channels: BTreeMap<String, BTreeMap<String, Channel>>,
    /// Kept bundles by package and name.
    pub bundles: BTreeMap<String, BTreeMap<String, Bundle>>,
    /// Documents of other schemas that belong to a kept package or to none;
    /// `olm.deprecations` entries about dropped bundles and channels removed.
    pub others: Vec<Other>,
    /// Bundles added to satisfy dependencies, in the order they were added.
    pub dependencies: Vec<DependencyPick>,
    /// Requirements of kept bundles that no kept bundle meets.
    pub unmet: Vec<UnmetRequirement>,
    /// Every kept bundle's image and related images, deduplicated and sorted.
    pub images: Vec<String>,
}

/// A bundle added because a kept bundle requires its package.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DependencyPick {
    /// The added bundle's package.
    pub package: String,
    /// The added bundle.
    pub bundle: String,
    /// The channel it was kept in.
    pub channel: String,
    /// The requiring bundle's package.
    pub required_by_package: String,
    /// The requiring bundle.
    pub required_by: String,
    /// The requirement's version range.
    pub range: String,
}

/// What [`Selection::render`] does with documents of schemas it does not model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnknownSchemas {
    /// Write them (deprecations already filtered to what is kept).
    Keep,
    /// Leave them out.
    Drop,
}

/// Kept entry names, by package and channel.
type Kept = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

/// Applies `operator` (`mirror.operators[operator_index]`) to `catalog`, following
/// dependencies or not as `dependencies` says.
pub fn select(
    catalog: &Catalog,
    operator: &Operator,
    operator_index: usize,
    dependencies: Dependencies,
) -> Result<Selection, SelectError> {
    let base = format!("mirror.operators[{operator_index}]");
    if operator.packages.is_empty() && operator.full {
        return whole_catalog(catalog);
    }
    let mut kept = Kept::new();
    let mut defaults = BTreeMap::new();
    if operator.packages.is_empty() {
        for (name, channels) in &catalog.channels {
            for channel in channels.values() {
                let graph = ChannelGraph::new(channel).map_err(|m| graph_error(channel, m))?;
                kept.entry(name.clone())
                    .or_default()
                    .insert(channel.name.clone(), graph.names([graph.head]));
            }
        }
    } else {
        for (j, pkg) in operator.packages.iter().enumerate() {
            let pbase = format!("{base}.packages[{j}]");
            let (channels, default) = select_package(catalog, operator, pkg, &pbase)?;
            kept.insert(pkg.name.clone(), channels);
            defaults.insert(pkg.name.clone(), default);
        }
    }
    let (picks, unmet) = match dependencies {
        Dependencies::Follow if !operator.skip_dependencies => {
            follow_dependencies(catalog, &mut kept)?
        }
        _ => (Vec::new(), unmet(catalog, &kept)),
    };
    let mut sel = build(catalog, &kept, &defaults, picks)?;
    sel.unmet = unmet;
    Ok(sel)
}

/// The head of `channel` (the one entry nothing replaces or skips), checked as opm checks it:
/// what OLM installs for a Subscription to that channel.
pub fn channel_head(channel: &Channel) -> Result<&str, String> {
    ChannelGraph::new(channel).map(|g| channel.entries[g.head].name.as_str())
}

/// `full: true` without packages: everything, unchanged; a requirement is unmet only when the
/// catalog has nothing that meets it.
fn whole_catalog(catalog: &Catalog) -> Result<Selection, SelectError> {
    let images = images_of(catalog.bundles.values().flat_map(|b| b.values()));
    let mut kept = Kept::new();
    for channel in catalog.channels.values().flat_map(|c| c.values()) {
        let names = channel.entries.iter().map(|e| e.name.clone()).collect();
        kept.entry(channel.package.clone())
            .or_default()
            .insert(channel.name.clone(), names);
    }
    Ok(Selection {
        packages: catalog.packages.clone(),
        channels: catalog.channels.clone(),
        bundles: catalog.bundles.clone(),
        others: catalog.others.clone(),
        dependencies: Vec::new(),
        unmet: unmet(catalog, &kept),
        images,
    })
}

/// The package versions a selection keeps, to check another catalog's unmet requirements
/// against: OLM resolves a dependency from any catalog source on the cluster.
#[derive(Clone, Debug, Default)]
pub struct Provided {
    versions: BTreeMap<String, Vec<semver::Version>>,
}

impl Provided {
    /// What `selection` keeps.
    pub fn of(selection: &Selection) -> Self {
        let versions = selection
            .bundles
            .iter()
            .map(|(p, b)| (p.clone(), b.values().map(|b| b.version.clone()).collect()))
            .collect();
        Provided { versions }
    }

    /// True when a kept bundle of `package` is in `range` (blang/semver syntax; never for a
    /// range that does not parse).
    pub fn meets(&self, package: &str, range: &str) -> bool {
        let Ok(range) = range::DependencyRange::parse(range) else {
            return false;
        };
        self.versions
            .get(package)
            .is_some_and(|vs| vs.iter().any(|v| range.contains(v)))
    }
}

fn graph_error(channel: &Channel, message: String) -> SelectError {
    SelectError::Graph {
        package: channel.package.clone(),
        channel: channel.name.clone(),
        origin: channel.origin.clone(),
        message,
    }
}

fn config_error(path: String, message: String) -> SelectError {
    SelectError::Config { path, message }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mirror::config::{IncludeChannel, IncludePackage};
    use crate::openshift::fbc::tests::bundle;
    use serde_json::{json, Value};

    fn channel(package: &str, name: &str, entries: &[(&str, Option<&str>, &[&str])]) -> Value {
        let entries: Vec<Value> = entries
            .iter()
            .map(|(v, replaces, skips)| {
                let mut e = json!({"name": format!("{package}.v{v}")});
                if let Some(r) = replaces {
                    e["replaces"] = json!(format!("{package}.v{r}"));
                }
                if !skips.is_empty() {
                    let skips: Vec<String> =
                        skips.iter().map(|s| format!("{package}.v{s}")).collect();
                    e["skips"] = json!(skips);
                }
                e
            })
            .collect();
        json!({"schema": "olm.channel", "package": package, "name": name, "entries": entries})
    }

    fn package(name: &str, default: &str) -> Value {
        json!({"schema": "olm.package", "name": name, "defaultChannel": default,
               "icon": {"base64data": "iVBOR", "mediatype": "image/png"}})
    }

    const GPU: &str = "gpu-operator-certified";
    const GITOPS: &str = "openshift-gitops-operator";

    /// A small catalog shaped like the real ones:
    /// - gpu-operator-certified: `stable` runs 23.9.2 -> 24.3.0 -> 24.6.1 -> 24.6.2, where
    ///   24.6.0 also replaces 24.3.0 and 24.6.1 skips it; `v24.6` is 24.6.0 -> 24.6.1 -> 24.6.2;
    ///   `v23.9` holds 23.9.2 alone;
    /// - nfd: `stable` 4.15.0 -> 4.16.0, `4.15` with 4.15.0;
    /// - openshift-gitops-operator: `latest` 1.12.0 -> 1.13.1, where 1.13.1 requires nfd
    ///   `>=4.15.0 <4.16.0`; nfd 4.15.0 requires cert-manager `>=1.0.0`;
    /// - cert-manager: `stable` 1.13.0 -> 1.14.0;
    /// - an olm.deprecations document for gpu-operator-certified and a document of a schema
    ///   nobody knows, belonging to no package.
    fn catalog() -> Catalog {
        let gpu_related = &["driver", "toolkit", "device-plugin"][..];
        let docs = vec![
            package(GPU, "stable"),
            channel(
                GPU,
                "stable",
                &[
                    ("23.9.2", None, &[]),
                    ("24.3.0", Some("23.9.2"), &[]),
                    ("24.6.0", Some("24.3.0"), &[]),
                    ("24.6.1", Some("24.3.0"), &["24.6.0"]),
                    ("24.6.2", Some("24.6.1"), &[]),
                ],
            ),
            channel(
                GPU,
                "v24.6",
                &[
                    ("24.6.0", None, &[]),
                    ("24.6.1", Some("24.6.0"), &[]),
                    ("24.6.2", Some("24.6.1"), &[]),
                ],
            ),
            channel(GPU, "v23.9", &[("23.9.2", None, &[])]),
            bundle(GPU, "23.9.2", gpu_related, &[]),
            bundle(GPU, "24.3.0", gpu_related, &[]),
            bundle(GPU, "24.6.0", gpu_related, &[]),
            bundle(GPU, "24.6.1", gpu_related, &[]),
            bundle(GPU, "24.6.2", gpu_related, &[]),
            json!({"schema": "olm.deprecations", "package": GPU, "entries": [
                {"reference": {"schema": "olm.bundle", "name": "gpu-operator-certified.v23.9.2"}, "message": "23.9 is out of support"},
                {"reference": {"schema": "olm.channel", "name": "v23.9"}, "message": "use stable"},
            ]}),
            package("nfd", "stable"),
            channel(
                "nfd",
                "stable",
                &[("4.15.0", None, &[]), ("4.16.0", Some("4.15.0"), &[])],
            ),
            channel("nfd", "4.15", &[("4.15.0", None, &[])]),
            bundle(
                "nfd",
                "4.15.0",
                &["operator"],
                &[("cert-manager", ">=1.0.0")],
            ),
            bundle("nfd", "4.16.0", &["operator"], &[]),
            package(GITOPS, "latest"),
            channel(
                GITOPS,
                "latest",
                &[("1.12.0", None, &[]), ("1.13.1", Some("1.12.0"), &[])],
            ),
            bundle(GITOPS, "1.12.0", &["argocd"], &[]),
            bundle(
                GITOPS,
                "1.13.1",
                &["argocd"],
                &[("nfd", ">=4.15.0 <4.16.0")],
            ),
            package("cert-manager", "stable"),
            channel(
                "cert-manager",
                "stable",
                &[("1.13.0", None, &[]), ("1.14.0", Some("1.13.0"), &[])],
            ),
            bundle("cert-manager", "1.13.0", &[], &[]),
            bundle("cert-manager", "1.14.0", &[], &[]),
            json!({"schema": "example.com.notes", "text": "kept or dropped as a whole"}),
        ];
        let mut bytes = Vec::new();
        for d in docs {
            bytes.extend(serde_json::to_vec(&d).unwrap());
            bytes.push(b'\n');
        }
        Catalog::parse(&BTreeMap::from([("index/catalog.json".to_string(), bytes)])).unwrap()
    }

    fn operator(packages: Vec<IncludePackage>) -> Operator {
        Operator {
            catalog: "registry.redhat.io/redhat/certified-operator-index:v4.16".into(),
            packages,
            ..Operator::default()
        }
    }

    fn pkg(name: &str) -> IncludePackage {
        IncludePackage {
            name: name.into(),
            ..IncludePackage::default()
        }
    }

    fn chan(name: &str) -> IncludeChannel {
        IncludeChannel {
            name: name.into(),
            ..IncludeChannel::default()
        }
    }

    fn some(s: &str) -> Option<String> {
        Some(s.to_string())
    }

    /// Kept entries of one channel, as versions.
    fn entries<'a>(sel: &'a Selection, package: &str, channel: &str) -> Vec<&'a str> {
        sel.channels[package][channel]
            .entries
            .iter()
            .map(|e| e.name.rsplit_once(".v").map_or(e.name.as_str(), |(_, v)| v))
            .collect()
    }

    fn versions<'a>(sel: &'a Selection, package: &str) -> Vec<&'a str> {
        sel.bundles
            .get(package)
            .map(|b| {
                b.values()
                    .map(|b| b.name.rsplit_once(".v").unwrap().1)
                    .collect()
            })
            .unwrap_or_default()
    }

    fn select_err(op: &Operator) -> String {
        select(&catalog(), op, 0, Dependencies::Report)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn heads_only_for_every_package_without_packages() {
        let sel = select(&catalog(), &operator(vec![]), 0, Dependencies::Report).unwrap();
        assert_eq!(entries(&sel, GPU, "stable"), vec!["24.6.2"]);
        assert_eq!(entries(&sel, GPU, "v24.6"), vec!["24.6.2"]);
        assert_eq!(entries(&sel, GPU, "v23.9"), vec!["23.9.2"]);
        assert_eq!(versions(&sel, GPU), vec!["23.9.2", "24.6.2"]);
        assert_eq!(entries(&sel, "nfd", "stable"), vec!["4.16.0"]);
        assert_eq!(entries(&sel, "nfd", "4.15"), vec!["4.15.0"]);
        assert_eq!(versions(&sel, GITOPS), vec!["1.13.1"]);
        assert_eq!(versions(&sel, "cert-manager"), vec!["1.14.0"]);
        // Every requirement is already met by a channel head: nothing added, nothing unmet.
        assert!(sel.dependencies.is_empty(), "{:?}", sel.dependencies);
        assert!(sel.unmet.is_empty(), "{:?}", sel.unmet);
        assert_eq!(sel.packages[GPU].default_channel, "stable");
        assert_eq!(sel.others.len(), 2);
    }

    #[test]
    fn heads_only_for_a_listed_package_covers_all_its_channels() {
        let sel = select(
            &catalog(),
            &operator(vec![pkg(GPU)]),
            0,
            Dependencies::Report,
        )
        .unwrap();
        assert_eq!(sel.packages.keys().collect::<Vec<_>>(), vec![GPU]);
        let channels: Vec<&String> = sel.channels[GPU].keys().collect();
        assert_eq!(channels, vec!["stable", "v23.9", "v24.6"]);
        assert_eq!(versions(&sel, GPU), vec!["23.9.2", "24.6.2"]);
    }

    #[test]
    fn min_version_alone_runs_to_the_channel_head() {
        let mut p = pkg(GPU);
        p.min_version = some("24.6.0");
        let sel = select(&catalog(), &operator(vec![p]), 0, Dependencies::Report).unwrap();
        // 24.6.0 is not on stable's replaces chain: it is kept because 24.6.1 skips it.
        assert_eq!(
            entries(&sel, GPU, "stable"),
            vec!["24.6.0", "24.6.1", "24.6.2"]
        );
        assert_eq!(
            entries(&sel, GPU, "v24.6"),
            vec!["24.6.0", "24.6.1", "24.6.2"]
        );
        // v23.9 has nothing in range and is not the default channel: dropped, as oc-mirror does.
        assert!(!sel.channels[GPU].contains_key("v23.9"));
        assert_eq!(versions(&sel, GPU), vec!["24.6.0", "24.6.1", "24.6.2"]);
    }

    #[test]
    fn min_and_max_version_keep_the_range() {
        let mut c = chan("stable");
        c.min_version = some("24.3.0");
        c.max_version = some("24.6.1");
        let mut p = pkg(GPU);
        p.channels = vec![c];
        let sel = select(&catalog(), &operator(vec![p]), 0, Dependencies::Report).unwrap();
        assert_eq!(
            entries(&sel, GPU, "stable"),
            vec!["24.3.0", "24.6.0", "24.6.1"]
        );
        assert_eq!(sel.channels[GPU].len(), 1);
        assert_eq!(versions(&sel, GPU), vec!["24.3.0", "24.6.0", "24.6.1"]);
    }

    #[test]
    fn equal_min_and_max_keep_exactly_that_version() {
        let mut p = pkg(GPU);
        p.min_version = some("24.6.0");
        p.max_version = some("24.6.0");
        let sel = select(&catalog(), &operator(vec![p]), 0, Dependencies::Report).unwrap();
        assert_eq!(entries(&sel, GPU, "stable"), vec!["24.6.0"]);
        assert_eq!(entries(&sel, GPU, "v24.6"), vec!["24.6.0"]);
        let mut p = pkg(GPU);
        p.min_version = some("24.6.9");
        p.max_version = some("24.6.9");
        let e = select_err(&operator(vec![p]));
        assert_eq!(
            e,
            "mirror.operators[0].packages[0].minVersion: no bundle of package 'gpu-operator-certified' has version 24.6.9"
        );
    }

    #[test]
    fn full_keeps_every_entry_of_the_listed_packages() {
        let mut op = operator(vec![pkg(GPU)]);
        op.full = true;
        op.skip_dependencies = true;
        let sel = select(&catalog(), &op, 0, Dependencies::Report).unwrap();
        assert_eq!(
            entries(&sel, GPU, "stable"),
            vec!["23.9.2", "24.3.0", "24.6.0", "24.6.1", "24.6.2"]
        );
        assert_eq!(entries(&sel, GPU, "v23.9"), vec!["23.9.2"]);
        assert_eq!(sel.bundles[GPU].len(), 5);
        assert_eq!(sel.packages.len(), 1);
    }

    #[test]
    fn full_without_packages_is_the_whole_catalog() {
        let c = catalog();
        let mut op = operator(vec![]);
        op.full = true;
        let sel = select(&c, &op, 0, Dependencies::Report).unwrap();
        assert_eq!(sel.packages, c.packages);
        assert_eq!(sel.channels, c.channels);
        assert_eq!(sel.bundles, c.bundles);
        assert_eq!(sel.others, c.others);
    }

    #[test]
    fn package_and_channel_range_together_is_an_error() {
        let mut c = chan("stable");
        c.max_version = some("24.6.1");
        let mut p = pkg(GPU);
        p.min_version = some("24.3.0");
        p.channels = vec![c];
        let e = select_err(&operator(vec![p]));
        assert_eq!(
            e,
            "mirror.operators[0].packages[0].channels[0].maxVersion: package 'gpu-operator-certified' already sets a version range (mirror.operators[0].packages[0].minVersion); a version range goes on the package or on its channels, not both (oc-mirror refuses this too)"
        );
    }

    #[test]
    fn full_with_a_range_is_an_error() {
        let mut p = pkg(GPU);
        p.max_version = some("24.6.1");
        let mut op = operator(vec![p]);
        op.full = true;
        let e = select_err(&op);
        assert!(
            e.starts_with(
                "mirror.operators[0].packages[0].maxVersion: cannot be combined with `full: true`"
            ),
            "{e}"
        );
        let mut c = chan("stable");
        c.min_version = some("24.3.0");
        let mut p = pkg(GPU);
        p.channels = vec![c];
        let mut op = operator(vec![pkg("nfd"), p]);
        op.full = true;
        let e = select_err(&op);
        assert!(
            e.starts_with("mirror.operators[0].packages[1].channels[0].minVersion: cannot be combined with `full: true`"),
            "{e}"
        );
    }

    #[test]
    fn dropping_the_default_channel_needs_default_channel() {
        let mut p = pkg(GPU);
        p.channels = vec![chan("v24.6")];
        let op = operator(vec![pkg("nfd"), p.clone()]);
        assert_eq!(
            select_err(&op),
            "mirror.operators[0].packages[1].defaultChannel: package 'gpu-operator-certified' has default channel 'stable' in the catalog, but that channel is not mirrored (kept: v24.6); set defaultChannel to one of the kept channels"
        );
        p.default_channel = some("v23.9");
        let op = operator(vec![pkg("nfd"), p.clone()]);
        assert_eq!(
            select_err(&op),
            "mirror.operators[0].packages[1].defaultChannel: channel 'v23.9' is not among the channels mirrored for package 'gpu-operator-certified' (v24.6); name one of them"
        );
        p.default_channel = some("v24.6");
        let sel = select(
            &catalog(),
            &operator(vec![pkg("nfd"), p]),
            0,
            Dependencies::Report,
        )
        .unwrap();
        assert_eq!(sel.packages[GPU].default_channel, "v24.6");
        assert_eq!(sel.packages[GPU].raw["defaultChannel"], "v24.6");
        assert_eq!(entries(&sel, GPU, "v24.6"), vec!["24.6.2"]);
        // The rebuilt catalog says so too.
        let files = sel.render(UnknownSchemas::Keep);
        let docs = fbc::parse_file("x.json", &files["gpu-operator-certified/catalog.json"])
            .unwrap()
            .unwrap();
        assert_eq!(docs[0]["defaultChannel"], "v24.6");
    }

    #[test]
    fn a_range_that_empties_the_default_channel_is_an_error() {
        let mut p = pkg(GPU);
        p.min_version = some("25.0.0");
        let e = select_err(&operator(vec![p]));
        assert_eq!(
            e,
            "mirror.operators[0].packages[0].minVersion: minVersion 25.0.0 leaves no bundle in channel 'stable', the default channel of package 'gpu-operator-certified'"
        );
    }

    /// oc-mirror v2's filter keeps only what is listed: gitops 1.13.1 requires nfd
    /// `>=4.15.0 <4.16.0`, and by default nfd is not added; the requirement is reported, naming
    /// the bundle and the range, and why the selection does not meet it.
    #[test]
    fn dependencies_are_not_followed_by_default_but_reported() {
        let sel = select(
            &catalog(),
            &operator(vec![pkg(GITOPS)]),
            0,
            Dependencies::Report,
        )
        .unwrap();
        assert_eq!(sel.packages.keys().collect::<Vec<_>>(), vec![GITOPS]);
        assert!(sel.dependencies.is_empty());
        assert_eq!(
            sel.unmet,
            vec![UnmetRequirement {
                package: GITOPS.into(),
                bundle: "openshift-gitops-operator.v1.13.1".into(),
                required: "nfd".into(),
                range: ">=4.15.0 <4.16.0".into(),
                reason: "the catalog has such a bundle of 'nfd', but the selection leaves it out"
                    .into(),
            }]
        );
        // nfd listed with channel stable, whose head 4.16.0 is out of range: still unmet, and
        // the kept nfd 4.16.0 has no requirement of its own.
        let mut p = pkg("nfd");
        p.channels = vec![chan("stable")];
        let sel = select(
            &catalog(),
            &operator(vec![pkg(GITOPS), p]),
            0,
            Dependencies::Report,
        )
        .unwrap();
        assert_eq!(versions(&sel, "nfd"), vec!["4.16.0"]);
        assert_eq!(sel.unmet.len(), 1);
        // nfd listed with channel 4.15: met by what is listed. Its own requirement
        // (cert-manager >=1.0.0) is then unmet in turn.
        let mut p = pkg("nfd");
        p.channels = vec![chan("4.15")];
        p.default_channel = some("4.15");
        let sel = select(
            &catalog(),
            &operator(vec![pkg(GITOPS), p]),
            0,
            Dependencies::Report,
        )
        .unwrap();
        let unmet: Vec<(&str, &str)> = sel
            .unmet
            .iter()
            .map(|u| (u.bundle.as_str(), u.required.as_str()))
            .collect();
        assert_eq!(unmet, vec![("nfd.v4.15.0", "cert-manager")]);
    }

    #[test]
    fn dependencies_are_followed_transitively_when_asked() {
        let sel = select(
            &catalog(),
            &operator(vec![pkg(GITOPS)]),
            0,
            Dependencies::Follow,
        )
        .unwrap();
        assert!(sel.unmet.is_empty(), "{:?}", sel.unmet);
        assert_eq!(versions(&sel, GITOPS), vec!["1.13.1"]);
        // nfd: its default channel's head (so the package stays valid), plus 4.15.0, which the
        // range needs, in that same channel (a kept channel beats adding channel 4.15).
        assert_eq!(entries(&sel, "nfd", "stable"), vec!["4.15.0", "4.16.0"]);
        assert!(!sel.channels["nfd"].contains_key("4.15"));
        // nfd 4.15.0 requires cert-manager >=1.0.0: its default head satisfies it.
        assert_eq!(versions(&sel, "cert-manager"), vec!["1.14.0"]);
        let picks: Vec<(&str, &str, &str)> = sel
            .dependencies
            .iter()
            .map(|d| {
                (
                    d.required_by.as_str(),
                    d.package.as_str(),
                    d.bundle.as_str(),
                )
            })
            .collect();
        assert_eq!(
            picks,
            vec![
                ("openshift-gitops-operator.v1.13.1", "nfd", "nfd.v4.15.0"),
                ("nfd.v4.15.0", "cert-manager", "cert-manager.v1.14.0"),
            ]
        );
        assert!(sel.images.iter().any(|i| i.contains("/nfd/operator@")));
    }

    #[test]
    fn dependency_is_met_by_a_head_when_one_satisfies_it() {
        // nfd listed with channel 4.15 only: that channel's head satisfies gitops; nothing added.
        let mut p = pkg("nfd");
        p.channels = vec![chan("4.15")];
        p.default_channel = some("4.15");
        let sel = select(
            &catalog(),
            &operator(vec![pkg(GITOPS), p]),
            0,
            Dependencies::Follow,
        )
        .unwrap();
        assert_eq!(entries(&sel, "nfd", "4.15"), vec!["4.15.0"]);
        assert!(!sel.channels["nfd"].contains_key("stable"));
        assert!(sel.dependencies.iter().all(|d| d.package != "nfd"));
        // nfd not listed, its default channel 4.15: the default channel's head is taken.
        let mut c = catalog();
        c.packages.get_mut("nfd").unwrap().default_channel = "4.15".into();
        let sel = select(&c, &operator(vec![pkg(GITOPS)]), 0, Dependencies::Follow).unwrap();
        assert_eq!(sel.channels["nfd"].keys().collect::<Vec<_>>(), vec!["4.15"]);
        assert_eq!(
            (
                sel.dependencies[0].channel.as_str(),
                sel.dependencies[0].bundle.as_str()
            ),
            ("4.15", "nfd.v4.15.0")
        );
    }

    /// `skipDependencies: true` opts one entry out of `--follow-dependencies`; what it leaves
    /// unmet is still reported.
    #[test]
    fn skip_dependencies_does_not_follow_them() {
        let mut op = operator(vec![pkg(GITOPS)]);
        op.skip_dependencies = true;
        let sel = select(&catalog(), &op, 0, Dependencies::Follow).unwrap();
        assert_eq!(sel.packages.keys().collect::<Vec<_>>(), vec![GITOPS]);
        assert!(sel.dependencies.is_empty());
        assert_eq!(sel.unmet.len(), 1);
    }

    /// A requirement this catalog cannot meet may be met by another catalog of the
    /// configuration (OLM resolves across catalog sources): reported, never refused, whether
    /// dependencies are followed or not.
    #[test]
    fn unsatisfiable_dependency_is_reported_not_refused() {
        let mut c = catalog();
        c.bundles
            .get_mut(GITOPS)
            .unwrap()
            .get_mut("openshift-gitops-operator.v1.13.1")
            .unwrap()
            .dependencies[0]
            .version_range = ">=9.0.0".into();
        c.bundles
            .get_mut("nfd")
            .unwrap()
            .get_mut("nfd.v4.15.0")
            .unwrap()
            .dependencies[0]
            .package = "cert-utils-operator".into();
        let mut p = pkg("nfd");
        p.channels = vec![chan("4.15")];
        p.default_channel = some("4.15");
        for deps in [Dependencies::Report, Dependencies::Follow] {
            let sel = select(&c, &operator(vec![pkg(GITOPS), p.clone()]), 3, deps).unwrap();
            assert!(sel.dependencies.is_empty(), "{deps:?}");
            let unmet: Vec<(&str, &str, &str)> = sel
                .unmet
                .iter()
                .map(|u| (u.bundle.as_str(), u.range.as_str(), u.reason.as_str()))
                .collect();
            assert_eq!(
                unmet,
                vec![
                    (
                        "nfd.v4.15.0",
                        ">=1.0.0",
                        "the catalog has no package 'cert-utils-operator'"
                    ),
                    (
                        "openshift-gitops-operator.v1.13.1",
                        ">=9.0.0",
                        "no bundle of 'nfd' in the catalog satisfies it"
                    ),
                ],
                "{deps:?}"
            );
        }
    }

    /// What another catalog's selection keeps meets a requirement when a kept version is in
    /// its range.
    #[test]
    fn provided_meets_a_requirement_in_range() {
        let mut p = pkg("nfd");
        p.channels = vec![chan("stable")];
        let sel = select(&catalog(), &operator(vec![p]), 0, Dependencies::Report).unwrap();
        let provided = Provided::of(&sel);
        assert!(provided.meets("nfd", ">=4.16.0"));
        assert!(!provided.meets("nfd", ">=4.15.0 <4.16.0"));
        assert!(!provided.meets("cert-manager", ">=1.0.0"));
        assert!(!provided.meets("nfd", "not a range"));
    }

    #[test]
    fn every_related_image_of_a_kept_bundle_is_listed_once() {
        let mut p = pkg(GPU);
        p.channels = vec![chan("stable")];
        let sel = select(&catalog(), &operator(vec![p]), 0, Dependencies::Report).unwrap();
        let expected: Vec<String> = ["bundle", "device-plugin", "driver", "toolkit"]
            .iter()
            .map(|r| format!("registry.example.com/gpu-operator-certified/{r}@sha256:24.6.2"))
            .collect();
        // The bundle image is both `image` and a relatedImage: listed once.
        assert_eq!(sel.images, expected);
        for b in sel.bundles.values().flat_map(|b| b.values()) {
            assert!(sel.images.contains(&b.image));
            for r in &b.related_images {
                assert!(sel.images.contains(&r.image), "{}", r.image);
            }
        }
    }

    #[test]
    fn unknown_package_and_channel_are_errors() {
        let e = select_err(&operator(vec![pkg(GPU), pkg("gpu-operator")]));
        assert!(
            e.starts_with(
                "mirror.operators[0].packages[1].name: the catalog has no package 'gpu-operator'"
            ),
            "{e}"
        );
        let mut p = pkg(GPU);
        p.channels = vec![chan("stable"), chan("v24.9")];
        assert_eq!(
            select_err(&operator(vec![p])),
            "mirror.operators[0].packages[0].channels[1].name: package 'gpu-operator-certified' has no channel 'v24.9'; its channels are: stable, v23.9, v24.6"
        );
        let mut p = pkg(GPU);
        p.min_version = some("latest");
        assert!(select_err(&operator(vec![p]))
            .starts_with("mirror.operators[0].packages[0].minVersion: 'latest' is not a version"));
    }

    #[test]
    fn a_channel_with_two_heads_is_an_error() {
        let mut c = catalog();
        let stable = c
            .channels
            .get_mut("nfd")
            .unwrap()
            .get_mut("stable")
            .unwrap();
        stable.entries[1].replaces = None;
        let e = select(&c, &operator(vec![pkg("nfd")]), 0, Dependencies::Report).unwrap_err();
        assert!(matches!(e, SelectError::Graph { .. }));
        assert_eq!(
            e.to_string(),
            "index/catalog.json: document 12: package 'nfd' channel 'stable': has several heads (entries nothing replaces or skips): nfd.v4.15.0, nfd.v4.16.0; opm refuses such a channel"
        );
    }

    #[test]
    fn a_cycle_is_an_error_not_a_hang() {
        let mut c = catalog();
        let stable = c
            .channels
            .get_mut("cert-manager")
            .unwrap()
            .get_mut("stable")
            .unwrap();
        let mut third = stable.entries[0].clone();
        third.name = "cert-manager.v1.12.0".into();
        third.replaces = Some("cert-manager.v1.13.0".into());
        stable.entries[0].replaces = Some("cert-manager.v1.12.0".into());
        stable.entries.push(third);
        let e = select(
            &c,
            &operator(vec![pkg("cert-manager")]),
            0,
            Dependencies::Report,
        )
        .unwrap_err();
        assert!(
            e.to_string().ends_with("the upgrade graph has a cycle"),
            "{e}"
        );
    }

    #[test]
    fn render_is_ordered_filtered_and_deterministic() {
        let mut p = pkg(GPU);
        p.min_version = some("24.6.0");
        let sel = select(&catalog(), &operator(vec![p]), 0, Dependencies::Report).unwrap();
        let files = sel.render(UnknownSchemas::Keep);
        assert_eq!(
            files.keys().collect::<Vec<_>>(),
            vec!["catalog.json", "gpu-operator-certified/catalog.json"]
        );
        assert_eq!(files, sel.render(UnknownSchemas::Keep));
        let docs = fbc::parse_file("x.json", &files["gpu-operator-certified/catalog.json"])
            .unwrap()
            .unwrap();
        let summary: Vec<(&str, &str)> = docs
            .iter()
            .map(|d| {
                (
                    d["schema"].as_str().unwrap(),
                    d.get("name").and_then(Value::as_str).unwrap_or(""),
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                ("olm.package", GPU),
                ("olm.channel", "stable"),
                ("olm.channel", "v24.6"),
                ("olm.bundle", "gpu-operator-certified.v24.6.0"),
                ("olm.bundle", "gpu-operator-certified.v24.6.1"),
                ("olm.bundle", "gpu-operator-certified.v24.6.2"),
            ]
        );
        // The deprecations are about 23.9.2 and v23.9, both dropped: the document goes too.
        assert!(!files["gpu-operator-certified/catalog.json"]
            .windows(16)
            .any(|w| w == b"olm.deprecations"));
        // Fields not modelled (icon) survive; the rebuilt catalog parses as a catalog.
        assert!(docs[0].contains_key("icon"));
        let rebuilt = Catalog::parse(&files).unwrap();
        assert_eq!(rebuilt.bundles[GPU].len(), 3);
        assert_eq!(rebuilt.others.len(), 1);
        // Drop leaves unknown schemas out.
        let files = sel.render(UnknownSchemas::Drop);
        assert_eq!(files.len(), 1);
    }

    #[test]
    fn deprecations_about_kept_things_are_kept() {
        let sel = select(
            &catalog(),
            &operator(vec![pkg(GPU)]),
            0,
            Dependencies::Report,
        )
        .unwrap();
        let dep = sel
            .others
            .iter()
            .find(|o| o.schema == "olm.deprecations")
            .unwrap();
        assert_eq!(dep.raw["entries"].as_array().unwrap().len(), 2);
        let mut p = pkg(GPU);
        p.channels = vec![chan("stable"), chan("v23.9")];
        p.min_version = None;
        let sel = select(&catalog(), &operator(vec![p]), 0, Dependencies::Report).unwrap();
        let dep = sel
            .others
            .iter()
            .find(|o| o.schema == "olm.deprecations")
            .unwrap();
        // 23.9.2 is kept (head of v23.9), and so is the channel.
        assert_eq!(dep.raw["entries"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn pre_release_hint_when_a_plain_bound_matches_nothing() {
        let mut c = catalog();
        for b in c.bundles.get_mut("nfd").unwrap().values_mut() {
            b.version.pre = semver::Prerelease::new("202407111006").unwrap();
        }
        let mut p = pkg("nfd");
        p.min_version = some("4.15.0");
        let e = select(&c, &operator(vec![p]), 0, Dependencies::Report)
            .unwrap_err()
            .to_string();
        assert!(
            e.ends_with("(its versions have pre-release parts, such as 4.15.0-202407111006, and, as in oc-mirror, a bound without one does not match them: write the bound with one, e.g. 4.15.0-0)"),
            "{e}"
        );
    }
}
