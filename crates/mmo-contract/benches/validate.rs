//! Contract validation throughput on a realistic review verdict.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use mmo_contract::Contract;
use serde_json::json;
use std::hint::black_box;

fn bench(c: &mut Criterion) {
    let contract = Contract::new(json!({
        "type": "object", "additionalProperties": false, "required": ["verdict", "findings", "checked_at"],
        "properties": {
            "verdict": {"enum": ["approve", "request_changes"]},
            "checked_at": {"type": "string", "format": "date-time"},
            "findings": {"type": "array", "maxItems": 100, "items": {
                "type": "object", "additionalProperties": false,
                "required": ["severity", "relative_path", "sha256"],
                "properties": {
                    "severity": {"enum": ["blocker", "major", "minor"]},
                    "relative_path": {"type": "string", "minLength": 1},
                    "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                    "advisory": {"type": "string", "format": "uri"},
                    "line": {"type": "integer", "minimum": 1}
                }
            }}
        }
    }))
    .unwrap();
    let finding = json!({"severity": "major", "relative_path": "src/lib.rs", "sha256": "a".repeat(64), "advisory": "https://example.com/a?b=c", "line": 42});
    let instance = json!({"verdict": "request_changes", "checked_at": "2026-11-29T18:00:00Z", "findings": vec![finding; 10]});
    assert!(contract.is_valid(&instance));
    let mut g = c.benchmark_group("contract");
    g.throughput(Throughput::Elements(1));
    g.bench_function("validate_review_verdict_10_findings", |b| {
        b.iter(|| black_box(contract.validate(black_box(&instance))))
    });
    // Every finding breaks two keywords (pattern, format): the error path, with 20 findings.
    let bad = json!({"severity": "major", "relative_path": "src/lib.rs", "sha256": "XYZ", "advisory": "/relative", "line": 42});
    let invalid = json!({"verdict": "request_changes", "checked_at": "2026-11-29T18:00:00Z", "findings": vec![bad; 10]});
    assert_eq!(contract.validate(&invalid).len(), 20);
    g.bench_function("validate_invalid_verdict_20_errors", |b| {
        b.iter(|| black_box(contract.validate(black_box(&invalid))))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
