//! The host modules over [`Local`] (this machine as the host): each scenario of
//! `support::modules` in its own temp dir. `systemctl` and `modprobe` are stand-ins first on
//! the commands' `PATH` ([`StubPath`]); the kernel's settings and modules are only read.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use bootstrap::hostprep::modules::{self, ArgError};
use bootstrap::hostprep::Local;
use serde_json::json;
use tokio::io::AsyncWriteExt;

use crate::support::modules::*;

fn local() -> Local {
    Local {
        name: "local".into(),
    }
}

/// A [`StubPath`] whose `bin` holds `name` with `script`.
fn stub(dir: &Path, name: &str, script: &str) -> StubPath {
    let bin = dir.join("bin");
    fs_err::create_dir_all(&bin).unwrap();
    fs_err::write(bin.join(name), script).unwrap();
    fs_err::set_permissions(bin.join(name), std::fs::Permissions::from_mode(0o755)).unwrap();
    StubPath {
        local: local(),
        bin,
    }
}

#[tokio::test]
async fn command_runs_without_a_shell_and_creates_removes_decide() {
    let dir = tempfile::tempdir().unwrap();
    exercise_command(&local(), "root", dir.path()).await;
}

#[tokio::test]
async fn shell_runs_through_sh_and_creates_makes_it_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    exercise_shell(&local(), "root", dir.path()).await;
}

#[tokio::test]
async fn copy_is_idempotent_checks_and_diffs() {
    let dir = tempfile::tempdir().unwrap();
    exercise_copy(&local(), "root", dir.path()).await;
}

#[tokio::test]
async fn template_renders_then_copies() {
    let dir = tempfile::tempdir().unwrap();
    exercise_template(&local(), "root", dir.path()).await;
}

#[tokio::test]
async fn file_states_are_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    exercise_file(&local(), "root", dir.path()).await;
}

#[tokio::test]
async fn lineinfile_replaces_inserts_removes_and_diffs() {
    let dir = tempfile::tempdir().unwrap();
    exercise_lineinfile(&local(), "root", dir.path()).await;
}

#[tokio::test]
async fn stat_reports_without_changing() {
    let dir = tempfile::tempdir().unwrap();
    exercise_stat(&local(), "root", dir.path()).await;
}

#[tokio::test]
async fn systemd_service_against_a_standin_systemctl() {
    let dir = tempfile::tempdir().unwrap();
    let remote = stub(
        dir.path(),
        "systemctl",
        &systemctl_standin(&dir.path().join("systemd")),
    );
    exercise_systemd_service(&remote, "root", dir.path()).await;
}

#[tokio::test]
async fn sysctl_edits_its_file_and_only_reads_the_kernel() {
    let dir = tempfile::tempdir().unwrap();
    exercise_sysctl(&local(), "root", dir.path()).await;
}

#[tokio::test]
async fn modprobe_reads_loaded_modules_and_loads_missing_ones() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("modprobe.log");
    let remote = stub(dir.path(), "modprobe", &modprobe_standin(&log));
    exercise_modprobe(&remote, "root", dir.path(), &log.to_string_lossy()).await;
}

#[tokio::test]
async fn wait_for_paths_ports_and_timeouts() {
    let dir = tempfile::tempdir().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let _ = conn.write_all(b"HELLO bootstrap-lab\n").await;
        }
    });
    exercise_wait_for(
        &local(),
        "root",
        dir.path(),
        port,
        "^HELLO bootstrap-[a-z]+",
    )
    .await;
    server.abort();
}

#[test]
fn arguments_are_checked_before_any_host_is_touched() {
    let args = |v: serde_json::Value| v.as_object().unwrap().clone();
    let e = modules::check_args("copy", &args(json!({"dest": "/x", "conten": "a"}))).unwrap_err();
    assert_eq!(e.argument(), Some("conten"));
    let e = e.to_string();
    assert!(
        e.contains("`conten`") && e.contains("accepted: src, content, dest"),
        "{e}"
    );
    let e = modules::check_args("file", &args(json!({"path": "/x", "state": "hard"}))).unwrap_err();
    assert!(matches!(e, ArgError::NotAChoice { .. }), "{e:?}");
    let e = e.to_string();
    assert!(e.contains("`hard`") && e.contains("`directory`"), "{e}");
    let e = modules::check_args("command", &args(json!({"chdir": "/"}))).unwrap_err();
    assert!(matches!(e, ArgError::OneRequired { .. }), "{e:?}");
    assert!(
        e.to_string()
            .contains("one of `_raw_params`, `cmd`, `argv`"),
        "{e}"
    );
    let e = modules::check_args("wait_for", &args(json!({"port": "twenty"}))).unwrap_err();
    assert!(
        e.to_string().contains("`port` must be a whole number"),
        "{e}"
    );
    assert!(modules::check_args(
        "service",
        &args(json!({"name": "x", "enabled": "{{ on }}"}))
    )
    .is_ok());
    assert!(matches!(
        modules::check_args("debug", &args(json!({}))),
        Err(ArgError::NotRemote { .. })
    ));
}
