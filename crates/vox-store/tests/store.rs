//! The journey store through its public API on temporary files: durability across reopening, both
//! session backends, the knowledge base, the attention ledger, schema versions, and the identity
//! checks that refuse a lost or swapped database.

use serde_json::json;
use vox_store::*;

fn open() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join(".vox/journey.db")).unwrap();
    (dir, store)
}

#[test]
fn memories_survive_reopening_the_file() {
    let (dir, store) = open();
    store
        .memory_put("deploy/target", "staging", &["ops".into()])
        .unwrap();
    drop(store);
    let store = Store::open(&dir.path().join(".vox/journey.db")).unwrap();
    let m = store.memory_get("deploy/target").unwrap().unwrap();
    assert_eq!(m.value, "staging");
    assert_eq!(m.tags, ["ops"]);
    assert_eq!(
        store.schema_version().unwrap(),
        vox_store::migrations_latest()
    );
}

#[test]
fn memory_overwrite_keeps_created_at_and_list_filters() {
    let (_d, store) = open();
    let (first, replaced) = store.memory_put("a/1", "x", &[]).unwrap();
    assert!(!replaced);
    let (second, replaced) = store.memory_put("a/1", "y", &["t".into()]).unwrap();
    assert!(replaced);
    assert_eq!(first.created_at, second.created_at);
    store.memory_put("a/2", "z", &[]).unwrap();
    store.memory_put("b/1", "w", &["t".into()]).unwrap();
    let keys = |v: Vec<Memory>| v.into_iter().map(|m| m.key).collect::<Vec<_>>();
    assert_eq!(
        keys(store.memory_list(Some("a/"), None, None, 10).unwrap()),
        ["a/1", "a/2"]
    );
    assert_eq!(
        keys(store.memory_list(None, Some("t"), None, 10).unwrap()),
        ["a/1", "b/1"]
    );
    assert_eq!(
        keys(store.memory_list(None, None, Some("a/2"), 10).unwrap()),
        ["b/1"]
    );
    assert!(store.memory_delete("a/1").unwrap());
    assert!(!store.memory_delete("a/1").unwrap());
}

#[test]
fn a_too_new_schema_is_refused_and_left_alone() {
    let (dir, store) = open();
    store.memory_put("k", "v", &[]).unwrap();
    drop(store);
    let path = dir.path().join(".vox/journey.db");
    let c = rusqlite_version_bump(&path);
    assert_eq!(c, 99);
    let err = Store::open(&path).unwrap_err().to_string();
    assert!(err.contains("newer than this build"), "{err}");
}

fn rusqlite_version_bump(path: &std::path::Path) -> i64 {
    // Simulate a file written by a newer build.
    let conn = rusqlite_conn(path);
    conn.pragma_update(None, "user_version", 99).unwrap();
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap()
}

fn rusqlite_conn(path: &std::path::Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path).unwrap()
}

fn exercise_sessions(s: &dyn SessionStore) {
    let a = s.create("first", &json!({"agent": "x"})).unwrap();
    let b = s.create("second", &json!({})).unwrap();
    s.append(&a.id, "user", "hello").unwrap();
    let m2 = s.append(&a.id, "assistant", "hi").unwrap();
    assert_eq!(m2.seq, 2);
    let (got, msgs) = s.get(&a.id, 1).unwrap().unwrap();
    assert_eq!(got.message_count, 2);
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0].content, "hi");
    let closed = s.close(&a.id, Some("done")).unwrap();
    assert_eq!(closed.status, SessionStatus::Closed);
    assert!(matches!(
        s.append(&a.id, "user", "late"),
        Err(StoreError::Conflict(_))
    ));
    assert!(matches!(s.close(&a.id, None), Err(StoreError::Conflict(_))));
    assert!(matches!(
        s.append("s_0000", "user", "x"),
        Err(StoreError::NotFound(_))
    ));
    let open: Vec<String> = s
        .list(Some(SessionStatus::Open), 10)
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(open, std::slice::from_ref(&b.id));
    assert_eq!(s.list(None, 10).unwrap().len(), 2);
    assert!(s.get("../../etc/passwd", 5).unwrap().is_none());
}

#[test]
fn sqlite_sessions_behave() {
    let (_d, store) = open();
    exercise_sessions(&store);
}

#[test]
fn file_sessions_behave_like_sqlite_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let files = FileSessions::open(&dir.path().join("sessions")).unwrap();
    exercise_sessions(&files);
}

#[test]
fn kb_upsert_replaces_by_source_and_skips_unchanged() {
    let (_d, store) = open();
    let (id, changed) = store.kb_upsert("a", "file:a.md", "one", "h1").unwrap();
    assert!(changed);
    assert_eq!(
        store.kb_upsert("a", "file:a.md", "one", "h1").unwrap(),
        (id, false)
    );
    assert_eq!(
        store.kb_upsert("a", "file:a.md", "two", "h2").unwrap(),
        (id, true)
    );
    assert_eq!(store.kb_get(id).unwrap().unwrap().content, "two");
    assert_eq!(store.kb_list(None, 10).unwrap()[0].bytes, 3);
    assert!(store.kb_delete(id).unwrap());
    assert!(store.kb_all().unwrap().is_empty());
}

#[test]
fn attention_ledger_summarises() {
    let (_d, store) = open();
    let ev = |tool: &str, outcome: &str| AttentionEvent {
        ts: now_ms(),
        agent: "a".into(),
        tool: tool.into(),
        outcome: outcome.into(),
        latency_us: 10,
        tokens: 5,
        cost_micro_usd: if tool == "llm:m" { 1_500_000 } else { 0 },
    };
    store
        .attention_append(&[
            ev("t1", "ok"),
            ev("t1", "error"),
            ev("t2", "ok"),
            ev("llm:m", "ok"),
        ])
        .unwrap();
    let s = store.attention_summary(0).unwrap();
    assert_eq!(
        (s[0].tool.as_str(), s[0].calls, s[0].errors, s[0].tokens),
        ("t1", 2, 1, 10)
    );
    let llm = s.iter().find(|t| t.tool == "llm:m").unwrap();
    assert_eq!(llm.cost_usd, 1.5);
    let c = store.cost_history(0, None).unwrap();
    assert_eq!((c[0].calls, c[0].tokens, c[0].cost_usd), (4, 20, 1.5));
}

#[test]
fn opening_under_a_file_fails_with_the_path() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("blocker"), "x").unwrap();
    let err = Store::open(&dir.path().join("blocker/journey.db"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("blocker"), "{err}");
}

#[test]
fn inspect_reads_the_schema_version_without_creating_or_changing_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("journey.db");
    assert!(
        vox_store::inspect(&path).is_err(),
        "a missing file is an error"
    );
    assert!(!path.exists(), "inspect never creates the store");
    drop(Store::open(&path).unwrap());
    let before = std::fs::read(&path).unwrap();
    let h = vox_store::inspect(&path).unwrap();
    assert_eq!(h.schema_version, h.latest);
    assert!(h.tables > 0);
    assert_eq!(std::fs::read(&path).unwrap(), before);
    std::fs::write(
        &path,
        b"not a database, just bytes that are long enough to be read",
    )
    .unwrap();
    assert!(vox_store::inspect(&path).is_err());
}

/// A store with a few memories at `.vox/journey.db`, closed.
fn store_with_memories() -> (tempfile::TempDir, std::path::PathBuf) {
    let (dir, store) = open();
    for i in 0..20 {
        store.memory_put(&format!("k/{i}"), "v", &[]).unwrap();
    }
    let path = store.path().unwrap().to_owned();
    drop(store);
    (dir, path)
}

#[test]
fn a_store_truncated_to_zero_bytes_is_refused_and_left_alone() {
    let (_dir, path) = store_with_memories();
    let id_file = Store::identity_path(&path);
    let id = std::fs::read_to_string(&id_file).unwrap();
    assert_eq!(id.trim().len(), 32, "{id}");
    std::fs::File::create(&path).unwrap(); // truncates
    for _ in 0..2 {
        let err = Store::open(&path).unwrap_err().to_string();
        assert!(
            err.contains(&path.display().to_string())
                && err.contains(&id_file.display().to_string()),
            "{err}"
        );
        assert!(err.contains("lost"), "{err}");
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            0,
            "not overwritten"
        );
        assert!(Store::check_not_lost(&path).is_err());
    }
    assert_eq!(std::fs::read_to_string(&id_file).unwrap(), id);
}

#[test]
fn a_store_whose_file_lost_its_tables_or_vanished_or_was_swapped_is_refused() {
    let (_dir, path) = store_with_memories();
    // A valid SQLite file without tables.
    std::fs::remove_file(&path).unwrap();
    let c = rusqlite_conn(&path);
    c.execute_batch("CREATE TABLE t(x); DROP TABLE t;").unwrap();
    drop(c);
    let len = std::fs::metadata(&path).unwrap().len();
    assert!(len > 0);
    let err = Store::open(&path).unwrap_err().to_string();
    assert!(err.contains("lost"), "{err}");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), len);
    // The file is gone while its identity says a store was here.
    std::fs::remove_file(&path).unwrap();
    let err = Store::open(&path).unwrap_err().to_string();
    assert!(err.contains("lost"), "{err}");
    assert!(!path.exists(), "no new file is created");
    // Another store's file put in its place.
    let (_other_dir, other) = store_with_memories();
    std::fs::copy(&other, &path).unwrap();
    let err = Store::open(&path).unwrap_err().to_string();
    assert!(err.contains("another store"), "{err}");
    // Removing the identity file is how a user accepts the file that is there.
    std::fs::remove_file(Store::identity_path(&path)).unwrap();
    let s = Store::open(&path).unwrap();
    assert!(s.memory_get("k/3").unwrap().is_some());
    drop(s);
    assert_eq!(
        std::fs::read_to_string(Store::identity_path(&path)).unwrap(),
        std::fs::read_to_string(Store::identity_path(&other)).unwrap()
    );
}

#[test]
fn a_new_store_and_a_store_from_before_identities_get_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".vox/journey.db");
    assert!(Store::check_not_lost(&path).is_ok());
    let s = Store::open(&path).unwrap();
    s.memory_put("k", "v", &[]).unwrap();
    drop(s);
    let id = std::fs::read_to_string(Store::identity_path(&path)).unwrap();
    // Reopening keeps the identity.
    drop(Store::open(&path).unwrap());
    assert_eq!(
        std::fs::read_to_string(Store::identity_path(&path)).unwrap(),
        id
    );
    // A store written before identities existed (schema 1, no identity file) opens and gets
    // one.
    let old = dir.path().join("old/journey.db");
    std::fs::create_dir_all(old.parent().unwrap()).unwrap();
    let c = rusqlite_conn(&old);
    c.execute_batch(
        "CREATE TABLE memories (key TEXT PRIMARY KEY, value TEXT NOT NULL, tags TEXT NOT NULL DEFAULT '[]', created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL);
         INSERT INTO memories VALUES ('old', 'kept', '[]', 1, 1);
         CREATE TABLE attention_events (id INTEGER PRIMARY KEY AUTOINCREMENT, ts INTEGER NOT NULL, agent TEXT NOT NULL,
             tool TEXT NOT NULL, outcome TEXT NOT NULL, latency_us INTEGER NOT NULL, tokens INTEGER NOT NULL);
         PRAGMA user_version = 1;",
    )
    .unwrap();
    drop(c);
    let s = Store::open(&old).unwrap();
    assert_eq!(s.memory_get("old").unwrap().unwrap().value, "kept");
    assert!(Store::identity_path(&old).exists());
}

#[test]
fn model_preferences_benchmarks_and_chat_history_are_durable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journey.db");
    {
        let s = vox_store::Store::open(&path).unwrap();
        assert_eq!(s.model_preference("active").unwrap(), None);
        s.set_model_preference("active", "a/x").unwrap();
        s.set_model_preference("active", "a/y").unwrap();
        s.set_model_preference("agent:ag1", "a/x").unwrap();
        s.benchmark_record("a/x", "codegen", 0.5, "pass@1", "")
            .unwrap();
        s.benchmark_record("a/x", "codegen", 1.0, "pass@1", "")
            .unwrap();
        s.benchmark_record("a/y", "review", 0.25, "", "").unwrap();
        let e = s
            .benchmark_record("a/y", "review", 1.5, "", "")
            .unwrap_err();
        assert!(matches!(e, vox_store::StoreError::Invalid(_)), "{e}");
        s.chat_append("s1", "user", "hi", None, None).unwrap();
        s.chat_append(
            "s1",
            "assistant",
            "hello",
            Some("a/y"),
            Some(vox_store::Spend {
                input_tokens: 10,
                output_tokens: 2,
                cost_usd: 0.001,
            }),
        )
        .unwrap();
        s.chat_append("s2", "user", "other", None, None).unwrap();
    }
    let s = vox_store::Store::open(&path).unwrap();
    assert_eq!(s.model_preference("active").unwrap().unwrap().0, "a/y");
    assert_eq!(s.model_preferences().unwrap().len(), 2);
    let means = s.benchmark_means("codegen").unwrap();
    assert_eq!(means["a/x"], (0.75, 2));
    assert_eq!(s.benchmarks(None, Some("review"), 10).unwrap().len(), 1);
    assert_eq!(s.benchmarks(Some("a/x"), None, 1).unwrap()[0].score, 1.0);
    let h = s.chat_history("s1", None, 10).unwrap();
    assert_eq!(h.len(), 2);
    assert_eq!(h[0].content, "hi");
    assert_eq!(h[1].output_tokens, Some(2));
    let older = s.chat_history("s1", Some(h[1].id), 10).unwrap();
    assert_eq!(older.len(), 1);
}

#[test]
fn a_new_store_is_private_and_a_symlinked_one_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, _store) = open();
    let db = dir.path().join(".vox/journey.db");
    assert_eq!(
        std::fs::metadata(&db).unwrap().permissions().mode() & 0o777,
        0o600
    );

    let elsewhere = dir.path().join("elsewhere.db");
    std::fs::write(&elsewhere, "").unwrap();
    let linked = dir.path().join(".vox/linked.db");
    std::os::unix::fs::symlink(&elsewhere, &linked).unwrap();
    let Err(e) = Store::open(&linked) else {
        panic!("a symlinked store opened")
    };
    let e = e.to_string();
    assert!(e.contains("symlink"), "{e}");
    assert_eq!(
        std::fs::read(&elsewhere).unwrap(),
        b"",
        "nothing written through the link"
    );
}
