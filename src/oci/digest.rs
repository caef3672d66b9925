//! Content digests (`sha256:<hex>`) and the hashing that proves bytes are what they claim:
//! every byte we write is hashed as it is written and is made visible only after its digest
//! matches.

use sha2::{Digest as _, Sha256};
use std::fmt;
use std::str::FromStr;

/// A content digest. Only sha256 is produced by registries in this field, so only sha256 is
/// accepted; anything else is refused with a clear error rather than silently unverified.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest {
    hex: String,
}

/// Why a string is not a digest.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DigestError {
    /// No `algorithm:` prefix.
    #[error("'{0}' is not a digest: expected sha256:<64 hex digits>")]
    Malformed(String),
    /// An algorithm other than sha256.
    #[error("digest '{0}' uses an unsupported algorithm: only sha256 is supported")]
    Unsupported(String),
}

impl Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Digest {
            hex: hex(&Sha256::digest(bytes)),
        }
    }

    /// The 64 lowercase hex digits.
    pub fn hex(&self) -> &str {
        &self.hex
    }

    /// `sha256-<hex>`: the form used in signature tags and file names.
    pub fn dashed(&self) -> String {
        format!("sha256-{}", self.hex)
    }

    /// The first 12 hex digits, for progress lines.
    pub fn short(&self) -> &str {
        &self.hex[..12]
    }
}

impl FromStr for Digest {
    type Err = DigestError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (alg, hex) = s
            .split_once(':')
            .ok_or_else(|| DigestError::Malformed(s.to_string()))?;
        if alg != "sha256" {
            if alg.is_empty() || hex.is_empty() {
                return Err(DigestError::Malformed(s.to_string()));
            }
            return Err(DigestError::Unsupported(s.to_string()));
        }
        let valid = hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !valid {
            return Err(DigestError::Malformed(s.to_string()));
        }
        Ok(Digest {
            hex: hex.to_string(),
        })
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex)
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex)
    }
}

impl serde::Serialize for Digest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Digest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::with_capacity(64), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

/// Bytes that did not hash to what they should have.
#[derive(Debug, thiserror::Error)]
#[error("content of {what} does not match its digest: expected {expected} ({expected_size} bytes), got {actual} ({actual_size} bytes)")]
pub struct DigestMismatch {
    /// What was being checked (a blob, a manifest, a file).
    pub what: String,
    /// The digest it should have had.
    pub expected: Digest,
    /// The digest it had.
    pub actual: Digest,
    /// The size it should have had.
    pub expected_size: u64,
    /// The size it had.
    pub actual_size: u64,
}

impl DigestMismatch {
    /// Content that ran past its size (its digest is not worth computing).
    pub fn longer(what: String, expected: &Digest, size: u64) -> Self {
        DigestMismatch {
            what: format!("{what} (longer than its size)"),
            expected: expected.clone(),
            actual: Digest::of(b""),
            expected_size: size,
            actual_size: size + 1,
        }
    }
}

/// A running sha256 over a stream, counting bytes as it goes.
#[derive(Clone, Default)]
pub struct StreamHasher {
    hasher: Sha256,
    len: u64,
}

impl StreamHasher {
    /// A hasher that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds the next bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        self.hasher.update(bytes);
        self.len += bytes.len() as u64;
    }

    /// Bytes seen so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True before any byte was seen.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The digest of everything seen.
    pub fn finish(self) -> (Digest, u64) {
        (
            Digest {
                hex: hex(&self.hasher.finalize()),
            },
            self.len,
        )
    }

    /// The hasher's state as bytes (hash state and length), so an interrupted transfer can be
    /// continued later without re-reading what was already hashed. The state says nothing
    /// about the bytes' correctness: only the final digest does.
    pub fn save_state(&self) -> Vec<u8> {
        use sha2::digest::common::hazmat::SerializableState;
        let mut out = self.len.to_le_bytes().to_vec();
        out.extend_from_slice(self.hasher.serialize().as_slice());
        out
    }

    /// A hasher restored from [`StreamHasher::save_state`]; `None` when the bytes are not a
    /// state this build wrote (then the caller starts the blob again).
    pub fn restore_state(bytes: &[u8]) -> Option<Self> {
        use sha2::digest::common::hazmat::{SerializableState, SerializedState};
        let (len, state) = bytes.split_at_checked(8)?;
        let len = u64::from_le_bytes(len.try_into().ok()?);
        let state = SerializedState::<Sha256>::try_from(state).ok()?;
        let hasher = Sha256::deserialize(&state).ok()?;
        Some(StreamHasher { hasher, len })
    }

    /// [`StreamHasher::save_state`] as base64, for JSON state files.
    pub fn encoded_state(&self) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(self.save_state())
    }

    /// A hasher from [`StreamHasher::encoded_state`] that has seen exactly `len` bytes; `None`
    /// otherwise (the caller starts the blob again).
    pub fn from_encoded_state(encoded: &str, len: u64) -> Option<Self> {
        use base64::Engine as _;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .ok()?;
        Self::restore_state(&bytes).filter(|h| h.len() == len)
    }

    /// Finishes and checks against what was expected.
    pub fn verify(self, what: &str, expected: &Digest, size: u64) -> Result<(), DigestMismatch> {
        let (actual, actual_size) = self.finish();
        if &actual == expected && actual_size == size {
            Ok(())
        } else {
            Err(DigestMismatch {
                what: what.to_string(),
                expected: expected.clone(),
                actual,
                expected_size: size,
                actual_size,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_of_empty_input_is_the_well_known_one() {
        assert_eq!(
            Digest::of(b"").to_string(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn malformed_and_foreign_digests_are_refused() {
        assert!(matches!(
            "sha256:abc".parse::<Digest>(),
            Err(DigestError::Malformed(_))
        ));
        assert!(matches!(
            "sha512:abc".parse::<Digest>(),
            Err(DigestError::Unsupported(_))
        ));
        assert!("SHA256:E3B0".parse::<Digest>().is_err());
    }

    #[test]
    fn saved_state_continues_the_same_digest() {
        let mut h = StreamHasher::new();
        h.update(&[7u8; 100_003]);
        let saved = h.save_state();
        let mut restored = StreamHasher::restore_state(&saved).expect("state restores");
        assert_eq!(restored.len(), 100_003);
        restored.update(b"tail");
        h.update(b"tail");
        assert_eq!(restored.finish(), h.finish());
        assert!(StreamHasher::restore_state(&saved[..20]).is_none());
    }

    #[test]
    fn stream_hasher_reports_expected_and_actual() {
        let mut h = StreamHasher::new();
        h.update(b"abc");
        let err = h.verify("blob x", &Digest::of(b"abd"), 3).unwrap_err();
        assert!(err.to_string().contains("blob x"));
        assert_eq!(err.actual, Digest::of(b"abc"));
    }
}
