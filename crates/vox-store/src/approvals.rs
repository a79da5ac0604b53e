//! Approvals: a call that an agent the daemon runs makes to a tool with side effects waits as
//! a pending approval unless the allowlist covers it; a person approves (maybe with changed
//! arguments) or rejects it.

use crate::events::{NewEvent, Subject, record};
use crate::sql::{OptionalExtension, Sql, SqlExt, params};
use crate::{Store, StoreError, now_ms};
use serde::Serialize;

/// Longest stored arguments (bytes).
pub const MAX_APPROVAL_ARGUMENTS: usize = 256 * 1024;

/// An approval's state.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalState {
    /// Waiting for a person; the agent's call is blocked on it.
    Pending,
    /// A person let the call run (maybe with changed arguments).
    Approved,
    /// A person refused the call; it fails as `refused`.
    Rejected,
    /// The waiting call ended (cancelled, timed out) before anyone decided.
    Expired,
}

impl ApprovalState {
    /// The snake_case spelling stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalState::Pending => "pending",
            ApprovalState::Approved => "approved",
            ApprovalState::Rejected => "rejected",
            ApprovalState::Expired => "expired",
        }
    }
    fn parse(s: &str) -> Self {
        match s {
            "pending" => ApprovalState::Pending,
            "approved" => ApprovalState::Approved,
            "rejected" => ApprovalState::Rejected,
            _ => ApprovalState::Expired,
        }
    }
}

/// A call waiting for (or decided by) a person.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Approval {
    /// Row id.
    pub id: i64,
    /// The agent whose call waits.
    pub agent: String,
    /// The tool it calls.
    pub tool: String,
    /// The arguments it called with (at most 256 KiB as JSON).
    pub arguments: serde_json::Value,
    /// The tool's side-effect class.
    pub side_effect: String,
    /// Where the decision stands.
    pub state: ApprovalState,
    /// Who decided, once someone has.
    pub decided_by: Option<String>,
    /// The decider's reason, when given (or why it expired).
    pub reason: Option<String>,
    /// The arguments the call runs with instead, when the approver changed them.
    pub new_arguments: Option<serde_json::Value>,
    /// When the call started waiting, in ms since the Unix epoch.
    pub created_at: i64,
    /// When it was decided or expired, in ms since the Unix epoch.
    pub decided_at: Option<i64>,
}

/// An allowlist entry: calls of `tool` (a name, or a prefix ending in `*`) by `agent` (`*`: any)
/// run without asking.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct AllowEntry {
    /// Row id.
    pub id: i64,
    /// The tool name, or a prefix ending in `*`.
    pub tool: String,
    /// The agent id, or `*` for any agent.
    pub agent: String,
    /// Why the entry exists (may be empty).
    pub note: String,
    /// Who added it.
    pub created_by: String,
    /// When it was added, in ms since the Unix epoch.
    pub created_at: i64,
}

fn approval_in(c: &dyn Sql, id: i64) -> crate::sql::Result<Option<Approval>> {
    c.query_row(
        "SELECT id, agent, tool, arguments, side_effect, state, decided_by, reason, new_arguments,
                created_at, decided_at FROM approvals WHERE id = ?1",
        [id],
        row_to_approval,
    )
    .optional()
}

fn row_to_approval(r: &crate::sql::Row) -> crate::sql::Result<Approval> {
    let args: String = r.get(3)?;
    let state: String = r.get(5)?;
    let new_args: Option<String> = r.get(8)?;
    Ok(Approval {
        id: r.get(0)?,
        agent: r.get(1)?,
        tool: r.get(2)?,
        arguments: serde_json::from_str(&args).unwrap_or_default(),
        side_effect: r.get(4)?,
        state: ApprovalState::parse(&state),
        decided_by: r.get(6)?,
        reason: r.get(7)?,
        new_arguments: new_args.and_then(|a| serde_json::from_str(&a).ok()),
        created_at: r.get(9)?,
        decided_at: r.get(10)?,
    })
}

fn approval_event(
    c: &dyn Sql,
    id: i64,
    kind: &str,
    by: &str,
    detail: Option<&str>,
    now: i64,
) -> crate::sql::Result<()> {
    record(
        c,
        NewEvent {
            subject: Subject::Approval,
            subject_id: &id.to_string(),
            kind,
            from_state: None,
            agent: Some(by),
            detail,
        },
        now,
    )
}

/// Whether allowlist pattern `pattern` covers tool `tool`.
fn covers(pattern: &str, tool: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => tool.starts_with(prefix),
        None => pattern == tool,
    }
}

impl Store {
    /// Records a pending approval of `agent`'s call.
    pub fn approval_request(
        &self,
        agent: &str,
        tool: &str,
        arguments: &serde_json::Value,
        side_effect: &str,
    ) -> Result<Approval, StoreError> {
        let args = arguments.to_string();
        if args.len() > MAX_APPROVAL_ARGUMENTS {
            return Err(StoreError::Invalid(format!(
                "the call's arguments are {} bytes; an approval holds at most {MAX_APPROVAL_ARGUMENTS}",
                args.len()
            )));
        }
        let now = now_ms();
        let mut c = self.conn()?;
        let tx = c.transaction().map_err(|e| self.err(e))?;
        tx.execute(
            "INSERT INTO approvals (agent, tool, arguments, side_effect, state, created_at)
             VALUES (?1, ?2, ?3, ?4, 'pending', ?5)",
            params![agent, tool, args, side_effect, now],
        )
        .map_err(|e| self.err(e))?;
        let id = tx.last_insert_rowid().map_err(|e| self.err(e))?;
        approval_event(&tx, id, "requested", agent, Some(tool), now).map_err(|e| self.err(e))?;
        let a = approval_in(&tx, id).map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        a.ok_or_else(|| StoreError::NotFound(format!("no approval {id}")))
    }

    /// Decides a pending approval: `approve` (with `new_arguments` replacing the call's) or not.
    /// `Expired` is for the waiting call that gave up.
    pub fn approval_decide(
        &self,
        id: i64,
        to: ApprovalState,
        new_arguments: Option<&serde_json::Value>,
        reason: Option<&str>,
        by: &str,
    ) -> Result<Approval, StoreError> {
        if to == ApprovalState::Pending {
            return Err(StoreError::Invalid("a decision cannot be `pending`".into()));
        }
        if new_arguments.is_some() && to != ApprovalState::Approved {
            return Err(StoreError::Invalid(
                "only an approval can change the call's arguments".into(),
            ));
        }
        let new_args = new_arguments.map(|v| v.to_string());
        if new_args
            .as_ref()
            .is_some_and(|a| a.len() > MAX_APPROVAL_ARGUMENTS)
        {
            return Err(StoreError::Invalid(format!(
                "new arguments are at most {MAX_APPROVAL_ARGUMENTS} bytes"
            )));
        }
        let now = now_ms();
        let mut c = self.conn()?;
        let tx = c.transaction().map_err(|e| self.err(e))?;
        let a = approval_in(&tx, id)
            .map_err(|e| self.err(e))?
            .ok_or_else(|| StoreError::NotFound(format!("no approval {id}")))?;
        if a.state != ApprovalState::Pending {
            return Err(StoreError::Conflict(format!(
                "approval {id} is {} already",
                a.state.as_str()
            )));
        }
        tx.execute(
            "UPDATE approvals SET state = ?2, decided_by = ?3, reason = ?4, new_arguments = ?5, decided_at = ?6
             WHERE id = ?1",
            params![id, to.as_str(), by, reason, new_args, now],
        )
        .map_err(|e| self.err(e))?;
        approval_event(&tx, id, to.as_str(), by, reason, now).map_err(|e| self.err(e))?;
        let a = approval_in(&tx, id).map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        a.ok_or_else(|| StoreError::NotFound(format!("no approval {id}")))
    }

    /// The approval `id`.
    pub fn approval_get(&self, id: i64) -> Result<Approval, StoreError> {
        approval_in(&self.conn()?, id)
            .map_err(|e| self.err(e))?
            .ok_or_else(|| StoreError::NotFound(format!("no approval {id}")))
    }

    /// Approvals, oldest first: pending ones unless `all` (then newest first).
    pub fn approvals(&self, all: bool, limit: usize) -> Result<Vec<Approval>, StoreError> {
        let c = self.conn()?;
        let sql = if all {
            "SELECT id, agent, tool, arguments, side_effect, state, decided_by, reason, new_arguments,
                    created_at, decided_at FROM approvals ORDER BY id DESC LIMIT ?1"
        } else {
            "SELECT id, agent, tool, arguments, side_effect, state, decided_by, reason, new_arguments,
                    created_at, decided_at FROM approvals WHERE state = 'pending' ORDER BY id LIMIT ?1"
        };
        c.prepare_cached(sql)
            .and_then(|mut s| {
                s.query_map([limit as i64], row_to_approval)?
                    .collect::<Result<_, _>>()
            })
            .map_err(|e| self.err(e))
    }

    /// Marks every pending approval expired (their calls died with the previous daemon).
    pub fn approvals_expire_pending(&self, why: &str) -> Result<usize, StoreError> {
        let now = now_ms();
        let mut c = self.conn()?;
        let tx = c.transaction().map_err(|e| self.err(e))?;
        let ids: Vec<i64> = tx
            .prepare("SELECT id FROM approvals WHERE state = 'pending'")
            .and_then(|mut s| s.query_map((), |r| r.get(0))?.collect::<Result<_, _>>())
            .map_err(|e| self.err(e))?;
        for id in &ids {
            tx.execute(
                "UPDATE approvals SET state = 'expired', reason = ?2, decided_at = ?3 WHERE id = ?1",
                params![id, why, now],
            )
            .map_err(|e| self.err(e))?;
            approval_event(&tx, *id, "expired", "daemon", Some(why), now)
                .map_err(|e| self.err(e))?;
        }
        tx.commit().map_err(|e| self.err(e))?;
        Ok(ids.len())
    }

    /// Adds an allowlist entry (the same tool and agent twice is refused).
    pub fn allowlist_add(
        &self,
        tool: &str,
        agent: &str,
        note: &str,
        by: &str,
    ) -> Result<AllowEntry, StoreError> {
        let now = now_ms();
        let c = self.conn()?;
        let n = c
            .execute(
                "INSERT INTO approval_allowlist (tool, agent, note, created_by, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING",
                params![tool, agent, note, by, now],
            )
            .map_err(|e| self.err(e))?;
        if n == 0 {
            return Err(StoreError::Conflict(format!(
                "the allowlist has an entry for {tool} and agent {agent} already"
            )));
        }
        let id = c.last_insert_rowid().map_err(|e| self.err(e))?;
        Ok(AllowEntry {
            id,
            tool: tool.to_owned(),
            agent: agent.to_owned(),
            note: note.to_owned(),
            created_by: by.to_owned(),
            created_at: now,
        })
    }

    /// The allowlist, oldest first.
    pub fn allowlist(&self) -> Result<Vec<AllowEntry>, StoreError> {
        let c = self.conn()?;
        c.prepare_cached(
            "SELECT id, tool, agent, note, created_by, created_at FROM approval_allowlist ORDER BY id",
        )
        .and_then(|mut s| {
            s.query_map((), |r| {
                Ok(AllowEntry {
                    id: r.get(0)?,
                    tool: r.get(1)?,
                    agent: r.get(2)?,
                    note: r.get(3)?,
                    created_by: r.get(4)?,
                    created_at: r.get(5)?,
                })
            })?
            .collect::<Result<_, _>>()
        })
        .map_err(|e| self.err(e))
    }

    /// Whether the allowlist lets `agent` call `tool` without asking.
    pub fn allowlist_covers(&self, agent: &str, tool: &str) -> Result<bool, StoreError> {
        Ok(self
            .allowlist()?
            .iter()
            .any(|e| (e.agent == "*" || e.agent == agent) && covers(&e.tool, tool)))
    }
}
