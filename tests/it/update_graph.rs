//! `mirror.platform.graph: true` end to end: the lab's release channel mirrored with the update
//! graph data image built as oc-mirror builds it (the graph data tarball, which `bootstrap-lab
//! seed` writes, as one layer on every platform of the base image, with the command that copies
//! it for the Update Service), and `cluster-resources/updateService.yaml` naming it and the
//! release repository.

use crate::support;

use serde_json::Value;
use std::io::Read;
use support::client::RegistryClient;
use support::images::{push_index, Format, ImageSpec, IndexSpec, Platform};
use support::layers::LayerSpec;
use support::run::{bootstrap, json, ok};
use support::{block_on, Registry};

/// The files of a gzip-compressed tar layer, by path.
fn layer_files(gz: &[u8]) -> Vec<(String, Vec<u8>, u64)> {
    let mut a = tar::Archive::new(flate2::read::GzDecoder::new(gz));
    a.entries()
        .unwrap()
        .map(|e| {
            let mut e = e.unwrap();
            let mut data = Vec::new();
            e.read_to_end(&mut data).unwrap();
            let uid = e.header().uid().unwrap();
            (e.path().unwrap().to_string_lossy().to_string(), data, uid)
        })
        .collect()
}

#[test]
fn the_graph_image_is_built_on_every_base_platform_and_the_update_service_written() {
    let lab = Registry::plain();
    let host = lab.host();
    let dir = tempfile::tempdir().unwrap();
    let seed = dir.path().join("seed");
    ok(&support::run::lab(&[
        "seed",
        &format!("docker://{host}"),
        "--plain-http",
        &host,
        "--out",
        seed.to_str().unwrap(),
    ]));
    // The base (UBI 9 upstream): two platforms.
    let base = IndexSpec {
        format: Format::Oci,
        children: vec![
            ImageSpec::new(
                Format::Oci,
                Platform::linux_amd64(),
                vec![LayerSpec::new(71, 1024)],
            ),
            ImageSpec::new(
                Format::Oci,
                Platform::linux_arm64(),
                vec![LayerSpec::new(72, 1024)],
            ),
        ],
    };
    let client = RegistryClient::new(&lab);
    block_on(push_index(&client, "ubi9/ubi", Some("latest"), &base)).unwrap();
    let cfg = dir.path().join("isc.yaml");
    fs_err::write(
        &cfg,
        "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  platform:\n    graph: true\n    architectures: [amd64]\n    channels:\n    - name: stable-4.18\n      minVersion: 4.18.3\n      maxVersion: 4.18.3\n",
    )
    .unwrap();
    let site = Registry::plain();
    let record = dir.path().join("record.json");
    let o = bootstrap(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        "--graph-url",
        &format!("file://{}", seed.join("graph.json").display()),
        "--graph-data-url",
        &format!("file://{}", seed.join("graph-data.tar.gz").display()),
        "--graph-base-image",
        &format!("{host}/ubi9/ubi:latest"),
        "--plain-http",
        &host,
        "--plain-http",
        &site.host(),
        "--record",
        record.to_str().unwrap(),
        "--output",
        "json",
        &format!("docker://{}/site", site.host()),
    ]);
    let out: Value = serde_json::from_str(&ok(&o)).unwrap();
    assert_eq!(out["graph"]["destination"], "openshift/graph-image:latest");

    // The image: an index over both base platforms, each with the graph data on top.
    let data = fs_err::read(seed.join("graph-data.tar.gz")).unwrap();
    let expected = layer_files(&data);
    let site_client = RegistryClient::new(&site);
    block_on(async {
        let (_, index) = site_client
            .get_manifest("site/openshift/graph-image", "latest")
            .await
            .unwrap();
        let index: Value = serde_json::from_slice(&index).unwrap();
        let children = index["manifests"].as_array().unwrap();
        assert_eq!(children.len(), 2, "every platform of the base is rebuilt");
        for child in children {
            let digest = child["digest"].as_str().unwrap();
            let (_, m) = site_client
                .get_manifest("site/openshift/graph-image", digest)
                .await
                .unwrap();
            let m: Value = serde_json::from_slice(&m).unwrap();
            let layers = m["layers"].as_array().unwrap();
            assert_eq!(layers.len(), 2, "the base layer and the graph data");
            let top = site_client
                .get_blob(
                    "site/openshift/graph-image",
                    layers[1]["digest"].as_str().unwrap(),
                )
                .await
                .unwrap();
            let files = layer_files(&top);
            assert_eq!(files.len(), expected.len());
            for ((path, bytes, uid), (want_path, want_bytes, _)) in files.iter().zip(&expected) {
                assert_eq!(path, &format!("var/lib/cincinnati-graph-data/{want_path}"));
                assert_eq!(bytes, want_bytes);
                assert_eq!(*uid, 0);
            }
            assert!(files
                .iter()
                .any(|(p, b, _)| p.ends_with("channels/stable-4.18.yaml")
                    && String::from_utf8_lossy(b).contains("4.18.3")));
            let config = site_client
                .get_blob(
                    "site/openshift/graph-image",
                    m["config"]["digest"].as_str().unwrap(),
                )
                .await
                .unwrap();
            let config: Value = serde_json::from_slice(&config).unwrap();
            assert_eq!(
                config["config"]["Cmd"],
                serde_json::json!([
                    "/bin/bash",
                    "-c",
                    "exec cp -rp /var/lib/cincinnati-graph-data/* /var/lib/cincinnati/graph-data"
                ])
            );
            assert_eq!(config["rootfs"]["diff_ids"].as_array().unwrap().len(), 2);
        }
    });

    // The UpdateService, as oc-mirror writes it.
    let text =
        fs_err::read_to_string(dir.path().join("cluster-resources/updateService.yaml")).unwrap();
    let us: Value = serde_saphyr::from_str(&text).unwrap();
    assert_eq!(us["apiVersion"], "updateservice.operator.openshift.io/v1");
    assert_eq!(us["kind"], "UpdateService");
    assert_eq!(us["metadata"]["name"], "update-service-oc-mirror");
    assert_eq!(us["metadata"]["namespace"], "openshift-update-service");
    assert_eq!(us["spec"]["replicas"], 2);
    assert_eq!(
        us["spec"]["graphDataImage"],
        format!("{}/site/openshift/graph-image:latest", site.host())
    );
    assert_eq!(
        us["spec"]["releases"],
        format!("{}/site/openshift/release-images", site.host())
    );
    // No mirror set maps the graph image: the UpdateService names it.
    let idms =
        fs_err::read_to_string(dir.path().join("cluster-resources/idms-oc-mirror.yaml")).unwrap();
    assert!(
        !idms.contains("graph-image") && !idms.contains("ubi9"),
        "{idms}"
    );
    // The record lists it like every other image.
    let rec = json(&record);
    let text = rec.to_string();
    assert!(
        text.contains("openshift/graph-image") && text.contains("\"graph\""),
        "{text}"
    );
}
