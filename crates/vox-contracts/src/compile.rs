//! Validation of the contracts as a whole, producing the data the registry's tables are made of.

use crate::{
    Catalog, CatalogTool, ContractError, Exposure, ProfileManifest, SideEffectClass, Subsystem,
    Subsystems, load_catalog, load_profiles, load_subsystems,
};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The most subsystems a registry can hold (they are bits of a `u32` mask).
pub const MAX_SUBSYSTEMS: usize = 32;

/// Tools the read role may never call, whatever the catalog says (capability-profiles spec).
pub fn read_role_always_denied(name: &str) -> bool {
    name.starts_with("vox_browser_") || name == "vox_skill_use" || name == "vox_search_structural"
}

/// A catalog row with its resolved subsystem mask and whether this build can dispatch it.
#[derive(Debug, Clone)]
pub struct CompiledTool {
    /// The catalog row as written.
    pub row: CatalogTool,
    /// Bit mask of the subsystems in `row.requires` (bit i = i-th subsystem of the contract).
    pub requires_mask: u32,
    /// Whether this build can dispatch the tool: false when its `feature` is not enabled.
    pub built: bool,
}

/// A profile manifest with its tool set expanded and its subsystem closure computed.
#[derive(Debug, Clone)]
pub struct CompiledProfile {
    /// The profile's id (its manifest's `id`, e.g. `knowledge`).
    pub id: String,
    /// One-line description from the manifest.
    pub description: String,
    /// The manifest file it was read from.
    pub path: PathBuf,
    /// Indices into [`CompiledRegistry::tools`], ascending.
    pub tools: Vec<usize>,
    /// Bit mask of the subsystems the manifest's `requires` lists.
    pub requires_mask: u32,
    /// `requires_mask` plus every subsystem those depend on, transitively: what the daemon boots.
    pub closure_mask: u32,
    /// The highest exposure a tool may have to be in the profile; tools above it are clipped.
    pub max_exposure: Exposure,
    /// Axis GUI view keys the profile renders when Axis is attached remotely.
    pub axis_surfaces: Vec<String>,
}

/// Something legal but probably unintended, such as a prefix that matches no tool yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// The contract file the warning is about.
    pub path: PathBuf,
    /// The entry in it, e.g. a `tools.include` prefix or an `include_lanes` lane.
    pub entry: String,
    /// What looks unintended about it.
    pub message: String,
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {}: {}",
            self.path.display(),
            self.entry,
            self.message
        )
    }
}

/// The validated contracts.
#[derive(Debug, Clone)]
pub struct CompiledRegistry {
    /// Sorted by name; a tool's index is its position.
    pub tools: Vec<CompiledTool>,
    /// In file order; a subsystem's bit is its position.
    pub subsystems: Vec<Subsystem>,
    /// Boot steps in the fixed order, with the index of the subsystem each belongs to.
    pub boot_steps: Vec<(String, usize)>,
    /// Sorted by id; `dev` is synthesized by the registry, not listed here.
    pub profiles: Vec<CompiledProfile>,
    /// Legal but suspicious entries (prefixes or lanes that match no tool yet), for the build to
    /// print.
    pub warnings: Vec<Warning>,
}

/// Loads every contract under `contracts` and validates them together.
pub fn load_and_compile(
    contracts: &Path,
    feature_enabled: &dyn Fn(&str) -> bool,
) -> Result<CompiledRegistry, ContractError> {
    let catalog = load_catalog(contracts)?;
    let subsystems = load_subsystems(contracts)?;
    let profiles = load_profiles(contracts)?;
    compile(contracts, catalog, subsystems, profiles, feature_enabled)
}

fn invalid(path: &Path, entry: impl Into<String>, message: impl Into<String>) -> ContractError {
    ContractError::Invalid {
        path: path.to_owned(),
        entry: entry.into(),
        message: message.into(),
    }
}

/// Validates already-parsed contracts; `contracts` is the directory used in messages.
pub fn compile(
    contracts: &Path,
    catalog: Catalog,
    subsystems: Subsystems,
    profiles: Vec<(PathBuf, ProfileManifest)>,
    feature_enabled: &dyn Fn(&str) -> bool,
) -> Result<CompiledRegistry, ContractError> {
    let sub_path = contracts.join("subsystems.v1.yaml");
    let cat_path = contracts.join("operations/catalog.v1.yaml");
    let (sub_index, boot_steps) = check_subsystems(&sub_path, &subsystems)?;
    let mask_of = |path: &Path, entry: &str, ids: &[String]| -> Result<u32, ContractError> {
        let mut mask = 0u32;
        for id in ids {
            let bit = sub_index
                .get(id.as_str())
                .ok_or_else(|| invalid(path, entry, format!("unknown subsystem `{id}`")))?;
            mask |= 1 << bit;
        }
        Ok(mask)
    };

    if catalog.version != 1 {
        return Err(invalid(&cat_path, "version", "must be 1"));
    }
    let mut tools = Vec::with_capacity(catalog.tools.len());
    let mut seen = BTreeSet::new();
    for row in catalog.tools {
        let entry = format!("tool {}", row.name);
        check_tool_row(&cat_path, &entry, &row)?;
        if !seen.insert(row.name.clone()) {
            return Err(invalid(&cat_path, entry, "duplicate tool name"));
        }
        let requires_mask = mask_of(&cat_path, &entry, &row.requires)?;
        let built = row.feature.as_deref().is_none_or(feature_enabled);
        tools.push(CompiledTool {
            row,
            requires_mask,
            built,
        });
    }
    tools.sort_by(|a, b| a.row.name.cmp(&b.row.name));

    let closure = |mask: u32| closure_of(mask, &subsystems.subsystems, &sub_index);
    let mut warnings = Vec::new();
    let mut compiled_profiles = Vec::new();
    let mut ids = BTreeSet::new();
    for (path, m) in profiles {
        let expected = format!("{}.v1.yaml", m.id);
        if path.file_name().and_then(|n| n.to_str()) != Some(expected.as_str()) {
            return Err(invalid(
                &path,
                "id",
                format!("profile `{}` must live in {expected}", m.id),
            ));
        }
        if m.id == "dev" {
            return Err(invalid(
                &path,
                "id",
                "`dev` is synthesized and must not have a manifest",
            ));
        }
        if !valid_profile_id(&m.id) {
            return Err(invalid(
                &path,
                "id",
                "profile ids are lowercase letters, digits and `-`",
            ));
        }
        if !ids.insert(m.id.clone()) {
            return Err(invalid(
                &path,
                "id",
                format!("duplicate profile `{}`", m.id),
            ));
        }
        let requires_mask = mask_of(&path, "requires", &m.requires)?;
        let closure_mask = closure(requires_mask);
        let mut chosen = BTreeSet::new();
        for pattern in &m.tools.include {
            let entry = format!("tools.include `{pattern}`");
            if let Some(prefix) = pattern.strip_suffix('*') {
                if prefix.contains('*') {
                    return Err(invalid(&path, entry, "only a trailing `*` is allowed"));
                }
                let matched: Vec<usize> = (0..tools.len())
                    .filter(|&i| tools[i].row.name.starts_with(prefix))
                    .collect();
                if matched.is_empty() {
                    warnings.push(Warning {
                        path: path.clone(),
                        entry,
                        message: "prefix matches no catalog tool yet".into(),
                    });
                }
                chosen.extend(
                    matched
                        .into_iter()
                        .filter(|&i| tools[i].row.exposure <= m.max_exposure),
                );
            } else {
                let i = tools
                    .binary_search_by(|t| t.row.name.as_str().cmp(pattern))
                    .map_err(|_| invalid(&path, &entry, "unknown tool"))?;
                if tools[i].row.exposure > m.max_exposure {
                    return Err(invalid(
                        &path,
                        entry,
                        format!(
                            "tool exposure `{}` is above the profile's max_exposure `{}`",
                            tools[i].row.exposure.as_str(),
                            m.max_exposure.as_str()
                        ),
                    ));
                }
                chosen.insert(i);
            }
        }
        for lane in &m.include_lanes {
            let matched: Vec<usize> = (0..tools.len())
                .filter(|&i| &tools[i].row.lane == lane)
                .collect();
            if matched.is_empty() {
                warnings.push(Warning {
                    path: path.clone(),
                    entry: format!("include_lanes `{lane}`"),
                    message: "lane has no catalog tool yet".into(),
                });
            }
            chosen.extend(
                matched
                    .into_iter()
                    .filter(|&i| tools[i].row.exposure <= m.max_exposure),
            );
        }
        for &i in &chosen {
            let t = &tools[i];
            let missing = t.requires_mask & !closure_mask;
            if missing != 0 {
                let names: Vec<&str> = (0..subsystems.subsystems.len())
                    .filter(|b| missing & (1 << b) != 0)
                    .map(|b| subsystems.subsystems[b].id.as_str())
                    .collect();
                return Err(invalid(
                    &path,
                    format!("tool {}", t.row.name),
                    format!(
                        "requires subsystem(s) {} not covered by the profile's closure",
                        names.join(", ")
                    ),
                ));
            }
        }
        compiled_profiles.push(CompiledProfile {
            id: m.id,
            description: m.description,
            path,
            tools: chosen.into_iter().collect(),
            requires_mask,
            closure_mask,
            max_exposure: m.max_exposure,
            axis_surfaces: m.axis_surfaces,
        });
    }
    compiled_profiles.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(CompiledRegistry {
        tools,
        subsystems: subsystems.subsystems,
        boot_steps,
        profiles: compiled_profiles,
        warnings,
    })
}

fn valid_profile_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

fn check_tool_row(path: &Path, entry: &str, row: &CatalogTool) -> Result<(), ContractError> {
    let name_ok = row.name.len() <= 64
        && row.name.starts_with("vox_")
        && row
            .name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if !name_ok {
        return Err(invalid(
            path,
            entry,
            "tool names match ^vox_[a-z0-9_]+$ and have at most 64 characters",
        ));
    }
    if row.title.trim().is_empty()
        || row.description.trim().is_empty()
        || row.lane.trim().is_empty()
    {
        return Err(invalid(
            path,
            entry,
            "title, description and lane must not be empty",
        ));
    }
    if row.http_read_role_eligible && row.side_effect_class != SideEffectClass::ReadOnly {
        return Err(invalid(
            path,
            entry,
            "a tool that is not read_only cannot be http_read_role_eligible",
        ));
    }
    if row.http_read_role_eligible && read_role_always_denied(&row.name) {
        return Err(invalid(
            path,
            entry,
            "this tool is always denied to the read role and cannot be eligible",
        ));
    }
    if row.http_read_role_eligible && row.exposure != Exposure::Public {
        return Err(invalid(
            path,
            entry,
            "only public tools can be http_read_role_eligible",
        ));
    }
    Ok(())
}

type SubsystemIndex<'a> = BTreeMap<&'a str, usize>;

fn check_subsystems<'a>(
    path: &Path,
    s: &'a Subsystems,
) -> Result<(SubsystemIndex<'a>, Vec<(String, usize)>), ContractError> {
    if s.version != 1 {
        return Err(invalid(path, "version", "must be 1"));
    }
    if s.subsystems.len() > MAX_SUBSYSTEMS {
        return Err(invalid(
            path,
            "subsystems",
            format!("at most {MAX_SUBSYSTEMS} subsystems"),
        ));
    }
    let mut index = BTreeMap::new();
    for (i, sub) in s.subsystems.iter().enumerate() {
        if index.insert(sub.id.as_str(), i).is_some() {
            return Err(invalid(
                path,
                format!("subsystem {}", sub.id),
                "duplicate id",
            ));
        }
    }
    let mut step_owner = BTreeMap::new();
    for (i, sub) in s.subsystems.iter().enumerate() {
        for dep in &sub.depends_on {
            if !index.contains_key(dep.as_str()) {
                return Err(invalid(
                    path,
                    format!("subsystem {}", sub.id),
                    format!("unknown dependency `{dep}`"),
                ));
            }
        }
        if sub.boot_steps.is_empty() {
            return Err(invalid(
                path,
                format!("subsystem {}", sub.id),
                "needs at least one boot step",
            ));
        }
        for step in &sub.boot_steps {
            if step_owner.insert(step.as_str(), i).is_some() {
                return Err(invalid(
                    path,
                    format!("subsystem {}", sub.id),
                    format!("boot step `{step}` is claimed twice"),
                ));
            }
        }
    }
    // Dependencies must form a DAG, or the closure and the boot order would be ill-defined.
    for (i, sub) in s.subsystems.iter().enumerate() {
        let mut stack: Vec<usize> = sub.depends_on.iter().map(|d| index[d.as_str()]).collect();
        let mut seen = BTreeSet::new();
        while let Some(j) = stack.pop() {
            if j == i {
                return Err(invalid(
                    path,
                    format!("subsystem {}", sub.id),
                    "dependency cycle",
                ));
            }
            if seen.insert(j) {
                stack.extend(s.subsystems[j].depends_on.iter().map(|d| index[d.as_str()]));
            }
        }
    }
    let mut steps = Vec::new();
    let mut placed = BTreeSet::new();
    for step in &s.boot_order {
        let owner = *step_owner.get(step.as_str()).ok_or_else(|| {
            invalid(
                path,
                format!("boot_order `{step}`"),
                "no subsystem declares this step",
            )
        })?;
        if !placed.insert(step.as_str()) {
            return Err(invalid(
                path,
                format!("boot_order `{step}`"),
                "listed twice",
            ));
        }
        steps.push((step.clone(), owner));
    }
    if let Some(missing) = step_owner.keys().find(|k| !placed.contains(*k)) {
        return Err(invalid(
            path,
            format!("boot step `{missing}`"),
            "missing from boot_order",
        ));
    }
    // A dependency's steps must run before its dependents' steps.
    let first_step: BTreeMap<usize, usize> = steps
        .iter()
        .enumerate()
        .rev()
        .map(|(pos, (_, o))| (*o, pos))
        .collect();
    for (i, sub) in s.subsystems.iter().enumerate() {
        for dep in &sub.depends_on {
            let d = index[dep.as_str()];
            let last_dep = steps.iter().rposition(|(_, o)| *o == d).unwrap_or(0);
            if last_dep > first_step[&i] {
                return Err(invalid(
                    path,
                    format!("subsystem {}", sub.id),
                    format!("boot_order runs it before its dependency `{dep}`"),
                ));
            }
        }
    }
    Ok((index, steps))
}

fn closure_of(mask: u32, subs: &[Subsystem], index: &SubsystemIndex<'_>) -> u32 {
    let mut closure = mask;
    loop {
        let mut next = closure;
        for (i, sub) in subs.iter().enumerate() {
            if closure & (1 << i) != 0 {
                for d in &sub.depends_on {
                    next |= 1 << index[d.as_str()];
                }
            }
        }
        if next == closure {
            return closure;
        }
        closure = next;
    }
}
