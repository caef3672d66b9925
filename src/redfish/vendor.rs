//! Which vendor's BMC this is, and so which way a virtual-media boot goes: real BMCs are not
//! DMTF-clean, and a client that only follows the standard boots the wrong device on some of
//! them while every call succeeds. The [`Profile`] is chosen up front from the System's and its
//! Manager's `Manufacturer`, `Model` and `FirmwareVersion` ([`Client::vendor`], which changes
//! nothing), or forced by the inventory's `bmc.vendor`, and then decides the path:
//!
//! - Dell iDRAC: the one-time virtual-CD boot through the OEM `ImportSystemConfiguration`
//!   (sushy-oem-idrac `resources/manager/manager.py` `set_virtual_boot_device`), never the
//!   standard `Boot` PATCH, which iDRAC accepts and then boots its local physical CD (ironic
//!   `drivers/modules/drac/boot.py`); on a generation ironic counts as iDRAC 10 (Manager `Model`
//!   starting with a number above 16, `_get_idrac_version_from_model`) only virtual media
//!   member `1` is used (`_get_acceptable_media_id`).
//! - SuperMicro: the boot target is `UsbCd` when the BMC offers it, except on the models sushy
//!   lists (`resources/system/system.py`, `_supermicro_models_cd_vmedia`).
//! - AMI and ASRockRack: mode, enabled and target in one PATCH (ironic
//!   `drivers/modules/redfish/management.py`, `VENDORS_REQUIRING_FULL_BOOT_REQUEST`).
//! - HPE, NVIDIA and others: the standard path; the retries they need (a PATCH during POST,
//!   InsertMedia wanting `UserName`/`Password`) are, as upstream has them, keyed on the BMC's
//!   answer rather than on the vendor, so they apply to every profile.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::RedfishError;
use super::session::odata_id;
use super::{string, Client, SystemInfo};

/// A BMC vendor whose behaviour the client knows, as the inventory's `bmc.vendor` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Vendor {
    /// DMTF Redfish as written (the sushy-tools emulator, BMCs without a known quirk).
    Generic,
    /// Dell iDRAC.
    Dell,
    /// SuperMicro.
    Supermicro,
    /// AMI MegaRAC, ASRockRack.
    Ami,
    /// HPE iLO.
    Hpe,
    /// NVIDIA DGX.
    Nvidia,
}

impl Vendor {
    /// The inventory's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Vendor::Generic => "generic",
            Vendor::Dell => "dell",
            Vendor::Supermicro => "supermicro",
            Vendor::Ami => "ami",
            Vendor::Hpe => "hpe",
            Vendor::Nvidia => "nvidia",
        }
    }

    /// The vendor a System's (else its Manager's) `Manufacturer` names; [`Vendor::Generic`]
    /// for any other. AMI is matched as ironic matches it ("american megatrends
    /// international", "ami", "asrockrack"), but as a word, not inside another one.
    pub fn from_manufacturer(manufacturer: &str) -> Vendor {
        let m = manufacturer.trim().to_ascii_lowercase();
        let words: Vec<&str> = m
            .split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|w| !w.is_empty())
            .collect();
        let word = |w: &str| words.contains(&w);
        if word("dell") {
            Vendor::Dell
        } else if word("supermicro") || m.starts_with("super micro") {
            Vendor::Supermicro
        } else if word("ami") || m.contains("american megatrends") || m.contains("asrock") {
            Vendor::Ami
        } else if word("hpe") || m.contains("hewlett packard enterprise") {
            Vendor::Hpe
        } else if word("nvidia") {
            Vendor::Nvidia
        } else {
            Vendor::Generic
        }
    }
}

impl fmt::Display for Vendor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a BMC says it is: read by [`Client::vendor`] without changing anything.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BmcInfo {
    /// The System's `Manufacturer` (else the Manager's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub manufacturer: Option<String>,
    /// The System's `Model`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The System's `BiosVersion`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bios: Option<String>,
    /// The Manager's `Model` (iDRAC: `17G Monolithic`, whose number is the generation).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub manager_model: Option<String>,
    /// The Manager's `FirmwareVersion` (the BMC's firmware).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub firmware: Option<String>,
}

/// Where a profile's vendor came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ProfileSource {
    /// The BMC's `Manufacturer`.
    Detected,
    /// The inventory's `bmc.vendor`.
    Inventory,
}

/// How the one-time boot from the virtual CD is set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum BootPath {
    /// `PATCH Boot` (or its `@Redfish.Settings` object) with the profile's target, `Once`.
    Standard,
    /// Dell's OEM `ImportSystemConfiguration` (`ServerBoot.1#BootOnce`, `FirstBootDevice
    /// VCD-DVD`); the standard PATCH is never sent.
    DellOem,
}

/// The vendor behaviour a boot follows: chosen once per node, before anything changes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Profile {
    /// The vendor.
    pub vendor: Vendor,
    /// The profile's name as records show it (`dell-idrac10`, `supermicro`, `generic`...).
    pub name: String,
    /// Detected or forced by the inventory.
    pub source: ProfileSource,
    /// How the boot override is set.
    pub boot_path: BootPath,
    /// The `BootSourceOverrideTarget` for the virtual CD (`Cd`, or `UsbCd` on SuperMicro).
    pub boot_target: String,
    /// Send `BootSourceOverrideMode` with target and enabled (AMI, ASRockRack).
    pub full_boot_request: bool,
    /// The only virtual media member (`Id`) that boots (`1` on iDRAC 10).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub media_member: Option<String>,
    /// What the BMC said it is.
    pub bmc: BmcInfo,
}

/// SuperMicro models whose virtual media boot as `Cd`, not `UsbCd` (sushy
/// `_supermicro_models_cd_vmedia`).
const SUPERMICRO_CD_MODELS: &[&str] = &["ars-111gl-nhr"];

impl Profile {
    /// What to do about a node this profile booted that showed no sign of the ISO (it started
    /// from another device): first a `bmc.vendor` that contradicts the BMC's `Manufacturer`,
    /// else what this vendor's BMC is known to do instead (the upstream behaviour each profile
    /// follows, docs/redfish.md).
    pub fn wrong_boot_fix(&self) -> String {
        let detected = Vendor::from_manufacturer(self.bmc.manufacturer.as_deref().unwrap_or(""));
        if self.source == ProfileSource::Inventory && detected != self.vendor {
            return format!(
                "nodes.yaml gives bmc.vendor {} but the BMC reports Manufacturer {:?}: remove bmc.vendor (or set it to {detected}) so the boot takes that vendor's path",
                self.vendor,
                self.bmc.manufacturer.as_deref().unwrap_or("(none)")
            );
        }
        match (self.vendor, self.boot_path) {
            (Vendor::Dell, BootPath::DellOem) => "the iDRAC took the one-time virtual CD boot (ImportSystemConfiguration) but the server did not start from it: check the import job in the iDRAC's Job Queue and Lifecycle log, that virtual media stays attached (iDRAC Settings > Virtual Media), and that the BIOS boots UEFI".to_string(),
            (Vendor::Dell, _) => "an iDRAC told Cd by the standard Boot PATCH boots the server's physical CD drive (ironic drac/boot.py): let bootstrap detect the iDRAC (remove bmc.vendor) so it boots through the OEM ImportSystemConfiguration".to_string(),
            (Vendor::Supermicro, _) => format!(
                "the SuperMicro BMC was told {} for its virtual media (sushy system.py: UsbCd, Cd on the models it lists): check in the BMC's UI which device the virtual media is on this model, and set bmc.vendor to generic if it boots as Cd",
                self.boot_target
            ),
            (Vendor::Ami, _) => "AMI/ASRockRack applies a one-time boot only with mode, enabled and target in one request (sent): check the BIOS boot mode (UEFI) and the virtual media's attach state in the BMC's UI".to_string(),
            _ => "the server did not start from the virtual CD: watch its console through the BMC; check the BIOS boot mode (UEFI), that Secure Boot accepts the ISO, and, if the BMC is a Dell, SuperMicro, AMI, HPE or NVIDIA one read as another, set bmc.vendor".to_string(),
        }
    }

    /// The DMTF path: `Boot` PATCH to `Cd`/`Once`, any CD member.
    pub fn generic() -> Profile {
        Profile::for_vendor(
            Vendor::Generic,
            ProfileSource::Detected,
            BmcInfo::default(),
            None,
        )
    }

    /// The profile for what the BMC says (`info`), the inventory's `bmc.vendor` overriding the
    /// vendor its `Manufacturer` names. `boot_allowed` is the system's
    /// `BootSourceOverrideTarget@Redfish.AllowableValues`, when advertised.
    pub fn choose(
        info: BmcInfo,
        forced: Option<Vendor>,
        boot_allowed: Option<&[String]>,
    ) -> Profile {
        let (vendor, source) = match forced {
            Some(v) => (v, ProfileSource::Inventory),
            None => (
                Vendor::from_manufacturer(info.manufacturer.as_deref().unwrap_or("")),
                ProfileSource::Detected,
            ),
        };
        Profile::for_vendor(vendor, source, info, boot_allowed)
    }

    fn for_vendor(
        vendor: Vendor,
        source: ProfileSource,
        bmc: BmcInfo,
        boot_allowed: Option<&[String]>,
    ) -> Profile {
        let mut p = Profile {
            vendor,
            name: vendor.as_str().to_string(),
            source,
            boot_path: BootPath::Standard,
            boot_target: "Cd".to_string(),
            full_boot_request: false,
            media_member: None,
            bmc,
        };
        match vendor {
            Vendor::Dell => {
                p.boot_path = BootPath::DellOem;
                let idrac = idrac_version(p.bmc.manager_model.as_deref());
                if idrac == Some(10) {
                    p.media_member = Some("1".to_string());
                }
                p.name = match idrac {
                    Some(n) => format!("dell-idrac{n}"),
                    None => "dell-idrac".to_string(),
                };
            }
            Vendor::Supermicro => {
                let model = p.bmc.model.as_deref().unwrap_or("").to_ascii_lowercase();
                let usb_cd_offered = boot_allowed.is_some_and(|a| a.iter().any(|v| v == "UsbCd"));
                if !SUPERMICRO_CD_MODELS.contains(&model.as_str()) && usb_cd_offered {
                    p.boot_target = "UsbCd".to_string();
                } else {
                    p.name = "supermicro-cd".to_string();
                }
            }
            Vendor::Ami => p.full_boot_request = true,
            Vendor::Hpe => p.name = "hpe-ilo".to_string(),
            Vendor::Nvidia => p.name = "nvidia-dgx".to_string(),
            Vendor::Generic => {}
        }
        p
    }

    /// One line for records and status: `dell-idrac10 (Dell Inc. PowerEdge R770, iDRAC
    /// firmware 1.20.25.00; detected)`.
    pub fn summary(&self) -> String {
        let b = &self.bmc;
        let mut what: Vec<String> = Vec::new();
        let maker_model = [b.manufacturer.as_deref(), b.model.as_deref()]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" ");
        if !maker_model.is_empty() {
            what.push(maker_model);
        }
        if let Some(m) = &b.manager_model {
            what.push(format!("manager {m}"));
        }
        if let Some(f) = &b.firmware {
            what.push(format!("firmware {f}"));
        }
        what.push(match self.source {
            ProfileSource::Detected => "detected".to_string(),
            ProfileSource::Inventory => format!("bmc.vendor: {}", self.vendor),
        });
        format!("{} ({})", self.name, what.join(", "))
    }
}

/// iDRAC's version from its Manager's `Model`, as ironic reads it: the leading number is the
/// server generation (17 and later: iDRAC 10; 14-16: 9; 12-13: 8).
pub fn idrac_version(manager_model: Option<&str>) -> Option<u32> {
    let model = manager_model?.trim();
    let generation: u32 = model.get(..2)?.parse().ok()?;
    match generation {
        g if g > 16 => Some(10),
        14..=16 => Some(9),
        12 | 13 => Some(8),
        _ => None,
    }
}

impl Client {
    /// What the BMC says it is: the System's `Manufacturer`, `Model` and `BiosVersion`, and
    /// its first Manager's `Model` and `FirmwareVersion` (GETs only; nothing changes). A
    /// Manager that cannot be read leaves its fields empty.
    pub async fn vendor(&self, sys: &SystemInfo) -> Result<BmcInfo, RedfishError> {
        let (body, _) = self.t.get(&sys.path).await?;
        let mut info = BmcInfo {
            manufacturer: string(&body, "/Manufacturer").filter(|s| !s.trim().is_empty()),
            model: string(&body, "/Model").filter(|s| !s.trim().is_empty()),
            bios: string(&body, "/BiosVersion"),
            ..BmcInfo::default()
        };
        let manager = body
            .pointer("/Links/ManagedBy")
            .and_then(Value::as_array)
            .and_then(|m| m.first())
            .and_then(|m| odata_id(Some(m)));
        if let Some(path) = manager {
            match self.t.get(&path).await {
                Ok((m, _)) => {
                    info.manager_model = string(&m, "/Model");
                    info.firmware = string(&m, "/FirmwareVersion");
                    if info.manufacturer.is_none() {
                        info.manufacturer = string(&m, "/Manufacturer");
                    }
                }
                Err(RedfishError::Status { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(info)
    }

    /// [`Client::vendor`], then [`Profile::choose`] with the inventory's `bmc.vendor`.
    pub async fn profile(
        &self,
        sys: &SystemInfo,
        forced: Option<Vendor>,
    ) -> Result<Profile, RedfishError> {
        let info = self.vendor(sys).await?;
        Ok(Profile::choose(
            info,
            forced,
            sys.links.boot_allowed.as_deref(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(manufacturer: &str, model: &str, manager_model: Option<&str>) -> BmcInfo {
        BmcInfo {
            manufacturer: Some(manufacturer.to_string()),
            model: Some(model.to_string()),
            manager_model: manager_model.map(str::to_string),
            ..BmcInfo::default()
        }
    }

    #[test]
    fn manufacturers_name_their_vendor() {
        for (m, v) in [
            ("Dell Inc.", Vendor::Dell),
            ("Supermicro", Vendor::Supermicro),
            ("American Megatrends International LLC", Vendor::Ami),
            ("AMI", Vendor::Ami),
            ("ASRockRack", Vendor::Ami),
            ("HPE", Vendor::Hpe),
            ("Hewlett Packard Enterprise", Vendor::Hpe),
            ("NVIDIA", Vendor::Nvidia),
            ("Sushy Emulator", Vendor::Generic),
            ("Dynamic Amigos", Vendor::Generic),
        ] {
            assert_eq!(Vendor::from_manufacturer(m), v, "{m}");
        }
    }

    /// A node that booted something else gets its profile's fix: a `bmc.vendor` that
    /// contradicts the BMC's Manufacturer first (the inventory's mistake), else what that
    /// vendor's BMC is known to boot instead.
    #[test]
    fn a_wrong_boot_names_the_fix_of_its_profile() {
        let dell = || info("Dell Inc.", "PowerEdge R760xa", Some("16G Monolithic"));
        let forced = Profile::choose(dell(), Some(Vendor::Generic), None).wrong_boot_fix();
        assert!(
            forced.starts_with("nodes.yaml gives bmc.vendor generic but the BMC reports Manufacturer \"Dell Inc.\"")
                && forced.contains("set it to dell"),
            "{forced}"
        );
        let detected = Profile::choose(dell(), None, None).wrong_boot_fix();
        assert!(detected.contains("Job Queue"), "{detected}");
        let smc = Profile::choose(
            info("Supermicro", "SYS-420GP-TNR", None),
            None,
            Some(&["Cd".to_string(), "UsbCd".to_string()]),
        )
        .wrong_boot_fix();
        assert!(smc.contains("was told UsbCd"), "{smc}");
        let generic = Profile::generic().wrong_boot_fix();
        assert!(generic.contains("set bmc.vendor"), "{generic}");
    }

    /// ironic's reading of the Manager model: 17G and later is iDRAC 10, which boots only
    /// virtual media member 1; the inventory's vendor wins over the manufacturer.
    #[test]
    fn dell_generations_and_overrides_choose_the_profile() {
        let p = Profile::choose(
            info("Dell Inc.", "PowerEdge R770", Some("17G Monolithic")),
            None,
            None,
        );
        assert_eq!(
            (p.name.as_str(), p.boot_path, p.media_member.as_deref()),
            ("dell-idrac10", BootPath::DellOem, Some("1"))
        );
        let p = Profile::choose(
            info("Dell Inc.", "PowerEdge R650", Some("14G Monolithic")),
            None,
            None,
        );
        assert_eq!((p.name.as_str(), p.media_member), ("dell-idrac9", None));
        let p = Profile::choose(info("Dell Inc.", "R650", None), Some(Vendor::Generic), None);
        assert_eq!(
            (p.boot_path, p.source),
            (BootPath::Standard, ProfileSource::Inventory)
        );
        assert!(
            p.summary().contains("bmc.vendor: generic"),
            "{}",
            p.summary()
        );
    }

    /// sushy: UsbCd on SuperMicro when offered, except the ARS-111GL-NHR, which boots Cd.
    #[test]
    fn supermicro_boots_usb_cd_except_its_cd_models() {
        let allowed = ["Cd".to_string(), "UsbCd".to_string()];
        let p = Profile::choose(info("Supermicro", "X12DPG-QT6", None), None, Some(&allowed));
        assert_eq!(p.boot_target, "UsbCd");
        let p = Profile::choose(
            info("Supermicro", "ARS-111GL-NHR", None),
            None,
            Some(&allowed),
        );
        assert_eq!(
            (p.boot_target.as_str(), p.name.as_str()),
            ("Cd", "supermicro-cd")
        );
        let p = Profile::choose(info("Supermicro", "X11", None), None, Some(&allowed[..1]));
        assert_eq!(p.boot_target, "Cd");
    }
}
