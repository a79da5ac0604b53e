//! The stdio side of `vox mcp`. First it hands its stdin and stdout to the workspace daemon
//! ([`DaemonBackend::hand_off`], `vox_daemon::handoff`), which then serves the session itself.
//! Otherwise (a terminal or a file, a daemon that does not take sessions) and after the daemon
//! serving it died, this backend relays: lists and calls go to the daemon over its socket. The
//! daemon owns all state and makes every decision; this side only relays. When the daemon dies,
//! the call that finds out reports it, and the next call adopts or respawns one.

use crate::encode;
use crate::list_cache::ToolListCache;
use crate::server::{Backend, McpServer, ToolCall};
use rmcp::model::Tool;
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;
use vox_core::{CallEvents, ToolError, ToolOutcome, Workspace};
use vox_daemon::client::{AdoptError, ClientError, DaemonClient, Use, adopt_or_spawn};
use vox_daemon::frames::{
    AnswerParams, AskParams, ListToolsParams, LogParams, ProgressParams, ServeStdioParams,
    SessionState, ToolCallParams,
};
use vox_daemon::handoff::{Pending, PendingKind, send_with_fds};

/// Which daemon to talk to, the live connection if any, and what this client chose.
pub struct DaemonBackend {
    ws: Workspace,
    profile: String,
    daemon_exe: PathBuf,
    /// This client's `VOX_MCP_WORKSPACE_TOOLS`: the daemon lists workspace tools per client.
    workspace_tools: bool,
    /// This client's `VOX_AGENT_TOKEN`: every call is that orchestrator agent's.
    agent_token: Option<String>,
    client: tokio::sync::Mutex<Option<Arc<DaemonClient>>>,
    /// Daemon notification frames, forwarded to the MCP client.
    notes: mpsc::UnboundedSender<Value>,
    /// The last `tools/list`, until the daemon says the list changed or the connection is new.
    tools: Arc<ToolListCache>,
    /// The skill this client activated. A restarted daemon remembers no session, so the skill
    /// is activated again on the new connection before anything else is sent (fail closed: if
    /// it cannot be, calls fail until the client chooses again).
    active_skill: Mutex<Option<String>>,
}

/// Adopts (or spawns) the daemon for `profile` now, so a mismatch is reported before the
/// client's first request and the first `tools/list` needs no spawn; returns the MCP server.
pub async fn connect(
    ws: Workspace,
    profile: String,
    daemon_exe: PathBuf,
) -> Result<McpServer<DaemonBackend>, AdoptError> {
    let (notes, rx) = mpsc::unbounded_channel();
    let (client, _ping) =
        adopt_or_spawn(&ws, &profile, &daemon_exe, Some(notes.clone()), Use::Client).await?;
    let agent_token = agent_token();
    if let Some(token) = &agent_token {
        // A credential the daemon does not know is refused now, not at every call.
        let params = json!(ListToolsParams {
            agent_token: Some(token.clone()),
            ..ListToolsParams::default()
        });
        if let Err(e) = client.call("orch.list_tools", params).await {
            return Err(AdoptError::Unauthorized {
                message: e.to_string(),
            });
        }
    }
    let tools = Arc::new(ToolListCache::default());
    let server = McpServer::new(DaemonBackend {
        ws,
        profile,
        daemon_exe,
        workspace_tools: vox_daemon::client::workspace_tools_requested(),
        agent_token,
        client: tokio::sync::Mutex::new(Some(Arc::new(client))),
        notes,
        tools: tools.clone(),
        active_skill: Mutex::new(None),
    });
    tokio::spawn(forward_notifications(rx, server.change_notifier(), tools));
    Ok(server)
}

/// `VOX_AGENT_TOKEN`: the credential `vox_spawn_agent` issued, when this client is an agent.
fn agent_token() -> Option<String> {
    std::env::var("VOX_AGENT_TOKEN")
        .ok()
        .filter(|t| !t.trim().is_empty())
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
/// dropped and the stream recovers), `tools/list` answered from `lists` once encoded.
pub fn transport<R: tokio::io::AsyncRead + Send + Unpin + 'static>(
    input: R,
    out: crate::list_cache::SharedOutput,
    lists: Arc<ToolListCache>,
) -> crate::list_cache::ListCacheTransport<
    rmcp::transport::async_rw::AsyncRwTransport<RoleServer, R, crate::list_cache::SharedOutput>,
> {
    let stdio =
        rmcp::transport::async_rw::AsyncRwTransport::<RoleServer, _, _>::new(input, out.clone())
            .with_max_line_length(vox_core::MAX_MESSAGE_BYTES);
    crate::list_cache::ListCacheTransport::new(stdio, lists, out)
}

/// Forwards daemon notifications (`*/list_changed`) to the MCP client, dropping the cached
/// tool list first.
async fn forward_notifications(
    mut rx: mpsc::UnboundedReceiver<Value>,
    notifier: crate::server::ChangeNotifier,
    tools: Arc<ToolListCache>,
) {
    while let Some(frame) = rx.recv().await {
        let is_tools = match frame.get("method").and_then(Value::as_str) {
            Some("notifications/tools/list_changed") => true,
            Some("notifications/resources/list_changed") => false,
            Some("notifications/resources/updated") => {
                if let Some(uri) = frame["params"]["uri"].as_str() {
                    notifier.resource_updated(uri).await;
                }
                continue;
            }
            _ => continue,
        };
        if is_tools {
            tools.invalidate();
        }
        notifier.notify(is_tools).await;
    }
}

fn internal(e: impl std::fmt::Display) -> McpError {
    McpError::internal_error(e.to_string(), None)
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

impl DaemonBackend {
    /// Hands this process's stdin and stdout to the daemon (`orch.serve_stdio` on a connection
    /// of its own) and follows the session there until it ends.
    pub async fn hand_off(&self) -> Handoff {
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

    /// Carries on a session the daemon served until it died, with the skill it had active. As
    /// for a relayed session, the first call to find the daemon gone reports it and the next
    /// adopts or respawns one (activating that skill again); when a call in flight has already
    /// reported it (`reported`), the next call respawns.
    pub async fn resume(&self, state: &SessionState, reported: bool) {
        *self.active_skill.lock().unwrap_or_else(|p| p.into_inner()) = state.active_skill.clone();
        if reported {
            *self.client.lock().await = None;
        }
    }

    /// The workspace this client serves.
    pub fn workspace(&self) -> &Workspace {
        &self.ws
    }

    /// The tool list cache, which the stdio transport answers `tools/list` from.
    pub fn list_cache(&self) -> Arc<ToolListCache> {
        self.tools.clone()
    }

    /// A failure talking to the daemon, naming its log.
    fn daemon_error(&self, e: impl std::fmt::Display) -> McpError {
        internal(format!(
            "{e} (daemon log: {})",
            self.ws.daemon_log_path().display()
        ))
    }
}

/// Passes one `orch.progress` / `orch.log` frame to the call's events.
fn relay(mut frame: Value, events: &dyn CallEvents) {
    let params = frame["params"].take();
    match frame.get("method").and_then(Value::as_str) {
        Some("orch.progress") => {
            if let Ok(p) = serde_json::from_value::<ProgressParams>(params) {
                events.progress(p.progress);
            }
        }
        Some("orch.log") => {
            if let Ok(p) = serde_json::from_value::<LogParams>(params) {
                events.log(p.message);
            }
        }
        _ => {}
    }
}

/// Passes the daemon's `orch.ask` to this call's MCP client and sends its answer back as
/// `orch.answer` (in a task of its own: the call's other frames keep flowing meanwhile).
fn ask_client(mut frame: Value, events: &dyn CallEvents, client: Arc<DaemonClient>) {
    let ask = match serde_json::from_value::<AskParams>(frame["params"].take()) {
        Ok(a) => a,
        Err(e) => {
            tracing::debug!("a malformed orch.ask: {e}");
            return;
        }
    };
    let reply = events.ask(ask.kind, ask.params);
    let n = ask.ask;
    tokio::spawn(async move {
        let answer = match reply {
            Ok(rx) => rx
                .await
                .unwrap_or_else(|_| Err("the MCP client's answer was lost".into())),
            Err(why) => Err(why),
        };
        let params = match answer {
            Ok(result) => AnswerParams {
                ask: n,
                result: Some(result),
                error: None,
            },
            Err(why) => AnswerParams {
                ask: n,
                result: None,
                error: Some(why),
            },
        };
        if let Ok(p) = serde_json::to_value(params) {
            let _ = client.notify("orch.answer", p).await;
        }
    });
}

impl DaemonBackend {
    /// The live connection, adopting or respawning the daemon when there is none.
    async fn client(&self) -> Result<Arc<DaemonClient>, McpError> {
        let mut slot = self.client.lock().await;
        if let Some(c) = slot.as_ref().filter(|c| c.is_alive()) {
            return Ok(c.clone());
        }
        let (c, _) = adopt_or_spawn(
            &self.ws,
            &self.profile,
            &self.daemon_exe,
            Some(self.notes.clone()),
            Use::Client,
        )
        .await
        .map_err(internal)?;
        self.tools.invalidate();
        let active = self
            .active_skill
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(id) = active {
            let restore = ToolCallParams {
                name: "vox_skill_use".into(),
                arguments: json!({"id": id}),
                agent: Some("stdio".into()),
                progress: false,
                log_level: None,
                agent_token: self.agent_token.clone(),
            };
            let restored = c.tool_call(&restore, None, None).await;
            if !restored.as_ref().is_ok_and(|o| !o.is_error()) {
                return Err(McpError::internal_error(
                    format!(
                        "the workspace daemon restarted and skill {id}, active for this session, could not be activated again ({}); call vox_skill_use to choose again",
                        restored.map_or_else(|e| e.to_string(), |o| o.to_json().to_string())
                    ),
                    None,
                ));
            }
        }
        let c = Arc::new(c);
        *slot = Some(c.clone());
        Ok(c)
    }

    /// The daemon's answer to `method`; one carrying a tool error is that error, as MCP says
    /// (`encode::prompt_error`).
    async fn answer(&self, method: &str, params: Value) -> Result<Value, McpError> {
        let client = self.client().await?;
        let answer = client
            .call(method, params)
            .await
            .map_err(|e| self.daemon_error(e))?;
        match answer.get("error") {
            Some(e) => Err(crate::encode::prompt_error(e)),
            None => Ok(answer),
        }
    }

    /// The `key` array of the daemon's answer to `method` (a list).
    async fn list(&self, method: &str, key: &str) -> Result<Vec<Value>, McpError> {
        let client = self.client().await?;
        let mut answer = client
            .call(method, json!({}))
            .await
            .map_err(|e| self.daemon_error(e))?;
        Ok(match answer[key].take() {
            Value::Array(p) => p,
            _ => vec![],
        })
    }

    /// Forgets a dead connection and says so; the next call reconnects.
    async fn lost(&self, e: ClientError) -> ToolOutcome {
        *self.client.lock().await = None;
        ToolOutcome::Failed(ToolError::DaemonUnavailable(format!(
            "{e}; the next call adopts or respawns the workspace daemon (daemon log: {})",
            self.ws.daemon_log_path().display()
        )))
    }
}

impl Backend for DaemonBackend {
    fn instructions(&self) -> String {
        instructions(&self.ws.root, &self.profile)
    }

    fn lists_change(&self) -> bool {
        true
    }

    async fn list_tools(
        &self,
        _ctx: &RequestContext<RoleServer>,
    ) -> Result<Arc<Vec<Tool>>, McpError> {
        let client = self.client().await?;
        if let Some(t) = self.tools.tools() {
            return Ok(t);
        }
        let generation = self.tools.generation();
        let answer = match client
            .call(
                "orch.list_tools",
                json!(ListToolsParams {
                    workspace_tools: self.workspace_tools,
                    agent_token: self.agent_token.clone(),
                }),
            )
            .await
        {
            Ok(a) => a,
            Err(e) => {
                *self.client.lock().await = None;
                return Err(self.daemon_error(e));
            }
        };
        let tools = Arc::new(encode::tools(
            answer.get("tools").cloned().unwrap_or(Value::Null),
        )?);
        self.tools.set_tools(generation, tools.clone());
        Ok(tools)
    }

    async fn call_tool(
        &self,
        ctx: &RequestContext<RoleServer>,
        call: ToolCall,
    ) -> Result<ToolOutcome, McpError> {
        let existing = self.client.lock().await.clone();
        if existing.as_ref().is_some_and(|c| !c.is_alive()) {
            return Ok(self
                .lost(ClientError::Disconnected(
                    "the workspace daemon exited".into(),
                ))
                .await);
        }
        let client = match self.client().await {
            Ok(c) => c,
            // Choosing a skill again (or none) is how a client gets out of a failed restore.
            Err(_) if call.name == "vox_skill_use" => {
                *self.active_skill.lock().unwrap_or_else(|p| p.into_inner()) = None;
                self.client().await?
            }
            Err(e) => return Err(e),
        };
        let agent = agent_of(ctx);
        let params = ToolCallParams {
            name: call.name.clone(),
            arguments: call.arguments,
            agent: Some(agent),
            progress: call.progress,
            log_level: call.log_level,
            agent_token: self.agent_token.clone(),
        };
        let (tx, mut rx) = mpsc::unbounded_channel();
        let answer = client.tool_call(&params, Some(tx), Some(&call.cancel));
        tokio::pin!(answer);
        let answer = loop {
            tokio::select! {
                biased;
                Some(frame) = rx.recv() => {
                    if frame["method"] == "orch.ask" {
                        ask_client(frame, call.events.as_ref(), client.clone());
                    } else {
                        relay(frame, call.events.as_ref());
                    }
                }
                a = &mut answer => {
                    // Frames the daemon sent before its answer are already queued.
                    while let Ok(frame) = rx.try_recv() {
                        relay(frame, call.events.as_ref());
                    }
                    break a;
                }
            }
        };
        let outcome = match answer {
            Ok(o) => o,
            Err(ClientError::Cancelled) => ToolOutcome::Failed(ToolError::Cancelled(format!(
                "tool {} was cancelled",
                call.name
            ))),
            Err(e @ ClientError::Disconnected(_)) => return Ok(self.lost(e).await),
            Err(e) => return Err(self.daemon_error(e)),
        };
        if call.name == "vox_skill_use"
            && let ToolOutcome::Ok(v) = &outcome
        {
            *self.active_skill.lock().unwrap_or_else(|p| p.into_inner()) =
                v["active"].as_str().map(str::to_owned);
        }
        Ok(outcome)
    }

    async fn list_resources(
        &self,
        _ctx: &RequestContext<RoleServer>,
    ) -> Result<Vec<rmcp::model::Resource>, McpError> {
        let client = self.client().await?;
        let answer = client
            .call("orch.list_resources", json!({}))
            .await
            .map_err(|e| self.daemon_error(e))?;
        encode::resources(answer.get("resources").cloned().unwrap_or(Value::Null))
    }

    async fn list_prompts(
        &self,
        _ctx: &RequestContext<RoleServer>,
    ) -> Result<Vec<Value>, McpError> {
        self.list("orch.list_prompts", "prompts").await
    }

    async fn list_resource_templates(
        &self,
        _ctx: &RequestContext<RoleServer>,
    ) -> Result<Vec<Value>, McpError> {
        self.list("orch.list_resource_templates", "resourceTemplates")
            .await
    }

    async fn complete(
        &self,
        _ctx: &RequestContext<RoleServer>,
        prompt: bool,
        name: &str,
        argument: &str,
        value: &str,
    ) -> Result<Value, McpError> {
        self.answer(
            "orch.complete",
            json!({"prompt": prompt, "name": name, "argument": argument, "value": value}),
        )
        .await
    }

    async fn get_prompt(
        &self,
        _ctx: &RequestContext<RoleServer>,
        name: &str,
        arguments: Value,
    ) -> Result<Value, McpError> {
        self.answer(
            "orch.get_prompt",
            json!({"name": name, "arguments": arguments}),
        )
        .await
    }

    async fn read_resource(
        &self,
        _ctx: &RequestContext<RoleServer>,
        uri: &str,
    ) -> Result<vox_core::ResourceBody, McpError> {
        let client = self.client().await?;
        let mut answer = client
            .call("orch.read_resource", json!({"uri": uri}))
            .await
            .map_err(|e| self.daemon_error(e))?;
        match serde_json::from_value::<vox_core::ResourceBody>(answer["contents"].take()) {
            Ok(body) => Ok(body),
            Err(_) => Err(McpError::resource_not_found(
                answer["error"]["message"]
                    .as_str()
                    .unwrap_or("resource not found")
                    .to_owned(),
                Some(answer),
            )),
        }
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
                match encode::call_result(ToolOutcome::Failed(ToolError::DaemonUnavailable(
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
