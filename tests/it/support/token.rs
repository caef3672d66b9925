//! The token realm of [`crate::support::Registry::tls_token`]: a minimal Docker token server
//! (the "Bearer token" flow of the distribution auth spec) that checks Basic credentials and
//! issues ES256 JWTs which Distribution 2.8 validates against its `rootcertbundle`.
//!
//! It serves HTTPS with the registry's per-run CA, as real realms (Quay, Harbor, GitLab) do, so a
//! client must trust the private CA for the realm too. It is a hand-written HTTP/1.1 responder
//! (one `GET /token` request per connection, `Connection: close`) on a tokio runtime of its own
//! thread: the protocol needs nothing more, it keeps the harness free of a web framework, and it
//! runs the same under `#[test]` and `#[tokio::test]`.
//!
//! Tokens: header `{"typ":"JWT","alg":"ES256","kid":<libtrust key ID of the signer>}`; claims
//! `iss`, `sub` (the user, empty when anonymous), `aud` (= the registry's service), `exp`, `nbf`,
//! `iat`, `jti`, and `access` granting exactly the actions each requested scope asked for (none
//! at all to an anonymous caller). The response carries `token` and `access_token`,
//! `expires_in` and `issued_at`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::EcdsaKeyPair;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::tls::TestPki;

/// Distribution's clock-skew allowance on `exp` and `nbf` (`token.Leeway`, 60 s in 2.8).
pub const DISTRIBUTION_LEEWAY: Duration = Duration::from_secs(60);

/// What the token server accepts and how long its tokens live.
#[derive(Clone, Debug)]
pub struct TokenConfig {
    /// The one user it knows.
    pub user: String,
    /// That user's password.
    pub password: String,
    /// The registry's `auth.token.service`; the tokens' audience.
    pub service: String,
    /// The registry's `auth.token.issuer`; the tokens' issuer.
    pub issuer: String,
    /// Token lifetime; `expires_in` in the response.
    pub ttl: Duration,
    /// When true, `exp` is set [`DISTRIBUTION_LEEWAY`] early so that the registry stops
    /// accepting a token exactly `ttl` after it was issued (Distribution accepts a token until
    /// `exp + 60 s`). When false, `exp = iat + ttl`, as an ordinary token server would write.
    pub exact_expiry: bool,
}

/// One request the token server answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenRequest {
    /// HTTP method.
    pub method: String,
    /// The Basic user name, if credentials were sent.
    pub user: Option<String>,
    /// The `service` query parameter, if sent.
    pub service: Option<String>,
    /// Every scope asked for (`scope` parameters, space-separated ones split).
    pub scopes: Vec<String>,
    /// The status answered: 200 (token issued), 401 (bad credentials), 4xx otherwise.
    pub status: u16,
}

struct State {
    config: TokenConfig,
    signer: EcdsaKeyPair,
    kid: String,
    issued: AtomicUsize,
    rejected: AtomicUsize,
    jti: AtomicU64,
    requests: Mutex<Vec<TokenRequest>>,
}

/// A running token server on `127.0.0.1:<ephemeral>`; stops on drop.
pub struct TokenServer {
    addr: SocketAddr,
    state: Arc<State>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl TokenServer {
    /// Starts a token server presenting `pki`'s server certificate and signing with its signer.
    pub fn start(pki: &TestPki, config: TokenConfig) -> Result<Self> {
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(pki.rustls_server_config()?));
        let listener =
            std::net::TcpListener::bind("127.0.0.1:0").context("binding token server")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            config,
            signer: pki.signer()?,
            kid: pki.signer_kid.clone(),
            issued: AtomicUsize::new(0),
            rejected: AtomicUsize::new(0),
            jti: AtomicU64::new(0),
            requests: Mutex::new(Vec::new()),
        });
        let (tx, mut rx) = tokio::sync::oneshot::channel::<()>();
        let served = state.clone();
        let thread = std::thread::Builder::new()
            .name(format!("token-server-{}", addr.port()))
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("token server runtime");
                rt.block_on(async move {
                    let listener =
                        tokio::net::TcpListener::from_std(listener).expect("token listener");
                    loop {
                        tokio::select! {
                            _ = &mut rx => break,
                            accepted = listener.accept() => {
                                let Ok((stream, _)) = accepted else { continue };
                                let acceptor = acceptor.clone();
                                let state = served.clone();
                                tokio::spawn(async move {
                                    let work = serve_connection(acceptor, stream, state);
                                    let _ = tokio::time::timeout(Duration::from_secs(30), work).await;
                                });
                            }
                        }
                    }
                });
            })?;
        Ok(TokenServer {
            addr,
            state,
            shutdown: Some(tx),
            thread: Some(thread),
        })
    }

    /// The realm URL registries point clients at: `https://127.0.0.1:PORT/token`.
    pub fn realm(&self) -> String {
        format!("https://127.0.0.1:{}/token", self.addr.port())
    }

    /// How many tokens were issued (anonymous ones included), over HTTP only.
    pub fn tokens_issued(&self) -> usize {
        self.state.issued.load(Ordering::SeqCst)
    }

    /// How many requests were refused with 401 (wrong user or password).
    pub fn rejections(&self) -> usize {
        self.state.rejected.load(Ordering::SeqCst)
    }

    /// Every request answered so far, in order.
    pub fn requests(&self) -> Vec<TokenRequest> {
        self.state.requests.lock().unwrap().clone()
    }

    /// Mints a token directly (not counted in [`Self::tokens_issued`]) for `subject`, granting
    /// `access` as `(type, name, actions)`.
    pub fn mint(&self, subject: &str, access: &[(&str, &str, &[&str])]) -> String {
        let access = access
            .iter()
            .map(|(t, n, a)| json!({"type": t, "name": n, "actions": a}))
            .collect();
        self.state.sign(subject, access).0
    }
}

impl Drop for TokenServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl State {
    /// Signs a token for `subject` with the given `access` claim; returns it and its lifetime.
    fn sign(&self, subject: &str, access: Vec<Value>) -> (String, Duration) {
        let ttl = self.config.ttl;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let lifetime = ttl.as_secs().max(1) as i64;
        let exp = if self.config.exact_expiry {
            now + lifetime - DISTRIBUTION_LEEWAY.as_secs() as i64
        } else {
            now + lifetime
        };
        let jti = format!(
            "bootstrap-test-{}-{}",
            std::process::id(),
            self.jti.fetch_add(1, Ordering::SeqCst)
        );
        let header = json!({"typ": "JWT", "alg": "ES256", "kid": self.kid});
        let claims = json!({
            "iss": self.config.issuer,
            "sub": subject,
            "aud": self.config.service,
            "exp": exp,
            "nbf": now,
            "iat": now,
            "jti": jti,
            "access": access,
        });
        let signing_input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let sig = self
            .signer
            .sign(&SystemRandom::new(), signing_input.as_bytes())
            .expect("ES256 signing");
        (
            format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref())),
            Duration::from_secs(lifetime as u64),
        )
    }

    fn record(&self, req: TokenRequest) {
        self.requests.lock().unwrap().push(req);
    }
}

/// Parses `type:name:actions` (the type may carry a `(class)`); `None` when malformed.
fn parse_scope(scope: &str) -> Option<Value> {
    let (left, actions) = scope.rsplit_once(':')?;
    let (typ, name) = left.split_once(':')?;
    let typ = typ.split('(').next().unwrap_or(typ);
    let actions: Vec<&str> = actions.split(',').filter(|a| !a.is_empty()).collect();
    Some(json!({"type": typ, "name": name, "actions": actions}))
}

async fn serve_connection(
    acceptor: tokio_rustls::TlsAcceptor,
    stream: tokio::net::TcpStream,
    state: Arc<State>,
) -> std::io::Result<()> {
    let mut tls = acceptor.accept(stream).await?;
    let mut buf = Vec::with_capacity(2048);
    let mut chunk = [0u8; 2048];
    let head_end = loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos;
        }
        if buf.len() > 64 * 1024 {
            return Ok(());
        }
        let n = tls.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let (status, extra_headers, body) = respond(&head, &state);
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Error",
    };
    let mut response = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in extra_headers {
        response.push_str(&format!("{k}: {v}\r\n"));
    }
    response.push_str("\r\n");
    response.push_str(&body);
    tls.write_all(response.as_bytes()).await?;
    tls.flush().await?;
    tls.shutdown().await
}

/// Answers one request head: `(status, extra headers, JSON body)`.
fn respond(head: &str, state: &State) -> (u16, Vec<(&'static str, String)>, String) {
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let method = parts.next().unwrap_or_default().to_string();
    let target = parts.next().unwrap_or_default();
    let mut authorization = None;
    for line in lines {
        if let Some((k, v)) = line.split_once(':') {
            if k.trim().eq_ignore_ascii_case("authorization") {
                authorization = Some(v.trim().to_string());
            }
        }
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut service = None;
    let mut scopes = Vec::new();
    for (k, v) in super::query_pairs(query) {
        match k.as_str() {
            "service" => service = Some(v),
            "scope" => scopes.extend(v.split(' ').filter(|s| !s.is_empty()).map(String::from)),
            _ => {}
        }
    }
    let mut record = TokenRequest {
        method: method.clone(),
        user: None,
        service,
        scopes: scopes.clone(),
        status: 0,
    };
    let error = |code: &str, msg: &str| json!({"errors": [{"code": code, "message": msg}]});
    if path != "/token" {
        record.status = 404;
        state.record(record);
        return (
            404,
            vec![],
            error("NOT_FOUND", "no such endpoint").to_string(),
        );
    }
    if method != "GET" {
        record.status = 405;
        state.record(record);
        return (
            405,
            vec![("Allow", "GET".to_string())],
            error("UNSUPPORTED", "only GET is served").to_string(),
        );
    }
    let challenge = (
        "WWW-Authenticate",
        "Basic realm=\"bootstrap-test-token\"".to_string(),
    );
    let mut subject = String::new();
    if let Some(auth) = authorization {
        let decoded = auth
            .strip_prefix("Basic ")
            .and_then(|b| STANDARD.decode(b.trim()).ok())
            .and_then(|b| String::from_utf8(b).ok());
        let creds = decoded.as_deref().and_then(|d| d.split_once(':'));
        let refusal = match creds {
            None => Some("malformed credentials"),
            Some((user, password)) => {
                record.user = Some(user.to_string());
                (user != state.config.user || password != state.config.password)
                    .then_some("authentication failed")
            }
        };
        if let Some(message) = refusal {
            record.status = 401;
            state.rejected.fetch_add(1, Ordering::SeqCst);
            state.record(record);
            return (
                401,
                vec![challenge],
                error("UNAUTHORIZED", message).to_string(),
            );
        }
        subject = creds.map(|(user, _)| user.to_string()).unwrap_or_default();
    }
    let access: Vec<Value> = if subject.is_empty() {
        Vec::new()
    } else {
        scopes.iter().filter_map(|s| parse_scope(s)).collect()
    };
    let (token, lifetime) = state.sign(&subject, access);
    state.issued.fetch_add(1, Ordering::SeqCst);
    record.status = 200;
    state.record(record);
    let body = json!({
        "token": token,
        "access_token": token,
        "expires_in": lifetime.as_secs(),
        "issued_at": rfc3339_now(),
    });
    (200, vec![], body.to_string())
}

/// The current UTC time as RFC 3339 with second precision, e.g. `2026-12-02T16:08:15Z`.
pub fn rfc3339_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
