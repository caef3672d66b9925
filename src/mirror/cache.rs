//! What a registry image resolved to (its manifests, kept platforms and blobs), kept in the
//! working directory by manifest digest, so that a rerun learns an unchanged image from one
//! HEAD instead of fetching its manifests and config again. Entries are checked against their
//! digests when read; a stale or damaged entry is ignored, never trusted.

use super::plan::{BlobDesc, Child, ResolvedImage};
use crate::oci::digest::Digest;
use crate::oci::layout::write_atomic;
use crate::oci::manifest::RawManifest;
use crate::oci::platform::PlatformFilter;
use crate::oci::reference::ImageRef;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use std::path::PathBuf;

/// The cache under a working directory; created on the first save.
#[derive(Clone, Debug)]
pub struct ResolveCache {
    dir: PathBuf,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Manifest {
    media_type: String,
    bytes: String,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Entry {
    root: Manifest,
    children: Vec<(Manifest, Option<String>)>,
    platforms: Vec<String>,
    dropped: Vec<String>,
    blobs: Vec<(Digest, u64, String)>,
}

impl Manifest {
    fn of(m: &RawManifest) -> Self {
        Manifest {
            media_type: m.media_type.clone(),
            bytes: STANDARD.encode(&m.bytes),
        }
    }

    fn raw(&self) -> Option<RawManifest> {
        let bytes = STANDARD.decode(&self.bytes).ok()?;
        let mut m = RawManifest::new(bytes.into(), Some(&self.media_type));
        m.media_type = self.media_type.clone();
        Some(m)
    }
}

impl ResolveCache {
    /// The cache in `workdir/resolved`.
    pub fn new(workdir: &std::path::Path) -> Self {
        ResolveCache {
            dir: workdir.join("resolved"),
        }
    }

    fn path(&self, digest: &Digest, platforms: &PlatformFilter) -> PathBuf {
        let filter = Digest::of(platforms.key().as_bytes());
        self.dir
            .join(format!("{}-{}.json", digest.hex(), filter.short()))
    }

    /// The image `source` resolved to when its manifest digest was `digest` under the same
    /// platform filter, if an earlier run kept it and it still checks out.
    pub fn load(
        &self,
        source: &ImageRef,
        digest: &Digest,
        platforms: &PlatformFilter,
    ) -> Option<ResolvedImage> {
        let bytes = fs_err::read(self.path(digest, platforms)).ok()?;
        let entry: Entry = serde_json::from_slice(&bytes).ok()?;
        let root = entry.root.raw().filter(|r| &r.digest == digest)?;
        let mut children = Vec::new();
        for (m, platform) in &entry.children {
            children.push(Child {
                manifest: m.raw()?,
                platform: platform.clone(),
            });
        }
        let mut image = ResolvedImage::new(source.clone(), root);
        image.children = children;
        image.platforms = entry.platforms;
        image.dropped = entry.dropped;
        image.filter = platforms.clone();
        image.blobs = entry
            .blobs
            .into_iter()
            .map(|(digest, size, media_type)| BlobDesc {
                digest,
                size,
                media_type,
            })
            .collect();
        Some(image)
    }

    /// Keeps `image` for later runs (best effort: a cache that cannot be written only costs
    /// requests).
    pub fn save(&self, image: &ResolvedImage, platforms: &PlatformFilter) {
        let entry = Entry {
            root: Manifest::of(&image.root),
            children: image
                .children
                .iter()
                .map(|c| (Manifest::of(&c.manifest), c.platform.clone()))
                .collect(),
            platforms: image.platforms.clone(),
            dropped: image.dropped.clone(),
            blobs: image
                .blobs
                .iter()
                .map(|b| (b.digest.clone(), b.size, b.media_type.clone()))
                .collect(),
        };
        let Ok(bytes) = serde_json::to_vec(&entry) else {
            return;
        };
        if fs_err::create_dir_all(&self.dir).is_ok() {
            let _ = write_atomic(&self.path(&image.root.digest, platforms), &bytes);
        }
    }
}
