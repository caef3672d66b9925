//! `olm.package.required` of kept bundles. oc-mirror v2 does not follow them (its catalog
//! filter keeps only the listed packages), so by default each requirement no kept bundle meets
//! is only reported ([`unmet`]). Following them is an explicit choice ([`follow_dependencies`]):
//! for each such requirement one bundle is added (kept channels first, then the default channel,
//! then channel heads, then the highest version), with the part of its channel's replaces chain
//! that keeps one head. A requirement this catalog cannot meet is reported, not refused: another
//! catalog of the configuration may meet it; [`Provided`] is what another catalog's selection
//! offers to check it against.

use super::channel::ChannelGraph;
use super::range::DependencyRange;
use super::{graph_error, DependencyPick, Kept, SelectError, Selection, UnmetRequirement};
use crate::openshift::fbc::{Catalog, PackageRequirement};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// The requirements of kept bundles that no kept bundle meets, with why.
pub(super) fn unmet(catalog: &Catalog, kept: &Kept) -> Vec<UnmetRequirement> {
    let mut out = Vec::new();
    for (package, name) in kept_bundles(kept) {
        let Some(bundle) = catalog.bundle(&package, &name) else {
            continue; // reported when the selection is built
        };
        for req in &bundle.dependencies {
            let reason = match DependencyRange::parse(&req.version_range) {
                Err(e) => format!("the range is not valid: {e}"),
                Ok(range) if satisfied(catalog, kept, &req.package, &range) => continue,
                Ok(range) => absent_reason(catalog, &req.package, &range),
            };
            out.push(requirement(&package, &name, req, reason));
        }
    }
    out
}

/// Why this catalog does not provide `package` in `range`: it has none, or the selection leaves
/// out the bundles it has.
fn absent_reason(catalog: &Catalog, package: &str, range: &DependencyRange) -> String {
    if !catalog.packages.contains_key(package) {
        return format!("the catalog has no package '{package}'");
    }
    let has = catalog
        .bundles
        .get(package)
        .is_some_and(|b| b.values().any(|b| range.contains(&b.version)))
        || catalog
            .versions
            .get(package)
            .is_some_and(|vs| vs.iter().any(|v| range.contains(v)));
    if has {
        format!("the catalog has such a bundle of '{package}', but the selection leaves it out")
    } else {
        format!("no bundle of '{package}' in the catalog satisfies it")
    }
}

fn requirement(
    package: &str,
    bundle: &str,
    req: &PackageRequirement,
    reason: String,
) -> UnmetRequirement {
    UnmetRequirement {
        package: package.to_string(),
        bundle: bundle.to_string(),
        required: req.package.clone(),
        range: req.version_range.clone(),
        reason,
    }
}

/// Adds, transitively, a bundle for every `olm.package.required` no kept bundle satisfies;
/// what this catalog cannot satisfy is returned as unmet.
pub(super) fn follow_dependencies(
    catalog: &Catalog,
    kept: &mut Kept,
) -> Result<(Vec<DependencyPick>, Vec<UnmetRequirement>), SelectError> {
    let mut picks = Vec::new();
    let mut unmet = Vec::new();
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
            let range = match DependencyRange::parse(&req.version_range) {
                Ok(range) => range,
                Err(e) => {
                    let reason = format!("the range is not valid: {e}");
                    unmet.push(requirement(&package, &name, req, reason));
                    continue;
                }
            };
            if satisfied(catalog, kept, &req.package, &range) {
                continue;
            }
            let Some(best) = pick(catalog, kept, &req.package, &range)? else {
                let reason = absent_reason(catalog, &req.package, &range);
                unmet.push(requirement(&package, &name, req, reason));
                continue;
            };
            let before: BTreeSet<(String, String)> = kept_bundles(kept).collect();
            let mut head = None;
            if !kept.contains_key(&req.package) {
                head = keep_default_head(catalog, kept, &req.package)?;
            }
            // With the package newly kept, its only kept channel is the default one, which
            // `pick` ranks first anyway: `best` is still the pick.
            let (channel, entry) =
                match head.filter(|_| satisfied(catalog, kept, &req.package, &range)) {
                    Some(head) => head,
                    None => {
                        add_entry(catalog, kept, &req.package, &best.0, &best.1)?;
                        best
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
    Ok((picks, unmet))
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
    let graph = ChannelGraph::new(channel).map_err(|m| graph_error(channel, m))?;
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
        let graph = ChannelGraph::new(channel).map_err(|m| graph_error(channel, m))?;
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
    let graph = ChannelGraph::new(ch).map_err(|m| graph_error(ch, m))?;
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
        let Ok(range) = DependencyRange::parse(range) else {
            return false;
        };
        self.versions
            .get(package)
            .is_some_and(|vs| vs.iter().any(|v| range.contains(v)))
    }
}
