//! What the orchestrator families (tasks, agents, locks, plans, clarifications, approvals)
//! share: who the caller is, and what follows every change (routing ready tasks).
//!
//! A caller is either an agent, proven by the credential the daemon issued it
//! ([`vox_core::CallCtx::acting_agent`]), or the operator: a person or the client acting for
//! them, who may act for any agent by naming it. An agent never acts as another, and never
//! does what only the operator does (spawn, retire, decide approvals, answer questions).

use crate::store::{db, store};
use vox_core::{CallCtx, Ctx, ToolError};
use vox_store::Assignment;

/// The name events record for the operator.
pub const OPERATOR: &str = "operator";

/// How many ready tasks one dispatch looks at.
const DISPATCH_WINDOW: usize = 256;

/// Who the caller is, for the record: its agent id, or `operator`.
pub fn actor(call: &CallCtx) -> &str {
    call.acting_agent.as_deref().unwrap_or(OPERATOR)
}

/// The agent a call acts as: the calling agent itself (`named`, if given, must be it), or for
/// the operator the agent it names in `agent_id`.
pub fn agent_for(call: &CallCtx, named: Option<String>) -> Result<String, ToolError> {
    match (call.acting_agent.as_deref(), named) {
        (Some(me), None) => Ok(me.to_owned()),
        (Some(me), Some(n)) if n == me => Ok(n),
        (Some(me), Some(n)) => Err(ToolError::InvalidArguments(format!(
            "`agent_id` is {n}, but you are agent {me}: an agent acts only as itself"
        ))),
        (None, Some(n)) => {
            vox_store::check_agent_id(&n).map_err(db)?;
            Ok(n)
        }
        (None, None) => Err(ToolError::InvalidArguments(
            "`agent_id` is required: the operator names the agent it acts for".into(),
        )),
    }
}

/// Refuses an agent what only the operator does.
pub fn operator_only(call: &CallCtx, what: &str) -> Result<(), ToolError> {
    match call.acting_agent.as_deref() {
        Some(me) => Err(ToolError::Conflict(format!(
            "only the operator {what}; agent {me} cannot"
        ))),
        None => Ok(()),
    }
}

/// Routes ready tasks to agents with room after a change, and wakes the workers the daemon
/// runs (a task may have come to one, or left it); what it assigned.
pub fn dispatch(ctx: &Ctx) -> Result<Vec<Assignment>, ToolError> {
    let made = store(ctx)?.dispatch(DISPATCH_WINDOW).map_err(db)?;
    if let Some(f) = ctx.get::<std::sync::Arc<crate::fleet::Fleet>>() {
        f.kick_all();
    }
    Ok(made)
}
