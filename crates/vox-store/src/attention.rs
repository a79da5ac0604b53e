//! The persisted attention ledger: one row per tool call the orchestrator served.

use crate::{Store, StoreError};
use rusqlite::params;
use serde::Serialize;

/// One served call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct AttentionEvent {
    /// When the call ended, in ms since the Unix epoch.
    pub ts: i64,
    /// Who made the call: the scope's principal (an agent id, `stdio:<client>`, a token's name).
    pub agent: String,
    /// The tool called (at most 128 characters).
    pub tool: String,
    /// The outcome's label: `ok`, the denial code, or the tool error code.
    pub outcome: String,
    /// How long the call took, in microseconds.
    pub latency_us: i64,
    /// Estimated tokens of the result (one per four bytes of JSON), or a model call's tokens.
    pub tokens: i64,
    /// What the call cost, in millionths of a USD (a model call; 0 for a tool call).
    pub cost_micro_usd: i64,
}

/// Totals for one tool.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ToolSummary {
    /// The tool's name.
    pub tool: String,
    /// Calls served.
    pub calls: i64,
    /// Calls whose outcome was not `ok`.
    pub errors: i64,
    /// Mean latency, in microseconds.
    pub mean_latency_us: f64,
    /// Estimated tokens, summed.
    pub tokens: i64,
    /// Model spend, in USD.
    pub cost_usd: f64,
}

/// Estimated tokens, and model spend, for one day and agent.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct CostRow {
    /// The UTC day, `YYYY-MM-DD`.
    pub day: String,
    /// Who made the calls (the scope's principal).
    pub agent: String,
    /// Calls served that day.
    pub calls: i64,
    /// Estimated tokens, summed.
    pub tokens: i64,
    /// USD spent on model calls (from the registry's prices).
    pub cost_usd: f64,
}

impl Store {
    /// Appends events in one transaction.
    pub fn attention_append(&self, events: &[AttentionEvent]) -> Result<(), StoreError> {
        if let Some(p) = self.postgres() {
            return crate::pg::AttentionRepo::attention_append(&**p, events);
        }
        let _long = self.long();
        let mut c = self.lite()?;
        let tx = c.transaction().map_err(|e| self.err(e))?;
        {
            let mut stmt = tx
                .prepare_cached(
                    "INSERT INTO attention_events (ts, agent, tool, outcome, latency_us, tokens, cost_micro_usd) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )
                .map_err(|e| self.err(e))?;
            for e in events {
                stmt.execute(params![
                    e.ts,
                    e.agent,
                    e.tool,
                    e.outcome,
                    e.latency_us,
                    e.tokens,
                    e.cost_micro_usd
                ])
                .map_err(|e| self.err(e))?;
            }
        }
        tx.commit().map_err(|e| self.err(e))
    }

    /// Per-tool totals since `since_ms`, most called first.
    pub fn attention_summary(&self, since_ms: i64) -> Result<Vec<ToolSummary>, StoreError> {
        if let Some(p) = self.postgres() {
            return crate::pg::AttentionRepo::attention_summary(&**p, since_ms);
        }
        let _long = self.long();
        let c = self.lite()?;
        let mut stmt = c
            .prepare(
                "SELECT tool, COUNT(*), SUM(outcome != 'ok'), AVG(latency_us), SUM(tokens), SUM(cost_micro_usd)
                 FROM attention_events WHERE ts >= ?1 GROUP BY tool ORDER BY COUNT(*) DESC, tool",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([since_ms], |r| {
                Ok(ToolSummary {
                    tool: r.get(0)?,
                    calls: r.get(1)?,
                    errors: r.get(2)?,
                    mean_latency_us: r.get(3)?,
                    tokens: r.get(4)?,
                    cost_usd: r.get::<_, i64>(5)? as f64 / 1e6,
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// Estimated tokens per UTC day and agent since `since_ms`, newest day first.
    pub fn cost_history(
        &self,
        since_ms: i64,
        agent: Option<&str>,
    ) -> Result<Vec<CostRow>, StoreError> {
        if let Some(p) = self.postgres() {
            return crate::pg::AttentionRepo::cost_history(&**p, since_ms, agent);
        }
        let _long = self.long();
        let c = self.lite()?;
        let mut stmt = c
            .prepare(
                "SELECT date(ts / 1000, 'unixepoch') AS day, agent, COUNT(*), SUM(tokens), SUM(cost_micro_usd)
                 FROM attention_events WHERE ts >= ?1 AND (?2 IS NULL OR agent = ?2)
                 GROUP BY day, agent ORDER BY day DESC, agent",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(params![since_ms, agent], |r| {
                Ok(CostRow {
                    day: r.get(0)?,
                    agent: r.get(1)?,
                    calls: r.get(2)?,
                    tokens: r.get(3)?,
                    cost_usd: r.get::<_, i64>(4)? as f64 / 1e6,
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }
}
