//! Host preparation over SSH: the first handshake with every booted node.
//!
//! - [`ssh`]: the transport (russh): keys from a file or the agent, a bastion, host keys pinned
//!   or learned into `RUN/known_hosts`, reconnects while a node reboots, per-command timeout and
//!   output cap. It implements [`Remote`].
//! - [`facts`] and [`checks`]: the hardware each node reports, read natively, and its verdict
//!   against the inventory's expectations.
//! - [`playbook`] and [`modules`]: a subset of Ansible's playbook format with Ansible's
//!   semantics, run against any [`Remote`].
//!
//! Everything that touches a host goes through [`Remote::exec`], so the same playbook engine and
//! fact reader run over SSH on a site and over [`Local`] in unit tests.
//!
//! Errors are typed so that callers decide by kind, not by message: [`RemoteError`] tells a
//! host that may come back (unreachable, retried) from one that refused us (host key, login)
//! and from a login key that cannot be used here; [`facts::FactsError`] a node lost from facts
//! it could not read; [`modules::ModuleError`] bad input (an [`modules::ArgError`], a template
//! that does not render) from the host not reached, while a module that ran and failed is a
//! result; [`playbook::expr::ExprError`] a syntax error from an undefined variable.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

pub mod checks;
pub mod facts;
pub mod hosts;
pub mod known_hosts;
pub mod modules;
pub mod playbook;
pub mod prep;
pub mod ssh;

/// One command for a host: a POSIX shell command line (the remote side's `sh -c`).
#[derive(Clone, Copy, Debug)]
pub struct Exec<'a> {
    /// The command line, already quoted with [`sh_quote`] where it carries values.
    pub command: &'a str,
    /// Bytes written to the command's standard input, then closed.
    pub stdin: Option<&'a [u8]>,
    /// How long the command may run before it is abandoned (and reported as timed out).
    pub timeout: Duration,
    /// How many bytes of stdout and of stderr are kept each; the rest is counted and dropped.
    pub output_cap: usize,
}

impl<'a> Exec<'a> {
    /// A command with the default timeout (5 minutes) and output cap (4 MiB), no stdin.
    pub fn new(command: &'a str) -> Self {
        Exec {
            command,
            stdin: None,
            timeout: Duration::from_secs(300),
            output_cap: 4 << 20,
        }
    }

    /// The same command with `stdin`.
    pub fn with_stdin(mut self, stdin: &'a [u8]) -> Self {
        self.stdin = Some(stdin);
        self
    }

    /// The same command with another timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

/// What a command returned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Output {
    /// The exit status; `None` when the command ended by a signal or without one reported.
    pub status: Option<i32>,
    /// Standard output, at most the cap.
    pub stdout: Vec<u8>,
    /// Standard error, at most the cap.
    pub stderr: Vec<u8>,
    /// Whether either stream went past the cap (the kept part is its beginning).
    pub truncated: bool,
}

impl Output {
    /// Exit status 0.
    pub fn success(&self) -> bool {
        self.status == Some(0)
    }

    /// stdout as text (lossy), without one trailing newline.
    pub fn stdout_text(&self) -> String {
        trim_newline(String::from_utf8_lossy(&self.stdout).into_owned())
    }

    /// stderr as text (lossy), without one trailing newline.
    pub fn stderr_text(&self) -> String {
        trim_newline(String::from_utf8_lossy(&self.stderr).into_owned())
    }
}

fn trim_newline(mut s: String) -> String {
    if s.ends_with('\n') {
        s.pop();
        if s.ends_with('\r') {
            s.pop();
        }
    }
    s
}

/// Why a command could not be run on a host. A command that ran and failed is an [`Output`]
/// with a non-zero status, not an error. Callers branch on the kind: a connection that may come
/// back is retried ([`RemoteError::Unreachable`]); a refusal ([`RemoteError::HostKey`],
/// [`RemoteError::Auth`]) or a login key that cannot be used ([`RemoteError::LoginKey`]) is
/// not, and [`RemoteError::is_unreachable`] counts all of those as Ansible's UNREACHABLE.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The host could not be reached or its connection dropped (Ansible's UNREACHABLE).
    #[error("{host}: unreachable: {detail}")]
    Unreachable {
        /// The host (`name (address:port)` over SSH).
        host: String,
        /// What failed, and what to check.
        detail: String,
    },
    /// The host's key was not trusted: not the one pinned or learned for it, or what decides
    /// (a pin, the run's known_hosts) could not be read.
    #[error("{host}: {refusal}")]
    HostKey {
        /// The host.
        host: String,
        /// Why, typed: a changed key, a bad pin, an unreadable known_hosts (boxed: every
        /// command's result carries this error type).
        #[source]
        refusal: Box<ssh::HostKeyRefusal>,
    },
    /// The host refused our key or user.
    #[error("{host}: authentication failed: {detail}")]
    Auth {
        /// The host.
        host: String,
        /// Which user and keys were refused, and the fix.
        detail: String,
    },
    /// The login key on this machine cannot be used (the key file, the ssh-agent); the host
    /// was not asked.
    #[error("{host}: authentication failed: {source}")]
    LoginKey {
        /// The host.
        host: String,
        /// Why, naming the file or socket and the fix (boxed, as `refusal`).
        #[source]
        source: Box<ssh::LoginKeyError>,
    },
    /// The command ran longer than its timeout.
    #[error("{host}: command timed out after {after:?}: {command}")]
    Timeout {
        /// The host.
        host: String,
        /// The command's timeout.
        after: Duration,
        /// The command line.
        command: String,
    },
    /// Anything else (a local I/O error, a protocol error).
    #[error("{host}: {detail}")]
    Other {
        /// The host.
        host: String,
        /// What failed.
        detail: String,
    },
}

impl RemoteError {
    /// Whether the host counts as unreachable in a recap (no connection, a refused host key or
    /// login, a login key that cannot be used), rather than as a failed task.
    pub fn is_unreachable(&self) -> bool {
        matches!(
            self,
            RemoteError::Unreachable { .. }
                | RemoteError::HostKey { .. }
                | RemoteError::Auth { .. }
                | RemoteError::LoginKey { .. }
        )
    }
}

/// A boxed future, so that [`Remote`] can be used as `dyn Remote`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A host that runs commands: an SSH session on a site, [`Local`] in unit tests.
pub trait Remote: Send + Sync {
    /// The host's name as the inventory gives it (used in every message).
    fn name(&self) -> &str;
    /// Runs one command.
    fn exec<'a>(&'a self, exec: Exec<'a>) -> BoxFuture<'a, Result<Output, RemoteError>>;
}

/// Quotes `value` for a POSIX shell: one argument, whatever it holds.
pub fn sh_quote(value: &str) -> String {
    if !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@%+".contains(&b))
    {
        return value.to_string();
    }
    format!("'{}'", value.replace('\'', r"'\''"))
}

/// `command` as it runs with `become` (privilege escalation): through `sudo -n` (never a
/// password prompt) unless the login user is already root.
pub fn with_become(command: &str, become_: bool, user: &str) -> String {
    if !become_ || user == "root" {
        return command.to_string();
    }
    format!("sudo -n -- /bin/sh -c {}", sh_quote(command))
}

/// Runs commands on this machine through `/bin/sh -c`: the engine's and modules' unit tests, and
/// the lab's own checks. Not used on a site.
#[derive(Clone, Debug)]
pub struct Local {
    /// The name it answers to.
    pub name: String,
}

impl Remote for Local {
    fn name(&self) -> &str {
        &self.name
    }

    fn exec<'a>(&'a self, exec: Exec<'a>) -> BoxFuture<'a, Result<Output, RemoteError>> {
        Box::pin(async move { local_exec(&self.name, exec).await })
    }
}

async fn local_exec(name: &str, exec: Exec<'_>) -> Result<Output, RemoteError> {
    use tokio::io::AsyncWriteExt;
    let other = |detail: String| RemoteError::Other {
        host: name.to_string(),
        detail,
    };
    let mut child = tokio::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(exec.command)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| other(format!("cannot start /bin/sh: {e}")))?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    let data = exec.stdin.map(<[u8]>::to_vec);
    let feed = async move {
        if let Some(data) = data {
            let _ = stdin.write_all(&data).await;
        }
        drop(stdin);
    };
    let cap = exec.output_cap;
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let all = async {
        let ((), (out, o1), (err, o2), status) = tokio::join!(
            feed,
            read_capped(stdout, cap),
            read_capped(stderr, cap),
            child.wait()
        );
        (out, o1, err, o2, status)
    };
    match tokio::time::timeout(exec.timeout, all).await {
        Ok((stdout, o1, stderr, o2, status)) => {
            let status = status.map_err(|e| other(format!("waiting for /bin/sh: {e}")))?;
            Ok(Output {
                status: status.code(),
                stdout,
                stderr,
                truncated: o1 || o2,
            })
        }
        Err(_) => Err(RemoteError::Timeout {
            host: name.to_string(),
            after: exec.timeout,
            command: exec.command.to_string(),
        }),
    }
}

/// Reads `pipe` to its end, keeping at most `cap` bytes; says whether more came.
async fn read_capped<R: tokio::io::AsyncRead + Unpin>(
    pipe: Option<R>,
    cap: usize,
) -> (Vec<u8>, bool) {
    use tokio::io::AsyncReadExt;
    let (mut kept, mut over) = (Vec::new(), false);
    if let Some(mut pipe) = pipe {
        let mut buf = [0u8; 8192];
        while let Ok(n) = pipe.read(&mut buf).await {
            if n == 0 {
                break;
            }
            let room = cap.saturating_sub(kept.len());
            kept.extend_from_slice(&buf[..n.min(room)]);
            over |= n > room;
        }
    }
    (kept, over)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_keeps_one_argument() {
        assert_eq!(sh_quote("abc/d.e"), "abc/d.e");
        assert_eq!(sh_quote(""), "''");
        assert_eq!(sh_quote("it's"), r"'it'\''s'");
        assert_eq!(sh_quote("a b;c"), "'a b;c'");
    }

    #[test]
    fn become_goes_through_sudo_unless_root() {
        assert_eq!(with_become("id -u", false, "core"), "id -u");
        assert_eq!(with_become("id -u", true, "root"), "id -u");
        assert_eq!(
            with_become("id -u", true, "core"),
            "sudo -n -- /bin/sh -c 'id -u'"
        );
    }

    #[tokio::test]
    async fn local_runs_with_stdin_cap_and_status() {
        let l = Local {
            name: "here".into(),
        };
        let mut e = Exec::new("cat; echo err >&2; exit 3").with_stdin(b"hello");
        e.output_cap = 3;
        let out = l.exec(e).await.unwrap();
        assert_eq!(out.status, Some(3));
        assert_eq!(out.stdout, b"hel");
        assert!(out.truncated);
        assert_eq!(out.stderr_text(), "err");
        let slow = l
            .exec(Exec::new("sleep 5").with_timeout(Duration::from_millis(100)))
            .await;
        assert!(matches!(slow, Err(RemoteError::Timeout { .. })));
    }
}
