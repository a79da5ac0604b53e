//! The Agent-MCP tools' arguments: each type is its tool's input schema (`mesh`) and its
//! strict decoding (`tool_schema::decode`), so the two never disagree.

use mmo_profile::model::LiteralTask;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// `literal_task`: what a low-trust role is asked to do, as data.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LiteralTaskArgs {
    /// One of `locate`, `references`, `extract`, `summarize_supplied`.
    pub operation: String,
    /// A workspace-relative path of a regular file.
    pub path: String,
    /// First line (1-based) of the range, if any.
    pub start_line: Option<u32>,
    /// Last line (inclusive) of the range, if any.
    pub end_line: Option<u32>,
    /// What to locate or find references of.
    pub query: Option<String>,
}

impl From<LiteralTaskArgs> for LiteralTask {
    fn from(a: LiteralTaskArgs) -> LiteralTask {
        LiteralTask {
            operation: a.operation,
            path: a.path,
            start_line: a.start_line,
            end_line: a.end_line,
            query: a.query,
        }
    }
}

/// `agents_spawn`
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SpawnArgs {
    /// The role to run (one your role may spawn).
    pub role: String,
    /// The task in prose (normal roles).
    pub task: Option<String>,
    /// The task's admission category, one of the role's `allowed_task_kinds`.
    pub task_kind: Option<String>,
    /// Canonical workspace-relative paths a writer may change (files or directories).
    pub write_scope: Option<Vec<String>>,
    /// The typed task of a low-trust role (instead of `task`/`task_kind`).
    pub literal_task: Option<LiteralTaskArgs>,
}

/// `agents_wait`
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitArgs {
    /// The `progress_revision` you last observed, per job; wakes on the first that differs.
    pub after_revision: BTreeMap<String, i64>,
    /// How long to wait at most (default 60, at most 600 seconds).
    pub timeout_seconds: Option<u32>,
    /// Include a bounded preview of terminal jobs' results.
    pub preview: Option<bool>,
}

/// `agent_result`
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResultArgs {
    pub job: String,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// Characters per page (default `default_result_chars`, at most `max_result_chars`).
    pub max_chars: Option<u32>,
}

/// `agent_result_accept` / `agent_result_reject`
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DispositionArgs {
    pub job: String,
    /// Why (recorded in the audit log).
    pub reason: String,
}

/// `agent_patch_integrate`
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JobArgs {
    pub job: String,
}

/// `agent_inspect`
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunArgs {
    pub agent_run_ref: String,
}

/// `agent_trace`
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TraceArgs {
    pub agent_run_ref: String,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// Only these event kinds (e.g. `agentMessage`, `commandExecution`, `fileChange`, `mcpToolCall`, `turn`).
    pub filter: Option<Vec<String>>,
}

/// `agent_trace_record`
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TraceRecordArgs {
    /// The `record_cursor` of a truncated trace record.
    pub record_cursor: String,
    /// Page number, from 0.
    pub page: Option<u32>,
}

/// `agent_control`: every action of the control graph. Each action takes its own arguments
/// beside `agent_run_ref` (and the `control_revision` from your last inspection, for those that
/// change the run); an argument of another action is refused.
// Clients see it as one object schema (`tool_schema::tagged_as_object`), as they always have.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(tag = "action", rename_all = "snake_case", deny_unknown_fields)]
pub enum ControlArgs {
    /// Its state, revisions, scope, result and patch status.
    Inspect(Target),
    /// Its trace, filtered and paginated as `agent_trace`.
    Trace(TraceControl),
    /// More input (`message`) for the run's active turn.
    Steer(Steer),
    /// Its active turn ends through the app-server and the job pauses on its thread.
    Interrupt(Target),
    /// Cold: its partial evidence kept, its host retired, its admission slots released.
    Pause(Target),
    /// A paused job on its own thread, after admission again (a goal-mode run may get a larger
    /// `goal_token_budget`); a detached one is reattached.
    Continue(Continue),
    /// The job is asked for its final result from the evidence it has, within its role's
    /// finalization_grace_seconds, then stopped if it has not finished.
    Finalize(Target),
    /// `effort` for its next turns, within its role's allowed_reasoning_efforts and its model's.
    SetEffort(SetEffort),
    /// `response` to a pending input named by `request_id`, as inspection's `pending_inputs`
    /// lists them.
    Respond(Respond),
    /// The controller stops following a running job: it keeps its host and admission, its
    /// evidence so far is kept as partial, and `continue` reattaches.
    Detach(Target),
    /// A paused or suspended job's durable thread is compacted by the app-server, for a smaller
    /// continuation.
    Compact(Target),
    /// A new job of the same role and parent on a fork of a paused, suspended or ended job's
    /// persisted thread, after admission, with `message` as its input.
    Fork(Fork),
    /// The run is stopped.
    Stop(Target),
}

impl ControlArgs {
    /// The action's name, as the controls table lists it.
    pub fn action(&self) -> &'static str {
        match self {
            ControlArgs::Inspect(_) => "inspect",
            ControlArgs::Trace(_) => "trace",
            ControlArgs::Steer(_) => "steer",
            ControlArgs::Interrupt(_) => "interrupt",
            ControlArgs::Pause(_) => "pause",
            ControlArgs::Continue(_) => "continue",
            ControlArgs::Finalize(_) => "finalize",
            ControlArgs::SetEffort(_) => "set_effort",
            ControlArgs::Respond(_) => "respond",
            ControlArgs::Detach(_) => "detach",
            ControlArgs::Compact(_) => "compact",
            ControlArgs::Fork(_) => "fork",
            ControlArgs::Stop(_) => "stop",
        }
    }

    /// The run the action is for.
    pub fn agent_run_ref(&self) -> &str {
        match self {
            ControlArgs::Trace(a) => &a.agent_run_ref,
            ControlArgs::Steer(a) => &a.agent_run_ref,
            ControlArgs::Continue(a) => &a.agent_run_ref,
            ControlArgs::SetEffort(a) => &a.agent_run_ref,
            ControlArgs::Respond(a) => &a.agent_run_ref,
            ControlArgs::Fork(a) => &a.agent_run_ref,
            ControlArgs::Inspect(a)
            | ControlArgs::Interrupt(a)
            | ControlArgs::Pause(a)
            | ControlArgs::Finalize(a)
            | ControlArgs::Detach(a)
            | ControlArgs::Compact(a)
            | ControlArgs::Stop(a) => &a.agent_run_ref,
        }
    }
}

/// The arguments of an action that takes nothing but its run (and, when it changes the run, the
/// revision it was decided on).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Target {
    /// The run to control.
    pub agent_run_ref: String,
    /// The `control_revision` from your last inspection (required for every action that
    /// changes the run; `inspect`, `trace` and `fork` need none).
    pub control_revision: Option<i64>,
}

/// `trace`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TraceControl {
    /// The run to control.
    pub agent_run_ref: String,
    /// The `control_revision` from your last inspection (required for every action that
    /// changes the run; `inspect`, `trace` and `fork` need none).
    pub control_revision: Option<i64>,
    /// `trace`: the `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// `trace`: only these event kinds.
    pub filter: Option<Vec<String>>,
}

impl From<TraceControl> for TraceArgs {
    fn from(t: TraceControl) -> TraceArgs {
        TraceArgs {
            agent_run_ref: t.agent_run_ref,
            cursor: t.cursor,
            filter: t.filter,
        }
    }
}

/// `steer`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Steer {
    /// The run to control.
    pub agent_run_ref: String,
    /// The `control_revision` from your last inspection (required for every action that
    /// changes the run; `inspect`, `trace` and `fork` need none).
    pub control_revision: Option<i64>,
    /// The text `steer` adds to the active turn, the input `continue` resumes with, or a
    /// fork's first input.
    pub message: String,
}

/// `continue`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Continue {
    /// The run to control.
    pub agent_run_ref: String,
    /// The `control_revision` from your last inspection (required for every action that
    /// changes the run; `inspect`, `trace` and `fork` need none).
    pub control_revision: Option<i64>,
    /// The text `steer` adds to the active turn, the input `continue` resumes with, or a
    /// fork's first input.
    pub message: Option<String>,
    /// `continue` of a goal-mode run: the goal's new total token budget (Codex counts tokens
    /// cumulatively), larger than its current one and at most its role's
    /// max_goal_token_budget.
    pub goal_token_budget: Option<u64>,
}

/// `set_effort`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetEffort {
    /// The run to control.
    pub agent_run_ref: String,
    /// The `control_revision` from your last inspection (required for every action that
    /// changes the run; `inspect`, `trace` and `fork` need none).
    pub control_revision: Option<i64>,
    /// The reasoning effort `set_effort` chooses.
    pub effort: String,
}

/// `respond`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Respond {
    /// The run to control.
    pub agent_run_ref: String,
    /// The `control_revision` from your last inspection (required for every action that
    /// changes the run; `inspect`, `trace` and `fork` need none).
    pub control_revision: Option<i64>,
    /// `respond`: the pending input answered (its `request_id` from `pending_inputs`).
    pub request_id: String,
    /// `respond`: the answer, as the request's method defines it (for a command approval,
    /// `{"decision": "accept"}` or `"decline"`, one of its `availableDecisions`).
    pub response: Value,
}

/// `fork`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Fork {
    /// The run to control.
    pub agent_run_ref: String,
    /// The `control_revision` from your last inspection (required for every action that
    /// changes the run; `inspect`, `trace` and `fork` need none).
    pub control_revision: Option<i64>,
    /// The text `steer` adds to the active turn, the input `continue` resumes with, or a
    /// fork's first input.
    pub message: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tool_schema::{decode, portability_problems, schema_of, tagged_as_object};

    fn control_schema() -> Value {
        tagged_as_object(schema_of::<ControlArgs>(), "action")
    }

    #[test]
    fn agent_control_is_advertised_with_the_arguments_it_always_had() {
        let before: Value = serde_json::from_str(include_str!(
            "../../tests/fixtures/agent_control.input_schema.json"
        ))
        .unwrap();
        let now = control_schema();
        assert!(portability_problems(&now).is_empty(), "{now:#}");
        let props = |s: &Value| -> Vec<(String, Value)> {
            let mut v: Vec<(String, Value)> = s["properties"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, p)| (k.clone(), p["type"].clone()))
                .collect();
            v.sort_by(|a, b| a.0.cmp(&b.0));
            v
        };
        assert_eq!(props(&now), props(&before), "{now:#}");
        assert_eq!(
            now["properties"]["action"]["enum"],
            before["properties"]["action"]["enum"]
        );
        let mut required: Vec<String> = serde_json::from_value(now["required"].clone()).unwrap();
        required.sort();
        assert_eq!(required, ["action", "agent_run_ref"]);
        assert_eq!(now["additionalProperties"], false);
    }

    #[test]
    fn every_action_decodes_from_the_json_clients_send_and_names_itself() {
        let schema = control_schema();
        for action in schema["properties"]["action"]["enum"].as_array().unwrap() {
            let a: ControlArgs =
                decode(json!({"agent_run_ref": "run_1", "action": action, "control_revision": 3, "message": "m", "effort": "low", "request_id": "r", "response": {}})
                    .as_object()
                    .unwrap()
                    .iter()
                    .filter(|(k, _)| {
                        let name = action.as_str().unwrap();
                        let takes = |f: &str| match name {
                            "steer" => f == "message",
                            "continue" => f == "message",
                            "fork" => f == "message",
                            "set_effort" => f == "effort",
                            "respond" => f == "request_id" || f == "response",
                            _ => false,
                        };
                        matches!(k.as_str(), "agent_run_ref" | "action" | "control_revision")
                            || takes(k)
                    })
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect::<serde_json::Map<String, Value>>()
                    .into())
                .unwrap_or_else(|e| panic!("{action}: {e}"));
            assert_eq!(a.action(), action.as_str().unwrap());
            assert_eq!(a.agent_run_ref(), "run_1");
        }
    }

    #[test]
    fn an_argument_of_another_action_or_a_missing_one_is_invalid() {
        let e = decode::<ControlArgs>(
            json!({"agent_run_ref": "r", "action": "stop", "control_revision": 1, "message": "x"}),
        )
        .unwrap_err();
        assert!(e.message.contains("unknown field `message`"), "{e}");
        let e = decode::<ControlArgs>(
            json!({"agent_run_ref": "r", "action": "steer", "control_revision": 1}),
        )
        .unwrap_err();
        assert!(e.message.contains("missing field `message`"), "{e}");
        assert_eq!(e.code(), "invalid_arguments");
        let e =
            decode::<ControlArgs>(json!({"agent_run_ref": "r", "action": "dance"})).unwrap_err();
        assert!(e.message.contains("unknown variant `dance`"), "{e}");
        // A client sending null for what it does not set still works.
        let a: ControlArgs = decode(json!({"agent_run_ref": "r", "action": "inspect", "control_revision": null, "message": null})).unwrap();
        assert_eq!(a.action(), "inspect");
    }
}
