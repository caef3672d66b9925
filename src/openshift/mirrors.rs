//! Where a release's components are in the site registry, found as oc finds them: the release's
//! `image-references` names each component at its source (`quay.io/openshift-release-dev/
//! ocp-v4.0-art-dev@sha256:...`), and digest mirror sets (ImageDigestMirrorSet
//! `spec.imageDigestMirrors`, or install-config's `imageDigestSources`, the same pairs) map that
//! source to the places it was mirrored to. This is what `oc adm release extract --idms-file`
//! and the cluster's CRI-O do (containers/image `sysregistriesv2`): the most specific source
//! that matches the repository, as itself or as a parent namespace, wins; its mirrors are tried
//! in their order, the matched part of the name replaced by the mirror. Nothing assumes where a
//! particular mirroring tool puts components: oc-mirror's `openshift/release`, `oc adm release
//! mirror`'s single repository and any other layout work when their mirror set says so.

use super::cluster::DigestSource;
use crate::oci::reference::ImageRef;
use anyhow::{bail, Context, Result};
use std::path::Path;

/// A set of digest mirrors: source scope to mirror scopes, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DigestMirrors {
    sources: Vec<DigestSource>,
}

/// Which kind of mirror set document a file holds.
#[derive(Clone, Copy)]
enum Kind {
    Idms,
    Icsp,
}

/// Bytes beyond which a mirror set file is not one (oc-mirror's for a full site is some KiB).
const MAX_IDMS: u64 = 16 << 20;

impl DigestMirrors {
    /// The mirror set from install-config-style pairs (the mirror record's
    /// [`super::record::MirrorRecord::digest_sources`]).
    pub fn new(sources: Vec<DigestSource>) -> Self {
        DigestMirrors { sources }
    }

    /// Reads ImageDigestMirrorSet documents (`config.openshift.io/v1`, as `bootstrap mirror` and
    /// oc-mirror write `idms-oc-mirror.yaml`); other documents in the file are refused.
    pub fn from_idms_file(path: &Path) -> Result<Self> {
        let text = crate::yaml::read_text(path, MAX_IDMS, "an ImageDigestMirrorSet file")
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        Self::from_idms_yaml(&text).with_context(|| path.display().to_string())
    }

    /// As [`Self::from_idms_file`], from the file's text.
    pub fn from_idms_yaml(text: &str) -> Result<Self> {
        Self::from_yaml(text, Kind::Idms)
    }

    /// Reads ImageContentSourcePolicy documents (`operator.openshift.io/v1alpha1`
    /// `spec.repositoryDigestMirrors`), as `oc --icsp-file` does; the installer hands `oc` its
    /// mirror configuration in this form (`pkg/asset/agent/image/oc.go`).
    pub fn from_icsp_yaml(text: &str) -> Result<Self> {
        Self::from_yaml(text, Kind::Icsp)
    }

    fn from_yaml(text: &str, kind: Kind) -> Result<Self> {
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Doc {
            kind: String,
            api_version: String,
            #[serde(default)]
            spec: Spec,
        }
        #[derive(serde::Deserialize, Default)]
        #[serde(rename_all = "camelCase")]
        struct Spec {
            #[serde(default)]
            image_digest_mirrors: Vec<Entry>,
            #[serde(default)]
            repository_digest_mirrors: Vec<Entry>,
        }
        #[derive(serde::Deserialize)]
        struct Entry {
            source: String,
            #[serde(default)]
            mirrors: Vec<String>,
        }
        let docs: Vec<Doc> = serde_saphyr::from_multiple(text)
            .map_err(|e| anyhow::anyhow!("not ImageDigestMirrorSet YAML: {e}"))?;
        let mut sources = Vec::new();
        for (i, doc) in docs.into_iter().enumerate() {
            let (api_version, wanted, field) = match kind {
                Kind::Idms => (
                    "config.openshift.io/v1",
                    "ImageDigestMirrorSet",
                    "imageDigestMirrors",
                ),
                Kind::Icsp => (
                    "operator.openshift.io/v1alpha1",
                    "ImageContentSourcePolicy",
                    "repositoryDigestMirrors",
                ),
            };
            if doc.kind != wanted || doc.api_version != api_version {
                bail!(
                    "document {} is a {} {}, not a {api_version} {wanted}",
                    i + 1,
                    doc.api_version,
                    doc.kind
                );
            }
            let entries = match kind {
                Kind::Idms => doc.spec.image_digest_mirrors,
                Kind::Icsp => doc.spec.repository_digest_mirrors,
            };
            for (j, e) in entries.into_iter().enumerate() {
                if e.source.is_empty() {
                    bail!("document {}: spec.{field}[{j}].source is empty", i + 1);
                }
                sources.push(DigestSource {
                    source: e.source,
                    mirrors: e.mirrors,
                });
            }
        }
        Ok(DigestMirrors { sources })
    }

    /// Whether it maps nothing.
    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }

    /// Where `image` (by digest) may be pulled from, in the order to try: the mirrors of the
    /// most specific matching source, each with the matched part replaced; the image itself
    /// when no source matches (oc would pull it from where it is named).
    pub fn candidates(&self, image: &ImageRef) -> Vec<ImageRef> {
        let name = format!("{}/{}", image.registry, image.repository);
        let best = self
            .sources
            .iter()
            .filter_map(|s| {
                let scope = s.source.trim_end_matches('/');
                let rest = name.strip_prefix(scope)?;
                (rest.is_empty() || rest.starts_with('/')).then_some((scope.len(), s, rest))
            })
            .max_by_key(|(len, _, _)| *len);
        let Some((_, source, rest)) = best else {
            return vec![image.clone()];
        };
        // Every entry for the same scope adds its mirrors (CRI-O merges them).
        let scope = source.source.trim_end_matches('/');
        let mut out: Vec<ImageRef> = Vec::new();
        for s in self
            .sources
            .iter()
            .filter(|s| s.source.trim_end_matches('/') == scope)
        {
            for m in &s.mirrors {
                let full = format!("{}{rest}", m.trim_end_matches('/'));
                let Some((registry, repository)) = full.split_once('/') else {
                    continue;
                };
                let candidate = ImageRef {
                    registry: registry.to_string(),
                    repository: repository.to_string(),
                    tag: None,
                    digest: image.digest.clone(),
                };
                if !out.contains(&candidate) {
                    out.push(candidate);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn image(s: &str) -> ImageRef {
        ImageRef::parse(&format!("{s}@{D}")).unwrap()
    }

    /// oc-mirror's placement, `oc adm release mirror`'s single repository, and a namespace
    /// scope: each maps as containers-registries does (longest source wins, mirrors in order,
    /// the rest of the name kept under a namespace mirror).
    #[test]
    fn a_component_maps_through_the_most_specific_source() {
        let idms = DigestMirrors::from_idms_yaml(
            "apiVersion: config.openshift.io/v1\nkind: ImageDigestMirrorSet\nmetadata:\n  name: release-0\nspec:\n  imageDigestMirrors:\n  - mirrors:\n    - site:5000/ocp/openshift/release\n    source: quay.io/openshift-release-dev/ocp-v4.0-art-dev\n  - mirrors:\n    - site:5000/ocp/openshift/release-images\n    source: quay.io/openshift-release-dev/ocp-release\n---\napiVersion: config.openshift.io/v1\nkind: ImageDigestMirrorSet\nmetadata:\n  name: generic-0\nspec:\n  imageDigestMirrors:\n  - mirrors:\n    - other:443/mirror/openshift-release-dev\n    - third:5000/x\n    source: quay.io/openshift-release-dev\n",
        )
        .unwrap();
        let c = idms.candidates(&image("quay.io/openshift-release-dev/ocp-v4.0-art-dev"));
        assert_eq!(c, vec![image("site:5000/ocp/openshift/release")]);
        let c = idms.candidates(&image("quay.io/openshift-release-dev/other/thing"));
        assert_eq!(
            c,
            vec![
                image("other:443/mirror/openshift-release-dev/other/thing"),
                image("third:5000/x/other/thing")
            ]
        );
        // A source is a whole path component: `ocp-release-nightly` is not under `ocp-release`.
        let c = idms.candidates(&image("quay.io/openshift-release-dev/ocp-release-nightly"));
        assert_eq!(
            c,
            vec![
                image("other:443/mirror/openshift-release-dev/ocp-release-nightly"),
                image("third:5000/x/ocp-release-nightly")
            ]
        );
        let c = idms.candidates(&image("registry.example/unmapped"));
        assert_eq!(c, vec![image("registry.example/unmapped")]);
    }

    #[test]
    fn other_documents_are_refused() {
        let e = DigestMirrors::from_idms_yaml(
            "apiVersion: operator.openshift.io/v1alpha1\nkind: ImageContentSourcePolicy\nspec: {}\n",
        )
        .unwrap_err();
        assert!(
            format!("{e:#}").contains("not a config.openshift.io/v1 ImageDigestMirrorSet"),
            "{e:#}"
        );
    }
}
