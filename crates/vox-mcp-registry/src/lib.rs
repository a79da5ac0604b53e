//! The static registry of vox's tool surface and the one authorization function.
//!
//! `build.rs` compiles `contracts/` into [`TOOL_REGISTRY`], [`SUBSYSTEMS`], [`BOOT_STEPS`] and
//! [`PROFILES`]. [`ProfileSet`] composes profiles; [`authorize_tool`] decides every call on every
//! transport, and [`visible_tools`] is defined through it so that listing and calling agree.

pub use vox_contracts::{Exposure, SideEffectClass};

mod authorize;
mod profile;
mod upstream;
mod workspace;

pub use authorize::{Caller, Denial, DenialCode, Role, authorize_tool, visible_tools};
pub use profile::{DEV, ProfileError, ProfileSet};
pub use upstream::{
    SEPARATOR, UpstreamClass, UpstreamPattern, UpstreamSelection, authorize_upstream,
    authorize_upstream_server,
};
pub use workspace::{
    WorkspaceProfile, compile_workspace_profile, install_workspace_profiles,
    load_workspace_profiles, workspace_profiles,
};

include!(concat!(env!("OUT_DIR"), "/registry_gen.rs"));

/// A bit mask over [`SUBSYSTEMS`].
pub type SubsystemMask = u32;

impl SubsystemId {
    /// The contract's snake_case id.
    pub fn as_str(self) -> &'static str {
        SUBSYSTEMS[self as usize].id
    }
    /// Its bit in a [`SubsystemMask`].
    pub fn bit(self) -> SubsystemMask {
        1 << self as u32
    }
}

impl BootStep {
    /// The contract's step name.
    pub fn name(self) -> &'static str {
        BOOT_STEPS[self as usize].name
    }
    /// The subsystem the step boots.
    pub fn subsystem(self) -> SubsystemId {
        SubsystemId::ALL[BOOT_STEPS[self as usize].subsystem]
    }
}

/// One catalog row.
#[derive(Debug)]
pub struct ToolEntry {
    /// Position in [`TOOL_REGISTRY`] (sorted by name), the tool's bit in a [`ToolSet`].
    pub index: usize,
    /// The MCP tool name, e.g. `vox_memory_recall`.
    pub name: &'static str,
    /// Human-readable title shown by MCP clients.
    pub title: &'static str,
    /// The description advertised in `tools/list`.
    pub description: &'static str,
    /// The catalog lane (tool group) the tool belongs to.
    pub lane: &'static str,
    /// Ids of the subsystems that must be booted for the tool to be served, in catalog order.
    pub requires: &'static [&'static str],
    /// The same subsystems as a bit mask over [`SUBSYSTEMS`].
    pub requires_mask: SubsystemMask,
    /// Who may see and call the tool.
    pub exposure: Exposure,
    /// What calling the tool does to the world.
    pub side_effect_class: SideEffectClass,
    /// Whether the HTTP read token may call the tool (on top of a public exposure).
    pub http_read_role_eligible: bool,
    /// Browser tools, `vox_skill_use` and `vox_search_structural`: never for the read role.
    pub read_role_always_denied: bool,
    /// Cargo feature the tool needs, if any.
    pub feature: Option<&'static str>,
    /// False for a feature-gated tool whose feature this build lacks: listed, never served.
    pub built: bool,
}

/// One subsystem.
#[derive(Debug)]
pub struct SubsystemEntry {
    /// Snake_case id, e.g. `search_index`.
    pub id: &'static str,
    /// One-line description of what the subsystem provides.
    pub description: &'static str,
    /// The subsystems it needs booted first, as a bit mask over [`SUBSYSTEMS`].
    pub depends_mask: SubsystemMask,
    /// Names of the boot steps that start it.
    pub boot_steps: &'static [&'static str],
}

/// One boot step and the index of its subsystem in [`SUBSYSTEMS`].
#[derive(Debug)]
pub struct BootStepEntry {
    /// The step's snake_case name, e.g. `socrates_research_poller`.
    pub name: &'static str,
    /// Index in [`SUBSYSTEMS`] of the subsystem the step starts.
    pub subsystem: usize,
}

/// One compiled profile manifest.
#[derive(Debug)]
pub struct ProfileEntry {
    /// The profile id, e.g. `knowledge`.
    pub id: &'static str,
    /// One-line description shown by `vox profile list`.
    pub description: &'static str,
    /// Path of its manifest, relative to the repository root.
    pub manifest: &'static str,
    /// The tools it serves (only those this build can dispatch are ever advertised).
    pub tools: ToolSet,
    /// The subsystems its manifest requires, as a bit mask.
    pub requires_mask: SubsystemMask,
    /// The required subsystems plus their dependencies: what the daemon boots under this profile.
    pub closure_mask: SubsystemMask,
    /// The highest exposure among the tools it may serve.
    pub max_exposure: Exposure,
    /// Axis GUI view keys rendered when Axis is attached remotely.
    pub axis_surfaces: &'static [&'static str],
}

/// A set of catalog tools as a bit set over their indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ToolSet(pub [u64; TOOL_WORDS]);

impl ToolSet {
    /// Every tool this build can dispatch.
    pub fn all_built() -> Self {
        let mut s = ToolSet::default();
        for t in TOOL_REGISTRY.iter().filter(|t| t.built) {
            s.insert(t.index);
        }
        s
    }
    /// Whether the tool with this index is in the set.
    #[inline]
    pub fn contains(&self, index: usize) -> bool {
        self.0[index / 64] & (1 << (index % 64)) != 0
    }
    /// Adds the tool with this index.
    pub fn insert(&mut self, index: usize) {
        self.0[index / 64] |= 1 << (index % 64);
    }
    /// Adds every tool of `other`.
    pub fn union_with(&mut self, other: &ToolSet) {
        for (a, b) in self.0.iter_mut().zip(other.0.iter()) {
            *a |= b;
        }
    }
    /// The tools in the set, in name order.
    pub fn iter(&self) -> impl Iterator<Item = &'static ToolEntry> + '_ {
        TOOL_REGISTRY.iter().filter(|t| self.contains(t.index))
    }
}

/// Looks a catalog tool up by exact name.
#[inline]
pub fn tool_by_name(name: &str) -> Option<&'static ToolEntry> {
    tool_index(name).map(|i| &TOOL_REGISTRY[i])
}

/// The index (bit) of a subsystem by id.
pub fn subsystem_index(id: &str) -> Option<usize> {
    SUBSYSTEMS.iter().position(|s| s.id == id)
}

/// The ids of the subsystems in a mask, in contract order.
pub fn subsystem_names(mask: SubsystemMask) -> Vec<&'static str> {
    SUBSYSTEMS
        .iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, s)| s.id)
        .collect()
}

/// Every subsystem.
pub fn all_subsystems_mask() -> SubsystemMask {
    if SUBSYSTEMS.len() == 32 {
        u32::MAX
    } else {
        (1u32 << SUBSYSTEMS.len()) - 1
    }
}

/// A profile manifest by id.
pub fn profile_entry(id: &str) -> Option<&'static ProfileEntry> {
    PROFILES
        .binary_search_by(|p| p.id.cmp(id))
        .ok()
        .map(|i| &PROFILES[i])
}
