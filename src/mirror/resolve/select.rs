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
//! Dependencies (`olm.package.required`) of kept bundles are followed unless `skipDependencies`
//! is set (oc-mirror v1 did this; v2's filter does not): for each requirement no kept bundle
//! satisfies, one bundle is added, preferring kept channels, then the default channel, then
//! channel heads, then the highest version; a package pulled in this way also keeps its default
//! channel's head, so the rebuilt catalog stays valid. `olm.gvk.required` is not followed.

use crate::mirror::config::{IncludeChannel, IncludePackage, Operator};
use crate::openshift::fbc::{self, Bundle, Catalog, Channel, Other, Package};
use semver::Version;
use serde_json::{Map, Value};
use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

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
    /// A kept bundle requires a package the catalog cannot provide.
    #[error("{0}")]
    Dependency(Box<UnmetDependency>),
}

/// A requirement (`olm.package.required`) of a kept bundle that cannot be met.
#[derive(Debug, thiserror::Error)]
#[error("bundle '{bundle}' of package '{package}' requires package '{required}' ({range}), but {message}; set {path}.skipDependencies: true to mirror without following dependencies")]
pub struct UnmetDependency {
    /// The requiring bundle's package.
    pub package: String,
    /// The requiring bundle.
    pub bundle: String,
    /// The required package.
    pub required: String,
    /// The required version range.
    pub range: String,
    /// Why it cannot be met.
    pub message: String,
    /// `mirror.operators[N]`.
    pub path: String,
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

/// Applies `operator` (`mirror.operators[operator_index]`) to `catalog`.
pub fn select(
    catalog: &Catalog,
    operator: &Operator,
    operator_index: usize,
) -> Result<Selection, SelectError> {
    let base = format!("mirror.operators[{operator_index}]");
    if operator.packages.is_empty() && operator.full {
        return Ok(whole_catalog(catalog));
    }
    let mut kept = Kept::new();
    let mut defaults = BTreeMap::new();
    if operator.packages.is_empty() {
        for (name, channels) in &catalog.channels {
            for channel in channels.values() {
                let graph = Graph::new(channel).map_err(|m| graph_error(channel, m))?;
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
    let dependencies = if operator.skip_dependencies {
        Vec::new()
    } else {
        follow_dependencies(catalog, &mut kept, &base)?
    };
    build(catalog, &kept, &defaults, dependencies)
}

/// `full: true` without packages: everything, unchanged.
fn whole_catalog(catalog: &Catalog) -> Selection {
    let images = images_of(catalog.bundles.values().flat_map(|b| b.values()));
    Selection {
        packages: catalog.packages.clone(),
        channels: catalog.channels.clone(),
        bundles: catalog.bundles.clone(),
        others: catalog.others.clone(),
        dependencies: Vec::new(),
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

/// The channels (with kept entries) and the default channel of one listed package.
fn select_package(
    catalog: &Catalog,
    operator: &Operator,
    pkg: &IncludePackage,
    pbase: &str,
) -> Result<(BTreeMap<String, BTreeSet<String>>, String), SelectError> {
    let package_range = IscRange::parse(&pkg.min_version, &pkg.max_version, pbase)?;
    if operator.full {
        if let Some(r) = &package_range {
            return Err(config_error(
                r.path.clone(),
                "cannot be combined with `full: true` (oc-mirror: \"Full: true cannot be mixed with versionRange\"); full mirrors every version, so remove full or the version range".into(),
            ));
        }
    }
    let Some(package) = catalog.packages.get(&pkg.name) else {
        return Err(config_error(
            format!("{pbase}.name"),
            format!(
                "the catalog has no package '{}'; check the name with `oc-mirror list operators` or the catalog's configs",
                pkg.name
            ),
        ));
    };
    let mut wanted: Vec<(&Channel, Option<IscRange>)> = Vec::new();
    if pkg.channels.is_empty() {
        for channel in catalog.channels_of(&pkg.name) {
            wanted.push((channel, package_range.clone()));
        }
    } else {
        for (k, ch) in pkg.channels.iter().enumerate() {
            let cbase = format!("{pbase}.channels[{k}]");
            wanted.push(listed_channel(
                catalog,
                operator,
                pkg,
                ch,
                &cbase,
                &package_range,
            )?);
        }
    }
    let default = pkg
        .default_channel
        .clone()
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| package.default_channel.clone());
    let mut channels = BTreeMap::new();
    for (channel, range) in wanted {
        let graph = Graph::new(channel).map_err(|m| graph_error(channel, m))?;
        let entries = match &range {
            _ if operator.full => (0..channel.entries.len()).collect(),
            None => BTreeSet::from([graph.head]),
            Some(range) => range.entries(catalog, &graph)?,
        };
        if entries.is_empty() {
            if let Some(range) = range.filter(|_| channel.name == default) {
                return Err(config_error(
                    range.path.clone(),
                    format!(
                        "{} leaves no bundle in channel '{}', the default channel of package '{}'{}",
                        range.describe(),
                        channel.name,
                        pkg.name,
                        range.prerelease_hint(catalog, channel)
                    ),
                ));
            }
            continue; // oc-mirror drops channels a range empties
        }
        channels.insert(channel.name.clone(), graph.names(entries));
    }
    check_default(pkg, package, &channels, &default, pbase)?;
    Ok((channels, default))
}

/// A listed channel, checked against the catalog and the range rules.
fn listed_channel<'c>(
    catalog: &'c Catalog,
    operator: &Operator,
    pkg: &IncludePackage,
    ch: &IncludeChannel,
    cbase: &str,
    package_range: &Option<IscRange>,
) -> Result<(&'c Channel, Option<IscRange>), SelectError> {
    let Some(channel) = catalog
        .channels
        .get(&pkg.name)
        .and_then(|c| c.get(&ch.name))
    else {
        let names: Vec<&str> = catalog
            .channels_of(&pkg.name)
            .map(|c| c.name.as_str())
            .collect();
        return Err(config_error(
            format!("{cbase}.name"),
            format!(
                "package '{}' has no channel '{}'; its channels are: {}",
                pkg.name,
                ch.name,
                names.join(", ")
            ),
        ));
    };
    let channel_range = IscRange::parse(&ch.min_version, &ch.max_version, cbase)?;
    if let Some(r) = &channel_range {
        if operator.full {
            return Err(config_error(
                r.path.clone(),
                "cannot be combined with `full: true` (oc-mirror: \"Full: true cannot be mixed with versionRange\"); full mirrors every version, so remove full or the version range".into(),
            ));
        }
        if let Some(p) = package_range {
            return Err(config_error(
                r.path.clone(),
                format!(
                    "package '{}' already sets a version range ({}); a version range goes on the package or on its channels, not both (oc-mirror refuses this too)",
                    pkg.name, p.path
                ),
            ));
        }
    }
    Ok((channel, channel_range.or_else(|| package_range.clone())))
}

/// The default channel to write must be one of the kept channels.
fn check_default(
    pkg: &IncludePackage,
    package: &Package,
    channels: &BTreeMap<String, BTreeSet<String>>,
    default: &str,
    pbase: &str,
) -> Result<(), SelectError> {
    if channels.contains_key(default) {
        return Ok(());
    }
    let kept: Vec<&str> = channels.keys().map(String::as_str).collect();
    let kept = if kept.is_empty() {
        "none".to_string()
    } else {
        kept.join(", ")
    };
    let message = if pkg
        .default_channel
        .as_deref()
        .is_some_and(|d| !d.is_empty())
    {
        format!(
            "channel '{default}' is not among the channels mirrored for package '{}' ({kept}); name one of them",
            pkg.name
        )
    } else {
        format!(
            "package '{}' has default channel '{}' in the catalog, but that channel is not mirrored (kept: {kept}); set defaultChannel to one of the kept channels",
            pkg.name, package.default_channel
        )
    };
    Err(config_error(format!("{pbase}.defaultChannel"), message))
}

// ---------------------------------------------------------------------------------------------
// The upgrade graph of one channel
// ---------------------------------------------------------------------------------------------

/// A channel's entries as a graph: who replaces and skips whom, and the one head.
struct Graph<'a> {
    channel: &'a Channel,
    head: usize,
    /// The entry each entry replaces, when that is an entry of this channel.
    replaces: Vec<Option<usize>>,
    /// The entries each entry skips (those that are entries of this channel).
    skips: Vec<Vec<usize>>,
}

impl<'a> Graph<'a> {
    /// Checks what opm checks: entries, no duplicates, no self-references, exactly one head
    /// (the entry nothing else replaces or skips), no cycle.
    fn new(channel: &'a Channel) -> Result<Self, String> {
        let entries = &channel.entries;
        if entries.is_empty() {
            return Err("has no entries".into());
        }
        let mut index: HashMap<&str, usize> = HashMap::new();
        for (i, e) in entries.iter().enumerate() {
            if index.insert(e.name.as_str(), i).is_some() {
                return Err(format!("lists bundle '{}' twice", e.name));
            }
        }
        let mut replaces = Vec::with_capacity(entries.len());
        let mut skips = Vec::with_capacity(entries.len());
        let mut edges: Vec<BTreeSet<usize>> = Vec::with_capacity(entries.len());
        let mut incoming = vec![0usize; entries.len()];
        for e in entries {
            if e.replaces.as_deref() == Some(e.name.as_str()) || e.skips.contains(&e.name) {
                return Err(format!("entry '{}' replaces or skips itself", e.name));
            }
            let r = e.replaces.as_deref().and_then(|r| index.get(r).copied());
            let s: BTreeSet<usize> = e
                .skips
                .iter()
                .filter_map(|s| index.get(s.as_str()).copied())
                .collect();
            let out: BTreeSet<usize> = s.iter().copied().chain(r).collect();
            for &t in &out {
                incoming[t] += 1;
            }
            replaces.push(r);
            skips.push(s.into_iter().collect());
            edges.push(out);
        }
        let heads: Vec<usize> = (0..entries.len()).filter(|&i| incoming[i] == 0).collect();
        let head = match heads.as_slice() {
            [head] => *head,
            [] => {
                return Err(
                    "has no head: every entry is replaced or skipped by another (a cycle)".into(),
                )
            }
            many => {
                let mut names: Vec<&str> = many.iter().map(|&i| entries[i].name.as_str()).collect();
                names.sort_unstable();
                return Err(format!(
                    "has several heads (entries nothing replaces or skips): {}; opm refuses such a channel",
                    names.join(", ")
                ));
            }
        };
        // Kahn's algorithm from the head: whatever is never freed sits on a cycle.
        let mut queue = VecDeque::from([head]);
        let mut visited = 0;
        while let Some(i) = queue.pop_front() {
            visited += 1;
            for &t in &edges[i] {
                incoming[t] -= 1;
                if incoming[t] == 0 {
                    queue.push_back(t);
                }
            }
        }
        if visited < entries.len() {
            return Err("the upgrade graph has a cycle".into());
        }
        Ok(Graph {
            channel,
            head,
            replaces,
            skips,
        })
    }

    /// The replaces chain from the head down (acyclic: checked in [`Graph::new`]).
    fn chain(&self) -> Vec<usize> {
        let mut chain = vec![self.head];
        while let Some(next) = chain.last().and_then(|&i| self.replaces[i]) {
            chain.push(next);
        }
        chain
    }

    /// The smallest part of the replaces chain that covers every entry `wanted` accepts
    /// (on the chain, or skipped by a chain entry on it), plus the wanted entries it skips:
    /// catalog-filter's `filterByVersionRange`. The kept part has one head and an upgrade path
    /// through it; chain entries inside it are kept even when not wanted.
    fn segment(&self, wanted: impl Fn(usize) -> bool) -> BTreeSet<usize> {
        let chain = self.chain();
        let mut seen = vec![false; self.channel.entries.len()];
        // counts[k]: wanted entries at or below chain[k], each counted at its first sighting
        // from the bottom.
        let mut counts = vec![0usize; chain.len()];
        for k in (0..chain.len()).rev() {
            let i = chain[k];
            let mut count = counts.get(k + 1).copied().unwrap_or(0);
            for j in std::iter::once(i).chain(self.skips[i].iter().copied()) {
                if !seen[j] && wanted(j) {
                    seen[j] = true;
                    count += 1;
                }
            }
            counts[k] = count;
        }
        // New head: the lowest chain entry with the highest count; tail: the first with none.
        let (mut top, mut best, mut tail) = (0, None, chain.len());
        for (k, &count) in counts.iter().enumerate() {
            if best.is_none_or(|b| count >= b) {
                top = k;
                best = Some(count);
            }
            if count == 0 {
                tail = k;
                break;
            }
        }
        let mut keep = BTreeSet::new();
        for &i in chain.iter().take(tail).skip(top) {
            keep.insert(i);
            keep.extend(self.skips[i].iter().copied().filter(|&s| wanted(s)));
        }
        keep
    }

    fn name(&self, i: usize) -> &'a str {
        &self.channel.entries[i].name
    }

    fn names(&self, entries: impl IntoIterator<Item = usize>) -> BTreeSet<String> {
        entries
            .into_iter()
            .map(|i| self.name(i).to_string())
            .collect()
    }

    /// The version of entry `i`'s bundle, when the catalog has the bundle.
    fn version(&self, catalog: &'a Catalog, i: usize) -> Option<&'a Version> {
        catalog
            .bundle(&self.channel.package, self.name(i))
            .map(|b| &b.version)
    }
}

// ---------------------------------------------------------------------------------------------
// Version ranges
// ---------------------------------------------------------------------------------------------

/// A `minVersion`/`maxVersion` pair from the ImageSetConfiguration.
#[derive(Clone, Debug)]
struct IscRange {
    min: Option<Version>,
    max: Option<Version>,
    /// `minVersion` and `maxVersion` are the same text: keep exactly that version.
    exact: bool,
    /// Field path of the first bound set, for messages.
    path: String,
}

impl IscRange {
    /// `None` when neither bound is set (empty strings count as unset, as in oc-mirror).
    fn parse(
        min: &Option<String>,
        max: &Option<String>,
        base: &str,
    ) -> Result<Option<IscRange>, SelectError> {
        let bound = |v: &Option<String>, field: &str| -> Result<Option<Version>, SelectError> {
            match v.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
                None => Ok(None),
                Some(s) => parse_tolerant(s).map(Some).map_err(|e| {
                    config_error(
                        format!("{base}.{field}"),
                        format!(
                            "'{s}' is not a version ({e}); write MAJOR.MINOR.PATCH, e.g. 24.6.2"
                        ),
                    )
                }),
            }
        };
        let (lo, hi) = (bound(min, "minVersion")?, bound(max, "maxVersion")?);
        let field = match (&lo, &hi) {
            (None, None) => return Ok(None),
            (Some(_), _) => "minVersion",
            (None, Some(_)) => "maxVersion",
        };
        let exact = lo.is_some() && min.as_deref().map(str::trim) == max.as_deref().map(str::trim);
        Ok(Some(IscRange {
            min: lo,
            max: hi,
            exact,
            path: format!("{base}.{field}"),
        }))
    }

    /// Masterminds/semver's `>=min <=max`: each bound rejects a pre-release version unless
    /// the bound has a pre-release part itself; build metadata is ignored.
    fn contains(&self, v: &Version) -> bool {
        let admits = |bound: &Version| v.pre.is_empty() || !bound.pre.is_empty();
        self.min
            .as_ref()
            .is_none_or(|m| admits(m) && v.cmp_precedence(m) != Ordering::Less)
            && self
                .max
                .as_ref()
                .is_none_or(|m| admits(m) && v.cmp_precedence(m) != Ordering::Greater)
    }

    fn entries(
        &self,
        catalog: &Catalog,
        graph: &Graph<'_>,
    ) -> Result<BTreeSet<usize>, SelectError> {
        if let Some(want) = self.min.as_ref().filter(|_| self.exact) {
            // oc-mirror (OCPBUGS-61497): min == max keeps that version alone, not the chain.
            let any = catalog
                .bundles
                .get(&graph.channel.package)
                .is_some_and(|b| b.values().any(|b| b.version.cmp_precedence(want).is_eq()));
            if !any {
                return Err(config_error(
                    self.path.clone(),
                    format!(
                        "no bundle of package '{}' has version {want}",
                        graph.channel.package
                    ),
                ));
            }
            return Ok((0..graph.channel.entries.len())
                .filter(|&i| {
                    graph
                        .version(catalog, i)
                        .is_some_and(|v| v.cmp_precedence(want).is_eq())
                })
                .collect());
        }
        Ok(graph.segment(|i| graph.version(catalog, i).is_some_and(|v| self.contains(v))))
    }

    /// `minVersion 24.6.0 and maxVersion 24.6.2` and the like, for messages.
    fn describe(&self) -> String {
        match (&self.min, &self.max) {
            (Some(lo), Some(hi)) => format!("the version range {lo} to {hi}"),
            (Some(lo), None) => format!("minVersion {lo}"),
            (None, Some(hi)) => format!("maxVersion {hi}"),
            (None, None) => "the version range".into(),
        }
    }

    /// A hint when the channel has pre-release versions the bounds cannot match.
    fn prerelease_hint(&self, catalog: &Catalog, channel: &Channel) -> String {
        let plain = self.min.iter().chain(&self.max).all(|b| b.pre.is_empty());
        let pre = channel
            .entries
            .iter()
            .filter_map(|e| catalog.bundle(&channel.package, &e.name))
            .find(|b| !b.version.pre.is_empty());
        match pre {
            Some(b) if plain => format!(
                " (its versions have pre-release parts, such as {}, and, as in oc-mirror, a bound without one does not match them: write the bound with one, e.g. {}.{}.{}-0)",
                b.version, b.version.major, b.version.minor, b.version.patch
            ),
            _ => String::new(),
        }
    }
}

/// Parses a version as Masterminds' `NewVersion` and blang's `ParseTolerant` do: a leading
/// `v` and missing minor or patch numbers are accepted (`v4.16` is 4.16.0).
fn parse_tolerant(text: &str) -> Result<Version, semver::Error> {
    let t = text.trim();
    let t = t.strip_prefix(['v', 'V']).unwrap_or(t);
    let (core, rest) = t.split_at(t.find(['-', '+']).unwrap_or(t.len()));
    match core.matches('.').count() {
        0 => Version::parse(&format!("{core}.0.0{rest}")),
        1 => Version::parse(&format!("{core}.0{rest}")),
        _ => Version::parse(t),
    }
}

/// An `olm.package.required` `versionRange` in blang/semver syntax, as OLM reads it:
/// comparators separated by spaces must all hold, `||` separates alternatives. Unlike the
/// ImageSetConfiguration's bounds, pre-release versions compare plainly (blang does not set
/// them apart), so `>=4.16.0` admits `4.16.1-202408011200`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct DependencyRange {
    alternatives: Vec<Vec<(Op, Version)>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
}

impl DependencyRange {
    fn parse(text: &str) -> Result<Self, String> {
        let mut alternatives = Vec::new();
        for alt in text.split("||") {
            let mut comparators = Vec::new();
            let mut tokens = alt.split_whitespace();
            while let Some(token) = tokens.next() {
                // `>= 1.2.0`: an operator alone takes the next token as its version.
                let joined;
                let token = if token.chars().all(|c| "<>=!".contains(c)) {
                    let next = tokens
                        .next()
                        .ok_or_else(|| format!("'{token}' is not followed by a version"))?;
                    joined = format!("{token}{next}");
                    joined.as_str()
                } else {
                    token
                };
                comparators.extend(comparator(token)?);
            }
            if comparators.is_empty() {
                return Err(format!("'{text}' has an empty alternative"));
            }
            alternatives.push(comparators);
        }
        Ok(DependencyRange { alternatives })
    }

    fn contains(&self, v: &Version) -> bool {
        self.alternatives.iter().any(|all| {
            all.iter().all(|(op, bound)| {
                let ord = v.cmp_precedence(bound);
                match op {
                    Op::Eq => ord.is_eq(),
                    Op::Ne => ord.is_ne(),
                    Op::Gt => ord.is_gt(),
                    Op::Ge => ord.is_ge(),
                    Op::Lt => ord.is_lt(),
                    Op::Le => ord.is_le(),
                }
            })
        })
    }
}

/// One blang comparator (`>=1.2.0`, `1.2.3`, `<2.x`); wildcards expand as blang expands them.
fn comparator(token: &str) -> Result<Vec<(Op, Version)>, String> {
    let ops = [
        (">=", Op::Ge),
        ("<=", Op::Le),
        ("!=", Op::Ne),
        ("==", Op::Eq),
        (">", Op::Gt),
        ("<", Op::Lt),
        ("=", Op::Eq),
        ("!", Op::Ne),
    ];
    let (op, version) = ops
        .iter()
        .find_map(|(p, op)| token.strip_prefix(p).map(|rest| (*op, rest)))
        .unwrap_or((Op::Eq, token));
    let bad = |e: &dyn std::fmt::Display| format!("'{token}' is not a version comparator ({e})");
    let parts: Vec<&str> = version.split('.').collect();
    let wild = |p: &&str| matches!(*p, "x" | "X" | "*");
    let Some(first_wild) = parts.iter().position(wild) else {
        return Ok(vec![(op, parse_tolerant(version).map_err(|e| bad(&e))?)]);
    };
    let number = |p: &str| p.parse::<u64>().map_err(|e| bad(&e));
    let (lo, hi) = match first_wild {
        0 => return Ok(vec![(Op::Ge, Version::new(0, 0, 0))]),
        1 => {
            let major = number(parts[0])?;
            (Version::new(major, 0, 0), Version::new(major + 1, 0, 0))
        }
        _ => {
            let (major, minor) = (number(parts[0])?, number(parts[1])?);
            (
                Version::new(major, minor, 0),
                Version::new(major, minor + 1, 0),
            )
        }
    };
    match op {
        Op::Gt => Ok(vec![(Op::Ge, hi)]),
        Op::Ge => Ok(vec![(Op::Ge, lo)]),
        Op::Lt => Ok(vec![(Op::Lt, lo)]),
        Op::Le => Ok(vec![(Op::Lt, hi)]),
        Op::Eq => Ok(vec![(Op::Ge, lo), (Op::Lt, hi)]),
        Op::Ne => Err(bad(&"a wildcard with != is not supported")),
    }
}

// ---------------------------------------------------------------------------------------------
// Dependencies
// ---------------------------------------------------------------------------------------------

/// Adds, transitively, a bundle for every `olm.package.required` no kept bundle satisfies.
fn follow_dependencies(
    catalog: &Catalog,
    kept: &mut Kept,
    base: &str,
) -> Result<Vec<DependencyPick>, SelectError> {
    let mut picks = Vec::new();
    let mut queue: VecDeque<(String, String)> = kept_bundles(kept).collect();
    let mut done = BTreeSet::new();
    while let Some((package, name)) = queue.pop_front() {
        if !done.insert((package.clone(), name.clone())) {
            continue;
        }
        let Some(bundle) = catalog.bundle(&package, &name) else {
            continue; // reported when the selection is built
        };
        for req in &bundle.dependencies {
            let fail = |message: String| {
                SelectError::Dependency(Box::new(UnmetDependency {
                    package: package.clone(),
                    bundle: name.clone(),
                    required: req.package.clone(),
                    range: req.version_range.clone(),
                    message,
                    path: base.to_string(),
                }))
            };
            let range = DependencyRange::parse(&req.version_range)
                .map_err(|e| fail(format!("the range is not valid: {e}")))?;
            if !catalog.packages.contains_key(&req.package) {
                return Err(fail(format!(
                    "the catalog has no package '{}'",
                    req.package
                )));
            }
            if satisfied(catalog, kept, &req.package, &range) {
                continue;
            }
            let before: BTreeSet<(String, String)> = kept_bundles(kept).collect();
            let mut head = None;
            if !kept.contains_key(&req.package) {
                head = keep_default_head(catalog, kept, &req.package)?;
            }
            let (channel, entry) =
                match head.filter(|_| satisfied(catalog, kept, &req.package, &range)) {
                    Some(head) => head,
                    None => {
                        let (channel, entry) = pick(catalog, kept, &req.package, &range)?
                            .ok_or_else(|| {
                                fail(format!(
                                    "no bundle of '{}' in the catalog satisfies it",
                                    req.package
                                ))
                            })?;
                        add_entry(catalog, kept, &req.package, &channel, &entry)?;
                        (channel, entry)
                    }
                };
            picks.push(DependencyPick {
                package: req.package.clone(),
                bundle: entry,
                channel,
                required_by_package: package.clone(),
                required_by: name.clone(),
                range: req.version_range.clone(),
            });
            queue.extend(kept_bundles(kept).filter(|b| !before.contains(b)));
        }
    }
    Ok(picks)
}

fn kept_bundles(kept: &Kept) -> impl Iterator<Item = (String, String)> + '_ {
    kept.iter()
        .flat_map(|(p, chans)| {
            chans
                .values()
                .flatten()
                .map(move |e| (p.clone(), e.clone()))
        })
        .collect::<BTreeSet<_>>()
        .into_iter()
}

fn satisfied(catalog: &Catalog, kept: &Kept, package: &str, range: &DependencyRange) -> bool {
    kept.get(package).is_some_and(|chans| {
        chans
            .values()
            .flatten()
            .filter_map(|e| catalog.bundle(package, e))
            .any(|b| range.contains(&b.version))
    })
}

/// A package pulled in by a dependency keeps its default channel's head, so the rebuilt
/// catalog has the default channel it names. Returns that channel and head.
fn keep_default_head(
    catalog: &Catalog,
    kept: &mut Kept,
    package: &str,
) -> Result<Option<(String, String)>, SelectError> {
    let Some(default) = catalog.packages.get(package).map(|p| &p.default_channel) else {
        return Ok(None);
    };
    let chans = kept.entry(package.to_string()).or_default();
    let Some(channel) = catalog.channels.get(package).and_then(|c| c.get(default)) else {
        return Ok(None);
    };
    let graph = Graph::new(channel).map_err(|m| graph_error(channel, m))?;
    chans.insert(channel.name.clone(), graph.names([graph.head]));
    Ok(Some((
        channel.name.clone(),
        graph.name(graph.head).to_string(),
    )))
}

/// The best entry of `package` satisfying `range`: kept channels first, then the default
/// channel, then channel heads, then the highest version.
fn pick(
    catalog: &Catalog,
    kept: &Kept,
    package: &str,
    range: &DependencyRange,
) -> Result<Option<(String, String)>, SelectError> {
    let default = catalog
        .packages
        .get(package)
        .map(|p| p.default_channel.as_str());
    let kept_channels = kept.get(package);
    let mut best = None;
    for channel in catalog.channels_of(package) {
        let graph = Graph::new(channel).map_err(|m| graph_error(channel, m))?;
        let not_kept = !kept_channels.is_some_and(|c| c.contains_key(&channel.name));
        for i in 0..channel.entries.len() {
            let Some(v) = graph.version(catalog, i).filter(|v| range.contains(v)) else {
                continue;
            };
            let key = (
                not_kept,
                Some(channel.name.as_str()) != default,
                i != graph.head,
                Reverse(v.clone()),
                channel.name.clone(),
                graph.name(i).to_string(),
            );
            if best.as_ref().is_none_or(|b| key < *b) {
                best = Some(key);
            }
        }
    }
    Ok(best.map(|k| (k.4, k.5)))
}

/// Keeps `entry` in `channel`, with whatever of the replaces chain connects it to what that
/// channel already keeps (so the channel still has one head).
fn add_entry(
    catalog: &Catalog,
    kept: &mut Kept,
    package: &str,
    channel: &str,
    entry: &str,
) -> Result<(), SelectError> {
    let Some(ch) = catalog.channels.get(package).and_then(|c| c.get(channel)) else {
        return Ok(());
    };
    let graph = Graph::new(ch).map_err(|m| graph_error(ch, m))?;
    let entries = kept
        .entry(package.to_string())
        .or_default()
        .entry(channel.to_string())
        .or_default();
    entries.insert(entry.to_string());
    let wanted: BTreeSet<String> = entries.clone();
    let segment = graph.segment(|i| wanted.contains(graph.name(i)));
    entries.extend(graph.names(segment));
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The selection and the rebuilt catalog
// ---------------------------------------------------------------------------------------------

fn build(
    catalog: &Catalog,
    kept: &Kept,
    defaults: &BTreeMap<String, String>,
    dependencies: Vec<DependencyPick>,
) -> Result<Selection, SelectError> {
    let mut sel = Selection {
        packages: BTreeMap::new(),
        channels: BTreeMap::new(),
        bundles: BTreeMap::new(),
        others: Vec::new(),
        dependencies,
        images: Vec::new(),
    };
    for (name, chans) in kept {
        if chans.is_empty() {
            continue;
        }
        // `kept` only names what the catalog has; a hand-built inconsistent catalog loses
        // the package rather than panicking.
        let Some(mut package) = catalog.packages.get(name).cloned() else {
            continue;
        };
        if let Some(default) = defaults.get(name) {
            if *default != package.default_channel {
                package.default_channel = default.clone();
                package
                    .raw
                    .insert("defaultChannel".into(), Value::String(default.clone()));
            }
        }
        sel.packages.insert(name.clone(), package);
        for (cname, entries) in chans {
            let Some(mut channel) = catalog
                .channels
                .get(name)
                .and_then(|c| c.get(cname))
                .cloned()
            else {
                continue;
            };
            channel.entries.retain(|e| entries.contains(&e.name));
            let raw: Vec<Value> = channel
                .entries
                .iter()
                .map(|e| Value::Object(e.raw.clone()))
                .collect();
            channel.raw.insert("entries".into(), Value::Array(raw));
            for e in entries {
                let Some(bundle) = catalog.bundle(name, e) else {
                    return Err(graph_error(
                        &channel,
                        format!("entry '{e}' has no olm.bundle document in the catalog"),
                    ));
                };
                sel.bundles
                    .entry(name.clone())
                    .or_default()
                    .insert(e.clone(), bundle.clone());
            }
            sel.channels
                .entry(name.clone())
                .or_default()
                .insert(cname.clone(), channel);
        }
    }
    sel.others = catalog
        .others
        .iter()
        .filter(|o| {
            o.package
                .as_ref()
                .is_none_or(|p| sel.packages.contains_key(p))
        })
        .filter_map(|o| filter_deprecations(o, &sel))
        .collect();
    sel.images = images_of(sel.bundles.values().flat_map(|b| b.values()));
    Ok(sel)
}

/// An `olm.deprecations` document keeps only entries about kept bundles and channels (and
/// the package); one left with no entries is dropped. Other schemas pass unchanged.
fn filter_deprecations(other: &Other, sel: &Selection) -> Option<Other> {
    if other.schema != fbc::SCHEMA_DEPRECATIONS {
        return Some(other.clone());
    }
    let package = other.package.as_deref().unwrap_or_default();
    let Some(Value::Array(entries)) = other.raw.get("entries") else {
        return Some(other.clone());
    };
    let keep = |entry: &Value| {
        let reference = entry.get("reference");
        let schema = reference
            .and_then(|r| r.get("schema"))
            .and_then(Value::as_str);
        let name = reference
            .and_then(|r| r.get("name"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        match schema {
            Some(fbc::SCHEMA_BUNDLE) => sel
                .bundles
                .get(package)
                .is_some_and(|b| b.contains_key(name)),
            Some(fbc::SCHEMA_CHANNEL) => sel
                .channels
                .get(package)
                .is_some_and(|c| c.contains_key(name)),
            _ => true,
        }
    };
    let kept: Vec<Value> = entries.iter().filter(|e| keep(e)).cloned().collect();
    if kept.is_empty() && !entries.is_empty() {
        return None;
    }
    let mut out = other.clone();
    out.raw.insert("entries".into(), Value::Array(kept));
    Some(out)
}

fn images_of<'a>(bundles: impl Iterator<Item = &'a Bundle>) -> Vec<String> {
    let mut images = BTreeSet::new();
    for b in bundles {
        images.insert(b.image.as_str());
        images.extend(b.related_images.iter().map(|r| r.image.as_str()));
    }
    images.remove("");
    images.into_iter().map(String::from).collect()
}

impl Selection {
    /// The filtered catalog as files for the rebuilt catalog image's config directory:
    /// `PACKAGE/catalog.json` per package, holding its `olm.package`, then its channels, then its
    /// bundles (each sorted by name), then (with [`UnknownSchemas::Keep`]) its other documents in
    /// catalog order; other documents of no package go to `catalog.json`. Deterministic: the
    /// same selection gives the same bytes.
    pub fn render(&self, unknown: UnknownSchemas) -> BTreeMap<String, Vec<u8>> {
        let keep_others = unknown == UnknownSchemas::Keep;
        let mut files = BTreeMap::new();
        for (name, package) in &self.packages {
            let mut docs: Vec<&Map<String, Value>> = vec![&package.raw];
            docs.extend(
                self.channels
                    .get(name)
                    .into_iter()
                    .flat_map(|c| c.values())
                    .map(|c| &c.raw),
            );
            docs.extend(
                self.bundles
                    .get(name)
                    .into_iter()
                    .flat_map(|b| b.values())
                    .map(|b| &b.raw),
            );
            if keep_others {
                docs.extend(
                    self.others
                        .iter()
                        .filter(|o| o.package.as_deref() == Some(name))
                        .map(|o| &o.raw),
                );
            }
            files.insert(format!("{name}/catalog.json"), fbc::to_json_stream(docs));
        }
        let unowned: Vec<&Map<String, Value>> = self
            .others
            .iter()
            .filter(|o| keep_others && o.package.is_none())
            .map(|o| &o.raw)
            .collect();
        if !unowned.is_empty() {
            files.insert("catalog.json".into(), fbc::to_json_stream(unowned));
        }
        files
    }

    /// The kept bundles' names by package, for reports and tests.
    pub fn bundle_names(&self) -> BTreeMap<&str, Vec<&str>> {
        self.bundles
            .iter()
            .map(|(p, b)| (p.as_str(), b.keys().map(String::as_str).collect()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openshift::fbc::tests::bundle;
    use serde_json::json;

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
        select(&catalog(), op, 0).unwrap_err().to_string()
    }

    #[test]
    fn heads_only_for_every_package_without_packages() {
        let sel = select(&catalog(), &operator(vec![]), 0).unwrap();
        assert_eq!(entries(&sel, GPU, "stable"), vec!["24.6.2"]);
        assert_eq!(entries(&sel, GPU, "v24.6"), vec!["24.6.2"]);
        assert_eq!(entries(&sel, GPU, "v23.9"), vec!["23.9.2"]);
        assert_eq!(versions(&sel, GPU), vec!["23.9.2", "24.6.2"]);
        assert_eq!(entries(&sel, "nfd", "stable"), vec!["4.16.0"]);
        assert_eq!(entries(&sel, "nfd", "4.15"), vec!["4.15.0"]);
        assert_eq!(versions(&sel, GITOPS), vec!["1.13.1"]);
        assert_eq!(versions(&sel, "cert-manager"), vec!["1.14.0"]);
        // Every requirement is already met by a channel head: nothing added.
        assert!(sel.dependencies.is_empty(), "{:?}", sel.dependencies);
        assert_eq!(sel.packages[GPU].default_channel, "stable");
        assert_eq!(sel.others.len(), 2);
    }

    #[test]
    fn heads_only_for_a_listed_package_covers_all_its_channels() {
        let sel = select(&catalog(), &operator(vec![pkg(GPU)]), 0).unwrap();
        assert_eq!(sel.packages.keys().collect::<Vec<_>>(), vec![GPU]);
        let channels: Vec<&String> = sel.channels[GPU].keys().collect();
        assert_eq!(channels, vec!["stable", "v23.9", "v24.6"]);
        assert_eq!(versions(&sel, GPU), vec!["23.9.2", "24.6.2"]);
    }

    #[test]
    fn min_version_alone_runs_to_the_channel_head() {
        let mut p = pkg(GPU);
        p.min_version = some("24.6.0");
        let sel = select(&catalog(), &operator(vec![p]), 0).unwrap();
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
        let sel = select(&catalog(), &operator(vec![p]), 0).unwrap();
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
        let sel = select(&catalog(), &operator(vec![p]), 0).unwrap();
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
        let sel = select(&catalog(), &op, 0).unwrap();
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
        let sel = select(&c, &op, 0).unwrap();
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
        let sel = select(&catalog(), &operator(vec![pkg("nfd"), p]), 0).unwrap();
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

    #[test]
    fn dependencies_are_followed_transitively() {
        let sel = select(&catalog(), &operator(vec![pkg(GITOPS)]), 0).unwrap();
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
        let sel = select(&catalog(), &operator(vec![pkg(GITOPS), p]), 0).unwrap();
        assert_eq!(entries(&sel, "nfd", "4.15"), vec!["4.15.0"]);
        assert!(!sel.channels["nfd"].contains_key("stable"));
        assert!(sel.dependencies.iter().all(|d| d.package != "nfd"));
        // nfd not listed, its default channel 4.15: the default channel's head is taken.
        let mut c = catalog();
        c.packages.get_mut("nfd").unwrap().default_channel = "4.15".into();
        let sel = select(&c, &operator(vec![pkg(GITOPS)]), 0).unwrap();
        assert_eq!(sel.channels["nfd"].keys().collect::<Vec<_>>(), vec!["4.15"]);
        assert_eq!(
            (
                sel.dependencies[0].channel.as_str(),
                sel.dependencies[0].bundle.as_str()
            ),
            ("4.15", "nfd.v4.15.0")
        );
    }

    #[test]
    fn skip_dependencies_does_not_follow_them() {
        let mut op = operator(vec![pkg(GITOPS)]);
        op.skip_dependencies = true;
        let sel = select(&catalog(), &op, 0).unwrap();
        assert_eq!(sel.packages.keys().collect::<Vec<_>>(), vec![GITOPS]);
        assert!(sel.dependencies.is_empty());
    }

    #[test]
    fn unsatisfiable_dependency_is_an_error() {
        let mut c = catalog();
        c.bundles
            .get_mut(GITOPS)
            .unwrap()
            .get_mut("openshift-gitops-operator.v1.13.1")
            .unwrap()
            .dependencies[0]
            .version_range = ">=9.0.0".into();
        let e = select(&c, &operator(vec![pkg(GITOPS)]), 3)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "bundle 'openshift-gitops-operator.v1.13.1' of package 'openshift-gitops-operator' requires package 'nfd' (>=9.0.0), but no bundle of 'nfd' in the catalog satisfies it; set mirror.operators[3].skipDependencies: true to mirror without following dependencies"
        );
    }

    #[test]
    fn every_related_image_of_a_kept_bundle_is_listed_once() {
        let mut p = pkg(GPU);
        p.channels = vec![chan("stable")];
        let sel = select(&catalog(), &operator(vec![p]), 0).unwrap();
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
        let e = select(&c, &operator(vec![pkg("nfd")]), 0).unwrap_err();
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
        let e = select(&c, &operator(vec![pkg("cert-manager")]), 0).unwrap_err();
        assert!(
            e.to_string().ends_with("the upgrade graph has a cycle"),
            "{e}"
        );
    }

    #[test]
    fn render_is_ordered_filtered_and_deterministic() {
        let mut p = pkg(GPU);
        p.min_version = some("24.6.0");
        let sel = select(&catalog(), &operator(vec![p]), 0).unwrap();
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
        let sel = select(&catalog(), &operator(vec![pkg(GPU)]), 0).unwrap();
        let dep = sel
            .others
            .iter()
            .find(|o| o.schema == "olm.deprecations")
            .unwrap();
        assert_eq!(dep.raw["entries"].as_array().unwrap().len(), 2);
        let mut p = pkg(GPU);
        p.channels = vec![chan("stable"), chan("v23.9")];
        p.min_version = None;
        let sel = select(&catalog(), &operator(vec![p]), 0).unwrap();
        let dep = sel
            .others
            .iter()
            .find(|o| o.schema == "olm.deprecations")
            .unwrap();
        // 23.9.2 is kept (head of v23.9), and so is the channel.
        assert_eq!(dep.raw["entries"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn isc_bounds_set_pre_releases_apart_as_oc_mirror_does() {
        let range = |min: &str| IscRange::parse(&some(min), &None, "p").unwrap().unwrap();
        let v = |s: &str| Version::parse(s).unwrap();
        assert!(!range("4.16.0").contains(&v("4.16.1-202408011200")));
        assert!(range("4.16.0-0").contains(&v("4.16.1-202408011200")));
        assert!(range("4.16.0").contains(&v("4.16.1+build.5")));
        assert!(range("v4.16").contains(&v("4.16.0")));
        assert!(!range("4.16").contains(&v("4.15.9")));
    }

    #[test]
    fn pre_release_hint_when_a_plain_bound_matches_nothing() {
        let mut c = catalog();
        for b in c.bundles.get_mut("nfd").unwrap().values_mut() {
            b.version.pre = semver::Prerelease::new("202407111006").unwrap();
        }
        let mut p = pkg("nfd");
        p.min_version = some("4.15.0");
        let e = select(&c, &operator(vec![p]), 0).unwrap_err().to_string();
        assert!(
            e.ends_with("(its versions have pre-release parts, such as 4.15.0-202407111006, and, as in oc-mirror, a bound without one does not match them: write the bound with one, e.g. 4.15.0-0)"),
            "{e}"
        );
    }

    #[test]
    fn dependency_ranges_read_blang_syntax() {
        let r = |s: &str| DependencyRange::parse(s).unwrap();
        let v = |s: &str| Version::parse(s).unwrap();
        assert!(r(">=1.2.0 <2.0.0").contains(&v("1.9.9")));
        assert!(!r(">=1.2.0 <2.0.0").contains(&v("2.0.0")));
        assert!(r(">= 1.2.0").contains(&v("1.2.0")));
        assert!(r("<1.0.0 || >=2.0.0").contains(&v("2.1.0")));
        assert!(!r("<1.0.0 || >=2.0.0").contains(&v("1.5.0")));
        assert!(r("1.2.3").contains(&v("1.2.3")));
        assert!(r("!1.2.3").contains(&v("1.2.4")));
        assert!(r("1.2.x").contains(&v("1.2.9")));
        assert!(!r("1.2.x").contains(&v("1.3.0")));
        assert!(r(">1.x").contains(&v("2.0.0")));
        assert!(!r(">1.x").contains(&v("1.9.0")));
        // Unlike the ImageSetConfiguration bounds, pre-releases compare plainly.
        assert!(r(">=4.16.0").contains(&v("4.16.1-202408011200")));
        assert!(DependencyRange::parse("").is_err());
        assert!(DependencyRange::parse(">=").is_err());
        assert!(DependencyRange::parse(">=abc").is_err());
    }
}
