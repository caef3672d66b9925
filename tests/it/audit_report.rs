//! `bootstrap audit report` (issue 16, part 5) on what real mirrors wrote: the lab's archive
//! (releases by version, operators with their channels and bundle versions read out of the
//! carried catalog, the model), a signed delta of the synthetic set, and a signed registry
//! record with what a record alone cannot show. Text, Markdown and JSON are pinned by golden
//! files in tests/testdata/audit (`UPDATE_GOLDEN=1` rewrites them).
//!
//! What changes from run to run is replaced by the exact value the test knows, under a name
//! (temporary paths, registry ports, times, the per-run key's fingerprint, the sha256 and size
//! of files that hold those), so a wrong value is never hidden. The lab's content embeds its
//! registry's port, so its digests and compressed sizes change too: its golden numbers the
//! digests and blanks the sizes, and its JSON is checked against the record, field by field.

use crate::support;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use support::images::SyntheticSet;
use support::run::{bootstrap, failed, json, lab, ok, repo, write_config};
use support::Registry;

/// An ed25519 key without passphrase, as the mirror operator makes it.
fn keygen(dir: &Path, name: &str) -> PathBuf {
    let key = dir.join(name);
    let st = Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            "ed25519",
            "-C",
            "mirror-operator@example.com",
            "-N",
            "",
            "-f",
        ])
        .arg(&key)
        .status()
        .unwrap();
    assert!(st.success());
    key
}

/// The auditor's allowed_signers file for `key` (written from its .pub, as an auditor does)
/// and the key's fingerprint as `ssh-keygen -l` prints it.
fn allowed_signers(dir: &Path, key: &Path, name: &str) -> (PathBuf, String) {
    let public = fs_err::read_to_string(key.with_extension("pub")).unwrap();
    let mut fields = public.split_whitespace();
    let (kind, blob) = (fields.next().unwrap(), fields.next().unwrap());
    let path = dir.join(name);
    fs_err::write(
        &path,
        format!("mirror-operator@example.com namespaces=\"bootstrap-mirror\" {kind} {blob}\n"),
    )
    .unwrap();
    let o = Command::new("ssh-keygen")
        .arg("-lf")
        .arg(key.with_extension("pub"))
        .output()
        .unwrap();
    let listing = String::from_utf8(o.stdout).unwrap();
    let fingerprint = listing.split_whitespace().nth(1).unwrap().to_string();
    (path, fingerprint)
}

/// sha256 of a file, by coreutils (what the auditor has).
fn sha256sum(path: &Path) -> String {
    let o = Command::new("sha256sum").arg(path).output().unwrap();
    String::from_utf8(o.stdout).unwrap()[..64].to_string()
}

/// `bootstrap audit report ARGS`.
fn audit(args: &[&str]) -> Output {
    let mut all = vec!["audit", "report"];
    all.extend_from_slice(args);
    bootstrap(&all)
}

fn arg(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn golden(name: &str, got: &str) {
    let path = repo(&format!("tests/testdata/audit/{name}"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        fs_err::create_dir_all(path.parent().unwrap()).unwrap();
        fs_err::write(&path, got).unwrap();
        return;
    }
    let want = fs_err::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", path.display()));
    assert!(
        got == want,
        "{} differs (UPDATE_GOLDEN=1 rewrites it):\n{got}",
        path.display()
    );
}

/// Exact values replaced by names, longest first (so a path is replaced before its prefix).
#[derive(Default)]
struct Names(Vec<(String, String)>);

impl Names {
    fn add(&mut self, value: impl Into<String>, name: &str) -> &mut Self {
        let value = value.into();
        assert!(!value.is_empty(), "{name}: nothing to replace");
        self.0.push((value, format!("<{name}>")));
        self
    }

    /// A byte count, in the forms the report prints it: `1.2 KiB (1234 bytes)` in text, the
    /// number in JSON (replaced through [`Names::json`] paths, not here).
    fn add_size(&mut self, n: u64, name: &str) -> &mut Self {
        self.add(bootstrap::audit::Bytes(n).to_string(), name)
    }

    fn apply(&self, text: &str) -> String {
        let mut pairs: Vec<&(String, String)> = self.0.iter().collect();
        pairs.sort_by_key(|(v, _)| std::cmp::Reverse(v.len()));
        let mut out = text.to_string();
        for (value, name) in pairs {
            out = out.replace(value, name);
        }
        out
    }
}

/// The mirror record an archive carries, read by its offset in its chunk.
fn archive_record(dir: &Path) -> Value {
    let manifest = json(&dir.join("manifest.json"));
    let file = manifest["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "mirror-record.json")
        .unwrap();
    let mut chunk = fs_err::File::open(dir.join(file["chunk"].as_str().unwrap())).unwrap();
    chunk
        .seek(SeekFrom::Start(file["offset"].as_u64().unwrap()))
        .unwrap();
    let mut bytes = vec![0; file["size"].as_u64().unwrap() as usize];
    chunk.read_exact(&mut bytes).unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// Every time a record's runs and an archive's manifest hold.
fn times(names: &mut Names, record: &Value, manifest: Option<&Value>) {
    for run in record["runs"].as_array().unwrap() {
        names.add(run["started"].as_str().unwrap(), "time");
        names.add(run["finished"].as_str().unwrap(), "time");
    }
    if let Some(m) = manifest {
        names.add(m["created"].as_str().unwrap(), "time");
    }
}

/// Each distinct sha256 hex string numbered in order of first appearance (`<sha256 #3>`), so
/// equal digests stay equal and different ones different.
fn number_hashes(text: &str) -> String {
    let hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
    let bytes = text.as_bytes();
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    let (mut out, mut i) = (String::new(), 0);
    while i < bytes.len() {
        let run = bytes[i..].iter().take_while(|b| hex(**b)).count();
        let bounded = i == 0 || !bytes[i - 1].is_ascii_alphanumeric();
        if run == 64 && bounded {
            let h = &text[i..i + 64];
            let n = seen.len() + 1;
            let n = *seen.entry(h).or_insert(n);
            out.push_str(&format!("<sha256 #{n}>"));
            i += 64;
        } else {
            let step = run.max(text[i..].chars().next().map_or(1, char::len_utf8));
            out.push_str(&text[i..i + step]);
            i += step;
        }
    }
    out
}

/// Byte counts blanked (`<size>`), for the lab's golden only.
fn blank_sizes(text: &str) -> String {
    let re = regex::Regex::new(r"\d+(\.\d)? [KMGT]iB \(\d+ bytes\)|\b\d+ bytes?\b").unwrap();
    re.replace_all(text, "<size>").into_owned()
}

/// The images of a record by source.
fn record_images(record: &Value) -> BTreeMap<String, &Value> {
    record["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["source"].as_str().unwrap().to_string(), i))
        .collect()
}

/// The bytes of `sources`' manifests and blobs, each counted once, from the record alone.
fn unique_bytes(record: &Value, sources: &[String]) -> u64 {
    let blob_sizes: BTreeMap<&str, u64> = record["blobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["digest"].as_str().unwrap(), b["size"].as_u64().unwrap()))
        .collect();
    let images = record_images(record);
    let mut seen: BTreeMap<&str, u64> = BTreeMap::new();
    for s in sources {
        let i = images[s];
        seen.insert(i["digest"].as_str().unwrap(), i["size"].as_u64().unwrap());
        for m in i["manifests"].as_array().into_iter().flatten() {
            seen.insert(m["digest"].as_str().unwrap(), m["size"].as_u64().unwrap());
        }
        for b in i["blobs"].as_array().unwrap() {
            let d = b.as_str().unwrap();
            seen.insert(d, blob_sizes[d]);
        }
    }
    seen.values().sum()
}

/// Every image the report lists in `group` agrees with the record (digest, size), and the
/// group's total is what the record gives for them.
fn check_group(record: &Value, report: &Value, group: &str, listed: &[&Value], all: &[String]) {
    let images = record_images(record);
    for i in listed {
        let r = images[i["source"].as_str().unwrap()];
        assert_eq!(i["digest"], r["digest"], "{group}: {i}");
        assert_eq!(i["destination"], r["destination"], "{group}: {i}");
        assert_eq!(i["bytes"], r["totalSize"], "{group}: {i}");
    }
    assert_eq!(
        report[group]["total"]["bytes"].as_u64().unwrap(),
        unique_bytes(record, all),
        "{group}"
    );
    assert_eq!(report[group]["total"]["count"], all.len(), "{group}");
}

/// Sources of a record's images of `category` (None: uncategorised).
fn by_category(record: &Value, category: Option<&str>) -> Vec<String> {
    record["images"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["category"].as_str() == category)
        .map(|i| i["source"].as_str().unwrap().to_string())
        .collect()
}

struct Lab {
    upstream: Registry,
    work: tempfile::TempDir,
}

impl Lab {
    fn seeded() -> Lab {
        let upstream = Registry::plain();
        let work = tempfile::tempdir().unwrap();
        let host = upstream.host();
        let seed = work.path().join("seed");
        ok(&lab(&[
            "seed",
            &format!("docker://{host}"),
            "--plain-http",
            &host,
            "--out",
            arg(&seed),
        ]));
        let text = fs_err::read_to_string(repo("mirrorsets/lab.yaml")).unwrap();
        fs_err::write(
            work.path().join("lab.yaml"),
            text.replace("127.0.0.1:5000", &host),
        )
        .unwrap();
        Lab { upstream, work }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.work.path().join(name)
    }

    fn mirror(&self, destination: &str, extra: &[&str]) {
        let graph = format!("file://{}", self.path("seed/graph.json").display());
        let cfg = self.path("lab.yaml");
        let host = self.upstream.host();
        let mut args = vec![
            "mirror",
            "--graph-url",
            &graph,
            "--plain-http",
            &host,
            "-c",
            arg(&cfg),
            destination,
        ];
        args.extend_from_slice(extra);
        ok(&bootstrap(&args));
    }
}

/// The lab mirrored into a signed archive: releases by version (from each release image's
/// label), the catalog's packages with their channels and bundle versions, the model with its
/// files, the signer verified; every figure agrees with the record. A disk mirror of the same
/// configuration, reported through its record, tells the same.
#[test]
fn a_lab_archive_shows_releases_operators_with_channels_and_the_model() {
    let lab = Lab::seeded();
    let key = keygen(lab.work.path(), "signer");
    let (allowed, fingerprint) = allowed_signers(lab.work.path(), &key, "allowed_signers");
    let dir = lab.path("archive");
    let target = format!("archive://{}", dir.display());
    lab.mirror(
        &target,
        &["--archive-size", "4MiB", "--sign-key", arg(&key)],
    );
    let text = ok(&audit(&[&target, "--allowed-signers", arg(&allowed)]));

    let manifest = json(&dir.join("manifest.json"));
    let record = archive_record(&dir);
    let mut names = Names::default();
    names
        .add(lab.work.path().to_str().unwrap(), "DIR")
        .add(lab.upstream.host(), "upstream")
        .add(&fingerprint, "fingerprint");
    let record_sha = manifest["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "mirror-record.json")
        .unwrap()["sha256"]
        .as_str()
        .unwrap()
        .to_string();
    names
        .add(
            sha256sum(&dir.join("manifest.json")),
            "sha256 of manifest.json",
        )
        .add(sha256sum(&lab.path("lab.yaml")), "sha256 of lab.yaml")
        .add(record_sha, "sha256 of mirror-record.json");
    for c in manifest["chunks"].as_array().unwrap() {
        let name = c["name"].as_str().unwrap();
        names.add(c["sha256"].as_str().unwrap(), &format!("sha256 of {name}"));
    }
    times(&mut names, &record, Some(&manifest));
    golden("lab.txt", &blank_sizes(&number_hashes(&names.apply(&text))));

    let report: Value = serde_json::from_str(&ok(&audit(&[
        &target,
        "--allowed-signers",
        arg(&allowed),
        "--format",
        "json",
    ])))
    .unwrap();
    let same = ok(&audit(&[
        "--output",
        "json",
        &target,
        "--allowed-signers",
        arg(&allowed),
    ]));
    assert_eq!(serde_json::from_str::<Value>(&same).unwrap(), report);

    let sig = &report["signature"];
    assert_eq!(sig["status"], "verified");
    assert_eq!(sig["identity"], "mirror-operator@example.com");
    assert_eq!(sig["fingerprint"], fingerprint.as_str());
    let a = &report["archive"];
    assert_eq!(a["manifestSha256"], sha256sum(&dir.join("manifest.json")));
    assert_eq!(a["config"]["sha256"], sha256sum(&lab.path("lab.yaml")));
    for (got, want) in a["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .zip(manifest["chunks"].as_array().unwrap())
    {
        assert_eq!(got["name"], want["name"]);
        assert_eq!(got["size"], want["size"]);
        assert_eq!(got["sha256"], want["sha256"]);
        assert_eq!(
            got["sha256"],
            sha256sum(&dir.join(got["name"].as_str().unwrap()))
        );
        assert_eq!(got["onDisk"], "present");
    }
    assert_eq!(report["totals"]["bytes"], record["totals"]["bytes"]);
    assert_eq!(report["totals"]["images"], record["totals"]["images"]);

    // Releases: the versions lab.yaml selects, at the digests the seed pushed.
    let seed = json(&lab.path("seed/seed.json"));
    let releases = report["releases"]["images"].as_array().unwrap();
    let versions: Vec<&str> = releases
        .iter()
        .map(|r| r["version"].as_str().unwrap())
        .collect();
    assert_eq!(versions, ["4.18.2", "4.18.3"]);
    for r in releases {
        let seeded = seed["releases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["version"] == r["version"])
            .unwrap();
        assert_eq!(r["digest"], seeded["digest"]);
        assert_eq!(
            (r["arch"].as_str(), r["versionFrom"].as_str()),
            (Some("x86_64"), Some("label"))
        );
    }
    let release_sources = by_category(&record, Some("release"));
    let listed: Vec<&Value> = releases.iter().collect();
    check_group(&record, &report, "releases", &listed, &release_sources);
    assert_eq!(
        report["releases"]["components"]["count"],
        release_sources.len() - releases.len()
    );

    // Operators: the catalog's seven packages, each channel with its bundles' versions.
    let ops = &report["operators"];
    let catalogs: Vec<&Value> = ops["catalogs"].as_array().unwrap().iter().collect();
    let mut operator_sources = by_category(&record, Some("catalog"));
    operator_sources.extend(by_category(&record, Some("operator")));
    check_group(&record, &report, "operators", &catalogs, &operator_sources);
    let packages = catalogs[0]["packages"].as_array().unwrap();
    let package_names: BTreeSet<&str> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(package_names.len(), 7, "{package_names:?}");
    for p in packages {
        for c in p["channels"].as_array().unwrap() {
            for b in c["bundles"].as_array().unwrap() {
                assert!(!b["version"].as_str().unwrap().is_empty(), "{p}");
            }
        }
    }

    // The model: the seed's modelcar, its five files.
    let models: Vec<&Value> = report["models"]["images"]
        .as_array()
        .unwrap()
        .iter()
        .collect();
    assert_eq!(models.len(), 1);
    assert_eq!(models[0]["digest"], seed["modelcar"]["digest"]);
    assert_eq!(models[0]["files"], 5);
    let model_sources = vec![models[0]["source"].as_str().unwrap().to_string()];
    check_group(&record, &report, "models", &models, &model_sources);
    assert_eq!(report["otherImages"]["total"]["count"], 0);

    // The same configuration mirrored to disk, reported through the record it wrote: the
    // same releases, packages and model, read from the layout beside it.
    let disk = lab.path("disk");
    lab.mirror(&format!("file://{}", disk.display()), &[]);
    let from_disk: Value = serde_json::from_str(&ok(&audit(&[
        "--format",
        "json",
        arg(&disk.join("mirror-record.json")),
    ])))
    .unwrap();
    assert_eq!(from_disk["signature"]["status"], "notSigned");
    let strip = |v: &Value| -> Value {
        let mut v = v.clone();
        strip_destinations(&mut v);
        v
    };
    for group in ["releases", "operators", "models", "otherImages"] {
        assert_eq!(strip(&from_disk[group]), strip(&report[group]), "{group}");
    }
}

/// The lab mirrored to a registry: its record alone gives release versions from their tags,
/// names the catalog without its packages, and cannot tell the model from other images, and
/// the report says so.
#[test]
fn a_lab_registry_record_says_what_only_the_content_could_show() {
    let lab = Lab::seeded();
    let site = Registry::plain();
    let rec = lab.path("rec.json");
    let target = format!("docker://{}/mirror", site.host());
    let site_host = site.host();
    lab.mirror(
        &target,
        &["--plain-http", &site_host, "--record", arg(&rec)],
    );
    let record = json(&rec);
    let mut names = Names::default();
    names
        .add(lab.work.path().to_str().unwrap(), "DIR")
        .add(lab.upstream.host(), "upstream")
        .add(site.host(), "site")
        .add(sha256sum(&rec), "sha256 of rec.json")
        .add(sha256sum(&lab.path("lab.yaml")), "sha256 of lab.yaml");
    times(&mut names, &record, None);
    let text = ok(&audit(&[arg(&rec)]));
    golden(
        "lab-record.txt",
        &blank_sizes(&number_hashes(&names.apply(&text))),
    );

    let report: Value =
        serde_json::from_str(&ok(&audit(&["--format", "json", arg(&rec)]))).unwrap();
    assert_eq!(report["signature"]["status"], "notSigned");
    let releases = report["releases"]["images"].as_array().unwrap();
    let versions: Vec<(&str, &str)> = releases
        .iter()
        .map(|r| {
            (
                r["version"].as_str().unwrap(),
                r["versionFrom"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(versions, [("4.18.2", "tag"), ("4.18.3", "tag")]);
    let catalogs = report["operators"]["catalogs"].as_array().unwrap();
    assert_eq!(catalogs.len(), 1);
    assert!(catalogs[0].get("packages").is_none(), "{report}");
    assert_eq!(report["models"]["total"]["count"], 0);
    let seed = json(&lab.path("seed/seed.json"));
    let others = report["otherImages"]["images"].as_array().unwrap();
    assert_eq!(others.len(), 1);
    assert_eq!(others[0]["digest"], seed["modelcar"]["digest"]);
    let listed: Vec<&Value> = others.iter().collect();
    check_group(
        &record,
        &report,
        "otherImages",
        &listed,
        &by_category(&record, None),
    );
    let cannot = report["cannotShow"].to_string();
    assert!(
        cannot.contains("channels and bundle versions")
            && cannot.contains("which images are models"),
        "{cannot}"
    );
}

/// Destinations name where each mirror put the image; everything else must agree.
fn strip_destinations(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.remove("destination");
            map.values_mut().for_each(strip_destinations);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_destinations),
        _ => {}
    }
}

/// The synthetic set, without its large image (speed).
fn synthetic(reg: &Registry) -> Vec<support::images::PushedImage> {
    SyntheticSet::standard(16)
        .without_large()
        .push_to(reg, "src")
}

/// A delta archive of the synthetic set, signed: its base by path and sha256 and the base's
/// blobs its images need, every chunk with its size and sha256, the signer verified; the same
/// in text, Markdown and JSON (`--format json` and `--output json` alike). A manifest changed
/// after signing makes the report say BAD and exit 1; a mirror record corrupted in its chunk is
/// refused, naming the chunk and `bootstrap verify`.
#[test]
fn a_signed_delta_archive_names_its_base_its_chunks_and_its_signer() {
    let src = Registry::plain();
    let host = src.host();
    let pushed = synthetic(&src);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let (base_dir, full_dir) = (w.join("base-config"), w.join("full-config"));
    fs_err::create_dir_all(&base_dir).unwrap();
    fs_err::create_dir_all(&full_dir).unwrap();
    let first: Vec<_> = pushed
        .iter()
        .filter(|p| !p.repo.ends_with("app-c") && !p.repo.ends_with("multi-docker"))
        .cloned()
        .collect();
    let base_cfg = write_config(&base_dir, &first, &host, &["amd64", "arm64"]);
    let full_cfg = write_config(&full_dir, &pushed, &host, &["amd64", "arm64"]);
    let key = keygen(w, "signer");
    let (allowed, fingerprint) = allowed_signers(w, &key, "allowed_signers");
    let mirror = |cfg: &Path, dir: &Path, extra: &[&str]| {
        let target = format!("archive://{}", dir.display());
        let mut args = vec![
            "mirror",
            "-c",
            arg(cfg),
            &target,
            "--plain-http",
            &host,
            "--archive-size",
            "64KiB",
        ];
        args.extend_from_slice(extra);
        ok(&bootstrap(&args));
    };
    let (base, delta) = (w.join("base"), w.join("delta"));
    mirror(&base_cfg, &base, &[]);
    let since = base.join("manifest.json");
    mirror(
        &full_cfg,
        &delta,
        &["--since", arg(&since), "--sign-key", arg(&key)],
    );
    let target = format!("archive://{}", delta.display());

    let manifest = json(&delta.join("manifest.json"));
    let record = archive_record(&delta);
    let record_file = manifest["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "mirror-record.json")
        .unwrap()
        .clone();
    let last = record_file["chunk"].as_str().unwrap();
    let last_chunk = manifest["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == last)
        .unwrap()
        .clone();
    let all_chunks: u64 = manifest["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["size"].as_u64().unwrap())
        .sum();
    // The last chunk holds the layout's small files (the record, index.json), which name
    // paths, the registry and times: its size and sha256 change from run to run.
    let mut names = Names::default();
    names
        .add(w.to_str().unwrap(), "DIR")
        .add(&host, "upstream")
        .add(&fingerprint, "fingerprint")
        .add(
            sha256sum(&delta.join("manifest.json")),
            "sha256 of manifest.json",
        )
        .add(sha256sum(&since), "sha256 of the base's manifest.json")
        .add(sha256sum(&full_cfg), "sha256 of isc.yaml")
        .add(
            record_file["sha256"].as_str().unwrap(),
            "sha256 of mirror-record.json",
        )
        .add(
            last_chunk["sha256"].as_str().unwrap(),
            "sha256 of the last chunk",
        )
        .add_size(
            last_chunk["size"].as_u64().unwrap(),
            "size of the last chunk",
        )
        .add_size(all_chunks, "size of all chunks");
    times(&mut names, &record, Some(&manifest));
    let with_signers = |extra: &[&str]| -> Output {
        let mut args = vec![target.as_str(), "--allowed-signers", arg(&allowed)];
        args.extend_from_slice(extra);
        audit(&args)
    };
    golden("delta.txt", &names.apply(&ok(&with_signers(&[]))));
    golden(
        "delta.md",
        &names.apply(&ok(&with_signers(&["--format", "markdown"]))),
    );
    let text = ok(&with_signers(&["--format", "json"]));
    assert_eq!(ok(&with_signers(&["--output", "json"])), text);
    let report: Value = serde_json::from_str(&text).unwrap();
    let listed = report["archive"]["chunks"].as_array().unwrap();
    assert_eq!(listed.last().unwrap()["name"], last);
    assert_eq!(listed.last().unwrap()["size"], last_chunk["size"]);
    assert_eq!(report["archive"]["bytes"], all_chunks);
    // The two numbers that change with the last chunk, each replaced where it is (and only
    // there: each must occur once).
    let mut json_text = text.clone();
    for (field, n, name) in [
        (
            "size",
            last_chunk["size"].as_u64().unwrap(),
            "size of the last chunk",
        ),
        ("bytes", all_chunks, "size of all chunks"),
    ] {
        let exact = format!("\"{field}\": {n}");
        assert_eq!(json_text.matches(&exact).count(), 1, "{exact}");
        json_text = json_text.replace(&exact, &format!("\"{field}\": \"<{name}>\""));
    }
    golden("delta.json", &names.apply(&json_text));
    assert_eq!(report["archive"]["base"]["kind"], "archive");
    assert!(
        report["archive"]["base"]["needed"]["count"]
            .as_u64()
            .unwrap()
            > 0
    );

    // Changed after signing: the report still shows what it read, says BAD and fails.
    let manifest_path = delta.join("manifest.json");
    let original = fs_err::read(&manifest_path).unwrap();
    fs_err::OpenOptions::new()
        .append(true)
        .open(&manifest_path)
        .unwrap()
        .write_all(b" ")
        .unwrap();
    let o = with_signers(&[]);
    let err = failed(&o);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("Signature: BAD") && out.contains("does not match the file"),
        "{out}"
    );
    assert!(err.contains("does not hold"), "{err}");
    fs_err::write(&manifest_path, &original).unwrap();

    // The record corrupted inside its chunk: refused, naming the chunk and the check to run.
    let chunk_path = delta.join(last);
    let mut chunk = fs_err::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&chunk_path)
        .unwrap();
    let at = record_file["offset"].as_u64().unwrap() + 10;
    let mut byte = [0u8];
    chunk.seek(SeekFrom::Start(at)).unwrap();
    chunk.read_exact(&mut byte).unwrap();
    chunk.seek(SeekFrom::Start(at)).unwrap();
    chunk.write_all(&[byte[0] ^ 0x20]).unwrap();
    drop(chunk);
    let err = failed(&audit(&[&target]));
    assert!(
        err.contains(&format!("mirror-record.json in {last} is corrupt"))
            && err.contains(&format!("bootstrap verify {target}")),
        "{err}"
    );

    // An archive's manifest named as if it were a record: the fix is named.
    let err = failed(&audit(&[arg(&since)]));
    assert!(
        err.contains(&format!("name the archive, archive://{}", base.display())),
        "{err}"
    );
}

/// A registry mirror's signed record: the signing key's fingerprint without an allowed_signers
/// file, and what a record alone cannot show (channels, bundle versions, which images are
/// models). A key the auditor does not list, a record changed after signing, or a missing
/// signature when one is required: BAD, exit 1.
#[test]
fn a_signed_registry_record_shows_its_key_and_what_a_record_cannot() {
    let src = Registry::plain();
    let dst = Registry::plain();
    let pushed = synthetic(&src);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let cfg = write_config(w, &pushed, &src.host(), &["amd64", "arm64"]);
    let key = keygen(w, "signer");
    let (allowed, fingerprint) = allowed_signers(w, &key, "allowed_signers");
    let rec = w.join("rec.json");
    ok(&bootstrap(&[
        "mirror",
        "-c",
        arg(&cfg),
        &format!("docker://{}/site", dst.host()),
        "--plain-http",
        &src.host(),
        "--plain-http",
        &dst.host(),
        "--record",
        arg(&rec),
        "--sign-key",
        arg(&key),
    ]));
    let record = json(&rec);
    let mut names = Names::default();
    names
        .add(w.to_str().unwrap(), "DIR")
        .add(src.host(), "upstream")
        .add(dst.host(), "site")
        .add(&fingerprint, "fingerprint")
        .add(sha256sum(&rec), "sha256 of rec.json")
        .add(sha256sum(&cfg), "sha256 of isc.yaml");
    times(&mut names, &record, None);
    let text = ok(&audit(&[arg(&rec)]));
    golden("record.txt", &names.apply(&text));
    let report: Value =
        serde_json::from_str(&ok(&audit(&["--output", "json", arg(&rec)]))).unwrap();
    assert_eq!(report["signature"]["status"], "signed");
    assert_eq!(report["signature"]["fingerprint"], fingerprint.as_str());
    let others: Vec<&Value> = report["otherImages"]["images"]
        .as_array()
        .unwrap()
        .iter()
        .collect();
    check_group(
        &record,
        &report,
        "otherImages",
        &others,
        &by_category(&record, None),
    );
    assert_eq!(report["record"]["sha256"], sha256sum(&rec));

    // Verified against the auditor's file: the identity it lists.
    let out = ok(&audit(&[arg(&rec), "--allowed-signers", arg(&allowed)]));
    assert!(
        out.contains(&format!(
            "Signature: good signature by mirror-operator@example.com with key {fingerprint}"
        )),
        "{out}"
    );

    let bad = |args: &[&str], says: &str| {
        let o = audit(args);
        let err = failed(&o);
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            out.contains("Signature: BAD") && out.contains(says),
            "{out}"
        );
        assert!(err.contains("does not hold"), "{err}");
    };
    // A key the auditor's file does not list.
    let stranger_key = keygen(w, "stranger");
    let (stranger, _) = allowed_signers(w, &stranger_key, "stranger_signers");
    bad(
        &[arg(&rec), "--allowed-signers", arg(&stranger)],
        "does not list",
    );
    // Changed after signing, checked with or without the auditor's file.
    let original = fs_err::read_to_string(&rec).unwrap();
    fs_err::write(&rec, original.replacen('{', "{ ", 1)).unwrap();
    bad(&[arg(&rec)], "changed after signing");
    bad(
        &[arg(&rec), "--allowed-signers", arg(&allowed)],
        "does not match the file",
    );
    fs_err::write(&rec, &original).unwrap();
    // Not signed: said so; an error only when a signature was asked for.
    fs_err::remove_file(w.join("rec.json.sig")).unwrap();
    let out = ok(&audit(&[arg(&rec)]));
    assert!(out.contains("Signature: not signed"), "{out}");
    bad(
        &[arg(&rec), "--allowed-signers", arg(&allowed)],
        "is not signed",
    );
}

/// What is not a report's source is refused, naming the file and the fix.
#[test]
fn sources_that_cannot_be_reported_on_name_the_fix() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let refused = |args: &[&str], says: &[&str]| {
        let err = failed(&audit(args));
        for s in says {
            assert!(err.contains(s), "{args:?}: {err}");
        }
    };
    let missing = w.join("none.json");
    refused(
        &[arg(&missing)],
        &[
            &missing.display().to_string(),
            "--record FILE",
            "archive://DIR",
        ],
    );
    refused(&[arg(w)], &[&format!("archive://{}", w.display())]);
    refused(
        &[&format!("file://{}", w.display())],
        &[&format!("{}/mirror-record.json", w.display())],
    );
    refused(
        &[&format!("archive://{}", w.display())],
        &["is not a bootstrap archive", "manifest.json"],
    );
    refused(
        &[&format!("archive://{}", w.join("gone").display())],
        &["no such directory"],
    );
    let other = w.join("other.json");
    fs_err::write(&other, "{\"images\": []}\n").unwrap();
    refused(
        &[arg(&other)],
        &[
            &other.display().to_string(),
            "not a bootstrap mirror record",
        ],
    );
    refused(
        &["--output", "json", "--format", "markdown", arg(&other)],
        &["--format markdown and --output json disagree"],
    );
}
