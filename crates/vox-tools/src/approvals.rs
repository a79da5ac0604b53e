//! Approvals (a person in the loop for what agents do): `vox_pending_approvals`,
//! `vox_resolve_approval`, `vox_add_approval_allowlist_entry`, `vox_list_approval_allowlist`.
//! The waiting itself is the approval gate on the agent path: a call an agent makes to a tool
//! above `read_only` that the allowlist does not cover is recorded here and waits for a decision.

use crate::orchestration::{actor, operator_only};
use crate::store::{db, store};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use vox_core::family::blocking;
use vox_core::{CallCtx, Ctx, Family, HandlerEntry, ToolError};
use vox_store::{AllowEntry, Approval, ApprovalState};

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
        crate::bounded("reason", r, 4096)?;
    }
    let (to, args) = match a.decision {
        Decision::Approve => (
            ApprovalState::Approved,
            a.arguments.map(serde_json::Value::Object),
        ),
        Decision::Reject if a.arguments.is_some() => {
            return Err(ToolError::InvalidArguments(
                "`arguments` go with `approve`, not `reject`".into(),
            ));
        }
        Decision::Reject => (ApprovalState::Rejected, None),
    };
    store(ctx)?
        .approval_decide(
            a.approval_id,
            to,
            args.as_ref(),
            a.reason.as_deref(),
            actor(call),
        )
        .map_err(db)
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
        return Err(ToolError::InvalidArguments(format!(
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
        return Err(ToolError::InvalidArguments(format!(
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
