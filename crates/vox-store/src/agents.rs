//! Agents the orchestrator knows: each has an id, a capability profile, a state, a capacity (how
//! many tasks it holds at once), an optional token budget, a heartbeat, and a credential the
//! daemon issued (only its SHA-256 is stored). Retiring an agent releases its locks and puts its
//! unfinished tasks back in the queue, in one transaction.

use crate::events::{NewEvent, Subject, record};
use crate::sql::{OptionalExtension, Sql, SqlExt, params};
use crate::tasks::{TaskState, event as task_event};
use crate::{Store, StoreError, now_ms};
use serde::Serialize;

/// Longest agent id and role.
pub const MAX_AGENT_ID: usize = 64;
pub const MAX_AGENT_ROLE: usize = 256;
/// Most tasks one agent may hold at once.
pub const MAX_AGENT_CAPACITY: i64 = 64;

/// An agent's state.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum AgentState {
    /// Takes new tasks.
    Active,
    /// Keeps what it holds; new work is held back.
    Paused,
    /// Gone for good: its credential no longer works and its id is not reused.
    Retired,
}

impl AgentState {
    /// The snake_case spelling stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            AgentState::Active => "active",
            AgentState::Paused => "paused",
            AgentState::Retired => "retired",
        }
    }
    fn parse(s: &str) -> AgentState {
        match s {
            "active" => AgentState::Active,
            "paused" => AgentState::Paused,
            _ => AgentState::Retired,
        }
    }
}

/// An agent as stored (never its credential).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Agent {
    /// The agent's id (ASCII letters, digits, `.`, `_`, `-`; at most 64 bytes), never reused.
    pub id: String,
    /// What it is for, in a few words.
    pub role: String,
    /// The capability profile its own calls are decided under.
    pub profile: String,
    /// What runs it: `codex` (a worker the daemon runs), or null (a client of its own).
    pub runner: Option<String>,
    /// Whether it takes new tasks, is paused, or is retired.
    pub state: AgentState,
    /// Most tasks it holds at once (assigned and running).
    pub capacity: i64,
    /// Its token budget per attention window; null: the default.
    pub budget_tokens: Option<i64>,
    /// Its last heartbeat, in ms since the Unix epoch.
    pub heartbeat_at: i64,
    /// When it was spawned, in ms since the Unix epoch.
    pub created_at: i64,
    /// When it last changed, in ms since the Unix epoch.
    pub updated_at: i64,
    /// Where its worker runs (the replica's host and workspace), for a runner agent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// What `vox_spawn_agent` stores.
#[derive(Debug, Clone, Default)]
pub struct NewAgent {
    /// The agent's id (ASCII letters, digits, `.`, `_`, `-`; at most 64 bytes).
    pub id: String,
    /// What it is for, in a few words (at most 256 bytes).
    pub role: String,
    /// The capability profile its own calls are decided under.
    pub profile: String,
    /// What runs it: `codex` for a worker the daemon runs, `None` for a client of its own.
    pub runner: Option<String>,
    /// Most tasks it holds at once (1 to 64).
    pub capacity: i64,
    /// Its token budget per attention window; `None`: the default.
    pub budget_tokens: Option<i64>,
    /// Where its worker runs, for a runner agent.
    pub host: Option<String>,
}

/// What retiring an agent undid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Retired {
    /// The agent as it is now (retired).
    pub agent: Agent,
    /// Tasks put back in the queue.
    pub requeued: Vec<i64>,
    /// Files it no longer holds.
    pub released: Vec<String>,
}

const COLUMNS: &str = "id, role, profile, runner, state, capacity, budget_tokens, heartbeat_at, created_at, updated_at, host";

fn row_to_agent(r: &crate::sql::Row) -> crate::sql::Result<Agent> {
    let state: String = r.get(4)?;
    Ok(Agent {
        id: r.get(0)?,
        role: r.get(1)?,
        profile: r.get(2)?,
        runner: r.get(3)?,
        state: AgentState::parse(&state),
        capacity: r.get(5)?,
        budget_tokens: r.get(6)?,
        heartbeat_at: r.get(7)?,
        created_at: r.get(8)?,
        updated_at: r.get(9)?,
        host: r.get(10)?,
    })
}

/// An agent id: 1 to 64 of `[A-Za-z0-9._-]`, starting with a letter or digit.
pub fn check_agent_id(id: &str) -> Result<(), StoreError> {
    let ok = !id.is_empty()
        && id.len() <= MAX_AGENT_ID
        && id.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(StoreError::Invalid(format!(
            "agent id {id:?} is not 1 to {MAX_AGENT_ID} letters, digits, '.', '_' or '-' starting with a letter or digit"
        )))
    }
}

pub(crate) fn agent_event(
    c: &dyn Sql,
    id: &str,
    kind: &str,
    from: Option<AgentState>,
    by: &str,
    detail: Option<&str>,
    now: i64,
) -> crate::sql::Result<()> {
    record(
        c,
        NewEvent {
            subject: Subject::Agent,
            subject_id: id,
            kind,
            from_state: from.map(AgentState::as_str),
            agent: Some(by),
            detail,
        },
        now,
    )
}

pub(crate) fn agent_in(c: &dyn Sql, id: &str) -> crate::sql::Result<Option<Agent>> {
    c.prepare_cached(&format!("SELECT {COLUMNS} FROM agents WHERE id = ?1"))?
        .query_row([id], row_to_agent)
        .optional()
}

/// Names no agent may take, ignoring case: the ones records use for a person and the system
/// (`operator` is who events name for the operator, and a store that met an agent of that name
/// could not tell them apart).
pub const RESERVED_AGENT_IDS: [&str; 6] =
    ["operator", "system", "daemon", "vox", "root", "anonymous"];

/// Refuses a reserved agent id (see [`RESERVED_AGENT_IDS`]).
pub fn check_not_reserved(id: &str) -> Result<(), StoreError> {
    match RESERVED_AGENT_IDS
        .iter()
        .find(|r| r.eq_ignore_ascii_case(id))
    {
        Some(r) => Err(StoreError::Invalid(format!(
            "agent id {id:?} is reserved ({r} names a person or the system in the records)"
        ))),
        None => Ok(()),
    }
}

impl Store {
    /// Stores a new active agent whose credential hashes to `token_hash`. An id already used,
    /// even by a retired agent, or a reserved one, is refused.
    pub fn agent_spawn(
        &self,
        a: &NewAgent,
        token_hash: &str,
        by: &str,
    ) -> Result<Agent, StoreError> {
        check_agent_id(&a.id)?;
        check_not_reserved(&a.id)?;
        if a.role.len() > MAX_AGENT_ROLE {
            return Err(StoreError::Invalid(format!(
                "an agent's role is at most {MAX_AGENT_ROLE} bytes, not {}",
                a.role.len()
            )));
        }
        if !(1..=MAX_AGENT_CAPACITY).contains(&a.capacity) {
            return Err(StoreError::Invalid(format!(
                "an agent's capacity is 1 to {MAX_AGENT_CAPACITY} tasks, not {}",
                a.capacity
            )));
        }
        let now = now_ms();
        let mut c = self.conn()?;
        let tx = c.transaction().map_err(|e| self.err(e))?;
        if let Some(old) = agent_in(&tx, &a.id).map_err(|e| self.err(e))? {
            return Err(StoreError::Conflict(format!(
                "agent {} exists already ({}); agent ids are never reused",
                a.id,
                old.state.as_str()
            )));
        }
        tx.execute(
            "INSERT INTO agents (id, role, profile, runner, state, capacity, budget_tokens, token_hash,
                                 heartbeat_at, created_at, updated_at, host)
             VALUES (?1, ?2, ?3, ?4, 'active', ?5, ?6, ?7, ?8, ?8, ?8, ?9)",
            params![a.id, a.role, a.profile, a.runner, a.capacity, a.budget_tokens, token_hash, now, a.host],
        )
        .map_err(|e| self.err(e))?;
        agent_event(&tx, &a.id, "spawned", None, by, a.runner.as_deref(), now)
            .map_err(|e| self.err(e))?;
        let agent = agent_in(&tx, &a.id).map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        agent.ok_or_else(|| StoreError::NotFound(format!("no agent {}", a.id)))
    }

    /// The agent `id`.
    pub fn agent_get(&self, id: &str) -> Result<Agent, StoreError> {
        agent_in(&self.conn()?, id)
            .map_err(|e| self.err(e))?
            .ok_or_else(|| StoreError::NotFound(format!("no agent {id}")))
    }

    /// The agent (not retired) whose credential hashes to `token_hash`.
    pub fn agent_by_token(&self, token_hash: &str) -> Result<Option<Agent>, StoreError> {
        self.conn()?
            .query_row(
                &format!(
                    "SELECT {COLUMNS} FROM agents WHERE token_hash = ?1 AND state <> 'retired'"
                ),
                [token_hash],
                row_to_agent,
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// Agents in id order; retired ones only with `retired`.
    pub fn agents(&self, retired: bool) -> Result<Vec<Agent>, StoreError> {
        let c = self.conn()?;
        let mut stmt = c
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM agents WHERE ?1 <> 0 OR state <> 'retired' ORDER BY id"
            ))
            .map_err(|e| self.err(e))?;
        stmt.query_map([retired], row_to_agent)
            .map_err(|e| self.err(e))?
            .collect::<Result<_, _>>()
            .map_err(|e| self.err(e))
    }

    /// Pauses (`active = false`) or resumes an agent that is not retired.
    pub fn agent_set_active(&self, id: &str, active: bool, by: &str) -> Result<Agent, StoreError> {
        let to = if active {
            AgentState::Active
        } else {
            AgentState::Paused
        };
        let mut c = self.conn()?;
        let tx = c.transaction().map_err(|e| self.err(e))?;
        let a = agent_in(&tx, id)
            .map_err(|e| self.err(e))?
            .ok_or_else(|| StoreError::NotFound(format!("no agent {id}")))?;
        if a.state == AgentState::Retired {
            return Err(StoreError::Conflict(format!(
                "agent {id} is retired: it cannot become {}",
                to.as_str()
            )));
        }
        if a.state != to {
            let now = now_ms();
            tx.execute(
                "UPDATE agents SET state = ?2, updated_at = ?3 WHERE id = ?1",
                params![id, to.as_str(), now],
            )
            .map_err(|e| self.err(e))?;
            agent_event(&tx, id, to.as_str(), Some(a.state), by, None, now)
                .map_err(|e| self.err(e))?;
        }
        let a = agent_in(&tx, id).map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        a.ok_or_else(|| StoreError::NotFound(format!("no agent {id}")))
    }

    /// Records a heartbeat: the agent is alive, and the leases of its locks run from now.
    pub fn agent_heartbeat(&self, id: &str) -> Result<Agent, StoreError> {
        let now = now_ms();
        let mut c = self.conn()?;
        let tx = c.transaction().map_err(|e| self.err(e))?;
        let n = tx
            .execute(
                "UPDATE agents SET heartbeat_at = ?2 WHERE id = ?1 AND state <> 'retired'",
                params![id, now],
            )
            .map_err(|e| self.err(e))?;
        if n == 0 {
            return Err(StoreError::NotFound(format!(
                "no agent {id} (or it is retired)"
            )));
        }
        tx.execute(
            "UPDATE file_locks SET expires_at = ?2 + lease_ms WHERE agent = ?1",
            params![id, now],
        )
        .map_err(|e| self.err(e))?;
        let a = agent_in(&tx, id).map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        a.ok_or_else(|| StoreError::NotFound(format!("no agent {id}")))
    }

    /// Sets (or with `None` clears) an agent's token budget.
    pub fn agent_set_budget(
        &self,
        id: &str,
        tokens: Option<i64>,
        by: &str,
    ) -> Result<Agent, StoreError> {
        let now = now_ms();
        let mut c = self.conn()?;
        let tx = c.transaction().map_err(|e| self.err(e))?;
        let n = tx
            .execute(
                "UPDATE agents SET budget_tokens = ?2, updated_at = ?3 WHERE id = ?1 AND state <> 'retired'",
                params![id, tokens, now],
            )
            .map_err(|e| self.err(e))?;
        if n == 0 {
            return Err(StoreError::NotFound(format!(
                "no agent {id} (or it is retired)"
            )));
        }
        let detail = tokens.map_or("default".to_owned(), |t| format!("{t} tokens"));
        agent_event(&tx, id, "budget", None, by, Some(&detail), now).map_err(|e| self.err(e))?;
        let a = agent_in(&tx, id).map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        a.ok_or_else(|| StoreError::NotFound(format!("no agent {id}")))
    }

    /// Puts back in the queue the tasks an agent holds: every one when `running_too` (it is
    /// going away), else only those it has not started (a drain). Returns their ids.
    pub fn agent_requeue(
        &self,
        id: &str,
        running_too: bool,
        by: &str,
        reason: &str,
    ) -> Result<Vec<i64>, StoreError> {
        let mut c = self.conn()?;
        let tx = c.transaction().map_err(|e| self.err(e))?;
        let ids =
            requeue_in(&tx, id, running_too, by, reason, now_ms()).map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(ids)
    }

    /// Retires an agent: its credential stops working, its locks are released and its tasks go
    /// back to the queue.
    pub fn agent_retire(&self, id: &str, by: &str, reason: &str) -> Result<Retired, StoreError> {
        let now = now_ms();
        let mut c = self.conn()?;
        let tx = c.transaction().map_err(|e| self.err(e))?;
        let a = agent_in(&tx, id)
            .map_err(|e| self.err(e))?
            .ok_or_else(|| StoreError::NotFound(format!("no agent {id}")))?;
        if a.state == AgentState::Retired {
            return Err(StoreError::Conflict(format!(
                "agent {id} is retired already"
            )));
        }
        let requeued = requeue_in(&tx, id, true, by, reason, now).map_err(|e| self.err(e))?;
        let released =
            crate::locks::release_all_in(&tx, id, by, reason, now).map_err(|e| self.err(e))?;
        tx.execute(
            "UPDATE agents SET state = 'retired', updated_at = ?2 WHERE id = ?1",
            params![id, now],
        )
        .map_err(|e| self.err(e))?;
        agent_event(&tx, id, "retired", Some(a.state), by, Some(reason), now)
            .map_err(|e| self.err(e))?;
        let agent = agent_in(&tx, id)
            .map_err(|e| self.err(e))?
            .ok_or_else(|| StoreError::NotFound(format!("no agent {id}")))?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(Retired {
            agent,
            requeued,
            released,
        })
    }
}

fn requeue_in(
    c: &dyn Sql,
    agent: &str,
    running_too: bool,
    by: &str,
    reason: &str,
    now: i64,
) -> crate::sql::Result<Vec<i64>> {
    let held: Vec<(i64, String)> = c
        .prepare_cached(
            "SELECT id, state FROM tasks WHERE owner = ?1
               AND (state = 'assigned' OR (?2 <> 0 AND state = 'running')) ORDER BY id",
        )?
        .query_map(params![agent, running_too], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    for (id, state) in &held {
        c.execute(
            "UPDATE tasks SET state = 'queued', owner = NULL, updated_at = ?2 WHERE id = ?1",
            params![id, now],
        )?;
        let from = if state == "running" {
            TaskState::Running
        } else {
            TaskState::Assigned
        };
        task_event(c, *id, "queued", Some(from), Some(by), Some(reason), now)?;
    }
    Ok(held.into_iter().map(|(id, _)| id).collect())
}
