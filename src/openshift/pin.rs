//! Pinning a release binary to its release, as `oc adm release extract --command` does
//! (openshift/oc `pkg/cli/admin/release/extract_tools.go`): the installer and `oc` are built with
//! placeholders that `oc` overwrites while it copies the binary out of the payload. Each
//! placeholder is a NUL, its name, a NUL, a run of `X` and a NUL:
//! `\0_RELEASE_IMAGE_LOCATION_\0` and 300 `X` receives the release pullspec by digest,
//! `\0_RELEASE_VERSION_LOCATION_\0` and 64 `X` the release's version name, and
//! `\0_RELEASE_ARCHITECTURE_LOCATION_\0` and 64 `X` its platform (`linux/amd64`, or
//! `multi (linux/amd64)` for a release given as an index). Only the first occurrence of each is
//! replaced, from the marker's first byte, with the value and a NUL. oc keeps its own copy of
//! each marker with a `!` for the leading NUL, so that the `oc` binary, which carries those
//! constants, never matches itself; [`Marker::search_constant`] is that form.
//!
//! Which markers oc fills depends on the binary ([`Marker`] lists, per target, what
//! `extract_tools.go` injects): `oc` gets the version only; `openshift-install` and
//! `openshift-baremetal-install` get the image, the version and the architecture. An installer
//! whose image marker is not there falls back to the release compiled into it, so the caller
//! refuses one.

use std::io::{self, Read, Write};

/// A release placeholder oc knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Marker {
    /// `_RELEASE_IMAGE_LOCATION_`, 300 bytes: the release pullspec by digest.
    ReleaseImage,
    /// `_RELEASE_VERSION_LOCATION_`, 64 bytes: the release version.
    ReleaseVersion,
    /// `_RELEASE_ARCHITECTURE_LOCATION_`, 64 bytes: the release platform.
    ReleaseArchitecture,
}

impl Marker {
    /// What it holds, for messages (`release image`), as oc names it.
    pub fn name(self) -> &'static str {
        match self {
            Marker::ReleaseImage => "release image",
            Marker::ReleaseVersion => "release version",
            Marker::ReleaseArchitecture => "release architecture",
        }
    }

    fn parts(self) -> (&'static [u8], usize) {
        match self {
            Marker::ReleaseImage => (b"_RELEASE_IMAGE_LOCATION_", 300),
            Marker::ReleaseVersion => (b"_RELEASE_VERSION_LOCATION_", 64),
            Marker::ReleaseArchitecture => (b"_RELEASE_ARCHITECTURE_LOCATION_", 64),
        }
    }

    /// The placeholder as a binary carries it, unmodified.
    pub fn placeholder(self) -> Vec<u8> {
        self.with_first(0)
    }

    /// The constant oc itself carries to search for the placeholder: the same bytes with `!`
    /// for the leading NUL, so that it never matches (oc swaps the `!` for a NUL at run time).
    pub fn search_constant(self) -> Vec<u8> {
        self.with_first(b'!')
    }

    fn with_first(self, first: u8) -> Vec<u8> {
        let (name, padding) = self.parts();
        let mut m = vec![first];
        m.extend_from_slice(name);
        m.push(0);
        m.extend(std::iter::repeat_n(b'X', padding));
        m.push(0);
        m
    }
}

/// A placeholder and the value it receives.
#[derive(Clone, Debug)]
pub struct Replacement {
    /// Which placeholder.
    pub marker: Marker,
    placeholder: Vec<u8>,
    value: Vec<u8>,
}

impl Replacement {
    /// The release image placeholder, to receive `pullspec`.
    pub fn release_image(pullspec: &str) -> io::Result<Self> {
        Self::new(Marker::ReleaseImage, pullspec)
    }

    /// The release version placeholder, to receive `version`.
    pub fn release_version(version: &str) -> io::Result<Self> {
        Self::new(Marker::ReleaseVersion, version)
    }

    /// `marker`, to receive `value` (at most the placeholder's length less one byte, no NUL).
    pub fn new(marker: Marker, value: &str) -> io::Result<Self> {
        let placeholder = marker.placeholder();
        if value.len() > placeholder.len() - 1 || value.as_bytes().contains(&0) {
            return Err(io::Error::other(format!(
                "the {} value has {} bytes, but its placeholder holds at most {}",
                marker.name(),
                value.len(),
                placeholder.len() - 1
            )));
        }
        Ok(Replacement {
            marker,
            placeholder,
            value: value.as_bytes().to_vec(),
        })
    }

    /// The value it writes.
    pub fn value(&self) -> &str {
        std::str::from_utf8(&self.value).unwrap_or_default()
    }

    /// The bytes a binary holds once this replacement was made: the value and a NUL, then
    /// what is left of the placeholder.
    pub fn replaced(&self) -> Vec<u8> {
        let mut out = self.placeholder.clone();
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
        .map(|r| r.placeholder.len())
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
            if let Some(at) = find(&buf[..end], &rep.placeholder) {
                buf[at..at + rep.placeholder.len()].copy_from_slice(&rep.replaced());
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
    find(bytes, &Marker::ReleaseImage.placeholder())
}

/// The release image placeholder (unmodified), for building test binaries and lab stand-ins.
pub fn release_image_placeholder() -> Vec<u8> {
    Marker::ReleaseImage.placeholder()
}

/// The release version placeholder (unmodified), for building test binaries and lab stand-ins.
pub fn release_version_placeholder() -> Vec<u8> {
    Marker::ReleaseVersion.placeholder()
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

    /// The three markers as oc defines them (`extract_tools.go`: 300, 64 and 64 `X`), and an
    /// `oc` binary that carries oc's own search constants (`!` first) besides its version
    /// placeholder: only the placeholder is rewritten, the constants stay as they were.
    #[test]
    fn oc_s_own_search_constants_never_match() {
        assert_eq!(
            Marker::ReleaseImage.placeholder().len(),
            1 + 24 + 1 + 300 + 1
        );
        assert_eq!(
            Marker::ReleaseVersion.placeholder().len(),
            1 + 26 + 1 + 64 + 1
        );
        assert_eq!(
            Marker::ReleaseArchitecture.placeholder().len(),
            1 + 31 + 1 + 64 + 1
        );
        let mut oc = b"ELF...".to_vec();
        for m in [
            Marker::ReleaseImage,
            Marker::ReleaseVersion,
            Marker::ReleaseArchitecture,
        ] {
            oc.extend(m.search_constant());
        }
        let at = oc.len();
        oc.extend(Marker::ReleaseVersion.placeholder());
        oc.extend(b"...rest");
        let reps = [
            Replacement::release_image(PULLSPEC).unwrap(),
            Replacement::release_version("4.18.3").unwrap(),
            Replacement::new(Marker::ReleaseArchitecture, "linux/amd64").unwrap(),
        ];
        let mut out = Vec::new();
        let found = copy_and_replace(&mut oc.as_slice(), &mut out, &reps).unwrap();
        assert_eq!(found, vec![None, Some(at as u64), None]);
        assert_eq!(&out[..at], &oc[..at]);
        assert_eq!(&out[at..at + 7], b"4.18.3\0");
        assert_eq!(unpinned_marker(&oc), None, "oc has no image placeholder");
    }
}
