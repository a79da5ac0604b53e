//! `/mcp`: Streamable HTTP MCP through rmcp's tower service (both wire eras; sessions for the
//! legacy era). The caller is the one the auth middleware put in the request's extensions.

use crate::{Shared, Who};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::Value;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The MCP handler of the gateway: one per session (rmcp builds them), sharing the state.
#[derive(Clone)]
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

#[allow(deprecated)] // enable_logging: see set_level
impl ServerHandler for HttpMcp {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_logging()
                .enable_resources()
                .build(),
        );
        info.server_info = Implementation::new("vox", env!("CARGO_PKG_VERSION"));
        info.with_instructions(format!(
            "vox gateway under capability profile `{}`.",
            self.0.orch.profile().canonical()
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

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let who = self.who(&context)?;
        Ok(ListToolsResult::with_all_items(vox_mcp::tools_from_json(
            self.0.tools_json(&who),
        )?))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, McpError> {
        let who = self.who(&context)?;
        let resources = vox_mcp::resources_from_json(Value::Array(self.0.skill_resources(&who)))?;
        Ok(rmcp::model::ListResourcesResult::with_all_items(resources))
    }

    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, McpError> {
        let who = self.who(&context)?;
        match self.0.read_skill_resource(&who, &request.uri) {
            Some(Ok(text)) => Ok(vox_mcp::text_resource(&request.uri, text)),
            Some(Err(e)) => Err(McpError::resource_not_found(
                e.to_string(),
                Some(e.to_json()),
            )),
            None => Err(McpError::resource_not_found(
                format!("no resource {}", request.uri),
                None,
            )),
        }
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let who = self.who(&context)?;
        let args = request.arguments.map(Value::Object).unwrap_or(Value::Null);
        let outcome = self.0.call(&who, &request.name, args).await;
        vox_mcp::call_result(outcome.label(), outcome.is_error(), outcome.to_json()).map(Into::into)
    }
}

/// The tower service mounted at `/mcp`.
pub fn service(
    shared: Arc<Shared>,
    shutdown: CancellationToken,
) -> StreamableHttpService<HttpMcp, LocalSessionManager> {
    let mut config = StreamableHttpServerConfig::default();
    config.allowed_hosts = shared.config.allowed_hosts();
    config.cancellation_token = shutdown;
    StreamableHttpService::new(
        move || Ok(HttpMcp::new(shared.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}
