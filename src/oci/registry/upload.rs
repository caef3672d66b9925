//! Blob uploads: a session opened, sent in one `PUT` or in `PATCH` chunks, asked where it stands
//! (to resume), committed with its digest, or abandoned.

use super::{header_str, Access, RegistryClient, Result};
use crate::oci::digest::Digest;
use bytes::Bytes;
use futures_util::Stream;
use reqwest::header::{HeaderMap, CONTENT_LENGTH, CONTENT_TYPE, LOCATION, RANGE};
use reqwest::{Response, StatusCode};

/// Where an upload session stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UploadStatus {
    /// Bytes the registry holds.
    pub offset: u64,
    /// The location to continue at (it changes with every request on Distribution).
    pub location: String,
}

impl RegistryClient {
    /// The upload `Location` of an answer, made absolute, and checked before anything goes
    /// there: a TLS-terminating proxy that rewrites it to `http://` must not get the
    /// credentials and the blob in clear.
    pub(super) fn location(&self, resp: &Response, repo: &str) -> Result<String> {
        let location = header_str(resp.headers(), LOCATION.as_str())
            .map(|l| self.absolute(&l))
            .ok_or_else(|| {
                self.protocol(format!("upload to {repo}: the registry sent no Location"))
            })?;
        let url: reqwest::Url = location.parse().map_err(|_| {
            self.protocol(format!(
                "upload to {repo}: the registry sent a Location that is not a URL"
            ))
        })?;
        self.transports
            .client_for(&url, &self.host, &format!("the upload to {repo}"), true)
            .map_err(|message| super::RegistryError::Downgrade {
                registry: self.host.clone(),
                message,
            })?;
        Ok(location)
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
            crate::oci::stream::discard_body(resp).await;
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
