//! `bootstrap install` on the stages that need no registry (validate, render): a run directory
//! from empty through render, reruns that skip what is unchanged and
//! rerun what changed, `--from`/`--until`, the lock (held and stale), SIGINT mid-stage, a
//! failing stage naming its log, the status table and JSON against golden files
//! (`UPDATE_GOLDEN=1` rewrites them), and secrets kept out of logs, state.json and status.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};
use support::run::{command, copy_dir, failed, json, ok, repo, shipped_inventory};

fn install(inventory: &Path, run: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "install",
        "--inventory",
        inventory.to_str().unwrap(),
        "--run",
        run.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    command(&args).output().unwrap()
}

fn status(run: &Path, output: &str) -> String {
    ok(&command(&[
        "install",
        "status",
        "--output",
        output,
        "--run",
        run.to_str().unwrap(),
    ])
    .output()
    .unwrap())
}

/// The action the run took for each stage it reached, from its text report:
/// `[("validate", "ran"), ("render", "skipped"), ...]`.
fn actions(stdout: &str) -> Vec<(String, String)> {
    stdout
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let stage = w.next()?;
            let action = w.next()?;
            bootstrap::install::Stage::NAMES
                .contains(&stage)
                .then(|| (stage.to_string(), action.to_string()))
        })
        .collect()
}

fn stage_status(run: &Path, stage: &str) -> String {
    let state = json(&run.join("state.json"));
    state["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stage"] == stage)
        .unwrap()["status"]
        .as_str()
        .unwrap()
        .to_string()
}

fn lab_copy(dir: &Path) -> PathBuf {
    let inv = dir.join("inv");
    copy_dir(&shipped_inventory("lab"), &inv);
    inv
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// An empty run directory goes through validate and render (the files are `bootstrap render`'s,
/// byte for byte) with `--until render`; without it, the tools stage refuses an inventory that
/// names no mirror record (it says where the release is), naming the field; the run directory
/// holds only names `rundir` gives. The whole journey through iso, against the lab, is
/// `install_lab.rs`.
#[test]
fn an_empty_run_directory_goes_through_render() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    let o = install(&shipped_inventory("lab"), &run, &["--until", "render"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        actions(&stdout),
        pairs(&[("validate", "ran"), ("render", "ran")])
    );
    for file in ["install-config.yaml", "agent-config.yaml"] {
        assert_eq!(
            fs_err::read(run.join("config").join(file)).unwrap(),
            fs_err::read(repo(&format!("tests/testdata/render/lab/{file}"))).unwrap(),
            "{file}"
        );
    }
    assert_eq!(stage_status(&run, "render"), "done");
    assert_eq!(stage_status(&run, "tools"), "pending");
    assert!(!run.join("lock").exists(), "the lock is released");
    assert!(
        !run.join(".staging").exists()
            || fs_err::read_dir(run.join(".staging")).unwrap().count() == 0
    );
    let o = install(&shipped_inventory("lab"), &run, &[]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let log = fs_err::read_to_string(run.join("logs/tools.log")).unwrap();
    assert!(log.contains("needs references.mirrorRecord"), "{log}");
    assert_eq!(stage_status(&run, "tools"), "failed");
    assert!(!run.join("tools").exists());
    assert_eq!(support::run::unnamed_in_run(&run), Vec::<String>::new());
}

/// A second run changes nothing: every stage is skipped (inputs unchanged, outputs re-hashed
/// and intact) and state.json keeps the first run's times.
#[test]
fn a_second_run_skips_every_stage() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    let inv = shipped_inventory("lab");
    ok(&install(&inv, &run, &["--until", "render"]));
    let before = fs_err::read_to_string(run.join("state.json")).unwrap();
    let stdout = ok(&install(&inv, &run, &["--until", "render"]));
    assert_eq!(
        actions(&stdout),
        pairs(&[("validate", "skipped"), ("render", "skipped")])
    );
    assert_eq!(
        fs_err::read_to_string(run.join("state.json")).unwrap(),
        before
    );
}

/// Changing one node's MAC reruns validate and render (their input nodes.yaml changed), and
/// render's outputs change, which is what later stages take as their inputs. A BMC password
/// change reruns validate only (render does not read it); a damaged output reruns its stage.
#[test]
fn a_changed_mac_reruns_render_and_a_damaged_output_is_redone() {
    let tmp = tempfile::tempdir().unwrap();
    let inv = lab_copy(tmp.path());
    let run = tmp.path().join("run");
    ok(&install(&inv, &run, &["--until", "render"]));
    let nodes = inv.join("nodes.yaml");
    let text = fs_err::read_to_string(&nodes).unwrap();
    fs_err::write(
        &nodes,
        text.replace("aa:bb:cc:00:00:02", "aa:bb:cc:00:00:42"),
    )
    .unwrap();
    let stdout = ok(&install(&inv, &run, &["--until", "render"]));
    assert_eq!(
        actions(&stdout),
        pairs(&[("validate", "ran"), ("render", "ran")])
    );
    assert!(
        stdout.contains("inputs changed: inventory:nodes.yaml"),
        "{stdout}"
    );
    let agent = fs_err::read_to_string(run.join("config/agent-config.yaml")).unwrap();
    assert!(agent.contains("aa:bb:cc:00:00:42") && !agent.contains("aa:bb:cc:00:00:02"));

    fs_err::write(inv.join("secrets/bmc.example"), "admin:another-password\n").unwrap();
    let stdout = ok(&install(&inv, &run, &["--until", "render"]));
    assert_eq!(
        actions(&stdout),
        pairs(&[("validate", "ran"), ("render", "skipped")])
    );
    assert!(
        stdout.contains("secret:nodes[0].bmc.credentials"),
        "{stdout}"
    );

    fs_err::write(run.join("config/agent-config.yaml"), "tampered\n").unwrap();
    let stdout = ok(&install(&inv, &run, &["--until", "render"]));
    assert_eq!(
        actions(&stdout),
        pairs(&[("validate", "skipped"), ("render", "ran")])
    );
    assert!(
        stdout.contains("outputs changed: config/agent-config.yaml"),
        "{stdout}"
    );
    assert_eq!(
        fs_err::read_to_string(run.join("config/agent-config.yaml")).unwrap(),
        agent
    );
}

/// `--until` stops after a stage with exit 0; `--from` reruns a stage that is unchanged and
/// keeps the ones before it, and is refused when those are not done, or when it comes after
/// `--until`.
#[test]
fn from_and_until_bound_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let inv = shipped_inventory("lab");
    let run = tmp.path().join("run");
    let err = failed(&install(&inv, &run, &["--from", "render"]));
    assert!(
        err.contains("--from render: validate is pending, not done"),
        "{err}"
    );
    let stdout = ok(&install(&inv, &run, &["--until", "validate"]));
    assert_eq!(actions(&stdout), pairs(&[("validate", "ran")]));
    assert!(!run.join("config").exists());
    ok(&install(&inv, &run, &["--until", "render"]));
    let stdout = ok(&install(
        &inv,
        &run,
        &["--from", "render", "--until", "render"],
    ));
    assert_eq!(
        actions(&stdout),
        pairs(&[("validate", "kept"), ("render", "ran")])
    );
    assert!(stdout.contains("--from render"), "{stdout}");
    let err = failed(&install(
        &inv,
        &run,
        &["--from", "render", "--until", "validate"],
    ));
    assert!(
        err.contains("--from render comes after --until validate"),
        "{err}"
    );
    let err = failed(&install(&inv, &run, &["--until", "nope"]));
    assert!(
        err.contains("possible values: validate, render, tools"),
        "{err}"
    );
}

fn hostname() -> String {
    fs_err::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string()
}

fn fake_lock(run: &Path, pid: u32) {
    fs_err::create_dir_all(run).unwrap();
    let lock =
        serde_json::json!({"pid": pid, "host": hostname(), "started": "2026-01-01T00:00:00Z"});
    fs_err::write(run.join("lock"), lock.to_string()).unwrap();
}

/// A second run on a directory whose lock a live process holds (this test's own) is refused,
/// naming the holder's pid, and touches nothing.
#[test]
fn a_concurrent_run_is_refused_naming_the_holder() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    let me = std::process::id();
    fake_lock(&run, me);
    let err = failed(&install(&shipped_inventory("lab"), &run, &[]));
    assert!(
        err.contains(&format!("is held by pid {me} on {}", hostname())),
        "{err}"
    );
    assert!(!run.join("state.json").exists());
    assert!(
        run.join("lock").exists(),
        "someone else's lock is left alone"
    );
}

/// A lock whose process is gone (a pid that exited) is taken over with a warning naming it,
/// and released when the run ends.
#[test]
fn a_stale_lock_is_taken_over_with_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    fake_lock(&run, dead);
    let o = install(&shipped_inventory("lab"), &run, &["--until", "render"]);
    ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("took over a stale lock of pid {dead}")),
        "{err}"
    );
    assert!(!run.join("lock").exists());
}

/// Four runs started at once on a stale lock: exactly one takes it over; the others are
/// refused naming that one's pid (none deletes the lock the winner just took).
#[test]
fn runs_racing_for_a_stale_lock_leave_exactly_one_holder() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    fake_lock(&run, dead);
    let inv = shipped_inventory("lab");
    let children: Vec<_> = (0..4)
        .map(|_| {
            command(&[
                "install",
                "--inventory",
                inv.to_str().unwrap(),
                "--run",
                run.to_str().unwrap(),
            ])
            .env("BOOTSTRAP_TEST_STAGE_PAUSE", "render")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
        })
        .collect();
    wait_for_status(&run, "render", "running");
    let holder = json(&run.join("lock"))["pid"].as_u64().unwrap() as u32;
    let mut refused = 0;
    for child in children {
        let pid = child.id();
        if pid == holder {
            std::process::Command::new("kill")
                .args(["-INT", &pid.to_string()])
                .status()
                .unwrap();
        }
        let o = child.wait_with_output().unwrap();
        if pid == holder {
            assert_eq!(o.status.code(), Some(130), "{o:?}");
        } else {
            let err = failed(&o);
            assert!(err.contains(&format!("is held by pid {holder}")), "{err}");
            refused += 1;
        }
    }
    assert_eq!(refused, 3);
}

fn wait_for_status(run: &Path, stage: &str, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let state = run.join("state.json");
        if state.exists() && stage_status(run, stage) == want {
            return;
        }
        assert!(Instant::now() < deadline, "{stage} never became {want}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGINT while render runs (held by the documented test hook BOOTSTRAP_TEST_STAGE_PAUSE after
/// its work, before its outputs are published): exit 130, render `interrupted` in state.json,
/// nothing of it visible under RUN/config, the lock released; the rerun finishes it. SIGTERM
/// does the same with exit 143.
#[test]
fn sigint_during_a_stage_leaves_it_interrupted_and_the_rerun_finishes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let inv = shipped_inventory("lab");
    for (signal, code) in [("-INT", 130), ("-TERM", 143)] {
        let run = tmp.path().join(format!("run{signal}"));
        let child = command(&[
            "install",
            "--inventory",
            inv.to_str().unwrap(),
            "--run",
            run.to_str().unwrap(),
        ])
        .env("BOOTSTRAP_TEST_STAGE_PAUSE", "render")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
        wait_for_status(&run, "render", "running");
        let pid = child.id().to_string();
        assert!(std::process::Command::new("kill")
            .args([signal, &pid])
            .status()
            .unwrap()
            .success());
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(code), "{o:?}");
        assert_eq!(stage_status(&run, "render"), "interrupted");
        assert_eq!(stage_status(&run, "validate"), "done");
        assert!(
            !run.join("config").exists(),
            "a half-made output is visible"
        );
        assert!(!run.join("lock").exists());
        let shown = status(&run, "text");
        assert!(row(&shown, &["render", "interrupted"]), "{shown}");
        let stdout = ok(&install(&inv, &run, &["--until", "render"]));
        assert_eq!(
            actions(&stdout),
            pairs(&[("validate", "skipped"), ("render", "ran")])
        );
        assert!(stdout.contains("was interrupted"), "{stdout}");
        assert_eq!(stage_status(&run, "render"), "done");
        assert!(run.join("config/install-config.yaml").exists());
    }
}

/// kill -9 while render runs: state.json still says `running` and the lock names a dead pid;
/// status shows render interrupted, and the next run takes the stale lock over (with a
/// warning), finds no half-made config/ and finishes render.
#[test]
fn kill_9_during_a_stage_then_rerun_finishes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let inv = shipped_inventory("lab");
    let run = tmp.path().join("run");
    let mut child = command(&[
        "install",
        "--inventory",
        inv.to_str().unwrap(),
        "--run",
        run.to_str().unwrap(),
    ])
    .env("BOOTSTRAP_TEST_STAGE_PAUSE", "render")
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    wait_for_status(&run, "render", "running");
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(run.join("lock").exists());
    assert!(!run.join("config").exists());
    let shown = status(&run, "text");
    assert!(
        row(&shown, &["render", "interrupted"]) && shown.contains("its process ended while it ran"),
        "{shown}"
    );
    let o = install(&inv, &run, &["--until", "render"]);
    let stdout = ok(&o);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("took over a stale lock"),
        "{o:?}"
    );
    assert_eq!(
        actions(&stdout),
        pairs(&[("validate", "skipped"), ("render", "ran")])
    );
    assert!(stdout.contains("was interrupted"), "{stdout}");
    assert_eq!(stage_status(&run, "render"), "done");
}

/// A stage that fails stops the run with exit 1, names its log (which holds every problem),
/// and status shows it failed with a one-line detail; once fixed, the same command redoes it.
#[test]
fn a_failing_stage_names_its_log() {
    let tmp = tempfile::tempdir().unwrap();
    let inv = lab_copy(tmp.path());
    let site = fs_err::read_to_string(inv.join("site.yaml"))
        .unwrap()
        .replace("apiVIPs: [192.168.111.5]", "apiVIPs: [10.9.9.9]");
    fs_err::write(inv.join("site.yaml"), site).unwrap();
    let run = tmp.path().join("run");
    let o = install(&inv, &run, &[]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    let log = run.join("logs/validate.log");
    assert!(err.contains(&format!("read {}", log.display())), "{err}");
    let text = fs_err::read_to_string(&log).unwrap();
    assert!(
        text.contains("cluster.apiVIPs[0]: 10.9.9.9 is not in a machine network"),
        "{text}"
    );
    assert_eq!(stage_status(&run, "validate"), "failed");
    assert_eq!(stage_status(&run, "render"), "pending");
    let shown = status(&run, "text");
    assert!(row(&shown, &["validate", "failed"]), "{shown}");
    assert!(shown.contains("has 1 problem"), "{shown}");
    // Fixed, the same command runs the failed stage again and goes on.
    let site = fs_err::read_to_string(inv.join("site.yaml"))
        .unwrap()
        .replace("apiVIPs: [10.9.9.9]", "apiVIPs: [192.168.111.5]");
    fs_err::write(inv.join("site.yaml"), site).unwrap();
    let stdout = ok(&install(&inv, &run, &["--until", "render"]));
    assert!(
        stdout.contains("validate  ran         failed last time"),
        "{stdout}"
    );
    assert_eq!(stage_status(&run, "render"), "done");
}

/// A stage whose inputs cannot be read (here boot's: a BMC credentials file that is a
/// folder) fails with that error, recorded like any failure: in state.json, its log and
/// status. It used to end the run with an error before the stage, which state.json never
/// showed.
#[test]
fn a_stage_whose_inputs_cannot_be_read_fails_with_that_error() {
    let tmp = tempfile::tempdir().unwrap();
    let inv = lab_copy(tmp.path());
    let credentials = inv.join("secrets/bmc.example");
    fs_err::remove_file(&credentials).unwrap();
    fs_err::create_dir(&credentials).unwrap();
    let run = tmp.path().join("run");
    fs_err::create_dir_all(&run).unwrap();
    let done: Vec<serde_json::Value> = ["validate", "render", "tools", "iso"]
        .iter()
        .map(|s| serde_json::json!({"stage": s, "status": "done", "detail": "done earlier"}))
        .collect();
    let state =
        serde_json::json!({"version": 1, "inventory": inv.display().to_string(), "stages": done});
    fs_err::write(run.join("state.json"), state.to_string()).unwrap();
    let o = install(&inv, &run, &["--from", "boot", "--until", "boot"]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("boot      failed"), "{stdout}");
    assert_eq!(stage_status(&run, "boot"), "failed");
    let hashing = format!("hashing {}", credentials.display());
    let log = fs_err::read_to_string(run.join("logs/boot.log")).unwrap();
    assert!(log.contains(&format!("error: {hashing}")), "{log}");
    let shown = status(&run, "text");
    let line = shown.lines().find(|l| l.starts_with("boot")).unwrap();
    assert!(
        line.contains("failed") && line.contains(&hashing),
        "{shown}"
    );
}

/// Paths replaced, and each duration's digits (`0.0s` -> `N.Ns`): the column keeps its width.
fn filter_text(text: &str, run: &Path, inv: &Path) -> String {
    let text = text
        .replace(run.to_str().unwrap(), "<RUN>")
        .replace(inv.to_str().unwrap(), "<INVENTORY>");
    let dur = regex::Regex::new(r"\b\d+(\.\ds|m\d\ds|h\d\dm)\b").unwrap();
    dur.replace_all(&text, |c: &regex::Captures| {
        c[0].chars()
            .map(|ch| if ch.is_ascii_digit() { 'N' } else { ch })
            .collect::<String>()
    })
    .into_owned()
}

fn filter_json(text: &str, run: &Path, inv: &Path) -> String {
    let mut v: serde_json::Value = serde_json::from_str(text).unwrap();
    assert_eq!(v["run"], run.to_str().unwrap());
    v["run"] = "<RUN>".into();
    v["inventory"] = v["inventory"]
        .as_str()
        .unwrap()
        .replace(inv.to_str().unwrap(), "<INVENTORY>")
        .into();
    for s in v["stages"].as_array_mut().unwrap() {
        for k in ["started", "ended", "seconds"] {
            if !s[k].is_null() {
                s[k] = format!("<{k}>").into();
            }
        }
    }
    serde_json::to_string_pretty(&v).unwrap() + "\n"
}

fn golden(name: &str, got: &str) {
    let path = repo(&format!("tests/testdata/install/{name}"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        fs_err::create_dir_all(path.parent().unwrap()).unwrap();
        fs_err::write(&path, got).unwrap();
        return;
    }
    let want = fs_err::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", path.display()));
    assert!(
        got == want,
        "{} differs (UPDATE_GOLDEN=1 rewrites it):\n{got}",
        path.display()
    );
}

/// `bootstrap install status`, text and JSON, pinned by golden files.
#[test]
fn status_text_and_json_match_their_golden_files() {
    let tmp = tempfile::tempdir().unwrap();
    let inv = shipped_inventory("lab");
    let run = tmp.path().join("run");
    assert_eq!(
        install(&inv, &run, &["--until", "render"]).status.code(),
        Some(0)
    );
    golden(
        "status.txt",
        &filter_text(&status(&run, "text"), &run, &inv),
    );
    golden(
        "status.json",
        &filter_json(&status(&run, "json"), &run, &inv),
    );
    let err = failed(
        &command(&[
            "install",
            "status",
            "--run",
            tmp.path().join("none").to_str().unwrap(),
        ])
        .output()
        .unwrap(),
    );
    assert!(err.contains("has no state.json"), "{err}");
}

/// The pull secret (its tokens) and the BMC password appear in no log, no state.json and no
/// status or run output; the pull secret is in install-config.yaml, where it belongs.
#[test]
fn secrets_appear_in_no_log_state_or_status() {
    let tmp = tempfile::tempdir().unwrap();
    let inv = lab_copy(tmp.path());
    let token = "cHVsbC1zZWNyZXQtY2FuYXJ5LTQyNDI=";
    let bmc_password = "bmc-canary-password-4242";
    fs_err::write(
        inv.join("secrets/pull-secret.example.json"),
        format!(r#"{{"auths":{{"registry.example:5000":{{"auth":"{token}"}}}}}}"#),
    )
    .unwrap();
    fs_err::write(
        inv.join("secrets/bmc.example"),
        format!("admin:{bmc_password}\n"),
    )
    .unwrap();
    let run = tmp.path().join("run");
    let mut shown = Vec::new();
    for output in ["text", "json"] {
        let o = command(&[
            "install",
            "--output",
            output,
            "--inventory",
            inv.to_str().unwrap(),
            "--run",
            run.to_str().unwrap(),
            "--from",
            "validate",
            "--until",
            "render",
        ])
        .output()
        .unwrap();
        shown.push(ok(&o));
        shown.push(String::from_utf8_lossy(&o.stderr).into_owned());
        shown.push(status(&run, output));
    }
    for path in [
        run.join("state.json"),
        run.join("logs/validate.log"),
        run.join("logs/render.log"),
    ] {
        shown.push(fs_err::read_to_string(path).unwrap());
    }
    for text in &shown {
        for s in [token, bmc_password] {
            assert!(!text.contains(s), "{s} leaked:\n{text}");
        }
    }
    let ic = fs_err::read_to_string(run.join("config/install-config.yaml")).unwrap();
    assert!(
        ic.contains(token),
        "the pull secret belongs in install-config.yaml"
    );
}

/// A release older than 4.18 is refused by `bootstrap install`'s validate stage, at the field
/// that names it (`cluster.release.version`, or `cluster.release.image` by the version the
/// mirror record holds for its digest), with the reason: the wait stage needs the watcher token,
/// which the agent installer issues from 4.18 on. `bootstrap render` still accepts it.
#[test]
fn a_release_older_than_4_18_is_refused_for_install_with_the_watcher_token_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let inv = tmp.path().join("inv");
    copy_dir(&shipped_inventory("example-site"), &inv);
    let record = inv.join("mirror/mirror-record.json");
    let text = fs_err::read_to_string(&record).unwrap();
    fs_err::write(&record, text.replace("4.18.3", "4.17.9")).unwrap();
    let site = inv.join("site.yaml");
    let text = fs_err::read_to_string(&site).unwrap();
    fs_err::write(&site, text.replace("version: 4.18.3", "version: 4.17.9")).unwrap();

    let rendered = tmp.path().join("rendered");
    ok(&command(&[
        "render",
        "--inventory",
        inv.to_str().unwrap(),
        "--out",
        rendered.to_str().unwrap(),
    ])
    .output()
    .unwrap());

    let run = tmp.path().join("run");
    let o = install(&inv, &run, &["--until", "validate"]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert_eq!(stage_status(&run, "validate"), "failed");
    let log = fs_err::read_to_string(run.join("logs/validate.log")).unwrap();
    let at = format!("{}:9:14: cluster.release.version:", site.display());
    assert!(log.contains(&at), "{at} not in {log}");
    for words in [
        "release '4.17.9' cannot be installed by bootstrap install",
        "the watcher token the agent installer issues from 4.18 on",
        "install 4.18 or later",
    ] {
        assert!(log.contains(words), "{words:?} not in {log}");
    }

    // By digest: the record says which version that is.
    let by_digest = "image: quay.io/openshift-release-dev/ocp-release@sha256:9a3b2d07c287c578f6973829b8ed124562d2cb91ddc499eb89d03769e3be7b73";
    let text = fs_err::read_to_string(&site).unwrap();
    fs_err::write(&site, text.replace("version: 4.17.9", by_digest)).unwrap();
    let o = install(&inv, &run, &["--until", "validate"]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let log = fs_err::read_to_string(run.join("logs/validate.log")).unwrap();
    let at = format!(
        "{}:9:12: cluster.release.image: release '4.17.9-x86_64'",
        site.display()
    );
    assert!(log.contains(&at), "{at} not in {log}");

    // 4.18 passes the same stage.
    let text = fs_err::read_to_string(&record).unwrap();
    fs_err::write(&record, text.replace("4.17.9", "4.18.3")).unwrap();
    let o = install(&inv, &run, &["--until", "validate"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
}

/// Whether a line of `install status`'s table starts with `words` (the columns' widths follow
/// the longest stage name).
fn row(table: &str, words: &[&str]) -> bool {
    table.lines().any(|l| {
        let got: Vec<&str> = l.split_whitespace().take(words.len()).collect();
        got == words
    })
}

/// A run whose cluster is installed (the wait done): `--from` a stage that installed it and
/// `--reboot` of one of its nodes are refused before anything runs; nodes.yaml without an
/// installed node, or with a master to add, fails validation naming the node and why; and
/// nothing is reset or rendered again.
#[test]
fn an_installed_cluster_is_not_reinstalled_and_day_two_only_adds_workers() {
    let tmp = tempfile::tempdir().unwrap();
    let inv = lab_copy(tmp.path());
    let run = tmp.path().join("run");
    ok(&install(&inv, &run, &["--until", "render"]));
    // The stages that install it recorded done, as a finished install leaves them.
    let mut state = json(&run.join("state.json"));
    for rec in state["stages"].as_array_mut().unwrap() {
        if ["tools", "iso", "boot", "wait"].contains(&rec["stage"].as_str().unwrap()) {
            rec["status"] = "done".into();
            rec["detail"] = "done in an earlier run".into();
        }
    }
    fs_err::write(run.join("state.json"), state.to_string()).unwrap();
    let agent_config = fs_err::read(run.join("config/agent-config.yaml")).unwrap();

    let err = failed(&install(&inv, &run, &["--from", "render"]));
    assert!(
        err.contains("--from render: the cluster in") && err.contains("is installed"),
        "{err}"
    );
    let err = failed(&install(&inv, &run, &["--reboot", "master-1"]));
    assert!(
        err.contains("--reboot master-1: a node of the installed cluster"),
        "{err}"
    );

    // master-2 gone, a master added: refused by validation, each named with the way out.
    let nodes = fs_err::read_to_string(inv.join("nodes.yaml")).unwrap();
    let cut = nodes.find("- hostname: master-2").unwrap();
    let added = "- hostname: master-3\n  role: master\n  bmc:\n    address: http://127.0.0.1:8009/redfish/v1/Systems/master-3\n  rootDevice:\n    deviceName: /dev/vda\n  nics:\n  - name: enp1s0\n    mac: aa:bb:cc:00:00:09\n  addresses:\n  - interface: enp1s0\n    ip: 192.168.111.29/24\n";
    fs_err::write(inv.join("nodes.yaml"), format!("{}{added}", &nodes[..cut])).unwrap();
    let o = install(&inv, &run, &[]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let log = fs_err::read_to_string(run.join("logs/validate.log")).unwrap();
    assert!(
        log.contains(
            "node master-2: the cluster has it (installed with it, or added on day two), but nodes.yaml no longer has it"
        ) && log.contains("node master-3: role master cannot be added to a running cluster"),
        "{log}"
    );
    assert_eq!(stage_status(&run, "validate"), "failed");
    assert_eq!(
        fs_err::read(run.join("config/agent-config.yaml")).unwrap(),
        agent_config,
        "the installed cluster's agent-config.yaml was rendered again"
    );
    assert!(!run.join("add-image").exists());
}
