//! `bootstrap serve iso`: the file opened (and hashed), the address bound, what is served printed,
//! then serving until SIGINT or SIGTERM.

use super::Printer;
use crate::cli::ServeIsoArgs;
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
    let shutdown = async {
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
    };
    // The access log on stderr: which BMC fetched what.
    let progress = crate::output::Progress::lines("serve");
    let access: serve::AccessSink =
        Arc::new(move |a: serve::Access| progress.println(&a.to_string()));
    serve::serve(file, listener, tls.as_ref(), Some(access), shutdown).await?;
    Ok(ExitCode::SUCCESS)
}
