//! `bootstrap render` as a delivery engineer runs it: the shipped inventories against reviewed
//! golden files (`UPDATE_GOLDEN=1` rewrites them), the same bytes on every run, secrets never on
//! stdout or stderr, and nothing written when the inventory is invalid.

use crate::support;

use std::path::{Path, PathBuf};
use support::run::{
    bootstrap, command, copy_dir, failed, ok, repo, shipped_inventory, validate_pair,
};

fn render(inventory: &Path, out: &Path) -> std::process::Output {
    bootstrap(&[
        "render",
        "--inventory",
        inventory.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ])
}

#[test]
fn shipped_inventories_match_their_golden_files() {
    let tmp = tempfile::tempdir().unwrap();
    for site in ["example-site", "lab"] {
        let out = tmp.path().join(site);
        ok(&render(&shipped_inventory(site), &out));
        for file in ["install-config.yaml", "agent-config.yaml"] {
            let got = fs_err::read_to_string(out.join(file)).unwrap();
            let golden = repo(&format!("tests/testdata/render/{site}/{file}"));
            if std::env::var_os("UPDATE_GOLDEN").is_some() {
                fs_err::create_dir_all(golden.parent().unwrap()).unwrap();
                fs_err::write(&golden, &got).unwrap();
                continue;
            }
            let want = fs_err::read_to_string(&golden).unwrap_or_else(|e| {
                panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", golden.display())
            });
            assert!(
                got == want,
                "{site}/{file} differs from {} (UPDATE_GOLDEN=1 rewrites it):\n{got}",
                golden.display()
            );
        }
    }
}

#[test]
fn rendering_twice_gives_the_same_bytes_and_private_modes() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    ok(&render(&shipped_inventory("example-site"), &a));
    ok(&render(&shipped_inventory("example-site"), &b));
    for file in ["install-config.yaml", "agent-config.yaml"] {
        assert_eq!(
            fs_err::read(a.join(file)).unwrap(),
            fs_err::read(b.join(file)).unwrap(),
            "{file}"
        );
    }
    let mode = |p: PathBuf| fs_err::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(a.join("install-config.yaml")), 0o600);
    assert_eq!(mode(a.join("agent-config.yaml")), 0o644);
    // No temporary files left beside them.
    let names: Vec<String> = fs_err::read_dir(&a)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
}

#[test]
fn secrets_never_reach_stdout_or_stderr() {
    let tmp = tempfile::tempdir().unwrap();
    let inv = tmp.path().join("inv");
    copy_dir(&shipped_inventory("lab"), &inv);
    let token = "cHVsbC1zZWNyZXQtY2FuYXJ5LTQyNDI=";
    let bmc_password = "bmc-canary-password-4242";
    fs_err::write(
        inv.join("secrets/bmc.example"),
        format!("admin:{bmc_password}\n"),
    )
    .unwrap();
    // The pull secret comes from the environment this time.
    let site = fs_err::read_to_string(inv.join("site.yaml"))
        .unwrap()
        .replace(
            "    file: secrets/pull-secret.example.json",
            "    env: BOOTSTRAP_TEST_PULL_SECRET",
        );
    fs_err::write(inv.join("site.yaml"), site).unwrap();
    let secret = format!(r#"{{"auths":{{"registry.example:5000":{{"auth":"{token}"}}}}}}"#);
    for output in ["text", "json"] {
        let out = tmp.path().join(format!("out-{output}"));
        let o = command(&[
            "render",
            "--output",
            output,
            "--inventory",
            inv.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .env("BOOTSTRAP_TEST_PULL_SECRET", &secret)
        .output()
        .unwrap();
        let stdout = ok(&o);
        let stderr = String::from_utf8_lossy(&o.stderr);
        for s in [token, bmc_password] {
            assert!(
                !stdout.contains(s) && !stderr.contains(s),
                "{s} leaked:\n{stdout}\n{stderr}"
            );
        }
        let ic = fs_err::read_to_string(out.join("install-config.yaml")).unwrap();
        assert!(
            ic.contains(token),
            "the pull secret belongs in install-config.yaml"
        );
        if output == "json" {
            let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
            assert_eq!(v["controlPlane"], 3);
            assert_eq!(v["compute"], 0);
            assert_eq!(v["files"][0]["mode"], "0600");
            assert_eq!(v["files"][0]["sha256"].as_str().unwrap().len(), 64);
            assert_eq!(v["nodes"][0]["hostname"], "master-0");
            assert_eq!(v["nodes"][0]["machineIP"], "192.168.111.20");
        }
    }
    // A pull secret that is not JSON: refused without quoting it.
    let out = tmp.path().join("bad");
    let o = command(&[
        "render",
        "--inventory",
        inv.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ])
    .env("BOOTSTRAP_TEST_PULL_SECRET", format!("not-json-{token}"))
    .output()
    .unwrap();
    let err = failed(&o);
    assert!(
        err.contains("references.pullSecret.env: the pull secret is not JSON"),
        "{err}"
    );
    assert!(!err.contains(token), "{err}");
    assert!(!out.exists());
}

#[test]
fn an_invalid_inventory_writes_nothing_and_reports_every_problem() {
    let tmp = tempfile::tempdir().unwrap();
    let inv = tmp.path().join("inv");
    copy_dir(&shipped_inventory("example-site"), &inv);
    let site = fs_err::read_to_string(inv.join("site.yaml"))
        .unwrap()
        .replace("apiVIPs: [10.20.0.5]", "apiVIPs: [10.21.0.5]")
        .replace("rendezvousIP: 10.20.0.11", "rendezvousIP: 10.20.0.21");
    fs_err::write(inv.join("site.yaml"), site).unwrap();
    let out = tmp.path().join("run");
    let err = failed(&render(&inv, &out));
    let site_file = inv.join("site.yaml").display().to_string();
    assert!(
        err.contains(&format!(
            "{site_file}:10:13: cluster.apiVIPs[0]: 10.21.0.5 is not in a machine network"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "{site_file}:13:17: cluster.rendezvousIP: 10.20.0.21 is worker gpu-00's address"
        )),
        "{err}"
    );
    assert!(err.contains("nothing was written"), "{err}");
    assert!(!out.exists(), "nothing may be written");
}

#[test]
fn a_missing_inventory_names_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let err = failed(&render(&tmp.path().join("nope"), &tmp.path().join("out")));
    assert!(
        err.contains("nope/site.yaml") && err.contains("No such file"),
        "{err}"
    );
}

/// Our own output passes `bootstrap validate` (the installer's rules and the ones it misses),
/// for the shipped inventories (`bootstrap render` also runs this check itself before it
/// writes anything).
#[test]
fn rendered_files_pass_bootstrap_validate() {
    let tmp = tempfile::tempdir().unwrap();
    for site in ["example-site", "lab"] {
        let out = tmp.path().join(site);
        ok(&render(&shipped_inventory(site), &out));
        let ic = out.join("install-config.yaml");
        let ac = out.join("agent-config.yaml");
        let o = validate_pair(&ic, &ac);
        let stdout = ok(&o);
        assert!(stdout.starts_with("ok:"), "{site}: {stdout}");
    }
}

/// Day two's nodes-config.yaml (issue 29): a GPU worker of the example site exactly as
/// agent-config.yaml has it (NICs, root device hints, NMState), in the installer's field names;
/// a control-plane node cannot be added, said in the installer's words.
#[test]
fn nodes_config_carries_the_node_as_agent_config_has_it() {
    let inv = bootstrap::inventory::load(&shipped_inventory("example-site")).unwrap();
    let text = bootstrap::render::nodes_config(&inv, &["gpu-01".to_string()]).unwrap();
    let nodes: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    let rendered = bootstrap::render::render(&inv).unwrap();
    let agent: serde_json::Value = serde_saphyr::from_str(&rendered.agent_config).unwrap();
    let host = agent["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["hostname"] == "gpu-01")
        .unwrap();
    assert_eq!(nodes["hosts"].as_array().unwrap().len(), 1, "{text}");
    assert_eq!(&nodes["hosts"][0], host, "{text}");
    assert!(nodes["hosts"][0]["interfaces"][0]["macAddress"].is_string());
    assert!(nodes["hosts"][0]["networkConfig"]["interfaces"].is_array());

    let e = bootstrap::render::nodes_config(&inv, &["cp-1".to_string()]).unwrap_err();
    assert!(format!("{e}").contains("Hosts[0].Role"), "{e}");
    let e = bootstrap::render::nodes_config(&inv, &["gpu-99".to_string()]).unwrap_err();
    assert!(format!("{e}").contains("no node gpu-99"), "{e}");
}
