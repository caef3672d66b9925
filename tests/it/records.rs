//! Audit files are never lost: runs started together each leave their own record and status
//! file, and a disk mirror left partial by `--continue-on-error` passes its own `verify` while a
//! tampered one still fails.

use crate::support;

use bootstrap::oci::retry::RETRY_DELAY_ENV;
use std::path::Path;
use support::faultproxy::{Fault, FaultProxy, FaultRule};
use support::images::SyntheticSet;
use support::run::{bootstrap, command, failed, json, ok, write_config};
use support::Registry;

/// Files of `dir` whose name starts with `prefix`.
fn named(dir: &Path, prefix: &str) -> Vec<String> {
    let mut out: Vec<String> = fs_err::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .collect();
    out.sort();
    out
}

/// Regression: records and status files were named by the UTC second and replaced on write,
/// so runs started together left one record for all of them.
#[test]
fn ten_concurrent_runs_leave_ten_records() {
    let src = Registry::plain();
    let dst = Registry::plain();
    let set = SyntheticSet::standard(11).without_large();
    let pushed = set.push_to(&src, "src");
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(work.path(), &pushed[..1], &src.host(), &["amd64"]);
    let runs = work.path().join("runs");
    fs_err::create_dir(&runs).unwrap();
    let children: Vec<_> = (0..10)
        .map(|i| {
            let state = work.path().join(format!("state-{i}"));
            // One prefix each: Distribution itself trips over ten pushes of one blob to one
            // repository at once, which is not what this test is about.
            let dest = format!("docker://{}/m{i}", dst.host());
            command(&[
                "mirror",
                "-c",
                cfg.to_str().unwrap(),
                &dest,
                "--plain-http",
                &src.host(),
                "--plain-http",
                &dst.host(),
                "--workdir",
                state.to_str().unwrap(),
            ])
            .current_dir(&runs)
            .spawn()
            .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let records = named(&runs, "mirror-record-");
    let statuses = named(&runs, "mirror-status-");
    assert_eq!(records.len(), 10, "{records:?}");
    assert_eq!(statuses.len(), 10, "{statuses:?}");
    for r in &records {
        assert_eq!(json(&runs.join(r))["images"].as_array().unwrap().len(), 1);
    }
    let left: Vec<String> = named(&runs, ".");
    assert!(left.is_empty(), "temp files left: {left:?}");
}

/// Regression: `--record FILE` replaced an earlier run's record without a word. A rerun of
/// the same command is added to it (both runs listed); a file that is not a record of this
/// destination is refused before anything is contacted, naming the file and the fix, and kept.
#[test]
fn a_named_record_gains_the_rerun_and_is_never_replaced() {
    let src = Registry::plain();
    let dst = Registry::plain();
    let set = SyntheticSet::standard(12).without_large();
    let pushed = set.push_to(&src, "src");
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(work.path(), &pushed[..1], &src.host(), &["amd64"]);
    let rec = work.path().join("audit.json");
    let run = |prefix: &str, record: &Path| {
        bootstrap(&[
            "mirror",
            "-c",
            cfg.to_str().unwrap(),
            &format!("docker://{}/{prefix}", dst.host()),
            "--plain-http",
            &src.host(),
            "--plain-http",
            &dst.host(),
            "--record",
            record.to_str().unwrap(),
        ])
    };
    ok(&run("m", &rec));
    ok(&run("m", &rec));
    let record = json(&rec);
    assert_eq!(record["runs"].as_array().unwrap().len(), 2, "{record:#}");
    assert_eq!(record["images"].as_array().unwrap().len(), 1, "{record:#}");

    let before = fs_err::read_to_string(&rec).unwrap();
    let err = failed(&run("elsewhere", &rec));
    assert!(
        err.contains(&format!("--record {}", rec.display())),
        "{err}"
    );
    assert!(err.contains("records a mirror to"), "{err}");
    assert!(err.contains("name a new file"), "{err}");
    assert_eq!(fs_err::read_to_string(&rec).unwrap(), before);

    let other = work.path().join("notes.json");
    fs_err::write(&other, "an auditor's notes").unwrap();
    let err = failed(&run("m", &other));
    assert!(err.contains("is not a mirror record"), "{err}");
    assert!(err.contains("never replaced"), "{err}");
    assert_eq!(
        fs_err::read_to_string(&other).unwrap(),
        "an auditor's notes"
    );
}

/// Regression: a disk mirror finished with `--continue-on-error` failed its own `verify`:
/// the blobs that did arrive of the failed image sat in the layout, named by no record. They
/// are recorded as unfinished blobs; flipping a byte of one, or adding a stray blob, still
/// fails.
#[test]
fn a_partial_disk_mirror_passes_its_own_verify_and_tampering_fails() {
    let src = Registry::plain();
    let set = SyntheticSet::standard(47).without_large();
    let pushed = set.push_to(&src, "src");
    let proxy = FaultProxy::start(&src.host()).unwrap();
    let broken = &pushed[1];
    let unique = |d: &String| {
        pushed
            .iter()
            .filter(|p| p.blobs.iter().any(|(b, _)| b == d))
            .count()
            == 1
    };
    let (blob, _) = broken
        .blobs
        .iter()
        .find(|(d, _)| unique(d))
        .cloned()
        .unwrap();
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
    let cfg = write_config(work.path(), &pushed, &proxy.host(), &["amd64", "arm64"]);
    let dir = work.path().join("mirror");
    let dir_url = format!("file://{}", dir.display());
    failed(
        &command(&[
            "mirror",
            "-c",
            cfg.to_str().unwrap(),
            &dir_url,
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
    let out = ok(&bootstrap(&["verify", &dir_url]));
    assert!(out.contains("OK"), "{out}");
    let record = json(&dir.join("mirror-record.json"));
    let unfinished = record["unfinishedBlobs"].as_array().unwrap();
    assert!(!unfinished.is_empty(), "{record:#}");

    let victim = unfinished[0]["digest"].as_str().unwrap();
    let path = dir
        .join("blobs/sha256")
        .join(victim.trim_start_matches("sha256:"));
    let original = fs_err::read(&path).unwrap();
    let mut flipped = original.clone();
    flipped[0] ^= 1;
    fs_err::write(&path, &flipped).unwrap();
    let o = bootstrap(&["verify", &dir_url]);
    let report = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(!o.status.success(), "{report}");
    assert!(report.contains("content hashes to"), "{report}");
    fs_err::write(&path, &original).unwrap();
    ok(&bootstrap(&["verify", &dir_url]));

    let stray = b"not from any image";
    let hex = bootstrap::oci::digest::Digest::of(stray).hex().to_string();
    fs_err::write(dir.join("blobs/sha256").join(&hex), stray).unwrap();
    let o = bootstrap(&["verify", &dir_url]);
    let report = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(!o.status.success(), "{report}");
    assert!(report.contains(&hex), "{report}");
}
