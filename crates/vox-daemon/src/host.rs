//! What serves the daemon's MCP sessions (`vox_mcp::hosted`): a stdio session `vox mcp` handed
//! off ([`StdioSession`]), and a socket connection that speaks MCP ([`SocketSession`]). The
//! daemon resolves each session's [`CallScope`] at its edge; the host serves it with the one
//! MCP server.

use crate::handoff::StdioSession;
use crate::rpc::InFlight;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use tokio::io::AsyncRead;
use vox_core::{CallScope, Orchestrator};

/// A socket connection that speaks MCP from its next byte.
pub struct SocketSession {
    /// The orchestrator the session calls.
    pub orch: Arc<Orchestrator>,
    /// The rest of the connection (its first line already read when it was `orch.mcp`).
    pub input: Box<dyn AsyncRead + Send + Unpin>,
    /// Where the session's answers go (paced with `input`: see [`crate::paced`]).
    pub output: Pin<Box<dyn tokio::io::AsyncWrite + Send>>,
    /// Whose session it is: from the `orch.mcp` line, or the operator's when the first line is
    /// already MCP.
    pub scope: Arc<CallScope>,
    /// Its tool calls count as requests in flight: a stopping daemon lets them finish.
    pub in_flight: InFlight,
}

/// A session's future: it ends when the session does.
pub type Serving = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Serves the daemon's MCP sessions. Without one the daemon refuses handoffs (`vox mcp`
/// proxies instead) and closes MCP connections.
pub trait SessionHost: Send + Sync {
    /// Serves a handed-off stdio session until it ends.
    fn serve_stdio(&self, session: StdioSession) -> Serving;
    /// Serves an MCP socket connection until it ends.
    fn serve_socket(&self, session: SocketSession) -> Serving;
}
