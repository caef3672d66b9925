//! End-to-end mirrors against real Distribution registries (Debian's `docker-registry`) with
//! skopeo as the interop peer: mirror to disk, disk to mirror, mirror to mirror; digests kept,
//! shared blobs sent once, architecture filtering, Basic and token auth over TLS, audit files,
//! and bad input that fails cleanly.

use crate::support;

use std::process::{Command, Output};
use support::images::SyntheticSet;
use support::run::{bootstrap, failed, json, ok, write_config};
use support::Registry;

fn skopeo(args: &[String]) -> Output {
    Command::new("skopeo")
        .args(args)
        .output()
        .expect("running skopeo")
}

fn skopeo_ok(args: &[String]) -> String {
    let o = skopeo(args);
    assert!(
        o.status.success(),
        "skopeo {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn s(v: &str) -> String {
    v.to_string()
}

fn image_in<'a>(rec: &'a serde_json::Value, repo: &str) -> &'a serde_json::Value {
    rec["images"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["path"].as_str().unwrap().ends_with(repo))
        .unwrap_or_else(|| panic!("record has no image {repo}: {rec:#}"))
}

fn raw_digest(raw: &str) -> String {
    bootstrap::oci::digest::Digest::of(raw.as_bytes()).to_string()
}

#[test]
fn disk_round_trip_keeps_every_digest_and_audits() {
    let src = Registry::plain();
    let dst = Registry::plain();
    let pushed = SyntheticSet::standard(1).push_to(&src, "src");
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(work.path(), &pushed, &src.host(), &["amd64", "arm64"]);
    let dir = work.path().join("mirror");
    let dir_url = format!("file://{}", dir.display());

    ok(&bootstrap(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        &dir_url,
        "--plain-http",
        &src.host(),
    ]));

    // skopeo reads the layout, and the digests are the source's.
    // skopeo's oci transport only looks at OCI media types in index.json; Docker schema2 images
    // are kept verbatim (their digests are what clusters pull by) and are checked at the registry.
    for img in pushed.iter().filter(|p| p.media_type.contains("oci")) {
        let oci = format!(
            "oci:{}:{}/{}:{}",
            dir.display(),
            src.host(),
            img.repo,
            img.tag
        );
        let o = skopeo(&[s("inspect"), s("--raw"), oci.clone()]);
        assert!(
            o.status.success(),
            "skopeo inspect {oci}: {}\nindex.json: {}",
            String::from_utf8_lossy(&o.stderr),
            fs_err::read_to_string(dir.join("index.json")).unwrap()
        );
        assert_eq!(
            raw_digest(&String::from_utf8_lossy(&o.stdout)),
            img.digest,
            "{}",
            img.repo
        );
    }
    // sha256sum -c and verify pass.
    let sums = Command::new("sha256sum")
        .args(["-c", "--quiet", "SHA256SUMS"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        sums.status.success(),
        "{}",
        String::from_utf8_lossy(&sums.stdout)
    );
    let out = ok(&bootstrap(&["verify", &dir_url]));
    assert!(out.contains("OK"), "{out}");

    // Disk to mirror, under a prefix; digests again unchanged, skopeo can copy out of it.
    let rec_path = work.path().join("push-record.json");
    ok(&bootstrap(&[
        "mirror",
        "--from",
        &dir_url,
        &format!("docker://{}/site", dst.host()),
        "--plain-http",
        &dst.host(),
        "--record",
        rec_path.to_str().unwrap(),
    ]));
    for img in &pushed {
        let remote = format!(
            "docker://{}/site/src/{}:{}",
            dst.host(),
            img.repo.trim_start_matches("src/"),
            img.tag
        );
        let raw = skopeo_ok(&[
            s("inspect"),
            s("--raw"),
            s("--tls-verify=false"),
            remote.clone(),
        ]);
        assert_eq!(raw_digest(&raw), img.digest, "{remote}");
    }
    let back = work.path().join("back");
    let single = pushed.iter().find(|p| p.platforms.len() <= 1).unwrap();
    skopeo_ok(&[
        s("copy"),
        s("--src-tls-verify=false"),
        format!(
            "docker://{}/site/{}:{}",
            dst.host(),
            single.repo,
            single.tag
        ),
        format!("oci:{}:x", back.display()),
    ]);
    let rec = json(&rec_path);
    assert_eq!(
        rec["totals"]["images"].as_u64().unwrap() as usize,
        pushed.len()
    );
    let out = ok(&bootstrap(&[
        "verify",
        "--record",
        rec_path.to_str().unwrap(),
        &format!("docker://{}/site", dst.host()),
        "--plain-http",
        &dst.host(),
    ]));
    assert!(out.contains("OK"), "{out}");
}

#[test]
fn mirror_to_mirror_sends_the_shared_base_layer_once() {
    let src = Registry::plain();
    let dst = Registry::plain();
    let set = SyntheticSet::standard(2);
    let pushed = set.push_to(&src, "src");
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(work.path(), &pushed, &src.host(), &["multi"]);
    let rec_path = work.path().join("rec.json");
    let out = ok(&bootstrap(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        &format!("docker://{}/m", dst.host()),
        "--plain-http",
        &src.host(),
        "--plain-http",
        &dst.host(),
        "--record",
        rec_path.to_str().unwrap(),
        "--output",
        "json",
    ]));
    let summary: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(
        summary["blobsMounted"].as_u64().unwrap() >= 2,
        "{summary:#}"
    );
    // The cluster's mirror configuration sits beside the record: every source namespace
    // mirrored by tag maps to its place under the prefix.
    let crs = work.path().join("cluster-resources");
    assert_eq!(summary["clusterResources"], crs.display().to_string());
    let itms = fs_err::read_to_string(crs.join("itms-oc-mirror.yaml")).unwrap();
    assert!(itms.contains("kind: ImageTagMirrorSet"), "{itms}");
    for ns in ["src/base", "src/tools", "src/data"] {
        let line = format!(
            "- source: {}/{ns}\n    mirrors:\n    - {}/m/{ns}\n",
            src.host(),
            dst.host()
        );
        assert!(itms.contains(&line), "{ns} not mapped:\n{itms}");
    }
    let base = set.shared_base_digest();
    assert_eq!(
        dst.blob_uploads_completed(&base),
        1,
        "the shared base layer was uploaded more than once"
    );
    for img in &pushed {
        let raw = skopeo_ok(&[
            s("inspect"),
            s("--raw"),
            s("--tls-verify=false"),
            format!("docker://{}/m/{}:{}", dst.host(), img.repo, img.tag),
        ]);
        assert_eq!(raw_digest(&raw), img.digest);
    }
    // A rerun has nothing to send.
    let out = ok(&bootstrap(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        &format!("docker://{}/m", dst.host()),
        "--plain-http",
        &src.host(),
        "--plain-http",
        &dst.host(),
        "--record",
        rec_path.to_str().unwrap(),
        "--output",
        "json",
    ]));
    let summary: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(summary["bytesTransferred"], 0, "{summary:#}");
    assert_eq!(dst.blob_uploads_completed(&base), 1);
}

#[test]
fn multi_arch_index_filtered_to_amd64() {
    let src = Registry::plain();
    let dst = Registry::plain();
    let pushed = SyntheticSet::standard(3)
        .without_large()
        .push_to(&src, "src");
    let multi = pushed
        .iter()
        .find(|p| p.platforms.len() > 1)
        .expect("a multi-arch image")
        .clone();
    let work = tempfile::tempdir().unwrap();
    // The image's own `platforms` filters it (mirror.platform.architectures filters releases
    // only, as oc-mirror v2 applies it).
    let cfg = work.path().join("isc.yaml");
    fs_err::write(
        &cfg,
        format!(
            "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  additionalImages:\n  - name: {}/{}:{}\n    platforms:\n    - os: linux\n      architecture: amd64\n",
            src.host(),
            multi.repo,
            multi.tag
        ),
    )
    .unwrap();
    let dir = work.path().join("mirror");
    ok(&bootstrap(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        &format!("file://{}", dir.display()),
        "--plain-http",
        &src.host(),
    ]));
    let rec = json(&dir.join("mirror-record.json"));
    let img = image_in(&rec, &multi.repo);
    assert_eq!(img["platforms"], serde_json::json!(["linux/amd64"]));
    assert_eq!(img["platformsDropped"], serde_json::json!(["linux/arm64"]));
    assert_eq!(
        img["digest"],
        multi.digest.as_str(),
        "the index is kept verbatim on disk"
    );
    // skopeo pulls the amd64 image out of the layout.
    let oci = format!(
        "oci:{}:{}/{}:{}",
        dir.display(),
        src.host(),
        multi.repo,
        multi.tag
    );
    skopeo_ok(&[
        s("copy"),
        s("--override-arch"),
        s("amd64"),
        s("--override-os"),
        s("linux"),
        oci.clone(),
        format!("oci:{}:amd64", work.path().join("pulled").display()),
    ]);
    assert!(ok(&bootstrap(&[
        "verify",
        &format!("file://{}", dir.display())
    ]))
    .contains("OK"));

    // Distribution 2.8 refuses a sparse index: the error names the fix; nothing is tagged.
    let dest = format!("docker://{}/m", dst.host());
    let err = failed(&bootstrap(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        &dest,
        "--plain-http",
        &src.host(),
        "--plain-http",
        &dst.host(),
        "--record",
        work.path().join("r1.json").to_str().unwrap(),
    ]));
    assert!(err.contains("--rewrite-filtered-indexes"), "{err}");
    let rec_path = work.path().join("r2.json");
    ok(&bootstrap(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        &dest,
        "--plain-http",
        &src.host(),
        "--plain-http",
        &dst.host(),
        "--rewrite-filtered-indexes",
        "--record",
        rec_path.to_str().unwrap(),
    ]));
    let remote = format!("docker://{}/m/{}:{}", dst.host(), multi.repo, multi.tag);
    skopeo_ok(&[
        s("copy"),
        s("--src-tls-verify=false"),
        s("--override-arch"),
        s("amd64"),
        s("--override-os"),
        s("linux"),
        remote.clone(),
        format!("oci:{}:amd64", work.path().join("pulled2").display()),
    ]);
    let rec = json(&rec_path);
    let img = image_in(&rec, &multi.repo);
    assert_eq!(img["sourceDigest"], multi.digest.as_str());
    assert_eq!(img["platforms"], serde_json::json!(["linux/amd64"]));
    let raw = skopeo_ok(&[s("inspect"), s("--raw"), s("--tls-verify=false"), remote]);
    assert_eq!(raw_digest(&raw), img["digest"].as_str().unwrap());
    assert!(!raw.contains("arm64"));
}

/// Over TLS the registries offer HTTP/2; blob bodies must still go over HTTP/1.1 connections of
/// their own (issue 17: one multiplexed connection made the whole mirror slower than skopeo),
/// so no connection that carried a blob body carried a manifest. Read from the registries' own
/// logs: `http.request.remoteaddr` is one client port per connection.
fn blob_bodies_went_over_connections_of_their_own(src: &Registry, dst: &Registry) {
    use std::collections::BTreeSet;
    let conns = |reqs: &[support::reglog::LoggedRequest],
                 f: &dyn Fn(&support::reglog::LoggedRequest) -> bool|
     -> BTreeSet<String> {
        reqs.iter()
            .filter(|r| f(r))
            .map(|r| r.remote.clone())
            .collect()
    };
    let pulled = src.requests();
    let blob_gets = conns(&pulled, &|r| {
        r.method == "GET" && r.path.contains("/blobs/")
    });
    let manifest_gets = conns(&pulled, &|r| r.path.contains("/manifests/"));
    assert!(!blob_gets.is_empty() && !manifest_gets.is_empty());
    assert!(
        blob_gets.is_disjoint(&manifest_gets),
        "blob GETs shared a connection with manifest requests: {blob_gets:?} / {manifest_gets:?}"
    );
    let pushed = dst.requests();
    let uploads = conns(&pushed, &|r| {
        // A committing PUT with no body (after PATCHes) may share the small requests' one.
        r.method == "PATCH"
            || (r.method == "PUT"
                && r.query_value("digest").is_some()
                && r.content_type.as_deref() == Some("application/octet-stream"))
    });
    let manifest_puts = conns(&pushed, &|r| {
        r.method == "PUT" && r.path.contains("/manifests/")
    });
    assert!(!uploads.is_empty() && !manifest_puts.is_empty());
    assert!(
        uploads.is_disjoint(&manifest_puts),
        "blob uploads shared a connection with manifest pushes: {uploads:?} / {manifest_puts:?}"
    );
}

fn auth_mirror(src: &Registry, dst: &Registry, seed: u64) {
    let pushed = SyntheticSet::standard(seed)
        .without_large()
        .push_to(src, "src");
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(work.path(), &pushed[..2], &src.host(), &["amd64"]);
    let auth = work.path().join("auth.json");
    support::write_merged_authfile(&auth, &[src, dst]);
    let ca = work.path().join("ca.pem");
    support::write_ca_bundle(&ca, &[src, dst]);
    let dest = format!("docker://{}/m", dst.host());
    let rec = work.path().join("rec.json");
    let args = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "mirror",
            "-c",
            cfg.to_str().unwrap(),
            &dest,
            "--record",
            rec.to_str().unwrap(),
        ]
        .iter()
        .map(|x| x.to_string())
        .collect();
        v.extend(extra.iter().map(|x| x.to_string()));
        v
    };
    let run = |a: Vec<String>| {
        let refs: Vec<&str> = a.iter().map(String::as_str).collect();
        bootstrap(&refs)
    };
    // Without the CA, TLS is refused and the message names the fix.
    let err = failed(&run(args(&["--authfile", auth.to_str().unwrap()])));
    assert!(err.contains("--ca-bundle"), "{err}");
    assert!(err.contains(&dst.host()), "{err}");
    // With it, the mirror works and digests are kept.
    ok(&run(args(&[
        "--authfile",
        auth.to_str().unwrap(),
        "--ca-bundle",
        ca.to_str().unwrap(),
    ])));
    blob_bodies_went_over_connections_of_their_own(src, dst);
    for img in &pushed[..2] {
        let mut a = vec![s("inspect"), s("--raw")];
        a.extend(dst.skopeo_tls_args());
        a.push(format!(
            "docker://{}/m/{}:{}",
            dst.host(),
            img.repo,
            img.tag
        ));
        assert_eq!(raw_digest(&skopeo_ok(&a)), img.digest);
    }
    // A wrong password is refused, naming the registry; the password is never printed.
    let bad = work.path().join("bad.json");
    support::write_authfile_with(
        &bad,
        &[(dst.host(), "tester", "wrong-password-123")],
        &[src],
    );
    let err = failed(&run(args(&[
        "--authfile",
        bad.to_str().unwrap(),
        "--ca-bundle",
        ca.to_str().unwrap(),
    ])));
    assert!(err.contains(&dst.host()) && err.contains("tester"), "{err}");
    assert!(!err.contains("wrong-password-123"));
    let rec_text = fs_err::read_to_string(&rec).unwrap();
    let (_, password) = dst.credentials().unwrap();
    assert!(!rec_text.contains(&password));
}

#[test]
fn basic_auth_over_tls() {
    let src = Registry::tls_basic("puller", "pull-secret-1");
    let dst = Registry::tls_basic("tester", "push-secret-1");
    auth_mirror(&src, &dst, 4);
}

#[test]
fn token_auth_over_tls() {
    let src = Registry::tls_token("puller", "pull-secret-2");
    let dst = Registry::tls_token("tester", "push-secret-2");
    auth_mirror(&src, &dst, 5);
    assert!(dst.tokens_issued() > 0);
}

#[test]
fn a_flipped_byte_fails_sha256sum_and_verify_naming_the_blob() {
    let src = Registry::plain();
    let pushed = SyntheticSet::standard(6)
        .without_large()
        .push_to(&src, "src");
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(work.path(), &pushed[..1], &src.host(), &["amd64"]);
    let dir = work.path().join("mirror");
    ok(&bootstrap(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        &format!("file://{}", dir.display()),
        "--plain-http",
        &src.host(),
    ]));
    let path = support::run::largest_layout_blob(&dir);
    let blob = path.file_name().unwrap().to_string_lossy().into_owned();
    let mut bytes = fs_err::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    fs_err::write(&path, bytes).unwrap();

    let sums = Command::new("sha256sum")
        .args(["-c", "--quiet", "SHA256SUMS"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(!sums.status.success());
    assert!(String::from_utf8_lossy(&sums.stdout).contains(&blob));
    let out = bootstrap(&["verify", &format!("file://{}", dir.display())]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("corrupt") && text.contains(&blob), "{text}");
}

#[test]
fn bad_input_fails_cleanly_and_leaves_nothing() {
    let src = Registry::plain();
    let dst = Registry::plain();
    let pushed = SyntheticSet::standard(7)
        .without_large()
        .push_to(&src, "src");
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("mirror");
    let dir_url = format!("file://{}", dir.display());

    // A config that is refused before anything is fetched: the error, and nothing on disk.
    let refused = |name: &str, text: &str| -> String {
        let cfg = work.path().join(name);
        fs_err::write(&cfg, text).unwrap();
        let err = failed(&bootstrap(&[
            "mirror",
            "-c",
            cfg.to_str().unwrap(),
            &dir_url,
        ]));
        assert!(!dir.exists(), "a refused config left {}", dir.display());
        err
    };
    let header = "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n";

    // An unknown key: file, line and column, and the key.
    let err = refused(
        "unknown.yaml",
        &format!("{header}  additionalImage:\n  - name: a.io/b:c\n"),
    );
    assert!(
        err.contains("unknown.yaml:4:3") && err.contains("additionalImage"),
        "{err}"
    );

    // A malformed reference: the field path and what is wrong.
    let err = refused(
        "malformed.yaml",
        &format!("{header}  additionalImages:\n  - name: a.io/B:c\n"),
    );
    assert!(
        err.contains("additionalImages[0]") && err.contains("lowercase"),
        "{err}"
    );

    // An image that does not exist: named, nothing written.
    let mut missing = pushed[0].clone();
    missing.tag = "no-such-tag".into();
    let cfg = write_config(
        work.path(),
        &[pushed[0].clone(), missing],
        &src.host(),
        &["amd64"],
    );
    let err = failed(&bootstrap(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        &dir_url,
        "--plain-http",
        &src.host(),
    ]));
    assert!(
        err.contains("no-such-tag") && err.contains("not found"),
        "{err}"
    );
    assert!(!dir.exists());
    let err = failed(&bootstrap(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        &format!("docker://{}/m", dst.host()),
        "--plain-http",
        &src.host(),
        "--plain-http",
        &dst.host(),
        "--record",
        work.path().join("r.json").to_str().unwrap(),
    ]));
    assert!(err.contains("no-such-tag"), "{err}");
    assert_eq!(
        dst.requests_matching("PUT", "/manifests/"),
        0,
        "no manifest may be pushed"
    );
    assert!(!work.path().join("r.json").exists());

    // An unreachable registry: named, quickly.
    let cfg = write_config(work.path(), &pushed[..1], "127.0.0.1:9", &["amd64"]);
    let err = failed(&bootstrap(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        &dir_url,
        "--plain-http",
        "127.0.0.1:9",
    ]));
    assert!(
        err.contains("127.0.0.1:9") && err.contains("connection refused"),
        "{err}"
    );
    assert!(!dir.exists());
    let err = failed(&bootstrap(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        "docker://127.0.0.1:9/x",
    ]));
    assert!(err.contains("127.0.0.1:9"), "{err}");
}

/// `--dry-run` resolves everything and lists each image with its size and the totals, as text
/// and as a JSON plan file, and creates nothing: no disk mirror, no upload at a registry. After
/// a real mirror the same dry run finds every image already there and nothing to send.
#[test]
fn a_dry_run_plans_everything_and_copies_nothing() {
    let src = Registry::plain();
    let dst = Registry::plain();
    let pushed = SyntheticSet::standard(5).push_to(&src, "src");
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(work.path(), &pushed, &src.host(), &["multi"]);
    let dir = work.path().join("mirror");
    let (src_host, dst_host) = (src.host(), dst.host());
    let run = |dest: &str, extra: &[&str]| {
        let mut args = vec!["mirror", "-c", cfg.to_str().unwrap(), dest, "--dry-run"];
        args.extend_from_slice(&["--plain-http", &src_host, "--plain-http", &dst_host]);
        args.extend_from_slice(extra);
        let out = support::run::command(&args)
            .current_dir(work.path())
            .output()
            .unwrap();
        ok(&out)
    };
    let plan: serde_json::Value = serde_json::from_str(&run(
        &format!("file://{}", dir.display()),
        &["--output", "json"],
    ))
    .unwrap();
    assert!(!dir.exists(), "a dry run created {}", dir.display());
    assert_eq!(plan["images"].as_array().unwrap().len(), pushed.len());
    let unique: std::collections::BTreeMap<&str, u64> = pushed
        .iter()
        .flat_map(|p| p.blobs.iter().map(|(d, s)| (d.as_str(), *s)))
        .collect();
    assert_eq!(plan["blobs"].as_u64().unwrap() as usize, unique.len());
    assert_eq!(
        plan["bytesTotal"].as_u64().unwrap(),
        unique.values().sum::<u64>()
    );
    assert_eq!(plan["bytesToSend"], plan["bytesTotal"]);
    let files: Vec<_> = fs_err::read_dir(work.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("mirror-dry-run-")
        })
        .collect();
    assert_eq!(files.len(), 1, "one plan file");

    let dest = format!("docker://{}/m", dst.host());
    let text = run(&dest, &[]);
    assert!(text.contains("nothing was copied"), "{text}");
    assert_eq!(dst.requests_matching("POST", "/blobs/uploads/"), 0);
    ok(&bootstrap(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        &dest,
        "--plain-http",
        &src.host(),
        "--plain-http",
        &dst.host(),
        "--record",
        work.path().join("rec.json").to_str().unwrap(),
        "--status-file",
        work.path().join("status.json").to_str().unwrap(),
    ]));
    let again: serde_json::Value =
        serde_json::from_str(&run(&dest, &["--output", "json"])).unwrap();
    assert_eq!(again["bytesToSend"], 0, "{again:#}");
    assert!(again["images"]
        .as_array()
        .unwrap()
        .iter()
        .all(|i| i["alreadyMirrored"] == true));
}

/// `mirror.blockedImages` patterns (regular expressions, matched anywhere in the reference as
/// oc-mirror matches them) leave images out on purpose: not fetched, not in the record, listed
/// as blocked with the pattern in the status file, and the run still succeeds.
#[test]
fn blocked_images_are_left_out_and_said_so() {
    let src = Registry::plain();
    let pushed = SyntheticSet::standard(6)
        .without_large()
        .push_to(&src, "src");
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(work.path(), &pushed, &src.host(), &["multi"]);
    let mut text = fs_err::read_to_string(&cfg).unwrap();
    text.push_str("  blockedImages:\n  - name: '/base/app-b:'\n  - name: multi-docker\n");
    fs_err::write(&cfg, text).unwrap();
    let dir = work.path().join("mirror");
    ok(&bootstrap(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        &format!("file://{}", dir.display()),
        "--plain-http",
        &src.host(),
    ]));
    let rec = json(&dir.join("mirror-record.json"));
    let sources: Vec<&str> = rec["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["source"].as_str().unwrap())
        .collect();
    assert_eq!(sources.len(), pushed.len() - 2, "{sources:?}");
    assert!(!sources
        .iter()
        .any(|s| s.contains("app-b") || s.contains("multi-docker")));
    let status = json(&dir.join("mirror-status.json"));
    assert_eq!(status["blocked"], 2, "{status:#}");
    assert_eq!(status["failed"], 0);
    let blocked: Vec<&serde_json::Value> = status["images"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["status"] == "blocked")
        .collect();
    assert!(blocked[0]["error"]
        .as_str()
        .unwrap()
        .contains("mirror.blockedImages[0] (/base/app-b:)"));
    // Nothing of a blocked image was fetched.
    let app_b = pushed.iter().find(|p| p.repo.ends_with("app-b")).unwrap();
    assert_eq!(
        src.requests_matching("GET", &format!("{}/manifests", app_b.repo)),
        0
    );
}

/// Regression: a plain-HTTP registry reached over TLS (no `--plain-http`) was retried like a
/// network fault, about 22 s of backoff, before saying so. It is not a fault that passes: the
/// first answer says to pass `--plain-http`, and nothing is tried again.
#[test]
fn a_plain_http_registry_reached_over_tls_fails_at_once_with_the_fix() {
    let dst = Registry::plain();
    let work = tempfile::tempdir().unwrap();
    let isc = crate::support::run::one_image_config(work.path());
    let o = Command::new(env!("CARGO_BIN_EXE_bootstrap"))
        .args([
            "mirror",
            "-c",
            isc.to_str().unwrap(),
            &format!("docker://{}", dst.host()),
        ])
        .env("BOOTSTRAP_LOG", "warn")
        .output()
        .unwrap();
    let err = failed(&o);
    assert!(
        err.contains(&format!(
            "does not speak TLS: if it serves plain HTTP, pass --plain-http {}",
            dst.host()
        )),
        "{err}"
    );
    assert!(!err.contains("trying again"), "retried: {err}");
}

/// Regression: images named by digest only were pushed untagged, and registries that collect
/// untagged manifests may delete what a cluster pulls by digest. They are pushed under
/// oc-mirror v2's `sha256-<hex>` tag, mirror to mirror and disk to mirror; the record names the
/// tag, verify checks it, and a rerun finds the images in place by that tag.
#[test]
fn digest_only_images_are_pushed_under_their_digest_tag() {
    let src = Registry::plain();
    let dst = Registry::plain();
    let set = SyntheticSet::standard(7).without_large();
    let pushed = set.push_to(&src, "src");
    let by_digest: Vec<_> = ["base/app-a", "tools/multi"]
        .iter()
        .map(|r| support::images::find(&pushed, r))
        .collect();
    let work = tempfile::tempdir().unwrap();
    let mut text = String::from(
        "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  platform:\n    architectures: [multi]\n  additionalImages:\n",
    );
    for img in &by_digest {
        text.push_str(&format!(
            "  - name: {}/{}@{}\n",
            src.host(),
            img.repo,
            img.digest
        ));
    }
    let cfg = work.path().join("isc.yaml");
    fs_err::write(&cfg, text).unwrap();
    let check = |dest: &str, rec_path: &std::path::Path, prefix: &str| {
        let rec = json(rec_path);
        for img in &by_digest {
            let tag = format!("sha256-{}", img.digest.trim_start_matches("sha256:"));
            let repo = format!("{prefix}/{}", img.repo);
            assert_eq!(dst.tags(&repo), [tag.as_str()], "{repo}");
            let recorded = image_in(&rec, &img.repo);
            assert_eq!(recorded["tag"], tag.as_str(), "{recorded:#}");
            assert_eq!(
                recorded["destination"],
                format!("{}/{repo}:{tag}@{}", dst.host(), img.digest).as_str()
            );
        }
        let out = ok(&bootstrap(&[
            "verify",
            "--record",
            rec_path.to_str().unwrap(),
            dest,
            "--plain-http",
            &dst.host(),
        ]));
        assert!(out.contains("OK"), "{out}");
    };
    let dst_host = dst.host();
    let mirror = |args: &[&str]| -> serde_json::Value {
        let mut all = vec!["mirror", "--output", "json", "--plain-http", &dst_host];
        all.extend_from_slice(args);
        serde_json::from_str(&ok(&bootstrap(&all))).unwrap()
    };

    // Mirror to mirror, then a rerun that finds both images under their tags.
    let dest = format!("docker://{}/m", dst.host());
    let rec_path = work.path().join("rec.json");
    let m2m = [
        "-c",
        cfg.to_str().unwrap(),
        &dest,
        "--plain-http",
        &src.host(),
        "--record",
        rec_path.to_str().unwrap(),
    ];
    mirror(&m2m);
    check(&dest, &rec_path, "m");
    let uploads = dst.requests_matching("PUT", "/manifests/");
    let rerun = mirror(&m2m);
    assert_eq!(rerun["bytesTransferred"], 0, "{rerun:#}");
    assert_eq!(
        dst.requests_matching("PUT", "/manifests/"),
        uploads,
        "a rerun pushed manifests again"
    );
    check(&dest, &rec_path, "m");

    // Disk to mirror: the disk mirror keeps its index naming; the push tags as above.
    let disk = format!("file://{}", work.path().join("disk").display());
    ok(&bootstrap(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        &disk,
        "--plain-http",
        &src.host(),
    ]));
    let dest = format!("docker://{}/site", dst.host());
    let rec_path = work.path().join("site-rec.json");
    mirror(&[
        "--from",
        &disk,
        &dest,
        "--record",
        rec_path.to_str().unwrap(),
    ]);
    check(&dest, &rec_path, "site");
}

/// A large blob is pulled from the source as several `Range` requests at once (each on its own
/// connection) and arrives whole, to a registry and to disk; the registry's own log shows the
/// ranged GETs; with one connection per registry allowed it is not split. (Pieces are made
/// small here with the hidden `--range-piece` and `--range-from`.)
#[test]
fn a_large_blob_is_pulled_in_parallel_ranges_and_arrives_whole() {
    let src = Registry::plain();
    let dst = Registry::plain();
    let pushed = SyntheticSet::standard(23)
        .with_large_layer_size(6 * 1024 * 1024 + 123)
        .push_to(&src, "src");
    let large = support::images::find(&pushed, "data/large");
    let (big, big_size) = large
        .blobs
        .iter()
        .max_by_key(|(_, size)| *size)
        .cloned()
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let src_host = src.host();
    let cfg = write_config(
        work.path(),
        std::slice::from_ref(large),
        &src_host,
        &["amd64"],
    );
    let split = [
        "--range-parts",
        "3",
        "--range-piece",
        "1048576",
        "--range-from",
        "0",
    ];
    let ranged_gets = || {
        src.requests()
            .into_iter()
            .filter(|r| r.method == "GET" && r.path.ends_with(&big) && r.status == 206)
            .count()
    };
    let mut to_registry = vec![
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        "--plain-http",
        &src_host,
        "--plain-http",
    ];
    let dst_host = dst.host();
    let dest = format!("docker://{dst_host}/m");
    to_registry.extend([dst_host.as_str(), dest.as_str()]);
    to_registry.extend(split);
    ok(&bootstrap(&to_registry));
    // One ranged GET per 1 MiB piece.
    let pieces = big_size.div_ceil(1024 * 1024) as usize;
    assert_eq!(
        ranged_gets(),
        pieces,
        "ranged GETs of the {big_size}-byte blob"
    );
    // Over more than one connection.
    let conns: std::collections::BTreeSet<String> = src
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path.ends_with(&big) && r.status == 206)
        .map(|r| r.remote)
        .collect();
    assert!(conns.len() > 1, "{conns:?}");
    let copy = format!("docker://{dst_host}/m/{}:{}", large.repo, large.tag);
    let raw = skopeo_ok(&[s("inspect"), s("--raw"), s("--tls-verify=false"), copy]);
    assert_eq!(raw_digest(&raw), large.digest);
    assert_eq!(dst.blob_uploads_completed(&big), 1);

    let dir = work.path().join("disk");
    let mut to_disk = vec![
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        "--plain-http",
        &src_host,
    ];
    let file = format!("file://{}", dir.display());
    to_disk.push(&file);
    to_disk.extend(split);
    ok(&bootstrap(&to_disk));
    assert_eq!(ranged_gets(), 2 * pieces);
    let blob = dir
        .join("blobs/sha256")
        .join(big.trim_start_matches("sha256:"));
    assert_eq!(fs_err::metadata(&blob).unwrap().len(), big_size);
    ok(&bootstrap(&["verify", &file]));
    // Nothing of the spool is left in the working directory.
    let spool = dir.join(".bootstrap/spool");
    let left = fs_err::read_dir(&spool).map(|d| d.count()).unwrap_or(0);
    assert_eq!(left, 0, "files left in {}", spool.display());

    // One connection per registry allowed: the blob is read as one stream, not split.
    let dir = work.path().join("disk-one");
    let file = format!("file://{}", dir.display());
    let mut one = vec![
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        "--plain-http",
        &src_host,
        "--max-connections-per-registry",
        "1",
        &file,
    ];
    one.extend(split);
    ok(&bootstrap(&one));
    assert_eq!(
        ranged_gets(),
        2 * pieces,
        "split with one connection allowed"
    );
    ok(&bootstrap(&["verify", &file]));
}
