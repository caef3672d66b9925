//! `bootstrap-lab` as a user meets it: its help says what the lab imitates, and its commands
//! refuse bad input by name. (Also why this test binary exists at all: cargo builds a package's
//! binary for its own integration tests, so `cargo nextest run --workspace` builds
//! `bootstrap-lab` beside `bootstrap`, and the site's tests find it there.)

use std::process::{Command, Output};

fn lab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bootstrap-lab"))
        .args(args)
        .env_remove("BOOTSTRAP_LOG")
        .output()
        .expect("running bootstrap-lab")
}

/// `bootstrap-lab --help` names what each part of the lab imitates and lists its commands; the
/// commands only `up` and the seeded images run stay hidden.
#[test]
fn help_says_what_the_lab_imitates() {
    let help = lab(&["--help"]);
    assert!(help.status.success(), "{help:?}");
    let text = String::from_utf8_lossy(&help.stdout);
    for imitated in [
        "sushy-tools",
        "assisted-service",
        "OLM",
        "Argo",
        "openshift-install",
        "sshd",
    ] {
        assert!(text.contains(imitated), "--help omits {imitated}:\n{text}");
    }
    for command in ["seed", "up", "down", "status", "repair"] {
        assert!(
            text.contains(&format!("  {command} ")),
            "{command} missing:\n{text}"
        );
    }
    for hidden in ["stand-in", "site-run"] {
        assert!(
            !text.contains(&format!("  {hidden} ")),
            "{hidden} listed:\n{text}"
        );
    }
}

/// A stand-in asked for by a name the lab does not have is refused with the names it has.
#[test]
fn an_unknown_stand_in_is_refused_by_name() {
    let o = lab(&[
        "stand-in",
        "kubectl",
        "--self",
        "/nonexistent",
        "--",
        "version",
    ]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(
            "no lab stand-in 'kubectl': openshift-install, openshift-baremetal-install or oc"
        ),
        "{err}"
    );
}

/// `status` and `repair` of a state dir where no lab was brought up say so and name the
/// command that does.
#[test]
fn status_without_a_lab_names_lab_up() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    for command in ["status", "repair"] {
        let o = lab(&[command, "--state", state.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{command}: {o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("no lab is up at"), "{command}: {err}");
        assert!(err.contains("bootstrap-lab up"), "{command}: {err}");
    }
}
