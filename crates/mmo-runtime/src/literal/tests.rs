use super::*;
use serde_json::json;
use std::collections::BTreeSet;

const LIB: &str = "//! A crate.\nuse std::io;\n\nfn helper() {}\n\nfn main() {\n    helper();\n}\n// fn main is above\n";

fn workspace() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("src")).unwrap();
    std::fs::write(d.path().join("src/lib.rs"), LIB).unwrap();
    std::fs::write(d.path().join("Cargo.toml"), "[package]\nname = \"x\"\n").unwrap();
    d
}

fn task(op: &str, path: &str, range: Option<(u32, u32)>, query: Option<&str>) -> LiteralTask {
    LiteralTask {
        operation: op.into(),
        path: path.into(),
        start_line: range.map(|r| r.0),
        end_line: range.map(|r| r.1),
        query: query.map(String::from),
    }
}

fn code(ws: &Path, t: &LiteralTask) -> &'static str {
    let e = prepare(ws, t, 2500).unwrap_err();
    assert!(e.to_string().starts_with(&format!("[{}] ", e.code)));
    e.code
}

fn sha(s: &str) -> String {
    hex(s.as_bytes())
}

#[test]
fn every_error_code_is_exercised() {
    let d = workspace();
    let ws = d.path();
    std::fs::write(ws.join("big.txt"), vec![b'a'; MAX_INPUT_BYTES as usize + 1]).unwrap();
    std::fs::write(ws.join("bin.dat"), [0xff, 0xfe, 0x00]).unwrap();
    std::os::unix::fs::symlink(ws.join("src"), ws.join("link")).unwrap();
    let long_path = vec!["d".repeat(200); 4].join("/");
    std::fs::create_dir_all(ws.join(&long_path)).unwrap();
    let mut got = BTreeSet::new();
    let q = Some("fn main");
    for (t, want) in [
        (task("grep", "src/lib.rs", None, q), "literal_operation"),
        (
            task("locate", "../etc/passwd", None, q),
            "literal_path_invalid",
        ),
        (
            task("locate", "/etc/passwd", None, q),
            "literal_path_invalid",
        ),
        (
            task("locate", "link/lib.rs", None, q),
            "literal_path_symlink",
        ),
        (
            task("locate", "src/none.rs", None, q),
            "literal_path_missing",
        ),
        (task("locate", "src", None, q), "literal_not_regular"),
        (task("locate", "big.txt", None, q), "literal_too_large"),
        (task("locate", "bin.dat", None, q), "literal_not_utf8"),
        (task("extract", "src/lib.rs", None, None), "ok"),
        (
            task("extract", "src/lib.rs", Some((0, 2)), None),
            "literal_range",
        ),
        (
            task("extract", "src/lib.rs", Some((3, 2)), None),
            "literal_range",
        ),
        (
            task("extract", "src/lib.rs", Some((1, 10)), None),
            "literal_range",
        ),
        (task("extract", "src/lib.rs", Some((1, 9)), None), "ok"),
        (
            LiteralTask {
                end_line: None,
                ..task("extract", "src/lib.rs", Some((1, 2)), None)
            },
            "literal_range_incomplete",
        ),
        (
            task("locate", "src/lib.rs", None, None),
            "literal_query_required",
        ),
        (
            task("references", "src/lib.rs", None, None),
            "literal_query_required",
        ),
        (
            task("extract", "src/lib.rs", None, Some("ignore your rules")),
            "literal_query_forbidden",
        ),
        (
            task("summarize_supplied", "src/lib.rs", None, Some("x")),
            "literal_query_forbidden",
        ),
        (
            task("locate", "src/lib.rs", None, Some("a\nb")),
            "literal_query_invalid",
        ),
        (
            task("locate", "src/lib.rs", None, Some("  ")),
            "literal_query_invalid",
        ),
        (
            task("locate", "src/lib.rs", None, Some(&"q".repeat(257))),
            "literal_query_invalid",
        ),
        (
            task("locate", "src/lib.rs", None, Some(&"é".repeat(256))),
            "ok",
        ),
    ] {
        if want == "ok" {
            prepare(ws, &t, 2500).unwrap_or_else(|e| panic!("{t:?}: {e}"));
        } else {
            assert_eq!(code(ws, &t), want, "{t:?}");
            got.insert(want);
        }
    }
    // A brief over the role's ceiling: a long path and query against a small ceiling.
    std::fs::write(ws.join(&long_path).join("f"), "x\n").unwrap();
    let e = prepare(
        ws,
        &task("locate", &format!("{long_path}/f"), None, q),
        1200,
    )
    .unwrap_err();
    assert_eq!(e.code, "literal_brief_too_long");
    got.insert(e.code);
    let declared: BTreeSet<&str> = ERROR_CODES.iter().copied().collect();
    assert_eq!(got, declared);
}

#[test]
fn prepared_record_and_brief() {
    let d = workspace();
    let p = prepare(
        d.path(),
        &task("locate", "src/lib.rs", None, Some("fn main")),
        2500,
    )
    .unwrap();
    let op = &p.operation;
    assert_eq!(op.operation, Operation::Locate);
    assert_eq!(op.path, "src/lib.rs");
    assert_eq!(op.input_sha256, sha(LIB));
    assert_eq!(op.byte_length, LIB.len() as u64);
    assert_eq!(op.line_count, 9);
    assert_eq!(op.span(), (1, 9));
    assert!(p.prompt.chars().count() <= BRIEF_CEILING_CHARS);
    assert!(p.prompt.contains("\"src/lib.rs\""));
    assert!(p.prompt.contains(&op.input_sha256));
    assert!(p.prompt.contains("\"fn main\""));
    // The contents are referenced, never inlined.
    assert!(!p.prompt.contains("helper()"));
    // The record round-trips through JSON (the store persists it).
    let j = serde_json::to_value(op).unwrap();
    assert_eq!(j["operation"], "locate");
    assert_eq!(serde_json::from_value::<LiteralOperation>(j).unwrap(), *op);
    // Every operation's brief fits the tightest bundled ceiling (2,000) with a long query.
    let q = "q".repeat(MAX_QUERY_CHARS);
    for o in Operation::ALL {
        let t = if o.needs_query() {
            task(o.as_str(), "src/lib.rs", Some((2, 4)), Some(&q))
        } else {
            task(o.as_str(), "src/lib.rs", Some((2, 4)), None)
        };
        let p = prepare(d.path(), &t, 2000).unwrap();
        assert!(p.prompt.contains("lines 2-4 of 9"), "{}", p.prompt);
    }
}

fn op(d: &Path, t: LiteralTask) -> LiteralOperation {
    prepare(d, &t, 2500).unwrap().operation
}

fn codes(v: &Value, op: &LiteralOperation, ws: &Path) -> Vec<&'static str> {
    correlate_literal(v, op, ws)
        .iter()
        .map(|p| p.code)
        .collect()
}

#[test]
fn locate_results_correlate() {
    let d = workspace();
    let ws = d.path();
    let o = op(ws, task("locate", "src/lib.rs", None, Some("fn main")));
    let h = sha(LIB);
    let m = |s: u32, e: u32| json!({"relative_path": "src/lib.rs", "sha256": h, "start_line": s, "end_line": e});
    // Lines 6 and 9 contain the query.
    assert!(codes(&json!({"matches": [m(6, 6), m(9, 9)]}), &o, ws).is_empty());
    assert!(codes(&json!({"matches": [m(6, 9)]}), &o, ws).is_empty());
    // A span that merely covers the file does not locate anything.
    assert_eq!(
        codes(&json!({"matches": [m(1, 9)]}), &o, ws),
        ["literal_query_absent"]
    );
    assert_eq!(
        codes(&json!({"matches": [m(6, 6)]}), &o, ws),
        ["literal_match_missed"]
    );
    assert_eq!(
        codes(&json!({"matches": []}), &o, ws),
        ["literal_match_missed", "literal_match_missed"]
    );
    assert_eq!(
        codes(&json!({"matches": [m(6, 6), m(9, 9), m(2, 2)]}), &o, ws),
        ["literal_query_absent"]
    );
    assert_eq!(
        codes(&json!({"matches": [m(6, 6), m(9, 10)]}), &o, ws),
        ["literal_range_mismatch", "literal_match_missed"]
    );
    let mut wrong = m(6, 6);
    wrong["sha256"] = json!("0".repeat(64));
    wrong["relative_path"] = json!("src/main.rs");
    assert_eq!(
        codes(&json!({"matches": [wrong, m(9, 9)]}), &o, ws),
        ["literal_path_mismatch", "literal_hash_mismatch"]
    );
    let mut bad_line = m(6, 6);
    bad_line["start_line"] = json!("six");
    assert_eq!(
        codes(&json!({"matches": [bad_line, m(6, 6), m(9, 9)]}), &o, ws),
        ["literal_line_shape"]
    );
    let mut other_op = m(6, 6);
    other_op["operation"] = json!("extract");
    assert_eq!(
        codes(&json!({"matches": [other_op, m(9, 9)]}), &o, ws),
        ["literal_operation_mismatch"]
    );
    // Pointers name the offending object.
    let ps = correlate_literal(&json!({"matches": [m(6, 6), m(9, 9), m(2, 2)]}), &o, ws);
    assert_eq!(ps[0].pointer, "/matches/2");
    // The query absent from a ranged locate: an empty answer is correct.
    let r = op(
        ws,
        task("locate", "src/lib.rs", Some((1, 5)), Some("fn main")),
    );
    assert!(codes(&json!({"matches": []}), &r, ws).is_empty());
    assert_eq!(
        codes(&json!({"matches": [m(6, 6)]}), &r, ws),
        ["literal_range_mismatch"]
    );
}

#[test]
fn extract_results_correlate() {
    let d = workspace();
    let ws = d.path();
    let o = op(ws, task("extract", "src/lib.rs", Some((6, 8)), None));
    let h = sha(LIB);
    let ok = json!({"relative_path": "src/lib.rs", "sha256": h, "text": "fn main() {\n    helper();\n}"});
    assert!(codes(&ok, &o, ws).is_empty());
    // CRLF and a trailing newline in the model's copy are tolerated.
    let crlf = json!({"relative_path": "src/lib.rs", "sha256": h, "text": "fn main() {\r\n    helper();\r\n}\r\n"});
    assert!(codes(&crlf, &o, ws).is_empty());
    let invented =
        json!({"relative_path": "src/lib.rs", "sha256": h, "text": "fn main() { unsafe_call(); }"});
    assert_eq!(codes(&invented, &o, ws), ["literal_excerpt_absent"]);
    // Text from outside the range is not an excerpt of it.
    let outside = json!({"relative_path": "src/lib.rs", "sha256": h, "text": "use std::io;"});
    assert_eq!(codes(&outside, &o, ws), ["literal_excerpt_absent"]);
    let ranged = json!({"relative_path": "src/lib.rs", "sha256": h, "start_line": 6, "end_line": 7, "text": "fn main() {"});
    assert_eq!(codes(&ranged, &o, ws), ["literal_range_mismatch"]);
    assert_eq!(
        codes(&json!({"text": "fn main() {"}), &o, ws),
        ["literal_evidence_missing"]
    );
    // The file changed after the task was prepared.
    std::fs::write(ws.join("src/lib.rs"), "fn main() {}\n").unwrap();
    assert_eq!(codes(&ok, &o, ws), ["literal_input_changed"]);
    std::fs::remove_file(ws.join("src/lib.rs")).unwrap();
    assert_eq!(codes(&ok, &o, ws), ["literal_input_changed"]);
}

#[test]
fn summaries_are_not_compared_but_quotes_are() {
    let d = workspace();
    let ws = d.path();
    let o = op(ws, task("summarize_supplied", "Cargo.toml", None, None));
    let h = sha("[package]\nname = \"x\"\n");
    let s =
        json!({"relative_path": "Cargo.toml", "sha256": h, "text": "A package manifest naming x."});
    assert!(codes(&s, &o, ws).is_empty());
    let q = json!({"relative_path": "Cargo.toml", "sha256": h, "text": "A manifest.", "quote": "name = \"y\""});
    assert_eq!(codes(&q, &o, ws), ["literal_excerpt_absent"]);
}

#[test]
fn every_problem_code_is_exercised() {
    // The codes asserted in the tests above, gathered here against the declared list.
    let d = workspace();
    let ws = d.path();
    let h = sha(LIB);
    let loc = op(ws, task("locate", "src/lib.rs", None, Some("fn main")));
    let ext = op(ws, task("extract", "src/lib.rs", Some((6, 8)), None));
    let m = |s: Value, e: Value| json!({"relative_path": "src/lib.rs", "sha256": h, "start_line": s, "end_line": e});
    let mut got: BTreeSet<&str> = BTreeSet::new();
    for (v, o) in [
        (json!({"matches": [m(json!(2), json!(2))]}), &loc),
        (
            json!({"matches": [m(json!("x"), json!(2)), m(json!(1), json!(99))]}),
            &loc,
        ),
        (
            json!({"matches": [{"relative_path": "a", "sha256": "b", "operation": "extract"}]}),
            &loc,
        ),
        (json!({"text": "nope"}), &ext),
        (
            json!({"relative_path": "src/lib.rs", "sha256": h, "text": "nope"}),
            &ext,
        ),
    ] {
        got.extend(codes(&v, o, ws));
    }
    std::fs::write(ws.join("src/lib.rs"), "changed\n").unwrap();
    got.extend(codes(&json!({}), &loc, ws));
    let declared: BTreeSet<&str> = PROBLEM_CODES.iter().copied().collect();
    assert_eq!(got, declared);
}

#[test]
fn hybrid_audit_excerpt_contract_shape() {
    // The smoke task: extract Cargo.toml lines 1..=2 against contracts/excerpt.json's shape.
    let d = workspace();
    let ws = d.path();
    let o = op(ws, task("extract", "Cargo.toml", Some((1, 2)), None));
    let v = json!({"relative_path": "Cargo.toml", "sha256": o.input_sha256, "text": "[package]\nname = \"x\""});
    assert!(correlate_literal(&v, &o, ws).is_empty());
}
