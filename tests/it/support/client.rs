//! A small, independent distribution-API client for the harness: it fills source registries and
//! reads results back, so tests of `bootstrap` never depend on `bootstrap`'s own client.
//!
//! It handles the three registry flavours the way real clients do: anonymous, Basic after a
//! `WWW-Authenticate: Basic` challenge, and the Bearer dance (parse the challenge, fetch a token
//! from the realm with Basic credentials, cache it per scope until `expires_in`, fetch a new one
//! on expiry or on a 401). Blobs are HEADed before upload and mounted across repositories when
//! this client already put them elsewhere, so each unique blob is uploaded once per registry.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use bytes::Bytes;
use reqwest::header::{HeaderMap, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, WWW_AUTHENTICATE};
use reqwest::StatusCode;

use super::layers::{self, LayerSpec, IN_MEMORY_LIMIT, STREAM_CHUNK};
use super::registry::Registry;

/// Where a blob's bytes come from.
#[derive(Clone, Debug)]
pub enum BlobSource {
    /// Bytes in memory.
    Bytes(Bytes),
    /// A synthetic layer, generated on the fly (streamed in chunks when large).
    Layer(LayerSpec),
}

/// How [`RegistryClient::push_blob`] got a blob into the repository.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlobOutcome {
    /// HEAD found it there already.
    Existed,
    /// Mounted from another repository of the same registry.
    Mounted,
    /// Uploaded.
    Uploaded,
}

#[derive(Clone, Debug)]
struct BearerChallenge {
    realm: String,
    service: Option<String>,
}

#[derive(Default)]
struct AuthState {
    basic: bool,
    bearer: Option<BearerChallenge>,
    tokens: HashMap<String, (String, Instant)>,
    tokens_fetched: usize,
    known_blobs: HashMap<String, String>,
}

/// A distribution-API client for one registry. Bound to the tokio runtime it is first used on.
pub struct RegistryClient {
    http: reqwest::Client,
    base: String,
    creds: Option<(String, String)>,
    state: Mutex<AuthState>,
}

/// Refresh a cached token this long before it expires.
const TOKEN_MARGIN: Duration = Duration::from_secs(1);

impl RegistryClient {
    /// A client for `registry`, trusting its CA and using its credentials.
    pub fn new(registry: &Registry) -> Self {
        RegistryClient {
            http: registry.http_client(),
            base: registry.url(),
            creds: registry.credentials(),
            state: Mutex::new(AuthState::default()),
        }
    }

    /// A client for `base` (`http(s)://host:port`) with an explicit HTTP client and credentials.
    pub fn with_parts(http: reqwest::Client, base: &str, creds: Option<(String, String)>) -> Self {
        RegistryClient {
            http,
            base: base.trim_end_matches('/').to_string(),
            creds,
            state: Mutex::new(AuthState::default()),
        }
    }

    /// How many tokens this client fetched from a realm.
    pub fn tokens_fetched(&self) -> usize {
        self.state.lock().unwrap().tokens_fetched
    }

    /// Sends a request built by `make` (called again for each retry), authenticating for
    /// `scopes` as the registry demands. Returns the final response whatever its status.
    pub async fn send(
        &self,
        scopes: &[String],
        make: impl Fn(&reqwest::Client) -> reqwest::RequestBuilder,
    ) -> Result<reqwest::Response> {
        let mut refreshed = false;
        for attempt in 0..3 {
            let mut rb = make(&self.http);
            if let Some(h) = self.auth_header(scopes).await? {
                rb = rb.header(AUTHORIZATION, h);
            }
            let resp = rb.send().await?;
            if resp.status() != StatusCode::UNAUTHORIZED || attempt == 2 {
                return Ok(resp);
            }
            let challenge = resp
                .headers()
                .get(WWW_AUTHENTICATE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            if !self.take_challenge(&challenge, scopes, refreshed).await? {
                return Ok(resp);
            }
            refreshed = true;
        }
        unreachable!()
    }

    /// Learns from a 401's challenge; returns whether a retry can succeed.
    async fn take_challenge(
        &self,
        challenge: &str,
        scopes: &[String],
        already_refreshed: bool,
    ) -> Result<bool> {
        let (scheme, params) = parse_challenge(challenge);
        if scheme.eq_ignore_ascii_case("basic") {
            let mut st = self.state.lock().unwrap();
            if st.basic || self.creds.is_none() {
                return Ok(false);
            }
            st.basic = true;
            return Ok(true);
        }
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Ok(false);
        }
        let realm = params
            .get("realm")
            .cloned()
            .ok_or_else(|| anyhow!("Bearer challenge without realm: {challenge}"))?;
        let mut wanted: Vec<String> = scopes.to_vec();
        if let Some(s) = params.get("scope") {
            for scope in s.split(' ') {
                if !scope.is_empty() && !wanted.iter().any(|w| w == scope) {
                    wanted.push(scope.to_string());
                }
            }
        }
        {
            let mut st = self.state.lock().unwrap();
            st.bearer = Some(BearerChallenge {
                realm,
                service: params.get("service").cloned(),
            });
            if already_refreshed && wanted == scopes {
                // A fresh token for exactly these scopes was refused: do not loop.
                return Ok(false);
            }
        }
        self.fetch_token(scopes, &wanted).await?;
        Ok(true)
    }

    /// The Authorization header value for `scopes`, fetching a token when one is due.
    async fn auth_header(&self, scopes: &[String]) -> Result<Option<String>> {
        let bearer = {
            let st = self.state.lock().unwrap();
            if st.basic {
                let (u, p) = self.creds.as_ref().unwrap();
                return Ok(Some(format!(
                    "Basic {}",
                    STANDARD.encode(format!("{u}:{p}"))
                )));
            }
            if st.bearer.is_none() {
                return Ok(None);
            }
            match st.tokens.get(&scopes.join(" ")) {
                Some((token, expires)) if Instant::now() + TOKEN_MARGIN < *expires => {
                    return Ok(Some(format!("Bearer {token}")));
                }
                _ => true,
            }
        };
        if bearer {
            let token = self.fetch_token(scopes, scopes).await?;
            return Ok(Some(format!("Bearer {token}")));
        }
        Ok(None)
    }

    /// Fetches a token for `wanted` from the realm and caches it under `scopes`' key.
    async fn fetch_token(&self, scopes: &[String], wanted: &[String]) -> Result<String> {
        let challenge = self
            .state
            .lock()
            .unwrap()
            .bearer
            .clone()
            .ok_or_else(|| anyhow!("no Bearer realm known"))?;
        let mut url = challenge.realm.clone();
        let mut sep = if url.contains('?') { '&' } else { '?' };
        if let Some(service) = &challenge.service {
            url.push_str(&format!("{sep}service={}", super::percent_encode(service)));
            sep = '&';
        }
        for scope in wanted {
            url.push_str(&format!("{sep}scope={}", super::percent_encode(scope)));
            sep = '&';
        }
        let mut req = self.http.get(&url);
        if let Some((u, p)) = &self.creds {
            req = req.basic_auth(u, Some(p));
        }
        let resp = req.send().await.context("token request")?;
        let status = resp.status();
        if !status.is_success() {
            bail!(
                "token realm answered {status}: {}",
                resp.text().await.unwrap_or_default()
            );
        }
        let body: serde_json::Value = resp.json().await.context("token response JSON")?;
        let token = body
            .get("token")
            .or_else(|| body.get("access_token"))
            .and_then(|t| t.as_str())
            .ok_or_else(|| anyhow!("token response without token: {body}"))?
            .to_string();
        let expires_in = body
            .get("expires_in")
            .and_then(|v| v.as_u64())
            .unwrap_or(60);
        let mut st = self.state.lock().unwrap();
        st.tokens_fetched += 1;
        st.tokens.insert(
            scopes.join(" "),
            (
                token.clone(),
                Instant::now() + Duration::from_secs(expires_in),
            ),
        );
        Ok(token)
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn absolute(&self, location: &str) -> String {
        if location.starts_with("http://") || location.starts_with("https://") {
            location.to_string()
        } else {
            self.url(location)
        }
    }

    /// The scopes this client asks for when writing to `repo`.
    pub fn push_scopes(repo: &str) -> Vec<String> {
        vec![format!("repository:{repo}:pull,push")]
    }

    /// The scopes this client asks for when reading `repo`.
    pub fn pull_scopes(repo: &str) -> Vec<String> {
        vec![format!("repository:{repo}:pull")]
    }

    /// `HEAD /v2/<repo>/blobs/<digest>`: the blob's size when present.
    pub async fn head_blob(&self, repo: &str, digest: &str) -> Result<Option<u64>> {
        let url = self.url(&format!("/v2/{repo}/blobs/{digest}"));
        let resp = self
            .send(&Self::push_scopes(repo), |c| c.head(&url))
            .await?;
        match resp.status() {
            StatusCode::OK => Ok(Some(content_length(resp.headers()).unwrap_or(0))),
            StatusCode::NOT_FOUND => Ok(None),
            s => bail!("HEAD {url}: {s}"),
        }
    }

    /// Gets a blob into `repo`: nothing if HEAD finds it, a mount if this client already put
    /// it in another repository, an upload otherwise.
    pub async fn push_blob(
        &self,
        repo: &str,
        digest: &str,
        source: BlobSource,
    ) -> Result<BlobOutcome> {
        if self.head_blob(repo, digest).await?.is_some() {
            self.remember(repo, digest);
            return Ok(BlobOutcome::Existed);
        }
        let from = self.state.lock().unwrap().known_blobs.get(digest).cloned();
        let location = match from {
            Some(from) if from != repo => {
                let url = self.url(&format!(
                    "/v2/{repo}/blobs/uploads/?mount={digest}&from={from}"
                ));
                let mut scopes = Self::push_scopes(repo);
                scopes.push(format!("repository:{from}:pull"));
                let resp = self.send(&scopes, |c| c.post(&url)).await?;
                match resp.status() {
                    StatusCode::CREATED => {
                        self.remember(repo, digest);
                        return Ok(BlobOutcome::Mounted);
                    }
                    StatusCode::ACCEPTED => location_header(resp.headers())?,
                    s => bail!("POST {url}: {s}"),
                }
            }
            _ => self.start_upload(repo).await?,
        };
        let location = self.absolute(&location);
        match source {
            BlobSource::Bytes(data) => self.finish_upload(repo, &location, digest, data).await?,
            BlobSource::Layer(spec) if spec.size <= IN_MEMORY_LIMIT => {
                let (data, info) = layers::layer_bytes(&spec);
                if info.digest != digest {
                    bail!("layer {spec:?} is {} not {digest}", info.digest);
                }
                self.finish_upload(repo, &location, digest, Bytes::from(data))
                    .await?
            }
            BlobSource::Layer(spec) => {
                self.stream_layer(repo, &location, digest, spec).await?;
            }
        }
        self.remember(repo, digest);
        Ok(BlobOutcome::Uploaded)
    }

    fn remember(&self, repo: &str, digest: &str) {
        self.state
            .lock()
            .unwrap()
            .known_blobs
            .entry(digest.to_string())
            .or_insert_with(|| repo.to_string());
    }

    /// `POST /v2/<repo>/blobs/uploads/`: the upload's location.
    pub async fn start_upload(&self, repo: &str) -> Result<String> {
        let url = self.url(&format!("/v2/{repo}/blobs/uploads/"));
        let resp = self
            .send(&Self::push_scopes(repo), |c| {
                c.post(&url).header(CONTENT_LENGTH, "0")
            })
            .await?;
        if resp.status() != StatusCode::ACCEPTED {
            bail!("POST {url}: {}", resp.status());
        }
        location_header(resp.headers())
    }

    /// The closing `PUT <location>&digest=…` with `data` as the (last) body.
    async fn finish_upload(
        &self,
        repo: &str,
        location: &str,
        digest: &str,
        data: Bytes,
    ) -> Result<()> {
        let sep = if location.contains('?') { '&' } else { '?' };
        let url = format!("{location}{sep}digest={digest}");
        let resp = self
            .send(&Self::push_scopes(repo), |c| {
                c.put(&url)
                    .header(CONTENT_TYPE, "application/octet-stream")
                    .header(CONTENT_LENGTH, data.len().to_string())
                    .body(data.clone())
            })
            .await?;
        if resp.status() != StatusCode::CREATED {
            bail!(
                "PUT blob {digest}: {} {}",
                resp.status(),
                resp.text().await.unwrap_or_default()
            );
        }
        Ok(())
    }

    /// Generates `spec` on a producer thread and uploads it in `PATCH` chunks, never holding
    /// more than a few chunks; the digest was computed beforehand by generating it once.
    async fn stream_layer(
        &self,
        repo: &str,
        location: &str,
        digest: &str,
        spec: LayerSpec,
    ) -> Result<()> {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Bytes>(1);
        let producer = std::thread::spawn(move || {
            let (sink, info) =
                layers::write_layer(&spec, layers::ChunkSink::new(tx, STREAM_CHUNK))?;
            sink.finish()?;
            Ok::<_, std::io::Error>(info)
        });
        let mut location = location.to_string();
        let mut offset: u64 = 0;
        let scopes = Self::push_scopes(repo);
        let result: Result<()> = async {
            while let Some(chunk) = rx.recv().await {
                let len = chunk.len() as u64;
                let url = location.clone();
                let range = format!("{}-{}", offset, offset + len - 1);
                let resp = self
                    .send(&scopes, |c| {
                        c.patch(&url)
                            .header(CONTENT_TYPE, "application/octet-stream")
                            .header(CONTENT_LENGTH, len.to_string())
                            .header("Content-Range", range.clone())
                            .body(chunk.clone())
                    })
                    .await?;
                if resp.status() != StatusCode::ACCEPTED {
                    bail!("PATCH {url} ({range}): {}", resp.status());
                }
                location = self.absolute(&location_header(resp.headers())?);
                offset += len;
            }
            Ok(())
        }
        .await;
        drop(rx);
        let info = producer
            .join()
            .map_err(|_| anyhow!("layer producer panicked"))?;
        result?;
        let info = info?;
        if info.digest != digest || info.size != offset {
            bail!(
                "streamed layer is {} ({} bytes), expected {digest}",
                info.digest,
                offset
            );
        }
        self.finish_upload(repo, &location, digest, Bytes::new())
            .await
    }

    /// `PUT /v2/<repo>/manifests/<reference>`; checks and returns the registry's digest.
    pub async fn put_manifest(
        &self,
        repo: &str,
        reference: &str,
        media_type: &str,
        body: &[u8],
    ) -> Result<String> {
        let url = self.url(&format!("/v2/{repo}/manifests/{reference}"));
        let body = Bytes::copy_from_slice(body);
        let resp = self
            .send(&Self::push_scopes(repo), |c| {
                c.put(&url)
                    .header(CONTENT_TYPE, media_type)
                    .body(body.clone())
            })
            .await?;
        if resp.status() != StatusCode::CREATED {
            bail!(
                "PUT {url}: {} {}",
                resp.status(),
                resp.text().await.unwrap_or_default()
            );
        }
        let expected = layers::sha256_digest(&body);
        let got = resp
            .headers()
            .get("Docker-Content-Digest")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if got != expected {
            bail!("registry says manifest {reference} is {got}, we computed {expected}");
        }
        Ok(expected)
    }

    /// `GET /v2/<repo>/manifests/<reference>` accepting every manifest type the harness
    /// writes: `(media type, bytes)`.
    pub async fn get_manifest(&self, repo: &str, reference: &str) -> Result<(String, Vec<u8>)> {
        let url = self.url(&format!("/v2/{repo}/manifests/{reference}"));
        let accept = super::images::ALL_MANIFEST_TYPES.join(", ");
        let resp = self
            .send(&Self::pull_scopes(repo), |c| {
                c.get(&url).header("Accept", accept.clone())
            })
            .await?;
        if resp.status() != StatusCode::OK {
            bail!("GET {url}: {}", resp.status());
        }
        let media_type = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        Ok((media_type, resp.bytes().await?.to_vec()))
    }

    /// `GET /v2/<repo>/blobs/<digest>` into memory (for small blobs).
    pub async fn get_blob(&self, repo: &str, digest: &str) -> Result<Vec<u8>> {
        let url = self.url(&format!("/v2/{repo}/blobs/{digest}"));
        let resp = self.send(&Self::pull_scopes(repo), |c| c.get(&url)).await?;
        if resp.status() != StatusCode::OK {
            bail!("GET {url}: {}", resp.status());
        }
        Ok(resp.bytes().await?.to_vec())
    }
}

fn location_header(headers: &HeaderMap) -> Result<String> {
    headers
        .get("Location")
        .and_then(|v| v.to_str().ok())
        .map(String::from)
        .ok_or_else(|| anyhow!("response without Location"))
}

fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
}

/// Splits `Scheme k="v",k2="v2"` into the scheme and its (lower-cased key) parameters.
pub fn parse_challenge(header: &str) -> (String, HashMap<String, String>) {
    let header = header.trim();
    let (scheme, rest) = header.split_once(' ').unwrap_or((header, ""));
    let mut params = HashMap::new();
    let mut chars = rest.chars().peekable();
    loop {
        while matches!(chars.peek(), Some(' ') | Some(',')) {
            chars.next();
        }
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' {
                break;
            }
            key.push(c);
            chars.next();
        }
        if chars.next().is_none() {
            break;
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '"' => break,
                    '\\' => {
                        if let Some(n) = chars.next() {
                            value.push(n);
                        }
                    }
                    c => value.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == ',' {
                    break;
                }
                value.push(c);
                chars.next();
            }
        }
        params.insert(key.trim().to_ascii_lowercase(), value);
    }
    (scheme.to_string(), params)
}
