//! The distribution API over reqwest: manifests, blobs, uploads, cross-repository mounts, with
//! Basic and Bearer authentication (tokens cached per scope and refreshed before they expire, so
//! a transfer that outlives a token keeps going). Errors name the registry and, where a user can
//! fix something, say how.
//!
//! The parts: `client.rs` (one host; manifests), `token.rs` (Basic and Bearer credentials),
//! `send.rs` (authentication, retries, error answers), `error.rs` ([`RegistryError`], [`ErrorCode`]),
//! `blobs.rs` and `upload.rs`; `transport.rs` (which settings a URL gets, redirects followed hop
//! by hop) and `tls.rs` (trust: system roots, `--ca-bundle`, a self-signed registry certificate).

mod blobs;
mod client;
mod error;
mod listing;
mod send;
pub(crate) mod tls;
mod token;
mod transport;
mod upload;

pub use blobs::{Mount, Ranged};
pub use client::RegistryClient;
pub use error::{describe_transport_error, describe_web_error, ErrorCode, RegistryError};
pub use tls::check_bundle;
pub use transport::authority;
pub use upload::UploadStatus;

use super::auth::AuthFile;
use super::digest::Digest;
use super::retry::RetryPolicy;
use reqwest::header::HeaderMap;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use token::AuthState;
use tokio::sync::Mutex;
use transport::Transports;

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

type Result<T> = std::result::Result<T, RegistryError>;

/// The platform an image config names, once read (see [`Registries::config_platform`]).
pub type ConfigPlatform = Arc<tokio::sync::OnceCell<Option<String>>>;

/// Clients for every registry a run talks to, one per host, sharing options and connections.
pub struct Registries {
    options: RegistryOptions,
    transports: Arc<Transports>,
    /// Plain web downloads beside the registries (verified, and for `insecure_tls` hosts not).
    web: (reqwest::Client, reqwest::Client),
    clients: std::sync::Mutex<HashMap<String, Arc<RegistryClient>>>,
    /// The platform each image config names (`None`: it names none), by digest: set once its
    /// first read succeeds; reads of one digest at the same time wait for that one.
    config_platforms: std::sync::Mutex<HashMap<Digest, ConfigPlatform>>,
}

impl Registries {
    /// Reads the CA bundle now, so a bad `--ca-bundle` fails before any work starts.
    pub fn new(options: RegistryOptions) -> anyhow::Result<Self> {
        let extra_roots = match &options.ca_bundle {
            Some(p) => tls::read_bundle(p)?,
            None => Vec::new(),
        };
        let built = |b: reqwest::ClientBuilder| {
            b.build()
                .map_err(|e| anyhow::anyhow!("setting up the HTTP client: {e}"))
        };
        let verified_tls = tls::verified_config(extra_roots)?;
        let mut bulk_tls = verified_tls.clone();
        bulk_tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let transports = Arc::new(Transports {
            verified: built(http_client().tls_backend_preconfigured(verified_tls.clone()))?,
            insecure: built(http_client().tls_danger_accept_invalid_certs(true))?,
            verified_bulk: built(
                http_client()
                    .http1_only()
                    .tls_backend_preconfigured(bulk_tls),
            )?,
            insecure_bulk: built(
                http_client()
                    .http1_only()
                    .tls_danger_accept_invalid_certs(true),
            )?,
            plain_http: options.plain_http.clone(),
            insecure_tls: options.insecure_tls.clone(),
        });
        // The registries' settings, but a whole download is bounded and redirects are
        // followed here (a chart repository's archive URLs often redirect).
        let web = |b: reqwest::ClientBuilder, insecure: Option<Vec<String>>| {
            built(
                b.timeout(Duration::from_secs(300))
                    .redirect(web_redirects(insecure)),
            )
        };
        let web = (
            web(http_client().tls_backend_preconfigured(verified_tls), None)?,
            web(
                http_client().tls_danger_accept_invalid_certs(true),
                Some(options.insecure_tls.clone()),
            )?,
        );
        Ok(Registries {
            options,
            transports,
            web,
            clients: Default::default(),
            config_platforms: Default::default(),
        })
    }

    /// Where the platform of image config `digest` is kept for this run: read it through
    /// the cell (`get_or_try_init`), so one read serves every image sharing the config.
    pub fn config_platform(&self, digest: &Digest) -> ConfigPlatform {
        let mut known = self.config_platforms.lock().expect("config map poisoned");
        known.entry(digest.clone()).or_default().clone()
    }

    /// The client for a plain web download a run makes beside the registries (a Helm chart
    /// repository, the update graph data): the registries' trust (`--ca-bundle`; no
    /// verification only for a host named insecure), no credentials, redirects followed but
    /// never from https to http (from an insecure host only to another host named insecure).
    pub fn web(&self, url: &reqwest::Url) -> &reqwest::Client {
        if transport::names(&self.options.insecure_tls, url) {
            &self.web.1
        } else {
            &self.web.0
        }
    }

    /// The client for `host`, created on first use.
    pub fn client(&self, host: &str) -> anyhow::Result<Arc<RegistryClient>> {
        let mut clients = self.clients.lock().expect("registry client map poisoned");
        if let Some(c) = clients.get(host) {
            return Ok(c.clone());
        }
        let plain = self.options.plain_http.iter().any(|h| h == host);
        let scheme = if plain { "http" } else { "https" };
        let base = format!("{scheme}://{host}");
        let url: reqwest::Url = base
            .parse()
            .map_err(|e| anyhow::anyhow!("{host} is not a usable registry host name: {e}"))?;
        let client = Arc::new(RegistryClient {
            host: host.to_string(),
            origin: transport::Origin::of(&url),
            base,
            http: self.transports.verified.clone(),
            transports: self.transports.clone(),
            authfile: self.options.authfile.clone(),
            state: Mutex::new(AuthState::default()),
            retry: self.options.retry,
        });
        clients.insert(host.to_string(), client.clone());
        Ok(client)
    }
}

/// The settings every HTTP client shares. Redirects are not followed by reqwest: `transport.rs`
/// follows them under each target's own settings (the web clients of [`Registries::web`] set
/// a policy of their own).
fn http_client() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .user_agent(concat!("bootstrap/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(Duration::from_secs(30))
        // A last resort against an answer that never comes; bodies are watched by the stall
        // detector instead, so a big blob on a slow link is never cut for being big.
        .read_timeout(Duration::from_secs(300))
        .pool_max_idle_per_host(16)
        .redirect(reqwest::redirect::Policy::none())
}

/// Follows up to ten redirects, never from https to plain http; with `insecure` (the hosts
/// named insecure, for the client that does not verify), only to those hosts.
fn web_redirects(insecure: Option<Vec<String>>) -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(move |attempt| {
        let to = crate::secret::redact_url(attempt.url().as_str());
        let downgrade = attempt.url().scheme() == "http"
            && attempt.previous().iter().any(|u| u.scheme() == "https");
        let unverified = insecure
            .as_ref()
            .is_some_and(|hosts| !transport::names(hosts, attempt.url()));
        if downgrade {
            attempt.error(format!(
                "refusing the redirect from https to plain http ({to})"
            ))
        } else if unverified {
            attempt.error(format!(
                "refusing the redirect to {to}: only hosts named in --insecure-skip-tls-verify are reached unverified"
            ))
        } else if attempt.previous().len() > 10 {
            attempt.error("more than ten redirects")
        } else {
            attempt.follow()
        }
    })
}

/// What a repository scope allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Read.
    Pull,
    /// Read and write.
    Push,
}

fn header_str(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}
