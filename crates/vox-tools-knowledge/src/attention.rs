//! Attention and budgets: `vox_attention_*`, `vox_budget_status`, `vox_trust_override`, and the
//! store-backed `vox_attention_summary` and `vox_cost_history`.

use crate::attention_state::{
    Attention, BudgetStatus, History, Reset, Trust, TrustChange, estimate_tokens,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use vox_core::family::typed;
use vox_core::{CallObserver, Ctx, Family, HandlerEntry, StepDone, ToolError, ToolOutcome};
use vox_mcp_registry::BootStep;
use vox_store::{AttentionEvent, CostRow, ToolSummary, now_ms};
use vox_tools_common::bounded;
use vox_tools_common::store::{db, knowledge};

#[derive(Serialize, JsonSchema)]
struct Summary {
    /// Per-tool totals, most called first.
    tools: Vec<ToolSummary>,
}

#[derive(Serialize, JsonSchema)]
struct Cost {
    /// Estimated tokens per day and agent.
    days: Vec<CostRow>,
}

fn attention(ctx: &Ctx) -> Result<&Attention, ToolError> {
    Ok(ctx
        .require::<Arc<Attention>>("the attention subsystem")?
        .as_ref())
}

/// Every finished call goes into the ledger; pending events reach the store on flush.
struct Ledger {
    attention: Arc<Attention>,
    store: Option<Arc<dyn vox_store::pg::KnowledgeRepos>>,
}

impl CallObserver for Ledger {
    fn record(
        &self,
        call: &vox_core::CallCtx,
        tool: &str,
        _args: Option<&serde_json::Value>,
        outcome: &ToolOutcome,
        latency: std::time::Duration,
    ) {
        let agent = call.principal();
        let bytes = match outcome {
            ToolOutcome::Ok(v) => vox_core::json_len(v),
            _ => 0,
        };
        self.attention.record(AttentionEvent {
            ts: now_ms(),
            agent: agent.to_owned(),
            tool: tool.chars().take(128).collect(),
            outcome: outcome.label().to_owned(),
            latency_us: latency.as_micros() as i64,
            tokens: estimate_tokens(bytes) as i64,
            cost_micro_usd: 0,
        });
    }
    fn flush(&self) {
        let pending = self.attention.take_pending();
        if let (Some(store), false) = (&self.store, pending.is_empty())
            && let Err(e) = store.attention_append(&pending)
        {
            tracing::warn!("attention ledger flush failed: {e}");
        }
    }
}

fn calibrate(ctx: &mut Ctx) -> Result<StepDone, String> {
    let budget = vox_core::env::number("VOX_ATTENTION_BUDGET_TOKENS")
        .map_err(|e| e.to_string())?
        .unwrap_or(200_000);
    let store = ctx.get::<Arc<dyn vox_store::pg::KnowledgeRepos>>().cloned();
    let attention = Arc::new(Attention::new(budget, store.is_some()));
    ctx.insert(attention.clone());
    ctx.add_call_observer(Arc::new(Ledger { attention, store }));
    Ok(StepDone::Ready(format!("token budget {budget} per agent")))
}

/// The `attention` family: its boot steps and tool handlers.
pub fn family() -> Family {
    Family {
        name: "attention",
        steps: vec![(BootStep::AttentionCalibration, calibrate)],
        handlers: handlers(),
        ..Family::default()
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct HistoryArgs {
    /// Only this agent's calls.
    agent: Option<String>,
    /// Only calls of this tool.
    tool: Option<String>,
    /// Most events (default 50, at most 1000).
    limit: Option<u32>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct BudgetArgs {
    /// Only this agent.
    agent: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TrustArgs {
    /// The agent whose trust changes.
    agent: String,
    /// `low`, `normal` or `high`; absent clears the override.
    level: Option<Trust>,
    /// How long the override lasts (default 3600 s, at most 7 days).
    ttl_secs: Option<u64>,
    /// Why, for the audit trail.
    reason: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SinceArgs {
    /// Look back this many days (default 7, at most 365).
    days: Option<u32>,
    /// Only this agent (cost history only).
    agent: Option<String>,
}

fn history(ctx: &Ctx, a: HistoryArgs) -> Result<History, ToolError> {
    let limit = a.limit.unwrap_or(50).clamp(1, 1000) as usize;
    Ok(attention(ctx)?.history(a.agent.as_deref(), a.tool.as_deref(), limit))
}

fn reset(ctx: &Ctx, _a: NoArgs) -> Result<Reset, ToolError> {
    Ok(attention(ctx)?.reset())
}

fn budget(ctx: &Ctx, a: BudgetArgs) -> Result<BudgetStatus, ToolError> {
    Ok(attention(ctx)?.budget_status(a.agent.as_deref()))
}

fn trust(ctx: &Ctx, a: TrustArgs) -> Result<TrustChange, ToolError> {
    bounded("agent", &a.agent, 256)?;
    let ttl = a.ttl_secs.unwrap_or(3600).min(7 * 86_400);
    Ok(attention(ctx)?.override_trust(&a.agent, a.level, ttl, a.reason))
}

fn since_ms(days: Option<u32>) -> i64 {
    let days = days.unwrap_or(7).clamp(1, 365) as i64;
    vox_store::now_ms() - days * 86_400_000
}

/// Persist pending events first so the answer includes the calls just made.
fn flush(ctx: &Ctx) -> Result<(), ToolError> {
    let att = attention(ctx)?;
    let pending = att.take_pending();
    if !pending.is_empty() {
        knowledge(ctx)?.attention_append(&pending).map_err(db)?;
    }
    Ok(())
}

fn summary(ctx: &Ctx, a: SinceArgs) -> Result<Summary, ToolError> {
    flush(ctx)?;
    let tools = knowledge(ctx)?
        .attention_summary(since_ms(a.days))
        .map_err(db)?;
    Ok(Summary { tools })
}

fn cost(ctx: &Ctx, a: SinceArgs) -> Result<Cost, ToolError> {
    flush(ctx)?;
    let days = knowledge(ctx)?
        .cost_history(since_ms(a.days), a.agent.as_deref())
        .map_err(db)?;
    Ok(Cost { days })
}

fn handlers() -> Vec<(&'static str, HandlerEntry)> {
    vec![
        ("vox_attention_history", typed(history)),
        ("vox_attention_reset", typed(reset)),
        ("vox_budget_status", typed(budget)),
        ("vox_trust_override", typed(trust)),
        ("vox_attention_summary", typed(summary)),
        ("vox_cost_history", typed(cost)),
    ]
}
