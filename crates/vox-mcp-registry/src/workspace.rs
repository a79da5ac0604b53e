//! A workspace's own profiles (`.vox/profiles/<id>.v1.yaml`, the manifest format of
//! `contracts/profiles/`): compiled at start with the build's rules (an unknown tool, server or
//! subsystem is an error naming the file and the entry), and installed once per process so
//! that every profile id a daemon, a gateway, a trust list or an agent names composes alike.
//! They may include upstream servers' tools: `<server>__*` or one `<server>__<tool>`.

use crate::upstream::UpstreamPattern;
use crate::{
    PROFILES, ProfileEntry, SUBSYSTEMS, SubsystemMask, TOOL_REGISTRY, ToolSet, subsystem_index,
};
use std::path::Path;
use std::sync::RwLock;
use vox_contracts::ProfileManifest;

/// One compiled workspace profile: its entry (as a manifest of the build's would be) and the
/// upstream tools it includes.
#[derive(Debug)]
pub struct WorkspaceProfile {
    /// The compiled manifest.
    pub entry: ProfileEntry,
    /// The upstream tools it serves.
    pub upstream: Vec<UpstreamPattern>,
}

type Installed = Vec<(&'static ProfileEntry, &'static [UpstreamPattern])>;

/// The installed workspace profiles (a process serves one workspace).
static INSTALLED: RwLock<Installed> = RwLock::new(Vec::new());

/// Reads and compiles every `<vox_dir>/profiles/*.v1.yaml`; `servers` are the upstream
/// server ids the workspace declares. No directory: none.
pub fn load_workspace_profiles(
    vox_dir: &Path,
    servers: &[String],
) -> Result<Vec<WorkspaceProfile>, String> {
    if !vox_dir.join("profiles").is_dir() {
        return Ok(Vec::new());
    }
    let manifests = vox_contracts::load_profiles(vox_dir).map_err(|e| e.to_string())?;
    manifests
        .iter()
        .map(|(path, m)| compile_workspace_profile(path, m, servers))
        .collect()
}

/// Compiles one workspace manifest (`path` names it in errors).
pub fn compile_workspace_profile(
    path: &Path,
    m: &ProfileManifest,
    servers: &[String],
) -> Result<WorkspaceProfile, String> {
    let shown = path.display();
    let fail = |entry: &str, message: String| format!("{shown}: {entry}: {message}");
    let stem = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".v1.yaml"))
        .unwrap_or("");
    if m.id != stem {
        return Err(fail(
            "id",
            format!("`{}` does not match the file name `{stem}.v1.yaml`", m.id),
        ));
    }
    let id_ok = m.id.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
        && m.id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && m.id.len() <= 48;
    if !id_ok {
        return Err(fail(
            "id",
            format!("`{}`: lower-case letters, digits and `-` only", m.id),
        ));
    }
    if m.id == crate::DEV || PROFILES.iter().any(|p| p.id == m.id) {
        return Err(fail("id", format!("`{}` is a standard profile's id", m.id)));
    }
    let mut requires_mask: SubsystemMask = 0;
    for r in &m.requires {
        let b = subsystem_index(r)
            .ok_or_else(|| fail("requires", format!("unknown subsystem `{r}`")))?;
        requires_mask |= 1 << b;
    }
    let mut tools = ToolSet::default();
    let mut upstream = Vec::new();
    for pattern in &m.tools.include {
        let entry = format!("tools.include `{pattern}`");
        if pattern.contains(crate::SEPARATOR) {
            let p = UpstreamPattern::parse(pattern)
                .ok_or_else(|| fail(&entry, "not `<server>__*` or `<server>__<tool>`".into()))?;
            if !servers.iter().any(|s| s == p.server()) {
                return Err(fail(
                    &entry,
                    format!(
                        "no upstream server `{}` is declared (.vox/servers.toml, ~/.vox/servers.toml)",
                        p.server()
                    ),
                ));
            }
            upstream.push(p);
            continue;
        }
        let matched: Vec<usize> = match pattern.strip_suffix('*') {
            Some(prefix) if !prefix.contains('*') => TOOL_REGISTRY
                .iter()
                .filter(|t| t.name.starts_with(prefix) && t.exposure <= m.max_exposure)
                .map(|t| t.index)
                .collect(),
            Some(_) => return Err(fail(&entry, "only a trailing `*` is allowed".into())),
            None => {
                let t = crate::tool_by_name(pattern)
                    .ok_or_else(|| fail(&entry, "unknown tool".into()))?;
                if t.exposure > m.max_exposure {
                    return Err(fail(
                        &entry,
                        format!(
                            "tool exposure `{}` is above max_exposure `{}`",
                            t.exposure.as_str(),
                            m.max_exposure.as_str()
                        ),
                    ));
                }
                vec![t.index]
            }
        };
        if matched.is_empty() {
            return Err(fail(&entry, "matches no catalog tool".into()));
        }
        matched.into_iter().for_each(|i| tools.insert(i));
    }
    for lane in &m.include_lanes {
        let before = tools.iter().count();
        for t in TOOL_REGISTRY
            .iter()
            .filter(|t| t.lane == lane && t.exposure <= m.max_exposure)
        {
            tools.insert(t.index);
        }
        if tools.iter().count() == before && !TOOL_REGISTRY.iter().any(|t| t.lane == lane) {
            return Err(fail(
                &format!("include_lanes `{lane}`"),
                "no catalog tool has this lane".into(),
            ));
        }
    }
    if !upstream.is_empty() {
        requires_mask |= crate::SubsystemId::Upstream.bit();
    }
    let closure_mask = closure(requires_mask);
    for t in tools.iter() {
        let missing = t.requires_mask & !closure_mask;
        if missing != 0 {
            return Err(fail(
                &format!("tool {}", t.name),
                format!(
                    "requires subsystem(s) {} not covered by the profile's requires",
                    crate::subsystem_names(missing).join(", ")
                ),
            ));
        }
    }
    let leak = |s: &str| -> &'static str { Box::leak(s.to_owned().into_boxed_str()) };
    Ok(WorkspaceProfile {
        entry: ProfileEntry {
            id: leak(&m.id),
            description: leak(&m.description),
            manifest: leak(&path.display().to_string()),
            tools,
            requires_mask,
            closure_mask,
            max_exposure: m.max_exposure,
            axis_surfaces: Box::leak(
                m.axis_surfaces
                    .iter()
                    .map(|s| leak(s))
                    .collect::<Vec<_>>()
                    .into_boxed_slice(),
            ),
        },
        upstream,
    })
}

/// `mask` plus every transitive dependency.
fn closure(mask: SubsystemMask) -> SubsystemMask {
    let mut closed = mask;
    loop {
        let next = SUBSYSTEMS
            .iter()
            .enumerate()
            .filter(|(i, _)| closed & (1 << i) != 0)
            .fold(closed, |m, (_, s)| m | s.depends_mask);
        if next == closed {
            return closed;
        }
        closed = next;
    }
}

/// Makes `profiles` the workspace profiles every composition in this process sees (their
/// strings live as long as the process: a process serves one workspace, and installs once).
pub fn install_workspace_profiles(profiles: Vec<WorkspaceProfile>) {
    let installed: Installed = profiles
        .into_iter()
        .map(|p| {
            let entry: &'static ProfileEntry = Box::leak(Box::new(p.entry));
            let upstream: &'static [UpstreamPattern] = Box::leak(p.upstream.into_boxed_slice());
            (entry, upstream)
        })
        .collect();
    *INSTALLED.write().unwrap_or_else(|p| p.into_inner()) = installed;
}

/// An installed workspace profile by id, with its upstream tools.
pub(crate) fn workspace_entry(
    id: &str,
) -> Option<(&'static ProfileEntry, &'static [UpstreamPattern])> {
    INSTALLED
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .find(|(e, _)| e.id == id)
        .copied()
}

/// The installed workspace profiles' entries, by id.
pub fn workspace_profiles() -> Vec<&'static ProfileEntry> {
    let mut v: Vec<&'static ProfileEntry> = INSTALLED
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .map(|(e, _)| *e)
        .collect();
    v.sort_by_key(|e| e.id);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Caller, Exposure, ProfileSet, UpstreamClass, authorize_upstream};

    fn manifest(yaml: &str) -> ProfileManifest {
        vox_contracts::parse_profile_manifest(yaml).unwrap()
    }

    fn compile(yaml: &str) -> Result<WorkspaceProfile, String> {
        let servers = ["time".to_owned(), "git".to_owned()];
        compile_workspace_profile(
            Path::new("/ws/.vox/profiles/team.v1.yaml"),
            &manifest(yaml),
            &servers,
        )
    }

    const BASE: &str = "id: team\ndescription: d\nrequires: [memory]\nmax_exposure: public\n";

    #[test]
    fn a_workspace_profile_selects_catalog_and_upstream_tools() {
        let p = compile(&format!(
            "{BASE}tools:\n  include: [vox_memory_*, time__*, git__git_log]\n"
        ))
        .unwrap();
        assert!(p.entry.tools.iter().any(|t| t.name == "vox_memory_store"));
        assert_eq!(p.upstream.len(), 2);
        assert!(p.entry.closure_mask & crate::SubsystemId::Upstream.bit() != 0);
        install_workspace_profiles(vec![p]);
        let set = ProfileSet::parse("team").unwrap();
        assert_eq!(set.canonical(), "team");
        let public = UpstreamClass {
            exposure: Exposure::Public,
            ..UpstreamClass::default()
        };
        let all = u32::MAX;
        assert!(authorize_upstream(&set, "time__now", public, Caller::LOCAL, all).is_ok());
        assert!(authorize_upstream(&set, "git__git_log", public, Caller::LOCAL, all).is_ok());
        assert!(authorize_upstream(&set, "git__git_commit", public, Caller::LOCAL, all).is_err());
        // max_exposure public: an operator upstream tool is not in it.
        let operator = UpstreamClass::default();
        assert!(authorize_upstream(&set, "time__now", operator, Caller::LOCAL, all).is_err());
        // Composed with a standard profile: the union.
        let both = ProfileSet::parse("team,knowledge").unwrap();
        assert!(authorize_upstream(&both, "time__now", public, Caller::LOCAL, all).is_ok());
        assert!(both.tools().iter().any(|t| t.name == "vox_kb_query"));
        let e = ProfileSet::parse("teams").unwrap_err().to_string();
        assert!(e.contains("team"), "{e}");
    }

    #[test]
    fn unknown_tools_servers_and_subsystems_are_errors_naming_the_entry() {
        let cases = [
            (format!("{BASE}tools:\n  include: [vox_nope]\n"), "tools.include `vox_nope`: unknown tool"),
            (format!("{BASE}tools:\n  include: [vox_zz*]\n"), "matches no catalog tool"),
            (format!("{BASE}tools:\n  include: [docs__*]\n"), "no upstream server `docs`"),
            (format!("{BASE}tools:\n  include: [time__]\n"), "not `<server>__*`"),
            ("id: team\ndescription: d\nrequires: [warp]\nmax_exposure: public\ntools:\n  include: []\n".into(), "unknown subsystem `warp`"),
            ("id: other\ndescription: d\nrequires: []\nmax_exposure: public\ntools:\n  include: []\n".into(), "does not match the file name"),
            (format!("{BASE}tools:\n  include: [vox_set_active_model]\n"), "above max_exposure"),
            ("id: team\ndescription: d\nrequires: []\nmax_exposure: public\ntools:\n  include: [vox_memory_store]\n".into(), "not covered"),
        ];
        for (yaml, want) in cases {
            let e = compile(&yaml).unwrap_err();
            assert!(e.starts_with("/ws/.vox/profiles/team.v1.yaml: "), "{e}");
            assert!(e.contains(want), "{yaml}: {e}");
        }
    }
}
