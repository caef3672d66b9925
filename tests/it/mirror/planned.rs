//! What a run plans and what it leaves out on purpose: `--dry-run` copies nothing and lists
//! everything; `mirror.blockedImages` leaves images out and says so.

use super::*;
use crate::support::images::PushedImage;

/// `--dry-run` resolves everything and lists each image with its size and the totals, as text
/// and as a JSON plan file, and creates nothing: no disk mirror, no upload at a registry. After
/// a real mirror the same dry run finds every image already there and nothing to send.
#[test]
fn a_dry_run_plans_everything_and_copies_nothing() {
    let src = Registry::plain();
    let dst = Registry::plain();
    let pushed = SyntheticSet::standard(5).push_to(&src, "src");
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(work.path(), &pushed, &src.host(), &["multi"]);
    let dir = work.path().join("mirror");
    let (src_host, dst_host) = (src.host(), dst.host());
    let run = |dest: &str, extra: &[&str]| {
        let mut args = vec!["mirror", "-c", cfg.to_str().unwrap(), dest, "--dry-run"];
        args.extend_from_slice(&["--plain-http", &src_host, "--plain-http", &dst_host]);
        args.extend_from_slice(extra);
        let out = support::run::command(&args)
            .current_dir(work.path())
            .output()
            .unwrap();
        ok(&out)
    };
    let plan: serde_json::Value = serde_json::from_str(&run(
        &format!("file://{}", dir.display()),
        &["--output", "json"],
    ))
    .unwrap();
    assert!(!dir.exists(), "a dry run created {}", dir.display());
    assert_eq!(plan["images"].as_array().unwrap().len(), pushed.len());
    let unique: std::collections::BTreeMap<&str, u64> = pushed
        .iter()
        .flat_map(|p| p.blobs.iter().map(|(d, s)| (d.as_str(), *s)))
        .collect();
    assert_eq!(plan["blobs"].as_u64().unwrap() as usize, unique.len());
    assert_eq!(
        plan["bytesTotal"].as_u64().unwrap(),
        unique.values().sum::<u64>()
    );
    assert_eq!(plan["bytesToSend"], plan["bytesTotal"]);
    let files: Vec<_> = fs_err::read_dir(work.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("mirror-dry-run-")
        })
        .collect();
    assert_eq!(files.len(), 1, "one plan file");

    let dest = format!("docker://{}/m", dst.host());
    let text = run(&dest, &[]);
    assert!(text.contains("nothing was copied"), "{text}");
    assert_eq!(dst.requests_matching("POST", "/blobs/uploads/"), 0);
    ok(&bootstrap(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        &dest,
        "--plain-http",
        &src.host(),
        "--plain-http",
        &dst.host(),
        "--record",
        work.path().join("rec.json").to_str().unwrap(),
        "--status-file",
        work.path().join("status.json").to_str().unwrap(),
    ]));
    // The real mirror checks its resolve cache by each top manifest's digest, read with the
    // GET it needs anyway: no HEAD of a source manifest first.
    assert_eq!(src.requests_matching("HEAD", "/manifests/"), 0);
    let again: serde_json::Value =
        serde_json::from_str(&run(&dest, &["--output", "json"])).unwrap();
    assert_eq!(again["bytesToSend"], 0, "{again:#}");
    assert!(again["images"]
        .as_array()
        .unwrap()
        .iter()
        .all(|i| i["alreadyMirrored"] == true));
}

/// `mirror.blockedImages` patterns (regular expressions, matched anywhere in the reference as
/// oc-mirror matches them) leave images out on purpose: not fetched, not in the record, listed
/// as blocked with the pattern in the status file, and the run still succeeds.
#[test]
fn blocked_images_are_left_out_and_said_so() {
    let src = Registry::plain();
    let pushed = SyntheticSet::standard(6)
        .without_large()
        .push_to(&src, "src");
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(work.path(), &pushed, &src.host(), &["multi"]);
    let mut text = fs_err::read_to_string(&cfg).unwrap();
    text.push_str("  blockedImages:\n  - name: '/base/app-b:'\n  - name: multi-docker\n");
    fs_err::write(&cfg, text).unwrap();
    let dir = work.path().join("mirror");
    ok(&bootstrap(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        &format!("file://{}", dir.display()),
        "--plain-http",
        &src.host(),
    ]));
    let rec = json(&dir.join("mirror-record.json"));
    let sources: Vec<&str> = rec["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["source"].as_str().unwrap())
        .collect();
    assert_eq!(sources.len(), pushed.len() - 2, "{sources:?}");
    assert!(!sources
        .iter()
        .any(|s| s.contains("app-b") || s.contains("multi-docker")));
    let status = json(&dir.join("mirror-status.json"));
    assert_eq!(status["blocked"], 2, "{status:#}");
    assert_eq!(status["failed"], 0);
    let blocked: Vec<&serde_json::Value> = status["images"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["status"] == "blocked")
        .collect();
    assert!(blocked[0]["error"]
        .as_str()
        .unwrap()
        .contains("mirror.blockedImages[0] (/base/app-b:)"));
    // Nothing of a blocked image was fetched.
    let app_b = pushed.iter().find(|p| p.repo.ends_with("app-b")).unwrap();
    assert_eq!(
        src.requests_matching("GET", &format!("{}/manifests", app_b.repo)),
        0
    );
}

/// Issue 30 point 2: `additionalImages[].targetRepo` and `targetTag` place an image as oc-mirror
/// places it (`<prefix>/<targetRepo>:<targetTag>`; by digest with a targetTag: pulled by digest,
/// tagged as that), checked with skopeo at the destination and in the record; a targetRepo that
/// is not a repository path leaves that image out as oc-mirror does (its warning in the status
/// file, status `ignored`) and the run still succeeds. The same placement survives mirror to
/// disk and on to a registry.
#[test]
fn target_repo_and_target_tag_place_additional_images_as_oc_mirror_does() {
    let src = Registry::plain();
    let dst = Registry::plain();
    let pushed = SyntheticSet::standard(8)
        .without_large()
        .push_to(&src, "src");
    let tagged: Vec<_> = pushed.iter().filter(|p| !p.tag.is_empty()).collect();
    let (a, b, c) = (tagged[0], tagged[1], tagged[2]);
    let work = tempfile::tempdir().unwrap();
    let cfg = work.path().join("isc.yaml");
    fs_err::write(
        &cfg,
        format!(
            "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  additionalImages:\n  - name: {host}/{ar}:{at}\n    targetRepo: custom/place\n    targetTag: v9\n  - name: {host}/{br}@{bd}\n    targetTag: pinned\n  - name: {host}/{cr}:{ct}\n    targetRepo: Not_A/Repo:tag\n",
            host = src.host(),
            ar = a.repo,
            at = a.tag,
            br = b.repo,
            bd = b.digest,
            cr = c.repo,
            ct = c.tag
        ),
    )
    .unwrap();
    let status_path = work.path().join("status.json");
    let record = work.path().join("rec.json");
    let o = bootstrap(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        &format!("docker://{}/m", dst.host()),
        "--plain-http",
        &src.host(),
        "--plain-http",
        &dst.host(),
        "--record",
        record.to_str().unwrap(),
        "--status-file",
        status_path.to_str().unwrap(),
    ]);
    ok(&o);
    let digest_at = |path: &str| -> String {
        let raw = dst.skopeo_inspect(path, true).unwrap();
        crate::support::layers::sha256_digest(raw.as_bytes())
    };
    assert_eq!(digest_at("m/custom/place:v9"), a.digest);
    assert_eq!(digest_at(&format!("m/{}:pinned", b.repo)), b.digest);
    assert!(dst
        .skopeo_inspect(&format!("m/{}:{}", c.repo, c.tag), true)
        .is_err());
    let status = json(&status_path);
    assert_eq!(status["ignored"], 1, "{status:#}");
    let ignored = status["images"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["status"] == "ignored")
        .unwrap()
        .clone();
    assert!(
        ignored["error"]
            .as_str()
            .unwrap()
            .starts_with("invalid targetRepo Not_A/Repo:tag for image "),
        "{ignored}"
    );
    let rec = json(&record);
    let dests: Vec<&str> = rec["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["destination"].as_str().unwrap())
        .collect();
    assert!(
        dests.iter().any(|d| d.ends_with("/m/custom/place:v9"))
            && dests
                .iter()
                .any(|d| d.contains(&format!("/m/{}:pinned", b.repo))),
        "{dests:?}"
    );

    // To disk, then on to a registry: the same places.
    let dir = work.path().join("disk");
    ok(&bootstrap(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        &format!("file://{}", dir.display()),
        "--plain-http",
        &src.host(),
    ]));
    let dst2 = Registry::plain();
    ok(&bootstrap(&[
        "mirror",
        "--from",
        &format!("file://{}", dir.display()),
        &format!("docker://{}/n", dst2.host()),
        "--plain-http",
        &dst2.host(),
    ]));
    let raw = dst2.skopeo_inspect("n/custom/place:v9", true).unwrap();
    assert_eq!(
        crate::support::layers::sha256_digest(raw.as_bytes()),
        a.digest
    );
    assert!(dst2
        .skopeo_inspect(&format!("n/{}:pinned", b.repo), true)
        .is_ok());
}

/// An image config is read once per run however many repositories hold it: the same set pushed
/// under two prefixes costs the configs of one (point 3 of issue 31: a full catalog's plan asked
/// the registry for every image's config).
#[test]
fn a_config_shared_by_repositories_is_read_once_per_run() {
    let src = Registry::plain();
    let set = SyntheticSet::standard(7);
    let a = set.push_to(&src, "a");
    let b = set.push_to(&src, "b");
    let work = tempfile::tempdir().unwrap();
    let (src_host, dst) = (src.host(), Registry::plain());
    let dry = |images: &[PushedImage]| {
        let cfg = write_config(work.path(), images, &src_host, &["multi"]);
        let before = src.requests_matching("GET", "/blobs/");
        let dest = format!("docker://{}/m", dst.host());
        let args = [
            "mirror",
            "-c",
            cfg.to_str().unwrap(),
            &dest,
            "--dry-run",
            "--plain-http",
            &src_host,
            "--plain-http",
            &dst.host(),
        ];
        ok(&support::run::command(&args)
            .current_dir(work.path())
            .output()
            .unwrap());
        src.requests_matching("GET", "/blobs/") - before
    };
    let one = dry(&a);
    assert!(one > 0, "the configs of one set are read");
    let both: Vec<PushedImage> = a.iter().chain(&b).cloned().collect();
    assert_eq!(
        dry(&both),
        one,
        "the second set's identical configs are not read again"
    );
}
