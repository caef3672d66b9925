//! The one-time boot override to the virtual CD, the way the node's [`Profile`] says:
//!
//! - the standard path: `PATCH {"Boot": {"BootSourceOverrideTarget": T,
//!   "BootSourceOverrideEnabled": "Once"}}` (T is `Cd`, or `UsbCd` on SuperMicro; AMI also gets
//!   `BootSourceOverrideMode`) on the system, If-Match with its ETag, or on its
//!   `@Redfish.Settings` object when that holds the boot properties or the system refuses the
//!   PATCH (sushy `set_system_boot_options`); a PATCH
//!   refused with `UnableToModifyDuringSystemPOST` (HPE iLO) is sent again as ironic's
//!   `redfish/management.py` does;
//! - Dell: the OEM `ImportSystemConfiguration` (`ServerBoot.1#BootOnce`, `FirstBootDevice
//!   VCD-DVD`, as sushy-oem-idrac's `set_virtual_boot_device`), `RAC0679` and `LC068` waited out
//!   with its count and interval, the job followed to its end. The standard PATCH is never sent
//!   to a Dell: iDRAC accepts it, reads it back, and boots its local physical CD.

use std::time::Instant;

use reqwest::Method;
use serde_json::{json, Value};

use super::error::{BmcReason, RedfishError};
use super::http::Retry;
use super::vendor::{BootPath, Profile};
use super::{Client, SystemInfo};

const ENABLED: &str = "Once";

fn is_once(boot: Option<&Value>, target: &str) -> bool {
    let Some(boot) = boot else { return false };
    boot.get("BootSourceOverrideTarget").and_then(Value::as_str) == Some(target)
        && boot
            .get("BootSourceOverrideEnabled")
            .and_then(Value::as_str)
            == Some(ENABLED)
}

/// The read-back test: the target is the profile's and the override is active. `Once` is what
/// was asked; `Continuous` is accepted too, because some implementations (the sushy-tools
/// emulator, whose libvirt driver keeps every override continuous) ignore
/// `BootSourceOverrideEnabled`.
fn reads_back(boot: Option<&Value>, target: &str, bmc: &str, path: &str) -> bool {
    let Some(boot) = boot else { return false };
    let got = boot.get("BootSourceOverrideTarget").and_then(Value::as_str);
    let enabled = boot
        .get("BootSourceOverrideEnabled")
        .and_then(Value::as_str);
    match (got, enabled) {
        (Some(t), Some(ENABLED)) if t == target => true,
        (Some(t), Some("Continuous")) if t == target => {
            tracing::warn!(
                bmc,
                path,
                "the boot override reads back {target} but Continuous, not Once"
            );
            true
        }
        _ => false,
    }
}

impl Client {
    /// Sets the next boot, once, to the virtual CD the way `profile` says, and reads it back
    /// (the standard path) or follows Dell's import job to its end (see the module doc).
    pub async fn set_boot_once_cd(
        &self,
        sys: &SystemInfo,
        profile: &Profile,
    ) -> Result<(), RedfishError> {
        match profile.boot_path {
            BootPath::DellOem => self.dell_virtual_boot(sys).await,
            BootPath::Standard => self.standard_boot(sys, profile).await,
        }
    }

    async fn standard_boot(&self, sys: &SystemInfo, profile: &Profile) -> Result<(), RedfishError> {
        let target = profile.boot_target.as_str();
        let (body, etag) = self.t.get(&sys.path).await?;
        let sys = super::system_info(&sys.path, &body, etag);
        if is_once(body.get("Boot"), target) && !profile.full_boot_request {
            return Ok(());
        }
        let mut boot =
            json!({"BootSourceOverrideTarget": target, "BootSourceOverrideEnabled": ENABLED});
        if profile.full_boot_request {
            // ironic: these vendors want mode, enabled and target in one request; the mode is
            // the system's own, else UEFI.
            let mode = body
                .pointer("/Boot/BootSourceOverrideMode")
                .and_then(Value::as_str)
                .unwrap_or("UEFI");
            boot["BootSourceOverrideMode"] = json!(mode);
        }
        let patch = json!({ "Boot": boot });
        let settings = match &sys.links.settings {
            Some(path) => match self.t.get(path).await {
                Ok(read) => Some((path.clone(), read)),
                // Advertised but not served (some firmware): the other ways remain.
                Err(RedfishError::Status { .. }) => None,
                Err(e) => return Err(e),
            },
            None => None,
        };
        let settings_has_boot = settings
            .as_ref()
            .is_some_and(|(_, (b, _))| b.pointer("/Boot/BootSourceOverrideTarget").is_some());
        let target_allowed = sys
            .links
            .boot_allowed
            .as_ref()
            .is_none_or(|a| a.iter().any(|v| v == target));
        let mut refusal = None;
        if target_allowed && !settings_has_boot {
            match self
                .patch_outside_post(&sys.path, &patch, sys.links.etag.as_deref())
                .await
            {
                Ok(_) => return self.read_back_boot(&sys.path, target).await,
                Err(e) if refused(&e) => refusal = Some(e),
                Err(e) => return Err(e),
            }
        }
        if let Some((path, (_, etag))) = &settings {
            match self.patch_outside_post(path, &patch, etag.as_deref()).await {
                Ok(_) => return self.read_back_settings(&sys.path, path, target).await,
                // The system's own refusal, if it gave one, is the one to show.
                Err(e) if refused(&e) => refusal = refusal.or(Some(e)),
                Err(e) => return Err(e),
            }
        }
        Err(refusal.unwrap_or_else(|| RedfishError::NotAllowed {
            bmc: self.t.bmc.clone(),
            path: format!("{}: Boot.BootSourceOverrideTarget", sys.path),
            wanted: vec![target.to_string()],
            allowed: sys.links.boot_allowed.clone().unwrap_or_default(),
        }))
    }

    /// A PATCH, sent again while the BMC answers `UnableToModifyDuringSystemPOST` (HPE iLO in
    /// POST), as ironic's `_set_boot_device` does: `Options.waits.post_attempts` in all, waiting
    /// `post_delay` doubled each time, at most six times it.
    async fn patch_outside_post(
        &self,
        path: &str,
        body: &Value,
        etag: Option<&str>,
    ) -> Result<(), RedfishError> {
        let waits = self.t.opts.waits;
        let mut delay = waits.post_delay;
        let mut attempt = 1;
        loop {
            match self.t.patch(path, body, etag).await {
                Ok(_) => return Ok(()),
                Err(e) if during_post(&e) && attempt < waits.post_attempts.max(1) => {
                    tracing::warn!(bmc = %self.t.bmc, path, attempt, total = waits.post_attempts, "the system is in POST and refuses the boot override; trying again");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(waits.post_delay * 6);
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn read_back_boot(&self, path: &str, target: &str) -> Result<(), RedfishError> {
        let (body, _) = self.t.get(path).await?;
        if reads_back(body.get("Boot"), target, &self.t.bmc, path) {
            return Ok(());
        }
        Err(self.boot_read_back_error(path, &body, target))
    }

    /// A Settings object holds the pending values until the next reset; either it or the
    /// system must show them.
    async fn read_back_settings(
        &self,
        system: &str,
        settings: &str,
        target: &str,
    ) -> Result<(), RedfishError> {
        let (pending, _) = self.t.get(settings).await?;
        if reads_back(pending.get("Boot"), target, &self.t.bmc, settings) {
            return Ok(());
        }
        let (body, _) = self.t.get(system).await?;
        if reads_back(body.get("Boot"), target, &self.t.bmc, system) {
            return Ok(());
        }
        Err(self.boot_read_back_error(settings, &pending, target))
    }

    fn boot_read_back_error(&self, path: &str, body: &Value, target: &str) -> RedfishError {
        let show = |key: &str| {
            body.pointer(&format!("/Boot/{key}"))
                .and_then(Value::as_str)
                .unwrap_or("(none)")
                .to_string()
        };
        RedfishError::ReadBack {
            bmc: self.t.bmc.clone(),
            path: path.to_string(),
            what: "setting the boot override".to_string(),
            expected: format!(
                "BootSourceOverrideTarget {target}, BootSourceOverrideEnabled {ENABLED}"
            ),
            actual: format!(
                "BootSourceOverrideTarget {}, BootSourceOverrideEnabled {}",
                show("BootSourceOverrideTarget"),
                show("BootSourceOverrideEnabled")
            ),
        }
    }

    /// The manager (Id) and target of Dell's `#OemManager.ImportSystemConfiguration`, if a
    /// manager of the system has it.
    async fn dell_import_action(
        &self,
        sys: &SystemInfo,
    ) -> Result<Option<(String, String)>, RedfishError> {
        for manager in &sys.links.managers {
            let (body, _) = self.t.get(manager).await?;
            let Some(oem) = body.pointer("/Actions/Oem").and_then(Value::as_object) else {
                continue;
            };
            let target = oem
                .iter()
                .find(|(k, _)| k.ends_with("#OemManager.ImportSystemConfiguration"))
                .and_then(|(_, v)| v.get("target"))
                .and_then(Value::as_str);
            if let Some(target) = target {
                let id = body
                    .get("Id")
                    .and_then(Value::as_str)
                    .unwrap_or("iDRAC.Embedded.1");
                return Ok(Some((id.to_string(), target.to_string())));
            }
        }
        Ok(None)
    }

    /// Dell's way (sushy-oem-idrac `set_virtual_boot_device`): a Server Configuration Profile
    /// fragment setting the iDRAC's one-time boot to the virtual CD, imported as a job whose
    /// completion is the proof. While the iDRAC answers `RAC0679` (a job is running) or `LC068`
    /// (configuration pending) the import is sent again, `Options.waits.dell_job_retries`
    /// times `dell_job_interval` apart; the system's Boot is read and logged after.
    async fn dell_virtual_boot(&self, sys: &SystemInfo) -> Result<(), RedfishError> {
        let Some((manager_id, target)) = self.dell_import_action(sys).await? else {
            return Err(RedfishError::Unexpected {
                bmc: self.t.bmc.clone(),
                path: sys.links.managers.join(", "),
                what: "the Dell profile sets the virtual-CD boot through the OEM #OemManager.ImportSystemConfiguration and no manager of this system offers it; the standard Boot PATCH is not sent, because iDRAC accepts it and then boots its local physical CD (ironic drac/boot.py). Update the iDRAC firmware, or set nodes[].bmc.vendor if this BMC is not an iDRAC".to_string(),
            });
        };
        // iDRAC fails the job on insignificant whitespace in this XML (sushy-oem-idrac).
        let buffer = format!(
            "<SystemConfiguration><Component FQDD=\"{manager_id}\">\
             <Attribute Name=\"ServerBoot.1#BootOnce\">Enabled</Attribute>\
             <Attribute Name=\"ServerBoot.1#FirstBootDevice\">VCD-DVD</Attribute>\
             </Component></SystemConfiguration>"
        );
        let body = json!({"ShareParameters": {"Target": "ALL"}, "ImportBuffer": buffer});
        let waits = self.t.opts.waits;
        let started = Instant::now();
        let mut retries = 0;
        loop {
            let answer = self
                .t
                .request(Method::POST, &target, Some(&body), None, Retry::Transient)
                .await?;
            if answer.status < 400 {
                self.t.follow_task(&target, "POST", answer).await?;
                break;
            }
            let reason = BmcReason::of(&answer.body);
            let Some(busy) = IdracBusy::of(&reason) else {
                return self.t.check(&Method::POST, &target, answer).map(|_| ());
            };
            if retries >= waits.dell_job_retries {
                return Err(RedfishError::Busy {
                    bmc: self.t.bmc.clone(),
                    path: target,
                    message_id: busy.id(),
                    message: reason.message,
                    tries: retries + 1,
                    waited: started.elapsed(),
                    fix: busy.fix(),
                });
            }
            retries += 1;
            tracing::warn!(bmc = %self.t.bmc, path = %target, id = busy.id(), retries, "iDRAC is busy; the OEM boot import will be sent again");
            tokio::time::sleep(waits.dell_job_interval).await;
        }
        let (now, _) = self.t.get(&sys.path).await?;
        tracing::info!(bmc = %self.t.bmc, path = %sys.path, boot = ?now.get("Boot"), "Dell OEM import completed: one-time boot from the virtual CD");
        Ok(())
    }
}

/// Why an iDRAC refuses the import for now (sushy-oem-idrac `constants.py`).
#[derive(Clone, Copy)]
enum IdracBusy {
    /// `RAC0679`: a job is running.
    JobRunning,
    /// `LC068`: a configuration is pending.
    ConfigPending,
}

impl IdracBusy {
    fn of(reason: &BmcReason) -> Option<IdracBusy> {
        let has = |id: &str| reason.message_ids.iter().any(|m| m.contains(id));
        if has("LC068") {
            Some(IdracBusy::ConfigPending)
        } else if has("RAC0679") {
            Some(IdracBusy::JobRunning)
        } else {
            None
        }
    }

    fn id(self) -> &'static str {
        match self {
            IdracBusy::JobRunning => "RAC0679",
            IdracBusy::ConfigPending => "LC068",
        }
    }

    fn fix(self) -> &'static str {
        match self {
            IdracBusy::JobRunning => "a Lifecycle Controller job is still running on the iDRAC: let it finish (iDRAC > Maintenance > Job Queue), then run bootstrap install again",
            IdracBusy::ConfigPending => "a configuration job waits for the server to restart (sushy-oem-idrac power-cycles the node here; bootstrap does not, so that the node is reset only once): delete the pending jobs (iDRAC > Maintenance > Job Queue, or racadm jobqueue delete -i JID_CLEARALL) or power-cycle the node, then run bootstrap install again",
        }
    }
}

/// A refusal the next way may get past (not authentication, not a server fault).
fn refused(e: &RedfishError) -> bool {
    matches!(e, RedfishError::Status { status, .. } if (400..500).contains(status) && *status != 401)
}

/// HPE iLO's refusal while the system is in POST (ironic `_is_during_post_error`).
fn during_post(e: &RedfishError) -> bool {
    match e {
        RedfishError::Status {
            status: 400,
            message,
            message_ids,
            ..
        } => {
            message_ids
                .iter()
                .any(|i| i.contains("UnableToModifyDuringSystemPOST"))
                || message
                    .as_deref()
                    .is_some_and(|m| m.contains("UnableToModifyDuringSystemPOST"))
        }
        _ => false,
    }
}
