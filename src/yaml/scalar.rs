//! Which plain (unquoted) scalars Go's YAML readers take for something other than a string:
//! the one list, used both when bootstrap writes (`emit.rs` pins that serde-saphyr quotes every
//! such string) and when `bootstrap validate` reads an installer file (a plain `no` where the
//! installer expects a string is refused with the quoting fix).
//!
//! The installer reads its files with sigs.k8s.io/yaml: go-yaml v2 decodes the YAML into
//! generic values by v2's `resolve` (YAML 1.1 booleans, base-0 integers, floats, null), then
//! the values are converted to JSON, a boolean or number bound for a string field becoming its
//! text (`no` -> "false", `0123` -> "83") and null leaving the field empty. The rules below
//! follow go-yaml v2's resolve.go (branch v2) exactly: booleans are only the listed spellings
//! (`y`/`n` included, `yEs` not), base-60 numbers (`1:20`) and timestamps (`2001-01-01`, kept
//! as a string when decoded into a generic value) stay strings, `0b`/`0o` prefixes and `_`
//! separators are read as integers, `.inf` and `.nan` as floats.

use super::{Loaded, Problem};
use serde::Serialize;
use serde_json::Value;
use std::collections::HashSet;
use std::fmt;

/// Where a file's string fields are, beyond those its serde type declares as strings.
pub struct StringFields {
    /// Paths inside generic values (an NMState `networkConfig`) where the installer expects a
    /// string.
    pub free_form: fn(&str) -> bool,
    /// Paths whose value must not be printed (a BMC password): the message leaves it out.
    pub secret: fn(&str) -> bool,
}

/// Every plain scalar of `file` that the installer reads as a boolean, number or null where it
/// expects a string: a field the serde type reads as a string (serde-saphyr turns a plain `no`
/// into "no" there, so the typed value alone cannot tell), or a `fields.free_form` path.
///
/// Read without positions, the file has no record of quoting: any string that would need
/// quotes is reported without a place, so the caller reads the file again with them.
pub fn unquoted_non_strings<T: Serialize>(file: &Loaded<T>, fields: &StringFields) -> Vec<Problem> {
    let Ok(json) = serde_json::to_value(&file.value) else {
        return Vec::new();
    };
    let mut leaves = Vec::new();
    collect_leaves(&json, String::new(), &mut leaves);
    if file.index.is_empty() {
        let suspect = leaves.iter().any(|(path, v)| match v {
            Value::String(s) => !s.is_empty() && go_yaml_v2_reads(s).is_some(),
            _ => (fields.free_form)(path),
        });
        return if suspect {
            vec![Problem::new(
                None,
                "",
                "a string may be written unquoted where the installer reads a boolean or number",
            )]
        } else {
            Vec::new()
        };
    }
    let strings: HashSet<&str> = leaves
        .iter()
        .filter(|(_, v)| v.is_string())
        .map(|(p, _)| p.as_str())
        .collect();
    let mut out = Vec::new();
    for entry in file.index.entries() {
        let Some(raw) = entry.plain.as_deref() else {
            continue;
        };
        let Some(read) = go_yaml_v2_reads(raw) else {
            continue;
        };
        let path = entry.path.as_str();
        if !strings.contains(path) && !(fields.free_form)(path) {
            continue;
        }
        let text = (!(fields.secret)(path)).then_some(raw);
        out.push(file.problem(path, quoting_fix(text, read)));
    }
    out
}

/// The scalar leaves of `value` with their paths, written as the position index writes them.
fn collect_leaves<'a>(value: &'a Value, path: String, out: &mut Vec<(String, &'a Value)>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                let child = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                collect_leaves(v, child, out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                collect_leaves(v, format!("{path}[{i}]"), out);
            }
        }
        _ => out.push((path, value)),
    }
}

/// What go-yaml v2 reads a plain scalar as, when not a string.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum GoScalar {
    /// `yes`, `no`, `on`, `off`, `y`, `n`, `true`, `false` in their listed spellings.
    Bool(bool),
    /// An integer in Go's base-0 syntax (`0123` is octal, `0x1F`, `0b101`, `0o17`, `1_000`).
    Int(i128),
    /// A float (`1e3`, `.5`, `089`, `.inf`, `.nan`).
    Float(f64),
    /// `~`, `null`, `Null`, `NULL` (or nothing).
    Null,
}

impl GoScalar {
    /// What a string field receives after sigs.k8s.io/yaml's JSON conversion.
    fn consequence(self) -> String {
        match self {
            GoScalar::Bool(b) => format!("and uses \"{b}\" instead"),
            GoScalar::Int(i) => format!("and uses \"{i}\" instead"),
            GoScalar::Float(f) if f.is_finite() => "and uses the number's Go text instead".into(),
            GoScalar::Float(_) => "and cannot convert the file to JSON".into(),
            GoScalar::Null => "and leaves the field empty".into(),
        }
    }
}

impl fmt::Display for GoScalar {
    /// "the boolean false", "the number 83", "null".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GoScalar::Bool(b) => write!(f, "the boolean {b}"),
            GoScalar::Int(i) => write!(f, "the number {i}"),
            GoScalar::Float(x) if x.is_nan() => f.write_str("the number NaN"),
            GoScalar::Float(x) if x.is_infinite() => f.write_str("an infinite number"),
            GoScalar::Float(x) => write!(f, "the number {x}"),
            GoScalar::Null => f.write_str("null"),
        }
    }
}

/// What go-yaml v2 reads the plain scalar `text` as, or `None` when it stays a string.
pub(crate) fn go_yaml_v2_reads(text: &str) -> Option<GoScalar> {
    match text {
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Some(GoScalar::Bool(true))
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Some(GoScalar::Bool(false))
        }
        "" | "~" | "null" | "Null" | "NULL" => return Some(GoScalar::Null),
        ".nan" | ".NaN" | ".NAN" => return Some(GoScalar::Float(f64::NAN)),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Some(GoScalar::Float(f64::INFINITY))
        }
        "-.inf" | "-.Inf" | "-.INF" => return Some(GoScalar::Float(f64::NEG_INFINITY)),
        _ => {}
    }
    match text.as_bytes()[0] {
        // Go's ParseFloat on the text as written.
        b'.' => go_underscores_ok(text)
            .then(|| go_float(&text.replace('_', ""), false))
            .flatten()
            .map(GoScalar::Float),
        b'0'..=b'9' | b'+' | b'-' => {
            // v2 drops every `_` before reading an integer or a YAML-style float.
            let plain = text.replace('_', "");
            go_int(&plain)
                .map(GoScalar::Int)
                .or_else(|| go_float(&plain, true).map(GoScalar::Float))
        }
        _ => None,
    }
}

/// Go's ParseFloat takes `_` only between digits.
fn go_underscores_ok(s: &str) -> bool {
    let b = s.as_bytes();
    (0..b.len()).all(|i| {
        b[i] != b'_'
            || (i > 0 && b[i - 1].is_ascii_digit() && b.get(i + 1).is_some_and(u8::is_ascii_digit))
    })
}

/// Go's `strconv.ParseInt(s, 0, 64)`, then `ParseUint(s, 0, 64)`: optional sign (ParseInt
/// only), base prefix `0x`, `0b`, `0o` or a leading `0` (octal), digits, in range.
fn go_int(s: &str) -> Option<i128> {
    let (negative, unsigned) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = unsigned.to_ascii_lowercase();
    let (radix, digits) = if let Some(d) = lower.strip_prefix("0x") {
        (16, d)
    } else if let Some(d) = lower.strip_prefix("0b") {
        (2, d)
    } else if let Some(d) = lower.strip_prefix("0o") {
        (8, d)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, &lower[1..])
    } else {
        (10, lower.as_str())
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = i128::from_str_radix(digits, radix).ok()?;
    let value = if negative { -magnitude } else { magnitude };
    let signed = i64::try_from(value).is_ok();
    let unsigned_ok =
        s.as_bytes()[0] != b'-' && s.as_bytes()[0] != b'+' && u64::try_from(value).is_ok();
    (signed || unsigned_ok).then_some(value)
}

/// A float as go-yaml v2 reads one: `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`
/// (with the sign only after the `_` were dropped; the `.` hint reads `.5` alone), finite.
fn go_float(s: &str, signed: bool) -> Option<f64> {
    let b = s.as_bytes();
    let mut i = 0;
    if signed && matches!(b.first(), Some(b'+' | b'-')) {
        i += 1;
    }
    let int_digits = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
    i += int_digits;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let frac_digits = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
        i += frac_digits;
        if int_digits == 0 && frac_digits == 0 {
            return None;
        }
    } else if int_digits == 0 {
        return None;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let exp_digits = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
        if exp_digits == 0 {
            return None;
        }
        i += exp_digits;
    }
    if i != b.len() {
        return None;
    }
    // Go's ParseFloat refuses a value out of range (then the scalar stays a string).
    s.parse::<f64>().ok().filter(|f| f.is_finite())
}

/// The message for a plain scalar `text` that go-yaml v2 reads as `read` where the installer
/// expects a string: the quoting fix first, then what happens without it. A secret (`None`)
/// is named by its kind only.
pub(crate) fn quoting_fix(text: Option<&str>, read: GoScalar) -> String {
    let Some(text) = text else {
        let kind = match read {
            GoScalar::Bool(_) => "a boolean",
            GoScalar::Int(_) | GoScalar::Float(_) => "a number",
            GoScalar::Null => "null",
        };
        return format!(
            "write the value in quotes: unquoted, the installer (Go's YAML 1.1 reader) reads it \
             as {kind}, not the string written"
        );
    };
    format!(
        "write \"{text}\" in quotes: unquoted, the installer (Go's YAML 1.1 reader) reads it as \
         {read} {}",
        read.consequence()
    )
}

/// Plain scalars and what go-yaml v2 reads them as (`None`: a string), from its resolve.go:
/// the cases both the reader's check and the writer's quoting are tested against.
#[cfg(test)]
pub(crate) const RESOLVE_CASES: &[(&str, Option<GoScalar>)] = {
    use GoScalar::*;
    &[
        ("no", Some(Bool(false))),
        ("No", Some(Bool(false))),
        ("NO", Some(Bool(false))),
        ("n", Some(Bool(false))),
        ("N", Some(Bool(false))),
        ("off", Some(Bool(false))),
        ("False", Some(Bool(false))),
        ("yes", Some(Bool(true))),
        ("y", Some(Bool(true))),
        ("on", Some(Bool(true))),
        ("ON", Some(Bool(true))),
        ("TRUE", Some(Bool(true))),
        ("~", Some(Null)),
        ("null", Some(Null)),
        ("NULL", Some(Null)),
        ("0123", Some(Int(83))),
        ("0x1F", Some(Int(31))),
        ("0b101", Some(Int(5))),
        ("-0b101", Some(Int(-5))),
        ("0o17", Some(Int(15))),
        ("1_000", Some(Int(1000))),
        ("+7", Some(Int(7))),
        ("1e3", Some(Float(1000.0))),
        (".5", Some(Float(0.5))),
        (".5_0", Some(Float(0.5))),
        ("._5", None),
        ("+.5", Some(Float(0.5))),
        ("1.", Some(Float(1.0))),
        ("089", Some(Float(89.0))),
        ("18446744073709551615", Some(Int(18446744073709551615))),
        ("99999999999999999999", Some(Float(1e20))),
        // Strings to go-yaml v2.
        ("yEs", None),
        ("nO", None),
        ("Y1", None),
        ("1:20", None),
        ("2001-01-01", None),
        ("802.3ad", None),
        ("1.2.3", None),
        ("1e", None),
        (".", None),
        ("-", None),
        ("0x", None),
        ("0xG", None),
        ("1e400", None),
        ("master-0", None),
        ("<<", None),
        ("NaN", None),
        ("inf", None),
    ]
};

#[cfg(test)]
mod tests {
    use super::*;

    /// go-yaml v2's resolve table, case by case: what the installer reads as a boolean,
    /// number or null, and the look-alikes it keeps as strings.
    #[test]
    fn plain_scalars_resolve_as_go_yaml_v2_does() {
        use GoScalar::*;
        let cases = RESOLVE_CASES;
        for (text, want) in cases {
            let got = go_yaml_v2_reads(text);
            match (got, want) {
                (Some(Float(a)), Some(Float(b))) => assert_eq!(a, *b, "{text}"),
                _ => assert_eq!(got, *want, "{text}"),
            }
        }
        assert!(matches!(go_yaml_v2_reads(".NaN"), Some(Float(f)) if f.is_nan()));
        assert_eq!(go_yaml_v2_reads("-.Inf"), Some(Float(f64::NEG_INFINITY)));
    }

    /// The message gives the fix and what the installer would get instead.
    #[test]
    fn the_fix_says_what_the_installer_would_use() {
        assert_eq!(
            quoting_fix(Some("no"), GoScalar::Bool(false)),
            "write \"no\" in quotes: unquoted, the installer (Go's YAML 1.1 reader) reads it as \
             the boolean false and uses \"false\" instead"
        );
        assert!(quoting_fix(Some("0123"), GoScalar::Int(83))
            .ends_with("the number 83 and uses \"83\" instead"));
        assert!(quoting_fix(Some("~"), GoScalar::Null).ends_with("null and leaves the field empty"));
    }
}
