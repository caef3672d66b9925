//! `bootstrap release extract` against the lab: a release seeded upstream and mirrored into a
//! site registry (real Distribution registries), then `openshift-install` and `oc` taken out of
//! it and pinned as `oc adm release extract --command` pins them. A flipped byte in the layer is
//! refused naming the layer; a binary without the placeholder is refused; nothing is left under
//! the final name after a refusal.

use crate::support;

use bootstrap::openshift::pin;
use serde_json::Value;
use std::path::{Path, PathBuf};
use support::run::{bootstrap, failed, json, ok};
use support::Registry;

/// The lab upstream seeded, one release mirrored into a site registry under `ocp/`; the
/// release's destination by digest.
struct Site {
    site: Registry,
    _upstream: Registry,
    dir: tempfile::TempDir,
    release: String,
    version: String,
}

impl Site {
    fn new() -> Site {
        let upstream = Registry::plain();
        let site = Registry::plain();
        let dir = tempfile::tempdir().unwrap();
        let seed = support::labsite::seed(&upstream, dir.path());
        let seeded = json(&seed.join("seed.json"));
        let version = "4.18.3".to_string();
        let release = seeded["releases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["version"] == version.as_str())
            .unwrap();
        let image = release["image"].as_str().unwrap();
        let by_digest = format!(
            "{}@{}",
            image.rsplit_once(':').unwrap().0,
            release["digest"].as_str().unwrap()
        );
        let isc = dir.path().join("isc.yaml");
        fs_err::write(
            &isc,
            format!("apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  platform:\n    architectures: [amd64]\n    release: {by_digest}\n"),
        )
        .unwrap();
        let record = dir.path().join("record.json");
        ok(&bootstrap(&[
            "mirror",
            "-c",
            isc.to_str().unwrap(),
            "--record",
            record.to_str().unwrap(),
            &format!("docker://{}/ocp", site.host()),
            "--plain-http",
            &upstream.host(),
            "--plain-http",
            &site.host(),
        ]));
        let rec = json(&record);
        let img = rec["images"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["category"] == "release" && i["path"] == "openshift/release-images")
            .expect("the record names the release image");
        let dest = img["destination"].as_str().unwrap();
        let name = dest.split('@').next().unwrap();
        let repo = match name.rsplit_once(':') {
            Some((r, tag)) if !tag.contains('/') => r,
            _ => name,
        };
        let release = format!("{repo}@{}", img["digest"].as_str().unwrap());
        Site {
            site,
            _upstream: upstream,
            dir,
            release,
            version,
        }
    }

    fn extract(&self, command: &str, to: &Path) -> std::process::Output {
        bootstrap(&[
            "release",
            "extract",
            "--command",
            command,
            "--to",
            to.to_str().unwrap(),
            &format!("docker://{}", self.release),
            "--plain-http",
            &self.site.host(),
            "--output",
            "json",
        ])
    }

    /// The blob file of the layer of `component` (the record's component image) that holds
    /// its binary, in the site registry's storage.
    fn layer_of(&self, extracted: &Value) -> PathBuf {
        let hex = extracted["layer"]
            .as_str()
            .unwrap()
            .trim_start_matches("sha256:")
            .to_string();
        self.site
            .storage_dir()
            .join("docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(&hex)
            .join("data")
    }
}

/// The binary's placeholder holds the release pullspec by digest, byte for byte, and a NUL; the
/// version placeholder the release version; the rest is the image's file unchanged.
#[test]
fn extracted_binaries_are_pinned_to_the_mirrored_release() {
    let site = Site::new();
    for (command, file) in [("openshift-install", "openshift-install"), ("oc", "oc")] {
        let to = site.dir.path().join(format!("bin-{command}"));
        let out: Value = serde_json::from_str(&ok(&site.extract(command, &to))).unwrap();
        let path = to.join(file);
        assert_eq!(out["path"], path.to_str().unwrap());
        assert_eq!(out["release"], site.release.as_str());
        assert_eq!(out["version"], site.version.as_str());
        assert_eq!(out["versionPinned"], true);
        let bytes = fs_err::read(&path).unwrap();
        assert_eq!(out["size"], bytes.len() as u64);
        let sha = support::layers::sha256_digest(&bytes);
        assert_eq!(out["sha256"], sha.trim_start_matches("sha256:"));
        assert_eq!(
            pin::unpinned_marker(&bytes),
            None,
            "{command} is still unpinned"
        );
        let mut expected = site.release.as_bytes().to_vec();
        expected.push(0);
        let at = bytes
            .windows(expected.len())
            .position(|w| w == expected.as_slice())
            .unwrap_or_else(|| panic!("{command} does not hold the pullspec and a NUL"));
        let rest = &pin::release_image_placeholder()[expected.len()..];
        assert_eq!(
            &bytes[at + expected.len()..at + expected.len() + rest.len()],
            rest
        );
        let mut version = site.version.as_bytes().to_vec();
        version.push(0);
        assert!(bytes
            .windows(version.len())
            .any(|w| w == version.as_slice()));
        use std::os::unix::fs::PermissionsExt;
        let mode = fs_err::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
    }
}

/// A layer whose bytes changed in the registry is refused naming it; nothing is left under the
/// final name or as a partial file.
#[test]
fn a_flipped_byte_in_the_layer_is_refused_naming_the_layer() {
    let site = Site::new();
    let first = site.dir.path().join("first");
    let out: Value = serde_json::from_str(&ok(&site.extract("openshift-install", &first))).unwrap();
    let blob = site.layer_of(&out);
    let mut bytes = fs_err::read(&blob).unwrap();
    let last = bytes.len() - 10;
    bytes[last] ^= 0x01;
    fs_err::write(&blob, bytes).unwrap();
    let to = site.dir.path().join("second");
    let text = failed(&site.extract("openshift-install", &to));
    let layer = out["layer"].as_str().unwrap();
    assert!(text.contains(layer), "{text}");
    let left: Vec<_> = fs_err::read_dir(&to)
        .map(|d| d.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// Pushes to `registry` a release (`bad/openshift/release-images`) whose only component,
/// `installer`, carries `binary` as `usr/bin/openshift-install`; returns the release by digest.
fn push_release_with_installer(registry: &Registry, binary: Vec<u8>) -> String {
    use bootstrap::oci::registry::{Registries, RegistryOptions};
    use bootstrap_lab::image::{build, File, ImageSpec};
    use bootstrap_lab::push::Pusher;
    let host = registry.host();
    let installer = build(
        "bad/openshift/release",
        None,
        &ImageSpec {
            layers: vec![vec![File::executable("usr/bin/openshift-install", binary)]],
            ..Default::default()
        },
    )
    .unwrap();
    let references = serde_json::json!({
        "kind": "ImageStream",
        "apiVersion": "image.openshift.io/v1",
        "metadata": {"name": "4.18.9"},
        "spec": {"tags": [{"name": "installer", "from": {"kind": "DockerImage", "name": installer.pinned("quay.io")}}]},
    });
    let release = build(
        "bad/openshift/release-images",
        Some("4.18.9-x86_64"),
        &ImageSpec {
            labels: [("io.openshift.release".to_string(), "4.18.9".to_string())].into(),
            layers: vec![vec![File::new(
                "release-manifests/image-references",
                serde_json::to_vec(&references).unwrap(),
            )]],
            ..Default::default()
        },
    )
    .unwrap();
    let pinned = release.pinned(&host);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let regs = Registries::new(RegistryOptions {
            plain_http: vec![host.clone()],
            ..Default::default()
        })
        .unwrap();
        let client = regs.client(&host).unwrap();
        Pusher::new(&client)
            .push_all(&[&installer, &release])
            .await
            .unwrap();
    });
    pinned
}

/// A component whose binary has no release placeholder (it would install its compiled-in
/// release) is refused, and nothing is written; the same release with the placeholder passes,
/// so the refusal is about the placeholder.
#[test]
fn a_binary_without_the_placeholder_is_refused() {
    let site = Registry::plain();
    let work = tempfile::tempdir().unwrap();
    let run = |release: &str, to: &Path| {
        bootstrap(&[
            "release",
            "extract",
            "--command",
            "openshift-install",
            "--to",
            to.to_str().unwrap(),
            &format!("docker://{release}"),
            "--plain-http",
            &site.host(),
        ])
    };
    let unpinnable = push_release_with_installer(&site, b"an installer with no marker".to_vec());
    let to = work.path().join("bin");
    let text = failed(&run(&unpinnable, &to));
    assert!(
        text.contains("carries no release image placeholder"),
        "{text}"
    );
    assert!(!to.join("openshift-install").exists());
    assert_eq!(
        fs_err::read_dir(&to).unwrap().count(),
        0,
        "a partial file was left"
    );

    let mut binary = b"an installer ".to_vec();
    binary.extend(pin::release_image_placeholder());
    let pinnable = push_release_with_installer(&site, binary);
    ok(&run(&pinnable, &to));
    assert!(to.join("openshift-install").exists());
}

/// The lab's installer stand-in, extracted and pinned like the real one, makes an agent ISO
/// from the rendered lab files and the extra manifests (listed by xorriso), writes the files the
/// later stages read, and consumes its inputs.
#[test]
fn the_installer_stand_in_makes_an_agent_iso() {
    let site = Site::new();
    let bin = site.dir.path().join("bin");
    ok(&site.extract("openshift-install", &bin));
    let installer = bin.join("openshift-install");
    let version = std::process::Command::new(&installer)
        .arg("version")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    let text = ok(&version);
    assert!(
        text.contains(&format!("release image {}", site.release)),
        "{text}"
    );

    let work = site.dir.path().join("work");
    fs_err::create_dir_all(work.join("openshift")).unwrap();
    for f in ["install-config.yaml", "agent-config.yaml"] {
        fs_err::copy(
            support::run::repo("tests/testdata/render/lab").join(f),
            work.join(f),
        )
        .unwrap();
    }
    fs_err::write(
        work.join("openshift/99-worker-blacklist-irdma.yaml"),
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 99-worker-blacklist-irdma\n",
    )
    .unwrap();
    let made = std::process::Command::new(&installer)
        .args(["agent", "create", "image", "--dir"])
        .arg(&work)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&made.stderr).into_owned();
    assert!(made.status.success(), "{log}");
    assert!(log.contains("level=info msg=\"Generated ISO at"), "{log}");
    let listed = std::process::Command::new("xorriso")
        .args(["-indev"])
        .arg(work.join("agent.x86_64.iso"))
        .args(["-find", "/", "-type", "f"])
        .output()
        .unwrap();
    let files = String::from_utf8_lossy(&listed.stdout);
    for f in [
        "'/install-config.yaml'",
        "'/agent-config.yaml'",
        "'/openshift/99-worker-blacklist-irdma.yaml'",
    ] {
        assert!(files.contains(f), "{f} not in the ISO: {files}");
    }
    assert!(
        !work.join("install-config.yaml").exists(),
        "inputs are consumed"
    );
    assert!(!work.join("openshift").exists(), "inputs are consumed");
    let rendezvous = fs_err::read_to_string(work.join("rendezvousIP")).unwrap();
    assert!(
        rendezvous.trim().parse::<std::net::IpAddr>().is_ok(),
        "{rendezvous}"
    );
    use std::os::unix::fs::PermissionsExt;
    for secret in [
        "auth/kubeconfig",
        "auth/kubeadmin-password",
        ".openshift_install_state.json",
    ] {
        let mode = fs_err::metadata(work.join(secret))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{secret}");
    }
    let state = json(&work.join(".openshift_install_state.json"));
    let token = state["*gencrypto.AuthConfig"]["WatcherAuthToken"]
        .as_str()
        .unwrap();
    assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
}

/// A stand-in never extracted from a release (its placeholder unchanged) refuses to start, as
/// an unpinned installer would install the wrong release.
#[test]
fn an_unpinned_stand_in_refuses_to_start() {
    use bootstrap_lab::standin::{script, Tool};
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("openshift-install");
    let bin = support::run::lab_bin();
    fs_err::write(&path, script(Tool::OpenshiftInstall, &bin, "4.18.3")).unwrap();
    fs_err::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = std::process::Command::new(&path)
        .arg("version")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let log = String::from_utf8_lossy(&o.stderr);
    assert!(
        log.contains("level=fatal") && log.contains("placeholder was not rewritten"),
        "{log}"
    );
}
