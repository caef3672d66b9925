//! Hostile inputs that used to hang a run or eat its memory: a disk mirror whose blob paths are
//! not regular files (a FIFO named like a blob, a symlink to `/dev/zero`), and a registry on
//! 127.0.0.1 whose bodies never end. Each run must end with an error naming the culprit within
//! seconds, in little memory; every run here has a deadline and is killed past it, so a
//! regression fails instead of hanging the suite.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, Instant};
use support::images::SyntheticSet;
use support::run::{bootstrap, command, json, ok, write_config};
use support::Registry;

/// How long a refused run may take; a hang is killed here and fails the test.
const DEADLINE: Duration = Duration::from_secs(30);

/// Runs `bootstrap` with a deadline; returns its status and output, or panics (after killing
/// it) when it is still running at the deadline.
fn run_with_deadline(args: &[&str], scratch: &Path) -> (ExitStatus, String) {
    let (status, text, _) = run_measured(args, scratch);
    (status, text)
}

/// The child's peak resident memory so far (`VmHWM`, in KiB), while it runs.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = fs_err::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// [`run_with_deadline`], also returning the peak resident memory (KiB) last seen while the
/// run was alive (sampled every 20 ms; `VmHWM` only grows, so it misses at most the last one).
fn run_measured(args: &[&str], scratch: &Path) -> (ExitStatus, String, u64) {
    let out = fs_err::File::create(scratch.join("stdout")).unwrap();
    let err = fs_err::File::create(scratch.join("stderr")).unwrap();
    let mut child = command(args)
        .stdout(out.into_file())
        .stderr(err.into_file())
        .spawn()
        .expect("running bootstrap");
    let start = Instant::now();
    let mut peak = 0;
    let status = loop {
        if let Some(kib) = peak_rss_kib(child.id()) {
            peak = peak.max(kib);
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("bootstrap {args:?} still running after {DEADLINE:?}: it hangs");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = fs_err::read_to_string(scratch.join("stderr")).unwrap();
    let stdout = fs_err::read_to_string(scratch.join("stdout")).unwrap();
    (status, format!("{stdout}{stderr}"), peak)
}

/// A disk mirror of one small image; returns the work dir and the layout's path.
fn disk_mirror(src: &Registry) -> (tempfile::TempDir, PathBuf) {
    let pushed = SyntheticSet::standard(11)
        .without_large()
        .push_to(src, "src");
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(work.path(), &pushed[..1], &src.host(), &["amd64"]);
    let dir = work.path().join("mirror");
    ok(&bootstrap(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        &format!("file://{}", dir.display()),
        "--plain-http",
        &src.host(),
    ]));
    (work, dir)
}

/// The first top manifest of the layout's index: `mirror --from` reads it whole.
fn top_manifest(dir: &Path) -> PathBuf {
    let index = json(&dir.join("index.json"));
    let hex = index["manifests"][0]["digest"]
        .as_str()
        .unwrap()
        .trim_start_matches("sha256:")
        .to_string();
    dir.join("blobs/sha256").join(hex)
}

fn make_fifo(path: &Path) {
    fs_err::remove_file(path).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
}

fn make_dev_zero_link(path: &Path) {
    fs_err::remove_file(path).unwrap();
    std::os::unix::fs::symlink("/dev/zero", path).unwrap();
}

/// `verify` and `mirror --from` of `dir` both end with an error that names `blob` and says
/// `what` it is.
fn both_refuse(dir: &Path, blob: &Path, what: &str, dst: &Registry) {
    let scratch = tempfile::tempdir().unwrap();
    let dir_url = format!("file://{}", dir.display());
    let name = blob.file_name().unwrap().to_string_lossy().into_owned();

    let (status, text) = run_with_deadline(&["verify", &dir_url], scratch.path());
    assert!(
        !status.success(),
        "verify passed a layout with {what}:\n{text}"
    );
    assert!(
        text.contains(&name) && text.contains(what) && text.contains("not a regular file"),
        "verify does not say that {name} is {what}:\n{text}"
    );

    let (status, text) = run_with_deadline(
        &[
            "mirror",
            "--from",
            &dir_url,
            &format!("docker://{}/site", dst.host()),
            "--plain-http",
            &dst.host(),
            "--retries",
            "1",
        ],
        scratch.path(),
    );
    assert!(
        !status.success(),
        "mirror --from pushed a layout with {what}:\n{text}"
    );
    assert!(
        text.contains(&name) && text.contains(what) && text.contains("not a regular file"),
        "mirror --from does not say that {name} is {what}:\n{text}"
    );
    // Refused before anything was sent: the destination saw only reads (the ping).
    let writes: Vec<String> = dst
        .requests()
        .iter()
        .filter(|r| !matches!(r.method.as_str(), "GET" | "HEAD"))
        .map(|r| format!("{} {}", r.method, r.uri))
        .collect();
    assert!(
        writes.is_empty(),
        "mirror --from pushed before refusing: {writes:#?}"
    );
}

/// Regression: a FIFO named like a layer blob blocked `verify` and `mirror --from` for ever.
#[test]
fn a_fifo_named_like_a_blob_is_refused_within_seconds() {
    let src = Registry::plain();
    let dst = Registry::plain();
    let (_work, dir) = disk_mirror(&src);
    let blob = crate::support::run::largest_layout_blob(&dir);
    make_fifo(&blob);
    both_refuse(&dir, &blob, "a FIFO", &dst);
}

/// Regression: a manifest blob replaced by a symlink to `/dev/zero` fed `verify` and
/// `mirror --from` an endless read.
#[test]
fn a_blob_symlinked_to_dev_zero_is_refused_within_seconds() {
    let src = Registry::plain();
    let dst = Registry::plain();
    let (_work, dir) = disk_mirror(&src);
    let blob = top_manifest(&dir);
    make_dev_zero_link(&blob);
    both_refuse(&dir, &blob, "a symlink to /dev/zero", &dst);
}

/// A registry stand-in on 127.0.0.1 that answers `/v2/` with 200 and every other request with
/// `status` and a chunked body that never ends (generated as it is sent, so the test costs
/// nothing); its `host:port`.
fn endless_registry(status: &'static str) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let host = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for sock in listener.incoming() {
            let Ok(mut sock) = sock else { return };
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && sock.read(&mut byte).unwrap_or(0) == 1 {
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head);
                if head.starts_with("GET /v2/ ") {
                    let _ = sock.write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
                    );
                    return;
                }
                let reply = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: application/vnd.oci.image.manifest.v1+json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                );
                if sock.write_all(reply.as_bytes()).is_err() {
                    return;
                }
                let mut chunk = b"10000\r\n".to_vec();
                chunk.extend(std::iter::repeat_n(b'{', 0x10000));
                chunk.extend_from_slice(b"\r\n");
                while sock.write_all(&chunk).is_ok() {}
            });
        }
    });
    host
}

/// Mirrors one image from `host` to disk; the run must fail within the deadline, its peak
/// memory under 64 MiB, and its output must contain `says`.
fn mirror_from_endless(host: &str, says: &str) {
    let work = tempfile::tempdir().unwrap();
    let cfg = work.path().join("isc.yaml");
    fs_err::write(
        &cfg,
        format!(
            "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  additionalImages:\n  - name: {host}/a:latest\n"
        ),
    )
    .unwrap();
    let (status, text, peak_kib) = run_measured(
        &[
            "mirror",
            "-c",
            cfg.to_str().unwrap(),
            &format!("file://{}", work.path().join("mirror").display()),
            "--plain-http",
            host,
            "--retries",
            "1",
        ],
        work.path(),
    );
    assert!(!status.success(), "the mirror succeeded:\n{text}");
    assert!(
        text.contains(says),
        "the error does not say '{says}':\n{text}"
    );
    assert!(
        peak_kib < 64 * 1024,
        "peak RSS {peak_kib} KiB, over 64 MiB:\n{text}"
    );
}

/// Regression: a manifest answered with a chunked body that never ends was read whole (a 3 GB
/// one took 3 GB of memory); the read stops at the 4 MiB manifest limit.
#[test]
fn an_endless_chunked_manifest_fails_in_little_memory() {
    let host = endless_registry("200 OK");
    mirror_from_endless(&host, "larger than the 4 MiB manifest limit");
}

/// Regression: an error body was read whole (a 2 GB one took 2 GB); only its head is read.
#[test]
fn an_endless_error_body_fails_in_little_memory() {
    let host = endless_registry("500 Internal Server Error");
    mirror_from_endless(&host, "HTTP 500");
}

/// A registry stand-in on 127.0.0.1 serving one image `a:latest` whose manifest declares its
/// only layer to be `layer_size` bytes (the config is real); every GET of the layer is counted
/// and answered with 16 bytes. Returns its `host:port` and the layer GET counter.
fn giant_layer_registry(
    layer_size: u64,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let sha = support::layers::sha256_digest;
    let config =
        br#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}"#;
    let layer_digest = sha(b"the layer that never was");
    let manifest = format!(
        r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"{}","size":{}}},"layers":[{{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"{layer_digest}","size":{layer_size}}}]}}"#,
        sha(config),
        config.len()
    );
    let manifest_digest = sha(manifest.as_bytes());
    let config_path = format!("/v2/a/blobs/{}", sha(config));
    let layer_path = format!("/v2/a/blobs/{layer_digest}");
    let gets = std::sync::Arc::new(AtomicUsize::new(0));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let host = listener.local_addr().unwrap().to_string();
    let counter = gets.clone();
    std::thread::spawn(move || {
        for sock in listener.incoming() {
            let Ok(mut sock) = sock else { return };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && sock.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let head = String::from_utf8_lossy(&head).into_owned();
            let mut parts = head.split_whitespace();
            let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            let (status, kind, body): (&str, &str, Vec<u8>) = if path == "/v2/" {
                ("200 OK", "application/json", b"{}".to_vec())
            } else if path.starts_with("/v2/a/manifests/") {
                (
                    "200 OK",
                    "application/vnd.oci.image.manifest.v1+json",
                    manifest.clone().into_bytes(),
                )
            } else if path == config_path {
                ("200 OK", "application/octet-stream", config.to_vec())
            } else if path == layer_path {
                if method == "GET" {
                    counter.fetch_add(1, Ordering::SeqCst);
                }
                ("200 OK", "application/octet-stream", vec![b'x'; 16])
            } else {
                (
                    "404 Not Found",
                    "application/json",
                    b"{\"errors\":[]}".to_vec(),
                )
            };
            let digest = if path.starts_with("/v2/a/manifests/") {
                format!("Docker-Content-Digest: {manifest_digest}\r\n")
            } else {
                String::new()
            };
            let reply = format!(
                "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\n{digest}Content-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = sock.write_all(reply.as_bytes());
            if method != "HEAD" {
                let _ = sock.write_all(&body);
            }
        }
    });
    (host, gets)
}

/// Regression (issue 11 item 3): a manifest declaring a layer of 2^62 bytes was downloaded
/// with `--ignore-free-space` (the disk would fill). It is refused before any GET of the layer,
/// naming the image, the blob, its size, the cap and `--max-blob-size`; raising the cap lets
/// the run try the layer (which then fails on its short body, not on the cap). A dry run is
/// refused the same way.
#[test]
fn a_layer_declared_beyond_any_disk_is_refused_before_download() {
    let (host, layer_gets) = giant_layer_registry(1 << 62);
    let work = tempfile::tempdir().unwrap();
    let cfg = work.path().join("isc.yaml");
    fs_err::write(
        &cfg,
        format!(
            "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  additionalImages:\n  - name: {host}/a:latest\n"
        ),
    )
    .unwrap();
    let dest = format!("file://{}", work.path().join("mirror").display());
    let args = |extra: &[&'static str]| {
        let mut a = vec![
            "mirror".to_string(),
            "-c".into(),
            cfg.display().to_string(),
            dest.clone(),
            "--plain-http".into(),
            host.clone(),
            "--retries".into(),
            "1".into(),
            "--ignore-free-space".into(),
        ];
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let run = |a: Vec<String>| {
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        run_with_deadline(&a, work.path())
    };

    let (status, text) = run(args(&[]));
    assert!(!status.success(), "the giant layer was accepted:\n{text}");
    for part in [
        format!("{host}/a:latest").as_str(),
        "declares 4194304.0 TiB (4611686018427387904 bytes)",
        "1.0 TiB allowed for one blob",
        "--max-blob-size",
    ] {
        assert!(
            text.contains(part),
            "the refusal does not say '{part}':\n{text}"
        );
    }
    assert_eq!(
        layer_gets.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the layer was requested before the refusal:\n{text}"
    );

    let (status, text) = run(args(&["--dry-run"]));
    assert!(
        !status.success() && text.contains("allowed for one blob"),
        "a dry run planned the giant layer:\n{text}"
    );

    let (status, text) = run(args(&["--max-blob-size", "4096PiB"]));
    assert!(
        !status.success(),
        "a 16-byte body passed as 2^62 bytes:\n{text}"
    );
    assert!(
        !text.contains("allowed for one blob"),
        "the raised cap still refused:\n{text}"
    );
    assert!(
        layer_gets.load(std::sync::atomic::Ordering::SeqCst) > 0,
        "with the cap raised the layer was never tried:\n{text}"
    );
}
