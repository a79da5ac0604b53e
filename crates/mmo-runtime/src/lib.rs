//! codex-mmo's runtime: it runs a compiled snapshot as a team. A supervisor process owns one
//! session: its durable state (`store`), the app-server hosts of the root and of every MCP
//! worker, and the `mmo_mesh` Agent-MCP server the hosts' Codex processes call back into.
//! Policy that needs no process (admission, literal tasks, result contracts, git worktrees and
//! patches) lives in modules of its own so it can be tested without a model.

pub mod admission;
pub mod literal;
pub mod result;
pub mod worktree;
