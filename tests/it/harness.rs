//! Self-test of `tests/it/support`: the registries, the token server and the image generator must
//! be right before any test of `bootstrap` can lean on them. Each flavour starts and answers,
//! the standard set pushes into it, skopeo (an independent client) reads back the digests the
//! generator reported, the registry log counts uploads and mounts correctly, and the token
//! server refuses bad passwords, issues tokens the registry accepts, and expires them on time.
//! The fault proxy relays pushes and pulls byte for byte and each of its faults shows on the
//! client side exactly as configured.

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

/// Blob size for the fault proxy's self-tests: many relay buffers, still quick.
const PROXY_BLOB: usize = 3 * 1024 * 1024 + 777;

const MIB: u64 = 1024 * 1024;

/// Seeded random bytes (incompressible, so sizes on the wire are real).
fn random_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut data = vec![0; len];
    layers::Rng::new(seed).fill(&mut data);
    data
}

/// A plain registry holding one random blob in `fp/blob` (pushed directly), with a fault proxy
/// in front of it: `(registry, proxy, blob, digest)`.
fn proxied_blob(seed: u64) -> (Registry, FaultProxy, Vec<u8>, String) {
    let reg = Registry::plain();
    let proxy = FaultProxy::start(&reg.host()).expect("starting fault proxy");
    let data = random_bytes(seed, PROXY_BLOB);
    let digest = layers::sha256_digest(&data);
    let source = BlobSource::Bytes(Bytes::from(data.clone()));
    support::block_on(RegistryClient::new(&reg).push_blob("fp/blob", &digest, source)).unwrap();
    (reg, proxy, data, digest)
}

/// What a GET delivered: the head, the body bytes received before it ended or failed, the
/// failure, and how long the whole took.
struct Fetched {
    status: u16,
    retry_after: Option<String>,
    body: Vec<u8>,
    error: Option<String>,
    elapsed: Duration,
}

/// GETs `url`, reading the body until it ends or fails (a failure is data here, not a panic).
async fn fetch(http: &reqwest::Client, url: &str) -> Fetched {
    let start = std::time::Instant::now();
    let mut resp = http.get(url).send().await.expect("response head");
    let status = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    let mut body = Vec::new();
    let error = loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Ok(None) => break None,
            Err(e) => break Some(format!("{e:?}")),
        }
    };
    Fetched {
        status,
        retry_after,
        body,
        error,
        elapsed: start.elapsed(),
    }
}

/// A blocking HTTP/1.1 connection, for what reqwest cannot be made to do for certain: chunked
/// request bodies, and several requests on one known connection.
struct RawConn {
    reader: std::io::BufReader<std::net::TcpStream>,
    writer: std::net::TcpStream,
    host: String,
}

/// A response read by [`RawConn`].
struct RawResponse {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl RawResponse {
    fn header(&self, name: &str) -> Option<&str> {
        let found = self
            .headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name));
        found.map(|(_, v)| v.as_str())
    }
}

impl RawConn {
    fn connect(host: &str) -> RawConn {
        let writer = std::net::TcpStream::connect(host).unwrap();
        writer
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        RawConn {
            reader: std::io::BufReader::new(writer.try_clone().unwrap()),
            writer,
            host: host.to_string(),
        }
    }

    /// Sends a request with `body` (chunked in `chunk`-byte pieces when `chunk` is given,
    /// with a Content-Length otherwise) and reads the response (which must have a length).
    fn exchange(
        &mut self,
        method: &str,
        target: &str,
        body: &[u8],
        chunk: Option<usize>,
    ) -> RawResponse {
        use std::io::Write;
        let framing = match chunk {
            Some(_) => "Transfer-Encoding: chunked".to_string(),
            None => format!("Content-Length: {}", body.len()),
        };
        let head = format!(
            "{method} {target} HTTP/1.1\r\nHost: {}\r\n{framing}\r\n\r\n",
            self.host
        );
        self.writer.write_all(head.as_bytes()).unwrap();
        match chunk {
            Some(size) => {
                for piece in body.chunks(size) {
                    write!(self.writer, "{:x}\r\n", piece.len()).unwrap();
                    self.writer.write_all(piece).unwrap();
                    self.writer.write_all(b"\r\n").unwrap();
                }
                self.writer.write_all(b"0\r\n\r\n").unwrap();
            }
            None => self.writer.write_all(body).unwrap(),
        }
        self.read_response()
    }

    fn read_response(&mut self) -> RawResponse {
        use std::io::{BufRead, Read};
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        let status = line.split(' ').nth(1).unwrap().parse().unwrap();
        let mut headers = Vec::new();
        loop {
            line.clear();
            self.reader.read_line(&mut line).unwrap();
            match line.trim_end().split_once(':') {
                Some((k, v)) => headers.push((k.to_string(), v.trim().to_string())),
                None => break,
            }
        }
        let mut response = RawResponse {
            status,
            headers,
            body: Vec::new(),
        };
        let length: usize = response.header("content-length").unwrap().parse().unwrap();
        response.body.resize(length, 0);
        self.reader.read_exact(&mut response.body).unwrap();
        response
    }
}

/// The origin-form target of an absolute `Location` that names the proxy.
fn target_of(location: &str, proxy: &FaultProxy) -> String {
    let target = location.strip_prefix(&proxy.url());
    target
        .unwrap_or_else(|| panic!("{location} does not name the proxy"))
        .to_string()
}

#[test]
fn faultproxy_relays_uploads_and_downloads_and_counts_their_bytes() {
    let reg = Registry::plain();
    let proxy = FaultProxy::start(&reg.host()).unwrap();
    assert_eq!(proxy.url(), format!("http://{}", proxy.host()));
    assert_eq!(proxy.upstream(), reg.host());
    let (mono, streamed) = (random_bytes(1, PROXY_BLOB), random_bytes(2, PROXY_BLOB + 1));
    let (mono_digest, streamed_digest) = (
        layers::sha256_digest(&mono),
        layers::sha256_digest(&streamed),
    );
    let url = proxy.url();
    // A monolithic upload with Content-Length (POST, then PUT with the body).
    let location = support::block_on(async {
        let client = RegistryClient::with_parts(reg.http_client(), &url, None);
        let source = BlobSource::Bytes(Bytes::from(mono.clone()));
        client
            .push_blob("fp/mono", &mono_digest, source)
            .await
            .unwrap();
        client.start_upload("fp/streamed").await.unwrap()
    });
    // Host was forwarded unchanged, so the registry's Location names the proxy.
    let target = target_of(&location, &proxy);

    // A chunked PATCH and the closing PUT on one connection: bodies of both framings are
    // relayed, and the connection is kept alive.
    let connections = proxy.connections();
    let mut raw = RawConn::connect(&proxy.host());
    let patched = raw.exchange("PATCH", &target, &streamed, Some(100_003));
    assert_eq!(patched.status, 202);
    let end = streamed.len() - 1;
    assert_eq!(patched.header("range"), Some(format!("0-{end}").as_str()));
    let next = target_of(patched.header("location").unwrap(), &proxy);
    let put = raw.exchange(
        "PUT",
        &format!("{next}&digest={streamed_digest}"),
        b"",
        None,
    );
    assert_eq!(put.status, 201);
    assert_eq!(
        proxy.connections(),
        connections + 1,
        "one connection for both"
    );
    assert_eq!(reg.blob_uploads_completed(&streamed_digest), 1);
    assert_eq!(reg.blob_uploads_completed(&mono_digest), 1);

    check_proxied_pulls(
        &reg,
        &proxy,
        (&mono, &mono_digest),
        (&streamed, &streamed_digest),
    );
    check_chunked_response(&reg, &proxy);

    let host = proxy.host();
    drop(proxy);
    assert!(
        std::net::TcpStream::connect(&host).is_err(),
        "still listening after drop"
    );
}

/// Pulls both blobs back through the proxy and checks every byte counter against their sizes.
fn check_proxied_pulls(
    reg: &Registry,
    proxy: &FaultProxy,
    (mono, mono_digest): (&[u8], &str),
    (streamed, streamed_digest): (&[u8], &str),
) {
    let sizes = (mono.len() as u64, streamed.len() as u64);
    assert_eq!(proxy.request_body_bytes("PUT", "/blobs/uploads/"), sizes.0);
    assert_eq!(
        proxy.request_body_bytes("PATCH", "/blobs/uploads/"),
        sizes.1
    );
    assert_eq!(proxy.total_request_body_bytes(), sizes.0 + sizes.1);
    let url = proxy.url();
    let (head, got_mono, got_streamed) = support::block_on(async {
        let client = RegistryClient::with_parts(reg.http_client(), &url, None);
        (
            client.head_blob("fp/mono", mono_digest).await.unwrap(),
            client.get_blob("fp/mono", mono_digest).await.unwrap(),
            client
                .get_blob("fp/streamed", streamed_digest)
                .await
                .unwrap(),
        )
    });
    assert_eq!(head, Some(sizes.0));
    assert!(
        got_mono == mono && got_streamed == streamed,
        "blobs relayed intact"
    );
    assert_eq!(
        proxy.response_body_bytes("GET", "/blobs/sha256:"),
        sizes.0 + sizes.1
    );
    assert_eq!(proxy.response_body_bytes("HEAD", "/blobs/sha256:"), 0);
    assert_eq!(proxy.total_response_body_bytes(), sizes.0 + sizes.1);
    let requests = proxy.requests();
    assert!(requests.iter().all(|r| r.fault.is_none()), "{requests:?}");
    assert_eq!(proxy.requests_matching("GET", "/blobs/sha256:").len(), 2);
    assert!(proxy
        .requests_matching("GET", "/blobs/sha256:")
        .iter()
        .all(|r| r.status == Some(200)));
    proxy.reset_counters();
    assert_eq!(proxy.total_response_body_bytes(), 0);
    assert!(proxy.requests().is_empty());
}

/// A tags list over 2 KiB comes chunked from Distribution; the proxy re-chunks it intact and
/// counts its decoded length.
fn check_chunked_response(reg: &Registry, proxy: &FaultProxy) {
    let spec = ImageSpec::new(
        images::Format::Oci,
        Platform::linux_amd64(),
        vec![LayerSpec::new(5, 1024)],
    );
    let (url, direct_url) = (proxy.url(), reg.url());
    let (direct, proxied) = support::block_on(async {
        let direct = RegistryClient::new(reg);
        let pushed = images::push_image(&direct, "fp/tags", None, &spec)
            .await
            .unwrap();
        let (media_type, manifest) = direct
            .get_manifest("fp/tags", &pushed.digest)
            .await
            .unwrap();
        for i in 0..30 {
            let tag = format!("{i:0>100}");
            direct
                .put_manifest("fp/tags", &tag, &media_type, &manifest)
                .await
                .unwrap();
        }
        let http = reg.http_client();
        let path = "/v2/fp/tags/tags/list";
        let direct = http
            .get(format!("{direct_url}{path}"))
            .send()
            .await
            .unwrap();
        assert_eq!(direct.content_length(), None, "Distribution chunks it");
        let direct = direct.bytes().await.unwrap();
        (direct, fetch(&http, &format!("{url}{path}")).await)
    });
    assert_eq!((proxied.status, proxied.error), (200, None));
    assert_eq!(proxied.body, direct);
    let counted = proxy.response_body_bytes("GET", "/tags/list");
    assert_eq!(counted, direct.len() as u64);
}

#[test]
fn faultproxy_response_faults_show_on_the_client_side() {
    let (reg, proxy, data, digest) = proxied_blob(3);
    let url = format!("{}/v2/fp/blob/blobs/{digest}", proxy.url());
    let blobs = || {
        FaultRule::new(Fault::FlipResponseByte(0))
            .method("GET")
            .path("/blobs/sha256:")
    };
    let flip_at = 2 * MIB + 3;
    proxy.add_rule(FaultRule {
        fault: Fault::ResetResponseAfter(MIB),
        ..blobs()
    });
    proxy.add_rule(FaultRule {
        fault: Fault::TruncateResponseAfter(MIB + 5),
        ..blobs().skip(1)
    });
    proxy.add_rule(FaultRule {
        fault: Fault::FlipResponseByte(flip_at),
        ..blobs().skip(2)
    });
    let fetched = support::block_on(async {
        let http = reg.http_client();
        let mut all = Vec::new();
        for _ in 0..4 {
            all.push(fetch(&http, &url).await);
        }
        all
    });
    let [reset, truncated, flipped, intact] = &fetched[..] else {
        unreachable!()
    };
    // Reset: an error mid-body; the RST may discard bytes still in flight.
    assert_eq!(reset.status, 200);
    assert!(reset.error.is_some() && reset.body.len() as u64 <= MIB);
    assert_eq!(reset.body, data[..reset.body.len()]);
    // Truncated: exactly the bytes sent before the FIN, then an error (short of the length).
    assert!(truncated.error.is_some());
    assert_eq!(truncated.body, data[..(MIB + 5) as usize]);
    // Flipped: complete, and different at exactly that offset.
    assert_eq!(flipped.error, None);
    let diffs: Vec<usize> = (0..data.len())
        .filter(|&i| flipped.body[i] != data[i])
        .collect();
    assert_eq!(diffs, [flip_at as usize]);
    assert_eq!(
        flipped.body[flip_at as usize],
        data[flip_at as usize] ^ 0xFF
    );
    // The rules are spent.
    assert!(intact.error.is_none() && intact.body == data);

    let records = proxy.requests_matching("GET", "/blobs/sha256:");
    let faults: Vec<_> = records.iter().map(|r| r.fault.clone()).collect();
    assert_eq!(
        faults,
        [
            Some(Fault::ResetResponseAfter(MIB)),
            Some(Fault::TruncateResponseAfter(MIB + 5)),
            Some(Fault::FlipResponseByte(flip_at)),
            None
        ]
    );
    let relayed: Vec<u64> = records.iter().map(|r| r.response_body_bytes).collect();
    let full = data.len() as u64;
    assert_eq!(relayed, [MIB, MIB + 5, full, full]);
    assert_eq!(proxy.faults_fired(), 3);
    assert_eq!(reg.requests_matching("GET", "/blobs/sha256:"), 4);
}

#[test]
fn faultproxy_injects_statuses_without_reaching_the_registry() {
    let (reg, proxy, data, digest) = proxied_blob(4);
    let url = format!("{}/v2/fp/blob/blobs/{digest}", proxy.url());
    let gets_before = reg.requests_matching("GET", "/blobs/sha256:");
    let status = |status, retry_after| Fault::Status {
        status,
        retry_after,
    };
    let rule = |fault| FaultRule::new(fault).method("GET").path("/blobs/sha256:");
    proxy.add_rule(rule(status(503, Some(7))));
    proxy.add_rule(rule(status(429, Some(2))).skip(1));
    let (unavailable, too_many, ok) = support::block_on(async {
        let http = reg.http_client();
        (
            fetch(&http, &url).await,
            fetch(&http, &url).await,
            fetch(&http, &url).await,
        )
    });
    for (fetched, code, retry) in [(&unavailable, 503, "7"), (&too_many, 429, "2")] {
        assert_eq!(fetched.status, code);
        assert_eq!(fetched.retry_after.as_deref(), Some(retry));
        let body: serde_json::Value = serde_json::from_slice(&fetched.body).unwrap();
        assert_eq!(body["errors"][0]["message"], "injected by fault proxy");
    }
    let code = |f: &Fetched| serde_json::from_slice::<serde_json::Value>(&f.body).unwrap();
    assert_eq!(code(&unavailable)["errors"][0]["code"], "UNAVAILABLE");
    assert_eq!(code(&too_many)["errors"][0]["code"], "TOOMANYREQUESTS");
    assert!(ok.status == 200 && ok.body == data);
    assert_eq!(
        reg.requests_matching("GET", "/blobs/sha256:"),
        gets_before + 1
    );

    // An upload refused with a 500: its body is read and discarded, so the same connection
    // carries the next request; the registry never saw the refused one.
    let puts_before = reg.requests_matching("PUT", "/blobs/uploads/");
    proxy.add_rule(FaultRule::new(status(500, None)).method("PUT"));
    let mut raw = RawConn::connect(&proxy.host());
    let target = "/v2/fp/other/blobs/uploads/00000000-0000-0000-0000-000000000000?_state=x";
    let refused = raw.exchange("PUT", target, &data[..MIB as usize], None);
    assert_eq!((refused.status, refused.header("retry-after")), (500, None));
    let after = raw.exchange("GET", &format!("/v2/fp/blob/blobs/{digest}"), b"", None);
    assert!(after.status == 200 && after.body == data);
    assert_eq!(reg.requests_matching("PUT", "/blobs/uploads/"), puts_before);
    let refused = &proxy.requests_matching("PUT", "/blobs/uploads/")[0];
    assert_eq!((refused.status, refused.request_body_bytes), (Some(500), 0));
}

#[test]
fn faultproxy_request_reset_cuts_the_upload_short() {
    let reg = Registry::plain();
    let proxy = FaultProxy::start(&reg.host()).unwrap();
    let data = random_bytes(6, PROXY_BLOB);
    let digest = layers::sha256_digest(&data);
    proxy.add_rule(
        FaultRule::new(Fault::ResetRequestAfter(MIB))
            .method("PATCH")
            .path("/blobs/uploads/"),
    );
    let url = proxy.url();
    let http_client = reg.http_client();
    let (location, cut) = support::block_on(async {
        let client = RegistryClient::with_parts(http_client.clone(), &url, None);
        let location = client.start_upload("fp/cut").await.unwrap();
        let body = Bytes::from(data.clone());
        let cut = http_client.patch(&location).body(body).send().await;
        (location, cut.map(|r| r.status()))
    });
    assert!(cut.is_err(), "the client saw the connection fail: {cut:?}");
    let patches = proxy.requests_matching("PATCH", "/blobs/uploads/");
    assert_eq!(patches[0].request_body_bytes, MIB);
    assert_eq!(patches[0].status, None);
    assert_eq!(patches[0].fault, Some(Fault::ResetRequestAfter(MIB)));

    // The registry read exactly the forwarded bytes, then EOF, and kept them in the session.
    let copied = wait_for_cut_patch(&reg);
    assert_eq!(copied, MIB);
    let uuid = location
        .split("/uploads/")
        .nth(1)
        .unwrap()
        .split('?')
        .next()
        .unwrap();
    let session = reg
        .storage_dir()
        .join("docker/registry/v2/repositories/fp/cut/_uploads")
        .join(uuid)
        .join("data");
    assert_eq!(fs_err::metadata(&session).unwrap().len(), MIB);

    // Distribution 2.8 then refuses the stale Location (its _state says offset 0) and drops
    // the session: a client cut off mid-PATCH has to start the upload over.
    let (stale, restarted) = support::block_on(async {
        let stale = http_client.get(&location).send().await.unwrap();
        let client = RegistryClient::with_parts(http_client.clone(), &url, None);
        let source = BlobSource::Bytes(Bytes::from(data.clone()));
        let restarted = client.push_blob("fp/cut", &digest, source).await.unwrap();
        (stale.status().as_u16(), restarted)
    });
    assert_eq!(stale, 404);
    assert_eq!(restarted, support::client::BlobOutcome::Uploaded);
    assert_eq!(reg.blob_uploads_completed(&digest), 1);
}

/// Waits until Distribution is done with the PATCH whose client went away (its status line,
/// logged after the session was flushed); returns how many body bytes it copied.
fn wait_for_cut_patch(reg: &Registry) -> u64 {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        let log = reg.log_text();
        let answered = reglog::requests(&log).iter().any(|r| r.method == "PATCH");
        let line = log
            .lines()
            .find(|l| l.contains("msg=\"client disconnected during blob PATCH\""));
        if let Some(line) = line.filter(|_| answered) {
            let pairs = reglog::parse_line(line);
            let copied = pairs.iter().find(|(k, _)| k == "copied").unwrap();
            return copied.1.parse().unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!(
        "the registry never logged the cut PATCH:\n{}",
        reg.log_text()
    );
}

#[tokio::test]
async fn faultproxy_stalls_and_delays_hold_the_response_back() {
    let (reg, proxy, data, digest) = proxied_blob(7);
    let url = format!("{}/v2/fp/blob/blobs/{digest}", proxy.url());
    let (stall, delay) = (Duration::from_millis(700), Duration::from_millis(400));
    let blobs = |fault| FaultRule::new(fault).path("/blobs/sha256:");
    proxy.add_rule(
        blobs(Fault::StallResponseAfter {
            after: 256 * 1024,
            stall,
        })
        .method("GET"),
    );
    proxy.add_rule(blobs(Fault::Delay(delay)).method("HEAD"));
    let http = reg.http_client();
    let stalled = fetch(&http, &url).await;
    assert_eq!((stalled.status, stalled.error), (200, None));
    assert!(stalled.body == data, "stalled body intact");
    assert!(stalled.elapsed >= stall, "{:?}", stalled.elapsed);
    let start = std::time::Instant::now();
    let head = http.head(&url).send().await.unwrap();
    assert_eq!(head.status(), 200);
    assert!(start.elapsed() >= delay, "{:?}", start.elapsed());
    assert_eq!(proxy.faults_fired(), 2);
    // Dropping the proxy inside a runtime is fine: it runs on its own thread.
    drop(proxy);
}

/// The WAN benchmark's link: each connection pays its handshake round trips once and one round
/// trip per request, and moves its bodies at no more than the cap, while a second connection
/// gets a cap of its own (a per-connection limit, not a shared line).
#[tokio::test]
async fn faultproxy_link_adds_round_trips_and_caps_each_connection() {
    let (reg, _plain, data, digest) = proxied_blob(8);
    let link = Link {
        rtt: Duration::from_millis(100),
        handshake_rtts: 2,
        bytes_per_sec: 2 << 20,
    };
    let proxy = FaultProxy::start_with_link(&reg.host(), link).unwrap();
    let url = format!("{}/v2/fp/blob/blobs/{digest}", proxy.url());
    // 3 MiB at 2 MiB/s is 1.5 s on the wire, plus three round trips: 1.8 s; two transfers
    // sharing one cap would take 3.3 s.
    let floor = Duration::from_millis(1500 + 300);
    let (http_a, http_b) = (reg.http_client(), reg.http_client());
    let start = std::time::Instant::now();
    let (a, b) = tokio::join!(fetch(&http_a, &url), fetch(&http_b, &url));
    let both = start.elapsed();
    for got in [&a, &b] {
        assert_eq!((got.status, got.error.as_deref()), (200, None));
        assert!(got.body == data, "shaped body intact");
        assert!(got.elapsed >= floor, "{:?} < {floor:?}", got.elapsed);
    }
    // Two connections in parallel take about as long as one: each has its own cap.
    assert!(
        both < Duration::from_millis(2600),
        "{both:?}: the cap is shared"
    );
    assert_eq!(proxy.connections(), 2);
    // A second request on a kept-alive connection pays one round trip, no handshake.
    let start = std::time::Instant::now();
    let head = http_a.head(&url).send().await.unwrap();
    assert_eq!(head.status(), 200);
    let took = start.elapsed();
    assert!(took >= link.rtt && took < link.rtt * 3, "{took:?}");
    assert_eq!(proxy.connections(), 2, "the connection was reused");
    // A TLS ClientHello (a client probing for HTTPS) is refused at once, with no round trips.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let start = std::time::Instant::now();
    let mut probe = tokio::net::TcpStream::connect(proxy.host()).await.unwrap();
    probe
        .write_all(&[0x16, 0x03, 0x01, 0x00, 0x05])
        .await
        .unwrap();
    let mut answer = Vec::new();
    let _ = probe.read_to_end(&mut answer).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    assert!(start.elapsed() < link.rtt, "{:?}", start.elapsed());
}
