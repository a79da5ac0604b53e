//! Benchmarks of a workspace scan: the first (compiling every file) and a rescan served from the
//! content-hash cache.

use criterion::{Criterion, criterion_group, criterion_main};
use vox_workspace_mcp::WorkspaceMcpLoader;

/// 1,000 files with 5 tools each, as the figure asks.
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for f in 0..1000 {
        let mut src = String::new();
        for t in 0..5 {
            src.push_str(&format!(
                "@tool \"tool {t} of file {f}\"\nfn t{f}_{t}(name: str, n: int = 1) to str {{\n    \"{{name}} {{n}}\"\n}}\n\n"
            ));
        }
        let sub = dir.path().join(format!("d{}", f % 20));
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(sub.join(format!("f{f}.vox")), src).unwrap();
    }
    dir
}

/// 1,000 files written the way real Vox projects are: a table, an endpoint, a component and
/// a script line around five tools, one of which uses `std.process` (listed, not run); every
/// tenth file has a syntax error in one more declaration (left out, the rest served).
fn real_style_workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for f in 0..1000 {
        let mut src = format!(
            "@table type Row{f} {{\n    name: str\n}}\n\n@endpoint(kind: query) fn rows_{f}() to list[Row{f}] {{\n    return db.Row{f}.all()\n}}\n\ncomponent View{f}() {{\n    view: text(value = \"hi\")\n}}\n\n@tool \"build {f}\"\nfn build_{f}() to int {{\n    std.process.run(\"cargo\", [\"build\"])\n    0\n}}\n\n"
        );
        for t in 0..4 {
            src.push_str(&format!(
                "@tool \"tool {t} of file {f}\"\nfn t{f}_{t}(dir: str, n: int = 1) to str {{\n    path.join(dir, \"f{t}.json\") + str(n)\n}}\n\n"
            ));
        }
        if f % 10 == 0 {
            src.push_str("fn broken() to int {\n    let x = (1 +\n}\n\n");
        }
        src.push_str("print(\"loaded\")\n");
        let sub = dir.path().join(format!("d{}", f % 20));
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(sub.join(format!("f{f}.vox")), src).unwrap();
    }
    dir
}

fn bench(c: &mut Criterion) {
    let dir = workspace();
    let mut g = c.benchmark_group("scan_1000_files_5_tools");
    g.sample_size(10);
    g.bench_function("cold", |b| {
        b.iter(|| {
            let loader = WorkspaceMcpLoader::new(dir.path().to_path_buf());
            let s = loader.scan(&|_| false).unwrap();
            assert_eq!(s.tools.len(), 5000);
        });
    });
    let loader = WorkspaceMcpLoader::new(dir.path().to_path_buf());
    loader.scan(&|_| false).unwrap();
    g.bench_function("warm_cached", |b| {
        b.iter(|| loader.scan(&|_| false).unwrap());
    });
    g.finish();
    let dir = real_style_workspace();
    let mut g = c.benchmark_group("scan_1000_real_style_files_5_tools");
    g.sample_size(10);
    g.bench_function("cold", |b| {
        b.iter(|| {
            let loader = WorkspaceMcpLoader::new(dir.path().to_path_buf());
            let s = loader.scan(&|_| false).unwrap();
            assert_eq!(s.tools.len(), 5000);
        });
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
