//! The one-time boot override to the virtual CD: `PATCH {"Boot": {"BootSourceOverrideTarget":
//! "Cd", "BootSourceOverrideEnabled": "Once"}}` on the system (If-Match with its ETag), or on its
//! `@Redfish.Settings` object when that holds the boot properties or the system refuses the
//! PATCH (iDRAC10), or Dell's OEM `ImportSystemConfiguration` (`ServerBoot.1#BootOnce`,
//! `FirstBootDevice VCD-DVD`, as sushy-oem-idrac does) when the standard way is refused.

use serde_json::{json, Value};

use super::error::RedfishError;
use super::http::Retry;
use super::{Client, SystemInfo};

const TARGET: &str = "Cd";
const ENABLED: &str = "Once";

fn is_cd_once(boot: Option<&Value>) -> bool {
    let Some(boot) = boot else { return false };
    boot.get("BootSourceOverrideTarget").and_then(Value::as_str) == Some(TARGET)
        && boot
            .get("BootSourceOverrideEnabled")
            .and_then(Value::as_str)
            == Some(ENABLED)
}

/// The read-back test: the target is Cd and the override is active. `Once` is what was asked;
/// `Continuous` is accepted too, because some implementations (the sushy-tools emulator, whose
/// libvirt driver keeps every override continuous) ignore `BootSourceOverrideEnabled`.
fn reads_back_cd(boot: Option<&Value>, bmc: &str, path: &str) -> bool {
    let Some(boot) = boot else { return false };
    let target = boot.get("BootSourceOverrideTarget").and_then(Value::as_str);
    let enabled = boot
        .get("BootSourceOverrideEnabled")
        .and_then(Value::as_str);
    match (target, enabled) {
        (Some(TARGET), Some(ENABLED)) => true,
        (Some(TARGET), Some("Continuous")) => {
            tracing::warn!(
                bmc,
                path,
                "the boot override reads back Cd but Continuous, not Once"
            );
            true
        }
        _ => false,
    }
}

impl Client {
    /// Sets the next boot, once, to the virtual CD, and reads it back (see the module doc for
    /// the ways tried, in order).
    pub async fn set_boot_once_cd(&self, sys: &SystemInfo) -> Result<(), RedfishError> {
        let (body, etag) = self.t.get(&sys.path).await?;
        let sys = super::system_info(&sys.path, &body, etag);
        if is_cd_once(body.get("Boot")) {
            return Ok(());
        }
        let patch = json!({"Boot": {"BootSourceOverrideTarget": TARGET, "BootSourceOverrideEnabled": ENABLED}});
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
        let cd_allowed = sys
            .links
            .boot_allowed
            .as_ref()
            .is_none_or(|a| a.iter().any(|v| v == TARGET));
        let mut refusal = None;
        if cd_allowed && !settings_has_boot {
            match self
                .t
                .patch(&sys.path, &patch, sys.links.etag.as_deref())
                .await
            {
                Ok(_) => return self.read_back_boot(&sys.path).await,
                Err(e) if refused(&e) => refusal = Some(e),
                Err(e) => return Err(e),
            }
        }
        if let Some((path, (_, etag))) = &settings {
            match self.t.patch(path, &patch, etag.as_deref()).await {
                Ok(_) => return self.read_back_settings(&sys.path, path).await,
                // The system's own refusal, if it gave one, is the one to show.
                Err(e) if refused(&e) => refusal = refusal.or(Some(e)),
                Err(e) => return Err(e),
            }
        }
        if let Some((manager, target)) = self.dell_import_action(&sys).await? {
            tracing::info!(bmc = %self.t.bmc, path = %target, "standard boot override refused; using Dell's OEM ImportSystemConfiguration");
            return self.dell_boot_once_cd(&sys, &manager, &target).await;
        }
        Err(refusal.unwrap_or_else(|| RedfishError::NotAllowed {
            bmc: self.t.bmc.clone(),
            path: format!("{}: Boot.BootSourceOverrideTarget", sys.path),
            wanted: vec![TARGET.to_string()],
            allowed: sys.links.boot_allowed.clone().unwrap_or_default(),
        }))
    }

    async fn read_back_boot(&self, path: &str) -> Result<(), RedfishError> {
        let (body, _) = self.t.get(path).await?;
        if reads_back_cd(body.get("Boot"), &self.t.bmc, path) {
            return Ok(());
        }
        Err(self.boot_read_back_error(path, &body))
    }

    /// A Settings object holds the pending values until the next reset; either it or the
    /// system must show them.
    async fn read_back_settings(&self, system: &str, settings: &str) -> Result<(), RedfishError> {
        let (pending, _) = self.t.get(settings).await?;
        if reads_back_cd(pending.get("Boot"), &self.t.bmc, settings) {
            return Ok(());
        }
        let (body, _) = self.t.get(system).await?;
        if reads_back_cd(body.get("Boot"), &self.t.bmc, system) {
            return Ok(());
        }
        Err(self.boot_read_back_error(settings, &pending))
    }

    fn boot_read_back_error(&self, path: &str, body: &Value) -> RedfishError {
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
                "BootSourceOverrideTarget {TARGET}, BootSourceOverrideEnabled {ENABLED}"
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

    /// Dell's way: a Server Configuration Profile fragment setting the iDRAC's one-time boot to
    /// the virtual CD, imported as a job (202 + task monitor) whose completion is the proof;
    /// the system's Boot is read back and logged.
    async fn dell_boot_once_cd(
        &self,
        sys: &SystemInfo,
        manager_id: &str,
        target: &str,
    ) -> Result<(), RedfishError> {
        // iDRAC fails the job on insignificant whitespace in this XML (sushy-oem-idrac).
        let buffer = format!(
            "<SystemConfiguration><Component FQDD=\"{manager_id}\">\
             <Attribute Name=\"ServerBoot.1#BootOnce\">Enabled</Attribute>\
             <Attribute Name=\"ServerBoot.1#FirstBootDevice\">VCD-DVD</Attribute>\
             </Component></SystemConfiguration>"
        );
        let body = json!({"ShareParameters": {"Target": "ALL"}, "ImportBuffer": buffer});
        self.t.action(target, &body, Retry::Transient).await?;
        let (now, _) = self.t.get(&sys.path).await?;
        if !is_cd_once(now.get("Boot")) {
            tracing::info!(bmc = %self.t.bmc, path = %sys.path, boot = ?now.get("Boot"), "Dell OEM import completed; the system's Boot does not show Cd/Once yet");
        }
        Ok(())
    }
}

/// A refusal the next way may get past (not authentication, not a server fault).
fn refused(e: &RedfishError) -> bool {
    matches!(e, RedfishError::Status { status, .. } if (400..500).contains(status) && *status != 401)
}
