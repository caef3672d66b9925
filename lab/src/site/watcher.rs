//! The BMC watcher: what the simulator knows of the lab's machines, it learns as a real host's
//! firmware would act on it: by reading each emulator over Redfish with plain GETs, every ~500 ms
//! per node while the machine may be changing, else every few seconds. A machine changes only
//! when its BMC is asked to (a request other than a read in the emulator's log) and then for a
//! while (sushy-tools applies a reset 1-11 s later), so a quiet machine is read seldom: with
//! dozens of emulators on two cores, reading every one twice a second took most of a core. The system (`PowerState`, `Boot.BootSourceOverrideTarget`/`Enabled`) and its
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

/// How often a node that may be changing is read.
pub const PERIOD: Duration = Duration::from_millis(500);
/// How often a quiet node is read.
pub const QUIET_PERIOD: Duration = Duration::from_secs(5);
/// How long a node may be changing after its BMC was asked to change it, or after a reading
/// that differed from the one before: longer than sushy-tools' slowest reset (11 s).
pub const BUSY_FOR: Duration = Duration::from_secs(15);

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
        media: None,
        log: LogCount::default(),
    };
    let mut last_error = String::new();
    let mut pace = Pace::default();
    let mut tick = tokio::time::interval(PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let now = tokio::time::Instant::now();
        let asked = t.log.as_deref().map(|log| {
            let (_, power, all) = reader.log.update(log);
            (power, all)
        });
        if !pace.due(now, asked) {
            continue;
        }
        // A reading at the quiet pace reads everything; a busy one the CD only when a media
        // request came since it was last read (without a log, nothing tells: everything).
        let everything = !pace.busy(now) || t.log.is_none();
        match reader.observe(everything).await {
            Ok(obs) => {
                last_error.clear();
                pace.seen(now);
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
                reader.system = None;
                reader.cd = None;
                reader.media = None;
            }
        }
    }
}

/// When a node is read: at every tick while it may be changing (until [`BUSY_FOR`] after its
/// BMC was last asked to reset it: sushy-tools applies a reset 1-11 s later), at the next tick
/// after any other request that changes it (a boot override or virtual media: applied before
/// its answer, so one reading shows it), else every [`QUIET_PERIOD`]; at every tick when there
/// is no log to tell (no way to know).
#[derive(Default)]
struct Pace {
    /// The power requests the log showed at the last look.
    power: Option<u32>,
    /// All changing requests the log showed at the last look.
    asked: Option<u32>,
    /// A request other than power came since the last reading.
    pending: bool,
    busy_until: Option<tokio::time::Instant>,
    last_read: Option<tokio::time::Instant>,
}

impl Pace {
    /// Whether to read now; `asked` is how many power requests and how many changing requests
    /// of any kind the emulator's log shows in all (`None` without a log). The first look
    /// starts a busy time: what was asked before it, and when, is not known.
    fn due(&mut self, now: tokio::time::Instant, asked: Option<(u32, u32)>) -> bool {
        let Some((power, all)) = asked else {
            return true;
        };
        if self.power != Some(power) {
            self.busy_until = Some(now + BUSY_FOR);
            self.power = Some(power);
        }
        if self.asked.is_some_and(|a| a != all) {
            self.pending = true;
        }
        self.asked = Some(all);
        self.pending || self.busy(now) || self.last_read.is_none_or(|r| now >= r + QUIET_PERIOD)
    }

    /// Whether the node may be changing at `now`.
    fn busy(&self, now: tokio::time::Instant) -> bool {
        self.busy_until.is_some_and(|b| now < b)
    }

    /// A reading was made at `now`.
    fn seen(&mut self, now: tokio::time::Instant) {
        self.pending = false;
        self.last_read = Some(now);
    }
}

struct Reader<'a> {
    http: &'a reqwest::Client,
    target: &'a Target,
    /// The system's resource URL once found.
    system: Option<reqwest::Url>,
    /// The CD/DVD virtual media member's URL once found.
    cd: Option<reqwest::Url>,
    /// The CD/DVD as last read, and the media requests the log showed then: read again only
    /// after another one, or when the machine is quiet (the heartbeat reads everything).
    media: Option<(Value, u32)>,
    /// The boots counted in the emulator's log so far.
    log: LogCount,
}

/// The starts and the changing requests counted in a growing log: read from where the last
/// read stopped, whole lines only.
#[derive(Default)]
struct LogCount {
    offset: u64,
    boots: u32,
    /// Those of `asked` on power.
    power: u32,
    asked: u32,
    /// Those of `asked` on virtual media.
    media: u32,
}

impl LogCount {
    /// The machine's starts, the power requests and all the requests that asked its BMC to
    /// change it, so far.
    fn update(&mut self, path: &std::path::Path) -> (u32, u32, u32) {
        use std::io::{Read, Seek};
        let Ok(mut f) = fs_err::File::open(path) else {
            return (self.boots, self.power, self.asked);
        };
        if f.seek(std::io::SeekFrom::Start(self.offset)).is_err() {
            return (self.boots, self.power, self.asked);
        }
        let mut text = Vec::new();
        if f.read_to_end(&mut text).is_err() {
            return (self.boots, self.power, self.asked);
        }
        let whole = text.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        let lines = String::from_utf8_lossy(&text[..whole]);
        self.boots += super::bmc::count_resets(&lines);
        self.power += super::bmc::count_power_changes(&lines);
        self.asked += super::bmc::count_changes(&lines);
        self.media += super::bmc::count_media_changes(&lines);
        self.offset += whole as u64;
        (self.boots, self.power, self.asked)
    }
}

impl Reader<'_> {
    async fn get(&self, url: &reqwest::Url) -> Result<Value> {
        Ok(self.get_at(url).await?.0)
    }

    /// A GET, and the URL that answered it (after redirects).
    async fn get_at(&self, url: &reqwest::Url) -> Result<(Value, reqwest::Url)> {
        let mut req = self.http.get(url.clone());
        if let Some((user, password)) = &self.target.credentials {
            req = req.basic_auth(user, Some(password.expose()));
        }
        let resp = req.send().await.with_context(|| format!("GET {url}"))?;
        let status = resp.status();
        if !status.is_success() {
            anyhow::bail!("GET {} answered {status}", url.path());
        }
        let at = resp.url().clone();
        let value = resp
            .json()
            .await
            .with_context(|| format!("reading GET {url}"))?;
        Ok((value, at))
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

    /// Reads the machine: its system, and its CD when `everything` is asked for, when it was
    /// never read, or when a media request came since it was.
    async fn observe(&mut self, everything: bool) -> Result<Observation> {
        let named = self.system_url().await?;
        let (system, url) = self.get_at(&named).await?;
        // A system named in the URL answers 307 to its UUID path: read there from now on, one
        // request instead of two.
        self.system = Some(url.clone());
        let cd = match &self.cd {
            Some(u) => u.clone(),
            None => {
                let u = self.find_cd(&url, &system).await?;
                self.cd = Some(u.clone());
                u
            }
        };
        let boots = self.target.log.as_deref().map(|log| self.log.update(log).0);
        let asked = self.log.media;
        let media = match self.media.take() {
            Some((media, then)) if !everything && then == asked => media,
            _ => self.get(&cd).await?,
        };
        let mut o = observation(&self.target.node, &system, &media);
        self.media = Some((media, asked));
        o.boots = boots;
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

    /// A quiet machine was read twice a second like a changing one, which with two dozen
    /// emulators took most of two cores: it is read every QUIET_PERIOD; at every tick for
    /// BUSY_FOR once its BMC is asked to reset it (sushy-tools applies it 1-11 s later); once,
    /// at the next tick, after a boot override or media request (applied before its answer:
    /// the wait stage's eject of 24 nodes kept the emulators busy through host prep).
    #[test]
    fn a_quiet_machine_is_read_seldom_and_a_resetting_one_at_every_tick() {
        let start = tokio::time::Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut pace = Pace::default();
        // Read at every tick from `from` to `to` (ms), the log showing `asked`.
        let busy = |pace: &mut Pace, from: u64, to: u64, asked: (u32, u32)| {
            for t in (from..=to).step_by(500) {
                assert!(pace.due(at(t), Some(asked)), "not read at {t} ms");
                pace.seen(at(t));
            }
        };
        // The first look starts a busy time: every tick until BUSY_FOR after it.
        let quiet = BUSY_FOR.as_millis() as u64;
        busy(&mut pace, 0, quiet - 500, (0, 0));
        // Then quiet: once every QUIET_PERIOD after the last reading.
        let period = QUIET_PERIOD.as_millis() as u64;
        assert!(!pace.due(at(quiet), Some((0, 0))));
        assert!(!pace.due(at(quiet - 500 + period - 100), Some((0, 0))));
        assert!(pace.due(at(quiet - 500 + period), Some((0, 0))));
        pace.seen(at(quiet - 500 + period));
        let t = quiet - 500 + period;
        assert!(!pace.due(at(t + 500), Some((0, 0))));
        // An eject (not power): read at the next tick, then quiet again.
        assert!(pace.due(at(t + 1000), Some((0, 1))));
        pace.seen(at(t + 1000));
        assert!(!pace.due(at(t + 1500), Some((0, 1))));
        assert!(!pace.due(at(t + 1000 + period - 500), Some((0, 1))));
        // A request seen while not yet read (the reading failed) is still owed.
        assert!(pace.due(at(t + 1000 + period), Some((0, 2))));
        assert!(pace.due(at(t + 1500 + period), Some((0, 2))));
        pace.seen(at(t + 1500 + period));
        let t = t + 1500 + period;
        // A reset: every tick for BUSY_FOR after the log showed it, then quiet.
        busy(&mut pace, t + 500, t + quiet, (1, 3));
        assert!(!pace.due(at(t + quiet + 500), Some((1, 3))));
        // Without a log nothing tells when it changes: every tick.
        let mut blind = Pace::default();
        blind.seen(at(0));
        assert!(blind.due(at(500), None) && blind.due(at(1000), None));
    }

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
