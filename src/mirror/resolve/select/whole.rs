//! `full: true` without packages, streamed: the catalog is written into the rebuilt layer as it
//! is read, never held whole. A first read keeps an index (names, graphs, versions, images and
//! requirements: what the report and the unmet requirements need) and notes the last file
//! each package has documents in; the second read renders each document as it comes and writes
//! a package's file once its last file has been read, in the file order the layer needs. With
//! opm's layout (a directory per package) one package is buffered at a time.

use super::{whole_owned, SelectError, Selection, UnknownSchemas};
use crate::oci::layers::SpooledFiles;
use crate::openshift::fbc::{self, Catalog, Doc, Keep, Parsed, ReadStats, Rest};
use crate::openshift::rebuild::{ConfigsLayer, ConfigsLayerWriter};
use anyhow::Result;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;

/// A catalog's files, read as often as needed.
pub trait CatalogFiles {
    /// Every file (path relative to the config directory) with a reader of its bytes, sorted.
    fn each(&self) -> Box<dyn Iterator<Item = (&str, Box<dyn Read + '_>)> + '_>;
}

impl CatalogFiles for BTreeMap<String, Vec<u8>> {
    fn each(&self) -> Box<dyn Iterator<Item = (&str, Box<dyn Read + '_>)> + '_> {
        Box::new(
            self.iter()
                .map(|(n, b)| (n.as_str(), Box::new(&b[..]) as Box<dyn Read>)),
        )
    }
}

impl CatalogFiles for SpooledFiles {
    fn each(&self) -> Box<dyn Iterator<Item = (&str, Box<dyn Read + '_>)> + '_> {
        Box::new(self.iter().map(|(n, r)| (n, Box::new(r) as Box<dyn Read>)))
    }
}

/// One package's file as it is read: each document rendered.
#[derive(Default)]
struct PackageOut {
    package: Vec<u8>,
    channels: BTreeMap<String, Vec<u8>>,
    bundles: BTreeMap<String, Vec<u8>>,
    others: Vec<u8>,
}

impl PackageOut {
    /// The file, as [`Selection::render`] writes it.
    fn into_file(self) -> Vec<u8> {
        let mut out = self.package;
        self.channels.into_values().for_each(|c| out.extend(c));
        self.bundles.into_values().for_each(|b| out.extend(b));
        out.extend(self.others);
        out
    }
}

fn render(doc: Doc<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    fbc::write_json_stream(&mut out, [doc]);
    out
}

/// The whole catalog of `files` as the rebuilt layer (`config_dir`, `cache_dir` as
/// [`crate::openshift::rebuild::configs_layer`] takes them), byte for byte what
/// [`Selection::render`] and that function make of [`super::select`]'s whole selection, with
/// the selection's report. The selection holds an index only (`raw` empty): it names what is
/// kept and its images, and cannot be rendered again.
pub fn stream_whole(
    files: &dyn CatalogFiles,
    unknown: UnknownSchemas,
    config_dir: &str,
    cache_dir: Option<&str>,
) -> Result<(Selection, ConfigsLayer)> {
    // Read 1: the index, and the last file of each package.
    let none = BTreeSet::new();
    let keep = Keep::Packages(&none, Rest::Index);
    let mut index = Catalog::default();
    let mut stats = ReadStats::default();
    let mut last_file: BTreeMap<String, usize> = BTreeMap::new();
    fbc::visit(files.each(), |file, doc| {
        if let Some(p) = doc.package() {
            last_file.insert(p.to_string(), file);
        }
        index.insert(doc, keep, &mut stats)
    })
    .and_then(|()| index.check())
    .map_err(SelectError::Read)?;
    let keep_others = unknown == UnknownSchemas::Keep;
    let mut ready: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    if keep_others && !index.others.is_empty() {
        let unowned = index.others.iter().map(|o| Doc::Map(&o.raw));
        let mut out = Vec::new();
        fbc::write_json_stream(&mut out, unowned);
        ready.insert("catalog.json".into(), out);
    }
    let file_of = |p: &str| format!("{p}/catalog.json");
    let names: Vec<String> = index
        .packages
        .keys()
        .map(|p| file_of(p))
        .chain(ready.keys().cloned())
        .collect();
    let packages: BTreeSet<String> = index.packages.keys().cloned().collect();
    let selection = whole_owned(index);
    let mut by_last: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for (p, f) in last_file.into_iter().filter(|(p, _)| packages.contains(p)) {
        by_last.entry(f).or_default().push(p);
    }

    // Read 2: render each document, write each package once complete, in file order.
    let mut layer = ConfigsLayerWriter::new(names, config_dir, cache_dir)?;
    let mut open: BTreeMap<String, PackageOut> = BTreeMap::new();
    let mut failed = None;
    let mut complete_before = |file: usize,
                               open: &mut BTreeMap<String, PackageOut>,
                               ready: &mut BTreeMap<String, Vec<u8>>,
                               layer: &mut ConfigsLayerWriter|
     -> Result<()> {
        while let Some(entry) = by_last.first_entry() {
            if *entry.key() >= file {
                break;
            }
            for p in entry.remove() {
                let out = open.remove(&p).unwrap_or_default();
                ready.insert(file_of(&p), out.into_file());
            }
        }
        while let Some(name) = layer.expected().map(str::to_string) {
            let Some(bytes) = ready.remove(&name) else {
                break;
            };
            layer.append(&name, &bytes)?;
        }
        Ok(())
    };
    fbc::visit(files.each(), |file, doc| {
        if failed.is_some() {
            return Ok(());
        }
        if let Err(e) = complete_before(file, &mut open, &mut ready, &mut layer) {
            failed = Some(e);
            return Ok(());
        }
        let Some(package) = doc.package().filter(|p| packages.contains(*p)) else {
            return Ok(()); // unowned documents were written from the index
        };
        let out = open.entry(package.to_string()).or_default();
        match &doc {
            Parsed::Package(p) => out.package = render(Doc::Map(&p.raw)),
            Parsed::Channel(c) => {
                out.channels.insert(c.name.clone(), render(Doc::Channel(c)));
            }
            Parsed::Bundle(b) => {
                out.bundles.insert(b.name.clone(), render(Doc::Map(&b.raw)));
            }
            Parsed::Other(o) if keep_others => out.others.extend(render(Doc::Map(&o.raw))),
            Parsed::Other(_) => {}
        }
        Ok(())
    })
    .map_err(SelectError::Read)?;
    if let Some(e) = failed {
        return Err(e);
    }
    complete_before(usize::MAX, &mut open, &mut ready, &mut layer)?;
    Ok((selection, layer.finish()?))
}
