//! vox's orchestrator families, one module each: `agents` (the `agent_fleet` step:
//! credentials, the `AgentDirectory` and the `AgentGate`, budgets, restart of workers, lease
//! expiry; `fleet`: one `codex app-server` worker per agent the daemon runs), `tasks`, `locks`,
//! `plans` (plans and handoffs), `clarifications` and `approvals` (the tools, and the gate).
//! What they share, who the caller is and what follows every change, is `orchestration`.

mod agents;
pub mod approvals;
mod clarifications;
mod fleet;
mod locks;
pub mod orchestration;
mod plans;
mod tasks;

pub use agents::{TOKEN_PREFIX, agent_of_token};

use vox_core::Family;

/// This crate's families, in the order `vox_tools::families()` assembles them.
pub fn families() -> Vec<Family> {
    vec![
        agents::family(),
        tasks::family(),
        locks::family(),
        plans::family(),
        clarifications::family(),
        approvals::family(),
    ]
}
