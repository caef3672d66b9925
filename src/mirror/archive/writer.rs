//! Writing an archive: every blob placed before the first byte moves, each blob's bytes written
//! once, straight into its place in its chunk, hashed as written (the shared
//! [`crate::oci::checkpointed`] write, as a disk mirror writes its blobs); the small files of the
//! layout and the manifest when it is sealed.
//!
//! Until it is sealed an archive lives in `DIR/.staging/`: the chunks being filled
//! (`.chunks/`), the plan (`.archive/plan.json`, which blob goes where), the checkpoints of blobs
//! being written (`.archive/HEX.checkpoint`) and the blobs done (`.archive/done`, one digest per
//! line, appended once a blob is synced and matched its digest). A rerun with the same plan
//! continues from there; a different plan starts the chunks over. Sealing reads every chunk
//! back, moves the chunks into `DIR` and writes `manifest.json` and `SHA256SUMS`;
//! [`ArchiveWriter::finish`] then removes the staging directory.

use super::tarfmt::{self, Slot};
use super::{
    chunk_name, ArchiveBlob, ArchiveChunk, ArchiveFile, ArchiveImage, ArchiveManifest, BaseBlob,
    BaseRef, KIND, MANIFEST_FILE, MANIFEST_VERSION, STAGING_DIR, SUMS_FILE,
};
use crate::oci::checkpointed::CheckpointedWrite;
use crate::oci::digest::Digest;
use crate::oci::layout::OciLayout;
use crate::oci::stream::{ByteStream, OnBytes};
use crate::openshift::record::ConfigInfo;
use anyhow::{bail, Context, Result};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Content an earlier archive (or a registry mirror's record) already carried.
#[derive(Clone, Debug, Default)]
pub struct Base {
    /// What it is, for the manifest.
    pub reference: Option<BaseRef>,
    /// Every blob (and manifest) it carried, with its size.
    pub blobs: HashMap<Digest, u64>,
    /// The top manifests of its images: an image whose top manifest is here is not carried
    /// again.
    pub images: HashSet<Digest>,
    /// The repositories (under the destination's prefix) its images were pushed to.
    pub repositories: std::collections::BTreeSet<String>,
}

impl Base {
    /// Reads `--since`: an archive's `manifest.json` or a mirror record.
    pub fn load(path: &Path) -> Result<Base> {
        let text = crate::bounded::read_regular_to_string(path, crate::bounded::LAYOUT_FILE_MAX)
            .with_context(|| format!("--since {}", path.display()))?;
        let sha256 = Digest::of(text.as_bytes()).hex().to_string();
        let probe: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "--since {}:{}:{}: not JSON ({e}); name an archive's manifest.json or a mirror record",
                path.display(),
                e.line(),
                e.column()
            )
        })?;
        let mut base = Base::default();
        let kind = if probe.get("kind").is_some() {
            let m = ArchiveManifest::parse(path, &text)?;
            base.blobs
                .extend(m.blobs.iter().map(|b| (b.digest.clone(), b.size)));
            base.blobs
                .extend(m.base_blobs.iter().map(|b| (b.digest.clone(), b.size)));
            base.images
                .extend(m.images.iter().map(|i| i.digest.clone()));
            base.repositories
                .extend(m.images.iter().map(|i| i.repository.clone()));
            base.repositories
                .extend(m.base_repositories.iter().cloned());
            "archive"
        } else {
            let r = crate::openshift::record::MirrorRecord::parse(path, &text)?;
            base.blobs
                .extend(r.blobs.iter().map(|b| (b.digest.clone(), b.size)));
            for img in &r.images {
                base.images.insert(img.digest.clone());
                base.repositories.insert(img.path.clone());
            }
            "record"
        };
        base.reference = Some(BaseRef {
            path: path.display().to_string(),
            sha256,
            kind: kind.to_string(),
        });
        Ok(base)
    }
}

#[derive(serde::Serialize, serde::Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
struct Plan {
    archive_size: u64,
    blobs: Vec<(Digest, u64)>,
    base: Option<String>,
}

/// An archive being written.
pub struct ArchiveWriter {
    dir: PathBuf,
    staging: PathBuf,
    limit: u64,
    slots: HashMap<Digest, Slot>,
    order: Vec<Digest>,
    chunk_sizes: Vec<u64>,
    base: Base,
    always: HashSet<Digest>,
    base_used: Mutex<BTreeMap<Digest, u64>>,
    done: Mutex<(HashSet<Digest>, Option<fs_err::File>)>,
    _lock: fs_err::File,
}

impl std::fmt::Debug for ArchiveWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArchiveWriter")
            .field("dir", &self.dir)
            .finish()
    }
}

/// What sealing left behind.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Sealed {
    /// The archive's directory.
    pub dir: String,
    /// `DIR/manifest.json`.
    pub manifest: String,
    /// Chunks written.
    pub chunks: usize,
    /// Their total size.
    pub bytes: u64,
    /// Blobs carried.
    pub blobs: usize,
    /// For a delta: what it adds to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base: Option<BaseRef>,
    /// The chunk holding the layout's small files (the mirror record, the status).
    pub metadata_chunk: String,
}

/// Checks that `dir` can receive a new archive (or holds an unfinished one to continue).
pub fn check_target(dir: &Path) -> Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    if !dir.is_dir() {
        bail!("archive destination {} is not a directory", dir.display());
    }
    if dir.join(STAGING_DIR).is_dir() {
        return Ok(());
    }
    if dir.join(MANIFEST_FILE).exists() {
        bail!(
            "{} already holds a sealed archive; write a new archive to another directory (with --since {}/{MANIFEST_FILE} it carries only what is new)",
            dir.display(),
            dir.display()
        );
    }
    if let Some(entry) = fs_err::read_dir(dir)?.next() {
        bail!(
            "archive destination {} is not empty (it holds {}); name an empty or new directory",
            dir.display(),
            entry?.file_name().to_string_lossy()
        );
    }
    Ok(())
}

/// The staging directory of an archive at `dir`: the layout its small files are written into.
pub fn staging_dir(dir: &Path) -> PathBuf {
    dir.join(STAGING_DIR)
}

impl ArchiveWriter {
    /// Opens (or continues) the archive at `dir`, placing `blobs` (in order) into chunks of at
    /// most `limit` bytes; blobs `base` carried are left out.
    /// `manifests` are always carried (a delta's images are pushed from their manifests),
    /// after the blobs.
    pub fn open(
        dir: &Path,
        limit: u64,
        blobs: Vec<(Digest, u64)>,
        manifests: Vec<(Digest, u64)>,
        base: Base,
    ) -> Result<Self> {
        let staging = staging_dir(dir);
        let state = staging.join(".archive");
        let chunks_dir = staging.join(".chunks");
        fs_err::create_dir_all(&state)?;
        fs_err::create_dir_all(&chunks_dir)?;
        // Held until the writer is dropped: a second run on the same archive stops here,
        // before it touches anything.
        let lock = take_lock(&state.join("lock"), dir)?;
        let always: HashSet<Digest> = manifests.iter().map(|(d, _)| d.clone()).collect();
        let blobs = carried_blobs(blobs, manifests, &base, &always);
        let plan = Plan {
            archive_size: limit,
            blobs: blobs.clone(),
            base: base.reference.as_ref().map(|b| b.sha256.clone()),
        };
        adopt_plan(dir, &staging, &plan)?;
        let sizes: Vec<u64> = blobs.iter().map(|(_, s)| *s).collect();
        let (slots, chunk_sizes) = tarfmt::place(&sizes, limit, 1)?;
        let order: Vec<Digest> = blobs.into_iter().map(|(d, _)| d).collect();
        let slots: HashMap<Digest, Slot> = order.iter().cloned().zip(slots).collect();
        let chunks = StagedChunks {
            dir,
            staging: &staging,
            order: &order,
            slots: &slots,
            sizes: &chunk_sizes,
        };
        let done = chunks.done_in_place()?;
        chunks.lay_out_missing()?;
        let done_file = open_done_file(&state.join("done"))?;
        Ok(ArchiveWriter {
            dir: dir.to_path_buf(),
            staging,
            limit,
            slots,
            order,
            chunk_sizes,
            base,
            always,
            base_used: Mutex::new(BTreeMap::new()),
            done: Mutex::new((done, Some(done_file))),
            _lock: lock,
        })
    }

    /// The archive's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether this archive places `digest` in a chunk.
    pub fn places(&self, digest: &Digest) -> bool {
        self.slots.contains_key(digest)
    }

    /// The size of `digest` when it is already in place (or the base carried it).
    pub fn has(&self, digest: &Digest) -> Option<u64> {
        if let Some(size) = self
            .base
            .blobs
            .get(digest)
            .filter(|_| !self.always.contains(digest))
        {
            self.base_used
                .lock()
                .expect("base set poisoned")
                .insert(digest.clone(), *size);
            return Some(*size);
        }
        let done = self.done.lock().expect("done set poisoned");
        done.0
            .contains(digest)
            .then(|| self.slots.get(digest).map(|s| s.size))
            .flatten()
    }

    /// Where a blob in place lies: its chunk (still in the staging directory), offset, size.
    pub fn location(&self, digest: &Digest) -> Option<(PathBuf, u64, u64)> {
        self.slots.get(digest).map(|s| {
            (
                self.staging.join(".chunks").join(chunk_name(s.chunk)),
                s.offset,
                s.size,
            )
        })
    }

    /// Whether the base carried the image whose top manifest is `digest`.
    pub fn base_has_image(&self, digest: &Digest) -> bool {
        self.base.images.contains(digest)
    }

    /// Writes a placed blob into its slot through the shared [`CheckpointedWrite`]: hashed as
    /// written, checkpointed, synced, and recorded as done only once it matched. A retry or a
    /// rerun continues from the blob's last checkpoint (its place is fixed; nothing of it counts
    /// until it matched).
    pub async fn write_blob<F, Fut>(
        &self,
        digest: &Digest,
        size: u64,
        open: F,
        on_bytes: OnBytes,
    ) -> Result<()>
    where
        F: FnOnce(u64) -> Fut,
        Fut: std::future::Future<Output = Result<ByteStream>>,
    {
        let slot = self.slots.get(digest).context("blob not placed")?;
        if slot.size != size {
            bail!(
                "blob {digest} is {size} bytes now, the archive's plan says {}: the source changed during the run; run the same command again to plan anew",
                slot.size
            );
        }
        let place = self.place(digest, slot);
        place.write(digest, size, open, on_bytes).await?;
        self.record_done(digest)?;
        place.finished().await;
        Ok(())
    }

    /// Counts a blob that matched its digest as in place: a synced line in the done file, so a
    /// rerun never writes it again.
    fn record_done(&self, digest: &Digest) -> Result<()> {
        let mut done = self.done.lock().expect("done set poisoned");
        if let Some(f) = done.1.as_mut() {
            writeln!(f, "{digest}").and_then(|()| f.sync_data())?;
        }
        done.0.insert(digest.clone());
        Ok(())
    }

    /// The shared checkpointed write of a blob into its slot of its chunk (still in the
    /// staging directory), its checkpoint under `.archive/`.
    fn place(&self, digest: &Digest, slot: &Slot) -> CheckpointedWrite {
        CheckpointedWrite::in_place(
            self.staging.join(".chunks").join(chunk_name(slot.chunk)),
            slot.offset,
            self.checkpoint_path(digest),
        )
    }

    fn checkpoint_path(&self, digest: &Digest) -> PathBuf {
        self.staging
            .join(".archive")
            .join(format!("{}.checkpoint", digest.hex()))
    }

    /// Bytes of a blob a write would resume from (0 when none were checkpointed).
    pub fn partial_len(&self, digest: &Digest, size: u64) -> u64 {
        self.slots
            .get(digest)
            .map_or(0, |slot| self.place(digest, slot).resumable_len(size))
    }

    /// Blobs placed but not yet in place.
    pub fn missing(&self) -> Vec<Digest> {
        let done = self.done.lock().expect("done set poisoned");
        self.order
            .iter()
            .filter(|d| !done.0.contains(*d))
            .cloned()
            .collect()
    }

    /// Seals the archive: the layout's small files (from `layout`, the staging layout) into a
    /// last chunk, every chunk read back and hashed, the chunks moved into place, then
    /// `manifest.json` and `SHA256SUMS`. The staging directory is removed by
    /// [`ArchiveWriter::finish`].
    pub async fn seal(
        &self,
        layout: &OciLayout,
        source: &str,
        config: Option<ConfigInfo>,
    ) -> Result<(ArchiveManifest, Sealed)> {
        self.check_complete()?;
        let files = self.small_files(layout)?;
        let meta_n = self.chunk_sizes.len() + 1;
        let meta_slots = self.write_metadata_chunk(meta_n, &files)?;
        let chunks = self.read_back(meta_n).await?;
        let (blobs, small) = self.contents(&files, &meta_slots, &chunk_name(meta_n));
        let carried: HashSet<&Digest> = blobs.iter().map(|b| &b.digest).collect();
        let images = self.images(layout, &carried)?;
        let base_blobs = self.base_blobs_used(&carried);
        let manifest = ArchiveManifest {
            manifest_version: MANIFEST_VERSION,
            kind: KIND.to_string(),
            tool: format!("bootstrap {}", env!("CARGO_PKG_VERSION")),
            created: crate::openshift::record::now_rfc3339(),
            source: source.to_string(),
            config,
            base: self.base.reference.clone(),
            base_repositories: if self.base.reference.is_some() {
                self.base.repositories.iter().cloned().collect()
            } else {
                Vec::new()
            },
            archive_size: self.limit,
            images,
            blobs,
            base_blobs,
            files: small,
            chunks,
        };
        let manifest_path = self.publish(&manifest)?;
        let sealed = Sealed {
            dir: self.dir.display().to_string(),
            manifest: manifest_path.display().to_string(),
            chunks: manifest.chunks.len(),
            bytes: manifest.chunks.iter().map(|c| c.size).sum(),
            blobs: manifest.blobs.len(),
            base: manifest.base.clone(),
            metadata_chunk: chunk_name(meta_n),
        };
        Ok((manifest, sealed))
    }

    /// Refuses to seal before every placed blob is in place.
    fn check_complete(&self) -> Result<()> {
        let missing = self.missing();
        if !missing.is_empty() {
            bail!(
                "the archive is not complete: {} blobs are not in place yet (first {}); run the same command again",
                missing.len(),
                missing[0]
            );
        }
        Ok(())
    }

    /// The small files: every file of the staging layout (manifests written as files are
    /// blobs too), and last `SHA256SUMS` over the whole layout as extracting every chunk
    /// gives it.
    fn small_files(&self, layout: &OciLayout) -> Result<Vec<(String, Vec<u8>)>> {
        let mut files: Vec<(String, Vec<u8>)> = Vec::new();
        for rel in crate::openshift::record::layout_files(layout.root())? {
            let bytes = crate::bounded::read_regular(
                &layout.root().join(&rel),
                crate::bounded::LAYOUT_FILE_MAX,
            )?;
            files.push((rel, bytes));
        }
        let mut sums: Vec<(String, String)> = self
            .order
            .iter()
            .map(|d| (blob_path(d), d.hex().to_string()))
            .collect();
        sums.extend(
            files
                .iter()
                .map(|(rel, b)| (rel.clone(), Digest::of(b).hex().to_string())),
        );
        sums.sort();
        let sums_text: String = sums.iter().map(|(p, h)| format!("{h}  {p}\n")).collect();
        files.push((SUMS_FILE.to_string(), sums_text.into_bytes()));
        Ok(files)
    }

    /// Writes `files` as chunk `n`, a plain tar, synced; returns where each lies in it.
    fn write_metadata_chunk(&self, n: usize, files: &[(String, Vec<u8>)]) -> Result<Vec<Slot>> {
        let sizes: Vec<u64> = files.iter().map(|(_, b)| b.len() as u64).collect();
        let (slots, _) = tarfmt::place(&sizes, u64::MAX, n)?;
        let path = self.staging.join(".chunks").join(chunk_name(n));
        let mut f = std::io::BufWriter::new(fs_err::File::create(&path)?);
        for (rel, bytes) in files {
            f.write_all(&tarfmt::header(rel, bytes.len() as u64)?)?;
            f.write_all(bytes)?;
            let pad = tarfmt::padded(bytes.len() as u64) - bytes.len() as u64;
            f.write_all(&vec![0u8; pad as usize])?;
        }
        f.write_all(&[0u8; tarfmt::END as usize])?;
        let f = f.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        Ok(slots)
    }

    /// Every chunk up to `last` read back once as it lies on disk (a read, not a second
    /// write): its sha256, and every blob in it checked against its digest, so nothing that
    /// did not reach the disk whole is sealed. What did not is forgotten, to be fetched again
    /// by the rerun the error asks for.
    async fn read_back(&self, last: usize) -> Result<Vec<ArchiveChunk>> {
        let mut chunks = Vec::new();
        let mut bad = Vec::new();
        for n in 1..=last {
            let name = chunk_name(n);
            let path = self.staging.join(".chunks").join(&name);
            let size = fs_err::metadata(&path)?.len();
            let entries = self.entries_of(n);
            let label = name.clone();
            let found = tokio::task::spawn_blocking(move || {
                super::verify::check_chunk(&path, &label, size, "", &entries)
            })
            .await?;
            bad.extend(found.corrupt.iter().cloned());
            let sha256 = found
                .sha256
                .with_context(|| format!("{name} could not be read back"))?;
            chunks.push(ArchiveChunk { name, size, sha256 });
        }
        if !bad.is_empty() {
            self.forget_bad(&bad)?;
            bail!(
                "the archive was not sealed: reading the chunks back found {} problems:\n  {}\nrun the same command again: those blobs are fetched again",
                bad.len(),
                bad.join("\n  ")
            );
        }
        Ok(chunks)
    }

    /// The blobs placed in chunk `n`, as the chunk check reads them.
    fn entries_of(&self, n: usize) -> Vec<super::verify::Entry> {
        self.order
            .iter()
            .filter(|d| self.slots[*d].chunk == n)
            .map(|d| super::verify::Entry {
                what: format!("blob {d}"),
                name: blob_path(d),
                offset: self.slots[d].offset,
                size: self.slots[d].size,
                expect: super::verify::Expect::Digest(d.clone()),
            })
            .collect()
    }

    /// What the manifest lists: every placed blob, then the metadata chunk's files (those
    /// named `blobs/sha256/HEX` that hash to HEX are blobs too; the rest are files).
    fn contents(
        &self,
        files: &[(String, Vec<u8>)],
        meta_slots: &[Slot],
        meta_name: &str,
    ) -> (Vec<ArchiveBlob>, Vec<ArchiveFile>) {
        let mut blobs: Vec<ArchiveBlob> = self
            .order
            .iter()
            .map(|d| {
                let s = &self.slots[d];
                ArchiveBlob {
                    digest: d.clone(),
                    size: s.size,
                    chunk: chunk_name(s.chunk),
                    offset: s.offset,
                }
            })
            .collect();
        let mut small = Vec::new();
        for ((rel, bytes), slot) in files.iter().zip(meta_slots) {
            let digest = Digest::of(bytes);
            let is_blob = rel
                .strip_prefix("blobs/sha256/")
                .is_some_and(|h| h == digest.hex());
            if is_blob {
                blobs.push(ArchiveBlob {
                    digest,
                    size: slot.size,
                    chunk: meta_name.to_string(),
                    offset: slot.offset,
                });
            } else {
                small.push(ArchiveFile {
                    path: rel.clone(),
                    size: slot.size,
                    sha256: digest.hex().to_string(),
                    chunk: meta_name.to_string(),
                    offset: slot.offset,
                });
            }
        }
        (blobs, small)
    }

    /// The images the staging layout's index names, each refused unless its manifest is
    /// `carried` or the base carried it.
    fn images(&self, layout: &OciLayout, carried: &HashSet<&Digest>) -> Result<Vec<ArchiveImage>> {
        let media_types: HashMap<Digest, String> = layout
            .index()?
            .into_iter()
            .map(|e| (e.digest, e.media_type))
            .collect();
        let images: Vec<ArchiveImage> = crate::mirror::recorded::layout_images(layout)?
            .into_iter()
            .map(|i| ArchiveImage {
                repository: i
                    .placement
                    .repository
                    .clone()
                    .unwrap_or_else(|| i.source.repository.clone()),
                media_type: media_types.get(&i.digest).cloned().unwrap_or_default(),
                name: i.name,
                digest: i.digest,
            })
            .collect();
        let stray: Vec<&ArchiveImage> = images
            .iter()
            .filter(|i| !carried.contains(&i.digest) && !self.base.blobs.contains_key(&i.digest))
            .collect();
        if !stray.is_empty() {
            bail!(
                "the archive was not sealed: index.json names {} images whose manifests it does not carry (first {}); run the same command again",
                stray.len(),
                stray[0].name
            );
        }
        Ok(images)
    }

    /// The base's blobs this archive's images used and do not carry themselves.
    fn base_blobs_used(&self, carried: &HashSet<&Digest>) -> Vec<BaseBlob> {
        self.base_used
            .lock()
            .expect("base set poisoned")
            .iter()
            .filter(|(d, _)| !carried.contains(d))
            .map(|(d, s)| BaseBlob {
                digest: d.clone(),
                size: *s,
            })
            .collect()
    }

    /// Makes the archive whole in its directory: the chunks moved in, then `manifest.json`,
    /// then `SHA256SUMS` (of the chunks and the manifest). Returns the manifest's path.
    fn publish(&self, manifest: &ArchiveManifest) -> Result<PathBuf> {
        let chunks_dir = self.staging.join(".chunks");
        for c in &manifest.chunks {
            fs_err::rename(chunks_dir.join(&c.name), self.dir.join(&c.name))?;
        }
        let manifest_bytes = crate::fs::json_bytes(Path::new(MANIFEST_FILE), manifest)?;
        let manifest_path = self.dir.join(MANIFEST_FILE);
        crate::fs::write_atomic(&manifest_path, &manifest_bytes)?;
        let mut top_sums: String = manifest
            .chunks
            .iter()
            .map(|c| format!("{}  {}\n", c.sha256, c.name))
            .collect();
        top_sums.push_str(&format!(
            "{}  {MANIFEST_FILE}\n",
            Digest::of(&manifest_bytes).hex()
        ));
        crate::fs::write_atomic(&self.dir.join(SUMS_FILE), top_sums.as_bytes())?;
        Ok(manifest_path)
    }

    /// Takes the blobs named in `problems` out of the done set (and its file).
    fn forget_bad(&self, problems: &[String]) -> Result<()> {
        let mut done = self.done.lock().expect("done set poisoned");
        done.0
            .retain(|d| !problems.iter().any(|p| p.contains(&d.to_string())));
        let text: String = self
            .order
            .iter()
            .filter(|d| done.0.contains(*d))
            .map(|d| format!("{d}\n"))
            .collect();
        crate::fs::write_atomic(&self.staging.join(".archive/done"), text.as_bytes())?;
        // Appends go to the new file from now on.
        done.1 = Some(
            fs_err::OpenOptions::new()
                .append(true)
                .open(self.staging.join(".archive/done"))?,
        );
        Ok(())
    }

    /// Removes the staging directory once the archive is sealed (and signed).
    pub fn finish(&self) -> Result<()> {
        self.done.lock().expect("done set poisoned").1 = None;
        fs_err::remove_dir_all(&self.staging)?;
        Ok(())
    }
}

/// The blobs an archive carries, in order: `blobs` but those `base` carried, then
/// `manifests` (always carried), each once.
fn carried_blobs(
    blobs: Vec<(Digest, u64)>,
    manifests: Vec<(Digest, u64)>,
    base: &Base,
    always: &HashSet<Digest>,
) -> Vec<(Digest, u64)> {
    let mut seen = HashSet::new();
    blobs
        .into_iter()
        .filter(|(d, _)| !base.blobs.contains_key(d) || always.contains(d))
        .chain(manifests)
        .filter(|(d, _)| seen.insert(d.clone()))
        .collect()
}

/// Keeps what was written for `plan` when the staging directory was written for the same
/// plan; otherwise starts over and saves `plan`.
fn adopt_plan(dir: &Path, staging: &Path, plan: &Plan) -> Result<()> {
    let plan_path = staging.join(".archive/plan.json");
    let same = fs_err::read(&plan_path)
        .ok()
        .and_then(|b| serde_json::from_slice::<Plan>(&b).ok())
        .is_some_and(|p| &p == plan);
    if !same {
        // A different plan: nothing written for the old one may survive (its chunks, the
        // blobs it counted done, the layout files it wrote, what an interrupted seal left
        // in DIR).
        reset(dir, staging)?;
        crate::fs::write_atomic(&plan_path, &serde_json::to_vec(plan)?)?;
    }
    Ok(())
}

/// The done file opened for appending; a line torn by a kill mid-append is ended first, so
/// the next digest starts its own.
fn open_done_file(path: &Path) -> Result<fs_err::File> {
    let torn = fs_err::read(path).is_ok_and(|b| !b.is_empty() && !b.ends_with(b"\n"));
    let mut file = fs_err::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    if torn {
        file.write_all(b"\n")?;
    }
    Ok(file)
}

/// The chunks of a plan in the staging directory, as [`ArchiveWriter::open`] finds them.
struct StagedChunks<'a> {
    dir: &'a Path,
    staging: &'a Path,
    order: &'a [Digest],
    slots: &'a HashMap<Digest, Slot>,
    sizes: &'a [u64],
}

impl StagedChunks<'_> {
    fn path(&self, n: usize) -> PathBuf {
        self.staging.join(".chunks").join(chunk_name(n))
    }

    /// Whether chunk `n` is on disk at its planned size (laid out, whatever is in it yet).
    fn fits(&self, n: usize) -> bool {
        fs_err::metadata(self.path(n)).is_ok_and(|m| m.is_file() && m.len() == self.sizes[n - 1])
    }

    fn blobs_in(&self, n: usize) -> impl Iterator<Item = &Digest> {
        self.order.iter().filter(move |d| self.slots[*d].chunk == n)
    }

    /// The blobs the done file counts that are still in place: a chunk an interrupted seal
    /// had moved into DIR is taken back first; a blob of a chunk that is missing or the wrong
    /// size is forgotten with its checkpoint. The done file is rewritten to say exactly that
    /// before any chunk is laid out again, so a blob of a rebuilt chunk is never taken for
    /// written.
    fn done_in_place(&self) -> Result<HashSet<Digest>> {
        let done_path = self.staging.join(".archive/done");
        let mut done: HashSet<Digest> = match fs_err::read_to_string(&done_path) {
            Ok(text) => text
                .lines()
                .filter_map(|l| l.parse().ok())
                .filter(|d| self.slots.contains_key(d))
                .collect(),
            Err(_) => HashSet::new(),
        };
        let before = done.len();
        for n in 1..=self.sizes.len() {
            let path = self.path(n);
            let sealed_copy = self.dir.join(chunk_name(n));
            if !path.exists() && sealed_copy.is_file() {
                // Killed while sealing (same plan): the chunk was already moved out.
                fs_err::rename(&sealed_copy, &path)?;
            }
            if !self.fits(n) {
                done.retain(|d| self.slots[d].chunk != n);
                for d in self.blobs_in(n) {
                    let checkpoint = format!(".archive/{}.checkpoint", d.hex());
                    let _ = fs_err::remove_file(self.staging.join(checkpoint));
                }
            }
        }
        if done.len() != before || !done_path.exists() {
            let text: String = self
                .order
                .iter()
                .filter(|d| done.contains(*d))
                .map(|d| format!("{d}\n"))
                .collect();
            crate::fs::write_atomic(&done_path, text.as_bytes())?;
        }
        Ok(done)
    }

    /// Lays out every chunk that is not on disk at its planned size.
    fn lay_out_missing(&self) -> Result<()> {
        for n in 1..=self.sizes.len() {
            if !self.fits(n) {
                self.lay_out(n)?;
            }
        }
        Ok(())
    }

    /// Creates chunk `n` at its full size with every header and the end blocks in place.
    fn lay_out(&self, n: usize) -> Result<()> {
        use std::io::{Seek, SeekFrom};
        // Laid out aside and renamed into place once synced: a chunk of the right size always
        // has every header.
        let path = self.path(n);
        let part = path.with_extension("tar.part");
        let mut f = fs_err::File::create(&part)?;
        f.set_len(self.sizes[n - 1])?;
        for d in self.blobs_in(n) {
            let slot = &self.slots[d];
            f.seek(SeekFrom::Start(slot.offset - tarfmt::BLOCK))?;
            f.write_all(&tarfmt::header(&blob_path(d), slot.size)?)?;
        }
        f.sync_all()?;
        drop(f);
        fs_err::rename(&part, path)?;
        Ok(())
    }
}

/// Takes the archive's lock (an exclusive `flock`), naming the archive when another run holds it.
fn take_lock(path: &Path, dir: &Path) -> Result<fs_err::File> {
    match crate::fs::try_lock(path)? {
        Some(file) => Ok(file),
        None => bail!(
            "archive {} is being written by another bootstrap run (it holds {}); wait for it to finish",
            dir.display(),
            path.display()
        ),
    }
}

/// Forgets everything an earlier plan wrote: the staging chunks, the blobs done, the staging
/// layout's files (its index, record, status, manifests), and what an interrupted seal had
/// already put into `dir`. The lock and the working directory stay.
fn reset(dir: &Path, staging: &Path) -> Result<()> {
    for entry in fs_err::read_dir(staging.join(".chunks"))? {
        fs_err::remove_file(entry?.path())?;
    }
    let _ = fs_err::remove_file(staging.join(".archive/done"));
    for entry in fs_err::read_dir(staging.join(".archive"))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "checkpoint") {
            fs_err::remove_file(path)?;
        }
    }
    for entry in fs_err::read_dir(staging)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        if entry.file_type()?.is_dir() {
            fs_err::remove_dir_all(entry.path())?;
        } else {
            fs_err::remove_file(entry.path())?;
        }
    }
    for entry in fs_err::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let sealed = super::is_chunk_name(&name)
            || name == MANIFEST_FILE
            || name == SUMS_FILE
            || name == format!("{MANIFEST_FILE}.sig")
            || name == format!("{SUMS_FILE}.sig");
        if sealed {
            fs_err::remove_file(entry.path())?;
        }
    }
    Ok(())
}

/// A blob's path in a layout (and in a chunk).
pub fn blob_path(digest: &Digest) -> String {
    format!("blobs/sha256/{}", digest.hex())
}
