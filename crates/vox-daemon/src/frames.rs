//! The typed payloads of the `orch.*` socket protocol. Both ends encode and decode these, so
//! a field is named once; unknown fields are rejected.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use vox_core::{Ask, LogLevel, LogMessage, Progress, ToolOutcome};

/// `orch.tool_call` parameters.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCallParams {
    pub name: String,
    #[serde(default)]
    pub arguments: Value,
    /// The attention and rate-limit key (`stdio:<client name>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The client's request carried a progress token: send `orch.progress` frames.
    #[serde(default)]
    pub progress: bool,
    /// Send `orch.log` frames at or above this level; none when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_level: Option<LogLevel>,
    /// The credential of the orchestrator agent making the call (`VOX_AGENT_TOKEN`): the call
    /// is then that agent's, decided under its profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_token: Option<String>,
}

/// `orch.tool_call` answer.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCallAnswer {
    pub outcome: ToolOutcome,
}

/// `orch.list_tools` parameters.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListToolsParams {
    /// List the workspace's `.vox` tools (the client's `VOX_MCP_WORKSPACE_TOOLS`).
    #[serde(default)]
    pub workspace_tools: bool,
    /// An agent's credential: list what that agent may call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_token: Option<String>,
}

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
}

/// `orch.cancel` (a notification): stop the call with this request id (its raw JSON, as the
/// call's request wrote it).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CancelParams {
    pub id: Box<RawValue>,
}

/// `orch.ask` (daemon → client): the call with request id `id` asks the client's own MCP
/// client (`kind`: elicitation or sampling, with the MCP request's `params`). The client answers
/// with `orch.answer` carrying the same `ask` number.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AskParams {
    pub id: Box<RawValue>,
    pub ask: u64,
    pub kind: Ask,
    pub params: Value,
}

/// `orch.answer` (client → daemon, a notification): the answer to `orch.ask` number `ask`,
/// the MCP result's JSON, or `error`: why there is none.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnswerParams {
    pub ask: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `orch.progress` (daemon → client): progress of the call with request id `id` (raw JSON,
/// byte for byte the request's).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProgressParams {
    pub id: Box<RawValue>,
    pub progress: Progress,
}

/// `orch.log` (daemon → client): a log message of the call with request id `id` (raw JSON).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogParams {
    pub id: Box<RawValue>,
    pub message: LogMessage,
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_level: Option<LogLevel>,
    /// Resources subscribed to (`resources/subscribe`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subscribed: Vec<String>,
    /// The skill the client activated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_skill: Option<String>,
}
