//! `bootstrap verify archive://DIR`: the manifest's signature (with `--allowed-signers`),
//! `SHA256SUMS` against the manifest, every chunk's size and sha256, and every blob and file by
//! seeking into its chunk (its tar header names it, its bytes match its digest) — each chunk
//! read once, front to back, feeding both hashes. One line per problem.

use super::{tarfmt, ArchiveManifest, MANIFEST_FILE, STAGING_DIR, SUMS_FILE};
use crate::oci::digest::{Digest, StreamHasher};
use crate::verify::Report;
use anyhow::Result;
use futures_util::StreamExt;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::Path;

/// One thing stored in a chunk.
pub(super) struct Entry {
    pub(super) what: String,
    pub(super) name: String,
    pub(super) offset: u64,
    pub(super) size: u64,
    pub(super) expect: Expect,
}

pub(super) enum Expect {
    Digest(Digest),
    Sha256(String),
}

/// Checks the archive at `dir`.
pub async fn verify(dir: &Path, allowed_signers: Option<&Path>) -> Result<Report> {
    let mut report = Report {
        target: format!("archive://{}", dir.display()),
        ..Report::default()
    };
    let manifest_path = dir.join(MANIFEST_FILE);
    let text = match crate::bounded::read_regular_to_string(
        &manifest_path,
        crate::bounded::LAYOUT_FILE_MAX,
    ) {
        Ok(t) => t,
        Err(e) => {
            report.missing.push(format!(
                "{MANIFEST_FILE}: {e} (nothing else can be checked)"
            ));
            return Ok(report.finish());
        }
    };
    if let Some(allowed) = allowed_signers {
        check_signatures(dir, allowed, &text, &mut report);
    }
    let manifest = match ArchiveManifest::parse(&manifest_path, &text) {
        Ok(m) => m,
        Err(e) => {
            report.corrupt.push(format!("{e:#}"));
            return Ok(report.finish());
        }
    };
    check_sums(dir, &manifest, &text, &mut report);
    check_listing(dir, &manifest, &mut report)?;
    let by_chunk = entries_by_chunk(&manifest, &mut report);
    check_images(dir, &manifest, &mut report);
    check_chunks(dir, &manifest, by_chunk, &mut report).await?;
    Ok(report.finish())
}

/// The signatures of `manifest.json` (whose bytes are `text`) and of `SHA256SUMS`, against
/// `--allowed-signers`.
fn check_signatures(dir: &Path, allowed: &Path, text: &str, report: &mut Report) {
    let manifest_path = dir.join(MANIFEST_FILE);
    match crate::sshsig::verify_bytes(allowed, &manifest_path, text.as_bytes()) {
        Ok(v) => report.signed_by = Some(format!("{} ({})", v.identity, v.fingerprint)),
        Err(e) => report.corrupt.push(format!("{e:#}")),
    }
    let sums_path = dir.join(SUMS_FILE);
    match crate::bounded::read_regular(&sums_path, 1024 * 1024) {
        Ok(sums) => {
            if let Err(e) = crate::sshsig::verify_bytes(allowed, &sums_path, &sums) {
                report.corrupt.push(format!("{e:#}"));
            }
        }
        Err(e) => report.missing.push(format!("{SUMS_FILE}: {e}")),
    }
}

/// Every blob and file the manifest lists, by the chunk it lies in; entries in a chunk the
/// manifest does not list are reported.
fn entries_by_chunk<'m>(
    manifest: &'m ArchiveManifest,
    report: &mut Report,
) -> BTreeMap<&'m str, Vec<Entry>> {
    let mut by_chunk: BTreeMap<&str, Vec<Entry>> = BTreeMap::new();
    for b in &manifest.blobs {
        by_chunk.entry(&b.chunk).or_default().push(Entry {
            what: format!("blob {}", b.digest),
            name: super::writer::blob_path(&b.digest),
            offset: b.offset,
            size: b.size,
            expect: Expect::Digest(b.digest.clone()),
        });
    }
    for f in &manifest.files {
        by_chunk.entry(&f.chunk).or_default().push(Entry {
            what: format!("file {}", f.path),
            name: f.path.clone(),
            offset: f.offset,
            size: f.size,
            expect: Expect::Sha256(f.sha256.clone()),
        });
    }
    let listed: BTreeSet<&str> = manifest.chunks.iter().map(|c| c.name.as_str()).collect();
    for (chunk, entries) in &by_chunk {
        if !listed.contains(chunk) {
            report.corrupt.push(format!(
                "{MANIFEST_FILE}: {} entries lie in {chunk}, which it does not list",
                entries.len()
            ));
        }
    }
    by_chunk
}

/// Every image's manifests and what they reference are carried (or left to the base).
fn check_images(dir: &Path, manifest: &ArchiveManifest, report: &mut Report) {
    let carried: BTreeSet<&Digest> = manifest.all_digests().collect();
    let dropped = dropped_platforms(dir, manifest);
    for img in &manifest.images {
        if !carried.contains(&img.digest) {
            report.missing.push(format!(
                "image {}: its manifest {} is in neither the archive nor its base",
                img.name, img.digest
            ));
        } else {
            let dropped = dropped.get(&img.name).cloned().unwrap_or_default();
            let walk = Walk {
                carried: &carried,
                dropped: &dropped,
            };
            check_references(dir, manifest, &walk, img, report);
        }
    }
}

/// Reads every chunk the manifest lists, checking its entries on the way.
async fn check_chunks(
    dir: &Path,
    manifest: &ArchiveManifest,
    mut by_chunk: BTreeMap<&str, Vec<Entry>>,
    report: &mut Report,
) -> Result<()> {
    // Two chunks at a time: removable disks read best front to back, not all at once.
    let jobs = manifest.chunks.iter().map(|c| {
        let mut entries = by_chunk.remove(c.name.as_str()).unwrap_or_default();
        entries.sort_by_key(|e| e.offset);
        let path = dir.join(&c.name);
        let (name, size, sha) = (c.name.clone(), c.size, c.sha256.clone());
        tokio::task::spawn_blocking(move || check_chunk(&path, &name, size, &sha, &entries))
    });
    let results: Vec<_> = futures_util::stream::iter(jobs).buffered(2).collect().await;
    for found in results {
        let found = found?;
        report.checked += found.checked;
        report.bytes += found.bytes;
        report.missing.extend(found.missing);
        report.corrupt.extend(found.corrupt);
    }
    Ok(())
}

/// The platforms each image's platform filter left out of its index (by the image's name),
/// as the mirror record inside the archive says: those children are not carried, by design.
/// A record that is missing, damaged or unreadable gives none (the file checks name it), so
/// every child is then required.
fn dropped_platforms(dir: &Path, manifest: &ArchiveManifest) -> BTreeMap<String, BTreeSet<String>> {
    let record = crate::openshift::record::RECORD_FILE;
    let Some(f) = manifest.files.iter().find(|f| f.path == record) else {
        return BTreeMap::new();
    };
    let Ok(bytes) = super::reader::read_range(&dir.join(&f.chunk), f.offset, f.size) else {
        return BTreeMap::new();
    };
    if Digest::of(&bytes).hex() != f.sha256 {
        return BTreeMap::new();
    }
    let Ok(text) = String::from_utf8(bytes) else {
        return BTreeMap::new();
    };
    let Ok(rec) = crate::openshift::record::MirrorRecord::parse(Path::new(record), &text) else {
        return BTreeMap::new();
    };
    rec.images
        .into_iter()
        .filter(|i| !i.platforms_dropped.is_empty())
        .map(|i| (i.source, i.platforms_dropped.into_iter().collect()))
        .collect()
}

/// What a walk of one image's manifests accepts: digests the archive or its base carries, and
/// children of its top index for platforms its filter dropped.
struct Walk<'a> {
    carried: &'a BTreeSet<&'a Digest>,
    dropped: &'a BTreeSet<String>,
}

/// `os/arch[/variant]` of an index entry as JSON, as [`crate::oci::manifest::platform_of`]
/// names it (the record's dropped platforms are named so).
fn entry_platform(entry: &serde_json::Value) -> Option<String> {
    let entry: oci_client::manifest::ImageIndexEntry =
        serde_json::from_value(entry.clone()).ok()?;
    crate::oci::manifest::platform_of(&entry)
}

/// Walks an image's manifests as the archive carries them (an index's children, each
/// manifest's config and layers): every digest they reference must be carried, or left to the
/// base; a child of the top index the image's platform filter dropped is not carried (a
/// sparse index). A manifest the archive cannot read is left to the chunk checks, which name
/// it.
fn check_references(
    dir: &Path,
    manifest: &ArchiveManifest,
    walk: &Walk<'_>,
    img: &super::ArchiveImage,
    report: &mut Report,
) {
    let carried = walk.carried;
    let mut todo = vec![img.digest.clone()];
    let mut seen = BTreeSet::new();
    while let Some(d) = todo.pop() {
        if !seen.insert(d.clone()) {
            continue;
        }
        // Only what this archive holds can be read; a base manifest was checked with the base.
        let Some(b) = manifest.blobs.iter().find(|b| b.digest == d) else {
            continue;
        };
        if b.size > crate::bounded::SMALL_BLOB_MAX {
            continue;
        }
        let Ok(bytes) = super::reader::read_range(&dir.join(&b.chunk), b.offset, b.size) else {
            continue;
        };
        if Digest::of(&bytes) != d {
            continue;
        }
        let Ok(json) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
            continue;
        };
        let children = json["manifests"].as_array().into_iter().flatten();
        let blobs = json["layers"]
            .as_array()
            .into_iter()
            .flatten()
            .chain(std::iter::once(&json["config"]));
        for (entry, is_manifest) in children.map(|c| (c, true)).chain(blobs.map(|b| (b, false))) {
            let Some(r) = entry["digest"]
                .as_str()
                .and_then(|s| s.parse::<Digest>().ok())
            else {
                continue;
            };
            let filtered_out = is_manifest
                && d == img.digest
                && entry_platform(entry).is_some_and(|p| walk.dropped.contains(&p));
            if filtered_out {
                continue;
            }
            if !carried.contains(&r) {
                report.missing.push(format!(
                    "image {}: {} {r} (referenced by {d}) is in neither the archive nor its base",
                    img.name,
                    if is_manifest { "manifest" } else { "blob" }
                ));
            } else if is_manifest {
                todo.push(r);
            }
        }
    }
}

fn check_sums(dir: &Path, manifest: &ArchiveManifest, text: &str, report: &mut Report) {
    let sums = match crate::bounded::read_regular_to_string(&dir.join(SUMS_FILE), 1024 * 1024) {
        Ok(s) => s,
        Err(e) => {
            report.missing.push(format!("{SUMS_FILE}: {e}"));
            return;
        }
    };
    let mut listed: BTreeMap<&str, &str> = BTreeMap::new();
    for line in sums.lines() {
        match line.split_once("  ") {
            Some((hex, name)) => {
                listed.insert(name, hex);
            }
            None => report
                .corrupt
                .push(format!("{SUMS_FILE}: line '{line}' is not 'SHA256  NAME'")),
        }
    }
    let mut expected: BTreeMap<&str, String> = manifest
        .chunks
        .iter()
        .map(|c| (c.name.as_str(), c.sha256.clone()))
        .collect();
    expected.insert(MANIFEST_FILE, Digest::of(text.as_bytes()).hex().to_string());
    for (name, hex) in &expected {
        match listed.get(name) {
            None => report
                .missing
                .push(format!("{SUMS_FILE}: does not list {name}")),
            Some(h) if h != hex => report.corrupt.push(format!(
                "{SUMS_FILE}: {name} is listed as {h}, but {}",
                if *name == MANIFEST_FILE {
                    format!("{MANIFEST_FILE} hashes to {hex}")
                } else {
                    format!("the manifest says {hex}")
                }
            )),
            Some(_) => {}
        }
    }
    for name in listed.keys().filter(|n| !expected.contains_key(*n)) {
        report.unexpected.push(format!(
            "{SUMS_FILE}: lists {name}, which the archive does not hold"
        ));
    }
}

fn check_listing(dir: &Path, manifest: &ArchiveManifest, report: &mut Report) -> Result<()> {
    let known: BTreeSet<String> = manifest
        .chunks
        .iter()
        .map(|c| c.name.clone())
        .chain([
            MANIFEST_FILE.to_string(),
            SUMS_FILE.to_string(),
            format!("{MANIFEST_FILE}.sig"),
            format!("{SUMS_FILE}.sig"),
        ])
        .collect();
    for entry in fs_err::read_dir(dir)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if name == STAGING_DIR {
            report.unexpected.push(format!(
                "{name}/: the state of an unfinished write; the archive was sealed, so it is left over"
            ));
        } else if !known.contains(&name) {
            report
                .unexpected
                .push(format!("{name}: not part of the archive"));
        }
    }
    Ok(())
}

#[derive(Default)]
pub(super) struct Found {
    checked: usize,
    bytes: u64,
    missing: Vec<String>,
    pub(super) corrupt: Vec<String>,
    /// The chunk's sha256 (hex), when it was read to its end.
    pub(super) sha256: Option<String>,
    /// The entries whose bytes do not match.
    pub(super) bad: Vec<String>,
}

/// Reads one chunk front to back: its sha256, and every entry's header and bytes on the way.
/// An empty `sha256` checks the entries only (sealing, when the sum is not known yet).
pub(super) fn check_chunk(
    path: &Path,
    name: &str,
    size: u64,
    sha256: &str,
    entries: &[Entry],
) -> Found {
    let mut found = Found::default();
    let (file, actual) = match crate::bounded::open_regular(path) {
        Ok(x) => x,
        Err(e) => {
            found.missing.push(format!("{name}: {e}{}", holds(entries)));
            return found;
        }
    };
    if actual != size {
        found.corrupt.push(format!(
            "{name}: {actual} bytes, the manifest says {size}{}",
            holds(entries)
        ));
    }
    let mut chunk = ChunkRead::new(file.take(size));
    let mut read = Ok(());
    for e in entries {
        read = check_entry(&mut chunk, name, e, &mut found);
        if read.is_err() {
            break;
        }
    }
    let read = read.and_then(|()| chunk.feed(size - chunk.pos.min(size), None, None));
    if let Err(err) = read {
        found.corrupt.push(format!(
            "{name}: could not be read to its end: {err}{}",
            holds(entries)
        ));
        return found;
    }
    found.checked += 1;
    found.bytes += size;
    let (digest, _) = chunk.whole.finish();
    found.sha256 = Some(digest.hex().to_string());
    if !sha256.is_empty() && digest.hex() != sha256 && actual == size {
        let inside = if found.bad.is_empty() {
            " (every entry inside matches: the damage is in a header or padding)".to_string()
        } else {
            format!(" (damaged inside: {})", found.bad.join(", "))
        };
        found.corrupt.push(format!(
            "{name}: its sha256 is {}, the manifest says {sha256}{inside}",
            digest.hex()
        ));
    }
    found
}

/// ` (it holds blob A, file B, and 3 more)`: what a chunk that cannot be read takes with it.
fn holds(entries: &[Entry]) -> String {
    let names: Vec<&str> = entries.iter().map(|e| e.what.as_str()).collect();
    match names.len() {
        0 => String::new(),
        n if n <= 3 => format!(" (it holds {})", names.join(", ")),
        n => format!(" (it holds {}, and {} more)", names[..3].join(", "), n - 3),
    }
}

/// Checks entry `e` of chunk `name`: the tar header before it names it with its size, and its
/// bytes match its digest. Problems go to `found`; an error is a read that failed, which ends
/// the chunk's check.
fn check_entry(
    chunk: &mut ChunkRead<impl Read>,
    name: &str,
    e: &Entry,
    found: &mut Found,
) -> std::io::Result<()> {
    let header_at = e.offset.saturating_sub(tarfmt::BLOCK);
    if header_at < chunk.pos || e.offset < tarfmt::BLOCK {
        found
            .corrupt
            .push(format!("{name}: {} overlaps the entry before it", e.what));
        return Ok(());
    }
    let mut header = Vec::with_capacity(512);
    chunk.feed(header_at - chunk.pos, None, None)?;
    chunk.feed(tarfmt::BLOCK, None, Some(&mut header))?;
    let block: [u8; 512] = header.try_into().expect("one block");
    match tarfmt::read_header(&block) {
        Ok((n, s)) if n == e.name && s == e.size => {}
        Ok((n, s)) => found.corrupt.push(format!(
            "{name}: the tar header before {} names {n} of {s} bytes",
            e.what
        )),
        Err(err) => found.corrupt.push(format!(
            "{name}: the tar header of {} is damaged: {err}",
            e.what
        )),
    }
    let mut h = StreamHasher::new();
    chunk.feed(e.size, Some(&mut h), None)?;
    found.checked += 1;
    let (digest, _) = h.finish();
    let ok = match &e.expect {
        Expect::Digest(d) => &digest == d,
        Expect::Sha256(hex) => digest.hex() == hex,
    };
    if !ok {
        found.bad.push(e.what.clone());
        found.corrupt.push(format!(
            "{name}: {} at offset {} does not match its digest (it hashes to {digest})",
            e.what, e.offset
        ));
    }
    Ok(())
}

/// A chunk read once, front to back, every byte into the whole chunk's hash.
struct ChunkRead<R> {
    r: std::io::BufReader<R>,
    whole: StreamHasher,
    buf: Vec<u8>,
    /// Bytes read so far.
    pos: u64,
}

impl<R: Read> ChunkRead<R> {
    fn new(r: R) -> Self {
        ChunkRead {
            r: std::io::BufReader::with_capacity(1024 * 1024, r),
            whole: StreamHasher::new(),
            buf: vec![0u8; 1024 * 1024],
            pos: 0,
        }
    }

    /// Reads the next `n` bytes into the whole-chunk hash and, when given, into `h` and
    /// `keep` too.
    fn feed(
        &mut self,
        n: u64,
        mut h: Option<&mut StreamHasher>,
        mut keep: Option<&mut Vec<u8>>,
    ) -> std::io::Result<()> {
        let mut left = n;
        while left > 0 {
            let want = left.min(self.buf.len() as u64) as usize;
            let piece = &mut self.buf[..want];
            self.r.read_exact(piece)?;
            self.whole.update(piece);
            if let Some(h) = h.as_deref_mut() {
                h.update(piece);
            }
            if let Some(k) = keep.as_deref_mut() {
                k.extend_from_slice(piece);
            }
            left -= want as u64;
            self.pos += want as u64;
        }
        Ok(())
    }
}
