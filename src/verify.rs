//! `bootstrap verify`: the auditor's check. A disk mirror is re-hashed file by file and checked
//! against its mirror record, its `index.json` and its `SHA256SUMS`; a registry is checked
//! against a record (every manifest by digest, every blob by HEAD with its size). Exit 0 only
//! when everything matches.

use crate::concurrency::Concurrency;
use crate::oci::digest::Digest;
use crate::oci::layout::OciLayout;
use crate::oci::reference::RegistryTarget;
use crate::oci::registry::{Registries, RegistryOptions};
use crate::openshift::record::{
    layout_files, DifferenceKind, MirrorRecord, RECORD_FILE, SUMS_FILE,
};
use crate::output::human_bytes;
use anyhow::{Context, Result};
use futures_util::StreamExt;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// What a verification found.
#[derive(Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// What was checked.
    pub target: String,
    /// True when nothing is missing, corrupt or unexpected.
    pub ok: bool,
    /// Objects checked (files on disk, or manifests and blobs in a registry).
    pub checked: usize,
    /// Bytes re-hashed (disk) or sizes checked (registry).
    pub bytes: u64,
    /// What the record lists but the target lacks.
    pub missing: Vec<String>,
    /// What is present but does not match its digest, size or record.
    pub corrupt: Vec<String>,
    /// What is present but no record lists.
    pub unexpected: Vec<String>,
    /// Who signed the record (`--allowed-signers`): identity and key fingerprint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signed_by: Option<String>,
}

impl Report {
    /// Sorts the findings and sets `ok`.
    pub(crate) fn finish(mut self) -> Self {
        self.missing.sort();
        self.corrupt.sort();
        self.unexpected.sort();
        self.ok = self.missing.is_empty() && self.corrupt.is_empty() && self.unexpected.is_empty();
        self
    }
}

/// What to verify, resolved.
#[derive(Clone, Debug)]
pub enum VerifyTarget {
    /// A disk mirror, checked against the record, index and `SHA256SUMS` it carries.
    Disk(PathBuf),
    /// An archive: its signature, SHA256SUMS, chunks and every blob in them.
    Archive {
        /// The archive's directory.
        dir: PathBuf,
        /// The allowed_signers file its manifest's signature must check against.
        allowed_signers: Option<PathBuf>,
    },
    /// A registry (under a prefix), checked against a mirror record.
    Registry {
        /// Host and prefix.
        target: RegistryTarget,
        /// The record to check it against.
        record: PathBuf,
        /// The allowed_signers file its signature (`RECORD.sig`) must check against.
        allowed_signers: Option<PathBuf>,
        /// Credentials and trust.
        registry: Box<RegistryOptions>,
    },
}

/// Runs `bootstrap verify`: the report says whether everything matched.
pub async fn run(target: VerifyTarget) -> Result<Report> {
    match target {
        VerifyTarget::Disk(dir) => verify_layout(&dir).await,
        VerifyTarget::Archive {
            dir,
            allowed_signers,
        } => crate::mirror::archive::verify::verify(&dir, allowed_signers.as_deref()).await,
        VerifyTarget::Registry {
            target,
            record: record_path,
            allowed_signers,
            registry,
        } => {
            // The signature first: a record nobody vouches for is not worth checking against.
            // One read: the record checked against the registry is the one the signature covers.
            let text = crate::bounded::read_regular_to_string(
                &record_path,
                crate::bounded::LAYOUT_FILE_MAX,
            )?;
            let signed = allowed_signers
                .as_deref()
                .map(|a| crate::sshsig::verify_bytes(a, &record_path, text.as_bytes()));
            let record = MirrorRecord::parse(&record_path, &text)?;
            let regs = Registries::new(*registry)?;
            let client = regs.client(&target.registry)?;
            let mut report = verify_registry(&client, &target, &record).await?;
            match signed {
                Some(Ok(v)) => {
                    report.signed_by = Some(format!("{} ({})", v.identity, v.fingerprint))
                }
                Some(Err(e)) => {
                    report.corrupt.push(format!("{e:#}"));
                    report = report.finish();
                }
                None => {}
            }
            Ok(report)
        }
    }
}

fn read_sums(root: &Path) -> Result<Option<BTreeMap<String, String>>> {
    let path = root.join(SUMS_FILE);
    if !path.is_file() {
        return Ok(None);
    }
    let text = crate::bounded::read_regular_to_string(&path, crate::bounded::LAYOUT_FILE_MAX)?;
    let mut out = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let Some((hex, name)) = line.split_once("  ") else {
            anyhow::bail!("{}:{}: not a sha256sum line", path.display(), n + 1);
        };
        out.insert(name.to_string(), hex.to_string());
    }
    Ok(Some(out))
}

/// Checks a disk mirror.
pub async fn verify_layout(root: &Path) -> Result<Report> {
    let layout = OciLayout::open(root)?;
    let mut report = Report {
        target: format!("file://{}", root.display()),
        ..Default::default()
    };
    let record_path = root.join(RECORD_FILE);
    let record = if record_path.is_file() {
        Some(MirrorRecord::load(&record_path)?)
    } else {
        report
            .missing
            .push(format!("{RECORD_FILE} (the mirror record)"));
        None
    };
    let sums = read_sums(root)?;
    if sums.is_none() {
        report.missing.push(SUMS_FILE.to_string());
    }
    let files = layout_files(root)?;
    let present = rehash(root, &files, sums.as_ref(), &mut report).await;
    if let Some(sums) = &sums {
        let on_disk: BTreeSet<&String> = files.iter().collect();
        for name in sums.keys() {
            if !on_disk.contains(name) {
                report
                    .missing
                    .push(format!("{name} (listed in SHA256SUMS)"));
            }
        }
    }
    if let Some(record) = &record {
        check_layout_against_record(&layout, record, &present, &mut report)?;
    }
    Ok(report.finish())
}

/// Re-hashes every file of the layout (a few at a time: disks are the limit), checking blobs
/// against their names and every file against `SHA256SUMS`; returns the blobs found intact.
async fn rehash(
    root: &Path,
    files: &[String],
    sums: Option<&BTreeMap<String, String>>,
    report: &mut Report,
) -> BTreeMap<Digest, u64> {
    let hashed: Vec<(String, std::io::Result<(Digest, u64)>)> =
        futures_util::stream::iter(files.to_vec())
            .map(|rel| {
                let path = root.join(&rel);
                async move {
                    let r =
                        tokio::task::spawn_blocking(move || crate::bounded::hash_regular(&path))
                            .await
                            .unwrap_or_else(|e| Err(std::io::Error::other(e)));
                    (rel, r)
                }
            })
            .buffered(Concurrency::FILE_HASHES.get())
            .collect()
            .await;
    let mut present: BTreeMap<Digest, u64> = BTreeMap::new();
    for (rel, result) in hashed {
        let (digest, size) = match result {
            Ok(v) => v,
            Err(e) => {
                report.corrupt.push(format!("{rel}: unreadable: {e}"));
                continue;
            }
        };
        report.checked += 1;
        report.bytes += size;
        if let Some(hex) = rel.strip_prefix("blobs/sha256/") {
            if digest.hex() != hex {
                report
                    .corrupt
                    .push(format!("{rel}: content hashes to {digest}"));
            } else {
                present.insert(digest.clone(), size);
            }
        }
        if let Some(sums) = sums {
            match sums.get(&rel) {
                Some(h) if h == digest.hex() => {}
                Some(_) if rel.starts_with("blobs/") => {} // already reported above
                Some(h) => report.corrupt.push(format!(
                    "{rel}: content hashes to {digest}, SHA256SUMS says sha256:{h}"
                )),
                None => report
                    .unexpected
                    .push(format!("{rel}: not listed in SHA256SUMS")),
            }
        }
    }
    present
}

fn check_layout_against_record(
    layout: &OciLayout,
    record: &MirrorRecord,
    present: &BTreeMap<Digest, u64>,
    report: &mut Report,
) -> Result<()> {
    let mut expected: BTreeMap<Digest, (u64, String)> = BTreeMap::new();
    for b in &record.blobs {
        expected.insert(b.digest.clone(), (b.size, format!("blob {}", b.digest)));
    }
    for b in &record.unfinished_blobs {
        let what = format!("blob {} of an unfinished image", b.digest);
        expected.insert(b.digest.clone(), (b.size, what));
    }
    for img in &record.images {
        expected.insert(
            img.digest.clone(),
            (img.size, format!("manifest of {}", img.source)),
        );
        for m in &img.manifests {
            let what = format!(
                "manifest {} of {}",
                m.platform.as_deref().unwrap_or("(no platform)"),
                img.source
            );
            expected.insert(m.digest.clone(), (m.size, what));
        }
    }
    for (digest, (size, what)) in &expected {
        let rel = format!("blobs/sha256/{}", digest.hex());
        match present.get(digest) {
            Some(s) if s == size => {}
            Some(s) => report.corrupt.push(format!(
                "{rel}: {what} is {s} bytes, the record says {size}"
            )),
            None if layout.blob_size(digest).is_some() => {} // present but corrupt: reported
            None => report.missing.push(format!("{rel}: {what}")),
        }
    }
    for digest in present.keys() {
        if !expected.contains_key(digest) {
            report.unexpected.push(format!(
                "blobs/sha256/{}: not in the mirror record",
                digest.hex()
            ));
        }
    }
    // The same check `mirror --from` makes before it pushes: every image once, at its
    // digest and placement, nothing else.
    let indexed: Vec<_> = crate::mirror::recorded::layout_images(layout)?
        .iter()
        .map(crate::mirror::recorded::LayoutImage::indexed)
        .collect();
    for difference in record.index_differences(&indexed) {
        let list = match difference.kind() {
            DifferenceKind::Missing => &mut report.missing,
            DifferenceKind::Corrupt => &mut report.corrupt,
            DifferenceKind::Unexpected => &mut report.unexpected,
        };
        list.push(difference.to_string());
    }
    Ok(())
}

/// Checks a registry against a record: every manifest by digest (and tag), every blob by HEAD.
pub async fn verify_registry(
    client: &crate::oci::registry::RegistryClient,
    target: &RegistryTarget,
    record: &MirrorRecord,
) -> Result<Report> {
    client
        .ping()
        .await
        .with_context(|| format!("checking the registry {}", target.registry))?;
    let mut report = Report {
        target: target.to_string(),
        ..Default::default()
    };
    let results: Vec<Result<Outcome>> = futures_util::stream::iter(registry_checks(target, record))
        .map(|check| check.run(client, &target.registry))
        .buffer_unordered(Concurrency::DEFAULT_BLOBS.get())
        .collect()
        .await;
    for r in results {
        let (missing, corrupt, bytes) = r?;
        report.checked += 1;
        report.bytes += bytes;
        report.missing.extend(missing);
        report.corrupt.extend(corrupt);
    }
    Ok(report.finish())
}

/// One HEAD a registry check makes.
enum Check {
    Manifest {
        repo: String,
        reference: String,
        expect: Digest,
        what: String,
    },
    Blob {
        repo: String,
        digest: Digest,
        size: u64,
    },
}

/// One check's outcome: what is missing, what is wrong, bytes confirmed.
type Outcome = (Option<String>, Option<String>, u64);

/// Every check the record asks of the registry: each image by tag (when it has one) and by
/// digest, each child manifest by digest, each blob by HEAD with its size.
fn registry_checks(target: &RegistryTarget, record: &MirrorRecord) -> Vec<Check> {
    let sizes: BTreeMap<&Digest, u64> = record.blobs.iter().map(|b| (&b.digest, b.size)).collect();
    let mut checks = Vec::new();
    for img in &record.images {
        let repo = target.repository_for(&img.path);
        let source_tag = || {
            crate::oci::reference::ImageRef::parse(&img.source)
                .ok()
                .and_then(|r| r.tag)
        };
        if let Some(tag) = img.tag.clone().or_else(source_tag) {
            checks.push(Check::Manifest {
                repo: repo.clone(),
                reference: tag.clone(),
                expect: img.digest.clone(),
                what: format!("{}/{repo}:{tag}", target.registry),
            });
        }
        let digests = std::iter::once(&img.digest).chain(img.manifests.iter().map(|m| &m.digest));
        for d in digests {
            checks.push(Check::Manifest {
                repo: repo.clone(),
                reference: d.to_string(),
                expect: d.clone(),
                what: format!("{}/{repo}@{d}", target.registry),
            });
        }
        for b in &img.blobs {
            checks.push(Check::Blob {
                repo: repo.clone(),
                digest: b.clone(),
                size: sizes.get(b).copied().unwrap_or(0),
            });
        }
    }
    checks
}

impl Check {
    async fn run(
        self,
        client: &crate::oci::registry::RegistryClient,
        registry: &str,
    ) -> Result<Outcome> {
        match self {
            Check::Manifest {
                repo,
                reference,
                expect,
                what,
            } => match client.head_manifest(&repo, &reference).await? {
                None => Ok((Some(format!("manifest {what}")), None, 0)),
                Some(d) if d == expect => Ok((None, None, 0)),
                Some(d) => Ok((
                    None,
                    Some(format!("manifest {what} is {d}, the record says {expect}")),
                    0,
                )),
            },
            Check::Blob { repo, digest, size } => match client.head_blob(&repo, &digest).await? {
                None => Ok((Some(format!("blob {registry}/{repo}@{digest}")), None, 0)),
                Some(s) if s == size => Ok((None, None, s)),
                Some(s) => Ok((
                    None,
                    Some(format!(
                        "blob {registry}/{repo}@{digest} is {s} bytes, the record says {size}"
                    )),
                    s,
                )),
            },
        }
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for m in &self.missing {
            writeln!(f, "missing: {m}")?;
        }
        for c in &self.corrupt {
            writeln!(f, "corrupt: {c}")?;
        }
        for u in &self.unexpected {
            writeln!(f, "unexpected: {u}")?;
        }
        if let Some(s) = &self.signed_by {
            let what = if self.target.starts_with("archive://") {
                "manifest.json and SHA256SUMS"
            } else {
                "record"
            };
            writeln!(f, "{what} signed by {s}")?;
        }
        writeln!(
            f,
            "{}: {} ({} checked, {}; {} missing, {} corrupt, {} unexpected)",
            self.target,
            if self.ok { "OK" } else { "FAILED" },
            self.checked,
            human_bytes(self.bytes),
            self.missing.len(),
            self.corrupt.len(),
            self.unexpected.len()
        )
    }
}
