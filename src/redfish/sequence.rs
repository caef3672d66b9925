//! The sequence that boots a node from an ISO over virtual media, as ironic does it, after
//! checking that the BMC answers for the node meant: the system and the MAC addresses its
//! EthernetInterfaces report are read ([`Client::identify`]) and compared with what the
//! inventory says ([`NodeIdentity::check`]) before anything changes; then the CD is inserted,
//! the next boot set on it once, the node powered off and seen Off, then on and seen On
//! ([`Client::boot_from_cd`]).
//! The caller is told each step, and told just before the reset is sent, so that it can record
//! the reset first: a node must never be reset twice unasked.

use std::fmt;

use super::error::RedfishError;
use super::vendor::Profile;
use super::{Client, ResetKind, SystemInfo};

/// Who a node is, as the inventory says: checked against its BMC before anything changes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeIdentity {
    /// Each NIC of the node: its name and MAC address (lower case).
    pub macs: Vec<(String, String)>,
    /// The system's UUID (`bmc.systemUUID`), when the inventory gives it.
    pub uuid: Option<String>,
}

/// The system a BMC answers for, and the MAC addresses it reports.
#[derive(Clone, Debug)]
pub struct Identified {
    /// The system.
    pub system: SystemInfo,
    /// Its EthernetInterfaces' MAC addresses, lower case, each once.
    pub macs: Vec<String>,
}

/// The system behind a BMC is not the node the inventory means; nothing was changed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IdentityMismatch {
    /// A MAC address of the node is not among those the BMC reports.
    #[error("the BMC reports MAC {reported} but the inventory gives {missing} for this node: wrong cable or wrong server? Nothing was changed on this node; fix nodes.yaml or the cabling")]
    Macs {
        /// What the BMC reports, comma separated (`none` when nothing).
        reported: String,
        /// The node's MACs it does not report, each with its NIC.
        missing: String,
    },
    /// The system's UUID is another.
    #[error("the BMC's system has UUID {got} but the inventory's bmc.systemUUID is {want}: another server answers at this BMC address. Nothing was changed on this node")]
    Uuid {
        /// The inventory's.
        want: String,
        /// The BMC's.
        got: String,
    },
    /// A UUID is expected and the system has none.
    #[error("the inventory gives bmc.systemUUID but the BMC reports no UUID for {path}: remove systemUUID or check the address")]
    NoUuid {
        /// The system's path.
        path: String,
    },
}

impl NodeIdentity {
    /// Whether `found` is this node: each of its MACs among those reported and, when the
    /// inventory gives one, the same UUID.
    pub fn check(&self, found: &Identified) -> Result<(), IdentityMismatch> {
        let missing: Vec<String> = self
            .macs
            .iter()
            .filter(|(_, mac)| !found.macs.iter().any(|r| r.eq_ignore_ascii_case(mac)))
            .map(|(nic, mac)| format!("{mac} ({nic})"))
            .collect();
        if !missing.is_empty() {
            return Err(IdentityMismatch::Macs {
                reported: match found.macs.is_empty() {
                    true => "none".to_string(),
                    false => found.macs.join(", "),
                },
                missing: missing.join(", "),
            });
        }
        match (&self.uuid, &found.system.uuid) {
            (Some(want), Some(got)) if !want.eq_ignore_ascii_case(got) => {
                Err(IdentityMismatch::Uuid {
                    want: want.clone(),
                    got: got.clone(),
                })
            }
            (Some(_), None) => Err(IdentityMismatch::NoUuid {
                path: found.system.path.clone(),
            }),
            _ => Ok(()),
        }
    }
}

/// A step of a boot, as the caller shows it (`media inserted`, `boot set`, `reset (On)`,
/// `powered on`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BootStep {
    /// The ISO is the virtual CD.
    MediaInserted,
    /// The next boot is from the CD, once.
    BootSet,
    /// A system that was on was powered off and read Off (the first half of its restart; the
    /// reset was recorded before).
    PoweredOff,
    /// The BMC accepted this reset.
    Reset(ResetKind),
    /// The system is on.
    PoweredOn,
}

impl fmt::Display for BootStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BootStep::MediaInserted => f.write_str("media inserted"),
            BootStep::BootSet => f.write_str("boot set"),
            BootStep::PoweredOff => f.write_str("powered off"),
            BootStep::Reset(kind) => write!(f, "reset ({kind})"),
            BootStep::PoweredOn => f.write_str("powered on"),
        }
    }
}

/// What the caller of [`Client::boot_from_cd`] does as the boot goes. An error it returns (in
/// its own words) stops the boot there.
pub trait BootSteps {
    /// The reset is about to be sent: the caller records it first, so that a run killed in
    /// between never resets the node again unasked. An error means the reset is not sent.
    fn resetting(&mut self) -> Result<(), String>;

    /// A step was reached.
    fn reached(&mut self, step: BootStep) -> Result<(), String>;
}

/// Why a boot stopped.
#[derive(Debug, thiserror::Error)]
pub enum BootError {
    /// The BMC refused or failed a call.
    #[error(transparent)]
    Redfish(#[from] RedfishError),
    /// The caller could not record a step, in its words (before the reset: nothing was reset).
    #[error("{0}")]
    Steps(String),
}

impl Client {
    /// The system the BMC answers for, and the MAC addresses its EthernetInterfaces report.
    pub async fn identify(&self) -> Result<Identified, RedfishError> {
        let system = self.system().await?;
        let macs = self.ethernet_macs(&system).await?;
        Ok(Identified { system, macs })
    }

    /// Boots `system` once from `iso_url` over virtual media, the way `profile` (from
    /// [`Client::profile`], chosen before anything changes) says, as ironic does: every virtual
    /// CD/DVD ejected ([`Client::eject_cds`]: even one that reads our URL, iDRAC keeps a stale
    /// `Inserted`) and the ISO inserted afresh, the next boot set on it once, `steps` told the
    /// reset is coming, then the restart made observable: a system that is on is powered off
    /// and read Off, then powered on and read On (ironic `redfish/power.py` `reboot`; a BMC that
    /// allows no `ForceOff` gets `ForceRestart`); each step told to `steps` when reached.
    /// Returns the system as read once it is on (`None` when that last read failed: the boot
    /// itself did not).
    pub async fn boot_from_cd(
        &self,
        system: &SystemInfo,
        iso_url: &str,
        profile: &Profile,
        steps: &mut impl BootSteps,
    ) -> Result<Option<SystemInfo>, BootError> {
        let cd = self.virtual_cd(system, profile).await?;
        for e in self.eject_cds(system).await? {
            if let Some(why) = &e.refused {
                tracing::warn!(bmc = %self.t.bmc, path = %e.path, "eject refused before the insertion ({why}); the insertion tells whether the device is free");
            }
        }
        self.insert_fresh(&cd, iso_url).await?;
        steps
            .reached(BootStep::MediaInserted)
            .map_err(BootError::Steps)?;
        self.set_boot_once_cd(system, profile).await?;
        steps.reached(BootStep::BootSet).map_err(BootError::Steps)?;
        steps.resetting().map_err(BootError::Steps)?;
        let now = self.refresh(system).await?;
        if now.power_state.as_deref() != Some("Off") && self.can_power_cycle(&now).await? {
            self.power_off(&now).await?;
            steps
                .reached(BootStep::PoweredOff)
                .map_err(BootError::Steps)?;
        }
        self.finish_boot(system, steps).await
    }

    /// The second half of a boot: `On` to a system that is off (else the restart the BMC
    /// allows), and power on awaited. Also what completes a boot a killed run left between its
    /// power-off and power-on (the reset already recorded, the system read Off).
    pub async fn finish_boot(
        &self,
        system: &SystemInfo,
        steps: &mut impl BootSteps,
    ) -> Result<Option<SystemInfo>, BootError> {
        let kind = self.reset_for_boot(system).await?;
        steps
            .reached(BootStep::Reset(kind))
            .map_err(BootError::Steps)?;
        self.wait_power_on(system).await?;
        let now = self.refresh(system).await.ok();
        steps
            .reached(BootStep::PoweredOn)
            .map_err(BootError::Steps)?;
        Ok(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(macs: &[&str], uuid: Option<&str>) -> Identified {
        let body = serde_json::json!({"Id": "1", "UUID": uuid});
        Identified {
            system: super::super::system_info("/redfish/v1/Systems/1", &body, None),
            macs: macs.iter().map(|m| m.to_string()).collect(),
        }
    }

    fn node(macs: &[(&str, &str)], uuid: Option<&str>) -> NodeIdentity {
        NodeIdentity {
            macs: macs
                .iter()
                .map(|(n, m)| (n.to_string(), m.to_string()))
                .collect(),
            uuid: uuid.map(str::to_string),
        }
    }

    /// The wrong cable, the wrong server, and a UUID the BMC does not report are each told
    /// apart, naming both sides; MACs and UUIDs compare without regard to case.
    #[test]
    fn the_node_is_checked_by_its_macs_and_uuid() {
        let n = node(&[("enp1s0", "aa:bb:cc:00:00:01")], Some("6C9E-01"));
        assert_eq!(
            n.check(&found(
                &["aa:bb:cc:00:00:01", "aa:bb:cc:00:00:99"],
                Some("6c9e-01")
            )),
            Ok(())
        );
        let wrong = n.check(&found(&["aa:bb:cc:00:00:02"], Some("6c9e-01")));
        assert_eq!(
            wrong,
            Err(IdentityMismatch::Macs {
                reported: "aa:bb:cc:00:00:02".to_string(),
                missing: "aa:bb:cc:00:00:01 (enp1s0)".to_string()
            })
        );
        assert!(wrong
            .unwrap_err()
            .to_string()
            .starts_with("the BMC reports MAC aa:bb:cc:00:00:02 but the inventory gives aa:bb:cc:00:00:01 (enp1s0)"));
        assert!(matches!(
            n.check(&found(&[], Some("6c9e-01"))),
            Err(IdentityMismatch::Macs { reported, .. }) if reported == "none"
        ));
        assert!(matches!(
            n.check(&found(&["aa:bb:cc:00:00:01"], Some("6c9e-02"))),
            Err(IdentityMismatch::Uuid { .. })
        ));
        assert!(matches!(
            n.check(&found(&["aa:bb:cc:00:00:01"], None)),
            Err(IdentityMismatch::NoUuid { .. })
        ));
        let no_uuid = node(&[("enp1s0", "aa:bb:cc:00:00:01")], None);
        assert_eq!(no_uuid.check(&found(&["AA:BB:CC:00:00:01"], None)), Ok(()));
    }
}
