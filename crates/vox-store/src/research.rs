//! Research runs: a question, the model that answered it, the claims it made (kept with the
//! citations that resolved, or dropped with why), and drafts written from the kept claims.

use crate::sql::{OptionalExtension, Sql, SqlExt, params};
use crate::{Store, StoreError, now_ms};
use serde::Serialize;

/// A research run.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ResearchRun {
    /// Row id.
    pub id: i64,
    /// The question asked.
    pub question: String,
    /// The registry id of the model that answered.
    pub model_id: String,
    /// `running`, `done` or `failed`.
    pub state: String,
    /// Why the run failed, for a `failed` run.
    pub error: Option<String>,
    /// Pieces of evidence the model was shown.
    pub evidence: i64,
    /// Input tokens the model call used, as the provider reported them.
    pub input_tokens: i64,
    /// Output tokens the model call used.
    pub output_tokens: i64,
    /// When the run started, in ms since the Unix epoch.
    pub created_at: i64,
    /// When it ended (done or failed), in ms since the Unix epoch.
    pub finished_at: Option<i64>,
}

/// A claim of a run.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ResearchClaim {
    /// Row id.
    pub id: i64,
    /// The run that made the claim.
    pub run_id: i64,
    /// The claim as the model stated it.
    pub text: String,
    /// The citations, each as checked: `{"kind": "file", "path", "start_line", "end_line",
    /// "sha256"}`, `{"kind": "kb", "id", "sha256"}` or `{"kind": "memory", "key", "sha256"}` for
    /// a kept claim; as the model wrote them for a dropped one.
    pub citations: serde_json::Value,
    /// Whether every citation resolved (kept) or not (dropped).
    pub kept: bool,
    /// Why a dropped claim was dropped.
    pub reason: Option<String>,
}

/// A draft written from a run's kept claims.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Draft {
    /// Row id.
    pub id: i64,
    /// The run whose kept claims it was written from.
    pub run_id: i64,
    /// The draft's title.
    pub title: String,
    /// The draft's text.
    pub body: String,
    /// When it was written, in ms since the Unix epoch.
    pub created_at: i64,
}

/// A claim about to be stored.
pub struct NewClaim<'a> {
    /// The claim as the model stated it.
    pub text: &'a str,
    /// Its citations: as checked for a kept claim, as written for a dropped one.
    pub citations: &'a serde_json::Value,
    /// Whether every citation resolved.
    pub kept: bool,
    /// Why a dropped claim was dropped.
    pub reason: Option<&'a str>,
}

const RUN_COLUMNS: &str = "id, question, model_id, state, error, evidence, input_tokens, output_tokens, created_at, finished_at";

fn row_to_run(r: &crate::sql::Row) -> crate::sql::Result<ResearchRun> {
    Ok(ResearchRun {
        id: r.get(0)?,
        question: r.get(1)?,
        model_id: r.get(2)?,
        state: r.get(3)?,
        error: r.get(4)?,
        evidence: r.get(5)?,
        input_tokens: r.get(6)?,
        output_tokens: r.get(7)?,
        created_at: r.get(8)?,
        finished_at: r.get(9)?,
    })
}

impl Store {
    /// Records a run that has started.
    pub fn research_start(
        &self,
        question: &str,
        model_id: &str,
    ) -> Result<ResearchRun, StoreError> {
        let c = self.conn()?;
        c.execute(
            "INSERT INTO research_runs (question, model_id, state, created_at) VALUES (?1, ?2, 'running', ?3)",
            params![question, model_id, now_ms()],
        )
        .map_err(|e| self.err(e))?;
        let id = c.last_insert_rowid().map_err(|e| self.err(e))?;
        drop(c);
        self.research_run(id)?
            .ok_or_else(|| StoreError::NotFound(format!("research run {id}")))
    }

    /// Stores a run's claims and marks it done, in one transaction: a run is never done
    /// with only some of its claims.
    pub fn research_finish(
        &self,
        id: i64,
        evidence: i64,
        tokens: (i64, i64),
        claims: &[NewClaim<'_>],
    ) -> Result<(), StoreError> {
        let mut c = self.conn()?;
        let tx = c.transaction().map_err(|e| self.err(e))?;
        for cl in claims {
            tx.execute(
                "INSERT INTO research_claims (run_id, text, citations, kept, reason) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![id, cl.text, cl.citations.to_string(), cl.kept, cl.reason],
            )
            .map_err(|e| self.err(e))?;
        }
        let n = tx
            .execute(
                "UPDATE research_runs SET state = 'done', evidence = ?2, input_tokens = ?3, output_tokens = ?4, finished_at = ?5 WHERE id = ?1 AND state = 'running'",
                params![id, evidence, tokens.0, tokens.1, now_ms()],
            )
            .map_err(|e| self.err(e))?;
        if n != 1 {
            return Err(StoreError::Conflict(format!(
                "research run {id} is not running"
            )));
        }
        tx.commit().map_err(|e| self.err(e))
    }

    /// Marks a run failed, with why.
    pub fn research_fail(&self, id: i64, error: &str) -> Result<(), StoreError> {
        self.conn()?
            .execute(
                "UPDATE research_runs SET state = 'failed', error = ?2, finished_at = ?3 WHERE id = ?1 AND state = 'running'",
                params![id, error, now_ms()],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// The run with this id, if any.
    pub fn research_run(&self, id: i64) -> Result<Option<ResearchRun>, StoreError> {
        self.conn()?
            .query_row(
                &format!("SELECT {RUN_COLUMNS} FROM research_runs WHERE id = ?1"),
                [id],
                row_to_run,
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// Runs, newest first; only those in `state` when given.
    pub fn research_runs(
        &self,
        state: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ResearchRun>, StoreError> {
        let c = self.conn()?;
        let mut stmt = c
            .prepare(&format!(
                "SELECT {RUN_COLUMNS} FROM research_runs WHERE (?1 IS NULL OR state = ?1) ORDER BY id DESC LIMIT ?2"
            ))
            .map_err(|e| self.err(e))?;
        stmt.query_map(params![state, limit as i64], row_to_run)
            .map_err(|e| self.err(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))
    }

    /// A run's claims, in the order the model made them.
    pub fn research_claims(&self, run_id: i64) -> Result<Vec<ResearchClaim>, StoreError> {
        let c = self.conn()?;
        let mut stmt = c
            .prepare("SELECT id, run_id, text, citations, kept, reason FROM research_claims WHERE run_id = ?1 ORDER BY id")
            .map_err(|e| self.err(e))?;
        stmt.query_map([run_id], |r| {
            let citations: String = r.get(3)?;
            Ok(ResearchClaim {
                id: r.get(0)?,
                run_id: r.get(1)?,
                text: r.get(2)?,
                citations: serde_json::from_str(&citations).unwrap_or(serde_json::Value::Null),
                kept: r.get(4)?,
                reason: r.get(5)?,
            })
        })
        .map_err(|e| self.err(e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| self.err(e))
    }

    /// Stores a draft of a run.
    pub fn research_draft(
        &self,
        run_id: i64,
        title: &str,
        body: &str,
    ) -> Result<Draft, StoreError> {
        let now = now_ms();
        let c = self.conn()?;
        c.execute(
            "INSERT INTO research_drafts (run_id, title, body, created_at) VALUES (?1, ?2, ?3, ?4)",
            params![run_id, title, body, now],
        )
        .map_err(|e| self.err(e))?;
        Ok(Draft {
            id: c.last_insert_rowid().map_err(|e| self.err(e))?,
            run_id,
            title: title.into(),
            body: body.into(),
            created_at: now,
        })
    }
}

/// A person's approval of a draft.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct DraftApproval {
    /// The approved draft.
    pub draft_id: i64,
    /// Who approved it.
    pub approved_by: String,
    /// The approver's note (may be empty).
    pub note: String,
    /// When it was approved, in ms since the Unix epoch.
    pub approved_at: i64,
}

/// One submission of a draft to a destination.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Submission {
    /// Row id.
    pub id: i64,
    /// The draft submitted.
    pub draft_id: i64,
    /// The destination's name in `.vox/publish.toml`.
    pub destination: String,
    /// `file`, `branch` or `webhook`.
    pub kind: String,
    /// `pending` (an external job still running), `published` or `failed`.
    pub state: String,
    /// Where it went: a workspace path, or the webhook's URL.
    pub location: Option<String>,
    /// What happened: why it failed, or the webhook's answer.
    pub detail: Option<String>,
    /// An external job's status URL, which `vox_external_job_status` polls.
    pub status_url: Option<String>,
    /// When it was submitted, in ms since the Unix epoch.
    pub created_at: i64,
    /// When its state last changed, in ms since the Unix epoch.
    pub updated_at: i64,
}

const SUBMISSION_COLUMNS: &str =
    "id, draft_id, destination, kind, state, location, detail, status_url, created_at, updated_at";

fn row_to_submission(r: &crate::sql::Row) -> crate::sql::Result<Submission> {
    Ok(Submission {
        id: r.get(0)?,
        draft_id: r.get(1)?,
        destination: r.get(2)?,
        kind: r.get(3)?,
        state: r.get(4)?,
        location: r.get(5)?,
        detail: r.get(6)?,
        status_url: r.get(7)?,
        created_at: r.get(8)?,
        updated_at: r.get(9)?,
    })
}

impl Store {
    /// The draft with this id, if any.
    pub fn research_draft_get(&self, id: i64) -> Result<Option<Draft>, StoreError> {
        self.conn()?
            .query_row(
                "SELECT id, run_id, title, body, created_at FROM research_drafts WHERE id = ?1",
                [id],
                |r| {
                    Ok(Draft {
                        id: r.get(0)?,
                        run_id: r.get(1)?,
                        title: r.get(2)?,
                        body: r.get(3)?,
                        created_at: r.get(4)?,
                    })
                },
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// Records a person's approval of a draft (a second approval is a conflict).
    pub fn draft_approve(
        &self,
        draft_id: i64,
        by: &str,
        note: &str,
    ) -> Result<DraftApproval, StoreError> {
        let now = now_ms();
        let n = self
            .conn()?
            .execute(
                "INSERT INTO draft_approvals (draft_id, approved_by, note, approved_at) VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
                params![draft_id, by, note, now],
            )
            .map_err(|e| self.err(e))?;
        if n == 0 {
            return Err(StoreError::Conflict(format!(
                "draft {draft_id} is already approved"
            )));
        }
        Ok(DraftApproval {
            draft_id,
            approved_by: by.into(),
            note: note.into(),
            approved_at: now,
        })
    }

    /// The approval of draft `draft_id`, if it has one.
    pub fn draft_approval(&self, draft_id: i64) -> Result<Option<DraftApproval>, StoreError> {
        self.conn()?
            .query_row(
                "SELECT draft_id, approved_by, note, approved_at FROM draft_approvals WHERE draft_id = ?1",
                [draft_id],
                |r| {
                    Ok(DraftApproval {
                        draft_id: r.get(0)?,
                        approved_by: r.get(1)?,
                        note: r.get(2)?,
                        approved_at: r.get(3)?,
                    })
                },
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// Records a submission as it ended (or `pending` with a status to poll).
    #[allow(clippy::too_many_arguments)]
    pub fn submission_add(
        &self,
        draft_id: i64,
        destination: &str,
        kind: &str,
        state: &str,
        location: Option<&str>,
        detail: Option<&str>,
        status_url: Option<&str>,
    ) -> Result<Submission, StoreError> {
        let now = now_ms();
        let c = self.conn()?;
        c.execute(
            "INSERT INTO submissions (draft_id, destination, kind, state, location, detail, status_url, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)",
            params![draft_id, destination, kind, state, location, detail, status_url, now],
        )
        .map_err(|e| self.err(e))?;
        let id = c.last_insert_rowid().map_err(|e| self.err(e))?;
        drop(c);
        self.submission(id)?
            .ok_or_else(|| StoreError::NotFound(format!("submission {id}")))
    }

    /// Moves a pending submission to `state` with a detail.
    pub fn submission_update(&self, id: i64, state: &str, detail: &str) -> Result<(), StoreError> {
        self.conn()?
            .execute(
                "UPDATE submissions SET state = ?2, detail = ?3, updated_at = ?4 WHERE id = ?1",
                params![id, state, detail, now_ms()],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// The submission with this id, if any.
    pub fn submission(&self, id: i64) -> Result<Option<Submission>, StoreError> {
        self.conn()?
            .query_row(
                &format!("SELECT {SUBMISSION_COLUMNS} FROM submissions WHERE id = ?1"),
                [id],
                row_to_submission,
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// Submissions, newest first, of one draft or all.
    pub fn submissions(
        &self,
        draft_id: Option<i64>,
        limit: usize,
    ) -> Result<Vec<Submission>, StoreError> {
        let c = self.conn()?;
        let mut stmt = c
            .prepare(&format!(
                "SELECT {SUBMISSION_COLUMNS} FROM submissions WHERE (?1 IS NULL OR draft_id = ?1) ORDER BY id DESC LIMIT ?2"
            ))
            .map_err(|e| self.err(e))?;
        stmt.query_map(params![draft_id, limit as i64], row_to_submission)
            .map_err(|e| self.err(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))
    }
}
