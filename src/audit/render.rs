//! The report in words: plain text for a terminal or a printout, and Markdown for a ticket or
//! a change record. Both say the same things in the same order; JSON is the report serialised.

use super::{
    ArchiveFacts, AuditReport, CatalogFacts, Count, ImageFacts, Models, Operators, OtherImages,
    PackageFacts, RecordFacts, Releases, Signature, Totals,
};
use crate::openshift::record::RunInfo;
use std::fmt::{self, Display, Formatter};

/// The report as Markdown (its JSON is the report's).
pub struct Markdown<'a>(pub &'a AuditReport);

impl serde::Serialize for Markdown<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

/// What the signature says, in one sentence.
fn signature_sentence(sig: &Signature) -> String {
    match sig {
        Signature::NotSigned { file } => format!("not signed ({file} does not exist)"),
        Signature::Signed { file, fingerprint } => format!(
            "signed with key {fingerprint} ({file}); the signature matches, but who holds the key was not checked: pass --allowed-signers FILE"
        ),
        Signature::Verified {
            file,
            fingerprint,
            identity,
            allowed_signers,
        } => format!(
            "good signature by {identity} with key {fingerprint} ({file}, checked against {allowed_signers})"
        ),
        Signature::Bad {
            fingerprint,
            reason,
            ..
        } => match fingerprint {
            Some(fp) if !reason.contains(fp.as_str()) => format!("BAD (key {fp}): {reason}"),
            _ => format!("BAD: {reason}"),
        },
    }
}

/// `1 image`, `2 images`.
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// What a good signature covers.
fn covers(report: &AuditReport) -> Option<&'static str> {
    match (&report.signature, &report.archive) {
        (Signature::Signed { .. } | Signature::Verified { .. }, Some(_)) => Some(
            "It covers manifest.json, which gives the sha256 of every chunk and of the mirror record.",
        ),
        (Signature::Signed { .. } | Signature::Verified { .. }, None) => {
            Some("It covers the mirror record byte for byte.")
        }
        _ => None,
    }
}

fn config_text(config: &Option<crate::openshift::record::ConfigInfo>) -> String {
    match config {
        Some(c) => format!("{} (sha256 {})", c.path, c.sha256),
        None => "none (images named on the command line or a disk mirror)".to_string(),
    }
}

fn base_text(archive: &ArchiveFacts) -> String {
    match &archive.base {
        None => "none: a full archive".to_string(),
        Some(b) => format!(
            "a delta of {} {} (sha256 {}); its images need {}, {}, from it at the destination",
            b.kind,
            b.path,
            b.sha256,
            count(b.needed.count, "blob", "blobs"),
            b.needed.bytes
        ),
    }
}

fn record_text(record: &RecordFacts) -> String {
    format!("{} (sha256 {})", record.file, record.sha256)
}

fn versions(releases: &Releases) -> String {
    let v: Vec<&str> = releases.images.iter().map(|r| r.version.as_str()).collect();
    let mut v = v;
    v.dedup();
    v.join(", ")
}

fn channel_line(p: &PackageFacts) -> Vec<String> {
    p.channels
        .iter()
        .map(|c| {
            let v: Vec<&str> = c.bundles.iter().map(|b| b.version.as_str()).collect();
            format!("{}: {}", c.name, v.join(", "))
        })
        .collect()
}

impl Display for AuditReport {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        text_heading(f, self)?;
        match &self.archive {
            Some(a) => text_archive(f, a, &self.record)?,
            None => {
                writeln!(f, "Mirror record")?;
                writeln!(f, "  file  {}", record_text(&self.record))?;
            }
        }
        writeln!(f)?;
        text_runs(f, &self.record.runs)?;
        writeln!(f)?;
        text_releases(f, &self.releases)?;
        writeln!(f)?;
        text_operators(f, &self.operators)?;
        writeln!(f)?;
        text_image_group(f, &ImageGroup::models(&self.models))?;
        writeln!(f)?;
        text_image_group(f, &ImageGroup::others(&self.other_images))?;
        writeln!(f)?;
        text_totals(f, &self.totals)?;
        if !self.cannot_show.is_empty() {
            writeln!(f)?;
            writeln!(f, "What this report cannot show")?;
            for c in &self.cannot_show {
                writeln!(f, "  - {c}")?;
            }
        }
        Ok(())
    }
}

/// The title and what the signature says, then a blank line.
fn text_heading(f: &mut Formatter<'_>, r: &AuditReport) -> fmt::Result {
    writeln!(f, "Audit report of {}", r.source)?;
    writeln!(f)?;
    writeln!(f, "Signature: {}", signature_sentence(&r.signature))?;
    if let Some(c) = covers(r) {
        writeln!(f, "  {c}")?;
    }
    writeln!(f)
}

/// The archive's manifest facts and its chunks.
fn text_archive(f: &mut Formatter<'_>, a: &ArchiveFacts, record: &RecordFacts) -> fmt::Result {
    writeln!(f, "Archive")?;
    writeln!(f, "  written by     {} at {}", a.tool, a.created)?;
    writeln!(f, "  content from   {}", a.content_from)?;
    writeln!(f, "  configuration  {}", config_text(&a.config))?;
    writeln!(
        f,
        "  manifest       {} (sha256 {})",
        a.manifest, a.manifest_sha256
    )?;
    writeln!(f, "  mirror record  {}", record_text(record))?;
    writeln!(f, "  base           {}", base_text(a))?;
    writeln!(
        f,
        "  blobs          {} (manifests included), {}",
        count(a.blobs.count, "blob", "blobs"),
        a.blobs.bytes
    )?;
    writeln!(
        f,
        "  chunks         {}, {} in all, each at most {}",
        count(a.chunks.len(), "chunk", "chunks"),
        a.bytes,
        a.archive_size
    )?;
    for c in &a.chunks {
        writeln!(
            f,
            "    {}  {}  sha256 {}  {}",
            c.name, c.size, c.sha256, c.on_disk
        )?;
    }
    Ok(())
}

/// Every run that wrote the record, oldest first.
fn text_runs(f: &mut Formatter<'_>, runs: &[RunInfo]) -> fmt::Result {
    writeln!(f, "Runs ({})", runs.len())?;
    for (i, r) in runs.iter().enumerate() {
        writeln!(
            f,
            "  {}. {}, started {}, finished {}",
            i + 1,
            r.tool,
            r.started,
            r.finished
        )?;
        writeln!(f, "     from           {}", r.source)?;
        writeln!(f, "     to             {}", r.destination)?;
        writeln!(f, "     configuration  {}", config_text(&r.config))?;
        writeln!(
            f,
            "     mirrored       {}, {} moved",
            count(r.images, "image", "images"),
            super::Bytes(r.bytes_transferred)
        )?;
    }
    Ok(())
}

/// The release images with their versions, then their components' count.
fn text_releases(f: &mut Formatter<'_>, rel: &Releases) -> fmt::Result {
    writeln!(
        f,
        "Releases: {}, {}; {}",
        count(rel.images.len(), "release image", "release images"),
        count(rel.components.count, "component image", "component images"),
        rel.total.bytes
    )?;
    if !rel.images.is_empty() {
        writeln!(f, "  OpenShift {}", versions(rel))?;
    }
    for r in &rel.images {
        let arch = if r.arch.is_empty() {
            String::new()
        } else {
            format!(" {}", r.arch)
        };
        writeln!(
            f,
            "  {}{arch} (version from its {})",
            r.version,
            if r.version_from == "label" {
                "io.openshift.release label"
            } else {
                "tag"
            }
        )?;
        image_lines(f, &r.image, true)?;
    }
    if rel.components.count > 0 {
        writeln!(
            f,
            "  components: {}, {}",
            count(rel.components.count, "image", "images"),
            rel.components.bytes
        )?;
    }
    Ok(())
}

/// The catalogs with their packages, channels and bundle versions.
fn text_operators(f: &mut Formatter<'_>, ops: &Operators) -> fmt::Result {
    writeln!(
        f,
        "Operators: {}, {}; {}",
        count(ops.catalogs.len(), "catalog", "catalogs"),
        count(
            ops.images.count,
            "bundle or related image",
            "bundle and related images"
        ),
        ops.total.bytes
    )?;
    for c in &ops.catalogs {
        text_catalog(f, c)?;
    }
    Ok(())
}

/// A group of images with one extra fact each (the models' files, the other images'
/// platforms): its count and size, then each image's lines.
fn text_image_group(f: &mut Formatter<'_>, g: &ImageGroup<'_>) -> fmt::Result {
    writeln!(
        f,
        "{}: {}; {}",
        g.title,
        count(g.rows.len(), "image", "images"),
        g.total.bytes
    )?;
    for (image, extra) in &g.rows {
        writeln!(f, "  {}", image.source)?;
        image_lines(f, image, false)?;
        if let Some(value) = extra {
            writeln!(f, "    {:<13}{value}", g.extra)?;
        }
    }
    Ok(())
}

/// The record's totals.
fn text_totals(f: &mut Formatter<'_>, t: &Totals) -> fmt::Result {
    writeln!(
        f,
        "In all: {}, {}, {}; {} (each manifest and blob counted once)",
        count(t.images, "image", "images"),
        count(t.manifests, "manifest", "manifests"),
        count(t.blobs, "blob", "blobs"),
        t.bytes
    )
}

/// An image's lines under its title: its source (unless the title is the source), where it
/// went, its digest and its size.
fn image_lines(f: &mut Formatter<'_>, i: &ImageFacts, with_source: bool) -> fmt::Result {
    if with_source {
        writeln!(f, "    source       {}", i.source)?;
    }
    writeln!(f, "    destination  {}", i.destination)?;
    writeln!(f, "    digest       {}", i.digest)?;
    writeln!(f, "    size         {}", i.bytes)
}

/// One catalog: its image, then its packages with each channel's bundle versions.
fn text_catalog(f: &mut Formatter<'_>, c: &CatalogFacts) -> fmt::Result {
    writeln!(f, "  catalog {}", c.image.source)?;
    image_lines(f, &c.image, false)?;
    match &c.packages {
        None => writeln!(f, "    packages     not shown (see below)"),
        Some(packages) => {
            writeln!(f, "    packages     {}", packages.len())?;
            for p in packages {
                writeln!(
                    f,
                    "      {} (default channel {})",
                    p.name, p.default_channel
                )?;
                for line in channel_line(p) {
                    writeln!(f, "        {line}")?;
                }
            }
            Ok(())
        }
    }
}

/// A Markdown table cell: pipes escaped, line breaks flattened.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// Code in a cell.
fn code(s: &str) -> String {
    format!("`{}`", cell(s))
}

impl Display for Markdown<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let r = self.0;
        md_heading(f, r)?;
        match &r.archive {
            Some(a) => md_archive(f, a, &r.record)?,
            None => {
                md_section(f, "Mirror record")?;
                writeln!(f, "{}", cell(&record_text(&r.record)))?;
            }
        }
        writeln!(f)?;
        md_runs(f, &r.record.runs)?;
        writeln!(f)?;
        md_releases(f, &r.releases)?;
        writeln!(f)?;
        md_operators(f, &r.operators)?;
        writeln!(f)?;
        md_image_group(f, &ImageGroup::models(&r.models))?;
        writeln!(f)?;
        md_image_group(f, &ImageGroup::others(&r.other_images))?;
        writeln!(f)?;
        md_section(f, "In all")?;
        let t = &r.totals;
        writeln!(
            f,
            "{}, {}, {}; {} (each manifest and blob counted once).",
            count(t.images, "image", "images"),
            count(t.manifests, "manifest", "manifests"),
            count(t.blobs, "blob", "blobs"),
            t.bytes
        )?;
        if !r.cannot_show.is_empty() {
            writeln!(f)?;
            md_section(f, "What this report cannot show")?;
            for c in &r.cannot_show {
                writeln!(f, "- {}", cell(c))?;
            }
        }
        Ok(())
    }
}

/// `## TITLE` and the blank line after it.
fn md_section(f: &mut Formatter<'_>, title: &str) -> fmt::Result {
    writeln!(f, "## {title}")?;
    writeln!(f)
}

/// A table's header row (as written, `| A | B |`) and the row that makes it one.
fn md_table_head(f: &mut Formatter<'_>, header: &str) -> fmt::Result {
    writeln!(f, "{header}")?;
    let columns = header.matches('|').count() - 1;
    writeln!(f, "|{}", "---|".repeat(columns))
}

/// The title and what the signature says, then a blank line.
fn md_heading(f: &mut Formatter<'_>, r: &AuditReport) -> fmt::Result {
    writeln!(f, "# Audit report of {}", code(&r.source))?;
    writeln!(f)?;
    writeln!(
        f,
        "**Signature:** {}",
        cell(&signature_sentence(&r.signature))
    )?;
    if let Some(c) = covers(r) {
        writeln!(f, "{c}")?;
    }
    writeln!(f)
}

/// The archive's manifest facts, then its chunks, as two tables.
fn md_archive(f: &mut Formatter<'_>, a: &ArchiveFacts, record: &RecordFacts) -> fmt::Result {
    md_section(f, "Archive")?;
    md_table_head(f, "| | |")?;
    writeln!(f, "| Written by | {} at {} |", cell(&a.tool), a.created)?;
    writeln!(f, "| Content from | {} |", code(&a.content_from))?;
    writeln!(f, "| Configuration | {} |", cell(&config_text(&a.config)))?;
    writeln!(
        f,
        "| Manifest | {} (sha256 {}) |",
        code(&a.manifest),
        a.manifest_sha256
    )?;
    writeln!(f, "| Mirror record | {} |", cell(&record_text(record)))?;
    writeln!(f, "| Base | {} |", cell(&base_text(a)))?;
    writeln!(
        f,
        "| Blobs | {} (manifests included), {} |",
        count(a.blobs.count, "blob", "blobs"),
        a.blobs.bytes
    )?;
    writeln!(
        f,
        "| Chunks | {}, {} in all, each at most {} |",
        count(a.chunks.len(), "chunk", "chunks"),
        a.bytes,
        a.archive_size
    )?;
    writeln!(f)?;
    md_table_head(f, "| Chunk | Size | sha256 | On disk |")?;
    for c in &a.chunks {
        writeln!(
            f,
            "| {} | {} | {} | {} |",
            c.name, c.size, c.sha256, c.on_disk
        )?;
    }
    Ok(())
}

/// Every run that wrote the record, as a table.
fn md_runs(f: &mut Formatter<'_>, runs: &[RunInfo]) -> fmt::Result {
    md_section(f, "Runs")?;
    md_table_head(
        f,
        "| # | Tool | Started | Finished | From | To | Configuration | Images | Moved |",
    )?;
    for (i, run) in runs.iter().enumerate() {
        writeln!(
            f,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            i + 1,
            cell(&run.tool),
            run.started,
            run.finished,
            code(&run.source),
            code(&run.destination),
            cell(&config_text(&run.config)),
            run.images,
            super::Bytes(run.bytes_transferred)
        )?;
    }
    Ok(())
}

/// The release images as a table, then their components' count.
fn md_releases(f: &mut Formatter<'_>, rel: &Releases) -> fmt::Result {
    md_section(f, "Releases")?;
    writeln!(
        f,
        "{}, {}; {}.",
        count(rel.images.len(), "release image", "release images"),
        count(rel.components.count, "component image", "component images"),
        rel.total.bytes
    )?;
    if !rel.images.is_empty() {
        writeln!(f)?;
        md_table_head(
            f,
            "| Version | Arch | Version from | Source | Destination | Digest | Size |",
        )?;
        for i in &rel.images {
            writeln!(
                f,
                "| {} | {} | {} | {} | {} | {} | {} |",
                cell(&i.version),
                i.arch,
                i.version_from,
                code(&i.image.source),
                code(&i.image.destination),
                i.image.digest,
                i.image.bytes
            )?;
        }
    }
    if rel.components.count > 0 {
        writeln!(f)?;
        writeln!(
            f,
            "Components: {}, {}.",
            count(rel.components.count, "image", "images"),
            rel.components.bytes
        )?;
    }
    Ok(())
}

/// The catalogs, each under its own heading.
fn md_operators(f: &mut Formatter<'_>, ops: &Operators) -> fmt::Result {
    md_section(f, "Operators")?;
    writeln!(
        f,
        "{}, {}; {}.",
        count(ops.catalogs.len(), "catalog", "catalogs"),
        count(
            ops.images.count,
            "bundle or related image",
            "bundle and related images"
        ),
        ops.total.bytes
    )?;
    for c in &ops.catalogs {
        writeln!(f)?;
        md_catalog(f, c)?;
    }
    Ok(())
}

/// One catalog: its image, then a row per channel of each package.
fn md_catalog(f: &mut Formatter<'_>, c: &CatalogFacts) -> fmt::Result {
    writeln!(f, "### Catalog {}", code(&c.image.source))?;
    writeln!(f)?;
    writeln!(
        f,
        "Destination {}, digest {}, {}.",
        code(&c.image.destination),
        c.image.digest,
        c.image.bytes
    )?;
    writeln!(f)?;
    let Some(packages) = &c.packages else {
        return writeln!(f, "Packages: not shown (see below).");
    };
    md_table_head(
        f,
        "| Package | Default channel | Channel | Bundle versions |",
    )?;
    for p in packages {
        for ch in &p.channels {
            let v: Vec<&str> = ch.bundles.iter().map(|b| b.version.as_str()).collect();
            writeln!(
                f,
                "| {} | {} | {} | {} |",
                cell(&p.name),
                cell(&p.default_channel),
                cell(&ch.name),
                cell(&v.join(", "))
            )?;
        }
    }
    Ok(())
}

/// A group of images with one extra fact each, as a table.
fn md_image_group(f: &mut Formatter<'_>, g: &ImageGroup<'_>) -> fmt::Result {
    md_section(f, g.title)?;
    writeln!(
        f,
        "{}; {}.",
        count(g.rows.len(), "image", "images"),
        g.total.bytes
    )?;
    if g.rows.is_empty() {
        return Ok(());
    }
    writeln!(f)?;
    md_table_head(
        f,
        &format!("| Image | Destination | Digest | Size | {} |", g.column),
    )?;
    for (image, extra) in &g.rows {
        writeln!(
            f,
            "| {} | {} | {} | {} | {} |",
            code(&image.source),
            code(&image.destination),
            image.digest,
            image.bytes,
            extra.as_deref().unwrap_or_default()
        )?;
    }
    Ok(())
}

/// The models or the other images, as both renderings show them: each image with its one
/// extra fact (none when the image has nothing to say).
struct ImageGroup<'a> {
    /// `Models`, `Other images`.
    title: &'a str,
    /// The extra fact's label in the text (`files`).
    extra: &'a str,
    /// Its column in the table (`Files`).
    column: &'a str,
    total: &'a Count,
    rows: Vec<(&'a ImageFacts, Option<String>)>,
}

impl<'a> ImageGroup<'a> {
    fn models(m: &'a Models) -> Self {
        ImageGroup {
            title: "Models",
            extra: "files",
            column: "Files",
            total: &m.total,
            rows: (m.images.iter())
                .map(|i| (&i.image, i.files.map(|n| n.to_string())))
                .collect(),
        }
    }

    fn others(o: &'a OtherImages) -> Self {
        ImageGroup {
            title: "Other images",
            extra: "platforms",
            column: "Platforms",
            total: &o.total,
            rows: (o.images.iter())
                .map(|i| {
                    let p = (!i.platforms.is_empty()).then(|| i.platforms.join(", "));
                    (&i.image, p)
                })
                .collect(),
        }
    }
}
