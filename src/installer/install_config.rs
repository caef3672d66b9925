//! install-config.yaml as `openshift-install agent create image` reads it, one type for reading
//! (`bootstrap validate`) and for writing (`bootstrap render`).
//!
//! Every field of the installer's `InstallConfig` is known (openshift/installer
//! `pkg/types/installconfig.go`, `machinepools.go`, `pkg/types/baremetal/platform.go`, their json
//! tags), including the deprecated spellings the installer still up-converts
//! (`pkg/types/conversion/installconfig.go`): a valid file for today's installer is never
//! refused for its keys. An unknown key is refused with the key meant; the installer itself would
//! only log a warning and drop it. Platforms other than baremetal, none and external are refused:
//! bootstrap installs bare metal.
//!
//! Values the rules judge (enumerations, CIDRs, addresses) are read as strings, so one wrong value
//! is a rule problem among others rather than an error that stops the file. Fields are in the
//! order render writes them; what render does not write is left out when empty.

use super::agent_config::RootDeviceHints;
use super::{InlineSecret, Loaded, MAX_FILE_BYTES};
use crate::yaml::{self, Positions, Problem, Schema, Severity};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The apiVersion install-config.yaml carries.
pub const API_VERSION: &str = "v1";

/// install-config.yaml.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct InstallConfig {
    /// `v1` (`v1beta3` and `v1beta4` are read with a warning, as the installer up-converts them).
    pub api_version: String,
    /// Optional; `InstallConfig` when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The DNS domain the cluster's names live under (`api.<name>.<baseDomain>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_domain: Option<String>,
    /// The cluster's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// The compute pools.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compute: Vec<MachinePool>,
    /// The control-plane pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<MachinePool>,
    /// Networks for machines, pods and services.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub networking: Option<Networking>,
    /// Where the cluster runs: baremetal, none or external.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<Platform>,
    /// PEM CA certificates added to every node's trust store (the mirror registry's CA).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_trust_bundle: Option<String>,
    /// `Proxyonly` (default) or `Always`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_trust_bundle_policy: Option<String>,
    /// Mirrors for release content (becomes an ImageDigestMirrorSet).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_digest_sources: Vec<ImageSource>,
    /// The registry credentials (JSON with `auths`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_secret: Option<InlineSecret>,
    /// The core user's SSH public key(s), authorized_keys lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_key: Option<String>,
    /// The arbiter pool of a two-node cluster with an arbiter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arbiter: Option<MachinePool>,
    /// Cluster-wide proxy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<Proxy>,
    /// Mirrors for release content, deprecated form (becomes an ImageContentSourcePolicy).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_content_sources: Vec<ImageSource>,
    /// `External`, `Internal` or `Mixed` (ignored by the agent installer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publish: Option<String>,
    /// Per-component publishing (Azure only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_publishing_strategy: Option<OperatorPublishingStrategy>,
    /// FIPS mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fips: Option<bool>,
    /// `None` or `AllNodes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_partitioning_mode: Option<String>,
    /// `Mint`, `Passthrough` or `Manual` (cloud platforms; ignored by the agent installer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_mode: Option<String>,
    /// Single-node bootstrap-in-place (its installation disk is ignored by the agent installer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_in_place: Option<BootstrapInPlace>,
    /// Optional cluster capabilities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Capabilities>,
    /// A feature set (`TechPreviewNoUpgrade`, `CustomNoUpgrade`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feature_set: Option<String>,
    /// `Name=true|false` gates, with feature set `CustomNoUpgrade`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub feature_gates: Vec<String>,
    /// The default OS image stream of every pool (newest installers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_image_stream: Option<String>,
}

/// `metadata` (Kubernetes ObjectMeta; the installer uses the name, and the namespace for the
/// agent flow's cluster resources). Only `name` is judged; the rest is accepted as written.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Metadata {
    /// The name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Labels, as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<Value>,
    /// Annotations, as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    /// ObjectMeta's other fields, accepted as the installer's decoder accepts them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generate_name: Option<Value>,
    /// See `generate_name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<Value>,
    /// See `generate_name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<Value>,
    /// See `generate_name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<Value>,
    /// See `generate_name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<Value>,
    /// See `generate_name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<Value>,
    /// See `generate_name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_grace_period_seconds: Option<Value>,
    /// See `generate_name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_references: Option<Value>,
    /// See `generate_name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalizers: Option<Value>,
    /// See `generate_name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_fields: Option<Value>,
    /// See `generate_name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_link: Option<Value>,
}

/// `controlPlane`, `arbiter` and each `compute[]` entry.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MachinePool {
    /// `master` for the control plane, `arbiter`, `worker` for compute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// How many machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i64>,
    /// amd64, arm64, ppc64le or s390x.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
    /// Enabled or Disabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hyperthreading: Option<String>,
    /// Platform-specific pool settings, kept as written (the agent installer ignores them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<Value>,
    /// The BMCs of a two-node cluster with fencing (control plane only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fencing: Option<Fencing>,
    /// Disks set up with MachineConfigs (etcd, swap, user-defined).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disk_setup: Vec<DiskSetup>,
    /// The OS image stream of this pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_image_stream: Option<String>,
}

/// `controlPlane.fencing`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Fencing {
    /// One per control-plane host.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub credentials: Vec<FencingCredential>,
}

/// `controlPlane.fencing.credentials[]`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FencingCredential {
    /// The host it fences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_name: Option<String>,
    /// The BMC user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// The BMC password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<InlineSecret>,
    /// The BMC address (a Redfish URL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// `Enabled` or `Disabled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_verification: Option<String>,
}

/// `diskSetup[]`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DiskSetup {
    /// `etcd`, `swap` or `user-defined`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// `platformDiskID` and `mountPath`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_defined: Option<Value>,
    /// `platformDiskID`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd: Option<Value>,
    /// `platformDiskID`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap: Option<Value>,
}

/// `networking`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Networking {
    /// OVNKubernetes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_type: Option<String>,
    /// The networks the hosts' addresses are in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub machine_network: Vec<MachineNetwork>,
    /// Pod networks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_network: Vec<ClusterNetwork>,
    /// Service networks (CIDRs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub service_network: Vec<String>,
    /// The overlay's MTU.
    #[serde(
        default,
        rename = "clusterNetworkMTU",
        skip_serializing_if = "Option::is_none"
    )]
    pub cluster_network_mtu: Option<u32>,
    /// `ipv4.internalJoinSubnet`, kept as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ovn_kubernetes_config: Option<Value>,
    /// Deprecated: one machine network (read as `machineNetwork`).
    #[serde(
        default,
        rename = "machineCIDR",
        skip_serializing_if = "Option::is_none"
    )]
    pub machine_cidr: Option<String>,
    /// Deprecated: the network type (read as `networkType`).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub deprecated_type: Option<String>,
    /// Deprecated: one service network (read as `serviceNetwork`).
    #[serde(
        default,
        rename = "serviceCIDR",
        skip_serializing_if = "Option::is_none"
    )]
    pub service_cidr: Option<String>,
    /// Deprecated: the pod networks (read as `clusterNetwork`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_networks: Vec<ClusterNetwork>,
}

/// `networking.machineNetwork[]`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MachineNetwork {
    /// The network, e.g. 10.20.0.0/24.
    pub cidr: String,
}

/// `networking.clusterNetwork[]`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClusterNetwork {
    /// The pod network, e.g. 10.128.0.0/14.
    pub cidr: String,
    /// Each node's share of it, e.g. 23.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_prefix: Option<i64>,
    /// Deprecated: the bits per node (`hostPrefix` is the network's size minus this).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_subnet_length: Option<i64>,
}

/// `platform`: exactly one of its members is set.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Platform {
    /// Bare metal with VIPs (keepalived and haproxy on the nodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baremetal: Option<Baremetal>,
    /// No platform integration (single node, or an external load balancer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub none: Option<Empty>,
    /// An external platform.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external: Option<External>,
}

/// An empty mapping (`none: {}`).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

/// `platform.external`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct External {
    /// The platform's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform_name: Option<String>,
    /// `External` or empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_controller_manager: Option<String>,
}

/// `platform.baremetal`: the VIPs the agent flow uses, and the IPI provisioning fields (the
/// agent flow ignores most of them; `hosts` is used when agent-config.yaml has none).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Baremetal {
    /// The API virtual IPs (one, or one per family).
    #[serde(default, rename = "apiVIPs", skip_serializing_if = "Vec::is_empty")]
    pub api_vips: Vec<String>,
    /// The ingress virtual IPs (one, or one per family).
    #[serde(default, rename = "ingressVIPs", skip_serializing_if = "Vec::is_empty")]
    pub ingress_vips: Vec<String>,
    /// The hosts with their BMCs (IPI; the agent flow takes them when agent-config has none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<BaremetalHost>,
    /// Deprecated single API VIP (read as `apiVIPs`).
    #[serde(default, rename = "apiVIP", skip_serializing_if = "Option::is_none")]
    pub api_vip: Option<String>,
    /// Deprecated single ingress VIP (read as `ingressVIPs`).
    #[serde(
        default,
        rename = "ingressVIP",
        skip_serializing_if = "Option::is_none"
    )]
    pub ingress_vip: Option<String>,
    /// Managed, Unmanaged or Disabled (IPI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_network: Option<String>,
    /// IPI provisioning network.
    #[serde(
        default,
        rename = "provisioningNetworkCIDR",
        skip_serializing_if = "Option::is_none"
    )]
    pub provisioning_network_cidr: Option<String>,
    /// IPI provisioning interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_network_interface: Option<String>,
    /// IPI provisioning bridge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_bridge: Option<String>,
    /// IPI external bridge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_bridge: Option<String>,
    /// IPI.
    #[serde(
        default,
        rename = "clusterProvisioningIP",
        skip_serializing_if = "Option::is_none"
    )]
    pub cluster_provisioning_ip: Option<String>,
    /// Deprecated spelling of `clusterProvisioningIP`.
    #[serde(
        default,
        rename = "provisioningHostIP",
        skip_serializing_if = "Option::is_none"
    )]
    pub provisioning_host_ip: Option<String>,
    /// IPI.
    #[serde(
        default,
        rename = "bootstrapProvisioningIP",
        skip_serializing_if = "Option::is_none"
    )]
    pub bootstrap_provisioning_ip: Option<String>,
    /// IPI.
    #[serde(
        default,
        rename = "provisioningDHCPRange",
        skip_serializing_if = "Option::is_none"
    )]
    pub provisioning_dhcp_range: Option<String>,
    /// Deprecated: `provisioningNetwork: Unmanaged`.
    #[serde(
        default,
        rename = "provisioningDHCPExternal",
        skip_serializing_if = "Option::is_none"
    )]
    pub provisioning_dhcp_external: Option<bool>,
    /// IPI.
    #[serde(
        default,
        rename = "externalMACAddress",
        skip_serializing_if = "Option::is_none"
    )]
    pub external_mac_address: Option<String>,
    /// IPI.
    #[serde(
        default,
        rename = "provisioningMACAddress",
        skip_serializing_if = "Option::is_none"
    )]
    pub provisioning_mac_address: Option<String>,
    /// IPI.
    #[serde(
        default,
        rename = "bootstrapOSImage",
        skip_serializing_if = "Option::is_none"
    )]
    pub bootstrap_os_image: Option<String>,
    /// IPI.
    #[serde(
        default,
        rename = "clusterOSImage",
        skip_serializing_if = "Option::is_none"
    )]
    pub cluster_os_image: Option<String>,
    /// IPI.
    #[serde(
        default,
        rename = "libvirtURI",
        skip_serializing_if = "Option::is_none"
    )]
    pub libvirt_uri: Option<String>,
    /// IPI: the bootstrap VM's static address.
    #[serde(
        default,
        rename = "bootstrapExternalStaticIP",
        skip_serializing_if = "Option::is_none"
    )]
    pub bootstrap_external_static_ip: Option<String>,
    /// IPI: the bootstrap VM's gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_external_static_gateway: Option<String>,
    /// IPI: the bootstrap VM's DNS server.
    #[serde(
        default,
        rename = "bootstrapExternalStaticDNS",
        skip_serializing_if = "Option::is_none"
    )]
    pub bootstrap_external_static_dns: Option<String>,
    /// `type: OpenShiftManagedDefault` or `UserManaged`; kept as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_balancer: Option<Value>,
    /// Default pool settings; kept as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_machine_platform: Option<Value>,
}

/// `platform.baremetal.hosts[]`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BaremetalHost {
    /// The host's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its BMC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bmc: Option<Bmc>,
    /// master, worker or arbiter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The MAC of the NIC it boots from.
    #[serde(
        default,
        rename = "bootMACAddress",
        skip_serializing_if = "Option::is_none"
    )]
    pub boot_mac_address: Option<String>,
    /// IPI hardware profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware_profile: Option<String>,
    /// Which disk to install to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_device_hints: Option<RootDeviceHints>,
    /// UEFI, UEFISecureBoot or legacy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_mode: Option<String>,
    /// NMState, kept as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_config: Option<Value>,
}

/// A host's BMC (install-config `hosts[].bmc`, agent-config `hosts[].BMC`).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Bmc {
    /// The BMC user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// The BMC password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<InlineSecret>,
    /// `redfish-virtualmedia://HOST/redfish/v1/Systems/ID`, `idrac-virtualmedia://...`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Skip the BMC's certificate check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_certificate_verification: Option<bool>,
}

/// `proxy`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Proxy {
    /// URL of the HTTP proxy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_proxy: Option<String>,
    /// URL of the HTTPS proxy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub https_proxy: Option<String>,
    /// Comma-separated domains and CIDRs not proxied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_proxy: Option<String>,
}

/// An `imageDigestSources[]` or `imageContentSources[]` entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ImageSource {
    /// The repository images are pulled by.
    pub source: String,
    /// Repositories holding the same images.
    #[serde(default)]
    pub mirrors: Vec<String>,
    /// `AllowContactingSource` or `NeverContactSource` (imageDigestSources only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_policy: Option<String>,
}

/// `operatorPublishingStrategy`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct OperatorPublishingStrategy {
    /// `External` or `Internal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress: Option<String>,
    /// `External` or `Internal`.
    #[serde(default, rename = "apiserver", skip_serializing_if = "Option::is_none")]
    pub api_server: Option<String>,
}

/// `bootstrapInPlace`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BootstrapInPlace {
    /// The disk coreos-installer writes to (ignored by the agent installer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installation_disk: Option<String>,
}

/// `capabilities`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Capabilities {
    /// `None`, `vCurrent` or `v4.N`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_capability_set: Option<String>,
    /// Capabilities added to the baseline.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
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

    /// The arbiter pool's replicas (0 without one).
    pub fn arbiter_replicas(&self) -> i64 {
        self.arbiter.as_ref().and_then(|a| a.replicas).unwrap_or(0)
    }

    /// True when the control plane names BMCs to fence (a two-node cluster with fencing).
    pub fn has_fencing(&self) -> bool {
        self.control_plane
            .as_ref()
            .and_then(|c| c.fencing.as_ref())
            .is_some_and(|f| !f.credentials.is_empty())
    }
}

/// Reads install-config.yaml with positions: the header, the strict schema. A YAML error, a
/// wrong header or a key the schema does not know is the one problem returned.
pub fn parse(text: &str) -> Result<Loaded<InstallConfig>, Problem> {
    yaml::parse(text, Positions::Index)
}

/// What install-config.yaml must be.
static SCHEMA: Schema = Schema {
    document: "an install-config",
    name: "install-config",
    api_version: API_VERSION,
    other_versions: &[
        (
            "v1beta4",
            Severity::Warning,
            "v1beta4 is an older install-config version the installer still reads (as v1); write `apiVersion: v1`",
        ),
        (
            "v1beta3",
            Severity::Warning,
            "v1beta3 is an older install-config version the installer still reads (as v1); write `apiVersion: v1`",
        ),
    ],
    kind: "InstallConfig",
    kind_required: false,
    other_kinds: &[],
    hint,
    unknown_note: Some(
        "openshift-install itself would only log a warning and ignore this key, so its setting would be silently lost",
    ),
    keys_ignore_case: Some(yaml::IgnoreCase::everywhere("the installer")),
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

/// Keys that are not misspellings but belong elsewhere.
pub(crate) fn hint(field: &str, parent: &str) -> Option<&'static str> {
    match (parent, field) {
        (
            "platform",
            "vsphere" | "nutanix" | "aws" | "azure" | "gcp" | "openstack" | "ibmcloud" | "powervs"
            | "powervc" | "ovirt",
        ) => Some(
            "bootstrap validates bare-metal agent installs: use platform baremetal, none or external",
        ),
        ("", "hosts" | "rendezvousIP" | "additionalNTPSources" | "bootArtifactsBaseURL") => {
            Some("this key belongs in agent-config.yaml")
        }
        _ => None,
    }
}
