//! The static registry of vox's tool surface and the one authorization function.
//!
//! `build.rs` compiles `contracts/` into [`TOOL_REGISTRY`], [`SUBSYSTEMS`], [`BOOT_STEPS`] and
//! [`PROFILES`]. [`ProfileSet`] composes profiles; [`authorize_tool`] decides every call on every
//! transport, and [`visible_tools`] is defined through it so that listing and calling agree.

pub use vox_contracts::{Exposure, SideEffectClass};

mod authorize;
mod profile;

pub use authorize::{Caller, Denial, DenialCode, Role, authorize_tool, visible_tools};
pub use profile::{DEV, ProfileError, ProfileSet};

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
    pub index: usize,
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub lane: &'static str,
    pub requires: &'static [&'static str],
    pub requires_mask: SubsystemMask,
    pub exposure: Exposure,
    pub side_effect_class: SideEffectClass,
    pub http_read_role_eligible: bool,
    /// Browser tools, `vox_skill_use` and `vox_search_structural`: never for the read role.
    pub read_role_always_denied: bool,
    pub feature: Option<&'static str>,
    /// False for a feature-gated tool whose feature this build lacks: listed, never served.
    pub built: bool,
}

/// One subsystem.
#[derive(Debug)]
pub struct SubsystemEntry {
    pub id: &'static str,
    pub description: &'static str,
    pub depends_mask: SubsystemMask,
    pub boot_steps: &'static [&'static str],
}

/// One boot step and the index of its subsystem in [`SUBSYSTEMS`].
#[derive(Debug)]
pub struct BootStepEntry {
    pub name: &'static str,
    pub subsystem: usize,
}

/// One compiled profile manifest.
#[derive(Debug)]
pub struct ProfileEntry {
    pub id: &'static str,
    pub description: &'static str,
    pub manifest: &'static str,
    pub tools: ToolSet,
    pub requires_mask: SubsystemMask,
    pub closure_mask: SubsystemMask,
    pub max_exposure: Exposure,
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
