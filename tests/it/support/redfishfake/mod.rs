//! A Redfish fake with Dell iDRAC's behaviours that the sushy-tools emulator lacks (issue 13 item
//! 6), each behind a switch: virtual media under the manager (`Managers/iDRAC.Embedded.1/
//! VirtualMedia/CD`, firmware before 6.00.02) or under the system (`Systems/System.Embedded.1/
//! VirtualMedia/1`, after), 412 to If-Match on any action POST, InsertMedia answered
//! `ActionParameterMissing` until `TransferProtocolType` is given, 202 task monitors, a `Boot`
//! only writable through `@Redfish.Settings` (iDRAC10), a standard boot PATCH refused so that
//! only the OEM `ImportSystemConfiguration` works, a session service (or none), 409 to `On` when
//! on and to `ForceRestart` when off, as iDRAC answers, and 5xx on cue.
//!
//! It is a hand-written HTTP/1.1 responder (one request per connection, `Connection: close`), over
//! TLS with a [`TestPki`] or plain, on a tokio runtime of its own thread, like the token server.
//! Every request is recorded (method, path, how it authenticated, If-Match, body, status) so a
//! test can prove what was and was not sent.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result};
use base64::Engine as _;
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::tls::TestPki;

mod logs;
mod resources;
mod vendors;

pub use vendors::FakeVendor;

/// The service root.
pub const ROOT: &str = "/redfish/v1/";
const SYSTEMS: &str = "/redfish/v1/Systems";
/// The system's path, as iDRAC names it.
pub const SYSTEM: &str = "/redfish/v1/Systems/System.Embedded.1";
/// The manager's path, as iDRAC names it.
pub const MANAGER: &str = "/redfish/v1/Managers/iDRAC.Embedded.1";
/// The system's settings object (`@Redfish.Settings`).
pub const SETTINGS: &str = "/redfish/v1/Systems/System.Embedded.1/Settings";
/// The virtual CD on firmware before 6.00.02.
pub const MANAGER_CD: &str = "/redfish/v1/Managers/iDRAC.Embedded.1/VirtualMedia/CD";
/// The virtual CD on firmware 6.00.02 and later.
pub const SYSTEM_CD: &str = "/redfish/v1/Systems/System.Embedded.1/VirtualMedia/1";
/// The reset action.
pub const RESET: &str = "/redfish/v1/Systems/System.Embedded.1/Actions/ComputerSystem.Reset";
/// Dell's OEM import action.
pub const IMPORT: &str =
    "/redfish/v1/Managers/iDRAC.Embedded.1/Actions/Oem/EID_674_Manager.ImportSystemConfiguration";
/// Where sessions are made.
pub const SESSIONS: &str = "/redfish/v1/SessionService/Sessions";
const RESET_INFO: &str = "/redfish/v1/Systems/System.Embedded.1/ResetActionInfo";
const TASKS: &str = "/redfish/v1/TaskService/Tasks/";

/// Where the virtual media live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MediaUnder {
    /// `Managers/iDRAC.Embedded.1/VirtualMedia` (older firmware).
    Manager,
    /// `Systems/System.Embedded.1/VirtualMedia` (newer firmware, iDRAC10).
    System,
}

/// The fake's behaviours. [`Default`] is a plain newer iDRAC: media under the system, a session
/// service, ETags, iDRAC's reset values, powered off, `root`/`calvin`.
#[derive(Clone, Debug)]
pub struct Switches {
    /// Where the virtual media are.
    pub media_under: MediaUnder,
    /// A SessionService (else only Basic works).
    pub session_service: bool,
    /// ETags on resources (and If-Match checked on PATCH).
    pub etags: bool,
    /// The media have the InsertMedia/EjectMedia actions (else only PATCH).
    pub media_actions: bool,
    /// InsertMedia answers ActionParameterMissing until TransferProtocolType is given.
    pub insert_needs_protocol: bool,
    /// InsertMedia answers a GeneralError naming TransferMethod until it is given.
    pub insert_needs_method: bool,
    /// The image inserted at start.
    pub inserted: Option<String>,
    /// Boot is read-only on the system and written through `@Redfish.Settings`.
    pub boot_via_settings: bool,
    /// A standard boot PATCH is refused; only the OEM import sets it.
    pub boot_oem_only: bool,
    /// A boot PATCH is answered 204 and changes nothing (a broken firmware).
    pub boot_ignored: bool,
    /// Resets answer 202 with a task monitor.
    pub reset_task: bool,
    /// How many times a task monitor answers 202 before it completes.
    pub task_polls: u32,
    /// `Retry-After` of the task monitor's 202s, in seconds.
    pub task_retry_after: Option<u32>,
    /// The task ends in Exception with this message.
    pub task_fails: Option<String>,
    /// `ResetType@Redfish.AllowableValues`; `None`: not advertised.
    pub reset_allowed: Option<Vec<String>>,
    /// Advertise the reset values through an ActionInfo instead.
    pub reset_action_info: bool,
    /// `(method, path, n)`: the first n such requests answer 500.
    pub server_errors: Vec<(String, String, u32)>,
    /// Powered on at start.
    pub powered_on: bool,
    /// How many system GETs show PoweringOn after an `On`.
    pub powering_on_reads: u32,
    /// Systems in the collection (the second is `System.Embedded.2`).
    pub systems: u32,
    /// The BMC user.
    pub user: String,
    /// Its password.
    pub password: String,
    /// The NICs' MACs, as iDRAC writes them (upper case).
    pub macs: Vec<String>,
    /// Whose BMC this is: its identity, its quirks, and what it boots (`vendors.rs`).
    pub vendor: FakeVendor,
    /// A PATCH with a weak `W/"n"` If-Match answers 412; the strong `"n"` passes.
    pub weak_etag_refused: bool,
    /// A PATCH with any If-Match answers 412.
    pub if_match_refused: bool,
    /// The first n `On` resets answer 409 `ActionParameterValueConflict` (power settling).
    pub on_conflicts: u32,
    /// `(MessageId, n)`: the first n OEM imports are refused with it (`RAC0679`, `LC068`).
    pub import_busy: Option<(String, u32)>,
    /// The CD reads `Inserted` with this image while nothing is attached, as iDRAC keeps a
    /// stale `Inserted`/`Image` after an eject (ironic ejects and inserts again every time); an
    /// EjectMedia is refused (`VRM0009`, nothing connected) and leaves it stale; an InsertMedia
    /// attaches and clears it.
    pub stale_media: Option<String>,
    /// `(path, how)`: a GET of path is answered 200 with a body no Redfish client should hold
    /// (issue 28: a 3 GiB service root took 6 GiB of memory), generated as it is written.
    pub oversized: Vec<(String, Oversize)>,
    /// The manager offers iDRAC's log services (`Lclog`, `Sel`) with this many entries each.
    pub log_entries: Option<u32>,
}

/// A hostile answer's size, its bytes generated lazily (64 KiB of spaces, written again and
/// again: a few KiB of memory here whatever the size).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Oversize {
    /// `Content-Length: n`, then as many bytes as the client will take.
    Declared(u64),
    /// `Transfer-Encoding: chunked`, chunks without end (until the client hangs up or the
    /// connection's 30 s run out).
    EndlessChunks,
}

impl Default for Switches {
    fn default() -> Self {
        Switches {
            media_under: MediaUnder::System,
            session_service: true,
            etags: true,
            media_actions: true,
            insert_needs_protocol: false,
            insert_needs_method: false,
            inserted: None,
            boot_via_settings: false,
            boot_oem_only: false,
            boot_ignored: false,
            reset_task: false,
            task_polls: 0,
            task_retry_after: None,
            task_fails: None,
            reset_allowed: Some(
                [
                    "On",
                    "ForceOff",
                    "ForceRestart",
                    "GracefulRestart",
                    "GracefulShutdown",
                    "PushPowerButton",
                    "Nmi",
                    "PowerCycle",
                ]
                .map(String::from)
                .to_vec(),
            ),
            reset_action_info: false,
            server_errors: Vec::new(),
            powered_on: false,
            powering_on_reads: 0,
            systems: 1,
            user: "root".to_string(),
            password: "calvin".to_string(),
            macs: vec![
                "B0:7B:25:00:00:01".to_string(),
                "B0:7B:25:00:00:02".to_string(),
            ],
            vendor: FakeVendor::Dell,
            weak_etag_refused: false,
            if_match_refused: false,
            on_conflicts: 0,
            import_busy: None,
            stale_media: None,
            oversized: Vec::new(),
            log_entries: None,
        }
    }
}

/// One request the fake answered.
#[derive(Clone, Debug)]
pub struct Request {
    /// HTTP method.
    pub method: String,
    /// Path.
    pub path: String,
    /// An `Authorization: Basic` header came with it.
    pub basic: bool,
    /// An `X-Auth-Token` header came with it.
    pub token: bool,
    /// Its If-Match header.
    pub if_match: Option<String>,
    /// Its Accept-Encoding header.
    pub accept_encoding: Option<String>,
    /// Its JSON body (Null when none).
    pub body: Value,
    /// The status answered.
    pub status: u16,
}

/// What the fake's system looks like now.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// `PowerState`.
    pub power: String,
    /// The CD's `Inserted`.
    pub inserted: bool,
    /// The CD's `Image`.
    pub image: Option<String>,
    /// The system's `Boot.BootSourceOverrideTarget`.
    pub boot_target: String,
    /// The system's `Boot.BootSourceOverrideEnabled`.
    pub boot_enabled: String,
    /// The resets done (`ResetType`s).
    pub resets: Vec<String>,
    /// What the server started from at each reset that started it: `iso` (the virtual CD
    /// with an image), or what a real BMC of this vendor boots instead (`physical-cd`, `disk`).
    pub booted: Vec<String>,
    /// Sessions made.
    pub sessions_created: usize,
    /// Sessions still open.
    pub sessions_open: usize,
}

struct Task {
    polls_left: u32,
    effect: Effect,
}

#[derive(Clone)]
enum Effect {
    None,
    BootCdOnce,
}

/// What the second virtual media member of an iDRAC 10 holds (it accepts an image and never
/// boots it).
#[derive(Clone, Debug, Default)]
struct Slot {
    inserted: bool,
    image: Option<String>,
}

struct State {
    sw: Switches,
    generation: u64,
    power: String,
    powering_reads: u32,
    inserted: bool,
    image: Option<String>,
    boot: (String, String),
    pending_boot: Option<(String, String)>,
    resets: Vec<String>,
    booted: Vec<String>,
    /// Dell's one-time virtual-CD boot, set by the OEM import's job.
    oem_virtual_cd: bool,
    /// The boot mode came with the last boot PATCH (AMI wants it).
    boot_mode_sent: bool,
    slot2: Slot,
    on_conflicts_left: u32,
    import_busy_left: u32,
    /// What the CD reads while nothing is attached ([`Switches::stale_media`]).
    stale: Option<String>,
    patches_seen: u32,
    sessions: HashMap<String, String>,
    sessions_created: usize,
    tasks: HashMap<String, Task>,
    next_id: u64,
    errors_left: HashMap<(String, String), u32>,
    requests: Vec<Request>,
}

/// A running fake on `127.0.0.1:<ephemeral>`; stops on drop.
pub struct RedfishFake {
    addr: SocketAddr,
    tls: bool,
    state: Arc<Mutex<State>>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl RedfishFake {
    /// Starts the fake with `sw`; over TLS with `pki`'s server certificate when given.
    pub fn start(sw: Switches, pki: Option<&TestPki>) -> Result<Self> {
        let acceptor = match pki {
            Some(p) => Some(tokio_rustls::TlsAcceptor::from(Arc::new(
                p.rustls_server_config()?,
            ))),
            None => None,
        };
        let listener = std::net::TcpListener::bind("127.0.0.1:0").context("binding the fake")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let errors_left = sw
            .server_errors
            .iter()
            .map(|(m, p, n)| ((m.clone(), p.clone()), *n))
            .collect();
        let on_conflicts_left = sw.on_conflicts;
        let import_busy_left = sw.import_busy.as_ref().map_or(0, |b| b.1);
        let state = Arc::new(Mutex::new(State {
            power: if sw.powered_on { "On" } else { "Off" }.to_string(),
            inserted: sw.inserted.is_some(),
            image: sw.inserted.clone(),
            stale: sw.stale_media.clone(),
            sw,
            generation: 1,
            powering_reads: 0,
            boot: ("None".to_string(), "Disabled".to_string()),
            pending_boot: None,
            resets: Vec::new(),
            booted: Vec::new(),
            oem_virtual_cd: false,
            boot_mode_sent: false,
            slot2: Slot::default(),
            on_conflicts_left,
            import_busy_left,
            patches_seen: 0,
            sessions: HashMap::new(),
            sessions_created: 0,
            tasks: HashMap::new(),
            next_id: 1,
            errors_left,
            requests: Vec::new(),
        }));
        let (tx, mut rx) = tokio::sync::oneshot::channel::<()>();
        let served = state.clone();
        let thread = std::thread::Builder::new()
            .name(format!("redfish-fake-{}", addr.port()))
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("redfish fake runtime");
                rt.block_on(async move {
                    let listener =
                        tokio::net::TcpListener::from_std(listener).expect("fake listener");
                    loop {
                        tokio::select! {
                            _ = &mut rx => break,
                            accepted = listener.accept() => {
                                let Ok((stream, _)) = accepted else { continue };
                                let acceptor = acceptor.clone();
                                let state = served.clone();
                                tokio::spawn(async move {
                                    let work = async {
                                        match acceptor {
                                            Some(a) => match a.accept(stream).await {
                                                Ok(tls) => serve(tls, &state).await,
                                                Err(_) => Ok(()),
                                            },
                                            None => serve(stream, &state).await,
                                        }
                                    };
                                    let _ = tokio::time::timeout(Duration::from_secs(30), work).await;
                                });
                            }
                        }
                    }
                });
            })?;
        Ok(RedfishFake {
            addr,
            tls: pki.is_some(),
            state,
            shutdown: Some(tx),
            thread: Some(thread),
        })
    }

    /// `https://127.0.0.1:PORT` (or `http://` without TLS).
    pub fn address(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// `127.0.0.1:PORT`, as the client names the BMC.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    /// Every request answered so far.
    pub fn requests(&self) -> Vec<Request> {
        self.state.lock().unwrap().requests.clone()
    }

    /// How many `method path` requests were answered.
    pub fn count(&self, method: &str, path: &str) -> usize {
        self.requests()
            .iter()
            .filter(|r| r.method == method && r.path == path)
            .count()
    }

    /// The system's state now.
    pub fn snapshot(&self) -> Snapshot {
        let s = self.state.lock().unwrap();
        Snapshot {
            power: s.power.clone(),
            inserted: s.inserted,
            image: s.image.clone(),
            boot_target: s.boot.0.clone(),
            boot_enabled: s.boot.1.clone(),
            resets: s.resets.clone(),
            booted: s.booted.clone(),
            sessions_created: s.sessions_created,
            sessions_open: s.sessions.len(),
        }
    }
}

impl Drop for RedfishFake {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A parsed request.
struct Incoming {
    method: String,
    path: String,
    headers: HashMap<String, String>,
    body: Vec<u8>,
}

/// An answer: status, extra headers, JSON body (Null: none).
struct Reply {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: Value,
}

fn reply(status: u16, body: Value) -> Reply {
    Reply {
        status,
        headers: Vec::new(),
        body,
    }
}

/// A Redfish error body, as iDRAC writes them.
fn error(status: u16, message_id: &str, message: &str, related: &[&str]) -> Reply {
    reply(
        status,
        json!({"error": {
            "code": "Base.1.12.GeneralError",
            "message": "A general error has occurred. See ExtendedInfo for more information",
            "@Message.ExtendedInfo": [{
                "MessageId": message_id,
                "Message": message,
                "RelatedProperties": related,
                "Severity": "Warning",
                "Resolution": "See the message",
            }]
        }}),
    )
}

async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    state: &Mutex<State>,
) -> std::io::Result<()> {
    let Some(req) = read_request(&mut stream).await? else {
        return Ok(());
    };
    let answer = {
        let mut s = state.lock().unwrap();
        let answer = s.handle(&req);
        let record = Request {
            method: req.method.clone(),
            path: req.path.clone(),
            basic: req
                .headers
                .get("authorization")
                .is_some_and(|a| a.starts_with("Basic ")),
            token: req.headers.contains_key("x-auth-token"),
            if_match: req.headers.get("if-match").cloned(),
            accept_encoding: req.headers.get("accept-encoding").cloned(),
            body: serde_json::from_slice(&req.body).unwrap_or(Value::Null),
            status: answer.status,
        };
        s.requests.push(record);
        answer
    };
    let oversize = {
        let s = state.lock().unwrap();
        s.sw.oversized
            .iter()
            .find(|(p, _)| req.method == "GET" && *p == req.path)
            .map(|(_, how)| *how)
    };
    if let Some(how) = oversize {
        return write_oversized(&mut stream, how).await;
    }
    let body = if answer.body.is_null() {
        String::new()
    } else {
        answer.body.to_string()
    };
    let mut head = format!(
        "HTTP/1.1 {} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        answer.status,
        body.len()
    );
    for (k, v) in &answer.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.flush().await?;
    stream.shutdown().await
}

/// Writes an [`Oversize`] answer; ends when the client stops reading (a write fails).
async fn write_oversized<S: AsyncWrite + Unpin>(
    stream: &mut S,
    how: Oversize,
) -> std::io::Result<()> {
    let block = vec![b' '; 64 * 1024];
    let framing = match how {
        Oversize::Declared(n) => format!("Content-Length: {n}"),
        Oversize::EndlessChunks => "Transfer-Encoding: chunked".to_string(),
    };
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{framing}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await?;
    match how {
        Oversize::Declared(mut left) => {
            while left > 0 {
                let n = left.min(block.len() as u64) as usize;
                stream.write_all(&block[..n]).await?;
                left -= n as u64;
            }
        }
        Oversize::EndlessChunks => loop {
            stream
                .write_all(format!("{:x}\r\n", block.len()).as_bytes())
                .await?;
            stream.write_all(&block).await?;
            stream.write_all(b"\r\n").await?;
        },
    }
    stream.flush().await?;
    stream.shutdown().await
}

async fn read_request<S: AsyncRead + Unpin>(stream: &mut S) -> std::io::Result<Option<Incoming>> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos;
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 || buf.len() > 64 * 1024 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let method = first.next().unwrap_or_default().to_string();
    let path = first.next().unwrap_or_default().to_string();
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .get("content-length")
        .and_then(|l| l.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Ok(Some(Incoming {
        method,
        path,
        headers,
        body,
    }))
}
