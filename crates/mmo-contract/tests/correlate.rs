//! Evidence correlation against real files in a temporary delegated tree.

use mmo_contract::correlate::{CommandEvent, Evidence, correlate};
use serde_json::json;
use std::fs;

const HELLO_SHA256: &str = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03";

fn rules(v: serde_json::Value, tree: &std::path::Path, commands: &[CommandEvent]) -> Vec<String> {
    correlate(&v, Evidence { commands, tree })
        .into_iter()
        .map(|e| format!("{} {}", e.pointer, e.rule))
        .collect()
}

#[test]
fn command_claims_must_match_a_captured_event() {
    let tmp = tempfile::tempdir().unwrap();
    let events = [CommandEvent {
        command: "cargo test".into(),
        exit_code: 0,
    }];
    assert!(
        rules(
            json!({"tests":[{"command":"cargo test","exit_code":0}]}),
            tmp.path(),
            &events
        )
        .is_empty()
    );
    assert_eq!(
        rules(
            json!({"tests":[{"command":"cargo test","exit_code":1}]}),
            tmp.path(),
            &events
        ),
        vec!["/tests/0 evidence_command_uncorrelated"]
    );
    assert_eq!(
        rules(json!({"command":"make","exit_code":0}), tmp.path(), &events),
        vec![" evidence_command_uncorrelated"]
    );
}

#[test]
fn file_claims_must_hash_to_a_regular_file_inside_the_tree() {
    let tmp = tempfile::tempdir().unwrap();
    fs::create_dir(tmp.path().join("src")).unwrap();
    fs::write(tmp.path().join("src/a.txt"), "hello\n").unwrap();
    let ok = json!({"relative_path":"src/a.txt","sha256":HELLO_SHA256});
    assert!(rules(ok, tmp.path(), &[]).is_empty());
    let wrong = json!({"relative_path":"src/a.txt","sha256":"0".repeat(64)});
    assert_eq!(
        rules(wrong, tmp.path(), &[]),
        vec![" evidence_file_hash_mismatch"]
    );
    let missing = json!({"relative_path":"src/b.txt","sha256":HELLO_SHA256});
    assert_eq!(
        rules(missing, tmp.path(), &[]),
        vec![" evidence_file_missing"]
    );
    let escape = json!({"relative_path":"../etc/passwd","sha256":HELLO_SHA256});
    assert_eq!(
        rules(escape, tmp.path(), &[]),
        vec![" evidence_file_outside_tree"]
    );
    let absolute = json!({"relative_path":"/etc/passwd","sha256":HELLO_SHA256});
    assert_eq!(
        rules(absolute, tmp.path(), &[]),
        vec![" evidence_file_outside_tree"]
    );
    let dir = json!({"relative_path":"src","sha256":HELLO_SHA256});
    assert_eq!(
        rules(dir, tmp.path(), &[]),
        vec![" evidence_file_not_regular"]
    );
}

#[test]
fn symlinks_never_satisfy_a_file_claim() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("a.txt"), "hello\n").unwrap();
    std::os::unix::fs::symlink(outside.path(), tmp.path().join("linked")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("a.txt"), tmp.path().join("a.txt")).unwrap();
    for p in ["linked/a.txt", "a.txt"] {
        let claim = json!({"relative_path":p,"sha256":HELLO_SHA256});
        assert_eq!(
            rules(claim, tmp.path(), &[]),
            vec![" evidence_file_symlink"],
            "{p}"
        );
    }
}

#[test]
fn claims_of_the_wrong_shape_are_reported_as_such() {
    let tmp = tempfile::tempdir().unwrap();
    assert_eq!(
        rules(
            json!({"runs":[{"command":["cargo","test"],"exit_code":0}]}),
            tmp.path(),
            &[]
        ),
        vec!["/runs/0 evidence_command_shape"]
    );
    assert_eq!(
        rules(
            json!({"command":"cargo test","exit_code":"0"}),
            tmp.path(),
            &[]
        ),
        vec![" evidence_command_shape"]
    );
    assert_eq!(
        rules(
            json!({"files":[{"relative_path":7,"sha256":HELLO_SHA256}]}),
            tmp.path(),
            &[]
        ),
        vec!["/files/0 evidence_file_shape"]
    );
}
