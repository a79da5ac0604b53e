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

#[derive(Debug, thiserror::Error)]
pub enum MeshError {
    #[error("mesh configuration: {0}")]
    Config(String),
    #[error("NATS: {0}")]
    Nats(String),
    #[error("refused: {0}")]
    Refused(String),
}

impl MeshError {
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
