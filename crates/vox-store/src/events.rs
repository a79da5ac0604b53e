//! One stream of orchestrator events: every transition of a task, an agent, a lock, a plan, a
//! handoff, a clarification or an approval is a row, read by cursor (`vox_poll_events`).

use crate::sql::{Sql, SqlExt, params};
use crate::{Store, StoreError};
use serde::Serialize;

/// What an event is about.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Subject {
    /// A task (submitted, moved between states, reprioritized).
    Task,
    /// An agent (spawned, paused, retired, ...).
    Agent,
    /// A file lock (claimed, renewed, released, a refused claim).
    Lock,
    /// A plan (created, replanned).
    Plan,
    /// A handoff between agents.
    Handoff,
    /// A clarification (asked, answered, dismissed).
    Clarification,
    /// An approval (requested, approved, rejected, expired).
    Approval,
}

impl Subject {
    /// The snake_case spelling stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Subject::Task => "task",
            Subject::Agent => "agent",
            Subject::Lock => "lock",
            Subject::Plan => "plan",
            Subject::Handoff => "handoff",
            Subject::Clarification => "clarification",
            Subject::Approval => "approval",
        }
    }
    fn parse(s: &str) -> Subject {
        match s {
            "agent" => Subject::Agent,
            "lock" => Subject::Lock,
            "plan" => Subject::Plan,
            "handoff" => Subject::Handoff,
            "clarification" => Subject::Clarification,
            "approval" => Subject::Approval,
            _ => Subject::Task,
        }
    }
}

/// One event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Event {
    /// The cursor: events are read after an id.
    pub id: i64,
    /// What the event is about.
    pub subject: Subject,
    /// The task or plan number, the agent id, the file path...
    pub subject_id: String,
    /// What happened: `submitted`, a state moved to, `claimed`, `answered`...
    pub kind: String,
    /// The state the subject moved from, for a state change.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_state: Option<String>,
    /// Who did it (an agent id, or `operator`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// More about it: a reason, a priority change, a path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// When it happened, in ms since the Unix epoch.
    pub ts: i64,
}

/// An event about to be recorded (inside the transaction of the change it describes).
pub(crate) struct NewEvent<'a> {
    pub subject: Subject,
    pub subject_id: &'a str,
    pub kind: &'a str,
    pub from_state: Option<&'a str>,
    pub agent: Option<&'a str>,
    pub detail: Option<&'a str>,
}

pub(crate) fn record(c: &dyn Sql, e: NewEvent<'_>, ts: i64) -> crate::sql::Result<()> {
    c.prepare_cached(
        "INSERT INTO events (subject, subject_id, kind, from_state, agent, detail, ts)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![
        e.subject.as_str(),
        e.subject_id,
        e.kind,
        e.from_state,
        e.agent,
        e.detail,
        ts
    ])?;
    Ok(())
}

/// Which events to read.
#[derive(Debug, Clone, Default)]
pub struct EventFilter<'a> {
    /// Only events after this cursor (0: from the start).
    pub after: i64,
    /// Only events about this kind of subject.
    pub subject: Option<Subject>,
    /// Only events about this subject (a task number, an agent id, a path...).
    pub subject_id: Option<&'a str>,
    /// Only events done by, or about, this agent.
    pub agent: Option<&'a str>,
}

impl Store {
    /// Events matching `f`, oldest first, at most `limit`.
    pub fn events(&self, f: &EventFilter<'_>, limit: usize) -> Result<Vec<Event>, StoreError> {
        let c = self.conn()?;
        let mut stmt = c
            .prepare_cached(
                "SELECT id, subject, subject_id, kind, from_state, agent, detail, ts FROM events
                 WHERE id > ?1 AND (?2 IS NULL OR subject = ?2) AND (?3 IS NULL OR subject_id = ?3)
                   AND (?4 IS NULL OR agent = ?4 OR (subject = 'agent' AND subject_id = ?4))
                 ORDER BY id LIMIT ?5",
            )
            .map_err(|e| self.err(e))?;
        stmt.query_map(
            params![
                f.after,
                f.subject.map(Subject::as_str),
                f.subject_id,
                f.agent,
                limit as i64
            ],
            |r| {
                let subject: String = r.get(1)?;
                Ok(Event {
                    id: r.get(0)?,
                    subject: Subject::parse(&subject),
                    subject_id: r.get(2)?,
                    kind: r.get(3)?,
                    from_state: r.get(4)?,
                    agent: r.get(5)?,
                    detail: r.get(6)?,
                    ts: r.get(7)?,
                })
            },
        )
        .map_err(|e| self.err(e))?
        .collect::<Result<_, _>>()
        .map_err(|e| self.err(e))
    }

    /// The newest event's id (0 when there is none): a cursor that skips the past.
    pub fn events_head(&self) -> Result<i64, StoreError> {
        self.conn()?
            .query_row("SELECT coalesce(max(id), 0) FROM events", (), |r| r.get(0))
            .map_err(|e| self.err(e))
    }
}
