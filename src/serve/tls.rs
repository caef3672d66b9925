//! TLS for the file server: the site's certificate chain and key (PEM files), and a listener
//! that hands axum connections whose handshake already finished. Handshakes run in their own
//! tasks, so one slow or failed client (a BMC with an old TLS stack) never holds up the others;
//! a failed handshake is logged and dropped.

use anyhow::{bail, Context, Result};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// How long a client may take over its handshake.
const HANDSHAKE_LIMIT: Duration = Duration::from_secs(20);

/// A certificate chain and its key, by path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain (PEM), leaf first.
    pub certificate: PathBuf,
    /// The private key (PEM).
    pub key: PathBuf,
}

impl TlsFiles {
    /// The rustls server configuration, or what is wrong with the files (naming them).
    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>> {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&self.certificate)
            .with_context(|| format!("reading the certificate {}", self.certificate.display()))?
            .collect::<Result<_, _>>()
            .with_context(|| format!("{} is not PEM certificates", self.certificate.display()))?;
        if certs.is_empty() {
            bail!(
                "{} holds no certificate (want PEM: -----BEGIN CERTIFICATE-----)",
                self.certificate.display()
            );
        }
        let key = PrivateKeyDer::from_pem_file(&self.key).with_context(|| {
            format!(
                "{} holds no private key (want PEM: PKCS#8, PKCS#1 or SEC1)",
                self.key.display()
            )
        })?;
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .context("TLS versions")?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .with_context(|| {
                format!(
                    "the key {} does not match the certificate {}",
                    self.key.display(),
                    self.certificate.display()
                )
            })?;
        Ok(Arc::new(config))
    }
}

/// Connections whose TLS handshake finished, for `axum::serve`.
pub(super) struct TlsListener {
    local: SocketAddr,
    ready: tokio::sync::mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    accepting: tokio::task::JoinHandle<()>,
}

impl TlsListener {
    pub(super) fn new(listener: TcpListener, config: Arc<rustls::ServerConfig>) -> Self {
        let local = listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        let (tx, ready) = tokio::sync::mpsc::channel(64);
        let acceptor = TlsAcceptor::from(config);
        let accepting = tokio::spawn(async move {
            loop {
                let (tcp, peer) = match listener.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::warn!("accepting a connection: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_LIMIT, acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => tracing::warn!("TLS handshake with {peer} failed: {e}"),
                        Err(_) => tracing::warn!("TLS handshake with {peer} took too long"),
                    }
                });
            }
        });
        TlsListener {
            local,
            ready,
            accepting,
        }
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(c) => c,
            // The accepting task never ends on its own; only a shutdown drops it.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}
