//! Durable tasks for the orchestrator profile: priority, dependencies (a DAG: an edge that would
//! close a cycle is refused), file affinity, an owner agent, attempts and a result, moved through
//! one state machine in which every transition is an event (the stream `vox_poll_events` reads).
//!
//! ```text
//! queued ──assign──▶ assigned ──start──▶ running ──▶ completed | failed
//!    ▲                  │  complete | fail ─────────▶ completed | failed
//!    ▲                  │                   │
//!    └─────requeue──────┴───────────────────┘        (any active state) ──▶ cancelled
//! ```
//!
//! A task is *ready* when it is queued, every task it depends on has completed, and no pending
//! clarification gates it. An owner may complete or fail an assigned task without starting it
//! first (the attempt is counted). Ending a task releases the file locks claimed for it.

use crate::events::{NewEvent, Subject, record};
use crate::sql::{OptionalExtension, Sql, SqlExt, params};
use crate::{Store, StoreError, now_ms};
use serde::{Deserialize, Serialize};

/// Most dependencies of one task, and most files of its affinity.
pub const MAX_TASK_DEPENDENCIES: usize = 64;
pub const MAX_TASK_FILES: usize = 256;
/// Longest title, description and result (bytes).
pub const MAX_TASK_TITLE: usize = 512;
pub const MAX_TASK_TEXT: usize = 64 * 1024;

/// A task's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// Waiting for an agent (ready once its dependencies completed).
    Queued,
    /// Given to its owner, not started yet.
    Assigned,
    /// Its owner is working on it.
    Running,
    /// Done, with a result.
    Completed,
    /// Given up on, with the reason as its result.
    Failed,
    /// Called off before it ended.
    Cancelled,
}

impl TaskState {
    /// The snake_case spelling stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Queued => "queued",
            TaskState::Assigned => "assigned",
            TaskState::Running => "running",
            TaskState::Completed => "completed",
            TaskState::Failed => "failed",
            TaskState::Cancelled => "cancelled",
        }
    }
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "queued" => TaskState::Queued,
            "assigned" => TaskState::Assigned,
            "running" => TaskState::Running,
            "completed" => TaskState::Completed,
            "failed" => TaskState::Failed,
            "cancelled" => TaskState::Cancelled,
            _ => return None,
        })
    }
    /// Completed, failed and cancelled tasks do not move again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::Cancelled
        )
    }
}

/// A task as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Task {
    /// Row id, increasing in submission order.
    pub id: i64,
    /// One line saying what to do (at most 512 bytes).
    pub title: String,
    /// The details (at most 64 KiB).
    pub description: String,
    /// Higher runs first.
    pub priority: i64,
    /// Where it is in the state machine.
    pub state: TaskState,
    /// The agent it is assigned to (kept after it ends, as who did it).
    pub owner: Option<String>,
    /// The only agent it may be assigned to, when the submitter named one.
    pub pinned_agent: Option<String>,
    /// Times it was started.
    pub attempts: i64,
    /// Ids of the tasks that must complete before it is ready.
    pub depends_on: Vec<i64>,
    /// Files it expects to touch (workspace-relative).
    pub files: Vec<String>,
    /// The outcome: the result on completion, the reason on failure.
    pub result: Option<String>,
    /// When it was submitted, in ms since the Unix epoch.
    pub created_at: i64,
    /// When it last changed, in ms since the Unix epoch.
    pub updated_at: i64,
}

/// What a caller submits.
#[derive(Debug, Clone, Default)]
pub struct NewTask {
    /// One line saying what to do (at most 512 bytes).
    pub title: String,
    /// The details (at most 64 KiB; may be empty).
    pub description: String,
    /// Higher runs first.
    pub priority: i64,
    /// Ids of existing tasks that must complete first (at most 64; no cycle).
    pub depends_on: Vec<i64>,
    /// Files it expects to touch, workspace-relative (at most 256).
    pub files: Vec<String>,
    /// The only agent it may be assigned to.
    pub pinned_agent: Option<String>,
}

/// One transition of a task (the task events of the stream).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct TaskEvent {
    /// The cursor: events are read after an id.
    pub id: i64,
    /// The task that moved.
    pub task_id: i64,
    /// `submitted`, or the state moved to.
    pub kind: String,
    /// The state it moved from; `None` for a submission or a reprioritization.
    pub from_state: Option<TaskState>,
    /// Who moved it: the submitter, the agent, or the operator.
    pub agent: Option<String>,
    /// Why, when the move says: a failure or requeue reason, a priority change.
    pub detail: Option<String>,
    /// When it moved, in ms since the Unix epoch.
    pub ts: i64,
}

/// A move of the state machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskMove {
    /// queued → assigned to `agent`.
    Assign {
        /// The agent that takes it.
        agent: String,
    },
    /// assigned → running (its owner starts it; counts an attempt).
    Start,
    /// running → completed with a result.
    Complete {
        /// What it produced (at most 64 KiB).
        result: String,
    },
    /// running → failed, saying why.
    Fail {
        /// Why it failed (at most 64 KiB).
        reason: String,
    },
    /// assigned or running → queued (rebalance, a dead worker), owner cleared.
    Requeue {
        /// Why it goes back to the queue.
        reason: String,
    },
    /// any active state → cancelled.
    Cancel {
        /// Why it is called off.
        reason: String,
    },
}

impl TaskMove {
    fn target(&self) -> TaskState {
        match self {
            TaskMove::Assign { .. } => TaskState::Assigned,
            TaskMove::Start => TaskState::Running,
            TaskMove::Complete { .. } => TaskState::Completed,
            TaskMove::Fail { .. } => TaskState::Failed,
            TaskMove::Requeue { .. } => TaskState::Queued,
            TaskMove::Cancel { .. } => TaskState::Cancelled,
        }
    }
    fn allowed_from(&self, from: TaskState) -> bool {
        use TaskState::*;
        match self {
            TaskMove::Assign { .. } => from == Queued,
            TaskMove::Start => from == Assigned,
            TaskMove::Complete { .. } | TaskMove::Fail { .. } => {
                matches!(from, Assigned | Running)
            }
            TaskMove::Requeue { .. } => matches!(from, Assigned | Running),
            TaskMove::Cancel { .. } => !from.is_terminal(),
        }
    }
}

fn invalid(message: String) -> StoreError {
    StoreError::Invalid(message)
}

fn check_len(what: &str, text: &str, max: usize) -> Result<(), StoreError> {
    if text.len() > max {
        return Err(invalid(format!(
            "a task's {what} is {} bytes, more than {max}",
            text.len()
        )));
    }
    Ok(())
}

/// A ready task: queued, every dependency completed, no pending clarification gating it.
pub(crate) const READY: &str = "state = 'queued' AND NOT EXISTS (
        SELECT 1 FROM task_deps d JOIN tasks t ON t.id = d.depends_on
        WHERE d.task_id = tasks.id AND t.state <> 'completed')
    AND NOT EXISTS (
        SELECT 1 FROM clarification_gates g JOIN clarifications q ON q.id = g.clarification_id
        WHERE g.task_id = tasks.id AND q.state = 'pending')";

const COLUMNS: &str = "id, title, description, priority, state, owner, attempts, files, result, created_at, updated_at, pinned_agent";

fn row_to_task(r: &crate::sql::Row) -> crate::sql::Result<Task> {
    let state: String = r.get(4)?;
    let files: String = r.get(7)?;
    Ok(Task {
        id: r.get(0)?,
        title: r.get(1)?,
        description: r.get(2)?,
        priority: r.get(3)?,
        state: TaskState::parse(&state).unwrap_or(TaskState::Failed),
        owner: r.get(5)?,
        attempts: r.get(6)?,
        depends_on: vec![],
        files: serde_json::from_str(&files).unwrap_or_default(),
        result: r.get(8)?,
        created_at: r.get(9)?,
        updated_at: r.get(10)?,
        pinned_agent: r.get(11)?,
    })
}

fn deps_of(c: &dyn Sql, id: i64) -> crate::sql::Result<Vec<i64>> {
    let mut stmt = c.prepare_cached(
        "SELECT depends_on FROM task_deps WHERE task_id = ?1 ORDER BY depends_on",
    )?;
    stmt.query_map([id], |r| r.get(0))?.collect()
}

pub(crate) fn event(
    c: &dyn Sql,
    task: i64,
    kind: &str,
    from: Option<TaskState>,
    agent: Option<&str>,
    detail: Option<&str>,
    ts: i64,
) -> crate::sql::Result<()> {
    record(
        c,
        NewEvent {
            subject: Subject::Task,
            subject_id: &task.to_string(),
            kind,
            from_state: from.map(TaskState::as_str),
            agent,
            detail,
        },
        ts,
    )
}

/// Checks a new task and stores it, queued, with its `submitted` event, inside `tx`.
/// A title a task may have.
pub(crate) fn check_title(title: &str) -> Result<(), StoreError> {
    if title.trim().is_empty() {
        return Err(invalid("a task needs a non-empty title".into()));
    }
    check_len("title", title, MAX_TASK_TITLE)
}

pub(crate) fn submit_in(tx: &dyn Sql, t: &NewTask, by: &str, now: i64) -> Result<i64, StoreError> {
    let sql = |e| StoreError::Conflict(format!("storing the task: {e}"));
    check_title(&t.title)?;
    check_len("description", &t.description, MAX_TASK_TEXT)?;
    if t.depends_on.len() > MAX_TASK_DEPENDENCIES {
        return Err(invalid(format!(
            "a task depends on at most {MAX_TASK_DEPENDENCIES} tasks, not {}",
            t.depends_on.len()
        )));
    }
    if t.files.len() > MAX_TASK_FILES {
        return Err(invalid(format!(
            "a task names at most {MAX_TASK_FILES} files, not {}",
            t.files.len()
        )));
    }
    for dep in &t.depends_on {
        let found: Option<i64> = tx
            .query_row("SELECT id FROM tasks WHERE id = ?1", [dep], |r| r.get(0))
            .optional()
            .map_err(sql)?;
        if found.is_none() {
            return Err(StoreError::NotFound(format!(
                "depends_on names task {dep}, which does not exist"
            )));
        }
    }
    let files = t
        .files
        .iter()
        .enumerate()
        .map(|(i, f)| {
            crate::locks::normalize_path(f)
                .map_err(|e| StoreError::Invalid(format!("files[{i}]: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let files = serde_json::to_string(&files).unwrap_or_else(|_| "[]".into());
    tx.prepare_cached(
        "INSERT INTO tasks (title, description, priority, state, files, created_at, updated_at, pinned_agent)
         VALUES (?1, ?2, ?3, 'queued', ?4, ?5, ?5, ?6)",
    )
    .and_then(|mut st| {
        st.execute(params![
            t.title,
            t.description,
            t.priority,
            files,
            now,
            t.pinned_agent
        ])
    })
    .map_err(sql)?;
    let id = tx.last_insert_rowid().map_err(sql)?;
    for dep in &t.depends_on {
        tx.execute(
            "INSERT INTO task_deps (task_id, depends_on) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
            params![id, dep],
        )
        .map_err(sql)?;
    }
    event(tx, id, "submitted", None, Some(by), None, now).map_err(sql)?;
    Ok(id)
}

/// Releases the file locks claimed for task `id` (it ended), each an event.
pub(crate) fn release_task_locks(
    c: &dyn Sql,
    id: i64,
    by: &str,
    now: i64,
) -> crate::sql::Result<()> {
    let paths: Vec<String> = c
        .prepare_cached("SELECT path FROM file_locks WHERE task_id = ?1 ORDER BY path")?
        .query_map([id], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    for p in &paths {
        c.execute("DELETE FROM file_locks WHERE path = ?1", [p])?;
        record(
            c,
            NewEvent {
                subject: Subject::Lock,
                subject_id: p,
                kind: "released",
                from_state: None,
                agent: Some(by),
                detail: Some(&format!("task {id} ended")),
            },
            now,
        )?;
    }
    Ok(())
}

impl Store {
    /// Stores a new queued task (its dependencies must exist) and its `submitted` event, as `by`.
    pub fn task_submit_by(&self, t: &NewTask, by: &str) -> Result<Task, StoreError> {
        let now = now_ms();
        let mut c = self.conn()?;
        let tx = c.transaction().map_err(|e| self.err(e))?;
        let id = submit_in(&tx, t, by, now)?;
        let task = Self::task_in(&tx, id).map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        task.ok_or_else(|| StoreError::NotFound(format!("no task {id}")))
    }

    /// Agent `agent` claims the next task `claimable` selects (highest priority, then oldest):
    /// assigned to it in one write transaction, so two claims never take the same task.
    pub(crate) fn task_claim_next(
        &self,
        agent: &str,
        claimable: &str,
    ) -> Result<Option<crate::pg::Claimed>, StoreError> {
        let now = now_ms();
        let mut c = self.conn()?;
        // IMMEDIATE: the write lock first, so another process's claim cannot read the same
        // task between our read and our write.
        let tx = c
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| self.err(e))?;
        let next: Option<(i64, String)> = tx
            .query_row(
                &format!(
                    "SELECT id, title FROM tasks WHERE {claimable} ORDER BY priority DESC, id LIMIT 1"
                ),
                [agent],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        let Some((task_id, title)) = next else {
            return Ok(None);
        };
        tx.execute(
            "UPDATE tasks SET state = 'assigned', owner = ?2, updated_at = ?3 WHERE id = ?1",
            params![task_id, agent, now],
        )
        .map_err(|e| self.err(e))?;
        event(
            &tx,
            task_id,
            "assigned",
            Some(TaskState::Queued),
            Some(agent),
            Some("claimed"),
            now,
        )
        .map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(Some(crate::pg::Claimed { task_id, title }))
    }

    /// [`Self::task_submit_by`] the operator.
    pub fn task_submit(&self, t: &NewTask) -> Result<Task, StoreError> {
        self.task_submit_by(t, "operator")
    }

    pub(crate) fn task_in(c: &dyn Sql, id: i64) -> crate::sql::Result<Option<Task>> {
        let task = c
            .prepare_cached(&format!("SELECT {COLUMNS} FROM tasks WHERE id = ?1"))?
            .query_row([id], row_to_task)
            .optional()?;
        match task {
            Some(mut t) => {
                t.depends_on = deps_of(c, id)?;
                Ok(Some(t))
            }
            None => Ok(None),
        }
    }

    /// The task `id`.
    pub fn task_get(&self, id: i64) -> Result<Task, StoreError> {
        let c = self.conn()?;
        Self::task_in(&c, id)
            .map_err(|e| self.err(e))?
            .ok_or_else(|| StoreError::NotFound(format!("no task {id}")))
    }

    /// Makes `task` depend on `on` as well; refused when `on` already depends, directly or not,
    /// on `task` (the graph stays acyclic), or when either is missing.
    pub fn task_add_dependency(&self, task: i64, on: i64) -> Result<(), StoreError> {
        if task == on {
            return Err(invalid(format!("task {task} cannot depend on itself")));
        }
        let mut c = self.conn()?;
        let tx = c.transaction().map_err(|e| self.err(e))?;
        for id in [task, on] {
            if Self::task_in(&tx, id).map_err(|e| self.err(e))?.is_none() {
                return Err(StoreError::NotFound(format!("no task {id}")));
            }
        }
        // Everything `on` reaches through its dependencies.
        let cycle: bool = tx
            .query_row(
                "WITH RECURSIVE reach(id) AS (
                     SELECT depends_on FROM task_deps WHERE task_id = ?1
                     UNION SELECT d.depends_on FROM task_deps d JOIN reach ON d.task_id = reach.id
                 ) SELECT EXISTS (SELECT 1 FROM reach WHERE id = ?2)",
                params![on, task],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))?;
        if cycle {
            return Err(StoreError::Conflict(format!(
                "task {task} cannot depend on task {on}: task {on} already depends on task {task}, and dependencies form no cycle"
            )));
        }
        let n: i64 = tx
            .query_row(
                "SELECT count(*) FROM task_deps WHERE task_id = ?1",
                [task],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))?;
        if n as usize >= MAX_TASK_DEPENDENCIES {
            return Err(StoreError::Conflict(format!(
                "task {task} already depends on {MAX_TASK_DEPENDENCIES} tasks"
            )));
        }
        tx.execute(
            "INSERT INTO task_deps (task_id, depends_on) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
            params![task, on],
        )
        .map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))
    }

    /// Moves task `id` through the state machine, as `agent` (the caller: the owner for start,
    /// complete and fail); the transition and its event are one transaction.
    pub fn task_move(&self, id: i64, m: &TaskMove, agent: &str) -> Result<Task, StoreError> {
        let mut c = self.conn()?;
        let tx = c.transaction().map_err(|e| self.err(e))?;
        let task = Self::task_in(&tx, id)
            .map_err(|e| self.err(e))?
            .ok_or_else(|| StoreError::NotFound(format!("no task {id}")))?;
        let to = m.target();
        if !m.allowed_from(task.state) {
            return Err(StoreError::Conflict(format!(
                "task {id} is {}: it cannot become {}",
                task.state.as_str(),
                to.as_str()
            )));
        }
        let owned = matches!(
            m,
            TaskMove::Start | TaskMove::Complete { .. } | TaskMove::Fail { .. }
        );
        if owned && task.owner.as_deref() != Some(agent) {
            return Err(StoreError::Conflict(format!(
                "task {id} is assigned to {}, not to {agent}",
                task.owner.as_deref().unwrap_or("nobody")
            )));
        }
        let now = now_ms();
        let (owner, result, detail) = match m {
            TaskMove::Assign { agent } => (Some(agent.as_str()), None, None),
            TaskMove::Start => (task.owner.as_deref(), None, None),
            TaskMove::Complete { result } => {
                check_len("result", result, MAX_TASK_TEXT)?;
                (task.owner.as_deref(), Some(result.as_str()), None)
            }
            TaskMove::Fail { reason } => {
                check_len("failure reason", reason, MAX_TASK_TEXT)?;
                (
                    task.owner.as_deref(),
                    Some(reason.as_str()),
                    Some(reason.as_str()),
                )
            }
            TaskMove::Requeue { reason } => (None, None, Some(reason.as_str())),
            TaskMove::Cancel { reason } => (task.owner.as_deref(), None, Some(reason.as_str())),
        };
        // An owner that completes or fails an assigned task started it.
        let started = i64::from(
            matches!(m, TaskMove::Start)
                || (task.state == TaskState::Assigned
                    && matches!(m, TaskMove::Complete { .. } | TaskMove::Fail { .. })),
        );
        tx.execute(
            "UPDATE tasks SET state = ?2, owner = ?3, result = coalesce(?4, result),
                 attempts = attempts + ?5, updated_at = ?6 WHERE id = ?1",
            params![id, to.as_str(), owner, result, started, now],
        )
        .map_err(|e| self.err(e))?;
        let who = match m {
            TaskMove::Assign { agent } => agent.as_str(),
            _ => agent,
        };
        event(
            &tx,
            id,
            to.as_str(),
            Some(task.state),
            Some(who),
            detail,
            now,
        )
        .map_err(|e| self.err(e))?;
        if to.is_terminal() {
            release_task_locks(&tx, id, who, now).map_err(|e| self.err(e))?;
        }
        let task = Self::task_in(&tx, id).map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        task.ok_or_else(|| StoreError::NotFound(format!("no task {id}")))
    }

    /// Queued tasks whose dependencies have all completed, highest priority first, then oldest.
    pub fn tasks_ready(&self, limit: usize) -> Result<Vec<Task>, StoreError> {
        self.tasks_where(READY, limit)
    }

    /// Tasks in `state` (all when `None`), highest priority first, then oldest.
    pub fn tasks_in_state(
        &self,
        state: Option<TaskState>,
        limit: usize,
    ) -> Result<Vec<Task>, StoreError> {
        match state {
            Some(s) => self.tasks_where(&format!("state = '{}'", s.as_str()), limit),
            None => self.tasks_where("1 = 1", limit),
        }
    }

    fn tasks_where(&self, condition: &str, limit: usize) -> Result<Vec<Task>, StoreError> {
        let c = self.conn()?;
        let mut stmt = c
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM tasks WHERE {condition} ORDER BY priority DESC, id LIMIT ?1"
            ))
            .map_err(|e| self.err(e))?;
        let mut tasks: Vec<Task> = stmt
            .query_map([limit as i64], row_to_task)
            .map_err(|e| self.err(e))?
            .collect::<Result<_, _>>()
            .map_err(|e| self.err(e))?;
        for t in &mut tasks {
            t.depends_on = deps_of(&c, t.id).map_err(|e| self.err(e))?;
        }
        Ok(tasks)
    }

    /// Cancels every task not yet ended (emergency stop), as `agent`, saying why; returns them.
    pub fn tasks_cancel_active(&self, agent: &str, reason: &str) -> Result<Vec<i64>, StoreError> {
        let mut c = self.conn()?;
        let tx = c.transaction().map_err(|e| self.err(e))?;
        let active: Vec<(i64, String)> = {
            let mut stmt = tx
                .prepare(
                    "SELECT id, state FROM tasks WHERE state IN ('queued', 'assigned', 'running') ORDER BY id",
                )
                .map_err(|e| self.err(e))?;
            stmt.query_map((), |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(|e| self.err(e))?
                .collect::<Result<_, _>>()
                .map_err(|e| self.err(e))?
        };
        let now = now_ms();
        for (id, state) in &active {
            tx.execute(
                "UPDATE tasks SET state = 'cancelled', updated_at = ?2 WHERE id = ?1",
                params![id, now],
            )
            .map_err(|e| self.err(e))?;
            event(
                &tx,
                *id,
                "cancelled",
                TaskState::parse(state),
                Some(agent),
                Some(reason),
                now,
            )
            .map_err(|e| self.err(e))?;
            release_task_locks(&tx, *id, agent, now).map_err(|e| self.err(e))?;
        }
        tx.commit().map_err(|e| self.err(e))?;
        Ok(active.into_iter().map(|(id, _)| id).collect())
    }

    /// Task events after cursor `after` (0: from the start), oldest first, at most `limit`.
    pub fn task_events(&self, after: i64, limit: usize) -> Result<Vec<TaskEvent>, StoreError> {
        let events = self.events(
            &crate::EventFilter {
                after,
                subject: Some(Subject::Task),
                ..Default::default()
            },
            limit,
        )?;
        Ok(events
            .into_iter()
            .map(|e| TaskEvent {
                id: e.id,
                task_id: e.subject_id.parse().unwrap_or(0),
                kind: e.kind,
                from_state: e.from_state.as_deref().and_then(TaskState::parse),
                agent: e.agent,
                detail: e.detail,
                ts: e.ts,
            })
            .collect())
    }

    /// Sets the priority of a task not yet running (`vox_reorder_task`).
    pub fn task_set_priority(&self, id: i64, priority: i64, by: &str) -> Result<Task, StoreError> {
        let mut c = self.conn()?;
        let tx = c.transaction().map_err(|e| self.err(e))?;
        let task = Self::task_in(&tx, id)
            .map_err(|e| self.err(e))?
            .ok_or_else(|| StoreError::NotFound(format!("no task {id}")))?;
        if !matches!(task.state, TaskState::Queued | TaskState::Assigned) {
            return Err(StoreError::Conflict(format!(
                "task {id} is {}: only a queued or assigned task can be reordered",
                task.state.as_str()
            )));
        }
        let now = now_ms();
        tx.execute(
            "UPDATE tasks SET priority = ?2, updated_at = ?3 WHERE id = ?1",
            params![id, priority, now],
        )
        .map_err(|e| self.err(e))?;
        let detail = format!("priority {} -> {priority}", task.priority);
        event(&tx, id, "reprioritized", None, Some(by), Some(&detail), now)
            .map_err(|e| self.err(e))?;
        let task = Self::task_in(&tx, id).map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        task.ok_or_else(|| StoreError::NotFound(format!("no task {id}")))
    }

    /// Tasks owned by `agent`: its queue (assigned and running) or, with `all`, every task it
    /// ever owned; running first, then by priority.
    pub fn tasks_of(&self, agent: &str, all: bool, limit: usize) -> Result<Vec<Task>, StoreError> {
        let c = self.conn()?;
        let mut stmt = c
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM tasks WHERE owner = ?1
                   AND (?2 <> 0 OR state IN ('assigned', 'running'))
                 ORDER BY state = 'running' DESC, priority DESC, id LIMIT ?3"
            ))
            .map_err(|e| self.err(e))?;
        let mut tasks: Vec<Task> = stmt
            .query_map(params![agent, all, limit as i64], row_to_task)
            .map_err(|e| self.err(e))?
            .collect::<Result<_, _>>()
            .map_err(|e| self.err(e))?;
        for t in &mut tasks {
            t.depends_on = deps_of(&c, t.id).map_err(|e| self.err(e))?;
        }
        Ok(tasks)
    }

    /// How many tasks are in each state.
    pub fn task_counts(&self) -> Result<std::collections::BTreeMap<String, i64>, StoreError> {
        let c = self.conn()?;
        let mut stmt = c
            .prepare_cached("SELECT state, count(*) FROM tasks GROUP BY state")
            .map_err(|e| self.err(e))?;
        stmt.query_map((), |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(|e| self.err(e))?
            .collect::<Result<_, _>>()
            .map_err(|e| self.err(e))
    }

    /// The pending clarifications gating task `id`.
    pub fn task_gates(&self, id: i64) -> Result<Vec<i64>, StoreError> {
        let c = self.conn()?;
        let mut stmt = c
            .prepare_cached(
                "SELECT g.clarification_id FROM clarification_gates g
                   JOIN clarifications q ON q.id = g.clarification_id
                 WHERE g.task_id = ?1 AND q.state = 'pending' ORDER BY 1",
            )
            .map_err(|e| self.err(e))?;
        stmt.query_map([id], |r| r.get(0))
            .map_err(|e| self.err(e))?
            .collect::<Result<_, _>>()
            .map_err(|e| self.err(e))
    }

    /// Who submitted task `id` (an agent's id, or `operator`), from its first event.
    pub fn task_submitter(&self, id: i64) -> Result<Option<String>, StoreError> {
        let c = self.conn()?;
        c.query_row(
            "SELECT agent FROM events WHERE subject = 'task' AND subject_id = ?1 AND kind = 'submitted' ORDER BY id LIMIT 1",
            [id.to_string()],
            |r| r.get(0),
        )
        .optional()
        .map(Option::flatten)
        .map_err(|e| self.err(e))
    }
}
