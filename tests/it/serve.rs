//! `bootstrap serve iso`: the file server BMC virtual media fetch the agent ISO from, checked
//! over real HTTP on 127.0.0.1 with reqwest as the client: HEAD, whole and ranged GETs, the
//! ETag (the file's sha256) in If-None-Match and If-Range, 416 past the end, 404 elsewhere, and
//! a clean exit on SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};

use crate::support;

/// The server process, killed when the test ends however it ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `bootstrap serve iso FILE --bind 127.0.0.1:0`; the child and the URL it printed.
fn start(file: &std::path::Path) -> (Server, String) {
    let mut child = support::run::command(&[
        "serve",
        "iso",
        file.to_str().unwrap(),
        "--bind",
        "127.0.0.1:0",
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::null())
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
