//! OpenShift content end to end, against real Distribution registries: release payloads chosen
//! from an update graph and expanded through their image-references, operator catalogs read,
//! filtered by each selection rule and rebuilt, and the cluster resources that map it all. The
//! upstream is what `bootstrap-lab seed` builds (see docs/lab.md), so every expectation below
//! names the seeded content.

use crate::support;

use bootstrap::oci::layers::read_config_dir;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use support::client::{BlobSource, RegistryClient};
use support::run::{bootstrap, failed, json, lab, ok};
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
        let o = lab(&[
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

    /// The seed's record of release `version`.
    fn release(&self, version: &str) -> &Value {
        self.seed["releases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["version"] == version)
            .unwrap_or_else(|| panic!("the seed has no release {version}"))
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `mirrorsets/lab.yaml` pointed at this lab's upstream.
    fn lab_config(&self) -> PathBuf {
        let text =
            fs_err::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/mirrorsets/lab.yaml"))
                .unwrap();
        self.config("lab.yaml", &text.replace("127.0.0.1:5000", &self.host()))
    }

    /// An ImageSetConfiguration with `mirror:` body `body` (indented by the caller).
    fn config(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path(name);
        fs_err::write(&path, text).unwrap();
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
        self.plan_with(config, &[]).0
    }

    /// The dry run's plan of `config` with `extra` arguments, and its stderr.
    fn plan_with(&self, config: &Path, extra: &[&str]) -> (Value, String) {
        let dest = format!("file://{}", self.path("never-created").display());
        let mut fixed = vec![
            "--dry-run",
            "--output",
            "json",
            "-c",
            config.to_str().unwrap(),
        ];
        fixed.extend(extra);
        fixed.push(&dest);
        let args = self.mirror_args(&fixed, &[self.host()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let run = bootstrap(&args);
        let out = ok(&run);
        assert!(!self.path("never-created").exists());
        let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
        (serde_json::from_str(&out).unwrap(), stderr)
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

/// A seeded release image by digest, as the update graph names it.
fn release_by_digest(release: &Value) -> String {
    let image = release["image"].as_str().unwrap();
    let repo = image.rsplit_once(':').unwrap().0;
    format!("{repo}@{}", release["digest"].as_str().unwrap())
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
        fs_err::write(
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

/// The lab's mirror set, mirror to mirror: releases 4.18.2 and 4.18.3 with exactly the
/// components their image-references list, in openshift/release(-images); the catalog rebuilt
/// with only the selected bundles, read back from the site registry; every bundle and related
/// image of a kept bundle present; cluster resources mapping every mirrored source repository;
/// and a second run finds everything in place.
#[test]
fn the_lab_set_mirrors_to_mirror_with_releases_catalog_and_cluster_resources() {
    let lab = Lab::new();
    let site = Registry::plain();
    let cfg = lab.lab_config();
    let record = lab.path("record.json");
    let dest = format!("docker://{}/mirror", site.host());
    // A signature for 4.18.3 in the signature store's layout; none for 4.18.2 (a warning).
    let sigs = lab.path("signatures");
    let signed = lab.release("4.18.3")["digest"]
        .as_str()
        .unwrap()
        .trim_start_matches("sha256:")
        .to_string();
    fs_err::create_dir_all(sigs.join(format!("sha256={signed}"))).unwrap();
    fs_err::write(
        sigs.join(format!("sha256={signed}/signature-1")),
        b"gpg-signature",
    )
    .unwrap();
    let args = lab.mirror_args(
        &[
            "--output",
            "json",
            "-c",
            cfg.to_str().unwrap(),
            "--record",
            record.to_str().unwrap(),
            "--release-signatures",
            sigs.to_str().unwrap(),
            &dest,
        ],
        &[lab.host(), site.host()],
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let summary: Value = serde_json::from_str(&ok(&bootstrap(&args))).unwrap();
    let rec = json(&record);
    let mirrored = sources(&rec);

    // Releases: exactly 4.18.2 and 4.18.3, and exactly their components.
    let releases: Vec<&str> = summary["releases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["version"].as_str().unwrap())
        .collect();
    assert_eq!(releases, ["4.18.2", "4.18.3"]);
    let mut expected = BTreeSet::new();
    for version in ["4.18.2", "4.18.3"] {
        let release = lab.release(version);
        expected.insert(release_by_digest(release));
        for c in release["components"].as_object().unwrap().values() {
            expected.insert(c.as_str().unwrap().to_string());
        }
    }
    let release_images: BTreeSet<String> = rec["images"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["category"] == "release")
        .map(|i| i["source"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(release_images, expected);
    for img in rec["images"].as_array().unwrap() {
        if img["category"] == "release" {
            let path = img["path"].as_str().unwrap();
            assert!(
                path == "openshift/release" || path == "openshift/release-images",
                "{img}"
            );
        }
    }
    let tagged = RegistryClient::new(&site);
    let release_418_3 = release_by_digest(lab.release("4.18.3"));
    block_on(async {
        let (_, m) = tagged
            .get_manifest("mirror/openshift/release-images", "4.18.3-x86_64")
            .await
            .unwrap();
        assert_eq!(
            digest(&m),
            release_418_3.rsplit_once('@').unwrap().1,
            "the release image is tagged <version>-<arch>"
        );
    });

    // Components are tagged as oc-mirror tags them, `<version>-<arch>-<name>` (a component two
    // releases share under the first that names it), and content pinned by digest (bundles,
    // related images) under `sha256-<hex>`: registries that collect untagged manifests keep
    // them. The record names each tag, and each tag holds the recorded digest.
    let mut component_tags = BTreeSet::new();
    let mut pinned = 0;
    for img in rec["images"].as_array().unwrap() {
        let path = img["path"].as_str().unwrap();
        let want = img["digest"].as_str().unwrap();
        let source =
            bootstrap::oci::reference::ImageRef::parse(img["source"].as_str().unwrap()).unwrap();
        let tag = match img["tag"].as_str() {
            Some(t) => t.to_string(),
            None => source
                .tag
                .clone()
                .unwrap_or_else(|| panic!("no tag: {img}")),
        };
        let tag = tag.as_str();
        if path == "openshift/release" {
            let name = tag
                .strip_prefix("4.18.2-x86_64-")
                .or_else(|| tag.strip_prefix("4.18.3-x86_64-"))
                .unwrap_or_else(|| panic!("component tag {tag}"));
            let version = &tag[..6];
            assert_eq!(
                lab.release(version)["components"][name].as_str(),
                img["source"].as_str(),
                "{img}"
            );
            component_tags.insert(tag.to_string());
        } else if source.tag.is_none() && img["category"] != "release" {
            assert_eq!(
                tag,
                format!("sha256-{}", want.trim_start_matches("sha256:"))
            );
            assert!(
                site.tags(&format!("mirror/{path}"))
                    .contains(&tag.to_string()),
                "{img}"
            );
            pinned += 1;
        }
        let (_, m) = block_on(tagged.get_manifest(&format!("mirror/{path}"), tag)).unwrap();
        assert_eq!(digest(&m), want, "{img}");
    }
    let listed: BTreeSet<String> = site.tags("mirror/openshift/release").into_iter().collect();
    assert_eq!(listed, component_tags);
    assert!(pinned > 0, "the lab set pins no operator image by digest");

    // The catalog: read back from the site, only the selected packages and bundles.
    let files = catalog_files(&site, "mirror/redhat/redhat-operator-index", "v4.18");
    let catalog = bootstrap::openshift::fbc::Catalog::parse(&files).unwrap();
    let kept: BTreeMap<String, BTreeSet<String>> = catalog
        .bundles
        .iter()
        .map(|(p, b)| (p.clone(), b.keys().cloned().collect()))
        .collect();
    let reported: BTreeMap<String, BTreeSet<String>> = summary["catalogs"][0]["bundles"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(p, b)| {
            (
                p.clone(),
                b.as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_str().unwrap().to_string())
                    .collect(),
            )
        })
        .collect();
    assert_eq!(kept, reported);
    assert_eq!(
        kept.keys().cloned().collect::<Vec<_>>(),
        [
            "gpu-operator-certified",
            "kubernetes-nmstate-operator",
            "nfd",
            "nvidia-network-operator",
            "openshift-gitops-operator",
            "rhods-operator",
            "sriov-network-operator"
        ]
    );
    for bundles in kept.values() {
        assert_eq!(bundles.len(), 1, "heads only: {kept:?}");
    }
    let channels: BTreeMap<String, Vec<String>> = catalog
        .channels
        .iter()
        .map(|(p, c)| (p.clone(), c.keys().cloned().collect()))
        .collect();
    for (package, only) in [
        ("gpu-operator-certified", "stable"),
        ("openshift-gitops-operator", "latest"),
        ("rhods-operator", "stable"),
        ("nfd", "stable"),
    ] {
        assert_eq!(channels[package], [only], "{channels:?}");
    }
    // Every kept bundle's image and related images were mirrored.
    for bundles in catalog.bundles.values() {
        for b in bundles.values() {
            let raw = &b.raw;
            let mut images = vec![raw["image"].as_str().unwrap().to_string()];
            for r in raw["relatedImages"].as_array().into_iter().flatten() {
                images.push(r["image"].as_str().unwrap().to_string());
            }
            for i in images {
                assert!(mirrored.contains(&i), "{i} of {} not mirrored", b.name);
            }
        }
    }

    // Cluster resources: every mirrored source repository mapped; a CatalogSource.
    let resources = record.parent().unwrap().join("cluster-resources");
    let idms = fs_err::read_to_string(resources.join("idms-oc-mirror.yaml")).unwrap();
    let itms = fs_err::read_to_string(resources.join("itms-oc-mirror.yaml")).unwrap();
    for img in rec["images"].as_array().unwrap() {
        if img["category"] == "catalog" {
            continue;
        }
        let source = img["source"].as_str().unwrap();
        let repo = if source.contains('@') {
            source.split('@').next().unwrap()
        } else {
            source.rsplit_once(':').unwrap().0
        };
        let (ns, _) = repo.rsplit_once('/').unwrap();
        let text = if source.contains('@') { &idms } else { &itms };
        assert!(
            text.contains(&format!("source: {ns}\n"))
                || text.contains(&format!("source: {repo}\n")),
            "{source} is not mapped:\n{text}"
        );
    }
    let sig = fs_err::read_to_string(resources.join("signature-configmap.yaml")).unwrap();
    assert!(
        sig.contains(&format!("sha256-{signed}-1: Z3BnLXNpZ25hdHVyZQ==")),
        "{sig}"
    );
    assert_eq!(sig.matches("sha256-").count(), 1, "{sig}");
    let cs = fs_err::read_to_string(resources.join("cs-redhat-operator-index-v4-18.yaml")).unwrap();
    assert!(cs.contains("sourceType: grpc"), "{cs}");
    assert!(
        cs.contains(&format!(
            "image: {}/mirror/redhat/redhat-operator-index:v4.18",
            site.host()
        )),
        "{cs}"
    );
    assert_apply_safe_cluster_resources(&lab, &site, &resources);

    // Everything is in place: a second run sends nothing.
    let again: Value = serde_json::from_str(&ok(&bootstrap(&args))).unwrap();
    assert_eq!(again["bytesTransferred"], 0, "{again}");
    assert_eq!(again["imagesUnchanged"], again["images"], "{again}");
}

/// The folder takes `oc apply -f` whole (issue 17, point 5): every file in it is a Kubernetes
/// object whose kind the cluster serves; the install-config snippet sits beside it. The OLM v1
/// ClusterCatalog sits beside the CatalogSource, and the releases taken from the channel get
/// `itms-release-0`, as oc-mirror v2 writes them, with oc-mirror's annotations.
fn assert_apply_safe_cluster_resources(lab: &Lab, site: &Registry, resources: &Path) {
    let beside = resources.parent().unwrap();
    assert!(!resources
        .join("install-config-imageDigestSources.yaml")
        .exists());
    let snippet: Value = serde_saphyr::from_str(
        &fs_err::read_to_string(beside.join("install-config-imageDigestSources.yaml")).unwrap(),
    )
    .unwrap();
    assert!(
        !snippet["imageDigestSources"].as_array().unwrap().is_empty(),
        "{snippet}"
    );

    let cc = yaml_docs(&resources.join("cc-redhat-operator-index-v4-18.yaml"));
    assert_eq!(cc.len(), 1);
    let cc = &cc[0];
    assert_eq!(cc["apiVersion"], "olm.operatorframework.io/v1", "{cc}");
    assert_eq!(cc["kind"], "ClusterCatalog", "{cc}");
    assert_eq!(cc["metadata"]["name"], "cc-redhat-operator-index-v4-18");
    assert!(cc["metadata"].get("namespace").is_none(), "{cc}");
    assert_eq!(cc["spec"]["priority"], 0, "{cc}");
    assert_eq!(cc["spec"]["source"]["type"], "Image", "{cc}");
    assert_eq!(
        cc["spec"]["source"]["image"]["ref"],
        format!("{}/mirror/redhat/redhat-operator-index:v4.18", site.host())
    );
    assert_annotations(cc);

    let itms = yaml_docs(&resources.join("itms-oc-mirror.yaml"));
    let release = itms
        .iter()
        .find(|d| d["metadata"]["name"] == "itms-release-0")
        .unwrap_or_else(|| panic!("no itms-release-0 in {itms:?}"));
    assert_eq!(release["apiVersion"], "config.openshift.io/v1");
    assert_eq!(release["kind"], "ImageTagMirrorSet");
    assert_annotations(release);
    let payload_repo = release_by_digest(lab.release("4.18.3"))
        .split_once('@')
        .unwrap()
        .0
        .to_string();
    assert_eq!(
        release["spec"]["imageTagMirrors"],
        serde_json::json!([{
            "source": payload_repo,
            "mirrors": [format!("{}/mirror/openshift/release-images", site.host())],
        }]),
        "the payloads are pulled by <version>-<arch>, which the mirror carries: {release}"
    );
    for file in ["idms-oc-mirror.yaml", "cs-redhat-operator-index-v4-18.yaml"] {
        for doc in yaml_docs(&resources.join(file)) {
            assert_annotations(&doc);
        }
    }

    let applied = kubectl_dry_run_apply(resources);
    for object in [
        "imagedigestmirrorset.config.openshift.io/idms-release-0",
        "imagetagmirrorset.config.openshift.io/itms-release-0",
        "catalogsource.operators.coreos.com/cs-redhat-operator-index-v4-18",
        "clustercatalog.olm.operatorframework.io/cc-redhat-operator-index-v4-18",
        "configmap/mirrored-release-signatures",
    ] {
        assert!(
            applied.contains(&format!("{object} created (dry run)")),
            "{object} not applied:\n{applied}"
        );
    }
}

/// oc-mirror v2's annotation keys with our values, and our version.
fn assert_annotations(doc: &Value) {
    let a = &doc["metadata"]["annotations"];
    assert_eq!(a["createdBy"], "bootstrap", "{doc}");
    assert_eq!(a["bootstrap_version"], env!("CARGO_PKG_VERSION"), "{doc}");
    let at = a["createdAt"].as_str().unwrap_or_default();
    assert!(
        at.len() == 20 && at.ends_with('Z') && at.as_bytes()[10] == b'T',
        "createdAt '{at}' is not RFC 3339 UTC: {doc}"
    );
}

fn yaml_docs(path: &Path) -> Vec<Value> {
    let text = fs_err::read_to_string(path).unwrap();
    serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `kubectl apply --dry-run=client -f DIR` against the lab's Kubernetes API stand-in, which
/// serves the CRDs of every kind the folder holds as their projects publish them (OpenShift's
/// mirror sets, OLM's CatalogSource, OLM v1's ClusterCatalog). kubectl needs a server even
/// for a client dry run: it maps each document to a resource through discovery (an unknown
/// kind fails there), validates it strictly against the served schema, and looks the object
/// up; nothing is created. Its stdout.
fn kubectl_dry_run_apply(dir: &Path) -> String {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let store = bootstrap_lab::site::kube::Store::lab_cluster().unwrap();
    let api = rt
        .block_on(bootstrap_lab::site::kube::http::serve_loopback(
            store,
            &work.path().join("api"),
        ))
        .unwrap();
    let o = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&api.kubeconfig)
        .arg("--cache-dir")
        .arg(work.path().join("cache"))
        .args(["apply", "--dry-run=client", "-f"])
        .arg(dir)
        .output()
        .expect("running kubectl (Debian: apt-get install kubernetes-client)");
    drop(api);
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "kubectl apply --dry-run=client -f {}: {}\n{stdout}",
        dir.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    stdout
}

/// The images a plan mirrors for operators: everything but the catalog itself.
fn operator_images(plan: &Value, lab: &Lab) -> BTreeSet<String> {
    let catalog = format!("{}/redhat/redhat-operator-index:v4.18", lab.host());
    let mut out = sources(plan);
    assert!(out.remove(&catalog), "the plan holds the catalog {catalog}");
    out
}

/// Bundle images and related images of `bundles` (names), from what the seed pushed.
fn images_of(lab: &Lab, bundles: &[&str]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut found = BTreeSet::new();
    for p in lab.seed["catalog"]["packages"].as_array().unwrap() {
        for b in p["bundles"].as_array().unwrap() {
            let name = b["name"].as_str().unwrap();
            if bundles.contains(&name) {
                found.insert(name);
                out.insert(b["image"].as_str().unwrap().to_string());
                for r in b["relatedImages"].as_object().unwrap().values() {
                    out.insert(r.as_str().unwrap().to_string());
                }
            }
        }
    }
    assert_eq!(
        found.len(),
        bundles.len(),
        "bundles {bundles:?} not all seeded"
    );
    out
}

fn assert_selects(lab: &Lab, name: &str, operators: &str, bundles: &[&str]) {
    let cfg = lab.operators_config(name, operators);
    let plan = lab.plan(&cfg);
    assert_eq!(
        operator_images(&plan, lab),
        images_of(lab, bundles),
        "{operators}"
    );
}

/// Heads only (no range, not full): a listed channel gives its head bundle alone.
#[test]
fn selection_heads_only() {
    let lab = Lab::new();
    assert_selects(
        &lab,
        "heads.yaml",
        "    skipDependencies: true\n    packages:\n    - name: gpu-operator-certified\n      channels:\n      - name: stable\n    - name: openshift-gitops-operator\n      channels:\n      - name: gitops-1.14\n      defaultChannel: gitops-1.14\n",
        &[
            "gpu-operator-certified.v24.9.1",
            "openshift-gitops-operator.v1.14.3",
        ],
    );
}

/// `minVersion` alone: from that version to the channel's head.
#[test]
fn selection_min_version_only() {
    let lab = Lab::new();
    assert_selects(
        &lab,
        "min.yaml",
        "    skipDependencies: true\n    packages:\n    - name: gpu-operator-certified\n      channels:\n      - name: stable\n        minVersion: 24.9.0\n",
        &["gpu-operator-certified.v24.9.0", "gpu-operator-certified.v24.9.1"],
    );
}

/// `minVersion` and `maxVersion`: the bundles between them, bounds included.
#[test]
fn selection_min_and_max_version() {
    let lab = Lab::new();
    assert_selects(
        &lab,
        "range.yaml",
        "    skipDependencies: true\n    packages:\n    - name: gpu-operator-certified\n      channels:\n      - name: stable\n        minVersion: 24.6.2\n        maxVersion: 24.9.0\n",
        &["gpu-operator-certified.v24.6.2", "gpu-operator-certified.v24.9.0"],
    );
}

/// `full: true`: every bundle of every channel of the listed packages.
#[test]
fn selection_full() {
    let lab = Lab::new();
    assert_selects(
        &lab,
        "full.yaml",
        "    full: true\n    skipDependencies: true\n    packages:\n    - name: gpu-operator-certified\n",
        &[
            "gpu-operator-certified.v24.6.0",
            "gpu-operator-certified.v24.6.2",
            "gpu-operator-certified.v24.9.0",
            "gpu-operator-certified.v24.9.1",
        ],
    );
}

/// A selection that drops the package's default channel needs `defaultChannel`: without it the
/// run fails naming the field, line and column, before anything is written; with it, it works.
#[test]
fn selection_dropping_the_default_channel_needs_default_channel() {
    let lab = Lab::new();
    let cfg = lab.operators_config(
        "dropped.yaml",
        "    skipDependencies: true\n    packages:\n    - name: gpu-operator-certified\n      channels:\n      - name: v24.6\n",
    );
    let err = lab.plan_error(&cfg);
    assert!(err.contains("dropped.yaml:"), "{err}");
    assert!(err.contains("mirror.operators[0].packages[0]"), "{err}");
    assert!(err.contains("defaultChannel"), "{err}");
    assert!(!lab.path("never-created").exists());
    assert_selects(
        &lab,
        "kept.yaml",
        "    skipDependencies: true\n    packages:\n    - name: gpu-operator-certified\n      defaultChannel: v24.6\n      channels:\n      - name: v24.6\n",
        &["gpu-operator-certified.v24.6.2"],
    );
}

/// The lines of `stderr` that warn of an unmet `olm.package.required`.
fn dependency_warnings(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("warning: ") && l.contains(" requires package "))
        .collect()
}

/// The same ImageSetConfiguration gives oc-mirror v2's bundles: gpu-operator v24.9.1 requires
/// nfd >=4.17.0, and oc-mirror's filter keeps only what is listed, so by default nfd is not
/// added; the requirement is a warning naming the bundle and the range (stderr, and the plan's
/// JSON). `--follow-dependencies` adds nfd's head and reports it; `skipDependencies: true` opts
/// an entry out again.
#[test]
fn selection_reports_dependencies_as_oc_mirror_and_follows_them_when_asked() {
    let lab = Lab::new();
    let operators = "    packages:\n    - name: gpu-operator-certified\n      channels:\n      - name: stable\n";
    let cfg = lab.operators_config("deps.yaml", operators);
    let gpu = ["gpu-operator-certified.v24.9.1"];
    let (plan, stderr) = lab.plan_with(&cfg, &[]);
    assert_eq!(operator_images(&plan, &lab), images_of(&lab, &gpu));
    let catalog = &plan["catalogs"][0];
    assert_eq!(catalog["dependenciesFollowed"], false, "{catalog}");
    assert_eq!(catalog["dependencies"], serde_json::json!([]), "{catalog}");
    assert_eq!(
        catalog["unmetDependencies"],
        serde_json::json!([{
            "bundle": "gpu-operator-certified.v24.9.1",
            "package": "gpu-operator-certified",
            "requiredPackage": "nfd",
            "versionRange": ">=4.17.0",
            "reason": "the catalog has such a bundle of 'nfd', but the selection leaves it out",
        }]),
        "{catalog}"
    );
    let warnings = dependency_warnings(&stderr);
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(
        warnings[0].contains(
            "bundle 'gpu-operator-certified.v24.9.1' of package 'gpu-operator-certified' requires package 'nfd' (>=4.17.0)"
        ) && warnings[0].contains("--follow-dependencies"),
        "{stderr}"
    );

    let (plan, stderr) = lab.plan_with(&cfg, &["--follow-dependencies"]);
    let nfd = "nfd.4.18.0-202503041405";
    assert_eq!(
        operator_images(&plan, &lab),
        images_of(&lab, &[gpu[0], nfd])
    );
    let catalog = &plan["catalogs"][0];
    assert_eq!(catalog["dependenciesFollowed"], true, "{catalog}");
    assert_eq!(
        catalog["dependencies"],
        serde_json::json!([format!("nfd/{nfd}")]),
        "{catalog}"
    );
    assert_eq!(catalog["unmetDependencies"], serde_json::json!([]));
    assert!(dependency_warnings(&stderr).is_empty(), "{stderr}");

    let skip = lab.operators_config(
        "nodeps.yaml",
        &format!("    skipDependencies: true\n{operators}"),
    );
    let (plan, stderr) = lab.plan_with(&skip, &["--follow-dependencies"]);
    assert_eq!(operator_images(&plan, &lab), images_of(&lab, &gpu));
    assert_eq!(plan["catalogs"][0]["dependenciesFollowed"], false);
    assert_eq!(dependency_warnings(&stderr).len(), 1, "{stderr}");
}

/// A required package another catalog of the configuration keeps is met there (OLM resolves
/// across catalog sources): no error, no warning, nothing added; when that other catalog keeps
/// other packages only, the requirement is a warning again, not an error.
#[test]
fn a_dependency_met_by_another_catalog_is_not_reported() {
    let lab = Lab::new();
    let gpu = "    packages:\n    - name: gpu-operator-certified\n      channels:\n      - name: stable\n";
    let other = |package: &str| {
        format!(
            "  - catalog: {}/redhat/redhat-operator-index:v4.18\n    targetCatalog: other/redhat-operator-index\n    packages:\n    - name: {package}\n",
            lab.host()
        )
    };
    let cfg = lab.operators_config("two.yaml", &format!("{gpu}{}", other("nfd")));
    let (plan, stderr) = lab.plan_with(&cfg, &[]);
    for catalog in plan["catalogs"].as_array().unwrap() {
        assert_eq!(
            catalog["unmetDependencies"],
            serde_json::json!([]),
            "{catalog}"
        );
        assert_eq!(catalog["dependencies"], serde_json::json!([]), "{catalog}");
    }
    assert_eq!(
        plan["catalogs"][1]["bundles"]["nfd"],
        serde_json::json!(["nfd.4.18.0-202503041405"])
    );
    assert!(dependency_warnings(&stderr).is_empty(), "{stderr}");

    let cfg = lab.operators_config("other.yaml", &format!("{gpu}{}", other("rhods-operator")));
    let (plan, stderr) = lab.plan_with(&cfg, &[]);
    assert_eq!(
        plan["catalogs"][0]["unmetDependencies"]
            .as_array()
            .unwrap()
            .len(),
        1,
        "{plan}"
    );
    assert_eq!(dependency_warnings(&stderr).len(), 1, "{stderr}");
}

/// Across the air gap: the lab set mirrored to disk, then pushed from disk, lands where a mirror
/// to mirror puts it (release images by version tag, components in openshift/release, the
/// rebuilt catalog at its name) and writes the same cluster resources, with no registry of the
/// connected side reachable.
#[test]
fn the_lab_set_crosses_the_gap_with_its_placement() {
    let lab = Lab::new();
    let cfg = lab.lab_config();
    let disk = lab.path("disk");
    let args = lab.mirror_args(
        &[
            "-c",
            cfg.to_str().unwrap(),
            &format!("file://{}", disk.display()),
        ],
        &[lab.host()],
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(&bootstrap(&args));
    ok(&bootstrap(&[
        "verify",
        &format!("file://{}", disk.display()),
    ]));
    let upstream_host = lab.host();
    let seed = lab.seed.clone();
    drop(lab.upstream);

    let site = Registry::plain();
    let record = lab.dir.path().join("site-record.json");
    let o = bootstrap(&[
        "mirror",
        "--from",
        &format!("file://{}", disk.display()),
        "--plain-http",
        &site.host(),
        "--record",
        record.to_str().unwrap(),
        &format!("docker://{}/site", site.host()),
    ]);
    ok(&o);
    let client = RegistryClient::new(&site);
    block_on(async {
        for version in ["4.18.2", "4.18.3"] {
            let release = seed["releases"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["version"] == version)
                .unwrap();
            let (_, m) = client
                .get_manifest(
                    "site/openshift/release-images",
                    &format!("{version}-x86_64"),
                )
                .await
                .unwrap();
            assert_eq!(digest(&m), release["digest"].as_str().unwrap());
            for (name, c) in release["components"].as_object().unwrap() {
                let d = c.as_str().unwrap().rsplit_once('@').unwrap().1;
                client
                    .get_manifest("site/openshift/release", d)
                    .await
                    .unwrap_or_else(|e| panic!("component {c} missing: {e}"));
                // The first release keeps each of its components under its own tag.
                if version == "4.18.2" {
                    let (_, m) = client
                        .get_manifest("site/openshift/release", &format!("4.18.2-x86_64-{name}"))
                        .await
                        .unwrap_or_else(|e| panic!("component {c} untagged: {e}"));
                    assert_eq!(digest(&m), d);
                }
            }
        }
    });
    let files = catalog_files(&site, "site/redhat/redhat-operator-index", "v4.18");
    assert!(files.contains_key("gpu-operator-certified/catalog.json"));
    let resources = lab.dir.path().join("cluster-resources");
    let idms = fs_err::read_to_string(resources.join("idms-oc-mirror.yaml")).unwrap();
    assert!(
        idms.contains(&format!(
            "- source: {upstream_host}/openshift-release-dev/ocp-v4.0-art-dev\n    mirrors:\n    - {}/site/openshift/release\n",
            site.host()
        )),
        "{idms}"
    );
    assert!(resources
        .join("cs-redhat-operator-index-v4-18.yaml")
        .is_file());
    ok(&bootstrap(&[
        "verify",
        "--plain-http",
        &site.host(),
        "--record",
        record.to_str().unwrap(),
        &format!("docker://{}/site", site.host()),
    ]));
}
