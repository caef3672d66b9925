//! `mirror.platform.graph: true`: the update graph data image, built as oc-mirror v2 builds it
//! (see [`crate::openshift::graph_data`]): the graph data tarball (`--graph-data-url`) as one
//! layer on every platform of the base image (`--graph-base-image`), pushed as
//! `<prefix>/openshift/graph-image:latest`. The UpdateService that names it is written with the
//! cluster resources.

use super::content::rebuild_image;
use super::helm::fetch;
use super::plan::{self, Placement, ResolvedImage, Source};
use crate::oci::digest::Digest;
use crate::oci::platform::PlatformFilter;
use crate::oci::reference::ImageRef;
use crate::oci::registry::Registries;
use crate::openshift::cluster::Category;
use crate::openshift::graph_data;
use anyhow::{Context, Result};
use std::sync::Arc;

/// The graph data image built, for reports.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphInfo {
    /// Where the graph data came from.
    pub data_url: String,
    /// sha256 of the graph data tarball.
    pub data_sha256: String,
    /// The base image it was layered on.
    pub base_image: String,
    /// The new layer's digest.
    pub layer: String,
    /// The image's repository and tag under the destination prefix.
    pub destination: String,
}

/// Builds the graph data image from `data_url` on `base_image`.
pub async fn build(
    regs: &Arc<Registries>,
    data_url: &str,
    base_image: &str,
) -> Result<(ResolvedImage, GraphInfo)> {
    let what = "the update graph data (--graph-data-url; on an air-gapped side pass file://graph-data.tar.gz)";
    let data = fetch(regs, data_url, graph_data::MAX_GRAPH_DATA_BYTES)
        .await
        .with_context(|| format!("fetching {what}"))?;
    let layer = graph_data::graph_layer(&data)
        .with_context(|| format!("reading {}", crate::secret::redact_url(data_url)))?;
    let base = ImageRef::parse(base_image)
        .map_err(|e| anyhow::anyhow!("--graph-base-image '{base_image}': {}", e.reason))?;
    let source = Source::Registry(regs.clone());
    // Every platform of the base, as oc-mirror rebuilds it.
    let resolved = plan::resolve(&source, &base, None, &PlatformFilter::all(), None)
        .await
        .with_context(|| format!("resolving the graph image's base {base} (--graph-base-image)"))?;
    let mut image = rebuild_image(
        &super::plan::Source::Registry(regs.clone()),
        &resolved,
        &layer,
        None,
        &graph_data::rewrite(),
    )
    .await
    .with_context(|| format!("building the graph data image on {base}"))?;
    image.placement = Placement {
        repository: Some(graph_data::GRAPH_IMAGE_REPO.to_string()),
        tag: Some(graph_data::GRAPH_IMAGE_TAG.to_string()),
        category: Category::Graph,
    };
    let info = GraphInfo {
        data_url: crate::secret::redact_url(data_url),
        data_sha256: Digest::of(&data).hex().to_string(),
        base_image: base.to_string(),
        layer: layer.digest.to_string(),
        destination: format!(
            "{}:{}",
            graph_data::GRAPH_IMAGE_REPO,
            graph_data::GRAPH_IMAGE_TAG
        ),
    };
    Ok((image, info))
}
