//! The lab's background processes, found and stopped by what they are: a process belongs to a
//! lab when its command line names that lab's state dir (the emulators' config files lie there,
//! the site process is given it), so `bootstrap-lab down` and a `bootstrap-lab up` after a crash stop exactly the
//! lab's processes, even those whose pid was never recorded, and never a stranger that reused a
//! recorded pid.

use rustix::process::{kill_process_group, Pid, Signal};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// True when `pid` runs and is not a zombie (a finished process nobody reaped yet).
pub fn alive(pid: u32) -> bool {
    match fs_err::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name's closing parenthesis.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// The command line of `pid`, arguments joined by spaces.
fn cmdline(pid: u32) -> Option<String> {
    let raw = fs_err::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        raw.split(|b| *b == 0)
            .map(String::from_utf8_lossy)
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// Every live lab process (an emulator or a site process) whose command line names `state` (an
/// absolute path).
pub fn of_lab(state: &Path) -> Vec<u32> {
    let needle = state.display().to_string();
    let me = std::process::id();
    let Ok(entries) = fs_err::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != me && alive(*pid))
        .filter(|pid| cmdline(*pid).is_some_and(|c| is_lab_program(&c) && names_state(&c, &needle)))
        .collect()
}

/// The lab's programs: an emulator, the site process, a node's sshd, or the site's dnsmasq or
/// chronyd (their configs lie in the state dir). Anything else naming the state dir (a `bootstrap-lab status` running beside) is left
/// alone.
fn is_lab_program(cmdline: &str) -> bool {
    cmdline.contains("sushy-emulator")
        || cmdline.contains(" site-run --state ")
        || cmdline.contains(super::sshd::SSHD)
        || cmdline.starts_with(super::dns_ntp::DNSMASQ)
        || cmdline.starts_with(super::dns_ntp::CHRONYD)
}

/// The mount namespaces of the lab's sshd hosts among `pids`: each holds that host's login
/// sessions, which run on after their sshd ends (each session is its own process group), so
/// whoever stops the sshd ends them with [`kill_mount_namespace`].
pub fn sshd_namespaces(pids: &[u32]) -> Vec<PathBuf> {
    pids.iter()
        .filter(|p| cmdline(**p).is_some_and(|c| c.contains(super::sshd::SSHD)))
        .filter_map(|p| fs_err::read_link(format!("/proc/{p}/ns/mnt")).ok())
        .collect()
}

/// True when a command line names the state dir as a whole path component (`STATE/...` or
/// `STATE` at the end), so `/x/.lab/site` does not match `/x/.lab/site2`.
fn names_state(cmdline: &str, state: &str) -> bool {
    cmdline.match_indices(state).any(|(at, _)| {
        let rest = &cmdline[at + state.len()..];
        rest.is_empty() || rest.starts_with('/') || rest.starts_with(' ')
    })
}

/// Stops `pids`: SIGTERM to each one's process group, then SIGKILL to those still running after
/// `grace`. Returns the pids that were running.
pub fn stop(pids: &[u32], grace: Duration) -> Vec<u32> {
    let running: Vec<u32> = pids.iter().copied().filter(|p| alive(*p)).collect();
    signal(&running, Signal::TERM);
    let start = Instant::now();
    while start.elapsed() < grace && running.iter().any(|p| alive(*p)) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left: Vec<u32> = running.iter().copied().filter(|p| alive(*p)).collect();
    signal(&left, Signal::KILL);
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) && left.iter().any(|p| alive(*p)) {
        std::thread::sleep(Duration::from_millis(50));
    }
    running
}

/// Kills every process whose mount namespace is `namespace` (the sessions an sshd left).
/// Never this process's own namespace (the machine's processes are not a node's).
pub fn kill_mount_namespace(namespace: &Path) {
    if fs_err::read_link("/proc/self/ns/mnt").is_ok_and(|own| own == namespace) {
        return;
    }
    let Ok(entries) = fs_err::read_dir("/proc") else {
        return;
    };
    let pids = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            fs_err::read_link(format!("/proc/{pid}/ns/mnt")).is_ok_and(|ns| ns == namespace)
        });
    for pid in pids {
        if let Some(pid) = rustix::process::Pid::from_raw(pid) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
}

fn signal(pids: &[u32], sig: Signal) {
    for pid in pids {
        if let Some(p) = i32::try_from(*pid).ok().and_then(Pid::from_raw) {
            // Each lab process leads its own group (process_group(0) or setsid); a group
            // signal also reaches anything it started. Fall back to the process alone.
            if kill_process_group(p, sig).is_err() {
                let _ = rustix::process::kill_process(p, sig);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state dir matches as a whole path, not as the prefix of another lab's.
    #[test]
    fn a_lab_is_named_by_its_whole_state_path() {
        let c = "python sushy-emulator --config /x/.lab/site/bmc/master-0/emulator.conf";
        assert!(names_state(c, "/x/.lab/site"));
        assert!(!names_state(c, "/x/.lab/sit"));
        assert!(names_state(
            "bootstrap-lab site-run --state /x/.lab/site",
            "/x/.lab/site"
        ));
        assert!(!names_state(
            "bootstrap-lab site-run --state /x/.lab/site2",
            "/x/.lab/site"
        ));
        let sshd = "sshd: /usr/sbin/sshd -D -e -f /x/.lab/site/hosts/master-0/sshd/sshd_config [listener] 0 of 10-100 startups";
        assert!(is_lab_program(sshd) && names_state(sshd, "/x/.lab/site"));
        assert!(!is_lab_program("bootstrap-lab status --state /x/.lab/site"));
        let dns = "/usr/sbin/dnsmasq --conf-file=/x/.lab/site/dns/dnsmasq.conf";
        assert!(is_lab_program(dns) && names_state(dns, "/x/.lab/site"));
        let ntp = "/usr/sbin/chronyd -n -x -u root -f /x/.lab/site/ntp/chrony.conf";
        assert!(is_lab_program(ntp) && names_state(ntp, "/x/.lab/site"));
    }

    /// This process is alive; a pid past the kernel's limit is not.
    #[test]
    fn liveness_reads_proc() {
        assert!(alive(std::process::id()));
        assert!(!alive(u32::MAX - 1));
    }
}
