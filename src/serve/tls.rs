//! TLS for the file servers: the site's certificate chain and key (PEM files) read into a
//! rustls server configuration. Handshakes run in each connection's own task (conn.rs), so one
//! slow or failed client (a BMC with an old TLS stack) never holds up the others.

use anyhow::{bail, Context, Result};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::PathBuf;
use std::sync::Arc;

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
