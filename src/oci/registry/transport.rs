//! Where a request may go, and over what: every request, whether to the registry, its token
//! realm, an upload `Location` or a redirect's target, uses the plain-HTTP and TLS settings of
//! the host it goes to, never those of the host that sent us there. Plain HTTP only to hosts
//! named in `--plain-http`, unverified TLS only to hosts named in `--insecure-skip-tls-verify`,
//! and credentials only to the host they were meant for; a redirect to another host drops them.
//! Redirects are followed here, one hop at a time, so each hop is checked (reqwest's own policy
//! would follow them under the first host's client).

use super::error::{describe_transport_error, transport_is_transient};
use super::{RegistryClient, RegistryError, Result};
use reqwest::header::{AUTHORIZATION, LOCATION};
use reqwest::{Method, Request, RequestBuilder, Response, StatusCode, Url};

/// Most redirects one request follows (reqwest's default policy allows ten; registries that
/// redirect blobs to storage use one).
const MAX_REDIRECTS: usize = 5;

/// The HTTP clients every registry shares (each pools connections per host), and the hosts the
/// user named as exceptions.
///
/// Blob bodies go over HTTP/1.1 connections of their own (the `_bulk` clients), one stream per
/// connection; everything else (manifests, HEADs, tokens, upload sessions) may share an HTTP/2
/// connection. Over TLS a registry offers HTTP/2, and one connection multiplexing every blob in
/// flight to a host is bound by that one TCP stream's window and by one server goroutine's
/// TLS: measured on loopback, the same mirror took 0.85-0.97x of skopeo's time with a
/// connection per blob against 1.05-1.17x multiplexed (issue 17).
pub(super) struct Transports {
    /// Verifies TLS against the system roots, `--ca-bundle`, and a self-signed certificate
    /// given there (see `tls.rs`).
    pub(super) verified: reqwest::Client,
    /// Accepts any certificate; used only for hosts named in `--insecure-skip-tls-verify`.
    pub(super) insecure: reqwest::Client,
    /// `verified` for blob bodies: HTTP/1.1 only (ALPN offers nothing else).
    pub(super) verified_bulk: reqwest::Client,
    /// `insecure` for blob bodies: HTTP/1.1 only.
    pub(super) insecure_bulk: reqwest::Client,
    pub(super) plain_http: Vec<String>,
    pub(super) insecure_tls: Vec<String>,
}

impl Transports {
    /// The client for `url`, or why the request may not go there. `asked_by` is the host that
    /// sent us to `url` and `what` names the request (for the refusal); `bulk` asks for the
    /// HTTP/1.1 client of blob bodies.
    pub(super) fn client_for(
        &self,
        url: &Url,
        asked_by: &str,
        what: &str,
        bulk: bool,
    ) -> std::result::Result<&reqwest::Client, String> {
        let authority = authority(url);
        let (verified, insecure) = if bulk {
            (&self.verified_bulk, &self.insecure_bulk)
        } else {
            (&self.verified, &self.insecure)
        };
        match url.scheme() {
            "https" if names(&self.insecure_tls, url) => Ok(insecure),
            "https" => Ok(verified),
            "http" if names(&self.plain_http, url) => Ok(verified),
            "http" => Err(format!(
                "{asked_by} sent bootstrap to plain HTTP for {what} ({}), and {authority} is not named in --plain-http: credentials and blobs are never sent in clear. Have the registry (or the TLS proxy in front of it) send https:// URLs, or pass --plain-http {authority} if that host is meant to speak plain HTTP",
                without_query(url)
            )),
            other => Err(format!(
                "{asked_by} sent bootstrap to a {other}: URL for {what} ({}); only https:// (and http:// for hosts named in --plain-http) are followed",
                without_query(url)
            )),
        }
    }
}

/// Scheme, host and port (the default one when the URL names none): where a credential may go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Origin(String, String, Option<u16>);

impl Origin {
    pub(super) fn of(url: &Url) -> Origin {
        Origin(
            url.scheme().to_string(),
            url.host_str().unwrap_or_default().to_ascii_lowercase(),
            url.port_or_known_default(),
        )
    }
}

/// `host[:port]` of a URL, as users write it in `--plain-http` and image references.
pub fn authority(url: &Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    }
}

/// True when `list` names the URL's host: as `host:port`, or as `host` alone when the URL uses
/// its scheme's default port (`registry.example` is `registry.example:443` over https).
pub(super) fn names(list: &[String], url: &Url) -> bool {
    let host = url.host_str().unwrap_or_default();
    let with_default = url
        .port_or_known_default()
        .map(|p| format!("{host}:{p}"))
        .unwrap_or_default();
    list.iter()
        .any(|h| *h == authority(url) || (url.port().is_none() && h == host) || *h == with_default)
}

/// A URL without its query (an upload URL's query carries the registry's signed `_state`).
pub(super) fn without_query(url: &Url) -> String {
    let mut shown = url.clone();
    shown.set_query(None);
    shown.set_fragment(None);
    shown.to_string()
}

impl RegistryClient {
    /// Sends `req`, following redirects hop by hop under each target's own settings.
    /// `credential` is an `Authorization` value and the origin it may go to (the registry, or
    /// its token realm); a hop to any other origin goes without it.
    pub(super) async fn route(
        &self,
        req: RequestBuilder,
        credential: Option<(String, Origin)>,
        what: &str,
    ) -> Result<Response> {
        let (_, built) = req.build_split();
        let mut request = built.map_err(|e| self.protocol(format!("building {what}: {e}")))?;
        let mut asked_by = self.host.clone();
        let mut hop = 0;
        // Decided on the first hop: a blob GET redirected to storage stays bulk.
        let bulk = carries_blob(&request);
        loop {
            let target = authority(request.url());
            let client = self
                .transports
                .client_for(request.url(), &asked_by, what, bulk)
                .map_err(|message| RegistryError::Downgrade {
                    registry: self.host.clone(),
                    message,
                })?;
            request.headers_mut().remove(AUTHORIZATION);
            if let Some((value, to)) = &credential {
                if *to == Origin::of(request.url()) {
                    let value = value
                        .parse()
                        .map_err(|_| self.protocol("an unusable Authorization value".into()))?;
                    request.headers_mut().insert(AUTHORIZATION, value);
                }
            }
            let again = request.try_clone();
            let resp = client
                .execute(request)
                .await
                .map_err(|e| self.hop_error(e, &target, hop))?;
            let Some(next) = redirect_target(&resp) else {
                return Ok(resp);
            };
            // A body that can be sent only once cannot follow a redirect: the answer goes
            // back as it is, and the caller reports it.
            let Some(mut again) = again else {
                return Ok(resp);
            };
            if hop == MAX_REDIRECTS {
                return Err(self.protocol(format!(
                    "{what}: more than {MAX_REDIRECTS} redirects (last from {target})"
                )));
            }
            tracing::debug!(
                "{}: {what}: {target} redirected to {}",
                self.host,
                without_query(&next)
            );
            follow(&mut again, resp.status(), next);
            crate::oci::stream::discard_body(resp).await;
            asked_by = format!("{target} (a redirect)");
            request = again;
            hop += 1;
        }
    }

    /// A transport error on a hop: named after the host it went to, and after the registry
    /// that sent us there when that is another host.
    fn hop_error(&self, e: reqwest::Error, target: &str, hop: usize) -> RegistryError {
        if let Some(mismatch) = super::error::body_mismatch(&e) {
            return RegistryError::CorruptBody(mismatch);
        }
        let mut message = describe_transport_error(target, &e);
        if hop > 0 || target != self.host {
            message = format!("(sent to {target}) {message}");
        }
        RegistryError::Connect {
            registry: self.host.clone(),
            message,
            transient: transport_is_transient(&e),
        }
    }
}

/// True for a request whose body, or whose answer's body, is a blob: a blob GET, an upload's
/// PATCH, a PUT with a body to an upload location. These go over HTTP/1.1 (see [`Transports`]).
fn carries_blob(request: &Request) -> bool {
    let path = request.url().path();
    match *request.method() {
        Method::GET => path.contains("/blobs/"),
        Method::PATCH => true,
        Method::PUT => request.body().is_some() && !path.contains("/manifests/"),
        _ => false,
    }
}

/// Where a redirect answer points, resolved against the request's URL.
fn redirect_target(resp: &Response) -> Option<Url> {
    let redirect = matches!(
        resp.status(),
        StatusCode::MOVED_PERMANENTLY
            | StatusCode::FOUND
            | StatusCode::SEE_OTHER
            | StatusCode::TEMPORARY_REDIRECT
            | StatusCode::PERMANENT_REDIRECT
    );
    if !redirect {
        return None;
    }
    let location = resp.headers().get(LOCATION)?.to_str().ok()?;
    resp.url().join(location).ok()
}

/// Turns `request` into the redirect's: the new URL, and for 303 (and 301/302 after a POST, as
/// browsers and reqwest do) a bodiless GET.
fn follow(request: &mut Request, status: StatusCode, next: Url) {
    let to_get = status == StatusCode::SEE_OTHER
        || (matches!(status, StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND)
            && request.method() == Method::POST);
    if to_get {
        *request.method_mut() = Method::GET;
        *request.body_mut() = None;
        request
            .headers_mut()
            .remove(reqwest::header::CONTENT_LENGTH);
        request.headers_mut().remove(reqwest::header::CONTENT_TYPE);
    }
    *request.url_mut() = next;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transports() -> Transports {
        Transports {
            verified: reqwest::Client::new(),
            insecure: reqwest::Client::new(),
            verified_bulk: reqwest::Client::new(),
            insecure_bulk: reqwest::Client::new(),
            plain_http: vec!["plain.example:5000".into(), "bare.example".into()],
            insecure_tls: vec!["self.example:8443".into()],
        }
    }

    fn url(s: &str) -> Url {
        s.parse().unwrap()
    }

    /// Plain HTTP goes only to a host named in --plain-http (with its port, or bare on the
    /// default port); the refusal names who asked, the host, and the flag.
    #[test]
    fn plain_http_goes_only_to_hosts_named_plain() {
        let t = transports();
        assert!(t
            .client_for(&url("http://plain.example:5000/v2/"), "r", "x", false)
            .is_ok());
        assert!(t
            .client_for(&url("http://bare.example/v2/"), "r", "x", false)
            .is_ok());
        assert!(t
            .client_for(&url("http://bare.example:80/v2/"), "r", "x", false)
            .is_ok());
        let refused = t
            .client_for(
                &url("http://evil.example:8080/token?secret=1"),
                "registry.example",
                "the token realm",
                false,
            )
            .unwrap_err();
        assert!(refused.starts_with("registry.example sent bootstrap to plain HTTP for the token realm (http://evil.example:8080/token)"), "{refused}");
        assert!(
            refused.contains("--plain-http evil.example:8080"),
            "{refused}"
        );
        assert!(!refused.contains("secret"), "{refused}");
        assert!(t.client_for(&url("ftp://x/"), "r", "x", false).is_err());
    }

    /// Unverified TLS only for the exact host named; another port of the same host verifies.
    #[test]
    fn unverified_tls_only_for_hosts_named_insecure() {
        let t = transports();
        let insecure = t
            .client_for(&url("https://self.example:8443/v2/"), "r", "x", false)
            .unwrap() as *const _;
        let other = t
            .client_for(&url("https://self.example:9443/v2/"), "r", "x", false)
            .unwrap() as *const _;
        assert_eq!(insecure, &t.insecure as *const _);
        assert_eq!(other, &t.verified as *const _);
        let bulk = t
            .client_for(&url("https://self.example:8443/v2/"), "r", "x", true)
            .unwrap() as *const _;
        assert_eq!(bulk, &t.insecure_bulk as *const _);
    }

    /// Blob bodies, either way, take the HTTP/1.1 clients; manifests, HEADs and session
    /// requests without a body do not.
    #[test]
    fn blob_bodies_are_bulk_and_the_rest_is_not() {
        let c = reqwest::Client::new();
        let base = "https://r.example/v2/a/b";
        let bulk = |r: reqwest::RequestBuilder| carries_blob(&r.build().unwrap());
        assert!(bulk(c.get(format!("{base}/blobs/sha256:aa"))));
        assert!(bulk(c.patch(format!("{base}/blobs/uploads/u1")).body("x")));
        assert!(bulk(
            c.put(format!("{base}/blobs/uploads/u1?digest=sha256:aa"))
                .body("x")
        ));
        assert!(!bulk(
            c.put(format!("{base}/blobs/uploads/u1?digest=sha256:aa"))
        ));
        assert!(!bulk(c.put(format!("{base}/manifests/v1")).body("{}")));
        assert!(!bulk(c.get(format!("{base}/manifests/v1"))));
        assert!(!bulk(c.head(format!("{base}/blobs/sha256:aa"))));
        assert!(!bulk(c.post(format!("{base}/blobs/uploads/"))));
    }
}
