//! The one authorization decision, used by every transport.

use crate::{
    Exposure, ProfileSet, SUBSYSTEMS, SubsystemMask, TOOL_REGISTRY, ToolEntry, tool_by_name,
};
use serde_json::{Value, json};

/// Which token a caller presented. Local transports (stdio, the daemon socket) are `Write`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// The write token, or a local transport: may call any tool its profile and exposure allow.
    Write,
    /// The HTTP read token: only public, read-role eligible tools.
    Read,
}

/// What the decision needs to know about a caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Caller {
    /// Judged from the socket's peer address only, never from forwarded headers.
    pub loopback: bool,
    /// Which token the caller presented.
    pub role: Role,
}

impl Caller {
    /// A local caller with full rights (stdio MCP, the daemon socket).
    pub const LOCAL: Caller = Caller {
        loopback: true,
        role: Role::Write,
    };
}

/// The stable denial codes of the capability-profiles spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DenialCode {
    /// The tool exists but the active profile does not serve it (HTTP 404).
    ToolNotInProfile,
    /// A subsystem the tool requires is not running (HTTP 503).
    SubsystemNotBooted,
    /// An internal tool off loopback, or an operator tool with the read token (HTTP 403).
    ExposureDenied,
    /// The read token for a tool that is not read-role eligible (HTTP 403).
    InsufficientRole,
    /// A `--profile` or `VOX_PROFILE` that names no manifest (HTTP 400).
    ProfileUnknown,
    /// An adoptable daemon serves a different profile than the one asked for (HTTP 409).
    ProfileMismatch,
    /// A name that is in no registry, under `dev` (a named profile answers `tool_not_in_profile`).
    UnknownTool,
    /// The session's active skill does not list the tool.
    SkillToolNotAllowed,
}

impl DenialCode {
    /// Every code.
    pub const ALL: [DenialCode; 8] = [
        DenialCode::ToolNotInProfile,
        DenialCode::SubsystemNotBooted,
        DenialCode::ExposureDenied,
        DenialCode::InsufficientRole,
        DenialCode::ProfileUnknown,
        DenialCode::ProfileMismatch,
        DenialCode::UnknownTool,
        DenialCode::SkillToolNotAllowed,
    ];
    /// The snake_case wire code.
    pub fn as_str(self) -> &'static str {
        match self {
            DenialCode::ToolNotInProfile => "tool_not_in_profile",
            DenialCode::SubsystemNotBooted => "subsystem_not_booted",
            DenialCode::ExposureDenied => "exposure_denied",
            DenialCode::InsufficientRole => "insufficient_role",
            DenialCode::ProfileUnknown => "profile_unknown",
            DenialCode::ProfileMismatch => "profile_mismatch",
            DenialCode::UnknownTool => "unknown_tool",
            DenialCode::SkillToolNotAllowed => "skill_tool_not_allowed",
        }
    }
    /// The code a wire string names (the inverse of [`Self::as_str`]).
    pub fn from_code(code: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == code)
    }
    /// The HTTP status that goes with the code.
    pub fn http_status(self) -> u16 {
        match self {
            DenialCode::ToolNotInProfile | DenialCode::UnknownTool => 404,
            DenialCode::SubsystemNotBooted => 503,
            DenialCode::ExposureDenied
            | DenialCode::InsufficientRole
            | DenialCode::SkillToolNotAllowed => 403,
            DenialCode::ProfileUnknown => 400,
            DenialCode::ProfileMismatch => 409,
        }
    }
}

/// A refused call, rendered in the one JSON shape every transport uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// Why the call was refused.
    pub code: DenialCode,
    /// A sentence for people naming the tool and the reason.
    pub message: String,
    /// The subsystem that is not booted (`subsystem_not_booted` only).
    pub subsystem: Option<&'static str>,
    /// The active skill whose tool list refused the call (`skill_tool_not_allowed`).
    pub skill: Option<String>,
}

impl Denial {
    /// Builds a denial without a subsystem.
    pub fn new(code: DenialCode, message: impl Into<String>) -> Self {
        Denial {
            code,
            message: message.into(),
            subsystem: None,
            skill: None,
        }
    }
    /// `{"error":{"code":…,"message":…,"subsystem":…}}` (subsystem only when there is one).
    pub fn to_json(&self) -> Value {
        let mut error = json!({"code": self.code.as_str(), "message": self.message});
        if let Some(s) = self.subsystem {
            error["subsystem"] = json!(s);
        }
        if let Some(s) = &self.skill {
            error["skill"] = json!(s);
        }
        json!({ "error": error })
    }
}

impl std::fmt::Display for Denial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl std::error::Error for Denial {}

/// Decides whether `caller` may call `name` under `profile` with the `booted` subsystems.
///
/// The order is fixed by the spec: membership → internal off loopback → operator for the read
/// role → read-role eligibility → booted subsystems.
#[inline]
pub fn authorize_tool(
    profile: &ProfileSet,
    name: &str,
    caller: Caller,
    booted: SubsystemMask,
) -> Result<&'static ToolEntry, Denial> {
    let Some(tool) = tool_by_name(name) else {
        let code = if profile.is_dev() {
            DenialCode::UnknownTool
        } else {
            DenialCode::ToolNotInProfile
        };
        let message = if profile.is_dev() {
            format!("unknown tool {name}")
        } else {
            format!(
                "tool {name} is not served by profile {}",
                profile.canonical()
            )
        };
        return Err(Denial::new(code, message));
    };
    authorize_entry(profile, tool, caller, booted).map(|()| tool)
}

fn authorize_entry(
    profile: &ProfileSet,
    tool: &'static ToolEntry,
    caller: Caller,
    booted: SubsystemMask,
) -> Result<(), Denial> {
    if !profile.tools().contains(tool.index) {
        let why = if tool.built {
            format!(
                "tool {} is not in profile {}",
                tool.name,
                profile.canonical()
            )
        } else {
            format!(
                "tool {} needs cargo feature {} which this build lacks",
                tool.name,
                tool.feature.unwrap_or("?")
            )
        };
        return Err(Denial::new(DenialCode::ToolNotInProfile, why));
    }
    if tool.exposure == Exposure::Internal && !caller.loopback {
        return Err(Denial::new(
            DenialCode::ExposureDenied,
            format!(
                "tool {} is internal and only served to loopback callers",
                tool.name
            ),
        ));
    }
    if caller.role == Role::Read {
        if tool.exposure >= Exposure::Operator {
            return Err(Denial::new(
                DenialCode::ExposureDenied,
                format!(
                    "tool {} has {} exposure; the read token cannot call it",
                    tool.name,
                    tool.exposure.as_str()
                ),
            ));
        }
        let narrowed_out = profile
            .read_role_tools()
            .is_some_and(|r| !r.contains(tool.index));
        if !tool.http_read_role_eligible || tool.read_role_always_denied || narrowed_out {
            return Err(Denial::new(
                DenialCode::InsufficientRole,
                format!("tool {} is not available to the read role", tool.name),
            ));
        }
    }
    let missing = tool.requires_mask & !booted;
    if missing != 0 {
        // Name the first missing subsystem in the tool's own `requires` order.
        let sub = tool
            .requires
            .iter()
            .copied()
            .find(|id| {
                SUBSYSTEMS
                    .iter()
                    .position(|s| s.id == *id)
                    .is_some_and(|b| missing & (1 << b) != 0)
            })
            .unwrap_or("?");
        return Err(Denial {
            code: DenialCode::SubsystemNotBooted,
            message: format!(
                "tool {} requires subsystem {sub}, which is not running",
                tool.name
            ),
            subsystem: Some(sub),
            skill: None,
        });
    }
    Ok(())
}

/// The tools a caller would be allowed to call: exactly those [`authorize_tool`] accepts.
pub fn visible_tools(
    profile: &ProfileSet,
    caller: Caller,
    booted: SubsystemMask,
) -> impl Iterator<Item = &'static ToolEntry> + '_ {
    TOOL_REGISTRY
        .iter()
        .filter(move |t| authorize_entry(profile, t, caller, booted).is_ok())
}
