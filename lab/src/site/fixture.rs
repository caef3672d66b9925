//! A lab node's fixture ([`super::hosts`]): the files its hardware facts are read from, as a
//! Dell PowerEdge XE9680 with eight NVIDIA H200 SXM, two ConnectX-7 and an Intel E810 would
//! show them, and the stand-in programs (`lab/src/site/standins/*.sh`) for what this machine
//! cannot do for a node (no systemd, no kernel modules, no NTP daemon). Every path is under the
//! fixture directory; nothing of this machine is touched. `bootstrap-lab repair`
//! ([`super::repair`]) changes a fixture as the engineer changes the node: a GPU reseated
//! ([`reseat_gpus`]), a boot with the MachineConfigs' kernel arguments ([`boot`]).

use anyhow::Result;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;

use bootstrap::inventory::{model::Node, Inventory};

/// The H200s' PCI addresses on an XE9680 (NUMA node 0 for the first four, 1 for the rest).
pub const GPU_ADDRESSES: [&str; 8] = [
    "0000:18:00.0",
    "0000:2a:00.0",
    "0000:3a:00.0",
    "0000:5d:00.0",
    "0000:9a:00.0",
    "0000:ab:00.0",
    "0000:ba:00.0",
    "0000:db:00.0",
];
/// The GPU node index 1 lacks (its fixture has seven).
pub const MISSING_GPU: &str = "0000:9a:00.0";
/// The node index whose fixture loads `irdma` beside `mlx5_core`.
pub const IRDMA_NODE: usize = 2;

/// One PCI function: address, vendor, device, class, NUMA node, link width, driver, and its
/// network interface (name, MAC, MTU, speed in Mb/s) for a NIC.
struct Pci {
    address: &'static str,
    ids: (&'static str, &'static str, &'static str),
    numa: i32,
    width: u32,
    driver: &'static str,
    net: Option<(String, String, u32, u32)>,
}

/// What one node's fixture holds, from the inventory.
#[derive(Clone, Debug)]
pub struct NodeHardware {
    /// The node's hostname.
    pub node: String,
    /// Its index in nodes.yaml.
    pub index: usize,
    /// The root disk's name (`vda`) and by-path name (`pci-0000:04:00.0`).
    pub root: (String, String),
    /// The machine NIC's name and MAC (the E810's first port).
    pub nic: (String, String),
    /// The inventory's NTP sources (`networks.ntp`).
    pub ntp: Vec<String>,
}

impl NodeHardware {
    /// The hardware of node `index` of `inv`.
    pub fn of(inv: &Inventory, index: usize, node: &Node) -> NodeHardware {
        let device = node
            .root_device
            .device_name
            .as_deref()
            .unwrap_or("/dev/vda");
        let root = match device.strip_prefix("/dev/disk/by-path/") {
            Some(by_path) => ("sda".to_string(), by_path.to_string()),
            None => {
                let name = device.trim_start_matches("/dev/").to_string();
                let by_path = if name.starts_with("vd") {
                    "pci-0000:04:00.0".to_string()
                } else {
                    "pci-0000:04:00.0-scsi-0:0:0:0".to_string()
                };
                (name, by_path)
            }
        };
        let nic = node.nics.first().map_or_else(
            || ("enp1s0".to_string(), format!("b4:83:51:00:{index:02x}:01")),
            |n| (n.name.clone(), n.mac.to_ascii_lowercase()),
        );
        NodeHardware {
            node: node.hostname.clone(),
            index,
            root,
            nic,
            ntp: inv.site.networks.ntp.clone(),
        }
    }

    fn devices(&self) -> Vec<Pci> {
        let mut devices: Vec<Pci> = GPU_ADDRESSES
            .iter()
            .enumerate()
            .filter(|(_, a)| self.index != 1 || **a != MISSING_GPU)
            .map(gpu)
            .collect();
        let mac = |port: u8| format!("94:6d:ae:{:02x}:00:{port:02x}", self.index);
        let nic = |address, ids, numa, width, driver, net| Pci {
            address,
            ids,
            numa,
            width,
            driver,
            net: Some(net),
        };
        let (cx7, e810) = (
            ("0x15b3", "0x1021", "0x020000"),
            ("0x8086", "0x159b", "0x020000"),
        );
        devices.push(nic(
            "0000:1d:00.0",
            cx7,
            0,
            16,
            "mlx5_core",
            ("ens1f0np0".into(), mac(1), 9000, 400000),
        ));
        devices.push(nic(
            "0000:9d:00.0",
            cx7,
            1,
            16,
            "mlx5_core",
            ("ens2f0np0".into(), mac(2), 9000, 400000),
        ));
        let (name, mac0) = self.nic.clone();
        devices.push(nic(
            "0000:01:00.0",
            e810,
            0,
            8,
            "ice",
            (name, mac0, 1500, 25000),
        ));
        devices.push(Pci {
            address: "0000:04:00.0",
            ids: ("0x1af4", "0x1001", "0x010000"),
            numa: 0,
            width: 1,
            driver: "virtio-pci",
            net: None,
        });
        for address in ["0000:c1:00.0", "0000:c2:00.0"] {
            devices.push(Pci {
                address,
                ids: ("0x144d", "0xa80a", "0x010802"),
                numa: 1,
                width: 4,
                driver: "nvme",
                net: None,
            });
        }
        devices
    }

    /// The modules loaded at boot, in `/proc/modules`' format: with `irdma` on node index 2
    /// unless a `module_blacklist` kernel argument keeps it out (`blacklist`).
    fn modules(&self, blacklist: &[String]) -> String {
        let mut lines = vec![
            "nvidia_uvm 6426624 0 - Live 0x0000000000000000 (POE)",
            "nvidia_modeset 1638400 0 - Live 0x0000000000000000 (POE)",
            "nvidia 54288384 2 nvidia_uvm,nvidia_modeset, Live 0x0000000000000000 (POE)",
            "mlx5_ib 499712 0 - Live 0x0000000000000000",
            "ib_uverbs 200704 1 mlx5_ib, Live 0x0000000000000000",
            "mlx5_core 2543616 1 mlx5_ib, Live 0x0000000000000000",
            "ice 1150976 0 - Live 0x0000000000000000",
            "ib_core 507904 2 mlx5_ib,ib_uverbs, Live 0x0000000000000000",
            "nvme 57344 2 - Live 0x0000000000000000",
            "nvme_core 212992 3 nvme, Live 0x0000000000000000",
            "virtio_blk 28672 3 - Live 0x0000000000000000",
            "overlay 200704 0 - Live 0x0000000000000000",
            "br_netfilter 32768 0 - Live 0x0000000000000000",
        ];
        if self.index == IRDMA_NODE && !blacklist.iter().any(|m| m == "irdma") {
            lines.insert(3, "irdma 409600 0 - Live 0x0000000000000000");
            lines[7] = "ice 1150976 1 irdma, Live 0x0000000000000000";
            lines[8] = "ib_core 507904 3 irdma,mlx5_ib,ib_uverbs, Live 0x0000000000000000";
        }
        lines.retain(|l| {
            let name = l.split(' ').next().unwrap_or_default();
            !blacklist.iter().any(|m| m == name)
        });
        lines.join("\n") + "\n"
    }
}

/// One H200 at `address` (the `i`th slot: NUMA node 0 for the first four, 1 for the rest).
fn gpu((i, address): (usize, &&'static str)) -> Pci {
    Pci {
        address,
        ids: ("0x10de", "0x2335", "0x030200"),
        numa: if i < 4 { 0 } else { 1 },
        width: 16,
        driver: "nvidia",
        net: None,
    }
}

/// The H200 slots of the fixture in `dir` that show no GPU.
pub fn missing_gpus(dir: &Path) -> Vec<&'static str> {
    let root = dir.join(PCI_DEVICES);
    GPU_ADDRESSES
        .iter()
        .filter(|a| !root.join(a).exists())
        .copied()
        .collect()
}

/// The GPUs the fixture in `dir` shows.
pub fn gpus_seen(dir: &Path) -> usize {
    GPU_ADDRESSES.len() - missing_gpus(dir).len()
}

/// Reseats the GPUs missing from the fixture in `dir` (the node powered off): each shows again
/// as the others do. Returns their addresses.
pub fn reseat_gpus(dir: &Path) -> Result<Vec<&'static str>> {
    let missing = missing_gpus(dir);
    let devices: Vec<Pci> = GPU_ADDRESSES
        .iter()
        .enumerate()
        .filter(|(_, a)| missing.contains(a))
        .map(gpu)
        .collect();
    write_pci(&dir.join(PCI_DEVICES), &devices)?;
    Ok(missing)
}

/// The names of the modules the fixture in `dir` has loaded (its `proc/modules`).
pub fn loaded_modules(dir: &Path) -> Result<Vec<String>> {
    let text = fs_err::read_to_string(dir.join(MODULES))?;
    Ok(text
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect())
}

/// The node of the fixture in `dir` boots with `kernel_arguments`: its loaded modules become
/// those of a fresh boot, less any its `module_blacklist` arguments name (what a playbook or
/// `modprobe` changed since goes, as on a real reboot). Written in place: the node's `/proc/modules`
/// is bound to this file.
pub fn boot(dir: &Path, hw: &NodeHardware, kernel_arguments: &[String]) -> Result<()> {
    let blacklist = super::machineconfig::blacklisted_modules(kernel_arguments);
    fs_err::write(dir.join(MODULES), hw.modules(&blacklist))?;
    Ok(())
}

/// The fixture's PCI devices, which the node sees as `/sys/bus/pci/devices`.
const PCI_DEVICES: &str = "sys/bus/pci/devices";
/// The fixture's loaded modules, which the node sees as `/proc/modules`.
const MODULES: &str = "proc/modules";

fn put(path: &Path, text: &str) -> Result<()> {
    if let Some(parent) = path.parent() {
        fs_err::create_dir_all(parent)?;
    }
    fs_err::write(path, text)?;
    Ok(())
}

/// Writes the fixture of `hw` into `dir` (a new directory).
pub fn write(dir: &Path, hw: &NodeHardware) -> Result<()> {
    write_pci(&dir.join(PCI_DEVICES), &hw.devices())?;
    write_disks(dir, hw)?;
    put(&dir.join(MODULES), &hw.modules(&[]))?;
    write_standins(dir, hw)?;
    put(
        &dir.join("etc/sysctl.conf"),
        "# The lab node's own /etc/sysctl.conf (its fixture, not this machine's).\n",
    )?;
    fs_err::create_dir_all(dir.join("etc/sysctl.d"))?;
    make_opaque(&dir.join("etc/sysctl.d"))?;
    fs_err::create_dir_all(dir.join(".work/etc"))?;
    Ok(())
}

/// Marks an overlay upper directory opaque: the node's `/etc/sysctl.d` shows only its own
/// files, not this machine's.
fn make_opaque(dir: &Path) -> Result<()> {
    rustix::fs::setxattr(
        dir,
        "trusted.overlay.opaque",
        b"y",
        rustix::fs::XattrFlags::empty(),
    )
    .map_err(|e| anyhow::anyhow!("marking {} opaque for overlayfs: {e}", dir.display()))
}

fn write_pci(root: &Path, devices: &[Pci]) -> Result<()> {
    fs_err::create_dir_all(root)?;
    for d in devices {
        let dir = root.join(d.address);
        let (vendor, device, class) = d.ids;
        for (file, value) in [
            ("vendor", vendor.to_string()),
            ("device", device.to_string()),
            ("class", class.to_string()),
            ("numa_node", d.numa.to_string()),
            ("current_link_width", d.width.to_string()),
            ("max_link_width", d.width.to_string()),
        ] {
            put(&dir.join(file), &format!("{value}\n"))?;
        }
        symlink(
            format!("../../../bus/pci/drivers/{}", d.driver),
            dir.join("driver"),
        )?;
        if let Some((name, mac, mtu, speed)) = &d.net {
            let net = dir.join("net").join(name);
            for (file, value) in [
                ("address", mac.clone()),
                ("mtu", mtu.to_string()),
                ("speed", speed.to_string()),
                ("operstate", "up".into()),
                ("carrier", "1".into()),
            ] {
                put(&net.join(file), &format!("{value}\n"))?;
            }
        }
    }
    Ok(())
}

/// `sys/block/NAME/{size,queue/rotational,device/model,device/serial}` and
/// `dev/disk/by-path/NAME -> ../../DISK` for the root disk and two NVMe data disks.
fn write_disks(dir: &Path, hw: &NodeHardware) -> Result<()> {
    let (root, root_path) = &hw.root;
    let disks = [
        (
            root.clone(),
            root_path.clone(),
            1_875_385_008u64,
            "Dell BOSS-N1",
        ),
        (
            "nvme0n1".into(),
            "pci-0000:c1:00.0-nvme-1".into(),
            7_501_476_528,
            "Dell Ent NVMe CM6 RI 3.84TB",
        ),
        (
            "nvme1n1".into(),
            "pci-0000:c2:00.0-nvme-1".into(),
            7_501_476_528,
            "Dell Ent NVMe CM6 RI 3.84TB",
        ),
    ];
    let by_path = dir.join("dev/disk/by-path");
    fs_err::create_dir_all(&by_path)?;
    for (i, (name, path, sectors, model)) in disks.iter().enumerate() {
        let block = dir.join("sys/block").join(name);
        put(&block.join("size"), &format!("{sectors}\n"))?;
        put(&block.join("queue/rotational"), "0\n")?;
        put(&block.join("device/model"), &format!("{model}\n"))?;
        put(
            &block.join("device/serial"),
            &format!("LAB{:02}{i:02}\n", hw.index),
        )?;
        symlink(format!("../../{name}"), by_path.join(path))?;
    }
    Ok(())
}

/// The stand-ins in `usr/local/bin`, first on a login's PATH (and sudo's secure_path), and
/// their state: `state/systemd/UNIT/{active,enabled}`, `state/journal`.
fn write_standins(dir: &Path, hw: &NodeHardware) -> Result<()> {
    let state = dir.join("state");
    for (unit, active, enabled) in [
        ("chronyd", "active", "enabled"),
        ("sshd", "active", "enabled"),
        ("kubelet", "active", "enabled"),
        ("crio", "active", "enabled"),
    ] {
        put(
            &state.join(format!("systemd/{unit}/active")),
            &format!("{active}\n"),
        )?;
        put(
            &state.join(format!("systemd/{unit}/enabled")),
            &format!("{enabled}\n"),
        )?;
    }
    put(&state.join("journal"), &journal(&hw.node))?;
    let final_dir = dir.parent().unwrap_or(dir).join("fixture");
    let subst = |text: &str| {
        text.replace("@NODE@", &hw.node)
            .replace("@FIXTURE@", &final_dir.display().to_string())
            .replace("@NTP@", &hw.ntp.join(" "))
    };
    let bin = dir.join("usr/local/bin");
    for (name, text) in STANDINS {
        put(&bin.join(name), &subst(text))?;
        fs_err::set_permissions(bin.join(name), std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(())
}

/// The stand-in scripts, with `@NODE@`, `@FIXTURE@` and `@NTP@` filled in per node.
const STANDINS: [(&str, &str); 4] = [
    ("chronyc", include_str!("standins/chronyc.sh")),
    ("systemctl", include_str!("standins/systemctl.sh")),
    ("modprobe", include_str!("standins/modprobe.sh")),
    ("journalctl", include_str!("standins/journalctl.sh")),
];

/// The node's journal since boot at priority err: benign lines a real XE9680 running RHCOS
/// logs, none a hardware fault (no `Xid`, `Hardware Error`, `EDAC`, mlx5_core failure).
fn journal(node: &str) -> String {
    [
        "kernel: ACPI BIOS Error (bug): Could not resolve symbol [\\_SB.PC00.RP01.PXSX], AE_NOT_FOUND (20230628/dswload2-162)",
        "kernel: ACPI Error: AE_NOT_FOUND, During name lookup/catalog (20230628/psobject-220)",
        "kernel: ipmi_si dmi-ipmi-si.0: The BMC does not support clearing the recv irq bit, compensating, but the BMC needs to be fixed.",
        "NetworkManager[1873]: <error> [1733220135.4471] device (ens2f0np0): unable to set 'lldp' to 'enabled'",
        "kubelet[2716]: E1203 10:02:41.118023    2716 kubelet.go:2412] \"Error getting node\" err=\"node \\\"@\\\" not found\"",
        "crio[2433]: time=\"2026-12-03 10:02:39.871233115Z\" level=error msg=\"Failed to load CNI config\" error=\"no network config found in /etc/kubernetes/cni/net.d/\"",
    ]
    .iter()
    .enumerate()
    .map(|(i, l)| format!("Dec 03 10:02:{:02} {node} {}\n", 11 + i * 5, l.replace('@', node)))
    .collect()
}

/// The `pid_max` of a lab node's PID namespace where its `/proc` is the fixture's.
pub const PROC_PIDS: u32 = 4096;

/// Makes `root` (holding the fixture's `modules`) stand for `/proc`: a `.kernel` directory,
/// where a real procfs is mounted, a link `NAME -> .kernel/NAME` for every entry of this
/// machine's `/proc` that is not a process (`self`, `sys`, `net`, `mounts`, `cpuinfo`, ...),
/// and one per pid from 1 to `pids` (dangling while no such process runs, as `ps` expects of
/// a process that just ended).
pub fn link_procfs(root: &Path, pids: u32) -> Result<()> {
    fs_err::create_dir_all(root.join(".kernel"))?;
    // `sys` is bound, not linked: sysctl(8) refuses a path that resolves outside /proc/sys.
    fs_err::create_dir_all(root.join("sys"))?;
    let mut names: Vec<String> = (1..=pids).map(|p| p.to_string()).collect();
    for entry in fs_err::read_dir("/proc")? {
        let name = entry?.file_name();
        let Some(text) = name.to_str() else { continue };
        if !text.bytes().all(|b| b.is_ascii_digit()) && text != "modules" && text != "sys" {
            names.push(text.to_string());
        }
    }
    for name in names {
        let link = root.join(&name);
        if fs_err::symlink_metadata(&link).is_err() {
            symlink(format!(".kernel/{name}"), link)?;
        }
    }
    Ok(())
}
