//! `bootstrap release extract`: the arguments resolved into an [`ExtractRequest`], the
//! extraction, its result.

use super::{registry_options, Printer};
use crate::cli::ReleaseExtractArgs;
use crate::oci::reference::ImageRef;
use crate::oci::registry::Registries;
use crate::oci::retry::RetryPolicy;
use crate::openshift::extract::{ExtractRequest, Tool};
use crate::openshift::mirrors::DigestMirrors;
use crate::openshift::record::MirrorRecord;
use anyhow::{Context, Result};
use std::process::ExitCode;
use std::sync::Arc;

impl ExtractRequest {
    /// Resolves `bootstrap release extract`'s arguments: a `docker://` release reference and a
    /// known `--command`.
    pub fn resolve(args: &ReleaseExtractArgs) -> Result<Self> {
        let reference = args.release.strip_prefix("docker://").with_context(|| {
            format!(
                "RELEASE '{}': expected docker://HOST[:PORT]/REPO@sha256:...",
                args.release
            )
        })?;
        let release = ImageRef::parse(reference).map_err(|e| anyhow::anyhow!("RELEASE: {e}"))?;
        let tool: Tool = args
            .command
            .parse()
            .map_err(|e: String| anyhow::anyhow!("--command: {e}"))?;
        let mirrors = match (&args.record, &args.idms_file) {
            (Some(record), _) => DigestMirrors::new(
                MirrorRecord::load(record)
                    .with_context(|| format!("reading the mirror record {}", record.display()))?
                    .digest_sources()
                    .map_err(|e| anyhow::anyhow!("the mirror record {}: {e}", record.display()))?,
            ),
            (None, Some(idms)) => DigestMirrors::from_idms_file(idms)?,
            (None, None) => DigestMirrors::default(),
        };
        Ok(ExtractRequest {
            release,
            tool,
            to: args.to.clone(),
            arch: args.arch.clone(),
            mirrors,
        })
    }
}

/// Runs `bootstrap release extract`.
pub async fn extract(args: ReleaseExtractArgs, printer: &Printer) -> Result<ExitCode> {
    let request = ExtractRequest::resolve(&args)?;
    let retry = RetryPolicy::with_attempts(RetryPolicy::default().attempts);
    let registries = Arc::new(Registries::new(registry_options(&args.registry, retry)?)?);
    let extracted = crate::openshift::extract::extract(&registries, &request).await?;
    printer.result(&extracted)?;
    Ok(ExitCode::SUCCESS)
}
