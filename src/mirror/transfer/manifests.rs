//! Manifests after their blobs: children before their index, verbatim (or an index of only
//! the kept platforms, when asked), into a layout's index or a registry's tags; and the check
//! that finds an image already at the destination so a rerun sends nothing for it.

use super::{Destination, Transfer};
use crate::mirror::plan::{placement_annotations, rewrite_index, ResolvedImage};
use crate::mirror::signatures::ATTACHED_ANNOTATION;
use crate::oci::digest::Digest;
use crate::oci::layout::{IndexEntry, OciLayout, REF_NAME};
use crate::oci::manifest::RawManifest;
use crate::oci::reference::RegistryTarget;
use crate::oci::registry::{ErrorCode, RegistryClient};
use crate::openshift::record::{AttachedRecord, ImageRecord, ManifestRecord};
use anyhow::{Context, Result};
use futures_util::StreamExt;
use std::collections::HashMap;

impl Transfer {
    /// Writes or pushes every image's manifests (children first) and returns what the record
    /// says of each, in the order of `images`, or why that image failed. `rewrite_filtered`
    /// pushes an index of only the kept children to a registry (a new digest) instead of the
    /// source's index verbatim. Registry pushes run `concurrency` images at a time; each
    /// image's children still go before its index.
    pub async fn push_manifests(
        &self,
        images: &[&ResolvedImage],
        rewrite_filtered: bool,
    ) -> Result<Vec<Result<ImageRecord>>> {
        match &self.dest {
            Destination::Layout(layout) => {
                let mut records = Vec::new();
                let mut index_entries = Vec::new();
                for image in images {
                    match write_image(layout, image).await {
                        Ok(entry) => {
                            index_entries.push(entry);
                            records.push(Ok(self.image_record(image, &image.root)));
                        }
                        Err(e) => records.push(Err(e)),
                    }
                }
                layout.add_to_index(&index_entries)?;
                Ok(records)
            }
            Destination::Registry { client, target } => Ok(futures_util::stream::iter(images)
                .map(|image| async move {
                    let root = push_image(client, target, image, rewrite_filtered).await?;
                    Ok(self.image_record(image, &root))
                })
                .buffered(self.settings.concurrency.blobs.get())
                .collect()
                .await),
        }
    }

    /// For each image, the record when the destination already holds it exactly as this run
    /// would leave it (the tag points at the same manifest digest, or a layout's index entry
    /// does, and every child this run keeps is there), so its blobs and manifests need not be
    /// looked at again. A registry only accepts a manifest whose blobs it holds, so a
    /// manifest proves its blobs; but a sparse index keeps its digest whatever platforms were
    /// kept, so a filter widened since an earlier run is found by its children.
    pub async fn already_mirrored(
        &self,
        images: &[ResolvedImage],
        rewrite_filtered: bool,
    ) -> Vec<Option<ImageRecord>> {
        let layout_index: HashMap<String, Digest> = match &self.dest {
            Destination::Layout(layout) => layout
                .index()
                .unwrap_or_default()
                .into_iter()
                .filter_map(|e| Some((e.ref_name()?.to_string(), e.digest.clone())))
                .collect(),
            Destination::Registry { .. } => HashMap::new(),
        };
        let layout_index = &layout_index;
        futures_util::stream::iter(images)
            .map(|image| async move {
                let root = match (!image.dropped.is_empty() && rewrite_filtered)
                    .then(|| rewrite_index(image))
                {
                    Some(Ok(rewritten)) => rewritten,
                    Some(Err(_)) => return None,
                    None => image.root.clone(),
                };
                let present = match &self.dest {
                    Destination::Layout(layout) => {
                        layout_index.get(&image.source.to_string()) == Some(&root.digest)
                            && layout.blob_size(&root.digest).is_some()
                            && image
                                .children
                                .iter()
                                .all(|c| layout.blob_size(&c.manifest.digest).is_some())
                            // An archive's blobs are checked too: one found damaged when the
                            // archive was sealed is no longer in place.
                            && (layout.archive_writer().is_none()
                                || image
                                    .blobs
                                    .iter()
                                    .all(|b| layout.blob_size(&b.digest).is_some()))
                    }
                    Destination::Registry { client, target } => {
                        let repo = target.repository_for(image.dest_path());
                        let reference = image.dest_reference(&root);
                        matches!(client.head_manifest(&repo, &reference).await,
                            Ok(Some(d)) if d == root.digest)
                            && children_present(client, &repo, image).await
                    }
                };
                present.then(|| self.image_record(image, &root))
            })
            .buffered(self.settings.concurrency.manifests())
            .collect()
            .await
    }

    /// What the record would say of `image` mirrored as it is (for a dry run).
    pub fn planned_record(&self, image: &ResolvedImage) -> ImageRecord {
        self.image_record(image, &image.root)
    }

    fn image_record(&self, image: &ResolvedImage, root: &RawManifest) -> ImageRecord {
        // A layout names images by their source and keeps no tags; a registry holds digest-only
        // content under its digest tag, which the record names so verify checks it.
        let tag = match &self.dest {
            Destination::Layout(_) => image.placement.tag.clone(),
            Destination::Registry { .. } => image
                .placement
                .tag
                .clone()
                .or_else(|| image.digest_tag(root)),
        };
        let destination = match &self.dest {
            // An archive's layout lives in a staging directory only until it is sealed: the
            // record names the archive.
            Destination::Layout(layout) => match layout.archive_writer() {
                Some(w) => format!("archive://{}:{}", w.dir().display(), image.source),
                None => format!("oci:{}:{}", layout.root().display(), image.source),
            },
            Destination::Registry { target, .. } => {
                let repo = target.repository_for(image.dest_path());
                let mut r = image.source.moved_to(&target.registry, &repo);
                if tag.is_some() {
                    r.tag = tag.clone();
                }
                if root.digest != image.root.digest || image.rebuilt_from.is_some() {
                    r.digest = Some(root.digest.clone());
                }
                r.to_string()
            }
        };
        // A disk mirror's index names the image by its reference, which its record matches.
        let source = match &self.dest {
            Destination::Layout(_) => image.source.to_string(),
            Destination::Registry { .. } => image.source_label(),
        };
        ImageRecord {
            source,
            path: image.dest_path().to_string(),
            tag,
            category: (image.placement.category != crate::openshift::cluster::Category::Generic)
                .then(|| image.placement.category.name().to_string()),
            destination,
            digest: root.digest.clone(),
            source_digest: image
                .rebuilt_from
                .clone()
                .or_else(|| (root.digest != image.root.digest).then(|| image.root.digest.clone())),
            media_type: root.media_type.clone(),
            size: root.bytes.len() as u64,
            total_size: image.total_size(),
            platforms: image.platforms.clone(),
            platforms_dropped: image.dropped.clone(),
            platform_filter: image.filter.describe(),
            manifests: image
                .children
                .iter()
                .map(|c| ManifestRecord {
                    digest: c.manifest.digest.clone(),
                    media_type: c.manifest.media_type.clone(),
                    size: c.manifest.bytes.len() as u64,
                    platform: c.platform.clone(),
                })
                .collect(),
            blobs: image.blobs.iter().map(|b| b.digest.clone()).collect(),
            attached_to: image.attached.as_ref().map(|a| AttachedRecord {
                kind: a.kind.name().to_string(),
                image: a.image.clone(),
                digest: a.subject.clone(),
            }),
        }
    }
}

/// True when the registry holds every child manifest of `image` this run keeps (always, for
/// an image that is no index).
async fn children_present(client: &RegistryClient, repo: &str, image: &ResolvedImage) -> bool {
    for c in &image.children {
        let digest = c.manifest.digest.to_string();
        if !matches!(client.head_manifest(repo, &digest).await,
            Ok(Some(d)) if d == c.manifest.digest)
        {
            return false;
        }
    }
    true
}

/// Writes one image's manifests into a layout (children first); returns its index entry.
async fn write_image(layout: &OciLayout, image: &ResolvedImage) -> Result<IndexEntry> {
    let root = &image.root;
    for c in &image.children {
        layout
            .write_bytes(&c.manifest.digest, c.manifest.bytes.clone())
            .await?;
    }
    layout.write_bytes(&root.digest, root.bytes.clone()).await?;
    let mut annotations = std::collections::BTreeMap::new();
    annotations.insert(REF_NAME.to_string(), image.source.to_string());
    annotations.extend(placement_annotations(&image.placement));
    if let Some(a) = &image.attached {
        annotations.insert(ATTACHED_ANNOTATION.to_string(), a.annotation());
    }
    Ok(IndexEntry {
        media_type: root.media_type.clone(),
        digest: root.digest.clone(),
        size: root.bytes.len() as u64,
        annotations,
    })
}

/// Pushes one image's manifests to a registry, children first; returns the top manifest as
/// pushed (the source's, or the rewritten index).
async fn push_image(
    client: &RegistryClient,
    target: &RegistryTarget,
    image: &ResolvedImage,
    rewrite_filtered: bool,
) -> Result<RawManifest> {
    let repo = target.repository_for(image.dest_path());
    for c in &image.children {
        client
            .put_manifest(&repo, &c.manifest.digest.to_string(), &c.manifest)
            .await
            .with_context(|| format!("pushing a child manifest of {}", image.source))?;
    }
    let sparse = !image.dropped.is_empty();
    let root = if sparse && rewrite_filtered {
        rewrite_index(image)?
    } else {
        image.root.clone()
    };
    let reference = image.dest_reference(&root);
    if let Err(e) = client.put_manifest(&repo, &reference, &root).await {
        let rejected_sparse = sparse
            && (e.has_code(ErrorCode::ManifestBlobUnknown)
                || e.has_code(ErrorCode::ManifestUnknown));
        if rejected_sparse {
            anyhow::bail!(
                "{registry} refused the index of {source} because it lists platforms that were filtered out ({dropped}); this registry does not accept sparse indexes. Rerun with --rewrite-filtered-indexes to push an index of only the kept platforms (a new digest, recorded beside the source's), or keep those platforms too ({origin})",
                registry = target.registry,
                source = image.source,
                dropped = image.dropped.join(", "),
                origin = filter_origin(image)
            );
        }
        return Err(anyhow::Error::new(e).context(format!("pushing {}", image.source)));
    }
    Ok(root)
}

/// The configuration fields that filtered `image` (for a push from disk, which keeps what the
/// disk mirror's run kept, the filter that run applied).
fn filter_origin(image: &ResolvedImage) -> String {
    match image.filter.origin() {
        o if o.is_empty() => "the platform filter of the run that wrote the disk mirror".into(),
        o => o,
    }
}
