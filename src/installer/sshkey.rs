//! One authorized_keys line parsed the way Go's `golang.org/x/crypto/ssh.ParseAuthorizedKey`
//! parses it (the installer's `validate.SSHPublicKey`): optional options, a key type, the key
//! in base64, an optional comment; the key decoded into its wire fields (RFC 4253 strings and
//! mpints) with nothing left over. Unlike Go, the type written must equal the type inside the
//! key, as sshd requires. Elliptic-curve points are checked for their form and length, not for
//! lying on the curve.

use base64::engine::{general_purpose::GeneralPurpose, DecodePaddingMode, GeneralPurposeConfig};
use base64::Engine;

/// Go's `base64.StdEncoding`: padding required, trailing bits tolerated.
const STD: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::RequireCanonical)
        .with_decode_allow_trailing_bits(true),
);

/// Key types `ParsePublicKey` knows.
pub const KEY_TYPES: [&str; 16] = [
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
    "ssh-dss",
    "ssh-ed25519-cert-v01@openssh.com",
    "ssh-rsa-cert-v01@openssh.com",
    "ecdsa-sha2-nistp256-cert-v01@openssh.com",
    "ecdsa-sha2-nistp384-cert-v01@openssh.com",
    "ecdsa-sha2-nistp521-cert-v01@openssh.com",
    "sk-ssh-ed25519-cert-v01@openssh.com",
    "sk-ecdsa-sha2-nistp256-cert-v01@openssh.com",
    "ssh-dss-cert-v01@openssh.com",
];

/// Parses one non-comment line; returns its key type, or why it is not a key.
pub fn authorized_key(line: &str) -> Result<&str, String> {
    let (ty, rest) = split_field(line);
    // A first field that cannot be options (no `=`, `,` or quote) is meant as the key type.
    let (ty, rest) = if KEY_TYPES.contains(&ty) || !ty.contains(['=', ',', '"']) {
        (ty, rest)
    } else {
        split_field(skip_options(line)?)
    };
    let (blob, _comment) = split_field(rest);
    if !KEY_TYPES.contains(&ty) {
        let near = KEY_TYPES
            .iter()
            .find(|k| crate::yaml::did_you_mean(ty, &[**k]).is_some())
            .map(|k| format!(" (did you mean {k}?)"))
            .unwrap_or_default();
        return Err(format!(
            "unknown key type {}{near}; expected one of ssh-ed25519, ssh-rsa, ecdsa-sha2-nistp256/384/521, sk-ssh-ed25519@openssh.com, sk-ecdsa-sha2-nistp256@openssh.com",
            crate::yaml::quote(ty)
        ));
    }
    if blob.is_empty() {
        return Err(format!("the key is missing after {ty}"));
    }
    let bytes = STD.decode(blob).map_err(|_| {
        "the key is not valid base64 (truncated or damaged): copy the whole line again".to_string()
    })?;
    let mut r = Reader(&bytes);
    let inner = r.string().map_err(|_| damaged())?;
    let inner = std::str::from_utf8(inner).map_err(|_| damaged())?;
    if inner != ty {
        return Err(format!(
            "the type written, {ty}, differs from the type inside the key, {}; sshd ignores such a line: write {}",
            crate::yaml::quote(inner),
            crate::yaml::quote(inner)
        ));
    }
    fields(ty, &mut r)?;
    if !r.0.is_empty() && !ty.ends_with("-cert-v01@openssh.com") {
        return Err(format!("{} (bytes left over)", damaged()));
    }
    Ok(ty)
}

fn damaged() -> String {
    "the key is truncated or damaged: copy the whole line again".to_string()
}

/// The type's fields after the type string (certificates: the nonce and key start only).
fn fields(ty: &str, r: &mut Reader) -> Result<(), String> {
    let bad = |_| damaged();
    match ty {
        "ssh-ed25519" | "sk-ssh-ed25519@openssh.com" => {
            if r.string().map_err(bad)?.len() != 32 {
                return Err(format!("{} (an Ed25519 key is 32 bytes)", damaged()));
            }
        }
        "ssh-rsa" => {
            let e = r.string().map_err(bad)?;
            let n = r.string().map_err(bad)?;
            let e = e
                .iter()
                .skip_while(|b| **b == 0)
                .copied()
                .collect::<Vec<_>>();
            let odd = e.last().is_some_and(|b| b & 1 == 1);
            let value = e.iter().fold(0u64, |a, b| (a << 8) | u64::from(*b));
            if e.len() > 3 || value < 3 || !odd || n.is_empty() {
                return Err(format!(
                    "{} (the RSA exponent or modulus is wrong)",
                    damaged()
                ));
            }
        }
        "ssh-dss" => {
            for _ in 0..4 {
                r.string().map_err(bad)?;
            }
        }
        "ecdsa-sha2-nistp256"
        | "ecdsa-sha2-nistp384"
        | "ecdsa-sha2-nistp521"
        | "sk-ecdsa-sha2-nistp256@openssh.com" => {
            let curve = r.string().map_err(bad)?;
            let want = if ty.contains("384") {
                ("nistp384", 97)
            } else if ty.contains("521") {
                ("nistp521", 133)
            } else {
                ("nistp256", 65)
            };
            let point = r.string().map_err(bad)?;
            if curve != want.0.as_bytes() || point.len() != want.1 || point[0] != 4 {
                return Err(format!("{} (the curve or its point is wrong)", damaged()));
            }
        }
        _ => {
            // A certificate: its nonce, then the key; the rest is the certificate body.
            r.string().map_err(bad)?;
        }
    }
    if ty.starts_with("sk-") && !ty.contains("-cert-") {
        r.string().map_err(bad)?; // the application ("ssh:")
    }
    Ok(())
}

/// The first whitespace-separated field and the rest after its separator.
fn split_field(s: &str) -> (&str, &str) {
    let s = s.trim_start_matches([' ', '\t']);
    match s.find([' ', '\t']) {
        Some(i) => (&s[..i], s[i..].trim_start_matches([' ', '\t'])),
        None => (s, ""),
    }
}

/// The line after its options field (`from="10.0.0.0/8",no-pty`), quotes honoured.
fn skip_options(line: &str) -> Result<&str, String> {
    let mut in_quote = false;
    let mut prev = '\0';
    for (i, c) in line.char_indices() {
        if !in_quote && (c == ' ' || c == '\t') {
            return Ok(&line[i..]);
        }
        if c == '"' && prev != '\\' {
            in_quote = !in_quote;
        }
        prev = c;
    }
    Err("no key type and key after the options".to_string())
}

/// RFC 4253 wire reading.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    /// A uint32-length-prefixed string.
    fn string(&mut self) -> Result<&'a [u8], ()> {
        let len = self.0.get(..4).ok_or(())?;
        let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
        let body = self.0.get(4..4 + len).ok_or(())?;
        self.0 = &self.0[4 + len..];
        Ok(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ED25519: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIF0TWqM8QrLMi4dZk3dTLklQgLz1oEZBLJw1Fynqh6lE user@host";

    /// A key of `ty` with the given fields, in base64.
    fn blob(ty: &str, fields: &[&[u8]]) -> String {
        let mut out = Vec::new();
        for f in std::iter::once(ty.as_bytes()).chain(fields.iter().copied()) {
            out.extend((f.len() as u32).to_be_bytes());
            out.extend(f);
        }
        STD.encode(out)
    }

    #[test]
    fn well_formed_keys_of_every_family_parse() {
        assert_eq!(authorized_key(ED25519), Ok("ssh-ed25519"));
        let rsa = format!(
            "ssh-rsa {}",
            blob("ssh-rsa", &[&[1, 0, 1], &[0, 0xc1, 0x22]])
        );
        assert_eq!(authorized_key(&rsa), Ok("ssh-rsa"));
        let mut point = vec![4u8];
        point.extend([7u8; 64]);
        let ec = format!(
            "ecdsa-sha2-nistp256 {} c",
            blob("ecdsa-sha2-nistp256", &[b"nistp256", &point])
        );
        assert_eq!(authorized_key(&ec), Ok("ecdsa-sha2-nistp256"));
        let dss = format!("ssh-dss {}", blob("ssh-dss", &[b"p", b"q", b"g", b"y"]));
        assert_eq!(authorized_key(&dss), Ok("ssh-dss"));
        let with_options = format!("from=\"10.0.0.0/8,192.168.0.0/16\",no-pty {ED25519}");
        assert_eq!(authorized_key(&with_options), Ok("ssh-ed25519"));
    }

    /// Regression: a truncated ed25519 key passed the old prefix check.
    #[test]
    fn truncated_mistyped_and_unknown_keys_are_refused() {
        let truncated = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample user@host";
        assert!(authorized_key(truncated).unwrap_err().contains("truncated"));
        let mistyped = ED25519.replacen("ssh-ed25519", "ssh-rsa", 1);
        assert!(authorized_key(&mistyped)
            .unwrap_err()
            .contains("differs from the type inside the key"));
        let typo = ED25519.replacen("ssh-ed25519", "ssh-ed2519", 1);
        assert!(authorized_key(&typo)
            .unwrap_err()
            .contains("did you mean ssh-ed25519?"));
        assert!(authorized_key("my-laptop-key").is_err());
        let short_rsa = format!("ssh-rsa {}", blob("ssh-rsa", &[&[2], &[1]]));
        assert!(authorized_key(&short_rsa).is_err());
        let junk = format!("ssh-ed25519 {}", blob("ssh-ed25519", &[&[0; 32], b"x"]));
        assert!(authorized_key(&junk).unwrap_err().contains("left over"));
    }
}
