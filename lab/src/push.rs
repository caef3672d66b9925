//! Pushing the lab's images over the distribution API, idempotently: a blob the repository
//! already has (HEAD) is not sent again, and a manifest already stored under the same digest
//! is not put again, so a rerun of the seed costs a few HEAD requests per image.

use super::image::{Blob, Image};
use anyhow::{Context, Result};
use bootstrap::concurrency::Concurrency;
use bootstrap::oci::registry::RegistryClient;
use futures_util::{StreamExt, TryStreamExt};
use std::sync::atomic::{AtomicU64, Ordering};

/// What a push sent and what the registry already had.
#[derive(Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Transfer {
    /// Blobs uploaded.
    pub blobs_sent: u64,
    /// Blobs the registry already had.
    pub blobs_present: u64,
    /// Bytes of the blobs uploaded.
    pub bytes_sent: u64,
    /// Manifests put (by tag or by digest).
    pub manifests_put: u64,
    /// Manifests the registry already held under the same digest.
    pub manifests_present: u64,
}

/// Pushes images to one registry, counting what it sends.
pub struct Pusher<'a> {
    client: &'a RegistryClient,
    blobs_sent: AtomicU64,
    blobs_present: AtomicU64,
    bytes_sent: AtomicU64,
    manifests_put: AtomicU64,
    manifests_present: AtomicU64,
}

impl<'a> Pusher<'a> {
    /// A pusher speaking through `client`.
    pub fn new(client: &'a RegistryClient) -> Self {
        Pusher {
            client,
            blobs_sent: AtomicU64::new(0),
            blobs_present: AtomicU64::new(0),
            bytes_sent: AtomicU64::new(0),
            manifests_put: AtomicU64::new(0),
            manifests_present: AtomicU64::new(0),
        }
    }

    /// The counts so far.
    pub fn transfer(&self) -> Transfer {
        Transfer {
            blobs_sent: self.blobs_sent.load(Ordering::Relaxed),
            blobs_present: self.blobs_present.load(Ordering::Relaxed),
            bytes_sent: self.bytes_sent.load(Ordering::Relaxed),
            manifests_put: self.manifests_put.load(Ordering::Relaxed),
            manifests_present: self.manifests_present.load(Ordering::Relaxed),
        }
    }

    /// Pushes every image, [`Concurrency::DEFAULT_BLOBS`] at a time; stops at the first failure.
    pub async fn push_all(&self, images: &[&Image]) -> Result<()> {
        futures_util::stream::iter(images.iter().map(|img| self.push(img)))
            .buffer_unordered(Concurrency::DEFAULT_BLOBS.get())
            .try_collect::<Vec<()>>()
            .await?;
        Ok(())
    }

    /// Pushes one image: its blobs, then its manifest by digest and, when tagged, by tag.
    pub async fn push(&self, image: &Image) -> Result<()> {
        let host = self.client.host();
        for blob in &image.blobs {
            self.push_blob(&image.repository, blob)
                .await
                .with_context(|| {
                    format!(
                        "pushing blob {} of {host}/{}",
                        blob.digest, image.repository
                    )
                })?;
        }
        let mut references = vec![image.digest().to_string()];
        references.extend(image.tag.clone());
        for reference in references {
            self.push_manifest(image, &reference)
                .await
                .with_context(|| {
                    format!("pushing manifest {host}/{}:{reference}", image.repository)
                })?;
        }
        Ok(())
    }

    async fn push_blob(&self, repository: &str, blob: &Blob) -> Result<()> {
        let size = blob.bytes.len() as u64;
        if self.client.head_blob(repository, &blob.digest).await? == Some(size) {
            self.blobs_present.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        let location = self.client.start_upload(repository).await?;
        let bytes = blob.bytes.clone();
        let body = futures_util::stream::once(async move { Ok::<_, std::io::Error>(bytes) });
        self.client
            .put_upload(repository, &location, &blob.digest, size, body)
            .await?;
        self.blobs_sent.fetch_add(1, Ordering::Relaxed);
        self.bytes_sent.fetch_add(size, Ordering::Relaxed);
        Ok(())
    }

    async fn push_manifest(&self, image: &Image, reference: &str) -> Result<()> {
        let stored = self
            .client
            .head_manifest(&image.repository, reference)
            .await?;
        if stored.as_ref() == Some(image.digest()) {
            self.manifests_present.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        self.client
            .put_manifest(&image.repository, reference, &image.manifest)
            .await?;
        self.manifests_put.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}
