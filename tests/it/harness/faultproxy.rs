//! Self-test of the fault proxy: it relays pushes and pulls byte for byte, counts what crossed
//! it, and each of its faults (cuts, corruption, statuses, stalls, delays, a slow link) shows
//! on the client side exactly as configured.

use super::*;

/// Blob size for the fault proxy's self-tests: many relay buffers, still quick.
const PROXY_BLOB: usize = 3 * 1024 * 1024 + 777;

const MIB: u64 = 1024 * 1024;

/// Seeded random bytes (incompressible, so sizes on the wire are real).
fn random_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut data = vec![0; len];
    layers::Rng::new(seed).fill(&mut data);
    data
}

/// A plain registry holding one random blob in `fp/blob` (pushed directly), with a fault proxy
/// in front of it: `(registry, proxy, blob, digest)`.
fn proxied_blob(seed: u64) -> (Registry, FaultProxy, Vec<u8>, String) {
    let reg = Registry::plain();
    let proxy = FaultProxy::start(&reg.host()).expect("starting fault proxy");
    let data = random_bytes(seed, PROXY_BLOB);
    let digest = layers::sha256_digest(&data);
    let source = BlobSource::Bytes(Bytes::from(data.clone()));
    support::block_on(RegistryClient::new(&reg).push_blob("fp/blob", &digest, source)).unwrap();
    (reg, proxy, data, digest)
}

/// What a GET delivered: the head, the body bytes received before it ended or failed, the
/// failure, and how long the whole took.
struct Fetched {
    status: u16,
    retry_after: Option<String>,
    body: Vec<u8>,
    error: Option<String>,
    elapsed: Duration,
}

/// GETs `url`, reading the body until it ends or fails (a failure is data here, not a panic).
async fn fetch(http: &reqwest::Client, url: &str) -> Fetched {
    let start = std::time::Instant::now();
    let mut resp = http.get(url).send().await.expect("response head");
    let status = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    let mut body = Vec::new();
    let error = loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Ok(None) => break None,
            Err(e) => break Some(format!("{e:?}")),
        }
    };
    Fetched {
        status,
        retry_after,
        body,
        error,
        elapsed: start.elapsed(),
    }
}

/// A blocking HTTP/1.1 connection, for what reqwest cannot be made to do for certain: chunked
/// request bodies, and several requests on one known connection.
struct RawConn {
    reader: std::io::BufReader<std::net::TcpStream>,
    writer: std::net::TcpStream,
    host: String,
}

/// A response read by [`RawConn`].
struct RawResponse {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl RawResponse {
    fn header(&self, name: &str) -> Option<&str> {
        let found = self
            .headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name));
        found.map(|(_, v)| v.as_str())
    }
}

impl RawConn {
    fn connect(host: &str) -> RawConn {
        let writer = std::net::TcpStream::connect(host).unwrap();
        writer
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        RawConn {
            reader: std::io::BufReader::new(writer.try_clone().unwrap()),
            writer,
            host: host.to_string(),
        }
    }

    /// Sends a request with `body` (chunked in `chunk`-byte pieces when `chunk` is given,
    /// with a Content-Length otherwise) and reads the response (which must have a length).
    fn exchange(
        &mut self,
        method: &str,
        target: &str,
        body: &[u8],
        chunk: Option<usize>,
    ) -> RawResponse {
        use std::io::Write;
        let framing = match chunk {
            Some(_) => "Transfer-Encoding: chunked".to_string(),
            None => format!("Content-Length: {}", body.len()),
        };
        let head = format!(
            "{method} {target} HTTP/1.1\r\nHost: {}\r\n{framing}\r\n\r\n",
            self.host
        );
        self.writer.write_all(head.as_bytes()).unwrap();
        match chunk {
            Some(size) => {
                for piece in body.chunks(size) {
                    write!(self.writer, "{:x}\r\n", piece.len()).unwrap();
                    self.writer.write_all(piece).unwrap();
                    self.writer.write_all(b"\r\n").unwrap();
                }
                self.writer.write_all(b"0\r\n\r\n").unwrap();
            }
            None => self.writer.write_all(body).unwrap(),
        }
        self.read_response()
    }

    fn read_response(&mut self) -> RawResponse {
        use std::io::{BufRead, Read};
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        let status = line.split(' ').nth(1).unwrap().parse().unwrap();
        let mut headers = Vec::new();
        loop {
            line.clear();
            self.reader.read_line(&mut line).unwrap();
            match line.trim_end().split_once(':') {
                Some((k, v)) => headers.push((k.to_string(), v.trim().to_string())),
                None => break,
            }
        }
        let mut response = RawResponse {
            status,
            headers,
            body: Vec::new(),
        };
        let length: usize = response.header("content-length").unwrap().parse().unwrap();
        response.body.resize(length, 0);
        self.reader.read_exact(&mut response.body).unwrap();
        response
    }
}

/// The origin-form target of an absolute `Location` that names the proxy.
fn target_of(location: &str, proxy: &FaultProxy) -> String {
    let target = location.strip_prefix(&proxy.url());
    target
        .unwrap_or_else(|| panic!("{location} does not name the proxy"))
        .to_string()
}

#[test]
fn faultproxy_relays_uploads_and_downloads_and_counts_their_bytes() {
    let reg = Registry::plain();
    let proxy = FaultProxy::start(&reg.host()).unwrap();
    assert_eq!(proxy.url(), format!("http://{}", proxy.host()));
    assert_eq!(proxy.upstream(), reg.host());
    let (mono, streamed) = (random_bytes(1, PROXY_BLOB), random_bytes(2, PROXY_BLOB + 1));
    let (mono_digest, streamed_digest) = (
        layers::sha256_digest(&mono),
        layers::sha256_digest(&streamed),
    );
    let url = proxy.url();
    // A monolithic upload with Content-Length (POST, then PUT with the body).
    let location = support::block_on(async {
        let client = RegistryClient::with_parts(reg.http_client(), &url, None);
        let source = BlobSource::Bytes(Bytes::from(mono.clone()));
        client
            .push_blob("fp/mono", &mono_digest, source)
            .await
            .unwrap();
        client.start_upload("fp/streamed").await.unwrap()
    });
    // Host was forwarded unchanged, so the registry's Location names the proxy.
    let target = target_of(&location, &proxy);

    // A chunked PATCH and the closing PUT on one connection: bodies of both framings are
    // relayed, and the connection is kept alive.
    let connections = proxy.connections();
    let mut raw = RawConn::connect(&proxy.host());
    let patched = raw.exchange("PATCH", &target, &streamed, Some(100_003));
    assert_eq!(patched.status, 202);
    let end = streamed.len() - 1;
    assert_eq!(patched.header("range"), Some(format!("0-{end}").as_str()));
    let next = target_of(patched.header("location").unwrap(), &proxy);
    let put = raw.exchange(
        "PUT",
        &format!("{next}&digest={streamed_digest}"),
        b"",
        None,
    );
    assert_eq!(put.status, 201);
    assert_eq!(
        proxy.connections(),
        connections + 1,
        "one connection for both"
    );
    assert_eq!(reg.blob_uploads_completed(&streamed_digest), 1);
    assert_eq!(reg.blob_uploads_completed(&mono_digest), 1);

    check_proxied_pulls(
        &reg,
        &proxy,
        (&mono, &mono_digest),
        (&streamed, &streamed_digest),
    );
    check_chunked_response(&reg, &proxy);

    let host = proxy.host();
    drop(proxy);
    assert!(
        std::net::TcpStream::connect(&host).is_err(),
        "still listening after drop"
    );
}

/// Pulls both blobs back through the proxy and checks every byte counter against their sizes.
fn check_proxied_pulls(
    reg: &Registry,
    proxy: &FaultProxy,
    (mono, mono_digest): (&[u8], &str),
    (streamed, streamed_digest): (&[u8], &str),
) {
    let sizes = (mono.len() as u64, streamed.len() as u64);
    assert_eq!(proxy.request_body_bytes("PUT", "/blobs/uploads/"), sizes.0);
    assert_eq!(
        proxy.request_body_bytes("PATCH", "/blobs/uploads/"),
        sizes.1
    );
    assert_eq!(proxy.total_request_body_bytes(), sizes.0 + sizes.1);
    let url = proxy.url();
    let (head, got_mono, got_streamed) = support::block_on(async {
        let client = RegistryClient::with_parts(reg.http_client(), &url, None);
        (
            client.head_blob("fp/mono", mono_digest).await.unwrap(),
            client.get_blob("fp/mono", mono_digest).await.unwrap(),
            client
                .get_blob("fp/streamed", streamed_digest)
                .await
                .unwrap(),
        )
    });
    assert_eq!(head, Some(sizes.0));
    assert!(
        got_mono == mono && got_streamed == streamed,
        "blobs relayed intact"
    );
    assert_eq!(
        proxy.response_body_bytes("GET", "/blobs/sha256:"),
        sizes.0 + sizes.1
    );
    assert_eq!(proxy.response_body_bytes("HEAD", "/blobs/sha256:"), 0);
    assert_eq!(proxy.total_response_body_bytes(), sizes.0 + sizes.1);
    let requests = proxy.requests();
    assert!(requests.iter().all(|r| r.fault.is_none()), "{requests:?}");
    assert_eq!(proxy.requests_matching("GET", "/blobs/sha256:").len(), 2);
    assert!(proxy
        .requests_matching("GET", "/blobs/sha256:")
        .iter()
        .all(|r| r.status == Some(200)));
    proxy.reset_counters();
    assert_eq!(proxy.total_response_body_bytes(), 0);
    assert!(proxy.requests().is_empty());
}

/// A tags list over 2 KiB comes chunked from Distribution; the proxy re-chunks it intact and
/// counts its decoded length.
fn check_chunked_response(reg: &Registry, proxy: &FaultProxy) {
    let spec = ImageSpec::new(
        images::Format::Oci,
        Platform::linux_amd64(),
        vec![LayerSpec::new(5, 1024)],
    );
    let (url, direct_url) = (proxy.url(), reg.url());
    let (direct, proxied) = support::block_on(async {
        let direct = RegistryClient::new(reg);
        let pushed = images::push_image(&direct, "fp/tags", None, &spec)
            .await
            .unwrap();
        let (media_type, manifest) = direct
            .get_manifest("fp/tags", &pushed.digest)
            .await
            .unwrap();
        for i in 0..30 {
            let tag = format!("{i:0>100}");
            direct
                .put_manifest("fp/tags", &tag, &media_type, &manifest)
                .await
                .unwrap();
        }
        let http = reg.http_client();
        let path = "/v2/fp/tags/tags/list";
        let direct = http
            .get(format!("{direct_url}{path}"))
            .send()
            .await
            .unwrap();
        assert_eq!(direct.content_length(), None, "Distribution chunks it");
        let direct = direct.bytes().await.unwrap();
        (direct, fetch(&http, &format!("{url}{path}")).await)
    });
    assert_eq!((proxied.status, proxied.error), (200, None));
    assert_eq!(proxied.body, direct);
    let counted = proxy.response_body_bytes("GET", "/tags/list");
    assert_eq!(counted, direct.len() as u64);
}

#[test]
fn faultproxy_response_faults_show_on_the_client_side() {
    let (reg, proxy, data, digest) = proxied_blob(3);
    let url = format!("{}/v2/fp/blob/blobs/{digest}", proxy.url());
    let blobs = || {
        FaultRule::new(Fault::FlipResponseByte(0))
            .method("GET")
            .path("/blobs/sha256:")
    };
    let flip_at = 2 * MIB + 3;
    proxy.add_rule(FaultRule {
        fault: Fault::ResetResponseAfter(MIB),
        ..blobs()
    });
    proxy.add_rule(FaultRule {
        fault: Fault::TruncateResponseAfter(MIB + 5),
        ..blobs().skip(1)
    });
    proxy.add_rule(FaultRule {
        fault: Fault::FlipResponseByte(flip_at),
        ..blobs().skip(2)
    });
    let fetched = support::block_on(async {
        let http = reg.http_client();
        let mut all = Vec::new();
        for _ in 0..4 {
            all.push(fetch(&http, &url).await);
        }
        all
    });
    let [reset, truncated, flipped, intact] = &fetched[..] else {
        unreachable!()
    };
    // Reset: an error mid-body; the RST may discard bytes still in flight.
    assert_eq!(reset.status, 200);
    assert!(reset.error.is_some() && reset.body.len() as u64 <= MIB);
    assert_eq!(reset.body, data[..reset.body.len()]);
    // Truncated: exactly the bytes sent before the FIN, then an error (short of the length).
    assert!(truncated.error.is_some());
    assert_eq!(truncated.body, data[..(MIB + 5) as usize]);
    // Flipped: complete, and different at exactly that offset.
    assert_eq!(flipped.error, None);
    let diffs: Vec<usize> = (0..data.len())
        .filter(|&i| flipped.body[i] != data[i])
        .collect();
    assert_eq!(diffs, [flip_at as usize]);
    assert_eq!(
        flipped.body[flip_at as usize],
        data[flip_at as usize] ^ 0xFF
    );
    // The rules are spent.
    assert!(intact.error.is_none() && intact.body == data);

    let records = proxy.requests_matching("GET", "/blobs/sha256:");
    let faults: Vec<_> = records.iter().map(|r| r.fault.clone()).collect();
    assert_eq!(
        faults,
        [
            Some(Fault::ResetResponseAfter(MIB)),
            Some(Fault::TruncateResponseAfter(MIB + 5)),
            Some(Fault::FlipResponseByte(flip_at)),
            None
        ]
    );
    let relayed: Vec<u64> = records.iter().map(|r| r.response_body_bytes).collect();
    let full = data.len() as u64;
    assert_eq!(relayed, [MIB, MIB + 5, full, full]);
    assert_eq!(proxy.faults_fired(), 3);
    assert_eq!(reg.requests_matching("GET", "/blobs/sha256:"), 4);
}

#[test]
fn faultproxy_injects_statuses_without_reaching_the_registry() {
    let (reg, proxy, data, digest) = proxied_blob(4);
    let url = format!("{}/v2/fp/blob/blobs/{digest}", proxy.url());
    let gets_before = reg.requests_matching("GET", "/blobs/sha256:");
    let status = |status, retry_after| Fault::Status {
        status,
        retry_after,
    };
    let rule = |fault| FaultRule::new(fault).method("GET").path("/blobs/sha256:");
    proxy.add_rule(rule(status(503, Some(7))));
    proxy.add_rule(rule(status(429, Some(2))).skip(1));
    let (unavailable, too_many, ok) = support::block_on(async {
        let http = reg.http_client();
        (
            fetch(&http, &url).await,
            fetch(&http, &url).await,
            fetch(&http, &url).await,
        )
    });
    for (fetched, code, retry) in [(&unavailable, 503, "7"), (&too_many, 429, "2")] {
        assert_eq!(fetched.status, code);
        assert_eq!(fetched.retry_after.as_deref(), Some(retry));
        let body: serde_json::Value = serde_json::from_slice(&fetched.body).unwrap();
        assert_eq!(body["errors"][0]["message"], "injected by fault proxy");
    }
    let code = |f: &Fetched| serde_json::from_slice::<serde_json::Value>(&f.body).unwrap();
    assert_eq!(code(&unavailable)["errors"][0]["code"], "UNAVAILABLE");
    assert_eq!(code(&too_many)["errors"][0]["code"], "TOOMANYREQUESTS");
    assert!(ok.status == 200 && ok.body == data);
    assert_eq!(
        reg.requests_matching("GET", "/blobs/sha256:"),
        gets_before + 1
    );

    // An upload refused with a 500: its body is read and discarded, so the same connection
    // carries the next request; the registry never saw the refused one.
    let puts_before = reg.requests_matching("PUT", "/blobs/uploads/");
    proxy.add_rule(FaultRule::new(status(500, None)).method("PUT"));
    let mut raw = RawConn::connect(&proxy.host());
    let target = "/v2/fp/other/blobs/uploads/00000000-0000-0000-0000-000000000000?_state=x";
    let refused = raw.exchange("PUT", target, &data[..MIB as usize], None);
    assert_eq!((refused.status, refused.header("retry-after")), (500, None));
    let after = raw.exchange("GET", &format!("/v2/fp/blob/blobs/{digest}"), b"", None);
    assert!(after.status == 200 && after.body == data);
    assert_eq!(reg.requests_matching("PUT", "/blobs/uploads/"), puts_before);
    let refused = &proxy.requests_matching("PUT", "/blobs/uploads/")[0];
    assert_eq!((refused.status, refused.request_body_bytes), (Some(500), 0));
}

#[test]
fn faultproxy_request_reset_cuts_the_upload_short() {
    let reg = Registry::plain();
    let proxy = FaultProxy::start(&reg.host()).unwrap();
    let data = random_bytes(6, PROXY_BLOB);
    let digest = layers::sha256_digest(&data);
    proxy.add_rule(
        FaultRule::new(Fault::ResetRequestAfter(MIB))
            .method("PATCH")
            .path("/blobs/uploads/"),
    );
    let url = proxy.url();
    let http_client = reg.http_client();
    let (location, cut) = support::block_on(async {
        let client = RegistryClient::with_parts(http_client.clone(), &url, None);
        let location = client.start_upload("fp/cut").await.unwrap();
        let body = Bytes::from(data.clone());
        let cut = http_client.patch(&location).body(body).send().await;
        (location, cut.map(|r| r.status()))
    });
    assert!(cut.is_err(), "the client saw the connection fail: {cut:?}");
    let patches = proxy.requests_matching("PATCH", "/blobs/uploads/");
    assert_eq!(patches[0].request_body_bytes, MIB);
    assert_eq!(patches[0].status, None);
    assert_eq!(patches[0].fault, Some(Fault::ResetRequestAfter(MIB)));

    // The registry read exactly the forwarded bytes, then EOF, and kept them in the session.
    let copied = wait_for_cut_patch(&reg);
    assert_eq!(copied, MIB);
    let uuid = location
        .split("/uploads/")
        .nth(1)
        .unwrap()
        .split('?')
        .next()
        .unwrap();
    let session = reg
        .storage_dir()
        .join("docker/registry/v2/repositories/fp/cut/_uploads")
        .join(uuid)
        .join("data");
    assert_eq!(fs_err::metadata(&session).unwrap().len(), MIB);

    // Distribution 2.8 then refuses the stale Location (its _state says offset 0) and drops
    // the session: a client cut off mid-PATCH has to start the upload over.
    let (stale, restarted) = support::block_on(async {
        let stale = http_client.get(&location).send().await.unwrap();
        let client = RegistryClient::with_parts(http_client.clone(), &url, None);
        let source = BlobSource::Bytes(Bytes::from(data.clone()));
        let restarted = client.push_blob("fp/cut", &digest, source).await.unwrap();
        (stale.status().as_u16(), restarted)
    });
    assert_eq!(stale, 404);
    assert_eq!(restarted, support::client::BlobOutcome::Uploaded);
    assert_eq!(reg.blob_uploads_completed(&digest), 1);
}

/// Waits until Distribution is done with the PATCH whose client went away (its status line,
/// logged after the session was flushed); returns how many body bytes it copied.
fn wait_for_cut_patch(reg: &Registry) -> u64 {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        let log = reg.log_text();
        let answered = reglog::requests(&log).iter().any(|r| r.method == "PATCH");
        let line = log
            .lines()
            .find(|l| l.contains("msg=\"client disconnected during blob PATCH\""));
        if let Some(line) = line.filter(|_| answered) {
            let pairs = reglog::parse_line(line);
            let copied = pairs.iter().find(|(k, _)| k == "copied").unwrap();
            return copied.1.parse().unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!(
        "the registry never logged the cut PATCH:\n{}",
        reg.log_text()
    );
}

#[tokio::test]
async fn faultproxy_stalls_and_delays_hold_the_response_back() {
    let (reg, proxy, data, digest) = proxied_blob(7);
    let url = format!("{}/v2/fp/blob/blobs/{digest}", proxy.url());
    let (stall, delay) = (Duration::from_millis(700), Duration::from_millis(400));
    let blobs = |fault| FaultRule::new(fault).path("/blobs/sha256:");
    proxy.add_rule(
        blobs(Fault::StallResponseAfter {
            after: 256 * 1024,
            stall,
        })
        .method("GET"),
    );
    proxy.add_rule(blobs(Fault::Delay(delay)).method("HEAD"));
    let http = reg.http_client();
    let stalled = fetch(&http, &url).await;
    assert_eq!((stalled.status, stalled.error), (200, None));
    assert!(stalled.body == data, "stalled body intact");
    assert!(stalled.elapsed >= stall, "{:?}", stalled.elapsed);
    let start = std::time::Instant::now();
    let head = http.head(&url).send().await.unwrap();
    assert_eq!(head.status(), 200);
    assert!(start.elapsed() >= delay, "{:?}", start.elapsed());
    assert_eq!(proxy.faults_fired(), 2);
    // Dropping the proxy inside a runtime is fine: it runs on its own thread.
    drop(proxy);
}

/// The WAN benchmark's link: each connection pays its handshake round trips once and one round
/// trip per request, and moves its bodies at no more than the cap, while a second connection
/// gets a cap of its own (a per-connection limit, not a shared line).
#[tokio::test]
async fn faultproxy_link_adds_round_trips_and_caps_each_connection() {
    let (reg, _plain, data, digest) = proxied_blob(8);
    let link = Link {
        rtt: Duration::from_millis(100),
        handshake_rtts: 2,
        bytes_per_sec: 2 << 20,
    };
    let proxy = FaultProxy::start_with_link(&reg.host(), link).unwrap();
    let url = format!("{}/v2/fp/blob/blobs/{digest}", proxy.url());
    // 3 MiB at 2 MiB/s is 1.5 s on the wire, plus three round trips: 1.8 s; two transfers
    // sharing one cap would take 3.3 s.
    let floor = Duration::from_millis(1500 + 300);
    let (http_a, http_b) = (reg.http_client(), reg.http_client());
    let start = std::time::Instant::now();
    let (a, b) = tokio::join!(fetch(&http_a, &url), fetch(&http_b, &url));
    let both = start.elapsed();
    for got in [&a, &b] {
        assert_eq!((got.status, got.error.as_deref()), (200, None));
        assert!(got.body == data, "shaped body intact");
        assert!(got.elapsed >= floor, "{:?} < {floor:?}", got.elapsed);
    }
    // Two connections in parallel take about as long as one: each has its own cap.
    assert!(
        both < Duration::from_millis(2600),
        "{both:?}: the cap is shared"
    );
    assert_eq!(proxy.connections(), 2);
    // A second request on a kept-alive connection pays one round trip, no handshake.
    let start = std::time::Instant::now();
    let head = http_a.head(&url).send().await.unwrap();
    assert_eq!(head.status(), 200);
    let took = start.elapsed();
    assert!(took >= link.rtt && took < link.rtt * 3, "{took:?}");
    assert_eq!(proxy.connections(), 2, "the connection was reused");
    // A TLS ClientHello (a client probing for HTTPS) is refused at once, with no round trips.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let start = std::time::Instant::now();
    let mut probe = tokio::net::TcpStream::connect(proxy.host()).await.unwrap();
    probe
        .write_all(&[0x16, 0x03, 0x01, 0x00, 0x05])
        .await
        .unwrap();
    let mut answer = Vec::new();
    let _ = probe.read_to_end(&mut answer).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    assert!(start.elapsed() < link.rtt, "{:?}", start.elapsed());
}
