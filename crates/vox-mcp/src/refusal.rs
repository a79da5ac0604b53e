//! A server that can only refuse: `vox mcp` serves it when it cannot get a daemon for the
//! requested profile (`profile_mismatch`, a protocol mismatch, a daemon that will not start).
//! Exiting before the handshake shows clients nothing but "connection closed"; answering
//! `initialize` (2025 era) and `server/discover` plus every request (2026-07-28 era) with a
//! JSON-RPC error puts the reason and the remedy in front of the user.

use rmcp::model::{
    ClientNotification, ClientRequest, EmptyResult, ErrorCode, Implementation, ServerCapabilities,
    ServerConfig, ServerResult,
};
use rmcp::service::{NotificationContext, RequestContext, Service};
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::json;

/// The JSON-RPC code of a refusal: the implementation-defined server error range.
pub const REFUSED: ErrorCode = ErrorCode(-32000);

/// Answers every request but `ping` with one error.
pub struct Refusal {
    error: McpError,
}

impl Refusal {
    /// `code` is the spec's error code (`profile_mismatch`, ...); it leads the message and is
    /// `data.code`, beside whatever else `data` carries.
    pub fn new(code: &str, message: String, mut data: serde_json::Value) -> Self {
        if let Some(obj) = data.as_object_mut() {
            obj.insert("code".into(), json!(code));
        } else {
            data = json!({ "code": code });
        }
        let message = if message.starts_with(code) {
            message
        } else {
            format!("{code}: {message}")
        };
        Refusal {
            error: McpError::new(REFUSED, message, Some(data)),
        }
    }

    /// The error every request is answered with.
    pub fn error(&self) -> &McpError {
        &self.error
    }
}

impl Service<RoleServer> for Refusal {
    async fn handle_request(
        &self,
        request: ClientRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<ServerResult, McpError> {
        match request {
            ClientRequest::PingRequest(_) => Ok(ServerResult::EmptyResult(EmptyResult {})),
            _ => Err(self.error.clone()),
        }
    }

    async fn handle_notification(
        &self,
        _notification: ClientNotification,
        _context: NotificationContext<RoleServer>,
    ) -> Result<(), McpError> {
        Ok(())
    }

    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(ServerCapabilities::builder().build());
        info.server_info = Implementation::new("vox", env!("CARGO_PKG_VERSION"));
        info
    }
}
