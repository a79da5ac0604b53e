use super::*;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, JsonSchema, Debug, PartialEq)]
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

#[derive(Deserialize, JsonSchema, Debug, PartialEq)]
#[serde(rename_all = "snake_case")]
enum Level {
    Low,
    High,
}

#[derive(Deserialize, JsonSchema, Debug, PartialEq)]
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
fn decoding_errors_name_the_arguments_path() {
    let e = decode::<Args>(json!({"key": "k", "range": {"from": "one"}})).unwrap_err();
    assert!(
        e.message.starts_with("invalid argument `range.from`: "),
        "{e}"
    );
    let e = decode::<Args>(json!({})).unwrap_err();
    assert_eq!(e.message, "invalid arguments: missing field `key`");
}

#[test]
fn strict_arguments_decode_through_decode_whatever_deserializes_them() {
    let Strict(a): Strict<Args> =
        serde_json::from_value(json!({"key": "k", "prefix": null})).unwrap();
    assert_eq!(a.prefix, None);
    let e = serde_json::from_value::<Strict<Args>>(json!({"key": "k", "range": {"from": -1}}))
        .unwrap_err();
    assert!(
        e.to_string().starts_with("invalid argument `range.from`: "),
        "{e}"
    );
    assert_eq!(
        schemars::schema_for!(Strict<Args>),
        schemars::schema_for!(Args)
    );
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

/// What to do with a thing.
#[derive(Deserialize, JsonSchema, Debug, PartialEq)]
#[serde(tag = "action", rename_all = "snake_case", deny_unknown_fields)]
enum Act {
    /// Look at it.
    Look(Target),
    /// Say something to it.
    Say(Said),
}

#[derive(Deserialize, JsonSchema, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
struct Target {
    /// The thing.
    thing: String,
}

#[derive(Deserialize, JsonSchema, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
struct Said {
    /// The thing.
    thing: String,
    /// What is said.
    text: String,
    /// How loud.
    volume: Option<u8>,
}

#[test]
fn a_tagged_enum_is_advertised_as_one_object_and_decoded_strictly_per_variant() {
    let s = tagged_as_object(schema_of::<Act>(), "action");
    assert_eq!(portability_problems(&s), Vec::<String>::new(), "{s}");
    assert_eq!(s["description"], "What to do with a thing.");
    assert_eq!(s["properties"]["action"]["enum"], json!(["look", "say"]));
    assert_eq!(
        s["properties"]["action"]["description"],
        "`look`: Look at it; `say`: Say something to it."
    );
    assert_eq!(s["properties"]["thing"]["description"], "The thing.");
    assert_eq!(s["properties"]["text"]["type"], "string");
    assert_eq!(s["properties"]["volume"]["type"], "integer");
    assert_eq!(s["required"], json!(["action", "thing"]), "{s}");
    assert_eq!(s["additionalProperties"], false);
    assert_eq!(
        decode::<Act>(json!({"action": "say", "thing": "t", "text": "hi", "volume": null}))
            .unwrap(),
        Act::Say(Said {
            thing: "t".into(),
            text: "hi".into(),
            volume: None
        })
    );
    let e = decode::<Act>(json!({"action": "look", "thing": "t", "text": "hi"})).unwrap_err();
    assert!(e.message.contains("unknown field `text`"), "{e}");
    let e = decode::<Act>(json!({"action": "shout", "thing": "t"})).unwrap_err();
    assert!(e.message.contains("unknown variant `shout`"), "{e}");
    // Not a tagged union: unchanged.
    assert_eq!(
        tagged_as_object(schema_of::<Args>(), "action"),
        schema_of::<Args>()
    );
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
    // A value that is never an object is described as a server wraps it.
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
