//! A release payload's component list: the release image carries
//! `release-manifests/image-references`, an ImageStream (`image.openshift.io/v1`) whose
//! `spec.tags[].from.name` name every component image by digest. oc-mirror puts the release
//! image in `<prefix>/openshift/release-images` and the components in
//! `<prefix>/openshift/release`; these names are what clusters' mirror sets expect.

use crate::oci::reference::ImageRef;
use anyhow::{bail, Context, Result};

/// Where the payload's image references live inside the release image.
pub const IMAGE_REFERENCES: &str = "release-manifests/image-references";
/// Destination repository (under the prefix) of release images.
pub const RELEASE_IMAGES_REPO: &str = "openshift/release-images";
/// Destination repository (under the prefix) of release components.
pub const COMPONENTS_REPO: &str = "openshift/release";

/// A release image's version: its config's `io.openshift.release` label.
pub fn version_label(config: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(config).ok()?;
    v.pointer("/config/Labels/io.openshift.release")
        .and_then(|l| l.as_str())
        .map(str::to_string)
}

/// Where the release's update metadata lives inside the release image.
pub const RELEASE_METADATA: &str = "release-manifests/release-metadata";

/// The release's name as oc writes it into a binary's version placeholder (oc's
/// `ReleaseInfo.PreferredName`): `release-metadata`'s `version` when the release has that file,
/// else `image-references`' `metadata.name`.
pub fn preferred_name(metadata: Option<&[u8]>, image_references: &[u8]) -> Option<String> {
    let field = |bytes: &[u8], pointer: &str| {
        serde_json::from_slice::<serde_json::Value>(bytes)
            .ok()?
            .pointer(pointer)?
            .as_str()
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    };
    match metadata {
        Some(m) => field(m, "/version"),
        None => field(image_references, "/metadata/name"),
    }
}

/// One component of a release.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Component {
    /// Its tag name in the ImageStream (`machine-config-operator`, ...).
    pub name: String,
    /// Its image, by digest.
    pub image: ImageRef,
}

#[derive(serde::Deserialize)]
struct ImageStream {
    kind: String,
    #[serde(rename = "apiVersion")]
    api_version: String,
    spec: Spec,
}

#[derive(serde::Deserialize)]
struct Spec {
    #[serde(default)]
    tags: Vec<Tag>,
}

#[derive(serde::Deserialize)]
struct Tag {
    name: String,
    from: From,
}

#[derive(serde::Deserialize)]
struct From {
    kind: String,
    name: String,
}

/// The components listed by an `image-references` document; `origin` (the release image)
/// names it in errors. Every component must be a `DockerImage` pinned by digest: a release
/// that names a component by tag could change under the mirror, so it is refused.
pub fn components(bytes: &[u8], origin: &str) -> Result<Vec<Component>> {
    let stream: ImageStream = serde_json::from_slice(bytes)
        .with_context(|| format!("{origin}: {IMAGE_REFERENCES} is not an ImageStream"))?;
    if stream.kind != "ImageStream" || !stream.api_version.starts_with("image.openshift.io/") {
        bail!(
            "{origin}: {IMAGE_REFERENCES} is a {} {}, not an image.openshift.io ImageStream",
            stream.api_version,
            stream.kind
        );
    }
    let mut out = Vec::new();
    for (i, tag) in stream.spec.tags.into_iter().enumerate() {
        let at = format!("{origin}: {IMAGE_REFERENCES} spec.tags[{i}] ({})", tag.name);
        if tag.from.kind != "DockerImage" {
            bail!("{at}: from.kind is {}, expected DockerImage", tag.from.kind);
        }
        let image = ImageRef::parse(&tag.from.name)
            .map_err(|e| anyhow::anyhow!("{at}: from.name: {}", e.reason))?;
        if image.digest.is_none() {
            bail!("{at}: from.name {} is not pinned by digest", tag.from.name);
        }
        out.push(Component {
            name: tag.name,
            image,
        });
    }
    if out.is_empty() {
        bail!("{origin}: {IMAGE_REFERENCES} lists no component images");
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(tags: serde_json::Value) -> Vec<u8> {
        serde_json::json!({
            "kind": "ImageStream",
            "apiVersion": "image.openshift.io/v1",
            "metadata": {"name": "4.18.3", "creationTimestamp": null},
            "spec": {"lookupPolicy": {"local": false}, "tags": tags},
        })
        .to_string()
        .into_bytes()
    }

    fn tag(name: &str, image: &str) -> serde_json::Value {
        serde_json::json!({
            "name": name,
            "annotations": {"io.openshift.build.commit.id": "abc"},
            "from": {"kind": "DockerImage", "name": image},
            "generation": null,
            "importPolicy": {},
            "referencePolicy": {"type": ""},
        })
    }

    const D1: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
    const D2: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

    #[test]
    fn components_are_read_sorted_and_pinned() {
        let bytes = doc(serde_json::json!([
            tag(
                "machine-config-operator",
                &format!("quay.io/openshift-release-dev/ocp-v4.0-art-dev@{D2}")
            ),
            tag(
                "cli",
                &format!("quay.io/openshift-release-dev/ocp-v4.0-art-dev@{D1}")
            ),
        ]));
        let c = components(&bytes, "ocp-release:4.18.3").unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].name, "cli");
        assert_eq!(c[0].image.digest.as_ref().unwrap().to_string(), D1);
        assert_eq!(
            c[1].image.repository,
            "openshift-release-dev/ocp-v4.0-art-dev"
        );
    }

    #[test]
    fn tags_other_kinds_and_empty_lists_are_refused_by_name() {
        let e = components(
            &doc(serde_json::json!([tag("cli", "quay.io/a/b:latest")])),
            "rel",
        )
        .unwrap_err();
        assert!(
            e.to_string().contains(
                "spec.tags[0] (cli): from.name quay.io/a/b:latest is not pinned by digest"
            ),
            "{e}"
        );
        let mut t = tag("cli", &format!("quay.io/a/b@{D1}"));
        t["from"]["kind"] = "ImageStreamTag".into();
        let e = components(&doc(serde_json::json!([t])), "rel").unwrap_err();
        assert!(e.to_string().contains("from.kind is ImageStreamTag"), "{e}");
        let e = components(&doc(serde_json::json!([])), "rel").unwrap_err();
        assert!(e.to_string().contains("lists no component images"), "{e}");
        let e = components(
            b"{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"spec\":{}}",
            "rel",
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("not an image.openshift.io ImageStream"),
            "{e}"
        );
    }
}
