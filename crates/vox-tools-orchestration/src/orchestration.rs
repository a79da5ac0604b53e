//! What the orchestrator families (tasks, agents, locks, plans, clarifications, approvals)
//! share: who the caller is, and what follows every change (routing ready tasks).
//!
//! A caller is either an agent, proven by the credential the daemon issued it
//! ([`vox_core::CallCtx::acting_agent`]), or the operator: a person or the client acting for
//! them, who may act for any agent by naming it. An agent never acts as another, and never
//! does what only the operator does (spawn, retire, decide approvals, answer questions).

use vox_core::{CallCtx, Ctx, ToolError};
use vox_store::Assignment;
use vox_tools_common::store::{db, store};

/// The name events record for the operator.
pub const OPERATOR: &str = "operator";

/// How many ready tasks one dispatch looks at.
const DISPATCH_WINDOW: usize = 256;

/// Who the caller is, for the record: its agent id, or `operator`.
pub fn actor(call: &CallCtx) -> &str {
    call.acting_agent().unwrap_or(OPERATOR)
}

/// The agent a call acts as: the calling agent itself (`named`, if given, must be it), or for
/// the operator the agent it names in `agent_id`.
pub fn agent_for(call: &CallCtx, named: Option<String>) -> Result<String, ToolError> {
    match (call.acting_agent(), named) {
        (Some(me), None) => Ok(me.to_owned()),
        (Some(me), Some(n)) if n == me => Ok(n),
        (Some(me), Some(n)) => Err(ToolError::invalid_arguments(format!(
            "`agent_id` is {n}, but you are agent {me}: an agent acts only as itself"
        ))),
        (None, Some(n)) => {
            vox_store::check_agent_id(&n).map_err(db)?;
            Ok(n)
        }
        (None, None) => Err(ToolError::invalid_arguments(
            "`agent_id` is required: the operator names the agent it acts for",
        )),
    }
}

/// Whose things a call looks at: an agent always its own (`named`, if given, must be it), the
/// operator the agent it names, or everyone's (`None`).
pub fn scope(call: &CallCtx, named: Option<String>) -> Result<Option<String>, ToolError> {
    match call.acting_agent() {
        Some(_) => agent_for(call, named).map(Some),
        None => Ok(named),
    }
}

/// Refuses an agent a change to task `id` it neither holds nor submitted (`what`: "cancels",
/// "reorders", ...); the operator changes any task. Coordinating others' work is a person's.
pub fn own_task(
    call: &CallCtx,
    s: &vox_store::Store,
    id: i64,
    what: &str,
) -> Result<(), ToolError> {
    let Some(me) = call.acting_agent() else {
        return Ok(());
    };
    let t = s.task_get(id).map_err(db)?;
    if t.owner.as_deref() == Some(me) || s.task_submitter(id).map_err(db)?.as_deref() == Some(me) {
        return Ok(());
    }
    Err(ToolError::conflict(format!(
        "task {id} is not yours (held by {}): an agent {what} only tasks it holds or submitted",
        t.owner.as_deref().unwrap_or("nobody")
    )))
}

/// Refuses an agent what only the operator does. (The agent path does not even offer these
/// tools, whose exposure is `operator`; this holds wherever else a handler may be called from.)
pub fn operator_only(call: &CallCtx, what: &str) -> Result<(), ToolError> {
    match call.acting_agent() {
        Some(me) => Err(ToolError::refused(format!(
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
    changed(ctx);
    Ok(made)
}

/// The resource that says "something changed": `vox://orchestrator/events` (the newest
/// events). Every change of a task, an agent, a lock, a plan, a handoff, a clarification or an
/// approval announces it (`notifications/resources/updated`) to the clients that subscribed.
pub const EVENTS_URI: &str = "vox://orchestrator/events";

/// How many events a read of [`EVENTS_URI`] gives.
const EVENTS_READ: usize = 100;

/// Announces a change to subscribers of [`EVENTS_URI`]; cheap when nobody listens.
#[derive(Clone)]
pub struct Announcer(tokio::sync::broadcast::Sender<serde_json::Value>);

impl Announcer {
    /// An announcer on the context's notifier.
    pub fn new(ctx: &Ctx) -> Self {
        Announcer(ctx.notifier.clone())
    }
    /// Says `vox://orchestrator/events` changed (its subscribers get `resources/updated`).
    pub fn changed(&self) {
        let _ = self.0.send(vox_core::resource_updated(EVENTS_URI));
    }
}

/// Announces a change made by a tool.
pub fn changed(ctx: &Ctx) {
    ctx.notify_resource_updated(EVENTS_URI);
}

/// Serves [`EVENTS_URI`] (no tools).
pub struct EventsResource(pub std::sync::Arc<vox_store::Store>);

impl vox_core::DynamicTools for EventsResource {
    fn descriptors(&self, _advertise_workspace: bool) -> Vec<serde_json::Value> {
        vec![]
    }
    fn has_tool(&self, _name: &str) -> bool {
        false
    }
    fn call(
        &self,
        _name: &str,
        _args: &serde_json::Value,
        _call: &CallCtx,
    ) -> Option<vox_core::ToolOutcome> {
        None
    }
    fn resources(&self) -> Vec<serde_json::Value> {
        vec![serde_json::json!({
            "uri": EVENTS_URI,
            "name": "orchestrator-events",
            "title": "Orchestrator events",
            "description": "The newest 100 events of tasks, agents, locks, plans, handoffs, clarifications and approvals; subscribe to be told of each change, and page with vox_poll_events.",
            "mimeType": "application/json",
        })]
    }
    fn read(&self, uri: &str) -> Option<Result<vox_core::ResourceBody, ToolError>> {
        if uri != EVENTS_URI {
            return None;
        }
        Some((|| {
            let head = self.0.events_head().map_err(db)?;
            let events = self
                .0
                .events(
                    &vox_store::EventFilter {
                        after: (head - EVENTS_READ as i64).max(0),
                        ..vox_store::EventFilter::default()
                    },
                    EVENTS_READ,
                )
                .map_err(db)?;
            let text = serde_json::json!({"events": events, "next_cursor": head}).to_string();
            Ok(vox_core::ResourceBody::typed_text(text, "application/json"))
        })())
    }
}
