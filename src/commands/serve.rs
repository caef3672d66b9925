//! `bootstrap serve iso`: the file opened (and hashed), the address bound, what is served printed,
//! then serving until SIGINT or SIGTERM.

use super::Printer;
use crate::cli::{ServeIsoArgs, ServeRegistryArgs};
use crate::serve::{self, ServedFile, Serving};
use anyhow::{Context, Result};
use std::process::ExitCode;
use std::sync::Arc;

/// Runs `bootstrap serve iso`.
pub async fn iso(args: ServeIsoArgs, printer: &Printer) -> Result<ExitCode> {
    let path = args.file.clone();
    let file = tokio::task::spawn_blocking(move || ServedFile::open(&path))
        .await
        .context("hashing the file")??;
    let tls = match (args.tls_cert.clone(), args.tls_key.clone()) {
        (Some(certificate), Some(key)) => Some(serve::TlsFiles { certificate, key }),
        _ => None,
    };
    if let Some(t) = &tls {
        t.server_config()?;
    }
    let (listener, addr) = serve::bind(args.bind).await?;
    printer.result(&Serving {
        url: format!(
            "{}://{addr}{}",
            if args.tls_cert.is_some() {
                "https"
            } else {
                "http"
            },
            file.url_path
        ),
        file: args.file.clone(),
        size: file.size,
        sha256: file.sha256.clone(),
    })?;
    // The access log on stderr: which BMC fetched what.
    let progress = crate::output::Progress::lines("serve");
    let access: serve::AccessSink =
        Arc::new(move |a: serve::Access| progress.println(&a.to_string()));
    serve::serve(
        file,
        listener,
        tls.as_ref(),
        Some(access),
        serve::Limits::ISO,
        shutdown_signal(),
    )
    .await?;
    Ok(ExitCode::SUCCESS)
}

/// What `bootstrap serve registry` serves.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServingRegistry {
    /// The registry's address (`HOST:PORT`, what clients put before the repository).
    pub registry: String,
    /// The disk mirror.
    pub source: String,
    /// Each repository with its number of tags.
    pub repositories: Vec<(String, usize)>,
}

impl std::fmt::Display for ServingRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "serving {} as a read-only registry at {}",
            self.source, self.registry
        )?;
        for (name, tags) in &self.repositories {
            writeln!(f, "  {}/{name} ({tags} tags)", self.registry)?;
        }
        Ok(())
    }
}

/// Runs `bootstrap serve registry`.
pub async fn registry(args: ServeRegistryArgs, printer: &Printer) -> Result<ExitCode> {
    let served = match crate::mirror::Location::parse(&args.source, "the source")? {
        crate::mirror::Location::Disk(dir) => {
            tokio::task::spawn_blocking(move || serve::registry::Served::open(&dir))
                .await
                .context("reading the disk mirror")??
        }
        crate::mirror::Location::Archive(dir) => {
            let workdir = args
                .workdir
                .clone()
                .unwrap_or_else(|| std::path::PathBuf::from(".bootstrap-work"));
            tokio::task::spawn_blocking(move || {
                let reader = crate::mirror::archive::reader::ArchiveReader::open(&dir)?;
                if let Some(base) = &reader.manifest().base {
                    anyhow::bail!(
                        "{} is a delta archive over {} (sha256 {}): its images need blobs only the base carries; serve the base and the delta pushed together into a registry instead",
                        dir.display(),
                        base.path,
                        base.sha256
                    );
                }
                // The small files (index.json) come out; the blobs are served from the chunks.
                let into = workdir.join(format!("archive-{}", &reader.manifest_sha256()[..16]));
                serve::registry::Served::from_layout(reader.open_layout(&into)?)
            })
            .await
            .context("reading the archive")??
        }
        crate::mirror::Location::Registry(_) => {
            anyhow::bail!("serve registry serves a disk mirror or an archive: name it as file://DIR or archive://DIR")
        }
    };
    let tls = match (args.tls_cert.clone(), args.tls_key.clone()) {
        (Some(certificate), Some(key)) => Some(serve::TlsFiles { certificate, key }),
        _ => None,
    };
    if let Some(t) = &tls {
        t.server_config()?;
    }
    let (listener, addr) = serve::bind(args.bind).await?;
    printer.result(&ServingRegistry {
        registry: addr.to_string(),
        source: args.source.clone(),
        repositories: served.repositories(),
    })?;
    let app = serve::registry::router(Arc::new(served));
    serve::serve_router(
        app,
        listener,
        tls.as_ref(),
        serve::Limits::REGISTRY,
        shutdown_signal(),
    )
    .await?;
    Ok(ExitCode::SUCCESS)
}

/// SIGINT or SIGTERM.
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(mut int), Ok(mut term)) => {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
        }
        _ => std::future::pending::<()>().await,
    }
}
