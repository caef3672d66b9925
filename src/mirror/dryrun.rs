//! `bootstrap mirror --dry-run`: everything a run would mirror, resolved against the real
//! source and destination, with sizes, and nothing copied or created. The plan goes to stdout
//! and, as JSON, to a file an engineer can attach to a change request or compare with the
//! record after the real run.

use super::plan::{self, ResolvedImage};
use super::transfer::{Destination, Transfer};
use crate::oci::digest::Digest;
use crate::openshift::record::now_rfc3339;
use crate::output::human_bytes;
use anyhow::{Context, Result};
use std::path::PathBuf;

/// The plan of a run.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DryRun {
    /// Where images come from.
    pub source: String,
    /// Where they would go.
    pub destination: String,
    /// When the plan was made (RFC 3339 UTC).
    pub planned: String,
    /// Every image, sorted by source.
    pub images: Vec<PlannedImage>,
    /// Unique blobs of the whole set.
    pub blobs: usize,
    /// Bytes of the whole set (unique blobs).
    pub bytes_total: u64,
    /// Bytes the run would send at most: blobs of images the destination does not already
    /// hold (a registry may still have some of them; a disk mirror's partial files count).
    pub bytes_to_send: u64,
    /// Release payloads chosen (mirror.platform).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub releases: Vec<crate::mirror::content::ReleaseInfo>,
    /// Catalogs filtered (mirror.operators): the bundles kept per package.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub catalogs: Vec<crate::mirror::content::CatalogInfo>,
    /// Helm charts (mirror.helm): where each goes and the images found in it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub charts: Vec<crate::mirror::helm::ChartInfo>,
    /// The update graph data image (mirror.platform.graph).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graph: Option<crate::mirror::graph_image::GraphInfo>,
    /// Images that could not be resolved (`--continue-on-error`): not in the plan, and the run
    /// exits 1 so a script does not take the plan for the whole set.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<FailedImage>,
    /// Where the plan was written (see [`DryRun::write`]).
    #[serde(skip)]
    pub plan_file: PathBuf,
}

/// An image the plan could not include.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FailedImage {
    /// Source reference.
    pub source: String,
    /// Why it could not be resolved.
    pub error: String,
}

/// One image of the plan.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedImage {
    /// Source reference.
    pub source: String,
    /// Where it would land.
    pub destination: String,
    /// Its manifest digest.
    pub digest: Digest,
    /// Platforms kept.
    pub platforms: Vec<String>,
    /// Platforms its index offers that its filter leaves out.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub platforms_dropped: Vec<String>,
    /// The filter applied to it (`amd64`, `linux/arm64`); absent when every platform is kept.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub platform_filter: Vec<String>,
    /// Bytes of its manifests and blobs.
    pub size: u64,
    /// True when the destination already holds it exactly (nothing would be sent).
    pub already_mirrored: bool,
    /// For a signature, attestation, SBOM or referrer: the image it belongs to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attached_to: Option<crate::openshift::record::AttachedRecord>,
}

impl DryRun {
    /// The plan for `images` into the transfer's destination; `unchanged[i]` says whether
    /// `images[i]` is already there.
    pub fn new(
        transfer: &Transfer,
        images: &[ResolvedImage],
        unchanged: &[bool],
        source: &str,
        destination: &str,
    ) -> Self {
        let mut planned: Vec<PlannedImage> = images
            .iter()
            .zip(unchanged)
            .map(|(img, &done)| {
                let rec = transfer.planned_record(img);
                PlannedImage {
                    source: rec.source,
                    destination: rec.destination,
                    digest: rec.digest,
                    platforms: rec.platforms,
                    platforms_dropped: rec.platforms_dropped,
                    platform_filter: rec.platform_filter,
                    size: rec.total_size,
                    already_mirrored: done,
                    attached_to: rec.attached_to,
                }
            })
            .collect();
        planned.sort_by(|a, b| a.source.cmp(&b.source));
        let all = plan::blob_graph(images);
        let todo = images.iter().zip(unchanged).filter(|(_, &d)| !d);
        let to_send = plan::blob_graph(todo.map(|(i, _)| i));
        let bytes_to_send = match &transfer.dest {
            Destination::Layout(layout) => crate::mirror::space::bytes_to_write(layout, &to_send),
            Destination::Registry { .. } => to_send.iter().map(|n| n.blob.size).sum(),
        };
        DryRun {
            source: source.to_string(),
            destination: destination.to_string(),
            planned: now_rfc3339(),
            images: planned,
            blobs: all.len(),
            bytes_total: all.iter().map(|n| n.blob.size).sum(),
            bytes_to_send,
            releases: Vec::new(),
            catalogs: Vec::new(),
            charts: Vec::new(),
            graph: None,
            failed: Vec::new(),
            plan_file: PathBuf::new(),
        }
    }

    /// True when every image wanted is in the plan.
    pub fn complete(&self) -> bool {
        self.failed.is_empty()
    }

    /// Writes the plan as JSON under the first free name of `name(0)`, `name(1)`, ... (whole,
    /// never replacing another run's plan), and remembers where.
    pub fn write(&mut self, name: impl Fn(u32) -> PathBuf) -> Result<()> {
        let json = crate::fs::json_bytes(&name(0), self)?;
        self.plan_file =
            crate::fs::write_unique(name, &json).context("writing the dry-run plan")?;
        Ok(())
    }
}

impl std::fmt::Display for DryRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for img in &self.images {
            let state = if img.already_mirrored {
                "  (already at the destination)"
            } else {
                ""
            };
            let belongs = match &img.attached_to {
                Some(a) => format!("  ({} of {}@{})", a.kind, a.image, a.digest),
                None => String::new(),
            };
            writeln!(
                f,
                "{}  {} -> {}  {}{}{belongs}{state}",
                img.digest,
                img.source,
                img.destination,
                human_bytes(img.size),
                platforms_note(img)
            )?;
        }
        self.write_content(f)?;
        for img in &self.failed {
            writeln!(f, "FAILED {}: {}", img.source, img.error)?;
        }
        if !self.failed.is_empty() {
            writeln!(
                f,
                "{} images could not be resolved and are not in this plan",
                self.failed.len()
            )?;
        }
        writeln!(
            f,
            "dry run: {} images, {} unique blobs, {} in all, at most {} to send; nothing was copied",
            self.images.len(),
            self.blobs,
            human_bytes(self.bytes_total),
            human_bytes(self.bytes_to_send)
        )?;
        writeln!(f, "plan: {}", self.plan_file.display())
    }
}

impl DryRun {
    /// The lines about content beyond images: releases, the bundles kept per catalog and
    /// package, charts (with their warnings), the graph image.
    fn write_content(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        super::report::write_releases(f, &self.releases)?;
        for c in &self.catalogs {
            for (package, bundles) in &c.bundles {
                writeln!(
                    f,
                    "catalog {}: {package}: {}",
                    c.catalog,
                    bundles.join(", ")
                )?;
            }
            for w in c.warnings() {
                writeln!(f, "warning: {w}")?;
            }
        }
        for c in &self.charts {
            writeln!(
                f,
                "chart {} {} ({}) -> {}:{}: {} images",
                c.name,
                c.version,
                c.source,
                c.repository,
                c.tag,
                c.images.len()
            )?;
            for w in c.warnings() {
                writeln!(f, "warning: {w}")?;
            }
        }
        if let Some(g) = &self.graph {
            writeln!(
                f,
                "graph data image {} on {} from {}",
                g.destination, g.base_image, g.data_url
            )?;
        }
        Ok(())
    }
}

/// `  [linux/amd64, linux/arm64]`: the platforms kept; when the filter dropped some,
/// `  [linux/arm64; dropped linux/amd64; filter linux/arm64]`; nothing for an image that
/// names no platform.
fn platforms_note(img: &PlannedImage) -> String {
    if img.platforms.is_empty() {
        return String::new();
    }
    let kept = img.platforms.join(", ");
    if img.platforms_dropped.is_empty() {
        return format!("  [{kept}]");
    }
    format!(
        "  [{kept}; dropped {}; filter {}]",
        img.platforms_dropped.join(", "),
        img.platform_filter.join(", ")
    )
}
