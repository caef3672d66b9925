//! A channel's upgrade graph: who replaces and skips whom, checked as opm checks it (one head,
//! no cycle), and the part of the replaces chain a set of wanted entries needs.

use crate::openshift::fbc::{Catalog, Channel};
use semver::Version;
use std::collections::{BTreeSet, HashMap, VecDeque};

/// A channel's entries as a graph: who replaces and skips whom, and the one head.
pub(super) struct ChannelGraph<'a> {
    pub(super) channel: &'a Channel,
    /// The entry nothing else replaces or skips.
    pub(super) head: usize,
    /// The entry each entry replaces, when that is an entry of this channel.
    replaces: Vec<Option<usize>>,
    /// The entries each entry skips (those that are entries of this channel).
    skips: Vec<Vec<usize>>,
}

impl<'a> ChannelGraph<'a> {
    /// Checks what opm checks: entries, no duplicates, no self-references, exactly one head
    /// (the entry nothing else replaces or skips), no cycle.
    pub(super) fn new(channel: &'a Channel) -> Result<Self, String> {
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
        Ok(ChannelGraph {
            channel,
            head,
            replaces,
            skips,
        })
    }

    /// The replaces chain from the head down (acyclic: checked in [`ChannelGraph::new`]).
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
    pub(super) fn segment(&self, wanted: impl Fn(usize) -> bool) -> BTreeSet<usize> {
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

    pub(super) fn name(&self, i: usize) -> &'a str {
        &self.channel.entries[i].name
    }

    pub(super) fn names(&self, entries: impl IntoIterator<Item = usize>) -> BTreeSet<String> {
        entries
            .into_iter()
            .map(|i| self.name(i).to_string())
            .collect()
    }

    /// The version of entry `i`'s bundle, when the catalog has the bundle.
    pub(super) fn version(&self, catalog: &'a Catalog, i: usize) -> Option<&'a Version> {
        catalog
            .bundle(&self.channel.package, self.name(i))
            .map(|b| &b.version)
    }
}
