//! The lab cluster's Operator Lifecycle Manager, imitated against the lab's Kubernetes store:
//! what the hand-off waits on when it installs OpenShift GitOps from a mirrored catalog.
//!
//! One loop of passes, each run when the store changed: the marketplace operator's OperatorHub
//! and default sources ([`operatorhub`]), CatalogSource health from the catalogs the lab knows
//! ([`catalogs`]), OperatorGroup status and Subscriptions ([`subscription`]), InstallPlans
//! ([`installplan`]), ClusterServiceVersions one phase per pass ([`csv`]), and OpenShift
//! GitOps' own effect once its CSV Succeeded ([`gitops`]). Each controller writes with its own
//! field manager, and only when something besides a time changed, so the loop settles.
//!
//! What it does not do: unpack bundle images (the CSV is made from the catalog's bundle
//! entry and the operator's CRD files, see [`crds`]), run operator pods, upgrade (a
//! Subscription installs its channel's head once; `startingCSV` is not read), or resolve
//! dependencies between packages.

pub mod catalogs;
pub mod crds;
pub mod csv;
pub mod gitops;
pub mod installplan;
pub mod objects;
pub mod operatorhub;
pub mod subscription;

pub use catalogs::CatalogIndex;
pub use operatorhub::seed;

use crate::site::kube::Store;
use anyhow::Result;
use std::time::Duration;

/// Registries an air-gapped cluster cannot reach: catalogs there stay `TRANSIENT_FAILURE`.
pub const PUBLIC_REGISTRIES: [&str; 4] = [
    "registry.redhat.io",
    "registry.connect.redhat.com",
    "registry.access.redhat.com",
    "quay.io",
];

/// How the imitation runs.
#[derive(Clone, Debug)]
pub struct OlmConfig {
    /// The file-based catalogs CatalogSources can serve, by image repository.
    pub catalogs: CatalogIndex,
    /// Registries whose catalogs cannot be read (an air gap).
    pub unreachable_registries: Vec<String>,
    /// The pause after a pass that changed something, before the next: how long each step
    /// (a CSV phase, the ArgoCD's Pending) stays visible to a client that polls. Zero in tests,
    /// which wait on the store instead.
    pub step: Duration,
}

impl OlmConfig {
    /// The lab's: its own catalog (as seeded for `registry`), the public registries out of
    /// reach.
    pub fn lab(registry: &str) -> Result<OlmConfig> {
        Ok(OlmConfig {
            catalogs: CatalogIndex::lab(registry)?,
            unreachable_registries: PUBLIC_REGISTRIES.iter().map(|r| r.to_string()).collect(),
            step: Duration::from_millis(500),
        })
    }
}

/// Runs the controllers until the task is dropped: a pass whenever the store changed, another
/// at once (after `cfg.step`) when a pass changed something itself.
pub async fn run(store: Store, cfg: OlmConfig) {
    loop {
        let before = store.revision();
        reconcile(&store, &cfg);
        let after = store.revision();
        if after > before {
            if cfg.step.is_zero() {
                tokio::task::yield_now().await;
            } else {
                tokio::time::sleep(cfg.step).await;
            }
            continue;
        }
        store.changed(after).await;
    }
}

/// One pass of every controller; a controller that fails is logged and the next one runs.
pub fn reconcile(store: &Store, cfg: &OlmConfig) {
    let results = [
        ("OperatorHub", operatorhub::reconcile(store)),
        (
            "CatalogSources",
            catalogs::reconcile(store, &cfg.catalogs, &cfg.unreachable_registries),
        ),
        ("OperatorGroups", subscription::reconcile_groups(store)),
        ("Subscriptions", subscription::reconcile(store, cfg)),
        ("InstallPlans", installplan::reconcile(store)),
        ("ClusterServiceVersions", csv::reconcile(store)),
        ("OpenShift GitOps", gitops::reconcile(store)),
    ];
    for (what, result) in results {
        if let Err(e) = result {
            tracing::warn!("lab OLM, {what}: {e:#}");
        }
    }
}
