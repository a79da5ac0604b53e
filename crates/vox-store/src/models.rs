//! The models' durable state: sticky model preferences, recorded benchmarks, chat history.

use crate::sql::{OptionalExtension, Sql, SqlExt, params};
use crate::{Store, StoreError, now_ms};
use serde::Serialize;
use std::collections::BTreeMap;

/// A recorded benchmark result.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Benchmark {
    /// Row id.
    pub id: i64,
    /// The registry id of the model measured.
    pub model_id: String,
    /// The task category (codegen, review, testing, planning, chat, research, summarize, vision).
    pub category: String,
    /// 0 to 1.
    pub score: f64,
    /// What was measured, e.g. `pass@1` (may be empty).
    pub metric: String,
    /// Free-text notes (may be empty).
    pub notes: String,
    /// When it was recorded, in ms since the Unix epoch.
    pub recorded_at: i64,
}

/// One chat message.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ChatMessage {
    /// Row id.
    pub id: i64,
    /// The chat session it belongs to (`default` unless the caller named one).
    pub session: String,
    /// `user` or `assistant`.
    pub role: String,
    /// The message text.
    pub content: String,
    /// The model that answered (assistant messages only).
    pub model_id: Option<String>,
    /// Input tokens of the answer's call, as the provider reported them.
    pub input_tokens: Option<i64>,
    /// Output tokens of the answer's call.
    pub output_tokens: Option<i64>,
    /// What the answer cost in USD, from the registry's prices.
    pub cost_usd: Option<f64>,
    /// When it was stored, in ms since the Unix epoch.
    pub created_at: i64,
}

/// An answer's accounting, stored with it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spend {
    /// Input tokens, as the provider reported them.
    pub input_tokens: i64,
    /// Output tokens, as the provider reported them.
    pub output_tokens: i64,
    /// The cost in USD, from the registry's prices.
    pub cost_usd: f64,
}

fn row_to_benchmark(r: &crate::sql::Row) -> crate::sql::Result<Benchmark> {
    Ok(Benchmark {
        id: r.get(0)?,
        model_id: r.get(1)?,
        category: r.get(2)?,
        score: r.get(3)?,
        metric: r.get(4)?,
        notes: r.get(5)?,
        recorded_at: r.get(6)?,
    })
}

fn row_to_chat(r: &crate::sql::Row) -> crate::sql::Result<ChatMessage> {
    Ok(ChatMessage {
        id: r.get(0)?,
        session: r.get(1)?,
        role: r.get(2)?,
        content: r.get(3)?,
        model_id: r.get(4)?,
        input_tokens: r.get(5)?,
        output_tokens: r.get(6)?,
        cost_usd: r.get(7)?,
        created_at: r.get(8)?,
    })
}

const CHAT_COLUMNS: &str =
    "id, session, role, content, model_id, input_tokens, output_tokens, cost_usd, created_at";

impl Store {
    /// The model chosen for `scope` (`active`, or `agent:<id>`), and when.
    pub fn model_preference(&self, scope: &str) -> Result<Option<(String, i64)>, StoreError> {
        self.conn()?
            .query_row(
                "SELECT model_id, updated_at FROM model_preferences WHERE scope = ?1",
                [scope],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// Chooses `model_id` for `scope`, replacing an earlier choice.
    pub fn set_model_preference(&self, scope: &str, model_id: &str) -> Result<i64, StoreError> {
        let now = now_ms();
        self.conn()?
            .execute(
                "INSERT INTO model_preferences (scope, model_id, updated_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT(scope) DO UPDATE SET model_id = excluded.model_id, updated_at = excluded.updated_at",
                params![scope, model_id, now],
            )
            .map_err(|e| self.err(e))?;
        Ok(now)
    }

    /// Every preference, by scope.
    pub fn model_preferences(&self) -> Result<BTreeMap<String, String>, StoreError> {
        let c = self.conn()?;
        let mut stmt = c
            .prepare("SELECT scope, model_id FROM model_preferences")
            .map_err(|e| self.err(e))?;
        stmt.query_map((), |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(|e| self.err(e))?
            .collect::<Result<BTreeMap<String, String>, _>>()
            .map_err(|e| self.err(e))
    }

    /// Records a benchmark result (`score` from 0 to 1).
    pub fn benchmark_record(
        &self,
        model_id: &str,
        category: &str,
        score: f64,
        metric: &str,
        notes: &str,
    ) -> Result<Benchmark, StoreError> {
        if !(0.0..=1.0).contains(&score) {
            return Err(StoreError::Invalid(format!(
                "`score` is {score}; a benchmark score is from 0 to 1"
            )));
        }
        let now = now_ms();
        let c = self.conn()?;
        c.execute(
            "INSERT INTO model_benchmarks (model_id, category, score, metric, notes, recorded_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![model_id, category, score, metric, notes, now],
        )
        .map_err(|e| self.err(e))?;
        Ok(Benchmark {
            id: c.last_insert_rowid().map_err(|e| self.err(e))?,
            model_id: model_id.into(),
            category: category.into(),
            score,
            metric: metric.into(),
            notes: notes.into(),
            recorded_at: now,
        })
    }

    /// Benchmarks, newest first, optionally of one model or category.
    pub fn benchmarks(
        &self,
        model_id: Option<&str>,
        category: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Benchmark>, StoreError> {
        let c = self.conn()?;
        let mut stmt = c
            .prepare(
                "SELECT id, model_id, category, score, metric, notes, recorded_at FROM model_benchmarks
                 WHERE (?1 IS NULL OR model_id = ?1) AND (?2 IS NULL OR category = ?2)
                 ORDER BY id DESC LIMIT ?3",
            )
            .map_err(|e| self.err(e))?;
        stmt.query_map(params![model_id, category, limit as i64], row_to_benchmark)
            .map_err(|e| self.err(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))
    }

    /// Each model's mean score and run count in `category`.
    pub fn benchmark_means(
        &self,
        category: &str,
    ) -> Result<BTreeMap<String, (f64, u32)>, StoreError> {
        let c = self.conn()?;
        let mut stmt = c
            .prepare_cached(
                "SELECT model_id, AVG(score), COUNT(*) FROM model_benchmarks WHERE category = ?1 GROUP BY model_id",
            )
            .map_err(|e| self.err(e))?;
        stmt.query_map([category], |r| {
            Ok((r.get::<String>(0)?, (r.get(1)?, r.get::<i64>(2)? as u32)))
        })
        .map_err(|e| self.err(e))?
        .collect::<Result<BTreeMap<_, _>, _>>()
        .map_err(|e| self.err(e))
    }

    /// Appends a chat message (an assistant's with its model and spend).
    pub fn chat_append(
        &self,
        session: &str,
        role: &str,
        content: &str,
        model_id: Option<&str>,
        spend: Option<Spend>,
    ) -> Result<ChatMessage, StoreError> {
        let now = now_ms();
        let c = self.conn()?;
        c.execute(
            "INSERT INTO chat_messages (session, role, content, model_id, input_tokens, output_tokens, cost_usd, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                session,
                role,
                content,
                model_id,
                spend.map(|s| s.input_tokens),
                spend.map(|s| s.output_tokens),
                spend.map(|s| s.cost_usd),
                now
            ],
        )
        .map_err(|e| self.err(e))?;
        Ok(ChatMessage {
            id: c.last_insert_rowid().map_err(|e| self.err(e))?,
            session: session.into(),
            role: role.into(),
            content: content.into(),
            model_id: model_id.map(str::to_string),
            input_tokens: spend.map(|s| s.input_tokens),
            output_tokens: spend.map(|s| s.output_tokens),
            cost_usd: spend.map(|s| s.cost_usd),
            created_at: now,
        })
    }

    /// A session's latest `limit` messages before message `before` (all when `None`), oldest
    /// first.
    pub fn chat_history(
        &self,
        session: &str,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<ChatMessage>, StoreError> {
        let c = self.conn()?;
        let mut stmt = c
            .prepare(&format!(
                "SELECT {CHAT_COLUMNS} FROM chat_messages WHERE session = ?1 AND (?2 IS NULL OR id < ?2) ORDER BY id DESC LIMIT ?3"
            ))
            .map_err(|e| self.err(e))?;
        let mut rows = stmt
            .query_map(params![session, before, limit as i64], row_to_chat)
            .map_err(|e| self.err(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))?;
        rows.reverse();
        Ok(rows)
    }
}
