//! Validate + compile of a 20-role pack read from disk (issue target: ≤ 20 ms).

use criterion::{Criterion, criterion_group, criterion_main};
use mmo_profile::compile::compile;
use mmo_profile::consent::Consent;
use mmo_profile::pack::Pack;
use mmo_profile::validate::validate;
use std::hint::black_box;

#[path = "../tests/common/mod.rs"]
mod common;

fn bench(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    common::write_wide_pack(tmp.path(), 20);
    let registry = common::registry();
    c.bench_function("load_validate_compile_20_roles", |b| {
        b.iter(|| {
            let pack = Pack::load(black_box(tmp.path())).unwrap();
            let v = validate(&pack, &registry, &Consent::default(), &[]).unwrap();
            black_box(compile(&pack, &v).unwrap().0.address)
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
