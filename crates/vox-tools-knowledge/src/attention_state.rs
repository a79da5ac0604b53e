//! Attention and budgets: what the orchestrator served to each agent in the current window,
//! an estimated token budget per agent scaled by trust, and trust overrides.
//!
//! DB-free by design (the `attention` profile boots no store). When the store is up, events are
//! also appended to the ledger for `vox_attention_summary` and `vox_cost_history`, in batches
//! off the call path.

use schemars::JsonSchema;
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use vox_store::{AttentionEvent, now_ms};

/// How many recent events the window keeps in memory.
pub const HISTORY_CAP: usize = 1000;

/// A trust level; it scales an agent's token budget.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Trust {
    /// Half the default token budget.
    Low,
    /// The default budget.
    Normal,
    /// Twice the default budget.
    High,
}

impl Trust {
    fn factor(self) -> f64 {
        match self {
            Trust::Low => 0.5,
            Trust::Normal => 1.0,
            Trust::High => 2.0,
        }
    }
}

/// An active trust override.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TrustOverride {
    /// The trust the agent has until it expires.
    pub level: Trust,
    /// Why it was set, as the operator said.
    pub reason: Option<String>,
    /// When it expires (Unix milliseconds).
    pub until_ms: i64,
}

#[derive(Debug, Default, Clone, Copy, Serialize)]
struct Usage {
    calls: u64,
    errors: u64,
    tokens: u64,
}

#[derive(Debug)]
struct Window {
    started_ms: i64,
    events: VecDeque<AttentionEvent>,
    usage: BTreeMap<String, Usage>,
    overrides: BTreeMap<String, TrustOverride>,
    /// Budgets set per agent (`vox_set_agent_budget`), in place of the default.
    budgets: BTreeMap<String, u64>,
    /// Not yet written to the store.
    pending: Vec<AttentionEvent>,
}

/// `vox_attention_history`: the window's most recent calls.
#[derive(Debug, Serialize, JsonSchema)]
pub struct History {
    /// When the current attention window began (Unix milliseconds).
    pub window_started_ms: i64,
    /// Most recent first.
    pub events: Vec<AttentionEvent>,
}

/// `vox_attention_reset`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Reset {
    /// How many recorded calls the reset dropped.
    pub cleared_events: usize,
    /// When the new window began (Unix milliseconds).
    pub window_started_ms: i64,
}

/// `vox_budget_status`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct BudgetStatus {
    /// When the current window began (Unix milliseconds).
    pub window_started_ms: i64,
    /// The tokens an agent at normal trust may use per window.
    pub default_token_budget: u64,
    /// Each agent this window knows of.
    pub agents: Vec<AgentBudget>,
    /// Agent → its active trust override.
    pub overrides: BTreeMap<String, TrustOverride>,
}

/// One agent's budget in the current window.
#[derive(Debug, Serialize, JsonSchema)]
pub struct AgentBudget {
    /// The attention key (an agent id, or a client's principal).
    pub agent: String,
    /// Its trust now (an override's, else normal).
    pub trust: Trust,
    /// Calls it made in the window.
    pub calls: u64,
    /// Of those, the ones that failed or were refused.
    pub errors: u64,
    /// Tokens its calls used in the window.
    pub tokens_used: u64,
    /// Its budget for the window: its own, else the default, scaled by its trust.
    pub token_budget: u64,
    /// `token_budget - tokens_used`, at least 0.
    pub tokens_remaining: u64,
    /// Whether it used more than its budget (its calls are refused).
    pub over_budget: bool,
}

/// `vox_trust_override`: the override set, or whether one was cleared.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TrustChange {
    /// The agent whose trust changed.
    pub agent: String,
    /// The override now in force, when one was set.
    #[serde(rename = "override", skip_serializing_if = "Option::is_none")]
    pub set: Option<TrustOverride>,
    /// Whether an override was there to clear, when clearing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cleared: Option<bool>,
}

/// The attention subsystem's state.
#[derive(Debug)]
pub struct Attention {
    budget_tokens: u64,
    persist: bool,
    window: Mutex<Window>,
}

/// Tokens a result costs a model, estimated as one per four bytes of JSON.
pub fn estimate_tokens(bytes: usize) -> u64 {
    bytes.div_ceil(4) as u64
}

impl Attention {
    /// `budget_tokens` per agent per window; `persist` when the store is up.
    pub fn new(budget_tokens: u64, persist: bool) -> Self {
        Attention {
            budget_tokens,
            persist,
            window: Mutex::new(Window {
                started_ms: now_ms(),
                events: VecDeque::new(),
                usage: BTreeMap::new(),
                overrides: BTreeMap::new(),
                budgets: BTreeMap::new(),
                pending: Vec::new(),
            }),
        }
    }

    fn window(&self) -> std::sync::MutexGuard<'_, Window> {
        self.window.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records one served call.
    pub fn record(&self, event: AttentionEvent) {
        let mut w = self.window();
        let u = w.usage.entry(event.agent.clone()).or_default();
        u.calls += 1;
        u.tokens += event.tokens as u64;
        if event.outcome != "ok" {
            u.errors += 1;
        }
        if self.persist {
            w.pending.push(event.clone());
        }
        if w.events.len() == HISTORY_CAP {
            w.events.pop_front();
        }
        w.events.push_back(event);
    }

    /// Takes the events not yet persisted.
    pub fn take_pending(&self) -> Vec<AttentionEvent> {
        std::mem::take(&mut self.window().pending)
    }

    /// Most recent first, optionally for one agent or tool.
    pub fn history(&self, agent: Option<&str>, tool: Option<&str>, limit: usize) -> History {
        let w = self.window();
        let events: Vec<AttentionEvent> = w
            .events
            .iter()
            .rev()
            .filter(|e| agent.is_none_or(|a| e.agent == a) && tool.is_none_or(|t| e.tool == t))
            .take(limit)
            .cloned()
            .collect();
        History {
            window_started_ms: w.started_ms,
            events,
        }
    }

    /// Starts a new window; overrides survive (they have their own expiry).
    pub fn reset(&self) -> Reset {
        let mut w = self.window();
        let cleared = w.events.len();
        w.events.clear();
        w.usage.clear();
        w.started_ms = now_ms();
        Reset {
            cleared_events: cleared,
            window_started_ms: w.started_ms,
        }
    }

    /// Budget per agent in the current window.
    pub fn budget_status(&self, agent: Option<&str>) -> BudgetStatus {
        let mut w = self.window();
        let now = now_ms();
        w.overrides.retain(|_, o| o.until_ms > now);
        let mut agents = Vec::new();
        let mut names: Vec<String> = w.usage.keys().cloned().collect();
        names.extend(w.overrides.keys().cloned());
        names.extend(w.budgets.keys().cloned());
        names.sort();
        names.dedup();
        for name in names.into_iter().filter(|n| agent.is_none_or(|a| a == n)) {
            let u = w.usage.get(&name).copied().unwrap_or_default();
            let trust = w.overrides.get(&name).map_or(Trust::Normal, |o| o.level);
            let base = w.budgets.get(&name).copied().unwrap_or(self.budget_tokens);
            let budget = (base as f64 * trust.factor()) as u64;
            agents.push(AgentBudget {
                agent: name,
                trust,
                calls: u.calls,
                errors: u.errors,
                tokens_used: u.tokens,
                token_budget: budget,
                tokens_remaining: budget.saturating_sub(u.tokens),
                over_budget: u.tokens > budget,
            });
        }
        BudgetStatus {
            window_started_ms: w.started_ms,
            default_token_budget: self.budget_tokens,
            agents,
            overrides: w.overrides.clone(),
        }
    }

    /// Sets (or with `None`, clears) an agent's own token budget per window.
    pub fn set_agent_budget(&self, agent: &str, tokens: Option<u64>) {
        let mut w = self.window();
        match tokens {
            Some(t) => w.budgets.insert(agent.to_owned(), t),
            None => w.budgets.remove(agent),
        };
    }

    /// Sets (or with `level = None`, clears) an agent's trust override.
    pub fn override_trust(
        &self,
        agent: &str,
        level: Option<Trust>,
        ttl_secs: u64,
        reason: Option<String>,
    ) -> TrustChange {
        let mut w = self.window();
        match level {
            Some(level) => {
                let o = TrustOverride {
                    level,
                    reason,
                    until_ms: now_ms().saturating_add((ttl_secs as i64).saturating_mul(1000)),
                };
                w.overrides.insert(agent.to_owned(), o.clone());
                TrustChange {
                    agent: agent.to_owned(),
                    set: Some(o),
                    cleared: None,
                }
            }
            None => {
                let removed = w.overrides.remove(agent).is_some();
                TrustChange {
                    agent: agent.to_owned(),
                    set: None,
                    cleared: Some(removed),
                }
            }
        }
    }
}
