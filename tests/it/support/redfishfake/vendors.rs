//! The fake's vendors: who it says it is (System and Manager `Manufacturer`, `Model`,
//! `FirmwareVersion`), the refusals of each, and, what the sushy-tools emulator cannot show,
//! what the server then *boots*. Each behaviour is read from the upstream code that works around
//! it, named beside it; a client that takes the wrong path gets `booted` other than `iso` while
//! every call succeeded, which is how a test catches a boot that "worked" on the wrong device.

use super::*;

/// Whose BMC the fake is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FakeVendor {
    /// DMTF as written: `Cd` boots the virtual CD; no OEM actions.
    Generic,
    /// iDRAC 9 (`14G Monolithic`). The standard `Boot` PATCH to `Cd` is accepted and read back,
    /// and the server boots its local physical CD (ironic `drivers/modules/drac/boot.py`:
    /// "Dell BMC sets boot device to local physical CD/floppy"); only the OEM import's
    /// `FirstBootDevice VCD-DVD` boots the virtual media (sushy-oem-idrac `manager.py`).
    Dell,
    /// iDRAC 10 (`17G Monolithic`): as [`FakeVendor::Dell`], and of its two virtual media
    /// members, which both list CD, only `1` boots (ironic `drac/boot.py`
    /// `_get_acceptable_media_id`); `2` takes an image and never boots it.
    Idrac10,
    /// SuperMicro X12: InsertMedia with `Inserted` or `WriteProtected` is refused (sushy
    /// `virtual_media.py`), and the virtual media boot as `UsbCd`; `Cd` boots the disk (sushy
    /// `system.py`: "boot fails even if vMedia is inserted").
    Supermicro,
    /// SuperMicro ARS-111GL-NHR: the model sushy exempts, whose virtual media boot as `Cd`.
    SupermicroArs,
    /// AMI MegaRAC (ASRockRack): a boot PATCH without `BootSourceOverrideMode` is accepted and
    /// read back but not applied at the reset (ironic `redfish/management.py`
    /// `VENDORS_REQUIRING_FULL_BOOT_REQUEST`), so the disk boots.
    Ami,
    /// HPE iLO 6: the first `post_refusals` boot PATCHes answer 400
    /// `UnableToModifyDuringSystemPOST` (ironic `redfish/management.py`), with only a
    /// `MessageId` in `@Message.ExtendedInfo`, as iLO writes it.
    Hpe {
        /// How many boot PATCHes are refused.
        post_refusals: u32,
    },
    /// NVIDIA DGX: InsertMedia without `UserName`/`Password` is refused with
    /// ActionParameterMissing (sushy `virtual_media.py`, bug 2071945).
    Nvidia,
}

impl FakeVendor {
    pub(super) fn manufacturer(self) -> &'static str {
        match self {
            FakeVendor::Generic => "Contoso",
            FakeVendor::Dell | FakeVendor::Idrac10 => "Dell Inc.",
            FakeVendor::Supermicro | FakeVendor::SupermicroArs => "Supermicro",
            FakeVendor::Ami => "AMI",
            FakeVendor::Hpe { .. } => "HPE",
            FakeVendor::Nvidia => "NVIDIA",
        }
    }

    pub(super) fn model(self) -> &'static str {
        match self {
            FakeVendor::Generic => "Generic Server",
            FakeVendor::Dell => "PowerEdge XE9680",
            FakeVendor::Idrac10 => "PowerEdge R770",
            FakeVendor::Supermicro => "X12DPG-QT6",
            FakeVendor::SupermicroArs => "ARS-111GL-NHR",
            FakeVendor::Ami => "ALTRAD8UD-1L2T",
            FakeVendor::Hpe { .. } => "ProLiant DL380 Gen11",
            FakeVendor::Nvidia => "DGXH100",
        }
    }

    pub(super) fn manager_model(self) -> &'static str {
        match self {
            FakeVendor::Dell => "14G Monolithic",
            FakeVendor::Idrac10 => "17G Monolithic",
            FakeVendor::Hpe { .. } => "iLO 6",
            _ => "BMC",
        }
    }

    pub(super) fn firmware(self) -> &'static str {
        match self {
            FakeVendor::Dell => "7.10.30.00",
            FakeVendor::Idrac10 => "1.20.25.00",
            FakeVendor::Hpe { .. } => "1.62",
            _ => "1.00",
        }
    }

    /// An iDRAC: the OEM import is offered.
    pub(super) fn dell(self) -> bool {
        matches!(self, FakeVendor::Dell | FakeVendor::Idrac10)
    }

    pub(super) fn boot_targets(self) -> Vec<&'static str> {
        let mut t = vec![
            "None",
            "Pxe",
            "Floppy",
            "Cd",
            "Hdd",
            "BiosSetup",
            "UefiTarget",
        ];
        if matches!(self, FakeVendor::Supermicro | FakeVendor::SupermicroArs) {
            t.push("UsbCd");
        }
        t
    }

    fn post_refusals(self) -> u32 {
        match self {
            FakeVendor::Hpe { post_refusals } => post_refusals,
            _ => 0,
        }
    }
}

impl State {
    pub(super) fn vendor(&self) -> FakeVendor {
        self.sw.vendor
    }

    /// The vendor's refusal of a boot PATCH, if it has one now.
    pub(super) fn refuse_boot_patch(&mut self) -> Option<Reply> {
        let refused = self.patches_seen < self.vendor().post_refusals();
        self.patches_seen += 1;
        refused.then(|| {
            reply(
                400,
                json!({"error": {"code": "iLO.0.10.ExtendedInfo",
                "message": "See @Message.ExtendedInfo for more information.",
                "@Message.ExtendedInfo": [{"MessageId": "iLO.2.15.UnableToModifyDuringSystemPOST"}]}}),
            )
        })
    }

    /// The vendor's refusal of an InsertMedia body, if it has one.
    pub(super) fn refuse_insert(&self, body: &Value) -> Option<Reply> {
        match self.vendor() {
            FakeVendor::Supermicro | FakeVendor::SupermicroArs
                if body.get("Inserted").is_some() || body.get("WriteProtected").is_some() =>
            {
                Some(error(400, "Base.1.10.PropertyUnknown", "The property Inserted is not in the list of valid properties for the resource.", &["#/Inserted"]))
            }
            FakeVendor::Nvidia if body.get("UserName").is_none() => Some(error(
                400,
                "Base.1.15.ActionParameterMissing",
                "The action VirtualMedia.InsertMedia requires the parameter UserName to be present in the request body.",
                &["#/UserName"],
            )),
            _ => None,
        }
    }

    /// What the server starts from at a reset that starts it, as this vendor decides.
    pub(super) fn boots(&mut self) -> String {
        let oem = std::mem::take(&mut self.oem_virtual_cd);
        let media = self.inserted && self.image.is_some();
        let iso = |ok: bool| if ok { "iso" } else { "disk" }.to_string();
        let (target, enabled) = self.boot.clone();
        let overridden = enabled == "Once" || enabled == "Continuous";
        let vendor = self.vendor();
        if vendor.dell() {
            // Only the OEM one-time boot reaches the virtual media; the standard override to
            // Cd reaches the server's own drive.
            return match (oem, overridden && target == "Cd") {
                (true, _) => iso(media),
                (false, true) => "physical-cd".to_string(),
                (false, false) => "disk".to_string(),
            };
        }
        if !overridden {
            return "disk".to_string();
        }
        match vendor {
            FakeVendor::Supermicro => iso(media && target == "UsbCd"),
            FakeVendor::SupermicroArs => iso(media && target == "Cd"),
            FakeVendor::Ami => iso(media && target == "Cd" && self.boot_mode_sent),
            _ => iso(media && target == "Cd"),
        }
    }

    /// iDRAC 10's second member: listed with CD, accepts an image, never boots it.
    pub(super) fn second_cd(&self) -> bool {
        self.vendor() == FakeVendor::Idrac10
    }
}
