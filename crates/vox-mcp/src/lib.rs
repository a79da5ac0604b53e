//! vox over MCP: one rmcp `ServerHandler` ([`server::McpServer`]) over a [`server::Backend`],
//! the stdio backend that relays to the workspace daemon ([`stdio`]), and the one module that
//! encodes tool outcomes for every transport ([`encode`]). When `vox mcp` cannot get a daemon,
//! [`refusal`] answers the handshake with the reason instead of closing the connection. The HTTP gateway's `/mcp` uses the
//! same server with an in-process backend.

pub mod encode;
pub mod input_rounds;
pub mod list_cache;
pub mod pipes;
pub mod refusal;
pub mod server;
pub mod stdio;

pub use server::{Backend, McpServer, ToolCall};
