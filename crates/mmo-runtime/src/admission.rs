//! The mechanical admission decision for `agents_spawn`.
//!
//! Admission is a pure function of the resolved profile, the snapshot's effective ceilings, the
//! resource groups' capacities, and the session's live runs. Terminal, cold-paused and suspended
//! runs are simply absent from `active`, so they hold no slot: sequential delegation never
//! consumes a lifetime quota.
//!
//! Checks run in a fixed order and the first refusal is returned: the target and the caller
//! (`admission_unknown_role`, `admission_root`, `admission_caller_inactive`,
//! `admission_backend`), authority (`admission_can_spawn`, `admission_depth`,
//! `admission_ancestor_role`), the request's shape (task, task kind, literal task, write scope),
//! then capacity (role, children, agents, writers, resource group) and finally write conflicts.
//! Capacity and conflict refusals are [`AdmissionError::retryable`]: they can clear when a run
//! ends; the others cannot change within a session.
//!
//! Write scopes are lists of normalized relative paths. A path is in scope when it equals an
//! entry or lies under it as a directory (`src` holds `src/a.rs`, not `srcx`); two scopes
//! overlap when an entry of one is equal to or an ancestor of an entry of the other. An MCP
//! writer admitted without a scope (its role sets `write_scope_required = false`) claims the
//! whole tree, so under `write_conflict_policy = "reject"` it overlaps every other writer.

use mmo_profile::model::{Agent, LOW_TRUST_TASK_KINDS, LiteralTask, Profile};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// Longest write-scope entry, in bytes.
pub const MAX_SCOPE_ENTRY_BYTES: usize = 1024;
/// Most entries one write scope may hold.
pub const MAX_SCOPE_ENTRIES: usize = 256;

/// One ceiling as `ceilings.json` records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CeilingRecord {
    pub declared: u32,
    pub explicit: bool,
    pub derived: Option<u32>,
    /// The value admission enforces.
    pub effective: u32,
}

/// One resource group's fit as `ceilings.json` records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupFitRecord {
    pub capacity: u32,
    pub root_units: u32,
    pub slot_units: Vec<u32>,
    pub fitting_slots: u32,
    pub fitting_writer_slots: u32,
}

/// A snapshot's `ceilings.json`: the compiler's derived ceilings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ceilings {
    pub reachable_roles: Vec<String>,
    pub max_active_agents: CeilingRecord,
    pub max_active_writers: CeilingRecord,
    pub max_depth: CeilingRecord,
    pub native_max_concurrent_threads: u32,
    pub resource_groups: BTreeMap<String, GroupFitRecord>,
}

impl Ceilings {
    /// Parse `ceilings.json`. Unknown fields are refused: a snapshot of another shape is not
    /// read through a compatibility layer.
    pub fn from_json(text: &str) -> Result<Ceilings, serde_json::Error> {
        serde_json::from_str(text)
    }
}

/// Resource group capacities, from a snapshot's `catalog.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capacities {
    pub groups: BTreeMap<String, u32>,
}

impl Capacities {
    /// Read the `resource_groups` of `catalog.json` (`{name: {capacity, description}}`); its
    /// routes and models are not admission's business and are ignored.
    pub fn from_catalog_json(text: &str) -> Result<Capacities, serde_json::Error> {
        #[derive(Deserialize)]
        struct Group {
            capacity: u32,
        }
        #[derive(Deserialize)]
        struct CatalogGroups {
            resource_groups: BTreeMap<String, Group>,
        }
        let c: CatalogGroups = serde_json::from_str(text)?;
        Ok(Capacities {
            groups: c
                .resource_groups
                .into_iter()
                .map(|(k, g)| (k, g.capacity))
                .collect(),
        })
    }

    /// The capacity of one group.
    pub fn capacity(&self, group: &str) -> Option<u32> {
        self.groups.get(group).copied()
    }
}

/// One live (admission-holding) run of the session, the root included.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActiveRun {
    /// Opaque run reference.
    pub run: String,
    pub role: String,
    /// The run that spawned it; `None` for the root.
    pub parent: Option<String>,
    /// Root = 0.
    pub depth: u32,
    /// Roles from the root down to this run, this run's role included.
    pub lineage: Vec<String>,
    /// An MCP writer job (workspace-write participant on the mcp backend).
    pub is_writer: bool,
    pub resource_group: Option<String>,
    pub resource_units: u32,
    /// Normalized write scope; empty for read-only runs (and for an unscoped writer, which
    /// claims the whole tree).
    pub write_scope: Vec<String>,
}

impl ActiveRun {
    /// The root's entry: depth 0, its own lineage, its resource units held while it runs.
    pub fn root(profile: &Profile, run: impl Into<String>) -> ActiveRun {
        let a = profile.agents.get(&profile.root);
        ActiveRun {
            run: run.into(),
            role: profile.root.clone(),
            parent: None,
            depth: 0,
            lineage: vec![profile.root.clone()],
            is_writer: false,
            resource_group: a.and_then(|a| a.resource_group.clone()),
            resource_units: a.map_or(1, |a| a.resource_units),
            write_scope: Vec::new(),
        }
    }
}

/// What `agents_spawn` asks for.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SpawnRequest {
    pub role: String,
    pub task: Option<String>,
    pub task_kind: Option<String>,
    pub write_scope: Option<Vec<String>>,
    pub literal_task: Option<LiteralTask>,
}

/// A successful admission: what the new run holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Admitted {
    pub role: String,
    /// The caller's run.
    pub parent: String,
    pub depth: u32,
    /// The caller's lineage plus the new role.
    pub lineage: Vec<String>,
    pub is_writer: bool,
    pub resource_group: Option<String>,
    pub resource_units: u32,
    /// Normalized, sorted, without entries another entry already covers.
    pub write_scope: Vec<String>,
    /// The admitted task kind (a literal task's operation for low-trust roles).
    pub task_kind: String,
    /// Whether the task is a literal task (low-trust role).
    pub literal: bool,
}

impl Admitted {
    /// The live-run entry for this admission once the supervisor has named the run.
    pub fn into_active_run(self, run: impl Into<String>) -> ActiveRun {
        ActiveRun {
            run: run.into(),
            role: self.role,
            parent: Some(self.parent),
            depth: self.depth,
            lineage: self.lineage,
            is_writer: self.is_writer,
            resource_group: self.resource_group,
            resource_units: self.resource_units,
            write_scope: self.write_scope,
        }
    }
}

/// Why one write-scope entry (or a literal task's path) is not a normalized relative path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeError {
    pub entry: String,
    pub reason: &'static str,
}

impl fmt::Display for ScopeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` {}", self.entry.escape_debug(), self.reason)
    }
}

impl std::error::Error for ScopeError {}

/// Check one path: relative, `/`-separated, no empty, `.` or `..` component, no backslash, NUL,
/// other control character or glob metacharacter, at most [`MAX_SCOPE_ENTRY_BYTES`]. One
/// trailing `/` is dropped. Returns the normalized path.
pub fn normalize_path(entry: &str) -> Result<String, ScopeError> {
    let err = |reason| ScopeError {
        entry: entry.to_string(),
        reason,
    };
    if entry.is_empty() {
        return Err(err("is empty"));
    }
    if entry.len() > MAX_SCOPE_ENTRY_BYTES {
        return Err(err("is longer than 1024 bytes"));
    }
    if entry.contains('\0') {
        return Err(err("contains NUL"));
    }
    if entry.contains('\\') {
        return Err(err("contains a backslash (use `/`)"));
    }
    if entry.chars().any(char::is_control) {
        return Err(err("contains a control character"));
    }
    if entry
        .chars()
        .any(|c| matches!(c, '*' | '?' | '[' | ']' | '{' | '}'))
    {
        return Err(err(
            "contains a glob metacharacter (scopes are literal paths)",
        ));
    }
    if entry.starts_with('/') {
        return Err(err("is absolute"));
    }
    let trimmed = entry.strip_suffix('/').unwrap_or(entry);
    for c in trimmed.split('/') {
        match c {
            "" => return Err(err("has an empty component")),
            "." | ".." => return Err(err("has a `.` or `..` component")),
            _ => {}
        }
    }
    Ok(trimmed.to_string())
}

/// Normalize a write scope: every entry checked by [`normalize_path`], then sorted, deduplicated,
/// and entries already covered by another entry dropped (`["src", "src/a"]` is `["src"]`).
pub fn normalize_scope(entries: &[String]) -> Result<Vec<String>, ScopeError> {
    if entries.len() > MAX_SCOPE_ENTRIES {
        return Err(ScopeError {
            entry: format!("{} entries", entries.len()),
            reason: "exceed the limit of 256 entries",
        });
    }
    let mut out: Vec<String> = entries
        .iter()
        .map(|e| normalize_path(e))
        .collect::<Result<_, _>>()?;
    out.sort();
    out.dedup();
    let all = out.clone();
    out.retain(|e| !all.iter().any(|o| o != e && is_under(e, o)));
    Ok(out)
}

/// Whether normalized `path` equals `dir` or lies under it on a component boundary.
fn is_under(path: &str, dir: &str) -> bool {
    path == dir
        || (path.len() > dir.len() && path.starts_with(dir) && path.as_bytes()[dir.len()] == b'/')
}

/// Whether `path` is inside `scope`: equal to an entry or under it as a directory. A path that is
/// not a normalized relative path is never in scope.
pub fn scope_contains(scope: &[String], path: &str) -> bool {
    let Ok(path) = normalize_path(path) else {
        return false;
    };
    scope.iter().any(|e| is_under(&path, e))
}

/// Whether two scopes overlap: an entry of one equals, or is an ancestor directory of, an entry
/// of the other.
pub fn scopes_overlap(a: &[String], b: &[String]) -> bool {
    a.iter()
        .any(|x| b.iter().any(|y| is_under(x, y) || is_under(y, x)))
}

/// Every admission refusal code, each produced by a test.
pub const CODES: &[&str] = &[
    "admission_unknown_role",
    "admission_root",
    "admission_caller_inactive",
    "admission_backend",
    "admission_can_spawn",
    "admission_depth",
    "admission_ancestor_role",
    "admission_task_kind",
    "admission_task_required",
    "admission_task_length",
    "admission_low_trust_prose",
    "admission_literal_task_required",
    "admission_literal_task_low_trust_only",
    "admission_write_scope_required",
    "admission_write_scope_read_only",
    "admission_write_scope_invalid",
    "admission_max_active",
    "admission_max_children",
    "admission_max_active_agents",
    "admission_max_active_writers",
    "admission_resource_group",
    "admission_write_conflict",
];

/// A refused spawn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdmissionError {
    /// The requested role (or the caller's role) is not in the profile.
    UnknownRole {
        role: String,
    },
    /// The root is never spawned.
    Root {
        role: String,
    },
    /// The caller run is not active in this session.
    CallerInactive {
        run: String,
    },
    /// The role has no `mcp` backend, so Agent-MCP cannot run it.
    Backend {
        role: String,
        backends: Vec<String>,
    },
    CanSpawn {
        caller_role: String,
        role: String,
        allowed: Vec<String>,
    },
    Depth {
        role: String,
        depth: u32,
        max_depth: u32,
    },
    AncestorRole {
        role: String,
        lineage: Vec<String>,
    },
    TaskKind {
        role: String,
        task_kind: Option<String>,
        allowed: Vec<String>,
    },
    TaskRequired {
        role: String,
    },
    TaskLength {
        role: String,
        chars: usize,
        min: u32,
        max: u32,
    },
    /// A low-trust role was sent free-form `task` or a `task_kind`.
    LowTrustProse {
        role: String,
        field: &'static str,
    },
    LiteralTaskRequired {
        role: String,
    },
    LiteralTaskLowTrustOnly {
        role: String,
    },
    WriteScopeRequired {
        role: String,
    },
    WriteScopeReadOnly {
        role: String,
    },
    WriteScopeInvalid {
        role: String,
        error: ScopeError,
    },
    MaxActive {
        role: String,
        max: u32,
        active: u32,
        /// How many of `active` run in other sessions of the same profile id.
        elsewhere: u32,
    },
    MaxChildren {
        caller_run: String,
        caller_role: String,
        max: u32,
        active: u32,
    },
    MaxActiveAgents {
        max: u32,
        active: u32,
    },
    MaxActiveWriters {
        max: u32,
        active: u32,
    },
    ResourceGroup {
        role: String,
        group: String,
        capacity: Option<u32>,
        held: u64,
        requested: u32,
    },
    WriteConflict {
        role: String,
        run: String,
        other_role: String,
        other_scope: Vec<String>,
    },
}

impl AdmissionError {
    /// The stable snake_case id of the refused limit.
    pub fn code(&self) -> &'static str {
        use AdmissionError as E;
        match self {
            E::UnknownRole { .. } => "admission_unknown_role",
            E::Root { .. } => "admission_root",
            E::CallerInactive { .. } => "admission_caller_inactive",
            E::Backend { .. } => "admission_backend",
            E::CanSpawn { .. } => "admission_can_spawn",
            E::Depth { .. } => "admission_depth",
            E::AncestorRole { .. } => "admission_ancestor_role",
            E::TaskKind { .. } => "admission_task_kind",
            E::TaskRequired { .. } => "admission_task_required",
            E::TaskLength { .. } => "admission_task_length",
            E::LowTrustProse { .. } => "admission_low_trust_prose",
            E::LiteralTaskRequired { .. } => "admission_literal_task_required",
            E::LiteralTaskLowTrustOnly { .. } => "admission_literal_task_low_trust_only",
            E::WriteScopeRequired { .. } => "admission_write_scope_required",
            E::WriteScopeReadOnly { .. } => "admission_write_scope_read_only",
            E::WriteScopeInvalid { .. } => "admission_write_scope_invalid",
            E::MaxActive { .. } => "admission_max_active",
            E::MaxChildren { .. } => "admission_max_children",
            E::MaxActiveAgents { .. } => "admission_max_active_agents",
            E::MaxActiveWriters { .. } => "admission_max_active_writers",
            E::ResourceGroup { .. } => "admission_resource_group",
            E::WriteConflict { .. } => "admission_write_conflict",
        }
    }

    /// Same as [`AdmissionError::code`]: the limit that refused.
    pub fn limit(&self) -> &'static str {
        self.code()
    }

    /// Whether the refusal can clear within the session when another run ends (capacity and
    /// write conflicts); authority and request-shape refusals never do.
    pub fn retryable(&self) -> bool {
        use AdmissionError as E;
        matches!(
            self,
            E::MaxActive { .. }
                | E::MaxChildren { .. }
                | E::MaxActiveAgents { .. }
                | E::MaxActiveWriters { .. }
                | E::ResourceGroup { .. }
                | E::WriteConflict { .. }
        )
    }
}

fn list(v: &[String]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.iter()
            .map(|s| format!("`{s}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl fmt::Display for AdmissionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use AdmissionError as E;
        write!(f, "[{}] ", self.code())?;
        match self {
            E::UnknownRole { role } => write!(f, "role `{role}` is not in the profile"),
            E::Root { role } => write!(f, "role `{role}` is the root, which is never spawned"),
            E::CallerInactive { run } => {
                write!(f, "caller run `{run}` is not active in this session")
            }
            E::Backend { role, backends } => write!(
                f,
                "role `{role}` has backends {} and no `mcp` backend, so agents_spawn cannot run it",
                list(backends)
            ),
            E::CanSpawn {
                caller_role,
                role,
                allowed,
            } => write!(
                f,
                "role `{caller_role}` may not spawn `{role}`; its can_spawn is {}",
                list(allowed)
            ),
            E::Depth {
                role,
                depth,
                max_depth,
            } => write!(
                f,
                "spawning `{role}` would run at depth {depth}; the effective max_depth is {max_depth}"
            ),
            E::AncestorRole { role, lineage } => write!(
                f,
                "reject_ancestor_role = true and role `{role}` is already in the caller's lineage ({})",
                lineage.join(" > ")
            ),
            E::TaskKind {
                role,
                task_kind,
                allowed,
            } => match task_kind {
                Some(k) => write!(
                    f,
                    "task kind `{k}` is not in role `{role}`'s allowed_task_kinds ({})",
                    list(allowed)
                ),
                None => write!(
                    f,
                    "role `{role}` needs a task_kind from its allowed_task_kinds ({})",
                    list(allowed)
                ),
            },
            E::TaskRequired { role } => write!(f, "role `{role}` needs a task"),
            E::TaskLength {
                role,
                chars,
                min,
                max,
            } => write!(
                f,
                "the task has {chars} characters; role `{role}` has min_task_chars = {min} and max_task_chars = {max}"
            ),
            E::LowTrustProse { role, field } => write!(
                f,
                "role `{role}` has trust = \"low\" and takes only literal_task, never `{field}`"
            ),
            E::LiteralTaskRequired { role } => write!(
                f,
                "role `{role}` has trust = \"low\" and needs a literal_task"
            ),
            E::LiteralTaskLowTrustOnly { role } => write!(
                f,
                "literal_task is the low-trust form; role `{role}` takes task and task_kind"
            ),
            E::WriteScopeRequired { role } => write!(
                f,
                "role `{role}` is an MCP writer with write_scope_required = true and needs a non-empty write_scope"
            ),
            E::WriteScopeReadOnly { role } => write!(
                f,
                "role `{role}` is not an MCP writer (permissions read-only or no mcp backend) and takes no write_scope"
            ),
            E::WriteScopeInvalid { role, error } => {
                write!(f, "write_scope entry for role `{role}`: {error}")
            }
            E::MaxActive {
                role,
                max,
                active,
                elsewhere: 0,
            } => write!(
                f,
                "role `{role}` has max_active = {max} and {active} are active"
            ),
            E::MaxActive {
                role,
                max,
                active,
                elsewhere,
            } => write!(
                f,
                "role `{role}` has max_active = {max} across the sessions of its profile and {active} are active ({elsewhere} in other sessions)"
            ),
            E::MaxChildren {
                caller_run,
                caller_role,
                max,
                active,
            } => write!(
                f,
                "caller `{caller_run}` (role `{caller_role}`) has max_children = {max} and {active} children are active"
            ),
            E::MaxActiveAgents { max, active } => write!(
                f,
                "the session has max_active_agents = {max} (root included) and {active} are active"
            ),
            E::MaxActiveWriters { max, active } => write!(
                f,
                "the session has max_active_writers = {max} and {active} MCP writers are active"
            ),
            E::ResourceGroup {
                role,
                group,
                capacity,
                held,
                requested,
            } => match capacity {
                Some(c) => write!(
                    f,
                    "role `{role}` needs {requested} unit(s) of resource group `{group}`, which has capacity = {c} and {held} held"
                ),
                None => write!(
                    f,
                    "role `{role}` is bound to resource group `{group}`, which the catalog does not define"
                ),
            },
            E::WriteConflict {
                role,
                run,
                other_role,
                other_scope,
            } => write!(
                f,
                "write_conflict_policy = \"reject\" and the write scope for `{role}` overlaps active writer `{run}` (role `{other_role}`, scope {})",
                if other_scope.is_empty() {
                    "the whole tree".to_string()
                } else {
                    list(other_scope)
                }
            ),
        }
    }
}

impl std::error::Error for AdmissionError {}

/// Everything admission reads that does not change during a session.
#[derive(Debug, Clone, Copy)]
pub struct Policy<'a> {
    pub profile: &'a Profile,
    pub ceilings: &'a Ceilings,
    pub capacities: &'a Capacities,
    /// Active runs per role in the other live sessions of the same profile id: `max_active`
    /// counts instances across the stable profile id, not per session.
    pub elsewhere: &'a BTreeMap<String, u32>,
}

/// No other session runs anything.
pub static NOWHERE_ELSE: BTreeMap<String, u32> = BTreeMap::new();

/// Whether `role` is an MCP writer: a workspace-write participant with an `mcp` backend.
pub fn is_mcp_writer(agent: &Agent) -> bool {
    agent.kind != "root"
        && agent.permissions == "workspace-write"
        && agent.backends.iter().any(|b| b == "mcp")
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Decide one `agents_spawn`: `caller` is the run reference of the spawning run, which must be
/// in `active`.
pub fn admit(
    policy: &Policy<'_>,
    active: &[ActiveRun],
    caller: &str,
    req: &SpawnRequest,
) -> Result<Admitted, AdmissionError> {
    use AdmissionError as E;
    let p = policy.profile;
    let role = req.role.as_str();
    let Some(target) = p.agents.get(role) else {
        return Err(E::UnknownRole { role: role.into() });
    };
    if role == p.root || target.kind == "root" {
        return Err(E::Root { role: role.into() });
    }
    let Some(caller_run) = active.iter().find(|r| r.run == caller) else {
        return Err(E::CallerInactive { run: caller.into() });
    };
    let Some(caller_agent) = p.agents.get(&caller_run.role) else {
        return Err(E::UnknownRole {
            role: caller_run.role.clone(),
        });
    };
    if !target.backends.iter().any(|b| b == "mcp") {
        return Err(E::Backend {
            role: role.into(),
            backends: target.backends.clone(),
        });
    }

    // Authority.
    if !caller_agent.can_spawn.iter().any(|c| c == role) {
        return Err(E::CanSpawn {
            caller_role: caller_run.role.clone(),
            role: role.into(),
            allowed: caller_agent.can_spawn.clone(),
        });
    }
    let depth = caller_run.depth + 1;
    let max_depth = policy.ceilings.max_depth.effective;
    if depth > max_depth {
        return Err(E::Depth {
            role: role.into(),
            depth,
            max_depth,
        });
    }
    let mut lineage = caller_run.lineage.clone();
    if lineage.last() != Some(&caller_run.role) {
        lineage.push(caller_run.role.clone());
    }
    if p.coordination.reject_ancestor_role && lineage.iter().any(|r| r == role) {
        return Err(E::AncestorRole {
            role: role.into(),
            lineage,
        });
    }

    // The request's shape.
    let task_kind = check_task(role, target, req)?;
    let is_writer = is_mcp_writer(target);
    let write_scope = match &req.write_scope {
        Some(s) if !is_writer && !s.is_empty() => {
            return Err(E::WriteScopeReadOnly { role: role.into() });
        }
        Some(s) => normalize_scope(s).map_err(|error| E::WriteScopeInvalid {
            role: role.into(),
            error,
        })?,
        None => Vec::new(),
    };
    if target.requires_write_scope() && write_scope.is_empty() {
        return Err(E::WriteScopeRequired { role: role.into() });
    }

    // Capacity.
    let elsewhere = policy.elsewhere.get(role).copied().unwrap_or(0);
    let same_role =
        count(active.iter().filter(|r| r.role == role).count()).saturating_add(elsewhere);
    if same_role + 1 > target.max_active {
        return Err(E::MaxActive {
            role: role.into(),
            max: target.max_active,
            active: same_role,
            elsewhere,
        });
    }
    let children = count(
        active
            .iter()
            .filter(|r| r.parent.as_deref() == Some(caller))
            .count(),
    );
    if children + 1 > caller_agent.max_children {
        return Err(E::MaxChildren {
            caller_run: caller.into(),
            caller_role: caller_run.role.clone(),
            max: caller_agent.max_children,
            active: children,
        });
    }
    let agents = count(active.len());
    let max_agents = policy.ceilings.max_active_agents.effective;
    if agents + 1 > max_agents {
        return Err(E::MaxActiveAgents {
            max: max_agents,
            active: agents,
        });
    }
    if is_writer {
        let writers = count(active.iter().filter(|r| r.is_writer).count());
        let max_writers = policy.ceilings.max_active_writers.effective;
        if writers + 1 > max_writers {
            return Err(E::MaxActiveWriters {
                max: max_writers,
                active: writers,
            });
        }
    }
    if let Some(group) = &target.resource_group {
        let held: u64 = active
            .iter()
            .filter(|r| r.resource_group.as_ref() == Some(group))
            .map(|r| u64::from(r.resource_units))
            .sum();
        let capacity = policy.capacities.capacity(group);
        if capacity.is_none_or(|c| held + u64::from(target.resource_units) > u64::from(c)) {
            return Err(E::ResourceGroup {
                role: role.into(),
                group: group.clone(),
                capacity,
                held,
                requested: target.resource_units,
            });
        }
    }

    // Conflicts with active writers.
    if is_writer && p.coordination.write_conflict_policy == "reject" {
        for other in active.iter().filter(|r| r.is_writer) {
            // An unscoped writer claims the whole tree.
            if write_scope.is_empty()
                || other.write_scope.is_empty()
                || scopes_overlap(&write_scope, &other.write_scope)
            {
                return Err(E::WriteConflict {
                    role: role.into(),
                    run: other.run.clone(),
                    other_role: other.role.clone(),
                    other_scope: other.write_scope.clone(),
                });
            }
        }
    }

    lineage.push(role.into());
    Ok(Admitted {
        role: role.into(),
        parent: caller.into(),
        depth,
        lineage,
        is_writer,
        resource_group: target.resource_group.clone(),
        resource_units: target.resource_units,
        write_scope,
        task_kind,
        literal: req.literal_task.is_some(),
    })
}

/// Check task, task kind and literal task against the target role; returns the task kind.
fn check_task(role: &str, target: &Agent, req: &SpawnRequest) -> Result<String, AdmissionError> {
    use AdmissionError as E;
    if target.trust == "low" {
        if req.task.is_some() {
            return Err(E::LowTrustProse {
                role: role.into(),
                field: "task",
            });
        }
        if req.task_kind.is_some() {
            return Err(E::LowTrustProse {
                role: role.into(),
                field: "task_kind",
            });
        }
        let Some(lt) = &req.literal_task else {
            return Err(E::LiteralTaskRequired { role: role.into() });
        };
        if !LOW_TRUST_TASK_KINDS.contains(&lt.operation.as_str())
            || !target.allowed_task_kinds.contains(&lt.operation)
        {
            return Err(E::TaskKind {
                role: role.into(),
                task_kind: Some(lt.operation.clone()),
                allowed: target.allowed_task_kinds.clone(),
            });
        }
        return Ok(lt.operation.clone());
    }
    if req.literal_task.is_some() {
        return Err(E::LiteralTaskLowTrustOnly { role: role.into() });
    }
    let kind = match &req.task_kind {
        Some(k) if target.allowed_task_kinds.contains(k) => k.clone(),
        other => {
            return Err(E::TaskKind {
                role: role.into(),
                task_kind: other.clone(),
                allowed: target.allowed_task_kinds.clone(),
            });
        }
    };
    let Some(task) = &req.task else {
        return Err(E::TaskRequired { role: role.into() });
    };
    let chars = task.chars().count();
    if chars < target.min_task_chars as usize || chars > target.max_task_chars as usize {
        return Err(E::TaskLength {
            role: role.into(),
            chars,
            min: target.min_task_chars,
            max: target.max_task_chars,
        });
    }
    Ok(kind)
}

#[cfg(test)]
mod tests;
