//! One file out of an image, without unpacking the image: the layers are read top layer first,
//! and the first layer that says anything about the path decides. A regular file there is the
//! answer; a whiteout of the path or of a directory above it (`.wh.NAME`), an opaque marker in a
//! directory above it (`.wh..wh..opq`), or a non-directory where a directory above it should be
//! means the file is not in the image, whatever the layers below hold. A layer that says nothing
//! sends the search one layer down.
//!
//! The same defences as [`super::layers`]: absolute entry paths and `..` are refused naming the
//! layer and the entry, gzip and plain tar are read, zstd is refused by name. The file itself must
//! be a regular file (a link would need the rest of the image to resolve; release binaries never
//! are links).

use super::layers::{normalise, tar_stream, LayerError, UnsafeEntry};
use std::io::{self, Read};
use tar::EntryType;

/// What one layer says about the path.
#[derive(Debug, PartialEq, Eq)]
pub enum Found {
    /// The layer holds the file; its bytes went to the sink, this many.
    File(u64),
    /// The layer deletes the path (or hides it): the file is not in the image.
    Removed(String),
    /// The layer says nothing about the path.
    Absent,
}

/// Reads layer `index` (a tar or gzip tar stream) to its end, looking for `path` (`usr/bin/oc`);
/// when the layer holds it as a regular file, its bytes are copied through `sink`. The whole
/// layer is read either way, so a digest-checking reader sees every byte.
pub fn find_in_layer<R: Read>(
    index: usize,
    layer: R,
    path: &str,
    sink: &mut dyn FnMut(&mut dyn Read) -> io::Result<u64>,
) -> Result<Found, LayerError> {
    let want: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let read_err = |source| LayerError::Read {
        layer: index,
        source,
    };
    let mut archive = tar::Archive::new(tar_stream(index, layer)?);
    let mut found = Found::Absent;
    for entry in archive.entries().map_err(read_err)? {
        let mut entry = entry.map_err(read_err)?;
        let raw = entry.path_bytes().into_owned();
        let refuse = |kind| LayerError::Unsafe {
            layer: index,
            entry: String::from_utf8_lossy(&raw).into_owned(),
            kind,
        };
        let kind = entry.header().entry_type();
        if matches!(
            kind,
            EntryType::XGlobalHeader | EntryType::XHeader | EntryType::GNULongName
        ) {
            continue;
        }
        let components = normalise(&raw).map_err(refuse)?;
        if matches!(found, Found::File(_)) {
            continue; // read on to the end, for the digest
        }
        let names: Vec<&str> = components.iter().map(String::as_str).collect();
        let shown = String::from_utf8_lossy(&raw).into_owned();
        if names == want {
            if kind != EntryType::Regular && kind != EntryType::Continuous {
                return Err(refuse(UnsafeEntry::NotRegular(format!("{kind:?}"))));
            }
            found = Found::File(sink(&mut entry).map_err(read_err)?);
            continue;
        }
        if let Some(removal) = hides(&names, &want, kind) {
            found = Found::Removed(format!("{shown} ({removal})"));
        }
    }
    Ok(found)
}

/// Whether the entry `names` of a layer hides the wanted path from the layers below: a
/// whiteout of it or of a directory above it, an opaque directory above it, or something other
/// than a directory standing where a directory above it is.
fn hides(names: &[&str], want: &[&str], kind: EntryType) -> Option<&'static str> {
    let (name, parent) = names.split_last()?;
    if *name == ".wh..wh..opq" && want.starts_with(parent) && want.len() > parent.len() {
        return Some("an opaque whiteout of a directory above it");
    }
    if let Some(target) = name.strip_prefix(".wh.") {
        let mut deleted = parent.to_vec();
        deleted.push(target);
        if want.starts_with(&deleted) {
            return Some("a whiteout");
        }
        return None;
    }
    let ancestor = names.len() < want.len() && want.starts_with(names);
    (ancestor && kind != EntryType::Directory).then_some("not a directory where one is needed")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(entries: &[(&str, EntryType, &[u8])]) -> Vec<u8> {
        let mut tar = tar::Builder::new(Vec::new());
        for (path, kind, bytes) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(*kind);
            h.set_size(bytes.len() as u64);
            h.set_mode(0o755);
            if *kind == EntryType::Symlink {
                h.set_link_name("other").unwrap();
            }
            tar.append_data(&mut h, path, *bytes).unwrap();
        }
        tar.into_inner().unwrap()
    }

    fn find(l: &[u8], path: &str) -> (Result<Found, LayerError>, Vec<u8>) {
        let mut got = Vec::new();
        let r = find_in_layer(0, l, path, &mut |r| {
            let n = io::copy(r, &mut got)?;
            Ok(n)
        });
        (r, got)
    }

    #[test]
    fn a_regular_file_is_copied_out_whatever_its_spelling() {
        let l = layer(&[
            ("usr/", EntryType::Directory, b""),
            ("./usr/bin/oc", EntryType::Regular, b"binary"),
        ]);
        let (r, got) = find(&l, "usr/bin/oc");
        assert_eq!(r.unwrap(), Found::File(6));
        assert_eq!(got, b"binary");
    }

    #[test]
    fn whiteouts_opaque_directories_and_replaced_parents_hide_the_file() {
        for (entry, kind) in [
            ("usr/bin/.wh.oc", EntryType::Regular),
            ("usr/.wh.bin", EntryType::Regular),
            ("usr/bin/.wh..wh..opq", EntryType::Regular),
            ("usr/bin", EntryType::Symlink),
        ] {
            let l = layer(&[(entry, kind, b"")]);
            let (r, _) = find(&l, "usr/bin/oc");
            assert!(matches!(r.unwrap(), Found::Removed(_)), "{entry}");
        }
        // Whiteouts of siblings, and an opaque marker in the file's own directory that the same
        // layer refills, do not hide it.
        let l = layer(&[
            ("usr/bin/.wh.kubectl", EntryType::Regular, b""),
            ("usr/bin/.wh..wh..opq", EntryType::Regular, b""),
            ("usr/bin/oc", EntryType::Regular, b"x"),
        ]);
        assert_eq!(find(&l, "usr/bin/oc").0.unwrap(), Found::File(1));
        let l = layer(&[("usr/share/doc", EntryType::Regular, b"")]);
        assert_eq!(find(&l, "usr/bin/oc").0.unwrap(), Found::Absent);
    }

    #[test]
    fn a_link_or_an_escaping_path_is_refused() {
        let l = layer(&[("usr/bin/oc", EntryType::Symlink, b"")]);
        let e = find(&l, "usr/bin/oc").0.unwrap_err().to_string();
        assert!(
            e.contains("usr/bin/oc") && e.contains("not a regular file"),
            "{e}"
        );
        let mut raw = layer(&[("usr/bin/xx", EntryType::Regular, b"")]);
        raw[..10].copy_from_slice(b"../etc/pwd");
        let mut h = tar::Header::from_byte_slice(&raw[..512]).clone();
        h.set_cksum();
        raw[..512].copy_from_slice(h.as_bytes());
        let e = find(&raw, "usr/bin/oc").0.unwrap_err().to_string();
        assert!(e.contains(".."), "{e}");
    }
}
