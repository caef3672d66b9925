//! The playbook engine against `Local` hosts (and one unreachable host): Ansible's semantics
//! for when, loop, register, changed_when, failed_when, until, handlers, ignore_errors,
//! set_fact, assert, fail, --limit, --check and forks, the recap's counts, and the refusals a
//! playbook gets before any host is touched, each at its file:line:col.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bootstrap::hostprep::playbook::{self, Event, Host, Recap, Report, RunOptions, Status};
use bootstrap::hostprep::{BoxFuture, Exec, Local, Output, Remote, RemoteError};
use serde_json::{json, Map, Value};

fn host(name: &str, groups: &[&str], vars: Value) -> Host {
    Host {
        name: name.into(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        vars: vars.as_object().cloned().unwrap_or_default(),
        user: "root".into(),
        remote: Arc::new(Local { name: name.into() }),
    }
}

/// The two local hosts: `a` in group gpu, `b` in group cpu; each with its own scratch dir.
fn two_hosts(dir: &Path) -> Vec<Host> {
    vec![
        host(
            "a",
            &["gpu"],
            json!({"scratch": dir.join("a").display().to_string()}),
        ),
        host(
            "b",
            &["cpu"],
            json!({"scratch": dir.join("b").display().to_string()}),
        ),
    ]
}

fn write_playbook(dir: &Path, text: &str) -> PathBuf {
    for h in ["a", "b"] {
        fs_err::create_dir_all(dir.join(h)).unwrap();
    }
    let path = dir.join("site.yml");
    fs_err::write(&path, text).unwrap();
    path
}

async fn run(path: &Path, hosts: &[Host], opts: &RunOptions) -> (Report, Vec<Event>) {
    let pb = playbook::load(path)
        .unwrap_or_else(|p| panic!("{}", bootstrap::yaml::render_problems("pb", &p)));
    let events = Mutex::new(Vec::new());
    let report = playbook::run(&pb, hosts, opts, &|e| events.lock().unwrap().push(e)).await;
    (report, events.into_inner().unwrap())
}

fn recap(ok: u32, changed: u32, failed: u32, skipped: u32, ignored: u32) -> Recap {
    Recap {
        ok,
        changed,
        failed,
        skipped,
        ignored,
        ..Recap::default()
    }
}

fn status(report: &Report, task: &str, host: &str) -> Status {
    let t = report
        .plays
        .iter()
        .flat_map(|p| &p.tasks)
        .find(|t| t.name == task)
        .unwrap_or_else(|| panic!("no task {task}"));
    t.hosts[host].status
}

const SEMANTICS: &str = r#"
- name: semantics
  hosts: all
  gather_facts: false
  vars:
    greeting: hello
  tasks:
    - name: echo
      ansible.builtin.command: echo {{ greeting }} {{ inventory_hostname }}
      register: out
      changed_when: false
    - name: only on gpu
      shell: echo gpu
      when: "'gpu' in group_names"
    - name: loop
      shell: echo {{ n }}
      loop: [1, 2, 3]
      loop_control:
        loop_var: n
      register: looped
      changed_when: n == 2
    - name: facts
      set_fact:
        total: "{{ looped.results | map(attribute='stdout') | map('int') | sum }}"
        first_word: "{{ out.stdout.split(' ')[0] }}"
    - name: assert
      assert:
        that:
          - total == 6
          - first_word == 'hello'
          - out.stdout == 'hello ' ~ inventory_hostname
          - looped.results | map(attribute='changed') | select | list | length == 1
          - looped is changed
    - name: failing, ignored
      command: "false"
      ignore_errors: true
    - name: failed_when
      shell: echo ERROR
      register: r
      failed_when: "'ERROR' in r.stdout and inventory_hostname == 'b'"
    - name: after
      debug:
        msg: "{{ inventory_hostname }} still runs"
"#;

#[tokio::test]
async fn when_loop_register_changed_failed_when_set_fact_assert_and_the_recap() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_playbook(dir.path(), SEMANTICS);
    let hosts = two_hosts(dir.path());
    let (report, events) = run(&path, &hosts, &RunOptions::default()).await;
    assert_eq!(status(&report, "only on gpu", "b"), Status::Skipped);
    assert_eq!(status(&report, "assert", "a"), Status::Ok);
    assert_eq!(status(&report, "failing, ignored", "a"), Status::Ignored);
    assert_eq!(status(&report, "failed_when", "b"), Status::Failed);
    assert_eq!(status(&report, "failed_when", "a"), Status::Changed);
    let after = report.plays[0]
        .tasks
        .iter()
        .find(|t| t.name == "after")
        .unwrap();
    assert_eq!(
        after.hosts.keys().collect::<Vec<_>>(),
        ["a"],
        "a failed host runs nothing more"
    );
    assert_eq!(after.hosts["a"].msg.as_deref(), Some("a still runs"));
    // a: 8 tasks ran; changed: only on gpu, loop, the failed command (Ansible counts its
    // changed), failed_when's shell.
    assert_eq!(report.recap["a"], recap(8, 4, 0, 0, 1));
    // b: echo, loop, facts, assert, ignored ok; only-on-gpu skipped; failed_when failed.
    assert_eq!(report.recap["b"], recap(5, 2, 1, 1, 1));
    assert!(!report.success());
    let items: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            Event::HostResult {
                host,
                task,
                item: Some(item),
                status,
                ..
            } if host == "a" && task == "loop" => Some(format!("{item}:{status:?}")),
            _ => None,
        })
        .collect();
    assert_eq!(items, ["1:Ok", "2:Changed", "3:Ok"]);
    let text = report.recap_text();
    assert!(text.contains("b                          : ok=5    changed=2    unreachable=0    failed=1    skipped=1    rescued=0    ignored=1"), "{text}");
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["recap"]["a"]["ok"], 8);
    assert_eq!(
        json["plays"][0]["tasks"][6]["hosts"]["b"]["status"],
        "failed"
    );
}

#[tokio::test]
async fn handlers_run_once_at_the_end_of_the_play_when_notified() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_playbook(
        dir.path(),
        r#"
- hosts: all
  gather_facts: false
  tasks:
    - name: first change
      shell: echo task >> {{ scratch }}/log
      notify: restart
    - name: second change
      shell: echo task >> {{ scratch }}/log
      notify: [restart, reload]
    - name: no change
      command: "true"
      changed_when: false
      notify: never
  handlers:
    - name: never
      shell: echo never >> {{ scratch }}/log
    - name: restart
      shell: echo restart >> {{ scratch }}/log
    - name: reloader
      listen: reload
      shell: echo reload >> {{ scratch }}/log
"#,
    );
    let hosts = two_hosts(dir.path());
    let (report, events) = run(&path, &hosts, &RunOptions::default()).await;
    for h in ["a", "b"] {
        let log = fs_err::read_to_string(dir.path().join(h).join("log")).unwrap();
        assert_eq!(log, "task\ntask\nrestart\nreload\n", "host {h}");
    }
    let handlers: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::HandlerStart { name } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(handlers, ["restart", "reloader"]);
    assert_eq!(report.recap["a"], recap(5, 4, 0, 0, 0));
    assert!(report.success());
}

#[tokio::test]
async fn until_retries_and_gives_up_after_retries_plus_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_playbook(
        dir.path(),
        r#"
- hosts: a
  gather_facts: false
  tasks:
    - name: counts to three
      shell: n=$(cat {{ scratch }}/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > {{ scratch }}/n; echo $n
      register: r
      until: r.stdout == '3'
      retries: 5
      delay: 0
    - name: attempts
      assert:
        that: r.attempts == 3
    - name: never true
      shell: echo x >> {{ scratch }}/m
      register: m
      until: false
      retries: 2
      delay: 0
"#,
    );
    let hosts = two_hosts(dir.path());
    let (report, _) = run(&path, &hosts, &RunOptions::default()).await;
    assert_eq!(status(&report, "attempts", "a"), Status::Ok);
    assert_eq!(status(&report, "never true", "a"), Status::Failed);
    assert_eq!(
        fs_err::read_to_string(dir.path().join("a/m")).unwrap(),
        "x\nx\nx\n"
    );
    assert!(!report.recap.contains_key("b"), "hosts: a selects a only");
}

#[tokio::test]
async fn limit_check_forks_fail_and_extra_vars() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_playbook(
        dir.path(),
        r#"
- hosts: gpu:cpu
  gather_facts: false
  vars:
    who: play
  tasks:
    - name: would touch
      shell: touch {{ scratch }}/touched
    - name: touches even in check mode
      shell: touch {{ scratch }}/forced
      check_mode: false
    - name: knows check mode
      assert:
        that: ansible_check_mode and who == 'extra'
    - name: stop
      fail:
        msg: "stopped on {{ inventory_hostname }}"
      when: inventory_hostname == 'b'
"#,
    );
    let hosts = two_hosts(dir.path());
    let opts = RunOptions {
        forks: 1,
        check: true,
        limit: Some("all:!a".into()),
        extra_vars: Map::from_iter([("who".to_string(), json!("extra"))]),
        ..RunOptions::default()
    };
    let (report, _) = run(&path, &hosts, &opts).await;
    assert_eq!(report.recap.keys().collect::<Vec<_>>(), ["b"]);
    assert!(!dir.path().join("b/touched").exists());
    assert!(dir.path().join("b/forced").exists());
    assert!(!dir.path().join("a/forced").exists());
    assert_eq!(status(&report, "would touch", "b"), Status::Skipped);
    assert_eq!(status(&report, "knows check mode", "b"), Status::Ok);
    let stop = &report.plays[0].tasks[3].hosts["b"];
    assert_eq!(
        (stop.status, stop.msg.as_deref()),
        (Status::Failed, Some("stopped on b"))
    );
    assert_eq!(report.recap["b"], recap(2, 1, 1, 1, 0));
}

/// A host whose every command finds it unreachable.
struct Down;

impl Remote for Down {
    fn name(&self) -> &str {
        "c"
    }
    fn exec<'a>(&'a self, _: Exec<'a>) -> BoxFuture<'a, Result<Output, RemoteError>> {
        Box::pin(async {
            Err(RemoteError::Unreachable {
                host: "c".into(),
                detail: "connection refused".into(),
            })
        })
    }
}

#[tokio::test]
async fn an_unreachable_host_is_counted_and_the_others_finish() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_playbook(
        dir.path(),
        r#"
- hosts: all
  gather_facts: false
  tasks:
    - name: one
      command: "true"
      changed_when: false
    - name: two
      command: "true"
"#,
    );
    let mut hosts = two_hosts(dir.path());
    hosts.push(Host {
        name: "c".into(),
        groups: vec![],
        vars: Map::new(),
        user: "core".into(),
        remote: Arc::new(Down),
    });
    let (report, _) = run(&path, &hosts, &RunOptions::default()).await;
    assert_eq!(
        report.recap["c"],
        Recap {
            unreachable: 1,
            ..Recap::default()
        }
    );
    assert_eq!(report.recap["a"], recap(2, 1, 0, 0, 0));
    assert_eq!(report.recap["b"], recap(2, 1, 0, 0, 0));
    assert!(!report.plays[0].tasks[1].hosts.contains_key("c"));
    assert!(report.plays[0].tasks[0].hosts["c"]
        .msg
        .as_deref()
        .unwrap()
        .contains("connection refused"));
    assert!(!report.success());
}

#[test]
fn refusals_name_file_line_and_column_before_any_host_is_touched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.yml");
    fs_err::write(
        &path,
        r#"- name: bad
  hosts: all
  gather_facts: true
  tasks:
    - name: ok
      command: echo ok
    - name: typo
      command: echo
      registr: out
    - name: yum
      yum:
        name: httpd
    - debug:
        msgg: hi
    - name: bad expression
      command: echo
      when: x ==
    - name: bad template
      command: echo {{ x
    - name: bad argument under args
      copy:
        dest: /tmp/x
      args:
        conten: hi
  handlers: []
  serial: 1
"#,
    )
    .unwrap();
    let problems = playbook::load(&path).unwrap_err();
    let text = bootstrap::yaml::render_problems(&path.display().to_string(), &problems);
    let f = path.display();
    let modules = "command, shell, copy, template, file, lineinfile, stat, systemd_service, systemd, service, sysctl, modprobe, wait_for, assert, fail, debug, set_fact";
    let expected = [
        format!("{f}:3:17: plays[0].gather_facts: set gather_facts: false; bootstrap prep reads hardware facts itself"),
        format!("{f}:9:7: plays[0].tasks[1]: unknown task keyword 'registr'; did you mean 'register'?"),
        format!("{f}:11:7: plays[0].tasks[2]: unknown module 'yum'; bootstrap prep runs: {modules}"),
        format!("{f}:14:9: plays[0].tasks[3].debug.msgg: debug: unsupported argument `msgg` (accepted: msg, var, verbosity)"),
        format!("{f}:17:13: plays[0].tasks[4].when: bad Jinja expression \"x ==\": syntax error: unexpected end of input, expected expression"),
        format!("{f}:19:16: plays[0].tasks[5].command: bad Jinja in \"echo {{{{ x\": syntax error: unexpected end of input, expected end of variable block"),
        format!("{f}:24:9: plays[0].tasks[6].args.conten: copy: unsupported argument `conten` (accepted: src, content, dest, mode, owner, group, force, backup)"),
        format!("{f}:26:3: plays[0]: unknown play key 'serial'; bootstrap prep takes: name, hosts, vars, tasks, handlers, become, gather_facts, check_mode, ignore_errors, tags"),
    ];
    assert_eq!(text, expected.join("\n"));
}

#[test]
fn the_shipped_playbooks_load() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("playbooks");
    for name in ["handshake.yml", "gpu-node.yml"] {
        let pb = playbook::load(&dir.join(name))
            .unwrap_or_else(|p| panic!("{}", bootstrap::yaml::render_problems(name, &p)));
        assert!(pb.plays[0].tasks.len() >= 3, "{name}");
    }
}

/// gpu-node.yml's own tasks against a host whose "PCI bus" is a fixture: the split() calls,
/// the loop over registered stdout_lines and assert's fail_msg, as the playbook writes them.
#[tokio::test]
async fn the_gpu_playbook_runs_its_expressions() {
    let dir = tempfile::tempdir().unwrap();
    let text = fs_err::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("playbooks/gpu-node.yml"),
    )
    .unwrap();
    let sys = dir.path().join("sys");
    for (dev, driver, width) in [
        ("0000:9a:00.0", "nvidia", "16"),
        ("0000:9b:00.0", "vfio-pci", "8"),
    ] {
        let d = sys.join(dev);
        fs_err::create_dir_all(&d).unwrap();
        for (f, v) in [
            ("vendor", "0x10de"),
            ("device", "0x2335"),
            ("current_link_width", width),
            ("max_link_width", "16"),
        ] {
            fs_err::write(d.join(f), format!("{v}\n")).unwrap();
        }
        std::os::unix::fs::symlink(format!("/drivers/{driver}"), d.join("driver")).unwrap();
    }
    // A GPU with no driver bound and no link width read (a file without its newline, as a
    // driver's attribute may be): "none" and "?", not an error.
    let unbound = sys.join("0000:9c:00.0");
    fs_err::create_dir_all(&unbound).unwrap();
    fs_err::write(unbound.join("vendor"), "0x10de\n").unwrap();
    fs_err::write(unbound.join("device"), "0x2335").unwrap();
    // Another device on the bus: skipped.
    let nic = sys.join("0000:18:00.0");
    fs_err::create_dir_all(&nic).unwrap();
    fs_err::write(nic.join("vendor"), "0x15b3\n").unwrap();
    fs_err::write(nic.join("device"), "0x1021\n").unwrap();
    let path = write_playbook(
        dir.path(),
        &text.replace("/sys/bus/pci/devices", &sys.display().to_string()),
    );
    let hosts = vec![host("gpu-01", &["gpu"], json!({"gpu_pci_id": "10de:2335"}))];
    let (report, _) = run(&path, &hosts, &RunOptions::default()).await;
    let driven = &report.plays[0].tasks[1].hosts["gpu-01"];
    assert_eq!(driven.status, Status::Failed);
    let msgs: Vec<_> = driven
        .items
        .iter()
        .map(|i| (i.item.as_str(), i.status, i.msg.as_deref()))
        .collect();
    assert_eq!(msgs, [
        ("0000:9a:00.0 nvidia 16 16", Status::Ok, Some("All assertions passed")),
        ("0000:9b:00.0 vfio-pci 8 16", Status::Failed, Some("GPU 0000:9b:00.0 is driven by 'vfio-pci', not nvidia; the GPU Operator's driver is not loaded there")),
        ("0000:9c:00.0 none ? ?", Status::Failed, Some("GPU 0000:9c:00.0 is driven by 'none', not nvidia; the GPU Operator's driver is not loaded there")),
    ]);
    assert_eq!(report.recap["gpu-01"], recap(1, 0, 1, 0, 0));
}

/// A host whose commands take a while, counting how many of the hosts sharing `in_flight` run
/// a command at once (and the most ever).
struct Counted {
    name: String,
    in_flight: Arc<Mutex<(usize, usize)>>,
}

impl Remote for Counted {
    fn name(&self) -> &str {
        &self.name
    }
    fn exec<'a>(&'a self, _: Exec<'a>) -> BoxFuture<'a, Result<Output, RemoteError>> {
        Box::pin(async move {
            {
                let mut n = self.in_flight.lock().unwrap();
                n.0 += 1;
                n.1 = n.1.max(n.0);
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            self.in_flight.lock().unwrap().0 -= 1;
            Ok(Output {
                status: Some(0),
                stdout: b"ok\n".to_vec(),
                stderr: Vec::new(),
                truncated: false,
            })
        })
    }
}

/// Site-size prep (issue 31): with more hosts than forks, each task runs on exactly `forks`
/// hosts at once, never more and never fewer, as Ansible's linear strategy does; with forks at
/// the host count, on every host at once.
#[tokio::test]
async fn a_task_runs_on_exactly_forks_hosts_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_playbook(
        dir.path(),
        "- hosts: all\n  gather_facts: false\n  tasks:\n    - command: uname\n    - command: uptime\n",
    );
    for forks in [1, 3, 24] {
        let in_flight = Arc::new(Mutex::new((0, 0)));
        let hosts: Vec<Host> = (0..24)
            .map(|i| Host {
                remote: Arc::new(Counted {
                    name: format!("node-{i}"),
                    in_flight: in_flight.clone(),
                }),
                ..host(&format!("node-{i}"), &[], json!({}))
            })
            .collect();
        let opts = RunOptions {
            forks,
            ..RunOptions::default()
        };
        let (report, _) = run(&path, &hosts, &opts).await;
        assert_eq!(report.recap.len(), 24);
        assert!(report.recap.values().all(|r| r.ok == 2 && r.failed == 0));
        assert_eq!(in_flight.lock().unwrap().1, forks, "forks {forks}");
    }
}
