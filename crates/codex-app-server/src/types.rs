//! Parameters of the requests a runtime sends, with the field names of the app-server's
//! generated JSON schema (`app-server generate-json-schema`, Codex 0.169.0). Absent options are
//! omitted from the JSON, so the server's defaults (and the Codex home's config) apply.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A JSON-RPC request id: Codex's own server→client requests may use either form.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    Int(i64),
    Str(String),
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestId::Int(i) => write!(f, "{i}"),
            RequestId::Str(s) => write!(f, "{s:?}"),
        }
    }
}

/// `ClientInfo`.
#[derive(Debug, Clone, Serialize)]
pub struct ClientInfo {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub version: String,
}

/// `InitializeCapabilities` (the fields a runtime sets).
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeCapabilities {
    /// Opt into experimental methods and fields (`thread/start.dynamicTools`, ...).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub experimental_api: bool,
    /// Notification methods the server should not send on this connection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opt_out_notification_methods: Option<Vec<String>>,
}

/// `InitializeParams`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeParams {
    pub client_info: ClientInfo,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<InitializeCapabilities>,
}

impl InitializeParams {
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        InitializeParams {
            client_info: ClientInfo {
                name: name.into(),
                title: None,
                version: version.into(),
            },
            capabilities: None,
        }
    }

    /// Declares `capabilities.experimentalApi = true`.
    pub fn experimental_api(mut self) -> Self {
        self.capabilities
            .get_or_insert_with(Default::default)
            .experimental_api = true;
        self
    }
}

impl Default for InitializeParams {
    fn default() -> Self {
        InitializeParams::new("codex-app-server-rs", env!("CARGO_PKG_VERSION"))
    }
}

/// `AskForApproval` (the string forms; the `granular` object form can go through `config`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalPolicy {
    Untrusted,
    OnRequest,
    Never,
}

/// `SandboxMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    ReadOnly,
    WorkspaceWrite,
    DangerFullAccess,
}

/// `ThreadStartParams` (the non-experimental fields a runtime sets).
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadStartParams {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_provider: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_policy: Option<ApprovalPolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxMode>,
    /// Replaces Codex's built-in base instructions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_instructions: Option<String>,
    /// Added as a developer message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub developer_instructions: Option<String>,
    /// Config overrides, as `-c` would give them (`{"model_reasoning_effort": "low"}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<Map<String, Value>>,
    /// A thread that is not persisted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ephemeral: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
}

/// `UserInput` (text only: what a runtime sends).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum UserInput {
    Text { text: String },
}

/// `TurnStartParams` (the non-experimental fields a runtime sets).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnStartParams {
    pub thread_id: String,
    pub input: Vec<UserInput>,
    /// A JSON Schema for the turn's final assistant message; Codex sends it to the model as
    /// the Responses API's `text.format` (`{"type": "json_schema", ...}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_policy: Option<ApprovalPolicy>,
    /// `SandboxPolicy` object (`{"type": "workspaceWrite", ...}`), as the schema gives it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox_policy: Option<Value>,
    /// `ReasoningEffort` (`"low"`, `"medium"`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
}

impl TurnStartParams {
    pub fn text(thread_id: impl Into<String>, text: impl Into<String>) -> Self {
        TurnStartParams {
            thread_id: thread_id.into(),
            input: vec![UserInput::Text { text: text.into() }],
            output_schema: None,
            cwd: None,
            model: None,
            approval_policy: None,
            sandbox_policy: None,
            effort: None,
        }
    }
}

/// `TurnInterruptParams`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnInterruptParams {
    pub thread_id: String,
    pub turn_id: String,
}

/// `ThreadGoalStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum GoalStatus {
    Active,
    Paused,
    Blocked,
    UsageLimited,
    BudgetLimited,
    Complete,
}

/// `ThreadGoalSetParams`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadGoalSetParams {
    pub thread_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub objective: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<GoalStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_budget: Option<i64>,
}

/// `ThreadGoal`, as `thread/goal/set` and `thread/goal/get` return it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadGoal {
    pub thread_id: String,
    pub objective: String,
    pub status: GoalStatus,
    #[serde(default)]
    pub token_budget: Option<i64>,
    pub tokens_used: i64,
    pub time_used_seconds: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn params_use_the_schema_names_and_omit_absent_options() {
        let p = ThreadStartParams {
            cwd: Some("/w".into()),
            approval_policy: Some(ApprovalPolicy::Never),
            sandbox: Some(SandboxMode::WorkspaceWrite),
            developer_instructions: Some("be brief".into()),
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            json!({"cwd": "/w", "approvalPolicy": "never", "sandbox": "workspace-write",
                   "developerInstructions": "be brief"})
        );
        let mut t = TurnStartParams::text("th", "hi");
        t.output_schema = Some(json!({"type": "object"}));
        assert_eq!(
            serde_json::to_value(&t).unwrap(),
            json!({"threadId": "th", "input": [{"type": "text", "text": "hi"}],
                   "outputSchema": {"type": "object"}})
        );
        let g = ThreadGoalSetParams {
            thread_id: "th".into(),
            objective: Some("ship".into()),
            status: Some(GoalStatus::BudgetLimited),
            token_budget: Some(5),
        };
        assert_eq!(
            serde_json::to_value(&g).unwrap(),
            json!({"threadId": "th", "objective": "ship", "status": "budgetLimited",
                   "tokenBudget": 5})
        );
        assert_eq!(
            serde_json::to_value(InitializeParams::new("n", "1").experimental_api()).unwrap(),
            json!({"clientInfo": {"name": "n", "version": "1"},
                   "capabilities": {"experimentalApi": true}})
        );
    }
}
