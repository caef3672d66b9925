//! `bootstrap audit report`: what an archive or a mirror record carried, in words an auditor
//! reads (releases and their versions, operators with their channels and bundle versions,
//! models, other images, counts and sizes, who signed it), as text, Markdown or JSON.
//!
//! The report reads; it never checks every byte (`bootstrap verify` and `sha256sum -c` do).
//! What it does read is checked: the signature over the very bytes it then parses, the mirror
//! record inside an archive against the manifest's sha256, and every blob it opens (a catalog's
//! layers, a model's manifest) against its digest. What a source cannot tell (a registry
//! mirror's record holds no catalog) is said in the report, never guessed.

mod content;
mod render;
mod signature;

pub use render::Markdown;
pub use signature::Signature;

use crate::mirror::archive::{self, ArchiveManifest, MANIFEST_FILE, STAGING_DIR};
use crate::oci::digest::Digest;
use crate::openshift::record::{ConfigInfo, ImageRecord, MirrorRecord, RunInfo, RECORD_FILE};
use crate::openshift::release::RELEASE_IMAGES_REPO;
use anyhow::{bail, Context, Result};
use content::Content;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What to report on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuditSource {
    /// `archive://DIR`: the chunks, `manifest.json` and its signature.
    Archive(PathBuf),
    /// A mirror record file (a registry mirror's, or `DIR/mirror-record.json` of a disk mirror).
    Record(PathBuf),
}

impl AuditSource {
    /// Reads the command line's SOURCE: `archive://DIR`, or the path of a mirror record.
    pub fn parse(input: &str) -> Result<Self> {
        if input.starts_with("archive://") {
            return archive::parse_location(input)
                .map(AuditSource::Archive)
                .with_context(|| format!("'{input}' names no directory: write archive://DIR"));
        }
        if let Some(dir) = input.strip_prefix("file://") {
            bail!(
                "'{input}': name a disk mirror by its record, {}/{RECORD_FILE}",
                dir.trim_end_matches('/')
            );
        }
        if input.starts_with("docker://") {
            bail!(
                "'{input}': a registry is reported on through the record its mirror wrote (--record FILE of bootstrap mirror): name that file"
            );
        }
        let path = PathBuf::from(input);
        if path.is_dir() {
            bail!(
                "{input} is a directory: name an archive as archive://{input}, or a mirror record file (a disk mirror's is {}/{RECORD_FILE})",
                input.trim_end_matches('/')
            );
        }
        Ok(AuditSource::Record(path))
    }
}

/// A byte count: exact in JSON, `1.2 GiB (1288490188 bytes)` in text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Bytes(pub u64);

impl std::fmt::Display for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            1 => write!(f, "1 byte"),
            n if n < 1024 => write!(f, "{n} bytes"),
            n => write!(f, "{} ({n} bytes)", crate::output::human_bytes(n)),
        }
    }
}

/// The report.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditReport {
    /// What was read: `archive://DIR` or the record's path.
    pub source: String,
    /// Who signed it, and whether that was checked.
    pub signature: Signature,
    /// For an archive: its manifest, chunks and base.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archive: Option<ArchiveFacts>,
    /// The mirror record the content is described from.
    pub record: RecordFacts,
    /// Release payloads.
    pub releases: Releases,
    /// Operator catalogs and the images their kept bundles need.
    pub operators: Operators,
    /// Model images.
    pub models: Models,
    /// Every other image.
    pub other_images: OtherImages,
    /// The record's totals (each manifest and blob counted once).
    pub totals: Totals,
    /// What this report cannot show from this source, and why.
    pub cannot_show: Vec<String>,
}

impl AuditReport {
    /// False when a signature was bad (or missing while `--allowed-signers` asked for one).
    pub fn ok(&self) -> bool {
        !self.signature.is_bad()
    }
}

/// An archive's manifest facts.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ArchiveFacts {
    /// `DIR/manifest.json`.
    pub manifest: String,
    /// sha256 of its bytes.
    pub manifest_sha256: String,
    /// The bootstrap that wrote it.
    pub tool: String,
    /// When it was sealed (RFC 3339 UTC).
    pub created: String,
    /// Where the content came from.
    pub content_from: String,
    /// The ImageSetConfiguration it was mirrored with.
    pub config: Option<ConfigInfo>,
    /// The most bytes a chunk may hold.
    pub archive_size: Bytes,
    /// Every chunk, as the manifest lists it, and whether it is on disk at that size.
    pub chunks: Vec<ChunkFacts>,
    /// The chunks' bytes together.
    pub bytes: Bytes,
    /// Blobs (and manifests) carried in the chunks.
    pub blobs: Count,
    /// For a delta: what it adds to, and what of the base its images need.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base: Option<BaseFacts>,
}

/// One chunk.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChunkFacts {
    /// `mirror_000001.tar`.
    pub name: String,
    /// Its size, as the manifest says.
    pub size: Bytes,
    /// Its sha256, as the manifest says.
    pub sha256: String,
    /// `present`, `missing`, or how it differs (the report does not hash chunks).
    pub on_disk: String,
}

/// A delta archive's base.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BaseFacts {
    /// The path `--since` named.
    pub path: String,
    /// sha256 of that file.
    pub sha256: String,
    /// `archive` or `record`.
    pub kind: String,
    /// The base's blobs this archive's images need (expected at the destination).
    pub needed: Count,
}

/// A count of objects and their bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Count {
    /// How many.
    pub count: usize,
    /// Their bytes together.
    pub bytes: Bytes,
}

/// The mirror record.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordFacts {
    /// Where it was read: the file, or `mirror-record.json in mirror_000003.tar`.
    pub file: String,
    /// sha256 of its bytes.
    pub sha256: String,
    /// Every run that contributed, oldest first.
    pub runs: Vec<RunInfo>,
}

/// Release payloads.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Releases {
    /// Release images and components together, each manifest and blob counted once.
    pub total: Count,
    /// The release images, by version.
    pub images: Vec<ReleaseImage>,
    /// Their component images (shared between releases, so counted once).
    pub components: Count,
}

/// One release image.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseImage {
    /// `4.18.3`.
    pub version: String,
    /// `x86_64`, as release tags spell it (empty when the tag names none).
    pub arch: String,
    /// Where the version was read: `label` (the image's io.openshift.release) or `tag`.
    pub version_from: String,
    /// The image mirrored.
    #[serde(flatten)]
    pub image: ImageFacts,
}

/// What every listed image shows.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageFacts {
    /// The reference it was mirrored from.
    pub source: String,
    /// Where it went.
    pub destination: String,
    /// Its top manifest's digest at the destination.
    pub digest: Digest,
    /// Its manifests and blobs together.
    pub bytes: Bytes,
}

/// Operators.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Operators {
    /// Catalogs, bundle and related images together, each manifest and blob counted once.
    pub total: Count,
    /// The (filtered) catalogs.
    pub catalogs: Vec<CatalogFacts>,
    /// Bundle images and the images they name, counted once.
    pub images: Count,
}

/// One catalog.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogFacts {
    /// The catalog image.
    #[serde(flatten)]
    pub image: ImageFacts,
    /// Its packages, read from the catalog it carries; absent when this source does not
    /// carry the catalog's layers (see `cannotShow`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packages: Option<Vec<PackageFacts>>,
}

/// One operator package of a catalog.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PackageFacts {
    /// `gpu-operator-certified`.
    pub name: String,
    /// The channel a Subscription without one gets.
    pub default_channel: String,
    /// Its channels, by name.
    pub channels: Vec<ChannelFacts>,
}

/// One channel of a package.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChannelFacts {
    /// `stable`.
    pub name: String,
    /// Its bundles, by version, lowest first.
    pub bundles: Vec<BundleFacts>,
}

/// One bundle.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BundleFacts {
    /// `gpu-operator-certified.v24.9.1`.
    pub name: String,
    /// Its version (`olm.package` property).
    pub version: String,
}

/// Model images.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Models {
    /// All of them, each manifest and blob counted once.
    pub total: Count,
    /// Each one.
    pub images: Vec<ModelImage>,
}

/// Images that are neither releases, operators nor models.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OtherImages {
    /// All of them, each manifest and blob counted once.
    pub total: Count,
    /// Each one.
    pub images: Vec<OtherImage>,
}

/// One model image.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelImage {
    /// The image.
    #[serde(flatten)]
    pub image: ImageFacts,
    /// Files the model carries (from `bootstrap model pack`'s checksum annotation).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files: Option<usize>,
}

/// One other image.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OtherImage {
    /// The image.
    #[serde(flatten)]
    pub image: ImageFacts,
    /// Platforms kept (`linux/amd64`).
    pub platforms: Vec<String>,
}

/// The record's totals.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    /// Images.
    pub images: usize,
    /// Distinct manifests.
    pub manifests: usize,
    /// Distinct blobs.
    pub blobs: usize,
    /// Their bytes.
    pub bytes: Bytes,
}

/// Reports on `source`; with `allowed_signers`, its signature must verify against that file.
pub fn report(source: &AuditSource, allowed_signers: Option<&Path>) -> Result<AuditReport> {
    match source {
        AuditSource::Archive(dir) => archive_report(dir, allowed_signers),
        AuditSource::Record(path) => record_report(path, allowed_signers),
    }
}

fn archive_report(dir: &Path, allowed_signers: Option<&Path>) -> Result<AuditReport> {
    let manifest_path = dir.join(MANIFEST_FILE);
    if !manifest_path.is_file() {
        if !dir.is_dir() {
            bail!(
                "archive://{}: no such directory; name the directory holding manifest.json and the mirror_NNNNNN.tar chunks",
                dir.display()
            );
        }
        if dir.join(STAGING_DIR).is_dir() {
            bail!(
                "{} is an unfinished archive (it has no {MANIFEST_FILE} yet): run the mirror that writes it again to finish it",
                dir.display()
            );
        }
        bail!(
            "{} is not a bootstrap archive: it has no {MANIFEST_FILE}",
            dir.display()
        );
    }
    let (manifest, text) = ArchiveManifest::load(&manifest_path)?;
    let signature = signature::check(&manifest_path, text.as_bytes(), allowed_signers);
    let content = Content::archive(dir, &manifest)?;
    let (record, record_facts) = archive_record(dir, &manifest)?;
    let facts = archive_facts(dir, &manifest, &manifest_path, &text);
    let mut report = describe(
        format!("archive://{}", dir.display()),
        signature,
        record,
        record_facts,
        Some(&content),
    )?;
    if let Some(base) = &manifest.base {
        report.cannot_show.push(format!(
            "the images the base carried: a delta's mirror record lists only the images it adds; report on the base ({}) for the rest",
            base.path
        ));
    }
    report.archive = Some(facts);
    report.cannot_show.push(format!(
        "whether every byte of the chunks is intact: the report reads only what it describes; `sha256sum -c SHA256SUMS` or `bootstrap verify archive://{}` checks every chunk and blob",
        dir.display()
    ));
    Ok(report)
}

/// The mirror record inside an archive, checked against the manifest's sha256.
fn archive_record(dir: &Path, manifest: &ArchiveManifest) -> Result<(MirrorRecord, RecordFacts)> {
    let manifest_path = dir.join(MANIFEST_FILE);
    let Some(file) = manifest.files.iter().find(|f| f.path == RECORD_FILE) else {
        bail!(
            "{}: the archive carries no {RECORD_FILE}, so nothing says what its images are; cut it again from the disk mirror bootstrap mirror wrote",
            manifest_path.display()
        );
    };
    let bytes = content::archive_file(dir, file)?;
    let label = format!("{RECORD_FILE} in {}", file.chunk);
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("{}: {label} is not UTF-8 text", dir.display()))?;
    let record = MirrorRecord::parse(&dir.join(&file.chunk).join(RECORD_FILE), &text)?;
    Ok((
        record,
        RecordFacts {
            file: label,
            sha256: file.sha256.clone(),
            runs: Vec::new(),
        },
    ))
}

fn archive_facts(
    dir: &Path,
    manifest: &ArchiveManifest,
    manifest_path: &Path,
    text: &str,
) -> ArchiveFacts {
    let chunks: Vec<ChunkFacts> = manifest
        .chunks
        .iter()
        .map(|c| ChunkFacts {
            name: c.name.clone(),
            size: Bytes(c.size),
            sha256: c.sha256.clone(),
            on_disk: match fs_err::symlink_metadata(dir.join(&c.name)) {
                Ok(m) if m.is_file() && m.len() == c.size => "present".to_string(),
                Ok(m) if m.is_file() => format!("{} bytes, not {}", m.len(), c.size),
                Ok(_) => "not a regular file".to_string(),
                Err(_) => "missing".to_string(),
            },
        })
        .collect();
    let base = manifest.base.as_ref().map(|b| BaseFacts {
        path: b.path.clone(),
        sha256: b.sha256.clone(),
        kind: b.kind.clone(),
        needed: Count {
            count: manifest.base_blobs.len(),
            bytes: Bytes(manifest.base_blobs.iter().map(|b| b.size).sum()),
        },
    });
    ArchiveFacts {
        manifest: manifest_path.display().to_string(),
        manifest_sha256: Digest::of(text.as_bytes()).hex().to_string(),
        tool: manifest.tool.clone(),
        created: manifest.created.clone(),
        content_from: manifest.source.clone(),
        config: manifest.config.clone(),
        archive_size: Bytes(manifest.archive_size),
        bytes: Bytes(manifest.chunks.iter().map(|c| c.size).sum()),
        chunks,
        blobs: Count {
            count: manifest.blobs.len(),
            bytes: Bytes(manifest.blobs.iter().map(|b| b.size).sum()),
        },
        base,
    }
}

fn record_report(path: &Path, allowed_signers: Option<&Path>) -> Result<AuditReport> {
    let text = crate::bounded::read_regular_to_string(path, crate::bounded::LAYOUT_FILE_MAX)
        .map_err(|e| {
            anyhow::anyhow!(
                "reading the mirror record {}: {} (name the record bootstrap mirror wrote: --record FILE, or DIR/{RECORD_FILE} of a disk mirror; an archive is archive://DIR)",
                path.display(),
                crate::yaml::io_reason(&e)
            )
        })?;
    let record = match MirrorRecord::parse(path, &text) {
        Ok(r) => r,
        Err(_) if ArchiveManifest::parse(path, &text).is_ok() => bail!(
            "{} is an archive's manifest, not a mirror record: name the archive, archive://{}",
            path.display(),
            path.parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
                .display()
        ),
        Err(e) => return Err(e),
    };
    let signature = signature::check(path, text.as_bytes(), allowed_signers);
    let facts = RecordFacts {
        file: path.display().to_string(),
        sha256: Digest::of(text.as_bytes()).hex().to_string(),
        runs: Vec::new(),
    };
    let content = Content::layout_beside(path);
    let mut report = describe(
        path.display().to_string(),
        signature,
        record,
        facts,
        content.as_ref(),
    )?;
    match &content {
        Some(Content::Layout { dir }) => report.cannot_show.push(format!(
            "whether every byte of the disk mirror is intact: the report reads only what it describes; `sha256sum -c SHA256SUMS` in {dir} or `bootstrap verify file://{dir}` checks every file",
            dir = dir.display()
        )),
        _ => report.cannot_show.push(
            "whether the registry holds it all, intact: `bootstrap verify --record RECORD docker://HOST[/PREFIX]` checks every manifest and blob there".to_string(),
        ),
    }
    if content.is_none() && !report.releases.images.is_empty() {
        report.cannot_show.push(
            "release versions from the images themselves: they are read from the release tags (the io.openshift.release label is in the image config, at the registry)".to_string(),
        );
    }
    if content.is_none() {
        report.cannot_show.push(
            "operators' channels and bundle versions: a mirror record names the catalog image, not what it holds; the filtered catalog is at the registry (report on the archive or disk mirror that carried it to see them)".to_string(),
        );
        report.cannot_show.push(
            "which images are models: a mirror record does not say, and the manifests that do are at the registry; models are listed with the other images".to_string(),
        );
    }
    Ok(report)
}

/// The images of a record, sorted into what an auditor asks about.
fn describe(
    source: String,
    signature: Signature,
    record: MirrorRecord,
    mut facts: RecordFacts,
    content: Option<&Content>,
) -> Result<AuditReport> {
    let mut sections = Sections::default();
    for img in &record.images {
        sections.add(img, content)?;
    }
    let cannot_show = sections.cannot_show();
    let sizes: BTreeMap<&Digest, u64> = record.blobs.iter().map(|b| (&b.digest, b.size)).collect();
    let (releases, operators, models, other_images) = sections.counted(&sizes);
    facts.runs = record.runs.clone();
    Ok(AuditReport {
        source,
        signature,
        archive: None,
        record: facts,
        releases,
        operators,
        models,
        other_images,
        totals: Totals {
            images: record.totals.images,
            manifests: record.totals.manifests,
            blobs: record.totals.blobs,
            bytes: Bytes(record.totals.bytes),
        },
        cannot_show,
    })
}

/// The report's sections as a record's images are sorted into them, and the images each
/// counts (each manifest and blob once, however many images share it).
#[derive(Default)]
struct Sections<'r> {
    releases: Releases,
    operators: Operators,
    models: Models,
    other_images: OtherImages,
    /// Every image of each section, for its total.
    in_releases: Vec<&'r ImageRecord>,
    in_operators: Vec<&'r ImageRecord>,
    in_models: Vec<&'r ImageRecord>,
    in_other_images: Vec<&'r ImageRecord>,
    /// Release component images.
    components: Vec<&'r ImageRecord>,
    /// Bundle and related images of the operators.
    operator_images: Vec<&'r ImageRecord>,
    /// Catalogs whose packages could not be read from the content at hand.
    unread_catalogs: usize,
}

impl<'r> Sections<'r> {
    /// Sorts one image into its section by the category the record gives it (a model is
    /// known by its manifest, when the content is at hand).
    fn add(&mut self, img: &'r ImageRecord, content: Option<&Content>) -> Result<()> {
        match img.category.as_deref() {
            Some("release") if img.path.ends_with(RELEASE_IMAGES_REPO) => {
                self.releases.images.push(release_image(img, content)?);
                self.in_releases.push(img);
            }
            Some("release") => {
                self.components.push(img);
                self.in_releases.push(img);
            }
            Some("operator") => {
                self.operator_images.push(img);
                self.in_operators.push(img);
            }
            Some("catalog") => {
                let packages = match content {
                    Some(c) => c.catalog_packages(&img.digest, &img.media_type, &img.source)?,
                    None => None,
                };
                self.unread_catalogs += usize::from(content.is_some() && packages.is_none());
                self.operators.catalogs.push(CatalogFacts {
                    image: image_facts(img),
                    packages,
                });
                self.in_operators.push(img);
            }
            _ => match content
                .map(|c| c.model_files(&img.digest, &img.media_type))
                .transpose()?
            {
                Some(Some(files)) => {
                    self.models.images.push(ModelImage {
                        image: image_facts(img),
                        files,
                    });
                    self.in_models.push(img);
                }
                _ => {
                    self.other_images.images.push(OtherImage {
                        image: image_facts(img),
                        platforms: img.platforms.clone(),
                    });
                    self.in_other_images.push(img);
                }
            },
        }
        Ok(())
    }

    /// What the sorting could not show.
    fn cannot_show(&self) -> Vec<String> {
        let n = self.unread_catalogs;
        if n == 0 {
            return Vec::new();
        }
        vec![format!(
            "the packages of {n} catalog(s): their layers are not all here (a delta's base holds what it shares); report on the base"
        )]
    }

    /// The sections with their counts, release images by version then architecture.
    fn counted(
        mut self,
        sizes: &BTreeMap<&Digest, u64>,
    ) -> (Releases, Operators, Models, OtherImages) {
        self.releases.components = unique(&self.components, sizes);
        self.releases.images.sort_by(|a, b| {
            release_order(&a.version)
                .cmp(&release_order(&b.version))
                .then_with(|| a.arch.cmp(&b.arch))
        });
        self.operators.images = unique(&self.operator_images, sizes);
        self.releases.total = unique(&self.in_releases, sizes);
        self.operators.total = unique(&self.in_operators, sizes);
        self.models.total = unique(&self.in_models, sizes);
        self.other_images.total = unique(&self.in_other_images, sizes);
        (
            self.releases,
            self.operators,
            self.models,
            self.other_images,
        )
    }
}

fn image_facts(img: &ImageRecord) -> ImageFacts {
    ImageFacts {
        source: img.source.clone(),
        destination: img.destination.clone(),
        digest: img.digest.clone(),
        bytes: Bytes(img.total_size),
    }
}

/// Architectures as release tags spell them (`4.18.3-x86_64`).
const RELEASE_ARCHES: [&str; 5] = ["x86_64", "aarch64", "ppc64le", "s390x", "multi"];

fn release_image(img: &ImageRecord, content: Option<&Content>) -> Result<ReleaseImage> {
    let tag = img.tag.clone().unwrap_or_else(|| {
        crate::oci::reference::ImageRef::parse(&img.source)
            .ok()
            .and_then(|r| r.tag)
            .unwrap_or_default()
    });
    let (tag_version, arch) = RELEASE_ARCHES
        .iter()
        .find_map(|a| {
            tag.strip_suffix(a)
                .and_then(|v| v.strip_suffix('-'))
                .map(|v| (v.to_string(), a.to_string()))
        })
        .unwrap_or((tag, String::new()));
    let label = match content {
        Some(c) => c.release_version(&img.digest, &img.media_type)?,
        None => None,
    };
    let (version, version_from) = match label {
        Some(v) => (v, "label"),
        None => (tag_version, "tag"),
    };
    Ok(ReleaseImage {
        version,
        arch,
        version_from: version_from.to_string(),
        image: image_facts(img),
    })
}

/// Versions in semantic order (4.18.10 after 4.18.9); what does not parse sorts last, by text.
fn release_order(version: &str) -> (semver::Version, String) {
    let v = semver::Version::parse(version).unwrap_or(semver::Version::new(u64::MAX, 0, 0));
    (v, version.to_string())
}

/// How many images, and their manifests and blobs counted once.
fn unique(images: &[&ImageRecord], sizes: &BTreeMap<&Digest, u64>) -> Count {
    let mut seen: BTreeMap<&Digest, u64> = BTreeMap::new();
    for img in images {
        seen.insert(&img.digest, img.size);
        for m in &img.manifests {
            seen.insert(&m.digest, m.size);
        }
        for b in &img.blobs {
            seen.insert(b, sizes.get(b).copied().unwrap_or(0));
        }
    }
    Count {
        count: images.len(),
        bytes: Bytes(seen.values().sum()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_name_the_fix_for_what_is_not_one() {
        assert_eq!(
            AuditSource::parse("archive:///media/a").unwrap(),
            AuditSource::Archive("/media/a".into())
        );
        assert_eq!(
            AuditSource::parse("/tmp/does-not-exist/rec.json").unwrap(),
            AuditSource::Record("/tmp/does-not-exist/rec.json".into())
        );
        let err = |s: &str| AuditSource::parse(s).unwrap_err().to_string();
        assert!(err("archive://").contains("archive://DIR"));
        assert!(err("file:///m/").contains("/m/mirror-record.json"));
        assert!(err("docker://r:5000/m").contains("--record"));
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display().to_string();
        assert!(err(&d).contains(&format!("archive://{d}")));
    }

    #[test]
    fn release_versions_sort_as_versions() {
        let mut v = ["4.18.10", "4.18.9", "odd", "4.17.2"];
        v.sort_by_key(|a| release_order(a));
        assert_eq!(v, ["4.17.2", "4.18.9", "4.18.10", "odd"]);
    }
}
