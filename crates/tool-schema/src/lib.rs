//! Tool arguments and their JSON Schemas, as MCP servers need them: arguments decoded strictly
//! with errors that name the argument's path ([`decode`], [`Strict`]), input schemas every
//! client can read ([`schema_of`], [`portable`], [`portability_problems`]), an internally
//! tagged enum advertised as one flat object ([`tagged_as_object`]), and object-rooted output
//! schemas ([`output_schema_of`]). It knows no transport and no server: vox's families and
//! codex-mmo's `mmo_mesh` share it.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::borrow::Cow;

/// Arguments that do not decode: the message names the argument's path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct DecodeError {
    /// What was wrong, and where (`invalid argument `a.b`: …`).
    pub message: String,
}

impl DecodeError {
    /// The stable code of bad arguments.
    pub fn code(&self) -> &'static str {
        "invalid_arguments"
    }
}

/// Decodes arguments strictly: unknown fields are errors, and errors name the argument's path.
/// A top-level argument given as `null` is taken as left out, so it gets its default: the input
/// schema advertises optional arguments by their plain type ([`schema_of`]), and clients that
/// send `null` for every argument they do not set still work.
pub fn decode<A: DeserializeOwned>(mut args: Value) -> Result<A, DecodeError> {
    if let Value::Object(o) = &mut args {
        o.retain(|_, v| !v.is_null());
    }
    serde_path_to_error::deserialize(args).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let message = if path == "." {
            format!("invalid arguments: {inner}")
        } else {
            format!("invalid argument `{path}`: {inner}")
        };
        DecodeError { message }
    })
}

/// Arguments that deserialize through [`decode`]: a server whose framework deserializes
/// arguments with plain serde (rmcp's `Parameters<T>`) gets `decode`'s null handling and
/// path-naming errors by asking for `Strict<T>`. Its schema is `T`'s.
#[derive(Debug, Clone, PartialEq)]
pub struct Strict<T>(pub T);

impl<'de, T: DeserializeOwned> serde::Deserialize<'de> for Strict<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        decode(v).map(Strict).map_err(serde::de::Error::custom)
    }
}

impl<T: JsonSchema> JsonSchema for Strict<T> {
    fn schema_name() -> Cow<'static, str> {
        T::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }
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

/// The schema of an internally tagged enum (`#[serde(tag = "…")]`, one object shape per
/// variant) as one object schema: the union of the variants' properties, `tag` a string enum of
/// the variants' names described as `"`name`: the variant's description; …"`, and `required`
/// what every variant requires. Clients that turn tool schemas into function declarations
/// (Codex among them) read only a root's `properties`, not a root `oneOf`. The variants stay
/// strict when decoded: a property of another variant is refused there. `schema` is returned
/// unchanged when it is not such a union.
pub fn tagged_as_object(schema: Value, tag: &str) -> Value {
    let Some(variants) = schema
        .get("oneOf")
        .or_else(|| schema.get("anyOf"))
        .and_then(Value::as_array)
    else {
        return schema;
    };
    let mut properties = serde_json::Map::new();
    let mut names = Vec::new();
    let mut described = Vec::new();
    let mut required: Option<Vec<Value>> = None;
    for v in variants {
        let Some(name) = v["properties"][tag]["const"]
            .as_str()
            .or_else(|| v["properties"][tag]["enum"][0].as_str())
        else {
            return schema;
        };
        names.push(json!(name));
        if let Some(d) = v.get("description").and_then(Value::as_str) {
            described.push(format!("`{name}`: {}", d.trim().trim_end_matches('.')));
        }
        for (k, p) in v["properties"].as_object().into_iter().flatten() {
            if k != tag {
                properties.entry(k.clone()).or_insert_with(|| p.clone());
            }
        }
        let here: Vec<Value> = v["required"].as_array().cloned().unwrap_or_default();
        required = Some(match required {
            None => here,
            Some(all) => all.into_iter().filter(|r| here.contains(r)).collect(),
        });
    }
    let mut tag_schema = json!({"type": "string", "enum": names});
    if !described.is_empty() {
        tag_schema["description"] = json!(format!("{}.", described.join("; ")));
    }
    let mut all = serde_json::Map::new();
    all.insert(tag.to_string(), tag_schema);
    all.extend(properties);
    let mut out = json!({"type": "object", "properties": all});
    if let Some(d) = schema.get("description") {
        out["description"] = d.clone();
    }
    out["required"] = json!(required.unwrap_or_default());
    out["additionalProperties"] = json!(false);
    // `portable` does not look inside the variants of a union; their properties are here now.
    portable(&mut out);
    out
}

/// The MCP `outputSchema` of a result type: how it serializes, with every subschema inlined.
/// MCP wants an object schema at the top. An object result (or one of several object shapes)
/// is described as it is; a result that is never an object is described inside
/// `{"result": …}`, which is how a server wraps such a value in `structuredContent`.
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

#[cfg(test)]
mod tests;
