//! The handoff stage: "bootstrap once, then let Argo CD own day two" ([`crate::gitops::handoff`]):
//! the mirror's cluster resources, OpenShift GitOps from the mirrored catalog, the repository's
//! credentials, the tenants' RBAC and health check, the root Application, each wait observed,
//! with the installer's admin kubeconfig (`RUN/iso/work/auth/kubeconfig`). One live line for
//! the step and one per Application; every applied object goes to `logs/handoff.log`.
//!
//! Outputs (`RUN/handoff/`): `applied.json` (every object applied: step, kind, namespace, name,
//! uid, resourceVersion) and `handoff.json` (the catalog, the operator's CSV, every
//! Application's sync and health). Neither holds a secret: the repository password and key
//! live only in the Secret object.

use super::{Inputs, IsoServer, StageContext, StageWork};
use crate::gitops::handoff::{self, Event, Handoff, Options};
use crate::gitops::scaffold;
use crate::install::log::StageLog;
use crate::install::rundir::{APPLIED_FILE, HANDOFF_DIR, HANDOFF_FILE};
use crate::inventory::Inventory;
use crate::output::NodeLines;
use anyhow::{anyhow, bail, Context, Result};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The handoff stage.
pub struct HandoffStage;

/// The mirror's `cluster-resources/`, beside the record the inventory names.
fn cluster_resources(inv: &Inventory) -> Result<PathBuf> {
    let record = inv.site.references.mirror_record.as_ref().ok_or_else(|| {
        anyhow!("site.yaml: references.mirrorRecord is not set: the hand-off installs OpenShift GitOps from the mirror's catalogs, whose CatalogSources are written beside the mirror record; set it to the mirror's record file")
    })?;
    let path = inv.resolve(&record.file);
    let dir = path
        .parent()
        .unwrap_or(Path::new("."))
        .join(crate::openshift::cluster::DIR);
    if !dir.is_dir() {
        bail!(
            "{} is missing: bootstrap mirror writes it beside the record {}; mirror again or copy it across with the record",
            dir.display(),
            path.display()
        );
    }
    Ok(dir)
}

impl StageWork for HandoffStage {
    fn inputs(&self, cx: &StageContext) -> Result<Inputs> {
        let mut inputs = Inputs::default();
        inputs.run_file(&cx.run, &cx.run.installer().kubeconfig())?;
        // Read first: an inventory that does not load fails the inputs, naming it.
        cx.inventory()?;
        // The installed nodes' entries only: a node added on day two does not hand off again.
        inputs.file("inventory:site.yaml", &cx.inventory.join("site.yaml"))?;
        super::installed_inputs(&mut inputs, cx)?;
        inputs.setting("bootstrapVersion", env!("CARGO_PKG_VERSION"));
        if !cx.insecure_api.is_empty() {
            inputs.setting("insecureApi", &cx.insecure_api.join(","));
        }
        let inv = cx.inventory()?;
        if let Some(g) = &inv.site.gitops {
            let repo = &g.repository;
            if let Some(p) = &repo.password {
                inputs.secret("gitops.repository.password", &inv, p)?;
            }
            if let Some(k) = &repo.ssh_private_key {
                inputs.secret("gitops.repository.sshPrivateKey", &inv, k)?;
            }
            if let Some(ca) = &repo.ca {
                inputs.file(format!("inventory:{}", ca.file), &inv.resolve(&ca.file))?;
            }
        }
        for e in fs_err::read_dir(cluster_resources(&inv)?)? {
            let e = e?;
            let name = e.file_name().to_string_lossy().into_owned();
            inputs.file(
                format!("mirror:{}/{name}", crate::openshift::cluster::DIR),
                &e.path(),
            )?;
        }
        Ok(inputs)
    }

    fn output_dir(&self) -> Option<&'static str> {
        Some(HANDOFF_DIR)
    }

    fn run(
        &self,
        cx: &StageContext,
        _iso: &mut IsoServer,
        out: &Path,
        log: &mut StageLog,
    ) -> Result<String> {
        let inv = cx.inventory()?;
        let h = prepare(&inv)?;
        let kubeconfig = cx.run.installer().kubeconfig();
        if !kubeconfig.is_file() {
            bail!(
                "{} is missing: run the iso stage again",
                kubeconfig.display()
            );
        }
        let g = inv.site.gitops.as_ref().expect("prepare checked gitops");
        let opts = Options {
            kubeconfig,
            api_address: None,
            insecure_api: cx.insecure_api.clone(),
            timeout: g.wait_timeout(),
            timeout_from: "gitops.waitTimeout",
            poll: Duration::from_secs(2),
        };
        let mut names = vec!["step".to_string(), h.root_name()];
        names.extend(h.children.iter().cloned());
        let lines = NodeLines::new("handoff", &names);
        let logged = std::sync::Mutex::new(Vec::new());
        let on = |e: Event| match e {
            Event::Step { step, message } => {
                logged
                    .lock()
                    .expect("log")
                    .push(format!("{step}: {message}"));
                lines.set("step", format!("{step}: {message}"));
            }
            Event::App { name, message } => lines.set(&name, message),
        };
        let result =
            tokio::runtime::Handle::current().block_on(handoff::run(&h, &opts, &cx.cancel, &on));
        lines.finish();
        for line in logged.into_inner().expect("log") {
            log.line(&line)?;
        }
        let report = result?;
        fs_err::create_dir_all(out)?;
        write_json(&out.join(APPLIED_FILE), &report.applied)?;
        write_json(&out.join(HANDOFF_FILE), &report)?;
        Ok(format!(
            "OpenShift GitOps {} from {}; {} objects applied; {} Applications Synced and Healthy{}",
            report.csv,
            report.catalog,
            report.applied.len(),
            report.applications.len(),
            report
                .api_trust
                .as_ref()
                .map(|t| format!("; cluster API TLS {t}"))
                .unwrap_or_default()
        ))
    }

    fn secrets(&self, cx: &StageContext) -> Vec<String> {
        super::inputs::inventory_secrets(&cx.inventory)
    }
}

fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value)? + "\n";
    crate::oci::layout::write_atomic(path, text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

/// What the hand-off applies, from the inventory, the mirror and the repository.
pub fn prepare(inv: &Inventory) -> Result<Handoff> {
    let g = inv.site.gitops.clone().ok_or_else(|| {
        anyhow!("site.yaml has no gitops section: the hand-off needs the site's GitOps repository (docs/gitops.md); add one, or stop the install before it with --until prep")
    })?;
    let creds = credentials(inv, &g.repository)?;
    let mirror = handoff::objects::mirror_resources(&cluster_resources(inv)?)?;
    let catalogs = scaffold::read_catalog_sources(inv)?;
    let (choice, field) = scaffold::catalogs::choice(&g, scaffold::catalogs::GITOPS_PACKAGE);
    let catalog = scaffold::catalogs::catalog_for(
        inv,
        &catalogs,
        scaffold::catalogs::GITOPS_PACKAGE,
        choice,
        &field,
    )?;
    let repo = scaffold::scaffold(inv, &catalogs)?;
    let root = bootstrap_objects(&repo)?;
    Ok(Handoff {
        gitops: g,
        mirror,
        catalog,
        creds,
        root,
        children: repo.components.iter().map(|c| c.name.clone()).collect(),
    })
}

/// The repository's `bootstrap/` objects (the AppProject, then the root Application), as
/// `bootstrap gitops init` writes them: what is applied is what the repository holds.
fn bootstrap_objects(repo: &scaffold::Scaffold) -> Result<Vec<serde_json::Value>> {
    let mut objs = Vec::new();
    for f in repo
        .files
        .iter()
        .filter(|f| f.path.starts_with("bootstrap/"))
        // Kustomize's own file names the objects; it is not one.
        .filter(|f| !f.path.ends_with("/kustomization.yaml"))
    {
        let text = std::str::from_utf8(&f.bytes).context("the scaffold's bootstrap files")?;
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(text)
            .with_context(|| format!("reading the scaffold's {}", f.path))?;
        objs.extend(docs.into_iter().filter(|d| !d.is_null()));
    }
    objs.sort_by_key(|o| o["kind"] == "Application");
    if !objs.iter().any(|o| o["kind"] == "Application") {
        bail!(
            "the repository scaffold has no root Application in bootstrap/ (a bug of bootstrap's)"
        );
    }
    Ok(objs)
}

/// The repository's credentials, read from their references (never quoted in a message).
fn credentials(
    inv: &Inventory,
    repo: &crate::inventory::model::GitRepository,
) -> Result<handoff::objects::RepoCredentials> {
    use crate::inventory::secret_text;
    use crate::secret::Secret;
    let password = repo
        .password
        .as_ref()
        .map(|r| {
            secret_text(
                inv,
                "gitops.repository.password",
                r,
                "the Git password or token",
            )
        })
        .transpose()?
        .map(|t| Secret::new(t.trim_end_matches(['\r', '\n'])));
    if let Some(file) = repo.ssh_private_key.as_ref().and_then(|r| r.file.as_ref()) {
        // Refused before the cluster is touched, by validation's rule (`bootstrap gitops
        // handoff` does not validate first): a key others can read is no longer private.
        let path = inv.resolve(file);
        if let Ok(Some(mode)) = crate::secret::open_mode(&path) {
            let e = crate::hostprep::ssh::LoginKeyError::Exposed { path, mode };
            bail!("site.yaml gitops.repository.sshPrivateKey.file: {e}");
        }
    }
    let ssh_private_key = repo
        .ssh_private_key
        .as_ref()
        .map(|r| {
            secret_text(
                inv,
                "gitops.repository.sshPrivateKey",
                r,
                "an OpenSSH private key",
            )
        })
        .transpose()?
        .map(Secret::new);
    let ca_pem = repo
        .ca
        .as_ref()
        .map(|ca| {
            let path = inv.resolve(&ca.file);
            fs_err::read_to_string(&path).with_context(|| {
                format!(
                    "site.yaml: gitops.repository.ca: reading {}",
                    path.display()
                )
            })
        })
        .transpose()?;
    Ok(handoff::objects::RepoCredentials {
        username: repo.username.clone(),
        password,
        ssh_private_key,
        ca_pem,
    })
}
