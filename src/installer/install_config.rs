//! install-config.yaml as `openshift-install agent create image` reads it for a bare-metal
//! cluster: the strict schema (unknown keys refused, as the installer's strict unmarshal does)
//! and its loading into a value with a position index. The rules live in `rules.rs`.
//!
//! Field names follow openshift/installer `pkg/types/installconfig.go` and
//! `pkg/types/baremetal/platform.go`. Values the rules judge (enumerations, CIDRs, addresses)
//! are read as strings, so one wrong value is a rule problem among others rather than an error
//! that stops the file.

use super::{Loaded, MAX_FILE_BYTES};
use crate::yaml::{self, Positions, Problem, Schema};
use serde::Deserialize;
use serde_json::Value;

/// The apiVersion install-config.yaml carries.
pub const API_VERSION: &str = "v1";

/// install-config.yaml.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct InstallConfig {
    /// Always `v1`.
    pub api_version: String,
    /// Optional; `InstallConfig` when given.
    #[serde(default)]
    pub kind: Option<String>,
    /// The cluster's name.
    #[serde(default)]
    pub metadata: Option<Metadata>,
    /// The DNS domain the cluster's names live under (`api.<name>.<baseDomain>`).
    #[serde(default)]
    pub base_domain: Option<String>,
    /// PEM CA certificates added to every node's trust store (the mirror registry's CA).
    #[serde(default)]
    pub additional_trust_bundle: Option<String>,
    /// `Proxyonly` (default) or `Always`.
    #[serde(default)]
    pub additional_trust_bundle_policy: Option<String>,
    /// The core user's SSH public key(s).
    #[serde(default)]
    pub ssh_key: Option<String>,
    /// Networks for machines, pods and services.
    #[serde(default)]
    pub networking: Option<Networking>,
    /// The control-plane pool.
    #[serde(default)]
    pub control_plane: Option<MachinePool>,
    /// The compute pools.
    #[serde(default)]
    pub compute: Vec<MachinePool>,
    /// Where the cluster runs: baremetal, none or external.
    #[serde(default)]
    pub platform: Option<Platform>,
    /// The registry credentials (JSON with `auths`).
    #[serde(default)]
    pub pull_secret: Option<String>,
    /// Cluster-wide proxy.
    #[serde(default)]
    pub proxy: Option<Proxy>,
    /// Mirrors for release content, legacy form (becomes an ImageContentSourcePolicy).
    #[serde(default)]
    pub image_content_sources: Vec<ImageSource>,
    /// Mirrors for release content (becomes an ImageDigestMirrorSet).
    #[serde(default)]
    pub image_digest_sources: Vec<ImageSource>,
    /// `External` or `Internal`.
    #[serde(default)]
    pub publish: Option<String>,
    /// FIPS mode.
    #[serde(default)]
    pub fips: Option<bool>,
    /// Optional cluster capabilities.
    #[serde(default)]
    pub capabilities: Option<Capabilities>,
    /// `None` or `AllNodes`.
    #[serde(default)]
    pub cpu_partitioning_mode: Option<String>,
    /// A feature set (`TechPreviewNoUpgrade`, ...).
    #[serde(default)]
    pub feature_set: Option<String>,
}

/// `metadata`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metadata {
    /// The cluster name.
    #[serde(default)]
    pub name: Option<String>,
    /// Ignored by the installer; accepted.
    #[serde(default)]
    pub namespace: Option<String>,
}

/// `controlPlane` and each `compute[]` entry.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MachinePool {
    /// `master` for the control plane, `worker` for compute.
    #[serde(default)]
    pub name: Option<String>,
    /// How many machines.
    #[serde(default)]
    pub replicas: Option<i64>,
    /// amd64, arm64, ppc64le or s390x.
    #[serde(default)]
    pub architecture: Option<String>,
    /// Enabled or Disabled.
    #[serde(default)]
    pub hyperthreading: Option<String>,
    /// Platform-specific pool settings, kept as written.
    #[serde(default)]
    pub platform: Option<Value>,
}

/// `networking`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Networking {
    /// OVNKubernetes.
    #[serde(default)]
    pub network_type: Option<String>,
    /// The networks the hosts' addresses are in.
    #[serde(default)]
    pub machine_network: Vec<MachineNetwork>,
    /// Pod networks.
    #[serde(default)]
    pub cluster_network: Vec<ClusterNetwork>,
    /// Service networks (CIDRs).
    #[serde(default)]
    pub service_network: Vec<String>,
}

/// `networking.machineNetwork[]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineNetwork {
    /// The network, e.g. 10.20.0.0/24.
    pub cidr: String,
}

/// `networking.clusterNetwork[]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClusterNetwork {
    /// The pod network, e.g. 10.128.0.0/14.
    pub cidr: String,
    /// Each node's share of it, e.g. 23.
    #[serde(default)]
    pub host_prefix: Option<i64>,
}

/// `platform`: exactly one of its members is set.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Platform {
    /// Bare metal with VIPs (keepalived and haproxy on the nodes).
    #[serde(default)]
    pub baremetal: Option<Baremetal>,
    /// No platform integration (single node, or an external load balancer).
    #[serde(default)]
    pub none: Option<Empty>,
    /// An external platform.
    #[serde(default)]
    pub external: Option<External>,
}

/// An empty mapping (`none: {}`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

/// `platform.external`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct External {
    /// The platform's name.
    #[serde(default)]
    pub platform_name: Option<String>,
    /// `External` or empty.
    #[serde(default)]
    pub cloud_controller_manager: Option<String>,
}

/// `platform.baremetal`: the VIPs the agent flow uses; the IPI provisioning fields are
/// accepted (the agent flow ignores them) but not required.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Baremetal {
    /// The API virtual IPs (one, or one per family).
    #[serde(default, rename = "apiVIPs")]
    pub api_vips: Vec<String>,
    /// The ingress virtual IPs (one, or one per family).
    #[serde(default, rename = "ingressVIPs")]
    pub ingress_vips: Vec<String>,
    /// IPI hosts; agent-config's hosts take precedence. Kept as written.
    #[serde(default)]
    pub hosts: Option<Value>,
    /// Managed, Unmanaged or Disabled (IPI).
    #[serde(default)]
    pub provisioning_network: Option<String>,
    /// IPI provisioning network.
    #[serde(default, rename = "provisioningNetworkCIDR")]
    pub provisioning_network_cidr: Option<String>,
    /// IPI provisioning interface.
    #[serde(default)]
    pub provisioning_network_interface: Option<String>,
    /// IPI provisioning bridge.
    #[serde(default)]
    pub provisioning_bridge: Option<String>,
    /// IPI external bridge.
    #[serde(default)]
    pub external_bridge: Option<String>,
    /// IPI.
    #[serde(default, rename = "clusterProvisioningIP")]
    pub cluster_provisioning_ip: Option<String>,
    /// IPI.
    #[serde(default, rename = "bootstrapProvisioningIP")]
    pub bootstrap_provisioning_ip: Option<String>,
    /// IPI.
    #[serde(default, rename = "provisioningDHCPRange")]
    pub provisioning_dhcp_range: Option<String>,
    /// IPI.
    #[serde(default, rename = "externalMACAddress")]
    pub external_mac_address: Option<String>,
    /// IPI.
    #[serde(default, rename = "provisioningMACAddress")]
    pub provisioning_mac_address: Option<String>,
    /// IPI.
    #[serde(default, rename = "bootstrapOSImage")]
    pub bootstrap_os_image: Option<String>,
    /// IPI.
    #[serde(default, rename = "clusterOSImage")]
    pub cluster_os_image: Option<String>,
    /// IPI.
    #[serde(default, rename = "libvirtURI")]
    pub libvirt_uri: Option<String>,
    /// `type: OpenShiftManagedDefault` or `UserManaged`; kept as written.
    #[serde(default)]
    pub load_balancer: Option<Value>,
    /// Default pool settings; kept as written.
    #[serde(default)]
    pub default_machine_platform: Option<Value>,
}

/// `proxy`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Proxy {
    /// URL of the HTTP proxy.
    #[serde(default)]
    pub http_proxy: Option<String>,
    /// URL of the HTTPS proxy.
    #[serde(default)]
    pub https_proxy: Option<String>,
    /// Comma-separated domains and CIDRs not proxied.
    #[serde(default)]
    pub no_proxy: Option<String>,
}

/// An `imageDigestSources[]` or `imageContentSources[]` entry.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageSource {
    /// The repository images are pulled by.
    pub source: String,
    /// Repositories holding the same images.
    #[serde(default)]
    pub mirrors: Vec<String>,
}

/// `capabilities`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Capabilities {
    /// `None`, `vCurrent` or `v4.N`.
    #[serde(default)]
    pub baseline_capability_set: Option<String>,
    /// Capabilities added to the baseline.
    #[serde(default)]
    pub additional_enabled_capabilities: Vec<String>,
}

impl InstallConfig {
    /// The name of the one platform set (`baremetal`, `none`, `external`), if exactly one is.
    pub fn platform_name(&self) -> Option<&'static str> {
        let p = self.platform.as_ref()?;
        match (&p.baremetal, &p.none, &p.external) {
            (Some(_), None, None) => Some("baremetal"),
            (None, Some(_), None) => Some("none"),
            (None, None, Some(_)) => Some("external"),
            _ => None,
        }
    }

    /// The control plane's replicas as written (the installer's default is 3).
    pub fn control_plane_replicas(&self) -> i64 {
        self.control_plane
            .as_ref()
            .and_then(|c| c.replicas)
            .unwrap_or(3)
    }
}

/// Reads install-config.yaml: the position index, the header, the strict schema. A YAML error,
/// a wrong header or a key the schema does not know is the one problem returned.
pub fn parse(text: &str) -> Result<Loaded<InstallConfig>, Problem> {
    yaml::parse(text, Positions::Index)
}

/// What install-config.yaml must be.
static SCHEMA: Schema = Schema {
    document: "an install-config",
    name: "install-config",
    api_version: API_VERSION,
    other_versions: &[],
    kind: "InstallConfig",
    kind_required: false,
    other_kinds: &[],
    hint,
    unknown_note: None,
    keys_ignore_case: false,
    max_bytes: MAX_FILE_BYTES,
};

impl yaml::Document for InstallConfig {
    const SCHEMA: &'static Schema = &SCHEMA;

    fn header(&self) -> yaml::Header {
        yaml::Header {
            api_version: Some(self.api_version.clone()),
            kind: self.kind.clone(),
        }
    }
}

/// Keys that are not misspellings but belong elsewhere or are older spellings.
pub(crate) fn hint(field: &str, parent: &str) -> Option<&'static str> {
    match (parent, field) {
        ("platform.baremetal", "apiVIP") => {
            Some("apiVIP is the old single-VIP spelling; write `apiVIPs: [ADDRESS]`")
        }
        ("platform.baremetal", "ingressVIP") => {
            Some("ingressVIP is the old single-VIP spelling; write `ingressVIPs: [ADDRESS]`")
        }
        ("platform", "vsphere" | "nutanix" | "aws" | "azure" | "gcp" | "openstack") => Some(
            "bootstrap validates bare-metal agent installs: use platform baremetal, none or external",
        ),
        ("", "hosts" | "rendezvousIP" | "additionalNTPSources") => {
            Some("this key belongs in agent-config.yaml")
        }
        ("networking", "machineCIDR" | "serviceCIDR" | "clusterNetworks" | "type") => {
            Some("this is a removed spelling; use machineNetwork, serviceNetwork, clusterNetwork and networkType")
        }
        _ => None,
    }
}
