//! Blobs: HEAD, GET (from an offset, for a resumed pull) and cross-repository mount.

use super::{header_str, Access, RegistryClient, RegistryError, Result};
use crate::oci::digest::Digest;
use crate::oci::retry::RetryPolicy;
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
        let range = (offset > 0).then(|| format!("bytes={offset}-"));
        let resp = self
            .blob_get(repo, digest, range.as_deref(), self.retry)
            .await?;
        match (resp.status(), &range) {
            (StatusCode::OK, None) => Ok(resp),
            (StatusCode::PARTIAL_CONTENT, Some(range)) => {
                self.content_range(&resp, repo, digest, range, &format!("bytes {offset}-"))?;
                Ok(resp)
            }
            (StatusCode::OK, Some(_)) => Err(self.protocol(format!(
                "blob {repo}@{digest}: the registry ignored the Range request"
            ))),
            _ => Err(self
                .api_error(format!("GET blob {repo}@{digest}"), resp)
                .await),
        }
    }

    /// Starts streaming bytes `[start, end)` of a blob (`Range: bytes=start-(end-1)`). A
    /// registry that ignores the range and answers the whole blob gets `Ranged::Whole` (usable
    /// as the blob itself when `start` is 0). With `once`, a failure is not retried (and spends
    /// nothing of a blob's retry budget).
    pub async fn get_blob_range(
        &self,
        repo: &str,
        digest: &Digest,
        (start, end): (u64, u64),
        once: bool,
    ) -> Result<Ranged> {
        let range = format!("bytes={start}-{}", end.saturating_sub(1));
        let policy = if once {
            RetryPolicy::once()
        } else {
            self.retry
        };
        let resp = self.blob_get(repo, digest, Some(&range), policy).await?;
        match resp.status() {
            StatusCode::PARTIAL_CONTENT => {
                let expected = format!("bytes {start}-{}/", end - 1);
                self.content_range(&resp, repo, digest, &range, &expected)?;
                Ok(Ranged::Partial(resp))
            }
            StatusCode::OK => Ok(Ranged::Whole(resp)),
            _ => Err(self
                .api_error(format!("GET blob {repo}@{digest} ({range})"), resp)
                .await),
        }
    }

    /// `GET` of a blob, with `Range: range` when given; a 404 is [`RegistryError::NotFound`],
    /// every other answer is the caller's to read.
    async fn blob_get(
        &self,
        repo: &str,
        digest: &Digest,
        range: Option<&str>,
        policy: RetryPolicy,
    ) -> Result<Response> {
        let url = self.url(&format!("/v2/{repo}/blobs/{digest}"));
        let resp = self
            .send_retrying(policy, &[(repo, Access::Pull)], |c| match range {
                Some(r) => c.get(&url).header(RANGE, r),
                None => c.get(&url),
            })
            .await?;
        if resp.status() == StatusCode::NOT_FOUND {
            return Err(RegistryError::NotFound {
                registry: self.host.clone(),
                what: format!("blob {repo}@{digest}"),
            });
        }
        Ok(resp)
    }

    /// Checks a `206`'s `Content-Range` starts with `expected` (the bytes asked for `range`).
    fn content_range(
        &self,
        resp: &Response,
        repo: &str,
        digest: &Digest,
        range: &str,
        expected: &str,
    ) -> Result<()> {
        match header_str(resp.headers(), "content-range") {
            Some(r) if r.starts_with(expected) => Ok(()),
            other => Err(self.protocol(format!(
                "blob {repo}@{digest}: asked for {range}, the registry answered Content-Range {}",
                other.as_deref().unwrap_or("(none)")
            ))),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oci::registry::{Registries, RegistryOptions};
    use std::sync::Arc;

    /// A registry on 127.0.0.1 that answers every blob GET with `206` and the Content-Range
    /// `bytes START-END/SIZE` it is given (whatever was asked), a 4-byte body; its host.
    async fn partial_server(content_range: &'static str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                tokio::spawn(async move {
                    // The whole request head, however it is cut into segments.
                    let (mut head, mut buf) = (Vec::new(), [0u8; 1024]);
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match sock.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let answer = format!(
                        "HTTP/1.1 206 Partial Content\r\nContent-Range: {content_range}\r\nContent-Length: 4\r\nConnection: close\r\n\r\nabcd"
                    );
                    let _ = sock.write_all(answer.as_bytes()).await;
                });
            }
        });
        addr.to_string()
    }

    fn client(host: &str) -> Arc<RegistryClient> {
        let regs = Registries::new(RegistryOptions {
            plain_http: vec![host.to_string()],
            ..Default::default()
        })
        .unwrap();
        regs.client(host).unwrap()
    }

    /// A resumed read or a piece whose `206` covers other bytes than those asked for is refused
    /// before its body is used (it would be hashed into the wrong place), naming both ranges.
    #[tokio::test]
    async fn a_partial_answer_for_other_bytes_is_refused() {
        let d = Digest::of(b"0123456789");
        let host = partial_server("bytes 0-3/10").await;
        let c = client(&host);
        let err = c.get_blob("r", &d, 6).await.unwrap_err().to_string();
        assert!(
            err.contains("asked for bytes=6-") && err.contains("Content-Range bytes 0-3/10"),
            "{err}"
        );
        let err = match c.get_blob_range("r", &d, (2, 6), true).await {
            Err(e) => e.to_string(),
            Ok(_) => panic!("a range for other bytes was taken"),
        };
        assert!(err.contains("asked for bytes=2-5"), "{err}");

        let host = partial_server("bytes 6-9/10").await;
        let c = client(&host);
        assert!(c.get_blob("r", &d, 6).await.is_ok());
        let host = partial_server("bytes 2-5/10").await;
        assert!(matches!(
            client(&host).get_blob_range("r", &d, (2, 6), false).await,
            Ok(Ranged::Partial(_))
        ));
    }
}
