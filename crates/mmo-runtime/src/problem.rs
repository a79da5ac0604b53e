//! A finding about a result, shared by the contract check (`result`) and literal correlation
//! (`literal`).

use serde::Serialize;
use std::fmt;

/// One finding about a result: a stable code, the JSON pointer of the offending instance value,
/// and (for schema findings) the pointer of the failing schema keyword.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub code: &'static str,
    pub pointer: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema_pointer: Option<String>,
    pub message: String,
}

impl Problem {
    pub fn new(code: &'static str, pointer: impl Into<String>, message: impl Into<String>) -> Self {
        Problem {
            code,
            pointer: pointer.into(),
            schema_pointer: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.pointer.is_empty() {
            "(root)"
        } else {
            &self.pointer
        };
        write!(f, "{at}: [{}] {}", self.code, self.message)
    }
}
