//! What reading a resource gives, on every transport: text or base64 bytes, with a MIME type.

use serde::{Deserialize, Serialize};

/// A resource's contents: exactly one of `text` and `blob` (base64), of `mime_type`. On the
/// daemon socket it travels as itself: `{"mimeType", "text" | "blob"}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceBody {
    /// The contents' MIME type, e.g. `text/plain`.
    pub mime_type: String,
    /// The contents as text, for a text resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The contents as base64, for a binary resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
}

impl ResourceBody {
    /// `text/plain` text.
    pub fn text(text: impl Into<String>) -> Self {
        Self::typed_text(text, "text/plain")
    }
    /// Text of `mime_type`.
    pub fn typed_text(text: impl Into<String>, mime_type: impl Into<String>) -> Self {
        ResourceBody {
            mime_type: mime_type.into(),
            text: Some(text.into()),
            blob: None,
        }
    }
    /// Base64 bytes of `mime_type`.
    pub fn blob(blob: impl Into<String>, mime_type: impl Into<String>) -> Self {
        ResourceBody {
            mime_type: mime_type.into(),
            text: None,
            blob: Some(blob.into()),
        }
    }
}
