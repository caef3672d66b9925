//! Reading an ImageSetConfiguration end to end, by what is checked: the strict reader
//! (`reading.rs`: keys, types, YAML, files), the rules (`rules.rs`: oc-mirror's and
//! bootstrap's), and here what a valid configuration gives (accessors, platforms, support).

mod reading;
mod rules;

use super::*;
use std::path::Path;

const HEAD: &str = "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\n";

fn parse_ok(text: &str) -> ImageSetConfig {
    match parse(text, "isc.yaml") {
        Ok(c) => c,
        Err(e) => panic!("expected a valid config, got:\n{e}"),
    }
}

fn parse_err(text: &str) -> String {
    match parse(text, "isc.yaml") {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(e) => e.to_string(),
    }
}

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/isc")
        .join(name)
}

/// A configuration as a site would write it for oc-mirror: release channel, operators,
/// additional images, helm, blocked images.
const REALISTIC: &str = r#"---
kind: ImageSetConfiguration
apiVersion: mirror.openshift.io/v2alpha1
archiveSize: 4
mirror:
  platform:
    channels:
    - name: stable-4.16
      type: ocp
      minVersion: 4.16.10
      maxVersion: 4.16.14
      shortestPath: true
    - name: eus-4.14
      full: false
    graph: true
    architectures:
    - amd64
    - multi
    kubeVirtContainer: false
  operators:
  - catalog: registry.redhat.io/redhat/redhat-operator-index:v4.16
    targetCatalog: my-org/redhat-operators
    targetTag: v4.16-site
    skipDependencies: false
    packages:
    - name: gpu-operator-certified
      defaultChannel: v24.6
      channels:
      - name: v24.6
        minVersion: 24.6.0
        maxVersion: 24.6.2
    - name: rhods-operator
      minVersion: 2.13.0
    - name: nfd
  - catalog: registry.redhat.io/redhat/certified-operator-index:v4.16
    full: true
  additionalImages:
  - name: registry.redhat.io/ubi9/ubi:latest
  - name: quay.io/openshift/origin-cli@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
    targetRepo: tools/origin-cli
    targetTag: pinned
  helm:
    repositories:
    - name: nvidia
      url: https://helm.ngc.nvidia.com/nvidia
      charts:
      - name: gpu-operator
        version: v24.6.2
    local:
    - name: site-chart
      path: /charts/site-chart-1.0.0.tgz
      imagePaths:
      - "{.spec.template.spec.containers[*].image}"
  blockedImages:
  - name: registry.redhat.io/rhel8/.*
"#;

#[test]
fn realistic_config_parses() {
    let c = parse_ok(REALISTIC);
    assert_eq!(c.api_version, API_VERSION);
    assert_eq!(c.kind, KIND);
    assert_eq!(c.archive_size, Some(4));
    let p = &c.mirror.platform;
    assert!(p.graph);
    assert_eq!(p.channels.len(), 2);
    assert_eq!(p.channels[0].name, "stable-4.16");
    assert_eq!(p.channels[0].platform_type, PlatformType::Ocp);
    assert_eq!(p.channels[0].min_version.as_deref(), Some("4.16.10"));
    assert!(p.channels[0].shortest_path);
    assert_eq!(c.architectures(), vec!["amd64", "multi"]);
    assert_eq!(c.mirror.operators.len(), 2);
    let op = &c.mirror.operators[0];
    assert_eq!(
        op.target_catalog.as_deref(),
        Some("my-org/redhat-operators")
    );
    assert_eq!(
        op.packages[0].channels[0].max_version.as_deref(),
        Some("24.6.2")
    );
    assert_eq!(op.packages[0].default_channel.as_deref(), Some("v24.6"));
    assert!(c.mirror.operators[1].full);
    assert_eq!(c.mirror.additional_images.len(), 2);
    assert_eq!(c.mirror.helm.repositories[0].charts[0].name, "gpu-operator");
    assert_eq!(c.mirror.helm.local[0].image_paths.len(), 1);
    assert_eq!(
        c.mirror.blocked_images[0].name,
        "registry.redhat.io/rhel8/.*"
    );

    // ... and every section of it is mirrored by this version (targetRepo and targetTag place
    // an additional image as oc-mirror places it).
    assert!(c.unsupported_sections().is_empty());
    c.ensure_supported("isc.yaml").unwrap();
    assert_eq!(
        c.mirror.additional_images[1].target_repo.as_deref(),
        Some("tools/origin-cli")
    );
}

#[test]
fn additional_images_fixture_is_supported() {
    let c = load(&fixture("additional-images.yaml")).unwrap();
    assert!(c.unsupported_sections().is_empty());
    c.ensure_supported("additional-images.yaml").unwrap();
    assert_eq!(c.architectures(), vec!["amd64", "arm64"]);
    let images = c.additional_images();
    assert_eq!(images.len(), 5);
    assert_eq!(images[0].name, "registry.redhat.io/ubi9/ubi:9.4");
    assert_eq!(images[1].path, "mirror.additionalImages[1].name");
    assert_eq!(
        images[0].location,
        Some(Location {
            line: 12,
            column: 13
        })
    );
    assert!(images[2].name.contains("@sha256:"));
    // What the reference parser's errors look like through the accessor.
    assert_eq!(
        images[1].error("isc.yaml", "bad reference").to_string(),
        "isc.yaml:13:13: mirror.additionalImages[1].name: bad reference"
    );
}

#[test]
fn default_architecture_is_amd64() {
    let c = parse_ok(&format!(
        "{HEAD}mirror:\n  additionalImages:\n  - name: quay.io/a/b:1\n"
    ));
    assert_eq!(c.architectures(), vec!["amd64"]);
}

/// `platforms` lists are read per image as oc-mirror v2 reads them: the release's, each
/// catalog's, each additional image's; no list keeps every platform, except for releases
/// (`architectures`, default amd64).
#[test]
fn platforms_lists_filter_per_image() {
    let c = parse_ok(&format!(
            "{HEAD}mirror:\n  platform:\n    platforms:\n    - os: linux\n      architecture: arm64\n  operators:\n  - catalog: quay.io/a/index:v1\n    platforms:\n    - os: linux\n      architecture: s390x\n  - catalog: quay.io/a/other:v1\n  additionalImages:\n  - name: quay.io/a/b:1\n    platforms:\n    - os: linux\n      architecture: ppc64le\n  - name: quay.io/a/c:1\n"
        ));
    assert!(c.unsupported_sections().is_empty());
    assert_eq!(c.release_platforms().describe(), ["linux/arm64"]);
    assert_eq!(c.graph_architectures(), ["multi"]);
    assert_eq!(c.catalog_platforms(0).describe(), ["linux/s390x"]);
    assert!(c.catalog_platforms(1).is_all());
    assert_eq!(c.image_platforms(0).describe(), ["linux/ppc64le"]);
    assert_eq!(
        c.image_platforms(0).origin(),
        "mirror.additionalImages[0].platforms"
    );
    assert!(c.image_platforms(1).is_all());
    let c = parse_ok(&format!(
        "{HEAD}mirror:\n  platform:\n    architectures: [arm64]\n"
    ));
    assert_eq!(c.release_platforms().describe(), ["arm64"]);
    assert_eq!(c.graph_architectures(), ["arm64"]);
    let c = parse_ok(&format!(
        "{HEAD}mirror:\n  platform:\n    architectures: [multi]\n"
    ));
    assert!(c.release_platforms().is_all());
    let e = parse_err(&format!(
            "{HEAD}mirror:\n  platform:\n    architectures: [amd64]\n    platforms:\n    - os: linux\n      architecture: arm64\n"
        ));
    assert!(e.contains("cannot be used together"), "{e}");
    let e = parse_err(&format!(
            "{HEAD}mirror:\n  additionalImages:\n  - name: quay.io/a/b:1\n    platforms:\n    - os: linux\n      architecture: \"\"\n"
        ));
    assert_eq!(
            e,
            "isc.yaml:8:21: mirror.additionalImages[0].platforms[0].architecture: is empty; name the platform's architecture, e.g. arm64"
        );
}

#[test]
fn location_accessors() {
    let c = parse_ok(&format!(
            "{HEAD}mirror:\n  platform:\n    architectures: [arm64]\n  additionalImages:\n  - name: quay.io/a/b:1\n"
        ));
    assert_eq!(
        c.location("mirror.platform.architectures[0]"),
        Some(Location {
            line: 5,
            column: 21
        })
    );
    assert_eq!(
        c.key_location("mirror.additionalImages"),
        Some(Location { line: 6, column: 3 })
    );
    assert_eq!(
        c.location("mirror.additionalImages[0].name"),
        Some(Location {
            line: 7,
            column: 11
        })
    );
    assert_eq!(c.location("mirror.nothing"), None);
    assert_eq!(
        Location {
            line: 7,
            column: 11
        }
        .to_string(),
        "7:11"
    );
}

/// oc-mirror's reference parser takes `docker://` as no transport at all, on additional
/// images and catalogs alike: the prefix is dropped, silently, as there.
#[test]
fn docker_transport_is_dropped_from_images_and_catalogs() {
    let c = parse_ok(&format!(
            "{HEAD}mirror:\n  additionalImages:\n  - name: docker://quay.io/a/b:1\n  operators:\n  - catalog: docker://registry.redhat.io/redhat/redhat-operator-index:v4.16\n"
        ));
    assert_eq!(c.additional_images()[0].name, "quay.io/a/b:1");
    assert_eq!(
        c.mirror.operators[0].catalog,
        "registry.redhat.io/redhat/redhat-operator-index:v4.16"
    );
    assert!(c.warnings().is_empty());
    assert!(c.unsupported_sections().is_empty());
}

/// OKD channels and KubeVirt containers are mirrored (OKD's channels from OKD's graph), so
/// neither is refused; an unknown type is still named, never read as OCP.
#[test]
fn okd_channels_and_kubevirt_containers_are_supported() {
    let c = parse_ok(&format!(
            "{HEAD}mirror:\n  platform:\n    kubeVirtContainer: true\n    channels:\n    - name: stable-4.16\n    - name: stable-scos-4\n      type: okd\n"
        ));
    assert!(c.unsupported_sections().is_empty());
    c.ensure_supported("isc.yaml").unwrap();
    // oc-mirror reads an unknown type (even `OKD`) as OCP; bootstrap names it.
    let e = parse_err(&format!(
        "{HEAD}mirror:\n  platform:\n    channels:\n    - name: stable-4\n      type: OKD\n"
    ));
    assert!(
        e.contains("unknown value 'OKD'; expected one of ocp, okd"),
        "{e}"
    );
}

/// The CoreOS stream keys platform.kubeVirtContainer reads, as oc-mirror v2's
/// `requestedKubeVirtArchKeys` maps them: x86_64 by default, amd64 and s390x mapped, multi both,
/// others skipped with a warning; platforms mapped alike, every key when none maps.
#[test]
fn kubevirt_arch_keys_follow_oc_mirror() {
    let keys = |platform: &str| {
        parse_ok(&format!(
            "{HEAD}mirror:\n  platform:\n    kubeVirtContainer: true\n{platform}"
        ))
        .kubevirt_arch_keys()
    };
    assert_eq!(keys(""), (Some(vec!["x86_64".to_string()]), vec![]));
    assert_eq!(
        keys("    architectures: [amd64, s390x]\n"),
        (
            Some(vec!["x86_64".to_string(), "s390x".to_string()]),
            vec![]
        )
    );
    assert_eq!(
        keys("    architectures: [multi]\n").0,
        Some(vec!["x86_64".to_string(), "s390x".to_string()])
    );
    let (k, w) = keys("    architectures: [amd64, arm64]\n");
    assert_eq!(k, Some(vec!["x86_64".to_string()]));
    assert_eq!(
        w,
        ["kubevirt: no bootimages key for architecture \"arm64\" — skipping"]
    );
    assert_eq!(
        keys("    platforms:\n    - os: linux\n      architecture: s390x\n").0,
        Some(vec!["s390x".to_string()])
    );
    assert_eq!(
        keys("    platforms:\n    - os: linux\n      architecture: arm64\n"),
        (None, vec![])
    );
}
