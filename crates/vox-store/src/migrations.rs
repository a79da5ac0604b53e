//! Versioned migrations. A migration is appended, never edited: the version is its position.

use crate::StoreError;
use rusqlite::Connection;
use std::path::Path;

const MIGRATIONS: &[&str] = &[
    // 1: memories, sessions, the knowledge base and the attention ledger.
    r#"
    CREATE TABLE memories (
        key        TEXT PRIMARY KEY,
        value      TEXT NOT NULL,
        tags       TEXT NOT NULL DEFAULT '[]',
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    );
    CREATE TABLE sessions (
        id         TEXT PRIMARY KEY,
        title      TEXT NOT NULL,
        metadata   TEXT NOT NULL DEFAULT '{}',
        status     TEXT NOT NULL CHECK (status IN ('open', 'closed')),
        summary    TEXT,
        created_at INTEGER NOT NULL,
        closed_at  INTEGER
    );
    CREATE TABLE session_messages (
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        seq        INTEGER NOT NULL,
        role       TEXT NOT NULL,
        content    TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (session_id, seq)
    );
    CREATE TABLE kb_documents (
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        title      TEXT NOT NULL,
        source     TEXT NOT NULL UNIQUE,
        content    TEXT NOT NULL,
        sha256     TEXT NOT NULL,
        created_at INTEGER NOT NULL
    );
    CREATE TABLE attention_events (
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        ts         INTEGER NOT NULL,
        agent      TEXT NOT NULL,
        tool       TEXT NOT NULL,
        outcome    TEXT NOT NULL,
        latency_us INTEGER NOT NULL,
        tokens     INTEGER NOT NULL
    );
    CREATE INDEX attention_events_ts ON attention_events(ts);
    "#,
    // 2: the store's identity, a random id also kept beside the file (`<file>.id`), so a file
    // that lost its data is refused instead of silently becoming a new store.
    r#"
    CREATE TABLE store_meta (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    INSERT INTO store_meta (key, value) VALUES ('store_id', lower(hex(randomblob(16))));
    "#,
    // 3: the orchestrator's tasks: the DAG of their dependencies and every transition.
    r#"
    CREATE TABLE tasks (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        title       TEXT NOT NULL,
        description TEXT NOT NULL DEFAULT '',
        priority    INTEGER NOT NULL DEFAULT 0,
        state       TEXT NOT NULL CHECK (state IN
                        ('queued', 'assigned', 'running', 'completed', 'failed', 'cancelled')),
        owner       TEXT,
        attempts    INTEGER NOT NULL DEFAULT 0,
        files       TEXT NOT NULL DEFAULT '[]',
        result      TEXT,
        created_at  INTEGER NOT NULL,
        updated_at  INTEGER NOT NULL
    );
    CREATE INDEX tasks_state ON tasks(state, priority DESC, id);
    CREATE TABLE task_deps (
        task_id    INTEGER NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
        depends_on INTEGER NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
        PRIMARY KEY (task_id, depends_on)
    );
    CREATE TABLE task_events (
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        task_id    INTEGER NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
        kind       TEXT NOT NULL,
        from_state TEXT,
        agent      TEXT,
        detail     TEXT,
        ts         INTEGER NOT NULL
    );
    "#,
];

/// The highest version this build knows.
pub fn latest() -> i64 {
    MIGRATIONS.len() as i64
}

pub fn current_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
}

pub fn apply(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    let err = |source| StoreError::Sqlite {
        path: path.to_owned(),
        source,
    };
    // IMMEDIATE takes the write lock first, so two processes opening a fresh file at once do
    // not both try to run migration 1.
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(err)?;
    let found = current_version(&tx).map_err(err)?;
    if found > latest() {
        return Err(StoreError::TooNew {
            path: path.to_owned(),
            found,
            known: latest(),
        });
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        tx.execute_batch(sql).map_err(err)?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)
            .map_err(err)?;
    }
    tx.commit().map_err(err)
}
