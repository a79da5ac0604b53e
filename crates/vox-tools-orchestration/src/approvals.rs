//! Approvals (a person in the loop for what agents do): `vox_pending_approvals`,
//! `vox_resolve_approval`, `vox_add_approval_allowlist_entry`, `vox_list_approval_allowlist`.
//! The waiting itself is the approval gate on the agent path: a call an agent makes to a tool
//! above `read_only` that the allowlist does not cover is recorded here and waits for a decision.

use crate::orchestration::{actor, operator_only};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use vox_core::family::blocking;
use vox_core::{CallCtx, Ctx, Family, HandlerEntry, ToolError};
use vox_store::{AllowEntry, Approval, ApprovalState};
use vox_tools_common::store::{db, store};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    /// Decided ones too, newest first (default: pending ones, oldest first).
    #[serde(default)]
    all: bool,
    /// At most this many (default 100, at most 1000).
    limit: Option<u32>,
}

#[derive(Serialize, JsonSchema)]
struct Approvals {
    approvals: Vec<Approval>,
}

/// A person's decision.
#[derive(Deserialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum Decision {
    /// The call runs (with `arguments` in place of its own, when given).
    Approve,
    /// The call fails with a denial naming the reason.
    Reject,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ResolveArgs {
    approval_id: i64,
    decision: Decision,
    /// With `approve`: the arguments the call runs with instead of its own.
    arguments: Option<serde_json::Map<String, serde_json::Value>>,
    /// Why (the agent sees it when rejected).
    reason: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AllowArgs {
    /// A tool name, or a prefix ending in `*` (`vox_memory_*`).
    tool: String,
    /// Only this agent's calls (default: every agent's).
    agent_id: Option<String>,
    /// Why it is allowed.
    #[serde(default)]
    note: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

#[derive(Serialize, JsonSchema)]
struct Allowlist {
    entries: Vec<AllowEntry>,
}

fn pending(ctx: &Ctx, _call: &CallCtx, a: ListArgs) -> Result<Approvals, ToolError> {
    let limit = a.limit.unwrap_or(100).clamp(1, 1000) as usize;
    Ok(Approvals {
        approvals: store(ctx)?.approvals(a.all, limit).map_err(db)?,
    })
}

fn resolve(ctx: &Ctx, call: &CallCtx, a: ResolveArgs) -> Result<Approval, ToolError> {
    operator_only(call, "decides approvals (a person)")?;
    if let Some(r) = &a.reason {
        vox_tools_common::bounded("reason", r, 4096)?;
    }
    let (to, args) = match a.decision {
        Decision::Approve => (
            ApprovalState::Approved,
            a.arguments.map(serde_json::Value::Object),
        ),
        Decision::Reject if a.arguments.is_some() => {
            return Err(ToolError::invalid_arguments(
                "`arguments` go with `approve`, not `reject`",
            ));
        }
        Decision::Reject => (ApprovalState::Rejected, None),
    };
    let decided = store(ctx)?
        .approval_decide(
            a.approval_id,
            to,
            args.as_ref(),
            a.reason.as_deref(),
            actor(call),
        )
        .map_err(db)?;
    if let Some(bell) = ctx.get::<std::sync::Arc<ApprovalBell>>() {
        bell.0.notify_waiters();
    }
    crate::orchestration::changed(ctx);
    Ok(decided)
}

fn allow(ctx: &Ctx, call: &CallCtx, a: AllowArgs) -> Result<AllowEntry, ToolError> {
    operator_only(call, "edits the approval allowlist")?;
    let prefix = a.tool.strip_suffix('*').unwrap_or(&a.tool);
    let known = if a.tool.ends_with('*') {
        vox_mcp_registry::TOOL_REGISTRY
            .iter()
            .any(|t| t.name.starts_with(prefix))
    } else {
        vox_mcp_registry::tool_by_name(&a.tool).is_some()
    };
    if prefix.is_empty() || !known {
        return Err(ToolError::invalid_arguments(format!(
            "`tool` {:?} names no catalog tool",
            a.tool
        )));
    }
    let agent = match a.agent_id {
        Some(id) => {
            store(ctx)?.agent_get(&id).map_err(db)?;
            id
        }
        None => "*".into(),
    };
    if a.note.len() > 1024 {
        return Err(ToolError::invalid_arguments(format!(
            "`note` is {} bytes; the limit is 1024",
            a.note.len()
        )));
    }
    store(ctx)?
        .allowlist_add(&a.tool, &agent, &a.note, actor(call))
        .map_err(db)
}

fn list_allow(ctx: &Ctx, _call: &CallCtx, _a: NoArgs) -> Result<Allowlist, ToolError> {
    Ok(Allowlist {
        entries: store(ctx)?.allowlist().map_err(db)?,
    })
}

/// The `approvals` family: its boot steps and tool handlers.
pub fn family() -> Family {
    Family {
        name: "approvals",
        handlers: handlers(),
        ..Family::default()
    }
}

fn handlers() -> Vec<(&'static str, HandlerEntry)> {
    vec![
        ("vox_pending_approvals", blocking(pending)),
        ("vox_resolve_approval", blocking(resolve)),
        ("vox_add_approval_allowlist_entry", blocking(allow)),
        ("vox_list_approval_allowlist", blocking(list_allow)),
    ]
}

/// Rung when a person decides an approval: waiting calls look again.
#[derive(Default)]
pub struct ApprovalBell(pub tokio::sync::Notify);

/// How long an agent's call waits for a person, unless `VOX_APPROVAL_TIMEOUT_SECS` says
/// otherwise (seconds).
const DEFAULT_APPROVAL_TIMEOUT_SECS: u64 = 900;

fn approval_timeout() -> std::time::Duration {
    std::time::Duration::from_secs(
        // A bad value stopped `vox` at start (`vox_core::env::check`).
        vox_core::env::number("VOX_APPROVAL_TIMEOUT_SECS")
            .ok()
            .flatten()
            .unwrap_or(DEFAULT_APPROVAL_TIMEOUT_SECS),
    )
}

/// The gate of the agent path. The orchestrator's own tools (the `orchestrator` lane) are how
/// an agent coordinates: they pass as they are (the operator-only ones refuse agents
/// themselves). Every other call must fit the agent's budget, and one with side effects
/// waits for a person unless the allowlist covers it.
pub struct Gate {
    /// Where approvals, the allowlist and budgets are kept.
    pub store: std::sync::Arc<vox_store::Store>,
    /// Wakes a call waiting for a person's decision.
    pub bell: std::sync::Arc<ApprovalBell>,
    /// The attention ledger, for the agent's budget (none: no budget is enforced).
    pub attention: Option<std::sync::Arc<vox_tools_knowledge::Attention>>,
    /// Tells subscribers of the orchestrator's events that an approval is pending.
    pub announce: crate::orchestration::Announcer,
}

impl Gate {
    async fn admit_inner(
        &self,
        agent: &str,
        tool: vox_core::GatedTool<'_>,
        args: serde_json::Value,
        cancel: &vox_core::Cancel,
    ) -> Result<serde_json::Value, ToolError> {
        if tool.lane == "orchestrator" {
            return Ok(args);
        }
        if let Some(b) = self
            .attention
            .as_ref()
            .and_then(|a| a.budget_status(Some(agent)).agents.into_iter().next())
            .filter(|b| b.over_budget)
        {
            return Err(ToolError::refused(format!(
                "agent {agent} used {} of its {} tokens in this attention window; the operator can raise it (vox_set_agent_budget) or start a new window",
                b.tokens_used, b.token_budget
            )));
        }
        if tool.side_effect_class == vox_mcp_registry::SideEffectClass::ReadOnly {
            return Ok(args);
        }
        let store = self.store.clone();
        let (who, name) = (agent.to_owned(), tool.name.to_owned());
        let owned = name.clone();
        if vox_core::family::run_blocking(move || store.allowlist_covers(&who, &owned).map_err(db))
            .await?
        {
            return Ok(args);
        }
        let store = self.store.clone();
        let (who, a, n) = (agent.to_owned(), args.clone(), name.clone());
        let side = tool.side_effect_class.as_str();
        let pending = vox_core::family::run_blocking(move || {
            store.approval_request(&who, &n, &a, side).map_err(db)
        })
        .await?;
        self.announce.changed();
        tracing::info!(
            approval = pending.id,
            agent,
            tool = name,
            "a call waits for a person's approval"
        );
        let deadline = tokio::time::Instant::now() + approval_timeout();
        loop {
            let store = self.store.clone();
            let id = pending.id;
            let now =
                vox_core::family::run_blocking(move || store.approval_get(id).map_err(db)).await?;
            match now.state {
                ApprovalState::Approved => return Ok(now.new_arguments.unwrap_or(args)),
                ApprovalState::Rejected => {
                    return Err(ToolError::refused(format!(
                        "approval {id}: {} rejected this call of {name}{}",
                        now.decided_by.as_deref().unwrap_or("a person"),
                        now.reason.map(|r| format!(": {r}")).unwrap_or_default()
                    )));
                }
                ApprovalState::Expired => {
                    return Err(ToolError::refused(format!("approval {id} expired")));
                }
                ApprovalState::Pending => {}
            }
            let ring = self.bell.0.notified();
            // A decision by another process (or a missed ring) is seen within a second.
            let wait = tokio::time::sleep(std::time::Duration::from_secs(1));
            tokio::select! {
                () = ring => {}
                () = wait => {}
                () = cancel.cancelled() => {
                    self.expire(id, "the call was cancelled while it waited").await;
                    return Err(ToolError::cancelled("cancelled while waiting for approval"));
                }
                () = tokio::time::sleep_until(deadline) => {
                    self.expire(id, "nobody decided in time").await;
                    return Err(ToolError::refused(format!(
                        "approval {id}: nobody decided within {} s (VOX_APPROVAL_TIMEOUT_SECS)",
                        approval_timeout().as_secs()
                    )));
                }
            }
        }
    }

    async fn expire(&self, id: i64, why: &'static str) {
        let store = self.store.clone();
        let _ = vox_core::family::run_blocking(move || {
            store
                .approval_decide(id, ApprovalState::Expired, None, Some(why), "daemon")
                .map_err(db)
        })
        .await;
        self.announce.changed();
    }
}

impl vox_core::AgentGate for Gate {
    fn admit<'a>(
        &'a self,
        agent: &'a str,
        tool: vox_core::GatedTool<'a>,
        args: serde_json::Value,
        cancel: &'a vox_core::Cancel,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<serde_json::Value, ToolError>> + Send + 'a>,
    > {
        Box::pin(self.admit_inner(agent, tool, args, cancel))
    }
}
