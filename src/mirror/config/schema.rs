//! The ImageSetConfiguration's schema, field for field oc-mirror's (internal/pkg/api/v2alpha1:
//! type_config.go, type_config_include.go, type_platform.go), and how the strict loader reads
//! it. Optional lists, flags and sub-objects accept an explicit null, as oc-mirror (Go's
//! encoding/json) does: `additionalImages:` with every entry commented out is common.

use super::{API_VERSION, KIND, MAX_FILE_BYTES, V1_API_VERSION};
use crate::yaml::{self, IgnoreCase, Schema, Severity};
use serde::{Deserialize, Deserializer};

/// Deserializes `null` as the type's default (Go's behaviour for slices, bools and structs).
fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// The top level as it is deserialized; [`super::ImageSetConfig`] adds the location index.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RawConfig {
    pub(super) api_version: String,
    pub(super) kind: String,
    #[serde(deserialize_with = "nullable")]
    pub(super) mirror: Mirror,
    #[serde(default)]
    pub(super) archive_size: Option<i64>,
}

/// What an ImageSetConfiguration file must be.
static SCHEMA: Schema = Schema {
    document: "an ImageSetConfiguration",
    name: KIND,
    api_version: API_VERSION,
    // oc-mirror v2 never looks at apiVersion (its own e2e configurations still say v1alpha2):
    // such a file is read as v2alpha1, as v2 reads it; keys only v1 knew stay unknown.
    other_versions: &[(
        V1_API_VERSION,
        Severity::Warning,
        "mirror.openshift.io/v1alpha2 is oc-mirror v1's apiVersion; oc-mirror v2 reads the file as v2alpha1, and so does bootstrap: set `apiVersion: mirror.openshift.io/v2alpha1`",
    )],
    kind: KIND,
    kind_required: true,
    other_kinds: &[(
        "DeleteImageSetConfiguration",
        "DeleteImageSetConfiguration (oc-mirror delete) is not supported by bootstrap; it reads `kind: ImageSetConfiguration`",
    )],
    hint: special_hint,
    unknown_note: None,
    // oc-mirror decodes with Go's encoding/json (keys matched ignoring case), after looking up
    // `kind` and `mirror` exactly in a plain map (internal/pkg/config/load.go).
    keys_ignore_case: Some(IgnoreCase {
        reader: "oc-mirror",
        exact_top_level: &["kind", "mirror"],
    }),
    max_bytes: MAX_FILE_BYTES,
};

impl yaml::Document for RawConfig {
    const SCHEMA: &'static Schema = &SCHEMA;

    fn header(&self) -> yaml::Header {
        yaml::Header {
            api_version: Some(self.api_version.clone()),
            kind: Some(self.kind.clone()),
        }
    }
}

/// `mirror`: what the image set holds (oc-mirror `Mirror`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Mirror {
    /// `mirror.platform`: OpenShift/OKD release payloads, and the architecture list.
    #[serde(default, deserialize_with = "nullable")]
    pub platform: Platform,
    /// `mirror.operators`: operator catalogs.
    #[serde(default, deserialize_with = "nullable")]
    pub operators: Vec<Operator>,
    /// `mirror.additionalImages`: individual images, by tag or digest.
    #[serde(default, deserialize_with = "nullable")]
    pub additional_images: Vec<AdditionalImage>,
    /// `mirror.helm`: Helm charts and the images they reference.
    #[serde(default, deserialize_with = "nullable")]
    pub helm: Helm,
    /// `mirror.blockedImages`: images (regular expressions in oc-mirror) to leave out.
    #[serde(default, deserialize_with = "nullable")]
    pub blocked_images: Vec<BlockedImage>,
    /// `mirror.samples`: in the schema, not implemented by oc-mirror.
    #[serde(default, deserialize_with = "nullable")]
    pub samples: Vec<SampleImage>,
}

/// `mirror.platform` (oc-mirror `Platform`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Platform {
    /// `graph`: also mirror the update graph (Cincinnati) data image.
    #[serde(default, deserialize_with = "nullable")]
    pub graph: bool,
    /// `channels`: release channels to mirror.
    #[serde(default, deserialize_with = "nullable")]
    pub channels: Vec<ReleaseChannel>,
    /// `architectures`: release payload architectures. bootstrap also uses it to filter
    /// multi-arch indexes of every image it mirrors (oc-mirror applies it to releases only).
    #[serde(default, deserialize_with = "nullable")]
    pub architectures: Vec<String>,
    /// `platforms`: os/architecture pairs (newer oc-mirror; exclusive with `architectures`).
    #[serde(default, deserialize_with = "nullable")]
    pub platforms: Vec<PlatformFilter>,
    /// `release`: one release image by reference (oc-mirror's disk-to-mirror shortcut).
    #[serde(default)]
    pub release: Option<String>,
    /// `kubeVirtContainer`: also mirror the KubeVirt CoreOS container of the payload.
    #[serde(default, deserialize_with = "nullable")]
    pub kube_virt_container: bool,
}

/// `mirror.platform.channels[]` (oc-mirror `ReleaseChannel`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReleaseChannel {
    /// `name`, e.g. `stable-4.16`.
    pub name: String,
    /// `type`: `ocp` (default) or `okd`.
    #[serde(default, rename = "type", deserialize_with = "nullable")]
    pub platform_type: PlatformType,
    /// `minVersion`.
    #[serde(default)]
    pub min_version: Option<String>,
    /// `maxVersion`.
    #[serde(default)]
    pub max_version: Option<String>,
    /// `shortestPath`: only the releases on the shortest upgrade path from min to max.
    #[serde(default, deserialize_with = "nullable")]
    pub shortest_path: bool,
    /// `full`: every release of the channel, not only its head.
    #[serde(default, deserialize_with = "nullable")]
    pub full: bool,
}

/// `mirror.platform.channels[].type`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PlatformType {
    /// OpenShift Container Platform (oc-mirror's default).
    #[default]
    Ocp,
    /// OKD.
    Okd,
}

/// `platforms[]` entries (oc-mirror `InstancePlatformFilter`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PlatformFilter {
    /// `os`, e.g. `linux`.
    pub os: String,
    /// `architecture`, e.g. `arm64`.
    pub architecture: String,
}

/// `mirror.operators[]` (oc-mirror `Operator`, with its inlined `IncludeConfig`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Operator {
    /// `catalog`: the catalog image (or `oci://` path).
    pub catalog: String,
    /// `targetCatalog`: namespace/name the catalog is mirrored as.
    #[serde(default)]
    pub target_catalog: Option<String>,
    /// `targetTag`: tag the catalog is mirrored with.
    #[serde(default)]
    pub target_tag: Option<String>,
    /// `full`: every bundle, not only channel heads.
    #[serde(default, deserialize_with = "nullable")]
    pub full: bool,
    /// `skipDependencies`: do not add the bundles' dependencies.
    #[serde(default, deserialize_with = "nullable")]
    pub skip_dependencies: bool,
    /// `packages`: which packages (default: all).
    #[serde(default, deserialize_with = "nullable")]
    pub packages: Vec<IncludePackage>,
    /// `targetCatalogSourceTemplate`: path of a CatalogSource template.
    #[serde(default)]
    pub target_catalog_source_template: Option<String>,
    /// `platforms`: os/architecture pairs of the catalog and operator images.
    #[serde(default, deserialize_with = "nullable")]
    pub platforms: Vec<PlatformFilter>,
}

/// `mirror.operators[].packages[]` (oc-mirror `IncludePackage`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct IncludePackage {
    /// `name` of the package.
    pub name: String,
    /// `channels`: which channels (default: the default channel's head).
    #[serde(default, deserialize_with = "nullable")]
    pub channels: Vec<IncludeChannel>,
    /// `defaultChannel`: override of the package's default channel.
    #[serde(default)]
    pub default_channel: Option<String>,
    /// `minVersion` over all channels.
    #[serde(default)]
    pub min_version: Option<String>,
    /// `maxVersion` over all channels.
    #[serde(default)]
    pub max_version: Option<String>,
}

/// `mirror.operators[].packages[].channels[]` (oc-mirror `IncludeChannel`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct IncludeChannel {
    /// `name` of the channel.
    pub name: String,
    /// `minVersion` in this channel.
    #[serde(default)]
    pub min_version: Option<String>,
    /// `maxVersion` in this channel.
    #[serde(default)]
    pub max_version: Option<String>,
}

/// `mirror.helm` (oc-mirror `Helm`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Helm {
    /// `repositories`: remote chart repositories.
    #[serde(default, deserialize_with = "nullable")]
    pub repositories: Vec<HelmRepository>,
    /// `local`: charts on disk.
    #[serde(default, deserialize_with = "nullable")]
    pub local: Vec<HelmChart>,
}

/// `mirror.helm.repositories[]` (oc-mirror `Repository`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HelmRepository {
    /// `name` of the repository.
    pub name: String,
    /// `url` of the repository.
    pub url: String,
    /// `charts` to pull from it.
    #[serde(default, deserialize_with = "nullable")]
    pub charts: Vec<HelmChart>,
}

/// A Helm chart (oc-mirror `Chart`), remote or local.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HelmChart {
    /// `name` of the chart.
    pub name: String,
    /// `version` of the chart.
    #[serde(default)]
    pub version: Option<String>,
    /// `path` on disk (local charts).
    #[serde(default)]
    pub path: Option<String>,
    /// `imagePaths`: extra JSON paths to image references in the rendered chart.
    #[serde(default, deserialize_with = "nullable")]
    pub image_paths: Vec<String>,
    /// `platforms`: os/architecture pairs of the chart's images.
    #[serde(default, deserialize_with = "nullable")]
    pub platforms: Vec<PlatformFilter>,
}

/// `mirror.additionalImages[]` (oc-mirror `AdditionalImage`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AdditionalImage {
    /// `name`: the image reference, `registry/repository:tag`, `...@sha256:<hex>` or both.
    pub name: String,
    /// `targetRepo`: repository path to mirror the image to.
    #[serde(default)]
    pub target_repo: Option<String>,
    /// `targetTag`: tag to mirror the image with.
    #[serde(default)]
    pub target_tag: Option<String>,
    /// `platforms`: os/architecture pairs to keep of a multi-arch image.
    #[serde(default, deserialize_with = "nullable")]
    pub platforms: Vec<PlatformFilter>,
}

/// `mirror.blockedImages[]` (oc-mirror `BlockedImage`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BlockedImage {
    /// `name`: a regular expression matched against image references (in oc-mirror).
    pub name: String,
}

/// `mirror.samples[]` (oc-mirror `SampleImage`; not implemented by oc-mirror either).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SampleImage {
    /// `name`.
    pub name: String,
}

/// Keys that are not misspellings but belong elsewhere.
fn special_hint(field: &str, parent: &str) -> Option<&'static str> {
    match (parent, field) {
        ("", "delete") => Some("delete belongs in a DeleteImageSetConfiguration (oc-mirror delete), which bootstrap does not read"),
        ("", "storageConfig") => Some("storageConfig is oc-mirror v1 only; v2 keeps its state in the workspace, so remove it"),
        ("", "metadata") => Some("oc-mirror's ImageSetConfiguration has no metadata; remove it"),
        ("mirror.platform", "architecture") => Some("the key is architectures (a list)"),
        ("", f) if f.eq_ignore_ascii_case("mirror") => Some("oc-mirror looks this key up exactly as `mirror` (it says \"configuration missing the `mirror` stanza\"); write mirror"),
        (p, "targetName") if is_operator(p) => Some("targetName is oc-mirror v1 only; v2 replaced it with targetCatalog (namespace/name, without tag)"),
        (p, "originalRef") if is_operator(p) => Some("originalRef is oc-mirror v1 only; remove it"),
        _ => None,
    }
}

/// True for the path of one `mirror.operators[]` entry.
fn is_operator(path: &str) -> bool {
    path.strip_prefix("mirror.operators[")
        .is_some_and(|rest| rest.ends_with(']') && !rest.contains('.'))
}
