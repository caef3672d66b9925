//! What a run leaves behind besides the content: the mirror record (inside a disk mirror,
//! merged with earlier runs' and covered by `SHA256SUMS`; beside the run for a registry) and,
//! for a registry, the cluster's side in `cluster-resources/`.

use super::plan::ResolvedImage;
use super::transfer::Destination;
use crate::oci::digest::Digest;
use crate::oci::layout::OciLayout;
use crate::oci::reference::{ImageRef, RegistryTarget};
use crate::openshift::record::{self, BlobRecord, MirrorRecord};
use crate::openshift::{cluster, release};
use crate::output::Progress;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// For a registry destination, writes the cluster's mirror configuration into
/// `cluster-resources/` beside the record (and the install-config snippet beside that), with
/// the time of writing as `createdAt`, as oc-mirror v2 stamps it; returns the directory when
/// anything was written.
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
    // Signatures and referrers live in their images' repositories: no mappings of their own.
    let mirrored: Vec<&ResolvedImage> = mirrored
        .iter()
        .copied()
        .filter(|i| i.attached.is_none())
        .collect();
    let images: Vec<cluster::MirroredImage> = mirrored
        .iter()
        .map(|img| cluster::MirroredImage {
            source: pulled_as(img),
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
    resources.set_created_at(created_at());
    add_catalogs(&mut resources, &mirrored, target);
    add_update_service(&mut resources, &mirrored, target, progress);
    if let Some(sig_dir) = signatures {
        add_release_signatures(&mut resources, &mirrored, sig_dir, progress)?;
    }
    let written = resources.write(&dir)?;
    Ok((!written.is_empty()).then_some(dir))
}

/// A CatalogSource for each catalog mirrored, by its tag at the destination (by digest when
/// it has none).
fn add_catalogs(
    resources: &mut cluster::ClusterResources,
    mirrored: &[&ResolvedImage],
    target: &RegistryTarget,
) {
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
}

/// The UpdateService, when the graph data image was mirrored; a warning when no release
/// image was, since the service names the release repository.
fn add_update_service(
    resources: &mut cluster::ClusterResources,
    mirrored: &[&ResolvedImage],
    target: &RegistryTarget,
    progress: &Progress,
) {
    let Some(graph) = mirrored
        .iter()
        .find(|i| i.placement.category == cluster::Category::Graph)
    else {
        return;
    };
    // As oc-mirror writes it: the graph image by tag, the release repository untagged.
    let image = format!(
        "{}/{}:{}",
        target.registry,
        target.repository_for(graph.dest_path()),
        graph.dest_reference(&graph.root)
    );
    let releases = format!(
        "{}/{}",
        target.registry,
        target.repository_for(release::RELEASE_IMAGES_REPO)
    );
    if !mirrored
        .iter()
        .any(|i| i.placement.repository.as_deref() == Some(release::RELEASE_IMAGES_REPO))
    {
        progress.warn(format_args!(
            "{}: this run mirrored no release image; the UpdateService names {releases}, where releases from mirror.platform go",
            cluster::UPDATE_SERVICE_FILE
        ));
    }
    resources.set_update_service(releases, image);
}

/// The signatures of each release image mirrored, from `--release-signatures`; a warning for
/// a release that has none there.
fn add_release_signatures(
    resources: &mut cluster::ClusterResources,
    mirrored: &[&ResolvedImage],
    sig_dir: &Path,
    progress: &Progress,
) -> Result<()> {
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
    Ok(())
}

/// Now, in RFC 3339 UTC to the second (Go's `time.RFC3339`, as oc-mirror's `createdAt`).
fn created_at() -> String {
    time::OffsetDateTime::now_utc()
        .format(time::macros::format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second]Z"
        ))
        .unwrap_or_default()
}

/// The source as the cluster may pull it. A release payload (taken from a channel: the graph
/// names it by digest) is also pulled by its release tag, `<version>-<arch>`, which the
/// release repository carries upstream and our mirror carries too; so, as oc-mirror v2 does
/// with the release it took by that tag, it gets an ImageTagMirrorSet entry (`itms-release-0`)
/// besides its digest one.
fn pulled_as(img: &ResolvedImage) -> ImageRef {
    let mut source = img.source.clone();
    let payload = img.placement.repository.as_deref() == Some(release::RELEASE_IMAGES_REPO);
    if payload && source.tag.is_none() {
        source.tag = img.placement.tag.clone();
    }
    source
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

/// `YYYYMMDDTHHMMSS.mmmZ-<pid>`, for default file names: sortable by time, and two runs
/// started in the same second (or millisecond) get different names. Not relied on alone: the
/// files are created exclusively (see [`stamped_name`]).
pub(super) fn file_stamp() -> String {
    let now = time::OffsetDateTime::now_utc()
        .format(time::macros::format_description!(
            "[year][month][day]T[hour][minute][second].[subsecond digits:3]Z"
        ))
        .unwrap_or_default();
    format!("{now}-{}", std::process::id())
}

/// The default names of a run's `<prefix>` file in the working directory, for
/// [`crate::fs::write_unique`]: `<prefix>-<stamp>.json`, then `<prefix>-<stamp>-1.json`, ...
pub(super) fn stamped_name(prefix: &str, stamp: &str) -> impl Fn(u32) -> PathBuf {
    let base = format!("{prefix}-{stamp}");
    move |n| match n {
        0 => PathBuf::from(format!("{base}.json")),
        n => PathBuf::from(format!("{base}-{n}.json")),
    }
}

/// The blobs and manifests of `images` that are in `layout` (a blob is only renamed into
/// place once its content matched its digest), with their sizes.
fn arrived(layout: &OciLayout, images: &[&ResolvedImage]) -> Vec<BlobRecord> {
    let blobs = images.iter().flat_map(|img| {
        let manifests = std::iter::once(&img.root)
            .chain(img.children.iter().map(|c| &c.manifest))
            .map(|m| m.digest.clone());
        img.blobs.iter().map(|b| b.digest.clone()).chain(manifests)
    });
    blobs
        .filter_map(|digest| {
            let size = layout.blob_size(&digest)?;
            Some(BlobRecord { digest, size })
        })
        .collect()
}

/// The record already at `--record path`, if any, once it is known to be a mirror record of
/// `destination`: a run is added to it, never replaces it. Anything else there is refused,
/// naming the file and the fix.
pub(super) fn earlier_record(path: &Path, destination: &str) -> Result<Option<MirrorRecord>> {
    if path.symlink_metadata().is_err() {
        return Ok(None);
    }
    let refuse = |what: String| {
        anyhow::anyhow!(
            "--record {}: {what}, and a mirror record is never replaced (it is the audit trail of an earlier run): name a new file, or move the old one away",
            path.display()
        )
    };
    let earlier = MirrorRecord::load(path).map_err(|e| {
        refuse(format!(
            "the file exists and is not a mirror record ({e:#})"
        ))
    })?;
    match earlier.runs.last() {
        Some(run) if run.destination == destination => Ok(Some(earlier)),
        Some(run) => Err(refuse(format!(
            "the file records a mirror to {}, not to {destination}",
            run.destination
        ))),
        None => Err(refuse("the file records no run".to_string())),
    }
}

/// Adds this run to the record at `--record path` (writing it new if there is none), with the
/// directory locked so two runs naming one file both end up in it.
fn add_to_named_record(path: &Path, rec: &mut MirrorRecord) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let lock = fs_err::File::open(dir)?;
    lock.file()
        .lock()
        .with_context(|| format!("locking {} to add to {}", dir.display(), path.display()))?;
    let destination = rec.runs.last().map(|r| r.destination.clone());
    if let Some(earlier) = earlier_record(path, destination.as_deref().unwrap_or_default())? {
        rec.merge_earlier(earlier);
    }
    rec.write(path)
}

/// Writes the mirror record: inside a disk mirror (merged with the earlier runs', with what
/// arrived of the `unfinished` images listed as unfinished blobs, and `SHA256SUMS` renewed),
/// or beside the run for a registry.
pub(super) fn write_record(
    dest: &Destination,
    rec: &mut MirrorRecord,
    path: Option<PathBuf>,
    stamp: &str,
    unfinished: &[&ResolvedImage],
) -> Result<PathBuf> {
    match dest {
        Destination::Layout(layout) => {
            let path = layout.root().join(record::RECORD_FILE);
            if path.is_file() {
                let earlier = MirrorRecord::load(&path)?;
                rec.merge_earlier(earlier);
            }
            rec.add_unfinished(arrived(layout, unfinished));
            rec.write(&path)?;
            record::write_sums(layout.root())?;
            Ok(path)
        }
        // An audit record is never replaced: a default name is new (created exclusively), a
        // named one gets this run added to it.
        Destination::Registry { .. } => match path {
            Some(path) => {
                add_to_named_record(&path, rec)?;
                Ok(path)
            }
            None => {
                let bytes = crate::fs::json_bytes(Path::new("the mirror record"), rec)?;
                crate::fs::write_unique(stamped_name("mirror-record", stamp), &bytes)
                    .context("writing the mirror record")
            }
        },
    }
}
