//! The distribution API over reqwest: manifests, blobs, uploads, cross-repository mounts, with
//! Basic and Bearer authentication (tokens cached per scope and refreshed before they expire, so
//! a transfer that outlives a token keeps going). Errors name the registry and, where a user can
//! fix something, say how.

use super::auth::{basic_header, parse_challenge, AuthFile, Challenge, Credentials};
use super::digest::Digest;
use super::manifest::{RawManifest, ACCEPT, MAX_MANIFEST_BYTES};
use super::retry::RetryPolicy;
use crate::secret::Secret;
use bytes::Bytes;
use futures_util::Stream;
use reqwest::header::{
    HeaderMap, ACCEPT as ACCEPT_HEADER, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, LOCATION,
    RANGE, WWW_AUTHENTICATE,
};
use reqwest::{RequestBuilder, Response, StatusCode};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

/// How to reach registries: credentials, trust, and the per-host exceptions the user named.
#[derive(Clone, Debug, Default)]
pub struct RegistryOptions {
    /// Credentials by host.
    pub authfile: AuthFile,
    /// Extra CA certificates (PEM) trusted for every registry, beside the system roots.
    pub ca_bundle: Option<PathBuf>,
    /// Hosts spoken to over plain HTTP.
    pub plain_http: Vec<String>,
    /// Hosts whose TLS certificate is not verified.
    pub insecure_tls: Vec<String>,
    /// How requests that fail transiently (connection errors, 5xx, 429) are retried.
    pub retry: RetryPolicy,
}

/// A failure talking to a registry. Callers branch on the kind (a missing blob is not an error
/// for a HEAD; an expired token is retried).
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The registry could not be reached (DNS, refused, TLS); the message says what to do.
    #[error("{registry}: {message}")]
    Connect {
        /// Host.
        registry: String,
        /// What failed and the fix.
        message: String,
        /// True when trying again may help (a reset, a timeout), false when it cannot (an
        /// untrusted certificate, an unknown host name).
        transient: bool,
    },
    /// The registry or its token service refused the credentials.
    #[error("{registry}: {message}")]
    Unauthorized {
        /// Host.
        registry: String,
        /// Who was refused, where the credentials came from, what to do.
        message: String,
    },
    /// A manifest or blob that does not exist.
    #[error("{registry}: {what} not found")]
    NotFound {
        /// Host.
        registry: String,
        /// `manifest repo:tag` or `blob repo@digest`.
        what: String,
    },
    /// Any other non-success answer, with the spec error code when the body had one.
    #[error("{registry}: {action} failed: HTTP {status}{}", .code.as_ref().map(|c| format!(" {c}: {}", .message)).unwrap_or_default())]
    Api {
        /// Host.
        registry: String,
        /// What was attempted, e.g. `PUT manifest a/b:v1`.
        action: String,
        /// HTTP status.
        status: u16,
        /// The spec error code (BLOB_UNKNOWN, MANIFEST_BLOB_UNKNOWN, DIGEST_INVALID, ...).
        code: Option<String>,
        /// The spec error message.
        message: String,
        /// The `Retry-After` the registry sent, if any.
        retry_after: Option<Duration>,
    },
    /// The registry served content that does not match its digest, or answered nonsense.
    #[error("{registry}: {message}")]
    Protocol {
        /// Host.
        registry: String,
        /// What was wrong.
        message: String,
    },
}

impl RegistryError {
    /// The spec error code, if the registry sent one.
    pub fn code(&self) -> Option<&str> {
        match self {
            RegistryError::Api { code, .. } => code.as_deref(),
            _ => None,
        }
    }

    /// True when the same request may succeed if tried again: a connection that dropped, a
    /// 5xx or 429 answer, a token the registry stopped accepting mid-transfer.
    pub fn is_transient(&self) -> bool {
        match self {
            RegistryError::Connect { transient, .. } => *transient,
            RegistryError::Api { status, .. } => retryable_status(*status),
            _ => false,
        }
    }

    /// The `Retry-After` the registry sent with this answer.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            RegistryError::Api { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// Answers worth trying again: 429, 5xx but 501 and 505, and 401 on a one-shot body (the
/// token expired in flight; the retry fetches a new one).
fn retryable_status(status: u16) -> bool {
    matches!(status, 401 | 408 | 429 | 500 | 502 | 503 | 504)
}

/// Where an upload session stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UploadStatus {
    /// Bytes the registry holds.
    pub offset: u64,
    /// The location to continue at (it changes with every request on Distribution).
    pub location: String,
}

type Result<T> = std::result::Result<T, RegistryError>;

/// Clients for every registry a run talks to, one per host, sharing options.
pub struct Registries {
    options: RegistryOptions,
    extra_roots: Vec<reqwest::Certificate>,
    clients: std::sync::Mutex<HashMap<String, Arc<RegistryClient>>>,
}

impl Registries {
    /// Reads the CA bundle now, so a bad `--ca-bundle` fails before any work starts.
    pub fn new(options: RegistryOptions) -> anyhow::Result<Self> {
        use anyhow::Context;
        let extra_roots = match &options.ca_bundle {
            Some(p) => {
                let pem = fs_err::read(p).context("reading --ca-bundle")?;
                let certs = reqwest::Certificate::from_pem_bundle(&pem).with_context(|| {
                    format!(
                        "parsing --ca-bundle {}: expected PEM certificates",
                        p.display()
                    )
                })?;
                if certs.is_empty() {
                    anyhow::bail!(
                        "--ca-bundle {} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
                        p.display()
                    );
                }
                certs
            }
            None => Vec::new(),
        };
        Ok(Registries {
            options,
            extra_roots,
            clients: Default::default(),
        })
    }

    /// The client for `host`, created on first use.
    pub fn client(&self, host: &str) -> anyhow::Result<Arc<RegistryClient>> {
        let mut clients = self.clients.lock().expect("registry client map poisoned");
        if let Some(c) = clients.get(host) {
            return Ok(c.clone());
        }
        let plain = self.options.plain_http.iter().any(|h| h == host);
        let insecure = self.options.insecure_tls.iter().any(|h| h == host);
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("bootstrap/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(30))
            // A last resort against an answer that never comes; bodies are watched by the stall
            // detector instead, so a big blob on a slow link is never cut for being big.
            .read_timeout(Duration::from_secs(300))
            .pool_max_idle_per_host(16)
            .redirect(reqwest::redirect::Policy::limited(5));
        if !self.extra_roots.is_empty() {
            builder = builder.tls_certs_merge(self.extra_roots.iter().cloned());
        }
        if insecure {
            builder = builder.tls_danger_accept_invalid_certs(true);
        }
        let http = builder
            .build()
            .map_err(|e| anyhow::anyhow!("setting up the HTTP client for {host}: {e}"))?;
        let scheme = if plain { "http" } else { "https" };
        let client = Arc::new(RegistryClient {
            host: host.to_string(),
            base: format!("{scheme}://{host}"),
            http,
            authfile: self.options.authfile.clone(),
            state: Mutex::new(AuthState::default()),
            retry: self.options.retry,
        });
        clients.insert(host.to_string(), client.clone());
        Ok(client)
    }
}

/// What a repository scope allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Read.
    Pull,
    /// Read and write.
    Push,
}

#[derive(Default)]
struct AuthState {
    mode: Option<Challenge>,
    tokens: HashMap<String, Token>,
}

struct Token {
    value: Secret,
    refresh_after: Instant,
}

/// One registry host.
pub struct RegistryClient {
    host: String,
    base: String,
    http: reqwest::Client,
    authfile: AuthFile,
    state: Mutex<AuthState>,
    retry: RetryPolicy,
}

/// The result of asking the destination to mount a blob from another repository.
#[derive(Debug)]
pub enum Mount {
    /// The blob now exists in the repository.
    Mounted,
    /// The registry opened an upload session instead; its location.
    Upload(String),
}

fn scope_string(scopes: &[(&str, Access)]) -> String {
    scopes
        .iter()
        .map(|(repo, access)| match access {
            Access::Pull => format!("repository:{repo}:pull"),
            Access::Push => format!("repository:{repo}:pull,push"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

impl RegistryClient {
    /// The host this client speaks to.
    pub fn host(&self) -> &str {
        &self.host
    }

    fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// Absolute URL for a `Location` header (which may be relative).
    fn absolute(&self, location: &str) -> String {
        if location.starts_with("http://") || location.starts_with("https://") {
            location.to_string()
        } else {
            self.url(location)
        }
    }

    fn credentials(&self, scopes: &[(&str, Access)]) -> Option<Credentials> {
        let repo = scopes.first().map(|(r, _)| *r);
        self.authfile.lookup(&self.host, repo).cloned()
    }

    fn connect_error(&self, e: reqwest::Error) -> RegistryError {
        RegistryError::Connect {
            registry: self.host.clone(),
            message: describe_transport_error(&self.host, &e),
            transient: transport_is_transient(&e),
        }
    }

    /// The Authorization header for a request with these scopes, fetching a token if needed.
    async fn authorization(
        &self,
        scopes: &[(&str, Access)],
        force: bool,
    ) -> Result<Option<String>> {
        let mut state = self.state.lock().await;
        match state.mode.clone() {
            None => Ok(None),
            Some(Challenge::Basic) => Ok(self.credentials(scopes).map(|c| basic_header(&c))),
            Some(Challenge::Bearer { realm, service, .. }) => {
                let key = scope_string(scopes);
                if !force {
                    if let Some(t) = state.tokens.get(&key) {
                        if Instant::now() < t.refresh_after {
                            return Ok(Some(format!("Bearer {}", t.value.expose())));
                        }
                    }
                }
                let token = self.fetch_token(&realm, service.as_deref(), scopes).await?;
                let header = format!("Bearer {}", token.value.expose());
                state.tokens.insert(key, token);
                Ok(Some(header))
            }
        }
    }

    async fn fetch_token(
        &self,
        realm: &str,
        service: Option<&str>,
        scopes: &[(&str, Access)],
    ) -> Result<Token> {
        #[derive(serde::Deserialize)]
        struct TokenResponse {
            token: Option<String>,
            access_token: Option<String>,
            expires_in: Option<u64>,
        }
        let mut query: Vec<(&str, String)> = Vec::new();
        if let Some(s) = service {
            query.push(("service", s.to_string()));
        }
        for s in scope_string(scopes).split(' ') {
            query.push(("scope", s.to_string()));
        }
        let creds = self.credentials(scopes);
        let mut req = self.http.get(realm).query(&query);
        if let Some(c) = &creds {
            req = req.header(AUTHORIZATION, basic_header(c));
        }
        let started = Instant::now();
        let resp = req.send().await.map_err(|e| RegistryError::Connect {
            registry: self.host.clone(),
            message: format!(
                "token service {}: {}",
                realm,
                describe_transport_error(realm, &e)
            ),
            transient: transport_is_transient(&e),
        })?;
        let status = resp.status();
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            return Err(self.refused(
                creds.as_ref(),
                &format!("the token service answered {status}"),
            ));
        }
        if !status.is_success() {
            return Err(RegistryError::Protocol {
                registry: self.host.clone(),
                message: format!("token service {realm} answered HTTP {status}"),
            });
        }
        let body: TokenResponse = resp.json().await.map_err(|e| RegistryError::Protocol {
            registry: self.host.clone(),
            message: format!("token service {realm} sent an unreadable answer: {e}"),
        })?;
        let value = body
            .token
            .or(body.access_token)
            .ok_or_else(|| RegistryError::Protocol {
                registry: self.host.clone(),
                message: format!("token service {realm} sent no token"),
            })?;
        // The spec's default lifetime is 60 s; refresh at 80% of it so no request carries a
        // token that expires in flight.
        let lifetime = Duration::from_secs(body.expires_in.unwrap_or(60).max(1));
        Ok(Token {
            value: Secret::new(value),
            refresh_after: started + lifetime.mul_f64(0.8),
        })
    }

    fn refused(&self, creds: Option<&Credentials>, detail: &str) -> RegistryError {
        let message = match creds {
            Some(c) => format!(
                "authentication failed for user '{}' ({detail}); check the entry for {} in {}",
                c.username,
                self.host,
                self.authfile.describe()
            ),
            None => format!(
                "authentication required ({detail}) and {} has no entry for {}: add one, or pass --authfile FILE",
                self.authfile.describe(),
                self.host
            ),
        };
        RegistryError::Unauthorized {
            registry: self.host.clone(),
            message,
        }
    }

    /// Sends a request built by `build` under the client's retry policy: connection errors,
    /// 5xx and 429 answers are tried again after a backoff (or the `Retry-After` sent). When
    /// the tries run out, the last failure is returned and says how many tries it took.
    async fn send(
        &self,
        scopes: &[(&str, Access)],
        build: impl Fn(&reqwest::Client) -> RequestBuilder,
    ) -> Result<Response> {
        self.send_retrying(self.retry, scopes, build).await
    }

    async fn send_retrying(
        &self,
        policy: RetryPolicy,
        scopes: &[(&str, Access)],
        build: impl Fn(&reqwest::Client) -> RequestBuilder,
    ) -> Result<Response> {
        let started = Instant::now();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let result = self.send_once(scopes, &build).await;
            let retry_after = match &result {
                Ok(resp) if retryable_status(resp.status().as_u16()) => {
                    retry_after_header(resp.headers())
                }
                Err(e) if e.is_transient() => None,
                _ => return result,
            };
            // Within a blob's transfer its budget is shared with the blob's own retries.
            let gave_up = attempt >= policy.attempts || !super::retry::may_retry();
            let what = describe_request(&build(&self.http));
            match result {
                Ok(resp) if gave_up => {
                    let action = format!(
                        "{what} (gave up after {attempt} attempts in {:.0?})",
                        started.elapsed()
                    );
                    return Err(self.api_error(action, resp).await);
                }
                Err(e) if gave_up => return Err(e.after_attempts(attempt, started.elapsed())),
                Ok(resp) => {
                    tracing::warn!(
                        "{}: {what} answered {}; trying again",
                        self.host,
                        resp.status()
                    );
                    let _ = resp.bytes().await;
                }
                Err(e) => tracing::warn!("{what}: {e}; trying again"),
            }
            tokio::time::sleep(policy.delay(attempt, retry_after)).await;
        }
    }

    /// Sends a request once, authenticating on a 401 challenge and retrying once.
    /// `build` is called again for the retry, so it must not carry a one-shot body.
    async fn send_once(
        &self,
        scopes: &[(&str, Access)],
        build: impl Fn(&reqwest::Client) -> RequestBuilder,
    ) -> Result<Response> {
        let auth = self.authorization(scopes, false).await?;
        let resp = self.send_with(build(&self.http), auth).await?;
        if resp.status() != StatusCode::UNAUTHORIZED {
            return Ok(resp);
        }
        let challenge = resp
            .headers()
            .get(WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_challenge);
        if let Some(c) = challenge.clone() {
            self.state.lock().await.mode = Some(c);
        }
        let creds = self.credentials(scopes);
        if challenge.is_none() || (matches!(challenge, Some(Challenge::Basic)) && creds.is_none()) {
            return Err(self.refused(creds.as_ref(), "the registry answered 401"));
        }
        let auth = self.authorization(scopes, true).await?;
        let resp = self.send_with(build(&self.http), auth).await?;
        if resp.status() == StatusCode::UNAUTHORIZED || resp.status() == StatusCode::FORBIDDEN {
            let status = resp.status();
            return Err(self.refused(creds.as_ref(), &format!("the registry answered {status}")));
        }
        Ok(resp)
    }

    async fn send_with(&self, req: RequestBuilder, auth: Option<String>) -> Result<Response> {
        let req = match auth {
            Some(a) => req.header(AUTHORIZATION, a),
            None => req,
        };
        req.send().await.map_err(|e| self.connect_error(e))
    }

    /// Makes sure credentials for these scopes are known (a token fetched if the registry wants
    /// one) before a request whose body can only be sent once.
    pub async fn prime(&self, scopes: &[(&str, Access)]) -> Result<()> {
        let resp = self.send(scopes, |c| c.get(self.url("/v2/"))).await?;
        let _ = resp.bytes().await;
        Ok(())
    }

    async fn api_error(&self, action: String, resp: Response) -> RegistryError {
        #[derive(serde::Deserialize)]
        struct Body {
            errors: Vec<Entry>,
        }
        #[derive(serde::Deserialize)]
        struct Entry {
            code: String,
            #[serde(default)]
            message: String,
        }
        let status = resp.status().as_u16();
        let retry_after = retry_after_header(resp.headers());
        let body = resp.bytes().await.unwrap_or_default();
        let (code, message) = match serde_json::from_slice::<Body>(&body) {
            Ok(b) if !b.errors.is_empty() => (
                Some(
                    b.errors
                        .iter()
                        .map(|e| e.code.as_str())
                        .collect::<Vec<_>>()
                        .join(","),
                ),
                b.errors
                    .iter()
                    .map(|e| e.message.as_str())
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
            _ => (None, String::new()),
        };
        RegistryError::Api {
            registry: self.host.clone(),
            action,
            status,
            code,
            message,
            retry_after,
        }
    }

    /// Checks the registry answers the v2 API (and that its credentials work).
    pub async fn ping(&self) -> Result<()> {
        // One retry only: an unreachable destination should fail in seconds, not minutes.
        let policy = RetryPolicy {
            attempts: self.retry.attempts.min(2),
            ..self.retry
        };
        let resp = self
            .send_retrying(policy, &[], |c| c.get(self.url("/v2/")))
            .await?;
        if resp.status().is_success() {
            Ok(())
        } else {
            Err(self.api_error("GET /v2/".into(), resp).await)
        }
    }

    /// Fetches a manifest by tag or digest, verbatim. A digest reference is verified against
    /// the bytes; a tag's bytes are checked against `Docker-Content-Digest` when sent.
    pub async fn get_manifest(&self, repo: &str, reference: &str) -> Result<RawManifest> {
        let url = self.url(&format!("/v2/{repo}/manifests/{reference}"));
        let resp = self
            .send(&[(repo, Access::Pull)], |c| {
                c.get(&url).header(ACCEPT_HEADER, ACCEPT)
            })
            .await?;
        let what = format!("manifest {repo}:{reference}");
        if resp.status() == StatusCode::NOT_FOUND {
            return Err(RegistryError::NotFound {
                registry: self.host.clone(),
                what,
            });
        }
        if !resp.status().is_success() {
            return Err(self.api_error(format!("GET {what}"), resp).await);
        }
        if resp.content_length().unwrap_or(0) > MAX_MANIFEST_BYTES as u64 {
            return Err(self.protocol(format!("{what} is larger than the 4 MiB manifest limit")));
        }
        let content_type = header_str(resp.headers(), CONTENT_TYPE.as_str());
        let served_digest = header_str(resp.headers(), "docker-content-digest");
        let bytes = resp.bytes().await.map_err(|e| self.connect_error(e))?;
        if bytes.len() > MAX_MANIFEST_BYTES {
            return Err(self.protocol(format!("{what} is larger than the 4 MiB manifest limit")));
        }
        let raw = RawManifest::new(bytes, content_type.as_deref());
        let expected = match reference.parse::<Digest>() {
            Ok(d) => Some(d),
            Err(_) => served_digest.and_then(|d| d.parse().ok()),
        };
        if let Some(expected) = expected {
            if expected != raw.digest {
                return Err(self.protocol(format!(
                    "{what} does not match its digest: expected {expected}, got {}",
                    raw.digest
                )));
            }
        }
        Ok(raw)
    }

    fn protocol(&self, message: String) -> RegistryError {
        RegistryError::Protocol {
            registry: self.host.clone(),
            message,
        }
    }

    /// HEAD of a manifest: its digest when it exists.
    pub async fn head_manifest(&self, repo: &str, reference: &str) -> Result<Option<Digest>> {
        let url = self.url(&format!("/v2/{repo}/manifests/{reference}"));
        let resp = self
            .send(&[(repo, Access::Pull)], |c| {
                c.head(&url).header(ACCEPT_HEADER, ACCEPT)
            })
            .await?;
        match resp.status() {
            StatusCode::NOT_FOUND => Ok(None),
            s if s.is_success() => Ok(
                header_str(resp.headers(), "docker-content-digest").and_then(|d| d.parse().ok())
            ),
            _ => Err(self
                .api_error(format!("HEAD manifest {repo}:{reference}"), resp)
                .await),
        }
    }

    /// Pushes manifest bytes under a tag or their digest, and checks the registry stored them
    /// under the same digest.
    pub async fn put_manifest(
        &self,
        repo: &str,
        reference: &str,
        manifest: &RawManifest,
    ) -> Result<()> {
        let url = self.url(&format!("/v2/{repo}/manifests/{reference}"));
        let resp = self
            .send(&[(repo, Access::Push)], |c| {
                c.put(&url)
                    .header(CONTENT_TYPE, &manifest.media_type)
                    .body(manifest.bytes.clone())
            })
            .await?;
        if !resp.status().is_success() {
            return Err(self
                .api_error(format!("PUT manifest {repo}:{reference}"), resp)
                .await);
        }
        if let Some(d) = header_str(resp.headers(), "docker-content-digest") {
            if d != manifest.digest.to_string() {
                return Err(self.protocol(format!(
                    "stored manifest {repo}:{reference} under {d}, not {}: the registry rewrote it",
                    manifest.digest
                )));
            }
        }
        Ok(())
    }

    /// HEAD of a blob: its size when the repository has it.
    pub async fn head_blob(&self, repo: &str, digest: &Digest) -> Result<Option<u64>> {
        let url = self.url(&format!("/v2/{repo}/blobs/{digest}"));
        let resp = self.send(&[(repo, Access::Pull)], |c| c.head(&url)).await?;
        match resp.status() {
            StatusCode::NOT_FOUND => Ok(None),
            s if s.is_success() => Ok(Some(
                header_str(resp.headers(), CONTENT_LENGTH.as_str())
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0),
            )),
            _ => Err(self
                .api_error(format!("HEAD blob {repo}@{digest}"), resp)
                .await),
        }
    }

    /// Starts streaming a blob from `offset` (a `Range` request when non-zero).
    pub async fn get_blob(&self, repo: &str, digest: &Digest, offset: u64) -> Result<Response> {
        let url = self.url(&format!("/v2/{repo}/blobs/{digest}"));
        let resp = self
            .send(&[(repo, Access::Pull)], |c| {
                let r = c.get(&url);
                if offset > 0 {
                    r.header(RANGE, format!("bytes={offset}-"))
                } else {
                    r
                }
            })
            .await?;
        match resp.status() {
            StatusCode::NOT_FOUND => Err(RegistryError::NotFound {
                registry: self.host.clone(),
                what: format!("blob {repo}@{digest}"),
            }),
            StatusCode::OK if offset == 0 => Ok(resp),
            StatusCode::PARTIAL_CONTENT if offset > 0 => Ok(resp),
            StatusCode::OK => Err(self.protocol(format!(
                "blob {repo}@{digest}: the registry ignored the Range request"
            ))),
            _ => Err(self
                .api_error(format!("GET blob {repo}@{digest}"), resp)
                .await),
        }
    }

    /// Asks the registry to mount `digest` into `repo` from `from`.
    pub async fn mount_blob(&self, repo: &str, digest: &Digest, from: &str) -> Result<Mount> {
        let url = self.url(&format!("/v2/{repo}/blobs/uploads/"));
        let scopes = [(repo, Access::Push), (from, Access::Pull)];
        let resp = self
            .send(&scopes, |c| {
                c.post(&url)
                    .query(&[("mount", digest.to_string()), ("from", from.to_string())])
                    .header(CONTENT_LENGTH, "0")
            })
            .await?;
        match resp.status() {
            StatusCode::CREATED => Ok(Mount::Mounted),
            StatusCode::ACCEPTED => Ok(Mount::Upload(self.location(&resp, repo)?)),
            _ => Err(self
                .api_error(format!("mount blob {digest} into {repo} from {from}"), resp)
                .await),
        }
    }

    fn location(&self, resp: &Response, repo: &str) -> Result<String> {
        header_str(resp.headers(), LOCATION.as_str())
            .map(|l| self.absolute(&l))
            .ok_or_else(|| {
                self.protocol(format!("upload to {repo}: the registry sent no Location"))
            })
    }

    /// Opens an upload session in `repo`; returns its location.
    pub async fn start_upload(&self, repo: &str) -> Result<String> {
        let url = self.url(&format!("/v2/{repo}/blobs/uploads/"));
        let resp = self
            .send(&[(repo, Access::Push)], |c| {
                c.post(&url).header(CONTENT_LENGTH, "0")
            })
            .await?;
        if resp.status() != StatusCode::ACCEPTED {
            return Err(self
                .api_error(format!("start upload to {repo}"), resp)
                .await);
        }
        self.location(&resp, repo)
    }

    /// Asks where an upload session stands (`GET <location>`). `None` when the registry no
    /// longer knows it (purged, cancelled, or our location is stale), so the blob starts over.
    pub async fn upload_status(&self, repo: &str, location: &str) -> Result<Option<UploadStatus>> {
        let resp = self
            .send(&[(repo, Access::Push)], |c| c.get(location))
            .await?;
        match resp.status() {
            StatusCode::NO_CONTENT | StatusCode::OK => {
                let next = self.location(&resp, repo)?;
                let offset = range_end(resp.headers()).unwrap_or(0);
                Ok(Some(UploadStatus {
                    offset,
                    location: next,
                }))
            }
            StatusCode::NOT_FOUND | StatusCode::BAD_REQUEST => Ok(None),
            _ => Err(self
                .api_error(format!("GET upload status in {repo}"), resp)
                .await),
        }
    }

    /// Sends one chunk (`PATCH` with `Content-Range`) of `len` bytes starting at `offset`;
    /// returns where the session stands after it, checked against what was sent.
    pub async fn patch_chunk<S>(
        &self,
        repo: &str,
        location: &str,
        offset: u64,
        len: u64,
        body: S,
    ) -> Result<UploadStatus>
    where
        S: Stream<Item = std::result::Result<Bytes, std::io::Error>> + Send + 'static,
    {
        let req = self
            .http
            .patch(location)
            .header(CONTENT_TYPE, "application/octet-stream")
            .header(CONTENT_LENGTH, len.to_string())
            .header(
                "content-range",
                format!("{offset}-{}", (offset + len).saturating_sub(1)),
            )
            .body(reqwest::Body::wrap_stream(body));
        let resp = self.send_one_shot(repo, req).await?;
        if resp.status() != StatusCode::ACCEPTED && resp.status() != StatusCode::NO_CONTENT {
            return Err(self.api_error(format!("upload blob to {repo}"), resp).await);
        }
        let next = self.location(&resp, repo)?;
        let end = range_end(resp.headers());
        if end.is_some_and(|e| e != offset + len) {
            return Err(self.protocol(format!(
                "upload to {repo}: after a chunk ending at byte {} the registry holds {} bytes",
                offset + len,
                end.unwrap_or(0)
            )));
        }
        Ok(UploadStatus {
            offset: offset + len,
            location: next,
        })
    }

    /// Sends the rest of a blob in the committing `PUT <location>&digest=` (monolithic upload
    /// of a small blob): the registry checks the digest and makes the blob visible.
    pub async fn put_upload<S>(
        &self,
        repo: &str,
        location: &str,
        digest: &Digest,
        len: u64,
        body: S,
    ) -> Result<()>
    where
        S: Stream<Item = std::result::Result<Bytes, std::io::Error>> + Send + 'static,
    {
        let req = self
            .http
            .put(commit_url(location, digest))
            .header(CONTENT_TYPE, "application/octet-stream")
            .header(CONTENT_LENGTH, len.to_string())
            .body(reqwest::Body::wrap_stream(body));
        let resp = self.send_one_shot(repo, req).await?;
        if resp.status() != StatusCode::CREATED {
            return Err(self
                .api_error(format!("commit blob {digest} in {repo}"), resp)
                .await);
        }
        Ok(())
    }

    /// Sends a request whose body can be sent only once: no retry here (the caller resumes
    /// from the registry's offset). A 401 drops the cached token, so the retry gets a new one.
    async fn send_one_shot(&self, repo: &str, req: RequestBuilder) -> Result<Response> {
        let scopes = [(repo, Access::Push)];
        let auth = self.authorization(&scopes, false).await?;
        let resp = self.send_with(req, auth).await?;
        if resp.status() == StatusCode::UNAUTHORIZED {
            self.state
                .lock()
                .await
                .tokens
                .remove(&scope_string(&scopes));
        }
        Ok(resp)
    }

    /// Commits an upload session: the registry checks the digest and makes the blob visible.
    pub async fn finish_upload(&self, repo: &str, location: &str, digest: &Digest) -> Result<()> {
        let url = commit_url(location, digest);
        let resp = self
            .send(&[(repo, Access::Push)], |c| {
                c.put(&url).header(CONTENT_LENGTH, "0")
            })
            .await?;
        if resp.status() != StatusCode::CREATED {
            return Err(self
                .api_error(format!("commit blob {digest} in {repo}"), resp)
                .await);
        }
        Ok(())
    }

    /// Abandons an upload session (best effort: the registry purges stale ones anyway).
    pub async fn cancel_upload(&self, repo: &str, location: &str) {
        if let Ok(resp) = self
            .send(&[(repo, Access::Push)], |c| c.delete(location))
            .await
        {
            let _ = resp.bytes().await;
        }
    }
}

/// The byte count an upload's `Range: 0-<last>` header reports. Distribution answers `0-0`
/// for an empty session (and would for a one-byte one, which we never resume), and `0--1` in
/// some versions; both mean nothing is held.
fn range_end(headers: &HeaderMap) -> Option<u64> {
    let range = header_str(headers, RANGE.as_str())?;
    let last = range.trim().strip_prefix("0-")?;
    match last.parse::<u64>() {
        Ok(0) => Some(0),
        Ok(n) => Some(n + 1),
        Err(_) => Some(0),
    }
}

/// The committing `PUT` URL of an upload session: its location plus `digest=`.
fn commit_url(location: &str, digest: &Digest) -> String {
    let sep = if location.contains('?') { '&' } else { '?' };
    format!("{location}{sep}digest={digest}")
}

/// The `Retry-After` header in seconds (the HTTP-date form is rare from registries and is
/// treated as absent).
fn retry_after_header(headers: &HeaderMap) -> Option<Duration> {
    header_str(headers, reqwest::header::RETRY_AFTER.as_str())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
}

/// `METHOD /path` of a request, for messages (no query: it may carry upload state).
fn describe_request(req: &RequestBuilder) -> String {
    match req.try_clone().and_then(|r| r.build().ok()) {
        Some(r) => format!("{} {}", r.method(), r.url().path()),
        None => "request".to_string(),
    }
}

impl RegistryError {
    /// The same error, saying it is the last of `attempts` tries over `elapsed`.
    fn after_attempts(self, attempts: u32, elapsed: Duration) -> Self {
        let note = format!(" (gave up after {attempts} attempts in {elapsed:.0?})");
        match self {
            RegistryError::Connect {
                registry,
                message,
                transient,
            } => RegistryError::Connect {
                registry,
                message: message + &note,
                transient,
            },
            other => other,
        }
    }
}

/// Whether a transport error may pass: resets, timeouts and refused connections may; TLS
/// trust problems and unknown host names will not.
fn transport_is_transient(e: &reqwest::Error) -> bool {
    let text = format!("{e:?}").to_ascii_lowercase();
    let permanent = [
        "certificate",
        "unknownissuer",
        "invalid peer",
        "dns error",
        "failed to lookup",
        "wrong version number",
        "invalid http version",
    ];
    !permanent.iter().any(|p| text.contains(p))
}

fn header_str(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// Turns a transport error into a sentence that says what to do.
pub fn describe_transport_error(target: &str, e: &reqwest::Error) -> String {
    let mut chain = String::new();
    let mut source: Option<&dyn std::error::Error> = Some(e);
    while let Some(s) = source {
        chain.push_str(&s.to_string());
        chain.push_str(": ");
        source = s.source();
    }
    let lower = chain.to_ascii_lowercase();
    if lower.contains("certificate")
        || lower.contains("unknownissuer")
        || lower.contains("invalid peer")
    {
        let detail = if lower.contains("unknownissuer") || lower.contains("unknown issuer") {
            "signed by an unknown authority"
        } else if lower.contains("notvalidforname") || lower.contains("not valid for name") {
            "issued for another name"
        } else if lower.contains("expired") {
            "expired"
        } else {
            "not trusted"
        };
        format!(
            "the TLS certificate of {target} is {detail}: pass --ca-bundle FILE with the CA that signed it, or --insecure-skip-tls-verify {target} to skip verification for this host only"
        )
    } else if lower.contains("connection refused") {
        format!("cannot connect to {target} (connection refused): check the host and port, and that the registry is running")
    } else if lower.contains("dns error")
        || lower.contains("failed to lookup")
        || lower.contains("name or service not known")
    {
        format!("cannot resolve the host name of {target}: check the name, or use its IP address")
    } else if lower.contains("invalid http version")
        || lower.contains("wrong version number")
        || lower.contains("corrupt message")
        || lower.contains("invalidcontenttype")
        || lower.contains("received corrupt")
    {
        format!("{target} does not speak TLS: if it serves plain HTTP, pass --plain-http {target}")
    } else if e.is_timeout() {
        format!("timed out talking to {target}")
    } else {
        format!(
            "request to {target} failed: {}",
            crate::secret::redact_url(chain.trim_end_matches(": "))
        )
    }
}
