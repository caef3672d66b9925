//! Peak memory of a client facing a hostile server, measured in a child process so that nothing
//! else of the test run counts: the test runs its own binary again (`current_exe() <the test>
//! --exact`) with an environment variable set, and that run does only the client's part,
//! against the server this process serves. The child's peak resident memory is its `VmHWM`
//! (which only grows), read from `/proc/self/status` by the child as it ends and printed
//! ([`report`]), and sampled from `/proc/PID/status` every 20 ms while it runs in case it dies
//! first; the larger counts. A child that hangs is killed at a deadline.

use std::io::Write as _;
use std::process::Command;
use std::time::{Duration, Instant};

/// The child's result line: `<marker><VmHWM KiB> <result text>`.
const MARKER: &str = "peak-child-result: ";

/// Peak resident memory (`VmHWM`, KiB) of a process, from its `/proc/PID/status`.
fn vm_hwm_kib(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// In the child: prints `result` (one line) with the process's peak memory.
pub fn report(result: &str) {
    let status = fs_err::read_to_string("/proc/self/status").unwrap();
    let peak = vm_hwm_kib(&status).unwrap();
    let mut out = std::io::stdout().lock();
    writeln!(out, "{MARKER}{peak} {}", result.replace('\n', " ")).unwrap();
}

/// What the child said and how much memory it took at most.
pub struct Measured {
    /// Peak resident memory, KiB.
    pub peak_kib: u64,
    /// The child's result text ([`report`]).
    pub result: String,
    /// How long the child ran.
    pub elapsed: Duration,
}

/// Runs the test `module::test` (`module` is the caller's `module_path!()`) in a child with
/// `var=value`, until it ends or `deadline` passes (then it is killed and this panics).
pub fn measure(module: &str, test: &str, var: &str, value: &str, deadline: Duration) -> Measured {
    // libtest names a test by its path without the crate.
    let module = module.split_once("::").map_or(module, |m| m.1);
    let dir = tempfile::tempdir().unwrap();
    let out = fs_err::File::create(dir.path().join("out")).unwrap();
    let started = Instant::now();
    let mut run = Command::new(std::env::current_exe().unwrap())
        .args([&format!("{module}::{test}"), "--exact", "--nocapture"])
        .env(var, value)
        .stdout(out.into_file())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut sampled = 0;
    let status = loop {
        if let Ok(s) = fs_err::read_to_string(format!("/proc/{}/status", run.id())) {
            sampled = sampled.max(vm_hwm_kib(&s).unwrap_or(0));
        }
        if let Some(status) = run.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > deadline {
            let _ = run.kill();
            let _ = run.wait();
            panic!("{test}: the child still runs after {deadline:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed = started.elapsed();
    let text = fs_err::read_to_string(dir.path().join("out")).unwrap();
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix(MARKER))
        .unwrap_or_else(|| panic!("{test}: the child ({status}) gave no result:\n{text}"));
    let (peak, result) = line.split_once(' ').unwrap();
    Measured {
        peak_kib: sampled.max(peak.parse().unwrap()),
        result: result.to_string(),
        elapsed,
    }
}
