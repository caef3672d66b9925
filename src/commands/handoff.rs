//! `bootstrap gitops handoff`: the hand-off on its own, to a cluster named by a kubeconfig (the
//! install's handoff stage runs the same steps). One live line for the step and one per
//! Application on stderr; the report on stdout (text or JSON), `applied.json` and
//! `handoff.json` in `--out`. Exit 0 when the root and every child are Synced and Healthy, 1
//! when a step or a wait failed, 2 when the inventory or the mirror was refused before the
//! cluster was touched.

use super::Printer;
use crate::cli::GitopsHandoffArgs;
use crate::gitops::handoff::{self, Event, Options, Report};
use crate::install::rundir::{APPLIED_FILE, HANDOFF_FILE};
use crate::install::stage::handoff::prepare;
use crate::output::NodeLines;
use anyhow::{anyhow, Context, Result};
use std::fmt;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Runs `bootstrap gitops handoff`.
pub async fn run(args: GitopsHandoffArgs, printer: &Printer) -> Result<ExitCode> {
    let prepared = crate::inventory::load(&args.inventory)
        .map_err(|e| anyhow!("{e}"))
        .and_then(|inv| Ok((prepare(&inv)?, inv)));
    let (h, inv) = match prepared {
        Ok(p) => p,
        Err(e) => {
            printer.error(format_args!("{e:#}"));
            printer.note("refused before the cluster was touched\n");
            return Ok(ExitCode::from(2));
        }
    };
    let g = inv.site.gitops.as_ref().expect("prepare checked gitops");
    let opts = Options {
        kubeconfig: args.kubeconfig.clone(),
        api_address: None,
        insecure_api: args.insecure_api.clone(),
        timeout: args.timeout.unwrap_or_else(|| g.wait_timeout()),
        timeout_from: if args.timeout.is_some() {
            "--timeout"
        } else {
            "gitops.waitTimeout"
        },
        poll: std::time::Duration::from_millis(args.poll_ms.unwrap_or(2000)),
    };
    let mut names = vec!["step".to_string(), h.root_name()];
    names.extend(h.children.iter().cloned());
    let lines = NodeLines::new("handoff", &names);
    let on = |e: Event| match e {
        Event::Step { step, message } => lines.set("step", format!("{step}: {message}")),
        Event::App { name, message } => lines.set(&name, message),
    };
    // Ctrl-C stops the hand-off at its next wait with a message; a rerun continues it.
    let cancel = Arc::new(AtomicBool::new(false));
    let watcher = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                cancel.store(true, Ordering::SeqCst);
            }
        })
    };
    let result = handoff::run(&h, &opts, &cancel, &on).await;
    watcher.abort();
    lines.finish();
    let report = match result {
        Ok(r) => r,
        Err(e) => {
            printer.error(format_args!("{e:#}"));
            if cancel.load(Ordering::SeqCst) {
                printer.note("interrupted: rerun the same command to continue\n");
                return Ok(ExitCode::from(130));
            }
            return Ok(ExitCode::from(1));
        }
    };
    fs_err::create_dir_all(&args.out)?;
    for (file, text) in [
        (APPLIED_FILE, serde_json::to_string_pretty(&report.applied)?),
        (HANDOFF_FILE, serde_json::to_string_pretty(&report)?),
    ] {
        let path = args.out.join(file);
        crate::oci::layout::write_atomic(&path, (text + "\n").as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    printer.result(&Shown(&report))?;
    Ok(ExitCode::SUCCESS)
}

/// The report as text: the operator, then each Application.
struct Shown<'a>(&'a Report);

impl serde::Serialize for Shown<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.0;
        writeln!(
            f,
            "OpenShift GitOps {} from CatalogSource {}; {} objects applied",
            r.csv,
            r.catalog,
            r.applied.len()
        )?;
        if let Some(t) = &r.api_trust {
            writeln!(f, "the cluster API's TLS: {t}")?;
        }
        let w = r
            .applications
            .iter()
            .map(|a| a.name.len())
            .max()
            .unwrap_or(4);
        for a in &r.applications {
            writeln!(
                f,
                "  {:w$}  {:9} {:11} {}",
                a.name,
                a.sync,
                a.health,
                a.revision.as_deref().unwrap_or("")
            )?;
        }
        Ok(())
    }
}
