//! The lang tool bodies return the JSON shapes their MCP wrappers pass through.

use serde_json::json;
use std::path::Path;
use vox_lang::{FsLoader, NoImports, tools};

#[test]
fn check_source_returns_counts_and_diagnostics() {
    let r = tools::check_source("x.vox", "@mcp.tool\nfn f() { nope }\n", &NoImports);
    assert_eq!(r["ok"], false);
    assert_eq!(
        (r["errors"].clone(), r["warnings"].clone()),
        (json!(1), json!(1))
    );
    assert_eq!(r["diagnostics"][1]["code"], "vox/name/unknown");
}

#[test]
fn check_path_totals_a_directory() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ok");
    let r = tools::check_path(&dir, &FsLoader::new(dir.parent().unwrap())).unwrap();
    assert_eq!(r["ok"], true);
    assert_eq!(r["files"].as_array().unwrap().len(), 10);
    let missing = tools::check_path(Path::new("/nonexistent-dir-xyz"), &NoImports).unwrap_err();
    assert_eq!(missing.code(), "io_error");
}

#[test]
fn validate_source_lists_declarations() {
    let r = tools::validate_source(
        "v.vox",
        "@tool\nfn a() { 1 }\n@mcp.resource(\"x://y\")\nfn r() to str { \"\" }\n@test\nfn t() { }\n",
        &NoImports,
    );
    assert_eq!(
        r,
        json!({"valid": true, "errors": [], "tools": ["a"], "resources": ["r"], "tests": ["t"]})
    );
    let bad = tools::validate_source("v.vox", "fn a( {", &NoImports);
    assert_eq!(bad["valid"], false);
}

#[test]
fn test_source_returns_structured_results() {
    let r = tools::test_source(
        "t.vox",
        "@test \"ok\"\nfn a() { }\n@test\nfn b() { assert(false) }\n",
        &NoImports,
        None,
    );
    assert_eq!(
        (r["passed"].clone(), r["failed"].clone()),
        (json!(1), json!(1))
    );
    let tests = &r["files"][0]["tests"];
    assert_eq!(tests[0]["label"], "ok");
    assert_eq!(tests[1]["message"], "assertion failed");
}

#[test]
fn grammar_mentions_every_decorator() {
    let g = tools::grammar();
    for d in ["@tool", "@mcp.resource", "@test", "@mcp.tool"] {
        assert!(g.contains(d), "{d}");
    }
}

#[test]
fn introspect_gives_signatures_with_schemas() {
    let r = tools::introspect_source(
        "i.vox",
        "@tool \"add: sum\"\nfn add(a: int, b: int = 2) to int { a + b }\n",
        &NoImports,
    );
    let f = &r["functions"][0];
    assert_eq!(f["name"], "add");
    assert_eq!(
        f["role"],
        json!({"kind": "tool", "description": "add: sum", "deprecated_spelling": false})
    );
    assert_eq!(
        f["params"][1],
        json!({"name": "b", "ty": {"kind": "int"}, "has_default": true})
    );
    assert_eq!(f["input_schema"]["required"], json!(["a"]));
    assert_eq!(r["diagnostics"], json!([]));
}
