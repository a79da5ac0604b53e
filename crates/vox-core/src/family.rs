//! A tool family is one module outside the core: its boot steps (functions it registers
//! against the contract's [`BootStep`]s), its state (put into the [`Ctx`] at boot), its
//! handlers and, where it needs them, hooks into the call path ([`Hooks`]). The core knows
//! families only through [`Family`]; adding one changes nothing here.
//!
//! A handler is an async function of the booted context, the call ([`CallCtx`]: caller,
//! cancellation, progress and log sinks) and its typed arguments; it knows nothing of
//! transports. Synchronous handlers run on the blocking pool through [`blocking`] / [`typed`]
//! and check `call.cancel` between their units of work.

use crate::call::CallCtx;
use crate::ctx::Ctx;
use crate::error::ToolError;
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use vox_mcp_registry::BootStep;

/// What a boot step did.
pub enum StepDone {
    /// The subsystem is up; the detail says how.
    Ready(String),
    /// The subsystem has no tools in this build: nothing was started, and the boot report
    /// says so (`placeholder`) instead of claiming it is up.
    Placeholder(&'static str),
}

/// One boot step's work: it may put state into the context and register hooks.
pub type StepFn = fn(&mut Ctx) -> Result<StepDone, String>;

/// A boot step that starts nothing: its subsystem's tools have not landed.
pub fn placeholder(_ctx: &mut Ctx) -> Result<StepDone, String> {
    Ok(StepDone::Placeholder("no tools in this build"))
}

/// One tool family, as it registers itself.
#[derive(Default)]
pub struct Family {
    /// The family's name, for logs and errors.
    pub name: &'static str,
    /// The contract steps this family performs (each step belongs to exactly one family).
    pub steps: Vec<(BootStep, StepFn)>,
    /// Its tools, by catalog name.
    pub handlers: Vec<(&'static str, HandlerEntry)>,
    /// Runs after every boot step, for state no contract step owns (the skill catalog).
    pub after_boot: Option<fn(&mut Ctx)>,
    /// Runs once the context is shared (background work such as a file watcher).
    pub on_started: Option<fn(Arc<Ctx>)>,
    /// Runs when the daemon stops, before it lets go of its workspace: what the family started
    /// outside this process must end here (processes it runs).
    pub on_stopping: Option<fn(&Ctx)>,
}

/// What a handler's future yields once its typed result is encoded.
pub type HandlerResult = Result<Value, ToolError>;

/// A handler's future: owned, so the deadline and the transport can drop it.
pub type HandlerFuture = Pin<Box<dyn Future<Output = HandlerResult> + Send>>;

/// A handler: the booted context, the call, the raw arguments.
type HandlerFn = Box<dyn Fn(Arc<Ctx>, CallCtx, Value) -> HandlerFuture + Send + Sync>;

/// A handler with the input schema generated from its argument type and the output schema
/// from its result type.
pub struct HandlerEntry {
    /// The input schema (a JSON Schema object), generated from the argument type.
    pub schema: Value,
    /// The MCP `outputSchema` (an object schema); `None` when the result type does not say
    /// what an answer looks like.
    pub output_schema: Option<Value>,
    /// Decodes the arguments and runs the handler.
    pub call: HandlerFn,
}

/// Decodes arguments strictly: unknown fields are errors, and errors name the argument's path.
/// A top-level argument given as `null` is taken as left out, so it gets its default: the input
/// schema advertises optional arguments by their plain type ([`schema_of`]), and clients that
/// send `null` for every argument they do not set still work.
pub fn decode<A: DeserializeOwned>(mut args: Value) -> Result<A, ToolError> {
    if let Value::Object(o) = &mut args {
        o.retain(|_, v| !v.is_null());
    }
    serde_path_to_error::deserialize(args).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            ToolError::invalid_arguments(format!("invalid arguments: {inner}"))
        } else {
            ToolError::invalid_arguments(format!("invalid argument `{path}`: {inner}"))
        }
    })
}

/// Encodes a handler's typed result.
fn encode<R: Serialize>(r: Result<R, ToolError>) -> HandlerResult {
    serde_json::to_value(r?)
        .map_err(|e| ToolError::internal(format!("the result cannot be encoded: {e}")))
}

/// A schema generated with every subschema inlined (no `$ref` for a client to resolve), without
/// the meta-schema URI and the Rust type name.
fn generated<T: JsonSchema>(settings: SchemaSettings) -> Value {
    let schema = settings
        .with(|s| s.inline_subschemas = true)
        .into_generator()
        .into_root_schema_for::<T>();
    let mut schema = serde_json::to_value(schema).unwrap_or_else(|_| json!({}));
    if let Some(obj) = schema.as_object_mut() {
        obj.remove("$schema");
        obj.remove("title");
    }
    object_subschemas(&mut schema);
    schema
}

/// Rewrites boolean subschemas as objects (`true` as `{}`, `false` as `{"not": {}}`), which
/// mean the same: schemars writes `true` for a `serde_json::Value` field, and clients such as
/// the MCP TypeScript SDK refuse a tool list whose `properties` hold anything but objects.
/// `additionalProperties: false` stays: every client reads it.
fn object_subschemas(schema: &mut Value) {
    fn as_object(v: &mut Value) {
        if let Value::Bool(b) = v {
            *v = if *b { json!({}) } else { json!({"not": {}}) };
        }
    }
    let Value::Object(obj) = schema else {
        return;
    };
    for (key, v) in obj.iter_mut() {
        match (key.as_str(), v) {
            // Values of these keywords are instances, not schemas.
            ("enum" | "const" | "default" | "examples", _) => {}
            ("properties" | "patternProperties" | "$defs" | "definitions", Value::Object(m)) => {
                for x in m.values_mut() {
                    as_object(x);
                    object_subschemas(x);
                }
            }
            ("anyOf" | "oneOf" | "allOf" | "prefixItems", Value::Array(a)) => {
                for x in a {
                    as_object(x);
                    object_subschemas(x);
                }
            }
            ("items" | "not" | "contains" | "propertyNames" | "if" | "then" | "else", x) => {
                as_object(x);
                object_subschemas(x);
            }
            (_, x) => object_subschemas(x),
        }
    }
}

/// The input schema of an argument type, as portable as clients need it: a plain object
/// schema with every subschema inlined, where an optional argument is advertised as its plain
/// type and left out of `required` (no `"type": [T, "null"]`, no `anyOf` with a null branch;
/// [`portable`]). Decoding still accepts `null` for an optional argument, like its absence.
pub fn schema_of<A: JsonSchema>() -> Value {
    let mut schema = generated::<A>(SchemaSettings::draft2020_12().for_deserialize());
    portable(&mut schema);
    if let Some(obj) = schema.as_object_mut() {
        obj.entry("type").or_insert("object".into());
        obj.entry("properties").or_insert(json!({}));
    }
    schema
}

/// The MCP `outputSchema` of a result type: how it serializes, with every subschema inlined.
/// MCP wants an object schema at the top. An object result (or one of several object shapes)
/// is described as it is; a result that is never an object is described inside
/// `{"result": …}`, which is how `vox_mcp::encode` wraps such a value in `structuredContent`.
/// `None` when the type does not say whether it is an object (`serde_json::Value`).
pub fn output_schema_of<R: JsonSchema>() -> Option<Value> {
    object_root(generated::<R>(
        SchemaSettings::draft2020_12().for_serialize(),
    ))
}

/// `schema` as an object-rooted output schema (see [`output_schema_of`]).
pub fn object_root(mut schema: Value) -> Option<Value> {
    match root_kind(&schema) {
        RootKind::Object => {
            if let Some(obj) = schema.as_object_mut() {
                obj.entry("type").or_insert("object".into());
            }
            Some(schema)
        }
        RootKind::NotObject => {
            let description = schema.as_object_mut().and_then(|o| o.remove("description"));
            let mut wrapped = json!({
                "type": "object",
                "properties": {"result": schema},
                "required": ["result"],
                "additionalProperties": false,
            });
            if let Some(d) = description {
                wrapped["description"] = d;
            }
            Some(wrapped)
        }
        RootKind::Unknown => None,
    }
}

enum RootKind {
    /// Every value it admits is an object.
    Object,
    /// No value it admits is an object.
    NotObject,
    Unknown,
}

fn root_kind(schema: &Value) -> RootKind {
    let Some(obj) = schema.as_object() else {
        return RootKind::Unknown;
    };
    match obj.get("type") {
        Some(Value::String(t)) if t == "object" => return RootKind::Object,
        Some(Value::String(_)) => return RootKind::NotObject,
        Some(Value::Array(ts)) if !ts.iter().any(|t| t == "object") => {
            return RootKind::NotObject;
        }
        Some(_) => return RootKind::Unknown,
        None => {}
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = obj.get(key) {
            let kinds: Vec<RootKind> = branches.iter().map(root_kind).collect();
            if !kinds.is_empty() && kinds.iter().all(|k| matches!(k, RootKind::Object)) {
                return RootKind::Object;
            }
            if !kinds.is_empty() && kinds.iter().all(|k| matches!(k, RootKind::NotObject)) {
                return RootKind::NotObject;
            }
            return RootKind::Unknown;
        }
    }
    RootKind::Unknown
}

/// Rewrites a schema so that nothing in it is nullable, recursively (`properties`, `items`,
/// `$defs`, branches): `"type": [T, "null"]` becomes `"type": T` (several non-null types
/// become an `anyOf`), `anyOf` / `oneOf` `[X, {"type": "null"}]` becomes X (merged with the
/// keywords beside it, which win), `null` leaves `enum`, and `"default": null` goes. Some
/// model APIs and the MCP Inspector reject or warn about nullable types; an optional argument
/// is already optional by not being `required`.
pub fn portable(schema: &mut Value) {
    let Value::Object(obj) = schema else {
        return;
    };
    for (key, v) in obj.iter_mut() {
        // Values of these keywords are instances, not schemas.
        if !matches!(key.as_str(), "enum" | "const" | "default" | "examples") {
            portable(v);
        }
    }
    if let Some(Value::Array(types)) = obj.get_mut("type") {
        types.retain(|t| t != "null");
        match types.len() {
            0 => {
                obj.remove("type");
            }
            1 => {
                let t = types.remove(0);
                obj.insert("type".into(), t);
            }
            _ => {
                let branches: Vec<Value> = types.iter().map(|t| json!({"type": t})).collect();
                obj.remove("type");
                obj.insert("anyOf".into(), Value::Array(branches));
            }
        }
    }
    if let Some(Value::Array(values)) = obj.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    if obj.get("default").is_some_and(Value::is_null) {
        obj.remove("default");
    }
    for key in ["anyOf", "oneOf"] {
        let Some(Value::Array(branches)) = obj.get_mut(key) else {
            continue;
        };
        branches.retain(|b| b.get("type").is_none_or(|t| t != "null"));
        if branches.is_empty() {
            obj.remove(key);
        } else if branches.len() == 1 {
            let only = branches.remove(0);
            obj.remove(key);
            if let Value::Object(inner) = only {
                for (k, v) in inner {
                    obj.entry(k).or_insert(v);
                }
            }
        }
    }
}

/// What keeps an input schema from being portable, by JSON pointer: a root that is not
/// `"type": "object"`, a `"null"` type, a type array, or a `$ref` / `$defs` (which some clients
/// cannot resolve). Empty for what [`schema_of`] makes.
pub fn portability_problems(schema: &Value) -> Vec<String> {
    fn walk(v: &Value, at: &str, out: &mut Vec<String>) {
        match v {
            Value::Object(o) => {
                for (k, x) in o {
                    let here = format!("{at}/{k}");
                    match (k.as_str(), x) {
                        ("type", Value::Array(_)) => out.push(format!("{here}: a type array")),
                        ("type", Value::String(t)) if t == "null" => {
                            out.push(format!("{here}: the null type"));
                        }
                        ("$ref" | "$defs" | "definitions", _) => {
                            out.push(format!("{here}: a reference"));
                        }
                        ("properties", Value::Object(m)) => {
                            for (name, p) in m {
                                if !p.is_object() {
                                    out.push(format!("{here}/{name}: not an object schema"));
                                }
                            }
                        }
                        _ => {}
                    }
                    if !matches!(k.as_str(), "enum" | "const" | "default" | "examples") {
                        walk(x, &here, out);
                    }
                }
            }
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    walk(x, &format!("{at}/{i}"), out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        out.push("the root is not \"type\": \"object\"".into());
    }
    walk(schema, "", &mut out);
    out
}

/// An async handler: `f(ctx, call, args)` with typed arguments and a typed result; the input
/// schema comes from the argument type, the output schema from the result type.
pub fn async_typed<A, R, F, Fut>(f: F) -> HandlerEntry
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    R: Serialize + JsonSchema + 'static,
    F: Fn(Arc<Ctx>, CallCtx, A) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, ToolError>> + Send + 'static,
{
    let f = Arc::new(f);
    HandlerEntry {
        schema: schema_of::<A>(),
        output_schema: output_schema_of::<R>(),
        call: Box::new(move |ctx, call, args| {
            let f = f.clone();
            Box::pin(async move { encode(f(ctx, call, decode::<A>(args)?).await) })
        }),
    }
}

/// Runs synchronous work (SQLite, tantivy, git, the interpreter, the sandbox) on the blocking
/// pool. The work cannot be dropped, so it checks `call.cancel` between its units.
pub async fn run_blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(r) => r,
        Err(join) => Err(ToolError::internal(format!("the handler panicked: {join}"))),
    }
}

/// A synchronous handler that reads the call (its session, cancellation, progress, logs).
pub fn blocking<A, R>(f: fn(&Ctx, &CallCtx, A) -> Result<R, ToolError>) -> HandlerEntry
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    R: Serialize + JsonSchema + Send + 'static,
{
    async_typed::<A, R, _, _>(move |ctx, call, a| run_blocking(move || f(&ctx, &call, a)))
}

/// A synchronous handler of the context and its arguments alone.
pub fn typed<A, R>(f: fn(&Ctx, A) -> Result<R, ToolError>) -> HandlerEntry
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    R: Serialize + JsonSchema + Send + 'static,
{
    async_typed::<A, R, _, _>(move |ctx, _call, a| run_blocking(move || f(&ctx, a)))
}

/// A synchronous handler that is quick and bounded (a SQLite point lookup or a one-row write,
/// reading the call if it needs to): it runs on
/// the async worker itself when `inline(ctx)` says nothing it needs is busy, and on the
/// blocking pool otherwise. The hand-off to the blocking pool costs two thread wake-ups, more
/// than such a call's own work; but a worker must never wait behind a long write or scan, so
/// `inline` checks (e.g. that no long store operation is under way). Anything that can take longer
/// than a point read must use [`typed`].
pub fn quick<A, R>(
    f: fn(&Ctx, &CallCtx, A) -> Result<R, ToolError>,
    inline: fn(&Ctx) -> bool,
) -> HandlerEntry
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    R: Serialize + JsonSchema + Send + 'static,
{
    HandlerEntry {
        schema: schema_of::<A>(),
        output_schema: output_schema_of::<R>(),
        call: Box::new(move |ctx, call, args| {
            if inline(&ctx) {
                let out = decode::<A>(args).and_then(|a| f(&ctx, &call, a));
                Box::pin(std::future::ready(encode(out)))
            } else {
                Box::pin(async move {
                    let a = decode::<A>(args)?;
                    encode(run_blocking(move || f(&ctx, &call, a)).await)
                })
            }
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, JsonSchema, Debug, PartialEq)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Args {
        /// Required.
        key: String,
        /// Optional, nullable in Rust.
        prefix: Option<String>,
        /// An optional enum.
        level: Option<Level>,
        /// An optional nested type.
        range: Option<Range>,
        #[serde(default)]
        tags: Vec<String>,
    }

    #[derive(serde::Deserialize, JsonSchema, Debug, PartialEq)]
    #[serde(rename_all = "snake_case")]
    enum Level {
        Low,
        High,
    }

    #[derive(serde::Deserialize, JsonSchema, Debug, PartialEq)]
    #[allow(dead_code)]
    struct Range {
        from: u32,
        to: Option<u32>,
    }

    #[test]
    fn optional_arguments_are_advertised_by_their_plain_type_and_inlined() {
        let s = schema_of::<Args>();
        assert_eq!(portability_problems(&s), Vec::<String>::new(), "{s}");
        assert_eq!(s["required"], json!(["key"]));
        assert_eq!(s["properties"]["prefix"]["type"], "string");
        assert_eq!(
            s["properties"]["prefix"]["description"],
            "Optional, nullable in Rust."
        );
        assert_eq!(s["properties"]["level"]["enum"], json!(["low", "high"]));
        assert_eq!(s["properties"]["level"]["type"], "string");
        assert_eq!(s["properties"]["level"]["description"], "An optional enum.");
        let range = &s["properties"]["range"];
        assert_eq!(range["type"], "object", "{range}");
        assert_eq!(range["description"], "An optional nested type.");
        assert_eq!(range["properties"]["to"]["type"], "integer");
        assert_eq!(range["required"], json!(["from"]));
        assert_eq!(s["additionalProperties"], false);
    }

    #[test]
    fn a_null_argument_decodes_like_a_left_out_one() {
        let left_out: Args = decode(json!({"key": "k"})).unwrap();
        let nulls: Args =
            decode(json!({"key": "k", "prefix": null, "level": null, "range": null, "tags": null}))
                .unwrap();
        assert_eq!(left_out, nulls);
        assert_eq!(nulls.tags, Vec::<String>::new());
        let e = decode::<Args>(json!({"key": null})).unwrap_err();
        assert_eq!(e.code(), "invalid_arguments");
        let e = decode::<Args>(json!({"key": "k", "extra": 1})).unwrap_err();
        assert!(e.to_string().contains("extra"), "{e}");
    }

    #[test]
    fn the_portability_check_finds_what_clients_reject() {
        let bad = json!({"type": "object", "properties": {
            "a": {"type": ["string", "null"]},
            "b": {"anyOf": [{"$ref": "#/$defs/B"}, {"type": "null"}]},
            "c": true,
        }, "$defs": {"B": {"type": "string"}}});
        let problems = portability_problems(&bad);
        assert_eq!(problems.len(), 5, "{problems:?}");
        assert!(!portability_problems(&json!({"type": "string"})).is_empty());
    }

    #[derive(Serialize, JsonSchema)]
    struct Out {
        n: u32,
        next: Option<String>,
    }

    #[derive(Serialize, JsonSchema)]
    #[serde(untagged)]
    #[allow(dead_code)]
    enum Either {
        A { a: u32 },
        B { b: String },
    }

    #[test]
    fn output_schemas_have_an_object_root() {
        let o = output_schema_of::<Out>().unwrap();
        assert_eq!(o["type"], "object");
        assert_eq!(o["required"], json!(["n", "next"]));
        // A nullable result field stays nullable: the schema must admit what is sent.
        assert_eq!(o["properties"]["next"]["type"], json!(["string", "null"]));
        assert_eq!(output_schema_of::<Either>().unwrap()["type"], "object");
        // A value that is never an object is described as encode wraps it.
        let wrapped = output_schema_of::<Vec<u32>>().unwrap();
        assert_eq!(wrapped["required"], json!(["result"]));
        assert_eq!(wrapped["properties"]["result"]["type"], "array");
        assert_eq!(output_schema_of::<Value>(), None);
    }

    #[derive(Serialize, JsonSchema)]
    struct AnyField {
        arguments: Value,
        list: Vec<Value>,
    }

    #[test]
    fn a_field_of_any_value_is_an_object_schema() {
        // schemars writes `true`; the MCP TypeScript SDK refuses a tool list holding it.
        let o = output_schema_of::<AnyField>().unwrap();
        assert_eq!(o["properties"]["arguments"], json!({}), "{o}");
        assert_eq!(o["properties"]["list"]["items"], json!({}), "{o}");
        assert!(portability_problems(&o).is_empty(), "{o}");
    }
}
