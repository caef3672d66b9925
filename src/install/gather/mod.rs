//! `bootstrap gather`: one support bundle (`tar.gz`) from a run directory and its inventory, as
//! `openshift-install agent gather bootstrap` and the rendezvous host's `agent-gather` script
//! collect for the agent installer, widened to what this install touches: the run directory
//! ([`runfiles`]), every node over Redfish and SSH in parallel, each within a time bound
//! ([`node`]), the rendezvous host's assisted-service and the cluster's API ([`cluster`]).
//! Everything passes the redactor built from every secret the run knows, and the bundle is
//! scanned for each of them before it is written ([`bundle`]). Only reads are sent.
//!
//! A node, BMC or API that does not answer is listed as not collected, with why; the bundle is
//! still written (a partial bundle is what a support engineer needs most when things are
//! broken), and the result says it is partial.

pub mod bundle;
pub mod cluster;
pub mod node;
pub mod runfiles;

use crate::install::rundir::RunDir;
use crate::output::NodeLines;
use anyhow::{anyhow, Context, Result};
use bundle::{Bundle, Manifest, Missing};
use serde::Serialize;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The default per-node time bound (`--node-timeout`).
pub const NODE_TIMEOUT: Duration = Duration::from_secs(120);
/// Nodes gathered at once.
pub const PARALLEL: usize = 8;

/// What `bootstrap gather` is asked to do.
#[derive(Clone, Debug)]
pub struct GatherSettings {
    /// The inventory directory (the nodes, their BMCs and SSH, the secrets to redact).
    pub inventory: PathBuf,
    /// The run directory.
    pub run: PathBuf,
    /// The bundle's path; `None`: `RUN/gather/gather-<UTC time>.tar.gz`.
    pub out: Option<PathBuf>,
    /// Each node's time bound (and the cluster's part's).
    pub node_timeout: Duration,
    /// `--insecure-api HOST`, as the install was given it.
    pub insecure_api: Vec<String>,
}

/// What was gathered.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GatherReport {
    /// The bundle written.
    pub bundle: PathBuf,
    /// Files in it (besides the manifest and SHA256SUMS).
    pub files: usize,
    /// Whether something could not be collected.
    pub partial: bool,
    /// What could not be collected, and why.
    pub not_collected: Vec<Missing>,
    /// What there was nothing of, and why.
    pub nothing_to_collect: Vec<Missing>,
    /// Files of the run directory left out on purpose.
    pub left_out: usize,
}

impl fmt::Display for GatherReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "support bundle {} ({} files; {} run files left out on purpose, listed in its manifest.json)",
            self.bundle.display(),
            self.files,
            self.left_out
        )?;
        if self.not_collected.is_empty() {
            writeln!(f, "everything was collected")?;
        } else {
            writeln!(f, "partial: {} not collected:", self.not_collected.len())?;
            for m in &self.not_collected {
                writeln!(f, "  {}", line(m))?;
            }
        }
        for m in &self.nothing_to_collect {
            writeln!(f, "  (nothing to collect) {}", line(m))?;
        }
        Ok(())
    }
}

fn line(m: &Missing) -> String {
    match &m.node {
        Some(n) => format!("{n}: {}: {}", m.what, m.why),
        None => format!("{}: {}", m.what, m.why),
    }
}

/// The bundle's name for a time: `gather-20261205T185000Z`.
fn bundle_name(now: time::OffsetDateTime) -> String {
    let fmt = time::macros::format_description!("[year][month][day]T[hour][minute][second]Z");
    format!("gather-{}", now.format(fmt).unwrap_or_default())
}

/// Gathers the support bundle.
pub async fn run(settings: &GatherSettings) -> Result<GatherReport> {
    let run = RunDir::new(&settings.run);
    if !run.root().is_dir() {
        anyhow::bail!("--run {}: no such run directory", run.root().display());
    }
    let inv = crate::inventory::load(&settings.inventory)
        .map_err(|e| anyhow!("{e}"))
        .with_context(|| format!("loading the inventory {}", settings.inventory.display()))?;
    let top = bundle_name(time::OffsetDateTime::now_utc());
    let out = match &settings.out {
        Some(p) => p.clone(),
        None => run.gather_dir().join(format!("{top}.tar.gz")),
    };
    bundle::check_out(&out)?;
    let parent = out.parent().filter(|p| !p.as_os_str().is_empty());
    let parent = parent.unwrap_or(Path::new("."));
    fs_err::create_dir_all(parent)?;
    let staging = parent.join(format!(".{top}.staging-{}", std::process::id()));
    let manifest = Manifest {
        bundle: top.clone(),
        created: crate::install::state::now(),
        bootstrap_version: env!("CARGO_PKG_VERSION").to_string(),
        run: run.root().display().to_string(),
        ..Manifest::default()
    };
    let secrets = secrets(&settings.inventory, &run);
    let result = async {
        let bundle = Arc::new(Bundle::new(&staging, &secrets, manifest)?);
        runfiles::collect(&bundle, run.root())?;
        gather_live(&bundle, &inv, &run, settings).await?;
        let bundle =
            Arc::try_unwrap(bundle).map_err(|_| anyhow!("a node's task outlived the gather"))?;
        bundle.finish(&top, &out)
    }
    .await;
    let _ = fs_err::remove_dir_all(&staging);
    let manifest = result?;
    Ok(GatherReport {
        bundle: out,
        files: manifest.files.len(),
        partial: !manifest.not_collected.is_empty(),
        not_collected: manifest.not_collected,
        nothing_to_collect: manifest.nothing_to_collect,
        left_out: manifest.left_out.len(),
    })
}

/// The nodes (in parallel, each within its bound) and the cluster's part beside them.
async fn gather_live(
    bundle: &Arc<Bundle>,
    inv: &crate::inventory::Inventory,
    run: &RunDir,
    settings: &GatherSettings,
) -> Result<()> {
    let names: Vec<String> = inv.nodes.nodes.iter().map(|n| n.hostname.clone()).collect();
    let lines = NodeLines::new("gather", &names);
    let ssh = crate::hostprep::hosts::site_hosts(inv, &run.known_hosts()?, Duration::ZERO)
        .map_err(|e| format!("{e:#}"));
    let permits = Arc::new(tokio::sync::Semaphore::new(PARALLEL));
    let mut tasks = tokio::task::JoinSet::new();
    for (i, node) in inv.nodes.nodes.iter().enumerate() {
        let remote: Result<Arc<dyn crate::hostprep::Remote>, String> = match &ssh {
            Ok(hosts) => Ok(hosts[i].ssh.clone()),
            Err(e) => Err(e.clone()),
        };
        let ledger = fs_err::read_to_string(run.boot_ledger(&node.hostname)).ok();
        let src = node::NodeSources {
            node: node.hostname.clone(),
            bmc: crate::preflight::bmc::target(inv, i, node).map_err(|e| format!("{e:#}")),
            ssh: remote,
            boot_ledger: ledger,
        };
        let (bundle, lines, permits) = (bundle.clone(), lines.clone(), permits.clone());
        let limit = settings.node_timeout;
        tasks.spawn(async move {
            let _permit = permits.acquire_owned().await;
            node::gather(bundle, src, limit, lines).await
        });
    }
    let work = run.installer();
    let cluster = async {
        cluster::rendezvous(bundle, &work).await;
        cluster::cluster_api(bundle, &work, &settings.insecure_api).await;
    };
    if tokio::time::timeout(settings.node_timeout, cluster)
        .await
        .is_err()
    {
        bundle.not_collected(
            None,
            "rendezvous host and cluster API",
            "the time bound (--node-timeout) ended it; what was read is kept",
        );
    }
    while let Some(done) = tasks.join_next().await {
        if let Err(e) = done {
            bundle.not_collected(None, "a node", format!("its task failed: {e}"));
        }
    }
    lines.finish();
    Ok(())
}

/// Every secret the run knows: the inventory's ([`crate::install::stage::inputs`]), the
/// installer's tokens (the state file's `AuthConfig`), the admin kubeconfig's token and client
/// key, and the kubeadmin password.
pub fn secrets(inventory: &Path, run: &RunDir) -> Vec<String> {
    let mut secrets = crate::install::stage::inputs::inventory_secrets(inventory);
    let work = run.installer();
    if let Ok(text) = fs_err::read_to_string(work.state()) {
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
            if let Some(auth) = v["*gencrypto.AuthConfig"].as_object() {
                secrets.extend(
                    auth.values()
                        .filter_map(|t| t.as_str())
                        .filter(|t| t.len() >= 16)
                        .map(str::to_string),
                );
            }
        }
    }
    if let Ok(text) = fs_err::read_to_string(work.kubeconfig()) {
        for line in text.lines().map(str::trim) {
            for key in ["token:", "client-key-data:"] {
                if let Some(v) = line.strip_prefix(key).map(str::trim) {
                    if !v.is_empty() {
                        secrets.push(v.to_string());
                        secrets.extend(decoded_key(v));
                    }
                }
            }
        }
    }
    if let Ok(text) = fs_err::read_to_string(work.kubeadmin_password()) {
        secrets.push(text.trim().to_string());
    }
    secrets.retain(|s| !s.is_empty());
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    secrets.dedup();
    secrets
}

/// A kubeconfig's `client-key-data` decoded: the PEM key whole and each line of its body.
fn decoded_key(b64: &str) -> Vec<String> {
    use base64::Engine as _;
    let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(b64) else {
        return Vec::new();
    };
    let Ok(pem) = String::from_utf8(bytes) else {
        return Vec::new();
    };
    let mut out: Vec<String> = pem
        .lines()
        .map(str::trim)
        .filter(|l| l.len() >= 16 && !l.starts_with("-----"))
        .map(str::to_string)
        .collect();
    out.push(pem.trim().to_string());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundle_is_named_by_its_utc_time() {
        let t = time::macros::datetime!(2026-12-05 18:50:07 UTC);
        assert_eq!(bundle_name(t), "gather-20261205T185007Z");
    }

    /// The installer's tokens, the kubeconfig's token and key, and the kubeadmin password are
    /// secrets of the run, found where the installer leaves them.
    #[test]
    fn the_installer_credentials_are_secrets_of_the_run() {
        use base64::Engine as _;
        let tmp = tempfile::tempdir().unwrap();
        let run = RunDir::new(tmp.path());
        let work = run.installer();
        fs_err::create_dir_all(work.path().join("auth")).unwrap();
        fs_err::write(
            work.state(),
            r#"{"*gencrypto.AuthConfig":{"WatcherAuthToken":"watcher-token-0123456789","AgentAuthToken":"agent-token-0123456789"}}"#,
        )
        .unwrap();
        let pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAtestkeybody0123\n-----END RSA PRIVATE KEY-----\n";
        let key = base64::engine::general_purpose::STANDARD.encode(pem);
        fs_err::write(
            work.kubeconfig(),
            format!("users:\n- name: admin\n  user:\n    token: kube-token-0123456789\n    client-key-data: {key}\n"),
        )
        .unwrap();
        fs_err::write(work.kubeadmin_password(), "kubeadmin-pass-01234\n").unwrap();
        let s = secrets(tmp.path(), &run);
        for want in [
            "watcher-token-0123456789",
            "agent-token-0123456789",
            "kube-token-0123456789",
            key.as_str(),
            "MIIEpAIBAAKCAQEAtestkeybody0123",
            "kubeadmin-pass-01234",
        ] {
            assert!(s.iter().any(|x| x == want), "{want} not in {s:?}");
        }
    }
}
