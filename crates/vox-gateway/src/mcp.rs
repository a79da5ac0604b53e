//! `/mcp`: Streamable HTTP MCP through rmcp's tower service (both wire eras; sessions for the
//! legacy era). The caller is the one the auth middleware put in the request's extensions.
//!
//! A 2025-era session belongs to the caller that opened it (its agent: `http:write` or
//! `http:read` for a token, `http:<peer>` without one): [`bind_sessions`] answers 404 to anyone
//! else naming its `Mcp-Session-Id`, on POST, GET and DELETE alike, as for an unknown session.

use crate::{Shared, Who};
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::Value;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use vox_core::{CallScope, ToolOutcome, WorkspaceTools};
use vox_mcp::hosted::off_worker;

/// The `/mcp` backend of the one MCP server: one per session (rmcp builds them), sharing the
/// state.
pub struct HttpMcp(Arc<Shared>, Arc<SessionEnd>);

/// Ends the orchestrator-side state of an `/mcp` session (its active skill) when rmcp drops the
/// session's handler.
struct SessionEnd {
    shared: Arc<Shared>,
    key: std::sync::Mutex<Option<String>>,
}

impl Drop for SessionEnd {
    fn drop(&mut self) {
        if let Some(key) = self.key.get_mut().ok().and_then(|k| k.take()) {
            self.shared.orch.end_session(&key);
        }
    }
}

impl HttpMcp {
    fn new(shared: Arc<Shared>) -> Self {
        let end = Arc::new(SessionEnd {
            shared: shared.clone(),
            key: std::sync::Mutex::new(None),
        });
        HttpMcp(shared, end)
    }

    /// The caller, with the session key of its MCP session (remembered for [`SessionEnd`]).
    fn who(&self, ctx: &RequestContext<RoleServer>) -> Result<Who, McpError> {
        let who = who(ctx)?;
        if who.session.starts_with("mcp:") {
            let mut key = self.1.key.lock().unwrap_or_else(|p| p.into_inner());
            key.get_or_insert_with(|| who.session.clone());
        }
        Ok(who)
    }

    /// The scope of this request's caller on `/mcp`.
    fn scope(&self, ctx: &RequestContext<RoleServer>) -> Result<Arc<CallScope>, McpError> {
        Ok(self.0.scope(&self.who(ctx)?, true))
    }
}

fn who(ctx: &RequestContext<RoleServer>) -> Result<Who, McpError> {
    let parts = ctx.extensions.get::<axum::http::request::Parts>();
    let mut who = parts
        .and_then(|p| p.extensions.get::<Who>())
        .cloned()
        .ok_or_else(|| {
            McpError::internal_error("request reached /mcp without an authenticated caller", None)
        })?;
    // A 2025-era MCP session (whose id rmcp's session manager has checked) scopes the active
    // skill. The 2026-07-28 era has no sessions: there the header means nothing and the REST
    // rule (X-Vox-Session, else the caller) applies.
    let headers = parts.map(|p| &p.headers);
    let legacy = headers
        .and_then(|h| h.get("mcp-protocol-version"))
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v < "2026-07-28");
    if let Some(id) = headers
        .filter(|_| legacy)
        .and_then(|h| h.get("mcp-session-id"))
        .and_then(|v| v.to_str().ok())
    {
        who.session = format!("mcp:{}:{id}", who.agent);
        who.session_named = true;
    }
    Ok(who)
}

impl vox_mcp::Backend for HttpMcp {
    fn instructions(&self) -> String {
        format!(
            "vox gateway under capability profile `{}`.",
            self.0.orch.profile().canonical()
        )
    }

    /// Not advertised even with workspace tools: `/mcp` sends no `list_changed` (a client
    /// lists again to see a refresh).
    fn lists_change(&self) -> bool {
        false
    }

    async fn list_tools(
        &self,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Arc<Vec<rmcp::model::Tool>>, McpError> {
        let scope = self.scope(ctx)?;
        Ok(Arc::new(vox_mcp::encode::tools(Value::Array(
            self.0.orch.list(&scope),
        ))?))
    }

    async fn call_tool(
        &self,
        ctx: &RequestContext<RoleServer>,
        call: vox_mcp::ToolCall,
    ) -> Result<ToolOutcome, McpError> {
        let scope = self.scope(ctx)?;
        Ok(self
            .0
            .orch
            .call(&scope, &call.name, call.arguments, call.run)
            .await)
    }

    async fn list_resources(
        &self,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Vec<rmcp::model::Resource>, McpError> {
        let scope = self.scope(ctx)?;
        vox_mcp::encode::resources(Value::Array(self.0.orch.resources(&scope)))
    }

    async fn complete(
        &self,
        ctx: &RequestContext<RoleServer>,
        prompt: bool,
        name: &str,
        argument: &str,
        value: &str,
    ) -> Result<Value, McpError> {
        let scope = self.scope(ctx)?;
        if scope.workspace_tools == WorkspaceTools::Off {
            return Err(McpError::invalid_params(
                format!("nothing to complete for {name}"),
                None,
            ));
        }
        let orch = self.0.orch.clone();
        let (name, argument, value) = (name.to_owned(), argument.to_owned(), value.to_owned());
        off_worker("a completion", move || {
            orch.complete(&scope, prompt, &name, &argument, &value)
        })
        .await?
        .map_err(|e| vox_mcp::encode::prompt_error(&e.to_json()["error"]))
    }

    async fn list_resource_templates(
        &self,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Vec<Value>, McpError> {
        let scope = self.scope(ctx)?;
        Ok(self.0.orch.resource_templates(&scope))
    }

    async fn list_prompts(&self, ctx: &RequestContext<RoleServer>) -> Result<Vec<Value>, McpError> {
        let scope = self.scope(ctx)?;
        Ok(self.0.orch.prompts(&scope))
    }

    async fn get_prompt(
        &self,
        ctx: &RequestContext<RoleServer>,
        name: &str,
        arguments: Value,
    ) -> Result<Value, McpError> {
        let (orch, scope) = (self.0.orch.clone(), self.scope(ctx)?);
        let name = name.to_owned();
        off_worker("a prompt", move || {
            orch.get_prompt(&scope, &name, &arguments)
        })
        .await?
        .map_err(|e| vox_mcp::encode::prompt_error(&e.to_json()["error"]))
    }

    async fn read_resource(
        &self,
        ctx: &RequestContext<RoleServer>,
        uri: &str,
    ) -> Result<vox_core::ResourceBody, McpError> {
        // A workspace resource runs Vox code: off the async worker.
        let (orch, scope) = (self.0.orch.clone(), self.scope(ctx)?);
        let owned = uri.to_owned();
        let read = off_worker("a resource read", move || {
            orch.read_resource(&scope, &owned)
        });
        read.await?
            .map_err(|e| McpError::resource_not_found(e.to_string(), Some(e.to_json())))
    }
}

/// Who opened each live 2025-era `/mcp` session.
pub struct SessionOwners {
    manager: Arc<LocalSessionManager>,
    /// Session id → the agent that opened it.
    owners: std::sync::Mutex<std::collections::HashMap<String, String>>,
}

impl SessionOwners {
    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, String>> {
        self.owners.lock().unwrap_or_else(|p| p.into_inner())
    }
}

const SESSION_ID: &str = "mcp-session-id";

/// What rmcp answers for an unknown session; a session of another caller gets the same.
fn no_such_session() -> Response {
    (StatusCode::NOT_FOUND, "Not Found: Session not found").into_response()
}

/// Binds sessions to their callers: records the agent of a request whose answer opened a
/// session, and refuses a request naming a session another agent opened (or one whose opener
/// is not recorded). Ids rmcp does not know are left to rmcp (404 in the 2025 era; the
/// 2026-07-28 era has no sessions and ignores the header).
pub async fn bind_sessions(
    State(sessions): State<Arc<SessionOwners>>,
    req: Request,
    next: Next,
) -> Response {
    let Some(agent) = req.extensions().get::<Who>().map(|w| w.agent.clone()) else {
        return no_such_session();
    };
    let named = req.headers().get(SESSION_ID).map(|v| v.as_bytes().to_vec());
    let Some(id) = named else {
        let res = next.run(req).await;
        if let Some(id) = res.headers().get(SESSION_ID).and_then(|v| v.to_str().ok()) {
            // Forget sessions rmcp has ended (closed, timed out) while recording this one.
            let live = sessions.manager.sessions.read().await;
            let mut owners = sessions.lock();
            owners.retain(|id, _| live.contains_key(id.as_str()));
            owners.insert(id.to_owned(), agent);
        }
        return res;
    };
    let id = String::from_utf8_lossy(&id).into_owned();
    let owner = sessions.lock().get(&id).cloned();
    match owner {
        Some(owner) if owner == agent => {}
        Some(_) => return no_such_session(),
        None if sessions
            .manager
            .sessions
            .read()
            .await
            .contains_key(id.as_str()) =>
        {
            return no_such_session();
        }
        None => {}
    }
    let delete = req.method() == Method::DELETE;
    let mut res = next.run(req).await;
    if delete && res.status().is_success() {
        sessions.lock().remove(&id);
        // rmcp answers 202; the session has ended by now, and the SDKs' clients expect 200
        // or 204 (the Python one logs a failed termination otherwise).
        *res.status_mut() = StatusCode::OK;
    }
    res
}

/// The tower service mounted at `/mcp`, and its session owners (for [`bind_sessions`]).
pub fn service(
    shared: Arc<Shared>,
    shutdown: CancellationToken,
) -> (
    StreamableHttpService<vox_mcp::McpServer<HttpMcp>, LocalSessionManager>,
    Arc<SessionOwners>,
) {
    let mut config = StreamableHttpServerConfig::default();
    config.allowed_hosts = shared.config.allowed_hosts();
    config.cancellation_token = shutdown;
    let manager = Arc::new(LocalSessionManager::default());
    let owners = Arc::new(SessionOwners {
        manager: manager.clone(),
        owners: Default::default(),
    });
    let service = StreamableHttpService::new(
        move || {
            let server = vox_mcp::McpServer::new(HttpMcp::new(shared.clone()));
            // Subscribed resources are announced when their file changes, and list changes
            // (workspace tools rescanned, an upstream server's tools changed) as they happen.
            server
                .change_notifier()
                .forward(shared.orch.ctx().notifier.subscribe(), None);
            Ok(server)
        },
        manager,
        config,
    );
    (service, owners)
}
