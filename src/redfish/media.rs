//! Virtual media: finding the CD/DVD device by links (the System's own `VirtualMedia`, else its
//! managers' — iDRAC moved it from `Managers/iDRAC.Embedded.1` to `Systems/System.Embedded.1`
//! in firmware 6.00.02; on iDRAC 10 only member `1`, ironic `drac/boot.py`), and inserting the
//! ISO as sushy's `virtual_media.py` does: `{"Image"}` alone (SuperMicro refuses `Inserted` and
//! `WriteProtected`), then with what the BMC says is missing (`TransferProtocolType`,
//! `TransferMethod`, `UserName`/`Password` `"none"` on NVIDIA DGX).

use reqwest::Method;
use serde_json::{json, Map, Value};

use super::error::{BmcReason, RedfishError};
use super::http::Retry;
use super::session::odata_id;
use super::vendor::Profile;
use super::{members, string, strings, Client, SystemInfo, VirtualMedia};

/// A virtual CD/DVD [`Client::eject_cds`] ejected.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ejected {
    /// The device's path.
    pub path: String,
    /// The image it held, as it read before the eject.
    pub image: Option<String>,
    /// The BMC's refusal of the eject, in its words, when it refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// The device still reads `Inserted` after the eject (iDRAC may keep a stale `Inserted`
    /// after an eject it did; with a refusal, the image may still be there).
    pub reads_inserted: bool,
}

/// How many times an InsertMedia is sent with more parameters before giving up.
const INSERT_TRIES: usize = 5;

/// How many times the device is read back after an insertion before it is a failure.
const READ_BACKS: usize = 5;

impl Client {
    /// The virtual CD/DVD: the first member with CD or DVD in `MediaTypes` of the System's
    /// `VirtualMedia`, else of each manager's in `Links.ManagedBy`; only the member whose `Id`
    /// is the profile's `media_member`, when it names one.
    pub async fn virtual_cd(
        &self,
        sys: &SystemInfo,
        profile: &Profile,
    ) -> Result<VirtualMedia, RedfishError> {
        let only = profile.media_member.as_deref();
        let mut searched = Vec::new();
        if let Some(collection) = &sys.links.virtual_media {
            searched.push(collection.clone());
            if let Some(vm) = self.cd_in(collection, only).await? {
                return Ok(vm);
            }
        }
        for manager in &sys.links.managers {
            let (body, _) = self.t.get(manager).await?;
            let Some(collection) = odata_id(body.get("VirtualMedia")) else {
                searched.push(format!("{manager} (no VirtualMedia)"));
                continue;
            };
            searched.push(collection.clone());
            if let Some(vm) = self.cd_in(&collection, only).await? {
                return Ok(vm);
            }
        }
        if searched.is_empty() {
            searched.push(format!(
                "{} (no VirtualMedia, no Links.ManagedBy)",
                sys.path
            ));
        }
        if let Some(id) = only {
            return Err(RedfishError::Unexpected {
                bmc: self.t.bmc.clone(),
                path: searched.join(", "),
                what: format!("the {} profile boots only virtual media member {id} (ironic drac/boot.py: the only one iDRAC 10 boots), and no member {id} with CD or DVD in MediaTypes is there; set nodes[].bmc.vendor if the generation is misread", profile.name),
            });
        }
        Err(RedfishError::NoVirtualCd {
            bmc: self.t.bmc.clone(),
            searched,
        })
    }

    async fn cd_in(
        &self,
        collection: &str,
        only: Option<&str>,
    ) -> Result<Option<VirtualMedia>, RedfishError> {
        let body = match self.t.get(collection).await {
            Ok((body, _)) => body,
            // An advertised but absent collection (some firmware): look elsewhere.
            Err(RedfishError::Status { status: 404, .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        for member in members(&body) {
            let last = member
                .trim_end_matches('/')
                .rsplit('/')
                .next()
                .unwrap_or("");
            if only.is_some_and(|id| id != last) {
                continue;
            }
            let vm = self.read_media(&member).await?;
            if only.is_some_and(|id| id != vm.id) {
                continue;
            }
            if vm
                .media_types
                .iter()
                .any(|t| t.eq_ignore_ascii_case("CD") || t.eq_ignore_ascii_case("DVD"))
            {
                return Ok(Some(vm));
            }
        }
        Ok(None)
    }

    async fn read_media(&self, path: &str) -> Result<VirtualMedia, RedfishError> {
        let (body, etag) = self.t.get(path).await?;
        let action = |name: &str| {
            body.pointer(&format!("/Actions/#VirtualMedia.{name}/target"))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        Ok(VirtualMedia {
            path: path.to_string(),
            id: string(&body, "/Id").unwrap_or_default(),
            media_types: strings(body.get("MediaTypes")).unwrap_or_default(),
            inserted: body
                .get("Inserted")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            image: string(&body, "/Image").filter(|i| !i.is_empty()),
            insert_target: action("InsertMedia"),
            eject_target: action("EjectMedia"),
            etag: etag.or_else(|| string(&body, "/@odata.etag")),
        })
    }

    /// Inserts `image_url` (the BMC fetches it) as ironic `redfish/boot.py` does before every
    /// boot (`eject_vmedia`, then `_insert_vmedia`): whatever the device reads, even our own URL
    /// (iDRAC keeps a stale `Inserted`/`Image` after an eject), it is ejected first and the
    /// image inserted again; InsertMedia with `Image`, then with `TransferProtocolType`,
    /// `TransferMethod: Stream` or `UserName`/`Password` `"none"` when the BMC asks for them; a
    /// PATCH of the device when it has no InsertMedia action. Then reads back `Inserted` and
    /// `Image`.
    pub async fn insert_media(
        &self,
        vm: &VirtualMedia,
        image_url: &str,
    ) -> Result<(), RedfishError> {
        let now = self.read_media(&vm.path).await?;
        if now.inserted || now.image.is_some() {
            self.eject_or_go_on(&now).await?;
        }
        self.insert_fresh(vm, image_url).await
    }

    /// The insertion itself, on a device just ejected ([`Client::eject_cds`] or
    /// [`Client::insert_media`]).
    pub(super) async fn insert_fresh(
        &self,
        vm: &VirtualMedia,
        image_url: &str,
    ) -> Result<(), RedfishError> {
        let now = self.read_media(&vm.path).await?;
        match &now.insert_target {
            Some(target) => self.insert_action(target, image_url).await?,
            None => {
                let body = json!({"Image": image_url, "Inserted": true, "WriteProtected": true});
                self.t.patch(&now.path, &body, now.etag.as_deref()).await?;
            }
        }
        // Some BMCs show the insertion a moment after answering; a few reads are allowed.
        let mut after = self.read_media(&vm.path).await?;
        for _ in 1..READ_BACKS {
            if after.inserted && after.image.as_deref() == Some(image_url) {
                return Ok(());
            }
            tokio::time::sleep(self.t.opts.poll).await;
            after = self.read_media(&vm.path).await?;
        }
        if after.inserted && after.image.as_deref() == Some(image_url) {
            return Ok(());
        }
        Err(RedfishError::ReadBack {
            bmc: self.t.bmc.clone(),
            path: vm.path.clone(),
            what: format!("inserting {image_url}"),
            expected: format!("Inserted true, Image {image_url}"),
            actual: format!(
                "Inserted {}, Image {}",
                after.inserted,
                after.image.as_deref().unwrap_or("(none)")
            ),
        })
    }

    /// InsertMedia, adding what the BMC says is missing, in sushy's order: `TransferProtocolType`
    /// (from the URL's scheme) when a 400 names it or says ActionParameterMissing about it,
    /// `TransferMethod: Stream` when one names TransferMethod, `UserName` and `Password`
    /// `"none"` when one asks for them (NVIDIA DGX), and `TransferMethod` when the BMC still
    /// refuses with the protocol given. `Inserted` and `WriteProtected` are left out, as sushy
    /// leaves them out: they are the defaults, and SuperMicro refuses them.
    async fn insert_action(&self, target: &str, image_url: &str) -> Result<(), RedfishError> {
        let mut body = Map::new();
        body.insert("Image".into(), json!(image_url));
        let protocol = if image_url.starts_with("https://") {
            "HTTPS"
        } else {
            "HTTP"
        };
        for _ in 0..INSERT_TRIES {
            let payload = Value::Object(body.clone());
            let answer = self
                .t
                .request(Method::POST, target, Some(&payload), None, Retry::Transient)
                .await?;
            if answer.status != 400 {
                let answer = self.t.check(&Method::POST, target, answer)?;
                if answer.status == 202 {
                    // Follow the task like any action.
                    self.t.follow_task(target, "POST", answer).await?;
                }
                return Ok(());
            }
            let reason = BmcReason::of(&answer.body);
            let has_protocol = body.contains_key("TransferProtocolType");
            let has_method = body.contains_key("TransferMethod");
            let wants_credentials = reason.names("UserName") || reason.names("Password");
            if !has_protocol
                && (reason.names("TransferProtocolType")
                    || (reason.names("ActionParameterMissing") && !wants_credentials))
            {
                body.insert("TransferProtocolType".into(), json!(protocol));
            } else if !has_method && reason.names("TransferMethod") {
                body.insert("TransferMethod".into(), json!("Stream"));
            } else if !body.contains_key("UserName") && wants_credentials {
                // sushy, for NVIDIA DGX (bug 2071945): the image needs no credentials, but the
                // BMC wants the parameters present.
                body.insert("UserName".into(), json!("none"));
                body.insert("Password".into(), json!("none"));
            } else if !has_method && has_protocol {
                body.insert("TransferMethod".into(), json!("Stream"));
            } else {
                return self.t.check(&Method::POST, target, answer).map(|_| ());
            }
            tracing::info!(bmc = %self.t.bmc, path = target, "InsertMedia refused; retrying with the parameters the BMC asks for");
        }
        Err(RedfishError::Unexpected {
            bmc: self.t.bmc.clone(),
            path: target.to_string(),
            what: format!("InsertMedia refused {INSERT_TRIES} times"),
        })
    }

    /// Ejects before an insertion: a refusal (iDRAC answers `VRM0009` "No Virtual Media devices
    /// are currently connected" to a stale `Inserted`) is logged and the insertion tried anyway:
    /// its own answer and read-back tell whether the device was free.
    async fn eject_or_go_on(&self, vm: &VirtualMedia) -> Result<(), RedfishError> {
        match self.eject(vm).await {
            Err(e @ RedfishError::Status { .. }) => {
                tracing::warn!(bmc = %self.t.bmc, path = %vm.path, "the BMC refused to eject ({e}); inserting anyway");
                Ok(())
            }
            other => other,
        }
    }

    /// Ejects every virtual CD/DVD that holds an image, in the System's `VirtualMedia` and each
    /// manager's, as ironic `redfish/boot.py` `_eject_vmedia` does (`boot_device` CD: DVD-only
    /// members too): before a boot, so no other image is booted, and after the install, so a
    /// later reboot boots the disk. Returns each device that held an image, with the image, the
    /// BMC's refusal if it refused, and whether it still reads `Inserted` after: the caller
    /// judges (before a boot the insertion's own answer and read-back do; after the install the
    /// record says so). Only a failure to talk to the BMC is an error.
    pub async fn eject_cds(&self, sys: &SystemInfo) -> Result<Vec<Ejected>, RedfishError> {
        let mut collections = Vec::new();
        if let Some(c) = &sys.links.virtual_media {
            collections.push(c.clone());
        }
        for manager in &sys.links.managers {
            let (body, _) = self.t.get(manager).await?;
            if let Some(c) = odata_id(body.get("VirtualMedia")) {
                if !collections.contains(&c) {
                    collections.push(c);
                }
            }
        }
        let mut ejected = Vec::new();
        for collection in collections {
            let body = match self.t.get(&collection).await {
                Ok((body, _)) => body,
                Err(RedfishError::Status { status: 404, .. }) => continue,
                Err(e) => return Err(e),
            };
            for member in members(&body) {
                let vm = self.read_media(&member).await?;
                let cd = vm
                    .media_types
                    .iter()
                    .any(|t| t.eq_ignore_ascii_case("CD") || t.eq_ignore_ascii_case("DVD"));
                if !cd || !(vm.inserted || vm.image.is_some()) {
                    continue;
                }
                let refused = match self.eject(&vm).await {
                    Ok(()) => None,
                    Err(e @ RedfishError::Status { .. }) => Some(e.to_string()),
                    Err(e) => return Err(e),
                };
                let after = self.read_media(&member).await?;
                ejected.push(Ejected {
                    path: member,
                    image: vm.image,
                    refused,
                    reads_inserted: after.inserted,
                });
            }
        }
        Ok(ejected)
    }

    /// EjectMedia with `{}` (or a PATCH without the action); a refusal is forgiven when the
    /// device reads back empty.
    async fn eject(&self, vm: &VirtualMedia) -> Result<(), RedfishError> {
        let result = match &vm.eject_target {
            Some(target) => self.t.action(target, &json!({}), Retry::Transient).await,
            None => {
                let body = json!({"Image": null, "Inserted": false});
                self.t.patch(&vm.path, &body, vm.etag.as_deref()).await
            }
        };
        match result {
            Ok(_) => Ok(()),
            Err(e @ RedfishError::Status { .. }) => {
                let now = self.read_media(&vm.path).await?;
                if now.inserted {
                    Err(e)
                } else {
                    Ok(())
                }
            }
            Err(e) => Err(e),
        }
    }
}
