//! The mesh family. Agent-to-agent messages, the bulletin board and the mesh's status live on
//! this daemon's journey store, so `vox mcp --profile mesh` works on one machine out of the
//! box; with `VOX_MESH_NATS_URL` set, this node also joins a mesh of nodes over NATS JetStream
//! ([`remote`]): messages to agents of other nodes, calls handed to them
//! (`vox_mesh_dispatch`), and their status. A sender is the caller as the orchestrator knows it
//! (an agent by its credential, else the operator), never a name a request states.

mod remote;

use remote::remote;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use vox_core::family::{async_typed, blocking, run_blocking, typed};
use vox_core::{CallCtx, Ctx, Family, HandlerEntry, StepDone, ToolError};
use vox_mcp_registry::BootStep;
use vox_store::{A2aMessage, CallDirection, MeshCall, QueueStat};
use vox_tools_common::store::{db, store};
use vox_tools_orchestration::orchestration::{actor, agent_for};

/// Largest message body, in bytes.
pub(crate) const MAX_BODY: usize = 64 * 1024;
/// Most messages one read or history page returns.
const MAX_PAGE: u32 = 500;
/// The recipient of a broadcast, and of the bulletin board.
pub(crate) const BROADCAST: &str = "*";
const BULLETIN: &str = "bulletin";

fn body_ok(body: &str) -> Result<(), ToolError> {
    vox_tools_common::bounded("body", body, MAX_BODY)
}

fn thread_ok(thread: &Option<String>) -> Result<(), ToolError> {
    match thread {
        Some(t) => vox_tools_common::bounded("thread", t, 128),
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
    /// The node the agent is on (its id, as vox_mesh_nodes lists it); default this node.
    node: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct Sent {
    message: A2aMessage,
    /// Who it is delivered to (`agent@node` on another node).
    recipients: Vec<String>,
}

async fn send(ctx: Arc<Ctx>, call: CallCtx, a: SendArgs) -> Result<Sent, ToolError> {
    body_ok(&a.body)?;
    thread_ok(&a.thread)?;
    vox_store::check_agent_id(&a.to).map_err(db)?;
    let r = remote(&ctx);
    match (&a.node, &r) {
        (Some(node), Some(r)) if node != r.node() => send_remote(ctx.clone(), call, r, a).await,
        (Some(node), None) if !is_local(&ctx, node)? => Err(ToolError::not_found(format!(
            "node {node} is not this node, and no mesh engine is configured (VOX_MESH_NATS_URL)"
        ))),
        _ => run_blocking(move || send_local(&ctx, &call, a)).await,
    }
}

/// Whether `node` names this node when the mesh is embedded (its journey store's id).
fn is_local(ctx: &Ctx, node: &str) -> Result<bool, ToolError> {
    Ok(store(ctx)?.store_id().map_err(db)?.as_deref() == Some(node))
}

fn send_local(ctx: &Ctx, call: &CallCtx, a: SendArgs) -> Result<Sent, ToolError> {
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

/// To an agent on another node: recorded here (history), then stored by JetStream in that
/// node's queue before this returns (so it waits there while the node is down); a message that
/// could not be queued is not kept.
async fn send_remote(
    ctx: Arc<Ctx>,
    call: CallCtx,
    r: &remote::Remote,
    a: SendArgs,
) -> Result<Sent, ToolError> {
    let node = a.node.clone().unwrap_or_default();
    r.peer_checked(&node)?;
    // Not checked against the agents the node last announced: an agent spawned since its last
    // heartbeat is real. A message to an agent that never comes waits in that node's store.
    let link = r.link()?.clone();
    let to = format!("{}@{node}", a.to);
    let sender = actor(&call).to_owned();
    let message = {
        let (ctx, sender, to, thread, body) = (
            ctx.clone(),
            sender.clone(),
            to.clone(),
            a.thread.clone(),
            a.body.clone(),
        );
        run_blocking(move || {
            store(&ctx)?
                .a2a_send(&sender, &to, &[], thread.as_deref(), &body)
                .map_err(db)
        })
        .await?
    };
    let id = format!("{}:m{}", r.id_prefix, message.id);
    let wire = vox_mesh::Wire::A2a {
        id: id.clone(),
        sender,
        recipient: a.to,
        thread: message.thread.clone(),
        body: a.body,
    };
    if let Err(e) = link.send(&node, vox_mesh::Queue::In, &wire, &id).await {
        let mid = message.id;
        let _ = run_blocking(move || store(&ctx)?.a2a_forget(mid).map_err(db)).await;
        return Err(ToolError::unavailable(format!("not sent: {e}")));
    }
    Ok(Sent {
        message,
        recipients: vec![to],
    })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct BroadcastArgs {
    /// The message (at most 64 KiB), delivered to every agent but the sender: on this node,
    /// and over NATS on every node of its trust list.
    body: String,
    thread: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct Broadcast {
    message: A2aMessage,
    /// This node's agents it is delivered to, then `*@<node>` for each other node it was queued
    /// for (every agent there).
    recipients: Vec<String>,
    /// Nodes it could not be queued for (the NATS server unreachable): name and why.
    unreached: Vec<String>,
}

async fn broadcast(ctx: Arc<Ctx>, call: CallCtx, a: BroadcastArgs) -> Result<Broadcast, ToolError> {
    body_ok(&a.body)?;
    thread_ok(&a.thread)?;
    let me = actor(&call).to_owned();
    let (message, mut recipients) = {
        let (ctx, me, thread, body) = (ctx.clone(), me.clone(), a.thread.clone(), a.body.clone());
        run_blocking(move || {
            let s = store(&ctx)?;
            let to: Vec<String> = s
                .agents(false)
                .map_err(db)?
                .into_iter()
                .map(|a| a.id)
                .filter(|id| *id != me)
                .collect();
            let message = s
                .a2a_send(&me, BROADCAST, &to, thread.as_deref(), &body)
                .map_err(db)?;
            Ok((message, to))
        })
        .await?
    };
    let mut unreached = Vec::new();
    if let Some(r) = remote(&ctx) {
        let link = r.link()?.clone();
        let id = format!("{}:m{}", r.id_prefix, message.id);
        let wire = vox_mesh::Wire::A2a {
            id: id.clone(),
            sender: me,
            recipient: BROADCAST.into(),
            thread: message.thread.clone(),
            body: a.body,
        };
        for p in &r.config.peers {
            match link.send(&p.node, vox_mesh::Queue::In, &wire, &id).await {
                Ok(()) => recipients.push(format!("{BROADCAST}@{}", p.node)),
                Err(e) => unreached.push(format!("{}: {e}", p.node)),
            }
        }
    }
    Ok(Broadcast {
        message,
        recipients,
        unreached,
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
    vox_tools_common::bounded("topic", &a.topic, 128)?;
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
        return Err(ToolError::invalid_arguments(format!(
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
    let agent = match (call.acting_agent(), bulletin) {
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
    /// Per recipient on this node: pending and acknowledged messages.
    queues: Vec<QueueStat>,
    /// Over NATS: this node's durable queues and calls in flight.
    remote: Option<RemoteStats>,
}

#[derive(Serialize, JsonSchema)]
struct RemoteStats {
    /// Messages and calls waiting in this node's JetStream inbox, and delivered but not yet
    /// acknowledged.
    inbox_waiting: u64,
    inbox_unacked: u64,
    /// Results of this node's calls waiting to be read.
    results_waiting: u64,
    /// Calls this node sent that have no result yet, and calls it is running for others.
    calls_out_open: i64,
    calls_in_open: i64,
    /// Since the daemon started: envelopes sent, received, refused (forged, misaddressed, from
    /// a node off the trust list), delivered again, heartbeats heard.
    sent: u64,
    received: u64,
    refused: u64,
    redelivered: u64,
    heartbeats: u64,
}

async fn queue_stats(ctx: Arc<Ctx>, _call: CallCtx, _a: NoArgs) -> Result<Stats, ToolError> {
    let c = ctx.clone();
    let (queues, out_open, in_open) = run_blocking(move || {
        let s = store(&c)?;
        Ok((
            s.a2a_queue_stats().map_err(db)?,
            s.mesh_calls_open(CallDirection::Out).map_err(db)?,
            s.mesh_calls_open(CallDirection::In).map_err(db)?,
        ))
    })
    .await?;
    let remote = match remote(&ctx) {
        None => None,
        Some(r) => {
            let link = r.link()?;
            let unreachable = |e: vox_mesh::MeshError| ToolError::unavailable(e.to_string());
            let (inbox_waiting, inbox_unacked) = link
                .backlog(vox_mesh::Queue::In)
                .await
                .map_err(unreachable)?;
            let (results_waiting, _) = link
                .backlog(vox_mesh::Queue::Result)
                .await
                .map_err(unreachable)?;
            let c = link.counter_values();
            Some(RemoteStats {
                inbox_waiting,
                inbox_unacked,
                results_waiting,
                calls_out_open: out_open,
                calls_in_open: in_open,
                sent: c.sent,
                received: c.received,
                refused: c.refused,
                redelivered: c.redelivered,
                heartbeats: c.heartbeats,
            })
        }
    };
    Ok(Stats { queues, remote })
}

#[derive(Serialize, JsonSchema)]
struct Node {
    node_id: String,
    name: String,
    workspace: String,
    /// `embedded` (this daemon's journey store is the whole mesh) or `nats`.
    mode: String,
    /// `up`; for another node `down` (three heartbeats missed) or `unseen` (never heard).
    status: String,
    agents: Vec<String>,
    pending: i64,
    /// How late its last heartbeat arrived, in milliseconds (another node's).
    lag_ms: Option<i64>,
    /// Milliseconds since its last heartbeat (another node's).
    last_seen_ms_ago: Option<u64>,
}

#[derive(Serialize, JsonSchema)]
struct Nodes {
    /// This node first, then every node of its trust list.
    nodes: Vec<Node>,
}

fn local(ctx: &Ctx) -> Result<Node, ToolError> {
    let s = store(ctx)?;
    let r = remote(ctx);
    let node_id = match &r {
        Some(r) => r.node().to_owned(),
        None => s.store_id().map_err(db)?.unwrap_or_default(),
    };
    Ok(Node {
        node_id,
        name: r
            .as_ref()
            .map(|r| r.config.name.clone())
            .unwrap_or_default(),
        workspace: ctx.workspace.root.display().to_string(),
        mode: if r.is_some() { "nats" } else { "embedded" }.into(),
        status: "up".into(),
        agents: s
            .agents(false)
            .map_err(db)?
            .into_iter()
            .map(|a| a.id)
            .collect(),
        pending: s
            .a2a_queue_stats()
            .map_err(db)?
            .iter()
            .map(|q| q.pending)
            .sum(),
        lag_ms: None,
        last_seen_ms_ago: None,
    })
}

fn nodes(ctx: &Ctx, _a: NoArgs) -> Result<Nodes, ToolError> {
    let mut nodes = vec![local(ctx)?];
    if let Some(link) = remote(ctx).and_then(|r| r.link().ok().cloned()) {
        nodes.extend(link.peers().into_iter().map(|p| Node {
            node_id: p.node,
            name: p.name,
            workspace: p.workspace,
            mode: "nats".into(),
            status: p.status.into(),
            agents: p.agents,
            pending: p.pending,
            lag_ms: p.lag_ms,
            last_seen_ms_ago: p.last_seen_ms_ago,
        }));
    }
    Ok(Nodes { nodes })
}

fn local_status(ctx: &Ctx, _a: NoArgs) -> Result<Node, ToolError> {
    local(ctx)
}

/// Longest a dispatch waits for its result.
const MAX_WAIT_MS: u64 = 60_000;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DispatchArgs {
    /// The node to run it (its id, as vox_mesh_nodes lists it).
    node: Option<String>,
    /// The tool it runs there, e.g. vox_submit_task.
    tool: Option<String>,
    /// The tool's arguments (an object; at most 64 KiB encoded), e.g. {"title": "...",
    /// "agent_id": "..."} to hand a task to one of its agents.
    arguments: Option<serde_json::Map<String, serde_json::Value>>,
    /// How long to wait for the result, in milliseconds (default 10000, at most 60000; 0 does
    /// not wait).
    wait_ms: Option<u64>,
    /// A call made earlier: report it (and wait, with wait_ms), instead of making one.
    call_id: Option<String>,
}

async fn dispatch(ctx: Arc<Ctx>, call: CallCtx, a: DispatchArgs) -> Result<MeshCall, ToolError> {
    let r = remote(&ctx).ok_or_else(|| {
        ToolError::unavailable(
            "no mesh engine is configured (VOX_MESH_NATS_URL): embedded, this node is the whole mesh and there is no other node to hand work to",
        )
    })?;
    let wait = std::time::Duration::from_millis(a.wait_ms.unwrap_or(10_000).min(MAX_WAIT_MS));
    let call_id = match (a.call_id, a.node, a.tool) {
        (Some(id), None, None) if a.arguments.is_none() => id,
        (None, Some(node), Some(tool)) => {
            r.peer_checked(&node)?;
            let link = r.link()?.clone();
            let arguments = serde_json::Value::Object(a.arguments.unwrap_or_default());
            if arguments.to_string().len() > MAX_BODY {
                return Err(ToolError::invalid_arguments(format!(
                    "`arguments`: at most {MAX_BODY} bytes encoded"
                )));
            }
            vox_tools_common::bounded("tool", &tool, 128)?;
            let (c, me) = (ctx.clone(), r.id_prefix.clone());
            let (n, t, args) = (node.clone(), tool.clone(), arguments.clone());
            let made =
                run_blocking(move || store(&c)?.mesh_call_out(&me, &n, &t, &args).map_err(db))
                    .await?;
            // A call that came here through the mesh carries its chain on (a confused deputy
            // cannot lend its own grant to the node that asked it).
            let wire = vox_mesh::Wire::Call {
                id: made.call_id.clone(),
                tool,
                arguments,
                origin: call
                    .scope()
                    .mesh_origin
                    .iter()
                    .map(|n| n.to_string())
                    .collect(),
            };
            if let Err(e) = link
                .send(&node, vox_mesh::Queue::In, &wire, &made.call_id)
                .await
            {
                let (c, id) = (ctx.clone(), made.call_id.clone());
                let err =
                    serde_json::json!({"error": {"code": e.code(), "message": e.to_string()}});
                let _ = run_blocking(move || {
                    store(&c)?
                        .mesh_call_finish(CallDirection::Out, &id, false, &err)
                        .map_err(db)
                })
                .await;
                return Err(ToolError::unavailable(format!("not sent: {e}")));
            }
            made.call_id
        }
        _ => {
            return Err(ToolError::invalid_arguments(
                "give `node` and `tool` (and `arguments`) to make a call, or `call_id` alone to report one",
            ));
        }
    };
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        // Registered before reading, so a result that lands in between still wakes us.
        let woken = r.results.notified();
        let (c, id) = (ctx.clone(), call_id.clone());
        let found = run_blocking(move || store(&c)?.mesh_call(CallDirection::Out, &id).map_err(db))
            .await?
            .ok_or_else(|| ToolError::not_found(format!("no call {call_id} made by this node")))?;
        if found.state != "sent" || tokio::time::Instant::now() >= deadline {
            return Ok(found);
        }
        tokio::select! {
            _ = woken => {}
            _ = tokio::time::sleep_until(deadline) => {}
            _ = call.cancel.cancelled() => return Ok(found),
        }
    }
}

fn boot_federation(ctx: &mut Ctx) -> Result<StepDone, String> {
    if let Some(detail) = remote::configure(ctx)? {
        return Ok(StepDone::Ready(detail));
    }
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

fn boot_worker(ctx: &mut Ctx) -> Result<StepDone, String> {
    Ok(StepDone::Ready(match remote(ctx) {
        Some(r) => format!(
            "durable consumer in-{} reads this node's messages and calls from JetStream",
            r.node()
        ),
        None => {
            "embedded mesh: messages stay on this node's journey store; nothing remote to consume"
                .into()
        }
    }))
}

fn boot_results(ctx: &mut Ctx) -> Result<StepDone, String> {
    Ok(StepDone::Ready(match remote(ctx) {
        Some(r) => format!(
            "durable consumer result-{} reads the results of this node's calls from JetStream",
            r.node()
        ),
        None => "embedded mesh: no call leaves this node, so no result to consume".into(),
    }))
}

/// This crate's family (the mesh), in the place `vox_tools::families()` assembles it.
pub fn families() -> Vec<Family> {
    vec![family()]
}

fn family() -> Family {
    Family {
        name: "mesh",
        steps: vec![
            (BootStep::PopuliFederationPoller, boot_federation),
            (BootStep::A2aRemoteResultPoller, boot_results),
            (BootStep::A2aRemoteWorkerPoller, boot_worker),
        ],
        handlers: handlers(),
        on_started: Some(remote::start),
        ..Family::default()
    }
}

fn handlers() -> Vec<(&'static str, HandlerEntry)> {
    vec![
        ("vox_a2a_send", async_typed(send)),
        ("vox_a2a_broadcast", async_typed(broadcast)),
        ("vox_a2a_inbox", blocking(inbox)),
        ("vox_a2a_ack", blocking(ack)),
        ("vox_a2a_history", blocking(history)),
        ("vox_publish_message", blocking(publish)),
        ("vox_mesh_queue_stats", async_typed(queue_stats)),
        ("vox_mesh_nodes", typed(nodes)),
        ("vox_populi_local_status", typed(local_status)),
        ("vox_mesh_dispatch", async_typed(dispatch)),
    ]
}
