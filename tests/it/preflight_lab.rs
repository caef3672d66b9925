//! `bootstrap preflight` against the lab site: the lab release mirrored into a TLS site registry
//! with Basic auth (as in install_lab), `bootstrap-lab up` (a sushy-tools BMC per node, all three
//! over TLS verified against the lab CA with Basic auth; dnsmasq and chronyd on the bridge's
//! gateway serving the site's DNS and NTP), then the preflight: every check green; then five
//! things broken at once, as they break on sites (a DNS record missing from the site's server,
//! a MAC mistyped in nodes.yaml, a BMC password wrong, an NTP server that does not answer, the
//! registry CA of another registry), and each is named with its fix while the rest stay green.
//! No request that changes a BMC is sent: the emulators' request logs hold GETs only, and no
//! node is reset. Uses the lab's one machine network: the `lab-site` group.

use crate::install_lab::Lab;
use crate::support;
use crate::support::labsite::SiteLab;

use serde_json::Value;
use std::path::Path;

/// `bootstrap preflight --inventory INV --output json`: its exit code and report.
fn preflight(inventory: &Path) -> (Option<i32>, Value) {
    let o = support::run::command(&[
        "preflight",
        "--inventory",
        inventory.to_str().unwrap(),
        "--udp-timeout",
        "1s",
        "--output",
        "json",
    ])
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let report = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "preflight printed no JSON ({e}):\n{stdout}\n{}",
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (o.status.code(), report)
}

/// The check of `area` about `subject`.
fn check<'a>(report: &'a Value, area: &str, subject: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["area"] == area && c["subject"] == subject)
        .unwrap_or_else(|| panic!("no {area} check of {subject} in {report:#}"))
}

/// A failed check: its detail and its fix, which must contain each of `fix_names`.
fn failed(report: &Value, area: &str, subject: &str, fix_names: &[&str]) -> String {
    let c = check(report, area, subject);
    assert_eq!(c["status"], "fail", "{c:#}");
    let fix = c["fix"].as_str().unwrap_or_else(|| panic!("no fix: {c:#}"));
    for name in fix_names {
        assert!(fix.contains(name), "the fix does not name {name}: {c:#}");
    }
    c["detail"].as_str().unwrap().to_string()
}

/// How many GETs the emulators logged, and every request other than GET and HEAD (werkzeug's
/// `"METHOD PATH HTTP/1.1" STATUS` lines, coloured or not) but the session's.
fn logged_requests(site: &SiteLab) -> (usize, Vec<String>) {
    let mut gets = 0;
    let mut found = Vec::new();
    for em in &site.record().emulators {
        let log = fs_err::read_to_string(&em.log).unwrap_or_default();
        for line in log.lines() {
            let Some((_, request)) = line.split_once('"') else {
                continue;
            };
            let request = request.trim_start_matches(|c: char| {
                c == '\x1b' || c == '[' || c == ';' || c.is_ascii_digit() || c == 'm'
            });
            gets += usize::from(request.starts_with("GET /redfish/v1/"));
            if ["POST ", "PATCH ", "PUT ", "DELETE "]
                .iter()
                .any(|m| request.starts_with(m))
                && !request.contains("/SessionService/Sessions")
            {
                found.push(format!("{}: {line}", em.node));
            }
        }
    }
    (gets, found)
}

/// The lab site passes every check of the preflight; with five things broken as they break on
/// sites, each is its own failed row naming the fix (the node, the nodes.yaml or site.yaml
/// field, the record to add), the password never shown, the unbroken checks still ok; and
/// nothing was sent that changes a BMC: the emulators logged GETs only and no node was reset.
#[test]
fn the_lab_passes_every_check_and_each_break_is_named_with_its_fix() {
    let lab = Lab::new();
    let bases = support::labsite::site_bmcs(&lab.inventory, &support::labsite::free_ports());
    support::labsite::verify_every_bmc(&lab.inventory, &bases);
    let state = lab.dir.path().join("site");
    let (site, status) = SiteLab::up(&lab.inventory, &state, &[]);
    assert_eq!(status["dns"]["running"], true, "{status:#}");
    assert_eq!(status["ntp"]["listen"], "192.168.111.1:123", "{status:#}");

    let (code, report) = preflight(&lab.inventory);
    let not_ok: Vec<&Value> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] != "ok")
        .collect();
    assert!(not_ok.is_empty(), "not green: {not_ok:#?}");
    assert_eq!(code, Some(0));
    assert_eq!(report["summary"]["ok"], 19, "{report:#}");
    let ntp = check(&report, "ntp", "192.168.111.1");
    assert!(
        ntp["detail"].as_str().unwrap().contains("stratum 10"),
        "{ntp}"
    );
    let reg = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["area"] == "registry")
        .count();
    assert_eq!(reg, 2, "the CA and the release by digest: {report:#}");

    // The breaks, in a copy of the inventory (the lab keeps its own), and one record taken
    // out of the lab's DNS server (dnsmasq reads its records again on SIGHUP).
    let broken = lab.dir.path().join("broken");
    support::run::copy_dir(&lab.inventory, &broken);
    let edit = |file: &str, from: &str, to: &str| {
        let path = broken.join(file);
        let text = fs_err::read_to_string(&path).unwrap();
        assert!(text.contains(from), "{file} has no {from}");
        fs_err::write(&path, text.replacen(from, to, 1)).unwrap();
    };
    edit(
        "nodes.yaml",
        "mac: aa:bb:cc:00:00:02",
        "mac: aa:bb:cc:00:00:92",
    );
    let wrong = "wrong-bmc-pass-5d1c";
    fs_err::write(broken.join("secrets/bmc-wrong"), format!("admin:{wrong}\n")).unwrap();
    edit(
        "nodes.yaml",
        "file: secrets/bmc.example",
        "file: secrets/bmc-wrong",
    );
    // Nothing answers NTP at an unused address of the machine network.
    edit(
        "site.yaml",
        "ntp: [192.168.111.1]",
        "ntp: [192.168.111.1, 192.168.111.9]",
    );
    // The lab CA signed the BMCs' certificates, not the site registry's.
    fs_err::copy(site.record().ca, broken.join("registry-ca.pem")).unwrap();
    let dns = site.record().dns.expect("the lab serves DNS");
    let hosts = dns.dir.join("hosts");
    let records = fs_err::read_to_string(&hosts).unwrap();
    let kept: Vec<&str> = records
        .lines()
        .filter(|l| !l.contains(" api-int."))
        .collect();
    assert_eq!(kept.len() + 1, records.lines().count(), "{records}");
    fs_err::write(&hosts, kept.join("\n") + "\n").unwrap();
    let hup = std::process::Command::new("kill")
        .args(["-HUP", &dns.pid.unwrap().to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    std::thread::sleep(std::time::Duration::from_millis(500));

    let (code, report) = preflight(&broken);
    assert_eq!(code, Some(1), "{report:#}");
    let domain = "lab.rehearsal.example.com";
    let d = failed(
        &report,
        "dns",
        &format!("api-int.{domain}"),
        &[
            &format!("api-int.{domain} -> 192.168.111.5"),
            "networks.dns",
        ],
    );
    assert!(d.contains("NXDOMAIN"), "{d}");
    let d = failed(&report, "identity", "master-1", &["nodes[1].nics[].mac"]);
    assert!(
        d.contains("aa:bb:cc:00:00:02") && d.contains("aa:bb:cc:00:00:92"),
        "{d}"
    );
    let d = failed(
        &report,
        "bmc",
        "master-0",
        &["nodes[0].bmc.credentials", "secrets/bmc-wrong"],
    );
    assert!(d.contains("wrong user or password"), "{d}");
    let d = failed(
        &report,
        "ntp",
        "192.168.111.9",
        &["192.168.111.9", "networks.ntp"],
    );
    assert!(d.contains("no NTP reply"), "{d}");
    let registry = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| {
            c["area"] == "registry" && c["detail"].as_str().unwrap().contains("does not verify")
        })
        .unwrap_or_else(|| panic!("no registry CA failure: {report:#}"));
    assert!(
        registry["fix"]
            .as_str()
            .unwrap()
            .contains("references.registryCA (registry-ca.pem)"),
        "{registry}"
    );
    // What is not broken stays green.
    for (area, subject) in [
        ("dns", format!("api.{domain}")),
        ("dns", format!("*.apps.{domain}")),
        ("identity", "master-2".to_string()),
        ("virtual-media", "master-2".to_string()),
        ("ntp", "192.168.111.1".to_string()),
    ] {
        assert_eq!(
            check(&report, area, &subject)["status"],
            "ok",
            "{area} {subject}"
        );
    }
    assert!(
        !report.to_string().contains(wrong),
        "the BMC password leaked"
    );

    // Read-only: GETs (and session login/logout) only, in the preflight's own record and in
    // what the BMCs logged; no node reset.
    for bmc in report["bmcs"].as_array().unwrap() {
        for call in bmc["calls"].as_array().unwrap() {
            let (method, path) = (
                call["method"].as_str().unwrap(),
                call["path"].as_str().unwrap(),
            );
            assert!(
                method == "GET" || path.contains("/SessionService/Sessions"),
                "{call}"
            );
        }
    }
    let (gets, changing) = logged_requests(&site);
    assert!(gets > 0, "the emulators' logs were not read");
    assert_eq!(changing, Vec::<String>::new());
    assert!(
        site.resets().iter().all(|(_, n)| *n == 0),
        "{:?}",
        site.resets()
    );
}
