//! The wait stage: waiting for the install ([`crate::openshift::watch`], as `openshift-install
//! agent wait-for install-complete` does) from what the iso stage left in `RUN/iso/work/`: the
//! rendezvous IP, the watcher token of the installer's state file and `auth/kubeconfig`. It
//! shows one live line per host and every message of the watch, keeps them in its log, and
//! remembers what was shown in `RUN/cache/wait.json`, so a rerun does not show it again. A
//! rerun simply waits again (it serves the ISO again, at the address the boot stage recorded,
//! when a resumed run does not serve it yet).
//!
//! Once the cluster is installed, the virtual media of every node the boot stage booted are
//! ejected ([`super::eject`]), so a later reboot boots the disk: each node checked to be the
//! one meant, on the same live lines. This is the only time the stage touches a BMC; a rerun
//! sees the cluster installed at once and ejects again, harmlessly. A node whose media may
//! still be inserted fails the stage, naming it, its BMC and the fix.
//!
//! `wait/result.json` records the final cluster status, each host's last stage, the times and
//! the events seen; `wait/media.json` each booted node's media ejected.

use super::{eject, Inputs, IsoServer, StageContext, StageWork, WaitLimits};
use crate::install::log::StageLog;
use crate::install::rundir::{InstallerDir, ISO_DIR, ISO_FILE, WAIT_DIR, WAIT_FILE};
use crate::openshift::assisted::ApiError;
use crate::openshift::watch::{watcher_token, watcher_token_in, WaitView, Watch, POLL};
use anyhow::{Context, Result};
use std::path::Path;
use std::time::Duration;

/// The test hook that shortens the polling interval: `BOOTSTRAP_TEST_WAIT_POLL_MS=N`.
pub const POLL_ENV: &str = "BOOTSTRAP_TEST_WAIT_POLL_MS";

/// The wait stage.
pub struct Wait;

impl StageWork for Wait {
    fn inputs(&self, cx: &StageContext) -> Result<Inputs> {
        let mut inputs = Inputs::default();
        inputs.run_file(&cx.run, &cx.run.root().join(ISO_DIR).join(ISO_FILE))?;
        if !cx.insecure_api.is_empty() {
            inputs.setting("insecureApi", &cx.insecure_api.join(","));
        }
        Ok(inputs)
    }

    fn output_dir(&self) -> Option<&'static str> {
        Some(WAIT_DIR)
    }

    fn run(
        &self,
        cx: &StageContext,
        iso: &mut IsoServer,
        out: &Path,
        log: &mut StageLog,
    ) -> Result<String> {
        let watch = Watch {
            seen_file: Some(cx.run.wait_cache()),
            poll: poll_interval(),
            insecure_api: cx.insecure_api.clone(),
            ..installer_watch(&cx.run.installer(), cx.wait_limits)?
        };
        log.line(&format!(
            "waiting: rendezvous {}, kubeconfig {}, limits {}m bootstrap, {}m install",
            watch.rendezvous,
            watch.kubeconfig.display(),
            watch.limits.bootstrap.as_secs() / 60,
            watch.limits.install.as_secs() / 60
        ))?;
        let handle = tokio::runtime::Handle::current();
        // The BMCs still read the ISO while their nodes boot: a resumed run serves it again at
        // the address the boot stage recorded.
        if let Some(url) = handle.block_on(super::served::serve_again(cx, iso))? {
            log.line(&format!(
                "the ISO is served at {url} while the nodes need it"
            ))?;
        }
        // Only the order of the live lines: the watch names the hosts it sees itself.
        let inv = crate::inventory::load(&cx.inventory);
        let nodes: Vec<String> = inv
            .as_ref()
            .map(|inv| inv.nodes.nodes.iter().map(|n| n.hostname.clone()).collect())
            .unwrap_or_default();
        let mut view = StageView::new(log, &nodes);
        let result = handle.block_on(watch.run(&cx.cancel, &mut view));
        let result = result.map_err(|e| {
            view.finish();
            match e.downcast_ref::<ApiError>() {
                Some(ApiError::Refused { .. }) => e.context(format!(
                    "the rendezvous host refuses the watcher token of {}: did the nodes boot the ISO this run's iso stage made?",
                    InstallerDir::in_iso(Path::new(ISO_DIR)).state().display()
                )),
                _ => e,
            }
        })?;
        fs_err::create_dir_all(out)?;
        crate::fs::write_json(&out.join(WAIT_FILE), &result)?;
        // Installed: the media out, so a later reboot boots the disk.
        let booted = match &inv {
            Ok(inv) => eject::booted(inv, &cx.run),
            Err(e) if eject::any_booted(&cx.run) => {
                view.finish();
                anyhow::bail!(
                    "the cluster is installed, but the inventory does not load ({e}), so the virtual media of the nodes bootstrap booted were not ejected and a node may boot the ISO again at its next reboot: correct the inventory, then rerun `bootstrap install`: the wait stage sees the cluster installed at once and ejects them; or eject them in the BMCs' UIs"
                );
            }
            Err(_) => Vec::new(),
        };
        let ejected = match (&inv, booted.is_empty()) {
            (Ok(inv), false) => handle.block_on(eject::eject_all(
                inv,
                &booted,
                &view.lines,
                cx.cancel.clone(),
            )),
            _ => Ok(Vec::new()),
        };
        view.finish();
        let ejected = ejected?;
        if booted.is_empty() {
            log.line(
                "no node was booted by bootstrap (no boot ledger): no virtual media to eject",
            )?;
        } else {
            eject::record(&ejected, out, log)?;
        }
        Ok(format!(
            "cluster {} installed{}{}{}",
            result.cluster.as_ref().map_or("", |c| c.name.as_str()),
            result
                .console
                .as_ref()
                .map(|c| format!(", console https://{c}"))
                .unwrap_or_default(),
            eject::detail(&ejected),
            result
                .api_trust
                .as_ref()
                .map(|t| format!("; cluster API TLS {t}"))
                .unwrap_or_default()
        ))
    }

    fn secrets(&self, cx: &StageContext) -> Vec<String> {
        let mut secrets = super::inputs::inventory_secrets(&cx.inventory);
        let work = cx.run.installer();
        if let Ok(token) = watcher_token(&work.state()) {
            secrets.push(token);
        }
        if let Ok(text) = fs_err::read_to_string(work.kubeconfig()) {
            secrets.extend(
                text.lines()
                    .filter_map(|l| l.trim().strip_prefix("token:"))
                    .map(|t| t.trim().to_string())
                    .filter(|t| !t.is_empty()),
            );
        }
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets
    }
}

/// The interval of the wait's polls (and the boot stage's watch for each node's sign):
/// [`POLL`], or [`POLL_ENV`] in tests.
pub(super) fn poll_interval() -> Duration {
    std::env::var(POLL_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(POLL, Duration::from_millis)
}

/// The watch of what the installer left in its `work` folder: `rendezvousIP`, the state
/// file's watcher token, `auth/kubeconfig`.
fn installer_watch(work: &InstallerDir, limits: WaitLimits) -> Result<Watch> {
    let ip_file = work.rendezvous_ip();
    let ip: std::net::IpAddr = fs_err::read_to_string(&ip_file)
        .context("the wait stage needs the iso stage's outputs: run it first")?
        .trim()
        .parse()
        .with_context(|| format!("{}: not an IP address", ip_file.display()))?;
    let kubeconfig = work.kubeconfig();
    if !kubeconfig.is_file() {
        anyhow::bail!(
            "{} is missing: run the iso stage again",
            kubeconfig.display()
        );
    }
    let state = work.state();
    let text = fs_err::read_to_string(&state)
        .context("the wait stage needs the installer's state file: run the iso stage again")?;
    let token = watcher_token_in(&text, &state)?;
    Ok(Watch::new(ip, token, kubeconfig, limits))
}

/// The stage's view: every line into the stage log; one live line per host on a terminal
/// (`output::NodeLines`, the boot stage's too) with messages above them, plain lines otherwise.
struct StageView<'a> {
    log: &'a mut StageLog,
    lines: crate::output::NodeLines,
}

impl<'a> StageView<'a> {
    fn new(log: &'a mut StageLog, nodes: &[String]) -> Self {
        StageView {
            log,
            lines: crate::output::NodeLines::new("wait", nodes),
        }
    }

    fn finish(&mut self) {
        self.lines.finish();
    }
}

impl WaitView for StageView<'_> {
    fn host(&mut self, name: &str, line: &str) {
        let _ = self.log.line(line);
        // The line starts with the host's name, which NodeLines shows itself.
        let shown = line.strip_prefix(name).unwrap_or(line).trim_start();
        self.lines.set(name, self.log.redact(shown));
    }

    fn trace(&mut self, line: &str) {
        let _ = self.log.line(line);
    }

    fn say(&mut self, line: &str) {
        let _ = self.log.line(line);
        self.lines.println(&self.log.redact(line));
    }
}
