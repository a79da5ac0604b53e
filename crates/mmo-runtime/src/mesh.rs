//! The `mmo_mesh` Agent-MCP server: the tool catalog, which tools a role sees (the same check
//! decides list and call), and MCP's JSON-RPC framing. The caller is whoever the supervisor
//! identified the connection as; nothing in a request can change that.

use crate::jobs;
use crate::store::Run;
use crate::team::{MeshError, MeshResult, Team};
use serde_json::{Value, json};
use std::sync::Arc;
use tool_schema::{decode, schema_of};

/// MCP protocol versions this server speaks (the newest first).
const PROTOCOLS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// Which capability a tool needs from the caller's role.
#[derive(Clone, Copy, PartialEq)]
enum Needs {
    /// The role can spawn (`can_spawn` is not empty): spawn, wait and the result lifecycle.
    Spawn,
    /// The role has a controls table.
    Control,
    /// Either: inspection and traces.
    Either,
}

struct Tool {
    name: &'static str,
    description: &'static str,
    needs: Needs,
    schema: fn() -> Value,
}

const TOOLS: &[Tool] = &[
    Tool {
        name: "agents_spawn",
        description: "Start a job: a worker of a role you may spawn, with a task of an admitted kind (low-trust roles take `literal_task`). Returns the job, its agent_run_ref and progress_revision; a refusal names the limit it hit.",
        needs: Needs::Spawn,
        schema: schema_of::<jobs::SpawnArgs>,
    },
    Tool {
        name: "agents_wait",
        description: "Wait for the first durable change of any listed job (pass the progress_revision you last saw for each); returns at once when every listed job is terminal. Returns compact states, never results.",
        needs: Needs::Spawn,
        schema: schema_of::<jobs::WaitArgs>,
    },
    Tool {
        name: "agent_result",
        description: "Read a job's result: the whole JSON value when it fits, else a page of text with cursor/next_cursor (follow next_cursor until null). Reading marks it read.",
        needs: Needs::Spawn,
        schema: schema_of::<jobs::ResultArgs>,
    },
    Tool {
        name: "agent_result_accept",
        description: "Accept a completed job's read result, with a reason. Only the job's spawner may; stopped, failed and cancelled jobs never can be accepted.",
        needs: Needs::Spawn,
        schema: schema_of::<jobs::DispositionArgs>,
    },
    Tool {
        name: "agent_result_reject",
        description: "Reject a job's result, with a reason. Rejection is final.",
        needs: Needs::Spawn,
        schema: schema_of::<jobs::DispositionArgs>,
    },
    Tool {
        name: "agent_patch_integrate",
        description: "Apply an accepted writer job's patch to the canonical checkout, after verifying its identity, scope and lease.",
        needs: Needs::Spawn,
        schema: schema_of::<jobs::JobArgs>,
    },
    Tool {
        name: "agent_trace",
        description: "A page of an agent run's trace (items, commands, tool calls; private reasoning is never included). Long records carry a record_cursor.",
        needs: Needs::Either,
        schema: schema_of::<jobs::TraceArgs>,
    },
    Tool {
        name: "agent_trace_record",
        description: "The complete text of one truncated trace record, in checksummed pages.",
        needs: Needs::Either,
        schema: schema_of::<jobs::TraceRecordArgs>,
    },
    Tool {
        name: "agent_inspect",
        description: "An agent run's state, revisions, scope, result and patch status.",
        needs: Needs::Either,
        schema: schema_of::<jobs::RunArgs>,
    },
    Tool {
        name: "agent_control",
        description: "Control a run your role may control: `inspect`, `trace`; and, each with the control_revision from inspection (a stale revision fails before delivery; `delivery_unknown` means inspect before retrying): `steer` (a `message` for its active turn), `interrupt` (its turn ends, the job pauses), `pause` (cold: host retired, evidence kept), `continue` (a paused job on its own thread, after admission again), `finalize` (its final result now, within its finalization grace), `set_effort` (`effort` for its next turns), `respond` (`response` to a pending input's `request_id`), `stop`.",
        needs: Needs::Control,
        schema: control_schema,
    },
];

/// The names of every tool this server can serve.
pub fn tool_names() -> Vec<&'static str> {
    TOOLS.iter().map(|t| t.name).collect()
}

fn visible(team: &Team, caller: &Run, tool: &Tool) -> bool {
    let Ok(role) = team.role(&caller.role) else {
        return false;
    };
    let spawn = !role.can_spawn.is_empty();
    let control = !role.controls.is_empty() && role.trust != "low";
    match tool.needs {
        Needs::Spawn => spawn,
        Needs::Control => control,
        Needs::Either => spawn || control,
    }
}

/// The tools the caller's role sees.
pub fn list(team: &Team, caller: &Run) -> Value {
    let tools: Vec<Value> = TOOLS
        .iter()
        .filter(|t| visible(team, caller, t))
        .map(|t| json!({"name": t.name, "description": t.description, "inputSchema": (t.schema)()}))
        .collect();
    json!({ "tools": tools })
}

/// Calls a tool as `caller`: the same visibility check as `list`, then strict decoding.
/// `operator` says the caller is the operator acting as the root (not the root's own host):
/// only the operator controls the root itself.
pub async fn call(
    team: &Arc<Team>,
    caller: &Run,
    operator: bool,
    name: &str,
    args: Value,
) -> MeshResult<Value> {
    let Some(tool) = TOOLS.iter().find(|t| t.name == name) else {
        return Err(MeshError::new(
            "unknown_tool",
            format!("mmo_mesh has no tool `{name}`"),
        ));
    };
    if !visible(team, caller, tool) {
        return Err(MeshError::new(
            "tool_not_granted",
            format!(
                "role `{}` cannot use `{name}` (it needs spawn or control rights this role does not have)",
                caller.role
            ),
        ));
    }
    let bad = |e: tool_schema::DecodeError| MeshError::new("invalid_arguments", e.to_string());
    match name {
        "agents_spawn" => jobs::spawn(team, caller, decode(args).map_err(bad)?).await,
        "agents_wait" => jobs::wait(team, caller, decode(args).map_err(bad)?).await,
        "agent_result" => jobs::result(team, caller, decode(args).map_err(bad)?),
        "agent_result_accept" => jobs::dispose(team, caller, decode(args).map_err(bad)?, true),
        "agent_result_reject" => jobs::dispose(team, caller, decode(args).map_err(bad)?, false),
        "agent_patch_integrate" => jobs::integrate(team, caller, decode(args).map_err(bad)?),
        "agent_trace" => jobs::trace(team, caller, decode(args).map_err(bad)?),
        "agent_trace_record" => jobs::trace_record(team, caller, decode(args).map_err(bad)?),
        "agent_inspect" => jobs::inspect(team, caller, decode(args).map_err(bad)?),
        "agent_control" => jobs::control(team, caller, operator, decode(args).map_err(bad)?).await,
        _ => Err(MeshError::new(
            "unknown_tool",
            format!("mmo_mesh has no tool `{name}`"),
        )),
    }
}

/// An MCP `tools/call` result: the value as structured content and as JSON text; a refusal as
/// a tool error (`isError`) whose text starts with its code.
pub fn tool_result(r: MeshResult<Value>) -> Value {
    match r {
        Ok(v) => json!({
            "content": [{"type": "text", "text": v.to_string()}],
            "structuredContent": v,
            "isError": false,
        }),
        Err(e) => json!({
            "content": [{"type": "text", "text": e.to_string()}],
            "structuredContent": {"error": {"code": e.code, "message": e.message}},
            "isError": true,
        }),
    }
}

/// Answers one MCP request (`None` for a notification). Unknown methods are JSON-RPC errors.
pub async fn handle(
    team: &Arc<Team>,
    caller: &Run,
    operator: bool,
    method: &str,
    params: Value,
) -> Option<Result<Value, (i64, String)>> {
    match method {
        "initialize" => {
            let asked = params
                .get("protocolVersion")
                .and_then(Value::as_str)
                .unwrap_or("");
            let version = PROTOCOLS
                .iter()
                .find(|v| **v == asked)
                .copied()
                .unwrap_or(PROTOCOLS[0]);
            Some(Ok(json!({
                "protocolVersion": version,
                "capabilities": {"tools": {"listChanged": false}},
                "serverInfo": {"name": "mmo_mesh", "version": crate::store::PACKAGE_VERSION},
                "instructions": format!("Agent-MCP server of codex-mmo session {}; you are agent run {} (role `{}`).", team.session, caller.run_ref, caller.role),
            })))
        }
        "ping" => Some(Ok(json!({}))),
        "tools/list" => Some(Ok(list(team, caller))),
        "tools/call" => {
            let name = params
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let args = params
                .get("arguments")
                .cloned()
                .unwrap_or_else(|| json!({}));
            Some(Ok(tool_result(
                call(team, caller, operator, &name, args).await,
            )))
        }
        m if m.starts_with("notifications/") => None,
        m => Some(Err((-32601, format!("mmo_mesh does not serve `{m}`")))),
    }
}

/// `agent_control`'s input schema: its tagged arguments as one object.
fn control_schema() -> Value {
    tool_schema::tagged_as_object(schema_of::<jobs::ControlArgs>(), "action")
}
