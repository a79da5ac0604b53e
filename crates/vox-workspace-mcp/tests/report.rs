//! The refresh report's per-file diagnostics and the surface file's budgets.

use std::path::Path;
use vox_workspace_mcp::*;

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn is_static(name: &str) -> bool {
    name.starts_with("vox_")
}

fn scan(root: &Path) -> Surface {
    WorkspaceMcpLoader::new(root.to_path_buf())
        .scan(&is_static)
        .unwrap()
}

fn config_error(text: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), SURFACE_FILE, text);
    match WorkspaceMcpLoader::new(dir.path().to_path_buf()).scan(&is_static) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("accepted:\n{text}"),
    }
}

#[test]
fn every_error_and_warning_of_a_file_is_reported_with_its_position() {
    let dir = tempfile::tempdir().unwrap();
    // Two syntax errors and a warning (`ret`) in one file.
    write(
        dir.path(),
        "tools/bad.vox",
        "@tool\nfn one( to int { 1 }\n\n@tool\nfn two() to int {\n    ret 2\n}\n\n@tool\nfn three() { let = 3 }\n",
    );
    write(
        dir.path(),
        "tools/good.vox",
        "@tool\nfn fine() to int { 1 }\n",
    );
    let s = scan(dir.path());
    let d = &s.report.diagnostics;
    assert_eq!(d.len(), 1, "{d:?}");
    let bad = &d[0];
    assert_eq!(bad.file, "tools/bad.vox");
    // Each error costs only its declaration: `two` (a warning only) is served.
    assert!(bad.loaded);
    assert!(s.tools.contains_key("two") && !s.tools.contains_key("one"));
    assert!(!s.tools.contains_key("three"));
    assert!(bad.errors >= 2, "{bad:?}");
    assert_eq!(bad.warnings, 1, "{bad:?}");
    assert_eq!(bad.diagnostics.len(), bad.errors + bad.warnings);
    let lines: Vec<usize> = bad.diagnostics.iter().map(|x| x.line).collect();
    assert!(
        lines.contains(&2) && lines.contains(&6) && lines.contains(&10),
        "{bad:?}"
    );
    let ret = bad
        .diagnostics
        .iter()
        .find(|x| x.severity == "warning")
        .unwrap();
    assert_eq!(
        (ret.code.as_str(), ret.line, ret.column),
        ("vox/syntax/ret-deprecated", 6, 5)
    );
    assert!(bad.diagnostics.iter().all(|x| !x.message.is_empty()));
    // `errors` still names the file with its first error.
    assert_eq!(s.report.errors.len(), 1);
    assert!(
        s.report.errors[0]
            .diagnostic
            .starts_with("tools/bad.vox:2:"),
        "{:?}",
        s.report.errors
    );
    let json = serde_json::to_value(&s.report).unwrap();
    assert_eq!(json["diagnostics"][0]["file"], "tools/bad.vox");
    assert!(json["diagnostics"][0]["diagnostics"][0]["code"].is_string());
}

#[test]
fn a_file_that_loads_with_warnings_and_infos_is_reported_too() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "app.vox",
        "component App() {\n    <div>hi</div>\n}\n\n@mcp.tool \"Old spelling\"\nfn legacy() to int { 1 }\n",
    );
    let s = scan(dir.path());
    assert!(s.tools.contains_key("legacy"));
    assert!(s.report.errors.is_empty(), "{:?}", s.report.errors);
    let d = &s.report.diagnostics;
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(d[0].loaded);
    assert_eq!((d[0].errors, d[0].warnings, d[0].infos), (0, 1, 1), "{d:?}");
    assert_eq!(
        d[0].diagnostics[0].code,
        "vox/decorator/mcp-tool-deprecated"
    );
    assert_eq!(d[0].diagnostics[0].line, 5);
    assert_eq!(d[0].notes.len(), 1);
    assert!(
        d[0].notes[0].starts_with("1:1 vox/interp/not-executable: "),
        "{:?}",
        d[0].notes
    );
    // A clean scan lists no file.
    write(dir.path(), "app.vox", "@tool\nfn legacy() to int { 1 }\n");
    assert!(scan(dir.path()).report.diagnostics.is_empty());
}

#[test]
fn many_diagnostics_are_counted_exactly_and_listed_up_to_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let src: String = (0..150)
        .map(|i| format!("component C{i}() {{ }}\n@mcp.tool\nfn t{i}() to int {{ {i} }}\n"))
        .collect();
    write(dir.path(), "many.vox", &src);
    let s = scan(dir.path());
    let d = &s.report.diagnostics[0];
    assert_eq!((d.warnings, d.infos), (150, 150));
    assert_eq!(d.diagnostics.len(), MAX_LISTED_DIAGNOSTICS);
    assert_eq!(d.notes.len(), MAX_LISTED_DIAGNOSTICS);
    assert_eq!(d.omitted, 100);
}

#[test]
fn budgets_resolve_per_limit_from_tool_then_file_then_default() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        SURFACE_FILE,
        "version: 1\nscan_globs: [\"**/*.vox\"]\nbudgets:\n  default:\n    max_steps: 5000\n    max_wall_ms: 1000\n  files:\n    a.vox:\n      max_steps: 7000\n      max_memory_bytes: 4096\n  tools:\n    x:\n      max_steps: 9000\n      max_call_depth: 50\n",
    );
    write(
        dir.path(),
        "a.vox",
        "@tool\nfn x() to int { 1 }\n@tool\nfn y() to int { 2 }\n",
    );
    write(dir.path(), "b.vox", "@tool\nfn z() to int { 3 }\n");
    let s = scan(dir.path());
    let default = vox_lang::Budget::default();
    let b = |t: &str| s.tools[t].budget.budget;
    assert_eq!(
        (b("x").max_steps, b("x").max_call_depth, b("x").max_memory),
        (9000, 50, 4096)
    );
    assert_eq!(b("x").max_wall, std::time::Duration::from_secs(1));
    assert_eq!(
        (b("y").max_steps, b("y").max_call_depth, b("y").max_memory),
        (7000, default.max_call_depth, 4096)
    );
    assert_eq!(
        (b("z").max_steps, b("z").max_memory),
        (5000, default.max_memory)
    );
    let x = &s.tools["x"].budget;
    assert_eq!(
        x.describe(vox_lang::BudgetKind::Steps).unwrap(),
        format!("max_steps = 9000, from budgets.tools.x in {SURFACE_FILE}")
    );
    assert!(
        s.tools["z"]
            .budget
            .describe(vox_lang::BudgetKind::Memory)
            .unwrap()
            .contains("the default")
    );
    // A small budget is the one the call runs under.
    let out = s.tools["x"].module.call_json(
        "x",
        &serde_json::Value::Null,
        &vox_lang::CallOptions {
            budget: b("x"),
            ..Default::default()
        },
    );
    assert!(out.is_ok());
    assert!(
        s.report.diagnostics.is_empty(),
        "{:?}",
        s.report.diagnostics
    );
}

#[test]
fn a_budget_key_that_names_nothing_is_a_warning_on_the_surface_file() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        SURFACE_FILE,
        "version: 1\nscan_globs: [\"**/*.vox\"]\nbudgets:\n  files:\n    tool/a.vox: {max_steps: 10}\n  tools:\n    nope: {max_steps: 10}\n",
    );
    write(dir.path(), "a.vox", "@tool\nfn x() to int { 1 }\n");
    let s = scan(dir.path());
    assert!(s.tools.contains_key("x"));
    let d = &s.report.diagnostics;
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].file, SURFACE_FILE);
    assert_eq!(d[0].warnings, 2);
    let m: Vec<(&str, usize, &str)> = d[0]
        .diagnostics
        .iter()
        .map(|x| (x.code.as_str(), x.line, x.message.as_str()))
        .collect();
    assert_eq!(m[0].0, "vox/workspace/budget-unused");
    assert_eq!(m[0].1, 5);
    assert!(
        m[0].2.contains("budgets.files.tool/a.vox names no scanned"),
        "{m:?}"
    );
    assert_eq!(m[1].1, 7);
    assert!(
        m[1].2.contains("budgets.tools.nope names no served"),
        "{m:?}"
    );
    assert!(s.report.errors.is_empty());
}

#[test]
fn an_unknown_budget_key_is_an_error_naming_the_key_and_the_file() {
    let e = config_error(
        "version: 1\nscan_globs: [\"**/*.vox\"]\nbudgets:\n  tools:\n    x:\n      max_stepz: 10\n",
    );
    assert!(e.contains(SURFACE_FILE), "{e}");
    assert!(e.contains("max_stepz"), "{e}");
    assert!(e.contains(":6:"), "{e}");
    let e = config_error("version: 1\nscan_globs: []\nbudget: {}\n");
    assert!(e.contains("unknown field `budget`"), "{e}");
    let e = config_error("version: 1\nscan_globs: []\nbudgets:\n  defaults: {}\n");
    assert!(e.contains("`defaults`"), "{e}");
    let e = config_error("version: 1\nscan_globs: []\nbudgets:\n  default:\n    max_steps: many\n");
    assert!(e.contains("max_steps") || e.contains("invalid type"), "{e}");
}

#[test]
fn a_budget_above_its_cap_or_zero_is_an_error_naming_the_key_and_the_cap() {
    let cases = [
        (
            "default:\n    max_steps: 2000000000",
            "budgets.default.max_steps is 2000000000, above the cap of 1000000000",
        ),
        (
            "tools:\n    x: {max_wall_ms: 300001}",
            "budgets.tools.x.max_wall_ms is 300001, above the cap of 300000",
        ),
        (
            "files:\n    a.vox: {max_memory_bytes: 1073741825}",
            "budgets.files.a.vox.max_memory_bytes is 1073741825, above the cap of 1073741824",
        ),
        (
            "tools:\n    x: {max_call_depth: 100000}",
            "budgets.tools.x.max_call_depth is 100000, above the cap of 2000",
        ),
        (
            "tools:\n    x: {max_steps: 0}",
            "budgets.tools.x.max_steps must be at least 1",
        ),
    ];
    for (budgets, want) in cases {
        let e = config_error(&format!(
            "version: 1\nscan_globs: [\"**/*.vox\"]\nbudgets:\n  {budgets}\n"
        ));
        assert!(e.contains(want), "{budgets}: {e}");
        assert!(e.contains(SURFACE_FILE), "{e}");
    }
}

#[test]
fn an_unusable_surface_file_is_reported_against_it() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        SURFACE_FILE,
        "version: 1\nscan_globs: []\nextra: 1\n",
    );
    let e = WorkspaceMcpLoader::new(dir.path().to_path_buf())
        .scan(&is_static)
        .err()
        .unwrap();
    let s = Surface::unusable(&e);
    assert!(s.tools.is_empty());
    assert_eq!(s.report.errors[0].file, SURFACE_FILE);
    let d = &s.report.diagnostics[0];
    assert_eq!(
        (d.file.as_str(), d.errors, d.diagnostics[0].code.as_str()),
        (SURFACE_FILE, 1, "vox/workspace/surface-config")
    );
    assert_eq!(d.diagnostics[0].line, 3);
}

#[test]
fn the_example_workspace_surface_file_is_valid_and_every_budget_key_applies() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/workspace");
    let s = scan(&root);
    assert!(s.report.errors.is_empty(), "{:?}", s.report.errors);
    assert!(
        s.report.diagnostics.is_empty(),
        "{:?}",
        s.report.diagnostics
    );
    let config = WorkspaceMcpLoader::new(root).config().unwrap();
    assert!(!config.budgets.files.is_empty() && !config.budgets.tools.is_empty());
    assert_eq!(s.tools["stats"].budget.budget.max_steps, 5_000_000);
    assert_eq!(s.tools["order_total"].budget.budget.max_steps, 200_000);
}
