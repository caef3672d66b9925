//! A mirror survives what a 2 TB transfer meets: a full disk, a killed process, a link that
//! resets, truncates, corrupts, stalls or answers 5xx and 429. Each test ends in a byte-exact
//! mirror or a clear error, never a corrupt blob committed, and a rerun continues where the
//! failed run stopped.

use crate::support;

use bootstrap::oci::retry::RETRY_DELAY_ENV;
use std::path::Path;
use std::process::Command;
use support::faultproxy::{Fault, FaultProxy, FaultRule};
use support::images::{PushedImage, SyntheticSet};
use support::run::{assert_blobs_intact, bootstrap, command, failed, json, ok, write_config};
use support::Registry;

const MIB: u64 = 1024 * 1024;

/// A tmpfs mounted for one test (as root, which CI is), unmounted on drop: a disk that can be
/// filled, then grown with `remount` without losing what is on it.
struct Tmpfs {
    path: std::path::PathBuf,
}

impl Tmpfs {
    fn mount(path: &Path, size: &str) -> Tmpfs {
        fs_err::create_dir_all(path).unwrap();
        let options = format!("size={size},mode=1777");
        let out = privileged(&["mount", "-t", "tmpfs", "-o", &options, "tmpfs"], path);
        assert!(
            out.status.success(),
            "mounting a tmpfs at {} needs root or passwordless sudo (CI has them): {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        Tmpfs {
            path: path.to_path_buf(),
        }
    }

    fn grow(&self, size: &str) {
        let options = format!("remount,size={size}");
        let out = privileged(&["mount", "-o", &options], &self.path);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Runs `args` followed by `path` as root: directly when we are root, else through `sudo -n`.
fn privileged(args: &[&str], path: &Path) -> std::process::Output {
    let direct = Command::new(args[0]).args(&args[1..]).arg(path).output();
    match direct {
        Ok(out) if out.status.success() => out,
        _ => Command::new("sudo")
            .arg("-n")
            .args(args)
            .arg(path)
            .output()
            .expect("running sudo"),
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = privileged(&["umount", "-l"], &self.path);
    }
}

/// Disk full during a mirror to disk: the preflight refuses first; forced past it, the run
/// fails naming the full disk and the way on, commits no corrupt blob, and a rerun once the
/// disk has room completes from where it stopped and verifies.
#[test]
fn a_full_disk_is_refused_then_fails_cleanly_and_a_rerun_with_space_completes() {
    let src = Registry::plain();
    let set = SyntheticSet::standard(31).with_large_layer_size(80 * MIB);
    let pushed = set.push_to(&src, "src");
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(work.path(), &pushed, &src.host(), &["amd64"]);
    let disk = Tmpfs::mount(&work.path().join("disk"), "48m");
    let dir = disk.path.join("mirror");
    let dir_url = format!("file://{}", dir.display());
    let host = src.host();
    let mirror = |extra: &[&str]| {
        let mut args = vec![
            "mirror",
            "-c",
            cfg.to_str().unwrap(),
            &dir_url,
            "--plain-http",
            &host,
        ];
        args.extend_from_slice(extra);
        bootstrap(&args)
    };

    let refused = failed(&mirror(&[]));
    assert!(refused.contains("not enough space"), "{refused}");
    assert!(refused.contains("--ignore-free-space"), "{refused}");
    assert!(!dir.exists(), "a refused run left {}", dir.display());

    let full = failed(&mirror(&["--ignore-free-space"]));
    assert!(full.contains("disk is full"), "{full}");
    assert!(full.contains("run the same command again"), "{full}");
    assert_blobs_intact(&dir);

    disk.grow("256m");
    let out = ok(&mirror(&["--output", "json"]));
    let summary: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(
        summary["bytesResumed"].as_u64().unwrap() > 0,
        "the rerun should continue the partial blob: {summary:#}"
    );
    assert_blobs_intact(&dir);
    ok(&bootstrap(&["verify", &dir_url]));
    let status = json(&dir.join("mirror-status.json"));
    assert_eq!(status["failed"], 0, "{status:#}");
    assert_eq!(status["ok"].as_u64().unwrap() as usize, pushed.len());
}

/// The largest blob of a pushed set: `(digest, size)`.
fn largest_blob(pushed: &[PushedImage]) -> (String, u64) {
    pushed
        .iter()
        .flat_map(|p| p.blobs.iter().cloned())
        .max_by_key(|(_, size)| *size)
        .unwrap()
}

/// Every blob of a pushed set but the largest, sorted by digest.
fn small_blobs(pushed: &[PushedImage]) -> Vec<String> {
    let (large, _) = largest_blob(pushed);
    let mut out: Vec<String> = pushed
        .iter()
        .flat_map(|p| p.blobs.iter().map(|(d, _)| d.clone()))
        .filter(|d| *d != large)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// A rule for GETs of one blob.
fn blob_get(digest: &str, fault: Fault) -> FaultRule {
    FaultRule::new(fault)
        .method("GET")
        .path(&format!("/blobs/{digest}"))
}

/// Mirror to disk through a proxy in front of the source that resets, truncates, corrupts,
/// stalls and refuses (500, 429 with Retry-After): every fault is retried, resumed where
/// possible, and the mirror ends byte-exact; no corrupt blob is ever committed.
#[test]
fn faults_on_the_way_in_are_survived_and_the_disk_mirror_is_byte_exact() {
    let src = Registry::plain();
    let set = SyntheticSet::standard(41).with_large_layer_size(48 * MIB);
    let pushed = set.push_to(&src, "src");
    let proxy = FaultProxy::start(&src.host()).unwrap();
    let (large, _) = largest_blob(&pushed);
    let small = small_blobs(&pushed);
    // The large blob is cut, truncated, corrupted and stalled in turn; small ones are refused.
    proxy.add_rule(blob_get(&large, Fault::ResetResponseAfter(3 * MIB)));
    proxy.add_rule(blob_get(&large, Fault::TruncateResponseAfter(40 * MIB)));
    proxy.add_rule(blob_get(&large, Fault::FlipResponseByte(5 * MIB)));
    proxy.add_rule(blob_get(
        &large,
        Fault::StallResponseAfter {
            after: MIB,
            stall: std::time::Duration::from_secs(60),
        },
    ));
    proxy.add_rule(blob_get(
        &small[0],
        Fault::Status {
            status: 429,
            retry_after: Some(1),
        },
    ));
    proxy.add_rule(blob_get(
        &small[1],
        Fault::Status {
            status: 500,
            retry_after: None,
        },
    ));
    proxy.add_rule(
        FaultRule::new(Fault::Status {
            status: 503,
            retry_after: None,
        })
        .method("GET")
        .path("/manifests/"),
    );
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(work.path(), &pushed, &proxy.host(), &["amd64", "arm64"]);
    let dir = work.path().join("mirror");
    let dir_url = format!("file://{}", dir.display());
    let out = ok(&command(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        &dir_url,
        "--plain-http",
        &proxy.host(),
        "--stall-timeout",
        "2",
        "--output",
        "json",
    ])
    .env(RETRY_DELAY_ENV, "0")
    .output()
    .unwrap());
    let summary: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(proxy.faults_fired(), 7, "{:#?}", proxy.requests());
    // The large blob's four faults are retried per blob (the refusals per request).
    assert!(summary["retries"].as_u64().unwrap() >= 4, "{summary:#}");
    assert_blobs_intact(&dir);
    ok(&bootstrap(&["verify", &dir_url]));
    let sums = Command::new("sha256sum")
        .args(["-c", "--quiet", "SHA256SUMS"])
        .current_dir(&dir)
        .status()
        .unwrap();
    assert!(sums.success());
}

/// Mirror to mirror with a proxy on each side: corrupted and cut source bodies, cut uploads,
/// refused chunks, HEADs and manifest pushes. The destination ends with every image under
/// the source's digests, checked by `bootstrap verify` and by skopeo.
#[test]
fn faults_on_both_sides_of_a_mirror_to_mirror_are_survived() {
    let src = Registry::plain();
    let dst = Registry::plain();
    let set = SyntheticSet::standard(43).with_large_layer_size(20 * MIB);
    let pushed = set.push_to(&src, "src");
    let src_proxy = FaultProxy::start(&src.host()).unwrap();
    let dst_proxy = FaultProxy::start(&dst.host()).unwrap();
    let (large, _) = largest_blob(&pushed);
    // A byte flipped in the last chunk's source bytes: caught before the commit is sent.
    src_proxy.add_rule(blob_get(&large, Fault::FlipResponseByte(19 * MIB)));
    src_proxy.add_rule(blob_get(&large, Fault::ResetResponseAfter(6 * MIB)));
    dst_proxy.add_rule(
        FaultRule::new(Fault::ResetRequestAfter(MIB))
            .method("PATCH")
            .skip(2),
    );
    dst_proxy.add_rule(
        FaultRule::new(Fault::Status {
            status: 503,
            retry_after: None,
        })
        .method("PATCH"),
    );
    dst_proxy.add_rule(
        FaultRule::new(Fault::Status {
            status: 429,
            retry_after: Some(1),
        })
        .method("HEAD")
        .path("/blobs/"),
    );
    dst_proxy.add_rule(
        FaultRule::new(Fault::Status {
            status: 500,
            retry_after: None,
        })
        .method("PUT")
        .path("/manifests/"),
    );
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(work.path(), &pushed, &src_proxy.host(), &["amd64", "arm64"]);
    let record = work.path().join("record.json");
    let dest = format!("docker://{}/mirror", dst_proxy.host());
    ok(&command(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        &dest,
        "--plain-http",
        &src_proxy.host(),
        "--plain-http",
        &dst_proxy.host(),
        "--chunk-size",
        "4",
        "--workdir",
        work.path().join("state").to_str().unwrap(),
        "--record",
        record.to_str().unwrap(),
    ])
    .env(RETRY_DELAY_ENV, "0")
    .output()
    .unwrap());
    assert_eq!(src_proxy.faults_fired(), 2, "{:#?}", src_proxy.requests());
    assert_eq!(dst_proxy.faults_fired(), 4, "{:#?}", dst_proxy.requests());
    ok(&bootstrap(&[
        "verify",
        "--record",
        record.to_str().unwrap(),
        &format!("docker://{}/mirror", dst.host()),
        "--plain-http",
        &dst.host(),
    ]));
    for img in &pushed {
        let digest = dst
            .skopeo_inspect(&format!("mirror/{}", img.tagged()), true)
            .map(|raw| bootstrap::oci::digest::Digest::of(raw.as_bytes()).to_string())
            .unwrap();
        assert_eq!(digest, img.digest, "{}", img.repo);
    }
}

/// A fault that does not pass: with --continue-on-error every other image is mirrored, the
/// status file names the failed one and why (after how many tries), the record lists only
/// what was mirrored, and the exit code is non-zero.
#[test]
fn a_lasting_failure_is_data_not_a_crash() {
    let src = Registry::plain();
    let set = SyntheticSet::standard(47).without_large();
    let pushed = set.push_to(&src, "src");
    let proxy = FaultProxy::start(&src.host()).unwrap();
    let broken = &pushed[1];
    let (blob, _) = broken
        .blobs
        .iter()
        .find(|(d, _)| {
            pushed
                .iter()
                .filter(|p| p.blobs.iter().any(|(b, _)| b == d))
                .count()
                == 1
        })
        .cloned()
        .unwrap();
    proxy.add_rule(
        blob_get(
            &blob,
            Fault::Status {
                status: 502,
                retry_after: None,
            },
        )
        .always(),
    );
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(work.path(), &pushed, &proxy.host(), &["amd64", "arm64"]);
    let dir = work.path().join("mirror");
    let o = command(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        &format!("file://{}", dir.display()),
        "--plain-http",
        &proxy.host(),
        "--retries",
        "3",
        "--continue-on-error",
    ])
    .env(RETRY_DELAY_ENV, "0")
    .output()
    .unwrap();
    let err = failed(&o);
    assert!(err.contains("gave up after 3 attempts"), "{err}");
    // One budget per blob: the request loop and the blob loop used to take --retries each,
    // so this dead blob cost 3 x 3 GETs.
    let gets = proxy.requests_matching("GET", &format!("/blobs/{blob}"));
    assert_eq!(gets.len(), 3, "{gets:#?}");
    let status = json(&dir.join("mirror-status.json"));
    assert_eq!(status["failed"], 1, "{status:#}");
    assert_eq!(status["ok"].as_u64().unwrap() as usize, pushed.len() - 1);
    let bad = status["images"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["status"] == "failed")
        .unwrap();
    assert!(
        bad["source"].as_str().unwrap().contains(&broken.repo),
        "{bad:#}"
    );
    assert!(bad["error"].as_str().unwrap().contains("502"), "{bad:#}");
    let record = json(&dir.join("mirror-record.json"));
    let recorded: Vec<&str> = record["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["source"].as_str().unwrap())
        .collect();
    assert_eq!(recorded.len(), pushed.len() - 1, "{recorded:?}");
    assert!(!recorded.iter().any(|s| s.contains(&broken.repo)));
    assert_blobs_intact(&dir);
}

const GIB: u64 = 1024 * MIB;

/// Waits until `done()` or panics after `limit` (the transfer under test never got there).
fn wait_for(what: &str, limit: std::time::Duration, mut done: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Bytes of `digest` a proxy relayed, in request bodies (pushes) or response bodies (pulls).
fn blob_bytes_through(proxy: &FaultProxy, digest: &str, push: bool) -> u64 {
    proxy
        .requests()
        .iter()
        .filter(|r| {
            if push {
                r.method == "PATCH" || r.method == "PUT"
            } else {
                r.method == "GET" && r.path.contains(digest)
            }
        })
        .map(|r| {
            if push {
                r.request_body_bytes
            } else {
                r.response_body_bytes
            }
        })
        .sum()
}

/// kill -9 in the middle of a 1 GiB blob, pulled to disk and then pushed from disk to a
/// registry: each rerun completes, verified, and what crossed the wire again is under 10% of
/// the blob (counted at the proxy, payload bytes only).
#[test]
fn kill_9_mid_blob_then_rerun_resends_under_a_tenth() {
    let src = Registry::plain();
    let dst = Registry::plain();
    let set = SyntheticSet::standard(53).with_large_layer_size(GIB);
    let pushed = set.push_to(&src, "src");
    let (large, size) = largest_blob(&pushed);
    let hex = large.trim_start_matches("sha256:").to_string();
    let work = tempfile::tempdir().unwrap();

    // Pull: registry -> disk, killed once a quarter of the blob is checkpointed.
    let src_proxy = FaultProxy::start(&src.host()).unwrap();
    let cfg = write_config(work.path(), &pushed, &src_proxy.host(), &["amd64", "arm64"]);
    let dir = work.path().join("mirror");
    let dir_url = format!("file://{}", dir.display());
    let pull_args = [
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        &dir_url,
        "--plain-http",
        &src_proxy.host(),
    ];
    let mut child = command(&pull_args).spawn().unwrap();
    let checkpoint = dir.join(".partial").join(format!("{hex}.checkpoint"));
    wait_for(
        "a checkpoint past 256 MiB",
        std::time::Duration::from_secs(300),
        || {
            fs_err::read(&checkpoint)
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                .and_then(|v| v["offset"].as_u64())
                .is_some_and(|o| o >= 256 * MIB)
        },
    );
    child.kill().unwrap();
    assert!(!child.wait().unwrap().success());
    assert!(!dir.join("blobs/sha256").join(&hex).exists());
    ok(&bootstrap(&pull_args));
    let pulled = blob_bytes_through(&src_proxy, &large, false);
    assert!(
        pulled.saturating_sub(size) < size / 10,
        "pull: {pulled} bytes crossed for a {size}-byte blob"
    );
    ok(&bootstrap(&["verify", &dir_url]));

    // Push: disk -> registry in 64 MiB chunks. Distribution 2.8 deletes an upload session
    // that received part of a chunk (its state no longer matches the session's size), so a
    // kill in the middle of a chunk that reached it restarts the blob; that path is covered by
    // the fault tests. Here the sixth chunk is held at the proxy (the link is down) when the
    // process is killed: the five acknowledged chunks must not move again.
    let dst_proxy = FaultProxy::start(&dst.host()).unwrap();
    dst_proxy.add_rule(
        FaultRule::new(Fault::Delay(std::time::Duration::from_secs(600)))
            .method("PATCH")
            .skip(5),
    );
    let dest = format!("docker://{}/site", dst_proxy.host());
    let state = work.path().join("state");
    let record = work.path().join("push-record.json");
    let push_args = [
        "mirror",
        "--from",
        &dir_url,
        &dest,
        "--plain-http",
        &dst_proxy.host(),
        "--workdir",
        state.to_str().unwrap(),
        "--record",
        record.to_str().unwrap(),
    ];
    let mut child = command(&push_args).spawn().unwrap();
    wait_for(
        "the sixth chunk held at the proxy",
        std::time::Duration::from_secs(300),
        || dst_proxy.faults_fired() >= 1,
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    child.kill().unwrap();
    assert!(!child.wait().unwrap().success());
    ok(&bootstrap(&push_args));
    let pushed_bytes = blob_bytes_through(&dst_proxy, &large, true);
    let small_total: u64 = {
        let mut seen = std::collections::BTreeMap::new();
        for (d, s) in pushed.iter().flat_map(|p| p.blobs.iter()) {
            if *d != large {
                seen.insert(d.clone(), *s);
            }
        }
        seen.values().sum()
    };
    let resent = pushed_bytes.saturating_sub(size + small_total);
    assert!(
        resent < size / 10,
        "push: {pushed_bytes} body bytes crossed for a {size}-byte blob and {small_total} bytes of small ones"
    );
    ok(&bootstrap(&[
        "verify",
        "--record",
        record.to_str().unwrap(),
        &format!("docker://{}/site", dst.host()),
        "--plain-http",
        &dst.host(),
    ]));
}

/// A working directory on a nearly full filesystem is refused before anything is pushed: an
/// upload journal that cannot be written would lose what a rerun continues.
#[test]
fn a_full_working_directory_is_refused_before_any_push() {
    let src = Registry::plain();
    let dst = Registry::plain();
    let pushed = SyntheticSet::standard(59)
        .without_large()
        .push_to(&src, "src");
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(work.path(), &pushed, &src.host(), &["amd64", "arm64"]);
    let disk = Tmpfs::mount(&work.path().join("small"), "4m");
    let err = failed(&bootstrap(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        &format!("docker://{}/m", dst.host()),
        "--plain-http",
        &src.host(),
        "--plain-http",
        &dst.host(),
        "--workdir",
        disk.path.join("state").to_str().unwrap(),
        "--status-file",
        work.path().join("status.json").to_str().unwrap(),
    ]));
    assert!(err.contains("working directory"), "{err}");
    assert!(err.contains("--workdir"), "{err}");
    assert_eq!(dst.requests_matching("POST", "/blobs/uploads/"), 0);
}

/// Regression: a source that sends corrupt bytes during a push (mirror to mirror) was reported
/// as a failure of the destination, quoting the upload URL with its `_state` token. The source
/// is named as the one at fault, and no upload URL is printed.
#[test]
fn a_corrupt_source_during_a_push_is_the_source_s_fault() {
    let src = Registry::plain();
    let dst = Registry::plain();
    let set = SyntheticSet::standard(48).without_large();
    let pushed = set.push_to(&src, "src");
    let proxy = FaultProxy::start(&src.host()).unwrap();
    let (blob, _) = largest_blob(&pushed);
    proxy.add_rule(blob_get(&blob, Fault::FlipResponseByte(10)).always());
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(work.path(), &pushed, &proxy.host(), &["amd64", "arm64"]);
    let o = command(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        &format!("docker://{}/mirror", dst.host()),
        "--plain-http",
        &proxy.host(),
        "--plain-http",
        &dst.host(),
        "--retries",
        "2",
        "--workdir",
        work.path().join("state").to_str().unwrap(),
        "--record",
        work.path().join("record.json").to_str().unwrap(),
    ])
    .env(RETRY_DELAY_ENV, "0")
    .output()
    .unwrap();
    let err = failed(&o);
    assert!(
        err.contains(&format!(
            "{} sent corrupt content for blob {blob}",
            proxy.host()
        )),
        "{err}"
    );
    assert!(!err.contains("_state"), "{err}");
    assert!(!err.contains("/blobs/uploads/"), "{err}");
}
