//! The site inventory as it is written: `site.yaml` (the cluster, its networks and the
//! references to secrets and the mirror) and `nodes.yaml` (every node: role, BMC, NICs, bonds,
//! VLANs, addresses, root device, labels). Plain serde types, read strictly (an unknown key is
//! an error with file, line and column); positions live in a side index ([`crate::yaml`]), rules
//! in [`super::validate()`]. Secrets are never values here, only [`SecretRef`]s.

use serde::Deserialize;
use std::collections::BTreeMap;

/// The only `apiVersion` of `site.yaml` and `nodes.yaml`.
pub const API_VERSION: &str = "bootstrap.openshift-ai.dev/v1alpha1";
/// `kind` of `site.yaml`.
pub const SITE_KIND: &str = "Site";
/// `kind` of `nodes.yaml`.
pub const NODES_KIND: &str = "Nodes";
/// File name of the site description inside an inventory directory.
pub const SITE_FILE: &str = "site.yaml";
/// File name of the node list inside an inventory directory.
pub const NODES_FILE: &str = "nodes.yaml";

/// `site.yaml`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Site {
    /// [`API_VERSION`].
    pub api_version: String,
    /// [`SITE_KIND`].
    pub kind: String,
    /// The cluster.
    pub cluster: Cluster,
    /// Its networks.
    pub networks: Networks,
    /// Secrets and the mirror, by reference.
    pub references: References,
    /// Day-1 settings the iso stage turns into extra manifests.
    #[serde(default)]
    pub day1: Day1,
    /// How the BMCs reach the agent ISO (the boot stage).
    #[serde(default)]
    pub boot: Boot,
    /// How the prep stage reaches the booted nodes over SSH, and what it runs there.
    #[serde(default)]
    pub prep: Prep,
    /// The hand-off to Argo CD: the site's GitOps repository, the operator, the tenants.
    #[serde(default)]
    pub gitops: Option<Gitops>,
}

/// `boot`: how the BMCs fetch the agent ISO. Either bootstrap serves it itself (`isoServer`, the
/// default: on the address it names in the BMC network) or the site already serves it
/// (`isoURL`: checked to serve the same bytes before any BMC is touched).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Boot {
    /// Serve the ISO from this machine.
    #[serde(default)]
    pub iso_server: Option<IsoServer>,
    /// Or an existing URL that serves the same ISO.
    #[serde(default, rename = "isoURL")]
    pub iso_url: Option<String>,
    /// How many nodes are booted at once (default 8).
    #[serde(default)]
    pub parallel: Option<u32>,
}

/// `boot.isoServer`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct IsoServer {
    /// `ADDRESS:PORT` to listen on: this machine's address in the BMC network (the BMCs fetch
    /// from it). Port 0 picks a free port.
    pub listen: String,
    /// The host name or address the BMCs are told (default: `listen`'s address).
    #[serde(default)]
    pub advertise: Option<String>,
    /// Serve over TLS with this certificate and key (PEM files).
    #[serde(default)]
    pub tls: Option<ServerTls>,
}

/// A server's certificate chain and key, by reference.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ServerTls {
    /// The certificate chain (PEM).
    pub certificate: FileRef,
    /// Its private key (PEM).
    pub key: FileRef,
}

/// `day1`: what the cluster needs from its first boot, written by the iso stage as extra
/// manifests (`openshift/`) beside those of the inventory's `manifests/` folder.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Day1 {
    /// Roles whose nodes must not load the Intel `irdma` module (it collides with ConnectX RDMA
    /// at kernel level): a `99-<role>-blacklist-irdma` MachineConfig each.
    #[serde(default)]
    pub blacklist_irdma: Vec<MachineRole>,
}

/// A MachineConfigPool role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MachineRole {
    /// Control-plane nodes.
    Master,
    /// Compute nodes.
    Worker,
}

impl MachineRole {
    /// `master` or `worker`.
    pub fn name(self) -> &'static str {
        match self {
            MachineRole::Master => "master",
            MachineRole::Worker => "worker",
        }
    }
}

/// Which installer binary the tools stage takes from the release.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InstallerBinary {
    /// `openshift-install`, from the `installer` image.
    #[default]
    OpenshiftInstall,
    /// `openshift-baremetal-install`, from the `baremetal-installer` image.
    OpenshiftBaremetalInstall,
}

/// `cluster`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Cluster {
    /// `metadata.name` of install-config.yaml: a DNS label.
    pub name: String,
    /// `baseDomain`: the cluster's domain is `<name>.<baseDomain>`.
    pub base_domain: String,
    /// The OpenShift release: exactly one of `image` (by digest) or `version`.
    pub release: Release,
    /// `apiVIPs`: addresses in the machine network that no node uses.
    #[serde(rename = "apiVIPs")]
    pub api_vips: Vec<String>,
    /// `ingressVIPs`: likewise, and none equal to an API VIP.
    #[serde(rename = "ingressVIPs")]
    pub ingress_vips: Vec<String>,
    /// The agent installer's rendezvous host: a control-plane node's static machine address.
    #[serde(rename = "rendezvousIP")]
    pub rendezvous_ip: String,
    /// `additionalTrustBundlePolicy` (`Proxyonly` or `Always`; default `Always` when a registry
    /// CA is referenced, so nodes trust the mirror).
    #[serde(default)]
    pub trust_bundle_policy: Option<String>,
}

/// `cluster.release`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Release {
    /// The release image by digest (`quay.io/openshift-release-dev/ocp-release@sha256:...`).
    #[serde(default)]
    pub image: Option<String>,
    /// The release version (`4.18.3`), resolved against the mirror record.
    #[serde(default)]
    pub version: Option<String>,
    /// The installer binary the tools stage extracts (default `openshift-install`).
    #[serde(default)]
    pub installer: InstallerBinary,
}

/// `networks`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Networks {
    /// `networking.machineNetwork`: the nodes' primary network(s), CIDRs.
    pub machine: Vec<String>,
    /// `networking.clusterNetwork`: pod networks.
    pub cluster: Vec<ClusterNetwork>,
    /// `networking.serviceNetwork`: service CIDRs.
    pub service: Vec<String>,
    /// Default gateway on the machine network.
    pub gateway: String,
    /// DNS servers (IP addresses).
    pub dns: Vec<String>,
    /// DNS search domains.
    #[serde(default)]
    pub dns_search: Vec<String>,
    /// NTP sources (host names or IP addresses): agent-config `additionalNTPSources`.
    #[serde(default)]
    pub ntp: Vec<String>,
    /// Named VLANs (machine, storage, backup, ...) that node interfaces refer to.
    #[serde(default)]
    pub vlans: Vec<VlanNetwork>,
}

/// `networks.cluster[]`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClusterNetwork {
    /// CIDR.
    pub cidr: String,
    /// Prefix length of each node's slice.
    pub host_prefix: u8,
}

/// `networks.vlans[]`: a VLAN and the subnet it carries.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct VlanNetwork {
    /// Name nodes use (`storage`).
    pub name: String,
    /// 802.1Q id, 1 to 4094.
    pub id: u16,
    /// Subnet on it.
    pub cidr: String,
    /// MTU, when not the default.
    #[serde(default)]
    pub mtu: Option<u32>,
}

/// `references`: what the rendered files need from outside the inventory.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct References {
    /// The pull secret (JSON auths), inlined into install-config.yaml at render time.
    pub pull_secret: SecretRef,
    /// The SSH public key for `core@` on every node.
    pub ssh_public_key: FileRef,
    /// The mirror registry's CA (PEM): `additionalTrustBundle`.
    #[serde(default, rename = "registryCA")]
    pub registry_ca: Option<FileRef>,
    /// A mirror record written by `bootstrap mirror` to the site's registry:
    /// `imageDigestSources` come from it, and `cluster.release.version` is looked up in it.
    #[serde(default)]
    pub mirror_record: Option<FileRef>,
}

/// A file, relative to the inventory directory unless absolute.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FileRef {
    /// The path.
    pub file: String,
}

/// A secret by reference: a file (relative to the inventory directory unless absolute) or an
/// environment variable; exactly one of the two.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SecretRef {
    /// A file holding the secret.
    #[serde(default)]
    pub file: Option<String>,
    /// An environment variable holding it.
    #[serde(default)]
    pub env: Option<String>,
}

/// `nodes.yaml`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeList {
    /// [`API_VERSION`].
    pub api_version: String,
    /// [`NODES_KIND`].
    pub kind: String,
    /// Node classes by name (`gpu-h200`): hardware expectations that nodes share
    /// (`nodes[].class`).
    #[serde(default)]
    pub classes: BTreeMap<String, NodeClass>,
    /// The nodes.
    pub nodes: Vec<Node>,
}

/// One node.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Node {
    /// Host name: a DNS label, unique.
    pub hostname: String,
    /// `master` (control plane), `worker` or `arbiter`.
    pub role: Role,
    /// Its BMC.
    pub bmc: Bmc,
    /// Where to install: a `/dev/disk/by-path/...` path or other hints.
    pub root_device: RootDevice,
    /// Physical NICs.
    pub nics: Vec<Nic>,
    /// Bonds over those NICs.
    #[serde(default)]
    pub bonds: Vec<Bond>,
    /// VLAN interfaces over a NIC or bond.
    #[serde(default)]
    pub vlans: Vec<VlanInterface>,
    /// Static addresses (`10.20.0.11/24`) on an interface (NIC, bond or VLAN interface name).
    pub addresses: Vec<Address>,
    /// Node labels (applied after install, e.g. `nvidia.com/gpu.present: "true"`).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Node taints (applied with the labels, e.g. `{key: nvidia.com/gpu, effect: NoSchedule}`).
    #[serde(default)]
    pub taints: Vec<Taint>,
    /// The node class (`classes` of nodes.yaml) whose expectations apply.
    #[serde(default)]
    pub class: Option<String>,
    /// The GPUs this node must have; overrides its class's.
    #[serde(default)]
    pub gpus: Option<Gpus>,
    /// The node's SSH host key(s), pinned (OpenSSH public key lines, `ssh-ed25519 AAAA...`);
    /// without them the first contact learns the key into `RUN/known_hosts`.
    #[serde(default)]
    pub host_keys: Vec<String>,
    /// Where the prep stage connects (an address or host name); default: the node's first
    /// address in a machine network, without its prefix.
    #[serde(default)]
    pub ssh_address: Option<String>,
}

impl Node {
    /// Its addresses' IPs (the `IP` of each `addresses[].ip: IP/PREFIX`), in order; one that
    /// does not parse is left out (validation names it).
    pub fn ips(&self) -> Vec<std::net::IpAddr> {
        self.addresses
            .iter()
            .filter_map(|a| crate::netaddr::parse_prefixed(&a.ip).ok().map(|(ip, _)| ip))
            .collect()
    }
}

/// `nodes[].taints[]`: a Kubernetes taint (core/v1 `Taint`, without `timeAdded`).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Taint {
    /// A label key (`nvidia.com/gpu`).
    pub key: String,
    /// A label value, or none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

/// A node's role, as agent-config.yaml names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Control plane.
    Master,
    /// Compute.
    Worker,
    /// Two-node arbiter.
    Arbiter,
}

/// `bmc`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Bmc {
    /// Redfish address: `https://HOST[:PORT]` or a full system URL
    /// (`https://10.30.0.11/redfish/v1/Systems/System.Embedded.1`).
    pub address: String,
    /// User name and password, by reference: a file `user:password`, or an environment
    /// variable holding it. Only a BMC without authentication (a lab emulator) has none.
    #[serde(default)]
    pub credentials: Option<SecretRef>,
    /// The BMC's CA (PEM), to verify its TLS certificate.
    #[serde(default)]
    pub ca: Option<FileRef>,
    /// Or its certificate's SHA-256 fingerprint (`sha256:AB:CD:...` or hex), pinned.
    #[serde(default)]
    pub fingerprint: Option<String>,
    /// The explicit opt-out: do not verify this BMC's certificate (shown in every status).
    #[serde(default, rename = "insecureSkipTLSVerify")]
    pub insecure_skip_tls_verify: bool,
    /// The system's UUID as its BMC reports it (`UUID` of the ComputerSystem): when given, the
    /// boot stage refuses a system with another one (the wrong server behind this BMC address).
    #[serde(default, rename = "systemUUID")]
    pub system_uuid: Option<String>,
    /// The BMC's vendor behaviour (`generic`, `dell`, `supermicro`, `ami`, `hpe`, `nvidia`),
    /// when the one detected from its `Manufacturer` is wrong; see `docs/redfish.md`.
    #[serde(default)]
    pub vendor: Option<crate::redfish::Vendor>,
}

/// `rootDevice`: agent-config `rootDeviceHints`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RootDevice {
    /// `/dev/disk/by-path/...` (stable across boots) or `/dev/sdX`; by-id is refused by the
    /// installer.
    #[serde(default)]
    pub device_name: Option<String>,
    /// SCSI host:channel:target:lun.
    #[serde(default)]
    pub hctl: Option<String>,
    /// Disk model.
    #[serde(default)]
    pub model: Option<String>,
    /// Disk vendor.
    #[serde(default)]
    pub vendor: Option<String>,
    /// Disk serial number.
    #[serde(default)]
    pub serial_number: Option<String>,
    /// Smallest size, GiB.
    #[serde(default)]
    pub min_size_gigabytes: Option<u32>,
    /// World wide name (no vendor extension).
    #[serde(default)]
    pub wwn: Option<String>,
    /// Rotational (false for SSD/NVMe).
    #[serde(default)]
    pub rotational: Option<bool>,
}

impl From<&RootDevice> for crate::installer::agent_config::RootDeviceHints {
    /// The one conversion: the inventory's hints are the installer's, without the WWN
    /// extensions the agent installer refuses.
    fn from(r: &RootDevice) -> Self {
        crate::installer::agent_config::RootDeviceHints {
            device_name: r.device_name.clone(),
            hctl: r.hctl.clone(),
            model: r.model.clone(),
            vendor: r.vendor.clone(),
            serial_number: r.serial_number.clone(),
            min_size_gigabytes: r.min_size_gigabytes.map(i64::from),
            wwn: r.wwn.clone(),
            wwn_with_extension: None,
            wwn_vendor_extension: None,
            rotational: r.rotational,
        }
    }
}

/// `nics[]`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Nic {
    /// Kernel name (`ens1f0`).
    pub name: String,
    /// MAC address (any case; compared case-insensitively).
    pub mac: String,
    /// MTU, when not the default.
    #[serde(default)]
    pub mtu: Option<u32>,
    /// The kernel driver that must drive it (`mlx5_core`, `ice`), checked by the prep stage.
    #[serde(default)]
    pub driver: Option<String>,
}

/// `bonds[]`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Bond {
    /// Name (`bond0`).
    pub name: String,
    /// NMState bond mode (`802.3ad`, `active-backup`, ...).
    pub mode: String,
    /// Member NIC names.
    pub members: Vec<String>,
    /// MTU, when not the default.
    #[serde(default)]
    pub mtu: Option<u32>,
}

/// `vlans[]`: a VLAN interface on a node.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct VlanInterface {
    /// The site VLAN it carries (`networks.vlans[].name`).
    pub network: String,
    /// The NIC or bond it sits on.
    pub base: String,
    /// Interface name; default `<base>.<id>`.
    #[serde(default)]
    pub name: Option<String>,
}

/// `addresses[]`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Address {
    /// Interface name (a NIC, bond, or VLAN interface).
    pub interface: String,
    /// `IP/prefix`.
    pub ip: String,
}

/// `classes.NAME` of nodes.yaml: what every node of the class must have.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeClass {
    /// The GPUs each node carries.
    #[serde(default)]
    pub gpus: Option<Gpus>,
    /// Kernel modules that must be loaded (`mlx5_core`, `nvidia`).
    #[serde(default)]
    pub expect_modules: Vec<String>,
    /// Kernel modules that must not be loaded.
    #[serde(default)]
    pub forbid_modules: Vec<String>,
}

/// `gpus`: a GPU model and how many a node carries.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Gpus {
    /// A known model ([`GPU_MODELS`]: `H200`, `H100`, ...) or any name with `pciId`.
    pub model: String,
    /// How many.
    pub count: u32,
    /// The PCI `vendor:device` id (`10de:2335`), for a model not in [`GPU_MODELS`] (or to
    /// override it).
    #[serde(default)]
    pub pci_id: Option<String>,
    /// The PCI addresses they sit at (`0000:18:00.0`), when known: a missing GPU is then named.
    #[serde(default)]
    pub addresses: Vec<String>,
}

/// GPU models known by name, with their PCI `vendor:device` id (REFERENCE section 9).
pub const GPU_MODELS: [(&str, &str); 5] = [
    ("H200", "10de:2335"),
    ("H100", "10de:2330"),
    ("A100", "10de:20b2"),
    ("L40S", "10de:26b9"),
    ("L40", "10de:26b5"),
];

/// The PCI `vendor:device` id of a known GPU model (case-insensitive), or None.
pub fn gpu_pci_id(model: &str) -> Option<&'static str> {
    GPU_MODELS
        .iter()
        .find(|(m, _)| m.eq_ignore_ascii_case(model))
        .map(|(_, id)| *id)
}

impl Gpus {
    /// The `vendor:device` id to count: `pciId` when given, else the model's.
    pub fn pci_id(&self) -> Option<String> {
        self.pci_id
            .clone()
            .or_else(|| gpu_pci_id(&self.model).map(str::to_string))
            .map(|id| id.to_ascii_lowercase())
    }
}

/// `prep` of site.yaml: how the prep stage reaches the nodes and what it runs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Prep {
    /// The SSH connection.
    #[serde(default)]
    pub ssh: PrepSsh,
    /// Playbooks run after the hardware checks, in order (relative to the inventory
    /// directory unless absolute).
    #[serde(default)]
    pub playbooks: Vec<String>,
    /// How many nodes are worked on at once (default 10).
    #[serde(default)]
    pub forks: Option<u32>,
    /// The largest clock difference to this machine a node may have (default `2s`).
    #[serde(default)]
    pub max_clock_skew: Option<String>,
}

/// `prep.ssh`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PrepSsh {
    /// The login user (default `core`).
    #[serde(default)]
    pub user: Option<String>,
    /// The private key, by reference (a file; never read into logs). Or `agent: true`.
    #[serde(default)]
    pub private_key: Option<FileRef>,
    /// Authenticate with the keys of the running ssh-agent (`SSH_AUTH_SOCK`).
    #[serde(default)]
    pub agent: bool,
    /// The nodes' SSH port (default 22).
    #[serde(default)]
    pub port: Option<u16>,
    /// A jump host between this machine and the nodes.
    #[serde(default)]
    pub bastion: Option<Bastion>,
    /// How long a connection may take to open (default `10s`).
    #[serde(default)]
    pub connect_timeout: Option<String>,
    /// How long one command may run (default `5m`).
    #[serde(default)]
    pub command_timeout: Option<String>,
}

/// `prep.ssh.bastion`: the jump host.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Bastion {
    /// Its address or host name.
    pub address: String,
    /// Its SSH port (default 22).
    #[serde(default)]
    pub port: Option<u16>,
    /// The login user there (default: `prep.ssh.user`).
    #[serde(default)]
    pub user: Option<String>,
    /// Its host key(s), pinned (OpenSSH public key lines).
    #[serde(default)]
    pub host_keys: Vec<String>,
}

/// `prep.ssh.user`'s default.
pub const DEFAULT_SSH_USER: &str = "core";
/// `prep.forks`' default.
pub const DEFAULT_FORKS: u32 = 10;

/// A duration of the inventory (`10s`, `5m`, `500ms`), or its default when absent or invalid
/// (validation reports an invalid one).
fn duration_or(value: &Option<String>, default: std::time::Duration) -> std::time::Duration {
    value
        .as_deref()
        .and_then(|v| crate::output::parse_duration_ms(v).ok())
        .unwrap_or(default)
}

impl Prep {
    /// `forks`, default 10.
    pub fn forks(&self) -> u32 {
        self.forks.unwrap_or(DEFAULT_FORKS)
    }

    /// `maxClockSkew`, default 2 s.
    pub fn max_clock_skew(&self) -> std::time::Duration {
        duration_or(&self.max_clock_skew, std::time::Duration::from_secs(2))
    }
}

impl PrepSsh {
    /// `user`, default `core`.
    pub fn user(&self) -> &str {
        self.user.as_deref().unwrap_or(DEFAULT_SSH_USER)
    }

    /// `port`, default 22.
    pub fn port(&self) -> u16 {
        self.port.unwrap_or(22)
    }

    /// `connectTimeout`, default 10 s.
    pub fn connect_timeout(&self) -> std::time::Duration {
        duration_or(&self.connect_timeout, std::time::Duration::from_secs(10))
    }

    /// `commandTimeout`, default 5 min.
    pub fn command_timeout(&self) -> std::time::Duration {
        duration_or(&self.command_timeout, std::time::Duration::from_secs(300))
    }
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.chars().all(|c| c.is_ascii_hexdigit())
}

/// A PCI `vendor:device` id: `10de:2335`.
pub fn is_pci_id(s: &str) -> bool {
    s.split_once(':')
        .is_some_and(|(v, d)| is_hex(v, 4) && is_hex(d, 4))
}

/// A PCI address `DOMAIN:BUS:DEVICE.FUNCTION`: `0000:18:00.0`.
pub fn is_pci_address(s: &str) -> bool {
    let parts: Vec<&str> = s.split([':', '.']).collect();
    matches!(parts.as_slice(), [d, b, dev, f]
        if is_hex(d, 4) && is_hex(b, 2) && is_hex(dev, 2) && matches!(*f, "0" | "1" | "2" | "3" | "4" | "5" | "6" | "7"))
}

/// `gitops` of site.yaml: what `bootstrap gitops init` scaffolds and the handoff stage hands
/// over to Argo CD (OpenShift GitOps).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Gitops {
    /// The site's GitOps repository, as Argo CD reaches it.
    pub repository: GitRepository,
    /// OpenShift GitOps itself: its channel and the mirrored CatalogSource it comes from.
    #[serde(default)]
    pub operator: OperatorChoice,
    /// The platform's operators, by package name (`nfd`, `gpu-operator-certified`,
    /// `nvidia-network-operator`, `rhods-operator`, ...): which mirrored CatalogSource and
    /// channel each comes from, where the defaults do not fit.
    #[serde(default)]
    pub operators: BTreeMap<String, OperatorChoice>,
    /// The tenants: one overlay of the standard tenant each.
    #[serde(default)]
    pub tenants: Vec<Tenant>,
    /// How long the hand-off waits for the operator, and for the root Application and every
    /// child to be Synced and Healthy (default `30m`).
    #[serde(default)]
    pub wait_timeout: Option<String>,
}

/// `gitops.repository`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GitRepository {
    /// The clone URL (`https://`, `ssh://`, `git@host:path`, or `git://` for a lab).
    pub url: String,
    /// The branch, tag or commit Argo CD follows (default `HEAD`).
    #[serde(default)]
    pub revision: Option<String>,
    /// The HTTPS user name, with `password`.
    #[serde(default)]
    pub username: Option<String>,
    /// The HTTPS password or token, by reference.
    #[serde(default)]
    pub password: Option<SecretRef>,
    /// The SSH private key, by reference (for `ssh://` and `git@` URLs).
    #[serde(default)]
    pub ssh_private_key: Option<SecretRef>,
    /// The Git server's CA (PEM), for a private CA: put into `argocd-tls-certs-cm`.
    #[serde(default)]
    pub ca: Option<FileRef>,
    /// The Git server's SSH host keys (known_hosts lines), for SSH URLs.
    #[serde(default)]
    pub known_hosts: Vec<String>,
    /// Let Argo CD skip TLS verification for this repository (explicit; default false).
    #[serde(default)]
    pub insecure_skip_tls_verify: bool,
}

/// An operator's source: the mirrored CatalogSource (its name in `openshift-marketplace`)
/// and the channel.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct OperatorChoice {
    /// The CatalogSource's name (default: the mirrored catalog that carries the package).
    #[serde(default)]
    pub catalog: Option<String>,
    /// The channel (default: the package's default channel).
    #[serde(default)]
    pub channel: Option<String>,
}

/// `gitops.tenants[]`: one team's share of the platform.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Tenant {
    /// The tenant's name: its namespace and its KAI queue.
    pub name: String,
    /// Directory groups and the role each gets in the namespace.
    #[serde(default)]
    pub groups: TenantGroups,
    /// The GPUs the tenant may request at once (`requests.nvidia.com/gpu` and the queue's
    /// quota).
    pub gpus: u32,
    /// The CPU quota (`requests.cpu`, Kubernetes quantity), default none.
    #[serde(default)]
    pub cpu: Option<String>,
    /// The memory quota (`requests.memory`, Kubernetes quantity), default none.
    #[serde(default)]
    pub memory: Option<String>,
}

/// `gitops.tenants[].groups`: directory groups bound to the namespace's `admin`, `edit` and
/// `view` roles.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TenantGroups {
    /// Bound to `admin`.
    #[serde(default)]
    pub admin: Vec<String>,
    /// Bound to `edit`.
    #[serde(default)]
    pub edit: Vec<String>,
    /// Bound to `view`.
    #[serde(default)]
    pub view: Vec<String>,
}

impl Gitops {
    /// `waitTimeout`, default 30 min.
    pub fn wait_timeout(&self) -> std::time::Duration {
        duration_or(&self.wait_timeout, std::time::Duration::from_secs(30 * 60))
    }
}

impl GitRepository {
    /// `revision`, default `HEAD`.
    pub fn revision(&self) -> &str {
        self.revision.as_deref().unwrap_or("HEAD")
    }
}
