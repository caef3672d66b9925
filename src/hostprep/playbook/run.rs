//! The executor: plays in order; in each, tasks in order, run by the hosts still active in
//! parallel (at most `forks` at once, Ansible's linear strategy); handlers once at the end of
//! the play for the hosts that notified them. A task that gives no module result on a host
//! (an expression that does not evaluate, a module that cannot be called) is a [`TaskError`]:
//! the host is unreachable when the error says so, the task failed otherwise.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use minijinja::Value as J;
use serde_json::{json, Map, Value};

use super::engine::EngineError;
use super::expr::{self, ConditionError, ExprError};
use super::model::{Play, Playbook, Task};
use super::recap::{HostResult, ItemResult, PlayReport, Report, Status, TaskReport};
use crate::hostprep::modules::{self, ModuleCtx, ModuleError, ModuleResult};
use crate::hostprep::Remote;

/// A host a playbook runs on.
pub struct Host {
    /// Its inventory name (`inventory_hostname`).
    pub name: String,
    /// The groups it belongs to (not `all`).
    pub groups: Vec<String>,
    /// Its variables: host vars over group vars over `all`'s vars.
    pub vars: Map<String, Value>,
    /// The login user (`become` goes through sudo unless it is root).
    pub user: String,
    /// How commands reach it.
    pub remote: Arc<dyn Remote>,
}

/// How to run a playbook.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Hosts running a task at once.
    pub forks: usize,
    /// `--check`: report what would change, change nothing.
    pub check: bool,
    /// `--diff`: show the changes of copy, template and lineinfile.
    pub diff: bool,
    /// `--limit PATTERN`: only these hosts.
    pub limit: Option<String>,
    /// `-e KEY=VALUE`: over every other variable.
    pub extra_vars: Map<String, Value>,
    /// Each command's timeout.
    pub timeout: Duration,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            forks: 5,
            check: false,
            diff: false,
            limit: None,
            extra_vars: Map::new(),
            timeout: Duration::from_secs(300),
        }
    }
}

/// What the run reports while it goes, so the CLI can print Ansible-like lines. No event
/// carries a variable's value beyond a task's own message.
#[derive(Clone, Debug)]
pub enum Event {
    /// `PLAY [name]`.
    PlayStart { name: String },
    /// `TASK [name]`.
    TaskStart { name: String },
    /// `RUNNING HANDLER [name]`.
    HandlerStart { name: String },
    /// One host's result: per item of a loop (`item` set), then the task's own.
    HostResult {
        host: String,
        task: String,
        status: Status,
        msg: Option<String>,
        diff: Option<String>,
        item: Option<String>,
    },
}

/// Whether `host` matches an Ansible host pattern: `all`/`*`, names, groups, `*` globs,
/// `a:b` or `a,b` unions, `!x` exclusions, `&x` intersections.
pub fn matches(pattern: &str, host: &Host) -> bool {
    let one = |term: &str| {
        term == "all" || glob(term, &host.name) || host.groups.iter().any(|g| glob(term, g))
    };
    let (mut any, mut excluded, mut all_of) = (false, false, true);
    for term in pattern
        .split([':', ','])
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        if let Some(t) = term.strip_prefix('!') {
            excluded |= one(t);
        } else if let Some(t) = term.strip_prefix('&') {
            all_of &= one(t);
        } else {
            any |= one(term);
        }
    }
    any && !excluded && all_of
}

fn glob(pattern: &str, name: &str) -> bool {
    if !pattern.contains('*') {
        return pattern == name;
    }
    let re = format!("^{}$", regex::escape(pattern).replace(r"\*", ".*"));
    regex::Regex::new(&re).is_ok_and(|r| r.is_match(name))
}

/// What every task on every host shares.
struct Shared<'a> {
    pb: &'a Playbook,
    opts: &'a RunOptions,
    events: &'a (dyn Fn(Event) + Sync),
    groups: Value,
    hostvars: Value,
}

/// A host's state over the run: facts set and results registered, notified handlers, and
/// whether it is out (failed or unreachable: it runs nothing more).
struct HostState<'h> {
    host: &'h Host,
    facts: Map<String, Value>,
    notified: BTreeSet<usize>,
    out: bool,
}

/// Runs `pb` on `hosts`. Every host selected by some play (and `--limit`) has a recap, even if
/// it ran nothing.
pub async fn run(
    pb: &Playbook,
    hosts: &[Host],
    opts: &RunOptions,
    events: &(dyn Fn(Event) + Sync),
) -> Report {
    let shared = Shared {
        pb,
        opts,
        events,
        groups: groups(hosts),
        hostvars: hostvars(hosts),
    };
    let mut states: Vec<HostState> = hosts
        .iter()
        .map(|host| HostState {
            host,
            facts: Map::new(),
            notified: BTreeSet::new(),
            out: false,
        })
        .collect();
    let mut report = Report::default();
    for play in &pb.plays {
        let selected: Vec<usize> = (0..hosts.len())
            .filter(|&i| matches(&play.hosts, &hosts[i]))
            .filter(|&i| opts.limit.as_deref().is_none_or(|l| matches(l, &hosts[i])))
            .collect();
        for &i in &selected {
            report.recap.entry(hosts[i].name.clone()).or_default();
        }
        let played = run_play(&shared, play, &mut states, &selected).await;
        for task in &played.tasks {
            for (host, result) in &task.hosts {
                report.recap.entry(host.clone()).or_default().count(result);
            }
        }
        report.plays.push(played);
    }
    report
}

fn groups(hosts: &[Host]) -> Value {
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    groups.insert("all".into(), hosts.iter().map(|h| h.name.clone()).collect());
    for h in hosts {
        for g in &h.groups {
            groups.entry(g.clone()).or_default().push(h.name.clone());
        }
    }
    json!(groups)
}

fn hostvars(hosts: &[Host]) -> Value {
    Value::Object(
        hosts
            .iter()
            .map(|h| (h.name.clone(), Value::Object(h.vars.clone())))
            .collect(),
    )
}

async fn run_play(
    shared: &Shared<'_>,
    play: &Play,
    states: &mut [HostState<'_>],
    selected: &[usize],
) -> PlayReport {
    (shared.events)(Event::PlayStart {
        name: play.name.clone(),
    });
    let mut report = PlayReport {
        name: play.name.clone(),
        hosts: selected
            .iter()
            .map(|&i| states[i].host.name.clone())
            .collect(),
        tasks: Vec::new(),
    };
    for task in &play.tasks {
        if !selected.iter().any(|&i| !states[i].out) {
            break;
        }
        (shared.events)(Event::TaskStart {
            name: task.name.clone(),
        });
        let chosen = |_: &HostState| true;
        report
            .tasks
            .push(run_task(shared, play, task, false, states, selected, &chosen).await);
    }
    for (h, handler) in play.handlers.iter().enumerate() {
        let chosen = move |s: &HostState| s.notified.contains(&h);
        if !selected
            .iter()
            .any(|&i| !states[i].out && chosen(&states[i]))
        {
            continue;
        }
        (shared.events)(Event::HandlerStart {
            name: handler.name.clone(),
        });
        report
            .tasks
            .push(run_task(shared, play, handler, true, states, selected, &chosen).await);
    }
    for &i in selected {
        states[i].notified.clear();
    }
    report
}

/// One task on every selected, active host that `chosen` picks, `forks` at a time.
async fn run_task(
    shared: &Shared<'_>,
    play: &Play,
    task: &Task,
    handler: bool,
    states: &mut [HostState<'_>],
    selected: &[usize],
    chosen: &(dyn Fn(&HostState) -> bool + Sync),
) -> TaskReport {
    let runs = states
        .iter_mut()
        .enumerate()
        .filter(|(i, s)| selected.contains(i) && !s.out && chosen(s))
        .map(|(_, s)| async move {
            let result = on_host(shared, play, task, s).await;
            (s.host.name.clone(), result)
        });
    let hosts = futures_util::stream::iter(runs)
        .buffered(shared.opts.forks.max(1))
        .collect()
        .await;
    TaskReport {
        name: task.name.clone(),
        handler,
        hosts,
    }
}

/// The task on one host: runs it, registers its result, notifies handlers, reports.
async fn on_host(
    shared: &Shared<'_>,
    play: &Play,
    task: &Task,
    state: &mut HostState<'_>,
) -> HostResult {
    let outcome = Step {
        shared,
        play,
        task,
        state: &*state,
    }
    .run()
    .await;
    if let Some(name) = &task.register {
        state
            .facts
            .insert(name.clone(), Value::Object(outcome.result.clone()));
    }
    if let Some(Value::Object(facts)) = outcome.result.get("ansible_facts") {
        state.facts.extend(facts.clone());
    }
    let result = outcome.host_result(task, play);
    if matches!(result.status, Status::Failed | Status::Unreachable) {
        state.out = true;
    }
    if result.changed {
        for n in &task.notify {
            let answering = play
                .handlers
                .iter()
                .enumerate()
                .filter(|(_, h)| h.answers(n));
            state.notified.extend(answering.map(|(i, _)| i));
        }
    }
    (shared.events)(Event::HostResult {
        host: state.host.name.clone(),
        task: task.name.clone(),
        status: result.status,
        msg: result.msg.clone(),
        diff: result.diff.clone(),
        item: None,
    });
    result
}

/// A task's result on a host: the registered value, whether the host was unreachable, the
/// items of a loop.
struct Outcome {
    result: Map<String, Value>,
    unreachable: bool,
    diff: Option<String>,
    items: Vec<ItemResult>,
}

impl Outcome {
    fn host_result(&self, task: &Task, play: &Play) -> HostResult {
        let flag = |k: &str| self.result.get(k).and_then(Value::as_bool).unwrap_or(false);
        let ignore = task.ignore_errors.or(play.ignore_errors).unwrap_or(false);
        let status = status_of(
            self.unreachable,
            flag("failed"),
            ignore,
            flag("skipped"),
            flag("changed"),
        );
        let msg = self.result.get("msg").map(expr::display);
        HostResult {
            status,
            changed: flag("changed"),
            msg,
            diff: self.diff.clone(),
            items: self.items.clone(),
        }
    }
}

fn status_of(
    unreachable: bool,
    failed: bool,
    ignore: bool,
    skipped: bool,
    changed: bool,
) -> Status {
    match () {
        _ if unreachable => Status::Unreachable,
        _ if failed && ignore => Status::Ignored,
        _ if failed => Status::Failed,
        _ if skipped => Status::Skipped,
        _ if changed => Status::Changed,
        _ => Status::Ok,
    }
}

fn failure(msg: impl Into<String>) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("failed".into(), Value::Bool(true));
    m.insert("changed".into(), Value::Bool(false));
    m.insert("msg".into(), Value::String(msg.into()));
    m
}

/// One task on one host, with what it reads.
struct Step<'s, 'h> {
    shared: &'s Shared<'s>,
    play: &'s Play,
    task: &'s Task,
    state: &'s HostState<'h>,
}

impl Step<'_, '_> {
    fn check(&self) -> bool {
        self.task
            .check_mode
            .or(self.play.check_mode)
            .unwrap_or(self.shared.opts.check)
    }

    /// The task's variables: extra vars > task vars > facts and registered results > play vars
    /// > the host's vars; the magic variables; templated values resolved once.
    fn vars(&self) -> Map<String, Value> {
        let mut m = self.state.host.vars.clone();
        m.extend(self.play.vars.clone());
        m.extend(self.state.facts.clone());
        m.extend(self.task.vars.clone());
        m.extend(self.shared.opts.extra_vars.clone());
        let host = self.state.host;
        m.insert("inventory_hostname".into(), json!(host.name));
        m.insert(
            "inventory_hostname_short".into(),
            json!(host.name.split('.').next().unwrap_or("")),
        );
        m.insert("group_names".into(), json!(host.groups));
        m.insert("groups".into(), self.shared.groups.clone());
        m.insert("hostvars".into(), self.shared.hostvars.clone());
        m.insert("ansible_check_mode".into(), json!(self.check()));
        m.insert(
            "playbook_dir".into(),
            json!(self.shared.pb.dir.display().to_string()),
        );
        resolve(&mut m);
        m
    }

    async fn run(&self) -> Outcome {
        let vars = self.vars();
        let Some(looped) = &self.task.loop_ else {
            return self.item(&vars).await;
        };
        let items = match expr::template(looped, &expr::context(&vars)) {
            Ok(Value::Array(items)) => items,
            Ok(other) => {
                return self.failed(TaskError::LoopNotList {
                    gave: expr::display(&other),
                })
            }
            Err(source) => {
                return self.failed(TaskError::Template {
                    during: "loop",
                    source,
                })
            }
        };
        self.each(&vars, items).await
    }

    /// The task's outcome when it gave no module result: failed, or unreachable.
    fn failed(&self, e: TaskError) -> Outcome {
        Outcome {
            result: failure(e.to_string()),
            unreachable: e.is_unreachable(),
            diff: None,
            items: Vec::new(),
        }
    }

    /// A loop: the task per item, its results under `results`.
    async fn each(&self, vars: &Map<String, Value>, items: Vec<Value>) -> Outcome {
        let mut all = Outcome {
            result: Map::new(),
            unreachable: false,
            diff: None,
            items: Vec::new(),
        };
        let (mut results, mut changed, mut failed, mut skipped) = (Vec::new(), false, false, true);
        for item in items {
            let mut v = vars.clone();
            v.insert(self.task.loop_var.clone(), item.clone());
            v.insert("ansible_loop_var".into(), json!(self.task.loop_var));
            let label = self.label(&v, &item);
            let mut one = self.item(&v).await;
            one.result.insert(self.task.loop_var.clone(), item);
            let r = one.host_result(self.task, self.play);
            self.report_item(&r, &label);
            all.items.push(ItemResult {
                item: label,
                status: r.status,
                msg: r.msg,
            });
            (changed, failed, skipped) = (
                changed || r.changed,
                failed || one.flag("failed"),
                skipped && one.flag("skipped"),
            );
            all.diff = join_diff(all.diff.take(), one.diff);
            results.push(Value::Object(one.result));
            if one.unreachable {
                all.unreachable = true;
                break;
            }
        }
        let msg = if failed {
            "One or more items failed"
        } else {
            "All items completed"
        };
        all.result = json!({"results": results, "changed": changed, "failed": failed, "skipped": skipped && !results.is_empty(), "msg": msg})
            .as_object().cloned().unwrap_or_default();
        all
    }

    fn label(&self, vars: &Map<String, Value>, item: &Value) -> String {
        match &self.task.label {
            Some(l) => expr::render(l, &expr::context(vars)).unwrap_or_else(|_| l.clone()),
            None => expr::display(item),
        }
    }

    fn report_item(&self, r: &HostResult, label: &str) {
        (self.shared.events)(Event::HostResult {
            host: self.state.host.name.clone(),
            task: self.task.name.clone(),
            status: r.status,
            msg: r.msg.clone(),
            diff: r.diff.clone(),
            item: Some(label.to_string()),
        });
    }

    /// The task once (one item): `when`, then attempts until `until` holds.
    async fn item(&self, vars: &Map<String, Value>) -> Outcome {
        let ctx = expr::context(vars);
        match expr::all_true(&self.task.when, &ctx) {
            Ok(true) => {}
            Ok(false) => {
                let cond = self.task.when.join(" and ");
                let result = json!({"changed": false, "skipped": true, "skip_reason": "Conditional result was False", "false_condition": cond});
                return Outcome {
                    result: result.as_object().cloned().unwrap_or_default(),
                    unreachable: false,
                    diff: None,
                    items: Vec::new(),
                };
            }
            Err(source) => {
                return self.failed(TaskError::Condition {
                    keyword: "when",
                    source,
                })
            }
        }
        self.attempts(vars).await
    }

    async fn attempts(&self, vars: &Map<String, Value>) -> Outcome {
        let Some(until) = &self.task.until else {
            return self.attempt(vars).await;
        };
        let tries = match self.task.retries {
            None => 3,
            Some(0) => 1,
            Some(n) => n.saturating_add(1),
        };
        let delay = Duration::from_secs_f64(self.task.delay.unwrap_or(5.0));
        let mut n = 0;
        loop {
            n += 1;
            let mut out = self.attempt(vars).await;
            out.result.insert("attempts".into(), json!(n));
            if out.unreachable {
                return out;
            }
            match expr::all_true(until, &self.with_result(vars, &out.result)) {
                Ok(true) => return out,
                Ok(false) if n >= tries => {
                    out.result.insert("failed".into(), json!(true));
                    out.result
                        .entry("msg")
                        .or_insert(json!(format!("until: still false after {n} attempts")));
                    return out;
                }
                Ok(false) => tokio::time::sleep(delay).await,
                Err(source) => {
                    return self.failed(TaskError::Condition {
                        keyword: "until",
                        source,
                    })
                }
            }
        }
    }

    /// The variables with the result under the `register` name (for changed_when,
    /// failed_when, until).
    fn with_result(&self, vars: &Map<String, Value>, result: &Map<String, Value>) -> J {
        let mut v = vars.clone();
        if let Some(name) = &self.task.register {
            v.insert(name.clone(), Value::Object(result.clone()));
        }
        expr::context(&v)
    }

    /// The module once, then `changed_when` and `failed_when`.
    async fn attempt(&self, vars: &Map<String, Value>) -> Outcome {
        let (mut result, diff) = match self.call(vars).await {
            Ok((r, diff)) => (module_result(r), diff),
            Err(e) if e.is_unreachable() => return self.failed(e),
            // Judged by changed_when/failed_when like a module's own failure.
            Err(e) => (failure(e.to_string()), None),
        };
        // A result the module skipped (a command in check mode) is not judged by
        // changed_when/failed_when, as in Ansible.
        let skipped = result
            .get("skipped")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if !skipped {
            if let Err(e) = self.override_flags(vars, &mut result) {
                result = failure(e.to_string());
            }
        }
        Outcome {
            result,
            unreachable: false,
            diff,
            items: Vec::new(),
        }
    }

    fn override_flags(
        &self,
        vars: &Map<String, Value>,
        result: &mut Map<String, Value>,
    ) -> Result<(), TaskError> {
        let condition = |keyword| move |source| TaskError::Condition { keyword, source };
        if let Some(c) = &self.task.changed_when {
            let changed = expr::all_true(c, &self.with_result(vars, result))
                .map_err(condition("changed_when"))?;
            result.insert("changed".into(), json!(changed));
        }
        if let Some(f) = &self.task.failed_when {
            let failed = expr::all_true(f, &self.with_result(vars, result))
                .map_err(condition("failed_when"))?;
            result.insert("failed".into(), json!(failed));
            result.insert("failed_when_result".into(), json!(failed));
        }
        Ok(())
    }

    async fn call(
        &self,
        vars: &Map<String, Value>,
    ) -> Result<(ModuleResult, Option<String>), TaskError> {
        let ctx = expr::context(vars);
        if modules::ENGINE.contains(&self.task.module) {
            let r = super::engine::run(self.task.module, &self.task.args, &ctx)?;
            return Ok((r, None));
        }
        let args = match expr::template(&Value::Object(self.task.args.clone()), &ctx) {
            Ok(Value::Object(a)) => a,
            Ok(_) => unreachable!("a mapping templates to a mapping"),
            Err(source) => {
                return Err(TaskError::Template {
                    during: "templating the arguments",
                    source,
                })
            }
        };
        let render = |text: &str| expr::render(text, &ctx);
        let host = self.state.host;
        let mctx = ModuleCtx {
            remote: host.remote.as_ref(),
            user: &host.user,
            become_: self.task.become_.or(self.play.become_).unwrap_or(false),
            check: self.check(),
            diff: self.shared.opts.diff,
            playbook_dir: &self.shared.pb.dir,
            render: &render,
            timeout: self.shared.opts.timeout,
        };
        let r = modules::run(self.task.module, &args, &mctx).await?;
        let diff = r.diff.clone();
        Ok((r, diff))
    }
}

impl Outcome {
    fn flag(&self, k: &str) -> bool {
        self.result.get(k).and_then(Value::as_bool).unwrap_or(false)
    }
}

/// Why a task gave no module result on a host. The task fails with the message; the host is
/// out of the play either way, and counted unreachable when [`TaskError::is_unreachable`].
#[derive(Debug, thiserror::Error)]
pub(crate) enum TaskError {
    /// A conditional (`when`, `until`, `changed_when`, `failed_when`) did not evaluate.
    #[error("{keyword}: {source}")]
    Condition {
        /// The keyword.
        keyword: &'static str,
        /// Which conditional, and why.
        source: ConditionError,
    },
    /// A templated value (`loop`, the module's arguments) did not render.
    #[error("{during}: {source}")]
    Template {
        /// What was being templated.
        during: &'static str,
        /// Why.
        source: ExprError,
    },
    /// `loop` rendered to something that is not a list.
    #[error("loop must give a list, it gave {gave}")]
    LoopNotList {
        /// What it gave.
        gave: String,
    },
    /// An engine module (`assert`, `set_fact`, ...) could not evaluate its arguments.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A module could not be called on the host: bad arguments or template, or the host not
    /// reached.
    #[error(transparent)]
    Module(#[from] ModuleError),
}

impl TaskError {
    /// Whether the host was not reached (or refused us): Ansible's UNREACHABLE, not a failed
    /// task.
    pub(crate) fn is_unreachable(&self) -> bool {
        matches!(self, TaskError::Module(ModuleError::Remote(e)) if e.is_unreachable())
    }
}

fn module_result(r: ModuleResult) -> Map<String, Value> {
    let mut m = r.data;
    m.insert("changed".into(), json!(r.changed));
    m.insert("failed".into(), json!(r.failed));
    if r.skipped {
        m.insert("skipped".into(), json!(true));
    }
    if let Some(msg) = r.msg {
        m.insert("msg".into(), json!(msg));
    }
    m
}

fn join_diff(a: Option<String>, b: Option<String>) -> Option<String> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a + &b),
        (a, b) => a.or(b),
    }
}

/// Templated variables (`x: "{{ y }}"`) resolved against the others, once; one that cannot be
/// resolved yet keeps its text (Ansible resolves lazily; using it reports the error).
fn resolve(vars: &mut Map<String, Value>) {
    let templated: Vec<String> = vars
        .iter()
        .filter(|(_, v)| has_template(v))
        .map(|(k, _)| k.clone())
        .collect();
    if templated.is_empty() {
        return;
    }
    let ctx = expr::context(vars);
    for k in templated {
        if let Ok(v) = expr::template(&vars[&k], &ctx) {
            vars.insert(k, v);
        }
    }
}

fn has_template(v: &Value) -> bool {
    match v {
        Value::String(s) => expr::is_template(s),
        Value::Array(a) => a.iter().any(has_template),
        Value::Object(m) => m.values().any(has_template),
        _ => false,
    }
}
