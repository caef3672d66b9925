//! The new cluster's API as bootstrap speaks to it (the wait's readiness checks and the
//! hand-off): kube-rs with the installer's kubeconfig, and three bounds around it.
//!
//! - **Credentials only over verified TLS.** A kubeconfig whose server is `http://` would send
//!   its bearer token in clear, and `insecure-skip-tls-verify: true` would send it to whoever
//!   answers; both are refused with the fix (the cluster's `https://` endpoint and its CA in
//!   `certificate-authority-data`) unless the operator names the server's host on the command
//!   line (`--insecure-api HOST`, or `HOST:PORT`). Then the connection's [`ApiTrust`] says so,
//!   for every status line and the run's state, as the BMC side says "NOT VERIFIED".
//! - **Every answer bounded.** A body past [`ANSWER_MAX`] (declared by `Content-Length` or
//!   counted as it streams) is refused naming the method and path; lists are read in pages of
//!   [`LIST_PAGE`] (`limit`/`continue`, as `kubectl get --chunk-size` and client-go's pager)
//!   and refused past [`LIST_MAX_ITEMS`] objects. Nothing watches: the hand-off and the wait
//!   poll with single reads, each bounded the same way.
//! - **Transient answers retried.** 429, 500, 502, 503 and 504 are asked again (client-go
//!   retries a 429 or any 5xx that carries `Retry-After`, rest/with_retry.go `checkWait`; its
//!   callers retry internal errors with `retry.OnError`): after `Retry-After` when the API gives
//!   one (at most [`RETRY_AFTER_MAX`]), else with exponential backoff; the last answer's own
//!   message is what the error says. An answer refused for its size is never asked again.

use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use kube::api::{Api, ListParams};
use kube::client::Body;
use kube::config::{KubeConfigOptions, Kubeconfig};
use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context as TaskContext, Poll};
use std::time::Duration;
use tower::BoxError;

/// How long a connection to the cluster API may take to open.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// The largest answer read from the API: a page of [`LIST_PAGE`] objects, or one object (etcd
/// refuses objects past 1.5 MiB), fits many times over.
pub const ANSWER_MAX: u64 = 32 << 20;
/// Objects asked for per page of a list (`kubectl`'s `--chunk-size` is 500).
pub const LIST_PAGE: u32 = 250;
/// The most objects a list may hold: the hand-off lists Argo CD Applications and the wait
/// ClusterOperators, a few dozen of each on a real site.
pub const LIST_MAX_ITEMS: usize = 10_000;
/// The longest `Retry-After` honoured; a longer one is waited this long.
pub const RETRY_AFTER_MAX: Duration = Duration::from_secs(30);

/// How transient answers are retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retry {
    /// The first wait (doubled each time).
    pub first: Duration,
    /// The longest wait.
    pub max: Duration,
    /// How many times a request is asked again.
    pub retries: u32,
}

impl Retry {
    /// The hand-off's: 0.2, 0.4, 0.8, 1.6, 3.2 s (about 6 s in all) before giving up.
    pub const API: Retry = Retry {
        first: Duration::from_millis(200),
        max: Duration::from_secs(5),
        retries: 5,
    };
    /// None: a poller (the wait) asks again on its next poll anyway.
    pub const NONE: Retry = Retry {
        first: Duration::ZERO,
        max: Duration::ZERO,
        retries: 0,
    };
}

/// How the connection to the API is trusted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApiTrust {
    /// TLS verified against the kubeconfig's CA (or the system's roots).
    Verified,
    /// `insecure-skip-tls-verify: true`, allowed by `--insecure-api HOST`.
    NotVerified {
        /// The host as named.
        host: String,
    },
    /// An `http://` server, allowed by `--insecure-api HOST`.
    PlainHttp {
        /// The host as named.
        host: String,
    },
}

impl ApiTrust {
    /// False when the operator allowed an unverified or plain connection.
    pub fn verified(&self) -> bool {
        matches!(self, ApiTrust::Verified)
    }

    /// For status lines and the run's state: `verified`, or what was allowed and by what.
    pub fn label(&self) -> String {
        match self {
            ApiTrust::Verified => "verified".to_string(),
            ApiTrust::NotVerified { host } => {
                format!("NOT VERIFIED (insecure-skip-tls-verify, --insecure-api {host})")
            }
            ApiTrust::PlainHttp { host } => {
                format!("NOT ENCRYPTED (http://, --insecure-api {host})")
            }
        }
    }
}

/// A client of the cluster's API and how it is trusted.
#[derive(Clone)]
pub struct Connected {
    /// The client, with the bounds of this module around it.
    pub client: kube::Client,
    /// How the connection is trusted.
    pub trust: ApiTrust,
}

/// The name in `insecure` that allows `host` (port `port`): `HOST:PORT` or `HOST` alone.
fn named(insecure: &[String], host: &str, port: Option<u16>) -> Option<String> {
    let with_port = port.map(|p| format!("{host}:{p}"));
    insecure
        .iter()
        .find(|h| h.as_str() == host || Some(h.as_str()) == with_port.as_deref())
        .cloned()
}

/// A client for the API the kubeconfig at `path` names (its current context), trusted by its
/// `certificate-authority-data` (and `tls-server-name` when given); `address`, when given, is
/// dialled instead of the kubeconfig's server (the certificate is still checked for the
/// kubeconfig's `tls-server-name`, or for its server's host). `insecure` lists the hosts the
/// operator named with `--insecure-api`; `retry` is how transient answers are retried.
pub async fn connect(
    path: &Path,
    address: Option<SocketAddr>,
    insecure: &[String],
    retry: Retry,
) -> Result<Connected> {
    let kubeconfig = Kubeconfig::read_from(path)
        .with_context(|| format!("reading the kubeconfig {}", path.display()))?;
    let mut config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .with_context(|| format!("loading the kubeconfig {}", path.display()))?;
    let server = config.cluster_url.clone();
    let host = server.host().unwrap_or_default().to_string();
    let port = server.port_u16();
    let plain = server.scheme_str() == Some("http");
    let allowed = named(insecure, &host, port);
    let trust = match (plain, config.accept_invalid_certs, allowed) {
        (false, false, _) => ApiTrust::Verified,
        (true, _, Some(host)) => ApiTrust::PlainHttp { host },
        (false, true, Some(host)) => ApiTrust::NotVerified { host },
        (true, _, None) => bail!(
            "the kubeconfig {}: its server {server} is plain HTTP, so its credentials would \
             cross the network in clear; refused. Use the cluster's https:// endpoint with its \
             CA in certificate-authority-data (the installer's auth/kubeconfig has both), or, \
             knowingly, pass --insecure-api {host}",
            path.display()
        ),
        (false, true, None) => bail!(
            "the kubeconfig {}: insecure-skip-tls-verify: true for {server}, so its credentials \
             would go to whoever answers; refused. Remove it and give the cluster's CA in \
             certificate-authority-data (the installer's auth/kubeconfig has it), or, knowingly, \
             pass --insecure-api {host}",
            path.display()
        ),
    };
    if let Some(addr) = address {
        if config.tls_server_name.is_none() {
            config.tls_server_name = Some(host.clone());
        }
        let scheme = if plain { "http" } else { "https" };
        config.cluster_url = format!("{scheme}://{addr}")
            .parse()
            .context("the cluster API's address")?;
    }
    // The wait probes the API on every 2 s poll before bootstrap completes, while nothing
    // answers at the API VIP yet (an address no host holds: a SYN with no reply). A long
    // connect timeout would make each poll that long and hold up the rendezvous host's
    // progress; a LAN connect to a live API takes milliseconds.
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config.read_timeout = Some(Duration::from_secs(20));
    let builder = kube::client::ClientBuilder::try_from(config)
        .with_context(|| format!("a client for the kubeconfig {}", path.display()))?;
    let builder = builder
        .with_layer(&tower::buffer::BufferLayer::new(256))
        .with_layer(&tower::retry::RetryLayer::new(Transient {
            retry,
            attempt: 0,
        }))
        .with_layer(&tower::layer::layer_fn(|inner| Capped { inner }));
    Ok(Connected {
        client: builder.build(),
        trust,
    })
}

/// Every object `api` lists, read in pages of [`LIST_PAGE`]; `what` names them in errors
/// (`ClusterOperators`). A continue token that expired (410 Gone, the list changed too much
/// meanwhile) starts the list again once, as client-go's pager falls back to a fresh list.
pub async fn list_all<K>(api: &Api<K>, what: &str) -> Result<Vec<K>>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut items = Vec::new();
    let mut token: Option<String> = None;
    let mut restarted = false;
    loop {
        let mut params = ListParams::default().limit(LIST_PAGE);
        if let Some(t) = &token {
            params = params.continue_token(t);
        }
        let page = match api.list(&params).await {
            Ok(page) => page,
            Err(kube::Error::Api(s)) if s.code == 410 && token.is_some() && !restarted => {
                restarted = true;
                token = None;
                items.clear();
                continue;
            }
            Err(e) => return Err(anyhow!("listing {what}: {}", describe_error(&e))),
        };
        items.extend(page.items);
        if items.len() > LIST_MAX_ITEMS {
            bail!(
                "listing {what}: the cluster lists more than {LIST_MAX_ITEMS} of them; refused \
                 (no site has that many: is this the cluster the kubeconfig should name?)"
            );
        }
        match page.metadata.continue_ {
            Some(t) if !t.is_empty() => token = Some(t),
            _ => return Ok(items),
        }
    }
}

/// An API error in the API's own words: its Status message, code and reason, or the answer
/// refused for its size, or what failed on the way.
pub fn describe_error(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => {
            format!(
                "{} (HTTP {} {})",
                status.message, status.code, status.reason
            )
        }
        other => {
            let mut source: Option<&(dyn std::error::Error + 'static)> = Some(other);
            while let Some(s) = source {
                if let Some(big) = s.downcast_ref::<AnswerTooLarge>() {
                    return big.to_string();
                }
                source = s.source();
            }
            other.to_string()
        }
    }
}

/// An answer past [`ANSWER_MAX`].
#[derive(Debug, thiserror::Error)]
#[error(
    "the cluster API's answer to {request} {seen}, more than the {limit} bytes an API answer \
     may have; refused, not retried"
)]
pub struct AnswerTooLarge {
    /// `METHOD /path`.
    pub request: String,
    /// `declares N bytes` or `passed N bytes`.
    pub seen: String,
    /// The cap.
    pub limit: u64,
}

/// Whether an answer with this status is worth asking again.
fn transient(status: StatusCode) -> bool {
    matches!(status.as_u16(), 429 | 500 | 502 | 503 | 504)
}

/// The retry policy of [`Retry`]: a fresh copy per request (tower clones it), counting its
/// attempts.
#[derive(Clone)]
struct Transient {
    retry: Retry,
    attempt: u32,
}

impl<B> tower::retry::Policy<Request<Body>, Response<B>, BoxError> for Transient {
    type Future = tokio::time::Sleep;

    fn retry(
        &mut self,
        req: &mut Request<Body>,
        result: &mut Result<Response<B>, BoxError>,
    ) -> Option<Self::Future> {
        let answer = result.as_ref().ok()?;
        if !transient(answer.status()) || self.attempt >= self.retry.retries {
            return None;
        }
        let backoff = self
            .retry
            .first
            .saturating_mul(1 << self.attempt.min(16))
            .min(self.retry.max);
        let wait = answer
            .headers()
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(|s| Duration::from_secs(s).min(RETRY_AFTER_MAX))
            .unwrap_or(backoff);
        self.attempt += 1;
        tracing::debug!(
            method = %req.method(),
            path = req.uri().path(),
            status = answer.status().as_u16(),
            attempt = self.attempt,
            wait_ms = wait.as_millis() as u64,
            "the cluster API answered a transient error; asking again"
        );
        Some(tokio::time::sleep(wait))
    }

    fn clone_request(&mut self, req: &Request<Body>) -> Option<Request<Body>> {
        let body = req.body().try_clone()?;
        let mut copy = Request::builder()
            .method(req.method().clone())
            .uri(req.uri().clone())
            .version(req.version())
            .body(body)
            .ok()?;
        *copy.headers_mut() = req.headers().clone();
        *copy.extensions_mut() = req.extensions().clone();
        Some(copy)
    }
}

/// The service that caps every answer's body at [`ANSWER_MAX`].
#[derive(Clone)]
struct Capped<S> {
    inner: S,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B> tower::Service<Request<Body>> for Capped<S>
where
    S: tower::Service<Request<Body>, Response = Response<B>>,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Unpin,
{
    type Response = Response<CappedBody<B>>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let request: Arc<str> = format!("{} {}", req.method(), req.uri().path()).into();
        let answer = self.inner.call(req);
        Box::pin(async move {
            let answer = answer.await?;
            let declared = answer
                .headers()
                .get(http::header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok());
            Ok(answer.map(|inner| CappedBody {
                inner,
                declared,
                read: 0,
                request,
            }))
        })
    }
}

/// A body that fails once it declares or passes [`ANSWER_MAX`] bytes.
pub struct CappedBody<B> {
    inner: B,
    declared: Option<u64>,
    read: u64,
    request: Arc<str>,
}

impl<B> CappedBody<B> {
    fn too_large(&self, seen: String) -> BoxError {
        Box::new(AnswerTooLarge {
            request: self.request.to_string(),
            seen,
            limit: ANSWER_MAX,
        })
    }
}

impl<B> http_body::Body for CappedBody<B>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, BoxError>>> {
        if let Some(n) = self.declared.filter(|n| *n > ANSWER_MAX) {
            return Poll::Ready(Some(Err(self.too_large(format!("declares {n} bytes")))));
        }
        let frame = ready!(Pin::new(&mut self.inner).poll_frame(cx));
        Poll::Ready(match frame {
            Some(Ok(frame)) => {
                self.read += frame.data_ref().map_or(0, |d| d.len() as u64);
                if self.read > ANSWER_MAX {
                    let read = self.read;
                    Some(Err(self.too_large(format!("passed {read} bytes"))))
                } else {
                    Some(Ok(frame))
                }
            }
            Some(Err(e)) => Some(Err(e.into())),
            None => None,
        })
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host is named with its port or alone.
    #[test]
    fn an_insecure_host_is_named_with_or_without_its_port() {
        let list = vec!["api.lab:6443".to_string(), "other".to_string()];
        assert_eq!(
            named(&list, "api.lab", Some(6443)).as_deref(),
            Some("api.lab:6443")
        );
        assert_eq!(named(&list, "api.lab", Some(8443)), None);
        assert_eq!(named(&list, "other", Some(1)).as_deref(), Some("other"));
        assert_eq!(named(&list, "api", Some(6443)), None);
    }

    /// The statuses client-go treats as transient, and no other.
    #[test]
    fn transient_statuses_are_429_and_the_gateway_5xx() {
        for s in [429, 500, 502, 503, 504] {
            assert!(transient(StatusCode::from_u16(s).unwrap()), "{s}");
        }
        for s in [200, 400, 401, 403, 404, 409, 410, 422, 501] {
            assert!(!transient(StatusCode::from_u16(s).unwrap()), "{s}");
        }
    }
}
