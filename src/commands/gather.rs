//! `bootstrap gather`: the support bundle's path and what could not be collected on stdout
//! (text or JSON), a live line per node on stderr as it goes. Exit 0 when the bundle is written,
//! partial or not (the result lists what is missing and why); 1 when no bundle could be written
//! (the run or inventory unreadable, a secret found in the bundle).

use super::Printer;
use crate::cli::GatherArgs;
use crate::install::gather::{self, GatherSettings};
use anyhow::Result;
use std::process::ExitCode;

impl GatherSettings {
    /// Resolves `bootstrap gather`'s arguments.
    pub fn resolve(args: GatherArgs) -> Self {
        GatherSettings {
            inventory: args.inventory,
            run: args.run,
            out: args.out,
            node_timeout: args.node_timeout,
            insecure_api: args.insecure_api,
        }
    }
}

/// Runs `bootstrap gather`.
pub async fn run(args: GatherArgs, printer: &Printer) -> Result<ExitCode> {
    let settings = GatherSettings::resolve(args);
    let report = gather::run(&settings).await?;
    printer.result(&report)?;
    Ok(ExitCode::SUCCESS)
}
