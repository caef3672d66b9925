//! The SSH transport to the nodes, on `russh` (pure Rust, on our tokio runtime; see Cargo.toml
//! for why not ssh2). One [`SshHost`] per node implements [`Remote`]: it connects on first use
//! (directly, or through a bastion's `direct-tcpip` channel), logs in with a key file or the
//! ssh-agent, and runs each command on a channel of its own.
//!
//! Host keys are never taken on trust: a key pinned in the inventory must match; otherwise the
//! run's known_hosts decides (learned on first contact, refused when changed). A connection lost
//! while a node reboots is re-made at the next command, retried with backoff for
//! [`SshConfig::reconnect_for`]; a command cut off mid-way is not run again. A refusal is
//! never retried, and says why in its type: a host key not trusted ([`HostKeyRefusal`]), a
//! login key that cannot be used here ([`LoginKeyError`]), or the node refusing our login.

use super::known_hosts::{fingerprint, same_key, KnownHosts, KnownHostsError, Verdict};
use super::{BoxFuture, Exec, Output, Remote, RemoteError};
use russh::client::{self, Handle, Msg};
use russh::keys::agent::client::AgentClient;
use russh::keys::agent::AgentIdentity;
use russh::keys::{
    Algorithm, HashAlg, PrivateKey, PrivateKeyWithHashAlg, PublicKey, PublicKeyOrCertificate,
};
use russh::{Channel, ChannelMsg, ChannelReadHalf};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Where the login key comes from.
#[derive(Clone, Debug)]
pub enum KeySource {
    /// An OpenSSH private key file (unencrypted, mode 600).
    File(PathBuf),
    /// The ssh-agent at `$SSH_AUTH_SOCK`; every identity it holds is tried in turn.
    Agent,
}

/// One SSH server: a node, or the bastion.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// The node's name, or "bastion": used in every message.
    pub name: String,
    /// Address or host name.
    pub address: String,
    /// TCP port.
    pub port: u16,
    /// Login user.
    pub user: String,
    /// Host keys pinned by the inventory, one OpenSSH public-key line each; empty: the run's
    /// known_hosts decides.
    pub pinned: Vec<String>,
}

impl Endpoint {
    /// `name (address:port)`, as messages name the endpoint.
    pub fn label(&self) -> String {
        if self.address.contains(':') {
            format!("{} ([{}]:{})", self.name, self.address, self.port)
        } else {
            format!("{} ({}:{})", self.name, self.address, self.port)
        }
    }
}

/// What every node's connection shares.
pub struct SshConfig {
    /// The login key.
    pub key: KeySource,
    /// The jump host, when the nodes are reached through one.
    pub bastion: Option<Endpoint>,
    /// The run's known_hosts (`RUN/known_hosts`).
    pub known_hosts: Arc<KnownHosts>,
    /// How long one connection attempt (TCP, handshake, login) may take.
    pub connect_timeout: Duration,
    /// How long a lost connection is retried at the next command (a node rebooting).
    pub reconnect_for: Duration,
    // One connection to the bastion for all nodes (sshd's MaxStartups would throttle one each).
    bastion_link: tokio::sync::Mutex<Option<Arc<Handle<HostKeyCheck>>>>,
}

impl SshConfig {
    /// A configuration with a 10 s connect timeout and 10 minutes of reconnecting (set the
    /// fields to change them).
    pub fn new(
        key: KeySource,
        bastion: Option<Endpoint>,
        known_hosts: Arc<KnownHosts>,
    ) -> SshConfig {
        SshConfig {
            key,
            bastion,
            known_hosts,
            connect_timeout: Duration::from_secs(10),
            reconnect_for: Duration::from_secs(600),
            bastion_link: tokio::sync::Mutex::new(None),
        }
    }
}

impl std::fmt::Debug for SshConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SshConfig")
            .field("key", &self.key)
            .field("bastion", &self.bastion)
            .field("known_hosts", &self.known_hosts.path())
            .finish_non_exhaustive()
    }
}

/// The first retry's delay, doubled up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// The fix named when a login is refused.
const AUTH_FIX: &str = "is the key in the node's authorized_keys? (the inventory's sshPublicKey \
                        is what the installer authorized for user core)";

/// One node over SSH.
pub struct SshHost {
    endpoint: Endpoint,
    config: Arc<SshConfig>,
    // The live connection; `Some` once connected at least once (then a lost one is retried).
    conn: tokio::sync::Mutex<Option<Arc<Connection>>>,
    seen: Arc<Mutex<Seen>>,
}

struct Connection {
    handle: Handle<HostKeyCheck>,
    // Keeps the bastion's connection alive while this node's session runs through it.
    _bastion: Option<Arc<Handle<HostKeyCheck>>>,
}

/// What the host-key check saw during a handshake.
#[derive(Default)]
struct Seen {
    fingerprint: Option<String>,
    refused: Option<HostKeyRefusal>,
}

impl SshHost {
    /// A node reached with `config`; nothing happens until the first command (or [`connect`]).
    ///
    /// [`connect`]: SshHost::connect
    pub fn new(endpoint: Endpoint, config: Arc<SshConfig>) -> SshHost {
        SshHost {
            endpoint,
            config,
            conn: tokio::sync::Mutex::new(None),
            seen: Arc::default(),
        }
    }

    /// Connects now (the first handshake), once; an open connection is kept.
    pub async fn connect(&self) -> Result<(), RemoteError> {
        self.session(Some(Duration::ZERO)).await.map(drop)
    }

    /// Connects, retrying with backoff until `limit` (a node rebooting); a refused host key or
    /// login is not retried.
    pub async fn wait_reachable(&self, limit: Duration) -> Result<(), RemoteError> {
        self.session(Some(limit)).await.map(drop)
    }

    /// The SHA-256 fingerprint (`SHA256:...`) of the host key the node last presented.
    pub fn host_key_fingerprint(&self) -> Option<String> {
        lock(&self.seen).fingerprint.clone()
    }

    /// The live connection, made when there is none: retried for `retry_for`, or by default for
    /// [`SshConfig::reconnect_for`] once the node was reached before (once only before that).
    async fn session(&self, retry_for: Option<Duration>) -> Result<Arc<Connection>, RemoteError> {
        let mut slot = self.conn.lock().await;
        if let Some(conn) = slot.as_ref().filter(|c| !c.handle.is_closed()) {
            return Ok(conn.clone());
        }
        let limit = retry_for.unwrap_or(match *slot {
            Some(_) => self.config.reconnect_for,
            None => Duration::ZERO,
        });
        let conn = Arc::new(self.connect_retrying(limit).await?);
        *slot = Some(conn.clone());
        Ok(conn)
    }

    async fn connect_retrying(&self, limit: Duration) -> Result<Connection, RemoteError> {
        let (start, mut delay, mut tries) = (Instant::now(), FIRST_BACKOFF, 1u32);
        loop {
            let timeout = self.config.connect_timeout;
            let attempt = tokio::time::timeout(timeout, self.connect_once()).await;
            let err = match attempt {
                Ok(Ok(conn)) => return Ok(conn),
                Ok(Err(e)) => e,
                Err(_) => self.unreachable(format!("no SSH login within {timeout:?}")),
            };
            if !matches!(
                err,
                RemoteError::Unreachable { .. } | RemoteError::Other { .. }
            ) {
                return Err(err);
            }
            if start.elapsed() + delay > limit {
                return Err(after_tries(err, tries, start.elapsed()));
            }
            tracing::debug!(node = %self.endpoint.name, error = %err, "SSH connect failed; retrying in {delay:?}");
            tokio::time::sleep(delay).await;
            (delay, tries) = ((delay * 2).min(MAX_BACKOFF), tries + 1);
        }
    }

    async fn connect_once(&self) -> Result<Connection, RemoteError> {
        let ep = &self.endpoint;
        let check = HostKeyCheck::new(ep, &self.config.known_hosts, self.seen.clone());
        let Some(bastion) = &self.config.bastion else {
            let tcp = tokio::net::TcpStream::connect((ep.address.as_str(), ep.port))
                .await
                .map_err(|e| {
                    self.unreachable(format!(
                        "cannot connect: {e}; is the node up and sshd listening?"
                    ))
                })?;
            let _ = tcp.set_nodelay(true);
            let handle = login(ep, &self.config.key, tcp, check).await?;
            return Ok(Connection {
                handle,
                _bastion: None,
            });
        };
        let via = bastion_handle(&self.config, bastion).await?;
        let channel = via
            .channel_open_direct_tcpip(ep.address.clone(), ep.port.into(), "127.0.0.1", 0)
            .await
            .map_err(|e| {
                self.unreachable(format!(
                    "bastion {} cannot forward to the node: {e}",
                    bastion.label()
                ))
            })?;
        let handle = login(ep, &self.config.key, channel.into_stream(), check).await?;
        Ok(Connection {
            handle,
            _bastion: Some(via),
        })
    }

    /// A session channel on the live connection. A connection found dead here is re-made
    /// (nothing has run on it yet).
    async fn open_channel(&self) -> Result<Channel<Msg>, RemoteError> {
        let conn = self.session(None).await?;
        match conn.handle.channel_open_session().await {
            Ok(channel) => return Ok(channel),
            Err(e) if !conn.handle.is_closed() => {
                return Err(self.other(format!("the node refused a session channel: {e}")))
            }
            Err(e) => {
                tracing::debug!(node = %self.endpoint.name, "connection lost ({e}); reconnecting")
            }
        }
        let conn = self.session(None).await?;
        conn.handle
            .channel_open_session()
            .await
            .map_err(|e| self.unreachable(format!("cannot open a session channel: {e}")))
    }

    async fn run(&self, exec: Exec<'_>) -> Result<Output, RemoteError> {
        let channel = self.open_channel().await?;
        channel
            .exec(true, exec.command)
            .await
            .map_err(|e| self.unreachable(format!("cannot start the command: {e}")))?;
        let (mut read, write) = channel.split();
        // Input is fed while output is read (a command may write before it reads); once the
        // command is done, input it never read is dropped (waiting to send it would hang).
        let feed = async {
            if let Some(data) = exec.stdin {
                let _ = write.data(data).await;
            }
            let _ = write.eof().await;
            std::future::pending::<Collected>().await
        };
        let work = async {
            tokio::select! {
                got = collect(&mut read, exec.output_cap) => got,
                got = feed => got,
            }
        };
        let Ok(collected) = tokio::time::timeout(exec.timeout, work).await else {
            // Best effort: OpenSSH delivers `signal` requests only in privilege-separated
            // sessions (not a root login's, nor through sudo to a root process); closing the
            // channel leaves the command running without its pipes.
            let _ = write.signal(russh::Sig::KILL).await;
            let _ = write.close().await;
            return Err(RemoteError::Timeout {
                host: self.endpoint.label(),
                after: exec.timeout,
                command: exec.command.to_string(),
            });
        };
        collected.into_output().ok_or_else(|| {
            self.unreachable(format!(
                "connection lost while running `{}` (not run again: it may have run in part)",
                exec.command
            ))
        })
    }

    fn unreachable(&self, detail: String) -> RemoteError {
        RemoteError::Unreachable {
            host: self.endpoint.label(),
            detail,
        }
    }

    fn other(&self, detail: String) -> RemoteError {
        RemoteError::Other {
            host: self.endpoint.label(),
            detail,
        }
    }
}

impl Remote for SshHost {
    fn name(&self) -> &str {
        &self.endpoint.name
    }

    fn exec<'a>(&'a self, exec: Exec<'a>) -> BoxFuture<'a, Result<Output, RemoteError>> {
        Box::pin(self.run(exec))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `err` with how long it was retried, when it was.
fn after_tries(err: RemoteError, tries: u32, elapsed: Duration) -> RemoteError {
    if tries == 1 {
        return err;
    }
    let note = format!(" (after {tries} attempts in {:.1}s)", elapsed.as_secs_f64());
    match err {
        RemoteError::Unreachable { host, detail } => RemoteError::Unreachable {
            host,
            detail: detail + &note,
        },
        RemoteError::Other { host, detail } => RemoteError::Other {
            host,
            detail: detail + &note,
        },
        other => other,
    }
}

/// The shared connection to the bastion, made (once, retried like a node's) when there is none.
async fn bastion_handle(
    config: &SshConfig,
    bastion: &Endpoint,
) -> Result<Arc<Handle<HostKeyCheck>>, RemoteError> {
    let mut slot = config.bastion_link.lock().await;
    if let Some(handle) = slot.as_ref().filter(|h| !h.is_closed()) {
        return Ok(handle.clone());
    }
    let unreachable = |detail: String| RemoteError::Unreachable {
        host: bastion.label(),
        detail,
    };
    let tcp = tokio::net::TcpStream::connect((bastion.address.as_str(), bastion.port))
        .await
        .map_err(|e| unreachable(format!("cannot connect to the bastion: {e}")))?;
    let _ = tcp.set_nodelay(true);
    let check = HostKeyCheck::new(bastion, &config.known_hosts, Arc::default());
    let handle = Arc::new(login(bastion, &config.key, tcp, check).await?);
    *slot = Some(handle.clone());
    Ok(handle)
}

fn client_config() -> Arc<client::Config> {
    Arc::new(client::Config {
        // A node that vanishes without closing its TCP connection (powered off) is noticed
        // within about 30 s instead of at the command's own timeout.
        keepalive_interval: Some(Duration::from_secs(10)),
        keepalive_max: 3,
        nodelay: true,
        ..client::Config::default()
    })
}

/// The SSH handshake (host key checked) and login over `stream`.
async fn login<S>(
    ep: &Endpoint,
    key: &KeySource,
    stream: S,
    check: HostKeyCheck,
) -> Result<Handle<HostKeyCheck>, RemoteError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let seen = check.seen.clone();
    let mut handle = match client::connect_stream(client_config(), stream, check).await {
        Ok(handle) => handle,
        Err(e) => {
            let host = ep.label();
            return Err(match lock(&seen).refused.take() {
                Some(refusal) => RemoteError::HostKey {
                    host,
                    refusal: Box::new(refusal),
                },
                None => RemoteError::Unreachable {
                    host,
                    detail: format!("SSH handshake failed: {e}"),
                },
            });
        }
    };
    let mut tried = Vec::new();
    let accepted = match key {
        KeySource::File(path) => login_with_file(&mut handle, ep, path, &mut tried).await?,
        KeySource::Agent => login_with_agent(&mut handle, ep, &mut tried).await?,
    };
    if !accepted {
        return Err(auth(
            ep,
            format!(
                "user {} with key {} was refused; {AUTH_FIX}",
                ep.user,
                tried.join(", ")
            ),
        ));
    }
    tracing::debug!(host = %ep.label(), user = %ep.user, "SSH login");
    Ok(handle)
}

fn auth(ep: &Endpoint, detail: String) -> RemoteError {
    RemoteError::Auth {
        host: ep.label(),
        detail,
    }
}

fn login_key(ep: &Endpoint, source: LoginKeyError) -> RemoteError {
    RemoteError::LoginKey {
        host: ep.label(),
        source: Box::new(source),
    }
}

fn lost(ep: &Endpoint, e: impl std::fmt::Display) -> RemoteError {
    RemoteError::Unreachable {
        host: ep.label(),
        detail: format!("connection lost during login: {e}"),
    }
}

async fn login_with_file(
    handle: &mut Handle<HostKeyCheck>,
    ep: &Endpoint,
    path: &std::path::Path,
    tried: &mut Vec<String>,
) -> Result<bool, RemoteError> {
    let key = load_key(path).map_err(|source| login_key(ep, source))?;
    tried.push(fingerprint(key.public_key()));
    let hash = rsa_hash(handle, key.algorithm()).await;
    let result = handle
        .authenticate_publickey(
            ep.user.clone(),
            PrivateKeyWithHashAlg::new(Arc::new(key), hash),
        )
        .await
        .map_err(|e| lost(ep, e))?;
    Ok(result.success())
}

async fn login_with_agent(
    handle: &mut Handle<HostKeyCheck>,
    ep: &Endpoint,
    tried: &mut Vec<String>,
) -> Result<bool, RemoteError> {
    let Some(socket) = std::env::var_os("SSH_AUTH_SOCK") else {
        return Err(login_key(ep, LoginKeyError::NoAgent));
    };
    let socket = PathBuf::from(socket);
    let mut agent = AgentClient::connect_uds(&socket).await.map_err(|source| {
        let socket = socket.clone();
        login_key(ep, LoginKeyError::AgentUnreachable { socket, source })
    })?;
    let identities = agent.request_identities().await.map_err(|source| {
        let socket = socket.clone();
        login_key(ep, LoginKeyError::AgentListing { socket, source })
    })?;
    for identity in identities {
        let AgentIdentity::PublicKey { key, .. } = identity else {
            continue;
        };
        tried.push(fingerprint(&key));
        let hash = rsa_hash(handle, key.algorithm()).await;
        match handle
            .authenticate_publickey_with(ep.user.clone(), key, hash, &mut agent)
            .await
        {
            Ok(result) if result.success() => return Ok(true),
            Ok(_) => {}
            Err(e) => tracing::debug!(host = %ep.label(), "ssh-agent could not sign: {e}"),
        }
    }
    if tried.is_empty() {
        return Err(login_key(ep, LoginKeyError::AgentEmpty { socket }));
    }
    Ok(false)
}

/// The signature hash for an RSA key: the best the server accepts (rsa-sha2-512 or -256, never
/// SHA-1 unless that is all it takes). `None` for other key types.
async fn rsa_hash(handle: &Handle<HostKeyCheck>, algorithm: Algorithm) -> Option<HashAlg> {
    if !matches!(algorithm, Algorithm::Rsa { .. }) {
        return None;
    }
    match handle.best_supported_rsa_hash().await {
        Ok(Some(best)) => best,
        _ => Some(HashAlg::Sha256),
    }
}

/// Why the login key on this machine cannot be used: bad input or setup here, found before
/// any node is asked. Each message names the file or socket and the fix, never the key.
#[derive(Debug, thiserror::Error)]
pub enum LoginKeyError {
    /// The key file could not be read.
    #[error("reading the SSH key: {source}")]
    Read {
        /// Why (the error names the path).
        #[source]
        source: std::io::Error,
    },
    /// The key file is readable by others, which OpenSSH refuses too.
    #[error("SSH key {} is readable by group or others (mode {mode:04o}); OpenSSH refuses such a key: chmod 600 {}", path.display(), path.display())]
    Exposed {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The file is not an OpenSSH private key.
    #[error("SSH key {} is not an OpenSSH private key: {source}", path.display())]
    NotOpenSsh {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        #[source]
        source: russh::keys::ssh_key::Error,
    },
    /// The key is encrypted: we never ask for a passphrase.
    #[error("SSH key {} is encrypted; load it into ssh-agent and set prep.ssh.agent: true", path.display())]
    Encrypted {
        /// The file.
        path: PathBuf,
    },
    /// The key is to come from ssh-agent and none runs.
    #[error("the key is to come from ssh-agent but SSH_AUTH_SOCK is not set; start ssh-agent and ssh-add the node key")]
    NoAgent,
    /// The ssh-agent could not be reached.
    #[error("cannot reach ssh-agent at {}: {source}", socket.display())]
    AgentUnreachable {
        /// `$SSH_AUTH_SOCK`.
        socket: PathBuf,
        /// Why.
        #[source]
        source: russh::keys::Error,
    },
    /// The ssh-agent did not list its keys.
    #[error("ssh-agent at {} did not list its keys: {source}", socket.display())]
    AgentListing {
        /// `$SSH_AUTH_SOCK`.
        socket: PathBuf,
        /// Why.
        #[source]
        source: russh::keys::Error,
    },
    /// The ssh-agent holds no key.
    #[error("ssh-agent at {} holds no keys; ssh-add the node key", socket.display())]
    AgentEmpty {
        /// `$SSH_AUTH_SOCK`.
        socket: PathBuf,
    },
}

/// The private key in `path`, refused as OpenSSH refuses it (readable by others:
/// [`crate::secret::open_mode`], the rule inventory validation applies too) or when it is
/// encrypted (we never ask for a passphrase). The message never quotes the key.
pub fn load_key(path: &std::path::Path) -> Result<PrivateKey, LoginKeyError> {
    let open = crate::secret::open_mode(path).map_err(|source| LoginKeyError::Read { source })?;
    if let Some(mode) = open {
        return Err(LoginKeyError::Exposed {
            path: path.to_path_buf(),
            mode,
        });
    }
    let text = fs_err::read(path).map_err(|source| LoginKeyError::Read { source })?;
    let key = PrivateKey::from_openssh(&text).map_err(|source| LoginKeyError::NotOpenSsh {
        path: path.to_path_buf(),
        source,
    })?;
    if key.is_encrypted() {
        return Err(LoginKeyError::Encrypted {
            path: path.to_path_buf(),
        });
    }
    Ok(key)
}

/// Why a node's host key was not trusted: the node's key is not the one pinned or known (a
/// reinstalled node, or another machine at its address), or what should decide could not be
/// read (a pin that is no key, the known_hosts file). No login was attempted.
#[derive(Debug, thiserror::Error)]
pub enum HostKeyRefusal {
    /// A `hostKeys` entry is not an OpenSSH public key: bad input, fixed in the inventory.
    #[error(
        "hostKeys entry {entry} is not an OpenSSH public key ({source}); fix it in nodes.yaml"
    )]
    BadPin {
        /// Its position, from 1.
        entry: usize,
        /// What the parser said.
        #[source]
        source: russh::keys::ssh_key::Error,
    },
    /// The key presented is none of the pinned ones.
    #[error(
        "host key {presented} is not the one pinned in nodes.yaml hostKeys ({}); if the node was reinstalled, update hostKeys",
        pinned.join(", ")
    )]
    NotPinned {
        /// The presented key's fingerprint.
        presented: String,
        /// The pinned keys' fingerprints.
        pinned: Vec<String>,
    },
    /// The run's known_hosts knows another key for the host, or could not be read or written.
    #[error(transparent)]
    KnownHosts(#[from] KnownHostsError),
    /// The host presented a certificate rather than a plain key.
    #[error("presented a host certificate; pin the host's plain key in hostKeys instead")]
    Certificate,
}

/// The handshake's host-key decision for one endpoint.
struct HostKeyCheck {
    endpoint: Endpoint,
    known_hosts: Arc<KnownHosts>,
    seen: Arc<Mutex<Seen>>,
}

impl HostKeyCheck {
    fn new(endpoint: &Endpoint, known_hosts: &Arc<KnownHosts>, seen: Arc<Mutex<Seen>>) -> Self {
        HostKeyCheck {
            endpoint: endpoint.clone(),
            known_hosts: known_hosts.clone(),
            seen,
        }
    }
}

impl client::Handler for HostKeyCheck {
    type Error = russh::Error;

    async fn check_server_key(
        &mut self,
        presented: &PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        let decision = match presented {
            PublicKeyOrCertificate::PublicKey { key, .. } => {
                lock(&self.seen).fingerprint = Some(fingerprint(key));
                decide(&self.endpoint, &self.known_hosts, key)
            }
            PublicKeyOrCertificate::Certificate(_) => Err(HostKeyRefusal::Certificate),
        };
        match decision {
            Ok(()) => Ok(true),
            Err(refusal) => {
                lock(&self.seen).refused = Some(refusal);
                Ok(false)
            }
        }
    }
}

/// Pinned keys decide when there are any; else the known_hosts file (learning a new host).
fn decide(ep: &Endpoint, known_hosts: &KnownHosts, key: &PublicKey) -> Result<(), HostKeyRefusal> {
    if !ep.pinned.is_empty() {
        let mut pinned = Vec::new();
        for (i, line) in ep.pinned.iter().enumerate() {
            pinned.push(PublicKey::from_openssh(line.trim()).map_err(|source| {
                HostKeyRefusal::BadPin {
                    entry: i + 1,
                    source,
                }
            })?);
        }
        if pinned.iter().any(|p| same_key(p, key)) {
            return Ok(());
        }
        return Err(HostKeyRefusal::NotPinned {
            presented: fingerprint(key),
            pinned: pinned.iter().map(fingerprint).collect(),
        });
    }
    match known_hosts.check_or_learn(&ep.address, ep.port, key)? {
        Verdict::Known => {}
        Verdict::Learned { line } => tracing::info!(
            host = %ep.label(),
            fingerprint = %fingerprint(key),
            file = %known_hosts.path().display(),
            line,
            "learned host key"
        ),
    }
    Ok(())
}

/// A command's output as it arrives.
#[derive(Default)]
struct Collected {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    truncated: bool,
    status: Option<i32>,
    signal: Option<String>,
    closed: bool,
}

impl Collected {
    fn keep(&mut self, stderr: bool, data: &[u8], cap: usize) {
        let into = if stderr {
            &mut self.stderr
        } else {
            &mut self.stdout
        };
        let room = cap.saturating_sub(into.len());
        into.extend_from_slice(&data[..data.len().min(room)]);
        self.truncated |= data.len() > room;
    }

    /// The output, or `None` when the connection ended before the command did.
    fn into_output(mut self) -> Option<Output> {
        if !self.closed && self.status.is_none() && self.signal.is_none() {
            return None;
        }
        if let Some(signal) = &self.signal {
            self.stderr
                .extend_from_slice(format!("\n(command killed by signal {signal})\n").as_bytes());
        }
        Some(Output {
            status: self.status,
            stdout: self.stdout,
            stderr: self.stderr,
            truncated: self.truncated,
        })
    }
}

async fn collect(read: &mut ChannelReadHalf, cap: usize) -> Collected {
    let mut got = Collected::default();
    while let Some(msg) = read.wait().await {
        match msg {
            ChannelMsg::Data { data } => got.keep(false, &data, cap),
            ChannelMsg::ExtendedData { data, ext: 1 } => got.keep(true, &data, cap),
            ChannelMsg::ExitStatus { exit_status } => got.status = Some(exit_status as i32),
            ChannelMsg::ExitSignal {
                signal_name,
                core_dumped,
                error_message,
                ..
            } => {
                let core = if core_dumped { ", core dumped" } else { "" };
                got.signal = Some(format!(
                    "{signal_name:?}{core}{}",
                    error_sep(&error_message)
                ));
            }
            ChannelMsg::Close => {
                got.closed = true;
                break;
            }
            _ => {}
        }
    }
    got
}

fn error_sep(message: &str) -> String {
    if message.is_empty() {
        String::new()
    } else {
        format!(": {message}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn keygen(dir: &std::path::Path, name: &str, passphrase: &str) -> PathBuf {
        let path = dir.join(name);
        let status = std::process::Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", passphrase, "-f"])
            .arg(&path)
            .status()
            .unwrap();
        assert!(status.success());
        path
    }

    #[test]
    fn a_key_readable_by_others_is_refused_with_chmod_600() {
        let dir = tempfile::tempdir().unwrap();
        let path = keygen(dir.path(), "id", "");
        assert!(load_key(&path).is_ok());
        fs_err::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = load_key(&path).unwrap_err();
        assert!(
            matches!(err, LoginKeyError::Exposed { mode: 0o644, .. }),
            "{err:?}"
        );
        let err = err.to_string();
        assert!(
            err.contains(&format!("chmod 600 {}", path.display())),
            "{err}"
        );
    }

    #[test]
    fn an_encrypted_key_is_refused_pointing_at_the_agent() {
        let dir = tempfile::tempdir().unwrap();
        let path = keygen(dir.path(), "id", "a passphrase");
        let err = load_key(&path).unwrap_err();
        assert!(matches!(err, LoginKeyError::Encrypted { .. }), "{err:?}");
        let err = err.to_string();
        assert!(
            err.contains("encrypted") && err.contains("prep.ssh.agent: true"),
            "{err}"
        );
        assert!(!err.contains("OPENSSH PRIVATE KEY"), "{err}");
    }

    const A: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIH/+MoIdkoSEpGBf2Ugp7fXoPU1EW6vaw0qu2BawEgWk";
    const B: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAINgYZ7SjOz4kOUi6l3OzJEuRvZmD/XCkso7hnBFw2oFy";

    #[test]
    fn a_caller_tells_a_bad_pin_from_a_key_that_is_not_the_pinned_or_known_one() {
        let dir = tempfile::tempdir().unwrap();
        let known = KnownHosts::new(dir.path().join("known_hosts"));
        let presented = PublicKey::from_openssh(A).unwrap();
        let mut ep = Endpoint {
            name: "m1".into(),
            address: "10.0.0.1".into(),
            port: 22,
            user: "core".into(),
            pinned: vec![B.into(), "ssh-ed25519 not-base64".into()],
        };
        // Bad input: the inventory's second pin is no key (fixed in nodes.yaml, not on the node).
        let bad = decide(&ep, &known, &presented).unwrap_err();
        assert!(
            matches!(bad, HostKeyRefusal::BadPin { entry: 2, .. }),
            "{bad:?}"
        );
        // Refused: the node's key is not the pinned one.
        ep.pinned = vec![B.into()];
        let other = decide(&ep, &known, &presented).unwrap_err();
        assert!(
            matches!(other, HostKeyRefusal::NotPinned { ref pinned, .. } if pinned.len() == 1),
            "{other:?}"
        );
        // Unpinned: learned once, then a different key is a changed host.
        ep.pinned.clear();
        decide(&ep, &known, &presented).unwrap();
        let changed = decide(&ep, &known, &PublicKey::from_openssh(B).unwrap()).unwrap_err();
        assert!(
            matches!(
                changed,
                HostKeyRefusal::KnownHosts(KnownHostsError::Changed { line: 1, .. })
            ),
            "{changed:?}"
        );
    }

    #[test]
    fn labels_bracket_ipv6_addresses() {
        let mut ep = Endpoint {
            name: "m1".into(),
            address: "10.0.0.1".into(),
            port: 22,
            user: "core".into(),
            pinned: vec![],
        };
        assert_eq!(ep.label(), "m1 (10.0.0.1:22)");
        ep.address = "fd00::1".into();
        assert_eq!(ep.label(), "m1 ([fd00::1]:22)");
    }
}
