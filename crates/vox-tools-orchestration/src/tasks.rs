//! Tasks and their queue: `vox_submit_task`, `vox_task_status`, `vox_cancel_task`,
//! `vox_complete_task`, `vox_fail_task`, `vox_reorder_task`, `vox_queue_status`,
//! `vox_rebalance`, `vox_a2a_tasks` (the DAG), `vox_emergency_stop`, `vox_poll_events` and
//! `vox_orchestrator_status`, over the journey store's task model.

use crate::orchestration::{actor, agent_for, dispatch, operator_only, own_task, scope};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use vox_core::family::{blocking, quick};
use vox_core::{CallCtx, Ctx, Family, HandlerEntry, ToolError};
use vox_store::{
    Agent, Assignment, Event, EventFilter, NewTask, Subject, Task, TaskMove, TaskState,
};
use vox_tools_common::store::{db, free, store};

/// Most tasks or events one answer lists.
const MAX_LIST: usize = 1000;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SubmitArgs {
    /// What to do, in a line (at most 512 bytes).
    title: String,
    /// The details (at most 64 KiB).
    #[serde(default)]
    description: String,
    /// Higher runs first (default 0).
    #[serde(default)]
    priority: i64,
    /// Tasks that must complete first.
    #[serde(default)]
    depends_on: Vec<i64>,
    /// Workspace-relative files it will touch: it goes to the agent holding locks on them.
    #[serde(default)]
    files: Vec<String>,
    /// Only this agent may take it.
    agent_id: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct Submitted {
    task: Task,
    /// Tasks the dispatcher assigned after this change (this one among them when an agent
    /// had room).
    assigned: Vec<Assignment>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TaskIdArgs {
    task_id: i64,
}

#[derive(Serialize, JsonSchema)]
struct Status {
    task: Task,
    /// Pending clarifications that hold it back.
    gated_by: Vec<i64>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CancelArgs {
    task_id: i64,
    /// Why (recorded in its events).
    reason: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct Moved {
    task: Task,
    assigned: Vec<Assignment>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CompleteArgs {
    task_id: i64,
    /// What was done (at most 64 KiB).
    result: String,
    /// The agent completing it (the operator names it; an agent is itself).
    agent_id: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FailArgs {
    task_id: i64,
    /// Why it failed.
    reason: String,
    agent_id: Option<String>,
    /// Put it back in the queue instead (at most 5 attempts in all).
    #[serde(default)]
    retry: bool,
}

/// Attempts after which a failed task is not retried.
const MAX_ATTEMPTS: i64 = 5;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReorderArgs {
    task_id: i64,
    /// The new priority (higher runs first).
    priority: i64,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct QueueArgs {
    /// Only this agent's queue (an agent sees its own by default).
    agent_id: Option<String>,
}

/// One agent's queue.
#[derive(Serialize, JsonSchema)]
struct Queue {
    agent: Agent,
    /// Running first, then by priority.
    tasks: Vec<Task>,
}

#[derive(Serialize, JsonSchema)]
struct Queues {
    queues: Vec<Queue>,
    /// Ready tasks no agent holds yet (at most 1000 listed).
    unassigned: Vec<Task>,
}

#[derive(Serialize, JsonSchema)]
struct Rebalanced {
    /// Tasks taken back from paused or overloaded agents.
    requeued: Vec<i64>,
    assigned: Vec<Assignment>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DagArgs {
    /// Only tasks in this state.
    state: Option<TaskState>,
    /// At most this many (default 200, at most 1000).
    limit: Option<u32>,
}

/// One edge of the DAG: `task` depends on `depends_on`.
#[derive(Serialize, JsonSchema)]
struct Edge {
    task: i64,
    depends_on: i64,
}

#[derive(Serialize, JsonSchema)]
struct Dag {
    tasks: Vec<Task>,
    edges: Vec<Edge>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct StopArgs {
    /// Why (recorded in every cancelled task's events).
    reason: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct Stopped {
    /// Every task that was queued, assigned or running.
    cancelled: Vec<i64>,
    /// Agents paused so that nothing new starts.
    paused_agents: Vec<String>,
    /// Agents' tool calls that were in flight, cancelled.
    cancelled_calls: usize,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PollArgs {
    /// The `next_cursor` of the previous poll (default 0: from the start).
    #[serde(default)]
    cursor: i64,
    /// Only events about this kind of thing.
    subject: Option<Subject>,
    /// Only events done by, or about, this agent.
    agent_id: Option<String>,
    /// At most this many (default 100, at most 1000).
    limit: Option<u32>,
}

#[derive(Serialize, JsonSchema)]
struct Polled {
    events: Vec<Event>,
    /// Pass as `cursor` next time.
    next_cursor: i64,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

/// An agent with what it holds.
#[derive(Serialize, JsonSchema)]
struct AgentLoad {
    agent: Agent,
    /// Assigned and running tasks.
    load: i64,
    files: usize,
}

#[derive(Serialize, JsonSchema)]
struct OrchestratorStatus {
    agents: Vec<AgentLoad>,
    /// Tasks per state.
    tasks: BTreeMap<String, i64>,
    locks: usize,
    pending_clarifications: usize,
    pending_approvals: usize,
    /// The newest event's cursor.
    events_head: i64,
}

fn submit(ctx: &Ctx, call: &CallCtx, a: SubmitArgs) -> Result<Submitted, ToolError> {
    let s = store(ctx)?;
    if let Some(pin) = &a.agent_id {
        let agent = s.agent_get(pin).map_err(db)?;
        if agent.state == vox_store::AgentState::Retired {
            return Err(ToolError::conflict(format!(
                "agent {pin} is retired: no task can be pinned to it"
            )));
        }
    }
    let task = s
        .task_submit_by(
            &NewTask {
                title: a.title,
                description: a.description,
                priority: a.priority,
                depends_on: a.depends_on,
                files: a.files,
                pinned_agent: a.agent_id,
            },
            actor(call),
        )
        .map_err(db)?;
    let assigned = dispatch(ctx)?;
    let task = s.task_get(task.id).map_err(db)?;
    Ok(Submitted { task, assigned })
}

fn status(ctx: &Ctx, _call: &CallCtx, a: TaskIdArgs) -> Result<Status, ToolError> {
    let s = store(ctx)?;
    Ok(Status {
        task: s.task_get(a.task_id).map_err(db)?,
        gated_by: s.task_gates(a.task_id).map_err(db)?,
    })
}

fn cancel(ctx: &Ctx, call: &CallCtx, a: CancelArgs) -> Result<Moved, ToolError> {
    let s = store(ctx)?;
    own_task(call, s, a.task_id, "cancels")?;
    let reason = a.reason.unwrap_or_else(|| "cancelled".into());
    vox_tools_common::bounded("reason", &reason, 4096)?;
    let task = s
        .task_move(a.task_id, &TaskMove::Cancel { reason }, actor(call))
        .map_err(db)?;
    Ok(Moved {
        task,
        assigned: dispatch(ctx)?,
    })
}

fn complete(ctx: &Ctx, call: &CallCtx, a: CompleteArgs) -> Result<Moved, ToolError> {
    let agent = agent_for(call, a.agent_id)?;
    let task = store(ctx)?
        .task_move(a.task_id, &TaskMove::Complete { result: a.result }, &agent)
        .map_err(db)?;
    Ok(Moved {
        task,
        assigned: dispatch(ctx)?,
    })
}

fn fail(ctx: &Ctx, call: &CallCtx, a: FailArgs) -> Result<Moved, ToolError> {
    let agent = agent_for(call, a.agent_id)?;
    vox_tools_common::bounded("reason", &a.reason, 64 * 1024)?;
    let s = store(ctx)?;
    let t = s.task_get(a.task_id).map_err(db)?;
    if t.owner.as_deref() != Some(agent.as_str()) {
        return Err(ToolError::conflict(format!(
            "task {} is assigned to {}, not to {agent}",
            a.task_id,
            t.owner.as_deref().unwrap_or("nobody")
        )));
    }
    let retry = a.retry && t.attempts + i64::from(t.state == TaskState::Assigned) < MAX_ATTEMPTS;
    let m = if retry {
        TaskMove::Requeue {
            reason: format!("failed, retrying: {}", a.reason),
        }
    } else {
        TaskMove::Fail { reason: a.reason }
    };
    let task = s.task_move(a.task_id, &m, &agent).map_err(db)?;
    Ok(Moved {
        task,
        assigned: dispatch(ctx)?,
    })
}

fn reorder(ctx: &Ctx, call: &CallCtx, a: ReorderArgs) -> Result<Moved, ToolError> {
    own_task(call, store(ctx)?, a.task_id, "reorders")?;
    let task = store(ctx)?
        .task_set_priority(a.task_id, a.priority, actor(call))
        .map_err(db)?;
    Ok(Moved {
        task,
        assigned: dispatch(ctx)?,
    })
}

fn queue_status(ctx: &Ctx, call: &CallCtx, a: QueueArgs) -> Result<Queues, ToolError> {
    let s = store(ctx)?;
    let only = scope(call, a.agent_id)?;
    let agents = match &only {
        Some(id) => vec![s.agent_get(id).map_err(db)?],
        None => s.agents(false).map_err(db)?,
    };
    let mut queues = Vec::with_capacity(agents.len());
    for agent in agents {
        let tasks = s.tasks_of(&agent.id, false, MAX_LIST).map_err(db)?;
        queues.push(Queue { agent, tasks });
    }
    let unassigned = if only.is_none() {
        s.tasks_ready(MAX_LIST).map_err(db)?
    } else {
        vec![]
    };
    Ok(Queues { queues, unassigned })
}

fn rebalance(ctx: &Ctx, call: &CallCtx, _a: NoArgs) -> Result<Rebalanced, ToolError> {
    operator_only(call, "rebalances the queues")?;
    let requeued = store(ctx)?.rebalance(actor(call)).map_err(db)?;
    Ok(Rebalanced {
        requeued,
        assigned: dispatch(ctx)?,
    })
}

fn dag(ctx: &Ctx, _call: &CallCtx, a: DagArgs) -> Result<Dag, ToolError> {
    let limit = a.limit.unwrap_or(200).clamp(1, MAX_LIST as u32) as usize;
    let tasks = store(ctx)?.tasks_in_state(a.state, limit).map_err(db)?;
    let edges = tasks
        .iter()
        .flat_map(|t| {
            t.depends_on.iter().map(|d| Edge {
                task: t.id,
                depends_on: *d,
            })
        })
        .collect();
    Ok(Dag { tasks, edges })
}

fn emergency_stop(ctx: &Ctx, call: &CallCtx, a: StopArgs) -> Result<Stopped, ToolError> {
    operator_only(call, "stops everything")?;
    let reason = a.reason.unwrap_or_else(|| "emergency stop".into());
    vox_tools_common::bounded("reason", &reason, 4096)?;
    let s = store(ctx)?;
    // Agents first, so that nothing is dispatched between the two.
    let mut paused_agents = Vec::new();
    for agent in s.agents(false).map_err(db)? {
        if agent.state == vox_store::AgentState::Active {
            s.agent_set_active(&agent.id, false, actor(call))
                .map_err(db)?;
            paused_agents.push(agent.id);
        }
    }
    let cancelled = s.tasks_cancel_active(actor(call), &reason).map_err(db)?;
    // What agents are doing right now stops too: their calls in flight (waiting approvals
    // among them) through the core's cancellation, their workers' turns by their task leaving.
    let cancelled_calls = ctx.agent_calls.cancel(None);
    dispatch(ctx)?;
    Ok(Stopped {
        cancelled,
        paused_agents,
        cancelled_calls,
    })
}

fn poll_events(ctx: &Ctx, call: &CallCtx, a: PollArgs) -> Result<Polled, ToolError> {
    let limit = a.limit.unwrap_or(100).clamp(1, MAX_LIST as u32) as usize;
    let agent = scope(call, a.agent_id)?;
    let events = store(ctx)?
        .events(
            &EventFilter {
                after: a.cursor.max(0),
                subject: a.subject,
                subject_id: None,
                agent: agent.as_deref(),
            },
            limit,
        )
        .map_err(db)?;
    let next_cursor = events.last().map_or(a.cursor.max(0), |e| e.id);
    Ok(Polled {
        events,
        next_cursor,
    })
}

fn orchestrator_status(
    ctx: &Ctx,
    _call: &CallCtx,
    _a: NoArgs,
) -> Result<OrchestratorStatus, ToolError> {
    let s = store(ctx)?;
    let locks = s.locks(None, usize::MAX >> 1).map_err(db)?;
    let mut agents = Vec::new();
    for agent in s.agents(false).map_err(db)? {
        let load = s.tasks_of(&agent.id, false, MAX_LIST).map_err(db)?.len() as i64;
        let files = locks.iter().filter(|l| l.agent == agent.id).count();
        agents.push(AgentLoad { agent, load, files });
    }
    Ok(OrchestratorStatus {
        agents,
        tasks: s.task_counts().map_err(db)?,
        locks: locks.len(),
        pending_clarifications: s.clarifications(false, MAX_LIST).map_err(db)?.len(),
        pending_approvals: s.approvals(false, MAX_LIST).map_err(db)?.len(),
        events_head: s.events_head().map_err(db)?,
    })
}

pub fn family() -> Family {
    Family {
        name: "tasks",
        handlers: handlers(),
        ..Family::default()
    }
}

fn handlers() -> Vec<(&'static str, HandlerEntry)> {
    vec![
        ("vox_submit_task", quick(submit, free)),
        ("vox_task_status", quick(status, free)),
        ("vox_cancel_task", quick(cancel, free)),
        ("vox_complete_task", quick(complete, free)),
        ("vox_fail_task", quick(fail, free)),
        ("vox_reorder_task", quick(reorder, free)),
        ("vox_queue_status", blocking(queue_status)),
        ("vox_rebalance", blocking(rebalance)),
        ("vox_a2a_tasks", blocking(dag)),
        ("vox_emergency_stop", blocking(emergency_stop)),
        ("vox_poll_events", quick(poll_events, free)),
        ("vox_orchestrator_status", blocking(orchestrator_status)),
    ]
}
