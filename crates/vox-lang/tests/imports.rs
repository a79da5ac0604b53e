//! Imports of other `.vox` files: what they load, how calls across files run, and what goes
//! wrong in a way the user can act on.

use serde_json::{Value as J, json};
use std::path::Path;
use vox_lang::{
    Budget, BudgetKind, CallError, CallOptions, Code, FsLoader, MemoryLoader, Module, analyze,
    analyze_with,
};

fn memory(files: &[(&str, &str)]) -> MemoryLoader {
    let mut l = MemoryLoader::default();
    for (name, text) in files {
        l.files.insert(name.to_string(), text.as_bytes().to_vec());
    }
    l
}

fn compile(root: &str, files: &[(&str, &str)]) -> Module {
    match Module::compile_with("main.vox", root.as_bytes(), &memory(files)) {
        Ok(m) => m,
        Err(e) => panic!("does not compile:\n{}", e.render()),
    }
}

fn codes(root: &str, files: &[(&str, &str)]) -> Vec<&'static str> {
    analyze_with("main.vox", root.as_bytes(), &memory(files))
        .diagnostics
        .iter()
        .map(|d| d.code.as_str())
        .collect()
}

fn call(m: &Module, f: &str, args: J) -> Result<J, CallError> {
    m.call_json(f, &args, &CallOptions::default())
        .map(|o| o.value)
}

fn fixture_module() -> Module {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let bytes = std::fs::read(root.join("ok/imports.vox")).unwrap();
    Module::compile_with("ok/imports.vox", &bytes, &FsLoader::new(root)).unwrap()
}

#[test]
fn imported_functions_constants_and_variants_run_from_the_importing_file() {
    let m = fixture_module();
    let area = call(&m, "shape_area", json!({"kind": "circle", "size": 2.0})).unwrap();
    assert!((area.as_f64().unwrap() - 12.56636).abs() < 1e-9, "{area}");
    assert_eq!(
        call(&m, "loud_shape", json!({"r": 1.5})).unwrap(),
        json!("CIRCLE OF RADIUS 1.5!")
    );
    assert_eq!(
        call(&m, "make_shape", json!({"w": 2.0, "h": 3.0})).unwrap(),
        json!({"variant": "Rect", "fields": {"w": 2.0, "h": 3.0}})
    );
    let tests = m.run_tests(&CallOptions::default());
    assert!(tests.iter().all(|t| t.passed), "{tests:?}");
}

#[test]
fn only_the_root_files_functions_are_tools_and_callable() {
    let m = fixture_module();
    let tools: Vec<&str> = m.tools().map(|t| t.name.as_str()).collect();
    assert_eq!(tools, ["shape_area", "loud_shape", "make_shape"]);
    // `area` runs inside the file, but it is not the file's own function.
    assert_eq!(
        call(&m, "area", J::Null),
        Err(CallError::UnknownFunction("area".into()))
    );
    let names: Vec<&str> = m
        .imported_files()
        .iter()
        .map(|f| f.source.name.as_str())
        .collect();
    // Each file once, although two files import `text.vox`.
    assert_eq!(names, ["ok/lib/shapes.vox", "ok/lib/text.vox"]);
    let hir = m.hir_json();
    assert_eq!(
        hir["imports"][0],
        json!({"module": "lib.shapes", "file": "ok/lib/shapes.vox", "names": ["Shape", "area", "show", "UNIT"]})
    );
    assert_eq!(
        hir["types"],
        json!([]),
        "imported types are not the file's own"
    );
}

#[test]
fn an_imported_adt_parameter_accepts_its_json_form() {
    let m = compile(
        "import shapes.{Shape, area}\n@tool\nfn size(s: Shape) to float { area(s) }\n",
        &[(
            "shapes.vox",
            "type Shape = | Sq(side: float) | Tri(b: float, h: float)\nfn area(s: Shape) to float { match s { Sq(x) => x * x, Tri(b, h) => b * h / 2.0 } }\n",
        )],
    );
    assert_eq!(
        call(
            &m,
            "size",
            json!({"s": {"variant": "Tri", "fields": {"b": 4.0, "h": 3.0}}})
        )
        .unwrap(),
        json!(6.0)
    );
    let err = call(
        &m,
        "size",
        json!({"s": {"variant": "Circle", "fields": {}}}),
    )
    .unwrap_err();
    assert!(err.is_input_error(), "{err}");
}

#[test]
fn closures_from_another_file_capture_and_run() {
    let m = compile(
        "import lib.fns.{adder, twice}\nfn f() to int { twice(adder(10), 1) }\n",
        &[(
            "lib/fns.vox",
            "fn adder(n: int) { fn(x) { x + n } }\nfn twice(g, x) { g(g(x)) }\n",
        )],
    );
    assert_eq!(call(&m, "f", J::Null).unwrap(), json!(21));
}

#[test]
fn a_runaway_imported_function_spends_the_callers_budget_and_names_its_file() {
    let m = compile(
        "import spin.{forever}\nfn f() { forever() }\n",
        &[("spin.vox", "fn forever() {\n    loop { }\n}\n")],
    );
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
    match m.call_json("f", &J::Null, &opts) {
        Err(CallError::Budget {
            kind, file, line, ..
        }) => {
            assert_eq!(kind, BudgetKind::Steps);
            assert_eq!(file, "spin.vox");
            assert_eq!(line, 2);
        }
        other => panic!("{other:?}"),
    }
    // The module is still usable afterwards.
    assert!(m.call_json("f", &J::Null, &opts).is_err());
}

#[test]
fn a_runtime_error_in_an_imported_file_is_located_there() {
    let m = compile(
        "import lib.math.{div}\n\nfn f(a: int, b: int) to int { div(a, b) }\n",
        &[(
            "lib/math.vox",
            "// integer division\nfn div(a: int, b: int) to int {\n    a / b\n}\n",
        )],
    );
    assert_eq!(call(&m, "f", json!({"a": 7, "b": 2})).unwrap(), json!(3));
    match call(&m, "f", json!({"a": 1, "b": 0})) {
        Err(e @ CallError::Runtime { .. }) => {
            let CallError::Runtime {
                file, line, column, ..
            } = &e
            else {
                unreachable!()
            };
            assert_eq!((file.as_str(), *line, *column), ("lib/math.vox", 3, 5));
            assert!(
                e.to_string()
                    .starts_with("runtime error at lib/math.vox:3:5"),
                "{e}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn aliases_and_the_dotted_single_item_form() {
    let m = compile(
        "import util.greet as hello\nimport util.{NAME as who}\nfn f() to str { hello(who) }\n",
        &[(
            "util.vox",
            "let NAME = \"Ada\"\nfn greet(n: str) to str { \"hi {n}\" }\n",
        )],
    );
    assert_eq!(call(&m, "f", J::Null).unwrap(), json!("hi Ada"));
    // The original name is not bound when an alias is given.
    assert!(
        codes(
            "import util.greet as hello\nfn f() { greet(1) }\n",
            &[("util.vox", "fn greet(n) { n }\n")]
        )
        .contains(&"vox/name/unknown")
    );
}

#[test]
fn an_imported_name_that_clashes_with_a_definition_is_a_duplicate() {
    let c = codes(
        "import util.{greet}\nfn greet() { 1 }\n",
        &[("util.vox", "fn greet() { 2 }\n")],
    );
    assert_eq!(c, ["vox/name/duplicate"]);
    let c = codes(
        "import util.{Color}\ntype Color = | Red\n",
        &[("util.vox", "type Color = | Red | Blue\n")],
    );
    assert!(c.contains(&"vox/name/duplicate"), "{c:?}");
}

#[test]
fn imported_names_are_checked_for_arity() {
    let c = codes(
        "import util.{two}\nfn f() { two(1) }\n",
        &[("util.vox", "fn two(a, b) { a + b }\n")],
    );
    assert_eq!(c, ["vox/call/arity"]);
}

#[test]
fn a_cycle_that_does_not_pass_through_the_root_is_an_error_in_the_module() {
    let files = [
        ("a.vox", "import b.{g}\nfn f() { g() }\n"),
        ("b.vox", "import a.{f}\nfn g() { f() }\n"),
    ];
    let a = analyze_with(
        "main.vox",
        b"import a.{f}\nfn main() { f() }\n",
        &memory(&files),
    );
    let codes: Vec<_> = a.diagnostics.iter().map(|d| d.code).collect();
    assert_eq!(codes, [Code::ImportHasErrors]);
    assert!(
        a.render().contains("import cycle: a.vox → b.vox → a.vox"),
        "{}",
        a.render()
    );
}

#[test]
fn a_diamond_loads_the_shared_file_once() {
    let m = compile(
        "import left.{l}\nimport right.{r}\nfn f() { l() + r() }\n",
        &[
            ("left.vox", "import base.{one}\nfn l() { one() }\n"),
            ("right.vox", "import base.{one}\nfn r() { one() + 1 }\n"),
            ("base.vox", "fn one() { 1 }\n"),
        ],
    );
    assert_eq!(call(&m, "f", J::Null).unwrap(), json!(3));
    assert_eq!(m.imported_files().len(), 3);
}

#[test]
fn a_chain_longer_than_the_limit_is_refused_not_followed() {
    let n = vox_lang::import::MAX_IMPORTED_FILES + 5;
    let texts: Vec<String> = (0..n)
        .map(|i| format!("import m{}.{{f{}}}\nfn f{i}() {{ 1 }}\n", i + 1, i + 1))
        .collect();
    let names: Vec<String> = (0..n).map(|i| format!("m{i}.vox")).collect();
    let files: Vec<(&str, &str)> = names
        .iter()
        .zip(&texts)
        .map(|(n, t)| (n.as_str(), t.as_str()))
        .collect();
    let a = analyze_with("main.vox", b"import m0.{f0}\n", &memory(&files));
    assert!(a.has_errors());
    assert!(a.render().contains("the limit is 64"), "{}", a.render());
}

#[test]
fn without_a_loader_imports_are_accepted_and_fail_only_when_called() {
    let a = analyze(
        "main.vox",
        b"import util.{greet}\nfn f() { greet() }\nfn g() { 1 }\n",
    );
    let codes: Vec<_> = a.diagnostics.iter().map(|d| d.code).collect();
    assert_eq!(codes, [Code::ImportNotLoaded]);
    let m = a.into_module().unwrap();
    assert_eq!(call(&m, "g", J::Null).unwrap(), json!(1));
    match call(&m, "f", J::Null) {
        Err(CallError::Runtime { message, .. }) => {
            assert!(
                message.contains("`greet` comes from an import that loaded no .vox file"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_file_loader_stays_inside_its_root() {
    let dir = std::env::temp_dir().join(format!("vox-imports-{}", std::process::id()));
    let outside = dir.join("outside");
    let root = dir.join("ws");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.vox"), "fn s() { 1 }\n").unwrap();
    std::fs::write(root.join("shared.vox"), "fn one() { 1 }\n").unwrap();
    std::os::unix::fs::symlink(outside.join("secret.vox"), root.join("leak.vox")).unwrap();
    let loader = FsLoader::new(&root);
    // Next to the importing file first, then at the root.
    let a = analyze_with(
        "sub/t.vox",
        b"import shared.{one}\nfn f() { one() }\n",
        &loader,
    );
    assert!(!a.has_errors(), "{}", a.render());
    // A link out of the root is refused.
    let a = analyze_with("t.vox", b"import leak.{s}\n", &loader);
    assert_eq!(
        a.diagnostics[0].code,
        Code::ImportUnreadable,
        "{}",
        a.render()
    );
    // An importing file named outside the root only resolves from the root.
    let a = analyze_with("../outside/t.vox", b"import secret.{s}\n", &loader);
    assert_eq!(
        a.diagnostics[0].code,
        Code::ImportNotLoaded,
        "{}",
        a.render()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn importing_a_type_and_its_variant_or_a_type_twice_is_not_a_duplicate() {
    let lib = [("lib.vox", "type Shape = | Circle(r: float) | Dot\n")];
    let c = codes(
        "import lib.{Shape, Circle}\nimport lib.{Shape as S}\nfn f() { match Circle(1.0) { Circle(r) => r, Dot => 0.0 } }\n",
        &lib,
    );
    assert!(c.is_empty(), "{c:?}");
}

#[test]
fn an_unknown_imported_name_is_one_error_and_its_uses_fail_only_when_run() {
    let files = [("lib.vox", "fn real() { 1 }\n")];
    let c = codes(
        "import lib.{nope}\nfn f() { nope() + nope() }\nfn g() { 2 }\n",
        &files,
    );
    assert_eq!(c, ["vox/import/unknown-name"]);
    // Many unknown names: at most 20 are reported, and checking stays fast.
    let names: Vec<String> = (0..2000).map(|i| format!("x{i}")).collect();
    let root = format!("import lib.{{{}}}\n", names.join(", "));
    let c = codes(&root, &files);
    assert_eq!(c.len(), 20);
}

#[test]
fn a_skipped_declaration_can_be_imported_and_fails_only_when_used() {
    let m = compile(
        "import lib.{Counter, one}\nfn f() { Counter() }\nfn g() { one() }\n",
        &[(
            "lib.vox",
            "actor Counter {\n  state n: int\n}\nfn one() { 1 }\n",
        )],
    );
    assert_eq!(call(&m, "g", J::Null).unwrap(), json!(1));
    let e = call(&m, "f", J::Null).unwrap_err();
    assert!(
        e.to_string().contains("`Counter` is a `actor` declaration"),
        "{e}"
    );
}

#[test]
fn a_module_is_looked_up_once_however_many_imports_repeat_it() {
    use std::cell::Cell;
    struct Counting(MemoryLoader, Cell<usize>);
    impl vox_lang::ModuleLoader for Counting {
        fn load(
            &self,
            from: &str,
            path: &[&str],
        ) -> Result<vox_lang::import::LoadedSource, vox_lang::import::LoadError> {
            self.1.set(self.1.get() + 1);
            self.0.load(from, path)
        }
    }
    let loader = Counting(memory(&[("a.vox", "fn f() { 1 }\n")]), Cell::new(0));
    let root = "import a.{f}\n".repeat(500) + &"import missing.{g}\n".repeat(500);
    let a = analyze_with("main.vox", root.as_bytes(), &loader);
    assert!(!a.has_errors(), "{}", a.render());
    assert_eq!(loader.1.get(), 2);
}
