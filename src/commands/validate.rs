//! `bootstrap validate`: install-config.yaml and agent-config.yaml checked as the installer
//! reads them, and further; every problem printed, exit 1 when any is an error.

use super::{exit_code, Printer};
use crate::cli::ValidateArgs;
use crate::installer::ValidateFiles;
use anyhow::Result;
use std::process::ExitCode;

impl ValidateFiles {
    /// Resolves `bootstrap validate`'s arguments (clap requires at least one file).
    pub fn resolve(args: ValidateArgs) -> Self {
        ValidateFiles {
            install_config: args.install_config,
            agent_config: args.agent_config,
        }
    }
}

/// Runs `bootstrap validate`.
pub fn run(args: ValidateArgs, printer: &Printer) -> Result<ExitCode> {
    let report = crate::installer::validate(&ValidateFiles::resolve(args));
    printer.result(&report)?;
    let errors = report.errors();
    if errors > 0 && printer.format() == crate::output::OutputFormat::Text {
        let plural = if errors == 1 { "" } else { "s" };
        printer.note(format_args!("{errors} problem{plural} found\n"));
    }
    Ok(exit_code(report.ok()))
}
