//! The BMC watcher: what the simulator knows of the lab's machines, it learns as a real host's
//! firmware would act on it: by reading each emulator over Redfish, every ~500 ms per node, with
//! plain GETs. The system (`PowerState`, `Boot.BootSourceOverrideTarget`/`Enabled`) and its
//! CD/DVD virtual media (`Inserted`, `Image`), found by following links (the system's
//! `VirtualMedia`, else its manager's), become an [`Observation`]. What Redfish cannot show (a
//! `ForceRestart` leaves `PowerState` On), the machine itself knows: that it started. That is
//! read from the emulator's own log, where sushy-tools writes each reset it carried out
//! ([`super::bmc::count_resets`]: those that start the machine), as [`Observation::boots`].

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;
use tokio::sync::mpsc;

use bootstrap::secret::Secret;

/// What the watcher saw of one node's machine at one moment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Observation {
    /// The node (its inventory hostname).
    pub node: String,
    /// `PowerState` is `On`.
    pub powered_on: bool,
    /// The image URL of the inserted CD/DVD virtual media, if any.
    pub media: Option<String>,
    /// The boot override is `Cd` and not `Disabled` (sushy-tools always reports `Continuous`).
    pub boot_cd: bool,
    /// How many times the machine has started (resets that start it, from the emulator's log;
    /// `None` without a log).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boots: Option<u32>,
}

/// One node's BMC as the watcher reads it.
pub struct Target {
    /// The node.
    pub node: String,
    /// The system's URL (the inventory's `bmc.address`; a bare service root is resolved to its
    /// only system).
    pub system_url: String,
    /// Basic credentials, when the BMC wants them.
    pub credentials: Option<(String, Secret)>,
    /// The emulator's log, whose reset lines say when the machine started.
    pub log: Option<std::path::PathBuf>,
}

/// How often each node is read.
pub const PERIOD: Duration = Duration::from_millis(500);

/// Reads every target every [`PERIOD`] and sends each observation to `tx`, until `tx` closes.
/// A read that fails is logged once per distinct failure, and retried.
pub async fn watch(http: reqwest::Client, targets: Vec<Target>, tx: mpsc::Sender<Observation>) {
    let mut tasks = tokio::task::JoinSet::new();
    for t in targets {
        let (http, tx) = (http.clone(), tx.clone());
        tasks.spawn(async move { watch_one(&http, t, &tx).await });
    }
    while tasks.join_next().await.is_some() {}
}

async fn watch_one(http: &reqwest::Client, t: Target, tx: &mpsc::Sender<Observation>) {
    let mut reader = Reader {
        http,
        target: &t,
        system: None,
        cd: None,
        log: LogCount::default(),
    };
    let mut last_error = String::new();
    let mut tick = tokio::time::interval(PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match reader.observe().await {
            Ok(obs) => {
                last_error.clear();
                if tx.send(obs).await.is_err() {
                    return;
                }
            }
            Err(e) => {
                let e = format!("{e:#}");
                if e != last_error {
                    tracing::warn!("watching node {}'s BMC: {e}", t.node);
                    last_error = e;
                }
                // Links may have changed (a restarted emulator): find them again.
                reader.cd = None;
            }
        }
    }
}

struct Reader<'a> {
    http: &'a reqwest::Client,
    target: &'a Target,
    /// The system's resource URL once found.
    system: Option<reqwest::Url>,
    /// The CD/DVD virtual media member's URL once found.
    cd: Option<reqwest::Url>,
    /// The boots counted in the emulator's log so far.
    log: LogCount,
}

/// The starts counted in a growing log: read from where the last read stopped, whole lines only.
#[derive(Default)]
struct LogCount {
    offset: u64,
    boots: u32,
}

impl LogCount {
    fn update(&mut self, path: &std::path::Path) -> u32 {
        use std::io::{Read, Seek};
        let Ok(mut f) = fs_err::File::open(path) else {
            return self.boots;
        };
        if f.seek(std::io::SeekFrom::Start(self.offset)).is_err() {
            return self.boots;
        }
        let mut text = Vec::new();
        if f.read_to_end(&mut text).is_err() {
            return self.boots;
        }
        let whole = text.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        self.boots += super::bmc::count_resets(&String::from_utf8_lossy(&text[..whole]));
        self.offset += whole as u64;
        self.boots
    }
}

impl Reader<'_> {
    async fn get(&self, url: &reqwest::Url) -> Result<Value> {
        let mut req = self.http.get(url.clone());
        if let Some((user, password)) = &self.target.credentials {
            req = req.basic_auth(user, Some(password.expose()));
        }
        let resp = req.send().await.with_context(|| format!("GET {url}"))?;
        let status = resp.status();
        if !status.is_success() {
            anyhow::bail!("GET {} answered {status}", url.path());
        }
        resp.json()
            .await
            .with_context(|| format!("reading GET {url}"))
    }

    fn link(base: &reqwest::Url, v: &Value) -> Option<reqwest::Url> {
        base.join(v.get("@odata.id")?.as_str()?).ok()
    }

    async fn system_url(&mut self) -> Result<reqwest::Url> {
        if let Some(u) = &self.system {
            return Ok(u.clone());
        }
        let mut url = reqwest::Url::parse(&self.target.system_url)?;
        if !url.path().contains("/Systems/") {
            let systems = self.get(&url.join("/redfish/v1/Systems")?).await?;
            let first = systems["Members"]
                .get(0)
                .context("the BMC lists no system")?;
            url = Self::link(&url, first).context("a system without @odata.id")?;
        }
        self.system = Some(url.clone());
        Ok(url)
    }

    async fn find_cd(&self, base: &reqwest::Url, system: &Value) -> Result<reqwest::Url> {
        let collection = match Self::link(base, &system["VirtualMedia"]) {
            Some(u) => u,
            None => {
                let manager = system["Links"]["ManagedBy"]
                    .get(0)
                    .and_then(|m| Self::link(base, m))
                    .context("the system has no VirtualMedia and no manager")?;
                let manager = self.get(&manager).await?;
                Self::link(base, &manager["VirtualMedia"])
                    .context("neither the system nor its manager has VirtualMedia")?
            }
        };
        let members = self.get(&collection).await?;
        for m in members["Members"].as_array().into_iter().flatten() {
            let Some(url) = Self::link(base, m) else {
                continue;
            };
            let media = self.get(&url).await?;
            let types = media["MediaTypes"].as_array().cloned().unwrap_or_default();
            if types.iter().any(|t| t == "CD" || t == "DVD") {
                return Ok(url);
            }
        }
        anyhow::bail!("no CD/DVD virtual media under {}", collection.path())
    }

    async fn observe(&mut self) -> Result<Observation> {
        let url = self.system_url().await?;
        let system = self.get(&url).await?;
        let cd = match &self.cd {
            Some(u) => u.clone(),
            None => {
                let u = self.find_cd(&url, &system).await?;
                self.cd = Some(u.clone());
                u
            }
        };
        let media = self.get(&cd).await?;
        let mut o = observation(&self.target.node, &system, &media);
        if let Some(log) = &self.target.log {
            o.boots = Some(self.log.update(log));
        }
        Ok(o)
    }
}

/// The observation of a system and its CD virtual media resource.
pub fn observation(node: &str, system: &Value, media: &Value) -> Observation {
    let boot = &system["Boot"];
    let image = media["Image"].as_str().unwrap_or_default();
    Observation {
        node: node.to_string(),
        powered_on: system["PowerState"] == "On",
        media: (media["Inserted"] == true && !image.is_empty()).then(|| image.to_string()),
        boot_cd: boot["BootSourceOverrideTarget"] == "Cd"
            && boot["BootSourceOverrideEnabled"] != "Disabled",
        boots: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// sushy-tools' shapes: power, the Cd override (always Continuous there), an inserted image;
    /// an ejected device (Inserted false, Image "") is no media.
    #[test]
    fn an_observation_reads_power_boot_and_media() {
        let system = json!({"PowerState": "On", "Boot": {"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Continuous"}});
        let media = json!({"Inserted": true, "Image": "http://127.0.0.1:9/agent.x86_64.iso"});
        let o = observation("master-0", &system, &media);
        assert!(o.powered_on && o.boot_cd);
        assert_eq!(
            o.media.as_deref(),
            Some("http://127.0.0.1:9/agent.x86_64.iso")
        );
        let off = json!({"PowerState": "Off", "Boot": {"BootSourceOverrideTarget": "Hdd"}});
        let ejected = json!({"Inserted": false, "Image": ""});
        let o = observation("master-0", &off, &ejected);
        assert!(!o.powered_on && !o.boot_cd && o.media.is_none());
        let disabled = json!({"PowerState": "On", "Boot": {"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Disabled"}});
        assert!(!observation("m", &disabled, &ejected).boot_cd);
    }
}
