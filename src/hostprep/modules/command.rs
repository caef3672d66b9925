//! `command` and `shell`: one command on the host, always `changed` when it runs; `creates`
//! and `removes` decide whether it runs; check mode skips it unless they decide.
//! `command` runs its words without a shell (each one quoted), `shell` through `/bin/sh -c`.

use std::time::Instant;

use serde_json::{Map, Value};

use super::args::{Arg, Args, Kind, Spec};
use super::hostfs::sh;
use super::{Fault, ModuleCtx, ModuleResult};
use crate::hostprep::sh_quote;

const COMMON: [Arg; 9] = [
    Arg::opt("_raw_params", Kind::Str),
    Arg::opt("cmd", Kind::Str),
    Arg::opt("chdir", Kind::Str),
    Arg::opt("creates", Kind::Str),
    Arg::opt("removes", Kind::Str),
    Arg::opt("stdin", Kind::Str),
    Arg::opt("stdin_add_newline", Kind::Bool),
    Arg::opt("strip_empty_ends", Kind::Bool),
    Arg::opt("executable", Kind::Str),
];

/// `command`'s arguments.
pub const COMMAND: Spec = Spec {
    module: "command",
    args: &[
        COMMON[0],
        COMMON[1],
        COMMON[2],
        COMMON[3],
        COMMON[4],
        COMMON[5],
        COMMON[6],
        COMMON[7],
        Arg::opt("argv", Kind::List),
    ],
    one_required: &[&["_raw_params", "cmd", "argv"]],
    exclusive: &[&["_raw_params", "cmd", "argv"]],
};

/// `shell`'s arguments.
pub const SHELL: Spec = Spec {
    module: "shell",
    args: &COMMON,
    one_required: &[&["_raw_params", "cmd"]],
    exclusive: &[&["_raw_params", "cmd"]],
};

/// The options Ansible takes out of a free-form command (`cmd creates=/x chdir=/y`).
const FREE_FORM_OPTIONS: &[&str] = &["chdir", "creates", "removes", "executable", "stdin"];

/// Runs `command` (`shell`: through a shell).
pub async fn run(a: &Args, shell: bool, ctx: &ModuleCtx<'_>) -> Result<ModuleResult, Fault> {
    let mut opts = Map::new();
    let line = match a.str("_raw_params") {
        Some(raw) => Some(free_form(raw, &mut opts)?),
        None => a.str("cmd").map(str::to_string),
    };
    let opt = |name: &str| {
        a.str(name)
            .map(str::to_string)
            .or_else(|| opts.get(name).and_then(Value::as_str).map(str::to_string))
    };
    let (script, cmd_value) = command_line(a, shell, line, opt("executable"))?;
    if let Some(done) = guard(ctx, opt("creates"), opt("removes")).await? {
        return Ok(done);
    }
    if ctx.check {
        let decided = opt("creates").is_some() || opt("removes").is_some();
        let msg = Some("Command would have run if not in check mode".to_string());
        return Ok(ModuleResult {
            changed: decided,
            skipped: !decided,
            msg,
            ..Default::default()
        });
    }
    let script = match opt("chdir") {
        Some(dir) => format!("cd -- {} && {script}", sh_quote(&dir)),
        None => script,
    };
    let stdin = opt("stdin").map(|s| {
        if a.bool("stdin_add_newline", true) {
            s + "\n"
        } else {
            s
        }
    });
    execute(
        ctx,
        &script,
        stdin,
        cmd_value,
        a.bool("strip_empty_ends", true),
    )
    .await
}

/// The script that runs the command, and the result's `cmd` (the line for `shell`, the words
/// for `command`).
fn command_line(
    a: &Args,
    shell: bool,
    line: Option<String>,
    executable: Option<String>,
) -> Result<(String, Value), Fault> {
    if shell {
        let line = line.unwrap_or_default();
        let exe = executable.unwrap_or_else(|| "/bin/sh".into());
        let script = format!("exec {} -c {}", sh_quote(&exe), sh_quote(&line));
        return Ok((script, Value::from(line)));
    }
    let argv = match (a.list("argv"), line) {
        (Some(argv), _) => argv,
        (None, line) => split_words(&line.unwrap_or_default()).map_err(Fault::failed)?,
    };
    let Some(program) = argv.first() else {
        return Err(Fault::Failed("no command given".into()));
    };
    // Quoted in full, so that a first word such as `A=1` is a program name, not an assignment.
    let mut words = vec![format!("'{}'", program.replace('\'', r"'\''"))];
    words.extend(argv[1..].iter().map(|w| sh_quote(w)));
    Ok((format!("exec {}", words.join(" ")), Value::from(argv)))
}

/// `creates`/`removes`: `Some(result)` when they say the command does not run.
async fn guard(
    ctx: &ModuleCtx<'_>,
    creates: Option<String>,
    removes: Option<String>,
) -> Result<Option<ModuleResult>, Fault> {
    let verb = if ctx.check { "Would not" } else { "Did not" };
    for (pattern, wants_present) in [(creates, true), (removes, false)] {
        let Some(pattern) = pattern else { continue };
        let probe = format!(
            "set -- {}; [ -e \"$1\" ] || [ -L \"$1\" ]",
            glob_quote(&pattern)
        );
        let present = sh(ctx, &probe, None).await?.success();
        if present == wants_present {
            let (what, stdout) = if wants_present {
                (
                    format!("since '{pattern}' exists"),
                    format!("skipped, since {pattern} exists"),
                )
            } else {
                (
                    format!("since '{pattern}' does not exist"),
                    format!("skipped, since {pattern} does not exist"),
                )
            };
            let mut data = Map::new();
            data.insert("rc".into(), Value::from(0));
            data.insert("stdout".into(), Value::from(stdout.clone()));
            data.insert("stdout_lines".into(), Value::from(vec![stdout]));
            let msg = Some(format!("{verb} run command {what}"));
            return Ok(Some(ModuleResult {
                msg,
                data,
                ..Default::default()
            }));
        }
    }
    Ok(None)
}

async fn execute(
    ctx: &ModuleCtx<'_>,
    script: &str,
    stdin: Option<String>,
    cmd: Value,
    strip: bool,
) -> Result<ModuleResult, Fault> {
    let start = (Instant::now(), now_text());
    let out = sh(ctx, script, stdin.as_deref().map(str::as_bytes)).await?;
    let delta = start.0.elapsed();
    let rc = out.status.unwrap_or(-1);
    let text = |b: &[u8]| {
        let s = String::from_utf8_lossy(b).into_owned();
        if strip {
            s.trim_end_matches(['\n', '\r']).to_string()
        } else {
            s
        }
    };
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    let mut data = Map::new();
    data.insert("cmd".into(), cmd);
    data.insert("rc".into(), Value::from(rc));
    data.insert(
        "stdout_lines".into(),
        Value::from(stdout.lines().collect::<Vec<_>>()),
    );
    data.insert(
        "stderr_lines".into(),
        Value::from(stderr.lines().collect::<Vec<_>>()),
    );
    data.insert("stdout".into(), Value::from(stdout));
    data.insert("stderr".into(), Value::from(stderr));
    data.insert("start".into(), Value::from(start.1));
    data.insert("end".into(), Value::from(now_text()));
    data.insert(
        "delta".into(),
        Value::from(format!("{:.6}", delta.as_secs_f64())),
    );
    let failed = rc != 0;
    let msg = failed.then(|| "non-zero return code".to_string());
    Ok(ModuleResult {
        changed: true,
        failed,
        msg,
        data,
        ..Default::default()
    })
}

/// Seconds since the epoch, with microseconds (the controller's clock, not the host's).
fn now_text() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!("{}.{:06}", t.as_secs(), t.subsec_micros())
}

/// A free-form command with Ansible's `key=value` options (`chdir`, `creates`, ...) taken out
/// into `opts`; the rest as written (when no option was in it) or its words rejoined.
fn free_form(raw: &str, opts: &mut Map<String, Value>) -> Result<String, Fault> {
    let tokens = raw_tokens(raw);
    let mut rest = Vec::new();
    for token in &tokens {
        match token.split_once('=') {
            Some((key, value)) if FREE_FORM_OPTIONS.contains(&key) => {
                let value = split_words(value).map_err(Fault::failed)?.join(" ");
                opts.insert(key.to_string(), Value::from(value));
            }
            _ => rest.push(token.as_str()),
        }
    }
    Ok(if opts.is_empty() {
        raw.trim().to_string()
    } else {
        rest.join(" ")
    })
}

/// Splits on unquoted whitespace, keeping each token as written (quotes included).
fn raw_tokens(s: &str) -> Vec<String> {
    let (mut tokens, mut cur, mut quote, mut escaped) = (Vec::new(), String::new(), None, false);
    for c in s.chars() {
        if escaped {
            escaped = false;
        } else if c == '\\' && quote != Some('\'') {
            escaped = true;
        } else if quote == Some(c) {
            quote = None;
        } else if quote.is_none() && (c == '\'' || c == '"') {
            quote = Some(c);
        } else if quote.is_none() && c.is_whitespace() {
            if !cur.is_empty() {
                tokens.push(std::mem::take(&mut cur));
            }
            continue;
        }
        cur.push(c);
    }
    if !cur.is_empty() {
        tokens.push(cur);
    }
    tokens
}

/// A command line with a quote that is never closed: the task fails with it, as Ansible's does.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unclosed {quote} in command: {line}")]
pub struct UnclosedQuote {
    /// `'` or `"`.
    pub quote: char,
    /// The line as given.
    pub line: String,
}

/// Splits a command line into words as a POSIX shell would (quotes and backslashes), without
/// expanding anything (Python's `shlex.split`, which Ansible's `command` uses).
pub fn split_words(s: &str) -> Result<Vec<String>, UnclosedQuote> {
    let unclosed = |quote| UnclosedQuote {
        quote,
        line: s.to_string(),
    };
    let (mut words, mut cur, mut in_word) = (Vec::new(), String::new(), false);
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(x) => cur.push(x),
                        None => return Err(unclosed('\'')),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(x) if "\\\"$`".contains(x) => cur.push(x),
                            Some(x) => cur.extend(['\\', x]),
                            None => return Err(unclosed('"')),
                        },
                        Some(x) => cur.push(x),
                        None => return Err(unclosed('"')),
                    }
                }
            }
            '\\' => {
                in_word = true;
                cur.extend(chars.next());
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

/// Quotes `pattern` for the shell, leaving its glob characters (`*?[]`) active.
fn glob_quote(pattern: &str) -> String {
    pattern
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "*?[]/._-+,:@%".contains(c) {
                c.to_string()
            } else if c == '\'' {
                "\\'".to_string()
            } else {
                format!("'{c}'")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_like_shlex() {
        assert_eq!(
            split_words(r#"echo 'a b' "c \"d\"" e\ f"#).unwrap(),
            ["echo", "a b", "c \"d\"", "e f"]
        );
        assert_eq!(split_words("  ''  x ").unwrap(), ["", "x"]);
        assert_eq!(
            split_words("echo 'oops").unwrap_err().to_string(),
            "unclosed ' in command: echo 'oops"
        );
    }

    #[test]
    fn free_form_options_come_out() {
        let mut opts = Map::new();
        let line = free_form("touch /tmp/x creates=/tmp/x chdir='/a b'", &mut opts).unwrap();
        assert_eq!(line, "touch /tmp/x");
        assert_eq!(opts["creates"], "/tmp/x");
        assert_eq!(opts["chdir"], "/a b");
        let mut none = Map::new();
        assert_eq!(
            free_form("echo  'x=1'  | cat", &mut none).unwrap(),
            "echo  'x=1'  | cat"
        );
    }

    #[test]
    fn globs_stay_active_and_the_rest_is_quoted() {
        assert_eq!(glob_quote("/tmp/a*.conf"), "/tmp/a*.conf");
        assert_eq!(glob_quote("/x y;z"), "/x' 'y';'z");
    }
}
