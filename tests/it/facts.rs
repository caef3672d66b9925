//! Hardware facts and their checks (issue 14 item 2): the fact script's output format, written
//! to model three XE9680 GPU nodes (`tests/testdata/prep/*.txt`: eight H200s with ConnectX-7 and
//! E810 NICs and by-path disks; one with seven GPUs; one with `irdma` loaded) read into golden
//! `*.facts.json` files (`UPDATE_GOLDEN=1` rewrites them), checked against the example site's
//! inventory with a GPU class, every finding asserted as its one line; and the script run on
//! this machine through `hostprep::Local`.

use crate::support::run::{copy_dir, repo, shipped_inventory};
use bootstrap::hostprep::checks::{self, Finding};
use bootstrap::hostprep::facts::{self, Facts};
use bootstrap::hostprep::Local;
use bootstrap::inventory::{self, Inventory};
use std::path::Path;

fn testdata(name: &str) -> std::path::PathBuf {
    repo("tests/testdata/prep").join(name)
}

fn parsed(node: &str) -> Facts {
    let text = fs_err::read_to_string(testdata(&format!("{node}.txt"))).unwrap();
    facts::parse(&text).unwrap_or_else(|e| panic!("{node}.txt: {e}"))
}

#[test]
fn captured_outputs_match_their_golden_facts() {
    for node in ["gpu-00", "gpu-03", "gpu-05"] {
        let f = parsed(node);
        assert!(f.clock.is_some(), "{node}: the clock is read");
        let got = f.stable().to_json();
        let golden = testdata(&format!("{node}.facts.json"));
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            fs_err::write(&golden, &got).unwrap();
            continue;
        }
        let want = fs_err::read_to_string(&golden)
            .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", golden.display()));
        assert!(
            got == want,
            "{node}: facts differ from {} (UPDATE_GOLDEN=1 rewrites it):\n{got}",
            golden.display()
        );
        let back: Facts = serde_json::from_str(&want).unwrap();
        assert_eq!(back, f.stable(), "{node}: the golden reads back");
    }
}

#[test]
fn parse_reads_each_record_and_refuses_cut_off_output() {
    let f = parsed("gpu-00");
    let gpu = f.pci.iter().find(|d| d.address == "0000:ba:00.0").unwrap();
    assert_eq!(
        (gpu.vendor.as_str(), gpu.device.as_str(), gpu.class.as_str()),
        ("10de", "2335", "030200")
    );
    assert_eq!(
        (gpu.numa_node, gpu.driver.as_deref()),
        (Some(1), Some("nvidia"))
    );
    let host_bridge = f.pci.iter().find(|d| d.address == "0000:00:00.0").unwrap();
    assert_eq!(host_bridge.driver, None);
    let e810 = f.nics.iter().find(|n| n.name == "ens2f1").unwrap();
    assert_eq!(
        (
            e810.driver.as_deref(),
            e810.pci_address.as_deref(),
            e810.carrier,
            e810.speed_mbps
        ),
        (Some("ice"), Some("0000:4b:00.1"), None, None)
    );
    let down = f.nics.iter().find(|n| n.name == "ens2f0").unwrap();
    assert_eq!(
        (down.carrier, down.speed_mbps),
        (Some(false), None),
        "speed -1 is unknown"
    );
    let bond = f.nics.iter().find(|n| n.name == "bond0").unwrap();
    assert_eq!(
        (bond.driver.as_deref(), bond.pci_address.as_deref()),
        (None, None)
    );
    let member = f.nics.iter().find(|n| n.name == "ens1f1np1").unwrap();
    assert_eq!(
        (member.mac.as_deref(), member.permanent_mac.as_deref()),
        (Some("b8:3f:d2:21:00:00"), Some("b8:3f:d2:21:00:01"))
    );
    let root = f.disks.iter().find(|d| d.name == "nvme0n1").unwrap();
    assert_eq!(
        root.by_path,
        vec!["/dev/disk/by-path/pci-0000:c3:00.0-nvme-1"],
        "partition links are not the disk's"
    );
    assert_eq!(
        (root.size_bytes, root.model.as_deref()),
        (7501476528 * 512, Some("Dell Ent NVMe CM6 RI 3.84TB"))
    );
    assert_eq!(
        (
            f.time.synchronized,
            f.time.sources.iter().filter(|s| s.selected).count()
        ),
        (Some(true), 1)
    );
    let text = fs_err::read_to_string(testdata("gpu-00.txt")).unwrap();
    let cut = text.trim_end().strip_suffix("end").unwrap();
    let e = facts::parse(cut).unwrap_err();
    assert_eq!(e, facts::ParseError::CutOff);
    assert!(e.to_string().contains("before its `end` line"), "{e}");
    let e = facts::parse("host\t-\thostname\tx\nbogus\t-\t-\t-\nend\n").unwrap_err();
    assert!(e.to_string().contains("line 2: unknown record kind"), "{e}");
}

/// The example site, each GPU worker of class `xe9680` (8 H200 at known addresses) with its
/// ConnectX NICs' driver named.
fn inventory_with_class(tmp: &Path) -> Inventory {
    let dir = tmp.join("site");
    copy_dir(&shipped_inventory("example-site"), &dir);
    let path = dir.join("nodes.yaml");
    let text = fs_err::read_to_string(&path).unwrap();
    let classes = "classes:\n  xe9680:\n    gpus:\n      model: H200\n      count: 8\n      addresses: [0000:18:00.0, 0000:2a:00.0, 0000:3a:00.0, 0000:5d:00.0, 0000:9a:00.0, 0000:ab:00.0, 0000:ba:00.0, 0000:db:00.0]\n    expectModules: [nvidia, mlx5_core]\nnodes:\n";
    let mut text = text
        .replacen("nodes:\n", classes, 1)
        .replace("  role: worker\n", "  role: worker\n  class: xe9680\n");
    for nn in ["00", "03", "05"] {
        for port in ["00", "01"] {
            let mac = format!("    mac: b8:3f:d2:21:{nn}:{port}\n");
            text = text.replacen(&mac, &format!("{mac}    driver: mlx5_core\n"), 1);
        }
    }
    fs_err::write(&path, text).unwrap();
    let inv = inventory::load(&dir).unwrap();
    let problems = inventory::validate(&inv);
    assert!(
        problems.is_empty(),
        "{}",
        inventory::render_inventory_problems(&dir, &problems)
    );
    inv
}

fn findings(inv: &Inventory, node: &str, f: &Facts) -> Vec<String> {
    let n = inv.nodes.nodes.iter().find(|n| n.hostname == node).unwrap();
    let expect = checks::expectations(inv, n);
    checks::check(n, &expect, f)
        .iter()
        .map(Finding::to_string)
        .collect()
}

#[test]
fn the_seven_gpu_node_and_the_irdma_node_are_reported_one_line_each() {
    let tmp = tempfile::tempdir().unwrap();
    let inv = inventory_with_class(tmp.path());
    assert_eq!(
        findings(&inv, "gpu-00", &parsed("gpu-00")),
        Vec::<String>::new()
    );
    assert_eq!(
        findings(&inv, "gpu-03", &parsed("gpu-03")),
        vec!["gpu-03: 7 of 8 H200 found, missing 0000:9a:00.0; fix: reseat or replace the missing H200 (PCI 10de:2335); the BMC's hardware log and `dmesg` on the node show a GPU that fell off the bus"]
    );
    assert_eq!(
        findings(&inv, "gpu-05", &parsed("gpu-05")),
        vec!["gpu-05: irdma is loaded beside mlx5_core (Intel RDMA collides with ConnectX RDMA), although day1.blacklistIrdma covers role worker; fix: MachineConfig 99-worker-blacklist-irdma (kernelArguments module_blacklist=irdma) is not in effect on this node: check `oc get mcp worker` and reboot the node; `modprobe -r irdma` for now"]
    );
}

#[test]
fn gpus_without_addresses_name_those_found() {
    let tmp = tempfile::tempdir().unwrap();
    let inv = inventory_with_class(tmp.path());
    let node = inv
        .nodes
        .nodes
        .iter()
        .find(|n| n.hostname == "gpu-03")
        .unwrap();
    let mut expect = checks::expectations(&inv, node);
    expect.gpus.as_mut().unwrap().addresses.clear();
    let got: Vec<String> = checks::check(node, &expect, &parsed("gpu-03"))
        .iter()
        .map(Finding::to_string)
        .collect();
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].starts_with("gpu-03: 7 of 8 H200 found (0000:18:00.0, 0000:2a:00.0, 0000:3a:00.0, 0000:5d:00.0, 0000:ab:00.0, 0000:ba:00.0, 0000:db:00.0); fix: "), "{}", got[0]);
    expect.gpus.as_mut().unwrap().count = 6;
    let got = checks::check(node, &expect, &parsed("gpu-03"));
    assert!(
        got[0]
            .to_string()
            .starts_with("gpu-03: warning: 7 H200 found, 6 expected"),
        "{}",
        got[0]
    );
}

#[test]
fn nics_root_device_time_and_skew_are_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let inv = inventory_with_class(tmp.path());
    let node = inv
        .nodes
        .nodes
        .iter()
        .find(|n| n.hostname == "gpu-00")
        .unwrap();
    let mut expect = checks::expectations(&inv, node);
    expect.nics[1].driver = Some("ice".into());
    expect.root_device = Some("/dev/disk/by-path/pci-0000:c5:00.0-nvme-1".into());
    expect.max_clock_skew = std::time::Duration::from_secs(2);
    let mut f = parsed("gpu-00");
    let nic = f.nics.iter_mut().find(|n| n.name == "ens1f0np0").unwrap();
    nic.carrier = Some(false);
    nic.operstate = Some("down".into());
    f.time.synchronized = Some(false);
    f.time.leap_status = Some("Not synchronised".into());
    f.time.sources.retain(|s| s.address != "10.20.0.4");
    f.clock.as_mut().unwrap().skew_ms = Some(-3250);
    let got: Vec<String> = checks::check(node, &expect, &f)
        .iter()
        .map(Finding::to_string)
        .collect();
    let starts = [
        "gpu-00: NIC ens1f0np0 (b8:3f:d2:21:00:00) has no link (operstate down) and carries an address; fix: check the cable",
        "gpu-00: NIC ens1f1np1 (b8:3f:d2:21:00:01) is driven by mlx5_core, not ice; fix: check which card sits at 0000:1a:00.1",
        "gpu-00: root device /dev/disk/by-path/pci-0000:c5:00.0-nvme-1 not found; by-path names: /dev/disk/by-path/pci-0000:01:00.0-ata-1, /dev/disk/by-path/pci-0000:01:00.0-ata-1.0, /dev/disk/by-path/pci-0000:c3:00.0-nvme-1, /dev/disk/by-path/pci-0000:c4:00.0-nvme-1; fix: ",
        "gpu-00: clock not synchronized (leap status Not synchronised); fix: ",
        "gpu-00: clock is 3.2 s behind this machine's (maxClockSkew 2000 ms); fix: ",
        "gpu-00: warning: NTP source 10.20.0.4 (networks.ntp) is not among chrony's sources (10.20.0.9); fix: ",
    ];
    assert_eq!(got.len(), starts.len(), "{got:#?}");
    for (line, start) in got.iter().zip(starts) {
        assert!(
            line.starts_with(start),
            "{line}\n  should start with\n{start}"
        );
        assert!(!line.contains('\n'));
    }
    let mut f = parsed("gpu-00");
    f.nics.retain(|n| n.name != "ens1f1np1");
    let got = checks::check(node, &checks::expectations(&inv, node), &f);
    assert!(got[0].to_string().starts_with("gpu-00: NIC ens1f1np1 (b8:3f:d2:21:00:01) not found; the node's NICs: ens1f0np0 b8:3f:d2:21:00:00, ens2f0 6c:fe:54:4a:00:40, ens2f1 6c:fe:54:4a:00:41; fix: "), "{}", got[0]);
}

#[tokio::test]
async fn gather_reads_this_machine() {
    let local = Local {
        name: "here".into(),
    };
    let f = facts::gather(&local).await.unwrap();
    assert!(!f.hostname.is_empty());
    assert!(!f.kernel.is_empty());
    assert!(f.nics.iter().all(|n| n.name != "lo"), "lo is left out");
    assert!(f
        .disks
        .iter()
        .all(|d| !d.name.starts_with("loop") && !d.name.starts_with("zram")));
    let sys_pci = fs_err::read_dir("/sys/bus/pci/devices")
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(f.pci.len(), sys_pci, "every PCI device");
    let sys_net = fs_err::read_dir("/sys/class/net")
        .map(|d| {
            d.filter(|e| e.as_ref().unwrap().file_name() != "lo")
                .count()
        })
        .unwrap_or(0);
    assert_eq!(f.nics.len(), sys_net, "every interface but lo");
    assert!(f
        .pci
        .iter()
        .all(|d| d.vendor.len() == 4 && !d.vendor.starts_with("0x")));
    assert!(
        f.clock.as_ref().is_some_and(|c| c.skew_ms.is_some()),
        "the skew is measured"
    );
    // The same hardware, read twice, gives the same stable facts.
    assert_eq!(facts::gather(&local).await.unwrap().stable().pci, f.pci);
}
