//! The OpenShift update graph (Cincinnati JSON, as `api.openshift.com/api/upgrades_info/graph`
//! serves it, or a file of the same shape for air-gapped use) and the choice of release
//! payloads a `mirror.platform.channels` entry makes from it, by oc-mirror v2's rules:
//!
//! - neither `minVersion` nor `maxVersion`: the channel's head (its highest version);
//! - `minVersion` only: from it to the head; `maxVersion` only: from the channel's lowest to it;
//! - both: every release of the channel in between, or with `shortestPath` only those on the
//!   shortest upgrade path (fewest edges) from min to max;
//! - `full`: every release of the channel (within min and max when given).
//!
//! Only the nodes whose channel metadata lists the channel count, so a whole-graph file works
//! as well as a per-channel answer. Conditional edges count as edges: they are real upgrade
//! paths whose risks a cluster administrator accepts, and the payloads must be there for them.

use anyhow::{bail, Context, Result};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// The metadata key listing a release's channels (comma-separated).
pub const CHANNELS_KEY: &str = "io.openshift.upgrades.graph.release.channels";

/// An update graph.
#[derive(Debug, serde::Deserialize)]
pub struct Graph {
    /// Releases.
    pub nodes: Vec<Node>,
    /// Upgrade edges as indexes into `nodes`.
    #[serde(default)]
    pub edges: Vec<(usize, usize)>,
    /// Upgrades recommended with known risks.
    #[serde(default, rename = "conditionalEdges")]
    pub conditional_edges: Vec<ConditionalEdges>,
}

/// A release.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct Node {
    /// Its version, e.g. `4.18.3`.
    pub version: String,
    /// Its payload image, by digest.
    pub payload: String,
    /// Metadata; [`CHANNELS_KEY`] lists its channels.
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

/// A group of conditional edges.
#[derive(Debug, serde::Deserialize)]
pub struct ConditionalEdges {
    /// The edges, by version.
    pub edges: Vec<VersionEdge>,
}

/// An edge named by versions.
#[derive(Debug, serde::Deserialize)]
pub struct VersionEdge {
    /// From this version.
    pub from: String,
    /// To this version.
    pub to: String,
}

/// What a channel entry (`mirror.platform.channels[]`, oc-mirror's `ReleaseChannel`) asks of
/// the graph. Its own type so the graph does not depend on the mirror's configuration format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChannelQuery<'a> {
    /// The channel, e.g. `stable-4.18`.
    pub name: &'a str,
    /// The lowest release wanted.
    pub min_version: Option<&'a str>,
    /// The highest release wanted.
    pub max_version: Option<&'a str>,
    /// Only the releases on the shortest upgrade path from min to max.
    pub shortest_path: bool,
    /// Every release of the channel, not only its head.
    pub full: bool,
}

/// A release chosen for mirroring.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Release {
    /// Its version.
    pub version: semver::Version,
    /// Its payload image, by digest.
    pub payload: String,
}

impl Graph {
    /// Parses a graph answer; `origin` names it in errors.
    pub fn from_json(bytes: &[u8], origin: &str) -> Result<Self> {
        serde_json::from_slice(bytes).with_context(|| {
            format!("{origin} is not an update graph (Cincinnati JSON with nodes and edges)")
        })
    }

    /// The releases `channel` selects; `path` names the channel entry in errors.
    pub fn releases(&self, channel: &ChannelQuery<'_>, path: &str) -> Result<Vec<Release>> {
        let in_channel = self.channel_nodes(channel.name, path)?;
        let bound = |v: Option<&str>, field: &str| -> Result<Option<semver::Version>> {
            v.map(|s| {
                semver::Version::parse(s)
                    .with_context(|| format!("{path}.{field}: '{s}' is not a version like 4.18.3"))
            })
            .transpose()
        };
        let min = bound(channel.min_version, "minVersion")?;
        let max = bound(channel.max_version, "maxVersion")?;
        let (lowest, head) = (
            in_channel
                .keys()
                .next()
                .cloned()
                .expect("non-empty channel"),
            in_channel
                .keys()
                .last()
                .cloned()
                .expect("non-empty channel"),
        );
        for (v, field) in [(&min, "minVersion"), (&max, "maxVersion")] {
            if let Some(v) = v {
                if !in_channel.contains_key(v) {
                    bail!(
                        "{path}.{field}: {v} is not a release of channel {} (it has {lowest} to {head})",
                        channel.name
                    );
                }
            }
        }
        if let (Some(a), Some(b)) = (&min, &max) {
            if a > b {
                bail!("{path}: minVersion {a} is above maxVersion {b}");
            }
        }
        let chosen: Vec<semver::Version> = match (&min, &max) {
            (None, None) if !channel.full => vec![head.clone()],
            (Some(a), Some(b)) if channel.shortest_path && !channel.full => {
                self.shortest_path(&in_channel, a, b, channel.name, path)?
            }
            _ => {
                let lo = min.clone().unwrap_or(lowest);
                let hi = max.clone().unwrap_or(head);
                in_channel
                    .keys()
                    .filter(|v| **v >= lo && **v <= hi)
                    .cloned()
                    .collect()
            }
        };
        Ok(chosen
            .into_iter()
            .map(|v| Release {
                payload: in_channel[&v].payload.clone(),
                version: v,
            })
            .collect())
    }

    /// The channel's releases by version.
    fn channel_nodes(&self, name: &str, path: &str) -> Result<BTreeMap<semver::Version, &Node>> {
        let mut out = BTreeMap::new();
        for node in &self.nodes {
            let listed = node
                .metadata
                .get(CHANNELS_KEY)
                .is_some_and(|c| c.split(',').any(|c| c.trim() == name));
            if !listed {
                continue;
            }
            if let Ok(v) = semver::Version::parse(&node.version) {
                out.insert(v, node);
            }
        }
        if out.is_empty() {
            bail!("{path}.name: the update graph has no release in channel {name}: check the channel's name and the graph (--graph-url)");
        }
        Ok(out)
    }

    /// The versions on a shortest upgrade path from `from` to `to`, both included, through
    /// releases of the channel.
    fn shortest_path(
        &self,
        in_channel: &BTreeMap<semver::Version, &Node>,
        from: &semver::Version,
        to: &semver::Version,
        name: &str,
        path: &str,
    ) -> Result<Vec<semver::Version>> {
        let version_of = |i: usize| semver::Version::parse(&self.nodes.get(i)?.version).ok();
        let mut next: BTreeMap<semver::Version, BTreeSet<semver::Version>> = BTreeMap::new();
        let plain = self
            .edges
            .iter()
            .filter_map(|&(a, b)| Some((version_of(a)?, version_of(b)?)));
        let conditional = self
            .conditional_edges
            .iter()
            .flat_map(|c| &c.edges)
            .filter_map(|e| {
                Some((
                    semver::Version::parse(&e.from).ok()?,
                    semver::Version::parse(&e.to).ok()?,
                ))
            });
        for (a, b) in plain.chain(conditional) {
            if in_channel.contains_key(&a) && in_channel.contains_key(&b) {
                next.entry(a).or_default().insert(b);
            }
        }
        let mut came_from: BTreeMap<semver::Version, semver::Version> = BTreeMap::new();
        let mut queue = VecDeque::from([from.clone()]);
        while let Some(v) = queue.pop_front() {
            if &v == to {
                let mut route = vec![v.clone()];
                let mut at = v;
                while let Some(prev) = came_from.get(&at) {
                    route.push(prev.clone());
                    at = prev.clone();
                }
                route.reverse();
                return Ok(route);
            }
            for n in next.get(&v).into_iter().flatten() {
                if n != from && !came_from.contains_key(n) {
                    came_from.insert(n.clone(), v.clone());
                    queue.push_back(n.clone());
                }
            }
        }
        bail!("{path}: channel {name} has no upgrade path from {from} to {to}; drop shortestPath to mirror every release in between")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small stable-4.18 graph: 4.18.1 -> 4.18.2 -> 4.18.3 -> 4.18.5, 4.18.1 -> 4.18.3,
    /// 4.18.3 -> 4.18.5 conditional only via 4.18.4 (candidate-only, not in stable).
    fn graph() -> Graph {
        let node = |v: &str, channels: &str| {
            serde_json::json!({
                "version": v,
                "payload": format!("quay.io/openshift-release-dev/ocp-release@sha256:{:0>64}", v.replace('.', "")),
                "metadata": { CHANNELS_KEY: channels },
            })
        };
        let json = serde_json::json!({
            "version": 1,
            "nodes": [
                node("4.18.1", "candidate-4.18,fast-4.18,stable-4.18"),
                node("4.18.2", "candidate-4.18,fast-4.18,stable-4.18"),
                node("4.18.3", "candidate-4.18,fast-4.18,stable-4.18"),
                node("4.18.4", "candidate-4.18"),
                node("4.18.5", "candidate-4.18,fast-4.18,stable-4.18"),
                node("4.17.9", "stable-4.17,stable-4.18"),
            ],
            "edges": [[5, 0], [0, 1], [1, 2], [0, 2], [2, 3], [3, 4]],
            "conditionalEdges": [{"edges": [{"from": "4.18.3", "to": "4.18.5"}], "risks": []}],
        });
        Graph::from_json(json.to_string().as_bytes(), "graph.json").unwrap()
    }

    fn channel<'a>(
        min: Option<&'a str>,
        max: Option<&'a str>,
        shortest: bool,
        full: bool,
    ) -> ChannelQuery<'a> {
        ChannelQuery {
            name: "stable-4.18",
            min_version: min,
            max_version: max,
            shortest_path: shortest,
            full,
        }
    }

    fn versions(c: ChannelQuery<'_>) -> Vec<String> {
        graph()
            .releases(&c, "mirror.platform.channels[0]")
            .unwrap()
            .iter()
            .map(|r| r.version.to_string())
            .collect()
    }

    #[test]
    fn no_bounds_is_the_channel_head() {
        assert_eq!(versions(channel(None, None, false, false)), ["4.18.5"]);
    }

    #[test]
    fn min_only_runs_to_the_head_and_max_only_from_the_lowest() {
        assert_eq!(
            versions(channel(Some("4.18.2"), None, false, false)),
            ["4.18.2", "4.18.3", "4.18.5"]
        );
        assert_eq!(
            versions(channel(None, Some("4.18.2"), false, false)),
            ["4.17.9", "4.18.1", "4.18.2"]
        );
    }

    #[test]
    fn shortest_path_takes_the_fewest_upgrades_including_conditional_edges() {
        assert_eq!(
            versions(channel(Some("4.18.1"), Some("4.18.5"), true, false)),
            ["4.18.1", "4.18.3", "4.18.5"]
        );
    }

    #[test]
    fn full_is_every_release_of_the_channel_only() {
        let all = versions(channel(None, None, false, true));
        assert_eq!(all, ["4.17.9", "4.18.1", "4.18.2", "4.18.3", "4.18.5"]);
        assert!(
            !all.contains(&"4.18.4".to_string()),
            "candidate-only release kept"
        );
    }

    #[test]
    fn bad_bounds_and_channels_name_the_field() {
        let g = graph();
        let p = "mirror.platform.channels[0]";
        let e = g
            .releases(&channel(Some("4.18.4"), None, false, false), p)
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("minVersion: 4.18.4 is not a release of channel stable-4.18"),
            "{e}"
        );
        let e = g
            .releases(&channel(Some("4.18.3"), Some("4.18.1"), false, false), p)
            .unwrap_err();
        assert!(e.to_string().contains("above maxVersion"), "{e}");
        let mut c = channel(None, None, false, false);
        c.name = "stable-9.9";
        let e = g.releases(&c, p).unwrap_err();
        assert!(
            e.to_string()
                .contains(".name: the update graph has no release in channel stable-9.9"),
            "{e}"
        );
        let e = g
            .releases(&channel(Some("4.18.5"), Some("4.18.5"), true, false), p)
            .unwrap();
        assert_eq!(e.len(), 1);
    }
}
