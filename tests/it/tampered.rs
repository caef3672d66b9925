//! A disk mirror is checked against its mirror record before `mirror --from` pushes anything
//! (issue 11 item 2). Each tampering a careful attacker would try on a layout carried across
//! the air gap (an annotation moving an image into another repository, a manifest rewritten to
//! reference another blob, an image dropped, two entries with one name; `index.json` and
//! `SHA256SUMS` rewritten to match each time) is refused, naming the directory, the image and
//! what differs, and the destination registry receives nothing. A layout without a record is
//! refused unless `--accept-unrecorded` says to push it, and then the report says so.

use crate::support;

use bootstrap::oci::retry::RETRY_DELAY_ENV;
use serde_json::Value;
use std::path::{Path, PathBuf};
use support::faultproxy::{Fault, FaultProxy, FaultRule};
use support::images::{PushedImage, SyntheticSet};
use support::run::{bootstrap, command, failed, json, ok, write_config};
use support::Registry;

/// A disk mirror of three single-platform images (`base/app-a`, `-b`, `-c`) written by
/// `bootstrap mirror`; the work dir (keep it alive), the layout, and the images.
fn disk_mirror(seed: u64) -> (tempfile::TempDir, PathBuf, Vec<PushedImage>) {
    let src = Registry::plain();
    let pushed = SyntheticSet::standard(seed)
        .without_large()
        .push_to(&src, "src");
    let images = pushed[..3].to_vec();
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(work.path(), &images, &src.host(), &["amd64"]);
    let dir = work.path().join("mirror");
    ok(&bootstrap(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        &format!("file://{}", dir.display()),
        "--plain-http",
        &src.host(),
    ]));
    (work, dir, images)
}

/// `bootstrap [--output json] mirror --from file://DIR docker://DST/site` (plus `extra`).
fn push(dir: &Path, dst: &Registry, json_output: bool, extra: &[&str]) -> std::process::Output {
    let from = format!("file://{}", dir.display());
    let to = format!("docker://{}/site", dst.host());
    let host = dst.host();
    let mut args: Vec<&str> = Vec::new();
    if json_output {
        args.extend(["--output", "json"]);
    }
    args.extend(["mirror", "--from", &from, &to, "--plain-http", &host]);
    args.extend(extra);
    bootstrap(&args)
}

/// The destination received nothing: no upload, no manifest, no mount (only reads, such as
/// the ping).
fn assert_nothing_pushed(dst: &Registry) {
    let writes: Vec<String> = dst
        .requests()
        .iter()
        .filter(|r| !matches!(r.method.as_str(), "GET" | "HEAD"))
        .map(|r| format!("{} {}", r.method, r.uri))
        .collect();
    assert!(writes.is_empty(), "the destination received: {writes:#?}");
}

/// The layout's `index.json`, parsed.
fn index(dir: &Path) -> Value {
    json(&dir.join("index.json"))
}

/// Writes `index.json` and rewrites `SHA256SUMS` to match the layout as it now is, exactly
/// as bootstrap writes it: the checksums vouch for the tampered layout.
fn write_index_and_sums(dir: &Path, index: &Value) {
    fs_err::write(
        dir.join("index.json"),
        serde_json::to_vec_pretty(index).unwrap(),
    )
    .unwrap();
    bootstrap::openshift::record::write_sums(dir).unwrap();
}

/// The index entry named `name`.
fn entry_mut<'a>(index: &'a mut Value, name: &str) -> &'a mut Value {
    index["manifests"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|e| e["annotations"]["org.opencontainers.image.ref.name"] == name)
        .unwrap_or_else(|| panic!("no index entry {name}"))
}

/// The source reference the layout names an image by (`host/src/base/app-a:1.0`).
fn name_of(dir: &Path, img: &PushedImage) -> String {
    let index = index(dir);
    index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            e["annotations"]["org.opencontainers.image.ref.name"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .find(|n| n.ends_with(&format!("/{}:{}", img.repo, img.tag)))
        .unwrap()
}

/// A refusal names the layout, the image and the way out, and nothing reached `dst`.
fn assert_refused(
    o: &std::process::Output,
    dir: &Path,
    image: &str,
    differs: &str,
    dst: &Registry,
) {
    let err = failed(o);
    for needle in [
        &dir.display().to_string(),
        image,
        differs,
        "nothing was pushed",
    ] {
        assert!(
            err.contains(needle),
            "the refusal does not say '{needle}':\n{err}"
        );
    }
    assert!(
        err.contains("copy the disk mirror again") && err.contains("--accept-unrecorded"),
        "the refusal gives no fix:\n{err}"
    );
    assert_nothing_pushed(dst);
}

/// Regression: an index annotation edited to move an image into another repository (with
/// `SHA256SUMS` rewritten to match) was pushed there; `verify` passed it too.
#[test]
fn an_image_moved_to_another_repository_by_its_annotation_is_refused() {
    let (_work, dir, images) = disk_mirror(61);
    let name = name_of(&dir, &images[0]);
    let mut idx = index(&dir);
    entry_mut(&mut idx, &name)["annotations"]["dev.bootstrap.mirror.destination"] =
        "openshift/release:1.0".into();
    write_index_and_sums(&dir, &idx);
    let dst = Registry::plain();
    let o = push(&dir, &dst, false, &[]);
    assert_refused(&o, &dir, &name, "is placed at openshift/release:1.0", &dst);

    let o = bootstrap(&["verify", &format!("file://{}", dir.display())]);
    let report = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(!o.status.success(), "verify passed it:\n{report}");
    assert!(
        report.contains("is placed at openshift/release:1.0"),
        "{report}"
    );
}

/// Regression: a manifest rewritten to reference another blob in place of its layer (its new
/// bytes stored under their digest, `index.json` and `SHA256SUMS` rewritten to point at it)
/// was pushed: every blob matched its name, so nothing looked wrong.
#[test]
fn a_layer_swapped_in_a_rewritten_manifest_is_refused() {
    let (_work, dir, images) = disk_mirror(62);
    let name = name_of(&dir, &images[0]);
    let mut idx = index(&dir);
    let entry = entry_mut(&mut idx, &name);
    let old = entry["digest"].as_str().unwrap().to_string();
    let blob = |d: &str| {
        dir.join("blobs/sha256")
            .join(d.trim_start_matches("sha256:"))
    };
    let mut manifest: Value = serde_json::from_slice(&fs_err::read(blob(&old)).unwrap()).unwrap();
    // Another image's own layer, present in the layout, takes the place of the last layer.
    let (other, size) = images[1]
        .blobs
        .iter()
        .find(|(d, _)| !images[0].blobs.iter().any(|(o, _)| o == d))
        .cloned()
        .unwrap();
    let layers = manifest["layers"].as_array_mut().unwrap();
    let last = layers.last_mut().unwrap();
    last["digest"] = other.clone().into();
    last["size"] = size.into();
    let bytes = serde_json::to_vec(&manifest).unwrap();
    let new = bootstrap::oci::digest::Digest::of(&bytes).to_string();
    fs_err::write(blob(&new), &bytes).unwrap();
    entry["digest"] = new.clone().into();
    entry["size"] = bytes.len().into();
    write_index_and_sums(&dir, &idx);
    let dst = Registry::plain();
    let o = push(&dir, &dst, false, &[]);
    let differs = format!("points to {new}, the record says {old}");
    assert_refused(&o, &dir, &name, &differs, &dst);
}

/// Regression: an image dropped from `index.json` (and `SHA256SUMS`) went unnoticed: the rest
/// was pushed as if the set were whole.
#[test]
fn an_image_dropped_from_the_index_is_refused() {
    let (_work, dir, images) = disk_mirror(63);
    let name = name_of(&dir, &images[2]);
    let mut idx = index(&dir);
    idx["manifests"]
        .as_array_mut()
        .unwrap()
        .retain(|e| e["annotations"]["org.opencontainers.image.ref.name"] != name.as_str());
    write_index_and_sums(&dir, &idx);
    let dst = Registry::plain();
    let o = push(&dir, &dst, false, &[]);
    assert_refused(&o, &dir, &name, "no entry for", &dst);
}

/// Regression: two index entries with one name (the second pointing at another image's
/// manifest) were both pushed to the same tag: whichever went last won it.
#[test]
fn two_index_entries_with_one_name_are_refused() {
    let (_work, dir, images) = disk_mirror(64);
    let name = name_of(&dir, &images[0]);
    let other = name_of(&dir, &images[1]);
    let mut idx = index(&dir);
    let mut twin = entry_mut(&mut idx, &other).clone();
    twin["annotations"]["org.opencontainers.image.ref.name"] = name.clone().into();
    idx["manifests"].as_array_mut().unwrap().push(twin);
    write_index_and_sums(&dir, &idx);
    let dst = Registry::plain();
    let o = push(&dir, &dst, false, &[]);
    assert_refused(&o, &dir, &name, "has 2 entries", &dst);
}

/// A layout without a mirror record (another tool's, or one whose record was removed) is
/// refused, naming the directory and the flag; it used to be pushed unchecked.
#[test]
fn a_layout_without_a_mirror_record_is_refused() {
    let (_work, dir, _) = disk_mirror(65);
    fs_err::remove_file(dir.join("mirror-record.json")).unwrap();
    bootstrap::openshift::record::write_sums(&dir).unwrap();
    let dst = Registry::plain();
    let err = failed(&push(&dir, &dst, false, &[]));
    let dir_text = dir.display().to_string();
    for needle in [
        dir_text.as_str(),
        "has no mirror record (mirror-record.json)",
        "--accept-unrecorded",
        "nothing was pushed",
    ] {
        assert!(
            err.contains(needle),
            "the refusal does not say '{needle}':\n{err}"
        );
    }
    assert_nothing_pushed(&dst);
}

/// `--accept-unrecorded` pushes a layout without a record, and the text report, the JSON
/// report and the status file all say the record's check was skipped and why.
#[test]
fn accept_unrecorded_pushes_a_layout_without_a_record_and_says_so() {
    let (work, dir, images) = disk_mirror(66);
    fs_err::remove_file(dir.join("mirror-record.json")).unwrap();
    let dst = Registry::plain();
    let status = work.path().join("status.json");
    let record = work.path().join("push-record.json");
    let files = [
        "--accept-unrecorded",
        "--status-file",
        status.to_str().unwrap(),
        "--record",
        record.to_str().unwrap(),
    ];
    let out: Value = serde_json::from_str(&ok(&push(&dir, &dst, true, &files))).unwrap();
    assert_eq!(
        out["layoutCheck"]["result"], "acceptedUnrecorded",
        "{out:#}"
    );
    assert!(
        out["layoutCheck"]["reason"]
            .as_str()
            .unwrap()
            .contains("has no mirror record"),
        "{out:#}"
    );
    assert_eq!(out["images"], 3, "{out:#}");
    assert_eq!(json(&status)["layoutCheck"]["result"], "acceptedUnrecorded");
    assert!(dst
        .skopeo_inspect(&format!("site/{}:{}", images[0].repo, images[0].tag), true)
        .is_ok());

    let text = ok(&push(&dir, &dst, false, &files));
    assert!(
        text.contains("NOT checked against a mirror record (--accept-unrecorded)"),
        "{text}"
    );
}

/// An untampered disk mirror still pushes, and the report and status file say it matched
/// its record.
#[test]
fn an_untampered_disk_mirror_pushes_and_reports_its_record_matched() {
    let (work, dir, images) = disk_mirror(67);
    let dst = Registry::plain();
    let status = work.path().join("status.json");
    let record = work.path().join("push-record.json");
    let files = [
        "--status-file",
        status.to_str().unwrap(),
        "--record",
        record.to_str().unwrap(),
    ];
    let out: Value = serde_json::from_str(&ok(&push(&dir, &dst, true, &files))).unwrap();
    assert_eq!(out["layoutCheck"]["result"], "matchesRecord", "{out:#}");
    assert_eq!(out["images"], 3, "{out:#}");
    assert_eq!(json(&status)["layoutCheck"]["result"], "matchesRecord");
    for img in &images {
        let pushed = dst
            .skopeo_inspect(&format!("site/{}:{}", img.repo, img.tag), true)
            .unwrap();
        assert_eq!(
            bootstrap::oci::digest::Digest::of(pushed.as_bytes()).to_string(),
            img.digest
        );
    }
}

/// A disk mirror finished with `--continue-on-error` (its record lists the blobs of the
/// failed image as `unfinishedBlobs`) matches its record: the images it completed push.
#[test]
fn a_continue_on_error_disk_mirror_pushes_what_it_completed() {
    let src = Registry::plain();
    let pushed = SyntheticSet::standard(68)
        .without_large()
        .push_to(&src, "src");
    let images = pushed[..3].to_vec();
    let broken = &images[2];
    let (blob, _) = broken
        .blobs
        .iter()
        .find(|(d, _)| {
            !images[..2]
                .iter()
                .any(|p| p.blobs.iter().any(|(b, _)| b == d))
        })
        .cloned()
        .unwrap();
    let proxy = FaultProxy::start(&src.host()).unwrap();
    proxy.add_rule(
        FaultRule::new(Fault::Status {
            status: 502,
            retry_after: None,
        })
        .method("GET")
        .path(&format!("/blobs/{blob}"))
        .always(),
    );
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(work.path(), &images, &proxy.host(), &["amd64"]);
    let dir = work.path().join("mirror");
    failed(
        &command(&[
            "mirror",
            "-c",
            cfg.to_str().unwrap(),
            &format!("file://{}", dir.display()),
            "--plain-http",
            &proxy.host(),
            "--retries",
            "2",
            "--continue-on-error",
        ])
        .env(RETRY_DELAY_ENV, "0")
        .output()
        .unwrap(),
    );
    let rec = json(&dir.join("mirror-record.json"));
    assert!(
        !rec["unfinishedBlobs"].as_array().unwrap().is_empty(),
        "{rec:#}"
    );
    let dst = Registry::plain();
    let record = work.path().join("push-record.json");
    let out: Value = serde_json::from_str(&ok(&push(
        &dir,
        &dst,
        true,
        &["--record", record.to_str().unwrap()],
    )))
    .unwrap();
    assert_eq!(out["layoutCheck"]["result"], "matchesRecord", "{out:#}");
    assert_eq!(out["images"], 2, "{out:#}");
}

/// `--accept-unrecorded` also pushes a layout that differs from its record (one the user
/// trusts), and the report says how it differs, so the audit trail shows the check was
/// overridden and why.
#[test]
fn accept_unrecorded_pushes_a_layout_that_differs_from_its_record_and_says_how() {
    let (_work, dir, images) = disk_mirror(69);
    let name = name_of(&dir, &images[2]);
    let mut idx = index(&dir);
    idx["manifests"]
        .as_array_mut()
        .unwrap()
        .retain(|e| e["annotations"]["org.opencontainers.image.ref.name"] != name.as_str());
    write_index_and_sums(&dir, &idx);
    let dst = Registry::plain();
    let out: Value =
        serde_json::from_str(&ok(&push(&dir, &dst, true, &["--accept-unrecorded"]))).unwrap();
    assert_eq!(
        out["layoutCheck"]["result"], "acceptedUnrecorded",
        "{out:#}"
    );
    let reason = out["layoutCheck"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("differs from its mirror record") && reason.contains(&name),
        "{reason}"
    );
    assert_eq!(out["images"], 2, "{out:#}");
}
