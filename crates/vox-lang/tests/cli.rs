//! `vox check`, `vox run`, `vox test` and `vox fmt` end to end, in process, on real files.

use std::path::{Path, PathBuf};
use vox_lang::cli;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

fn capture(f: impl FnOnce(&mut Vec<u8>, &mut Vec<u8>) -> i32) -> (i32, String, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = f(&mut out, &mut err);
    (
        code,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("vox-lang-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn check_exits_zero_on_warnings_only() {
    let (code, out, _) =
        capture(|o, e| cli::check(&[fixture("diag/mcp_tool_deprecated.vox")], false, o, e));
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("warning[vox/decorator/mcp-tool-deprecated]"),
        "{out}"
    );
    assert!(out.contains("0 error(s), 1 warning(s)"), "{out}");
}

#[test]
fn check_exits_one_on_errors_and_walks_directories() {
    let (code, out, _) = capture(|o, e| cli::check(&[fixture("diag")], false, o, e));
    assert_eq!(code, 1);
    assert!(out.contains("error[vox/syntax/arrow-match-arm]"), "{out}");
    assert!(out.contains("checked 22 file(s)"), "{out}");
}

#[test]
fn check_json_is_one_document_with_positions() {
    let (code, out, _) =
        capture(|o, e| cli::check(&[fixture("diag/arrow_match_arm.vox")], true, o, e));
    assert_eq!(code, 1);
    let doc: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(doc["errors"], 1);
    let d = &doc["files"][0]["diagnostics"][0];
    assert_eq!(d["code"], "vox/syntax/arrow-match-arm");
    assert_eq!(
        (d["line"].as_u64(), d["column"].as_u64()),
        (Some(3), Some(11))
    );
}

#[test]
fn check_of_a_missing_file_fails() {
    let (code, _, err) =
        capture(|o, e| cli::check(&[PathBuf::from("/nonexistent/x.vox")], false, o, e));
    assert_eq!(code, 1);
    assert!(err.contains("cannot read"), "{err}");
}

#[test]
fn run_prints_the_json_result_only_on_stdout() {
    let f = fixture("ok/tools.vox");
    let (code, out, err) = capture(|o, e| {
        cli::run(
            &f,
            "greet",
            Some(r#"{"name": "Ada", "excited": true}"#),
            o,
            e,
        )
    });
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (0, "\"Hello Ada!\"\n", "")
    );
    let (code, out, _) =
        capture(|o, e| cli::run(&f, "top", Some(r#"{"items": ["a","b","c"]}"#), o, e));
    assert_eq!((code, out.as_str()), (0, "[\"a\",\"b\"]\n"));
}

#[test]
fn run_reports_tool_errors_on_stderr_with_exit_one() {
    let f = fixture("ok/tools.vox");
    let (code, out, err) =
        capture(|o, e| cli::run(&f, "divide", Some(r#"{"a": 1, "b": 0}"#), o, e));
    assert_eq!(code, 1);
    assert_eq!(out, "");
    assert_eq!(err, "error[tool_error]: cannot divide by zero\n");
}

#[test]
fn run_reports_input_errors_naming_the_parameter() {
    let f = fixture("ok/tools.vox");
    let (code, out, err) = capture(|o, e| cli::run(&f, "greet", Some("{}"), o, e));
    assert_eq!((code, out.as_str()), (1, ""));
    assert!(
        err.contains("invalid_input") && err.contains("`name`"),
        "{err}"
    );
    let (code, _, err) = capture(|o, e| cli::run(&f, "greet", Some("{not json"), o, e));
    assert_eq!(code, 1);
    assert!(err.contains("not valid JSON"), "{err}");
    let (code, _, err) = capture(|o, e| cli::run(&f, "nope", None, o, e));
    assert_eq!(code, 1);
    assert!(err.contains("unknown_function"), "{err}");
}

#[test]
fn run_sends_print_to_stderr() {
    let d = temp_dir("print");
    let f = d.join("p.vox");
    std::fs::write(&f, "fn f() { print(\"side note\")\n 7 }\n").unwrap();
    let (code, out, err) = capture(|o, e| cli::run(&f, "f", None, o, e));
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (0, "7\n", "side note\n")
    );
}

#[test]
fn run_refuses_a_file_with_errors() {
    let f = fixture("diag/arity.vox");
    let (code, out, err) = capture(|o, e| cli::run(&f, "f", None, o, e));
    assert_eq!((code, out.as_str()), (1, ""));
    assert!(err.contains("vox/call/arity"), "{err}");
}

#[test]
fn test_runs_all_ok_fixtures_and_prints_the_closing_line() {
    let (code, out, err) = capture(|o, e| cli::test(&[fixture("ok")], o, e));
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("... ok"), "{out}");
    assert!(!out.contains("FAILED"), "{out}");
    let last = out.lines().last().unwrap();
    assert_eq!(last, "16 passed, 0 failed");
}

#[test]
fn test_reports_failures_and_exits_one() {
    let d = temp_dir("fail");
    std::fs::write(
        d.join("t.vox"),
        "@test \"good\"\nfn a() { assert(1 == 1) }\n@test\nfn b() { print(\"why\")\n assert(1 == 2, \"one is not two\") }\n@test\nfn c() { Error(\"returned error\") }\n",
    )
    .unwrap();
    std::fs::write(d.join("broken.vox"), "@test\nfn x() { nope }\n").unwrap();
    let (code, out, _) = capture(|o, e| cli::test(std::slice::from_ref(&d), o, e));
    assert_eq!(code, 1);
    assert!(
        out.contains("b ... FAILED: assertion failed: one is not two"),
        "{out}"
    );
    assert!(out.contains("    | why"), "{out}");
    assert!(out.contains("c ... FAILED: returned error"), "{out}");
    assert!(out.contains("broken.vox: does not compile"), "{out}");
    assert_eq!(out.lines().last().unwrap(), "1 passed, 3 failed");
}

#[test]
fn test_with_no_tests_passes_with_zero_counts() {
    let d = temp_dir("empty");
    std::fs::write(d.join("plain.vox"), "fn f() { 1 }\n").unwrap();
    let (code, out, _) = capture(|o, e| cli::test(std::slice::from_ref(&d), o, e));
    assert_eq!((code, out.as_str()), (0, "0 passed, 0 failed\n"));
}

#[test]
fn fmt_check_lists_files_that_would_change_and_fmt_rewrites_them() {
    let d = temp_dir("fmt");
    let messy = d.join("messy.vox");
    let tidy = d.join("tidy.vox");
    let broken = d.join("broken.vox");
    std::fs::write(&messy, "fn f(a:int)to int{a+1}\n").unwrap();
    std::fs::write(&tidy, "fn g() { 1 }\n").unwrap();
    std::fs::write(&broken, "fn h( {\n").unwrap();

    let (code, out, err) = capture(|o, e| cli::fmt(std::slice::from_ref(&d), true, o, e));
    assert_eq!(code, 1);
    assert!(
        out.contains("would reformat") && out.contains("messy.vox (first difference on line 1)"),
        "{out}"
    );
    assert!(
        out.contains("1 file(s) would be reformatted, 1 already formatted, 1 failed"),
        "{out}"
    );
    assert!(
        err.contains("broken.vox: not formatted: fix its syntax first"),
        "{err}"
    );
    // --check writes nothing.
    assert_eq!(
        std::fs::read_to_string(&messy).unwrap(),
        "fn f(a:int)to int{a+1}\n"
    );

    let (code, out, _) = capture(|o, e| cli::fmt(&[messy.clone(), tidy.clone()], false, o, e));
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        std::fs::read_to_string(&messy).unwrap(),
        "fn f(a: int) to int { a + 1 }\n"
    );
    assert!(
        out.contains("formatted 1 file(s), 1 unchanged, 0 failed"),
        "{out}"
    );
    // Formatting twice changes nothing, and the broken file is left as it was.
    let (code, _, _) = capture(|o, e| cli::fmt(&[messy.clone(), tidy], true, o, e));
    assert_eq!(code, 0);
    let (code, _, _) = capture(|o, e| cli::fmt(std::slice::from_ref(&broken), false, o, e));
    assert_eq!(code, 1);
    assert_eq!(std::fs::read_to_string(&broken).unwrap(), "fn h( {\n");
    let leftovers: Vec<_> = std::fs::read_dir(&d)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains("vox-fmt"))
        .collect();
    assert!(leftovers.is_empty());
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn check_test_and_fmt_name_a_missing_path_and_run_nothing() {
    let missing = PathBuf::from("/nonexistent/dir/");
    let (code, out, err) = capture(|o, e| cli::check(std::slice::from_ref(&missing), false, o, e));
    assert_eq!(code, 1);
    assert!(
        err.contains("cannot read /nonexistent/dir/: no such file or directory"),
        "{err}"
    );
    assert!(out.is_empty(), "nothing was checked: {out}");
    let (code, _, err) = capture(|o, e| cli::test(std::slice::from_ref(&missing), o, e));
    assert_eq!(code, 1);
    assert!(err.contains("/nonexistent/dir/: no such file"), "{err}");
    let (code, _, err) = capture(|o, e| cli::fmt(std::slice::from_ref(&missing), true, o, e));
    assert_eq!(code, 1);
    assert!(err.contains("/nonexistent/dir/: no such file"), "{err}");
}

/// `vox check --json` counts, per file and in all, the `@tool` functions declared, those that
/// load (a declaration with an error is left out) and those the interpreter runs; `vox test`
/// reports a test that needs an effect as skipped.
#[test]
fn check_json_counts_tools_and_test_reports_skips() {
    let (code, out, _) = capture(|o, e| cli::check(&[fixture("realvox")], true, o, e));
    assert_eq!(code, 1, "broken.vox has errors: {out}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        doc["tools"],
        serde_json::json!({"declared": 16, "loaded": 15, "runnable": 14})
    );
    let broken = doc["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["file"].as_str().unwrap().ends_with("broken.vox"))
        .unwrap();
    assert_eq!(
        broken["tools"],
        serde_json::json!({"declared": 5, "loaded": 4, "runnable": 4})
    );
    let (code, out, _) = capture(|o, e| cli::test(&[fixture("realvox/scripts.vox")], o, e));
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("building_needs_a_process ... skipped: `process.run` runs processes"),
        "{out}"
    );
    assert!(out.ends_with("5 passed, 0 failed, 1 skipped\n"), "{out}");
}
