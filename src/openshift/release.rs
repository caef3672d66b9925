//! A release payload's component list: the release image carries
//! `release-manifests/image-references`, an ImageStream (`image.openshift.io/v1`) whose
//! `spec.tags[].from.name` name every component image by digest. oc-mirror puts the release
//! image in `<prefix>/openshift/release-images` and the components in
//! `<prefix>/openshift/release`; these names are what clusters' mirror sets expect.

use crate::oci::reference::ImageRef;
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;

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

/// The installer's boot images inside the release image: a ConfigMap whose `data.stream` is the
/// CoreOS stream metadata (JSON). oc-mirror v2 reads the KubeVirt container disk image from it
/// (`getKubeVirtImages`, internal/pkg/release/local_stored_collector.go), not from
/// `image-references`.
pub const COREOS_BOOTIMAGES: &str = "release-manifests/0000_50_installer_coreos-bootimages.yaml";

/// The name oc-mirror v2 gives the KubeVirt container disk image: its tag in
/// `openshift/release` is `<release tag>-kube-virt-container`, with `-<arch key>` when several
/// architectures are mirrored (internal/pkg/release/const.go).
pub const KUBEVIRT_NAME: &str = "kube-virt-container";

/// oc-mirror v2's error when a release has no KubeVirt container disk for the architectures asked.
pub const KUBEVIRT_NOT_FOUND: &str = "could not find kubevirt image in this release";

/// A release's KubeVirt container disk image for one CoreOS architecture key (`x86_64`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KubeVirtImage {
    /// The stream's architecture key.
    pub arch: String,
    /// `architectures.<arch>.images.kubevirt.digest-ref`.
    pub image: ImageRef,
}

#[derive(serde::Deserialize)]
struct BootImagesConfigMap {
    #[serde(default)]
    data: BTreeMap<String, String>,
}

#[derive(serde::Deserialize)]
struct Stream {
    #[serde(default)]
    architectures: BTreeMap<String, StreamArch>,
}

#[derive(serde::Deserialize)]
struct StreamArch {
    #[serde(default)]
    images: StreamImages,
}

#[derive(Default, serde::Deserialize)]
struct StreamImages {
    kubevirt: Option<StreamKubeVirt>,
}

#[derive(serde::Deserialize)]
struct StreamKubeVirt {
    #[serde(default, rename = "digest-ref")]
    digest_ref: String,
}

/// The KubeVirt container disk images of a release, as oc-mirror v2 finds them: `bytes` is
/// [`COREOS_BOOTIMAGES`] (absent: none), `keys` the stream architecture keys asked for (`None`:
/// every key the stream has), `origin` the release image. An empty `digest-ref` is skipped; no
/// image at all is [`KUBEVIRT_NOT_FOUND`].
pub fn kubevirt_images(
    bytes: Option<&[u8]>,
    keys: Option<&[String]>,
    origin: &str,
) -> Result<Vec<KubeVirtImage>> {
    let not_found = |why: &str| anyhow::anyhow!("{origin}: {KUBEVIRT_NOT_FOUND} ({why})");
    let Some(bytes) = bytes else {
        return Err(not_found(&format!("it has no {COREOS_BOOTIMAGES}")));
    };
    let text = std::str::from_utf8(bytes)
        .with_context(|| format!("{origin}: {COREOS_BOOTIMAGES} is not UTF-8"))?;
    let map: BootImagesConfigMap = serde_saphyr::from_str(text).map_err(|e| {
        anyhow::anyhow!("{origin}: {COREOS_BOOTIMAGES}: marshalling kubevirt yaml file {e}")
    })?;
    let stream = map.data.get("stream").map(String::as_str).unwrap_or("");
    let stream: Stream = serde_json::from_str(stream).map_err(|e| {
        anyhow::anyhow!(
            "{origin}: {COREOS_BOOTIMAGES}: parsing json from kubevirt configmap data {e}"
        )
    })?;
    let wanted: Vec<&String> = match keys {
        Some(keys) => keys.iter().collect(),
        None => stream.architectures.keys().collect(),
    };
    let mut out = Vec::new();
    for key in wanted {
        let Some(r) = stream
            .architectures
            .get(key)
            .and_then(|a| a.images.kubevirt.as_ref())
            .map(|k| k.digest_ref.as_str())
            .filter(|r| !r.is_empty())
        else {
            continue;
        };
        let image = ImageRef::parse(r).map_err(|e| {
            anyhow::anyhow!(
                "{origin}: {COREOS_BOOTIMAGES}: architectures.{key}.images.kubevirt.digest-ref '{r}': {}",
                e.reason
            )
        })?;
        out.push(KubeVirtImage {
            arch: key.clone(),
            image,
        });
    }
    if out.is_empty() {
        let asked: Vec<&str> = keys
            .map(|k| k.iter().map(String::as_str).collect())
            .unwrap_or_default();
        return Err(not_found(&format!(
            "no architectures.<arch>.images.kubevirt.digest-ref for {}",
            if asked.is_empty() {
                "any architecture".to_string()
            } else {
                asked.join(", ")
            }
        )));
    }
    Ok(out)
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

    fn bootimages(architectures: serde_json::Value) -> Vec<u8> {
        let stream = serde_json::json!({"stream": "rhcos-4.18", "architectures": architectures});
        let stream = serde_json::to_string_pretty(&stream).unwrap();
        let indented: String = stream.lines().map(|l| format!("    {l}\n")).collect();
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: coreos-bootimages\n  namespace: openshift-machine-config-operator\ndata:\n  releaseVersion: 4.18.3\n  stream: |\n{indented}")
            .into_bytes()
    }

    fn kubevirt(digest: &str) -> serde_json::Value {
        serde_json::json!({"images": {"kubevirt": {
            "release": "418.94.202501221327-0",
            "image": "quay.io/openshift-release-dev/ocp-v4.0-art-dev:4.18-9.4-kubevirt",
            "digest-ref": format!("quay.io/openshift-release-dev/ocp-v4.0-art-dev@{digest}"),
        }}})
    }

    /// The KubeVirt container disk is `architectures.<key>.images.kubevirt.digest-ref` of the
    /// bootimages ConfigMap's stream, for the keys asked (or every key).
    #[test]
    fn kubevirt_images_are_read_from_the_coreos_stream() {
        let doc = bootimages(serde_json::json!({"x86_64": kubevirt(D1), "s390x": kubevirt(D2)}));
        let x86 = vec!["x86_64".to_string()];
        let found = kubevirt_images(Some(&doc), Some(&x86), "rel").unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].arch, "x86_64");
        assert_eq!(found[0].image.digest.as_ref().unwrap().to_string(), D1);
        let all = kubevirt_images(Some(&doc), None, "rel").unwrap();
        let keys: Vec<&str> = all.iter().map(|k| k.arch.as_str()).collect();
        assert_eq!(keys, ["s390x", "x86_64"]);
    }

    /// A release without the stream entry (or the file) fails with oc-mirror's message.
    #[test]
    fn a_release_without_a_kubevirt_image_fails_as_oc_mirror_does() {
        let x86 = vec!["x86_64".to_string()];
        let no_kubevirt = bootimages(serde_json::json!({"x86_64": {"images": {}}}));
        let empty =
            bootimages(serde_json::json!({"x86_64": {"images": {"kubevirt": {"digest-ref": ""}}}}));
        for doc in [Some(no_kubevirt.as_slice()), Some(empty.as_slice()), None] {
            let e = kubevirt_images(doc, Some(&x86), "rel")
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with("rel: could not find kubevirt image in this release"),
                "{e}"
            );
        }
        let e = kubevirt_images(Some(b"data: [\n"), Some(&x86), "rel")
            .unwrap_err()
            .to_string();
        assert!(e.contains("marshalling kubevirt yaml file"), "{e}");
        let e = kubevirt_images(Some(b"data:\n  stream: '{'\n"), Some(&x86), "rel")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("parsing json from kubevirt configmap data"),
            "{e}"
        );
    }
}
