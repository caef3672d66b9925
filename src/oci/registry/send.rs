//! Sending a request: authenticated on the registry's challenge, retried under the client's
//! policy when the failure may pass, and a failed answer read into a [`RegistryError`] with the
//! spec error code.

use super::error::{
    describe_transport_error, retryable_status, spec_errors, transport_is_transient,
};
use super::{header_str, Access, RegistryClient, RegistryError, Result};
use crate::oci::auth::{parse_challenge, Challenge};
use crate::oci::retry::RetryPolicy;
use reqwest::header::{HeaderMap, WWW_AUTHENTICATE};
use reqwest::{RequestBuilder, Response, StatusCode};
use std::time::{Duration, Instant};

impl RegistryClient {
    /// The body of a small answer (a manifest, a tag list page), at most `limit` bytes: a cut
    /// connection is a connection error (it may pass), anything else a protocol error that
    /// says `what` and why.
    pub(super) async fn small_body(
        &self,
        resp: Response,
        limit: usize,
        what: &str,
    ) -> Result<bytes::Bytes> {
        match crate::oci::stream::read_body(resp, limit).await {
            Ok(b) => Ok(b),
            Err(crate::oci::stream::BodyError::Transport(e)) => Err(self.connect_error(e)),
            Err(e) => Err(self.protocol(format!("{what}: {e}"))),
        }
    }

    pub(super) fn connect_error(&self, e: reqwest::Error) -> RegistryError {
        RegistryError::Connect {
            registry: self.host.clone(),
            message: describe_transport_error(&self.host, &e),
            transient: transport_is_transient(&e),
        }
    }

    /// Sends a request built by `build` under the client's retry policy: connection errors,
    /// 5xx and 429 answers are tried again after a backoff (or the `Retry-After` sent). When
    /// the tries run out, the last failure is returned and says how many tries it took.
    pub(super) async fn send(
        &self,
        scopes: &[(&str, Access)],
        build: impl Fn(&reqwest::Client) -> RequestBuilder,
    ) -> Result<Response> {
        self.send_retrying(self.retry, scopes, build).await
    }

    pub(super) async fn send_retrying(
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
            let gave_up = attempt >= policy.attempts || !crate::oci::retry::may_retry();
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
                    crate::oci::stream::discard_body(resp).await;
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
        let header = header_str(resp.headers(), WWW_AUTHENTICATE.as_str());
        let challenge = header.as_deref().and_then(parse_challenge);
        let Some(c) = challenge.clone() else {
            return Err(self.no_usable_challenge(header.as_deref()));
        };
        self.state.lock().await.mode = Some(c);
        let creds = self.credentials(scopes);
        if matches!(challenge, Some(Challenge::Basic)) && creds.is_none() {
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

    /// A 401 whose challenge names no way to log in: said as such, not as refused credentials
    /// (which would send the engineer to check a password that was never asked for).
    fn no_usable_challenge(&self, header: Option<&str>) -> RegistryError {
        let host = &self.host;
        let message = match header {
            None => format!(
                "{host} answered 401 without a WWW-Authenticate challenge, so it names no way to log in: is it a registry, or is a proxy in the way?"
            ),
            Some(h) => format!(
                "{host} answered 401 with a challenge bootstrap cannot use ({}): a registry asks for Basic, or for Bearer with a realm=\"https://...\" token service",
                crate::secret::server_text(h, 160)
            ),
        };
        RegistryError::Unauthorized {
            registry: host.clone(),
            message,
        }
    }

    async fn send_with(&self, req: RequestBuilder, auth: Option<String>) -> Result<Response> {
        let what = describe_request(&req);
        let credential = auth.map(|a| (a, self.origin.clone()));
        self.route(req, credential, &what).await
    }

    /// Sends a request whose body can be sent only once: no retry here (the caller resumes
    /// from the registry's offset). A 401 drops the cached token, so the retry gets a new one.
    pub(super) async fn send_one_shot(&self, repo: &str, req: RequestBuilder) -> Result<Response> {
        let scopes = [(repo, Access::Push)];
        let auth = self.authorization(&scopes, false).await?;
        let resp = self.send_with(req, auth).await?;
        if resp.status() == StatusCode::UNAUTHORIZED {
            self.forget_token(&scopes).await;
        }
        Ok(resp)
    }

    pub(super) async fn api_error(&self, action: String, resp: Response) -> RegistryError {
        let status = resp.status().as_u16();
        let retry_after = retry_after_header(resp.headers());
        let (body, cut) =
            crate::oci::stream::read_body_prefix(resp, crate::oci::stream::ERROR_BODY_MAX).await;
        let (codes, mut message) = spec_errors(&body);
        if cut {
            message.push_str(&format!(
                " (the error body was cut at {} bytes)",
                crate::oci::stream::ERROR_BODY_MAX
            ));
        }
        RegistryError::Api {
            registry: self.host.clone(),
            action,
            status,
            codes,
            message,
            retry_after,
        }
    }

    pub(super) fn protocol(&self, message: String) -> RegistryError {
        RegistryError::Protocol {
            registry: self.host.clone(),
            message,
        }
    }
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
