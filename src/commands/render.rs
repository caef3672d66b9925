//! `bootstrap render`: a site inventory turned into the agent installer's two files.

use super::Printer;
use crate::cli::RenderArgs;
use anyhow::Result;
use std::process::ExitCode;

/// Runs `bootstrap render`.
pub fn run(args: RenderArgs, printer: &Printer) -> Result<ExitCode> {
    crate::render::run(args, printer.format())
}
