//! vox's models: the registry ([`registry`]), choosing a model for a task ([`suggest`]), and
//! one async client for the three provider APIs ([`client`]: OpenAI-compatible Chat
//! Completions, the Responses API, Anthropic Messages), streaming, with tool calls passed
//! through, timeouts, retries with backoff on 429 and 5xx, and cancellation.
//!
//! Nothing here knows vox's tools: the `vox-tools` models family puts the registry and the
//! client into the daemon and accounts what calls cost.

pub mod client;
pub mod registry;
pub mod suggest;
pub mod wire;

pub use client::{Completion, Facade, FacadeOptions};
pub use registry::{Api, Env, ModelSpec, ProcessEnv, Provider, Registry};

use serde::{Deserialize, Serialize};

/// How to reach one model: its provider's API and URL, its name there, and its key.
#[derive(Clone)]
pub struct Endpoint {
    /// Which wire API the provider speaks.
    pub api: Api,
    /// Without a trailing slash; paths (`/chat/completions`, `/responses`, `/messages`) are
    /// appended.
    pub base_url: String,
    /// The model's name at its provider (sent as `model`).
    pub model: String,
    /// The API key, read from the provider's variable; `None` for a local server that takes none.
    pub api_key: Option<String>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key is never printed.
        f.debug_struct("Endpoint")
            .field("api", &self.api)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .finish()
    }
}

/// One message of a conversation, in the form every API is translated from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum Message {
    /// What the user (or the agent driving the model) says.
    User {
        /// The message text.
        content: String,
    },
    /// A previous answer of the model, replayed as context.
    Assistant {
        /// The answer's text (empty when it only called tools).
        content: String,
        /// The tool calls the answer made, in order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// A tool's result, answering the call `call_id`.
    Tool {
        /// The [`ToolCall::id`] this result answers.
        call_id: String,
        /// The tool's output as text (JSON text for a structured result).
        content: String,
    },
}

/// A tool the model may call: a name, what it does, and its JSON Schema input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The name the model calls it by.
    pub name: String,
    /// What the tool does, shown to the model.
    pub description: String,
    /// JSON Schema of the tool's arguments.
    pub parameters: serde_json::Value,
}

/// A tool call the model made: passed through to the caller, which runs it (or not).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id of the call, echoed back in the tool's result ([`Message::Tool`]).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as the model wrote them (JSON text, not checked here).
    pub arguments: String,
}

/// What a request asks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The system prompt (instructions), if any.
    pub system: Option<String>,
    /// The conversation so far, oldest first.
    pub messages: Vec<Message>,
    /// The tools the model may call; empty for none.
    pub tools: Vec<ToolSpec>,
    /// At most this many output tokens (Anthropic requires a value: 4096 when unset).
    pub max_tokens: Option<u32>,
    /// Sampling temperature; `None` keeps the provider's default.
    pub temperature: Option<f32>,
}

/// Tokens a call used, as the provider reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens, as the provider counted them.
    pub input_tokens: u64,
    /// Completion tokens, as the provider counted them.
    pub output_tokens: u64,
}

/// Everything that can go wrong, each with a stable code ([`LlmError::code`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    /// A manifest, overlay or environment setting is wrong.
    #[error("model registry, {origin}: {message}")]
    Registry {
        /// Where the bad setting comes from: a manifest path, an overlay, "the environment".
        origin: String,
        /// What is wrong with it.
        message: String,
    },
    /// The model id is not in the registry.
    #[error("no model `{id}` in the registry ({known} models; vox_list_models lists them)")]
    UnknownModel {
        /// The id asked for.
        id: String,
        /// How many models the registry does have.
        known: usize,
    },
    /// The provider needs a key and its variable is not set.
    #[error(
        "provider `{provider}` needs its key in the environment variable {variable}, which is not set"
    )]
    Credentials {
        /// The provider id, e.g. `openai`.
        provider: String,
        /// The environment variable that should hold its key.
        variable: String,
    },
    /// The provider answered an HTTP error (after retries, for 429 and 5xx).
    #[error("{url} answered HTTP {status} after {attempts} attempt(s): {body}")]
    Status {
        /// The URL called.
        url: String,
        /// The last HTTP status.
        status: u16,
        /// HTTP attempts made, retries included.
        attempts: u32,
        /// The start of the last error body (at most 2,000 characters).
        body: String,
    },
    /// No connection, or it broke.
    #[error("{url}: {message}")]
    Transport {
        /// The URL called (empty when the client itself could not be built).
        url: String,
        /// The transport error.
        message: String,
    },
    /// Nothing within the timeout (the first byte, or between two events of a stream).
    #[error("{url}: no answer within {seconds} s")]
    Timeout {
        /// The URL called.
        url: String,
        /// The timeout that ran out, in seconds.
        seconds: u64,
    },
    /// The stream did not have the shape the API gives it, or was too large.
    #[error("{url}: {message}")]
    Protocol {
        /// The URL called.
        url: String,
        /// What did not match the API.
        message: String,
    },
    /// The provider reported an error inside the stream.
    #[error("{url}: the model reported an error: {message}")]
    Model {
        /// The URL called.
        url: String,
        /// The provider's error message.
        message: String,
    },
    /// The caller cancelled the call; the connection was dropped.
    #[error("cancelled")]
    Cancelled,
}

impl LlmError {
    /// Every code [`LlmError::code`] returns, each produced by a test.
    pub const CODES: &'static [&'static str] = &[
        "model_registry_invalid",
        "unknown_model",
        "llm_credentials",
        "llm_http_status",
        "llm_transport",
        "llm_timeout",
        "llm_protocol",
        "llm_model_error",
        "cancelled",
    ];

    /// The stable machine-readable code of the error (one of [`Self::CODES`]).
    pub fn code(&self) -> &'static str {
        match self {
            LlmError::Registry { .. } => "model_registry_invalid",
            LlmError::UnknownModel { .. } => "unknown_model",
            LlmError::Credentials { .. } => "llm_credentials",
            LlmError::Status { .. } => "llm_http_status",
            LlmError::Transport { .. } => "llm_transport",
            LlmError::Timeout { .. } => "llm_timeout",
            LlmError::Protocol { .. } => "llm_protocol",
            LlmError::Model { .. } => "llm_model_error",
            LlmError::Cancelled => "cancelled",
        }
    }
}
