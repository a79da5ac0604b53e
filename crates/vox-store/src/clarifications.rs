//! Clarifications: a question for a person, optionally gating tasks (a gated task is not
//! dispatched while the question is pending). Answering or dismissing it lifts the gates.

use crate::events::{NewEvent, Subject, record};
use crate::sql::{OptionalExtension, Sql, SqlExt, params};
use crate::{Store, StoreError, now_ms};
use serde::Serialize;

pub const MAX_QUESTION: usize = 8 * 1024;
pub const MAX_ANSWER: usize = 64 * 1024;
pub const MAX_OPTIONS: usize = 16;
pub const MAX_GATED_TASKS: usize = 64;

/// A clarification's state.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ClarificationState {
    /// Waiting for a person; the tasks it gates are held back.
    Pending,
    /// A person answered it.
    Answered,
    /// A person dismissed it without an answer.
    Dismissed,
}

impl ClarificationState {
    /// The snake_case spelling stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            ClarificationState::Pending => "pending",
            ClarificationState::Answered => "answered",
            ClarificationState::Dismissed => "dismissed",
        }
    }
    fn parse(s: &str) -> Self {
        match s {
            "pending" => ClarificationState::Pending,
            "answered" => ClarificationState::Answered,
            _ => ClarificationState::Dismissed,
        }
    }
}

/// A question and, once resolved, its answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Clarification {
    /// Row id.
    pub id: i64,
    /// The question (at most 8 KiB).
    pub question: String,
    /// Suggested answers, if the asker gave any.
    pub options: Vec<String>,
    /// Who asked it (an agent id, or `operator`).
    pub asked_by: String,
    /// Whether it is pending, answered or dismissed.
    pub state: ClarificationState,
    /// The tasks it gates.
    pub gates: Vec<i64>,
    /// The answer (at most 64 KiB), once answered.
    pub answer: Option<String>,
    /// Who answered or dismissed it.
    pub resolved_by: Option<String>,
    /// When it was asked, in ms since the Unix epoch.
    pub created_at: i64,
    /// When it was answered or dismissed, in ms since the Unix epoch.
    pub resolved_at: Option<i64>,
}

fn clarification_in(c: &dyn Sql, id: i64) -> crate::sql::Result<Option<Clarification>> {
    let row = c
        .query_row(
            "SELECT id, question, options, asked_by, state, answer, resolved_by, created_at, resolved_at
             FROM clarifications WHERE id = ?1",
            [id],
            |r| {
                let options: String = r.get(2)?;
                let state: String = r.get(4)?;
                Ok(Clarification {
                    id: r.get(0)?,
                    question: r.get(1)?,
                    options: serde_json::from_str(&options).unwrap_or_default(),
                    asked_by: r.get(3)?,
                    state: ClarificationState::parse(&state),
                    gates: vec![],
                    answer: r.get(5)?,
                    resolved_by: r.get(6)?,
                    created_at: r.get(7)?,
                    resolved_at: r.get(8)?,
                })
            },
        )
        .optional()?;
    let Some(mut q) = row else { return Ok(None) };
    q.gates = c
        .prepare_cached(
            "SELECT task_id FROM clarification_gates WHERE clarification_id = ?1 ORDER BY task_id",
        )?
        .query_map([id], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    Ok(Some(q))
}

impl Store {
    /// Records a pending question from `by`, gating `gates` (tasks that exist and have not ended).
    pub fn clarification_ask(
        &self,
        question: &str,
        options: &[String],
        gates: &[i64],
        by: &str,
    ) -> Result<Clarification, StoreError> {
        let bad = |m: String| Err(StoreError::Invalid(m));
        if question.trim().is_empty() || question.len() > MAX_QUESTION {
            return bad(format!(
                "a question is 1 to {MAX_QUESTION} bytes, not {}",
                question.len()
            ));
        }
        if options.len() > MAX_OPTIONS || options.iter().any(|o| o.is_empty() || o.len() > 512) {
            return bad(format!("at most {MAX_OPTIONS} options of 1 to 512 bytes"));
        }
        if gates.len() > MAX_GATED_TASKS {
            return bad(format!(
                "a question gates at most {MAX_GATED_TASKS} tasks, not {}",
                gates.len()
            ));
        }
        let now = now_ms();
        let mut c = self.conn()?;
        let tx = c.transaction().map_err(|e| self.err(e))?;
        for t in gates {
            let state: Option<String> = tx
                .query_row("SELECT state FROM tasks WHERE id = ?1", [t], |r| r.get(0))
                .optional()
                .map_err(|e| self.err(e))?;
            match state.as_deref() {
                None => {
                    return Err(StoreError::NotFound(format!(
                        "gates names task {t}, which does not exist"
                    )));
                }
                Some("completed" | "failed" | "cancelled") => {
                    return Err(StoreError::Conflict(format!(
                        "task {t} has ended: a question cannot gate it"
                    )));
                }
                Some(_) => {}
            }
        }
        tx.execute(
            "INSERT INTO clarifications (question, options, asked_by, state, created_at)
             VALUES (?1, ?2, ?3, 'pending', ?4)",
            params![
                question,
                serde_json::to_string(options).unwrap_or_else(|_| "[]".into()),
                by,
                now
            ],
        )
        .map_err(|e| self.err(e))?;
        let id = tx.last_insert_rowid().map_err(|e| self.err(e))?;
        for t in gates {
            tx.execute(
                "INSERT INTO clarification_gates (clarification_id, task_id) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                params![id, t],
            )
            .map_err(|e| self.err(e))?;
        }
        record(
            &tx,
            NewEvent {
                subject: Subject::Clarification,
                subject_id: &id.to_string(),
                kind: "asked",
                from_state: None,
                agent: Some(by),
                detail: Some(&format!("gates {gates:?}")),
            },
            now,
        )
        .map_err(|e| self.err(e))?;
        let q = clarification_in(&tx, id).map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        q.ok_or_else(|| StoreError::NotFound(format!("no clarification {id}")))
    }

    /// Answers (`Some(answer)`) or dismisses (`None`) a pending question, lifting its gates.
    pub fn clarification_resolve(
        &self,
        id: i64,
        answer: Option<&str>,
        by: &str,
    ) -> Result<Clarification, StoreError> {
        if answer.is_some_and(|a| a.trim().is_empty() || a.len() > MAX_ANSWER) {
            return Err(StoreError::Invalid(format!(
                "an answer is 1 to {MAX_ANSWER} bytes"
            )));
        }
        let now = now_ms();
        let mut c = self.conn()?;
        let tx = c.transaction().map_err(|e| self.err(e))?;
        let q = clarification_in(&tx, id)
            .map_err(|e| self.err(e))?
            .ok_or_else(|| StoreError::NotFound(format!("no clarification {id}")))?;
        if q.state != ClarificationState::Pending {
            return Err(StoreError::Conflict(format!(
                "clarification {id} is {} already",
                q.state.as_str()
            )));
        }
        let to = if answer.is_some() {
            ClarificationState::Answered
        } else {
            ClarificationState::Dismissed
        };
        tx.execute(
            "UPDATE clarifications SET state = ?2, answer = ?3, resolved_by = ?4, resolved_at = ?5 WHERE id = ?1",
            params![id, to.as_str(), answer, by, now],
        )
        .map_err(|e| self.err(e))?;
        record(
            &tx,
            NewEvent {
                subject: Subject::Clarification,
                subject_id: &id.to_string(),
                kind: to.as_str(),
                from_state: Some("pending"),
                agent: Some(by),
                detail: answer,
            },
            now,
        )
        .map_err(|e| self.err(e))?;
        let q = clarification_in(&tx, id).map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        q.ok_or_else(|| StoreError::NotFound(format!("no clarification {id}")))
    }

    /// The clarification `id`.
    pub fn clarification_get(&self, id: i64) -> Result<Clarification, StoreError> {
        clarification_in(&self.conn()?, id)
            .map_err(|e| self.err(e))?
            .ok_or_else(|| StoreError::NotFound(format!("no clarification {id}")))
    }

    /// Clarifications, newest first: only pending ones unless `all`.
    pub fn clarifications(
        &self,
        all: bool,
        limit: usize,
    ) -> Result<Vec<Clarification>, StoreError> {
        let c = self.conn()?;
        let ids: Vec<i64> = c
            .prepare_cached(
                "SELECT id FROM clarifications WHERE ?1 <> 0 OR state = 'pending' ORDER BY id DESC LIMIT ?2",
            )
            .and_then(|mut s| {
                s.query_map(params![all, limit as i64], |r| r.get(0))?
                    .collect::<Result<_, _>>()
            })
            .map_err(|e| self.err(e))?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(q) = clarification_in(&c, id).map_err(|e| self.err(e))? {
                out.push(q);
            }
        }
        Ok(out)
    }
}
