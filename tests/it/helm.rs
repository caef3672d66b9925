//! `mirror.helm` end to end: a chart from a Helm repository (index.yaml and the archive served
//! over HTTP here) and a chart pushed to a Distribution registry as `helm push` pushes it, each
//! mirrored as an OCI chart with the images found in it, through a registry-to-registry run,
//! through a disk mirror and through an archive; an archive whose sha256 differs from its index
//! is refused.

use crate::support;

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use support::client::{BlobSource, RegistryClient};
use support::httpfiles::FileServer;
use support::images::{push_image, Format, ImageSpec, Platform, PushedImage};
use support::layers::LayerSpec;
use support::run::{bootstrap, failed, ok};
use support::{block_on, Registry};

const CONFIG_TYPE: &str = "application/vnd.cncf.helm.config.v1+json";
const CHART_TYPE: &str = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";
const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

fn sha256(bytes: &[u8]) -> String {
    bootstrap::oci::digest::Digest::of(bytes).to_string()
}

/// A chart archive: `files` under `name/`, as `helm package` lays it out.
fn chart_tgz(name: &str, files: &[(&str, String)]) -> Vec<u8> {
    let mut tar = tar::Builder::new(Vec::new());
    for (path, text) in files {
        let mut h = tar::Header::new_ustar();
        h.set_size(text.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(0);
        tar.append_data(&mut h, format!("{name}/{path}"), text.as_bytes())
            .unwrap();
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&tar.into_inner().unwrap()).unwrap();
    gz.finish().unwrap()
}

/// The upstream: three small images, a repository chart (`web`) that names two of them (a
/// values image map and a literal image in a template) and one it cannot resolve (an
/// `include`), and an OCI chart (`worker`) naming the third KAI-Scheduler's way
/// (`global.registry` + `image.name`, tag from `appVersion`).
struct Upstream {
    registry: Registry,
    images: BTreeMap<&'static str, PushedImage>,
    web_tgz: Vec<u8>,
    worker_manifest: Vec<u8>,
    worker_tgz: Vec<u8>,
}

impl Upstream {
    fn new() -> Upstream {
        let registry = Registry::plain();
        let host = registry.host();
        let client = RegistryClient::new(&registry);
        let spec = |seed| {
            ImageSpec::new(
                Format::Oci,
                Platform::linux_amd64(),
                vec![LayerSpec::new(seed, 2048)],
            )
        };
        let mut images = BTreeMap::new();
        block_on(async {
            for (seed, (repo, tag)) in [
                ("apps/web", "1.0"),
                ("apps/worker", "v2.0"),
                ("tools/kubectl", "1.30"),
            ]
            .into_iter()
            .enumerate()
            {
                let pushed = push_image(&client, repo, Some(tag), &spec(seed as u64 + 40))
                    .await
                    .unwrap();
                images.insert(repo, pushed);
            }
        });
        let web_tgz = chart_tgz(
            "web",
            &[
                ("Chart.yaml", "apiVersion: v2\nname: web\nversion: 1.0.0\nappVersion: \"1.0\"\n".into()),
                (
                    "values.yaml",
                    format!("image:\n  registry: {host}\n  repository: apps/web\n  tag: \"\"\nresources: {{}}\n"),
                ),
                (
                    "templates/deployment.yaml",
                    format!("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{{{ .Chart.Name }}}}\nspec:\n  template:\n    spec:\n      initContainers:\n      - name: wait\n        image: \"{host}/tools/kubectl:1.30\"\n      containers:\n      - name: web\n        image: {{{{ .Values.image.registry }}}}/{{{{ .Values.image.repository }}}}:{{{{ .Values.image.tag | default .Chart.AppVersion }}}}\n        resources:\n          {{{{- toYaml .Values.resources | nindent 12 }}}}\n      - name: helper\n        image: {{{{ include \"web.helper\" . }}}}\n"),
                ),
                ("templates/_helpers.tpl", "{{- define \"web.helper\" -}}x{{- end }}\n".into()),
            ],
        );
        let worker_tgz = chart_tgz(
            "worker",
            &[
                ("Chart.yaml", "apiVersion: v2\nname: worker\nversion: 0.3.0\nappVersion: v2.0\n".into()),
                (
                    "values.yaml",
                    format!("global:\n  registry: {host}/apps\n  tag: \"\"\nworker:\n  image:\n    name: worker\n"),
                ),
            ],
        );
        // As `helm push worker-0.3.0.tgz oci://HOST/charts` stores it.
        let config = serde_json::to_vec(&json!({"apiVersion": "v2", "name": "worker", "version": "0.3.0", "appVersion": "v2.0"})).unwrap();
        let worker_manifest = serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": CONFIG_TYPE, "digest": sha256(&config), "size": config.len()},
            "layers": [{"mediaType": CHART_TYPE, "digest": sha256(&worker_tgz), "size": worker_tgz.len()}],
            "annotations": {"org.opencontainers.image.title": "worker", "org.opencontainers.image.version": "0.3.0"},
        }))
        .unwrap();
        block_on(async {
            for blob in [&config, &worker_tgz] {
                client
                    .push_blob(
                        "charts/worker",
                        &sha256(blob),
                        BlobSource::Bytes(blob.clone().into()),
                    )
                    .await
                    .unwrap();
            }
            client
                .put_manifest("charts/worker", "0.3.0", OCI_MANIFEST, &worker_manifest)
                .await
                .unwrap();
        });
        Upstream {
            registry,
            images,
            web_tgz,
            worker_manifest,
            worker_tgz,
        }
    }

    /// The Helm repository serving `web` (its index giving `digest`).
    fn repository(&self, digest: &str) -> FileServer {
        FileServer::start(self.repository_files(digest))
    }

    fn repository_files(&self, digest: &str) -> BTreeMap<String, Vec<u8>> {
        let index = format!(
            "apiVersion: v1\nentries:\n  web:\n  - apiVersion: v2\n    name: web\n    version: 1.0.0\n    appVersion: \"1.0\"\n    digest: {digest}\n    urls:\n    - web-1.0.0.tgz\n  - apiVersion: v2\n    name: web\n    version: 0.9.0\n    digest: 00\n    urls:\n    - web-0.9.0.tgz\n"
        );
        BTreeMap::from([
            ("/charts/index.yaml".to_string(), index.into_bytes()),
            ("/charts/web-1.0.0.tgz".to_string(), self.web_tgz.clone()),
        ])
    }

    fn config(&self, dir: &Path, repo: &FileServer) -> std::path::PathBuf {
        let text = format!(
            "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  helm:\n    repositories:\n    - name: example\n      url: {}/charts\n      charts:\n      - name: web\n        version: 1.0.0\n    - name: nv\n      url: oci://{}/charts\n      charts:\n      - name: worker\n        version: 0.3.0\n",
            repo.url(),
            self.registry.host()
        );
        let path = dir.join("isc.yaml");
        fs_err::write(&path, text).unwrap();
        path
    }
}

/// Checks the destination holds both charts byte for byte and the three images.
fn assert_mirrored(up: &Upstream, dest: &Registry, prefix: &str) {
    let client = RegistryClient::new(dest);
    block_on(async {
        // The repository chart, packed as `helm push` packs it.
        let (media_type, bytes) = client
            .get_manifest(&format!("{prefix}/example/web"), "1.0.0")
            .await
            .unwrap();
        assert_eq!(media_type, OCI_MANIFEST);
        let m: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(m["config"]["mediaType"], CONFIG_TYPE);
        let config = client
            .get_blob(
                &format!("{prefix}/example/web"),
                m["config"]["digest"].as_str().unwrap(),
            )
            .await
            .unwrap();
        let config: Value = serde_json::from_slice(&config).unwrap();
        assert_eq!(
            (config["name"].as_str(), config["version"].as_str()),
            (Some("web"), Some("1.0.0"))
        );
        assert_eq!(m["layers"].as_array().unwrap().len(), 1);
        assert_eq!(m["layers"][0]["mediaType"], CHART_TYPE);
        let layer = client
            .get_blob(
                &format!("{prefix}/example/web"),
                m["layers"][0]["digest"].as_str().unwrap(),
            )
            .await
            .unwrap();
        assert!(layer == up.web_tgz, "the chart archive arrived changed");
        // The OCI chart, copied as it is.
        let (_, bytes) = client
            .get_manifest(&format!("{prefix}/charts/worker"), "0.3.0")
            .await
            .unwrap();
        assert!(
            bytes == up.worker_manifest,
            "the OCI chart's manifest arrived changed"
        );
        let layer = client
            .get_blob(&format!("{prefix}/charts/worker"), &sha256(&up.worker_tgz))
            .await
            .unwrap();
        assert!(layer == up.worker_tgz);
        // The images the charts name, at their source paths.
        for (repo, img) in &up.images {
            let (_, bytes) = client
                .get_manifest(&format!("{prefix}/{repo}"), &img.tag)
                .await
                .unwrap_or_else(|e| panic!("{repo}:{} is missing: {e}", img.tag));
            assert_eq!(sha256(&bytes), img.digest, "{repo}");
        }
    });
}

#[test]
fn repository_and_oci_charts_mirror_with_their_images() {
    let up = Upstream::new();
    let repo = up.repository(&sha256(&up.web_tgz)[7..]);
    let dest = Registry::plain();
    let dir = tempfile::tempdir().unwrap();
    let cfg = up.config(dir.path(), &repo);
    let record = dir.path().join("record.json");
    let o = bootstrap(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        "--plain-http",
        &up.registry.host(),
        "--plain-http",
        &dest.host(),
        "--record",
        record.to_str().unwrap(),
        "--workdir",
        dir.path().join("work").to_str().unwrap(),
        "--output",
        "json",
        &format!("docker://{}/mirror", dest.host()),
    ]);
    let out: Value = serde_json::from_str(&ok(&o)).unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_mirrored(&up, &dest, "mirror");
    // What each chart gave, and what it could not.
    let charts = out["charts"].as_array().expect("charts in the report");
    let web = charts.iter().find(|c| c["name"] == "web").unwrap();
    let host = up.registry.host();
    assert_eq!(
        web["images"],
        json!([
            format!("{host}/apps/web:1.0"),
            format!("{host}/tools/kubectl:1.30")
        ])
    );
    assert_eq!(web["repository"], "example/web");
    assert_eq!(web["chartDigest"], sha256(&up.web_tgz));
    assert_eq!(
        web["unresolved"][0]["text"],
        "{{ include \"web.helper\" . }}"
    );
    assert!(
        stderr.contains("web/templates/deployment.yaml")
            && stderr.contains("include \"web.helper\""),
        "the unresolved image is not reported: {stderr}"
    );
    let worker = charts.iter().find(|c| c["name"] == "worker").unwrap();
    assert_eq!(
        worker["images"],
        json!([format!("{host}/apps/worker:v2.0")])
    );
    assert_eq!(worker["repository"], "charts/worker");
    // Only the chart and its archive were fetched from the repository (not 0.9.0).
    assert_eq!(
        repo.requests(),
        ["/charts/index.yaml", "/charts/web-1.0.0.tgz"]
    );
    // Charts are pulled by Helm, not by the cluster: no mirror set names them.
    let res = record.parent().unwrap().join("cluster-resources");
    for f in fs_err::read_dir(&res).unwrap() {
        let text = fs_err::read_to_string(f.unwrap().path()).unwrap();
        assert!(
            !text.contains("charts/worker") && !text.contains("example/web"),
            "{text}"
        );
    }
}

#[test]
fn charts_travel_through_a_disk_mirror_and_an_archive_and_the_dry_run_lists_them() {
    let up = Upstream::new();
    let repo = up.repository(&sha256(&up.web_tgz)[7..]);
    let dir = tempfile::tempdir().unwrap();
    let cfg = up.config(dir.path(), &repo);
    let host = up.registry.host();
    let disk = dir.path().join("disk");
    let o = bootstrap(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        "--plain-http",
        &host,
        "--dry-run",
        "--output",
        "json",
        &format!("file://{}", disk.display()),
    ]);
    let plan: Value = serde_json::from_str(&ok(&o)).unwrap();
    let names: Vec<&str> = plan["charts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["web", "worker"]);
    let planned: Vec<&str> = plan["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["destination"].as_str().unwrap())
        .collect();
    assert!(
        planned.iter().any(|d| d.contains("example/web:1.0.0")),
        "{planned:?}"
    );
    assert!(!disk.exists(), "a dry run creates nothing");

    ok(&bootstrap(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        "--plain-http",
        &host,
        &format!("file://{}", disk.display()),
    ]));
    let archive = dir.path().join("archive");
    ok(&bootstrap(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        "--plain-http",
        &host,
        &format!("archive://{}", archive.display()),
    ]));
    // The repository is gone: the disk mirror and the archive carry everything.
    drop(repo);
    let dest = Registry::plain();
    ok(&bootstrap(&[
        "mirror",
        "--from",
        &format!("file://{}", disk.display()),
        "--plain-http",
        &dest.host(),
        "--record",
        dir.path().join("record.json").to_str().unwrap(),
        &format!("docker://{}/site", dest.host()),
    ]));
    assert_mirrored(&up, &dest, "site");

    // And through an archive, read in place on the other side.
    ok(&bootstrap(&[
        "mirror",
        "--from",
        &format!("archive://{}", archive.display()),
        "--plain-http",
        &dest.host(),
        "--record",
        dir.path().join("record2.json").to_str().unwrap(),
        "--workdir",
        dir.path().join("work2").to_str().unwrap(),
        &format!("docker://{}/from-archive", dest.host()),
    ]));
    assert_mirrored(&up, &dest, "from-archive");
}

#[test]
fn a_chart_that_does_not_match_its_index_digest_is_refused() {
    let up = Upstream::new();
    let repo = up.repository(&"0".repeat(64));
    let dir = tempfile::tempdir().unwrap();
    let cfg = up.config(dir.path(), &repo);
    let o = bootstrap(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        "--plain-http",
        &up.registry.host(),
        "--dry-run",
        &format!("file://{}", dir.path().join("disk").display()),
    ]);
    let err = failed(&o);
    assert!(err.contains("mirror.helm.repositories[0]"), "{err}");
    assert!(
        err.contains("web-1.0.0.tgz") && err.contains(&sha256(&up.web_tgz)[7..]),
        "{err}"
    );
    assert!(err.contains("corrupt"), "{err}");
}

/// `bootstrap mirror -c CFG docker://DEST/PREFIX` with both registries over plain HTTP, a
/// working directory of its own, and `extra` arguments.
fn mirror_to(
    up: &Upstream,
    dest: &Registry,
    cfg: &Path,
    work: &Path,
    prefix: &str,
    extra: &[&str],
) -> std::process::Output {
    let (src_host, dest_host) = (up.registry.host(), dest.host());
    let url = format!("docker://{dest_host}/{prefix}");
    let mut args = vec![
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        "--plain-http",
        &src_host,
        "--plain-http",
        &dest_host,
        "--workdir",
        work.to_str().unwrap(),
        &url,
    ];
    args.extend_from_slice(extra);
    bootstrap(&args)
}

/// A chart repository behind a private CA (as a site's own chart server is) is reached with the
/// registries' trust: refused without `--ca-bundle`, naming the repository and the certificate
/// problem; mirrored with it; and reached unverified only when its host is named insecure.
#[test]
fn a_chart_repository_behind_a_private_ca_is_trusted_through_the_ca_bundle() {
    let up = Upstream::new();
    let pki_dir = tempfile::tempdir().unwrap();
    let pki = support::tls::TestPki::generate(pki_dir.path()).unwrap();
    let repo = FileServer::start_tls(up.repository_files(&sha256(&up.web_tgz)[7..]), &pki);
    assert!(repo.url().starts_with("https://"));
    let dest = Registry::plain();
    let dir = tempfile::tempdir().unwrap();
    let cfg = up.config(dir.path(), &repo);
    let run = |extra: &[&str], prefix: &str| {
        let work = dir.path().join(format!("work-{prefix}"));
        mirror_to(&up, &dest, &cfg, &work, prefix, extra)
    };
    let refused = run(&[], "untrusted");
    let err = failed(&refused);
    assert!(
        err.contains("mirror.helm.repositories[0]")
            && err.contains(&repo.url())
            && err.to_lowercase().contains("certificate")
            && err.contains(&format!(
                "--insecure-skip-tls-verify {}",
                repo.url().trim_start_matches("https://")
            )),
        "{err}"
    );
    // Nothing was fetched past the handshake, and nothing was pushed.
    assert!(repo.requests().is_empty(), "{:?}", repo.requests());
    let client = RegistryClient::new(&dest);
    block_on(async {
        assert!(client
            .get_manifest("untrusted/example/web", "1.0.0")
            .await
            .is_err());
    });

    ok(&run(
        &["--ca-bundle", pki.ca_path.to_str().unwrap()],
        "mirror",
    ));
    assert_mirrored(&up, &dest, "mirror");
    assert_eq!(
        repo.requests(),
        ["/charts/index.yaml", "/charts/web-1.0.0.tgz"]
    );

    let host = repo.url().trim_start_matches("https://").to_string();
    ok(&run(&["--insecure-skip-tls-verify", &host], "insecure"));
    assert_mirrored(&up, &dest, "insecure");
}

/// An OCI chart named without a version takes the highest stable semantic version among its
/// tags, as `helm pull` does (`0.10.0` above `0.3.0`, `_` read as `+`, pre-releases and other
/// tags passed over); a repository with no such tag is refused, naming the field.
#[test]
fn an_oci_chart_without_a_version_takes_its_highest_stable_tag() {
    let up = Upstream::new();
    let client = RegistryClient::new(&up.registry);
    block_on(async {
        for tag in ["0.2.0", "0.10.0_build.1", "1.0.0-rc.1", "latest"] {
            client
                .put_manifest("charts/worker", tag, OCI_MANIFEST, &up.worker_manifest)
                .await
                .unwrap();
        }
    });
    let dest = Registry::plain();
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, chart: &str| {
        let text = format!(
            "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  helm:\n    repositories:\n    - name: nv\n      url: oci://{}/charts\n      charts:\n      - name: {chart}\n",
            up.registry.host()
        );
        let path = dir.path().join(name);
        fs_err::write(&path, text).unwrap();
        path
    };
    let run = |cfg: &Path| mirror_to(&up, &dest, cfg, &dir.path().join("work"), "mirror", &[]);
    ok(&run(&write("latest.yaml", "worker")));
    let dest_client = RegistryClient::new(&dest);
    block_on(async {
        let (_, bytes) = dest_client
            .get_manifest("mirror/charts/worker", "0.10.0_build.1")
            .await
            .expect("the highest stable version's tag");
        assert!(bytes == up.worker_manifest);
        for other in ["0.2.0", "0.3.0", "1.0.0-rc.1", "latest"] {
            assert!(
                dest_client
                    .get_manifest("mirror/charts/worker", other)
                    .await
                    .is_err(),
                "{other} was mirrored too"
            );
        }
    });

    let err = failed(&run(&write("none.yaml", "absent")));
    assert!(
        err.contains("mirror.helm.repositories[0].charts[0]")
            && err.contains("charts/absent has no tags")
            && err.contains("check the chart's name"),
        "{err}"
    );
}

/// Redirects of a chart repository are followed with the same trust, never from https down to
/// plain http, and from a host reached unverified only to another host named insecure.
#[test]
fn chart_repository_redirects_keep_their_trust() {
    let up = Upstream::new();
    let pki_dir = tempfile::tempdir().unwrap();
    let pki = support::tls::TestPki::generate(pki_dir.path()).unwrap();
    let files = up.repository_files(&sha256(&up.web_tgz)[7..]);
    let plain = FileServer::start(files.clone());
    let secure = FileServer::start_tls(files, &pki);
    let to = |target: &FileServer| -> BTreeMap<String, String> {
        ["/charts/index.yaml", "/charts/web-1.0.0.tgz"]
            .into_iter()
            .map(|p| (p.to_string(), format!("{}{p}", target.url())))
            .collect()
    };
    let downgrade = FileServer::redirecting(to(&plain), Some(&pki));
    let across = FileServer::redirecting(to(&secure), Some(&pki));
    let dest = Registry::plain();
    let dir = tempfile::tempdir().unwrap();
    let run = |repo: &FileServer, extra: &[&str], prefix: &str| {
        let sub = dir.path().join(prefix);
        fs_err::create_dir_all(&sub).unwrap();
        let cfg = up.config(&sub, repo);
        mirror_to(&up, &dest, &cfg, &sub.join("work"), prefix, extra)
    };
    let ca = pki.ca_path.to_str().unwrap();
    let err = failed(&run(&downgrade, &["--ca-bundle", ca], "down"));
    assert!(
        err.contains("refusing the redirect from https to plain http"),
        "{err}"
    );
    assert!(plain.requests().is_empty(), "{:?}", plain.requests());

    let across_host = across.url().trim_start_matches("https://").to_string();
    let err = failed(&run(
        &across,
        &["--insecure-skip-tls-verify", &across_host],
        "across",
    ));
    assert!(
        err.contains("only hosts named in --insecure-skip-tls-verify"),
        "{err}"
    );
    assert!(secure.requests().is_empty(), "{:?}", secure.requests());

    // Verified, a redirect to another host is followed.
    ok(&run(&across, &["--ca-bundle", ca], "followed"));
    assert_mirrored(&up, &dest, "followed");
    assert_eq!(
        secure.requests(),
        ["/charts/index.yaml", "/charts/web-1.0.0.tgz"]
    );
}
