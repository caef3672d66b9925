//! Reads Distribution's own request log (logrus text formatter), so tests can count what a
//! client really sent — uploads, mounts, retries — from the server's side rather than trusting
//! the client's account of itself.
//!
//! Distribution 2.8.2 writes, per request, `level=info msg="response completed"` for 2xx/3xx and
//! `level=error msg="response completed with error"` for handler errors (4xx/5xx), each with
//! `http.request.method=PUT http.request.uri="/v2/…?…&digest=sha256:…" http.response.status=201`
//! (values are quoted only when they need it). A request refused by the auth layer (401) logs
//! only `level=warning msg="error authorizing context: …"`, with no status.

/// One request as the registry logged it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggedRequest {
    /// `level=`: `info`, `error`, …
    pub level: String,
    /// `msg=`: `response completed`, `response completed with error`.
    pub msg: String,
    /// `http.request.method=`.
    pub method: String,
    /// `http.request.uri=` as logged (path and raw query).
    pub uri: String,
    /// The URI's path, percent-decoded.
    pub path: String,
    /// The URI's query, decoded into pairs.
    pub query: Vec<(String, String)>,
    /// `http.response.status=`.
    pub status: u16,
    /// `auth.user.name=`, when the registry logged it.
    pub user: Option<String>,
    /// `http.request.remoteaddr=`: the client's address and port, one per connection.
    pub remote: String,
    /// `http.request.contenttype=`: set on requests with a body (an upload's bytes).
    pub content_type: Option<String>,
}

impl LoggedRequest {
    /// The first value of query parameter `key`.
    pub fn query_value(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Whether this is the final `PUT …/blobs/uploads/…?digest=` of a blob upload that the
    /// registry accepted (201).
    pub fn is_completed_upload(&self) -> bool {
        self.method == "PUT"
            && self.path.contains("/blobs/uploads/")
            && self.query_value("digest").is_some()
            && self.status == 201
    }

    /// Whether this is a cross-repository mount the registry performed (`POST …?mount=`, 201).
    pub fn is_mount(&self) -> bool {
        self.method == "POST"
            && self.path.ends_with("/blobs/uploads/")
            && self.query_value("mount").is_some()
            && self.status == 201
    }
}

/// Splits one logfmt line into `(key, value)` pairs, unquoting quoted values.
pub fn parse_line(line: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek() == Some(&' ') {
            chars.next();
        }
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' || c == ' ' {
                break;
            }
            key.push(c);
            chars.next();
        }
        if key.is_empty() && chars.peek().is_none() {
            break;
        }
        let mut value = String::new();
        if chars.peek() == Some(&'=') {
            chars.next();
            if chars.peek() == Some(&'"') {
                chars.next();
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => match chars.next() {
                            Some('n') => value.push('\n'),
                            Some('t') => value.push('\t'),
                            Some(other) => value.push(other),
                            None => break,
                        },
                        c => value.push(c),
                    }
                }
            } else {
                while let Some(&c) = chars.peek() {
                    if c == ' ' {
                        break;
                    }
                    value.push(c);
                    chars.next();
                }
            }
        }
        if key.is_empty() {
            // A stray '=' or similar; skip one character to make progress.
            chars.next();
            continue;
        }
        out.push((key, value));
    }
    out
}

/// Every request line (one carrying `http.response.status`) in a log text, in order.
pub fn requests(text: &str) -> Vec<LoggedRequest> {
    text.lines()
        .filter(|l| l.contains("http.response.status="))
        .filter_map(|line| {
            let pairs = parse_line(line);
            let get = |k: &str| {
                pairs
                    .iter()
                    .find(|(key, _)| key == k)
                    .map(|(_, v)| v.clone())
            };
            let uri = get("http.request.uri")?;
            let (raw_path, raw_query) = uri.split_once('?').unwrap_or((&uri, ""));
            Some(LoggedRequest {
                level: get("level").unwrap_or_default(),
                msg: get("msg").unwrap_or_default(),
                method: get("http.request.method")?,
                path: super::percent_decode(raw_path, false),
                query: super::query_pairs(raw_query),
                status: get("http.response.status")?.parse().ok()?,
                user: get("auth.user.name"),
                remote: get("http.request.remoteaddr").unwrap_or_default(),
                content_type: get("http.request.contenttype"),
                uri,
            })
        })
        .collect()
}

/// How many requests the registry's auth layer refused (`error authorizing context` lines).
pub fn auth_failures(text: &str) -> usize {
    text.lines()
        .filter(|l| l.contains("msg=\"error authorizing context"))
        .count()
}
