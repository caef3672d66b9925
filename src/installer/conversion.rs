//! The installer's up-conversion of deprecated install-config fields
//! (openshift/installer `pkg/types/conversion/installconfig.go`), so the rules judge what the
//! installer will use, and the file's author learns the current spelling.

use super::install_config::{Baremetal, InstallConfig, MachineNetwork, Networking};
use super::Loaded;
use crate::yaml::{Problem, Severity};

/// The installer's up-conversion of deprecated fields (`pkg/types/conversion/installconfig.go`),
/// applied to `file` so the rules judge what the installer will use: each deprecated field in
/// use is a warning naming its replacement, and the two conflicts the installer refuses (a
/// deprecated VIP or provisioning IP different from its replacement) are errors.
pub fn upconvert(file: &mut Loaded<InstallConfig>) -> Vec<Problem> {
    let mut found: Vec<(Severity, String, String)> = Vec::new();
    let mut warn = |path: &str, message: String| {
        found.push((Severity::Warning, path.to_string(), message));
    };
    if let Some(n) = file.value.networking.as_mut() {
        upconvert_networking(n, &mut warn);
    }
    if let Some(bm) = file
        .value
        .platform
        .as_mut()
        .and_then(|p| p.baremetal.as_mut())
    {
        upconvert_baremetal(bm, &mut found);
    }
    found
        .into_iter()
        .map(|(severity, path, message)| file.finding(severity, path, message))
        .collect()
}

fn upconvert_networking(n: &mut Networking, warn: &mut impl FnMut(&str, String)) {
    let base = "networking";
    if let Some(cidr) = n.machine_cidr.clone() {
        if n.machine_network.is_empty() {
            n.machine_network = vec![MachineNetwork { cidr: cidr.clone() }];
        }
        warn(&format!("{base}.machineCIDR"), format!("is deprecated; the installer reads it as machineNetwork (ignored when machineNetwork is set): write `machineNetwork: [{{cidr: {cidr}}}]`"));
    }
    if let Some(cidr) = n.service_cidr.clone() {
        if n.service_network.is_empty() {
            n.service_network = vec![cidr.clone()];
        }
        warn(&format!("{base}.serviceCIDR"), format!("is deprecated; the installer reads it as serviceNetwork (ignored when serviceNetwork is set): write `serviceNetwork: [{cidr}]`"));
    }
    if !n.cluster_networks.is_empty() {
        if n.cluster_network.is_empty() {
            n.cluster_network = n.cluster_networks.clone();
        }
        warn(&format!("{base}.clusterNetworks"), "is deprecated; the installer reads it as clusterNetwork (ignored when clusterNetwork is set): rename it".into());
    }
    if let Some(ty) = n.deprecated_type.clone() {
        if n.network_type.is_none() {
            n.network_type = Some(ty);
        }
        warn(
            &format!("{base}.type"),
            "is deprecated; the installer reads it as networkType: rename it".into(),
        );
    }
    if let Some(ty) = n.network_type.as_mut() {
        if ty.eq_ignore_ascii_case("OVNKubernetes") && ty != "OVNKubernetes" {
            warn(
                &format!("{base}.networkType"),
                format!("{ty} is read as OVNKubernetes (the installer ignores its case); write OVNKubernetes"),
            );
            *ty = "OVNKubernetes".into();
        }
    }
    for (i, cn) in n.cluster_network.iter_mut().enumerate() {
        let (Some(len), None) = (cn.host_subnet_length, cn.host_prefix) else {
            continue;
        };
        let bits = if cn.cidr.contains(':') { 128 } else { 32 };
        cn.host_prefix = Some(bits - len);
        warn(
            &format!("{base}.clusterNetwork[{i}].hostSubnetLength"),
            format!(
                "is deprecated; the installer reads it as hostPrefix {}: write `hostPrefix: {}`",
                bits - len,
                bits - len
            ),
        );
    }
}

fn upconvert_baremetal(bm: &mut Baremetal, found: &mut Vec<(Severity, String, String)>) {
    let base = "platform.baremetal";
    for (old, new, single, list) in [
        ("apiVIP", "apiVIPs", bm.api_vip.clone(), &mut bm.api_vips),
        (
            "ingressVIP",
            "ingressVIPs",
            bm.ingress_vip.clone(),
            &mut bm.ingress_vips,
        ),
    ] {
        let Some(vip) = single else { continue };
        if list.is_empty() {
            list.push(vip.clone());
            found.push((
                Severity::Warning,
                format!("{base}.{old}"),
                format!("is the deprecated single-VIP spelling; the installer reads it as {new}: write `{new}: [{vip}]`"),
            ));
        } else if !list.contains(&vip) {
            found.push((
                Severity::Error,
                format!("{base}.{old}"),
                format!("{old} is deprecated and differs from {new}; the installer refuses this: only {new} needs to be specified"),
            ));
        } else {
            found.push((
                Severity::Warning,
                format!("{base}.{old}"),
                format!("is deprecated and repeats {new}; remove it"),
            ));
        }
    }
    if let Some(ip) = bm.provisioning_host_ip.clone() {
        match bm.cluster_provisioning_ip.as_deref() {
            Some(c) if c != ip => found.push((
                Severity::Error,
                format!("{base}.provisioningHostIP"),
                "provisioningHostIP is deprecated and differs from clusterProvisioningIP; the installer refuses this: only clusterProvisioningIP needs to be specified".into(),
            )),
            _ => {
                bm.cluster_provisioning_ip = Some(ip);
                found.push((
                    Severity::Warning,
                    format!("{base}.provisioningHostIP"),
                    "is deprecated; the installer reads it as clusterProvisioningIP: rename it"
                        .into(),
                ));
            }
        }
    }
    if bm.provisioning_dhcp_external.is_some() {
        found.push((
            Severity::Warning,
            format!("{base}.provisioningDHCPExternal"),
            "is deprecated; the installer reads `true` as `provisioningNetwork: Unmanaged`: write that instead".into(),
        ));
    }
}
