//! Signatures, attestations and other content that belongs to an image, carried with it so a
//! regulated site can enforce image signatures after the gap.
//!
//! Found at the source when an image is resolved:
//! - sigstore attachments (cosign's tag scheme): `<repo>:sha256-<hex>.sig` (what
//!   containers/image reads with `use-sigstore-attachments: true`, and so what an OpenShift
//!   ClusterImagePolicy or ImagePolicy enforces), `.att` (attestations) and `.sbom`, for the
//!   image's top manifest and each kept child (oc-mirror v2 copies the `.sig` of both);
//! - OCI 1.1 referrers of the top manifest: the registry's referrers API where it has one, else
//!   the referrers tag schema's index at `<repo>:sha256-<hex>`.
//!
//! One `tags/list` per repository shows every tag-scheme attachment and fallback index at once,
//! so an image without any costs no request of its own (a registry that refuses to list tags
//! is asked for each by HEAD); the referrers API is asked once per registry, and per image
//! only on a registry that has it. Each attachment becomes a [`ResolvedImage`] of its own,
//! placed in the repository of the image it belongs to, and is moved, recorded and verified
//! like one, byte for byte; nothing is checked cryptographically here (the site's policy does
//! that). A rebuilt catalog has a new digest that no source signature covers: it gets none.

use super::plan::{self, ResolvedImage, Source};
use crate::oci::digest::Digest;
use crate::oci::manifest::RawManifest;
use crate::oci::platform::PlatformFilter;
use crate::oci::reference::{ImageRef, RegistryTarget};
use crate::oci::registry::{Registries, RegistryClient, RegistryError};
use anyhow::{Context, Result};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use tokio::sync::OnceCell;

/// Index annotation of a disk mirror naming what an entry belongs to:
/// `<kind> <digest it belongs to> <source reference of that image>`.
pub const ATTACHED_ANNOTATION: &str = "dev.bootstrap.mirror.attached";

/// What an attachment is to its image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AttachmentKind {
    /// A sigstore signature (`sha256-<hex>.sig`).
    Signature,
    /// A sigstore attestation (`sha256-<hex>.att`).
    Attestation,
    /// An SBOM attached by cosign (`sha256-<hex>.sbom`).
    Sbom,
    /// An OCI 1.1 referrer: a manifest whose `subject` is the image.
    Referrer,
}

impl AttachmentKind {
    const TAGGED: [AttachmentKind; 3] = [
        AttachmentKind::Signature,
        AttachmentKind::Attestation,
        AttachmentKind::Sbom,
    ];

    /// Its name in records, reports and annotations.
    pub fn name(self) -> &'static str {
        match self {
            AttachmentKind::Signature => "signature",
            AttachmentKind::Attestation => "attestation",
            AttachmentKind::Sbom => "sbom",
            AttachmentKind::Referrer => "referrer",
        }
    }

    /// The kind [`name`](Self::name) names.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::TAGGED
            .into_iter()
            .chain([AttachmentKind::Referrer])
            .find(|k| k.name() == name)
    }

    /// The tag of this attachment of `digest` in cosign's scheme (none for a referrer).
    pub fn tag_of(self, digest: &Digest) -> Option<String> {
        let suffix = match self {
            AttachmentKind::Signature => "sig",
            AttachmentKind::Attestation => "att",
            AttachmentKind::Sbom => "sbom",
            AttachmentKind::Referrer => return None,
        };
        Some(format!("{}.{suffix}", digest.dashed()))
    }
}

/// What an attachment belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attached {
    /// What it is.
    pub kind: AttachmentKind,
    /// The manifest it signs or describes (the image's top manifest or a child).
    pub subject: Digest,
    /// The source reference of that image.
    pub image: String,
}

impl Attached {
    /// The value of [`ATTACHED_ANNOTATION`].
    pub fn annotation(&self) -> String {
        format!("{} {} {}", self.kind.name(), self.subject, self.image)
    }

    /// Reads [`ATTACHED_ANNOTATION`]; `origin` names the entry in errors.
    pub fn from_annotation(value: &str, origin: &str) -> Result<Self> {
        let bad = || {
            anyhow::anyhow!(
                "{origin}: {ATTACHED_ANNOTATION} '{value}' is not '<signature|attestation|sbom|referrer> <sha256:digest> <image>'"
            )
        };
        let mut parts = value.split(' ');
        let (Some(kind), Some(subject), Some(image), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad());
        };
        Ok(Attached {
            kind: AttachmentKind::from_name(kind).ok_or_else(bad)?,
            subject: subject.parse().map_err(|_| bad())?,
            image: image.to_string(),
        })
    }
}

/// One repository's tags, listed once however many images ask.
type TagList = Arc<OnceCell<Option<Arc<BTreeSet<String>>>>>;

/// Finds the attachments of images at their source registries, listing each repository's
/// tags once and remembering which registries have the referrers API.
pub(super) struct Finder {
    regs: Arc<Registries>,
    /// By (registry, repository).
    tags: Mutex<HashMap<(String, String), TagList>>,
    referrers_api: Mutex<HashMap<String, Arc<OnceCell<bool>>>>,
}

impl Finder {
    /// A finder reading through `regs`.
    pub(super) fn new(regs: Arc<Registries>) -> Self {
        Finder {
            regs,
            tags: Mutex::default(),
            referrers_api: Mutex::default(),
        }
    }

    /// The repository's tags, listed once; `None` when the registry refuses to list them
    /// (some allow pulls but not `tags/list`), and each tag is then asked for by HEAD.
    async fn tags_of(&self, image: &ImageRef) -> Option<Arc<BTreeSet<String>>> {
        let cell = self
            .tags
            .lock()
            .expect("tag cache poisoned")
            .entry((image.registry.clone(), image.repository.clone()))
            .or_default()
            .clone();
        cell.get_or_init(|| async {
            let client = self.regs.client(&image.registry).ok()?;
            let tags = client.list_tags(&image.repository).await.ok()?;
            Some(Arc::new(tags.into_iter().collect::<BTreeSet<_>>()))
        })
        .await
        .clone()
    }

    /// Whether `image`'s repository has `tag`: from its tag list, else by HEAD (a 404 is
    /// the normal answer).
    async fn has(
        &self,
        image: &ImageRef,
        tags: Option<&BTreeSet<String>>,
        tag: &str,
    ) -> Result<bool> {
        if let Some(tags) = tags {
            return Ok(tags.contains(tag));
        }
        let client = self.regs.client(&image.registry)?;
        let found = client
            .head_manifest(&image.repository, tag)
            .await
            .with_context(|| format!("looking for {}:{tag}", image.repository))?;
        Ok(found.is_some())
    }

    /// Every attachment of `image` its source holds, resolved and placed beside it.
    pub(super) async fn attached_to(&self, image: &ResolvedImage) -> Result<Vec<ResolvedImage>> {
        if image.rebuilt_from.is_some() || image.attached.is_some() {
            return Ok(Vec::new());
        }
        let tags = self.tags_of(&image.source).await;
        let tags = tags.as_deref();
        let mut found: Vec<(ImageRef, Attached)> = Vec::new();
        let subjects = std::iter::once(&image.root.digest)
            .chain(image.children.iter().map(|c| &c.manifest.digest));
        for subject in subjects {
            for kind in AttachmentKind::TAGGED {
                let tag = kind.tag_of(subject).expect("a tagged kind");
                if self.has(&image.source, tags, &tag).await? {
                    let mut at = image.source.clone();
                    at.tag = Some(tag);
                    at.digest = None;
                    found.push((at, self.attached(kind, subject, image)));
                }
            }
        }
        for digest in self.referrers(image, tags).await? {
            let mut at = image.source.clone();
            at.tag = None;
            at.digest = Some(digest);
            let attached = self.attached(AttachmentKind::Referrer, &image.root.digest, image);
            found.push((at, attached));
        }
        let source = Source::Registry(self.regs.clone());
        let mut out = Vec::new();
        for (at, attached) in found {
            let mut resolved = plan::resolve(&source, &at, None, &PlatformFilter::all(), None)
                .await
                .with_context(|| {
                    format!("resolving {} of {}", attached.kind.name(), image.source)
                })?;
            if attached.kind == AttachmentKind::Referrer
                && subject_of(&resolved.root).as_ref() != Some(&attached.subject)
            {
                // A stale entry of a fallback index: it refers to something else now.
                continue;
            }
            resolved.placement = plan::Placement {
                repository: image.placement.repository.clone(),
                tag: None,
                category: image.placement.category,
            };
            resolved.attached = Some(attached);
            out.push(resolved);
        }
        Ok(out)
    }

    fn attached(&self, kind: AttachmentKind, subject: &Digest, image: &ResolvedImage) -> Attached {
        Attached {
            kind,
            subject: subject.clone(),
            image: image.source.to_string(),
        }
    }

    /// The digests of the referrers of `image`'s top manifest: from the referrers API where
    /// the registry has it, else from the fallback index at `sha256-<hex>` when the tag list
    /// shows one (and it is not the image itself, kept there from garbage collection).
    async fn referrers(
        &self,
        image: &ResolvedImage,
        tags: Option<&BTreeSet<String>>,
    ) -> Result<Vec<Digest>> {
        let subject = &image.root.digest;
        let client = self.regs.client(&image.source.registry)?;
        let repo = &image.source.repository;
        // The first image of a registry finds out whether it has the API; the rest wait for
        // that answer rather than ask too.
        let cell = self
            .referrers_api
            .lock()
            .expect("referrers cache poisoned")
            .entry(image.source.registry.clone())
            .or_default()
            .clone();
        let mut own = None;
        let own_ref = &mut own;
        let probe = &client;
        let api = *cell
            .get_or_try_init(move || async move {
                let listed = probe
                    .referrers(repo, subject)
                    .await
                    .with_context(|| format!("asking for the referrers of {}", image.source))?;
                let api = listed.is_some();
                *own_ref = Some(listed);
                anyhow::Ok(api)
            })
            .await?;
        if api {
            let listed = match own {
                Some(listed) => listed,
                None => client
                    .referrers(repo, subject)
                    .await
                    .with_context(|| format!("asking for the referrers of {}", image.source))?,
            };
            return listed.as_ref().map(index_entries).unwrap_or(Ok(Vec::new()));
        }
        let tag = subject.dashed();
        if image.source.tag.as_deref() == Some(tag.as_str())
            || !self.has(&image.source, tags, &tag).await?
        {
            return Ok(Vec::new());
        }
        let index = client
            .get_manifest(repo, &tag)
            .await
            .with_context(|| format!("reading the referrers tag {tag} of {}", image.source))?;
        if index.digest == *subject || !index.is_index() {
            return Ok(Vec::new());
        }
        index_entries(&index)
    }
}

/// The digests an index lists.
fn index_entries(index: &RawManifest) -> Result<Vec<Digest>> {
    #[derive(serde::Deserialize)]
    struct Index {
        #[serde(default)]
        manifests: Vec<Entry>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        digest: String,
    }
    let parsed: Index =
        serde_json::from_slice(&index.bytes).context("reading a referrers index")?;
    parsed
        .manifests
        .iter()
        .map(|e| {
            e.digest
                .parse()
                .with_context(|| format!("a referrers index lists '{}'", e.digest))
        })
        .collect()
}

/// The `subject` digest a manifest names, if any.
fn subject_of(manifest: &RawManifest) -> Option<Digest> {
    let v: serde_json::Value = serde_json::from_slice(&manifest.bytes).ok()?;
    v.get("subject")?.get("digest")?.as_str()?.parse().ok()
}

/// The referrers index descriptor of a referrer manifest, as the OCI distribution spec
/// lists it: media type, digest, size, artifact type and annotations.
fn descriptor(manifest: &RawManifest) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_slice(&manifest.bytes).unwrap_or_default();
    let artifact_type = v
        .get("artifactType")
        .or_else(|| v.get("config").and_then(|c| c.get("mediaType")))
        .cloned();
    let mut d = serde_json::json!({
        "mediaType": manifest.media_type,
        "digest": manifest.digest.to_string(),
        "size": manifest.bytes.len(),
    });
    if let Some(t) = artifact_type {
        d["artifactType"] = t;
    }
    if let Some(a) = v.get("annotations") {
        d["annotations"] = a.clone();
    }
    d
}

/// What became of the referrers index of one image at the destination.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReferrersIndex {
    /// The image's destination repository.
    pub repository: String,
    /// The image's top manifest digest.
    pub subject: Digest,
    /// What was done.
    pub outcome: ReferrersOutcome,
}

/// What was done about an image's referrers at the destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReferrersOutcome {
    /// The destination lists referrers itself (the OCI referrers API).
    Api,
    /// The fallback index at `sha256-<hex>` lists them.
    Written,
    /// The tag keeps the image itself (digest-only content); not listed.
    KeptImageTag,
    /// The tag holds another manifest that is not an index, left alone; not listed.
    TagTaken,
}

/// Lists every referrer pushed to a registry without the referrers API in the referrers tag
/// schema's index (`<repo>:sha256-<hex>` of the image), adding to one already there. Where
/// that tag holds the image itself (digest-only content, kept from garbage collection by it)
/// the image keeps the tag: the referrers stay under their own `sha256-<hex>` tags and the
/// returned outcome says so. A regulated site's policy reads the `.sig` tags, not this index.
pub(super) async fn write_referrer_indexes(
    client: &RegistryClient,
    target: &RegistryTarget,
    images: &[&ResolvedImage],
) -> Result<Vec<ReferrersIndex>> {
    let mut groups: BTreeMap<(String, Digest), Vec<&RawManifest>> = BTreeMap::new();
    for img in images {
        if let Some(a) = img
            .attached
            .as_ref()
            .filter(|a| a.kind == AttachmentKind::Referrer)
        {
            let repo = target.repository_for(img.dest_path());
            groups
                .entry((repo, a.subject.clone()))
                .or_default()
                .push(&img.root);
        }
    }
    let mut out = Vec::new();
    for ((repo, subject), referrers) in groups {
        let outcome = write_one(client, &repo, &subject, &referrers)
            .await
            .with_context(|| format!("writing the referrers index of {repo}@{subject}"))?;
        out.push(ReferrersIndex {
            repository: repo,
            subject,
            outcome,
        });
    }
    Ok(out)
}

async fn write_one(
    client: &RegistryClient,
    repo: &str,
    subject: &Digest,
    referrers: &[&RawManifest],
) -> Result<ReferrersOutcome> {
    if client.referrers(repo, subject).await?.is_some() {
        return Ok(ReferrersOutcome::Api);
    }
    let tag = subject.dashed();
    let existing = match client.get_manifest(repo, &tag).await {
        Ok(m) => Some(m),
        Err(RegistryError::NotFound { .. }) => None,
        Err(e) => return Err(e.into()),
    };
    let mut index = match &existing {
        Some(m) if m.digest == *subject => return Ok(ReferrersOutcome::KeptImageTag),
        Some(m) if !m.is_index() => return Ok(ReferrersOutcome::TagTaken),
        Some(m) => serde_json::from_slice::<serde_json::Value>(&m.bytes)
            .context("reading the referrers index already there")?,
        None => serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [],
        }),
    };
    let listed = index
        .get_mut("manifests")
        .and_then(|m| m.as_array_mut())
        .context("the index at the referrers tag has no manifests array")?;
    let before = listed.len();
    for r in referrers {
        let digest = r.digest.to_string();
        if !listed
            .iter()
            .any(|e| e.get("digest").and_then(|d| d.as_str()) == Some(&digest))
        {
            listed.push(descriptor(r));
        }
    }
    if listed.len() == before && existing.is_some() {
        return Ok(ReferrersOutcome::Written);
    }
    let bytes = serde_json::to_vec(&index)?;
    let manifest = RawManifest::new(
        bytes::Bytes::from(bytes),
        Some("application/vnd.oci.image.index.v1+json"),
    );
    client.put_manifest(repo, &tag, &manifest).await?;
    Ok(ReferrersOutcome::Written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_annotation_carries_kind_subject_and_image() {
        let a = Attached {
            kind: AttachmentKind::Attestation,
            subject: Digest::of(b"x"),
            image: "q.io/a/b:v1".into(),
        };
        assert_eq!(Attached::from_annotation(&a.annotation(), "t").unwrap(), a);
        let err = Attached::from_annotation("signed sha256:00 x", "idx entry y")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("idx entry y") && err.contains(ATTACHED_ANNOTATION),
            "{err}"
        );
    }

    #[test]
    fn cosign_tags_name_the_digest() {
        let d = Digest::of(b"x");
        assert_eq!(
            AttachmentKind::Signature.tag_of(&d),
            Some(format!("sha256-{}.sig", d.hex()))
        );
        assert_eq!(AttachmentKind::Referrer.tag_of(&d), None);
    }
}
