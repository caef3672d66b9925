//! `copy`, `template`, `file` and `stat`: files on the host, compared before they are touched
//! (sha256, mode, owner), so a second run reports ok. `template` is `copy` with rendered
//! content: both go through [`put`].

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::args::{Arg, Args, Kind, Spec};
use super::hostfs::{self, failed_cmd, fix_attrs, sh, Attrs, FileInfo, FileKind};
use super::{Fault, ModuleCtx, ModuleError, ModuleResult};
use crate::hostprep::sh_quote;

const MODE: Arg = Arg::opt("mode", Kind::Mode);
const OWNER: Arg = Arg::opt("owner", Kind::Str);
const GROUP: Arg = Arg::opt("group", Kind::Str);

/// `copy`'s arguments.
pub const COPY: Spec = Spec {
    module: "copy",
    args: &[
        Arg::opt("src", Kind::Str),
        Arg::opt("content", Kind::Str),
        Arg::opt("dest", Kind::Str).req(),
        MODE,
        OWNER,
        GROUP,
        Arg::opt("force", Kind::Bool),
        Arg::opt("backup", Kind::Bool),
    ],
    one_required: &[&["src", "content"]],
    exclusive: &[&["src", "content"]],
};

/// `template`'s arguments.
pub const TEMPLATE: Spec = Spec {
    module: "template",
    args: &[
        Arg::opt("src", Kind::Str).req(),
        Arg::opt("dest", Kind::Str).req(),
        MODE,
        OWNER,
        GROUP,
        Arg::opt("force", Kind::Bool),
        Arg::opt("backup", Kind::Bool),
    ],
    one_required: &[],
    exclusive: &[],
};

/// `file`'s arguments.
pub const FILE: Spec = Spec {
    module: "file",
    args: &[
        Arg::opt("path", Kind::Str).req().alias(&["dest", "name"]),
        Arg::opt("state", Kind::Str).one_of(&["file", "directory", "absent", "touch", "link"]),
        Arg::opt("src", Kind::Str),
        MODE,
        OWNER,
        GROUP,
        Arg::opt("recurse", Kind::Bool),
        Arg::opt("force", Kind::Bool),
    ],
    one_required: &[],
    exclusive: &[],
};

/// `stat`'s arguments.
pub const STAT: Spec = Spec {
    module: "stat",
    args: &[
        Arg::opt("path", Kind::Str).req().alias(&["dest", "name"]),
        Arg::opt("get_checksum", Kind::Bool),
        Arg::opt("follow", Kind::Bool),
    ],
    one_required: &[],
    exclusive: &[],
};

fn attrs(a: &Args) -> Attrs {
    Attrs {
        mode: a.mode("mode"),
        owner: a.str("owner").map(Into::into),
        group: a.str("group").map(Into::into),
    }
}

/// A local file named by a task: absolute, or looked up in `DIR/SUB/` then `DIR/`.
fn local_file(ctx: &ModuleCtx<'_>, sub: &str, src: &str) -> Result<PathBuf, Fault> {
    let path = Path::new(src);
    let candidates = if path.is_absolute() {
        vec![path.to_path_buf()]
    } else {
        vec![
            ctx.playbook_dir.join(sub).join(path),
            ctx.playbook_dir.join(path),
        ]
    };
    if let Some(f) = candidates.iter().find(|p| p.is_file()) {
        return Ok(f.clone());
    }
    if let Some(d) = candidates.iter().find(|p| p.is_dir()) {
        let d = d.display();
        return Err(Fault::Failed(format!(
            "src `{d}` is a directory; copy one file at a time"
        )));
    }
    let tried: Vec<String> = candidates.iter().map(|p| p.display().to_string()).collect();
    Err(Fault::Failed(format!(
        "could not find src `{src}` (looked for {})",
        tried.join(", ")
    )))
}

/// `copy`: `content` or a local `src` file to `dest`.
pub async fn copy(a: &Args, ctx: &ModuleCtx<'_>) -> Result<ModuleResult, Fault> {
    let (content, src) = match (a.str("content"), a.str("src")) {
        (Some(c), _) => (c.as_bytes().to_vec(), None),
        (None, Some(src)) => {
            let path = local_file(ctx, "files", src)?;
            let bytes = fs_err::read(&path).map_err(Fault::failed)?;
            (bytes, Some(path))
        }
        (None, None) => return Err(Fault::Failed("one of `src`, `content` is required".into())),
    };
    put(ctx, a, &content, src.as_deref()).await
}

/// `template`: the local template rendered with the task's variables, then as `copy`.
pub async fn template(a: &Args, ctx: &ModuleCtx<'_>) -> Result<ModuleResult, Fault> {
    let path = local_file(ctx, "templates", a.str("src").unwrap_or_default())?;
    let text = fs_err::read_to_string(&path).map_err(Fault::failed)?;
    let rendered = (ctx.render)(&text).map_err(|source| ModuleError::Template {
        path: path.clone(),
        source,
    })?;
    put(ctx, a, rendered.as_bytes(), Some(&path)).await
}

/// Where `dest` resolves: `dest/basename(src)` when it is a directory or ends in `/`.
async fn resolve_dest(
    ctx: &ModuleCtx<'_>,
    dest: &str,
    src: Option<&Path>,
) -> Result<(String, Option<FileInfo>), Fault> {
    let info = hostfs::stat(ctx, dest, true).await?;
    let is_dir = dest.ends_with('/') || info.as_ref().is_some_and(|i| i.kind == FileKind::Dir);
    if !is_dir {
        return Ok((dest.to_string(), info));
    }
    let name = src.and_then(Path::file_name).ok_or_else(|| {
        Fault::Failed(format!(
            "dest `{dest}` is a directory; `content` needs a file name in dest"
        ))
    })?;
    if info.is_none() && !ctx.check {
        let out = sh(ctx, &format!("mkdir -p -- {}", sh_quote(dest)), None).await?;
        if !out.success() {
            return Err(failed_cmd(&format!("creating directory {dest}"), &out));
        }
    }
    let inner = format!("{}/{}", dest.trim_end_matches('/'), name.to_string_lossy());
    let info = hostfs::stat(ctx, &inner, true).await?;
    Ok((inner, info))
}

/// Puts `content` at the task's `dest` (copy and template): unchanged content keeps the file
/// (its mode and owner still set), changed content is written atomically.
async fn put(
    ctx: &ModuleCtx<'_>,
    a: &Args,
    content: &[u8],
    src: Option<&Path>,
) -> Result<ModuleResult, Fault> {
    let (dest, info) = resolve_dest(ctx, a.str("dest").unwrap_or_default(), src).await?;
    let want = attrs(a);
    let checksum = hex(&Sha256::digest(content));
    let mut r = ModuleResult::default();
    r.data.insert("dest".into(), Value::from(dest.clone()));
    r.data
        .insert("checksum".into(), Value::from(checksum.clone()));
    if let Some(src) = src {
        r.data
            .insert("src".into(), Value::from(src.display().to_string()));
    }
    let same = match &info {
        Some(i) if i.kind == FileKind::Dir => {
            return Err(Fault::Failed(format!("dest `{dest}` is a directory")))
        }
        Some(_) if !a.bool("force", true) => {
            r.msg = Some("file already exists".into());
            return Ok(r);
        }
        Some(_) => hostfs::sha256(ctx, &dest).await? == checksum,
        None => false,
    };
    if let (true, Some(i)) = (same, &info) {
        r.changed = fix_attrs(ctx, &dest, i, &want, "").await?;
        return Ok(r);
    }
    let small = info
        .as_ref()
        .is_none_or(|i| i.size as usize <= hostfs::DIFF_MAX);
    if ctx.diff && small {
        let old = match info {
            Some(_) => hostfs::read(ctx, &dest).await?,
            None => Vec::new(),
        };
        let after = src.map_or_else(|| dest.clone(), |p| p.display().to_string());
        r.diff = hostfs::text_diff(&old, content, &dest, &after);
    }
    r.changed = true;
    if !ctx.check {
        if let Some(kept) =
            hostfs::write_atomic(ctx, &dest, content, &want, a.bool("backup", false)).await?
        {
            r.data.insert("backup_file".into(), Value::from(kept));
        }
    }
    Ok(r)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `file`: a path's state (file, directory, absent, touch, link) and its mode and owner.
pub async fn file(a: &Args, ctx: &ModuleCtx<'_>) -> Result<ModuleResult, Fault> {
    let path = a.str("path").unwrap_or_default().to_string();
    let info = hostfs::stat(ctx, &path, false).await?;
    let state = match (a.str("state"), &info) {
        (Some(s), _) => s,
        (None, _) if a.bool("recurse", false) => "directory",
        (None, Some(i)) if i.kind == FileKind::Dir => "directory",
        (None, Some(i)) if i.kind == FileKind::Link => "link",
        (None, _) => "file",
    };
    let want = attrs(a);
    let changed = match state {
        "absent" => absent(ctx, &path, info.is_some()).await?,
        "directory" => {
            directory(ctx, &path, info.as_ref(), &want, a.bool("recurse", false)).await?
        }
        "touch" => touch(ctx, &path, info.as_ref(), &want).await?,
        "link" => link(ctx, &path, info.as_ref(), a, &want).await?,
        _ => match &info {
            None => {
                return Err(Fault::Failed(format!(
                    "file ({path}) is absent, cannot continue"
                )))
            }
            Some(i) if i.kind != FileKind::File => {
                let kind = match i.kind {
                    FileKind::Dir => "directory",
                    FileKind::Link => "link",
                    _ => "not a regular file",
                };
                return Err(Fault::Failed(format!(
                    "file ({path}) is {kind}, cannot continue"
                )));
            }
            Some(i) => fix_attrs(ctx, &path, i, &want, "").await?,
        },
    };
    let mut r = ModuleResult {
        changed,
        ..Default::default()
    };
    r.data.insert("path".into(), Value::from(path.clone()));
    r.data.insert("state".into(), Value::from(state));
    if !ctx.check && state != "absent" {
        if let Some(now) = hostfs::stat(ctx, &path, false).await? {
            now.data(&mut r.data);
        }
    }
    Ok(r)
}

/// Runs `cmd` unless in check mode; a failure fails the task with `doing`.
async fn act(ctx: &ModuleCtx<'_>, cmd: &str, doing: &str) -> Result<(), Fault> {
    if ctx.check {
        return Ok(());
    }
    let out = sh(ctx, cmd, None).await?;
    if out.success() {
        Ok(())
    } else {
        Err(failed_cmd(doing, &out))
    }
}

async fn absent(ctx: &ModuleCtx<'_>, path: &str, exists: bool) -> Result<bool, Fault> {
    if exists {
        act(
            ctx,
            &format!("rm -rf -- {}", sh_quote(path)),
            &format!("removing {path}"),
        )
        .await?;
    }
    Ok(exists)
}

async fn directory(
    ctx: &ModuleCtx<'_>,
    path: &str,
    info: Option<&FileInfo>,
    want: &Attrs,
    recurse: bool,
) -> Result<bool, Fault> {
    let p = sh_quote(path);
    let mut changed = match info {
        Some(i) if i.kind == FileKind::Dir => fix_attrs(ctx, path, i, want, "").await?,
        Some(_) => {
            return Err(Fault::Failed(format!(
                "{path} already exists as a file, not a directory"
            )))
        }
        None => {
            let mut cmd = format!("mkdir -p -- {p}");
            for c in want.commands(&p, "") {
                cmd = format!("{cmd} && {c}");
            }
            act(ctx, &cmd, &format!("creating directory {path}")).await?;
            true
        }
    };
    if recurse && (want.mode.is_some() || want.owner.is_some() || want.group.is_some()) {
        changed |= recurse_attrs(ctx, path, want).await?;
    }
    Ok(changed)
}

/// `recurse`: mode and owner on everything under `path`; changed when anything differed.
async fn recurse_attrs(ctx: &ModuleCtx<'_>, path: &str, want: &Attrs) -> Result<bool, Fault> {
    let p = sh_quote(path);
    let mut tests = Vec::new();
    if let Some(m) = want.mode {
        tests.push(format!("! -perm {m:04o}"));
    }
    if let Some(o) = &want.owner {
        tests.push(format!("! -user {}", sh_quote(o)));
    }
    if let Some(g) = &want.group {
        tests.push(format!("! -group {}", sh_quote(g)));
    }
    let probe = format!("find {p} \\( {} \\) -print | head -n 1", tests.join(" -o "));
    let out = sh(ctx, &probe, None).await?;
    if out.stdout.is_empty() {
        return Ok(false);
    }
    act(
        ctx,
        &want.commands(&p, "-R ").join(" && "),
        &format!("setting mode/owner under {path}"),
    )
    .await?;
    Ok(true)
}

async fn touch(
    ctx: &ModuleCtx<'_>,
    path: &str,
    info: Option<&FileInfo>,
    want: &Attrs,
) -> Result<bool, Fault> {
    let p = sh_quote(path);
    let mut cmd = format!("touch -- {p}");
    if info.is_none() {
        for c in want.commands(&p, "") {
            cmd = format!("{cmd} && {c}");
        }
    }
    act(ctx, &cmd, &format!("touching {path}")).await?;
    if let Some(i) = info {
        fix_attrs(ctx, path, i, want, "").await?;
    }
    Ok(true)
}

async fn link(
    ctx: &ModuleCtx<'_>,
    path: &str,
    info: Option<&FileInfo>,
    a: &Args,
    want: &Attrs,
) -> Result<bool, Fault> {
    let src = a
        .str("src")
        .ok_or_else(|| Fault::Failed("state=link needs `src`".into()))?;
    let (p, s) = (sh_quote(path), sh_quote(src));
    if let Some(i) = info {
        if i.kind == FileKind::Link {
            let out = sh(ctx, &format!("readlink -- {p}"), None).await?;
            if out.stdout_text() == src {
                return fix_attrs(
                    ctx,
                    path,
                    i,
                    &Attrs {
                        mode: None,
                        ..want.clone()
                    },
                    "-h ",
                )
                .await;
            }
        } else if !a.bool("force", false) || i.kind == FileKind::Dir {
            return Err(Fault::Failed(format!(
                "refusing to convert {path} from {:?} to a symlink",
                i.kind
            )));
        }
    }
    let mut cmd = format!("t={p}.tmp$$ && ln -s -- {s} \"$t\" && mv -fT -- \"$t\" {p}");
    for c in (Attrs {
        mode: None,
        ..want.clone()
    })
    .commands(&p, "-h ")
    {
        cmd = format!("{cmd} && {c}");
    }
    act(ctx, &cmd, &format!("linking {path} to {src}")).await?;
    Ok(true)
}

/// `stat`: never changes anything; `stat.exists` false when the path is absent.
pub async fn stat(a: &Args, ctx: &ModuleCtx<'_>) -> Result<ModuleResult, Fault> {
    let path = a.str("path").unwrap_or_default();
    let info = hostfs::stat(ctx, path, a.bool("follow", false)).await?;
    let mut s = Map::new();
    s.insert("exists".into(), Value::from(info.is_some()));
    if let Some(i) = &info {
        s.insert("path".into(), Value::from(path));
        s.insert("isdir".into(), Value::from(i.kind == FileKind::Dir));
        s.insert("isreg".into(), Value::from(i.kind == FileKind::File));
        s.insert("islnk".into(), Value::from(i.kind == FileKind::Link));
        i.data(&mut s);
        s.insert("pw_name".into(), Value::from(i.owner.clone()));
        s.insert("gr_name".into(), Value::from(i.group.clone()));
        s.insert("mtime".into(), Value::from(i.mtime));
        if i.kind == FileKind::File && a.bool("get_checksum", true) {
            s.insert(
                "checksum".into(),
                Value::from(hostfs::sha256(ctx, path).await?),
            );
            s.insert("checksum_algorithm".into(), Value::from("sha256"));
        }
    }
    let mut r = ModuleResult::default();
    r.data.insert("stat".into(), Value::Object(s));
    Ok(r)
}
