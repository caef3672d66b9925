//! The one safe walk over an image layer's tar entries, shared by every reader of layers (the
//! catalog's config directory in [`super::layers`], one file out of an image in
//! [`super::layerfile`]), so what is refused is decided in one place.
//!
//! Layers come from registries bootstrap does not control. The walk decompresses a layer as its
//! first bytes say (gzip or plain tar; zstd is refused by name), reads every entry, and refuses,
//! naming the layer and the entry, an entry whose path is absolute or has a `..` component, and a
//! symbolic or hard link whose target leaves the image root, wherever the entry lies in the layer
//! and whatever the reader wants of it. Entries that reach the reader are classified: regular
//! files, directories, links, devices and FIFOs, and the OCI whiteouts (`.wh.NAME` deletes `NAME`
//! from the layers below; `.wh..wh..opq` empties its directory of what they put there). What a
//! reader keeps is its own policy (a device where it would keep a file, a non-UTF-8 name, sizes),
//! refused through [`LayerEntry::refuse`] so every refusal reads alike.

use super::layers::{read_prefix, LayerError, UnsafeEntry};
use flate2::read::MultiGzDecoder;
use std::borrow::Cow;
use std::io::{self, Read};
use tar::EntryType;

/// What an entry of a layer is, once its path and link target were found safe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Member {
    /// A regular file (tar types `0` and `7`); its bytes are [`LayerEntry::data`].
    File,
    /// A directory.
    Directory,
    /// A hard link to another member of the archive, named by its path as written.
    HardLink(Vec<u8>),
    /// A symbolic link (whose target stays inside the root).
    Symlink,
    /// A character or block device, or a FIFO.
    Special,
    /// `.wh.NAME`: deletes this path (the whiteout's directory and `NAME`) from the layers below.
    Whiteout(Vec<String>),
    /// `.wh..wh..opq`: empties this directory of what the layers below put there.
    Opaque(Vec<String>),
    /// Any other entry type tar can hold; it replaces what was at its path.
    Other(EntryType),
}

/// One entry of a layer that passed the walk's checks.
pub(crate) struct LayerEntry<'e> {
    index: usize,
    raw: &'e [u8],
    /// The entry's path as components, without empty and `.` parts; never empty (the root
    /// directory's own entry is not handed on).
    pub path: Vec<String>,
    /// What the entry is.
    pub member: Member,
    /// The entry type as the header writes it, for messages.
    pub kind: EntryType,
    /// The entry's size as its header says.
    pub size: u64,
    /// The entry's bytes (a regular file's contents; empty for most other members).
    pub data: &'e mut dyn Read,
}

impl LayerEntry<'_> {
    /// The refusal of this entry: names the layer, the entry as written and why.
    pub fn refuse(&self, kind: UnsafeEntry) -> LayerError {
        unsafe_entry(self.index, self.raw, kind)
    }

    /// A failure reading this entry's bytes (I/O, a corrupt stream), naming the layer.
    pub fn read_error(&self, source: io::Error) -> LayerError {
        LayerError::Read {
            layer: self.index,
            source,
        }
    }

    /// The entry's path as written in the archive (lossily decoded), for messages.
    pub fn shown(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(self.raw)
    }

    /// Refuses the entry when its path is not UTF-8 (the components decode it lossily, so a
    /// reader that keeps the entry under its name must not take it for another).
    pub fn require_utf8(&self) -> Result<(), LayerError> {
        match std::str::from_utf8(self.raw) {
            Ok(_) => Ok(()),
            Err(_) => Err(self.refuse(UnsafeEntry::NotUtf8)),
        }
    }
}

/// Walks layer `index` (a tar or gzip tar stream) to its end-of-archive marker and hands `visit`
/// every entry that passed the checks of the module doc, in archive order; the first refusal or
/// error stops the walk. Every entry is read through, whatever `visit` reads of it; a caller
/// that checks the layer's digest drains what follows the marker.
pub(crate) fn walk_layer<R: Read>(
    index: usize,
    layer: R,
    mut visit: impl FnMut(LayerEntry<'_>) -> Result<(), LayerError>,
) -> Result<(), LayerError> {
    let read_err = |source| LayerError::Read {
        layer: index,
        source,
    };
    let mut archive = tar::Archive::new(tar_stream(index, layer)?);
    for entry in archive.entries().map_err(read_err)? {
        let mut entry = entry.map_err(read_err)?;
        let kind = entry.header().entry_type();
        if matches!(
            kind,
            EntryType::XGlobalHeader | EntryType::XHeader | EntryType::GNULongName
        ) {
            continue; // tar applies these to the entry they describe
        }
        let raw = entry.path_bytes().into_owned();
        let refuse = |why| unsafe_entry(index, &raw, why);
        let path = normalise(&raw).map_err(refuse)?;
        let Some((name, parent)) = path.split_last() else {
            continue; // the root directory itself
        };
        let link = entry.link_name_bytes().map(Cow::into_owned);
        if let (EntryType::Symlink | EntryType::Link, Some(target)) = (kind, &link) {
            check_link(parent, target, kind == EntryType::Link).map_err(refuse)?;
        }
        // Whiteouts are known by their name, whatever their type.
        let member = match whiteout(parent, name) {
            Some(Some(member)) => member,
            Some(None) => continue, // AUFS bookkeeping (`.wh..wh.plnk`): no content
            None => member_of(kind, link),
        };
        let size = entry.size();
        visit(LayerEntry {
            index,
            raw: &raw,
            path,
            member,
            kind,
            size,
            data: &mut entry,
        })?;
    }
    Ok(())
}

fn unsafe_entry(index: usize, raw: &[u8], kind: UnsafeEntry) -> LayerError {
    LayerError::Unsafe {
        layer: index,
        entry: String::from_utf8_lossy(raw).into_owned(),
        kind,
    }
}

/// What a whiteout name means: `None` when `name` is not one, `Some(None)` for AUFS's own
/// `.wh..wh.*` files other than the opaque marker.
fn whiteout(parent: &[String], name: &str) -> Option<Option<Member>> {
    let target = name.strip_prefix(".wh.")?;
    if target == ".wh..opq" {
        return Some(Some(Member::Opaque(parent.to_vec())));
    }
    if target.starts_with(".wh.") {
        return Some(None);
    }
    let mut deleted = parent.to_vec();
    deleted.push(target.to_string());
    Some(Some(Member::Whiteout(deleted)))
}

fn member_of(kind: EntryType, link: Option<Vec<u8>>) -> Member {
    match kind {
        EntryType::Regular | EntryType::Continuous => Member::File,
        EntryType::Directory => Member::Directory,
        // A hard link without a target names nothing in the archive; it still replaces its path.
        EntryType::Link => Member::HardLink(link.unwrap_or_default()),
        EntryType::Symlink => Member::Symlink,
        EntryType::Char | EntryType::Block | EntryType::Fifo => Member::Special,
        other => Member::Other(other),
    }
}

/// A layer's tar stream (`index` names it in errors), decompressed as its first bytes say:
/// gzip, or an uncompressed tar; zstd is refused by name.
fn tar_stream<'a, R: Read + 'a>(
    index: usize,
    mut layer: R,
) -> Result<Box<dyn Read + 'a>, LayerError> {
    let mut magic = [0u8; 4];
    let n = read_prefix(&mut layer, &mut magic).map_err(|source| LayerError::Read {
        layer: index,
        source,
    })?;
    let stream = io::Cursor::new(magic[..n].to_vec()).chain(layer);
    match &magic[..n] {
        [0x1f, 0x8b, ..] => Ok(Box::new(MultiGzDecoder::new(stream))),
        [0x28, 0xb5, 0x2f, 0xfd] => Err(LayerError::Compression {
            layer: index,
            format: "zstd",
        }),
        _ => Ok(Box::new(stream)),
    }
}

/// An entry path's components without empty and `.` parts; refuses absolute paths and `..`.
/// Non-UTF-8 components are decoded lossily (a reader that keeps the entry refuses them, see
/// [`LayerEntry::require_utf8`]).
pub(crate) fn normalise(raw: &[u8]) -> Result<Vec<String>, UnsafeEntry> {
    if raw.first() == Some(&b'/') {
        return Err(UnsafeEntry::AbsolutePath);
    }
    let mut out = Vec::new();
    for part in raw.split(|b| *b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => return Err(UnsafeEntry::ParentComponent),
            p => out.push(String::from_utf8_lossy(p).into_owned()),
        }
    }
    Ok(out)
}

/// Refuses a link whose target leaves the root. A symbolic link resolves from its own directory
/// (`parent`), or from the image root when absolute, as it would inside the container; a hard
/// link names another archive member, so an absolute one points outside the archive.
fn check_link(parent: &[String], target: &[u8], hard: bool) -> Result<(), UnsafeEntry> {
    let escapes = || UnsafeEntry::LinkEscapes {
        target: String::from_utf8_lossy(target).into_owned(),
    };
    let absolute = target.first() == Some(&b'/');
    if hard && absolute {
        return Err(escapes());
    }
    let mut depth = if absolute || hard { 0 } else { parent.len() };
    for part in target.split(|b| *b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => depth = depth.checked_sub(1).ok_or_else(escapes)?,
            _ => depth += 1,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::layerfile::{self, Found};
    use super::super::layers;
    use super::*;
    use std::collections::BTreeMap;

    /// An entry of a hand-made layer: its name is written into the header as is (the tar
    /// crate's own `set_path` refuses the hostile names these tests need).
    fn entry(
        kind: EntryType,
        name: &[u8],
        link: Option<&str>,
        data: &[u8],
    ) -> (tar::Header, Vec<u8>) {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.as_old_mut().name[..name.len()].copy_from_slice(name);
        if let Some(target) = link {
            h.set_link_name_literal(target).unwrap();
        }
        h.set_cksum();
        (h, data.to_vec())
    }

    fn layer(entries: &[(tar::Header, Vec<u8>)]) -> Vec<u8> {
        let mut tar = tar::Builder::new(Vec::new());
        for (h, data) in entries {
            tar.append(h, data.as_slice()).unwrap();
        }
        tar.into_inner().unwrap()
    }

    fn members(layer: &[u8]) -> Result<Vec<(String, Member)>, LayerError> {
        let mut seen = Vec::new();
        walk_layer(3, layer, |e| {
            seen.push((e.path.join("/"), e.member.clone()));
            Ok(())
        })?;
        Ok(seen)
    }

    /// Every entry the walk refuses, whatever a reader wants of the layer, and why.
    fn hostile() -> Vec<((tar::Header, Vec<u8>), UnsafeEntry)> {
        let escapes = |t: &str| UnsafeEntry::LinkEscapes { target: t.into() };
        vec![
            (
                entry(EntryType::Regular, b"../../etc/passwd", None, b"x"),
                UnsafeEntry::ParentComponent,
            ),
            (
                entry(EntryType::Regular, b"usr/../../x", None, b"x"),
                UnsafeEntry::ParentComponent,
            ),
            (
                entry(EntryType::Directory, b"usr/..", None, b""),
                UnsafeEntry::ParentComponent,
            ),
            (
                entry(EntryType::Regular, b"/etc/passwd", None, b"x"),
                UnsafeEntry::AbsolutePath,
            ),
            (
                entry(EntryType::Symlink, b"/usr/bin/oc", Some("oc.real"), b""),
                UnsafeEntry::AbsolutePath,
            ),
            (
                entry(EntryType::Symlink, b"usr/x", Some("../../etc/shadow"), b""),
                escapes("../../etc/shadow"),
            ),
            (
                entry(EntryType::Symlink, b"x", Some("/../etc/shadow"), b""),
                escapes("/../etc/shadow"),
            ),
            (
                entry(EntryType::Link, b"usr/x", Some("/etc/shadow"), b""),
                escapes("/etc/shadow"),
            ),
            (
                entry(EntryType::Link, b"usr/x", Some("usr/../../etc/shadow"), b""),
                escapes("usr/../../etc/shadow"),
            ),
            // A whiteout is judged as the link it is written as, too.
            (
                entry(EntryType::Symlink, b"usr/.wh.x", Some("../../y"), b""),
                escapes("../../y"),
            ),
        ]
    }

    #[test]
    fn hostile_entries_are_refused_naming_the_layer_and_the_entry() {
        for (bad, why) in hostile() {
            let shown = String::from_utf8_lossy(&bad.0.as_old().name)
                .trim_end_matches('\0')
                .to_string();
            // After a harmless entry, so the refusal is not about the layer's start.
            let l = layer(&[entry(EntryType::Regular, b"ok", None, b"1"), bad]);
            match members(&l) {
                Err(LayerError::Unsafe { layer, entry, kind }) => {
                    assert_eq!((layer, entry.as_str(), &kind), (3, shown.as_str(), &why))
                }
                other => panic!("{shown}: expected a refusal, got {other:?}"),
            }
        }
    }

    fn catalog(layer: &[u8]) -> Result<BTreeMap<String, Vec<u8>>, LayerError> {
        layers::read_config_dir([layer], "/configs")
    }

    fn one_file(layer: &[u8], path: &str) -> Result<Found, LayerError> {
        layerfile::find_in_layer(0, layer, path, &mut |r| io::copy(r, &mut io::sink()))
    }

    fn refused_as(result: &Result<impl std::fmt::Debug, LayerError>, why: &UnsafeEntry) -> bool {
        matches!(result, Err(LayerError::Unsafe { kind, .. }) if kind == why)
    }

    /// Regression: the one-file reader (`layerfile`) used to refuse only `..` and absolute
    /// paths, and let links leaving the root through; the catalog reader (`layers`) refused
    /// those links but only the catalog's own devices. Both now refuse every hostile entry the
    /// walk refuses, wherever it lies in the layer and whatever they were looking for.
    #[test]
    fn both_readers_refuse_every_hostile_entry_wherever_it_lies() {
        for (bad, why) in hostile() {
            let l = layer(&[
                entry(EntryType::Regular, b"configs/a.json", None, b"{}"),
                entry(EntryType::Regular, b"usr/bin/oc", None, b"ELF"),
                bad,
            ]);
            let found = catalog(&l);
            assert!(refused_as(&found, &why), "layers, {why}: {found:?}");
            let found = one_file(&l, "usr/bin/oc");
            assert!(refused_as(&found, &why), "layerfile, {why}: {found:?}");
        }
        // What each keeps must be a plain file with a UTF-8 name: a device where the catalog
        // lies, or at the path wanted, is refused by both; so is a name that only decodes to
        // the one wanted.
        let dev = layer(&[entry(EntryType::Char, b"configs/x.json", None, b"")]);
        assert!(refused_as(&catalog(&dev), &UnsafeEntry::SpecialFile));
        let not_regular = UnsafeEntry::NotRegular("Char".into());
        assert!(refused_as(&one_file(&dev, "configs/x.json"), &not_regular));
        let odd = layer(&[entry(EntryType::Regular, b"configs/\xff", None, b"x")]);
        assert!(refused_as(&catalog(&odd), &UnsafeEntry::NotUtf8));
        assert!(refused_as(
            &one_file(&odd, "configs/\u{fffd}"),
            &UnsafeEntry::NotUtf8
        ));
    }

    #[test]
    fn safe_entries_are_classified_and_the_root_and_aufs_files_are_skipped() {
        let l = layer(&[
            entry(EntryType::Directory, b"./", None, b""),
            entry(EntryType::Directory, b"usr/", None, b""),
            entry(EntryType::Regular, b"./usr//bin/oc", None, b"ELF"),
            entry(
                EntryType::Symlink,
                b"etc/mtab",
                Some("/proc/self/mounts"),
                b"",
            ),
            entry(EntryType::Symlink, b"usr/lib/x", Some("../../etc/x"), b""),
            entry(EntryType::Link, b"usr/bin/kubectl", Some("usr/bin/oc"), b""),
            entry(EntryType::Fifo, b"run/p", None, b""),
            entry(EntryType::Regular, b"usr/.wh.share", None, b""),
            entry(EntryType::Regular, b"etc/.wh..wh..opq", None, b""),
            entry(EntryType::Regular, b".wh..wh.plnk", None, b""),
        ]);
        let seen: BTreeMap<String, Member> = members(&l).unwrap().into_iter().collect();
        let want: BTreeMap<String, Member> = [
            ("usr", Member::Directory),
            ("usr/bin/oc", Member::File),
            ("etc/mtab", Member::Symlink),
            ("usr/lib/x", Member::Symlink),
            ("usr/bin/kubectl", Member::HardLink(b"usr/bin/oc".to_vec())),
            ("run/p", Member::Special),
            (
                "usr/.wh.share",
                Member::Whiteout(vec!["usr".into(), "share".into()]),
            ),
            ("etc/.wh..wh..opq", Member::Opaque(vec!["etc".into()])),
        ]
        .into_iter()
        .map(|(p, m)| (p.to_string(), m))
        .collect();
        assert_eq!(seen, want);
    }

    #[test]
    fn every_entry_is_read_through_whatever_the_reader_reads() {
        // A reader that reads nothing still gets every entry, and the walk reads past each
        // entry's bytes (the reader below a digest check then only has the end blocks left
        // to drain).
        let l = layer(&[
            entry(EntryType::Regular, b"big", None, &[7u8; 5000]),
            entry(EntryType::Regular, b"last", None, b"x"),
        ]);
        let mut counted = io::Cursor::new(l.clone());
        let mut seen = 0;
        walk_layer(0, &mut counted, |_| {
            seen += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, 2);
        assert!(counted.position() >= 512 + 5120 + 512 + 512);
    }
}
