//! Following `olm.package.required`: for each requirement no kept bundle satisfies, one bundle
//! is added (kept channels first, then the default channel, then channel heads, then the highest
//! version), with the part of its channel's replaces chain that keeps one head.

use super::channel::ChannelGraph;
use super::range::DependencyRange;
use super::{graph_error, DependencyPick, Kept, SelectError, UnmetDependency};
use crate::openshift::fbc::Catalog;
use std::cmp::Reverse;
use std::collections::{BTreeSet, VecDeque};

/// Adds, transitively, a bundle for every `olm.package.required` no kept bundle satisfies.
pub(super) fn follow_dependencies(
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
