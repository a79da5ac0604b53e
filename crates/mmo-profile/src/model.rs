//! The resolved generation-8 profile: every field present, every default applied.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The only schema generation this build reads.
pub const SCHEMA_VERSION: i64 = 8;
/// The package version a pack's `version` must equal.
pub const PACKAGE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Reasoning selectors a profile may name.
pub const REASONING: &[&str] = &["none", "minimal", "low", "medium", "high", "xhigh"];
/// Agent-MCP admission categories; the last four are the literal_task kinds.
pub const TASK_KINDS: &[&str] = &[
    "analysis",
    "other",
    "review",
    "verification",
    "implementation",
    "debugging",
    "research",
    "planning",
    "documentation",
    "testing",
    "locate",
    "references",
    "extract",
    "summarize_supplied",
];
/// Task kinds a low-trust role may accept.
pub const LOW_TRUST_TASK_KINDS: &[&str] =
    &["locate", "references", "extract", "summarize_supplied"];
/// The exact control action allowlist.
pub const CONTROL_ACTIONS: &[&str] = &[
    "inspect",
    "trace",
    "steer",
    "interrupt",
    "pause",
    "continue",
    "detach",
    "stop",
    "finalize",
    "compact",
    "respond",
    "set_effort",
    "fork",
];
/// Input modalities a role may require.
pub const INPUT_MODALITIES: &[&str] = &["text", "image", "audio", "document"];
/// Output modalities a role may require.
pub const OUTPUT_MODALITIES: &[&str] = &["text", "image", "audio"];
/// The reserved runtime-owned MCP server id.
pub const MESH_SERVER: &str = "mmo_mesh";

/// A whole resolved profile.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Profile {
    pub schema_version: i64,
    pub id: String,
    pub version: String,
    pub display_name: String,
    pub description: String,
    pub tags: Vec<String>,
    pub maturity: String,
    pub root: String,
    pub catalog: Option<String>,
    pub smoke: Option<String>,
    pub coordination: Coordination,
    pub agents: BTreeMap<String, Agent>,
}

/// `[coordination]` with defaults applied.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Coordination {
    pub mode: String,
    pub orchestration: String,
    pub max_active_agents: u32,
    /// Whether the pack wrote `max_active_agents` itself (defaults are clamped, not rejected).
    #[serde(skip)]
    pub max_active_agents_declared: bool,
    pub max_depth: u32,
    #[serde(skip)]
    pub max_depth_declared: bool,
    pub max_children_per_agent: u32,
    pub max_active_writers: u32,
    #[serde(skip)]
    pub max_active_writers_declared: bool,
    pub reject_ancestor_role: bool,
    pub wait_policy: String,
    pub write_conflict_policy: String,
    pub contradiction_policy: String,
    pub result_visibility: String,
    pub default_result_chars: u32,
    pub max_result_chars: u32,
    /// `None` until the compiler derives it.
    pub native_max_concurrent_threads: Option<u32>,
    pub native_interrupt_message: bool,
    pub native_nested_delegation: bool,
}

/// One `[agents.<id>]` role with defaults applied.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Agent {
    pub kind: String,
    pub description: String,
    pub model: String,
    pub reasoning: String,
    pub plan_reasoning: Option<String>,
    pub permissions: String,
    pub can_spawn: Vec<String>,
    pub controls: BTreeMap<String, Vec<String>>,
    pub max_active: u32,
    pub max_children: u32,
    pub write_scope_required: bool,
    pub trust: String,
    pub verification: String,
    pub allowed_task_kinds: Vec<String>,
    pub min_task_chars: u32,
    pub max_task_chars: u32,
    pub execution_mode: String,
    pub goal_token_budget: Option<u64>,
    pub max_goal_token_budget: Option<u64>,
    pub stall_warning_seconds: u32,
    pub finalization_grace_seconds: u32,
    pub allowed_reasoning_efforts: Vec<String>,
    pub requires_modalities: Vec<String>,
    pub requires_output_modalities: Vec<String>,
    pub requires_tool_images: bool,
    pub requires_documents: bool,
    pub attachments_allowed: bool,
    pub network_access: bool,
    pub web_search: String,
    pub output_contract: Option<String>,
    pub contract_enforcement: String,
    /// Resolved from the route/model default when the pack leaves it out.
    pub resource_group: Option<String>,
    pub resource_units: u32,
    pub instructions: Option<String>,
    pub approval_policy: String,
    pub backends: Vec<String>,
    pub native_name: Option<String>,
    pub tool_mcp_servers: BTreeMap<String, Grant>,
}

impl Agent {
    /// Whether this role can run through Codex native delegation.
    pub fn native_capable(&self) -> bool {
        self.backends.iter().any(|b| b == "native")
    }
    /// Whether this role runs only as a supervised Agent-MCP worker.
    pub fn mcp_only(&self) -> bool {
        self.backends == ["mcp"]
    }
    /// Whether this role runs only natively.
    pub fn native_only(&self) -> bool {
        self.backends == ["native"]
    }
    /// Whether every workspace-write Agent-MCP job of this role must declare its canonical
    /// `write_scope` (`write_scope_required` on an MCP-capable writer participant). The runtime
    /// refuses such a spawn without one; validation refuses such a smoke task without one.
    /// Native runs are not intercepted, so there the requirement stays advisory.
    pub fn requires_write_scope(&self) -> bool {
        self.write_scope_required
            && self.kind != "root"
            && self.permissions == "workspace-write"
            && self.backends.iter().any(|b| b == "mcp")
    }
}

/// A Tool MCP grant as written in the pack.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Grant {
    pub required: bool,
    /// `None` means the operator's whole allowlist.
    pub enabled_tools: Option<Vec<String>>,
}

/// A generation-8 smoke file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Smoke {
    pub schema_version: i64,
    pub tasks: Vec<SmokeTask>,
}

/// One `[[tasks]]` entry.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SmokeTask {
    pub agent: String,
    pub backend: String,
    pub task_kind: Option<String>,
    pub mode: String,
    pub wall_timeout_seconds: u32,
    pub required_mcp_tools: Vec<String>,
    pub task: Option<String>,
    pub literal_task: Option<LiteralTask>,
    pub write_scope: Vec<String>,
    pub attachments: Vec<String>,
    pub wait_seconds: Option<u32>,
}

/// The typed literal_task object a low-trust smoke task submits instead of prose.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LiteralTask {
    pub operation: String,
    pub path: String,
    pub start_line: Option<u32>,
    pub end_line: Option<u32>,
    pub query: Option<String>,
}
