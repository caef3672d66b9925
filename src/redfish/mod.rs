//! A Redfish client for one BMC, for booting a node from the agent ISO over virtual media, the
//! way ironic (sushy) does it, with the fallbacks real BMCs, Dell's iDRAC above all, need:
//! links followed rather than paths assumed, InsertMedia retried with the parameters the BMC asks
//! for, If-Match only on PATCH, the boot override on `@Redfish.Settings` or through Dell's OEM
//! import when the node's vendor profile (`vendor.rs`) says so, resets only from the advertised
//! values, task monitors followed. Every call is recorded (method, path, status) and logged;
//! passwords and session tokens never appear in a log, an error or a record. `sequence.rs` puts
//! the calls in the order that boots a node once it is known to be the one meant;
//! `docs/redfish.md` tells the whole sequence.

mod boot;
mod error;
mod http;
mod logs;
mod media;
mod power;
mod sequence;
mod session;
mod tls;
pub mod vendor;

use std::fmt;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

pub use error::RedfishError;
pub use http::{AnswerSize, ANSWER_MAX};
pub use logs::{LogEntries, LogService};
pub use media::Ejected;
pub use sequence::{BootError, BootStep, BootSteps, Identified, IdentityMismatch, NodeIdentity};
pub use tls::{format_fingerprint, parse_fingerprint};
pub use vendor::{BmcInfo, BootPath, Profile, ProfileSource, Vendor};

use http::{Auth, Transport};
use session::odata_id;

/// A BMC as the inventory names it.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// `https://HOST[:PORT]`, or a full system URL `https://HOST/redfish/v1/Systems/ID`;
    /// `http://` only without credentials (a lab emulator).
    pub address: String,
    /// The user and password, when the BMC wants them.
    pub credentials: Option<Credentials>,
    /// How its TLS certificate is trusted.
    pub trust: Trust,
}

/// A BMC user and password. `Debug` never prints the password.
#[derive(Clone)]
pub struct Credentials {
    /// User name.
    pub user: String,
    /// Password.
    pub password: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// How a BMC's TLS certificate is trusted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trust {
    /// The platform's CA certificates.
    System,
    /// The inventory's CA (PEM), beside the platform's (a self-signed CA:TRUE certificate given
    /// here is accepted as the BMC's own).
    Ca(Vec<u8>),
    /// SHA-256 of the BMC's own certificate (DER), pinned.
    Fingerprint([u8; 32]),
    /// The explicit opt-out: not verified (the caller shows it).
    Insecure,
}

/// Limits of the client.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Tries per request on connection errors and 5xx (at least 1).
    pub attempts: u32,
    /// Each request's time limit (connect and answer).
    pub timeout: Duration,
    /// How long [`Client::wait_power_on`] waits.
    pub power_timeout: Duration,
    /// Interval of polls (power state, task monitors without Retry-After).
    pub poll: Duration,
    /// The first retry's delay, doubled for each further one (at most 30 s).
    pub backoff: Duration,
    /// How long a task monitor (a 202's `Location`, Dell's import job) is followed while it
    /// answers an unfinished state; 900 s by default, then the task is an error naming it.
    pub task_timeout: Duration,
    /// The waits of the vendor behaviours, each upstream's own.
    pub waits: VendorWaits,
}

/// How long the client waits out a BMC that is busy, as sushy-oem-idrac and ironic do (their
/// counts and intervals are the defaults; tests shorten them).
#[derive(Clone, Copy, Debug)]
pub struct VendorWaits {
    /// Dell's OEM import refused with `RAC0679` (a job is running) or `LC068` (configuration
    /// pending): tried again this many times (sushy-oem-idrac `RETRY_COUNT`, 35)...
    pub dell_job_retries: u32,
    /// ...this far apart (`RETRY_DELAY`, 15 s).
    pub dell_job_interval: Duration,
    /// A boot PATCH refused with `UnableToModifyDuringSystemPOST` (HPE iLO): attempts in all
    /// (ironic `[redfish]post_boot_retry_attempts`, 6)...
    pub post_attempts: u32,
    /// ...the first wait, doubled each time up to six times it (`post_boot_retry_delay`, 5 s).
    pub post_delay: Duration,
    /// `On` refused with 409 `ActionParameterValueConflict` while the power state settles:
    /// retries (ironic `power_on_conflict_retry_attempts`, 6)...
    pub on_conflict_retries: u32,
    /// ...this far apart (`power_on_conflict_retry_interval`, 10 s).
    pub on_conflict_interval: Duration,
}

impl Default for VendorWaits {
    fn default() -> Self {
        VendorWaits {
            dell_job_retries: 35,
            dell_job_interval: Duration::from_secs(15),
            post_attempts: 6,
            post_delay: Duration::from_secs(5),
            on_conflict_retries: 6,
            on_conflict_interval: Duration::from_secs(10),
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            attempts: 4,
            timeout: Duration::from_secs(60),
            power_timeout: Duration::from_secs(300),
            poll: Duration::from_secs(2),
            backoff: Duration::from_secs(1),
            task_timeout: Duration::from_secs(900),
            waits: VendorWaits::default(),
        }
    }
}

/// One HTTP request made to the BMC (every attempt, retries included).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Call {
    /// HTTP method.
    pub method: String,
    /// Redfish path.
    pub path: String,
    /// The answer's status; `None` when none came (connection error).
    pub status: Option<u16>,
}

/// A ComputerSystem as last read.
#[derive(Clone, Debug, Serialize)]
pub struct SystemInfo {
    /// Its path (`/redfish/v1/Systems/System.Embedded.1`).
    pub path: String,
    /// `Id`.
    pub id: String,
    /// `UUID`.
    pub uuid: Option<String>,
    /// `SerialNumber`.
    pub serial: Option<String>,
    /// `Manufacturer`.
    pub manufacturer: Option<String>,
    /// `Model`.
    pub model: Option<String>,
    /// `PowerState` (On, Off, PoweringOn, PoweringOff).
    pub power_state: Option<String>,
    /// `Boot.BootSourceOverrideTarget`.
    pub boot_target: Option<String>,
    /// `Boot.BootSourceOverrideEnabled`.
    pub boot_enabled: Option<String>,
    #[serde(skip)]
    links: SystemLinks,
}

/// What the client follows from a system.
#[derive(Clone, Debug, Default)]
struct SystemLinks {
    etag: Option<String>,
    ethernet: Option<String>,
    virtual_media: Option<String>,
    managers: Vec<String>,
    settings: Option<String>,
    boot_allowed: Option<Vec<String>>,
    reset_target: Option<String>,
    reset_allowed: Option<Vec<String>>,
    reset_info: Option<String>,
}

/// A virtual media device as last read.
#[derive(Clone, Debug, Serialize)]
pub struct VirtualMedia {
    /// Its path (`/redfish/v1/Managers/iDRAC.Embedded.1/VirtualMedia/CD`).
    pub path: String,
    /// `Id`.
    pub id: String,
    /// `MediaTypes`.
    pub media_types: Vec<String>,
    /// `Inserted`.
    pub inserted: bool,
    /// `Image`.
    pub image: Option<String>,
    #[serde(skip)]
    insert_target: Option<String>,
    #[serde(skip)]
    eject_target: Option<String>,
    #[serde(skip)]
    etag: Option<String>,
}

/// The reset a boot used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum ResetKind {
    /// Power on a system that is off.
    On,
    /// Power on, where `On` is not offered.
    ForceOn,
    /// Restart at once (the system was on).
    ForceRestart,
    /// Power off and on, where `ForceRestart` is not offered.
    PowerCycle,
    /// Restart through the OS, the last choice.
    GracefulRestart,
    /// Power off at once: the first half of a restart that is seen to happen.
    ForceOff,
}

impl ResetKind {
    /// The Redfish `ResetType` value.
    pub fn as_str(self) -> &'static str {
        match self {
            ResetKind::On => "On",
            ResetKind::ForceOn => "ForceOn",
            ResetKind::ForceRestart => "ForceRestart",
            ResetKind::PowerCycle => "PowerCycle",
            ResetKind::GracefulRestart => "GracefulRestart",
            ResetKind::ForceOff => "ForceOff",
        }
    }
}

impl fmt::Display for ResetKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A logged-in client of one BMC.
pub struct Client {
    t: Transport,
    systems_path: String,
    system_path: Option<String>,
}

/// A parsed `bmc.address`.
struct Address {
    base: String,
    bmc: String,
    plain: bool,
    system: Option<String>,
}

fn parse_address(address: &str) -> Result<Address, RedfishError> {
    let shown = crate::secret::redact_url(address);
    let bad = |reason: &str| RedfishError::Address {
        address: shown.clone(),
        reason: reason.to_string(),
    };
    let url = reqwest::Url::parse(address.trim()).map_err(|e| {
        bad(&format!(
            "{e}; write https://HOST[:PORT][/redfish/v1/Systems/ID]"
        ))
    })?;
    let plain = match url.scheme() {
        "https" => false,
        "http" => true,
        _ => return Err(bad("write https://HOST[:PORT][/redfish/v1/Systems/ID]")),
    };
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad(
            "credentials go in nodes[].bmc.credentials, never in the address",
        ));
    }
    let host = url
        .host_str()
        .ok_or_else(|| bad("no host; write https://HOST[:PORT]"))?;
    let bmc = match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    };
    let path = url.path().trim_end_matches('/');
    let system = match path {
        "" | "/redfish/v1" => None,
        p if p.starts_with("/redfish/v1/Systems/") && p.len() > "/redfish/v1/Systems/".len() => {
            Some(p.to_string())
        }
        _ => {
            return Err(bad(
                "the path must be empty or /redfish/v1/Systems/ID (a full system URL)",
            ))
        }
    };
    Ok(Address {
        base: format!("{}://{bmc}", url.scheme()),
        bmc,
        plain,
        system,
    })
}

impl Client {
    /// Reads the service root and logs in: a session when the BMC has a session service, else
    /// Basic (checked with a read of the systems); no authentication without credentials.
    /// Credentials for a plain-HTTP address are refused before anything is sent.
    pub async fn connect(ep: &Endpoint, opts: Options) -> Result<Client, RedfishError> {
        let address = parse_address(&ep.address)?;
        if address.plain && ep.credentials.is_some() {
            return Err(RedfishError::CleartextCredentials { bmc: address.bmc });
        }
        let login = ep
            .credentials
            .as_ref()
            .map(|c| (c.user.clone(), crate::secret::Secret::new(&c.password)));
        let t = Transport::new(address.base, address.bmc, &ep.trust, opts, login)?;
        let root = match t.get("/redfish/v1/").await {
            Err(RedfishError::Unauthorized { .. }) if t.login.is_some() => {
                // The root is meant to be open; some BMCs want credentials even there.
                basic(&t);
                t.get("/redfish/v1/").await?.0
            }
            other => other?.0,
        };
        let systems_path =
            odata_id(root.get("Systems")).unwrap_or_else(|| "/redfish/v1/Systems".to_string());
        let client = Client {
            systems_path,
            system_path: address.system,
            t,
        };
        if client.t.login.is_none() {
            return Ok(client);
        }
        *client.t.sessions_path.lock().expect("sessions poisoned") =
            session::sessions_path(&client.t, &root).await?;
        if !session::login(&client.t).await? {
            basic(&client.t);
            // Basic is only tried on a request; make that one now, so wrong credentials fail
            // here rather than in the middle of a boot.
            client.t.get(&client.systems_path).await?;
        }
        Ok(client)
    }

    /// Every request made so far: method, path and status.
    pub fn calls(&self) -> Vec<Call> {
        self.t.calls()
    }

    /// `"session"`, `"basic"` or `"none"`.
    pub fn auth_kind(&self) -> &'static str {
        match &*self.t.auth.lock().expect("auth poisoned") {
            Auth::None => "none",
            Auth::Basic { .. } => "basic",
            Auth::Session { .. } => "session",
        }
    }

    /// The BMC as messages name it (host[:port]).
    pub fn bmc(&self) -> &str {
        &self.t.bmc
    }

    /// The address's system, or the only member of the Systems collection (several are an
    /// error listing them: the inventory must then name one by its full URL).
    pub async fn system(&self) -> Result<SystemInfo, RedfishError> {
        if let Some(path) = &self.system_path {
            return self.read_system(path).await;
        }
        let (collection, _) = self.t.get(&self.systems_path).await?;
        let members = members(&collection);
        match members.as_slice() {
            [only] => self.read_system(only).await,
            [] => Err(RedfishError::Unexpected {
                bmc: self.t.bmc.clone(),
                path: self.systems_path.clone(),
                what: "the BMC lists no system".to_string(),
            }),
            _ => Err(RedfishError::SeveralSystems {
                bmc: self.t.bmc.clone(),
                systems: members,
            }),
        }
    }

    /// The system read again.
    pub async fn refresh(&self, sys: &SystemInfo) -> Result<SystemInfo, RedfishError> {
        self.read_system(&sys.path).await
    }

    async fn read_system(&self, path: &str) -> Result<SystemInfo, RedfishError> {
        let (body, etag) = self.t.get(path).await?;
        Ok(system_info(path, &body, etag))
    }

    /// The MAC addresses the system's EthernetInterfaces report (`MACAddress` and
    /// `PermanentMACAddress`), lower-case `aa:bb:...`, each once.
    pub async fn ethernet_macs(&self, sys: &SystemInfo) -> Result<Vec<String>, RedfishError> {
        let Some(collection_path) = &sys.links.ethernet else {
            return Err(RedfishError::Unexpected {
                bmc: self.t.bmc.clone(),
                path: sys.path.clone(),
                what: "the system has no EthernetInterfaces link".to_string(),
            });
        };
        let (collection, _) = self.t.get(collection_path).await?;
        let mut macs: Vec<String> = Vec::new();
        for member in members(&collection) {
            let (nic, _) = self.t.get(&member).await?;
            for key in ["MACAddress", "PermanentMACAddress"] {
                let Some(mac) = nic.get(key).and_then(Value::as_str) else {
                    continue;
                };
                let mac = mac.trim().to_ascii_lowercase().replace('-', ":");
                if !mac.is_empty() && mac != "00:00:00:00:00:00" && !macs.contains(&mac) {
                    macs.push(mac);
                }
            }
        }
        Ok(macs)
    }

    /// Deletes the session, if there is one (best effort; the call is recorded).
    pub async fn logout(self) {
        session::logout(&self.t).await;
    }
}

/// Switches the transport to Basic with its credentials.
fn basic(t: &Transport) {
    if let Some((user, password)) = &t.login {
        *t.auth.lock().expect("auth poisoned") = Auth::Basic {
            user: user.clone(),
            password: password.clone(),
        };
    }
}

/// The `@odata.id`s of a collection's `Members`.
fn members(collection: &Value) -> Vec<String> {
    collection
        .get("Members")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|m| odata_id(Some(m)))
        .collect()
}

fn string(body: &Value, pointer: &str) -> Option<String> {
    body.pointer(pointer)
        .and_then(Value::as_str)
        .map(str::to_string)
}

fn strings(value: Option<&Value>) -> Option<Vec<String>> {
    Some(
        value?
            .as_array()?
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
    )
}

fn system_info(path: &str, body: &Value, etag: Option<String>) -> SystemInfo {
    let reset = body.pointer("/Actions/#ComputerSystem.Reset");
    let links = SystemLinks {
        etag: etag.or_else(|| string(body, "/@odata.etag")),
        ethernet: odata_id(body.get("EthernetInterfaces")),
        virtual_media: odata_id(body.get("VirtualMedia")),
        managers: body
            .pointer("/Links/ManagedBy")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|m| odata_id(Some(m)))
            .collect(),
        settings: odata_id(body.pointer("/@Redfish.Settings/SettingsObject")),
        boot_allowed: strings(
            body.pointer("/Boot/BootSourceOverrideTarget@Redfish.AllowableValues"),
        ),
        reset_target: reset
            .and_then(|r| r.get("target"))
            .and_then(Value::as_str)
            .map(str::to_string),
        reset_allowed: strings(reset.and_then(|r| r.get("ResetType@Redfish.AllowableValues"))),
        reset_info: reset
            .and_then(|r| r.get("@Redfish.ActionInfo"))
            .and_then(Value::as_str)
            .map(str::to_string),
    };
    SystemInfo {
        path: path.to_string(),
        id: string(body, "/Id")
            .unwrap_or_else(|| path.rsplit('/').next().unwrap_or(path).to_string()),
        uuid: string(body, "/UUID"),
        serial: string(body, "/SerialNumber"),
        manufacturer: string(body, "/Manufacturer"),
        model: string(body, "/Model"),
        power_state: string(body, "/PowerState"),
        boot_target: string(body, "/Boot/BootSourceOverrideTarget"),
        boot_enabled: string(body, "/Boot/BootSourceOverrideEnabled"),
        links,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_name_a_host_or_a_system() {
        let a = parse_address("https://10.0.0.5").unwrap();
        assert_eq!(
            (a.base.as_str(), a.bmc.as_str()),
            ("https://10.0.0.5", "10.0.0.5")
        );
        assert_eq!(a.system, None);
        let a = parse_address("https://bmc:8443/redfish/v1/Systems/System.Embedded.1/").unwrap();
        assert_eq!(a.bmc, "bmc:8443");
        assert_eq!(
            a.system.as_deref(),
            Some("/redfish/v1/Systems/System.Embedded.1")
        );
        assert!(parse_address("http://h:8000").unwrap().plain);
        let e = parse_address("https://root:calvin@h")
            .err()
            .unwrap()
            .to_string();
        assert!(!e.contains("calvin"), "{e}");
        assert!(parse_address("https://h/other").is_err());
        assert!(parse_address("ftp://h").is_err());
    }

    /// The boot stage drives many BMCs from spawned tasks: every future must be Send.
    #[test]
    fn client_futures_are_send() {
        fn send<T: Send>(_: &T) {}
        let ep = Endpoint {
            address: "https://h".into(),
            credentials: None,
            trust: Trust::System,
        };
        send(&Client::connect(&ep, Options::default()));
        #[allow(dead_code)]
        async fn all(c: Client, s: SystemInfo, v: VirtualMedia) {
            let _ = c.system().await;
            let _ = c.refresh(&s).await;
            let _ = c.ethernet_macs(&s).await;
            let p = Profile::generic();
            let _ = c.profile(&s, None).await;
            let _ = c.virtual_cd(&s, &p).await;
            let _ = c.insert_media(&v, "http://x/a.iso").await;
            let _ = c.set_boot_once_cd(&s, &p).await;
            let _ = c.reset_for_boot(&s).await;
            let _ = c.wait_power_on(&s).await;
            c.logout().await;
        }
        fn check(c: Client, s: SystemInfo, v: VirtualMedia) {
            send(&all(c, s, v));
        }
        let _ = check;
    }

    #[test]
    fn credentials_debug_hides_the_password() {
        let c = Credentials {
            user: "root".into(),
            password: "calvin".into(),
        };
        assert!(!format!("{c:?}").contains("calvin"));
    }
}
