//! `bootstrap preflight`: the read-only site preflight ([`crate::preflight`]) on an inventory.
//! The table (or `--output json`) on stdout; exit 0 when no check failed (warnings allowed),
//! 1 when one did.

use super::{exit_code, Printer};
use crate::cli::PreflightArgs;
use crate::preflight::{self, Limits};
use anyhow::{anyhow, Result};
use std::process::ExitCode;

impl Limits {
    /// Resolves `bootstrap preflight`'s time limits.
    pub fn resolve(args: &PreflightArgs) -> Self {
        Limits {
            bmc_timeout: args.bmc_timeout,
            udp_timeout: args.udp_timeout,
            ..Limits::default()
        }
    }
}

/// Runs `bootstrap preflight`.
pub async fn run(args: PreflightArgs, printer: &Printer) -> Result<ExitCode> {
    let inv = crate::inventory::load(&args.inventory).map_err(|e| anyhow!("{e}"))?;
    let report = preflight::run(&inv, Limits::resolve(&args)).await?;
    printer.result(&report)?;
    Ok(exit_code(report.ok))
}
