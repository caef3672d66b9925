//! Manifests and indexes as they travel: kept as the exact bytes the registry served (so digests
//! never change), parsed only to learn what they reference. Docker schema2 and OCI media types.

use super::digest::Digest;
use bytes::Bytes;
pub use oci_client::manifest::{
    ImageIndexEntry, OciDescriptor, OciImageIndex, OciImageManifest,
    IMAGE_MANIFEST_LIST_MEDIA_TYPE, IMAGE_MANIFEST_MEDIA_TYPE, OCI_IMAGE_INDEX_MEDIA_TYPE,
    OCI_IMAGE_MEDIA_TYPE,
};

/// Every manifest type we copy, for the `Accept` header. Distribution converts a schema2
/// manifest to schema1 (a new digest) when the client does not list schema2, so always send all.
pub const ACCEPT: &str = "application/vnd.oci.image.index.v1+json, \
application/vnd.docker.distribution.manifest.list.v2+json, \
application/vnd.oci.image.manifest.v1+json, \
application/vnd.docker.distribution.manifest.v2+json";

/// Distribution caps manifest bodies at 4 MiB; anything larger is not a manifest.
pub const MAX_MANIFEST_BYTES: usize = 4 * 1024 * 1024;

/// A manifest's bytes with the media type and digest they were served under.
#[derive(Clone, Debug)]
pub struct RawManifest {
    /// The exact bytes.
    pub bytes: Bytes,
    /// The media type (from the body's `mediaType`, else the response's `Content-Type`).
    pub media_type: String,
    /// sha256 of `bytes`.
    pub digest: Digest,
}

/// What a manifest is, once parsed.
#[derive(Clone, Debug)]
pub enum Parsed {
    /// A single-platform image: config plus layers.
    Image(Box<OciImageManifest>),
    /// An index or manifest list of per-platform images.
    Index(OciImageIndex),
}

/// Why manifest bytes cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// A media type we do not copy (schema1, or not a manifest at all).
    #[error("unsupported manifest media type '{0}': bootstrap copies Docker schema2 and OCI manifests and indexes")]
    Unsupported(String),
    /// Bytes that do not parse as the media type they claim.
    #[error("manifest {digest} is not valid {media_type}: {source}")]
    Invalid {
        /// Digest of the bytes.
        digest: Digest,
        /// Claimed media type.
        media_type: String,
        /// Parse error.
        source: serde_json::Error,
    },
}

#[derive(serde::Deserialize)]
struct MediaTypeOnly {
    #[serde(rename = "mediaType")]
    media_type: Option<String>,
}

impl RawManifest {
    /// Wraps bytes; `content_type` is the media type the registry or layout gave for them.
    pub fn new(bytes: Bytes, content_type: Option<&str>) -> Self {
        let digest = Digest::of(&bytes);
        let body_type = serde_json::from_slice::<MediaTypeOnly>(&bytes)
            .ok()
            .and_then(|m| m.media_type);
        let media_type = body_type
            .or_else(|| content_type.map(|c| c.split(';').next().unwrap_or(c).trim().to_string()))
            .unwrap_or_default();
        RawManifest {
            bytes,
            media_type,
            digest,
        }
    }

    /// True for an index or manifest list.
    pub fn is_index(&self) -> bool {
        is_index_type(&self.media_type)
    }

    /// Parses the bytes according to their media type.
    pub fn parse(&self) -> Result<Parsed, ManifestError> {
        let invalid = |source| ManifestError::Invalid {
            digest: self.digest.clone(),
            media_type: self.media_type.clone(),
            source,
        };
        match self.media_type.as_str() {
            OCI_IMAGE_INDEX_MEDIA_TYPE | IMAGE_MANIFEST_LIST_MEDIA_TYPE => {
                serde_json::from_slice(&self.bytes)
                    .map(Parsed::Index)
                    .map_err(invalid)
            }
            OCI_IMAGE_MEDIA_TYPE | IMAGE_MANIFEST_MEDIA_TYPE => serde_json::from_slice(&self.bytes)
                .map(|m| Parsed::Image(Box::new(m)))
                .map_err(invalid),
            other => Err(ManifestError::Unsupported(other.to_string())),
        }
    }
}

/// True for the two index media types.
pub fn is_index_type(media_type: &str) -> bool {
    media_type == OCI_IMAGE_INDEX_MEDIA_TYPE || media_type == IMAGE_MANIFEST_LIST_MEDIA_TYPE
}

/// `os/arch[/variant]` of an index entry, or `None` when the entry names no platform.
pub fn platform_of(entry: &ImageIndexEntry) -> Option<String> {
    entry.platform.as_ref().map(|p| {
        let mut s = format!("{}/{}", p.os, p.architecture);
        if let Some(v) = &p.variant {
            s.push('/');
            s.push_str(v);
        }
        s
    })
}

/// The architecture of an index entry.
pub fn arch_of(entry: &ImageIndexEntry) -> Option<String> {
    entry.platform.as_ref().map(|p| p.architecture.to_string())
}

/// Which entries of an index to copy for the wanted architectures (on any OS; `multi` keeps
/// every one): [`super::platform::PlatformFilter::select`] for architectures.
pub fn select_entries<'a>(
    index: &'a OciImageIndex,
    architectures: &[String],
) -> Vec<&'a ImageIndexEntry> {
    super::platform::PlatformFilter::architectures(architectures, "")
        .select(index)
        .kept
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(arches: &[&str]) -> RawManifest {
        let manifests: Vec<serde_json::Value> = arches
            .iter()
            .enumerate()
            .map(|(i, a)| {
                serde_json::json!({
                    "mediaType": OCI_IMAGE_MEDIA_TYPE,
                    "digest": Digest::of(&[i as u8]).to_string(),
                    "size": 10,
                    "platform": {"architecture": a, "os": "linux"}
                })
            })
            .collect();
        let body = serde_json::json!({"schemaVersion": 2, "mediaType": OCI_IMAGE_INDEX_MEDIA_TYPE, "manifests": manifests});
        RawManifest::new(Bytes::from(serde_json::to_vec(&body).unwrap()), None)
    }

    #[test]
    fn index_is_filtered_by_architecture() {
        let raw = index(&["amd64", "arm64", "s390x"]);
        let Parsed::Index(idx) = raw.parse().unwrap() else {
            panic!("not an index")
        };
        let kept = select_entries(&idx, &["amd64".to_string()]);
        assert_eq!(kept.len(), 1);
        assert_eq!(platform_of(kept[0]).unwrap(), "linux/amd64");
        assert_eq!(select_entries(&idx, &["multi".to_string()]).len(), 3);
    }

    #[test]
    fn schema1_is_refused_by_name() {
        let raw = RawManifest::new(
            Bytes::from_static(b"{\"schemaVersion\":1}"),
            Some("application/vnd.docker.distribution.manifest.v1+prettyjws"),
        );
        let err = raw.parse().unwrap_err().to_string();
        assert!(err.contains("v1+prettyjws"), "{err}");
    }

    #[test]
    fn media_type_falls_back_to_content_type() {
        let raw = RawManifest::new(
            Bytes::from_static(b"{\"schemaVersion\":2,\"config\":{\"mediaType\":\"x\",\"digest\":\"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\",\"size\":0},\"layers\":[]}"),
            Some("application/vnd.oci.image.manifest.v1+json; charset=utf-8"),
        );
        assert_eq!(raw.media_type, OCI_IMAGE_MEDIA_TYPE);
        assert!(matches!(raw.parse().unwrap(), Parsed::Image(_)));
    }
}
