//! The Argo CD application controller, imitated against the lab's Kubernetes store: what
//! OpenShift GitOps' default instance does once the hand-off gives it a root Application.
//!
//! It acts as the instance's controller service account (so the store's RBAC applies: the
//! default instance cannot write ResourceQuota or LimitRange until granted), with field
//! manager `argocd-controller`, and only while ArgoCD `openshift-gitops` is `Available`. For
//! every Application in `openshift-gitops` it fetches the source with the real `git` from what
//! the cluster's own objects grant ([`repo`]), renders it (real `kubectl kustomize`), compares
//! and syncs it in Argo's order ([`sync`]), assesses health ([`health`]) and writes the
//! Application's status ([`app`]). It is event-driven: a pass runs when the store changes, when
//! a retry is due, or every `resync` (Argo's reconciliation timeout, which also re-fetches Git).
//!
//! Not imitated: the UI and API server, Helm and plugins, hooks, multiple sources, diffing
//! customizations (ignoreDifferences), AppProject restrictions, clusters other than the local one.

mod app;
pub mod health;
pub mod repo;
pub mod sync;

use crate::site::kube::{ObjectRef, Store};
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The user the controller acts as.
pub const CONTROLLER_USER: &str =
    "system:serviceaccount:openshift-gitops:openshift-gitops-argocd-application-controller";
/// Its field manager.
pub const FIELD_MANAGER: &str = "argocd-controller";
/// The instance's namespace, where its Applications, repository Secrets and ConfigMaps live.
pub const NAMESPACE: &str = "openshift-gitops";
/// The ArgoCD resource whose `Available` phase lets the controller run.
pub const INSTANCE: &str = "openshift-gitops";
/// The finalizer that cascades an Application's deletion to its resources.
pub const FINALIZER: &str = "resources-finalizer.argocd.argoproj.io";
/// Argo 3.x's default resource tracking annotation.
pub const TRACKING_ANNOTATION: &str = "argocd.argoproj.io/tracking-id";
/// The annotation that asks for a refresh (a Git fetch now).
pub const REFRESH_ANNOTATION: &str = "argocd.argoproj.io/refresh";
/// The Application's apiVersion.
pub const APPLICATION_API: &str = "argoproj.io/v1alpha1";

/// The controller's settings.
#[derive(Clone, Debug)]
pub struct ArgoConfig {
    /// Where fetched repositories and checked-out trees are kept.
    pub work_dir: PathBuf,
    /// The `kubectl` that renders kustomizations.
    pub kubectl: PathBuf,
    /// Every Application is reconciled (and its repository re-fetched) at least this often.
    pub resync: Duration,
}

/// Runs the controller until the task is dropped.
pub async fn run(store: Store, cfg: ArgoConfig) -> anyhow::Result<()> {
    fs_err::create_dir_all(&cfg.work_dir)?;
    let mut ctl = Controller {
        repos: repo::Repos::new(&cfg.work_dir, &cfg.kubectl),
        store: store.clone(),
        memo: HashMap::new(),
        cfg,
    };
    loop {
        let seen = store.revision();
        let wake = ctl.pass().await;
        let wait = wake
            .map(|at| at.saturating_duration_since(Instant::now()))
            .unwrap_or(ctl.cfg.resync)
            .min(ctl.cfg.resync);
        tokio::select! {
            _ = store.changed(seen) => {}
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

/// What the controller remembers of an Application between passes.
#[derive(Clone, Debug, Default)]
struct Memo {
    /// When it was last reconciled with a Git fetch.
    refreshed: Option<Instant>,
    /// When the failed operation is retried.
    retry_at: Option<Instant>,
    /// When a sync last succeeded (self-heal waits a while after it).
    healed_at: Option<Instant>,
}

struct Controller {
    store: Store,
    cfg: ArgoConfig,
    repos: repo::Repos,
    memo: HashMap<String, Memo>,
}

impl Controller {
    /// Reconciles every Application once, if the instance is Available; the earliest retry due.
    async fn pass(&mut self) -> Option<Instant> {
        let instance = self.store.get(&ObjectRef {
            api_version: "argoproj.io/v1beta1".into(),
            kind: "ArgoCD".into(),
            namespace: Some(NAMESPACE.into()),
            name: INSTANCE.into(),
        });
        let Ok(instance) = instance else { return None };
        if instance["status"]["phase"] != "Available" {
            return None;
        }
        let app_check = health::has_application_check(&instance);
        let apps = self
            .store
            .list(APPLICATION_API, "Application", Some(NAMESPACE), None)
            .unwrap_or_default();
        let mut wake: Option<Instant> = None;
        for a in apps {
            let name = a["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let memo = self.memo.entry(name).or_default();
            let mut ctx = app::Ctx {
                store: &self.store,
                repos: &mut self.repos,
                resync: self.cfg.resync,
                app_check,
                memo,
            };
            if let Some(at) = app::reconcile(&mut ctx, a).await {
                wake = Some(wake.map_or(at, |w| w.min(at)));
            }
        }
        wake
    }
}
