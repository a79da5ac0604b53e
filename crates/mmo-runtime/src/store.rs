//! Durable runtime state: one SQLite file under the data directory holding every session, agent
//! run (the root and each Agent-MCP job), result, patch, event and audit record.
//!
//! Every change a caller is told about is committed first (WAL, `synchronous = FULL`), so a
//! `kill -9` of the supervisor at any moment loses nothing acknowledged. Every row carries the
//! package version and the runtime digest of the binary that wrote it; a row of another package
//! generation is refused when it is loaded, naming the row.

use crate::result::{
    Disposition, Finality, JobState, LifecycleError, disposition_transition, job_transition,
};
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use serde_json::Value;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// The event kind of an operator-visible stall warning (`stall.rs`).
pub const STALL_WARNING: &str = "stallWarning";

/// The package generation this build reads and writes.
pub const PACKAGE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Why the store refused.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the runtime state database: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error(
        "{what} was written by codex-mmo {found}, not {PACKAGE_VERSION}; records of another generation are refused (keep historical evidence outside active state)"
    )]
    Generation { what: String, found: String },
    #[error("{0} does not exist")]
    NotFound(String),
    #[error("{what}: cannot change from `{from}` to `{to}` (states are monotonic)")]
    Transition {
        what: String,
        from: String,
        to: String,
    },
    #[error("stored JSON in {0} does not parse")]
    Corrupt(String),
    #[error("the admission lock {path}: {source}")]
    Lock {
        path: String,
        source: std::io::Error,
    },
}

impl StoreError {
    /// A stable id for clients and tests.
    pub fn code(&self) -> &'static str {
        match self {
            StoreError::Sqlite(_) => "state_database",
            StoreError::Generation { .. } => "record_generation",
            StoreError::NotFound(_) => "not_found",
            StoreError::Transition { .. } => "state_transition",
            StoreError::Corrupt(_) => "state_corrupt",
            StoreError::Lock { .. } => "admission_lock",
        }
    }
}

type Result<T> = std::result::Result<T, StoreError>;

/// Milliseconds since the epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS sessions (
  id TEXT PRIMARY KEY,
  profile_id TEXT NOT NULL,
  snapshot TEXT NOT NULL,
  workspace TEXT NOT NULL,
  dir TEXT NOT NULL,
  task TEXT,
  state TEXT NOT NULL,
  reason TEXT,
  tainted TEXT,
  supervisor_pid INTEGER,
  package_version TEXT NOT NULL,
  runtime_digest TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
  ref TEXT PRIMARY KEY,
  session TEXT NOT NULL REFERENCES sessions(id),
  job TEXT UNIQUE,
  role TEXT NOT NULL,
  parent TEXT,
  depth INTEGER NOT NULL,
  lineage TEXT NOT NULL,
  task_kind TEXT,
  task TEXT,
  literal TEXT,
  write_scope TEXT NOT NULL,
  is_writer INTEGER NOT NULL,
  resource_group TEXT,
  units INTEGER NOT NULL,
  state TEXT NOT NULL,
  reason TEXT,
  progress_revision INTEGER NOT NULL,
  control_revision INTEGER NOT NULL,
  preview TEXT,
  thread_id TEXT,
  host_pid INTEGER,
  home TEXT,
  cwd TEXT,
  repairs INTEGER NOT NULL DEFAULT 0,
  package_version TEXT NOT NULL,
  runtime_digest TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_session ON runs(session);
CREATE TABLE IF NOT EXISTS results (
  job TEXT PRIMARY KEY REFERENCES runs(job),
  text TEXT NOT NULL,
  is_json INTEGER NOT NULL,
  final INTEGER NOT NULL,
  disposition TEXT NOT NULL,
  reason TEXT,
  package_version TEXT NOT NULL,
  runtime_digest TEXT NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS patches (
  job TEXT PRIMARY KEY REFERENCES runs(job),
  base_commit TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  bytes BLOB NOT NULL,
  files TEXT NOT NULL,
  state TEXT NOT NULL,
  package_version TEXT NOT NULL,
  runtime_digest TEXT NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  session TEXT NOT NULL,
  run TEXT NOT NULL,
  at INTEGER NOT NULL,
  kind TEXT NOT NULL,
  body TEXT NOT NULL,
  package_version TEXT NOT NULL,
  runtime_digest TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_run ON events(run, seq);
CREATE TABLE IF NOT EXISTS controls (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  session TEXT NOT NULL,
  run TEXT NOT NULL,
  revision INTEGER NOT NULL,
  action TEXT NOT NULL,
  actor TEXT NOT NULL,
  status TEXT NOT NULL,
  detail TEXT,
  at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  package_version TEXT NOT NULL,
  runtime_digest TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS controls_run ON controls(run, seq);
CREATE TABLE IF NOT EXISTS audit (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  session TEXT NOT NULL,
  at INTEGER NOT NULL,
  actor TEXT NOT NULL,
  action TEXT NOT NULL,
  target TEXT NOT NULL,
  detail TEXT NOT NULL,
  package_version TEXT NOT NULL,
  runtime_digest TEXT NOT NULL
);
";

/// A session row.
#[derive(Debug, Clone, Serialize)]
pub struct Session {
    pub id: String,
    pub profile_id: String,
    pub snapshot: String,
    pub workspace: String,
    pub dir: String,
    pub task: Option<String>,
    pub state: String,
    pub reason: Option<String>,
    pub tainted: Option<String>,
    pub supervisor_pid: Option<i64>,
    pub package_version: String,
    pub runtime_digest: String,
    pub created_at: i64,
    pub updated_at: i64,
}

/// An agent run: the root, or one Agent-MCP job's worker.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    #[serde(rename = "agent_run_ref")]
    pub run_ref: String,
    pub session: String,
    pub job: Option<String>,
    pub role: String,
    pub parent: Option<String>,
    pub depth: u32,
    pub lineage: Vec<String>,
    pub task_kind: Option<String>,
    pub task: Option<String>,
    pub literal: Option<Value>,
    pub write_scope: Vec<String>,
    pub is_writer: bool,
    pub resource_group: Option<String>,
    pub units: u32,
    pub state: JobState,
    pub reason: Option<String>,
    pub progress_revision: i64,
    pub control_revision: i64,
    pub preview: Option<String>,
    pub thread_id: Option<String>,
    pub host_pid: Option<i64>,
    pub home: Option<String>,
    pub cwd: Option<String>,
    pub repairs: u32,
    pub package_version: String,
    pub runtime_digest: String,
    pub created_at: i64,
    pub updated_at: i64,
}

impl Run {
    /// Whether the run holds admission slots (queued or running; paused, suspended and terminal
    /// runs release them).
    pub fn is_active(&self) -> bool {
        self.state.holds_admission()
    }

    /// A native run: a thread Codex started inside a host (`native.rs`). It has a parent but no
    /// job, and holds no Agent-MCP admission slot.
    pub fn is_native(&self) -> bool {
        self.job.is_none() && self.parent.is_some()
    }

    /// `root`, `mcp` (an Agent-MCP job's worker) or `native`.
    pub fn backend(&self) -> &'static str {
        match (&self.parent, &self.job) {
            (None, _) => "root",
            (Some(_), Some(_)) => "mcp",
            (Some(_), None) => "native",
        }
    }
}

/// A stored result.
#[derive(Debug, Clone, Serialize)]
pub struct StoredResult {
    pub job: String,
    pub text: String,
    pub is_json: bool,
    /// `false` for partial evidence (a stopped or suspended job): never a final answer.
    pub final_: bool,
    pub disposition: String,
    pub reason: Option<String>,
}

/// A recorded patch.
#[derive(Debug, Clone, Serialize)]
pub struct StoredPatch {
    pub job: String,
    pub base_commit: String,
    pub sha256: String,
    #[serde(skip)]
    pub bytes: Vec<u8>,
    pub files: Value,
    pub state: String,
}

/// One trace event.
#[derive(Debug, Clone, Serialize)]
pub struct Event {
    pub seq: i64,
    pub run: String,
    pub at: i64,
    pub kind: String,
    pub body: String,
}

/// What a new run starts as.
pub struct NewRun<'a> {
    pub run_ref: &'a str,
    pub session: &'a str,
    pub job: Option<&'a str>,
    pub role: &'a str,
    pub parent: Option<&'a str>,
    pub depth: u32,
    pub lineage: &'a [String],
    pub task_kind: Option<&'a str>,
    pub task: Option<&'a str>,
    pub literal: Option<&'a Value>,
    pub write_scope: &'a [String],
    pub is_writer: bool,
    pub resource_group: Option<&'a str>,
    pub units: u32,
}

/// The runtime's state database.
pub struct Store {
    conn: Mutex<Connection>,
    digest: String,
    lock_path: PathBuf,
}

/// Held while one admission decision is taken and recorded: every supervisor of this data
/// directory takes it (an exclusive `flock`), because `max_active` counts a role's runs across
/// every session of its profile. Released on drop.
pub struct AdmissionLock(std::fs::File);

impl Drop for AdmissionLock {
    fn drop(&mut self) {
        unsafe {
            libc::flock(self.0.as_raw_fd(), libc::LOCK_UN);
        }
    }
}

fn json_text(v: &impl Serialize) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

impl Store {
    /// Opens (creating) the database at `path`. `runtime_digest` identifies the running binary.
    pub fn open(path: &Path, runtime_digest: &str) -> Result<Store> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.execute_batch(SCHEMA)?;
        Ok(Store {
            conn: Mutex::new(conn),
            digest: runtime_digest.to_string(),
            lock_path: path.with_extension("admission.lock"),
        })
    }

    /// Takes the data directory's admission lock (blocking until it is free).
    pub fn admission_lock(&self) -> Result<AdmissionLock> {
        let err = |source| StoreError::Lock {
            path: self.lock_path.display().to_string(),
            source,
        };
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&self.lock_path)
            .map_err(err)?;
        loop {
            if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } == 0 {
                return Ok(AdmissionLock(f));
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(err(e));
            }
        }
    }

    /// Active (admission-holding) runs per role in the sessions of `profile_id` other than
    /// `session` that `live` accepts (given the session id and its supervisor's pid). Native runs
    /// hold no admission slot and are not counted.
    pub fn active_roles_elsewhere(
        &self,
        profile_id: &str,
        session: &str,
        live: impl Fn(&str, Option<i64>) -> bool,
    ) -> Result<std::collections::BTreeMap<String, u32>> {
        let db = self.db();
        let mut stmt = db.prepare(
            "SELECT s.id, s.supervisor_pid, r.role FROM runs r JOIN sessions s ON r.session = s.id
             WHERE s.profile_id = ?1 AND s.id != ?2 AND r.state IN ('queued', 'running')
               AND (r.job IS NOT NULL OR r.parent IS NULL)",
        )?;
        let rows = stmt
            .query_map(params![profile_id, session], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, Option<i64>>(1)?,
                    r.get::<_, String>(2)?,
                ))
            })?
            .collect::<std::result::Result<Vec<_>, _>>()?;
        drop(stmt);
        drop(db);
        let mut out = std::collections::BTreeMap::new();
        let mut seen: std::collections::HashMap<String, bool> = Default::default();
        for (id, pid, role) in rows {
            let is_live = *seen.entry(id.clone()).or_insert_with(|| live(&id, pid));
            if is_live {
                *out.entry(role).or_insert(0u32) += 1;
            }
        }
        Ok(out)
    }

    fn db(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The digest this store stamps rows with.
    pub fn runtime_digest(&self) -> &str {
        &self.digest
    }

    // ---- sessions ----

    /// Records a new session in state `starting`.
    #[allow(clippy::too_many_arguments)]
    pub fn create_session(
        &self,
        id: &str,
        profile_id: &str,
        snapshot: &str,
        workspace: &str,
        dir: &str,
        task: Option<&str>,
    ) -> Result<Session> {
        let now = now_ms();
        self.db().execute(
            "INSERT INTO sessions (id, profile_id, snapshot, workspace, dir, task, state, package_version, runtime_digest, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'starting', ?7, ?8, ?9, ?9)",
            params![id, profile_id, snapshot, workspace, dir, task, PACKAGE_VERSION, self.digest, now],
        )?;
        self.session(id)
    }

    /// One session; another generation's row is refused.
    pub fn session(&self, id: &str) -> Result<Session> {
        let db = self.db();
        let row = db
            .query_row(
                "SELECT id, profile_id, snapshot, workspace, dir, task, state, reason, tainted, supervisor_pid, package_version, runtime_digest, created_at, updated_at FROM sessions WHERE id = ?1",
                [id],
                session_row,
            )
            .optional()?
            .ok_or_else(|| StoreError::NotFound(format!("session `{id}`")))?;
        checked_session(row)
    }

    /// Every session, newest first: the current generation's, and the refusals of the others.
    pub fn sessions(&self) -> Result<Vec<std::result::Result<Session, StoreError>>> {
        let db = self.db();
        let mut stmt = db.prepare(
            "SELECT id, profile_id, snapshot, workspace, dir, task, state, reason, tainted, supervisor_pid, package_version, runtime_digest, created_at, updated_at FROM sessions ORDER BY created_at DESC",
        )?;
        let rows = stmt
            .query_map([], session_row)?
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(rows.into_iter().map(checked_session).collect())
    }

    /// Moves a session to `state` (with a reason), refusing to leave a terminal state.
    pub fn set_session_state(&self, id: &str, state: &str, reason: Option<&str>) -> Result<()> {
        let current = self.session(id)?;
        if is_terminal_session(&current.state) && current.state != state {
            return Err(StoreError::Transition {
                what: format!("session `{id}`"),
                from: current.state,
                to: state.into(),
            });
        }
        self.db().execute(
            "UPDATE sessions SET state = ?2, reason = COALESCE(?3, reason), updated_at = ?4 WHERE id = ?1",
            params![id, state, reason, now_ms()],
        )?;
        Ok(())
    }

    /// Marks a `suspended` session `resuming` for a new supervisor to take (and forgets the
    /// dead one's pid). Compare-and-swap: `false` when the session is not suspended any more
    /// (another resume got there first, or it ended).
    pub fn mark_resuming(&self, id: &str) -> Result<bool> {
        let n = self.db().execute(
            "UPDATE sessions SET state = 'resuming', supervisor_pid = NULL, reason = 'resuming: a new supervisor is taking the session', updated_at = ?2 WHERE id = ?1 AND state = 'suspended'",
            params![id, now_ms()],
        )?;
        Ok(n == 1)
    }

    /// A supervisor takes a session in state `from` (`starting` or `resuming`) that no other
    /// supervisor has taken: compare-and-swap of the supervisor pid, so two supervisors never
    /// both run one session.
    pub fn claim_session(&self, id: &str, from: &str, pid: u32) -> Result<bool> {
        let n = self.db().execute(
            "UPDATE sessions SET supervisor_pid = ?3, updated_at = ?4 WHERE id = ?1 AND state = ?2 AND supervisor_pid IS NULL",
            params![id, from, pid, now_ms()],
        )?;
        Ok(n == 1)
    }

    /// Records the supervisor's pid.
    pub fn set_supervisor(&self, id: &str, pid: Option<u32>) -> Result<()> {
        self.db().execute(
            "UPDATE sessions SET supervisor_pid = ?2, updated_at = ?3 WHERE id = ?1",
            params![id, pid, now_ms()],
        )?;
        Ok(())
    }

    /// Marks the session tainted (the first reason wins: it is the one to investigate).
    pub fn taint(&self, id: &str, reason: &str) -> Result<()> {
        self.db().execute(
            "UPDATE sessions SET tainted = COALESCE(tainted, ?2), updated_at = ?3 WHERE id = ?1",
            params![id, reason, now_ms()],
        )?;
        Ok(())
    }

    // ---- runs ----

    /// Records a new run in state `queued` at revision 1.
    pub fn create_run(&self, r: &NewRun<'_>) -> Result<Run> {
        let now = now_ms();
        self.db().execute(
            "INSERT INTO runs (ref, session, job, role, parent, depth, lineage, task_kind, task, literal, write_scope, is_writer, resource_group, units, state, progress_revision, control_revision, package_version, runtime_digest, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, 'queued', 1, 1, ?15, ?16, ?17, ?17)",
            params![
                r.run_ref,
                r.session,
                r.job,
                r.role,
                r.parent,
                r.depth,
                json_text(&r.lineage),
                r.task_kind,
                r.task,
                r.literal.map(json_text),
                json_text(&r.write_scope),
                r.is_writer,
                r.resource_group,
                r.units,
                PACKAGE_VERSION,
                self.digest,
                now
            ],
        )?;
        self.run(r.run_ref)
    }

    /// One run by its ref.
    pub fn run(&self, run_ref: &str) -> Result<Run> {
        self.run_where("ref = ?1", run_ref)?
            .ok_or_else(|| StoreError::NotFound(format!("agent run `{run_ref}`")))
    }

    /// One run by its job id.
    pub fn run_of_job(&self, job: &str) -> Result<Run> {
        self.run_where("job = ?1", job)?
            .ok_or_else(|| StoreError::NotFound(format!("job `{job}`")))
    }

    fn run_where(&self, cond: &str, key: &str) -> Result<Option<Run>> {
        let db = self.db();
        let sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE {cond}");
        let row = db.query_row(&sql, [key], run_row).optional()?;
        row.map(checked_run).transpose()
    }

    /// Every run of a session, oldest first.
    pub fn runs(&self, session: &str) -> Result<Vec<Run>> {
        let db = self.db();
        let sql =
            format!("SELECT {RUN_COLUMNS} FROM runs WHERE session = ?1 ORDER BY created_at, ref");
        let mut stmt = db.prepare(&sql)?;
        let rows = stmt
            .query_map([session], run_row)?
            .collect::<std::result::Result<Vec<_>, _>>()?;
        rows.into_iter().map(checked_run).collect()
    }

    /// Moves a run to `to` (bumping its progress revision) when the job lifecycle allows it
    /// (`result::job_transition`): terminal states never change.
    pub fn transition(&self, run_ref: &str, to: JobState, reason: Option<&str>) -> Result<Run> {
        let run = self.run(run_ref)?;
        let refused = || StoreError::Transition {
            what: format!("agent run `{run_ref}`"),
            from: run.state.to_string(),
            to: to.to_string(),
        };
        let from = run.state;
        job_transition(from, to).map_err(|_| refused())?;
        let n = self.db().execute(
            "UPDATE runs SET state = ?2, reason = COALESCE(?3, reason), progress_revision = progress_revision + 1, updated_at = ?4 WHERE ref = ?1 AND state = ?5",
            params![run_ref, to.as_str(), reason, now_ms(), from.as_str()],
        )?;
        if n != 1 {
            // Another writer moved it first: report the state it is in now.
            let now = self.run(run_ref)?;
            return Err(StoreError::Transition {
                what: format!("agent run `{run_ref}`"),
                from: now.state.to_string(),
                to: to.to_string(),
            });
        }
        self.run(run_ref)
    }

    /// Bumps a run's progress revision with a new preview line.
    pub fn progress(&self, run_ref: &str, preview: &str) -> Result<i64> {
        let db = self.db();
        db.execute(
            "UPDATE runs SET preview = ?2, progress_revision = progress_revision + 1, updated_at = ?3 WHERE ref = ?1",
            params![run_ref, preview, now_ms()],
        )?;
        Ok(db.query_row(
            "SELECT progress_revision FROM runs WHERE ref = ?1",
            [run_ref],
            |r| r.get(0),
        )?)
    }

    /// Records the host of a run.
    pub fn set_host(
        &self,
        run_ref: &str,
        pid: Option<u32>,
        thread: Option<&str>,
        home: &str,
        cwd: &str,
    ) -> Result<()> {
        self.db().execute(
            "UPDATE runs SET host_pid = ?2, thread_id = COALESCE(?3, thread_id), home = ?4, cwd = ?5, updated_at = ?6 WHERE ref = ?1",
            params![run_ref, pid, thread, home, cwd, now_ms()],
        )?;
        Ok(())
    }

    /// Counts a repair turn.
    pub fn count_repair(&self, run_ref: &str) -> Result<()> {
        self.db().execute(
            "UPDATE runs SET repairs = repairs + 1, updated_at = ?2 WHERE ref = ?1",
            params![run_ref, now_ms()],
        )?;
        Ok(())
    }

    /// Compare-and-swap of a run's control revision: succeeds only when `expected` is current.
    pub fn bump_control(&self, run_ref: &str, expected: i64) -> Result<bool> {
        let n = self.db().execute(
            "UPDATE runs SET control_revision = control_revision + 1, updated_at = ?3 WHERE ref = ?1 AND control_revision = ?2",
            params![run_ref, expected, now_ms()],
        )?;
        Ok(n == 1)
    }

    /// After a supervisor restart: every run that was active becomes `suspended`, keeping its
    /// evidence. Returns the refs.
    pub fn suspend_active(&self, session: &str) -> Result<Vec<String>> {
        let runs = self.runs(session)?;
        let mut out = Vec::new();
        for r in runs.into_iter().filter(Run::is_active) {
            self.transition(
                &r.run_ref,
                JobState::Suspended,
                Some("the supervisor stopped while this run was active"),
            )?;
            out.push(r.run_ref);
        }
        Ok(out)
    }

    // ---- results ----

    /// Stores a job's result (unread). `final_` is false for partial evidence.
    pub fn put_result(&self, job: &str, text: &str, is_json: bool, final_: bool) -> Result<()> {
        self.db().execute(
            "INSERT INTO results (job, text, is_json, final, disposition, package_version, runtime_digest, updated_at) VALUES (?1, ?2, ?3, ?4, 'unread', ?5, ?7, ?6)
             ON CONFLICT(job) DO UPDATE SET text = excluded.text, is_json = excluded.is_json, final = excluded.final, updated_at = excluded.updated_at
             WHERE results.disposition IN ('unread', 'read')",
            params![job, text, is_json, final_, PACKAGE_VERSION, now_ms(), self.digest],
        )?;
        Ok(())
    }

    /// A job's result, if any.
    pub fn result(&self, job: &str) -> Result<Option<StoredResult>> {
        let db = self.db();
        let row = db
            .query_row(
                "SELECT job, text, is_json, final, disposition, reason, package_version FROM results WHERE job = ?1",
                [job],
                |r| {
                    Ok((
                        StoredResult {
                            job: r.get(0)?,
                            text: r.get(1)?,
                            is_json: r.get(2)?,
                            final_: r.get(3)?,
                            disposition: r.get(4)?,
                            reason: r.get(5)?,
                        },
                        r.get::<_, String>(6)?,
                    ))
                },
            )
            .optional()?;
        match row {
            None => Ok(None),
            Some((res, v)) if v == PACKAGE_VERSION => Ok(Some(res)),
            Some((_, v)) => Err(StoreError::Generation {
                what: format!("the result of job `{job}`"),
                found: v,
            }),
        }
    }

    /// Moves a result's disposition (unread → read → accepted | rejected) as the result
    /// lifecycle allows (`result::disposition_transition`): only a completed job's final result
    /// can be accepted, and accepted and rejected never change.
    pub fn set_disposition(&self, job: &str, to: Disposition, reason: Option<&str>) -> Result<()> {
        let Some(cur) = self.result(job)? else {
            return Err(StoreError::NotFound(format!("a result of job `{job}`")));
        };
        let refused = |why: String| StoreError::Transition {
            what: format!("the result of job `{job}`"),
            from: cur.disposition.clone(),
            to: format!("{to} ({why})"),
        };
        let state = self.run_of_job(job)?.state;
        let from: Disposition = cur
            .disposition
            .parse()
            .map_err(|e: LifecycleError| refused(e.message))?;
        let finality = if cur.final_ {
            Finality::Final
        } else {
            Finality::Partial
        };
        if from == to && to == Disposition::Read {
            return Ok(());
        }
        disposition_transition(state, finality, from, to).map_err(|e| refused(e.message))?;
        self.db().execute(
            "UPDATE results SET disposition = ?2, reason = COALESCE(?3, reason), updated_at = ?4 WHERE job = ?1",
            params![job, to.as_str(), reason, now_ms()],
        )?;
        Ok(())
    }

    // ---- patches ----

    /// Records a job's patch (state `recorded`, or `refused` when it broke the rules).
    pub fn put_patch(
        &self,
        job: &str,
        base_commit: &str,
        sha256: &str,
        bytes: &[u8],
        files: &Value,
        state: &str,
    ) -> Result<()> {
        self.db().execute(
            "INSERT OR REPLACE INTO patches (job, base_commit, sha256, bytes, files, state, package_version, updated_at, runtime_digest) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![job, base_commit, sha256, bytes, json_text(files), state, PACKAGE_VERSION, now_ms(), self.digest],
        )?;
        Ok(())
    }

    /// A job's patch, if one was recorded.
    pub fn patch(&self, job: &str) -> Result<Option<StoredPatch>> {
        let db = self.db();
        let row = db
            .query_row(
                "SELECT job, base_commit, sha256, bytes, files, state, package_version FROM patches WHERE job = ?1",
                [job],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, Vec<u8>>(3)?,
                        r.get::<_, String>(4)?,
                        r.get::<_, String>(5)?,
                        r.get::<_, String>(6)?,
                    ))
                },
            )
            .optional()?;
        let Some((job, base_commit, sha256, bytes, files, state, v)) = row else {
            return Ok(None);
        };
        if v != PACKAGE_VERSION {
            return Err(StoreError::Generation {
                what: format!("the patch of job `{job}`"),
                found: v,
            });
        }
        let files = serde_json::from_str(&files)
            .map_err(|_| StoreError::Corrupt(format!("the patch of job `{job}`")))?;
        Ok(Some(StoredPatch {
            job,
            base_commit,
            sha256,
            bytes,
            files,
            state,
        }))
    }

    /// Moves a patch from `recorded` to `to` (`integrated`); false when it was not `recorded`.
    pub fn set_patch_state(&self, job: &str, to: &str) -> Result<bool> {
        let n = self.db().execute(
            "UPDATE patches SET state = ?2, updated_at = ?3 WHERE job = ?1 AND state = 'recorded'",
            params![job, to, now_ms()],
        )?;
        Ok(n == 1)
    }

    // ---- events and audit ----

    /// Appends a trace event of a run.
    pub fn event(&self, session: &str, run: &str, kind: &str, body: &str) -> Result<i64> {
        let db = self.db();
        db.execute(
            "INSERT INTO events (session, run, at, kind, body, package_version, runtime_digest) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![session, run, now_ms(), kind, body, PACKAGE_VERSION, self.digest],
        )?;
        Ok(db.last_insert_rowid())
    }

    /// The text of a run's last agent message, if it has one.
    pub fn last_agent_message(&self, run: &str) -> Option<String> {
        let kinds = ["agentMessage".to_string()];
        let events = self.events(run, 0, usize::MAX, Some(&kinds)).ok()?;
        let last = events.last()?;
        let v: Value = serde_json::from_str(&last.body).ok()?;
        v.get("text").and_then(Value::as_str).map(str::to_string)
    }

    /// A run's events after `after` (exclusive), at most `limit`, optionally of some kinds only.
    pub fn events(
        &self,
        run: &str,
        after: i64,
        limit: usize,
        kinds: Option<&[String]>,
    ) -> Result<Vec<Event>> {
        let db = self.db();
        let mut stmt = db.prepare(
            "SELECT seq, run, at, kind, body, package_version FROM events WHERE run = ?1 AND seq > ?2 ORDER BY seq",
        )?;
        let mut out = Vec::new();
        let mut rows = stmt.query(params![run, after])?;
        while let Some(r) = rows.next()? {
            let e = event_row(r)?;
            if kinds.is_none_or(|k| k.contains(&e.kind)) {
                out.push(e);
                if out.len() >= limit {
                    break;
                }
            }
        }
        Ok(out)
    }

    /// The latest event of `kind` of a run, if any.
    pub fn last_event(&self, run: &str, kind: &str) -> Result<Option<Event>> {
        let db = self.db();
        let mut stmt = db.prepare(
            "SELECT seq, run, at, kind, body, package_version FROM events WHERE run = ?1 AND kind = ?2 ORDER BY seq DESC LIMIT 1",
        )?;
        let mut rows = stmt.query(params![run, kind])?;
        match rows.next()? {
            Some(r) => Ok(Some(event_row(r)?)),
            None => Ok(None),
        }
    }

    /// Runs of a session that hold a stall warning now: active, and warned after their last
    /// progress. Each with the warning's body.
    pub fn stall_warnings(&self, session: &str) -> Result<Vec<(String, Value)>> {
        let mut out = Vec::new();
        for r in self.runs(session)? {
            if let Some(w) = self.stall_warning(&r)? {
                out.push((r.run_ref, w));
            }
        }
        Ok(out)
    }

    /// The stall warning a run holds now, if any: it is active and was warned after its last
    /// progress.
    pub fn stall_warning(&self, run: &Run) -> Result<Option<Value>> {
        if !run.is_active() {
            return Ok(None);
        }
        Ok(self
            .last_event(&run.run_ref, STALL_WARNING)?
            .filter(|e| e.at >= run.updated_at)
            .map(|e| serde_json::from_str(&e.body).unwrap_or(Value::Null)))
    }

    /// One event by its sequence number.
    pub fn event_at(&self, seq: i64) -> Result<Option<Event>> {
        let db = self.db();
        Ok(db
            .query_row(
                "SELECT seq, run, at, kind, body, package_version FROM events WHERE seq = ?1",
                [seq],
                event_row,
            )
            .optional()?)
    }

    /// Every event of a session after `after`, at most `limit` (the attach view).
    pub fn session_events(&self, session: &str, after: i64, limit: usize) -> Result<Vec<Event>> {
        let db = self.db();
        let mut stmt = db.prepare("SELECT seq, run, at, kind, body, package_version FROM events WHERE session = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3")?;
        let rows = stmt
            .query_map(params![session, after, limit as i64], event_row)?
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(rows)
    }

    /// Appends an audit record: who did what to which target.
    /// Records a mutating control whose delivery begins (`delivering`), under the revision it
    /// took. Returns its sequence number for [`Self::control_end`].
    pub fn control_begin(
        &self,
        session: &str,
        run: &str,
        revision: i64,
        action: &str,
        actor: &str,
    ) -> Result<i64> {
        let db = self.db();
        let now = now_ms();
        db.execute(
            "INSERT INTO controls (session, run, revision, action, actor, status, at, updated_at, package_version, runtime_digest) VALUES (?1, ?2, ?3, ?4, ?5, 'delivering', ?6, ?6, ?7, ?8)",
            params![session, run, revision, action, actor, now, PACKAGE_VERSION, self.digest],
        )?;
        Ok(db.last_insert_rowid())
    }

    /// How a control's delivery ended: `delivered`, `failed` or `delivery_unknown` (delivery
    /// began and no reply came).
    pub fn control_end(&self, seq: i64, status: &str, detail: Option<&str>) -> Result<()> {
        self.db().execute(
            "UPDATE controls SET status = ?2, detail = ?3, updated_at = ?4 WHERE seq = ?1 AND status = 'delivering'",
            params![seq, status, detail, now_ms()],
        )?;
        Ok(())
    }

    /// The latest control of a run, if any.
    pub fn last_control(&self, run: &str) -> Result<Option<Value>> {
        let db = self.db();
        let row = db
            .query_row(
                "SELECT revision, action, actor, status, detail, at, updated_at, package_version FROM controls WHERE run = ?1 ORDER BY seq DESC LIMIT 1",
                [run],
                |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, Option<String>>(4)?,
                        r.get::<_, i64>(5)?,
                        r.get::<_, i64>(6)?,
                        r.get::<_, String>(7)?,
                    ))
                },
            )
            .optional()?;
        let Some((revision, action, actor, status, detail, at, updated_at, version)) = row else {
            return Ok(None);
        };
        if version != PACKAGE_VERSION {
            return Err(StoreError::Generation {
                what: format!("the last control of agent run `{run}`"),
                found: version,
            });
        }
        Ok(Some(serde_json::json!({
            "control_revision": revision, "action": action, "actor": actor, "status": status,
            "detail": detail, "at": at, "updated_at": updated_at,
        })))
    }

    /// The reasoning effort the latest delivered `set_effort` of a run chose, if any.
    pub fn effort(&self, run: &str) -> Result<Option<String>> {
        Ok(self
            .db()
            .query_row(
                "SELECT detail FROM controls WHERE run = ?1 AND action = 'set_effort' AND status = 'delivered' ORDER BY seq DESC LIMIT 1",
                [run],
                |r| r.get::<_, Option<String>>(0),
            )
            .optional()?
            .flatten())
    }

    /// After a supervisor restart: a control still `delivering` lost its reply.
    pub fn controls_unknown(&self, session: &str) -> Result<usize> {
        Ok(self.db().execute(
            "UPDATE controls SET status = 'delivery_unknown', detail = 'the supervisor stopped while delivering it', updated_at = ?2 WHERE session = ?1 AND status = 'delivering'",
            params![session, now_ms()],
        )?)
    }

    pub fn audit(
        &self,
        session: &str,
        actor: &str,
        action: &str,
        target: &str,
        detail: &Value,
    ) -> Result<()> {
        self.db().execute(
            "INSERT INTO audit (session, at, actor, action, target, detail, package_version, runtime_digest) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![session, now_ms(), actor, action, target, json_text(detail), PACKAGE_VERSION, self.digest],
        )?;
        Ok(())
    }

    /// A session's audit log, oldest first.
    pub fn audit_log(&self, session: &str) -> Result<Vec<Value>> {
        let db = self.db();
        let mut stmt = db.prepare("SELECT seq, at, actor, action, target, detail, package_version FROM audit WHERE session = ?1 ORDER BY seq")?;
        let rows = stmt
            .query_map([session], |r| {
                let detail: String = r.get(5)?;
                Ok(serde_json::json!({
                    "seq": r.get::<_, i64>(0)?, "at": r.get::<_, i64>(1)?, "actor": r.get::<_, String>(2)?,
                    "action": r.get::<_, String>(3)?, "target": r.get::<_, String>(4)?,
                    "detail": serde_json::from_str::<Value>(&detail).unwrap_or(Value::Null),
                    "package_version": r.get::<_, String>(6)?,
                }))
            })?
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(rows)
    }
}

/// Whether a session state is final.
pub fn is_terminal_session(state: &str) -> bool {
    matches!(state, "stopped" | "completed" | "failed")
}

const RUN_COLUMNS: &str = "ref, session, job, role, parent, depth, lineage, task_kind, task, literal, write_scope, is_writer, resource_group, units, state, reason, progress_revision, control_revision, preview, thread_id, host_pid, home, cwd, repairs, package_version, runtime_digest, created_at, updated_at";

/// An event row; one written by another package generation is refused (as a conversion
/// failure naming it).
/// A run's state is stored as its snake_case TEXT; a value that is none is a conversion failure.
impl rusqlite::types::FromSql for JobState {
    fn column_result(v: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self> {
        v.as_str()?
            .parse()
            .map_err(|e: LifecycleError| rusqlite::types::FromSqlError::Other(Box::new(e)))
    }
}

fn event_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Event> {
    let version: String = r.get(5)?;
    if version != PACKAGE_VERSION {
        let seq: i64 = r.get(0)?;
        return Err(rusqlite::Error::FromSqlConversionFailure(
            5,
            rusqlite::types::Type::Text,
            format!("event {seq} was written by codex-mmo {version}, not {PACKAGE_VERSION}; records of another generation are refused").into(),
        ));
    }
    Ok(Event {
        seq: r.get(0)?,
        run: r.get(1)?,
        at: r.get(2)?,
        kind: r.get(3)?,
        body: r.get(4)?,
    })
}

fn session_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Session> {
    Ok(Session {
        id: r.get(0)?,
        profile_id: r.get(1)?,
        snapshot: r.get(2)?,
        workspace: r.get(3)?,
        dir: r.get(4)?,
        task: r.get(5)?,
        state: r.get(6)?,
        reason: r.get(7)?,
        tainted: r.get(8)?,
        supervisor_pid: r.get(9)?,
        package_version: r.get(10)?,
        runtime_digest: r.get(11)?,
        created_at: r.get(12)?,
        updated_at: r.get(13)?,
    })
}

fn checked_session(s: Session) -> Result<Session> {
    if s.package_version != PACKAGE_VERSION {
        return Err(StoreError::Generation {
            what: format!("session `{}`", s.id),
            found: s.package_version,
        });
    }
    Ok(s)
}

/// A run row as stored: JSON columns still text.
struct RawRun(Run, String, String, Option<String>);

fn run_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawRun> {
    Ok(RawRun(
        Run {
            run_ref: r.get(0)?,
            session: r.get(1)?,
            job: r.get(2)?,
            role: r.get(3)?,
            parent: r.get(4)?,
            depth: r.get(5)?,
            lineage: Vec::new(),
            task_kind: r.get(7)?,
            task: r.get(8)?,
            literal: None,
            write_scope: Vec::new(),
            is_writer: r.get(11)?,
            resource_group: r.get(12)?,
            units: r.get(13)?,
            state: r.get(14)?,
            reason: r.get(15)?,
            progress_revision: r.get(16)?,
            control_revision: r.get(17)?,
            preview: r.get(18)?,
            thread_id: r.get(19)?,
            host_pid: r.get(20)?,
            home: r.get(21)?,
            cwd: r.get(22)?,
            repairs: r.get(23)?,
            package_version: r.get(24)?,
            runtime_digest: r.get(25)?,
            created_at: r.get(26)?,
            updated_at: r.get(27)?,
        },
        r.get(6)?,
        r.get(10)?,
        r.get(9)?,
    ))
}

fn checked_run(raw: RawRun) -> Result<Run> {
    let RawRun(mut run, lineage, scope, literal) = raw;
    if run.package_version != PACKAGE_VERSION {
        return Err(StoreError::Generation {
            what: format!("agent run `{}`", run.run_ref),
            found: run.package_version,
        });
    }
    let corrupt = || StoreError::Corrupt(format!("agent run `{}`", run.run_ref));
    run.lineage = serde_json::from_str(&lineage).map_err(|_| corrupt())?;
    run.write_scope = serde_json::from_str(&scope).map_err(|_| corrupt())?;
    run.literal = literal
        .map(|l| serde_json::from_str(&l))
        .transpose()
        .map_err(|_| corrupt())?;
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("state.db"), "digest").unwrap();
        (dir, s)
    }

    fn new_run<'a>(run_ref: &'a str, job: Option<&'a str>) -> NewRun<'a> {
        NewRun {
            run_ref,
            session: "s1",
            job,
            role: "reviewer",
            parent: None,
            depth: 1,
            lineage: &[],
            task_kind: Some("review"),
            task: Some("review it"),
            literal: None,
            write_scope: &[],
            is_writer: false,
            resource_group: None,
            units: 1,
        }
    }

    #[test]
    fn active_roles_elsewhere_counts_live_sessions_of_the_profile_and_no_native_runs() {
        let (_d, s) = store();
        for (id, profile) in [("s1", "p"), ("s2", "p"), ("s3", "p"), ("s4", "other")] {
            s.create_session(id, profile, "addr", "/w", "/d", None)
                .unwrap();
        }
        let run = |r: &str, session: &str, job: Option<&str>, parent: Option<&str>| {
            let mut n = new_run(r, job);
            n.session = session;
            n.parent = parent;
            s.create_run(&n).unwrap();
        };
        run("r1", "s1", Some("j1"), Some("root1")); // counted
        run("r2", "s2", Some("j2"), Some("root2")); // s2 is not live
        run("r3", "s3", Some("j3"), Some("root3"));
        s.transition("r3", JobState::Running, None).unwrap();
        s.transition("r3", JobState::Completed, None).unwrap(); // terminal
        run("r4", "s3", None, Some("r3")); // native: no admission slot
        run("r5", "s4", Some("j5"), Some("root5")); // another profile
        run("r6", "s1", None, None); // a root
        let live = |id: &str, _: Option<i64>| id != "s2";
        let mut got = s.active_roles_elsewhere("p", "s9", live).unwrap();
        assert_eq!(got.remove("reviewer"), Some(2), "r1 and the root r6");
        assert!(got.is_empty());
        // The asking session's own runs are not "elsewhere".
        let got = s.active_roles_elsewhere("p", "s1", live).unwrap();
        assert!(got.is_empty(), "{got:?}");
    }

    #[test]
    fn runs_are_monotonic_and_terminal_states_never_change() {
        let (_d, s) = store();
        s.create_session("s1", "p", "addr", "/w", "/d", None)
            .unwrap();
        s.create_run(&new_run("r1", Some("j1"))).unwrap();
        let r = s.transition("r1", JobState::Running, None).unwrap();
        assert_eq!(r.progress_revision, 2);
        s.transition("r1", JobState::Completed, None).unwrap();
        let e = s.transition("r1", JobState::Running, None).unwrap_err();
        assert_eq!(e.code(), "state_transition");
    }

    #[test]
    fn result_dispositions_only_move_forward() {
        let (_d, s) = store();
        s.create_session("s1", "p", "addr", "/w", "/d", None)
            .unwrap();
        s.create_run(&new_run("r1", Some("j1"))).unwrap();
        s.put_result("j1", "{}", true, true).unwrap();
        s.set_disposition("j1", Disposition::Read, None).unwrap();
        s.set_disposition("j1", Disposition::Rejected, Some("wrong"))
            .unwrap();
        assert_eq!(
            s.set_disposition("j1", Disposition::Accepted, None)
                .unwrap_err()
                .code(),
            "state_transition"
        );
        // A rejected result's text cannot be overwritten either.
        s.put_result("j1", "changed", false, true).unwrap();
        assert_eq!(s.result("j1").unwrap().unwrap().text, "{}");
    }

    #[test]
    fn another_generation_is_refused_at_load() {
        let (d, s) = store();
        s.create_session("s1", "p", "addr", "/w", "/d", None)
            .unwrap();
        drop(s);
        let c = Connection::open(d.path().join("state.db")).unwrap();
        c.execute("UPDATE sessions SET package_version = '7.0.0'", [])
            .unwrap();
        drop(c);
        let s = Store::open(&d.path().join("state.db"), "digest").unwrap();
        let e = s.session("s1").unwrap_err();
        assert_eq!(e.code(), "record_generation");
        assert!(e.to_string().contains("session `s1`") && e.to_string().contains("7.0.0"));
        assert!(s.sessions().unwrap()[0].is_err());
    }

    #[test]
    fn every_record_carries_its_generation_and_other_generations_are_refused() {
        let (d, s) = store();
        s.create_session("s1", "p", "addr", "/w", "/d", None)
            .unwrap();
        s.create_run(&new_run("r1", Some("j1"))).unwrap();
        s.event("s1", "r1", "agentMessage", "{}").unwrap();
        s.audit("s1", "r1", "agents_spawn", "j1", &serde_json::json!({}))
            .unwrap();
        s.put_result("j1", "{}", true, true).unwrap();
        drop(s);
        let c = Connection::open(d.path().join("state.db")).unwrap();
        for table in ["events", "audit", "results"] {
            let n: i64 = c
                .query_row(&format!("SELECT count(*) FROM {table} WHERE package_version = ?1 AND runtime_digest = 'digest'"), [PACKAGE_VERSION], |r| r.get(0))
                .unwrap();
            assert_eq!(n, 1, "{table} rows are stamped");
        }
        c.execute("UPDATE events SET package_version = '7.0.0'", [])
            .unwrap();
        c.execute("UPDATE results SET package_version = '7.0.0'", [])
            .unwrap();
        drop(c);
        let s = Store::open(&d.path().join("state.db"), "digest").unwrap();
        assert!(s.events("r1", 0, 10, None).is_err());
        assert_eq!(s.result("j1").unwrap_err().code(), "record_generation");
    }

    #[test]
    fn control_revision_is_compare_and_swap() {
        let (_d, s) = store();
        s.create_session("s1", "p", "addr", "/w", "/d", None)
            .unwrap();
        s.create_run(&new_run("r1", None)).unwrap();
        assert!(s.bump_control("r1", 1).unwrap());
        assert!(!s.bump_control("r1", 1).unwrap());
        assert_eq!(s.run("r1").unwrap().control_revision, 2);
    }

    #[test]
    fn active_runs_are_suspended_after_a_restart() {
        let (_d, s) = store();
        s.create_session("s1", "p", "addr", "/w", "/d", None)
            .unwrap();
        s.create_run(&new_run("r1", Some("j1"))).unwrap();
        s.create_run(&new_run("r2", Some("j2"))).unwrap();
        s.transition("r2", JobState::Failed, None).unwrap();
        assert_eq!(s.suspend_active("s1").unwrap(), vec!["r1".to_string()]);
        assert_eq!(s.run("r1").unwrap().state, JobState::Suspended);
        assert_eq!(s.run("r2").unwrap().state, JobState::Failed);
    }
}
