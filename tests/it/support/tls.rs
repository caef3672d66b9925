//! Per-run TLS material for the HTTPS registries and the token server: a fresh CA, a server
//! certificate for `127.0.0.1` (IP SAN) and `localhost` (DNS SAN) signed by it, and the token
//! signer's key and certificate, all written as PEM files the registry and skopeo read.
//!
//! Nothing is shared between runs or between registries, so a test that trusts the wrong CA fails
//! as it would on a site.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use aws_lc_rs::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PublicKeyData, PKCS_ECDSA_P256_SHA256,
};

/// The TLS files of one registry (and its token server), all under one directory.
pub struct TestPki {
    /// The CA certificate, PEM (what clients must trust).
    pub ca_pem: String,
    /// `DIR/ca.pem`: the CA certificate.
    pub ca_path: PathBuf,
    /// `DIR/certs.d/ca.crt`: a directory holding only the CA as `ca.crt`, the layout that
    /// `skopeo --cert-dir` (containers/image) expects.
    pub cert_dir: PathBuf,
    /// `DIR/server.crt`: the server certificate followed by the CA (a full chain).
    pub server_cert_path: PathBuf,
    /// `DIR/server.key`: the server's private key.
    pub server_key_path: PathBuf,
    /// `DIR/token-bundle.pem`: the registry's `auth.token.rootcertbundle` (signer cert + CA).
    pub token_bundle_path: PathBuf,
    /// The token signer's certificate, DER (for an `x5c` header, should a test want one).
    pub signer_cert_der: Vec<u8>,
    /// The token signer's key ID in libtrust form (the JWT `kid` Distribution looks up).
    pub signer_kid: String,
    server_cert_der: Vec<u8>,
    server_key_der: Vec<u8>,
    signer_key_pkcs8: Vec<u8>,
    /// True when the server certificate is its own CA (see [`Self::openssl_self_signed`]).
    pub self_signed: bool,
}

impl TestPki {
    /// Generates a CA, a server certificate and a token signer, and writes them under `dir`.
    pub fn generate(dir: &Path) -> Result<Self> {
        fs_err::create_dir_all(dir)?;
        let ca_key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.distinguished_name = dn("bootstrap test CA");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        validity(&mut ca_params);
        let ca_cert = ca_params.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca_params, &ca_key);

        let server_key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
        let mut server_params =
            CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])?;
        server_params.distinguished_name = dn("127.0.0.1");
        server_params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        server_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        server_params.use_authority_key_identifier_extension = true;
        validity(&mut server_params);
        let server_cert = server_params.signed_by(&server_key, &issuer)?;

        let signer_key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
        let mut signer_params = CertificateParams::new(Vec::<String>::new())?;
        signer_params.distinguished_name = dn("bootstrap test token signer");
        signer_params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        signer_params.use_authority_key_identifier_extension = true;
        validity(&mut signer_params);
        let signer_cert = signer_params.signed_by(&signer_key, &issuer)?;
        let signer_kid = libtrust_key_id(&signer_key.subject_public_key_info());

        let ca_pem = ca_cert.pem();
        let ca_path = dir.join("ca.pem");
        fs_err::write(&ca_path, &ca_pem)?;
        let cert_dir = dir.join("certs.d");
        fs_err::create_dir_all(&cert_dir)?;
        fs_err::write(cert_dir.join("ca.crt"), &ca_pem)?;
        let server_cert_path = dir.join("server.crt");
        fs_err::write(
            &server_cert_path,
            format!("{}{}", server_cert.pem(), ca_pem),
        )?;
        let server_key_path = dir.join("server.key");
        fs_err::write(&server_key_path, server_key.serialize_pem())?;
        let token_bundle_path = dir.join("token-bundle.pem");
        fs_err::write(
            &token_bundle_path,
            format!("{}{}", signer_cert.pem(), ca_pem),
        )?;

        Ok(TestPki {
            ca_pem,
            ca_path,
            cert_dir,
            server_cert_path,
            server_key_path,
            token_bundle_path,
            signer_cert_der: signer_cert.der().to_vec(),
            signer_kid,
            server_cert_der: server_cert.der().to_vec(),
            server_key_der: server_key.serialize_der(),
            signer_key_pkcs8: signer_key.serialize_der(),
            self_signed: false,
        })
    }

    /// As [`Self::generate`], but the server certificate is what most engineers have on a lab
    /// or site registry: self-signed by `openssl req -x509`, whose default extensions make it
    /// `CA:TRUE`, for `127.0.0.1` and `localhost`. `ca_pem` (what clients trust) is that
    /// certificate itself. The token signer stays as `generate` makes it.
    pub fn openssl_self_signed(dir: &Path) -> Result<Self> {
        let mut pki = Self::generate(dir)?;
        let out = std::process::Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
            ])
            .args(["-nodes", "-days", "2", "-subj", "/CN=127.0.0.1"])
            .args(["-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"])
            .arg("-keyout")
            .arg(&pki.server_key_path)
            .arg("-out")
            .arg(&pki.server_cert_path)
            .output()
            .context("running openssl req -x509 (install openssl)")?;
        anyhow::ensure!(
            out.status.success(),
            "openssl req -x509 failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let cert_pem = fs_err::read_to_string(&pki.server_cert_path)?;
        let text = std::process::Command::new("openssl")
            .args(["x509", "-noout", "-text", "-in"])
            .arg(&pki.server_cert_path)
            .output()?;
        anyhow::ensure!(
            String::from_utf8_lossy(&text.stdout).contains("CA:TRUE"),
            "this openssl did not make a CA:TRUE certificate; the test needs one"
        );
        fs_err::write(&pki.ca_path, &cert_pem)?;
        fs_err::write(pki.cert_dir.join("ca.crt"), &cert_pem)?;
        pki.server_cert_der = pem_to_der(&cert_pem)?;
        pki.server_key_der = pem_to_der(&fs_err::read_to_string(&pki.server_key_path)?)?;
        pki.ca_pem = cert_pem;
        pki.self_signed = true;
        Ok(pki)
    }

    /// The signer's ECDSA P-256 key, ready to make ES256 (fixed-width `r || s`) signatures.
    pub fn signer(&self) -> Result<EcdsaKeyPair> {
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &self.signer_key_pkcs8)
            .map_err(|e| anyhow::anyhow!("loading the token signer key: {e}"))
    }

    /// A rustls server configuration presenting the server certificate (and the CA) over
    /// HTTP/1.1; the token server uses it.
    pub fn rustls_server_config(&self) -> Result<tokio_rustls::rustls::ServerConfig> {
        use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
        let provider =
            std::sync::Arc::new(tokio_rustls::rustls::crypto::aws_lc_rs::default_provider());
        let ca_der = pem_to_der(&self.ca_pem).context("CA PEM")?;
        let chain = vec![
            CertificateDer::from(self.server_cert_der.clone()),
            CertificateDer::from(ca_der),
        ];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.server_key_der.clone()));
        let mut config = tokio_rustls::rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }

    /// The CA as a `reqwest` root certificate.
    pub fn reqwest_ca(&self) -> Result<reqwest::Certificate> {
        Ok(reqwest::Certificate::from_pem(self.ca_pem.as_bytes())?)
    }
}

fn dn(common_name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    dn.push(DnType::OrganizationName, "bootstrap integration tests");
    dn
}

fn validity(params: &mut CertificateParams) {
    params.not_before = rcgen::date_time_ymd(2020, 1, 1);
    params.not_after = rcgen::date_time_ymd(2049, 12, 31);
}

/// The first certificate of a PEM text, as DER.
fn pem_to_der(pem: &str) -> Result<Vec<u8>> {
    let body: String = pem
        .lines()
        .skip_while(|l| !l.starts_with("-----BEGIN"))
        .skip(1)
        .take_while(|l| !l.starts_with("-----END"))
        .collect();
    Ok(base64::engine::general_purpose::STANDARD.decode(body)?)
}

/// The key ID libtrust (and so Distribution's token auth) gives a public key: SHA-256 of the DER
/// SubjectPublicKeyInfo, first 240 bits, base32 (RFC 4648, no padding), in 12 groups of 4
/// characters joined by `:`.
pub fn libtrust_key_id(spki_der: &[u8]) -> String {
    let hash = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, spki_der);
    let b32 = base32(&hash.as_ref()[..30]);
    let groups: Vec<&str> = (0..b32.len() / 4).map(|i| &b32[i * 4..i * 4 + 4]).collect();
    groups.join(":")
}

/// RFC 4648 base32 without padding (libtrust's key ID alphabet).
pub fn base32(data: &[u8]) -> String {
    const ALPHABET: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let mut out = String::new();
    let mut buffer: u32 = 0;
    let mut bits = 0;
    for &b in data {
        buffer = (buffer << 8) | u32::from(b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(ALPHABET[((buffer >> bits) & 31) as usize] as char);
        }
    }
    if bits > 0 {
        out.push(ALPHABET[((buffer << (5 - bits)) & 31) as usize] as char);
    }
    out
}
