use serde_json::{Value as J, json};
use std::cell::Cell;
use std::time::Instant;
use vox_lang::import::{LoadError, LoadedSource, ModuleLoader};
use vox_lang::{CallOptions, MemoryLoader, Module, analyze_with};

fn memory(files: &[(&str, &str)]) -> MemoryLoader {
    let mut l = MemoryLoader::default();
    for (name, text) in files {
        l.files.insert(name.to_string(), text.as_bytes().to_vec());
    }
    l
}
fn show(root: &str, files: &[(&str, &str)]) -> String {
    let a = analyze_with("main.vox", root.as_bytes(), &memory(files));
    a.render()
}

#[test]
fn r1_type_and_variant_both_imported() {
    println!(
        "R1:\n{}",
        show(
            "import lib.{Shape, Circle}\nfn f() { Circle(1.0) }\n",
            &[(
                "lib.vox",
                "type Shape = | Circle(r: float) | Sq(s: float)\n"
            )],
        )
    );
    println!(
        "R1b:\n{}",
        show(
            "import lib.{Shape}\nimport lib.{Shape as S}\nfn f() { Circle(1.0) }\n",
            &[(
                "lib.vox",
                "type Shape = | Circle(r: float) | Sq(s: float)\n"
            )],
        )
    );
    println!(
        "R1c (local fn named like an unmentioned variant):\n{}",
        show(
            "import lib.{Shape}\nfn Sq() { 1 }\n",
            &[(
                "lib.vox",
                "type Shape = | Circle(r: float) | Sq(s: float)\n"
            )],
        )
    );
}

#[test]
fn r2_alias_blowup() {
    for n in [100usize, 200, 400] {
        let mut dep = String::from("type T =");
        for i in 0..n {
            dep.push_str(&format!(" | V{i}"));
        }
        dep.push('\n');
        let mut root = String::from("import a.{");
        for i in 0..n {
            root.push_str(&format!("T as A{i}, "));
        }
        root.push_str("}\nfn f() { [");
        for i in 0..n {
            root.push_str(&format!("V{i}, "));
        }
        root.push_str("] }\n");
        let t = Instant::now();
        let a = analyze_with("main.vox", root.as_bytes(), &memory(&[("a.vox", &dep)]));
        println!(
            "R2 n={n} root={}B diags={} {:?}",
            root.len(),
            a.diagnostics.len(),
            t.elapsed()
        );
    }
}

#[test]
fn r3_unknown_name_help_quadratic() {
    for (n, m) in [(500usize, 20000usize), (1000, 20000)] {
        let mut dep = String::new();
        for i in 0..m {
            dep.push_str(&format!("fn g{i}() {{ 1 }}\n"));
        }
        let mut root = String::from("import a.{");
        for i in 0..n {
            root.push_str(&format!("x{i}, "));
        }
        root.push_str("}\n");
        let t = Instant::now();
        let a = analyze_with("main.vox", root.as_bytes(), &memory(&[("a.vox", &dep)]));
        println!(
            "R3 n={n} m={m} root={}B dep={}B diags={} {:?}",
            root.len(),
            dep.len(),
            a.diagnostics.len(),
            t.elapsed()
        );
    }
}

struct Counting<'a>(MemoryLoader, &'a Cell<usize>);
impl ModuleLoader for Counting<'_> {
    fn load(&self, from: &str, path: &[&str]) -> Result<LoadedSource, LoadError> {
        self.1.set(self.1.get() + 1);
        self.0.load(from, path)
    }
    fn key(&self, name: &str) -> Option<String> {
        self.0.key(name)
    }
}

#[test]
fn r4_repeated_imports_reload() {
    let dep = "fn f() { 1 }\n".repeat(1) + &"// pad\n".repeat(100_000);
    let root = "import a.{f}\n".repeat(2000);
    let n = Cell::new(0);
    let t = Instant::now();
    let a = analyze_with(
        "main.vox",
        root.as_bytes(),
        &Counting(memory(&[("a.vox", &dep)]), &n),
    );
    println!(
        "R4 loads={} dep={}B diags={} {:?}",
        n.get(),
        dep.len(),
        a.diagnostics.len(),
        t.elapsed()
    );
}

#[test]
fn r5_locate_and_consts() {
    let m = Module::compile_with(
        "main.vox",
        b"import a.{K, g}\nlet K2 = K + 1\nfn f() { K2 }\nfn h(x: int) { g(x) }\nfn bad() {\n  1 / 0\n}\n",
        &memory(&[("a.vox", "let B = 10\nlet K = B * c()\nfn c() { 2 }\nfn g(x: int) {\n  [1][x]\n}\n")]),
    ).unwrap();
    let o = CallOptions::default();
    println!("R5 f={:?}", m.call_json("f", &J::Null, &o).map(|o| o.value));
    println!("R5 h={:?}", m.call_json("h", &json!({"x": 5}), &o));
    println!("R5 bad={:?}", m.call_json("bad", &J::Null, &o));
}

#[test]
fn r6_cycles_and_misc() {
    println!(
        "R6 root cycle:\n{}",
        show(
            "import a.{f}\nfn m() { f() }\n",
            &[("a.vox", "import main.{m}\nfn f() { 1 }\n")]
        )
    );
    println!(
        "R6 self import:\n{}",
        show("import main.{m}\nfn m() { 1 }\n", &[])
    );
    println!(
        "R6 dup import same name:\n{}",
        show(
            "import a.{f}\nimport a.{f}\nfn m() { f() }\n",
            &[("a.vox", "fn f() { 1 }\n")]
        )
    );
    println!(
        "R6 nested has-errors:\n{}",
        show(
            "import a.{f}\n",
            &[
                ("a.vox", "import b.{g}\nfn f() { g() }\n"),
                ("b.vox", "fn g() { nope }\n")
            ]
        )
    );
    println!(
        "R6 import opaque:\n{}",
        show("import a.{Foo}\n", &[("a.vox", "trait Foo {}\n")])
    );
    println!(
        "R6 import fallback:\n{}",
        show(
            "import a\nimport a.b.{c d}\nimport a.{}\n",
            &[("a.vox", "fn f() { 1 }\n")]
        )
    );
    println!(
        "R6 dep warn only:\n{}",
        show("import a.{f}\n", &[("a.vox", "@foo\nfn f() { 1 }\n")])
    );
    println!(
        "R6 import a variant only:\n{}",
        show(
            "import a.{Circle}\nfn m() { match Circle(1) { Circle(x) => x, _ => 0 } }\n",
            &[("a.vox", "type S = | Circle(r: int) | Sq\n")]
        )
    );
}

#[test]
fn r7_fs_loader() {
    use vox_lang::FsLoader;
    let dir = std::env::temp_dir().join(format!("vox-review-{}", std::process::id()));
    let root = dir.join("ws");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(root.join("main.vox"), "import a.{f}\nfn m() { f() }\n").unwrap();
    std::fs::write(root.join("a.vox"), "import main.{m}\nfn f() { 1 }\n").unwrap();
    let l = FsLoader::new(&root);
    let a = analyze_with(
        "main.vox",
        &std::fs::read(root.join("main.vox")).unwrap(),
        &l,
    );
    println!("R7 root cycle on disk:\n{}", a.render());
    // root given as ./main.vox
    let a = analyze_with(
        "./main.vox",
        &std::fs::read(root.join("main.vox")).unwrap(),
        &l,
    );
    println!("R7 root cycle ./name:\n{}", a.render());
    // dangling symlink next to the importer shadows the root-level file
    std::fs::write(root.join("shared.vox"), "fn one() { 1 }\n").unwrap();
    std::os::unix::fs::symlink(root.join("nope.vox"), root.join("sub/shared.vox")).unwrap();
    let a = analyze_with("sub/t.vox", b"import shared.{one}\n", &l);
    println!("R7 dangling:\n{}", a.render());
    // name with `..` that stays inside root
    let a = analyze_with("sub/../sub/t.vox", b"import shared.{one}\n", &l);
    println!("R7 dotdot inside:\n{} imported={:?}", a.render(), 0);
    // source text named as an existing file (orchestrator validate with name)
    let a = analyze_with("a.vox", b"import main.{m}\nfn f() { 2 }\n", &l);
    println!("R7 source named as existing a.vox:\n{}", a.render());
    std::fs::remove_dir_all(&dir).unwrap();
}
