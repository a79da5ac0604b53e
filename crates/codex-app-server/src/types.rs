//! Parameters of the requests a runtime sends, with the field names of the app-server's
//! generated JSON schema (`app-server generate-json-schema`, Codex 0.169.0). Absent options are
//! omitted from the JSON, so the server's defaults (and the Codex home's config) apply.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A JSON-RPC request id: Codex's own server→client requests may use either form.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    /// An integer id (the ids this client sends).
    Int(i64),
    /// A string id.
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
    /// The client's name, as the server logs and reports it.
    pub name: String,
    /// A display name, when different from `name`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The client's version.
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
    /// Who is connecting.
    pub client_info: ClientInfo,
    /// Opt-ins for this connection; `None` keeps the server's defaults.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<InitializeCapabilities>,
}

impl InitializeParams {
    /// Params naming the client `name` at `version`, with no capabilities.
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
    /// Ask before running any command not known to be safe.
    Untrusted,
    /// The model decides when to ask for approval.
    OnRequest,
    /// Never ask; a command that would need approval fails instead.
    Never,
}

/// `SandboxMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Commands may read files but write nothing.
    ReadOnly,
    /// Commands may write inside the working directory (and temporary directories).
    WorkspaceWrite,
    /// No sandbox at all.
    DangerFullAccess,
}

/// `ThreadStartParams` (the non-experimental fields a runtime sets).
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadStartParams {
    /// The thread's working directory; `None` keeps the server's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The model to use, e.g. `gpt-5`; `None` keeps the configured one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The model provider id from the Codex config; `None` keeps the configured one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_provider: Option<String>,
    /// When commands need approval; `None` keeps the configured policy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_policy: Option<ApprovalPolicy>,
    /// How commands are sandboxed; `None` keeps the configured mode.
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
    /// A name for the client service, recorded with the thread.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
}

/// `UserInput` (text only: what a runtime sends).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum UserInput {
    /// A text message from the user.
    Text {
        /// The message.
        text: String,
    },
}

/// `TurnStartParams` (the non-experimental fields a runtime sets).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnStartParams {
    /// The thread to run the turn on.
    pub thread_id: String,
    /// The user's input for the turn.
    pub input: Vec<UserInput>,
    /// A JSON Schema for the turn's final assistant message; Codex sends it to the model as
    /// the Responses API's `text.format` (`{"type": "json_schema", ...}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Overrides the thread's working directory from this turn on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Overrides the model from this turn on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Overrides the approval policy from this turn on.
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
    /// A turn on `thread_id` whose only input is the user message `text`.
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
    /// The thread of the turn.
    pub thread_id: String,
    /// The turn to interrupt (the id `turn/start` returned).
    pub turn_id: String,
}

/// `ThreadGoalStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum GoalStatus {
    /// The goal is being pursued: an idle thread starts a turn for it by itself.
    Active,
    /// Paused by the client; no turn starts for it.
    Paused,
    /// Stuck: Codex reports it cannot progress without outside help.
    Blocked,
    /// Stopped at the account's usage limit.
    UsageLimited,
    /// Stopped because its `token_budget` is spent.
    BudgetLimited,
    /// Achieved.
    Complete,
}

/// `ThreadGoalSetParams`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadGoalSetParams {
    /// The thread whose goal to set.
    pub thread_id: String,
    /// The new objective; `None` keeps the current one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub objective: Option<String>,
    /// The new status; `None` keeps the current one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<GoalStatus>,
    /// Most tokens the goal may use; `None` keeps the current budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_budget: Option<i64>,
}

/// `ThreadGoal`, as `thread/goal/set` and `thread/goal/get` return it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadGoal {
    /// The thread the goal belongs to.
    pub thread_id: String,
    /// What the goal asks the model to achieve.
    pub objective: String,
    /// Where the goal stands.
    pub status: GoalStatus,
    /// Most tokens the goal may use, if it has a budget.
    #[serde(default)]
    pub token_budget: Option<i64>,
    /// Tokens used so far in pursuit of the goal.
    pub tokens_used: i64,
    /// Time spent on it so far, in seconds.
    pub time_used_seconds: i64,
    /// When it was created (Unix seconds).
    pub created_at: i64,
    /// When it last changed (Unix seconds).
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
