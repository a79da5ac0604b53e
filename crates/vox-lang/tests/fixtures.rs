//! The fixture corpus, checked with insta snapshots: every construct (fixtures/ok) and every
//! diagnostic (fixtures/diag), rendered the way `vox check` prints them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use vox_lang::{Analysis, Code, FsLoader, Severity, analyze, analyze_with};

fn fixtures(dir: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "vox"))
        .collect();
    files.sort();
    files
}

/// Checks a fixture with its imports loaded from the fixture root, as `vox check` would from
/// `tests/fixtures`.
fn check(p: &Path) -> Analysis {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    analyze_with(&rel(p), &std::fs::read(p).unwrap(), &FsLoader::new(root))
}

fn stem(p: &Path) -> String {
    p.file_stem().unwrap().to_string_lossy().into_owned()
}

fn rel(p: &Path) -> String {
    let dir = p.parent().unwrap().file_name().unwrap().to_string_lossy();
    format!("{dir}/{}", p.file_name().unwrap().to_string_lossy())
}

#[test]
fn ok_fixtures_have_no_errors_and_render_stably() {
    for f in fixtures("ok") {
        let a = check(&f);
        assert!(!a.has_errors(), "{}:\n{}", rel(&f), a.render());
        insta::assert_snapshot!(format!("ok__{}", stem(&f)), a.render());
    }
}

#[test]
fn diag_fixtures_render_as_snapshots() {
    for f in fixtures("diag") {
        let a = check(&f);
        assert!(!a.diagnostics.is_empty(), "{} reports nothing", rel(&f));
        insta::assert_snapshot!(format!("diag__{}", stem(&f)), a.render());
    }
}

#[test]
fn every_diagnostic_code_is_exercised_by_the_corpus() {
    let mut seen = BTreeSet::new();
    for f in fixtures("diag").into_iter().chain(fixtures("ok")) {
        for d in check(&f).diagnostics {
            seen.insert(d.code.as_str());
        }
    }
    for d in analyze("bytes.vox", b"fn f() { \"caf\xe9\" }\n").diagnostics {
        seen.insert(d.code.as_str());
    }
    let deep = format!("fn f() {{ {}1{} }}", "(".repeat(200), ")".repeat(200));
    for d in analyze("deep.vox", deep.as_bytes()).diagnostics {
        seen.insert(d.code.as_str());
    }
    let huge = vec![b' '; vox_lang::MAX_SOURCE_BYTES + 1];
    for d in analyze("huge.vox", &huge).diagnostics {
        seen.insert(d.code.as_str());
    }
    let missing: Vec<&str> = Code::ALL
        .iter()
        .map(|c| c.as_str())
        .filter(|c| !seen.contains(c))
        .collect();
    assert!(missing.is_empty(), "codes without a fixture: {missing:?}");
}

#[test]
fn invalid_utf8_is_a_diagnostic_and_the_rest_is_still_checked() {
    let a = analyze("bytes.vox", b"fn f() { \"caf\xe9\" }\nfn g() { nope }\n");
    insta::assert_snapshot!("invalid_utf8", a.render());
    let codes: Vec<&str> = a.diagnostics.iter().map(|d| d.code.as_str()).collect();
    assert_eq!(codes, ["vox/lex/invalid-utf8", "vox/name/unknown"]);
}

#[test]
fn deep_nesting_is_one_diagnostic_not_a_stack_overflow() {
    let deep = format!(
        "fn f() {{ {}1{} }}\nfn ok() {{ 1 }}\n",
        "(".repeat(5000),
        ")".repeat(5000)
    );
    let a = analyze("deep.vox", deep.as_bytes());
    let nesting: Vec<_> = a
        .diagnostics
        .iter()
        .filter(|d| d.code == Code::NestingTooDeep)
        .collect();
    assert_eq!(nesting.len(), 1, "{}", a.render());
    assert!(a.functions().iter().any(|f| f.name == "ok"));
    // Long flat chains build tall trees; they are bounded the same way.
    let chain = format!("fn f() {{ 1{} }}", " + 1".repeat(20_000));
    let a = analyze("chain.vox", chain.as_bytes());
    assert!(a.diagnostics.iter().any(|d| d.code == Code::NestingTooDeep));
    let calls = format!("fn f() {{ g{} }}", "()".repeat(20_000));
    assert!(analyze("calls.vox", calls.as_bytes()).has_errors());
}

#[test]
fn one_mistake_gives_one_diagnostic() {
    let a = analyze(
        "one.vox",
        b"fn f() {\n    let x = \n    x\n}\nfn g() { 1 }\n",
    );
    let errors: Vec<_> = a
        .diagnostics
        .iter()
        .filter(|d| d.severity() == Severity::Error)
        .collect();
    assert_eq!(errors.len(), 1, "{}", a.render());
}

#[test]
fn syntax_recovery_reports_every_independent_error() {
    let f = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/diag/syntax_recovery.vox");
    let a = analyze("syntax_recovery.vox", &std::fs::read(f).unwrap());
    let lines: BTreeSet<usize> = a
        .diagnostics
        .iter()
        .filter(|d| d.severity() == Severity::Error)
        .map(|d| a.source.line_col(d.span.start).0)
        .collect();
    // a( on 2, `let =` on 5, `1 +` on 8, unclosed paren on 12, `if true 1` on 14, `&&` on 16,
    // lowercase type on 20, decorator on a constant on 23.
    for line in [2, 5, 8, 12, 14, 16, 20, 23] {
        assert!(
            lines.contains(&line),
            "no error on line {line}:\n{}",
            a.render()
        );
    }
    assert!(a.functions().iter().any(|f| f.name == "fine"));
}

#[test]
fn opaque_items_are_info_and_tools_still_load() {
    let f = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ok/opaque.vox");
    let a = analyze("opaque.vox", &std::fs::read(f).unwrap());
    let infos = a
        .diagnostics
        .iter()
        .filter(|d| d.code == Code::NotExecutable)
        .count();
    assert_eq!(infos, 10, "{}", a.render());
    let m = a.into_module().unwrap();
    let tools: Vec<&str> = m.tools().map(|t| t.name.as_str()).collect();
    assert_eq!(tools, ["ping", "uses_component"]);
}

#[test]
fn hir_of_the_tools_fixture() {
    let f = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ok/tools.vox");
    let a = check(&f);
    insta::assert_snapshot!(
        "hir_tools",
        serde_json::to_string_pretty(&a.hir_json()).unwrap()
    );
}

#[test]
fn json_diagnostics_carry_positions() {
    let a = analyze("x.vox", b"fn f() -> int { 1 }\n");
    let j = serde_json::to_value(a.diagnostics_json()).unwrap();
    assert_eq!(
        j,
        serde_json::json!([{
            "code": "vox/syntax/arrow-return-deprecated", "severity": "warning",
            "message": "`->` for return types is deprecated", "file": "x.vox",
            "line": 1, "column": 8, "end_line": 1, "end_column": 10, "help": "write `to Type`"
        }])
    );
}

/// Real-Vox forms (fixtures/realvox, written for this project in the style of the public Vox
/// corpus): the diagnostics, then what federation would serve from each file — every tool
/// that loads, whether the interpreter runs it (and why not), and what calling it gives.
#[test]
fn realvox_fixtures_load_their_tools() {
    use vox_lang::CallOptions;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let ws = FsLoader::new(root.clone());
    for f in fixtures("realvox") {
        let a = check(&f);
        let mut out = a.render();
        let declared = vox_lang::parser::declared_tools(
            &String::from_utf8(std::fs::read(&f).unwrap()).unwrap(),
        );
        let m = a
            .into_partial_module()
            .expect("errors stay in their declarations");
        out.push_str(&format!("\n-- {declared} tool(s) declared, loaded:\n"));
        for t in m.tools() {
            let args = match t.name.as_str() {
                "order_total" => serde_json::json!({"prices": ["19.99", 5]}),
                "describe" => serde_json::json!({"o": {"customer": "Ada", "total": "1"}}),
                "config_path" => serde_json::json!({"name": "lint"}),
                "read_config" => serde_json::json!({"file": "realvox/config.json"}),
                "loud" => serde_json::json!({"s": "hey"}),
                "reply" => serde_json::json!({"text": "hi"}),
                "pair_status" => serde_json::json!({"a": "x"}),
                "table_names" => serde_json::json!({"sql": "CREATE TABLE users (id int);"}),
                _ => serde_json::json!({}),
            };
            let opts = CallOptions {
                workspace: Some(&ws),
                ..CallOptions::default()
            };
            let result = match m.call_json(&t.name, &args, &opts) {
                Ok(o) => o.value.to_string(),
                Err(e) => format!("{}: {e}", e.code()),
            };
            out.push_str(&format!(
                "{} ({}) -> {result}\n",
                t.name,
                t.not_executable.as_deref().unwrap_or("runs")
            ));
        }
        for r in m.run_tests(&CallOptions::default()) {
            let state = if r.skipped {
                "skipped"
            } else if r.passed {
                "ok"
            } else {
                "FAILED"
            };
            out.push_str(&format!(
                "test {} ... {state}{}\n",
                r.name,
                r.message.map(|m| format!(": {m}")).unwrap_or_default()
            ));
        }
        insta::assert_snapshot!(format!("realvox__{}", stem(&f)), out);
    }
}

/// `vox fmt` accepts real-Vox files: formatting is idempotent and keeps their tokens (the
/// formatter refuses anything else), and a file with a syntax error is refused, not mangled.
#[test]
fn realvox_fixtures_format_idempotently() {
    for f in fixtures("realvox") {
        let src = std::fs::read_to_string(&f).unwrap();
        match vox_lang::fmt::format(&rel(&f), &src) {
            Ok(once) => {
                let twice = vox_lang::fmt::format(&rel(&f), &once).unwrap();
                assert_eq!(once, twice, "{}", rel(&f));
            }
            Err(e) => assert!(stem(&f) == "broken", "{}: {e}", rel(&f)),
        }
    }
}
