//! The modules the engine runs itself, touching no host: `debug`, `assert`, `fail`,
//! `set_fact`, reporting ok or failed as Ansible does. An expression of theirs that does not
//! evaluate is an [`EngineError`] (the task fails with it), except an undefined `debug: var`,
//! which Ansible reports as not defined.

use minijinja::Value as J;
use serde_json::{json, Map, Value};

use super::expr::{self, ExprError};
use crate::hostprep::modules::{ArgError, ModuleResult};

/// Why an engine module gave no result: the task fails with this message.
#[derive(Debug, thiserror::Error)]
pub(super) enum EngineError {
    /// A templated argument (`msg`, `fail_msg`, ...) did not render.
    #[error(transparent)]
    Template(#[from] ExprError),
    /// One of `assert`'s conditions did not evaluate.
    #[error("assert {that:?}: {source}")]
    Assert {
        /// The condition.
        that: String,
        /// Why.
        source: ExprError,
    },
    /// A fact's value did not render.
    #[error("set_fact {name}: {source}")]
    SetFact {
        /// The fact.
        name: String,
        /// Why.
        source: ExprError,
    },
    /// The arguments do not fit (the loader refuses them first).
    #[error(transparent)]
    Args(#[from] ArgError),
    /// Not one of the engine's modules (a caller's mistake).
    #[error("{0} is not an engine module")]
    NotEngine(String),
}

/// Runs engine module `module` with its arguments as written (templated here, each as its
/// module reads it).
pub(super) fn run(
    module: &str,
    args: &Map<String, Value>,
    ctx: &J,
) -> Result<ModuleResult, EngineError> {
    match module {
        "debug" => debug(args, ctx),
        "assert" => assert(args, ctx),
        "fail" => {
            let msg = text(args.get("msg"), ctx)?
                .unwrap_or_else(|| "Failed as requested from task".into());
            Ok(ModuleResult {
                failed: true,
                msg: Some(msg),
                ..ModuleResult::default()
            })
        }
        "set_fact" => set_fact(args, ctx),
        other => Err(EngineError::NotEngine(other.to_string())),
    }
}

fn text(v: Option<&Value>, ctx: &J) -> Result<Option<String>, ExprError> {
    v.map(|v| expr::template(v, ctx).map(|t| expr::display(&t)))
        .transpose()
}

fn debug(args: &Map<String, Value>, ctx: &J) -> Result<ModuleResult, EngineError> {
    let mut r = ModuleResult::default();
    if let Some(var) = args.get("var").and_then(Value::as_str) {
        // As Ansible's debug: an undefined variable is reported, any other error fails.
        let value = match expr::template(&json!(format!("{{{{ {var} }}}}")), ctx) {
            Ok(value) => value,
            Err(ExprError::Undefined { .. }) => json!("VARIABLE IS NOT DEFINED!"),
            Err(e) => return Err(e.into()),
        };
        r.msg = Some(format!("{var}: {}", expr::display(&value)));
        r.data.insert(var.to_string(), value);
    } else {
        r.msg = Some(text(args.get("msg"), ctx)?.unwrap_or_else(|| "Hello world!".into()));
    }
    Ok(r)
}

fn assert(args: &Map<String, Value>, ctx: &J) -> Result<ModuleResult, EngineError> {
    let that: Vec<String> = match args.get("that") {
        Some(Value::Array(items)) => items.iter().map(expr::display).collect(),
        Some(one) => vec![expr::display(one)],
        None => {
            return Err(ArgError::Missing {
                module: "assert",
                name: "that",
                accepted: super::parse::ASSERT_ARGS.to_vec(),
            }
            .into())
        }
    };
    let mut r = ModuleResult::default();
    for cond in &that {
        let holds = expr::truth(cond, ctx).map_err(|source| EngineError::Assert {
            that: cond.clone(),
            source,
        })?;
        if !holds {
            let custom = args.get("fail_msg").or_else(|| args.get("msg"));
            r.failed = true;
            r.msg = Some(text(custom, ctx)?.unwrap_or_else(|| "Assertion failed".into()));
            r.data.insert("assertion".into(), json!(cond));
            r.data.insert("evaluated_to".into(), json!(false));
            return Ok(r);
        }
    }
    r.msg =
        Some(text(args.get("success_msg"), ctx)?.unwrap_or_else(|| "All assertions passed".into()));
    Ok(r)
}

fn set_fact(args: &Map<String, Value>, ctx: &J) -> Result<ModuleResult, EngineError> {
    let mut facts = Map::new();
    for (k, v) in args.iter().filter(|(k, _)| *k != "cacheable") {
        let value = expr::template(v, ctx).map_err(|source| EngineError::SetFact {
            name: k.clone(),
            source,
        })?;
        facts.insert(k.clone(), value);
    }
    let mut r = ModuleResult::default();
    r.data.insert("ansible_facts".into(), Value::Object(facts));
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    /// `debug: var=` reported every error as "not defined", a bad filter too: only an
    /// undefined variable is, as in Ansible; anything else fails the task.
    #[test]
    fn debug_var_reports_only_an_undefined_variable_as_not_defined() {
        let ctx = expr::context(&args(json!({"s": "x"})));
        let r = run("debug", &args(json!({"var": "missing"})), &ctx).unwrap();
        assert_eq!(r.msg.as_deref(), Some("missing: VARIABLE IS NOT DEFINED!"));
        let e = run(
            "debug",
            &args(json!({"var": "s | regex_search('(')"})),
            &ctx,
        )
        .unwrap_err();
        assert!(
            matches!(e, EngineError::Template(ExprError::Eval { .. })),
            "{e:?}"
        );
    }

    #[test]
    fn an_assert_that_does_not_evaluate_names_the_condition() {
        let ctx = expr::context(&args(json!({"n": 1})));
        let e = run(
            "assert",
            &args(json!({"that": ["n == 1", "n > missing"]})),
            &ctx,
        )
        .unwrap_err();
        assert!(
            matches!(e, EngineError::Assert { ref that, source: ExprError::Undefined { .. } } if that == "n > missing"),
            "{e:?}"
        );
        assert!(e.to_string().starts_with("assert \"n > missing\": "), "{e}");
    }
}
