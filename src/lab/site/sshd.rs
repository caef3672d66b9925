//! A real OpenSSH `sshd` as a lab node's SSH host: one per node, bound to the node's
//! machine-network address inside its network namespace (or to a loopback address in tests),
//! with its own persistent host key, the inventory's public key authorized, and the node's
//! fixture files bind-mounted over the paths the facts are read from, in a mount namespace of
//! the sshd's own (nothing of the machine's own mounts changes).
//!
//! The daemon runs as root, as sshd must; logins go to the real users of this machine (the lab
//! creates `core`, RHCOS' user, with password-less sudo: scripts/install-deps.sh).

use anyhow::{bail, Context, Result};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where OpenSSH's server is on Debian.
pub const SSHD: &str = "/usr/sbin/sshd";

/// What one sshd serves.
#[derive(Clone, Debug)]
pub struct SshdSpec {
    /// This host's own files: `sshd_config`, the host key (made once, kept across restarts, so
    /// a restarted node presents the same key), `authorized_keys`, `sshd.log`.
    pub dir: PathBuf,
    /// The address and port it listens on.
    pub listen: SocketAddr,
    /// The network namespace it runs in (`ip netns exec`), if any.
    pub namespace: Option<String>,
    /// The public keys allowed to log in, one OpenSSH line each.
    pub authorized_keys: String,
    /// Bind mounts made in the daemon's own mount namespace before it starts: (source on this
    /// machine, target path as the node's commands see it). Targets must exist.
    pub mounts: Vec<(PathBuf, PathBuf)>,
}

/// A running sshd; stopped when dropped.
#[derive(Debug)]
pub struct Sshd {
    /// Where it listens.
    pub listen: SocketAddr,
    /// Its host key, one OpenSSH public-key line (`ssh-ed25519 AAAA...`).
    pub host_key: String,
    child: Option<Child>,
}

impl Sshd {
    /// Starts sshd as `spec` says and waits until it accepts connections (at most 10 s).
    pub fn start(spec: &SshdSpec) -> Result<Sshd> {
        fs_err::create_dir_all(&spec.dir)?;
        // sshd's privilege-separation directory; Debian's service unit makes it, we may not.
        fs_err::create_dir_all("/run/sshd")?;
        let host_key = host_key(&spec.dir)?;
        fs_err::write(spec.dir.join("authorized_keys"), &spec.authorized_keys)?;
        let config = spec.dir.join("sshd_config");
        fs_err::write(&config, config_text(spec))?;
        let log = fs_err::File::create(spec.dir.join("sshd.log"))?.into_parts().0;
        let child = command(spec, &config)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("cannot start {SSHD} for {}", spec.listen))?;
        let mut sshd = Sshd { listen: spec.listen, host_key, child: Some(child) };
        sshd.wait_listening(&spec.dir, Duration::from_secs(10))?;
        Ok(sshd)
    }

    /// The daemon's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Stops the daemon and every session it serves, as a node going down would: every process
    /// in the daemon's own mount namespace ends.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let namespace = fs_err::read_link(format!("/proc/{}/ns/mnt", child.id())).ok();
            let _ = child.kill();
            let _ = child.wait();
            if let Some(namespace) = namespace {
                kill_mount_namespace(&namespace);
            }
        }
    }

    fn wait_listening(&mut self, dir: &Path, limit: Duration) -> Result<()> {
        let start = Instant::now();
        while start.elapsed() < limit {
            if TcpStream::connect_timeout(&self.listen, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                self.child = None;
                bail!(
                    "sshd for {} exited ({status}) before listening: {}",
                    self.listen,
                    super::bmc::tail(&dir.join("sshd.log"), 5)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.stop();
        bail!("sshd for {} did not listen within {limit:?}", self.listen)
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Kills every process whose mount namespace is `namespace` (the sessions an sshd left).
/// Never this process's own namespace (the machine's processes are not a node's).
fn kill_mount_namespace(namespace: &Path) {
    if fs_err::read_link("/proc/self/ns/mnt").is_ok_and(|own| own == namespace) {
        return;
    }
    let Ok(entries) = fs_err::read_dir("/proc") else { return };
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

/// The host key in `dir` (ed25519, made with `ssh-keygen` when missing), as its public line.
pub fn host_key(dir: &Path) -> Result<String> {
    let key = dir.join("ssh_host_ed25519_key");
    if !key.exists() {
        let status = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", "lab-host", "-f"])
            .arg(&key)
            .stdin(Stdio::null())
            .status()
            .context("cannot run ssh-keygen (openssh-client)")?;
        if !status.success() {
            bail!("ssh-keygen could not make {}", key.display());
        }
    }
    let public = fs_err::read_to_string(key.with_extension("pub"))?;
    let mut fields = public.split_whitespace();
    match (fields.next(), fields.next()) {
        (Some(kind), Some(data)) => Ok(format!("{kind} {data}")),
        _ => bail!("{}.pub is not an OpenSSH public key", key.display()),
    }
}

fn config_text(spec: &SshdSpec) -> String {
    let dir = spec.dir.display();
    format!(
        "Port {port}\nListenAddress {addr}\nHostKey {dir}/ssh_host_ed25519_key\n\
         PidFile none\nAuthorizedKeysFile {dir}/authorized_keys\nStrictModes no\n\
         PubkeyAuthentication yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
         PermitRootLogin prohibit-password\nUsePAM no\nAllowTcpForwarding yes\n\
         LogLevel VERBOSE\nSubsystem sftp internal-sftp\n",
        port = spec.listen.port(),
        addr = spec.listen.ip(),
    )
}

/// `sshd -D -e -f CONFIG`, behind the bind mounts (a shell in a new mount namespace) and
/// inside the network namespace when there is one. `ip netns exec` already gives its command
/// a mount namespace of its own; without it `unshare -m` does.
fn command(spec: &SshdSpec, config: &Path) -> Command {
    let mut script = String::from("set -e; ");
    for (source, target) in &spec.mounts {
        script.push_str(&format!(
            "mount --bind {} {}; ",
            crate::hostprep::sh_quote(&source.display().to_string()),
            crate::hostprep::sh_quote(&target.display().to_string())
        ));
    }
    script.push_str(&format!(
        "exec {SSHD} -D -e -f {}",
        crate::hostprep::sh_quote(&config.display().to_string())
    ));
    let mut cmd = match &spec.namespace {
        Some(ns) => super::netns::command_in(ns, "/bin/sh"),
        None => {
            let mut c = Command::new("unshare");
            c.args(["-m", "--propagation", "private", "/bin/sh"]);
            c
        }
    };
    cmd.args(["-c", &script]);
    cmd
}
