//! A node's hardware as it reports it: PCI devices, loaded kernel modules, NICs, block devices
//! with their `/dev/disk/by-path` names, time sync, kernel and host name. Read natively: one
//! POSIX `sh` script ([`SCRIPT`], one round trip, no bash, no python on the node) prints
//! tab-separated records that [`parse`] reads; [`gather`] runs it over any [`Remote`] and
//! measures the node's clock against this machine's. Its error ([`FactsError`]) tells a node
//! lost on the way from a script that failed or printed something [`parse`] refuses.
//!
//! Record lines are `KIND<TAB>ID<TAB>KEY<TAB>VALUE` (`pci`, `0000:18:00.0`, `vendor`, `0x10de`), the
//! last line `end` (a cut-off output is refused, not read as a node with fewer devices).

use super::{Exec, Remote, RemoteError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What a node reports. Lists are sorted (PCI and by-path by address or path, the rest by
/// name), so the same hardware gives the same JSON; what varies per run is in [`Facts::clock`]
/// alone ([`Facts::stable`] drops it).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Facts {
    /// `hostname`.
    pub hostname: String,
    /// `uname -r`.
    pub kernel: String,
    /// Every PCI device.
    pub pci: Vec<PciDevice>,
    /// Loaded kernel modules (`/proc/modules`).
    pub modules: Vec<String>,
    /// Network interfaces except `lo`.
    pub nics: Vec<NetInterface>,
    /// Block devices except loop, ram and zram.
    pub disks: Vec<BlockDevice>,
    /// Time synchronization.
    pub time: TimeSync,
    /// The node's clock and its skew against this machine: different on every run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<Clock>,
}

/// One PCI device (`/sys/bus/pci/devices/ADDRESS`). Ids are lower-case hex without `0x`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PciDevice {
    /// `0000:18:00.0`.
    pub address: String,
    /// `10de`.
    pub vendor: String,
    /// `2335`.
    pub device: String,
    /// `030200`.
    pub class: String,
    /// The NUMA node; None when the platform has none (-1).
    pub numa_node: Option<u32>,
    /// The bound driver (`nvidia`, `mlx5_core`); None when unbound.
    pub driver: Option<String>,
}

/// One network interface (`/sys/class/net/NAME`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetInterface {
    /// `ens1f0np0`.
    pub name: String,
    /// The MAC, lower case.
    pub mac: Option<String>,
    /// A bond member's own MAC (its `address` is the bond's), lower case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permanent_mac: Option<String>,
    /// The driver of its device; None for a virtual interface (bond, VLAN, bridge).
    pub driver: Option<String>,
    /// The PCI address of its device; None for a virtual interface.
    pub pci_address: Option<String>,
    /// `up`, `down`, `lowerlayerdown`, ...
    pub operstate: Option<String>,
    /// Carrier detected (link up); None when unreadable (interface administratively down).
    pub carrier: Option<bool>,
    /// Link speed, Mb/s; None when unknown.
    pub speed_mbps: Option<u32>,
    /// MTU.
    pub mtu: Option<u32>,
}

/// One block device (`/sys/block/NAME`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockDevice {
    /// `nvme0n1`, `sda`.
    pub name: String,
    /// Size in bytes.
    pub size_bytes: u64,
    /// Spinning disk.
    pub rotational: Option<bool>,
    /// `device/model`, trimmed.
    pub model: Option<String>,
    /// `device/serial`, or the WWID.
    pub serial: Option<String>,
    /// Every `/dev/disk/by-path/...` link that resolves to it, full paths, sorted.
    pub by_path: Vec<String>,
}

/// Time synchronization as the node's tools report it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TimeSync {
    /// Which tool answered: `chronyc`, `timedatectl`, or None (neither present).
    pub tool: Option<String>,
    /// Whether the clock is synchronized; None when no tool answered.
    pub synchronized: Option<bool>,
    /// chrony's leap status (`Normal`, `Not synchronised`).
    pub leap_status: Option<String>,
    /// chrony's sources, by address.
    pub sources: Vec<TimeSource>,
}

/// One of chrony's sources.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TimeSource {
    /// Its address (`chronyc -n`).
    pub address: String,
    /// chrony's state character: `*` selected, `+` combined, `-`, `?` unreachable, `x`, `~`.
    pub state: String,
    /// Whether chrony synchronizes to it now (`*`).
    pub selected: bool,
}

/// The node's clock, read at the start and end of the script.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Clock {
    /// The node's time halfway through the script, nanoseconds since the epoch.
    pub node_ns: i128,
    /// The node's clock minus this machine's (at the midpoint of the round trip), ms; set by
    /// [`gather`].
    pub skew_ms: Option<i64>,
}

impl Facts {
    /// The facts without what varies per run (the clock): what golden files compare.
    pub fn stable(&self) -> Facts {
        Facts {
            clock: None,
            ..self.clone()
        }
    }

    /// Pretty JSON, as `RUN/prep/facts/NODE.json` holds it.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("facts serialize") + "\n"
    }

    /// The loaded module `name` (`-` and `_` are the same to the kernel).
    pub fn module_loaded(&self, name: &str) -> bool {
        let want = name.replace('-', "_");
        self.modules.iter().any(|m| m.replace('-', "_") == want)
    }
}

/// The script: POSIX sh, reads only, prints records, ends with `end`.
pub const SCRIPT: &str = r#"export LC_ALL=C PATH="$PATH:/usr/sbin:/sbin"
r() { x=; { IFS= read -r x || [ -n "$x" ]; } 2>/dev/null <"$4" || return 1; printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$x"; }
l() { [ -L "$4" ] && y=$(readlink "$4") && printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${y##*/}"; }
printf 'host\t-\tclock\t%s\n' "$(date +%s%N)"
printf 'host\t-\thostname\t%s\n' "$(hostname 2>/dev/null || cat /proc/sys/kernel/hostname)"
printf 'host\t-\tkernel\t%s\n' "$(uname -r)"
for d in /sys/bus/pci/devices/*; do
  [ -e "$d" ] || continue; a=${d##*/}
  printf 'pci\t%s\t-\t-\n' "$a"
  for k in vendor device class numa_node; do r pci "$a" "$k" "$d/$k"; done
  l pci "$a" driver "$d/driver"
done
[ -r /proc/modules ] && while read -r m rest; do printf 'module\t%s\t-\t-\n' "$m"; done </proc/modules
for d in /sys/class/net/*; do
  [ -e "$d" ] || continue; n=${d##*/}; [ "$n" = lo ] && continue
  printf 'net\t%s\t-\t-\n' "$n"
  for k in address operstate carrier speed mtu; do r net "$n" "$k" "$d/$k"; done
  r net "$n" permaddr "$d/bonding_slave/perm_hwaddr"
  l net "$n" driver "$d/device/driver"; l net "$n" device "$d/device"
done
for d in /sys/block/*; do
  [ -e "$d" ] || continue; b=${d##*/}
  case $b in loop*|ram*|zram*) continue;; esac
  printf 'block\t%s\t-\t-\n' "$b"
  r block "$b" size "$d/size"; r block "$b" rotational "$d/queue/rotational"
  r block "$b" model "$d/device/model"
  r block "$b" serial "$d/device/serial" || r block "$b" serial "$d/wwid" || r block "$b" serial "$d/device/wwid"
done
for p in /dev/disk/by-path/*; do
  [ -e "$p" ] || continue; t=$(readlink -f "$p") && printf 'bypath\t%s\t-\t%s\n' "${t##*/}" "$p"
done
if command -v chronyc >/dev/null 2>&1; then
  printf 'time\t-\ttool\tchronyc\n'
  chronyc -n -c tracking 2>/dev/null | while IFS= read -r x; do printf 'time\t-\ttracking\t%s\n' "$x"; done
  chronyc -n -c sources 2>/dev/null | while IFS= read -r x; do printf 'time\t-\tsource\t%s\n' "$x"; done
elif command -v timedatectl >/dev/null 2>&1; then
  printf 'time\t-\ttool\ttimedatectl\n'
  printf 'time\t-\tntpsynchronized\t%s\n' "$(timedatectl show -p NTPSynchronized --value 2>/dev/null)"
fi
printf 'host\t-\tclock\t%s\n' "$(date +%s%N)"
echo end
"#;

/// Why a node's facts could not be had. Callers branch on it: a node lost on the way
/// ([`FactsError::is_unreachable`]) is unreachable, anything else is a problem of a node that
/// answered. Every message names the node.
#[derive(Debug, thiserror::Error)]
pub enum FactsError {
    /// The script could not be run: the node unreachable, its login or host key refused.
    #[error(transparent)]
    Remote(#[from] RemoteError),
    /// The script did not finish within its time (a hung NFS mount, a stuck `chronyc`).
    #[error("{host}: reading hardware facts timed out after {after:?}")]
    TimedOut {
        /// The node.
        host: String,
        /// The script's timeout.
        after: Duration,
    },
    /// The script ran and failed, or its output went past the cap.
    #[error(
        "{host}: reading hardware facts failed (exit status {status:?}{}): {stderr}",
        if *.truncated { ", output cut off" } else { "" }
    )]
    Script {
        /// The node.
        host: String,
        /// Its exit status (`None`: killed by a signal).
        status: Option<i32>,
        /// Whether the output went past the cap.
        truncated: bool,
        /// What it wrote on stderr.
        stderr: String,
    },
    /// The script succeeded but its output is not what it prints.
    #[error("{host}: reading hardware facts failed: {source}")]
    Unreadable {
        /// The node.
        host: String,
        /// Where and what.
        source: ParseError,
    },
}

impl FactsError {
    /// Whether the node could not be reached (or refused us): it counts as unreachable, not
    /// as a node with a hardware problem.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, FactsError::Remote(e) if e.is_unreachable())
    }
}

/// How long [`SCRIPT`] may run.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs [`SCRIPT`] on `remote` (one command) and reads its output; the clock's skew is the
/// node's clock halfway through the script against this machine's halfway through the round
/// trip.
pub async fn gather(remote: &dyn Remote) -> Result<Facts, FactsError> {
    let mut exec = Exec::new(SCRIPT).with_timeout(SCRIPT_TIMEOUT);
    exec.output_cap = 16 << 20;
    let before = now_ns();
    let out = match remote.exec(exec).await {
        Ok(out) => out,
        // The command of a timeout is the whole script: name what it was doing instead.
        Err(RemoteError::Timeout { after, .. }) => {
            return Err(FactsError::TimedOut {
                host: remote.name().to_string(),
                after,
            })
        }
        Err(e) => return Err(e.into()),
    };
    let after = now_ns();
    let host = || remote.name().to_string();
    if !out.success() || out.truncated {
        return Err(FactsError::Script {
            host: host(),
            status: out.status,
            truncated: out.truncated,
            stderr: out.stderr_text(),
        });
    }
    let mut facts = parse(&out.stdout_text()).map_err(|source| FactsError::Unreadable {
        host: host(),
        source,
    })?;
    if let Some(clock) = &mut facts.clock {
        let local = (before + after) / 2;
        clock.skew_ms = i64::try_from((clock.node_ns - local) / 1_000_000).ok();
    }
    Ok(facts)
}

fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0)
}

/// Why [`SCRIPT`]'s output could not be read: the node printed something that is not the
/// script's records (a cut-off stream, a login banner, another script). Lines are the
/// output's, from 1.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// A line that is not `KIND<TAB>ID<TAB>KEY<TAB>VALUE`.
    #[error("line {line}: not a record (KIND, ID, KEY, VALUE separated by tabs): {text:?}")]
    NotARecord {
        /// Where.
        line: usize,
        /// The line.
        text: String,
    },
    /// A record kind the script does not print.
    #[error("line {line}: unknown record kind {kind:?}")]
    UnknownKind {
        /// Where.
        line: usize,
        /// The kind.
        kind: String,
    },
    /// A field the script does not print for that kind of record.
    #[error("line {line}: unknown {record} field {key:?}")]
    UnknownField {
        /// Where.
        line: usize,
        /// The record, as messages name it (`PCI`, `NIC`, `block device`, `host`, `time`).
        record: &'static str,
        /// The field.
        key: String,
    },
    /// A block device's size that is not a number.
    #[error("line {line}: size {value:?} is not a number of sectors")]
    BadSize {
        /// Where.
        line: usize,
        /// The value.
        value: String,
    },
    /// A line after the `end` line.
    #[error("line {line}: output after `end`")]
    AfterEnd {
        /// Where.
        line: usize,
    },
    /// No `end` line: the output was cut off.
    #[error("the output ends before its `end` line (cut off?)")]
    CutOff,
    /// No `hostname` record.
    #[error("no host name in the output")]
    NoHostName,
}

/// A record's problem, before [`parse`] gives it its line.
enum Unread {
    Kind(String),
    Field(&'static str, String),
    Size(String),
}

impl Unread {
    fn at(self, line: usize) -> ParseError {
        match self {
            Unread::Kind(kind) => ParseError::UnknownKind { line, kind },
            Unread::Field(record, key) => ParseError::UnknownField { line, record, key },
            Unread::Size(value) => ParseError::BadSize { line, value },
        }
    }
}

/// Reads [`SCRIPT`]'s output: every record known, the `end` line present.
pub fn parse(text: &str) -> Result<Facts, ParseError> {
    let mut p = Parsed::default();
    let mut ended = false;
    for (i, line) in text.lines().enumerate() {
        if ended {
            return Err(ParseError::AfterEnd { line: i + 1 });
        }
        if line == "end" {
            ended = true;
            continue;
        }
        let f: Vec<&str> = line.splitn(4, '\t').collect();
        let [kind, id, key, value] = f[..] else {
            return Err(ParseError::NotARecord {
                line: i + 1,
                text: line.to_string(),
            });
        };
        p.record(kind, id, key, value).map_err(|e| e.at(i + 1))?;
    }
    if !ended {
        return Err(ParseError::CutOff);
    }
    p.finish()
}

/// The records read so far, keyed by their id.
#[derive(Default)]
struct Parsed {
    facts: Facts,
    pci: BTreeMap<String, PciDevice>,
    nics: BTreeMap<String, NetInterface>,
    disks: BTreeMap<String, BlockDevice>,
    clocks: Vec<i128>,
    ntp_synchronized: Option<bool>,
}

impl Parsed {
    fn record(&mut self, kind: &str, id: &str, key: &str, value: &str) -> Result<(), Unread> {
        match kind {
            "host" => self.host(key, value),
            "pci" => pci_field(
                self.pci.entry(id.to_string()).or_insert_with(|| PciDevice {
                    address: id.to_string(),
                    ..Default::default()
                }),
                key,
                value,
            ),
            "module" => {
                self.facts.modules.push(id.to_string());
                Ok(())
            }
            "net" => net_field(
                self.nics
                    .entry(id.to_string())
                    .or_insert_with(|| NetInterface {
                        name: id.to_string(),
                        ..Default::default()
                    }),
                key,
                value,
            ),
            "block" => block_field(
                self.disks
                    .entry(id.to_string())
                    .or_insert_with(|| BlockDevice {
                        name: id.to_string(),
                        ..Default::default()
                    }),
                key,
                value,
            ),
            "bypath" => {
                // Partitions' links resolve to partitions, not to disks: those are not kept.
                if let Some(d) = self.disks.get_mut(id) {
                    d.by_path.push(value.to_string());
                }
                Ok(())
            }
            "time" => self.time(key, value),
            _ => Err(Unread::Kind(kind.to_string())),
        }
    }

    fn host(&mut self, key: &str, value: &str) -> Result<(), Unread> {
        match key {
            "hostname" => self.facts.hostname = value.trim().to_string(),
            "kernel" => self.facts.kernel = value.trim().to_string(),
            // `date +%N` is not supported everywhere (busybox prints `N`): no clock then.
            "clock" => self.clocks.extend(value.trim().parse::<i128>().ok()),
            _ => return Err(Unread::Field("host", key.to_string())),
        }
        Ok(())
    }

    fn time(&mut self, key: &str, value: &str) -> Result<(), Unread> {
        let t = &mut self.facts.time;
        match key {
            "tool" => t.tool = Some(value.to_string()),
            // chronyc -c tracking: the leap status is the last of its 14 fields.
            "tracking" => {
                let leap = value.rsplit(',').next().unwrap_or("").trim().to_string();
                t.synchronized = Some(!leap.is_empty() && leap != "Not synchronised");
                t.leap_status = Some(leap);
            }
            // chronyc -c sources: MODE,STATE,ADDRESS,STRATUM,...
            "source" => {
                let f: Vec<&str> = value.split(',').collect();
                if let [_, state, address, ..] = f[..] {
                    t.sources.push(TimeSource {
                        address: address.to_string(),
                        state: state.to_string(),
                        selected: state == "*",
                    });
                }
            }
            "ntpsynchronized" => {
                self.ntp_synchronized = match value.trim() {
                    "yes" => Some(true),
                    "no" => Some(false),
                    _ => None,
                }
            }
            _ => return Err(Unread::Field("time", key.to_string())),
        }
        Ok(())
    }

    fn finish(mut self) -> Result<Facts, ParseError> {
        if self.facts.hostname.is_empty() {
            return Err(ParseError::NoHostName);
        }
        let f = &mut self.facts;
        f.pci = self.pci.into_values().collect();
        f.nics = self.nics.into_values().collect();
        f.disks = self.disks.into_values().collect();
        for d in &mut f.disks {
            d.by_path.sort();
        }
        f.modules.sort();
        f.modules.dedup();
        f.time.sources.sort_by(|a, b| a.address.cmp(&b.address));
        if f.time.tool.as_deref() == Some("timedatectl") {
            f.time.synchronized = self.ntp_synchronized;
        }
        if let [first, .., last] = self.clocks[..] {
            f.clock = Some(Clock {
                node_ns: (first + last) / 2,
                skew_ms: None,
            });
        }
        Ok(self.facts)
    }
}

/// `0x10de` -> `10de`.
fn hex_id(value: &str) -> String {
    let v = value.trim();
    v.strip_prefix("0x").unwrap_or(v).to_ascii_lowercase()
}

fn pci_field(d: &mut PciDevice, key: &str, value: &str) -> Result<(), Unread> {
    match key {
        "-" => {}
        "vendor" => d.vendor = hex_id(value),
        "device" => d.device = hex_id(value),
        "class" => d.class = hex_id(value),
        "numa_node" => d.numa_node = value.trim().parse().ok(),
        "driver" => d.driver = Some(value.to_string()),
        _ => return Err(Unread::Field("PCI", key.to_string())),
    }
    Ok(())
}

fn net_field(n: &mut NetInterface, key: &str, value: &str) -> Result<(), Unread> {
    let v = value.trim();
    match key {
        "-" => {}
        "address" => n.mac = Some(v.to_ascii_lowercase()),
        "permaddr" => n.permanent_mac = Some(v.to_ascii_lowercase()),
        "operstate" => n.operstate = Some(v.to_string()),
        "carrier" => n.carrier = Some(v == "1"),
        // -1 (no link) or unreadable: unknown.
        "speed" => n.speed_mbps = v.parse::<i64>().ok().and_then(|s| u32::try_from(s).ok()),
        "mtu" => n.mtu = v.parse().ok(),
        "driver" => n.driver = Some(v.to_string()),
        // The device link names a PCI function for a PCI NIC; virtio and others are not PCI.
        "device" => {
            n.pci_address = crate::inventory::model::is_pci_address(v).then(|| v.to_string())
        }
        _ => return Err(Unread::Field("NIC", key.to_string())),
    }
    Ok(())
}

fn block_field(d: &mut BlockDevice, key: &str, value: &str) -> Result<(), Unread> {
    let v = value.trim();
    let text = || (!v.is_empty()).then(|| v.to_string());
    match key {
        "-" => {}
        "size" => {
            d.size_bytes = v
                .parse::<u64>()
                .map_err(|_| Unread::Size(v.to_string()))?
                .saturating_mul(512)
        }
        "rotational" => d.rotational = Some(v == "1"),
        "model" => d.model = text(),
        "serial" => d.serial = text(),
        _ => return Err(Unread::Field("block device", key.to_string())),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hostprep::{BoxFuture, Output};

    /// A node that answers the facts script with what `answer` makes.
    struct Canned(fn() -> Result<Output, RemoteError>);

    impl Remote for Canned {
        fn name(&self) -> &str {
            "gpu-00"
        }

        fn exec<'a>(&'a self, _: Exec<'a>) -> BoxFuture<'a, Result<Output, RemoteError>> {
            let answer = (self.0)();
            Box::pin(async move { answer })
        }
    }

    fn answered(status: i32, stdout: &str, stderr: &str) -> Result<Output, RemoteError> {
        Ok(Output {
            status: Some(status),
            stdout: stdout.as_bytes().to_vec(),
            stderr: stderr.as_bytes().to_vec(),
            truncated: false,
        })
    }

    #[tokio::test]
    async fn a_caller_tells_a_lost_node_from_a_failed_script_and_unreadable_output() {
        let lost = gather(&Canned(|| {
            Err(RemoteError::Unreachable {
                host: "gpu-00 (10.0.0.1:22)".into(),
                detail: "connection lost".into(),
            })
        }))
        .await
        .unwrap_err();
        assert!(lost.is_unreachable(), "{lost:?}");

        let failed = gather(&Canned(|| answered(2, "", "sh: syntax error\n")))
            .await
            .unwrap_err();
        assert!(
            matches!(
                failed,
                FactsError::Script {
                    status: Some(2),
                    truncated: false,
                    ..
                }
            ),
            "{failed:?}"
        );
        assert!(!failed.is_unreachable());
        assert_eq!(
            failed.to_string(),
            "gpu-00: reading hardware facts failed (exit status Some(2)): sh: syntax error"
        );

        let cut = gather(&Canned(|| answered(0, "host\t-\thostname\tgpu-00\n", "")))
            .await
            .unwrap_err();
        assert!(
            matches!(
                cut,
                FactsError::Unreadable {
                    source: ParseError::CutOff,
                    ..
                }
            ),
            "{cut:?}"
        );
        assert!(!cut.is_unreachable());
    }

    /// A timed-out script was reported with the whole script as its command: pinned so the
    /// message names what was being done instead.
    #[tokio::test]
    async fn a_timed_out_script_is_named_not_quoted() {
        let slow = gather(&Canned(|| {
            Err(RemoteError::Timeout {
                host: "gpu-00 (10.0.0.1:22)".into(),
                after: SCRIPT_TIMEOUT,
                command: SCRIPT.into(),
            })
        }))
        .await
        .unwrap_err();
        assert!(matches!(slow, FactsError::TimedOut { .. }), "{slow:?}");
        assert!(!slow.is_unreachable());
        assert_eq!(
            slow.to_string(),
            "gpu-00: reading hardware facts timed out after 60s"
        );
    }

    #[test]
    fn parse_errors_carry_their_line() {
        assert_eq!(
            parse("host\t-\thostname\tx\nbogus\t-\t-\t-\nend\n"),
            Err(ParseError::UnknownKind {
                line: 2,
                kind: "bogus".into()
            })
        );
        let bad_size = parse("host\t-\thostname\tx\nblock\tsda\tsize\tlots\nend\n").unwrap_err();
        assert_eq!(
            bad_size.to_string(),
            "line 2: size \"lots\" is not a number of sectors"
        );
        assert_eq!(
            parse("pci\t0000:00:01.0\tcolour\tred\nend\n"),
            Err(ParseError::UnknownField {
                line: 1,
                record: "PCI",
                key: "colour".into()
            })
        );
        assert_eq!(parse("end\n"), Err(ParseError::NoHostName));
    }
}
