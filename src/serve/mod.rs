//! Serving one file (the agent ISO) to the BMCs that boot from it: `GET` and `HEAD` of
//! `/<file name>` with an exact `Content-Length`, `Accept-Ranges: bytes` and single byte ranges
//! (`206`, `Content-Range`; `416` for a range past the end), a strong `ETag` (the file's sha256,
//! computed once at start) honoured in `If-None-Match` and `If-Range`, and `Last-Modified`. BMC
//! virtual media fetch ISOs in ranges and retry; these are the headers they rely on. Any other
//! path is 404. The file is read per request from disk, never held in memory.
//!
//! Plain HTTP or TLS (a certificate and key the site gives, [`TlsFiles`]); every answer goes to
//! an access log ([`Access`]: the peer, method, path, range, status and bytes), which is how an
//! engineer sees which BMC fetched what. Connections are bounded ([`Limits`], conn.rs) so a flood
//! of clients that never finish a request cannot keep the BMCs from the ISO.

mod conn;
pub mod registry;
mod tls;

pub use conn::{
    Limits, CONNECTIONS, CONNECTIONS_PER_ADDRESS, FD_RESERVE, HANDSHAKE_LIMIT, HEAD_DEADLINE,
    STALL_LIMIT,
};
pub use tls::TlsFiles;

use anyhow::{Context, Result};
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncSeekExt};

/// The file being served and its validators.
#[derive(Clone, Debug)]
pub struct ServedFile {
    path: PathBuf,
    /// `/<file name>`.
    pub url_path: String,
    /// Its size.
    pub size: u64,
    /// Its sha256 (hex), also the ETag.
    pub sha256: String,
    last_modified: String,
}

impl ServedFile {
    /// Reads `path`'s size, time and sha256 (the whole file once).
    pub fn open(path: &Path) -> Result<Self> {
        let meta = fs_err::metadata(path)?;
        let (digest, size) = crate::bounded::hash_regular(path)
            .with_context(|| format!("reading {}", path.display()))?;
        if size != meta.len() {
            anyhow::bail!("{} changed while it was read", path.display());
        }
        let modified = meta.modified()?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .context("the file has no name")?;
        Ok(ServedFile {
            path: path.to_path_buf(),
            url_path: format!("/{name}"),
            size,
            sha256: digest.hex().to_string(),
            last_modified: http_date(modified),
        })
    }

    fn etag(&self) -> String {
        format!("\"sha256-{}\"", self.sha256)
    }
}

/// What `bootstrap serve iso` serves, and where.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Serving {
    /// The URL a BMC is given.
    pub url: String,
    /// The file.
    pub file: PathBuf,
    /// Its size.
    pub size: u64,
    /// Its sha256.
    pub sha256: String,
}

impl std::fmt::Display for Serving {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "serving {} ({} bytes, sha256 {}) at {} until Ctrl-C",
            self.file.display(),
            self.size,
            self.sha256,
            self.url
        )
    }
}

/// `Last-Modified`'s IMF-fixdate (`Thu, 03 Dec 2026 10:00:00 GMT`).
fn http_date(t: std::time::SystemTime) -> String {
    let t = time::OffsetDateTime::from(t);
    let format = time::macros::format_description!(
        "[weekday repr:short], [day] [month repr:short] [year] [hour]:[minute]:[second] GMT"
    );
    t.format(&format).unwrap_or_default()
}

/// One answered request, for the access log.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Access {
    /// Who asked (a BMC's address).
    pub peer: SocketAddr,
    /// `GET` or `HEAD` (or what else was refused).
    pub method: String,
    /// The path asked for.
    pub path: String,
    /// The `Range` header, when one was sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub range: Option<String>,
    /// The answer's status.
    pub status: u16,
    /// The body's length as answered (0 for HEAD).
    pub bytes: u64,
}

impl std::fmt::Display for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} {}", self.peer, self.method, self.path)?;
        if let Some(r) = &self.range {
            write!(f, " range {r}")?;
        }
        write!(f, " -> {} ({} bytes)", self.status, self.bytes)
    }
}

/// Where access entries go.
pub type AccessSink = Arc<dyn Fn(Access) + Send + Sync>;

struct Shared {
    file: ServedFile,
    access: Option<AccessSink>,
}

/// Serves `file` on `listener` within `limits` until `shutdown` resolves: over TLS when `tls`
/// is given, each answer reported to `access`.
pub async fn serve(
    file: ServedFile,
    listener: tokio::net::TcpListener,
    tls: Option<&TlsFiles>,
    access: Option<AccessSink>,
    limits: Limits,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let app = axum::Router::new()
        .fallback(answer)
        .with_state(Arc::new(Shared { file, access }));
    serve_router(app, listener, tls, limits, shutdown)
        .await
        .context("serving the file")
}

/// Serves `app` on `listener` within `limits` until `shutdown` resolves, over TLS when `tls` is
/// given; handlers may take the peer's address (`ConnectInfo<SocketAddr>`).
pub async fn serve_router(
    app: axum::Router,
    listener: tokio::net::TcpListener,
    tls: Option<&TlsFiles>,
    limits: Limits,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let tls = match tls {
        Some(files) => Some(tokio_rustls::TlsAcceptor::from(files.server_config()?)),
        None => None,
    };
    conn::run(listener, tls, app, limits, shutdown).await;
    Ok(())
}

/// A server running in the background: its URL, and a handle that stops it.
#[derive(Debug)]
pub struct Running {
    /// The URL the file is served at.
    pub url: String,
    /// The address bound.
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<()>>>,
}

impl Running {
    /// Stops serving and waits for open answers to end.
    pub async fn stop(mut self) -> Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.task.take() {
            Some(task) => task.await.context("the file server task")?,
            None => Ok(()),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Starts serving `file` on `addr` within `limits` in the background. `host` is the name or
/// address BMCs are told (default: the bound address).
pub async fn start(
    file: ServedFile,
    addr: SocketAddr,
    host: Option<&str>,
    tls: Option<TlsFiles>,
    access: Option<AccessSink>,
    limits: Limits,
) -> Result<Running> {
    if let Some(t) = &tls {
        t.server_config()?;
    }
    let (listener, local) = bind(addr).await?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let authority = match host {
        Some(h) if h.contains(':') && !h.starts_with('[') => format!("[{h}]:{}", local.port()),
        Some(h) => format!("{h}:{}", local.port()),
        None => local.to_string(),
    };
    let url = format!("{scheme}://{authority}{}", file.url_path);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        serve(file, listener, tls.as_ref(), access, limits, async {
            let _ = stopped.await;
        })
        .await
    });
    Ok(Running {
        url,
        addr: local,
        stop: Some(stop),
        task: Some(task),
    })
}

/// Binds `addr` (a port of 0 picks one); the listener and the address it got.
pub async fn bind(addr: SocketAddr) -> Result<(tokio::net::TcpListener, SocketAddr)> {
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| {
        format!("binding {addr}: is the address this machine's, and the port free?")
    })?;
    let local = listener.local_addr()?;
    Ok((listener, local))
}

async fn answer(
    State(shared): State<Arc<Shared>>,
    axum::extract::ConnectInfo(peer): axum::extract::ConnectInfo<SocketAddr>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let resp = respond(&shared.file, &method, &uri, &headers).await;
    if let Some(sink) = &shared.access {
        let bytes = if method == Method::HEAD {
            0
        } else {
            resp.headers()
                .get(header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok()?.parse().ok())
                .unwrap_or(0)
        };
        sink(Access {
            peer,
            method: method.to_string(),
            path: uri.path().to_string(),
            range: headers
                .get(header::RANGE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
            status: resp.status().as_u16(),
            bytes,
        });
    }
    resp
}

async fn respond(file: &ServedFile, method: &Method, uri: &Uri, headers: &HeaderMap) -> Response {
    if *method != Method::GET && *method != Method::HEAD {
        return (
            StatusCode::METHOD_NOT_ALLOWED,
            [(header::ALLOW, "GET, HEAD")],
        )
            .into_response();
    }
    if uri.path() != file.url_path {
        return StatusCode::NOT_FOUND.into_response();
    }
    let etag = file.etag();
    let header_str = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    if header_str(header::IF_NONE_MATCH)
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"))
    {
        return with_validators(StatusCode::NOT_MODIFIED.into_response(), file);
    }
    // If-Range: the range applies only while the file is the one the client saw.
    let range_applies = header_str(header::IF_RANGE).is_none_or(|v| v.trim() == etag);
    let range = match header_str(header::RANGE).filter(|_| range_applies) {
        None => None,
        Some(r) => match parse_range(r, file.size) {
            RangeAsk::Whole => None,
            RangeAsk::Part(start, end) => Some((start, end)),
            RangeAsk::Unsatisfiable => {
                let mut resp = StatusCode::RANGE_NOT_SATISFIABLE.into_response();
                if let Ok(v) = HeaderValue::from_str(&format!("bytes */{}", file.size)) {
                    resp.headers_mut().insert(header::CONTENT_RANGE, v);
                }
                return with_validators(resp, file);
            }
        },
    };
    let (status, start, len) = match range {
        Some((s, e)) => (StatusCode::PARTIAL_CONTENT, s, e - s + 1),
        None => (StatusCode::OK, 0, file.size),
    };
    let body = if *method == Method::HEAD {
        Body::empty()
    } else {
        match open_at(&file.path, start).await {
            Ok(f) => Body::from_stream(tokio_util::io::ReaderStream::new(f.take(len))),
            Err(_) => return StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        }
    };
    let mut resp = Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/octet-stream")
        .header(header::CONTENT_LENGTH, len)
        .header(header::ACCEPT_RANGES, "bytes");
    if range.is_some() {
        resp = resp.header(
            header::CONTENT_RANGE,
            format!("bytes {start}-{}/{}", start + len - 1, file.size),
        );
    }
    match resp.body(body) {
        Ok(r) => with_validators(r, file),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

fn with_validators(mut resp: Response, file: &ServedFile) -> Response {
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&file.etag()) {
        h.insert(header::ETAG, v);
    }
    if let Ok(v) = HeaderValue::from_str(&file.last_modified) {
        h.insert(header::LAST_MODIFIED, v);
    }
    resp
}

async fn open_at(path: &Path, offset: u64) -> std::io::Result<fs_err::tokio::File> {
    let mut f = fs_err::tokio::File::open(path).await?;
    f.seek(std::io::SeekFrom::Start(offset)).await?;
    Ok(f)
}

/// What a `Range` header asks of a file of `size` bytes.
#[derive(Debug, PartialEq, Eq)]
enum RangeAsk {
    /// No usable single byte range (several ranges, another unit, a malformed header): the
    /// whole file, as RFC 9110 lets a server answer.
    Whole,
    /// Bytes `start..=end`.
    Part(u64, u64),
    /// A range that starts past the end.
    Unsatisfiable,
}

fn parse_range(header: &str, size: u64) -> RangeAsk {
    let Some(spec) = header.trim().strip_prefix("bytes=") else {
        return RangeAsk::Whole;
    };
    if spec.contains(',') {
        return RangeAsk::Whole;
    }
    let Some((a, b)) = spec.trim().split_once('-') else {
        return RangeAsk::Whole;
    };
    let (a, b) = (a.trim(), b.trim());
    match (a.parse::<u64>(), b.parse::<u64>()) {
        // bytes=-N: the last N bytes.
        (Err(_), Ok(n)) if a.is_empty() => {
            if n == 0 || size == 0 {
                RangeAsk::Unsatisfiable
            } else {
                RangeAsk::Part(size.saturating_sub(n), size - 1)
            }
        }
        (Ok(start), _) if start >= size => RangeAsk::Unsatisfiable,
        (Ok(start), Err(_)) if b.is_empty() => RangeAsk::Part(start, size - 1),
        (Ok(start), Ok(end)) if end >= start => RangeAsk::Part(start, end.min(size - 1)),
        _ => RangeAsk::Whole,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_read_as_rfc_9110_says() {
        assert_eq!(parse_range("bytes=0-9", 100), RangeAsk::Part(0, 9));
        assert_eq!(parse_range("bytes=90-", 100), RangeAsk::Part(90, 99));
        assert_eq!(parse_range("bytes=-10", 100), RangeAsk::Part(90, 99));
        assert_eq!(parse_range("bytes=-500", 100), RangeAsk::Part(0, 99));
        assert_eq!(parse_range("bytes=50-500", 100), RangeAsk::Part(50, 99));
        assert_eq!(parse_range("bytes=100-", 100), RangeAsk::Unsatisfiable);
        assert_eq!(parse_range("bytes=-0", 100), RangeAsk::Unsatisfiable);
        assert_eq!(parse_range("bytes=0-1,5-6", 100), RangeAsk::Whole);
        assert_eq!(parse_range("items=0-1", 100), RangeAsk::Whole);
        assert_eq!(parse_range("bytes=9-3", 100), RangeAsk::Whole);
    }
}
