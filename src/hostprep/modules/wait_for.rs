//! `wait_for`: a port, a path or a regex in a file, polled on the host by one shell loop with
//! its own deadline (one round trip). Ports are probed with bash's `/dev/tcp` under
//! `timeout` (both RHCOS and Debian ship bash and coreutils). Never changes anything.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::args::{Arg, Args, Kind, Spec};
use super::hostfs::sh_with_timeout;
use super::{Fault, ModuleCtx, ModuleResult};
use crate::hostprep::sh_quote;

/// `wait_for`'s arguments.
pub const SPEC: Spec = Spec {
    module: "wait_for",
    args: &[
        Arg::opt("host", Kind::Str),
        Arg::opt("port", Kind::Int),
        Arg::opt("path", Kind::Str),
        Arg::opt("search_regex", Kind::Str),
        Arg::opt("state", Kind::Str).one_of(&["started", "stopped", "present", "absent"]),
        Arg::opt("timeout", Kind::Int),
        Arg::opt("delay", Kind::Int),
        Arg::opt("sleep", Kind::Int),
        Arg::opt("connect_timeout", Kind::Int),
        Arg::opt("msg", Kind::Str),
    ],
    one_required: &[],
    exclusive: &[&["port", "path"]],
};

/// What is waited for, as a shell test that succeeds when it is there, and how a timeout reads.
fn probe(a: &Args) -> Result<Option<(String, String)>, Fault> {
    let host = a.str("host").unwrap_or("127.0.0.1");
    let state = a.str("state").unwrap_or("started");
    let gone = state == "stopped" || state == "absent";
    let regex = a.str("search_regex");
    let ct = a.int("connect_timeout", 5).max(1);
    let (test, what) = if a.has("port") {
        let port = a.int("port", 0);
        let connect = format!(
            "exec 3<>/dev/tcp/$0/$1{}",
            if regex.is_some() { "; cat <&3" } else { "" }
        );
        let mut test = format!(
            "timeout {ct} bash -c {} {} {port} 2>/dev/null",
            sh_quote(&connect),
            sh_quote(host)
        );
        if let Some(re) = regex {
            test = format!("{test} | grep -Eq -- {}", sh_quote(re));
        }
        (test, format!("{host}:{port}"))
    } else if let Some(path) = a.str("path") {
        let test = match regex {
            Some(re) => format!(
                "grep -Eq -- {} {} 2>/dev/null",
                sh_quote(re),
                sh_quote(path)
            ),
            None => format!("[ -e {} ]", sh_quote(path)),
        };
        (test, path.to_string())
    } else {
        return Ok(None);
    };
    let timeout_msg = match (gone, regex) {
        (true, _) if a.has("port") => format!("Timeout when waiting for {what} to stop."),
        (true, _) => format!("Timeout when waiting for {what} to be absent."),
        (false, Some(re)) => format!("Timeout when waiting for search string {re} in {what}"),
        (false, None) if a.has("port") => format!("Timeout when waiting for {what}"),
        (false, None) => format!("Timeout when waiting for file {what}"),
    };
    Ok(Some((
        if gone {
            format!("! {{ {test}; }}")
        } else {
            test
        },
        timeout_msg,
    )))
}

/// Waits on the host; fails with Ansible's message (or `msg`) at the timeout.
pub async fn run(a: &Args, ctx: &ModuleCtx<'_>) -> Result<ModuleResult, Fault> {
    let (timeout, delay, sleep) = (
        a.int("timeout", 300).max(0),
        a.int("delay", 0).max(0),
        a.int("sleep", 1).max(1),
    );
    let started = Instant::now();
    let probe = probe(a)?;
    let script = match &probe {
        Some((test, _)) => format!(
            "sleep {delay}; end=$(( $(date +%s) + {timeout} ))\n\
             while :; do\n  if {test}; then exit 0; fi\n  [ \"$(date +%s)\" -ge \"$end\" ] && exit 3\n  sleep {sleep}\ndone"
        ),
        None => format!("sleep {}", delay + timeout),
    };
    let connect = a.int("connect_timeout", 5).max(1);
    let budget =
        Duration::from_secs((delay + timeout + sleep + connect) as u64 + 30).max(ctx.timeout);
    let out = sh_with_timeout(ctx, &script, budget).await?;
    let mut r = ModuleResult::default();
    r.data
        .insert("elapsed".into(), Value::from(started.elapsed().as_secs()));
    r.data.insert(
        "state".into(),
        Value::from(a.str("state").unwrap_or("started")),
    );
    if let Some(port) = a.has("port").then(|| a.int("port", 0)) {
        r.data.insert("port".into(), Value::from(port));
    }
    if let Some(path) = a.str("path") {
        r.data.insert("path".into(), Value::from(path));
    }
    match (out.status, probe) {
        (Some(0), _) => Ok(r),
        (Some(3), Some((_, timeout_msg))) => {
            r.failed = true;
            r.msg = Some(a.str("msg").map(str::to_string).unwrap_or(timeout_msg));
            Ok(r)
        }
        _ => Err(Fault::Failed(format!(
            "waiting failed (exit {:?}): {}",
            out.status,
            out.stderr_text()
        ))),
    }
}
