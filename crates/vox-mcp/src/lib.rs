//! vox over MCP: one rmcp `ServerHandler` ([`server::McpServer`]) over a [`server::Backend`];
//! the daemon's MCP sessions on it ([`hosted`]: socket connections and handed-off stdio);
//! the stdio side of `vox mcp` ([`stdio`]: handing its stdin and stdout to the workspace daemon,
//! or proxying to an MCP session on its socket); the generic MCP proxy ([`proxy`]); and the one
//! module that encodes tool outcomes for every transport ([`encode`]). When `vox mcp` cannot
//! get a daemon, [`refusal`] answers the handshake with the reason instead of closing the
//! connection. The HTTP gateway's `/mcp` uses the same server with an in-process backend.

pub mod encode;
pub mod hosted;
pub mod in_flight;
pub mod input_rounds;
pub mod list_cache;
pub mod pipes;
pub mod proxy;
pub mod refusal;
pub mod server;
pub mod stdio;

pub use server::{Backend, McpServer, ToolCall};
