//! A fault-injecting HTTP/1.1 proxy between the tool under test and a plain-HTTP registry on
//! loopback. A real registry cannot be told to cut the third blob download after 1 MiB, corrupt
//! one byte, stall, refuse with a 503 or lose half an upload; this proxy does so on cue, and it
//! counts the body bytes that really crossed it (what a resumed download or upload re-sent).
//!
//! Like [`super::token`], it is a hand-written HTTP/1.1 relay on a tokio runtime of its own
//! thread, so it works the same under `#[test]` and `#[tokio::test]` and needs no framework.
//! Each client request goes to the upstream on a fresh connection with `Connection: close`,
//! while the client's connection is kept alive across requests (reqwest and hyper pool them).
//! `Host` is forwarded unchanged: Distribution builds absolute upload `Location`s from it, so
//! they name the proxy and the follow-up `PATCH`/`PUT` come back through it.
//!
//! Bodies stream through 64 KiB buffers in both directions, whatever their size. Chunked bodies
//! are decoded and re-chunked (the framing is kept, chunk boundaries may differ), so every
//! offset here — fault offsets and byte counters alike — counts payload bytes after the head,
//! never chunk framing. Counters are bumped just before bytes are handed to the socket, so a
//! client that has received them never sees a counter lagging behind.
//!
//! Faults come from [`FaultRule`]s added at run time; see [`Fault`] for what each kind does.
//! Without a fault, a client connection is closed only when the client asked for it, when the
//! response is delimited by the upstream's close, or when the upstream answered before the
//! whole request body was forwarded (the rest is unread, so the connection is out of step).
//!
//! [`FaultProxy::start_with_link`] also shapes every connection like a long-distance link (see
//! [`Link`]): added round trips and a per-connection bandwidth cap, for the WAN benchmark.
//!
//! Here the faults, the proxy and its connections; `http.rs` reads and writes HTTP/1.1 (heads,
//! framing, the body relay that applies a fault's plan).

mod http;

use http::{
    read_final_head, relay_body, Framing, Plan, Reader, RelayError, Request, Response, Tally,
};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

/// Relay buffer size: memory per connection stays bounded whatever the body size.
const BUF_SIZE: usize = 64 * 1024;
/// Longest request or response head accepted.
const MAX_HEAD: usize = 64 * 1024;
/// Longest chunk-size or trailer line accepted.
const MAX_LINE: usize = 8 * 1024;
/// How long a closing connection keeps draining the client's unread bytes, so that the kernel
/// sends FIN rather than RST and the client reads everything sent before the close.
const LINGER: Duration = Duration::from_secs(2);

/// What a rule does to a request it fires on. Offsets count body payload bytes (see the module
/// doc). Faults that cut a body after `n` bytes act after the whole body when it is shorter;
/// a flip or stall past the end of the body does nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Answers without contacting the upstream: `status`, a distribution-style JSON error body
    /// (`TOOMANYREQUESTS` for 429, `UNAVAILABLE` otherwise) and `Retry-After` when given. The
    /// request body is read and discarded first, so the connection stays usable; only a request
    /// with `Expect: 100-continue` is answered at once and its connection closed.
    Status {
        /// The status code to answer.
        status: u16,
        /// `Retry-After` in seconds, if any.
        retry_after: Option<u64>,
    },
    /// Relays the response head and this many body bytes, then resets the client connection
    /// (TCP RST), as a network failure mid-download would. The RST discards bytes still in
    /// flight, so the client may receive fewer than this many.
    ResetResponseAfter(u64),
    /// Relays the response head (with its original framing) and this many body bytes, then
    /// closes the client connection cleanly (FIN): the client sees a short body.
    TruncateResponseAfter(u64),
    /// Relays the whole response with the body byte at this offset XORed with 0xFF.
    FlipResponseByte(u64),
    /// Relays `after` body bytes, sends nothing for `stall`, then relays the rest.
    StallResponseAfter {
        /// Body bytes relayed before the stall.
        after: u64,
        /// How long nothing is sent.
        stall: Duration,
    },
    /// Forwards this many request body bytes to the upstream, then resets the client connection
    /// and closes the upstream one: the upstream sees a cut body, as after a network failure.
    /// No response reaches the client. (Distribution 2.8 keeps the bytes it read in the upload
    /// session, then refuses the session's last `Location`, whose state still holds the old
    /// offset, with 404 `BLOB_UPLOAD_INVALID` and cancels it: the client has to start over.)
    ResetRequestAfter(u64),
    /// Waits this long before forwarding the request (a slow link or a slow upstream).
    Delay(Duration),
}

/// The shape of the link between the client and the proxy, applied to every connection: a pull
/// from a registry across an ocean. The default (all zero) relays at loopback speed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Link {
    /// Round-trip time: each request waits this long before it is forwarded (its head going out
    /// and the response's first byte coming back), and a new connection's first request
    /// waits `handshake_rtts` times this more.
    pub rtt: Duration,
    /// Round trips a new connection costs before it carries a request: 1 for TCP, 2 for TCP and
    /// TLS 1.3 (the proxy speaks plain HTTP; this stands in for the TLS handshake).
    pub handshake_rtts: u32,
    /// Body bytes per second each connection moves in each direction (0: no cap), as a TCP
    /// window over a long round trip limits one stream whatever the line's capacity.
    pub bytes_per_sec: u64,
}

/// When a [`Fault`] fires: the requests matching `method` and `path_contains`, after skipping
/// `skip` of them, for `times` of them. Build with [`FaultRule::new`] and the setters.
///
/// Rules are checked in the order added. Every rule that matches a request counts it (for its
/// `skip`); the first one that is due fires and only that one uses up one of its `times`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultRule {
    /// The method to match (case-insensitive); `None` matches any.
    pub method: Option<String>,
    /// A substring of the request target (path and query, raw or percent-decoded); empty
    /// matches any.
    pub path_contains: String,
    /// Matching requests to let through before firing.
    pub skip: usize,
    /// Matching requests to fire on (after `skip`); then the rule is spent.
    pub times: usize,
    /// What to do.
    pub fault: Fault,
}

impl FaultRule {
    /// A rule firing `fault` once, on the first request of any method and path.
    pub fn new(fault: Fault) -> Self {
        FaultRule {
            method: None,
            path_contains: String::new(),
            skip: 0,
            times: 1,
            fault,
        }
    }

    /// Only requests with `method`.
    pub fn method(mut self, method: &str) -> Self {
        self.method = Some(method.to_string());
        self
    }

    /// Only requests whose target contains `path_contains` (e.g. `/blobs/sha256:`).
    pub fn path(mut self, path_contains: &str) -> Self {
        self.path_contains = path_contains.to_string();
        self
    }

    /// Lets the first `n` matching requests through.
    pub fn skip(mut self, n: usize) -> Self {
        self.skip = n;
        self
    }

    /// Fires on `n` matching requests (default 1).
    pub fn times(mut self, n: usize) -> Self {
        self.times = n;
        self
    }

    /// Fires on every matching request after `skip`.
    pub fn always(self) -> Self {
        self.times(usize::MAX)
    }

    fn matches(&self, method: &str, target: &str, decoded: &str) -> bool {
        self.method
            .as_deref()
            .is_none_or(|m| m.eq_ignore_ascii_case(method))
            && (target.contains(&self.path_contains) || decoded.contains(&self.path_contains))
    }
}

/// One request the proxy received, as far as it got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxiedRequest {
    /// The request method.
    pub method: String,
    /// The request target as sent (path and query).
    pub path: String,
    /// The status sent to the client (relayed or injected); `None` before a head was sent or
    /// when none was (a reset request).
    pub status: Option<u16>,
    /// Request body bytes forwarded to the upstream.
    pub request_body_bytes: u64,
    /// Response body bytes relayed to the client (injected error bodies not included).
    pub response_body_bytes: u64,
    /// The fault that fired on this request, if any.
    pub fault: Option<Fault>,
}

/// A request's record while it is in flight; [`FaultProxy::requests`] snapshots it.
struct Live {
    method: String,
    path: String,
    fault: Option<Fault>,
    status: AtomicU32,
    request_bytes: AtomicU64,
    response_bytes: AtomicU64,
}

impl Live {
    fn snapshot(&self) -> ProxiedRequest {
        let status = self.status.load(Ordering::SeqCst);
        ProxiedRequest {
            method: self.method.clone(),
            path: self.path.clone(),
            status: (status != 0).then_some(status as u16),
            request_body_bytes: self.request_bytes.load(Ordering::SeqCst),
            response_body_bytes: self.response_bytes.load(Ordering::SeqCst),
            fault: self.fault.clone(),
        }
    }

    fn set_status(&self, status: u16) {
        self.status.store(u32::from(status), Ordering::SeqCst);
    }
}

struct ArmedRule {
    rule: FaultRule,
    seen: usize,
    fired: usize,
}

struct State {
    upstream: SocketAddr,
    link: Link,
    rules: Mutex<Vec<ArmedRule>>,
    records: Mutex<Vec<Arc<Live>>>,
    request_bytes: AtomicU64,
    response_bytes: AtomicU64,
    connections: AtomicUsize,
}

/// Proxy tasks never panic while holding a lock, but a test thread might: keep going then.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl State {
    /// The fault of the first due rule matching this request, using it up.
    fn take_fault(&self, method: &str, target: &str) -> Option<Fault> {
        let decoded = super::percent_decode(target, false);
        let mut fired = None;
        for armed in lock(&self.rules).iter_mut() {
            if !armed.rule.matches(method, target, &decoded) {
                continue;
            }
            armed.seen += 1;
            if fired.is_none() && armed.seen > armed.rule.skip && armed.fired < armed.rule.times {
                armed.fired += 1;
                fired = Some(armed.rule.fault.clone());
            }
        }
        fired
    }

    fn record(&self, req: &Request, fault: Option<Fault>) -> Arc<Live> {
        let live = Arc::new(Live {
            method: req.method.clone(),
            path: req.target.clone(),
            fault,
            status: AtomicU32::new(0),
            request_bytes: AtomicU64::new(0),
            response_bytes: AtomicU64::new(0),
        });
        lock(&self.records).push(live.clone());
        live
    }
}

/// A running proxy on `127.0.0.1:<ephemeral>` in front of one upstream; stops on drop (the
/// listener closes, connection tasks are aborted, the thread is joined).
pub struct FaultProxy {
    addr: SocketAddr,
    state: Arc<State>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl FaultProxy {
    /// Starts a proxy for `upstream`, the `127.0.0.1:PORT` of a plain-HTTP registry.
    pub fn start(upstream: &str) -> Result<FaultProxy> {
        Self::start_with_link(upstream, Link::default())
    }

    /// As [`Self::start`], with every client connection shaped as `link` says.
    pub fn start_with_link(upstream: &str, link: Link) -> Result<FaultProxy> {
        let upstream: SocketAddr = upstream
            .parse()
            .with_context(|| format!("fault proxy upstream {upstream:?} is not IP:PORT"))?;
        ensure!(upstream.ip().is_loopback(), "upstream must be on loopback");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").context("binding fault proxy")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            upstream,
            link,
            rules: Mutex::new(Vec::new()),
            records: Mutex::new(Vec::new()),
            request_bytes: AtomicU64::new(0),
            response_bytes: AtomicU64::new(0),
            connections: AtomicUsize::new(0),
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("fault proxy runtime")?;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let served = state.clone();
        let thread = std::thread::Builder::new()
            .name(format!("fault-proxy-{}", addr.port()))
            .spawn(move || runtime.block_on(accept_loop(listener, served, rx)))?;
        Ok(FaultProxy {
            addr,
            state,
            shutdown: Some(tx),
            thread: Some(thread),
        })
    }

    /// `127.0.0.1:PORT` of the proxy, to use in place of the upstream's host.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.addr.port())
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.host())
    }

    /// The upstream's `127.0.0.1:PORT`.
    pub fn upstream(&self) -> String {
        self.state.upstream.to_string()
    }

    /// Adds a rule, checked after those added before it.
    pub fn add_rule(&self, rule: FaultRule) {
        lock(&self.state.rules).push(ArmedRule {
            rule,
            seen: 0,
            fired: 0,
        });
    }

    /// Every request received since start or [`Self::reset_counters`], in arrival order.
    pub fn requests(&self) -> Vec<ProxiedRequest> {
        lock(&self.state.records)
            .iter()
            .map(|l| l.snapshot())
            .collect()
    }

    /// The requests with `method` (case-insensitive) whose target contains `path_contains`.
    pub fn requests_matching(&self, method: &str, path_contains: &str) -> Vec<ProxiedRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.method.eq_ignore_ascii_case(method) && r.path.contains(path_contains))
            .collect()
    }

    /// Request body bytes forwarded upstream for requests matching as in
    /// [`Self::requests_matching`].
    pub fn request_body_bytes(&self, method: &str, path_contains: &str) -> u64 {
        let matching = self.requests_matching(method, path_contains);
        matching.iter().map(|r| r.request_body_bytes).sum()
    }

    /// Response body bytes relayed to the client for requests matching as in
    /// [`Self::requests_matching`].
    pub fn response_body_bytes(&self, method: &str, path_contains: &str) -> u64 {
        let matching = self.requests_matching(method, path_contains);
        matching.iter().map(|r| r.response_body_bytes).sum()
    }

    /// All request body bytes forwarded upstream.
    pub fn total_request_body_bytes(&self) -> u64 {
        self.state.request_bytes.load(Ordering::SeqCst)
    }

    /// All response body bytes relayed to clients (injected error bodies not included).
    pub fn total_response_body_bytes(&self) -> u64 {
        self.state.response_bytes.load(Ordering::SeqCst)
    }

    /// Client connections accepted (so tests can tell reuse from reconnects).
    pub fn connections(&self) -> usize {
        self.state.connections.load(Ordering::SeqCst)
    }

    /// How many recorded requests a fault fired on.
    pub fn faults_fired(&self) -> usize {
        lock(&self.state.records)
            .iter()
            .filter(|l| l.fault.is_some())
            .count()
    }

    /// Zeroes the byte totals and the connection count and forgets the request records. Bytes
    /// of requests still in flight count in the totals again from here on, not in the records.
    pub fn reset_counters(&self) {
        lock(&self.state.records).clear();
        self.state.request_bytes.store(0, Ordering::SeqCst);
        self.state.response_bytes.store(0, Ordering::SeqCst);
        self.state.connections.store(0, Ordering::SeqCst);
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Serves connections until `stop` fires (or its sender is dropped), then aborts them all.
async fn accept_loop(
    listener: std::net::TcpListener,
    state: Arc<State>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("fault proxy: listener: {e}");
            return;
        }
    };
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => {
                while tasks.try_join_next().is_some() {}
                let Ok((stream, _)) = accepted else { continue };
                state.connections.fetch_add(1, Ordering::SeqCst);
                tasks.spawn(serve_client(stream, state.clone()));
            }
        }
    }
    tasks.abort_all();
}

/// How a client connection continues after a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// Read the next request.
    KeepAlive,
    /// Close cleanly (FIN), draining what the client still sends for a moment.
    Close,
    /// Abort with a TCP RST.
    Reset,
    /// The client is gone or unusable: just drop the socket.
    Drop,
}

/// The client side of a connection, split so a request body can be read while an interim
/// (`100 Continue`) response is written.
struct ClientConn {
    r: Reader<OwnedReadHalf>,
    w: OwnedWriteHalf,
}

impl ClientConn {
    async fn finish(mut self, end: End) {
        match end {
            End::Reset => {
                if let Ok(stream) = self.r.into_inner().reunite(self.w) {
                    // Closing with a zero linger time sends RST instead of FIN.
                    let _ = stream.set_zero_linger();
                }
            }
            End::Close => {
                if self.w.shutdown().await.is_ok() {
                    let _ = tokio::time::timeout(LINGER, self.r.drain()).await;
                }
            }
            End::KeepAlive | End::Drop => {}
        }
    }
}

async fn serve_client(stream: TcpStream, state: Arc<State>) {
    let _ = stream.set_nodelay(true);
    let (r, w) = stream.into_split();
    let mut client = ClientConn {
        r: Reader::new(r),
        w,
    };
    // A TLS client probing for HTTPS (skopeo with tls-verify off does, then falls back to HTTP)
    // is refused at once, as a plain registry refuses it; it costs no link round trips, since
    // against a TLS source it would not have probed.
    match client.r.first_byte().await {
        Ok(Some(b)) if !(b.is_ascii_alphabetic() || b == b'\r' || b == b'\n') => {
            let refused = write_local(&mut client.w, "GET", 400, "", "not HTTP", true);
            if refused.await.is_ok() {
                client.finish(End::Close).await;
            }
            return;
        }
        Ok(Some(_)) => {}
        Ok(None) | Err(_) => return,
    }
    let mut handshake = state.link.rtt * state.link.handshake_rtts;
    let end = loop {
        let head = match client.r.read_head().await {
            Ok(Some(head)) => head,
            Ok(None) | Err(_) => break End::Drop,
        };
        // The connection's handshakes, paid before its first request goes out.
        if !handshake.is_zero() {
            tokio::time::sleep(std::mem::take(&mut handshake)).await;
        }
        let Some(req) = Request::parse(&head) else {
            let _ = write_local(&mut client.w, "GET", 400, "", "malformed request", true).await;
            break End::Close;
        };
        match serve_request(&state, &req, &mut client).await {
            End::KeepAlive => continue,
            end => break end,
        }
    };
    client.finish(end).await;
}

/// One request: draw a fault, then answer it locally or forward it.
async fn serve_request(state: &State, req: &Request, client: &mut ClientConn) -> End {
    let fault = state.take_fault(&req.method, &req.target);
    let live = state.record(req, fault.clone());
    if !state.link.rtt.is_zero() {
        tokio::time::sleep(state.link.rtt).await;
    }
    let Some(framing) = req.framing() else {
        live.set_status(400);
        let _ = write_local(&mut client.w, &req.method, 400, "", "bad framing", true).await;
        return End::Close;
    };
    match &fault {
        Some(Fault::Status {
            status,
            retry_after,
        }) => return answer_injected(req, framing, client, &live, *status, *retry_after).await,
        Some(Fault::Delay(delay)) => tokio::time::sleep(*delay).await,
        _ => {}
    }
    let exchange = Exchange {
        state,
        req,
        live: &live,
        fault: fault.as_ref(),
    };
    exchange.forward(framing, client).await
}

/// Answers a [`Fault::Status`] without the upstream.
async fn answer_injected(
    req: &Request,
    framing: Framing,
    client: &mut ClientConn,
    live: &Live,
    status: u16,
    retry_after: Option<u64>,
) -> End {
    // A client expecting 100 Continue may never send its body, so it is answered at once and
    // the connection closed; any other client is sending it: discarding it keeps the
    // connection in step for the next request.
    let expect = req.expects_continue();
    if !expect {
        let mut sink = tokio::io::sink();
        let drained = relay_body(&mut client.r, framing, &mut sink, Plan::default(), None);
        if drained.await.is_err() {
            return End::Drop;
        }
    }
    let close = expect || req.wants_close();
    let code = if status == 429 {
        "TOOMANYREQUESTS"
    } else {
        "UNAVAILABLE"
    };
    let body =
        serde_json::json!({"errors": [{"code": code, "message": "injected by fault proxy"}]})
            .to_string();
    let extra = retry_after.map_or(String::new(), |s| format!("Retry-After: {s}\r\n"));
    live.set_status(status);
    let written = write_local(&mut client.w, &req.method, status, &extra, &body, close);
    match written.await {
        Ok(()) if close => End::Close,
        Ok(()) => End::KeepAlive,
        Err(_) => End::Drop,
    }
}

/// Writes a response the proxy makes up itself (JSON body, omitted for `HEAD`).
async fn write_local(
    w: &mut OwnedWriteHalf,
    method: &str,
    status: u16,
    extra_headers: &str,
    body: &str,
    close: bool,
) -> io::Result<()> {
    let reason = match status {
        400 => "Bad Request",
        408 => "Request Timeout",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Injected",
    };
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json; charset=utf-8\r\n\
         Content-Length: {}\r\nDocker-Distribution-Api-Version: registry/2.0\r\n{extra_headers}",
        body.len()
    );
    if close {
        out.push_str("Connection: close\r\n");
    }
    out.push_str("\r\n");
    if method != "HEAD" {
        out.push_str(body);
    }
    w.write_all(out.as_bytes()).await
}

/// What came of sending the request upstream while waiting for its response head.
enum Sent {
    /// The final response head, and whether the whole request body was forwarded.
    Head(Response, bool),
    /// The upstream failed before a response head.
    BadGateway,
    /// The exchange is over for this connection.
    End(End),
}

/// One forwarded request and what the proxy does to it.
struct Exchange<'a> {
    state: &'a State,
    req: &'a Request,
    live: &'a Live,
    fault: Option<&'a Fault>,
}

impl Exchange<'_> {
    async fn forward(&self, framing: Framing, client: &mut ClientConn) -> End {
        let Ok(upstream) = TcpStream::connect(self.state.upstream).await else {
            return self.bad_gateway(client).await;
        };
        let _ = upstream.set_nodelay(true);
        let (ur, mut uw) = upstream.into_split();
        let mut ur = Reader::new(ur);
        if uw.write_all(&self.req.upstream_head()).await.is_err() {
            return self.bad_gateway(client).await;
        }
        match self.send(framing, client, &mut ur, &mut uw).await {
            Sent::Head(resp, body_done) => {
                self.relay_response(resp, &mut ur, client, !body_done).await
            }
            Sent::BadGateway => self.bad_gateway(client).await,
            Sent::End(end) => end,
        }
    }

    /// Forwards the request body while reading the response head: the upstream may answer
    /// before it has read the whole body (an error), and must see a `100 Continue` relayed.
    async fn send(
        &self,
        framing: Framing,
        client: &mut ClientConn,
        ur: &mut Reader<OwnedReadHalf>,
        uw: &mut OwnedWriteHalf,
    ) -> Sent {
        let reset_at = match self.fault {
            Some(Fault::ResetRequestAfter(n)) => Some(*n),
            _ => None,
        };
        let plan = Plan {
            cut_at: reset_at,
            bytes_per_sec: self.state.link.bytes_per_sec,
            ..Plan::default()
        };
        let tally = Tally {
            total: &self.state.request_bytes,
            record: &self.live.request_bytes,
        };
        let upload = relay_body(&mut client.r, framing, uw, plan, Some(tally));
        let head = read_final_head(ur, &mut client.w);
        tokio::pin!(upload, head);
        let (mut uploading, mut body_done) = (true, false);
        loop {
            tokio::select! {
                biased;
                sent = &mut upload, if uploading => match sent {
                    Ok(_) if reset_at.is_some() => return Sent::End(End::Reset),
                    Ok(_) => (uploading, body_done) = (false, true),
                    Err(RelayError::Source) => return Sent::End(End::Drop),
                    // The upstream stopped reading; its response may still come.
                    Err(RelayError::Sink) => uploading = false,
                },
                head = &mut head => return match head {
                    Ok(resp) => Sent::Head(resp, body_done),
                    Err(_) => Sent::BadGateway,
                },
            }
        }
    }

    async fn relay_response(
        &self,
        resp: Response,
        ur: &mut Reader<OwnedReadHalf>,
        client: &mut ClientConn,
        body_unfinished: bool,
    ) -> End {
        let framing = resp.framing(&self.req.method);
        // An unread request body leaves the client connection out of step: close it.
        let close = body_unfinished || framing == Framing::UntilEof || self.req.wants_close();
        self.live.set_status(resp.status);
        if client.w.write_all(&resp.client_head(close)).await.is_err() {
            return End::Drop;
        }
        let tally = Tally {
            total: &self.state.response_bytes,
            record: &self.live.response_bytes,
        };
        let relayed = relay_body(
            ur,
            framing,
            &mut client.w,
            self.response_plan(),
            Some(tally),
        );
        match relayed.await {
            Err(RelayError::Sink) => End::Drop,
            // The upstream broke off: pass that on as a short body.
            Err(RelayError::Source) => End::Close,
            Ok(_) => match self.fault {
                Some(Fault::ResetResponseAfter(_)) => End::Reset,
                Some(Fault::TruncateResponseAfter(_)) => End::Close,
                _ if close => End::Close,
                _ => End::KeepAlive,
            },
        }
    }

    fn response_plan(&self) -> Plan {
        let mut plan = Plan {
            bytes_per_sec: self.state.link.bytes_per_sec,
            ..Plan::default()
        };
        match self.fault {
            Some(Fault::ResetResponseAfter(n) | Fault::TruncateResponseAfter(n)) => {
                plan.cut_at = Some(*n)
            }
            Some(Fault::FlipResponseByte(n)) => plan.flip_at = Some(*n),
            Some(Fault::StallResponseAfter { after, stall }) => plan.stall = Some((*after, *stall)),
            _ => {}
        }
        plan
    }

    /// Answers 502 and closes: the request body may be unread, so the connection is spent.
    async fn bad_gateway(&self, client: &mut ClientConn) -> End {
        self.live.set_status(502);
        let body =
            r#"{"errors":[{"code":"UNAVAILABLE","message":"fault proxy: upstream failed"}]}"#;
        let _ = write_local(&mut client.w, &self.req.method, 502, "", body, true).await;
        End::Close
    }
}
