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

fn bench(c: &mut Criterion) {
    let dir = workspace();
    let mut g = c.benchmark_group("scan_1000_files_5_tools");
    g.sample_size(10);
    g.bench_function("cold", |b| {
        b.iter(|| {
            let loader = WorkspaceMcpLoader::new(dir.path().to_path_buf());
            let s = loader.scan(&|_| false).unwrap();
            assert_eq!(s.tools.len(), 5000);
        })
    });
    let loader = WorkspaceMcpLoader::new(dir.path().to_path_buf());
    loader.scan(&|_| false).unwrap();
    g.bench_function("warm_cached", |b| {
        b.iter(|| loader.scan(&|_| false).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
