//! The workspace daemon and its socket protocol.
//!
//! - [`daemon`]: one daemon per workspace (an exclusive lock for its life), the socket (mode
//!   0600) beside its pid/profile file, idle flushing of call observers, a graceful stop.
//! - [`rpc`]: the socket; a connection is an MCP session (served by the [`host`]) or a small
//!   control protocol (newline-delimited JSON-RPC 2.0 `orch.*`), as its first line says; a
//!   closed connection cancels its calls.
//! - [`host`]: what serves the daemon's MCP sessions (the socket's and handed-off stdio ones)
//!   under the scope resolved for each.
//! - [`lifetime`]: a daemon started on purpose stays; one a client spawned exits after
//!   `VOX_DAEMON_IDLE_SECS` without clients.
//! - [`client`]: the control client, and adoption (ping, else spawn under a lock) with the
//!   profile and protocol checks.
//! - [`handoff`]: `vox mcp` passing its stdin and stdout to the daemon, which then serves that
//!   MCP session itself; the table of requests a dead daemon left unanswered.

pub mod client;
pub mod daemon;
pub mod frames;
pub mod handoff;
pub mod host;
pub mod lifetime;
pub mod paced;
pub mod rpc;

/// Version of the daemon socket protocol reported by `orch.ping`. 3: tools, resources and
/// prompts are MCP (a connection opening with `orch.mcp`, or with an MCP message); the
/// control requests stay JSON-RPC.
pub const PROTOCOL_VERSION: u32 = 3;

pub use vox_core::MAX_MESSAGE_BYTES;
