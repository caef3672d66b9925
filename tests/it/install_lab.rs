//! `bootstrap install` through the iso stage against the lab: the upstream seeded by `bootstrap
//! lab seed` (real Distribution), releases 4.18.2 and 4.18.3 mirrored into a TLS site registry
//! with Basic auth (its CA and the pull secret are the inventory's), the lab inventory pointed at
//! that mirror, and the release's own `openshift-install` and `oc` (the lab stand-ins) extracted,
//! pinned and run by the pipeline exactly as it would run the real ones.

use crate::support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};
use support::run::{bootstrap, command, json, ok};
use support::Registry;

const SITE_USER: &str = "site-puller";
const SITE_PASSWORD: &str = "site-pull-secret-0a1b2c3d";

/// The lab, a mirrored site registry, and an inventory pointed at it.
pub(crate) struct Lab {
    _upstream: Registry,
    site: Registry,
    pub(crate) dir: tempfile::TempDir,
    pub(crate) inventory: PathBuf,
}

impl Lab {
    pub(crate) fn new() -> Lab {
        let upstream = Registry::plain();
        let site = Registry::tls_basic(SITE_USER, SITE_PASSWORD);
        let dir = tempfile::tempdir().unwrap();
        let seed = support::labsite::seed(&upstream, dir.path());
        let isc = dir.path().join("isc.yaml");
        fs_err::write(
            &isc,
            "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  platform:\n    architectures: [amd64]\n    channels:\n    - name: stable-4.18\n      minVersion: 4.18.2\n      maxVersion: 4.18.3\n",
        )
        .unwrap();
        let record = dir.path().join("mirror-record.json");
        let auth = dir.path().join("auth.json");
        support::write_merged_authfile(&auth, &[&site]);
        ok(&bootstrap(&[
            "mirror",
            "-c",
            isc.to_str().unwrap(),
            "--graph-url",
            &format!("file://{}", seed.join("graph.json").display()),
            "--record",
            record.to_str().unwrap(),
            &format!("docker://{}/ocp", site.host()),
            "--plain-http",
            &upstream.host(),
            "--authfile",
            auth.to_str().unwrap(),
            "--ca-bundle",
            site.ca_pem().unwrap().to_str().unwrap(),
        ]));
        let inventory = support::labsite::site_inventory(dir.path(), &site, &record, "4.18.3");
        Lab {
            _upstream: upstream,
            site,
            dir,
            inventory,
        }
    }

    pub(crate) fn run_dir(&self) -> PathBuf {
        self.dir.path().join("run")
    }

    pub(crate) fn install(&self, extra: &[&str]) -> Output {
        let run = self.run_dir();
        let mut args = vec![
            "install",
            "--inventory",
            self.inventory.to_str().unwrap(),
            "--run",
            run.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        command(&args).output().unwrap()
    }

    pub(crate) fn edit(&self, file: &str, from: &str, to: &str) {
        let path = self.inventory.join(file);
        let text = fs_err::read_to_string(&path).unwrap();
        assert!(text.contains(from), "{file} has no {from}");
        fs_err::write(&path, text.replacen(from, to, 1)).unwrap();
    }
}

/// `STAGE ACTION` pairs of a run's text report.
fn actions(stdout: &str) -> Vec<(String, String)> {
    stdout
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let (stage, action) = (w.next()?, w.next()?);
            bootstrap::install::Stage::NAMES
                .contains(&stage)
                .then(|| (stage.to_string(), action.to_string()))
        })
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// `bootstrap install --until iso` (the boot stage needs the lab site's BMCs): exit 0, stdout.
fn until_iso(lab: &Lab) -> String {
    let o = lab.install(&["--until", "iso"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The files in an ISO, as `xorriso -indev ISO -find / -type f` lists them.
fn iso_files(iso: &Path) -> Vec<String> {
    let o = std::process::Command::new("xorriso")
        .arg("-indev")
        .arg(iso)
        .args(["-find", "/", "-type", "f"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| l.trim_matches('\'').to_string())
        .collect()
}

/// One file of an ISO, read with xorriso.
fn iso_file(iso: &Path, path: &str, scratch: &Path) -> String {
    let out = scratch.join(path.trim_start_matches('/').replace('/', "_"));
    let o = std::process::Command::new("xorriso")
        .args(["-osirrox", "on", "-indev"])
        .arg(iso)
        .args(["-extract", path])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    fs_err::read_to_string(&out).unwrap()
}

/// From an empty run directory through iso: the ISO holds both configs, the inventory's
/// manifest and the irdma MachineConfig for the role the inventory names (and none for the
/// other), which parses as a MachineConfig with its role label; the installer was pinned to the
/// site's release. A second run does nothing; a MAC change reruns render and iso (validate
/// re-checks, writing nothing) but not tools; a release change reruns tools and iso. Secrets stay
/// out of logs, state.json and status.
#[test]
fn the_lab_goes_through_iso_and_reruns_only_what_changed() {
    let lab = Lab::new();
    let run = lab.run_dir();
    let stdout = until_iso(&lab);
    assert_eq!(
        actions(&stdout),
        pairs(&[
            ("validate", "ran"),
            ("render", "ran"),
            ("tools", "ran"),
            ("iso", "ran"),
        ])
    );
    let iso = run.join("iso/work/agent.x86_64.iso");
    let files = iso_files(&iso);
    for f in [
        "/install-config.yaml",
        "/agent-config.yaml",
        "/openshift/50-chrony.yaml",
        "/openshift/99-master-blacklist-irdma.yaml",
    ] {
        assert!(files.contains(&f.to_string()), "{f} not in {files:?}");
    }
    assert!(
        !files.iter().any(|f| f.contains("worker-blacklist-irdma")),
        "{files:?}"
    );
    let mc: Value = serde_saphyr::from_str(&iso_file(
        &iso,
        "/openshift/99-master-blacklist-irdma.yaml",
        lab.dir.path(),
    ))
    .unwrap();
    assert_eq!(mc["apiVersion"], "machineconfiguration.openshift.io/v1");
    assert_eq!(mc["kind"], "MachineConfig");
    assert_eq!(
        mc["metadata"]["labels"]["machineconfiguration.openshift.io/role"],
        "master"
    );
    assert_eq!(mc["spec"]["kernelArguments"][0], "module_blacklist=irdma");
    // The originals stay; the installer consumed its copies.
    assert!(run.join("config/install-config.yaml").exists());
    assert!(!run.join("iso/work/install-config.yaml").exists());
    let described = json(&run.join("iso/iso.json"));
    let bytes = fs_err::read(&iso).unwrap();
    assert_eq!(described["size"], bytes.len() as u64);
    assert_eq!(
        described["sha256"],
        support::layers::sha256_digest(&bytes).trim_start_matches("sha256:")
    );
    let tools = json(&run.join("tools/tools.json"));
    let release = tools["release"].as_str().unwrap().to_string();
    assert!(release.starts_with(&format!(
        "{}/ocp/openshift/release-images@sha256:",
        lab.site.host()
    )));
    let installer = fs_err::read(run.join("tools/openshift-install")).unwrap();
    assert!(installer
        .windows(release.len())
        .any(|w| w == release.as_bytes()));

    let again = until_iso(&lab);
    assert_eq!(
        actions(&again),
        pairs(&[
            ("validate", "skipped"),
            ("render", "skipped"),
            ("tools", "skipped"),
            ("iso", "skipped"),
        ])
    );

    lab.edit(
        "nodes.yaml",
        "mac: aa:bb:cc:00:00:02",
        "mac: aa:bb:cc:00:00:22",
    );
    let mac = until_iso(&lab);
    assert_eq!(
        actions(&mac),
        pairs(&[
            ("validate", "ran"),
            ("render", "ran"),
            ("tools", "skipped"),
            ("iso", "ran"),
        ])
    );

    lab.edit("site.yaml", "version: 4.18.3", "version: 4.18.2");
    let changed = until_iso(&lab);
    let ran: Vec<(String, String)> = actions(&changed)
        .into_iter()
        .filter(|(s, _)| s == "tools" || s == "iso")
        .collect();
    assert_eq!(ran, pairs(&[("tools", "ran"), ("iso", "ran")]));
    let tools = json(&run.join("tools/tools.json"));
    assert_ne!(tools["release"].as_str().unwrap(), release);

    let mut seen = String::new();
    for entry in fs_err::read_dir(run.join("logs")).unwrap() {
        seen.push_str(&fs_err::read_to_string(entry.unwrap().path()).unwrap());
    }
    seen.push_str(&fs_err::read_to_string(run.join("state.json")).unwrap());
    seen.push_str(&ok(&command(&[
        "install",
        "status",
        "--run",
        run.to_str().unwrap(),
    ])
    .output()
    .unwrap()));
    assert!(!seen.contains(SITE_PASSWORD), "the site password leaked");
    let basic = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(format!("{SITE_USER}:{SITE_PASSWORD}"))
    };
    assert!(!seen.contains(&basic), "the pull secret's token leaked");
}

/// `cluster.release.installer: openshift-baremetal-install`: the tools stage takes that binary
/// (from the `baremetal-installer` component) and `oc` (built as the real one is: the version
/// placeholder only), records each placeholder written, and the iso stage runs the installer
/// tools.json names, with a trust bundle of the system's roots and the site CA checked against
/// the mirror first; the installer's `oc` took the base ISO out of the release over that trust,
/// which it could not do without it.
#[test]
fn the_installer_the_inventory_names_runs_and_trusts_the_site_registry() {
    let lab = Lab::new();
    let run = lab.run_dir();
    lab.edit(
        "site.yaml",
        "    version: 4.18.3",
        "    version: 4.18.3\n    installer: openshift-baremetal-install",
    );
    until_iso(&lab);
    let tools = json(&run.join("tools/tools.json"));
    assert_eq!(tools["installer"]["name"], "openshift-baremetal-install");
    assert_eq!(tools["oc"]["name"], "oc");
    let written = |who: &str| -> Vec<String> {
        tools[who]["markers"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["offset"].is_u64())
            .map(|m| m["marker"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        written("installer"),
        ["release-image", "release-version", "release-architecture"]
    );
    assert_eq!(written("oc"), ["release-version"]);
    assert!(run.join("tools/openshift-baremetal-install").is_file());
    assert!(!run.join("tools/openshift-install").exists());
    let log = fs_err::read_to_string(run.join("logs/iso.log")).unwrap();
    assert!(
        log.contains("tools/openshift-baremetal-install agent create image"),
        "{log}"
    );
    assert!(
        log.contains(&format!(
            "{} verifies with trust-bundle.pem",
            lab.site.host()
        )),
        "{log}"
    );
    assert!(
        log.contains("Extracting base ISO from release payload"),
        "{log}"
    );
    let bundle = fs_err::read_to_string(run.join("iso/trust-bundle.pem")).unwrap();
    let ca = fs_err::read_to_string(lab.site.ca_pem().unwrap()).unwrap();
    assert!(bundle.contains(ca.trim()), "the site CA is in the bundle");
    // The ISO records the base ISO the installer's oc took from machine-os-images.
    let base = iso_file(
        &run.join("iso/work/agent.x86_64.iso"),
        "/base-iso",
        lab.dir.path(),
    );
    assert!(
        base.contains("/openshift-release-dev/ocp-v4.0-art-dev@sha256:"),
        "{base}"
    );

    // The installer's trust is needed: the extracted `oc`, run as the installer runs it but
    // without SSL_CERT_FILE, cannot take the base ISO out of the mirror (the site CA is not a
    // system root); with the bundle it can.
    let icsp = lab.dir.path().join("icsp.yaml");
    let ic: Value = serde_saphyr::from_str(
        &fs_err::read_to_string(run.join("config/install-config.yaml")).unwrap(),
    )
    .unwrap();
    let mut entries = String::new();
    for e in ic["imageDigestSources"].as_array().unwrap() {
        for m in e["mirrors"].as_array().unwrap() {
            entries.push_str(&format!(
                "  - mirrors:\n    - {}\n    source: {}\n",
                m.as_str().unwrap(),
                e["source"].as_str().unwrap()
            ));
        }
    }
    fs_err::write(
        &icsp,
        format!("apiVersion: operator.openshift.io/v1alpha1\nkind: ImageContentSourcePolicy\nmetadata:\n  name: image-policy\nspec:\n  repositoryDigestMirrors:\n{entries}"),
    )
    .unwrap();
    let secret = lab.dir.path().join("registry-config.json");
    fs_err::write(&secret, ic["pullSecret"].as_str().unwrap()).unwrap();
    let image = base.split_whitespace().next().unwrap().to_string();
    let extract = |bundle: Option<&Path>| {
        let mut cmd = std::process::Command::new(run.join("tools/oc"));
        cmd.args(["image", "extract", "--path"])
            .arg(format!(
                "/coreos/coreos-x86_64.iso:{}",
                lab.dir.path().join("out").display()
            ))
            .arg("--confirm")
            .arg(format!("--icsp-file={}", icsp.display()))
            .arg(&image)
            .arg(format!("--registry-config={}", secret.display()))
            .env_clear()
            .env("PATH", "/usr/bin:/bin");
        if let Some(b) = bundle {
            cmd.env("SSL_CERT_FILE", b);
        }
        cmd.output().unwrap()
    };
    let without = extract(None);
    let err = String::from_utf8_lossy(&without.stderr);
    assert_eq!(without.status.code(), Some(1), "{err}");
    assert!(err.contains("error:"), "{err}");
    assert!(!lab.dir.path().join("out/coreos-x86_64.iso").exists());
    let with = extract(Some(&run.join("iso/trust-bundle.pem")));
    assert!(
        with.status.success(),
        "{}",
        String::from_utf8_lossy(&with.stderr)
    );
    assert!(lab.dir.path().join("out/coreos-x86_64.iso").is_file());
}

/// kill -9 while the iso stage holds (after its work, before publishing; the documented test
/// hook), then rerun: it completes, and nothing under RUN/iso was taken for a finished output.
/// An --installer that was never pinned is refused by the tools stage.
#[test]
fn kill_9_during_iso_then_rerun_completes() {
    let lab = Lab::new();
    let run = lab.run_dir();
    let mut child = command(&[
        "install",
        "--inventory",
        lab.inventory.to_str().unwrap(),
        "--run",
        run.to_str().unwrap(),
    ])
    .env("BOOTSTRAP_TEST_STAGE_PAUSE", "iso")
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let state = run.join("state.json");
        // iso.json is the stage's last file: the hook now holds it before publishing.
        if state.exists() && run.join(".staging/iso/iso.json").exists() {
            let s = json(&state);
            let iso = s["stages"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["stage"] == "iso");
            if iso.is_some_and(|x| x["status"] == "running") {
                break;
            }
        }
        assert!(Instant::now() < deadline, "iso never ran");
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!run.join("iso").exists(), "a half-made iso/ is visible");
    let stdout = until_iso(&lab);
    let iso: Vec<(String, String)> = actions(&stdout)
        .into_iter()
        .filter(|(s, _)| s == "tools" || s == "iso")
        .collect();
    assert_eq!(iso, pairs(&[("tools", "skipped"), ("iso", "ran")]));
    assert!(stdout.contains("was interrupted"), "{stdout}");
    assert!(run.join("iso/work/agent.x86_64.iso").exists());
    assert!(!run.join(".staging/iso").exists());

    let unpinned = lab.dir.path().join("openshift-install");
    fs_err::write(
        &unpinned,
        bootstrap_lab::standin::script(
            bootstrap_lab::standin::Tool::OpenshiftInstall,
            &support::run::lab_bin(),
            "4.18.3",
        ),
    )
    .unwrap();
    let o = lab.install(&["--installer", unpinned.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let log = fs_err::read_to_string(run.join("logs/tools.log")).unwrap();
    assert!(
        log.contains("its release placeholder was never rewritten"),
        "{log}"
    );

    // A given installer that fails: tools takes it (with the warning), iso fails quoting the
    // installer's last error line and naming its log.
    let failing = lab.dir.path().join("failing-install");
    fs_err::write(
        &failing,
        "#!/bin/sh\necho 'level=info msg=\"Consuming Install Config from target directory\"' >&2\necho 'level=error msg=\"no space left on device writing agent.x86_64.iso\"' >&2\nexit 1\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs_err::set_permissions(&failing, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = lab.install(&["--installer", failing.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("read {}", run.join("logs/iso.log").display())),
        "{err}"
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("no space left on device writing agent.x86_64.iso"),
        "{stdout}"
    );
    let tools = json(&run.join("tools/tools.json"));
    assert_eq!(tools["installer"]["pinned"], false);
    let log = fs_err::read_to_string(run.join("logs/tools.log")).unwrap();
    assert!(log.contains("bootstrap did not pin it"), "{log}");
    // The last good ISO is kept: a failed stage never replaces its previous outputs.
    assert!(run.join("iso/work/agent.x86_64.iso").exists());
}

/// `boot.isoURL`: before any BMC is touched, the site's URL must serve the ISO the iso stage
/// made. A file of the same length with one byte changed is refused naming both sha256s, and no
/// BMC is contacted; the right ISO passes and the stage goes on to the BMCs (none run here, so
/// they are unreachable, named per node).
#[test]
fn an_iso_url_is_checked_byte_for_byte_before_any_bmc() {
    let lab = Lab::new();
    until_iso(&lab);
    let run = lab.run_dir();
    let iso = run.join("iso/work/agent.x86_64.iso");
    let other_dir = lab.dir.path().join("other");
    fs_err::create_dir_all(&other_dir).unwrap();
    let other = other_dir.join("agent.x86_64.iso");
    let mut bytes = fs_err::read(&iso).unwrap();
    bytes[40_000] ^= 0xff;
    fs_err::write(&other, &bytes).unwrap();
    let (_wrong, wrong_url) = crate::serve::start(&other);
    lab.edit(
        "site.yaml",
        "  isoServer:\n    listen: 127.0.0.1:0",
        &format!("  isoURL: {wrong_url}"),
    );
    let o = lab.install(&["--until", "boot"]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("boot.isoURL") && err.contains("sha256"),
        "{err}"
    );
    let log = fs_err::read_to_string(run.join("logs/boot.log")).unwrap();
    assert!(!log.contains("/redfish/"), "a BMC was contacted:\n{log}");

    let (_right, right_url) = crate::serve::start(&iso);
    lab.edit("site.yaml", &wrong_url, &right_url);
    let o = lab.install(&["--until", "boot"]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("3 of 3 nodes failed to boot"), "{err}");
    assert!(
        err.contains("master-0 (BMC https://127.0.0.1:8001"),
        "{err}"
    );
    let log = fs_err::read_to_string(run.join("logs/boot.log")).unwrap();
    assert!(
        log.contains(&format!("the BMCs fetch the ISO from {right_url}")),
        "{log}"
    );
}
