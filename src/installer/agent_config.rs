//! agent-config.yaml as `openshift-install agent create image` reads it, one type for reading
//! (`bootstrap validate`) and for writing (`bootstrap render`): openshift/installer
//! `pkg/types/agent/agent_config_type.go`, root device hints from
//! `pkg/types/baremetal/rootdevice.go`, the host's BMC from `pkg/types/baremetal/platform.go`.
//!
//! A host's `networkConfig` is NMState: read as written (a generic value, which the installer
//! passes through to nmstate and `nmstate.rs` walks for the rules), written from the typed
//! [`super::nmstate::NetworkConfig`]; hence the type parameter. `apiVersion: v1alpha1` is read
//! with a warning, as the installer up-converts it (`pkg/types/conversion/agentconfig.go`).

use super::install_config::{Bmc, Metadata};
use super::{Loaded, MAX_FILE_BYTES};
use crate::yaml::{self, Positions, Problem, Schema, Severity};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The apiVersion agent-config.yaml carries.
pub const API_VERSION: &str = "v1beta1";
/// The kind agent-config.yaml carries.
pub const KIND: &str = "AgentConfig";

/// agent-config.yaml; `N` is a host's NMState (a generic value when read).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AgentConfig<N = Value> {
    /// `v1beta1` (`v1alpha1` is read with a warning).
    pub api_version: String,
    /// Always `AgentConfig`.
    pub kind: String,
    /// The name (the cluster's, by convention) and namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// The address of the host that runs the installation service (node0).
    #[serde(
        default,
        rename = "rendezvousIP",
        skip_serializing_if = "Option::is_none"
    )]
    pub rendezvous_ip: Option<String>,
    /// NTP servers (names or addresses) added on every host.
    #[serde(
        default,
        rename = "additionalNTPSources",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub additional_ntp_sources: Vec<String>,
    /// Per-host settings.
    #[serde(default = "Vec::new", skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<Host<N>>,
    /// Where PXE and minimal-ISO boot artifacts are served from.
    #[serde(
        default,
        rename = "bootArtifactsBaseURL",
        skip_serializing_if = "Option::is_none"
    )]
    pub boot_artifacts_base_url: Option<String>,
    /// A minimal ISO (rootfs fetched at boot) rather than a full one.
    #[serde(
        default,
        rename = "minimalISO",
        skip_serializing_if = "Option::is_none"
    )]
    pub minimal_iso: Option<bool>,
}

/// `hosts[]`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Host<N = Value> {
    /// The host's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// master, worker or arbiter; unset lets the installer choose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The host's NICs: how the agent recognises the host.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<Interface>,
    /// Which disk to install to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_device_hints: Option<RootDeviceHints>,
    /// NMState network configuration.
    #[serde(default = "Option::default", skip_serializing_if = "Option::is_none")]
    pub network_config: Option<N>,
    /// The host's BMC. The Go field has no json tag, so the installer's key is `BMC`; Go
    /// matches keys ignoring case, so `bmc` is read too.
    #[serde(
        default,
        rename = "BMC",
        alias = "bmc",
        skip_serializing_if = "Option::is_none"
    )]
    pub bmc: Option<Bmc>,
}

/// `hosts[].interfaces[]`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Interface {
    /// The NIC's name as NMState refers to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The NIC's MAC address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac_address: Option<String>,
}

/// Root device hints (`hosts[].rootDeviceHints` here and in install-config's baremetal hosts):
/// the one type the inventory's `rootDevice` converts to and render writes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RootDeviceHints {
    /// `/dev/sda` or `/dev/disk/by-path/...`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    /// SCSI address, e.g. 0:0:0:0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hctl: Option<String>,
    /// Substring of the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Substring of the vendor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor: Option<String>,
    /// Exact serial number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial_number: Option<String>,
    /// Smallest size in GB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_size_gigabytes: Option<i64>,
    /// World Wide Name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wwn: Option<String>,
    /// Parsed so the rule can say why the agent installer refuses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wwn_with_extension: Option<String>,
    /// Parsed so the rule can say why the agent installer refuses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wwn_vendor_extension: Option<String>,
    /// Spinning disk or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotational: Option<bool>,
}

/// Reads agent-config.yaml with positions: the header, the strict schema. A YAML error, a
/// wrong header or a key the schema does not know is the one problem returned.
pub fn parse(text: &str) -> Result<Loaded<AgentConfig>, Problem> {
    yaml::parse(text, Positions::Index)
}

/// What agent-config.yaml must be.
static SCHEMA: Schema = Schema {
    document: "an AgentConfig",
    name: KIND,
    api_version: API_VERSION,
    other_versions: &[(
        "v1alpha1",
        Severity::Warning,
        "v1alpha1 is the older AgentConfig version; the installer reads it as v1beta1 (same fields), so write `apiVersion: v1beta1`",
    )],
    kind: KIND,
    kind_required: true,
    other_kinds: &[],
    hint,
    unknown_note: None,
    keys_ignore_case: Some(yaml::IgnoreCase::everywhere("the installer")),
    max_bytes: MAX_FILE_BYTES,
};

impl yaml::Document for AgentConfig {
    const SCHEMA: &'static Schema = &SCHEMA;

    fn header(&self) -> yaml::Header {
        yaml::Header {
            api_version: Some(self.api_version.clone()),
            kind: Some(self.kind.clone()),
        }
    }
}

/// Keys that are not misspellings but belong elsewhere or are older spellings.
pub(crate) fn hint(field: &str, parent: &str) -> Option<&'static str> {
    match (parent, field) {
        ("", "ipxeBaseURL") => {
            Some("ipxeBaseURL is an older spelling; write bootArtifactsBaseURL")
        }
        (
            "",
            "baseDomain" | "pullSecret" | "sshKey" | "platform" | "networking" | "controlPlane"
            | "compute" | "imageDigestSources",
        ) => Some("this key belongs in install-config.yaml"),
        (p, "bootMACAddress") if p.starts_with("hosts[") => {
            Some("agent-config hosts name their NICs under interfaces (name, macAddress); bootMACAddress belongs in install-config platform.baremetal.hosts")
        }
        _ => None,
    }
}
