//! The command line as a user meets it: help text, version, and bad input that must fail fast
//! with a specific message and leave nothing behind.

use std::process::{Command, Output};

fn bootstrap(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bootstrap"))
        .args(args)
        .output()
        .expect("running bootstrap")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn version_and_help_document_every_flag() {
    let v = bootstrap(&["--version"]);
    assert!(v.status.success());
    assert!(String::from_utf8_lossy(&v.stdout).contains(env!("CARGO_PKG_VERSION")));
    let help = bootstrap(&["mirror", "--help"]);
    let text = String::from_utf8_lossy(&help.stdout);
    for flag in [
        "--config",
        "--from",
        "--authfile",
        "--ca-bundle",
        "--plain-http",
        "--insecure-skip-tls-verify",
        "--max-concurrent-blobs",
        "--record",
        "--rewrite-filtered-indexes",
        "--output",
    ] {
        assert!(text.contains(flag), "mirror --help lacks {flag}:\n{text}");
    }
    let help = bootstrap(&["verify", "--help"]);
    assert!(String::from_utf8_lossy(&help.stdout).contains("--record"));
}

#[test]
fn destination_without_scheme_names_the_two_forms() {
    let dir = tempfile::tempdir().unwrap();
    let out = bootstrap(&[
        "mirror",
        "--from",
        "file:///nonexistent",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("must start with file://"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn missing_layout_is_named() {
    let out = bootstrap(&[
        "mirror",
        "--from",
        "file:///nonexistent/dir",
        "docker://127.0.0.1:1",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("/nonexistent/dir"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn verify_of_a_registry_needs_a_record() {
    let out = bootstrap(&["verify", "docker://127.0.0.1:1/x"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("--record"), "{}", stderr(&out));
}

#[test]
fn usage_errors_exit_2() {
    let out = bootstrap(&["mirror"]);
    assert_eq!(out.status.code(), Some(2));
}

/// The production mirror set in mirrorsets/ is valid oc-mirror v2 input that this version
/// mirrors whole: it parses strictly (an unknown or misspelled key would fail with
/// file:line:col) and nothing in it is refused; the run gets as far as the update graph.
#[test]
fn the_production_mirror_set_is_accepted_whole() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/mirrorsets/openshift-ai-gpu.yaml"
    );
    let dir = tempfile::tempdir().unwrap();
    let graph = dir.path().join("no-graph.json");
    let graph_url = format!("file://{}", graph.display());
    let dest = format!("file://{}", dir.path().join("m").display());
    let o = bootstrap(&[
        "mirror",
        "--dry-run",
        "-c",
        path,
        "--graph-url",
        &graph_url,
        &dest,
    ]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(!err.contains("not supported"), "{err}");
    assert!(
        err.contains("reading the update graph (--graph-url)"),
        "{err}"
    );
    assert!(err.contains("no-graph.json"), "{err}");
}
