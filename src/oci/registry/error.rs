//! What can go wrong talking to a registry, typed so callers branch on the kind (a missing blob
//! is not an error for a HEAD; an expired token is retried), and transport failures turned into
//! sentences that say what to do. A failed answer's spec error codes are typed ([`ErrorCode`]),
//! so callers match a variant instead of searching text.

use crate::oci::digest::DigestMismatch;
use std::fmt;
use std::time::Duration;

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
    /// The request's own body failed its digest check while it was being sent: the content
    /// came corrupt from where the caller read it, not from this registry.
    #[error(transparent)]
    CorruptBody(#[from] DigestMismatch),
    /// A registry, token realm or redirect sent us somewhere its settings do not allow: plain
    /// HTTP to a host not named in `--plain-http`, or a scheme we do not speak. Nothing was
    /// sent there; the message names who asked, where, and the flag that would allow it.
    #[error("{registry}: {message}")]
    Downgrade {
        /// The registry the request was for.
        registry: String,
        /// Who asked, where to, and the fix.
        message: String,
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
    /// Any other non-success answer, with the spec error codes when the body had them.
    #[error("{registry}: {action} failed: HTTP {status}{}", spec_detail(.codes, .message))]
    Api {
        /// Host.
        registry: String,
        /// What was attempted, e.g. `PUT manifest a/b:v1`.
        action: String,
        /// HTTP status.
        status: u16,
        /// The spec error codes, in the body's order (empty when the body had none).
        codes: Vec<ErrorCode>,
        /// The spec error messages, joined with `; `.
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

/// An error code of the distribution spec, as a failed answer's body carries it
/// (`{"errors":[{"code":"BLOB_UNKNOWN","message":...}]}`); typed as oci-client types them. A
/// code the spec does not define (a registry's own, or a newer one) is kept as `Other`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Deserialize)]
#[serde(from = "String")]
pub enum ErrorCode {
    /// `BLOB_UNKNOWN`: the blob is not in the repository.
    BlobUnknown,
    /// `BLOB_UPLOAD_INVALID`: the upload failed and cannot go on.
    BlobUploadInvalid,
    /// `BLOB_UPLOAD_UNKNOWN`: the registry does not know the upload session.
    BlobUploadUnknown,
    /// `DIGEST_INVALID`: the content did not match its digest.
    DigestInvalid,
    /// `MANIFEST_BLOB_UNKNOWN`: a manifest references a blob (or child manifest) the repository
    /// does not have.
    ManifestBlobUnknown,
    /// `MANIFEST_INVALID`: the manifest failed the registry's checks.
    ManifestInvalid,
    /// `MANIFEST_UNKNOWN`: no such manifest.
    ManifestUnknown,
    /// `NAME_INVALID`: an invalid repository name.
    NameInvalid,
    /// `NAME_UNKNOWN`: no such repository.
    NameUnknown,
    /// `SIZE_INVALID`: the content's length did not match.
    SizeInvalid,
    /// `UNAUTHORIZED`: authentication is required.
    Unauthorized,
    /// `DENIED`: access to the resource is denied.
    Denied,
    /// `UNSUPPORTED`: the operation is not supported.
    Unsupported,
    /// `TOOMANYREQUESTS`: rate limited.
    TooManyRequests,
    /// Any other code, as sent.
    Other(String),
}

impl ErrorCode {
    /// The code as it is written on the wire (`MANIFEST_BLOB_UNKNOWN`).
    pub fn as_str(&self) -> &str {
        match self {
            ErrorCode::BlobUnknown => "BLOB_UNKNOWN",
            ErrorCode::BlobUploadInvalid => "BLOB_UPLOAD_INVALID",
            ErrorCode::BlobUploadUnknown => "BLOB_UPLOAD_UNKNOWN",
            ErrorCode::DigestInvalid => "DIGEST_INVALID",
            ErrorCode::ManifestBlobUnknown => "MANIFEST_BLOB_UNKNOWN",
            ErrorCode::ManifestInvalid => "MANIFEST_INVALID",
            ErrorCode::ManifestUnknown => "MANIFEST_UNKNOWN",
            ErrorCode::NameInvalid => "NAME_INVALID",
            ErrorCode::NameUnknown => "NAME_UNKNOWN",
            ErrorCode::SizeInvalid => "SIZE_INVALID",
            ErrorCode::Unauthorized => "UNAUTHORIZED",
            ErrorCode::Denied => "DENIED",
            ErrorCode::Unsupported => "UNSUPPORTED",
            ErrorCode::TooManyRequests => "TOOMANYREQUESTS",
            ErrorCode::Other(code) => code,
        }
    }
}

impl From<String> for ErrorCode {
    /// The code written `code` on the wire; the spec's codes are upper case and matched exactly.
    fn from(code: String) -> Self {
        match code.as_str() {
            "BLOB_UNKNOWN" => ErrorCode::BlobUnknown,
            "BLOB_UPLOAD_INVALID" => ErrorCode::BlobUploadInvalid,
            "BLOB_UPLOAD_UNKNOWN" => ErrorCode::BlobUploadUnknown,
            "DIGEST_INVALID" => ErrorCode::DigestInvalid,
            "MANIFEST_BLOB_UNKNOWN" => ErrorCode::ManifestBlobUnknown,
            "MANIFEST_INVALID" => ErrorCode::ManifestInvalid,
            "MANIFEST_UNKNOWN" => ErrorCode::ManifestUnknown,
            "NAME_INVALID" => ErrorCode::NameInvalid,
            "NAME_UNKNOWN" => ErrorCode::NameUnknown,
            "SIZE_INVALID" => ErrorCode::SizeInvalid,
            "UNAUTHORIZED" => ErrorCode::Unauthorized,
            "DENIED" => ErrorCode::Denied,
            "UNSUPPORTED" => ErrorCode::Unsupported,
            "TOOMANYREQUESTS" => ErrorCode::TooManyRequests,
            _ => ErrorCode::Other(code),
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The spec error codes and messages of a failed answer's body: `(codes, messages joined with
/// "; ")`; nothing when the body is not a spec error document.
pub(super) fn spec_errors(body: &[u8]) -> (Vec<ErrorCode>, String) {
    #[derive(serde::Deserialize)]
    struct Body {
        errors: Vec<Entry>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        code: ErrorCode,
        #[serde(default)]
        message: String,
    }
    match serde_json::from_slice::<Body>(body) {
        Ok(b) => {
            let messages: Vec<&str> = b.errors.iter().map(|e| e.message.as_str()).collect();
            // The server's words, cut and cleaned: a hostile registry cannot flood the log.
            let message = crate::secret::server_text(&messages.join("; "), 300);
            (b.errors.into_iter().map(|e| e.code).collect(), message)
        }
        Err(_) => (Vec::new(), String::new()),
    }
}

/// ` CODE,CODE: message` for [`RegistryError::Api`]'s message; empty without codes.
fn spec_detail(codes: &[ErrorCode], message: &str) -> String {
    if codes.is_empty() {
        return String::new();
    }
    let codes: Vec<&str> = codes.iter().map(ErrorCode::as_str).collect();
    format!(" {}: {message}", codes.join(","))
}

impl RegistryError {
    /// The spec error codes the registry sent with this answer.
    pub fn codes(&self) -> &[ErrorCode] {
        match self {
            RegistryError::Api { codes, .. } => codes,
            _ => &[],
        }
    }

    /// True when the registry sent `code` with this answer.
    pub fn has_code(&self, code: ErrorCode) -> bool {
        self.codes().contains(&code)
    }

    /// True when the same request may succeed if tried again: a connection that dropped, a
    /// 5xx or 429 answer, a token the registry stopped accepting mid-transfer.
    pub fn is_transient(&self) -> bool {
        match self {
            RegistryError::Connect { transient, .. } => *transient,
            RegistryError::Api { status, .. } => retryable_status(*status),
            // Corrupted on the way to us, perhaps: the blob starts over from its source.
            RegistryError::CorruptBody(_) => true,
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

    /// The same error, saying it is the last of `attempts` tries over `elapsed`.
    pub(super) fn after_attempts(self, attempts: u32, elapsed: Duration) -> Self {
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

/// Answers worth trying again: 429, 5xx but 501 and 505, and 401 on a one-shot body (the
/// token expired in flight; the retry fetches a new one).
pub(super) fn retryable_status(status: u16) -> bool {
    matches!(status, 401 | 408 | 429 | 500 | 502 | 503 | 504)
}

/// What a transport error means for the user: one reading of the error chain, used both to
/// decide whether to try again and to say what to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TransportProblem {
    /// The certificate is signed by an authority we do not trust.
    UnknownIssuer,
    /// The server presents a CA certificate as its own: self-signed, as `openssl req -x509`
    /// makes it, and not given in `--ca-bundle`.
    SelfSignedCa,
    /// The certificate names another host.
    WrongName,
    /// The certificate expired (or is not valid yet).
    Expired,
    /// Another certificate problem.
    Untrusted,
    /// Nothing listens there.
    Refused,
    /// The host name does not resolve.
    Dns,
    /// The peer answered in plain HTTP to our TLS handshake.
    NotTls,
    /// No answer in time.
    Timeout,
    /// Anything else (resets, cut connections).
    Other,
}

impl TransportProblem {
    fn of(e: &reqwest::Error, chain: &str) -> Self {
        Self::read(chain, e.is_timeout())
    }

    /// Reads an error chain's text (rustls and hyper name the problem in it).
    fn read(chain: &str, timeout: bool) -> Self {
        let lower = chain.to_ascii_lowercase();
        let has = |words: &[&str]| words.iter().any(|w| lower.contains(w));
        if has(&["notvalidforname", "not valid for name"]) {
            TransportProblem::WrongName
        } else if has(&["expired", "notvalidyet", "not valid yet"]) && has(&["certificate"]) {
            TransportProblem::Expired
        } else if has(&["causedasendentity"]) {
            TransportProblem::SelfSignedCa
        } else if has(&["unknownissuer", "unknown issuer"]) {
            TransportProblem::UnknownIssuer
        } else if has(&["certificate", "invalid peer"]) {
            TransportProblem::Untrusted
        } else if has(&["connection refused"]) {
            TransportProblem::Refused
        } else if has(&["dns error", "failed to lookup", "name or service not known"]) {
            TransportProblem::Dns
        } else if has(&[
            "invalid http version",
            "wrong version number",
            "corrupt message",
            "invalidcontenttype",
            "received corrupt",
        ]) {
            TransportProblem::NotTls
        } else if timeout {
            TransportProblem::Timeout
        } else {
            TransportProblem::Other
        }
    }

    /// Trust problems, unknown names and a peer that does not speak TLS will not pass by
    /// trying again; resets, timeouts and refused connections may.
    fn is_transient(self) -> bool {
        matches!(
            self,
            TransportProblem::Refused | TransportProblem::Timeout | TransportProblem::Other
        )
    }
}

/// The digest mismatch a request body stream failed with, if that is why the request failed
/// (the verifying reader puts it inside an `io::Error` that reqwest and hyper wrap).
pub(super) fn body_mismatch(e: &reqwest::Error) -> Option<DigestMismatch> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        let found = s.downcast_ref::<DigestMismatch>().or_else(|| {
            s.downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .and_then(|inner| inner.downcast_ref::<DigestMismatch>())
        });
        if let Some(m) = found {
            return Some(DigestMismatch {
                what: m.what.clone(),
                expected: m.expected.clone(),
                actual: m.actual.clone(),
                expected_size: m.expected_size,
                actual_size: m.actual_size,
            });
        }
        source = s.source();
    }
    None
}

/// The error and its sources, joined with `: `, without the request's URL: an upload URL
/// carries the registry's signed `_state`, which is not for logs.
fn chain_of(e: &reqwest::Error) -> String {
    let mut chain = String::new();
    let mut source: Option<&dyn std::error::Error> = Some(e);
    while let Some(s) = source {
        chain.push_str(&s.to_string());
        chain.push_str(": ");
        source = s.source();
    }
    chain.truncate(chain.trim_end_matches(": ").len());
    while let Some(start) = chain.find(" for url (") {
        let end = chain[start..]
            .find(')')
            .map_or(chain.len(), |i| start + i + 1);
        chain.replace_range(start..end, "");
    }
    chain
}

/// Whether a transport error may pass: resets, timeouts and refused connections may; TLS
/// trust problems, unknown host names and a plain-HTTP peer will not.
pub(super) fn transport_is_transient(e: &reqwest::Error) -> bool {
    let chain = format!("{} {e:?}", chain_of(e));
    TransportProblem::of(e, &chain).is_transient()
}

/// Turns a transport error into a sentence that says what to do.
/// [`describe_transport_error`] for a plain web download (a chart repository, the graph data),
/// where plain HTTP is chosen by the URL's scheme, not by `--plain-http`.
pub fn describe_web_error(target: &str, e: &reqwest::Error) -> String {
    let chain = chain_of(e);
    match TransportProblem::of(e, &format!("{chain} {e:?}")) {
        TransportProblem::NotTls => {
            format!("{target} does not speak TLS: if it serves plain HTTP, give its URL as http://")
        }
        _ => describe_transport_error(target, e),
    }
}

pub fn describe_transport_error(target: &str, e: &reqwest::Error) -> String {
    let chain = chain_of(e);
    match TransportProblem::of(e, &format!("{chain} {e:?}")) {
        problem @ (TransportProblem::UnknownIssuer | TransportProblem::Untrusted) => {
            let detail = if problem == TransportProblem::UnknownIssuer {
                "signed by an unknown authority"
            } else {
                "not trusted"
            };
            format!(
                "the TLS certificate of {target} is {detail}: pass --ca-bundle FILE with the CA that signed it (or the registry's own certificate when it is self-signed), or --insecure-skip-tls-verify {target} to skip verification for this host only"
            )
        }
        TransportProblem::SelfSignedCa => format!(
            "the TLS certificate of {target} is self-signed (a CA certificate serving as its own): pass --ca-bundle FILE holding that certificate to trust it for this host, or --insecure-skip-tls-verify {target} to skip verification for this host only"
        ),
        TransportProblem::WrongName => format!(
            "the TLS certificate of {target} was issued for another name: reach the registry by a name the certificate lists (its subjectAltName), or have the certificate reissued for {target}; a CA bundle does not change this"
        ),
        TransportProblem::Expired => format!(
            "the TLS certificate of {target} has expired or is not valid yet: renew it on the registry, and check this machine's clock; a CA bundle does not change this"
        ),
        TransportProblem::Refused => format!(
            "cannot connect to {target} (connection refused): check the host and port, and that the registry is running"
        ),
        TransportProblem::Dns => format!(
            "cannot resolve the host name of {target}: check the name, or use its IP address"
        ),
        TransportProblem::NotTls => format!(
            "{target} does not speak TLS: if it serves plain HTTP, pass --plain-http {target}"
        ),
        TransportProblem::Timeout => format!("timed out talking to {target}"),
        TransportProblem::Other => format!(
            "request to {target} failed: {}",
            crate::secret::redact_url(&chain)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Wrong-name and expired certificates get their own advice: a CA bundle cannot fix them,
    /// so "pass --ca-bundle" was the wrong thing to say; a plain-HTTP peer is not retried.
    #[test]
    fn transport_problems_are_read_from_rustls_and_hyper_messages() {
        use TransportProblem as P;
        let cases = [
            ("error sending request: client error (Connect): invalid peer certificate: NotValidForName", P::WrongName),
            ("client error (Connect): invalid peer certificate: Expired", P::Expired),
            ("client error (Connect): invalid peer certificate: UnknownIssuer", P::UnknownIssuer),
            ("invalid peer certificate: BadSignature", P::Untrusted),
            ("invalid peer certificate: Other(OtherError(CaUsedAsEndEntity))", P::SelfSignedCa),
            ("client error (Connect): received corrupt message of type InvalidContentType", P::NotTls),
            ("tcp connect error: Connection refused (os error 111)", P::Refused),
            ("dns error: failed to lookup address information", P::Dns),
            ("connection reset by peer", P::Other),
        ];
        for (chain, want) in cases {
            assert_eq!(P::read(chain, false), want, "{chain}");
        }
        for p in [
            P::WrongName,
            P::Expired,
            P::UnknownIssuer,
            P::SelfSignedCa,
            P::Untrusted,
            P::NotTls,
            P::Dns,
        ] {
            assert!(!p.is_transient(), "{p:?}");
        }
        for p in [P::Refused, P::Timeout, P::Other] {
            assert!(p.is_transient(), "{p:?}");
        }
    }

    fn api(body: &str) -> RegistryError {
        let (codes, message) = spec_errors(body.as_bytes());
        RegistryError::Api {
            registry: "registry.example".into(),
            action: "PUT manifest a/b:v1".into(),
            status: 400,
            codes,
            message,
            retry_after: None,
        }
    }

    #[test]
    fn spec_error_bodies_give_typed_codes_and_unknown_codes_are_kept() {
        let e = api(
            r#"{"errors":[{"code":"MANIFEST_BLOB_UNKNOWN","message":"blob unknown"},{"code":"QUOTA_EXCEEDED","message":"over quota","detail":{}}]}"#,
        );
        assert_eq!(
            e.codes(),
            [
                ErrorCode::ManifestBlobUnknown,
                ErrorCode::Other("QUOTA_EXCEEDED".into())
            ]
        );
        assert_eq!(
            e.to_string(),
            "registry.example: PUT manifest a/b:v1 failed: HTTP 400 MANIFEST_BLOB_UNKNOWN,QUOTA_EXCEEDED: blob unknown; over quota"
        );
    }

    /// Regression: codes were matched with `.contains` on the joined text, where
    /// MANIFEST_BLOB_UNKNOWN also "contains" BLOB_UNKNOWN.
    #[test]
    fn a_code_is_not_mistaken_for_one_whose_name_it_contains() {
        let e = api(r#"{"errors":[{"code":"MANIFEST_BLOB_UNKNOWN"}]}"#);
        assert!(e.has_code(ErrorCode::ManifestBlobUnknown));
        assert!(!e.has_code(ErrorCode::BlobUnknown));
    }

    #[test]
    fn every_spec_code_reads_back_from_its_wire_name() {
        let all = [
            ErrorCode::BlobUnknown,
            ErrorCode::BlobUploadInvalid,
            ErrorCode::BlobUploadUnknown,
            ErrorCode::DigestInvalid,
            ErrorCode::ManifestBlobUnknown,
            ErrorCode::ManifestInvalid,
            ErrorCode::ManifestUnknown,
            ErrorCode::NameInvalid,
            ErrorCode::NameUnknown,
            ErrorCode::SizeInvalid,
            ErrorCode::Unauthorized,
            ErrorCode::Denied,
            ErrorCode::Unsupported,
            ErrorCode::TooManyRequests,
        ];
        for code in all {
            assert_eq!(ErrorCode::from(code.as_str().to_string()), code);
        }
    }

    #[test]
    fn a_body_that_is_not_a_spec_error_gives_no_codes() {
        for body in ["", "<html>bad gateway</html>", r#"{"message":"no"}"#] {
            let e = api(body);
            assert!(e.codes().is_empty(), "{body}");
            assert_eq!(
                e.to_string(),
                "registry.example: PUT manifest a/b:v1 failed: HTTP 400"
            );
        }
    }
}
