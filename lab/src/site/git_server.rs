//! The lab's Git server: what the site's GitOps repository lives on, so the engineer's `git
//! push` and the Argo CD imitation's fetches go over HTTPS exactly as they would against a
//! site's Git server (the hand-off itself never talks to Git: it points Argo CD at it). It is the real `git http-backend` (smart HTTP, protocol v2, pushes) run as a CGI
//! behind a small axum server that speaks TLS with a lab certificate and asks for HTTP Basic
//! credentials of one lab user; only that user gets in, and it may push.
//!
//! [`GitServer::start`] runs it in the background of the caller's runtime (tests, and a detached
//! lab process through [`serve`]); it stops when dropped.

use super::gate::{AcceptorFn, Gate, GatedTlsListener};
use super::pki::LabCa;
use anyhow::{bail, Context, Result};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use bootstrap::secret::Secret;
use futures_util::StreamExt as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};

/// The realm a client is asked credentials for.
const REALM: &str = "bootstrap lab git";

/// The server's TLS identity: its chain and key (PEM), and the CA clients trust.
#[derive(Clone)]
pub struct GitTls {
    /// The server certificate followed by the CA's.
    pub chain_pem: String,
    /// The server's private key.
    pub key_pem: String,
    /// The CA certificate clients verify the server with.
    pub ca_pem: String,
}

impl GitTls {
    /// A certificate signed by `ca` for `listen`'s address and `names`.
    pub fn from_ca(ca: &LabCa, listen: SocketAddr, names: &[String]) -> Result<GitTls> {
        let pem = ca.server(&[listen.ip()], names)?;
        Ok(GitTls {
            chain_pem: pem.cert,
            key_pem: pem.key,
            ca_pem: ca.pem.cert.clone(),
        })
    }

    fn acceptor(&self) -> Result<tokio_rustls::TlsAcceptor> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let certs = CertificateDer::pem_slice_iter(self.chain_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .context("the Git server's certificate chain is not PEM")?;
        let key = PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes())
            .context("the Git server's key is not PEM")?;
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .context("the Git server's key does not match its certificate")?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
    }
}

/// What the server serves, and to whom.
#[derive(Clone)]
pub struct GitServerConfig {
    /// The directory holding the bare repositories (`NAME.git`).
    pub root: PathBuf,
    /// The one user let in (and allowed to push).
    pub user: String,
    /// Its password.
    pub password: Secret,
    /// The TLS identity.
    pub tls: GitTls,
}

/// A Git server running in the background; stops when dropped.
pub struct GitServer {
    /// `https://IP:PORT`, the base of every repository's URL.
    pub url: String,
    /// The CA that signed the server's certificate (PEM).
    pub ca_pem: String,
    /// The address bound.
    pub addr: SocketAddr,
    root: PathBuf,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl GitServer {
    /// Binds `listen` (port 0: any) and serves the repositories under `root` to `user`.
    pub async fn start(
        root: &Path,
        listen: SocketAddr,
        user: &str,
        password: Secret,
        tls: GitTls,
    ) -> Result<GitServer> {
        fs_err::create_dir_all(root)?;
        let listener = std::net::TcpListener::bind(listen)
            .with_context(|| format!("binding the lab Git server to {listen}"))?;
        let addr = listener.local_addr()?;
        let ca_pem = tls.ca_pem.clone();
        let config = GitServerConfig {
            root: std::path::absolute(root)?,
            user: user.to_string(),
            password,
            tls,
        };
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let shutdown = async move {
                let _ = stopped.await;
            };
            if let Err(e) = serve(listener, config, shutdown).await {
                tracing::warn!("the lab Git server stopped: {e:#}");
            }
        });
        Ok(GitServer {
            url: format!("https://{addr}"),
            ca_pem,
            addr,
            root: std::path::absolute(root)?,
            stop: Some(stop),
            task,
        })
    }

    /// Creates the bare repository `NAME.git` (default branch `main`); its URL.
    pub fn create_repo(&self, name: &str) -> Result<String> {
        create_repo(&self.root, name)?;
        Ok(format!(
            "{}/{}.git",
            self.url,
            name.trim_end_matches(".git")
        ))
    }
}

impl Drop for GitServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.task.abort();
    }
}

/// Creates the bare repository `ROOT/NAME.git` (default branch `main`, pushes allowed) unless
/// it exists.
pub fn create_repo(root: &Path, name: &str) -> Result<PathBuf> {
    let name = name.trim_end_matches(".git");
    if name.is_empty() || name.contains("..") || name.starts_with('/') {
        bail!("{name:?} is not a repository name (want letters, digits, '-', '_' or '/')");
    }
    let dir = root.join(format!("{name}.git"));
    if dir.join("HEAD").exists() {
        return Ok(dir);
    }
    run_git(
        root,
        &["init", "--quiet", "--bare", "--initial-branch=main"],
        &dir,
    )?;
    run_git(&dir, &["config", "http.receivepack", "true"], Path::new(""))?;
    Ok(dir)
}

fn run_git(cwd: &Path, args: &[&str], dir: &Path) -> Result<()> {
    let mut cmd = std::process::Command::new("git");
    cmd.current_dir(cwd).args(args);
    if !dir.as_os_str().is_empty() {
        cmd.arg(dir);
    }
    let out = cmd.output().context("running git (is git installed?)")?;
    if !out.status.success() {
        bail!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Serves `config` on `listener` until `shutdown` resolves: the plain way for a lab process.
pub async fn serve(
    listener: std::net::TcpListener,
    config: GitServerConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let acceptor = config.tls.acceptor()?;
    let acceptor: AcceptorFn = Arc::new(move || Some(acceptor.clone()));
    let gate = Gate::default();
    gate.set(true);
    let listener = GatedTlsListener::new(listener, gate, acceptor)?;
    let app = axum::Router::new()
        .fallback(handle)
        .with_state(Arc::new(config));
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
        .context("serving the lab Git server")
}

async fn handle(State(config): State<Arc<GitServerConfig>>, req: Request) -> Response {
    if !authorized(req.headers(), &config) {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, format!("Basic realm=\"{REALM}\""))],
            "authentication required\n",
        )
            .into_response();
    }
    match cgi(&config, req).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!("git http-backend: {e:#}");
            (StatusCode::INTERNAL_SERVER_ERROR, format!("{e:#}\n")).into_response()
        }
    }
}

/// Whether the request carries the lab user's Basic credentials.
fn authorized(headers: &HeaderMap, config: &GitServerConfig) -> bool {
    let Some(value) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let Some(encoded) = value.strip_prefix("Basic ") else {
        return false;
    };
    let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(encoded.trim()) else {
        return false;
    };
    let expected = format!("{}:{}", config.user, config.password.expose());
    decoded == expected.as_bytes()
}

/// Runs `git http-backend` for one request: the body streamed to its stdin, its CGI headers
/// parsed, the rest streamed back.
async fn cgi(config: &GitServerConfig, req: Request) -> Result<Response> {
    let (parts, body) = req.into_parts();
    let mut cmd = tokio::process::Command::new("git");
    cmd.arg("http-backend")
        .env("GIT_PROJECT_ROOT", &config.root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("PATH_INFO", parts.uri.path())
        .env("REQUEST_METHOD", parts.method.as_str())
        .env("QUERY_STRING", parts.uri.query().unwrap_or(""))
        .env("REMOTE_USER", &config.user)
        .env("REMOTE_ADDR", "127.0.0.1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (name, var) in [
        (header::CONTENT_TYPE.as_str(), "CONTENT_TYPE"),
        (header::CONTENT_LENGTH.as_str(), "CONTENT_LENGTH"),
        (header::CONTENT_ENCODING.as_str(), "HTTP_CONTENT_ENCODING"),
        ("git-protocol", "GIT_PROTOCOL"),
    ] {
        if let Some(v) = parts.headers.get(name).and_then(|v| v.to_str().ok()) {
            cmd.env(var, v);
        }
    }
    let mut child = cmd.spawn().context("starting git http-backend")?;
    let mut stdin = child.stdin.take().context("git http-backend's stdin")?;
    tokio::spawn(async move {
        let mut data = body.into_data_stream();
        while let Some(Ok(chunk)) = data.next().await {
            if stdin.write_all(&chunk).await.is_err() {
                break;
            }
        }
    });
    let stderr = child.stderr.take().context("git http-backend's stderr")?;
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::debug!("git http-backend: {line}");
        }
    });
    let stdout = child.stdout.take().context("git http-backend's stdout")?;
    let mut out = BufReader::new(stdout);
    let mut builder = Response::builder();
    let mut status = StatusCode::OK;
    loop {
        let mut line = String::new();
        if out.read_line(&mut line).await? == 0 {
            bail!("git http-backend ended before its headers did");
        }
        let line = line.trim_end_matches(['\r', '\n']);
        if line.is_empty() {
            break;
        }
        let (name, value) = line
            .split_once(':')
            .with_context(|| format!("git http-backend sent a malformed header {line:?}"))?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            let code = value.split_whitespace().next().unwrap_or("500");
            status = StatusCode::from_bytes(code.as_bytes()).unwrap_or(StatusCode::BAD_GATEWAY);
        } else {
            builder = builder.header(name, HeaderValue::from_str(value)?);
        }
    }
    // The child is reaped when its output ends (kill_on_drop covers a client that leaves).
    let stream =
        tokio_util::io::ReaderStream::new(out).chain(futures_util::stream::once(async move {
            let _ = child.wait().await;
            Ok(bytes::Bytes::new())
        }));
    Ok(builder.status(status).body(Body::from_stream(stream))?)
}

/// The environment variables the askpass helper answers from: the password never appears on
/// a command line or in a file.
const ASKPASS_USER: &str = "BOOTSTRAP_GIT_USERNAME";
const ASKPASS_PASSWORD: &str = "BOOTSTRAP_GIT_PASSWORD";

/// How a client reaches a repository over HTTPS: the credentials and the trust.
#[derive(Clone, Debug, Default)]
pub struct GitAccess {
    /// The user name and password, if any.
    pub credentials: Option<(String, Secret)>,
    /// The CA certificates (PEM) the server's chain must lead to; `None`: the system's.
    pub ca_pem: Option<String>,
    /// Skip TLS verification (a repository Secret's `insecure: "true"`).
    pub insecure: bool,
}

/// The real `git`, run in `work` (its HOME, where it keeps the askpass helper and the CA file)
/// with `access`: the password is handed to git by `GIT_ASKPASS` from an environment variable.
pub fn git_command(work: &Path, access: &GitAccess) -> Result<tokio::process::Command> {
    fs_err::create_dir_all(work)?;
    let askpass = work.join("askpass.sh");
    if !askpass.exists() {
        let script = format!(
            "#!/bin/sh\ncase \"$1\" in\n  Username*) printf '%s\\n' \"${ASKPASS_USER}\" ;;\n  *) printf '%s\\n' \"${ASKPASS_PASSWORD}\" ;;\nesac\n"
        );
        bootstrap::fs::write_atomic_mode(&askpass, script.as_bytes(), 0o700)?;
    }
    let mut cmd = tokio::process::Command::new("git");
    cmd.env("HOME", work)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ASKPASS", &askpass)
        .env_remove(ASKPASS_USER)
        .env_remove(ASKPASS_PASSWORD)
        .kill_on_drop(true);
    if let Some((user, password)) = &access.credentials {
        cmd.env(ASKPASS_USER, user)
            .env(ASKPASS_PASSWORD, password.expose());
    }
    if let Some(ca) = &access.ca_pem {
        let path = work.join("ca.pem");
        bootstrap::fs::write_atomic(&path, ca.as_bytes())?;
        cmd.env("GIT_SSL_CAINFO", path);
    }
    if access.insecure {
        cmd.env("GIT_SSL_NO_VERIFY", "true");
    }
    Ok(cmd)
}
