//! The lab's operator catalog: `redhat/redhat-operator-index:v4.18`, a file-based catalog of
//! seven real packages with realistic channels, `replaces` chains, `skips` and `skipRange`, and a
//! dependency (gpu-operator-certified v24.9.x requires nfd >=4.17.0). Every bundle image and
//! related image is a small real image pushed by digest, so a catalog mirror can be rehearsed
//! end to end.

use super::image::{self, filler, File, Image, ImageSpec};
use anyhow::Result;
use bootstrap::oci::layers::CONFIGS_LABEL;
use bootstrap::openshift::fbc::{PROPERTY_PACKAGE, PROPERTY_PACKAGE_REQUIRED};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// Repository of the catalog image.
pub const CATALOG_REPO: &str = "redhat/redhat-operator-index";
/// Tag of the catalog image.
pub const CATALOG_TAG: &str = "v4.18";

/// A related image: its `name` in the bundle, its repository, and the build it is (bundles
/// naming the same repository and build share the image).
struct Related(&'static str, &'static str, &'static str);

struct BundleDef {
    version: &'static str,
    related: &'static [Related],
    /// `olm.package.required`: (package, versionRange).
    requires: Option<(&'static str, &'static str)>,
}

struct EntryDef {
    version: &'static str,
    replaces: Option<&'static str>,
    skips: &'static [&'static str],
    skip_range: Option<&'static str>,
}

const fn entry(version: &'static str, replaces: Option<&'static str>) -> EntryDef {
    EntryDef {
        version,
        replaces,
        skips: &[],
        skip_range: None,
    }
}

struct PackageDef {
    name: &'static str,
    /// Bundle names are `<prefix><version>`.
    prefix: &'static str,
    default_channel: &'static str,
    description: &'static str,
    bundle_repo: &'static str,
    /// (group, version, kind) the operator provides.
    gvk: (&'static str, &'static str, &'static str),
    bundles: &'static [BundleDef],
    channels: &'static [(&'static str, &'static [EntryDef])],
}

const GPU_246: &[Related] = &[
    Related("gpu-operator-image", "nvidia/gpu-operator", "v24.6.0"),
    Related("driver-image", "nvidia/driver", "550.90.07"),
    Related(
        "container-toolkit-image",
        "nvidia/k8s/container-toolkit",
        "v1.16.1",
    ),
    Related("device-plugin-image", "nvidia/k8s-device-plugin", "v0.16.1"),
    Related(
        "dcgm-exporter-image",
        "nvidia/k8s/dcgm-exporter",
        "3.3.7-3.5.0",
    ),
];
const GPU_2462: &[Related] = &[
    Related("gpu-operator-image", "nvidia/gpu-operator", "v24.6.2"),
    Related("driver-image", "nvidia/driver", "550.90.07"),
    Related(
        "container-toolkit-image",
        "nvidia/k8s/container-toolkit",
        "v1.16.2",
    ),
    Related("device-plugin-image", "nvidia/k8s-device-plugin", "v0.16.2"),
    Related(
        "dcgm-exporter-image",
        "nvidia/k8s/dcgm-exporter",
        "3.3.7-3.5.0",
    ),
];
const GPU_249: &[Related] = &[
    Related("gpu-operator-image", "nvidia/gpu-operator", "v24.9.0"),
    Related("driver-image", "nvidia/driver", "550.127.05"),
    Related(
        "container-toolkit-image",
        "nvidia/k8s/container-toolkit",
        "v1.17.0",
    ),
    Related("device-plugin-image", "nvidia/k8s-device-plugin", "v0.17.0"),
    Related(
        "dcgm-exporter-image",
        "nvidia/k8s/dcgm-exporter",
        "3.3.8-3.6.0",
    ),
];
const GPU_2491: &[Related] = &[
    Related("gpu-operator-image", "nvidia/gpu-operator", "v24.9.1"),
    Related("driver-image", "nvidia/driver", "550.127.08"),
    Related(
        "container-toolkit-image",
        "nvidia/k8s/container-toolkit",
        "v1.17.3",
    ),
    Related("device-plugin-image", "nvidia/k8s-device-plugin", "v0.17.0"),
    Related(
        "dcgm-exporter-image",
        "nvidia/k8s/dcgm-exporter",
        "3.3.9-3.6.1",
    ),
];

const NFD: &str = "nfd.4.18.0-";
const NFD_RELATED: &[Related] = &[
    Related(
        "nfd-operator",
        "openshift4/ose-cluster-nfd-operator",
        "v4.18",
    ),
    Related(
        "node-feature-discovery",
        "openshift4/ose-node-feature-discovery-rhel9",
        "v4.18",
    ),
];

const GITOPS_114: &[Related] = &[
    Related(
        "manager",
        "openshift-gitops-1/gitops-rhel8-operator",
        "v1.14",
    ),
    Related("argocd", "openshift-gitops-1/argocd-rhel8", "v2.12"),
];
const GITOPS_115: &[Related] = &[
    Related(
        "manager",
        "openshift-gitops-1/gitops-rhel8-operator",
        "v1.15",
    ),
    Related("argocd", "openshift-gitops-1/argocd-rhel8", "v2.13"),
];

const RHODS_216: &[Related] = &[
    Related("odh-rhel8-operator", "rhoai/odh-rhel8-operator", "v2.16"),
    Related("odh-dashboard", "rhoai/odh-dashboard-rhel8", "v2.16"),
    Related(
        "odh-kserve-controller",
        "rhoai/odh-kserve-controller-rhel8",
        "v2.16",
    ),
];
const RHODS_217: &[Related] = &[
    Related("odh-rhel8-operator", "rhoai/odh-rhel8-operator", "v2.17"),
    Related("odh-dashboard", "rhoai/odh-dashboard-rhel8", "v2.17"),
    Related(
        "odh-kserve-controller",
        "rhoai/odh-kserve-controller-rhel8",
        "v2.17",
    ),
];
const RHODS_218: &[Related] = &[
    Related("odh-rhel8-operator", "rhoai/odh-rhel8-operator", "v2.18"),
    Related("odh-dashboard", "rhoai/odh-dashboard-rhel8", "v2.18"),
    Related(
        "odh-kserve-controller",
        "rhoai/odh-kserve-controller-rhel8",
        "v2.18",
    ),
];

const NMSTATE_RELATED: &[Related] = &[
    Related(
        "kubernetes-nmstate-operator",
        "openshift4/kubernetes-nmstate-rhel9-operator",
        "v4.18",
    ),
    Related(
        "kubernetes-nmstate-handler",
        "openshift4/ose-kubernetes-nmstate-handler-rhel9",
        "v4.18",
    ),
];

const SRIOV_RELATED: &[Related] = &[
    Related(
        "sriov-network-operator",
        "openshift4/ose-sriov-network-rhel9-operator",
        "v4.18",
    ),
    Related(
        "sriov-config-daemon",
        "openshift4/ose-sriov-network-config-daemon-rhel9",
        "v4.18",
    ),
];

const NETWORK_RELATED: &[Related] = &[
    Related(
        "network-operator",
        "nvidia/cloud-native/network-operator",
        "v24.10.0",
    ),
    Related(
        "doca-driver",
        "nvidia/mellanox/doca-driver",
        "24.10-0.7.0.0-0",
    ),
];

const fn bundle(version: &'static str, related: &'static [Related]) -> BundleDef {
    BundleDef {
        version,
        related,
        requires: None,
    }
}

const NEEDS_NFD: Option<(&str, &str)> = Some(("nfd", ">=4.17.0"));

const PACKAGES: &[PackageDef] = &[
    PackageDef {
        name: "gpu-operator-certified",
        prefix: "gpu-operator-certified.v",
        default_channel: "stable",
        description: "NVIDIA GPU Operator: drivers, container toolkit, device plugin and monitoring for NVIDIA GPUs.",
        bundle_repo: "nvidia/gpu-operator-bundle",
        gvk: ("nvidia.com", "v1", "ClusterPolicy"),
        bundles: &[
            bundle("24.6.0", GPU_246),
            bundle("24.6.2", GPU_2462),
            BundleDef { version: "24.9.0", related: GPU_249, requires: NEEDS_NFD },
            BundleDef { version: "24.9.1", related: GPU_2491, requires: NEEDS_NFD },
        ],
        channels: &[
            ("stable", &[
                entry("24.6.2", None),
                entry("24.9.0", Some("24.6.2")),
                EntryDef {
                    version: "24.9.1",
                    replaces: Some("24.9.0"),
                    skips: &[],
                    skip_range: Some(">=24.6.0 <24.9.1"),
                },
            ]),
            ("v24.6", &[entry("24.6.0", None), entry("24.6.2", Some("24.6.0"))]),
            ("v24.9", &[entry("24.9.0", None), entry("24.9.1", Some("24.9.0"))]),
        ],
    },
    PackageDef {
        name: "nfd",
        prefix: NFD,
        default_channel: "stable",
        description: "Node Feature Discovery: labels nodes with their hardware features.",
        bundle_repo: "openshift4/ose-cluster-nfd-operator-bundle",
        gvk: ("nfd.openshift.io", "v1", "NodeFeatureDiscovery"),
        bundles: &[
            bundle("4.18.0-202501230001", NFD_RELATED),
            bundle("4.18.0-202502101732", NFD_RELATED),
            bundle("4.18.0-202503041405", NFD_RELATED),
        ],
        channels: &[("stable", &[
            entry("4.18.0-202501230001", None),
            entry("4.18.0-202502101732", Some("4.18.0-202501230001")),
            EntryDef {
                version: "4.18.0-202503041405",
                replaces: Some("4.18.0-202502101732"),
                skips: &["4.18.0-202501230001"],
                skip_range: None,
            },
        ])],
    },
    PackageDef {
        name: "nvidia-network-operator",
        prefix: "nvidia-network-operator.v",
        default_channel: "stable",
        description: "NVIDIA Network Operator: drivers, device plugins and secondary networks for ConnectX NICs (RDMA, GPUDirect).",
        bundle_repo: "nvidia/cloud-native/network-operator-bundle",
        gvk: ("mellanox.com", "v1alpha1", "NicClusterPolicy"),
        bundles: &[
            bundle("24.10.0", NETWORK_RELATED),
            bundle("24.10.1", NETWORK_RELATED),
        ],
        channels: &[
            ("stable", &[entry("24.10.0", None), entry("24.10.1", Some("24.10.0"))]),
            ("v24.10", &[entry("24.10.0", None), entry("24.10.1", Some("24.10.0"))]),
        ],
    },
    PackageDef {
        name: "openshift-gitops-operator",
        prefix: "openshift-gitops-operator.v",
        default_channel: "latest",
        description: "Red Hat OpenShift GitOps: Argo CD for cluster configuration and applications.",
        bundle_repo: "openshift-gitops-1/gitops-operator-bundle",
        gvk: ("argoproj.io", "v1beta1", "ArgoCD"),
        bundles: &[
            bundle("1.14.2", GITOPS_114),
            bundle("1.14.3", GITOPS_114),
            bundle("1.15.0", GITOPS_115),
            bundle("1.15.1", GITOPS_115),
        ],
        channels: &[
            ("gitops-1.14", &[entry("1.14.2", None), entry("1.14.3", Some("1.14.2"))]),
            ("gitops-1.15", &[
                entry("1.15.0", None),
                EntryDef {
                    version: "1.15.1",
                    replaces: Some("1.15.0"),
                    skips: &[],
                    skip_range: Some(">=1.14.0 <1.15.1"),
                },
            ]),
            ("latest", &[
                entry("1.14.3", None),
                entry("1.15.0", Some("1.14.3")),
                entry("1.15.1", Some("1.15.0")),
            ]),
        ],
    },
    PackageDef {
        name: "rhods-operator",
        prefix: "rhods-operator.",
        default_channel: "stable",
        description: "Red Hat OpenShift AI: data science and model serving on OpenShift.",
        bundle_repo: "rhoai/odh-operator-bundle",
        gvk: ("datasciencecluster.opendatahub.io", "v1", "DataScienceCluster"),
        bundles: &[
            bundle("2.16.0", RHODS_216),
            bundle("2.16.1", RHODS_216),
            bundle("2.17.0", RHODS_217),
            bundle("2.18.0", RHODS_218),
        ],
        channels: &[
            ("eus-2.16", &[entry("2.16.0", None), entry("2.16.1", Some("2.16.0"))]),
            ("fast", &[
                entry("2.17.0", None),
                EntryDef {
                    version: "2.18.0",
                    replaces: Some("2.17.0"),
                    skips: &[],
                    skip_range: Some(">=2.16.0 <2.18.0"),
                },
            ]),
            ("stable", &[
                entry("2.16.0", None),
                entry("2.16.1", Some("2.16.0")),
                entry("2.17.0", Some("2.16.1")),
            ]),
        ],
    },
    PackageDef {
        name: "kubernetes-nmstate-operator",
        prefix: "kubernetes-nmstate-operator.4.18.0-",
        default_channel: "stable",
        description: "Kubernetes NMState: declarative node network configuration.",
        bundle_repo: "openshift4/kubernetes-nmstate-operator-bundle",
        gvk: ("nmstate.io", "v1", "NMState"),
        bundles: &[
            bundle("4.18.0-202501211137", NMSTATE_RELATED),
            bundle("4.18.0-202502250302", NMSTATE_RELATED),
        ],
        channels: &[("stable", &[
            entry("4.18.0-202501211137", None),
            entry("4.18.0-202502250302", Some("4.18.0-202501211137")),
        ])],
    },
    PackageDef {
        name: "sriov-network-operator",
        prefix: "sriov-network-operator.v4.18.0-",
        default_channel: "stable",
        description: "SR-IOV Network Operator: SR-IOV virtual functions for pods.",
        bundle_repo: "openshift4/ose-sriov-network-operator-bundle",
        gvk: ("sriovnetwork.openshift.io", "v1", "SriovNetworkNodePolicy"),
        bundles: &[
            bundle("4.18.0-202501230001", SRIOV_RELATED),
            bundle("4.18.0-202502171533", SRIOV_RELATED),
        ],
        channels: &[("stable", &[
            entry("4.18.0-202501230001", None),
            entry("4.18.0-202502171533", Some("4.18.0-202501230001")),
        ])],
    },
];

/// The name of a bundle of `p`: its prefix and the version's part after it (the prefixes
/// of nmstate and sriov already hold `4.18.0-`).
fn bundle_name(p: &PackageDef, version: &str) -> String {
    let tail = match p.prefix.strip_suffix("4.18.0-") {
        Some(_) => version.strip_prefix("4.18.0-").unwrap_or(version),
        None => version,
    };
    format!("{}{tail}", p.prefix)
}

/// A built bundle, for the seed record.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BundleRecord {
    /// `name`.
    pub name: String,
    /// Its version.
    pub version: String,
    /// The bundle image, by digest.
    pub image: String,
    /// `relatedImages` (name -> image by digest).
    pub related_images: BTreeMap<String, String>,
    /// `olm.package.required` properties.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<RequirementRecord>,
}

/// An `olm.package.required` property.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequirementRecord {
    /// The required package.
    pub package_name: String,
    /// The range.
    pub version_range: String,
}

/// A package, for the seed record.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PackageRecord {
    /// Name.
    pub name: String,
    /// Default channel.
    pub default_channel: String,
    /// Channels: name -> bundle names in entry order (the last is the head).
    pub channels: BTreeMap<String, Vec<String>>,
    /// Bundles, by version.
    pub bundles: Vec<BundleRecord>,
}

/// The built catalog: its image, the images it names, and the record.
pub struct BuiltCatalog {
    /// The catalog image.
    pub image: Image,
    /// Bundle and related images, deduplicated.
    pub images: Vec<Image>,
    /// Packages.
    pub packages: Vec<PackageRecord>,
    /// The config directory's files (`<package>/catalog.json`), as in the image.
    pub files: BTreeMap<String, Vec<u8>>,
}

/// Builds the catalog for registry `host`.
pub fn build(host: &str) -> Result<BuiltCatalog> {
    let mut images: BTreeMap<String, Image> = BTreeMap::new();
    let mut records = Vec::new();
    let mut files = BTreeMap::new();
    for p in PACKAGES {
        let mut docs = vec![json!({
            "schema": "olm.package",
            "name": p.name,
            "defaultChannel": p.default_channel,
            "description": p.description,
        })];
        let mut channels = BTreeMap::new();
        for (name, entries) in p.channels {
            let entries_json: Vec<Value> = entries
                .iter()
                .map(|e| {
                    let mut m = Map::new();
                    m.insert("name".into(), json!(bundle_name(p, e.version)));
                    if let Some(r) = e.replaces {
                        m.insert("replaces".into(), json!(bundle_name(p, r)));
                    }
                    if !e.skips.is_empty() {
                        let skips: Vec<String> =
                            e.skips.iter().map(|s| bundle_name(p, s)).collect();
                        m.insert("skips".into(), json!(skips));
                    }
                    if let Some(r) = e.skip_range {
                        m.insert("skipRange".into(), json!(r));
                    }
                    Value::Object(m)
                })
                .collect();
            channels.insert(
                name.to_string(),
                entries.iter().map(|e| bundle_name(p, e.version)).collect(),
            );
            docs.push(json!({
                "schema": "olm.channel",
                "package": p.name,
                "name": name,
                "entries": entries_json,
            }));
        }
        let mut bundles = Vec::new();
        for b in p.bundles {
            let (doc, record) = bundle_doc(host, p, b, &mut images)?;
            docs.push(doc);
            bundles.push(record);
        }
        let text: Vec<String> = docs
            .iter()
            .map(serde_json::to_string_pretty)
            .collect::<Result<_, _>>()?;
        files.insert(
            format!("{}/catalog.json", p.name),
            (text.join("\n") + "\n").into_bytes(),
        );
        records.push(PackageRecord {
            name: p.name.into(),
            default_channel: p.default_channel.into(),
            channels,
            bundles,
        });
    }
    let image = catalog_image(&files, CATALOG_REPO, CATALOG_TAG)?;
    Ok(BuiltCatalog {
        image,
        images: images.into_values().collect(),
        packages: records,
        files,
    })
}

fn bundle_doc(
    host: &str,
    p: &PackageDef,
    b: &BundleDef,
    images: &mut BTreeMap<String, Image>,
) -> Result<(Value, BundleRecord)> {
    let name = bundle_name(p, b.version);
    let mut related = BTreeMap::new();
    let mut related_json = Vec::new();
    for Related(rname, repo, build) in b.related {
        let key = format!("{repo}@{build}");
        if !images.contains_key(&key) {
            images.insert(key.clone(), operand(repo, build)?);
        }
        let pinned = images[&key].pinned(host);
        related_json.push(json!({"name": rname, "image": pinned}));
        related.insert(rname.to_string(), pinned);
    }
    let mut properties = vec![
        json!({"type": "olm.gvk", "value": {"group": p.gvk.0, "kind": p.gvk.2, "version": p.gvk.1}}),
        json!({"type": PROPERTY_PACKAGE, "value": {"packageName": p.name, "version": b.version}}),
    ];
    let mut requires = Vec::new();
    if let Some((package, range)) = b.requires {
        properties.push(json!({
            "type": PROPERTY_PACKAGE_REQUIRED,
            "value": {"packageName": package, "versionRange": range},
        }));
        requires.push(RequirementRecord {
            package_name: package.into(),
            version_range: range.into(),
        });
    }
    let bundle_image = bundle_image(p, b, &name, &related)?;
    let pinned = bundle_image.pinned(host);
    images.insert(format!("{}@{name}", p.bundle_repo), bundle_image);
    let doc = json!({
        "schema": "olm.bundle",
        "name": name,
        "package": p.name,
        "image": pinned,
        "properties": properties,
        "relatedImages": related_json,
    });
    Ok((
        doc,
        BundleRecord {
            name,
            version: b.version.into(),
            image: pinned,
            related_images: related,
            requires,
        },
    ))
}

/// An operator or operand image: one binary of deterministic bytes.
fn operand(repo: &str, build: &str) -> Result<Image> {
    let bin = repo.rsplit('/').next().unwrap_or(repo);
    let kib = 8
        + (bootstrap::oci::digest::Digest::of(repo.as_bytes())
            .hex()
            .as_bytes()[0] as usize
            % 24);
    let spec = ImageSpec {
        labels: [
            ("name".to_string(), repo.to_string()),
            ("version".to_string(), build.to_string()),
        ]
        .into(),
        entrypoint: vec![format!("/usr/bin/{bin}")],
        layers: vec![vec![
            File::new(
                format!("usr/share/{bin}/version"),
                format!("{repo} {build}\n"),
            ),
            File::executable(
                format!("usr/bin/{bin}"),
                filler(&format!("{repo}@{build}"), kib * 1024),
            ),
        ]],
        ..Default::default()
    };
    image::build(repo, None, &spec)
}

/// A bundle image: the CSV and `metadata/annotations.yaml`, as operator-sdk lays them out.
fn bundle_image(
    p: &PackageDef,
    b: &BundleDef,
    name: &str,
    related: &BTreeMap<String, String>,
) -> Result<Image> {
    let channels: Vec<&str> = p
        .channels
        .iter()
        .filter(|(_, entries)| entries.iter().any(|e| e.version == b.version))
        .map(|(c, _)| *c)
        .collect();
    let annotations: BTreeMap<String, String> = [
        (
            "operators.operatorframework.io.bundle.mediatype.v1",
            "registry+v1",
        ),
        (
            "operators.operatorframework.io.bundle.manifests.v1",
            "manifests/",
        ),
        (
            "operators.operatorframework.io.bundle.metadata.v1",
            "metadata/",
        ),
        ("operators.operatorframework.io.bundle.package.v1", p.name),
        (
            "operators.operatorframework.io.bundle.channels.v1",
            &channels.join(","),
        ),
        (
            "operators.operatorframework.io.bundle.channel.default.v1",
            p.default_channel,
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let mut annotations_yaml = String::from("annotations:\n");
    for (k, v) in &annotations {
        annotations_yaml.push_str(&format!("  {k}: \"{v}\"\n"));
    }
    let mut csv = format!(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: ClusterServiceVersion\nmetadata:\n  name: {name}\nspec:\n  version: {}\n  displayName: {}\n  description: {}\n  relatedImages:\n",
        b.version, p.name, p.description
    );
    for (rname, image) in related {
        csv.push_str(&format!("  - name: {rname}\n    image: {image}\n"));
    }
    let spec = ImageSpec {
        labels: annotations,
        layers: vec![vec![
            File::new(
                format!("manifests/{}.clusterserviceversion.yaml", p.name),
                csv,
            ),
            File::new("metadata/annotations.yaml", annotations_yaml),
        ]],
        ..Default::default()
    };
    image::build(p.bundle_repo, None, &spec)
}

/// A catalog image as opm builds one: a base layer (opm, grpc_health_probe), then the config
/// directory `/configs` holding `files`, labelled for it and served by `opm serve`.
pub(crate) fn catalog_image(
    files: &BTreeMap<String, Vec<u8>>,
    repository: &str,
    tag: &str,
) -> Result<Image> {
    let base = vec![
        File::executable("bin/opm", filler("opm v1.47.0", 64 * 1024)),
        File::executable(
            "bin/grpc_health_probe",
            filler("grpc_health_probe v0.4.25", 16 * 1024),
        ),
        File::new("etc/nsswitch.conf", "hosts: files dns\n"),
        File::new(
            "etc/passwd",
            "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/:/sbin/nologin\n",
        ),
    ];
    let configs = files
        .iter()
        .map(|(path, bytes)| File::new(format!("configs/{path}"), bytes.clone()))
        .collect();
    let spec = ImageSpec {
        labels: [
            (CONFIGS_LABEL.to_string(), "/configs".to_string()),
            (
                "io.openshift.build.source-location".to_string(),
                "https://github.com/operator-framework/operator-registry".to_string(),
            ),
        ]
        .into(),
        entrypoint: vec!["/bin/opm".into()],
        cmd: vec![
            "serve".into(),
            "/configs".into(),
            "--cache-dir=/tmp/cache".into(),
        ],
        layers: vec![base, configs],
        ..Default::default()
    };
    image::build(repository, Some(tag), &spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bootstrap::mirror::config::{IncludeChannel, IncludePackage, Operator};
    use bootstrap::mirror::resolve::select::{self, Dependencies};
    use bootstrap::oci::layers::read_config_dir;
    use bootstrap::openshift::fbc::Catalog;

    const HOST: &str = "127.0.0.1:5000";

    fn package(name: &str, channel: Option<&str>) -> IncludePackage {
        IncludePackage {
            name: name.into(),
            channels: channel
                .map(|c| {
                    vec![IncludeChannel {
                        name: c.into(),
                        ..Default::default()
                    }]
                })
                .unwrap_or_default(),
            ..Default::default()
        }
    }

    #[test]
    fn the_catalog_image_parses_and_selects_with_a_dependency() {
        let built = build(HOST).unwrap();
        // Read the configs back out of the image's layers, as a catalog mirror does.
        let layers = built.image.blobs[1..].iter().map(|b| b.bytes.as_ref());
        let files = read_config_dir(layers, "/configs").unwrap();
        assert_eq!(files, built.files);
        let catalog = Catalog::parse(&files).unwrap();
        assert_eq!(catalog.packages.len(), 7);
        let op = Operator {
            catalog: format!("{HOST}/{CATALOG_REPO}:{CATALOG_TAG}"),
            packages: vec![package("gpu-operator-certified", Some("stable"))],
            ..Default::default()
        };
        // As oc-mirror v2: the dependency is reported, not followed.
        let sel = select::select(&catalog, &op, 0, Dependencies::Report).unwrap();
        let names = sel.bundle_names();
        assert_eq!(
            names.keys().collect::<Vec<_>>(),
            [&"gpu-operator-certified"]
        );
        let unmet: Vec<(&str, &str, &str)> = sel
            .unmet
            .iter()
            .map(|u| (u.bundle.as_str(), u.required.as_str(), u.range.as_str()))
            .collect();
        assert_eq!(
            unmet,
            [("gpu-operator-certified.v24.9.1", "nfd", ">=4.17.0")]
        );
        // Followed when asked.
        let sel = select::select(&catalog, &op, 0, Dependencies::Follow).unwrap();
        let names = sel.bundle_names();
        assert_eq!(
            names["gpu-operator-certified"],
            ["gpu-operator-certified.v24.9.1"]
        );
        assert_eq!(names["nfd"], ["nfd.4.18.0-202503041405"]);
        assert_eq!(sel.dependencies.len(), 1);
        assert!(sel.unmet.is_empty());
        // Every image the selection names was built (and so is pushed).
        let pushed: Vec<String> = built.images.iter().map(|i| i.pinned(HOST)).collect();
        for image in &sel.images {
            assert!(pushed.contains(image), "{image} is not built");
        }
        let all = Operator {
            packages: vec![
                package("openshift-gitops-operator", Some("latest")),
                package("rhods-operator", None),
                package("kubernetes-nmstate-operator", None),
                package("sriov-network-operator", None),
            ],
            ..op
        };
        let names = select::select(&catalog, &all, 0, Dependencies::Report).unwrap();
        let names = names.bundle_names();
        assert_eq!(
            names["openshift-gitops-operator"],
            ["openshift-gitops-operator.v1.15.1"]
        );
        // No channels listed: the head of every channel (eus-2.16, fast, stable).
        assert_eq!(
            names["rhods-operator"],
            [
                "rhods-operator.2.16.1",
                "rhods-operator.2.17.0",
                "rhods-operator.2.18.0"
            ]
        );
        assert_eq!(
            names["sriov-network-operator"],
            ["sriov-network-operator.v4.18.0-202502171533"]
        );
    }

    #[test]
    fn bundle_images_stay_small() {
        let built = build(HOST).unwrap();
        for img in &built.images {
            assert!(
                img.size() <= 50 * 1024,
                "{} is {} bytes",
                img.repository,
                img.size()
            );
        }
    }
}
