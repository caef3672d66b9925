//! `bootstrap archive create` cuts an existing disk mirror into chunks; a manifest that leaves a
//! layer out, a missing chunk and an unexpected file are named by verify, and the missing chunk
//! before anything is pushed.

use super::*;

#[test]
fn archive_create_cuts_a_disk_mirror_and_missing_chunks_are_named_before_a_push() {
    let src = Registry::plain();
    let pushed = SyntheticSet::standard(18).push_to(&src, "src");
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(work.path(), &pushed, &src.host(), &["amd64", "arm64"]);
    let layout = work.path().join("layout");
    ok(&bootstrap(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        &format!("file://{}", layout.display()),
        "--plain-http",
        &src.host(),
    ]));
    let dir = work.path().join("cut");
    let url = format!("archive://{}", dir.display());
    ok(&bootstrap(&[
        "archive",
        "create",
        "--from",
        &format!("file://{}", layout.display()),
        &url,
        "--archive-size",
        "16MiB",
    ]));
    ok(&bootstrap(&["verify", &url]));
    let m = manifest(&dir);
    // Every blob file of the layout is in the archive, once.
    let files: Vec<String> = fs_err::read_dir(layout.join("blobs/sha256"))
        .unwrap()
        .map(|e| format!("sha256:{}", e.unwrap().file_name().to_string_lossy()))
        .collect();
    let carried: Vec<&str> = m["blobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["digest"].as_str().unwrap())
        .collect();
    assert_eq!(carried.len(), files.len());
    for f in &files {
        assert!(carried.contains(&f.as_str()), "{f}");
    }
    // The large layer (32 MiB) went alone into a chunk past 16 MiB; the rest stayed within.
    for c in m["chunks"].as_array().unwrap() {
        let inside = m["blobs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["chunk"] == c["name"])
            .count();
        assert!(
            c["size"].as_u64().unwrap() <= 16 * MIB || inside == 1,
            "{c}"
        );
    }

    // A manifest.json that leaves out a layer an image needs (as a hand-edited or truncated one
    // would): verify names the image and the layer.
    let edited = work.path().join("edited");
    fs_err::create_dir_all(&edited).unwrap();
    for c in m["chunks"].as_array().unwrap() {
        let name = c["name"].as_str().unwrap();
        fs_err::hard_link(dir.join(name), edited.join(name)).unwrap();
    }
    let layer = pushed
        .iter()
        .find(|p| p.repo.ends_with("base/app-a"))
        .unwrap()
        .blobs
        .iter()
        .min_by_key(|(_, s)| *s)
        .unwrap()
        .0
        .clone();
    let mut cut = m.clone();
    cut["blobs"]
        .as_array_mut()
        .unwrap()
        .retain(|b| b["digest"] != layer.as_str());
    fs_err::write(
        edited.join("manifest.json"),
        serde_json::to_vec(&cut).unwrap(),
    )
    .unwrap();
    fs_err::copy(dir.join("SHA256SUMS"), edited.join("SHA256SUMS")).unwrap();
    let o = bootstrap(&["verify", &format!("archive://{}", edited.display())]);
    assert!(!o.status.success());
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        out.lines()
            .any(|l| l.contains("base/app-a") && l.contains(&layer) && l.contains("neither")),
        "{out}"
    );

    // A chunk left behind at the door: named before anything is pushed; an unexpected file
    // and the missing chunk both appear in verify, one line each.
    let lost = m["chunks"][0]["name"].as_str().unwrap().to_string();
    fs_err::rename(dir.join(&lost), work.path().join(&lost)).unwrap();
    fs_err::write(dir.join("notes.txt"), "hello").unwrap();
    let dst = Registry::plain();
    let err = failed(&bootstrap(&[
        "mirror",
        "--from",
        &url,
        &format!("docker://{}/site", dst.host()),
        "--plain-http",
        &dst.host(),
        "--workdir",
        work.path().join("push-work").to_str().unwrap(),
    ]));
    assert!(err.contains(&format!("{lost} is missing")), "{err}");
    let o = bootstrap(&["verify", &url]);
    assert!(!o.status.success());
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(out.lines().any(|l| l.contains(&lost)), "{out}");
    assert!(out.lines().any(|l| l.contains("notes.txt")), "{out}");
}
