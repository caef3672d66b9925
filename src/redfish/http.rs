//! One BMC's wire: every request goes through [`Transport::request`], which adds the
//! authentication (session token or Basic), records the call (method, path, status) and logs it,
//! retries connection errors and 5xx with backoff, logs in again once when a session expired,
//! and turns a failed handshake into a TLS error that says which trust refused what. Task
//! monitors (202 + Location) are followed here too.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use reqwest::header::HeaderMap;
use reqwest::Method;
use serde_json::Value;

use super::error::{BmcReason, RedfishError};
use super::tls::{format_fingerprint, Recorder};
use super::{Call, Options, Trust};
use crate::secret::Secret;

/// The most a BMC's answer may be, in bytes. A Redfish document (a service root, a system, a
/// task, an error) is a few KiB, a large collection a few hundred; 8 MiB is far beyond any, and
/// small enough that a BMC answering without end takes no more than this from the nodes booting
/// beside it. A larger Content-Length is refused before the body is read; a body of unknown
/// length is read as a stream and refused as soon as it passes this.
pub const ANSWER_MAX: u64 = 8 * 1024 * 1024;

/// Why one request gave no [`Answer`].
enum Failure {
    /// The request or the reading of its answer failed (connection, timeout, TLS).
    Http(reqwest::Error),
    /// The answer is larger than [`ANSWER_MAX`]; what was seen of its size.
    TooLarge(AnswerSize),
}

/// How large a refused answer was seen to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnswerSize {
    /// Its Content-Length said so; nothing of the body was read.
    Declared(u64),
    /// Its body (chunked, or of no stated length) passed the cap after this many bytes; the
    /// rest was not read.
    ReadPast(u64),
}

impl std::fmt::Display for AnswerSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AnswerSize::Declared(n) => write!(f, "declares a Content-Length of {n} bytes"),
            AnswerSize::ReadPast(n) => {
                write!(f, "came without a Content-Length and ran past {n} bytes")
            }
        }
    }
}

/// The body of `resp`, refused as soon as it is known to pass [`ANSWER_MAX`]: at once from its
/// Content-Length, else while it streams in, so no more than the cap (and one chunk) is held.
async fn read_capped(mut resp: reqwest::Response) -> Result<Bytes, Failure> {
    if let Some(declared) = resp.content_length() {
        if declared > ANSWER_MAX {
            return Err(Failure::TooLarge(AnswerSize::Declared(declared)));
        }
    }
    let expected = resp.content_length().unwrap_or(0) as usize;
    let mut body = bytes::BytesMut::with_capacity(expected);
    while let Some(chunk) = resp.chunk().await.map_err(Failure::Http)? {
        let seen = (body.len() + chunk.len()) as u64;
        if seen > ANSWER_MAX {
            return Err(Failure::TooLarge(AnswerSize::ReadPast(seen)));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

/// How the requests authenticate.
pub(crate) enum Auth {
    None,
    Basic {
        user: String,
        password: Secret,
    },
    Session {
        token: Secret,
        location: Option<String>,
    },
}

/// Which failures a request may be sent again after.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// Connection errors, timeouts and 5xx (reads, PATCHes, idempotent actions).
    Transient,
    /// Only when the request provably did not act: no connection made, or 503. For the
    /// reset, which must never happen twice.
    Unsent,
}

/// An answer of any status.
pub(crate) struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }
}

pub(crate) struct Transport {
    http: reqwest::Client,
    base: String,
    /// The BMC as errors name it: host[:port].
    pub bmc: String,
    pub opts: Options,
    pub auth: Mutex<Auth>,
    /// The credentials, kept to log in again when a session expires.
    pub login: Option<(String, Secret)>,
    pub sessions_path: Mutex<Option<String>>,
    calls: Mutex<Vec<Call>>,
    trust: Trust,
    recorder: Arc<Recorder>,
}

impl Transport {
    pub fn new(
        base: String,
        bmc: String,
        trust: &Trust,
        opts: Options,
        login: Option<(String, Secret)>,
    ) -> Result<Transport, RedfishError> {
        let (config, recorder) =
            super::tls::client_config(trust).map_err(|detail| RedfishError::Tls {
                bmc: bmc.clone(),
                trust: describe(trust),
                detail,
                actual: None,
                fix: fix(trust),
            })?;
        let http = reqwest::Client::builder()
            .user_agent(concat!("bootstrap/", env!("CARGO_PKG_VERSION")))
            .timeout(opts.timeout)
            .connect_timeout(opts.timeout)
            // BMCs close idle connections early; a short idle time avoids reusing a dead one.
            .pool_idle_timeout(Duration::from_secs(4))
            .redirect(reqwest::redirect::Policy::none())
            .http1_only()
            .tls_backend_preconfigured(config)
            .build()
            .map_err(|e| RedfishError::Unexpected {
                bmc: bmc.clone(),
                path: String::new(),
                what: format!("setting up the HTTP client: {e}"),
            })?;
        Ok(Transport {
            http,
            base,
            bmc,
            opts,
            auth: Mutex::new(Auth::None),
            login,
            sessions_path: Mutex::new(None),
            calls: Mutex::new(Vec::new()),
            trust: trust.clone(),
            recorder,
        })
    }

    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().expect("call log poisoned").clone()
    }

    /// Sends one request under the retry policy; any status comes back as an [`Answer`]
    /// (5xx only once the attempts are spent). A 401 under a session logs in again once.
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        if_match: Option<&str>,
        retry: Retry,
    ) -> Result<Answer, RedfishError> {
        let answer = self
            .follow(method.clone(), path, body, if_match, retry)
            .await?;
        let is_session = matches!(
            *self.auth.lock().expect("auth poisoned"),
            Auth::Session { .. }
        );
        if answer.status == 401 && is_session && self.login.is_some() {
            tracing::info!(bmc = %self.bmc, "redfish session refused; logging in again");
            if super::session::login(self).await.is_ok() {
                return self.follow(method, path, body, if_match, retry).await;
            }
        }
        Ok(answer)
    }

    /// [`Self::attempts`], following redirects within the BMC's own origin (sushy-tools sends
    /// a system named by its name to its UUID path with a 307); a redirect elsewhere is
    /// refused: the BMC's credentials go to the BMC alone.
    async fn follow(
        &self,
        mut method: Method,
        path: &str,
        body: Option<&Value>,
        if_match: Option<&str>,
        retry: Retry,
    ) -> Result<Answer, RedfishError> {
        let mut path = path.to_string();
        let mut body = body;
        for _ in 0..5 {
            let answer = self.attempts(&method, &path, body, if_match, retry).await?;
            if !matches!(answer.status, 301 | 302 | 303 | 307 | 308) {
                return Ok(answer);
            }
            let Some(location) = answer.header("location") else {
                return Ok(answer);
            };
            path = match location.strip_prefix(&self.base) {
                Some(rest) if rest.starts_with('/') => rest.to_string(),
                _ if location.starts_with('/') => location,
                _ => {
                    return Err(RedfishError::Unexpected {
                        bmc: self.bmc.clone(),
                        path,
                        what: format!(
                            "a redirect to {} (another origin: not followed, the BMC's credentials stay with the BMC)",
                            crate::secret::redact_url(&location)
                        ),
                    })
                }
            };
            if answer.status == 303
                || (answer.status != 307 && answer.status != 308 && method == Method::POST)
            {
                method = Method::GET;
                body = None;
            }
        }
        Err(RedfishError::Unexpected {
            bmc: self.bmc.clone(),
            path,
            what: "more than 5 redirects".to_string(),
        })
    }

    pub async fn attempts(
        &self,
        method: &Method,
        path: &str,
        body: Option<&Value>,
        if_match: Option<&str>,
        retry: Retry,
    ) -> Result<Answer, RedfishError> {
        let attempts = self.opts.attempts.max(1);
        let mut last_error = String::new();
        for attempt in 1..=attempts {
            if attempt > 1 {
                let factor = 1u32 << (attempt - 2).min(5);
                tokio::time::sleep((self.opts.backoff * factor).min(Duration::from_secs(30))).await;
            }
            match self.once(method, path, body, if_match).await {
                Ok(answer) => {
                    let again = match retry {
                        Retry::Transient => answer.status >= 500,
                        Retry::Unsent => answer.status == 503,
                    };
                    if !again || attempt == attempts {
                        return Ok(answer);
                    }
                    last_error = format!("answered {}", answer.status);
                }
                Err(Failure::TooLarge(size)) => {
                    // Not transient: the same answer would come again, as large.
                    return Err(RedfishError::AnswerTooLarge {
                        bmc: self.bmc.clone(),
                        method: method.to_string(),
                        path: path.to_string(),
                        size,
                        cap: ANSWER_MAX,
                    });
                }
                Err(Failure::Http(e)) => {
                    if let Some(refusal) = self.recorder.take() {
                        return Err(self.tls_error(refusal));
                    }
                    if let Some(detail) = handshake_failure(&e) {
                        return Err(RedfishError::Tls {
                            bmc: self.bmc.clone(),
                            trust: describe(&self.trust),
                            detail,
                            actual: None,
                            fix: "the BMC did not complete a TLS handshake: it may speak plain HTTP on this port (then the address is http://, without credentials), or share no TLS version or cipher suite with this client (TLS 1.2 or newer is needed: update the BMC's firmware or its TLS settings)".to_string(),
                        });
                    }
                    let again = match retry {
                        Retry::Transient => true,
                        Retry::Unsent => e.is_connect(),
                    };
                    last_error = error_chain(&e);
                    if !again {
                        return Err(self.unreachable(method, path, attempt, last_error));
                    }
                }
            }
        }
        Err(self.unreachable(method, path, attempts, last_error))
    }

    async fn once(
        &self,
        method: &Method,
        path: &str,
        body: Option<&Value>,
        if_match: Option<&str>,
    ) -> Result<Answer, Failure> {
        let mut req = self
            .http
            .request(method.clone(), format!("{}{}", self.base, path))
            .header("accept", "application/json")
            // sushy connector.py: a BMC offered compression may answer weak ETags it then
            // refuses; identity keeps the bodies (and their ETags) as they are.
            .header("accept-encoding", "identity")
            .header("odata-version", "4.0");
        req = match &*self.auth.lock().expect("auth poisoned") {
            Auth::None => req,
            Auth::Basic { user, password } => req.header(
                "authorization",
                format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD
                        .encode(format!("{user}:{}", password.expose()))
                ),
            ),
            Auth::Session { token, .. } => req.header("x-auth-token", token.expose()),
        };
        if let Some(tag) = if_match {
            req = req.header("if-match", tag);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let mut came = None;
        let result = async {
            let resp = req.send().await.map_err(Failure::Http)?;
            let status = resp.status().as_u16();
            came = Some(status);
            let headers = resp.headers().clone();
            let body = read_capped(resp).await?;
            Ok(Answer {
                status,
                headers,
                body,
            })
        }
        .await;
        // An answer refused for its size did come (its status is logged); a failed read did not.
        let status = match &result {
            Err(Failure::Http(_)) => None,
            _ => came,
        };
        tracing::info!(bmc = %self.bmc, method = %method, path, status, "redfish call");
        self.calls.lock().expect("call log poisoned").push(Call {
            method: method.to_string(),
            path: path.to_string(),
            status,
        });
        result
    }

    /// GET a resource: its JSON and ETag; an error status is an error.
    pub async fn get(&self, path: &str) -> Result<(Value, Option<String>), RedfishError> {
        let answer = self
            .request(Method::GET, path, None, None, Retry::Transient)
            .await?;
        let answer = self.check(&Method::GET, path, answer)?;
        let etag = answer.header("etag");
        match answer.json() {
            Value::Object(o) => Ok((Value::Object(o), etag)),
            _ => Err(RedfishError::Unexpected {
                bmc: self.bmc.clone(),
                path: path.to_string(),
                what: "the answer is not a JSON object".to_string(),
            }),
        }
    }

    /// PATCH with If-Match when an ETag is known (never on a POST: iDRAC answers 412). A 412 to
    /// a weak ETag is sent again with its strong form, and then (or at once, for a strong one)
    /// without If-Match, as sushy's `connector.py` `_etag_handler` does.
    pub async fn patch(
        &self,
        path: &str,
        body: &Value,
        etag: Option<&str>,
    ) -> Result<Answer, RedfishError> {
        let mut answer = self
            .request(Method::PATCH, path, Some(body), etag, Retry::Transient)
            .await?;
        if let (412, Some(tag)) = (answer.status, etag) {
            if let Some(strong) = strong_form(tag) {
                tracing::info!(bmc = %self.bmc, path, "412 to a weak ETag; sending its strong form");
                answer = self
                    .request(
                        Method::PATCH,
                        path,
                        Some(body),
                        Some(strong),
                        Retry::Transient,
                    )
                    .await?;
            }
            if answer.status == 412 {
                tracing::warn!(bmc = %self.bmc, path, "412 to the ETag; sending the PATCH without If-Match");
                answer = self
                    .request(Method::PATCH, path, Some(body), None, Retry::Transient)
                    .await?;
            }
        }
        let answer = self.check(&Method::PATCH, path, answer)?;
        self.follow_task(path, "PATCH", answer).await
    }

    /// POST an action (no If-Match), following a 202's task monitor to its end.
    pub async fn action(
        &self,
        path: &str,
        body: &Value,
        retry: Retry,
    ) -> Result<Answer, RedfishError> {
        let answer = self
            .request(Method::POST, path, Some(body), None, retry)
            .await?;
        let answer = self.check(&Method::POST, path, answer)?;
        self.follow_task(path, "POST", answer).await
    }

    /// An error status as an error carrying the BMC's reason; other answers pass.
    pub fn check(
        &self,
        method: &Method,
        path: &str,
        answer: Answer,
    ) -> Result<Answer, RedfishError> {
        if answer.status < 400 {
            return Ok(answer);
        }
        let reason = BmcReason::of(&answer.body);
        if answer.status == 401 && self.login.is_none() {
            return Err(RedfishError::CredentialsNeeded {
                bmc: self.bmc.clone(),
                method: method.to_string(),
                path: path.to_string(),
                message: reason.message,
            });
        }
        if answer.status == 401 {
            return Err(RedfishError::Unauthorized {
                bmc: self.bmc.clone(),
                method: method.to_string(),
                path: path.to_string(),
                message: reason.message,
            });
        }
        Err(RedfishError::Status {
            bmc: self.bmc.clone(),
            method: method.to_string(),
            path: path.to_string(),
            status: answer.status,
            message: reason.message,
            message_ids: reason.message_ids,
        })
    }

    /// A 202 with a Location is a task monitor: polled (Retry-After honoured, within
    /// `Options.task_timeout`) until it answers something else than 202 and its TaskState (or
    /// Dell JobState) is final. A failed task is an error with its messages; one still unfinished
    /// when the bound runs out is [`RedfishError::TaskTimeout`] with its last state and message.
    pub async fn follow_task(
        &self,
        request_path: &str,
        method: &str,
        first: Answer,
    ) -> Result<Answer, RedfishError> {
        if first.status != 202 {
            return Ok(first);
        }
        let Some(location) = first.header("location").map(|l| path_of(&l)) else {
            return Ok(first);
        };
        let what = format!("{method} {request_path}");
        let started = Instant::now();
        let mut wait = retry_after(&first).unwrap_or(self.opts.poll);
        let mut last = ("202 Accepted".to_string(), None);
        loop {
            // The last poll is made at the bound itself: a task may end just then.
            let left = self.opts.task_timeout.saturating_sub(started.elapsed());
            if left.is_zero() {
                return Err(RedfishError::TaskTimeout {
                    bmc: self.bmc.clone(),
                    task: location,
                    what: what.into(),
                    state: last.0,
                    message: last.1,
                    waited_secs: started.elapsed().as_secs(),
                });
            }
            tokio::time::sleep(wait.min(left)).await;
            let answer = self
                .request(Method::GET, &location, None, None, Retry::Transient)
                .await?;
            let answer = self.check(&Method::GET, &location, answer)?;
            let body = answer.json();
            let state = body
                .get("TaskState")
                .or_else(|| body.get("JobState"))
                .and_then(Value::as_str)
                .map(str::to_string);
            match state.as_deref() {
                Some("Exception" | "Killed" | "Cancelled" | "Failed" | "CompletedWithErrors") => {
                    return Err(RedfishError::TaskFailed {
                        bmc: self.bmc.clone(),
                        path: location,
                        what,
                        state: state.unwrap_or_default(),
                        messages: task_messages(&body),
                    });
                }
                Some("Completed") => return Ok(answer),
                None if answer.status != 202 => return Ok(answer),
                _ => {}
            }
            let messages = task_messages(&body);
            last = (
                match &state {
                    Some(s) => format!("{s} ({})", answer.status),
                    None => format!("unfinished ({} with no TaskState)", answer.status),
                },
                messages.last().cloned(),
            );
            wait = retry_after(&answer).unwrap_or(self.opts.poll);
        }
    }

    fn unreachable(
        &self,
        method: &Method,
        path: &str,
        attempts: u32,
        detail: String,
    ) -> RedfishError {
        RedfishError::Unreachable {
            bmc: self.bmc.clone(),
            method: method.to_string(),
            path: path.to_string(),
            attempts,
            detail,
        }
    }

    fn tls_error(&self, refusal: super::tls::Refusal) -> RedfishError {
        let actual = format_fingerprint(&refusal.actual);
        match &self.trust {
            Trust::Fingerprint(pin) => RedfishError::FingerprintMismatch {
                bmc: self.bmc.clone(),
                expected: format_fingerprint(pin),
                actual,
            },
            trust => RedfishError::Tls {
                bmc: self.bmc.clone(),
                trust: describe(trust),
                detail: refusal.detail,
                actual: Some(actual),
                fix: fix(trust),
            },
        }
    }
}

/// What a trust is, for messages.
pub(crate) fn describe(trust: &Trust) -> String {
    match trust {
        Trust::System => {
            "the system's CA certificates (the inventory sets no nodes[].bmc.ca or fingerprint)"
                .to_string()
        }
        Trust::Ca(_) => "the CA of nodes[].bmc.ca".to_string(),
        Trust::Fingerprint(pin) => format!("the pinned fingerprint {}", format_fingerprint(pin)),
        Trust::Insecure => "nothing (insecureSkipTLSVerify)".to_string(),
    }
}

fn fix(trust: &Trust) -> String {
    match trust {
        Trust::System => "set nodes[].bmc.ca to the CA (PEM) that signed the BMC's certificate, or pin the certificate with nodes[].bmc.fingerprint (its SHA-256, openssl x509 -noout -fingerprint -sha256), or, knowingly, insecureSkipTLSVerify: true".to_string(),
        Trust::Ca(_) => "check that nodes[].bmc.ca is the CA that signed this BMC's certificate and that the certificate names the host of nodes[].bmc.address; or pin the certificate with nodes[].bmc.fingerprint".to_string(),
        Trust::Fingerprint(_) => "pin the BMC's current certificate in nodes[].bmc.fingerprint after checking it".to_string(),
        Trust::Insecure => "the BMC may speak only TLS versions or suites this client refuses (TLS 1.2 or newer is needed)".to_string(),
    }
}

/// `"x"` of a weak ETag `W/"x"`; `None` for a strong one.
fn strong_form(etag: &str) -> Option<&str> {
    let strong = etag.trim().strip_prefix("W/")?;
    (strong.len() >= 2 && strong.starts_with('"') && strong.ends_with('"')).then_some(strong)
}

/// The path (and query) of a Location, which may be a full URL.
pub(crate) fn path_of(location: &str) -> String {
    match reqwest::Url::parse(location) {
        Ok(url) => match url.query() {
            Some(q) => format!("{}?{q}", url.path()),
            None => url.path().to_string(),
        },
        Err(_) => location.to_string(),
    }
}

/// Retry-After in seconds, bounded to a minute (a BMC asking for an hour gets polled anyway).
fn retry_after(answer: &Answer) -> Option<Duration> {
    let secs: u64 = answer.header("retry-after")?.trim().parse().ok()?;
    Some(Duration::from_secs(secs.min(60)))
}

fn task_messages(body: &Value) -> Vec<String> {
    let mut out: Vec<String> = body
        .get("Messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|m| m.get("Message").and_then(Value::as_str))
        .map(|m| crate::secret::server_text(m, 300))
        .collect();
    if let Some(m) = body.get("Message").and_then(Value::as_str) {
        out.push(crate::secret::server_text(m, 300));
    }
    out
}

/// The rustls error inside a failed request, if the handshake is what failed.
fn handshake_failure(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(cause) = next {
        if let Some(tls) = cause.downcast_ref::<rustls::Error>() {
            return Some(tls.to_string());
        }
        next = match cause.downcast_ref::<std::io::Error>() {
            Some(io) => io
                .get_ref()
                .map(|inner| inner as &(dyn std::error::Error + 'static)),
            None => cause.source(),
        };
    }
    None
}

/// An error and its causes on one line, looking inside `io::Error`s (whose `source` skips the
/// error they wrap).
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut next = e.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        next = match cause.downcast_ref::<std::io::Error>() {
            Some(io) => io
                .get_ref()
                .map(|inner| inner as &(dyn std::error::Error + 'static)),
            None => cause.source(),
        };
    }
    parts.join(": ")
}
