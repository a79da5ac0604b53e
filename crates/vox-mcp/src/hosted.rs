//! The daemon's side of a stdio session `vox mcp` handed off (`vox_daemon::handoff`): the one
//! MCP server over the in-process orchestrator, on the client's own input and output, deciding
//! exactly as the socket's `orch.*` methods do (the local caller, this session's key, the
//! client's choice of workspace tools).
//!
//! What `vox mcp` would need to carry the session on if the daemon died (the client's
//! `initialize`, its log level, its subscriptions, its active skill) is reported to it as it
//! changes; the requests read and not yet answered are kept in the shared pending table.

use crate::encode;
use crate::list_cache::{SharedOutput, ToolListCache};
use crate::server::{Backend, McpServer, ToolCall};
use rmcp::model::{JsonRpcMessage, RequestId, Tool};
use rmcp::service::{RequestContext, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use vox_core::{Orchestrator, ToolOutcome};
use vox_daemon::frames::SessionState;
use vox_daemon::handoff::{Pending, PendingKind, StdioHost, StdioSession};
use vox_mcp_registry::Caller;

/// The host the daemon serves handed-off sessions with.
pub fn host() -> StdioHost {
    Arc::new(|session| Box::pin(serve(session)))
}

async fn serve(s: StdioSession) {
    let StdioSession {
        orch,
        input,
        output,
        pending,
        params,
        session,
        report,
        closed,
    } = s;
    let (input, output) = match (
        crate::pipes::input_from(input),
        crate::pipes::output_from(output),
    ) {
        (Ok(i), Ok(o)) => (i, o),
        (Err(e), _) | (_, Err(e)) => {
            tracing::warn!("a handed-off stdio session cannot use its descriptors: {e}");
            return;
        }
    };
    // The credential was checked when `vox mcp` started; a session whose agent is unknown now
    // still gets every call refused, by the agent path itself.
    let agent = params
        .agent_token
        .as_deref()
        .map(|t| orch.authenticate_agent(t).map(|a| a.id));
    let tools = Arc::new(ToolListCache::default());
    let server = McpServer::new(HostedBackend {
        agent,
        orch: orch.clone(),
        session: session.clone(),
        workspace_tools: params.workspace_tools,
        tools: tools.clone(),
        state: Mutex::default(),
        report,
    });
    server
        .change_notifier()
        .forward(orch.ctx().notifier.subscribe(), Some(tools.clone()));
    let input = server.watch_input(input);
    let transport = PendingTransport {
        inner: crate::stdio::transport(input, SharedOutput::new(output), tools),
        pending,
        slots: HashMap::new(),
    };
    use rmcp::ServiceExt;
    let running = match server.serve(transport).await {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!("a handed-off stdio session did not start: {e}");
            return;
        }
    };
    let ct = running.cancellation_token();
    tokio::select! {
        _ = running.waiting() => {}
        // `vox mcp` died: nobody waits for this session any more.
        () = closed.cancelled() => ct.cancel(),
    }
}

/// The in-process backend of a handed-off session.
struct HostedBackend {
    /// The orchestrator agent this session is (its credential's check), when it is one.
    agent: Option<Result<String, vox_core::ToolError>>,
    orch: Arc<Orchestrator>,
    session: Arc<str>,
    workspace_tools: bool,
    tools: Arc<ToolListCache>,
    /// The state last reported (the active skill is this backend's to set).
    state: Mutex<SessionState>,
    report: Box<dyn Fn(&SessionState) + Send + Sync>,
}

/// Runs `work`, which may run Vox code, on the blocking pool; a panic is an internal error
/// saying `what` panicked. (`/mcp`'s backend uses it too.)
pub async fn off_worker<T: Send + 'static>(
    what: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, McpError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| McpError::internal_error(format!("{what} panicked: {e}"), None))
}

impl Backend for HostedBackend {
    fn instructions(&self) -> String {
        crate::stdio::instructions(&self.orch.workspace().root, self.orch.profile().canonical())
    }

    fn lists_change(&self) -> bool {
        true
    }

    fn session_changed(&self, state: SessionState) {
        let mut last = self.state.lock().unwrap_or_else(|p| p.into_inner());
        *last = SessionState {
            active_skill: last.active_skill.take(),
            ..state
        };
        (self.report)(&last);
    }

    async fn list_tools(
        &self,
        _ctx: &RequestContext<RoleServer>,
    ) -> Result<Arc<Vec<Tool>>, McpError> {
        if let Some(t) = self.tools.tools() {
            return Ok(t);
        }
        let generation = self.tools.generation();
        let list = match &self.agent {
            None => self.orch.tool_list_json(self.workspace_tools),
            Some(Err(e)) => return Err(McpError::invalid_request(e.to_string(), None)),
            Some(Ok(id)) => match self
                .orch
                .ctx()
                .hooks()
                .agents
                .as_ref()
                .map(|d| d.current(id))
            {
                Some(Ok(Some(a))) => self.orch.agent_tool_list_json(&a),
                _ => vec![],
            },
        };
        let tools = Arc::new(encode::tools(Value::Array(list))?);
        self.tools.set_tools(generation, tools.clone());
        Ok(tools)
    }

    async fn call_tool(
        &self,
        ctx: &RequestContext<RoleServer>,
        call: ToolCall,
    ) -> Result<ToolOutcome, McpError> {
        let agent = crate::stdio::agent_of(ctx);
        let cx = vox_core::CallCtx::new(Caller::LOCAL, &agent, &self.session)
            .with_cancel(call.cancel)
            .with_events(call.events, call.progress, call.log_level);
        let skill_use = call.name == "vox_skill_use";
        let outcome = match &self.agent {
            None => self.orch.call(&call.name, call.arguments, cx).await,
            Some(Ok(id)) => {
                self.orch
                    .call_as_agent(id, &call.name, call.arguments, cx)
                    .await
            }
            Some(Err(e)) => ToolOutcome::Failed(e.clone()),
        };
        if skill_use && let ToolOutcome::Ok(v) = &outcome {
            let mut last = self.state.lock().unwrap_or_else(|p| p.into_inner());
            last.active_skill = v["active"].as_str().map(str::to_owned);
            (self.report)(&last);
        }
        Ok(outcome)
    }

    async fn list_resources(
        &self,
        _ctx: &RequestContext<RoleServer>,
    ) -> Result<Vec<rmcp::model::Resource>, McpError> {
        encode::resources(Value::Array(self.orch.resources()))
    }

    async fn list_resource_templates(
        &self,
        _ctx: &RequestContext<RoleServer>,
    ) -> Result<Vec<Value>, McpError> {
        Ok(self.orch.resource_templates())
    }

    async fn complete(
        &self,
        _ctx: &RequestContext<RoleServer>,
        prompt: bool,
        name: &str,
        argument: &str,
        value: &str,
    ) -> Result<Value, McpError> {
        let orch = self.orch.clone();
        let (name, argument, value) = (name.to_owned(), argument.to_owned(), value.to_owned());
        off_worker("a completion", move || {
            orch.complete(prompt, &name, &argument, &value)
        })
        .await?
        .map_err(|e| encode::prompt_error(&e.to_json()["error"]))
    }

    async fn list_prompts(
        &self,
        _ctx: &RequestContext<RoleServer>,
    ) -> Result<Vec<Value>, McpError> {
        Ok(self.orch.prompts())
    }

    async fn get_prompt(
        &self,
        _ctx: &RequestContext<RoleServer>,
        name: &str,
        arguments: Value,
    ) -> Result<Value, McpError> {
        let orch = self.orch.clone();
        let name = name.to_owned();
        off_worker("a prompt", move || orch.get_prompt(&name, &arguments))
            .await?
            .map_err(|e| encode::prompt_error(&e.to_json()["error"]))
    }

    async fn read_resource(
        &self,
        _ctx: &RequestContext<RoleServer>,
        uri: &str,
    ) -> Result<vox_core::ResourceBody, McpError> {
        let orch = self.orch.clone();
        let owned = uri.to_owned();
        match off_worker("a resource read", move || orch.read_resource(&owned)).await? {
            Ok(body) => Ok(body),
            Err(e) => Err(McpError::resource_not_found(
                e.to_string(),
                Some(e.to_json()),
            )),
        }
    }
}

/// The session's transport, recording each request in the pending table from when it is read
/// until it is answered.
struct PendingTransport<T> {
    inner: T,
    pending: Pending,
    slots: HashMap<RequestId, usize>,
}

impl<T> Transport<RoleServer> for PendingTransport<T>
where
    T: Transport<RoleServer, Error = std::io::Error>,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), std::io::Error>> + Send + 'static {
        let answered = match &item {
            JsonRpcMessage::Response(r) => Some(&r.id),
            JsonRpcMessage::Error(e) => e.id.as_ref(),
            _ => None,
        };
        if let Some(slot) = answered.and_then(|id| self.slots.remove(id)) {
            self.pending.remove(slot);
        }
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        let message = self.inner.receive().await?;
        // A cancelled request is never answered (MCP): it is no longer pending either.
        if let JsonRpcMessage::Notification(n) = &message
            && let rmcp::model::ClientNotification::CancelledNotification(c) = &n.notification
            && let Some(slot) = c
                .params
                .request_id
                .as_ref()
                .and_then(|id| self.slots.remove(id))
        {
            self.pending.remove(slot);
        }
        if let JsonRpcMessage::Request(req) = &message
            && let Ok(id) = serde_json::to_string(&req.id)
        {
            let kind = match &req.request {
                rmcp::model::ClientRequest::CallToolRequest(_) => PendingKind::ToolCall,
                _ => PendingKind::Other,
            };
            if let Some(slot) = self.pending.insert(&id, kind) {
                self.slots.insert(req.id.clone(), slot);
            }
        }
        Some(message)
    }

    async fn close(&mut self) -> Result<(), std::io::Error> {
        self.inner.close().await
    }
}
