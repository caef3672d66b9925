//! One source of installer facts: every predicate's valid and invalid examples go through both
//! paths, the inventory (load, validate, and render's reading of the referenced files) and
//! `bootstrap validate` (its library entry, on the install-config.yaml / agent-config.yaml the
//! value would be written into), and both must give the same verdict, the one the table states.
//! Whatever the inventory accepts must also pass render's self-check (the rendered pair through
//! `bootstrap validate`): the two paths once disagreed on `ssh-dss` keys, which the inventory
//! accepted and render's self-check then refused as "a bug in bootstrap render".

use crate::support;

use bootstrap::installer::validate_files;
use bootstrap::inventory::{self, InventoryError};
use std::path::Path;
use support::run::{copy_dir, repo, shipped_inventory};

/// What a path says about a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Valid,
    Warned,
    Refused,
}

use Verdict::{Refused, Valid, Warned};

/// Where a predicate's value goes, in the inventory and in the installer's files.
#[derive(Clone, Copy, Debug)]
enum Predicate {
    ControlPlaneSize,
    PemBundle,
    PullSecret,
    SshKeys,
    Mac,
    ClusterName,
    RootDeviceHints,
}

const ED25519: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIF0TWqM8QrLMi4dZk3dTLklQgLz1oEZBLJw1Fynqh6lE me@host";
/// An ssh-dss key: p, q, g, y as tiny mpints (the shape is what both paths judge).
const DSA: &str = "ssh-dss AAAAB3NzaC1kc3MAAAABAQAAAAECAAAAAQMAAAABBA== old@host";

/// The table: each predicate with values and the verdict both paths must give.
fn table() -> Vec<(Predicate, String, Verdict)> {
    let ca = fs_err::read_to_string(repo(
        "inventory/example-site/secrets/registry-ca.example.pem",
    ))
    .unwrap();
    let truncated_ca = ca.replacen(
        "oLPw12nMeFqBRLgCIQCPwa4RUxJGRweNhFMJOPoZXumnvOSAw32gifpx2S8+6Q==\n",
        "",
        1,
    );
    let key_block = ca.replace("CERTIFICATE", "PRIVATE KEY");
    let p = Predicate::ControlPlaneSize;
    let mut t: Vec<(Predicate, String, Verdict)> = vec![
        (p, "1".into(), Valid),
        (p, "2".into(), Refused),
        (p, "3".into(), Valid),
        (p, "4".into(), Valid),
        (p, "5".into(), Valid),
        (p, "6".into(), Refused),
    ];
    let p = Predicate::PemBundle;
    t.extend([
        (p, ca.clone(), Valid),
        (p, format!("{ca}{ca}"), Valid),
        (p, truncated_ca, Refused),
        (p, key_block, Refused),
        (p, format!("{ca}not a certificate\n"), Refused),
        (p, "not a certificate\n".into(), Refused),
    ]);
    let p = Predicate::PullSecret;
    t.extend([
        (
            p,
            r#"{"auths":{"r.example:5000":{"auth":"dTpw"}}}"#.into(),
            Valid,
        ),
        (
            p,
            r#"{"auths":{"r.example:5000":{"credsStore":"pass"}}}"#.into(),
            Valid,
        ),
        (p, r#"{"auths":{}}"#.into(), Refused),
        (
            p,
            r#"{"auths":{"r.example:5000":{"email":"a@b"}}}"#.into(),
            Refused,
        ),
        (p, r#"{"registries":{}}"#.into(), Refused),
        (p, "hunter2".into(), Refused),
    ]);
    let p = Predicate::SshKeys;
    t.extend([
        (p, ED25519.into(), Valid),
        (p, format!("{ED25519}\n{ED25519}\n"), Valid),
        (p, format!("# the admins\n{ED25519}\n"), Valid),
        (p, format!("no-pty,from=\"10.0.0.0/8\" {ED25519}"), Valid),
        (p, DSA.into(), Warned),
        (p, ED25519.replacen("Fynqh6lE", "Fynq", 1), Refused),
        (p, ED25519.replacen("ssh-ed25519", "ssh-rsa", 1), Refused),
        (p, ED25519.replacen("ssh-ed25519", "ssh-ed2519", 1), Refused),
        (p, format!("{ED25519}\nssh-ed25519 AAAA broken\n"), Refused),
        (p, "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaA==\n-----END OPENSSH PRIVATE KEY-----\n".into(), Refused),
        (p, "# no key here\n".into(), Refused),
    ]);
    let p = Predicate::Mac;
    t.extend([
        (p, "aa:bb:cc:00:00:01".into(), Valid),
        (p, "AA-BB-CC-00-00-01".into(), Valid),
        (p, "aabb.cc00.0001".into(), Valid),
        (p, "aa:bb:cc:00:00".into(), Refused),
        (p, "aa:bb:cc:00:00:0g".into(), Refused),
        (p, "aa:bb:cc:00:00:02".into(), Refused), // master-1's
    ]);
    let p = Predicate::ClusterName;
    t.extend([
        (p, "lab".into(), Valid),
        (p, "gpu-prod-2".into(), Valid),
        (p, "Lab".into(), Refused),
        (p, "lab_1".into(), Refused),
        (p, "-lab".into(), Refused),
        (p, "a.b".into(), Refused),
        (p, "a".repeat(64), Refused),
    ]);
    let p = Predicate::RootDeviceHints;
    t.extend([
        (p, "{deviceName: /dev/sda}".into(), Valid),
        (
            p,
            "{deviceName: /dev/disk/by-path/pci-0000:03:00.0-scsi-0:2:0:0}".into(),
            Valid,
        ),
        (
            p,
            "{deviceName: /dev/disk/by-id/wwn-0x5000c500a1b2c3d4}".into(),
            Refused,
        ),
        (p, "{deviceName: sda}".into(), Refused),
        (p, "{deviceName: /dev/disk/sda}".into(), Refused),
        (p, "{hctl: '1:0:0:0'}".into(), Valid),
        (p, "{hctl: '1:0:0'}".into(), Refused),
        (p, "{wwn: '0x5000c500a1b2c3d4'}".into(), Valid),
        (p, "{wwn: eui.0025388b91b2c1d3}".into(), Valid),
        (p, "{wwn: '0x5000c500a1b2c3d40x0001'}".into(), Refused),
        (
            p,
            "{wwnWithExtension: '0x5000c500a1b2c3d4'}".into(),
            Refused,
        ),
        (
            p,
            "{minSizeGigabytes: 100, rotational: false}".into(),
            Valid,
        ),
        (
            p,
            "{minSizeGigabytes: 0, deviceName: /dev/sda}".into(),
            Warned,
        ),
        (
            p,
            "{minSizeGigabytes: -1, deviceName: /dev/sda}".into(),
            Refused,
        ),
    ]);
    t
}

/// The lab inventory's master `i` (0-based), as nodes.yaml writes it.
fn master(i: usize) -> String {
    format!(
        "- hostname: master-{i}\n  role: master\n  bmc:\n    address: https://127.0.0.1:{}/redfish/v1/Systems/master-{i}\n    credentials:\n      file: secrets/bmc.example\n  rootDevice:\n    deviceName: /dev/vda\n  nics:\n  - name: enp1s0\n    mac: aa:bb:cc:00:00:{:02x}\n  addresses:\n  - interface: enp1s0\n    ip: 192.168.111.{}/24\n",
        8001 + i,
        i + 1,
        20 + i
    )
}

fn edit(path: &Path, from: &str, to: &str) {
    let text = fs_err::read_to_string(path).unwrap();
    assert!(text.contains(from), "{from:?} not in {}", path.display());
    fs_err::write(path, text.replacen(from, to, 1)).unwrap();
}

/// The lab inventory in `dir` with `value` put where `p` is.
fn inventory_with(p: Predicate, value: &str, dir: &Path) {
    copy_dir(&shipped_inventory("lab"), dir);
    let (site, nodes) = (dir.join("site.yaml"), dir.join("nodes.yaml"));
    match p {
        Predicate::ControlPlaneSize => {
            let n: usize = value.parse().unwrap();
            let list: String = (0..n).map(master).collect();
            let head = "apiVersion: bootstrap.openshift-ai.dev/v1alpha1\nkind: Nodes\nnodes:\n";
            fs_err::write(&nodes, format!("{head}{list}")).unwrap();
            if n == 1 {
                edit(&site, "apiVIPs: [192.168.111.5]", "apiVIPs: []");
                edit(&site, "ingressVIPs: [192.168.111.4]", "ingressVIPs: []");
            }
        }
        Predicate::PemBundle => {
            fs_err::write(dir.join("secrets/ca.pem"), value).unwrap();
            edit(
                &site,
                "references:\n",
                "references:\n  registryCA:\n    file: secrets/ca.pem\n",
            );
        }
        Predicate::PullSecret => {
            fs_err::write(dir.join("secrets/pull-secret.example.json"), value).unwrap()
        }
        Predicate::SshKeys => fs_err::write(dir.join("secrets/id_ed25519.pub"), value).unwrap(),
        Predicate::Mac => edit(&nodes, "mac: aa:bb:cc:00:00:01", &format!("mac: {value}")),
        Predicate::ClusterName => edit(&site, "  name: lab", &format!("  name: {value}")),
        Predicate::RootDeviceHints => edit(
            &nodes,
            "  rootDevice:\n    deviceName: /dev/vda",
            &format!("  rootDevice: {value}"),
        ),
    }
}

/// The value as a YAML block scalar at `indent`, for install-config's multi-line fields.
fn block(value: &str, indent: &str) -> String {
    let lines: String = value.lines().map(|l| format!("{indent}{l}\n")).collect();
    format!("|\n{lines}")
}

/// The lab's rendered pair with `value` put where `p` is; `None` for a file left out (so
/// cross-file rules do not judge a mismatch the table is not about).
fn installer_files_with(p: Predicate, value: &str) -> (Option<String>, Option<String>) {
    let ic = fs_err::read_to_string(repo("tests/testdata/render/lab/install-config.yaml")).unwrap();
    let ac = fs_err::read_to_string(repo("tests/testdata/render/lab/agent-config.yaml")).unwrap();
    let pull = "pullSecret: \"{\\\"auths\\\":{\\\"127.0.0.1:5000\\\":{\\\"auth\\\":\\\"bGFiOmxhYi1wbGFjZWhvbGRlcg==\\\"}}}\"";
    let key_line = ic
        .lines()
        .find(|l| l.starts_with("sshKey: "))
        .unwrap()
        .to_string();
    match p {
        Predicate::ControlPlaneSize => {
            let mut ic = ic.replacen(
                "  name: master\n  replicas: 3",
                &format!("  name: master\n  replicas: {value}"),
                1,
            );
            if value == "1" {
                let start = ic.find("platform:\n").unwrap();
                let end = ic.find("pullSecret:").unwrap();
                ic.replace_range(start..end, "platform:\n  none: {}\n");
            }
            (Some(ic), None)
        }
        Predicate::PemBundle => (
            Some(format!(
                "{ic}additionalTrustBundlePolicy: Always\nadditionalTrustBundle: {}",
                block(value, "  ")
            )),
            Some(ac),
        ),
        Predicate::PullSecret => {
            let quoted = format!("pullSecret: '{}'", value.replace('\'', "''"));
            (Some(ic.replacen(pull, &quoted, 1)), Some(ac))
        }
        Predicate::SshKeys => (
            Some(ic.replacen(
                &key_line,
                &format!("sshKey: {}", block(value, "  ").trim_end()),
                1,
            )),
            Some(ac),
        ),
        Predicate::Mac => (
            Some(ic),
            Some(ac.replacen(
                "macAddress: aa:bb:cc:00:00:01",
                &format!("macAddress: {value}"),
                1,
            )),
        ),
        Predicate::ClusterName => (
            Some(ic.replacen("  name: lab", &format!("  name: {value}"), 1)),
            None,
        ),
        Predicate::RootDeviceHints => (
            Some(ic),
            Some(ac.replacen(
                "  rootDeviceHints:\n    deviceName: /dev/vda",
                &format!("  rootDeviceHints: {value}"),
                1,
            )),
        ),
    }
}

/// `bootstrap validate`'s verdict, with its lines for messages.
fn validate_verdict(ic: Option<&str>, ac: Option<&str>) -> (Verdict, String) {
    let problems = validate_files(
        ic.map(|t| ("install-config.yaml", t)),
        ac.map(|t| ("agent-config.yaml", t)),
    );
    let lines: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
    let verdict = if problems.iter().any(|p| p.problem.is_error()) {
        Refused
    } else if problems.is_empty() {
        Valid
    } else {
        Warned
    };
    (verdict, lines.join("\n"))
}

/// The inventory's verdict: load and validate, then what render reads; an accepted inventory's
/// rendered pair must pass `bootstrap validate` (render's self-check).
fn inventory_verdict(dir: &Path) -> (Verdict, String) {
    let (inv, problems) = match inventory::load_validated(dir) {
        Ok(x) => x,
        Err(e @ InventoryError::Invalid { .. }) => return (Refused, e.to_string()),
        Err(e) => panic!("{e}"),
    };
    let text = inventory::render_inventory_problems(dir, &problems);
    if problems.iter().any(|(_, p)| p.is_error()) {
        return (Refused, text);
    }
    let rendered = match bootstrap::render::render(&inv) {
        Ok(r) => r,
        Err(more) => {
            let all = inventory::render_inventory_problems(dir, &more);
            let verdict = if more.iter().any(|(_, p)| p.is_error()) {
                Refused
            } else {
                Warned
            };
            return (verdict, all);
        }
    };
    let (check, lines) = validate_verdict(
        Some(rendered.install_config.expose()),
        Some(&rendered.agent_config),
    );
    assert_ne!(
        check,
        Refused,
        "render's self-check refuses what the inventory accepted ({}):\n{lines}",
        dir.display()
    );
    (if problems.is_empty() { Valid } else { Warned }, text)
}

#[test]
fn inventory_and_bootstrap_validate_agree_on_every_predicate() {
    let tmp = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    let mut seen: Vec<(String, Verdict)> = Vec::new();
    for (i, (p, value, want)) in table().into_iter().enumerate() {
        let dir = tmp.path().join(format!("inv-{i}"));
        inventory_with(p, &value, &dir);
        let (inv, inv_text) = inventory_verdict(&dir);
        let (ic, ac) = installer_files_with(p, &value);
        let (val, val_text) = validate_verdict(ic.as_deref(), ac.as_deref());
        if inv != want || val != want {
            failures.push(format!(
                "{p:?} {value:?}: want {want:?}, inventory says {inv:?}, bootstrap validate says {val:?}\n  inventory:\n{inv_text}\n  validate:\n{val_text}"
            ));
        }
        seen.push((format!("{p:?}"), want));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // Every predicate has both a valid and an invalid example: the test can fail both ways.
    for (p, _) in &seen {
        for v in [Valid, Refused] {
            assert!(
                seen.iter().any(|(q, w)| q == p && *w == v),
                "{p} has no {v:?} example"
            );
        }
    }
}
