//! `bootstrap install` and `bootstrap install status`: the pipeline's report on stdout (text or
//! JSON), a line per stage on stderr as it goes. Exit 0 when every stage asked for is done, 1
//! when a stage failed (its log named), 130 on SIGINT and 143 on SIGTERM (the running stage
//! recorded as interrupted).

use super::Printer;
use crate::cli::{InstallArgs, InstallCmd, InstallStatusArgs};
use crate::install::{Ending, InstallSettings, Stage};
use crate::output::Progress;
use anyhow::{anyhow, Result};
use std::process::ExitCode;

impl InstallSettings {
    /// Resolves `bootstrap install`'s arguments.
    pub fn resolve(args: InstallArgs) -> Result<Self> {
        let stage = |s: Option<String>| -> Result<Option<Stage>> {
            s.map(|s| s.parse::<Stage>().map_err(|e| anyhow!(e)))
                .transpose()
        };
        Ok(InstallSettings {
            inventory: args
                .inventory
                .ok_or_else(|| anyhow!("--inventory DIR is required"))?,
            run: args.run.ok_or_else(|| anyhow!("--run RUN is required"))?,
            from: stage(args.from)?,
            until: stage(args.until)?,
            installer: args.installer,
            reboot: args.reboot,
            insecure_api: args.insecure_api,
            wait_limits: crate::install::WaitLimits {
                bootstrap: args.bootstrap_timeout,
                install: args.install_timeout,
                boot: args.boot_timeout,
            },
        })
    }
}

/// Runs `bootstrap install` (or its `status`).
pub async fn run(args: InstallArgs, printer: &Printer) -> Result<ExitCode> {
    if let Some(InstallCmd::Status(s)) = args.command {
        return status(s, printer);
    }
    let settings = InstallSettings::resolve(args)?;
    let progress = Progress::lines("install");
    let report = crate::install::run(&settings, &progress).await?;
    progress.finish();
    printer.result(&report)?;
    match &report.ending {
        Ending::Failed { stage, log } => printer.error(format_args!(
            "the {stage} stage failed; read {} (bootstrap install status --run {} shows every stage)",
            settings.run.join(log).display(),
            settings.run.display()
        )),
        Ending::Interrupted { .. } | Ending::Complete => {}
    }
    Ok(ExitCode::from(report.exit_code()))
}

fn status(args: InstallStatusArgs, printer: &Printer) -> Result<ExitCode> {
    let report = crate::install::status(&args.run)?;
    printer.result(&report)?;
    Ok(ExitCode::SUCCESS)
}
