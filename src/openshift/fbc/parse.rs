//! Reading a catalog's files: `.json` files as streams of concatenated JSON objects, read
//! document by document from a reader (never the whole file at once), `.yaml`/`.yml` files as
//! multi-document YAML (read whole: the YAML parser needs the text), and each `olm.package`,
//! `olm.channel` and `olm.bundle` document into its typed view beside the object as read. Every
//! error names the file and the document's position in it.

use super::{
    Bundle, Channel, ChannelEntry, FbcError, Origin, Package, PackageRequirement, Property,
    RelatedImage, PROPERTY_PACKAGE, PROPERTY_PACKAGE_REQUIRED, SCHEMA_BUNDLE, SCHEMA_CHANNEL,
    SCHEMA_PACKAGE,
};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::HashSet;
use std::io::{BufReader, Read};

/// The documents of one file, by its extension: `Ok(None)` for files that are not catalog
/// content. Every document must be a JSON object (a YAML mapping).
pub fn parse_file(file: &str, bytes: &[u8]) -> Result<Option<Vec<Map<String, Value>>>, FbcError> {
    let mut out = Vec::new();
    let content = for_each_document(file, bytes, |_, doc| {
        out.push(doc);
        Ok(())
    })?;
    Ok(content.then_some(out))
}

/// Calls `f` with each document of `file` (its position from 1, and the object) as it is
/// read from `reader`; false, without reading, for files that are not catalog content.
pub(super) fn for_each_document(
    file: &str,
    reader: impl Read,
    mut f: impl FnMut(usize, Map<String, Value>) -> Result<(), FbcError>,
) -> Result<bool, FbcError> {
    let lower = file.to_ascii_lowercase();
    if lower.ends_with(".json") {
        json_stream(file, reader, f)?;
    } else if lower.ends_with(".yaml") || lower.ends_with(".yml") {
        let mut bytes = Vec::new();
        BufReader::new(reader)
            .read_to_end(&mut bytes)
            .map_err(|e| FbcError::Syntax {
                file: file.to_string(),
                message: format!("cannot be read: {e}"),
            })?;
        for (i, doc) in parse_yaml_documents(file, &bytes)?.into_iter().enumerate() {
            f(i + 1, doc)?;
        }
    } else {
        return Ok(false);
    }
    Ok(true)
}

/// A stream of JSON objects, parsed one at a time from a buffered reader.
fn json_stream(
    file: &str,
    reader: impl Read,
    mut f: impl FnMut(usize, Map<String, Value>) -> Result<(), FbcError>,
) -> Result<(), FbcError> {
    let reader = BufReader::with_capacity(64 * 1024, reader);
    for (i, item) in serde_json::Deserializer::from_reader(reader)
        .into_iter::<Value>()
        .enumerate()
    {
        let syntax = |message: String| FbcError::Syntax {
            file: file.to_string(),
            message: format!("document {}: {message}", i + 1),
        };
        match item {
            Ok(Value::Object(map)) => f(i + 1, map)?,
            Ok(other) => {
                return Err(syntax(format!(
                    "expected a JSON object, found {}",
                    kind(&other)
                )))
            }
            Err(e) if e.is_io() => return Err(syntax(format!("cannot be read: {e}"))),
            Err(e) => return Err(syntax(format!("not valid JSON: {e}"))),
        }
    }
    Ok(())
}

fn parse_yaml_documents(file: &str, bytes: &[u8]) -> Result<Vec<Map<String, Value>>, FbcError> {
    let syntax = |message: String| FbcError::Syntax {
        file: file.to_string(),
        message,
    };
    let text = std::str::from_utf8(bytes).map_err(|e| {
        syntax(format!(
            "not UTF-8 text (invalid byte at offset {})",
            e.valid_up_to()
        ))
    })?;
    let docs: Vec<Value> = serde_saphyr::from_multiple_with_options(text, yaml_options())
        .map_err(|e| syntax(format!("not valid YAML: {e}")))?;
    docs.into_iter()
        .enumerate()
        .map(|(i, doc)| match doc {
            Value::Object(map) => Ok(map),
            other => Err(syntax(format!(
                "document {}: expected a mapping, found {}",
                i + 1,
                kind(&other)
            ))),
        })
        .collect()
}

/// YAML options for catalogs: no snippets in messages, and budgets sized for real catalogs
/// (the defaults are sized for configuration files; a package's catalog.yaml can hold
/// thousands of documents).
fn yaml_options() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_documents = 1_000_000;
    budget.max_nodes = 50_000_000;
    budget.max_events = 100_000_000;
    budget.max_total_scalar_bytes = 1024 * 1024 * 1024;
    let mut options = serde_saphyr::Options::default();
    options.with_snippet = false;
    options.budget = Some(budget);
    options
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Reads the typed view `T` of a document; errors name the document and its schema.
fn fields<'a, T: Deserialize<'a>>(
    doc: &'a Map<String, Value>,
    schema: &str,
    origin: &Origin,
) -> Result<T, FbcError> {
    T::deserialize(MapRef(doc)).map_err(|e| FbcError::Document {
        origin: origin.clone(),
        message: format!("{schema}{}: {e}", name_of(doc)),
    })
}

/// ` 'NAME'` when the document has a string `name`, for messages.
fn name_of(doc: &Map<String, Value>) -> String {
    doc.get("name")
        .and_then(Value::as_str)
        .map(|n| format!(" '{n}'"))
        .unwrap_or_default()
}

/// Deserializes from a borrowed map without cloning it into a `Value`.
struct MapRef<'a>(&'a Map<String, Value>);

impl<'de> serde::Deserializer<'de> for MapRef<'de> {
    type Error = serde_json::Error;

    fn deserialize_any<V: serde::de::Visitor<'de>>(
        self,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        use serde::de::value::MapDeserializer;
        let mut map = MapDeserializer::new(self.0.iter().map(|(k, v)| (k.as_str(), v)));
        let value = visitor.visit_map(&mut map)?;
        map.end()?;
        Ok(value)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PackageFields {
    name: String,
    #[serde(default)]
    default_channel: Option<String>,
    #[serde(default)]
    description: Option<String>,
}

pub(super) fn parse_package(doc: Map<String, Value>, origin: Origin) -> Result<Package, FbcError> {
    let f: PackageFields = fields(&doc, SCHEMA_PACKAGE, &origin)?;
    // The name becomes a directory of the rebuilt catalog; it must be one path component.
    if f.name.is_empty() || f.name == "." || f.name == ".." || f.name.contains(['/', '\\', '\0']) {
        return Err(FbcError::Document {
            origin,
            message: format!(
                "olm.package name {:?} is not a valid package name (one path component)",
                f.name
            ),
        });
    }
    Ok(Package {
        name: f.name,
        default_channel: f.default_channel.unwrap_or_default(),
        description: f.description,
        origin,
        raw: doc,
    })
}

#[derive(Deserialize)]
struct ChannelFields {
    package: String,
    name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EntryFields {
    name: String,
    #[serde(default)]
    replaces: Option<String>,
    #[serde(default)]
    skips: Option<Vec<String>>,
    #[serde(default)]
    skip_range: Option<String>,
}

/// A channel; its `entries` are taken out of the document and held once, each as read in its
/// [`ChannelEntry::raw`]. An entry's typed `skips` keep only entries of this channel (the
/// only ones a graph can use; the entry as read keeps every name).
pub(super) fn parse_channel(
    mut doc: Map<String, Value>,
    origin: Origin,
) -> Result<Channel, FbcError> {
    let raw_entries = doc.remove("entries");
    let f: ChannelFields = fields(&doc, SCHEMA_CHANNEL, &origin)?;
    let bad = |message: String| FbcError::Document {
        origin: origin.clone(),
        message: format!("olm.channel '{}': {message}", f.name),
    };
    let raw_entries = match raw_entries {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a,
        Some(other) => {
            return Err(bad(format!(
                "entries: expected a list, found {}",
                kind(&other)
            )))
        }
    };
    let mut read = Vec::with_capacity(raw_entries.len());
    for (i, raw) in raw_entries.into_iter().enumerate() {
        let Value::Object(raw) = raw else {
            return Err(bad(format!(
                "entries[{i}]: expected an object, found {}",
                kind(&raw)
            )));
        };
        let e = EntryFields::deserialize(MapRef(&raw))
            .map_err(|e| bad(format!("entries[{i}]: {e}")))?;
        read.push((e, raw));
    }
    let names: HashSet<&str> = read.iter().map(|(e, _)| e.name.as_str()).collect();
    let in_channel: Vec<Vec<String>> = read
        .iter()
        .map(|(e, _)| {
            e.skips
                .iter()
                .flatten()
                .filter(|s| names.contains(s.as_str()))
                .cloned()
                .collect()
        })
        .collect();
    let entries = read
        .into_iter()
        .zip(in_channel)
        .map(|((e, raw), skips)| ChannelEntry {
            name: e.name,
            replaces: e.replaces.filter(|r| !r.is_empty()),
            skips,
            skip_range: e.skip_range.filter(|r| !r.is_empty()),
            raw,
        })
        .collect();
    Ok(Channel {
        package: f.package,
        name: f.name,
        entries,
        origin,
        raw: doc,
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BundleFields {
    name: String,
    package: String,
    #[serde(default)]
    image: Option<String>,
    #[serde(default)]
    related_images: Option<Vec<RelatedImage>>,
}

/// The value of an `olm.package` property.
#[derive(Deserialize)]
struct PackageProperty {
    version: String,
}

/// A bundle; its properties are read where they are (the largest part of a bundle, e.g.
/// `olm.bundle.object`, is not copied), and only the version and requirements are kept typed.
pub(super) fn parse_bundle(doc: Map<String, Value>, origin: Origin) -> Result<Bundle, FbcError> {
    let f: BundleFields = fields(&doc, SCHEMA_BUNDLE, &origin)?;
    let bad = |message: String| FbcError::Document {
        origin: origin.clone(),
        message: format!("olm.bundle '{}': {message}", f.name),
    };
    let properties = match doc.get("properties") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(a)) => a.as_slice(),
        Some(other) => {
            return Err(bad(format!(
                "properties: expected a list, found {}",
                kind(other)
            )))
        }
    };
    let mut typed = Vec::with_capacity(properties.len());
    for (i, p) in properties.iter().enumerate() {
        match p.get("type") {
            Some(Value::String(t)) => typed.push((t.as_str(), p.get("value"))),
            _ => {
                return Err(bad(format!(
                    "properties[{i}]: needs a 'type' (a string such as olm.package)"
                )))
            }
        }
    }
    let mut versions = typed.iter().filter(|(t, _)| *t == PROPERTY_PACKAGE);
    let (Some((_, version_value)), None) = (versions.next(), versions.next()) else {
        return Err(bad(format!(
            "needs exactly one '{PROPERTY_PACKAGE}' property (it holds the bundle's version)"
        )));
    };
    let version = PackageProperty::deserialize(version_value.unwrap_or(&Value::Null))
        .map_err(|e| bad(format!("'{PROPERTY_PACKAGE}' property: {e}")))?
        .version;
    let version = semver::Version::parse(&version).map_err(|e| {
        bad(format!(
            "version '{version}' in its '{PROPERTY_PACKAGE}' property is not semantic versioning: {e}"
        ))
    })?;
    let mut dependencies = Vec::new();
    for (_, value) in typed
        .iter()
        .filter(|(t, _)| *t == PROPERTY_PACKAGE_REQUIRED)
    {
        let req = PackageRequirement::deserialize(value.unwrap_or(&Value::Null))
            .map_err(|e| bad(format!("'{PROPERTY_PACKAGE_REQUIRED}' property: {e}")))?;
        dependencies.push(req);
    }
    Ok(Bundle {
        name: f.name,
        package: f.package,
        image: f.image.unwrap_or_default(),
        version,
        related_images: f.related_images.unwrap_or_default(),
        dependencies,
        origin,
        raw: doc,
    })
}

/// The `properties` of a bundle document as read (none when they are not a list of objects
/// with a `type`, which [`parse_bundle`] refuses).
pub(super) fn properties_of(doc: &Map<String, Value>) -> Vec<Property> {
    match doc.get("properties") {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|p| Property::deserialize(p).ok())
            .collect(),
        _ => Vec::new(),
    }
}
