//! Typed call results: [`ToolError`] (a handler's failure, with its stable code and HTTP
//! status) and [`ToolOutcome`] (what a call produced, before any transport encodes it).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use vox_mcp_registry::{Denial, DenialCode};

/// A handler's failure, returned to the client as a tool result with `isError: true`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    #[error("{0}")]
    InvalidArguments(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    Internal(String),
    /// A workspace tool returned `Error(e)`.
    #[error("{0}")]
    Failed(String),
    /// The caller cancelled the call (or went away); nobody reads this but the ledger.
    #[error("{0}")]
    Cancelled(String),
    /// `vox mcp` lost its daemon mid-call (the next call adopts or respawns one).
    #[error("{0}")]
    DaemonUnavailable(String),
    /// An agent credential that is unknown, or whose agent retired.
    #[error("{0}")]
    Unauthorized(String),
    /// A person rejected the call, its approval expired, or its agent is over budget.
    #[error("{0}")]
    Refused(String),
}

impl ToolError {
    /// The stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            ToolError::InvalidArguments(_) => "invalid_arguments",
            ToolError::NotFound(_) => "not_found",
            ToolError::Conflict(_) => "conflict",
            ToolError::Unavailable(_) => "unavailable",
            ToolError::Internal(_) => "internal",
            ToolError::Failed(_) => "tool_error",
            ToolError::Cancelled(_) => "cancelled",
            ToolError::DaemonUnavailable(_) => "daemon_unavailable",
            ToolError::Unauthorized(_) => "unauthorized",
            ToolError::Refused(_) => "refused",
        }
    }
    /// The HTTP status that goes with the code.
    pub fn http_status(&self) -> u16 {
        match self {
            ToolError::InvalidArguments(_) => 400,
            ToolError::NotFound(_) => 404,
            ToolError::Conflict(_) => 409,
            ToolError::Unavailable(_) | ToolError::DaemonUnavailable(_) => 503,
            ToolError::Internal(_) | ToolError::Failed(_) => 500,
            // nginx's "client closed request": there is no client left to read it.
            ToolError::Cancelled(_) => 499,
            ToolError::Unauthorized(_) => 401,
            ToolError::Refused(_) => 403,
        }
    }
    /// The error a code and message name (the inverse of [`Self::code`]); an unknown code is
    /// an internal error that keeps it in the message.
    pub fn from_code(code: &str, message: String) -> Self {
        match code {
            "invalid_arguments" => ToolError::InvalidArguments(message),
            "not_found" => ToolError::NotFound(message),
            "conflict" => ToolError::Conflict(message),
            "unavailable" => ToolError::Unavailable(message),
            "internal" => ToolError::Internal(message),
            "tool_error" => ToolError::Failed(message),
            "cancelled" => ToolError::Cancelled(message),
            "daemon_unavailable" => ToolError::DaemonUnavailable(message),
            "unauthorized" => ToolError::Unauthorized(message),
            "refused" => ToolError::Refused(message),
            other => ToolError::Internal(format!("{other}: {message}")),
        }
    }
    /// The one error shape: `{"error":{"code":…,"message":…}}`.
    pub fn to_json(&self) -> Value {
        json!({"error": {"code": self.code(), "message": self.to_string()}})
    }
}

/// The outcome of one call, before any transport encodes it. It crosses the daemon socket as
/// itself (serde), so the stdio side encodes the same typed value the daemon produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "WireOutcome", try_from = "WireOutcome")]
pub enum ToolOutcome {
    Ok(Value),
    /// MCP content blocks (text, image, audio, embedded resource, resource link), as a
    /// workspace tool made them with `content.*`; its answer is these, not a JSON value.
    Content(Vec<Value>),
    Denied(Denial),
    Failed(ToolError),
}

impl ToolOutcome {
    /// `ok`, the denial code, or the tool error code.
    pub fn label(&self) -> &'static str {
        match self {
            ToolOutcome::Ok(_) | ToolOutcome::Content(_) => "ok",
            ToolOutcome::Denied(d) => d.code.as_str(),
            ToolOutcome::Failed(e) => e.code(),
        }
    }
    /// The structured content: the value, `{"content": blocks}`, or the one error shape.
    pub fn to_json(&self) -> Value {
        match self {
            ToolOutcome::Ok(v) => v.clone(),
            ToolOutcome::Content(blocks) => json!({ "content": blocks }),
            ToolOutcome::Denied(d) => d.to_json(),
            ToolOutcome::Failed(e) => e.to_json(),
        }
    }
    /// Whether a client should see `isError: true`.
    pub fn is_error(&self) -> bool {
        !matches!(self, ToolOutcome::Ok(_) | ToolOutcome::Content(_))
    }
}

impl From<Result<Value, ToolError>> for ToolOutcome {
    fn from(r: Result<Value, ToolError>) -> Self {
        r.map_or_else(ToolOutcome::Failed, ToolOutcome::Ok)
    }
}

/// [`ToolOutcome`] on the daemon socket.
#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum WireOutcome {
    Ok {
        value: Value,
    },
    Content {
        blocks: Vec<Value>,
    },
    Denied {
        code: String,
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subsystem: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        skill: Option<String>,
    },
    Failed {
        code: String,
        message: String,
    },
}

impl From<ToolOutcome> for WireOutcome {
    fn from(o: ToolOutcome) -> Self {
        match o {
            ToolOutcome::Ok(value) => WireOutcome::Ok { value },
            ToolOutcome::Content(blocks) => WireOutcome::Content { blocks },
            ToolOutcome::Denied(d) => WireOutcome::Denied {
                code: d.code.as_str().to_owned(),
                message: d.message,
                subsystem: d.subsystem.map(str::to_owned),
                skill: d.skill,
            },
            ToolOutcome::Failed(e) => WireOutcome::Failed {
                code: e.code().to_owned(),
                message: e.to_string(),
            },
        }
    }
}

impl TryFrom<WireOutcome> for ToolOutcome {
    type Error = String;
    fn try_from(w: WireOutcome) -> Result<Self, String> {
        Ok(match w {
            WireOutcome::Ok { value } => ToolOutcome::Ok(value),
            WireOutcome::Content { blocks } => ToolOutcome::Content(blocks),
            WireOutcome::Denied {
                code,
                message,
                subsystem,
                skill,
            } => ToolOutcome::Denied(Denial {
                code: DenialCode::from_code(&code)
                    .ok_or_else(|| format!("unknown denial code {code}"))?,
                message,
                subsystem: subsystem.and_then(|s| {
                    vox_mcp_registry::SUBSYSTEMS
                        .iter()
                        .find(|x| x.id == s)
                        .map(|x| x.id)
                }),
                skill,
            }),
            WireOutcome::Failed { code, message } => {
                ToolOutcome::Failed(ToolError::from_code(&code, message))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_error_and_denial_round_trips_through_its_wire_form() {
        let m = || "m".to_owned();
        let errors = [
            ToolError::InvalidArguments(m()),
            ToolError::NotFound(m()),
            ToolError::Conflict(m()),
            ToolError::Unavailable(m()),
            ToolError::Internal(m()),
            ToolError::Failed(m()),
            ToolError::Cancelled(m()),
            ToolError::DaemonUnavailable(m()),
            ToolError::Unauthorized(m()),
            ToolError::Refused(m()),
        ];
        for e in errors {
            assert_eq!(ToolError::from_code(e.code(), m()), e);
            let o = ToolOutcome::Failed(e);
            let back: ToolOutcome =
                serde_json::from_value(serde_json::to_value(&o).unwrap()).unwrap();
            assert_eq!(back, o);
        }
        for code in DenialCode::ALL {
            assert_eq!(DenialCode::from_code(code.as_str()), Some(code));
            let mut d = Denial::new(code, "no");
            d.subsystem = Some("memory");
            d.skill = Some("s".into());
            let o = ToolOutcome::Denied(d);
            let back: ToolOutcome =
                serde_json::from_value(serde_json::to_value(&o).unwrap()).unwrap();
            assert_eq!(back, o);
        }
        for ok in [
            ToolOutcome::Ok(json!({"a": [1, 2]})),
            ToolOutcome::Content(vec![json!({"type": "text", "text": "t"})]),
        ] {
            let back: ToolOutcome =
                serde_json::from_value(serde_json::to_value(&ok).unwrap()).unwrap();
            assert_eq!(back, ok);
        }
        // An unknown denial code is refused, not guessed.
        let bad = json!({"kind": "denied", "code": "nope", "message": "m"});
        assert!(serde_json::from_value::<ToolOutcome>(bad).is_err());
    }
}
