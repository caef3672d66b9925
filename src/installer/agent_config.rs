//! agent-config.yaml as `openshift-install agent create image` reads it: the strict schema
//! (openshift/installer `pkg/types/agent/agent_config_type.go`, root device hints from
//! `pkg/types/baremetal/rootdevice.go`) and its loading. A host's `networkConfig` is NMState,
//! kept as written; `nmstate.rs` walks it for the rules.

use super::{Loaded, MAX_FILE_BYTES};
use crate::yaml::{self, Positions, Problem, Schema, Severity};
use serde::Deserialize;
use serde_json::Value;

/// The apiVersion agent-config.yaml carries.
pub const API_VERSION: &str = "v1beta1";
/// The kind agent-config.yaml carries.
pub const KIND: &str = "AgentConfig";

/// agent-config.yaml.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AgentConfig {
    /// Always `v1beta1`.
    pub api_version: String,
    /// Always `AgentConfig`.
    pub kind: String,
    /// The name (the cluster's, by convention) and namespace.
    #[serde(default)]
    pub metadata: Option<Metadata>,
    /// The address of the host that runs the installation service (node0).
    #[serde(default, rename = "rendezvousIP")]
    pub rendezvous_ip: Option<String>,
    /// Where PXE and minimal-ISO boot artifacts are served from.
    #[serde(default, rename = "bootArtifactsBaseURL")]
    pub boot_artifacts_base_url: Option<String>,
    /// NTP servers (names or addresses) added on every host.
    #[serde(default, rename = "additionalNTPSources")]
    pub additional_ntp_sources: Vec<String>,
    /// A minimal ISO (rootfs fetched at boot) rather than a full one.
    #[serde(default, rename = "minimalISO")]
    pub minimal_iso: Option<bool>,
    /// Per-host settings.
    #[serde(default)]
    pub hosts: Vec<Host>,
}

/// `metadata`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metadata {
    /// The name.
    #[serde(default)]
    pub name: Option<String>,
    /// The namespace of the generated cluster resources.
    #[serde(default)]
    pub namespace: Option<String>,
}

/// `hosts[]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Host {
    /// The host's name.
    #[serde(default)]
    pub hostname: Option<String>,
    /// master, worker or arbiter; unset lets the installer choose.
    #[serde(default)]
    pub role: Option<String>,
    /// The host's NICs: how the agent recognises the host.
    #[serde(default)]
    pub interfaces: Vec<Interface>,
    /// Which disk to install to.
    #[serde(default)]
    pub root_device_hints: Option<RootDeviceHints>,
    /// NMState network configuration, kept as written.
    #[serde(default)]
    pub network_config: Option<Value>,
}

/// `hosts[].interfaces[]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Interface {
    /// The NIC's name as NMState refers to it.
    #[serde(default)]
    pub name: Option<String>,
    /// The NIC's MAC address.
    #[serde(default)]
    pub mac_address: Option<String>,
}

/// `hosts[].rootDeviceHints`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RootDeviceHints {
    /// `/dev/sda` or `/dev/disk/by-path/...`.
    #[serde(default)]
    pub device_name: Option<String>,
    /// SCSI address, e.g. 0:0:0:0.
    #[serde(default)]
    pub hctl: Option<String>,
    /// Substring of the model.
    #[serde(default)]
    pub model: Option<String>,
    /// Substring of the vendor.
    #[serde(default)]
    pub vendor: Option<String>,
    /// Exact serial number.
    #[serde(default)]
    pub serial_number: Option<String>,
    /// Smallest size in GB.
    #[serde(default)]
    pub min_size_gigabytes: Option<i64>,
    /// World Wide Name.
    #[serde(default)]
    pub wwn: Option<String>,
    /// Parsed so the rule can say why it is refused by the agent installer.
    #[serde(default)]
    pub wwn_with_extension: Option<String>,
    /// Parsed so the rule can say why it is refused by the agent installer.
    #[serde(default)]
    pub wwn_vendor_extension: Option<String>,
    /// Spinning disk or not.
    #[serde(default)]
    pub rotational: Option<bool>,
}

/// Reads agent-config.yaml: the position index, the header, the strict schema. A YAML error,
/// a wrong header or a key the schema does not know is the one problem returned.
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
        Severity::Error,
        "v1alpha1 is the older AgentConfig format; set `apiVersion: v1beta1` (and rename ipxeBaseURL to bootArtifactsBaseURL if you use it)",
    )],
    kind: KIND,
    kind_required: true,
    other_kinds: &[],
    hint,
    unknown_note: None,
    keys_ignore_case: false,
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
        ("", "ipxeBaseURL") => Some("ipxeBaseURL is the v1alpha1 spelling; write bootArtifactsBaseURL"),
        ("", "rendezvousIp" | "rendezvousip") => Some("the key is rendezvousIP"),
        (
            "",
            "baseDomain" | "pullSecret" | "sshKey" | "platform" | "networking" | "controlPlane"
            | "compute" | "imageDigestSources",
        ) => Some("this key belongs in install-config.yaml"),
        (p, "bootMACAddress" | "bmc") if p.starts_with("hosts[") => {
            Some("agent-config hosts name their NICs under interfaces (name, macAddress); BMC settings belong in install-config platform.baremetal.hosts")
        }
        _ => None,
    }
}
