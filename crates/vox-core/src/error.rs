//! Typed call results: [`ToolError`] (a handler's failure: its category with a stable code and
//! HTTP status, its message, and an optional finer detail a family defines) and [`ToolOutcome`]
//! (what a call produced, before any transport encodes it).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use vox_mcp_registry::Denial;

/// The category of a [`ToolError`]: what a client may do about it (fix the arguments, retry
/// later, ask a person). Its code and HTTP status are stable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The arguments are malformed or out of range: fix them (HTTP 400).
    InvalidArguments,
    /// What the call names does not exist (HTTP 404).
    NotFound,
    /// The call clashes with the current state, e.g. a lock another holds (HTTP 409).
    Conflict,
    /// Retryable: the subsystem is busy, down, or the call hit its deadline.
    Unavailable,
    /// A bug or an unexpected failure on the server's side (HTTP 500).
    Internal,
    /// A workspace tool returned `Error(e)`.
    Failed,
    /// The caller cancelled the call (or went away); nobody reads this but the ledger.
    Cancelled,
    /// `vox mcp` lost its daemon mid-call (the next call adopts or respawns one).
    DaemonUnavailable,
    /// An agent credential that is unknown, or whose agent retired.
    Unauthorized,
    /// A person rejected the call, its approval expired, or its agent is over budget.
    Refused,
}

impl ErrorKind {
    /// Every kind, for tests and the code table.
    pub const ALL: [ErrorKind; 10] = [
        ErrorKind::InvalidArguments,
        ErrorKind::NotFound,
        ErrorKind::Conflict,
        ErrorKind::Unavailable,
        ErrorKind::Internal,
        ErrorKind::Failed,
        ErrorKind::Cancelled,
        ErrorKind::DaemonUnavailable,
        ErrorKind::Unauthorized,
        ErrorKind::Refused,
    ];

    /// The stable snake_case code.
    pub fn code(self) -> &'static str {
        match self {
            ErrorKind::InvalidArguments => "invalid_arguments",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Conflict => "conflict",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Internal => "internal",
            ErrorKind::Failed => "tool_error",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::DaemonUnavailable => "daemon_unavailable",
            ErrorKind::Unauthorized => "unauthorized",
            ErrorKind::Refused => "refused",
        }
    }

    /// The kind a code names (the inverse of [`Self::code`]).
    pub fn from_code(code: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.code() == code)
    }

    /// The HTTP status that goes with the code.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorKind::InvalidArguments => 400,
            ErrorKind::NotFound => 404,
            ErrorKind::Conflict => 409,
            ErrorKind::Unavailable | ErrorKind::DaemonUnavailable => 503,
            ErrorKind::Internal | ErrorKind::Failed => 500,
            // nginx's "client closed request": there is no client left to read it.
            ErrorKind::Cancelled => 499,
            ErrorKind::Unauthorized => 401,
            ErrorKind::Refused => 403,
        }
    }
}

/// What a family says of a failure beyond its category: a stable machine-readable code of its
/// own (`path_outside_repo`, `budget_exceeded`) and optional data, as rmcp's `ErrorData` has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorDetail {
    /// The family's stable machine-readable code, e.g. `path_outside_repo`.
    pub code: String,
    /// Facts behind the code, as JSON, when the family gives any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// A handler's failure, returned to the client as a tool result with `isError: true`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    kind: ErrorKind,
    message: String,
    detail: Option<Box<ErrorDetail>>,
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ToolError {}

impl ToolError {
    /// An error of `kind` saying `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ToolError {
            kind,
            message: message.into(),
            detail: None,
        }
    }
    /// An [`ErrorKind::InvalidArguments`] error saying `m`.
    pub fn invalid_arguments(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidArguments, m)
    }
    /// An [`ErrorKind::NotFound`] error saying `m`.
    pub fn not_found(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, m)
    }
    /// An [`ErrorKind::Conflict`] error saying `m`.
    pub fn conflict(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::Conflict, m)
    }
    /// An [`ErrorKind::Unavailable`] error saying `m`.
    pub fn unavailable(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unavailable, m)
    }
    /// An [`ErrorKind::Internal`] error saying `m`.
    pub fn internal(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, m)
    }
    /// A workspace tool's `Error(e)`.
    pub fn failed(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::Failed, m)
    }
    /// An [`ErrorKind::Cancelled`] error saying `m`.
    pub fn cancelled(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::Cancelled, m)
    }
    /// An [`ErrorKind::DaemonUnavailable`] error saying `m`.
    pub fn daemon_unavailable(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::DaemonUnavailable, m)
    }
    /// An [`ErrorKind::Unauthorized`] error saying `m`.
    pub fn unauthorized(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unauthorized, m)
    }
    /// An [`ErrorKind::Refused`] error saying `m`.
    pub fn refused(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::Refused, m)
    }

    /// Adds the family's own code (and data) to this error.
    pub fn with_detail(mut self, code: impl Into<String>, data: Option<Value>) -> Self {
        self.detail = Some(Box::new(ErrorDetail {
            code: code.into(),
            data,
        }));
        self
    }
    /// The same error (category and detail) with what it says prefixed by `context`.
    pub fn context(mut self, context: impl std::fmt::Display) -> Self {
        self.message = format!("{context}: {}", self.message);
        self
    }
    /// The category.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
    /// The family's detail, if it gave one.
    pub fn detail(&self) -> Option<&ErrorDetail> {
        self.detail.as_deref()
    }
    /// The stable snake_case code of the category.
    pub fn code(&self) -> &'static str {
        self.kind.code()
    }
    /// The HTTP status that goes with the code.
    pub fn http_status(&self) -> u16 {
        self.kind.http_status()
    }
    /// The error a code and message name; an unknown code is an internal error that keeps it
    /// in the message.
    pub fn from_code(code: &str, message: String) -> Self {
        match ErrorKind::from_code(code) {
            Some(kind) => Self::new(kind, message),
            None => Self::internal(format!("{code}: {message}")),
        }
    }
    /// The one error shape: `{"error":{"code", "message", "detail"?}}`.
    pub fn to_json(&self) -> Value {
        let mut error = json!({"code": self.code(), "message": self.message});
        if let Some(d) = &self.detail {
            error["detail"] = serde_json::to_value(d).unwrap_or_default();
        }
        json!({ "error": error })
    }
}

/// The outcome of one call, before any transport encodes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "WireOutcome", try_from = "WireOutcome")]
pub enum ToolOutcome {
    /// The handler's JSON result (the MCP `structuredContent`).
    Ok(Value),
    /// MCP content blocks (text, image, audio, embedded resource, resource link), as a
    /// workspace tool made them with `content.*`; its answer is these, not a JSON value.
    Content(Vec<Value>),
    /// The authorization decision refused the call; the handler did not run.
    Denied(Denial),
    /// The handler ran and failed.
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

/// [`ToolOutcome`] as data (the chat loop's record of a model's tool call).
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
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<ErrorDetail>,
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
                message: e.message,
                detail: e.detail.map(|d| *d),
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
                code: vox_mcp_registry::DenialCode::from_code(&code)
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
            WireOutcome::Failed {
                code,
                message,
                detail,
            } => {
                let mut e = ToolError::from_code(&code, message);
                e.detail = detail.map(Box::new);
                ToolOutcome::Failed(e)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_through_its_code() {
        for kind in ErrorKind::ALL {
            assert_eq!(ErrorKind::from_code(kind.code()), Some(kind));
            let e = ToolError::from_code(kind.code(), "m".into());
            assert_eq!(e.kind(), kind);
        }
        let o = ToolOutcome::Failed(ToolError::conflict("c").with_detail("lease_held", None));
        let back: ToolOutcome = serde_json::from_value(serde_json::to_value(&o).unwrap()).unwrap();
        assert_eq!(back, o);
        let odd = ToolError::from_code("nope", "m".into());
        assert_eq!(odd.kind(), ErrorKind::Internal);
        assert_eq!(odd.message(), "nope: m");
    }

    #[test]
    fn a_detail_is_carried_inside_the_one_error_shape() {
        let e = ToolError::unavailable("over budget")
            .with_detail("budget_exceeded", Some(json!({"limit": "steps"})));
        assert_eq!(
            e.to_json(),
            json!({"error": {"code": "unavailable", "message": "over budget",
                "detail": {"code": "budget_exceeded", "data": {"limit": "steps"}}}})
        );
        assert_eq!(
            ToolError::not_found("x").to_json(),
            json!({"error": {"code": "not_found", "message": "x"}})
        );
    }
}
