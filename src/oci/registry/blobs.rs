//! Blobs: HEAD, GET (from an offset, for a resumed pull) and cross-repository mount.

use super::{header_str, Access, RegistryClient, RegistryError, Result};
use crate::oci::digest::Digest;
use reqwest::header::{CONTENT_LENGTH, RANGE};
use reqwest::{Response, StatusCode};

/// The result of asking the destination to mount a blob from another repository.
#[derive(Debug)]
pub enum Mount {
    /// The blob now exists in the repository.
    Mounted,
    /// The registry opened an upload session instead; its location.
    Upload(String),
}

/// The answer to a ranged blob GET.
#[derive(Debug)]
pub enum Ranged {
    /// `206`: the bytes asked for.
    Partial(Response),
    /// `200`: the registry ignored the range and sends the whole blob.
    Whole(Response),
}

impl RegistryClient {
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

    /// Starts streaming bytes `[start, end)` of a blob (`Range: bytes=start-(end-1)`). A
    /// registry that ignores the range and answers the whole blob gets `Ranged::Whole` (usable
    /// as the blob itself when `start` is 0).
    pub async fn get_blob_range(
        &self,
        repo: &str,
        digest: &Digest,
        start: u64,
        end: u64,
    ) -> Result<Ranged> {
        let url = self.url(&format!("/v2/{repo}/blobs/{digest}"));
        let range = format!("bytes={start}-{}", end.saturating_sub(1));
        let resp = self
            .send(&[(repo, Access::Pull)], |c| {
                c.get(&url).header(RANGE, range.as_str())
            })
            .await?;
        match resp.status() {
            StatusCode::PARTIAL_CONTENT => {
                let answered = header_str(resp.headers(), "content-range");
                let expected = format!("bytes {start}-{}/", end - 1);
                match answered {
                    Some(r) if r.starts_with(&expected) => Ok(Ranged::Partial(resp)),
                    other => Err(self.protocol(format!(
                        "blob {repo}@{digest}: asked for {range}, the registry answered Content-Range {}",
                        other.as_deref().unwrap_or("(none)")
                    ))),
                }
            }
            StatusCode::OK => Ok(Ranged::Whole(resp)),
            StatusCode::NOT_FOUND => Err(RegistryError::NotFound {
                registry: self.host.clone(),
                what: format!("blob {repo}@{digest}"),
            }),
            _ => Err(self
                .api_error(format!("GET blob {repo}@{digest} ({range})"), resp)
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
}
