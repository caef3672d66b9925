//! File-based catalogs (FBC): the `olm.package`, `olm.channel` and `olm.bundle` documents an
//! operator catalog image carries, parsed into a [`Catalog`].
//!
//! Selection needs the upgrade graph (channels and their entries), each bundle's version,
//! images and package dependencies; a rebuilt catalog needs everything else unchanged. So each
//! document keeps its original JSON object (`raw`) beside the typed fields read from it, and
//! documents of other schemas (`olm.deprecations`, anything newer) are kept whole as [`Other`]
//! so a rebuilt catalog can keep or drop them.
//!
//! Files are read as `opm` writes them: `.json` files are streams of concatenated JSON
//! objects, `.yaml`/`.yml` files are multi-document YAML. Other files under the config
//! directory (a README, `.indexignore`) are not catalog content and are skipped. Every error
//! names the file and the document's position in it.

mod parse;

pub use parse::parse_file;

use parse::{for_each_document, parse_bundle, parse_channel, parse_package, properties_of};
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io::Read;

/// Schema of a package document.
pub const SCHEMA_PACKAGE: &str = "olm.package";
/// Schema of a channel document.
pub const SCHEMA_CHANNEL: &str = "olm.channel";
/// Schema of a bundle document.
pub const SCHEMA_BUNDLE: &str = "olm.bundle";
/// Schema of a package's deprecation notices (kept as an [`Other`]).
pub const SCHEMA_DEPRECATIONS: &str = "olm.deprecations";
/// Bundle property holding `{packageName, version}`: the bundle's version.
pub const PROPERTY_PACKAGE: &str = "olm.package";
/// Bundle property holding `{packageName, versionRange}`: a dependency on another package.
pub const PROPERTY_PACKAGE_REQUIRED: &str = "olm.package.required";

/// Where a document is: its file (relative to the config directory) and its position there,
/// from 1. In YAML files empty documents are not counted.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Origin {
    /// The file, e.g. `nfd/catalog.json`.
    pub file: String,
    /// The document's position in the file, from 1.
    pub document: usize,
}

impl fmt::Display for Origin {
    /// `nfd/catalog.json: document 3`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: document {}", self.file, self.document)
    }
}

/// Why a catalog could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FbcError {
    /// A file is not valid JSON or YAML (or not UTF-8, for YAML).
    #[error("{file}: {message}")]
    Syntax {
        /// The file, relative to the config directory.
        file: String,
        /// What is wrong, with the document number or line where known.
        message: String,
    },
    /// A document is not what its schema requires (a missing name, a bundle without a
    /// version, ...).
    #[error("{origin}: {message}")]
    Document {
        /// Which document.
        origin: Origin,
        /// What is wrong with it.
        message: String,
    },
    /// Two documents define the same package, channel or bundle.
    #[error("{second}: {schema} '{name}' is defined twice (first at {first})")]
    Duplicate {
        /// `olm.package`, `olm.channel` or `olm.bundle`.
        schema: &'static str,
        /// The name (`package/name` for channels and bundles).
        name: String,
        /// The first definition.
        first: Origin,
        /// The second one.
        second: Origin,
    },
    /// A channel or bundle names a package the catalog has no `olm.package` document for.
    #[error("{origin}: {schema} '{name}' belongs to package '{package}', which has no olm.package document")]
    UnknownPackage {
        /// `olm.channel` or `olm.bundle`.
        schema: &'static str,
        /// The channel's or bundle's name.
        name: String,
        /// The package it names.
        package: String,
        /// Where it is.
        origin: Origin,
    },
}

/// An `olm.package` document.
#[derive(Clone, Debug, PartialEq)]
pub struct Package {
    /// `name`.
    pub name: String,
    /// `defaultChannel` (empty when absent; opm requires it).
    pub default_channel: String,
    /// `description`.
    pub description: Option<String>,
    /// Where it is.
    pub origin: Origin,
    /// The document as read (with `icon`, `properties` and anything else).
    pub raw: Map<String, Value>,
}

/// An `olm.channel` document.
#[derive(Clone, Debug, PartialEq)]
pub struct Channel {
    /// `package`.
    pub package: String,
    /// `name`.
    pub name: String,
    /// `entries`, in document order.
    pub entries: Vec<ChannelEntry>,
    /// Where it is.
    pub origin: Origin,
    /// The document as read, without its `entries` (each is held once, in its
    /// [`ChannelEntry::raw`]; [`Doc::Channel`] writes them back in place).
    pub raw: Map<String, Value>,
}

/// One `entries[]` item of a channel: a bundle and the bundles it upgrades from.
#[derive(Clone, Debug, PartialEq)]
pub struct ChannelEntry {
    /// `name`: the bundle.
    pub name: String,
    /// `replaces`: the bundle this one replaces in the channel.
    pub replaces: Option<String>,
    /// `skips`: bundles this one can be installed over directly, those that are entries of the
    /// same channel (the only ones its graph can use; `raw` keeps every name as read).
    pub skips: Vec<String>,
    /// `skipRange`: versions this one can be installed over (kept, not interpreted).
    pub skip_range: Option<String>,
    /// The entry as read.
    pub raw: Map<String, Value>,
}

/// An `olm.bundle` document.
#[derive(Clone, Debug, PartialEq)]
pub struct Bundle {
    /// `name`, e.g. `gpu-operator-certified.v24.6.2`.
    pub name: String,
    /// `package`.
    pub package: String,
    /// `image`: the bundle image.
    pub image: String,
    /// The version from the `olm.package` property.
    pub version: semver::Version,
    /// `relatedImages`: the images the operator runs (usually including the bundle image).
    pub related_images: Vec<RelatedImage>,
    /// The `olm.package.required` properties.
    pub dependencies: Vec<PackageRequirement>,
    /// Where it is.
    pub origin: Origin,
    /// The document as read.
    pub raw: Map<String, Value>,
}

/// One `properties[]` item of a bundle.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct Property {
    /// `type`, e.g. `olm.package`, `olm.gvk`, `olm.csv.metadata`.
    #[serde(rename = "type")]
    pub property_type: String,
    /// `value`, as read.
    #[serde(default)]
    pub value: Value,
}

/// One `relatedImages[]` item of a bundle.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct RelatedImage {
    /// `name`, when given.
    #[serde(default)]
    pub name: Option<String>,
    /// `image`: the reference, usually by digest.
    pub image: String,
}

/// An `olm.package.required` property: this bundle needs a bundle of another package.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct PackageRequirement {
    /// `packageName`.
    #[serde(rename = "packageName")]
    pub package: String,
    /// `versionRange`, in blang/semver syntax (`>=1.2.0 <2.0.0`, `||` for alternatives).
    #[serde(rename = "versionRange")]
    pub version_range: String,
}

/// A document of any other schema, kept whole.
#[derive(Clone, Debug, PartialEq)]
pub struct Other {
    /// `schema`, e.g. `olm.deprecations`.
    pub schema: String,
    /// `package`, when the document has one.
    pub package: Option<String>,
    /// Where it is.
    pub origin: Origin,
    /// The document as read.
    pub raw: Map<String, Value>,
}

/// A parsed file-based catalog.
///
/// Read with [`Catalog::read`], a catalog can hold some documents whole and others as an
/// index only: what selection needs (names, default channels, entries' graph, bundles' versions,
/// images and requirements) with an empty `raw` (see [`Keep`]); [`Package::is_whole`] and its
/// kin tell them apart.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Catalog {
    /// Packages by name.
    pub packages: BTreeMap<String, Package>,
    /// Channels by package, then channel name.
    pub channels: BTreeMap<String, BTreeMap<String, Channel>>,
    /// Bundles by package, then bundle name.
    pub bundles: BTreeMap<String, BTreeMap<String, Bundle>>,
    /// Documents of other schemas, in file order.
    pub others: Vec<Other>,
    /// The versions of the bundles of packages read with [`Rest::Versions`] (their bundles
    /// are not in `bundles`): what a requirement on such a package is checked against.
    pub versions: BTreeMap<String, Vec<semver::Version>>,
    /// For each package of `versions`, its first bundle (name and where), to name it when the
    /// package has no `olm.package` document.
    first_versioned: BTreeMap<String, (String, Origin)>,
}

/// What [`Catalog::read`] keeps of a catalog's documents.
#[derive(Clone, Copy, Debug)]
pub enum Keep<'a> {
    /// Every document whole.
    All,
    /// Every document of these packages whole, and documents of other schemas that belong to
    /// no package; of other packages what the [`Rest`] says.
    Packages(&'a BTreeSet<String>, Rest),
    /// These documents whole (and other-schema documents of these packages or of none); of
    /// everything else what the [`Rest`] says.
    Documents(&'a Wanted, Rest),
}

/// What [`Catalog::read`] keeps of the documents it does not keep whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rest {
    /// Packages, channels and bundles as an index: their typed fields, `raw` empty.
    Index,
    /// Packages as an index, bundles' versions only ([`Catalog::versions`]), no channels:
    /// enough to tell why a requirement on the package is not met.
    Versions,
}

/// Documents to keep whole, by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Wanted {
    /// `olm.package` documents (and the other-schema documents of these packages).
    pub packages: BTreeSet<String>,
    /// `olm.channel` documents, as (package, channel).
    pub channels: BTreeSet<(String, String)>,
    /// `olm.bundle` documents, as (package, bundle).
    pub bundles: BTreeSet<(String, String)>,
}

/// What one [`Catalog::read`] saw and kept: what a test of its memory counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Documents read.
    pub documents: usize,
    /// Documents kept whole.
    pub whole: usize,
    /// Packages, channels and bundles kept as an index.
    pub indexed: usize,
    /// Channel entries kept as an index (in channels not kept whole).
    pub indexed_entries: usize,
    /// In-channel skips kept as an index.
    pub indexed_skips: usize,
    /// Bundle versions kept for [`Rest::Versions`].
    pub versions: usize,
}

impl Keep<'_> {
    fn package(&self, package: &str) -> Option<Rest> {
        match self {
            Keep::All => None,
            Keep::Packages(set, rest) => (!set.contains(package)).then_some(*rest),
            Keep::Documents(w, rest) => (!w.packages.contains(package)).then_some(*rest),
        }
    }

    fn channel(&self, package: &str, name: &str) -> Option<Rest> {
        self.named(package, name, |w| &w.channels)
    }

    fn bundle(&self, package: &str, name: &str) -> Option<Rest> {
        self.named(package, name, |w| &w.bundles)
    }

    /// A channel or bundle (`set` picks which of [`Wanted`]'s): whole with its package, or
    /// when named in `set`.
    fn named(
        &self,
        package: &str,
        name: &str,
        set: fn(&Wanted) -> &BTreeSet<(String, String)>,
    ) -> Option<Rest> {
        match self {
            Keep::All => None,
            Keep::Packages(packages, rest) => (!packages.contains(package)).then_some(*rest),
            Keep::Documents(w, rest) => {
                let key = (package.to_string(), name.to_string());
                (!set(w).contains(&key)).then_some(*rest)
            }
        }
    }

    /// Whether a document of another schema is kept (always when it names no package).
    fn other(&self, package: Option<&str>) -> bool {
        package.is_none_or(|p| self.package(p).is_none())
    }
}

impl Catalog {
    /// Parses the files of a config directory (as [`crate::oci::layers::read_config_dir`] returns
    /// them): every `.json`, `.yaml` and `.yml` file; others are skipped.
    pub fn parse(files: &BTreeMap<String, Vec<u8>>) -> Result<Catalog, FbcError> {
        let files = files
            .iter()
            .map(|(name, bytes)| (name.as_str(), &bytes[..]));
        Catalog::read(files, Keep::All).map(|(c, _)| c)
    }

    /// Reads `files` (name relative to the config directory, and a reader of its bytes) one
    /// document at a time, keeping of each what `keep` says; every document is checked as
    /// [`Catalog::parse`] checks it, kept or not (a duplicate is found only among what is kept,
    /// whole or as an index).
    pub fn read<'n, R: Read>(
        files: impl IntoIterator<Item = (&'n str, R)>,
        keep: Keep<'_>,
    ) -> Result<(Catalog, ReadStats), FbcError> {
        let mut catalog = Catalog::default();
        let mut stats = ReadStats::default();
        visit(files, |_, doc| catalog.insert(doc, keep, &mut stats))?;
        catalog.check_packages()?;
        Ok((catalog, stats))
    }

    /// Adds one document, keeping of it what `keep` says; refuses a second definition.
    pub fn insert(
        &mut self,
        doc: Parsed,
        keep: Keep<'_>,
        stats: &mut ReadStats,
    ) -> Result<(), FbcError> {
        stats.documents += 1;
        self.add(doc, keep, stats)
    }

    /// What [`Catalog::read`] checks once every document is in: every channel and bundle
    /// belongs to a package the catalog defines.
    pub fn check(&self) -> Result<(), FbcError> {
        self.check_packages()
    }

    /// The channels of `package`, by name.
    pub fn channels_of(&self, package: &str) -> impl Iterator<Item = &Channel> {
        self.channels
            .get(package)
            .into_iter()
            .flat_map(|c| c.values())
    }

    /// The bundle `name` of `package`.
    pub fn bundle(&self, package: &str, name: &str) -> Option<&Bundle> {
        self.bundles.get(package)?.get(name)
    }

    fn add(&mut self, doc: Parsed, keep: Keep<'_>, stats: &mut ReadStats) -> Result<(), FbcError> {
        match doc {
            Parsed::Package(mut p) => {
                match keep.package(&p.name) {
                    None => stats.whole += 1,
                    Some(_) => {
                        p.raw = Map::new();
                        stats.indexed += 1;
                    }
                }
                match self.packages.entry(p.name.clone()) {
                    Entry::Occupied(e) => Err(duplicate(SCHEMA_PACKAGE, &p.name, e.get(), &p)),
                    Entry::Vacant(e) => {
                        e.insert(p);
                        Ok(())
                    }
                }
            }
            Parsed::Channel(mut c) => {
                match keep.channel(&c.package, &c.name) {
                    None => stats.whole += 1,
                    Some(Rest::Versions) => return Ok(()),
                    Some(Rest::Index) => {
                        c.raw = Map::new();
                        for e in &mut c.entries {
                            e.raw = Map::new();
                            stats.indexed_skips += e.skips.len();
                        }
                        stats.indexed += 1;
                        stats.indexed_entries += c.entries.len();
                    }
                }
                let map = self.channels.entry(c.package.clone()).or_default();
                match map.entry(c.name.clone()) {
                    Entry::Occupied(e) => Err(FbcError::Duplicate {
                        schema: SCHEMA_CHANNEL,
                        name: format!("{}/{}", c.package, c.name),
                        first: e.get().origin.clone(),
                        second: c.origin,
                    }),
                    Entry::Vacant(e) => {
                        e.insert(c);
                        Ok(())
                    }
                }
            }
            Parsed::Bundle(mut b) => {
                match keep.bundle(&b.package, &b.name) {
                    None => stats.whole += 1,
                    Some(Rest::Versions) => {
                        stats.versions += 1;
                        if !self.first_versioned.contains_key(&b.package) {
                            let first = (b.name, b.origin);
                            self.first_versioned.insert(b.package.clone(), first);
                        }
                        self.versions.entry(b.package).or_default().push(b.version);
                        return Ok(());
                    }
                    Some(Rest::Index) => {
                        b.raw = Map::new();
                        stats.indexed += 1;
                    }
                }
                let map = self.bundles.entry(b.package.clone()).or_default();
                match map.entry(b.name.clone()) {
                    Entry::Occupied(e) => Err(FbcError::Duplicate {
                        schema: SCHEMA_BUNDLE,
                        name: format!("{}/{}", b.package, b.name),
                        first: e.get().origin.clone(),
                        second: b.origin,
                    }),
                    Entry::Vacant(e) => {
                        e.insert(b);
                        Ok(())
                    }
                }
            }
            Parsed::Other(o) => {
                if keep.other(o.package.as_deref()) {
                    stats.whole += 1;
                    self.others.push(o);
                }
                Ok(())
            }
        }
    }

    /// Every channel and bundle belongs to a package the catalog defines (opm refuses
    /// catalogs where one does not).
    fn check_packages(&self) -> Result<(), FbcError> {
        let unknown =
            |schema, name: &str, package: &str, origin: &Origin| FbcError::UnknownPackage {
                schema,
                name: name.to_string(),
                package: package.to_string(),
                origin: origin.clone(),
            };
        for (package, channels) in &self.channels {
            if !self.packages.contains_key(package) {
                if let Some(c) = channels.values().next() {
                    return Err(unknown(SCHEMA_CHANNEL, &c.name, package, &c.origin));
                }
            }
        }
        for (package, bundles) in &self.bundles {
            if !self.packages.contains_key(package) {
                if let Some(b) = bundles.values().next() {
                    return Err(unknown(SCHEMA_BUNDLE, &b.name, package, &b.origin));
                }
            }
        }
        for (package, (name, origin)) in &self.first_versioned {
            if !self.packages.contains_key(package) {
                return Err(unknown(SCHEMA_BUNDLE, name, package, origin));
            }
        }
        Ok(())
    }
}

/// One document of a catalog, read and checked.
#[derive(Clone, Debug, PartialEq)]
pub enum Parsed {
    /// `olm.package`.
    Package(Package),
    /// `olm.channel`.
    Channel(Channel),
    /// `olm.bundle`.
    Bundle(Bundle),
    /// Any other schema.
    Other(Other),
}

impl Parsed {
    /// The package the document belongs to (its name, for a package).
    pub fn package(&self) -> Option<&str> {
        match self {
            Parsed::Package(p) => Some(&p.name),
            Parsed::Channel(c) => Some(&c.package),
            Parsed::Bundle(b) => Some(&b.package),
            Parsed::Other(o) => o.package.as_deref(),
        }
    }

    fn of(doc: Map<String, Value>, origin: Origin) -> Result<Parsed, FbcError> {
        let schema = match doc.get("schema") {
            Some(Value::String(s)) => s.clone(),
            _ => {
                return Err(FbcError::Document {
                    origin,
                    message: "has no 'schema' (a string such as olm.package)".into(),
                })
            }
        };
        Ok(match schema.as_str() {
            SCHEMA_PACKAGE => Parsed::Package(parse_package(doc, origin)?),
            SCHEMA_CHANNEL => Parsed::Channel(parse_channel(doc, origin)?),
            SCHEMA_BUNDLE => Parsed::Bundle(parse_bundle(doc, origin)?),
            _ => {
                let package = doc.get("package").and_then(Value::as_str).map(String::from);
                Parsed::Other(Other {
                    schema,
                    package,
                    origin,
                    raw: doc,
                })
            }
        })
    }
}

/// Reads `files` (name relative to the config directory, and a reader of its bytes) one
/// document at a time, calling `f` with the file's position in `files` and the document, read
/// and checked; files that are not catalog content are skipped.
pub fn visit<'n, R: Read>(
    files: impl IntoIterator<Item = (&'n str, R)>,
    mut f: impl FnMut(usize, Parsed) -> Result<(), FbcError>,
) -> Result<(), FbcError> {
    for (index, (file, reader)) in files.into_iter().enumerate() {
        for_each_document(file, reader, |document, doc| {
            let origin = Origin {
                file: file.to_string(),
                document,
            };
            f(index, Parsed::of(doc, origin)?)
        })?;
    }
    Ok(())
}

impl Package {
    /// True when the document is held whole, false for an index entry (see [`Keep`]).
    pub fn is_whole(&self) -> bool {
        !self.raw.is_empty()
    }
}

impl Channel {
    /// True when the document is held whole, false for an index entry (see [`Keep`]).
    pub fn is_whole(&self) -> bool {
        !self.raw.is_empty()
    }
}

impl Bundle {
    /// True when the document is held whole, false for an index entry (see [`Keep`]).
    pub fn is_whole(&self) -> bool {
        !self.raw.is_empty()
    }

    /// `properties`, as read (none for an index entry).
    pub fn properties(&self) -> Vec<Property> {
        properties_of(&self.raw)
    }
}

fn duplicate(schema: &'static str, name: &str, first: &Package, second: &Package) -> FbcError {
    FbcError::Duplicate {
        schema,
        name: name.to_string(),
        first: first.origin.clone(),
        second: second.origin.clone(),
    }
}

/// A document to write: an object as read, or a channel (its `raw` with its entries put back
/// where they sort).
#[derive(Clone, Copy, Debug)]
pub enum Doc<'a> {
    /// Written as it is.
    Map(&'a Map<String, Value>),
    /// `raw` with `entries` (each entry's `raw`) in key order, as the document was read.
    Channel(&'a Channel),
}

impl Serialize for Doc<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Doc::Map(m) => m.serialize(s),
            Doc::Channel(c) => {
                struct Entries<'a>(&'a [ChannelEntry]);
                impl Serialize for Entries<'_> {
                    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                        s.collect_seq(self.0.iter().map(|e| &e.raw))
                    }
                }
                let mut map = s.serialize_map(Some(c.raw.len() + 1))?;
                let mut pending = true;
                for (k, v) in &c.raw {
                    if pending && k.as_str() > "entries" {
                        map.serialize_entry("entries", &Entries(&c.entries))?;
                        pending = false;
                    }
                    if k != "entries" {
                        map.serialize_entry(k, v)?;
                    }
                }
                if pending {
                    map.serialize_entry("entries", &Entries(&c.entries))?;
                }
                map.end()
            }
        }
    }
}

/// Writes documents as `opm` reads them: a stream of JSON objects, each followed by a newline.
pub fn write_json_stream<'a>(out: &mut Vec<u8>, docs: impl IntoIterator<Item = Doc<'a>>) {
    for doc in docs {
        // String keys and JSON values always serialize; writing to a Vec cannot fail.
        serde_json::to_writer_pretty(&mut *out, &doc).expect("a JSON object serializes");
        out.push(b'\n');
    }
}

/// [`write_json_stream`] of objects as read, into a new buffer.
pub fn to_json_stream<'a>(docs: impl IntoIterator<Item = &'a Map<String, Value>>) -> Vec<u8> {
    let mut out = Vec::new();
    write_json_stream(&mut out, docs.into_iter().map(Doc::Map));
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// A bundle document: `package.vVERSION`, its image and one related image per name in
    /// `related`, plus `olm.package.required` properties from `requires` (package, range).
    pub(crate) fn bundle(
        package: &str,
        version: &str,
        related: &[&str],
        requires: &[(&str, &str)],
    ) -> Value {
        let name = format!("{package}.v{version}");
        let image = format!("registry.example.com/{package}/bundle@sha256:{version}");
        let mut properties = vec![
            json!({"type": "olm.package", "value": {"packageName": package, "version": version}}),
            json!({"type": "olm.gvk", "value": {"group": "example.com", "kind": "Thing", "version": "v1"}}),
        ];
        for (dep, range) in requires {
            properties.push(
                json!({"type": "olm.package.required", "value": {"packageName": dep, "versionRange": range}}),
            );
        }
        let mut related_images = vec![json!({"name": "", "image": image})];
        for r in related {
            related_images.push(json!({
                "name": r,
                "image": format!("registry.example.com/{package}/{r}@sha256:{version}")
            }));
        }
        json!({
            "schema": "olm.bundle",
            "name": name,
            "package": package,
            "image": image,
            "properties": properties,
            "relatedImages": related_images,
        })
    }

    fn stream(docs: &[Value]) -> Vec<u8> {
        let mut out = Vec::new();
        for d in docs {
            out.extend(serde_json::to_vec(d).unwrap());
            out.push(b'\n');
        }
        out
    }

    #[test]
    fn json_stream_is_parsed() {
        let docs = [
            json!({"schema": "olm.package", "name": "nfd", "defaultChannel": "stable",
                   "icon": {"base64data": "iVBOR", "mediatype": "image/png"}}),
            json!({"schema": "olm.channel", "package": "nfd", "name": "stable", "entries": [
                {"name": "nfd.v4.16.0-202407111006"},
                {"name": "nfd.v4.16.1", "replaces": "nfd.v4.16.0-202407111006", "skips": ["nfd.v4.15.9"], "skipRange": ">=4.15.0 <4.16.1"}
            ]}),
            bundle("nfd", "4.16.0-202407111006", &["operator"], &[]),
            bundle(
                "nfd",
                "4.16.1",
                &["operator"],
                &[("openshift-gitops-operator", ">=1.10.0")],
            ),
            json!({"schema": "olm.deprecations", "package": "nfd", "entries": []}),
        ];
        // opm's own output is indented; a stream of compact documents is just as valid.
        let mut bytes = serde_json::to_vec_pretty(&docs[0]).unwrap();
        bytes.extend(stream(&docs[1..]));
        let files = BTreeMap::from([
            ("nfd/catalog.json".to_string(), bytes),
            ("nfd/README.md".to_string(), b"not a catalog".to_vec()),
        ]);
        let c = Catalog::parse(&files).unwrap();
        let p = &c.packages["nfd"];
        assert_eq!(p.default_channel, "stable");
        assert!(p.raw.contains_key("icon"));
        let ch = &c.channels["nfd"]["stable"];
        assert_eq!(ch.entries.len(), 2);
        assert_eq!(
            ch.entries[1].replaces.as_deref(),
            Some("nfd.v4.16.0-202407111006")
        );
        // A skip of a bundle outside the channel cannot be graphed; the entry as read keeps it.
        assert!(ch.entries[1].skips.is_empty());
        assert_eq!(ch.entries[1].raw["skips"], json!(["nfd.v4.15.9"]));
        assert!(!ch.raw.contains_key("entries"));
        assert_eq!(
            ch.entries[1].skip_range.as_deref(),
            Some(">=4.15.0 <4.16.1")
        );
        let b = c.bundle("nfd", "nfd.v4.16.1").unwrap();
        assert_eq!(b.version, semver::Version::new(4, 16, 1));
        assert_eq!(b.related_images.len(), 2);
        assert_eq!(
            b.dependencies,
            vec![PackageRequirement {
                package: "openshift-gitops-operator".into(),
                version_range: ">=1.10.0".into()
            }]
        );
        let old = c.bundle("nfd", "nfd.v4.16.0-202407111006").unwrap();
        assert_eq!(old.version.pre.as_str(), "202407111006");
        assert_eq!(c.others.len(), 1);
        assert_eq!(c.others[0].schema, "olm.deprecations");
        assert_eq!(c.others[0].package.as_deref(), Some("nfd"));
        assert_eq!(
            c.others[0].origin,
            Origin {
                file: "nfd/catalog.json".into(),
                document: 5
            }
        );
    }

    #[test]
    fn multi_document_yaml_is_parsed() {
        let yaml = r#"---
schema: olm.package
name: openshift-gitops-operator
defaultChannel: latest
description: |
  Argo CD for OpenShift
---
schema: olm.channel
package: openshift-gitops-operator
name: latest
entries:
  - name: openshift-gitops-operator.v1.12.0
  - name: openshift-gitops-operator.v1.13.1
    replaces: openshift-gitops-operator.v1.12.0
---
# comments and empty documents are fine
---
schema: olm.bundle
name: openshift-gitops-operator.v1.13.1
package: openshift-gitops-operator
image: registry.example.com/gitops/bundle@sha256:1131
properties:
  - type: olm.package
    value:
      packageName: openshift-gitops-operator
      version: 1.13.1
relatedImages:
  - name: argocd
    image: registry.example.com/gitops/argocd@sha256:aaaa
...
---
schema: olm.bundle
name: openshift-gitops-operator.v1.12.0
package: openshift-gitops-operator
image: registry.example.com/gitops/bundle@sha256:1120
properties:
  - type: olm.package
    value: {packageName: openshift-gitops-operator, version: "1.12.0"}
"#;
        let files = BTreeMap::from([("gitops/catalog.yaml".to_string(), yaml.as_bytes().to_vec())]);
        let c = Catalog::parse(&files).unwrap();
        let p = &c.packages["openshift-gitops-operator"];
        assert_eq!(p.default_channel, "latest");
        assert_eq!(p.description.as_deref(), Some("Argo CD for OpenShift\n"));
        assert_eq!(
            c.channels["openshift-gitops-operator"]["latest"]
                .entries
                .len(),
            2
        );
        let b = c
            .bundle(
                "openshift-gitops-operator",
                "openshift-gitops-operator.v1.13.1",
            )
            .unwrap();
        assert_eq!(b.version.to_string(), "1.13.1");
        assert_eq!(b.related_images[0].name.as_deref(), Some("argocd"));
        assert_eq!(b.origin.document, 3);
        assert_eq!(c.bundles["openshift-gitops-operator"].len(), 2);
    }

    fn parse_err(file: &str, bytes: &[u8]) -> String {
        let files = BTreeMap::from([(file.to_string(), bytes.to_vec())]);
        Catalog::parse(&files).unwrap_err().to_string()
    }

    #[test]
    fn errors_name_the_file_and_document() {
        let pkg = json!({"schema": "olm.package", "name": "nfd", "defaultChannel": "stable"});
        let no_version = json!({"schema": "olm.bundle", "name": "nfd.v1", "package": "nfd",
                                "image": "x", "properties": []});
        assert_eq!(
            parse_err("nfd/catalog.json", &stream(&[pkg.clone(), no_version])),
            "nfd/catalog.json: document 2: olm.bundle 'nfd.v1': needs exactly one 'olm.package' property (it holds the bundle's version)"
        );
        let bad_version = json!({"schema": "olm.bundle", "name": "nfd.v1", "package": "nfd", "image": "x",
            "properties": [{"type": "olm.package", "value": {"packageName": "nfd", "version": "v1.0"}}]});
        let e = parse_err("nfd/catalog.json", &stream(&[pkg.clone(), bad_version]));
        assert!(e.starts_with("nfd/catalog.json: document 2: olm.bundle 'nfd.v1': version 'v1.0' in its 'olm.package' property is not semantic versioning"), "{e}");
        let no_name = json!({"schema": "olm.channel", "package": "nfd", "entries": []});
        let e = parse_err("c.json", &stream(&[pkg.clone(), no_name]));
        assert!(
            e.starts_with("c.json: document 2: olm.channel: missing field `name`"),
            "{e}"
        );
        let bad_entry = json!({"schema": "olm.channel", "package": "nfd", "name": "stable",
                               "entries": [{"name": "a"}, {"replaces": "a"}]});
        let e = parse_err("c.json", &stream(&[pkg.clone(), bad_entry]));
        assert!(
            e.starts_with(
                "c.json: document 2: olm.channel 'stable': entries[1]: missing field `name`"
            ),
            "{e}"
        );
        let no_schema = json!({"name": "x"});
        assert_eq!(
            parse_err("c.json", &stream(&[no_schema])),
            "c.json: document 1: has no 'schema' (a string such as olm.package)"
        );
        let e = parse_err(
            "c.json",
            b"{\"schema\": \"olm.package\", \"name\": \"a\"}\n{\"schema\": ",
        );
        assert!(
            e.starts_with("c.json: document 2: not valid JSON: EOF while parsing"),
            "{e}"
        );
        assert_eq!(
            parse_err("c.json", b"[1, 2]"),
            "c.json: document 1: expected a JSON object, found a list"
        );
        let e = parse_err("c.yaml", b"schema: olm.package\nname: [a\n");
        assert!(e.starts_with("c.yaml: not valid YAML"), "{e}");
        assert_eq!(
            parse_err("c.yaml", b"schema: olm.package\nname: a\n---\n- x\n"),
            "c.yaml: document 2: expected a mapping, found a list"
        );
    }

    #[test]
    fn duplicates_and_orphans_are_refused() {
        let pkg = json!({"schema": "olm.package", "name": "nfd", "defaultChannel": "stable"});
        let files = BTreeMap::from([
            ("a.json".to_string(), stream(std::slice::from_ref(&pkg))),
            ("b.json".to_string(), stream(std::slice::from_ref(&pkg))),
        ]);
        assert_eq!(
            Catalog::parse(&files).unwrap_err().to_string(),
            "b.json: document 1: olm.package 'nfd' is defined twice (first at a.json: document 1)"
        );
        let b = bundle("nfd", "1.0.0", &[], &[]);
        let e = parse_err("a.json", &stream(&[pkg.clone(), b.clone(), b]));
        assert_eq!(
            e,
            "a.json: document 3: olm.bundle 'nfd/nfd.v1.0.0' is defined twice (first at a.json: document 2)"
        );
        let orphan = bundle("ghost", "1.0.0", &[], &[]);
        assert_eq!(
            parse_err("a.json", &stream(&[pkg, orphan])),
            "a.json: document 2: olm.bundle 'ghost.v1.0.0' belongs to package 'ghost', which has no olm.package document"
        );
    }

    #[test]
    fn json_stream_round_trips() {
        let docs = [
            json!({"schema": "olm.package", "name": "nfd", "defaultChannel": "stable"}),
            bundle("nfd", "1.0.0", &["operator"], &[]),
        ];
        let maps: Vec<Map<String, Value>> = docs
            .iter()
            .map(|d| d.as_object().unwrap().clone())
            .collect();
        let bytes = to_json_stream(&maps);
        assert_eq!(parse_file("x.json", &bytes).unwrap().unwrap(), maps);
    }
}
