//! Which children of a multi-platform index a mirror keeps, per image, as oc-mirror v2 applies
//! its filters: `mirror.platform.architectures` (an architecture on any OS) for releases, and
//! `platforms: [{os, architecture}]` lists (an OS and architecture pair) for releases, catalogs
//! and additional images. Pairs match as containers/image matches `InstancePlatforms`: OS and
//! architecture exactly, every variant, and each pair must match at least one child. No filter
//! keeps the index whole (oc-mirror's default for operator and additional images), so its
//! digest stays the one CSVs and users pin.

use super::manifest::{arch_of, ImageIndexEntry, OciImageIndex};
use std::collections::BTreeSet;
use std::fmt;

/// One platform a filter keeps.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WantedPlatform {
    /// The OS, when the filter names one (`platforms` lists); `None`: any OS
    /// (`mirror.platform.architectures`).
    pub os: Option<String>,
    /// The architecture (`amd64`, `arm64`, ...).
    pub architecture: String,
}

impl WantedPlatform {
    fn matches(&self, entry: &ImageIndexEntry) -> bool {
        entry.platform.as_ref().is_some_and(|p| {
            p.architecture.to_string() == self.architecture
                && self.os.as_ref().is_none_or(|os| p.os.to_string() == *os)
        })
    }
}

impl fmt::Display for WantedPlatform {
    /// `linux/arm64` for a pair, `arm64` for an architecture on any OS.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.os {
            Some(os) => write!(f, "{os}/{}", self.architecture),
            None => f.write_str(&self.architecture),
        }
    }
}

/// Which children of an index to keep: every one, or those matching a set of platforms.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PlatformFilter {
    /// `None`: every child, the index whole.
    wanted: Option<BTreeSet<WantedPlatform>>,
    /// The configuration fields that asked for it (`mirror.operators[0].platforms`), for
    /// messages.
    from: BTreeSet<String>,
}

/// The entries of an index a filter keeps, and the pairs it asked for that the index lacks.
#[derive(Debug)]
pub struct Selected<'a> {
    /// Entries to copy, in index order.
    pub kept: Vec<&'a ImageIndexEntry>,
    /// `os/arch` pairs the filter names that no entry matches.
    pub missing: Vec<String>,
}

impl PlatformFilter {
    /// Every platform: the index is copied whole.
    pub fn all() -> Self {
        Self::default()
    }

    /// `architectures` on any OS, asked for by `from`; `multi` (or none) keeps every platform.
    pub fn architectures(architectures: &[String], from: &str) -> Self {
        if architectures.is_empty() || architectures.iter().any(|a| a == "multi") {
            return Self::all();
        }
        Self::of(
            architectures.iter().map(|a| WantedPlatform {
                os: None,
                architecture: a.clone(),
            }),
            from,
        )
    }

    /// `(os, architecture)` pairs asked for by `from`; none keeps every platform.
    pub fn pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>, from: &str) -> Self {
        Self::of(
            pairs.into_iter().map(|(os, arch)| WantedPlatform {
                os: Some(os.to_string()),
                architecture: arch.to_string(),
            }),
            from,
        )
    }

    fn of(wanted: impl Iterator<Item = WantedPlatform>, from: &str) -> Self {
        let wanted: BTreeSet<WantedPlatform> = wanted.collect();
        if wanted.is_empty() {
            return Self::all();
        }
        PlatformFilter {
            wanted: Some(wanted),
            from: BTreeSet::from([from.to_string()]),
        }
    }

    /// True when every platform is kept.
    pub fn is_all(&self) -> bool {
        self.wanted.is_none()
    }

    /// What two uses of one image ask for together: every platform either keeps. An image
    /// one entry wants whole is mirrored whole.
    pub fn union(&self, other: &PlatformFilter) -> PlatformFilter {
        match (&self.wanted, &other.wanted) {
            (Some(a), Some(b)) => PlatformFilter {
                wanted: Some(a.union(b).cloned().collect()),
                from: self.from.union(&other.from).cloned().collect(),
            },
            _ => Self::all(),
        }
    }

    /// The platforms kept, as written (`amd64`, `linux/arm64`); empty for every platform.
    pub fn describe(&self) -> Vec<String> {
        self.wanted
            .iter()
            .flatten()
            .map(ToString::to_string)
            .collect()
    }

    /// The configuration fields that asked for this filter, joined (empty for none).
    pub fn origin(&self) -> String {
        self.from.iter().cloned().collect::<Vec<_>>().join(", ")
    }

    /// A stable name of what the filter keeps (the origin left out), for cache keys.
    pub fn key(&self) -> String {
        match self.wanted {
            None => "all".to_string(),
            Some(_) => self.describe().join(","),
        }
    }

    /// The entries of `index` to copy. Entries that name no platform are kept (artifacts of
    /// the whole index); attestation manifests (`unknown/unknown`) only beside the image they
    /// describe.
    pub fn select<'a>(&self, index: &'a OciImageIndex) -> Selected<'a> {
        let Some(wanted) = &self.wanted else {
            return Selected {
                kept: index.manifests.iter().collect(),
                missing: Vec::new(),
            };
        };
        let is_attestation = |e: &ImageIndexEntry| arch_of(e).as_deref() == Some("unknown");
        let kept: Vec<&ImageIndexEntry> = index
            .manifests
            .iter()
            .filter(|e| {
                !is_attestation(e) && (e.platform.is_none() || wanted.iter().any(|w| w.matches(e)))
            })
            .collect();
        let describes_kept = |e: &ImageIndexEntry| {
            e.annotations
                .as_ref()
                .and_then(|a| a.get("vnd.docker.reference.digest"))
                .is_some_and(|d| kept.iter().any(|k| &k.digest == d))
        };
        let mut out = kept.clone();
        out.extend(
            index
                .manifests
                .iter()
                .filter(|e| is_attestation(e) && describes_kept(e)),
        );
        out.sort_by_key(|e| {
            index
                .manifests
                .iter()
                .position(|m| std::ptr::eq(m, *e))
                .unwrap_or(usize::MAX)
        });
        let missing = wanted
            .iter()
            .filter(|w| w.os.is_some() && !index.manifests.iter().any(|e| w.matches(e)))
            .map(ToString::to_string)
            .collect();
        Selected { kept: out, missing }
    }
}

impl fmt::Display for PlatformFilter {
    /// `every platform`, or the platforms kept (`linux/arm64, linux/amd64`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_all() {
            f.write_str("every platform")
        } else {
            f.write_str(&self.describe().join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oci::digest::Digest;
    use crate::oci::manifest::{platform_of, Parsed, RawManifest, OCI_IMAGE_MEDIA_TYPE};
    use bytes::Bytes;

    fn index(platforms: &[(&str, &str, Option<&str>)]) -> OciImageIndex {
        let manifests: Vec<serde_json::Value> = platforms
            .iter()
            .enumerate()
            .map(|(i, (os, arch, variant))| {
                let mut p = serde_json::json!({"architecture": arch, "os": os});
                if let Some(v) = variant {
                    p["variant"] = serde_json::json!(v);
                }
                serde_json::json!({
                    "mediaType": OCI_IMAGE_MEDIA_TYPE,
                    "digest": Digest::of(&[i as u8]).to_string(),
                    "size": 10,
                    "platform": p,
                })
            })
            .collect();
        let body = serde_json::json!({"schemaVersion": 2, "mediaType": crate::oci::manifest::OCI_IMAGE_INDEX_MEDIA_TYPE, "manifests": manifests});
        let raw = RawManifest::new(Bytes::from(serde_json::to_vec(&body).unwrap()), None);
        match raw.parse().unwrap() {
            Parsed::Index(i) => i,
            Parsed::Image(_) => panic!("not an index"),
        }
    }

    fn kept(filter: &PlatformFilter, idx: &OciImageIndex) -> Vec<String> {
        filter
            .select(idx)
            .kept
            .iter()
            .filter_map(|e| platform_of(e))
            .collect()
    }

    #[test]
    fn no_filter_keeps_the_index_whole() {
        let idx = index(&[("linux", "amd64", None), ("linux", "arm64", None)]);
        assert_eq!(kept(&PlatformFilter::all(), &idx).len(), 2);
        let multi =
            PlatformFilter::architectures(&["multi".into()], "mirror.platform.architectures");
        assert!(multi.is_all());
        assert_eq!(PlatformFilter::pairs([], "x"), PlatformFilter::all());
    }

    #[test]
    fn architectures_match_any_os_and_pairs_match_both() {
        let idx = index(&[
            ("linux", "amd64", None),
            ("windows", "amd64", None),
            ("linux", "arm64", Some("v8")),
            ("linux", "s390x", None),
        ]);
        let arch = PlatformFilter::architectures(&["amd64".into()], "a");
        assert_eq!(kept(&arch, &idx), ["linux/amd64", "windows/amd64"]);
        // Every variant of the pair's architecture, as containers/image selects them.
        let pairs = PlatformFilter::pairs([("linux", "amd64"), ("linux", "arm64")], "p");
        assert_eq!(kept(&pairs, &idx), ["linux/amd64", "linux/arm64/v8"]);
        assert!(pairs.select(&idx).missing.is_empty());
    }

    /// A pair the index does not offer is reported (oc-mirror fails such an image); an
    /// architecture on any OS is not.
    #[test]
    fn a_pair_the_index_lacks_is_missing() {
        let idx = index(&[("linux", "amd64", None)]);
        let pairs = PlatformFilter::pairs([("linux", "amd64"), ("linux", "ppc64le")], "p");
        assert_eq!(pairs.select(&idx).missing, ["linux/ppc64le"]);
        let arch = PlatformFilter::architectures(&["amd64".into(), "ppc64le".into()], "a");
        assert!(arch.select(&idx).missing.is_empty());
    }

    #[test]
    fn union_widens_and_whole_wins() {
        let a = PlatformFilter::pairs([("linux", "amd64")], "mirror.operators[0].platforms");
        let b = PlatformFilter::pairs([("linux", "arm64")], "mirror.additionalImages[1].platforms");
        let u = a.union(&b);
        assert_eq!(u.describe(), ["linux/amd64", "linux/arm64"]);
        assert_eq!(
            u.origin(),
            "mirror.additionalImages[1].platforms, mirror.operators[0].platforms"
        );
        assert!(a.union(&PlatformFilter::all()).is_all());
        assert_eq!(u.key(), "linux/amd64,linux/arm64");
        assert_eq!(PlatformFilter::all().key(), "all");
    }
}
