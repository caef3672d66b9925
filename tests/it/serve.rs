//! `bootstrap serve iso`: the file server BMC virtual media fetch the agent ISO from, checked
//! over real HTTP on 127.0.0.1 with reqwest as the client: HEAD, whole and ranged GETs, the
//! ETag (the file's sha256) in If-None-Match and If-Range, 416 past the end, 404 elsewhere, and
//! a clean exit on SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};

use crate::support;

/// The server process, killed when the test ends however it ends.
pub(crate) struct Server(pub(crate) Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `bootstrap serve iso FILE --bind 127.0.0.1:0`; the child and the URL it printed.
pub(crate) fn start(file: &std::path::Path) -> (Server, String) {
    start_with(file, &[], Stdio::null())
}

/// [`start`] with more arguments, its stderr (the access log) going to `stderr`.
fn start_with(file: &std::path::Path, extra: &[&str], stderr: Stdio) -> (Server, String) {
    let mut args = vec![
        "serve",
        "iso",
        file.to_str().unwrap(),
        "--bind",
        "127.0.0.1:0",
    ];
    args.extend_from_slice(extra);
    let mut child = support::run::command(&args)
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let child = Server(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    let url = line
        .split(" at ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_string();
    (child, url)
}

#[test]
fn the_iso_server_answers_as_bmc_virtual_media_need() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("agent.x86_64.iso");
    let bytes: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    fs_err::write(&file, &bytes).unwrap();
    let sha = support::layers::sha256_digest(&bytes);
    let etag = format!("\"sha256-{}\"", sha.trim_start_matches("sha256:"));
    let (mut server, url) = start(&file);
    assert!(url.ends_with("/agent.x86_64.iso"), "{url}");
    let base = url.trim_end_matches("/agent.x86_64.iso").to_string();
    support::block_on(async move {
        let c = reqwest::Client::builder().no_proxy().build().unwrap();
        let head = c.head(&url).send().await.unwrap();
        assert_eq!(head.status(), 200);
        let h = head.headers();
        assert_eq!(h["content-length"], bytes.len().to_string().as_str());
        assert_eq!(h["accept-ranges"], "bytes");
        assert_eq!(h["etag"], etag.as_str());
        assert!(h["last-modified"].to_str().unwrap().ends_with(" GMT"));

        let whole = c.get(&url).send().await.unwrap();
        assert_eq!(whole.status(), 200);
        assert_eq!(whole.bytes().await.unwrap().as_ref(), bytes.as_slice());

        let part = c
            .get(&url)
            .header("range", "bytes=100-199")
            .send()
            .await
            .unwrap();
        assert_eq!(part.status(), 206);
        assert_eq!(
            part.headers()["content-range"],
            format!("bytes 100-199/{}", bytes.len()).as_str()
        );
        assert_eq!(part.bytes().await.unwrap().as_ref(), &bytes[100..200]);

        let tail = c
            .get(&url)
            .header("range", "bytes=-7")
            .send()
            .await
            .unwrap();
        assert_eq!(tail.status(), 206);
        assert_eq!(
            tail.bytes().await.unwrap().as_ref(),
            &bytes[bytes.len() - 7..]
        );

        let past = c
            .get(&url)
            .header("range", format!("bytes={}-", bytes.len()))
            .send()
            .await
            .unwrap();
        assert_eq!(past.status(), 416);
        assert_eq!(
            past.headers()["content-range"],
            format!("bytes */{}", bytes.len()).as_str()
        );

        let same = c
            .get(&url)
            .header("if-none-match", &etag)
            .send()
            .await
            .unwrap();
        assert_eq!(same.status(), 304);

        // A range for another version of the file is ignored: the whole file comes back.
        let changed = c
            .get(&url)
            .header("range", "bytes=0-9")
            .header("if-range", "\"sha256-other\"")
            .send()
            .await
            .unwrap();
        assert_eq!(changed.status(), 200);
        assert_eq!(changed.bytes().await.unwrap().len(), bytes.len());

        let other = c.get(format!("{base}/etc/passwd")).send().await.unwrap();
        assert_eq!(other.status(), 404);
        let post = c.post(&url).send().await.unwrap();
        assert_eq!(post.status(), 405);
    });
    let pid = server.0.id().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    assert!(server.0.wait().unwrap().success());
}

/// Over TLS with the site's certificate, as a BMC on an untrusted network would fetch it: curl
/// (the peer) verifies the chain against the CA, HEAD gives the exact length and the validators,
/// a range gives exactly those bytes, and every answer is in the access log on stderr.
#[test]
fn the_iso_server_speaks_tls_and_logs_every_answer() {
    let dir = tempfile::tempdir().unwrap();
    let pki = support::tls::TestPki::generate(&dir.path().join("pki")).unwrap();
    let file = dir.path().join("agent.x86_64.iso");
    let bytes: Vec<u8> = (0..200_000u32).map(|i| (i % 241) as u8).collect();
    fs_err::write(&file, &bytes).unwrap();
    let log_path = dir.path().join("stderr.log");
    let (mut server, url) = start_with(
        &file,
        &[
            "--tls-cert",
            pki.server_cert_path.to_str().unwrap(),
            "--tls-key",
            pki.server_key_path.to_str().unwrap(),
        ],
        fs_err::File::create(&log_path)
            .unwrap()
            .into_parts()
            .0
            .into(),
    );
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    let curl = |extra: &[&str]| {
        let out = std::process::Command::new("curl")
            .args(["-sS", "--fail", "--cacert", pki.ca_path.to_str().unwrap()])
            .args(extra)
            .arg(&url)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "curl {extra:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    let head = String::from_utf8(curl(&["-I"]))
        .unwrap()
        .to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(
        head.contains(&format!("content-length: {}", bytes.len())),
        "{head}"
    );
    assert!(head.contains("accept-ranges: bytes"), "{head}");
    assert!(head.contains("etag: \"sha256-"), "{head}");
    let part = curl(&["-r", "1000-1999"]);
    assert_eq!(part, &bytes[1000..2000]);
    assert_eq!(curl(&[]), bytes);
    // Without the CA the certificate is refused: nothing is served to a client that cannot
    // tell this server from another.
    let untrusted = std::process::Command::new("curl")
        .args(["-sS", "-o", "/dev/null"])
        .arg(&url)
        .status()
        .unwrap();
    assert!(!untrusted.success());
    let pid = server.0.id().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    assert!(server.0.wait().unwrap().success());
    let log = fs_err::read_to_string(&log_path).unwrap();
    assert!(
        log.contains("HEAD /agent.x86_64.iso -> 200 (0 bytes)"),
        "{log}"
    );
    assert!(
        log.contains("GET /agent.x86_64.iso range bytes=1000-1999 -> 206 (1000 bytes)"),
        "{log}"
    );
    assert!(
        log.contains(&format!(
            "GET /agent.x86_64.iso -> 200 ({} bytes)",
            bytes.len()
        )),
        "{log}"
    );
}
