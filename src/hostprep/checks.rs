//! The verdict on a node's [`Facts`] against what the inventory expects of it: GPUs (model and
//! count, the missing ones named), NICs (by MAC, their driver, link on those carrying an
//! address), the root device, kernel modules (with the `irdma` beside `mlx5_core` conflict as a
//! rule of its own), and time (synchronized, skew, the site's NTP sources). One [`Finding`] per
//! problem, one line each, naming the node, the device and the fix.

use super::facts::Facts;
use crate::inventory::model::{Node, Role};
use crate::inventory::Inventory;
use crate::netaddr::normalize_mac;
use crate::yaml::Severity;
use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

/// What the inventory expects of one node (its own fields, its class's, the site's).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Expectations {
    /// The GPUs it must carry.
    pub gpus: Option<GpuExpectation>,
    /// Its NICs.
    pub nics: Vec<NicExpectation>,
    /// `rootDevice.deviceName`.
    pub root_device: Option<String>,
    /// Its MachineConfigPool role (`master`, `worker`).
    pub role: String,
    /// Whether `day1.blacklistIrdma` names its role.
    pub irdma_blacklisted: bool,
    /// Modules that must be loaded (the class's `expectModules`).
    pub expect_modules: Vec<String>,
    /// Modules that must not be (the class's `forbidModules`).
    pub forbid_modules: Vec<String>,
    /// `networks.ntp`.
    pub ntp: Vec<String>,
    /// `prep.maxClockSkew`.
    pub max_clock_skew: Duration,
}

/// `gpus` resolved: the model, its PCI id, the count and the addresses when given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GpuExpectation {
    /// `H200`.
    pub model: String,
    /// `10de:2335`; None for a model validation refuses.
    pub pci_id: Option<String>,
    /// How many.
    pub count: u32,
    /// Where, when the inventory says.
    pub addresses: Vec<String>,
}

/// One inventory NIC.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NicExpectation {
    /// Its name in the inventory.
    pub name: String,
    /// Its MAC, canonical (lower case, `:`).
    pub mac: String,
    /// The driver it must have.
    pub driver: Option<String>,
    /// Whether an address sits on it (directly, or on a bond or VLAN over it).
    pub carries_address: bool,
}

/// One problem with a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The node's host name.
    pub node: String,
    /// The device concerned (a PCI address, a NIC, a disk path, a module), when one is.
    pub device: Option<String>,
    /// What is wrong; it names the device.
    pub problem: String,
    /// What to do about it.
    pub fix: String,
    /// Error (the node is not ready) or warning.
    pub severity: Severity,
}

impl fmt::Display for Finding {
    /// `NODE: [warning: ]PROBLEM; fix: FIX`, one line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let warning = if self.severity == Severity::Warning {
            "warning: "
        } else {
            ""
        };
        let one_line = |s: &str| s.replace(['\n', '\r'], " ");
        write!(
            f,
            "{}: {warning}{}; fix: {}",
            self.node,
            one_line(&self.problem),
            one_line(&self.fix)
        )
    }
}

/// Where the prep stage connects to `node`: `sshAddress`, else its first machine-network
/// address (without the prefix).
pub fn ssh_address(inv: &Inventory, node: &Node) -> Option<String> {
    node.ssh_address
        .clone()
        .or_else(|| crate::render::files::machine_address(inv, node).map(|(ip, _)| ip.to_string()))
}

/// What the inventory expects of `node`: its own `gpus` over its class's, its NICs, root
/// device and role, the site's irdma blacklist, NTP sources and skew limit.
pub fn expectations(inv: &Inventory, node: &Node) -> Expectations {
    let class = node.class.as_ref().and_then(|c| inv.nodes.classes.get(c));
    let gpus = node.gpus.as_ref().or(class.and_then(|c| c.gpus.as_ref()));
    let role = match node.role {
        Role::Master => "master",
        Role::Worker => "worker",
        Role::Arbiter => "arbiter",
    };
    Expectations {
        gpus: gpus.map(|g| GpuExpectation {
            model: g.model.clone(),
            pci_id: g.pci_id(),
            count: g.count,
            addresses: g.addresses.iter().map(|a| a.to_ascii_lowercase()).collect(),
        }),
        nics: node
            .nics
            .iter()
            .map(|n| NicExpectation {
                name: n.name.clone(),
                mac: normalize_mac(&n.mac).unwrap_or_else(|_| n.mac.to_ascii_lowercase()),
                driver: n.driver.clone(),
                carries_address: carries_address(node, &n.name),
            })
            .collect(),
        root_device: node.root_device.device_name.clone(),
        role: role.to_string(),
        irdma_blacklisted: inv
            .site
            .day1
            .blacklist_irdma
            .iter()
            .any(|r| r.name() == role),
        expect_modules: class.map(|c| c.expect_modules.clone()).unwrap_or_default(),
        forbid_modules: class.map(|c| c.forbid_modules.clone()).unwrap_or_default(),
        ntp: inv.site.networks.ntp.clone(),
        max_clock_skew: inv.site.prep.max_clock_skew(),
    }
}

/// Whether an address of `node` sits on NIC `nic`, on a bond it is a member of, or on a VLAN
/// over either.
fn carries_address(node: &Node, nic: &str) -> bool {
    let mut over: BTreeSet<&str> = BTreeSet::from([nic]);
    over.extend(
        node.bonds
            .iter()
            .filter(|b| b.members.iter().any(|m| m == nic))
            .map(|b| b.name.as_str()),
    );
    let vlans: Vec<String> = node
        .vlans
        .iter()
        .filter(|v| over.contains(v.base.as_str()))
        .map(|v| match &v.name {
            Some(n) => n.clone(),
            None => format!("{}.", v.base),
        })
        .collect();
    node.addresses.iter().any(|a| {
        over.contains(a.interface.as_str())
            || vlans.iter().any(|v| {
                if v.ends_with('.') {
                    a.interface.starts_with(v.as_str())
                } else {
                    a.interface == *v
                }
            })
    })
}

/// Every problem of `facts` against `expect`, in a fixed order: GPUs, NICs, root device,
/// modules, time.
pub fn check(node: &Node, expect: &Expectations, facts: &Facts) -> Vec<Finding> {
    let mut c = Checker {
        node: &node.hostname,
        findings: Vec::new(),
    };
    if let Some(g) = &expect.gpus {
        c.gpus(g, facts);
    }
    c.nics(&expect.nics, facts);
    if let Some(root) = &expect.root_device {
        c.root_device(root, facts);
    }
    c.modules(expect, facts);
    c.time(expect, facts);
    c.findings
}

struct Checker<'a> {
    node: &'a str,
    findings: Vec<Finding>,
}

impl Checker<'_> {
    fn push(
        &mut self,
        severity: Severity,
        device: Option<String>,
        problem: String,
        fix: impl Into<String>,
    ) {
        self.findings.push(Finding {
            node: self.node.to_string(),
            device,
            problem,
            fix: fix.into(),
            severity,
        });
    }

    fn gpus(&mut self, g: &GpuExpectation, facts: &Facts) {
        let Some(id) = &g.pci_id else { return };
        let found: Vec<&str> = facts
            .pci
            .iter()
            .filter(|d| format!("{}:{}", d.vendor, d.device) == *id)
            .map(|d| d.address.as_str())
            .collect();
        let (n, want, model) = (found.len(), g.count as usize, &g.model);
        if n < want {
            let missing: Vec<&str> = g
                .addresses
                .iter()
                .map(String::as_str)
                .filter(|a| !found.contains(a))
                .collect();
            let (problem, device) = if missing.is_empty() {
                (
                    format!("{n} of {want} {model} found ({})", list(&found)),
                    None,
                )
            } else {
                (
                    format!(
                        "{n} of {want} {model} found, missing {}",
                        missing.join(", ")
                    ),
                    Some(missing.join(",")),
                )
            };
            self.push(Severity::Error, device, problem, format!("reseat or replace the missing {model} (PCI {id}); the BMC's hardware log and `dmesg` on the node show a GPU that fell off the bus"));
        } else if n > want {
            self.push(
                Severity::Warning,
                None,
                format!("{n} {model} found, {want} expected ({})", list(&found)),
                "correct gpus.count in nodes.yaml (the node's or its class's)",
            );
        }
    }

    fn nics(&mut self, nics: &[NicExpectation], facts: &Facts) {
        for want in nics {
            let seen = facts
                .nics
                .iter()
                .find(|n| n.permanent_mac.as_deref() == Some(&want.mac))
                .or_else(|| {
                    facts
                        .nics
                        .iter()
                        .find(|n| n.mac.as_deref() == Some(&want.mac))
                });
            let label = format!("NIC {} ({})", want.name, want.mac);
            let Some(seen) = seen else {
                let macs: Vec<String> = facts
                    .nics
                    .iter()
                    .filter(|n| n.pci_address.is_some())
                    .map(|n| {
                        format!(
                            "{} {}",
                            n.name,
                            n.permanent_mac
                                .as_ref()
                                .or(n.mac.as_ref())
                                .map_or("-", String::as_str)
                        )
                    })
                    .collect();
                self.push(Severity::Error, Some(want.name.clone()), format!("{label} not found; the node's NICs: {}", list(&macs)), "correct nics[].mac in nodes.yaml, or check that the card is seated and enabled in the BIOS");
                continue;
            };
            if let Some(driver) = &want.driver {
                if seen.driver.as_deref() != Some(driver.as_str()) {
                    let actual = seen.driver.as_deref().unwrap_or("no driver");
                    self.push(
                        Severity::Error,
                        Some(seen.name.clone()),
                        format!("{label} is driven by {actual}, not {driver}"),
                        format!(
                            "check which card sits at {} (lspci -k), or correct nics[].driver",
                            seen.pci_address.as_deref().unwrap_or(&seen.name)
                        ),
                    );
                }
            }
            let down = seen.carrier == Some(false) || seen.operstate.as_deref() == Some("down");
            if want.carries_address && down {
                self.push(
                    Severity::Error,
                    Some(seen.name.clone()),
                    format!(
                        "{label} has no link (operstate {}) and carries an address",
                        seen.operstate.as_deref().unwrap_or("unknown")
                    ),
                    "check the cable and the switch port (and the port's VLANs and LACP)",
                );
            }
        }
    }

    fn root_device(&mut self, root: &str, facts: &Facts) {
        let present = facts.disks.iter().any(|d| {
            d.by_path.iter().any(|p| p == root)
                || root.strip_prefix("/dev/") == Some(d.name.as_str())
        });
        if !present {
            let mut names: Vec<&str> = facts
                .disks
                .iter()
                .flat_map(|d| d.by_path.iter().map(String::as_str))
                .collect();
            names.sort();
            self.push(
                Severity::Error,
                Some(root.to_string()),
                format!(
                    "root device {root} not found; by-path names: {}",
                    list(&names)
                ),
                "correct rootDevice.deviceName in nodes.yaml to the install disk's by-path name",
            );
        }
    }

    fn modules(&mut self, expect: &Expectations, facts: &Facts) {
        let irdma = facts.module_loaded("irdma") && facts.module_loaded("mlx5_core");
        if irdma {
            self.irdma(expect);
        }
        for m in &expect.expect_modules {
            if !facts.module_loaded(m) {
                self.push(Severity::Error, Some(m.clone()), format!("module {m} is not loaded (expectModules of its class)"), format!("check that the hardware it drives is present and `modprobe {m}`; persistent changes go through a MachineConfig"));
            }
        }
        for m in &expect.forbid_modules {
            if facts.module_loaded(m) && !(irdma && m == "irdma") {
                self.push(Severity::Error, Some(m.clone()), format!("module {m} is loaded (forbidModules of its class)"), format!("blacklist it with a MachineConfig (kernelArguments module_blacklist={m}); `modprobe -r {m}` for now"));
            }
        }
    }

    /// `irdma` beside `mlx5_core`: the MachineConfig the iso stage writes for the role.
    fn irdma(&mut self, expect: &Expectations) {
        let role = &expect.role;
        let mc = format!("99-{role}-blacklist-irdma");
        let (problem, fix) = if expect.irdma_blacklisted {
            (format!("irdma is loaded beside mlx5_core (Intel RDMA collides with ConnectX RDMA), although day1.blacklistIrdma covers role {role}"),
             format!("MachineConfig {mc} (kernelArguments module_blacklist=irdma) is not in effect on this node: check `oc get mcp {role}` and reboot the node; `modprobe -r irdma` for now"))
        } else {
            (format!("irdma is loaded beside mlx5_core (Intel RDMA collides with ConnectX RDMA); day1.blacklistIrdma does not cover role {role}"),
             format!("add {role} to day1.blacklistIrdma in site.yaml and reinstall (the iso stage writes MachineConfig {mc}, kernelArguments module_blacklist=irdma); `modprobe -r irdma` for now"))
        };
        self.push(Severity::Error, Some("irdma".into()), problem, fix);
    }

    fn time(&mut self, expect: &Expectations, facts: &Facts) {
        let t = &facts.time;
        match (t.tool.as_deref(), t.synchronized) {
            (None, _) => self.push(Severity::Warning, None, "time sync unknown: neither chronyc nor timedatectl on the node".into(), "check the node's clock by hand (date -u) against this machine's"),
            (Some(tool), None) => self.push(Severity::Warning, None, format!("time sync unknown: {tool} did not answer"), "check that chronyd runs on the node (systemctl status chronyd)"),
            (Some(_), Some(false)) => self.push(Severity::Error, None, format!("clock not synchronized (leap status {})", t.leap_status.as_deref().unwrap_or("unknown")), "check that the node reaches networks.ntp's sources (chronyc sources -v); etcd and certificates need synchronized clocks"),
            (Some(_), Some(true)) => {}
        }
        if let Some(skew) = facts.clock.as_ref().and_then(|c| c.skew_ms) {
            let max = expect.max_clock_skew;
            if u128::from(skew.unsigned_abs()) > max.as_millis() {
                self.push(Severity::Error, None, format!("clock is {:.1} s {} this machine's (maxClockSkew {} ms)", skew.unsigned_abs() as f64 / 1000.0, if skew > 0 { "ahead of" } else { "behind" }, max.as_millis()), "synchronize the node (chronyc makestep) or this machine's clock; raise prep.maxClockSkew only if this machine's clock is the one off");
            }
        }
        if t.tool.as_deref() == Some("chronyc") {
            self.ntp_sources(&expect.ntp, facts);
        }
    }

    /// The site's NTP sources given as addresses must be among chrony's (chronyc -n shows
    /// addresses, so host names cannot be compared and are not).
    fn ntp_sources(&mut self, ntp: &[String], facts: &Facts) {
        let have: Vec<&str> = facts
            .time
            .sources
            .iter()
            .map(|s| s.address.as_str())
            .collect();
        for source in ntp.iter().filter(|s| s.parse::<std::net::IpAddr>().is_ok()) {
            if !have.contains(&source.as_str()) {
                self.push(Severity::Warning, Some(source.clone()), format!("NTP source {source} (networks.ntp) is not among chrony's sources ({})", list(&have)), "the node's chrony.conf lacks it: agent-config's additionalNTPSources carries networks.ntp at install; add it with a chrony MachineConfig");
            }
        }
    }
}

fn list<S: AsRef<str>>(items: &[S]) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        items
            .iter()
            .map(AsRef::as_ref)
            .collect::<Vec<_>>()
            .join(", ")
    }
}
