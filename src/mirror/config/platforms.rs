//! What each part of a configuration keeps of a multi-arch index: the release payloads, each
//! catalog and each additional image read their own `platforms`/`architectures`, as oc-mirror
//! v2 reads them, and the update graph's architectures follow from those.

use super::{ImageSetConfig, DEFAULT_ARCHITECTURE};
use crate::oci::platform::PlatformFilter as IndexFilter;

impl ImageSetConfig {
    /// The architectures to keep of multi-arch indexes: `mirror.platform.architectures` as
    /// written, or `["amd64"]` when it is empty (oc-mirror's default). `multi` means "keep
    /// every platform"; the caller interprets it.
    pub fn architectures(&self) -> Vec<String> {
        if self.mirror.platform.architectures.is_empty() {
            vec![DEFAULT_ARCHITECTURE.to_string()]
        } else {
            self.mirror.platform.architectures.clone()
        }
    }

    /// The architectures whose update graphs release channels are read from:
    /// [`Self::architectures`], or `multi` alone when `mirror.platform.platforms` filters the
    /// multi-arch payload (as oc-mirror v2 does) or `architectures` keeps every one.
    pub fn graph_architectures(&self) -> Vec<String> {
        let arches = self.architectures();
        if !self.mirror.platform.platforms.is_empty() || arches.iter().any(|a| a == "multi") {
            vec!["multi".to_string()]
        } else {
            arches
        }
    }

    /// What release payloads and their components keep of a multi-arch index:
    /// `mirror.platform.platforms` (os/architecture pairs), else [`Self::architectures`] on
    /// any OS (`multi`: every platform). The two are exclusive (validation refuses both).
    pub fn release_platforms(&self) -> IndexFilter {
        let p = &self.mirror.platform;
        if p.platforms.is_empty() {
            IndexFilter::architectures(&self.architectures(), "mirror.platform.architectures")
        } else {
            IndexFilter::pairs(
                p.platforms
                    .iter()
                    .map(|f| (f.os.as_str(), f.architecture.as_str())),
                "mirror.platform.platforms",
            )
        }
    }

    /// The CoreOS stream architecture keys whose KubeVirt container disk
    /// `platform.kubeVirtContainer` mirrors, as oc-mirror v2 maps them
    /// (`requestedKubeVirtArchKeys`, internal/pkg/release/local_stored_collector.go): `x86_64`
    /// by default; `mirror.platform.architectures` with `amd64` as `x86_64`, `s390x` as itself and
    /// `multi` as both, any other skipped with a warning; `mirror.platform.platforms` mapped
    /// likewise, and every key the stream has (`None`) when none of them maps.
    pub fn kubevirt_arch_keys(&self) -> (Option<Vec<String>>, Vec<String>) {
        fn key(arch: &str) -> Option<&'static [&'static str]> {
            match arch {
                "amd64" => Some(&["x86_64"]),
                "s390x" => Some(&["s390x"]),
                "multi" => Some(&["x86_64", "s390x"]),
                _ => None,
            }
        }
        let p = &self.mirror.platform;
        let mut keys: Vec<String> = Vec::new();
        let mut add = |k: &[&str]| {
            for k in k {
                if !keys.iter().any(|have| have == k) {
                    keys.push(k.to_string());
                }
            }
        };
        let mut warnings = Vec::new();
        if !p.platforms.is_empty() {
            for f in &p.platforms {
                if let Some(k) = key(&f.architecture) {
                    add(k);
                }
            }
            return ((!keys.is_empty()).then_some(keys), warnings);
        }
        for arch in self.architectures() {
            match key(&arch) {
                Some(k) => add(k),
                None => warnings.push(format!(
                    "kubevirt: no bootimages key for architecture \"{arch}\" — skipping"
                )),
            }
        }
        (Some(keys), warnings)
    }

    /// What `mirror.operators[index]`'s catalog image, bundles and related images keep: its
    /// `platforms`, else every platform (oc-mirror v2's default: digests stay those CSVs pin).
    pub fn catalog_platforms(&self, index: usize) -> IndexFilter {
        self.mirror
            .operators
            .get(index)
            .map_or_else(IndexFilter::all, |op| {
                IndexFilter::pairs(
                    op.platforms
                        .iter()
                        .map(|f| (f.os.as_str(), f.architecture.as_str())),
                    &format!("mirror.operators[{index}].platforms"),
                )
            })
    }

    /// What `mirror.additionalImages[index]` keeps: its `platforms`, else every platform
    /// (oc-mirror v2's default: the digest stays the one users pin).
    pub fn image_platforms(&self, index: usize) -> IndexFilter {
        self.mirror
            .additional_images
            .get(index)
            .map_or_else(IndexFilter::all, |img| {
                IndexFilter::pairs(
                    img.platforms
                        .iter()
                        .map(|f| (f.os.as_str(), f.architecture.as_str())),
                    &format!("mirror.additionalImages[{index}].platforms"),
                )
            })
    }
}
