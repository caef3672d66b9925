//! What a machine booted: the simulator fetches the inserted ISO from the media URL (as the
//! BMC does) and reads it with xorriso. An agent ISO (the installer stand-in's: `agent-config.yaml`,
//! `install-config.yaml` and the `lab/` files) starts the install; a node ISO (`oc adm
//! node-image create`'s: `nodes-config.yaml` and its `lab/` files) joins a machine to the
//! installed cluster ([`super::join`]).

use super::simulator::Install;
use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::path::Path;

/// The ISO a machine booted.
pub(crate) enum Booted {
    /// An agent ISO: the day-one install.
    Install(Box<Install>),
    /// A node ISO: day two.
    Join(super::join::NodeIso),
}

/// Fetches and reads the ISO at `url`.
pub(crate) async fn read(http: &reqwest::Client, url: &str) -> Result<Booted> {
    let dir = tempfile_dir()?;
    let result = async {
        let file = dir.join("boot.iso");
        download(http, url, &file).await?;
        let out = extract(&dir, &file).await?;
        if out.join(super::join::NODES_CONFIG).exists() {
            return Ok(Booted::Join(super::join::NodeIso::read(&out)?));
        }
        Ok(Booted::Install(Box::new(extract_install(&out)?)))
    }
    .await;
    let _ = fs_err::remove_dir_all(&dir);
    result
}

fn tempfile_dir() -> Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("bootstrap-lab-iso-{}", super::simulator::uuid()));
    fs_err::create_dir_all(&dir)?;
    Ok(dir)
}

/// Streams `url` into `file` (an agent ISO is about a gigabyte on a real site).
async fn download(http: &reqwest::Client, url: &str, file: &Path) -> Result<()> {
    use futures_util::StreamExt as _;
    use tokio::io::AsyncWriteExt as _;
    let resp = http.get(url).send().await?.error_for_status()?;
    let mut out = fs_err::tokio::File::create(file).await?;
    let mut body = resp.bytes_stream();
    while let Some(chunk) = body.next().await {
        out.write_all(&chunk?).await?;
    }
    out.flush().await?;
    Ok(())
}

/// The ISO's files, extracted under `dir/x`.
async fn extract(dir: &Path, file: &Path) -> Result<std::path::PathBuf> {
    let file = file.to_path_buf();
    let out = dir.join("x");
    let status = {
        let (file, out) = (file.clone(), out.clone());
        tokio::task::spawn_blocking(move || {
            std::process::Command::new("xorriso")
                .args(["-osirrox", "on", "-indev"])
                .arg(&file)
                .arg("-extract")
                .arg("/")
                .arg(&out)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .output()
        })
        .await?
        .context("running xorriso to read the ISO (install xorriso)")?
    };
    if !status.status.success() {
        bail!(
            "xorriso could not read it: {}",
            String::from_utf8_lossy(&status.stderr).trim()
        );
    }
    Ok(out)
}

fn extract_install(out: &Path) -> Result<Install> {
    let read = |p: &str| {
        fs_err::read_to_string(out.join(p)).with_context(|| {
            format!("the ISO has no /{p}: not made by the lab's installer stand-in")
        })
    };
    let agent: Value = serde_saphyr::from_str(&read("agent-config.yaml")?)?;
    let install: Value = serde_saphyr::from_str(&read("install-config.yaml")?)?;
    let lab = |f: &str| read(&format!("{}/{f}", crate::standin::LAB_ISO_DIR));
    use crate::standin as s;
    let key = lab(s::LAB_WATCHER_KEY)?;
    let watcher_key = base64::Engine::decode(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
        key.trim(),
    )
    .context("the ISO's watcher public key is not base64url")?;
    let rendezvous = agent["rendezvousIP"].as_str().unwrap_or_default();
    let mut hosts = Vec::new();
    let mut addresses = std::collections::BTreeMap::new();
    let mut bootstrap_host = None;
    for h in agent["hosts"].as_array().into_iter().flatten() {
        let name = h["hostname"].as_str().unwrap_or_default().to_string();
        let role = h["role"].as_str().unwrap_or("master").to_string();
        if !rendezvous.is_empty()
            && h["networkConfig"]
                .to_string()
                .contains(&format!("\"{rendezvous}\""))
        {
            bootstrap_host.get_or_insert(name.clone());
        }
        addresses.insert(
            name.clone(),
            super::join::nmstate_addresses(&h["networkConfig"]),
        );
        hosts.push((name, role));
    }
    if bootstrap_host.is_none() {
        bootstrap_host = hosts.first().map(|(n, _)| n.clone());
    }
    Ok(Install {
        name: install["metadata"]["name"]
            .as_str()
            .unwrap_or("cluster")
            .into(),
        domain: install["baseDomain"]
            .as_str()
            .unwrap_or("example.com")
            .into(),
        hosts,
        addresses,
        bootstrap_host,
        watcher_key,
        api_cert_pem: lab(s::LAB_API_CERT)?,
        api_key_pem: lab(s::LAB_API_KEY)?,
        admin_token_sha256: lab(s::LAB_ADMIN_TOKEN_SHA256)?.trim().to_string(),
        machine_configs: super::machineconfig::from_manifests(&out.join("openshift"))?,
    })
}
