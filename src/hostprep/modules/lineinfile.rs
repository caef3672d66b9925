//! `lineinfile`: one line present or absent. The file is read from the host, edited here by
//! [`edit`] (Ansible's rules: with `regexp` the last matching line is replaced, else the line is
//! inserted per `insertafter`/`insertbefore`), and written back atomically when it changed.

use regex::Regex;
use serde_json::Value;

use super::args::{Arg, Args, Kind, Spec};
use super::hostfs::{self, fix_attrs, Attrs, FileKind};
use super::{ArgError, Fault, ModuleCtx, ModuleError, ModuleResult};

/// `lineinfile`'s arguments.
pub const SPEC: Spec = Spec {
    module: "lineinfile",
    args: &[
        Arg::opt("path", Kind::Str)
            .req()
            .alias(&["dest", "destfile", "name"]),
        Arg::opt("line", Kind::Str).alias(&["value"]),
        Arg::opt("regexp", Kind::Str).alias(&["regex"]),
        Arg::opt("state", Kind::Str).one_of(&["present", "absent"]),
        Arg::opt("insertafter", Kind::Str),
        Arg::opt("insertbefore", Kind::Str),
        Arg::opt("create", Kind::Bool),
        Arg::opt("backrefs", Kind::Bool),
        Arg::opt("backup", Kind::Bool),
        Arg::opt("mode", Kind::Mode),
        Arg::opt("owner", Kind::Str),
        Arg::opt("group", Kind::Str),
    ],
    one_required: &[],
    exclusive: &[&["insertafter", "insertbefore"]],
};

/// Where a new line goes.
#[derive(Debug)]
pub enum Anchor {
    /// After the last line matching (`insertafter`), at the end when none does.
    After(Regex),
    /// Before the last line matching (`insertbefore`), at the end when none does.
    Before(Regex),
    /// At the beginning (`insertbefore: BOF`).
    Bof,
    /// At the end (the default, `insertafter: EOF`).
    Eof,
}

/// One `lineinfile` edit, its arguments compiled.
#[derive(Debug)]
pub struct LineEdit {
    pub line: Option<String>,
    pub regexp: Option<Regex>,
    pub present: bool,
    pub anchor: Anchor,
    pub backrefs: bool,
}

fn compile(what: &str, re: &str) -> Result<Regex, Fault> {
    Regex::new(re).map_err(|source| {
        Fault::from(ModuleError::Args(ArgError::BadRegex {
            module: "lineinfile",
            key: what.to_string(),
            source,
        }))
    })
}

impl LineEdit {
    /// The edit `a` asks for.
    pub fn from_args(a: &Args) -> Result<LineEdit, Fault> {
        let present = a.str("state") != Some("absent");
        let regexp = a.str("regexp").map(|r| compile("regexp", r)).transpose()?;
        let line = a.str("line").map(str::to_string);
        let bad = |rule| {
            Err(Fault::from(ModuleError::Args(ArgError::Rule {
                module: "lineinfile",
                rule,
            })))
        };
        if present && line.is_none() {
            return bad("state=present needs `line`");
        }
        if !present && line.is_none() && regexp.is_none() {
            return bad("state=absent needs `line` or `regexp`");
        }
        if a.bool("backrefs", false) && regexp.is_none() {
            return bad("`backrefs` needs `regexp`");
        }
        let anchor = match (a.str("insertafter"), a.str("insertbefore")) {
            (_, Some("BOF")) => Anchor::Bof,
            (_, Some(re)) => Anchor::Before(compile("insertbefore", re)?),
            (Some("EOF") | None, None) => Anchor::Eof,
            (Some(re), None) => Anchor::After(compile("insertafter", re)?),
        };
        Ok(LineEdit {
            line,
            regexp,
            present,
            anchor,
            backrefs: a.bool("backrefs", false),
        })
    }
}

/// Applies `e` to `text`: the new text and Ansible's message, `None` when nothing changes.
pub fn edit(text: &str, e: &LineEdit) -> Option<(String, String)> {
    let mut lines: Vec<String> = text.split_inclusive('\n').map(str::to_string).collect();
    let bare = |l: &str| l.trim_end_matches(['\n', '\r']).to_string();
    if !e.present {
        let before = lines.len();
        lines.retain(|l| {
            let b = bare(l);
            let hit = match &e.regexp {
                Some(r) => r.is_match(&b),
                None => e.line.as_deref() == Some(b.as_str()),
            };
            !hit
        });
        let removed = before - lines.len();
        return (removed > 0).then(|| (lines.concat(), format!("{removed} line(s) removed")));
    }
    let line = e.line.as_deref().unwrap_or_default();
    if let Some(re) = &e.regexp {
        if let Some(i) = lines.iter().rposition(|l| re.is_match(&bare(l))) {
            let new = if e.backrefs {
                expand(re, &bare(&lines[i]), line)
            } else {
                line.to_string()
            };
            if bare(&lines[i]) == new {
                return None;
            }
            let ending = if lines[i].ends_with('\n') { "\n" } else { "" };
            lines[i] = format!("{new}{ending}");
            return Some((lines.concat(), "line replaced".into()));
        }
        if e.backrefs {
            return None;
        }
    }
    if lines.iter().any(|l| bare(l) == line) {
        return None;
    }
    let last = |re: &Regex| lines.iter().rposition(|l| re.is_match(&bare(l)));
    let at = match &e.anchor {
        Anchor::Bof => 0,
        Anchor::Eof => lines.len(),
        Anchor::After(re) => last(re).map_or(lines.len(), |i| i + 1),
        Anchor::Before(re) => last(re).unwrap_or(lines.len()),
    };
    if at == lines.len() {
        if let Some(l) = lines.last_mut().filter(|l| !l.ends_with('\n')) {
            l.push('\n');
        }
    }
    lines.insert(at, format!("{line}\n"));
    Some((lines.concat(), "line added".into()))
}

/// The line with `regexp`'s groups put in, `line` written with Python's `\1` and `\g<name>`.
fn expand(re: &Regex, subject: &str, line: &str) -> String {
    let template = python_template(line);
    match re.captures(subject) {
        Some(caps) => {
            let mut out = String::new();
            caps.expand(&template, &mut out);
            out
        }
        None => line.to_string(),
    }
}

fn python_template(line: &str) -> String {
    let (mut out, mut chars) = (String::new(), line.chars().peekable());
    while let Some(c) = chars.next() {
        match (c, chars.peek().copied()) {
            ('$', _) => out.push_str("$$"),
            ('\\', Some(d)) if d.is_ascii_digit() => {
                let mut n = String::new();
                while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
                    n.push(d);
                    chars.next();
                }
                out.push_str(&format!("${{{n}}}"));
            }
            ('\\', Some('g')) => {
                chars.next();
                let name: String = chars
                    .by_ref()
                    .skip_while(|c| *c == '<')
                    .take_while(|c| *c != '>')
                    .collect();
                out.push_str(&format!("${{{name}}}"));
            }
            (c, _) => out.push(c),
        }
    }
    out
}

/// `lineinfile` on the host.
pub async fn run(a: &Args, ctx: &ModuleCtx<'_>) -> Result<ModuleResult, Fault> {
    let path = a.str("path").unwrap_or_default().to_string();
    let e = LineEdit::from_args(a)?;
    let info = hostfs::stat(ctx, &path, true).await?;
    let old = match &info {
        Some(i) if i.kind == FileKind::Dir => {
            return Err(Fault::Failed(format!("path {path} is a directory !")))
        }
        Some(_) => hostfs::read(ctx, &path).await?,
        None if !e.present => return Ok(absent_file(&path)),
        None if !a.bool("create", false) => {
            return Err(Fault::Failed(format!(
                "Destination {path} does not exist !"
            )));
        }
        None => Vec::new(),
    };
    let text = String::from_utf8(old.clone())
        .map_err(|_| Fault::Failed(format!("{path} is not UTF-8 text")))?;
    let want = Attrs {
        mode: a.mode("mode"),
        owner: a.str("owner").map(Into::into),
        group: a.str("group").map(Into::into),
    };
    let mut r = ModuleResult::default();
    r.data.insert("path".into(), Value::from(path.clone()));
    let Some((new, msg)) = edit(&text, &e) else {
        if let Some(i) = &info {
            r.changed = fix_attrs(ctx, &path, i, &want, "").await?;
        }
        return Ok(r);
    };
    r.changed = true;
    r.msg = Some(msg);
    if ctx.diff {
        r.diff = hostfs::text_diff(&old, new.as_bytes(), &path, &path);
    }
    if !ctx.check {
        if let Some(kept) =
            hostfs::write_atomic(ctx, &path, new.as_bytes(), &want, a.bool("backup", false)).await?
        {
            r.data.insert("backup".into(), Value::from(kept));
        }
    }
    Ok(r)
}

fn absent_file(path: &str) -> ModuleResult {
    let mut r = ModuleResult {
        msg: Some("file not present".into()),
        ..Default::default()
    };
    r.data.insert("path".into(), Value::from(path));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn present(line: &str, regexp: Option<&str>, anchor: Anchor) -> LineEdit {
        LineEdit {
            line: Some(line.into()),
            regexp: regexp.map(|r| Regex::new(r).unwrap()),
            present: true,
            anchor,
            backrefs: false,
        }
    }

    #[test]
    fn regexp_replaces_the_last_matching_line() {
        let e = present("port=22", Some("^port="), Anchor::Eof);
        let (new, msg) = edit("port=1\nx\nport=2\n", &e).unwrap();
        assert_eq!(
            (new.as_str(), msg.as_str()),
            ("port=1\nx\nport=22\n", "line replaced")
        );
        assert!(edit(&new, &e).is_none(), "a second run changes nothing");
    }

    #[test]
    fn lines_are_inserted_per_anchor() {
        let after = present("new", None, Anchor::After(Regex::new("^a").unwrap()));
        assert_eq!(edit("a1\nb\na2\nc", &after).unwrap().0, "a1\nb\na2\nnew\nc");
        let before = present("new", None, Anchor::Before(Regex::new("^b").unwrap()));
        assert_eq!(edit("a\nb\n", &before).unwrap().0, "a\nnew\nb\n");
        assert_eq!(
            edit("a\nb", &present("new", None, Anchor::Eof)).unwrap().0,
            "a\nb\nnew\n"
        );
        assert_eq!(
            edit("a\n", &present("new", None, Anchor::Bof)).unwrap().0,
            "new\na\n"
        );
        let missing = present("new", None, Anchor::After(Regex::new("^zzz").unwrap()));
        assert_eq!(edit("a\n", &missing).unwrap().0, "a\nnew\n");
        assert!(edit("x\nnew\ny\n", &present("new", None, Anchor::Bof)).is_none());
        assert_eq!(
            edit("", &present("new", Some("^n"), Anchor::Eof))
                .unwrap()
                .0,
            "new\n"
        );
    }

    #[test]
    fn absent_removes_every_match_and_backrefs_expand() {
        let e = LineEdit {
            line: None,
            regexp: Some(Regex::new("^#").unwrap()),
            present: false,
            anchor: Anchor::Eof,
            backrefs: false,
        };
        assert_eq!(
            edit("#a\nb\n#c\n", &e).unwrap(),
            ("b\n".to_string(), "2 line(s) removed".to_string())
        );
        let b = LineEdit {
            backrefs: true,
            ..present(r"\1=off $x", Some("^(mode)=on"), Anchor::Eof)
        };
        assert_eq!(edit("mode=on\n", &b).unwrap().0, "mode=off $x\n");
        assert!(
            edit("other\n", &b).is_none(),
            "backrefs without a match leave the file"
        );
    }
}
