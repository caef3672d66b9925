//! Hostile inputs that used to hang a run: a disk mirror whose blob paths are not regular files
//! (a FIFO named like a blob, a symlink to `/dev/zero`). `verify` and `mirror --from` must end,
//! with an error naming the file and what it is, within seconds; every run here has a deadline
//! and is killed past it, so a regression fails instead of hanging the suite.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, Instant};
use support::images::SyntheticSet;
use support::run::{bootstrap, command, json, ok, write_config};
use support::Registry;

/// How long a refused run may take; a hang is killed here and fails the test.
const DEADLINE: Duration = Duration::from_secs(30);

/// Runs `bootstrap` with a deadline; returns its status and stderr, or panics (after killing
/// it) when it is still running at the deadline.
fn run_with_deadline(args: &[&str], scratch: &Path) -> (ExitStatus, String) {
    let out = fs_err::File::create(scratch.join("stdout")).unwrap();
    let err = fs_err::File::create(scratch.join("stderr")).unwrap();
    let mut child = command(args)
        .stdout(out.into_file())
        .stderr(err.into_file())
        .spawn()
        .expect("running bootstrap");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("bootstrap {args:?} still running after {DEADLINE:?}: it hangs");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = fs_err::read_to_string(scratch.join("stderr")).unwrap();
    let stdout = fs_err::read_to_string(scratch.join("stdout")).unwrap();
    (status, format!("{stdout}{stderr}"))
}

/// A disk mirror of one small image; returns the work dir and the layout's path.
fn disk_mirror(src: &Registry) -> (tempfile::TempDir, PathBuf) {
    let pushed = SyntheticSet::standard(11)
        .without_large()
        .push_to(src, "src");
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
    (work, dir)
}

/// The largest blob of the layout (a layer): `mirror --from` streams it.
fn largest_blob(dir: &Path) -> PathBuf {
    let rec = json(&dir.join("mirror-record.json"));
    let hex = rec["blobs"]
        .as_array()
        .unwrap()
        .iter()
        .max_by_key(|b| b["size"].as_u64())
        .unwrap()["digest"]
        .as_str()
        .unwrap()
        .trim_start_matches("sha256:")
        .to_string();
    dir.join("blobs/sha256").join(hex)
}

/// The first top manifest of the layout's index: `mirror --from` reads it whole.
fn top_manifest(dir: &Path) -> PathBuf {
    let index = json(&dir.join("index.json"));
    let hex = index["manifests"][0]["digest"]
        .as_str()
        .unwrap()
        .trim_start_matches("sha256:")
        .to_string();
    dir.join("blobs/sha256").join(hex)
}

fn make_fifo(path: &Path) {
    fs_err::remove_file(path).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
}

fn make_dev_zero_link(path: &Path) {
    fs_err::remove_file(path).unwrap();
    std::os::unix::fs::symlink("/dev/zero", path).unwrap();
}

/// `verify` and `mirror --from` of `dir` both end with an error that names `blob` and says
/// `what` it is.
fn both_refuse(dir: &Path, blob: &Path, what: &str, dst: &Registry) {
    let scratch = tempfile::tempdir().unwrap();
    let dir_url = format!("file://{}", dir.display());
    let name = blob.file_name().unwrap().to_string_lossy().into_owned();

    let (status, text) = run_with_deadline(&["verify", &dir_url], scratch.path());
    assert!(
        !status.success(),
        "verify passed a layout with {what}:\n{text}"
    );
    assert!(
        text.contains(&name) && text.contains(what) && text.contains("not a regular file"),
        "verify does not say that {name} is {what}:\n{text}"
    );

    let (status, text) = run_with_deadline(
        &[
            "mirror",
            "--from",
            &dir_url,
            &format!("docker://{}/site", dst.host()),
            "--plain-http",
            &dst.host(),
            "--retries",
            "1",
        ],
        scratch.path(),
    );
    assert!(
        !status.success(),
        "mirror --from pushed a layout with {what}:\n{text}"
    );
    assert!(
        text.contains(&name) && text.contains(what) && text.contains("not a regular file"),
        "mirror --from does not say that {name} is {what}:\n{text}"
    );
}

/// Regression: a FIFO named like a layer blob blocked `verify` and `mirror --from` for ever.
#[test]
fn a_fifo_named_like_a_blob_is_refused_within_seconds() {
    let src = Registry::plain();
    let dst = Registry::plain();
    let (_work, dir) = disk_mirror(&src);
    let blob = largest_blob(&dir);
    make_fifo(&blob);
    both_refuse(&dir, &blob, "a FIFO", &dst);
}

/// Regression: a manifest blob replaced by a symlink to `/dev/zero` fed `verify` and
/// `mirror --from` an endless read.
#[test]
fn a_blob_symlinked_to_dev_zero_is_refused_within_seconds() {
    let src = Registry::plain();
    let dst = Registry::plain();
    let (_work, dir) = disk_mirror(&src);
    let blob = top_manifest(&dir);
    make_dev_zero_link(&blob);
    both_refuse(&dir, &blob, "a symlink to /dev/zero", &dst);
}
