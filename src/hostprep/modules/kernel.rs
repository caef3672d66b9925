//! `sysctl` (ansible.posix) and `modprobe` (community.general): kernel settings and modules.
//! The sysctl file is edited here ([`sysctl_edit`]) and written back atomically; the running
//! value is read from `/proc/sys`. A module counts as loaded when `/proc/modules` lists it or
//! `/sys/module/NAME` exists (built in).

use serde_json::Value;

use super::args::{Arg, Args, Kind, Spec};
use super::command::split_words;
use super::hostfs::{self, failed_cmd, sh, Attrs};
use super::{Fault, ModuleCtx, ModuleResult};
use crate::hostprep::sh_quote;

/// Where the kernel lists its loaded modules.
pub const PROC_MODULES: &str = "/proc/modules";
/// Where `persistent: present` asks for a module at boot (`NAME.conf`).
pub const MODULES_LOAD_DIR: &str = "/etc/modules-load.d";
/// Where `persistent: present` keeps a module's `params` (`NAME.conf`).
pub const MODPROBE_DIR: &str = "/etc/modprobe.d";

/// `sysctl`'s arguments.
pub const SYSCTL: Spec = Spec {
    module: "sysctl",
    args: &[
        Arg::opt("name", Kind::Str).req().alias(&["key"]),
        Arg::opt("value", Kind::Str).alias(&["val"]),
        Arg::opt("state", Kind::Str).one_of(&["present", "absent"]),
        Arg::opt("reload", Kind::Bool),
        Arg::opt("sysctl_set", Kind::Bool),
        Arg::opt("sysctl_file", Kind::Str),
        Arg::opt("ignoreerrors", Kind::Bool),
    ],
    one_required: &[],
    exclusive: &[],
};

/// `modprobe`'s arguments.
pub const MODPROBE: Spec = Spec {
    module: "modprobe",
    args: &[
        Arg::opt("name", Kind::Str).req(),
        Arg::opt("state", Kind::Str).one_of(&["present", "absent"]),
        Arg::opt("params", Kind::Str),
        Arg::opt("persistent", Kind::Str).one_of(&["present", "absent", "disabled"]),
    ],
    one_required: &[],
    exclusive: &[],
};

/// Values compared as Ansible does: whitespace runs count as one space.
fn same_value(a: &str, b: &str) -> bool {
    a.split_whitespace().eq(b.split_whitespace())
}

/// The value a sysctl file gives `name` (its last `name = value` line).
pub fn sysctl_value(text: &str, name: &str) -> Option<String> {
    text.lines()
        .filter_map(entry)
        .filter(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
        .next_back()
}

fn entry(line: &str) -> Option<(&str, &str)> {
    let t = line.trim();
    if t.is_empty() || t.starts_with('#') || t.starts_with(';') {
        return None;
    }
    t.split_once('=').map(|(k, v)| (k.trim(), v.trim()))
}

/// The sysctl file with `name` set to `value` (its first line rewritten as `name=value`, later
/// ones dropped, or one appended), or without it (`value` `None`).
pub fn sysctl_edit(text: &str, name: &str, value: Option<&str>) -> String {
    let (mut out, mut done) = (String::new(), false);
    for line in text.lines() {
        if entry(line).is_some_and(|(k, _)| k == name) {
            if let (Some(v), false) = (value, done) {
                out.push_str(&format!("{name}={v}\n"));
                done = true;
            }
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    if let (Some(v), false) = (value, done) {
        out.push_str(&format!("{name}={v}\n"));
    }
    out
}

/// `/proc/sys/...` of a sysctl name (dots are separators unless the name uses slashes).
fn proc_path(name: &str) -> String {
    let rel = if name.contains('/') {
        name.to_string()
    } else {
        name.replace('.', "/")
    };
    format!("/proc/sys/{}", rel.trim_start_matches('/'))
}

/// What a sysctl task finds and must do.
struct SysctlPlan {
    file_text: String,
    write_file: bool,
    set_proc: bool,
    changed: bool,
}

async fn sysctl_plan(
    a: &Args,
    ctx: &ModuleCtx<'_>,
    file: &str,
    value: &str,
) -> Result<SysctlPlan, Fault> {
    let name = a.str("name").unwrap_or_default();
    let file_text = match hostfs::stat(ctx, file, true).await? {
        Some(_) => String::from_utf8_lossy(&hostfs::read(ctx, file).await?).into_owned(),
        None => String::new(),
    };
    let out = sh(ctx, &format!("cat -- {}", sh_quote(&proc_path(name))), None).await?;
    let proc = out.success().then(|| out.stdout_text());
    let present = a.str("state") != Some("absent");
    let (reload, set) = (a.bool("reload", true), a.bool("sysctl_set", false));
    if present && proc.is_none() && (reload || set) && !a.bool("ignoreerrors", false) {
        return Err(Fault::Failed(format!(
            "cannot read {} (is `{name}` a kernel setting?): {}",
            proc_path(name),
            out.stderr_text()
        )));
    }
    let file_value = sysctl_value(&file_text, name);
    let write_file = if present {
        !file_value.is_some_and(|v| same_value(&v, value))
    } else {
        file_value.is_some()
    };
    let proc_differs = proc.as_deref().is_none_or(|p| !same_value(p, value));
    let set_proc = present && set && proc.is_some() && proc_differs;
    let changed = write_file || set_proc || (present && reload && proc_differs);
    Ok(SysctlPlan {
        file_text,
        write_file,
        set_proc,
        changed,
    })
}

/// `sysctl`: the entry in `sysctl_file`, the running value with `sysctl_set`, and `sysctl -p
/// FILE` after a change when `reload` (Ansible's defaults: reload yes, sysctl_set no).
pub async fn sysctl(a: &Args, ctx: &ModuleCtx<'_>) -> Result<ModuleResult, Fault> {
    let name = a.str("name").unwrap_or_default();
    let file = a.str("sysctl_file").unwrap_or("/etc/sysctl.conf");
    let present = a.str("state") != Some("absent");
    let value = match (present, a.str("value")) {
        (true, None) => {
            return Err(Fault::Failed(format!(
                "sysctl {name}: state=present needs `value`"
            )))
        }
        (_, v) => v.unwrap_or_default().trim().to_string(),
    };
    let plan = sysctl_plan(a, ctx, file, &value).await?;
    let mut r = ModuleResult {
        changed: plan.changed,
        ..Default::default()
    };
    r.data.insert("name".into(), Value::from(name));
    r.data.insert("value".into(), Value::from(value.clone()));
    if ctx.check || !plan.changed {
        return Ok(r);
    }
    let ignore = if a.bool("ignoreerrors", false) {
        "-e "
    } else {
        ""
    };
    if plan.set_proc {
        let out = sh(
            ctx,
            &format!("sysctl {ignore}-w {}", sh_quote(&format!("{name}={value}"))),
            None,
        )
        .await?;
        if !out.success() {
            return Err(failed_cmd(&format!("setting {name}"), &out));
        }
    }
    if plan.write_file {
        let new = sysctl_edit(&plan.file_text, name, present.then_some(value.as_str()));
        hostfs::write_atomic(ctx, file, new.as_bytes(), &Attrs::default(), false).await?;
    }
    if a.bool("reload", true) {
        let out = sh(ctx, &format!("sysctl {ignore}-p {}", sh_quote(file)), None).await?;
        if !out.success() {
            return Err(failed_cmd(&format!("reloading {file}"), &out));
        }
    }
    Ok(r)
}

/// Whether a kernel module is loaded: `Some(true)` listed in [`PROC_MODULES`], `Some(false)`
/// built in (only `/sys/module/NAME`), `None` absent.
async fn module_state(ctx: &ModuleCtx<'_>, name: &str) -> Result<Option<bool>, Fault> {
    let norm = name.replace('-', "_");
    let cmd = format!(
        "if grep -q -- {} {PROC_MODULES} 2>/dev/null; then echo loaded; elif [ -d /sys/module/{} ]; then echo builtin; else echo absent; fi",
        sh_quote(&format!("^{norm} ")),
        sh_quote(&norm)
    );
    let out = sh(ctx, &cmd, None).await?;
    Ok(match out.stdout_text().as_str() {
        "loaded" => Some(true),
        "builtin" => Some(false),
        _ => None,
    })
}

/// `modprobe`: the module loaded (with `params`) or removed, and with `persistent` its
/// `modules-load.d`/`modprobe.d` files.
pub async fn modprobe(a: &Args, ctx: &ModuleCtx<'_>) -> Result<ModuleResult, Fault> {
    let name = a.str("name").unwrap_or_default();
    let params = a.str("params").unwrap_or_default();
    let present = a.str("state") != Some("absent");
    let state = module_state(ctx, name).await?;
    let cmd = match (present, state) {
        (true, None) => {
            let words: Vec<String> = split_words(params)
                .map_err(Fault::failed)?
                .iter()
                .map(|w| sh_quote(w))
                .collect();
            Some(format!(
                "modprobe -- {} {}",
                sh_quote(name),
                words.join(" ")
            ))
        }
        (false, Some(true)) => Some(format!("modprobe -r -- {}", sh_quote(name))),
        (false, Some(false)) => {
            return Err(Fault::Failed(format!(
                "{name} is built into the kernel; it cannot be removed"
            )))
        }
        _ => None,
    };
    let mut r = ModuleResult {
        changed: cmd.is_some(),
        ..Default::default()
    };
    if let (Some(cmd), false) = (&cmd, ctx.check) {
        let out = sh(ctx, cmd, None).await?;
        if !out.success() {
            return Err(failed_cmd(&format!("modprobe {name}"), &out));
        }
    }
    let load = format!("{MODULES_LOAD_DIR}/{name}.conf");
    let opts = format!("{MODPROBE_DIR}/{name}.conf");
    match a.str("persistent") {
        Some("present") => {
            r.changed |= ensure_file(ctx, &load, Some(format!("{name}\n"))).await?;
            let options = (!params.is_empty()).then(|| format!("options {name} {params}\n"));
            r.changed |= ensure_file(ctx, &opts, options).await?;
        }
        Some("absent") => {
            r.changed |= ensure_file(ctx, &load, None).await?;
            r.changed |= ensure_file(ctx, &opts, None).await?;
        }
        _ => {}
    }
    r.data.insert("name".into(), Value::from(name));
    r.data.insert("params".into(), Value::from(params));
    r.data.insert(
        "state".into(),
        Value::from(if present { "present" } else { "absent" }),
    );
    Ok(r)
}

/// `path` holding exactly `content`, or absent (`None`); whether it changed (would change).
async fn ensure_file(
    ctx: &ModuleCtx<'_>,
    path: &str,
    content: Option<String>,
) -> Result<bool, Fault> {
    let exists = hostfs::stat(ctx, path, true).await?.is_some();
    let same = match (&content, exists) {
        (Some(c), true) => hostfs::read(ctx, path).await? == c.as_bytes(),
        (None, false) => true,
        _ => false,
    };
    if same || ctx.check {
        return Ok(!same);
    }
    match content {
        Some(c) => {
            hostfs::write_atomic(ctx, path, c.as_bytes(), &Attrs::default(), false).await?;
        }
        None => {
            let out = sh(ctx, &format!("rm -f -- {}", sh_quote(path)), None).await?;
            if !out.success() {
                return Err(failed_cmd(&format!("removing {path}"), &out));
            }
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysctl_file_edits_keep_the_rest() {
        let text =
            "# comment\nvm.swappiness = 10\nnet.ipv4.ip_forward=0\nnet.ipv4.ip_forward = 0\n";
        assert_eq!(
            sysctl_value(text, "net.ipv4.ip_forward").as_deref(),
            Some("0")
        );
        assert_eq!(
            sysctl_edit(text, "net.ipv4.ip_forward", Some("1")),
            "# comment\nvm.swappiness = 10\nnet.ipv4.ip_forward=1\n"
        );
        assert_eq!(
            sysctl_edit(text, "net.ipv4.ip_forward", None),
            "# comment\nvm.swappiness = 10\n"
        );
        assert_eq!(sysctl_edit("", "a.b", Some("1 2")), "a.b=1 2\n");
        assert!(same_value("4096  87380 ", "4096 87380"));
        assert_eq!(
            proc_path("net/ipv4/conf/eth0.1/rp_filter"),
            "/proc/sys/net/ipv4/conf/eth0.1/rp_filter"
        );
        assert_eq!(
            proc_path("net.ipv4.ip_forward"),
            "/proc/sys/net/ipv4/ip_forward"
        );
    }
}
