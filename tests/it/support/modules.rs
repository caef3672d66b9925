//! The host modules' scenarios, generic over the host: every module run twice (changed, then
//! ok), in check mode (nothing on the host changes, `changed` reported) and, for copy, template
//! and lineinfile, with `--diff`. `tests/it/modules.rs` runs them over [`hostprep::Local`] and
//! [`StubPath`]; the lab runs the same functions over a real sshd host.
//!
//! `dir` is a directory on the host the scenario may fill; everything on the host is read back
//! through the same [`Remote`], so the assertions hold wherever the host is.

use std::path::Path;
use std::time::Duration;

use bootstrap::hostprep::modules::{self, ModuleCtx, ModuleResult};
use bootstrap::hostprep::playbook::expr::ExprError;
use bootstrap::hostprep::{sh_quote, BoxFuture, Exec, Local, Output, Remote, RemoteError};
use serde_json::{json, Map, Value};

/// A host ([`Local`] unless said) whose commands find `bin` first on `PATH`: stand-ins for `systemctl` and
/// `modprobe` on a machine without systemd.
pub struct StubPath<R: Remote = Local> {
    pub local: R,
    pub bin: std::path::PathBuf,
}

impl<R: Remote> Remote for StubPath<R> {
    fn name(&self) -> &str {
        self.local.name()
    }

    fn exec<'a>(&'a self, exec: Exec<'a>) -> BoxFuture<'a, Result<Output, RemoteError>> {
        Box::pin(async move {
            let command = format!(
                "PATH={}:\"$PATH\"; {}",
                sh_quote(&self.bin.to_string_lossy()),
                exec.command
            );
            self.local
                .exec(Exec {
                    command: &command,
                    ..exec
                })
                .await
        })
    }
}

/// A stand-in `systemctl` keeping its units in `state` (`UNIT.unit` marks a unit as known,
/// `UNIT.active` and `UNIT.enabled` its state) and logging each action to `state/log`.
pub fn systemctl_standin(state: &Path) -> String {
    format!(
        r#"#!/bin/sh
S={state}
verb=$1; shift; [ "$1" = "--property=LoadState" ] && shift 2; [ "$1" = "--" ] && shift
u=$1
[ "$verb" = daemon-reload ] && {{ echo daemon-reload >> "$S/log"; exit 0; }}
[ -e "$S/$u.unit" ] || {{ [ "$verb" = show ] && {{ echo not-found; exit 0; }}; echo "Unit $u not found." >&2; exit 4; }}
case $verb in
  show) echo loaded ;;
  is-active) if [ -e "$S/$u.active" ]; then echo active; else echo inactive; exit 3; fi ;;
  is-enabled) if [ -e "$S/$u.enabled" ]; then echo enabled; else echo disabled; exit 1; fi ;;
  start|restart|reload) touch "$S/$u.active"; echo "$verb $u" >> "$S/log" ;;
  stop) rm -f "$S/$u.active"; echo "$verb $u" >> "$S/log" ;;
  enable) touch "$S/$u.enabled"; echo "$verb $u" >> "$S/log" ;;
  disable) rm -f "$S/$u.enabled"; echo "$verb $u" >> "$S/log" ;;
  *) echo "unknown verb $verb" >&2; exit 1 ;;
esac
"#,
        state = sh_quote(&state.to_string_lossy())
    )
}

/// A stand-in `modprobe` that loads nothing and logs its arguments to `log`.
pub fn modprobe_standin(log: &Path) -> String {
    format!(
        "#!/bin/sh\necho \"$*\" >> {}\n",
        sh_quote(&log.to_string_lossy())
    )
}

/// One module call on a host, with its options.
#[derive(Clone, Copy)]
pub struct Call<'a> {
    pub remote: &'a dyn Remote,
    pub user: &'a str,
    pub playbook_dir: &'a Path,
    pub check: bool,
    pub diff: bool,
}

impl Call<'_> {
    /// Runs `module` with `args` (a JSON object); panics when it cannot run at all.
    pub async fn run(&self, module: &str, args: Value) -> ModuleResult {
        let args: Map<String, Value> = args.as_object().expect("args are an object").clone();
        modules::check_args(module, &args).unwrap_or_else(|e| panic!("{module}: {e}"));
        let render = |text: &str| -> Result<String, ExprError> {
            Ok(minijinja::Environment::new()
                .render_str(text, minijinja::context! {port => 8080, name => "lab"})?)
        };
        let ctx = ModuleCtx {
            remote: self.remote,
            user: self.user,
            become_: false,
            check: self.check,
            diff: self.diff,
            playbook_dir: self.playbook_dir,
            render: &render,
            timeout: Duration::from_secs(60),
        };
        modules::run(module, &args, &ctx)
            .await
            .unwrap_or_else(|e| panic!("{module} {args:?}: {e}"))
    }

    /// The same call in check mode, with `--diff`.
    pub fn checking(&self) -> Call<'_> {
        Call {
            check: true,
            diff: true,
            ..*self
        }
    }

    /// The same call with `--diff`.
    pub fn diffing(&self) -> Call<'_> {
        Call {
            diff: true,
            ..*self
        }
    }
}

/// Runs `command` on the host and returns its stdout; panics when it fails.
pub async fn host(remote: &dyn Remote, command: &str) -> String {
    let out = remote
        .exec(Exec::new(command))
        .await
        .expect("host command runs");
    assert!(out.success(), "{command}: {}", out.stderr_text());
    out.stdout_text()
}

/// The mode and bytes of a file on the host (a directory: no bytes; `None` when absent).
async fn snapshot(remote: &dyn Remote, path: &str) -> Option<(String, String)> {
    let p = sh_quote(path);
    let out = host(remote, &format!("if [ -e {p} ]; then stat -c %a {p}; if [ -f {p} ]; then cat {p}; fi; else echo absent; fi")).await;
    (out != "absent").then(|| {
        out.split_once('\n')
            .map_or((out.clone(), String::new()), |(m, c)| (m.into(), c.into()))
    })
}

fn at(dir: &Path, name: &str) -> String {
    dir.join(name).to_string_lossy().into_owned()
}

fn ok(r: &ModuleResult, what: &str) {
    assert!(!r.failed, "{what} failed: {:?}", r.msg);
}

fn changed(r: &ModuleResult, what: &str) {
    ok(r, what);
    assert!(r.changed, "{what}: expected changed, got {r:?}");
}

fn unchanged(r: &ModuleResult, what: &str) {
    ok(r, what);
    assert!(!r.changed, "{what}: expected ok (unchanged), got {r:?}");
}

fn diff_has(r: &ModuleResult, lines: &[&str]) {
    let diff = r
        .diff
        .as_deref()
        .unwrap_or_else(|| panic!("no diff in {r:?}"));
    for line in lines {
        assert!(
            diff.lines().any(|l| l == *line),
            "diff lacks {line:?}:\n{diff}"
        );
    }
}

/// `command`: creates/removes decide, check mode skips; then [`command_words_and_io`].
pub async fn exercise_command(remote: &dyn Remote, user: &str, dir: &Path) {
    let c = Call {
        remote,
        user,
        playbook_dir: dir,
        check: false,
        diff: false,
    };
    let made = at(dir, "cmd-made");
    let args = json!({"_raw_params": format!("touch {made}"), "creates": made});
    assert!(
        c.checking().run("command", args.clone()).await.changed,
        "check mode: would run"
    );
    assert!(
        snapshot(remote, &made).await.is_none(),
        "check mode ran the command"
    );
    let unguarded = c
        .checking()
        .run("command", json!({"_raw_params": format!("touch {made}")}))
        .await;
    assert!(unguarded.skipped && !unguarded.changed && snapshot(remote, &made).await.is_none());
    changed(
        &c.run("command", args.clone()).await,
        "command creates (first)",
    );
    let second = c.run("command", args).await;
    unchanged(&second, "command creates (second)");
    assert_eq!(
        second.data["stdout"],
        format!("skipped, since {made} exists")
    );
    let free = c
        .run(
            "command",
            json!({"_raw_params": format!("rm {made} removes={made}")}),
        )
        .await;
    changed(&free, "free-form removes=");
    unchanged(
        &c.run(
            "command",
            json!({"_raw_params": format!("rm {made} removes={made}")}),
        )
        .await,
        "removes (second)",
    );
    command_words_and_io(c, dir).await;
}

/// `command`'s words reach the program as they are (no shell), stdin and chdir, a failing
/// command fails.
async fn command_words_and_io(c: Call<'_>, dir: &Path) {
    let argv = c
        .run(
            "command",
            json!({"argv": ["printf", "%s|", "a b", ";x", "$HOME"]}),
        )
        .await;
    assert_eq!(argv.data["stdout"], "a b|;x|$HOME|");
    let piped = c
        .run(
            "command",
            json!({"cmd": "cat", "stdin": "hello", "chdir": dir.to_string_lossy()}),
        )
        .await;
    assert_eq!(
        (piped.data["stdout"].as_str(), piped.data["rc"].as_i64()),
        (Some("hello"), Some(0))
    );
    let pwd = c
        .run(
            "command",
            json!({"cmd": "pwd", "chdir": dir.to_string_lossy()}),
        )
        .await;
    assert_eq!(pwd.data["stdout_lines"], json!([dir.to_string_lossy()]));
    let bad = c
        .run(
            "command",
            json!({"_raw_params": "ls /bootstrap-no-such-path"}),
        )
        .await;
    assert!(
        bad.failed && bad.data["rc"] != 0 && !bad.data["stderr"].as_str().unwrap().is_empty(),
        "{bad:?}"
    );
}

/// `shell`: pipes and redirections work; creates makes it idempotent; check mode skips.
pub async fn exercise_shell(remote: &dyn Remote, user: &str, dir: &Path) {
    let c = Call {
        remote,
        user,
        playbook_dir: dir,
        check: false,
        diff: false,
    };
    let out = at(dir, "shell-out");
    let args = json!({"cmd": format!("echo one two | wc -w > {out}"), "creates": out});
    assert!(c.checking().run("shell", args.clone()).await.changed);
    assert!(
        snapshot(remote, &out).await.is_none(),
        "check mode ran the shell"
    );
    changed(&c.run("shell", args.clone()).await, "shell (first)");
    assert_eq!(snapshot(remote, &out).await.unwrap().1.trim(), "2");
    unchanged(&c.run("shell", args).await, "shell (second)");
    let r = c
        .run(
            "shell",
            json!({"_raw_params": "echo $((1+2)); echo err >&2; exit 4"}),
        )
        .await;
    assert!(
        r.failed && r.data["stdout"] == "3" && r.data["stderr"] == "err" && r.data["rc"] == 4,
        "{r:?}"
    );
}

/// `copy`: content and a local src (from `files/`), into a directory, mode, check mode,
/// `--diff`, `force: false`.
pub async fn exercise_copy(remote: &dyn Remote, user: &str, dir: &Path) {
    let local = tempfile::tempdir().expect("temp dir");
    fs_err::create_dir_all(local.path().join("files")).unwrap();
    fs_err::write(local.path().join("files/motd"), "welcome\n").unwrap();
    let c = Call {
        remote,
        user,
        playbook_dir: local.path(),
        check: false,
        diff: false,
    };
    let dest = at(dir, "copy.txt");
    let args = json!({"content": "old\nsame\n", "dest": dest, "mode": "0640"});
    let would = c.checking().run("copy", args.clone()).await;
    assert!(
        would.changed && snapshot(remote, &dest).await.is_none(),
        "check mode wrote {dest}"
    );
    diff_has(&would, &["+old", "+same"]);
    changed(&c.run("copy", args.clone()).await, "copy (first)");
    assert_eq!(
        snapshot(remote, &dest).await.unwrap(),
        ("640".into(), "old\nsame".into())
    );
    unchanged(&c.run("copy", args).await, "copy (second)");
    let new = json!({"content": "new\nsame\n", "dest": dest, "mode": "0640"});
    let would = c.checking().run("copy", new.clone()).await;
    assert!(would.changed);
    diff_has(&would, &["-old", "+new", " same"]);
    assert_eq!(
        snapshot(remote, &dest).await.unwrap().1,
        "old\nsame",
        "check mode changed {dest}"
    );
    unchanged(
        &c.run(
            "copy",
            json!({"content": "x", "dest": dest, "force": false}),
        )
        .await,
        "force: false",
    );
    let done = c.diffing().run("copy", new.clone()).await;
    changed(&done, "copy new content");
    diff_has(&done, &["-old", "+new"]);
    changed(
        &c.run(
            "copy",
            json!({"content": "new\nsame\n", "dest": dest, "mode": "0600"}),
        )
        .await,
        "mode only",
    );
    assert_eq!(snapshot(remote, &dest).await.unwrap().0, "600");
    let into = format!("{}/", at(dir, "copied"));
    changed(
        &c.run("copy", json!({"src": "motd", "dest": into})).await,
        "src into dir/",
    );
    assert_eq!(
        snapshot(remote, &at(dir, "copied/motd")).await.unwrap().1,
        "welcome"
    );
    unchanged(
        &c.run("copy", json!({"src": "motd", "dest": into})).await,
        "src into dir/ (second)",
    );
}

/// `template`: rendered from `templates/`, then as copy (idempotent, check mode, `--diff`).
pub async fn exercise_template(remote: &dyn Remote, user: &str, dir: &Path) {
    let local = tempfile::tempdir().expect("temp dir");
    fs_err::create_dir_all(local.path().join("templates")).unwrap();
    fs_err::write(
        local.path().join("templates/app.conf.j2"),
        "name={{ name }}\nport={{ port }}\n",
    )
    .unwrap();
    let c = Call {
        remote,
        user,
        playbook_dir: local.path(),
        check: false,
        diff: false,
    };
    let dest = at(dir, "app.conf");
    let args = json!({"src": "app.conf.j2", "dest": dest, "mode": "0644"});
    assert!(c.checking().run("template", args.clone()).await.changed);
    assert!(
        snapshot(remote, &dest).await.is_none(),
        "check mode wrote {dest}"
    );
    host(
        remote,
        &format!("printf 'name=lab\\nport=80\\n' > {}", sh_quote(&dest)),
    )
    .await;
    let would = c.checking().run("template", args.clone()).await;
    diff_has(&would, &["-port=80", "+port=8080", " name=lab"]);
    assert_eq!(
        snapshot(remote, &dest).await.unwrap().1,
        "name=lab\nport=80"
    );
    let done = c.diffing().run("template", args.clone()).await;
    changed(&done, "template (first)");
    diff_has(&done, &["-port=80", "+port=8080"]);
    assert_eq!(
        snapshot(remote, &dest).await.unwrap(),
        ("644".into(), "name=lab\nport=8080".into())
    );
    unchanged(&c.run("template", args).await, "template (second)");
}

/// `file`: directory, touch, link, absent; mode; check mode; a missing file with state=file fails.
pub async fn exercise_file(remote: &dyn Remote, user: &str, dir: &Path) {
    let c = Call {
        remote,
        user,
        playbook_dir: dir,
        check: false,
        diff: false,
    };
    let d = at(dir, "made/deeper");
    let args = json!({"path": d, "state": "directory", "mode": "0750"});
    assert!(c.checking().run("file", args.clone()).await.changed);
    assert!(snapshot(remote, &d).await.is_none(), "check mode made {d}");
    changed(&c.run("file", args.clone()).await, "directory (first)");
    unchanged(&c.run("file", args).await, "directory (second)");
    assert!(
        c.checking()
            .run("file", json!({"path": d, "mode": "0700"}))
            .await
            .changed
    );
    assert_eq!(
        snapshot(remote, &d).await.unwrap().0,
        "750",
        "check mode changed the mode"
    );
    changed(
        &c.run("file", json!({"path": d, "mode": "0700"})).await,
        "mode",
    );
    assert_eq!(snapshot(remote, &d).await.unwrap().0, "700");
    let t = at(dir, "touched");
    changed(
        &c.run("file", json!({"path": t, "state": "touch", "mode": "0604"}))
            .await,
        "touch",
    );
    assert_eq!(snapshot(remote, &t).await.unwrap().0, "604");
    changed(
        &c.run("file", json!({"path": t, "state": "touch"})).await,
        "touch always changes",
    );
    let l = at(dir, "link");
    let link = json!({"path": l, "state": "link", "src": d});
    assert!(c.checking().run("file", link.clone()).await.changed);
    changed(&c.run("file", link.clone()).await, "link (first)");
    assert_eq!(host(remote, &format!("readlink {}", sh_quote(&l))).await, d);
    unchanged(&c.run("file", link).await, "link (second)");
    let gone = json!({"path": t, "state": "absent"});
    assert!(c.checking().run("file", gone.clone()).await.changed);
    assert!(
        snapshot(remote, &t).await.is_some(),
        "check mode removed {t}"
    );
    changed(&c.run("file", gone.clone()).await, "absent (first)");
    unchanged(&c.run("file", gone).await, "absent (second)");
    let missing = c.run("file", json!({"path": t, "state": "file"})).await;
    assert!(
        missing.failed && missing.msg.as_deref().unwrap().contains("is absent"),
        "{missing:?}"
    );
    let a_dir = c.run("file", json!({"path": d, "state": "file"})).await;
    assert_eq!(
        a_dir.msg,
        Some(format!("file ({d}) is directory, cannot continue"))
    );
}

/// `lineinfile`: the last regexp match replaced, lines inserted and removed, check mode and
/// `--diff`, a missing file without `create` fails.
pub async fn exercise_lineinfile(remote: &dyn Remote, user: &str, dir: &Path) {
    let c = Call {
        remote,
        user,
        playbook_dir: dir,
        check: false,
        diff: false,
    };
    let f = at(dir, "sshd_config");
    host(
        remote,
        &format!(
            "printf '#Port 1\\nPort 1\\nUsePAM yes\\n' > {}",
            sh_quote(&f)
        ),
    )
    .await;
    let args = json!({"path": f, "regexp": "^#?Port ", "line": "Port 22"});
    let would = c.checking().run("lineinfile", args.clone()).await;
    assert!(would.changed);
    diff_has(&would, &["-Port 1", "+Port 22"]);
    assert_eq!(
        snapshot(remote, &f).await.unwrap().1,
        "#Port 1\nPort 1\nUsePAM yes",
        "check mode wrote"
    );
    let done = c.diffing().run("lineinfile", args.clone()).await;
    changed(&done, "lineinfile (first)");
    assert_eq!(done.msg.as_deref(), Some("line replaced"));
    diff_has(&done, &["-Port 1", "+Port 22"]);
    unchanged(&c.run("lineinfile", args).await, "lineinfile (second)");
    let add = json!({"path": f, "line": "MaxAuthTries 3", "insertafter": "^#Port"});
    changed(&c.run("lineinfile", add.clone()).await, "insert");
    unchanged(&c.run("lineinfile", add).await, "insert (second)");
    let drop = json!({"path": f, "regexp": "^UsePAM", "state": "absent"});
    changed(&c.run("lineinfile", drop.clone()).await, "absent");
    unchanged(&c.run("lineinfile", drop).await, "absent (second)");
    assert_eq!(
        snapshot(remote, &f).await.unwrap().1,
        "#Port 1\nMaxAuthTries 3\nPort 22"
    );
    let n = at(dir, "new.conf");
    let missing = c.run("lineinfile", json!({"path": n, "line": "a=1"})).await;
    assert!(
        missing.failed && snapshot(remote, &n).await.is_none(),
        "{missing:?}"
    );
    changed(
        &c.run(
            "lineinfile",
            json!({"path": n, "line": "a=1", "create": true, "mode": "0600"}),
        )
        .await,
        "create",
    );
    assert_eq!(
        snapshot(remote, &n).await.unwrap(),
        ("600".into(), "a=1".into())
    );
}

/// `stat`: a missing path, a file (mode, sha256), a directory, a link; never changed.
pub async fn exercise_stat(remote: &dyn Remote, user: &str, dir: &Path) {
    let c = Call {
        remote,
        user,
        playbook_dir: dir,
        check: false,
        diff: false,
    };
    let f = at(dir, "stat-me");
    let none = c.run("stat", json!({"path": f})).await;
    unchanged(&none, "stat missing");
    assert_eq!(none.data["stat"], json!({"exists": false}));
    host(
        remote,
        &format!(
            "printf abc > {f} && chmod 0640 {f} && ln -sfn {f} {f}.lnk",
            f = sh_quote(&f)
        ),
    )
    .await;
    let s = c.checking().run("stat", json!({"path": f})).await;
    unchanged(&s, "stat file");
    let st = &s.data["stat"];
    assert_eq!(
        (
            st["exists"].clone(),
            st["isreg"].clone(),
            st["isdir"].clone()
        ),
        (json!(true), json!(true), json!(false))
    );
    assert_eq!(
        (
            st["mode"].as_str(),
            st["size"].as_u64(),
            st["checksum_algorithm"].as_str()
        ),
        (Some("0640"), Some(3), Some("sha256"))
    );
    assert_eq!(
        st["checksum"],
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert!(st["pw_name"].is_string() && st["uid"].is_u64());
    let d = c.run("stat", json!({"path": dir.to_string_lossy()})).await;
    assert_eq!(d.data["stat"]["isdir"], true);
    let l = c.run("stat", json!({"path": format!("{f}.lnk")})).await;
    assert_eq!(
        (
            l.data["stat"]["islnk"].clone(),
            l.data["stat"]["isreg"].clone()
        ),
        (json!(true), json!(false))
    );
}

/// `systemd_service` against the host's `systemctl`, which must be [`systemctl_standin`] of
/// `dir/systemd` (the lab installs it in /usr/local/bin): started/stopped and enabled are
/// idempotent, restarted always acts, check mode only reports, an unknown unit fails.
pub async fn exercise_systemd_service(remote: &dyn Remote, user: &str, dir: &Path) {
    let c = Call {
        remote,
        user,
        playbook_dir: dir,
        check: false,
        diff: false,
    };
    let state = at(dir, "systemd");
    host(
        remote,
        &format!(
            "mkdir -p {s} && touch {s}/demo.service.unit && : > {s}/log",
            s = sh_quote(&state)
        ),
    )
    .await;
    let log_cmd = format!("cat {}/log", sh_quote(&state));
    let log = || host(remote, &log_cmd);
    let start = json!({"name": "demo.service", "state": "started", "enabled": true});
    assert!(
        c.checking()
            .run("systemd_service", start.clone())
            .await
            .changed
    );
    assert_eq!(log().await, "", "check mode acted");
    changed(
        &c.run("systemd_service", start.clone()).await,
        "started (first)",
    );
    assert_eq!(log().await, "enable demo.service\nstart demo.service");
    unchanged(&c.run("service", start).await, "started (second)");
    let restart = json!({"name": "demo.service", "state": "restarted"});
    changed(&c.run("systemd", restart.clone()).await, "restarted");
    changed(&c.run("systemd", restart).await, "restarted again");
    let stop = json!({"name": "demo.service", "state": "stopped", "enabled": false});
    assert!(
        c.checking()
            .run("systemd_service", stop.clone())
            .await
            .changed
    );
    assert!(!log().await.contains("stop"), "check mode stopped the unit");
    changed(
        &c.run("systemd_service", stop.clone()).await,
        "stopped (first)",
    );
    unchanged(&c.run("systemd_service", stop).await, "stopped (second)");
    let unknown = c
        .run(
            "systemd_service",
            json!({"name": "nope.service", "state": "started"}),
        )
        .await;
    assert!(
        unknown.failed && unknown.msg.as_deref().unwrap().contains("nope.service"),
        "{unknown:?}"
    );
}

/// `sysctl` in a file of `dir` with `sysctl_set` and `reload` off (the host's kernel settings
/// are only read): the entry written once, check mode, absent.
pub async fn exercise_sysctl(remote: &dyn Remote, user: &str, dir: &Path) {
    let c = Call {
        remote,
        user,
        playbook_dir: dir,
        check: false,
        diff: false,
    };
    let file = at(dir, "sysctl.conf");
    host(
        remote,
        &format!(
            "printf '# kept\\nvm.swappiness = 10\\n' > {}",
            sh_quote(&file)
        ),
    )
    .await;
    let now = host(remote, "cat /proc/sys/net/ipv4/ip_forward").await;
    let set = json!({"name": "net.ipv4.ip_forward", "value": now, "sysctl_file": file, "sysctl_set": false, "reload": false});
    assert!(c.checking().run("sysctl", set.clone()).await.changed);
    assert_eq!(
        snapshot(remote, &file).await.unwrap().1,
        "# kept\nvm.swappiness = 10",
        "check mode wrote"
    );
    changed(&c.run("sysctl", set.clone()).await, "sysctl (first)");
    assert_eq!(
        snapshot(remote, &file).await.unwrap().1,
        format!("# kept\nvm.swappiness = 10\nnet.ipv4.ip_forward={now}")
    );
    unchanged(&c.run("sysctl", set).await, "sysctl (second)");
    let running = json!({"name": "net.ipv4.ip_forward", "value": now, "sysctl_file": file});
    unchanged(
        &c.run("sysctl", running).await,
        "reload: file and kernel agree",
    );
    let gone =
        json!({"name": "vm.swappiness", "state": "absent", "sysctl_file": file, "reload": false});
    changed(&c.run("sysctl", gone.clone()).await, "absent (first)");
    unchanged(&c.run("sysctl", gone).await, "absent (second)");
    assert_eq!(
        snapshot(remote, &file).await.unwrap().1,
        format!("# kept\nnet.ipv4.ip_forward={now}")
    );
}

/// `modprobe` against the host's `/proc/modules` (read only) and a `modprobe` that only logs
/// to `log` (on the host): a loaded module is ok; a missing one is loaded (logged), and in check
/// mode only reported.
pub async fn exercise_modprobe(remote: &dyn Remote, user: &str, dir: &Path, log: &str) {
    let c = Call {
        remote,
        user,
        playbook_dir: dir,
        check: false,
        diff: false,
    };
    host(remote, &format!(": > {}", sh_quote(log))).await;
    let loaded = host(
        remote,
        "{ cut -d' ' -f1 /proc/modules 2>/dev/null || ls /sys/module; } | head -n 1",
    )
    .await;
    assert!(!loaded.is_empty(), "the host lists no kernel module");
    unchanged(
        &c.run("modprobe", json!({"name": loaded})).await,
        "a loaded module",
    );
    unchanged(
        &c.run(
            "modprobe",
            json!({"name": "bootstrap_no_such_mod", "state": "absent"}),
        )
        .await,
        "absent stays absent",
    );
    let load = json!({"name": "bootstrap_no_such_mod", "params": "a=1 b='x y'"});
    assert!(c.checking().run("modprobe", load.clone()).await.changed);
    assert_eq!(
        host(remote, &format!("cat {}", sh_quote(log))).await,
        "",
        "check mode ran modprobe"
    );
    changed(&c.run("modprobe", load).await, "load");
    assert_eq!(
        host(remote, &format!("cat {}", sh_quote(log))).await,
        "-- bootstrap_no_such_mod a=1 b=x y"
    );
}

/// `wait_for`: a path and a regex in it, a port open on the host (`port`, whose first bytes
/// match `banner`), a closed port stopped; timeouts fail with Ansible's message.
pub async fn exercise_wait_for(
    remote: &dyn Remote,
    user: &str,
    dir: &Path,
    port: u16,
    banner: &str,
) {
    let c = Call {
        remote,
        user,
        playbook_dir: dir,
        check: false,
        diff: false,
    };
    let f = at(dir, "ready");
    host(remote, &format!("echo 'state=ready' > {}", sh_quote(&f))).await;
    unchanged(
        &c.run("wait_for", json!({"path": f, "timeout": 5})).await,
        "path present",
    );
    unchanged(
        &c.run(
            "wait_for",
            json!({"path": f, "search_regex": "state=re+ady", "timeout": 5}),
        )
        .await,
        "regex",
    );
    let late = c
        .run(
            "wait_for",
            json!({"path": f, "search_regex": "state=never", "timeout": 1}),
        )
        .await;
    assert!(
        late.failed
            && late.msg.as_deref()
                == Some(&*format!(
                    "Timeout when waiting for search string state=never in {f}"
                )),
        "{late:?}"
    );
    let absent = c
        .run(
            "wait_for",
            json!({"path": f, "state": "absent", "timeout": 1, "msg": "still there"}),
        )
        .await;
    assert!(
        absent.failed && absent.msg.as_deref() == Some("still there"),
        "{absent:?}"
    );
    unchanged(
        &c.run("wait_for", json!({"port": port, "timeout": 5})).await,
        "port open",
    );
    unchanged(
        &c.run(
            "wait_for",
            json!({"port": port, "search_regex": banner, "timeout": 5}),
        )
        .await,
        "banner",
    );
    unchanged(
        &c.run(
            "wait_for",
            json!({"port": 1, "state": "stopped", "timeout": 5}),
        )
        .await,
        "closed port",
    );
    let shut = c
        .run(
            "wait_for",
            json!({"port": port, "state": "stopped", "timeout": 1}),
        )
        .await;
    assert!(
        shut.failed
            && shut.msg
                == Some(format!(
                    "Timeout when waiting for 127.0.0.1:{port} to stop."
                )),
        "{shut:?}"
    );
}
