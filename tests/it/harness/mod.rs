//! Self-test of `tests/it/support`: the registries, the token server and the image generator must
//! be right before any test of `bootstrap` can lean on them. Each flavour starts and answers,
//! the standard set pushes into it, skopeo (an independent client) reads back the digests the
//! generator reported, the registry log counts uploads and mounts correctly, and the token
//! server refuses bad passwords, issues tokens the registry accepts, and expires them on time.
//! The fault proxy relays pushes and pulls byte for byte and each of its faults shows on the
//! client side exactly as configured (`faultproxy.rs`).

mod faultproxy;

use crate::support;

use std::process::Command;
use std::time::Duration;

use bytes::Bytes;
use support::client::{BlobSource, RegistryClient};
use support::faultproxy::{Fault, FaultProxy, FaultRule, Link};
use support::images::{self, find, ImageSpec, Platform, PushedImage, SyntheticSet};
use support::layers::{self, LayerSpec};
use support::{reglog, run, tls, Registry};

/// Large-layer size for the TLS flavours: still streamed in several chunks, but quick.
const SMALL_LARGE_LAYER: u64 = 3 * 1024 * 1024 + 12345;

fn skopeo_digest(reg: &Registry, path: &str) -> String {
    let out = reg.skopeo_inspect(path, false).expect("skopeo inspect");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v["Digest"].as_str().unwrap().to_string()
}

fn skopeo_raw(reg: &Registry, path: &str) -> (String, serde_json::Value) {
    let raw = reg
        .skopeo_inspect(path, true)
        .expect("skopeo inspect --raw");
    let digest = layers::sha256_digest(raw.as_bytes());
    (digest, serde_json::from_str(&raw).unwrap())
}

/// What every flavour must show after the standard set was pushed once.
fn check_pushed_set(reg: &Registry, set: &SyntheticSet, pushed: &[PushedImage]) {
    assert_eq!(pushed.len(), set.entries.len());
    for img in pushed.iter().filter(|p| !p.is_index()) {
        assert_eq!(
            skopeo_digest(reg, &img.tagged()),
            img.digest,
            "{}",
            img.repo
        );
        let (raw_digest, _) = skopeo_raw(reg, &img.tagged());
        assert_eq!(raw_digest, img.digest, "{}", img.repo);
    }
    let multi = find(pushed, "tools/multi");
    let (digest, raw) = skopeo_raw(reg, &multi.tagged());
    assert_eq!(digest, multi.digest);
    assert_eq!(raw["mediaType"], images::OCI_INDEX);
    assert_eq!(multi.platforms, ["linux/amd64", "linux/arm64"]);
    let children: Vec<&str> = raw["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["digest"].as_str().unwrap())
        .collect();
    assert_eq!(
        children,
        [&multi.children[0].digest, &multi.children[1].digest]
    );
    // The children are there by digest.
    let (child_digest, child) = skopeo_raw(reg, &format!("{}@{}", multi.repo, children[1]));
    assert_eq!(child_digest, children[1]);
    assert_eq!(child["mediaType"], images::OCI_MANIFEST);
    let legacy = find(pushed, "tools/multi-docker");
    let (digest, raw) = skopeo_raw(reg, &legacy.tagged());
    assert_eq!(digest, legacy.digest);
    assert_eq!(raw["mediaType"], images::DOCKER_MANIFEST_LIST);

    // The shared base layer was uploaded once and mounted into the two other repositories.
    let base = set.shared_base_digest();
    for app in ["base/app-a", "base/app-b", "base/app-c"] {
        assert!(
            find(pushed, app).blobs.iter().any(|(d, _)| *d == base),
            "{app}"
        );
    }
    assert_eq!(reg.blob_uploads_completed(&base), 1);
    assert_eq!(reg.mounts_total(), 2);
    let unique: std::collections::BTreeSet<&String> = pushed
        .iter()
        .flat_map(|p| p.blobs.iter().map(|(d, _)| d))
        .collect();
    assert_eq!(reg.blob_upload_puts_total(), unique.len());
}

/// Pushing again moves nothing: HEAD finds every blob.
fn check_second_push(reg: &Registry, set: &SyntheticSet, prefix: &str, first: &[PushedImage]) {
    let puts = reg.blob_upload_puts_total();
    let patches = reg.requests_matching("PATCH", "/blobs/uploads/");
    let mounts = reg.mounts_total();
    let again = set.push_to(reg, prefix);
    assert_eq!(again, first, "same seed, same images");
    assert_eq!(reg.blob_uploads_completed(&set.shared_base_digest()), 1);
    assert_eq!(reg.blob_upload_puts_total(), puts);
    assert_eq!(reg.requests_matching("PATCH", "/blobs/uploads/"), patches);
    assert_eq!(reg.mounts_total(), mounts);
}

#[test]
fn plain_registry_takes_the_standard_set_once() {
    let reg = Registry::plain();
    assert_eq!(reg.url(), format!("http://{}", reg.host()));
    assert!(reg.host().starts_with("127.0.0.1:"));
    assert!(reg.ca_pem().is_none() && reg.credentials().is_none());
    assert_eq!(reg.skopeo_tls_args(), ["--tls-verify=false"]);
    assert_eq!(reg.skopeo_dest_args(), ["--dest-tls-verify=false"]);

    let set = SyntheticSet::standard(11);
    let pushed = set.push_to(&reg, "p");
    check_pushed_set(&reg, &set, &pushed);

    // The large layer is real-sized and went up in 1 MiB PATCHes, then one closing PUT.
    let large = find(&pushed, "data/large");
    let (digest, size) = large.blobs.iter().max_by_key(|(_, s)| *s).cloned().unwrap();
    assert!(size > images::DEFAULT_LARGE_LAYER, "{size}");
    let patches = reg.requests_matching("PATCH", "/v2/p/data/large/blobs/uploads/");
    assert_eq!(patches as u64, size.div_ceil(layers::STREAM_CHUNK as u64));
    assert_eq!(reg.blob_uploads_completed(&digest), 1);
    let head = support::block_on(async {
        RegistryClient::new(&reg)
            .head_blob(&large.repo, &digest)
            .await
            .unwrap()
    });
    assert_eq!(head, Some(size));

    check_second_push(&reg, &set, "p", &pushed);
    assert!(reg.log_text().contains("msg=\"response completed\""));
}

#[test]
fn tls_basic_registry_needs_the_ca_and_the_password() {
    let reg = Registry::tls_basic("alice", "s3cret-basic");
    assert_eq!(reg.url(), format!("https://{}", reg.host()));
    let ca = reg.ca_pem().unwrap();
    assert!(fs_err::read_to_string(&ca)
        .unwrap()
        .contains("BEGIN CERTIFICATE"));
    let cert_dir = reg.cert_dir().unwrap();
    assert_eq!(
        fs_err::read_dir(&cert_dir).unwrap().count(),
        1,
        "skopeo's cert dir holds the CA alone"
    );
    assert_eq!(
        reg.skopeo_src_args(),
        [
            "--src-cert-dir".to_string(),
            cert_dir.display().to_string(),
            "--src-creds".to_string(),
            "alice:s3cret-basic".to_string()
        ]
    );
    let url = reg.url();
    let (anonymous, authed, wrong) = support::block_on(async {
        let http = reg.http_client();
        let v2 = format!("{url}/v2/");
        let anonymous = http.get(&v2).send().await.unwrap();
        let challenge = anonymous.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .to_string();
        let authed = http
            .get(&v2)
            .basic_auth("alice", Some("s3cret-basic"))
            .send()
            .await;
        let wrong = http.get(&v2).basic_auth("alice", Some("nope")).send().await;
        (
            (anonymous.status().as_u16(), challenge),
            authed.unwrap().status().as_u16(),
            wrong.unwrap().status().as_u16(),
        )
    });
    assert_eq!(anonymous.0, 401);
    assert!(anonymous.1.starts_with("Basic realm="), "{}", anonymous.1);
    assert_eq!((authed, wrong), (200, 401));
    assert!(reg.auth_failures() >= 2);

    let set = SyntheticSet::standard(12).with_large_layer_size(SMALL_LARGE_LAYER);
    let pushed = set.push_to(&reg, "basic");
    check_pushed_set(&reg, &set, &pushed);
    check_second_push(&reg, &set, "basic", &pushed);

    // skopeo without the CA refuses the server; with the wrong password the registry does.
    let target = format!("docker://{}", reg.reference(&pushed[0].tagged()));
    let no_ca = Command::new("skopeo")
        .args(["inspect", "--creds", "alice:s3cret-basic", &target])
        .output()
        .unwrap();
    assert!(!no_ca.status.success());
    assert!(String::from_utf8_lossy(&no_ca.stderr).contains("certificate"));
    let bad = Command::new("skopeo")
        .args(["inspect", "--cert-dir", cert_dir.to_str().unwrap()])
        .args(["--creds", "alice:wrong", &target])
        .output()
        .unwrap();
    assert!(!bad.status.success());

    // auth.json for this host.
    let dir = tempfile::tempdir().unwrap();
    let auth = dir.path().join("auth.json");
    reg.write_authfile(&auth).unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&fs_err::read(&auth).unwrap()).unwrap();
    assert_eq!(doc["auths"][reg.host()]["auth"], "YWxpY2U6czNjcmV0LWJhc2lj");
    let ok = Command::new("skopeo")
        .args(["inspect", "--raw", "--cert-dir", cert_dir.to_str().unwrap()])
        .args(["--authfile", auth.to_str().unwrap(), &target])
        .output()
        .unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
}

#[test]
fn tls_token_registry_issues_tokens_and_refuses_bad_passwords() {
    let reg = Registry::tls_token("bob", "s3cret-token");
    let token = reg.token_server().unwrap();
    assert!(token.realm().starts_with("https://127.0.0.1:"));
    assert_eq!(reg.tokens_issued(), 0);

    let set = SyntheticSet::standard(13).with_large_layer_size(SMALL_LARGE_LAYER);
    let client = RegistryClient::new(&reg);
    let pushed = support::block_on(set.push_with(&client, "tok")).unwrap();
    // One token per repository, plus one for each mount (push here + pull there): the client
    // caches and reuses them.
    assert_eq!(client.tokens_fetched(), set.entries.len() + 2);
    assert!(reg.tokens_issued() >= set.entries.len());
    assert!(token.requests().iter().all(|r| r.service.as_deref()
        == Some(support::registry::TOKEN_SERVICE)
        && r.user.as_deref() == Some("bob")));
    let issued = reg.tokens_issued();
    check_pushed_set(&reg, &set, &pushed);
    assert!(reg.tokens_issued() > issued, "skopeo fetched tokens too");
    check_second_push(&reg, &set, "tok", &pushed);

    // The realm: a wrong password is a 401; an anonymous caller gets a token with no access,
    // which the registry accepts for /v2/ but not for a repository.
    let realm = token.realm();
    let url = reg.url();
    let repo = pushed[0].repo.clone();
    let before = (reg.tokens_issued(), token.rejections());
    let (wrong, anon_token, anon_v2, anon_manifest, body) = support::block_on(async {
        let http = reg.http_client();
        let q = format!(
            "{realm}?service={}&scope=repository:{repo}:pull",
            support::registry::TOKEN_SERVICE
        );
        let wrong = http
            .get(&q)
            .basic_auth("bob", Some("wrong"))
            .send()
            .await
            .unwrap();
        let anon = http.get(&q).send().await.unwrap();
        let body: serde_json::Value = anon.json().await.unwrap();
        let t = body["token"].as_str().unwrap().to_string();
        let v2 = http
            .get(format!("{url}/v2/"))
            .bearer_auth(&t)
            .send()
            .await
            .unwrap();
        let manifest = http
            .get(format!("{url}/v2/{repo}/manifests/1.0"))
            .bearer_auth(&t)
            .send()
            .await
            .unwrap();
        (
            wrong.status().as_u16(),
            t,
            v2.status().as_u16(),
            manifest.status().as_u16(),
            body,
        )
    });
    assert_eq!(wrong, 401);
    assert_eq!(token.rejections(), before.1 + 1);
    assert_eq!(
        reg.tokens_issued(),
        before.0 + 1,
        "the anonymous token counts"
    );
    assert_eq!(body["access_token"].as_str(), Some(anon_token.as_str()));
    assert_eq!(body["expires_in"], 300);
    assert!(body["issued_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!((anon_v2, anon_manifest), (200, 401));
    let claims = jwt_claims(&anon_token);
    assert_eq!(claims["sub"], "");
    assert_eq!(claims["access"], serde_json::json!([]));
    assert_eq!(claims["aud"], support::registry::TOKEN_SERVICE);

    // skopeo with a wrong password fails at the realm.
    let target = format!("docker://{}", reg.reference(&pushed[0].tagged()));
    let bad = Command::new("skopeo")
        .args([
            "inspect",
            "--cert-dir",
            reg.cert_dir().unwrap().to_str().unwrap(),
        ])
        .args(["--creds", "bob:wrong", &target])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(token.rejections() > before.1 + 1);
}

fn jwt_claims(token: &str) -> serde_json::Value {
    use base64::Engine as _;
    let part = token.split('.').nth(1).unwrap();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

#[test]
fn short_lived_tokens_expire_at_the_registry_and_the_client_refreshes() {
    let reg = Registry::tls_token_with_ttl("carol", "s3cret-ttl", Duration::from_secs(2));
    let spec = ImageSpec::new(
        images::Format::Oci,
        Platform::linux_amd64(),
        vec![LayerSpec::new(99, 2048)],
    );
    let url = reg.url();
    let token = reg.token_server().unwrap();
    let (fresh, stale, refreshed, fetched) = support::block_on(async {
        let client = RegistryClient::new(&reg);
        let pushed = images::push_image(&client, "ttl/app", Some("1"), &spec)
            .await
            .unwrap();
        let t = token.mint("carol", &[("repository", "ttl/app", &["pull"])]);
        let http = reg.http_client();
        let get = |t: String| {
            let http = http.clone();
            let url = format!("{url}/v2/ttl/app/manifests/{}", pushed.digest);
            async move {
                http.get(url)
                    .header("Accept", images::OCI_MANIFEST)
                    .bearer_auth(t)
                    .send()
                    .await
                    .unwrap()
                    .status()
                    .as_u16()
            }
        };
        let fresh = get(t.clone()).await;
        tokio::time::sleep(Duration::from_millis(3100)).await;
        let stale = get(t).await;
        // The harness client notices its cached push token expired and fetches another.
        let before = client.tokens_fetched();
        let config = &pushed.blobs.last().unwrap().0;
        let refreshed = client.head_blob("ttl/app", config).await.unwrap();
        (
            fresh,
            stale,
            refreshed.is_some(),
            client.tokens_fetched() - before,
        )
    });
    assert_eq!(fresh, 200);
    assert_eq!(
        stale, 401,
        "Distribution's 60 s leeway must be cancelled out"
    );
    assert!(refreshed);
    assert_eq!(fetched, 1);
    let claims = jwt_claims(&token.mint("carol", &[]));
    let (iat, exp) = (
        claims["iat"].as_i64().unwrap(),
        claims["exp"].as_i64().unwrap(),
    );
    assert_eq!(exp - iat, 2 - 60);
}

#[test]
fn generator_is_deterministic_and_layers_are_real_tar_gz() {
    let a = SyntheticSet::standard(5);
    let b = SyntheticSet::standard(5);
    let c = SyntheticSet::standard(6);
    assert_eq!(a.shared_base_digest(), b.shared_base_digest());
    assert_ne!(a.shared_base_digest(), c.shared_base_digest());
    let spec = LayerSpec::new(7, 100_000);
    let (bytes, info) = layers::layer_bytes(&spec);
    assert_eq!(info.size as usize, bytes.len());
    assert_eq!(info.digest, layers::sha256_digest(&bytes));
    assert!(bytes.len() > 100_000, "random content does not compress");
    // gunzip + tar list it like any layer; the diff_id is the tar's digest.
    let mut tar_bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(&bytes[..]),
        &mut tar_bytes,
    )
    .unwrap();
    assert_eq!(info.diff_id, layers::sha256_digest(&tar_bytes));
    let mut archive = tar::Archive::new(&tar_bytes[..]);
    let names: Vec<(String, u64)> = archive
        .entries()
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.path().unwrap().display().to_string(), e.size())
        })
        .collect();
    assert_eq!(
        names,
        [
            ("synthetic/".to_string(), 0),
            ("synthetic/0000000000000007.bin".to_string(), 100_000)
        ]
    );
    // The config's diff_ids match, and its platform is the spec's.
    let built = images::build_image(&ImageSpec::new(
        images::Format::Docker,
        Platform::linux_arm64_v8(),
        vec![spec],
    ));
    let config: serde_json::Value = serde_json::from_slice(&built.config).unwrap();
    assert_eq!(config["rootfs"]["diff_ids"][0], info.diff_id.as_str());
    assert_eq!(
        (&config["architecture"], &config["variant"]),
        (&serde_json::json!("arm64"), &serde_json::json!("v8"))
    );
    let manifest: serde_json::Value = serde_json::from_slice(&built.manifest).unwrap();
    assert_eq!(manifest["mediaType"], images::DOCKER_MANIFEST);
    assert_eq!(manifest["layers"][0]["mediaType"], images::DOCKER_LAYER);
    assert_eq!(manifest["config"]["digest"], built.config_digest.as_str());
}

#[test]
fn libtrust_key_id_matches_the_signer_certificate() {
    assert_eq!(tls::base32(b"foobar"), "MZXW6YTBOI");
    assert_eq!(tls::base32(b"fooba"), "MZXW6YTB");
    let dir = tempfile::tempdir().unwrap();
    let pki = tls::TestPki::generate(dir.path()).unwrap();
    // The key ID is computed over the SubjectPublicKeyInfo Go's x509.MarshalPKIXPublicKey
    // writes; openssl extracts the same DER from the certificate.
    let cert = dir.path().join("signer.der");
    fs_err::write(&cert, &pki.signer_cert_der).unwrap();
    let pubkey = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "openssl x509 -inform DER -in {} -pubkey -noout | openssl pkey -pubin -outform DER",
            cert.display()
        ))
        .output()
        .unwrap();
    assert!(pubkey.status.success());
    assert_eq!(tls::libtrust_key_id(&pubkey.stdout), pki.signer_kid);
    let groups: Vec<&str> = pki.signer_kid.split(':').collect();
    assert_eq!(groups.len(), 12);
    assert!(groups.iter().all(|g| g.len() == 4));
    // The server certificate names 127.0.0.1 and localhost, signed by the CA.
    let verify = Command::new("openssl")
        .args(["verify", "-CAfile"])
        .arg(&pki.ca_path)
        .arg(&pki.server_cert_path)
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stderr)
    );
    let text = Command::new("openssl")
        .args(["x509", "-noout", "-ext", "subjectAltName", "-in"])
        .arg(&pki.server_cert_path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("IP Address:127.0.0.1") && text.contains("DNS:localhost"),
        "{text}"
    );
}

#[test]
fn registry_log_lines_parse() {
    let text = r#"time="2026-12-02T16:08:16.257315799Z" level=info msg="response completed" go.version=go1.19.8 http.request.contenttype=application/octet-stream http.request.host="127.0.0.1:5190" http.request.id=f3b04093 http.request.method=PUT http.request.remoteaddr="127.0.0.1:42096" http.request.uri="/v2/t/a/blobs/uploads/7ac47d78?_state=XRU&digest=sha256%3A2cf2" http.request.useragent=curl/7.88.1 http.response.duration=6.907355ms http.response.status=201 http.response.written=0
time="2026-12-02T16:08:16.268414512Z" level=info msg="response completed" go.version=go1.19.8 http.request.method=POST http.request.uri="/v2/t/b/blobs/uploads/?mount=sha256:2cf2&from=t/a" http.response.status=201
time="2026-12-02T16:10:16.585148474Z" level=warning msg="error authorizing context: basic authentication challenge for realm \"basic-realm\": invalid authorization credential" http.request.method=GET http.request.uri=/v2/
time="2026-12-02T16:10:16.624289868Z" level=error msg="response completed with error" auth.user.name=u err.code="manifest unknown" http.request.method=GET http.request.uri=/v2/t/a/manifests/nope http.response.status=404"#;
    let reqs = reglog::requests(text);
    assert_eq!(reqs.len(), 3);
    assert!(reqs[0].is_completed_upload());
    assert_eq!(reqs[0].query_value("digest"), Some("sha256:2cf2"));
    assert_eq!(reqs[0].path, "/v2/t/a/blobs/uploads/7ac47d78");
    assert!(reqs[1].is_mount() && !reqs[1].is_completed_upload());
    assert_eq!(reqs[1].query_value("from"), Some("t/a"));
    assert_eq!((reqs[2].status, reqs[2].user.as_deref()), (404, Some("u")));
    assert_eq!(reqs[2].msg, "response completed with error");
    assert_eq!(reglog::auth_failures(text), 1);
    let pairs = reglog::parse_line(text.lines().nth(2).unwrap());
    assert!(pairs[2].1.contains("realm \"basic-realm\""), "{pairs:?}");
}

#[test]
fn a_stopped_registry_frees_its_port() {
    let reg = Registry::plain();
    let host = reg.host();
    assert!(reg.is_running());
    std::net::TcpStream::connect(&host).expect("registry listening");
    let dir = reg.dir().to_path_buf();
    drop(reg);
    assert!(
        std::net::TcpStream::connect(&host).is_err(),
        "still listening after drop"
    );
    assert!(!dir.exists(), "temporary directory removed");
}

/// Regression: `assert_blobs_intact` returned early when `blobs/sha256` was missing, so a mirror
/// that wrote nothing passed the check meant to prove it intact. Missing and empty fail; a
/// corrupt blob fails; a good blob passes.
#[test]
fn blob_check_fails_on_a_missing_or_empty_blob_directory() {
    let fails =
        |dir: &std::path::Path| std::panic::catch_unwind(|| run::assert_blobs_intact(dir)).is_err();
    let dir = tempfile::tempdir().unwrap();
    assert!(fails(dir.path()), "a missing blob directory passed");
    let blobs = dir.path().join("blobs/sha256");
    fs_err::create_dir_all(&blobs).unwrap();
    assert!(fails(dir.path()), "an empty blob directory passed");
    let good = b"a blob";
    let hex = bootstrap::oci::digest::Digest::of(good).hex().to_string();
    fs_err::write(blobs.join(&hex), good).unwrap();
    run::assert_blobs_intact(dir.path());
    fs_err::write(blobs.join(&hex), b"a blob, changed").unwrap();
    assert!(fails(dir.path()), "a corrupt blob passed");
}
