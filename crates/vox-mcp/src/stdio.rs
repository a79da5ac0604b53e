//! The stdio side of `vox mcp`. First it hands its stdin and stdout to the workspace daemon
//! ([`DaemonUpstream::hand_off`], `vox_daemon::handoff`), which then serves the session itself.
//! Otherwise (a terminal or a file, `VOX_MCP_HANDOFF=0`, a daemon that does not take sessions)
//! and after the daemon serving it died, `vox mcp` is a generic MCP proxy ([`crate::proxy`])
//! to an MCP session on the daemon's socket, which [`DaemonUpstream`] opens (adopting or
//! spawning the daemon). The daemon owns all state and makes every decision; this side knows
//! no tool.

use crate::encode;
use crate::list_cache::ToolListCache;
use crate::proxy::{Opened, Proxy, Replay, Upstream};
use rmcp::RoleServer;
use rmcp::service::RequestContext;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use vox_core::{ToolError, ToolOutcome, Workspace};
use vox_daemon::client::{AdoptError, DaemonClient, Use, adopt_or_spawn};
use vox_daemon::frames::{McpParams, ServeStdioParams, SessionState};
use vox_daemon::handoff::{Pending, PendingKind, send_with_fds};

/// The workspace daemon as the proxy's upstream: which daemon, and whose session.
pub struct DaemonUpstream {
    ws: Workspace,
    profile: String,
    daemon_exe: PathBuf,
    /// This client's `VOX_MCP_WORKSPACE_TOOLS`: the daemon lists workspace tools per client.
    workspace_tools: bool,
    /// This client's `VOX_AGENT_TOKEN`: every call is that orchestrator agent's.
    agent_token: Option<String>,
    /// The control connection adopted at start, used by the first MCP connection.
    adopted: Mutex<Option<DaemonClient>>,
}

/// `VOX_AGENT_TOKEN`: the credential `vox_spawn_agent` issued, when this client is an agent.
fn agent_token() -> Option<String> {
    std::env::var("VOX_AGENT_TOKEN")
        .ok()
        .filter(|t| !t.trim().is_empty())
}

impl DaemonUpstream {
    /// Adopts (or spawns) the daemon for `profile` now and checks the agent credential, so a
    /// mismatch or an unknown credential is reported before the client's first request, and
    /// the first `tools/list` needs no spawn.
    pub async fn connect(
        ws: Workspace,
        profile: String,
        daemon_exe: PathBuf,
    ) -> Result<Self, AdoptError> {
        let (client, _ping) = adopt_or_spawn(&ws, &profile, &daemon_exe, Use::Client).await?;
        let upstream = DaemonUpstream {
            ws,
            profile,
            daemon_exe,
            workspace_tools: vox_daemon::client::workspace_tools_requested(),
            agent_token: agent_token(),
            adopted: Mutex::new(Some(client)),
        };
        if upstream.agent_token.is_some() {
            // A credential the daemon does not know is refused now, not at every call.
            let refused = |message| AdoptError::Unauthorized { message };
            upstream.socket_session(None).await.map_err(refused)?;
        }
        Ok(upstream)
    }

    /// The workspace this client serves.
    pub fn workspace(&self) -> &Workspace {
        &self.ws
    }

    /// An MCP session on the daemon's socket (`orch.mcp` with this client's options and the
    /// session to restore), its first line answered.
    async fn socket_session(
        &self,
        session: Option<Value>,
    ) -> Result<
        (
            BufReader<tokio::net::unix::OwnedReadHalf>,
            tokio::net::unix::OwnedWriteHalf,
        ),
        String,
    > {
        let params = McpParams {
            workspace_tools: self.workspace_tools,
            agent_token: self.agent_token.clone(),
            session,
        };
        open_session(&self.ws, &params).await
    }

    /// Hands this process's stdin and stdout to the daemon (`orch.serve_stdio` on a connection
    /// of its own) and follows the session there until it ends.
    pub async fn hand_off(&self) -> Handoff {
        if vox_core::env::flag("VOX_MCP_HANDOFF") == Ok(Some(false)) {
            return Handoff::Kept;
        }
        match self.try_hand_off().await {
            Ok(h) => h,
            Err(e) => {
                tracing::debug!("stdio session not handed off: {e}");
                Handoff::Kept
            }
        }
    }

    async fn try_hand_off(&self) -> std::io::Result<Handoff> {
        use std::os::fd::AsFd;
        use tokio::io::AsyncBufReadExt;
        if !crate::pipes::can_hand_off() {
            return Ok(Handoff::Kept);
        }
        let pending = Pending::create()?;
        let sock = std::os::unix::net::UnixStream::connect(self.ws.socket_path())?;
        let request = json!({
            "jsonrpc": "2.0",
            "id": 1,
            "method": "orch.serve_stdio",
            "params": ServeStdioParams {
                workspace_tools: self.workspace_tools,
                agent_token: self.agent_token.clone(),
            },
        });
        let mut line = request.to_string().into_bytes();
        line.push(b'\n');
        send_with_fds(
            &sock,
            &line,
            &[
                std::io::stdin().as_fd(),
                std::io::stdout().as_fd(),
                pending.fd(),
            ],
        )?;
        sock.set_nonblocking(true)?;
        let mut lines = tokio::io::BufReader::new(tokio::net::UnixStream::from_std(sock)?).lines();
        let mut state = SessionState::default();
        while let Some(line) = lines.next_line().await.unwrap_or(None) {
            let Ok(mut frame) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            match frame.get("method").and_then(Value::as_str) {
                Some("orch.session") => {
                    if let Ok(s) = serde_json::from_value(frame["params"].take()) {
                        state = s;
                    }
                }
                Some("orch.stdio_done") => return Ok(Handoff::Ended),
                // The daemon refused before reading anything (only refusals are answered).
                None if frame.get("error").is_some() => {
                    tracing::debug!(
                        "the daemon did not take the stdio session: {}",
                        frame["error"]
                    );
                    return Ok(Handoff::Kept);
                }
                _ => {}
            }
        }
        Ok(Handoff::Lost(state, pending))
    }
}

/// The server's `instructions` on stdio (relayed or handed off alike).
pub fn instructions(root: &std::path::Path, profile: &str) -> String {
    format!(
        "vox orchestrator for workspace {} under capability profile `{profile}`.",
        root.display()
    )
}

/// The attention and rate-limit key of a stdio client: `stdio:<its name>`.
pub fn agent_of(ctx: &RequestContext<RoleServer>) -> String {
    ctx.peer
        .peer_info()
        .map(|i| format!("stdio:{}", i.client_info.name))
        .unwrap_or_else(|| "stdio".into())
}

/// The stdio transport: lines bounded by the socket's message limit (an oversized message is
/// dropped and the stream recovers), `tools/list` answered from `lists` once encoded, and at
/// most [`crate::in_flight::MAX_IN_FLIGHT`] requests running at once.
pub fn transport<R: tokio::io::AsyncRead + Send + Unpin + 'static>(
    input: R,
    out: crate::list_cache::SharedOutput,
    lists: Arc<ToolListCache>,
) -> crate::in_flight::InFlightLimit<
    crate::list_cache::ListCacheTransport<
        rmcp::transport::async_rw::AsyncRwTransport<RoleServer, R, crate::list_cache::SharedOutput>,
    >,
> {
    let stdio =
        rmcp::transport::async_rw::AsyncRwTransport::<RoleServer, _, _>::new(input, out.clone())
            .with_max_line_length(vox_core::MAX_MESSAGE_BYTES);
    crate::in_flight::InFlightLimit::new(crate::list_cache::ListCacheTransport::new(
        stdio, lists, out,
    ))
}

/// How a handoff of this process's stdin and stdout to the daemon went.
pub enum Handoff {
    /// The daemon served the session to its end.
    Ended,
    /// The daemon died serving it: the session's last state, and the requests it left
    /// unanswered, for this process to carry the session on.
    Lost(SessionState, Pending),
    /// Not handed off (a terminal or a file, or a daemon that does not take sessions): this
    /// process serves the session, relaying.
    Kept,
}

impl Upstream for DaemonUpstream {
    async fn open(&self, session: Option<Value>) -> Result<Opened, String> {
        let adopted = self
            .adopted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .filter(DaemonClient::is_alive);
        // The daemon adopted at start, while it answers (one that just died may still be
        // closing its socket); else one adopted or spawned now.
        if let Some(control) = adopted
            && let Ok((input, output)) = self.socket_session(session.clone()).await
        {
            return Ok(Opened {
                input: Box::pin(input),
                output: Box::pin(output),
                guard: Box::new(control),
            });
        }
        let (control, _) = adopt_or_spawn(&self.ws, &self.profile, &self.daemon_exe, Use::Client)
            .await
            .map_err(|e| e.to_string())?;
        let (input, output) = self.socket_session(session).await?;
        Ok(Opened {
            input: Box::pin(input),
            output: Box::pin(output),
            guard: Box::new(control),
        })
    }

    fn unavailable(&self, why: &str) -> ToolError {
        ToolError::daemon_unavailable(format!(
            "{why}; the next call adopts or respawns the workspace daemon (daemon log: {})",
            self.ws.daemon_log_path().display()
        ))
    }
}

/// Opens an MCP session on the workspace daemon's socket with `params` (`orch.mcp`): the
/// connection, past the daemon's answer, speaks MCP. `Err` says why the daemon refused.
pub async fn open_session(
    ws: &Workspace,
    params: &McpParams,
) -> Result<
    (
        BufReader<tokio::net::unix::OwnedReadHalf>,
        tokio::net::unix::OwnedWriteHalf,
    ),
    String,
> {
    let stream = tokio::net::UnixStream::connect(ws.socket_path())
        .await
        .map_err(|e| format!("cannot connect to {}: {e}", ws.socket_path().display()))?;
    let (read, mut write) = stream.into_split();
    let request = json!({"jsonrpc": "2.0", "id": 0, "method": "orch.mcp", "params": params});
    let mut line = request.to_string().into_bytes();
    line.push(b'\n');
    write.write_all(&line).await.map_err(|e| e.to_string())?;
    let mut reader = BufReader::new(read);
    let mut answer = String::new();
    reader
        .read_line(&mut answer)
        .await
        .map_err(|e| e.to_string())?;
    let answer: Value = serde_json::from_str(&answer)
        .map_err(|_| "the daemon closed the connection before answering orch.mcp".to_owned())?;
    match answer.get("error") {
        Some(e) => Err(e["message"].as_str().unwrap_or("refused").to_owned()),
        None => Ok((reader, write)),
    }
}

/// Answers the requests a dead daemon left unanswered (read from its pending table): a tool
/// call gets the `daemon_unavailable` tool error a relayed call gets, anything else an internal
/// error; each frame is written whole to `out`. Returns how many were answered.
pub async fn answer_pending(
    pending: &Pending,
    ws: &Workspace,
    out: &crate::list_cache::SharedOutput,
) -> usize {
    use tokio::io::AsyncWriteExt;
    let why = format!(
        "the workspace daemon exited during this request; the next call adopts or respawns it (daemon log: {})",
        ws.daemon_log_path().display()
    );
    let mut answered = 0;
    for (id, kind) in pending.pending() {
        let Ok(id) = serde_json::from_str::<Value>(&id) else {
            continue;
        };
        let body = match kind {
            PendingKind::ToolCall => {
                match encode::call_result(ToolOutcome::Failed(ToolError::daemon_unavailable(
                    why.clone(),
                ))) {
                    Ok(r) => json!({"jsonrpc": "2.0", "id": id, "result": r}),
                    Err(e) => json!({"jsonrpc": "2.0", "id": id, "error": e}),
                }
            }
            PendingKind::Other => json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": {"code": -32603, "message": why},
            }),
        };
        let mut frame = body.to_string().into_bytes();
        frame.push(b'\n');
        let mut out = out.clone();
        if out.write_all(&frame).await.is_err() || out.flush().await.is_err() {
            break;
        }
        answered += 1;
    }
    answered
}

/// Serves this process's MCP session on stdio with `upstream`: handed off to the daemon when
/// it can be, else (and after the daemon serving it died) proxied, until the client closes its
/// input.
pub async fn serve(upstream: DaemonUpstream) -> std::io::Result<()> {
    let lists = Arc::new(ToolListCache::default());
    let out = crate::list_cache::SharedOutput::new(crate::pipes::stdout());
    let (replay, lost) = match upstream.hand_off().await {
        Handoff::Ended => return Ok(()),
        Handoff::Kept => (Replay::default(), false),
        Handoff::Lost(state, pending) => {
            let answered = answer_pending(&pending, upstream.workspace(), &out).await;
            // A request in flight reported the death: the next one opens a new daemon. Else
            // the first tool call reports it.
            (replay_of(state), answered == 0)
        }
    };
    let peer = replay.init.clone();
    let proxy = Proxy::new(upstream, replay, Some(lists.clone()));
    if lost {
        proxy.mark_lost();
    }
    let transport = transport(crate::pipes::stdin(), out, lists);
    let service = match peer {
        // The client initialized with the daemon: the session carries on from there.
        Some(peer) => rmcp::service::serve_directly(proxy, transport, Some(peer)),
        None => rmcp::service::serve_server(proxy, transport)
            .await
            .map_err(std::io::Error::other)?,
    };
    service.waiting().await.map_err(std::io::Error::other)?;
    Ok(())
}

/// What a handed-off session had set, as the proxy replays it.
fn replay_of(state: SessionState) -> Replay {
    Replay {
        init: state.peer.and_then(|p| serde_json::from_value(p).ok()),
        log_level: state.log_level.map(crate::server::to_rmcp),
        subscribed: state.subscribed.into_iter().collect(),
        session: state.session,
    }
}

/// Calls tool `name` on the workspace daemon over an MCP session of its own (the operator's):
/// its structured result, or its error as the one error shape.
pub async fn socket_call(ws: &Workspace, name: &str, arguments: Value) -> Result<Value, String> {
    use rmcp::ServiceExt;
    let (input, output) = open_session(ws, &McpParams::default()).await?;
    let client = ()
        .serve((input, output))
        .await
        .map_err(|e| format!("no MCP session with the daemon: {e}"))?;
    let mut params = rmcp::model::CallToolRequestParams::new(name.to_owned());
    if let Value::Object(args) = arguments {
        params = params.with_arguments(args);
    }
    let result = client.call_tool(params).await.map_err(|e| e.to_string());
    let _ = client.cancel().await;
    let result = result?;
    let value = result.structured_content.unwrap_or_default();
    match result.is_error {
        Some(true) => Err(value.to_string()),
        _ => Ok(value),
    }
}
