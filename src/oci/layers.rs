//! Safe tar reading of image layers: the catalog's configuration directory, read out of a
//! catalog image's layers into memory ([`read_config_dir`]) or into one unlinked spool file
//! ([`spool_config_dir`]), whose files are then read as streams: a catalog's size then costs
//! disk, not memory.
//!
//! A file-based catalog image carries its catalog as plain files under the directory its label
//! `operators.operatorframework.io.index.configs.v1` names (usually `/configs`). To filter the
//! catalog, bootstrap needs exactly those files and nothing else, so the layers are streamed
//! through once, in order, and only regular files under that directory are kept, in memory. No
//! layer is ever unpacked to disk.
//!
//! The layers come from a registry bootstrap does not control, so the reader is defensive. The
//! shared walk (`oci::layer_walk`) refuses an entry with an absolute path or a `..`
//! component, or a link whose target leaves the image root, anywhere in a layer. This reader
//! adds what concerns the catalog: a device node or FIFO, or a name that is not UTF-8, where the
//! catalog lives is refused, naming the layer and the entry; a catalog file over
//! [`Limits::max_file_bytes`] or a catalog over [`Limits::max_total_bytes`] is refused before it
//! is read into memory. The size limits only concern what is kept: the rest of the image (the
//! `opm` binary, the base OS) is skipped unread, whatever its size.
//!
//! Layers are applied as OCI whiteouts say: `.wh.NAME` deletes `NAME` from the layers below,
//! `.wh..wh..opq` empties its directory of everything the layers below put there.
//!
//! Links inside the config directory: symbolic links are ignored (opm never writes them, and
//! following one would need the rest of the image); a hard link to a catalog file that is
//! already known (from this layer or one below) gets that file's contents. Either kind is still
//! checked for escaping the root first.

mod spool;

use super::layer_walk::{walk_layer, LayerEntry, Member};
use spool::Spool;
pub use spool::{Span, SpanReader, SpooledFiles};
use std::collections::BTreeMap;
use std::io::{self, Read};
use std::sync::Arc;

/// Other tar readers (charts, graph data) refuse escaping paths as layers do.
pub(crate) use super::layer_walk::normalise;

/// The image label that names the catalog's configuration directory.
pub const CONFIGS_LABEL: &str = "operators.operatorframework.io.index.configs.v1";

/// How much of a catalog is read into memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest single catalog file, in bytes. The largest `catalog.json` of Red Hat's operator
    /// index is a few tens of MiB.
    pub max_file_bytes: u64,
    /// Largest sum of catalog file sizes over all layers (counting files a later layer deletes
    /// or replaces, since they were read too).
    pub max_total_bytes: u64,
}

impl Default for Limits {
    /// 64 MiB per file, 1 GiB in all.
    fn default() -> Self {
        Limits {
            max_file_bytes: 64 * 1024 * 1024,
            max_total_bytes: 1024 * 1024 * 1024,
        }
    }
}

/// Why an entry of a layer was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UnsafeEntry {
    /// The entry's path starts with `/`.
    #[error("absolute path; layer entries are relative to the image root")]
    AbsolutePath,
    /// The entry's path has a `..` component.
    #[error("path has a '..' component")]
    ParentComponent,
    /// A symbolic or hard link whose target, resolved from the link's place, is above the root.
    #[error("link target {target:?} leaves the image root")]
    LinkEscapes {
        /// The link target as written in the archive.
        target: String,
    },
    /// A character or block device, or a FIFO, inside the config directory.
    #[error("device or FIFO in the catalog's config directory")]
    SpecialFile,
    /// A catalog file larger than [`Limits::max_file_bytes`].
    #[error("catalog file of {size} bytes is larger than the {limit} bytes allowed for one file")]
    TooLarge {
        /// The entry's size.
        size: u64,
        /// The limit it broke.
        limit: u64,
    },
    /// Reading this catalog file would take the total over [`Limits::max_total_bytes`].
    #[error("the catalog's files add up to more than the {limit} bytes allowed")]
    TotalTooLarge {
        /// The limit it broke.
        limit: u64,
    },
    /// The file asked for is a link, device or directory, not a regular file.
    #[error("not a regular file ({0}); only regular files are extracted")]
    NotRegular(String),
    /// A path inside the config directory that is not UTF-8.
    #[error("path is not UTF-8")]
    NotUtf8,
}

/// Why the config directory could not be read out of the layers.
#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    /// The label's value cannot name a directory inside the image.
    #[error("{CONFIGS_LABEL} {value:?}: {reason}")]
    ConfigDir {
        /// The label's value.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A layer could not be read: I/O, a corrupt gzip stream or tar archive.
    #[error("layers[{layer}]: reading the archive: {source}")]
    Read {
        /// The layer's position in the manifest, from 0.
        layer: usize,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A layer is compressed in a format this reader does not decode.
    #[error("layers[{layer}]: compressed with {format}, which is not supported (gzip and uncompressed tar are)")]
    Compression {
        /// The layer's position in the manifest, from 0.
        layer: usize,
        /// The format recognised, e.g. `zstd`.
        format: &'static str,
    },
    /// An entry was refused; see [`UnsafeEntry`].
    #[error("layers[{layer}]: entry {entry:?}: {kind}")]
    Unsafe {
        /// The layer's position in the manifest, from 0.
        layer: usize,
        /// The entry's path as written in the archive (lossily decoded).
        entry: String,
        /// What is wrong with it.
        kind: UnsafeEntry,
    },
}

/// Reads the regular files under `config_dir` (the [`CONFIGS_LABEL`] value, e.g. `/configs`)
/// out of `layers` (tar or gzip-compressed tar streams, bottom layer first), with the default
/// [`Limits`]. Keys are paths relative to the config directory (`nfd/catalog.json`).
pub fn read_config_dir<R: Read>(
    layers: impl IntoIterator<Item = R>,
    config_dir: &str,
) -> Result<BTreeMap<String, Vec<u8>>, LayerError> {
    read_config_dir_with_limits(layers, config_dir, Limits::default())
}

/// [`read_config_dir`] with explicit limits.
pub fn read_config_dir_with_limits<R: Read>(
    layers: impl IntoIterator<Item = R>,
    config_dir: &str,
    limits: Limits,
) -> Result<BTreeMap<String, Vec<u8>>, LayerError> {
    read_into(layers, config_dir, limits, Memory)
}

/// [`read_config_dir`] into `spool` (a new, empty file, best unlinked: nothing is left behind
/// when the run stops), with the default [`Limits`]: each file's bytes are copied there as the
/// layers stream past, and only where each file is stays in memory.
pub fn spool_config_dir<R: Read>(
    layers: impl IntoIterator<Item = R>,
    config_dir: &str,
    spool: fs_err::File,
) -> Result<SpooledFiles, LayerError> {
    let mut store = Spool::new(spool);
    let files = read_into(layers, config_dir, Limits::default(), &mut store)?;
    Ok(SpooledFiles::new(Arc::new(store.into_file()), files))
}

fn read_into<R: Read, S: Store>(
    layers: impl IntoIterator<Item = R>,
    config_dir: &str,
    limits: Limits,
    store: S,
) -> Result<BTreeMap<String, S::Data>, LayerError> {
    let dir = config_dir_components(config_dir)?;
    let mut reader = LayerReader {
        dir,
        limits,
        total: 0,
        files: BTreeMap::new(),
        store,
    };
    for (index, layer) in layers.into_iter().enumerate() {
        reader.apply_layer(index, layer)?;
    }
    Ok(reader.files)
}

/// Where a catalog file's bytes are kept while the layers are read.
trait Store {
    /// A file's bytes, or where they are.
    type Data: Clone;
    /// Keeps `size` bytes read from `from`.
    fn put(&mut self, from: &mut dyn Read, size: u64) -> io::Result<Self::Data>;
    /// How many bytes `data` stands for.
    fn len(data: &Self::Data) -> u64;
}

/// Files kept in memory.
struct Memory;

impl Store for Memory {
    type Data = Vec<u8>;

    fn put(&mut self, from: &mut dyn Read, size: u64) -> io::Result<Vec<u8>> {
        // The caller checked `size` against the per-file limit, so the allocation is bounded.
        let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        from.take(size).read_to_end(&mut data)?;
        Ok(data)
    }

    fn len(data: &Vec<u8>) -> u64 {
        data.len() as u64
    }
}

/// The label value as path components; refuses values that do not name a directory below root.
fn config_dir_components(value: &str) -> Result<Vec<String>, LayerError> {
    let bad = |reason| LayerError::ConfigDir {
        value: value.to_string(),
        reason,
    };
    let mut out = Vec::new();
    for part in value.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(bad("has a '..' component")),
            p => out.push(p.to_string()),
        }
    }
    if out.is_empty() {
        return Err(bad("names the image root, not a directory in it"));
    }
    Ok(out)
}

/// What an entry's normalised path means for the config directory.
#[derive(Debug, PartialEq, Eq)]
enum Place {
    /// The config directory itself or one of its ancestors.
    Covers,
    /// Inside the config directory, at this relative path.
    Inside(String),
    /// Elsewhere.
    Outside,
}

/// What one layer does to the files of the layers below it.
#[derive(Debug)]
enum Removal {
    /// Every file (the config directory or an ancestor was deleted, replaced or made opaque).
    All,
    /// The file at this relative path and everything under it.
    Tree(String),
    /// Everything under this relative directory, not the directory itself (opaque whiteout).
    Under(String),
    /// A file at this relative path or at one of its ancestors (a directory entry replaces a
    /// file).
    File(String),
}

struct LayerReader<S: Store> {
    dir: Vec<String>,
    limits: Limits,
    total: u64,
    files: BTreeMap<String, S::Data>,
    store: S,
}

/// The layer being read: its files and what it removes below, applied when it is complete
/// (OCI: whiteouts in a layer apply to the layers below only, wherever they sit in the tar).
struct LayerChanges<D> {
    files: BTreeMap<String, D>,
    removals: Vec<Removal>,
}

impl<S: Store> LayerReader<S> {
    /// Reads one layer through the shared walk and applies what it changes.
    fn apply_layer<R: Read>(&mut self, index: usize, layer: R) -> Result<(), LayerError> {
        let mut changes = LayerChanges {
            files: BTreeMap::new(),
            removals: Vec::new(),
        };
        walk_layer(index, layer, |entry| self.read_entry(&mut changes, entry))?;
        self.merge(changes);
        Ok(())
    }

    /// What one entry (already found safe by the walk) does to the config directory.
    fn read_entry(
        &mut self,
        changes: &mut LayerChanges<S::Data>,
        entry: LayerEntry<'_>,
    ) -> Result<(), LayerError> {
        // Whiteouts name the entry they delete; judge that entry's place.
        match &entry.member {
            Member::Whiteout(deleted) => {
                changes
                    .removals
                    .extend(self.removal(deleted, Removal::Tree));
                return Ok(());
            }
            Member::Opaque(dir) => {
                changes.removals.extend(self.removal(dir, Removal::Under));
                return Ok(());
            }
            _ => {}
        }
        match self.place(&entry.path) {
            Place::Outside => Ok(()),
            Place::Covers => {
                // A directory keeps what is under it; anything else replaces the directory.
                if entry.member != Member::Directory {
                    changes.removals.push(Removal::All);
                    changes.files.clear();
                }
                Ok(())
            }
            Place::Inside(rel) => {
                entry.require_utf8()?;
                self.apply_entry(changes, entry, rel)
            }
        }
    }

    /// What a whiteout of `path` removes from the layers below (`inside` says what, for a path
    /// inside the config directory): nothing when it concerns no file of the config directory.
    fn removal(&self, path: &[String], inside: fn(String) -> Removal) -> Option<Removal> {
        match self.place(path) {
            Place::Covers => Some(Removal::All),
            Place::Inside(rel) => Some(inside(rel)),
            Place::Outside => None,
        }
    }

    /// Applies one entry at `rel` inside the config directory to the layer's changes.
    fn apply_entry(
        &mut self,
        changes: &mut LayerChanges<S::Data>,
        mut entry: LayerEntry<'_>,
        rel: String,
    ) -> Result<(), LayerError> {
        match &entry.member {
            Member::File => {
                let data = self.read_file(&mut entry)?;
                replace_in(&mut changes.files, &rel);
                changes.files.insert(rel.clone(), data);
                changes.removals.push(Removal::Tree(rel));
            }
            Member::Directory => {
                changes.files.remove(&rel);
                changes.removals.push(Removal::File(rel));
            }
            Member::HardLink(target) => {
                let data = self.hard_link_data(&changes.files, target);
                replace_in(&mut changes.files, &rel);
                changes.removals.push(Removal::Tree(rel.clone()));
                if let Some(data) = data {
                    self.account(S::len(&data))
                        .map_err(|kind| entry.refuse(kind))?;
                    changes.files.insert(rel, data);
                }
            }
            Member::Special => return Err(entry.refuse(UnsafeEntry::SpecialFile)),
            // Symlinks (ignored, see the module doc) and anything else replace what was here.
            _ => {
                replace_in(&mut changes.files, &rel);
                changes.removals.push(Removal::Tree(rel));
            }
        }
        Ok(())
    }

    /// Where `components` (a normalised entry path) lies relative to the config directory.
    fn place<C: AsRef<str>>(&self, components: &[C]) -> Place {
        let common = self
            .dir
            .iter()
            .zip(components)
            .take_while(|(d, c)| d.as_str() == c.as_ref())
            .count();
        if common == components.len() {
            Place::Covers
        } else if common == self.dir.len() {
            let rel: Vec<&str> = components[common..].iter().map(|c| c.as_ref()).collect();
            Place::Inside(rel.join("/"))
        } else {
            Place::Outside
        }
    }

    /// A catalog file's bytes, refused before they are read when they would break a limit.
    fn read_file(&mut self, entry: &mut LayerEntry<'_>) -> Result<S::Data, LayerError> {
        let size = entry.size;
        if size > self.limits.max_file_bytes {
            return Err(entry.refuse(UnsafeEntry::TooLarge {
                size,
                limit: self.limits.max_file_bytes,
            }));
        }
        self.account(size).map_err(|kind| entry.refuse(kind))?;
        self.store
            .put(&mut entry.data, size)
            .map_err(|e| entry.read_error(e))
    }

    fn account(&mut self, size: u64) -> Result<(), UnsafeEntry> {
        let total = self.total.saturating_add(size);
        if total > self.limits.max_total_bytes {
            return Err(UnsafeEntry::TotalTooLarge {
                limit: self.limits.max_total_bytes,
            });
        }
        self.total = total;
        Ok(())
    }

    /// The contents a hard link to archive path `target` stands for, when that is a catalog
    /// file already read (this layer first, then the layers below).
    fn hard_link_data(&self, layer: &BTreeMap<String, S::Data>, target: &[u8]) -> Option<S::Data> {
        let components = normalise(target).ok()?;
        match self.place(&components) {
            Place::Inside(rel) => layer.get(&rel).or_else(|| self.files.get(&rel)).cloned(),
            _ => None,
        }
    }

    /// Applies a complete layer: its removals to the files below, then its own files.
    fn merge(&mut self, changes: LayerChanges<S::Data>) {
        for removal in changes.removals {
            match removal {
                Removal::All => self.files.clear(),
                Removal::Tree(rel) => replace_in(&mut self.files, &rel),
                Removal::Under(rel) => remove_under(&mut self.files, &rel),
                Removal::File(rel) => remove_path(&mut self.files, &rel),
            }
        }
        for (rel, data) in changes.files {
            replace_in(&mut self.files, &rel);
            self.files.insert(rel, data);
        }
    }
}

/// Removes what a new entry at `rel` replaces: a file at `rel`, everything under `rel`, and
/// any file at one of `rel`'s ancestors (a file cannot be a directory too).
fn replace_in<D>(files: &mut BTreeMap<String, D>, rel: &str) {
    remove_under(files, rel);
    remove_path(files, rel);
}

/// Removes a file at `rel` and files at any of its ancestors: what a directory at `rel`
/// replaces.
fn remove_path<D>(files: &mut BTreeMap<String, D>, rel: &str) {
    files.remove(rel);
    let mut ancestor = rel;
    while let Some((up, _)) = ancestor.rsplit_once('/') {
        files.remove(up);
        ancestor = up;
    }
}

/// Removes everything under directory `rel` (keys `rel/...`, contiguous in the map).
fn remove_under<D>(files: &mut BTreeMap<String, D>, rel: &str) {
    let prefix = format!("{rel}/");
    let under: Vec<String> = files
        .range(prefix.clone()..)
        .take_while(|(k, _)| k.starts_with(&prefix))
        .map(|(k, _)| k.clone())
        .collect();
    for k in under {
        files.remove(&k);
    }
}

/// Fills `buf` from `r` as far as the stream allows; returns how many bytes were read.
pub(crate) fn read_prefix<R: Read + ?Sized>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::write::GzEncoder;
    use flate2::Compression;
    use tar::EntryType;

    /// An in-memory layer, built entry by entry.
    struct Layer(tar::Builder<Vec<u8>>);

    impl Layer {
        fn new() -> Self {
            Layer(tar::Builder::new(Vec::new()))
        }

        fn header(kind: EntryType, size: u64) -> tar::Header {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(kind);
            h.set_size(size);
            h.set_mode(0o644);
            h
        }

        fn file(mut self, path: &str, data: &[u8]) -> Self {
            let mut h = Self::header(EntryType::Regular, data.len() as u64);
            self.0.append_data(&mut h, path, data).unwrap();
            self
        }

        fn dir(mut self, path: &str) -> Self {
            let mut h = Self::header(EntryType::Directory, 0);
            self.0.append_data(&mut h, path, io::empty()).unwrap();
            self
        }

        fn link(mut self, kind: EntryType, path: &str, target: &str) -> Self {
            let mut h = Self::header(kind, 0);
            h.set_link_name_literal(target).unwrap();
            self.0.append_data(&mut h, path, io::empty()).unwrap();
            self
        }

        fn special(mut self, kind: EntryType, path: &str) -> Self {
            let mut h = Self::header(kind, 0);
            self.0.append_data(&mut h, path, io::empty()).unwrap();
            self
        }

        /// An entry whose name is written into the header as is (`set_path` refuses `..` and
        /// absolute paths, which is exactly what these tests need to write).
        fn raw_name(mut self, name: &str, data: &[u8]) -> Self {
            let mut h = Self::header(EntryType::Regular, data.len() as u64);
            let field = &mut h.as_old_mut().name;
            field.fill(0);
            field[..name.len()].copy_from_slice(name.as_bytes());
            h.set_cksum();
            self.0.append(&h, data).unwrap();
            self
        }

        /// A regular file whose header claims `size` bytes; no data follows.
        fn claims(mut self, path: &str, size: u64) -> Self {
            let mut h = Self::header(EntryType::Regular, size);
            h.set_path(path).unwrap();
            h.set_cksum();
            self.0.append(&h, io::empty()).unwrap();
            self
        }

        fn tar(self) -> Vec<u8> {
            self.0.into_inner().unwrap()
        }

        fn gz(self) -> Vec<u8> {
            let mut enc = GzEncoder::new(Vec::new(), Compression::fast());
            io::Write::write_all(&mut enc, &self.tar()).unwrap();
            enc.finish().unwrap()
        }
    }

    /// Reads the layers into memory and into a spool, and checks both give the same files or
    /// the same error: every test here covers both stores.
    fn read(layers: Vec<Vec<u8>>) -> Result<BTreeMap<String, Vec<u8>>, LayerError> {
        let memory = read_config_dir(layers.iter().map(|l| l.as_slice()), "/configs");
        let spool = fs_err::File::from_parts(tempfile::tempfile().unwrap(), "spool");
        let spooled = spool_config_dir(layers.iter().map(|l| l.as_slice()), "/configs", spool);
        match (&memory, spooled) {
            (Ok(files), Ok(spooled)) => {
                let back: BTreeMap<String, Vec<u8>> = spooled
                    .iter()
                    .map(|(name, mut r)| {
                        let mut bytes = Vec::new();
                        r.read_to_end(&mut bytes).unwrap();
                        (name.to_string(), bytes)
                    })
                    .collect();
                assert_eq!(&back, files, "the spool holds what memory holds");
            }
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
            (a, b) => panic!("memory gave {a:?}, the spool {b:?}"),
        }
        memory
    }

    fn names(files: &BTreeMap<String, Vec<u8>>) -> Vec<&str> {
        files.keys().map(String::as_str).collect()
    }

    fn refused(
        result: Result<BTreeMap<String, Vec<u8>>, LayerError>,
    ) -> (usize, String, UnsafeEntry) {
        match result {
            Err(LayerError::Unsafe { layer, entry, kind }) => (layer, entry, kind),
            other => panic!("expected an unsafe entry, got {other:?}"),
        }
    }

    #[test]
    fn keeps_only_regular_files_under_the_config_dir() {
        let base = Layer::new()
            .dir("usr/bin")
            .file("usr/bin/opm", b"ELF")
            .file("etc/mtab-like", b"x")
            .link(EntryType::Symlink, "etc/mtab", "/proc/self/mounts")
            .gz();
        let catalog = Layer::new()
            .dir("configs")
            .dir("configs/nfd")
            .file("configs/nfd/catalog.json", b"{}")
            .file("./configs/gpu-operator-certified/catalog.yaml", b"a: 1")
            .file("configsx/not-this.json", b"{}")
            .tar();
        let files = read(vec![base, catalog]).unwrap();
        assert_eq!(
            names(&files),
            vec!["gpu-operator-certified/catalog.yaml", "nfd/catalog.json"]
        );
        assert_eq!(files["nfd/catalog.json"], b"{}");
    }

    #[test]
    fn whiteout_deletes_a_file_and_a_directory_from_lower_layers() {
        let lower = Layer::new()
            .file("configs/a/catalog.json", b"a")
            .file("configs/b/catalog.json", b"b")
            .file("configs/b/extra.json", b"b2")
            .file("configs/c.json", b"c")
            .tar();
        let upper = Layer::new()
            .file("configs/.wh.c.json", b"")
            .file("configs/.wh.b", b"")
            .file("configs/d.json", b"d")
            .gz();
        let files = read(vec![lower, upper]).unwrap();
        assert_eq!(names(&files), vec!["a/catalog.json", "d.json"]);
    }

    #[test]
    fn whiteout_in_the_same_layer_does_not_delete_that_layers_file() {
        // OCI: whiteouts apply to the layers below, wherever they sit in the archive.
        let lower = Layer::new().file("configs/x.json", b"old").tar();
        let upper = Layer::new()
            .file("configs/x.json", b"new")
            .file("configs/.wh.x.json", b"")
            .tar();
        let files = read(vec![lower, upper]).unwrap();
        assert_eq!(files["x.json"], b"new");
    }

    #[test]
    fn opaque_whiteout_clears_a_directory_but_keeps_its_own_layers_files() {
        let lower = Layer::new()
            .file("configs/nfd/catalog.json", b"old")
            .file("configs/nfd/old-extra.json", b"old")
            .file("configs/other/catalog.json", b"keep")
            .tar();
        let upper = Layer::new()
            .file("configs/nfd/catalog.json", b"new")
            .file("configs/nfd/.wh..wh..opq", b"")
            .tar();
        let files = read(vec![lower, upper]).unwrap();
        assert_eq!(
            names(&files),
            vec!["nfd/catalog.json", "other/catalog.json"]
        );
        assert_eq!(files["nfd/catalog.json"], b"new");

        // Opaque on the config dir itself (or an ancestor) empties the catalog.
        let lower = Layer::new().file("configs/a.json", b"a").tar();
        let upper = Layer::new()
            .file(".wh..wh..opq", b"")
            .file("configs/b.json", b"b")
            .tar();
        assert_eq!(names(&read(vec![lower, upper]).unwrap()), vec!["b.json"]);
    }

    #[test]
    fn whiteout_of_the_config_dir_removes_everything() {
        let lower = Layer::new().file("configs/a.json", b"a").tar();
        let upper = Layer::new().file(".wh.configs", b"").tar();
        assert!(read(vec![lower, upper]).unwrap().is_empty());
    }

    #[test]
    fn file_and_directory_replace_each_other() {
        let lower = Layer::new()
            .file("configs/p/catalog.json", b"dir")
            .file("configs/q", b"file")
            .tar();
        let upper = Layer::new()
            .file("configs/p", b"now a file")
            .file("configs/q/catalog.json", b"now a dir")
            .tar();
        let files = read(vec![lower, upper]).unwrap();
        assert_eq!(names(&files), vec!["p", "q/catalog.json"]);
    }

    #[test]
    fn hard_link_inside_gets_contents_and_symlink_is_ignored() {
        let layer = Layer::new()
            .file("configs/a/catalog.json", b"A")
            .link(
                EntryType::Link,
                "configs/b/catalog.json",
                "configs/a/catalog.json",
            )
            .link(
                EntryType::Symlink,
                "configs/c/catalog.json",
                "../a/catalog.json",
            )
            .tar();
        let files = read(vec![layer]).unwrap();
        assert_eq!(names(&files), vec!["a/catalog.json", "b/catalog.json"]);
        assert_eq!(files["b/catalog.json"], b"A");
    }

    #[test]
    fn absolute_path_is_refused() {
        let bad = Layer::new().raw_name("/configs/x.json", b"{}").tar();
        let ok = Layer::new().file("configs/ok.json", b"{}").tar();
        let (layer, entry, kind) = refused(read(vec![ok, bad]));
        assert_eq!((layer, entry.as_str()), (1, "/configs/x.json"));
        assert_eq!(kind, UnsafeEntry::AbsolutePath);
    }

    #[test]
    fn parent_component_is_refused_anywhere() {
        let bad = Layer::new().raw_name("usr/../configs/x.json", b"{}").tar();
        let (layer, entry, kind) = refused(read(vec![bad]));
        assert_eq!((layer, entry.as_str()), (0, "usr/../configs/x.json"));
        assert_eq!(kind, UnsafeEntry::ParentComponent);
        let bad = Layer::new().raw_name("../../etc/passwd", b"x").gz();
        let e = read(vec![bad]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "layers[0]: entry \"../../etc/passwd\": path has a '..' component"
        );
    }

    #[test]
    fn escaping_symlink_is_refused() {
        let bad = Layer::new()
            .link(
                EntryType::Symlink,
                "configs/evil.json",
                "../../../etc/shadow",
            )
            .tar();
        let (_, entry, kind) = refused(read(vec![bad]));
        assert_eq!(entry, "configs/evil.json");
        assert_eq!(
            kind,
            UnsafeEntry::LinkEscapes {
                target: "../../../etc/shadow".into()
            }
        );
        // Inside the root (absolute targets resolve against the image root): accepted.
        let fine = Layer::new()
            .link(EntryType::Symlink, "usr/lib/x", "../../etc/x")
            .link(EntryType::Symlink, "etc/mtab", "/proc/self/mounts")
            .tar();
        assert!(read(vec![fine]).unwrap().is_empty());
    }

    #[test]
    fn escaping_hard_link_is_refused() {
        let bad = Layer::new()
            .link(EntryType::Link, "configs/a.json", "/etc/shadow")
            .tar();
        let (_, entry, kind) = refused(read(vec![bad]));
        assert_eq!(entry, "configs/a.json");
        assert!(matches!(kind, UnsafeEntry::LinkEscapes { .. }), "{kind:?}");
        let bad = Layer::new()
            .link(EntryType::Link, "configs/a.json", "configs/../../x")
            .tar();
        assert!(matches!(
            refused(read(vec![bad])).2,
            UnsafeEntry::LinkEscapes { .. }
        ));
    }

    #[test]
    fn device_and_fifo_in_the_config_dir_are_refused() {
        for kind in [EntryType::Char, EntryType::Block, EntryType::Fifo] {
            let bad = Layer::new().special(kind, "configs/dev.json").tar();
            let (layer, entry, why) = refused(read(vec![bad]));
            assert_eq!((layer, entry.as_str()), (0, "configs/dev.json"));
            assert_eq!(why, UnsafeEntry::SpecialFile);
        }
        // Outside the catalog they are skipped: they cannot reach the output.
        let base = Layer::new().special(EntryType::Char, "dev/null").tar();
        assert!(read(vec![base]).unwrap().is_empty());
    }

    #[test]
    fn non_utf8_name_in_the_config_dir_is_refused() {
        let mut h = Layer::header(EntryType::Regular, 2);
        let name = b"configs/\xff.json";
        h.as_old_mut().name[..name.len()].copy_from_slice(name);
        h.set_cksum();
        let mut layer = tar::Builder::new(Vec::new());
        layer.append(&h, &b"{}"[..]).unwrap();
        let (_, entry, kind) = refused(read(vec![layer.into_inner().unwrap()]));
        assert_eq!(entry, "configs/\u{fffd}.json");
        assert_eq!(kind, UnsafeEntry::NotUtf8);
    }

    #[test]
    fn oversized_file_is_refused_before_reading() {
        // The header claims 64 MiB + 1; no data follows, so nothing may try to read it.
        let bad = Layer::new()
            .claims("configs/huge.json", 64 * 1024 * 1024 + 1)
            .tar();
        let (_, entry, kind) = refused(read(vec![bad]));
        assert_eq!(entry, "configs/huge.json");
        assert_eq!(
            kind,
            UnsafeEntry::TooLarge {
                size: 64 * 1024 * 1024 + 1,
                limit: 64 * 1024 * 1024
            }
        );
        // The same size outside the config dir is not the catalog's business (skipped, so the
        // missing data then shows up as a read error, not a refusal).
        let big = Layer::new()
            .claims("usr/bin/opm", 64 * 1024 * 1024 + 1)
            .tar();
        assert!(matches!(
            read(vec![big]),
            Err(LayerError::Read { layer: 0, .. })
        ));
    }

    #[test]
    fn total_over_the_limit_is_refused() {
        let limits = Limits {
            max_file_bytes: 10,
            max_total_bytes: 25,
        };
        let l1 = Layer::new()
            .file("configs/a.json", &[b'a'; 10])
            .file("configs/b.json", &[b'b'; 10])
            .tar();
        let l2 = Layer::new().file("configs/c.json", &[b'c'; 10]).tar();
        let e = read_config_dir_with_limits([l1.as_slice(), l2.as_slice()], "configs/", limits)
            .unwrap_err();
        match e {
            LayerError::Unsafe { layer, entry, kind } => {
                assert_eq!((layer, entry.as_str()), (1, "configs/c.json"));
                assert_eq!(kind, UnsafeEntry::TotalTooLarge { limit: 25 });
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn config_dir_label_values() {
        let layer = Layer::new().file("a/configs/x.json", b"x").tar();
        for value in ["/a/configs", "a/configs/", "./a//configs"] {
            let files = read_config_dir([layer.as_slice()], value).unwrap();
            assert_eq!(names(&files), vec!["x.json"], "{value}");
        }
        for value in ["/", "", "/a/../configs"] {
            assert!(
                matches!(
                    read_config_dir([layer.as_slice()], value),
                    Err(LayerError::ConfigDir { .. })
                ),
                "{value}"
            );
        }
    }

    #[test]
    fn zstd_and_garbage_layers_are_errors() {
        let zstd = vec![0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0, 0];
        assert!(matches!(
            read(vec![zstd]),
            Err(LayerError::Compression {
                layer: 0,
                format: "zstd"
            })
        ));
        let corrupt_gzip = vec![0x1f, 0x8b, 0x08, 0, 1, 2, 3, 4, 5];
        assert!(matches!(
            read(vec![corrupt_gzip]),
            Err(LayerError::Read { layer: 0, .. })
        ));
        // An empty layer (no entries) is fine.
        assert!(read(vec![Vec::new()]).unwrap().is_empty());
    }
}
