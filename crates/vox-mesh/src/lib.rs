//! Mesh nodes over NATS JetStream. A node has a signed identity ([`identity`]), trusts the
//! nodes its trust list names ([`config`]), seals everything it says ([`wire`]), and talks
//! over one [`link::Link`]: durable per-node queues on JetStream, heartbeats on plain NATS.
//! What a message or a call means is the orchestrator's business, not this crate's.

pub mod config;
pub mod identity;
pub mod link;
pub mod server;
pub mod wire;

pub use config::{Auth, MeshConfig, Peer};
pub use identity::NodeKey;
pub use link::{Link, PeerState, Queue};
pub use wire::{Opened, Wire};

/// What can go wrong joining or talking to the mesh, each with a stable code ([`MeshError::code`]).
#[derive(Debug, thiserror::Error)]
pub enum MeshError {
    /// The environment, the trust list or the node key is wrong (`mesh_config`).
    #[error("mesh configuration: {0}")]
    Config(String),
    /// The NATS server cannot be reached or refused an operation (`mesh_unreachable`).
    #[error("NATS: {0}")]
    Nats(String),
    /// An envelope failed the checks: size, shape, signature, addressee or trust (`mesh_refused`).
    #[error("refused: {0}")]
    Refused(String),
}

impl MeshError {
    /// The stable machine-readable code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            MeshError::Config(_) => "mesh_config",
            MeshError::Nats(_) => "mesh_unreachable",
            MeshError::Refused(_) => "mesh_refused",
        }
    }
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
