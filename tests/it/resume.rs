//! What an interrupted push resumes, against a registry stand-in on 127.0.0.1 that keeps an
//! upload session across a broken request, as Zot does (a session is a file named by its id;
//! a `PATCH` appends what it reads of the body, so a cut chunk leaves its first bytes there)
//! and GitLab's registry (which answers the status `GET` with what it holds). Distribution 2.x
//! instead refuses and deletes a session that received part of a chunk (its offset is signed
//! into the location); that path is [`a_session_the_registry_dropped_restarts_the_blob`] on the
//! stand-in and [`distribution_drops_a_session_cut_mid_chunk_and_the_blob_starts_over`] on a
//! real Distribution 2.8.
//!
//! The stand-in cuts one `PATCH` after reading part of its body, then answers the status `GET`
//! with the `Range` it holds (or 404 when told to drop the session). It counts every upload
//! body byte it reads and checks each committed blob against its digest.

use crate::support;

use bootstrap::oci::retry::RETRY_DELAY_ENV;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use support::images::{find, SyntheticSet};
use support::run::{command, ok, write_config};
use support::Registry;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;

/// What the stand-in does with the one `PATCH` it cuts.
#[derive(Clone, Copy)]
struct Cut {
    /// Which `PATCH` (1-based, counted over the run) is cut.
    patch: usize,
    /// Body bytes read (and kept) before the connection is closed.
    after: u64,
    /// Drop the session at the cut: its status `GET` answers 404 (the session is gone).
    drop_session: bool,
}

#[derive(Default)]
struct State {
    sessions: HashMap<String, Vec<u8>>,
    blobs: HashMap<String, Vec<u8>>,
    manifests: HashMap<String, (String, Vec<u8>)>,
    patches: usize,
    posts: usize,
    status_gets: usize,
    body_bytes: u64,
    next_id: usize,
}

/// The registry stand-in: one request per connection, `Connection: close`.
struct KeepingRegistry {
    host: String,
    state: Arc<Mutex<State>>,
}

struct Request {
    method: String,
    path: String,
    query: String,
    headers: HashMap<String, String>,
}

fn read_head(sock: &mut TcpStream) -> Option<Request> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if sock.read(&mut byte).ok()? != 1 {
            return None;
        }
        head.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let mut lines = text.lines();
    let mut first = lines.next()?.split_whitespace();
    let method = first.next()?.to_string();
    let target = first.next()?.to_string();
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p.to_string(), q.to_string()),
        None => (target, String::new()),
    };
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Some(Request {
        method,
        path,
        query,
        headers,
    })
}

fn reply(sock: &mut TcpStream, status: &str, headers: &[(&str, String)], body: &[u8]) {
    reply_sized(sock, status, headers, body, body.len());
}

/// A reply whose `Content-Length` is `len` (a HEAD's: the size of the body it does not send).
fn reply_sized(
    sock: &mut TcpStream,
    status: &str,
    headers: &[(&str, String)],
    body: &[u8],
    len: usize,
) {
    let mut text = format!("HTTP/1.1 {status}\r\n");
    for (k, v) in headers {
        text.push_str(&format!("{k}: {v}\r\n"));
    }
    text.push_str(&format!(
        "Content-Length: {len}\r\nConnection: close\r\n\r\n"
    ));
    let _ = sock.write_all(text.as_bytes());
    let _ = sock.write_all(body);
}

/// `Range: 0-<last>` for a session holding `len` bytes (`0--1` when empty, as Zot writes).
fn range(len: usize) -> String {
    format!("0-{}", len as i64 - 1)
}

impl KeepingRegistry {
    fn start(cut: Cut) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let host = listener.local_addr().unwrap().to_string();
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        std::thread::spawn(move || {
            for sock in listener.incoming() {
                let Ok(sock) = sock else { return };
                let state = shared.clone();
                std::thread::spawn(move || serve(sock, &state, cut));
            }
        });
        KeepingRegistry { host, state }
    }

    fn with<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        f(&self.state.lock().unwrap())
    }
}

/// Reads up to `len` body bytes; fewer when the client went away.
fn read_body(sock: &mut TcpStream, len: u64) -> Vec<u8> {
    let mut body = Vec::new();
    let _ = sock.take(len).read_to_end(&mut body);
    body
}

fn serve(mut sock: TcpStream, state: &Mutex<State>, cut: Cut) {
    let Some(req) = read_head(&mut sock) else {
        return;
    };
    let len: u64 = req
        .headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let path = req.path.as_str();
    if path == "/v2/" {
        return reply(&mut sock, "200 OK", &[], b"{}");
    }
    if let Some((_, id)) = path
        .split_once("/blobs/uploads/")
        .filter(|(_, id)| !id.is_empty())
    {
        return session(&mut sock, state, &req, id, len, cut);
    }
    if req.method == "POST" && path.ends_with("/blobs/uploads/") {
        let mut st = state.lock().unwrap();
        st.posts += 1;
        st.next_id += 1;
        let id = format!("session-{}", st.next_id);
        st.sessions.insert(id.clone(), Vec::new());
        let location = format!("{path}{id}");
        return reply(
            &mut sock,
            "202 Accepted",
            &[("Location", location), ("Range", range(0))],
            b"",
        );
    }
    if let Some((_, digest)) = path.split_once("/blobs/") {
        let st = state.lock().unwrap();
        return match st.blobs.get(digest) {
            Some(b) => {
                let headers = [("Docker-Content-Digest", digest.to_string())];
                let body: &[u8] = if req.method == "HEAD" { &[] } else { b };
                reply_sized(&mut sock, "200 OK", &headers, body, b.len())
            }
            None => reply(
                &mut sock,
                "404 Not Found",
                &[],
                b"{\"errors\":[{\"code\":\"BLOB_UNKNOWN\"}]}",
            ),
        };
    }
    if path.contains("/manifests/") {
        let mut st = state.lock().unwrap();
        if req.method == "PUT" {
            let body = read_body(&mut sock, len);
            let digest = support::layers::sha256_digest(&body);
            let kind = req.headers.get("content-type").cloned().unwrap_or_default();
            let (repo, _) = path.split_once("/manifests/").unwrap();
            st.manifests
                .insert(path.to_string(), (kind.clone(), body.clone()));
            st.manifests
                .insert(format!("{repo}/manifests/{digest}"), (kind, body));
            return reply(
                &mut sock,
                "201 Created",
                &[("Docker-Content-Digest", digest)],
                b"",
            );
        }
        return match st.manifests.get(path) {
            Some((kind, body)) => {
                let headers = [
                    ("Content-Type", kind.clone()),
                    (
                        "Docker-Content-Digest",
                        support::layers::sha256_digest(body),
                    ),
                ];
                let body = if req.method == "HEAD" {
                    Vec::new()
                } else {
                    body.clone()
                };
                reply(&mut sock, "200 OK", &headers, &body)
            }
            None => reply(
                &mut sock,
                "404 Not Found",
                &[],
                b"{\"errors\":[{\"code\":\"MANIFEST_UNKNOWN\"}]}",
            ),
        };
    }
    reply(&mut sock, "404 Not Found", &[], b"{\"errors\":[]}")
}

/// One request on an upload session: status, chunk, commit or cancel.
fn session(
    sock: &mut TcpStream,
    state: &Mutex<State>,
    req: &Request,
    id: &str,
    len: u64,
    cut: Cut,
) {
    let location = req.path.clone();
    let gone = b"{\"errors\":[{\"code\":\"BLOB_UPLOAD_UNKNOWN\"}]}";
    match req.method.as_str() {
        "GET" => {
            let mut st = state.lock().unwrap();
            st.status_gets += 1;
            match st.sessions.get(id) {
                Some(held) => {
                    let r = range(held.len());
                    reply(
                        sock,
                        "204 No Content",
                        &[("Location", location), ("Range", r)],
                        b"",
                    )
                }
                None => reply(sock, "404 Not Found", &[], gone),
            }
        }
        "PATCH" => {
            let number = {
                let mut st = state.lock().unwrap();
                st.patches += 1;
                st.patches
            };
            let start: Option<usize> = req
                .headers
                .get("content-range")
                .and_then(|r| r.split('-').next())
                .and_then(|s| s.parse().ok());
            let held = state.lock().unwrap().sessions.get(id).map(Vec::len);
            let Some(held) = held else {
                return reply(sock, "404 Not Found", &[], gone);
            };
            if start.is_some_and(|s| s != held) {
                // As Zot: a chunk must start where the session stands.
                return reply(sock, "416 Range Not Satisfiable", &[], b"");
            }
            let cutting = number == cut.patch;
            let body = read_body(sock, if cutting { cut.after } else { len });
            let mut st = state.lock().unwrap();
            st.body_bytes += body.len() as u64;
            let Some(bytes) = st.sessions.get_mut(id) else {
                return reply(sock, "404 Not Found", &[], gone);
            };
            // What was read is kept, as Zot and GitLab's registry keep it.
            bytes.extend_from_slice(&body);
            let now = bytes.len();
            if cutting {
                if cut.drop_session {
                    st.sessions.remove(id);
                }
                drop(st);
                let _ = sock.shutdown(Shutdown::Both);
                return;
            }
            reply(
                sock,
                "202 Accepted",
                &[("Location", location), ("Range", range(now))],
                b"",
            )
        }
        "PUT" => {
            let body = read_body(sock, len);
            let mut st = state.lock().unwrap();
            st.body_bytes += body.len() as u64;
            let Some(mut bytes) = st.sessions.remove(id) else {
                return reply(sock, "404 Not Found", &[], gone);
            };
            bytes.extend_from_slice(&body);
            let digest = req
                .query
                .split('&')
                .find_map(|kv| kv.strip_prefix("digest="))
                .map(|d| support::percent_decode(d, false))
                .unwrap_or_default();
            if support::layers::sha256_digest(&bytes) != digest {
                return reply(
                    sock,
                    "400 Bad Request",
                    &[],
                    b"{\"errors\":[{\"code\":\"DIGEST_INVALID\"}]}",
                );
            }
            st.blobs.insert(digest.clone(), bytes);
            reply(
                sock,
                "201 Created",
                &[("Docker-Content-Digest", digest)],
                b"",
            )
        }
        "DELETE" => {
            state.lock().unwrap().sessions.remove(id);
            reply(sock, "204 No Content", &[], b"")
        }
        _ => reply(sock, "405 Method Not Allowed", &[], b""),
    }
}

/// Mirrors `data/large` (a layer of 3 MiB and a bit, pushed in 1 MiB chunks) from a real
/// registry to a stand-in that cuts one `PATCH` as `cut` says; returns the stand-in, the
/// image's blobs `(digest, size)` and the output of the run, which must succeed. With
/// `rerun`, a first run with `--retries 1` stops at the cut and fails; the run checked is the
/// same command run again (same working directory).
fn push_with_a_cut(cut: Cut, rerun: bool) -> (KeepingRegistry, Vec<(String, u64)>, String) {
    let src = Registry::plain();
    let set = SyntheticSet::standard(61).with_large_layer_size(3 * MIB + 12_345);
    let pushed = set.push_to(&src, "src");
    let image = find(&pushed, "data/large").clone();
    let dst = KeepingRegistry::start(cut);
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(
        work.path(),
        std::slice::from_ref(&image),
        &src.host(),
        &["amd64"],
    );
    let state = work.path().join("state");
    let src_host = src.host();
    let run = |record: &str, extra: &[&str]| {
        let dest = format!("docker://{}/site", dst.host);
        let record = work.path().join(record);
        let mut args = vec![
            "mirror",
            "-c",
            cfg.to_str().unwrap(),
            &dest,
            "--plain-http",
            &src_host,
            "--plain-http",
            &dst.host,
            "--chunk-size",
            "1",
            "--workdir",
            state.to_str().unwrap(),
            "--record",
            record.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        command(&args).env(RETRY_DELAY_ENV, "0").output().unwrap()
    };
    if rerun {
        let first = run("first.json", &["--retries", "1"]);
        assert!(
            !first.status.success(),
            "the cut did not stop the first run:\n{}",
            String::from_utf8_lossy(&first.stderr)
        );
    }
    let out = run("record.json", &[]);
    let text = format!("{}{}", ok(&out), String::from_utf8_lossy(&out.stderr));
    (dst, image.blobs.clone(), text)
}

/// Every blob of the image is at the stand-in, checked against its digest at the commit.
fn all_committed(dst: &KeepingRegistry, blobs: &[(String, u64)], text: &str) {
    for (digest, size) in blobs {
        let held = dst.with(|s| s.blobs.get(digest).map(Vec::len));
        assert_eq!(
            held,
            Some(*size as usize),
            "blob {digest} not committed:\n{text}"
        );
    }
}

/// Regression (issue 11 item 8): a registry that keeps the bytes of a chunk cut mid-body
/// (Zot, GitLab's) was asked where the session stood, answered more than the journal held,
/// and the blob started over. It is continued from the registry's offset: every byte of the
/// image reaches the registry once, in one session per blob.
#[test]
fn a_chunk_cut_mid_body_resumes_from_the_registry_s_offset() {
    let cut = Cut {
        patch: 2,
        after: 300 * KIB,
        drop_session: false,
    };
    let (dst, blobs, text) = push_with_a_cut(cut, false);
    all_committed(&dst, &blobs, &text);
    let total: u64 = blobs.iter().map(|(_, s)| s).sum();
    let (posts, body, gets) = dst.with(|s| (s.posts, s.body_bytes, s.status_gets));
    assert_eq!(
        body, total,
        "bytes sent twice (status GETs: {gets}):\n{text}"
    );
    assert_eq!(posts, blobs.len(), "a blob started over:\n{text}");
    assert!(
        text.contains(&format!(
            "at {}",
            bootstrap::output::human_bytes(MIB + 300 * KIB)
        )),
        "the resume is not reported at the registry's offset:\n{text}"
    );
}

/// Regression (issue 11 item 8): a first chunk cut mid-body left no journal entry, so even a
/// registry that kept its bytes saw the blob start over in a new session. The session is
/// journaled before its first byte and continued.
#[test]
fn a_first_chunk_cut_mid_body_resumes_too() {
    let cut = Cut {
        patch: 1,
        after: 200 * KIB,
        drop_session: false,
    };
    let (dst, blobs, text) = push_with_a_cut(cut, false);
    all_committed(&dst, &blobs, &text);
    let total: u64 = blobs.iter().map(|(_, s)| s).sum();
    let (posts, body) = dst.with(|s| (s.posts, s.body_bytes));
    assert_eq!(body, total, "bytes sent twice:\n{text}");
    assert_eq!(posts, blobs.len(), "a blob started over:\n{text}");
}

/// A session the registry no longer knows after the cut (its status GET answers 404, as
/// Distribution 2.x does for a session that received part of a chunk) restarts the blob in a
/// new session: the image still arrives whole, at the cost of what the old session held.
#[test]
fn a_session_the_registry_dropped_restarts_the_blob() {
    let cut = Cut {
        patch: 2,
        after: 300 * KIB,
        drop_session: true,
    };
    let (dst, blobs, text) = push_with_a_cut(cut, false);
    all_committed(&dst, &blobs, &text);
    let total: u64 = blobs.iter().map(|(_, s)| s).sum();
    let (posts, body) = dst.with(|s| (s.posts, s.body_bytes));
    assert_eq!(
        posts,
        blobs.len() + 1,
        "the blob did not start over:\n{text}"
    );
    assert_eq!(
        body,
        total + MIB + 300 * KIB,
        "unexpected bytes sent:\n{text}"
    );
}

/// What the stand-in's drop path stands for, on a real Distribution 2.8 behind the fault
/// proxy: after a chunk cut mid-body its status `GET` on the journaled location answers 404
/// (the state signed into the location says fewer bytes than the session got), or, when asked
/// before it notices, the old offset and then a 404 `BLOB_UPLOAD_INVALID` to the resumed
/// `PATCH` (this test failed on that race about one run in three under load); either way the
/// blob starts over in a new session. Pins the behaviour docs/mirror.md describes.
#[test]
fn distribution_drops_a_session_cut_mid_chunk_and_the_blob_starts_over() {
    use support::faultproxy::{Fault, FaultProxy, FaultRule};
    let src = Registry::plain();
    let dst = Registry::plain();
    let set = SyntheticSet::standard(62).with_large_layer_size(3 * MIB + 12_345);
    let pushed = set.push_to(&src, "src");
    let image = find(&pushed, "data/large").clone();
    let proxy = FaultProxy::start(&dst.host()).unwrap();
    proxy.add_rule(
        FaultRule::new(Fault::ResetRequestAfter(300 * KIB))
            .method("PATCH")
            .skip(1),
    );
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(
        work.path(),
        std::slice::from_ref(&image),
        &src.host(),
        &["amd64"],
    );
    let out = command(&[
        "mirror",
        "-c",
        cfg.to_str().unwrap(),
        &format!("docker://{}/site", proxy.host()),
        "--plain-http",
        &src.host(),
        "--plain-http",
        &proxy.host(),
        "--chunk-size",
        "1",
        "--workdir",
        work.path().join("state").to_str().unwrap(),
        "--record",
        work.path().join("record.json").to_str().unwrap(),
    ])
    .env(RETRY_DELAY_ENV, "0")
    .output()
    .unwrap();
    ok(&out);
    let requests = proxy.requests();
    assert_eq!(proxy.faults_fired(), 1, "{requests:#?}");
    // Distribution refuses the cut session at its status GET, or, asked just before it
    // notices, answers the old offset and refuses the resumed PATCH: either way a 404.
    assert!(
        requests
            .iter()
            .any(|r| (r.method == "GET" || r.method == "PATCH")
                && r.path.contains("/blobs/uploads/")
                && r.status == Some(404)),
        "Distribution did not refuse the cut session: {requests:#?}"
    );
    let posts = proxy.requests_matching("POST", "/blobs/uploads/").len();
    assert_eq!(
        posts,
        image.blobs.len() + 1,
        "the blob did not start over: {requests:#?}"
    );
}

/// A rerun after a run that stopped at a cut chunk (here `--retries 1`; kill -9 leaves the
/// same journal) continues the session from the registry's offset: nothing is sent twice.
#[test]
fn a_rerun_continues_a_session_the_registry_kept() {
    let cut = Cut {
        patch: 3,
        after: 500 * KIB,
        drop_session: false,
    };
    let (dst, blobs, text) = push_with_a_cut(cut, true);
    all_committed(&dst, &blobs, &text);
    let total: u64 = blobs.iter().map(|(_, s)| s).sum();
    let (posts, body) = dst.with(|s| (s.posts, s.body_bytes));
    assert_eq!(body, total, "bytes sent twice:\n{text}");
    assert_eq!(posts, blobs.len(), "a blob started over:\n{text}");
    assert!(
        text.contains(&format!(
            "at {}",
            bootstrap::output::human_bytes(2 * MIB + 500 * KIB)
        )),
        "the resume is not reported at the registry's offset:\n{text}"
    );
}
