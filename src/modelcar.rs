//! `bootstrap model pack`: a local model directory becomes an OCI "modelcar" image (the files
//! under `/models`, as KServe's modelcars expect), written into an OCI image layout that
//! `bootstrap mirror --from` pushes like any other image.
//!
//! Every file larger than the layer threshold gets a layer of its own, so a new model version
//! that changes one shard re-sends one shard; the small files share one layer. Layers are plain
//! tar (model weights do not compress), built deterministically (sorted paths, zero times and
//! owners), so the same directory always gives the same digests. Each file's sha256 is computed
//! on the way and recorded: in the layer's annotations, in the manifest's, and in the output.

use crate::oci::digest::{Digest, StreamHasher};
use crate::oci::layout::{IndexEntry, OciLayout, REF_NAME};
use crate::oci::reference::ImageRef;
use crate::oci::stream::ByteStream;
use crate::openshift::record::{
    now_rfc3339, write_sums, BlobRecord, ImageRecord, MirrorRecord, RunInfo, RECORD_FILE,
};
use crate::output::{human_bytes, Progress};
use anyhow::{bail, Context, Result};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Media type of the layers (uncompressed tar).
pub const LAYER_MEDIA_TYPE: &str = "application/vnd.oci.image.layer.v1.tar";
/// Annotation holding a layer's or file's sha256 list (`<hex>  <path>` lines, as sha256sum).
pub const SUMS_ANNOTATION: &str = "dev.bootstrap.model.sha256sums";
/// Where the files land inside the image.
pub const MODEL_ROOT: &str = "models";

/// One file of the model.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelFile {
    /// Path inside the image (`models/...`).
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// sha256 of the content.
    pub sha256: Digest,
}

/// One layer of the packed image.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PackedLayer {
    /// Layer digest.
    pub digest: Digest,
    /// Layer size.
    pub size: u64,
    /// The files it holds.
    pub files: Vec<ModelFile>,
}

/// What `model pack` made.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PackedModel {
    /// The image's name in the layout.
    pub reference: String,
    /// Its manifest digest.
    pub digest: Digest,
    /// The layout written.
    pub layout: String,
    /// Its layers in order.
    pub layers: Vec<PackedLayer>,
    /// Bytes of all layers.
    pub bytes: u64,
}

/// A `bootstrap model pack` run, resolved.
#[derive(Clone, Debug)]
pub struct PackSettings {
    /// The model's directory.
    pub dir: PathBuf,
    /// The image's name and tag (no digest: packing computes it).
    pub reference: ImageRef,
    /// The OCI layout to write into.
    pub layout: PathBuf,
    /// Files of at least this many bytes get a layer of their own.
    pub layer_threshold: u64,
}

/// Runs `bootstrap model pack`.
pub async fn pack(settings: PackSettings) -> Result<PackedModel> {
    let out = settings.layout.to_string_lossy().into_owned();
    pack_into_layout(
        &settings.dir,
        &settings.reference,
        &out,
        settings.layer_threshold,
    )
    .await
}

/// Packs the model directory `dir` as `reference` (tagged, no digest) into the OCI layout at
/// `out` (created when missing; other images kept); files of at least `threshold` bytes get
/// a layer each. `bootstrap-lab seed` packs its generated model with this, so the lab's
/// modelcar is exactly what `bootstrap model pack` makes.
pub async fn pack_into_layout(
    dir: &Path,
    reference: &ImageRef,
    out: &str,
    threshold: u64,
) -> Result<PackedModel> {
    let files = model_files(dir)?;
    let groups = layer_groups(&files, threshold);
    let layout = OciLayout::create(Path::new(out))?;
    let _lock = layout.lock()?;
    let progress = Progress::new("pack", files.iter().map(|(_, _, s)| s).sum());
    let mut layers = Vec::new();
    for group in groups {
        let bytes = group.iter().map(|(_, _, s)| s).sum();
        progress.println(&format!(
            "packing {} ({} files, {})",
            group[0].0,
            group.len(),
            human_bytes(bytes)
        ));
        layers.push(write_layer(&layout, dir, group).await?);
        progress.inc(bytes);
    }
    progress.finish();
    write_image(&layout, reference, layers, out).await
}

/// Regular files under `dir`, sorted, as (path inside the image, path on disk, size).
/// Symlinks and special files are refused: a modelcar carries content, not links.
fn model_files(dir: &Path) -> Result<Vec<(String, PathBuf, u64)>> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, PathBuf, u64)>) -> Result<()> {
        for entry in fs_err::read_dir(dir)? {
            let entry = entry?;
            let path = entry.path();
            let kind = entry.file_type()?;
            let rel = path
                .strip_prefix(root)
                .expect("walked path is under root")
                .to_string_lossy()
                .replace('\\', "/");
            if kind.is_dir() {
                walk(root, &path, out)?;
            } else if kind.is_file() {
                let size = entry.metadata()?.len();
                out.push((format!("{MODEL_ROOT}/{rel}"), path, size));
            } else {
                bail!(
                    "{} is a symlink or special file; a modelcar carries content only: copy the file in instead",
                    path.display()
                );
            }
        }
        Ok(())
    }
    if !dir.is_dir() {
        bail!(
            "{} is not a directory: name the model's directory",
            dir.display()
        );
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out)?;
    if out.is_empty() {
        bail!(
            "{} holds no files: there is no model to pack",
            dir.display()
        );
    }
    out.sort();
    Ok(out)
}

/// Files of at least `threshold` bytes get a layer each; the rest share the first layer.
fn layer_groups(
    files: &[(String, PathBuf, u64)],
    threshold: u64,
) -> Vec<Vec<(String, PathBuf, u64)>> {
    let (large, small): (Vec<_>, Vec<_>) =
        files.iter().cloned().partition(|(_, _, s)| *s >= threshold);
    let mut groups = Vec::new();
    if !small.is_empty() {
        groups.push(small);
    }
    groups.extend(large.into_iter().map(|f| vec![f]));
    groups
}

/// Builds one tar layer of `group` into the layout, streaming: a thread writes the tar into a
/// bounded channel while the layout hashes and stores it, and each file is hashed as read.
async fn write_layer(
    layout: &OciLayout,
    dir: &Path,
    group: Vec<(String, PathBuf, u64)>,
) -> Result<PackedLayer> {
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<Bytes>>(4);
    let builder = tokio::task::spawn_blocking(move || write_tar(group, tx));
    let body: ByteStream = Box::pin(futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (chunk, rx))
    }));
    let written = layout.write_new_blob(body).await;
    let files = builder
        .await
        .with_context(|| {
            format!(
                "packing files of {}: the layer builder task failed",
                dir.display()
            )
        })?
        .with_context(|| format!("packing files of {}", dir.display()))?;
    let (digest, size) = written?;
    Ok(PackedLayer {
        digest,
        size,
        files,
    })
}

/// Writes a deterministic tar of `group` to `tx`; returns each file's size and sha256.
fn write_tar(
    group: Vec<(String, PathBuf, u64)>,
    tx: tokio::sync::mpsc::Sender<std::io::Result<Bytes>>,
) -> Result<Vec<ModelFile>> {
    let mut tar = tar::Builder::new(ChannelWriter {
        tx: tx.clone(),
        buf: Vec::with_capacity(CHANNEL_CHUNK),
    });
    let mut files = Vec::new();
    for (inner, path, size) in group {
        let file = fs_err::File::open(&path)?;
        let mut header = tar::Header::new_ustar();
        header.set_size(size);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        header.set_entry_type(tar::EntryType::Regular);
        let mut reader = HashingReader {
            inner: file.take(size),
            hasher: StreamHasher::new(),
        };
        tar.append_data(&mut header, &inner, &mut reader)
            .with_context(|| format!("adding {} to the layer", path.display()))?;
        if reader.hasher.len() != size {
            bail!("{} changed size while it was packed", path.display());
        }
        let (sha256, _) = reader.hasher.finish();
        files.push(ModelFile {
            path: inner,
            size,
            sha256,
        });
    }
    let mut writer = tar.into_inner().context("finishing the layer")?;
    writer.flush().context("finishing the layer")?;
    Ok(files)
}

const CHANNEL_CHUNK: usize = 1024 * 1024;

/// A `Write` that hands 1 MiB pieces to the async side (blocking when it is behind).
struct ChannelWriter {
    tx: tokio::sync::mpsc::Sender<std::io::Result<Bytes>>,
    buf: Vec<u8>,
}

impl Write for ChannelWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHANNEL_CHUNK {
            self.flush()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let piece = Bytes::from(std::mem::replace(
            &mut self.buf,
            Vec::with_capacity(CHANNEL_CHUNK),
        ));
        self.tx
            .blocking_send(Ok(piece))
            .map_err(|_| std::io::Error::other("the layer writer stopped reading"))
    }
}

/// Hashes what passes through a reader.
struct HashingReader<R> {
    inner: R,
    hasher: StreamHasher,
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

fn sums(files: &[ModelFile]) -> String {
    files
        .iter()
        .map(|f| format!("{}  {}\n", f.sha256.hex(), f.path))
        .collect()
}

/// Writes the config, the manifest and the index entry named `reference`.
async fn write_image(
    layout: &OciLayout,
    reference: &ImageRef,
    layers: Vec<PackedLayer>,
    out: &str,
) -> Result<PackedModel> {
    let config = serde_json::json!({
        "architecture": "amd64",
        "os": "linux",
        "config": {},
        "rootfs": {
            "type": "layers",
            "diff_ids": layers.iter().map(|l| l.digest.to_string()).collect::<Vec<_>>(),
        },
    });
    let config_bytes = Bytes::from(serde_json::to_vec(&config)?);
    let config_digest = Digest::of(&config_bytes);
    layout
        .write_bytes(&config_digest, config_bytes.clone())
        .await?;
    let all_files: Vec<ModelFile> = layers.iter().flat_map(|l| l.files.clone()).collect();
    let layer_descs: Vec<serde_json::Value> = layers
        .iter()
        .map(|l| {
            let mut annotations = BTreeMap::new();
            annotations.insert(SUMS_ANNOTATION, sums(&l.files));
            if let [only] = l.files.as_slice() {
                annotations.insert("org.opencontainers.image.title", only.path.clone());
            }
            serde_json::json!({
                "mediaType": LAYER_MEDIA_TYPE,
                "digest": l.digest,
                "size": l.size,
                "annotations": annotations,
            })
        })
        .collect();
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": config_digest,
            "size": config_bytes.len(),
        },
        "layers": layer_descs,
        "annotations": { SUMS_ANNOTATION: sums(&all_files) },
    });
    let manifest_bytes = Bytes::from(serde_json::to_vec(&manifest)?);
    let digest = Digest::of(&manifest_bytes);
    layout.write_bytes(&digest, manifest_bytes.clone()).await?;
    let mut annotations = BTreeMap::new();
    annotations.insert(REF_NAME.to_string(), reference.to_string());
    layout.add_to_index(&[IndexEntry {
        media_type: "application/vnd.oci.image.manifest.v1+json".into(),
        digest: digest.clone(),
        size: manifest_bytes.len() as u64,
        annotations,
    }])?;
    let mut blobs = vec![BlobRecord {
        digest: config_digest,
        size: config_bytes.len() as u64,
    }];
    blobs.extend(layers.iter().map(|l| BlobRecord {
        digest: l.digest.clone(),
        size: l.size,
    }));
    let manifest = BlobRecord {
        digest: digest.clone(),
        size: manifest_bytes.len() as u64,
    };
    write_record(layout, reference, manifest, blobs)?;
    Ok(PackedModel {
        reference: reference.to_string(),
        digest,
        layout: format!("file://{out}"),
        bytes: layers.iter().map(|l| l.size).sum(),
        layers,
    })
}

/// Records the packed image in the layout's mirror record (added to the one already there)
/// and rewrites `SHA256SUMS`, as a mirror to disk does: `bootstrap mirror --from` checks the
/// layout against this record before it pushes, and `bootstrap verify` checks it too.
fn write_record(
    layout: &OciLayout,
    reference: &ImageRef,
    manifest: BlobRecord,
    blobs: Vec<BlobRecord>,
) -> Result<()> {
    let root = layout.root();
    let now = now_rfc3339();
    let image = ImageRecord {
        source: reference.to_string(),
        path: reference.repository.clone(),
        tag: None,
        category: None,
        destination: format!("oci:{}:{reference}", root.display()),
        digest: manifest.digest,
        source_digest: None,
        media_type: "application/vnd.oci.image.manifest.v1+json".into(),
        size: manifest.size,
        total_size: manifest.size + blobs.iter().map(|b| b.size).sum::<u64>(),
        platforms: vec!["linux/amd64".into()],
        platforms_dropped: Vec::new(),
        platform_filter: Vec::new(),
        manifests: Vec::new(),
        blobs: blobs.iter().map(|b| b.digest.clone()).collect(),
        attached_to: None,
    };
    let run = RunInfo {
        tool: format!("bootstrap {} (model pack)", env!("CARGO_PKG_VERSION")),
        config: None,
        source: "model pack".into(),
        destination: format!("file://{}", root.display()),
        started: now.clone(),
        finished: now,
        images: 1,
        bytes_transferred: 0,
    };
    let mut record = MirrorRecord::new(run, vec![image], blobs);
    let path = root.join(RECORD_FILE);
    if path.exists() {
        record.merge_earlier(MirrorRecord::load(&path)?);
    }
    record.write(&path)?;
    write_sums(root)
}

impl std::fmt::Display for PackedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for l in &self.layers {
            for file in &l.files {
                writeln!(f, "{}  {}", file.sha256.hex(), file.path)?;
            }
        }
        writeln!(
            f,
            "packed {} as {} ({} layers, {}) into {}",
            self.reference,
            self.digest,
            self.layers.len(),
            human_bytes(self.bytes),
            self.layout
        )?;
        let host = self.reference.split('/').next().unwrap_or_default();
        writeln!(
            f,
            "push it with: bootstrap mirror --from {} docker://{host}",
            self.layout
        )
    }
}
