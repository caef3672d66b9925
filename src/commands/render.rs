//! `bootstrap render`: a site inventory turned into the agent installer's two files; the node
//! table and any warnings on stderr, the summary on stdout, exit 1 (nothing written) when the
//! inventory has a problem.

use super::Printer;
use crate::cli::RenderArgs;
use crate::render::{RenderOutcome, RenderSettings};
use anyhow::Result;
use std::process::ExitCode;

impl RenderSettings {
    /// Resolves `bootstrap render`'s arguments.
    pub fn resolve(args: RenderArgs) -> Self {
        RenderSettings {
            inventory: args.inventory,
            out: args.out,
        }
    }
}

/// Runs `bootstrap render`.
pub fn run(args: RenderArgs, printer: &Printer) -> Result<ExitCode> {
    match crate::render::run(&RenderSettings::resolve(args))? {
        RenderOutcome::Refused(problems) => {
            printer.note(format_args!("{problems}\n"));
            printer.error("the inventory is not valid; nothing was written");
            Ok(ExitCode::from(1))
        }
        RenderOutcome::Rendered { summary, warnings } => {
            if let Some(w) = warnings {
                printer.note(format_args!("{w}\n"));
            }
            printer.note(summary.node_table());
            printer.result(&summary)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
