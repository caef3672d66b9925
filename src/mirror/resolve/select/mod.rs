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
mod whole;

use crate::mirror::config::Operator;
use crate::openshift::fbc::{self, Bundle, Catalog, Channel, FbcError, Keep, Other, Package};
use crate::openshift::fbc::{Rest, Wanted};
use channel::ChannelGraph;
pub use dependencies::Provided;
use dependencies::{follow_dependencies, unmet};
use filtered::{build, images_of};
use rules::select_package;
use std::collections::{BTreeMap, BTreeSet};
pub use whole::{stream_whole, CatalogFiles};

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
    /// The catalog could not be read.
    #[error(transparent)]
    Read(#[from] FbcError),
    /// A document the selection keeps was read as an index only (a fault of the reading
    /// plan, not of the catalog).
    #[error("{0} was read as an index only, not whole: bootstrap cannot write it")]
    NotWhole(String),
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
    if operator.packages.is_empty() && operator.full {
        return whole_catalog(catalog);
    }
    let plan = plan(catalog, operator, operator_index, dependencies)?;
    plan.build(catalog)
}

/// [`select`] over a catalog read by `read` as often as needed, keeping whole only what the
/// selection needs, so memory follows the selection, not the catalog:
/// - listed packages, dependencies reported: one read, the listed packages whole, of the
///   others only their bundles' versions;
/// - listed packages, dependencies followed: one read, the listed packages whole and the rest
///   as an index; a second read for the documents of the packages the dependencies add;
/// - no packages (every channel's head): one read of the index, a second for the kept documents;
/// - `full: true` without packages: the catalog whole (the caller that writes the catalog
///   streams it instead: see [`stream_whole`]).
pub fn select_reading(
    read: &mut dyn FnMut(Keep<'_>) -> Result<Catalog, FbcError>,
    operator: &Operator,
    operator_index: usize,
    dependencies: Dependencies,
) -> Result<Selection, SelectError> {
    if operator.packages.is_empty() && operator.full {
        return whole_catalog(&read(Keep::All)?);
    }
    let listed: BTreeSet<String> = operator.packages.iter().map(|p| p.name.clone()).collect();
    let follow = dependencies == Dependencies::Follow && !operator.skip_dependencies;
    let rest = if follow || listed.is_empty() {
        Rest::Index
    } else {
        Rest::Versions
    };
    let catalog = read(Keep::Packages(&listed, rest))?;
    let plan = plan(&catalog, operator, operator_index, dependencies)?;
    if plan.kept.keys().all(|p| listed.contains(p)) {
        return plan.build(&catalog);
    }
    drop(catalog);
    let wanted = plan.wanted();
    let catalog = read(Keep::Documents(&wanted, Rest::Versions))?;
    plan.build(&catalog)
}

/// What a selection keeps, by name, before any document is copied.
struct Plan {
    kept: Kept,
    defaults: BTreeMap<String, String>,
    picks: Vec<DependencyPick>,
    unmet: Vec<UnmetRequirement>,
}

/// The names [`select`] keeps; `catalog` needs only an index of what is not listed.
fn plan(
    catalog: &Catalog,
    operator: &Operator,
    operator_index: usize,
    dependencies: Dependencies,
) -> Result<Plan, SelectError> {
    let base = format!("mirror.operators[{operator_index}]");
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
    Ok(Plan {
        kept,
        defaults,
        picks,
        unmet,
    })
}

impl Plan {
    /// The documents the plan keeps, to read them whole.
    fn wanted(&self) -> Wanted {
        let mut w = Wanted::default();
        for (package, channels) in self.kept.iter().filter(|(_, c)| !c.is_empty()) {
            w.packages.insert(package.clone());
            for (channel, entries) in channels {
                w.channels.insert((package.clone(), channel.clone()));
                w.bundles
                    .extend(entries.iter().map(|e| (package.clone(), e.clone())));
            }
        }
        w
    }

    /// The selection, from `catalog` holding every kept document whole.
    fn build(self, catalog: &Catalog) -> Result<Selection, SelectError> {
        let mut sel = build(catalog, &self.kept, &self.defaults, self.picks)?;
        sel.unmet = self.unmet;
        Ok(sel)
    }
}

/// The head of `channel` (the one entry nothing replaces or skips), checked as opm checks it:
/// what OLM installs for a Subscription to that channel.
pub fn channel_head(channel: &Channel) -> Result<&str, String> {
    ChannelGraph::new(channel).map(|g| channel.entries[g.head].name.as_str())
}

/// `full: true` without packages: everything, unchanged; a requirement is unmet only when the
/// catalog has nothing that meets it.
fn whole_catalog(catalog: &Catalog) -> Result<Selection, SelectError> {
    Ok(whole_owned(catalog.clone()))
}

/// [`whole_catalog`] of a catalog it may keep.
fn whole_owned(catalog: Catalog) -> Selection {
    let images = images_of(catalog.bundles.values().flat_map(|b| b.values()));
    let mut kept = Kept::new();
    for channel in catalog.channels.values().flat_map(|c| c.values()) {
        let names = channel.entries.iter().map(|e| e.name.clone()).collect();
        kept.entry(channel.package.clone())
            .or_default()
            .insert(channel.name.clone(), names);
    }
    let unmet = unmet(&catalog, &kept);
    Selection {
        packages: catalog.packages,
        channels: catalog.channels,
        bundles: catalog.bundles,
        others: catalog.others,
        dependencies: Vec::new(),
        unmet,
        images,
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
mod tests;
