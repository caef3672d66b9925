//! `bootstrap validate`: install-config.yaml and agent-config.yaml checked as the installer
//! reads them, and further.

use super::Printer;
use crate::cli::ValidateArgs;
use anyhow::Result;
use std::process::ExitCode;

/// Runs `bootstrap validate`.
pub fn run(args: ValidateArgs, printer: &Printer) -> Result<ExitCode> {
    crate::installer::run(args, printer.format())
}
