//! TLS trust for one BMC, as the inventory says it: the system's roots, the inventory's CA
//! (through the registry client's verifier, which also takes a self-signed CA:TRUE certificate
//! from the bundle, as BMCs' self-made certificates often are), a pinned SHA-256 of the BMC's
//! own certificate, or the explicit opt-out. Every verifier is wrapped so that a refusal is
//! remembered with the certificate's fingerprint: reqwest reports a failed handshake only as a
//! connection error, and the engineer needs to know it was trust, not the network.

use std::sync::{Arc, Mutex};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, Error as TlsError, SignatureScheme};
use sha2::{Digest as _, Sha256};

use super::Trust;

/// A refusal seen during a handshake.
#[derive(Clone, Debug)]
pub(crate) struct Refusal {
    /// The end-entity certificate's SHA-256.
    pub actual: [u8; 32],
    /// rustls' reason.
    pub detail: String,
}

/// Where the verifier leaves its last refusal for the client to read.
#[derive(Debug, Default)]
pub(crate) struct Recorder(Mutex<Option<Refusal>>);

impl Recorder {
    /// The refusal of the last failed handshake, taken.
    pub fn take(&self) -> Option<Refusal> {
        self.0.lock().expect("TLS recorder poisoned").take()
    }

    fn put(&self, refusal: Refusal) {
        *self.0.lock().expect("TLS recorder poisoned") = Some(refusal);
    }
}

/// The rustls client configuration for `trust` (HTTP/1.1 only: BMCs' HTTP/2 is rare and
/// uneven), and the recorder its verifier writes to.
pub(crate) fn client_config(
    trust: &Trust,
) -> Result<(rustls::ClientConfig, Arc<Recorder>), String> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let recorder = Arc::new(Recorder::default());
    let algorithms = provider.signature_verification_algorithms;
    let inner: Arc<dyn ServerCertVerifier> = match trust {
        Trust::System | Trust::Ca(_) => {
            let extra = match trust {
                Trust::Ca(pem) => read_ca(pem)?,
                _ => Vec::new(),
            };
            crate::oci::registry::tls::bundle_verifier(extra, provider.clone())
                .map_err(|e| format!("{e:#}"))?
        }
        Trust::Fingerprint(pin) => Arc::new(Pinned {
            pin: Some(*pin),
            algorithms,
        }),
        Trust::Insecure => Arc::new(Pinned {
            pin: None,
            algorithms,
        }),
    };
    let verifier = Recording {
        inner,
        recorder: recorder.clone(),
    };
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("setting up TLS: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok((config, recorder))
}

/// The certificates of the inventory's `bmc.ca` (PEM).
fn read_ca(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("nodes[].bmc.ca: expected PEM certificates ({e})"))?;
    if certs.is_empty() {
        return Err(
            "nodes[].bmc.ca holds no PEM certificate (-----BEGIN CERTIFICATE-----)".to_string(),
        );
    }
    Ok(certs)
}

/// SHA-256 of a certificate's DER.
pub(crate) fn fingerprint_of(der: &[u8]) -> [u8; 32] {
    Sha256::digest(der).into()
}

/// `AB:CD:...`, as `openssl x509 -fingerprint -sha256` prints it.
pub fn format_fingerprint(fp: &[u8; 32]) -> String {
    fp.iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Reads `sha256:AB:CD:...`, `AB:CD:...` or 64 hex digits; `None` when it is none of them.
pub fn parse_fingerprint(text: &str) -> Option<[u8; 32]> {
    let text = text.trim();
    let hex: String = text
        .strip_prefix("sha256:")
        .or_else(|| text.strip_prefix("SHA256:"))
        .unwrap_or(text)
        .chars()
        .filter(|c| *c != ':')
        .collect();
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// Any verifier, remembering its refusals.
#[derive(Debug)]
struct Recording {
    inner: Arc<dyn ServerCertVerifier>,
    recorder: Arc<Recorder>,
}

impl ServerCertVerifier for Recording {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        let result = self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        );
        if let Err(e) = &result {
            self.recorder.put(Refusal {
                actual: fingerprint_of(end_entity),
                detail: e.to_string(),
            });
        }
        result
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

/// Trust by the SHA-256 of the BMC's own certificate (`pin`): no chain, no name, no dates (a
/// BMC's self-made certificate names whatever the factory chose). Without a pin, the explicit
/// opt-out: any certificate (the caller shows that this BMC is not verified). Either way the
/// handshake's signature is checked against the certificate presented, so only the holder of
/// its key gets through.
#[derive(Debug)]
struct Pinned {
    pin: Option<[u8; 32]>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        match self.pin {
            Some(pin) if fingerprint_of(end_entity) != pin => Err(TlsError::InvalidCertificate(
                CertificateError::ApplicationVerificationFailure,
            )),
            _ => Ok(ServerCertVerified::assertion()),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_read_in_every_written_form() {
        let fp = [0xABu8; 32];
        let colon = format_fingerprint(&fp);
        assert_eq!(parse_fingerprint(&colon), Some(fp));
        assert_eq!(parse_fingerprint(&format!("sha256:{colon}")), Some(fp));
        assert_eq!(parse_fingerprint(&"ab".repeat(32)), Some(fp));
        assert_eq!(parse_fingerprint("sha256:AB"), None);
        assert_eq!(parse_fingerprint(&"zz".repeat(32)), None);
    }
}
