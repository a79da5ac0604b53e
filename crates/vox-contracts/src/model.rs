use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Who may see a tool: `public` < `operator` < `internal`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Exposure {
    Public,
    Operator,
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
    ReadOnly,
    WritesState,
    WritesFiles,
    SpawnsProcess,
    Network,
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
    pub version: u32,
    pub tools: Vec<CatalogTool>,
}

/// One row of the tool catalog.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogTool {
    pub name: String,
    pub title: String,
    pub description: String,
    pub lane: String,
    pub requires: Vec<String>,
    pub exposure: Exposure,
    pub side_effect_class: SideEffectClass,
    pub http_read_role_eligible: bool,
    #[serde(default)]
    pub feature: Option<String>,
}

/// `subsystems.v1.yaml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Subsystems {
    pub version: u32,
    pub subsystems: Vec<Subsystem>,
    /// Every boot step, in the fixed order they run.
    pub boot_order: Vec<String>,
}

/// One subsystem: its hard dependencies and its boot steps.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Subsystem {
    pub id: String,
    pub description: String,
    pub depends_on: Vec<String>,
    pub boot_steps: Vec<String>,
}

/// `profiles/<id>.v1.yaml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileManifest {
    pub id: String,
    pub description: String,
    pub tools: ProfileTools,
    #[serde(default)]
    pub include_lanes: Vec<String>,
    pub requires: Vec<String>,
    pub max_exposure: Exposure,
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
    pub version: u32,
    pub bundles: BTreeMap<String, Bundle>,
}

/// One bundle; `profile` is absent for bundles that leave the configured profile alone.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bundle {
    pub description: String,
    #[serde(default)]
    pub profile: Option<String>,
}
