//! The `mmo_mesh` Agent-MCP server, on rmcp: its tools (a tool router per right a role needs
//! to see them; the same check decides list and call), the operator's `session/*` methods, and
//! the socket it is served on (`transport`). The caller is whoever the supervisor identified
//! the connection as; nothing in a request can change that.

mod operator;
pub mod transport;

use crate::jobs::{
    ControlArgs, DispositionArgs, JobArgs, ResultArgs, RunArgs, SpawnArgs, TraceArgs,
    TraceRecordArgs, WaitArgs,
};
use crate::store::{PACKAGE_VERSION, Run};
use crate::team::{MeshError, MeshResult, Team};
use rmcp::handler::server::common::Extension;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest,
    CustomResult, ErrorCode, Implementation, JsonObject, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, tool, tool_router};
use schemars::JsonSchema;
use serde_json::{Value, json};
use std::sync::{Arc, LazyLock};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tool_schema::{Strict, schema_of, tagged_as_object};

/// One connection's server: the session, and who the connection is.
pub struct MeshServer {
    team: Arc<Team>,
    /// The caller's run as the connection opened (its ref and role never change; its row is
    /// read again for every call).
    caller: Run,
    /// The caller is the operator acting as the root (not the root's own host): only the
    /// operator controls the root itself, and only the operator has `session/*`.
    operator: bool,
}

/// The caller's run as it is now, for a tool call (set by `call_tool`).
#[derive(Clone)]
struct Caller(Run);

/// Serves one connection of the session socket until its peer is done: `mmo_mesh` to a known
/// caller, or a refusal of everything to a peer with no identity here (`caller` says which).
pub async fn serve(team: Arc<Team>, stream: UnixStream, caller: Result<(Run, bool), String>) {
    let (read, mut write) = stream.into_split();
    let (out, mut frames) = tokio::sync::mpsc::unbounded_channel::<String>();
    let writer = tokio::spawn(async move {
        while let Some(line) = frames.recv().await {
            if write.write_all(line.as_bytes()).await.is_err()
                || write.write_all(b"\n").await.is_err()
            {
                break;
            }
        }
    });
    match caller {
        Err(why) => transport::refuse(BufReader::new(read), out, &why).await,
        Ok((caller, operator)) => {
            let server = MeshServer {
                team,
                caller,
                operator,
            };
            let lines = transport::LineTransport::new(BufReader::new(read), out);
            if let Ok(running) = rmcp::serve_server(server, lines).await {
                let _ = running.waiting().await;
            }
        }
    }
    let _ = writer.await;
}

/// The rights a role has that decide which tools it sees.
#[derive(Clone, Copy)]
struct Rights {
    /// The role can spawn (`can_spawn` is not empty): spawn, wait and the result lifecycle.
    spawn: bool,
    /// The role has a controls table and is not low-trust.
    control: bool,
}

/// The tool routers, by the right a role needs to see their tools.
struct Catalog {
    /// Spawn, wait and the result lifecycle.
    spawn: ToolRouter<MeshServer>,
    /// `agent_control`.
    control: ToolRouter<MeshServer>,
    /// Inspection and traces: either right.
    either: ToolRouter<MeshServer>,
}

static CATALOG: LazyLock<Catalog> = LazyLock::new(|| Catalog {
    spawn: MeshServer::spawn_tools(),
    control: MeshServer::control_tools(),
    either: MeshServer::inspection_tools(),
});

impl Catalog {
    /// The router of a tool, and whether `rights` see it; `None` for an unknown tool.
    fn find(&self, name: &str, rights: Rights) -> Option<(&ToolRouter<MeshServer>, bool)> {
        [
            (&self.spawn, rights.spawn),
            (&self.control, rights.control),
            (&self.either, rights.spawn || rights.control),
        ]
        .into_iter()
        .find(|(router, _)| router.has_route(name))
    }

    /// Every tool `rights` see.
    fn visible(&self, rights: Rights) -> Vec<Tool> {
        let mut tools: Vec<Tool> = [
            (&self.spawn, rights.spawn),
            (&self.control, rights.control),
            (&self.either, rights.spawn || rights.control),
        ]
        .into_iter()
        .filter(|(_, seen)| *seen)
        .flat_map(|(router, _)| router.list_all())
        .collect();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        tools
    }
}

/// The names of every tool this server can serve.
pub fn tool_names() -> Vec<String> {
    let all = Rights {
        spawn: true,
        control: true,
    };
    CATALOG
        .visible(all)
        .into_iter()
        .map(|t| t.name.to_string())
        .collect()
}

/// An input schema as clients read it (`tool_schema::schema_of`).
fn input_schema<T: JsonSchema>() -> Arc<JsonObject> {
    Arc::new(schema_of::<T>().as_object().cloned().unwrap_or_default())
}

/// `agent_control`'s input schema: its tagged arguments as one object.
fn control_input_schema() -> Arc<JsonObject> {
    let schema = tagged_as_object(schema_of::<ControlArgs>(), "action");
    Arc::new(schema.as_object().cloned().unwrap_or_default())
}

/// A tool's answer: the value as structured content and as JSON text; a refusal as a tool
/// error (`isError`) whose text starts with its code.
fn reply(r: MeshResult<Value>) -> CallToolResult {
    match r {
        Ok(v) => CallToolResult::structured(v),
        Err(e) => {
            let mut result = CallToolResult::structured_error(
                json!({"error": {"code": e.code, "message": e.message}}),
            );
            result.content = vec![ContentBlock::text(e.to_string())];
            result
        }
    }
}

#[tool_router(router = spawn_tools)]
impl MeshServer {
    #[tool(
        description = "Start a job: a worker of a role you may spawn, with a task of an admitted kind (low-trust roles take `literal_task`). Returns the job, its agent_run_ref and progress_revision; a refusal names the limit it hit.",
        input_schema = input_schema::<SpawnArgs>()
    )]
    async fn agents_spawn(
        &self,
        Extension(Caller(caller)): Extension<Caller>,
        Parameters(Strict(a)): Parameters<Strict<SpawnArgs>>,
    ) -> CallToolResult {
        reply(crate::jobs::spawn(&self.team, &caller, a).await)
    }

    #[tool(
        description = "Wait for the first durable change of any listed job (pass the progress_revision you last saw for each); returns at once when every listed job is terminal. Returns compact states, never results.",
        input_schema = input_schema::<WaitArgs>()
    )]
    async fn agents_wait(
        &self,
        Extension(Caller(caller)): Extension<Caller>,
        Parameters(Strict(a)): Parameters<Strict<WaitArgs>>,
    ) -> CallToolResult {
        reply(crate::jobs::wait(&self.team, &caller, a).await)
    }

    #[tool(
        description = "Read a job's result: the whole JSON value when it fits, else a page of text with cursor/next_cursor (follow next_cursor until null). Reading marks it read.",
        input_schema = input_schema::<ResultArgs>()
    )]
    async fn agent_result(
        &self,
        Extension(Caller(caller)): Extension<Caller>,
        Parameters(Strict(a)): Parameters<Strict<ResultArgs>>,
    ) -> CallToolResult {
        reply(crate::jobs::result(&self.team, &caller, a))
    }

    #[tool(
        description = "Accept a completed job's read result, with a reason. Only the job's spawner may; stopped, failed and cancelled jobs never can be accepted.",
        input_schema = input_schema::<DispositionArgs>()
    )]
    async fn agent_result_accept(
        &self,
        Extension(Caller(caller)): Extension<Caller>,
        Parameters(Strict(a)): Parameters<Strict<DispositionArgs>>,
    ) -> CallToolResult {
        reply(crate::jobs::dispose(&self.team, &caller, a, true))
    }

    #[tool(
        description = "Reject a job's result, with a reason. Rejection is final.",
        input_schema = input_schema::<DispositionArgs>()
    )]
    async fn agent_result_reject(
        &self,
        Extension(Caller(caller)): Extension<Caller>,
        Parameters(Strict(a)): Parameters<Strict<DispositionArgs>>,
    ) -> CallToolResult {
        reply(crate::jobs::dispose(&self.team, &caller, a, false))
    }

    #[tool(
        description = "Apply an accepted writer job's patch to the canonical checkout, after verifying its identity, scope and lease.",
        input_schema = input_schema::<JobArgs>()
    )]
    async fn agent_patch_integrate(
        &self,
        Extension(Caller(caller)): Extension<Caller>,
        Parameters(Strict(a)): Parameters<Strict<JobArgs>>,
    ) -> CallToolResult {
        reply(crate::jobs::integrate(&self.team, &caller, a))
    }
}

#[tool_router(router = inspection_tools)]
impl MeshServer {
    #[tool(
        description = "A page of an agent run's trace (items, commands, tool calls; private reasoning is never included). Long records carry a record_cursor.",
        input_schema = input_schema::<TraceArgs>()
    )]
    async fn agent_trace(
        &self,
        Extension(Caller(caller)): Extension<Caller>,
        Parameters(Strict(a)): Parameters<Strict<TraceArgs>>,
    ) -> CallToolResult {
        reply(crate::jobs::trace(&self.team, &caller, a))
    }

    #[tool(
        description = "The complete text of one truncated trace record, in checksummed pages.",
        input_schema = input_schema::<TraceRecordArgs>()
    )]
    async fn agent_trace_record(
        &self,
        Extension(Caller(caller)): Extension<Caller>,
        Parameters(Strict(a)): Parameters<Strict<TraceRecordArgs>>,
    ) -> CallToolResult {
        reply(crate::jobs::trace_record(&self.team, &caller, a))
    }

    #[tool(
        description = "An agent run's state, revisions, scope, result and patch status.",
        input_schema = input_schema::<RunArgs>()
    )]
    async fn agent_inspect(
        &self,
        Extension(Caller(caller)): Extension<Caller>,
        Parameters(Strict(a)): Parameters<Strict<RunArgs>>,
    ) -> CallToolResult {
        reply(crate::jobs::inspect(&self.team, &caller, a))
    }
}

#[tool_router(router = control_tools)]
impl MeshServer {
    #[tool(
        description = "Control a run your role may control: `inspect`, `trace`; and, each with the control_revision from inspection (a stale revision fails before delivery; `delivery_unknown` means inspect before retrying): `steer` (a `message` for its active turn), `interrupt` (its turn ends, the job pauses), `pause` (cold: host retired, evidence kept), `continue` (a paused job on its own thread, after admission again), `finalize` (its final result now, within its finalization grace), `set_effort` (`effort` for its next turns), `respond` (`response` to a pending input's `request_id`), `stop`.",
        input_schema = control_input_schema()
    )]
    async fn agent_control(
        &self,
        Extension(Caller(caller)): Extension<Caller>,
        Parameters(Strict(a)): Parameters<Strict<ControlArgs>>,
    ) -> CallToolResult {
        reply(crate::jobs::control(&self.team, &caller, self.operator, a).await)
    }
}

impl MeshServer {
    /// What the caller's role may see.
    fn rights(&self) -> Rights {
        match self.team.role(&self.caller.role) {
            Ok(role) => Rights {
                spawn: !role.can_spawn.is_empty(),
                control: !role.controls.is_empty() && role.trust != "low",
            },
            Err(_) => Rights {
                spawn: false,
                control: false,
            },
        }
    }
}

/// What rmcp's `Parameters` says about arguments that do not decode: a tool error with this
/// text before `tool_schema::decode`'s message.
const UNDECODED: &str = "failed to deserialize parameters:";

/// A tool's answer as `mmo_mesh` gives it: arguments that did not decode (rmcp answers them as
/// an unstructured tool error) are an `invalid_arguments` refusal like any other.
fn with_argument_errors(answer: CallToolResponse) -> CallToolResponse {
    let CallToolResponse::Complete(result) = &answer else {
        return answer;
    };
    if result.is_error != Some(true) || result.structured_content.is_some() {
        return answer;
    }
    let text = result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default();
    let message = text.strip_prefix(UNDECODED).unwrap_or(&text).trim_start();
    reply(Err(MeshError::new("invalid_arguments", message))).into()
}

impl ServerHandler for MeshServer {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder().enable_tools().build();
        if let Some(tools) = capabilities.tools.as_mut() {
            tools.list_changed = Some(false);
        }
        let mut info = ServerConfig::new(capabilities);
        info.server_info = Implementation::new("mmo_mesh", PACKAGE_VERSION);
        info.with_instructions(format!(
            "Agent-MCP server of codex-mmo session {}; you are agent run {} (role `{}`).",
            self.team.session, self.caller.run_ref, self.caller.role
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            CATALOG.visible(self.rights()),
        ))
    }

    /// The same visibility check as `list_tools`, then the tool with the caller as it is now.
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        mut context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let Some((router, seen)) = CATALOG.find(&name, self.rights()) else {
            return Ok(reply(Err(MeshError::new(
                "unknown_tool",
                format!("mmo_mesh has no tool `{name}`"),
            )))
            .into());
        };
        if !seen {
            return Ok(reply(Err(MeshError::new(
                "tool_not_granted",
                format!(
                    "role `{}` cannot use `{name}` (it needs spawn or control rights this role does not have)",
                    self.caller.role
                ),
            )))
            .into());
        }
        let now = self
            .team
            .store
            .run(&self.caller.run_ref)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        context.extensions.insert(Caller(now));
        let answer = router
            .call(ToolCallContext::new(self, request, context))
            .await?;
        Ok(with_argument_errors(answer))
    }

    /// `session/*`: the operator's methods on the session (`inspect`, `stop`, `events`).
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        let method = request.method.as_str();
        let refused = |code: i32, message: String| ErrorData::new(ErrorCode(code), message, None);
        let Some(op) = method.strip_prefix("session/") else {
            return Err(refused(
                -32601,
                format!("mmo_mesh does not serve `{method}`"),
            ));
        };
        if !self.operator {
            return Err(refused(
                -32001,
                format!(
                    "refused: `{method}` is for the operator, and agent run {} is not the operator",
                    self.caller.run_ref
                ),
            ));
        }
        let params = request.params.unwrap_or(Value::Null);
        operator::call(&self.team, op, params)
            .await
            .map(CustomResult)
            .map_err(|(code, message)| refused(code, message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_is_served_once_under_its_name() {
        let mut names = tool_names();
        names.sort();
        assert_eq!(
            names,
            [
                "agent_control",
                "agent_inspect",
                "agent_patch_integrate",
                "agent_result",
                "agent_result_accept",
                "agent_result_reject",
                "agent_trace",
                "agent_trace_record",
                "agents_spawn",
                "agents_wait",
            ]
        );
        let only_spawn = Rights {
            spawn: true,
            control: false,
        };
        let seen: Vec<String> = CATALOG
            .visible(only_spawn)
            .iter()
            .map(|t| t.name.to_string())
            .collect();
        assert!(!seen.contains(&"agent_control".to_string()), "{seen:?}");
        assert!(seen.contains(&"agent_inspect".to_string()), "{seen:?}");
        assert!(matches!(
            CATALOG.find("agent_control", only_spawn),
            Some((_, false))
        ));
        assert!(CATALOG.find("nope", only_spawn).is_none());
        for t in CATALOG.visible(Rights {
            spawn: true,
            control: true,
        }) {
            let schema = Value::Object(t.input_schema.as_ref().clone());
            assert!(
                tool_schema::portability_problems(&schema).is_empty(),
                "{}: {schema}",
                t.name
            );
        }
    }

    #[test]
    fn arguments_that_do_not_decode_are_an_invalid_arguments_refusal() {
        let undecoded = CallToolResult::error(vec![ContentBlock::text(
            "failed to deserialize parameters: invalid argument `role`: invalid type: integer `1`, expected a string",
        )]);
        let CallToolResponse::Complete(r) = with_argument_errors(undecoded.into()) else {
            panic!("not a tool result");
        };
        assert_eq!(r.is_error, Some(true));
        assert_eq!(
            r.structured_content,
            Some(
                json!({"error": {"code": "invalid_arguments", "message": "invalid argument `role`: invalid type: integer `1`, expected a string"}})
            )
        );
        assert_eq!(
            r.content[0].as_text().unwrap().text,
            "[invalid_arguments] invalid argument `role`: invalid type: integer `1`, expected a string"
        );
        // A tool's own answer passes unchanged.
        let own = reply(Err(MeshError::new("not_visible", "no")));
        let CallToolResponse::Complete(r) = with_argument_errors(own.clone().into()) else {
            panic!("not a tool result");
        };
        assert_eq!(r, own);
    }
}
