//! `bootstrap model pack`: the arguments resolved into [`PackSettings`], the pack, its report.

use super::Printer;
use crate::cli::ModelPackArgs;
use crate::modelcar::PackSettings;
use crate::oci::reference::ImageRef;
use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::process::ExitCode;

impl PackSettings {
    /// Resolves `bootstrap model pack`'s arguments: a tagged reference without a digest, a
    /// `file://` layout.
    pub fn resolve(args: ModelPackArgs) -> Result<Self> {
        let reference = ImageRef::parse(&args.reference)
            .with_context(|| format!("the image reference '{}'", args.reference))?;
        if reference.tag.is_none() || reference.digest.is_some() {
            bail!(
                "the image reference '{}' needs a tag (and no digest: the digest is what packing computes), e.g. registry.example:5000/models/granite:3.1",
                args.reference
            );
        }
        let layout = args
            .layout
            .strip_prefix("file://")
            .with_context(|| format!("--layout '{}' must be file://DIR", args.layout))?;
        Ok(PackSettings {
            dir: args.dir,
            reference,
            layout: PathBuf::from(layout),
            layer_threshold: args.layer_threshold_mib * 1024 * 1024,
        })
    }
}

/// Runs `bootstrap model pack`.
pub async fn pack(args: ModelPackArgs, printer: &Printer) -> Result<ExitCode> {
    let packed = crate::modelcar::pack(PackSettings::resolve(args)?).await?;
    printer.result(&packed)?;
    Ok(ExitCode::SUCCESS)
}
