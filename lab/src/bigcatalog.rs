//! A deterministic operator catalog of a real index's shape and size, for the catalog benchmark
//! (`bench/catalog.sh`) and the memory tests: many packages, channels whose every entry skips
//! about a hundred earlier versions (most of them pruned from the catalog long ago, as in
//! `redhat-operator-index`, where oc-mirror ran out of memory filtering: OCPBUGS-52471),
//! bundles with `olm.csv.metadata` and, optionally, `olm.bundle.object` manifests as older
//! catalogs carry them.
//!
//! The default [`Shape`] is the measured catalog: 200 packages, 8,000 bundles, 16,000
//! channel entries, 1.6 M skips, about 130 MiB of FBC JSON. [`Shape::scaled`] multiplies the
//! package count. Each package's documents are `PACKAGE/catalog.json`, written as opm writes them
//! (pretty JSON objects one after another): the package, its channels, its bundles.
//!
//! Every bundle names two images (its bundle image and its operator); [`related_images`] builds
//! them cheaply for a registry: one tiny layer and config shared by every image of a repository,
//! a manifest of its own per image (an annotation), so a registry holds thousands of them for a
//! few requests each.

use crate::image::{self, File, Image, ImageSpec};
use anyhow::Result;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// The catalog's size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Packages.
    pub packages: usize,
    /// Bundles per package; every channel lists all of them, each replacing the one before.
    pub bundles: usize,
    /// Channels per package (`stable`, `fast`, `candidate`, ...).
    pub channels: usize,
    /// `skips` per entry: mostly versions no longer in the catalog, and the entry two before.
    pub skips: usize,
    /// Bytes of `olm.csv.metadata` description per bundle.
    pub description_bytes: usize,
    /// Bytes of base64 `olm.bundle.object` per bundle (0: none, as current catalogs).
    pub object_bytes: usize,
}

impl Default for Shape {
    /// The measured shape: 200 packages × 40 bundles, 2 channels, 99 skips per entry.
    fn default() -> Self {
        Shape {
            packages: 200,
            bundles: 40,
            channels: 2,
            skips: 99,
            description_bytes: 6 * 1024,
            object_bytes: 0,
        }
    }
}

const CHANNELS: [&str; 4] = ["stable", "fast", "candidate", "eus"];

impl Shape {
    /// This shape with `factor` times the packages.
    pub fn scaled(self, factor: usize) -> Shape {
        Shape {
            packages: self.packages * factor,
            ..self
        }
    }

    /// The name of package `p`.
    pub fn package(&self, p: usize) -> String {
        format!("operator-{p:04}")
    }

    /// The version of bundle `i` (from 0, oldest first).
    fn version(i: usize) -> String {
        format!("2.{}.{}", i / 10, i % 10)
    }

    fn bundle_name(package: &str, i: usize) -> String {
        format!("{package}.v{}", Self::version(i))
    }

    /// The two images bundle `i` of `package` names, on `host`: its bundle image and its operator.
    fn images(host: &str, package: &str, i: usize) -> [(String, String); 2] {
        let v = Self::version(i);
        [
            (format!("bench/{package}-bundle"), v.clone()),
            (format!("bench/{package}-operator"), v),
        ]
        .map(|(repo, v)| (format!("{host}/{repo}"), v))
    }
}

/// The catalog's config files (`PACKAGE/catalog.json`); bundles name images on `host`, by
/// digest when `digests` gives one (see [`related_images`]), else by tag.
pub fn config_files(
    shape: &Shape,
    host: &str,
    digests: &BTreeMap<String, String>,
) -> BTreeMap<String, Vec<u8>> {
    (0..shape.packages)
        .map(|p| {
            let name = shape.package(p);
            let bytes = package_file(shape, &name, host, digests);
            (format!("{name}/catalog.json"), bytes)
        })
        .collect()
}

fn package_file(
    shape: &Shape,
    package: &str,
    host: &str,
    digests: &BTreeMap<String, String>,
) -> Vec<u8> {
    let mut docs = vec![json!({
        "schema": "olm.package",
        "name": package,
        "defaultChannel": CHANNELS[0],
        "description": format!("{package}: a generated operator"),
        "icon": {"base64data": image::filler(package, 96).iter().map(|b| char::from(b'A' + b % 26)).collect::<String>(), "mediatype": "image/png"},
    })];
    for c in CHANNELS.iter().cycle().take(shape.channels.max(1)) {
        let entries: Vec<Value> = (0..shape.bundles)
            .map(|i| {
                let mut e = json!({"name": Shape::bundle_name(package, i)});
                if i > 0 {
                    e["replaces"] = json!(Shape::bundle_name(package, i - 1));
                }
                // Pruned versions (1.x, long gone) and, from the third on, the entry two back.
                let mut skips: Vec<String> = (0..shape.skips.saturating_sub(1))
                    .map(|k| format!("{package}.v1.{}.{}", (i + k) / 10, (i + k) % 10))
                    .collect();
                if i >= 2 && shape.skips > 0 {
                    skips.push(Shape::bundle_name(package, i - 2));
                }
                if !skips.is_empty() {
                    e["skips"] = json!(skips);
                    e["skipRange"] = json!(format!(">=1.0.0 <{}", Shape::version(i)));
                }
                e
            })
            .collect();
        docs.push(
            json!({"schema": "olm.channel", "package": package, "name": c, "entries": entries}),
        );
    }
    for i in 0..shape.bundles {
        docs.push(bundle(shape, package, i, host, digests));
    }
    let mut out = Vec::new();
    for d in &docs {
        serde_json::to_writer_pretty(&mut out, d).expect("JSON serializes");
        out.push(b'\n');
    }
    out
}

fn bundle(
    shape: &Shape,
    package: &str,
    i: usize,
    host: &str,
    digests: &BTreeMap<String, String>,
) -> Value {
    let version = Shape::version(i);
    let refs = Shape::images(host, package, i).map(|(repo, tag)| {
        let tagged = format!("{repo}:{tag}");
        match digests.get(&tagged) {
            Some(d) => format!("{repo}@{d}"),
            None => tagged,
        }
    });
    let seed = format!("{package}-{version}");
    let text = |len: usize| -> String {
        image::filler(&seed, len)
            .iter()
            .map(|b| char::from(b'a' + b % 26))
            .collect()
    };
    let mut properties = vec![
        json!({"type": "olm.package", "value": {"packageName": package, "version": version}}),
        json!({"type": "olm.gvk", "value": {"group": format!("{package}.example.com"), "kind": "Instance", "version": "v1"}}),
        json!({"type": "olm.gvk", "value": {"group": format!("{package}.example.com"), "kind": "Backup", "version": "v1beta1"}}),
        json!({"type": "olm.csv.metadata", "value": {
            "displayName": format!("Operator {package}"),
            "description": text(shape.description_bytes),
            "capabilities": "Seamless Upgrades",
            "keywords": ["generated", "benchmark"],
            "provider": {"name": "bootstrap bench"},
        }}),
    ];
    if shape.object_bytes > 0 {
        properties.push(
            json!({"type": "olm.bundle.object", "value": {"data": text(shape.object_bytes)}}),
        );
    }
    json!({
        "schema": "olm.bundle",
        "name": Shape::bundle_name(package, i),
        "package": package,
        "image": refs[0],
        "properties": properties,
        "relatedImages": [
            {"name": "", "image": refs[0]},
            {"name": "operator", "image": refs[1]},
        ],
    })
}

/// The catalog image (`REPOSITORY:TAG` on `host`), its bundles naming images by digest as
/// `digests` gives them.
pub fn catalog_image(
    shape: &Shape,
    host: &str,
    repository: &str,
    tag: &str,
    digests: &BTreeMap<String, String>,
) -> Result<Image> {
    crate::catalog::catalog_image(&config_files(shape, host, digests), repository, tag)
}

/// The images the bundles of `packages` (indexes; all when `None`) name, for `host`: each a
/// manifest of its own over a layer and config shared by its repository. Returns them and
/// `host/repo:tag` → digest, for [`catalog_image`].
pub fn related_images(
    shape: &Shape,
    host: &str,
    packages: Option<&[usize]>,
) -> Result<(Vec<Image>, BTreeMap<String, String>)> {
    let all: Vec<usize> = (0..shape.packages).collect();
    let mut images = Vec::new();
    let mut digests = BTreeMap::new();
    for &p in packages.unwrap_or(&all) {
        let package = shape.package(p);
        for i in 0..shape.bundles {
            for (repo, tag) in Shape::images(host, &package, i) {
                let repository = repo
                    .strip_prefix(&format!("{host}/"))
                    .unwrap_or(&repo)
                    .to_string();
                let spec = ImageSpec {
                    layers: vec![vec![File::new("etc/bench", repository.clone())]],
                    annotations: [("bench.version".to_string(), tag.clone())].into(),
                    ..Default::default()
                };
                let img = image::build(&repository, Some(&tag), &spec)?;
                digests.insert(format!("{repo}:{tag}"), img.digest().to_string());
                images.push(img);
            }
        }
    }
    Ok((images, digests))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bootstrap::openshift::fbc::Catalog;

    #[test]
    fn the_generated_catalog_has_its_shape() {
        let shape = Shape {
            packages: 3,
            bundles: 12,
            channels: 2,
            skips: 20,
            description_bytes: 64,
            object_bytes: 256,
        };
        let files = config_files(&shape, "registry.example.com", &BTreeMap::new());
        assert_eq!(files.len(), 3);
        let c = Catalog::parse(&files).unwrap();
        assert_eq!(c.packages.len(), 3);
        let ch = &c.channels["operator-0001"]["fast"];
        assert_eq!(ch.entries.len(), 12);
        // Of 20 skips, only the entry two back is in the channel.
        assert_eq!(ch.entries[5].skips, vec!["operator-0001.v2.0.3"]);
        assert_eq!(ch.entries[5].raw["skips"].as_array().unwrap().len(), 20);
        let b = c.bundle("operator-0002", "operator-0002.v2.1.1").unwrap();
        assert_eq!(b.version.to_string(), "2.1.1");
        assert!(b
            .properties()
            .iter()
            .any(|p| p.property_type == "olm.bundle.object"));
        assert_eq!(
            b.related_images[1].image,
            "registry.example.com/bench/operator-0002-operator:2.1.1"
        );
        assert_eq!(
            config_files(&shape, "registry.example.com", &BTreeMap::new()),
            files
        );
    }
}
