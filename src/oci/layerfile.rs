//! One file out of an image, without unpacking the image: the layers are read top layer first,
//! and the first layer that says anything about the path decides. A regular file there is the
//! answer; a whiteout of the path or of a directory above it (`.wh.NAME`), an opaque marker in a
//! directory above it (`.wh..wh..opq`), or a non-directory where a directory above it should be
//! means the file is not in the image, whatever the layers below hold. A layer that says nothing
//! sends the search one layer down.
//!
//! The layer is read through the shared walk (`oci::layer_walk`), with the catalog reader's
//! defences: an absolute entry path, a `..` component, or a link leaving the image root, anywhere
//! in the layer, is refused naming the layer and the entry; gzip and plain tar are read, zstd is
//! refused by name. The file itself must be a regular file with a UTF-8 name (a link would need
//! the rest of the image to resolve; release binaries never are links).

use super::layer_walk::{walk_layer, LayerEntry, Member};
use super::layers::{LayerError, UnsafeEntry};
use std::io::{self, Read};

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
/// when the layer holds it as a regular file, its bytes are copied through `sink`. Every entry
/// is read either way, so a digest-checking reader under it is left only the end blocks to
/// drain before its check (as `openshift::extract` does).
pub fn find_in_layer<R: Read>(
    index: usize,
    layer: R,
    path: &str,
    sink: &mut dyn FnMut(&mut dyn Read) -> io::Result<u64>,
) -> Result<Found, LayerError> {
    let want: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let mut found = Found::Absent;
    walk_layer(index, layer, |entry| {
        if matches!(found, Found::File(_)) {
            return Ok(()); // read on to the end, for the digest (and the walk's checks)
        }
        if entry.path == want {
            if entry.member != Member::File {
                let kind = entry.kind;
                return Err(entry.refuse(UnsafeEntry::NotRegular(format!("{kind:?}"))));
            }
            entry.require_utf8()?;
            found = Found::File(sink(entry.data).map_err(|e| entry.read_error(e))?);
        } else if let Some(removal) = hides(&entry, &want) {
            found = Found::Removed(format!("{} ({removal})", entry.shown()));
        }
        Ok(())
    })?;
    Ok(found)
}

/// Whether `entry` hides the wanted path from the layers below: a whiteout of it or of a
/// directory above it, an opaque directory above it, or something other than a directory
/// standing where a directory above it is.
fn hides(entry: &LayerEntry<'_>, want: &[&str]) -> Option<&'static str> {
    let above =
        |dir: &[String]| dir.len() < want.len() && dir.iter().zip(want).all(|(d, w)| d == w);
    match &entry.member {
        Member::Opaque(dir) if above(dir) => Some("an opaque whiteout of a directory above it"),
        Member::Whiteout(deleted) if deleted == want || above(deleted) => Some("a whiteout"),
        Member::Opaque(_) | Member::Whiteout(_) | Member::Directory => None,
        _ => above(&entry.path).then_some("not a directory where one is needed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tar::EntryType;

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
