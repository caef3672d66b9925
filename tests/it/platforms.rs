//! Platforms as oc-mirror v2 applies them, against real Distribution registries with skopeo as
//! the peer: `mirror.platform.architectures` filters releases only, so a multi-arch additional
//! image or operator image is mirrored whole under its own digest; an image's or a catalog's
//! `platforms` list keeps only the pairs it names (a sparse index under the source digest, as
//! containers/image leaves it); a pair the index does not offer fails the image; a rerun with a
//! wider filter fills in what the narrower one left out.

use crate::support;

use serde_json::Value;
use std::path::Path;
use std::process::Command;
use support::client::{BlobSource, RegistryClient};
use support::images::{
    push_image, push_index, Format, ImageSpec, IndexSpec, Platform, PushedImage,
};
use support::layers::LayerSpec;
use support::run::{bootstrap, failed, json, ok};
use support::{block_on, Registry};

const HEAD: &str = "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\n";

/// An OCI index of a linux/amd64 and a linux/arm64 image, small layers from `seed`.
fn two_platforms(seed: u64) -> IndexSpec {
    let child = |platform, s| ImageSpec::new(Format::Oci, platform, vec![LayerSpec::new(s, 2048)]);
    IndexSpec {
        format: Format::Oci,
        children: vec![
            child(Platform::linux_amd64(), seed),
            child(Platform::linux_arm64(), seed + 1),
        ],
    }
}

/// Pushes [`two_platforms`] to `repo` (by digest only when `tag` is `None`).
fn push_multi(registry: &Registry, repo: &str, tag: Option<&str>, seed: u64) -> PushedImage {
    let client = RegistryClient::new(registry);
    block_on(push_index(&client, repo, tag, &two_platforms(seed))).unwrap()
}

fn child_digest(image: &PushedImage, platform: &str) -> String {
    image
        .children
        .iter()
        .find(|c| c.platform == platform)
        .unwrap_or_else(|| panic!("{} has no {platform} child", image.repo))
        .digest
        .clone()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    fs_err::write(&path, format!("{HEAD}{text}")).unwrap();
    path.display().to_string()
}

fn image<'a>(rec: &'a Value, source_suffix: &str) -> &'a Value {
    rec["images"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["source"].as_str().unwrap().contains(source_suffix))
        .unwrap_or_else(|| panic!("no image {source_suffix} in {rec:#}"))
}

fn raw_at(reference: &str) -> String {
    let o = Command::new("skopeo")
        .args(["inspect", "--raw", "--tls-verify=false", reference])
        .output()
        .expect("running skopeo");
    assert!(
        o.status.success(),
        "skopeo inspect {reference}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn digest_of(text: &str) -> String {
    bootstrap::oci::digest::Digest::of(text.as_bytes()).to_string()
}

fn blob_file(dir: &Path, digest: &str) -> std::path::PathBuf {
    dir.join("blobs/sha256")
        .join(digest.trim_start_matches("sha256:"))
}

/// The acceptance case of issue 17 point 2: `architectures: [amd64]` does not touch an
/// additional image. A multi-arch one (by tag and by digest) lands whole at a registry that
/// refuses sparse indexes, under the source's digest, with every child, as oc-mirror v2
/// copies it; the plan says so per image before anything moves.
#[test]
fn a_multi_arch_additional_image_is_mirrored_whole_under_its_own_digest() {
    let src = Registry::plain();
    let dst = Registry::plain();
    let tagged = push_multi(&src, "src/app", Some("v1"), 10);
    let pinned = push_multi(&src, "src/pinned", None, 20);
    let work = tempfile::tempdir().unwrap();
    let cfg = write(
        work.path(),
        "isc.yaml",
        &format!(
            "mirror:\n  platform:\n    architectures: [amd64]\n  additionalImages:\n  - name: {h}/src/app:v1\n  - name: {h}/src/pinned@{d}\n",
            h = src.host(),
            d = pinned.digest
        ),
    );
    let dest = format!("docker://{}/m", dst.host());
    let args = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = ["mirror", "-c", &cfg, &dest, "--plain-http", &src.host()]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.extend(["--plain-http".to_string(), dst.host()]);
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let run =
        |extra: &[&str]| bootstrap(&args(extra).iter().map(String::as_str).collect::<Vec<_>>());

    let plan: Value = serde_json::from_str(&ok(&run(&["--dry-run", "--output", "json"]))).unwrap();
    for img in plan["images"].as_array().unwrap() {
        assert_eq!(
            img["platforms"],
            serde_json::json!(["linux/amd64", "linux/arm64"]),
            "{img:#}"
        );
        assert!(img.get("platformsDropped").is_none(), "{img:#}");
        assert!(img.get("platformFilter").is_none(), "{img:#}");
    }
    let text = ok(&run(&["--dry-run"]));
    assert!(text.contains("  [linux/amd64, linux/arm64]"), "{text}");

    let rec_path = work.path().join("rec.json");
    ok(&run(&["--record", rec_path.to_str().unwrap()]));
    let rec = json(&rec_path);
    for (pushed, suffix) in [
        (&tagged, "src/app:v1".to_string()),
        (&pinned, format!("src/pinned@{}", pinned.digest)),
    ] {
        let img = image(&rec, &suffix);
        assert_eq!(img["digest"], pushed.digest.as_str(), "{img:#}");
        assert!(img.get("sourceDigest").is_none(), "{img:#}");
        assert!(img.get("platformsDropped").is_none(), "{img:#}");
        assert!(img.get("platformFilter").is_none(), "{img:#}");
        assert_eq!(img["manifests"].as_array().unwrap().len(), 2, "{img:#}");
        // At the destination: the index by its own digest, and every child by its digest.
        let repo = format!("docker://{}/m/{}", dst.host(), pushed.repo);
        assert_eq!(
            digest_of(&raw_at(&format!("{repo}@{}", pushed.digest))),
            pushed.digest
        );
        for child in &pushed.children {
            assert_eq!(
                digest_of(&raw_at(&format!("{repo}@{}", child.digest))),
                child.digest
            );
        }
    }
    // The image pinned by digest is kept under oc-mirror's digest tag as well.
    let tag = pinned.digest.replace(':', "-");
    let by_tag = raw_at(&format!("docker://{}/m/src/pinned:{tag}", dst.host()));
    assert_eq!(digest_of(&by_tag), pinned.digest);
    // The cluster pulls the source digest through the mirror set.
    let idms = fs_err::read_to_string(
        rec_path
            .parent()
            .unwrap()
            .join("cluster-resources/idms-oc-mirror.yaml"),
    )
    .unwrap();
    assert!(idms.contains(&format!("{}/src", src.host())), "{idms}");
}

/// An additional image's `platforms` keeps the pairs it names (oc-mirror v2's per-image
/// filter): a sparse index under the source digest on disk, its dropped child absent, the
/// filter in the record and the plan; the neighbour without a list stays whole. A rerun with
/// the list removed fetches the child the first run left out: the index's digest did not
/// change, so its children decide whether the image is already there.
#[test]
fn per_image_platforms_keep_the_listed_pairs_and_a_wider_rerun_fills_in() {
    let src = Registry::plain();
    let app = push_multi(&src, "src/app", Some("v1"), 30);
    let other = push_multi(&src, "src/other", Some("v1"), 40);
    let work = tempfile::tempdir().unwrap();
    let h = src.host();
    let narrow = write(
        work.path(),
        "narrow.yaml",
        &format!("mirror:\n  additionalImages:\n  - name: {h}/src/app:v1\n    platforms:\n    - os: linux\n      architecture: arm64\n  - name: {h}/src/other:v1\n"),
    );
    let wide = write(
        work.path(),
        "wide.yaml",
        &format!(
            "mirror:\n  additionalImages:\n  - name: {h}/src/app:v1\n  - name: {h}/src/other:v1\n"
        ),
    );
    let dir = work.path().join("mirror");
    let dir_url = format!("file://{}", dir.display());
    let mirror = |cfg: &str, extra: &[&str]| {
        let mut args = vec!["mirror", "-c", cfg, &dir_url, "--plain-http", &h];
        args.extend(extra);
        bootstrap(&args)
    };

    let text = ok(&mirror(&narrow, &["--dry-run"]));
    let line = text.lines().find(|l| l.contains("src/app:v1")).unwrap();
    assert!(
        line.contains("[linux/arm64; dropped linux/amd64; filter linux/arm64]"),
        "{text}"
    );
    assert!(!dir.exists(), "a dry run writes nothing");

    ok(&mirror(&narrow, &[]));
    let rec = json(&dir.join("mirror-record.json"));
    let img = image(&rec, "src/app:v1");
    assert_eq!(
        img["digest"],
        app.digest.as_str(),
        "the index is kept verbatim"
    );
    assert_eq!(img["platforms"], serde_json::json!(["linux/arm64"]));
    assert_eq!(img["platformsDropped"], serde_json::json!(["linux/amd64"]));
    assert_eq!(img["platformFilter"], serde_json::json!(["linux/arm64"]));
    let whole = image(&rec, "src/other:v1");
    assert_eq!(
        whole["platforms"],
        serde_json::json!(["linux/amd64", "linux/arm64"])
    );
    assert!(whole.get("platformFilter").is_none(), "{whole:#}");
    let amd64 = child_digest(&app, "linux/amd64");
    assert!(
        !blob_file(&dir, &amd64).exists(),
        "the dropped child was written"
    );
    assert!(blob_file(&dir, &child_digest(&app, "linux/arm64")).exists());
    assert!(ok(&bootstrap(&["verify", &dir_url])).contains("OK"));
    // skopeo pulls the kept platform out of the sparse index.
    let out = work.path().join("pulled");
    let o = Command::new("skopeo")
        .args([
            "copy",
            "--override-arch",
            "arm64",
            "--override-os",
            "linux",
            &format!("oci:{}:{h}/src/app:v1", dir.display()),
            &format!("oci:{}:arm64", out.display()),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    // Every platform now: the amd64 child arrives, the record follows.
    let summary: Value = serde_json::from_str(&ok(&mirror(&wide, &["--output", "json"]))).unwrap();
    assert_eq!(summary["imagesUnchanged"], 1, "{summary:#}");
    assert!(
        blob_file(&dir, &amd64).exists(),
        "the wider rerun skipped the image"
    );
    let rec = json(&dir.join("mirror-record.json"));
    let img = image(&rec, "src/app:v1");
    assert_eq!(
        img["platforms"],
        serde_json::json!(["linux/amd64", "linux/arm64"])
    );
    assert!(img.get("platformsDropped").is_none(), "{img:#}");
    assert!(ok(&bootstrap(&["verify", &dir_url])).contains("OK"));
    drop(other);
}

/// A pair the index does not offer fails the image, naming the field, what is offered and
/// the fix, as oc-mirror v2 fails it ("no instances found for platform"); nothing is written.
#[test]
fn a_platform_the_index_does_not_offer_fails_the_image() {
    let src = Registry::plain();
    push_multi(&src, "src/app", Some("v1"), 50);
    let work = tempfile::tempdir().unwrap();
    let cfg = write(
        work.path(),
        "isc.yaml",
        &format!(
            "mirror:\n  additionalImages:\n  - name: {}/src/app:v1\n    platforms:\n    - os: linux\n      architecture: arm64\n    - os: linux\n      architecture: s390x\n",
            src.host()
        ),
    );
    let dir = work.path().join("mirror");
    let err = failed(&bootstrap(&[
        "mirror",
        "-c",
        &cfg,
        &format!("file://{}", dir.display()),
        "--plain-http",
        &src.host(),
    ]));
    assert!(
        err.contains("offers platforms linux/amd64, linux/arm64 but mirror.additionalImages[0].platforms asks for linux/s390x, which it does not offer: remove it from the list"),
        "{err}"
    );
    assert!(!dir.join("index.json").exists(), "nothing may be written");
}

/// Pushes a file-based catalog of one package (`demo`, one bundle naming `related` as its
/// related image) as an index of a linux/amd64 and a linux/arm64 catalog image, tagged `v1`.
fn push_catalog(registry: &Registry, repo: &str, bundle: &str, related: &str) -> PushedImage {
    let fbc = [
        serde_json::json!({"schema": "olm.package", "name": "demo", "defaultChannel": "stable"}),
        serde_json::json!({"schema": "olm.channel", "package": "demo", "name": "stable", "entries": [{"name": "demo.v1.0.0"}]}),
        serde_json::json!({
            "schema": "olm.bundle", "name": "demo.v1.0.0", "package": "demo", "image": bundle,
            "properties": [{"type": "olm.package", "value": {"packageName": "demo", "version": "1.0.0"}}],
            "relatedImages": [{"name": "operand", "image": related}],
        }),
    ];
    let text: String = fbc.iter().map(|d| format!("{d}\n")).collect();
    let mut tar = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(text.len() as u64);
    h.set_mode(0o644);
    h.set_entry_type(tar::EntryType::Regular);
    tar.append_data(&mut h, "configs/demo/catalog.json", text.as_bytes())
        .unwrap();
    let layer = tar.into_inner().unwrap();
    let layer_digest = digest_of_bytes(&layer);
    let client = RegistryClient::new(registry);
    block_on(async {
        client
            .push_blob(repo, &layer_digest, BlobSource::Bytes(layer.clone().into()))
            .await
            .unwrap();
        let mut entries = Vec::new();
        for arch in ["amd64", "arm64"] {
            let config = serde_json::to_vec(&serde_json::json!({
                "architecture": arch, "os": "linux",
                "config": {"Labels": {"operators.operatorframework.io.index.configs.v1": "/configs"}},
                "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
            }))
            .unwrap();
            let config_digest = digest_of_bytes(&config);
            let manifest = serde_json::to_vec(&serde_json::json!({
                "schemaVersion": 2,
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": config.len()},
                "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer_digest, "size": layer.len()}],
            }))
            .unwrap();
            let digest = digest_of_bytes(&manifest);
            client
                .push_blob(repo, &config_digest, BlobSource::Bytes(config.into()))
                .await
                .unwrap();
            client
                .put_manifest(
                    repo,
                    &digest,
                    "application/vnd.oci.image.manifest.v1+json",
                    &manifest,
                )
                .await
                .unwrap();
            entries.push(serde_json::json!({
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": digest, "size": manifest.len(),
                "platform": {"architecture": arch, "os": "linux"},
            }));
        }
        let index = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": entries,
        }))
        .unwrap();
        client
            .put_manifest(
                repo,
                "v1",
                "application/vnd.oci.image.index.v1+json",
                &index,
            )
            .await
            .unwrap();
        PushedImage {
            repo: repo.to_string(),
            tag: "v1".into(),
            digest: digest_of_bytes(&index),
            media_type: "application/vnd.oci.image.index.v1+json".into(),
            platforms: vec!["linux/amd64".into(), "linux/arm64".into()],
            blobs: Vec::new(),
            manifest: index,
            children: Vec::new(),
        }
    })
}

fn digest_of_bytes(bytes: &[u8]) -> String {
    bootstrap::oci::digest::Digest::of(bytes).to_string()
}

/// A catalog's `platforms` applies to its catalog image, bundles and related images (oc-mirror
/// v2's per-catalog filter); a catalog without one keeps every platform of its images, so the
/// digests its CSVs pin resolve whole. Mirrored to disk (sparse indexes are kept there).
#[test]
fn per_catalog_platforms_filter_the_catalog_and_its_images_only() {
    let src = Registry::plain();
    let h = src.host();
    let client = RegistryClient::new(&src);
    let bundle = |repo: &str, seed| {
        let spec = ImageSpec::new(
            Format::Oci,
            Platform::linux_amd64(),
            vec![LayerSpec::new(seed, 1024)],
        );
        let pushed = block_on(push_image(&client, repo, None, &spec)).unwrap();
        format!("{h}/{repo}@{}", pushed.digest)
    };
    let filtered_operand = push_multi(&src, "ops/filtered-operand", None, 60);
    let whole_operand = push_multi(&src, "ops/whole-operand", None, 70);
    push_catalog(
        &src,
        "cat/filtered",
        &bundle("ops/filtered-bundle", 61),
        &format!("{h}/ops/filtered-operand@{}", filtered_operand.digest),
    );
    push_catalog(
        &src,
        "cat/whole",
        &bundle("ops/whole-bundle", 71),
        &format!("{h}/ops/whole-operand@{}", whole_operand.digest),
    );
    let work = tempfile::tempdir().unwrap();
    let cfg = write(
        work.path(),
        "isc.yaml",
        &format!("mirror:\n  platform:\n    architectures: [amd64]\n  operators:\n  - catalog: {h}/cat/filtered:v1\n    platforms:\n    - os: linux\n      architecture: arm64\n  - catalog: {h}/cat/whole:v1\n"),
    );
    let dir = work.path().join("mirror");
    let dir_url = format!("file://{}", dir.display());
    ok(&bootstrap(&[
        "mirror",
        "-c",
        &cfg,
        &dir_url,
        "--plain-http",
        &h,
    ]));
    let rec = json(&dir.join("mirror-record.json"));

    let operand = image(
        &rec,
        &format!("ops/filtered-operand@{}", filtered_operand.digest),
    );
    assert_eq!(operand["digest"], filtered_operand.digest.as_str());
    assert_eq!(operand["platforms"], serde_json::json!(["linux/arm64"]));
    assert_eq!(
        operand["platformsDropped"],
        serde_json::json!(["linux/amd64"])
    );
    assert_eq!(
        operand["platformFilter"],
        serde_json::json!(["linux/arm64"])
    );
    assert!(!blob_file(&dir, &child_digest(&filtered_operand, "linux/amd64")).exists());
    // The rebuilt catalog lists only the kept platform (a new index, nothing sparse).
    let catalog = image(&rec, "cat/filtered:v1");
    assert_eq!(catalog["platforms"], serde_json::json!(["linux/arm64"]));
    assert_eq!(
        catalog["manifests"].as_array().unwrap().len(),
        1,
        "{catalog:#}"
    );
    let index =
        fs_err::read_to_string(blob_file(&dir, catalog["digest"].as_str().unwrap())).unwrap();
    assert!(!index.contains("amd64"), "{index}");
    // The single-platform bundle is copied whatever its platform, as containers/image does.
    let bundle_rec = image(&rec, "ops/filtered-bundle@");
    assert_eq!(bundle_rec["platforms"], serde_json::json!(["linux/amd64"]));

    let operand = image(&rec, &format!("ops/whole-operand@{}", whole_operand.digest));
    assert_eq!(
        operand["platforms"],
        serde_json::json!(["linux/amd64", "linux/arm64"])
    );
    assert!(operand.get("platformFilter").is_none(), "{operand:#}");
    let catalog = image(&rec, "cat/whole:v1");
    assert_eq!(
        catalog["platforms"],
        serde_json::json!(["linux/amd64", "linux/arm64"])
    );
    assert!(ok(&bootstrap(&["verify", &dir_url])).contains("OK"));
}

/// An image two entries want (a catalog's related image, also an additional image) is
/// mirrored once with every platform either entry keeps: the catalog's linux/amd64 and the
/// additional image's linux/arm64 together keep the whole index.
#[test]
fn an_image_two_entries_want_keeps_the_platforms_of_both() {
    let src = Registry::plain();
    let h = src.host();
    let client = RegistryClient::new(&src);
    let spec = ImageSpec::new(
        Format::Oci,
        Platform::linux_amd64(),
        vec![LayerSpec::new(81, 1024)],
    );
    let bundle = block_on(push_image(&client, "ops/shared-bundle", None, &spec)).unwrap();
    let operand = push_multi(&src, "ops/shared-operand", None, 80);
    let operand_ref = format!("{h}/ops/shared-operand@{}", operand.digest);
    push_catalog(
        &src,
        "cat/shared",
        &format!("{h}/ops/shared-bundle@{}", bundle.digest),
        &operand_ref,
    );
    let work = tempfile::tempdir().unwrap();
    let cfg = write(
        work.path(),
        "isc.yaml",
        &format!("mirror:\n  operators:\n  - catalog: {h}/cat/shared:v1\n    platforms:\n    - os: linux\n      architecture: amd64\n  additionalImages:\n  - name: {operand_ref}\n    platforms:\n    - os: linux\n      architecture: arm64\n"),
    );
    let dir = work.path().join("mirror");
    let dir_url = format!("file://{}", dir.display());
    ok(&bootstrap(&[
        "mirror",
        "-c",
        &cfg,
        &dir_url,
        "--plain-http",
        &h,
    ]));
    let rec = json(&dir.join("mirror-record.json"));
    let images: Vec<&Value> = rec["images"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["source"] == operand_ref.as_str())
        .collect();
    assert_eq!(images.len(), 1, "mirrored once: {rec:#}");
    let img = images[0];
    assert_eq!(
        img["platforms"],
        serde_json::json!(["linux/amd64", "linux/arm64"])
    );
    assert!(img.get("platformsDropped").is_none(), "{img:#}");
    assert_eq!(
        img["platformFilter"],
        serde_json::json!(["linux/amd64", "linux/arm64"])
    );
    // The catalog itself keeps its own filter.
    let catalog = image(&rec, "cat/shared:v1");
    assert_eq!(catalog["platforms"], serde_json::json!(["linux/amd64"]));
}

/// A filtered image crosses the gap in an archive: the archive carries the kept child only,
/// `verify archive://` passes (the dropped platform's manifest is not reported missing: the
/// record inside the archive says it was dropped), and the push from the chunks lands the kept
/// platform (an index of only it, for Distribution 2.8).
#[test]
fn a_filtered_image_crosses_in_an_archive_and_verifies() {
    let src = Registry::plain();
    let dst = Registry::plain();
    let app = push_multi(&src, "src/app", Some("v1"), 90);
    let work = tempfile::tempdir().unwrap();
    let h = src.host();
    let cfg = write(
        work.path(),
        "isc.yaml",
        &format!("mirror:\n  additionalImages:\n  - name: {h}/src/app:v1\n    platforms:\n    - os: linux\n      architecture: arm64\n"),
    );
    let archive = format!("archive://{}", work.path().join("archive").display());
    ok(&bootstrap(&[
        "mirror",
        "-c",
        &cfg,
        &archive,
        "--plain-http",
        &h,
    ]));
    let out = ok(&bootstrap(&["verify", &archive]));
    assert!(out.contains("OK"), "{out}");
    let rec_path = work.path().join("push.json");
    ok(&bootstrap(&[
        "mirror",
        "--from",
        &archive,
        &format!("docker://{}/m", dst.host()),
        "--plain-http",
        &dst.host(),
        "--rewrite-filtered-indexes",
        "--record",
        rec_path.to_str().unwrap(),
        "--workdir",
        work.path().join("work").to_str().unwrap(),
    ]));
    let rec = json(&rec_path);
    let img = image(&rec, "src/app:v1");
    assert_eq!(img["sourceDigest"], app.digest.as_str());
    assert_eq!(img["platforms"], serde_json::json!(["linux/arm64"]));
    let raw = raw_at(&format!("docker://{}/m/src/app:v1", dst.host()));
    assert!(!raw.contains("amd64"), "{raw}");
    assert!(raw.contains(&child_digest(&app, "linux/arm64")), "{raw}");
}
