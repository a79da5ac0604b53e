//! The workspace daemon and its socket protocol.
//!
//! - [`daemon`]: one daemon per workspace (an exclusive lock for its life), the socket (mode
//!   0600) beside its pid/profile file, idle flushing of call observers, a graceful stop.
//! - [`rpc`]: newline-delimited JSON-RPC 2.0 `orch.*` on the socket; per-call `orch.progress`
//!   and `orch.log` frames and `orch.cancel`, tied to the request id; a closed connection
//!   cancels its calls.
//! - [`lifetime`]: a daemon started on purpose stays; one a client spawned exits after
//!   `VOX_DAEMON_IDLE_SECS` without clients.
//! - [`client`]: the multiplexed client `vox mcp` uses, and adoption (ping, else spawn under a
//!   lock) with the profile and protocol checks.
//! - [`handoff`]: `vox mcp` passing its stdin and stdout to the daemon, which then serves that
//!   MCP session itself; the table of requests a dead daemon left unanswered.

pub mod client;
pub mod daemon;
pub mod frames;
pub mod handoff;
pub mod lifetime;
pub mod rpc;

/// Version of the daemon socket protocol reported by `orch.ping`. 2: typed outcomes,
/// `orch.cancel`, `orch.progress` / `orch.log` frames, per-client workspace tools.
pub const PROTOCOL_VERSION: u32 = 2;

pub use vox_core::MAX_MESSAGE_BYTES;
