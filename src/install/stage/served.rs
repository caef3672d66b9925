//! The ISO within the BMCs' reach, for the boot stage (and the wait stage after it): served by
//! bootstrap on the inventory's `boot.isoServer` address through the run's [`IsoServer`], which
//! the runner holds for the rest of the run and lends to these two stages, served again at the
//! recorded address when a later run resumes, every answer appended to the access log the
//! runner names (`RUN/logs/iso-access.log`); or the site's own `boot.isoURL`, checked to serve
//! the very bytes the iso stage made (size, then sha256 of a whole fetch) before any BMC is
//! touched.

use super::StageContext;
use crate::install::rundir::{InstallerDir, ADD_BOOT_DIR, BOOT_FILE, ISO_DIR};
use crate::inventory::{self, Inventory};
use crate::serve::{self, Access, AccessSink, ServedFile, TlsFiles};
use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

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

/// The run's ISO server. The runner holds it from the stage that starts it to the end of the
/// run (the BMCs read the ISO while their nodes boot and install) and lends it to the stages
/// that serve the ISO: boot starts it, and the wait of a resumed run starts it again at the
/// address boot recorded. Dropping it stops the server.
#[derive(Debug)]
pub struct IsoServer {
    /// Where every answer is appended.
    access_log: PathBuf,
    /// When each client last read the ISO's bytes (the boot stage's evidence that a BMC read
    /// it after its node's reset).
    reads: IsoReads,
    serving: Option<ServedIso>,
}

/// When each client address last read some of the ISO's bytes (a GET answered 200 or 206 with
/// a body), as this process served it. One entry per address: bounded by the BMCs.
#[derive(Clone, Debug, Default)]
pub struct IsoReads(Arc<Mutex<std::collections::HashMap<std::net::IpAddr, std::time::SystemTime>>>);

impl IsoReads {
    fn record(&self, a: &Access) {
        if a.method == "GET" && matches!(a.status, 200 | 206) && a.bytes > 0 {
            if let Ok(mut m) = self.0.lock() {
                m.insert(a.peer.ip(), std::time::SystemTime::now());
            }
        }
    }

    /// When `ip` last read the ISO, if it did while this process served it.
    pub fn last_read(&self, ip: std::net::IpAddr) -> Option<std::time::SystemTime> {
        self.0.lock().ok().and_then(|m| m.get(&ip).copied())
    }
}

/// The ISO being served by this process.
#[derive(Debug)]
struct ServedIso {
    /// What the boot stage records about it.
    source: IsoSource,
    /// The server.
    _running: crate::serve::Running,
}

impl IsoServer {
    /// A server not yet serving, whose answers will be appended to `access_log`.
    pub fn new(access_log: impl Into<PathBuf>) -> Self {
        IsoServer {
            access_log: access_log.into(),
            reads: IsoReads::default(),
            serving: None,
        }
    }

    /// Who read the ISO when, while this process served it.
    pub fn reads(&self) -> IsoReads {
        self.reads.clone()
    }

    /// Serves `file` unless these very bytes are served already; a resumed run (port 0 in the
    /// inventory) binds the port `earlier` recorded, so the URL the BMCs hold stays good.
    async fn serve(
        &mut self,
        file: ServedFile,
        listen: SocketAddr,
        advertise: Option<&str>,
        tls: Option<TlsFiles>,
        earlier: Option<IsoSource>,
    ) -> Result<IsoSource> {
        if let Some(serving) = &self.serving {
            if serving.source.sha256 == file.sha256 {
                return Ok(serving.source.clone());
            }
        }
        self.serving = None;
        let addr = match earlier.and_then(|s| s.listen) {
            Some(a) if listen.port() == 0 && a.ip() == listen.ip() => a,
            _ => listen,
        };
        let access = access_sink(&self.access_log, self.reads.clone())?;
        let (size, sha256) = (file.size, file.sha256.clone());
        let running =
            serve::start(file, addr, advertise, tls, Some(access), serve::Limits::ISO).await?;
        let source = IsoSource {
            url: running.url.clone(),
            size,
            sha256,
            by: "served".to_string(),
            listen: Some(running.addr),
        };
        self.serving = Some(ServedIso {
            source: source.clone(),
            _running: running,
        });
        Ok(source)
    }
}

/// Makes the ISO reachable for the BMCs: serves it through `server` (or finds it served there
/// already), or checks the site's URL serves the same bytes.
pub(super) async fn iso_source(
    cx: &StageContext,
    server: &mut IsoServer,
    inv: &Inventory,
    iso: &Path,
) -> Result<IsoSource> {
    let (record, ledger) = (cx.run.boot_file(), cx.run.iso_server_ledger());
    serve_iso(server, inv, iso, &record, &ledger).await
}

/// Day two's node ISO, as [`iso_source`] serves the agent ISO: the add-boot stage's record and
/// its own ledger keep its address across runs.
pub(super) async fn node_iso_source(
    cx: &StageContext,
    server: &mut IsoServer,
    inv: &Inventory,
    iso: &Path,
) -> Result<IsoSource> {
    let record = cx.run.root().join(ADD_BOOT_DIR).join(BOOT_FILE);
    let ledger = cx.run.node_iso_server_ledger();
    if inv.site.boot.iso_url.is_some() {
        bail!(
            "site.yaml boot.isoURL serves the agent ISO from the site's server, but day two boots \
             its nodes from the node ISO bootstrap made ({}): give boot.isoServer {{listen: \
             ADDRESS:PORT}} so that bootstrap serves it to the BMCs",
            iso.display()
        );
    }
    serve_iso(server, inv, iso, &record, &ledger).await
}

/// Serves `iso` (or checks the site's URL), at the address `record` or `ledger` hold from an
/// earlier run when the inventory's port is 0; what was served is written to `ledger`.
async fn serve_iso(
    server: &mut IsoServer,
    inv: &Inventory,
    iso: &Path,
    record: &Path,
    ledger: &Path,
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
    let site = boot.iso_server.as_ref().ok_or_else(|| {
        anyhow!("site.yaml boot: give isoServer {{listen: ADDRESS:PORT}} (this machine's address on the BMC network) or isoURL")
    })?;
    let listen: SocketAddr = site.listen.parse().with_context(|| {
        format!(
            "site.yaml boot.isoServer.listen {:?} is not ADDRESS:PORT",
            site.listen
        )
    })?;
    let tls = site.tls.as_ref().map(|t| TlsFiles {
        certificate: inv.resolve(&t.certificate.file),
        key: inv.resolve(&t.key.file),
    });
    // The published record, else the ledger's (a boot stage that failed published nothing, and
    // its BMCs hold that URL all the same).
    let earlier = recorded_source(record).or_else(|| recorded_source(ledger));
    let source = server
        .serve(file, listen, site.advertise.as_deref(), tls, earlier)
        .await?;
    if let Some(dir) = ledger.parent() {
        fs_err::create_dir_all(dir)?;
    }
    crate::fs::write_json(ledger, &source)?;
    Ok(source)
}

/// Serves the ISO again for a stage after boot (the wait), at the address the boot stage
/// recorded, when bootstrap served it and `server` does not serve it yet: the BMCs keep
/// reading the ISO while the nodes boot. `None` when the site serves it.
pub async fn serve_again(cx: &StageContext, server: &mut IsoServer) -> Result<Option<String>> {
    serve_recorded(cx, server, &cx.run.boot_file(), cx.run.installer().iso()).await
}

/// Serves the node ISO again for the day-two stages after add-boot, as [`serve_again`] the
/// agent ISO: its BMCs read it while the new nodes install.
pub(super) async fn serve_node_iso_again(
    cx: &StageContext,
    server: &mut IsoServer,
) -> Result<Option<String>> {
    let record = cx.run.root().join(ADD_BOOT_DIR).join(BOOT_FILE);
    let iso = cx
        .run
        .root()
        .join(crate::install::rundir::ADD_IMAGE_DIR)
        .join(crate::install::rundir::NODE_ISO_FILE);
    serve_recorded(cx, server, &record, iso).await
}

async fn serve_recorded(
    cx: &StageContext,
    server: &mut IsoServer,
    record: &Path,
    iso: PathBuf,
) -> Result<Option<String>> {
    let Some(source) = recorded_source(record) else {
        return Ok(None);
    };
    let Some(listen) = source.listen else {
        return Ok(None);
    };
    let inv = inventory::load(&cx.inventory).map_err(|e| anyhow!("{e}"))?;
    let site = inv.site.boot.iso_server.as_ref();
    let tls = site.and_then(|s| s.tls.as_ref()).map(|t| TlsFiles {
        certificate: inv.resolve(&t.certificate.file),
        key: inv.resolve(&t.key.file),
    });
    let file = tokio::task::spawn_blocking(move || ServedFile::open(&iso))
        .await
        .context("hashing the ISO")??;
    let advertise = site.and_then(|s| s.advertise.as_deref());
    let got = server
        .serve(file, listen, advertise, tls, Some(source))
        .await?;
    Ok(Some(got.url))
}

fn recorded_source(path: &Path) -> Option<IsoSource> {
    serde_json::from_slice(&fs_err::read(path).ok()?).ok()
}

/// Appends each answer to the access log (`TIME PEER METHOD PATH ... -> STATUS (BYTES)`) and
/// notes each read in `reads`.
fn access_sink(path: &Path, reads: IsoReads) -> Result<AccessSink> {
    if let Some(dir) = path.parent() {
        fs_err::create_dir_all(dir)?;
    }
    let file = fs_err::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    let file = Mutex::new(file);
    Ok(Arc::new(move |a: Access| {
        reads.record(&a);
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
    let fix = format!(
        "the BMCs would boot other bytes than the iso stage made: copy RUN/{} there, or remove boot.isoURL to let bootstrap serve it",
        InstallerDir::in_iso(Path::new(ISO_DIR)).iso().display()
    );
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
