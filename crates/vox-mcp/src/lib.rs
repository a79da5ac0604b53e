//! The stdio MCP adapter: an rmcp `ServerHandler` that forwards `tools/list` and `tools/call`
//! to the workspace daemon over its socket. rmcp speaks both wire eras (the 2025 `initialize`
//! handshake and 2026-07-28 `server/discover`); this adapter never branches on the era.
//!
//! The daemon owns all state and makes every decision; the adapter only translates. When the
//! daemon dies, the call that finds out reports it, and the next call adopts or respawns one.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use vox_orchestrator::Workspace;
use vox_orchestrator::client::{AdoptError, ClientError, DaemonClient, adopt_or_spawn};

/// MCP tools from the orchestrator's tool descriptors (already in MCP field names).
pub fn tools_from_json(descriptors: Value) -> Result<Vec<Tool>, McpError> {
    serde_json::from_value(descriptors)
        .map_err(|e| McpError::internal_error(format!("malformed tool descriptors: {e}"), None))
}

/// Resource descriptors (MCP field names, as the orchestrator builds them) as rmcp resources.
pub fn resources_from_json(descriptors: Value) -> Result<Vec<rmcp::model::Resource>, McpError> {
    serde_json::from_value(descriptors)
        .map_err(|e| McpError::internal_error(format!("malformed resources: {e}"), None))
}

/// The answer to `resources/read` for a text body.
pub fn text_resource(uri: &str, text: impl Into<String>) -> rmcp::model::ReadResourceResponse {
    rmcp::model::ReadResourceResult::new(vec![rmcp::model::ResourceContents::text(
        text.into(),
        uri.to_owned(),
    )])
    .into()
}

/// An orchestrator outcome as an MCP call result. Denials and tool failures are results with
/// `isError: true`; only an unknown tool (under `dev`) is a protocol error, as MCP prescribes.
pub fn call_result(
    outcome: &str,
    is_error: bool,
    structured: Value,
) -> Result<CallToolResult, McpError> {
    if outcome == "unknown_tool" {
        let message = structured["error"]["message"]
            .as_str()
            .unwrap_or("unknown tool")
            .to_owned();
        return Err(McpError::invalid_params(message, Some(structured)));
    }
    // MCP's structuredContent is an object: a workspace tool's bare value (a number, a string)
    // is wrapped as {"result": v}; the text block carries the value as it was.
    let text = structured.to_string();
    let structured = if structured.is_object() {
        structured
    } else {
        json!({ "result": structured })
    };
    let mut result = if is_error {
        CallToolResult::structured_error(structured)
    } else {
        CallToolResult::structured(structured)
    };
    result.content = vec![rmcp::model::ContentBlock::text(text)];
    Ok(result)
}

/// The adapter's state: which daemon to talk to, and the live connection if any.
pub struct StdioAdapter {
    ws: Workspace,
    profile: String,
    daemon_exe: PathBuf,
    client: tokio::sync::Mutex<Option<Arc<DaemonClient>>>,
    /// Daemon notification frames, forwarded to the MCP client once it is known.
    notes: tokio::sync::mpsc::UnboundedSender<Value>,
    listeners: Arc<Listeners>,
    /// The skill this client activated. A restarted daemon remembers no session, so the skill
    /// is activated again on the new connection before anything else is sent (fail closed: if
    /// it cannot be, calls fail until the client chooses again).
    active_skill: std::sync::Mutex<Option<String>>,
}

/// Where change notifications go: the 2025-era peer once it has initialized, and the open
/// `subscriptions/listen` streams of the 2026-07-28 era (which has no unsolicited
/// notifications).
struct Listeners {
    legacy: std::sync::Mutex<Option<rmcp::Peer<RoleServer>>>,
    streams: std::sync::Mutex<Vec<rmcp::service::SubscriptionSink>>,
    /// Turns true when the client's input ends: open listen streams then end at once, instead
    /// of holding the session open through rmcp's drain timeout.
    input_closed: tokio::sync::watch::Sender<bool>,
}

impl Default for Listeners {
    fn default() -> Self {
        Listeners {
            legacy: Default::default(),
            streams: Default::default(),
            input_closed: tokio::sync::watch::channel(false).0,
        }
    }
}

/// Most `subscriptions/listen` streams one client may hold open.
const MAX_LISTEN_STREAMS: usize = 64;

/// An input stream that reports its end (EOF or an error) to the adapter's listen streams.
pub struct WatchedInput<R> {
    inner: R,
    closed: tokio::sync::watch::Sender<bool>,
}

impl<R: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for WatchedInput<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let poll = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        let ended = match &poll {
            std::task::Poll::Ready(Ok(())) => buf.filled().len() == before && buf.remaining() > 0,
            std::task::Poll::Ready(Err(_)) => true,
            std::task::Poll::Pending => false,
        };
        if ended {
            self.closed.send_replace(true);
        }
        poll
    }
}

/// Forwards daemon notifications (`*/list_changed`) to the connected MCP client.
async fn forward_notifications(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Value>,
    listeners: Arc<Listeners>,
) {
    while let Some(frame) = rx.recv().await {
        let tools = match frame.get("method").and_then(Value::as_str) {
            Some("notifications/tools/list_changed") => true,
            Some("notifications/resources/list_changed") => false,
            _ => continue,
        };
        let legacy = listeners
            .legacy
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(peer) = legacy {
            let sent = if tools {
                peer.notify_tool_list_changed().await
            } else {
                peer.notify_resource_list_changed().await
            };
            if let Err(e) = sent {
                tracing::debug!("notification not delivered: {e}");
            }
        }
        let streams = listeners
            .streams
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for sink in streams {
            let accepted = sink.accepted();
            let sent = if tools && accepted.tools_list_changed == Some(true) {
                sink.notify_tool_list_changed().await
            } else if !tools && accepted.resources_list_changed == Some(true) {
                sink.notify_resource_list_changed().await
            } else {
                Ok(())
            };
            if let Err(e) = sent {
                tracing::debug!("subscription notification not delivered: {e}");
            }
        }
    }
}

impl StdioAdapter {
    /// Adopts (or spawns) the daemon for `profile` now, so a mismatch is reported before the
    /// client's first request and the first `tools/list` needs no spawn.
    pub async fn connect(
        ws: Workspace,
        profile: String,
        daemon_exe: PathBuf,
    ) -> Result<Self, AdoptError> {
        let (notes, rx) = tokio::sync::mpsc::unbounded_channel();
        let (client, _ping) =
            adopt_or_spawn(&ws, &profile, &daemon_exe, Some(notes.clone())).await?;
        let listeners = Arc::new(Listeners::default());
        tokio::spawn(forward_notifications(rx, listeners.clone()));
        Ok(StdioAdapter {
            ws,
            profile,
            daemon_exe,
            client: tokio::sync::Mutex::new(Some(Arc::new(client))),
            notes,
            listeners,
            active_skill: std::sync::Mutex::new(None),
        })
    }

    /// Wraps the client's input so that its end also ends open `subscriptions/listen` streams.
    pub fn watch_input<R>(&self, inner: R) -> WatchedInput<R> {
        WatchedInput {
            inner,
            closed: self.listeners.input_closed.clone(),
        }
    }

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
        )
        .await
        .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        let active = self
            .active_skill
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(id) = active {
            let restored = c
                .call(
                    "orch.tool_call",
                    json!({"name": "vox_skill_use", "arguments": {"id": id}, "agent": "stdio"}),
                )
                .await;
            if !restored.as_ref().is_ok_and(|a| a["is_error"] == false) {
                return Err(McpError::internal_error(
                    format!(
                        "the workspace daemon restarted and skill {id}, active for this session, could not be activated again ({}); call vox_skill_use to choose again",
                        restored.map_or_else(|e| e.to_string(), |a| a["structured"].to_string())
                    ),
                    None,
                ));
            }
        }
        let c = Arc::new(c);
        *slot = Some(c.clone());
        Ok(c)
    }

    /// Forgets a dead connection and says so; the next call reconnects.
    async fn lost(&self, e: ClientError) -> CallToolResult {
        *self.client.lock().await = None;
        CallToolResult::structured_error(json!({"error": {
            "code": "daemon_unavailable",
            "message": format!("{e}; the next call adopts or respawns the workspace daemon"),
        }}))
    }
}

#[allow(deprecated)] // enable_logging: see set_level
impl ServerHandler for StdioAdapter {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_logging()
                .enable_resources()
                .enable_resources_list_changed()
                .build(),
        );
        info.server_info = Implementation::new("vox", env!("CARGO_PKG_VERSION"));
        info.with_instructions(format!(
            "vox orchestrator for workspace {} under capability profile `{}`.",
            self.ws.root.display(),
            self.profile
        ))
    }

    // Logging is deprecated by SEP-2577, but clients of the 2025 era still send it.
    #[allow(deprecated)]
    /// Accepts the level. The orchestrator sends no log notifications yet, so there is
    /// nothing to filter; the answer is the empty result the spec asks for.
    async fn set_level(
        &self,
        _request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Ok(())
    }

    async fn on_initialized(&self, context: rmcp::service::NotificationContext<RoleServer>) {
        *self
            .listeners
            .legacy
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(context.peer);
    }

    /// The 2026-07-28 era's `subscriptions/listen`: tool and resource list changes.
    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        let mut offered = rmcp::model::SubscriptionFilter::new();
        offered.tools_list_changed = Some(true);
        offered.resources_list_changed = Some(true);
        Some(requested.intersection(&offered))
    }

    /// Keeps the stream's sink registered until the client cancels the listen request or its
    /// input ends (the guard unregisters it however the future ends).
    async fn listen(&self, context: rmcp::service::SubscriptionContext) -> Result<(), McpError> {
        struct Registered<'a>(&'a Listeners, rmcp::model::RequestId);
        impl Drop for Registered<'_> {
            fn drop(&mut self) {
                self.0
                    .streams
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .retain(|s| s.id() != &self.1);
            }
        }
        let sink = context.sink().clone();
        {
            let mut streams = self
                .listeners
                .streams
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if streams.len() >= MAX_LISTEN_STREAMS {
                return Err(McpError::invalid_request(
                    format!(
                        "{MAX_LISTEN_STREAMS} listen streams are already open; cancel one first"
                    ),
                    None,
                ));
            }
            streams.push(sink.clone());
        }
        let _registered = Registered(&self.listeners, sink.id().clone());
        let mut closed = self.listeners.input_closed.subscribe();
        tokio::select! {
            _ = context.cancelled() => {}
            _ = closed.wait_for(|c| *c) => {}
        }
        Ok(())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, McpError> {
        let client = self.client().await?;
        let answer = client
            .call("orch.list_resources", json!({}))
            .await
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        let resources =
            resources_from_json(answer.get("resources").cloned().unwrap_or(Value::Null))?;
        Ok(rmcp::model::ListResourcesResult::with_all_items(resources))
    }

    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, McpError> {
        let client = self.client().await?;
        let answer = client
            .call("orch.read_resource", json!({"uri": request.uri}))
            .await
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        match answer.get("text").and_then(Value::as_str) {
            Some(text) => Ok(text_resource(&request.uri, text)),
            None => Err(McpError::resource_not_found(
                answer["error"]["message"]
                    .as_str()
                    .unwrap_or("resource not found")
                    .to_owned(),
                Some(answer),
            )),
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let client = self.client().await?;
        let answer = match client.call("orch.list_tools", json!({})).await {
            Ok(a) => a,
            Err(e) => {
                *self.client.lock().await = None;
                return Err(McpError::internal_error(e.to_string(), None));
            }
        };
        let tools = tools_from_json(answer.get("tools").cloned().unwrap_or(Value::Null))?;
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let existing = self.client.lock().await.clone();
        if let Some(c) = existing.as_ref().filter(|c| !c.is_alive()) {
            let _ = c;
            return Ok(self
                .lost(ClientError::Disconnected(
                    "the workspace daemon exited".into(),
                ))
                .await
                .into());
        }
        let client = match self.client().await {
            Ok(c) => c,
            // Choosing a skill again (or none) is how a client gets out of a failed restore.
            Err(_) if request.name == "vox_skill_use" => {
                *self.active_skill.lock().unwrap_or_else(|p| p.into_inner()) = None;
                self.client().await?
            }
            Err(e) => return Err(e),
        };
        let agent = context
            .peer
            .peer_info()
            .map(|i| format!("stdio:{}", i.client_info.name))
            .unwrap_or_else(|| "stdio".into());
        let params = json!({
            "name": request.name,
            "arguments": request.arguments.map(Value::Object).unwrap_or(Value::Null),
            "agent": agent,
        });
        let answer = tokio::select! {
            a = client.call("orch.tool_call", params) => a,
            _ = context.ct.cancelled() => {
                return Err(McpError::internal_error("request cancelled", None));
            }
        };
        let answer = match answer {
            Ok(a) => a,
            Err(e @ ClientError::Disconnected(_)) => return Ok(self.lost(e).await.into()),
            Err(e) => return Err(McpError::internal_error(e.to_string(), None)),
        };
        if request.name == "vox_skill_use" && answer["is_error"] == false {
            *self.active_skill.lock().unwrap_or_else(|p| p.into_inner()) =
                answer["structured"]["active"].as_str().map(str::to_owned);
        }
        call_result(
            answer.get("outcome").and_then(Value::as_str).unwrap_or(""),
            answer
                .get("is_error")
                .and_then(Value::as_bool)
                .unwrap_or(true),
            answer.get("structured").cloned().unwrap_or(Value::Null),
        )
        .map(Into::into)
    }
}
