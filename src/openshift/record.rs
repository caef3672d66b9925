//! The mirror record: what an auditor reads to know exactly what was mirrored. Written by every
//! run (into the layout for a disk mirror, into the working directory for a registry), with the
//! input's hash, times, every image with its digests and platforms, every blob, and totals. A disk
//! mirror also gets `SHA256SUMS` over every file, checkable with `sha256sum -c`.
//!
//! It is also the contract between the mirror and the install halves: the install side asks it
//! typed questions ([`MirrorRecord::release`], [`MirrorRecord::digest_sources`]) instead of
//! reading its fields or the YAML written beside it.

use super::cluster::{Category, ClusterResources, DigestSource, MirroredImage};
use crate::oci::digest::Digest;
use crate::oci::layout::{write_atomic, PARTIAL_DIR};
use crate::oci::reference::ImageRef;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The record's file name inside a disk mirror.
pub const RECORD_FILE: &str = "mirror-record.json";
/// The checksum file's name inside a disk mirror.
pub const SUMS_FILE: &str = "SHA256SUMS";
/// The record format version; bumped when a field changes meaning.
pub const RECORD_VERSION: u32 = 1;

/// An image of a record that cannot be read back: a reference that does not parse or a
/// category bootstrap does not know (a record edited by hand, or written by a newer bootstrap).
#[derive(Debug, thiserror::Error)]
#[error("image {image}: {reason}")]
pub struct RecordImageError {
    /// The image's source reference, as recorded.
    pub image: String,
    /// What is wrong with it.
    pub reason: String,
}

/// One mirror record.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MirrorRecord {
    /// Format version.
    pub record_version: u32,
    /// Every run that contributed to this content, oldest first.
    pub runs: Vec<RunInfo>,
    /// Every image, by source reference.
    pub images: Vec<ImageRecord>,
    /// Every blob the images reference, each once.
    pub blobs: Vec<BlobRecord>,
    /// Blobs in a disk mirror that belong to no image above: what did arrive of images that
    /// failed (`--continue-on-error`), kept so a later run resumes from them. Listed so the
    /// record still names every file of the layout and `verify` checks them too; dropped
    /// from here once an image references them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unfinished_blobs: Vec<BlobRecord>,
    /// Sums over the images and blobs above.
    pub totals: Totals,
}

/// One run of `bootstrap mirror`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunInfo {
    /// `bootstrap <version>`.
    pub tool: String,
    /// The ImageSetConfiguration used, if any.
    pub config: Option<ConfigInfo>,
    /// Where content came from (`docker://...` or `file://...`).
    pub source: String,
    /// Where it went.
    pub destination: String,
    /// RFC 3339 UTC start time.
    pub started: String,
    /// RFC 3339 UTC end time.
    pub finished: String,
    /// Images this run mirrored.
    pub images: usize,
    /// Bytes this run actually moved (blobs already present are not counted).
    pub bytes_transferred: u64,
}

/// The input configuration of a run.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigInfo {
    /// The path given on the command line.
    pub path: String,
    /// sha256 of the file's bytes.
    pub sha256: String,
}

/// One mirrored image.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImageRecord {
    /// The reference as it was mirrored from (`quay.io/a/b:v1` or `...@sha256:...`).
    pub source: String,
    /// The repository path under the destination prefix (`a/b`, the source's; or where the
    /// content's kind puts it, `openshift/release`).
    pub path: String,
    /// The destination tag, when it is not the source's (`4.18.3-x86_64` for a release image,
    /// a catalog's `targetTag`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// What kind of content it is: `release`, `operator`, `catalog` (absent: an additional
    /// image).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// The full destination reference.
    pub destination: String,
    /// The digest of the top manifest at the destination.
    pub digest: Digest,
    /// The source's digest, when the destination's differs (an index rewritten to the kept
    /// platforms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_digest: Option<Digest>,
    /// Media type of the top manifest.
    pub media_type: String,
    /// Size of the top manifest.
    pub size: u64,
    /// Total bytes of the manifests and blobs kept for this image.
    pub total_size: u64,
    /// Platforms kept (`linux/amd64`); empty for a manifest that names none.
    pub platforms: Vec<String>,
    /// Platforms the source index offered but the configuration filtered out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub platforms_dropped: Vec<String>,
    /// The platform filter the configuration applied to this image (`amd64` from
    /// `mirror.platform.architectures`, `linux/arm64` from a `platforms` list); absent when
    /// every platform is kept, and in records written before filters were per image.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub platform_filter: Vec<String>,
    /// Child manifests kept, for an index.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub manifests: Vec<ManifestRecord>,
    /// Digests of the blobs this image needs (details in the top-level `blobs`).
    pub blobs: Vec<Digest>,
    /// For a signature, attestation, SBOM or referrer: the image it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attached_to: Option<AttachedRecord>,
}

/// The image a signature, attestation, SBOM or referrer belongs to.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AttachedRecord {
    /// `signature`, `attestation`, `sbom` or `referrer`.
    pub kind: String,
    /// The source reference of the image.
    pub image: String,
    /// The manifest it signs or describes (the image's top manifest, or one of its children).
    pub digest: Digest,
}

impl ImageRecord {
    /// The image as the cluster resources see it: its source, its destination's registry and
    /// repository, and its category (absent: an additional image).
    pub fn mirrored(&self) -> Result<MirroredImage, RecordImageError> {
        let bad = |reason: String| RecordImageError {
            image: self.source.clone(),
            reason,
        };
        let dest = ImageRef::parse(&self.destination).map_err(|e| bad(e.to_string()))?;
        // A catalog read from an OCI layout (`oci://PATH`) has no registry source; catalogs
        // get CatalogSources, never mirror-set entries, so its destination stands in.
        let source = if self.source.starts_with("oci://") {
            dest.clone()
        } else {
            ImageRef::parse(&self.source).map_err(|e| bad(e.to_string()))?
        };
        let category = match self.category.as_deref() {
            None => Category::Generic,
            Some(c) => {
                Category::from_name(c).ok_or_else(|| bad(format!("unknown category '{c}'")))?
            }
        };
        Ok(MirroredImage {
            source,
            registry: dest.registry,
            repository: dest.repository,
            category,
        })
    }
}

/// A child manifest of an index.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManifestRecord {
    /// Its digest.
    pub digest: Digest,
    /// Its media type.
    pub media_type: String,
    /// Its size.
    pub size: u64,
    /// Its platform, when the index names one.
    pub platform: Option<String>,
}

/// A blob.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BlobRecord {
    /// Its digest.
    pub digest: Digest,
    /// Its size.
    pub size: u64,
}

/// Sums.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Totals {
    /// Images.
    pub images: usize,
    /// Distinct manifests (top-level and children).
    pub manifests: usize,
    /// Distinct blobs.
    pub blobs: usize,
    /// Bytes of distinct blobs and manifests.
    pub bytes: u64,
}

impl MirrorRecord {
    /// A record of these images, with one run.
    pub fn new(run: RunInfo, images: Vec<ImageRecord>, blobs: Vec<BlobRecord>) -> Self {
        let mut r = MirrorRecord {
            record_version: RECORD_VERSION,
            runs: vec![run],
            images,
            blobs,
            unfinished_blobs: Vec::new(),
            totals: Totals::default(),
        };
        r.normalise();
        r
    }

    /// Reads a record, naming the file on failure.
    pub fn load(path: &Path) -> Result<Self> {
        let text = crate::bounded::read_regular_to_string(path, crate::bounded::LAYOUT_FILE_MAX)?;
        Self::parse(path, &text)
    }

    /// A record from the text read from `path` (named on failure).
    pub fn parse(path: &Path, text: &str) -> Result<Self> {
        serde_json::from_str(text).with_context(|| {
            format!(
                "parsing mirror record {}: it is not a bootstrap mirror record",
                path.display()
            )
        })
    }

    /// Folds an earlier record of the same layout in: its runs come first, and its images stay
    /// unless this run mirrored the same source reference again.
    pub fn merge_earlier(&mut self, earlier: MirrorRecord) {
        let mut runs = earlier.runs;
        runs.append(&mut self.runs);
        self.runs = runs;
        for img in earlier.images {
            if !self.images.iter().any(|i| i.source == img.source) {
                self.images.push(img);
            }
        }
        let mut sizes: BTreeMap<Digest, u64> = earlier
            .blobs
            .into_iter()
            .map(|b| (b.digest, b.size))
            .collect();
        sizes.extend(self.blobs.drain(..).map(|b| (b.digest, b.size)));
        self.blobs = sizes
            .into_iter()
            .map(|(digest, size)| BlobRecord { digest, size })
            .collect();
        self.unfinished_blobs.extend(earlier.unfinished_blobs);
        self.normalise();
    }

    /// Adds blobs of images that did not finish (present in the layout, referenced by no
    /// image of the record); those an image references stay out.
    pub fn add_unfinished(&mut self, blobs: impl IntoIterator<Item = BlobRecord>) {
        self.unfinished_blobs.extend(blobs);
        self.normalise();
    }

    /// Sorts, drops blobs no image references, and recomputes the totals.
    fn normalise(&mut self) {
        self.images.sort_by(|a, b| a.source.cmp(&b.source));
        let referenced: std::collections::BTreeSet<&Digest> =
            self.images.iter().flat_map(|i| i.blobs.iter()).collect();
        self.blobs.retain(|b| referenced.contains(&b.digest));
        self.blobs.sort();
        self.blobs.dedup();
        let mut manifests: BTreeMap<&Digest, u64> = BTreeMap::new();
        for i in &self.images {
            manifests.insert(&i.digest, i.size);
            for m in &i.manifests {
                manifests.insert(&m.digest, m.size);
            }
        }
        self.unfinished_blobs
            .retain(|b| !referenced.contains(&b.digest) && !manifests.contains_key(&b.digest));
        self.unfinished_blobs.sort();
        self.unfinished_blobs.dedup_by(|a, b| a.digest == b.digest);
        self.totals = Totals {
            images: self.images.len(),
            manifests: manifests.len(),
            blobs: self.blobs.len(),
            bytes: self.blobs.iter().map(|b| b.size).sum::<u64>() + manifests.values().sum::<u64>(),
        };
    }

    /// The release image for `version` (`4.18.3`): a `release` image whose destination tag or
    /// source tag is the version, or the version and an architecture (`4.18.3-x86_64`).
    pub fn release(&self, version: &str) -> Option<&ImageRecord> {
        let matches = |tag: &str| {
            tag == version
                || tag
                    .strip_prefix(version)
                    .is_some_and(|rest| rest.starts_with('-'))
        };
        // Components are tagged `<version>-<arch>-<name>` in their own repository.
        self.images.iter().find(|i| {
            i.category.as_deref() == Some(Category::Release.name())
                && i.path != crate::openshift::release::COMPONENTS_REPO
                && (i.tag.as_deref().is_some_and(matches)
                    || ImageRef::parse(&i.source)
                        .ok()
                        .and_then(|r| r.tag)
                        .is_some_and(|t| matches(&t)))
        })
    }

    /// The release image mirrored from a source pinned to `digest` (or stored under it): the
    /// record of a release named by digest in an inventory.
    pub fn release_by_digest(&self, digest: &Digest) -> Option<&ImageRecord> {
        self.images.iter().find(|i| {
            i.category.as_deref() == Some(Category::Release.name())
                && i.path
                    .ends_with(crate::openshift::release::RELEASE_IMAGES_REPO)
                && (i.digest == *digest
                    || i.source_digest.as_ref() == Some(digest)
                    || ImageRef::parse(&i.source)
                        .ok()
                        .and_then(|r| r.digest)
                        .as_ref()
                        == Some(digest))
        })
    }

    /// Every image as the cluster resources see it: source, destination and category; the
    /// first image that cannot be read back is the error. Signatures and referrers live in
    /// their images' repositories and add no mapping of their own.
    pub fn mirrored_images(&self) -> Result<Vec<MirroredImage>, RecordImageError> {
        self.images
            .iter()
            .filter(|i| i.attached_to.is_none())
            .map(ImageRecord::mirrored)
            .collect()
    }

    /// install-config.yaml's `imageDigestSources` for this mirror, exactly as the cluster
    /// resources written beside the record have them (catalogs excluded: they get
    /// CatalogSources).
    pub fn digest_sources(&self) -> Result<Vec<DigestSource>, RecordImageError> {
        Ok(ClusterResources::new(&self.mirrored_images()?).digest_sources())
    }

    /// Writes the record atomically, pretty-printed JSON.
    pub fn write(&self, path: &Path) -> Result<()> {
        let mut bytes = serde_json::to_vec_pretty(self)?;
        bytes.push(b'\n');
        write_atomic(path, &bytes)
            .with_context(|| format!("writing mirror record {}", path.display()))
    }
}

/// An image a disk mirror's `index.json` names, described as its record would describe it:
/// what `mirror --from` would push, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexedImage {
    /// The entry's `org.opencontainers.image.ref.name` (the source reference).
    pub name: String,
    /// The manifest digest the entry points to.
    pub digest: Digest,
    /// The destination repository its annotations place it at (else the source's).
    pub path: String,
    /// The destination tag its annotations give, if any.
    pub tag: Option<String>,
    /// Its category (absent: an additional image).
    pub category: Option<String>,
}

impl IndexedImage {
    fn placement(&self) -> String {
        placement_text(&self.path, self.tag.as_deref(), self.category.as_deref())
    }
}

fn placement_text(path: &str, tag: Option<&str>, category: Option<&str>) -> String {
    let tag = tag.map(|t| format!(":{t}")).unwrap_or_default();
    format!("{path}{tag} ({})", category.unwrap_or("generic"))
}

/// Which list of a verification a difference belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DifferenceKind {
    /// The record lists it, the layout lacks it.
    Missing,
    /// Present, but not as recorded.
    Corrupt,
    /// Present, but no record lists it.
    Unexpected,
}

/// One way a disk mirror's `index.json` differs from its mirror record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IndexDifference {
    /// The record lists the image; the index has no entry for it.
    Missing {
        /// Its source reference.
        name: String,
        /// Its recorded digest.
        digest: Digest,
    },
    /// The index names an image the record does not list.
    Unexpected {
        /// The entry's name.
        name: String,
        /// The digest it points to.
        digest: Digest,
    },
    /// Two or more entries carry one name.
    Duplicate {
        /// The name.
        name: String,
        /// The digests its entries point to.
        digests: Vec<Digest>,
    },
    /// The entry points to another manifest than the record's.
    Digest {
        /// The entry's name.
        name: String,
        /// What the index says.
        index: Digest,
        /// What the record says.
        record: Digest,
    },
    /// The entry's annotations place the image elsewhere than the record does.
    Placement {
        /// The entry's name.
        name: String,
        /// The digest it points to.
        digest: Digest,
        /// Where the index puts it (`repo[:tag] (category)`).
        index: String,
        /// Where the record puts it.
        record: String,
    },
}

impl IndexDifference {
    /// Which list of a verification it belongs to.
    pub fn kind(&self) -> DifferenceKind {
        match self {
            IndexDifference::Missing { .. } => DifferenceKind::Missing,
            IndexDifference::Unexpected { .. } => DifferenceKind::Unexpected,
            _ => DifferenceKind::Corrupt,
        }
    }
}

impl std::fmt::Display for IndexDifference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IndexDifference::Missing { name, digest } => write!(
                f,
                "index.json: no entry for {name} ({digest}), which the record lists"
            ),
            IndexDifference::Unexpected { name, digest } => write!(
                f,
                "index.json: {name} ({digest}) is not in the mirror record"
            ),
            IndexDifference::Duplicate { name, digests } => {
                let digests: Vec<String> = digests.iter().map(Digest::to_string).collect();
                write!(
                    f,
                    "index.json: {name} has {} entries ({}); the record lists it once",
                    digests.len(),
                    digests.join(", ")
                )
            }
            IndexDifference::Digest {
                name,
                index,
                record,
            } => write!(
                f,
                "index.json: {name} points to {index}, the record says {record}"
            ),
            IndexDifference::Placement {
                name,
                digest,
                index,
                record,
            } => write!(
                f,
                "index.json: {name} ({digest}) is placed at {index}, the record says {record}"
            ),
        }
    }
}

impl MirrorRecord {
    /// How the images a layout's `index.json` names differ from this record: every recorded
    /// image must be there once, at its digest and placement, and nothing else. The record is
    /// the authority: an index (or `SHA256SUMS`) rewritten to match tampered content still
    /// differs from it.
    pub fn index_differences(&self, indexed: &[IndexedImage]) -> Vec<IndexDifference> {
        let mut by_name: BTreeMap<&str, Vec<&IndexedImage>> = BTreeMap::new();
        for i in indexed {
            by_name.entry(i.name.as_str()).or_default().push(i);
        }
        let mut out = Vec::new();
        for (name, entries) in &by_name {
            if entries.len() > 1 {
                out.push(IndexDifference::Duplicate {
                    name: name.to_string(),
                    digests: entries.iter().map(|e| e.digest.clone()).collect(),
                });
            }
        }
        for img in &self.images {
            let Some(entries) = by_name.get(img.source.as_str()) else {
                out.push(IndexDifference::Missing {
                    name: img.source.clone(),
                    digest: img.digest.clone(),
                });
                continue;
            };
            let recorded = placement_text(&img.path, img.tag.as_deref(), img.category.as_deref());
            for e in entries {
                if e.digest != img.digest {
                    out.push(IndexDifference::Digest {
                        name: img.source.clone(),
                        index: e.digest.clone(),
                        record: img.digest.clone(),
                    });
                } else if e.placement() != recorded {
                    out.push(IndexDifference::Placement {
                        name: img.source.clone(),
                        digest: e.digest.clone(),
                        index: e.placement(),
                        record: recorded.clone(),
                    });
                }
            }
        }
        for (name, entries) in &by_name {
            if !self.images.iter().any(|i| i.source == *name) {
                for e in entries {
                    out.push(IndexDifference::Unexpected {
                        name: name.to_string(),
                        digest: e.digest.clone(),
                    });
                }
            }
        }
        out
    }
}

/// Writes `SHA256SUMS` over every file of a layout (in `sha256sum` format, paths relative to the
/// layout). Blob digests are taken from their names: a blob is only ever renamed into place after
/// its content matched, and `bootstrap verify` re-hashes them. Other files are hashed.
pub fn write_sums(root: &Path) -> Result<()> {
    let mut lines = Vec::new();
    for rel in layout_files(root)? {
        let hex = match rel.strip_prefix("blobs/sha256/") {
            Some(h) if h.len() == 64 => h.to_string(),
            _ => {
                let bytes = fs_err::read(root.join(&rel))?;
                Digest::of(&bytes).hex().to_string()
            }
        };
        lines.push(format!("{hex}  {rel}\n"));
    }
    write_atomic(&root.join(SUMS_FILE), lines.concat().as_bytes()).context("writing SHA256SUMS")
}

/// Every file of a layout relative to its root, sorted, without `SHA256SUMS` itself and the
/// in-progress directory.
pub fn layout_files(root: &Path) -> Result<Vec<String>> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) -> Result<()> {
        for entry in fs_err::read_dir(dir)? {
            let entry = entry?;
            let path = entry.path();
            let rel = path
                .strip_prefix(root)
                .expect("walked path is under root")
                .to_string_lossy()
                .into_owned();
            if rel == SUMS_FILE || rel == PARTIAL_DIR || rel.starts_with('.') && !rel.contains('/')
            {
                continue;
            }
            if entry.file_type()?.is_dir() {
                walk(root, &path, out)?;
            } else {
                out.push(rel);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(root, root, &mut out)?;
    out.sort();
    Ok(out)
}

/// Now, as RFC 3339 UTC.
pub fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .unwrap_or_else(|_| time::OffsetDateTime::now_utc())
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const D1: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000001";

    fn image(
        source: &str,
        destination: &str,
        tag: Option<&str>,
        category: Option<&str>,
    ) -> ImageRecord {
        ImageRecord {
            source: source.into(),
            path: String::new(),
            tag: tag.map(String::from),
            category: category.map(String::from),
            destination: destination.into(),
            digest: D1.parse().unwrap(),
            source_digest: None,
            media_type: "application/vnd.oci.image.manifest.v1+json".into(),
            size: 1,
            total_size: 1,
            platforms: Vec::new(),
            platforms_dropped: Vec::new(),
            platform_filter: Vec::new(),
            manifests: Vec::new(),
            blobs: Vec::new(),
            attached_to: None,
        }
    }

    fn record(images: Vec<ImageRecord>) -> MirrorRecord {
        let run = RunInfo {
            tool: "bootstrap test".into(),
            config: None,
            source: "docker://".into(),
            destination: "docker://mirror.example:8443".into(),
            started: String::new(),
            finished: String::new(),
            images: images.len(),
            bytes_transferred: 0,
        };
        MirrorRecord::new(run, images, Vec::new())
    }

    /// Unfinished blobs survive a merge, and leave the list once a later run mirrors the
    /// image that needs them (so they are listed once, as that image's).
    #[test]
    fn unfinished_blobs_are_kept_until_an_image_claims_them() {
        const D2: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000002";
        let blob = |d: &str| BlobRecord {
            digest: d.parse().unwrap(),
            size: 7,
        };
        let mut earlier = record(Vec::new());
        earlier.add_unfinished([blob(D2), blob(D2)]);
        assert_eq!(earlier.unfinished_blobs, [blob(D2)]);
        let mut later = record(Vec::new());
        later.merge_earlier(earlier.clone());
        assert_eq!(later.unfinished_blobs, [blob(D2)]);
        let mut img = image("q/a:1", "m/a:1", None, None);
        img.blobs = vec![D2.parse().unwrap()];
        let mut finished = MirrorRecord::new(later.runs[0].clone(), vec![img], vec![blob(D2)]);
        finished.merge_earlier(earlier);
        assert!(finished.unfinished_blobs.is_empty());
        assert_eq!(finished.blobs, [blob(D2)]);
    }

    /// The index check `mirror --from` and `verify` share: an untouched index matches, and
    /// each tampering is named (moved, repointed, dropped, doubled, added).
    #[test]
    fn index_differences_name_every_tampering() {
        const D2: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000002";
        let mut img = image("q.io/a/b:1", "m/a/b:1", None, None);
        img.path = "a/b".into();
        let rec = record(vec![img]);
        let entry = |name: &str, digest: &str, path: &str| IndexedImage {
            name: name.into(),
            digest: digest.parse().unwrap(),
            path: path.into(),
            tag: None,
            category: None,
        };
        let text = |indexed: &[IndexedImage]| -> Vec<String> {
            rec.index_differences(indexed)
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        assert!(text(&[entry("q.io/a/b:1", D1, "a/b")]).is_empty());
        assert_eq!(
            text(&[entry("q.io/a/b:1", D1, "openshift/release")]),
            [format!("index.json: q.io/a/b:1 ({D1}) is placed at openshift/release (generic), the record says a/b (generic)")]
        );
        assert_eq!(
            text(&[entry("q.io/a/b:1", D2, "a/b")]),
            [format!(
                "index.json: q.io/a/b:1 points to {D2}, the record says {D1}"
            )]
        );
        assert_eq!(
            text(&[]),
            [format!(
                "index.json: no entry for q.io/a/b:1 ({D1}), which the record lists"
            )]
        );
        let doubled = text(&[
            entry("q.io/a/b:1", D1, "a/b"),
            entry("q.io/a/b:1", D1, "a/b"),
        ]);
        assert_eq!(
            doubled,
            [format!(
                "index.json: q.io/a/b:1 has 2 entries ({D1}, {D1}); the record lists it once"
            )]
        );
        let extra = text(&[entry("q.io/a/b:1", D1, "a/b"), entry("q.io/x:1", D2, "x")]);
        assert_eq!(
            extra,
            [format!(
                "index.json: q.io/x:1 ({D2}) is not in the mirror record"
            )]
        );
    }

    fn sample() -> MirrorRecord {
        let m = "mirror.example:8443/mirror";
        record(vec![
            image(
                "quay.io/openshift-release-dev/ocp-release:4.18.3-x86_64",
                &format!("{m}/openshift/release-images:4.18.3-x86_64"),
                Some("4.18.3-x86_64"),
                Some("release"),
            ),
            image(
                &format!("quay.io/openshift-release-dev/ocp-v4.0-art-dev@{D1}"),
                &format!("{m}/openshift/release@{D1}"),
                None,
                Some("release"),
            ),
            image(
                "quay.io/openshift-release-dev/ocp-release:4.18.30-x86_64",
                &format!("{m}/openshift/release-images:4.18.30-x86_64"),
                Some("4.18.30-x86_64"),
                Some("release"),
            ),
            image(
                &format!("nvcr.io/nvidia/gpu-operator@{D1}"),
                &format!("{m}/nvidia/gpu-operator@{D1}"),
                None,
                Some("operator"),
            ),
            image(
                "registry.redhat.io/redhat/redhat-operator-index:v4.18",
                &format!("{m}/redhat/redhat-operator-index:v4.18"),
                None,
                Some("catalog"),
            ),
            image(
                "registry.redhat.io/ubi9/ubi:9.4",
                &format!("{m}/ubi9/ubi:9.4"),
                None,
                None,
            ),
        ])
    }

    #[test]
    fn the_release_of_a_version_is_found_by_tag_with_or_without_its_architecture() {
        let rec = sample();
        let found = |v: &str| rec.release(v).map(|i| i.source.as_str());
        assert_eq!(
            found("4.18.3"),
            Some("quay.io/openshift-release-dev/ocp-release:4.18.3-x86_64")
        );
        assert_eq!(
            found("4.18.3-x86_64"),
            Some("quay.io/openshift-release-dev/ocp-release:4.18.3-x86_64")
        );
        assert_eq!(
            found("4.18.30"),
            Some("quay.io/openshift-release-dev/ocp-release:4.18.30-x86_64")
        );
        assert_eq!(found("4.18"), None, "a prefix is not a version");
        assert_eq!(found("9.4"), None, "only release images count");
    }

    /// Regression: components tagged `<version>-<arch>-<name>` (as oc-mirror tags them) must not
    /// be taken for the release image of their version.
    #[test]
    fn a_tagged_component_is_not_the_release_of_its_version() {
        let m = "mirror.example:8443/mirror";
        let mut component = image(
            &format!("quay.io/openshift-release-dev/ocp-v4.0-art-dev@{D1}"),
            &format!("{m}/openshift/release:4.18.3-x86_64-etcd@{D1}"),
            Some("4.18.3-x86_64-etcd"),
            Some("release"),
        );
        component.path = crate::openshift::release::COMPONENTS_REPO.into();
        let rec = record(vec![
            component,
            image(
                &format!("quay.io/openshift-release-dev/ocp-release@{D1}"),
                &format!("{m}/openshift/release-images:4.18.3-x86_64@{D1}"),
                Some("4.18.3-x86_64"),
                Some("release"),
            ),
        ]);
        assert_eq!(
            rec.release("4.18.3").map(|i| i.tag.as_deref()),
            Some(Some("4.18.3-x86_64"))
        );
    }

    #[test]
    fn digest_sources_map_what_was_mirrored_by_digest_and_leave_out_catalogs_and_tags() {
        let sources = sample().digest_sources().unwrap();
        assert_eq!(
            sources,
            [
                DigestSource {
                    source: "nvcr.io/nvidia".into(),
                    mirrors: vec!["mirror.example:8443/mirror/nvidia".into()],
                },
                // Release images are placed under openshift/, not at their source path:
                // each repository maps on its own.
                DigestSource {
                    source: "quay.io/openshift-release-dev/ocp-release".into(),
                    mirrors: vec!["mirror.example:8443/mirror/openshift/release-images".into()],
                },
                DigestSource {
                    source: "quay.io/openshift-release-dev/ocp-v4.0-art-dev".into(),
                    mirrors: vec!["mirror.example:8443/mirror/openshift/release".into()],
                },
            ]
        );
    }

    #[test]
    fn an_image_with_an_unknown_category_is_named_in_the_error() {
        let rec = record(vec![image(
            "quay.io/a/b:1",
            "mirror.example:8443/a/b:1",
            None,
            Some("firmware"),
        )]);
        let e = rec.digest_sources().unwrap_err();
        assert_eq!(
            e.to_string(),
            "image quay.io/a/b:1: unknown category 'firmware'"
        );
    }
}
