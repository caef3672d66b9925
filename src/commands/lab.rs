//! `bootstrap lab seed`: the arguments resolved into [`SeedSettings`], the seed, its report.

use super::{registry_options, Printer};
use crate::cli::LabSeedArgs;
use crate::lab::seed::{registry_host, SeedSettings};
use crate::oci::retry::RetryPolicy;
use anyhow::{Context, Result};
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
            stand_in: std::env::current_exe()
                .context("finding this bootstrap binary, which the lab's release tools run")?,
        })
    }
}

/// Runs `bootstrap lab seed`.
pub async fn seed(args: LabSeedArgs, printer: &Printer) -> Result<ExitCode> {
    let report = crate::lab::seed(SeedSettings::resolve(args)?).await?;
    printer.result(&report)?;
    Ok(ExitCode::SUCCESS)
}

/// Runs a lab stand-in: its output and log printed as the imitated program prints them.
pub fn stand_in(args: crate::cli::LabStandInArgs) -> Result<ExitCode> {
    let tool: crate::lab::standin::Tool =
        args.name.parse().map_err(|e: String| anyhow::anyhow!(e))?;
    let outcome = crate::lab::standin::run(tool, &args.self_path, &args.args);
    print!("{}", outcome.stdout);
    for line in &outcome.log {
        eprintln!("{line}");
    }
    Ok(ExitCode::from(outcome.status))
}

/// Runs `bootstrap lab up`: the lab site for an inventory, then its status.
pub async fn up(args: crate::cli::LabUpArgs, printer: &Printer) -> Result<ExitCode> {
    let settings = crate::lab::site::UpSettings {
        inventory: args.inventory,
        state: args.state.state,
        program: std::env::current_exe()
            .context("finding this bootstrap binary, which runs the lab's site process")?,
        simulation: crate::lab::site::Simulation {
            step_ms: args.step.as_millis() as u64,
            validation_failure: args.inject_validation_failure,
            hosts_up: args.hosts_up,
        },
    };
    let status = crate::lab::site::up(&settings).await?;
    printer.result(&status)?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `bootstrap lab down`.
pub fn down(args: crate::cli::LabStateArgs, printer: &Printer) -> Result<ExitCode> {
    let removed = crate::lab::site::down(&args.state)?;
    printer.result(&removed)?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `bootstrap lab status`.
pub fn status(args: crate::cli::LabStateArgs, printer: &Printer) -> Result<ExitCode> {
    let status = crate::lab::site::status(&args.state)?;
    printer.result(&status)?;
    Ok(ExitCode::SUCCESS)
}

/// Runs the lab's site process until it is stopped.
pub async fn site_run(args: crate::cli::LabStateArgs) -> Result<ExitCode> {
    crate::lab::site::site_run::run(&args.state).await?;
    Ok(ExitCode::SUCCESS)
}
