//! `bootstrap-lab seed docker://HOST:PORT --out DIR`: builds the lab's images in memory (the
//! modelcar through an OCI layout under DIR), pushes them (idempotently: HEAD before every blob
//! and manifest), and writes `DIR/graph.json` (the update graph), `DIR/okd-graph.json` (OKD's
//! update graph, `--okd-graph-url`), `DIR/graph-data.tar.gz` (the
//! graph data `platform.graph` builds its image from) and `DIR/seed.json` (what was pushed).
//! Everything is deterministic: the same registry address gives the same digests.

use super::catalog::{self, PackageRecord, CATALOG_REPO, CATALOG_TAG};
use super::image::Image;
use super::modelcar;
use super::push::{Pusher, Transfer};
use super::release;
use anyhow::{bail, Context, Result};
use bootstrap::fs::write_json;
use bootstrap::oci::digest::Digest;
use bootstrap::oci::reference::RegistryTarget;
use bootstrap::oci::registry::{Registries, RegistryOptions};
use bootstrap::output::{human_bytes, Progress};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The graph file's name under DIR.
pub const GRAPH_FILE: &str = "graph.json";
/// OKD's update graph file's name under DIR (`--okd-graph-url file://DIR/okd-graph.json`).
pub const OKD_GRAPH_FILE: &str = "okd-graph.json";
/// The update graph data tarball's name under DIR (`--graph-data-url file://DIR/...`).
pub const GRAPH_DATA_FILE: &str = "graph-data.tar.gz";
/// The seed record's name under DIR.
pub const SEED_FILE: &str = "seed.json";

/// `DIR/seed.json`: everything the seed pushed.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Seed {
    /// The registry, `HOST:PORT`.
    pub registry: String,
    /// Every image pushed, sorted by repository then digest.
    pub images: Vec<ImageRecord>,
    /// The releases, lowest first.
    pub releases: Vec<ReleaseRecord>,
    /// OKD's releases, lowest first.
    pub okd_releases: Vec<ReleaseRecord>,
    /// The update graph's file name, beside this one.
    pub graph: String,
    /// OKD's update graph's file name, beside this one.
    pub okd_graph: String,
    /// The update graph data tarball's file name (`platform.graph`), beside this one.
    pub graph_data: String,
    /// The operator catalog.
    pub catalog: CatalogRecord,
    /// The modelcar.
    pub modelcar: ImageRecord,
}

/// One pushed image.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageRecord {
    /// `HOST/repository:tag` for tagged images, else `HOST/repository@digest`.
    pub reference: String,
    /// Repository path.
    pub repository: String,
    /// Tag, when it has one.
    pub tag: Option<String>,
    /// Manifest digest.
    pub digest: Digest,
    /// `release`, `component`, `kubevirt`, `catalog`, `bundle`, `operand` or `modelcar`.
    pub kind: &'static str,
    /// Bytes of manifest, config and layers.
    pub size: u64,
}

/// One release.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseRecord {
    /// Version.
    pub version: String,
    /// The release image by tag.
    pub image: String,
    /// Its digest.
    pub digest: Digest,
    /// Channels listing it.
    pub channels: Vec<String>,
    /// Components: tag name -> image by digest.
    pub components: BTreeMap<String, String>,
    /// The KubeVirt container disk its boot images name, by digest, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubevirt: Option<String>,
}

/// The catalog.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogRecord {
    /// The catalog image by tag.
    pub image: String,
    /// Its digest.
    pub digest: Digest,
    /// Packages.
    pub packages: Vec<PackageRecord>,
}

/// What `bootstrap-lab seed` reports (`--output json` prints it): the seed record and what
/// this run sent.
#[derive(Debug, serde::Serialize)]
pub struct SeedReport {
    /// What the upstream holds.
    #[serde(flatten)]
    pub seed: Seed,
    /// What this run sent.
    pub transfer: Transfer,
    /// Where graph.json and seed.json were written.
    #[serde(skip)]
    pub out: PathBuf,
}

/// A `bootstrap-lab seed` run, resolved.
#[derive(Clone, Debug)]
pub struct SeedSettings {
    /// The lab registry's `HOST:PORT`.
    pub host: String,
    /// Credentials and trust.
    pub registry: RegistryOptions,
    /// Where graph.json, seed.json and the modelcar's files go.
    pub out: PathBuf,
    /// The `bootstrap-lab` binary the release's `openshift-install` and `oc` stand-ins hand over
    /// to (see [`super::standin`]).
    pub stand_in: PathBuf,
}

/// Runs `bootstrap-lab seed`.
pub async fn seed(settings: SeedSettings) -> Result<SeedReport> {
    let SeedSettings {
        stand_in,
        host,
        registry,
        out,
    } = settings;
    let registries = Registries::new(registry)?;
    let client = registries.client(&host)?;
    client
        .ping()
        .await
        .with_context(|| format!("reaching the lab registry {host}"))?;
    fs_err::create_dir_all(&out).with_context(|| format!("creating --out {}", out.display()))?;
    let progress = Progress::new("seed", 0);
    progress.println(&format!(
        "building release payloads, the operator catalog and the modelcar for {host}"
    ));
    let releases = release::build(&host, &stand_in)?;
    let okd_releases = release::build_okd(&host, &stand_in)?;
    let built_catalog = catalog::build(&host)?;
    let model = modelcar::build(&host, &out.join("modelcar")).await?;

    let mut leaves: BTreeMap<(String, Digest), (&Image, &'static str)> = BTreeMap::new();
    for r in releases.iter().chain(&okd_releases) {
        for c in r.components.values() {
            leaves.insert((c.repository.clone(), c.digest().clone()), (c, "component"));
        }
        if let Some(k) = &r.kubevirt {
            leaves.insert((k.repository.clone(), k.digest().clone()), (k, "kubevirt"));
        }
    }
    for img in &built_catalog.images {
        let kind = if img.repository.ends_with("-bundle") {
            "bundle"
        } else {
            "operand"
        };
        leaves.insert((img.repository.clone(), img.digest().clone()), (img, kind));
    }
    leaves.insert(
        (model.repository.clone(), model.digest().clone()),
        (&model, "modelcar"),
    );
    let mut roots: Vec<(&Image, &'static str)> = releases
        .iter()
        .chain(&okd_releases)
        .map(|r| (&r.image, "release"))
        .collect();
    roots.push((&built_catalog.image, "catalog"));

    let pusher = Pusher::new(&client);
    progress.println(&format!("pushing {} images to {host}", leaves.len()));
    let leaf_images: Vec<&Image> = leaves.values().map(|(i, _)| *i).collect();
    pusher.push_all(&leaf_images).await?;
    progress.println(&format!(
        "pushing {} release images and the catalog to {host}",
        roots.len() - 1
    ));
    let root_images: Vec<&Image> = roots.iter().map(|(i, _)| *i).collect();
    pusher.push_all(&root_images).await?;

    let graph = release::graph(&host, &releases);
    write_json(&out.join(GRAPH_FILE), &graph)?;
    write_json(
        &out.join(OKD_GRAPH_FILE),
        &release::graph(&host, &okd_releases),
    )?;
    bootstrap::fs::write_atomic(&out.join(GRAPH_DATA_FILE), &release::graph_data(&releases)?)?;
    let seed = seed_record(
        &host,
        [&releases, &okd_releases],
        &built_catalog,
        &model,
        &leaves,
        &roots,
    );
    write_json(&out.join(SEED_FILE), &seed)?;
    progress.finish();
    Ok(SeedReport {
        seed,
        transfer: pusher.transfer(),
        out,
    })
}

/// `seed.json`: every image pushed (leaves and roots), the releases with their components,
/// the catalog and the modelcar.
fn seed_record(
    host: &str,
    [releases, okd_releases]: [&[release::Release]; 2],
    built_catalog: &catalog::BuiltCatalog,
    model: &Image,
    leaves: &BTreeMap<(String, Digest), (&Image, &'static str)>,
    roots: &[(&Image, &'static str)],
) -> Seed {
    let record = |img: &Image, kind| ImageRecord {
        reference: img.tagged(host),
        repository: img.repository.clone(),
        tag: img.tag.clone(),
        digest: img.digest().clone(),
        kind,
        size: img.size(),
    };
    let mut images: Vec<ImageRecord> = leaves
        .values()
        .chain(roots.iter())
        .map(|(img, kind)| record(img, kind))
        .collect();
    images.sort_by(|a, b| (&a.repository, &a.digest).cmp(&(&b.repository, &b.digest)));
    let seed = Seed {
        registry: host.to_string(),
        images,
        releases: releases.iter().map(|r| release_record(host, r)).collect(),
        okd_releases: okd_releases
            .iter()
            .map(|r| release_record(host, r))
            .collect(),
        graph: GRAPH_FILE.to_string(),
        okd_graph: OKD_GRAPH_FILE.to_string(),
        graph_data: GRAPH_DATA_FILE.to_string(),
        catalog: CatalogRecord {
            image: format!("{host}/{CATALOG_REPO}:{CATALOG_TAG}"),
            digest: built_catalog.image.digest().clone(),
            packages: built_catalog.packages.clone(),
        },
        modelcar: record(model, "modelcar"),
    };
    seed
}

fn release_record(host: &str, r: &release::Release) -> ReleaseRecord {
    ReleaseRecord {
        version: r.def.version.to_string(),
        image: r.image.tagged(host),
        digest: r.image.digest().clone(),
        channels: r.def.channels.iter().map(|c| c.to_string()).collect(),
        components: r
            .components
            .iter()
            .map(|(name, img)| (name.clone(), img.pinned(host)))
            .collect(),
        kubevirt: r.kubevirt.as_ref().map(|k| k.pinned(host)),
    }
}

/// `HOST:PORT` from `docker://HOST:PORT`; a path is refused, since the lab's repositories are
/// the upstream's own paths.
pub fn registry_host(url: &str) -> Result<String> {
    let Some(rest) = url.strip_prefix("docker://") else {
        bail!("the lab registry '{url}' must be docker://HOST:PORT, e.g. docker://127.0.0.1:5000");
    };
    let target =
        RegistryTarget::parse(rest).with_context(|| format!("the lab registry '{url}'"))?;
    if !target.prefix.is_empty() {
        bail!(
            "the lab registry '{url}' has a path (/{}): the lab seeds the upstream's own repositories (openshift-release-dev/..., redhat/...), so give docker://{} alone",
            target.prefix,
            target.registry
        );
    }
    Ok(target.registry)
}

impl std::fmt::Display for SeedReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (seed, transfer) = (&self.seed, &self.transfer);
        writeln!(f, "seeded the lab upstream at {}:", seed.registry)?;
        for r in seed.releases.iter().chain(&seed.okd_releases) {
            writeln!(
                f,
                "  release {} {} ({} components; {})",
                r.image,
                r.digest,
                r.components.len(),
                r.channels.join(", ")
            )?;
        }
        let bundles: usize = seed.catalog.packages.iter().map(|p| p.bundles.len()).sum();
        writeln!(
            f,
            "  catalog {} {} ({} packages, {bundles} bundles)",
            seed.catalog.image,
            seed.catalog.digest,
            seed.catalog.packages.len()
        )?;
        writeln!(
            f,
            "  modelcar {} {}",
            seed.modelcar.reference, seed.modelcar.digest
        )?;
        writeln!(
            f,
            "  {} images in all; this run sent {} blobs ({}) and {} manifests, found {} blobs and {} manifests already there",
            seed.images.len(),
            transfer.blobs_sent,
            human_bytes(transfer.bytes_sent),
            transfer.manifests_put,
            transfer.blobs_present,
            transfer.manifests_present
        )?;
        writeln!(
            f,
            "wrote {}, {} and {}",
            self.out.join(GRAPH_FILE).display(),
            self.out.join(OKD_GRAPH_FILE).display(),
            self.out.join(SEED_FILE).display()
        )
    }
}
