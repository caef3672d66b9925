//! TLS trust for registries: the system's roots plus the `--ca-bundle` certificates. A registry's
//! self-signed certificate given in the bundle is trusted for the names it carries even when it
//! says `CA:TRUE`, which is what `openssl req -x509` writes by default: webpki refuses such a
//! certificate as a server's own ("CA used as end entity"), while curl and skopeo (OpenSSL and
//! Go) accept it, so an engineer with the usual self-signed registry would otherwise be stuck.
//! The exception is narrow: the server must present exactly a certificate of the bundle, valid
//! now (webpki checks the dates before the CA flag) and issued for the name we asked for.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, Error as TlsError, SignatureScheme};
use std::path::Path;
use std::sync::Arc;

/// The certificates of a `--ca-bundle` file; an unreadable file, or one without a PEM
/// certificate, is an error naming it.
pub(super) fn read_bundle(path: &Path) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    use anyhow::Context;
    let pem = fs_err::read(path).context("reading --ca-bundle")?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            anyhow::anyhow!(
                "parsing --ca-bundle {}: expected PEM certificates ({e})",
                path.display()
            )
        })?;
    if certs.is_empty() {
        anyhow::bail!(
            "--ca-bundle {} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
            path.display()
        );
    }
    Ok(certs)
}

/// The client configuration of verified TLS: the platform's verifier with `extra` as further
/// roots, and `extra`'s self-signed certificates accepted as servers' own (see the module doc).
pub(super) fn verified_config(
    extra: Vec<CertificateDer<'static>>,
) -> anyhow::Result<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let verifier = bundle_verifier(extra, provider.clone())?;
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| anyhow::anyhow!("setting up TLS: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    // reqwest sets these itself on a configuration it builds; ours must say them.
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// The verifier of [`verified_config`] alone (the Redfish client trusts a BMC's inventory CA
/// with it, in a configuration of its own).
pub(crate) fn bundle_verifier(
    extra: Vec<CertificateDer<'static>>,
    provider: Arc<rustls::crypto::CryptoProvider>,
) -> anyhow::Result<Arc<dyn ServerCertVerifier>> {
    let inner = if extra.is_empty() {
        rustls_platform_verifier::Verifier::new(provider)
    } else {
        rustls_platform_verifier::Verifier::new_with_extra_roots(extra.clone(), provider)
    }
    .map_err(|e| anyhow::anyhow!("loading the system's TLS roots: {e}"))?;
    Ok(Arc::new(BundleVerifier {
        inner: Arc::new(inner),
        pinned: extra,
    }))
}

/// The platform's verifier, and the one exception of the module doc.
#[derive(Debug)]
struct BundleVerifier {
    inner: Arc<dyn ServerCertVerifier>,
    pinned: Vec<CertificateDer<'static>>,
}

impl ServerCertVerifier for BundleVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        let err = match self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Ok(verified) => return Ok(verified),
            Err(e) => e,
        };
        if !is_ca_used_as_end_entity(&err) || !self.pinned.iter().any(|c| c == end_entity) {
            return Err(err);
        }
        // The certificate the engineer handed us, self-signed with CA:TRUE; webpki checked its
        // dates before refusing the flag. What is left is the name.
        let cert = webpki::EndEntityCert::try_from(end_entity)
            .map_err(|_| TlsError::InvalidCertificate(CertificateError::BadEncoding))?;
        cert.verify_is_valid_for_subject_name(server_name)
            .map_err(|_| TlsError::InvalidCertificate(CertificateError::NotValidForName))?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// True for webpki's refusal of a CA certificate presented as a server's own.
fn is_ca_used_as_end_entity(err: &TlsError) -> bool {
    match err {
        TlsError::InvalidCertificate(CertificateError::Other(other)) => matches!(
            other.0.downcast_ref::<webpki::Error>(),
            Some(webpki::Error::CaUsedAsEndEntity)
        ),
        _ => false,
    }
}

/// Whether `registry` (`HOST[:PORT]`) presents a certificate that verifies against exactly the
/// certificates of `bundle` (a PEM file) and nothing else: what a program given
/// `SSL_CERT_FILE=bundle` trusts. A self-signed registry certificate of the bundle is accepted
/// as in [`verified_config`]. Any HTTP answer to `GET /v2/` means the handshake verified; the
/// error names the registry, the bundle and the TLS reason.
pub async fn check_bundle(registry: &str, bundle: &Path) -> anyhow::Result<()> {
    let certs = read_bundle(bundle)?;
    let mut roots = rustls::RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(certs.iter().cloned());
    if added == 0 {
        anyhow::bail!("{} holds no usable CA certificate", bundle.display());
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let inner = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .map_err(|e| anyhow::anyhow!("{}: {e}", bundle.display()))?;
    let verifier = Arc::new(BundleVerifier {
        inner,
        pinned: certs,
    });
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| anyhow::anyhow!("setting up TLS: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let client = reqwest::Client::builder()
        .tls_backend_preconfigured(config)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .map_err(|e| anyhow::anyhow!("setting up TLS: {e}"))?;
    match client.get(format!("https://{registry}/v2/")).send().await {
        Ok(_) => Ok(()),
        Err(e) => {
            let mut reason = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                reason.push_str(": ");
                reason.push_str(&s.to_string());
                source = s.source();
            }
            Err(anyhow::anyhow!(
                "{registry} does not verify with {}: {}",
                bundle.display(),
                crate::secret::redact_url(&reason)
            ))
        }
    }
}
