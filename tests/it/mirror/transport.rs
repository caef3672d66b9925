//! How content travels and lands: images named by digest only pushed under their digest tag,
//! a large blob pulled in parallel ranges and arriving whole.

use super::*;

/// Regression: images named by digest only were pushed untagged, and registries that collect
/// untagged manifests may delete what a cluster pulls by digest. They are pushed under
/// oc-mirror v2's `sha256-<hex>` tag, mirror to mirror and disk to mirror; the record names the
/// tag, verify checks it, and a rerun finds the images in place by that tag.
#[test]
fn digest_only_images_are_pushed_under_their_digest_tag() {
    let src = Registry::plain();
    let dst = Registry::plain();
    let set = SyntheticSet::standard(7).without_large();
    let pushed = set.push_to(&src, "src");
    let by_digest: Vec<_> = ["base/app-a", "tools/multi"]
        .iter()
        .map(|r| support::images::find(&pushed, r))
        .collect();
    let work = tempfile::tempdir().unwrap();
    let mut text = String::from(
        "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  platform:\n    architectures: [multi]\n  additionalImages:\n",
    );
    for img in &by_digest {
        text.push_str(&format!(
            "  - name: {}/{}@{}\n",
            src.host(),
            img.repo,
            img.digest
        ));
    }
    let cfg = work.path().join("isc.yaml");
    fs_err::write(&cfg, text).unwrap();
    let check = |dest: &str, rec_path: &std::path::Path, prefix: &str| {
        let rec = json(rec_path);
        for img in &by_digest {
            let tag = format!("sha256-{}", img.digest.trim_start_matches("sha256:"));
            let repo = format!("{prefix}/{}", img.repo);
            assert_eq!(dst.tags(&repo), [tag.as_str()], "{repo}");
            let recorded = image_in(&rec, &img.repo);
            assert_eq!(recorded["tag"], tag.as_str(), "{recorded:#}");
            assert_eq!(
                recorded["destination"],
                format!("{}/{repo}:{tag}@{}", dst.host(), img.digest).as_str()
            );
        }
        let out = ok(&bootstrap(&[
            "verify",
            "--record",
            rec_path.to_str().unwrap(),
            dest,
            "--plain-http",
            &dst.host(),
        ]));
        assert!(out.contains("OK"), "{out}");
    };
    let dst_host = dst.host();
    let mirror = |args: &[&str]| -> serde_json::Value {
        let mut all = vec!["mirror", "--output", "json", "--plain-http", &dst_host];
        all.extend_from_slice(args);
        serde_json::from_str(&ok(&bootstrap(&all))).unwrap()
    };

    // Mirror to mirror, then a rerun that finds both images under their tags.
    let dest = format!("docker://{}/m", dst.host());
    let rec_path = work.path().join("rec.json");
    let m2m = [
        "-c",
        cfg.to_str().unwrap(),
        &dest,
        "--plain-http",
        &src.host(),
        "--record",
        rec_path.to_str().unwrap(),
    ];
    mirror(&m2m);
    check(&dest, &rec_path, "m");
    let uploads = dst.requests_matching("PUT", "/manifests/");
    let rerun = mirror(&m2m);
    assert_eq!(rerun["bytesTransferred"], 0, "{rerun:#}");
    assert_eq!(
        dst.requests_matching("PUT", "/manifests/"),
        uploads,
        "a rerun pushed manifests again"
    );
    check(&dest, &rec_path, "m");

    // Disk to mirror: the disk mirror keeps its index naming; the push tags as above.
    let disk = format!("file://{}", work.path().join("disk").display());
    ok(&bootstrap(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        &disk,
        "--plain-http",
        &src.host(),
    ]));
    let dest = format!("docker://{}/site", dst.host());
    let rec_path = work.path().join("site-rec.json");
    mirror(&[
        "--from",
        &disk,
        &dest,
        "--record",
        rec_path.to_str().unwrap(),
    ]);
    check(&dest, &rec_path, "site");
}

/// A large blob is pulled from the source as several `Range` requests at once (each on its own
/// connection) and arrives whole, to a registry and to disk; the registry's own log shows the
/// ranged GETs; with one connection per registry allowed it is not split. (Pieces are made
/// small here with the hidden `--range-piece` and `--range-from`.)
#[test]
fn a_large_blob_is_pulled_in_parallel_ranges_and_arrives_whole() {
    let src = Registry::plain();
    let dst = Registry::plain();
    let pushed = SyntheticSet::standard(23)
        .with_large_layer_size(6 * 1024 * 1024 + 123)
        .push_to(&src, "src");
    let large = support::images::find(&pushed, "data/large");
    let (big, big_size) = large
        .blobs
        .iter()
        .max_by_key(|(_, size)| *size)
        .cloned()
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let src_host = src.host();
    let cfg = write_config(
        work.path(),
        std::slice::from_ref(large),
        &src_host,
        &["amd64"],
    );
    let split = [
        "--range-parts",
        "3",
        "--range-piece",
        "1048576",
        "--range-from",
        "0",
    ];
    let ranged_gets = || {
        src.requests()
            .into_iter()
            .filter(|r| r.method == "GET" && r.path.ends_with(&big) && r.status == 206)
            .count()
    };
    let mut to_registry = vec![
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        "--plain-http",
        &src_host,
        "--plain-http",
    ];
    let dst_host = dst.host();
    let dest = format!("docker://{dst_host}/m");
    to_registry.extend([dst_host.as_str(), dest.as_str()]);
    to_registry.extend(split);
    ok(&bootstrap(&to_registry));
    // One ranged GET per 1 MiB piece.
    let pieces = big_size.div_ceil(1024 * 1024) as usize;
    assert_eq!(
        ranged_gets(),
        pieces,
        "ranged GETs of the {big_size}-byte blob"
    );
    // Over more than one connection.
    let conns: std::collections::BTreeSet<String> = src
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path.ends_with(&big) && r.status == 206)
        .map(|r| r.remote)
        .collect();
    assert!(conns.len() > 1, "{conns:?}");
    let copy = format!("docker://{dst_host}/m/{}:{}", large.repo, large.tag);
    let raw = skopeo_ok(&[s("inspect"), s("--raw"), s("--tls-verify=false"), copy]);
    assert_eq!(raw_digest(&raw), large.digest);
    assert_eq!(dst.blob_uploads_completed(&big), 1);

    let dir = work.path().join("disk");
    let mut to_disk = vec![
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        "--plain-http",
        &src_host,
    ];
    let file = format!("file://{}", dir.display());
    to_disk.push(&file);
    to_disk.extend(split);
    ok(&bootstrap(&to_disk));
    assert_eq!(ranged_gets(), 2 * pieces);
    let blob = dir
        .join("blobs/sha256")
        .join(big.trim_start_matches("sha256:"));
    assert_eq!(fs_err::metadata(&blob).unwrap().len(), big_size);
    ok(&bootstrap(&["verify", &file]));
    // Nothing of the spool is left in the working directory.
    let spool = dir.join(".bootstrap/spool");
    let left = fs_err::read_dir(&spool).map(|d| d.count()).unwrap_or(0);
    assert_eq!(left, 0, "files left in {}", spool.display());

    // One connection per registry allowed: the blob is read as one stream, not split.
    let dir = work.path().join("disk-one");
    let file = format!("file://{}", dir.display());
    let mut one = vec![
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        "--plain-http",
        &src_host,
        "--max-connections-per-registry",
        "1",
        &file,
    ];
    one.extend(split);
    ok(&bootstrap(&one));
    assert_eq!(
        ranged_gets(),
        2 * pieces,
        "split with one connection allowed"
    );
    ok(&bootstrap(&["verify", &file]));
}
