//! The mirror record of a registry destination signed with `--sign-key` (issue 16, part 4): the
//! auditor checks it with OpenSSH alone (`ssh-keygen -Y verify` with the allowed_signers line the
//! report gives), `bootstrap verify --allowed-signers` checks it before the registry, and a
//! record changed after signing, or signed by a key the file does not list, fails verify. A key
//! that cannot sign is refused before anything is copied.

use crate::support;
use std::path::{Path, PathBuf};
use std::process::Command;
use support::images::SyntheticSet;
use support::run::{bootstrap, failed, ok, write_config};
use support::Registry;

fn keygen(dir: &Path, name: &str, passphrase: &str) -> PathBuf {
    let key = dir.join(name);
    let st = Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            "ed25519",
            "-C",
            "mirror-operator@example.com",
            "-N",
            passphrase,
            "-f",
        ])
        .arg(&key)
        .status()
        .unwrap();
    assert!(st.success());
    key
}

#[test]
fn a_signed_record_is_checked_by_openssh_and_by_verify() {
    let src = Registry::plain();
    let dst = Registry::plain();
    let pushed = SyntheticSet::standard(1).push_to(&src, "src");
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(work.path(), &pushed, &src.host(), &["multi"]);
    let rec = work.path().join("rec.json");
    let key = keygen(work.path(), "signer", "");
    let dest = format!("docker://{}/m", dst.host());
    let mirror = |key: &Path| {
        bootstrap(&[
            "mirror",
            "-c",
            cfg.to_str().unwrap(),
            &dest,
            "--plain-http",
            &src.host(),
            "--plain-http",
            &dst.host(),
            "--record",
            rec.to_str().unwrap(),
            "--sign-key",
            key.to_str().unwrap(),
            "--output",
            "json",
        ])
    };

    // An encrypted key is refused before anything is copied (no record appears).
    let locked = keygen(work.path(), "locked", "a passphrase");
    let out = failed(&mirror(&locked));
    assert!(
        out.contains("--sign-key") && out.contains("encrypted"),
        "{out}"
    );
    assert!(!rec.exists());

    let report: serde_json::Value = serde_json::from_str(&ok(&mirror(&key))).unwrap();
    let sig = &report["signature"];
    let line = sig["allowedSigners"].as_str().unwrap();
    assert!(
        line.starts_with(
            "mirror-operator@example.com namespaces=\"bootstrap-mirror\" ssh-ed25519 "
        ),
        "{report}"
    );
    let allowed = work.path().join("allowed_signers");
    fs_err::write(&allowed, format!("{line}\n")).unwrap();

    // The auditor, with OpenSSH only.
    let o = Command::new("ssh-keygen")
        .args(["-Y", "verify", "-f"])
        .arg(&allowed)
        .args([
            "-I",
            "mirror-operator@example.com",
            "-n",
            "bootstrap-mirror",
            "-s",
        ])
        .arg(sig["file"].as_str().unwrap())
        .stdin(fs_err::File::open(&rec).unwrap().into_file())
        .output()
        .unwrap();
    assert!(o.status.success(), "ssh-keygen -Y verify: {o:?}");

    let verify = || {
        bootstrap(&[
            "verify",
            "--record",
            rec.to_str().unwrap(),
            "--allowed-signers",
            allowed.to_str().unwrap(),
            &dest,
            "--plain-http",
            &dst.host(),
        ])
    };
    let out = ok(&verify());
    assert!(
        out.contains("record signed by mirror-operator@example.com (SHA256:"),
        "{out}"
    );

    // A failed verify reports on stdout (the report) and stderr (the exit's reason).
    let refused = || {
        let o = verify();
        let err = failed(&o);
        format!("{}{err}", String::from_utf8_lossy(&o.stdout))
    };
    // Changed after signing: one byte.
    let text = fs_err::read_to_string(&rec).unwrap();
    fs_err::write(&rec, text.replacen('{', "{ ", 1)).unwrap();
    let out = refused();
    assert!(
        out.contains("rec.json.sig") && out.contains("does not match the file"),
        "{out}"
    );

    // Signed by a key the allowed_signers file does not list.
    fs_err::write(&rec, &text).unwrap();
    let stranger = keygen(work.path(), "stranger", "");
    bootstrap::sshsig::sign_file(&stranger, &rec).unwrap();
    let out = refused();
    assert!(out.contains("does not list"), "{out}");
}
