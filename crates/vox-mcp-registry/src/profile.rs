//! Profile selection and composition: union of tools and closures, maximum exposure, canonical ids.

use crate::upstream::UpstreamSelection;
use crate::{Exposure, PROFILES, SubsystemMask, ToolSet, all_subsystems_mask, profile_entry};

/// The synthesized profile that serves everything.
pub const DEV: &str = "dev";

/// A `--profile` / `VOX_PROFILE` value that names no manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProfileError {
    /// An id in the list is neither `dev` nor a manifest's id.
    Unknown {
        /// The id as given.
        id: String,
    },
    /// The list has no id at all (empty, or only commas and spaces).
    Empty,
}

impl std::error::Error for ProfileError {}

impl std::fmt::Display for ProfileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProfileError::Unknown { id } => {
                let known: Vec<&str> = std::iter::once(DEV)
                    .chain(PROFILES.iter().map(|p| p.id))
                    .chain(
                        crate::workspace::workspace_profiles()
                            .into_iter()
                            .map(|p| p.id),
                    )
                    .collect();
                write!(f, "unknown profile `{id}` (known: {})", known.join(", "))
            }
            ProfileError::Empty => write!(f, "empty profile list"),
        }
    }
}

/// A composed, canonical set of profiles: the slice of the surface a server serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileSet {
    ids: Vec<&'static str>,
    canonical: String,
    tools: ToolSet,
    requires_mask: SubsystemMask,
    closure_mask: SubsystemMask,
    max_exposure: Exposure,
    /// When set, the read role may call only these tools (`VOX_MCP_HTTP_READ_ROLE_ALLOWED_TOOLS`).
    read_role_tools: Option<ToolSet>,
    /// The upstream servers' tools it serves.
    upstream: UpstreamSelection,
    /// The highest exposure of an upstream tool it serves (`public` for an agent, a model, a
    /// mesh node).
    upstream_max_exposure: Exposure,
}

impl ProfileSet {
    /// The synthesized `dev` profile: every built tool, every subsystem, exposure up to internal.
    pub fn dev() -> Self {
        ProfileSet {
            ids: vec![DEV],
            canonical: DEV.to_owned(),
            tools: ToolSet::all_built(),
            requires_mask: all_subsystems_mask(),
            closure_mask: all_subsystems_mask(),
            max_exposure: Exposure::Internal,
            read_role_tools: None,
            upstream: UpstreamSelection::all(),
            upstream_max_exposure: Exposure::Internal,
        }
    }

    /// Parses a comma-separated list of profile ids and composes them.
    pub fn parse(spec: &str) -> Result<Self, ProfileError> {
        let ids: Vec<&str> = spec
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        if ids.is_empty() {
            return Err(ProfileError::Empty);
        }
        Self::compose(&ids)
    }

    /// Composes profiles by id; any list containing `dev` is `dev`.
    pub fn compose(ids: &[&str]) -> Result<Self, ProfileError> {
        let mut entries = Vec::with_capacity(ids.len());
        let mut upstream = UpstreamSelection::none();
        let mut dev = false;
        for id in ids {
            if *id == DEV {
                dev = true;
            } else if let Some(e) = profile_entry(id) {
                entries.push(e);
            } else if let Some((e, patterns)) = crate::workspace::workspace_entry(id) {
                entries.push(e);
                upstream = upstream.union(&UpstreamSelection::any_of(patterns.to_vec()));
            } else {
                return Err(ProfileError::Unknown {
                    id: (*id).to_owned(),
                });
            }
        }
        if dev {
            return Ok(Self::dev());
        }
        if entries.is_empty() {
            return Err(ProfileError::Empty);
        }
        entries.sort_by_key(|e| e.id);
        entries.dedup_by_key(|e| e.id);
        let mut set = ProfileSet {
            ids: entries.iter().map(|e| e.id).collect(),
            canonical: String::new(),
            tools: ToolSet::default(),
            requires_mask: 0,
            closure_mask: 0,
            max_exposure: Exposure::Public,
            read_role_tools: None,
            upstream,
            upstream_max_exposure: Exposure::Public,
        };
        for e in &entries {
            set.tools.union_with(&e.tools);
            set.requires_mask |= e.requires_mask;
            set.closure_mask |= e.closure_mask;
            set.max_exposure = set.max_exposure.max(e.max_exposure);
        }
        // Composition takes the highest exposure, for upstream tools as for the catalog's.
        set.upstream_max_exposure = set.max_exposure;
        // Feature-gated tools stay in manifests but are served only when built.
        let built = ToolSet::all_built();
        for (w, b) in set.tools.0.iter_mut().zip(built.0.iter()) {
            *w &= b;
        }
        set.canonical = set.ids.join(",");
        Ok(set)
    }

    /// The canonical form: sorted, de-duplicated ids joined by `,` (or `dev`).
    pub fn canonical(&self) -> &str {
        &self.canonical
    }
    /// The composed profile ids.
    pub fn ids(&self) -> &[&'static str] {
        &self.ids
    }
    /// Whether this is the synthesized `dev` profile.
    pub fn is_dev(&self) -> bool {
        self.ids == [DEV]
    }
    /// The tools the profile serves (before per-caller and boot checks).
    pub fn tools(&self) -> &ToolSet {
        &self.tools
    }
    /// The subsystems the manifests require.
    pub fn requires_mask(&self) -> SubsystemMask {
        self.requires_mask
    }
    /// `requires` plus every transitive dependency: what the daemon boots.
    pub fn closure_mask(&self) -> SubsystemMask {
        self.closure_mask
    }
    /// Its tools of `public` exposure: what an agent, or another mesh node, is offered of it
    /// (operator and internal tools are a person's).
    pub fn public_tools(&self) -> ToolSet {
        let mut public = ToolSet::default();
        for t in self.tools.iter() {
            if t.exposure == Exposure::Public {
                public.insert(t.index);
            }
        }
        public
    }
    /// The same profile served only for the catalog tools in `allow` (an HTTP allowlist of
    /// catalog names): the intersection, with the same canonical id, and no upstream tool.
    pub fn restricted(&self, allow: &ToolSet) -> Self {
        let mut p = self.clone();
        for (w, a) in p.tools.0.iter_mut().zip(allow.0.iter()) {
            *w &= a;
        }
        p.upstream = UpstreamSelection::none();
        p
    }
    /// The same profile less a person's tools, catalog and upstream: what an agent, a model
    /// or another mesh node may be offered of it.
    pub fn public_only(&self) -> Self {
        let mut p = self.restricted(&self.public_tools());
        p.upstream = self.upstream.clone();
        p.upstream_max_exposure = Exposure::Public;
        p
    }
    /// What both serve (catalog and upstream tools), with this one's id and read-role list.
    pub fn intersect(&self, other: &ProfileSet) -> Self {
        let mut p = self.restricted(other.tools());
        p.upstream = self.upstream.intersect(&other.upstream);
        p.upstream_max_exposure = self.upstream_max_exposure.min(other.upstream_max_exposure);
        p
    }
    /// The upstream tools it serves.
    pub fn upstream(&self) -> &UpstreamSelection {
        &self.upstream
    }
    /// The highest exposure of an upstream tool it serves.
    pub fn upstream_max_exposure(&self) -> Exposure {
        self.upstream_max_exposure
    }
    /// Narrows what the read role may call, on top of read-role eligibility.
    pub fn with_read_role_tools(mut self, tools: ToolSet) -> Self {
        self.read_role_tools = Some(tools);
        self
    }
    /// The read role's extra allowlist, if any.
    pub fn read_role_tools(&self) -> Option<&ToolSet> {
        self.read_role_tools.as_ref()
    }
    /// The highest exposure any composed profile allows.
    pub fn max_exposure(&self) -> Exposure {
        self.max_exposure
    }
}
