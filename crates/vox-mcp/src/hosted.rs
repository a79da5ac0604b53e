//! The daemon's MCP sessions (`vox_daemon::host`): a stdio session `vox mcp` handed off
//! (`vox_daemon::handoff`), on the client's own input and output, and an MCP connection on the
//! socket. Both are the one MCP server over the in-process orchestrator, under the scope the
//! daemon resolved for the session.
//!
//! What `vox mcp` would need to carry a handed-off session on if the daemon died (the client's
//! `initialize`, its log level, its subscriptions, what its calls chose) is reported to it as
//! it changes; the requests read and not yet answered are kept in the shared pending table.

use crate::encode;
use crate::list_cache::{SharedOutput, ToolListCache};
use crate::server::{Backend, McpServer, ToolCall};
use rmcp::model::{JsonRpcMessage, RequestId, Tool};
use rmcp::service::{RequestContext, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::{ErrorData as McpError, RoleServer, ServiceExt};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use vox_core::{CallScope, Orchestrator, SessionEffect, ToolOutcome};
use vox_daemon::frames::SessionState;
use vox_daemon::handoff::{Pending, PendingKind, StdioSession};
use vox_daemon::host::{Serving, SessionHost, SocketSession};
use vox_daemon::rpc::InFlight;

/// The host the daemon serves its MCP sessions with.
pub fn host() -> Arc<dyn SessionHost> {
    Arc::new(Host)
}

struct Host;

impl SessionHost for Host {
    fn serve_stdio(&self, session: StdioSession) -> Serving {
        Box::pin(serve_stdio(session))
    }
    fn serve_socket(&self, session: SocketSession) -> Serving {
        Box::pin(serve_socket(session))
    }
}

/// The server of one session, its tool list kept until the orchestrator's lists change.
fn server(
    orch: &Arc<Orchestrator>,
    scope: Arc<CallScope>,
    in_flight: Option<InFlight>,
    report: Box<dyn Fn(&SessionState) + Send + Sync>,
) -> (McpServer<HostedBackend>, Arc<ToolListCache>) {
    let tools = Arc::new(ToolListCache::default());
    let server = McpServer::new(HostedBackend {
        orch: orch.clone(),
        scope,
        named: OnceLock::new(),
        tools: tools.clone(),
        in_flight,
        state: Mutex::default(),
        report,
    });
    server
        .change_notifier()
        .forward(orch.ctx().notifier.subscribe(), Some(tools.clone()));
    (server, tools)
}

async fn serve_socket(s: SocketSession) {
    let (server, tools) = server(&s.orch, s.scope, Some(s.in_flight), Box::new(|_| {}));
    let input = server.watch_input(s.input);
    let transport = crate::stdio::transport(input, SharedOutput::new(s.output), tools);
    match server.serve(transport).await {
        Ok(running) => {
            let _ = running.waiting().await;
        }
        Err(e) => tracing::debug!("an MCP connection did not start: {e}"),
    }
}

async fn serve_stdio(s: StdioSession) {
    let StdioSession {
        orch,
        input,
        output,
        pending,
        scope,
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
    let (server, tools) = server(&orch, scope, None, report);
    let input = server.watch_input(input);
    let transport = PendingTransport {
        inner: crate::stdio::transport(input, SharedOutput::new(output), tools),
        pending,
        slots: HashMap::new(),
    };
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

/// The in-process backend of a session.
struct HostedBackend {
    orch: Arc<Orchestrator>,
    /// The session's scope, resolved by the daemon at its edge.
    scope: Arc<CallScope>,
    /// `scope` with the client's name as its principal (`stdio:<name>`), once it initialized.
    named: OnceLock<Arc<CallScope>>,
    tools: Arc<ToolListCache>,
    /// A socket session's calls count as the daemon's requests in flight.
    in_flight: Option<InFlight>,
    /// The state last reported.
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

impl HostedBackend {
    /// The scope of this session's requests: an operator's principal is its client's name.
    fn scope(&self, ctx: &RequestContext<RoleServer>) -> &Arc<CallScope> {
        if self.scope.agent.is_some() || ctx.peer.peer_info().is_none() {
            return &self.scope;
        }
        self.named.get_or_init(|| {
            let mut named = (*self.scope).clone();
            named.principal = crate::stdio::agent_of(ctx).into();
            Arc::new(named)
        })
    }
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
            session: last.session.take(),
            ..state
        };
        (self.report)(&last);
    }

    async fn list_tools(
        &self,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Arc<Vec<Tool>>, McpError> {
        if let Some(t) = self.tools.tools() {
            return Ok(t);
        }
        let generation = self.tools.generation();
        let list = self.orch.list(self.scope(ctx));
        let tools = Arc::new(encode::tools(Value::Array(list))?);
        self.tools.set_tools(generation, tools.clone());
        Ok(tools)
    }

    async fn call_tool(
        &self,
        ctx: &RequestContext<RoleServer>,
        call: ToolCall,
    ) -> Result<ToolOutcome, McpError> {
        let _in_flight = self.in_flight.as_ref().map(InFlight::enter);
        Ok(self
            .orch
            .call(self.scope(ctx), &call.name, call.arguments, call.run)
            .await)
    }

    fn session_effect(&self, effect: &SessionEffect) {
        let mut last = self.state.lock().unwrap_or_else(|p| p.into_inner());
        last.session = serde_json::to_value(effect).ok();
        (self.report)(&last);
    }

    async fn list_resources(
        &self,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Vec<rmcp::model::Resource>, McpError> {
        encode::resources(Value::Array(self.orch.resources(self.scope(ctx))))
    }

    async fn list_resource_templates(
        &self,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Vec<Value>, McpError> {
        Ok(self.orch.resource_templates(self.scope(ctx)))
    }

    async fn complete(
        &self,
        ctx: &RequestContext<RoleServer>,
        prompt: bool,
        name: &str,
        argument: &str,
        value: &str,
    ) -> Result<Value, McpError> {
        let (orch, scope) = (self.orch.clone(), self.scope(ctx).clone());
        let (name, argument, value) = (name.to_owned(), argument.to_owned(), value.to_owned());
        off_worker("a completion", move || {
            orch.complete(&scope, prompt, &name, &argument, &value)
        })
        .await?
        .map_err(|e| encode::prompt_error(&e.to_json()["error"]))
    }

    async fn list_prompts(&self, ctx: &RequestContext<RoleServer>) -> Result<Vec<Value>, McpError> {
        Ok(self.orch.prompts(self.scope(ctx)))
    }

    async fn get_prompt(
        &self,
        ctx: &RequestContext<RoleServer>,
        name: &str,
        arguments: Value,
    ) -> Result<Value, McpError> {
        let (orch, scope) = (self.orch.clone(), self.scope(ctx).clone());
        let name = name.to_owned();
        off_worker("a prompt", move || {
            orch.get_prompt(&scope, &name, &arguments)
        })
        .await?
        .map_err(|e| encode::prompt_error(&e.to_json()["error"]))
    }

    async fn read_resource(
        &self,
        ctx: &RequestContext<RoleServer>,
        uri: &str,
    ) -> Result<vox_core::ResourceBody, McpError> {
        let (orch, scope) = (self.orch.clone(), self.scope(ctx).clone());
        let owned = uri.to_owned();
        match off_worker("a resource read", move || {
            orch.read_resource(&scope, &owned)
        })
        .await?
        {
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
        if let Some(slot) =
            crate::in_flight::answered_id(&item).and_then(|id| self.slots.remove(id))
        {
            self.pending.remove(slot);
        }
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        let message = self.inner.receive().await?;
        // A cancelled request is never answered (MCP): it is no longer pending either.
        if let Some(slot) =
            crate::in_flight::cancelled_id(&message).and_then(|id| self.slots.remove(id))
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
