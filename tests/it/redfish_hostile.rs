//! Issue 28 point 1: a BMC whose answer never ends (a 3 GiB service root took 6 GiB of memory, a
//! chunked one 4 GiB and then the same request again). The fake answers one GET with a body of
//! 3 GiB declared, or chunks without end, generated as written; the client must refuse it at
//! once with an error naming the BMC, the method and the path, the size seen and the cap, send
//! that request once (not retried), and stay under 128 MiB of peak memory.
//!
//! The memory is measured in a child process, so that nothing else of the test run counts: the
//! test runs its own binary again (`current_exe() <this test> --exact`) with [`CHILD`] set, and
//! that run does only the client's part, against the fake this process serves. The child's
//! peak resident memory is its `VmHWM` (which only grows), read from `/proc/self/status` by the
//! child as it ends and printed, and sampled from `/proc/PID/status` every 20 ms while it runs
//! in case it dies first; the larger is checked. A child that hangs is killed at a deadline.

use std::io::Write as _;
use std::process::Command;
use std::time::{Duration, Instant};

use bootstrap::redfish::{Client, Endpoint, Trust, ANSWER_MAX};

use crate::redfish::{options, run, start};
use crate::support::redfishfake::{Oversize, Switches, ROOT, SYSTEM};

/// Set in the child: `<step> <address> <CA file>`; `step` is `root` (connect) or `system`
/// (connect, then read the system).
const CHILD: &str = "BOOTSTRAP_TEST_REDFISH_CHILD";
/// The child's result line: `<marker><VmHWM KiB> <error text>`.
const MARKER: &str = "redfish-child-result: ";
/// The acceptance's bound on peak memory facing a 3 GiB answer.
const PEAK_MAX_KIB: u64 = 128 * 1024;
const THREE_GIB: u64 = 3 << 30;
/// How long the child may run; a hang is killed here and fails the test.
const DEADLINE: Duration = Duration::from_secs(60);

/// Peak resident memory (`VmHWM`, KiB) of a process, from its `/proc/PID/status`.
fn vm_hwm_kib(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The child's part: connect (and read the system), print the error and the peak memory.
fn child(spec: &str) {
    let mut parts = spec.splitn(3, ' ');
    let (step, address, ca) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
    );
    let ep = Endpoint {
        address: address.to_string(),
        credentials: Some(bootstrap::redfish::Credentials {
            user: "root".to_string(),
            password: "calvin".to_string(),
        }),
        trust: Trust::Ca(fs_err::read(ca).unwrap()),
    };
    let result = run(async {
        let c = Client::connect(&ep, options()).await?;
        if step == "system" {
            c.system().await?;
        }
        Ok::<_, bootstrap::redfish::RedfishError>(())
    });
    let error = match result {
        Ok(()) => "no error".to_string(),
        Err(e) => e.to_string(),
    };
    let status = fs_err::read_to_string("/proc/self/status").unwrap();
    let peak = vm_hwm_kib(&status).unwrap();
    let mut out = std::io::stdout().lock();
    writeln!(out, "{MARKER}{peak} {error}").unwrap();
}

/// Serves `how` to a GET of `path`, runs the client's `step` in a child, and checks the refusal
/// (its words, one request, the time and the memory). `test` is the calling test's name.
fn refused_in_little_memory(test: &str, step: &str, path: &str, how: Oversize, seen: &str) {
    if let Ok(spec) = std::env::var(CHILD) {
        return child(&spec);
    }
    let bmc = start(Switches {
        oversized: vec![(path.to_string(), how)],
        ..Switches::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    fs_err::write(&ca, bmc.ca_pem()).unwrap();
    // libtest names a test by its path without the crate.
    let module = module_path!().split_once("::").unwrap().1;
    let out = fs_err::File::create(dir.path().join("out")).unwrap();
    let started = Instant::now();
    let mut run = Command::new(std::env::current_exe().unwrap())
        .args([&format!("{module}::{test}"), "--exact", "--nocapture"])
        .env(
            CHILD,
            format!("{step} {} {}", bmc.fake.address(), ca.display()),
        )
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
        if started.elapsed() > DEADLINE {
            let _ = run.kill();
            let _ = run.wait();
            panic!("the client still runs after {DEADLINE:?} facing {how:?} at {path}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed = started.elapsed();
    let text = fs_err::read_to_string(dir.path().join("out")).unwrap();
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix(MARKER))
        .unwrap_or_else(|| panic!("the child ({status}) gave no result:\n{text}"));
    let (peak, error) = line.split_once(' ').unwrap();
    let peak = sampled.max(peak.parse().unwrap());

    for part in [
        format!("BMC {}: GET {path}: the answer {seen}", bmc.fake.host()),
        format!("more than the {ANSWER_MAX} bytes"),
        "not retried".to_string(),
    ] {
        assert!(error.contains(&part), "{part:?} not in: {error}");
    }
    assert_eq!(bmc.fake.count("GET", path), 1, "{:#?}", bmc.fake.requests());
    assert!(
        peak < PEAK_MAX_KIB,
        "peak RSS {peak} KiB facing {how:?} at {path}"
    );
    assert!(elapsed < Duration::from_secs(20), "{elapsed:?}");
}

/// Regression (issue 28): a 3 GiB service root took 6 GiB of memory; it is refused from its
/// Content-Length before a byte of it is read.
#[test]
fn a_service_root_declaring_3_gib_is_refused_at_once_in_little_memory() {
    refused_in_little_memory(
        "a_service_root_declaring_3_gib_is_refused_at_once_in_little_memory",
        "root",
        ROOT,
        Oversize::Declared(THREE_GIB),
        &format!("declares a Content-Length of {THREE_GIB} bytes"),
    );
}

/// A system that declares 3 GiB (after a session was made) is refused the same way.
#[test]
fn a_system_declaring_3_gib_is_refused_at_once_in_little_memory() {
    refused_in_little_memory(
        "a_system_declaring_3_gib_is_refused_at_once_in_little_memory",
        "system",
        SYSTEM,
        Oversize::Declared(THREE_GIB),
        &format!("declares a Content-Length of {THREE_GIB} bytes"),
    );
}

/// Regression (issue 28): a chunked service root without end took 4 GiB and was then asked
/// again; it is read as a stream, refused as it passes the cap, and not asked again.
#[test]
fn an_endless_chunked_service_root_is_refused_past_the_cap_and_not_retried() {
    refused_in_little_memory(
        "an_endless_chunked_service_root_is_refused_past_the_cap_and_not_retried",
        "root",
        ROOT,
        Oversize::EndlessChunks,
        "came without a Content-Length and ran past",
    );
}

/// An endless chunked system answer is refused the same way.
#[test]
fn an_endless_chunked_system_is_refused_past_the_cap_and_not_retried() {
    refused_in_little_memory(
        "an_endless_chunked_system_is_refused_past_the_cap_and_not_retried",
        "system",
        SYSTEM,
        Oversize::EndlessChunks,
        "came without a Content-Length and ran past",
    );
}
