//! What a run leaves behind besides the content: the mirror record (inside a disk mirror,
//! merged with earlier runs' and covered by `SHA256SUMS`; beside the run for a registry) and,
//! for a registry, the cluster's side in `cluster-resources/`.

use super::plan::ResolvedImage;
use super::transfer::Destination;
use crate::oci::digest::Digest;
use crate::openshift::record::{self, MirrorRecord};
use crate::openshift::{cluster, release};
use crate::output::Progress;
use anyhow::Result;
use std::path::{Path, PathBuf};

/// For a registry destination, writes the cluster's mirror configuration into
/// `cluster-resources/` beside the record; returns the directory when anything was written.
pub(super) fn write_cluster_resources(
    dest: &Destination,
    mirrored: &[&ResolvedImage],
    record_path: &Path,
    signatures: Option<&Path>,
    progress: &Progress,
) -> Result<Option<PathBuf>> {
    let Destination::Registry { target, .. } = dest else {
        return Ok(None);
    };
    let images: Vec<cluster::MirroredImage> = mirrored
        .iter()
        .map(|img| cluster::MirroredImage {
            source: img.source.clone(),
            registry: target.registry.clone(),
            repository: target.repository_for(img.dest_path()),
            category: img.placement.category,
        })
        .collect();
    let dir = record_path
        .parent()
        .unwrap_or(Path::new("."))
        .join(cluster::DIR);
    let mut resources = cluster::ClusterResources::new(&images);
    for img in mirrored
        .iter()
        .filter(|i| i.placement.category == cluster::Category::Catalog)
    {
        let mut at = img
            .source
            .moved_to(&target.registry, &target.repository_for(img.dest_path()));
        at.tag = img.placement.tag.clone().or_else(|| img.source.tag.clone());
        at.digest = at.tag.is_none().then(|| img.root.digest.clone());
        resources.add_catalog(at);
    }
    if let Some(sig_dir) = signatures {
        for img in mirrored
            .iter()
            .filter(|i| i.placement.repository.as_deref() == Some(release::RELEASE_IMAGES_REPO))
        {
            let sigs = release_signatures(sig_dir, &img.root.digest)?;
            if sigs.is_empty() {
                progress.warn(format_args!(
                    "{} has no signature in {}: a cluster will not update to it without one",
                    img.source,
                    sig_dir.display()
                ));
            }
            resources.add_signatures(img.root.digest.clone(), sigs);
        }
    }
    let written = resources.write(&dir)?;
    Ok((!written.is_empty()).then_some(dir))
}

/// The signatures of release `digest` in `dir`: `sha256=<hex>/signature-<n>` (the signature
/// store's layout) or `sha256-<hex>-<n>`, for n = 1, 2, ... until one is missing.
fn release_signatures(dir: &Path, digest: &Digest) -> Result<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    for n in 1.. {
        let store = dir
            .join(format!("sha256={}", digest.hex()))
            .join(format!("signature-{n}"));
        let flat = dir.join(format!("{}-{n}", digest.dashed()));
        match [store, flat].into_iter().find(|p| p.is_file()) {
            Some(p) => out.push(fs_err::read(&p)?),
            None => break,
        }
    }
    Ok(out)
}

/// `YYYYMMDDTHHMMSSZ`, for default file names.
pub(super) fn file_stamp() -> String {
    time::OffsetDateTime::now_utc()
        .format(time::macros::format_description!(
            "[year][month][day]T[hour][minute][second]Z"
        ))
        .unwrap_or_default()
}

/// Writes the mirror record: inside a disk mirror (merged with the earlier runs' and with
/// `SHA256SUMS` renewed), or beside the run for a registry.
pub(super) fn write_record(
    dest: &Destination,
    rec: &mut MirrorRecord,
    path: Option<PathBuf>,
    stamp: &str,
) -> Result<PathBuf> {
    match dest {
        Destination::Layout(layout) => {
            let path = layout.root().join(record::RECORD_FILE);
            if path.is_file() {
                let earlier = MirrorRecord::load(&path)?;
                rec.merge_earlier(earlier);
            }
            rec.write(&path)?;
            record::write_sums(layout.root())?;
            Ok(path)
        }
        Destination::Registry { .. } => {
            let path = path.unwrap_or_else(|| PathBuf::from(format!("mirror-record-{stamp}.json")));
            rec.write(&path)?;
            Ok(path)
        }
    }
}
