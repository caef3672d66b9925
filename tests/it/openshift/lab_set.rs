//! The lab's mirror set (`mirrorsets/lab.yaml`) end to end: mirror to mirror with releases,
//! the rebuilt catalog read back, cluster resources `oc apply` takes whole and a second run
//! that sends nothing; and across the air gap, to disk and from disk, with the same placement.

use super::*;

/// A seeded release image by digest, as the update graph names it.
fn release_by_digest(release: &Value) -> String {
    let image = release["image"].as_str().unwrap();
    let repo = image.rsplit_once(':').unwrap().0;
    format!("{repo}@{}", release["digest"].as_str().unwrap())
}

/// Reads a catalog image's config directory back from a registry, the way a cluster would
/// see it (all layers applied, whiteouts honoured).
pub(super) fn catalog_files(
    registry: &Registry,
    repo: &str,
    tag: &str,
) -> BTreeMap<String, Vec<u8>> {
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
    let (summary, record) = lab.mirror_to(
        &site,
        &cfg,
        &["--release-signatures", sigs.to_str().unwrap()],
    );
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
    let (again, _) = lab.mirror_to(
        &site,
        &cfg,
        &["--release-signatures", sigs.to_str().unwrap()],
    );
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
