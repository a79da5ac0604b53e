//! Arguments for record- and ADT-typed parameters are checked against the declared types: a
//! value of the wrong shape is an input error naming its path, never a run-time error.

use serde_json::{Value as J, json};
use vox_lang::{CallError, CallOptions, Module};

const ORDERS: &str = r#"
type Line { sku: str, qty: int, note: Option[str] }
type Order { id: str, lines: list[Line], rush: bool, ship: Ship }
type Ship = | Pickup | Courier(zone: int, express: Option[bool]) | Post(int)

@tool
fn total(order: Order) to int {
    order.lines.fold(0, fn(acc, l) { acc + l.qty })
}

@tool
fn notes(order: Order) to list[str] {
    order.lines.map(fn(l) { match l.note { Some(n) => n, None => "-" } })
}

@tool
fn zone(order: Order) to int {
    match order.ship { Pickup => 0, Courier(z, _) => z, Post(n) => n }
}

@tool
fn maybe(line: Option[Line] = None) to int {
    match line { Some(l) => l.qty, None => -1 }
}
"#;

fn module() -> Module {
    match Module::compile("orders.vox", ORDERS.as_bytes()) {
        Ok(m) => m,
        Err(e) => panic!("does not compile:\n{}", e.render()),
    }
}

fn call(f: &str, args: J) -> Result<J, CallError> {
    module()
        .call_json(f, &args, &CallOptions::default())
        .map(|o| o.value)
}

fn good_order() -> J {
    json!({
        "id": "o-1",
        "rush": false,
        "ship": {"variant": "Courier", "fields": {"zone": 3}},
        "lines": [
            {"sku": "a", "qty": 2},
            {"sku": "b", "qty": 5, "note": "fragile"},
            {"sku": "c", "qty": 1, "note": null}
        ]
    })
}

/// The input error for `args`, asserting that it is one (not a run-time error).
fn input_error(f: &str, args: J) -> String {
    match call(f, args) {
        Err(e @ CallError::Input { .. }) => {
            assert!(e.is_input_error());
            e.to_string()
        }
        other => panic!("expected an input error, got {other:?}"),
    }
}

#[test]
fn a_well_formed_record_argument_is_accepted_with_option_fields_left_out() {
    assert_eq!(
        call("total", json!({"order": good_order()})).unwrap(),
        json!(8)
    );
    assert_eq!(
        call("notes", json!({"order": good_order()})).unwrap(),
        json!(["-", "fragile", "-"])
    );
    assert_eq!(
        call("zone", json!({"order": good_order()})).unwrap(),
        json!(3)
    );
    let mut o = good_order();
    o["ship"] = json!({"variant": "Pickup"});
    assert_eq!(call("zone", json!({"order": o})).unwrap(), json!(0));
    o["ship"] = json!({"variant": "Post", "fields": {"_0": 9}});
    assert_eq!(call("zone", json!({"order": o})).unwrap(), json!(9));
    assert_eq!(call("maybe", json!({})).unwrap(), json!(-1));
    assert_eq!(
        call("maybe", json!({"line": {"sku": "x", "qty": 4}})).unwrap(),
        json!(4)
    );
}

#[test]
fn a_wrong_type_deep_in_a_record_names_its_path() {
    let mut o = good_order();
    o["lines"][2]["qty"] = json!("1");
    let e = input_error("total", json!({"order": o}));
    assert!(
        e.contains("`order.lines[2].qty` must be an integer, got string"),
        "{e}"
    );
    let mut o = good_order();
    o["lines"][1]["note"] = json!(7);
    let e = input_error("notes", json!({"order": o}));
    assert!(e.contains("`order.lines[1].note` must be a string"), "{e}");
    let mut o = good_order();
    o["lines"] = json!({"sku": "a"});
    let e = input_error("total", json!({"order": o}));
    assert!(
        e.contains("`order.lines` must be an array, got object"),
        "{e}"
    );
}

#[test]
fn a_missing_record_field_names_its_path() {
    let mut o = good_order();
    o["lines"][0].as_object_mut().unwrap().remove("qty");
    let e = input_error("total", json!({"order": o}));
    assert!(e.contains("`order.lines[0].qty` is missing"), "{e}");
    let mut o = good_order();
    o.as_object_mut().unwrap().remove("rush");
    let e = input_error("total", json!({"order": o}));
    assert!(e.contains("`order.rush` is missing"), "{e}");
}

#[test]
fn an_unknown_record_field_names_its_path_and_the_known_fields() {
    let mut o = good_order();
    o["lines"][1]["quantity"] = json!(5);
    let e = input_error("total", json!({"order": o}));
    assert!(
        e.contains("`order.lines[1].quantity` is not a field"),
        "{e}"
    );
    assert!(e.contains("`sku`, `qty`, `note`"), "{e}");
}

#[test]
fn a_record_argument_that_is_not_an_object_is_an_input_error() {
    let e = input_error("total", json!({"order": [1, 2]}));
    assert!(
        e.contains("`order` must be an object (a `Order` record), got array"),
        "{e}"
    );
    let e = input_error("maybe", json!({"line": "x"}));
    assert!(e.contains("`line` must be an object"), "{e}");
}

#[test]
fn adt_fields_are_checked_like_record_fields() {
    let cases = [
        (json!("Courier"), "variant `Courier` of `Ship` has fields"),
        (json!(7), "`order.ship` must be a `Ship` value"),
        (json!({"fields": {}}), "`order.ship.variant` is missing"),
        (
            json!({"variant": 3}),
            "`order.ship.variant` must be a string",
        ),
        (
            json!({"variant": "Drone"}),
            "`Drone` is not a variant of `Ship`",
        ),
        (
            json!({"variant": "Courier", "fields": {"zone": "3"}}),
            "`order.ship.fields.zone` must be an integer",
        ),
        (
            json!({"variant": "Courier", "fields": {}}),
            "`order.ship.fields.zone` is missing",
        ),
        (
            json!({"variant": "Courier", "fields": {"zone": 1, "speed": 2}}),
            "`order.ship.fields.speed` is not a field: variant `Courier`",
        ),
        (
            json!({"variant": "Pickup", "fields": {"zone": 1}}),
            "variant `Pickup` has no fields",
        ),
        (
            json!({"variant": "Courier", "fields": [1]}),
            "`order.ship.fields` must be an object, got array",
        ),
        (
            json!({"variant": "Courier", "fields": {"zone": 1}, "extra": 1}),
            "`order.ship` has an unknown key `extra`",
        ),
    ];
    for (ship, want) in cases {
        let mut o = good_order();
        o["ship"] = ship.clone();
        let e = input_error("zone", json!({"order": o}));
        assert!(e.contains(want), "{ship}: {e}");
    }
    // An `Option` field of a variant may be given or left out.
    let mut o = good_order();
    o["ship"] = json!({"variant": "Courier", "fields": {"zone": 4, "express": true}});
    assert_eq!(call("zone", json!({"order": o})).unwrap(), json!(4));
}

/// A record or ADT parameter's schema says what the call accepts: a record's exact fields
/// (its `Option`s not required), an ADT's variants as `{"variant", "fields"}`, each defined once
/// in `$defs` (snake-case keys) and referred to, a recursive type by its own reference.
#[test]
fn record_and_adt_parameters_are_described_by_the_input_schema() {
    let src = r#"
type Line = { sku: str, qty: int, note: Option[str] }
type Order = { id: int, lines: list[Line] }
type Shape = | Circle(r: float) | Rect(w: float, h: float) | Dot
type TreeNode = | Leaf(v: int) | Node(left: TreeNode, right: TreeNode)
@tool
fn place(order: Order, shape: Shape, tree: TreeNode, more: list[Line]) { order.id }
@tool
fn plain(n: int) { n }
"#;
    let m = Module::compile("s.vox", src.as_bytes()).unwrap_or_else(|e| panic!("{}", e.render()));
    let s = m.input_schema("place").unwrap();
    assert_eq!(
        s["$schema"],
        json!("https://json-schema.org/draft/2020-12/schema")
    );
    assert_eq!(s["properties"]["order"], json!({"$ref": "#/$defs/order"}));
    assert_eq!(
        s["properties"]["more"],
        json!({"type": "array", "items": {"$ref": "#/$defs/line"}})
    );
    let defs = &s["$defs"];
    assert_eq!(
        defs["line"],
        json!({
            "type": "object",
            "description": "record `Line`",
            "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}, "note": {"type": "string"}},
            "required": ["sku", "qty"],
            "additionalProperties": false
        })
    );
    assert_eq!(
        defs["order"]["properties"]["lines"],
        json!({"type": "array", "items": {"$ref": "#/$defs/line"}})
    );
    let shape = &defs["shape"];
    assert_eq!(shape["description"], json!("one variant of `Shape`"));
    let variants = shape["oneOf"].as_array().unwrap();
    assert_eq!(variants.len(), 3);
    assert_eq!(
        variants[1]["properties"]["variant"],
        json!({"const": "Rect"})
    );
    assert_eq!(variants[1]["required"], json!(["variant", "fields"]));
    assert_eq!(
        variants[1]["properties"]["fields"]["required"],
        json!(["w", "h"])
    );
    // A variant without fields may leave `fields` out.
    assert_eq!(variants[2]["required"], json!(["variant"]));
    // A recursive type refers to itself.
    let node = &defs["tree_node"]["oneOf"][1]["properties"]["fields"]["properties"];
    assert_eq!(node["left"], json!({"$ref": "#/$defs/tree_node"}));
    assert_eq!(defs.as_object().unwrap().len(), 4);
    // A tool without user types has neither `$defs` nor `$schema`.
    let plain = m.input_schema("plain").unwrap();
    assert!(
        plain.get("$defs").is_none() && plain.get("$schema").is_none(),
        "{plain}"
    );
    // What the schema describes, the call accepts.
    let out = m
        .call_json(
            "place",
            &json!({
                "order": {"id": 7, "lines": [{"sku": "a", "qty": 1}]},
                "shape": {"variant": "Dot"},
                "tree": {"variant": "Node", "fields": {"left": {"variant": "Leaf", "fields": {"v": 1}}, "right": {"variant": "Leaf", "fields": {"v": 2}}}},
                "more": []
            }),
            &CallOptions::default(),
        )
        .unwrap();
    assert_eq!(out.value, json!(7));
}
