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
    // 4: the rest of the orchestrator profile: one event stream for every subject (task events
    // move into it), agents with daemon-issued credentials, file locks with leases and the
    // conflicts they caused, plans, handoffs, clarifications gating tasks, approvals.
    r#"
    CREATE TABLE events (
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        subject    TEXT NOT NULL,
        subject_id TEXT NOT NULL,
        kind       TEXT NOT NULL,
        from_state TEXT,
        agent      TEXT,
        detail     TEXT,
        ts         INTEGER NOT NULL
    );
    CREATE INDEX events_subject ON events(subject, subject_id, id);
    INSERT INTO events (id, subject, subject_id, kind, from_state, agent, detail, ts)
        SELECT id, 'task', CAST(task_id AS TEXT), kind, from_state, agent, detail, ts FROM task_events;
    DROP TABLE task_events;
    ALTER TABLE tasks ADD COLUMN pinned_agent TEXT;
    CREATE INDEX tasks_owner ON tasks(owner, state);
    CREATE TABLE agents (
        id            TEXT PRIMARY KEY,
        role          TEXT NOT NULL DEFAULT '',
        profile       TEXT NOT NULL,
        runner        TEXT,
        state         TEXT NOT NULL CHECK (state IN ('active', 'paused', 'retired')),
        capacity      INTEGER NOT NULL DEFAULT 1,
        budget_tokens INTEGER,
        token_hash    TEXT NOT NULL UNIQUE,
        heartbeat_at  INTEGER NOT NULL,
        created_at    INTEGER NOT NULL,
        updated_at    INTEGER NOT NULL
    );
    CREATE TABLE file_locks (
        path       TEXT PRIMARY KEY,
        agent      TEXT NOT NULL REFERENCES agents(id),
        task_id    INTEGER REFERENCES tasks(id) ON DELETE SET NULL,
        lease_ms   INTEGER NOT NULL,
        claimed_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL
    );
    CREATE INDEX file_locks_agent ON file_locks(agent);
    CREATE TABLE lock_conflicts (
        id        INTEGER PRIMARY KEY AUTOINCREMENT,
        path      TEXT NOT NULL,
        holder    TEXT NOT NULL,
        requester TEXT NOT NULL,
        task_id   INTEGER,
        ts        INTEGER NOT NULL
    );
    CREATE INDEX lock_conflicts_path ON lock_conflicts(path);
    CREATE TABLE plans (
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        goal       TEXT NOT NULL,
        created_by TEXT NOT NULL,
        revision   INTEGER NOT NULL DEFAULT 1,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    );
    CREATE TABLE plan_steps (
        plan_id  INTEGER NOT NULL REFERENCES plans(id) ON DELETE CASCADE,
        key      TEXT NOT NULL,
        task_id  INTEGER NOT NULL REFERENCES tasks(id),
        revision INTEGER NOT NULL,
        PRIMARY KEY (plan_id, key)
    );
    CREATE TABLE handoffs (
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        from_agent TEXT NOT NULL,
        to_agent   TEXT NOT NULL,
        task_id    INTEGER REFERENCES tasks(id),
        parent     INTEGER REFERENCES handoffs(id),
        summary    TEXT NOT NULL,
        context    TEXT NOT NULL,
        ts         INTEGER NOT NULL
    );
    CREATE INDEX handoffs_task ON handoffs(task_id);
    CREATE TABLE clarifications (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        question    TEXT NOT NULL,
        options     TEXT NOT NULL DEFAULT '[]',
        asked_by    TEXT NOT NULL,
        state       TEXT NOT NULL CHECK (state IN ('pending', 'answered', 'dismissed')),
        answer      TEXT,
        resolved_by TEXT,
        created_at  INTEGER NOT NULL,
        resolved_at INTEGER
    );
    CREATE TABLE clarification_gates (
        clarification_id INTEGER NOT NULL REFERENCES clarifications(id) ON DELETE CASCADE,
        task_id          INTEGER NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
        PRIMARY KEY (clarification_id, task_id)
    );
    CREATE INDEX clarification_gates_task ON clarification_gates(task_id);
    CREATE TABLE approvals (
        id            INTEGER PRIMARY KEY AUTOINCREMENT,
        agent         TEXT NOT NULL,
        tool          TEXT NOT NULL,
        arguments     TEXT NOT NULL,
        side_effect   TEXT NOT NULL,
        state         TEXT NOT NULL CHECK (state IN ('pending', 'approved', 'rejected', 'expired')),
        decided_by    TEXT,
        reason        TEXT,
        new_arguments TEXT,
        created_at    INTEGER NOT NULL,
        decided_at    INTEGER
    );
    CREATE TABLE approval_allowlist (
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        tool       TEXT NOT NULL,
        agent      TEXT NOT NULL DEFAULT '*',
        note       TEXT NOT NULL DEFAULT '',
        created_by TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        UNIQUE (tool, agent)
    );
    "#,
    // 5: models: sticky preferences (the active model, a model per agent), recorded benchmarks,
    // and chat history with each answer's model, tokens and cost.
    r#"
    CREATE TABLE model_preferences (
        scope      TEXT PRIMARY KEY,
        model_id   TEXT NOT NULL,
        updated_at INTEGER NOT NULL
    );
    CREATE TABLE model_benchmarks (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        model_id    TEXT NOT NULL,
        category    TEXT NOT NULL,
        score       REAL NOT NULL CHECK (score >= 0 AND score <= 1),
        metric      TEXT NOT NULL DEFAULT '',
        notes       TEXT NOT NULL DEFAULT '',
        recorded_at INTEGER NOT NULL
    );
    CREATE INDEX model_benchmarks_category ON model_benchmarks(category, model_id);
    CREATE TABLE chat_messages (
        id            INTEGER PRIMARY KEY AUTOINCREMENT,
        session       TEXT NOT NULL,
        role          TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
        content       TEXT NOT NULL,
        model_id      TEXT,
        input_tokens  INTEGER,
        output_tokens INTEGER,
        cost_usd      REAL,
        created_at    INTEGER NOT NULL
    );
    CREATE INDEX chat_messages_session ON chat_messages(session, id);
    "#,
    // 6: research: runs, their claims with the citations checked when they were kept, drafts.
    r#"
    CREATE TABLE research_runs (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        question    TEXT NOT NULL,
        model_id    TEXT NOT NULL,
        state       TEXT NOT NULL CHECK (state IN ('running', 'done', 'failed')),
        error       TEXT,
        evidence    INTEGER NOT NULL DEFAULT 0,
        input_tokens  INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        created_at  INTEGER NOT NULL,
        finished_at INTEGER
    );
    CREATE TABLE research_claims (
        id        INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id    INTEGER NOT NULL REFERENCES research_runs(id) ON DELETE CASCADE,
        text      TEXT NOT NULL,
        citations TEXT NOT NULL,
        kept      INTEGER NOT NULL,
        reason    TEXT
    );
    CREATE INDEX research_claims_run ON research_claims(run_id, id);
    CREATE TABLE research_drafts (
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id     INTEGER NOT NULL REFERENCES research_runs(id) ON DELETE CASCADE,
        title      TEXT NOT NULL,
        body       TEXT NOT NULL,
        created_at INTEGER NOT NULL
    );
    "#,
    // 7: publishing drafts: a person's approval of a draft, and each submission to a
    // destination with its state (a webhook's answer may name a status to poll).
    r#"
    CREATE TABLE draft_approvals (
        draft_id    INTEGER PRIMARY KEY REFERENCES research_drafts(id) ON DELETE CASCADE,
        approved_by TEXT NOT NULL,
        note        TEXT NOT NULL DEFAULT '',
        approved_at INTEGER NOT NULL
    );
    CREATE TABLE submissions (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        draft_id    INTEGER NOT NULL REFERENCES research_drafts(id) ON DELETE CASCADE,
        destination TEXT NOT NULL,
        kind        TEXT NOT NULL,
        state       TEXT NOT NULL CHECK (state IN ('pending', 'published', 'failed')),
        location    TEXT,
        detail      TEXT,
        status_url  TEXT,
        created_at  INTEGER NOT NULL,
        updated_at  INTEGER NOT NULL
    );
    CREATE INDEX submissions_draft ON submissions(draft_id, id);
    "#,
    // 8: what a call cost, in millionths of a USD (a model call's, from the registry's prices;
    // 0 for a tool call).
    r#"
    ALTER TABLE attention_events ADD COLUMN cost_micro_usd INTEGER NOT NULL DEFAULT 0;
    "#,
    // 9: agent-to-agent messages (the embedded mesh): each message once, and a delivery row per
    // recipient that stays open until that recipient acknowledges it (at-least-once).
    r#"
    CREATE TABLE a2a_messages (
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        thread     TEXT NOT NULL,
        sender     TEXT NOT NULL,
        recipient  TEXT NOT NULL,
        body       TEXT NOT NULL,
        created_at INTEGER NOT NULL
    );
    CREATE INDEX a2a_messages_thread ON a2a_messages(thread, id);
    CREATE TABLE a2a_deliveries (
        message_id INTEGER NOT NULL REFERENCES a2a_messages(id) ON DELETE CASCADE,
        recipient  TEXT NOT NULL,
        reads      INTEGER NOT NULL DEFAULT 0,
        acked_at   INTEGER,
        PRIMARY KEY (message_id, recipient)
    );
    CREATE INDEX a2a_deliveries_open ON a2a_deliveries(recipient, acked_at, message_id);
    "#,
    // 10: the mesh over NATS. A message from another node carries its mesh-wide id (`origin`),
    // so a redelivery is stored once; calls between nodes (`vox_mesh_dispatch`) are recorded on
    // both sides: the caller's until its result comes back, the callee's so a call delivered
    // again after a crash is answered from the record instead of run twice.
    r#"
    ALTER TABLE a2a_messages ADD COLUMN origin TEXT;
    CREATE UNIQUE INDEX a2a_messages_origin ON a2a_messages(origin) WHERE origin IS NOT NULL;
    CREATE TABLE mesh_calls (
        seq         INTEGER PRIMARY KEY AUTOINCREMENT,
        call_id     TEXT NOT NULL,
        direction   TEXT NOT NULL CHECK (direction IN ('out', 'in')),
        node        TEXT NOT NULL,
        tool        TEXT NOT NULL,
        arguments   TEXT NOT NULL,
        state       TEXT NOT NULL CHECK (state IN ('sent', 'running', 'done', 'failed')),
        result      TEXT,
        created_at  INTEGER NOT NULL,
        finished_at INTEGER,
        UNIQUE (direction, call_id)
    );
    "#,
    // 11: the replica whose workspace runs an agent's worker (`codex` runner agents), so a
    // replica restarting on a store others share restarts its own workers and no one else's.
    r#"
    ALTER TABLE agents ADD COLUMN host TEXT;
    "#,
    // 12: upstream MCP servers' tool definitions as first seen and as a person approved them:
    // a definition whose hash differs from the approved one is withheld until approved.
    r#"
    CREATE TABLE upstream_pins (
        server      TEXT NOT NULL,
        tool        TEXT NOT NULL,
        approved    TEXT,
        seen        TEXT NOT NULL,
        definition  TEXT NOT NULL,
        first_seen  INTEGER NOT NULL,
        updated_at  INTEGER NOT NULL,
        approved_by TEXT,
        PRIMARY KEY (server, tool)
    );
    "#,
    // 13: the audit trail: every tool call (catalog, workspace, skill, upstream), who made it,
    // what the decision said, how it ended; arguments only where a server opted in.
    r#"
    CREATE TABLE audit_log (
        seq         INTEGER PRIMARY KEY AUTOINCREMENT,
        at          INTEGER NOT NULL,
        principal   TEXT NOT NULL,
        role        TEXT NOT NULL,
        loopback    INTEGER NOT NULL,
        agent       TEXT,
        mesh_node   TEXT,
        tool        TEXT NOT NULL,
        source      TEXT NOT NULL,
        server      TEXT,
        decision    TEXT NOT NULL,
        code        TEXT NOT NULL,
        duration_us INTEGER NOT NULL,
        arguments   TEXT
    );
    "#,
];

/// Every migration, in order (PostgreSQL applies them too, translated: `pg::translate`).
pub fn all() -> &'static [&'static str] {
    MIGRATIONS
}

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
