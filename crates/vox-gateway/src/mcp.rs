//! `/mcp`: Streamable HTTP MCP through rmcp's tower service (both wire eras; sessions for the
//! legacy era). The caller is the one the auth middleware put in the request's extensions.

use crate::{Shared, Who};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::Value;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use vox_core::ToolOutcome;

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

    /// The gateway serves the static catalog only: its lists do not change while connected.
    fn lists_change(&self) -> bool {
        false
    }

    async fn list_tools(
        &self,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Arc<Vec<rmcp::model::Tool>>, McpError> {
        let who = self.who(ctx)?;
        Ok(Arc::new(vox_mcp::encode::tools(self.0.tools_json(&who))?))
    }

    async fn call_tool(
        &self,
        ctx: &RequestContext<RoleServer>,
        call: vox_mcp::ToolCall,
    ) -> Result<ToolOutcome, McpError> {
        let who = self.who(ctx)?;
        let cx = who.call_ctx().with_cancel(call.cancel).with_events(
            call.events,
            call.progress,
            call.log_level,
        );
        Ok(self.0.call(&who, &call.name, call.arguments, cx).await)
    }

    async fn list_resources(
        &self,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Vec<rmcp::model::Resource>, McpError> {
        let who = self.who(ctx)?;
        vox_mcp::encode::resources(Value::Array(self.0.skill_resources(&who)))
    }

    async fn read_resource(
        &self,
        ctx: &RequestContext<RoleServer>,
        uri: &str,
    ) -> Result<String, McpError> {
        let who = self.who(ctx)?;
        match self.0.read_skill_resource(&who, uri) {
            Some(Ok(text)) => Ok(text),
            Some(Err(e)) => Err(McpError::resource_not_found(
                e.to_string(),
                Some(e.to_json()),
            )),
            None => Err(McpError::resource_not_found(
                format!("no resource {uri}"),
                None,
            )),
        }
    }
}

/// The tower service mounted at `/mcp`.
pub fn service(
    shared: Arc<Shared>,
    shutdown: CancellationToken,
) -> StreamableHttpService<vox_mcp::McpServer<HttpMcp>, LocalSessionManager> {
    let mut config = StreamableHttpServerConfig::default();
    config.allowed_hosts = shared.config.allowed_hosts();
    config.cancellation_token = shutdown;
    StreamableHttpService::new(
        move || Ok(vox_mcp::McpServer::new(HttpMcp::new(shared.clone()))),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}
