//! What can go wrong talking to a registry, typed so callers branch on the kind (a missing blob
//! is not an error for a HEAD; an expired token is retried), and transport failures turned into
//! sentences that say what to do.

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
    /// Any other non-success answer, with the spec error code when the body had one.
    #[error("{registry}: {action} failed: HTTP {status}{}", .code.as_ref().map(|c| format!(" {c}: {}", .message)).unwrap_or_default())]
    Api {
        /// Host.
        registry: String,
        /// What was attempted, e.g. `PUT manifest a/b:v1`.
        action: String,
        /// HTTP status.
        status: u16,
        /// The spec error code (BLOB_UNKNOWN, MANIFEST_BLOB_UNKNOWN, DIGEST_INVALID, ...).
        code: Option<String>,
        /// The spec error message.
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

impl RegistryError {
    /// The spec error code, if the registry sent one.
    pub fn code(&self) -> Option<&str> {
        match self {
            RegistryError::Api { code, .. } => code.as_deref(),
            _ => None,
        }
    }

    /// True when the same request may succeed if tried again: a connection that dropped, a
    /// 5xx or 429 answer, a token the registry stopped accepting mid-transfer.
    pub fn is_transient(&self) -> bool {
        match self {
            RegistryError::Connect { transient, .. } => *transient,
            RegistryError::Api { status, .. } => retryable_status(*status),
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

/// Whether a transport error may pass: resets, timeouts and refused connections may; TLS
/// trust problems and unknown host names will not.
pub(super) fn transport_is_transient(e: &reqwest::Error) -> bool {
    let text = format!("{e:?}").to_ascii_lowercase();
    let permanent = [
        "certificate",
        "unknownissuer",
        "invalid peer",
        "dns error",
        "failed to lookup",
        "wrong version number",
        "invalid http version",
    ];
    !permanent.iter().any(|p| text.contains(p))
}

/// Turns a transport error into a sentence that says what to do.
pub fn describe_transport_error(target: &str, e: &reqwest::Error) -> String {
    let mut chain = String::new();
    let mut source: Option<&dyn std::error::Error> = Some(e);
    while let Some(s) = source {
        chain.push_str(&s.to_string());
        chain.push_str(": ");
        source = s.source();
    }
    let lower = chain.to_ascii_lowercase();
    if lower.contains("certificate")
        || lower.contains("unknownissuer")
        || lower.contains("invalid peer")
    {
        let detail = if lower.contains("unknownissuer") || lower.contains("unknown issuer") {
            "signed by an unknown authority"
        } else if lower.contains("notvalidforname") || lower.contains("not valid for name") {
            "issued for another name"
        } else if lower.contains("expired") {
            "expired"
        } else {
            "not trusted"
        };
        format!(
            "the TLS certificate of {target} is {detail}: pass --ca-bundle FILE with the CA that signed it, or --insecure-skip-tls-verify {target} to skip verification for this host only"
        )
    } else if lower.contains("connection refused") {
        format!("cannot connect to {target} (connection refused): check the host and port, and that the registry is running")
    } else if lower.contains("dns error")
        || lower.contains("failed to lookup")
        || lower.contains("name or service not known")
    {
        format!("cannot resolve the host name of {target}: check the name, or use its IP address")
    } else if lower.contains("invalid http version")
        || lower.contains("wrong version number")
        || lower.contains("corrupt message")
        || lower.contains("invalidcontenttype")
        || lower.contains("received corrupt")
    {
        format!("{target} does not speak TLS: if it serves plain HTTP, pass --plain-http {target}")
    } else if e.is_timeout() {
        format!("timed out talking to {target}")
    } else {
        format!(
            "request to {target} failed: {}",
            crate::secret::redact_url(chain.trim_end_matches(": "))
        )
    }
}
