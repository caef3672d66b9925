//! `bootstrap lab seed`: the arguments resolved into [`SeedSettings`], the seed, its report.

use super::{registry_options, Printer};
use crate::cli::LabSeedArgs;
use crate::lab::seed::{registry_host, SeedSettings};
use crate::oci::retry::RetryPolicy;
use anyhow::Result;
use std::process::ExitCode;

impl SeedSettings {
    /// Resolves `bootstrap lab seed`'s arguments: a `docker://HOST:PORT` without a path.
    pub fn resolve(args: LabSeedArgs) -> Result<Self> {
        let host = registry_host(&args.registry_url)?;
        let retry = RetryPolicy::with_attempts(RetryPolicy::default().attempts);
        Ok(SeedSettings {
            host,
            registry: registry_options(&args.registry, retry)?,
            out: args.out,
        })
    }
}

/// Runs `bootstrap lab seed`.
pub async fn seed(args: LabSeedArgs, printer: &Printer) -> Result<ExitCode> {
    let report = crate::lab::seed(SeedSettings::resolve(args)?).await?;
    printer.result(&report)?;
    Ok(ExitCode::SUCCESS)
}
