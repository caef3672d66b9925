//! A CustomResourceDefinition's structural schema (`openAPIV3Schema`), compiled once and used to
//! validate objects the way kube-apiserver does before it stores them: so a repository is
//! refused here, naming the field, rather than by Argo CD or the cluster after a push.
//!
//! Handled: `type` (object, array, string, integer, number, boolean) with `format` int32,
//! int64 and date-time; `properties`, `additionalProperties` (bool or schema), `required`,
//! `items`, `enum`, `nullable`, `pattern`, `minimum`/`maximum` (and their `exclusive*`),
//! `multipleOf`, `minLength`/`maxLength`, `minItems`/`maxItems`,
//! `minProperties`/`maxProperties`, the value validations `allOf`/`anyOf`/`oneOf`/`not`,
//! `x-kubernetes-preserve-unknown-fields`, `x-kubernetes-int-or-string`,
//! `x-kubernetes-embedded-resource` and `x-kubernetes-list-type` (`set`, `map` with
//! `x-kubernetes-list-map-keys`: duplicates are violations).
//!
//! Not handled: `x-kubernetes-validations` (CEL rules) are skipped, as are `default`s (nothing
//! is defaulted: the object is checked as written). Unknown fields are violations, as with
//! `fieldValidation=Strict`, where the API server would otherwise prune them silently.
//!
//! Messages copy the API server's wording (`spec.destination.server: Invalid value: "integer":
//! spec.destination.server in body must be of type string: "integer"`, `spec.destination:
//! Required value`, `spec.foo: field not declared in schema`). Paths name properties with dots
//! and the keys of `additionalProperties` maps in brackets (`metadata.labels[app]`), as the API
//! server's field paths do.

use regex::Regex;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt;

/// One thing wrong with an object: the field path and the API server's message about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// `spec.destination.server`, `spec.sources[0].repoURL`; empty for the object itself.
    pub path: String,
    /// What is wrong, in the API server's words.
    pub message: String,
}

impl Violation {
    /// A violation at `path`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Violation {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Violation {
    /// `PATH: MESSAGE` (just the message for the object itself).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// A compiled structural schema.
#[derive(Clone, Debug)]
pub struct Schema {
    root: Node,
}

impl Schema {
    /// Compiles an `openAPIV3Schema`; the error names the schema path that cannot be read
    /// (an unknown `type`, a `pattern` that is not a regular expression).
    pub fn new(openapi_v3: &Value) -> Result<Schema, String> {
        Ok(Schema {
            root: Node::compile(openapi_v3, "openAPIV3Schema")?,
        })
    }

    /// Every violation of `value`, in the value's order.
    pub fn validate(&self, value: &Value) -> Vec<Violation> {
        let mut out = Vec::new();
        self.root.check(value, "", Mode::Structural, &mut out);
        out
    }
}

/// A JSON type as schemas name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Type {
    Object,
    Array,
    String,
    Integer,
    Number,
    Boolean,
}

impl Type {
    fn parse(s: &str) -> Option<Type> {
        Some(match s {
            "object" => Type::Object,
            "array" => Type::Array,
            "string" => Type::String,
            "integer" => Type::Integer,
            "number" => Type::Number,
            "boolean" => Type::Boolean,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Type::Object => "object",
            Type::Array => "array",
            Type::String => "string",
            Type::Integer => "integer",
            Type::Number => "number",
            Type::Boolean => "boolean",
        }
    }

    fn accepts(self, v: &Value) -> bool {
        match self {
            Type::Object => v.is_object(),
            Type::Array => v.is_array(),
            Type::String => v.is_string(),
            Type::Integer => is_integer(v),
            Type::Number => v.is_number(),
            Type::Boolean => v.is_boolean(),
        }
    }
}

/// What `additionalProperties` says.
#[derive(Clone, Debug, Default)]
enum Additional {
    /// Not written: only `properties` are allowed.
    #[default]
    Absent,
    /// `true` or `false`.
    Allowed(bool),
    /// A schema every other value must pass.
    Schema(Box<Node>),
}

/// `x-kubernetes-list-type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ListType {
    Atomic,
    Set,
    Map,
}

/// Structural: the node's own shape, so unknown fields are violations. Value: inside
/// `allOf`/`anyOf`/`oneOf`/`not`, where a schema only restricts values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Structural,
    Value,
}

/// Numeric and size bounds.
#[derive(Clone, Debug, Default)]
struct Bounds {
    minimum: Option<f64>,
    exclusive_minimum: bool,
    maximum: Option<f64>,
    exclusive_maximum: bool,
    multiple_of: Option<f64>,
    min_length: Option<u64>,
    max_length: Option<u64>,
    min_items: Option<u64>,
    max_items: Option<u64>,
    min_properties: Option<u64>,
    max_properties: Option<u64>,
}

/// One compiled schema node.
#[derive(Clone, Debug, Default)]
struct Node {
    type_: Option<Type>,
    format: Option<String>,
    nullable: bool,
    properties: BTreeMap<String, Node>,
    additional: Additional,
    required: Vec<String>,
    items: Option<Box<Node>>,
    enum_: Vec<Value>,
    pattern: Option<Regex>,
    bounds: Bounds,
    all_of: Vec<Node>,
    any_of: Vec<Node>,
    one_of: Vec<Node>,
    not: Option<Box<Node>>,
    preserve_unknown: bool,
    int_or_string: bool,
    embedded: bool,
    list_type: Option<ListType>,
    map_keys: Vec<String>,
}

// ---------------------------------------------------------------------------------------------
// Compiling
// ---------------------------------------------------------------------------------------------

impl Node {
    fn compile(s: &Value, at: &str) -> Result<Node, String> {
        let Some(m) = s.as_object() else {
            return Err(format!("{at}: a schema must be a mapping"));
        };
        let mut node = Node {
            type_: compile_type(m, at)?,
            format: m.get("format").and_then(Value::as_str).map(str::to_string),
            nullable: flag(m, "nullable"),
            properties: compile_properties(m, at)?,
            additional: compile_additional(m, at)?,
            required: strings(m, "required"),
            items: match m.get("items") {
                Some(i) => Some(Box::new(Node::compile(i, &format!("{at}.items"))?)),
                None => None,
            },
            enum_: m
                .get("enum")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            pattern: compile_pattern(m, at)?,
            bounds: compile_bounds(m),
            preserve_unknown: flag(m, "x-kubernetes-preserve-unknown-fields"),
            int_or_string: flag(m, "x-kubernetes-int-or-string"),
            embedded: flag(m, "x-kubernetes-embedded-resource"),
            list_type: compile_list_type(m, at)?,
            map_keys: strings(m, "x-kubernetes-list-map-keys"),
            ..Node::default()
        };
        node.all_of = compile_list(m, "allOf", at)?;
        node.any_of = compile_list(m, "anyOf", at)?;
        node.one_of = compile_list(m, "oneOf", at)?;
        if let Some(n) = m.get("not") {
            node.not = Some(Box::new(Node::compile(n, &format!("{at}.not"))?));
        }
        Ok(node)
    }
}

fn flag(m: &Map<String, Value>, key: &str) -> bool {
    m.get(key).and_then(Value::as_bool).unwrap_or(false)
}

fn strings(m: &Map<String, Value>, key: &str) -> Vec<String> {
    m.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn compile_type(m: &Map<String, Value>, at: &str) -> Result<Option<Type>, String> {
    match m.get("type") {
        None => Ok(None),
        Some(Value::String(t)) => Type::parse(t)
            .map(Some)
            .ok_or_else(|| format!("{at}.type: unknown type {t:?}")),
        Some(other) => Err(format!("{at}.type: must be a string, found {other}")),
    }
}

fn compile_properties(m: &Map<String, Value>, at: &str) -> Result<BTreeMap<String, Node>, String> {
    let mut out = BTreeMap::new();
    if let Some(props) = m.get("properties").and_then(Value::as_object) {
        for (name, s) in props {
            out.insert(
                name.clone(),
                Node::compile(s, &format!("{at}.properties.{name}"))?,
            );
        }
    }
    Ok(out)
}

fn compile_additional(m: &Map<String, Value>, at: &str) -> Result<Additional, String> {
    Ok(match m.get("additionalProperties") {
        None => Additional::Absent,
        Some(Value::Bool(b)) => Additional::Allowed(*b),
        Some(s) => Additional::Schema(Box::new(Node::compile(
            s,
            &format!("{at}.additionalProperties"),
        )?)),
    })
}

fn compile_pattern(m: &Map<String, Value>, at: &str) -> Result<Option<Regex>, String> {
    match m.get("pattern").and_then(Value::as_str) {
        None => Ok(None),
        Some(p) => Regex::new(p)
            .map(Some)
            .map_err(|e| format!("{at}.pattern: {p:?} is not a regular expression: {e}")),
    }
}

fn compile_bounds(m: &Map<String, Value>) -> Bounds {
    let f = |k: &str| m.get(k).and_then(Value::as_f64);
    let u = |k: &str| m.get(k).and_then(Value::as_u64);
    Bounds {
        minimum: f("minimum"),
        exclusive_minimum: flag(m, "exclusiveMinimum"),
        maximum: f("maximum"),
        exclusive_maximum: flag(m, "exclusiveMaximum"),
        multiple_of: f("multipleOf"),
        min_length: u("minLength"),
        max_length: u("maxLength"),
        min_items: u("minItems"),
        max_items: u("maxItems"),
        min_properties: u("minProperties"),
        max_properties: u("maxProperties"),
    }
}

fn compile_list_type(m: &Map<String, Value>, at: &str) -> Result<Option<ListType>, String> {
    match m.get("x-kubernetes-list-type").and_then(Value::as_str) {
        None => Ok(None),
        Some("atomic") => Ok(Some(ListType::Atomic)),
        Some("set") => Ok(Some(ListType::Set)),
        Some("map") => Ok(Some(ListType::Map)),
        Some(other) => Err(format!(
            "{at}.x-kubernetes-list-type: {other:?} is not atomic, set or map"
        )),
    }
}

fn compile_list(m: &Map<String, Value>, key: &str, at: &str) -> Result<Vec<Node>, String> {
    let Some(list) = m.get(key).and_then(Value::as_array) else {
        return Ok(Vec::new());
    };
    list.iter()
        .enumerate()
        .map(|(i, s)| Node::compile(s, &format!("{at}.{key}[{i}]")))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Validating
// ---------------------------------------------------------------------------------------------

impl Node {
    fn check(&self, v: &Value, path: &str, mode: Mode, out: &mut Vec<Violation>) {
        if v.is_null() && (self.nullable || (self.type_.is_none() && !self.int_or_string)) {
            return;
        }
        if !self.check_type(v, path, out) {
            return;
        }
        self.check_format(v, path, out);
        self.check_enum(v, path, out);
        match v {
            Value::Object(map) => self.check_object(map, path, mode, out),
            Value::Array(items) => self.check_array(items, path, mode, out),
            Value::String(s) => self.check_string(s, path, out),
            Value::Number(_) => self.check_number(v, path, out),
            _ => {}
        }
        self.check_combinators(v, path, out);
    }

    /// False (after reporting it) when `v` is not of the node's type: nothing else is checked.
    fn check_type(&self, v: &Value, path: &str, out: &mut Vec<Violation>) -> bool {
        let (ok, want) = if self.int_or_string {
            (is_integer(v) || v.is_string(), "integer,string")
        } else if let Some(t) = self.type_ {
            (t.accepts(v), t.name())
        } else {
            return true;
        };
        if !ok {
            let found = type_of(v);
            out.push(Violation::new(
                path,
                format!(
                    "Invalid value: \"{found}\": {} must be of type {want}: \"{found}\"",
                    in_body(path)
                ),
            ));
        }
        ok
    }

    fn check_format(&self, v: &Value, path: &str, out: &mut Vec<Violation>) {
        let ok = match (self.format.as_deref(), v) {
            (Some("int32"), Value::Number(n)) => {
                n.as_i64().is_none_or(|i| i32::try_from(i).is_ok())
            }
            (Some("date-time"), Value::String(s)) => is_date_time(s),
            _ => true,
        };
        if !ok {
            let format = self.format.as_deref().unwrap_or_default();
            out.push(invalid(
                path,
                v,
                format!("{} must be of type {format}: {}", in_body(path), show(v)),
            ));
        }
    }

    fn check_enum(&self, v: &Value, path: &str, out: &mut Vec<Violation>) {
        if self.enum_.is_empty() || self.enum_.contains(v) {
            return;
        }
        let allowed: Vec<String> = self.enum_.iter().map(show).collect();
        out.push(Violation::new(
            path,
            format!(
                "Unsupported value: {}: supported values: {}",
                show(v),
                allowed.join(", ")
            ),
        ));
    }

    fn check_object(
        &self,
        map: &Map<String, Value>,
        path: &str,
        mode: Mode,
        out: &mut Vec<Violation>,
    ) {
        for (key, value) in map {
            if let Some(prop) = self.properties.get(key) {
                prop.check(value, &join(path, key), mode, out);
            } else if let Additional::Schema(s) = &self.additional {
                s.check(value, &format!("{path}[{key}]"), mode, out);
            } else if mode == Mode::Structural && !self.allows_unknown(key, value) {
                out.push(Violation::new(
                    join(path, key),
                    "field not declared in schema",
                ));
            }
        }
        for name in &self.required {
            if !map.contains_key(name) {
                out.push(Violation::new(join(path, name), "Required value"));
            }
        }
        let n = map.len() as u64;
        if let Some(min) = self.bounds.min_properties.filter(|&m| n < m) {
            out.push(Violation::new(
                path,
                format!(
                    "Invalid value: {n}: {} should have at least {min} properties",
                    in_body(path)
                ),
            ));
        }
        if let Some(max) = self.bounds.max_properties.filter(|&m| n > m) {
            out.push(Violation::new(
                path,
                format!("Too many: {n}: must have at most {max} items"),
            ));
        }
    }

    /// A field `properties` does not name is still accepted: preserved, allowed by
    /// `additionalProperties: true`, or an embedded resource's `apiVersion`/`kind`/`metadata`.
    /// Only typed objects are structural: a node without `type` only restricts values.
    fn allows_unknown(&self, key: &str, value: &Value) -> bool {
        if self.preserve_unknown || matches!(self.additional, Additional::Allowed(true)) {
            return true;
        }
        if self.embedded {
            return match key {
                "apiVersion" | "kind" => value.is_string(),
                "metadata" => value.is_object(),
                _ => false,
            };
        }
        self.type_ != Some(Type::Object)
    }

    fn check_array(&self, items: &[Value], path: &str, mode: Mode, out: &mut Vec<Violation>) {
        if let Some(schema) = &self.items {
            for (i, item) in items.iter().enumerate() {
                schema.check(item, &format!("{path}[{i}]"), mode, out);
            }
        }
        let n = items.len() as u64;
        if let Some(min) = self.bounds.min_items.filter(|&m| n < m) {
            out.push(Violation::new(
                path,
                format!(
                    "Invalid value: {n}: {} should have at least {min} items",
                    in_body(path)
                ),
            ));
        }
        if let Some(max) = self.bounds.max_items.filter(|&m| n > m) {
            out.push(Violation::new(
                path,
                format!("Too many: {n}: must have at most {max} items"),
            ));
        }
        match self.list_type {
            Some(ListType::Set) => duplicates(items, path, |v| Some(v.clone()), out),
            Some(ListType::Map) => duplicates(items, path, |v| self.map_key(v), out),
            _ => {}
        }
    }

    /// The item's key fields as one value (`{"name":"a"}`), for duplicate detection.
    fn map_key(&self, item: &Value) -> Option<Value> {
        let obj = item.as_object()?;
        let key: Map<String, Value> = self
            .map_keys
            .iter()
            .filter_map(|k| obj.get(k).map(|v| (k.clone(), v.clone())))
            .collect();
        Some(Value::Object(key))
    }

    fn check_string(&self, s: &str, path: &str, out: &mut Vec<Violation>) {
        let chars = s.chars().count() as u64;
        if let Some(min) = self.bounds.min_length.filter(|&m| chars < m) {
            out.push(Violation::new(
                path,
                format!(
                    "Invalid value: {}: {} should be at least {min} chars long",
                    show_str(s),
                    in_body(path)
                ),
            ));
        }
        if let Some(max) = self.bounds.max_length.filter(|&m| chars > m) {
            out.push(Violation::new(
                path,
                format!("Too long: may not be more than {max} bytes"),
            ));
        }
        if let Some(re) = self.pattern.as_ref().filter(|re| !re.is_match(s)) {
            out.push(Violation::new(
                path,
                format!(
                    "Invalid value: {}: {} should match '{}'",
                    show_str(s),
                    in_body(path),
                    re.as_str()
                ),
            ));
        }
    }

    fn check_number(&self, v: &Value, path: &str, out: &mut Vec<Violation>) {
        let Some(x) = v.as_f64() else { return };
        let b = &self.bounds;
        let below = b
            .minimum
            .filter(|&m| x < m || (b.exclusive_minimum && x == m));
        if let Some(m) = below {
            let rel = if b.exclusive_minimum {
                "greater than"
            } else {
                "greater than or equal to"
            };
            let msg = format!("{} should be {rel} {m}", in_body(path));
            out.push(invalid(path, v, msg));
        }
        let above = b
            .maximum
            .filter(|&m| x > m || (b.exclusive_maximum && x == m));
        if let Some(m) = above {
            let rel = if b.exclusive_maximum {
                "less than"
            } else {
                "less than or equal to"
            };
            let msg = format!("{} should be {rel} {m}", in_body(path));
            out.push(invalid(path, v, msg));
        }
        if let Some(m) = b
            .multiple_of
            .filter(|&m| m != 0.0 && (x / m).fract() != 0.0)
        {
            let msg = format!("{} should be a multiple of {m}", in_body(path));
            out.push(invalid(path, v, msg));
        }
    }

    fn check_combinators(&self, v: &Value, path: &str, out: &mut Vec<Violation>) {
        let passes = |n: &Node| {
            let mut sink = Vec::new();
            n.check(v, path, Mode::Value, &mut sink);
            sink.is_empty()
        };
        let mut fail = |what: &str| {
            out.push(invalid(path, v, format!("{} {what}", in_body(path))));
        };
        if !self.all_of.iter().all(passes) {
            fail("must validate all the schemas (allOf)");
        }
        if !self.any_of.is_empty() && !self.any_of.iter().any(passes) && !self.int_or_string {
            fail("must validate at least one schema (anyOf)");
        }
        if !self.one_of.is_empty() && self.one_of.iter().filter(|n| passes(n)).count() != 1 {
            fail("must validate one and only one schema (oneOf)");
        }
        if self.not.as_deref().is_some_and(passes) {
            fail("must not validate the schema (not)");
        }
    }
}

/// Items of a `set` or `map` list that repeat an earlier one's key.
fn duplicates(
    items: &[Value],
    path: &str,
    key: impl Fn(&Value) -> Option<Value>,
    out: &mut Vec<Violation>,
) {
    let mut seen: Vec<Value> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let Some(k) = key(item) else { continue };
        if seen.contains(&k) {
            out.push(Violation::new(
                format!("{path}[{i}]"),
                format!("Duplicate value: {}", show(&k)),
            ));
        } else {
            seen.push(k);
        }
    }
}

/// `PATH in body`, as the API server's schema messages name a field.
fn in_body(path: &str) -> String {
    if path.is_empty() {
        "body".into()
    } else {
        format!("{path} in body")
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn invalid(path: &str, v: &Value, detail: String) -> Violation {
    Violation::new(path, format!("Invalid value: {}: {detail}", show(v)))
}

/// A value as the API server's messages print it: strings quoted, numbers bare, the rest JSON.
fn show(v: &Value) -> String {
    match v {
        Value::String(s) => show_str(s),
        other => other.to_string(),
    }
}

fn show_str(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

/// The JSON type of a value, as "must be of type" messages name what was found.
fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) if is_integer(v) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Integers, including a float with no fraction (`1.0`), which Go's JSON reader also accepts.
fn is_integer(v: &Value) -> bool {
    match v {
        Value::Number(n) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

/// RFC 3339 date-time (`2024-01-02T03:04:05Z`, fractions and offsets allowed).
fn is_date_time(s: &str) -> bool {
    static RE: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(
            r"^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt ]([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$",
        )
        .expect("date-time pattern")
    })
    .is_match(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(s: Value) -> Schema {
        Schema::new(&s).unwrap()
    }

    fn messages(s: &Schema, v: Value) -> Vec<String> {
        s.validate(&v).iter().map(ToString::to_string).collect()
    }

    /// The API server's own wording for a wrong type, an unknown field and a missing one.
    #[test]
    fn type_unknown_and_required_read_as_the_api_server_writes_them() {
        let s = schema(
            json!({"type": "object", "required": ["spec"], "properties": {
            "spec": {"type": "object", "required": ["destination"], "properties": {
                "destination": {"type": "object", "properties": {"server": {"type": "string"}}}}}}}),
        );
        assert_eq!(
            messages(&s, json!({"spec": {"destination": {"server": 3}}})),
            ["spec.destination.server: Invalid value: \"integer\": spec.destination.server in body must be of type string: \"integer\""]
        );
        assert_eq!(
            messages(&s, json!({"spec": {"destinaton": {}}})),
            [
                "spec.destinaton: field not declared in schema",
                "spec.destination: Required value"
            ]
        );
        assert_eq!(messages(&s, json!({})), ["spec: Required value"]);
    }

    #[test]
    fn maps_lists_and_preserved_fields() {
        let s = schema(json!({"type": "object", "properties": {
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "any": {"type": "object", "additionalProperties": true},
            "list": {"type": "array", "items": {"type": "integer", "format": "int32"}, "maxItems": 2}}}));
        assert!(messages(
            &s,
            json!({"free": {"a": {"b": 1}}, "any": {"x": [1]}, "labels": {"a": "b"}})
        )
        .is_empty());
        assert_eq!(
            messages(&s, json!({"labels": {"a": 1}, "list": [1, 4294967296_i64, 3]})),
            [
                "labels[a]: Invalid value: \"integer\": labels[a] in body must be of type string: \"integer\"",
                "list[1]: Invalid value: 4294967296: list[1] in body must be of type int32: 4294967296",
                "list: Too many: 3: must have at most 2 items",
            ]
        );
    }

    #[test]
    fn int_or_string_nullable_and_embedded_resources() {
        let s = schema(json!({"type": "object", "properties": {
            "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
            "opt": {"type": "string", "nullable": true},
            "obj": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {"spec": {"type": "object"}}}}}));
        assert!(messages(&s, json!({"port": "http", "opt": null, "obj": {"apiVersion": "v1", "kind": "X", "metadata": {}, "spec": {}}})).is_empty());
        assert!(messages(&s, json!({"port": 8080})).is_empty());
        assert_eq!(
            messages(&s, json!({"port": true, "obj": {"other": 1}})),
            [
                "obj.other: field not declared in schema",
                "port: Invalid value: \"boolean\": port in body must be of type integer,string: \"boolean\"",
            ]
        );
    }

    #[test]
    fn strings_numbers_and_enums() {
        let s = schema(json!({"type": "object", "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 3, "pattern": "^[a-z]+$"},
            "n": {"type": "integer", "minimum": 1, "maximum": 5},
            "mode": {"type": "string", "enum": ["a", "b"]},
            "at": {"type": "string", "format": "date-time"}}}));
        assert!(messages(
            &s,
            json!({"name": "ab", "n": 5, "mode": "a", "at": "2024-01-02T03:04:05Z"})
        )
        .is_empty());
        assert_eq!(
            messages(&s, json!({"name": "ABCD", "n": 0, "mode": "c", "at": "yesterday"})),
            [
                "at: Invalid value: \"yesterday\": at in body must be of type date-time: \"yesterday\"",
                "mode: Unsupported value: \"c\": supported values: \"a\", \"b\"",
                "n: Invalid value: 0: n in body should be greater than or equal to 1",
                "name: Too long: may not be more than 3 bytes",
                "name: Invalid value: \"ABCD\": name in body should match '^[a-z]+$'",
            ]
        );
    }

    #[test]
    fn set_and_map_lists_refuse_duplicates() {
        let s = schema(json!({"type": "object", "properties": {
            "set": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "map": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "properties": {"name": {"type": "string"}, "v": {"type": "integer"}}}}}}));
        assert_eq!(
            messages(
                &s,
                json!({"set": ["a", "b", "a"], "map": [{"name": "x", "v": 1}, {"name": "x", "v": 2}]})
            ),
            [
                "map[1]: Duplicate value: {\"name\":\"x\"}",
                "set[2]: Duplicate value: \"a\""
            ]
        );
    }

    #[test]
    fn value_validations_combine_without_structural_checks() {
        let s = schema(json!({"type": "object", "properties": {
            "a": {"type": "string"}, "b": {"type": "string"}},
            "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
            "not": {"required": ["c"]}}));
        assert!(messages(&s, json!({"a": "x"})).is_empty());
        assert_eq!(
            messages(&s, json!({"a": "x", "b": "y"})),
            ["Invalid value: {\"a\":\"x\",\"b\":\"y\"}: body must validate one and only one schema (oneOf)"]
        );
    }

    #[test]
    fn unreadable_schemas_are_refused_naming_where() {
        let err = Schema::new(&json!({"type": "object", "properties": {"a": {"type": "strng"}}}))
            .unwrap_err();
        assert_eq!(
            err,
            "openAPIV3Schema.properties.a.type: unknown type \"strng\""
        );
    }
}
