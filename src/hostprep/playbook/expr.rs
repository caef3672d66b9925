//! Ansible's Jinja2 in minijinja: the filters and tests playbooks use, Python's string and dict
//! methods (`x.split(':')[0]`, `d.get('k')`), and how Ansible templates a value (a string that
//! is exactly `{{ expr }}` keeps the expression's type). What goes wrong is an [`ExprError`]:
//! a syntax error (bad input, refused when the playbook loads), an undefined variable, or an
//! evaluation error.

use std::sync::OnceLock;

use base64::Engine as _;
use minijinja::value::{Serde, ValueKind};
use minijinja::{Environment, Error, ErrorKind, State, UndefinedBehavior, Value as J};
use serde_json::{Map, Value};

/// The one environment: Ansible's filters, tests and methods; undefined variables are errors
/// (as in Ansible), except under `default` and `is defined`.
pub fn env() -> &'static Environment<'static> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        // Ansible's templar: blocks trimmed, a template's last newline kept.
        let syntax = minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .keep_trailing_newline(true)
            .build()
            .expect("the default delimiters");
        env.set_syntax(syntax);
        env.set_unknown_method_callback(method);
        add_filters(&mut env);
        add_tests(&mut env);
        env
    })
}

fn add_filters(env: &mut Environment<'static>) {
    env.add_filter("int", |v: J| ansible_int(&v));
    env.add_filter("bool", |v: J| ansible_bool(&v));
    env.add_filter("to_json", |v: J| serde_json::to_string(&v).map_err(invalid));
    env.add_filter("from_json", |s: &str| {
        serde_json::from_str::<Value>(s)
            .map(|v| J::from(Serde(v)))
            .map_err(invalid)
    });
    env.add_filter("b64decode", |s: &str| {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(s.trim())
            .map_err(invalid)?;
        Ok::<_, Error>(String::from_utf8_lossy(&bytes).into_owned())
    });
    env.add_filter("b64encode", |s: &str| {
        base64::engine::general_purpose::STANDARD.encode(s)
    });
    env.add_filter("regex_search", |s: &str, re: &str| {
        Ok::<_, Error>(
            regex(re)?
                .find(s)
                .map_or(J::from(()), |m| J::from(m.as_str())),
        )
    });
    env.add_filter("regex_replace", |s: &str, re: &str, with: Option<&str>| {
        let with = python_groups(with.unwrap_or(""));
        Ok::<_, Error>(regex(re)?.replace_all(s, with.as_str()).into_owned())
    });
}

fn add_tests(env: &mut Environment<'static>) {
    let search = |s: &str, re: &str| Ok::<_, Error>(regex(re)?.is_match(s));
    env.add_test("search", search);
    env.add_test("regex", search);
    env.add_test("match", |s: &str, re: &str| {
        Ok::<_, Error>(regex(&format!("^(?:{re})"))?.is_match(s))
    });
    env.add_test("undefined", |v: J| v.is_undefined());
    for name in ["failed", "failure"] {
        env.add_test(name, |v: J| flag(&v, "failed"));
    }
    for name in ["succeeded", "success", "successful"] {
        env.add_test(name, |v: J| !flag(&v, "failed"));
    }
    for name in ["changed", "change"] {
        env.add_test(name, |v: J| flag(&v, "changed"));
    }
    for name in ["skipped", "skip"] {
        env.add_test(name, |v: J| flag(&v, "skipped"));
    }
    env.add_test("version", |a: &str, b: &str, op: Option<&str>| {
        version_test(a, b, op.unwrap_or("eq"))
    });
    env.add_test("version_compare", |a: &str, b: &str, op: Option<&str>| {
        version_test(a, b, op.unwrap_or("eq"))
    });
}

fn flag(v: &J, key: &str) -> bool {
    v.get_attr(key).map(|f| f.is_true()).unwrap_or(false)
}

fn invalid(e: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::InvalidOperation, e.to_string())
}

fn regex(re: &str) -> Result<regex::Regex, Error> {
    regex::Regex::new(re).map_err(|e| invalid(format!("bad regular expression {re:?}: {e}")))
}

/// Python's `\1` and `\g<name>` in a replacement, as the regex crate writes them (`${1}`).
fn python_groups(with: &str) -> String {
    let groups = regex::Regex::new(r"\\(\d+)|\\g<(\w+)>").expect("static regex");
    let escaped = with.replace('$', "$$");
    groups
        .replace_all(&escaped, |c: &regex::Captures| {
            format!("${{{}}}", c.get(1).or(c.get(2)).map_or("", |m| m.as_str()))
        })
        .into_owned()
}

/// Ansible's `int`: numbers truncated, numeric text parsed, anything else 0.
fn ansible_int(v: &J) -> J {
    if let Some(i) = v.as_i64() {
        return J::from(i);
    }
    let text = match v.kind() {
        ValueKind::Bool => return J::from(i64::from(v.is_true())),
        ValueKind::Number => v.to_string(),
        ValueKind::String => v.as_str().unwrap_or("").trim().to_string(),
        _ => return J::from(0),
    };
    text.parse::<i64>()
        .ok()
        .or_else(|| {
            text.parse::<f64>()
                .ok()
                .filter(|f| f.is_finite())
                .map(|f| f.trunc() as i64)
        })
        .map_or(J::from(0), J::from)
}

/// Ansible's `bool`: `yes`, `on`, `true`, `1` (any case) are true.
fn ansible_bool(v: &J) -> bool {
    match v.kind() {
        ValueKind::Bool => v.is_true(),
        ValueKind::Number => v.as_i64() == Some(1),
        ValueKind::String => {
            let s = v.as_str().unwrap_or("").trim().to_ascii_lowercase();
            matches!(s.as_str(), "yes" | "on" | "true" | "1" | "y" | "t")
        }
        _ => false,
    }
}

fn version_test(a: &str, b: &str, op: &str) -> Result<bool, Error> {
    let parts = |s: &str| -> Vec<u64> {
        s.split(|c: char| !c.is_ascii_digit())
            .filter(|p| !p.is_empty())
            .filter_map(|p| p.parse().ok())
            .collect()
    };
    let ord = parts(a).cmp(&parts(b));
    use std::cmp::Ordering::*;
    Ok(match op {
        "eq" | "==" | "=" => ord == Equal,
        "ne" | "!=" | "<>" => ord != Equal,
        "lt" | "<" => ord == Less,
        "le" | "<=" => ord != Greater,
        "gt" | ">" => ord == Greater,
        "ge" | ">=" => ord != Less,
        other => return Err(invalid(format!("version test: unknown operator {other:?}"))),
    })
}

/// Python's str and dict methods that playbooks call.
fn method(_: &mut State, value: &J, name: &str, args: &[J]) -> Result<J, Error> {
    match value.kind() {
        ValueKind::String => str_method(value.as_str().unwrap_or(""), name, args),
        ValueKind::Map => map_method(value, name, args),
        _ => Err(Error::new(
            ErrorKind::UnknownMethod,
            format!("{} has no method {name}", value.kind()),
        )),
    }
}

fn arg_str(args: &[J], i: usize) -> Option<&str> {
    args.get(i)
        .filter(|a| !a.is_none() && !a.is_undefined())
        .and_then(|a| a.as_str())
}

fn str_method(s: &str, name: &str, args: &[J]) -> Result<J, Error> {
    let chars = arg_str(args, 0);
    let trim_set = |c: char| chars.map_or(c.is_whitespace(), |set| set.contains(c));
    Ok(match name {
        "split" => J::from(split(s, arg_str(args, 0), args.get(1).and_then(J::as_i64))),
        "strip" => J::from(s.trim_matches(trim_set)),
        "lstrip" => J::from(s.trim_start_matches(trim_set)),
        "rstrip" => J::from(s.trim_end_matches(trim_set)),
        "startswith" => J::from(s.starts_with(chars.unwrap_or(""))),
        "endswith" => J::from(s.ends_with(chars.unwrap_or(""))),
        "replace" => J::from(s.replace(chars.unwrap_or(""), arg_str(args, 1).unwrap_or(""))),
        "lower" => J::from(s.to_lowercase()),
        "upper" => J::from(s.to_uppercase()),
        "splitlines" => J::from(s.lines().map(str::to_string).collect::<Vec<_>>()),
        "find" => J::from(s.find(chars.unwrap_or("")).map_or(-1, |i| i as i64)),
        _ => {
            return Err(Error::new(
                ErrorKind::UnknownMethod,
                format!("str has no method {name}"),
            ))
        }
    })
}

/// Python's `str.split(sep=None, maxsplit=-1)`.
fn split(s: &str, sep: Option<&str>, max: Option<i64>) -> Vec<String> {
    let max = max.filter(|m| *m >= 0).map(|m| m as usize);
    match sep {
        Some(sep) => match max {
            Some(m) => s.splitn(m + 1, sep).map(str::to_string).collect(),
            None => s.split(sep).map(str::to_string).collect(),
        },
        None => {
            let mut out: Vec<String> = Vec::new();
            let mut rest = s.trim_start();
            while !rest.is_empty() {
                if max.is_some_and(|m| out.len() == m) {
                    out.push(rest.trim_end().to_string());
                    break;
                }
                let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
                out.push(rest[..end].to_string());
                rest = rest[end..].trim_start();
            }
            out
        }
    }
}

fn map_method(map: &J, name: &str, args: &[J]) -> Result<J, Error> {
    let keys = || map.try_iter().map(|it| it.collect::<Vec<J>>());
    Ok(match name {
        "get" => {
            let key = args.first().cloned().unwrap_or_default();
            match map.get_item(&key) {
                Ok(v) if !v.is_undefined() => v,
                _ => args.get(1).cloned().unwrap_or(J::from(())),
            }
        }
        "keys" => J::from(keys()?),
        "values" => J::from(
            keys()?
                .iter()
                .map(|k| map.get_item(k).unwrap_or_default())
                .collect::<Vec<_>>(),
        ),
        "items" => J::from(
            keys()?
                .into_iter()
                .map(|k| {
                    let v = map.get_item(&k).unwrap_or_default();
                    J::from(vec![k, v])
                })
                .collect::<Vec<_>>(),
        ),
        _ => {
            return Err(Error::new(
                ErrorKind::UnknownMethod,
                format!("dict has no method {name}"),
            ))
        }
    })
}

/// The expression inside a string that is exactly `{{ expr }}`.
pub fn whole_expression(s: &str) -> Option<&str> {
    let inner = s.trim().strip_prefix("{{")?.strip_suffix("}}")?;
    (!inner.contains("{{") && !inner.contains("}}")).then(|| inner.trim())
}

/// Whether a string holds Jinja (`{{`, `{%` or `{#`).
pub fn is_template(s: &str) -> bool {
    s.contains("{{") || s.contains("{%") || s.contains("{#")
}

/// Why an expression or a template gave no value. Callers branch on the kind: a syntax error
/// is bad input the loader refuses before any host is touched, an undefined variable is what
/// `debug: var=` reports as not defined, the rest fail the task. The message is minijinja's,
/// one line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ExprError {
    /// The text does not parse as Jinja.
    #[error("{detail}")]
    Syntax {
        /// What and where in the text.
        detail: String,
    },
    /// It uses a variable or attribute that is not defined.
    #[error("{detail}")]
    Undefined {
        /// Which.
        detail: String,
    },
    /// Evaluating it failed (a filter's error, a type mismatch, a value that is not data).
    #[error("{detail}")]
    Eval {
        /// Why.
        detail: String,
    },
}

impl From<Error> for ExprError {
    fn from(e: Error) -> Self {
        let detail = describe(&e);
        match e.kind() {
            ErrorKind::SyntaxError => ExprError::Syntax { detail },
            ErrorKind::UndefinedError => ExprError::Undefined { detail },
            _ => ExprError::Eval { detail },
        }
    }
}

/// One of a task's conditionals that did not evaluate, quoted in the message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{expr:?}: {source}")]
pub struct ConditionError {
    /// The conditional as written.
    pub expr: String,
    /// Why.
    #[source]
    pub source: ExprError,
}

/// Compiles `s` (a conditional's expression or a template string) to check its syntax.
pub fn check_syntax(s: &str, conditional: bool) -> Result<(), ExprError> {
    let env = env();
    let result = if conditional {
        env.compile_expression(whole_expression(s).unwrap_or(s))
            .map(drop)
    } else if !is_template(s) {
        Ok(())
    } else if let Some(inner) = whole_expression(s) {
        env.compile_expression(inner).map(drop)
    } else {
        env.template_from_str(s).map(drop)
    };
    result.map_err(ExprError::from)
}

/// One line for a minijinja error.
pub fn describe(e: &Error) -> String {
    let mut msg = e.kind().to_string();
    if let Some(detail) = e.detail() {
        msg.push_str(": ");
        msg.push_str(detail);
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        source = s.source();
    }
    msg
}

/// Variables as minijinja sees them.
pub fn context(vars: &Map<String, Value>) -> J {
    J::from(Serde(vars))
}

/// A conditional (`when`, `changed_when`, `failed_when`, `until`, `assert`'s `that`), as
/// Ansible evaluates it: an expression (`{{ }}` around it is tolerated), true or false.
pub fn truth(expr: &str, ctx: &J) -> Result<bool, ExprError> {
    let inner = whole_expression(expr).unwrap_or(expr);
    let value = env().compile_expression(inner)?.eval(ctx.clone())?;
    Ok(match value.as_str() {
        Some(s) => ansible_bool(&J::from(s)),
        None => value.is_true(),
    })
}

/// Every expression true; the first that does not evaluate is the error.
pub fn all_true(exprs: &[String], ctx: &J) -> Result<bool, ConditionError> {
    for e in exprs {
        let holds = truth(e, ctx).map_err(|source| ConditionError {
            expr: e.clone(),
            source,
        })?;
        if !holds {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Templates a value the way Ansible does: every string rendered, recursively; a string that
/// is exactly `{{ expr }}` becomes the expression's value with its type.
pub fn template(value: &Value, ctx: &J) -> Result<Value, ExprError> {
    Ok(match value {
        Value::String(s) => template_str(s, ctx)?,
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| template(v, ctx))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| Ok((k.clone(), template(v, ctx)?)))
                .collect::<Result<_, ExprError>>()?,
        ),
        other => other.clone(),
    })
}

fn template_str(s: &str, ctx: &J) -> Result<Value, ExprError> {
    if let Some(inner) = whole_expression(s) {
        let value = env().compile_expression(inner)?.eval(ctx.clone())?;
        if value.is_undefined() {
            return Err(ExprError::Undefined {
                detail: format!("'{inner}' is undefined"),
            });
        }
        return serde_json::to_value(&value).map_err(|e| ExprError::Eval {
            detail: e.to_string(),
        });
    }
    if !is_template(s) {
        return Ok(Value::String(s.to_string()));
    }
    render(s, ctx).map(Value::String)
}

/// Renders a template's text (the `template` module; strings in arguments).
pub fn render(text: &str, ctx: &J) -> Result<String, ExprError> {
    Ok(env().render_str(text, ctx.clone())?)
}

/// A string for a message: the value's text when it is a string, else its JSON.
pub fn display(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctx(v: Value) -> J {
        context(v.as_object().unwrap())
    }

    #[test]
    fn the_shipped_playbooks_expressions_evaluate() {
        let c = ctx(json!({
            "gpu_pci_id": "10de:2335",
            "item": "0000:9a:00.0 nvidia 16 16",
            "sources": {"stdout_lines": ["10.0.0.1", "10.0.0.2"]},
            "journal": {"stdout_lines": ["ok", "NVRM: Xid 79", "mlx5_core 0000: fail x"]},
            "mtu": {"stdout": "9000"},
            "machine_mtu": 9000,
        }));
        assert_eq!(
            render("0x{{ gpu_pci_id.split(':')[0] }}", &c).unwrap(),
            "0x10de"
        );
        assert!(truth("item.split(' ')[1] == 'nvidia'", &c).unwrap());
        assert!(truth("item.split(' ')[2] == item.split(' ')[3]", &c).unwrap());
        let c2 =
            ctx(json!({"item": "10.0.0.2", "sources": {"stdout_lines": ["10.0.0.1", "10.0.0.2"]}}));
        assert!(truth("item in sources.stdout_lines", &c2).unwrap());
        let faults = "journal.stdout_lines | select('search', 'Xid|Hardware Error|EDAC|mlx5_core.*(fail|error)') | list | length == 0";
        assert!(!truth(faults, &c).unwrap());
        assert!(truth("mtu.stdout | int == machine_mtu | int", &c).unwrap());
        assert!(!truth("mtu.stdout | int == 1500", &c).unwrap());
    }

    #[test]
    fn whole_expressions_keep_their_type_and_methods_work() {
        let c = ctx(json!({"l": [3, 1, 3], "d": {"a": 1}, "s": "  x,y  "}));
        assert_eq!(
            template(&json!("{{ l | unique | list }}"), &c).unwrap(),
            json!([3, 1])
        );
        assert_eq!(
            template(&json!("n={{ l | length }}"), &c).unwrap(),
            json!("n=3")
        );
        assert_eq!(
            template(&json!("{{ d.get('b', 7) }}"), &c).unwrap(),
            json!(7)
        );
        assert_eq!(
            template(&json!("{{ s.strip().split(',') }}"), &c).unwrap(),
            json!(["x", "y"])
        );
        assert_eq!(
            template(&json!("{{ 'a b  c'.split() }}"), &c).unwrap(),
            json!(["a", "b", "c"])
        );
        assert_eq!(
            template(&json!("{{ d.items() | list }}"), &c).unwrap(),
            json!([["a", 1]])
        );
        assert_eq!(
            template(
                &json!("{{ 'ab12' | regex_replace('(\\\\d)', '<\\\\1>') }}"),
                &c
            )
            .unwrap(),
            json!("ab<1><2>")
        );
        assert_eq!(template(&json!("{{ 'x' | int }}"), &c).unwrap(), json!(0));
        assert!(truth(
            "'yes' | bool and missing is undefined and '1.10' is version('1.9', '>')",
            &c
        )
        .unwrap());
        assert!(template(&json!("{{ missing }}"), &c).is_err());
        assert_eq!(
            template(&json!("{{ missing | default('d') }}"), &c).unwrap(),
            json!("d")
        );
    }

    #[test]
    fn a_caller_tells_bad_syntax_from_an_undefined_variable_from_a_failed_evaluation() {
        let c = ctx(json!({"n": 3, "s": "x"}));
        assert!(
            matches!(truth("n ==", &c), Err(ExprError::Syntax { .. })),
            "{:?}",
            truth("n ==", &c)
        );
        assert!(matches!(
            template(&json!("{{ missing }}"), &c),
            Err(ExprError::Undefined { .. })
        ));
        assert!(matches!(
            render("{{ missing.part }}", &c),
            Err(ExprError::Undefined { .. })
        ));
        let bad_regex = template(&json!("{{ s | regex_search('(') }}"), &c).unwrap_err();
        assert!(matches!(bad_regex, ExprError::Eval { .. }), "{bad_regex:?}");
        assert!(
            bad_regex.to_string().contains("bad regular expression"),
            "{bad_regex}"
        );
        let e = all_true(&["n == 3".into(), "n > missing".into()], &c).unwrap_err();
        assert_eq!(e.expr, "n > missing");
        assert!(matches!(e.source, ExprError::Undefined { .. }), "{e:?}");
        assert!(e.to_string().starts_with("\"n > missing\": "), "{e}");
    }

    #[test]
    fn bad_syntax_is_found_without_variables() {
        assert!(matches!(
            check_syntax("x ==", true),
            Err(ExprError::Syntax { .. })
        ));
        assert!(matches!(
            check_syntax("a {{ b", false),
            Err(ExprError::Syntax { .. })
        ));
        assert!(check_syntax("x == 1", true).is_ok());
        assert!(check_syntax("{{ x }}", false).is_ok());
        assert!(check_syntax("plain", false).is_ok());
    }
}
