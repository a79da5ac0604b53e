//! codex-mmo's runtime: it runs a compiled snapshot as a team. A supervisor process owns one
//! session: its durable state (`store`), the app-server hosts of the root and of every MCP
//! worker (`host`), and the `mmo_mesh` Agent-MCP server (`mesh`, on rmcp, over `jobs`) the
//! hosts' Codex processes call back into (`supervisor`); `session` is a session's life outside
//! that process (create, recover, stop, inspect). Policy that needs no process (admission,
//! literal tasks, result contracts, git worktrees and patches) lives in modules of its own so it
//! can be tested without a model. The modules form a DAG (ARCHITECTURE.md lists who uses whom).

pub mod admission;
pub mod host;
pub mod ids;
pub mod jobs;
pub mod literal;
pub mod mesh;
pub mod native;
pub mod problem;
pub mod result;
pub mod session;
pub mod stall;
pub mod store;
pub mod supervisor;
pub mod team;
pub mod worktree;
