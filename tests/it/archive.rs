//! Archives across the air gap (issue 16, parts 1-4 and 6): a mirror to `archive://` cut into
//! chunks of at most the size asked (a lone large blob excepted), checked at the door with
//! coreutils and OpenSSH alone, extracted by GNU tar into a layout, pushed from the chunks in
//! place (byte-exact, no blob file on the push side), served by `serve registry archive://`
//! (skopeo, over TLS), and one flipped byte named by `bootstrap verify` with its chunk and blob.
//! Delta archives carry only what is new and refuse to push onto a registry without their base.

use crate::support;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use support::images::{PushedImage, SyntheticSet};
use support::run::{bootstrap, failed, ok, write_config};
use support::Registry;

const MIB: u64 = 1024 * 1024;

fn keygen(dir: &Path) -> PathBuf {
    let key = dir.join("signer");
    let st = Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            "ed25519",
            "-C",
            "door@example.com",
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

fn manifest(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&fs_err::read(dir.join("manifest.json")).unwrap()).unwrap()
}

fn skopeo(args: &[&str]) -> std::process::Output {
    Command::new("skopeo").args(args).output().unwrap()
}

/// Every pushed image is at `host` under `prefix` with the source's manifest bytes, and every
/// blob with its size.
fn assert_at(host: &str, prefix: &str, pushed: &[PushedImage]) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let http = reqwest::Client::new();
    for img in pushed {
        let repo = format!("{prefix}/{}", img.repo);
        let url = format!("docker://{host}/{repo}:{}", img.tag);
        let o = skopeo(&["inspect", "--raw", "--tls-verify=false", &url]);
        assert!(
            o.status.success(),
            "{url}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(o.stdout, img.manifest, "{url}");
        for (digest, size) in &img.blobs {
            let resp = rt
                .block_on(
                    http.head(format!("http://{host}/v2/{repo}/blobs/{digest}"))
                        .send(),
                )
                .unwrap();
            assert_eq!(resp.status(), 200, "{repo} {digest}");
            assert_eq!(
                resp.headers()["content-length"].to_str().unwrap(),
                size.to_string()
            );
        }
    }
}

/// Files under `dir` whose name is a sha256 hex (a blob written out), anywhere.
fn blob_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = fs_err::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(blob_files(&p));
            } else if p
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.len() == 64 && n.bytes().all(|b| b.is_ascii_hexdigit()))
            {
                out.push(p);
            }
        }
    }
    out
}

struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(args: &[&str]) -> (Server, String) {
    use std::io::BufRead;
    let mut child = support::run::command(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let addr = first.trim().rsplit(' ').next().unwrap().to_string();
    (Server(child), addr)
}

#[test]
fn an_archive_crosses_the_door_and_is_pushed_from_its_chunks() {
    let src = Registry::plain();
    let set = SyntheticSet::standard(16).with_large_layer_size(300 * MIB);
    let pushed = set.push_to(&src, "src");
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(work.path(), &pushed, &src.host(), &["amd64", "arm64"]);
    let key = keygen(work.path());
    let dir = work.path().join("media");
    let url = format!("archive://{}", dir.display());
    let out = ok(&bootstrap(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        &url,
        "--archive-size",
        "256MiB",
        "--sign-key",
        key.to_str().unwrap(),
        "--plain-http",
        &src.host(),
        "--output",
        "json",
    ]));
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["archive"]["chunks"].as_u64().unwrap() as usize, {
        manifest(&dir)["chunks"].as_array().unwrap().len()
    });

    // Every chunk within 256 MiB, except one holding a lone larger blob; every blob in
    // exactly one chunk; the staging directory is gone.
    let m = manifest(&dir);
    let chunks = m["chunks"].as_array().unwrap();
    assert!(chunks.len() >= 3, "{m}");
    let blobs = m["blobs"].as_array().unwrap();
    for c in chunks {
        let name = c["name"].as_str().unwrap();
        let size = c["size"].as_u64().unwrap();
        assert_eq!(fs_err::metadata(dir.join(name)).unwrap().len(), size);
        let inside = blobs.iter().filter(|b| b["chunk"] == name).count();
        assert!(
            size <= 256 * MIB || inside == 1,
            "{name}: {size} bytes, {inside} blobs"
        );
    }
    let mut digests: Vec<&str> = blobs
        .iter()
        .map(|b| b["digest"].as_str().unwrap())
        .collect();
    let n = digests.len();
    digests.sort();
    digests.dedup();
    assert_eq!(digests.len(), n, "a blob in two chunks");
    for img in &pushed {
        for (d, _) in &img.blobs {
            assert!(digests.contains(&d.as_str()), "{d} not carried");
        }
    }
    let mut names: Vec<String> = fs_err::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut expected: Vec<String> = chunks
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .chain(
            [
                "SHA256SUMS",
                "SHA256SUMS.sig",
                "manifest.json",
                "manifest.json.sig",
            ]
            .map(String::from),
        )
        .collect();
    expected.sort();
    assert_eq!(names, expected);

    // At the door: coreutils and OpenSSH alone.
    let sums = Command::new("sha256sum")
        .args(["-c", "--strict", "SHA256SUMS"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        sums.status.success(),
        "{}",
        String::from_utf8_lossy(&sums.stdout)
    );
    let allowed = work.path().join("allowed_signers");
    let line = report["signature"]["allowedSigners"].as_str().unwrap();
    fs_err::write(&allowed, format!("{line}\n")).unwrap();
    let verify_sig = Command::new("ssh-keygen")
        .args([
            "-Y",
            "verify",
            "-n",
            "bootstrap-mirror",
            "-I",
            "door@example.com",
            "-f",
        ])
        .arg(&allowed)
        .arg("-s")
        .arg(dir.join("manifest.json.sig"))
        .stdin(
            fs_err::File::open(dir.join("manifest.json"))
                .unwrap()
                .into_parts()
                .0,
        )
        .output()
        .unwrap();
    assert!(
        verify_sig.status.success(),
        "{}",
        String::from_utf8_lossy(&verify_sig.stderr)
    );
    // SHA256SUMS is signed too, so the door checks the sums it runs `sha256sum -c` with.
    let verify_sums = Command::new("ssh-keygen")
        .args([
            "-Y",
            "verify",
            "-n",
            "bootstrap-mirror",
            "-I",
            "door@example.com",
            "-f",
        ])
        .arg(&allowed)
        .arg("-s")
        .arg(dir.join("SHA256SUMS.sig"))
        .stdin(
            fs_err::File::open(dir.join("SHA256SUMS"))
                .unwrap()
                .into_parts()
                .0,
        )
        .output()
        .unwrap();
    assert!(
        verify_sums.status.success(),
        "{}",
        String::from_utf8_lossy(&verify_sums.stderr)
    );
    let v = ok(&bootstrap(&[
        "verify",
        &url,
        "--allowed-signers",
        allowed.to_str().unwrap(),
        "--output",
        "json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&v).unwrap();
    assert_eq!(v["ok"], true, "{v}");
    assert!(v["signedBy"]
        .as_str()
        .unwrap()
        .starts_with("door@example.com"));

    // GNU tar reads every chunk: extracted together they are the layout a mirror to disk
    // writes, and its own SHA256SUMS checks out.
    let extracted = work.path().join("extracted");
    fs_err::create_dir(&extracted).unwrap();
    for c in chunks {
        let st = Command::new("tar")
            .arg("-xf")
            .arg(dir.join(c["name"].as_str().unwrap()))
            .current_dir(&extracted)
            .status()
            .unwrap();
        assert!(st.success());
    }
    let sums = Command::new("sha256sum")
        .args(["-c", "--strict", "--quiet", "SHA256SUMS"])
        .current_dir(&extracted)
        .output()
        .unwrap();
    assert!(
        sums.status.success(),
        "{}",
        String::from_utf8_lossy(&sums.stdout)
    );
    assert!(extracted.join("mirror-record.json").is_file());
    assert!(extracted.join("index.json").is_file());

    // Served straight from the chunks, over TLS: skopeo copies every image byte-exact.
    let pki = support::tls::TestPki::generate(&work.path().join("pki")).unwrap();
    let (server, addr) = serve(&[
        "serve",
        "registry",
        &url,
        "--bind",
        "127.0.0.1:0",
        "--workdir",
        work.path().join("serve-work").to_str().unwrap(),
        "--tls-cert",
        pki.server_cert_path.to_str().unwrap(),
        "--tls-key",
        pki.server_key_path.to_str().unwrap(),
    ]);
    let certs = pki.cert_dir.to_str().unwrap();
    for img in pushed.iter().filter(|p| !p.tag.is_empty()) {
        let from = format!("docker://{addr}/{}:{}", img.repo, img.tag);
        let o = skopeo(&["inspect", "--raw", "--cert-dir", certs, &from]);
        assert!(
            o.status.success(),
            "{from}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(o.stdout, img.manifest, "{from}");
        let o = skopeo(&[
            "copy",
            "--all",
            "--preserve-digests",
            "--src-cert-dir",
            certs,
            &from,
            &format!(
                "dir:{}",
                work.path()
                    .join(format!("copy-{}", img.repo.replace('/', "-")))
                    .display()
            ),
        ]);
        assert!(
            o.status.success(),
            "skopeo copy {from}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    // Range and HEAD on a blob inside a chunk answer exactly that blob's bytes, never its
    // neighbours'; an unknown digest is a 404 with an OCI error body.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let https = reqwest::Client::builder()
        .add_root_certificate(pki.reqwest_ca().unwrap())
        .build()
        .unwrap();
    let plain = reqwest::Client::new();
    let big = pushed
        .iter()
        .flat_map(|p| p.blobs.iter().map(move |b| (p, b)))
        .max_by_key(|(_, (_, s))| *s)
        .unwrap();
    let (img, (digest, size)) = big;
    let served = format!("https://{addr}/v2/{}/blobs/{digest}", img.repo);
    let source = format!("http://{}/v2/{}/blobs/{digest}", src.host(), img.repo);
    rt.block_on(async {
        let head = https.head(&served).send().await.unwrap();
        assert_eq!(head.status(), 200);
        assert_eq!(head.headers()["content-length"], size.to_string().as_str());
        for range in [
            "bytes=0-99".to_string(),
            format!("bytes={}-{}", size - 100, size - 1),
        ] {
            let got = https
                .get(&served)
                .header("Range", &range)
                .send()
                .await
                .unwrap();
            assert_eq!(got.status(), 206, "{range}");
            let want = plain
                .get(&source)
                .header("Range", &range)
                .send()
                .await
                .unwrap();
            assert_eq!(
                got.bytes().await.unwrap(),
                want.bytes().await.unwrap(),
                "{range}"
            );
        }
        let past = https
            .get(&served)
            .header("Range", format!("bytes={size}-"))
            .send()
            .await
            .unwrap();
        assert_eq!(past.status(), 416);
        let unknown = format!(
            "https://{addr}/v2/{}/blobs/sha256:{}",
            img.repo,
            "0".repeat(64)
        );
        let resp = https.get(&unknown).send().await.unwrap();
        assert_eq!(resp.status(), 404);
        let body: serde_json::Value = resp.json().await.unwrap();
        assert_eq!(body["errors"][0]["code"], "BLOB_UNKNOWN");
        let climb = https
            .get(format!("https://{addr}/v2/%2e%2e/%2e%2e/blobs/{digest}"))
            .send()
            .await
            .unwrap();
        assert_eq!(climb.status(), 404);
    });
    drop(server);

    // Pushed from the chunks in place: byte-exact at the destination, and no blob file written
    // on the push side (neither in the working directory nor beside the archive).
    let dst = Registry::plain();
    let push_work = work.path().join("push-work");
    ok(&bootstrap(&[
        "mirror",
        "--from",
        &url,
        &format!("docker://{}/site", dst.host()),
        "--plain-http",
        &dst.host(),
        "--workdir",
        push_work.to_str().unwrap(),
    ]));
    assert_at(&dst.host(), "site", &pushed);
    assert_eq!(blob_files(&push_work), Vec::<PathBuf>::new());
    assert_eq!(blob_files(&dir), Vec::<PathBuf>::new());

    // One flipped byte inside the large blob: verify names the chunk and the blob.
    let large = blobs
        .iter()
        .max_by_key(|b| b["size"].as_u64().unwrap())
        .unwrap();
    let chunk = large["chunk"].as_str().unwrap();
    let at = large["offset"].as_u64().unwrap() + 12345;
    {
        use std::io::{Read, Seek, SeekFrom, Write};
        let mut f = fs_err::OpenOptions::new()
            .read(true)
            .write(true)
            .open(dir.join(chunk))
            .unwrap();
        let mut b = [0u8; 1];
        f.seek(SeekFrom::Start(at)).unwrap();
        f.read_exact(&mut b).unwrap();
        f.seek(SeekFrom::Start(at)).unwrap();
        f.write_all(&[b[0] ^ 0x40]).unwrap();
    }
    let o = bootstrap(&["verify", &url]);
    assert!(!o.status.success());
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    let digest = large["digest"].as_str().unwrap();
    assert!(
        text.lines()
            .any(|l| l.contains(chunk) && l.contains(digest)),
        "no line names {chunk} and {digest}:\n{text}"
    );
    // Only what is broken is named: no other blob.
    for b in blobs.iter().filter(|b| b["digest"] != large["digest"]) {
        assert!(!text.contains(b["digest"].as_str().unwrap()), "{text}");
    }
}

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

/// A run that failed part-way (the large layer's download cut at 48 MiB, one attempt allowed)
/// leaves an unfinished archive, not a sealed one; the same command again fetches only what
/// did not arrive (the large layer from its last checkpoint) and seals it.
#[test]
fn a_failed_archive_run_is_continued_by_the_same_command() {
    use support::faultproxy::{Fault, FaultProxy, FaultRule};
    let src = Registry::plain();
    let set = SyntheticSet::standard(19).with_large_layer_size(80 * MIB);
    let pushed = set.push_to(&src, "src");
    let proxy = FaultProxy::start(&src.host()).unwrap();
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(work.path(), &pushed, &proxy.host(), &["amd64", "arm64"]);
    let (large, large_size) = pushed
        .iter()
        .flat_map(|p| p.blobs.iter())
        .max_by_key(|(_, s)| *s)
        .unwrap()
        .clone();
    proxy.add_rule(
        FaultRule::new(Fault::ResetResponseAfter(48 * MIB))
            .method("GET")
            .path(&large)
            .times(1),
    );
    let dir = work.path().join("media");
    let url = format!("archive://{}", dir.display());
    let run = |retries: &str| {
        bootstrap(&[
            "mirror",
            "-c",
            cfg.to_str().unwrap(),
            &url,
            "--archive-size",
            "8MiB",
            "--plain-http",
            &proxy.host(),
            "--retries",
            retries,
            "--continue-on-error",
            // One stream for the layer, so the cut lands 48 MiB into it, past a checkpoint (split
            // reads, each piece a request of its own, are tested in mirror.rs and resilience.rs).
            "--range-parts",
            "1",
        ])
    };
    let first = run("1");
    assert!(!first.status.success());
    let err = String::from_utf8_lossy(&first.stderr);
    assert!(err.contains("not sealed"), "{err}");
    assert!(!dir.join("manifest.json").exists());
    assert!(!dir.join("SHA256SUMS").exists());
    let count = |reqs: &[support::faultproxy::ProxiedRequest], d: &str| {
        reqs.iter().filter(|r| r.path.ends_with(d)).count()
    };
    let run1 = proxy.requests_matching("GET", "/blobs/");

    ok(&run("3"));
    // The rerun copied the large layer only: every other blob was already in its chunk. (Image
    // configs are read once per run to resolve the images; their copy is not repeated.)
    let run2 = proxy.requests_matching("GET", "/blobs/")[run1.len()..].to_vec();
    assert!(count(&run2, &large) >= 1);
    // ... and that from its last checkpoint (at least 32 MiB in), not from its first byte. (The
    // layer is a little over 80 MiB: its tar framing; the checkpoint falls on the first read
    // boundary past 32 MiB.)
    let resent: u64 = run2
        .iter()
        .filter(|r| r.path.ends_with(&large))
        .map(|r| r.response_body_bytes)
        .sum();
    assert!(
        resent <= large_size - 32 * MIB,
        "{resent} bytes of the {large_size}-byte large layer sent again"
    );
    for (d, _) in pushed.iter().flat_map(|p| p.blobs.iter()) {
        if *d != large {
            assert_eq!(
                count(&run2, d),
                count(&run1, d) - 1,
                "{d} was copied again: {run2:?}"
            );
        }
    }
    ok(&bootstrap(&["verify", &url]));
    assert!(!dir.join(".staging").exists());
}

/// An unsealed archive whose configuration then changes (the image that failed is dropped) is
/// planned anew: nothing of the old plan survives into the sealed archive. And a blob damaged
/// in a staged chunk after it was written is caught when sealing, and fetched again.
#[test]
fn a_changed_plan_starts_over_and_damage_before_sealing_is_caught() {
    let src = Registry::plain();
    let pushed = SyntheticSet::standard(20)
        .without_large()
        .push_to(&src, "src");
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("media");
    let url = format!("archive://{}", dir.display());
    let keep: Vec<PushedImage> = pushed
        .iter()
        .filter(|p| p.repo.ends_with("base/app-a"))
        .cloned()
        .collect();
    let cfg_all = write_config(work.path(), &pushed, &src.host(), &["amd64", "arm64"]);
    // One image no registry holds: the run carries on without it and leaves the archive
    // unsealed.
    let text = fs_err::read_to_string(&cfg_all).unwrap()
        + &format!("  - name: {}/src/nowhere/missing:1.0\n", src.host());
    fs_err::write(&cfg_all, text).unwrap();
    let run = |cfg: &Path| {
        bootstrap(&[
            "mirror",
            "-c",
            cfg.to_str().unwrap(),
            &url,
            "--plain-http",
            &src.host(),
            "--continue-on-error",
        ])
    };
    let first = run(&cfg_all);
    assert!(!first.status.success());
    assert!(!dir.join("manifest.json").exists());

    // Damage a blob already in place in a staged chunk.
    let chunk = dir.join(".staging/.chunks/mirror_000001.tar");
    {
        use std::io::{Read, Seek, SeekFrom, Write};
        let mut f = fs_err::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&chunk)
            .unwrap();
        let mut b = [0u8; 1];
        f.seek(SeekFrom::Start(512 + 7)).unwrap();
        f.read_exact(&mut b).unwrap();
        f.seek(SeekFrom::Start(512 + 7)).unwrap();
        f.write_all(&[b[0] ^ 1]).unwrap();
    }
    let cfg_one_dir = work.path().join("one");
    fs_err::create_dir_all(&cfg_one_dir).unwrap();
    let cfg_one = write_config(&cfg_one_dir, &keep, &src.host(), &["amd64", "arm64"]);
    // A different plan: started over, so the damaged old chunk is gone too.
    ok(&run(&cfg_one));
    ok(&bootstrap(&["verify", &url]));
    let m = manifest(&dir);
    let names: Vec<&str> = m["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        vec![format!("{}/{}:{}", src.host(), keep[0].repo, keep[0].tag)]
    );

    // Same plan, damage after the blobs were written: sealing reads the chunks back, refuses,
    // and the next run fetches what was damaged.
    let again = work.path().join("again");
    let url2 = format!("archive://{}", again.display());
    let cfg_fail = work.path().join("fail.yaml");
    fs_err::write(
        &cfg_fail,
        fs_err::read_to_string(&cfg_one).unwrap()
            + &format!("  - name: {}/src/nowhere/missing:1.0\n", src.host()),
    )
    .unwrap();
    let run2 = |cfg: &Path| {
        bootstrap(&[
            "mirror",
            "-c",
            cfg.to_str().unwrap(),
            &url2,
            "--plain-http",
            &src.host(),
            "--continue-on-error",
        ])
    };
    assert!(!run2(&cfg_fail).status.success());
    let staged = again.join(".staging/.chunks/mirror_000001.tar");
    {
        use std::io::{Read, Seek, SeekFrom, Write};
        let mut f = fs_err::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&staged)
            .unwrap();
        let mut b = [0u8; 1];
        f.seek(SeekFrom::Start(512 + 7)).unwrap();
        f.read_exact(&mut b).unwrap();
        f.seek(SeekFrom::Start(512 + 7)).unwrap();
        f.write_all(&[b[0] ^ 1]).unwrap();
    }
    // Without the missing image the plan is the same (it never resolved): the blobs stay in
    // place, and sealing reads them back, finds the damage and refuses; the next run fetches
    // the damaged blob again and seals.
    let out = run2(&cfg_one);
    let err = failed(&out);
    assert!(
        err.contains("not sealed") && err.contains("does not match"),
        "{err}"
    );
    ok(&run2(&cfg_one));
    ok(&bootstrap(&["verify", &url2]));
}
