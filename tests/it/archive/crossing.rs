//! One archive's whole way across the gap: cut into chunks of at most the size asked, checked at
//! the door with coreutils and OpenSSH alone, extracted by GNU tar, served straight from its
//! chunks over TLS, pushed from its chunks in place, and a flipped byte named with its chunk and
//! blob.

use super::*;

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
