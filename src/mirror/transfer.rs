//! Moving content: every unique blob once (HEAD first, a cross-repository mount when the
//! destination already holds it elsewhere, else one streamed upload), bounded concurrency, each
//! byte hashed in flight; then manifests, children before their index, verbatim.

use super::plan::{rewrite_index, BlobNode, ResolvedImage, Source};
use super::record::{ImageRecord, ManifestRecord};
use crate::oci::layout::{IndexEntry, OciLayout, REF_NAME};
use crate::oci::manifest::RawManifest;
use crate::oci::reference::RegistryTarget;
use crate::oci::registry::{Mount, RegistryClient};
use crate::oci::stream::{file_stream, response_stream, verified, ByteStream};
use crate::output::Progress;
use anyhow::{Context, Result};
use futures_util::StreamExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Where content goes.
#[derive(Clone)]
pub enum Destination {
    /// An OCI layout on disk.
    Layout(OciLayout),
    /// A registry, under a prefix.
    Registry {
        /// The client.
        client: Arc<RegistryClient>,
        /// Host and prefix.
        target: RegistryTarget,
    },
}

/// Counters of one run.
#[derive(Debug, Default)]
pub struct Stats {
    /// Blob bytes actually sent or written.
    pub bytes: AtomicU64,
    /// Blobs uploaded or written.
    pub blobs_copied: AtomicU64,
    /// Blobs mounted from another repository.
    pub blobs_mounted: AtomicU64,
    /// Blobs the destination already had.
    pub blobs_present: AtomicU64,
}

/// Default number of blobs in flight.
pub const DEFAULT_CONCURRENCY: usize = 8;

/// One transfer from a source to a destination.
pub struct Transfer {
    /// Where content is read.
    pub source: Source,
    /// Where it goes.
    pub dest: Destination,
    /// Blobs in flight at once.
    pub concurrency: usize,
    /// Progress display.
    pub progress: Progress,
    /// Counters.
    pub stats: Arc<Stats>,
}

impl Transfer {
    /// Copies every blob of the graph. After the first failure no new blob starts; those in
    /// flight finish, and the first error is returned.
    pub async fn copy_blobs(&self, nodes: Vec<BlobNode>) -> Result<()> {
        let failed = AtomicBool::new(false);
        let results: Vec<Result<()>> = futures_util::stream::iter(nodes)
            .map(|node| {
                let failed = &failed;
                async move {
                    if failed.load(Ordering::Relaxed) {
                        return Ok(());
                    }
                    let r = self.copy_blob(&node).await;
                    if r.is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    r
                }
            })
            .buffer_unordered(self.concurrency.max(1))
            .collect()
            .await;
        results.into_iter().collect()
    }

    async fn open(&self, node: &BlobNode) -> Result<ByteStream> {
        let d = &node.blob.digest;
        match &self.source {
            Source::Registry(regs) => {
                let client = regs.client(&node.from.registry)?;
                let resp = client.get_blob(&node.from.repository, d, 0).await?;
                Ok(response_stream(resp))
            }
            Source::Layout(layout) => Ok(file_stream(&layout.blob_path(d), 0).await?),
        }
    }

    fn counting(&self, node: &BlobNode, inner: ByteStream) -> ByteStream {
        let bar = Arc::new(self.progress.blob(
            &format!("{} {}", node.from.repository, node.blob.digest.short()),
            node.blob.size,
        ));
        let progress = self.progress.clone();
        let stats = self.stats.clone();
        verified(
            inner,
            format!("blob {} from {}", node.blob.digest, node.from.name()),
            node.blob.digest.clone(),
            node.blob.size,
            Arc::new(move |n| {
                progress.inc(n);
                bar.inc(n);
                stats.bytes.fetch_add(n, Ordering::Relaxed);
            }),
        )
    }

    async fn copy_blob(&self, node: &BlobNode) -> Result<()> {
        let d = &node.blob.digest;
        match &self.dest {
            Destination::Layout(layout) => {
                if layout.blob_size(d) == Some(node.blob.size) {
                    self.stats.blobs_present.fetch_add(1, Ordering::Relaxed);
                    self.progress.inc(node.blob.size);
                    return Ok(());
                }
                let body = self.counting(node, self.open(node).await?);
                layout
                    .write_blob(d, node.blob.size, body)
                    .await
                    .with_context(|| format!("copying blob {d} of {} to disk", node.from))?;
                self.stats.blobs_copied.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Destination::Registry { client, target } => {
                let repos: Vec<String> = node
                    .repositories
                    .iter()
                    .map(|r| target.repository_for(r))
                    .collect();
                let mut holder: Option<String> = None;
                let mut missing = Vec::new();
                for repo in &repos {
                    match client.head_blob(repo, d).await? {
                        Some(size) if size == node.blob.size => {
                            holder.get_or_insert_with(|| repo.clone());
                        }
                        _ => missing.push(repo.clone()),
                    }
                }
                if missing.is_empty() {
                    self.stats.blobs_present.fetch_add(1, Ordering::Relaxed);
                    self.progress.inc(node.blob.size);
                    return Ok(());
                }
                for repo in missing {
                    let location = match &holder {
                        Some(from) => match client.mount_blob(&repo, d, from).await? {
                            Mount::Mounted => {
                                self.stats.blobs_mounted.fetch_add(1, Ordering::Relaxed);
                                continue;
                            }
                            Mount::Upload(location) => location,
                        },
                        None => client.start_upload(&repo).await?,
                    };
                    self.upload(client, &repo, location, node)
                        .await
                        .with_context(|| {
                            format!(
                                "copying blob {d} of {} to {}/{repo}",
                                node.from, target.registry
                            )
                        })?;
                    holder = Some(repo);
                }
                Ok(())
            }
        }
    }

    async fn upload(
        &self,
        client: &RegistryClient,
        repo: &str,
        location: String,
        node: &BlobNode,
    ) -> Result<()> {
        let result = async {
            let body = self.counting(node, self.open(node).await?);
            let next = client
                .patch_upload(repo, &location, node.blob.size, body)
                .await?;
            client.finish_upload(repo, &next, &node.blob.digest).await?;
            anyhow::Ok(())
        }
        .await;
        if result.is_err() {
            client.cancel_upload(repo, &location).await;
        } else {
            self.stats.blobs_copied.fetch_add(1, Ordering::Relaxed);
        }
        result
    }

    /// Writes or pushes every image's manifests (children first) and returns what the record
    /// says of each, in the order of `images`. `rewrite_filtered` pushes an index of only the
    /// kept children to a registry (a new digest) instead of the source's index verbatim.
    /// Registry pushes run `concurrency` images at a time; each image's children still go
    /// before its index.
    pub async fn push_manifests(
        &self,
        images: &[ResolvedImage],
        rewrite_filtered: bool,
    ) -> Result<Vec<ImageRecord>> {
        match &self.dest {
            Destination::Layout(layout) => {
                let mut records = Vec::new();
                let mut index_entries = Vec::new();
                for image in images {
                    let root = &image.root;
                    for c in &image.children {
                        layout
                            .write_bytes(&c.manifest.digest, c.manifest.bytes.clone())
                            .await?;
                    }
                    layout.write_bytes(&root.digest, root.bytes.clone()).await?;
                    let mut annotations = std::collections::BTreeMap::new();
                    annotations.insert(REF_NAME.to_string(), image.source.to_string());
                    index_entries.push(IndexEntry {
                        media_type: root.media_type.clone(),
                        digest: root.digest.clone(),
                        size: root.bytes.len() as u64,
                        annotations,
                    });
                    records.push(self.image_record(image, root));
                }
                layout.add_to_index(&index_entries)?;
                Ok(records)
            }
            Destination::Registry { client, target } => {
                let pushed: Vec<Result<ImageRecord>> = futures_util::stream::iter(images)
                    .map(|image| async move {
                        let root = push_image(client, target, image, rewrite_filtered).await?;
                        Ok(self.image_record(image, &root))
                    })
                    .buffered(self.concurrency.max(1))
                    .collect()
                    .await;
                pushed.into_iter().collect()
            }
        }
    }

    fn image_record(&self, image: &ResolvedImage, root: &RawManifest) -> ImageRecord {
        let destination = match &self.dest {
            Destination::Layout(layout) => {
                format!("oci:{}:{}", layout.root().display(), image.source)
            }
            Destination::Registry { target, .. } => {
                let repo = target.repository_for(&image.source.repository);
                let mut r = image.source.moved_to(&target.registry, &repo);
                if root.digest != image.root.digest {
                    r.digest = Some(root.digest.clone());
                }
                r.to_string()
            }
        };
        ImageRecord {
            source: image.source.to_string(),
            path: image.source.repository.clone(),
            destination,
            digest: root.digest.clone(),
            source_digest: (root.digest != image.root.digest).then(|| image.root.digest.clone()),
            media_type: root.media_type.clone(),
            size: root.bytes.len() as u64,
            total_size: image.total_size(),
            platforms: image.platforms.clone(),
            platforms_dropped: image.dropped.clone(),
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
        }
    }
}

/// The tag to push under, or the digest when the source was pinned by digest only.
fn push_reference(image: &ResolvedImage, root: &RawManifest) -> String {
    match &image.source.tag {
        Some(t) => t.clone(),
        None => root.digest.to_string(),
    }
}

/// Pushes one image's manifests to a registry, children first; returns the top manifest as
/// pushed (the source's, or the rewritten index).
async fn push_image(
    client: &RegistryClient,
    target: &RegistryTarget,
    image: &ResolvedImage,
    rewrite_filtered: bool,
) -> Result<RawManifest> {
    let repo = target.repository_for(&image.source.repository);
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
    let reference = push_reference(image, &root);
    if let Err(e) = client.put_manifest(&repo, &reference, &root).await {
        let rejected_sparse = sparse
            && e.code().is_some_and(|c| {
                c.contains("MANIFEST_BLOB_UNKNOWN") || c.contains("MANIFEST_UNKNOWN")
            });
        if rejected_sparse {
            anyhow::bail!(
                "{registry} refused the index of {source} because it lists platforms that were filtered out ({dropped}); this registry does not accept sparse indexes. Rerun with --rewrite-filtered-indexes to push an index of only the kept platforms (a new digest, recorded beside the source's), or keep those architectures in mirror.platform.architectures",
                registry = target.registry,
                source = image.source,
                dropped = image.dropped.join(", ")
            );
        }
        return Err(anyhow::Error::new(e).context(format!("pushing {}", image.source)));
    }
    Ok(root)
}
