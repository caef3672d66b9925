//! Secrets (registry passwords, tokens, BMC passwords) travel as [`Secret`], whose `Display` and
//! `Debug` print `<redacted>`, so a secret cannot leak through a log line, an error or a file
//! written with `{}`/`{:?}`. Reading the value takes an explicit [`Secret::expose`]. A file that
//! holds one is checked as OpenSSH checks a private key ([`open_mode`]).

use std::fmt;
use std::path::Path;

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

/// The permission bits of the file at `path` when others than its owner may use it, or None
/// when it is its owner's alone: OpenSSH's rule for a private key (`sshkey_perm_ok` in
/// openssh-portable's authfile.c), the one rule for every secret file here. OpenSSH `fstat`s the
/// opened key, so a symlink is judged by the file it resolves to, and refuses it when "a key
/// owned by the user is accessed" and `(st.st_mode & 077) != 0`, printing "WARNING: UNPROTECTED
/// PRIVATE KEY FILE!", "Permissions 0644 for '...' are too open" and "This private key will be
/// ignored"; a key owned by another user is not judged ("we don't care"), since its reader
/// cannot chmod it.
pub fn open_mode(path: &Path) -> std::io::Result<Option<u32>> {
    use std::os::unix::fs::MetadataExt;
    let meta = fs_err::metadata(path)?;
    let mode = meta.mode() & 0o777;
    let ours = meta.uid() == rustix::process::getuid().as_raw();
    Ok((ours && mode & 0o077 != 0).then_some(mode))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn with_mode(path: &Path, mode: u32) {
        fs_err::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_secret_file_any_group_or_other_bit_opens_is_reported_with_its_mode() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("secret");
        fs_err::write(&file, "x").unwrap();
        for (mode, open) in [
            (0o600, None),
            (0o400, None),
            (0o640, Some(0o640)),
            (0o604, Some(0o604)),
            (0o620, Some(0o620)),
            (0o644, Some(0o644)),
        ] {
            with_mode(&file, mode);
            assert_eq!(open_mode(&file).unwrap(), open, "{mode:o}");
        }
    }

    #[test]
    fn a_symlinked_secret_is_judged_by_the_file_it_resolves_to() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("secret");
        fs_err::write(&file, "x").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        with_mode(&file, 0o644);
        assert_eq!(open_mode(&link).unwrap(), Some(0o644));
        with_mode(&file, 0o600);
        assert_eq!(open_mode(&link).unwrap(), None);
    }

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
