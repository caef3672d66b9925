//! Pinning a release binary to its release, as `oc adm release extract --command` does: the
//! installer and `oc` are built with placeholders that `oc` overwrites while it copies the binary
//! out of the payload. `\0_RELEASE_IMAGE_LOCATION_\0` followed by 300 `X` and a NUL becomes the
//! release pullspec by digest and a NUL (at most 326 bytes); `\0_RELEASE_VERSION_LOCATION_\0`
//! followed by 64 `X` and a NUL becomes the release's version name. Only the first occurrence of
//! each is replaced, from the marker's first byte. An installer whose image marker is not there
//! (or is left as it was) falls back to the release compiled into it, so a binary without one is
//! refused by the caller.

use std::io::{self, Read, Write};

const IMAGE_PREFIX: &[u8] = b"\0_RELEASE_IMAGE_LOCATION_\0";
const VERSION_PREFIX: &[u8] = b"\0_RELEASE_VERSION_LOCATION_\0";

/// A placeholder and the value it receives.
#[derive(Clone, Debug)]
pub struct Replacement {
    /// What it is, for messages (`release image`).
    pub name: &'static str,
    marker: Vec<u8>,
    value: Vec<u8>,
}

fn marker(prefix: &[u8], padding: usize) -> Vec<u8> {
    let mut m = prefix.to_vec();
    m.extend(std::iter::repeat_n(b'X', padding));
    m.push(0);
    m
}

impl Replacement {
    /// The release image placeholder, to receive `pullspec`.
    pub fn release_image(pullspec: &str) -> io::Result<Self> {
        Self::new("release image", marker(IMAGE_PREFIX, 300), pullspec)
    }

    /// The release version placeholder, to receive `version`.
    pub fn release_version(version: &str) -> io::Result<Self> {
        Self::new("release version", marker(VERSION_PREFIX, 64), version)
    }

    fn new(name: &'static str, marker: Vec<u8>, value: &str) -> io::Result<Self> {
        if value.len() > marker.len() - 1 || value.as_bytes().contains(&0) {
            return Err(io::Error::other(format!(
                "the {name} value has {} bytes, but its placeholder holds at most {}",
                value.len(),
                marker.len() - 1
            )));
        }
        Ok(Replacement {
            name,
            marker,
            value: value.as_bytes().to_vec(),
        })
    }

    /// The bytes a binary holds once this replacement was made: the value and a NUL, then
    /// what is left of the placeholder.
    pub fn replaced(&self) -> Vec<u8> {
        let mut out = self.marker.clone();
        out[..self.value.len()].copy_from_slice(&self.value);
        out[self.value.len()] = 0;
        out
    }
}

/// Copies `r` to `w`, replacing the first occurrence of each placeholder (markers spanning
/// buffer boundaries included). Returns, per replacement, the offset where it was made.
pub fn copy_and_replace(
    r: &mut dyn Read,
    w: &mut dyn Write,
    replacements: &[Replacement],
) -> io::Result<Vec<Option<u64>>> {
    const BUF: usize = 1 << 20;
    let longest = replacements
        .iter()
        .map(|r| r.marker.len())
        .max()
        .unwrap_or(0);
    let mut found: Vec<Option<u64>> = vec![None; replacements.len()];
    let mut buf = vec![0u8; BUF + longest];
    // `kept` bytes at the start of `buf` are carried over from the last round, unwritten;
    // `base` is their offset in the file.
    let (mut kept, mut base) = (0usize, 0u64);
    loop {
        let n = crate::oci::layers::read_prefix(r, &mut buf[kept..kept + BUF])?;
        let end = kept + n;
        for (i, rep) in replacements.iter().enumerate() {
            if found[i].is_some() {
                continue;
            }
            if let Some(at) = find(&buf[..end], &rep.marker) {
                buf[at..at + rep.marker.len()].copy_from_slice(&rep.replaced());
                found[i] = Some(base + at as u64);
            }
        }
        if n == 0 {
            w.write_all(&buf[..end])?;
            return Ok(found);
        }
        // Keep the tail that could hold the start of a marker for the next round.
        let write_to = end.saturating_sub(longest.saturating_sub(1));
        w.write_all(&buf[..write_to])?;
        buf.copy_within(write_to..end, 0);
        kept = end - write_to;
        base += write_to as u64;
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || haystack.len() < needle.len() {
        return None;
    }
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Where an unmodified release image placeholder sits in `bytes`, if anywhere: a binary that
/// still has one was never pinned.
pub fn unpinned_marker(bytes: &[u8]) -> Option<usize> {
    find(bytes, &marker(IMAGE_PREFIX, 300))
}

/// The release image placeholder (unmodified), for building test binaries and lab stand-ins.
pub fn release_image_placeholder() -> Vec<u8> {
    marker(IMAGE_PREFIX, 300)
}

/// The release version placeholder (unmodified), for building test binaries and lab stand-ins.
pub fn release_version_placeholder() -> Vec<u8> {
    marker(VERSION_PREFIX, 64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PULLSPEC: &str = "registry.site:5000/ocp/openshift/release-images@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn binary(at: usize, len: usize) -> Vec<u8> {
        let mut b: Vec<u8> = (0..len).map(|i| (i % 251) as u8 + 1).collect();
        let m = release_image_placeholder();
        b.splice(at..at, m);
        b
    }

    /// The marker is replaced from its first byte with the pullspec and a NUL, the rest of the
    /// placeholder kept, the file otherwise byte for byte the same (also when the marker spans
    /// the copy buffer's boundary).
    #[test]
    fn the_release_image_marker_is_replaced_in_place() {
        for at in [0usize, 10, (1 << 20) - 5, (1 << 20) + 3] {
            let input = binary(at, (1 << 20) + 4096);
            let mut out = Vec::new();
            let rep = Replacement::release_image(PULLSPEC).unwrap();
            let found = copy_and_replace(&mut input.as_slice(), &mut out, &[rep]).unwrap();
            assert_eq!(found, vec![Some(at as u64)], "at {at}");
            assert_eq!(out.len(), input.len());
            assert_eq!(&out[at..at + PULLSPEC.len()], PULLSPEC.as_bytes());
            assert_eq!(out[at + PULLSPEC.len()], 0);
            assert_eq!(&out[..at], &input[..at]);
            let end = at + release_image_placeholder().len();
            assert_eq!(
                &out[at + PULLSPEC.len() + 1..end],
                &input[at + PULLSPEC.len() + 1..end]
            );
            assert_eq!(&out[end..], &input[end..]);
            assert_eq!(unpinned_marker(&out), None);
            assert_eq!(unpinned_marker(&input), Some(at));
        }
    }

    #[test]
    fn a_missing_marker_is_reported_and_a_long_value_refused() {
        let input = vec![7u8; 5000];
        let mut out = Vec::new();
        let rep = Replacement::release_image(PULLSPEC).unwrap();
        let found = copy_and_replace(&mut input.as_slice(), &mut out, &[rep]).unwrap();
        assert_eq!(found, vec![None]);
        assert_eq!(out, input);
        assert!(Replacement::release_image(&"x".repeat(327)).is_err());
        assert!(Replacement::release_image(&"x".repeat(326)).is_ok());
        assert!(Replacement::release_version(&"4".repeat(93)).is_err());
        assert!(Replacement::release_version(&"4".repeat(92)).is_ok());
    }
}
