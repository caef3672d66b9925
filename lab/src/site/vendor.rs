//! The lab BMCs' vendor layer: a node given a vendor (`bootstrap-lab up --vendor NODE=VENDOR`)
//! gets a front of ours at its BMC address, with the node's sushy-tools emulator behind it on a
//! port of its own. The front passes every request through and answers as that vendor's BMC does
//! where OpenStack's sushy, sushy-oem-idrac and ironic document a difference, including what the
//! machine then boots: the emulator behind the front holds what the machine will really do (the
//! BMC watcher reads it, [`super::watcher`]), while the front shows what the vendor's BMC shows.
//!
//! - **Dell iDRAC 9** (`dell-idrac9`): System `Manufacturer: Dell Inc.`; the Manager's
//!   `FirmwareVersion` and its OEM action `#OemManager.ImportSystemConfiguration`
//!   (sushy-oem-idrac `resources/manager/manager.py`). The standard `Boot` PATCH to `Cd` is
//!   accepted and read back, but the machine boots its local physical CD drive, not the virtual
//!   media (ironic `drivers/modules/drac/boot.py`: "Dell BMC sets boot device to local physical
//!   CD"): the emulator is not told, so the node never boots the ISO. The one-time virtual CD
//!   boot comes only through ImportSystemConfiguration with sushy-oem-idrac's
//!   `IDRAC_CONFIG_CD` buffer (`ServerBoot.1#BootOnce` `Enabled`,
//!   `ServerBoot.1#FirstBootDevice` `VCD-DVD`): 202 with the job's `Location`, the job
//!   `Running` on its first read and `Completed` after (sushy-oem-idrac `asynchronous.py`
//!   follows it), and then the emulator boots its virtual CD once.
//! - **SuperMicro X12** (`supermicro-x12`): System `Manufacturer: Supermicro`, a model outside
//!   sushy's `_supermicro_models_cd_vmedia`; `UsbCd` among the boot targets. Virtual media is a
//!   USB CD there (sushy `resources/system/system.py`): `UsbCd` boots it, `Cd` is accepted and
//!   read back but boots the disk. InsertMedia with `Inserted` or `WriteProtected` in its body is
//!   refused (sushy `resources/manager/virtual_media.py` leaves both out for this reason).
//! - **generic** (the default): no front; the emulator answers at the BMC address itself.

use anyhow::{bail, Context, Result};
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// A BMC's vendor behaviour in the lab.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Vendor {
    /// sushy-tools as it is: DMTF Redfish without a vendor's differences.
    #[default]
    Generic,
    /// Dell iDRAC 9 (PowerEdge 16G).
    DellIdrac9,
    /// SuperMicro X12.
    SupermicroX12,
}

impl Vendor {
    /// Every vendor, as `--vendor` names them.
    pub const ALL: [Vendor; 3] = [Vendor::Generic, Vendor::DellIdrac9, Vendor::SupermicroX12];

    /// Its name (`dell-idrac9`).
    pub fn name(self) -> &'static str {
        match self {
            Vendor::Generic => "generic",
            Vendor::DellIdrac9 => "dell-idrac9",
            Vendor::SupermicroX12 => "supermicro-x12",
        }
    }

    /// System `Manufacturer` and `Model`, Manager `FirmwareVersion`, as such a BMC reports them.
    fn identity(self) -> Option<(&'static str, &'static str, &'static str)> {
        match self {
            Vendor::Generic => None,
            Vendor::DellIdrac9 => Some(("Dell Inc.", "PowerEdge R760xa", "7.10.50.00")),
            Vendor::SupermicroX12 => Some(("Supermicro", "SYS-420GP-TNR", "01.01.10")),
        }
    }
}

impl std::fmt::Display for Vendor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Vendor {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Vendor::ALL
            .into_iter()
            .find(|v| v.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Vendor::ALL.iter().map(|v| v.name()).collect();
                format!("unknown lab BMC vendor '{s}': one of {}", names.join(", "))
            })
    }
}

/// What the front remembers of its BMC.
#[derive(Debug, Default)]
struct Memory {
    /// A boot override the BMC accepted and reads back, but that the machine will not follow
    /// (`Cd` on a Dell's standard PATCH, `Cd` on a SuperMicro), with its `Enabled`.
    shown_boot: Option<(String, String)>,
    /// SuperMicro: the override was set as `UsbCd` (the emulator holds `Cd`).
    usb_cd: bool,
    /// Dell: import jobs by id, with how many reads they still answer `Running`.
    jobs: BTreeMap<String, u32>,
}

/// One node's front.
pub struct Front {
    /// The node.
    pub node: String,
    /// Its vendor.
    pub vendor: Vendor,
    /// The emulator behind it (`https://127.0.0.1:PORT`).
    pub backend: String,
    /// The front's own base URL (`https://127.0.0.1:8001`), for `Location` headers.
    pub base: String,
    http: reqwest::Client,
    memory: Mutex<Memory>,
}

/// The largest request body the front reads (a BMC's are a few KiB).
const MAX_BODY: usize = 1 << 20;

impl Front {
    /// The front of `node`, talking to its emulator with `http` (which trusts the lab CA).
    pub fn new(
        node: &str,
        vendor: Vendor,
        backend: &str,
        base: &str,
        http: reqwest::Client,
    ) -> Self {
        Front {
            node: node.to_string(),
            vendor,
            backend: backend.trim_end_matches('/').to_string(),
            base: base.trim_end_matches('/').to_string(),
            http,
            memory: Mutex::default(),
        }
    }

    fn memory(&self) -> std::sync::MutexGuard<'_, Memory> {
        self.memory.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The front's router: every path to [`handle`].
pub fn router(front: Arc<Front>) -> axum::Router {
    axum::Router::new().fallback(handle).with_state(front)
}

/// A request as the front read it.
struct Req {
    method: Method,
    path: String,
    query: Option<String>,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Req {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

async fn handle(State(front): State<Arc<Front>>, req: axum::extract::Request) -> Response {
    let (parts, body) = req.into_parts();
    let body = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(b) => b.to_vec(),
        Err(_) => return plain(StatusCode::PAYLOAD_TOO_LARGE, "request body too large"),
    };
    let req = Req {
        method: parts.method,
        path: parts.uri.path().to_string(),
        query: parts.uri.query().map(str::to_string),
        headers: parts.headers,
        body,
    };
    match answer(&front, req).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!("node {}'s {} BMC front: {e:#}", front.node, front.vendor);
            plain(StatusCode::BAD_GATEWAY, &format!("{e:#}"))
        }
    }
}

fn plain(status: StatusCode, text: &str) -> Response {
    let mut r = Response::new(Body::from(text.to_string()));
    *r.status_mut() = status;
    r
}

fn json_response(status: StatusCode, value: &Value, extra: &[(&str, String)]) -> Response {
    let mut r = Response::new(Body::from(value.to_string()));
    *r.status_mut() = status;
    r.headers_mut()
        .insert("content-type", HeaderValue::from_static("application/json"));
    for (k, v) in extra {
        if let (Ok(name), Ok(value)) = (
            axum::http::HeaderName::try_from(*k),
            HeaderValue::from_str(v),
        ) {
            r.headers_mut().insert(name, value);
        }
    }
    r
}

/// A Redfish error body with one `@Message.ExtendedInfo` entry.
fn redfish_error(status: StatusCode, id: &str, message: &str, related: &[&str]) -> Response {
    json_response(
        status,
        &json!({"error": {
            "code": "Base.1.8.GeneralError",
            "message": "A general error has occurred. See Resolution for information on how to resolve the error.",
            "@Message.ExtendedInfo": [{
                "MessageId": id,
                "Message": message,
                "RelatedProperties": related,
                "Severity": "Warning",
            }],
        }}),
        &[],
    )
}

fn is_system(path: &str) -> bool {
    path.strip_prefix("/redfish/v1/Systems/")
        .is_some_and(|rest| !rest.trim_end_matches('/').contains('/'))
}

fn is_manager(path: &str) -> bool {
    path.strip_prefix("/redfish/v1/Managers/")
        .is_some_and(|rest| !rest.trim_end_matches('/').contains('/'))
}

/// The suffix of Dell's import action URL (sushy-oem-idrac finds it by the action key).
const DELL_IMPORT: &str = "/Actions/Oem/EID_674_Manager.ImportSystemConfiguration";
/// Where the front keeps Dell's import jobs.
const DELL_JOBS: &str = "/redfish/v1/TaskService/Tasks/";

async fn answer(front: &Front, req: Req) -> Result<Response> {
    match (front.vendor, &req.method) {
        (Vendor::DellIdrac9, &Method::PATCH) if is_system(&req.path) => {
            if let Some(r) = dell_boot_patch(front, &req).await? {
                return Ok(r);
            }
        }
        (Vendor::DellIdrac9, &Method::POST) if req.path.ends_with(DELL_IMPORT) => {
            return dell_import(front, &req).await;
        }
        (Vendor::DellIdrac9, &Method::GET) if req.path.starts_with(DELL_JOBS) => {
            return Ok(dell_job(front, &req.path));
        }
        (Vendor::SupermicroX12, &Method::PATCH) if is_system(&req.path) => {
            if let Some(r) = supermicro_boot_patch(front, &req).await? {
                return Ok(r);
            }
        }
        (Vendor::SupermicroX12, &Method::POST)
            if req.path.ends_with("/Actions/VirtualMedia.InsertMedia") =>
        {
            let body = req.json();
            let refused: Vec<&str> = ["Inserted", "WriteProtected"]
                .into_iter()
                .filter(|k| body.get(k).is_some())
                .collect();
            if let Some(first) = refused.first() {
                return Ok(redfish_error(
                    StatusCode::BAD_REQUEST,
                    "Base.1.8.ActionParameterUnknown",
                    &format!(
                        "The action InsertMedia was submitted with the invalid parameter {first}."
                    ),
                    &refused,
                ));
            }
        }
        _ => {}
    }
    let (status, headers, body) = forward(front, &req).await?;
    let body = match (&req.method, status.is_success()) {
        (&Method::GET, true) if is_system(&req.path) || is_manager(&req.path) => {
            let mut v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            if v.is_object() {
                if is_system(&req.path) {
                    show_system(front, &mut v);
                } else {
                    show_manager(front, &mut v, &req.path);
                }
                v.to_string().into_bytes()
            } else {
                body
            }
        }
        _ => body,
    };
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = status;
    *r.headers_mut() = headers;
    r.headers_mut().remove("content-length");
    Ok(r)
}

/// Sends `req` on to the emulator; its answer, `Location` pointed back at the front.
async fn forward(front: &Front, req: &Req) -> Result<(StatusCode, HeaderMap, Vec<u8>)> {
    let mut url = format!("{}{}", front.backend, req.path);
    if let Some(q) = &req.query {
        url.push('?');
        url.push_str(q);
    }
    let mut out = front.http.request(req.method.clone(), &url);
    for (k, v) in &req.headers {
        if !matches!(k.as_str(), "host" | "content-length" | "connection") {
            out = out.header(k, v);
        }
    }
    let resp = out
        .body(req.body.clone())
        .send()
        .await
        .with_context(|| format!("forwarding {} {} to the emulator", req.method, req.path))?;
    let status = resp.status();
    let mut headers = HeaderMap::new();
    for (k, v) in resp.headers() {
        if matches!(
            k.as_str(),
            "content-length" | "transfer-encoding" | "connection"
        ) {
            continue;
        }
        let v = match (k.as_str(), v.to_str()) {
            ("location", Ok(loc)) => {
                HeaderValue::from_str(&loc.replace(&front.backend, &front.base))
                    .unwrap_or_else(|_| v.clone())
            }
            _ => v.clone(),
        };
        headers.append(k.clone(), v);
    }
    let body = resp.bytes().await?.to_vec();
    Ok((status, headers, body))
}

/// A `PATCH` of `Boot` with `target` and `enabled` sent to the emulator on the front's behalf.
async fn set_machine_boot(
    front: &Front,
    req: &Req,
    system: &str,
    target: &str,
    enabled: &str,
) -> Result<()> {
    let patch = Req {
        method: Method::PATCH,
        path: system.to_string(),
        query: None,
        headers: auth_headers(&req.headers),
        body: json!({"Boot": {"BootSourceOverrideTarget": target, "BootSourceOverrideEnabled": enabled}})
            .to_string()
            .into_bytes(),
    };
    let (status, _, body) = forward(front, &patch).await?;
    if !status.is_success() {
        bail!(
            "the emulator refused Boot {target}/{enabled}: HTTP {status} {}",
            String::from_utf8_lossy(&body)
        );
    }
    Ok(())
}

/// The request's credentials and a JSON content type.
fn auth_headers(from: &HeaderMap) -> HeaderMap {
    let mut h = HeaderMap::new();
    for k in ["authorization", "x-auth-token"] {
        if let Some(v) = from.get(k) {
            h.insert(k, v.clone());
        }
    }
    h.insert("content-type", HeaderValue::from_static("application/json"));
    h
}

/// The boot override a `PATCH` body asks for: target and enabled (`Once` when not given).
fn boot_of(body: &Value) -> Option<(String, String)> {
    let boot = body.get("Boot")?;
    let target = boot.get("BootSourceOverrideTarget")?.as_str()?.to_string();
    let enabled = boot
        .get("BootSourceOverrideEnabled")
        .and_then(Value::as_str)
        .unwrap_or("Once")
        .to_string();
    Some((target, enabled))
}

/// Dell, standard `Boot` PATCH to `Cd`: accepted and shown, not followed (the physical CD).
async fn dell_boot_patch(front: &Front, req: &Req) -> Result<Option<Response>> {
    let Some((target, enabled)) = boot_of(&req.json()) else {
        return Ok(None);
    };
    if target != "Cd" {
        front.memory().shown_boot = None;
        return Ok(None);
    }
    tracing::info!(
        "node {}'s iDRAC took the standard Boot PATCH to Cd/{enabled}: the machine will boot its local physical CD drive, not the virtual media (ironic drac/boot.py)",
        front.node
    );
    // The machine's own override is not the virtual CD: clear one left from before.
    set_machine_boot(front, req, &req.path, "Hdd", &enabled).await?;
    front.memory().shown_boot = Some((target, enabled));
    Ok(Some(json_response(
        StatusCode::OK,
        &json!({"@Message.ExtendedInfo": [{
            "MessageId": "Base.1.8.Success",
            "Message": "Successfully Completed Request",
            "Severity": "OK",
        }]}),
        &[],
    )))
}

/// Dell's `ImportSystemConfiguration`: the one-time virtual CD boot as sushy-oem-idrac sends it.
async fn dell_import(front: &Front, req: &Req) -> Result<Response> {
    let body = req.json();
    let buffer = body
        .get("ImportBuffer")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let manager = req
        .path
        .strip_suffix(DELL_IMPORT)
        .and_then(|p| p.rsplit('/').next())
        .unwrap_or_default();
    let wanted_once =
        buffer.contains("<Attribute Name=\"ServerBoot.1#BootOnce\">Enabled</Attribute>");
    let wanted_vcd =
        buffer.contains("<Attribute Name=\"ServerBoot.1#FirstBootDevice\">VCD-DVD</Attribute>");
    let right_component = buffer.contains(&format!("<Component FQDD=\"{manager}\">"));
    if !(wanted_once && wanted_vcd && right_component) {
        return Ok(redfish_error(
            StatusCode::BAD_REQUEST,
            "IDRAC.2.8.SYS041",
            "The lab's iDRAC imitates only the one-time virtual CD boot of sushy-oem-idrac's IDRAC_CONFIG_CD (ServerBoot.1#BootOnce Enabled, ServerBoot.1#FirstBootDevice VCD-DVD, Component FQDD the manager's Id).",
            &["ImportBuffer"],
        ));
    }
    let system = first_system(front, req).await?;
    set_machine_boot(front, req, &system, "Cd", "Once").await?;
    let id = {
        let mut m = front.memory();
        m.shown_boot = None;
        let id = format!("JID_{:012}", m.jobs.len() + 1);
        m.jobs.insert(id.clone(), 1);
        id
    };
    tracing::info!(
        "node {}'s iDRAC imported the one-time virtual CD boot (job {id})",
        front.node
    );
    Ok(json_response(
        StatusCode::ACCEPTED,
        &json!({}),
        &[("location", format!("{DELL_JOBS}{id}"))],
    ))
}

/// The system the emulator holds (its only member).
async fn first_system(front: &Front, req: &Req) -> Result<String> {
    let list = Req {
        method: Method::GET,
        path: "/redfish/v1/Systems".to_string(),
        query: None,
        headers: auth_headers(&req.headers),
        body: Vec::new(),
    };
    let (status, _, body) = forward(front, &list).await?;
    if !status.is_success() {
        bail!("listing the emulator's systems: HTTP {status}");
    }
    let v: Value = serde_json::from_slice(&body)?;
    v["Members"][0]["@odata.id"]
        .as_str()
        .map(str::to_string)
        .context("the emulator has no system")
}

/// A Dell import job: `Running` on its first read, then `Completed`.
fn dell_job(front: &Front, path: &str) -> Response {
    let id = path.trim_start_matches(DELL_JOBS).trim_end_matches('/');
    let mut m = front.memory();
    let Some(left) = m.jobs.get_mut(id) else {
        return redfish_error(
            StatusCode::NOT_FOUND,
            "Base.1.8.ResourceMissingAtURI",
            &format!("The resource at the URI {path} was not found."),
            &[],
        );
    };
    if *left > 0 {
        *left -= 1;
        return json_response(
            StatusCode::ACCEPTED,
            &json!({"Id": id, "TaskState": "Running", "TaskStatus": "OK", "PercentComplete": 50}),
            &[("location", path.to_string())],
        );
    }
    json_response(
        StatusCode::OK,
        &json!({
            "@odata.id": path, "Id": id, "Name": "Import Configuration",
            "TaskState": "Completed", "TaskStatus": "OK", "PercentComplete": 100,
            "Messages": [{"MessageId": "SYS053", "Message": "Successfully imported and applied Server Configuration Profile."}],
        }),
        &[],
    )
}

/// SuperMicro `Boot` PATCH: `UsbCd` is the virtual media, `Cd` is shown but boots the disk.
async fn supermicro_boot_patch(front: &Front, req: &Req) -> Result<Option<Response>> {
    let Some((target, enabled)) = boot_of(&req.json()) else {
        return Ok(None);
    };
    match target.as_str() {
        "UsbCd" => {
            set_machine_boot(front, req, &req.path, "Cd", &enabled).await?;
            let mut m = front.memory();
            m.usb_cd = true;
            m.shown_boot = None;
        }
        "Cd" => {
            tracing::info!(
                "node {}'s SuperMicro BMC took Boot Cd/{enabled}: its virtual media is a USB CD, so the machine boots its disk (sushy system.py)",
                front.node
            );
            set_machine_boot(front, req, &req.path, "Hdd", &enabled).await?;
            let mut m = front.memory();
            m.usb_cd = false;
            m.shown_boot = Some((target, enabled));
        }
        _ => {
            let mut m = front.memory();
            m.usb_cd = false;
            m.shown_boot = None;
            return Ok(None);
        }
    }
    Ok(Some(
        Response::builder()
            .status(StatusCode::NO_CONTENT)
            .body(Body::empty())?,
    ))
}

/// A System as the vendor's BMC shows it.
fn show_system(front: &Front, v: &mut Value) {
    let Some((manufacturer, model, _)) = front.vendor.identity() else {
        return;
    };
    v["Manufacturer"] = json!(manufacturer);
    v["Model"] = json!(model);
    let m = front.memory();
    let boot = &mut v["Boot"];
    if !boot.is_object() {
        return;
    }
    if front.vendor == Vendor::SupermicroX12 {
        let key = "BootSourceOverrideTarget@Redfish.AllowableValues";
        if let Some(list) = boot[key].as_array_mut() {
            if !list.iter().any(|t| t == "UsbCd") {
                list.push(json!("UsbCd"));
            }
        }
        if m.usb_cd && boot["BootSourceOverrideTarget"] == "Cd" {
            boot["BootSourceOverrideTarget"] = json!("UsbCd");
        }
    }
    if let Some((target, enabled)) = &m.shown_boot {
        boot["BootSourceOverrideTarget"] = json!(target);
        boot["BootSourceOverrideEnabled"] = json!(enabled);
    }
}

/// A Manager as the vendor's BMC shows it: its firmware, and Dell's OEM import action.
fn show_manager(front: &Front, v: &mut Value, path: &str) {
    let Some((_, _, firmware)) = front.vendor.identity() else {
        return;
    };
    v["FirmwareVersion"] = json!(firmware);
    if front.vendor == Vendor::DellIdrac9 {
        let base = path.trim_end_matches('/');
        if !v["Actions"].is_object() {
            v["Actions"] = json!({});
        }
        v["Actions"]["Oem"] = json!({
            "#OemManager.v1_4_0.OemManager#OemManager.ImportSystemConfiguration": {
                "target": format!("{base}{DELL_IMPORT}"),
                "ShutdownType@Redfish.AllowableValues": ["Graceful", "Forced", "NoReboot"],
            }
        });
    }
}
