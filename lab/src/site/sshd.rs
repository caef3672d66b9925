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
    /// Mounts made, in order, in the daemon's own mount namespace before it starts (the
    /// node's fixture over the paths its commands read).
    pub mounts: Vec<Mount>,
    /// The host name its sessions see (`hostname`, `uname -n`), in a UTS namespace of the
    /// daemon's own; `None` keeps this machine's.
    pub hostname: Option<String>,
}

/// One mount of a node's fixture, made in the sshd's own mount namespace only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mount {
    /// `mount --bind SOURCE TARGET`: a fixture file or directory over an existing one.
    Bind(PathBuf, PathBuf),
    /// An overlay over the existing directory `target`, its own submounts (`/dev/pts`) bound
    /// back on top through `scratch` (an empty directory). `lower`: entries added read-only
    /// (`/dev/disk` where `/dev` has none); `upper` (and its work dir, on the same filesystem):
    /// where writes land (a node's own `/etc`). The machine's own `target` never changes.
    Overlay {
        /// The directory overlaid.
        target: PathBuf,
        /// A read-only layer above it.
        lower: Option<PathBuf>,
        /// The writable layer and overlayfs' work dir.
        upper: Option<(PathBuf, PathBuf)>,
        /// An empty directory used while the overlay is made.
        scratch: PathBuf,
    },
    /// `/proc` replaced by `root`, a directory holding the fixture's own entries (`modules`)
    /// and a symlink per other entry of a real procfs mounted at `root/.kernel`: for a kernel
    /// without loadable modules, whose procfs has no `modules` to bind over and cannot be given
    /// one. The daemon then runs as the first process of a PID namespace of its own whose
    /// `pid_max` is `pids`, and `root` holds a link `N -> .kernel/N` for every pid up to it, so
    /// `ps` and `/proc/PID` work for the node's processes. The daemon's end ends them all.
    Proc {
        /// The directory that stands for `/proc`.
        root: PathBuf,
        /// The PID namespace's `pid_max` (`root` links every pid up to it).
        pids: u32,
    },
    /// `/proc/sys` read-only but for `/proc/sys/net`: a node's sysctls of its own network
    /// namespace stay real and writable, the kernel-wide ones (`vm.*`, `kernel.*`), which are
    /// this machine's, cannot be changed from a node.
    SysctlNetOnly,
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
        let log = fs_err::File::create(spec.dir.join("sshd.log"))?
            .into_parts()
            .0;
        let child = command(spec, &config)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("cannot start {SSHD} for {}", spec.listen))?;
        let mut sshd = Sshd {
            listen: spec.listen,
            host_key,
            child: Some(child),
        };
        sshd.wait_listening(&spec.dir, Duration::from_secs(10))?;
        Ok(sshd)
    }

    /// The daemon's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether the daemon has ended (stopped, or killed from outside: a node going down).
    pub fn exited(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => !matches!(c.try_wait(), Ok(None)),
            None => true,
        }
    }

    /// Stops the daemon and every session it serves, as a node going down would: every process
    /// in the daemon's own mount namespace ends.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let namespace = fs_err::read_link(format!("/proc/{}/ns/mnt", child.id())).ok();
            let _ = child.kill();
            let _ = child.wait();
            if let Some(namespace) = namespace {
                super::process::kill_mount_namespace(&namespace);
            }
        }
    }

    fn wait_listening(&mut self, dir: &Path, limit: Duration) -> Result<()> {
        let start = Instant::now();
        while start.elapsed() < limit {
            if TcpStream::connect_timeout(&self.listen, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
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

fn q(path: &Path) -> String {
    bootstrap::hostprep::sh_quote(&path.display().to_string())
}

/// The shell lines that make `mount`.
fn mount_script(mount: &Mount) -> String {
    match mount {
        Mount::Bind(source, target) => format!("mount --bind {} {}; ", q(source), q(target)),
        Mount::Overlay {
            target,
            lower,
            upper,
            scratch,
        } => {
            let t = q(target);
            let mut options = match lower {
                Some(l) => format!("lowerdir={}:{t}", q(l)),
                None => format!("lowerdir={t}"),
            };
            if let Some((u, w)) = upper {
                options.push_str(&format!(",upperdir={},workdir={}", q(u), q(w)));
            }
            let mut s = format!(
                "mkdir -p {k}; mount --rbind {t} {k}; mount -t overlay overlay -o {options} {t}; ",
                k = q(scratch)
            );
            for sub in submounts(target) {
                let rel = sub.strip_prefix(target).unwrap_or(&sub);
                s.push_str(&format!(
                    "mount --rbind {} {}; ",
                    q(&scratch.join(rel)),
                    q(&sub)
                ));
            }
            s + &format!("umount -l {}; ", q(scratch))
        }
        Mount::Proc { root, pids } => format!(
            "mount --bind {r} /proc; mount -t proc proc /proc/.kernel; \
             mount --bind /proc/.kernel/sys /proc/sys; echo {pids} > /proc/sys/kernel/pid_max; ",
            r = q(root)
        ),
        Mount::SysctlNetOnly => "mount --bind /proc/sys /proc/sys; \
             mount -o remount,bind,ro /proc/sys; mount --bind /proc/sys/net /proc/sys/net; \
             mount -o remount,bind,rw /proc/sys/net; "
            .into(),
    }
}

/// The mount points directly below `dir` in this process's mount table (`/dev/pts`,
/// `/dev/shm` for `/dev`), which an overlay on `dir` would hide.
fn submounts(dir: &Path) -> Vec<PathBuf> {
    let table = fs_err::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut found: Vec<PathBuf> = table
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(PathBuf::from)
        .filter(|p| p.parent() == Some(dir))
        .collect();
    found.sort();
    found.dedup();
    found
}

/// `sshd -D -e -f CONFIG`, behind the mounts (a shell in a new mount namespace) and inside the
/// network namespace when there is one. `ip netns exec` already gives its command a mount
/// namespace of its own; without it `unshare -m` does.
/// From a [`Mount::Proc`] on, the mounts are made by the first process of a new PID
/// namespace, which becomes the daemon.
fn command(spec: &SshdSpec, config: &Path) -> Command {
    let mut outer = String::from("set -e; ");
    if let Some(name) = &spec.hostname {
        outer.push_str(&format!(
            "hostname {}; ",
            bootstrap::hostprep::sh_quote(name)
        ));
    }
    let mut inner = None::<String>;
    for mount in &spec.mounts {
        if matches!(mount, Mount::Proc { .. }) {
            inner.get_or_insert_with(|| String::from("set -e; "));
        }
        inner
            .as_mut()
            .unwrap_or(&mut outer)
            .push_str(&mount_script(mount));
    }
    let sshd = format!("exec {SSHD} -D -e -f {}", q(config));
    let script = match inner {
        Some(inner) => format!(
            "{outer}exec unshare --pid --fork --kill-child /bin/sh -c {}",
            bootstrap::hostprep::sh_quote(&format!("{inner}{sshd}"))
        ),
        None => outer + &sshd,
    };
    let mut cmd = match &spec.namespace {
        Some(ns) => {
            let mut c = super::netns::command_in(ns, "unshare");
            c.arg("--uts");
            c
        }
        None => {
            let mut c = Command::new("unshare");
            c.args(["-m", "--propagation", "private", "--uts"]);
            c
        }
    };
    cmd.args(["/bin/sh", "-c", &script]);
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The mounts from a `Proc` on are made inside the PID namespace the daemon leads.
    #[test]
    fn mounts_after_proc_are_made_in_the_daemons_pid_namespace() {
        let spec = SshdSpec {
            dir: "/s/h".into(),
            listen: "127.0.0.1:22".parse().unwrap(),
            namespace: None,
            authorized_keys: String::new(),
            hostname: None,
            mounts: vec![
                Mount::Bind("/f/bin".into(), "/usr/local/bin".into()),
                Mount::Proc {
                    root: "/f/proc".into(),
                    pids: 64,
                },
                Mount::SysctlNetOnly,
            ],
        };
        let cmd = command(&spec, Path::new("/s/h/sshd_config"));
        let script = cmd.get_args().last().unwrap().to_str().unwrap().to_string();
        let (outer, inner) = script
            .split_once("exec unshare --pid --fork --kill-child")
            .unwrap();
        assert!(
            outer.contains("mount --bind /f/bin /usr/local/bin;"),
            "{script}"
        );
        assert!(!outer.contains("/proc"), "{script}");
        assert!(
            inner.contains("echo 64 > /proc/sys/kernel/pid_max"),
            "{script}"
        );
        assert!(inner.contains("remount,bind,ro /proc/sys"), "{script}");
        assert!(
            inner.ends_with("exec /usr/sbin/sshd -D -e -f /s/h/sshd_config'"),
            "{script}"
        );
    }
}
