//! Tools of other people's MCP servers (upstream servers) under the same decision as the
//! catalog's: which of them a surface serves ([`UpstreamSelection`]), what vox knows of each
//! ([`UpstreamClass`], from the server's config, never from what the server says of itself),
//! and [`authorize_upstream`], the decision in the catalog's fixed order.

use crate::authorize::{Caller, Denial, DenialCode, Role};
use crate::{Exposure, ProfileSet, SideEffectClass, SubsystemId, SubsystemMask};
use std::sync::Arc;

/// What the decision knows of one upstream tool: its server's config's classification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UpstreamClass {
    /// Who may see and call it.
    pub exposure: Exposure,
    /// What calling it does to the world.
    pub side_effect_class: SideEffectClass,
    /// Whether the HTTP read token may call it (on top of a public exposure).
    pub read_role_eligible: bool,
}

impl Default for UpstreamClass {
    /// A tool nobody classified: a person's (operator), with unknown and so the worst side
    /// effects, never for the read role.
    fn default() -> Self {
        UpstreamClass {
            exposure: Exposure::Operator,
            side_effect_class: SideEffectClass::Destructive,
            read_role_eligible: false,
        }
    }
}

/// One entry of a profile's upstream selection: every tool of a server (`<server>__*`) or one
/// tool (`<server>__<tool>`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum UpstreamPattern {
    /// `<server>__*`.
    Server(String),
    /// `<server>__<tool>`.
    Tool(String),
}

impl UpstreamPattern {
    /// Parses `<server>__*` or `<server>__<tool>`; `None` for a name that is neither.
    pub fn parse(s: &str) -> Option<Self> {
        let (server, tool) = s.split_once(SEPARATOR)?;
        if server.is_empty() || tool.is_empty() {
            return None;
        }
        Some(if tool == "*" {
            UpstreamPattern::Server(server.to_owned())
        } else {
            UpstreamPattern::Tool(s.to_owned())
        })
    }
    /// Whether the served name `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        match self {
            UpstreamPattern::Tool(t) => t == name,
            UpstreamPattern::Server(s) => name
                .strip_prefix(s.as_str())
                .is_some_and(|rest| rest.starts_with(SEPARATOR)),
        }
    }
    /// The server the pattern names.
    pub fn server(&self) -> &str {
        match self {
            UpstreamPattern::Server(s) => s,
            UpstreamPattern::Tool(t) => t.split_once(SEPARATOR).map_or(t.as_str(), |(s, _)| s),
        }
    }
}

/// Between a server id and its tool's own name in the name vox serves: `time__get_current_time`.
pub const SEPARATOR: &str = "__";

/// Which upstream tools a surface serves: those every clause matches (a clause matches when
/// one of its patterns does). No clause: every upstream tool (`dev`); `none`: no upstream tool
/// (the standard profiles, an HTTP allowlist of catalog names).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UpstreamSelection {
    none: bool,
    all_of: Vec<Arc<[UpstreamPattern]>>,
}

impl UpstreamSelection {
    /// Every upstream tool.
    pub fn all() -> Self {
        UpstreamSelection::default()
    }
    /// No upstream tool.
    pub fn none() -> Self {
        UpstreamSelection {
            none: true,
            all_of: Vec::new(),
        }
    }
    /// The tools one of `patterns` matches (none when empty).
    pub fn any_of(patterns: Vec<UpstreamPattern>) -> Self {
        if patterns.is_empty() {
            return Self::none();
        }
        UpstreamSelection {
            none: false,
            all_of: vec![patterns.into()],
        }
    }
    /// Whether `name` is selected.
    pub fn serves(&self, name: &str) -> bool {
        !self.none
            && self
                .all_of
                .iter()
                .all(|any| any.iter().any(|p| p.matches(name)))
    }
    /// Whether every tool of `server` is selected (`<server>__*` in every clause, or `dev`):
    /// what reaching its resources and prompts takes.
    pub fn serves_server(&self, server: &str) -> bool {
        !self.none
            && self.all_of.iter().all(|any| {
                any.iter()
                    .any(|p| matches!(p, UpstreamPattern::Server(s) if s == server))
            })
    }
    /// Whether nothing is selected.
    pub fn is_none(&self) -> bool {
        self.none
    }
    /// What both select.
    pub fn intersect(&self, other: &Self) -> Self {
        if self.none || other.none {
            return Self::none();
        }
        let mut all_of = self.all_of.clone();
        all_of.extend(other.all_of.iter().cloned());
        UpstreamSelection {
            none: false,
            all_of,
        }
    }
    /// What either selects (composing profiles): `None` when the union is not one clause
    /// list (a narrowed selection is never composed; only manifests are).
    pub fn union(&self, other: &Self) -> Self {
        match (self.none, other.none) {
            (true, _) => other.clone(),
            (_, true) => self.clone(),
            _ if self.all_of.is_empty() || other.all_of.is_empty() => Self::all(),
            _ => {
                let mut any: Vec<UpstreamPattern> = Vec::new();
                for p in self
                    .all_of
                    .iter()
                    .chain(&other.all_of)
                    .flat_map(|c| c.iter())
                {
                    if !any.contains(p) {
                        any.push(p.clone());
                    }
                }
                Self::any_of(any)
            }
        }
    }
}

/// Decides whether `caller` may call upstream tool `name`, classified `class`, on `profile`
/// with the `booted` subsystems: the catalog's order (membership → internal off loopback →
/// operator for the read role → read-role eligibility → the `upstream` subsystem booted).
pub fn authorize_upstream(
    profile: &ProfileSet,
    name: &str,
    class: UpstreamClass,
    caller: Caller,
    booted: SubsystemMask,
) -> Result<(), Denial> {
    if !profile.upstream().serves(name) {
        return Err(Denial::new(
            DenialCode::ToolNotInProfile,
            format!("tool {name} is not in profile {}", profile.canonical()),
        ));
    }
    if class.exposure > profile.upstream_max_exposure() {
        return Err(Denial::new(
            DenialCode::ToolNotInProfile,
            format!(
                "tool {name} has {} exposure, which this surface does not serve",
                class.exposure.as_str()
            ),
        ));
    }
    if class.exposure == Exposure::Internal && !caller.loopback {
        return Err(Denial::new(
            DenialCode::ExposureDenied,
            format!("tool {name} is internal and only served to loopback callers"),
        ));
    }
    if caller.role == Role::Read {
        if class.exposure >= Exposure::Operator {
            return Err(Denial::new(
                DenialCode::ExposureDenied,
                format!(
                    "tool {name} has {} exposure; the read token cannot call it",
                    class.exposure.as_str()
                ),
            ));
        }
        // A read-role allowlist names catalog tools only.
        if !class.read_role_eligible || profile.read_role_tools().is_some() {
            return Err(Denial::new(
                DenialCode::InsufficientRole,
                format!("tool {name} is not available to the read role"),
            ));
        }
    }
    if booted & SubsystemId::Upstream.bit() == 0 {
        return Err(Denial {
            code: DenialCode::SubsystemNotBooted,
            message: format!("tool {name} requires subsystem upstream, which is not running"),
            subsystem: Some(SubsystemId::Upstream.as_str()),
            skill: None,
        });
    }
    Ok(())
}

/// Decides whether `caller` may list and read the resources and prompts of upstream server
/// `server` on `profile`: the surface serves every tool of it (`<server>__*`), operator tools
/// are within the surface, the caller holds the write role, and `upstream` is booted. (A
/// resource or a prompt carries no classification of its own: it is the server's, and a
/// person's.)
pub fn authorize_upstream_server(
    profile: &ProfileSet,
    server: &str,
    caller: Caller,
    booted: SubsystemMask,
) -> Result<(), Denial> {
    if !profile.upstream().serves_server(server)
        || profile.upstream_max_exposure() < Exposure::Operator
    {
        return Err(Denial::new(
            DenialCode::ToolNotInProfile,
            format!(
                "upstream server {server}'s resources and prompts are not in profile {}",
                profile.canonical()
            ),
        ));
    }
    if caller.role == Role::Read {
        return Err(Denial::new(
            DenialCode::ExposureDenied,
            format!(
                "upstream server {server}'s resources and prompts are the operator's; the read token cannot reach them"
            ),
        ));
    }
    if booted & SubsystemId::Upstream.bit() == 0 {
        return Err(Denial {
            code: DenialCode::SubsystemNotBooted,
            message: "upstream servers are not running".into(),
            subsystem: Some(SubsystemId::Upstream.as_str()),
            skill: None,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_their_server_or_their_tool_only() {
        let p = UpstreamPattern::parse("time__*").unwrap();
        assert!(p.matches("time__now"));
        assert!(!p.matches("timer__now"));
        assert!(!p.matches("time_now"));
        let t = UpstreamPattern::parse("git__git_log").unwrap();
        assert!(t.matches("git__git_log") && !t.matches("git__git_diff"));
        assert_eq!(t.server(), "git");
        assert!(UpstreamPattern::parse("plain").is_none());
        assert!(UpstreamPattern::parse("__x").is_none());
    }

    #[test]
    fn selections_intersect_and_unite() {
        let time = UpstreamSelection::any_of(vec![UpstreamPattern::parse("time__*").unwrap()]);
        let one = UpstreamSelection::any_of(vec![UpstreamPattern::parse("time__now").unwrap()]);
        let both = time.intersect(&one);
        assert!(both.serves("time__now") && !both.serves("time__zone"));
        assert!(
            !time
                .intersect(&UpstreamSelection::none())
                .serves("time__now")
        );
        assert!(
            UpstreamSelection::all()
                .intersect(&time)
                .serves("time__zone")
        );
        let git = UpstreamSelection::any_of(vec![UpstreamPattern::parse("git__*").unwrap()]);
        let u = time.union(&git);
        assert!(u.serves("git__log") && u.serves("time__now") && !u.serves("fs__read"));
        assert!(UpstreamSelection::none().union(&git).serves("git__log"));
    }
}
