//! What must fail, and fail cleanly: a flipped byte in a disk mirror, named by blob; bad input,
//! refused before anything is written.

use super::*;

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

/// Issue 30 point 5: every check of the file that needs no network runs before the first
/// request, all problems at once, each at its line and column: a malformed digest in
/// additionalImages, a Helm local chart that does not exist, one that is a directory, an
/// `oci://` catalog whose directory is no OCI image layout. The
/// destination (a listener that counts connections) is never contacted.
#[test]
fn every_check_of_the_file_runs_before_any_request() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let work = tempfile::tempdir().unwrap();
    let chart_dir = work.path().join("chart-dir");
    fs_err::create_dir_all(&chart_dir).unwrap();
    let cfg = work.path().join("isc.yaml");
    fs_err::write(
        &cfg,
        format!(
            "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  additionalImages:\n  - name: registry.example.com/a/b@sha256:1234\n  - name: registry.example.com/a/c:v1\n  helm:\n    local:\n    - name: missing\n      path: {}\n    - name: unpacked\n      path: {}\n  operators:\n  - catalog: oci://{}\n",
            work.path().join("no-such-chart.tgz").display(),
            chart_dir.display(),
            chart_dir.display()
        ),
    )
    .unwrap();
    let err = failed(&bootstrap(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        &format!("docker://127.0.0.1:{port}/m"),
        "--plain-http",
        &format!("127.0.0.1:{port}"),
    ]));
    let origin = cfg.display().to_string();
    assert!(
        err.contains(&format!("{origin}:5:11: mirror.additionalImages[0].name")),
        "{err}"
    );
    assert!(
        err.contains(&format!("{origin}:10:13: mirror.helm.local[0].path"))
            && err.contains("No such file or directory"),
        "{err}"
    );
    assert!(
        err.contains(&format!("{origin}:12:13: mirror.helm.local[1].path"))
            && err.contains("helm package"),
        "{err}"
    );
    // An `oci://` catalog naming a directory that is no OCI image layout.
    assert!(
        err.contains(&format!("{origin}:14:"))
            && err.contains("mirror.operators[0].catalog")
            && err.contains("no OCI image layout there (no oci-layout, no index.json)"),
        "{err}"
    );
    assert!(
        listener.accept().is_err(),
        "the destination was contacted before the file's checks"
    );
}
