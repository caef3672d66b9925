//! Delta archives (`--since`): only what the base lacks is carried, a delta refuses to push onto
//! a registry without its base, and a delta with nothing new says so.

use super::*;

#[test]
fn a_delta_carries_only_what_is_new_and_needs_its_base() {
    let src = Registry::plain();
    let pushed = SyntheticSet::standard(17)
        .without_large()
        .push_to(&src, "src");
    let work = tempfile::tempdir().unwrap();
    // The added image shares its base layer with images the base archive carried.
    let (added, first): (Vec<PushedImage>, Vec<PushedImage>) = pushed
        .iter()
        .cloned()
        .partition(|p| p.repo.ends_with("base/app-c"));
    assert_eq!(added.len(), 1);
    let cfg1_dir = work.path().join("one");
    let cfg2_dir = work.path().join("two");
    fs_err::create_dir_all(&cfg1_dir).unwrap();
    fs_err::create_dir_all(&cfg2_dir).unwrap();
    let cfg1 = write_config(&cfg1_dir, &first, &src.host(), &["amd64", "arm64"]);
    let cfg2 = write_config(&cfg2_dir, &pushed, &src.host(), &["amd64", "arm64"]);
    let base = work.path().join("base");
    let delta = work.path().join("delta");
    let mirror = |cfg: &Path, to: &Path, extra: &[&str]| {
        let mut args = vec![
            "mirror".to_string(),
            "-c".into(),
            cfg.display().to_string(),
            format!("archive://{}", to.display()),
            "--plain-http".into(),
            src.host(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        bootstrap(&args)
    };
    ok(&mirror(&cfg1, &base, &[]));
    let base_manifest = base.join("manifest.json");
    ok(&mirror(
        &cfg2,
        &delta,
        &["--since", base_manifest.to_str().unwrap()],
    ));

    // The delta holds the one new image, its manifests and only the blobs the base lacks.
    let bm = manifest(&base);
    let dm = manifest(&delta);
    let in_base: Vec<&str> = bm["blobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["digest"].as_str().unwrap())
        .collect();
    let images: Vec<&str> = dm["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    let new = &added[0];
    assert_eq!(
        images,
        vec![format!("{}/{}:{}", src.host(), new.repo, new.tag)]
    );
    for b in dm["blobs"].as_array().unwrap() {
        let d = b["digest"].as_str().unwrap();
        let is_manifest =
            b["size"].as_u64().unwrap() < 4096 && !new.blobs.iter().any(|(x, _)| x == d);
        assert!(
            !in_base.contains(&d) || is_manifest,
            "the delta carries {d}, which the base had"
        );
    }
    assert!(
        !dm["baseBlobs"].as_array().unwrap().is_empty(),
        "the new image shares its base layer with the base: {dm}"
    );
    for (d, _) in &new.blobs {
        let carried = dm["blobs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["digest"] == *d);
        assert!(
            carried || in_base.contains(&d.as_str()),
            "{d} is in neither"
        );
    }
    let base_sha = {
        use sha2::Digest as _;
        sha2::Sha256::digest(fs_err::read(&base_manifest).unwrap())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    assert_eq!(dm["base"]["sha256"], base_sha.as_str());

    // Onto an empty registry the delta stops, naming the missing base; nothing is pushed.
    let dst = Registry::plain();
    let dest = format!("docker://{}/site", dst.host());
    let push = |from: &Path| {
        bootstrap(&[
            "mirror",
            "--from",
            &format!("archive://{}", from.display()),
            &dest,
            "--plain-http",
            &dst.host(),
            "--workdir",
            work.path().join("push-work").to_str().unwrap(),
        ])
    };
    let err = failed(&push(&delta));
    assert!(
        err.contains(&base_sha) && err.contains("push the base archive first"),
        "{err}"
    );
    let o = skopeo(&[
        "inspect",
        "--raw",
        "--tls-verify=false",
        &format!("docker://{}/site/{}:{}", dst.host(), new.repo, new.tag),
    ]);
    assert!(!o.status.success(), "the delta's image was pushed anyway");

    // Base first, then the delta: everything arrives byte-exact.
    ok(&push(&base));
    ok(&push(&delta));
    assert_at(&dst.host(), "site", &pushed);

    // A second delta over the same content has nothing to carry, and says so.
    let again = failed(&mirror(
        &cfg1,
        &work.path().join("empty"),
        &["--since", base_manifest.to_str().unwrap()],
    ));
    assert!(again.contains("nothing is new"), "{again}");
}
