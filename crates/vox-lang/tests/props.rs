//! Invariants over generated inputs.

use proptest::prelude::*;
use serde_json::Value as J;
use vox_lang::{CallOptions, Module, analyze};

fn json_strategy() -> impl Strategy<Value = J> {
    let leaf = prop_oneof![
        Just(J::Null),
        any::<bool>().prop_map(J::Bool),
        any::<i64>().prop_map(J::from),
        (-1e12f64..1e12).prop_map(J::from),
        "[a-zA-Z0-9 {}\"\\\\\n]{0,12}".prop_map(J::String),
    ];
    leaf.prop_recursive(4, 40, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(J::Array),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..6)
                .prop_map(|m| J::Object(m.into_iter().collect())),
        ]
    })
}

/// JSON without nulls inside containers: `null` becomes `None`, which maps back to `null`,
/// so only exact round trips are compared.
fn strip_nested_nulls(j: &J) -> bool {
    match j {
        J::Array(a) => a.iter().all(|x| !x.is_null() && strip_nested_nulls(x)),
        J::Object(o) => o.values().all(|x| !x.is_null() && strip_nested_nulls(x)),
        _ => true,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn analyze_never_panics_on_arbitrary_text(s in "\\PC{0,300}") {
        let a = analyze("p.vox", s.as_bytes());
        let _ = a.render();
    }

    #[test]
    fn analyze_never_panics_on_token_soup(parts in prop::collection::vec(prop_oneof![
        Just("fn"), Just("f"), Just("("), Just(")"), Just("{"), Just("}"), Just("["), Just("]"),
        Just("let"), Just("x"), Just("="), Just("+"), Just("match"), Just("=>"), Just("->"),
        Just("@tool"), Just("\n"), Just("\"s{x}\""), Just("1"), Just(","), Just("|>"),
        Just("if"), Just("else"), Just("type"), Just("T"), Just("|"), Just(":"), Just("?"),
        Just("component"), Just("r#\""), Just("'"), Just("for"), Just("in"), Just("return"),
    ], 0..120)) {
        let src = parts.join(" ");
        let a = analyze("soup.vox", src.as_bytes());
        let _ = a.render();
        if let Ok(m) = a.into_module() {
            let opts = CallOptions { budget: vox_lang::Budget { max_steps: 5_000, ..Default::default() }, log: None, events: None, cancel: None, workspace: None };
            for f in m.functions() {
                let _ = m.call_json(&f.name, &J::Null, &opts);
            }
        }
    }

    #[test]
    fn json_arguments_round_trip_through_values(j in json_strategy()) {
        prop_assume!(strip_nested_nulls(&j));
        let m = Module::compile("id.vox", b"fn id(x) { x }\n").unwrap();
        let out = m.call_json("id", &serde_json::json!({"x": j.clone()}), &CallOptions::default());
        let out = out.unwrap().value;
        match (&j, &out) {
            // Integral floats come back as floats; compare numerically.
            (J::Number(a), J::Number(b)) => prop_assert_eq!(a.as_f64(), b.as_f64()),
            _ => prop_assert_eq!(&out, &j),
        }
    }
}
