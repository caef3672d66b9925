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

use parse::{parse_bundle, parse_channel, parse_package};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::fmt;

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
    /// The document as read.
    pub raw: Map<String, Value>,
}

/// One `entries[]` item of a channel: a bundle and the bundles it upgrades from.
#[derive(Clone, Debug, PartialEq)]
pub struct ChannelEntry {
    /// `name`: the bundle.
    pub name: String,
    /// `replaces`: the bundle this one replaces in the channel.
    pub replaces: Option<String>,
    /// `skips`: bundles this one can be installed over directly.
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
    /// `properties`.
    pub properties: Vec<Property>,
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
}

impl Catalog {
    /// Parses the files of a config directory (as [`crate::oci::layers::read_config_dir`] returns
    /// them): every `.json`, `.yaml` and `.yml` file; others are skipped.
    pub fn parse(files: &BTreeMap<String, Vec<u8>>) -> Result<Catalog, FbcError> {
        let mut catalog = Catalog::default();
        for (file, bytes) in files {
            let Some(documents) = parse_file(file, bytes)? else {
                continue;
            };
            for (i, doc) in documents.into_iter().enumerate() {
                let origin = Origin {
                    file: file.clone(),
                    document: i + 1,
                };
                catalog.add(doc, origin)?;
            }
        }
        catalog.check_packages()?;
        Ok(catalog)
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

    fn add(&mut self, doc: Map<String, Value>, origin: Origin) -> Result<(), FbcError> {
        let schema = match doc.get("schema") {
            Some(Value::String(s)) => s.clone(),
            _ => {
                return Err(FbcError::Document {
                    origin,
                    message: "has no 'schema' (a string such as olm.package)".into(),
                })
            }
        };
        match schema.as_str() {
            SCHEMA_PACKAGE => {
                let p = parse_package(doc, origin)?;
                match self.packages.entry(p.name.clone()) {
                    Entry::Occupied(e) => Err(duplicate(SCHEMA_PACKAGE, &p.name, e.get(), &p)),
                    Entry::Vacant(e) => {
                        e.insert(p);
                        Ok(())
                    }
                }
            }
            SCHEMA_CHANNEL => {
                let c = parse_channel(doc, origin)?;
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
            SCHEMA_BUNDLE => {
                let b = parse_bundle(doc, origin)?;
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
            _ => {
                let package = doc.get("package").and_then(Value::as_str).map(String::from);
                self.others.push(Other {
                    schema,
                    package,
                    origin,
                    raw: doc,
                });
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
        Ok(())
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

/// Writes documents as `opm` reads them: a stream of JSON objects, each followed by a newline.
pub fn to_json_stream<'a>(docs: impl IntoIterator<Item = &'a Map<String, Value>>) -> Vec<u8> {
    let mut out = Vec::new();
    for doc in docs {
        // A map with string keys always serializes; writing to a Vec cannot fail.
        serde_json::to_writer_pretty(&mut out, doc).expect("a JSON object serializes");
        out.push(b'\n');
    }
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
        assert_eq!(ch.entries[1].skips, vec!["nfd.v4.15.9"]);
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
