//! Other people's MCP servers under vox's profiles. `config` reads `servers.toml`; `server`
//! is one live connection (a child in its own process group, rmcp's client on its pipes);
//! `surface` is every server as the core's `UpstreamTools` (restarts, the circuit, pins);
//! `family` the boot step and the operator's tools.

pub mod config;
mod family;
pub mod server;
pub mod surface;
mod tls;

pub use surface::{ServerState, Status, Upstreams, Withheld, definition};

/// The families of this crate.
pub fn families() -> Vec<vox_core::Family> {
    vec![family::family()]
}
