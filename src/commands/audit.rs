//! `bootstrap audit report`: the source and the form resolved, the report built, printed in
//! the form asked; exit 1 when its signature is bad.

use super::{exit_code, Printer};
use crate::audit::{AuditSource, Markdown};
use crate::cli::{AuditFormat, AuditReportArgs};
use crate::output::OutputFormat;
use anyhow::{bail, Result};
use std::process::ExitCode;

/// The form to print in: `--format`, else what `--output` says; the two must not disagree.
fn format(asked: Option<AuditFormat>, output: OutputFormat) -> Result<AuditFormat> {
    match (asked, output) {
        (None, OutputFormat::Text) => Ok(AuditFormat::Text),
        (None | Some(AuditFormat::Json), OutputFormat::Json) => Ok(AuditFormat::Json),
        (Some(f), OutputFormat::Text) => Ok(f),
        (Some(f), OutputFormat::Json) => bail!(
            "--format {} and --output json disagree: give one of them",
            if f == AuditFormat::Text {
                "text"
            } else {
                "markdown"
            }
        ),
    }
}

/// Runs `bootstrap audit report`.
pub fn report(args: AuditReportArgs, printer: &Printer) -> Result<ExitCode> {
    let form = format(args.format, printer.format())?;
    let source = AuditSource::parse(&args.source)?;
    let report = crate::audit::report(&source, args.allowed_signers.as_deref())?;
    match form {
        AuditFormat::Text => Printer::new(OutputFormat::Text).result(&report)?,
        AuditFormat::Markdown => Printer::new(OutputFormat::Text).result(&Markdown(&report))?,
        AuditFormat::Json => Printer::new(OutputFormat::Json).result(&report)?,
    }
    if !report.ok() {
        printer.error(format_args!(
            "the signature of {} does not hold (see the report's Signature line)",
            report.source
        ));
    }
    Ok(exit_code(report.ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_and_output_agree_or_are_refused() {
        assert_eq!(format(None, OutputFormat::Json).unwrap(), AuditFormat::Json);
        assert_eq!(
            format(Some(AuditFormat::Json), OutputFormat::Text).unwrap(),
            AuditFormat::Json
        );
        assert_eq!(
            format(Some(AuditFormat::Markdown), OutputFormat::Text).unwrap(),
            AuditFormat::Markdown
        );
        assert!(format(Some(AuditFormat::Markdown), OutputFormat::Json).is_err());
    }
}
