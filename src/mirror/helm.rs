//! `mirror.helm`: charts from Helm repositories (`index.yaml` over HTTP), from OCI registries
//! (`oci://` repository URLs) and from local archives, mirrored as OCI artifacts with the images
//! they reference ([`crate::openshift::helm`] finds them).
//!
//! Where a chart lands under the destination prefix is where `helm push` would put it:
//! - an OCI chart keeps its source path (`oci://ghcr.io/nvidia/kai-scheduler` + chart
//!   `kai-scheduler` -> `<prefix>/nvidia/kai-scheduler/kai-scheduler:<version>`), copied as it is;
//! - a repository chart goes to `<prefix>/<repository name>/<chart>:<version>`, packed as
//!   `helm push` packs it (the archive byte for byte, verified against the index's `digest`);
//! - a local chart archive goes to `<prefix>/<chart>:<version>`.
//!
//! The tag is the chart version with `+` written `_`, as Helm tags it. oc-mirror v2 keeps
//! charts in its workspace (`helm/charts/`) instead and mirrors only their images; the images
//! here go where oc-mirror puts them (their source path, as additional images).

use super::content::WantedImage;
use super::plan::{self, BlobDesc, Placement, ResolvedImage, Source};
use crate::oci::digest::Digest;
use crate::oci::made::MadeBlob;
use crate::oci::manifest::Parsed;
use crate::oci::platform::PlatformFilter;
use crate::oci::reference::ImageRef;
use crate::oci::registry::Registries;
use crate::openshift::cluster::Category;
use crate::openshift::helm::{self, Chart, Unresolved};
use anyhow::{bail, Context, Result};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A chart mirrored, for reports.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChartInfo {
    /// The chart's name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// Where it came from: the archive URL, the OCI reference or the local path.
    pub source: String,
    /// Its repository path under the destination prefix.
    pub repository: String,
    /// Its tag there.
    pub tag: String,
    /// sha256 of the chart archive (the OCI layer).
    pub chart_digest: String,
    /// Images found in it (see [`crate::openshift::helm`]).
    pub images: Vec<String>,
    /// What looked like an image but could not be resolved.
    pub unresolved: Vec<Unresolved>,
}

impl ChartInfo {
    /// One warning per unresolved image reference.
    pub fn warnings(&self) -> Vec<String> {
        self.unresolved
            .iter()
            .map(|u| {
                format!(
                    "chart {} {}: {}: '{}' not mirrored: {}",
                    self.name, self.version, u.place, u.text, u.reason
                )
            })
            .collect()
    }
}

/// What `mirror.helm` adds to a run.
#[derive(Default)]
pub struct HelmContent {
    /// The images the charts reference.
    pub images: Vec<WantedImage>,
    /// The charts, resolved (repository and local charts packed, OCI charts as found).
    pub charts: Vec<ResolvedImage>,
    /// For reports.
    pub reports: Vec<ChartInfo>,
}

/// One entry of a repository's `index.yaml`.
#[derive(serde::Deserialize)]
struct IndexEntry {
    version: String,
    #[serde(default)]
    urls: Vec<String>,
    #[serde(default)]
    digest: Option<String>,
    #[serde(default, rename = "type")]
    chart_type: Option<String>,
}

#[derive(serde::Deserialize)]
struct IndexFile {
    #[serde(default)]
    entries: BTreeMap<String, Vec<IndexEntry>>,
}

/// Reads `mirror.helm` of `cfg` (`origin` names it in errors).
pub async fn resolve(
    cfg: &super::config::ImageSetConfig,
    origin: &str,
    regs: &Arc<Registries>,
) -> Result<HelmContent> {
    let mut out = HelmContent::default();
    for (i, repo) in cfg.mirror.helm.repositories.iter().enumerate() {
        let at = format!("{origin}: mirror.helm.repositories[{i}]");
        if let Some(base) = repo.url.strip_prefix("oci://") {
            oci_repository(base, repo, &at, regs, &mut out).await?;
        } else {
            http_repository(repo, &at, regs, &mut out)
                .await
                .with_context(|| format!("{at} ({})", repo.url))?;
        }
    }
    for (i, chart) in cfg.mirror.helm.local.iter().enumerate() {
        let at = format!("{origin}: mirror.helm.local[{i}]");
        let path = chart
            .path
            .as_deref()
            .filter(|p| !p.is_empty())
            .with_context(|| {
                format!("{at}.path: is missing; give the chart archive (.tgz) to mirror")
            })?;
        let tgz = fs_err::read(path).with_context(|| format!("{at}.path"))?;
        if tgz.len() > helm::MAX_CHART_BYTES {
            bail!("{at}.path: {path} is larger than Helm accepts for a chart archive");
        }
        let read = helm::read_chart(&tgz).with_context(|| {
            format!("{at}.path: {path} is not a chart archive (a directory must be packed with `helm package` first)")
        })?;
        let name = read.name().to_string();
        add_packed(
            &read,
            Bytes::from(tgz),
            Packed {
                registry: "localhost".into(),
                repository: name,
                source: path.to_string(),
            },
            &chart.image_paths,
            &mut out,
        )?;
    }
    Ok(out)
}

/// Charts of an `oci://` repository: each `<base>/<name>:<version>`, copied as found.
async fn oci_repository(
    base: &str,
    repo: &super::config::HelmRepository,
    at: &str,
    regs: &Arc<Registries>,
    out: &mut HelmContent,
) -> Result<()> {
    if repo.charts.is_empty() {
        bail!("{at}.charts: an oci:// repository has no index to list; name its charts (name, and version unless the highest is wanted)");
    }
    for (j, chart) in repo.charts.iter().enumerate() {
        let base = base.trim_end_matches('/');
        let tag = match chart.version.as_deref().filter(|v| !v.is_empty()) {
            Some(version) => helm::version_tag(version),
            // No version: the highest stable version among the tags, as `helm pull` picks it.
            None => latest_tag(regs, base, &chart.name)
                .await
                .with_context(|| format!("{at}.charts[{j}] (oci://{base}/{})", chart.name))?,
        };
        let text = format!("{base}/{}:{tag}", chart.name);
        let image = ImageRef::parse(&text)
            .map_err(|e| anyhow::anyhow!("{at}.charts[{j}]: oci://{text}: {}", e.reason))?;
        let source = Source::Registry(regs.clone());
        let mut resolved = plan::resolve(&source, &image, None, &PlatformFilter::all(), None)
            .await
            .with_context(|| format!("resolving chart {image} ({at}.charts[{j}])"))?;
        let Parsed::Image(m) = resolved.root.parse()? else {
            bail!("{image} is an index, not a Helm chart");
        };
        if m.config.media_type != helm::CONFIG_MEDIA_TYPE {
            bail!(
                "{image} is not a Helm chart: its config is {}, not {}",
                m.config.media_type,
                helm::CONFIG_MEDIA_TYPE
            );
        }
        let layer = m
            .layers
            .iter()
            .find(|l| l.media_type == helm::CHART_MEDIA_TYPE)
            .with_context(|| format!("{image} has no {} layer", helm::CHART_MEDIA_TYPE))?;
        let digest: Digest = layer.digest.parse()?;
        let tgz = read_chart_blob(regs, &image, &digest).await?;
        let read = helm::read_chart(&tgz).with_context(|| format!("reading chart {image}"))?;
        let found = helm::find_images(&read, &chart.image_paths)
            .with_context(|| format!("chart {image}"))?;
        resolved.placement = Placement {
            repository: None,
            tag: None,
            category: Category::Chart,
        };
        add_images(&found.images, out)?;
        out.reports.push(ChartInfo {
            name: read.name().to_string(),
            version: read.version().to_string(),
            source: format!("oci://{image}"),
            repository: image.repository.clone(),
            tag: image.tag.clone().unwrap_or_default(),
            chart_digest: digest.to_string(),
            images: found.images.into_iter().collect(),
            unresolved: found.unresolved,
        });
        out.charts.push(resolved);
    }
    Ok(())
}

/// The tag of the highest stable semantic version among an OCI chart repository's tags (`_`
/// read as `+`, as Helm tags them), as `helm pull` without `--version` picks it.
async fn latest_tag(regs: &Arc<Registries>, base: &str, name: &str) -> Result<String> {
    // Read as the pull reads it (`oci://myorg/charts` is Docker Hub's).
    // (The tag only lets it parse; the tags are listed next.)
    let chart = ImageRef::parse(&format!("{base}/{name}:latest"))
        .map_err(|e| anyhow::anyhow!("oci://{base}/{name}: {}", e.reason))?;
    let (registry, repo) = (&chart.registry, &chart.repository);
    let tags = regs.client(registry)?.list_tags(repo).await?;
    let versions: Vec<(&str, String)> = tags
        .iter()
        .map(|t| (t.as_str(), t.replace('_', "+")))
        .collect();
    highest_stable(versions.iter().map(|(t, v)| (v.as_str(), *t)))
        .map(str::to_string)
        .with_context(|| {
            if tags.is_empty() {
                // A repository that does not exist lists no tags either.
                return format!("{registry}/{repo} has no tags: check the chart's name and the repository URL");
            }
            let shown: Vec<&str> = tags.iter().take(10).map(String::as_str).collect();
            format!(
                "{registry}/{repo} has no tag that is a stable semantic version (tags: {}); name the chart's version",
                shown.join(", ")
            )
        })
}

/// A chart version as a semantic version (a leading `v` allowed, as Helm reads it).
fn semver(v: &str) -> Option<semver::Version> {
    semver::Version::parse(v.trim_start_matches('v')).ok()
}

/// Of `(version, item)` pairs, the item of the highest stable semantic version (a leading `v`
/// allowed, pre-releases and what does not parse skipped), as Helm picks a chart's latest.
fn highest_stable<'a, T>(versions: impl Iterator<Item = (&'a str, T)>) -> Option<T> {
    versions
        .filter_map(|(v, item)| semver(v).filter(|s| s.pre.is_empty()).map(|s| (s, item)))
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, item)| item)
}

/// A chart layer, read whole (bounded) and verified against its digest.
async fn read_chart_blob(
    regs: &Arc<Registries>,
    image: &ImageRef,
    digest: &Digest,
) -> Result<Bytes> {
    let client = regs.client(&image.registry)?;
    let resp = client.get_blob(&image.repository, digest, 0).await?;
    let bytes = crate::oci::stream::read_body(resp, helm::MAX_CHART_BYTES)
        .await
        .with_context(|| format!("reading chart {digest} of {image}"))?;
    if Digest::of(&bytes) != *digest {
        bail!("chart {digest} of {image} does not match its digest");
    }
    Ok(bytes)
}

/// Charts of a Helm repository: its `index.yaml`, then each chart archive, verified against
/// the index's digest while it is read and packed as `helm push` packs it.
async fn http_repository(
    repo: &super::config::HelmRepository,
    at: &str,
    regs: &Registries,
    out: &mut HelmContent,
) -> Result<()> {
    if !crate::oci::reference::valid_repository(&repo.name) {
        bail!("{at}.name: '{}' is not a repository path (lowercase letters, digits and . _ - only); the charts go to <prefix>/<name>/<chart>", repo.name);
    }
    let base = repo.url.trim_end_matches('/');
    let base = base.strip_suffix("/index.yaml").unwrap_or(base);
    let index_url = format!("{base}/index.yaml");
    let body = fetch(regs, &index_url, crate::bounded::LAYOUT_FILE_MAX as usize).await?;
    let text = std::str::from_utf8(&body).context("index.yaml is not UTF-8")?;
    let index: IndexFile =
        serde_saphyr::from_str(text).map_err(|e| anyhow::anyhow!("reading {index_url}: {e}"))?;
    let registry = reqwest::Url::parse(base)
        .ok()
        .filter(|u| u.host_str().is_some())
        .map(|u| crate::oci::registry::authority(&u))
        .unwrap_or_else(|| "helm".into());
    for (j, (name, version, image_paths)) in wanted_charts(repo, &index).into_iter().enumerate() {
        let entry = pick(&index, &name, version.as_deref()).with_context(|| {
            format!(
                "{at}.charts[{j}]: {index_url} has no chart '{name}'{}",
                version
                    .as_deref()
                    .map(|v| format!(" version {v}"))
                    .unwrap_or_default()
            )
        })?;
        let (url, tgz) = fetch_archive(regs, base, &index_url, &name, entry).await?;
        let read = helm::read_chart(&tgz).with_context(|| format!("reading chart {url}"))?;
        if read.name() != name {
            bail!(
                "{url}: the archive holds chart '{}', not '{name}'",
                read.name()
            );
        }
        let packed = Packed {
            registry: registry.clone(),
            repository: format!("{}/{name}", repo.name),
            source: url,
        };
        add_packed(&read, tgz, packed, &image_paths, out)?;
    }
    Ok(())
}

/// The charts of a repository entry, each as (name, version, imagePaths): those listed, or
/// with none listed every version of every application chart, as oc-mirror v2 takes them.
fn wanted_charts(
    repo: &super::config::HelmRepository,
    index: &IndexFile,
) -> Vec<(String, Option<String>, Vec<String>)> {
    if repo.charts.is_empty() {
        return index
            .entries
            .iter()
            .flat_map(|(name, versions)| {
                versions
                    .iter()
                    .filter(|v| v.chart_type.as_deref() != Some("library"))
                    .map(|v| (name.clone(), Some(v.version.clone()), Vec::new()))
            })
            .collect();
    }
    repo.charts
        .iter()
        .map(|c| {
            (
                c.name.clone(),
                c.version.clone().filter(|v| !v.is_empty()),
                c.image_paths.clone(),
            )
        })
        .collect()
}

/// The archive of one index entry (its first URL, relative to the repository or absolute),
/// with that URL, refused unless it matches the digest the index gives.
async fn fetch_archive(
    regs: &Registries,
    base: &str,
    index_url: &str,
    name: &str,
    entry: &IndexEntry,
) -> Result<(String, Bytes)> {
    let url = entry
        .urls
        .first()
        .with_context(|| format!("{index_url}: chart {name} {} lists no URL", entry.version))?;
    let url = if url.contains("://") {
        url.clone()
    } else {
        format!("{base}/{}", url.trim_start_matches('/'))
    };
    let expected = entry.digest.as_deref().with_context(|| {
        format!("{index_url}: chart {name} {} has no digest, so its archive cannot be verified; regenerate the index with `helm repo index`", entry.version)
    })?;
    let tgz = fetch(regs, &url, helm::MAX_CHART_BYTES).await?;
    let got = Digest::of(&tgz);
    if got.hex() != expected.trim_start_matches("sha256:") {
        bail!("{url}: the chart archive's sha256 is {}, but {index_url} says {expected}; the repository or the download is corrupt", got.hex());
    }
    Ok((url, tgz))
}

/// The index entry of `name` at `version` (compared as semantic versions, so `v1.2.0` finds
/// `1.2.0`), or with no version the highest stable one, as `helm pull` picks it.
fn pick<'a>(index: &'a IndexFile, name: &str, version: Option<&str>) -> Option<&'a IndexEntry> {
    let versions = index.entries.get(name)?;
    match version {
        Some(v) => versions.iter().find(|e| e.version == v).or_else(|| {
            versions
                .iter()
                .find(|e| semver(&e.version).is_some() && semver(&e.version) == semver(v))
        }),
        None => highest_stable(versions.iter().map(|e| (e.version.as_str(), e))),
    }
}

/// Where a packed chart is recorded from and goes.
struct Packed {
    registry: String,
    repository: String,
    source: String,
}

/// A chart this run packs (repository and local charts): its artifact, placed and reported.
fn add_packed(
    read: &Chart,
    tgz: Bytes,
    packed: Packed,
    image_paths: &[String],
    out: &mut HelmContent,
) -> Result<()> {
    let found =
        helm::find_images(read, image_paths).with_context(|| format!("chart {}", packed.source))?;
    let artifact = helm::chart_artifact(read, tgz)?;
    let tag = helm::version_tag(read.version());
    let source = ImageRef {
        registry: packed.registry,
        repository: packed.repository.clone(),
        tag: Some(tag.clone()),
        digest: None,
    };
    let mut resolved = ResolvedImage::new(source, artifact.manifest);
    for (digest, bytes, media_type) in [
        (
            &artifact.config.0,
            &artifact.config.1,
            helm::CONFIG_MEDIA_TYPE,
        ),
        (&artifact.chart.0, &artifact.chart.1, helm::CHART_MEDIA_TYPE),
    ] {
        resolved.blobs.push(BlobDesc {
            digest: digest.clone(),
            size: bytes.len() as u64,
            media_type: media_type.to_string(),
        });
        resolved
            .generated
            .push((digest.clone(), MadeBlob::Memory(bytes.clone())));
    }
    resolved.placement = Placement {
        repository: Some(packed.repository.clone()),
        tag: Some(tag.clone()),
        category: Category::Chart,
    };
    add_images(&found.images, out)?;
    out.reports.push(ChartInfo {
        name: read.name().to_string(),
        version: read.version().to_string(),
        source: crate::secret::redact_url(&packed.source),
        repository: packed.repository,
        tag,
        chart_digest: artifact.chart.0.to_string(),
        images: found.images.into_iter().collect(),
        unresolved: found.unresolved,
    });
    out.charts.push(resolved);
    Ok(())
}

fn add_images(images: &std::collections::BTreeSet<String>, out: &mut HelmContent) -> Result<()> {
    for i in images {
        let r =
            ImageRef::parse(i).map_err(|e| anyhow::anyhow!("chart image '{i}': {}", e.reason))?;
        out.images.push(WantedImage::generic(r));
    }
    Ok(())
}

/// GETs `url` (http(s) or `file://PATH`) whole, at most `limit` bytes, with the registries'
/// trust ([`Registries::web`]).
pub(super) async fn fetch(regs: &Registries, url: &str, limit: usize) -> Result<Bytes> {
    if let Some(path) = url.strip_prefix("file://") {
        let meta = fs_err::metadata(path)?;
        if meta.len() > limit as u64 {
            bail!("{path} is larger than {limit} bytes, more than it may be");
        }
        return Ok(Bytes::from(fs_err::read(path)?));
    }
    let shown = crate::secret::redact_url(url);
    let parsed = reqwest::Url::parse(url)
        .ok()
        .filter(|u| matches!(u.scheme(), "https" | "http"))
        .with_context(|| format!("'{shown}' must be an http(s) URL or file://PATH"))?;
    let resp = regs
        .web(&parsed)
        .get(parsed.clone())
        .send()
        .await
        .map_err(|e| {
            // The fixes it names (--ca-bundle, --insecure-skip-tls-verify HOST) take the host
            // that failed, which after a redirect is not the one asked.
            let host = crate::oci::registry::authority(e.url().unwrap_or(&parsed));
            let why = crate::oci::registry::describe_web_error(&host, &e);
            anyhow::anyhow!("fetching {shown}: {why}")
        })?;
    if !resp.status().is_success() {
        bail!("{shown} answered {}", resp.status());
    }
    crate::oci::stream::read_body(resp, limit)
        .await
        .with_context(|| format!("reading {shown}"))
}

#[cfg(test)]
mod tests {
    use super::highest_stable;

    /// Semantic order, not text order; a leading `v` read; pre-releases and tags that are not
    /// versions passed over; nothing stable gives nothing.
    #[test]
    fn the_highest_stable_version_is_picked_as_helm_picks_it() {
        let pick = |vs: &[&'static str]| highest_stable(vs.iter().map(|v| (*v, *v)));
        assert_eq!(pick(&["0.3.0", "0.10.0", "0.9.1"]), Some("0.10.0"));
        assert_eq!(pick(&["v1.2.0", "1.1.9", "latest"]), Some("v1.2.0"));
        assert_eq!(
            pick(&["2.0.0-rc.1", "1.0.0+build.7"]),
            Some("1.0.0+build.7")
        );
        assert_eq!(pick(&["latest", "2.0.0-rc.1", "main"]), None);
    }
}
