//! A disk mirror is checked before it is pushed (`mirror --from`): its `index.json` must match
//! the mirror record the disk mirror wrote beside it (every image once, at its digest and its
//! placement; nothing more), and every blob an image needs must be a regular file of its
//! declared size. The record is the authority: an index or `SHA256SUMS` rewritten to match
//! tampered content still differs from it. `--accept-unrecorded` is the one way past, for
//! layouts another tool made; the report and the status file say it was taken.

use super::plan::{self, Placement, ResolvedImage};
use super::signatures::{Attached, ATTACHED_ANNOTATION};
use crate::oci::digest::Digest;
use crate::oci::layout::OciLayout;
use crate::oci::reference::ImageRef;
use crate::openshift::cluster::Category;
use crate::openshift::record::{IndexedImage, MirrorRecord, RECORD_FILE};
use anyhow::{bail, Context, Result};

/// One named entry of a layout's `index.json`: what `mirror --from` pushes, and where.
pub struct LayoutImage {
    /// The entry's name, exactly as written.
    pub name: String,
    /// The name as a reference.
    pub source: ImageRef,
    /// The manifest it points to.
    pub digest: Digest,
    /// Where its annotations place it.
    pub placement: Placement,
    /// For a signature, attestation or referrer: what it belongs to.
    pub attached: Option<Attached>,
}

impl LayoutImage {
    /// The entry as a record would describe it.
    pub fn indexed(&self) -> IndexedImage {
        let category = self.placement.category;
        IndexedImage {
            name: self.name.clone(),
            digest: self.digest.clone(),
            path: self
                .placement
                .repository
                .clone()
                .unwrap_or_else(|| self.source.repository.clone()),
            tag: self.placement.tag.clone(),
            category: (category != Category::Generic).then(|| category.name().to_string()),
        }
    }
}

/// Every named entry of the layout's `index.json`, with its placement; entries without a
/// name are neither pushed nor listed.
pub fn layout_images(layout: &OciLayout) -> Result<Vec<LayoutImage>> {
    let index_path = layout.root().join("index.json");
    let mut images = Vec::new();
    for entry in layout.index()? {
        let Some(name) = entry.ref_name() else {
            continue;
        };
        let source = ImageRef::parse(name).with_context(|| {
            format!(
                "{} names an image '{name}' that is not a full reference; was it written by bootstrap mirror?",
                index_path.display()
            )
        })?;
        let origin = format!("{} entry {name}", index_path.display());
        let placement = plan::placement_from_annotations(&entry.annotations, &origin)?;
        let attached = entry
            .annotations
            .get(ATTACHED_ANNOTATION)
            .map(|v| Attached::from_annotation(v, &origin))
            .transpose()?;
        images.push(LayoutImage {
            name: name.to_string(),
            source,
            digest: entry.digest.clone(),
            placement,
            attached,
        });
    }
    Ok(images)
}

/// How a pushed layout was checked, for the report and the status file.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", tag = "result")]
pub enum LayoutCheck {
    /// `index.json` matched the layout's mirror record.
    #[serde(rename_all = "camelCase")]
    MatchesRecord {
        /// The record it was checked against.
        record: String,
    },
    /// `--accept-unrecorded`: pushed without the record's check.
    #[serde(rename_all = "camelCase")]
    AcceptedUnrecorded {
        /// Why the check could not vouch for it: no record, or how the layout differs.
        reason: String,
    },
}

impl std::fmt::Display for LayoutCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LayoutCheck::MatchesRecord { record } => {
                write!(f, "source layout matches its mirror record {record}")
            }
            LayoutCheck::AcceptedUnrecorded { reason } => write!(
                f,
                "source layout NOT checked against a mirror record (--accept-unrecorded): {reason}"
            ),
        }
    }
}

/// The advice every refusal ends with.
const FIX: &str = "copy the disk mirror again from its original media, or mirror to disk again; \
only for a layout another tool made, and that you trust, pass --accept-unrecorded";

/// Checks the layout's index against its mirror record before anything is pushed. Without
/// `accept_unrecorded` a missing record or any difference is refused, naming the directory,
/// each image and what differs; with it, the run goes on and says why it could not vouch.
pub fn check(
    layout: &OciLayout,
    images: &[LayoutImage],
    accept_unrecorded: bool,
) -> Result<LayoutCheck> {
    let dir = layout.root().display();
    let record_path = layout.root().join(RECORD_FILE);
    if fs_err::symlink_metadata(&record_path).is_err() {
        let reason = format!("{dir} has no mirror record ({RECORD_FILE})");
        if accept_unrecorded {
            return Ok(LayoutCheck::AcceptedUnrecorded { reason });
        }
        bail!(
            "{reason}, so nothing vouches for what it holds; nothing was pushed. A disk mirror \
             written by bootstrap mirror carries one: {FIX}"
        );
    }
    let record = MirrorRecord::load(&record_path)?;
    let indexed: Vec<IndexedImage> = images.iter().map(LayoutImage::indexed).collect();
    let differences = record.index_differences(&indexed);
    if differences.is_empty() {
        return Ok(LayoutCheck::MatchesRecord {
            record: record_path.display().to_string(),
        });
    }
    let lines: Vec<String> = differences.iter().map(|d| format!("  {d}")).collect();
    if accept_unrecorded {
        return Ok(LayoutCheck::AcceptedUnrecorded {
            reason: format!(
                "{dir} differs from its mirror record {}: {}",
                record_path.display(),
                differences
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        });
    }
    bail!(
        "{dir} does not match its mirror record {} ({} difference(s)); nothing was pushed:\n{}\n\
         The layout was changed after the disk mirror wrote it, or is damaged: {FIX}",
        record_path.display(),
        differences.len(),
        lines.join("\n")
    )
}

/// Checks, before any push, that every blob the resolved images need is a regular file of
/// its declared size (a FIFO, a device or a symlink would hang or feed a push without end).
pub fn check_blob_files(layout: &OciLayout, images: &[ResolvedImage]) -> Result<()> {
    let mut seen = std::collections::BTreeSet::new();
    for image in images {
        for blob in &image.blobs {
            if !seen.insert(&blob.digest) {
                continue;
            }
            if let Some(r) = layout.archive_reader() {
                if r.size(&blob.digest).is_none() && r.base_size(&blob.digest).is_some() {
                    // A delta's base content: checked at the destination instead.
                    continue;
                }
            }
            let refuse = |what: String| {
                anyhow::anyhow!(
                    "{}: blob {} of {} {what}; nothing was pushed: {FIX}",
                    layout.label(),
                    blob.digest,
                    image.source
                )
            };
            let Some((path, start, size)) = layout.blob_location(&blob.digest) else {
                return Err(refuse("is missing".to_string()));
            };
            if start == 0 {
                // A file of its own: a FIFO, a device or a symlink is refused.
                crate::bounded::open_regular(&path)
                    .map_err(|e| refuse(format!("cannot be pushed: {e}")))?;
            }
            if size != blob.size {
                return Err(refuse(format!(
                    "is {size} bytes at {}, its manifest says {}",
                    path.display(),
                    blob.size
                )));
            }
        }
    }
    Ok(())
}
