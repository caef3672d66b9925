//! The host's files as the modules see them, one command each: run a command with `become`,
//! stat a path, hash or read a file, write one atomically (a temp file in the destination's
//! directory, its mode and owner set, then `mv` over), set mode and owner. POSIX sh and
//! coreutils only, so RHCOS and Debian hosts behave alike.

use serde_json::{Map, Value};

use super::{Fault, ModuleCtx};
use crate::hostprep::{sh_quote, with_become, Exec, Output};

/// Runs `command` on the host, with the task's `become` and timeout.
pub async fn sh(ctx: &ModuleCtx<'_>, command: &str, stdin: Option<&[u8]>) -> Result<Output, Fault> {
    let command = with_become(command, ctx.become_, ctx.user);
    let mut exec = Exec::new(&command).with_timeout(ctx.timeout);
    exec.stdin = stdin;
    Ok(ctx.remote.exec(exec).await?)
}

/// [`sh`] without stdin and with its own `timeout` (a command that waits by design).
pub async fn sh_with_timeout(
    ctx: &ModuleCtx<'_>,
    command: &str,
    timeout: std::time::Duration,
) -> Result<Output, Fault> {
    let command = with_become(command, ctx.become_, ctx.user);
    Ok(ctx
        .remote
        .exec(Exec::new(&command).with_timeout(timeout))
        .await?)
}

/// What kind of thing a path is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (not followed).
    Link,
    /// Anything else (device, socket, fifo).
    Other,
}

/// A path's `stat`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileInfo {
    /// Its kind.
    pub kind: FileKind,
    /// Permission bits (with setuid/setgid/sticky).
    pub mode: u32,
    /// Owner and group ids.
    pub uid: u32,
    pub gid: u32,
    /// Owner and group names (the id when it has no name).
    pub owner: String,
    pub group: String,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, seconds since the epoch.
    pub mtime: i64,
}

impl FileInfo {
    /// The fields Ansible's file modules return (`mode` as `"0644"`).
    pub fn data(&self, data: &mut Map<String, Value>) {
        data.insert("mode".into(), Value::from(format!("{:04o}", self.mode)));
        data.insert("uid".into(), Value::from(self.uid));
        data.insert("gid".into(), Value::from(self.gid));
        data.insert("owner".into(), Value::from(self.owner.clone()));
        data.insert("group".into(), Value::from(self.group.clone()));
        data.insert("size".into(), Value::from(self.size));
    }
}

const STAT_FORMAT: &str = "%F|%a|%u|%g|%U|%G|%s|%Y";

/// Stats `path` (following a final symlink when `follow`); `None` when it does not exist.
pub async fn stat(
    ctx: &ModuleCtx<'_>,
    path: &str,
    follow: bool,
) -> Result<Option<FileInfo>, Fault> {
    let p = sh_quote(path);
    let flag = if follow { "-L " } else { "" };
    let cmd = format!("if [ -e {p} ] || [ -L {p} ]; then stat {flag}-c '{STAT_FORMAT}' -- {p}; else echo absent; fi");
    let out = sh(ctx, &cmd, None).await?;
    let text = out.stdout_text();
    if !out.success() {
        return Err(failed_cmd(&format!("stat {path}"), &out));
    }
    if text == "absent" {
        return Ok(None);
    }
    parse_stat(&text)
        .map(Some)
        .ok_or_else(|| Fault::Failed(format!("cannot read `stat` of {path}: {text:?}")))
}

fn parse_stat(line: &str) -> Option<FileInfo> {
    let f: Vec<&str> = line.split('|').collect();
    if f.len() != 8 {
        return None;
    }
    let kind = match f[0] {
        "regular file" | "regular empty file" => FileKind::File,
        "directory" => FileKind::Dir,
        "symbolic link" => FileKind::Link,
        _ => FileKind::Other,
    };
    Some(FileInfo {
        kind,
        mode: u32::from_str_radix(f[1], 8).ok()?,
        uid: f[2].parse().ok()?,
        gid: f[3].parse().ok()?,
        owner: f[4].to_string(),
        group: f[5].to_string(),
        size: f[6].parse().ok()?,
        mtime: f[7].parse().ok()?,
    })
}

/// A command that could not do its part of a module's work: the task fails, naming what it was
/// doing and the command's stderr.
pub fn failed_cmd(doing: &str, out: &Output) -> Fault {
    Fault::Failed(format!(
        "{doing} failed (exit {:?}): {}",
        out.status,
        out.stderr_text()
    ))
}

/// The sha256 of a file on the host, lowercase hex.
pub async fn sha256(ctx: &ModuleCtx<'_>, path: &str) -> Result<String, Fault> {
    let out = sh(ctx, &format!("sha256sum -- {}", sh_quote(path)), None).await?;
    let text = out.stdout_text();
    match (out.success(), text.split_whitespace().next()) {
        (true, Some(sum)) => Ok(sum.trim_start_matches('\\').to_string()),
        _ => Err(failed_cmd(&format!("hashing {path}"), &out)),
    }
}

/// A file's bytes from the host.
pub async fn read(ctx: &ModuleCtx<'_>, path: &str) -> Result<Vec<u8>, Fault> {
    let out = sh(ctx, &format!("cat -- {}", sh_quote(path)), None).await?;
    if !out.success() || out.truncated {
        return Err(failed_cmd(&format!("reading {path}"), &out));
    }
    Ok(out.stdout)
}

/// Mode and ownership a module asks for (each optional).
#[derive(Clone, Debug, Default)]
pub struct Attrs {
    pub mode: Option<u32>,
    pub owner: Option<String>,
    pub group: Option<String>,
}

impl Attrs {
    /// Whether `info` differs from what is asked.
    pub fn differ(&self, info: &FileInfo) -> bool {
        let id_differs = |want: &Option<String>, name: &str, id: u32| {
            want.as_ref()
                .is_some_and(|w| w != name && *w != id.to_string())
        };
        self.mode.is_some_and(|m| m != info.mode)
            || id_differs(&self.owner, &info.owner, info.uid)
            || id_differs(&self.group, &info.group, info.gid)
    }

    /// `chmod`/`chown`/`chgrp` commands for `target` (a shell word), joined by `&&`; `flags`
    /// such as `-R` or `-h` go before the operands.
    pub fn commands(&self, target: &str, flags: &str) -> Vec<String> {
        let mut cmds = Vec::new();
        if let Some(m) = self.mode {
            cmds.push(format!("chmod {flags}{m:04o} -- {target}"));
        }
        if let Some(o) = &self.owner {
            cmds.push(format!("chown {flags}{} -- {target}", sh_quote(o)));
        }
        if let Some(g) = &self.group {
            cmds.push(format!("chgrp {flags}{} -- {target}", sh_quote(g)));
        }
        cmds
    }
}

/// Sets `attrs` on `path` when `info` differs from them; in check mode only says whether it
/// would. `flags` as in [`Attrs::commands`] (`-h` for a link itself).
pub async fn fix_attrs(
    ctx: &ModuleCtx<'_>,
    path: &str,
    info: &FileInfo,
    attrs: &Attrs,
    flags: &str,
) -> Result<bool, Fault> {
    if !attrs.differ(info) {
        return Ok(false);
    }
    if !ctx.check {
        let mut a = attrs.clone();
        if info.kind == FileKind::Link {
            a.mode = None;
        }
        let cmd = a.commands(&sh_quote(path), flags).join(" && ");
        let out = sh(ctx, &cmd, None).await?;
        if !out.success() {
            return Err(failed_cmd(&format!("setting mode/owner of {path}"), &out));
        }
    }
    Ok(true)
}

/// Writes `content` to `path` atomically: a temp file beside it takes the asked mode and owner,
/// or those of the file it replaces, or the umask's default for a new file; then `mv` over.
/// `backup`: the old file is kept as `PATH.EPOCH~` first; returns that name.
pub async fn write_atomic(
    ctx: &ModuleCtx<'_>,
    path: &str,
    content: &[u8],
    attrs: &Attrs,
    backup: bool,
) -> Result<Option<String>, Fault> {
    let p = sh_quote(path);
    let mut script = vec![
        "set -e".to_string(),
        format!("d=$(dirname -- {p}); b=$(basename -- {p})"),
        "t=$(mktemp -- \"$d/.$b.XXXXXX\")".to_string(),
        "trap 'rm -f -- \"$t\"' EXIT".to_string(),
        "cat > \"$t\"".to_string(),
        format!(
            "if [ -e {p} ]; then chmod --reference={p} \"$t\"; chown --reference={p} \"$t\"; \
                 else u=$(umask); chmod \"$(printf %o $((0666 & ~0$u)))\" \"$t\"; fi"
        ),
    ];
    script.extend(attrs.commands("\"$t\"", ""));
    if backup {
        script.push(format!(
            "if [ -e {p} ]; then k={p}.$(date +%s)~; cp -p -- {p} \"$k\"; echo \"$k\"; fi"
        ));
    }
    script.push(format!("mv -f -- \"$t\" {p}"));
    script.push("trap - EXIT".to_string());
    let out = sh(ctx, &script.join("\n"), Some(content)).await?;
    if !out.success() {
        return Err(failed_cmd(&format!("writing {path}"), &out));
    }
    let kept = out.stdout_text();
    Ok((backup && !kept.is_empty()).then_some(kept))
}

/// The largest file `--diff` shows (as Ansible's `max_file_size_for_diff`).
pub const DIFF_MAX: usize = 1 << 20;

/// A unified diff of two texts, or `None` when either is binary or larger than [`DIFF_MAX`].
pub fn text_diff(old: &[u8], new: &[u8], before: &str, after: &str) -> Option<String> {
    if old.len() > DIFF_MAX || new.len() > DIFF_MAX {
        return None;
    }
    let (old, new) = (
        std::str::from_utf8(old).ok()?,
        std::str::from_utf8(new).ok()?,
    );
    if old.contains('\0') || new.contains('\0') {
        return None;
    }
    let diff = similar::TextDiff::from_lines(old, new);
    Some(diff.unified_diff().header(before, after).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse() {
        let i = parse_stat("regular empty file|644|0|0|root|root|0|1700000000").unwrap();
        assert_eq!(
            (i.kind, i.mode, i.owner.as_str()),
            (FileKind::File, 0o644, "root")
        );
        assert_eq!(
            parse_stat("directory|1777|0|0|root|root|4096|1")
                .unwrap()
                .mode,
            0o1777
        );
        assert!(parse_stat("directory|x").is_none());
    }

    #[test]
    fn diffs_skip_binary_and_show_lines() {
        let d = text_diff(b"a\nb\n", b"a\nc\n", "/f", "/f").unwrap();
        assert!(
            d.contains("-b\n") && d.contains("+c\n") && d.starts_with("--- /f"),
            "{d}"
        );
        assert!(text_diff(b"\0", b"x", "/f", "/f").is_none());
    }
}
