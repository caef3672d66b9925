//! A module's arguments checked against its table (names, aliases, types, required ones,
//! choices), once before any host is touched ([`super::check_args`]) and again, typed, when the
//! module runs: one table per module, so the static check and the run cannot disagree. A
//! problem is an [`ArgError`] naming the module, the argument and what it accepts; the engine's
//! own modules (`debug`, `assert`, `fail`, `set_fact`) report theirs with it too.

use serde_json::{Map, Value};

/// The type an argument takes, with Ansible's conversions (`"yes"` is a bool, `"30"` an int).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Text; numbers and booleans are taken as their text.
    Str,
    /// true/false, yes/no, on/off, 1/0.
    Bool,
    /// A whole number, or its text.
    Int,
    /// A list of strings (`argv`).
    List,
    /// A file mode: an octal string (`"0644"`) or a number (YAML 1.1's `0644`, i.e. 420).
    Mode,
}

/// One argument a module accepts.
#[derive(Clone, Copy, Debug)]
pub struct Arg {
    /// Its name.
    pub name: &'static str,
    /// Its type.
    pub kind: Kind,
    /// Whether the module refuses to run without it.
    pub required: bool,
    /// The values it may take (empty: any).
    pub choices: &'static [&'static str],
    /// Other names for it.
    pub aliases: &'static [&'static str],
}

impl Arg {
    /// An optional argument without choices or aliases.
    pub const fn opt(name: &'static str, kind: Kind) -> Arg {
        Arg {
            name,
            kind,
            required: false,
            choices: &[],
            aliases: &[],
        }
    }

    /// The same argument, required.
    pub const fn req(self) -> Arg {
        Arg {
            required: true,
            ..self
        }
    }

    /// The same argument, limited to `choices`.
    pub const fn one_of(self, choices: &'static [&'static str]) -> Arg {
        Arg { choices, ..self }
    }

    /// The same argument, also spelled `aliases`.
    pub const fn alias(self, aliases: &'static [&'static str]) -> Arg {
        Arg { aliases, ..self }
    }
}

/// A module's table: its arguments, the groups of which one is required, and the pairs that
/// exclude each other.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    /// The module's name, for messages.
    pub module: &'static str,
    /// Its arguments.
    pub args: &'static [Arg],
    /// Groups of which at least one must be given.
    pub one_required: &'static [&'static [&'static str]],
    /// Groups of which at most one may be given.
    pub exclusive: &'static [&'static [&'static str]],
}

/// Why a module's arguments do not fit it: bad input in the playbook, refused before any host is
/// touched (or, for a value that was still a template then, when the task runs). Each names the
/// module and the argument, and what it accepts.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ArgError {
    /// The module is not one run on a host.
    #[error("`{module}` is not a module run on a host (those are: {})", super::REMOTE.join(", "))]
    NotRemote {
        /// The module as named.
        module: String,
    },
    /// An argument the module does not take.
    #[error("{module}: unsupported argument `{key}` (accepted: {})", accepted.join(", "))]
    Unsupported {
        /// The module.
        module: &'static str,
        /// The argument as written.
        key: String,
        /// The arguments it takes.
        accepted: Vec<&'static str>,
    },
    /// The same argument under two of its names.
    #[error("{module}: `{key}` and another spelling of `{name}` both given; keep one")]
    Duplicate {
        /// The module.
        module: &'static str,
        /// The second spelling.
        key: String,
        /// The argument's name.
        name: &'static str,
    },
    /// A required argument is missing.
    #[error("{module}: missing required argument `{name}` (accepted: {})", accepted.join(", "))]
    Missing {
        /// The module.
        module: &'static str,
        /// The argument.
        name: &'static str,
        /// The arguments it takes.
        accepted: Vec<&'static str>,
    },
    /// None of a group of which one is required.
    #[error("{module}: one of {} is required", list(group))]
    OneRequired {
        /// The module.
        module: &'static str,
        /// The group.
        group: &'static [&'static str],
    },
    /// More than one of a group that exclude each other.
    #[error("{module}: {} exclude each other; give one", list(group))]
    Exclusive {
        /// The module.
        module: &'static str,
        /// The group.
        group: &'static [&'static str],
    },
    /// A value of the wrong type.
    #[error("{module}: argument `{key}` must be {expected}, not {value}")]
    WrongType {
        /// The module.
        module: &'static str,
        /// The argument as written.
        key: String,
        /// What it takes (`a boolean (true/false)`).
        expected: &'static str,
        /// The value given.
        value: Value,
    },
    /// A value that is not one of the argument's choices.
    #[error(
        "{module}: argument `{key}` is `{value}`; choose one of {}",
        list(choices)
    )]
    NotAChoice {
        /// The module.
        module: &'static str,
        /// The argument as written.
        key: String,
        /// The value given.
        value: String,
        /// The values it takes.
        choices: &'static [&'static str],
    },
    /// A value that is not a regular expression.
    #[error("{module}: `{key}` is not a valid regular expression: {source}")]
    BadRegex {
        /// The module.
        module: &'static str,
        /// The argument.
        key: String,
        /// What the regex parser said.
        #[source]
        source: regex::Error,
    },
    /// Arguments that do not go together, by a rule of the module's own.
    #[error("{module}: {rule}")]
    Rule {
        /// The module.
        module: &'static str,
        /// The rule broken (`state=present needs \`line\``).
        rule: &'static str,
    },
    /// A name `set_fact` cannot set.
    #[error("{module}: '{key}' is not a variable name (letters, digits, _)")]
    NotAName {
        /// The module.
        module: &'static str,
        /// The name as written.
        key: String,
    },
    /// `set_fact` without a fact.
    #[error("{module} needs at least one name: value")]
    Empty {
        /// The module.
        module: &'static str,
    },
}

impl ArgError {
    /// The argument the problem is about, as written, when it is about one: where a playbook
    /// loader places the problem.
    pub fn argument(&self) -> Option<&str> {
        match self {
            ArgError::Unsupported { key, .. }
            | ArgError::Duplicate { key, .. }
            | ArgError::WrongType { key, .. }
            | ArgError::NotAChoice { key, .. }
            | ArgError::BadRegex { key, .. }
            | ArgError::NotAName { key, .. } => Some(key),
            _ => None,
        }
    }
}

/// Arguments resolved against a [`Spec`]: aliases replaced by the argument's name, types
/// checked. Getters take the name from the table.
#[derive(Clone, Debug)]
pub struct Args {
    values: Map<String, Value>,
}

/// Whether `v` is a template the engine has not rendered yet (the static check lets it pass).
fn is_template(v: &Value) -> bool {
    v.as_str()
        .is_some_and(|s| s.contains("{{") || s.contains("{%"))
}

impl Spec {
    /// Checks `given` against the table. `statically`: before templating, so a value that is
    /// still a template passes the type and choice checks.
    pub fn resolve(&self, given: &Map<String, Value>, statically: bool) -> Result<Args, ArgError> {
        let module = self.module;
        let mut values = Map::new();
        for (key, value) in given {
            let arg = self.find(key)?;
            if values.contains_key(arg.name) {
                return Err(ArgError::Duplicate {
                    module,
                    key: key.clone(),
                    name: arg.name,
                });
            }
            let value = if statically && is_template(value) {
                value.clone()
            } else {
                self.typed(arg, key, value)?
            };
            values.insert(arg.name.to_string(), value);
        }
        if let Some(arg) = self
            .args
            .iter()
            .find(|a| a.required && !values.contains_key(a.name))
        {
            return Err(ArgError::Missing {
                module,
                name: arg.name,
                accepted: self.names(),
            });
        }
        if let Some(group) = self
            .one_required
            .iter()
            .find(|g| !g.iter().any(|n| values.contains_key(*n)))
        {
            return Err(ArgError::OneRequired { module, group });
        }
        if let Some(group) = self
            .exclusive
            .iter()
            .find(|g| g.iter().filter(|n| values.contains_key(**n)).count() > 1)
        {
            return Err(ArgError::Exclusive { module, group });
        }
        Ok(Args { values })
    }

    fn find(&self, key: &str) -> Result<&Arg, ArgError> {
        self.args
            .iter()
            .find(|a| a.name == key || a.aliases.contains(&key))
            .ok_or_else(|| ArgError::Unsupported {
                module: self.module,
                key: key.to_string(),
                accepted: self.names(),
            })
    }

    /// The arguments a playbook may write (not the internal `_raw_params`).
    fn names(&self) -> Vec<&'static str> {
        self.args
            .iter()
            .map(|a| a.name)
            .filter(|n| !n.starts_with('_'))
            .collect()
    }

    fn typed(&self, arg: &Arg, key: &str, value: &Value) -> Result<Value, ArgError> {
        let wrong = |expected| ArgError::WrongType {
            module: self.module,
            key: key.to_string(),
            expected,
            value: value.clone(),
        };
        let typed = match arg.kind {
            Kind::Str => Value::String(text(value).ok_or_else(|| wrong("a string"))?),
            Kind::Bool => {
                Value::Bool(boolean(value).ok_or_else(|| wrong("a boolean (true/false)"))?)
            }
            Kind::Int => Value::from(integer(value).ok_or_else(|| wrong("a whole number"))?),
            Kind::List => Value::Array(strings(value).ok_or_else(|| wrong("a list of strings"))?),
            Kind::Mode => {
                Value::from(mode(value).ok_or_else(|| wrong("an octal mode such as '0644'"))?)
            }
        };
        if let (false, Some(s)) = (arg.choices.is_empty(), typed.as_str()) {
            if !arg.choices.contains(&s) {
                return Err(ArgError::NotAChoice {
                    module: self.module,
                    key: key.to_string(),
                    value: s.to_string(),
                    choices: arg.choices,
                });
            }
        }
        Ok(typed)
    }
}

fn list(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(if *b { "True" } else { "False" }.to_string()),
        _ => None,
    }
}

fn boolean(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::Number(n) => match n.as_i64() {
            Some(1) => Some(true),
            Some(0) => Some(false),
            _ => None,
        },
        Value::String(s) => match s.to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" | "y" | "1" | "t" => Some(true),
            "false" | "no" | "off" | "n" | "0" | "f" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

fn integer(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn strings(v: &Value) -> Option<Vec<Value>> {
    v.as_array()?
        .iter()
        .map(|x| text(x).map(Value::String))
        .collect()
}

/// A mode as its number: an int is taken as the number itself (as Ansible does: YAML 1.1
/// reads `0644` as 420), a string as octal digits.
fn mode(v: &Value) -> Option<u32> {
    let m = match v {
        Value::Number(n) => u32::try_from(n.as_u64()?).ok()?,
        Value::String(s) if !s.is_empty() && s.len() <= 5 => u32::from_str_radix(s, 8).ok()?,
        _ => return None,
    };
    (m <= 0o7777).then_some(m)
}

impl Args {
    /// A string argument, if given.
    pub fn str(&self, name: &str) -> Option<&str> {
        self.values.get(name).and_then(Value::as_str)
    }

    /// A boolean argument, or its default.
    pub fn bool(&self, name: &str, default: bool) -> bool {
        self.values
            .get(name)
            .and_then(Value::as_bool)
            .unwrap_or(default)
    }

    /// An integer argument, or its default.
    pub fn int(&self, name: &str, default: i64) -> i64 {
        self.values
            .get(name)
            .and_then(Value::as_i64)
            .unwrap_or(default)
    }

    /// A mode argument, if given.
    pub fn mode(&self, name: &str) -> Option<u32> {
        self.values
            .get(name)
            .and_then(Value::as_u64)
            .map(|m| m as u32)
    }

    /// A list-of-strings argument, if given.
    pub fn list(&self, name: &str) -> Option<Vec<String>> {
        let items = self.values.get(name)?.as_array()?;
        Some(
            items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
        )
    }

    /// Whether the argument was given.
    pub fn has(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SPEC: Spec = Spec {
        module: "demo",
        args: &[
            Arg::opt("path", Kind::Str).req().alias(&["dest"]),
            Arg::opt("state", Kind::Str).one_of(&["present", "absent"]),
            Arg::opt("force", Kind::Bool),
            Arg::opt("mode", Kind::Mode),
            Arg::opt("src", Kind::Str),
            Arg::opt("content", Kind::Str),
        ],
        one_required: &[],
        exclusive: &[&["src", "content"]],
    };

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn aliases_types_and_modes_resolve() {
        let a = SPEC
            .resolve(
                &map(json!({"dest": "/x", "force": "yes", "mode": "0640"})),
                false,
            )
            .unwrap();
        assert_eq!(a.str("path"), Some("/x"));
        assert!(a.bool("force", false));
        assert_eq!(a.mode("mode"), Some(0o640));
        let a = SPEC
            .resolve(&map(json!({"path": "/x", "mode": 420})), false)
            .unwrap();
        assert_eq!(a.mode("mode"), Some(0o644));
    }

    #[test]
    fn errors_name_the_argument_and_the_accepted_ones() {
        let err = |given: Value| SPEC.resolve(&map(given), false).unwrap_err();
        let e = err(json!({"path": "/x", "colour": 1}));
        assert_eq!(e.argument(), Some("colour"));
        assert_eq!(
            e.to_string(),
            "demo: unsupported argument `colour` (accepted: path, state, force, mode, src, content)"
        );
        let e = err(json!({"state": "present"}));
        assert!(matches!(e, ArgError::Missing { name: "path", .. }), "{e:?}");
        assert!(
            e.to_string().contains("missing required argument `path`"),
            "{e}"
        );
        let e = err(json!({"path": "/x", "state": "gone"}));
        assert_eq!(
            e.to_string(),
            "demo: argument `state` is `gone`; choose one of `present`, `absent`"
        );
        let e = err(json!({"path": "/x", "force": "maybe"}));
        assert!(
            matches!(e, ArgError::WrongType { ref key, .. } if key == "force"),
            "{e:?}"
        );
        assert!(e.to_string().contains("`force` must be a boolean"), "{e}");
        let e = err(json!({"path": "/x", "src": "a", "content": "b"}));
        assert_eq!(e.argument(), None);
        assert_eq!(
            e.to_string(),
            "demo: `src`, `content` exclude each other; give one"
        );
        let e = err(json!({"path": "/x", "mode": "u+rw"}));
        assert!(e.to_string().contains("octal mode"), "{e}");
        let e = err(json!({"path": "/x", "dest": "/y"}));
        assert!(
            matches!(e, ArgError::Duplicate { name: "path", .. }),
            "{e:?}"
        );
    }

    #[test]
    fn templates_pass_the_static_check_only() {
        let given = map(json!({"path": "/x", "force": "{{ f }}"}));
        assert!(SPEC.resolve(&given, true).is_ok());
        assert!(SPEC.resolve(&given, false).is_err());
    }
}
