//! Routing: ready tasks go to active agents with room. A task goes to the agent it is pinned
//! to, else to the one holding a lock on one of its files (file affinity), else to the agent
//! with the most room; a task whose files are held by two other agents waits.

use crate::sql::{Sql, SqlExt, params};
use crate::tasks::{READY, TaskState, event as task_event};
use crate::{Store, StoreError, now_ms};
use serde::Serialize;
use std::collections::BTreeMap;

/// One assignment the dispatcher made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Assignment {
    /// The task assigned.
    pub task_id: i64,
    /// The agent it went to.
    pub agent: String,
    /// `pinned`, `file affinity` or `least loaded`.
    pub why: &'static str,
}

/// Active agents and how many more tasks each can take.
fn room_in(c: &dyn Sql) -> crate::sql::Result<BTreeMap<String, i64>> {
    c.prepare_cached(
        "SELECT a.id, a.capacity - (SELECT count(*) FROM tasks t
                 WHERE t.owner = a.id AND t.state IN ('assigned', 'running'))
         FROM agents a WHERE a.state = 'active'",
    )?
    .query_map((), |r| Ok((r.get::<String>(0)?, r.get::<i64>(1)?)))?
    .filter(|r| r.as_ref().map_or(true, |(_, room)| *room > 0))
    .collect()
}

/// The agents other than none holding live locks on `files`.
fn holders_in(c: &dyn Sql, files: &[String], now: i64) -> crate::sql::Result<Vec<String>> {
    let mut holders = Vec::new();
    let mut stmt =
        c.prepare_cached("SELECT agent FROM file_locks WHERE path = ?1 AND expires_at > ?2")?;
    for f in files {
        let Ok(path) = crate::locks::normalize_path(f) else {
            continue;
        };
        for a in stmt.query_map(params![path, now], |r| r.get::<String>(0))? {
            let a = a?;
            if !holders.contains(&a) {
                holders.push(a);
            }
        }
    }
    Ok(holders)
}

fn assign_in(c: &dyn Sql, task: i64, agent: &str, why: &str, now: i64) -> crate::sql::Result<()> {
    c.execute(
        "UPDATE tasks SET state = 'assigned', owner = ?2, updated_at = ?3 WHERE id = ?1",
        params![task, agent, now],
    )?;
    task_event(
        c,
        task,
        "assigned",
        Some(TaskState::Queued),
        Some(agent),
        Some(why),
        now,
    )
}

impl Store {
    /// Assigns ready tasks (at most `limit` looked at) to active agents with room.
    pub fn dispatch(&self, limit: usize) -> Result<Vec<Assignment>, StoreError> {
        let now = now_ms();
        let mut c = self.conn()?;
        // No agent has room: nothing to do, and no need to wait for the write lock (on
        // PostgreSQL every replica's writes queue for it). Whatever makes room later (a task
        // ending, an agent spawned or resumed) dispatches after it commits.
        if room_in(&c).map_err(|e| self.err(e))?.is_empty() {
            return Ok(vec![]);
        }
        let tx = c.transaction().map_err(|e| self.err(e))?;
        let mut room = room_in(&tx).map_err(|e| self.err(e))?;
        if room.is_empty() {
            return Ok(vec![]);
        }
        let ready: Vec<(i64, String, Option<String>)> = tx
            .prepare_cached(&format!(
                "SELECT id, files, pinned_agent FROM tasks WHERE {READY}
                 ORDER BY priority DESC, id LIMIT ?1"
            ))
            .and_then(|mut s| {
                s.query_map([limit as i64], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                    .collect::<Result<_, _>>()
            })
            .map_err(|e| self.err(e))?;
        let mut made = Vec::new();
        for (id, files, pinned) in ready {
            if room.is_empty() {
                break;
            }
            let files: Vec<String> = serde_json::from_str(&files).unwrap_or_default();
            let holders = holders_in(&tx, &files, now).map_err(|e| self.err(e))?;
            let (agent, why) = match (pinned, holders.as_slice()) {
                (_, [_, _, ..]) => continue,
                (Some(p), [h]) if *h != p => continue,
                (Some(p), _) => (p, "pinned"),
                (None, [h]) => (h.clone(), "file affinity"),
                (None, []) => match room
                    .iter()
                    .max_by_key(|(a, r)| (**r, std::cmp::Reverse(*a)))
                {
                    Some((a, _)) => (a.clone(), "least loaded"),
                    None => break,
                },
            };
            let Some(r) = room.get_mut(&agent) else {
                continue;
            };
            *r -= 1;
            if *r == 0 {
                room.remove(&agent);
            }
            assign_in(&tx, id, &agent, why, now).map_err(|e| self.err(e))?;
            made.push(Assignment {
                task_id: id,
                agent,
                why,
            });
        }
        tx.commit().map_err(|e| self.err(e))?;
        Ok(made)
    }

    /// Puts back in the queue the tasks waiting (assigned, not started) on paused agents, and
    /// on agents holding at least two more waiting tasks than the least loaded active agent
    /// with room; the caller then dispatches. Returns the tasks moved.
    pub fn rebalance(&self, by: &str) -> Result<Vec<i64>, StoreError> {
        let now = now_ms();
        let mut c = self.conn()?;
        let tx = c.transaction().map_err(|e| self.err(e))?;
        let waiting: Vec<(String, String, i64)> = tx
            .prepare(
                "SELECT a.id, a.state, (SELECT count(*) FROM tasks t
                     WHERE t.owner = a.id AND t.state = 'assigned' AND t.pinned_agent IS NULL)
                 FROM agents a WHERE a.state <> 'retired' ORDER BY a.id",
            )
            .and_then(|mut s| {
                s.query_map((), |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                    .collect::<Result<_, _>>()
            })
            .map_err(|e| self.err(e))?;
        let room = room_in(&tx).map_err(|e| self.err(e))?;
        let least = waiting
            .iter()
            .filter(|(a, ..)| room.contains_key(a))
            .map(|(_, _, n)| *n)
            .min();
        let mut moved = Vec::new();
        for (agent, state, n) in waiting {
            let excess = if state == "paused" {
                n
            } else {
                least.map_or(0, |l| (n - l) / 2)
            };
            if excess <= 0 {
                continue;
            }
            let ids: Vec<i64> = tx
                .prepare_cached(
                    "SELECT id FROM tasks WHERE owner = ?1 AND state = 'assigned' AND pinned_agent IS NULL
                     ORDER BY priority, id DESC LIMIT ?2",
                )
                .and_then(|mut s| {
                    s.query_map(params![agent, excess], |r| r.get(0))?
                        .collect::<Result<_, _>>()
                })
                .map_err(|e| self.err(e))?;
            for id in ids {
                tx.execute(
                    "UPDATE tasks SET state = 'queued', owner = NULL, updated_at = ?2 WHERE id = ?1",
                    params![id, now],
                )
                .map_err(|e| self.err(e))?;
                task_event(
                    &tx,
                    id,
                    "queued",
                    Some(TaskState::Assigned),
                    Some(by),
                    Some(&format!("rebalanced away from {agent}")),
                    now,
                )
                .map_err(|e| self.err(e))?;
                moved.push(id);
            }
        }
        tx.commit().map_err(|e| self.err(e))?;
        Ok(moved)
    }
}
