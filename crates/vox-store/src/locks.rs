//! File locks with leases. A lock is live while its lease runs: a claim starts it, the holder's
//! heartbeats renew it, and once it lapses (the agent stopped beating) the next claim takes the
//! file. A claim of a file another agent holds live is refused and recorded as a conflict.

use crate::events::{NewEvent, Subject, record};
use crate::sql::{OptionalExtension, Sql, SqlExt, params};
use crate::{Store, StoreError, now_ms};
use serde::Serialize;

/// Longest path (bytes), and the lease bounds (milliseconds).
pub const MAX_LOCK_PATH: usize = 1024;
pub const MIN_LEASE_MS: i64 = 1_000;
pub const MAX_LEASE_MS: i64 = 24 * 3600 * 1000;

/// A file lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct FileLock {
    /// Workspace-relative, normalized (`a/b.rs`).
    pub path: String,
    /// The agent that holds it.
    pub agent: String,
    /// The task it was claimed for (released when that task ends).
    pub task_id: Option<i64>,
    /// How long the lease runs after a claim or a heartbeat, in ms (1 s to 24 h).
    pub lease_ms: i64,
    /// When it was claimed, in ms since the Unix epoch.
    pub claimed_at: i64,
    /// When the lease lapses unless the holder beats again.
    pub expires_at: i64,
}

/// What a claim got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Claim {
    /// The file is now the caller's (`took_over` names the agent whose lease had lapsed).
    Granted {
        /// The lock the caller now holds.
        lock: FileLock,
        /// The agent whose lapsed lease the caller took over, if any.
        #[serde(skip_serializing_if = "Option::is_none")]
        took_over: Option<String>,
    },
    /// The caller held it already; the lease runs from now.
    Renewed {
        /// The lock, its lease running from now.
        lock: FileLock,
    },
    /// Another agent holds it; the conflict is recorded.
    Held {
        /// The other agent's live lock.
        holder: FileLock,
        /// The id of the recorded [`LockConflict`].
        conflict_id: i64,
    },
}

/// A claim refused because another agent held the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct LockConflict {
    /// Row id.
    pub id: i64,
    /// The file, workspace-relative and normalized.
    pub path: String,
    /// The agent that held it.
    pub holder: String,
    /// The agent whose claim was refused.
    pub requester: String,
    /// The task the refused claim was for, if any.
    pub task_id: Option<i64>,
    /// When the claim was refused, in ms since the Unix epoch.
    pub ts: i64,
    /// Whether the holder still holds the file live.
    pub active: bool,
}

/// Normalizes a workspace-relative path: no absolute path, no `..`, no empty parts.
pub fn normalize_path(path: &str) -> Result<String, StoreError> {
    let bad = |why: &str| Err(StoreError::Invalid(format!("file path {path:?}: {why}")));
    if path.len() > MAX_LOCK_PATH {
        return bad(&format!("longer than {MAX_LOCK_PATH} bytes"));
    }
    if path.starts_with('/') || path.contains('\\') || path.contains('\0') {
        return bad("must be relative to the workspace, with '/' separators");
    }
    let mut parts = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => return bad("must not contain '..'"),
            p => parts.push(p),
        }
    }
    if parts.is_empty() {
        return bad("names no file");
    }
    Ok(parts.join("/"))
}

const COLUMNS: &str = "path, agent, task_id, lease_ms, claimed_at, expires_at";

fn row_to_lock(r: &crate::sql::Row) -> crate::sql::Result<FileLock> {
    Ok(FileLock {
        path: r.get(0)?,
        agent: r.get(1)?,
        task_id: r.get(2)?,
        lease_ms: r.get(3)?,
        claimed_at: r.get(4)?,
        expires_at: r.get(5)?,
    })
}

fn lock_event(
    c: &dyn Sql,
    path: &str,
    kind: &str,
    by: &str,
    detail: Option<&str>,
    now: i64,
) -> crate::sql::Result<()> {
    record(
        c,
        NewEvent {
            subject: Subject::Lock,
            subject_id: path,
            kind,
            from_state: None,
            agent: Some(by),
            detail,
        },
        now,
    )
}

fn lock_in(c: &dyn Sql, path: &str) -> crate::sql::Result<Option<FileLock>> {
    c.prepare_cached(&format!("SELECT {COLUMNS} FROM file_locks WHERE path = ?1"))?
        .query_row([path], row_to_lock)
        .optional()
}

/// Releases every lock `agent` holds (it retired), each an event.
pub(crate) fn release_all_in(
    c: &dyn Sql,
    agent: &str,
    by: &str,
    reason: &str,
    now: i64,
) -> crate::sql::Result<Vec<String>> {
    let paths: Vec<String> = c
        .prepare_cached("SELECT path FROM file_locks WHERE agent = ?1 ORDER BY path")?
        .query_map([agent], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    for p in &paths {
        c.execute("DELETE FROM file_locks WHERE path = ?1", [p])?;
        lock_event(c, p, "released", by, Some(reason), now)?;
    }
    Ok(paths)
}

/// Refuses an agent that does not exist or retired (`sql` names the store in a database error).
fn check_agent_live(
    c: &dyn Sql,
    agent: &str,
    sql: impl Fn(crate::sql::Error) -> StoreError,
) -> Result<(), StoreError> {
    let state: Option<String> = c
        .query_row("SELECT state FROM agents WHERE id = ?1", [agent], |r| {
            r.get(0)
        })
        .optional()
        .map_err(sql)?;
    match state.as_deref() {
        None => Err(StoreError::NotFound(format!("no agent {agent}"))),
        Some("retired") => Err(StoreError::Conflict(format!(
            "agent {agent} is retired: it holds no files"
        ))),
        Some(_) => Ok(()),
    }
}

impl Store {
    /// `agent` claims `path` for `lease_ms` (optionally for a task).
    pub fn lock_claim(
        &self,
        path: &str,
        agent: &str,
        task_id: Option<i64>,
        lease_ms: i64,
    ) -> Result<Claim, StoreError> {
        let path = normalize_path(path)?;
        if !(MIN_LEASE_MS..=MAX_LEASE_MS).contains(&lease_ms) {
            return Err(StoreError::Invalid(format!(
                "a lease is {} to {} seconds, not {} ms",
                MIN_LEASE_MS / 1000,
                MAX_LEASE_MS / 1000,
                lease_ms
            )));
        }
        let now = now_ms();
        let mut c = self.conn()?;
        let tx = c.transaction().map_err(|e| self.err(e))?;
        check_agent_live(&tx, agent, |e| self.err(e))?;
        if let Some(t) = task_id {
            let found: Option<i64> = tx
                .query_row("SELECT id FROM tasks WHERE id = ?1", [t], |r| r.get(0))
                .optional()
                .map_err(|e| self.err(e))?;
            if found.is_none() {
                return Err(StoreError::NotFound(format!("no task {t}")));
            }
        }
        let current = lock_in(&tx, &path).map_err(|e| self.err(e))?;
        let outcome = match current {
            Some(l) if l.agent != agent && l.expires_at > now => {
                tx.execute(
                    "INSERT INTO lock_conflicts (path, holder, requester, task_id, ts) VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![path, l.agent, agent, task_id, now],
                )
                .map_err(|e| self.err(e))?;
                let conflict_id = tx.last_insert_rowid().map_err(|e| self.err(e))?;
                lock_event(
                    &tx,
                    &path,
                    "conflict",
                    agent,
                    Some(&format!("held by {}", l.agent)),
                    now,
                )
                .map_err(|e| self.err(e))?;
                Claim::Held {
                    holder: l,
                    conflict_id,
                }
            }
            current => {
                let renewing = current.as_ref().is_some_and(|l| l.agent == agent);
                let took_over = current.filter(|l| l.agent != agent).map(|l| l.agent);
                tx.execute(
                    "INSERT INTO file_locks (path, agent, task_id, lease_ms, claimed_at, expires_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?5 + ?4)
                     ON CONFLICT (path) DO UPDATE SET agent = ?2,
                         task_id = coalesce(?3, file_locks.task_id),
                         lease_ms = ?4, expires_at = ?5 + ?4,
                         claimed_at = CASE WHEN file_locks.agent = ?2 THEN file_locks.claimed_at ELSE ?5 END",
                    params![path, agent, task_id, lease_ms, now],
                )
                .map_err(|e| self.err(e))?;
                let detail = took_over
                    .as_ref()
                    .map(|a| format!("lease of {a} had lapsed"));
                let kind = if renewing { "renewed" } else { "claimed" };
                lock_event(&tx, &path, kind, agent, detail.as_deref(), now)
                    .map_err(|e| self.err(e))?;
                let lock = lock_in(&tx, &path)
                    .map_err(|e| self.err(e))?
                    .ok_or_else(|| StoreError::NotFound(format!("no lock on {path}")))?;
                if renewing {
                    Claim::Renewed { lock }
                } else {
                    Claim::Granted { lock, took_over }
                }
            }
        };
        tx.commit().map_err(|e| self.err(e))?;
        Ok(outcome)
    }

    /// `agent` releases `path`; false when it did not hold it.
    pub fn lock_release(&self, path: &str, agent: &str) -> Result<bool, StoreError> {
        let path = normalize_path(path)?;
        let now = now_ms();
        let mut c = self.conn()?;
        let tx = c.transaction().map_err(|e| self.err(e))?;
        let n = tx
            .execute(
                "DELETE FROM file_locks WHERE path = ?1 AND agent = ?2",
                params![path, agent],
            )
            .map_err(|e| self.err(e))?;
        if n > 0 {
            lock_event(&tx, &path, "released", agent, None, now).map_err(|e| self.err(e))?;
        }
        tx.commit().map_err(|e| self.err(e))?;
        Ok(n > 0)
    }

    /// Moves `path` from `from` (who must hold it live) to `to` (an agent not retired).
    pub fn lock_transfer(&self, path: &str, from: &str, to: &str) -> Result<FileLock, StoreError> {
        let path = normalize_path(path)?;
        let now = now_ms();
        let mut c = self.conn()?;
        let tx = c.transaction().map_err(|e| self.err(e))?;
        check_agent_live(&tx, to, |e| self.err(e))?;
        match lock_in(&tx, &path).map_err(|e| self.err(e))? {
            Some(l) if l.agent == from && l.expires_at > now => {}
            Some(l) if l.expires_at > now => {
                return Err(StoreError::Conflict(format!(
                    "{path} is held by {}, not by {from}",
                    l.agent
                )));
            }
            _ => {
                return Err(StoreError::Conflict(format!(
                    "{from} does not hold {path} (no live lock)"
                )));
            }
        }
        tx.execute(
            "UPDATE file_locks SET agent = ?2, claimed_at = ?3, expires_at = ?3 + lease_ms WHERE path = ?1",
            params![path, to, now],
        )
        .map_err(|e| self.err(e))?;
        lock_event(
            &tx,
            &path,
            "transferred",
            from,
            Some(&format!("to {to}")),
            now,
        )
        .map_err(|e| self.err(e))?;
        let lock = lock_in(&tx, &path)
            .map_err(|e| self.err(e))?
            .ok_or_else(|| StoreError::NotFound(format!("no lock on {path}")))?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(lock)
    }

    /// The live lock on `path`, if any.
    pub fn lock_owner(&self, path: &str) -> Result<Option<FileLock>, StoreError> {
        let path = normalize_path(path)?;
        let l = lock_in(&self.conn()?, &path).map_err(|e| self.err(e))?;
        Ok(l.filter(|l| l.expires_at > now_ms()))
    }

    /// Live locks, of one agent or of all, in path order.
    pub fn locks(&self, agent: Option<&str>, limit: usize) -> Result<Vec<FileLock>, StoreError> {
        let c = self.conn()?;
        let mut stmt = c
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM file_locks WHERE expires_at > ?1 AND (?2 IS NULL OR agent = ?2)
                 ORDER BY path LIMIT ?3"
            ))
            .map_err(|e| self.err(e))?;
        stmt.query_map(params![now_ms(), agent, limit as i64], row_to_lock)
            .map_err(|e| self.err(e))?
            .collect::<Result<_, _>>()
            .map_err(|e| self.err(e))
    }

    /// Conflicts, newest first: only those whose holder still holds the file, unless `all`.
    pub fn lock_conflicts(&self, all: bool, limit: usize) -> Result<Vec<LockConflict>, StoreError> {
        let c = self.conn()?;
        let mut stmt = c
            .prepare_cached(
                "SELECT * FROM (
                     SELECT c.id, c.path, c.holder, c.requester, c.task_id, c.ts,
                            EXISTS (SELECT 1 FROM file_locks l WHERE l.path = c.path
                                      AND l.agent = c.holder AND l.expires_at > ?1) AS active
                     FROM lock_conflicts c) AS c
                 WHERE ?2 <> 0 OR active ORDER BY c.id DESC LIMIT ?3",
            )
            .map_err(|e| self.err(e))?;
        stmt.query_map(params![now_ms(), all, limit as i64], |r| {
            Ok(LockConflict {
                id: r.get(0)?,
                path: r.get(1)?,
                holder: r.get(2)?,
                requester: r.get(3)?,
                task_id: r.get(4)?,
                ts: r.get(5)?,
                active: r.get(6)?,
            })
        })
        .map_err(|e| self.err(e))?
        .collect::<Result<_, _>>()
        .map_err(|e| self.err(e))
    }

    /// Deletes locks whose lease lapsed (each an `expired` event); returns their paths.
    pub fn locks_expire(&self) -> Result<Vec<String>, StoreError> {
        let now = now_ms();
        let mut c = self.conn()?;
        let tx = c.transaction().map_err(|e| self.err(e))?;
        let lapsed: Vec<(String, String)> = tx
            .prepare("SELECT path, agent FROM file_locks WHERE expires_at <= ?1 ORDER BY path")
            .and_then(|mut s| {
                s.query_map([now], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<Result<_, _>>()
            })
            .map_err(|e| self.err(e))?;
        for (p, a) in &lapsed {
            tx.execute("DELETE FROM file_locks WHERE path = ?1", [p])
                .map_err(|e| self.err(e))?;
            lock_event(&tx, p, "expired", a, Some("the holder's lease lapsed"), now)
                .map_err(|e| self.err(e))?;
        }
        tx.commit().map_err(|e| self.err(e))?;
        Ok(lapsed.into_iter().map(|(p, _)| p).collect())
    }
}
