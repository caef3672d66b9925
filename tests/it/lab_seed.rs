//! `bootstrap-lab seed` against a real Distribution registry: every image the seed names exists
//! (read back with the harness's own client, not bootstrap's, and with skopeo), the release
//! images' image-references list components that all exist by digest, every bundle and related
//! image of the catalog exists, the update graph selects 4.18.3 as stable-4.18's head, and a
//! second run is idempotent: same digests, nothing uploaded.

use crate::support;

use bootstrap::oci::digest::Digest;
use bootstrap::oci::layers::read_config_dir;
use bootstrap::oci::reference::ImageRef;
use bootstrap::openshift::fbc::Catalog;
use bootstrap::openshift::graph::{ChannelQuery, Graph};
use bootstrap::openshift::release::{components, IMAGE_REFERENCES};
use serde_json::Value;
use std::io::Read;
use support::client::RegistryClient;
use support::run::{lab, ok};
use support::Registry;

fn seed(reg: &Registry, out: &std::path::Path) -> Value {
    let host = reg.host();
    let stdout = ok(&lab(&[
        "--output",
        "json",
        "seed",
        &format!("docker://{host}"),
        "--plain-http",
        &host,
        "--out",
        out.to_str().unwrap(),
    ]));
    serde_json::from_str(&stdout).unwrap()
}

/// The manifest of `reference` (`host/repo:tag` or `host/repo@digest`), checked against its
/// digest when pinned, and its blobs' existence.
async fn fetch_image(client: &RegistryClient, reference: &str) -> (Digest, Value) {
    let r = ImageRef::parse(reference).unwrap();
    let (_, bytes) = client
        .get_manifest(&r.repository, &r.reference())
        .await
        .unwrap_or_else(|e| panic!("{reference}: {e}"));
    let digest = Digest::of(&bytes);
    if let Some(pinned) = &r.digest {
        assert_eq!(&digest, pinned, "{reference}");
    }
    let manifest: Value = serde_json::from_slice(&bytes).unwrap();
    let mut blobs = vec![manifest["config"]["digest"].as_str().unwrap().to_string()];
    for l in manifest["layers"].as_array().unwrap() {
        blobs.push(l["digest"].as_str().unwrap().to_string());
    }
    for b in blobs {
        assert!(
            client.head_blob(&r.repository, &b).await.unwrap().is_some(),
            "{reference}: blob {b} missing"
        );
    }
    (digest, manifest)
}

/// The file at `path` in an image's layers (gzip tar).
async fn layer_file(client: &RegistryClient, repo: &str, manifest: &Value, path: &str) -> Vec<u8> {
    for l in manifest["layers"].as_array().unwrap() {
        let blob = client
            .get_blob(repo, l["digest"].as_str().unwrap())
            .await
            .unwrap();
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(blob.as_slice()));
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            if entry.path().unwrap().to_string_lossy() == path {
                let mut out = Vec::new();
                entry.read_to_end(&mut out).unwrap();
                return out;
            }
        }
    }
    panic!("{repo}: no {path} in its layers")
}

#[test]
fn the_seeded_upstream_is_complete_and_a_rerun_sends_nothing() {
    let reg = Registry::plain();
    let host = reg.host();
    let out = tempfile::tempdir().unwrap();
    let first = seed(&reg, out.path());
    let seed_json = support::run::json(&out.path().join("seed.json"));
    assert_eq!(first["registry"], host.as_str());
    assert_eq!(first["images"], seed_json["images"]);
    assert!(first["transfer"]["blobsSent"].as_u64().unwrap() > 100);

    support::block_on(async {
        let client = RegistryClient::new(&reg);
        // Every image the seed lists exists with all its blobs.
        for img in seed_json["images"].as_array().unwrap() {
            let (digest, _) = fetch_image(&client, img["reference"].as_str().unwrap()).await;
            assert_eq!(digest.to_string(), img["digest"].as_str().unwrap());
        }
        // The release's image-references lists ~20 components, all there by digest.
        let release = &seed_json["releases"][2];
        assert_eq!(release["version"], "4.18.3");
        let image = release["image"].as_str().unwrap();
        let (_, manifest) = fetch_image(&client, image).await;
        let repo = ImageRef::parse(image).unwrap().repository;
        let refs = layer_file(&client, &repo, &manifest, IMAGE_REFERENCES).await;
        let comps = components(&refs, image).unwrap();
        assert!(comps.len() >= 20, "{} components", comps.len());
        for c in &comps {
            assert_eq!(c.image.registry, host);
            fetch_image(&client, &c.image.to_string()).await;
            assert_eq!(
                release["components"][&c.name].as_str().unwrap(),
                c.image.to_string()
            );
        }
        // The catalog's configs parse, and every bundle and related image exists.
        let catalog_ref = seed_json["catalog"]["image"].as_str().unwrap();
        let (_, manifest) = fetch_image(&client, catalog_ref).await;
        let repo = ImageRef::parse(catalog_ref).unwrap().repository;
        let mut layers = Vec::new();
        for l in manifest["layers"].as_array().unwrap() {
            layers.push(
                client
                    .get_blob(&repo, l["digest"].as_str().unwrap())
                    .await
                    .unwrap(),
            );
        }
        let files = read_config_dir(layers.iter().map(|l| l.as_slice()), "/configs").unwrap();
        let catalog = Catalog::parse(&files).unwrap();
        assert_eq!(catalog.packages.len(), 7);
        let mut checked = 0;
        for bundle in catalog.bundles.values().flat_map(|b| b.values()) {
            fetch_image(&client, &bundle.image).await;
            for related in &bundle.related_images {
                fetch_image(&client, &related.image).await;
            }
            checked += 1;
        }
        assert!(checked >= 15);
    });

    // skopeo, an independent client, reads the release image and its labels.
    let inspect: Value = serde_json::from_str(
        &reg.skopeo_inspect("openshift-release-dev/ocp-release:4.18.3-x86_64", false)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(inspect["Labels"]["io.openshift.release"], "4.18.3");
    assert_eq!(inspect["Digest"], seed_json["releases"][2]["digest"]);

    // The graph file selects 4.18.3 as stable-4.18's head.
    let graph_bytes = fs_err::read(out.path().join("graph.json")).unwrap();
    let graph = Graph::from_json(&graph_bytes, "graph.json").unwrap();
    let stable = ChannelQuery {
        name: "stable-4.18",
        ..Default::default()
    };
    let head = graph.releases(&stable, "stable").unwrap();
    assert_eq!(head.len(), 1);
    assert_eq!(head[0].version.to_string(), "4.18.3");
    assert_eq!(
        head[0].payload,
        format!(
            "{host}/openshift-release-dev/ocp-release@{}",
            seed_json["releases"][2]["digest"].as_str().unwrap()
        )
    );

    // A second run: the same digests, nothing uploaded.
    let uploads = reg.blob_upload_puts_total();
    let seed_bytes = fs_err::read(out.path().join("seed.json")).unwrap();
    let second = seed(&reg, out.path());
    assert_eq!(second["transfer"]["blobsSent"], 0);
    assert_eq!(second["transfer"]["manifestsPut"], 0);
    assert_eq!(reg.blob_upload_puts_total(), uploads);
    assert_eq!(
        fs_err::read(out.path().join("seed.json")).unwrap(),
        seed_bytes
    );
    assert_eq!(
        fs_err::read(out.path().join("graph.json")).unwrap(),
        graph_bytes
    );
}

/// A registry URL with a path, or without docker://, is refused naming the fix.
#[test]
fn a_bad_registry_url_is_refused_clearly() {
    let out = tempfile::tempdir().unwrap();
    let o = lab(&[
        "seed",
        "docker://127.0.0.1:5000/mirror",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    let err = support::run::failed(&o);
    assert!(err.contains("has a path"), "{err}");
    let o = lab(&[
        "seed",
        "127.0.0.1:5000",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    let err = support::run::failed(&o);
    assert!(err.contains("docker://HOST:PORT"), "{err}");
}

/// Seeding a registry behind HTTPS and token auth works (uploads are one-shot requests that
/// must carry a push token), and is idempotent there too.
#[test]
fn seeding_a_token_auth_registry_works() {
    let reg = Registry::tls_token("lab", "seed-secret");
    let dir = tempfile::tempdir().unwrap();
    let auth = dir.path().join("auth.json");
    reg.write_authfile(&auth).unwrap();
    let ca = reg.ca_pem().unwrap();
    let host = reg.host();
    let run = || {
        let stdout = ok(&lab(&[
            "--output",
            "json",
            "seed",
            &format!("docker://{host}"),
            "--authfile",
            auth.to_str().unwrap(),
            "--ca-bundle",
            ca.to_str().unwrap(),
            "--out",
            dir.path().join("out").to_str().unwrap(),
        ]));
        serde_json::from_str::<Value>(&stdout).unwrap()
    };
    let first = run();
    assert!(first["transfer"]["blobsSent"].as_u64().unwrap() > 100);
    let second = run();
    assert_eq!(second["transfer"]["blobsSent"], 0);
    assert_eq!(second["catalog"]["digest"], first["catalog"]["digest"]);
}
