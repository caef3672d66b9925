//! What the cluster needs to use the mirror, written beside the record and named and laid out
//! like oc-mirror v2's `cluster-resources/` so existing runbooks apply (`oc apply -f
//! cluster-resources/`): an ImageDigestMirrorSet for images mirrored by digest, an
//! ImageTagMirrorSet for images mirrored by tag, a CatalogSource (OLM v0) and a ClusterCatalog
//! (OLM v1) per mirrored catalog, the release signature ConfigMap. The `imageDigestSources`
//! snippet for install-config.yaml is not a Kubernetes object, so it is written beside the
//! folder, not in it: `oc apply` would refuse the whole folder.
//!
//! Mirrors are scoped to the namespace (the repository path without its last component) when
//! the destination keeps the source path under its prefix, as ours always does, so one entry
//! covers every image of that namespace; otherwise to the repository. Output is sorted; its only
//! time is the `createdAt` annotation (the run's start), as oc-mirror writes it.

use crate::oci::digest::Digest;
use crate::oci::layout::write_atomic;
use crate::oci::reference::ImageRef;
use anyhow::{Context, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The directory the resources are written to, beside the record.
pub const DIR: &str = "cluster-resources";
/// The ImageDigestMirrorSet file (oc-mirror's name).
pub const IDMS_FILE: &str = "idms-oc-mirror.yaml";
/// The ImageTagMirrorSet file (oc-mirror's name).
pub const ITMS_FILE: &str = "itms-oc-mirror.yaml";
/// The install-config.yaml snippet, written beside [`DIR`] (not in it: it is not a Kubernetes
/// object, and `oc apply -f cluster-resources/` must take every file there).
pub const DIGEST_SOURCES_FILE: &str = "install-config-imageDigestSources.yaml";
/// The release signature ConfigMap (oc-mirror's names; YAML and JSON).
pub const SIGNATURES_FILE: &str = "signature-configmap.yaml";
/// The UpdateService for `platform.graph` (oc-mirror's name).
pub const UPDATE_SERVICE_FILE: &str = "updateService.yaml";
/// The release signature ConfigMap as JSON.
pub const SIGNATURES_JSON_FILE: &str = "signature-configmap.json";

/// What kind of content an image is; each kind gets its own mirror set, as oc-mirror does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Category {
    /// Release payload and its components.
    Release,
    /// Operator bundles and their related images.
    Operator,
    /// Additional images.
    #[default]
    Generic,
    /// A rebuilt operator catalog: it gets a CatalogSource, no mirror-set entry.
    Catalog,
    /// A Helm chart (an OCI artifact Helm pulls, not the cluster): no mirror-set entry.
    Chart,
    /// The update graph data image: the UpdateService names it, no mirror-set entry.
    Graph,
}

impl Category {
    /// The category named `name` (as [`Category::name`] writes it).
    pub fn from_name(name: &str) -> Option<Self> {
        [
            Category::Release,
            Category::Operator,
            Category::Generic,
            Category::Catalog,
            Category::Chart,
            Category::Graph,
        ]
        .into_iter()
        .find(|c| c.name() == name)
    }

    /// Its lower-case name, as mirror-set names and index annotations use it.
    pub fn name(self) -> &'static str {
        match self {
            Category::Release => "release",
            Category::Operator => "operator",
            Category::Generic => "generic",
            Category::Catalog => "catalog",
            Category::Chart => "chart",
            Category::Graph => "graph",
        }
    }

    /// Whether the cluster pulls this content through ImageDigestMirrorSets and
    /// ImageTagMirrorSets (catalogs, charts and the graph image are named directly instead).
    pub fn has_mirror_set(self) -> bool {
        !matches!(self, Category::Catalog | Category::Chart | Category::Graph)
    }
}

/// One mirrored image: where it came from and where it is now.
#[derive(Clone, Debug)]
pub struct MirroredImage {
    /// The source reference as asked for (by tag or by digest).
    pub source: ImageRef,
    /// The destination registry host.
    pub registry: String,
    /// The destination repository.
    pub repository: String,
    /// What kind of content it is.
    pub category: Category,
}

/// Mirror entries by category: source scope -> mirror scopes.
type Scopes = BTreeMap<Category, BTreeMap<String, BTreeSet<String>>>;

/// The annotations every resource carries: oc-mirror v2's keys with our values (`createdBy`,
/// `createdAt`), and `bootstrap_version` where oc-mirror writes `oc-mirror_version`.
pub type Annotations = BTreeMap<&'static str, String>;

/// The resources of one mirror.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ClusterResources {
    /// When the run that mirrored the content started (RFC 3339 UTC), for `createdAt`.
    created_at: Option<String>,
    by_digest: Scopes,
    by_tag: Scopes,
    /// Mirrored (rebuilt) catalog images, as the cluster pulls them.
    catalogs: Vec<ImageRef>,
    /// Release signatures by release image digest, in order (`signature-1`, ...).
    signatures: BTreeMap<Digest, Vec<Vec<u8>>>,
    /// The update service: (release repository, graph data image), both at the destination.
    update_service: Option<(String, String)>,
}

/// The ConfigMap the cluster-version operator reads release signatures from.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct SignatureConfigMap {
    api_version: &'static str,
    kind: &'static str,
    metadata: SignatureMetadata,
    binary_data: BTreeMap<String, String>,
}

#[derive(serde::Serialize)]
struct SignatureMetadata {
    name: &'static str,
    namespace: &'static str,
    labels: BTreeMap<&'static str, &'static str>,
    annotations: Annotations,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct CatalogSourceSpec {
    source_type: &'static str,
    image: String,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct NamespacedResource<S> {
    api_version: &'static str,
    kind: &'static str,
    metadata: NamespacedMetadata,
    spec: S,
}

#[derive(serde::Serialize)]
struct NamespacedMetadata {
    name: String,
    namespace: &'static str,
    annotations: Annotations,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Resource<S> {
    api_version: &'static str,
    kind: &'static str,
    metadata: Metadata,
    spec: S,
}

#[derive(serde::Serialize)]
struct Metadata {
    name: String,
    annotations: Annotations,
}

/// OLM v1's `ClusterCatalog` spec (`olm.operatorframework.io/v1`), with the fields oc-mirror
/// writes: `priority` (0, written because the Go field has no `omitempty`) and the image.
#[derive(serde::Serialize)]
struct ClusterCatalogSpec {
    priority: i32,
    source: ClusterCatalogSource,
}

#[derive(serde::Serialize)]
struct ClusterCatalogSource {
    #[serde(rename = "type")]
    kind: &'static str,
    image: ClusterCatalogImage,
}

#[derive(serde::Serialize)]
struct ClusterCatalogImage {
    #[serde(rename = "ref")]
    reference: String,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct DigestSpec {
    image_digest_mirrors: Vec<Mirrors>,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct TagSpec {
    image_tag_mirrors: Vec<Mirrors>,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct InstallConfigSnippet {
    image_digest_sources: Vec<DigestSource>,
}

/// One `imageDigestSources[]` entry of install-config.yaml (the installer's
/// `ImageDigestSource`): images under `source` may be pulled by digest from any of `mirrors`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct DigestSource {
    /// The source scope (`quay.io/openshift-release-dev`).
    pub source: String,
    /// Its mirror scopes, sorted.
    pub mirrors: Vec<String>,
}

#[derive(serde::Serialize)]
struct Mirrors {
    source: String,
    mirrors: Vec<String>,
}

impl ClusterResources {
    /// The resources for `images`. A release image goes into the digest set even when
    /// mirrored by tag (the installer pulls releases by digest), as oc-mirror does.
    pub fn new(images: &[MirroredImage]) -> Self {
        let mut res = ClusterResources::default();
        for img in images.iter().filter(|i| i.category.has_mirror_set()) {
            let (source, mirror) = scopes(img);
            let by_digest = img.source.tag.is_none() || img.category == Category::Release;
            let by_tag = img.source.tag.is_some();
            for (wanted, set) in [(by_digest, &mut res.by_digest), (by_tag, &mut res.by_tag)] {
                if wanted {
                    set.entry(img.category)
                        .or_default()
                        .entry(source.clone())
                        .or_default()
                        .insert(mirror.clone());
                }
            }
        }
        res
    }

    /// Sets `createdAt` on every resource: when the run that mirrored the content started
    /// (RFC 3339 UTC). Without it the annotation is left out.
    pub fn set_created_at(&mut self, at: impl Into<String>) {
        self.created_at = Some(at.into());
    }

    /// The annotations every resource carries.
    fn annotations(&self) -> Annotations {
        let mut a = BTreeMap::from([
            ("createdBy", "bootstrap".to_string()),
            ("bootstrap_version", env!("CARGO_PKG_VERSION").to_string()),
        ]);
        if let Some(at) = &self.created_at {
            a.insert("createdAt", at.clone());
        }
        a
    }

    /// Adds a mirrored catalog image (at its destination): it gets a CatalogSource, and, as
    /// oc-mirror does, no mirror-set entry (the cluster pulls it from the CatalogSource).
    pub fn add_catalog(&mut self, destination: ImageRef) {
        if !self.catalogs.contains(&destination) {
            self.catalogs.push(destination);
        }
    }

    /// Each catalog with its resource's name (see [`catalog_name`]). Two catalogs whose names
    /// would be the same (the same last path component and tag under different paths) each get
    /// the first 8 hex digits of their reference's sha256 after it: otherwise the second file
    /// would replace the first, and its operators vanish from the cluster.
    ///
    /// A name longer than a DNS label allows (63: OLM names the catalog's Service after its
    /// CatalogSource) or ending in `-` is cut to fit and ends with that hash instead.
    fn named_catalogs(&self, kind: &str) -> Vec<(String, &ImageRef)> {
        const LABEL_MAX: usize = 63;
        let names: Vec<String> = self
            .catalogs
            .iter()
            .map(|i| catalog_name(kind, i))
            .collect();
        self.catalogs
            .iter()
            .zip(&names)
            .map(|(image, name)| {
                let hash = crate::oci::digest::Digest::of(image.to_string().as_bytes());
                let hash = &hash.hex()[..8];
                let clash = names.iter().filter(|n| *n == name).count() > 1;
                let name = if clash || name.len() > LABEL_MAX || name.ends_with('-') {
                    let keep = &name[..name.len().min(LABEL_MAX - 1 - hash.len())];
                    format!("{}-{hash}", keep.trim_end_matches('-'))
                } else {
                    name.clone()
                };
                (name, image)
            })
            .collect()
    }

    /// Adds the UpdateService oc-mirror writes for `platform.graph`: `releases` is the mirrored
    /// release repository (no tag), `graph_image` the graph data image at its destination.
    pub fn set_update_service(&mut self, releases: String, graph_image: String) {
        self.update_service = Some((releases, graph_image));
    }

    /// Adds the signatures of a mirrored release image (`digest`), in order.
    pub fn add_signatures(&mut self, digest: Digest, signatures: Vec<Vec<u8>>) {
        if !signatures.is_empty() {
            self.signatures.insert(digest, signatures);
        }
    }

    /// The release signature ConfigMap, as oc-mirror writes it: `mirrored-release-signatures`
    /// in `openshift-config-managed`, labelled `release.openshift.io/verification-signatures`,
    /// one `binaryData` key `sha256-<hex>-<n>` per signature; `(YAML, JSON)`, or `None` when
    /// no signatures were given.
    pub fn signatures_configmap(&self) -> Result<Option<(String, String)>> {
        if self.signatures.is_empty() {
            return Ok(None);
        }
        let mut binary_data = BTreeMap::new();
        for (digest, sigs) in &self.signatures {
            for (i, sig) in sigs.iter().enumerate() {
                binary_data.insert(
                    format!("{}-{}", digest.dashed(), i + 1),
                    base64::Engine::encode(&base64::engine::general_purpose::STANDARD, sig),
                );
            }
        }
        let cm = SignatureConfigMap {
            api_version: "v1",
            kind: "ConfigMap",
            metadata: SignatureMetadata {
                name: "mirrored-release-signatures",
                namespace: "openshift-config-managed",
                labels: BTreeMap::from([("release.openshift.io/verification-signatures", "")]),
                annotations: self.annotations(),
            },
            binary_data,
        };
        Ok(Some((
            serde_saphyr::to_string(&cm)?,
            serde_json::to_string_pretty(&cm)? + "\n",
        )))
    }

    /// One CatalogSource per catalog: `(file name, YAML)`. Named as oc-mirror names them,
    /// `cs-<last path component>-<tag, or the digest's first 12 hex digits>`, lower case, with
    /// characters DNS labels refuse turned into `-` (names that would clash get a hash, see
    /// [`Self::named_catalogs`]); in openshift-marketplace, sourceType grpc.
    pub fn catalog_sources(&self) -> Result<Vec<(String, String)>> {
        let mut out = Vec::new();
        for (name, image) in self.named_catalogs("cs") {
            let cs = NamespacedResource {
                api_version: "operators.coreos.com/v1alpha1",
                kind: "CatalogSource",
                metadata: NamespacedMetadata {
                    name: name.clone(),
                    namespace: "openshift-marketplace",
                    annotations: self.annotations(),
                },
                spec: CatalogSourceSpec {
                    source_type: "grpc",
                    image: image.to_string(),
                },
            };
            out.push((format!("{name}.yaml"), serde_saphyr::to_string(&cs)?));
        }
        out.sort();
        Ok(out)
    }

    /// One OLM v1 ClusterCatalog per catalog, beside its CatalogSource, as oc-mirror v2 writes
    /// them: `(file name, YAML)`, named `cc-<...>` with the CatalogSource's suffix; cluster
    /// scoped, `spec.source.type: Image`, the image at its destination.
    pub fn cluster_catalogs(&self) -> Result<Vec<(String, String)>> {
        let mut out = Vec::new();
        for (name, image) in self.named_catalogs("cc") {
            let cc = Resource {
                api_version: "olm.operatorframework.io/v1",
                kind: "ClusterCatalog",
                metadata: Metadata {
                    name: name.clone(),
                    annotations: self.annotations(),
                },
                spec: ClusterCatalogSpec {
                    priority: 0,
                    source: ClusterCatalogSource {
                        kind: "Image",
                        image: ClusterCatalogImage {
                            reference: image.to_string(),
                        },
                    },
                },
            };
            out.push((format!("{name}.yaml"), serde_saphyr::to_string(&cc)?));
        }
        out.sort();
        Ok(out)
    }

    /// The ImageDigestMirrorSet documents, or `None` when nothing was mirrored by digest.
    pub fn idms_yaml(&self) -> Result<Option<String>> {
        let docs: Vec<_> = self
            .by_digest
            .iter()
            .map(|(cat, scopes)| {
                self.resource(
                    "ImageDigestMirrorSet",
                    format!("idms-{}-0", cat.name()),
                    DigestSpec {
                        image_digest_mirrors: mirrors(scopes),
                    },
                )
            })
            .collect();
        yaml_documents(&docs)
    }

    /// The ImageTagMirrorSet documents, or `None` when nothing was mirrored by tag.
    pub fn itms_yaml(&self) -> Result<Option<String>> {
        let docs: Vec<_> = self
            .by_tag
            .iter()
            .map(|(cat, scopes)| {
                self.resource(
                    "ImageTagMirrorSet",
                    format!("itms-{}-0", cat.name()),
                    TagSpec {
                        image_tag_mirrors: mirrors(scopes),
                    },
                )
            })
            .collect();
        yaml_documents(&docs)
    }

    /// `imageDigestSources` for install-config.yaml: every digest mirror of every category,
    /// sorted by source; empty when nothing was mirrored by digest.
    pub fn digest_sources(&self) -> Vec<DigestSource> {
        let mut all: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for scopes in self.by_digest.values() {
            for (source, m) in scopes {
                all.entry(source.clone())
                    .or_default()
                    .extend(m.iter().cloned());
            }
        }
        all.into_iter()
            .map(|(source, mirrors)| DigestSource {
                source,
                mirrors: mirrors.into_iter().collect(),
            })
            .collect()
    }

    /// The install-config.yaml snippet holding [`Self::digest_sources`], or `None` when
    /// nothing was mirrored by digest.
    pub fn install_config_yaml(&self) -> Result<Option<String>> {
        let sources = self.digest_sources();
        if sources.is_empty() {
            return Ok(None);
        }
        let snippet = InstallConfigSnippet {
            image_digest_sources: sources,
        };
        Ok(Some(serde_saphyr::to_string(&snippet)?))
    }

    /// Writes the Kubernetes objects that have content into `dir` (created), and the
    /// install-config.yaml snippet beside it ([`DIGEST_SOURCES_FILE`] in `dir`'s parent);
    /// returns their paths. A snippet an earlier run left inside `dir` is removed, so the
    /// folder holds only what `oc apply -f` takes.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        let mut files = vec![
            (IDMS_FILE.to_string(), self.idms_yaml()?),
            (ITMS_FILE.to_string(), self.itms_yaml()?),
        ];
        for (name, text) in self
            .catalog_sources()?
            .into_iter()
            .chain(self.cluster_catalogs()?)
        {
            files.push((name, Some(text)));
        }
        if let Some((yaml, json)) = self.signatures_configmap()? {
            files.push((SIGNATURES_FILE.to_string(), Some(yaml)));
            files.push((SIGNATURES_JSON_FILE.to_string(), Some(json)));
        }
        if let Some((releases, graph)) = &self.update_service {
            let yaml =
                super::graph_data::update_service_yaml(releases, graph, &self.annotations())?;
            files.push((UPDATE_SERVICE_FILE.to_string(), Some(yaml)));
        }
        let mut written = Vec::new();
        for (name, text) in files {
            let Some(text) = text else { continue };
            fs_err::create_dir_all(dir).context("creating the cluster resources directory")?;
            written.push(write_file(&dir.join(name), &text)?);
        }
        let stale = dir.join(DIGEST_SOURCES_FILE);
        if stale.is_file() {
            fs_err::remove_file(&stale)?;
        }
        if let Some(text) = self.install_config_yaml()? {
            let beside = dir.parent().unwrap_or(Path::new("."));
            written.push(write_file(&beside.join(DIGEST_SOURCES_FILE), &text)?);
        }
        Ok(written)
    }

    fn resource<S>(&self, kind: &'static str, name: String, spec: S) -> Resource<S> {
        Resource {
            api_version: "config.openshift.io/v1",
            kind,
            metadata: Metadata {
                name,
                annotations: self.annotations(),
            },
            spec,
        }
    }
}

fn write_file(path: &Path, text: &str) -> Result<PathBuf> {
    write_atomic(path, text.as_bytes()).with_context(|| format!("writing {}", path.display()))?;
    Ok(path.to_path_buf())
}

fn mirrors(scopes: &BTreeMap<String, BTreeSet<String>>) -> Vec<Mirrors> {
    scopes
        .iter()
        .map(|(source, m)| Mirrors {
            source: source.clone(),
            mirrors: m.iter().cloned().collect(),
        })
        .collect()
}

/// Documents separated by `---` (a leading one too, as oc-mirror writes them).
fn yaml_documents<T: serde::Serialize>(docs: &[T]) -> Result<Option<String>> {
    if docs.is_empty() {
        return Ok(None);
    }
    let mut out = String::new();
    for d in docs {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(d)?);
    }
    Ok(Some(out))
}

/// The source and mirror scope of an image: its namespace when the destination path ends with
/// the source path (then every image of the namespace maps the same way), else the repository.
fn scopes(img: &MirroredImage) -> (String, String) {
    let src_repo = &img.source.repository;
    if img.repository.ends_with(src_repo.as_str()) {
        (
            namespace(&img.source.registry, src_repo),
            namespace(&img.registry, &img.repository),
        )
    } else {
        (
            format!("{}/{}", img.source.registry, src_repo),
            format!("{}/{}", img.registry, img.repository),
        )
    }
}

/// `<kind>-<repository's last component>-<suffix>` (`cs` for a CatalogSource, `cc` for a
/// ClusterCatalog): the suffix is the tag's first 12 characters, or for an image by digest
/// only the digest's first 12 hex digits.
fn catalog_name(kind: &str, image: &ImageRef) -> String {
    let last = image
        .repository
        .rsplit('/')
        .next()
        .unwrap_or(&image.repository);
    let suffix: String = match (&image.tag, &image.digest) {
        (Some(tag), _) => tag.chars().take(12).collect(),
        (None, Some(d)) => d.hex()[..12].to_string(),
        (None, None) => "0".to_string(),
    };
    let dns = |c: char| {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_alphanumeric() || c == '-' {
            c
        } else {
            '-'
        }
    };
    format!("{kind}-{last}-{suffix}").chars().map(dns).collect()
}

fn namespace(registry: &str, repository: &str) -> String {
    match repository.rsplit_once('/') {
        Some((ns, _)) => format!("{registry}/{ns}"),
        None => registry.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mirrored(source: &str, category: Category) -> MirroredImage {
        let source = ImageRef::parse(source).unwrap();
        MirroredImage {
            repository: format!("mirror/{}", source.repository),
            registry: "registry.site.example:8443".into(),
            source,
            category,
        }
    }

    fn sample() -> ClusterResources {
        let mut res = ClusterResources::new(&[
            mirrored("quay.io/openshift-release-dev/ocp-release:4.18.3-x86_64", Category::Release),
            mirrored(
                "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:0000000000000000000000000000000000000000000000000000000000000001",
                Category::Release,
            ),
            mirrored(
                "nvcr.io/nvidia/gpu-operator@sha256:0000000000000000000000000000000000000000000000000000000000000002",
                Category::Operator,
            ),
            mirrored("registry.redhat.io/ubi9/ubi:9.4", Category::Generic),
            mirrored("registry.redhat.io/ubi9/ubi-minimal:9.4", Category::Generic),
            mirrored(
                "registry.example.com/models/granite@sha256:0000000000000000000000000000000000000000000000000000000000000003",
                Category::Generic,
            ),
            mirrored("docker.io/library/busybox:1.36", Category::Generic),
        ]);
        res.set_created_at("2026-03-04T05:06:07Z");
        res
    }

    /// Compares with a golden file beside this test; `UPDATE_GOLDEN=1` rewrites it. Our
    /// version is filtered to `VERSION`, so a release does not rewrite the files.
    fn golden(name: &str, actual: &str) {
        let actual = actual.replace(
            &format!("bootstrap_version: \"{}\"\n", env!("CARGO_PKG_VERSION")),
            "bootstrap_version: \"VERSION\"\n",
        );
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/openshift/testdata")
            .join(name);
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            fs_err::write(&path, &actual).unwrap();
        }
        let expected = fs_err::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", path.display()));
        assert_eq!(actual, expected, "{} differs", path.display());
    }

    #[test]
    fn idms_itms_and_install_config_match_their_golden_files() {
        let res = sample();
        golden("idms-oc-mirror.yaml", &res.idms_yaml().unwrap().unwrap());
        golden("itms-oc-mirror.yaml", &res.itms_yaml().unwrap().unwrap());
        golden(
            "install-config-imageDigestSources.yaml",
            &res.install_config_yaml().unwrap().unwrap(),
        );
    }

    #[test]
    fn every_mirrored_source_namespace_is_mapped() {
        let res = sample();
        let idms = res.idms_yaml().unwrap().unwrap();
        let itms = res.itms_yaml().unwrap().unwrap();
        for ns in [
            "quay.io/openshift-release-dev",
            "nvcr.io/nvidia",
            "registry.example.com/models",
        ] {
            assert!(
                idms.contains(&format!("source: {ns}\n")),
                "{ns} not in\n{idms}"
            );
        }
        for ns in ["registry.redhat.io/ubi9", "docker.io/library"] {
            assert!(
                itms.contains(&format!("source: {ns}\n")),
                "{ns} not in\n{itms}"
            );
            assert!(
                !idms.contains(&format!("source: {ns}\n")),
                "{ns} by tag in IDMS"
            );
        }
    }

    #[test]
    fn catalog_sources_are_named_like_oc_mirror_and_match_their_golden_file() {
        let mut res = sample();
        res.add_catalog(
            ImageRef::parse("registry.site.example:8443/mirror/redhat/redhat-operator-index:v4.18")
                .unwrap(),
        );
        res.add_catalog(
            ImageRef::parse(
                "registry.site.example:8443/mirror/nvidia/gpu-catalog@sha256:00000000000000000000000000000000000000000000000000000000000000ab",
            )
            .unwrap(),
        );
        let cs = res.catalog_sources().unwrap();
        let names: Vec<&str> = cs.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "cs-gpu-catalog-000000000000.yaml",
                "cs-redhat-operator-index-v4-18.yaml"
            ]
        );
        golden("cs-redhat-operator-index-v4-18.yaml", &cs[1].1);
        // Catalogs get CatalogSources, not mirror-set entries.
        assert!(!res.idms_yaml().unwrap().unwrap().contains("operator-index"));
    }

    /// Two catalogs with the same last path component and tag under different paths would
    /// write one file over the other: both get a hash of their reference after the name, in
    /// CatalogSources and ClusterCatalogs alike; the same catalog added twice is one.
    #[test]
    fn catalogs_whose_names_clash_get_a_hash_each_and_keep_their_own_image() {
        let mut res = sample();
        let a = "registry.site.example:8443/mirror/redhat/redhat-operator-index:v4.18";
        let b = "registry.site.example:8443/mirror/partner/redhat-operator-index:v4.18";
        for image in [a, b, a] {
            res.add_catalog(ImageRef::parse(image).unwrap());
        }
        for (kind, files) in [
            ("cs", res.catalog_sources().unwrap()),
            ("cc", res.cluster_catalogs().unwrap()),
        ] {
            assert_eq!(files.len(), 2, "{files:?}");
            let hash =
                |i: &str| crate::oci::digest::Digest::of(i.as_bytes()).hex()[..8].to_string();
            for image in [a, b] {
                let name = format!("{kind}-redhat-operator-index-v4-18-{}", hash(image));
                let (_, yaml) = files
                    .iter()
                    .find(|(f, _)| *f == format!("{name}.yaml"))
                    .unwrap_or_else(|| panic!("no {name}.yaml in {files:?}"));
                assert!(yaml.contains(&format!("name: {name}")), "{yaml}");
                assert!(yaml.contains(image), "{yaml}");
            }
        }
    }

    /// A name past 63 characters (a long repository name) is cut and ends with the hash, so
    /// OLM can name the catalog's Service after it; a short one is left as oc-mirror writes it.
    #[test]
    fn a_long_catalog_name_is_cut_to_a_dns_label_and_keeps_a_hash() {
        let mut res = sample();
        let long = "registry.site.example:8443/mirror/partner/a-very-long-operator-catalog-index-name-for-certified-partners:v4.18";
        res.add_catalog(ImageRef::parse(long).unwrap());
        let cs = res.catalog_sources().unwrap();
        let hash = crate::oci::digest::Digest::of(long.as_bytes()).hex()[..8].to_string();
        let name = cs[0].0.trim_end_matches(".yaml");
        assert!(name.len() <= 63, "{name}");
        assert!(
            name.starts_with("cs-a-very-long-operator-catalog"),
            "{name}"
        );
        assert!(name.ends_with(&format!("-{hash}")), "{name}");
        assert!(cs[0].1.contains(&format!("name: {name}")));
    }

    /// oc-mirror v2 writes an OLM v1 ClusterCatalog beside each CatalogSource, `cc-` where the
    /// CatalogSource has `cs-`, cluster scoped, pointing at the same image.
    #[test]
    fn a_cluster_catalog_beside_each_catalog_source_matches_its_golden_file() {
        let mut res = sample();
        res.add_catalog(
            ImageRef::parse("registry.site.example:8443/mirror/redhat/redhat-operator-index:v4.18")
                .unwrap(),
        );
        res.add_catalog(
            ImageRef::parse(
                "registry.site.example:8443/mirror/nvidia/gpu-catalog@sha256:00000000000000000000000000000000000000000000000000000000000000ab",
            )
            .unwrap(),
        );
        let cc = res.cluster_catalogs().unwrap();
        let names: Vec<&str> = cc.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "cc-gpu-catalog-000000000000.yaml",
                "cc-redhat-operator-index-v4-18.yaml"
            ]
        );
        golden("cc-redhat-operator-index-v4-18.yaml", &cc[1].1);
        let by_digest: serde_json::Value = serde_saphyr::from_str(&cc[0].1).unwrap();
        assert_eq!(
            by_digest["spec"]["source"]["image"]["ref"],
            "registry.site.example:8443/mirror/nvidia/gpu-catalog@sha256:00000000000000000000000000000000000000000000000000000000000000ab",
        );
    }

    /// `oc apply -f cluster-resources/` takes every file in the folder, and the
    /// install-config snippet is no Kubernetes object: it is written beside the folder, and
    /// one an earlier version left inside is removed.
    #[test]
    fn the_install_config_snippet_is_written_beside_the_folder_not_in_it() {
        let mut res = sample();
        res.add_catalog(
            ImageRef::parse("registry.site.example:8443/mirror/redhat/redhat-operator-index:v4.18")
                .unwrap(),
        );
        let top = tempfile::tempdir().unwrap();
        let dir = top.path().join(DIR);
        fs_err::create_dir_all(&dir).unwrap();
        fs_err::write(dir.join(DIGEST_SOURCES_FILE), "imageDigestSources: []\n").unwrap();
        let written = res.write(&dir).unwrap();
        let names: Vec<String> = written
            .iter()
            .map(|p| {
                let rel = p.strip_prefix(top.path()).unwrap();
                rel.display().to_string()
            })
            .collect();
        assert_eq!(
            names,
            [
                "cluster-resources/idms-oc-mirror.yaml",
                "cluster-resources/itms-oc-mirror.yaml",
                "cluster-resources/cs-redhat-operator-index-v4-18.yaml",
                "cluster-resources/cc-redhat-operator-index-v4-18.yaml",
                "install-config-imageDigestSources.yaml",
            ]
        );
        let mut in_dir: Vec<String> = fs_err::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        in_dir.sort();
        assert_eq!(in_dir.len(), 4, "{in_dir:?}");
        assert!(!in_dir.contains(&DIGEST_SOURCES_FILE.to_string()));
        let snippet = fs_err::read_to_string(top.path().join(DIGEST_SOURCES_FILE)).unwrap();
        assert_eq!(snippet, res.install_config_yaml().unwrap().unwrap());
    }

    #[test]
    fn release_signatures_configmap_matches_its_golden_file() {
        let mut res = sample();
        assert!(res.signatures_configmap().unwrap().is_none());
        let d: Digest = "sha256:0000000000000000000000000000000000000000000000000000000000000001"
            .parse()
            .unwrap();
        res.add_signatures(d, vec![b"first".to_vec(), b"second".to_vec()]);
        let (yaml, json) = res.signatures_configmap().unwrap().unwrap();
        golden(SIGNATURES_FILE, &yaml);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["metadata"]["namespace"], "openshift-config-managed");
        assert_eq!(
            v["binaryData"]
                ["sha256-0000000000000000000000000000000000000000000000000000000000000001-2"],
            "c2Vjb25k"
        );
    }

    #[test]
    fn nothing_by_digest_writes_no_idms() {
        let res = ClusterResources::new(&[mirrored("quay.io/a/b:1", Category::Generic)]);
        assert!(res.idms_yaml().unwrap().is_none());
        assert!(res.install_config_yaml().unwrap().is_none());
        let dir = tempfile::tempdir().unwrap();
        let written = res.write(&dir.path().join(DIR)).unwrap();
        assert_eq!(written, vec![dir.path().join(DIR).join(ITMS_FILE)]);
        assert!(!dir.path().join(DIGEST_SOURCES_FILE).exists());
    }
}
