//! `bootstrap gitops init DIR --inventory INV`: the site's GitOps repository scaffolded from the
//! inventory; the summary (files written, components, tenants) on stdout, exit 1 with nothing
//! written when the inventory has a problem.

use super::Printer;
use crate::cli::GitopsInitArgs;
use crate::gitops::scaffold::{self, InitSummary};
use crate::inventory::{self, render_inventory_problems, InventoryError};
use anyhow::Result;
use std::process::ExitCode;

/// Runs `bootstrap gitops init`.
pub fn run(args: GitopsInitArgs, printer: &Printer) -> Result<ExitCode> {
    let (inv, problems) = match inventory::load_validated(&args.inventory) {
        Ok(loaded) => loaded,
        Err(e @ InventoryError::Invalid { .. }) => return refused(printer, &e.to_string()),
        Err(e) => return Err(e.into()),
    };
    if problems.iter().any(|(_, p)| p.is_error()) {
        return refused(printer, &render_inventory_problems(&inv.dir, &problems));
    }
    if !problems.is_empty() {
        printer.note(format_args!(
            "{}\n",
            render_inventory_problems(&inv.dir, &problems)
        ));
    }
    let catalogs = scaffold::read_catalog_sources(&inv)?;
    let repo = scaffold::scaffold(&inv, &catalogs)?;
    let report = scaffold::write(&args.dir, &repo.files, args.force)?;
    printer.result(&InitSummary {
        dir: args.dir.display().to_string(),
        files: repo.files.len(),
        report,
        components: repo.components,
        tenants: repo.tenants,
    })?;
    Ok(ExitCode::SUCCESS)
}

fn refused(printer: &Printer, problems: &str) -> Result<ExitCode> {
    printer.note(format_args!("{problems}\n"));
    printer.error("the inventory is not valid; nothing was written");
    Ok(ExitCode::from(1))
}
