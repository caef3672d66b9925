//! A real Distribution 2.8 registry (`docker-registry serve`) per test, on `127.0.0.1` with an
//! ephemeral port and storage in a temporary directory, in the three shapes a site's mirror
//! registry takes: plain HTTP, HTTPS with htpasswd (Basic) auth, and HTTPS with token auth.
//!
//! The registry's log (text formatter, level info) goes to a file in its directory; the request
//! counters ([`Registry::blob_uploads_completed`] and friends) read it, so they report what the
//! server saw. The process is killed and reaped on drop.

use fs_err::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use tempfile::TempDir;

use super::reglog::{self, LoggedRequest};
use super::tls::TestPki;
use super::token::{TokenConfig, TokenServer};

/// The registry's `auth.token.service` (the tokens' audience) in the token flavour.
pub const TOKEN_SERVICE: &str = "bootstrap-test-registry";
/// The registry's `auth.token.issuer` in the token flavour.
pub const TOKEN_ISSUER: &str = "bootstrap-test-token-issuer";
/// The htpasswd realm of the Basic flavour.
pub const BASIC_REALM: &str = "bootstrap-test-basic";

/// How the registry is reached and authenticated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    /// HTTP, anonymous read and write.
    Plain,
    /// HTTPS (per-run CA), htpasswd (bcrypt) Basic auth.
    TlsBasic,
    /// HTTPS (per-run CA), `auth: token` against the harness's [`TokenServer`].
    TlsToken,
}

/// Token lifetime settings of the token flavour.
#[derive(Clone, Debug)]
pub struct TokenOptions {
    /// Lifetime of each token (`expires_in`). Default 300 s.
    pub ttl: Duration,
    /// When true (the default), the registry stops accepting a token exactly `ttl` after it was
    /// issued: `exp` is written 60 s early to cancel Distribution's 60 s leeway. When false,
    /// `exp = iat + ttl` and the registry accepts the token for 60 s more.
    pub exact_expiry: bool,
}

impl Default for TokenOptions {
    fn default() -> Self {
        TokenOptions {
            ttl: Duration::from_secs(300),
            exact_expiry: true,
        }
    }
}

/// A running `docker-registry serve`; killed and reaped on drop.
pub struct Registry {
    flavour: Flavour,
    port: u16,
    child: Mutex<Option<Child>>,
    log_path: PathBuf,
    storage: PathBuf,
    pki: Option<TestPki>,
    creds: Option<(String, String)>,
    token: Option<TokenServer>,
    sync_seq: AtomicU64,
    // Last, so that it is removed after the process and the token server are gone.
    dir: TempDir,
}

impl Registry {
    /// An HTTP registry with anonymous access. Panics (with the registry's log) if it fails.
    pub fn plain() -> Registry {
        Self::start(Flavour::Plain, None, TokenOptions::default()).expect("starting registry")
    }

    /// An HTTPS registry with a per-run CA and htpasswd auth for `user`/`password`.
    pub fn tls_basic(user: &str, password: &str) -> Registry {
        Self::start(
            Flavour::TlsBasic,
            Some((user, password)),
            TokenOptions::default(),
        )
        .expect("starting registry")
    }

    /// As [`Self::tls_basic`], with a self-signed `CA:TRUE` certificate made by openssl (see
    /// [`TestPki::openssl_self_signed`]); [`Self::ca_pem`] is that certificate.
    pub fn tls_basic_self_signed(user: &str, password: &str) -> Registry {
        Self::start_with(
            Flavour::TlsBasic,
            Some((user, password)),
            TokenOptions::default(),
            true,
        )
        .expect("starting registry")
    }

    /// An HTTPS registry with token auth; the harness's token server knows `user`/`password`
    /// and issues tokens living 300 s (see [`TokenOptions`]).
    pub fn tls_token(user: &str, password: &str) -> Registry {
        Self::tls_token_with(user, password, TokenOptions::default())
    }

    /// As [`Self::tls_token`], with tokens that the registry stops accepting `ttl` after issue
    /// (`expires_in` says the same). Note that many clients (containers/image among them) treat
    /// `expires_in` under 60 s as 60 s, so they can outlive such a token.
    pub fn tls_token_with_ttl(user: &str, password: &str, ttl: Duration) -> Registry {
        Self::tls_token_with(
            user,
            password,
            TokenOptions {
                ttl,
                exact_expiry: true,
            },
        )
    }

    /// As [`Self::tls_token`], with explicit token options.
    pub fn tls_token_with(user: &str, password: &str, options: TokenOptions) -> Registry {
        Self::start(Flavour::TlsToken, Some((user, password)), options).expect("starting registry")
    }

    /// Starts a registry of `flavour`; `creds` is required for the authenticated flavours.
    pub fn start(
        flavour: Flavour,
        creds: Option<(&str, &str)>,
        token_options: TokenOptions,
    ) -> Result<Registry> {
        Self::start_with(flavour, creds, token_options, false)
    }

    fn start_with(
        flavour: Flavour,
        creds: Option<(&str, &str)>,
        token_options: TokenOptions,
        self_signed: bool,
    ) -> Result<Registry> {
        let dir = tempfile::Builder::new()
            .prefix("bootstrap-registry-")
            .tempdir()?;
        let storage = dir.path().join("storage");
        fs_err::create_dir_all(&storage)?;
        let log_path = dir.path().join("registry.log");
        let creds = creds.map(|(u, p)| (u.to_string(), p.to_string()));
        if flavour != Flavour::Plain && creds.is_none() {
            bail!("{flavour:?} needs credentials");
        }
        let pki = match flavour {
            Flavour::Plain => None,
            _ if self_signed => Some(TestPki::openssl_self_signed(&dir.path().join("tls"))?),
            _ => Some(TestPki::generate(&dir.path().join("tls"))?),
        };

        let mut auth = String::new();
        let mut token = None;
        match flavour {
            Flavour::Plain => {}
            Flavour::TlsBasic => {
                let (user, password) = creds.as_ref().unwrap();
                let htpasswd = dir.path().join("htpasswd");
                fs_err::write(&htpasswd, htpasswd_line(user, password)?)?;
                auth = format!(
                    "auth:\n  htpasswd:\n    realm: {BASIC_REALM}\n    path: {}\n",
                    yaml_str(&htpasswd)
                );
            }
            Flavour::TlsToken => {
                let (user, password) = creds.clone().unwrap();
                let server = TokenServer::start(
                    pki.as_ref().unwrap(),
                    TokenConfig {
                        user,
                        password,
                        service: TOKEN_SERVICE.to_string(),
                        issuer: TOKEN_ISSUER.to_string(),
                        ttl: token_options.ttl,
                        exact_expiry: token_options.exact_expiry,
                    },
                )?;
                auth = format!(
                    "auth:\n  token:\n    realm: {}\n    service: {TOKEN_SERVICE}\n    issuer: {TOKEN_ISSUER}\n    rootcertbundle: {}\n",
                    server.realm(),
                    yaml_str(&pki.as_ref().unwrap().token_bundle_path)
                );
                token = Some(server);
            }
        }
        let tls = match &pki {
            None => String::new(),
            Some(pki) => format!(
                "  tls:\n    certificate: {}\n    key: {}\n",
                yaml_str(&pki.server_cert_path),
                yaml_str(&pki.server_key_path)
            ),
        };

        let mut last_error = None;
        for attempt in 1..=5 {
            let port = free_port()?;
            let config = format!(
                "version: 0.1\n\
                 log:\n  level: info\n  formatter: text\n  accesslog:\n    disabled: true\n\
                 storage:\n  filesystem:\n    rootdirectory: {storage}\n  delete:\n    enabled: true\n  \
                 maintenance:\n    uploadpurging:\n      enabled: false\n\
                 http:\n  addr: 127.0.0.1:{port}\n  secret: bootstrap-test-http-secret\n  \
                 headers:\n    X-Content-Type-Options: [nosniff]\n{tls}{auth}",
                storage = yaml_str(&storage),
            );
            let config_path = dir.path().join("config.yml");
            fs_err::write(&config_path, config)?;
            let mut child = spawn_registry(&config_path, &log_path)?;
            match wait_ready(&mut child, port, &log_path, pki.as_ref()) {
                Ok(()) => {
                    return Ok(Registry {
                        flavour,
                        port,
                        child: Mutex::new(Some(child)),
                        log_path,
                        storage,
                        pki,
                        creds,
                        token,
                        sync_seq: AtomicU64::new(0),
                        dir,
                    });
                }
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    let log = fs_err::read_to_string(&log_path).unwrap_or_default();
                    let retry = log.contains("address already in use");
                    last_error = Some(e.context(format!(
                        "registry attempt {attempt} on port {port} failed; log:\n{log}"
                    )));
                    if !retry {
                        break;
                    }
                    // A fresh log for the next attempt, so counters see one registry only.
                    File::create(&log_path)?;
                }
            }
        }
        Err(last_error.unwrap())
    }

    /// `127.0.0.1:PORT`, the registry's host in image references.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `http://127.0.0.1:PORT` or `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        let scheme = if self.pki.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.host())
    }

    /// `HOST/path` for an image reference (`path` like `repo:tag` or `repo@sha256:…`).
    pub fn reference(&self, path: &str) -> String {
        format!("{}/{path}", self.host())
    }

    /// The CA certificate file (PEM) that signed the registry's and the token realm's
    /// certificates, for TLS flavours.
    pub fn ca_pem(&self) -> Option<PathBuf> {
        self.pki.as_ref().map(|p| p.ca_path.clone())
    }

    /// A directory holding only the CA as `ca.crt` (for `skopeo --cert-dir`), for TLS flavours.
    pub fn cert_dir(&self) -> Option<PathBuf> {
        self.pki.as_ref().map(|p| p.cert_dir.clone())
    }

    /// A `reqwest` client that trusts exactly this registry's CA (plain HTTP for `Plain`), with
    /// no proxy. Bound to the tokio runtime it is first used on.
    pub fn http_client(&self) -> reqwest::Client {
        http_client(self.pki.as_ref()).expect("building reqwest client")
    }

    /// The user and password, for authenticated flavours.
    pub fn credentials(&self) -> Option<(String, String)> {
        self.creds.clone()
    }

    /// Writes a containers/docker `auth.json` for this registry's host (an empty `auths` for
    /// the anonymous flavour).
    pub fn write_authfile(&self, path: &Path) -> Result<()> {
        write_authfile_entries(path, &[], &[self])
    }

    /// The token server of the token flavour.
    pub fn token_server(&self) -> Option<&TokenServer> {
        self.token.as_ref()
    }

    /// Tokens issued by the token server so far (0 for other flavours).
    pub fn tokens_issued(&self) -> usize {
        self.token.as_ref().map_or(0, TokenServer::tokens_issued)
    }

    /// The registry's storage root (`storage.filesystem.rootdirectory`).
    pub fn storage_dir(&self) -> &Path {
        &self.storage
    }

    /// The registry's temporary directory (config, log, TLS files, storage).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The registry's log so far (after letting it catch up with requests already answered).
    pub fn log_text(&self) -> String {
        self.settle();
        fs_err::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// Every request the registry logged with a status, in order, excluding the harness's own
    /// log-synchronisation requests.
    pub fn requests(&self) -> Vec<LoggedRequest> {
        reglog::requests(&self.log_text())
            .into_iter()
            .filter(|r| r.query_value(SYNC_PARAM).is_none())
            .collect()
    }

    /// Completed uploads of blob `digest`: final `PUT …/blobs/uploads/…?digest=<digest>`
    /// answered 201. Mounts and HEAD hits are not uploads.
    pub fn blob_uploads_completed(&self, digest: &str) -> usize {
        self.requests()
            .iter()
            .filter(|r| r.is_completed_upload() && r.query_value("digest") == Some(digest))
            .count()
    }

    /// Completed blob uploads of any digest.
    pub fn blob_upload_puts_total(&self) -> usize {
        self.requests()
            .iter()
            .filter(|r| r.is_completed_upload())
            .count()
    }

    /// Cross-repository mounts the registry performed (`POST …?mount=` answered 201).
    pub fn mounts_total(&self) -> usize {
        self.requests().iter().filter(|r| r.is_mount()).count()
    }

    /// Logged requests with `method` whose decoded path-and-query contains `uri_substring`
    /// (any status).
    pub fn requests_matching(&self, method: &str, uri_substring: &str) -> usize {
        self.requests()
            .iter()
            .filter(|r| {
                r.method.eq_ignore_ascii_case(method)
                    && (r.uri.contains(uri_substring)
                        || super::percent_decode(&r.uri, false).contains(uri_substring))
            })
            .count()
    }

    /// Requests the registry's auth layer refused (401s).
    pub fn auth_failures(&self) -> usize {
        reglog::auth_failures(&self.log_text())
    }

    /// Flags for `skopeo inspect` and other single-image commands: `--tls-verify=false` for
    /// plain HTTP, `--cert-dir DIR` for TLS, `--creds user:pass` when authenticated.
    pub fn skopeo_tls_args(&self) -> Vec<String> {
        self.skopeo_flags("")
    }

    /// As [`Self::skopeo_tls_args`], for this registry as the source of `skopeo copy`
    /// (`--src-tls-verify`, `--src-cert-dir`, `--src-creds`).
    pub fn skopeo_src_args(&self) -> Vec<String> {
        self.skopeo_flags("src-")
    }

    /// As [`Self::skopeo_tls_args`], for this registry as the destination of `skopeo copy`
    /// (`--dest-tls-verify`, `--dest-cert-dir`, `--dest-creds`).
    pub fn skopeo_dest_args(&self) -> Vec<String> {
        self.skopeo_flags("dest-")
    }

    fn skopeo_flags(&self, prefix: &str) -> Vec<String> {
        let mut args = Vec::new();
        match &self.pki {
            None => args.push(format!("--{prefix}tls-verify=false")),
            Some(pki) => {
                args.push(format!("--{prefix}cert-dir"));
                args.push(pki.cert_dir.display().to_string());
            }
        }
        if let Some((user, password)) = &self.creds {
            args.push(format!("--{prefix}creds"));
            args.push(format!("{user}:{password}"));
        }
        args
    }

    /// Runs `skopeo inspect [--raw] docker://HOST/<path>` with this registry's flags and
    /// returns stdout; fails with skopeo's stderr.
    pub fn skopeo_inspect(&self, path: &str, raw: bool) -> Result<String> {
        let mut cmd = Command::new("skopeo");
        cmd.arg("inspect");
        if raw {
            cmd.arg("--raw");
        }
        cmd.args(self.skopeo_tls_args())
            .arg(format!("docker://{}", self.reference(path)));
        let out = cmd.output().context("running skopeo")?;
        if !out.status.success() {
            bail!(
                "skopeo inspect {path} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8(out.stdout)?)
    }

    /// The tags `GET /v2/<repo>/tags/list` lists (a plain registry: no credentials sent).
    pub fn tags(&self, repo: &str) -> Vec<String> {
        let url = format!("{}/v2/{repo}/tags/list", self.url());
        let body: serde_json::Value = super::block_on(async {
            let resp = self.http_client().get(&url).send().await.unwrap();
            assert!(resp.status().is_success(), "GET {url}: {}", resp.status());
            resp.json().await.unwrap()
        });
        let mut tags: Vec<String> = body["tags"]
            .as_array()
            .map(|t| t.iter().map(|x| x.as_str().unwrap().to_string()).collect())
            .unwrap_or_default();
        tags.sort();
        tags
    }

    /// Kills and reaps the registry process (idempotent; drop does it too). The token server
    /// keeps running until drop.
    pub fn stop(&self) {
        if let Some(mut child) = self.child.lock().unwrap().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Whether the registry process is still running.
    pub fn is_running(&self) -> bool {
        match self.child.lock().unwrap().as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Lets the log catch up: the registry writes a request's line just after answering it, so
    /// a test that counts right after its client returned could miss the last line. Sends a
    /// marked request and waits until its line is in the log.
    fn settle(&self) {
        if !self.is_running() {
            return;
        }
        let marker = format!(
            "{}-{}",
            std::process::id(),
            self.sync_seq.fetch_add(1, Ordering::SeqCst)
        );
        let url = format!("{}/v2/?{SYNC_PARAM}={marker}", self.url());
        let auth = match self.flavour {
            Flavour::Plain => None,
            Flavour::TlsBasic => {
                let (u, p) = self.creds.as_ref().unwrap();
                Some(format!("Basic {}", STANDARD.encode(format!("{u}:{p}"))))
            }
            Flavour::TlsToken => {
                let token = self.token.as_ref().unwrap();
                let user = &self.creds.as_ref().unwrap().0;
                Some(format!("Bearer {}", token.mint(user, &[])))
            }
        };
        let pki = self.pki.as_ref();
        let answered = super::block_on(async move {
            let client = http_client(pki).ok()?;
            let mut req = client.get(&url);
            if let Some(a) = auth {
                req = req.header("Authorization", a);
            }
            req.send().await.ok().map(|r| r.status().as_u16())
        });
        if answered != Some(200) {
            return;
        }
        let needle = format!("{SYNC_PARAM}={marker}");
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            let text = fs_err::read_to_string(&self.log_path).unwrap_or_default();
            if text.contains(&needle) {
                // Lines of requests answered before the marker are written by then, bar a
                // goroutine descheduled between answering and logging.
                std::thread::sleep(Duration::from_millis(20));
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Writes one `auth.json` (`{"auths":{HOST:{"auth":base64(user:pass)}}}`) holding `entries`
/// (`(host, user, password)`) and then the credentials of each of `registries` whose host no
/// entry named (anonymous registries add nothing).
pub fn write_authfile_entries(
    path: &Path,
    entries: &[(String, &str, &str)],
    registries: &[&Registry],
) -> Result<()> {
    let mut auths = serde_json::Map::new();
    let mut add = |host: String, user: &str, password: &str| {
        auths.entry(host).or_insert_with(
            || serde_json::json!({"auth": STANDARD.encode(format!("{user}:{password}"))}),
        );
    };
    for (host, user, password) in entries {
        add(host.clone(), user, password);
    }
    for r in registries {
        if let Some((user, password)) = &r.creds {
            add(r.host(), user, password);
        }
    }
    let doc = serde_json::json!({ "auths": auths });
    fs_err::write(path, serde_json::to_vec_pretty(&doc)?)
        .with_context(|| format!("writing {}", path.display()))
}

/// Writes the CAs of every TLS registry among `registries` into one PEM bundle (a
/// `--ca-bundle`); an empty file when none uses TLS.
pub fn write_ca_bundle_of(path: &Path, registries: &[&Registry]) -> Result<()> {
    let pems: String = registries
        .iter()
        .filter_map(|r| r.pki.as_ref().map(|p| p.ca_pem.clone()))
        .collect();
    fs_err::write(path, pems).with_context(|| format!("writing {}", path.display()))
}

/// The query parameter of the harness's log-synchronisation requests.
const SYNC_PARAM: &str = "harness-sync";

/// A `reqwest` client trusting only `pki`'s CA (or the default roots without one), no proxy.
pub fn http_client(pki: Option<&TestPki>) -> Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder()
        .no_proxy()
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(120))
        .user_agent("bootstrap-test-harness");
    match pki {
        // webpki refuses a CA:TRUE certificate as a server's own; the harness only needs to
        // see the registry answer (bootstrap's own trust of it is what the tests check).
        Some(pki) if pki.self_signed => builder = builder.tls_danger_accept_invalid_certs(true),
        Some(pki) => builder = builder.tls_certs_only([pki.reqwest_ca()?]),
        None => {}
    }
    Ok(builder.build()?)
}

/// A port that was free on 127.0.0.1 a moment ago, for a server the test starts later. It is
/// taken below the kernel's ephemeral range (`ip_local_port_range`), at random: a port the
/// kernel handed out for `:0` would be handed out again to the next server or outgoing
/// connection of any test running beside this one before ours binds it (a lab's BMC emulator
/// once found its port taken that way). Falls back to `:0` when there is no room below.
pub fn free_port() -> Result<u16> {
    use std::hash::{BuildHasher as _, Hasher as _};
    let low = fs_err::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    const FLOOR: u16 = 10_000;
    if low > FLOOR + 1000 {
        for attempt in 0..64u64 {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(attempt);
            h.write_u32(std::process::id());
            let port = FLOOR + (h.finish() % u64::from(low - FLOOR)) as u16;
            if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return Ok(port);
            }
        }
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

fn registry_binary() -> PathBuf {
    let debian = PathBuf::from("/usr/bin/docker-registry");
    if debian.exists() {
        debian
    } else {
        PathBuf::from("docker-registry")
    }
}

fn spawn_registry(config: &Path, log_path: &Path) -> Result<Child> {
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_path)?;
    // The registry reads REGISTRY_* variables as configuration overrides (REGISTRY_AUTH_FILE,
    // set for containers tools, would break it): give it a clean environment.
    Command::new(registry_binary())
        .arg("serve")
        .arg(config)
        .env_clear()
        .env(
            "PATH",
            std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::from(log.try_clone()?.into_parts().0))
        .stderr(Stdio::from(log.into_parts().0))
        .spawn()
        .context("spawning docker-registry (install Debian's docker-registry package)")
}

/// Waits until the registry logged that it listens on `port` (so the port is ours, not a
/// neighbour's) and `GET /v2/` answers with any status.
fn wait_ready(child: &mut Child, port: u16, log_path: &Path, pki: Option<&TestPki>) -> Result<()> {
    let scheme = if pki.is_some() { "https" } else { "http" };
    let url = format!("{scheme}://127.0.0.1:{port}/v2/");
    let listening = format!("listening on 127.0.0.1:{port}");
    super::block_on(async move {
        let client = http_client(pki)?;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = child.try_wait()? {
                bail!("docker-registry exited early: {status}");
            }
            let log = fs_err::read_to_string(log_path).unwrap_or_default();
            if log.contains(&listening) && client.get(&url).send().await.is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("docker-registry did not answer GET {url} within 20 s");
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    })
}

/// One htpasswd line with a bcrypt hash (`htpasswd -nbB`, cost 5 to keep each request cheap).
fn htpasswd_line(user: &str, password: &str) -> Result<String> {
    let out = Command::new("htpasswd")
        .args(["-nbB", "-C", "5", user, password])
        .output()
        .context("running htpasswd (install apache2-utils)")?;
    if !out.status.success() {
        bail!("htpasswd failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8(out.stdout)?.trim().to_string() + "\n")
}

/// A path as a double-quoted YAML scalar.
fn yaml_str(path: &Path) -> String {
    let s = path.display().to_string();
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}
