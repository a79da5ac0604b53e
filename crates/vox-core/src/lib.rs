//! The call path of vox: the booted context ([`Ctx`]), [`Orchestrator::call`] (which asks
//! `vox_mcp_registry::authorize_tool` first, then the families' session guards, then runs the
//! handler under the call's deadline and cancellation), boot over the contract's steps, and
//! the [`Family`] registry through which tool families plug in. It knows no family and no
//! transport.
//!
//! Transports (stdio MCP through the daemon socket; REST, WebSocket and `/mcp` in the HTTP
//! gateway) only translate. A call carries a [`CallCtx`]: who is calling, its cancellation
//! signal, and where its progress and log messages go; its [`CallScope`], resolved once at the
//! transport's edge, is the only thing any path (a chat's tool loop, a mesh call, an agent's
//! call) decides with.

mod accept;
pub mod boot;
pub mod call;
pub mod ctx;
mod dispatch;
pub mod env;
pub mod error;
pub mod family;
mod listing;
mod orchestrator;
pub mod resource;
pub mod workspace;

pub use accept::AcceptBackoff;
pub use boot::{BootReport, StepReport};
pub use call::{
    Ask, AskError, AskReply, CallCtx, CallEvents, CallRun, CallScope, Cancel, CancelGuard,
    LogLevel, LogMessage, Progress, SessionEffect, SessionKey, WorkspaceTools,
};
pub use ctx::{
    AgentDirectory, AgentGate, AgentIdentity, CallObserver, Ctx, DynamicTools, GatedTool, Hooks,
    SessionGuard, UpstreamFuture, UpstreamTool, UpstreamTools, resource_updated,
};
pub use error::{ErrorDetail, ErrorKind, ToolError, ToolOutcome};
pub use family::{Family, HandlerEntry, HandlerFuture, HandlerResult, StepDone, StepFn};
pub use orchestrator::{Assembled, Orchestrator, ToolDescriptor, assemble, json_len};
pub use resource::ResourceBody;
pub use workspace::{Found, Workspace, open_state_file, write_state_file};

/// Largest message accepted on the daemon socket. A tool result is capped at half of it
/// (`orchestrator::cap_result`), leaving room for the frame around it.
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;
