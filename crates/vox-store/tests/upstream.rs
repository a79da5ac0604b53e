//! The journey store's side of upstream servers and the audit trail, on SQLite and (with
//! `VOX_TEST_STORE=postgres`) PostgreSQL: a tool's pin keeps the approved definition while it
//! changes, an approval takes what is seen now; the trail keeps the newest rows and reads by
//! cursor, tool and prefix.

use serde_json::json;
use support::open as store;
use vox_store::AuditRecord;

mod support;

#[test]
fn a_pin_keeps_the_approved_definition_until_a_person_approves_another() {
    let (_d, s) = store();
    let first = s
        .upstream_pin_seen("git", "log", "sha256:a", &json!({"d": 1}), true)
        .unwrap();
    assert_eq!(first.approved.as_deref(), Some("sha256:a"));
    assert_eq!(first.approved_by.as_deref(), Some("first-seen"));
    let changed = s
        .upstream_pin_seen("git", "log", "sha256:b", &json!({"d": 2}), true)
        .unwrap();
    assert_eq!(
        (changed.approved.as_deref(), changed.seen.as_str()),
        (Some("sha256:a"), "sha256:b")
    );
    let added = s
        .upstream_pin_seen("git", "diff", "sha256:c", &json!({}), false)
        .unwrap();
    assert_eq!(added.approved, None);
    let one = s.upstream_approve("git", Some("log"), "ada").unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(
        (one[0].approved.as_deref(), one[0].approved_by.as_deref()),
        (Some("sha256:b"), Some("ada"))
    );
    assert_eq!(one[0].definition, json!({"d": 2}));
    assert_eq!(
        s.upstream_pin("git", "diff").unwrap().unwrap().approved,
        None
    );
    let all = s.upstream_approve("git", None, "ada").unwrap();
    assert!(
        all.iter()
            .all(|p| p.approved.as_deref() == Some(p.seen.as_str()))
    );
    assert!(s.upstream_pins(Some("time")).unwrap().is_empty());
    assert_eq!(s.upstream_pins(None).unwrap().len(), 2);
}

fn record(tool: &str) -> AuditRecord {
    AuditRecord {
        seq: 0,
        at: 1,
        principal: "stdio:t".into(),
        role: "write".into(),
        loopback: true,
        agent: None,
        mesh_node: None,
        tool: tool.into(),
        source: "catalog".into(),
        server: None,
        decision: "allowed".into(),
        code: "ok".into(),
        duration_us: 5,
        arguments: Some(json!({"k": "v"})),
    }
}

#[test]
fn the_trail_keeps_the_newest_rows_and_reads_by_cursor_tool_and_prefix() {
    let (_d, s) = store();
    let tools = ["vox_a", "git__log", "vox_b", "git__diff", "vox_c"];
    let batch: Vec<AuditRecord> = tools.iter().map(|t| record(t)).collect();
    s.audit_append(&batch, 3).unwrap();
    let kept = s.audit_query(None, 10, None).unwrap();
    let names: Vec<&str> = kept.iter().map(|r| r.tool.as_str()).collect();
    assert_eq!(
        names,
        ["vox_b", "git__diff", "vox_c"],
        "the oldest two were pruned"
    );
    assert_eq!(kept[0].arguments, Some(json!({"k": "v"})));
    assert!(kept[0].loopback);
    let after = s.audit_query(Some(kept[0].seq), 10, None).unwrap();
    assert_eq!(after.len(), 2);
    let git = s.audit_query(Some(0), 10, Some("git__*")).unwrap();
    assert_eq!(
        git.iter().map(|r| r.tool.as_str()).collect::<Vec<_>>(),
        ["git__diff"]
    );
    // `_` is not a wildcard: `vox_*` is a prefix, not a LIKE pattern.
    assert_eq!(s.audit_query(None, 10, Some("vox_*")).unwrap().len(), 2);
    // The newest of a tool, not the oldest.
    let newest = s.audit_query(None, 1, Some("vox_*")).unwrap();
    assert_eq!(newest[0].tool, "vox_c");
    assert_eq!(s.audit_query(None, 1, Some("vox_c")).unwrap().len(), 1);
}
