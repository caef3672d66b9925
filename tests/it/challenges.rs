//! Registries that answer 401 with no usable way to log in: the error says so, instead of
//! "authentication failed" (which sends the engineer to check a password nobody asked for).
//! The server is a deliberately broken HTTP/1.1 responder on 127.0.0.1.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::Command;

/// Answers every request on a fresh port with 401 and `header` (if any) until the test ends.
fn unauthorized_server(header: Option<&'static str>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let host = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            // Read the request head; bodies are not sent to a 401.
            while reader.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
                if line == "\r\n" {
                    break;
                }
                line.clear();
            }
            let challenge = header
                .map(|h| format!("WWW-Authenticate: {h}\r\n"))
                .unwrap_or_default();
            let _ = write!(
                stream,
                "HTTP/1.1 401 Unauthorized\r\n{challenge}Content-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
    });
    host
}

fn mirror_to(host: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let isc = crate::support::run::one_image_config(dir.path());
    let auth = dir.path().join("auth.json");
    // Credentials for the host, so the old message ("authentication failed for user") showed.
    fs_err::write(
        &auth,
        format!(r#"{{"auths": {{"{host}": {{"auth": "dXNlcjpwYXNz"}}}}}}"#),
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_bootstrap"))
        .args([
            "mirror",
            "-c",
            isc.to_str().unwrap(),
            &format!("docker://{host}"),
        ])
        .args(["--plain-http", host, "--authfile", auth.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Regression: a Bearer challenge without a realm, or a 401 with no challenge, was reported
/// as "authentication failed for user 'user'".
#[test]
fn a_challenge_without_a_usable_realm_is_named_as_such() {
    let host = unauthorized_server(Some(r#"Bearer service="registry""#));
    let err = mirror_to(&host);
    assert!(
        err.contains(&format!(
            "{host} answered 401 with a challenge bootstrap cannot use (Bearer service=\"registry\")"
        )),
        "{err}"
    );
    assert!(!err.contains("authentication failed"), "{err}");

    let host = unauthorized_server(None);
    let err = mirror_to(&host);
    assert!(
        err.contains(&format!(
            "{host} answered 401 without a WWW-Authenticate challenge"
        )),
        "{err}"
    );
    assert!(!err.contains("authentication failed"), "{err}");
}

/// A server's challenge is quoted cut short, so a hostile registry cannot flood the log (HTTP
/// itself keeps control characters out of a header; `server_text` also replaces them).
#[test]
fn a_long_challenge_is_cut_and_cleaned() {
    let long: &'static str = Box::leak(format!("Negotiate {}", "A".repeat(5000)).into_boxed_str());
    Box::leak(format!("Negotiate {}\u{1b}[2J", "A".repeat(5000)).into_boxed_str());
    let host = unauthorized_server(Some(long));
    let err = mirror_to(&host);
    assert!(err.contains("more characters)"), "{err}");
    assert!(err.len() < 2000, "{} bytes: {err}", err.len());
}

/// Answers `/v2/...` with a Bearer challenge whose realm is this server's `/token`, and the
/// token request with `token_body`.
fn token_server(token_body: &'static str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let host = listener.local_addr().unwrap().to_string();
    let realm = format!("http://{host}/token");
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request = String::new();
            let _ = reader.read_line(&mut request);
            let mut line = String::new();
            while reader.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
                if line == "\r\n" {
                    break;
                }
                line.clear();
            }
            let _ = if request.starts_with("GET /token") {
                write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{token_body}",
                    token_body.len()
                )
            } else {
                write!(
                    stream,
                    "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer realm=\"{realm}\",service=\"x\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                )
            };
        }
    });
    host
}

/// Regression: a token answer that did not parse was reported with serde_json's message,
/// which quotes the value it choked on, and a token answer's values are tokens.
#[test]
fn an_unreadable_token_answer_never_quotes_its_values() {
    let host =
        token_server(r#"{"token": "eyJhbGciOiJFUzI1NiJ9.c2VjcmV0", "expires_in": "eyJzZWNyZXQ"}"#);
    let err = mirror_to(&host);
    assert!(err.contains("is not a token response"), "{err}");
    assert!(!err.contains("eyJ"), "{err}");
}
