//! The modules a playbook task may call on a host, with Ansible's semantics
//! (../shared/REFERENCE.md section 9). Each runs through [`Remote::exec`] only.
//!
//! The engine ([`super::playbook`]) handles `assert`, `fail`, `debug` and `set_fact` itself
//! (they touch no host); everything in [`REMOTE`] is run here by [`run`].
//!
//! A module that ran and failed on the host (a command that exited non-zero, a file that is a
//! directory) returns a result with `failed: true`, as Ansible reports it; a call that could
//! not be made is a [`ModuleError`]: bad input ([`ArgError`], a template that does not render)
//! or the host not reached ([`super::RemoteError`]).

use std::path::Path;

use serde_json::{Map, Value};

use super::playbook::expr::ExprError;
use super::Remote;

pub mod args;
pub use args::ArgError;
mod command;
mod files;
mod hostfs;
mod kernel;
mod lineinfile;
mod service;
mod wait_for;

/// The modules run on a host, by their short names.
pub const REMOTE: &[&str] = &[
    "command",
    "shell",
    "copy",
    "template",
    "file",
    "lineinfile",
    "stat",
    "systemd_service",
    "systemd",
    "service",
    "sysctl",
    "modprobe",
    "wait_for",
];

/// The modules the engine runs itself.
pub const ENGINE: &[&str] = &["assert", "fail", "debug", "set_fact"];

/// A module name as a playbook may write it: `copy`, `ansible.builtin.copy`, and the
/// collections' names for sysctl and modprobe (`ansible.posix.sysctl`,
/// `community.general.modprobe`). Returns the short name, or `None` when it is not ours.
pub fn canonical(name: &str) -> Option<&'static str> {
    let short = name
        .strip_prefix("ansible.builtin.")
        .or_else(|| name.strip_prefix("ansible.posix."))
        .or_else(|| name.strip_prefix("community.general."))
        .unwrap_or(name);
    REMOTE.iter().chain(ENGINE).find(|m| **m == short).copied()
}

/// What a module call gets besides its arguments.
pub struct ModuleCtx<'a> {
    /// The host.
    pub remote: &'a dyn Remote,
    /// The login user (for `become`).
    pub user: &'a str,
    /// `become: true` on the task or play.
    pub become_: bool,
    /// `--check` or `check_mode: true`: report what would change, change nothing.
    pub check: bool,
    /// `--diff`: fill [`ModuleResult::diff`] for copy, template and lineinfile.
    pub diff: bool,
    /// The playbook's directory: relative `src` paths (copy, template) are looked up in
    /// `DIR/files/` and `DIR/templates/` first, then `DIR/`, as Ansible does.
    pub playbook_dir: &'a Path,
    /// Renders a template's text with the task's variables (the `template` module).
    pub render: &'a (dyn Fn(&str) -> Result<String, ExprError> + Sync),
    /// Each command's timeout.
    pub timeout: std::time::Duration,
}

/// What a module call did.
#[derive(Clone, Debug, Default)]
pub struct ModuleResult {
    /// Whether it changed the host (or would have, in check mode).
    pub changed: bool,
    /// Whether it failed (before `failed_when` is applied by the engine).
    pub failed: bool,
    /// Whether it did nothing by its own rules (a command in check mode, `creates` present).
    pub skipped: bool,
    /// A message for a person.
    pub msg: Option<String>,
    /// A unified diff (before -> after) when `--diff` asked for one.
    pub diff: Option<String>,
    /// The result's other fields as Ansible names them (`rc`, `stdout`, `stdout_lines`,
    /// `stderr`, `stderr_lines`, `stat`, `state`, ...), for `register`.
    pub data: Map<String, Value>,
}

/// Why a module call could not be made at all; a module that ran and failed returns `Ok` with
/// `failed: true`. Callers branch on it: bad input ([`ModuleError::Args`],
/// [`ModuleError::Template`]) is the playbook's to fix, [`ModuleError::Remote`] the host's or
/// the connection's (see [`super::RemoteError::is_unreachable`]).
#[derive(Debug, thiserror::Error)]
pub enum ModuleError {
    /// The arguments do not fit the module: names the argument and what it expects.
    #[error(transparent)]
    Args(#[from] ArgError),
    /// The `template` module's file does not render with the task's variables.
    #[error("rendering {}: {source}", path.display())]
    Template {
        /// The template file on this machine.
        path: std::path::PathBuf,
        /// Why, typed (a syntax error, an undefined variable, a filter's error).
        #[source]
        source: ExprError,
    },
    /// The host could not run the command.
    #[error(transparent)]
    Remote(#[from] super::RemoteError),
}

/// Why a module stopped: bad arguments or an unreachable host ([`ModuleError`]), or a step on
/// the host that failed (the task fails with this message).
#[derive(Debug)]
pub(crate) enum Fault {
    Error(ModuleError),
    Failed(String),
}

impl Fault {
    /// The task fails with `why`'s message.
    pub(crate) fn failed(why: impl std::fmt::Display) -> Fault {
        Fault::Failed(why.to_string())
    }
}

impl From<ModuleError> for Fault {
    fn from(e: ModuleError) -> Self {
        Fault::Error(e)
    }
}

impl From<super::RemoteError> for Fault {
    fn from(e: super::RemoteError) -> Self {
        Fault::Error(ModuleError::Remote(e))
    }
}

impl ModuleResult {
    /// A failed result with `msg`.
    pub fn failed(msg: impl Into<String>) -> Self {
        ModuleResult {
            failed: true,
            msg: Some(msg.into()),
            ..Default::default()
        }
    }
}

/// The argument table of a module in [`REMOTE`] (by its canonical name or alias).
fn spec(module: &str) -> Option<&'static args::Spec> {
    Some(match module {
        "command" => &command::COMMAND,
        "shell" => &command::SHELL,
        "copy" => &files::COPY,
        "template" => &files::TEMPLATE,
        "file" => &files::FILE,
        "stat" => &files::STAT,
        "lineinfile" => &lineinfile::SPEC,
        "systemd_service" | "systemd" => &service::SYSTEMD,
        "service" => &service::SERVICE,
        "sysctl" => &kernel::SYSCTL,
        "modprobe" => &kernel::MODPROBE,
        "wait_for" => &wait_for::SPEC,
        _ => return None,
    })
}

/// Static check before any host is touched: unknown argument names, wrong types, missing
/// required ones, bad choices (values that are still templates pass). The error names the
/// argument and lists the accepted ones.
pub fn check_args(module: &str, args: &Map<String, Value>) -> Result<(), ArgError> {
    let spec = spec(module).ok_or_else(|| ArgError::NotRemote {
        module: module.to_string(),
    })?;
    spec.resolve(args, true).map(|_| ())
}

/// Runs `module` (a name from [`REMOTE`]) with its templated `args` on `ctx.remote`.
pub async fn run(
    module: &str,
    args: &Map<String, Value>,
    ctx: &ModuleCtx<'_>,
) -> Result<ModuleResult, ModuleError> {
    let spec = spec(module).ok_or_else(|| ArgError::NotRemote {
        module: module.to_string(),
    })?;
    let a = spec.resolve(args, false)?;
    let done = match module {
        "command" => command::run(&a, false, ctx).await,
        "shell" => command::run(&a, true, ctx).await,
        "copy" => files::copy(&a, ctx).await,
        "template" => files::template(&a, ctx).await,
        "file" => files::file(&a, ctx).await,
        "stat" => files::stat(&a, ctx).await,
        "lineinfile" => lineinfile::run(&a, ctx).await,
        "sysctl" => kernel::sysctl(&a, ctx).await,
        "modprobe" => kernel::modprobe(&a, ctx).await,
        "wait_for" => wait_for::run(&a, ctx).await,
        _ => service::run(&a, ctx).await,
    };
    match done {
        Ok(result) => Ok(result),
        Err(Fault::Failed(msg)) => Ok(ModuleResult::failed(msg)),
        Err(Fault::Error(e)) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hostprep::playbook::expr;
    use crate::hostprep::{BoxFuture, Exec, Local, Output, RemoteError};
    use serde_json::json;

    /// A host that cannot be reached.
    struct Down;

    impl Remote for Down {
        fn name(&self) -> &str {
            "gpu-03"
        }

        fn exec<'a>(&'a self, _: Exec<'a>) -> BoxFuture<'a, Result<Output, RemoteError>> {
            Box::pin(async {
                Err(RemoteError::Unreachable {
                    host: "gpu-03 (10.0.0.3:22)".into(),
                    detail: "cannot connect: Connection refused".into(),
                })
            })
        }
    }

    async fn call(
        remote: &dyn Remote,
        dir: &Path,
        module: &str,
        args: Value,
    ) -> Result<ModuleResult, ModuleError> {
        let render = |text: &str| expr::render(text, &expr::context(&Map::new()));
        let ctx = ModuleCtx {
            remote,
            user: "root",
            become_: false,
            check: false,
            diff: false,
            playbook_dir: dir,
            render: &render,
            timeout: std::time::Duration::from_secs(30),
        };
        run(module, args.as_object().unwrap(), &ctx).await
    }

    #[tokio::test]
    async fn a_caller_tells_an_unreachable_host_from_a_failure_on_it_from_bad_input() {
        let dir = tempfile::tempdir().unwrap();
        let here = Local {
            name: "here".into(),
        };
        // The host not reached: an error the recap counts as unreachable.
        let e = call(&Down, dir.path(), "command", json!({"cmd": "true"}))
            .await
            .unwrap_err();
        assert!(
            matches!(&e, ModuleError::Remote(r) if r.is_unreachable()),
            "{e:?}"
        );
        // The module ran and failed on the host: a result, not an error.
        let r = call(&here, dir.path(), "command", json!({"cmd": "false"}))
            .await
            .unwrap();
        assert!(r.failed && r.data["rc"] == json!(1), "{r:?}");
        // Bad input: an argument the module does not take, found before the host is asked.
        let e = call(
            &Down,
            dir.path(),
            "command",
            json!({"cmd": "true", "colour": 1}),
        )
        .await
        .unwrap_err();
        assert!(
            matches!(&e, ModuleError::Args(a) if a.argument() == Some("colour")),
            "{e:?}"
        );
        // Bad input: a template that does not parse, named by its file.
        let templates = dir.path().join("templates");
        fs_err::create_dir_all(&templates).unwrap();
        fs_err::write(templates.join("motd.j2"), "hello {{ name\n").unwrap();
        let e = call(
            &Down,
            dir.path(),
            "template",
            json!({"src": "motd.j2", "dest": "/etc/motd"}),
        )
        .await
        .unwrap_err();
        assert!(
            matches!(
                &e,
                ModuleError::Template {
                    source: ExprError::Syntax { .. },
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(e.to_string().starts_with("rendering "), "{e}");
        assert!(e.to_string().contains("motd.j2: syntax error"), "{e}");
    }
}
