//! Every inventory rule, valid and invalid: a base inventory (inventory/example-site or
//! inventory/lab) copied to a temporary directory, one textual mutation per case, then
//! `inventory::load` + `inventory::validate`. Each invalid case names the file and field path
//! the problem must carry (with a line and column) and words its message must contain.

use crate::support;

use bootstrap::inventory::{self, InventoryFile};
use std::path::{Path, PathBuf};
use support::run::{copy_dir, shipped_inventory};

#[derive(Clone, Copy)]
enum Base {
    Example,
    Lab,
}

/// One mutation: in `file` of `base`, replace the first `from` with `to`.
struct Case {
    name: &'static str,
    base: Base,
    file: InventoryFile,
    from: &'static str,
    to: &'static str,
    /// The problem expected: field path and words of the message; None for a valid mutation.
    expect: Option<(&'static str, &'static str)>,
}

const S: InventoryFile = InventoryFile::Site;
const N: InventoryFile = InventoryFile::Nodes;
const E: Base = Base::Example;
const L: Base = Base::Lab;

fn case(
    name: &'static str,
    base: Base,
    file: InventoryFile,
    from: &'static str,
    to: &'static str,
    expect: Option<(&'static str, &'static str)>,
) -> Case {
    Case {
        name,
        base,
        file,
        from,
        to,
        expect,
    }
}

/// The mutated inventory's directory.
fn mutated(c: &Case, tmp: &Path) -> PathBuf {
    let src = match c.base {
        Base::Example => shipped_inventory("example-site"),
        Base::Lab => shipped_inventory("lab"),
    };
    let dir = tmp.join(c.name);
    copy_dir(&src, &dir);
    let path = dir.join(c.file.name());
    let text = fs_err::read_to_string(&path).unwrap();
    assert!(
        text.contains(c.from),
        "{}: {:?} not in {}",
        c.name,
        c.from,
        c.file
    );
    fs_err::write(&path, text.replacen(c.from, c.to, 1)).unwrap();
    dir
}

fn cases() -> Vec<Case> {
    let by_digest = "    image: quay.io/openshift-release-dev/ocp-release@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    vec![
        // cluster identity and release
        case("cluster-name", E, S, "name: gpu-prod", "name: GPU_prod", Some(("cluster.name", "not a DNS label"))),
        case("base-domain", E, S, "baseDomain: ai.example.com", "baseDomain: ai..example.com", Some(("cluster.baseDomain", "not a DNS domain"))),
        case("release-both", E, S, "    version: 4.18.3", "    version: 4.18.3\n    image: quay.io/a/b@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", Some(("cluster.release", "exactly one of image"))),
        case("release-by-tag", E, S, "    version: 4.18.3", "    image: quay.io/openshift-release-dev/ocp-release:4.18.3-x86_64", Some(("cluster.release.image", "not by digest"))),
        case("release-by-digest", E, S, "    version: 4.18.3", by_digest, None),
        case("release-version-not-mirrored", E, S, "version: 4.18.3", "version: 4.18.9", Some(("cluster.release.version", "not in the mirror record"))),
        case("release-version-malformed", E, S, "version: 4.18.3", "version: latest", Some(("cluster.release.version", "MAJOR.MINOR.PATCH"))),
        case("release-version-without-record", E, S, "  mirrorRecord:\n    file: mirror/mirror-record.json\n", "", Some(("cluster.release.version", "set references.mirrorRecord"))),
        case("trust-bundle-policy", E, S, "  rendezvousIP: 10.20.0.11\n", "  rendezvousIP: 10.20.0.11\n  trustBundlePolicy: Sometimes\n", Some(("cluster.trustBundlePolicy", "expected one of Proxyonly, Always"))),
        case("trust-bundle-policy-ok", E, S, "  rendezvousIP: 10.20.0.11\n", "  rendezvousIP: 10.20.0.11\n  trustBundlePolicy: Proxyonly\n", None),
        // VIPs
        case("vips-required", E, S, "apiVIPs: [10.20.0.5]", "apiVIPs: []", Some(("cluster.apiVIPs", "required on bare metal"))),
        case("vip-not-ip", E, S, "apiVIPs: [10.20.0.5]", "apiVIPs: [10.20.0.500]", Some(("cluster.apiVIPs[0]", "not an IP address"))),
        case("vip-outside-machine", E, S, "apiVIPs: [10.20.0.5]", "apiVIPs: [10.21.0.5]", Some(("cluster.apiVIPs[0]", "not in a machine network"))),
        case("vip-used-by-node", E, S, "ingressVIPs: [10.20.0.6]", "ingressVIPs: [10.20.0.12]", Some(("cluster.ingressVIPs[0]", "address of cp-1"))),
        case("vip-api-equals-ingress", E, S, "ingressVIPs: [10.20.0.6]", "ingressVIPs: [10.20.0.5]", Some(("cluster.ingressVIPs[0]", "also an API VIP"))),
        case("vip-too-many", E, S, "apiVIPs: [10.20.0.5]", "apiVIPs: [10.20.0.5, 10.20.0.7, 10.20.0.8]", Some(("cluster.apiVIPs[2]", "at most two"))),
        // rendezvous
        case("rendezvous-not-ip", E, S, "rendezvousIP: 10.20.0.11", "rendezvousIP: cp-0", Some(("cluster.rendezvousIP", "not an IP address"))),
        case("rendezvous-worker", E, S, "rendezvousIP: 10.20.0.11", "rendezvousIP: 10.20.0.21", Some(("cluster.rendezvousIP", "worker gpu-00"))),
        case("rendezvous-unknown", E, S, "rendezvousIP: 10.20.0.11", "rendezvousIP: 10.20.0.99", Some(("cluster.rendezvousIP", "no node's static address"))),
        case("rendezvous-off-machine-network", E, S, "rendezvousIP: 10.20.0.11", "rendezvousIP: 10.30.0.11", Some(("cluster.rendezvousIP", "outside the machine network"))),
        case("rendezvous-other-master", E, S, "rendezvousIP: 10.20.0.11", "rendezvousIP: 10.20.0.13", None),
        // networks
        case("ntp", E, S, "ntp: [ntp1.ai.example.com, 10.20.0.4]", "ntp: [ntp_1!]", Some(("networks.ntp[0]", "neither a domain name nor an IP"))),
        case("machine-host-bits", E, S, "machine: [10.20.0.0/24]", "machine: [10.20.0.1/24]", Some(("networks.machine[0]", "host bits"))),
        case("machine-required", E, S, "machine: [10.20.0.0/24]", "machine: []", Some(("networks.machine", "at least one CIDR"))),
        case("service-overlaps-machine", E, S, "service: [172.30.0.0/16]", "service: [10.20.0.0/16]", Some(("networks.service[0]", "overlaps networks.machine[0]"))),
        case("cluster-overlaps-machine", E, S, "cidr: 10.128.0.0/14", "cidr: 10.20.0.0/14", Some(("networks.cluster[0].cidr", "overlaps networks.machine[0]"))),
        case("service-overlaps-cluster", E, S, "service: [172.30.0.0/16]", "service: [10.128.0.0/16]", Some(("networks.service[0]", "overlaps networks.cluster[0].cidr"))),
        case("vlan-overlaps-service", E, S, "cidr: 10.40.0.0/24", "cidr: 172.30.1.0/24", Some(("networks.vlans[2].cidr", "overlaps networks.service[0]"))),
        case("host-prefix-range", E, S, "hostPrefix: 23", "hostPrefix: 12", Some(("networks.cluster[0].hostPrefix", "between the network's prefix"))),
        case("host-prefix-slices", E, S, "cidr: 10.128.0.0/14\n    hostPrefix: 23", "cidr: 10.128.0.0/22\n    hostPrefix: 23", Some(("networks.cluster[0].hostPrefix", "node slices"))),
        case("one-service-network-per-family", E, S, "service: [172.30.0.0/16]", "service: [172.30.0.0/16, 172.31.0.0/16]", Some(("networks.service[1]", "one network per IP family"))),
        case("gateway-outside", E, S, "gateway: 10.20.0.1", "gateway: 10.21.0.1", Some(("networks.gateway", "not in a machine network"))),
        case("gateway-not-ip", E, S, "gateway: 10.20.0.1", "gateway: router", Some(("networks.gateway", "not an IP address"))),
        case("dns-not-ip", E, S, "dns: [10.20.0.2, 10.20.0.3]", "dns: [dns1]", Some(("networks.dns[0]", "not an IP address"))),
        case("dns-required", E, S, "dns: [10.20.0.2, 10.20.0.3]", "dns: []", Some(("networks.dns", "at least one DNS server"))),
        case("dns-search", E, S, "dnsSearch: [ai.example.com]", "dnsSearch: [ai_example]", Some(("networks.dnsSearch[0]", "not a DNS name"))),
        case("vlan-id", E, S, "id: 130", "id: 5000", Some(("networks.vlans[1].id", "1 to 4094"))),
        case("vlan-id-duplicate", E, S, "id: 140", "id: 130", Some(("networks.vlans[2].id", "already"))),
        case("vlan-name-duplicate", E, S, "  - name: backup", "  - name: storage", Some(("networks.vlans[2].name", "already the name of networks.vlans[1]"))),
        case("vlan-mtu", E, S, "    mtu: 9000", "    mtu: 100", Some(("networks.vlans[1].mtu", "out of range"))),
        // references
        case("pull-secret-both", E, S, "    file: secrets/pull-secret.example.json", "    file: secrets/pull-secret.example.json\n    env: PULL_SECRET", Some(("references.pullSecret", "exactly one of file"))),
        case("pull-secret-env", E, S, "    file: secrets/pull-secret.example.json", "    env: PULL_SECRET", None),
        case("pull-secret-missing", E, S, "pull-secret.example.json", "missing.json", Some(("references.pullSecret.file", "secrets/missing.json cannot be read"))),
        case("ssh-key-not-a-key", E, S, "file: secrets/id_ed25519.pub", "file: secrets/registry-ca.example.pem", Some(("references.sshPublicKey.file", "is not an SSH public key"))),
        case("ssh-key-missing", E, S, "file: secrets/id_ed25519.pub", "file: secrets/id_rsa.pub", Some(("references.sshPublicKey.file", "id_rsa.pub cannot be read"))),
        case("registry-ca-not-pem", E, S, "file: secrets/registry-ca.example.pem", "file: secrets/id_ed25519.pub", Some(("references.registryCA.file", "no PEM certificate"))),
        case("mirror-record-missing", E, S, "mirror/mirror-record.json", "mirror/nope.json", Some(("references.mirrorRecord.file", "nope.json cannot be read"))),
        case("mirror-record-not-a-record", E, S, "mirror/mirror-record.json", "secrets/pull-secret.example.json", Some(("references.mirrorRecord.file", "not a bootstrap mirror record"))),
        // nodes: names and roles
        case("hostname", E, N, "hostname: gpu-03", "hostname: GPU_03", Some(("nodes[6].hostname", "not a DNS label"))),
        case("hostname-duplicate", E, N, "hostname: gpu-03", "hostname: gpu-02", Some(("nodes[6].hostname", "already nodes[5]'s hostname"))),
        case("control-plane-size", E, N, "hostname: cp-2\n  role: master", "hostname: cp-2\n  role: worker", Some(("nodes", "controlPlane.replicas must be 1 (single node), 3, 4 or 5, found 2"))),
        case("single-node-with-workers", L, N, "hostname: master-1\n  role: master", "hostname: master-1\n  role: worker", Some(("nodes", "control-plane"))),
        case("arbiter", E, N, "hostname: cp-2\n  role: master", "hostname: cp-2\n  role: arbiter", Some(("nodes[2].role", "arbiter"))),
        // BMC
        case("bmc-http", E, N, "address: https://10.10.0.11", "address: http://10.10.0.11", Some(("nodes[0].bmc.address", "plain HTTP"))),
        case("bmc-not-redfish", E, N, "address: https://10.10.0.11", "address: ipmi://10.10.0.11", Some(("nodes[0].bmc.address", "not a Redfish address"))),
        case("bmc-credentials-in-url", E, N, "address: https://10.10.0.11", "address: https://root:calvin@10.10.0.11", Some(("nodes[0].bmc.address", "never in the address"))),
        case("bmc-duplicate", E, N, "https://10.10.0.12/", "https://10.10.0.11/", Some(("nodes[1].bmc.address", "already nodes[0]'s BMC"))),
        case("bmc-credentials-both", E, N, "      file: secrets/bmc-control-plane.example", "      file: secrets/bmc-control-plane.example\n      env: BMC", Some(("nodes[0].bmc.credentials", "exactly one of file"))),
        case("bmc-credentials-missing-file", E, N, "bmc-control-plane.example", "bmc-nope", Some(("nodes[0].bmc.credentials.file", "bmc-nope cannot be read"))),
        case("bmc-credentials-env-name", E, N, "env: BMC_GPU_CREDENTIALS", "env: 1BAD-NAME", Some(("nodes[3].bmc.credentials.env", "not an environment variable name"))),
        case("bmc-ca-and-fingerprint", E, N, "      file: secrets/idrac-ca.example.pem", "      file: secrets/idrac-ca.example.pem\n    fingerprint: sha256:AB", Some(("nodes[0].bmc", "not both"))),
        case("bmc-fingerprint-malformed", E, N, "    ca:\n      file: secrets/idrac-ca.example.pem", "    fingerprint: sha256:AB:CD", Some(("nodes[0].bmc.fingerprint", "not a SHA-256 fingerprint"))),
        case("bmc-fingerprint", E, N, "    ca:\n      file: secrets/idrac-ca.example.pem", "    fingerprint: sha256:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF", None),
        case("bmc-system-trust", E, N, "    ca:\n      file: secrets/idrac-ca.example.pem\n", "", None),
        case("bmc-ca-missing", E, N, "idrac-ca.example.pem", "idrac-nope.pem", Some(("nodes[0].bmc.ca.file", "idrac-nope.pem cannot be read"))),
        // root device
        case("device-by-id", E, N, "deviceName: /dev/disk/by-path/pci-0000:4a:00.0-nvme-1", "deviceName: /dev/disk/by-id/nvme-Dell_Ent_NVMe", Some(("nodes[0].rootDevice.deviceName", "by-id/ path, which the installer refuses"))),
        case("device-name-form", E, N, "deviceName: /dev/disk/by-path/pci-0000:4a:00.0-nvme-1", "deviceName: sda", Some(("nodes[0].rootDevice.deviceName", "is not a /dev/ path"))),
        case("device-dev-x", E, N, "deviceName: /dev/disk/by-path/pci-0000:4a:00.0-nvme-1", "deviceName: /dev/nvme0n1", None),
        case("root-device-no-hint", E, N, "  rootDevice:\n    deviceName: /dev/disk/by-path/pci-0000:4a:00.0-nvme-1", "  rootDevice: {}", Some(("nodes[0].rootDevice", "at least one hint"))),
        case("wwn-value", E, N, "    deviceName: /dev/disk/by-path/pci-0000:4a:00.0-nvme-1", "    wwn: 0x5000c500a1b2c3d40x0001", Some(("nodes[0].rootDevice.wwn", "without a vendor extension"))),
        case("wwn-ok", E, N, "    deviceName: /dev/disk/by-path/pci-0000:4a:00.0-nvme-1", "    wwn: 0x5000c500a1b2c3d4", None),
        case("hctl", E, N, "    deviceName: /dev/disk/by-path/pci-0000:4a:00.0-nvme-1", "    hctl: 1:0:0", Some(("nodes[0].rootDevice.hctl", "host:channel:target:lun"))),
        case("min-size-zero", E, N, "    deviceName: /dev/disk/by-path/pci-0000:4a:00.0-nvme-1", "    minSizeGigabytes: 0", Some(("nodes[0].rootDevice.minSizeGigabytes", "matches every disk"))),
        // NICs, bonds, VLANs
        case("no-nics", L, N, "  nics:\n  - name: enp1s0\n    mac: aa:bb:cc:00:00:01\n", "  nics: []\n", Some(("nodes[0].nics", "at least one NIC"))),
        case("mac-invalid", E, N, "mac: b8:3f:d2:20:00:00", "mac: b8:3f:d2:20:00", Some(("nodes[0].nics[0].mac", "not a MAC address"))),
        case("mac-duplicate-any-case", E, N, "mac: b8:3f:d2:20:01:00", "mac: B8-3F-D2-20-00-00", Some(("nodes[1].nics[0].mac", "already the MAC of cp-0"))),
        case("nic-name", L, N, "  - name: enp1s0", "  - name: enp1s0-much-too-long", Some(("nodes[0].nics[0].name", "not an interface name"))),
        case("nic-mtu", E, N, "    mtu: 9000", "    mtu: 10000", Some(("nodes[0].nics[0].mtu", "out of range"))),
        case("bond-member-missing", E, N, "members: [ens1f0np0, ens1f1np1]", "members: [ens1f0np0, ens9]", Some(("nodes[0].bonds[0].members[1]", "not a NIC of cp-0"))),
        case("bond-member-twice", E, N, "members: [ens1f0np0, ens1f1np1]", "members: [ens1f0np0, ens1f0np0]", Some(("nodes[0].bonds[0].members[1]", "already a member"))),
        case("bond-mode", E, N, "mode: 802.3ad", "mode: lacp", Some(("nodes[0].bonds[0].mode", "unknown bond mode"))),
        case("vlan-base-missing", E, N, "  - network: machine\n    base: bond0", "  - network: machine\n    base: bond9", Some(("nodes[0].vlans[0].base", "not a NIC or bond of cp-0"))),
        case("vlan-network-unknown", E, N, "  - network: backup", "  - network: backups", Some(("nodes[0].vlans[2].network", "not a VLAN of site.yaml networks.vlans"))),
        case("vlan-on-bond-member", E, N, "  - network: backup\n    base: bond0", "  - network: backup\n    base: ens1f0np0", Some(("nodes[0].vlans[2].base", "bond member"))),
        case("interface-name-duplicate", E, N, "  - network: backup\n    base: bond0", "  - network: backup\n    base: bond0\n    name: bond0.130", Some(("nodes[0].vlans[2].name", "already the name of"))),
        // addresses
        case("address-on-bond-member", E, N, "  - interface: bond0.140", "  - interface: ens1f0np0", Some(("nodes[0].addresses[2].interface", "no address of its own"))),
        case("address-interface-missing", E, N, "  - interface: bond0.140", "  - interface: eth7", Some(("nodes[0].addresses[2].interface", "not an interface of cp-0"))),
        case("address-outside-vlan", E, N, "ip: 10.30.0.11/24", "ip: 10.31.0.11/24", Some(("nodes[0].addresses[1].ip", "not in VLAN storage's network"))),
        case("address-malformed", E, N, "ip: 10.30.0.11/24", "ip: 10.30.0.11", Some(("nodes[0].addresses[1].ip", "no prefix length"))),
        case("no-machine-address", E, N, "ip: 10.20.0.21/24", "ip: 10.40.0.99/24", Some(("nodes[3].addresses", "no address in a machine network"))),
        case("address-duplicate", E, N, "ip: 10.20.0.12/24", "ip: 10.20.0.11/24", Some(("nodes[1].addresses[0].ip", "already the address of cp-0"))),
        case("address-prefix", E, N, "ip: 10.20.0.12/24", "ip: 10.20.0.12/16", Some(("nodes[1].addresses[0].ip", "differs from the machine network"))),
        case("label-value", E, N, "nvidia.com/gpu.product: NVIDIA-H200", "nvidia.com/gpu.product: NVIDIA H200", Some(("nodes[3].labels.nvidia.com/gpu.product", "not a label value"))),
        case("label-key", E, N, "nvidia.com/gpu.product: NVIDIA-H200", "nvidia..com/gpu.product: NVIDIA-H200", Some(("nodes[3].labels.nvidia..com/gpu.product", "not a DNS name"))),
        case("taint-ok", E, N, "    node-role.kubernetes.io/gpu: \"\"\n", "    node-role.kubernetes.io/gpu: \"\"\n  taints:\n  - {key: nvidia.com/gpu, effect: NoSchedule}\n", None),
        case("taint-effect", E, N, "    node-role.kubernetes.io/gpu: \"\"\n", "    node-role.kubernetes.io/gpu: \"\"\n  taints:\n  - {key: nvidia.com/gpu, effect: NoScheduling}\n", Some(("nodes[3].taints[0].effect", "not a taint effect"))),
        case("taint-twice", E, N, "    node-role.kubernetes.io/gpu: \"\"\n", "    node-role.kubernetes.io/gpu: \"\"\n  taints:\n  - {key: nvidia.com/gpu, effect: NoSchedule}\n  - {key: nvidia.com/gpu, value: x, effect: NoSchedule}\n", Some(("nodes[3].taints[1]", "one taint per key and effect"))),
        // prep: hardware expectations, host keys, SSH
        case("gpu-model-unknown", E, N, "  role: worker\n", "  role: worker\n  gpus: {model: H300, count: 8}\n", Some(("nodes[3].gpus.model", "not a known GPU model (H200, H100, A100, L40S, L40)"))),
        case("gpu-model-by-pci-id", E, N, "  role: worker\n", "  role: worker\n  gpus: {model: B200, count: 8, pciId: 10de:2901}\n", None),
        case("gpu-class-unknown", E, N, "  role: worker\n", "  role: worker\n  class: xe9680\n", Some(("nodes[3].class", "not a class of nodes.yaml (classes: none"))),
        case("host-key-bad", E, N, "  role: worker\n", "  role: worker\n  hostKeys: [\"ssh-ed25519 AAAAnotakey\"]\n", Some(("nodes[3].hostKeys[0]", "not an OpenSSH public key"))),
        case("nic-driver", E, N, "    mac: b8:3f:d2:20:00:00\n", "    mac: b8:3f:d2:20:00:00\n    driver: mlx5 core\n", Some(("nodes[0].nics[0].driver", "not a kernel driver name"))),
        case("ssh-key-and-agent", E, S, "boot:\n", "prep:\n  ssh:\n    agent: true\n    privateKey: {file: secrets/id_ed25519.pub}\nboot:\n", Some(("prep.ssh", "not both"))),
        case("ssh-timeout", E, S, "boot:\n", "prep:\n  ssh:\n    agent: true\n    commandTimeout: 5 minutes\nboot:\n", Some(("prep.ssh.commandTimeout", "not a duration"))),
        case("prep-playbook-missing", E, S, "boot:\n", "prep:\n  playbooks: [playbooks/site.yml]\nboot:\n", Some(("prep.playbooks[0]", "site.yml cannot be read"))),
    ]
}

#[test]
fn the_shipped_inventories_are_valid() {
    for site in ["example-site", "lab"] {
        let inv =
            inventory::load(&shipped_inventory(site)).unwrap_or_else(|e| panic!("{site}:\n{e}"));
        let problems = inventory::validate(&inv);
        assert!(
            problems.is_empty(),
            "{site}:\n{}",
            inventory::render_inventory_problems(&inv.dir, &problems)
        );
    }
}

#[test]
fn every_rule_names_its_field_and_place() {
    let tmp = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for c in cases() {
        let dir = mutated(&c, tmp.path());
        let inv = match inventory::load(&dir) {
            Ok(inv) => inv,
            Err(e) => {
                failures.push(format!("{}: load failed: {e}", c.name));
                continue;
            }
        };
        let problems = inventory::validate(&inv);
        let rendered = inventory::render_inventory_problems(&dir, &problems);
        match c.expect {
            None if problems.is_empty() => {}
            None => failures.push(format!("{}: expected valid, got:\n{rendered}", c.name)),
            Some((path, words)) => {
                let hit = problems
                    .iter()
                    .find(|(f, p)| *f == c.file && p.path == path && p.message.contains(words));
                match hit {
                    Some((_, p)) if p.location.is_some() => {
                        // The rendered line is `DIR/FILE:LINE:COL: PATH: MESSAGE`.
                        let loc = p.location.unwrap();
                        let warning = if p.is_error() { "" } else { "warning: " };
                        let prefix = format!(
                            "{}/{}:{}:{}: {warning}{path}: ",
                            dir.display(),
                            c.file,
                            loc.line,
                            loc.column
                        );
                        if !rendered.lines().any(|l| l.starts_with(&prefix)) {
                            failures.push(format!(
                                "{}: no line starting {prefix:?} in\n{rendered}",
                                c.name
                            ));
                        }
                    }
                    Some(_) => failures.push(format!("{}: {path} has no location", c.name)),
                    None => failures.push(format!(
                        "{}: expected {}: {path}: ...{words}..., got:\n{rendered}",
                        c.name, c.file
                    )),
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Load-time rules: the strict schema and the header, each with file:line:col.
#[test]
fn unknown_keys_and_headers_are_refused_with_the_key_meant() {
    let tmp = tempfile::tempdir().unwrap();
    let load_cases = [
        case(
            "unknown-key",
            E,
            N,
            "  role: master",
            "  rol: master",
            Some((
                "nodes.yaml:10:3:",
                "unknown field 'rol' in nodes[0] (did you mean 'role'?)",
            )),
        ),
        case(
            "wwn-extension",
            E,
            N,
            "    deviceName: /dev/disk/by-path/pci-0000:4a:00.0-nvme-1",
            "    wwnWithExtension: 0x5000c500a1b2c3d4",
            Some(("nodes.yaml:18:5:", "forbids WWN extensions")),
        ),
        case(
            "bmc-password-inline",
            E,
            N,
            "    credentials:\n      file: secrets/bmc-control-plane.example",
            "    password: calvin\n    credentials:\n      file: secrets/bmc-control-plane.example",
            Some((
                "nodes.yaml:13:5:",
                "credentials are never written in the inventory",
            )),
        ),
        case(
            "bmc-vendor-unknown",
            E,
            N,
            "    credentials:\n      file: secrets/bmc-control-plane.example",
            "    vendor: lenovo\n    credentials:\n      file: secrets/bmc-control-plane.example",
            Some(("nodes.yaml:13:13:", "nodes[0].bmc.vendor")),
        ),
        case(
            "wrong-api-version",
            E,
            S,
            "apiVersion: bootstrap.openshift-ai.dev/v1alpha1",
            "apiVersion: v1",
            Some((
                "site.yaml:2:13: apiVersion:",
                "expected 'bootstrap.openshift-ai.dev/v1alpha1'",
            )),
        ),
        case(
            "wrong-kind",
            E,
            N,
            "kind: Nodes",
            "kind: Site",
            Some(("nodes.yaml:6:7: kind:", "a Site belongs in site.yaml")),
        ),
        case(
            "wrong-type",
            E,
            S,
            "hostPrefix: 23",
            "hostPrefix: big",
            Some((
                "site.yaml:18:17: networks.cluster[0].hostPrefix:",
                "expected a whole number",
            )),
        ),
        case(
            "missing-field",
            E,
            S,
            "  gateway: 10.20.0.1\n",
            "",
            Some(("site.yaml:", "missing required field 'gateway' in networks")),
        ),
    ];
    let mut failures = Vec::new();
    for c in load_cases {
        let dir = mutated(&c, tmp.path());
        let (place, words) = c.expect.unwrap();
        match inventory::load(&dir) {
            Ok(_) => failures.push(format!("{}: loaded", c.name)),
            Err(e) => {
                let text = e.to_string();
                if !text.contains(place) || !text.contains(words) {
                    failures.push(format!(
                        "{}: expected {place} ...{words}..., got:\n{text}",
                        c.name
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Both files' problems come in one report.
#[test]
fn problems_of_both_files_are_reported_together() {
    let tmp = tempfile::tempdir().unwrap();
    let c = case("both", E, S, "  name: gpu-prod", "  nam: gpu-prod", None);
    let dir = mutated(&c, tmp.path());
    let nodes = dir.join("nodes.yaml");
    let text =
        fs_err::read_to_string(&nodes)
            .unwrap()
            .replacen("  role: master", "  rol: master", 1);
    fs_err::write(&nodes, text).unwrap();
    let e = inventory::load(&dir).unwrap_err();
    let files: Vec<InventoryFile> = e.problems().iter().map(|(f, _)| *f).collect();
    assert_eq!(
        files,
        vec![InventoryFile::Site, InventoryFile::Nodes],
        "{e}"
    );
}

/// Many mistakes at once: every one is reported in one run, not the first alone.
#[test]
fn every_problem_is_reported_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let c = case(
        "many",
        E,
        S,
        "apiVIPs: [10.20.0.5]",
        "apiVIPs: [10.21.0.5]",
        None,
    );
    let dir = mutated(&c, tmp.path());
    let site = dir.join("site.yaml");
    let text = fs_err::read_to_string(&site)
        .unwrap()
        .replacen("gateway: 10.20.0.1", "gateway: 10.21.0.1", 1)
        .replacen("name: gpu-prod", "name: GPU", 1);
    fs_err::write(&site, text).unwrap();
    let nodes = dir.join("nodes.yaml");
    let text = fs_err::read_to_string(&nodes)
        .unwrap()
        .replacen("mode: 802.3ad", "mode: lacp", 1);
    fs_err::write(&nodes, text).unwrap();
    let inv = inventory::load(&dir).unwrap();
    let paths: Vec<String> = inventory::validate(&inv)
        .into_iter()
        .map(|(_, p)| p.path)
        .collect();
    for want in [
        "cluster.name",
        "cluster.apiVIPs[0]",
        "networks.gateway",
        "nodes[0].bonds[0].mode",
    ] {
        assert!(
            paths.iter().any(|p| p == want),
            "{want} missing from {paths:?}"
        );
    }
}

/// `inv` (a copy of a shipped inventory) with `rel` given `mode`.
fn chmod(inv: &Path, rel: &str, mode: u32) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = inv.join(rel);
    fs_err::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

/// The one problem of the inventory at `dir`, rendered as the CLI prints it, and whether it
/// is an error; panics unless there is exactly one, at `file` `path` with a line and column.
fn only_problem(dir: &Path, file: InventoryFile, path: &str) -> (String, bool) {
    let inv = inventory::load(dir).unwrap_or_else(|e| panic!("{e}"));
    let problems = inventory::validate(&inv);
    let rendered = inventory::render_inventory_problems(dir, &problems);
    assert_eq!(problems.len(), 1, "{rendered}");
    let (f, p) = &problems[0];
    assert_eq!((*f, p.path.as_str()), (file, path), "{rendered}");
    let loc = p.location.expect("a line and column");
    let at = format!("{}/{file}:{}:{}: ", dir.display(), loc.line, loc.column);
    assert!(rendered.starts_with(&at), "{rendered}");
    (rendered, p.is_error())
}

/// Issue 28 point 6: the SSH private key for prep, readable by others, is refused by
/// validation as OpenSSH refuses it at the first login (`sshkey_perm_ok`), naming the inventory
/// file, the field, the key file, its mode and the chmod that fixes it; then nothing is said.
#[test]
fn a_prep_private_key_others_can_read_is_refused_naming_its_field_and_chmod_600() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lab");
    copy_dir(&shipped_inventory("lab"), &dir);
    let key = chmod(&dir, "secrets/id_ed25519", 0o644);
    let (line, error) = only_problem(&dir, InventoryFile::Site, "prep.ssh.privateKey.file");
    assert!(error, "{line}");
    let key = key.display();
    for words in [
        format!(
            "prep.ssh.privateKey.file: SSH key {key} is readable by group or others (mode 0644)"
        ),
        "OpenSSH refuses such a key".to_string(),
        format!("chmod 600 {key}"),
    ] {
        assert!(line.contains(&words), "{words:?} not in {line}");
    }
    chmod(&dir, "secrets/id_ed25519", 0o600);
    let inv = inventory::load(&dir).unwrap();
    assert!(inventory::validate(&inv).is_empty());
}

/// Issue 28 point 6: a Git sshPrivateKey is a private key too; group-readable (0640) is
/// refused.
#[test]
fn a_git_ssh_private_key_others_can_read_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lab");
    copy_dir(&shipped_inventory("lab"), &dir);
    fs_err::copy(
        dir.join("secrets/id_ed25519"),
        dir.join("secrets/git_ed25519"),
    )
    .unwrap();
    let key = chmod(&dir, "secrets/git_ed25519", 0o640);
    let host_key = fs_err::read_to_string(dir.join("secrets/id_ed25519.pub")).unwrap();
    let site = dir.join("site.yaml");
    let text = fs_err::read_to_string(&site).unwrap();
    let https = "    url: https://192.168.111.1:8443/site.git\n    username: lab\n    password:\n      file: secrets/git-password\n    ca:\n      file: secrets/git-ca.pem\n";
    let ssh = format!("    url: ssh://git@192.168.111.1/site.git\n    sshPrivateKey:\n      file: secrets/git_ed25519\n    knownHosts:\n    - '192.168.111.1 {}'\n", host_key.trim());
    assert!(text.contains(https));
    fs_err::write(&site, text.replacen(https, &ssh, 1)).unwrap();
    let (line, error) = only_problem(
        &dir,
        InventoryFile::Site,
        "gitops.repository.sshPrivateKey.file",
    );
    assert!(error, "{line}");
    assert!(line.contains("(mode 0640)"), "{line}");
    let fix = format!("chmod 600 {}", key.display());
    assert!(line.contains(&fix), "{line}");
    // `bootstrap gitops handoff` does not validate: it refuses the key by the same rule before
    // the cluster is touched (there is no cluster here to touch).
    let o = support::run::bootstrap(&[
        "gitops",
        "handoff",
        "--inventory",
        dir.to_str().unwrap(),
        "--kubeconfig",
        tmp.path().join("no-kubeconfig").to_str().unwrap(),
        "--out",
        tmp.path().join("handoff").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("gitops.repository.sshPrivateKey.file: SSH key") && err.contains(&fix),
        "{err}"
    );
    assert!(
        err.contains("refused before the cluster was touched"),
        "{err}"
    );
}

/// Issue 28 point 6: any other secret (here the pull secret) readable by its group is a
/// warning, with the same naming and fix; the inventory is not refused. A file named by several
/// fields (every node's BMC credentials) is warned about once.
#[test]
fn a_pull_secret_its_group_can_read_is_a_warning_not_a_refusal() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("site");
    copy_dir(&shipped_inventory("example-site"), &dir);
    let secret = chmod(&dir, "secrets/pull-secret.example.json", 0o640);
    let (line, error) = only_problem(&dir, InventoryFile::Site, "references.pullSecret.file");
    assert!(!error, "{line}");
    assert!(
        line.contains(&format!(
            "warning: references.pullSecret.file: {} holds a secret and is readable by group or others (mode 0640): chmod 600 {}",
            secret.display(),
            secret.display()
        )),
        "{line}"
    );
    chmod(&dir, "secrets/pull-secret.example.json", 0o600);
    chmod(&dir, "secrets/bmc-control-plane.example", 0o644);
    let (line, error) = only_problem(&dir, InventoryFile::Nodes, "nodes[0].bmc.credentials.file");
    assert!(!error && line.contains("(mode 0644)"), "{line}");
}

/// Issue 28 point 6: a symlinked key is judged by the file it resolves to, as ssh's stat
/// judges it (the link's own mode, 0777, is not the key's).
#[test]
fn a_symlinked_private_key_is_judged_by_its_target() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lab");
    copy_dir(&shipped_inventory("lab"), &dir);
    let target = tmp.path().join("keys/id_ed25519");
    fs_err::create_dir_all(target.parent().unwrap()).unwrap();
    fs_err::rename(dir.join("secrets/id_ed25519"), &target).unwrap();
    std::os::unix::fs::symlink(&target, dir.join("secrets/id_ed25519")).unwrap();
    let inv = inventory::load(&dir).unwrap();
    assert!(inventory::validate(&inv).is_empty());
    chmod(tmp.path(), "keys/id_ed25519", 0o644);
    let (line, error) = only_problem(&dir, InventoryFile::Site, "prep.ssh.privateKey.file");
    assert!(error && line.contains("(mode 0644)"), "{line}");
}

/// Issue 28 point 6: the refusal comes before anything else happens, from every command that
/// reads the inventory. `bootstrap render` (text and `--output json`) writes nothing;
/// `bootstrap install`'s first stage, validate, fails and no later stage starts (boot, prep and
/// handoff come after it); `bootstrap prep`, which does not validate, stops before connecting
/// to any node, by the same rule.
#[test]
fn an_exposed_private_key_stops_render_install_and_prep_before_anything_happens() {
    use support::run::{bootstrap, failed, json};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lab");
    copy_dir(&shipped_inventory("lab"), &dir);
    let key = chmod(&dir, "secrets/id_ed25519", 0o604);
    let fix = format!("chmod 600 {}", key.display());
    let inv = dir.to_str().unwrap();
    for output in ["text", "json"] {
        let out = tmp.path().join(format!("out-{output}"));
        let o = bootstrap(&[
            "render",
            "--output",
            output,
            "--inventory",
            inv,
            "--out",
            out.to_str().unwrap(),
        ]);
        let err = failed(&o);
        assert!(
            err.contains("site.yaml:") && err.contains(": prep.ssh.privateKey.file: "),
            "{err}"
        );
        assert!(err.contains("(mode 0604)") && err.contains(&fix), "{err}");
        assert!(!out.exists(), "render wrote {}", out.display());
    }

    let run = tmp.path().join("run");
    let started = std::time::Instant::now();
    let err = failed(&bootstrap(&[
        "install",
        "--inventory",
        inv,
        "--run",
        run.to_str().unwrap(),
    ]));
    assert!(err.contains("logs/validate.log"), "{err}");
    let log = fs_err::read_to_string(run.join("logs/validate.log")).unwrap();
    assert!(
        log.contains("prep.ssh.privateKey.file: ") && log.contains(&fix),
        "{log}"
    );
    let state = json(&run.join("state.json"));
    let stages: Vec<(String, String)> = state["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["stage"].as_str().unwrap().into(),
                s["status"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(stages[0], ("validate".to_string(), "failed".to_string()));
    assert!(
        stages[1..].iter().all(|(_, status)| status == "pending"),
        "{stages:?}"
    );

    let prep_run = tmp.path().join("prep");
    let o = bootstrap(&[
        "prep",
        "--inventory",
        inv,
        "--run",
        prep_run.to_str().unwrap(),
    ]);
    let err = failed(&o);
    assert!(
        err.contains("prep.ssh.privateKey.file") && err.contains(&fix),
        "{err}"
    );
    assert!(
        o.stdout.is_empty(),
        "no node verdict: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    // The lab's nodes are not up: a connection attempt would take its 5 s connectTimeout.
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}
