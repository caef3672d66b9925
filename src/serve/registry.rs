//! A read-only OCI registry over a disk mirror (`bootstrap serve registry file://DIR`), for labs
//! and small sites that pull straight from the mirror; big sites push into their own registry.
//!
//! It speaks the distribution API's pull half as Distribution 2.8 answers it: `GET /v2/`;
//! `GET`/`HEAD` of `/v2/NAME/manifests/REF` by tag or digest (`Docker-Content-Digest`, the
//! manifest's own media type); `GET`/`HEAD` of `/v2/NAME/blobs/DIGEST` with single byte ranges
//! (`206`, `Content-Range`, `416`); `/v2/NAME/tags/list` and `/v2/_catalog`; every refusal an OCI
//! error body (`MANIFEST_UNKNOWN`, `BLOB_UNKNOWN`, `NAME_UNKNOWN`, `DIGEST_INVALID`,
//! `UNSUPPORTED` for any write). A repository is an image's source path without its registry
//! host (`quay.io/openshift/release:4.18` is served as `openshift/release:4.18`); a repository
//! serves only the manifests and blobs its own images reach, as a registry scopes them.
//!
//! Every byte served is the verified one: a manifest is hashed before it is sent; a whole blob
//! is hashed as it streams and, if it does not end at its digest, the transfer is broken off
//! before its last bytes (the client never holds a complete wrong blob); a byte range is served
//! only once the whole blob has hashed to its digest (checked once per blob while the server
//! runs, so a file damaged after that check is caught by whole reads, not by ranges). Names never
//! become paths: a digest is parsed (`sha256:` and 64 hex digits) before a file is opened, and
//! a repository must be one the index names, so `..` in any spelling reaches nothing.
//!
//! What it does not: archives (`archive://`, issue 16), pushes, authentication, or
//! `Range` with several ranges (the whole blob is sent, as RFC 9110 allows).

use crate::oci::digest::Digest;
use crate::oci::layout::OciLayout;
use crate::oci::reference::ImageRef;
use anyhow::{Context, Result};
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::Response;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// One repository: its tags and what its images reach.
#[derive(Debug, Default)]
struct Repo {
    tags: BTreeMap<String, Digest>,
    /// Manifests by digest, with their media types.
    manifests: BTreeMap<Digest, String>,
    /// Blobs (configs and layers) with the size their manifests declare.
    blobs: BTreeMap<Digest, u64>,
}

/// What the registry serves, read from the layout's `index.json` and manifests at start.
pub struct Served {
    layout: OciLayout,
    repos: BTreeMap<String, Repo>,
    /// Blobs hashed whole while serving: whether each matched its digest.
    checked: Mutex<BTreeMap<Digest, bool>>,
}

impl Served {
    /// Reads the layout at `root`: every index entry named by an image reference becomes a
    /// repository's image (by tag or digest), with the manifests and blobs it reaches.
    pub fn open(root: &std::path::Path) -> Result<Served> {
        Self::from_layout(OciLayout::open(root)?)
    }

    /// Reads a layout already opened (an archive's, whose blobs stay in its chunks).
    pub fn from_layout(layout: OciLayout) -> Result<Served> {
        let mut repos: BTreeMap<String, Repo> = BTreeMap::new();
        for entry in layout.index()? {
            let Some(name) = entry.ref_name() else {
                continue;
            };
            let Ok(r) = ImageRef::parse(name) else {
                tracing::warn!("index.json: {name:?} is not an image reference; not served");
                continue;
            };
            let repo = repos.entry(r.repository.clone()).or_default();
            if let Some(tag) = &r.tag {
                if let Some(other) = repo.tags.insert(tag.clone(), entry.digest.clone()) {
                    if other != entry.digest {
                        anyhow::bail!(
                            "index.json: {}:{tag} names two images ({other} and {}), from two source registries with the same path; serve cannot tell them apart",
                            r.repository,
                            entry.digest
                        );
                    }
                }
            }
            walk(&layout, &entry.digest, &entry.media_type, repo)
                .with_context(|| format!("reading the image {name}"))?;
        }
        Ok(Served {
            layout,
            repos,
            checked: Mutex::default(),
        })
    }

    /// The repositories and their tag counts.
    pub fn repositories(&self) -> Vec<(String, usize)> {
        self.repos
            .iter()
            .map(|(n, r)| (n.clone(), r.tags.len()))
            .collect()
    }

    /// Whether the blob's content hashes to its digest: hashed once on a blocking thread, the
    /// answer (either way) remembered for the server's run.
    async fn blob_ok(&self, digest: &Digest) -> bool {
        if let Some(ok) = self.checked.lock().expect("checked").get(digest) {
            return *ok;
        }
        let Some((path, start, len)) = self.layout.blob_location(digest) else {
            return false;
        };
        let hashed = tokio::task::spawn_blocking(move || {
            if start == 0 {
                return crate::bounded::hash_regular(&path).map(|(d, _)| d);
            }
            crate::bounded::hash_range(&path, start, len)
        })
        .await;
        let ok = matches!(&hashed, Ok(Ok(d)) if d == digest);
        if !ok {
            tracing::warn!("serving blob {digest}: its file does not hash to its digest");
        }
        self.checked
            .lock()
            .expect("checked")
            .insert(digest.clone(), ok);
        ok
    }
}

/// Adds the manifest `digest` and everything it reaches to `repo`.
fn walk(layout: &OciLayout, digest: &Digest, media_type: &str, repo: &mut Repo) -> Result<()> {
    if repo.manifests.contains_key(digest) {
        return Ok(());
    }
    let bytes = layout.read_verified(digest)?;
    let m: Value =
        serde_json::from_slice(&bytes).with_context(|| format!("manifest {digest} is not JSON"))?;
    let media_type = m["mediaType"].as_str().unwrap_or(media_type).to_string();
    repo.manifests.insert(digest.clone(), media_type);
    if let Some(children) = m["manifests"].as_array() {
        for c in children {
            let (Some(d), mt) = (
                c["digest"].as_str(),
                c["mediaType"].as_str().unwrap_or_default(),
            ) else {
                continue;
            };
            let d: Digest = d
                .parse()
                .with_context(|| format!("manifest {digest}: child {d}"))?;
            // A filtered index may name platforms the mirror dropped: those are not served.
            if layout.blob_size(&d).is_some() {
                walk(layout, &d, mt, repo)?;
            }
        }
        return Ok(());
    }
    let layers = m["layers"].as_array().into_iter().flatten();
    for d in std::iter::once(&m["config"]).chain(layers) {
        if d.is_null() {
            continue;
        }
        let (Some(text), Some(size)) = (d["digest"].as_str(), d["size"].as_u64()) else {
            anyhow::bail!("manifest {digest}: a blob without digest or size: {d}");
        };
        let parsed: Digest = text
            .parse()
            .with_context(|| format!("manifest {digest}: blob {text}"))?;
        repo.blobs.insert(parsed, size);
    }
    Ok(())
}

/// A whole blob's bytes, hashed as they are sent: if they do not end at the blob's digest the
/// stream ends in an error instead of its last piece, so the client sees a broken transfer and
/// never a complete wrong blob.
fn checked(
    inner: tokio_util::io::ReaderStream<tokio::io::Take<fs_err::tokio::File>>,
    digest: Digest,
) -> impl futures_util::Stream<Item = std::io::Result<bytes::Bytes>> + Send {
    use futures_util::StreamExt as _;
    let state = (
        Box::pin(inner.peekable()),
        Some(crate::oci::digest::StreamHasher::new()),
        digest,
    );
    futures_util::stream::unfold(state, |(mut inner, mut hasher, digest)| async move {
        let bytes = match inner.next().await? {
            Ok(b) => b,
            Err(e) => return Some((Err(e), (inner, None, digest))),
        };
        hasher.as_mut()?.update(&bytes);
        if inner.as_mut().peek().await.is_none() {
            let (got, _) = hasher.take()?.finish();
            if got != digest {
                tracing::warn!(
                    "serving blob {digest}: its file hashes to {got}; transfer broken off"
                );
                let e = std::io::Error::other(format!("blob {digest}: its file hashes to {got}"));
                return Some((Err(e), (inner, None, digest)));
            }
        }
        Some((Ok(bytes), (inner, hasher, digest)))
    })
}

/// An OCI error answer.
fn oci_error(status: StatusCode, code: &str, message: &str) -> Response {
    let body = json!({"errors": [{"code": code, "message": message, "detail": {}}]});
    let mut resp = json_answer(body);
    *resp.status_mut() = status;
    resp
}

fn api_version(resp: &mut Response) {
    resp.headers_mut().insert(
        "Docker-Distribution-API-Version",
        HeaderValue::from_static("registry/2.0"),
    );
}

/// The router answering every path from `served`.
pub fn router(served: Arc<Served>) -> axum::Router {
    axum::Router::new()
        .fallback(
            |State(s): State<Arc<Served>>, method: Method, uri: Uri, headers: HeaderMap| async move {
                answer(&s, &method, &uri, &headers).await
            },
        )
        .with_state(served)
}

async fn answer(s: &Served, method: &Method, uri: &Uri, headers: &HeaderMap) -> Response {
    if method != Method::GET && method != Method::HEAD {
        return oci_error(
            StatusCode::METHOD_NOT_ALLOWED,
            "UNSUPPORTED",
            "this registry is read-only: it serves a mirror, it takes no pushes",
        );
    }
    // Decoded as Distribution decodes it (`sha256%3A...`); a name never becomes a path, so a
    // decoded `..` reaches nothing.
    let decoded = percent_decode(uri.path());
    let path = decoded.as_str();
    let query = query(uri);
    if path == "/v2" || path == "/v2/" {
        return json_answer(json!({}));
    }
    if path == "/v2/_catalog" {
        let (names, next) = page(s.repos.keys(), &query);
        let mut resp = json_answer(json!({"repositories": names}));
        link(&mut resp, "/v2/_catalog", next, query.0);
        return resp;
    }
    let Some(rest) = path.strip_prefix("/v2/") else {
        return oci_error(StatusCode::NOT_FOUND, "NOT_FOUND", "not a registry path");
    };
    let (name, kind, reference) = match split(rest) {
        Some(p) => p,
        None => {
            return oci_error(StatusCode::NOT_FOUND, "NOT_FOUND", "not a registry path");
        }
    };
    let Some(repo) = s.repos.get(name) else {
        return oci_error(
            StatusCode::NOT_FOUND,
            "NAME_UNKNOWN",
            &format!("repository name not known to registry: {name}"),
        );
    };
    match kind {
        "tags" if reference == "list" => {
            let (tags, next) = page(repo.tags.keys(), &query);
            let mut resp = json_answer(json!({"name": name, "tags": tags}));
            link(&mut resp, &format!("/v2/{name}/tags/list"), next, query.0);
            resp
        }
        "manifests" => manifest(s, repo, reference, method),
        "blobs" => blob(s, repo, reference, method, headers).await,
        _ => oci_error(StatusCode::NOT_FOUND, "NOT_FOUND", "not a registry path"),
    }
}

/// `%XX` decoded (an invalid escape is kept as written).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).copied().and_then(hex),
            b.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The query's `n` and `last`.
fn query(uri: &Uri) -> (Option<usize>, Option<String>) {
    let mut n = None;
    let mut last = None;
    for kv in uri.query().unwrap_or_default().split('&') {
        match kv.split_once('=') {
            Some(("n", v)) => n = v.parse().ok(),
            Some(("last", v)) => last = Some(percent_decode(v)),
            _ => {}
        }
    }
    (n, last)
}

/// One page of sorted names after `last`, at most `n`; the last name given when more follow.
fn page<'a>(
    names: impl Iterator<Item = &'a String>,
    (n, last): &(Option<usize>, Option<String>),
) -> (Vec<&'a String>, Option<String>) {
    let mut after: Vec<&String> = names
        .filter(|x| last.as_ref().is_none_or(|l| x.as_str() > l.as_str()))
        .collect();
    match n {
        Some(n) if after.len() > *n => {
            after.truncate(*n);
            let next = after.last().map(|s| s.to_string());
            (after, next)
        }
        _ => (after, None),
    }
}

/// The `Link: <...>; rel="next"` header Distribution sends when a page is cut.
fn link(resp: &mut Response, path: &str, next: Option<String>, n: Option<usize>) {
    if let (Some(last), Some(n)) = (next, n) {
        if let Ok(v) = HeaderValue::from_str(&format!("<{path}?last={last}&n={n}>; rel=\"next\"")) {
            resp.headers_mut().insert(header::LINK, v);
        }
    }
}

/// `NAME/(manifests|blobs|tags)/REF`, NAME itself holding slashes.
fn split(rest: &str) -> Option<(&str, &str, &str)> {
    for kind in ["/manifests/", "/blobs/", "/tags/"] {
        if let Some(i) = rest.rfind(kind) {
            let reference = &rest[i + kind.len()..];
            if !reference.is_empty() && !reference.contains('/') {
                return Some((&rest[..i], kind.trim_matches('/'), reference));
            }
        }
    }
    None
}

fn json_answer(v: Value) -> Response {
    let mut resp = Response::new(Body::from(v.to_string()));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=utf-8"),
    );
    api_version(&mut resp);
    resp
}

fn manifest(s: &Served, repo: &Repo, reference: &str, method: &Method) -> Response {
    let digest = if reference.starts_with("sha256:") {
        match reference.parse::<Digest>() {
            Ok(d) => d,
            Err(_) => {
                return oci_error(
                    StatusCode::BAD_REQUEST,
                    "DIGEST_INVALID",
                    "provided digest did not match uploaded content",
                )
            }
        }
    } else {
        match repo.tags.get(reference) {
            Some(d) => d.clone(),
            None => {
                return oci_error(
                    StatusCode::NOT_FOUND,
                    "MANIFEST_UNKNOWN",
                    &format!("manifest unknown: tag {reference}"),
                )
            }
        }
    };
    let Some(media_type) = repo.manifests.get(&digest) else {
        return oci_error(
            StatusCode::NOT_FOUND,
            "MANIFEST_UNKNOWN",
            &format!("manifest unknown: {digest}"),
        );
    };
    let bytes = match s.layout.read_verified(&digest) {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!("serving manifest {digest}: {e:#}");
            return oci_error(
                StatusCode::NOT_FOUND,
                "MANIFEST_UNKNOWN",
                "manifest unknown: its file is corrupt",
            );
        }
    };
    let mut resp = Response::new(if method == Method::HEAD {
        Body::empty()
    } else {
        Body::from(bytes.clone())
    });
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_LENGTH,
        HeaderValue::from(bytes.len() as u64),
    );
    if let Ok(v) = HeaderValue::from_str(media_type) {
        h.insert(header::CONTENT_TYPE, v);
    }
    if let Ok(v) = HeaderValue::from_str(&digest.to_string()) {
        h.insert("Docker-Content-Digest", v.clone());
        h.insert(
            header::ETAG,
            HeaderValue::from_str(&format!("\"{digest}\"")).unwrap_or(v),
        );
    }
    api_version(&mut resp);
    resp
}

/// `GET`/`HEAD` of a blob (or of a manifest, by digest): the whole file, checked against its
/// digest as it streams, or the part a `Range` asks for once the whole was checked.
async fn blob(
    s: &Served,
    repo: &Repo,
    reference: &str,
    method: &Method,
    headers: &HeaderMap,
) -> Response {
    let Ok(digest) = reference.parse::<Digest>() else {
        return oci_error(StatusCode::BAD_REQUEST, "DIGEST_INVALID", "invalid digest");
    };
    let (path, base, size) = match locate_blob(s, repo, &digest) {
        Ok(found) => found,
        Err(not) => return not.response(),
    };
    let (status, start, len) = match blob_span(s, &digest, headers, size).await {
        Ok(span) => span,
        Err(not) => return not.response(),
    };
    let body = if method == Method::HEAD {
        Body::empty()
    } else {
        use tokio::io::AsyncReadExt as _;
        match open_regular_at(&path, base + start).await {
            Ok(f) if status == StatusCode::OK => Body::from_stream(checked(
                tokio_util::io::ReaderStream::new(f.take(len)),
                digest.clone(),
            )),
            Ok(f) => Body::from_stream(tokio_util::io::ReaderStream::new(f.take(len))),
            Err(e) => {
                tracing::warn!("opening {}: {e}", path.display());
                return oci_error(
                    StatusCode::NOT_FOUND,
                    "BLOB_UNKNOWN",
                    "blob unknown to registry",
                );
            }
        }
    };
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    if let Ok(v) = HeaderValue::from_str(&digest.to_string()) {
        h.insert("Docker-Content-Digest", v);
    }
    if status == StatusCode::PARTIAL_CONTENT {
        if let Ok(v) = HeaderValue::from_str(&format!("bytes {start}-{}/{size}", start + len - 1)) {
            h.insert(header::CONTENT_RANGE, v);
        }
    }
    api_version(&mut resp);
    resp
}

/// Why a blob is not served.
enum NotServed {
    /// Unknown to the repository or absent from the layout: `BLOB_UNKNOWN` with this message.
    Unknown(String),
    /// Its file is not what it should be (size, or digest of the whole for a range).
    Corrupt,
    /// The range asked lies beyond a blob of this size.
    Unsatisfiable(u64),
}

impl NotServed {
    /// The answer, as Distribution gives it.
    fn response(self) -> Response {
        match self {
            NotServed::Unknown(message) => {
                oci_error(StatusCode::NOT_FOUND, "BLOB_UNKNOWN", &message)
            }
            NotServed::Corrupt => oci_error(
                StatusCode::NOT_FOUND,
                "BLOB_UNKNOWN",
                "blob unknown to registry: its file is corrupt",
            ),
            NotServed::Unsatisfiable(size) => {
                // No error body, the size in Content-Range.
                let mut resp = Response::new(Body::empty());
                *resp.status_mut() = StatusCode::RANGE_NOT_SATISFIABLE;
                api_version(&mut resp);
                if let Ok(v) = HeaderValue::from_str(&format!("bytes */{size}")) {
                    resp.headers_mut().insert(header::CONTENT_RANGE, v);
                }
                resp
            }
        }
    }
}

/// Where `digest` of `repo` is stored (file, offset, size); not when it is unknown to the
/// repository, absent from the layout, or a file of another size than declared.
fn locate_blob(
    s: &Served,
    repo: &Repo,
    digest: &Digest,
) -> Result<(std::path::PathBuf, u64, u64), NotServed> {
    // Manifests are blobs too (clients fetch an index's children either way).
    let declared = repo.blobs.get(digest).copied();
    if declared.is_none() && !repo.manifests.contains_key(digest) {
        return Err(NotServed::Unknown(format!(
            "blob unknown to registry: {digest}"
        )));
    }
    let Some((path, base, size)) = s.layout.blob_location(digest) else {
        return Err(NotServed::Unknown("blob unknown to registry".into()));
    };
    // A file of another size than its manifest declares is refused before any header is sent
    // (and an empty file sends no bytes the stream check could catch).
    if declared.is_some_and(|d| d != size) || (size == 0 && *digest != Digest::of(b"")) {
        tracing::warn!("serving blob {digest}: its file holds {size} bytes, declared {declared:?}");
        return Err(NotServed::Corrupt);
    }
    Ok((path, base, size))
}

/// What a `Range` header asks of a blob of `size` bytes: status, start and length.
async fn blob_span(
    s: &Served,
    digest: &Digest,
    headers: &HeaderMap,
    size: u64,
) -> Result<(StatusCode, u64, u64), NotServed> {
    let range = headers
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .map(|r| super::parse_range(r, size));
    match range {
        None | Some(super::RangeAsk::Whole) => Ok((StatusCode::OK, 0, size)),
        // A part cannot be checked on its own: the whole blob is hashed first (once).
        Some(super::RangeAsk::Part(..)) if !s.blob_ok(digest).await => Err(NotServed::Corrupt),
        Some(super::RangeAsk::Part(a, b)) => Ok((StatusCode::PARTIAL_CONTENT, a, b - a + 1)),
        Some(super::RangeAsk::Unsatisfiable) => Err(NotServed::Unsatisfiable(size)),
    }
}

/// Opens a regular file (never a FIFO or a symlink) at `offset`.
async fn open_regular_at(
    path: &std::path::Path,
    offset: u64,
) -> std::io::Result<fs_err::tokio::File> {
    use tokio::io::AsyncSeekExt as _;
    let p = path.to_path_buf();
    let (file, _) = tokio::task::spawn_blocking(move || crate::bounded::open_regular(&p))
        .await
        .map_err(std::io::Error::other)??;
    let mut f = fs_err::tokio::File::from_std(file);
    f.seek(std::io::SeekFrom::Start(offset)).await?;
    Ok(f)
}
