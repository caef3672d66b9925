//! A chart as the OCI artifact `helm push` makes, byte for byte and annotation for annotation,
//! so `helm pull oci://MIRROR/PATH/NAME --version V` takes it from the mirror.

use super::chart::{scalar, Chart};
use crate::oci::digest::Digest;
use crate::oci::manifest::RawManifest;
use anyhow::Result;
use bytes::Bytes;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// The media type of a Helm chart's OCI config (Chart.yaml as JSON).
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.cncf.helm.config.v1+json";
/// The media type of a Helm chart's OCI layer (the chart `.tgz`).
pub const CHART_MEDIA_TYPE: &str = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";
/// An OCI image manifest, as `helm push` writes it.
const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

/// A chart as the OCI artifact `helm push` writes: config (Chart.yaml as JSON), one layer
/// (the archive, byte for byte), and an OCI image manifest naming both, annotated as Helm
/// annotates it (title, version, description, url, source; no creation time, so the same
/// chart always gives the same digest).
#[derive(Clone, Debug)]
pub struct ChartArtifact {
    /// The manifest.
    pub manifest: RawManifest,
    /// The config blob and its digest.
    pub config: (Digest, Bytes),
    /// The chart archive and its digest.
    pub chart: (Digest, Bytes),
}

/// Packs `chart` (read from `tgz`) as [`ChartArtifact`].
pub fn chart_artifact(chart: &Chart, tgz: Bytes) -> Result<ChartArtifact> {
    let config = Bytes::from(serde_json::to_vec(&chart.metadata)?);
    let config_digest = Digest::of(&config);
    let chart_digest = Digest::of(&tgz);
    let mut annotations = BTreeMap::new();
    let meta = &chart.metadata;
    for (key, field) in [
        ("org.opencontainers.image.title", "name"),
        ("org.opencontainers.image.version", "version"),
        ("org.opencontainers.image.description", "description"),
        ("org.opencontainers.image.url", "home"),
    ] {
        if let Some(v) = meta
            .get(field)
            .and_then(scalar)
            .filter(|s| !s.trim().is_empty())
        {
            annotations.insert(key.to_string(), v);
        }
    }
    if let Some(src) = meta["sources"].get(0).and_then(Value::as_str) {
        annotations.insert("org.opencontainers.image.source".into(), src.to_string());
    }
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {
            "mediaType": CONFIG_MEDIA_TYPE,
            "digest": config_digest.to_string(),
            "size": config.len(),
        },
        "layers": [{
            "mediaType": CHART_MEDIA_TYPE,
            "digest": chart_digest.to_string(),
            "size": tgz.len(),
        }],
        "annotations": annotations,
    });
    let bytes = Bytes::from(serde_json::to_vec(&manifest)?);
    Ok(ChartArtifact {
        manifest: RawManifest::new(bytes, Some(OCI_MANIFEST)),
        config: (config_digest, config),
        chart: (chart_digest, tgz),
    })
}

/// The tag `helm push` gives a chart version: OCI tags cannot hold `+`, so Helm writes `_`.
pub fn version_tag(version: &str) -> String {
    version.replace('+', "_")
}

#[cfg(test)]
mod tests {
    use super::super::chart::{read_chart, tests::tgz};
    use super::*;

    #[test]
    fn the_artifact_is_helms_and_deterministic() {
        let archive = Bytes::from(tgz(
            "kai",
            &[("Chart.yaml", "name: kai\nversion: 1.0.0+build.1\n")],
        ));
        let chart = read_chart(&archive).unwrap();
        let a = chart_artifact(&chart, archive.clone()).unwrap();
        let b = chart_artifact(&chart, archive.clone()).unwrap();
        assert_eq!(a.manifest.digest, b.manifest.digest);
        let m: Value = serde_json::from_slice(&a.manifest.bytes).unwrap();
        assert_eq!(m["config"]["mediaType"], CONFIG_MEDIA_TYPE);
        assert_eq!(m["layers"][0]["mediaType"], CHART_MEDIA_TYPE);
        assert_eq!(m["layers"][0]["digest"], Digest::of(&archive).to_string());
        assert_eq!(m["annotations"]["org.opencontainers.image.title"], "kai");
        assert_eq!(version_tag(chart.version()), "1.0.0_build.1");
    }
}
