//! The modules the engine runs itself, touching no host: `debug`, `assert`, `fail`,
//! `set_fact`, reporting ok or failed as Ansible does.

use minijinja::Value as J;
use serde_json::{json, Map, Value};

use super::expr;
use crate::hostprep::modules::ModuleResult;

/// Runs engine module `module` with its arguments as written (templated here, each as its
/// module reads it). `Err` is a templating or evaluation error (the task fails with it).
pub(super) fn run(
    module: &str,
    args: &Map<String, Value>,
    ctx: &J,
) -> Result<ModuleResult, String> {
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
        other => Err(format!("{other} is not an engine module")),
    }
}

fn text(v: Option<&Value>, ctx: &J) -> Result<Option<String>, String> {
    v.map(|v| expr::template(v, ctx).map(|t| expr::display(&t)))
        .transpose()
}

fn debug(args: &Map<String, Value>, ctx: &J) -> Result<ModuleResult, String> {
    let mut r = ModuleResult::default();
    if let Some(var) = args.get("var").and_then(Value::as_str) {
        let value = expr::template(&json!(format!("{{{{ {var} }}}}")), ctx)
            .unwrap_or_else(|_| json!("VARIABLE IS NOT DEFINED!"));
        r.msg = Some(format!("{var}: {}", expr::display(&value)));
        r.data.insert(var.to_string(), value);
    } else {
        r.msg = Some(text(args.get("msg"), ctx)?.unwrap_or_else(|| "Hello world!".into()));
    }
    Ok(r)
}

fn assert(args: &Map<String, Value>, ctx: &J) -> Result<ModuleResult, String> {
    let that: Vec<String> = match args.get("that") {
        Some(Value::Array(items)) => items.iter().map(expr::display).collect(),
        Some(one) => vec![expr::display(one)],
        None => return Err("assert needs that:".into()),
    };
    let mut r = ModuleResult::default();
    for cond in &that {
        if !expr::truth(cond, ctx).map_err(|e| format!("assert {cond:?}: {e}"))? {
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

fn set_fact(args: &Map<String, Value>, ctx: &J) -> Result<ModuleResult, String> {
    let mut facts = Map::new();
    for (k, v) in args.iter().filter(|(k, _)| *k != "cacheable") {
        facts.insert(
            k.clone(),
            expr::template(v, ctx).map_err(|e| format!("set_fact {k}: {e}"))?,
        );
    }
    let mut r = ModuleResult::default();
    r.data.insert("ansible_facts".into(), Value::Object(facts));
    Ok(r)
}
