//! Alternating rounds (issue 31, points 6 and 7): one run of each tool per round, which goes
//! first alternating from round to round, so a slow stretch of the shared machine falls on both
//! tools; then the median and spread of each tool and the median of the per-round ratios. And the
//! machine's own counters around every run (pressure stall time, bytes written back to disk,
//! dirty memory at the start), which tell a slow round's cause: CPU shared with others, or the
//! disk flushing.

use std::fmt::Write as _;

use super::Measured;

/// Rounds of each alternating comparison: BENCH_ROUNDS, default 5.
pub fn count() -> usize {
    super::env_u64("BENCH_ROUNDS", 5).max(1) as usize
}

/// The system-wide counters read around a run.
#[derive(Clone, Copy, Debug, Default)]
pub struct Machine {
    /// Microseconds some task waited for a CPU (`/proc/pressure/cpu`, `some`).
    cpu_wait_us: u64,
    /// Microseconds some task waited on I/O (`/proc/pressure/io`, `some`).
    io_wait_us: u64,
    /// Microseconds every task waited on I/O (`full`): nothing ran for the disk.
    io_full_us: u64,
    /// KiB written to block devices (`/proc/vmstat` `pgpgout`).
    written_kib: u64,
    /// Dirty page-cache pages waiting to be written back (`nr_dirty`).
    dirty_pages: u64,
}

impl Machine {
    /// The counters now (zeros where the kernel does not have them).
    pub fn now() -> Machine {
        let psi = |file: &str, kind: &str| -> u64 {
            let text = fs_err::read_to_string(format!("/proc/pressure/{file}")).unwrap_or_default();
            text.lines()
                .find(|l| l.starts_with(kind))
                .and_then(|l| l.rsplit("total=").next())
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        };
        let vmstat = fs_err::read_to_string("/proc/vmstat").unwrap_or_default();
        let field = |name: &str| -> u64 {
            vmstat
                .lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        };
        Machine {
            cpu_wait_us: psi("cpu", "some"),
            io_wait_us: psi("io", "some"),
            io_full_us: psi("io", "full"),
            written_kib: field("pgpgout"),
            dirty_pages: field("nr_dirty"),
        }
    }

    /// What happened between `self` (taken before a run) and `after`.
    pub fn since(&self, after: &Machine) -> String {
        let s = |a: u64, b: u64| b.saturating_sub(a) as f64 / 1e6;
        format!(
            "CPU wait {:.1} s, I/O wait {:.1} s (all stalled {:.1} s), {} MiB written to disk, \
             {} MiB dirty at the start; load {}",
            s(self.cpu_wait_us, after.cpu_wait_us),
            s(self.io_wait_us, after.io_wait_us),
            s(self.io_full_us, after.io_full_us),
            after.written_kib.saturating_sub(self.written_kib) / 1024,
            self.dirty_pages * 4 / 1024,
            load(),
        )
    }
}

/// The time of day (UTC), to find a round in a trace taken beside the bench (`vmstat -t 1`).
fn clock() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        % 86_400;
    format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60)
}

/// The 1-minute load average, as `uptime` prints it.
fn load() -> String {
    fs_err::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|t| t.split_whitespace().next().map(str::to_string))
        .unwrap_or_default()
}

/// Each tool's runs, in round order.
pub struct Rounds {
    pub ours: Vec<Measured>,
    pub theirs: Vec<Measured>,
}

/// `n` rounds of `ours` and `theirs` (each given the round number), ours first in even rounds,
/// theirs first in odd ones.
pub fn alternate(
    n: usize,
    mut ours: impl FnMut(usize) -> Measured,
    mut theirs: impl FnMut(usize) -> Measured,
) -> Rounds {
    let mut r = Rounds {
        ours: Vec::new(),
        theirs: Vec::new(),
    };
    for i in 0..n {
        eprintln!("  round {} of {n} at {} UTC", i + 1, clock());
        if i % 2 == 0 {
            r.ours.push(ours(i));
            r.theirs.push(theirs(i));
        } else {
            r.theirs.push(theirs(i));
            r.ours.push(ours(i));
        }
    }
    r
}

/// The median of `v` (the mean of the middle two for an even count).
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// Lowest, highest and their difference.
fn spread(v: &[f64]) -> (f64, f64, f64) {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (lo, hi, hi - lo)
}

impl Rounds {
    fn walls(runs: &[Measured]) -> Vec<f64> {
        runs.iter().map(|m| m.wall).collect()
    }

    /// Per round, ours over theirs.
    pub fn ratios(&self) -> Vec<f64> {
        self.ours
            .iter()
            .zip(&self.theirs)
            .map(|(o, t)| o.wall / t.wall.max(1e-9))
            .collect()
    }

    /// Each tool's median run (by wall time), for the summary table.
    pub fn medians(&self) -> (Measured, Measured) {
        let pick = |runs: &[Measured]| {
            let mut s = runs.to_vec();
            s.sort_by(|a, b| a.wall.total_cmp(&b.wall));
            let mut m = s[s.len() / 2];
            m.wall = median(&Self::walls(runs));
            m
        };
        (pick(&self.ours), pick(&self.theirs))
    }

    /// A Markdown block: per round both walls and the ratio, then each tool's median and
    /// spread, the median ratio against `goal`, and whether our spread is within theirs.
    pub fn report(&self, what: &str, ours: &str, theirs: &str, goal: f64) -> String {
        let mut out = format!(
            "\n{what}, {} alternating rounds:\n\n| round | {ours} | {theirs} | ratio |\n|---|---|---|---|\n",
            self.ours.len()
        );
        for (i, ((o, t), r)) in self
            .ours
            .iter()
            .zip(&self.theirs)
            .zip(self.ratios())
            .enumerate()
        {
            let _ = writeln!(out, "| {} | {} | {} | {r:.2}x |", i + 1, o.cell(), t.cell());
        }
        out.push('\n');
        let (ow, tw) = (Self::walls(&self.ours), Self::walls(&self.theirs));
        for (label, w) in [(ours, &ow), (theirs, &tw)] {
            let (lo, hi, width) = spread(w);
            let m = median(w);
            let _ = writeln!(
                out,
                "- {label}: median {m:.2} s, {lo:.2}-{hi:.2} s (spread {width:.2} s, {:.0}% of its median)",
                100.0 * width / m.max(1e-9)
            );
        }
        let ratio = median(&self.ratios());
        let (_, _, ours_width) = spread(&ow);
        let (_, _, theirs_width) = spread(&tw);
        let verdict = |ok: bool| if ok { "met" } else { "**not met**" };
        let _ = writeln!(
            out,
            "- median ratio {ratio:.2}x (goal ≤ {goal}x: {}); ratio of the medians {:.2}x; \
             spread {ours_width:.2} s against {theirs_width:.2} s (goal: no wider: {})",
            verdict(ratio <= goal),
            median(&ow) / median(&tw).max(1e-9),
            verdict(ours_width <= theirs_width),
        );
        out
    }
}
