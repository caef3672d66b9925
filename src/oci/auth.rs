//! Registry credentials and the challenge/token flow. Credentials come from a containers/docker
//! auth file (an OpenShift pull secret is the same format); passwords and tokens are held as
//! [`Secret`] so they never reach a log line, an error or a file.

use crate::secret::Secret;
use anyhow::{bail, Context, Result};
use base64::Engine as _;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A user name and password for one registry.
#[derive(Clone, Debug)]
pub struct Credentials {
    /// The user name (not secret; it is named in errors so a wrong entry can be found).
    pub username: String,
    /// The password or token.
    pub password: Secret,
}

/// Credentials by registry host (and optional namespace), from one auth file.
#[derive(Clone, Debug, Default)]
pub struct AuthFile {
    /// The file they came from, for error messages; `None` when no file was found.
    pub path: Option<PathBuf>,
    entries: BTreeMap<String, Credentials>,
}

#[derive(serde::Deserialize)]
struct RawAuthFile {
    #[serde(default)]
    auths: BTreeMap<String, RawEntry>,
}

#[derive(serde::Deserialize)]
struct RawEntry {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
}

impl AuthFile {
    /// Loads `explicit` if given (it must exist), else the first file that exists of
    /// `$REGISTRY_AUTH_FILE`, `$XDG_RUNTIME_DIR/containers/auth.json`,
    /// `~/.config/containers/auth.json`, `~/.docker/config.json`. No file is not an error:
    /// anonymous access is then tried.
    pub fn load(explicit: Option<&Path>) -> Result<AuthFile> {
        if let Some(p) = explicit {
            return Self::read(p);
        }
        for p in default_locations() {
            if p.is_file() {
                return Self::read(&p);
            }
        }
        Ok(AuthFile::default())
    }

    /// Reads one auth file.
    pub fn read(path: &Path) -> Result<AuthFile> {
        let text = fs_err::read_to_string(path)
            .with_context(|| "reading the auth file (pass --authfile FILE to use another)")?;
        Self::parse(&text, path)
    }

    /// Parses auth-file JSON; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<AuthFile> {
        // serde_json's messages quote the offending value (`invalid type: string "cHJv..."`),
        // which in an auth file is a credential: say where and what kind, never the value.
        let raw: RawAuthFile = serde_json::from_str(text).map_err(|e| {
            let what = match e.classify() {
                serde_json::error::Category::Syntax => "not valid JSON",
                serde_json::error::Category::Eof => "cut short",
                serde_json::error::Category::Data => "a value of the wrong type or shape",
                serde_json::error::Category::Io => "unreadable",
            };
            anyhow::anyhow!(
                "parsing auth file {}: line {}, column {}: {what} (values are not shown: they may be credentials); expected {{\"auths\": {{\"HOST\": {{\"auth\": \"base64(user:password)\"}}}}}}",
                path.display(),
                e.line(),
                e.column()
            )
        })?;
        let mut entries = BTreeMap::new();
        for (key, entry) in raw.auths {
            let creds = match (entry.auth, entry.username, entry.password) {
                (Some(auth), _, _) if !auth.is_empty() => decode_auth(&auth)
                    .with_context(|| format!("auth file {}: entry '{key}'", path.display()))?,
                (_, Some(username), Some(password)) => Credentials {
                    username,
                    password: Secret::new(password),
                },
                _ => continue,
            };
            entries.insert(normalise_key(&key), creds);
        }
        Ok(AuthFile {
            path: Some(path.to_path_buf()),
            entries,
        })
    }

    /// The most specific entry for `registry/repository`: `host/ns/repo`, then `host/ns`, then
    /// `host` (the containers-auth.json rules).
    pub fn lookup(&self, registry: &str, repository: Option<&str>) -> Option<&Credentials> {
        let registry = if registry == "docker.io" {
            "docker.io"
        } else {
            registry
        };
        if let Some(repo) = repository {
            let mut path = format!("{registry}/{repo}");
            loop {
                if let Some(c) = self.entries.get(&path) {
                    return Some(c);
                }
                match path.rfind('/') {
                    Some(i) if i > registry.len() => path.truncate(i),
                    _ => break,
                }
            }
        }
        self.entries.get(registry)
    }

    /// Where credentials came from, for messages.
    pub fn describe(&self) -> String {
        match &self.path {
            Some(p) => p.display().to_string(),
            None => "no auth file".to_string(),
        }
    }
}

fn default_locations() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(p) = std::env::var_os("REGISTRY_AUTH_FILE") {
        out.push(PathBuf::from(p));
    }
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR") {
        out.push(PathBuf::from(d).join("containers/auth.json"));
    }
    if let Some(h) = std::env::var_os("HOME") {
        let h = PathBuf::from(h);
        out.push(h.join(".config/containers/auth.json"));
        out.push(h.join(".docker/config.json"));
    }
    out
}

fn normalise_key(key: &str) -> String {
    let k = key
        .trim_start_matches("https://")
        .trim_start_matches("http://");
    let k = k.trim_end_matches('/');
    let k = k
        .strip_suffix("/v1")
        .or_else(|| k.strip_suffix("/v2"))
        .unwrap_or(k);
    match k {
        "index.docker.io" | "registry-1.docker.io" => "docker.io".to_string(),
        _ => k.to_string(),
    }
}

fn decode_auth(auth: &str) -> Result<Credentials> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(auth.trim())
        // The decoder's message quotes a byte of the credential: not shown.
        .map_err(|_| anyhow::anyhow!("the 'auth' value is not base64"))?;
    let text =
        String::from_utf8(bytes).map_err(|_| anyhow::anyhow!("the 'auth' value is not UTF-8"))?;
    let Some((user, pass)) = text.split_once(':') else {
        bail!("the 'auth' value must be base64 of 'user:password'");
    };
    Ok(Credentials {
        username: user.to_string(),
        password: Secret::new(pass),
    })
}

/// The `Authorization: Basic` value for credentials.
pub fn basic_header(c: &Credentials) -> String {
    let raw = format!("{}:{}", c.username, c.password.expose());
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(raw)
    )
}

/// A parsed `WWW-Authenticate` challenge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Challenge {
    /// `Basic realm=...`.
    Basic,
    /// `Bearer realm=...,service=...,scope=...`.
    Bearer {
        /// The token endpoint.
        realm: String,
        /// The service the token is for.
        service: Option<String>,
        /// The scope the registry asked for, if it said.
        scope: Option<String>,
    },
}

/// Parses a `WWW-Authenticate` header value.
pub fn parse_challenge(header: &str) -> Option<Challenge> {
    let header = header.trim();
    let (scheme, rest) = header.split_once(' ').unwrap_or((header, ""));
    match scheme.to_ascii_lowercase().as_str() {
        "basic" => Some(Challenge::Basic),
        "bearer" => {
            let params = parse_params(rest);
            Some(Challenge::Bearer {
                realm: params.get("realm")?.clone(),
                service: params.get("service").cloned(),
                scope: params.get("scope").cloned(),
            })
        }
        _ => None,
    }
}

fn parse_params(s: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = s.trim();
    while let Some(eq) = rest.find('=') {
        let key = rest[..eq]
            .trim()
            .trim_start_matches(',')
            .trim()
            .to_ascii_lowercase();
        let after = &rest[eq + 1..];
        let (value, next) = if let Some(stripped) = after.strip_prefix('"') {
            match stripped.find('"') {
                Some(end) => (&stripped[..end], &stripped[end + 1..]),
                None => (stripped, ""),
            }
        } else {
            match after.find(',') {
                Some(end) => (&after[..end], &after[end..]),
                None => (after, ""),
            }
        };
        out.insert(key, value.to_string());
        rest = next.trim_start_matches(',').trim();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: an auth file that did not parse printed serde_json's message, which quotes
    /// the value it choked on: `invalid type: string "cHJvZDpzZWNyZXQ="` (a credential).
    #[test]
    fn an_auth_file_that_does_not_parse_never_prints_its_values() {
        let secret = "cHJvZDpzZWNyZXQ=";
        for text in [
            format!(r#"{{"auths": {{"quay.io": "{secret}"}}}}"#),
            format!(r#"{{"auths": {{"quay.io": {{"auth": 7, "x": "{secret}"}}}}}}"#),
            format!(r#"{{"auths": ["{secret}"]}}"#),
            format!(r#"{{"auths": {{"quay.io": {{"auth": "{secret}"#),
            r#"{"auths": {"quay.io": {"auth": "c2VjcmV0!!"}}}"#.to_string(),
        ] {
            let err = AuthFile::parse(&text, Path::new("auth.json")).unwrap_err();
            let shown = format!("{err:#} {err:?}");
            assert!(!shown.contains(secret), "{shown}");
            assert!(!shown.contains("c2VjcmV0"), "{shown}");
            assert!(!shown.contains('!'), "a byte of the credential: {shown}");
            assert!(shown.contains("auth.json"), "{shown}");
        }
    }

    #[test]
    fn bearer_challenge_with_commas_in_scope() {
        let c = parse_challenge(
            r#"Bearer realm="https://auth.example/token",service="registry",scope="repository:a/b:pull,push""#,
        )
        .unwrap();
        assert_eq!(
            c,
            Challenge::Bearer {
                realm: "https://auth.example/token".into(),
                service: Some("registry".into()),
                scope: Some("repository:a/b:pull,push".into()),
            }
        );
        assert_eq!(parse_challenge("Basic realm=\"x\""), Some(Challenge::Basic));
    }

    #[test]
    fn auth_file_lookup_prefers_the_most_specific_entry() {
        let text = r#"{"auths":{
            "quay.io": {"auth": "dTE6cDE="},
            "quay.io/team": {"auth": "dTI6cDI="},
            "https://index.docker.io/v1/": {"username": "d", "password": "x"}
        }}"#;
        let f = AuthFile::parse(text, Path::new("auth.json")).unwrap();
        assert_eq!(f.lookup("quay.io", Some("other/x")).unwrap().username, "u1");
        assert_eq!(f.lookup("quay.io", Some("team/x")).unwrap().username, "u2");
        assert_eq!(f.lookup("docker.io", None).unwrap().username, "d");
        assert!(f.lookup("example.com", None).is_none());
        assert!(!format!("{:?}", f).contains("p1"));
    }

    #[test]
    fn malformed_auth_file_names_the_file_and_shape() {
        let err = AuthFile::parse("{\"auths\": 3}", Path::new("/x/auth.json")).unwrap_err();
        assert!(format!("{err:#}").contains("/x/auth.json"));
    }
}
