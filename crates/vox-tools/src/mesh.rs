//! The mesh family, embedded: with no messaging engine configured, agent-to-agent messages,
//! the bulletin board and the mesh's status live on this daemon's journey store, so
//! `vox mcp --profile mesh` works on one machine out of the box. A sender is the caller as the
//! orchestrator knows it (an agent by its credential, else the operator), never a name a
//! request states.

use crate::orchestration::{actor, agent_for};
use crate::store::{db, store};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use vox_core::family::{blocking, typed};
use vox_core::{CallCtx, Ctx, Family, HandlerEntry, StepDone, ToolError};
use vox_mcp_registry::BootStep;
use vox_store::{A2aMessage, QueueStat};

/// Largest message body, in bytes.
const MAX_BODY: usize = 64 * 1024;
/// Most messages one read or history page returns.
const MAX_PAGE: u32 = 500;
/// The recipient of a broadcast, and of the bulletin board.
const BROADCAST: &str = "*";
const BULLETIN: &str = "bulletin";

fn body_ok(body: &str) -> Result<(), ToolError> {
    crate::bounded("body", body, MAX_BODY)
}

fn thread_ok(thread: &Option<String>) -> Result<(), ToolError> {
    match thread {
        Some(t) => crate::bounded("thread", t, 128),
        None => Ok(()),
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SendArgs {
    /// The recipient agent's id.
    to: String,
    /// The message (at most 64 KiB).
    body: String,
    /// The conversation it belongs to (default: a new thread named after the message).
    thread: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct Sent {
    message: A2aMessage,
    /// Who it is delivered to.
    recipients: Vec<String>,
}

fn send(ctx: &Ctx, call: &CallCtx, a: SendArgs) -> Result<Sent, ToolError> {
    body_ok(&a.body)?;
    thread_ok(&a.thread)?;
    let s = store(ctx)?;
    s.agent_get(&a.to).map_err(db)?;
    let message = s
        .a2a_send(
            actor(call),
            &a.to,
            std::slice::from_ref(&a.to),
            a.thread.as_deref(),
            &a.body,
        )
        .map_err(db)?;
    Ok(Sent {
        message,
        recipients: vec![a.to],
    })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct BroadcastArgs {
    /// The message (at most 64 KiB), delivered to every agent but the sender.
    body: String,
    thread: Option<String>,
}

fn broadcast(ctx: &Ctx, call: &CallCtx, a: BroadcastArgs) -> Result<Sent, ToolError> {
    body_ok(&a.body)?;
    thread_ok(&a.thread)?;
    let s = store(ctx)?;
    let me = actor(call);
    let to: Vec<String> = s
        .agents(false)
        .map_err(db)?
        .into_iter()
        .map(|a| a.id)
        .filter(|id| id != me)
        .collect();
    let message = s
        .a2a_send(me, BROADCAST, &to, a.thread.as_deref(), &a.body)
        .map_err(db)?;
    Ok(Sent {
        message,
        recipients: to,
    })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PublishArgs {
    /// The board's topic (at most 128 bytes).
    topic: String,
    /// The notice (at most 64 KiB). Anyone reads the board with vox_a2a_history
    /// {thread: "bulletin:<topic>"}; nothing is delivered to an inbox.
    body: String,
}

fn publish(ctx: &Ctx, call: &CallCtx, a: PublishArgs) -> Result<Sent, ToolError> {
    crate::bounded("topic", &a.topic, 128)?;
    body_ok(&a.body)?;
    let thread = format!("{BULLETIN}:{}", a.topic);
    let message = store(ctx)?
        .a2a_send(actor(call), BULLETIN, &[], Some(&thread), &a.body)
        .map_err(db)?;
    Ok(Sent {
        message,
        recipients: Vec::new(),
    })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct InboxArgs {
    /// The agent whose inbox (an agent reads its own; the operator names one).
    agent_id: Option<String>,
    /// Most messages (default 50, at most 500).
    limit: Option<u32>,
}

#[derive(Serialize, JsonSchema)]
struct Inbox {
    agent_id: String,
    /// Unacknowledged messages, oldest first: the same read returns them again until
    /// vox_a2a_ack.
    messages: Vec<A2aMessage>,
}

fn inbox(ctx: &Ctx, call: &CallCtx, a: InboxArgs) -> Result<Inbox, ToolError> {
    let agent = agent_for(call, a.agent_id)?;
    let limit = a.limit.unwrap_or(50).clamp(1, MAX_PAGE) as usize;
    let messages = store(ctx)?.a2a_inbox(&agent, limit).map_err(db)?;
    Ok(Inbox {
        agent_id: agent,
        messages,
    })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AckArgs {
    /// The messages read (at most 500).
    message_ids: Vec<i64>,
    /// The agent acknowledging (an agent acks its own; the operator names one).
    agent_id: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct Acked {
    agent_id: String,
    /// Newly acknowledged (repeats, and messages not addressed to the agent, count none).
    acked: usize,
}

fn ack(ctx: &Ctx, call: &CallCtx, a: AckArgs) -> Result<Acked, ToolError> {
    if a.message_ids.len() > MAX_PAGE as usize {
        return Err(ToolError::InvalidArguments(format!(
            "`message_ids`: at most {MAX_PAGE} per call"
        )));
    }
    let agent = agent_for(call, a.agent_id)?;
    let acked = store(ctx)?.a2a_ack(&agent, &a.message_ids).map_err(db)?;
    Ok(Acked {
        agent_id: agent,
        acked,
    })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct HistoryArgs {
    /// Only this thread (`bulletin:<topic>` for a topic of the bulletin board).
    thread: Option<String>,
    /// Only messages this agent sent or was sent.
    agent_id: Option<String>,
    /// The `next_cursor` of a previous page (older messages).
    cursor: Option<i64>,
    /// Page size (default 50, at most 500).
    limit: Option<u32>,
}

#[derive(Serialize, JsonSchema)]
struct History {
    /// Newest first.
    messages: Vec<A2aMessage>,
    next_cursor: Option<i64>,
}

fn history(ctx: &Ctx, call: &CallCtx, a: HistoryArgs) -> Result<History, ToolError> {
    thread_ok(&a.thread)?;
    // An agent sees the bulletin board and its own messages; the operator sees every message.
    let bulletin = a
        .thread
        .as_deref()
        .is_some_and(|t| t.starts_with(&format!("{BULLETIN}:")));
    let agent = match (&call.acting_agent, bulletin) {
        (Some(_), false) => Some(agent_for(call, a.agent_id)?),
        _ => a.agent_id,
    };
    let limit = a.limit.unwrap_or(50).clamp(1, MAX_PAGE) as usize;
    let mut messages = store(ctx)?
        .a2a_history(a.thread.as_deref(), agent.as_deref(), a.cursor, limit + 1)
        .map_err(db)?;
    let next_cursor = (messages.len() > limit).then(|| {
        messages.truncate(limit);
        messages.last().map(|m| m.id)
    });
    Ok(History {
        messages,
        next_cursor: next_cursor.flatten(),
    })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

#[derive(Serialize, JsonSchema)]
struct Stats {
    /// Per recipient: pending and acknowledged messages.
    queues: Vec<QueueStat>,
}

fn queue_stats(ctx: &Ctx, _a: NoArgs) -> Result<Stats, ToolError> {
    Ok(Stats {
        queues: store(ctx)?.a2a_queue_stats().map_err(db)?,
    })
}

#[derive(Serialize, JsonSchema)]
struct Node {
    node_id: String,
    workspace: String,
    /// `embedded`: this daemon's journey store is the whole mesh.
    mode: String,
    status: String,
    agents: usize,
    pending: i64,
}

#[derive(Serialize, JsonSchema)]
struct Nodes {
    nodes: Vec<Node>,
}

fn local(ctx: &Ctx) -> Result<Node, ToolError> {
    let s = store(ctx)?;
    Ok(Node {
        node_id: s.store_id().map_err(db)?.unwrap_or_default(),
        workspace: ctx.workspace.root.display().to_string(),
        mode: "embedded".into(),
        status: "up".into(),
        agents: s.agents(false).map_err(db)?.len(),
        pending: s
            .a2a_queue_stats()
            .map_err(db)?
            .iter()
            .map(|q| q.pending)
            .sum(),
    })
}

fn nodes(ctx: &Ctx, _a: NoArgs) -> Result<Nodes, ToolError> {
    Ok(Nodes {
        nodes: vec![local(ctx)?],
    })
}

fn local_status(ctx: &Ctx, _a: NoArgs) -> Result<Node, ToolError> {
    local(ctx)
}

fn boot_federation(ctx: &mut Ctx) -> Result<StepDone, String> {
    let id = ctx
        .get::<std::sync::Arc<vox_store::Store>>()
        .map(|s| s.store_id())
        .transpose()
        .map_err(|e| e.to_string())?
        .flatten()
        .unwrap_or_default();
    Ok(StepDone::Ready(format!(
        "embedded mesh: node {id} is the whole mesh (no messaging engine configured, so no remote node to poll)"
    )))
}

fn boot_remote(_ctx: &mut Ctx) -> Result<StepDone, String> {
    Ok(StepDone::Ready(
        "embedded mesh: messages stay on this node's journey store; nothing remote to consume"
            .into(),
    ))
}

pub fn family() -> Family {
    Family {
        name: "mesh",
        steps: vec![
            (BootStep::PopuliFederationPoller, boot_federation),
            (BootStep::A2aRemoteResultPoller, boot_remote),
            (BootStep::A2aRemoteWorkerPoller, boot_remote),
        ],
        handlers: handlers(),
        ..Family::default()
    }
}

fn handlers() -> Vec<(&'static str, HandlerEntry)> {
    vec![
        ("vox_a2a_send", blocking(send)),
        ("vox_a2a_broadcast", blocking(broadcast)),
        ("vox_a2a_inbox", blocking(inbox)),
        ("vox_a2a_ack", blocking(ack)),
        ("vox_a2a_history", blocking(history)),
        ("vox_publish_message", blocking(publish)),
        ("vox_mesh_queue_stats", typed(queue_stats)),
        ("vox_mesh_nodes", typed(nodes)),
        ("vox_populi_local_status", typed(local_status)),
    ]
}
