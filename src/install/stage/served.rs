//! The ISO within the BMCs' reach, for the boot stage (and the wait stage after it): served by
//! bootstrap on the inventory's `boot.isoServer` address, kept serving for the rest of the run
//! and served again at the recorded address when a later run resumes, every answer appended to
//! `RUN/logs/iso-access.log`; or the site's own `boot.isoURL`, checked to serve the very bytes
//! the iso stage made (size, then sha256 of a whole fetch) before any BMC is touched.

use super::StageContext;
use crate::install::rundir::BOOT_DIR;
use crate::inventory::{self, Inventory};
use crate::serve::{self, Access, AccessSink, ServedFile, TlsFiles};
use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The ISO the iso stage made, relative to the run directory.
pub const ISO_PATH: &str = "iso/work/agent.x86_64.iso";
/// Where the boot stage says how the ISO was served.
pub const BOOT_FILE: &str = "boot.json";
/// The ISO server's access log, relative to the run directory (appended across runs).
pub const ACCESS_LOG: &str = "logs/iso-access.log";

/// Where the BMCs fetch the ISO, as recorded in `RUN/boot/boot.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IsoSource {
    /// The URL the BMCs are given.
    pub url: String,
    /// The ISO's size.
    pub size: u64,
    /// Its sha256.
    pub sha256: String,
    /// `served` (bootstrap serves it) or `site` (the inventory's isoURL, checked).
    pub by: String,
    /// The address bootstrap listens on, when it serves the ISO (a resumed run listens there
    /// again, so the URL the BMCs hold stays good).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<SocketAddr>,
}

/// Makes the ISO reachable for the BMCs: serves it (or finds it already served by this
/// process), or checks the site's URL serves the same bytes.
pub(super) async fn iso_source(
    cx: &StageContext,
    inv: &Inventory,
    iso: &Path,
) -> Result<IsoSource> {
    if !iso.is_file() {
        bail!("{} is missing: run the iso stage first", iso.display());
    }
    let iso_path = iso.to_path_buf();
    let file = tokio::task::spawn_blocking(move || ServedFile::open(&iso_path))
        .await
        .context("hashing the ISO")??;
    let boot = &inv.site.boot;
    if let Some(url) = &boot.iso_url {
        check_site_url(url, &file).await?;
        return Ok(IsoSource {
            url: url.clone(),
            size: file.size,
            sha256: file.sha256.clone(),
            by: "site".to_string(),
            listen: None,
        });
    }
    let server = boot.iso_server.as_ref().ok_or_else(|| {
        anyhow!("site.yaml boot: give isoServer {{listen: ADDRESS:PORT}} (this machine's address on the BMC network) or isoURL")
    })?;
    let listen: SocketAddr = server.listen.parse().with_context(|| {
        format!(
            "site.yaml boot.isoServer.listen {:?} is not ADDRESS:PORT",
            server.listen
        )
    })?;
    let tls = server.tls.as_ref().map(|t| TlsFiles {
        certificate: inv.resolve(&t.certificate.file),
        key: inv.resolve(&t.key.file),
    });
    ensure_served(cx, file, listen, server.advertise.as_deref(), tls).await
}

/// Serves `file` unless this process already serves it; a resumed run (port 0 in the
/// inventory) binds the port recorded by the run that gave the BMCs their URL.
async fn ensure_served(
    cx: &StageContext,
    file: ServedFile,
    listen: SocketAddr,
    advertise: Option<&str>,
    tls: Option<TlsFiles>,
) -> Result<IsoSource> {
    let mut slot = cx.iso_server.lock().await;
    if let Some(running) = slot.as_ref() {
        if running.sha256 == file.sha256 {
            return Ok(running.source.clone());
        }
    }
    *slot = None;
    let earlier = recorded_source(&cx.run.join(&format!("{BOOT_DIR}/{BOOT_FILE}")));
    let addr = match earlier.as_ref().and_then(|s| s.listen) {
        Some(a) if listen.port() == 0 && a.ip() == listen.ip() => a,
        _ => listen,
    };
    let access = access_sink(&cx.run.join(ACCESS_LOG))?;
    let (size, sha256) = (file.size, file.sha256.clone());
    let running = serve::start(file, addr, advertise, tls, Some(access)).await?;
    let source = IsoSource {
        url: running.url.clone(),
        size,
        sha256: sha256.clone(),
        by: "served".to_string(),
        listen: Some(running.addr),
    };
    *slot = Some(super::ServedIso {
        sha256,
        source: source.clone(),
        running,
    });
    Ok(source)
}

/// Serves the ISO again for a stage after boot (the wait), at the address the boot stage
/// recorded, when bootstrap served it and this process does not serve it yet: the BMCs keep
/// reading the ISO while the nodes boot. `None` when the site serves it.
pub async fn serve_again(cx: &StageContext) -> Result<Option<String>> {
    let Some(source) = recorded_source(&cx.run.join(&format!("{BOOT_DIR}/{BOOT_FILE}"))) else {
        return Ok(None);
    };
    let Some(listen) = source.listen else {
        return Ok(None);
    };
    let inv = inventory::load(&cx.inventory).map_err(|e| anyhow!("{e}"))?;
    let server = inv.site.boot.iso_server.as_ref();
    let tls = server.and_then(|s| s.tls.as_ref()).map(|t| TlsFiles {
        certificate: inv.resolve(&t.certificate.file),
        key: inv.resolve(&t.key.file),
    });
    let iso = cx.run.join(ISO_PATH);
    let file = tokio::task::spawn_blocking(move || ServedFile::open(&iso))
        .await
        .context("hashing the ISO")??;
    let advertise = server.and_then(|s| s.advertise.clone());
    let got = ensure_served(cx, file, listen, advertise.as_deref(), tls).await?;
    Ok(Some(got.url))
}

fn recorded_source(path: &Path) -> Option<IsoSource> {
    serde_json::from_slice(&fs_err::read(path).ok()?).ok()
}

/// Appends each answer to the access log (`TIME PEER METHOD PATH ... -> STATUS (BYTES)`).
fn access_sink(path: &Path) -> Result<AccessSink> {
    if let Some(dir) = path.parent() {
        fs_err::create_dir_all(dir)?;
    }
    let file = fs_err::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    let file = Mutex::new(file);
    Ok(Arc::new(move |a: Access| {
        if let Ok(mut f) = file.lock() {
            let _ = writeln!(f, "{} {a}", crate::install::state::now());
        }
    }))
}

/// The site's URL must serve this ISO: its length (HEAD), then its sha256 (a whole GET).
async fn check_site_url(url: &str, file: &ServedFile) -> Result<()> {
    use futures_util::StreamExt;
    let shown = crate::secret::redact_url(url);
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(3600))
        .connect_timeout(std::time::Duration::from_secs(20))
        .build()?;
    let fix = "the BMCs would boot other bytes than the iso stage made: copy RUN/iso/work/agent.x86_64.iso there, or remove boot.isoURL to let bootstrap serve it";
    let head = client
        .head(url)
        .send()
        .await
        .with_context(|| format!("boot.isoURL {shown}: cannot reach it"))?;
    if !head.status().is_success() {
        bail!(
            "boot.isoURL {shown}: HEAD answered {}; {fix}",
            head.status()
        );
    }
    if let Some(len) = head.headers().get(reqwest::header::CONTENT_LENGTH) {
        let len: u64 = len
            .to_str()
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(u64::MAX);
        if len != file.size {
            bail!(
                "boot.isoURL {shown} serves {len} bytes, the ISO has {}; {fix}",
                file.size
            );
        }
    }
    let resp = client
        .get(url)
        .send()
        .await
        .with_context(|| format!("boot.isoURL {shown}: fetching it"))?;
    if !resp.status().is_success() {
        bail!("boot.isoURL {shown}: GET answered {}; {fix}", resp.status());
    }
    let mut hasher = crate::oci::digest::StreamHasher::new();
    let mut got = 0u64;
    let mut body = resp.bytes_stream();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.with_context(|| format!("boot.isoURL {shown}: reading it"))?;
        got += chunk.len() as u64;
        if got > file.size {
            bail!(
                "boot.isoURL {shown} serves more than the ISO's {} bytes; {fix}",
                file.size
            );
        }
        hasher.update(&chunk);
    }
    let (sha, _) = hasher.finish();
    if got != file.size || sha.hex() != file.sha256 {
        bail!(
            "boot.isoURL {shown} serves {got} bytes with sha256 {}, the ISO is {} bytes with sha256 {}; {fix}",
            sha.hex(),
            file.size,
            file.sha256
        );
    }
    Ok(())
}
