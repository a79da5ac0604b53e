//! Other people's MCP servers under vox's profiles. `config` reads `servers.toml`; `server`
//! is one live connection (a child in its own process group, or a Streamable HTTP session);
//! `surface` is every server (starts, restarts, the circuit, reloads), `pins` their tools'
//! definitions against the store, `federation` what clients see and the core's
//! `UpstreamTools`, `watch` the watchers; `family` the boot step and the operator's tools.

pub mod config;
mod family;
mod federation;
mod pins;
pub mod server;
pub mod surface;
mod tls;
mod watch;

pub use pins::definition;
pub use surface::{ServerState, Sources, Status, Upstreams, Withheld};

/// The families of this crate.
pub fn families() -> Vec<vox_core::Family> {
    vec![family::family()]
}
