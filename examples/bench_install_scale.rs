//! Install at site size (issue 31, point 4): the lab brought up with N nodes (a BMC, a network
//! namespace and an SSH host each) and `bootstrap install` run through boot, wait and prep on
//! it, for each N of BENCH_NODES (default `3,24`). Each stage is its own `bootstrap install
//! --until STAGE` under GNU `time -v` (wall, CPU, peak RSS), with the stage's own seconds from
//! `bootstrap install status`. `boot.parallel` and `prep.forks` are set to N, so a stage is
//! bounded by its slowest node, not by waves; `BENCH_FORKS` sets another `prep.forks`.
//!
//! Set up once: an upstream registry seeded by `bootstrap-lab seed`, releases 4.18.2 and 4.18.3
//! mirrored into a TLS site registry with Basic auth, the lab inventory pointed at it (as the
//! install tests do). Per N: `bootstrap-lab up --step BENCH_STEP` (default 1s), `bootstrap
//! install --until iso` (not timed), then boot, wait, `bootstrap-lab repair` (the two findings
//! the lab's fixtures plant; not timed) and prep, each timed; every BMC must have been reset
//! exactly once. BENCH_ROUNDS (default 1) repeats it, the sizes alternating; each stage's
//! median is taken. Prints one Markdown table with the ratio of each stage at the largest N to
//! the smallest, against the goal (at most 1.5x), and, for the largest N, how many CPU seconds
//! the whole machine was busy during each stage (`/proc/stat`): the lab's nodes all run on
//! this machine's cores, so that over the core count is a floor no product can go below. Run
//! through `bench/install-scale.sh`.

#[path = "../tests/it/support/mod.rs"]
#[allow(dead_code, unused_imports)]
mod support;

#[path = "bench_lab/mod.rs"]
#[allow(dead_code)]
mod bench_lab;

use std::path::{Path, PathBuf};
use std::time::Instant;
use support::Registry;

/// The stages timed, in order.
const STAGES: [&str; 3] = ["boot", "wait", "prep"];

/// The goal: a stage at the largest N within this factor of the same stage at the smallest.
const GOAL: f64 = 1.5;

struct Bench {
    bin: String,
    lab: String,
    step: String,
    forks: Option<usize>,
    site: Registry,
    record: PathBuf,
    work: PathBuf,
}

/// One N's figures.
struct Row {
    nodes: usize,
    lab_up: f64,
    lab_rss: (f64, usize),
    /// Per stage: its name, GNU time's figures, the stage's own seconds, and (over rounds) the
    /// fastest and slowest seconds.
    stages: Vec<(String, bench_lab::Timed, f64, (f64, f64))>,
}

fn main() {
    let bin = bench_lab::binary("BOOTSTRAP_BIN", "target/release/bootstrap");
    let lab = bench_lab::binary("BOOTSTRAP_LAB_BIN", "target/release/bootstrap-lab");
    let sizes: Vec<usize> = std::env::var("BENCH_NODES")
        .unwrap_or_else(|_| "3,24".into())
        .split(',')
        .map(|n| {
            n.trim()
                .parse()
                .expect("BENCH_NODES: node counts, e.g. 3,24")
        })
        .collect();
    let forks = std::env::var("BENCH_FORKS")
        .ok()
        .map(|f| f.parse().expect("BENCH_FORKS: a number"));
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let work =
        std::env::var_os("BENCH_DIR").map_or_else(|| tmp.path().to_path_buf(), PathBuf::from);
    fs_err::create_dir_all(&work).unwrap();

    eprintln!("setting up: an upstream registry seeded by bootstrap-lab seed, releases mirrored into a TLS site registry");
    let upstream = Registry::plain();
    let site = Registry::tls_basic("site-puller", "site-pull-secret-bench");
    let record = mirror_releases(&bin, &lab, &upstream, &site, &work);
    let bench = Bench {
        bin,
        lab,
        step: std::env::var("BENCH_STEP").unwrap_or_else(|_| "1s".into()),
        forks,
        site,
        record,
        work,
    };
    // The sizes alternate, round after round (the machine's noise falls on both); each
    // stage's median over the rounds is compared.
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .map_or(1, |r| r.parse().expect("BENCH_ROUNDS: a number"));
    let mut runs: Vec<Vec<Row>> = sizes.iter().map(|_| Vec::new()).collect();
    for round in 0..rounds.max(1) {
        for (i, &n) in sizes.iter().enumerate() {
            eprintln!("\n== round {} of {rounds} ==", round + 1);
            runs[i].push(bench.measure(n));
        }
    }
    let rows: Vec<Row> = runs.into_iter().map(median_row).collect();
    print_table(&bench, &rows, rounds.max(1));
}

/// Seeds `upstream` and mirrors releases 4.18.2 and 4.18.3 into `site`; the mirror record.
fn mirror_releases(
    bin: &str,
    lab: &str,
    upstream: &Registry,
    site: &Registry,
    work: &Path,
) -> PathBuf {
    let seed = work.join("seed");
    let mut cmd = std::process::Command::new(lab);
    cmd.arg("seed")
        .arg(format!("docker://{}", upstream.host()))
        .args(["--plain-http", &upstream.host(), "--out"])
        .arg(&seed);
    bench_lab::checked(&mut cmd, "bootstrap-lab seed");
    let isc = work.join("isc.yaml");
    fs_err::write(
        &isc,
        "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  platform:\n    architectures: [amd64]\n    channels:\n    - name: stable-4.18\n      minVersion: 4.18.2\n      maxVersion: 4.18.3\n",
    )
    .unwrap();
    let record = work.join("mirror-record.json");
    let auth = work.join("auth.json");
    support::write_merged_authfile(&auth, &[site]);
    let mut cmd = std::process::Command::new(bin);
    cmd.arg("mirror")
        .arg("-c")
        .arg(&isc)
        .arg("--graph-url")
        .arg(format!("file://{}", seed.join("graph.json").display()))
        .arg("--record")
        .arg(&record)
        .arg(format!("docker://{}/ocp", site.host()))
        .args(["--plain-http", &upstream.host(), "--authfile"])
        .arg(&auth)
        .arg("--ca-bundle")
        .arg(site.ca_pem().unwrap())
        .current_dir(work);
    bench_lab::checked(&mut cmd, "bootstrap mirror");
    record
}

impl Bench {
    fn measure(&self, n: usize) -> Row {
        let dir = self.work.join(format!("n{n}"));
        let _ = fs_err::remove_dir_all(&dir);
        fs_err::create_dir_all(&dir).unwrap();
        let inv = support::labsite::site_inventory(&dir, &self.site, &self.record, "4.18.3");
        bench_lab::grow_nodes(&inv, n);
        let forks = self.forks.unwrap_or(n);
        bench_lab::site_setting(&inv, "boot", &format!("  parallel: {n}"));
        bench_lab::site_setting(&inv, "prep", &format!("  forks: {forks}"));
        eprintln!("\n== {n} nodes (boot.parallel {n}, prep.forks {forks}) ==");
        let started = Instant::now();
        let site =
            bench_lab::LabSite::up(&self.lab, &inv, &dir.join("lab"), &["--step", &self.step]);
        let lab_up = started.elapsed().as_secs_f64();
        let run = dir.join("run");
        let install = |until: &str| -> Vec<String> {
            [
                "install",
                "--inventory",
                &inv.display().to_string(),
                "--run",
                &run.display().to_string(),
                "--until",
                until,
            ]
            .map(String::from)
            .to_vec()
        };
        let mut cmd = std::process::Command::new(&self.bin);
        cmd.args(install("iso"));
        bench_lab::checked(&mut cmd, "bootstrap install --until iso");
        let mut stages = Vec::new();
        let mut lab_rss = (0.0, 0);
        for stage in STAGES {
            if stage == "prep" {
                // The two findings the lab's fixtures plant (seven GPUs, irdma), repaired as
                // the engineer would, so prep passes and puts the labels on. Repair needs the
                // nodes up (their SSH hosts), which they are a moment after the install ends.
                site.wait_hosts(n, std::time::Duration::from_secs(60));
                let mut cmd = std::process::Command::new(&self.lab);
                cmd.args(["repair", "--state"]).arg(&site.state);
                bench_lab::checked(&mut cmd, "bootstrap-lab repair");
            }
            let report = dir.join(format!("time-{stage}.txt"));
            let (t, out) = bench_lab::timed(&self.bin, &install(stage), &[], &report);
            fs_err::write(dir.join(format!("{stage}.err")), &out.stderr).unwrap();
            assert!(
                out.status.success(),
                "bootstrap install --until {stage} with {n} nodes failed:\n{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            let secs = stage_seconds(&self.bin, &run, stage);
            eprintln!(
                "{n} nodes: {stage}: {secs:.1} s in the stage, {:.1} s wall, {:.1} CPU s, peak RSS {:.0} MiB",
                t.wall.as_secs_f64(),
                t.cpu,
                t.rss_mib
            );
            stages.push((stage.to_string(), t, secs, (secs, secs)));
            if stage == "wait" {
                // Every node installed: every SSH host is up.
                lab_rss = site.rss_mib();
            }
        }
        for (node, resets) in site.resets() {
            assert_eq!(resets, 1, "{node} was reset {resets} times, not once");
        }
        Row {
            nodes: n,
            lab_up,
            lab_rss,
            stages,
        }
    }
}

/// The run whose stage took the median time, stage by stage (and the lab figures of the first).
fn median_row(mut runs: Vec<Row>) -> Row {
    let mut row = Row {
        nodes: runs[0].nodes,
        lab_up: runs[0].lab_up,
        lab_rss: runs[0].lab_rss,
        stages: Vec::new(),
    };
    for i in 0..STAGES.len() {
        runs.sort_by(|a, b| a.stages[i].2.total_cmp(&b.stages[i].2));
        let spread = (runs[0].stages[i].2, runs[runs.len() - 1].stages[i].2);
        let mut median = runs[runs.len() / 2].stages[i].clone();
        median.3 = spread;
        row.stages.push(median);
    }
    row
}

/// The seconds of `stage`'s last attempt, from `bootstrap install status --output json`.
fn stage_seconds(bin: &str, run: &Path, stage: &str) -> f64 {
    let mut cmd = std::process::Command::new(bin);
    cmd.args(["install", "status", "--run"])
        .arg(run)
        .args(["--output", "json"]);
    let status: serde_json::Value =
        serde_json::from_slice(&bench_lab::checked(&mut cmd, "bootstrap install status").stdout)
            .expect("install status JSON");
    status["stages"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["stage"] == stage))
        .and_then(|s| s["seconds"].as_f64())
        .unwrap_or_else(|| panic!("install status has no seconds for {stage}: {status}"))
}

fn print_table(bench: &Bench, rows: &[Row], rounds: usize) {
    let (Some(small), Some(large)) = (rows.first(), rows.last()) else {
        return;
    };
    println!(
        "\nbootstrap install on the lab, --step {}, median of {rounds} round(s) (spread in brackets), {} cores ({})\n",
        bench.step,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        bench.bin
    );
    print!("| stage |");
    for r in rows {
        print!(
            " {} nodes: stage / wall / CPU / peak RSS / machine CPU |",
            r.nodes
        );
    }
    println!(" {} vs {} nodes | goal |", large.nodes, small.nodes);
    println!("|---|{}---|---|", "---|".repeat(rows.len()));
    for (i, stage) in STAGES.iter().enumerate() {
        print!("| {stage} |");
        for r in rows {
            let (_, t, secs, (low, high)) = &r.stages[i];
            print!(
                " {secs:.1} s ({low:.1}-{high:.1}) / {:.1} s / {:.1} s / {:.0} MiB / {:.1} s |",
                t.wall.as_secs_f64(),
                t.cpu,
                t.rss_mib,
                t.machine_cpu
            );
        }
        let ratio = large.stages[i].2 / small.stages[i].2;
        let met = if ratio <= GOAL { "met" } else { "NOT met" };
        println!(" {ratio:.2}x | ≤ {GOAL}x: {met} |");
    }
    print!("| lab up |");
    for r in rows {
        print!(
            " {:.1} s; {} processes, {:.0} MiB RSS |",
            r.lab_up, r.lab_rss.1, r.lab_rss.0
        );
    }
    println!(" {:.2}x | — |", large.lab_up / small.lab_up);
    let peak = rows
        .iter()
        .flat_map(|r| r.stages.iter().map(|(_, t, _, _)| t.rss_mib))
        .fold(0.0, f64::max);
    println!("\nPeak RSS of bootstrap install over all runs: {peak:.0} MiB.");
    // What the machine itself allows: every node's work (its emulator, its sshd, its commands)
    // runs on these cores, so a stage cannot take less wall time than the machine's busy CPU
    // seconds over the cores, whatever the product does.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    for (i, stage) in STAGES.iter().enumerate() {
        let (_, t, secs, _) = &large.stages[i];
        let floor = t.machine_cpu / cores;
        println!(
            "{stage}, {} nodes: the machine was busy {:.1} CPU s ({:.1} s of them bootstrap's): at least {floor:.1} s on {cores} cores; the stage took {secs:.1} s ({:.0}% of its wall time is the machine's floor).",
            large.nodes,
            t.machine_cpu,
            t.cpu,
            100.0 * floor / t.wall.as_secs_f64().max(f64::EPSILON)
        );
    }
}
