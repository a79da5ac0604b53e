//! Plans and handoffs. A plan is a goal and a DAG of named steps, each stored as a task (its
//! dependencies the tasks of the steps it names); a replan adds steps and cancels others, as
//! one new revision. A handoff records that one agent passed context (and maybe a task) to
//! another; handoffs that continue an earlier one form its lineage.

use crate::events::{NewEvent, Subject, record};
use crate::sql::{OptionalExtension, Sql, SqlExt, params};
use crate::tasks::{NewTask, Task, TaskState, event as task_event, submit_in};
use crate::{Store, StoreError, now_ms};
use serde::Serialize;
use std::collections::BTreeMap;

/// Most steps of one plan, and longest goal and step key.
pub const MAX_PLAN_STEPS: usize = 256;
pub const MAX_PLAN_GOAL: usize = 4096;
pub const MAX_STEP_KEY: usize = 64;
/// Longest handoff summary and context (bytes).
pub const MAX_HANDOFF_SUMMARY: usize = 1024;
pub const MAX_HANDOFF_CONTEXT: usize = 256 * 1024;

/// One step as a caller describes it.
#[derive(Debug, Clone, Default)]
pub struct NewStep {
    /// Unique in its plan; other steps name it in `after`.
    pub key: String,
    /// The step's task (title, description, priority, files, pinned agent).
    pub task: NewTask,
    /// Keys of steps (of this plan, old or new) that must complete first.
    pub after: Vec<String>,
}

/// A step of a stored plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct PlanStep {
    /// The step's key, unique in its plan.
    pub key: String,
    /// The revision that added it.
    pub revision: i64,
    /// The step's task, as it is now.
    pub task: Task,
}

/// A stored plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Plan {
    /// Row id.
    pub id: i64,
    /// What the plan is for (at most 4,096 bytes).
    pub goal: String,
    /// Who made it.
    pub created_by: String,
    /// The current revision: 1 when created, one more per replan.
    pub revision: i64,
    /// Every step, of every revision.
    pub steps: Vec<PlanStep>,
    /// Steps per task state.
    pub progress: BTreeMap<String, i64>,
    /// Whether every step has ended (completed, failed or cancelled).
    pub finished: bool,
    /// When it was created, in ms since the Unix epoch.
    pub created_at: i64,
    /// When it was last replanned, in ms since the Unix epoch.
    pub updated_at: i64,
}

/// A recorded handoff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Handoff {
    /// Row id.
    pub id: i64,
    /// The agent that handed off.
    pub from_agent: String,
    /// The agent that takes over.
    pub to_agent: String,
    /// The task handed over with it, if any.
    pub task_id: Option<i64>,
    /// The handoff this one continues.
    pub parent: Option<i64>,
    /// What was done and what is left (at most 1,024 bytes).
    pub summary: String,
    /// What the next agent needs to go on (at most 256 KiB).
    pub context: String,
    /// When it was recorded, in ms since the Unix epoch.
    pub ts: i64,
}

fn bad(m: String) -> StoreError {
    StoreError::Invalid(m)
}

/// Checks new steps against each other and the plan's existing keys, and orders them so that
/// every step comes after the new steps it names. A cycle is refused, naming a step on it.
fn order_steps<'a>(
    steps: &'a [NewStep],
    existing: &BTreeMap<String, i64>,
) -> Result<Vec<&'a NewStep>, StoreError> {
    let mut keys = BTreeMap::new();
    for (i, s) in steps.iter().enumerate() {
        let k = s.key.as_str();
        let valid = !k.is_empty()
            && k.len() <= MAX_STEP_KEY
            && k.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        if !valid {
            return Err(bad(format!(
                "steps[{i}].key {k:?} is not 1 to {MAX_STEP_KEY} letters, digits, '.', '_' or '-'"
            )));
        }
        if existing.contains_key(k) || keys.insert(k, i).is_some() {
            return Err(bad(format!(
                "steps[{i}].key {k:?} is used twice in the plan"
            )));
        }
    }
    for (i, s) in steps.iter().enumerate() {
        for a in &s.after {
            if !keys.contains_key(a.as_str()) && !existing.contains_key(a) {
                return Err(bad(format!(
                    "steps[{i}] ({}) comes after {a:?}, which is no step of the plan",
                    s.key
                )));
            }
        }
    }
    // Depth-first topological order over the new steps (0 unseen, 1 on the path, 2 placed).
    let mut mark = vec![0u8; steps.len()];
    let mut order = Vec::with_capacity(steps.len());
    fn visit<'a>(
        i: usize,
        steps: &'a [NewStep],
        keys: &BTreeMap<&str, usize>,
        mark: &mut [u8],
        order: &mut Vec<&'a NewStep>,
    ) -> Result<(), StoreError> {
        match mark[i] {
            2 => return Ok(()),
            1 => {
                return Err(bad(format!(
                    "step {:?} depends on itself through its `after` steps: a plan's steps form no cycle",
                    steps[i].key
                )));
            }
            _ => {}
        }
        mark[i] = 1;
        for a in &steps[i].after {
            if let Some(&j) = keys.get(a.as_str()) {
                visit(j, steps, keys, mark, order)?;
            }
        }
        mark[i] = 2;
        order.push(&steps[i]);
        Ok(())
    }
    for i in 0..steps.len() {
        visit(i, steps, &keys, &mut mark, &mut order)?;
    }
    Ok(order)
}

/// Stores `steps` as tasks of plan `plan` at `revision`, inside `tx`.
fn add_steps_in(
    tx: &dyn Sql,
    plan: i64,
    revision: i64,
    steps: &[NewStep],
    by: &str,
    now: i64,
) -> Result<(), StoreError> {
    let sql = |e: crate::sql::Error| StoreError::Conflict(format!("storing the plan: {e}"));
    let mut known: BTreeMap<String, i64> = tx
        .prepare("SELECT key, task_id FROM plan_steps WHERE plan_id = ?1")
        .and_then(|mut s| {
            s.query_map([plan], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<_, _>>()
        })
        .map_err(sql)?;
    for step in order_steps(steps, &known)? {
        let mut t = step.task.clone();
        t.depends_on.extend(step.after.iter().map(|a| known[a]));
        let id = submit_in(tx, &t, by, now)?;
        tx.execute(
            "INSERT INTO plan_steps (plan_id, key, task_id, revision) VALUES (?1, ?2, ?3, ?4)",
            params![plan, step.key, id, revision],
        )
        .map_err(sql)?;
        known.insert(step.key.clone(), id);
    }
    Ok(())
}

fn plan_event(
    c: &dyn Sql,
    id: i64,
    kind: &str,
    by: &str,
    detail: &str,
    now: i64,
) -> crate::sql::Result<()> {
    record(
        c,
        NewEvent {
            subject: Subject::Plan,
            subject_id: &id.to_string(),
            kind,
            from_state: None,
            agent: Some(by),
            detail: Some(detail),
        },
        now,
    )
}

impl Store {
    /// Stores a plan and its steps as tasks, all or nothing.
    pub fn plan_create(&self, goal: &str, steps: &[NewStep], by: &str) -> Result<Plan, StoreError> {
        if goal.trim().is_empty() || goal.len() > MAX_PLAN_GOAL {
            return Err(bad(format!(
                "a plan's goal is 1 to {MAX_PLAN_GOAL} bytes, not {}",
                goal.len()
            )));
        }
        if steps.is_empty() || steps.len() > MAX_PLAN_STEPS {
            return Err(bad(format!(
                "a plan has 1 to {MAX_PLAN_STEPS} steps, not {}",
                steps.len()
            )));
        }
        let now = now_ms();
        let id = {
            let mut c = self.conn()?;
            let tx = c.transaction().map_err(|e| self.err(e))?;
            tx.execute(
                "INSERT INTO plans (goal, created_by, created_at, updated_at) VALUES (?1, ?2, ?3, ?3)",
                params![goal, by, now],
            )
            .map_err(|e| self.err(e))?;
            let id = tx.last_insert_rowid().map_err(|e| self.err(e))?;
            add_steps_in(&tx, id, 1, steps, by, now)?;
            plan_event(
                &tx,
                id,
                "created",
                by,
                &format!("{} steps", steps.len()),
                now,
            )
            .map_err(|e| self.err(e))?;
            tx.commit().map_err(|e| self.err(e))?;
            id
        };
        self.plan_get(id)
    }

    /// Applies a delta as the next revision: adds `add` (whose `after` may name old steps) and
    /// cancels the steps named in `cancel` that have not ended.
    pub fn plan_replan(
        &self,
        id: i64,
        add: &[NewStep],
        cancel: &[String],
        reason: &str,
        by: &str,
    ) -> Result<Plan, StoreError> {
        if add.is_empty() && cancel.is_empty() {
            return Err(bad("a replan adds or cancels at least one step".into()));
        }
        let now = now_ms();
        {
            let mut c = self.conn()?;
            let tx = c.transaction().map_err(|e| self.err(e))?;
            let revision: i64 = tx
                .query_row("SELECT revision FROM plans WHERE id = ?1", [id], |r| {
                    r.get(0)
                })
                .optional()
                .map_err(|e| self.err(e))?
                .ok_or_else(|| StoreError::NotFound(format!("no plan {id}")))?;
            let count: i64 = tx
                .query_row(
                    "SELECT count(*) FROM plan_steps WHERE plan_id = ?1",
                    [id],
                    |r| r.get(0),
                )
                .map_err(|e| self.err(e))?;
            if count as usize + add.len() > MAX_PLAN_STEPS {
                return Err(bad(format!(
                    "plan {id} would have {} steps; the limit is {MAX_PLAN_STEPS}",
                    count as usize + add.len()
                )));
            }
            for (i, key) in cancel.iter().enumerate() {
                let task: Option<(i64, String)> = tx
                    .query_row(
                        "SELECT t.id, t.state FROM plan_steps s JOIN tasks t ON t.id = s.task_id
                         WHERE s.plan_id = ?1 AND s.key = ?2",
                        params![id, key],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .optional()
                    .map_err(|e| self.err(e))?;
                let Some((task, state)) = task else {
                    return Err(StoreError::NotFound(format!(
                        "cancel[{i}]: plan {id} has no step {key:?}"
                    )));
                };
                if matches!(state.as_str(), "queued" | "assigned" | "running") {
                    tx.execute(
                        "UPDATE tasks SET state = 'cancelled', updated_at = ?2 WHERE id = ?1",
                        params![task, now],
                    )
                    .map_err(|e| self.err(e))?;
                    let from = match state.as_str() {
                        "queued" => TaskState::Queued,
                        "assigned" => TaskState::Assigned,
                        _ => TaskState::Running,
                    };
                    task_event(
                        &tx,
                        task,
                        "cancelled",
                        Some(from),
                        Some(by),
                        Some(reason),
                        now,
                    )
                    .map_err(|e| self.err(e))?;
                    crate::tasks::release_task_locks(&tx, task, by, now)
                        .map_err(|e| self.err(e))?;
                }
            }
            add_steps_in(&tx, id, revision + 1, add, by, now)?;
            tx.execute(
                "UPDATE plans SET revision = ?2, updated_at = ?3 WHERE id = ?1",
                params![id, revision + 1, now],
            )
            .map_err(|e| self.err(e))?;
            let detail = format!(
                "revision {}: {} added, {} cancelled: {reason}",
                revision + 1,
                add.len(),
                cancel.len()
            );
            plan_event(&tx, id, "replanned", by, &detail, now).map_err(|e| self.err(e))?;
            tx.commit().map_err(|e| self.err(e))?;
        }
        self.plan_get(id)
    }

    /// The plan `id` with its steps' tasks.
    pub fn plan_get(&self, id: i64) -> Result<Plan, StoreError> {
        let (goal, created_by, revision, created_at, updated_at, steps) = {
            let c = self.conn()?;
            let head: (String, String, i64, i64, i64) = c
                .query_row(
                    "SELECT goal, created_by, revision, created_at, updated_at FROM plans WHERE id = ?1",
                    [id],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
                )
                .optional()
                .map_err(|e| self.err(e))?
                .ok_or_else(|| StoreError::NotFound(format!("no plan {id}")))?;
            let rows: Vec<(String, i64, i64)> = c
                .prepare_cached(
                    "SELECT key, task_id, revision FROM plan_steps WHERE plan_id = ?1 ORDER BY task_id",
                )
                .and_then(|mut s| {
                    s.query_map([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                        .collect::<Result<_, _>>()
                })
                .map_err(|e| self.err(e))?;
            let mut steps = Vec::with_capacity(rows.len());
            for (key, task, revision) in rows {
                let task = Self::task_in(&c, task)
                    .map_err(|e| self.err(e))?
                    .ok_or_else(|| StoreError::NotFound(format!("no task {task}")))?;
                steps.push(PlanStep {
                    key,
                    revision,
                    task,
                });
            }
            (head.0, head.1, head.2, head.3, head.4, steps)
        };
        let mut progress = BTreeMap::new();
        for s in &steps {
            *progress
                .entry(s.task.state.as_str().to_owned())
                .or_insert(0) += 1;
        }
        let finished = steps.iter().all(|s| s.task.state.is_terminal());
        Ok(Plan {
            id,
            goal,
            created_by,
            revision,
            steps,
            progress,
            finished,
            created_at,
            updated_at,
        })
    }

    /// Records a handoff from `from` to `to`. With a task that `from` holds, the task becomes
    /// `to`'s (assigned, not started); with `parent`, it continues that handoff, which must
    /// have gone to `from`.
    #[allow(clippy::too_many_arguments)]
    pub fn handoff_record(
        &self,
        from: &str,
        to: &str,
        task_id: Option<i64>,
        parent: Option<i64>,
        summary: &str,
        context: &str,
    ) -> Result<Handoff, StoreError> {
        if summary.trim().is_empty() || summary.len() > MAX_HANDOFF_SUMMARY {
            return Err(bad(format!(
                "a handoff's summary is 1 to {MAX_HANDOFF_SUMMARY} bytes, not {}",
                summary.len()
            )));
        }
        if context.len() > MAX_HANDOFF_CONTEXT {
            return Err(bad(format!(
                "a handoff's context is at most {MAX_HANDOFF_CONTEXT} bytes, not {}",
                context.len()
            )));
        }
        if from == to {
            return Err(bad(format!("{from} cannot hand off to itself")));
        }
        let now = now_ms();
        let mut c = self.conn()?;
        let tx = c.transaction().map_err(|e| self.err(e))?;
        for a in [from, to] {
            let st: Option<String> = tx
                .query_row("SELECT state FROM agents WHERE id = ?1", [a], |r| r.get(0))
                .optional()
                .map_err(|e| self.err(e))?;
            match st.as_deref() {
                None if a == from && a == "operator" => {}
                None => return Err(StoreError::NotFound(format!("no agent {a}"))),
                Some("retired") if a == to => {
                    return Err(StoreError::Conflict(format!(
                        "agent {a} is retired: nothing can be handed to it"
                    )));
                }
                Some(_) => {}
            }
        }
        if let Some(p) = parent {
            let to_of_parent: Option<String> = tx
                .query_row("SELECT to_agent FROM handoffs WHERE id = ?1", [p], |r| {
                    r.get(0)
                })
                .optional()
                .map_err(|e| self.err(e))?;
            match to_of_parent {
                None => return Err(StoreError::NotFound(format!("no handoff {p}"))),
                Some(t) if t != from => {
                    return Err(StoreError::Conflict(format!(
                        "handoff {p} went to {t}, not to {from}: only its receiver continues it"
                    )));
                }
                Some(_) => {}
            }
        }
        if let Some(t) = task_id {
            let task = Self::task_in(&tx, t)
                .map_err(|e| self.err(e))?
                .ok_or_else(|| StoreError::NotFound(format!("no task {t}")))?;
            if task.state.is_terminal() {
                return Err(StoreError::Conflict(format!(
                    "task {t} is {}: an ended task is not handed off",
                    task.state.as_str()
                )));
            }
            if from != "operator" && task.owner.as_deref() != Some(from) {
                return Err(StoreError::Conflict(format!(
                    "task {t} is held by {}, not by {from}",
                    task.owner.as_deref().unwrap_or("nobody")
                )));
            }
            tx.execute(
                "UPDATE tasks SET state = 'assigned', owner = ?2, pinned_agent = CASE WHEN pinned_agent IS NULL THEN NULL ELSE ?2 END, updated_at = ?3 WHERE id = ?1",
                params![t, to, now],
            )
            .map_err(|e| self.err(e))?;
            task_event(
                &tx,
                t,
                "assigned",
                Some(task.state),
                Some(to),
                Some(&format!("handed off by {from}")),
                now,
            )
            .map_err(|e| self.err(e))?;
        }
        tx.execute(
            "INSERT INTO handoffs (from_agent, to_agent, task_id, parent, summary, context, ts)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![from, to, task_id, parent, summary, context, now],
        )
        .map_err(|e| self.err(e))?;
        let id = tx.last_insert_rowid().map_err(|e| self.err(e))?;
        record(
            &tx,
            NewEvent {
                subject: Subject::Handoff,
                subject_id: &id.to_string(),
                kind: "handed_off",
                from_state: None,
                agent: Some(from),
                detail: Some(&format!("to {to}: {summary}")),
            },
            now,
        )
        .map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(Handoff {
            id,
            from_agent: from.to_owned(),
            to_agent: to.to_owned(),
            task_id,
            parent,
            summary: summary.to_owned(),
            context: context.to_owned(),
            ts: now,
        })
    }

    /// Handoffs, oldest first: of one task, or those an agent gave or got, or (neither) all;
    /// with `chain_of`, the handoff's ancestors then itself.
    pub fn handoffs(
        &self,
        task_id: Option<i64>,
        agent: Option<&str>,
        chain_of: Option<i64>,
        limit: usize,
    ) -> Result<Vec<Handoff>, StoreError> {
        let c = self.conn()?;
        // The chain is seeded with `chain_of`; without one it holds only NULL and is not asked.
        let sql = "WITH RECURSIVE chain(id) AS (SELECT ?3 UNION SELECT h.parent FROM handoffs h
                 JOIN chain ON h.id = chain.id WHERE h.parent IS NOT NULL)
             SELECT id, from_agent, to_agent, task_id, parent, summary, context, ts FROM handoffs
             WHERE (?3 IS NULL OR id IN (SELECT id FROM chain)) AND (?1 IS NULL OR task_id = ?1)
               AND (?2 IS NULL OR from_agent = ?2 OR to_agent = ?2)
             ORDER BY id LIMIT ?4";
        let mut stmt = c.prepare_cached(sql).map_err(|e| self.err(e))?;
        stmt.query_map(params![task_id, agent, chain_of, limit as i64], |r| {
            Ok(Handoff {
                id: r.get(0)?,
                from_agent: r.get(1)?,
                to_agent: r.get(2)?,
                task_id: r.get(3)?,
                parent: r.get(4)?,
                summary: r.get(5)?,
                context: r.get(6)?,
                ts: r.get(7)?,
            })
        })
        .map_err(|e| self.err(e))?
        .collect::<Result<_, _>>()
        .map_err(|e| self.err(e))
    }
}
