//! `systemd_service` (also `systemd` and `service`): a unit started, stopped, restarted or
//! reloaded, and enabled or not, through `systemctl`. started/stopped and enabled act only when
//! the unit is not already so; restarted always acts; check mode only reports.

use serde_json::{Map, Value};

use super::args::{Arg, Args, Kind, Spec};
use super::hostfs::{failed_cmd, sh};
use super::{Fault, ModuleCtx, ModuleResult};
use crate::hostprep::sh_quote;

const STATES: &[&str] = &["started", "stopped", "restarted", "reloaded"];

/// `systemd_service`'s (and `systemd`'s) arguments.
pub const SYSTEMD: Spec = Spec {
    module: "systemd_service",
    args: &[
        Arg::opt("name", Kind::Str).alias(&["service", "unit"]),
        Arg::opt("state", Kind::Str).one_of(STATES),
        Arg::opt("enabled", Kind::Bool),
        Arg::opt("daemon_reload", Kind::Bool).alias(&["daemon-reload"]),
    ],
    one_required: &[&["name", "daemon_reload"]],
    exclusive: &[],
};

/// `service`'s arguments (the same module on a systemd host).
pub const SERVICE: Spec = Spec {
    module: "service",
    args: &[
        Arg::opt("name", Kind::Str).req(),
        Arg::opt("state", Kind::Str).one_of(STATES),
        Arg::opt("enabled", Kind::Bool),
    ],
    one_required: &[],
    exclusive: &[],
};

/// What `systemctl` says of a unit.
struct Unit {
    loaded: bool,
    active: String,
    enabled: bool,
}

async fn query(ctx: &ModuleCtx<'_>, name: &str) -> Result<Unit, Fault> {
    let n = sh_quote(name);
    let cmd = format!(
        "echo \"load=$(systemctl show --property=LoadState --value -- {n})\"; \
         echo \"active=$(systemctl is-active -- {n})\"; \
         systemctl is-enabled -- {n} >/dev/null 2>&1; echo \"enabled=$?\""
    );
    let out = sh(ctx, &cmd, None).await?;
    let text = out.stdout_text();
    let field = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(k))
            .unwrap_or_default()
            .to_string()
    };
    Ok(Unit {
        loaded: field("load=") != "not-found",
        active: field("active="),
        enabled: field("enabled=") == "0",
    })
}

/// Runs `systemctl VERB NAME` unless in check mode.
async fn systemctl(ctx: &ModuleCtx<'_>, verb: &str, name: &str) -> Result<(), Fault> {
    if ctx.check {
        return Ok(());
    }
    let out = sh(
        ctx,
        &format!("systemctl {verb} -- {}", sh_quote(name)),
        None,
    )
    .await?;
    if out.success() {
        Ok(())
    } else {
        Err(failed_cmd(&format!("systemctl {verb} {name}"), &out))
    }
}

/// The unit `a` names in the state it asks for.
pub async fn run(a: &Args, ctx: &ModuleCtx<'_>) -> Result<ModuleResult, Fault> {
    if a.bool("daemon_reload", false) && !ctx.check {
        let out = sh(ctx, "systemctl daemon-reload", None).await?;
        if !out.success() {
            return Err(failed_cmd("systemctl daemon-reload", &out));
        }
    }
    let mut r = ModuleResult::default();
    let Some(name) = a.str("name") else {
        return Ok(r);
    };
    let unit = query(ctx, name).await?;
    if !unit.loaded {
        return Err(Fault::Failed(format!(
            "Could not find the requested service {name}: host"
        )));
    }
    if let Some(want) = a.has("enabled").then(|| a.bool("enabled", false)) {
        if want != unit.enabled {
            systemctl(ctx, if want { "enable" } else { "disable" }, name).await?;
            r.changed = true;
        }
        r.data.insert("enabled".into(), Value::from(want));
    }
    let running =
        unit.active == "active" || unit.active == "activating" || unit.active == "reloading";
    let verb = match a.str("state") {
        Some("started") if !running => Some("start"),
        Some("stopped") if running => Some("stop"),
        Some("restarted") => Some("restart"),
        Some("reloaded") => Some(if running { "reload" } else { "start" }),
        _ => None,
    };
    if let Some(verb) = verb {
        systemctl(ctx, verb, name).await?;
        r.changed = true;
    }
    if let Some(state) = a.str("state") {
        r.data.insert("state".into(), Value::from(state));
    }
    let mut status = Map::new();
    status.insert("ActiveState".into(), Value::from(unit.active));
    r.data.insert("name".into(), Value::from(name));
    r.data.insert("status".into(), Value::Object(status));
    Ok(r)
}
