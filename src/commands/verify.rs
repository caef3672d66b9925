//! `bootstrap verify`: the target resolved (a disk mirror, or a registry with its record), the
//! check, its report; exit 0 only when everything matches.

use super::{exit_code, registry_options, Printer};
use crate::cli::VerifyArgs;
use crate::mirror::Location;
use crate::oci::retry::RetryPolicy;
use crate::openshift::record::RECORD_FILE;
use crate::verify::VerifyTarget;
use anyhow::{bail, Context, Result};
use std::process::ExitCode;

impl VerifyTarget {
    /// Resolves `bootstrap verify`'s arguments; a registry needs `--record`, a disk mirror
    /// refuses it (it carries its own).
    pub fn resolve(args: VerifyArgs) -> Result<Self> {
        match Location::parse(&args.target, "the verify target")? {
            Location::Disk(dir) => {
                if args.record.is_some() {
                    bail!("--record is for registries: a disk mirror is checked against its own {RECORD_FILE}");
                }
                if args.allowed_signers.is_some() {
                    bail!("--allowed-signers checks a signed record (with --record) or an archive (archive://DIR); a disk mirror is covered by its SHA256SUMS");
                }
                Ok(VerifyTarget::Disk(dir))
            }
            Location::Archive(dir) => {
                if args.record.is_some() {
                    bail!("--record is for registries: an archive is checked against its own manifest.json");
                }
                Ok(VerifyTarget::Archive {
                    dir,
                    allowed_signers: args.allowed_signers.clone(),
                })
            }
            Location::Registry(target) => {
                let record = args.record.clone().context(
                    "checking a registry needs the mirror record to check it against: pass --record FILE",
                )?;
                let retry = RetryPolicy::with_attempts(RetryPolicy::default().attempts);
                Ok(VerifyTarget::Registry {
                    target,
                    record,
                    allowed_signers: args.allowed_signers.clone(),
                    registry: Box::new(registry_options(&args.registry, retry)?),
                })
            }
        }
    }
}

/// Runs `bootstrap verify`.
pub async fn run(args: VerifyArgs, printer: &Printer) -> Result<ExitCode> {
    let report = crate::verify::run(VerifyTarget::resolve(args)?).await?;
    printer.result(&report)?;
    Ok(exit_code(report.ok))
}
