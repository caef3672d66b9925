//! Loading a playbook: the YAML read with positions, every play key, task keyword, module,
//! module argument and Jinja expression checked, and every problem reported with its
//! `file:line:col` before any host is touched.

use std::path::Path;

use serde_json::{Map, Value};

use super::expr;
use super::model::{Play, Playbook, Task};
use crate::hostprep::modules::{self, ArgError};
use crate::yaml::{did_you_mean, index_text, Index, Location, Problem};

/// The largest `retries` or `delay` (seconds) a task may give.
const MAX_NUMBER: f64 = 86_400.0;

/// The play keys we implement.
const PLAY_KEYS: &[&str] = &[
    "name",
    "hosts",
    "vars",
    "tasks",
    "handlers",
    "become",
    "gather_facts",
    "check_mode",
    "ignore_errors",
    "tags",
];

/// The task keywords we implement.
const TASK_KEYWORDS: &[&str] = &[
    "name",
    "when",
    "register",
    "loop",
    "loop_control",
    "changed_when",
    "failed_when",
    "until",
    "retries",
    "delay",
    "notify",
    "become",
    "ignore_errors",
    "check_mode",
    "args",
    "vars",
    "tags",
    "listen",
];

/// Ansible task keywords bootstrap prep does not run, with what to write instead.
const UNSUPPORTED: &[(&str, &str)] = &[
    ("with_items", "write loop: instead"),
    ("with_list", "write loop: instead"),
    (
        "with_dict",
        "write loop: \"{{ d | dict2items }}\" is not available either; list the items",
    ),
    ("block", "write the tasks one after the other"),
    (
        "rescue",
        "use ignore_errors and when on a registered result",
    ),
    ("always", "write the tasks one after the other"),
    ("delegate_to", "run the task on the hosts themselves"),
    ("local_action", "run the task on the hosts themselves"),
    ("run_once", "limit the play's hosts instead"),
    ("async", "use wait_for or until/retries"),
    ("poll", "use wait_for or until/retries"),
    (
        "environment",
        "set the variables in the command (FOO=bar cmd)",
    ),
    ("become_user", "tasks become root only"),
    ("no_log", "bootstrap prep logs no variables; remove it"),
    ("include_tasks", "write the tasks in the play"),
    ("import_tasks", "write the tasks in the play"),
    ("include_role", "write the tasks in the play"),
    ("import_role", "write the tasks in the play"),
];

/// Reads and checks the playbook at `path`. Every problem found is returned, each placed at the
/// key or value it concerns (render them with [`crate::yaml::render_problems`] and the path).
pub fn load(path: &Path) -> Result<Playbook, Vec<Problem>> {
    let text = fs_err::read_to_string(path).map_err(|e| {
        vec![Problem::new(
            None,
            "",
            format!("cannot read the playbook: {}", crate::yaml::io_reason(&e)),
        )]
    })?;
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let plays = parse(&text)?;
    Ok(Playbook {
        path: path.to_path_buf(),
        dir,
        plays,
    })
}

/// Parses and checks a playbook's text.
pub fn parse(text: &str) -> Result<Vec<Play>, Vec<Problem>> {
    let yaml_problem = |e: serde_saphyr::Error| {
        let loc = e.location().and_then(Location::from_yaml);
        vec![Problem::new(
            loc,
            "",
            format!("not valid YAML: {}", one_line(&e.to_string())),
        )]
    };
    let mut value: Value = serde_saphyr::from_str(text).map_err(yaml_problem)?;
    let index = index_text(text).map_err(yaml_problem)?.unwrap_or_default();
    pyyaml_booleans(&mut value, &index, "");
    let mut loader = Loader {
        index,
        problems: Vec::new(),
    };
    let plays = loader.plays(&value);
    if loader.problems.is_empty() {
        Ok(plays)
    } else {
        loader.problems.sort_by_key(|p| p.location);
        Err(loader.problems)
    }
}

/// Plain `y`, `n` (and other words YAML readers differ on) read as booleans here are strings
/// to ansible-playbook (PyYAML: only true/false/yes/no/on/off): put their text back. And plain
/// numbers with a leading zero are octal, as PyYAML reads them.
fn pyyaml_booleans(value: &mut Value, index: &Index, path: &str) {
    match value {
        Value::Bool(_) => {
            let plain = index.get(path).and_then(|e| e.plain.clone());
            if let Some(text) = plain {
                let word = text.to_ascii_lowercase();
                if !matches!(
                    word.as_str(),
                    "true" | "false" | "yes" | "no" | "on" | "off"
                ) {
                    *value = Value::String(text);
                }
            }
        }
        // PyYAML reads YAML 1.1: a plain `0644` is octal (420), so `mode: 0644` means rw-r--r--
        // there; a YAML 1.2 reader would make it 644.
        Value::Number(_) | Value::String(_) => {
            let plain = index.get(path).and_then(|e| e.plain.clone());
            if let Some(octal) = plain.as_deref().and_then(yaml11_octal) {
                *value = Value::from(octal);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter_mut().enumerate() {
                pyyaml_booleans(v, index, &format!("{path}[{i}]"));
            }
        }
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                let child = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                pyyaml_booleans(v, index, &child);
            }
        }
        _ => {}
    }
}

/// A YAML 1.1 octal integer as PyYAML reads it: `0` followed by octal digits (`0644`).
fn yaml11_octal(text: &str) -> Option<i64> {
    let digits = text.strip_prefix('0')?;
    if digits.is_empty() || !digits.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
        return None;
    }
    i64::from_str_radix(digits, 8).ok()
}

fn one_line(s: &str) -> String {
    s.lines().next().unwrap_or("").to_string()
}

/// Where a node is, as the index names it (`[0].tasks[2]`) and as messages do
/// (`plays[0].tasks[2]`).
#[derive(Clone)]
struct At {
    index: String,
}

impl At {
    fn child(&self, key: &str) -> At {
        At {
            index: format!("{}.{key}", self.index),
        }
    }
    fn item(&self, i: usize) -> At {
        At {
            index: format!("{}[{i}]", self.index),
        }
    }
    fn shown(&self) -> String {
        format!("plays{}", self.index)
    }
}

struct Loader {
    index: Index,
    problems: Vec<Problem>,
}

impl Loader {
    /// A problem at the key of `at` (its value's place for list items).
    fn at_key(&mut self, at: &At, shown: &At, message: impl Into<String>) {
        let loc = self
            .index
            .key_location(&at.index)
            .or_else(|| self.index.locate(&at.index));
        self.problems
            .push(Problem::new(loc, shown.shown(), message));
    }

    /// A problem at the value of `at`.
    fn at_value(&mut self, at: &At, message: impl Into<String>) {
        let loc = self
            .index
            .location(&at.index)
            .or_else(|| self.index.locate(&at.index));
        self.problems.push(Problem::new(loc, at.shown(), message));
    }

    fn plays(&mut self, value: &Value) -> Vec<Play> {
        let Some(list) = value.as_array() else {
            let at = At {
                index: String::new(),
            };
            self.at_value(
                &at,
                "a playbook is a list of plays (- name: ...\\n  hosts: all\\n  tasks: [...])",
            );
            return Vec::new();
        };
        list.iter()
            .enumerate()
            .filter_map(|(i, p)| {
                self.play(
                    &At {
                        index: format!("[{i}]"),
                    },
                    p,
                )
            })
            .collect()
    }

    fn play(&mut self, at: &At, value: &Value) -> Option<Play> {
        let Some(map) = value.as_object() else {
            self.at_value(at, "a play is a mapping with hosts and tasks");
            return None;
        };
        let mut play = Play::default();
        for (key, v) in map {
            let here = at.child(key);
            match key.as_str() {
                "name" => play.name = self.string(&here, v).unwrap_or_default(),
                "hosts" => play.hosts = self.hosts(&here, v),
                "vars" => play.vars = self.vars(&here, v),
                "tasks" => play.tasks = self.tasks(&here, v, false),
                "handlers" => play.handlers = self.tasks(&here, v, true),
                "become" => play.become_ = self.boolean(&here, v),
                "check_mode" => play.check_mode = self.boolean(&here, v),
                "ignore_errors" => play.ignore_errors = self.boolean(&here, v),
                "gather_facts" => {
                    if self.boolean(&here, v) == Some(true) {
                        self.at_value(
                            &here,
                            "set gather_facts: false; bootstrap prep reads hardware facts itself",
                        );
                    }
                }
                "tags" => {}
                other => {
                    let msg = unknown("play key", other, PLAY_KEYS);
                    self.at_key(&here, at, msg);
                }
            }
        }
        if play.hosts.is_empty() && !map.contains_key("hosts") {
            self.at_value(at, "a play needs hosts: (all, a group or host names)");
        }
        if play.name.is_empty() {
            play.name = play.hosts.clone();
        }
        self.check_notify(at, &play);
        Some(play)
    }

    fn check_notify(&mut self, at: &At, play: &Play) {
        let names: Vec<&str> = play.handlers.iter().map(|h| h.name.as_str()).collect();
        for (i, task) in play.tasks.iter().chain(&play.handlers).enumerate() {
            for n in &task.notify {
                if !play.handlers.iter().any(|h| h.answers(n)) {
                    let (list, j) = if i < play.tasks.len() {
                        ("tasks", i)
                    } else {
                        ("handlers", i - play.tasks.len())
                    };
                    let here = at.child(list).item(j).child("notify");
                    self.at_value(
                        &here,
                        format!(
                            "notify '{n}' names no handler of this play (handlers: {})",
                            or_none(&names)
                        ),
                    );
                }
            }
        }
    }

    fn hosts(&mut self, at: &At, v: &Value) -> String {
        match v {
            Value::String(s) => s.clone(),
            Value::Array(items) if items.iter().all(Value::is_string) => items
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(":"),
            _ => {
                self.at_value(
                    at,
                    "hosts is a pattern (all, a group, host names, a:b) or a list of them",
                );
                String::new()
            }
        }
    }

    fn string(&mut self, at: &At, v: &Value) -> Option<String> {
        match v {
            Value::String(s) => {
                self.template(at, s);
                Some(s.clone())
            }
            Value::Number(n) => Some(n.to_string()),
            _ => {
                self.at_value(at, "expected a string");
                None
            }
        }
    }

    fn boolean(&mut self, at: &At, v: &Value) -> Option<bool> {
        let b = match v {
            Value::Bool(b) => Some(*b),
            Value::String(s) => match s.to_ascii_lowercase().as_str() {
                "yes" | "true" | "on" => Some(true),
                "no" | "false" | "off" => Some(false),
                _ => None,
            },
            _ => None,
        };
        if b.is_none() {
            self.at_value(at, "expected true or false");
        }
        b
    }

    fn vars(&mut self, at: &At, v: &Value) -> Map<String, Value> {
        match v {
            Value::Object(map) => {
                self.templates(at, v);
                map.clone()
            }
            Value::Null => Map::new(),
            _ => {
                self.at_value(at, "vars is a mapping of names to values");
                Map::new()
            }
        }
    }

    /// Checks the syntax of every template string under `v`.
    fn templates(&mut self, at: &At, v: &Value) {
        match v {
            Value::String(s) => self.template(at, s),
            Value::Array(items) => items
                .iter()
                .enumerate()
                .for_each(|(i, x)| self.templates(&at.item(i), x)),
            Value::Object(map) => map
                .iter()
                .for_each(|(k, x)| self.templates(&at.child(k), x)),
            _ => {}
        }
    }

    fn template(&mut self, at: &At, s: &str) {
        if let Err(e) = expr::check_syntax(s, false) {
            self.at_value(at, format!("bad Jinja in {:?}: {e}", s.trim()));
        }
    }

    /// A conditional: a string, a boolean, or a list of them (all must hold).
    fn conditionals(&mut self, at: &At, v: &Value) -> Vec<String> {
        let one = |l: &mut Loader, at: &At, v: &Value| match v {
            Value::Bool(b) => Some(b.to_string()),
            Value::Number(n) => Some(n.to_string()),
            Value::String(s) => match expr::check_syntax(s, true) {
                Ok(()) => Some(s.clone()),
                Err(e) => {
                    l.at_value(at, format!("bad Jinja expression {:?}: {e}", s.trim()));
                    None
                }
            },
            _ => {
                l.at_value(at, "expected an expression (a string), true or false");
                None
            }
        };
        match v {
            Value::Array(items) => items
                .iter()
                .enumerate()
                .filter_map(|(i, x)| one(self, &at.item(i), x))
                .collect(),
            other => one(self, at, other).into_iter().collect(),
        }
    }

    fn names(&mut self, at: &At, v: &Value) -> Vec<String> {
        match v {
            Value::String(s) => vec![s.clone()],
            Value::Array(items) if items.iter().all(Value::is_string) => items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
            _ => {
                self.at_value(at, "expected a name or a list of names");
                Vec::new()
            }
        }
    }

    fn tasks(&mut self, at: &At, v: &Value, handlers: bool) -> Vec<Task> {
        match v {
            Value::Array(items) => items
                .iter()
                .enumerate()
                .filter_map(|(i, t)| self.task(&at.item(i), t, handlers))
                .collect(),
            Value::Null => Vec::new(),
            _ => {
                self.at_value(at, "expected a list of tasks");
                Vec::new()
            }
        }
    }
}

fn unknown(what: &str, key: &str, known: &[&'static str]) -> String {
    match did_you_mean(key, known) {
        Some(m) => format!("unknown {what} '{key}'; did you mean '{m}'?"),
        None => format!(
            "unknown {what} '{key}'; bootstrap prep takes: {}",
            known.join(", ")
        ),
    }
}

fn or_none(names: &[&str]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// Every module a task may name, for messages.
pub(crate) fn module_list() -> String {
    modules::REMOTE
        .iter()
        .chain(modules::ENGINE)
        .copied()
        .collect::<Vec<_>>()
        .join(", ")
}

/// A task's module found among its keys.
struct ModuleKey {
    key: String,
    module: &'static str,
    value: Value,
}

impl Loader {
    fn task(&mut self, at: &At, v: &Value, handler: bool) -> Option<Task> {
        let Some(map) = v.as_object() else {
            self.at_value(at, "a task is a mapping: a module and its keywords");
            return None;
        };
        let mut task = Task {
            path: at.shown(),
            loop_var: "item".into(),
            ..Task::default()
        };
        let (mut found, mut unknown_module) = (Vec::new(), false);
        let mut args_kw = Map::new();
        for (key, val) in map {
            let here = at.child(key);
            if TASK_KEYWORDS.contains(&key.as_str()) {
                if key == "args" {
                    args_kw = self.vars(&here, val);
                } else {
                    self.keyword(&mut task, &here, key, val, handler);
                }
            } else if let Some(module) = modules::canonical(key) {
                found.push(ModuleKey {
                    key: key.clone(),
                    module,
                    value: val.clone(),
                });
            } else {
                unknown_module |= self.not_a_keyword(at, &here, key);
            }
        }
        self.module(at, &mut task, found, args_kw, unknown_module)?;
        if task.name.is_empty() {
            task.name = task.module.to_string();
        }
        Some(task)
    }

    /// Reports a key that is neither a keyword nor a module; says whether it read as a module.
    fn not_a_keyword(&mut self, at: &At, here: &At, key: &str) -> bool {
        if let Some((_, fix)) = UNSUPPORTED.iter().find(|(k, _)| *k == key) {
            self.at_key(
                here,
                at,
                format!("task keyword '{key}' is not supported by bootstrap prep; {fix}"),
            );
            return false;
        }
        if let Some(m) = did_you_mean(key, TASK_KEYWORDS) {
            self.at_key(
                here,
                at,
                format!("unknown task keyword '{key}'; did you mean '{m}'?"),
            );
            return false;
        }
        self.at_key(
            here,
            at,
            format!(
                "unknown module '{key}'; bootstrap prep runs: {}",
                module_list()
            ),
        );
        true
    }

    fn keyword(&mut self, task: &mut Task, at: &At, key: &str, v: &Value, handler: bool) {
        match key {
            "name" => task.name = self.string(at, v).unwrap_or_default(),
            "when" => task.when = self.conditionals(at, v),
            "changed_when" => task.changed_when = Some(self.conditionals(at, v)),
            "failed_when" => task.failed_when = Some(self.conditionals(at, v)),
            "until" => task.until = Some(self.conditionals(at, v)),
            "register" => task.register = self.identifier(at, v),
            "loop" => task.loop_ = self.loop_value(at, v),
            "loop_control" => self.loop_control(task, at, v),
            "retries" => task.retries = self.number(at, v).map(|n| n as u32),
            "delay" => task.delay = self.number(at, v),
            "notify" => task.notify = self.names(at, v),
            "listen" if handler => task.listen = self.names(at, v),
            "listen" => self.at_key(
                at,
                at,
                "listen belongs to handlers; a task notifies with notify:",
            ),
            "become" => task.become_ = self.boolean(at, v),
            "ignore_errors" => task.ignore_errors = self.boolean(at, v),
            "check_mode" => task.check_mode = self.boolean(at, v),
            "vars" => task.vars = self.vars(at, v),
            _ => {} // tags: accepted, ignored
        }
    }

    fn identifier(&mut self, at: &At, v: &Value) -> Option<String> {
        let ok = v.as_str().filter(|s| {
            s.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
        if ok.is_none() {
            self.at_value(at, "expected a variable name (letters, digits, _)");
        }
        ok.map(str::to_string)
    }

    /// `retries` and `delay`: a finite number, at most a day (a larger one is a typo, and
    /// would overflow a duration).
    fn number(&mut self, at: &At, v: &Value) -> Option<f64> {
        let n = v
            .as_f64()
            .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
            .filter(|n| n.is_finite() && (0.0..=MAX_NUMBER).contains(n));
        if n.is_none() {
            self.at_value(at, "expected a number from 0 to 86400");
        }
        n
    }

    fn loop_value(&mut self, at: &At, v: &Value) -> Option<Value> {
        match v {
            Value::Array(_) => self.templates(at, v),
            Value::String(s) if expr::is_template(s) => self.template(at, s),
            _ => {
                self.at_value(
                    at,
                    "loop is a list or a template that gives one (\"{{ var }}\")",
                );
                return None;
            }
        }
        Some(v.clone())
    }

    fn loop_control(&mut self, task: &mut Task, at: &At, v: &Value) {
        let Some(map) = v.as_object() else {
            return self.at_value(at, "loop_control is a mapping (loop_var, label)");
        };
        for (k, val) in map {
            let here = at.child(k);
            match k.as_str() {
                "loop_var" => {
                    task.loop_var = self.identifier(&here, val).unwrap_or_else(|| "item".into())
                }
                "label" => task.label = self.string(&here, val),
                other => self.at_key(
                    &here,
                    &here,
                    unknown("loop_control key", other, &["loop_var", "label"]),
                ),
            }
        }
    }

    /// The task's one module and its arguments (free form, `args:` merged), checked.
    fn module(
        &mut self,
        at: &At,
        task: &mut Task,
        found: Vec<ModuleKey>,
        extra: Map<String, Value>,
        reported: bool,
    ) -> Option<()> {
        let mut found = found.into_iter();
        let Some(first) = found.next() else {
            if !reported {
                self.at_value(
                    at,
                    format!(
                        "a task names one module; bootstrap prep runs: {}",
                        module_list()
                    ),
                );
            }
            return None;
        };
        for other in found {
            self.at_key(
                &at.child(&other.key),
                at,
                format!(
                    "a task names one module; this one names '{}' and '{}'",
                    first.key, other.key
                ),
            );
        }
        let here = at.child(&first.key);
        let mut args = match &first.value {
            Value::Object(map) => map.clone(),
            Value::Null => Map::new(),
            Value::String(s) if matches!(first.module, "command" | "shell") => {
                Map::from_iter([("_raw_params".to_string(), Value::String(s.clone()))])
            }
            _ => {
                self.at_value(
                    &here,
                    format!("{}'s arguments are a mapping (key: value)", first.module),
                );
                return None;
            }
        };
        for (k, v) in extra {
            args.entry(k).or_insert(v);
        }
        self.templates(&here, &first.value);
        self.check_args(at, &here, first.module, &args);
        task.module = first.module;
        task.args = args;
        Some(())
    }

    fn check_args(&mut self, at: &At, here: &At, module: &'static str, args: &Map<String, Value>) {
        let checked = match module {
            "debug" | "assert" | "fail" | "set_fact" => self.engine_args(here, module, args),
            _ => modules::check_args(module, args),
        };
        let Err(e) = checked else { return };
        // An argument's problem goes where the argument is written (in the module's mapping or
        // under `args:`); the others at the module's key.
        let written = e.argument().and_then(|arg| {
            [here.child(arg), at.child("args").child(arg)]
                .into_iter()
                .find(|a| self.index.get(&a.index).is_some())
        });
        match written {
            Some(arg) => self.at_key(&arg, &arg, e.to_string()),
            None => self.at_key(here, at, e.to_string()),
        }
    }

    fn engine_args(
        &mut self,
        at: &At,
        module: &'static str,
        args: &Map<String, Value>,
    ) -> Result<(), ArgError> {
        let accepted: &[&'static str] = match module {
            "debug" => DEBUG_ARGS,
            "assert" => ASSERT_ARGS,
            "fail" => &["msg"],
            _ => return set_fact_args(args),
        };
        if let Some(k) = args.keys().find(|k| !accepted.contains(&k.as_str())) {
            return Err(ArgError::Unsupported {
                module,
                key: k.clone(),
                accepted: accepted.to_vec(),
            });
        }
        match module {
            "debug" if args.contains_key("msg") && args.contains_key("var") => {
                Err(ArgError::Exclusive {
                    module,
                    group: &["msg", "var"],
                })
            }
            "debug" => {
                if let Some(var) = args.get("var").and_then(Value::as_str) {
                    self.conditionals(&at.child("var"), &Value::String(var.to_string()));
                }
                Ok(())
            }
            "assert" => match args.get("that") {
                Some(that) => {
                    self.conditionals(&at.child("that"), that);
                    Ok(())
                }
                None => Err(ArgError::Missing {
                    module,
                    name: "that",
                    accepted: accepted.to_vec(),
                }),
            },
            _ => Ok(()),
        }
    }
}

/// The arguments `debug` takes.
const DEBUG_ARGS: &[&str] = &["msg", "var", "verbosity"];

/// The arguments `assert` takes.
pub(super) const ASSERT_ARGS: &[&str] = &["that", "fail_msg", "msg", "success_msg", "quiet"];

fn set_fact_args(args: &Map<String, Value>) -> Result<(), ArgError> {
    let module = "set_fact";
    match args
        .keys()
        .find(|k| !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') || k.is_empty())
    {
        Some(k) => Err(ArgError::NotAName {
            module,
            key: k.clone(),
        }),
        None if args.is_empty() => Err(ArgError::Empty { module }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_leading_zero_number_is_octal_as_in_ansible() {
        let plays = parse("- hosts: all\n  tasks:\n    - copy: {content: x, dest: /tmp/x, mode: 0644}\n    - copy: {content: x, dest: /tmp/y, mode: '0644'}\n").unwrap();
        assert_eq!(plays[0].tasks[0].args["mode"], serde_json::json!(420));
        assert_eq!(plays[0].tasks[1].args["mode"], serde_json::json!("0644"));
    }

    #[test]
    fn plain_y_and_n_stay_strings_as_in_ansible() {
        let plays = parse("- hosts: all\n  tasks:\n    - debug: {msg: n}\n      loop_control: {loop_var: n}\n      loop: [y, yes]\n").unwrap();
        let t = &plays[0].tasks[0];
        assert_eq!(t.loop_var, "n");
        assert_eq!(t.args["msg"], Value::from("n"));
        assert_eq!(t.loop_, Some(serde_json::json!(["y", true])));
        assert_eq!(t.name, "debug");
        assert_eq!(plays[0].name, "all");
    }

    #[test]
    fn free_form_commands_and_args_merge() {
        let plays =
            parse("- hosts: all\n  tasks:\n    - shell: echo hi\n      args: {chdir: /tmp}\n")
                .unwrap();
        let args = &plays[0].tasks[0].args;
        assert_eq!(args["_raw_params"], Value::from("echo hi"));
        assert_eq!(args["chdir"], Value::from("/tmp"));
    }

    #[test]
    fn notify_must_name_a_handler() {
        let problems = parse("- hosts: all\n  tasks:\n    - command: 'true'\n      notify: restrat\n  handlers:\n    - name: restart\n      command: 'true'\n").unwrap_err();
        let text = crate::yaml::render_problems("f", &problems);
        assert_eq!(text, "f:4:15: plays[0].tasks[0].notify: notify 'restrat' names no handler of this play (handlers: restart)");
    }
}
