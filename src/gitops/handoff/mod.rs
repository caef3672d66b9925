//! The hand-off to Argo CD, in order, each wait observed (REFERENCE section 5):
//!
//! 1. `mirror`: the mirror's cluster resources (ImageDigestMirrorSet, ImageTagMirrorSet, the
//!    release signatures, one CatalogSource per catalog) and OperatorHub `cluster` with
//!    `disableAllDefaultSources: true`; then every mirrored CatalogSource READY.
//! 2. `operator`: OpenShift GitOps from the mirrored catalog (Namespace, OperatorGroup,
//!    Subscription); then `installedCSV`, the CSV `Succeeded`, the Argo CD CRDs Established and
//!    ArgoCD `openshift-gitops` `Available`.
//! 3. `credentials`: the repository Secret (`data`), the Git server's CA into
//!    `argocd-tls-certs-cm`, its host keys into `argocd-ssh-known-hosts-cm`.
//! 4. `tenancy`: the narrow ClusterRole the tenants need, bound to the application controller,
//!    and the Application health check in the ArgoCD resource.
//! 5. `root`: the AppProject and the root Application; then the root and every child Synced and
//!    Healthy.
//!
//! Every object goes through a server-side dry run before the step's first real apply, then a
//! server-side apply (field manager `bootstrap`, Strict field validation); each is recorded
//! with its uid and resourceVersion. Applying what is already there changes nothing, so a rerun
//! (after a failure or a kill) walks the same steps and finds its waits already satisfied.

pub mod objects;

use super::kube::{describe, Cluster, Redactor};
use crate::openshift::readiness::condition;
use anyhow::{anyhow, bail, Result};
use objects::*;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The steps, in order.
pub const STEPS: [&str; 5] = ["mirror", "operator", "credentials", "tenancy", "root"];

/// What the hand-off applies: read from the inventory, the mirror and the repository.
pub struct Handoff {
    /// The inventory's `gitops`.
    pub gitops: crate::inventory::model::Gitops,
    /// The mirror's cluster resources ([`objects::mirror_resources`]).
    pub mirror: Vec<Value>,
    /// The CatalogSource OpenShift GitOps comes from (`gitops.operator.catalog`, else the
    /// mirrored catalog that usually carries it).
    pub catalog: String,
    /// The repository's credentials, read from their references.
    pub creds: RepoCredentials,
    /// The AppProject(s) and the root Application, as the repository's `bootstrap/` has them.
    pub root: Vec<Value>,
    /// The child Applications the root is expected to make (the repository's `apps/`).
    pub children: Vec<String>,
}

impl Handoff {
    /// Every secret the hand-off carries, for redaction.
    pub fn redactor(&self) -> Redactor {
        let secrets: Vec<&crate::secret::Secret> =
            [&self.creds.password, &self.creds.ssh_private_key]
                .into_iter()
                .flatten()
                .collect();
        Redactor::new(&secrets)
    }

    /// The root Application's name.
    pub fn root_name(&self) -> String {
        self.root
            .iter()
            .find(|o| o["kind"] == "Application")
            .and_then(|o| o["metadata"]["name"].as_str())
            .unwrap_or("root")
            .to_string()
    }
}

/// How the hand-off reaches the cluster and how long it waits.
#[derive(Clone, Debug)]
pub struct Options {
    /// The installer's admin kubeconfig.
    pub kubeconfig: PathBuf,
    /// Dialled instead of the kubeconfig's server, when given.
    pub api_address: Option<SocketAddr>,
    /// The API hosts the operator named with `--insecure-api` (plain HTTP or unverified TLS
    /// allowed for them).
    pub insecure_api: Vec<String>,
    /// The limit on all the waits together (`gitops.waitTimeout`).
    pub timeout: Duration,
    /// Where the limit was set, for the message when it is reached (`gitops.waitTimeout`,
    /// `--timeout`).
    pub timeout_from: &'static str,
    /// How often a wait asks again.
    pub poll: Duration,
}

/// What the hand-off reports as it goes.
#[derive(Clone, Debug)]
pub enum Event {
    /// A step's progress.
    Step {
        /// The step.
        step: &'static str,
        /// What it is doing.
        message: String,
    },
    /// An Application's state (one live line each).
    App {
        /// The Application.
        name: String,
        /// `Synced Healthy`, or what it waits on.
        message: String,
    },
}

/// One object applied, as `applied.json` records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppliedRecord {
    /// The step that applied it.
    pub step: String,
    /// Its apiVersion.
    pub api_version: String,
    /// Its kind.
    pub kind: String,
    /// Its namespace, for a namespaced object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// Its uid.
    pub uid: String,
    /// Its resourceVersion after the apply.
    pub resource_version: String,
}

/// An Application at the end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppState {
    /// Its name.
    pub name: String,
    /// `status.sync.status`.
    pub sync: String,
    /// `status.health.status`.
    pub health: String,
    /// `status.sync.revision`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// Its conditions and the last operation's message, when it is not Synced and Healthy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

impl AppState {
    fn of(app: &Value) -> Self {
        let s = &app["status"];
        let text = |v: &Value, default: &str| v.as_str().unwrap_or(default).to_string();
        let mut problems: Vec<String> = s["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| format!("{}: {}", text(&c["type"], "?"), text(&c["message"], "")))
            .collect();
        if let Some(m) = s["operationState"]["message"]
            .as_str()
            .filter(|m| !m.is_empty())
        {
            problems.push(format!(
                "operation {}: {m}",
                text(&s["operationState"]["phase"], "?")
            ));
        }
        if let Some(m) = s["health"]["message"].as_str().filter(|m| !m.is_empty()) {
            problems.push(format!("health: {m}"));
        }
        AppState {
            name: text(&app["metadata"]["name"], "?"),
            sync: text(&s["sync"]["status"], "Unknown"),
            health: text(&s["health"]["status"], "Unknown"),
            revision: s["sync"]["revision"].as_str().map(str::to_string),
            problems,
        }
    }

    /// Synced and Healthy.
    pub fn done(&self) -> bool {
        self.sync == "Synced" && self.health == "Healthy"
    }

    fn line(&self) -> String {
        match (self.done(), self.problems.first()) {
            (true, _) => format!("{} {}", self.sync, self.health),
            (false, Some(p)) => format!("{} {}: {p}", self.sync, self.health),
            (false, None) => format!("{} {}", self.sync, self.health),
        }
    }
}

/// What the hand-off did.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Every object applied, in order.
    pub applied: Vec<AppliedRecord>,
    /// The CatalogSource OpenShift GitOps came from.
    pub catalog: String,
    /// The operator's ClusterServiceVersion.
    pub csv: String,
    /// Every Application at the end.
    pub applications: Vec<AppState>,
    /// How the cluster's API was trusted, when not verified (the operator allowed it with
    /// `--insecure-api`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_trust: Option<String>,
}

/// What a wait check says: done, or what it is still waiting on.
enum Check<T> {
    Done(T),
    Waiting(String),
}

struct Run<'a> {
    cluster: Cluster,
    opts: &'a Options,
    cancel: &'a AtomicBool,
    on: &'a (dyn Fn(Event) + Sync),
    deadline: Instant,
    applied: Mutex<Vec<AppliedRecord>>,
}

/// Runs the hand-off: every step in order, each wait observed.
pub async fn run(
    h: &Handoff,
    opts: &Options,
    cancel: &AtomicBool,
    on: &(dyn Fn(Event) + Sync),
) -> Result<Report> {
    let cluster = Cluster::connect(
        &opts.kubeconfig,
        opts.api_address,
        &opts.insecure_api,
        h.redactor(),
    )
    .await?;
    let api_trust = (!cluster.trust().verified()).then(|| cluster.trust().label());
    let r = Run {
        cluster,
        opts,
        cancel,
        on,
        deadline: Instant::now() + opts.timeout,
        applied: Mutex::default(),
    };
    if let Some(label) = &api_trust {
        r.say("cluster", format!("the cluster API's TLS: {label}"));
    }
    let catalog = h.catalog.clone();
    r.mirror(h).await?;
    let csv = r.operator(h, &catalog).await?;
    r.credentials(h).await?;
    r.tenancy().await?;
    let applications = r.root(h).await?;
    Ok(Report {
        applied: r.applied.into_inner().expect("applied"),
        catalog,
        csv,
        applications,
        api_trust,
    })
}

impl Run<'_> {
    fn say(&self, step: &'static str, message: impl Into<String>) {
        (self.on)(Event::Step {
            step,
            message: message.into(),
        });
    }

    /// Namespaces first (a namespaced object's dry run needs its namespace), then a
    /// server-side dry run of every other object and the real applies, each recorded:
    /// a refused object stops the step before anything of the batch changed.
    async fn apply_all(&self, step: &'static str, objs: &[Value]) -> Result<()> {
        let (namespaces, rest): (Vec<Value>, Vec<Value>) =
            objs.iter().cloned().partition(|o| o["kind"] == "Namespace");
        self.apply_batch(step, &namespaces).await?;
        self.apply_batch(step, &rest).await
    }

    async fn apply_batch(&self, step: &'static str, objs: &[Value]) -> Result<()> {
        for o in objs {
            self.cluster.apply(o, true).await?;
        }
        for o in objs {
            let done = self.cluster.apply(o, false).await?;
            self.say(step, format!("applied {}", describe(o)));
            self.applied.lock().expect("applied").push(AppliedRecord {
                step: step.to_string(),
                api_version: o["apiVersion"].as_str().unwrap_or_default().to_string(),
                kind: o["kind"].as_str().unwrap_or_default().to_string(),
                namespace: o["metadata"]["namespace"].as_str().map(str::to_string),
                name: o["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                uid: done.uid().to_string(),
                resource_version: done.resource_version().to_string(),
            });
        }
        Ok(())
    }

    /// Asks `check` until it is done, the run's limit, or a cancel; its last message names
    /// what was waited on when the limit comes.
    async fn until<T>(
        &self,
        step: &'static str,
        what: &str,
        mut check: impl AsyncFnMut() -> Result<Check<T>>,
    ) -> Result<T> {
        let mut last = String::new();
        loop {
            if self.cancel.load(Ordering::SeqCst) {
                bail!("interrupted while waiting for {what}");
            }
            match check().await? {
                Check::Done(v) => return Ok(v),
                Check::Waiting(m) => {
                    if m != last {
                        self.say(step, format!("waiting for {what}: {m}"));
                        last = m;
                    }
                }
            }
            if Instant::now() >= self.deadline {
                bail!(
                    "gave up after {} ({}) waiting for {what}: {last}",
                    crate::output::human_duration(self.opts.timeout),
                    self.opts.timeout_from
                );
            }
            tokio::time::sleep(self.opts.poll).await;
        }
    }

    async fn mirror(&self, h: &Handoff) -> Result<()> {
        let mut objs = h.mirror.clone();
        objs.push(operator_hub());
        self.apply_all("mirror", &objs).await?;
        let catalogs: Vec<String> = h
            .mirror
            .iter()
            .filter(|o| o["kind"] == "CatalogSource")
            .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_string))
            .collect();
        for name in catalogs {
            self.until(
                "mirror",
                &format!("CatalogSource {MARKETPLACE}/{name} READY"),
                async || {
                    let cs = self
                        .cluster
                        .get(
                            "operators.coreos.com/v1alpha1",
                            "CatalogSource",
                            Some(MARKETPLACE),
                            &name,
                        )
                        .await?;
                    let state = cs.as_ref().and_then(|c| {
                        c["status"]["connectionState"]["lastObservedState"]
                            .as_str()
                            .map(str::to_string)
                    });
                    Ok(match state.as_deref() {
                        Some("READY") => Check::Done(()),
                        Some(s) => Check::Waiting(s.to_string()),
                        None => Check::Waiting("no connection state yet".into()),
                    })
                },
            )
            .await?;
        }
        Ok(())
    }

    /// Installs OpenShift GitOps from `catalog` and waits for each stage OLM and the operator
    /// go through: the Subscription's CSV, the CSV Succeeded, Argo CD's CRDs Established, the
    /// ArgoCD instance Available. Returns the CSV's name.
    async fn operator(&self, h: &Handoff, catalog: &str) -> Result<String> {
        self.apply_all("operator", &operator_install(&h.gitops, catalog))
            .await?;
        let csv = self.installed_csv().await?;
        self.csv_succeeded(&csv).await?;
        self.argo_crds_established().await?;
        self.cluster.forget_kinds();
        self.argocd_available().await?;
        Ok(csv)
    }

    /// The ClusterServiceVersion the Subscription installed, once it names one.
    async fn installed_csv(&self) -> Result<String> {
        self.until("operator", "the Subscription's installedCSV", async || {
            let sub = self
                .cluster
                .get(
                    "operators.coreos.com/v1alpha1",
                    "Subscription",
                    Some(OPERATOR_NAMESPACE),
                    OPERATOR_PACKAGE,
                )
                .await?
                .unwrap_or_default();
            Ok(match sub["status"]["installedCSV"].as_str() {
                Some(csv) => Check::Done(csv.to_string()),
                None => Check::Waiting(subscription_state(&sub["status"])),
            })
        })
        .await
    }

    /// Waits for `csv` to reach phase Succeeded; its phase Failed fails the step.
    async fn csv_succeeded(&self, csv: &str) -> Result<()> {
        self.until(
            "operator",
            &format!("ClusterServiceVersion {csv} Succeeded"),
            async || {
                let found = self
                    .cluster
                    .get(
                        "operators.coreos.com/v1alpha1",
                        "ClusterServiceVersion",
                        Some(OPERATOR_NAMESPACE),
                        csv,
                    )
                    .await?
                    .unwrap_or_default();
                Ok(match found["status"]["phase"].as_str() {
                    Some("Succeeded") => Check::Done(()),
                    Some("Failed") => bail!(
                        "ClusterServiceVersion {csv} failed: {}",
                        found["status"]["message"].as_str().unwrap_or("no message")
                    ),
                    Some(p) => Check::Waiting(format!("phase {p}")),
                    None => Check::Waiting("not there yet".into()),
                })
            },
        )
        .await
    }

    /// Waits for each of Argo CD's CRDs to be Established.
    async fn argo_crds_established(&self) -> Result<()> {
        for crd in ARGO_CRDS {
            self.until("operator", &format!("CRD {crd} Established"), async || {
                let found = self
                    .cluster
                    .get(
                        "apiextensions.k8s.io/v1",
                        "CustomResourceDefinition",
                        None,
                        crd,
                    )
                    .await?;
                Ok(match found {
                    Some(c) if condition(&c["status"], "Established").0 => Check::Done(()),
                    Some(_) => Check::Waiting("not Established".into()),
                    None => Check::Waiting("not there yet".into()),
                })
            })
            .await?;
        }
        Ok(())
    }

    /// Waits for the operator's ArgoCD instance to be Available.
    async fn argocd_available(&self) -> Result<()> {
        self.until(
            "operator",
            &format!("ArgoCD {ARGO_NAMESPACE}/{ARGOCD_NAME} Available"),
            async || {
                let found = self
                    .cluster
                    .get(
                        "argoproj.io/v1beta1",
                        "ArgoCD",
                        Some(ARGO_NAMESPACE),
                        ARGOCD_NAME,
                    )
                    .await?;
                Ok(
                    match found.as_ref().and_then(|a| a["status"]["phase"].as_str()) {
                        Some("Available") => Check::Done(()),
                        Some(p) => Check::Waiting(format!("phase {p}")),
                        None => Check::Waiting("not there yet".into()),
                    },
                )
            },
        )
        .await
    }

    async fn credentials(&self, h: &Handoff) -> Result<()> {
        let repo = &h.gitops.repository;
        let mut objs = vec![repository_secret(repo, &h.creds)];
        if let Some(ca) = &h.creds.ca_pem {
            objs.push(tls_certs(repo, ca)?);
        }
        let current = self
            .cluster
            .get(
                "v1",
                "ConfigMap",
                Some(ARGO_NAMESPACE),
                "argocd-ssh-known-hosts-cm",
            )
            .await?;
        objs.extend(known_hosts(current.as_ref(), &repo.known_hosts));
        self.apply_all("credentials", &objs).await
    }

    async fn tenancy(&self) -> Result<()> {
        let mut objs = tenancy_rbac();
        let argocd = self
            .cluster
            .get(
                "argoproj.io/v1beta1",
                "ArgoCD",
                Some(ARGO_NAMESPACE),
                ARGOCD_NAME,
            )
            .await?
            .ok_or_else(|| anyhow!("ArgoCD {ARGO_NAMESPACE}/{ARGOCD_NAME} is gone"))?;
        objs.push(application_health_check(&argocd));
        self.apply_all("tenancy", &objs).await
    }

    async fn root(&self, h: &Handoff) -> Result<Vec<AppState>> {
        self.apply_all("root", &h.root).await?;
        let root = h.root_name();
        let mut expected: Vec<String> = vec![root.clone()];
        expected.extend(h.children.iter().cloned());
        let waited = self
            .until(
                "root",
                &format!("Application {root} and its children Synced and Healthy"),
                async || {
                    let apps = self.applications().await?;
                    for a in &apps {
                        (self.on)(Event::App {
                            name: a.name.clone(),
                            message: a.line(),
                        });
                    }
                    let missing: Vec<&String> = expected
                        .iter()
                        .filter(|e| !apps.iter().any(|a| &a.name == *e))
                        .collect();
                    let not_done: Vec<&AppState> = apps.iter().filter(|a| !a.done()).collect();
                    if missing.is_empty() && not_done.is_empty() {
                        return Ok(Check::Done(apps));
                    }
                    let mut parts: Vec<String> = missing
                        .iter()
                        .map(|m| format!("{m}: not created yet"))
                        .collect();
                    parts.extend(not_done.iter().map(|a| format!("{}: {}", a.name, a.line())));
                    Ok(Check::Waiting(parts.join("; ")))
                },
            )
            .await;
        match waited {
            Ok(apps) => Ok(apps),
            Err(e) => {
                let apps = self.applications().await.unwrap_or_default();
                let not_done: Vec<String> = apps
                    .iter()
                    .filter(|a| !a.done())
                    .map(|a| {
                        format!(
                            "{} {} {} ({})",
                            a.name,
                            a.sync,
                            a.health,
                            a.problems.join("; ")
                        )
                    })
                    .collect();
                Err(e.context(format!("not Synced and Healthy: {}", not_done.join(" | "))))
            }
        }
    }

    async fn applications(&self) -> Result<Vec<AppState>> {
        let mut apps: Vec<AppState> = self
            .cluster
            .list("argoproj.io/v1alpha1", "Application", Some(ARGO_NAMESPACE))
            .await?
            .iter()
            .map(AppState::of)
            .collect();
        apps.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(apps)
    }
}

/// What a Subscription without `installedCSV` is doing, from its state and conditions.
fn subscription_state(status: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(s) = status["state"].as_str() {
        parts.push(format!("state {s}"));
    }
    for c in status["conditions"].as_array().into_iter().flatten() {
        if c["status"] == "True" {
            parts.push(format!(
                "{}: {}",
                c["type"].as_str().unwrap_or("?"),
                c["message"].as_str().unwrap_or("")
            ));
        }
    }
    if parts.is_empty() {
        "not resolved yet".to_string()
    } else {
        parts.join("; ")
    }
}
