//! Output contracts for codex-mmo: a deliberately small, offline JSON Schema subset.
//!
//! The subset is closed, so this crate checks schemas and validates instances by hand rather
//! than through a general JSON Schema engine: an unsupported keyword must be a pack error, never
//! silently ignored, and nothing may ever be fetched.

pub mod correlate;
pub mod format;

use regex::Regex;
use serde_json::{Map, Value};
use std::collections::HashMap;

/// Every keyword the subset admits.
pub const KEYWORDS: &[&str] = &[
    "$schema",
    "$id",
    "title",
    "description",
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "uniqueItems",
    "oneOf",
    "anyOf",
    "allOf",
    "not",
    "if",
    "then",
    "else",
];
/// `$schema` values accepted as dialect labels (no vocabulary is loaded for either).
pub const DIALECTS: &[&str] = &[
    "https://json-schema.org/draft/2020-12/schema",
    "http://json-schema.org/draft-07/schema#",
    "http://json-schema.org/draft-07/schema",
];
/// Supported `format` values.
pub const FORMATS: &[&str] = &["uri", "date", "date-time"];
const TYPES: &[&str] = &[
    "null", "boolean", "object", "array", "number", "integer", "string",
];

/// A problem with a schema itself (a pack error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaProblem {
    /// JSON pointer into the schema.
    pub pointer: String,
    /// Stable rule id.
    pub rule: &'static str,
    pub message: String,
}

/// An instance failing a contract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceError {
    /// JSON pointer into the instance.
    pub instance_pointer: String,
    /// JSON pointer into the schema of the failing keyword.
    pub schema_pointer: String,
    pub message: String,
}

fn esc(k: &str) -> String {
    k.replace('~', "~0").replace('/', "~1")
}

/// Check that a value is a schema of the subset; returns every problem.
pub fn check_schema(schema: &Value) -> Vec<SchemaProblem> {
    let mut out = Vec::new();
    if !schema.is_object() {
        out.push(SchemaProblem {
            pointer: String::new(),
            rule: "contract_not_object",
            message: "a contract is a JSON object schema".into(),
        });
        return out;
    }
    check(schema, "", true, &mut out);
    out
}

fn push(out: &mut Vec<SchemaProblem>, pointer: String, rule: &'static str, message: String) {
    out.push(SchemaProblem {
        pointer,
        rule,
        message,
    });
}

fn check(s: &Value, ptr: &str, root: bool, out: &mut Vec<SchemaProblem>) {
    let obj = match s {
        Value::Bool(_) => return,
        Value::Object(o) => o,
        _ => {
            push(
                out,
                ptr.into(),
                "contract_keyword_value",
                "a subschema is an object or a boolean".into(),
            );
            return;
        }
    };
    for (k, v) in obj {
        let p = format!("{ptr}/{}", esc(k));
        if !KEYWORDS.contains(&k.as_str()) {
            let (rule, why) = match k.as_str() {
                "$ref" | "$dynamicRef" | "$recursiveRef" => (
                    "contract_ref",
                    "references are not supported; no schema is ever loaded",
                ),
                "$vocabulary" => ("contract_vocabulary", "vocabularies are not loaded"),
                _ => (
                    "contract_unsupported_keyword",
                    "not in the supported subset",
                ),
            };
            push(out, p, rule, format!("`{k}`: {why}"));
            continue;
        }
        let problem: Option<&str> = match k.as_str() {
            "$schema" if !root => Some("belongs at the contract root"),
            "$schema" => {
                if !v.as_str().is_some_and(|d| DIALECTS.contains(&d)) {
                    push(
                        out,
                        p.clone(),
                        "contract_dialect",
                        format!("unsupported dialect {v}; use {}", DIALECTS[0]),
                    );
                }
                None
            }
            "$id" | "title" | "description" => (!v.is_string()).then_some("must be a string"),
            "type" => {
                let ok = match v {
                    Value::String(t) => TYPES.contains(&t.as_str()),
                    Value::Array(a) => {
                        !a.is_empty()
                            && a.iter()
                                .all(|t| t.as_str().is_some_and(|t| TYPES.contains(&t)))
                            && a.iter().enumerate().all(|(i, t)| !a[..i].contains(t))
                    }
                    _ => false,
                };
                (!ok).then_some("must be a type name or a non-empty array of distinct type names")
            }
            "properties" => match v.as_object() {
                Some(props) => {
                    for (name, sub) in props {
                        check(sub, &format!("{p}/{}", esc(name)), false, out);
                    }
                    None
                }
                None => Some("must be an object of schemas"),
            },
            "required" => {
                let ok = v.as_array().is_some_and(|a| {
                    a.iter().all(Value::is_string)
                        && a.iter().enumerate().all(|(i, t)| !a[..i].contains(t))
                });
                (!ok).then_some("must be an array of distinct strings")
            }
            "items" if v.is_array() => Some("in tuple form is not in the subset"),
            "additionalProperties" | "items" | "not" | "if" | "then" | "else" => {
                check(v, &p, false, out);
                None
            }
            "enum" => v
                .as_array()
                .is_none_or(|a| a.is_empty())
                .then_some("must be a non-empty array"),
            "const" => None,
            "minLength" | "maxLength" | "minItems" | "maxItems" => {
                (v.as_u64().is_none()).then_some("must be a non-negative integer")
            }
            "minimum" | "maximum" => (!v.is_number()).then_some("must be a number"),
            "uniqueItems" => (!v.is_boolean()).then_some("must be a boolean"),
            "pattern" => match v.as_str() {
                Some(re) => {
                    if let Err(e) = Regex::new(re) {
                        push(
                            out,
                            p.clone(),
                            "contract_pattern",
                            format!("pattern does not compile: {e}"),
                        );
                    }
                    None
                }
                None => Some("must be a string"),
            },
            "format" => match v.as_str() {
                Some(f) if FORMATS.contains(&f) => None,
                Some(f) => {
                    push(
                        out,
                        p.clone(),
                        "contract_format_unsupported",
                        format!("format `{f}` is not supported (uri, date, date-time)"),
                    );
                    None
                }
                None => Some("must be a string"),
            },
            "oneOf" | "anyOf" | "allOf" => match v.as_array() {
                Some(a) if !a.is_empty() => {
                    for (i, sub) in a.iter().enumerate() {
                        check(sub, &format!("{p}/{i}"), false, out);
                    }
                    None
                }
                _ => Some("must be a non-empty array of schemas"),
            },
            _ => None,
        };
        if let Some(m) = problem {
            push(out, p, "contract_keyword_value", format!("`{k}` {m}"));
        }
    }
}

/// A checked contract, ready to validate instances.
#[derive(Debug)]
pub struct Contract {
    // Boxed so the addresses of its nodes, which key `patterns`, never move with the Contract.
    schema: Box<Value>,
    patterns: HashMap<usize, Regex>,
}

/// A JSON pointer built lazily: segments are linked on the stack and rendered only when an
/// error is reported, so validating a valid instance allocates no pointer strings.
#[derive(Clone, Copy)]
struct Ptr<'a> {
    parent: Option<&'a Ptr<'a>>,
    seg: Seg<'a>,
}

#[derive(Clone, Copy)]
enum Seg<'a> {
    Root,
    Key(&'a str),
    Index(usize),
}

impl<'a> Ptr<'a> {
    const ROOT: Ptr<'static> = Ptr {
        parent: None,
        seg: Seg::Root,
    };
    fn key<'b>(&'b self, k: &'b str) -> Ptr<'b> {
        Ptr {
            parent: Some(self),
            seg: Seg::Key(k),
        }
    }
    fn idx<'b>(&'b self, i: usize) -> Ptr<'b> {
        Ptr {
            parent: Some(self),
            seg: Seg::Index(i),
        }
    }
    fn render(&self) -> String {
        let mut segs = Vec::new();
        let mut cur = Some(self);
        while let Some(p) = cur {
            match p.seg {
                Seg::Root => {}
                Seg::Key(k) => segs.push(esc(k)),
                Seg::Index(i) => segs.push(i.to_string()),
            }
            cur = p.parent;
        }
        segs.iter().rev().map(|s| format!("/{s}")).collect()
    }
}

fn node_id(v: &Value) -> usize {
    v as *const Value as usize
}

impl Clone for Contract {
    // Patterns are keyed by node address, so a clone must re-key them for its own nodes.
    fn clone(&self) -> Self {
        let schema = Box::new((*self.schema).clone());
        let mut patterns = HashMap::new();
        collect_patterns(&schema, &mut patterns);
        Contract { schema, patterns }
    }
}

impl Contract {
    /// Check `schema` and compile its patterns.
    pub fn new(schema: Value) -> Result<Contract, Vec<SchemaProblem>> {
        let problems = check_schema(&schema);
        if !problems.is_empty() {
            return Err(problems);
        }
        let schema = Box::new(schema);
        let mut patterns = HashMap::new();
        collect_patterns(&schema, &mut patterns);
        Ok(Contract { schema, patterns })
    }

    /// The schema as written.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// Validate an instance; returns every failing keyword (empty = valid).
    pub fn validate(&self, instance: &Value) -> Vec<InstanceError> {
        let mut out = Vec::new();
        self.walk(&self.schema, Ptr::ROOT, instance, Ptr::ROOT, &mut out);
        out
    }

    /// Whether an instance is valid.
    pub fn is_valid(&self, instance: &Value) -> bool {
        let mut out = Vec::new();
        self.walk(&self.schema, Ptr::ROOT, instance, Ptr::ROOT, &mut out);
        out.is_empty()
    }

    fn ok(&self, s: &Value, sp: Ptr<'_>, v: &Value, ip: Ptr<'_>) -> bool {
        let mut tmp = Vec::new();
        self.walk(s, sp, v, ip, &mut tmp);
        tmp.is_empty()
    }

    fn walk(&self, s: &Value, sp: Ptr<'_>, v: &Value, ip: Ptr<'_>, out: &mut Vec<InstanceError>) {
        let fail = |out: &mut Vec<InstanceError>, kw: &str, m: String| {
            out.push(InstanceError {
                instance_pointer: ip.render(),
                schema_pointer: sp.key(kw).render(),
                message: m,
            })
        };
        let o = match s {
            Value::Bool(true) => return,
            Value::Bool(false) => {
                out.push(InstanceError {
                    instance_pointer: ip.render(),
                    schema_pointer: sp.render(),
                    message: "no value is allowed here".into(),
                });
                return;
            }
            Value::Object(o) => o,
            _ => return,
        };
        if let Some(t) = o.get("type") {
            let types: Vec<&str> = match t {
                Value::String(x) => vec![x.as_str()],
                Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                _ => vec![],
            };
            if !types.iter().any(|t| has_type(v, t)) {
                fail(
                    out,
                    "type",
                    format!("expected {}, found {}", types.join(" or "), type_of(v)),
                );
            }
        }
        if let Some(Value::Array(e)) = o.get("enum")
            && !e.iter().any(|x| json_eq(x, v))
        {
            fail(
                out,
                "enum",
                "value is not one of the enumerated values".into(),
            );
        }
        if let Some(c) = o.get("const")
            && !json_eq(c, v)
        {
            fail(out, "const", format!("expected the constant {c}"));
        }
        match v {
            Value::String(st) => {
                let n = st.chars().count() as u64;
                if let Some(m) = o.get("minLength").and_then(Value::as_u64)
                    && n < m
                {
                    fail(
                        out,
                        "minLength",
                        format!("{n} characters is fewer than {m}"),
                    );
                }
                if let Some(m) = o.get("maxLength").and_then(Value::as_u64)
                    && n > m
                {
                    fail(out, "maxLength", format!("{n} characters is more than {m}"));
                }
                if o.contains_key("pattern")
                    && let Some(re) = self.patterns.get(&node_id(s))
                    && !re.is_match(st)
                {
                    fail(out, "pattern", format!("does not match /{}/", re.as_str()));
                }
                if let Some(f) = o.get("format").and_then(Value::as_str) {
                    let ok = match f {
                        "uri" => format::is_uri(st),
                        "date" => format::is_date(st),
                        "date-time" => format::is_date_time(st),
                        _ => true,
                    };
                    if !ok {
                        fail(out, "format", format!("not a valid {f}"));
                    }
                }
            }
            Value::Number(num) => {
                let x = num.as_f64().unwrap_or(f64::NAN);
                if let Some(m) = o.get("minimum").and_then(Value::as_f64)
                    && x < m
                {
                    fail(out, "minimum", format!("{num} is below {m}"));
                }
                if let Some(m) = o.get("maximum").and_then(Value::as_f64)
                    && x > m
                {
                    fail(out, "maximum", format!("{num} is above {m}"));
                }
            }
            Value::Array(a) => {
                let n = a.len() as u64;
                if let Some(m) = o.get("minItems").and_then(Value::as_u64)
                    && n < m
                {
                    fail(out, "minItems", format!("{n} items is fewer than {m}"));
                }
                if let Some(m) = o.get("maxItems").and_then(Value::as_u64)
                    && n > m
                {
                    fail(out, "maxItems", format!("{n} items is more than {m}"));
                }
                if o.get("uniqueItems") == Some(&Value::Bool(true))
                    && a.iter()
                        .enumerate()
                        .any(|(i, x)| a[..i].iter().any(|y| json_eq(x, y)))
                {
                    fail(out, "uniqueItems", "items are not unique".into());
                }
                if let Some(items) = o.get("items") {
                    for (i, x) in a.iter().enumerate() {
                        self.walk(items, sp.key("items"), x, ip.idx(i), out);
                    }
                }
            }
            Value::Object(m) => {
                if let Some(Value::Array(req)) = o.get("required") {
                    for r in req.iter().filter_map(Value::as_str) {
                        if !m.contains_key(r) {
                            fail(out, "required", format!("missing required property `{r}`"));
                        }
                    }
                }
                let props = o.get("properties").and_then(Value::as_object);
                for (k, x) in m {
                    let child = ip.key(k);
                    if let Some(ps) = props.and_then(|p| p.get(k)) {
                        let props_ptr = sp.key("properties");
                        self.walk(ps, props_ptr.key(k), x, child, out);
                    } else if let Some(ap) = o.get("additionalProperties") {
                        if ap == &Value::Bool(false) {
                            out.push(InstanceError {
                                instance_pointer: child.render(),
                                schema_pointer: sp.key("additionalProperties").render(),
                                message: format!("property `{k}` is not allowed"),
                            });
                        } else {
                            self.walk(ap, sp.key("additionalProperties"), x, child, out);
                        }
                    }
                }
            }
            _ => {}
        }
        if let Some(Value::Array(all)) = o.get("allOf") {
            for (i, sub) in all.iter().enumerate() {
                let all_ptr = sp.key("allOf");
                self.walk(sub, all_ptr.idx(i), v, ip, out);
            }
        }
        if let Some(Value::Array(any)) = o.get("anyOf")
            && !any
                .iter()
                .enumerate()
                .any(|(i, sub)| self.ok(sub, sp.key("anyOf").idx(i), v, ip))
        {
            fail(out, "anyOf", "matches none of the alternatives".into());
        }
        if let Some(Value::Array(one)) = o.get("oneOf") {
            let n = one
                .iter()
                .enumerate()
                .filter(|(i, sub)| self.ok(sub, sp.key("oneOf").idx(*i), v, ip))
                .count();
            if n != 1 {
                fail(
                    out,
                    "oneOf",
                    format!("matches {n} alternatives; exactly one is required"),
                );
            }
        }
        if let Some(not) = o.get("not")
            && self.ok(not, sp.key("not"), v, ip)
        {
            fail(out, "not", "matches a schema it must not match".into());
        }
        if let Some(cond) = o.get("if") {
            if self.ok(cond, sp.key("if"), v, ip) {
                if let Some(t) = o.get("then") {
                    self.walk(t, sp.key("then"), v, ip, out);
                }
            } else if let Some(e) = o.get("else") {
                self.walk(e, sp.key("else"), v, ip, out);
            }
        }
    }
}

fn collect_patterns(s: &Value, map: &mut HashMap<usize, Regex>) {
    let Some(o) = s.as_object() else { return };
    if let Some(re) = o
        .get("pattern")
        .and_then(Value::as_str)
        .and_then(|p| Regex::new(p).ok())
    {
        map.insert(node_id(s), re);
    }
    for k in ["additionalProperties", "items", "not", "if", "then", "else"] {
        if let Some(sub) = o.get(k) {
            collect_patterns(sub, map);
        }
    }
    if let Some(props) = o.get("properties").and_then(Value::as_object) {
        for sub in props.values() {
            collect_patterns(sub, map);
        }
    }
    for k in ["oneOf", "anyOf", "allOf"] {
        if let Some(a) = o.get(k).and_then(Value::as_array) {
            for sub in a {
                collect_patterns(sub, map);
            }
        }
    }
}

fn has_type(v: &Value, t: &str) -> bool {
    match t {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "number" => v.is_number(),
        // 1.0 is an integer in JSON Schema: the value matters, not the spelling.
        "integer" => {
            v.as_i64().is_some()
                || v.as_u64().is_some()
                || v.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// JSON equality where numbers compare by value (1 equals 1.0).
pub fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            match (x.as_i64(), y.as_i64(), x.as_u64(), y.as_u64()) {
                (Some(i), Some(j), _, _) => i == j,
                (_, _, Some(i), Some(j)) => i == j,
                _ => x.as_f64() == y.as_f64(),
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// Keywords kept in the transport projection: shape, not validation.
const SHAPE_KEYWORDS: &[&str] = &["type", "title", "description", "enum", "const"];

/// The strict `outputSchema` projection sent to Codex in `turn/start`.
///
/// Closed objects and required properties are kept. Optional properties are dropped because
/// Codex strict schemas require every advertised property, which would force a value where the
/// contract permits omission. Every object is closed, since strict mode needs that and a closed
/// answer still satisfies an open contract. Validation-only keywords and `allOf`/`not`/`if` are
/// dropped; `oneOf` becomes `anyOf`, which admits a superset. The original contract is still
/// what validates the answer.
pub fn project_output_schema(schema: &Value) -> Value {
    let Some(o) = schema.as_object() else {
        return schema.clone();
    };
    let mut out = Map::new();
    for k in SHAPE_KEYWORDS {
        if let Some(v) = o.get(*k) {
            out.insert((*k).to_string(), v.clone());
        }
    }
    let is_object = o.contains_key("properties")
        || match o.get("type") {
            Some(Value::String(t)) => t == "object",
            Some(Value::Array(a)) => a.iter().any(|t| t == "object"),
            _ => false,
        };
    if is_object {
        let required: Vec<&str> = o
            .get("required")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let props = o.get("properties").and_then(Value::as_object);
        let mut kept = Map::new();
        let mut kept_req = Vec::new();
        for r in &required {
            if let Some(ps) = props.and_then(|p| p.get(*r)) {
                kept.insert((*r).to_string(), project_output_schema(ps));
                kept_req.push(Value::String((*r).to_string()));
            }
        }
        out.insert("properties".into(), Value::Object(kept));
        out.insert("required".into(), Value::Array(kept_req));
        out.insert("additionalProperties".into(), Value::Bool(false));
    }
    if let Some(items) = o.get("items") {
        out.insert("items".into(), project_output_schema(items));
    }
    let alts = o.get("anyOf").or_else(|| o.get("oneOf"));
    if let Some(Value::Array(a)) = alts {
        out.insert(
            "anyOf".into(),
            Value::Array(a.iter().map(project_output_schema).collect()),
        );
    }
    Value::Object(out)
}
