//! End-to-end mirrors against real Distribution registries (Debian's `docker-registry`) with
//! skopeo as the interop peer: mirror to disk, disk to mirror, mirror to mirror; digests kept,
//! shared blobs sent once, architecture filtering, Basic and token auth over TLS, audit files,
//! and bad input that fails cleanly.
//!
//! Here the three directions with filtering; `tls.rs` auth and connections over TLS,
//! `refused.rs` damage and bad input, `planned.rs` what a dry run plans and what blocked
//! images leave out, `transport.rs` how content travels and lands (ranged pulls, digest tags).

mod corpus;
mod planned;
mod refused;
mod tls;
mod transport;

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
