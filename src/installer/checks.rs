//! The installer's facts, written once: what a value must be for the agent-based installer to
//! take it (and what bootstrap adds where the installer would take a value that cannot work).
//! The inventory's validation, `bootstrap validate` and render's self-check all call these, so
//! the two paths cannot disagree on a key, a size or a disk.
//!
//! Each check returns the value's verdict as a [`Finding`] (an error refuses it, a warning is
//! reported and the value used); the caller places it on its own field path. Messages start with
//! the value (quoted) or with what is wrong, so they read after `path: ` in either file.

use super::agent_config::RootDeviceHints;
use crate::netaddr::{is_dns_label, is_dns_name, normalize_mac};
use crate::yaml::{quote, Severity};
use base64::Engine;
use std::net::IpAddr;

/// What a check says about a value it does not accept as is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// Error (refused) or warning (used, reported).
    pub severity: Severity,
    /// What is wrong and what to write instead.
    pub message: String,
}

impl Finding {
    /// The value is refused.
    pub fn error(message: impl Into<String>) -> Self {
        Finding {
            severity: Severity::Error,
            message: message.into(),
        }
    }

    /// The value is used, with this said about it.
    pub fn warning(message: impl Into<String>) -> Self {
        Finding {
            severity: Severity::Warning,
            message: message.into(),
        }
    }
}

/// A check's verdict: `Ok` when there is nothing to say.
pub type Check = Result<(), Finding>;

/// Control-plane sizes the agent installer takes without an arbiter or fencing.
pub const CONTROL_PLANE_SIZES: [i64; 4] = [1, 3, 4, 5];

/// The additionalTrustBundlePolicy values.
pub const TRUST_BUNDLE_POLICIES: [&str; 2] = ["Proxyonly", "Always"];

/// The control plane's size (controlPlane.replicas, or the inventory's master count): 1, 3, 4
/// or 5; 2 only beside an arbiter pool or with fencing credentials (the installer's
/// `validateControlPlaneConfiguration`).
pub fn control_plane_size(replicas: i64, arbiter: bool, fencing: bool) -> Check {
    if CONTROL_PLANE_SIZES.contains(&replicas) || (replicas == 2 && (arbiter || fencing)) {
        return Ok(());
    }
    let two = if replicas == 2 {
        " (2 only with an arbiter pool or fencing credentials)"
    } else {
        ""
    };
    Err(Finding::error(format!(
        "must be 1 (single node), 3, 4 or 5, found {replicas}{two}"
    )))
}

/// The cluster's name (install-config metadata.name): a DNS label, so `api.<name>.<baseDomain>`
/// is a name of its own.
pub fn cluster_name(name: &str) -> Check {
    if is_dns_label(name) {
        return Ok(());
    }
    Err(Finding::error(format!(
        "{} is not a valid cluster name (not a DNS label); use 1 to 63 lower-case letters, digits and '-', starting and ending with a letter or digit (e.g. gpu-prod)",
        quote(name)
    )))
}

/// The base domain: a DNS name, a trailing dot allowed (the installer's `validate.DomainName`).
pub fn base_domain(domain: &str) -> Check {
    if is_dns_name(domain.strip_suffix('.').unwrap_or(domain)) {
        return Ok(());
    }
    Err(Finding::error(format!(
        "{} is not a DNS domain; write lower-case labels separated by dots, e.g. ai.example.com",
        quote(domain)
    )))
}

/// An NTP source: a domain name or an IP address, nothing more.
pub fn ntp_source(source: &str) -> Check {
    let name = source.strip_suffix('.').unwrap_or(source);
    if source.parse::<IpAddr>().is_ok() || is_dns_name(name) {
        return Ok(());
    }
    Err(Finding::error(format!(
        "{} is neither a domain name nor an IP address; write e.g. ntp.example.com or 10.20.0.1 (no scheme, no port)",
        quote(source)
    )))
}

/// additionalTrustBundlePolicy: `Proxyonly` or `Always`, exactly.
pub fn trust_bundle_policy(policy: &str) -> Check {
    one_of(policy, &TRUST_BUNDLE_POLICIES)
}

/// `value` must be one of `allowed`, exactly; a case slip names the value meant.
pub fn one_of(value: &str, allowed: &[&str]) -> Check {
    if allowed.contains(&value) {
        return Ok(());
    }
    let near = allowed
        .iter()
        .find(|a| a.eq_ignore_ascii_case(value))
        .map(|a| format!(" (write {a})"))
        .unwrap_or_default();
    Err(Finding::error(format!(
        "unknown value {}{near}; expected one of {}",
        quote(value),
        allowed.join(", ")
    )))
}

/// A MAC address (the installer's `validate.MAC`), in canonical form for comparisons.
pub fn mac(text: &str) -> Result<String, Finding> {
    normalize_mac(text).map_err(Finding::error)
}

/// A pull secret, as the installer's `validate.ImagePullSecret`: JSON whose `auths` is a
/// non-empty object, each registry with `auth` or `credsStore`. Messages never quote it.
pub fn pull_secret(text: &str) -> Check {
    let value: serde_json::Value = serde_json::from_str(text.trim()).map_err(|e| {
        Finding::error(format!(
            "is not JSON (line {}, column {}), so not a pull secret; download it again from console.redhat.com, or write '{{\"auths\":{{\"registry.example:8443\":{{\"auth\":\"...\"}}}}}}' (quoted in single quotes)",
            e.line(),
            e.column()
        ))
    })?;
    let Some(auths) = value.get("auths").and_then(|a| a.as_object()) else {
        return Err(Finding::error(
            r#"is not a pull secret: expected JSON with an "auths" object, e.g. '{"auths":{"registry.example:8443":{"auth":"..."}}}'"#,
        ));
    };
    if auths.is_empty() {
        return Err(Finding::error(
            r#"is not a pull secret: "auths" is empty (the installer requires at least one registry)"#,
        ));
    }
    for (registry, entry) in auths {
        if entry.get("auth").is_none() && entry.get("credsStore").is_none() {
            return Err(Finding::error(format!(
                r#"is not a pull secret: the entry for {} has neither "auth" nor "credsStore" (the installer requires one)"#,
                quote(registry)
            )));
        }
    }
    Ok(())
}

/// A PEM bundle of CA certificates (additionalTrustBundle, a BMC's CA), as the installer's
/// `validate.CABundle`: one or more `CERTIFICATE` blocks whose body is DER, nothing after the
/// last one. (The certificate itself is not parsed further.)
pub fn pem_bundle(text: &str) -> Check {
    const BEGIN: &str = "-----BEGIN ";
    if !text.contains("-----BEGIN CERTIFICATE-----") {
        return Err(Finding::error(
            "holds no PEM certificate; paste the CA certificate(s) (-----BEGIN CERTIFICATE----- ...), as a block scalar (`|`) in YAML",
        ));
    }
    let mut rest = text;
    let mut n = 0;
    while let Some(start) = rest.find(BEGIN) {
        n += 1;
        let block = &rest[start + BEGIN.len()..];
        let (label, body) = block.split_once("-----").unwrap_or((block, ""));
        let end_marker = format!("-----END {label}-----");
        let Some(end) = body.find(&end_marker) else {
            return Err(Finding::error(format!(
                "PEM block {n} ({label}) has no `{end_marker}` line; the bundle is cut short"
            )));
        };
        if label != "CERTIFICATE" {
            return Err(Finding::error(format!(
                "PEM block {n} is a {label}, not a CERTIFICATE; the bundle holds CA certificates only"
            )));
        }
        if !is_der(&body[..end]) {
            return Err(Finding::error(format!(
                "PEM block {n} is not a certificate: its body is not base64 DER (truncated or damaged); paste it again"
            )));
        }
        rest = &body[end + end_marker.len()..];
    }
    if !rest.trim().is_empty() {
        return Err(Finding::error(
            "has text after the last certificate; the installer refuses anything but PEM certificates",
        ));
    }
    Ok(())
}

/// True when `body` (a PEM block's inside) is base64 of one DER SEQUENCE whose length is the
/// rest of the bytes: what x509 parsing needs first, and what a cut paste breaks.
fn is_der(body: &str) -> bool {
    let b64: String = body.chars().filter(|c| !c.is_whitespace()).collect();
    let Ok(der) = base64::engine::general_purpose::STANDARD.decode(b64) else {
        return false;
    };
    let (Some(&0x30), Some(&len0)) = (der.first(), der.get(1)) else {
        return false;
    };
    let (len, header) = if len0 < 0x80 {
        (usize::from(len0), 2)
    } else {
        let k = usize::from(len0 & 0x7f);
        if k == 0 || k > 4 || der.len() < 2 + k {
            return false;
        }
        let len = der[2..2 + k]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (len, 2 + k)
    };
    der.len() == header + len
}

/// Root device hints (agent-config rootDeviceHints, the inventory's rootDevice): each finding
/// with the hint's key. deviceName is `/dev/NAME` or `/dev/disk/by-path/NAME` (by-id refused,
/// as the installer does); hctl is four numbers; wwn has no vendor extension; the extension
/// fields are refused by the agent installer; minSizeGigabytes 0 is no hint at all.
pub fn root_device_hints(h: &RootDeviceHints) -> Vec<(&'static str, Finding)> {
    let mut out = Vec::new();
    if let Some(m) = h.device_name.as_deref().and_then(device_name_problem) {
        out.push(("deviceName", Finding::error(m)));
    }
    if let Some(hctl) = h.hctl.as_deref() {
        let parts: Vec<&str> = hctl.split(':').collect();
        if parts.len() != 4
            || !parts
                .iter()
                .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        {
            out.push((
                "hctl",
                Finding::error(format!(
                    "{} is not host:channel:target:lun, e.g. 1:0:0:0",
                    quote(hctl)
                )),
            ));
        }
    }
    if let Some(wwn) = h.wwn.as_deref().filter(|w| !is_wwn(w)) {
        out.push(("wwn", Finding::error(format!("{} is not a WWN: write 0x and 16 hex digits (32 for a 128-bit WWN), or the eui./naa./nvme. name udev reports, without a vendor extension (the installer forbids extensions)", quote(wwn)))));
    }
    for (key, value) in [
        ("wwnWithExtension", &h.wwn_with_extension),
        ("wwnVendorExtension", &h.wwn_vendor_extension),
    ] {
        if value.is_some() {
            out.push((key, Finding::error("is not supported by the agent-based installer (it refuses WWN extensions in root device hints); use wwn (or serialNumber) instead")));
        }
    }
    match h.min_size_gigabytes {
        Some(n) if n < 0 => out.push((
            "minSizeGigabytes",
            Finding::error(format!("must be 0 or more, found {n}")),
        )),
        Some(0) => out.push(("minSizeGigabytes", Finding::warning("0 matches every disk (the installer treats it as no size hint); give the smallest size the root disk has, in GB, or leave it out"))),
        _ => {}
    }
    out
}

/// Why a `deviceName` is refused, or None.
fn device_name_problem(d: &str) -> Option<String> {
    let Some(rest) = d.strip_prefix("/dev/") else {
        return Some(format!("{} is not a /dev/ path; write /dev/NAME or /dev/disk/by-path/NAME (the only forms the installer accepts), e.g. /dev/disk/by-path/pci-0000:03:00.0-scsi-0:2:0:0", quote(d)));
    };
    if rest.starts_with("disk/by-id/") {
        return Some(format!("{} is a /dev/disk/by-id/ path, which the installer refuses: by-id names differ between the discovery image and the installed system; use /dev/disk/by-path/... (stable for a slot), /dev/NAME, or the wwn or serialNumber hint", quote(d)));
    }
    let leaf = rest.strip_prefix("disk/by-path/").unwrap_or(rest);
    (leaf.is_empty() || leaf.contains('/')).then(|| {
        format!(
            "{} is not /dev/NAME or /dev/disk/by-path/NAME (the only forms the installer accepts)",
            quote(d)
        )
    })
}

/// A WWN as udev reports it: `0x` and 16 or 32 hex digits, or an `eui.`/`naa.`/`nvme.`/`t10.`
/// name (NVMe and SCSI name descriptors).
fn is_wwn(w: &str) -> bool {
    if let Some(hex) = w.strip_prefix("0x") {
        return matches!(hex.len(), 16 | 32) && hex.chars().all(|c| c.is_ascii_hexdigit());
    }
    ["eui.", "naa.", "nvme.", "t10."]
        .iter()
        .any(|p| w.starts_with(p) && w.len() > p.len() && !w.chars().any(char::is_whitespace))
}

/// SSH public keys for the core user (install-config sshKey, the inventory's public key file):
/// authorized_keys lines, each parsed as Go's `ssh.ParseAuthorizedKey` parses one (options
/// allowed, a known key type, a base64 key that decodes into that type's fields), and further:
/// the type written must be the one inside the key (sshd ignores the line otherwise), and every
/// line must be a key (the installer skips broken lines silently). Blank and `#` lines are
/// comments. A DSA key is a warning: the installer takes it, the nodes' OpenSSH refuses it.
pub fn ssh_authorized_keys(text: &str) -> Check {
    if text.contains("PRIVATE KEY") {
        return Err(Finding::error(
            "is a private key; give the public key (the .pub file, one line: ssh-ed25519 AAAA... user@host)",
        ));
    }
    let mut keys = 0;
    let mut dsa = false;
    for raw in text.split('\n') {
        let line = raw.split('\r').next().unwrap_or("").trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let ty = super::sshkey::authorized_key(line).map_err(|why| {
            Finding::error(format!(
                "{} is not an SSH public key: {why}; write `TYPE BASE64 [comment]`, e.g. the line of ~/.ssh/id_ed25519.pub (ssh-ed25519 AAAA... user@host)",
                quote(line)
            ))
        })?;
        keys += 1;
        dsa |= ty.starts_with("ssh-dss");
    }
    if keys == 0 {
        return Err(Finding::error(
            "holds no SSH public key; write `TYPE BASE64 [comment]`, e.g. the line of ~/.ssh/id_ed25519.pub (ssh-ed25519 AAAA... user@host)",
        ));
    }
    if dsa {
        return Err(Finding::warning(
            "holds a DSA (ssh-dss) key: the installer accepts it, but the nodes' OpenSSH refuses DSA keys (disabled since OpenSSH 7.0), so you could not log in with it; use an ssh-ed25519 key",
        ));
    }
    Ok(())
}
