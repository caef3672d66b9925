//! Signatures travel with their images (issue 17, point 8): an image signed in the test with a
//! generated ECDSA P-256 key the way cosign signs (a simple-signing payload at the
//! `sha256-<hex>.sig` tag), with an attestation at `.att` and an OCI referrer found through the
//! referrers tag schema (Distribution 2.8 has no referrers API), arrives byte for byte by
//! mirror to mirror and by disk and back, and its signature verifies with openssl against the
//! payload at the destination; `--remove-signatures` leaves all of it out.

use crate::support;

use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use support::client::{BlobSource, RegistryClient};
use support::images::{push_image, Format, ImageSpec, Platform, OCI_INDEX, OCI_MANIFEST};
use support::layers::{sha256_digest, LayerSpec};
use support::run::{bootstrap, json as read_json, ok};
use support::{block_on, Registry};

const SIMPLE_SIGNING: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
const COSIGN_SIGNATURE: &str = "dev.cosignproject.cosign/signature";
const DSSE: &str = "application/vnd.dsse.envelope.v1+json";
const SBOM_TYPE: &str = "application/spdx+json";
const EMPTY: &str = "application/vnd.oci.empty.v1+json";

/// What was signed at the source, to look for at a destination.
struct Signed {
    /// `sha256:` of the image.
    image: String,
    /// `sha256:` of the signature manifest, at `sha256-<hex>.sig`.
    signature: String,
    /// `sha256:` of the attestation manifest, at `sha256-<hex>.att`.
    attestation: String,
    /// `sha256:` of the referrer (an SBOM whose subject is the image).
    referrer: String,
}

fn openssl(args: &[&str], dir: &Path) {
    let o = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("running openssl");
    assert!(
        o.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn dashed(digest: &str) -> String {
    digest.replacen(':', "-", 1)
}

async fn put_blob(client: &RegistryClient, repo: &str, bytes: &[u8]) -> String {
    let digest = sha256_digest(bytes);
    client
        .push_blob(repo, &digest, BlobSource::Bytes(bytes.to_vec().into()))
        .await
        .unwrap();
    digest
}

/// A manifest of one layer `payload` (with `annotations`) over `config`, as cosign writes
/// its `.sig` and `.att` manifests, or an OCI 1.1 artifact when `subject` is given.
async fn put_artifact(
    client: &RegistryClient,
    repo: &str,
    config: (&str, &[u8]),
    layer: (&str, &[u8], Value),
    extra: Value,
) -> (String, Vec<u8>) {
    let config_digest = put_blob(client, repo, config.1).await;
    let layer_digest = put_blob(client, repo, layer.1).await;
    let mut manifest = json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": config.0, "digest": config_digest, "size": config.1.len()},
        "layers": [{
            "mediaType": layer.0, "digest": layer_digest, "size": layer.1.len(),
            "annotations": layer.2,
        }],
    });
    for (k, v) in extra.as_object().unwrap() {
        manifest[k] = v.clone();
    }
    let bytes = serde_json::to_vec(&manifest).unwrap();
    (sha256_digest(&bytes), bytes)
}

/// A cosign-style config over one payload layer.
fn cosign_config(payload_digest: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "architecture": "", "os": "", "created": "0001-01-01T00:00:00Z",
        "config": {}, "rootfs": {"type": "layers", "diff_ids": [payload_digest]},
    }))
    .unwrap()
}

/// Pushes `app/signed:v1` and signs it in `keys` (a fresh P-256 key), adds an attestation
/// and an SBOM referrer listed in the referrers tag schema's index; and `app/plain:v1`, not
/// signed at all.
fn push_signed(src: &Registry, keys: &Path) -> Signed {
    openssl(
        &[
            "ecparam",
            "-name",
            "prime256v1",
            "-genkey",
            "-noout",
            "-out",
            "key.pem",
        ],
        keys,
    );
    openssl(
        &["ec", "-in", "key.pem", "-pubout", "-out", "pub.pem"],
        keys,
    );
    let client = RegistryClient::new(src);
    let spec = |seed| {
        ImageSpec::new(
            Format::Oci,
            Platform::linux_amd64(),
            vec![LayerSpec::new(seed, 2048)],
        )
    };
    block_on(async {
        let repo = "app/signed";
        let image = push_image(&client, repo, Some("v1"), &spec(81))
            .await
            .unwrap();
        push_image(&client, "app/plain", Some("v1"), &spec(82))
            .await
            .unwrap();
        let (_, image_bytes) = client.get_manifest(repo, "v1").await.unwrap();

        // The signature: cosign's simple-signing payload, signed with the key.
        let payload = serde_json::to_vec(&json!({
            "critical": {
                "identity": {"docker-reference": format!("{}/{repo}", src.host())},
                "image": {"docker-manifest-digest": image.digest},
                "type": "cosign container image signature",
            },
            "optional": null,
        }))
        .unwrap();
        fs_err::write(keys.join("payload.json"), &payload).unwrap();
        openssl(
            &[
                "dgst",
                "-sha256",
                "-sign",
                "key.pem",
                "-out",
                "sig.der",
                "payload.json",
            ],
            keys,
        );
        let sig = fs_err::read(keys.join("sig.der")).unwrap();
        let b64 = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, sig);
        let payload_digest = sha256_digest(&payload);
        let (signature, bytes) = put_artifact(
            &client,
            repo,
            (
                "application/vnd.oci.image.config.v1+json",
                &cosign_config(&payload_digest),
            ),
            (SIMPLE_SIGNING, &payload, json!({ COSIGN_SIGNATURE: b64 })),
            json!({}),
        )
        .await;
        let sig_tag = format!("{}.sig", dashed(&image.digest));
        client
            .put_manifest(repo, &sig_tag, OCI_MANIFEST, &bytes)
            .await
            .unwrap();

        // The attestation: an in-toto statement in a DSSE envelope.
        let statement = json!({"_type": "https://in-toto.io/Statement/v0.1", "predicateType": "https://slsa.dev/provenance/v0.2"});
        let envelope = serde_json::to_vec(&json!({
            "payloadType": "application/vnd.in-toto+json",
            "payload": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, statement.to_string()),
            "signatures": [{"keyid": "", "sig": "MEUC"}],
        }))
        .unwrap();
        let (attestation, bytes) = put_artifact(
            &client,
            repo,
            (
                "application/vnd.oci.image.config.v1+json",
                &cosign_config(&sha256_digest(&envelope)),
            ),
            (
                DSSE,
                &envelope,
                json!({"predicateType": "https://slsa.dev/provenance/v0.2"}),
            ),
            json!({}),
        )
        .await;
        let att_tag = format!("{}.att", dashed(&image.digest));
        client
            .put_manifest(repo, &att_tag, OCI_MANIFEST, &bytes)
            .await
            .unwrap();

        // The referrer: an SBOM artifact whose subject is the image, pushed by digest and
        // listed in the fallback index at `sha256-<hex>`.
        let sbom = br#"{"spdxVersion":"SPDX-2.3","name":"signed"}"#;
        let (referrer, bytes) = put_artifact(
            &client,
            repo,
            (EMPTY, b"{}"),
            (SBOM_TYPE, sbom, json!({})),
            json!({
                "artifactType": SBOM_TYPE,
                "subject": {"mediaType": OCI_MANIFEST, "digest": image.digest, "size": image_bytes.len()},
                "annotations": {"org.opencontainers.image.created": "2024-01-01T00:00:00Z"},
            }),
        )
        .await;
        client
            .put_manifest(repo, &referrer, OCI_MANIFEST, &bytes)
            .await
            .unwrap();
        let index = serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [{"mediaType": OCI_MANIFEST, "digest": referrer, "size": bytes.len(), "artifactType": SBOM_TYPE}],
        }))
        .unwrap();
        client
            .put_manifest(repo, &dashed(&image.digest), OCI_INDEX, &index)
            .await
            .unwrap();
        Signed {
            image: image.digest,
            signature,
            attestation,
            referrer,
        }
    })
}

fn config(dir: &Path, src: &Registry) -> String {
    let path = dir.join("isc.yaml");
    fs_err::write(
        &path,
        format!(
            "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  additionalImages:\n  - name: {h}/app/signed:v1\n  - name: {h}/app/plain:v1\n",
            h = src.host()
        ),
    )
    .unwrap();
    path.display().to_string()
}

/// The image, its signature, attestation and referrer are at `prefix/app/signed` of `dst`,
/// byte for byte; the signature verifies with openssl against the payload as the destination
/// serves it; the referrer is listed at the referrers tag; the record lists each with the
/// image it belongs to.
fn assert_arrived(dst: &Registry, prefix: &str, signed: &Signed, keys: &Path, record: &Value) {
    let repo = format!("{prefix}/app/signed");
    let client = RegistryClient::new(dst);
    block_on(async {
        let sig_tag = format!("{}.sig", dashed(&signed.image));
        let (_, bytes) = client.get_manifest(&repo, &sig_tag).await.unwrap();
        assert_eq!(sha256_digest(&bytes), signed.signature, "the .sig manifest");
        let manifest: Value = serde_json::from_slice(&bytes).unwrap();
        let layer = &manifest["layers"][0];
        let payload = client
            .get_blob(&repo, layer["digest"].as_str().unwrap())
            .await
            .unwrap();
        let sig = base64::Engine::decode(
            &base64::engine::general_purpose::STANDARD,
            layer["annotations"][COSIGN_SIGNATURE].as_str().unwrap(),
        )
        .unwrap();
        let at = tempfile::tempdir().unwrap();
        fs_err::write(at.path().join("payload"), &payload).unwrap();
        fs_err::write(at.path().join("sig.der"), sig).unwrap();
        fs_err::copy(keys.join("pub.pem"), at.path().join("pub.pem")).unwrap();
        openssl(
            &[
                "dgst",
                "-sha256",
                "-verify",
                "pub.pem",
                "-signature",
                "sig.der",
                "payload",
            ],
            at.path(),
        );
        let payload: Value = serde_json::from_slice(&payload).unwrap();
        assert_eq!(
            payload["critical"]["image"]["docker-manifest-digest"],
            signed.image.as_str()
        );

        let att_tag = format!("{}.att", dashed(&signed.image));
        let (_, bytes) = client.get_manifest(&repo, &att_tag).await.unwrap();
        assert_eq!(
            sha256_digest(&bytes),
            signed.attestation,
            "the .att manifest"
        );
        let (_, bytes) = client.get_manifest(&repo, &signed.referrer).await.unwrap();
        assert_eq!(sha256_digest(&bytes), signed.referrer, "the referrer");
        let (media_type, bytes) = client
            .get_manifest(&repo, &dashed(&signed.image))
            .await
            .unwrap();
        assert_eq!(media_type, OCI_INDEX);
        let index: Value = serde_json::from_slice(&bytes).unwrap();
        let listed = &index["manifests"][0];
        assert_eq!(listed["digest"], signed.referrer.as_str(), "{index:#}");
        assert_eq!(listed["artifactType"], SBOM_TYPE, "{index:#}");
    });
    let attached: Vec<(String, String, String)> = record["images"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| {
            let a = i.get("attachedTo")?;
            Some((
                a["kind"].as_str()?.to_string(),
                a["digest"].as_str()?.to_string(),
                i["digest"].as_str()?.to_string(),
            ))
        })
        .collect();
    let mut expected = vec![
        (
            "attestation".to_string(),
            signed.image.clone(),
            signed.attestation.clone(),
        ),
        (
            "referrer".to_string(),
            signed.image.clone(),
            signed.referrer.clone(),
        ),
        (
            "signature".to_string(),
            signed.image.clone(),
            signed.signature.clone(),
        ),
    ];
    expected.sort();
    let mut got = attached;
    got.sort();
    assert_eq!(got, expected, "{record:#}");
}

fn verify(dst: &Registry, prefix: &str, record: &Path) {
    let out = ok(&bootstrap(&[
        "verify",
        "--record",
        record.to_str().unwrap(),
        &format!("docker://{}/{prefix}", dst.host()),
        "--plain-http",
        &dst.host(),
    ]));
    assert!(out.contains("OK"), "{out}");
}

#[test]
fn a_signed_image_arrives_with_its_signature_attestation_and_referrer() {
    let src = Registry::plain();
    let dst = Registry::plain();
    let work = tempfile::tempdir().unwrap();
    let signed = push_signed(&src, work.path());
    let isc = config(work.path(), &src);
    let (s, d) = (src.host(), dst.host());

    // The dry run names each with the image it belongs to.
    let plan = ok(&bootstrap(&[
        "mirror",
        "-c",
        &isc,
        &format!("docker://{d}/m2m"),
        "--dry-run",
        "--plain-http",
        &s,
        "--plain-http",
        &d,
    ]));
    assert!(
        plan.contains(&format!(
            "(signature of {s}/app/signed:v1@{})",
            signed.image
        )),
        "{plan}"
    );
    let before = src.requests().len();

    // Mirror to mirror.
    let rec = work.path().join("m2m.json");
    let out = ok(&bootstrap(&[
        "mirror",
        "-c",
        &isc,
        &format!("docker://{d}/m2m"),
        "--record",
        rec.to_str().unwrap(),
        "--plain-http",
        &s,
        "--plain-http",
        &d,
        "--output",
        "json",
    ]));
    // The summary counts the signature, attestation and SBOM among the images, and says so.
    let summary: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(summary["attachments"], 3, "{summary:#}");
    assert_eq!(summary["images"], 5, "{summary:#}");
    assert_arrived(&dst, "m2m", &signed, work.path(), &read_json(&rec));
    verify(&dst, "m2m", &rec);
    // The unsigned image cost one tags/list and no lookup of its own. (Whether the registry
    // has the referrers API is asked once per registry; Distribution does not log requests
    // to routes it does not have, so that one is not seen here.)
    let requests = &src.requests()[before..];
    let looked_up = |repo: &str| -> Vec<String> {
        requests
            .iter()
            .filter(|r| r.uri.contains(repo))
            .filter(|r| r.uri.contains("sha256-") || r.uri.contains("tags/list"))
            .map(|r| format!("{} {}", r.method, r.uri))
            .collect()
    };
    assert_eq!(
        looked_up("/app/plain/"),
        vec!["GET /v2/app/plain/tags/list?n=1000".to_string()]
    );

    assert_eq!(dst.tags("m2m/app/plain"), vec!["v1"]);

    // Mirror to disk, and from disk to the registry.
    let dir = work.path().join("disk");
    let dir_url = format!("file://{}", dir.display());
    ok(&bootstrap(&[
        "mirror",
        "-c",
        &isc,
        &dir_url,
        "--plain-http",
        &s,
    ]));
    assert!(ok(&bootstrap(&["verify", &dir_url])).contains("OK"));
    let rec = work.path().join("d2m.json");
    let out = ok(&bootstrap(&[
        "mirror",
        "--from",
        &dir_url,
        &format!("docker://{d}/d2m"),
        "--record",
        rec.to_str().unwrap(),
        "--plain-http",
        &d,
    ]));
    assert!(
        out.contains("(3 of them signatures, attestations or SBOMs)"),
        "{out}"
    );
    assert_arrived(&dst, "d2m", &signed, work.path(), &read_json(&rec));
    verify(&dst, "d2m", &rec);
    // The disk mirror's own record lists them too.
    let disk_record = read_json(&dir.join("mirror-record.json"));
    assert_eq!(
        disk_record["images"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i.get("attachedTo").is_some())
            .count(),
        3,
        "{disk_record:#}"
    );

    // --remove-signatures leaves all of it out, from the registry and from the disk mirror.
    ok(&bootstrap(&[
        "mirror",
        "-c",
        &isc,
        &format!("docker://{d}/bare"),
        "--remove-signatures",
        "--plain-http",
        &s,
        "--plain-http",
        &d,
    ]));
    assert_eq!(dst.tags("bare/app/signed"), vec!["v1"]);
    let rec = work.path().join("bare-disk.json");
    ok(&bootstrap(&[
        "mirror",
        "--from",
        &dir_url,
        &format!("docker://{d}/bare-disk"),
        "--remove-signatures",
        "--record",
        rec.to_str().unwrap(),
        "--plain-http",
        &d,
    ]));
    assert_eq!(dst.tags("bare-disk/app/signed"), vec!["v1"]);
    let record = read_json(&rec);
    assert!(
        record["images"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i.get("attachedTo").is_none()),
        "{record:#}"
    );
    let client = RegistryClient::new(&dst);
    block_on(async {
        assert!(client
            .get_manifest("bare-disk/app/signed", &signed.referrer)
            .await
            .is_err());
    });
}

/// Regression guard for the clash of two `sha256-<hex>` schemes: an image mirrored by digest is
/// kept from garbage collection under `sha256-<hex>` of itself, the tag the OCI referrers tag
/// schema would give its referrers index. Through an archive, the image keeps its tag, its
/// signature and attestation arrive at theirs, its referrer arrives under its own digest tag,
/// and the run says why the referrer is not listed at the image's tag.
#[test]
fn a_digest_only_image_keeps_its_tag_and_its_signatures_arrive_through_an_archive() {
    let src = Registry::plain();
    let dst = Registry::plain();
    let work = tempfile::tempdir().unwrap();
    let signed = push_signed(&src, work.path());
    let (s, d) = (src.host(), dst.host());
    let isc = work.path().join("by-digest.yaml");
    fs_err::write(
        &isc,
        format!(
            "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  additionalImages:\n  - name: {s}/app/signed@{}\n",
            signed.image
        ),
    )
    .unwrap();
    let archive = format!("archive://{}", work.path().join("archive").display());
    ok(&bootstrap(&[
        "mirror",
        "-c",
        isc.to_str().unwrap(),
        &archive,
        "--plain-http",
        &s,
    ]));
    let rec = work.path().join("a2m.json");
    let out = bootstrap(&[
        "mirror",
        "--from",
        &archive,
        &format!("docker://{d}/arc"),
        "--record",
        rec.to_str().unwrap(),
        "--plain-http",
        &d,
    ]);
    ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "the referrers tag {} keeps the image itself",
            dashed(&signed.image)
        )),
        "{stderr}"
    );
    let mut expected = vec![
        dashed(&signed.image),
        format!("{}.att", dashed(&signed.image)),
        format!("{}.sig", dashed(&signed.image)),
        dashed(&signed.referrer),
    ];
    expected.sort();
    assert_eq!(dst.tags("arc/app/signed"), expected);
    let client = RegistryClient::new(&dst);
    block_on(async {
        for (tag, digest) in [
            (dashed(&signed.image), &signed.image),
            (format!("{}.sig", dashed(&signed.image)), &signed.signature),
            (
                format!("{}.att", dashed(&signed.image)),
                &signed.attestation,
            ),
            (dashed(&signed.referrer), &signed.referrer),
        ] {
            let (_, bytes) = client.get_manifest("arc/app/signed", &tag).await.unwrap();
            assert_eq!(&sha256_digest(&bytes), digest, "{tag}");
        }
    });
    verify(&dst, "arc", &rec);
}

/// A registry that serves pulls but refuses `tags/list` (403) still gives up its signatures:
/// each attachment tag is then asked for by HEAD, and a 404 is the normal answer.
#[test]
fn a_registry_that_refuses_tag_lists_still_gives_up_its_signatures() {
    use support::faultproxy::{Fault, FaultProxy, FaultRule};
    let src = Registry::plain();
    let dst = Registry::plain();
    let work = tempfile::tempdir().unwrap();
    let signed = push_signed(&src, work.path());
    let proxy = FaultProxy::start(&src.host()).unwrap();
    proxy.add_rule(
        FaultRule::new(Fault::Status {
            status: 403,
            retry_after: None,
        })
        .path("/tags/list")
        .always(),
    );
    let (p, d) = (proxy.host(), dst.host());
    let isc = work.path().join("proxied.yaml");
    fs_err::write(
        &isc,
        format!(
            "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  additionalImages:\n  - name: {p}/app/signed:v1\n  - name: {p}/app/plain:v1\n"
        ),
    )
    .unwrap();
    let rec = work.path().join("rec.json");
    ok(&bootstrap(&[
        "mirror",
        "-c",
        isc.to_str().unwrap(),
        &format!("docker://{d}/m"),
        "--record",
        rec.to_str().unwrap(),
        "--plain-http",
        &p,
        "--plain-http",
        &d,
    ]));
    assert!(proxy.faults_fired() >= 2, "tags/list was not asked");
    assert_arrived(&dst, "m", &signed, work.path(), &read_json(&rec));
    assert_eq!(dst.tags("m/app/plain"), vec!["v1"]);
}
