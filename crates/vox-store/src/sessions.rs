//! Agent sessions with message logs, behind one trait with two backends: the SQLite store, and
//! JSON files (the fallback `dev` uses when the store cannot be opened).

use crate::{Store, StoreError, now_ms};
use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Whether a session still accepts messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    /// It accepts messages.
    Open,
    /// It was closed (with an optional summary) and accepts no more messages.
    Closed,
}

impl SessionStatus {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SessionStatus::Open => "open",
            SessionStatus::Closed => "closed",
        }
    }
    pub(crate) fn parse(s: &str) -> Self {
        if s == "closed" {
            SessionStatus::Closed
        } else {
            SessionStatus::Open
        }
    }
}

/// A session's header.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Session {
    /// Its id, `s_` and 16 hex digits.
    pub id: String,
    /// The title given at creation.
    pub title: String,
    /// Free-form JSON the creator attached.
    pub metadata: Value,
    /// Whether it still accepts messages.
    pub status: SessionStatus,
    /// The summary given when it was closed.
    pub summary: Option<String>,
    /// When it was created, in ms since the Unix epoch.
    pub created_at: i64,
    /// When it was closed, in ms since the Unix epoch.
    pub closed_at: Option<i64>,
    /// How many messages it holds.
    pub message_count: i64,
}

impl Session {
    /// A new open session with a fresh id.
    pub(crate) fn open(title: &str, metadata: &Value) -> Self {
        Session {
            id: new_session_id(),
            title: title.to_owned(),
            metadata: metadata.clone(),
            status: SessionStatus::Open,
            summary: None,
            created_at: now_ms(),
            closed_at: None,
            message_count: 0,
        }
    }
}

/// One message of a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionMessage {
    /// The message's 1-based position in its session.
    pub seq: i64,
    /// Who spoke (e.g. `user`, `assistant`), as the caller gave it.
    pub role: String,
    /// The message text.
    pub content: String,
    /// When it was appended, in ms since the Unix epoch.
    pub created_at: i64,
}

/// Session persistence, whichever backend holds it.
pub trait SessionStore: Send + Sync {
    /// `"sqlite"` or `"files"`.
    fn backend(&self) -> &'static str;
    /// Creates an open session titled `title` with `metadata`.
    fn create(&self, title: &str, metadata: &Value) -> Result<Session, StoreError>;
    /// The session and its last `last` messages.
    fn get(
        &self,
        id: &str,
        last: usize,
    ) -> Result<Option<(Session, Vec<SessionMessage>)>, StoreError>;
    /// Newest first.
    fn list(&self, status: Option<SessionStatus>, limit: usize)
    -> Result<Vec<Session>, StoreError>;
    /// Appends a message to open session `id`; a closed one is a conflict.
    fn append(&self, id: &str, role: &str, content: &str) -> Result<SessionMessage, StoreError>;
    /// Closes session `id` with an optional summary; closing it again is a conflict.
    fn close(&self, id: &str, summary: Option<&str>) -> Result<Session, StoreError>;
}

impl<T: SessionStore + ?Sized> SessionStore for std::sync::Arc<T> {
    fn backend(&self) -> &'static str {
        (**self).backend()
    }
    fn create(&self, title: &str, metadata: &Value) -> Result<Session, StoreError> {
        (**self).create(title, metadata)
    }
    fn get(
        &self,
        id: &str,
        last: usize,
    ) -> Result<Option<(Session, Vec<SessionMessage>)>, StoreError> {
        (**self).get(id, last)
    }
    fn list(
        &self,
        status: Option<SessionStatus>,
        limit: usize,
    ) -> Result<Vec<Session>, StoreError> {
        (**self).list(status, limit)
    }
    fn append(&self, id: &str, role: &str, content: &str) -> Result<SessionMessage, StoreError> {
        (**self).append(id, role, content)
    }
    fn close(&self, id: &str, summary: Option<&str>) -> Result<Session, StoreError> {
        (**self).close(id, summary)
    }
}

/// A fresh session id: `s_` and 16 hex digits from the process's random hasher keys and time.
pub fn new_session_id() -> String {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.write_u32(std::process::id());
    format!("s_{:016x}", h.finish())
}

pub(crate) fn not_found(id: &str) -> StoreError {
    StoreError::NotFound(format!("no session with id {id}"))
}

pub(crate) fn closed(id: &str) -> StoreError {
    StoreError::Conflict(format!("session {id} is closed"))
}

const SESSION_COLUMNS: &str = "id, title, metadata, status, summary, created_at, closed_at,
    (SELECT COUNT(*) FROM session_messages m WHERE m.session_id = sessions.id)";

fn row_to_session(r: &rusqlite::Row<'_>) -> rusqlite::Result<Session> {
    let metadata: String = r.get(2)?;
    let status: String = r.get(3)?;
    Ok(Session {
        id: r.get(0)?,
        title: r.get(1)?,
        metadata: serde_json::from_str(&metadata).unwrap_or(Value::Null),
        status: SessionStatus::parse(&status),
        summary: r.get(4)?,
        created_at: r.get(5)?,
        closed_at: r.get(6)?,
        message_count: r.get(7)?,
    })
}

impl Store {
    fn session_row(
        &self,
        c: &rusqlite::Connection,
        id: &str,
    ) -> Result<Option<Session>, StoreError> {
        c.query_row(
            &format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?1"),
            [id],
            row_to_session,
        )
        .optional()
        .map_err(|e| self.err(e))
    }
}

impl SessionStore for Store {
    fn backend(&self) -> &'static str {
        match self.postgres() {
            Some(p) => p.backend(),
            None => "sqlite",
        }
    }

    fn create(&self, title: &str, metadata: &Value) -> Result<Session, StoreError> {
        if let Some(p) = self.postgres() {
            return SessionStore::create(&**p, title, metadata);
        }
        let s = Session::open(title, metadata);
        self.lite()?
            .execute(
                "INSERT INTO sessions (id, title, metadata, status, created_at) VALUES (?1, ?2, ?3, 'open', ?4)",
                params![s.id, s.title, s.metadata.to_string(), s.created_at],
            )
            .map_err(|e| self.err(e))?;
        Ok(s)
    }

    fn get(
        &self,
        id: &str,
        last: usize,
    ) -> Result<Option<(Session, Vec<SessionMessage>)>, StoreError> {
        if let Some(p) = self.postgres() {
            return SessionStore::get(&**p, id, last);
        }
        let c = self.lite()?;
        let Some(session) = self.session_row(&c, id)? else {
            return Ok(None);
        };
        let mut stmt = c
            .prepare(
                "SELECT seq, role, content, created_at FROM
                   (SELECT * FROM session_messages WHERE session_id = ?1 ORDER BY seq DESC LIMIT ?2)
                 ORDER BY seq",
            )
            .map_err(|e| self.err(e))?;
        let msgs = stmt
            .query_map(params![id, last as i64], |r| {
                Ok(SessionMessage {
                    seq: r.get(0)?,
                    role: r.get(1)?,
                    content: r.get(2)?,
                    created_at: r.get(3)?,
                })
            })
            .map_err(|e| self.err(e))?
            .collect::<Result<_, _>>()
            .map_err(|e| self.err(e))?;
        Ok(Some((session, msgs)))
    }

    fn list(
        &self,
        status: Option<SessionStatus>,
        limit: usize,
    ) -> Result<Vec<Session>, StoreError> {
        if let Some(p) = self.postgres() {
            return SessionStore::list(&**p, status, limit);
        }
        let c = self.lite()?;
        let mut stmt = c
            .prepare(&format!(
                "SELECT {SESSION_COLUMNS} FROM sessions WHERE (?1 IS NULL OR status = ?1)
                 ORDER BY created_at DESC, id LIMIT ?2"
            ))
            .map_err(|e| self.err(e))?;
        stmt.query_map(
            params![status.map(|s| s.as_str()), limit as i64],
            row_to_session,
        )
        .map_err(|e| self.err(e))?
        .collect::<Result<_, _>>()
        .map_err(|e| self.err(e))
    }

    fn append(&self, id: &str, role: &str, content: &str) -> Result<SessionMessage, StoreError> {
        if let Some(p) = self.postgres() {
            return SessionStore::append(&**p, id, role, content);
        }
        let mut c = self.lite()?;
        let tx = c.transaction().map_err(|e| self.err(e))?;
        let status: Option<String> = tx
            .query_row("SELECT status FROM sessions WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .optional()
            .map_err(|e| self.err(e))?;
        match status.as_deref() {
            None => return Err(not_found(id)),
            Some("closed") => return Err(closed(id)),
            _ => {}
        }
        let seq: i64 = tx
            .query_row(
                "SELECT COALESCE(MAX(seq), 0) + 1 FROM session_messages WHERE session_id = ?1",
                [id],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))?;
        let msg = SessionMessage {
            seq,
            role: role.to_owned(),
            content: content.to_owned(),
            created_at: now_ms(),
        };
        tx.execute(
            "INSERT INTO session_messages (session_id, seq, role, content, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![id, msg.seq, msg.role, msg.content, msg.created_at],
        )
        .map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(msg)
    }

    fn close(&self, id: &str, summary: Option<&str>) -> Result<Session, StoreError> {
        if let Some(p) = self.postgres() {
            return SessionStore::close(&**p, id, summary);
        }
        let c = self.lite()?;
        let n = c
            .execute(
                "UPDATE sessions SET status = 'closed', summary = ?2, closed_at = ?3 WHERE id = ?1 AND status = 'open'",
                params![id, summary, now_ms()],
            )
            .map_err(|e| self.err(e))?;
        let s = self.session_row(&c, id)?.ok_or_else(|| not_found(id))?;
        if n == 0 {
            return Err(closed(id));
        }
        Ok(s)
    }
}

/// Sessions as one JSON file each under a directory (the `dev` fallback when the store is down).
pub struct FileSessions {
    dir: PathBuf,
    lock: Mutex<()>,
}

#[derive(Serialize, Deserialize)]
struct SessionFile {
    session: Session,
    messages: Vec<SessionMessage>,
}

impl FileSessions {
    /// Uses (creating) `dir`.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::Files {
            path: dir.to_owned(),
            message: e.to_string(),
        })?;
        Ok(FileSessions {
            dir: dir.to_owned(),
            lock: Mutex::new(()),
        })
    }

    fn file(&self, id: &str) -> Option<PathBuf> {
        // Ids are ours (`s_` + hex); anything else cannot name a file here.
        let ok = id.len() <= 40
            && id.starts_with("s_")
            && id[2..].bytes().all(|b| b.is_ascii_hexdigit());
        ok.then(|| self.dir.join(format!("{id}.json")))
    }

    fn files_err(&self, path: &Path, e: impl std::fmt::Display) -> StoreError {
        StoreError::Files {
            path: path.to_owned(),
            message: e.to_string(),
        }
    }

    fn read(&self, id: &str) -> Result<Option<SessionFile>, StoreError> {
        let Some(path) = self.file(id) else {
            return Ok(None);
        };
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| self.files_err(&path, e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.files_err(&path, e)),
        }
    }

    /// Write-then-rename with fsync, so a crash leaves the old or the new file, never half.
    fn write(&self, f: &SessionFile) -> Result<(), StoreError> {
        use std::io::Write;
        let path = self
            .file(&f.session.id)
            .ok_or_else(|| not_found(&f.session.id))?;
        let tmp = path.with_extension("json.tmp");
        let bytes = serde_json::to_vec(f).map_err(|e| self.files_err(&path, e))?;
        let mut out = std::fs::File::create(&tmp).map_err(|e| self.files_err(&tmp, e))?;
        out.write_all(&bytes)
            .and_then(|()| out.sync_all())
            .map_err(|e| self.files_err(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| self.files_err(&path, e))
    }
}

impl SessionStore for FileSessions {
    fn backend(&self) -> &'static str {
        "files"
    }

    fn create(&self, title: &str, metadata: &Value) -> Result<Session, StoreError> {
        let _g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let session = Session::open(title, metadata);
        self.write(&SessionFile {
            session: session.clone(),
            messages: vec![],
        })?;
        Ok(session)
    }

    fn get(
        &self,
        id: &str,
        last: usize,
    ) -> Result<Option<(Session, Vec<SessionMessage>)>, StoreError> {
        Ok(self.read(id)?.map(|f| {
            let skip = f.messages.len().saturating_sub(last);
            (f.session, f.messages.into_iter().skip(skip).collect())
        }))
    }

    fn list(
        &self,
        status: Option<SessionStatus>,
        limit: usize,
    ) -> Result<Vec<Session>, StoreError> {
        let entries = std::fs::read_dir(&self.dir).map_err(|e| self.files_err(&self.dir, e))?;
        let mut out = Vec::new();
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(id) = name.strip_suffix(".json")
                && let Some(f) = self.read(id)?
                && status.is_none_or(|s| s == f.session.status)
            {
                out.push(f.session);
            }
        }
        out.sort_by(|a, b| {
            b.created_at
                .cmp(&a.created_at)
                .then_with(|| a.id.cmp(&b.id))
        });
        out.truncate(limit);
        Ok(out)
    }

    fn append(&self, id: &str, role: &str, content: &str) -> Result<SessionMessage, StoreError> {
        let _g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let mut f = self.read(id)?.ok_or_else(|| not_found(id))?;
        if f.session.status == SessionStatus::Closed {
            return Err(closed(id));
        }
        let msg = SessionMessage {
            seq: f.messages.len() as i64 + 1,
            role: role.to_owned(),
            content: content.to_owned(),
            created_at: now_ms(),
        };
        f.messages.push(msg.clone());
        f.session.message_count = f.messages.len() as i64;
        self.write(&f)?;
        Ok(msg)
    }

    fn close(&self, id: &str, summary: Option<&str>) -> Result<Session, StoreError> {
        let _g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let mut f = self.read(id)?.ok_or_else(|| not_found(id))?;
        if f.session.status == SessionStatus::Closed {
            return Err(closed(id));
        }
        f.session.status = SessionStatus::Closed;
        f.session.summary = summary.map(str::to_owned);
        f.session.closed_at = Some(now_ms());
        self.write(&f)?;
        Ok(f.session)
    }
}
