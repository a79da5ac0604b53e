//! The workspace journey store: one SQLite file (WAL) per workspace, at
//! `<workspace>/.vox/journey.db`, with versioned migrations and typed repositories.
//!
//! Every write is a single statement or a transaction, committed before the call returns, so
//! what a tool acknowledged survives a daemon restart. Several processes may open the same file.
//!
//! A store has an identity: a random id recorded inside the database (`store_meta`) and in a
//! small file beside it (`journey.db.id`), written when the store is created (or first opened
//! by a build that knows identities). While that file says a store existed, a database file
//! that is missing, empty (0 bytes), without tables, or holding another store's id is refused
//! ([`StoreError::Lost`]) and left exactly as it is.

mod a2a;
mod agents;
mod approvals;
mod attention;
mod audit;
mod clarifications;
mod dispatch;
mod events;
mod identity;
mod kb;
mod locks;
mod memory;
mod mesh_calls;
mod migrations;
mod models;
pub mod pg;
mod plans;
mod research;
mod sessions;
pub mod sql;
mod tasks;
mod upstream_pins;

pub use a2a::{A2aMessage, QueueStat};
pub use agents::{
    Agent, AgentState, NewAgent, RESERVED_AGENT_IDS, Retired, check_agent_id, check_not_reserved,
};
pub use approvals::{AllowEntry, Approval, ApprovalState};
pub use attention::{AttentionEvent, CostRow, ToolSummary};
pub use audit::AuditRecord;
pub use clarifications::{Clarification, ClarificationState};
pub use dispatch::Assignment;
pub use events::{Event, EventFilter, Subject};
pub use kb::{KbDocument, KbSummary};
pub use locks::{Claim, FileLock, LockConflict, normalize_path};
pub use memory::Memory;
pub use mesh_calls::{CallDirection, MeshCall};
pub use models::{Benchmark, ChatMessage, Spend};
pub use plans::{Handoff, NewStep, Plan, PlanStep};
pub use research::{Draft, DraftApproval, NewClaim, ResearchClaim, ResearchRun, Submission};
pub use sessions::{FileSessions, Session, SessionMessage, SessionStatus, SessionStore};
pub use tasks::{NewTask, Task, TaskEvent, TaskMove, TaskState};
pub use upstream_pins::UpstreamPin;

use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// A store error, naming the database file.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite failed on the workspace's database file.
    #[error("journey store {path}: {source}")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// The directory that holds the database could not be created.
    #[error("journey store {path}: cannot create directory: {source}")]
    Dir {
        /// The directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The database was migrated by a newer build; this one refuses to touch it.
    #[error(
        "journey store {path}: schema version {found} is newer than this build knows ({known})"
    )]
    TooNew {
        /// The database file.
        path: PathBuf,
        /// The schema version the database has.
        found: i64,
        /// The newest schema version this build knows.
        known: i64,
    },
    /// The record the call names does not exist (the message names it).
    #[error("{0}")]
    NotFound(String),
    /// The call clashes with the record's current state (a state change not allowed from
    /// there, a duplicate, a lock held by another); the message says which.
    #[error("{0}")]
    Conflict(String),
    /// Input that no state of the store would accept (an empty title, a path out of the
    /// workspace, a plan with a cycle).
    #[error("{0}")]
    Invalid(String),
    /// The file-backed session store (used when the database is down) failed.
    #[error("session files {path}: {message}")]
    Files {
        /// The sessions directory or file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The identity file says a store existed, but the database file no longer holds it; the
    /// file is left untouched.
    #[error(
        "journey store {path} has lost its data: {why}, but {id_path} records that store {id} existed there. The file is left as it is: restore it from a backup, or delete {id_path} to accept the file as it is (a missing or empty file then becomes a new, empty store)"
    )]
    Lost {
        /// The database file.
        path: PathBuf,
        /// The identity file beside it (`journey.db.id`).
        id_path: PathBuf,
        /// The store id the identity file records.
        id: String,
        /// What is wrong with the database file: missing, empty, without tables, or another
        /// store's.
        why: String,
    },
    /// The identity file (`journey.db.id`) cannot be read or written, or holds no store id.
    #[error("journey store identity {path}: {message}")]
    Identity {
        /// The identity file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The PostgreSQL store (its URL without the password).
    #[error("journey store {url}: {message}")]
    Postgres {
        /// The database URL, without the password.
        url: String,
        /// What went wrong (connecting, migrating, or a call served on SQLite only).
        message: String,
    },
    /// A statement failed other than in SQLite itself (on PostgreSQL, or reading a column).
    #[error("journey store {store}: {message}")]
    Query {
        /// The store's location: the database file, or the PostgreSQL URL.
        store: String,
        /// The error, with PostgreSQL's SQLSTATE code when it gave one.
        message: String,
    },
}

/// The journey store of one workspace: its SQLite file, or a PostgreSQL database several
/// replicas share (`Store::open_postgres`). The repositories written in the dialect both read
/// ([`sql`]) run on either; the knowledge repositories have one implementation per store
/// (`pg`), and the few calls only SQLite serves yet say so on PostgreSQL.
pub struct Store {
    backend: Backend,
    /// Operations in progress (or waiting) that hold the connection for long: full scans and
    /// batch writes. While there is one, [`Store::busy`] says so.
    long_ops: std::sync::atomic::AtomicUsize,
}

enum Backend {
    Lite {
        path: PathBuf,
        conn: Mutex<Connection>,
    },
    Pg(std::sync::Arc<pg::PgStore>),
}

/// Marks a long operation for its lifetime.
struct LongOp<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for LongOp<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("at", &self.location())
            .finish()
    }
}

/// The highest schema version this build knows.
pub fn migrations_latest() -> i64 {
    migrations::latest()
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// What [`inspect`] found in a store file, without changing it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreHealth {
    /// The file's schema version (`PRAGMA user_version`).
    pub schema_version: i64,
    /// The highest version this build knows; a lower file is migrated at the next open.
    pub latest: i64,
    /// Tables in the file.
    pub tables: i64,
}

/// Creates the store's file private to the user (0600; SQLite's WAL and shared-memory files take
/// its mode) unless something is at `path` already. Exclusive creation never follows a symlink,
/// and the open after it refuses one (`SQLITE_OPEN_NOFOLLOW`).
fn create_private(path: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            match std::fs::symlink_metadata(path) {
                Ok(m) if m.file_type().is_symlink() => Err(StoreError::Dir {
                    path: path.to_owned(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::PermissionDenied,
                        "the store is a symlink, and the store is never opened through one",
                    ),
                }),
                _ => Ok(()),
            }
        }
        Err(source) => Err(StoreError::Dir {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Opens the store at `path` read-only (never creating it or migrating it) and reports its schema
/// version: for `vox doctor`, which must not change what it looks at.
pub fn inspect(path: &Path) -> Result<StoreHealth, StoreError> {
    use rusqlite::OpenFlags;
    let err = |source| StoreError::Sqlite {
        path: path.to_owned(),
        source,
    };
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(err)?;
    conn.busy_timeout(std::time::Duration::from_secs(2))
        .map_err(err)?;
    let schema_version = migrations::current_version(&conn).map_err(err)?;
    let tables = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
            [],
            |r| r.get(0),
        )
        .map_err(err)?;
    Ok(StoreHealth {
        schema_version,
        latest: migrations::latest(),
        tables,
    })
}

impl Store {
    /// Opens (creating if needed) the store at `path` and applies pending migrations. A store
    /// that existed and lost its data is refused ([`Self::check_not_lost`]) before the file is
    /// opened, so it is never overwritten.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Dir {
                path: dir.to_owned(),
                source,
            })?;
        }
        let recorded = Self::check_not_lost(path)?;
        let err = |source| StoreError::Sqlite {
            path: path.to_owned(),
            source,
        };
        create_private(path)?;
        let mut conn = Connection::open_with_flags(
            path,
            rusqlite::OpenFlags::default() | rusqlite::OpenFlags::SQLITE_OPEN_NOFOLLOW,
        )
        .map_err(err)?;
        // WAL lets readers in other processes proceed while we write; NORMAL sync is durable
        // across process crashes (the WAL is fsynced at checkpoints) and much faster than FULL.
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(err)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(err)?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(err)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(err)?;
        migrations::apply(&mut conn, path)?;
        let id = identity::stored_id(&conn)
            .map_err(err)?
            .ok_or_else(|| StoreError::Identity {
                path: path.to_owned(),
                message: "the database has no store id after migrations".into(),
            })?;
        match recorded {
            Some(r) if r != id => {
                return Err(identity::lost(
                    path,
                    r,
                    format!("it holds another store ({id})"),
                ));
            }
            Some(_) => {}
            None => identity::record(path, &id)?,
        }
        Ok(Store {
            backend: Backend::Lite {
                path: path.to_owned(),
                conn: Mutex::new(conn),
            },
            long_ops: Default::default(),
        })
    }

    /// Connects to the PostgreSQL database at `url`, applying pending migrations.
    pub fn open_postgres(url: &str) -> Result<Self, StoreError> {
        Ok(Store {
            backend: Backend::Pg(std::sync::Arc::new(pg::PgStore::open(url)?)),
            long_ops: Default::default(),
        })
    }

    /// The database file (`None` on PostgreSQL).
    pub fn path(&self) -> Option<&Path> {
        match &self.backend {
            Backend::Lite { path, .. } => Some(path),
            Backend::Pg(_) => None,
        }
    }

    /// Where the store is: its file, or its URL without the password.
    pub fn location(&self) -> String {
        match &self.backend {
            Backend::Lite { path, .. } => path.display().to_string(),
            Backend::Pg(p) => p.url().to_owned(),
        }
    }

    /// `sqlite` or `postgres`.
    pub fn backend_name(&self) -> &'static str {
        match &self.backend {
            Backend::Lite { .. } => "sqlite",
            Backend::Pg(_) => "postgres",
        }
    }

    /// The PostgreSQL store, when that is where it is.
    pub fn postgres(&self) -> Option<&std::sync::Arc<pg::PgStore>> {
        match &self.backend {
            Backend::Pg(p) => Some(p),
            Backend::Lite { .. } => None,
        }
    }

    /// The identity file of the store at `db`: `<file name>.id` beside it.
    pub fn identity_path(db: &Path) -> PathBuf {
        identity::path(db)
    }

    /// Refuses a store that existed and lost its data, without creating or changing anything:
    /// when the identity file beside `path` records a store, the database file must exist,
    /// have tables, and hold that store's id. Returns the recorded id, if any.
    pub fn check_not_lost(path: &Path) -> Result<Option<String>, StoreError> {
        identity::check(path)
    }

    /// The store's id (its identity, also the embedded mesh's node id).
    pub fn store_id(&self) -> Result<Option<String>, StoreError> {
        if let Some(p) = self.postgres() {
            return p.store_id();
        }
        let c = self.lite()?;
        identity::stored_id(&c).map_err(|e| self.err(e))
    }

    /// Every table and its columns, in name order (as `pg::PgStore::columns`, to compare the
    /// two backends' schemas).
    pub fn columns(&self) -> Result<Vec<(String, Vec<String>)>, StoreError> {
        if let Some(p) = self.postgres() {
            return p.columns();
        }
        let c = self.lite()?;
        let mut stmt = c
            .prepare(
                "SELECT m.name, p.name FROM sqlite_master m, pragma_table_info(m.name) p
                 WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'
                 ORDER BY m.name, p.name",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
            .map_err(|e| self.err(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))?;
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for (t, col) in rows {
            match out.last_mut() {
                Some((last, cols)) if *last == t => cols.push(col),
                _ => out.push((t, vec![col])),
            }
        }
        Ok(out)
    }

    /// The schema version after migrations.
    pub fn schema_version(&self) -> Result<i64, StoreError> {
        if let Some(p) = self.postgres() {
            return p.schema_version();
        }
        let c = self.lite()?;
        migrations::current_version(&c).map_err(|e| self.err(e))
    }

    /// Whether a long operation (a full scan, a batch write) holds or waits for the
    /// connection: a caller that must not wait long (a point read on an async worker) checks
    /// this first. Point reads and writes hold it for microseconds and do not count.
    /// On PostgreSQL always (every call is a network round trip).
    pub fn busy(&self) -> bool {
        self.postgres().is_some() || self.long_ops.load(std::sync::atomic::Ordering::SeqCst) > 0
    }

    /// Call at the start of a long operation, before taking the connection.
    fn long(&self) -> LongOp<'_> {
        self.long_ops
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        LongOp(&self.long_ops)
    }

    /// A connection of either store (SQLite's one, or one from the PostgreSQL pool).
    fn conn(&self) -> Result<sql::Guard<'_>, StoreError> {
        match &self.backend {
            Backend::Lite { conn, .. } => Ok(sql::Guard::lite(lock(conn))),
            Backend::Pg(p) => Ok(sql::Guard::pg(p, sql::blocking(|| p.take())?)),
        }
    }

    /// The SQLite connection, for the repositories only SQLite serves (their PostgreSQL
    /// implementations are in `pg`); on PostgreSQL an error saying so.
    fn lite(&self) -> Result<MutexGuard<'_, Connection>, StoreError> {
        match &self.backend {
            Backend::Lite { conn, .. } => Ok(lock(conn)),
            Backend::Pg(p) => Err(StoreError::Postgres {
                url: p.url().to_owned(),
                message: "this call is served on SQLite only".into(),
            }),
        }
    }

    fn err(&self, e: impl Into<sql::Error>) -> StoreError {
        metrics::counter!("vox_store_errors_total", "backend" => self.backend_name()).increment(1);
        match (e.into(), &self.backend) {
            (sql::Error::Sqlite(source), Backend::Lite { path, .. }) => StoreError::Sqlite {
                path: path.clone(),
                source,
            },
            (e, _) => StoreError::Query {
                store: self.location(),
                message: e.to_string(),
            },
        }
    }
}

fn lock(conn: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    // A panic while holding the lock cannot leave SQLite inconsistent (transactions roll
    // back on drop), so a poisoned lock is safe to reuse.
    conn.lock().unwrap_or_else(|p| p.into_inner())
}
