//! The lab's own certificate authority: made fresh by every `bootstrap-lab up`, it signs the TLS
//! certificates of the lab's servers (the BMC emulators' TLS variant, the cluster API
//! stand-in), so the product verifies them against a CA file exactly as it would on a site.

use anyhow::{Context, Result};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType, PKCS_ECDSA_P256_SHA256,
};
use std::net::IpAddr;

/// A certificate and its private key, PEM.
pub struct Pem {
    /// The certificate (for a server: its certificate followed by the CA's).
    pub cert: String,
    /// The private key (PKCS#8).
    pub key: String,
}

/// The lab CA, able to sign server certificates while it lives.
pub struct LabCa {
    issuer: Issuer<'static, KeyPair>,
    /// The CA certificate, PEM: what clients trust.
    pub pem: Pem,
}

fn dn(common_name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    dn.push(DnType::OrganizationName, "bootstrap lab");
    dn
}

fn validity(params: &mut CertificateParams) {
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::days(1);
    params.not_after = now + time::Duration::days(365);
}

impl LabCa {
    /// A new CA (ECDSA P-256, one year).
    pub fn generate() -> Result<LabCa> {
        let key =
            KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).context("making the lab CA key")?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name = dn("bootstrap lab CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        validity(&mut params);
        let cert = params.self_signed(&key).context("signing the lab CA")?;
        let pem = Pem {
            cert: cert.pem(),
            key: key.serialize_pem(),
        };
        Ok(LabCa {
            issuer: Issuer::new(params, key),
            pem,
        })
    }

    /// The certificate (PEM) the CA signs from a PEM certificate request, as a CSR signer
    /// does: the request's subject, SANs and key, valid for 30 days.
    pub fn sign_request(&self, csr_pem: &str) -> Result<String> {
        let mut csr = rcgen::CertificateSigningRequestParams::from_pem(csr_pem)
            .context("parsing the certificate request")?;
        let now = time::OffsetDateTime::now_utc();
        csr.params.not_before = now - time::Duration::minutes(5);
        csr.params.not_after = now + time::Duration::days(30);
        csr.params.use_authority_key_identifier_extension = true;
        let cert = csr
            .signed_by(&self.issuer)
            .context("signing the certificate request")?;
        Ok(cert.pem())
    }

    /// A server certificate for these IP addresses and DNS names, signed by the CA; its chain
    /// (server, then CA) and key.
    pub fn server(&self, ips: &[IpAddr], names: &[String]) -> Result<Pem> {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
        let mut params = CertificateParams::new(names.to_vec())?;
        params
            .subject_alt_names
            .extend(ips.iter().map(|ip| SanType::IpAddress(*ip)));
        let cn = ips
            .first()
            .map(ToString::to_string)
            .or_else(|| names.first().cloned())
            .unwrap_or_else(|| "bootstrap lab server".into());
        params.distinguished_name = dn(&cn);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        validity(&mut params);
        let cert = params
            .signed_by(&key, &self.issuer)
            .with_context(|| format!("signing the lab certificate for {cn}"))?;
        Ok(Pem {
            cert: format!("{}{}", cert.pem(), self.pem.cert),
            key: key.serialize_pem(),
        })
    }
}
