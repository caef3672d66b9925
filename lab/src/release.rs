//! The lab's OpenShift release payloads and their update graph.
//!
//! Four 4.18 z-streams, each a release image (`openshift-release-dev/ocp-release:<v>-x86_64`)
//! whose `release-manifests/image-references` names its components by digest in
//! `openshift-release-dev/ocp-v4.0-art-dev`, as Red Hat's payloads do. Most components are the
//! same image in every version; a few (the ones that really change with every z-stream) differ,
//! so mirroring two releases deduplicates the rest. The graph lists 4.18.1-4.18.3 in
//! candidate, fast and stable, and 4.18.4 in candidate only.
//!
//! Each OCP release also carries the installer's boot images,
//! `release-manifests/0000_50_installer_coreos-bootimages.yaml` (a ConfigMap whose
//! `data.stream` is CoreOS stream JSON), where oc-mirror finds the KubeVirt container disk
//! (`platform.kubeVirtContainer`): from 4.18.2 on its `x86_64` entry names one small
//! container disk image in the component repository by digest; 4.18.1's stream has no KubeVirt
//! image, so asking for it fails as oc-mirror fails.
//!
//! OKD has its own line: two releases `4.18.0-okd-scos.1` and `.2` (`okd/scos-release:<v>`,
//! components in `okd/scos-content`), in channel `stable-scos-4`, with their own update graph
//! as origin-release.ci.openshift.org serves it.

use super::image::{self, commit_id, filler, File, Image, ImageSpec};
use anyhow::Result;
use bootstrap::openshift::graph::CHANNELS_KEY;
use bootstrap::openshift::release::{COREOS_BOOTIMAGES, IMAGE_REFERENCES};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;

/// Repository of the release images.
pub const RELEASE_REPO: &str = "openshift-release-dev/ocp-release";
/// Repository of the component images.
pub const COMPONENT_REPO: &str = "openshift-release-dev/ocp-v4.0-art-dev";
/// Where `release-metadata` lives inside the release image.
pub const RELEASE_METADATA: &str = "release-manifests/release-metadata";

/// Repository of OKD's release images.
pub const OKD_RELEASE_REPO: &str = "okd/scos-release";
/// Repository of OKD's component images.
pub const OKD_COMPONENT_REPO: &str = "okd/scos-content";

/// Which product a release line is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Product {
    /// OpenShift Container Platform.
    Ocp,
    /// OKD (CentOS Stream CoreOS).
    Okd,
}

impl Product {
    /// Where its release images live.
    pub fn release_repo(self) -> &'static str {
        match self {
            Product::Ocp => RELEASE_REPO,
            Product::Okd => OKD_RELEASE_REPO,
        }
    }

    /// Where its components live.
    pub fn component_repo(self) -> &'static str {
        match self {
            Product::Ocp => COMPONENT_REPO,
            Product::Okd => OKD_COMPONENT_REPO,
        }
    }

    /// Its release image tags: `4.18.3-x86_64` (ocp-release), `4.18.0-okd-scos.1` (scos-release).
    fn release_tag(self, version: &str) -> String {
        match self {
            Product::Ocp => format!("{version}-x86_64"),
            Product::Okd => version.to_string(),
        }
    }

    /// The image stream its payloads are cut from.
    fn image_stream(self) -> &'static str {
        match self {
            Product::Ocp => "ocp/4.18-art-latest",
            Product::Okd => "origin/scos-4.18",
        }
    }
}

/// One z-stream of the lab.
pub struct VersionDef {
    /// Version.
    pub version: &'static str,
    /// Channels listing it.
    pub channels: &'static [&'static str],
    /// Versions that upgrade directly to it.
    pub previous: &'static [&'static str],
    /// Its errata.
    pub errata: &'static str,
}

const GA: &[&str] = &["candidate-4.18", "fast-4.18", "stable-4.18"];

/// The lab's releases, lowest first.
pub const VERSIONS: &[VersionDef] = &[
    VersionDef {
        version: "4.18.1",
        channels: GA,
        previous: &[],
        errata: "RHSA-2025:1120",
    },
    VersionDef {
        version: "4.18.2",
        channels: GA,
        previous: &["4.18.1"],
        errata: "RHBA-2025:1904",
    },
    VersionDef {
        version: "4.18.3",
        channels: GA,
        previous: &["4.18.1", "4.18.2"],
        errata: "RHBA-2025:2230",
    },
    VersionDef {
        version: "4.18.4",
        channels: &["candidate-4.18"],
        previous: &["4.18.2", "4.18.3"],
        errata: "RHBA-2025:2705",
    },
];

/// OKD's releases, lowest first (its graph's channel `stable-scos-4`).
pub const OKD_VERSIONS: &[VersionDef] = &[
    VersionDef {
        version: "4.18.0-okd-scos.1",
        channels: &["stable-scos-4"],
        previous: &[],
        errata: "https://github.com/okd-project/okd/releases/tag/4.18.0-okd-scos.1",
    },
    VersionDef {
        version: "4.18.0-okd-scos.2",
        channels: &["stable-scos-4"],
        previous: &["4.18.0-okd-scos.1"],
        errata: "https://github.com/okd-project/okd/releases/tag/4.18.0-okd-scos.2",
    },
];

/// The OCP releases whose boot images list no KubeVirt container disk.
const WITHOUT_KUBEVIRT: &[&str] = &["4.18.1"];

/// A component: its tag name in the payload, its source repository under
/// github.com/openshift, whether it is rebuilt for every z-stream, and its size in KiB.
struct ComponentDef(&'static str, &'static str, bool, usize);

const COMPONENTS: &[ComponentDef] = &[
    ComponentDef("agent-installer-utils", "agent-installer-utils", false, 16),
    ComponentDef("baremetal-installer", "installer", true, 32),
    ComponentDef("cli", "oc", false, 24),
    ComponentDef("cluster-etcd-operator", "cluster-etcd-operator", false, 12),
    ComponentDef(
        "cluster-ingress-operator",
        "cluster-ingress-operator",
        false,
        12,
    ),
    ComponentDef(
        "cluster-kube-apiserver-operator",
        "cluster-kube-apiserver-operator",
        false,
        12,
    ),
    ComponentDef(
        "cluster-network-operator",
        "cluster-network-operator",
        false,
        12,
    ),
    ComponentDef(
        "cluster-version-operator",
        "cluster-version-operator",
        true,
        16,
    ),
    ComponentDef("console", "console", false, 32),
    ComponentDef("coredns", "coredns", false, 8),
    ComponentDef("etcd", "etcd", false, 16),
    ComponentDef("haproxy-router", "router", false, 12),
    ComponentDef("hyperkube", "kubernetes", false, 48),
    ComponentDef("installer", "installer", true, 32),
    ComponentDef("kube-proxy", "sdn", false, 8),
    ComponentDef("machine-os-images", "machine-os-images", true, 64),
    ComponentDef(
        "machine-config-operator",
        "machine-config-operator",
        true,
        16,
    ),
    ComponentDef("multus-cni", "multus-cni", false, 8),
    ComponentDef("must-gather", "must-gather", false, 4),
    ComponentDef("oauth-server", "oauth-server", false, 8),
    ComponentDef("ovn-kubernetes", "ovn-kubernetes", false, 24),
    ComponentDef("pod", "kubernetes", false, 4),
    ComponentDef("rhel-coreos", "os", true, 96),
    ComponentDef("tools", "oc", false, 16),
];

/// A built release: its image and its components (tag name -> image).
pub struct Release {
    /// The version's definition.
    pub def: &'static VersionDef,
    /// The release image.
    pub image: Image,
    /// Components by tag name.
    pub components: BTreeMap<String, Image>,
    /// The KubeVirt container disk its boot images name, if any.
    pub kubevirt: Option<Image>,
}

/// Builds every release and its components for registry `host`. Components shared between
/// versions are the same [`Image`] (same digest). The `installer` and `cli` components carry
/// stand-ins that hand over to `stand_in` (this `bootstrap-lab` binary; see [`super::standin`]).
pub fn build(host: &str, stand_in: &Path) -> Result<Vec<Release>> {
    build_line(host, stand_in, Product::Ocp, VERSIONS)
}

/// Builds OKD's releases as [`build`] builds OCP's: the same components, in OKD's repository.
pub fn build_okd(host: &str, stand_in: &Path) -> Result<Vec<Release>> {
    build_line(host, stand_in, Product::Okd, OKD_VERSIONS)
}

fn build_line(
    host: &str,
    stand_in: &Path,
    product: Product,
    defs: &'static [VersionDef],
) -> Result<Vec<Release>> {
    let mut cache: BTreeMap<String, Image> = BTreeMap::new();
    let mut out = Vec::new();
    let disk = match product {
        Product::Ocp => Some(kubevirt_disk()?),
        Product::Okd => None,
    };
    for def in defs {
        let mut components = BTreeMap::new();
        for c in COMPONENTS {
            let build_of = if c.2 { def.version } else { "4.18" };
            let key = format!("{}@{build_of}", c.0);
            let img = match cache.get(&key) {
                Some(img) => img.clone(),
                None => {
                    let mut img = component(c, build_of, stand_in)?;
                    img.repository = product.component_repo().to_string();
                    cache.insert(key, img.clone());
                    img
                }
            };
            components.insert(c.0.to_string(), img);
        }
        let kubevirt = disk
            .clone()
            .filter(|_| !WITHOUT_KUBEVIRT.contains(&def.version));
        let image = release_image(host, product, def, &components, kubevirt.as_ref())?;
        out.push(Release {
            def,
            image,
            components,
            kubevirt,
        });
    }
    Ok(out)
}

/// The KubeVirt container disk: a small image whose layer holds `disk/` with the qcow2, as
/// RHCOS's `rhel-coreos-kubevirt` container disks are laid out for KubeVirt.
fn kubevirt_disk() -> Result<Image> {
    let spec = ImageSpec {
        labels: [
            ("io.k8s.display-name", "rhcos-kubevirt"),
            ("coreos.stream", "rhcos-4.18"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
        layers: vec![vec![File::new(
            "disk/rhcos-kubevirt.x86_64.qcow2",
            filler("rhcos-kubevirt@4.18", 16 * 1024),
        )]],
        ..Default::default()
    };
    image::build(COMPONENT_REPO, None, &spec)
}

/// `release-manifests/0000_50_installer_coreos-bootimages.yaml` of a release: the
/// `coreos-bootimages` ConfigMap the installer ships, whose `data.stream` is CoreOS stream JSON
/// (openshift/installer `data/data/coreos/rhcos.json`); its `x86_64` entry names `kubevirt` by
/// digest when the release has one.
pub fn coreos_bootimages(host: &str, version: &str, kubevirt: Option<&Image>) -> String {
    let mut images = serde_json::Map::new();
    if let Some(k) = kubevirt {
        images.insert(
            "kubevirt".into(),
            json!({
                "release": "418.94.202501221327-0",
                "image": format!("{host}/{COMPONENT_REPO}:4.18-9.4-kubevirt"),
                "digest-ref": k.pinned(host),
            }),
        );
    }
    let stream = json!({
        "stream": "rhcos-4.18",
        "metadata": {"last-modified": "2025-01-22T13:27:00Z", "generator": "plume cosa2stream"},
        "architectures": {"x86_64": {
            "artifacts": {"metal": {"release": "418.94.202501221327-0", "formats": {"iso": {"disk": {
                "location": "https://rhcos.mirror.openshift.com/art/storage/prod/streams/4.18-9.4/builds/418.94.202501221327-0/x86_64/rhcos-418.94.202501221327-0-live.x86_64.iso",
            }}}}},
            "images": images,
        }},
    });
    let stream = serde_json::to_string_pretty(&stream).expect("JSON");
    let indented: String = stream.lines().map(|l| format!("    {l}\n")).collect();
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: coreos-bootimages\n  namespace: openshift-machine-config-operator\n  annotations:\n    include.release.openshift.io/self-managed-high-availability: \"true\"\n    include.release.openshift.io/single-node-developer: \"true\"\ndata:\n  releaseVersion: {version}\n  stream: |\n{indented}"
    )
}

fn component(c: &ComponentDef, build_of: &str, stand_in: &Path) -> Result<Image> {
    let ComponentDef(name, repo, _, kib) = *c;
    let commit = commit_id(&format!("{repo}@{build_of}"));
    let source = format!("https://github.com/openshift/{repo}");
    let about =
        format!("component: {name}\nbuild: {build_of}\nsource: {source}\ncommit: {commit}\n");
    let spec = ImageSpec {
        labels: [
            ("io.openshift.build.commit.id", commit.as_str()),
            ("io.openshift.build.source-location", source.as_str()),
            ("io.k8s.display-name", name),
            (
                "io.openshift.release.operator",
                if name.ends_with("-operator") {
                    "true"
                } else {
                    "false"
                },
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
        entrypoint: vec![format!("/{}", binary_path(name))],
        layers: vec![files(name, build_of, about, kib * 1024, stand_in)],
        ..Default::default()
    };
    image::build(COMPONENT_REPO, None, &spec)
}

/// A component's files: its build info and binary, and for `machine-os-images` the CoreOS base
/// ISO where the agent installer takes it from (`/coreos/coreos-x86_64.iso` and its
/// `.sha256`, openshift/installer `pkg/asset/agent/image/oc.go`).
fn files(name: &str, build_of: &str, about: String, len: usize, stand_in: &Path) -> Vec<File> {
    let mut files = vec![
        File::new(format!("usr/share/openshift/{name}/build-info"), about),
        File::executable(binary_path(name), binary(name, build_of, len, stand_in)),
    ];
    if name == "machine-os-images" {
        let iso = filler(&format!("coreos-x86_64.iso@{build_of}"), 32 * 1024);
        let sha = bootstrap::oci::digest::Digest::of(&iso).hex().to_string();
        files.push(File::new("coreos/coreos-x86_64.iso", iso));
        files.push(File::new("coreos/coreos-x86_64.iso.sha256", sha));
    }
    files
}

/// Where a component's binary sits: the release tools where `oc adm release extract` looks for
/// them (`usr/bin/oc` in `cli`, `usr/bin/openshift-install` in `installer`), others by name.
fn binary_path(name: &str) -> String {
    match name {
        "cli" => "usr/bin/oc".to_string(),
        "installer" | "baremetal-installer" => "usr/bin/openshift-install".to_string(),
        _ => format!("usr/bin/{name}"),
    }
}

/// A component's binary: `len` filler bytes, except the release tools (`cli`, `installer`,
/// `baremetal-installer`), which are the lab stand-ins, with the release placeholders the real
/// binaries carry.
fn binary(name: &str, build_of: &str, len: usize, stand_in: &Path) -> Vec<u8> {
    match name {
        "cli" => super::standin::script(super::standin::Tool::Oc, stand_in, build_of),
        "installer" => {
            super::standin::script(super::standin::Tool::OpenshiftInstall, stand_in, build_of)
        }
        "baremetal-installer" => super::standin::script(
            super::standin::Tool::OpenshiftBaremetalInstall,
            stand_in,
            build_of,
        ),
        _ => filler(&format!("{name}@{build_of}"), len),
    }
}

/// The `image-references` ImageStream of a release, in the format `oc adm release new` writes.
pub fn image_references(
    host: &str,
    version: &str,
    components: &BTreeMap<String, Image>,
) -> serde_json::Value {
    image_stream(host, Product::Ocp, version, components)
}

fn image_stream(
    host: &str,
    product: Product,
    version: &str,
    components: &BTreeMap<String, Image>,
) -> serde_json::Value {
    let tags: Vec<serde_json::Value> = COMPONENTS
        .iter()
        .map(|c| {
            let img = &components[c.0];
            let build_of = if c.2 { version } else { "4.18" };
            json!({
                "name": c.0,
                "annotations": {
                    "io.openshift.build.commit.id": commit_id(&format!("{}@{build_of}", c.1)),
                    "io.openshift.build.commit.ref": "",
                    "io.openshift.build.source-location": format!("https://github.com/openshift/{}", c.1),
                },
                "from": {"kind": "DockerImage", "name": img.pinned(host)},
                "generation": null,
                "importPolicy": {},
                "referencePolicy": {"type": ""},
            })
        })
        .collect();
    json!({
        "kind": "ImageStream",
        "apiVersion": "image.openshift.io/v1",
        "metadata": {
            "name": version,
            "creationTimestamp": null,
            "annotations": {"release.openshift.io/from-image-stream": product.image_stream()},
        },
        "spec": {"lookupPolicy": {"local": false}, "tags": tags},
        "status": {"dockerImageRepository": ""},
    })
}

fn errata_url(def: &VersionDef) -> String {
    if def.errata.starts_with("https://") {
        def.errata.to_string()
    } else {
        format!("https://access.redhat.com/errata/{}", def.errata)
    }
}

fn release_image(
    host: &str,
    product: Product,
    def: &VersionDef,
    components: &BTreeMap<String, Image>,
    kubevirt: Option<&Image>,
) -> Result<Image> {
    let references = image_stream(host, product, def.version, components);
    let metadata = json!({
        "kind": "cincinnati-metadata-v0",
        "version": def.version,
        "previous": def.previous,
        "metadata": {"url": errata_url(def)},
    });
    let mut spec = ImageSpec {
        labels: [("io.openshift.release".to_string(), def.version.to_string())].into(),
        entrypoint: vec!["/usr/bin/cluster-version-operator".into()],
        layers: vec![vec![
            File::new(
                "release-manifests/0000_00_cluster-version-operator_00_namespace.yaml",
                "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: openshift-cluster-version\n  annotations:\n    include.release.openshift.io/self-managed-high-availability: \"true\"\n",
            ),
            File::new(IMAGE_REFERENCES, serde_json::to_vec_pretty(&references)?),
            File::new(RELEASE_METADATA, serde_json::to_vec_pretty(&metadata)?),
        ]],
        ..Default::default()
    };
    if product == Product::Ocp {
        spec.layers[0].push(File::new(
            COREOS_BOOTIMAGES,
            coreos_bootimages(host, def.version, kubevirt),
        ));
    }
    image::build(
        product.release_repo(),
        Some(&product.release_tag(def.version)),
        &spec,
    )
}

/// The update graph (Cincinnati JSON) of `releases`: a node per release, an edge from every
/// `previous` version.
pub fn graph(host: &str, releases: &[Release]) -> serde_json::Value {
    let index: BTreeMap<&str, usize> = releases
        .iter()
        .enumerate()
        .map(|(i, r)| (r.def.version, i))
        .collect();
    let nodes: Vec<serde_json::Value> = releases
        .iter()
        .map(|r| {
            json!({
                "version": r.def.version,
                "payload": r.image.pinned(host),
                "metadata": {
                    CHANNELS_KEY: r.def.channels.join(","),
                    "io.openshift.upgrades.graph.release.manifestref": r.image.digest().to_string(),
                    "url": errata_url(r.def),
                },
            })
        })
        .collect();
    let mut edges = Vec::new();
    for (to, r) in releases.iter().enumerate() {
        for p in r.def.previous {
            if let Some(from) = index.get(p) {
                edges.push(json!([from, to]));
            }
        }
    }
    json!({"nodes": nodes, "edges": edges, "conditionalEdges": []})
}

/// The update graph data of `releases` as oc-mirror downloads it for `platform.graph`: a
/// gzip-compressed tarball shaped like cincinnati-graph-data, one `channels/NAME.yaml` per
/// channel listing its versions. Deterministic (no times, root owner).
pub fn graph_data(releases: &[Release]) -> Result<Vec<u8>> {
    let mut channels: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for r in releases {
        for c in r.def.channels {
            channels.entry(c).or_default().push(r.def.version);
        }
    }
    let mut files: Vec<File> = channels
        .iter()
        .map(|(name, versions)| {
            let list: String = versions.iter().map(|v| format!("- {v}\n")).collect();
            File::new(
                format!("channels/{name}.yaml"),
                format!("name: {name}\nversions:\n{list}").into_bytes(),
            )
        })
        .collect();
    files.push(File::new("version", "1.2.0\n"));
    Ok(image::tar_gz(&files)?.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bootstrap::openshift::graph::{ChannelQuery, Graph};

    const HOST: &str = "127.0.0.1:5000";

    fn channel<'a>(name: &'a str, min: Option<&'a str>, max: Option<&'a str>) -> ChannelQuery<'a> {
        ChannelQuery {
            name,
            min_version: min,
            max_version: max,
            ..Default::default()
        }
    }

    #[test]
    fn the_graph_parses_and_channels_select_their_heads() {
        let releases = build(HOST, Path::new("/usr/bin/bootstrap")).unwrap();
        let bytes = serde_json::to_vec(&graph(HOST, &releases)).unwrap();
        let g = Graph::from_json(&bytes, "graph.json").unwrap();
        let versions = |ch: ChannelQuery<'_>| -> Vec<String> {
            g.releases(&ch, "mirror.platform.channels[0]")
                .unwrap()
                .into_iter()
                .map(|r| r.version.to_string())
                .collect()
        };
        assert_eq!(versions(channel("stable-4.18", None, None)), ["4.18.3"]);
        assert_eq!(versions(channel("candidate-4.18", None, None)), ["4.18.4"]);
        assert_eq!(
            versions(channel("stable-4.18", Some("4.18.2"), Some("4.18.3"))),
            ["4.18.2", "4.18.3"]
        );
        let head = &g
            .releases(&channel("stable-4.18", None, None), "x")
            .unwrap()[0];
        assert_eq!(
            head.payload,
            format!("{HOST}/{RELEASE_REPO}@{}", releases[2].image.digest())
        );
    }

    #[test]
    fn image_references_list_the_components_by_digest() {
        let releases = build(HOST, Path::new("/usr/bin/bootstrap")).unwrap();
        let doc = image_references(HOST, "4.18.3", &releases[2].components);
        let bytes = serde_json::to_vec(&doc).unwrap();
        let parsed =
            bootstrap::openshift::release::components(&bytes, "ocp-release:4.18.3").unwrap();
        assert_eq!(parsed.len(), COMPONENTS.len());
        for c in &parsed {
            assert_eq!(
                c.image.digest.as_ref(),
                Some(releases[2].components[&c.name].digest())
            );
        }
        // Shared components are the same image in every version; per-version ones differ.
        let (a, b) = (&releases[0].components, &releases[2].components);
        assert_eq!(a["etcd"].digest(), b["etcd"].digest());
        assert_ne!(a["installer"].digest(), b["installer"].digest());
        assert_ne!(releases[0].image.digest(), releases[2].image.digest());
    }

    /// The boot images name the KubeVirt disk from 4.18.2 on, as bootstrap's mirror reads
    /// them; OKD's graph selects its own versions with OKD's payloads.
    #[test]
    fn bootimages_name_the_kubevirt_disk_and_okd_has_its_own_graph() {
        let releases = build(HOST, Path::new("/usr/bin/bootstrap")).unwrap();
        let x86 = vec!["x86_64".to_string()];
        for r in &releases {
            let doc = coreos_bootimages(HOST, r.def.version, r.kubevirt.as_ref());
            let found = bootstrap::openshift::release::kubevirt_images(
                Some(doc.as_bytes()),
                Some(&x86),
                "r",
            );
            match &r.kubevirt {
                Some(k) => assert_eq!(
                    found.unwrap()[0].image.digest.as_ref(),
                    Some(k.digest()),
                    "{}",
                    r.def.version
                ),
                None => assert_eq!(r.def.version, "4.18.1"),
            }
        }
        let okd = build_okd(HOST, Path::new("/usr/bin/bootstrap")).unwrap();
        let bytes = serde_json::to_vec(&graph(HOST, &okd)).unwrap();
        let g = Graph::from_json(&bytes, "okd-graph.json").unwrap();
        let head = g
            .releases(&channel("stable-scos-4", None, None), "x")
            .unwrap();
        assert_eq!(head[0].version.to_string(), "4.18.0-okd-scos.2");
        assert_eq!(head[0].payload, okd[1].image.pinned(HOST));
        assert!(head[0].payload.contains("/okd/scos-release@"));
        assert_eq!(okd[1].image.tag.as_deref(), Some("4.18.0-okd-scos.2"));
    }
}
