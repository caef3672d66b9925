//! `bootstrap serve registry file://DIR` (issue 16, part 6, for disk mirrors): skopeo pulls
//! every image byte-exact from it (digests compared with the source), HEAD and Range answer as a
//! registry does, an unknown digest is a 404 with an OCI error body, a path that climbs out (`..`,
//! encoded or not) reaches nothing, writes are refused, and a blob corrupted on disk after the
//! server started never arrives whole (the transfer is broken off before its last bytes).

use crate::support;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use support::images::SyntheticSet;
use support::run::{bootstrap, ok, write_config};
use support::Registry;

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the server on a free port; its `HOST:PORT`.
fn serve(dir_url: &str) -> (Server, String) {
    let mut child = support::run::command(&["serve", "registry", dir_url, "--bind", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let addr = first
        .trim()
        .rsplit(' ')
        .next()
        .unwrap_or_else(|| panic!("no address in {first:?}"))
        .to_string();
    (Server(child), addr)
}

fn skopeo(args: &[&str]) -> std::process::Output {
    Command::new("skopeo").args(args).output().unwrap()
}

#[test]
fn skopeo_pulls_byte_exact_and_the_registry_answers_as_distribution_does() {
    let src = Registry::plain();
    let pushed = SyntheticSet::standard(1).push_to(&src, "src");
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(work.path(), &pushed, &src.host(), &["amd64", "arm64"]);
    let dir = work.path().join("mirror");
    let dir_url = format!("file://{}", dir.display());
    ok(&bootstrap(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        &dir_url,
        "--plain-http",
        &src.host(),
    ]));
    let (_server, addr) = serve(&dir_url);

    // Every tagged image, by tag: the manifest skopeo gets is the source's, byte for byte, and
    // a copy out of it succeeds (every blob verified by skopeo against its digest).
    let tagged: Vec<_> = pushed.iter().filter(|p| !p.tag.is_empty()).collect();
    assert!(!tagged.is_empty());
    for img in &tagged {
        let url = format!("docker://{addr}/{}:{}", img.repo, img.tag);
        let o = skopeo(&["inspect", "--raw", "--tls-verify=false", &url]);
        assert!(
            o.status.success(),
            "skopeo inspect {url}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(o.stdout, img.manifest, "{url}");
        let out = work
            .path()
            .join(format!("copy-{}", img.repo.replace('/', "-")));
        let o = skopeo(&[
            "copy",
            "--all",
            "--preserve-digests",
            "--src-tls-verify=false",
            &url,
            &format!("dir:{}", out.display()),
        ]);
        assert!(
            o.status.success(),
            "skopeo copy {url}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let http = reqwest::Client::new();
        let base = format!("http://{addr}/v2");
        let v2 = http.get(format!("{base}/")).send().await.unwrap();
        assert_eq!(v2.status(), 200);
        assert_eq!(
            v2.headers()["docker-distribution-api-version"],
            "registry/2.0"
        );
        let catalog: serde_json::Value = http
            .get(format!("{base}/_catalog"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert!(
            catalog["repositories"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r == tagged[0].repo.as_str()),
            "{catalog}"
        );

        // Pagination as Distribution does it: n, last, and a Link to the next page.
        let first = http
            .get(format!("{base}/_catalog?n=1"))
            .send()
            .await
            .unwrap();
        let next = first.headers()["link"].to_str().unwrap().to_string();
        let first: serde_json::Value = first.json().await.unwrap();
        let only = first["repositories"][0].as_str().unwrap().to_string();
        assert_eq!(
            first["repositories"].as_array().unwrap().len(),
            1,
            "{first}"
        );
        assert_eq!(
            next,
            format!("</v2/_catalog?last={only}&n=1>; rel=\"next\"")
        );
        let rest: serde_json::Value = http
            .get(format!("{base}/_catalog?last={only}"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            rest["repositories"].as_array().unwrap().len() + 1,
            catalog["repositories"].as_array().unwrap().len()
        );

        // HEAD of a manifest: its digest and length, no body.
        let img = tagged[0];
        let head = http
            .head(format!("{base}/{}/manifests/{}", img.repo, img.tag))
            .send()
            .await
            .unwrap();
        assert_eq!(head.status(), 200);
        assert_eq!(head.headers()["docker-content-digest"], img.digest.as_str());
        assert_eq!(
            head.headers()["content-length"],
            img.manifest.len().to_string().as_str()
        );

        // A digest written with an escaped colon, as some clients send it.
        let escaped = tagged[0].blobs[0].0.replace(':', "%3A");
        let (status, _) = raw_get(&addr, &format!("/v2/{}/blobs/{escaped}", tagged[0].repo)).await;
        assert_eq!(status, 200);

        // A blob in a range: 206 with the right bytes.
        let (blob, size) = img.blobs.iter().max_by_key(|b| b.1).unwrap().clone();
        let whole = http
            .get(format!("{base}/{}/blobs/{blob}", img.repo))
            .send()
            .await
            .unwrap();
        assert_eq!(whole.status(), 200);
        let whole = whole.bytes().await.unwrap();
        assert_eq!(whole.len() as u64, size);
        assert_eq!(bootstrap::oci::digest::Digest::of(&whole).to_string(), blob);
        let part = http
            .get(format!("{base}/{}/blobs/{blob}", img.repo))
            .header("Range", "bytes=10-19")
            .send()
            .await
            .unwrap();
        assert_eq!(part.status(), 206);
        assert_eq!(
            part.headers()["content-range"],
            format!("bytes 10-19/{size}").as_str()
        );
        assert_eq!(part.bytes().await.unwrap(), whole.slice(10..20));
        let past = http
            .get(format!("{base}/{}/blobs/{blob}", img.repo))
            .header("Range", format!("bytes={size}-"))
            .send()
            .await
            .unwrap();
        assert_eq!(past.status(), 416);

        // Unknown digest: 404 with an OCI error body.
        let unknown = format!("sha256:{}", "0".repeat(64));
        let r = http
            .get(format!("{base}/{}/blobs/{unknown}", img.repo))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404);
        let body: serde_json::Value = r.json().await.unwrap();
        assert_eq!(body["errors"][0]["code"], "BLOB_UNKNOWN", "{body}");
        let r = http
            .get(format!("{base}/{}/manifests/no-such-tag", img.repo))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404);
        let body: serde_json::Value = r.json().await.unwrap();
        assert_eq!(body["errors"][0]["code"], "MANIFEST_UNKNOWN", "{body}");

        // Paths that climb out reach nothing (raw paths: reqwest would normalise `..`).
        for path in [
            "/v2/../../etc/passwd",
            "/v2/%2e%2e/%2e%2e/etc/passwd/blobs/sha256:00",
            "/v2/src/../../../etc/manifests/passwd",
            &format!("/v2/{}/blobs/sha256:..%2F..%2F..%2Foci-layout", img.repo),
            &format!("/v2/{}/blobs/..%2F..%2Findex.json", img.repo),
        ] {
            let (status, body) = raw_get(&addr, path).await;
            assert!(status == 404 || status == 400, "{path}: {status} {body}");
            assert!(body.contains("\"errors\""), "{path}: {body}");
            assert!(
                !body.contains("root:") && !body.contains("imageLayoutVersion"),
                "{path}: {body}"
            );
        }

        // Writes are refused.
        let put = http
            .put(format!("{base}/{}/manifests/evil", img.repo))
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(put.status(), 405);
        let post = http
            .post(format!("{base}/{}/blobs/uploads/", img.repo))
            .send()
            .await
            .unwrap();
        assert_eq!(post.status(), 405);

        // A blob corrupted on disk after start is refused, not sent.
        let (victim, _) = tagged
            .iter()
            .flat_map(|i| i.blobs.iter())
            .find(|(d, _)| d != &blob)
            .unwrap()
            .clone();
        let file = dir
            .join("blobs/sha256")
            .join(victim.trim_start_matches("sha256:"));
        let mut bytes = fs_err::read(&file).unwrap();
        bytes[0] ^= 0xff;
        fs_err::write(&file, bytes).unwrap();
        let owner = tagged
            .iter()
            .find(|i| i.blobs.iter().any(|b| b.0 == victim))
            .unwrap();
        let got = match http
            .get(format!("{base}/{}/blobs/{victim}", owner.repo))
            .send()
            .await
        {
            Ok(r) => r.bytes().await.map(|b| b.len()),
            Err(e) => Err(e),
        };
        assert!(got.is_err(), "a corrupt blob was sent whole: {got:?}");
    });
}

/// A GET with the path sent as written.
async fn raw_get(addr: &str, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.unwrap();
    let out = String::from_utf8_lossy(&raw).into_owned();
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, out)
}
