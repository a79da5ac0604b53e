//! The mesh over NATS, when `VOX_MESH_NATS_URL` is set. This node joins with its signed
//! identity (`.vox/mesh-node.nk`) and trusts the nodes `.vox/mesh.toml` names, each under a
//! profile. Three loops run once the daemon has started: heartbeats (`populi_federation_poller`:
//! announce this node and its agents, hear the others), this node's inbox of messages and calls
//! (`a2a_remote_worker_poller`), and the results of calls it made (`a2a_remote_result_poller`).
//! A call from another node is decided by `authorize_tool` here, under what the trust list
//! grants that node, narrowed to this daemon's profile and to public tools.

use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use vox_core::family::run_blocking;
use vox_core::{CallRun, CallScope, Ctx, ToolError, ToolOutcome};
use vox_mcp_registry::{Caller, ProfileSet, Role};
use vox_mesh::{Link, MeshConfig, NodeKey, Opened, Queue, Wire};
use vox_store::CallDirection;
use vox_tools_common::store::db;
use vox_tools_common::store::store;

pub(crate) struct Remote {
    pub config: MeshConfig,
    pub key: Arc<NodeKey>,
    /// What this node's message and call ids start with: its node id, then its journey store's
    /// id, so a node whose store was replaced (ids counting from 1 again) never repeats an id
    /// its peers have seen (they keep every message id they stored, to recognise redeliveries).
    pub id_prefix: String,
    link: OnceLock<Arc<Link>>,
    /// Woken whenever a result of a call this node made arrives.
    pub results: tokio::sync::Notify,
    /// Per trusted node: what it may call here.
    surfaces: HashMap<String, ProfileSet>,
}

impl Remote {
    pub fn node(&self) -> &str {
        self.key.id()
    }

    pub fn link(&self) -> Result<&Arc<Link>, ToolError> {
        self.link.get().ok_or_else(|| {
            ToolError::unavailable(format!(
                "this node is not connected to the mesh at {} yet (see the daemon log)",
                self.config.url
            ))
        })
    }

    pub fn peer_checked(&self, node: &str) -> Result<(), ToolError> {
        if self.config.peer(node).is_some() {
            Ok(())
        } else {
            Err(ToolError::not_found(format!(
                "node {node} is not on this node's trust list (.vox/mesh.toml)"
            )))
        }
    }
}

pub(crate) fn remote(ctx: &Ctx) -> Option<Arc<Remote>> {
    ctx.get::<Arc<Remote>>().cloned()
}

/// At boot: reads the mesh's configuration and this node's key; `None` when no engine is
/// configured (the embedded mesh). A bad configuration fails the mesh with the reason.
pub(crate) fn configure(ctx: &mut Ctx) -> Result<Option<String>, String> {
    let ws = &ctx.workspace;
    let default_name = ws
        .root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "vox".into());
    let Some(config) = MeshConfig::load(
        |k| std::env::var(k).ok(),
        &ws.vox_dir.join("mesh.toml"),
        &default_name,
    )
    .map_err(|e| e.to_string())?
    else {
        return Ok(None);
    };
    ws.ensure_vox_dir().map_err(|e| e.to_string())?;
    let key =
        NodeKey::load_or_create(&ws.vox_dir.join("mesh-node.nk")).map_err(|e| e.to_string())?;
    let store_id = ctx
        .get::<Arc<vox_store::Store>>()
        .ok_or("the mesh over NATS needs the journey store, which is down")?
        .store_id()
        .map_err(|e| e.to_string())?
        .unwrap_or_default();
    let mut surfaces = HashMap::new();
    for p in &config.peers {
        let granted = ProfileSet::parse(&p.profile).map_err(|e| {
            format!(
                "{}: peer {}: profile `{}`: {e}",
                ws.vox_dir.join("mesh.toml").display(),
                p.node,
                p.profile
            )
        })?;
        surfaces.insert(
            p.node.clone(),
            ctx.profile.intersect(&granted.public_only()),
        );
    }
    let detail = format!(
        "NATS mesh at {} as node {} ({}), {} trusted peer(s); connects once the daemon has started",
        config.url,
        key.id(),
        config.name,
        config.peers.len()
    );
    ctx.insert(Arc::new(Remote {
        config,
        id_prefix: format!("{}:{store_id}", key.id()),
        key: Arc::new(key),
        link: OnceLock::new(),
        results: tokio::sync::Notify::new(),
        surfaces,
    }));
    Ok(Some(detail))
}

/// Once the daemon has started: connects (retrying), then runs the three loops for the
/// daemon's life.
pub(crate) fn start(ctx: Arc<Ctx>) {
    let (Some(r), Ok(rt)) = (remote(&ctx), tokio::runtime::Handle::try_current()) else {
        return;
    };
    rt.spawn(async move {
        let mut wait = Duration::from_millis(200);
        let link = loop {
            match Link::connect(r.config.clone(), r.key.clone()).await {
                Ok(l) => break l,
                Err(e) => {
                    tracing::warn!("mesh: {e}; trying again in {wait:?}");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(5));
                }
            }
        };
        let _ = r.link.set(link.clone());
        tracing::info!(node = r.node(), "mesh: connected to {}", r.config.url);
        if let Err(e) = answer_interrupted(&ctx, &r).await {
            tracing::warn!("mesh: answering calls a stop interrupted: {e}");
        }
        let announce_ctx = ctx.clone();
        tokio::spawn(link.clone().heartbeats(move || announce(&announce_ctx)));
        for queue in [Queue::In, Queue::Result] {
            let (ctx, r, link) = (ctx.clone(), r.clone(), link.clone());
            tokio::spawn(async move {
                loop {
                    let res = link
                        .consume(queue, |o| {
                            let (ctx, r) = (ctx.clone(), r.clone());
                            async move {
                                match queue {
                                    Queue::In => incoming(&ctx, &r, o).await,
                                    Queue::Result => result(&ctx, &r, o).await,
                                }
                            }
                        })
                        .await;
                    if let Err(e) = res {
                        tracing::warn!("mesh {queue:?} queue: {e}; again in 1s");
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            });
        }
    });
}

/// What this node's heartbeat says.
fn announce(ctx: &Ctx) -> Wire {
    let (mut agents, mut pending) = (Vec::new(), 0);
    if let Ok(s) = store(ctx) {
        agents = s
            .agents(false)
            .map(|a| a.into_iter().map(|a| a.id).collect())
            .unwrap_or_default();
        pending = s
            .a2a_queue_stats()
            .map(|q| q.iter().map(|q| q.pending).sum())
            .unwrap_or(0);
        for (d, label) in [(CallDirection::Out, "out"), (CallDirection::In, "in")] {
            if let Ok(n) = s.mesh_calls_open(d) {
                metrics::gauge!("vox_mesh_calls_open", "direction" => label).set(n as f64);
            }
        }
    }
    metrics::gauge!("vox_mesh_local_agents").set(agents.len() as f64);
    metrics::gauge!("vox_mesh_pending_messages").set(pending as f64);
    Wire::Heartbeat {
        name: remote(ctx)
            .map(|r| r.config.name.clone())
            .unwrap_or_default(),
        workspace: ctx.workspace.root.display().to_string(),
        agents,
        pending,
    }
}

/// An id another node gave must be in its own namespace (`<node>:...`): no node can claim,
/// and so suppress, another's messages or calls.
fn own_id(from: &str, id: &str) -> Result<(), String> {
    match id.strip_prefix(from).and_then(|r| r.strip_prefix(':')) {
        Some(rest) if !rest.is_empty() && id.len() <= 200 => Ok(()),
        _ => Err(format!("id `{id}` is not in node {from}'s namespace")),
    }
}

/// Store work on the blocking pool; its error as text (for the consumer's log).
async fn blocking_store<T: Send + 'static>(
    ctx: &Arc<Ctx>,
    work: impl FnOnce(&vox_store::Store) -> Result<T, vox_store::StoreError> + Send + 'static,
) -> Result<T, String> {
    let ctx = ctx.clone();
    run_blocking(move || work(store(&ctx)?).map_err(db))
        .await
        .map_err(|e| e.to_string())
}

/// A message or a call from another node. An `Err` asks JetStream to deliver it again; what
/// can never be handled is logged and acknowledged.
async fn incoming(ctx: &Arc<Ctx>, r: &Arc<Remote>, o: Opened) -> Result<(), String> {
    match o.wire {
        Wire::A2a {
            id,
            sender,
            recipient,
            thread,
            body,
        } => {
            if let Err(e) =
                own_id(&o.from, &id).and(bounded_message(&sender, &recipient, &thread, &body))
            {
                tracing::warn!(node = o.from, "mesh: message refused: {e}");
                return Ok(());
            }
            let from = o.from.clone();
            blocking_store(ctx, move |s| {
                let to = if recipient == super::BROADCAST {
                    s.agents(false)?.into_iter().map(|a| a.id).collect()
                } else {
                    vec![recipient.clone()]
                };
                s.a2a_receive(
                    &id,
                    &format!("{sender}@{from}"),
                    &recipient,
                    &to,
                    &thread,
                    &body,
                )
            })
            .await?;
            Ok(())
        }
        Wire::Call {
            id,
            tool,
            arguments,
            origin,
        } => {
            if let Err(e) = own_id(&o.from, &id) {
                tracing::warn!(node = o.from, "mesh: call refused: {e}");
                return Ok(());
            }
            let (from, t, args) = (o.from.clone(), tool.clone(), arguments.clone());
            let earlier = blocking_store(ctx, {
                let id = id.clone();
                move |s| s.mesh_call_in(&id, &from, &t, &args)
            })
            .await?;
            match earlier {
                // A call delivered again: the first delivery started it, and answers it when it
                // ends (or the restart sweep does, if this node stopped meanwhile).
                Some(c) if c.state == "running" => Ok(()),
                Some(c) => {
                    let ok = c.state == "done";
                    answer(r, &o.from, &id, ok, c.result.unwrap_or(Value::Null)).await
                }
                // Acknowledged now, run in the background: a long call does not hold up this
                // node's messages; the record says it is running until it ends.
                None => {
                    let (ctx, r, from) = (ctx.clone(), r.clone(), o.from.clone());
                    tokio::spawn(async move {
                        let mut chain = origin;
                        chain.push(from.clone());
                        let (ok, value) = run_call(&ctx, &r, &chain, &tool, arguments).await;
                        if let Err(e) = finish_in(&ctx, &id, ok, &value).await {
                            tracing::warn!(call = id, "mesh: recording the call's end: {e}");
                        }
                        if let Err(e) = answer(&r, &from, &id, ok, value).await {
                            tracing::warn!(call = id, "mesh: answering the call: {e}");
                        }
                    });
                    Ok(())
                }
            }
        }
        Wire::Result { .. } | Wire::Heartbeat { .. } => {
            tracing::warn!(
                node = o.from,
                "mesh: a result or heartbeat in the inbox, dropped"
            );
            Ok(())
        }
    }
}

/// Sends the result of call `id` back to node `to`.
async fn answer(r: &Remote, to: &str, id: &str, ok: bool, value: Value) -> Result<(), String> {
    let wire = Wire::Result {
        id: id.to_owned(),
        ok,
        value,
    };
    r.link()
        .map_err(|e| e.to_string())?
        .send(to, Queue::Result, &wire, &format!("result:{id}"))
        .await
        .map_err(|e| e.to_string())
}

/// After a restart: the calls this node was running when it stopped are answered as
/// interrupted (they are not run again: a call runs at most once).
async fn answer_interrupted(ctx: &Arc<Ctx>, r: &Remote) -> Result<(), String> {
    let value = json!({"error": {"code": "interrupted", "message":
        "the node stopped while running this call; it was not run again"}});
    for c in blocking_store(ctx, |s| s.mesh_calls_interrupted()).await? {
        finish_in(ctx, &c.call_id, false, &value).await?;
        answer(r, &c.node, &c.call_id, false, value.clone()).await?;
    }
    Ok(())
}

fn bounded_message(sender: &str, recipient: &str, thread: &str, body: &str) -> Result<(), String> {
    if sender.is_empty() || sender.len() > 128 || recipient.is_empty() || recipient.len() > 128 {
        return Err("sender and recipient are 1 to 128 bytes".into());
    }
    if thread.len() > 128 || body.len() > super::MAX_BODY {
        return Err(format!(
            "a thread is at most 128 bytes, a body at most {}",
            super::MAX_BODY
        ));
    }
    Ok(())
}

async fn finish_in(ctx: &Arc<Ctx>, id: &str, ok: bool, value: &Value) -> Result<(), String> {
    let (id, value) = (id.to_owned(), value.clone());
    blocking_store(ctx, move |s| {
        s.mesh_call_finish(CallDirection::In, &id, ok, &value)
    })
    .await
    .map(|_| ())
}

/// Runs a call node `from` made, as this daemon decides: the caller is off loopback with the
/// write role, its attention key the node.
/// Longest chain of nodes a call may come through.
const MAX_CHAIN: usize = 8;

/// What a call that came through the nodes of `chain` (originator first, the sender last) may
/// reach here: the intersection of what the trust list grants every one of them. A node not
/// on the trust list, a repeated node or a chain too long is refused, however the call came.
pub(crate) fn chain_surface(
    surfaces: &HashMap<String, ProfileSet>,
    chain: &[String],
) -> Result<ProfileSet, String> {
    if chain.is_empty() || chain.len() > MAX_CHAIN {
        return Err(format!(
            "a call comes through 1 to {MAX_CHAIN} nodes, not {}",
            chain.len()
        ));
    }
    let mut surface: Option<ProfileSet> = None;
    for (i, node) in chain.iter().enumerate() {
        if chain[..i].contains(node) {
            return Err(format!("node {node} appears twice in the call's chain"));
        }
        let granted = surfaces.get(node).ok_or_else(|| {
            format!("node {node}, which the call came through, is not trusted here")
        })?;
        surface = Some(match surface {
            None => granted.clone(),
            Some(s) => s.intersect(granted),
        });
    }
    surface.ok_or_else(|| "an empty chain".to_owned())
}

/// Runs a call that came through the nodes of `chain` (its sender last), as this daemon
/// decides: the caller is off loopback with the write role, its attention key the sender, its
/// surface what every node of the chain is granted here.
async fn run_call(
    ctx: &Arc<Ctx>,
    r: &Remote,
    chain: &[String],
    tool: &str,
    arguments: Value,
) -> (bool, Value) {
    let from = chain.last().map_or("", String::as_str);
    let Some(orch) = ctx.orchestrator() else {
        return (
            false,
            json!({"error": {"code": "unavailable", "message": "this node cannot run calls now"}}),
        );
    };
    let surface = match chain_surface(&r.surfaces, chain) {
        Ok(s) => s,
        Err(why) => {
            return (
                false,
                json!({"error": {"code": "unauthorized", "message": why}}),
            );
        }
    };
    let caller = Caller {
        loopback: false,
        role: Role::Write,
    };
    let scope = CallScope::new(
        surface,
        caller,
        &format!("node:{from}"),
        &format!("mesh:{from}"),
    )
    .via_mesh(chain.iter().map(|n| Arc::from(n.as_str())).collect());
    let outcome = orch
        .call(&Arc::new(scope), tool, arguments, CallRun::default())
        .await;
    match outcome {
        ToolOutcome::Ok(_) | ToolOutcome::Content(_) => (true, outcome.to_json()),
        ToolOutcome::Denied(d) => {
            let granted = |n: &String| {
                let profile = r.config.peer(n).map_or("", |p| p.profile.as_str());
                format!("node {n} `{profile}`")
            };
            let via = if chain.len() > 1 {
                format!(
                    " (the call came through {}: it may call what all of them are granted)",
                    chain.iter().map(granted).collect::<Vec<_>>().join(", ")
                )
            } else {
                String::new()
            };
            let profile = r.config.peer(from).map_or("", |p| p.profile.as_str());
            (
                false,
                json!({"error": {"code": d.code.as_str(), "message": format!(
                    "{}: node {from} may call only the public tools of profile `{profile}` here{via}",
                    d.message
                )}}),
            )
        }
        ToolOutcome::Failed(_) => (false, outcome.to_json()),
    }
}

/// The result of a call this node made: only the node it was sent to may answer it.
async fn result(ctx: &Arc<Ctx>, r: &Arc<Remote>, o: Opened) -> Result<(), String> {
    let Wire::Result { id, ok, value } = o.wire else {
        tracing::warn!(
            node = o.from,
            "mesh: not a result in the result queue, dropped"
        );
        return Ok(());
    };
    let from = o.from.clone();
    let done = blocking_store(ctx, move |s| {
        match s.mesh_call(CallDirection::Out, &id)? {
            Some(c) if c.node == from => s.mesh_call_finish(CallDirection::Out, &id, ok, &value),
            _ => Ok(false),
        }
    })
    .await?;
    if done {
        r.results.notify_waiters();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn granted(pairs: &[(&str, &str)]) -> HashMap<String, ProfileSet> {
        let dev = ProfileSet::dev();
        pairs
            .iter()
            .map(|(n, p)| {
                let g = ProfileSet::parse(p).unwrap();
                ((*n).to_owned(), dev.intersect(&g.public_only()))
            })
            .collect()
    }

    fn has(s: &ProfileSet, tool: &str) -> bool {
        s.tools().iter().any(|t| t.name == tool)
    }

    #[test]
    fn a_chain_reaches_what_every_node_of_it_is_granted() {
        let g = granted(&[("beta", "orchestrator,mesh"), ("alpha", "mesh")]);
        let direct = chain_surface(&g, &["beta".into()]).unwrap();
        assert!(has(&direct, "vox_submit_task") && has(&direct, "vox_mesh_dispatch"));
        // alpha asks beta to call here: alpha's grant holds, however beta relays it.
        let relayed = chain_surface(&g, &["alpha".into(), "beta".into()]).unwrap();
        assert!(
            !has(&relayed, "vox_submit_task"),
            "beta lends alpha nothing"
        );
        assert!(has(&relayed, "vox_mesh_dispatch"));
    }

    #[test]
    fn a_node_granted_a_workspace_profile_reaches_its_public_upstream_tools_only() {
        use vox_mcp_registry::{
            Caller, Exposure, UpstreamClass, authorize_upstream, compile_workspace_profile,
            install_workspace_profiles,
        };
        let m = vox_contracts::parse_profile_manifest(
            "id: team\ndescription: d\ntools:\n  include: [time__*]\nrequires: []\nmax_exposure: operator\n",
        )
        .unwrap();
        let path = std::path::Path::new("/ws/.vox/profiles/team.v1.yaml");
        let p = compile_workspace_profile(path, &m, &["time".into()]).unwrap();
        install_workspace_profiles(vec![p]);
        let g = granted(&[("beta", "team"), ("alpha", "mesh")]);
        let direct = chain_surface(&g, &["beta".into()]).unwrap();
        let public = UpstreamClass {
            exposure: Exposure::Public,
            ..UpstreamClass::default()
        };
        let remote = Caller {
            loopback: false,
            role: vox_mcp_registry::Role::Write,
        };
        assert!(authorize_upstream(&direct, "time__now", public, remote, u32::MAX).is_ok());
        // A person's upstream tool is not a node's, whatever its grant says.
        let operator = UpstreamClass::default();
        assert!(authorize_upstream(&direct, "time__now", operator, remote, u32::MAX).is_err());
        assert!(authorize_upstream(&direct, "git__log", public, remote, u32::MAX).is_err());
        // Relayed through alpha (granted `mesh` only): nothing upstream.
        let relayed = chain_surface(&g, &["alpha".into(), "beta".into()]).unwrap();
        assert!(authorize_upstream(&relayed, "time__now", public, remote, u32::MAX).is_err());
    }

    #[test]
    fn a_chain_with_an_untrusted_repeated_or_too_many_nodes_is_refused() {
        let g = granted(&[("beta", "mesh")]);
        let e = chain_surface(&g, &["mallory".into(), "beta".into()]).unwrap_err();
        assert!(e.contains("mallory") && e.contains("not trusted"), "{e}");
        let e = chain_surface(&g, &["beta".into(), "beta".into()]).unwrap_err();
        assert!(e.contains("twice"), "{e}");
        let long: Vec<String> = (0..9).map(|i| format!("n{i}")).collect();
        assert!(chain_surface(&g, &long).is_err());
        assert!(chain_surface(&g, &[]).is_err());
    }
}
