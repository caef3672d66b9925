//! The lab's commands: each resolves its arguments into the lab library's settings (uv's two
//! phases), runs it, and hands the result to the one [`Printer`].

use crate::cli::{LabRepairArgs, LabSeedArgs, LabStandInArgs, LabStateArgs, LabUpArgs};
use crate::seed::{registry_host, SeedSettings};
use anyhow::{Context, Result};
use bootstrap::commands::registry_options;
use bootstrap::oci::retry::RetryPolicy;
use bootstrap::output::Printer;
use std::process::ExitCode;

/// Resolves `bootstrap-lab seed`'s arguments: a `docker://HOST:PORT` without a path.
fn seed_settings(args: LabSeedArgs) -> Result<SeedSettings> {
    let host = registry_host(&args.registry_url)?;
    let retry = RetryPolicy::with_attempts(RetryPolicy::default().attempts);
    Ok(SeedSettings {
        host,
        registry: registry_options(&args.registry, retry)?,
        out: args.out,
        stand_in: std::env::current_exe()
            .context("finding this bootstrap-lab binary, which the lab's release tools run")?,
    })
}

/// Runs `bootstrap-lab seed`.
pub async fn seed(args: LabSeedArgs, printer: &Printer) -> Result<ExitCode> {
    let report = crate::seed(seed_settings(args)?).await?;
    printer.result(&report)?;
    Ok(ExitCode::SUCCESS)
}

/// Runs a lab stand-in: its output and log printed as the imitated program prints them.
pub fn stand_in(args: LabStandInArgs) -> Result<ExitCode> {
    let tool: crate::standin::Tool = args.name.parse().map_err(|e: String| anyhow::anyhow!(e))?;
    let outcome = crate::standin::run(tool, &args.self_path, &args.args);
    print!("{}", outcome.stdout);
    for line in &outcome.log {
        eprintln!("{line}");
    }
    Ok(ExitCode::from(outcome.status))
}

/// Runs `bootstrap-lab up`: the lab site for an inventory, then its status.
pub async fn up(args: LabUpArgs, printer: &Printer) -> Result<ExitCode> {
    let settings = crate::site::UpSettings {
        inventory: args.inventory,
        state: args.state.state,
        program: std::env::current_exe()
            .context("finding this bootstrap-lab binary, which runs the lab's site process")?,
        simulation: crate::site::Simulation {
            step_ms: args.step.as_millis() as u64,
            validation_failure: args.inject_validation_failure,
            pending_user_action: args.inject_pending_user_action,
            progressing_operator: args.inject_operator_progressing,
            rogue_csr: args.inject_rogue_csr,
            hosts_up: args.hosts_up,
        },
        vendors: args.vendors.into_iter().collect(),
    };
    settings.simulation.config().check()?;
    let status = crate::site::up(&settings).await?;
    printer.result(&status)?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `bootstrap-lab down`.
pub fn down(args: LabStateArgs, printer: &Printer) -> Result<ExitCode> {
    let removed = crate::site::down(&args.state)?;
    printer.result(&removed)?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `bootstrap-lab status`.
pub fn status(args: LabStateArgs, printer: &Printer) -> Result<ExitCode> {
    let status = crate::site::status(&args.state)?;
    printer.result(&status)?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `bootstrap-lab repair`.
pub fn repair(args: LabRepairArgs, printer: &Printer) -> Result<ExitCode> {
    let repaired = crate::site::repair::repair(&args.state.state, &args.nodes)?;
    printer.result(&repaired)?;
    Ok(ExitCode::SUCCESS)
}

/// Runs the lab's site process until it is stopped.
pub async fn site_run(args: LabStateArgs) -> Result<ExitCode> {
    crate::site::site_run::run(&args.state).await?;
    Ok(ExitCode::SUCCESS)
}
