//! OpenShift content end to end, against real Distribution registries: release payloads chosen
//! from an update graph and expanded through their image-references, operator catalogs read,
//! filtered by each selection rule and rebuilt, and the cluster resources that map it all. The
//! upstream is what `bootstrap lab seed` builds (see docs/lab.md), so every expectation below
//! names the seeded content.

mod support;

use bootstrap::mirror::resolve::layers::read_config_dir;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use support::client::{BlobSource, RegistryClient};
use support::run::{bootstrap, failed, json, ok};
use support::{block_on, Registry};

/// A seeded upstream registry and a scratch directory.
struct Lab {
    upstream: Registry,
    dir: tempfile::TempDir,
    seed: Value,
}

impl Lab {
    fn new() -> Lab {
        let upstream = Registry::plain();
        let dir = tempfile::tempdir().unwrap();
        let host = upstream.host();
        let out = dir.path().join("seed");
        let o = bootstrap(&[
            "lab",
            "seed",
            &format!("docker://{host}"),
            "--plain-http",
            &host,
            "--out",
            out.to_str().unwrap(),
        ]);
        ok(&o);
        let seed = json(&out.join("seed.json"));
        Lab {
            upstream,
            dir,
            seed,
        }
    }

    fn host(&self) -> String {
        self.upstream.host()
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `mirrorsets/lab.yaml` pointed at this lab's upstream.
    fn lab_config(&self) -> PathBuf {
        let text =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/mirrorsets/lab.yaml"))
                .unwrap();
        self.config("lab.yaml", &text.replace("127.0.0.1:5000", &self.host()))
    }

    /// An ImageSetConfiguration with `mirror:` body `body` (indented by the caller).
    fn config(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    fn operators_config(&self, name: &str, operators: &str) -> PathBuf {
        let text = format!(
            "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  operators:\n  - catalog: {}/redhat/redhat-operator-index:v4.18\n{operators}",
            self.host()
        );
        self.config(name, &text)
    }

    fn graph_url(&self) -> String {
        format!("file://{}", self.path("seed/graph.json").display())
    }

    /// Args every mirror run takes: the lab's graph and plain HTTP to the lab's registries.
    fn mirror_args(&self, extra: &[&str], hosts: &[String]) -> Vec<String> {
        let mut args: Vec<String> = vec!["mirror".into(), "--graph-url".into(), self.graph_url()];
        for h in hosts {
            args.push("--plain-http".into());
            args.push(h.clone());
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    }

    /// The dry run's plan (JSON on stdout) of `config` into a disk mirror that is not created.
    fn plan(&self, config: &Path) -> Value {
        let dest = format!("file://{}", self.path("never-created").display());
        let args = self.mirror_args(
            &[
                "--dry-run",
                "--output",
                "json",
                "-c",
                config.to_str().unwrap(),
                &dest,
            ],
            &[self.host()],
        );
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = ok(&bootstrap(&args));
        assert!(!self.path("never-created").exists());
        serde_json::from_str(&out).unwrap()
    }

    fn plan_error(&self, config: &Path) -> String {
        let dest = format!("file://{}", self.path("never-created").display());
        let args = self.mirror_args(
            &["--dry-run", "-c", config.to_str().unwrap(), &dest],
            &[self.host()],
        );
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        failed(&bootstrap(&args))
    }
}

/// The source references of a plan or record.
fn sources(v: &Value) -> BTreeSet<String> {
    v["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["source"].as_str().unwrap().to_string())
        .collect()
}

/// A catalog image whose layer holds `entry` (a path escaping the image root) is refused with
/// an error naming the catalog, the layer and the entry; nothing is written anywhere but the
/// run's own (never created) destination.
#[test]
fn a_catalog_layer_escaping_its_root_is_refused() {
    let registry = Registry::plain();
    let host = registry.host();
    let dir = tempfile::tempdir().unwrap();
    for (i, (entry, kind)) in [
        ("../escape.json", tar::EntryType::Regular),
        ("configs/../../escape.json", tar::EntryType::Regular),
        ("configs/nfd/catalog.json", tar::EntryType::Symlink),
    ]
    .into_iter()
    .enumerate()
    {
        let repo = format!("evil/catalog-{i}");
        push_catalog_with_entry(&registry, &repo, entry, kind);
        let cfg = dir.path().join(format!("evil-{i}.yaml"));
        std::fs::write(
            &cfg,
            format!("apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  operators:\n  - catalog: {host}/{repo}:v1\n"),
        )
        .unwrap();
        let dest = dir.path().join(format!("mirror-{i}"));
        let work = dir.path().join(format!("work-{i}"));
        let o = bootstrap(&[
            "mirror",
            "--plain-http",
            &host,
            "-c",
            cfg.to_str().unwrap(),
            "--workdir",
            work.to_str().unwrap(),
            &format!("file://{}", dest.display()),
        ]);
        let err = failed(&o);
        assert!(err.contains(&format!("{host}/{repo}:v1")), "{err}");
        assert!(err.contains("layer sha256:"), "{err}");
        assert!(
            err.contains("escape.json") || err.contains("leaves the image root"),
            "{err}"
        );
        assert!(!dest.exists(), "nothing may be written for refused input");
        assert!(!dir.path().join("escape.json").exists());
        assert!(!std::env::temp_dir().join("escape.json").exists());
    }
}

/// Pushes a catalog image (configs label `/configs`) whose one layer holds a good catalog file
/// and `entry` (a symbolic link's target climbs out of the root).
fn push_catalog_with_entry(registry: &Registry, repo: &str, entry: &str, kind: tar::EntryType) {
    let mut tar = tar::Builder::new(Vec::new());
    let good = br#"{"schema":"olm.package","name":"nfd","defaultChannel":"stable"}"#;
    let mut h = tar::Header::new_gnu();
    h.set_size(good.len() as u64);
    h.set_mode(0o644);
    h.set_entry_type(tar::EntryType::Regular);
    tar.append_data(&mut h, "configs/ok/catalog.json", &good[..])
        .unwrap();
    let mut h = tar::Header::new_gnu();
    h.set_mode(0o644);
    h.set_entry_type(kind);
    if kind == tar::EntryType::Symlink {
        h.set_size(0);
        tar.append_link(&mut h, entry, "../../../../etc/passwd")
            .unwrap();
    } else {
        // The tar crate refuses to write `..` itself: set the name bytes directly.
        let name = entry.as_bytes();
        h.as_old_mut().name[..name.len()].copy_from_slice(name);
        h.set_size(2);
        h.set_cksum();
        tar.append(&h, &b"{}"[..]).unwrap();
    }
    let layer = tar.into_inner().unwrap();
    let layer_digest = digest(&layer);
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": "amd64", "os": "linux",
        "config": {"Labels": {"operators.operatorframework.io.index.configs.v1": "/configs"}},
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
    }))
    .unwrap();
    let config_digest = digest(&config);
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": config.len()},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer_digest, "size": layer.len()}],
    }))
    .unwrap();
    let client = RegistryClient::new(registry);
    block_on(async {
        client
            .push_blob(repo, &layer_digest, BlobSource::Bytes(layer.into()))
            .await
            .unwrap();
        client
            .push_blob(repo, &config_digest, BlobSource::Bytes(config.into()))
            .await
            .unwrap();
        client
            .put_manifest(
                repo,
                "v1",
                "application/vnd.oci.image.manifest.v1+json",
                &manifest,
            )
            .await
            .unwrap();
    });
}

fn digest(bytes: &[u8]) -> String {
    bootstrap::oci::digest::Digest::of(bytes).to_string()
}

/// Reads a catalog image's config directory back from a registry, the way a cluster would
/// see it (all layers applied, whiteouts honoured).
fn catalog_files(registry: &Registry, repo: &str, tag: &str) -> BTreeMap<String, Vec<u8>> {
    let client = RegistryClient::new(registry);
    block_on(async {
        let (_, manifest) = client.get_manifest(repo, tag).await.unwrap();
        let m: Value = serde_json::from_slice(&manifest).unwrap();
        let config = client
            .get_blob(repo, m["config"]["digest"].as_str().unwrap())
            .await
            .unwrap();
        let config: Value = serde_json::from_slice(&config).unwrap();
        let dir = config["config"]["Labels"]["operators.operatorframework.io.index.configs.v1"]
            .as_str()
            .unwrap()
            .to_string();
        let mut layers = Vec::new();
        for l in m["layers"].as_array().unwrap() {
            layers.push(
                client
                    .get_blob(repo, l["digest"].as_str().unwrap())
                    .await
                    .unwrap(),
            );
        }
        read_config_dir(
            layers.iter().map(|l| std::io::Cursor::new(l.as_slice())),
            &dir,
        )
        .unwrap()
    })
}
