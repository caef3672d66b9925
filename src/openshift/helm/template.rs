//! The part of Go templates bootstrap evaluates (2. of the module documentation of `helm`):
//! value expressions against the default values and Chart.yaml, pipelines through a few
//! string functions; every other action is left as a hole to report, never guessed.

use super::chart::{scalar, Chart};
use serde_json::Value;

/// What template expressions are evaluated against.
pub(super) struct Context_<'a> {
    pub(super) values: &'a Value,
    pub(super) chart: &'a Chart,
}

/// A template with its value expressions evaluated; `holes` are the expressions that were
/// not, left in the text as `__BOOTSTRAP_HOLE_<n>__`.
pub(super) struct Rendered {
    pub(super) text: String,
    pub(super) holes: Vec<String>,
}

pub(super) const HOLE: &str = "__BOOTSTRAP_HOLE_";

/// Evaluates what it can of a template (see the module documentation).
pub(super) fn render_lite(text: &str, ctx: &Context_) -> Rendered {
    let comments = regex::Regex::new(r"(?s)\{\{-?\s*/\*.*?\*/\s*-?\}\}").expect("valid regex");
    let text = comments.replace_all(text, "");
    let mut holes = Vec::new();
    let mut out = String::new();
    for line in text.lines() {
        let mut rest = line;
        let mut rendered = String::new();
        let mut literal = false;
        while let Some(start) = rest.find("{{") {
            let before = &rest[..start];
            literal |= !before.trim().is_empty();
            rendered.push_str(before);
            let Some(len) = rest[start..].find("}}") else {
                // An action spanning lines: keep the rest as a hole.
                holes.push(rest[start..].to_string());
                rendered.push_str(&format!("{HOLE}{}__", holes.len() - 1));
                rest = "";
                break;
            };
            let action = &rest[start + 2..start + len];
            rest = &rest[start + len + 2..];
            let inner = action.trim_start_matches('-').trim_end_matches('-').trim();
            match evaluate(inner, ctx) {
                Some(v) => rendered.push_str(&v),
                None => {
                    holes.push(format!("{{{{{action}}}}}"));
                    rendered.push_str(&format!("{HOLE}{}__", holes.len() - 1));
                }
            }
        }
        literal |= !rest.trim().is_empty();
        rendered.push_str(rest);
        // A line of actions alone is control flow or a whole block (toYaml): leave it out.
        if literal {
            out.push_str(&rendered);
            out.push('\n');
        }
    }
    Rendered { text: out, holes }
}

/// A value expression's result, or `None` for anything else.
fn evaluate(expr: &str, ctx: &Context_) -> Option<String> {
    let mut value: Option<Value> = None;
    for (i, stage) in split_pipeline(expr)?.into_iter().enumerate() {
        let words = split_words(&stage)?;
        let (head, args) = words.split_first()?;
        let mut args: Vec<Value> = args.iter().map(|a| term(a, ctx)).collect::<Option<_>>()?;
        if i > 0 {
            args.push(value.take()?);
        }
        value = Some(match head.as_str() {
            "default" if args.len() == 2 => {
                if truthy(&args[1]) {
                    args[1].clone()
                } else {
                    args[0].clone()
                }
            }
            "quote" | "squote" | "toString" | "trim" | "lower" | "upper" if args.len() == 1 => {
                let s = scalar(&args[0]).unwrap_or_default();
                Value::String(match head.as_str() {
                    "trim" => s.trim().to_string(),
                    "lower" => s.to_lowercase(),
                    "upper" => s.to_uppercase(),
                    _ => s,
                })
            }
            _ if args.is_empty() && i == 0 => term(head, ctx)?,
            _ => return None,
        });
    }
    match value? {
        Value::Null => Some(String::new()),
        v => scalar(&v),
    }
}

/// Whether Go templates count a value as set (`default` replaces the rest).
fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::String(s) => !s.is_empty(),
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// One operand: `.Values.a.b`, `$.Values.a`, `.Chart.X`, a string literal, a number or a
/// boolean.
fn term(word: &str, ctx: &Context_) -> Option<Value> {
    if let Some(s) = word.strip_prefix('"').and_then(|w| w.strip_suffix('"')) {
        return Some(Value::String(s.replace("\\\"", "\"")));
    }
    if let Some(s) = word.strip_prefix('`').and_then(|w| w.strip_suffix('`')) {
        return Some(Value::String(s.to_string()));
    }
    if let Ok(n) = word.parse::<i64>() {
        return Some(Value::from(n));
    }
    if word == "true" || word == "false" {
        return Some(Value::Bool(word == "true"));
    }
    let path = word.strip_prefix('$').unwrap_or(word);
    if let Some(rest) = path.strip_prefix(".Values") {
        let mut v = ctx.values;
        for key in rest.split('.').filter(|k| !k.is_empty()) {
            match v.get(key) {
                Some(next) => v = next,
                None => return Some(Value::Null),
            }
        }
        return Some(v.clone());
    }
    match path {
        ".Chart.AppVersion" => Some(
            ctx.chart
                .app_version()
                .map(Value::String)
                .unwrap_or(Value::Null),
        ),
        ".Chart.Version" => Some(Value::String(ctx.chart.version().to_string())),
        ".Chart.Name" => Some(Value::String(ctx.chart.name().to_string())),
        _ => None,
    }
}

/// Pipeline stages, split at `|` outside quotes; `None` for parentheses (not evaluated).
fn split_pipeline(expr: &str) -> Option<Vec<String>> {
    let mut stages = vec![String::new()];
    let mut quote: Option<char> = None;
    for c in expr.chars() {
        match (quote, c) {
            (None, '"' | '`') => {
                quote = Some(c);
                stages.last_mut()?.push(c);
            }
            (Some(q), _) if c == q => {
                quote = None;
                stages.last_mut()?.push(c);
            }
            (None, '|') => stages.push(String::new()),
            (None, '(' | ')') => return None,
            _ => stages.last_mut()?.push(c),
        }
    }
    Some(stages.into_iter().map(|s| s.trim().to_string()).collect())
}

/// Words of one stage, string literals kept whole.
fn split_words(stage: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    for c in stage.chars() {
        match (quote, c) {
            (None, '"' | '`') => {
                quote = Some(c);
                cur.push(c);
            }
            (Some(q), _) if c == q => {
                quote = None;
                cur.push(c);
            }
            (None, c) if c.is_whitespace() => {
                if !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
            }
            _ => cur.push(c),
        }
    }
    if quote.is_some() {
        return None;
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    (!words.is_empty()).then_some(words)
}
