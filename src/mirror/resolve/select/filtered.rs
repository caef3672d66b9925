//! The filtered catalog: the kept packages, channels (holding only kept entries) and bundles,
//! the documents of other schemas that still apply, and the files of the rebuilt catalog.

use super::{graph_error, DependencyPick, Kept, SelectError, Selection, UnknownSchemas};
use crate::openshift::fbc::{self, Bundle, Catalog, Doc, Other};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

pub(super) fn build(
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
        unmet: Vec::new(),
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
        if !package.is_whole() {
            return Err(SelectError::NotWhole(format!("package '{name}'")));
        }
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
            if !channel.is_whole() {
                return Err(SelectError::NotWhole(format!(
                    "package '{name}' channel '{cname}'"
                )));
            }
            channel.entries.retain(|e| entries.contains(&e.name));
            for e in entries {
                let Some(bundle) = catalog.bundle(name, e) else {
                    return Err(graph_error(
                        &channel,
                        format!("entry '{e}' has no olm.bundle document in the catalog"),
                    ));
                };
                if !bundle.is_whole() {
                    return Err(SelectError::NotWhole(format!(
                        "package '{name}' bundle '{e}'"
                    )));
                }
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

pub(super) fn images_of<'a>(bundles: impl Iterator<Item = &'a Bundle>) -> Vec<String> {
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
            let mut docs = vec![Doc::Map(&package.raw)];
            docs.extend(
                self.channels
                    .get(name)
                    .into_iter()
                    .flat_map(|c| c.values())
                    .map(Doc::Channel),
            );
            docs.extend(
                self.bundles
                    .get(name)
                    .into_iter()
                    .flat_map(|b| b.values())
                    .map(|b| Doc::Map(&b.raw)),
            );
            if keep_others {
                docs.extend(
                    self.others
                        .iter()
                        .filter(|o| o.package.as_deref() == Some(name))
                        .map(|o| Doc::Map(&o.raw)),
                );
            }
            let mut out = Vec::new();
            fbc::write_json_stream(&mut out, docs);
            files.insert(format!("{name}/catalog.json"), out);
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
