//! Issue 28 point 1: a BMC whose answer never ends (a 3 GiB service root took 6 GiB of memory, a
//! chunked one 4 GiB and then the same request again). The fake answers one GET with a body of
//! 3 GiB declared, or chunks without end, generated as written; the client must refuse it at
//! once with an error naming the BMC, the method and the path, the size seen and the cap, send
//! that request once (not retried), and stay under 128 MiB of peak memory.
//!
//! The memory is measured in a child process ([`crate::support::peak`]).

use std::time::Duration;

use bootstrap::redfish::{Client, Endpoint, Trust, ANSWER_MAX};

use crate::redfish::{options, run, start};
use crate::support::redfishfake::{Oversize, Switches, ROOT, SYSTEM};

/// Set in the child: `<step> <address> <CA file>`; `step` is `root` (connect) or `system`
/// (connect, then read the system).
const CHILD: &str = "BOOTSTRAP_TEST_REDFISH_CHILD";
/// The acceptance's bound on peak memory facing a 3 GiB answer.
const PEAK_MAX_KIB: u64 = 128 * 1024;
const THREE_GIB: u64 = 3 << 30;
/// How long the child may run; a hang is killed here and fails the test.
const DEADLINE: Duration = Duration::from_secs(60);

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
    crate::support::peak::report(&match result {
        Ok(()) => "no error".to_string(),
        Err(e) => e.to_string(),
    });
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
    let run = crate::support::peak::measure(
        module_path!(),
        test,
        CHILD,
        &format!("{step} {} {}", bmc.fake.address(), ca.display()),
        DEADLINE,
    );
    let (peak, error, elapsed) = (run.peak_kib, run.result, run.elapsed);

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
