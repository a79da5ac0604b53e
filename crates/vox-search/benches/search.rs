//! Criterion benches for vox-search: DocIndex search over 10,000 documents, WorkspaceIndex
//! refresh (cold and warm) over ~2,000 files, and text/declaration search.
//!
//! Run: `cargo bench -p vox-search --bench search -- --measurement-time 3 --warm-up-time 1`

use std::fs;
use std::hint::black_box;
use std::path::Path;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use vox_search::{DocIndex, WorkspaceIndex};

const WORDS: &[&str] = &[
    "daemon",
    "socket",
    "profile",
    "capability",
    "budget",
    "session",
    "memory",
    "tool",
    "handler",
    "transport",
    "schema",
    "catalog",
    "skill",
    "agent",
    "worktree",
    "snapshot",
    "journal",
    "ledger",
    "attention",
    "cursor",
    "stream",
    "notification",
    "timeout",
    "cancel",
    "registry",
    "manifest",
    "subsystem",
    "gateway",
    "token",
    "origin",
    "compiler",
    "parser",
    "lexer",
    "diagnostic",
    "interpreter",
    "resource",
    "federation",
    "collision",
    "loader",
    "runtime",
    "admission",
    "patch",
    "result",
    "contract",
    "evidence",
    "route",
    "model",
    "pack",
];

/// A deterministic pseudo-random word stream (no RNG dependency, same corpus every run).
struct Words(u64);

impl Words {
    fn next(&mut self) -> &'static str {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        WORDS[((self.0 >> 33) as usize) % WORDS.len()]
    }

    fn sentence(&mut self, n: usize) -> String {
        (0..n).map(|_| self.next()).collect::<Vec<_>>().join(" ")
    }
}

fn doc_index(c: &mut Criterion) {
    let index = DocIndex::new().expect("index");
    let mut words = Words(7);
    let docs: Vec<(String, String, String)> = (0..10_000)
        .map(|i| {
            (
                format!("doc-{i:05}"),
                words.sentence(5),
                words.sentence(120),
            )
        })
        .collect();
    index.upsert_many(docs).expect("upsert");
    let mut group = c.benchmark_group("doc_index_10k");
    group.bench_function("search_one_term", |b| {
        b.iter(|| index.search(black_box("daemon"), 10).expect("search"));
    });
    group.bench_function("search_three_terms", |b| {
        b.iter(|| {
            index
                .search(black_box("socket timeout cancel"), 10)
                .expect("search")
        });
    });
    group.bench_function("search_phrase", |b| {
        b.iter(|| {
            index
                .search(black_box("\"agent worktree\""), 10)
                .expect("search")
        });
    });
    group.bench_function("upsert_one", |b| {
        let mut n = 0u64;
        b.iter(|| {
            n += 1;
            index
                .upsert(
                    &format!("doc-{:05}", n % 10_000),
                    "title",
                    "replacement body text",
                )
                .expect("upsert");
        });
    });
    group.finish();
}

/// ~2,000 files: Rust-like sources with declarations plus some prose, in nested directories.
fn make_workspace(root: &Path) {
    let mut words = Words(11);
    for dir in 0..40 {
        let dir_path = root.join(format!("crates/c{dir:02}/src"));
        fs::create_dir_all(&dir_path).expect("mkdir");
        for file in 0..50 {
            let mut text = String::new();
            for item in 0..8 {
                let name = format!("{}_{}_{item}", words.next(), words.next());
                text.push_str(&format!(
                    "/// {}\npub fn {name}(x: u32) -> u32 {{\n",
                    words.sentence(10)
                ));
                for _ in 0..4 {
                    text.push_str(&format!("    // {}\n", words.sentence(8)));
                }
                text.push_str("    x + 1\n}\n\n");
            }
            let ext = if file % 5 == 0 { "md" } else { "rs" };
            fs::write(dir_path.join(format!("f{file:02}.{ext}")), text).expect("write");
        }
    }
    fs::write(root.join(".gitignore"), "crates/c39/\n").expect("write");
}

fn workspace(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    make_workspace(dir.path());
    let mut group = c.benchmark_group("workspace_2000_files");
    group.sample_size(10);
    group.bench_function("refresh_cold", |b| {
        b.iter_batched(
            || WorkspaceIndex::new(dir.path().to_path_buf()),
            |index| index.refresh().expect("refresh"),
            BatchSize::PerIteration,
        );
    });
    let index = WorkspaceIndex::new(dir.path().to_path_buf());
    let stats = index.refresh().expect("refresh");
    eprintln!("workspace: {stats:?}");
    group.bench_function("refresh_warm", |b| {
        b.iter(|| index.refresh().expect("refresh"));
    });
    group.bench_function("search_text", |b| {
        b.iter(|| {
            index
                .search_text(black_box("socket timeout"), 20, None)
                .expect("search")
        });
    });
    group.bench_function("search_text_glob", |b| {
        b.iter(|| {
            index
                .search_text(black_box("socket timeout"), 20, Some("*.md"))
                .expect("search")
        });
    });
    group.bench_function("search_declarations", |b| {
        b.iter(|| {
            index
                .search_declarations(black_box("daemon_socket"), None, 20)
                .expect("search")
        });
    });
    group.finish();
}

criterion_group!(benches, doc_index, workspace);
criterion_main!(benches);
