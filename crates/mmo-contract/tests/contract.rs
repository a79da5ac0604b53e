//! Instance validation and the strict outputSchema projection.

use mmo_contract::{Contract, check_schema, project_output_schema};
use serde_json::{Value, json};

fn contract(v: Value) -> Contract {
    Contract::new(v).unwrap_or_else(|p| panic!("{p:?}"))
}

fn errors(c: &Contract, v: Value) -> Vec<String> {
    c.validate(&v)
        .into_iter()
        .map(|e| format!("{} {}", e.instance_pointer, e.schema_pointer))
        .collect()
}

#[test]
fn closed_object_rejects_extra_property_with_pointer() {
    let c = contract(
        json!({"type":"object","additionalProperties":false,"properties":{"a":{"type":"string"}}}),
    );
    assert_eq!(
        errors(&c, json!({"a":"x","b":1})),
        vec!["/b /additionalProperties"]
    );
    assert!(c.is_valid(&json!({"a":"x"})));
}

#[test]
fn required_and_nested_types_are_checked() {
    let c = contract(
        json!({"type":"object","required":["items"],"properties":{"items":{"type":"array","items":{"type":"integer","minimum":1}}}}),
    );
    assert_eq!(errors(&c, json!({})), vec![" /required"]);
    assert_eq!(
        errors(&c, json!({"items":[1,0,"x"]})),
        vec![
            "/items/1 /properties/items/items/minimum",
            "/items/2 /properties/items/items/type"
        ]
    );
    assert!(
        c.is_valid(&json!({"items":[1, 2.0]})),
        "2.0 is an integer by value"
    );
}

#[test]
fn string_keywords_count_code_points_and_match_patterns() {
    let c = contract(json!({"type":"string","minLength":2,"maxLength":3,"pattern":"^[a-zé]+$"}));
    assert!(c.is_valid(&json!("éé")), "two code points, four bytes");
    assert!(!c.is_valid(&json!("é")));
    assert!(!c.is_valid(&json!("abcd")));
    assert!(!c.is_valid(&json!("AB")));
}

#[test]
fn formats_are_asserted() {
    let c = contract(
        json!({"type":"object","properties":{"u":{"format":"uri"},"d":{"format":"date"},"t":{"format":"date-time"}}}),
    );
    assert!(
        c.is_valid(&json!({"u":"https://a.example/x","d":"2024-02-29","t":"2024-02-29t10:00:00z"}))
    );
    assert_eq!(
        errors(&c, json!({"u":"/relative"})),
        vec!["/u /properties/u/format"]
    );
    assert_eq!(
        errors(&c, json!({"u":"http://a/%G0"})),
        vec!["/u /properties/u/format"]
    );
    assert_eq!(
        errors(&c, json!({"d":"2023-02-29"})),
        vec!["/d /properties/d/format"]
    );
    assert_eq!(
        errors(&c, json!({"t":"2024-02-29T10:00:00"})),
        vec!["/t /properties/t/format"]
    );
    assert!(
        c.is_valid(&json!({"t":"2016-12-31T23:59:60Z"})),
        "leap second"
    );
}

#[test]
fn combinators_follow_their_semantics() {
    let one = contract(json!({"oneOf":[{"type":"integer"},{"minimum":0}]}));
    assert!(one.is_valid(&json!(-1)));
    assert!(!one.is_valid(&json!(1)), "matches both alternatives");
    let any = contract(json!({"anyOf":[{"type":"string"},{"type":"null"}]}));
    assert!(any.is_valid(&json!(null)));
    assert!(!any.is_valid(&json!(1)));
    let not = contract(json!({"not":{"const":"x"}}));
    assert!(!not.is_valid(&json!("x")));
    let cond = contract(
        json!({"if":{"properties":{"s":{"const":"ok"}}},"then":{"required":["e"]},"else":{"required":["why"]}}),
    );
    assert!(!cond.is_valid(&json!({"s":"ok"})));
    assert!(cond.is_valid(&json!({"s":"ok","e":1})));
    assert!(!cond.is_valid(&json!({"s":"bad"})));
    let all = contract(json!({"allOf":[{"minimum":1},{"maximum":2}]}));
    assert!(!all.is_valid(&json!(3)));
}

#[test]
fn enum_const_and_unique_items_compare_numbers_by_value() {
    let c = contract(json!({"type":"array","uniqueItems":true,"items":{"enum":[1,"a"]}}));
    assert!(c.is_valid(&json!([1.0, "a"])));
    assert!(!c.is_valid(&json!([1, 1.0])));
    assert!(!c.is_valid(&json!([2])));
}

#[test]
fn schema_checks_reject_everything_outside_the_subset() {
    let rules = |v: Value| {
        check_schema(&v)
            .into_iter()
            .map(|p| format!("{} {}", p.pointer, p.rule))
            .collect::<Vec<_>>()
    };
    assert_eq!(rules(json!({"$ref":"#/x"})), vec!["/$ref contract_ref"]);
    assert_eq!(
        rules(json!({"$defs":{}})),
        vec!["/$defs contract_unsupported_keyword"]
    );
    assert_eq!(
        rules(json!({"$schema":"https://json-schema.org/draft/2019-09/schema"})),
        vec!["/$schema contract_dialect"]
    );
    assert_eq!(
        rules(json!({"items":[{}]})),
        vec!["/items contract_keyword_value"]
    );
    assert_eq!(
        rules(json!({"pattern":"("})),
        vec!["/pattern contract_pattern"]
    );
    assert_eq!(
        rules(json!({"minLength":-1})),
        vec!["/minLength contract_keyword_value"]
    );
    assert_eq!(
        rules(json!({"type":["string","string"]})),
        vec!["/type contract_keyword_value"]
    );
    assert_eq!(
        rules(json!({"properties":{"a":{"properties":{"b":{"format":"ipv4"}}}}})),
        vec!["/properties/a/properties/b/format contract_format_unsupported"]
    );
    assert_eq!(rules(json!([])), vec![" contract_not_object"]);
    assert!(
        rules(json!({"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object"}))
            .is_empty()
    );
}

#[test]
fn projection_keeps_required_shape_and_drops_validation_only_keywords() {
    let original = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "required": ["verdict", "evidence"],
        "properties": {
            "verdict": {"enum": ["approve", "reject"]},
            "note": {"type": "string", "maxLength": 10},
            "evidence": {
                "type": "array", "minItems": 1, "uniqueItems": true,
                "items": {"oneOf": [
                    {"type":"object","required":["command","exit_code"],"properties":{"command":{"type":"string","pattern":"^\\S"},"exit_code":{"type":"integer"},"stderr":{"type":"string"}}},
                    {"type":"object","required":["relative_path"],"properties":{"relative_path":{"type":"string","minLength":1}}}
                ]}
            }
        },
        "if": {"properties": {"verdict": {"const": "reject"}}},
        "then": {"required": ["note"]}
    });
    let projected = project_output_schema(&original);
    insta::assert_json_snapshot!(projected);
    // The projection itself is in the subset, and a conforming answer also satisfies the original.
    let p = contract(projected);
    let answer = json!({"verdict":"approve","evidence":[{"command":"cargo test","exit_code":0}]});
    assert!(p.is_valid(&answer));
    assert!(contract(original).is_valid(&answer));
}

#[test]
fn cloned_and_moved_contracts_still_enforce_patterns() {
    let original = contract(
        json!({"type":"object","properties":{"h":{"pattern":"^[0-9a-f]+$"}},"pattern":"unused-on-objects"}),
    );
    let cloned = original.clone();
    let moved = [original];
    for c in [&cloned, &moved[0]] {
        assert!(!c.is_valid(&json!({"h":"XYZ"})));
        assert!(c.is_valid(&json!({"h":"abc"})));
    }
    let root = Box::new(contract(json!({"type":"string","pattern":"^a"})));
    assert!(
        !root.is_valid(&json!("b")),
        "a root-level pattern survives moving the contract"
    );
}

#[test]
fn instance_findings_carry_pointer_schema_pointer_and_rule_id() {
    let c = contract(json!({
        "type": "object", "additionalProperties": false, "required": ["verdict", "at"],
        "properties": {
            "verdict": {"enum": ["approve", "reject"]},
            "at": {"type": "string", "format": "date-time"},
            "tags": {"type": "array", "maxItems": 1, "uniqueItems": true, "items": {"type": "string", "minLength": 2}},
            "score": {"type": "integer", "minimum": 0},
            "kind": {"const": "review"},
            "sha": {"type": "string", "pattern": "^[0-9a-f]{4}$"},
            "either": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
            "never": false
        }
    }));
    let found = |v: Value| {
        c.validate(&v)
            .into_iter()
            .map(|e| format!("{} {} {}", e.instance_pointer, e.schema_pointer, e.rule))
            .collect::<Vec<_>>()
    };
    let mut got = found(json!({
        "verdict": "maybe", "at": "2026-11-29T10:00:00", "tags": ["x", "x"], "score": -1,
        "kind": "other", "sha": "XYZ", "either": null, "never": 1, "extra": true, "more": 2
    }));
    got.sort();
    assert_eq!(
        got,
        vec![
            "/at /properties/at/format contract_instance_format".to_string(),
            "/either /properties/either/oneOf contract_instance_one_of".into(),
            "/extra /additionalProperties contract_instance_additional_properties".into(),
            "/kind /properties/kind/const contract_instance_const".into(),
            "/more /additionalProperties contract_instance_additional_properties".into(),
            "/never /properties/never contract_instance_false_schema".into(),
            "/score /properties/score/minimum contract_instance_minimum".into(),
            "/sha /properties/sha/pattern contract_instance_pattern".into(),
            "/tags /properties/tags/maxItems contract_instance_max_items".into(),
            "/tags /properties/tags/uniqueItems contract_instance_unique_items".into(),
            "/tags/0 /properties/tags/items/minLength contract_instance_min_length".into(),
            "/tags/1 /properties/tags/items/minLength contract_instance_min_length".into(),
            "/verdict /properties/verdict/enum contract_instance_enum".into(),
        ]
    );
    let missing = c.validate(&json!({}));
    let messages: Vec<&str> = missing.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "missing required property `verdict`",
            "missing required property `at`"
        ],
        "one finding per missing property"
    );
}

#[test]
fn the_subset_formats_replace_the_engine_builtins() {
    let c = contract(json!({"type":"string","format":"date-time"}));
    assert!(
        c.is_valid(&json!("1998-12-31T15:59:60-08:00")),
        "23:59:60 UTC"
    );
    assert!(
        !c.is_valid(&json!("1998-12-31T22:59:60Z")),
        "a leap second anywhere but 23:59:60 UTC is refused"
    );
    assert!(
        c.is_valid(&json!("1998-12-31t23:59:60z")),
        "lowercase t and z"
    );
    let u = contract(json!({"format":"uri"}));
    assert!(
        !u.is_valid(&json!("http://a/%2")),
        "truncated percent-encoding"
    );
    assert!(
        !u.is_valid(&json!("//example.com/x")),
        "a reference is not a URI"
    );
    assert!(u.is_valid(&json!(12)), "formats constrain strings only");
}

#[test]
fn patterns_are_read_as_ecma_262() {
    let digits = contract(json!({"type":"string","pattern":"^\\d+$"}));
    assert!(digits.is_valid(&json!("042")));
    assert!(
        !digits.is_valid(&json!("٣")),
        "\\d is ASCII digits in ECMA-262, not any Unicode digit"
    );
    let control = contract(json!({"pattern":"^\\cJ$"}));
    assert!(control.is_valid(&json!("\n")), "ECMA-262 control escape");
    let rules = |p: &str| {
        check_schema(&json!({"properties":{"x":{"pattern":p}}}))
            .into_iter()
            .map(|p| format!("{} {}", p.pointer, p.rule))
            .collect::<Vec<_>>()
    };
    for unsupported in ["(?=a)", "(a)\\1", "[z-a]"] {
        assert_eq!(
            rules(unsupported),
            vec!["/properties/x/pattern contract_pattern"],
            "{unsupported}"
        );
    }
}

#[test]
fn draft_07_label_validates_with_the_same_subset() {
    let c = contract(json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "$id": "https://example.com/contracts/verdict.json",
        "type": "object",
        "if": {"properties": {"ok": {"const": false}}},
        "then": {"required": ["why"]}
    }));
    assert!(c.is_valid(&json!({"ok": true})));
    let e = c.validate(&json!({"ok": false}));
    assert_eq!(e.len(), 1);
    assert_eq!(
        (e[0].schema_pointer.as_str(), e[0].rule),
        ("/then/required", "contract_instance_required")
    );
}

#[test]
fn an_id_the_validator_cannot_read_is_a_contract_problem() {
    let problems = check_schema(&json!({"$id": "not a uri %%", "type": "object"}));
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].rule, "contract_engine_rejected");
    assert!(Contract::new(json!({"$id": "not a uri %%"})).is_err());
}
