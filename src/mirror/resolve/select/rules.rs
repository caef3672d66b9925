//! The rules for one listed package: which of its channels are kept, which entries of each
//! (head, everything, or a version range), and which channel is the default to write.

use super::channel::ChannelGraph;
use super::range::IscRange;
use super::{config_error, graph_error, SelectError};
use crate::mirror::config::{IncludeChannel, IncludePackage, Operator};
use crate::openshift::fbc::{Catalog, Channel, Package};
use std::collections::{BTreeMap, BTreeSet};

/// The channels (with kept entries) and the default channel of one listed package.
pub(super) fn select_package(
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
        let graph = ChannelGraph::new(channel).map_err(|m| graph_error(channel, m))?;
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
