//! Shared integration-test support: real registries, a token server, TLS material and synthetic
//! images, so that every test binary exercises `bootstrap` against the same software a site runs
//! (Distribution 2.8, skopeo) rather than mocks.
//!
//! The `it` test binary includes it with `mod support;` (so it is compiled once, and an item no
//! test uses is reported as dead code); the examples include it with `#[path]`. Everything binds
//! to 127.0.0.1 and stops on drop.
//!
//! - [`registry::Registry`]: a `docker-registry serve` process in one of three flavours (plain
//!   HTTP, HTTPS + htpasswd, HTTPS + token auth), with accessors for URLs, CA, credentials and
//!   counters read from the registry's own request log.
//! - [`token::TokenServer`]: the token realm the token flavour points at (HTTPS, ES256 JWTs).
//! - [`images`]: a deterministic synthetic image set and helpers to push custom images.
//! - [`client::RegistryClient`]: the small distribution-API client the generator pushes with.
//! - [`run`]: running the binary under test and checking what it wrote.
//! - [`faultproxy::FaultProxy`]: an HTTP/1.1 proxy in front of a plain registry that injects
//!   network faults (resets, truncation, corruption, stalls, error statuses) on cue and counts
//!   the body bytes that crossed it.
//! - [`httpfiles::FileServer`]: a static HTTP file server (a Helm chart repository).
//! - [`peak`]: a client's peak memory facing a hostile server, measured in a child process.
//! - [`modules`]: the host modules' scenarios, generic over the host (`Local` here, a lab sshd
//!   host later), with stand-in `systemctl` and `modprobe`.

pub mod client;
pub mod faultproxy;
pub mod gitops_lab;
pub mod httpfiles;
pub mod images;
pub mod labsite;
pub mod layers;
pub mod modules;
pub mod peak;
pub mod redfishfake;
pub mod registry;
pub mod reglog;
pub mod run;
pub mod scripted;
pub mod tls;
pub mod token;

use std::future::Future;
use std::path::Path;

pub use images::SyntheticSet;
pub use registry::Registry;

/// Writes one `auth.json` with the credentials of every authenticated registry in `registries`
/// (for a run that reads from one and writes to another). Panics on I/O errors.
pub fn write_merged_authfile(path: &Path, registries: &[&Registry]) {
    registry::write_authfile_entries(path, &[], registries).expect("writing auth.json");
}

/// Writes one `auth.json` with `entries` (`(host, user, password)`, e.g. a wrong password on
/// purpose) plus the real credentials of `registries` for hosts the entries do not name.
pub fn write_authfile_with(
    path: &Path,
    entries: &[(String, &str, &str)],
    registries: &[&Registry],
) {
    registry::write_authfile_entries(path, entries, registries).expect("writing auth.json");
}

/// Writes the CA certificates of the TLS registries among `registries` into one PEM bundle.
pub fn write_ca_bundle(path: &Path, registries: &[&Registry]) {
    registry::write_ca_bundle_of(path, registries).expect("writing CA bundle");
}

/// Runs `fut` to completion on a fresh current-thread tokio runtime on its own thread.
///
/// Works from plain `#[test]` functions and from inside `#[tokio::test]` alike (a runtime cannot
/// be blocked on from within another one on the same thread). Anything runtime-bound that the
/// future creates (a `reqwest::Client`, say) must not outlive it.
pub fn block_on<F>(fut: F) -> F::Output
where
    F: Future + Send,
    F::Output: Send,
{
    std::thread::scope(|s| {
        s.spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("building a tokio runtime for the test harness")
                .block_on(fut)
        })
        .join()
        .expect("harness runtime thread panicked")
    })
}

/// Decodes `%XX` escapes (and `+` as a space when `plus_is_space`), leaving malformed escapes
/// as they are. Used for query strings and for URIs in the registry log.
pub fn percent_decode(s: &str, plus_is_space: bool) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                    }
                    None => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Splits a query string (without the `?`) into decoded `(key, value)` pairs, in order.
pub fn query_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (percent_decode(k, true), percent_decode(v, true)),
            None => (percent_decode(p, true), String::new()),
        })
        .collect()
}

/// Percent-encodes everything but RFC 3986 unreserved characters (for query values).
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
