//! Archive runs that stop before sealing: the same command continues a failed run (the large
//! layer from its last checkpoint); a changed plan starts over; damage in a staged chunk is
//! caught when sealing and fetched again.

use super::*;

/// A run that failed part-way (the large layer's download cut at 48 MiB, one attempt allowed)
/// leaves an unfinished archive, not a sealed one; the same command again fetches only what
/// did not arrive (the large layer from its last checkpoint) and seals it.
#[test]
fn a_failed_archive_run_is_continued_by_the_same_command() {
    use support::faultproxy::{Fault, FaultProxy, FaultRule};
    let src = Registry::plain();
    let set = SyntheticSet::standard(19).with_large_layer_size(80 * MIB);
    let pushed = set.push_to(&src, "src");
    let proxy = FaultProxy::start(&src.host()).unwrap();
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(work.path(), &pushed, &proxy.host(), &["amd64", "arm64"]);
    let (large, large_size) = pushed
        .iter()
        .flat_map(|p| p.blobs.iter())
        .max_by_key(|(_, s)| *s)
        .unwrap()
        .clone();
    proxy.add_rule(
        FaultRule::new(Fault::ResetResponseAfter(48 * MIB))
            .method("GET")
            .path(&large)
            .times(1),
    );
    let dir = work.path().join("media");
    let url = format!("archive://{}", dir.display());
    let run = |retries: &str| {
        bootstrap(&[
            "mirror",
            "-c",
            cfg.to_str().unwrap(),
            &url,
            "--archive-size",
            "8MiB",
            "--plain-http",
            &proxy.host(),
            "--retries",
            retries,
            "--continue-on-error",
            // One stream for the layer, so the cut lands 48 MiB into it, past a checkpoint (split
            // reads, each piece a request of its own, are tested in mirror/transport.rs and
            // resilience.rs).
            "--range-parts",
            "1",
        ])
    };
    let first = run("1");
    assert!(!first.status.success());
    let err = String::from_utf8_lossy(&first.stderr);
    assert!(err.contains("not sealed"), "{err}");
    assert!(!dir.join("manifest.json").exists());
    assert!(!dir.join("SHA256SUMS").exists());
    let count = |reqs: &[support::faultproxy::ProxiedRequest], d: &str| {
        reqs.iter().filter(|r| r.path.ends_with(d)).count()
    };
    let run1 = proxy.requests_matching("GET", "/blobs/");

    ok(&run("3"));
    // The rerun copied the large layer only: every other blob was already in its chunk. (Image
    // configs are read once per run to resolve the images; their copy is not repeated.)
    let run2 = proxy.requests_matching("GET", "/blobs/")[run1.len()..].to_vec();
    assert!(count(&run2, &large) >= 1);
    // ... and that from its last checkpoint (at least 32 MiB in), not from its first byte. (The
    // layer is a little over 80 MiB: its tar framing; the checkpoint falls on the first read
    // boundary past 32 MiB.)
    let resent: u64 = run2
        .iter()
        .filter(|r| r.path.ends_with(&large))
        .map(|r| r.response_body_bytes)
        .sum();
    assert!(
        resent <= large_size - 32 * MIB,
        "{resent} bytes of the {large_size}-byte large layer sent again"
    );
    for (d, _) in pushed.iter().flat_map(|p| p.blobs.iter()) {
        if *d != large {
            assert_eq!(
                count(&run2, d),
                count(&run1, d) - 1,
                "{d} was copied again: {run2:?}"
            );
        }
    }
    ok(&bootstrap(&["verify", &url]));
    assert!(!dir.join(".staging").exists());
}

/// An unsealed archive whose configuration then changes (the image that failed is dropped) is
/// planned anew: nothing of the old plan survives into the sealed archive. And a blob damaged
/// in a staged chunk after it was written is caught when sealing, and fetched again.
#[test]
fn a_changed_plan_starts_over_and_damage_before_sealing_is_caught() {
    let src = Registry::plain();
    let pushed = SyntheticSet::standard(20)
        .without_large()
        .push_to(&src, "src");
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("media");
    let url = format!("archive://{}", dir.display());
    let keep: Vec<PushedImage> = pushed
        .iter()
        .filter(|p| p.repo.ends_with("base/app-a"))
        .cloned()
        .collect();
    let cfg_all = write_config(work.path(), &pushed, &src.host(), &["amd64", "arm64"]);
    // One image no registry holds: the run carries on without it and leaves the archive
    // unsealed.
    let text = fs_err::read_to_string(&cfg_all).unwrap()
        + &format!("  - name: {}/src/nowhere/missing:1.0\n", src.host());
    fs_err::write(&cfg_all, text).unwrap();
    let run = |cfg: &Path| {
        bootstrap(&[
            "mirror",
            "-c",
            cfg.to_str().unwrap(),
            &url,
            "--plain-http",
            &src.host(),
            "--continue-on-error",
        ])
    };
    let first = run(&cfg_all);
    assert!(!first.status.success());
    assert!(!dir.join("manifest.json").exists());

    // Damage a blob already in place in a staged chunk.
    let chunk = dir.join(".staging/.chunks/mirror_000001.tar");
    {
        use std::io::{Read, Seek, SeekFrom, Write};
        let mut f = fs_err::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&chunk)
            .unwrap();
        let mut b = [0u8; 1];
        f.seek(SeekFrom::Start(512 + 7)).unwrap();
        f.read_exact(&mut b).unwrap();
        f.seek(SeekFrom::Start(512 + 7)).unwrap();
        f.write_all(&[b[0] ^ 1]).unwrap();
    }
    let cfg_one_dir = work.path().join("one");
    fs_err::create_dir_all(&cfg_one_dir).unwrap();
    let cfg_one = write_config(&cfg_one_dir, &keep, &src.host(), &["amd64", "arm64"]);
    // A different plan: started over, so the damaged old chunk is gone too.
    ok(&run(&cfg_one));
    ok(&bootstrap(&["verify", &url]));
    let m = manifest(&dir);
    let names: Vec<&str> = m["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        vec![format!("{}/{}:{}", src.host(), keep[0].repo, keep[0].tag)]
    );

    // Same plan, damage after the blobs were written: sealing reads the chunks back, refuses,
    // and the next run fetches what was damaged.
    let again = work.path().join("again");
    let url2 = format!("archive://{}", again.display());
    let cfg_fail = work.path().join("fail.yaml");
    fs_err::write(
        &cfg_fail,
        fs_err::read_to_string(&cfg_one).unwrap()
            + &format!("  - name: {}/src/nowhere/missing:1.0\n", src.host()),
    )
    .unwrap();
    let run2 = |cfg: &Path| {
        bootstrap(&[
            "mirror",
            "-c",
            cfg.to_str().unwrap(),
            &url2,
            "--plain-http",
            &src.host(),
            "--continue-on-error",
        ])
    };
    assert!(!run2(&cfg_fail).status.success());
    let staged = again.join(".staging/.chunks/mirror_000001.tar");
    {
        use std::io::{Read, Seek, SeekFrom, Write};
        let mut f = fs_err::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&staged)
            .unwrap();
        let mut b = [0u8; 1];
        f.seek(SeekFrom::Start(512 + 7)).unwrap();
        f.read_exact(&mut b).unwrap();
        f.seek(SeekFrom::Start(512 + 7)).unwrap();
        f.write_all(&[b[0] ^ 1]).unwrap();
    }
    // Without the missing image the plan is the same (it never resolved): the blobs stay in
    // place, and sealing reads them back, finds the damage and refuses; the next run fetches
    // the damaged blob again and seals.
    let out = run2(&cfg_one);
    let err = failed(&out);
    assert!(
        err.contains("not sealed") && err.contains("does not match"),
        "{err}"
    );
    ok(&run2(&cfg_one));
    ok(&bootstrap(&["verify", &url2]));
}
