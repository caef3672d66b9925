//! `bootstrap archive create --from file://LAYOUT archive://DIR`: cuts a disk mirror into an
//! archive. Every blob file is copied into its place in its chunk, verified against its name
//! as it is read; the layout's small files go into the last chunk.

use super::writer::{ArchiveWriter, Base, Sealed};
use super::ArchiveManifest;
use crate::oci::digest::Digest;
use crate::oci::layout::OciLayout;
use crate::openshift::record::{ConfigInfo, MirrorRecord, RECORD_FILE};
use anyhow::{bail, Context, Result};
use futures_util::StreamExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What `archive create` is asked.
#[derive(Clone, Debug)]
pub struct CreateSettings {
    /// The disk mirror to cut.
    pub layout: PathBuf,
    /// The archive directory to write.
    pub dir: PathBuf,
    /// The most bytes a chunk may hold.
    pub archive_size: u64,
    /// Blobs written at a time.
    pub concurrency: usize,
    /// The OpenSSH key that signs manifest.json.
    pub sign_key: Option<PathBuf>,
}

/// Cuts the layout into an archive; continues an unfinished one.
pub async fn create(
    settings: &CreateSettings,
) -> Result<(ArchiveManifest, Sealed, Option<crate::sshsig::Signed>)> {
    let source = OciLayout::open(&settings.layout)?;
    let config = recorded_config(&source, &settings.layout)?;
    super::writer::check_target(&settings.dir)?;
    let blobs = layout_blobs(&source)?;
    let writer = Arc::new(ArchiveWriter::open(
        &settings.dir,
        settings.archive_size,
        blobs.clone(),
        Vec::new(),
        Base::default(),
    )?);
    // The small files: every top-level file and folder of the layout but its blobs.
    let small = super::writer::staging_dir(&settings.dir).join("layout");
    copy_small_files(source.root(), &small)?;
    copy_blobs(&writer, &source, blobs, settings.concurrency).await?;
    let layout = OciLayout::open(&small)?;
    let label = format!("file://{}", settings.layout.display());
    let (manifest, sealed) = writer.seal(&layout, &label, config).await?;
    let signed = match &settings.sign_key {
        Some(key) => Some(sign(key, &sealed)?),
        None => None,
    };
    writer.finish()?;
    Ok((manifest, sealed, signed))
}

/// The configuration the disk mirror's last run used, from its record; a layout without a
/// record is refused (only a disk mirror bootstrap wrote can be cut).
fn recorded_config(source: &OciLayout, layout: &Path) -> Result<Option<ConfigInfo>> {
    let record_path = source.root().join(RECORD_FILE);
    if !record_path.is_file() {
        bail!(
            "{} has no mirror record ({RECORD_FILE}): only a disk mirror bootstrap mirror wrote can be cut into an archive",
            layout.display()
        );
    }
    Ok(MirrorRecord::load(&record_path)?
        .runs
        .last()
        .and_then(|r| r.config.clone()))
}

/// Every blob of the layout with its size, largest first as a mirror places them (ties by
/// digest, so a rerun places the same); anything in `blobs/sha256/` that is not a regular
/// file named by its sha256 is refused.
fn layout_blobs(source: &OciLayout) -> Result<Vec<(Digest, u64)>> {
    let dir = source.root().join("blobs/sha256");
    let mut blobs = Vec::new();
    for entry in fs_err::read_dir(&dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let digest: Digest = format!("sha256:{name}").parse().with_context(|| {
            format!(
                "{}: '{name}' is not a sha256 blob name; a disk mirror holds only blobs there (remove the file, or mirror to disk again)",
                dir.display()
            )
        })?;
        let meta = fs_err::symlink_metadata(entry.path())?;
        if !meta.file_type().is_file() {
            bail!("{}: not a regular file", entry.path().display());
        }
        blobs.push((digest, meta.len()));
    }
    blobs.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ok(blobs)
}

/// Copies every blob not yet in place into its place in the archive, `concurrency` at a time,
/// each verified against its digest as it is read; names every blob that failed.
async fn copy_blobs(
    writer: &Arc<ArchiveWriter>,
    source: &OciLayout,
    blobs: Vec<(Digest, u64)>,
    concurrency: usize,
) -> Result<()> {
    let results: Vec<Result<()>> = futures_util::stream::iter(blobs)
        .map(|(digest, size)| {
            let writer = writer.clone();
            let path = source.blob_path(&digest);
            async move {
                if writer.has(&digest).is_some() {
                    return Ok(());
                }
                writer
                    .write_blob(
                        &digest,
                        size,
                        |offset| async move {
                            Ok(crate::oci::stream::file_stream(&path, offset, size).await?)
                        },
                        Arc::new(|_| {}),
                    )
                    .await
                    .with_context(|| format!("copying blob {digest} into the archive"))
            }
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    let errors: Vec<String> = results
        .into_iter()
        .filter_map(|r| r.err().map(|e| format!("{e:#}")))
        .collect();
    if !errors.is_empty() {
        bail!(
            "{} blobs could not be written (run the same command again to continue):\n  {}",
            errors.len(),
            errors.join("\n  ")
        );
    }
    Ok(())
}

/// Signs `SHA256SUMS`, then `manifest.json`, of a sealed archive with `key`.
fn sign(key: &Path, sealed: &Sealed) -> Result<crate::sshsig::Signed> {
    let manifest = Path::new(&sealed.manifest);
    let sums = manifest.with_file_name(super::SUMS_FILE);
    crate::sshsig::sign_file(key, &sums).with_context(|| format!("signing {}", sums.display()))?;
    crate::sshsig::sign_file(key, manifest).with_context(|| format!("signing {}", sealed.manifest))
}

fn copy_small_files(from: &Path, to: &Path) -> Result<()> {
    fn walk(from: &Path, to: &Path, top: bool) -> Result<()> {
        fs_err::create_dir_all(to)?;
        for entry in fs_err::read_dir(from)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if top && (name == "blobs" || name.starts_with('.') || name == "SHA256SUMS") {
                continue;
            }
            let ty = entry.file_type()?;
            if ty.is_dir() {
                walk(&entry.path(), &to.join(&name), false)?;
            } else if ty.is_file() {
                let bytes =
                    crate::bounded::read_regular(&entry.path(), crate::bounded::LAYOUT_FILE_MAX)?;
                crate::fs::write_atomic(&to.join(&name), &bytes)?;
            }
        }
        Ok(())
    }
    walk(from, to, true)
}
