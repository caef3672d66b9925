//! `bootstrap gitops`: the site's GitOps repository. `check` runs the repository checks
//! (`gitops::check`) on a checkout engineers edited by hand.

use super::Printer;
use crate::cli::GitopsCheckArgs;
use crate::gitops::check::{check_repository, CheckOptions};
use crate::output::OutputFormat;
use anyhow::{anyhow, Result};
use std::process::ExitCode;

/// Exit code when the check cannot run at all (no such folder, kubectl missing).
const CANNOT_RUN: u8 = 2;

impl CheckOptions {
    /// Resolves `bootstrap gitops check`'s arguments: the repository's URL from `--repo-url`
    /// or from the inventory's `gitops.repository.url`.
    pub fn resolve(args: &GitopsCheckArgs) -> Result<Self> {
        let repo_url = match (&args.repo_url, &args.inventory) {
            (Some(url), _) => Some(url.clone()),
            (None, Some(dir)) => {
                let inventory = crate::inventory::load(dir).map_err(|e| anyhow!("{e}"))?;
                let gitops = inventory.site.gitops.ok_or_else(|| {
                    anyhow!(
                        "{}/site.yaml has no gitops section; add gitops.repository.url or pass --repo-url",
                        dir.display()
                    )
                })?;
                Some(gitops.repository.url)
            }
            (None, None) => None,
        };
        Ok(CheckOptions {
            repo_url,
            kubectl: args.kubectl.clone(),
        })
    }
}

/// Runs `bootstrap gitops check`: exit 0 clean, 1 with findings, 2 when it cannot run.
pub fn run(args: GitopsCheckArgs, printer: &Printer) -> Result<ExitCode> {
    let report = match CheckOptions::resolve(&args).and_then(|o| check_repository(&args.dir, &o)) {
        Ok(report) => report,
        Err(e) => {
            printer.error(format_args!("{e:#}"));
            return Ok(ExitCode::from(CANNOT_RUN));
        }
    };
    printer.result(&report)?;
    if printer.format() == OutputFormat::Text {
        let found = report.violations.len();
        let summary = format!(
            "{} objects checked, {} Kustomize folders built",
            report.objects_checked,
            report.folders_built.len()
        );
        match found {
            0 => printer.note(format_args!("ok: {summary}\n")),
            1 => printer.note(format_args!("1 problem found; {summary}\n")),
            n => printer.note(format_args!("{n} problems found; {summary}\n")),
        }
    }
    Ok(super::exit_code(report.ok()))
}
