//! Benchmarks of the per-call authorization decision and of listing the visible tools.

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use vox_mcp_registry::{
    Caller, ProfileSet, Role, all_subsystems_mask, authorize_tool, visible_tools,
};

fn bench(c: &mut Criterion) {
    let dev = ProfileSet::dev();
    let knowledge = ProfileSet::parse("knowledge").unwrap();
    let booted = all_subsystems_mask();
    let read = Caller {
        loopback: false,
        role: Role::Read,
    };
    c.bench_function("authorize_tool/allow", |b| {
        b.iter(|| {
            authorize_tool(
                black_box(&knowledge),
                black_box("vox_memory_recall"),
                Caller::LOCAL,
                booted,
            )
        });
    });
    c.bench_function("authorize_tool/allow_read_role", |b| {
        b.iter(|| {
            authorize_tool(
                black_box(&knowledge),
                black_box("vox_kb_query"),
                read,
                booted,
            )
        });
    });
    c.bench_function("authorize_tool/deny_not_in_profile", |b| {
        b.iter(|| {
            authorize_tool(
                black_box(&knowledge),
                black_box("vox_repo_log"),
                Caller::LOCAL,
                booted,
            )
        });
    });
    c.bench_function("visible_tools/dev", |b| {
        b.iter(|| visible_tools(black_box(&dev), Caller::LOCAL, booted).count());
    });
    c.bench_function("profile_parse/compose", |b| {
        b.iter(|| ProfileSet::parse(black_box("repo-read,knowledge,attention")).unwrap());
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
