//! `bootstrap prep` against the lab's real sshd hosts (`bootstrap-lab up --hosts-up`): the
//! hardware verdict per node (seven GPUs on master-1, irdma on master-2, one line each), the
//! facts pinned by golden files, host keys learned then enforced, the shipped playbooks clean
//! twice (the second time with no change) and unchanged under ansible-playbook, every module
//! over a real SSH session, and an unreachable node failing alone. Uses the lab inventory's
//! machine network, so it runs in the `lab-site` group (.config/nextest.toml).

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use crate::support::labsite::{lab_inventory, lab_prep, run_site, venv, SiteLab as Lab};
use crate::support::run::repo;

/// A copy of the lab inventory whose prep runs the shipped playbooks with the lab's key.
fn prep_inventory(dir: &Path) -> PathBuf {
    let (inv, _) = lab_inventory(dir, false);
    let site = inv.join("site.yaml");
    let mut lines: Vec<String> = fs_err::read_to_string(&site)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    lab_prep(&inv, &mut lines);
    fs_err::write(&site, lines.join("\n") + "\n").unwrap();
    inv
}

fn prep(inv: &Path, run: &Path, extra: &[&str]) -> (Output, Value) {
    let (inv, run) = (inv.display().to_string(), run.display().to_string());
    let mut args = vec![
        "prep",
        "--inventory",
        &inv,
        "--run",
        &run,
        "--output",
        "json",
    ];
    args.extend_from_slice(extra);
    let out = run_site(&args);
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out, json)
}

fn node<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == name)
        .unwrap()
}

fn findings(report: &Value, name: &str) -> Vec<String> {
    node(report, name)["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect()
}

/// Every host's recap in every playbook: no failure, no unreachable, and `changed` as given.
fn assert_playbooks_clean(report: &Value, changed: u64) {
    let playbooks = report["playbooks"].as_array().unwrap();
    assert_eq!(playbooks.len(), 2, "{report:#}");
    for pb in playbooks {
        let recap = pb[1]["recap"].as_object().unwrap();
        assert_eq!(recap.len(), 3, "{pb:#}");
        for (host, r) in recap {
            assert_eq!(
                (r["failed"].as_u64(), r["unreachable"].as_u64()),
                (Some(0), Some(0)),
                "{host} in {}: {r}",
                pb[0]
            );
            assert_eq!(
                r["changed"].as_u64(),
                Some(changed),
                "{host} in {}: {r}",
                pb[0]
            );
            assert!(r["ok"].as_u64().unwrap() > 0, "{host}: {r}");
        }
    }
}

/// The facts a node reported, without the clock (it differs per run) and the kernel release
/// (this machine's: the lab nodes share its kernel), against the golden file
/// `tests/testdata/prep/lab-NODE.facts.json` (UPDATE_GOLDEN=1 rewrites it).
fn assert_facts_golden(run: &Path, name: &str) {
    let mut facts: Value = serde_json::from_str(
        &fs_err::read_to_string(run.join(format!("prep/facts/{name}.json"))).unwrap(),
    )
    .unwrap();
    facts.as_object_mut().unwrap().remove("clock");
    facts.as_object_mut().unwrap().remove("kernel");
    let got = serde_json::to_string_pretty(&facts).unwrap() + "\n";
    let golden = repo(&format!("tests/testdata/prep/lab-{name}.facts.json"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        fs_err::write(&golden, &got).unwrap();
    }
    let want = fs_err::read_to_string(&golden)
        .unwrap_or_else(|e| panic!("{e} (UPDATE_GOLDEN=1 writes it)"));
    assert_eq!(
        got,
        want,
        "{name}'s facts differ from {} (UPDATE_GOLDEN=1 rewrites it)",
        golden.display()
    );
}

#[test]
fn prep_reports_the_hardware_exactly_and_the_shipped_playbooks_run_clean_twice() {
    let tmp = tempfile::tempdir().unwrap();
    let inv = prep_inventory(tmp.path());
    let (_lab, _) = Lab::up(&inv, &tmp.path().join("lab"), &["--hosts-up"]);
    let run = tmp.path().join("run");

    let (out, report) = prep(&inv, &run, &[]);
    assert_eq!(out.status.code(), Some(1), "{report:#}");
    assert_eq!(findings(&report, "master-0"), Vec::<String>::new());
    assert_eq!(node(&report, "master-0")["ok"], true);
    let seven = findings(&report, "master-1");
    assert_eq!(seven.len(), 1, "{seven:#?}");
    assert!(
        seven[0].starts_with("master-1: 7 of 8 H200 found, missing 0000:9a:00.0; fix: "),
        "{}",
        seven[0]
    );
    let irdma = findings(&report, "master-2");
    assert_eq!(irdma.len(), 1, "{irdma:#?}");
    assert!(
        irdma[0].starts_with("master-2: irdma is loaded beside mlx5_core"),
        "{}",
        irdma[0]
    );
    assert!(
        irdma[0].contains("99-master-blacklist-irdma"),
        "{}",
        irdma[0]
    );
    assert_playbooks_clean(&report, 0);
    for name in ["master-0", "master-1", "master-2"] {
        assert_facts_golden(&run, name);
    }
    let known = fs_err::read_to_string(run.join("ledger/known_hosts")).unwrap();
    assert_eq!(known.lines().count(), 3, "{known}");

    // Again: the same verdict, no change on any host, the learned keys kept as they were.
    let (out, again) = prep(&inv, &run, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_playbooks_clean(&again, 0);
    assert_eq!(
        fs_err::read_to_string(run.join("ledger/known_hosts")).unwrap(),
        known
    );
    let key = |r: &Value, n| node(r, n)["hostKey"].clone();
    assert_eq!(key(&report, "master-0"), key(&again, "master-0"));

    // A dry run (--check) of the same: the playbooks only read, so they pass as they are.
    let (_, checked) = prep(&inv, &run, &["--check"]);
    assert_playbooks_clean(&checked, 0);

    // The same playbooks, unchanged, under ansible-playbook with the inventory prep wrote.
    let ansible = ansible_playbook(&run, tmp.path());
    assert!(
        ansible.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&ansible.stdout),
        String::from_utf8_lossy(&ansible.stderr)
    );
    let text = String::from_utf8_lossy(&ansible.stdout);
    for host in ["master-0", "master-1", "master-2"] {
        assert!(
            text.lines()
                .any(|l| l.starts_with(host) && l.contains("failed=0") && l.contains("changed=0")),
            "{text}"
        );
    }
}

/// `ansible-playbook -i RUN/prep/ansible-inventory.yaml` with both shipped playbooks.
fn ansible_playbook(run: &Path, tmp: &Path) -> Output {
    let home = tmp.join("ansible-home");
    fs_err::create_dir_all(&home).unwrap();
    std::process::Command::new(format!("{}/bin/ansible-playbook", venv()))
        .arg("-i")
        .arg(run.join("prep/ansible-inventory.yaml"))
        .arg(repo("playbooks/handshake.yml"))
        .arg(repo("playbooks/gpu-node.yml"))
        .env("HOME", &home)
        .env("ANSIBLE_HOME", &home)
        .env("ANSIBLE_LOCAL_TEMP", home.join("tmp"))
        .env("ANSIBLE_SSH_CONTROL_PATH_DIR", home.join("cp"))
        .env("ANSIBLE_NOCOLOR", "1")
        .env("ANSIBLE_PYTHON_INTERPRETER", "/usr/bin/python3")
        .output()
        .unwrap()
}

#[test]
fn an_unreachable_node_fails_alone_and_changed_or_wrongly_pinned_host_keys_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let inv = prep_inventory(tmp.path());
    // master-2 is reached at an address of the machine network where nothing answers.
    let nodes = inv.join("nodes.yaml");
    let text = fs_err::read_to_string(&nodes).unwrap();
    let text = text.replacen(
        "- hostname: master-2\n",
        "- hostname: master-2\n  sshAddress: 192.168.111.99\n",
        1,
    );
    fs_err::write(&nodes, &text).unwrap();
    let (_lab, _) = Lab::up(&inv, &tmp.path().join("lab"), &["--hosts-up"]);
    let run = tmp.path().join("run");

    let (out, report) = prep(&inv, &run, &["--reachable-within", "3s"]);
    assert_eq!(out.status.code(), Some(1), "{report:#}");
    let down = node(&report, "master-2");
    assert_eq!(down["reachable"], false);
    assert!(
        down["error"]
            .as_str()
            .unwrap()
            .contains("192.168.111.99:22"),
        "{down}"
    );
    assert_eq!(node(&report, "master-0")["ok"], true, "{report:#}");
    for pb in report["playbooks"].as_array().unwrap() {
        let recap = pb[1]["recap"].as_object().unwrap();
        assert_eq!(
            recap.keys().collect::<Vec<_>>(),
            ["master-0", "master-1"],
            "{pb:#}"
        );
        assert!(recap.values().all(|r| r["failed"] == 0), "{pb:#}");
    }

    // master-0's learned key replaced by another: refused, naming both fingerprints.
    let known_file = run.join("ledger/known_hosts");
    let known = fs_err::read_to_string(&known_file).unwrap();
    let line = known
        .lines()
        .find(|l| l.starts_with("192.168.111.20 "))
        .unwrap();
    let other = other_key(tmp.path());
    fs_err::write(
        &known_file,
        known.replace(line, &format!("192.168.111.20 {other}")),
    )
    .unwrap();
    let (out, report) = prep(&inv, &run, &["--limit", "master-0", "--skip-checks"]);
    assert_eq!(out.status.code(), Some(1));
    let error = node(&report, "master-0")["error"]
        .as_str()
        .unwrap()
        .to_string();
    let learned = node_fingerprint(line);
    assert!(
        error.contains(&learned) && error.contains(&node_fingerprint(&format!("x {other}"))),
        "{error}"
    );

    // master-1 pinned in nodes.yaml to a key it does not have: refused.
    let text = text.replacen(
        "- hostname: master-1\n",
        &format!("- hostname: master-1\n  hostKeys: [\"{other}\"]\n"),
        1,
    );
    fs_err::write(&nodes, &text).unwrap();
    let (out, report) = prep(&inv, &run, &["--limit", "master-1", "--skip-checks"]);
    assert_eq!(out.status.code(), Some(1));
    let error = node(&report, "master-1")["error"].as_str().unwrap();
    assert!(error.contains("pinned"), "{error}");
}

/// Another ed25519 public key (`ssh-ed25519 AAAA...`).
fn other_key(dir: &Path) -> String {
    let file = dir.join("other");
    let st = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&file)
        .status()
        .unwrap();
    assert!(st.success());
    let public = fs_err::read_to_string(file.with_extension("pub")).unwrap();
    public
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The SHA256 fingerprint of a known_hosts line's key, as ssh-keygen prints it.
fn node_fingerprint(line: &str) -> String {
    let key = line
        .split_whitespace()
        .skip(1)
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    let key = russh::keys::ssh_key::PublicKey::from_openssh(&key).unwrap();
    key.fingerprint(russh::keys::ssh_key::HashAlg::Sha256)
        .to_string()
}
