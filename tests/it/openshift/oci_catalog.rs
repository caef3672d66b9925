//! `mirror.operators[].catalog: oci://DIR`: a catalog shipped as an OCI image layout (here the
//! seeded catalog copied out by skopeo), read from disk, filtered and rebuilt like a registry
//! catalog, and placed as oc-mirror v2 places it: `<prefix>/<directory name>:latest`, or
//! `targetCatalog:targetTag`; its bundles' images come from their registries.

use super::lab_set::catalog_files;
use super::*;
use std::process::Command;

/// The seeded catalog copied into an OCI layout at `dir` by skopeo, as a team ships one.
fn catalog_layout(lab: &Lab, dir: &Path) {
    let src = format!("docker://{}/redhat/redhat-operator-index:v4.18", lab.host());
    fs_err::create_dir_all(dir).unwrap();
    let dst = format!("oci:{}:v4.18", dir.display());
    let o = Command::new("skopeo")
        .args(["copy", "--all", "--src-tls-verify=false", &src, &dst])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "skopeo copy: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A configuration reading the layout at `dir` twice: gpu-operator-certified at the default
/// place, openshift-gitops-operator at `team/catalog:v15`.
fn layout_config(lab: &Lab, dir: &Path) -> PathBuf {
    let text = format!(
        "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  operators:\n  - catalog: oci://{dir}\n    skipDependencies: true\n    packages:\n    - name: gpu-operator-certified\n      channels:\n      - name: stable\n  - catalog: oci://{dir}\n    targetCatalog: team/catalog\n    targetTag: v15\n    skipDependencies: true\n    packages:\n    - name: openshift-gitops-operator\n      channels:\n      - name: gitops-1.14\n      defaultChannel: gitops-1.14\n",
        dir = dir.display()
    );
    lab.config("oci.yaml", &text)
}

/// The packages of a catalog read back from `site`.
fn packages(site: &Registry, repo: &str, tag: &str) -> Vec<String> {
    let files = catalog_files(site, repo, tag);
    let catalog = bootstrap::openshift::fbc::Catalog::parse(&files).unwrap();
    catalog.bundles.keys().cloned().collect()
}

/// Bundle and related images the seed pushed for `bundle`.
fn images_of(lab: &Lab, bundle: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for p in lab.seed["catalog"]["packages"].as_array().unwrap() {
        for b in p["bundles"].as_array().unwrap() {
            if b["name"] == bundle {
                out.insert(b["image"].as_str().unwrap().to_string());
                for r in b["relatedImages"].as_object().unwrap().values() {
                    out.insert(r.as_str().unwrap().to_string());
                }
            }
        }
    }
    assert!(!out.is_empty(), "the seed has no bundle {bundle}");
    out
}

/// Mirror to mirror from an `oci://` layout: each selection rebuilt from the layout's catalog
/// at `<prefix>/<directory name>:latest` and at `targetCatalog:targetTag`, holding only its
/// package; the kept bundles' images mirrored from the upstream registry; CatalogSources
/// `cs-<name>-<tag>` naming the mirrored catalogs; record and report naming the `oci://` path.
#[test]
fn an_oci_catalog_is_read_from_its_layout_and_placed_as_oc_mirror_places_it() {
    let lab = Lab::new();
    let layout = lab.path("shipped/my-catalog");
    catalog_layout(&lab, &layout);
    let cfg = layout_config(&lab, &layout);
    let site = Registry::plain();
    let (summary, record) = lab.mirror_to(&site, &cfg, &[]);
    let label = format!("oci://{}", layout.display());

    assert_eq!(
        packages(&site, "mirror/my-catalog", "latest"),
        ["gpu-operator-certified"]
    );
    assert_eq!(
        packages(&site, "mirror/team/catalog", "v15"),
        ["openshift-gitops-operator"]
    );
    for c in summary["catalogs"].as_array().unwrap() {
        assert_eq!(c["catalog"], label.as_str(), "{c}");
    }

    // The kept bundles' images came from the upstream registry.
    let rec = json(&record);
    let mirrored = sources(&rec);
    for bundle in [
        "gpu-operator-certified.v24.9.1",
        "openshift-gitops-operator.v1.14.3",
    ] {
        for image in images_of(&lab, bundle) {
            assert!(mirrored.contains(&image), "{image} not mirrored");
        }
    }
    let catalogs: Vec<&Value> = rec["images"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["category"] == "catalog")
        .collect();
    assert_eq!(catalogs.len(), 2, "{catalogs:?}");
    for c in &catalogs {
        assert_eq!(c["source"], label.as_str(), "{c}");
    }

    let resources = lab.path("cluster-resources");
    for (file, image) in [
        ("cs-my-catalog-latest.yaml", "mirror/my-catalog:latest"),
        ("cs-catalog-v15.yaml", "mirror/team/catalog:v15"),
    ] {
        let yaml =
            fs_err::read_to_string(resources.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(
            yaml.contains(&format!("image: {}/{image}\n", site.host())),
            "{yaml}"
        );
    }
    // The record still gives install-config's mirrors (the catalog is no mirror source).
    ok(&bootstrap(&[
        "verify",
        "--record",
        record.to_str().unwrap(),
        &format!("docker://{}/mirror", site.host()),
        "--plain-http",
        &site.host(),
    ]));
}

/// `oci:` without `//` is no OCI layout to oc-mirror v2: refused as it refuses it, before
/// anything is contacted.
#[test]
fn an_oci_catalog_with_one_slash_is_refused_as_oc_mirror_refuses_it() {
    let lab = Lab::new();
    let cfg = lab.config(
        "one-slash.yaml",
        "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  operators:\n  - catalog: oci:/tmp/my-catalog\n",
    );
    let err = lab.plan_error(&cfg);
    assert!(
        err.contains("one-slash.yaml:5:") && err.contains("mirror.operators[0].catalog"),
        "{err}"
    );
    assert!(
        err.contains(
            "oci:/tmp/my-catalog unable to parse image correctly : tag and digest are empty"
        ),
        "{err}"
    );
}

/// Across the gap: the catalog read from the layout goes into the disk mirror (named there
/// `localhost/<directory name>:latest`, a valid reference, with its placement; the run's source
/// names the `oci://` path), and from disk to `<prefix>/<directory name>:latest` with its
/// CatalogSource, as a mirror to mirror places it.
#[test]
fn an_oci_catalog_crosses_the_gap_to_its_place() {
    let lab = Lab::new();
    let layout = lab.path("shipped/my-catalog");
    catalog_layout(&lab, &layout);
    let cfg = layout_config(&lab, &layout);
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
    let disk_record = json(&disk.join("mirror-record.json"));
    let run_source = disk_record["runs"][0]["source"].as_str().unwrap();
    assert!(
        run_source.contains(&format!("oci://{}", layout.display())),
        "{run_source}"
    );
    drop(lab.upstream);

    let site = Registry::plain();
    let record = lab.dir.path().join("site-record.json");
    ok(&bootstrap(&[
        "mirror",
        "--from",
        &format!("file://{}", disk.display()),
        "--plain-http",
        &site.host(),
        "--record",
        record.to_str().unwrap(),
        &format!("docker://{}/site", site.host()),
    ]));
    assert_eq!(
        packages(&site, "site/my-catalog", "latest"),
        ["gpu-operator-certified"]
    );
    assert_eq!(
        packages(&site, "site/team/catalog", "v15"),
        ["openshift-gitops-operator"]
    );
    let resources = lab.dir.path().join("cluster-resources");
    let yaml = fs_err::read_to_string(resources.join("cs-my-catalog-latest.yaml")).unwrap();
    assert!(
        yaml.contains(&format!("image: {}/site/my-catalog:latest\n", site.host())),
        "{yaml}"
    );
}

/// Writes `bytes` into the layout at `dir` as a blob; returns its digest.
fn put_blob(dir: &Path, bytes: &[u8]) -> String {
    let d = digest(bytes);
    let hex = d.trim_start_matches("sha256:");
    fs_err::write(dir.join("blobs/sha256").join(hex), bytes).unwrap();
    d
}

/// A layout whose `index.json` lists per-platform manifests itself (no index blob): the
/// catalog's amd64 manifest and an arm64 twin (its config says arm64). oc-mirror reads such
/// an `index.json` as the image's index (`ConvertOCIIndexToSingleManifest`); so does
/// bootstrap: both platforms rebuilt, under one index, at `<prefix>/<name>:latest`.
#[test]
fn an_oci_catalog_whose_index_json_lists_platforms_is_read_as_one_multi_arch_index() {
    let lab = Lab::new();
    let layout = lab.path("shipped/flat-catalog");
    catalog_layout(&lab, &layout);
    let index: Value = json(&layout.join("index.json"));
    let amd64 = index["manifests"][0].clone();
    let hex = amd64["digest"]
        .as_str()
        .unwrap()
        .trim_start_matches("sha256:");
    let manifest_bytes = fs_err::read(layout.join("blobs/sha256").join(hex)).unwrap();
    let mut manifest: Value = serde_json::from_slice(&manifest_bytes).unwrap();
    let config_hex = manifest["config"]["digest"]
        .as_str()
        .unwrap()
        .trim_start_matches("sha256:")
        .to_string();
    let mut config: Value = serde_json::from_slice(
        &fs_err::read(layout.join("blobs/sha256").join(&config_hex)).unwrap(),
    )
    .unwrap();
    config["architecture"] = "arm64".into();
    let config_bytes = serde_json::to_vec(&config).unwrap();
    manifest["config"]["digest"] = put_blob(&layout, &config_bytes).into();
    manifest["config"]["size"] = config_bytes.len().into();
    let arm64_bytes = serde_json::to_vec(&manifest).unwrap();
    let arm64_digest = put_blob(&layout, &arm64_bytes);
    let entry = |e: &Value, digest: &str, size: usize, arch: &str| {
        serde_json::json!({
            "mediaType": e["mediaType"],
            "digest": digest,
            "size": size,
            "platform": {"os": "linux", "architecture": arch},
        })
    };
    let flat = serde_json::json!({
        "schemaVersion": 2,
        "manifests": [
            entry(&amd64, amd64["digest"].as_str().unwrap(), manifest_bytes.len(), "amd64"),
            entry(&amd64, &arm64_digest, arm64_bytes.len(), "arm64"),
        ],
    });
    fs_err::write(
        layout.join("index.json"),
        serde_json::to_vec(&flat).unwrap(),
    )
    .unwrap();

    let cfg = lab.config(
        "flat.yaml",
        &format!(
            "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  operators:\n  - catalog: oci://{}\n    skipDependencies: true\n    packages:\n    - name: gpu-operator-certified\n      channels:\n      - name: stable\n",
            layout.display()
        ),
    );
    let site = Registry::plain();
    let record = lab.path("record.json");
    let args = lab.mirror_args(
        &[
            "-c",
            cfg.to_str().unwrap(),
            "--record",
            record.to_str().unwrap(),
            &format!("docker://{}/mirror", site.host()),
        ],
        &[lab.host(), site.host()],
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(&bootstrap(&args));
    let client = RegistryClient::new(&site);
    let children: Vec<String> = block_on(async {
        let (_, m) = client
            .get_manifest("mirror/flat-catalog", "latest")
            .await
            .unwrap();
        let m: Value = serde_json::from_slice(&m).unwrap();
        m["manifests"]
            .as_array()
            .unwrap_or_else(|| panic!("not an index: {m}"))
            .iter()
            .map(|e| e["platform"]["architecture"].as_str().unwrap().to_string())
            .collect()
    });
    assert_eq!(children, ["amd64", "arm64"]);
    let rec = json(&record);
    let catalog = rec["images"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["category"] == "catalog")
        .unwrap();
    assert_eq!(
        catalog["platforms"],
        serde_json::json!(["linux/amd64", "linux/arm64"])
    );

    // The entry's `platforms` filters the layout's index as it filters a registry's.
    let arm = lab.config(
        "flat-arm.yaml",
        &format!(
            "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  operators:\n  - catalog: oci://{}\n    targetTag: arm-only\n    platforms:\n    - os: linux\n      architecture: arm64\n    skipDependencies: true\n    packages:\n    - name: gpu-operator-certified\n      channels:\n      - name: stable\n",
            layout.display()
        ),
    );
    let args = lab.mirror_args(
        &[
            "-c",
            arm.to_str().unwrap(),
            "--record",
            lab.path("record-arm.json").to_str().unwrap(),
            &format!("docker://{}/mirror", site.host()),
        ],
        &[lab.host(), site.host()],
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(&bootstrap(&args));
    let children: Vec<String> = block_on(async {
        let (_, m) = client
            .get_manifest("mirror/flat-catalog", "arm-only")
            .await
            .unwrap();
        let m: Value = serde_json::from_slice(&m).unwrap();
        m["manifests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["platform"]["architecture"].as_str().unwrap().to_string())
            .collect()
    });
    assert_eq!(children, ["arm64"]);
}
