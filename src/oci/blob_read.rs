//! A blob read synchronously from a registry (or an OCI layout on disk), for the tar readers that
//! run on blocking threads: opened on first read, hashed as it passes, and checked against its digest and size at the end
//! (a blob longer than its manifest says fails at once). Nothing read from it counts as verified
//! until it returned end of stream.

use crate::oci::digest::{Digest, StreamHasher};
use crate::oci::layers;
use crate::oci::layout::OciLayout;
use crate::oci::manifest::OciImageManifest;
use crate::oci::reference::ImageRef;
use crate::oci::registry::Registries;
use crate::oci::stream::{response_stream, ByteStream};
use anyhow::{Context, Result};
use bytes::Bytes;
use futures_util::StreamExt;
use std::collections::BTreeMap;
use std::io::{self, Read};
use std::sync::Arc;

/// Where [`BlobRead`] reads a blob: the image's registry, or an OCI layout on disk (an
/// `oci://` catalog), whose files are checked exactly like a registry's bytes.
#[derive(Clone)]
pub enum BlobOrigin {
    /// The registry the image names.
    Registry(Arc<Registries>),
    /// An OCI image layout.
    Layout(OciLayout),
}

/// A blob read synchronously from a registry (for the tar reader), opened on first read,
/// hashed as it passes and checked against its digest at the end.
pub struct BlobRead {
    origin: BlobOrigin,
    image: ImageRef,
    digest: Digest,
    size: u64,
    handle: tokio::runtime::Handle,
    stream: Option<ByteStream>,
    buf: Bytes,
    hasher: StreamHasher,
    done: bool,
}

impl BlobRead {
    /// A reader of `digest` (`size` bytes) in `image`'s repository; call from a tokio context.
    pub fn new(regs: Arc<Registries>, image: ImageRef, digest: Digest, size: u64) -> Self {
        Self::from_origin(BlobOrigin::Registry(regs), image, digest, size)
    }

    /// A reader of `digest` (`size` bytes) of `image` at `origin`; call from a tokio context.
    pub fn from_origin(origin: BlobOrigin, image: ImageRef, digest: Digest, size: u64) -> Self {
        BlobRead {
            origin,
            image,
            digest,
            size,
            handle: tokio::runtime::Handle::current(),
            stream: None,
            buf: Bytes::new(),
            hasher: StreamHasher::new(),
            done: false,
        }
    }

    fn open(&mut self) -> io::Result<()> {
        let origin = self.origin.clone();
        let (image, digest, size) = (self.image.clone(), self.digest.clone(), self.size);
        let stream = self
            .handle
            .block_on(async move {
                match origin {
                    BlobOrigin::Registry(regs) => {
                        let client = regs.client(&image.registry)?;
                        let resp = client.get_blob(&image.repository, &digest, 0).await?;
                        Ok::<_, anyhow::Error>(response_stream(resp))
                    }
                    BlobOrigin::Layout(layout) => Ok(layout.blob_stream(&digest, 0, size).await?),
                }
            })
            .map_err(|e| io::Error::other(format!("{e:#}")))?;
        self.stream = Some(stream);
        Ok(())
    }

    /// The blob's digest.
    pub fn digest(&self) -> &Digest {
        &self.digest
    }

    /// Reads what the tar reader left (padding after the end of the archive) and verifies.
    pub fn drain(&mut self) -> io::Result<()> {
        let mut sink = [0u8; 64 * 1024];
        while self.read(&mut sink)? > 0 {}
        Ok(())
    }
}

impl Read for BlobRead {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.buf.is_empty() {
            if self.done {
                return Ok(0);
            }
            if self.stream.is_none() {
                self.open()?;
            }
            let stream = self.stream.as_mut().expect("opened above");
            match self.handle.block_on(stream.next()) {
                Some(Ok(bytes)) => {
                    self.hasher.update(&bytes);
                    if self.hasher.len() > self.size {
                        return Err(io::Error::other(format!(
                            "blob {} is longer than its manifest says ({} bytes)",
                            self.digest, self.size
                        )));
                    }
                    self.buf = bytes;
                }
                Some(Err(e)) => return Err(e),
                None => {
                    self.done = true;
                    let hasher = std::mem::take(&mut self.hasher);
                    hasher
                        .verify(&format!("blob of {}", self.image), &self.digest, self.size)
                        .map_err(io::Error::other)?;
                    return Ok(0);
                }
            }
        }
        let n = out.len().min(self.buf.len());
        out[..n].copy_from_slice(&self.buf[..n]);
        self.buf = self.buf.slice(n..);
        Ok(n)
    }
}

/// Reads the regular files under `dir` of an image's layers (`manifest`, one platform's),
/// streaming each layer from the registry through the defensive layer reader and verifying its
/// digest; an error names the image and the layer.
pub async fn read_image_dir(
    regs: &Arc<Registries>,
    image: &ImageRef,
    manifest: &OciImageManifest,
    dir: &str,
) -> Result<BTreeMap<String, Vec<u8>>> {
    read_image_dir_from(&BlobOrigin::Registry(regs.clone()), image, manifest, dir).await
}

/// [`read_image_dir`] with the layers read from `origin` (a registry or an OCI layout).
pub async fn read_image_dir_from(
    origin: &BlobOrigin,
    image: &ImageRef,
    manifest: &OciImageManifest,
    dir: &str,
) -> Result<BTreeMap<String, Vec<u8>>> {
    read_layers(origin, image, manifest, dir, |layers, dir| {
        layers::read_config_dir(layers, dir)
    })
    .await
}

/// [`read_image_dir_from`] into an unlinked spool file in the temporary directory (`TMPDIR`):
/// the files are read back as streams, so a catalog's size costs disk, not memory.
pub async fn spool_image_dir_from(
    origin: &BlobOrigin,
    image: &ImageRef,
    manifest: &OciImageManifest,
    dir: &str,
) -> Result<layers::SpooledFiles> {
    let tmp = std::env::temp_dir();
    let spool = tempfile::tempfile_in(&tmp).with_context(|| {
        format!(
            "creating a spool file for {image}'s catalog in {} (set TMPDIR to a directory with room)",
            tmp.display()
        )
    })?;
    let spool = fs_err::File::from_parts(spool, tmp.join("(unlinked catalog spool)"));
    read_layers(origin, image, manifest, dir, move |layers, dir| {
        layers::spool_config_dir(layers, dir, spool)
    })
    .await
}

/// Reads `dir` out of the image's layers with `read` on a blocking thread, then checks every
/// layer's digest (nothing read counts until then).
async fn read_layers<T: Send + 'static>(
    origin: &BlobOrigin,
    image: &ImageRef,
    manifest: &OciImageManifest,
    dir: &str,
    read: impl FnOnce(&mut dyn Iterator<Item = &mut BlobRead>, &str) -> Result<T, layers::LayerError>
        + Send
        + 'static,
) -> Result<T> {
    let mut readers = Vec::new();
    for l in &manifest.layers {
        readers.push(BlobRead::from_origin(
            origin.clone(),
            image.clone(),
            l.digest.parse()?,
            l.size.max(0) as u64,
        ));
    }
    let digests: Vec<String> = manifest.layers.iter().map(|l| l.digest.clone()).collect();
    let what = image.to_string();
    let failed = format!("reading {dir} out of {image}: the layer reader task failed");
    let dir = dir.to_string();
    tokio::task::spawn_blocking(move || -> Result<T> {
        let files = read(&mut readers.iter_mut(), &dir).map_err(|e| {
            let layer = match &e {
                layers::LayerError::Unsafe { layer, .. }
                | layers::LayerError::Read { layer, .. } => digests.get(*layer).map(String::as_str),
                _ => None,
            };
            match layer {
                Some(d) => anyhow::anyhow!("{what}: layer {d}: {e}"),
                None => anyhow::anyhow!("{what}: {e}"),
            }
        })?;
        for r in &mut readers {
            r.drain()
                .with_context(|| format!("{what}: reading layer {}", r.digest()))?;
        }
        Ok(files)
    })
    .await
    .context(failed)?
}
