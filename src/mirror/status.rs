//! Partial failure is data: the per-image status file says which images were mirrored, which
//! failed and why, which were skipped because the run stopped first, and which the
//! configuration blocked. The exit code is non-zero whenever an image failed or was skipped,
//! and the mirror record lists only the `ok`.

use super::plan::ResolvedImage;
use super::transfer::BlobOutcome;
use crate::oci::digest::Digest;
use crate::oci::layout::write_atomic;
use crate::oci::reference::ImageRef;
use crate::openshift::record::{now_rfc3339, ImageRecord};
use anyhow::{Context, Result};
use std::path::Path;

/// The status file's name inside a disk mirror.
pub const STATUS_FILE: &str = "mirror-status.json";

/// What became of one image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Mirrored and recorded.
    Ok,
    /// Tried and failed; `error` says why.
    Failed,
    /// Not tried because the run stopped at another failure first.
    Skipped,
    /// Left out on purpose by `mirror.blockedImages` (not a failure).
    Blocked,
    /// Left out as oc-mirror leaves it out, with its warning: an additional image whose
    /// `targetRepo` is not a repository path (not a failure; `error` says why).
    Ignored,
}

impl Outcome {
    /// The word used in the file and in messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Failed => "failed",
            Outcome::Skipped => "skipped",
            Outcome::Blocked => "blocked",
            Outcome::Ignored => "ignored",
        }
    }
}

/// One image's line in the status file.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageStatus {
    /// The source reference.
    pub source: String,
    /// ok, failed or skipped.
    #[serde(rename = "status")]
    pub outcome: Outcome,
    /// Where it was mirrored to (ok only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination: Option<String>,
    /// Its manifest digest at the destination (ok only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<Digest>,
    /// Why it failed or was skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ImageStatus {
    /// A mirrored image, named as its record names its source.
    pub fn ok(rec: &ImageRecord) -> Self {
        ImageStatus {
            source: rec.source.clone(),
            outcome: Outcome::Ok,
            destination: Some(rec.destination.clone()),
            digest: Some(rec.digest.clone()),
            error: None,
        }
    }

    /// An image left out by the blockedImages pattern at `pattern` (a config path).
    pub fn blocked(source: &ImageRef, pattern: &str) -> Self {
        Self::not_ok(source, Outcome::Blocked, format!("blocked by {pattern}"))
    }

    /// An image left out as oc-mirror leaves it out, with oc-mirror's words for why.
    pub fn ignored(source: &ImageRef, why: &str) -> Self {
        Self::not_ok(source, Outcome::Ignored, why.to_string())
    }

    /// An image that failed with `err`.
    pub fn failed(source: &ImageRef, err: &anyhow::Error) -> Self {
        Self::not_ok(source, Outcome::Failed, format!("{err:#}"))
    }

    fn not_ok(source: &ImageRef, outcome: Outcome, error: String) -> Self {
        ImageStatus {
            source: source.to_string(),
            outcome,
            destination: None,
            digest: None,
            error: Some(error),
        }
    }
}

/// The whole status file.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusFile {
    /// Where images came from.
    pub source: String,
    /// Where they went.
    pub destination: String,
    /// When the run started and finished (RFC 3339 UTC).
    pub started: String,
    /// When the run finished.
    pub finished: String,
    /// Images mirrored.
    pub ok: usize,
    /// Images that failed.
    pub failed: usize,
    /// Images not tried.
    pub skipped: usize,
    /// Images left out by mirror.blockedImages.
    pub blocked: usize,
    /// Images left out as oc-mirror leaves them out (an invalid `targetRepo`).
    #[serde(default)]
    pub ignored: usize,
    /// Every image of the run, sorted by source.
    pub images: Vec<ImageStatus>,
    /// For a push from a disk mirror: whether it matched its mirror record, or was pushed
    /// with `--accept-unrecorded` (and why that was needed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout_check: Option<super::recorded::LayoutCheck>,
}

impl StatusFile {
    /// The status of a run that ends now.
    pub fn new(
        source: &str,
        destination: &str,
        started: String,
        mut images: Vec<ImageStatus>,
    ) -> Self {
        images.sort_by(|a, b| a.source.cmp(&b.source));
        let count = |o: Outcome| images.iter().filter(|s| s.outcome == o).count();
        StatusFile {
            source: source.to_string(),
            destination: destination.to_string(),
            started,
            finished: now_rfc3339(),
            ok: count(Outcome::Ok),
            failed: count(Outcome::Failed),
            skipped: count(Outcome::Skipped),
            blocked: count(Outcome::Blocked),
            ignored: count(Outcome::Ignored),
            images,
            layout_check: None,
        }
    }

    /// Writes it atomically.
    pub fn write(&self, path: &Path) -> Result<()> {
        let mut bytes = serde_json::to_vec_pretty(self)?;
        bytes.push(b'\n');
        write_atomic(path, &bytes)
            .with_context(|| format!("writing status file {}", path.display()))
    }
}

/// Splits images into those whose blobs all arrived (their manifests can go) and the status
/// of the rest: failed when one of their blobs failed (with its error), skipped when one was
/// never tried.
pub fn split_by_blobs<'a>(
    images: &[&'a ResolvedImage],
    outcome: &BlobOutcome,
) -> (Vec<&'a ResolvedImage>, Vec<ImageStatus>) {
    let mut ready = Vec::new();
    let mut blocked = Vec::new();
    for image in images {
        let failed = image
            .blobs
            .iter()
            .find_map(|b| outcome.failed.get(&b.digest).map(|e| (&b.digest, e)));
        if let Some((digest, err)) = failed {
            blocked.push(ImageStatus::not_ok(
                &image.source,
                Outcome::Failed,
                format!("blob {digest}: {err}"),
            ));
        } else if let Some(d) = image
            .blobs
            .iter()
            .find(|b| outcome.not_attempted.contains(&b.digest))
        {
            blocked.push(ImageStatus::not_ok(
                &image.source,
                Outcome::Skipped,
                format!("blob {} was not tried: the run stopped at an earlier failure (--continue-on-error carries on)", d.digest),
            ));
        } else {
            ready.push(*image);
        }
    }
    (ready, blocked)
}
