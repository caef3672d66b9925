//! One registry host: its HTTP client and credentials, the API's entry point (`/v2/`) and
//! manifests.

use super::token::AuthState;
use super::{header_str, Access, RegistryError, Result};
use crate::oci::auth::AuthFile;
use crate::oci::digest::Digest;
use crate::oci::manifest::{RawManifest, ACCEPT, MAX_MANIFEST_BYTES};
use crate::oci::retry::RetryPolicy;
use reqwest::header::{ACCEPT as ACCEPT_HEADER, CONTENT_TYPE};
use reqwest::StatusCode;
use tokio::sync::Mutex;

/// One registry host.
pub struct RegistryClient {
    pub(super) host: String,
    /// Where the registry's own credentials may go.
    pub(super) origin: super::transport::Origin,
    pub(super) base: String,
    /// Builds requests; [`Self::route`] chooses the client that sends each one.
    pub(super) http: reqwest::Client,
    pub(super) transports: std::sync::Arc<super::transport::Transports>,
    pub(super) authfile: AuthFile,
    pub(super) state: Mutex<AuthState>,
    pub(super) retry: RetryPolicy,
}

impl RegistryClient {
    /// The host this client speaks to.
    pub fn host(&self) -> &str {
        &self.host
    }

    pub(super) fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// Absolute URL for a `Location` header (which may be relative).
    pub(super) fn absolute(&self, location: &str) -> String {
        if location.starts_with("http://") || location.starts_with("https://") {
            location.to_string()
        } else {
            self.url(location)
        }
    }

    /// Makes sure credentials for these scopes are known (a token fetched if the registry wants
    /// one) before a request whose body can only be sent once.
    pub async fn prime(&self, scopes: &[(&str, Access)]) -> Result<()> {
        let resp = self.send(scopes, |c| c.get(self.url("/v2/"))).await?;
        crate::oci::stream::discard_body(resp).await;
        Ok(())
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
        let too_large = format!("{what} is larger than the 4 MiB manifest limit");
        let bytes = self
            .small_body(resp, MAX_MANIFEST_BYTES, &too_large)
            .await?;
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
}
