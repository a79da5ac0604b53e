//! Figures issue 3 asks for: front-end throughput on a large generated file, a small tool's
//! JSON round trip, and recursive `fib(25)` beside CPython in the same run; also checking a
//! file whose imports load other files, and a call that crosses into an imported file.
//!
//! `cargo bench -p vox-lang --bench lang`

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::Value as J;
use std::hint::black_box;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;
use vox_lang::{CallOptions, MemoryLoader, Module, analyze, analyze_with};

/// A realistic file: tools with decorators, types, matches, closures, strings and loops,
/// repeated with fresh names until it reaches `target` bytes.
fn generated_source(target: usize) -> String {
    let mut s =
        String::from("// generated for the throughput benchmark\nimport std.text.{pad}\n\n");
    let mut i = 0;
    while s.len() < target {
        s.push_str(&format!(
            r#"type Shape{i} =
    | Circle{i}(radius: float)
    | Rect{i}(width: float, height: float)
    | Empty{i}

let LIMIT_{i}: int = {i} * 2 + 1

@tool "area_{i}: area of a shape"
fn area_{i}(s: Shape{i}, scale: float = 1.0) to float {{
    match s {{
        Circle{i}(r) => 3.14159 * r * r * scale,
        Rect{i}(w, h) => w * h * scale,
        Empty{i} => 0.0,
    }}
}}

@tool "summarize_{i}: count and join words"
fn summarize_{i}(text: str, sep: str = ", ", limit: int = 10) to Result[str] {{
    let words = text.split(" ").filter(fn(w) {{ len(w) > 0 }})
    if len(words) > limit {{
        return Error("too many words: {{limit}}")
    }}
    let mut out = []
    for w, idx in words {{
        if idx % 2 == 0 {{ out.push(w.to_upper()) }} else {{ out.push(w) }}
    }}
    Ok(out.join(sep))
}}

@test "area_{i} of a unit circle"
fn test_area_{i}() {{
    assert(area_{i}(Circle{i}(1.0)) > 3.0, "circle")
    let total = [1, 2, 3].fold(0, fn(a, b) {{ a + b }}) |> abs
    assert(total == 6 and LIMIT_{i} >= 1)
}}

"#
        ));
        i += 1;
    }
    s
}

/// Real-Vox-style declarations (the forms of the public Vox corpus: tables, endpoints with
/// named decorator arguments, components, routes, capitalised handlers, `std.*` namespaces,
/// `dec` literals, lambdas, script statements) around tools, with fresh names, up to `target`
/// bytes.
fn real_style_source(target: usize) -> String {
    let mut s = String::from("// vox:caps fs process\nimport fs\nimport path\n\n");
    let mut i = 0;
    while s.len() < target {
        s.push_str(&format!(
            r#"@table type Order{i} {{
    customer: str
    total: dec
}}

@endpoint(kind: query) fn open_orders_{i}() to list[Order{i}] {{
    return db.Order{i}.filter({{status: "open"}}).all()
}}

component OrderList{i}(orders: list[Order{i}]) {{
    state selected: int = 0
    view: column() {{
        text(value = "Orders")
    }}
}}

routes {{
    "/orders/{i}" to OrderList{i}
}}

fn InventoryActor{i}_Merge(kind: str, count: int) to str {{
    return kind + ":" + str(count)
}}

fn build_{i}() to int {{
    let out = std.process.run("cargo", ["build"])
    return 0
}}

@ai(task_category = CodeGen, tier_max = Pro)
@uses(net, fs)
@tool "order_total_{i}: total with tax"
fn order_total_{i}(prices: list[dec], tax: dec = 0.08dec, cfg: str = "config") to dec {{
    let file = path.join(cfg, "orders_{i}.json")
    let parsed = json.parse("[1, 2]")
    let doubled = [1, 2, 3].map(x => x * 2)
    let mut sum = 0dec
    for p in prices {{
        sum = sum + p
    }}
    return sum + sum * tax
}}

print("loaded block {i}")

"#
        ));
        i += 1;
    }
    s
}

fn front_end(c: &mut Criterion) {
    let src = generated_source(4 << 20);
    assert!(!analyze("gen.vox", src.as_bytes()).has_errors());
    let mut g = c.benchmark_group("front_end");
    g.throughput(Throughput::Bytes(src.len() as u64));
    g.sample_size(20);
    g.bench_function("lex_parse_lower_4MiB", |b| {
        b.iter(|| analyze("gen.vox", black_box(src.as_bytes())));
    });
    // The phases alone, to show where the time goes.
    g.bench_function("lex_only_4MiB", |b| {
        b.iter(|| vox_lang::lexer::lex(black_box(&src)));
    });
    g.bench_function("lex_parse_4MiB_tree_kept", |b| {
        b.iter_with_large_drop(|| vox_lang::parser::parse(black_box(&src)));
    });
    // The same work, with freeing the resulting HIR left out of the timing (a caller keeps it).
    g.bench_function("lex_parse_lower_4MiB_result_kept", |b| {
        b.iter_with_large_drop(|| analyze("gen.vox", black_box(src.as_bytes())));
    });
    g.finish();
    let real = real_style_source(4 << 20);
    assert!(!analyze("real.vox", real.as_bytes()).has_errors());
    let mut g = c.benchmark_group("front_end_real_style");
    g.throughput(Throughput::Bytes(real.len() as u64));
    g.sample_size(20);
    g.bench_function("lex_parse_lower_4MiB_result_kept", |b| {
        b.iter_with_large_drop(|| analyze("real.vox", black_box(real.as_bytes())));
    });
    g.finish();
}

fn tool_call(c: &mut Criterion) {
    let m = Module::compile(
        "tool.vox",
        br#"@tool "greet: say hello"
fn greet(name: str, excited: bool = false) to str {
    let punct = if excited { "!" } else { "." }
    "Hello {name}{punct}"
}
"#,
    )
    .unwrap();
    let opts = CallOptions::default();
    let input = r#"{"name": "Ada", "excited": true}"#;
    c.bench_function("tool_call_json_roundtrip", |b| {
        b.iter(|| {
            let args: J = serde_json::from_str(black_box(input)).unwrap();
            let out = m.call_json("greet", &args, &opts).unwrap();
            serde_json::to_string(&out.value).unwrap()
        });
    });
}

const PY_FIB: &str = r#"
import sys, time
def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)
for line in sys.stdin:
    n = int(line)
    t = time.perf_counter_ns()
    for _ in range(n):
        fib(25)
    print(time.perf_counter_ns() - t, flush=True)
"#;

/// A long-lived CPython that runs fib(25) `n` times per request and reports the time it took,
/// so interpreter start-up is not measured.
struct Python {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Python {
    fn start() -> Option<Python> {
        let mut child = Command::new("python3")
            .arg("-c")
            .arg(PY_FIB)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .ok()?;
        let stdin = child.stdin.take()?;
        let stdout = BufReader::new(child.stdout.take()?);
        Some(Python {
            child,
            stdin,
            stdout,
        })
    }

    fn run(&mut self, iters: u64) -> Duration {
        writeln!(self.stdin, "{iters}").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        Duration::from_nanos(line.trim().parse().unwrap())
    }
}

impl Drop for Python {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn fib(c: &mut Criterion) {
    let m = Module::compile(
        "fib.vox",
        b"fn fib(n: int) to int { if n < 2 { n } else { fib(n - 1) + fib(n - 2) } }\n",
    )
    .unwrap();
    let opts = CallOptions::default();
    let args = serde_json::json!({"n": 25});
    assert_eq!(
        m.call_json("fib", &args, &opts).unwrap().value,
        serde_json::json!(75025)
    );
    let mut g = c.benchmark_group("fib25");
    g.sample_size(20);
    g.bench_function(BenchmarkId::new("vox", 25), |b| {
        b.iter(|| m.call_json("fib", black_box(&args), &opts).unwrap());
    });
    match Python::start() {
        Some(mut py) => {
            g.bench_function(BenchmarkId::new("cpython", 25), |b| {
                b.iter_custom(|iters| py.run(iters));
            });
        }
        None => eprintln!("python3 not found: the CPython side of fib25 is skipped"),
    }
    g.finish();
}

/// A root importing eight 64 KiB modules (each importing a shared one), checked together; and
/// a tool whose body calls a function of an imported file.
fn imports(c: &mut Criterion) {
    let mut loader = MemoryLoader::default();
    let mut root = String::new();
    loader.files.insert(
        "lib/shared.vox".into(),
        b"fn clamp(x: int, lo: int, hi: int) to int { max(lo, min(x, hi)) }\n".to_vec(),
    );
    for k in 0..8 {
        let body = generated_source(64 << 10)
            .replace("import std.text.{pad}", "import lib.shared.{clamp}");
        loader
            .files
            .insert(format!("lib/m{k}.vox"), body.into_bytes());
        root.push_str(&format!("import lib.m{k}.{{area_{k}}}\n"));
    }
    root.push_str(
        "import lib.shared.{clamp}\n\n@tool\nfn limit(x: int) to int { clamp(x, 0, 10) }\n",
    );
    let total: usize = loader.files.values().map(Vec::len).sum::<usize>() + root.len();
    let a = analyze_with("root.vox", root.as_bytes(), &loader);
    assert!(!a.has_errors(), "{}", a.render());
    let mut g = c.benchmark_group("imports");
    g.throughput(Throughput::Bytes(total as u64));
    g.sample_size(20);
    g.bench_function("check_root_with_8x64KiB_imports", |b| {
        b.iter_with_large_drop(|| analyze_with("root.vox", black_box(root.as_bytes()), &loader));
    });
    g.finish();
    let m = a.into_module().unwrap();
    let opts = CallOptions::default();
    let input = r#"{"x": 42}"#;
    c.bench_function("tool_call_into_imported_file", |b| {
        b.iter(|| {
            let args: J = serde_json::from_str(black_box(input)).unwrap();
            let out = m.call_json("limit", &args, &opts).unwrap();
            serde_json::to_string(&out.value).unwrap()
        });
    });
}

criterion_group!(benches, front_end, tool_call, fib, imports);
criterion_main!(benches);
