//! Secrets (registry passwords, tokens, BMC passwords) travel as [`Secret`], whose `Display` and
//! `Debug` print `<redacted>`, so a secret cannot leak through a log line, an error or a file
//! written with `{}`/`{:?}`. Reading the value takes an explicit [`Secret::expose`].

use std::fmt;

/// A string that must never be printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The value itself, for the one place that must send it (an HTTP header, a login).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Removes `user:password@` from a URL-like string before it is printed.
pub fn redact_url(text: &str) -> String {
    match (text.find("://"), text.find('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let host_start = scheme + 3;
            if text[host_start..at].contains('/') {
                return text.to_string();
            }
            format!("{}<redacted>@{}", &text[..host_start], &text[at + 1..])
        }
        _ => text.to_string(),
    }
}

/// A string a server sent, fit to quote in a message: control characters (ANSI escapes,
/// newlines that would forge log lines) replaced, and cut to `max` characters with a note of
/// how much was left out.
pub fn server_text(text: &str, max: usize) -> String {
    let clean: String = text
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    let total = clean.chars().count();
    if total <= max {
        return clean;
    }
    let kept: String = clean.chars().take(max).collect();
    format!("{kept}... ({} more characters)", total - max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_text_is_cut_and_cleaned() {
        assert_eq!(server_text("short", 10), "short");
        assert_eq!(server_text("a\u{1b}[31mb\nc", 20), "a?[31mb?c");
        assert_eq!(
            server_text(&"x".repeat(30), 10),
            "xxxxxxxxxx... (20 more characters)"
        );
    }

    #[test]
    fn secret_never_prints_its_value() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s} {s:?}"), "<redacted> <redacted>");
        assert_eq!(s.expose(), "hunter2");
    }

    #[test]
    fn credentials_in_urls_are_redacted() {
        assert_eq!(
            redact_url("https://u:p@host:5000/v2/"),
            "https://<redacted>@host:5000/v2/"
        );
        assert_eq!(redact_url("https://host/a@b"), "https://host/a@b");
    }
}
