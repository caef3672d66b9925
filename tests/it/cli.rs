//! The command line as a user meets it: help text, version, and bad input that must fail fast
//! with a specific message and leave nothing behind.

use crate::support::run::{bootstrap, failed, lab};
use bootstrap::cli::Cli;
use clap::CommandFactory;

/// Every subcommand of `cmd` and below, depth first, with its path (`bootstrap mirror`).
fn walk(cmd: &clap::Command, path: &str, out: &mut Vec<(String, clap::Command)>) {
    out.push((path.to_string(), cmd.clone()));
    for sub in cmd.get_subcommands() {
        walk(sub, &format!("{path} {}", sub.get_name()), out);
    }
}

/// The commands a user can run, from the same definitions the two binaries' `main` parse with:
/// the site's `bootstrap` and the lab's `bootstrap-lab`.
fn commands() -> Vec<(String, clap::Command)> {
    let mut out = Vec::new();
    walk(&Cli::command(), "bootstrap", &mut out);
    walk(
        &bootstrap_lab::cli::Cli::command(),
        "bootstrap-lab",
        &mut out,
    );
    out
}

/// Clap's own `--help` and `--version` are documented by clap.
fn is_builtin(arg: &clap::Arg) -> bool {
    matches!(arg.get_id().as_str(), "help" | "version")
}

/// `--help` is the manual in the air gap: a flag, an argument or a subcommand added without a doc
/// comment would show up there with no words, so each one must have them.
#[test]
fn every_flag_and_subcommand_has_help_text() {
    let mut missing = Vec::new();
    let commands = commands();
    for (path, cmd) in &commands {
        if cmd
            .get_about()
            .is_none_or(|a| a.to_string().trim().is_empty())
        {
            missing.push(format!("{path}: no about"));
        }
        for arg in cmd.get_arguments().filter(|a| !is_builtin(a)) {
            if arg
                .get_help()
                .is_none_or(|h| h.to_string().trim().is_empty())
            {
                missing.push(format!("{path}: argument {} has no help", arg.get_id()));
            }
        }
    }
    assert!(missing.is_empty(), "undocumented:\n{}", missing.join("\n"));
    // The walk reached the leaves, not just the top level.
    for leaf in [
        "bootstrap mirror",
        "bootstrap model pack",
        "bootstrap-lab seed",
    ] {
        assert!(
            commands.iter().any(|(p, _)| p == leaf),
            "the walk missed {leaf}"
        );
    }
}

/// The binary's own `--help` of every command lists every flag of that command, so the help
/// text checked above is what a user is shown; `--version` prints the package version.
#[test]
fn version_and_help_list_every_flag() {
    let v = bootstrap(&["--version"]);
    assert!(v.status.success());
    assert!(String::from_utf8_lossy(&v.stdout).contains(env!("CARGO_PKG_VERSION")));
    for (path, cmd) in commands() {
        let mut args: Vec<&str> = path.split(' ').skip(1).collect();
        args.push("--help");
        let help = if path.starts_with("bootstrap-lab") {
            lab(&args)
        } else {
            bootstrap(&args)
        };
        assert!(help.status.success(), "{path} --help failed");
        let text = String::from_utf8_lossy(&help.stdout);
        for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
            if let Some(long) = arg.get_long() {
                assert!(
                    text.contains(&format!("--{long}")),
                    "{path} --help lacks --{long}:\n{text}"
                );
            }
        }
    }
}

/// The site binary carries the site's commands only (issue 25): `bootstrap --help` names no
/// lab command and `bootstrap lab` is refused.
#[test]
fn the_site_binary_has_no_lab_commands() {
    let help = bootstrap(&["--help"]);
    assert!(help.status.success());
    let text = String::from_utf8_lossy(&help.stdout);
    for site in ["mirror", "install", "gitops", "release", "serve"] {
        assert!(
            text.contains(&format!("  {site} ")),
            "{site} missing:\n{text}"
        );
    }
    for lab_only in ["lab", "seed", "stand-in", "site-run"] {
        assert!(
            !text
                .lines()
                .any(|l| l.trim_start().starts_with(&format!("{lab_only} "))),
            "bootstrap --help lists {lab_only}:\n{text}"
        );
    }
    let err = failed(&bootstrap(&["lab", "seed", "--help"]));
    assert!(err.contains("unrecognized subcommand 'lab'"), "{err}");
    // What `bootstrap-lab --help` says is lab/tests/cli.rs's to check.
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
    let err = failed(&out);
    assert!(err.contains("must start with file://"), "{}", err);
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
    let err = failed(&out);
    assert!(err.contains("/nonexistent/dir"), "{}", err);
}

#[test]
fn verify_of_a_registry_needs_a_record() {
    let out = bootstrap(&["verify", "docker://127.0.0.1:1/x"]);
    assert_eq!(out.status.code(), Some(1));
    let err = failed(&out);
    assert!(err.contains("--record"), "{}", err);
}

/// Regression: log lines on a stderr that is not a terminal (CI logs, files) carried ANSI
/// colour codes.
#[test]
fn logs_carry_no_colour_codes_when_stderr_is_not_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let isc = crate::support::run::one_image_config(dir.path());
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bootstrap"))
        .args([
            "mirror",
            "-c",
            isc.to_str().unwrap(),
            "docker://127.0.0.1:1",
        ])
        .env(bootstrap::oci::retry::RETRY_DELAY_ENV, "0")
        .env("BOOTSTRAP_LOG", "warn")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("trying again"),
        "the ping's retry is logged: {err}"
    );
    assert!(!err.contains('\u{1b}'), "{err:?}");
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
    let err = failed(&o);
    assert!(!err.contains("not supported"), "{err}");
    assert!(
        err.contains("reading the update graph (--graph-url)"),
        "{err}"
    );
    assert!(err.contains("no-graph.json"), "{err}");
}

/// An ImageSetConfiguration in `dir/name`, for the load-time checks below.
fn isc(dir: &std::path::Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    fs_err::write(&path, text).unwrap();
    path.display().to_string()
}

/// What oc-mirror v2 reads leniently is read the same way, each said once as a warning with
/// file:line:col before anything is fetched: a v1alpha2 apiVersion, a key in another case and
/// a `docker://` prefix (dropped silently, as oc-mirror's reference parser drops it). The image
/// is then planned from a real registry.
#[test]
fn what_oc_mirror_reads_leniently_is_planned_with_warnings() {
    let src = crate::support::Registry::plain();
    let pushed = crate::support::images::SyntheticSet::standard(41)
        .without_large()
        .push_to(&src, "src");
    let work = tempfile::tempdir().unwrap();
    let cfg = isc(
        work.path(),
        "v1.yaml",
        &format!(
            "apiVersion: mirror.openshift.io/v1alpha2\nkind: ImageSetConfiguration\nmirror:\n  platform:\n    architectures: [multi]\n  additionalImages:\n  - Name: docker://{}/{}:{}\n",
            src.host(),
            pushed[0].repo,
            pushed[0].tag
        ),
    );
    let dest = format!("file://{}", work.path().join("m").display());
    let o = bootstrap(&[
        "mirror",
        "-c",
        &cfg,
        &dest,
        "--dry-run",
        "--output",
        "json",
        "--plain-http",
        &src.host(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(&format!("warning: {cfg}:1:13: apiVersion: mirror.openshift.io/v1alpha2 is oc-mirror v1's apiVersion; oc-mirror v2 reads the file as v2alpha1, and so does bootstrap: set `apiVersion: mirror.openshift.io/v2alpha1`")),
        "{err}"
    );
    assert!(
        err.contains(&format!("warning: {cfg}:7:5: mirror.additionalImages[0].Name: 'Name' is read as 'name' (oc-mirror matches keys ignoring case); write 'name'")),
        "{err}"
    );
    assert_eq!(err.matches("warning: ").count(), 2, "{err}");
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(plan["images"].as_array().unwrap().len(), 1, "{plan:#}");
}

/// Regression: two catalogs with one targetCatalog were accepted and the second replaced the
/// first at the destination, so the first's operators vanished from the cluster. Refused at
/// load with file:line:col, the field and the fix, before either registry is contacted.
#[test]
fn two_catalogs_with_one_target_catalog_are_refused_before_any_registry_is_contacted() {
    let src = crate::support::Registry::plain();
    let dst = crate::support::Registry::plain();
    let work = tempfile::tempdir().unwrap();
    let cfg = isc(
        work.path(),
        "catalogs.yaml",
        &format!(
            "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  operators:\n  - catalog: {0}/catalogs/redhat:v1\n    targetCatalog: site/operators\n  - catalog: {0}/catalogs/certified:v1\n    targetCatalog: site/operators\n",
            src.host()
        ),
    );
    // Each registry has answered the harness's readiness ping; nothing more may reach it.
    let before = (src.requests().len(), dst.requests().len());
    let err = failed(&bootstrap(&[
        "mirror",
        "-c",
        &cfg,
        &format!("docker://{}/m", dst.host()),
        "--plain-http",
        &src.host(),
        "--plain-http",
        &dst.host(),
    ]));
    assert!(
        err.contains(&format!("{cfg}:8:20: mirror.operators[1].targetCatalog: catalog '{}/catalogs/certified:v1' would be mirrored to 'PREFIX/site/operators:v1', where mirror.operators[0]", src.host())),
        "{err}"
    );
    assert!(
        err.contains("give one of them another targetCatalog or targetTag"),
        "{err}"
    );
    assert_eq!(
        (src.requests().len(), dst.requests().len()),
        before,
        "a registry was contacted"
    );
}

/// oc-mirror's rule: a targetCatalog is a repository path, without tag or digest, lower case.
#[test]
fn a_target_catalog_with_a_tag_is_refused_with_the_fix() {
    let work = tempfile::tempdir().unwrap();
    let cfg = isc(
        work.path(),
        "tagged.yaml",
        "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  operators:\n  - catalog: registry.example/catalogs/redhat:v1\n    targetCatalog: Site/operators:v2\n",
    );
    let dest = format!("file://{}", work.path().join("m").display());
    let err = failed(&bootstrap(&["mirror", "-c", &cfg, &dest, "--dry-run"]));
    assert!(
        err.contains(&format!("{cfg}:6:20: mirror.operators[0].targetCatalog: 'Site/operators:v2' has a tag and upper-case letters;")),
        "{err}"
    );
    assert!(
        err.contains("write `targetCatalog: site/operators` and `targetTag: v2`"),
        "{err}"
    );
}

/// An OKD channel is read from OKD's update graph (`--okd-graph-url`), never from OCP's
/// (`--graph-url`), even where both name the same channel.
#[test]
fn an_okd_channel_is_read_from_okds_graph_not_ocps() {
    let work = tempfile::tempdir().unwrap();
    let cfg = isc(
        work.path(),
        "okd.yaml",
        "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  platform:\n    channels:\n    - name: stable-4\n      type: okd\n",
    );
    let dest = format!("file://{}", work.path().join("m").display());
    let ocp = format!("file://{}", work.path().join("ocp.json").display());
    let okd = format!("file://{}", work.path().join("okd.json").display());
    let err = failed(&bootstrap(&[
        "mirror",
        "-c",
        &cfg,
        &dest,
        "--dry-run",
        "--graph-url",
        &ocp,
        "--okd-graph-url",
        &okd,
    ]));
    assert!(
        err.contains("reading the update graph (--okd-graph-url)") && err.contains("okd.json"),
        "{err}"
    );
    assert!(!work.path().join("m").exists());
}

/// `--dry-run --continue-on-error` lists an image it cannot resolve as failed (text and JSON)
/// and exits 1, so a plan of part of the set is never taken for the whole (issue 17, point 6).
#[test]
fn a_dry_run_lists_what_it_could_not_resolve_and_exits_1() {
    let src = crate::support::Registry::plain();
    let pushed = crate::support::images::SyntheticSet::standard(42)
        .without_large()
        .push_to(&src, "src");
    let work = tempfile::tempdir().unwrap();
    let missing = format!("{}/src/nowhere/missing:1.0", src.host());
    let cfg = isc(
        work.path(),
        "isc.yaml",
        &format!(
            "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  additionalImages:\n  - name: {}/{}:{}\n  - name: {missing}\n",
            src.host(),
            pushed[0].repo,
            pushed[0].tag
        ),
    );
    let dest = format!("file://{}", work.path().join("m").display());
    let run = |output: &str| {
        crate::support::run::command(&[
            "mirror",
            "-c",
            &cfg,
            &dest,
            "--dry-run",
            "--continue-on-error",
            "--output",
            output,
            "--plain-http",
            &src.host(),
        ])
        .current_dir(work.path())
        .output()
        .unwrap()
    };
    let o = run("json");
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(plan["images"].as_array().unwrap().len(), 1, "{plan:#}");
    assert_eq!(plan["failed"][0]["source"], missing.as_str(), "{plan:#}");
    assert!(!plan["failed"][0]["error"].as_str().unwrap().is_empty());
    let o = run("text");
    assert_eq!(o.status.code(), Some(1));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains(&format!("FAILED {missing}: ")), "{text}");
    assert!(!work.path().join("m").exists(), "a dry run creates nothing");
}
