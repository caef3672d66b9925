//! A mirror survives what a 2 TB transfer meets: a full disk, a killed process, a link that
//! resets, truncates, corrupts, stalls or answers 5xx and 429. Each test ends in a byte-exact
//! mirror or a clear error, never a corrupt blob committed, and a rerun continues where the
//! failed run stopped.

mod support;

use std::path::Path;
use std::process::Command;
use support::images::SyntheticSet;
use support::run::{assert_blobs_intact, bootstrap, failed, json, ok, write_config};
use support::Registry;

const MIB: u64 = 1024 * 1024;

/// A tmpfs mounted for one test (as root, which CI is), unmounted on drop: a disk that can be
/// filled, then grown with `remount` without losing what is on it.
struct Tmpfs {
    path: std::path::PathBuf,
}

impl Tmpfs {
    fn mount(path: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(path).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(path)
            .output()
            .expect("running mount");
        assert!(
            out.status.success(),
            "mounting a tmpfs at {} needs root (CI runs the suite as root): {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        Tmpfs {
            path: path.to_path_buf(),
        }
    }

    fn grow(&self, size: &str) {
        let out = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
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
