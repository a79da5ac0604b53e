use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Who may see a tool: `public` < `operator` < `internal`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Exposure {
    /// Any caller, including the HTTP read token.
    Public,
    /// Callers with the write token or a local transport; not the read token.
    Operator,
    /// Only loopback callers (local transports, a gateway reached from the same machine).
    Internal,
}

impl Exposure {
    /// The contract spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Exposure::Public => "public",
            Exposure::Operator => "operator",
            Exposure::Internal => "internal",
        }
    }
}

/// What calling a tool does to the world.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SideEffectClass {
    /// Reads only; changes nothing.
    ReadOnly,
    /// Writes the workspace journey store or other orchestrator state.
    WritesState,
    /// Writes files in the workspace or elsewhere on disk.
    WritesFiles,
    /// Starts processes (builds, agents, skills).
    SpawnsProcess,
    /// Talks to other machines (model providers, mesh peers, the web).
    Network,
    /// Deletes or overwrites data that cannot be recovered.
    Destructive,
}

impl SideEffectClass {
    /// The contract spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            SideEffectClass::ReadOnly => "read_only",
            SideEffectClass::WritesState => "writes_state",
            SideEffectClass::WritesFiles => "writes_files",
            SideEffectClass::SpawnsProcess => "spawns_process",
            SideEffectClass::Network => "network",
            SideEffectClass::Destructive => "destructive",
        }
    }
}

/// `operations/catalog.v1.yaml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Catalog {
    /// Schema version of the file (1).
    pub version: u32,
    /// Every tool of vox's static MCP surface.
    pub tools: Vec<CatalogTool>,
}

/// One row of the tool catalog.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogTool {
    /// The MCP tool name, e.g. `vox_memory_recall`.
    pub name: String,
    /// Human-readable title shown by MCP clients.
    pub title: String,
    /// The description advertised in `tools/list`.
    pub description: String,
    /// The group the tool belongs to (e.g. `memory`, `browser`); profiles can include a whole lane.
    pub lane: String,
    /// Ids of the subsystems that must be booted for the tool to be served.
    pub requires: Vec<String>,
    /// Who may see and call the tool.
    pub exposure: Exposure,
    /// What calling the tool does to the world.
    pub side_effect_class: SideEffectClass,
    /// Whether the HTTP read token may call the tool (on top of its exposure being public).
    pub http_read_role_eligible: bool,
    /// Cargo feature the tool needs; without it the tool is listed but never served.
    #[serde(default)]
    pub feature: Option<String>,
}

/// `subsystems.v1.yaml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Subsystems {
    /// Schema version of the file (1).
    pub version: u32,
    /// Every subsystem, in file order (a subsystem's bit is its position).
    pub subsystems: Vec<Subsystem>,
    /// Every boot step, in the fixed order they run.
    pub boot_order: Vec<String>,
}

/// One subsystem: its hard dependencies and its boot steps.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Subsystem {
    /// Snake_case id, e.g. `search_index`.
    pub id: String,
    /// One-line description of what the subsystem provides.
    pub description: String,
    /// Ids of the subsystems it needs booted first.
    pub depends_on: Vec<String>,
    /// Names of the boot steps that start it, each listed once in `boot_order`.
    pub boot_steps: Vec<String>,
}

/// `profiles/<id>.v1.yaml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileManifest {
    /// The profile id; the file is `profiles/<id>.v1.yaml`.
    pub id: String,
    /// One-line description shown by `vox profile list`.
    pub description: String,
    /// The tools the profile serves, by exact name or prefix.
    pub tools: ProfileTools,
    /// Catalog lanes whose every tool is included as well.
    #[serde(default)]
    pub include_lanes: Vec<String>,
    /// Ids of the subsystems the profile needs; their dependencies are added at compile time.
    pub requires: Vec<String>,
    /// The highest exposure a tool may have to be in the profile.
    pub max_exposure: Exposure,
    /// Axis GUI view keys (`contracts/gui/surface-registry.v1.yaml`) rendered when Axis is attached
    /// remotely.
    #[serde(default)]
    pub axis_surfaces: Vec<String>,
}

/// The `tools` block of a profile manifest.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileTools {
    /// Exact tool names or trailing-`*` prefixes.
    pub include: Vec<String>,
}

/// `bundles/catalog.toml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundleCatalog {
    /// Schema version of the file (1).
    pub version: u32,
    /// The bundles by name (e.g. `vox-server`).
    pub bundles: BTreeMap<String, Bundle>,
}

/// One bundle; `profile` is absent for bundles that leave the configured profile alone.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bundle {
    /// One-line description shown when listing bundles.
    pub description: String,
    /// The profile ids `vox bundle apply` writes as the default `VOX_PROFILE`.
    #[serde(default)]
    pub profile: Option<String>,
}
