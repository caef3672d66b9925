//! `bootstrap validate`: a valid install-config.yaml and agent-config.yaml pair passes, and each
//! rule, broken by one mutation of that pair, is reported as `file:line:col: path: message` on
//! the line the fix goes on. Valid variants next to the invalid ones pin that a rule does not
//! refuse what the installer accepts.

use crate::support;

use std::path::{Path, PathBuf};
use support::run::{bootstrap, failed, ok, validate_pair};

const INSTALL_CONFIG: &str = include_str!("../testdata/agent/install-config.yaml");
const AGENT_CONFIG: &str = include_str!("../testdata/agent/agent-config.yaml");

#[derive(Clone, Copy, Debug, PartialEq)]
enum File {
    Ic,
    Ac,
}

/// One mutation of the base pair and what it must produce.
struct Case {
    name: &'static str,
    ic: &'static [(&'static str, &'static str)],
    ac: &'static [(&'static str, &'static str)],
    /// The file and the start of the expected line after `file:`; `None`: the pair is valid.
    expect: Option<(File, &'static str)>,
    /// The expected line is a warning: the pair is still valid (exit 0).
    warning: bool,
}

fn mutate(base: &str, edits: &[(&str, &str)], case: &str) -> String {
    let mut text = base.to_string();
    for (from, to) in edits {
        assert_eq!(
            text.matches(from).count(),
            1,
            "case {case}: {from:?} must occur exactly once"
        );
        text = text.replacen(from, to, 1);
    }
    text
}

fn write_pair(dir: &Path, ic: &str, ac: &str) -> (PathBuf, PathBuf) {
    let (icp, acp) = (
        dir.join("install-config.yaml"),
        dir.join("agent-config.yaml"),
    );
    fs_err::write(&icp, ic).unwrap();
    fs_err::write(&acp, ac).unwrap();
    (icp, acp)
}

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

const fn bad(
    name: &'static str,
    ic: &'static [(&'static str, &'static str)],
    ac: &'static [(&'static str, &'static str)],
    file: File,
    line: &'static str,
) -> Case {
    Case {
        name,
        ic,
        ac,
        expect: Some((file, line)),
        warning: false,
    }
}

/// Valid for the installer, with a warning (exit 0) on the line given.
const fn warns(
    name: &'static str,
    ic: &'static [(&'static str, &'static str)],
    ac: &'static [(&'static str, &'static str)],
    file: File,
    line: &'static str,
) -> Case {
    Case {
        name,
        ic,
        ac,
        expect: Some((file, line)),
        warning: true,
    }
}

const fn good(
    name: &'static str,
    ic: &'static [(&'static str, &'static str)],
    ac: &'static [(&'static str, &'static str)],
) -> Case {
    Case {
        name,
        ic,
        ac,
        expect: None,
        warning: false,
    }
}

use File::{Ac, Ic};

const WORKER_NETWORK: &str = "    minSizeGigabytes: 200\n  networkConfig:\n    interfaces:\n    - name: eno1\n      type: ethernet\n      ipv4:\n        enabled: true\n        address:\n        - ip: 10.20.0.21\n          prefix-length: 24\n";

const CASES: &[Case] = &[
    // ---- install-config.yaml: header and schema
    bad("ic apiVersion", &[("apiVersion: v1", "apiVersion: v2")], &[], Ic, "1:13: apiVersion: expected 'v1', found 'v2'"),
    bad("ic unknown key with hint", &[("baseDomain:", "rendezvousIP: 10.20.0.11\nbaseDomain:")], &[], Ic, "2:1: unknown field 'rendezvousIP' at the top level: this key belongs in agent-config.yaml"),
    bad("ic other platform", &[("  baremetal:", "  vsphere:")], &[], Ic, "24:3: unknown field 'vsphere' in platform: bootstrap validates bare-metal agent installs"),
    warns("ic old VIP spelling", &[("    apiVIPs:\n    - 10.20.0.5", "    apiVIP: 10.20.0.5")], &[], Ic, "25:13: warning: platform.baremetal.apiVIP: is the deprecated single-VIP spelling; the installer reads it as apiVIPs"),
    // ---- names and secrets
    bad("ic metadata.name invalid", &[("  name: ai", "  name: AI_cluster")], &[], Ic, "4:9: metadata.name: 'AI_cluster' is not a valid cluster name"),
    bad("ic metadata.name missing", &[("metadata:\n  name: ai\n", "")], &[], Ic, "1:1: metadata.name: is missing"),
    bad("ic baseDomain invalid", &[("baseDomain: example.com", "baseDomain: example..com")], &[], Ic, "2:13: baseDomain: 'example..com' is not a DNS domain"),
    good("ic baseDomain trailing dot", &[("baseDomain: example.com", "baseDomain: example.com.")], &[]),
    bad("ic pullSecret not JSON", &[("pullSecret: '{\"auths\":{\"registry.example:8443\":{\"auth\":\"dXNlcjpwYXNz\"}}}'", "pullSecret: 'hunter2'")], &[], Ic, "29:13: pullSecret: is not JSON (line 1, column 1), so not a pull secret"),
    bad("ic pullSecret without auth", &[("{\"auth\":\"dXNlcjpwYXNz\"}", "{\"email\":\"a@b\"}")], &[], Ic, "29:13: pullSecret: is not a pull secret: the entry for 'registry.example:8443' has neither"),
    bad("ic sshKey invalid", &[("sshKey: ssh-ed25519 ", "sshKey: my-laptop-key ")], &[], Ic, "30:9: sshKey: 'my-laptop-key AAAAC3NzaC1lZDI1NTE5AAAAIF0TWqM8QrLMi4dZk3dTLklQgLz1oEZBLJw1Fynqh6lE user@host' is not an SSH public key: unknown key type"),
    bad("ic sshKey truncated", &[("Fynqh6lE user@host", "Fynq user@host")], &[], Ic, "30:9: sshKey: 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIF0TWqM8QrLMi4dZk3dTLklQgLz1oEZBLJw1Fynq user@host' is not an SSH public key: the key is"),
    bad("ic sshKey mistyped", &[("sshKey: ssh-ed25519 ", "sshKey: ssh-rsa ")], &[], Ic, "30:9: sshKey: 'ssh-rsa AAAAC3NzaC1lZDI1NTE5AAAAIF0TWqM8QrLMi4dZk3dTLklQgLz1oEZBLJw1Fynqh6lE user@host' is not an SSH public key: the type written, ssh-rsa, differs from the type inside the key, 'ssh-ed25519'"),
    bad("ic trust bundle policy", &[("Policy: Always", "Policy: always")], &[], Ic, "35:30: additionalTrustBundlePolicy: unknown value 'always' (write Always)"),
    good("ic trust bundle policy Proxyonly", &[("Policy: Always", "Policy: Proxyonly")], &[]),
    bad("ic trust bundle not PEM", &[("  -----BEGIN CERTIFICATE-----\n  MIIB2jCC", "  not a certificate\n  MIIB2jCC"), ("  -----END CERTIFICATE-----\n", "")], &[], Ic, "37:3: additionalTrustBundle: holds no PEM certificate"),
    bad("ic trust bundle cut short", &[("  oLPw12nMeFqBRLgCIQCPwa4RUxJGRweNhFMJOPoZXumnvOSAw32gifpx2S8+6Q==\n", "")], &[], Ic, "37:3: additionalTrustBundle: PEM block 1 is not a certificate: its body is not base64 DER"),
    // ---- machine pools
    bad("ic controlPlane.replicas 2", &[("replicas: 3", "replicas: 2")], &[], Ic, "7:13: controlPlane.replicas: must be 1 (single node), 3, 4 or 5, found 2"),
    good("ic controlPlane.replicas 5", &[("replicas: 3", "replicas: 5")], &[]),
    bad("ic controlPlane.name", &[("  name: master", "  name: control")], &[], Ic, "6:9: controlPlane.name: must be 'master', found 'control'"),
    bad("ic compute name", &[("- name: worker", "- name: gpu")], &[], Ic, "11:9: compute[0].name: must be 'worker' on bare metal, found 'gpu'"),
    bad("ic compute replicas negative", &[("replicas: 2", "replicas: -1")], &[], Ic, "12:13: compute[0].replicas: must be 0 or more, found -1"),
    bad("ic architecture", &[("  architecture: amd64\n  hyperthreading", "  architecture: x86_64\n  hyperthreading")], &[], Ic, "8:17: controlPlane.architecture: unknown architecture 'x86_64' (write amd64)"),
    bad("ic hyperthreading", &[("hyperthreading: Enabled", "hyperthreading: enabled")], &[], Ic, "9:19: controlPlane.hyperthreading: unknown value 'enabled' (write Enabled)"),
    // ---- networking
    bad("ic networkType", &[("networkType: OVNKubernetes", "networkType: OpenShiftSDN")], &[], Ic, "15:16: networking.networkType: must be OVNKubernetes, found 'OpenShiftSDN'"),
    bad("ic machineNetwork host bits", &[("cidr: 10.20.0.0/24", "cidr: 10.20.0.1/24")], &[], Ic, "17:11: networking.machineNetwork[0].cidr: is not a network: '10.20.0.1/24' has host bits set"),
    bad("ic hostPrefix", &[("hostPrefix: 23", "hostPrefix: 12")], &[], Ic, "20:17: networking.clusterNetwork[0].hostPrefix: must be from 14"),
    bad("ic service overlaps machine", &[("- 172.30.0.0/16", "- 10.20.0.0/16")], &[], Ic, "22:5: networking.serviceNetwork[0]: service network 10.20.0.0/16 overlaps the machine network 10.20.0.0/24"),
    bad("ic cluster overlaps machine", &[("cidr: 10.128.0.0/14", "cidr: 10.16.0.0/12")], &[], Ic, "19:11: networking.clusterNetwork[0].cidr: cluster network 10.16.0.0/12 overlaps the machine network 10.20.0.0/24"),
    bad("ic service overlaps cluster", &[("- 172.30.0.0/16", "- 10.128.0.0/16")], &[], Ic, "22:5: networking.serviceNetwork[0]: service network 10.128.0.0/16 overlaps the cluster network 10.128.0.0/14"),
    // ---- platform and VIPs
    bad("ic apiVIPs missing", &[("    apiVIPs:\n    - 10.20.0.5\n", "")], &[], Ic, "24:3: platform.baremetal.apiVIPs: is missing"),
    bad("ic ingressVIPs missing", &[("    ingressVIPs:\n    - 10.20.0.6\n", "")], &[], Ic, "24:3: platform.baremetal.ingressVIPs: is missing"),
    bad("ic VIP outside machine network", &[("- 10.20.0.5", "- 10.30.0.5")], &[], Ic, "26:7: platform.baremetal.apiVIPs[0]: 10.30.0.5 is not in a machine network (10.20.0.0/24)"),
    bad("ic VIP not an address", &[("- 10.20.0.6", "- ingress.example.com")], &[], Ic, "28:7: platform.baremetal.ingressVIPs[0]: 'ingress.example.com' is not an IP address"),
    bad("ic API VIP is ingress VIP", &[("- 10.20.0.6", "- 10.20.0.5")], &[], Ic, "28:7: platform.baremetal.ingressVIPs[0]: 10.20.0.5 is also the API VIP (platform.baremetal.apiVIPs[0])"),
    bad("ic platform missing", &[("platform:\n  baremetal:\n    apiVIPs:\n    - 10.20.0.5\n    ingressVIPs:\n    - 10.20.0.6\n", "")], &[], Ic, "1:1: platform: is missing"),
    bad("ic two platforms", &[("platform:\n", "platform:\n  none: {}\n")], &[], Ic, "23:1: platform: set exactly one of baremetal, none or external; found baremetal and none"),
    bad("ic single node on baremetal", &[("replicas: 3", "replicas: 1"), ("replicas: 2", "replicas: 0")], &[], Ic, "24:3: platform.baremetal: a single-node cluster (controlPlane.replicas: 1) needs platform none or external"),
    bad("ic single node with compute", &[("replicas: 3", "replicas: 1"), ("  baremetal:\n    apiVIPs:\n    - 10.20.0.5\n    ingressVIPs:\n    - 10.20.0.6\n", "  none: {}\n")], &[], Ic, "12:13: compute[0].replicas: must be 0 for a single-node cluster"),
    // ---- mirrors
    bad("ic digest source has a digest", &[("ocp-release\n", "ocp-release@sha256:0123\n")], &[], Ic, "32:11: imageDigestSources[0].source: 'quay.io/openshift-release-dev/ocp-release@sha256:0123' has a digest"),
    bad("ic digest mirror has a tag", &[("release-images\n", "release-images:latest\n")], &[], Ic, "34:5: imageDigestSources[0].mirrors[0]: 'registry.example:8443/openshift/release-images:latest' has a tag; give the repository only (registry.example:8443/openshift/release-images)"),
    good("ic imageContentSources alone", &[("imageDigestSources:", "imageContentSources:")], &[]),
    bad("ic both source kinds", &[("additionalTrustBundlePolicy", "imageContentSources:\n- source: quay.io/a/b\nadditionalTrustBundlePolicy")], &[], Ic, "35:1: imageContentSources: cannot be used together with imageDigestSources"),
    // ---- other settings
    bad("ic publish", &[("additionalTrustBundlePolicy", "publish: Mixed\nadditionalTrustBundlePolicy")], &[], Ic, "35:10: publish: unknown value 'Mixed'; expected one of External, Internal"),
    bad("ic capabilities", &[("additionalTrustBundlePolicy", "capabilities:\n  baselineCapabilitySet: v5\nadditionalTrustBundlePolicy")], &[], Ic, "36:26: capabilities.baselineCapabilitySet: unknown value 'v5'"),
    bad("ic proxy", &[("additionalTrustBundlePolicy", "proxy:\n  httpProxy: proxy.example:3128\nadditionalTrustBundlePolicy")], &[], Ic, "36:14: proxy.httpProxy: 'proxy.example:3128' is not a proxy URL"),
    // ---- today's installer: fields it knows are never refused
    good("ic bootstrapInPlace", &[("additionalTrustBundlePolicy", "bootstrapInPlace:\n  installationDisk: /dev/sda\nadditionalTrustBundlePolicy")], &[]),
    good("ic baremetal hosts with bmc", &[("    - 10.20.0.6\n", "    - 10.20.0.6\n    hosts:\n    - name: master-0\n      role: master\n      bootMACAddress: b8:3f:d2:4a:10:01\n      bmc:\n        address: redfish-virtualmedia://10.10.0.11/redfish/v1/Systems/1\n        username: root\n        password: calvin\n        disableCertificateVerification: true\n      rootDeviceHints:\n        deviceName: /dev/sda\n      bootMode: UEFI\n")], &[]),
    bad("ic baremetal host boot MAC", &[("    - 10.20.0.6\n", "    - 10.20.0.6\n    hosts:\n    - name: master-0\n      bootMACAddress: b8:3f:d2:4a:10\n")], &[], Ic, "31:23: platform.baremetal.hosts[0].bootMACAddress: 'b8:3f:d2:4a:10' is not a MAC address"),
    good("ic arbiter pool", &[("replicas: 3", "replicas: 2"), ("compute:", "arbiter:\n  name: arbiter\n  replicas: 1\ncompute:")], &[("hostname: master-2\n  role: master", "hostname: master-2\n  role: arbiter")]),
    bad("ic two masters without arbiter", &[("replicas: 3", "replicas: 2")], &[("hostname: master-2\n  role: master", "hostname: master-2\n  role: arbiter")], Ic, "7:13: controlPlane.replicas: must be 1 (single node), 3, 4 or 5, found 2 (2 only with an arbiter pool or fencing credentials)"),
    good("ic fencing", &[("replicas: 3", "replicas: 2"), ("  hyperthreading: Enabled\n", "  hyperthreading: Enabled\n  fencing:\n    credentials:\n    - hostName: master-0\n      username: root\n      password: calvin\n      address: redfish+https://10.10.0.11/redfish/v1/Systems/1\n      certificateVerification: Disabled\n")], &[("hostname: master-2\n  role: master", "hostname: master-2\n  role: worker")]),
    good("ic feature set and gates, capabilities, partitioning", &[("additionalTrustBundlePolicy", "featureSet: CustomNoUpgrade\nfeatureGates:\n- DualReplica=true\ncapabilities:\n  baselineCapabilitySet: v4.16\n  additionalEnabledCapabilities: [marketplace]\ncpuPartitioningMode: AllNodes\ncredentialsMode: Manual\nfips: false\nadditionalTrustBundlePolicy")], &[]),
    good("ic metadata namespace and labels", &[("  name: ai\n", "  name: ai\n  namespace: cluster0\n  labels:\n    site: a\n")], &[]),
    warns("ic key in another case", &[("    apiVIPs:", "    apivips:")], &[], Ic, "25:5: warning: platform.baremetal.apivips: 'apivips' is read as 'apiVIPs'"),
    bad("ic unknown key", &[("baseDomain:", "baseDomian: x\nbaseDomain:")], &[], Ic, "2:1: unknown field 'baseDomian' at the top level (did you mean 'baseDomain'?)"),
    good("ac host BMC and minimal ISO", &[], &[("rendezvousIP: 10.20.0.11\n", "rendezvousIP: 10.20.0.11\nminimalISO: true\n"), ("  role: worker\n", "  role: worker\n  BMC:\n    address: redfish-virtualmedia://10.10.0.21/redfish/v1/Systems/1\n    username: root\n    password: calvin\n")]),
    good("ac host bmc in lower case", &[], &[("  role: worker\n", "  role: worker\n  bmc:\n    address: redfish-virtualmedia://10.10.0.21/redfish/v1/Systems/1\n")]),
    // ---- agent-config.yaml: header and schema
    warns("ac old apiVersion", &[], &[("apiVersion: v1beta1", "apiVersion: v1alpha1")], Ac, "1:13: warning: apiVersion: v1alpha1 is the older AgentConfig version; the installer reads it as v1beta1"),
    bad("ac kind", &[], &[("kind: AgentConfig", "kind: InstallConfig")], Ac, "2:7: kind: expected 'AgentConfig', found 'InstallConfig'"),
    bad("ac unknown key", &[], &[("  rootDeviceHints:\n    deviceName: /dev/sda", "  rootDeviceHint:\n    deviceName: /dev/sda")], Ac, "16:3: unknown field 'rootDeviceHint' in hosts[0] (did you mean 'rootDeviceHints'?)"),
    // ---- top level
    bad("ac rendezvousIP not an IP", &[], &[("rendezvousIP: 10.20.0.11", "rendezvousIP: node0")], Ac, "5:15: rendezvousIP: 'node0' is not an IP address"),
    bad("ac NTP source", &[], &[("- ntp.example.com", "- ntp://ntp.example.com")], Ac, "7:3: additionalNTPSources[0]: 'ntp://ntp.example.com' is neither a domain name nor an IP address"),
    bad("ac bootArtifactsBaseURL", &[], &[("http://10.20.0.2:8080/artifacts", "10.20.0.2:8080/artifacts")], Ac, "9:23: bootArtifactsBaseURL: '10.20.0.2:8080/artifacts' is not a URL with a scheme and host"),
    // ---- hosts
    bad("ac no interfaces", &[], &[("  interfaces:\n  - name: eno1\n    macAddress: b8:3f:d2:4a:10:04\n", "")], Ac, "79:3: hosts[3].interfaces: is missing; each host needs at least one interface"),
    bad("ac MAC missing", &[], &[("    macAddress: b8:3f:d2:4a:10:04\n", "")], Ac, "82:5: hosts[3].interfaces[0].macAddress: is missing"),
    bad("ac MAC invalid", &[], &[("macAddress: b8:3f:d2:4a:10:04", "macAddress: b8:3f:d2:4a:10")], Ac, "83:17: hosts[3].interfaces[0].macAddress: 'b8:3f:d2:4a:10' is not a MAC address"),
    good("ac MAC upper case with dashes", &[], &[("macAddress: b8:3f:d2:4a:10:04", "macAddress: B8-3F-D2-4A-10-04")]),
    bad("ac MAC duplicate ignoring case", &[], &[("macAddress: b8:3f:d2:4a:10:02", "macAddress: B8:3F:D2:4A:10:01")], Ac, "39:17: hosts[1].interfaces[0].macAddress: 'B8:3F:D2:4A:10:01' is already the MAC address of hosts[0].interfaces[0].macAddress"),
    bad("ac deviceName by-id", &[], &[("deviceName: /dev/sda", "deviceName: /dev/disk/by-id/wwn-0x5000")], Ac, "17:17: hosts[0].rootDeviceHints.deviceName: '/dev/disk/by-id/wwn-0x5000' is a /dev/disk/by-id/ path"),
    bad("ac deviceName not /dev", &[], &[("deviceName: /dev/sda", "deviceName: sda")], Ac, "17:17: hosts[0].rootDeviceHints.deviceName: 'sda' is not a /dev/ path"),
    bad("ac wwnWithExtension", &[], &[("    wwn: ", "    wwnWithExtension: ")], Ac, "85:23: hosts[3].rootDeviceHints.wwnWithExtension: is not supported"),
    bad("ac wwnVendorExtension", &[], &[("    wwn: ", "    wwnVendorExtension: ")], Ac, "85:25: hosts[3].rootDeviceHints.wwnVendorExtension: is not supported"),
    bad("ac minSizeGigabytes", &[], &[("minSizeGigabytes: 200", "minSizeGigabytes: -1")], Ac, "87:23: hosts[3].rootDeviceHints.minSizeGigabytes: must be 0 or more"),
    bad("ac role", &[], &[("  role: worker", "  role: compute")], Ac, "80:9: hosts[3].role: unknown role 'compute'"),
    bad("ac hostname invalid", &[], &[("hostname: worker-0", "hostname: Worker_0")], Ac, "79:13: hosts[3].hostname: 'Worker_0' is not a valid host name"),
    good("ac hostname FQDN", &[], &[("hostname: worker-0", "hostname: worker-0.ai.example.com")]),
    bad("ac hostname duplicate", &[], &[("hostname: master-2", "hostname: master-1")], Ac, "63:13: hosts[2].hostname: 'master-1' is also the hostname of hosts[1]"),
    // ---- NMState
    bad("ac static address duplicate", &[], &[("ip: 10.20.0.13", "ip: 10.20.0.12")], Ac, "77:15: hosts[2].networkConfig.interfaces[0].ipv4.address[0].ip: 10.20.0.12 is already assigned at hosts[1].networkConfig.interfaces[1].ipv4.address[0].ip"),
    bad("ac static address with prefix", &[], &[("ip: 10.20.0.13", "ip: 10.20.0.13/24")], Ac, "77:15: hosts[2].networkConfig.interfaces[0].ipv4.address[0].ip: '10.20.0.13/24' is not an IP address"),
    bad("ac bond port unknown", &[], &[("        - eno2", "        - eno3")], Ac, "51:11: hosts[1].networkConfig.interfaces[0].link-aggregation.port[1]: bond port 'eno3' is not an interface of this host"),
    bad("ac VLAN base-iface unknown", &[], &[("base-iface: bond0", "base-iface: bond1")], Ac, "56:21: hosts[1].networkConfig.interfaces[1].vlan.base-iface: VLAN base-iface 'bond1' is not an interface of this host"),
    bad("ac route interface unknown", &[], &[("next-hop-interface: eno1", "next-hop-interface: eno9")], Ac, "34:29: hosts[0].networkConfig.routes.config[0].next-hop-interface: route next-hop-interface 'eno9' is not an interface of this host"),
    // ---- rendezvous host
    bad("ac rendezvousIP on no host", &[], &[("rendezvousIP: 10.20.0.11", "rendezvousIP: 10.20.0.14")], Ac, "5:15: rendezvousIP: 10.20.0.14 is not the static address of any control-plane host"),
    bad("ac rendezvousIP on a worker", &[], &[("rendezvousIP: 10.20.0.11", "rendezvousIP: 10.20.0.21"), ("    minSizeGigabytes: 200\n", WORKER_NETWORK)], Ac, "80:9: hosts[3].role: this host holds the rendezvousIP 10.20.0.21"),
    good("ac rendezvous host without role", &[], &[("- hostname: master-0\n  role: master\n", "- hostname: master-0\n")]),
    good("ac worker with static address", &[], &[("    minSizeGigabytes: 200\n", WORKER_NETWORK)]),
    // ---- both files
    bad("cross more masters than replicas", &[], &[("  role: worker", "  role: master")], Ac, "80:9: hosts[3].role: 4 hosts with role master, more than install-config controlPlane.replicas (3)"),
    good("cross fewer masters than replicas", &[("replicas: 3", "replicas: 4")], &[]),
    bad("cross more workers than compute", &[("replicas: 2", "replicas: 0")], &[], Ac, "80:9: hosts[3].role: 1 host with role worker, more than install-config compute[].replicas (0)"),
    bad("cross VIP is a host address", &[], &[("ip: 10.20.0.13", "ip: 10.20.0.5")], Ac, "77:15: hosts[2].networkConfig.interfaces[0].ipv4.address[0].ip: 10.20.0.5 is the API VIP (install-config platform.baremetal.apiVIPs[0])"),
    // ---- plain scalars the installer (go-yaml v2, YAML 1.1) reads as booleans, numbers or null
    bad("ic metadata.name no", &[("  name: ai", "  name: no")], &[("  name: ai", "  name: 'no'")], Ic, "4:9: metadata.name: write \"no\" in quotes: unquoted, the installer (Go's YAML 1.1 reader) reads it as the boolean false and uses \"false\" instead"),
    good("ic metadata.name quoted no", &[("  name: ai", "  name: \"no\"")], &[("  name: ai", "  name: 'no'")]),
    bad("ic metadata.name octal", &[("  name: ai", "  name: 0123")], &[("  name: ai", "  name: '0123'")], Ic, "4:9: metadata.name: write \"0123\" in quotes: unquoted, the installer (Go's YAML 1.1 reader) reads it as the number 83 and uses \"83\" instead"),
    bad("ac hostname on", &[], &[("hostname: master-0", "hostname: on")], Ac, "11:13: hosts[0].hostname: write \"on\" in quotes: unquoted, the installer (Go's YAML 1.1 reader) reads it as the boolean true"),
    bad("ac hostname Y", &[], &[("hostname: master-0", "hostname: Y")], Ac, "11:13: hosts[0].hostname: write \"Y\" in quotes"),
    good("ac hostname quoted on", &[], &[("hostname: master-0", "hostname: 'on'")]),
    good("ac hostname tagged on", &[], &[("hostname: master-0", "hostname: !!str on")]),
    bad("ac wwn unquoted hex", &[], &[("wwn: \"0x5000c500a0b1c2d3\"", "wwn: 0x5000c500a0b1c2d3")], Ac, "85:10: hosts[3].rootDeviceHints.wwn: write \"0x5000c500a0b1c2d3\" in quotes: unquoted, the installer (Go's YAML 1.1 reader) reads it as the number 5764824129520911059"),
    bad("ac nmstate next-hop-interface off", &[], &[("next-hop-interface: eno1", "next-hop-interface: off")], Ac, "34:29: hosts[0].networkConfig.routes.config[0].next-hop-interface: write \"off\" in quotes"),
    bad("ac nmstate bond port n", &[], &[("        - eno2", "        - n")], Ac, "51:11: hosts[1].networkConfig.interfaces[0].link-aggregation.port[1]: write \"n\" in quotes"),
    good("ac nmstate boolean written yes-no", &[], &[("dhcp: false", "dhcp: no")]),
    bad("cross rendezvousIP outside machine network", &[], &[("rendezvousIP: 10.20.0.11", "rendezvousIP: 10.20.1.11"), ("ip: 10.20.0.11", "ip: 10.20.1.11")], Ac, "5:15: rendezvousIP: 10.20.1.11 is not in a machine network of install-config (10.20.0.0/24)"),
    bad("cross names differ", &[], &[("  name: ai", "  name: lab")], Ac, "4:9: metadata.name: 'lab' differs from install-config metadata.name 'ai'"),
    good("cross agent-config without metadata", &[], &[("metadata:\n  name: ai\n", "")]),
];

#[test]
fn the_base_pair_is_valid() {
    let dir = tempfile::tempdir().unwrap();
    let (ic, ac) = write_pair(dir.path(), INSTALL_CONFIG, AGENT_CONFIG);
    let out = ok(&validate_pair(&ic, &ac));
    assert!(out.starts_with("ok: "), "{out}");
}

/// One mutation per rule: the problem names the file, line, column and field path; the valid
/// variants pass.
#[test]
fn every_rule_reports_its_field_and_position() {
    let mut failures = Vec::new();
    for case in CASES {
        let dir = tempfile::tempdir().unwrap();
        let ic_text = mutate(INSTALL_CONFIG, case.ic, case.name);
        let ac_text = mutate(AGENT_CONFIG, case.ac, case.name);
        let (ic, ac) = write_pair(dir.path(), &ic_text, &ac_text);
        let o = validate_pair(&ic, &ac);
        let out = stdout(&o);
        match case.expect {
            None if !o.status.success() => {
                failures.push(format!("{}: expected valid, got:\n{out}", case.name))
            }
            None => {}
            Some((file, line)) => {
                let path = if file == Ic { &ic } else { &ac };
                let want = format!("{}:{line}", path.display());
                let code = if case.warning { 0 } else { 1 };
                if o.status.code() != Some(code) || !out.lines().any(|l| l.starts_with(&want)) {
                    failures.push(format!(
                        "{}: expected a line starting\n  {want}\ngot (exit {:?}):\n{out}",
                        case.name,
                        o.status.code()
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// A file with three mistakes gives three lines, in file order, and exit 1.
#[test]
fn all_problems_are_reported_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let ac_text = mutate(
        AGENT_CONFIG,
        &[
            ("rendezvousIP: 10.20.0.11", "rendezvousIP: node0"),
            ("deviceName: /dev/sda", "deviceName: sda"),
            ("hostname: worker-0", "hostname: Worker_0"),
        ],
        "three",
    );
    let (_, ac) = write_pair(dir.path(), INSTALL_CONFIG, &ac_text);
    let o = bootstrap(&["validate", "--agent-config", ac.to_str().unwrap()]);
    let err = failed(&o);
    assert!(err.contains("3 problems found"), "{err}");
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    let a = ac.display();
    assert!(
        lines[0].starts_with(&format!("{a}:5:15: rendezvousIP: ")),
        "{out}"
    );
    assert!(
        lines[1].starts_with(&format!("{a}:17:17: hosts[0].rootDeviceHints.deviceName: ")),
        "{out}"
    );
    assert!(
        lines[2].starts_with(&format!("{a}:79:13: hosts[3].hostname: ")),
        "{out}"
    );
}

/// A YAML error stops its file with one line; the other file is still checked.
#[test]
fn a_broken_file_does_not_hide_the_other() {
    let dir = tempfile::tempdir().unwrap();
    let ac_text = mutate(AGENT_CONFIG, &[("- ntp.example.com", "- ntp://x")], "other");
    let (ic, ac) = write_pair(
        dir.path(),
        "apiVersion: v1\nbaseDomain: [example.com\n",
        &ac_text,
    );
    let o = validate_pair(&ic, &ac);
    failed(&o);
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].starts_with(&format!("{}:", ic.display())), "{out}");
    assert!(
        lines[1].starts_with(&format!("{}:7:3: additionalNTPSources[0]: ", ac.display())),
        "{out}"
    );
}

/// Cross-file rules need both files: agent-config alone with more masters than install-config
/// allows is valid on its own.
#[test]
fn cross_file_rules_only_with_both_files() {
    let dir = tempfile::tempdir().unwrap();
    let ac_text = mutate(
        AGENT_CONFIG,
        &[("  role: worker", "  role: master")],
        "alone",
    );
    let (_, ac) = write_pair(dir.path(), INSTALL_CONFIG, &ac_text);
    ok(&bootstrap(&[
        "validate",
        "--agent-config",
        ac.to_str().unwrap(),
    ]));
}

#[test]
fn json_output_lists_problems_with_positions() {
    let dir = tempfile::tempdir().unwrap();
    let ic_text = mutate(INSTALL_CONFIG, &[("replicas: 3", "replicas: 2")], "json");
    let (ic, _) = write_pair(dir.path(), &ic_text, AGENT_CONFIG);
    let o = bootstrap(&[
        "--output",
        "json",
        "validate",
        "--install-config",
        ic.to_str().unwrap(),
    ]);
    failed(&o);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["ok"], false);
    let p = &doc["problems"][0];
    assert_eq!(p["file"], ic.display().to_string());
    assert_eq!(p["line"], 7);
    assert_eq!(p["column"], 13);
    assert_eq!(p["path"], "controlPlane.replicas");
    assert!(p["message"].as_str().unwrap().starts_with("must be 1"));

    let o = bootstrap(&[
        "--output",
        "json",
        "validate",
        "--install-config",
        write_pair(dir.path(), INSTALL_CONFIG, AGENT_CONFIG)
            .0
            .to_str()
            .unwrap(),
    ]);
    let doc: serde_json::Value = serde_json::from_slice(ok(&o).as_bytes()).unwrap();
    assert_eq!(doc, serde_json::json!({"problems": [], "ok": true}));
}

#[test]
fn at_least_one_file_is_required_and_unreadable_files_are_problems() {
    let o = bootstrap(&["validate"]);
    assert_eq!(o.status.code(), Some(2));
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.yaml");
    let o = bootstrap(&["validate", "--agent-config", missing.to_str().unwrap()]);
    failed(&o);
    assert!(stdout(&o).starts_with(&format!("{}: cannot be read", missing.display())));
}

/// The library entry the renderer uses gives the same problems as the command.
#[test]
fn validate_files_is_the_library_entry() {
    assert!(bootstrap::installer::validate_files(
        Some(("install-config.yaml", INSTALL_CONFIG)),
        Some(("agent-config.yaml", AGENT_CONFIG))
    )
    .is_empty());
    let ac_text = mutate(
        AGENT_CONFIG,
        &[("rendezvousIP: 10.20.0.11", "rendezvousIP: node0")],
        "lib",
    );
    let problems =
        bootstrap::installer::validate_files(None, Some(("agent-config.yaml", &ac_text)));
    assert_eq!(problems.len(), 1);
    assert!(problems[0]
        .to_string()
        .starts_with("agent-config.yaml:5:15: rendezvousIP: 'node0' is not an IP address"));
}

/// Acceptance of issue 10: an older AgentConfig version is a warning and the files pass
/// (exit 0); an unknown install-config key says the installer itself would drop it.
#[test]
fn older_versions_warn_and_unknown_keys_say_what_the_installer_would_do() {
    let dir = tempfile::tempdir().unwrap();
    let ac_text = mutate(
        AGENT_CONFIG,
        &[("apiVersion: v1beta1", "apiVersion: v1alpha1")],
        "v1alpha1",
    );
    let (ic, ac) = write_pair(dir.path(), INSTALL_CONFIG, &ac_text);
    let out = ok(&validate_pair(&ic, &ac));
    assert!(
        out.lines()
            .any(|l| l.starts_with(&format!("{}:1:13: warning: apiVersion:", ac.display()))),
        "{out}"
    );
    assert!(out.contains("valid, with 1 warning"), "{out}");

    let ic_text = mutate(
        INSTALL_CONFIG,
        &[("baseDomain:", "baseDomian: x\nbaseDomain:")],
        "unknown",
    );
    let (ic, ac) = write_pair(dir.path(), &ic_text, AGENT_CONFIG);
    let o = validate_pair(&ic, &ac);
    failed(&o);
    let out = stdout(&o);
    assert!(
        out.contains("openshift-install itself would only log a warning and ignore this key"),
        "{out}"
    );
}

/// A BMC password written as an unquoted number (`0123`, which the installer reads as 83) is
/// refused with the quoting fix, and neither the password nor what it would become is printed.
#[test]
fn an_unquoted_numeric_password_is_refused_without_printing_it() {
    let ic_text = mutate(
        INSTALL_CONFIG,
        &[(
            "    - 10.20.0.6\n",
            "    - 10.20.0.6\n    hosts:\n    - name: master-0\n      role: master\n      bootMACAddress: b8:3f:d2:4a:10:01\n      bmc:\n        address: redfish-virtualmedia://10.20.0.101/redfish/v1/Systems/1\n        username: admin\n        password: 0123\n",
        )],
        "password",
    );
    let problems =
        bootstrap::installer::validate_files(Some(("install-config.yaml", &ic_text)), None);
    let lines: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
    let fix = "install-config.yaml:36:19: platform.baremetal.hosts[0].bmc.password: write the value in quotes: unquoted, the installer (Go's YAML 1.1 reader) reads it as a number, not the string written";
    assert!(lines.iter().any(|l| l == fix), "{lines:#?}");
    assert!(
        lines
            .iter()
            .all(|l| !l.contains("0123") && !l.contains("83")),
        "{lines:#?}"
    );
}
