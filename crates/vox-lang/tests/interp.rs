//! Interpreter behaviour through the public API: JSON in, JSON out.

use serde_json::{Value as J, json};
use std::time::Duration;
use vox_lang::{Budget, BudgetKind, CallError, CallOptions, Module};

fn module(src: &str) -> Module {
    match Module::compile("test.vox", src.as_bytes()) {
        Ok(m) => m,
        Err(e) => panic!("does not compile:\n{}", e.render()),
    }
}

fn call(src: &str, f: &str, args: J) -> Result<J, CallError> {
    module(src)
        .call_json(f, &args, &CallOptions::default())
        .map(|o| o.value)
}

fn ok(src: &str, f: &str, args: J) -> J {
    match call(src, f, args) {
        Ok(v) => v,
        Err(e) => panic!("call failed: {e}"),
    }
}

#[test]
fn arithmetic_and_precedence() {
    let src = "fn f() { 1 + 2 * 3 - 8 / 2 % 3 }\nfn g() { (1 + 2) * 3 }\nfn h() { 7.5 / 2 }";
    assert_eq!(ok(src, "f", J::Null), json!(6));
    assert_eq!(ok(src, "g", J::Null), json!(9));
    assert_eq!(ok(src, "h", J::Null), json!(3.75));
}

#[test]
fn recursion_computes_fib() {
    let src = "fn fib(n: int) to int { if n < 2 { n } else { fib(n - 1) + fib(n - 2) } }";
    assert_eq!(ok(src, "fib", json!({"n": 20})), json!(6765));
}

#[test]
fn string_interpolation_reads_locals() {
    let src = "@tool \"greet: say hi\"\nfn greet(name: str, punct: str = \"!\") to str { \"Hello {name}{punct}\" }";
    assert_eq!(
        ok(src, "greet", json!({"name": "Ada"})),
        json!("Hello Ada!")
    );
    assert_eq!(
        ok(src, "greet", json!({"name": "Ada", "punct": "?"})),
        json!("Hello Ada?")
    );
}

#[test]
fn closures_capture_by_value() {
    let src = r#"
fn f() {
    let mut n = 1
    let add = fn(x: int) to int { x + n }
    n = 100
    add(1)
}
"#;
    assert_eq!(ok(src, "f", J::Null), json!(2));
}

#[test]
fn list_methods_and_pipes() {
    let src = r#"
fn double(x) { x * 2 }
fn f() {
    let xs = [3, 1, 2]
    let ys = xs.map(double).filter(fn(x) { x > 2 }).sorted()
    let total = xs.fold(0, fn(acc, x) { acc + x })
    { ys: ys, total: total, piped: 5 |> double, joined: xs.join("-"), rev: xs.reverse() }
}
"#;
    assert_eq!(
        ok(src, "f", J::Null),
        json!({"ys": [4, 6], "total": 6, "piped": 10, "joined": "3-1-2", "rev": [2, 1, 3]})
    );
}

#[test]
fn push_mutates_a_mut_binding_in_place() {
    let src = r#"
fn f() {
    let mut xs = []
    for i in range(0, 4) { xs.push(i * i) }
    let last = xs.pop()
    let mut m = {}
    m.insert("a", 1)
    m.b = 2
    { xs: xs, last: last, m: m }
}
"#;
    assert_eq!(
        ok(src, "f", J::Null),
        json!({"xs": [0, 1, 4], "last": 9, "m": {"a": 1, "b": 2}})
    );
}

#[test]
fn match_on_adts_and_options() {
    let src = r#"
type Shape = | Circle(r: float) | Rect(w: float, h: float) | Dot
fn area(s) {
    match s {
        Circle(r) => 3.0 * r * r
        Rect(w, h) => w * h,
        Dot => 0.0
    }
}
fn f() { [area(Circle(1.0)), area(Rect(2.0, 3.0)), area(Dot)] }
fn g(x: Option[int]) { match x { Some(v) => v + 1, None => 0 } }
fn shape() { Rect(1.0, 2.0) }
"#;
    assert_eq!(ok(src, "f", J::Null), json!([3.0, 6.0, 0.0]));
    assert_eq!(ok(src, "g", json!({"x": 4})), json!(5));
    assert_eq!(ok(src, "g", json!({"x": null})), json!(0));
    assert_eq!(
        ok(src, "shape", J::Null),
        json!({"variant": "Rect", "fields": {"w": 1.0, "h": 2.0}})
    );
}

#[test]
fn an_option_parameter_may_be_left_out_and_null_means_the_default() {
    let src = "fn g(x: Option[int]) { match x { Some(v) => v + 1, None => 0 } }\nfn h(n: int = 3, o: Option[int] = Some(9)) { match o { Some(v) => n + v, None => n } }";
    // Left out, an `Option` parameter without a default is `None`, like `null`.
    assert_eq!(ok(src, "g", json!({})), json!(0));
    assert_eq!(ok(src, "g", json!({"x": null})), json!(0));
    // `null` for a parameter with a default takes the default; for an `Option` it stays `None`.
    assert_eq!(ok(src, "h", json!({"n": null})), json!(12));
    assert_eq!(ok(src, "h", json!({"n": null, "o": null})), json!(3));
    assert!(call(src, "g", json!({"x": "4"})).is_err());
}

#[test]
fn unmatched_value_is_a_runtime_error_naming_it() {
    let src = "fn f(x: int) { match x { 1 => \"one\" } }";
    match call(src, "f", json!({"x": 7})) {
        Err(CallError::Runtime { message, .. }) => assert!(message.contains('7'), "{message}"),
        other => panic!("expected runtime error, got {other:?}"),
    }
}

#[test]
fn question_mark_propagates_errors() {
    let src = r#"
fn parse(s: str) { s.parse_int() }
fn f(s: str) to Result[int] {
    let n = parse(s)?
    Ok(n * 2)
}
"#;
    assert_eq!(ok(src, "f", json!({"s": "21"})), json!(42));
    match call(src, "f", json!({"s": "x"})) {
        Err(CallError::Tool { message, .. }) => assert!(message.contains("invalid integer")),
        other => panic!("expected tool error, got {other:?}"),
    }
}

#[test]
fn error_return_is_a_tool_error_with_its_message() {
    let src = "@tool\nfn f() { Error(\"nope\") }";
    assert_eq!(
        call(src, "f", J::Null),
        Err(CallError::Tool {
            message: "nope".into(),
            logs: vec![]
        })
    );
}

#[test]
fn input_errors_name_the_parameter() {
    let src = "@tool\nfn f(a: int, b: list[str] = []) { a }";
    let m = module(src);
    let o = CallOptions::default();
    let missing = m.call_json("f", &json!({}), &o).unwrap_err();
    assert!(
        matches!(&missing, CallError::Input { param: Some(p), .. } if p == "a"),
        "{missing:?}"
    );
    let extra = m.call_json("f", &json!({"a": 1, "zz": 2}), &o).unwrap_err();
    assert!(
        matches!(&extra, CallError::Input { param: Some(p), .. } if p == "zz"),
        "{extra:?}"
    );
    let wrong = m.call_json("f", &json!({"a": "x"}), &o).unwrap_err();
    assert!(
        matches!(&wrong, CallError::Input { param: Some(p), .. } if p == "a"),
        "{wrong:?}"
    );
    let nested = m
        .call_json("f", &json!({"a": 1, "b": ["x", 2]}), &o)
        .unwrap_err();
    assert!(nested.to_string().contains("b[1]"), "{nested}");
    assert!(
        m.call_json("f", &json!([1]), &o)
            .unwrap_err()
            .is_input_error()
    );
}

#[test]
fn float_params_accept_integers() {
    assert_eq!(
        ok("fn f(x: float) { x * 2 }", "f", json!({"x": 2})),
        json!(4.0)
    );
}

#[test]
fn input_schema_follows_the_spec() {
    let src = "@tool\nfn f(a: int, b: float, c: str, d: bool, e: list[int], m: Map[str, int], o: Option[str], u, z: int = 3) { a }";
    let schema = module(src).input_schema("f").unwrap();
    assert_eq!(
        schema,
        json!({
            "type": "object",
            "properties": {
                "a": {"type": "integer"}, "b": {"type": "number"}, "c": {"type": "string"},
                "d": {"type": "boolean"}, "e": {"type": "array", "items": {"type": "integer"}},
                "m": {"type": "object", "additionalProperties": {"type": "integer"}},
                "o": {"type": "string"}, "u": {}, "z": {"type": "integer"}
            },
            "required": ["a", "b", "c", "d", "e", "m", "u"],
            "additionalProperties": false
        })
    );
}

#[test]
fn step_budget_stops_an_infinite_loop() {
    let m = module("fn spin() { loop { } }");
    let opts = CallOptions {
        budget: Budget {
            max_steps: 10_000,
            ..Budget::default()
        },
        log: None,
        events: None,
        cancel: None,
        workspace: None,
    };
    match m.call_json("spin", &J::Null, &opts) {
        Err(CallError::Budget { kind, .. }) => assert_eq!(kind, BudgetKind::Steps),
        other => panic!("{other:?}"),
    }
}

#[test]
fn wall_clock_budget_stops_a_long_call() {
    let m = module("fn spin() { let mut i = 0\n while true { i += 1 } }");
    let opts = CallOptions {
        budget: Budget {
            max_steps: u64::MAX,
            max_wall: Duration::from_millis(50),
            ..Budget::default()
        },
        log: None,
        events: None,
        cancel: None,
        workspace: None,
    };
    match m.call_json("spin", &J::Null, &opts) {
        Err(CallError::Budget { kind, .. }) => assert_eq!(kind, BudgetKind::Time),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_cancel_flag_stops_a_loop_that_no_budget_would_stop_soon() {
    let m = module("fn spin() { let mut i = 0\n while true { i += 1 } }");
    let cancel = std::sync::atomic::AtomicBool::new(false);
    let opts = CallOptions {
        budget: Budget {
            max_steps: u64::MAX,
            max_wall: Duration::from_secs(3600),
            ..Budget::default()
        },
        log: None,
        events: None,
        cancel: Some(&cancel),
        workspace: None,
    };
    let started = std::time::Instant::now();
    let result = std::thread::scope(|s| {
        let run = s.spawn(|| m.call_json("spin", &J::Null, &opts));
        std::thread::sleep(Duration::from_millis(50));
        cancel.store(true, std::sync::atomic::Ordering::Relaxed);
        run.join().unwrap()
    });
    match result {
        Err(CallError::Budget { kind, .. }) => assert_eq!(kind, BudgetKind::Cancelled),
        other => panic!("{other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn unbounded_recursion_hits_the_depth_budget_not_the_stack() {
    let m = module("fn down(n) { down(n + 1) }");
    match m.call_json("down", &json!({"n": 0}), &CallOptions::default()) {
        Err(CallError::Budget { kind, .. }) => assert_eq!(kind, BudgetKind::Depth),
        other => panic!("{other:?}"),
    }
}

#[test]
fn memory_budget_stops_runaway_allocation() {
    let m = module("fn grow() { let mut s = \"x\"\n loop { s = s + s } }");
    match m.call_json("grow", &J::Null, &CallOptions::default()) {
        Err(CallError::Budget { kind, .. }) => assert_eq!(kind, BudgetKind::Memory),
        other => panic!("{other:?}"),
    }
    let m = module("fn big() { range(0, 1000000000) }");
    match m.call_json("big", &J::Null, &CallOptions::default()) {
        Err(CallError::Budget { kind, .. }) => assert_eq!(kind, BudgetKind::Memory),
        other => panic!("{other:?}"),
    }
}

#[test]
fn deeply_nested_values_are_refused_not_overflowing() {
    let m = module("fn deep() { let mut x = []\n loop { x = [x] } }");
    match m.call_json("deep", &J::Null, &CallOptions::default()) {
        Err(CallError::Runtime { message, .. }) => assert!(message.contains("nested")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn print_goes_to_logs_not_stdout() {
    let m = module("fn f() { print(\"hello\", 1)\n 2 }");
    let out = m.call_json("f", &J::Null, &CallOptions::default()).unwrap();
    assert_eq!(out.logs, vec!["hello 1".to_string()]);
    assert_eq!(out.value, json!(2));
}

#[test]
fn builtins_behave() {
    let src = r#"
fn f() {
    {
        len: len("héllo"), s: str(1.0), i: int("42"), fl: float(2), mn: min(3, 1), mx: max([1, 5, 2]),
        ab: abs(-4), enc: json_encode({a: [1, true]}), dec: json_decode("[1,2]").unwrap(),
        up: "abc".to_upper(), sp: "a,b".split(","), rep: "aXa".replace("X", "-"),
        find: "hello".find("l"), sl: "hello".slice(1, 3), lines: "a\nb".lines(),
        some: Some(1).map(fn(x) { x + 1 }), none: None.unwrap_or(7), keys: {b: 1, a: 2}.keys(),
        idx: [10, 20][1], ch: "abc"[2], get: [1].get(5), starts: "abc".starts_with("ab")
    }
}
fn t() { now() }
fn u() { uuid() }
"#;
    assert_eq!(
        ok(src, "f", J::Null),
        json!({
            "len": 5, "s": "1.0", "i": 42, "fl": 2.0, "mn": 1, "mx": 5, "ab": 4,
            "enc": "{\"a\":[1,true]}", "dec": [1, 2], "up": "ABC", "sp": ["a", "b"],
            "rep": "a-a", "find": 2, "sl": "el", "lines": ["a", "b"], "some": 2, "none": 7,
            "keys": ["a", "b"], "idx": 20, "ch": "c", "get": null, "starts": true
        })
    );
    let now = ok(src, "t", J::Null);
    let now = now.as_str().unwrap();
    assert_eq!(now.len(), 20);
    assert!(now.ends_with('Z') && now.as_bytes()[10] == b'T', "{now}");
    let u = ok(src, "u", J::Null);
    assert_eq!(u.as_str().unwrap().len(), 36);
    assert_ne!(u, ok(src, "u", J::Null));
}

#[test]
fn rfc3339_formats_known_instants() {
    assert_eq!(vox_lang::rfc3339(0), "1970-01-01T00:00:00Z");
    assert_eq!(vox_lang::rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    assert_eq!(vox_lang::rfc3339(1_790_000_000), "2026-09-21T14:13:20Z");
}

#[test]
fn assert_failure_carries_the_message() {
    match call("fn f() { assert(1 == 2, \"math\") }", "f", J::Null) {
        Err(CallError::Runtime { message, line, .. }) => {
            assert_eq!(message, "assertion failed: math");
            assert_eq!(line, 1);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn calling_an_opaque_item_fails_clearly_while_other_tools_work() {
    let src =
        "component Page() { <div>Don't</div> }\n@tool\nfn ok() { 1 }\n@tool\nfn bad() { Page() }";
    let m = module(src);
    assert_eq!(
        m.call_json("ok", &J::Null, &CallOptions::default())
            .unwrap()
            .value,
        json!(1)
    );
    match m.call_json("bad", &J::Null, &CallOptions::default()) {
        Err(CallError::Runtime { message, .. }) => {
            assert!(message.contains("component"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn resources_return_their_string() {
    let src = "@mcp.resource(\"docs://readme\", \"the readme\")\nfn readme() to str { \"# Hi\" }";
    let m = module(src);
    assert_eq!(
        m.read_resource("docs://readme", &CallOptions::default())
            .unwrap()
            .text
            .as_deref(),
        Some("# Hi")
    );
    assert!(matches!(
        m.read_resource("docs://nope", &CallOptions::default()),
        Err(CallError::UnknownResource(_))
    ));
}

#[test]
fn constants_are_evaluated_lazily_and_shared() {
    let src = "let LIMIT = 10 * 2\nlet NAMES = [\"a\", \"b\"]\nfn f() { LIMIT + len(NAMES) }";
    assert_eq!(ok(src, "f", J::Null), json!(22));
}

#[test]
fn module_is_send_and_sync_and_callable_concurrently() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Module>();
    let m = std::sync::Arc::new(module(
        "fn fib(n: int) to int { if n < 2 { n } else { fib(n - 1) + fib(n - 2) } }",
    ));
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let m = m.clone();
            std::thread::spawn(move || {
                m.call_json("fib", &json!({"n": 10 + i}), &CallOptions::default())
                    .unwrap()
                    .value
            })
        })
        .collect();
    let got: Vec<J> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(got, vec![json!(55), json!(89), json!(144), json!(233)]);
}

#[test]
fn integer_overflow_and_division_by_zero_are_errors() {
    assert!(matches!(
        call("fn f() { 9223372036854775807 + 1 }", "f", J::Null),
        Err(CallError::Runtime { .. })
    ));
    assert!(matches!(
        call("fn f(x: int) { 1 / x }", "f", json!({"x": 0})),
        Err(CallError::Runtime { .. })
    ));
}

#[test]
fn while_for_break_continue() {
    let src = r#"
fn f() {
    let mut total = 0
    for x, i in [5, 6, 7, 8] {
        if i == 1 { continue }
        if x == 8 { break }
        total += x
    }
    let mut n = 0
    while n < 3 { n += 1 }
    total + n
}
"#;
    assert_eq!(ok(src, "f", J::Null), json!(15));
}

#[test]
fn adt_arguments_accept_their_json_form() {
    let src = "type Op = | Add(a: int, b: int) | Neg(a: int)\n@tool\nfn ev(op: Op) { match op { Add(a, b) => a + b, Neg(a) => -a } }";
    assert_eq!(
        ok(
            src,
            "ev",
            json!({"op": {"variant": "Add", "fields": {"a": 2, "b": 3}}})
        ),
        json!(5)
    );
}

#[test]
fn formatting_shared_structure_is_charged_before_it_is_built() {
    // 2^20 references to one 1 KiB string cost little to build but a gigabyte to format.
    let src = r#"
fn blowup(kind: str) {
    let big = "0123456789abcdef".slice(0, 16)
    let mut s = big
    for i in range(0, 6) { s = s + s }
    let mut xs = [s]
    for i in range(0, 20) { xs = xs + xs }
    match kind {
        "join" => xs.join(""),
        "str" => str(xs),
        "json" => json_encode(xs),
        "interp" => "{xs}",
        _ => xs,
    }
}
"#;
    let m = module(src);
    for kind in ["join", "str", "json", "interp"] {
        match m.call_json("blowup", &json!({"kind": kind}), &CallOptions::default()) {
            Err(CallError::Budget {
                kind: BudgetKind::Memory,
                ..
            }) => {}
            other => panic!("{kind}: {other:?}"),
        }
    }
    match m.call_json(
        "blowup",
        &json!({"kind": "result"}),
        &CallOptions::default(),
    ) {
        Err(CallError::Output(msg)) => assert!(msg.contains("larger than"), "{msg}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn deep_expression_nesting_is_guarded_on_a_small_stack() {
    // 60 nested parentheses: legal (under the parser's limits), and evaluated on a thread
    // whose stack is far smaller than the default budget assumes.
    let expr = format!("{}1{}", "(".repeat(60), " + 1)".repeat(60));
    let src = format!("fn f() {{ {expr} }}\n");
    let m = module(&src);
    let handle = std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(move || {
            let opts = CallOptions {
                budget: Budget {
                    max_stack_bytes: 6 << 10,
                    ..Budget::default()
                },
                log: None,
                events: None,
                cancel: None,
                workspace: None,
            };
            m.call_json("f", &J::Null, &opts)
        })
        .unwrap();
    // Sixty levels need more than 6 KiB of native stack, so the guard must stop the call
    // inside the single body, with no function call to check at.
    match handle.join().unwrap() {
        Err(CallError::Budget { kind, .. }) => assert_eq!(kind, BudgetKind::Depth),
        other => panic!("{other:?}"),
    }
}

/// Records what a call's `log` and `progress` send.
#[derive(Default)]
struct Events(std::sync::Mutex<Vec<String>>);

impl vox_lang::ToolEvents for Events {
    fn log(&self, level: &str, message: &str) {
        self.0
            .lock()
            .unwrap()
            .push(format!("log {level} {message}"));
    }
    fn progress(&self, done: f64, total: Option<f64>, message: Option<&str>) {
        self.0
            .lock()
            .unwrap()
            .push(format!("progress {done} {total:?} {message:?}"));
    }
}

#[test]
fn log_and_progress_reach_the_callers_events_and_bad_uses_are_clear_errors() {
    let src = "@tool\nfn work(n: int) to int {\n    for i in range(1, n + 1) {\n        progress(i, n, \"step \" + str(i))\n        log(\"debug\", {\"step\": i})\n    }\n    progress(n + 1)\n    n\n}\n\n@tool\nfn loud() {\n    log(\"shout\", \"x\")\n}\n\n@tool\nfn backwards() {\n    progress(2, 3)\n    progress(1, 3)\n}\n";
    let m = module(src);
    let events = Events::default();
    let opts = CallOptions {
        events: Some(&events),
        ..CallOptions::default()
    };
    let out = m.call_json("work", &json!({"n": 2}), &opts).unwrap();
    assert_eq!(out.value, json!(2));
    assert_eq!(
        *events.0.lock().unwrap(),
        [
            "progress 1 Some(2.0) Some(\"step 1\")",
            "log debug {step: 1}",
            "progress 2 Some(2.0) Some(\"step 2\")",
            "log debug {step: 2}",
            "progress 3 None None",
        ]
    );
    let e = m
        .call_json("loud", &J::Null, &opts)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("unknown log level \"shout\"") && e.contains("warning"),
        "{e}"
    );
    let e = m
        .call_json("backwards", &J::Null, &opts)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("progress must increase") && e.contains("1 after 2"),
        "{e}"
    );
    // Without a caller to tell, `log` is printed and `progress` is dropped.
    let out = m
        .call_json("work", &json!({"n": 1}), &CallOptions::default())
        .unwrap();
    assert_eq!(out.logs, ["debug: {step: 1}"]);
}

#[test]
fn resources_may_be_typed_text_or_base64_bytes_of_their_own_uri() {
    let src = "@mcp.resource(\"test://bin\", \"bytes\")\nfn bin() to Content {\n    content.blob(\"test://bin\", \"AAEC\", \"application/octet-stream\")\n}\n\n@mcp.resource(\"test://json\", \"json\")\nfn js() to Content {\n    content.resource(\"test://json\", \"{}\", \"application/json\")\n}\n\n@mcp.resource(\"test://other\", \"wrong\")\nfn other() to Content {\n    content.resource(\"test://elsewhere\", \"x\")\n}\n";
    let m = module(src);
    let o = CallOptions::default();
    let b = m.read_resource("test://bin", &o).unwrap();
    assert_eq!(
        (b.mime_type.as_str(), b.blob.as_deref(), b.text),
        ("application/octet-stream", Some("AAEC"), None)
    );
    let j = m.read_resource("test://json", &o).unwrap();
    assert_eq!(
        (j.mime_type.as_str(), j.text.as_deref()),
        ("application/json", Some("{}"))
    );
    let e = m.read_resource("test://other", &o).unwrap_err().to_string();
    assert!(e.contains("test://elsewhere"), "{e}");
}

#[test]
fn a_resource_template_reads_the_uris_it_matches_and_its_parameters_must_be_its_variables() {
    let src = "@mcp.resource(\"notes://{id}/text\", \"a note\")\nfn note(id: str) to str {\n    \"note {id}\"\n}\n";
    let m = module(src);
    let o = CallOptions::default();
    let r = m.read_resource("notes://n1/text", &o).unwrap();
    assert_eq!(r.text.as_deref(), Some("note n1"));
    assert!(matches!(
        m.read_resource("notes://a/b/text", &o),
        Err(CallError::UnknownResource(_))
    ));
    let bad = "@mcp.resource(\"notes://{id}\")\nfn note(name: str) to str {\n    name\n}\n";
    let Err(e) = Module::compile("t.vox", bad.as_bytes()) else {
        panic!("a mismatch is an error")
    };
    let text = e.render();
    assert!(
        text.contains("has the variables (id) but `note` takes (name)"),
        "{text}"
    );
}

#[test]
fn a_complete_function_suggests_values_for_its_argument() {
    let src = "@complete(\"city\")\nfn cities(typed: str) to list[str] {\n    [\"paris\", \"park\", \"rome\"].filter(c => c.starts_with(typed))\n}\n";
    let m = module(src);
    let o = CallOptions::default();
    assert_eq!(
        m.complete("trip", "city", "par", &o).unwrap(),
        ["paris", "park"]
    );
    assert!(m.complete("trip", "country", "x", &o).unwrap().is_empty());
    let Err(e) = Module::compile(
        "t.vox",
        b"@complete\nfn f(x: str) to list[str] {\n    []\n}\n",
    ) else {
        panic!("@complete needs its argument's name")
    };
    assert!(
        e.render().contains("`@complete` takes the name"),
        "{}",
        e.render()
    );
}

/// `let` takes a pattern, as in real Vox: tuples and constructors are taken apart, `mut`
/// makes every bound name mutable, and a value that does not match fails at run time there.
#[test]
fn let_with_a_pattern_takes_a_value_apart() {
    let src = r#"
type Shape = | Circle(r: int) | Square(side: int)
fn pair() { (3, "three") }
fn tuple() to str {
    let (n, name) = pair()
    return "{name}={n}"
}
fn nested() to int {
    let (a, (b, c)) = (1, (2, 3))
    return a + b + c
}
fn ctor(v: int) to int {
    let Circle(r) = if v > 0 { Circle(v) } else { Square(v) }
    return r * 2
}
fn counters() to int {
    let mut (i, j) = (0, 10)
    i += 1
    j -= 1
    return i + j
}
fn option(x: Option[int]) to int {
    let Some(n) = x
    return n
}
"#;
    assert_eq!(ok(src, "tuple", J::Null), json!("three=3"));
    assert_eq!(ok(src, "nested", J::Null), json!(6));
    assert_eq!(ok(src, "ctor", json!({"v": 4})), json!(8));
    assert_eq!(ok(src, "counters", J::Null), json!(10));
    assert_eq!(ok(src, "option", json!({"x": 7})), json!(7));
    let e = call(src, "ctor", json!({"v": -1})).unwrap_err().to_string();
    assert!(
        e.contains("does not match the pattern of this `let`"),
        "{e}"
    );
    assert!(
        e.contains("test.vox:13:21"),
        "the error is at the value: {e}"
    );
    let e = call(src, "option", json!({"x": null}))
        .unwrap_err()
        .to_string();
    assert!(e.contains("None does not match"), "{e}");
    // Without `mut`, the names a pattern binds are immutable.
    let Err(e) = Module::compile("t.vox", b"fn f() { let (a, b) = (1, 2)\n a = 3\n a }") else {
        panic!("assigning an immutable pattern binding is an error");
    };
    let e = e.render();
    assert!(e.contains("vox/check/immutable-assign"), "{e}");
}

/// `csv`, `toml`, `yaml` and `crypto.hash_*` run, with or without `std.`: a parse gives
/// `Ok(value)` or `Error(why)` naming the function, a render `Ok(text)`.
#[test]
fn text_formats_and_hashes_run() {
    let src = r#"
fn csv_total(text: str) to int {
    let rows = std.csv.parse_records(text).unwrap()
    let mut total = 0
    for r in rows {
        total += int(r["qty"])
    }
    return total
}
fn csv_back(text: str) to str { csv.render(csv.parse(text).unwrap()).unwrap() }
fn csv_bad() { match csv.parse("\"open") { Ok(_) => "ok", Error(e) => e } }
fn toml_name(text: str) to str { toml.parse(text).unwrap()["package"]["name"] }
fn toml_out() to str { toml.render({name: "vox", n: 2}).unwrap() }
fn toml_bad() { match toml.render([1]) { Ok(_) => "ok", Error(e) => e } }
fn yaml_items(text: str) to int { len(yaml.parse(text).unwrap()["items"]) }
fn yaml_out() to str { yaml.render({a: [1, 2]}).unwrap() }
fn hashes(s: str) { [std.crypto.hash_secure(s), crypto.hash_fast(s), std.hash_secure(s)] }
"#;
    assert_eq!(
        ok(
            src,
            "csv_total",
            json!({"text": "item,qty\napple,2\n\"pear, green\",5\n"})
        ),
        json!(7)
    );
    assert_eq!(
        ok(src, "csv_back", json!({"text": "a,\"b,c\"\r\n1,2\n"})),
        json!("a,\"b,c\"\n1,2\n")
    );
    let e = ok(src, "csv_bad", J::Null);
    assert!(
        e.as_str()
            .unwrap()
            .starts_with("csv.parse: the quoted field"),
        "{e}"
    );
    assert_eq!(
        ok(
            src,
            "toml_name",
            json!({"text": "[package]\nname = \"vox\"\n"})
        ),
        json!("vox")
    );
    assert_eq!(
        ok(src, "toml_out", J::Null),
        json!("n = 2\nname = \"vox\"\n")
    );
    let e = ok(src, "toml_bad", J::Null);
    assert!(
        e.as_str().unwrap().contains("a TOML document is a table"),
        "{e}"
    );
    assert_eq!(
        ok(src, "yaml_items", json!({"text": "items:\n  - a\n  - b\n"})),
        json!(2)
    );
    assert_eq!(ok(src, "yaml_out", J::Null), json!("a:\n- 1\n- 2\n"));
    let h = ok(src, "hashes", json!({"s": "abc"}));
    assert_eq!(
        h,
        json!([
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            "e71fa2190541574b",
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        ])
    );
}

/// A client that answers `elicit` and `sample` as a test says, recording what it was asked.
struct Client {
    asked: std::sync::Mutex<Vec<J>>,
    answer: fn(vox_lang::AskKind, &J) -> Result<J, vox_lang::AskFailure>,
}

impl vox_lang::ToolEvents for Client {
    fn log(&self, _: &str, _: &str) {}
    fn progress(&self, _: f64, _: Option<f64>, _: Option<&str>) {}
    fn ask(
        &self,
        kind: vox_lang::AskKind,
        params: J,
        timeout: Duration,
    ) -> Result<J, vox_lang::AskFailure> {
        assert!(timeout > Duration::ZERO && timeout <= Duration::from_secs(5));
        let r = (self.answer)(kind, &params);
        self.asked.lock().unwrap().push(params);
        r
    }
}

fn ask_with(
    src: &str,
    f: &str,
    args: J,
    answer: fn(vox_lang::AskKind, &J) -> Result<J, vox_lang::AskFailure>,
) -> (Result<J, CallError>, Vec<J>) {
    let client = Client {
        asked: Default::default(),
        answer,
    };
    let opts = CallOptions {
        events: Some(&client),
        ..CallOptions::default()
    };
    let r = module(src).call_json(f, &args, &opts).map(|o| o.value);
    (r, client.asked.into_inner().unwrap())
}

/// `elicit` sends the form and gives back the action and, when accepted, the answer; `sample`
/// sends the messages and gives back the model's text; a client that cannot answer, a wait past
/// the wall budget and a cancellation each end the call with their own error.
#[test]
fn elicit_and_sample_ask_the_client() {
    use vox_lang::{AskFailure, AskKind};
    let src = r#"
fn who() {
    let r = elicit("Who are you?", {properties: {name: {"type": "string"}}, required: ["name"]})
    if r.action == "accept" { "hello " + r.content.name } else { r.action }
}
fn ask_model(q: str) to str { sample(q, 50) }
fn chat() to str {
    sample([{role: "user", content: "hi"}, {role: "assistant", content: content.text("hello")}, {role: "user", content: "and?"}])
}
fn bad_schema() { elicit("x", {"type": "object"}) }
"#;
    let (r, asked) = ask_with(src, "who", J::Null, |k, _| {
        assert_eq!(k, AskKind::Elicit);
        Ok(json!({"action": "accept", "content": {"name": "Ada"}}))
    });
    assert_eq!(r.unwrap(), json!("hello Ada"));
    assert_eq!(
        asked,
        [
            json!({"message": "Who are you?", "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}})
        ]
    );
    let (r, _) = ask_with(src, "who", J::Null, |_, _| Ok(json!({"action": "decline"})));
    assert_eq!(r.unwrap(), json!("decline"));
    let (r, asked) = ask_with(src, "ask_model", json!({"q": "2+2?"}), |k, _| {
        assert_eq!(k, AskKind::Sample);
        Ok(json!({"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "m"}))
    });
    assert_eq!(r.unwrap(), json!("4"));
    assert_eq!(
        asked,
        [
            json!({"messages": [{"role": "user", "content": {"type": "text", "text": "2+2?"}}], "maxTokens": 50})
        ]
    );
    let (r, asked) = ask_with(src, "chat", J::Null, |_, _| {
        Ok(
            json!({"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}),
        )
    });
    assert_eq!(r.unwrap(), json!("ab"));
    assert_eq!(
        asked[0]["messages"][1]["content"],
        json!({"type": "text", "text": "hello"})
    );
    assert_eq!(
        asked[0]["maxTokens"],
        json!(vox_lang::ask::DEFAULT_MAX_TOKENS)
    );
    let (r, asked) = ask_with(src, "bad_schema", J::Null, |_, _| unreachable!());
    assert!(r.unwrap_err().to_string().contains("needs `properties`"));
    assert!(asked.is_empty());
    let (r, _) = ask_with(src, "who", J::Null, |_, _| {
        Err(AskFailure::Unsupported(
            "the client did not declare elicitation".into(),
        ))
    });
    let e = r.unwrap_err().to_string();
    assert!(
        e.contains("elicit: the client did not declare elicitation"),
        "{e}"
    );
    let (r, _) = ask_with(src, "who", J::Null, |_, _| Err(AskFailure::TimedOut));
    assert!(
        matches!(
            r,
            Err(CallError::Budget {
                kind: BudgetKind::Time,
                ..
            })
        ),
        "{r:?}"
    );
    let (r, _) = ask_with(src, "who", J::Null, |_, _| Err(AskFailure::Cancelled));
    assert!(
        matches!(
            r,
            Err(CallError::Budget {
                kind: BudgetKind::Cancelled,
                ..
            })
        ),
        "{r:?}"
    );
    // Without any client (`vox run`), the error says so.
    let e = call(src, "who", J::Null).unwrap_err().to_string();
    assert!(e.contains("elicit needs an MCP client"), "{e}");
}

/// An enum (an ADT whose variants have no fields) is a string of its variant names: the input
/// schema says `enum`, a call may give the bare name, and a prompt's enum argument completes
/// from the variants.
#[test]
fn enum_parameters_take_variant_names_and_complete_from_them() {
    let src = "type Tone = | Formal | Friendly | Frank\n@mcp.prompt\nfn letter(tone: Tone, to_whom: str, extra: Option[Tone]) to str {\n    match tone {\n        Formal => \"Dear {to_whom}\"\n        _ => \"Hi {to_whom}\"\n    }\n}\n";
    let m = module(src);
    let o = CallOptions::default();
    assert_eq!(
        m.complete("letter", "tone", "Fr", &o).unwrap(),
        ["Friendly", "Frank"]
    );
    assert_eq!(
        m.complete("letter", "extra", "", &o).unwrap(),
        ["Formal", "Friendly", "Frank"]
    );
    assert!(m.complete("letter", "to_whom", "", &o).unwrap().is_empty());
    let schema = m.input_schema("letter").unwrap();
    assert_eq!(
        schema["$defs"]["tone"],
        json!({"type": "string", "enum": ["Formal", "Friendly", "Frank"], "description": "one variant of `Tone`"})
    );
    assert_eq!(
        ok(src, "letter", json!({"tone": "Formal", "to_whom": "Ada"})),
        json!("Dear Ada")
    );
    assert_eq!(
        ok(
            src,
            "letter",
            json!({"tone": {"variant": "Frank"}, "to_whom": "Bo"})
        ),
        json!("Hi Bo")
    );
    let e = call(src, "letter", json!({"tone": "Rude", "to_whom": "x"}))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`Rude` is not a variant of `Tone` without fields"),
        "{e}"
    );
}
