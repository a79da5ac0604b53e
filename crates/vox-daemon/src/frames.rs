//! The typed payloads of the daemon's control requests (`orch.*`). Both ends encode and
//! decode these, so a field is named once; unknown fields are rejected. Tools, resources and
//! prompts are not here: they are MCP, on a connection that opens with [`McpParams`].

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use vox_core::LogLevel;

/// `orch.ping` parameters.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PingParams {
    /// This connection is a client: a spawned daemon stays while it is open.
    #[serde(default)]
    pub attach: bool,
    /// Stay until stopped from now on (`vox daemon start` adopting a spawned daemon).
    #[serde(default)]
    pub keep: bool,
    /// Attach or keep only if the daemon serves this canonical profile (so a client the
    /// daemon will refuse holds nothing): one round trip to adopt a daemon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
}

/// `orch.cancel` (a notification): stop the call with this request id (its raw JSON, as the
/// call's request wrote it).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CancelParams {
    /// The id of the request to cancel, as raw JSON (a number or a string).
    pub id: Box<RawValue>,
}

/// `orch.mcp` parameters: the first line of a connection that then speaks MCP, saying whose
/// session it is. A connection whose first line is an MCP message is the operator's, without
/// workspace tools listed.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpParams {
    /// List the workspace's tools (the client's `VOX_MCP_WORKSPACE_TOOLS`).
    #[serde(default)]
    pub workspace_tools: bool,
    /// The client's `VOX_AGENT_TOKEN`: the session is that agent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_token: Option<String>,
    /// What the session had chosen on a daemon that died (the `vox/session` `_meta` of its
    /// last result that changed it), to set again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<Value>,
}

/// `orch.serve_stdio` parameters (the request carries three descriptors: the client's input,
/// its output, and the pending-request table).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeStdioParams {
    /// The client's `VOX_MCP_WORKSPACE_TOOLS`.
    #[serde(default)]
    pub workspace_tools: bool,
    /// The client's `VOX_AGENT_TOKEN`: the session is that agent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_token: Option<String>,
}

/// `orch.session` (daemon → `vox mcp`, on the handoff connection): what `vox mcp` needs to
/// carry the session on if the daemon dies, sent whenever it changes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionState {
    /// The client's `initialize` parameters (none for a 2026-07-28 client).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<Value>,
    /// The log level the client set with `logging/setLevel`, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_level: Option<LogLevel>,
    /// Resources subscribed to (`resources/subscribe`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subscribed: Vec<String>,
    /// What the session's calls chose (the `vox/session` `_meta` of the last result that
    /// changed it), opaque to `vox mcp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<Value>,
}
