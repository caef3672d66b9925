//! The distribution API over reqwest: manifests, blobs, uploads, cross-repository mounts, with
//! Basic and Bearer authentication (tokens cached per scope and refreshed before they expire, so
//! a transfer that outlives a token keeps going). Errors name the registry and, where a user can
//! fix something, say how.
//!
//! The parts: `client.rs` (one host; manifests), `token.rs` (Basic and Bearer credentials),
//! `send.rs` (authentication, retries, error answers), `error.rs` ([`RegistryError`], [`ErrorCode`]),
//! `blobs.rs` and `upload.rs`.

mod blobs;
mod client;
mod error;
mod send;
mod token;
mod upload;

pub use blobs::Mount;
pub use client::RegistryClient;
pub use error::{describe_transport_error, ErrorCode, RegistryError};
pub use upload::UploadStatus;

use super::auth::AuthFile;
use super::retry::RetryPolicy;
use reqwest::header::HeaderMap;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use token::AuthState;
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

fn header_str(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}
