//! What a run reports: the summary (`--output json` prints exactly it), the images mirrored
//! for the text listing, and what was not mirrored, for the engineer to act on.

use super::content;
use super::dryrun::DryRun;
use super::status::{ImageStatus, Outcome, StatusFile};
use crate::oci::digest::Digest;
use crate::output::human_bytes;
use std::path::Path;

/// The summary a run prints.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Source.
    pub source: String,
    /// Destination.
    pub destination: String,
    /// Images mirrored (signatures, attestations and SBOMs carried with them included).
    pub images: usize,
    /// Of `images`, the signatures, attestations and SBOMs carried with the images they sign.
    pub attachments: usize,
    /// Unique blobs in the set.
    pub blobs: usize,
    /// Blobs copied this run.
    pub blobs_copied: u64,
    /// Blobs mounted from another repository.
    pub blobs_mounted: u64,
    /// Blobs the destination already had.
    pub blobs_present: u64,
    /// Images the destination already held exactly; nothing of theirs was sent.
    pub images_unchanged: usize,
    /// Images that failed or were skipped (see the status file).
    pub images_failed: usize,
    /// Bytes moved this run.
    pub bytes_transferred: u64,
    /// Bytes an interrupted attempt or run had moved and this run continued from.
    pub bytes_resumed: u64,
    /// Transient failures that were retried.
    pub retries: u64,
    /// Bytes of the whole set.
    pub bytes_total: u64,
    /// Seconds the run took.
    pub seconds: f64,
    /// Where the mirror record was written.
    pub record: String,
    /// Where the per-image status was written.
    pub status: String,
    /// Where the cluster's mirror configuration (IDMS, ITMS, install-config snippet) was
    /// written; registry destinations only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_resources: Option<String>,
    /// Release payloads chosen (mirror.platform).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub releases: Vec<content::ReleaseInfo>,
    /// Catalogs filtered and rebuilt (mirror.operators).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub catalogs: Vec<content::CatalogInfo>,
    /// Helm charts mirrored (mirror.helm), with the images found in each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub charts: Vec<super::helm::ChartInfo>,
    /// The update graph data image built (mirror.platform.graph).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graph: Option<super::graph_image::GraphInfo>,
    /// For a push from a disk mirror: whether it matched its mirror record, or was pushed
    /// with `--accept-unrecorded` (and why that was needed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layout_check: Option<super::recorded::LayoutCheck>,
    /// The record's SSH signature, with `--sign-key`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signature: Option<Box<RecordSignature>>,
    /// For an `archive://` destination: the sealed archive (absent while it is unfinished).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archive: Option<Box<super::archive::writer::Sealed>>,
}

/// `RECORD.sig` and how to check it.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordSignature {
    /// The signature file.
    pub file: String,
    /// The signing key's SHA256 fingerprint.
    pub fingerprint: String,
    /// The line for the auditor's allowed_signers file.
    pub allowed_signers: String,
}

impl From<crate::sshsig::Signed> for RecordSignature {
    fn from(s: crate::sshsig::Signed) -> Self {
        RecordSignature {
            file: s.signature.display().to_string(),
            fingerprint: s.fingerprint,
            allowed_signers: s.allowed_signers,
        }
    }
}

/// One image at the destination, for the text listing.
#[derive(Debug)]
pub struct MirroredImage {
    /// Its root manifest's digest.
    pub digest: Digest,
    /// Where it came from.
    pub source: String,
    /// The platforms kept.
    pub platforms: Vec<String>,
}

/// The result of a run that copied.
#[derive(Debug, serde::Serialize)]
pub struct MirrorReport {
    /// The counts, as `--output json` prints them.
    #[serde(flatten)]
    pub summary: Summary,
    /// Every image at the destination.
    #[serde(skip)]
    pub mirrored: Vec<MirroredImage>,
    /// Why images were not mirrored, one line each, then what to do; empty when all were.
    #[serde(skip)]
    pub not_mirrored: Vec<String>,
}

impl MirrorReport {
    /// True when every image was mirrored (the exit code is 0).
    pub fn complete(&self) -> bool {
        self.summary.images_failed == 0
    }
}

/// The lines that say which images were not mirrored, why, and what to do.
pub(super) fn not_mirrored(status: &StatusFile, status_path: &Path) -> Vec<String> {
    let failed = |s: &&ImageStatus| matches!(s.outcome, Outcome::Failed | Outcome::Skipped);
    let mut lines: Vec<String> = status
        .images
        .iter()
        .filter(failed)
        .map(|s| {
            format!(
                "{} {}: {}",
                s.source,
                s.outcome.as_str(),
                s.error.as_deref().unwrap_or("")
            )
        })
        .collect();
    if !lines.is_empty() {
        lines.push(format!(
            "{} of {} images were not mirrored (see {}); run the same command again to continue",
            status.failed + status.skipped,
            status.images.len(),
            status_path.display()
        ));
    }
    lines
}

/// What `bootstrap mirror` hands the printer: a run's report, or a dry run's plan.
#[derive(Debug, serde::Serialize)]
#[serde(untagged)]
pub enum MirrorResult {
    /// Content was copied (or found in place).
    Mirrored(MirrorReport),
    /// `--dry-run`: the plan; nothing was copied.
    Planned(DryRun),
}

impl std::fmt::Display for MirrorResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MirrorResult::Mirrored(r) => r.fmt(f),
            MirrorResult::Planned(p) => p.fmt(f),
        }
    }
}

impl std::fmt::Display for MirrorReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for img in &self.mirrored {
            let platforms = if img.platforms.is_empty() {
                String::new()
            } else {
                format!(" [{}]", img.platforms.join(", "))
            };
            writeln!(f, "{}  {}{}", img.digest, img.source, platforms)?;
        }
        self.summary.write_totals(f)?;
        self.summary.write_content(f)?;
        self.summary.write_outputs(f)
    }
}

impl Summary {
    /// The lines that count: images and blobs, bytes moved, time; what was resumed and
    /// retried; what was already there.
    fn write_totals(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let attachments = match self.attachments {
            0 => String::new(),
            n => format!(" ({n} of them signatures, attestations or SBOMs)"),
        };
        writeln!(f, "mirrored {} images{attachments} to {}: {} blobs ({} copied, {} mounted, {} already present), {} moved of {}, in {:.1}s",
                self.images,
                self.destination,
                self.blobs,
                self.blobs_copied,
                self.blobs_mounted,
                self.blobs_present,
                human_bytes(self.bytes_transferred),
                human_bytes(self.bytes_total),
                self.seconds
            )?;
        if self.bytes_resumed > 0 || self.retries > 0 {
            writeln!(
                f,
                "continued {} from interrupted transfers; {} transient failures retried",
                human_bytes(self.bytes_resumed),
                self.retries
            )?;
        }
        if self.images_unchanged > 0 {
            writeln!(
                f,
                "{} images were already at the destination",
                self.images_unchanged
            )?;
        }
        Ok(())
    }

    /// The lines about content beyond images: releases, catalogs, charts (with their
    /// warnings), the graph image, the check of a disk mirror against its record.
    fn write_content(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write_releases(f, &self.releases)?;
        for c in &self.catalogs {
            let packages: Vec<String> = c
                .bundles
                .iter()
                .map(|(p, b)| format!("{p} ({})", b.join(", ")))
                .collect();
            writeln!(
                f,
                "catalog {}: {} images; kept {}",
                c.catalog,
                c.images,
                packages.join("; ")
            )?;
            for w in c.warnings() {
                writeln!(f, "warning: {w}")?;
            }
        }
        for c in &self.charts {
            writeln!(
                f,
                "chart {} {} -> {}:{}: {} images",
                c.name,
                c.version,
                c.repository,
                c.tag,
                c.images.len()
            )?;
            for w in c.warnings() {
                writeln!(f, "warning: {w}")?;
            }
        }
        if let Some(g) = &self.graph {
            writeln!(f, "graph data image {} on {}", g.destination, g.base_image)?;
        }
        if let Some(check) = &self.layout_check {
            writeln!(f, "{check}")?;
        }
        Ok(())
    }

    /// The lines naming what the run left behind: the archive, the record and its signature,
    /// the cluster resources, the status file.
    fn write_outputs(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(a) = &self.archive {
            writeln!(
                f,
                "archive: {} chunks, {} ({} blobs) in {}{}",
                a.chunks,
                human_bytes(a.bytes),
                a.blobs,
                a.dir,
                a.base
                    .as_ref()
                    .map(|b| format!("; a delta over {} (sha256 {})", b.path, b.sha256))
                    .unwrap_or_default()
            )?;
        }
        writeln!(f, "record: {}", self.record)?;
        if let Some(s) = &self.signature {
            writeln!(
                f,
                "signed: {} by {}; allowed_signers line: {}",
                s.file, s.fingerprint, s.allowed_signers
            )?;
        }
        if let Some(dir) = &self.cluster_resources {
            writeln!(f, "cluster resources: {dir}")?;
        }
        writeln!(f, "status: {}", self.status)
    }
}

/// One line per release payload, as a run and a dry run print them.
pub(super) fn write_releases(
    f: &mut std::fmt::Formatter<'_>,
    releases: &[content::ReleaseInfo],
) -> std::fmt::Result {
    for r in releases {
        writeln!(
            f,
            "release {} ({}): {} components, {}",
            r.version, r.arch, r.components, r.image
        )?;
    }
    Ok(())
}
