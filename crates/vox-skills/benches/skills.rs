//! Skill catalog figures: hydrating the search roots (parse every SKILL.md, build the BM25
//! index) and searching it, for 500 generated skills.

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use vox_skills::{Catalog, Roots};

const WORDS: &[&str] = &[
    "git",
    "bisect",
    "regression",
    "release",
    "notes",
    "pdf",
    "forms",
    "memory",
    "search",
    "review",
    "deploy",
    "database",
    "migration",
    "schema",
    "tests",
    "flaky",
    "profile",
    "latency",
];

fn roots(n: usize) -> (tempfile::TempDir, Roots) {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("ws/.vox/skills");
    for i in 0..n {
        let id = format!("skill-{i}");
        let w = |k: usize| WORDS[(i * 7 + k * 3) % WORDS.len()];
        let dir = store.join(&id);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            format!(
                "---\nname: {id}\ndescription: {} {} helper number {i}.\nmetadata:\n  tags: {}, {}\n  vox-tools: vox_memory_* vox_kb_query\n---\n# {id}\n\n{}\n",
                w(0),
                w(1),
                w(2),
                w(3),
                (0..60).map(w).collect::<Vec<_>>().join(" ")
            ),
        )
        .unwrap();
    }
    let roots = Roots {
        workspace: store,
        project: None,
        home: None,
        extra: vec![],
    };
    (tmp, roots)
}

fn bench(c: &mut Criterion) {
    let (_tmp, roots) = roots(500);
    c.bench_function("hydrate 500 skills", |b| {
        b.iter(|| black_box(Catalog::hydrate(&roots).skills.len()));
    });
    let catalog = Catalog::hydrate(&roots);
    assert_eq!(catalog.skills.len(), 500);
    c.bench_function("search 500 skills (2 words, top 10)", |b| {
        b.iter(|| black_box(catalog.search("bisect regression", 10).unwrap().len()));
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
