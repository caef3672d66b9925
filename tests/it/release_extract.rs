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
    upstream: Registry,
    dir: tempfile::TempDir,
    release: String,
    version: String,
    record: PathBuf,
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
            upstream,
            dir,
            release,
            version,
            record,
        }
    }

    /// `bootstrap release extract` with the mirror record saying where the components are.
    fn extract(&self, command: &str, to: &Path) -> std::process::Output {
        bootstrap(&[
            "release",
            "extract",
            "--command",
            command,
            "--to",
            to.to_str().unwrap(),
            &format!("docker://{}", self.release),
            "--record",
            self.record.to_str().unwrap(),
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

/// Each binary is pinned with exactly the placeholders oc fills in it (openshift/oc
/// `extract_tools.go`): the installers get the release pullspec by digest, the version and the
/// platform; `oc`, built as the real one is (no image placeholder, oc's own `!` search
/// constants, a version placeholder), gets the version only and is not refused. Each value is
/// followed by a NUL and the rest of its placeholder; the rest of the file is unchanged.
#[test]
fn extracted_binaries_are_pinned_with_the_markers_oc_fills() {
    use bootstrap::openshift::pin::Marker;
    let site = Site::new();
    let installer_markers = [
        ("release-image", site.release.clone()),
        ("release-version", site.version.clone()),
        ("release-architecture", "linux/amd64".to_string()),
    ];
    let oc_markers = [("release-version", site.version.clone())];
    for (command, markers) in [
        ("openshift-install", &installer_markers[..]),
        ("openshift-baremetal-install", &installer_markers[..]),
        ("oc", &oc_markers[..]),
    ] {
        let to = site.dir.path().join(format!("bin-{command}"));
        let out: Value = serde_json::from_str(&ok(&site.extract(command, &to))).unwrap();
        let path = to.join(command);
        assert_eq!(out["path"], path.to_str().unwrap());
        assert_eq!(out["release"], site.release.as_str());
        assert_eq!(out["version"], site.version.as_str());
        let bytes = fs_err::read(&path).unwrap();
        assert_eq!(out["size"], bytes.len() as u64);
        let sha = support::layers::sha256_digest(&bytes);
        assert_eq!(out["sha256"], sha.trim_start_matches("sha256:"));
        assert_eq!(pin::unpinned_marker(&bytes), None, "{command}");
        let recorded: Vec<(String, String)> = out["markers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                assert!(m["offset"].is_u64(), "{command}: {m} was not rewritten");
                (
                    m["marker"].as_str().unwrap().to_string(),
                    m["value"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let wanted: Vec<(String, String)> = markers
            .iter()
            .map(|(m, v)| (m.to_string(), v.clone()))
            .collect();
        assert_eq!(recorded, wanted, "{command}");
        for m in out["markers"].as_array().unwrap() {
            let marker = match m["marker"].as_str().unwrap() {
                "release-image" => Marker::ReleaseImage,
                "release-version" => Marker::ReleaseVersion,
                _ => Marker::ReleaseArchitecture,
            };
            let at = m["offset"].as_u64().unwrap() as usize;
            let value = m["value"].as_str().unwrap().as_bytes();
            assert_eq!(&bytes[at..at + value.len()], value, "{command}");
            assert_eq!(bytes[at + value.len()], 0);
            let placeholder = marker.placeholder();
            assert_eq!(
                &bytes[at + value.len() + 1..at + placeholder.len()],
                &placeholder[value.len() + 1..],
                "{command}: the rest of the placeholder is kept"
            );
        }
        if command == "oc" {
            for m in [
                Marker::ReleaseImage,
                Marker::ReleaseVersion,
                Marker::ReleaseArchitecture,
            ] {
                let c = m.search_constant();
                assert!(
                    bytes.windows(c.len()).any(|w| w == c.as_slice()),
                    "oc's own {} constant was touched",
                    m.name()
                );
            }
        }
        use std::os::unix::fs::PermissionsExt;
        let mode = fs_err::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
        let version = std::process::Command::new(&path)
            .arg("version")
            .env_clear()
            .output()
            .unwrap();
        let text = ok(&version);
        if command == "oc" {
            assert!(
                text.contains(&format!("Client Version: {}", site.version)),
                "{text}"
            );
        } else {
            assert!(
                text.starts_with(&format!("{command} {}", site.version)),
                "{text}"
            );
            assert!(text.contains("release architecture amd64"), "{text}");
        }
    }
}

/// A release mirrored by another tool into another layout (`oc adm release mirror`'s: the
/// release and every component in one repository, `ocp4/openshift4`, components tagged
/// VERSION-ARCH-NAME, copied here with skopeo) is found through the ImageDigestMirrorSet that
/// tool gives, as `oc adm release extract --idms-file` finds it; without a mirror set the
/// components are looked for where image-references names them, and the error says so.
#[test]
fn a_release_in_another_layout_is_found_through_its_mirror_set() {
    let site = Site::new();
    let other = Registry::plain();
    let seeded = json(&site.dir.path().join("seed/seed.json"));
    let release = seeded["releases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["version"] == site.version.as_str())
        .unwrap()
        .clone();
    let up = site.upstream.host();
    let copy = |from: &str, to: &str| {
        let st = std::process::Command::new("skopeo")
            .args([
                "copy",
                "-q",
                "--all",
                "--preserve-digests",
                "--src-tls-verify=false",
                "--dest-tls-verify=false",
            ])
            .arg(format!("docker://{from}"))
            .arg(format!("docker://{to}"))
            .status()
            .unwrap();
        assert!(st.success(), "skopeo copy {from} {to}");
    };
    let repo = format!("{}/ocp4/openshift4", other.host());
    let release_image = release["image"].as_str().unwrap();
    let release_digest = release["digest"].as_str().unwrap();
    copy(
        &format!(
            "{}@{release_digest}",
            release_image.rsplit_once(':').unwrap().0
        ),
        &format!("{repo}:{}-x86_64", site.version),
    );
    for (name, pinned) in release["components"].as_object().unwrap() {
        if ["cli", "baremetal-installer"].contains(&name.as_str()) {
            copy(
                pinned.as_str().unwrap(),
                &format!("{repo}:{}-x86_64-{name}", site.version),
            );
        }
    }
    let idms = site.dir.path().join("idms.yaml");
    fs_err::write(
        &idms,
        format!("apiVersion: config.openshift.io/v1\nkind: ImageDigestMirrorSet\nmetadata:\n  name: release\nspec:\n  imageDigestMirrors:\n  - mirrors:\n    - {repo}\n    source: {up}/openshift-release-dev/ocp-release\n  - mirrors:\n    - {repo}\n    source: {up}/openshift-release-dev/ocp-v4.0-art-dev\n"),
    )
    .unwrap();
    let run = |command: &str, to: &Path, idms: Option<&Path>| {
        let mut args = vec![
            "release".to_string(),
            "extract".into(),
            "--command".into(),
            command.into(),
            "--to".into(),
            to.display().to_string(),
            format!("docker://{repo}@{release_digest}"),
            "--plain-http".into(),
            other.host(),
            "--output".into(),
            "json".into(),
        ];
        if let Some(f) = idms {
            args.extend(["--idms-file".to_string(), f.display().to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        bootstrap(&args)
    };
    for command in ["oc", "openshift-baremetal-install"] {
        let to = site.dir.path().join(format!("other-{command}"));
        let out: Value = serde_json::from_str(&ok(&run(command, &to, Some(&idms)))).unwrap();
        assert!(
            out["component"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{repo}@sha256:")),
            "{out}"
        );
        assert!(to.join(command).is_file());
    }
    let to = site.dir.path().join("no-idms");
    let text = failed(&run("oc", &to, None));
    assert!(
        text.contains("no mirror set was given")
            && text.contains(&format!(
                "{up}/openshift-release-dev/ocp-v4.0-art-dev@sha256:"
            )),
        "{text}"
    );
    assert!(!to.join("oc").exists());
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
    // The component is named at quay.io, mirrored to the test registry.
    let idms = work.path().join("idms.yaml");
    fs_err::write(
        &idms,
        format!("apiVersion: config.openshift.io/v1\nkind: ImageDigestMirrorSet\nmetadata:\n  name: bad\nspec:\n  imageDigestMirrors:\n  - source: quay.io/bad\n    mirrors:\n    - {}/bad\n", site.host()),
    )
    .unwrap();
    let run = |release: &str, to: &Path| {
        bootstrap(&[
            "release",
            "extract",
            "--command",
            "openshift-install",
            "--to",
            to.to_str().unwrap(),
            &format!("docker://{release}"),
            "--idms-file",
            idms.to_str().unwrap(),
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
    // The release's base ISO is taken with `oc` over verified TLS; this registry speaks plain
    // HTTP, so the ISO is given as the installer's override (install_lab shows the other way).
    let base = site.dir.path().join("coreos-x86_64.iso");
    fs_err::write(&base, b"a base ISO").unwrap();
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
    let create = |over: Option<&Path>| {
        let mut cmd = std::process::Command::new(&installer);
        cmd.args(["agent", "create", "image", "--dir"])
            .arg(&work)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("XDG_CACHE_HOME", site.dir.path().join("cache"));
        if let Some(f) = over {
            cmd.env("OPENSHIFT_INSTALL_OS_IMAGE_OVERRIDE", f);
        }
        cmd.output().unwrap()
    };
    // No `oc` on PATH: the base ISO cannot come out of the release, and the installer's
    // fallback (a download from the Internet) fails as it does on an air-gapped site.
    let made = create(None);
    let log = String::from_utf8_lossy(&made.stderr).into_owned();
    assert_eq!(made.status.code(), Some(1), "{log}");
    assert!(
        log.contains("Failed to extract base ISO from release payload")
            && log.contains("level=fatal")
            && log.contains("failed to get base ISO image"),
        "{log}"
    );
    assert!(
        work.join("install-config.yaml").exists(),
        "nothing consumed"
    );
    let made = create(Some(&base));
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
        "'/base-iso'",
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
