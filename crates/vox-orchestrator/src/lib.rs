//! The orchestrator: subsystems and their boot, tool handlers grouped by subsystem, the one
//! call path ([`Orchestrator::call`]), and the daemon's socket RPC (`orch.*`) with its client.
//!
//! Transports (stdio MCP, the socket, HTTP later) only translate: every list and every call goes
//! through [`Orchestrator`], which asks `vox_mcp_registry::authorize_tool` first.

pub mod attention;
pub mod boot;
pub mod client;
pub mod daemon;
mod orchestrator;
pub mod rpc;
pub mod skills;
pub mod tools;
pub mod workspace;
pub mod workspace_tools;

pub use boot::{BootReport, StepReport};
pub use orchestrator::{
    CallScope, Ctx, Orchestrator, ToolDescriptor, ToolError, ToolOutcome, handler_table,
};
pub use workspace::Workspace;

/// Version of the daemon socket protocol reported by `orch.ping`.
pub const PROTOCOL_VERSION: u32 = 1;

/// Largest message accepted on the daemon socket (and the size cap of one tool result).
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;
