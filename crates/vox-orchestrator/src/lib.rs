//! The orchestrator: subsystems and their boot, tool handlers grouped by subsystem, the one
//! call path ([`Orchestrator::call`]), and the daemon's socket RPC (`orch.*`) with its client.
//!
//! Transports (stdio MCP through the daemon socket; REST, WebSocket and `/mcp` in the HTTP
//! gateway) only translate: every list and every call goes through [`Orchestrator`], which asks
//! `vox_mcp_registry::authorize_tool` first. A call carries a [`CallCtx`]: who is calling, its
//! cancellation signal, and where its progress and log messages go.

pub mod attention;
pub mod boot;
pub mod call;
pub mod client;
pub mod daemon;
mod orchestrator;
pub mod rpc;
pub mod skills;
pub mod tools;
pub mod workspace;
pub mod workspace_tools;

pub use boot::{BootReport, StepReport};
pub use call::{CallCtx, CallEvents, Cancel, LogLevel, LogMessage, Progress};
pub use orchestrator::{Ctx, Orchestrator, ToolDescriptor, ToolError, ToolOutcome, handler_table};
pub use workspace::Workspace;

/// Version of the daemon socket protocol reported by `orch.ping`. 2: typed outcomes,
/// `orch.cancel`, `orch.progress` / `orch.log` frames, per-client workspace tools.
pub const PROTOCOL_VERSION: u32 = 2;

/// Largest message accepted on the daemon socket. A tool result is capped at half of it
/// (`orchestrator::cap_result`), leaving room for the frame around it.
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;
