//! Who signed what the report describes: the SSH signature beside the archive's manifest
//! (`manifest.json.sig`) or the record (`RECORD.sig`), checked over the very bytes the report
//! then parses. The key's fingerprint is always shown; who it belongs to only once an
//! `allowed_signers` file vouches for it, as `ssh-keygen -Y verify` decides.

use crate::sshsig::{self, NAMESPACE};
use russh::keys::ssh_key::{HashAlg, PublicKey, SshSig};
use serde::Serialize;
use std::path::Path;

/// The most an armored signature file may hold (an ed25519 one is under 1 KiB).
const SIG_MAX: u64 = 64 * 1024;

/// What the signature beside a file says.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase", tag = "status")]
pub enum Signature {
    /// No signature file beside it.
    #[serde(rename_all = "camelCase")]
    NotSigned {
        /// The signature file looked for.
        file: String,
    },
    /// Signed, and the signature holds for these bytes under the key it carries; who holds
    /// that key was not checked (no `--allowed-signers`).
    #[serde(rename_all = "camelCase")]
    Signed {
        /// The signature file.
        file: String,
        /// The signing key's SHA256 fingerprint.
        fingerprint: String,
    },
    /// Checked against an allowed_signers file: this identity's key signed these bytes.
    #[serde(rename_all = "camelCase")]
    Verified {
        /// The signature file.
        file: String,
        /// The signing key's SHA256 fingerprint.
        fingerprint: String,
        /// The principal the allowed_signers file lists for that key.
        identity: String,
        /// The allowed_signers file.
        allowed_signers: String,
    },
    /// The signature does not hold (or is missing while one was required).
    #[serde(rename_all = "camelCase")]
    Bad {
        /// The signature file.
        file: String,
        /// The signing key's fingerprint, when the signature could be read.
        #[serde(skip_serializing_if = "Option::is_none")]
        fingerprint: Option<String>,
        /// Why it does not hold.
        reason: String,
    },
}

impl Signature {
    /// True when the signature failed.
    pub fn is_bad(&self) -> bool {
        matches!(self, Signature::Bad { .. })
    }
}

/// Checks `FILE.sig` over `message` (the bytes read from `file`), against `allowed_signers`
/// when given.
pub(super) fn check(file: &Path, message: &[u8], allowed_signers: Option<&Path>) -> Signature {
    let sig_file = sshsig::sig_path(file);
    let name = sig_file.display().to_string();
    let bad = |fingerprint: Option<String>, reason: String| Signature::Bad {
        file: name.clone(),
        fingerprint,
        reason,
    };
    let armored = match crate::bounded::read_regular_to_string(&sig_file, SIG_MAX) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return match allowed_signers {
                None => Signature::NotSigned { file: name },
                Some(_) => bad(
                    None,
                    format!(
                        "{name} does not exist: {} is not signed, and --allowed-signers asks for a signature (sign with bootstrap mirror --sign-key)",
                        file.display()
                    ),
                ),
            };
        }
        Err(e) => return bad(None, format!("reading {name}: {e}")),
    };
    let sig = match SshSig::from_pem(armored.trim().as_bytes()) {
        Ok(s) => s,
        Err(e) => return bad(None, format!("{name} is not an SSH signature: {e}")),
    };
    let key = PublicKey::from(sig.public_key().clone());
    let fingerprint = key.fingerprint(HashAlg::Sha256).to_string();
    match allowed_signers {
        Some(allowed) => match sshsig::verify_bytes(allowed, file, message) {
            Ok(v) => Signature::Verified {
                file: name.clone(),
                fingerprint: v.fingerprint,
                identity: v.identity,
                allowed_signers: allowed.display().to_string(),
            },
            Err(e) => bad(Some(fingerprint), format!("{e:#}")),
        },
        None if sig.namespace() != NAMESPACE => bad(
            Some(fingerprint),
            format!(
                "{name}: the signature is in namespace {:?}, not {NAMESPACE:?}",
                sig.namespace()
            ),
        ),
        None => match key.verify(NAMESPACE, message, &sig) {
            Ok(()) => Signature::Signed {
                file: name.clone(),
                fingerprint,
            },
            Err(e) => bad(
                Some(fingerprint),
                format!(
                    "{name}: the signature does not match {} ({e}): it was changed after signing",
                    file.display()
                ),
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use russh::keys::ssh_key::PrivateKey;

    fn signed(dir: &Path, text: &[u8]) -> (std::path::PathBuf, PrivateKey) {
        let key_file = dir.join("signer");
        let st = std::process::Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-f"])
            .arg(&key_file)
            .status()
            .unwrap();
        assert!(st.success());
        let key = sshsig::read_key(&key_file).unwrap();
        let file = dir.join("rec.json");
        fs_err::write(&file, text).unwrap();
        fs_err::write(sshsig::sig_path(&file), sshsig::sign(&key, text).unwrap()).unwrap();
        (file, key)
    }

    /// Without allowed_signers the key's fingerprint is shown and the bytes still checked;
    /// with it, the identity; a changed file, an unlisted key or a missing signature is bad.
    #[test]
    fn signatures_are_checked_over_the_bytes_read() {
        let dir = tempfile::tempdir().unwrap();
        let (file, key) = signed(dir.path(), b"{}");
        let fp = key.fingerprint(HashAlg::Sha256).to_string();
        match check(&file, b"{}", None) {
            Signature::Signed { fingerprint, .. } => assert_eq!(fingerprint, fp),
            other => panic!("{other:?}"),
        }
        assert!(check(&file, b"{ }", None).is_bad());
        let allowed = dir.path().join("allowed_signers");
        let line = sshsig::allowed_signers_line("auditor@example.com", key.public_key()).unwrap();
        fs_err::write(&allowed, format!("{line}\n")).unwrap();
        match check(&file, b"{}", Some(&allowed)) {
            Signature::Verified { identity, .. } => assert_eq!(identity, "auditor@example.com"),
            other => panic!("{other:?}"),
        }
        fs_err::write(&allowed, "").unwrap();
        match check(&file, b"{}", Some(&allowed)) {
            Signature::Bad {
                fingerprint,
                reason,
                ..
            } => {
                assert_eq!(fingerprint.as_deref(), Some(fp.as_str()));
                assert!(reason.contains("does not list"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        let unsigned = dir.path().join("other.json");
        assert!(matches!(
            check(&unsigned, b"{}", None),
            Signature::NotSigned { .. }
        ));
        assert!(check(&unsigned, b"{}", Some(&allowed)).is_bad());
    }
}
