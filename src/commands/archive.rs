//! `bootstrap archive create`: a disk mirror cut into an archive for removable media.

use super::Printer;
use crate::cli::ArchiveCreateArgs;
use crate::mirror::archive::create::CreateSettings;
use crate::mirror::archive::writer::Sealed;
use crate::mirror::Location;
use anyhow::{bail, Result};
use std::process::ExitCode;

/// What `archive create` reports.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Created {
    #[serde(flatten)]
    sealed: Sealed,
    #[serde(skip_serializing_if = "Option::is_none")]
    signature: Option<crate::mirror::report::RecordSignature>,
}

impl std::fmt::Display for Created {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "archive: {} chunks, {} ({} blobs) in {}",
            self.sealed.chunks,
            crate::output::human_bytes(self.sealed.bytes),
            self.sealed.blobs,
            self.sealed.dir
        )?;
        writeln!(f, "manifest: {}", self.sealed.manifest)?;
        if let Some(s) = &self.signature {
            writeln!(
                f,
                "signed: {} by {}; allowed_signers line: {}",
                s.file, s.fingerprint, s.allowed_signers
            )?;
        }
        Ok(())
    }
}

/// Runs `bootstrap archive create`.
pub async fn create(args: ArchiveCreateArgs, printer: &Printer) -> Result<ExitCode> {
    let layout = match Location::parse(&args.from, "--from")? {
        Location::Disk(dir) => dir,
        _ => bail!("--from names the disk mirror to cut: file://DIR"),
    };
    let dir = match Location::parse(&args.destination, "the destination")? {
        Location::Archive(dir) => dir,
        _ => bail!("archive create writes an archive: name it archive://DIR"),
    };
    let archive_size = match &args.archive_size {
        Some(s) => crate::mirror::archive::parse_size(s)
            .map_err(|e| anyhow::anyhow!("--archive-size: {e:#}"))?,
        None => crate::mirror::archive::DEFAULT_ARCHIVE_SIZE,
    };
    if let Some(key) = &args.sign_key {
        crate::sshsig::read_key(key).map_err(|e| anyhow::anyhow!("--sign-key: {e:#}"))?;
    }
    let settings = CreateSettings {
        layout,
        dir,
        archive_size,
        concurrency: 4,
        sign_key: args.sign_key.clone(),
    };
    let (_, sealed, signed) = crate::mirror::archive::create::create(&settings).await?;
    let signature = signed.map(|s| crate::mirror::report::RecordSignature {
        file: s.signature.display().to_string(),
        fingerprint: s.fingerprint,
        allowed_signers: s.allowed_signers,
    });
    printer.result(&Created { sealed, signature })?;
    Ok(ExitCode::SUCCESS)
}
