//! Host prep against ansible-playbook (issue 31, point 5): the shipped playbooks
//! (`playbooks/handshake.yml`, `playbooks/gpu-node.yml`) run on the lab's SSH hosts by
//! `bootstrap prep` and by `ansible-playbook` (ansible-core from the lab venv), with the same
//! inventory file (the `RUN/prep/ansible-inventory.yaml` that `bootstrap prep` writes for
//! ansible-playbook) and the same forks, for each N of BENCH_NODES (default `3,24`) and each
//! forks of BENCH_FORKS (default `1,10`). Each run is under GNU `time -v` (wall, CPU, peak
//! RSS); the tools alternate, BENCH_ROUNDS times (default 2), and the table shows the median of
//! each and the ratio of the medians. Every run's recap (ok, changed, failed, ... per host,
//! summed over both playbooks) must be the same for both tools; the table prints them.
//!
//! The lab comes up with `--hosts-up` (every node's sshd at once, as if installed: no install
//! is needed); one `bootstrap prep --inventory` first learns the host keys into the run's
//! known_hosts and writes the Ansible inventory (its hardware checks find what the lab plants;
//! not timed). Run through `bench/prep-ansible.sh`.

#[path = "bench_lab/mod.rs"]
#[allow(dead_code)]
mod bench_lab;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The goal: bootstrap prep at most this fraction of ansible-playbook's time at forks 10.
const GOAL: f64 = 0.5;

/// Per host: ok, changed, unreachable, failed, skipped, rescued, ignored, summed over plays.
type Recap = BTreeMap<String, [u64; 7]>;

struct Bench {
    bin: String,
    lab: String,
    ansible: String,
    playbooks: Vec<PathBuf>,
    rounds: usize,
    work: PathBuf,
}

/// One tool's runs at one (nodes, forks).
#[derive(Default)]
struct Runs {
    times: Vec<bench_lab::Timed>,
    recap: Recap,
}

impl Runs {
    fn median(&self) -> bench_lab::Timed {
        let mut t = self.times.clone();
        t.sort_by_key(|t| t.wall);
        t[t.len() / 2]
    }

    fn spread(&self) -> String {
        let walls: Vec<f64> = self.times.iter().map(|t| t.wall.as_secs_f64()).collect();
        let min = walls.iter().copied().fold(f64::MAX, f64::min);
        let max = walls.iter().copied().fold(0.0, f64::max);
        format!("{min:.2}-{max:.2}")
    }
}

fn main() {
    let bin = bench_lab::binary("BOOTSTRAP_BIN", "target/release/bootstrap");
    let lab = bench_lab::binary("BOOTSTRAP_LAB_BIN", "target/release/bootstrap-lab");
    let venv = std::env::var("BOOTSTRAP_LAB_VENV").unwrap_or_else(|_| {
        format!(
            "{}/.cache/bootstrap/lab-venv",
            std::env::var("HOME").unwrap()
        )
    });
    let list = |name: &str, default: &str| -> Vec<usize> {
        std::env::var(name)
            .unwrap_or_else(|_| default.into())
            .split(',')
            .map(|n| {
                n.trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("{name}: numbers, e.g. {default}"))
            })
            .collect()
    };
    let sizes = list("BENCH_NODES", "3,24");
    let forks = list("BENCH_FORKS", "1,10");
    let rounds = list("BENCH_ROUNDS", "2")[0].max(1);
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let work =
        std::env::var_os("BENCH_DIR").map_or_else(|| tmp.path().to_path_buf(), PathBuf::from);
    fs_err::create_dir_all(&work).unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bench = Bench {
        bin,
        lab,
        ansible: format!("{venv}/bin/ansible-playbook"),
        playbooks: ["handshake.yml", "gpu-node.yml"]
            .iter()
            .map(|p| repo.join("playbooks").join(p))
            .collect(),
        rounds,
        work,
    };
    let ansible_version = std::process::Command::new(&bench.ansible)
        .arg("--version")
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or_default()
                .to_string()
        })
        .unwrap_or_else(|e| panic!("running {}: {e} (scripts/install-deps.sh)", bench.ansible));
    let mut rows = Vec::new();
    for &n in &sizes {
        rows.extend(bench.hosts(n, &forks));
    }
    println!(
        "\nthe shipped playbooks on the lab's SSH hosts, {rounds} alternating rounds, {} cores; {} against {ansible_version}\n",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        bench.bin
    );
    println!("| hosts | forks | ansible-playbook: wall (spread) / CPU / peak RSS | bootstrap prep: wall (spread) / CPU / peak RSS | time ratio | recap, both tools (ok / changed / failed / skipped, summed over hosts) | goal |");
    println!("|---|---|---|---|---|---|---|");
    for (n, f, ansible, ours) in &rows {
        let (a, b) = (ansible.median(), ours.median());
        let ratio = b.wall.as_secs_f64() / a.wall.as_secs_f64();
        let goal = match *f {
            10 if ratio <= GOAL => format!("≤ {GOAL}x: met"),
            10 => format!("≤ {GOAL}x: NOT met"),
            _ => "—".into(),
        };
        println!(
            "| {n} | {f} | {:.2} s ({}) / {:.2} s / {:.0} MiB | {:.2} s ({}) / {:.2} s / {:.0} MiB | {ratio:.2}x | {} | {goal} |",
            a.wall.as_secs_f64(),
            ansible.spread(),
            a.cpu,
            a.rss_mib,
            b.wall.as_secs_f64(),
            ours.spread(),
            b.cpu,
            b.rss_mib,
            totals(&ours.recap),
        );
    }
}

/// `ok / changed / failed / skipped`, summed over hosts.
fn totals(r: &Recap) -> String {
    let sum = |i: usize| r.values().map(|c| c[i]).sum::<u64>();
    format!("{} / {} / {} / {}", sum(0), sum(1), sum(3), sum(4))
}

impl Bench {
    /// The lab with `n` SSH hosts; both tools at each of `forks`, alternating.
    fn hosts(&self, n: usize, forks: &[usize]) -> Vec<(usize, usize, Runs, Runs)> {
        let dir = self.work.join(format!("n{n}"));
        let _ = fs_err::remove_dir_all(&dir);
        let inv = dir.join("inv");
        copy_dir(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory/lab"),
            &inv,
        );
        fs_err::remove_file(inv.join("spares.yaml")).unwrap();
        {
            use std::os::unix::fs::PermissionsExt as _;
            let key = inv.join("secrets/id_ed25519");
            fs_err::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        bench_lab::grow_nodes(&inv, n);
        eprintln!("\n== {n} hosts ==");
        let _site = bench_lab::LabSite::up(&self.lab, &inv, &dir.join("lab"), &["--hosts-up"]);
        // Host keys learned, the Ansible inventory written (the checks find the planted
        // problems: exit 1).
        let run = dir.join("run");
        let out = std::process::Command::new(&self.bin)
            .arg("prep")
            .arg("--inventory")
            .arg(&inv)
            .arg("--run")
            .arg(&run)
            .args(&self.playbooks)
            .output()
            .expect("running bootstrap prep");
        assert!(
            out.status.code().is_some_and(|c| c <= 1),
            "bootstrap prep --inventory: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let ansible_inventory = run.join("prep/ansible-inventory.yaml");
        let ours_run = dir.join("run-ours");
        fs_err::create_dir_all(ours_run.join("ledger")).unwrap();
        fs_err::copy(
            run.join("ledger/known_hosts"),
            ours_run.join("ledger/known_hosts"),
        )
        .unwrap();
        let home = dir.join("ansible-home");
        fs_err::create_dir_all(home.join("tmp")).unwrap();
        let (home_tmp, home_cp) = (home.join("tmp"), home.join("cp"));
        let mut rows = Vec::new();
        for &f in forks {
            let (mut ansible, mut ours) = (Runs::default(), Runs::default());
            for round in 0..self.rounds {
                let report = dir.join("time.txt");
                let mut args = vec![
                    "-i".to_string(),
                    ansible_inventory.display().to_string(),
                    "--forks".into(),
                    f.to_string(),
                ];
                args.extend(self.playbooks.iter().map(|p| p.display().to_string()));
                let env = [
                    ("HOME", home.to_str().unwrap()),
                    ("ANSIBLE_HOME", home.to_str().unwrap()),
                    ("ANSIBLE_LOCAL_TEMP", home_tmp.to_str().unwrap()),
                    ("ANSIBLE_SSH_CONTROL_PATH_DIR", home_cp.to_str().unwrap()),
                    ("ANSIBLE_NOCOLOR", "1"),
                    ("ANSIBLE_PYTHON_INTERPRETER", "/usr/bin/python3"),
                ];
                let (t, out) = bench_lab::timed(&self.ansible, &args, &env, &report);
                fs_err::write(dir.join(format!("ansible-f{f}-r{round}.out")), &out.stdout).unwrap();
                let recap = recap_of(&out, "ansible-playbook", true);
                eprintln!(
                    "{n} hosts, forks {f}, round {round}: ansible-playbook {:.2} s",
                    t.wall.as_secs_f64()
                );
                ansible.times.push(t);
                ansible.recap = recap;

                let mut args = vec![
                    "prep".to_string(),
                    "-i".into(),
                    ansible_inventory.display().to_string(),
                    "--run".into(),
                    ours_run.display().to_string(),
                    "--forks".into(),
                    f.to_string(),
                ];
                args.extend(self.playbooks.iter().map(|p| p.display().to_string()));
                let (t, out) = bench_lab::timed(&self.bin, &args, &[], &report);
                fs_err::write(
                    dir.join(format!("bootstrap-f{f}-r{round}.out")),
                    &out.stdout,
                )
                .unwrap();
                let recap = recap_of(&out, "bootstrap prep", false);
                eprintln!(
                    "{n} hosts, forks {f}, round {round}: bootstrap prep {:.2} s",
                    t.wall.as_secs_f64()
                );
                ours.times.push(t);
                ours.recap = recap;
                assert_eq!(
                    ours.recap, ansible.recap,
                    "{n} hosts, forks {f}: the recaps differ (per host: ok, changed, unreachable, failed, skipped, rescued, ignored)"
                );
                assert_eq!(
                    ours.recap.len(),
                    n,
                    "{n} hosts, forks {f}: {:?}",
                    ours.recap
                );
            }
            rows.push((n, f, ansible, ours));
        }
        rows
    }
}

/// The PLAY RECAP lines of a run that succeeded, per host over its playbooks: bootstrap prints
/// one recap per playbook (summed here); ansible-playbook, given several, prints a recap after
/// each with the counts so far (`cumulative`: the last one holds the whole run).
fn recap_of(out: &std::process::Output, tool: &str, cumulative: bool) -> Recap {
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{tool} failed ({}):\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let mut recap = Recap::new();
    for line in text.lines() {
        let Some((host, counts)) = line.split_once(" : ") else {
            continue;
        };
        let fields: Vec<(&str, u64)> = counts
            .split_whitespace()
            .filter_map(|f| {
                let (k, v) = f.split_once('=')?;
                Some((k, v.parse().ok()?))
            })
            .collect();
        if fields.len() != 7 || fields[0].0 != "ok" {
            continue;
        }
        let entry = recap.entry(host.trim().to_string()).or_default();
        if cumulative {
            *entry = [0; 7];
        }
        for (i, (_, v)) in fields.iter().enumerate() {
            entry[i] += v;
        }
    }
    recap
}

fn copy_dir(from: &Path, to: &Path) {
    fs_err::create_dir_all(to).unwrap();
    for e in fs_err::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            fs_err::copy(e.path(), &target).unwrap();
        }
    }
}
