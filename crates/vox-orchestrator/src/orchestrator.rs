//! `Orchestrator`: the booted subsystems, the handler table, and the one call path.

use crate::MAX_MESSAGE_BYTES;
use crate::attention::{Attention, estimate_tokens};
use crate::boot::{self, BootReport};
use crate::call::CallCtx;
use crate::tools::{self, HandlerEntry};
use crate::workspace::Workspace;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};
use vox_mcp_registry::{
    Caller, Denial, DenialCode, ProfileSet, SideEffectClass, TOOL_REGISTRY, ToolEntry,
    authorize_tool, visible_tools,
};
use vox_store::{AttentionEvent, FileSessions, SessionStore, Store, StoreError, now_ms};

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
            other => ToolError::Internal(format!("{other}: {message}")),
        }
    }
    /// The one error shape: `{"error":{"code":…,"message":…}}`.
    pub fn to_json(&self) -> Value {
        json!({"error": {"code": self.code(), "message": self.to_string()}})
    }
}

impl From<StoreError> for ToolError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(m) => ToolError::NotFound(m),
            StoreError::Conflict(m) => ToolError::Conflict(m),
            other => ToolError::Internal(other.to_string()),
        }
    }
}

/// The outcome of one call, before any transport encodes it. It crosses the daemon socket as
/// itself (serde), so the stdio side encodes the same typed value the daemon produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "WireOutcome", try_from = "WireOutcome")]
pub enum ToolOutcome {
    Ok(Value),
    Denied(Denial),
    Failed(ToolError),
}

impl ToolOutcome {
    /// `ok`, the denial code, or the tool error code.
    pub fn label(&self) -> &'static str {
        match self {
            ToolOutcome::Ok(_) => "ok",
            ToolOutcome::Denied(d) => d.code.as_str(),
            ToolOutcome::Failed(e) => e.code(),
        }
    }
    /// The structured content: the value, or the one error shape.
    pub fn to_json(&self) -> Value {
        match self {
            ToolOutcome::Ok(v) => v.clone(),
            ToolOutcome::Denied(d) => d.to_json(),
            ToolOutcome::Failed(e) => e.to_json(),
        }
    }
    /// Whether a client should see `isError: true`.
    pub fn is_error(&self) -> bool {
        !matches!(self, ToolOutcome::Ok(_))
    }
}

/// [`ToolOutcome`] on the daemon socket.
#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum WireOutcome {
    Ok {
        value: Value,
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

/// What a client sees of a tool (MCP field names).
#[derive(Debug, Clone, Serialize)]
pub struct ToolDescriptor {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    #[serde(rename = "inputSchema")]
    pub input_schema: Value,
    pub annotations: Value,
    #[serde(rename = "_meta")]
    pub meta: Value,
    #[serde(skip)]
    pub index: usize,
}

/// The booted subsystems a handler may use. Built once at boot, then read-only.
pub struct Ctx {
    pub workspace: Workspace,
    pub profile: ProfileSet,
    pub store: Option<Arc<Store>>,
    pub sessions: Option<Box<dyn SessionStore>>,
    pub attention: Option<Attention>,
    pub search: Option<crate::tools::search::Search>,
    /// Federated `.vox` tools and resources; present under `dev` only.
    pub workspace_tools: Option<crate::workspace_tools::WorkspaceTools>,
    /// Installed skills; present under `dev` and profiles that serve the skill tools.
    pub skills: Option<crate::skills::Skills>,
    /// Daemon → client notification frames (`notifications/tools/list_changed`, ...).
    pub notifier: tokio::sync::broadcast::Sender<Value>,
    pub boot: BootReport,
}

impl Ctx {
    /// The store, or the error a handler returns without it.
    pub fn store(&self) -> Result<&Store, ToolError> {
        self.store
            .as_deref()
            .ok_or_else(|| ToolError::Unavailable("the journey store is not running".into()))
    }
}

/// The orchestrator of one workspace under one profile.
pub struct Orchestrator {
    ctx: Arc<Ctx>,
    handlers: Arc<Vec<Option<HandlerEntry>>>,
    descriptors: Vec<ToolDescriptor>,
    /// `descriptors` as a loopback writer sees them, encoded once.
    local_tools: Arc<Vec<Value>>,
    timeout: Duration,
}

fn annotations(t: &ToolEntry) -> Value {
    let (read_only, destructive, idempotent, open_world) = match t.side_effect_class {
        SideEffectClass::ReadOnly => (true, false, true, false),
        SideEffectClass::WritesState | SideEffectClass::WritesFiles => (false, false, false, false),
        SideEffectClass::SpawnsProcess => (false, true, false, false),
        SideEffectClass::Network => (false, false, false, true),
        SideEffectClass::Destructive => (false, true, true, false),
    };
    json!({
        "title": t.title, "readOnlyHint": read_only, "destructiveHint": destructive,
        "idempotentHint": idempotent, "openWorldHint": open_world,
    })
}

/// The handler table, indexed like `TOOL_REGISTRY`. Errors name every catalog row without a
/// handler and every handler without a catalog row.
pub fn handler_table() -> Result<Vec<Option<HandlerEntry>>, String> {
    let mut table: Vec<Option<HandlerEntry>> = TOOL_REGISTRY.iter().map(|_| None).collect();
    let mut problems = Vec::new();
    for (name, entry) in tools::handlers() {
        match vox_mcp_registry::tool_by_name(name) {
            Some(t) => table[t.index] = Some(entry),
            None => problems.push(format!("handler {name} has no catalog row")),
        }
    }
    for t in TOOL_REGISTRY.iter().filter(|t| t.built) {
        if table[t.index].is_none() {
            problems.push(format!("catalog tool {} has no handler", t.name));
        }
    }
    if problems.is_empty() {
        Ok(table)
    } else {
        Err(problems.join("; "))
    }
}

impl Orchestrator {
    /// Boots the profile's subsystems for `workspace`.
    pub fn boot(workspace: Workspace, profile: ProfileSet) -> Result<Self, String> {
        let handlers = handler_table()?;
        let mut ctx = Ctx {
            workspace,
            profile: profile.clone(),
            store: None,
            sessions: None,
            attention: None,
            search: None,
            workspace_tools: None,
            skills: None,
            notifier: tokio::sync::broadcast::channel(16).0,
            boot: BootReport::default(),
        };
        let steps = boot_step_table()?;
        let report = boot::boot(&profile, |i| steps[i](&mut ctx));
        ctx.boot = report;
        let serves_skills = profile.is_dev() || profile.tools().iter().any(|t| t.lane == "skills");
        if serves_skills {
            ctx.skills = Some(crate::skills::Skills::hydrate(&ctx.workspace.root));
        }
        let descriptors = TOOL_REGISTRY
            .iter()
            .filter_map(|t| {
                let h = handlers[t.index].as_ref()?;
                Some(ToolDescriptor {
                    name: t.name,
                    title: t.title,
                    description: t.description,
                    input_schema: h.schema.clone(),
                    annotations: annotations(t),
                    meta: json!({
                        "vox_exposure": t.exposure.as_str(),
                        "vox_side_effect_class": t.side_effect_class.as_str(),
                        "vox_requires": t.requires,
                        "vox_lane": t.lane,
                    }),
                    index: t.index,
                })
            })
            .collect();
        let timeout_ms = std::env::var("VOX_TOOL_TIMEOUT_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(30_000);
        let ctx = Arc::new(ctx);
        // Setting up a recursive watch walks the tree: keep it off the boot path.
        let watched = ctx.clone();
        std::thread::spawn(move || crate::workspace_tools::watch(watched));
        let mut orch = Orchestrator {
            ctx,
            handlers: Arc::new(handlers),
            descriptors,
            local_tools: Arc::default(),
            timeout: Duration::from_millis(timeout_ms),
        };
        orch.local_tools = Arc::new(
            orch.list_tools(Caller::LOCAL)
                .into_iter()
                .filter_map(|d| serde_json::to_value(d).ok())
                .collect(),
        );
        Ok(orch)
    }

    /// The boot report.
    pub fn boot_report(&self) -> &BootReport {
        &self.ctx.boot
    }
    /// The active profile.
    pub fn profile(&self) -> &ProfileSet {
        &self.ctx.profile
    }
    /// The workspace.
    pub fn workspace(&self) -> &Workspace {
        &self.ctx.workspace
    }
    /// The shared context (for flushing attention on shutdown).
    pub fn ctx(&self) -> &Arc<Ctx> {
        &self.ctx
    }

    /// Exactly the tools `caller` could call, in name order.
    pub fn list_tools(&self, caller: Caller) -> Vec<&ToolDescriptor> {
        self.list_tools_as(&self.ctx.profile, caller)
    }

    /// [`Self::list_tools`] for a surface narrower than the daemon's profile (an HTTP
    /// allowlist: `ProfileSet::restricted`).
    pub fn list_tools_as(&self, surface: &ProfileSet, caller: Caller) -> Vec<&ToolDescriptor> {
        let mut d = self.descriptors.iter().peekable();
        visible_tools(surface, caller, self.ctx.boot.booted_mask)
            .filter_map(|t| {
                while d.peek().is_some_and(|x| x.index < t.index) {
                    d.next();
                }
                d.peek().filter(|x| x.index == t.index).copied()
            })
            .collect()
    }

    /// Authorizes, dispatches with a deadline, caps the result, and records attention.
    pub async fn call(&self, name: &str, args: Value, call: CallCtx) -> ToolOutcome {
        self.call_inner(&self.ctx.profile, name, args, call, true)
            .await
    }

    /// The tools beyond the static catalog, under `dev`: federated workspace tools (when the
    /// client asks for them, `advertise_workspace`), then skill macro tools, each group in name
    /// order. A macro tool whose name a workspace tool already has is not listed (the workspace
    /// tool is the one called).
    pub fn dynamic_tool_descriptors(&self, advertise_workspace: bool) -> Vec<Value> {
        let mut tools = match &self.ctx.workspace_tools {
            Some(wt) if advertise_workspace => wt.descriptors().as_ref().clone(),
            _ => vec![],
        };
        if let (Some(sk), Some(wt)) = (&self.ctx.skills, &self.ctx.workspace_tools) {
            let surface = wt.surface();
            tools.extend(sk.macro_descriptors().into_iter().filter(|d| {
                d["name"]
                    .as_str()
                    .is_some_and(|n| !surface.tools.contains_key(n))
            }));
        }
        tools
    }

    /// What a socket client (a loopback caller with the write role) lists: the catalog slice
    /// (encoded once at boot), then [`Self::dynamic_tool_descriptors`].
    pub fn tool_list_json(&self, advertise_workspace: bool) -> Vec<Value> {
        let mut tools = self.local_tools.as_ref().clone();
        tools.extend(self.dynamic_tool_descriptors(advertise_workspace));
        tools
    }

    /// Resources: federated workspace resources (under `dev`), then the `skill://` resources.
    pub fn resources(&self) -> Vec<Value> {
        let mut v = self
            .ctx
            .workspace_tools
            .as_ref()
            .map(|wt| wt.resources())
            .unwrap_or_default();
        if let Some(sk) = &self.ctx.skills {
            v.extend(sk.resources());
        }
        v
    }

    /// Reads a resource (workspace or `skill://`).
    pub fn read_resource(&self, uri: &str) -> Result<String, ToolError> {
        let found = match (uri.starts_with("skill://"), &self.ctx.skills) {
            (true, Some(sk)) => sk.read(uri),
            _ => self
                .ctx
                .workspace_tools
                .as_ref()
                .and_then(|wt| wt.read(uri)),
        };
        found.unwrap_or_else(|| Err(ToolError::NotFound(format!("no resource {uri}"))))
    }

    /// The `skill://` resources alone (what the HTTP gateway serves to callers allowed
    /// `vox_skill_list`).
    pub fn skill_resources(&self) -> Vec<Value> {
        self.ctx
            .skills
            .as_ref()
            .map(|sk| sk.resources())
            .unwrap_or_default()
    }

    /// Forgets what was scoped to a session that ended (its active skill).
    pub fn end_session(&self, session: &str) {
        if let Some(sk) = &self.ctx.skills {
            sk.end_session(session);
        }
    }

    /// [`Self::call`] for a surface narrower than the daemon's profile (the HTTP gateway's);
    /// workspace tools are never served there.
    pub async fn call_as(
        &self,
        surface: &ProfileSet,
        name: &str,
        args: Value,
        call: CallCtx,
    ) -> ToolOutcome {
        let outcome = self.call_inner(surface, name, args, call, false).await;
        match outcome {
            // The daemon's profile serves the tool; this gateway's allowlist is what refused it.
            ToolOutcome::Denied(d)
                if d.code == DenialCode::ToolNotInProfile
                    && self.ctx.profile.tools().iter().any(|t| t.name == name) =>
            {
                ToolOutcome::Denied(Denial::new(
                    DenialCode::ToolNotInProfile,
                    format!(
                        "tool {name} is in profile `{}` but not on this gateway's allowlist",
                        self.ctx.profile.canonical()
                    ),
                ))
            }
            other => other,
        }
    }

    async fn call_inner(
        &self,
        surface: &ProfileSet,
        name: &str,
        args: Value,
        call: CallCtx,
        workspace: bool,
    ) -> ToolOutcome {
        let started = Instant::now();
        let agent = call.agent.clone();
        let outcome = self.dispatch(surface, name, args, call, workspace).await;
        let elapsed = started.elapsed();
        // Static labels: no allocation per call, and unknown names cannot grow the label set.
        let tool_label = vox_mcp_registry::tool_by_name(name).map_or("(other)", |t| t.name);
        metrics::counter!("vox_tool_calls_total", "tool" => tool_label, "outcome" => outcome.label()).increment(1);
        metrics::histogram!("vox_tool_call_seconds", "tool" => tool_label)
            .record(elapsed.as_secs_f64());
        if let Some(att) = &self.ctx.attention {
            let bytes = match &outcome {
                ToolOutcome::Ok(v) => json_len(v),
                _ => 0,
            };
            att.record(AttentionEvent {
                ts: now_ms(),
                agent: agent.to_string(),
                tool: name.chars().take(128).collect(),
                outcome: outcome.label().to_owned(),
                latency_us: elapsed.as_micros() as i64,
                tokens: estimate_tokens(bytes) as i64,
            });
        }
        outcome
    }

    async fn dispatch(
        &self,
        surface: &ProfileSet,
        name: &str,
        args: Value,
        call: CallCtx,
        workspace: bool,
    ) -> ToolOutcome {
        let authorized = authorize_tool(surface, name, call.caller, self.ctx.boot.booted_mask);
        // The active skill's allowlist narrows whatever the profile allows.
        if let (
            Some(sk),
            Ok(_)
            | Err(Denial {
                code: DenialCode::UnknownTool,
                ..
            }),
        ) = (&self.ctx.skills, &authorized)
            && let Err(d) = sk.check(&call.session, name, &args)
        {
            return ToolOutcome::Denied(d);
        }
        let tool = match authorized {
            Ok(t) => t,
            // Under dev, a name outside the static catalog may be a federated workspace tool
            // or a skill's macro tool.
            Err(d)
                if d.code == DenialCode::UnknownTool
                    && workspace
                    && self.ctx.workspace_tools.is_some() =>
            {
                return self.dispatch_workspace(name, args, d, call).await;
            }
            Err(d) => return ToolOutcome::Denied(d),
        };
        let args = match args {
            Value::Null => json!({}),
            Value::Object(_) => args,
            other => {
                return ToolOutcome::Failed(ToolError::InvalidArguments(format!(
                    "arguments must be a JSON object, got {}",
                    json_kind(&other)
                )));
            }
        };
        let Some(handler) = &self.handlers[tool.index] else {
            return ToolOutcome::Failed(ToolError::Internal(format!("tool {name} has no handler")));
        };
        let work = (handler.call)(self.ctx.clone(), call.clone(), args);
        match self.under_deadline(name, &call, work).await {
            Ok(v) => cap_result(name, v),
            Err(e) => ToolOutcome::Failed(e),
        }
    }

    /// Runs a handler's future until it ends, the call is cancelled, or the deadline passes.
    /// Cancellation and the deadline both cancel the call's signal, which stops blocking work
    /// at its next check (an interpreter step, a sandbox poll, an indexed file).
    async fn under_deadline<T>(
        &self,
        name: &str,
        call: &CallCtx,
        work: impl std::future::Future<Output = Result<T, ToolError>>,
    ) -> Result<T, ToolError> {
        tokio::select! {
            r = work => r,
            _ = call.cancel.cancelled() => {
                Err(ToolError::Cancelled(format!("tool {name} was cancelled")))
            }
            _ = tokio::time::sleep(self.timeout) => {
                call.cancel.cancel();
                Err(ToolError::Unavailable(format!(
                    "tool {name} did not finish within {} ms",
                    self.timeout.as_millis()
                )))
            }
        }
    }
}

impl Orchestrator {
    async fn dispatch_workspace(
        &self,
        name: &str,
        args: Value,
        unknown: Denial,
        call: CallCtx,
    ) -> ToolOutcome {
        let args = if args.is_null() { json!({}) } else { args };
        let ctx = self.ctx.clone();
        let owned = name.to_owned();
        let cancel = call.cancel.clone();
        let work = crate::tools::run_blocking(move || {
            Ok(ctx
                .workspace_tools
                .as_ref()
                .and_then(|wt| wt.call(&owned, &args, cancel.flag()))
                .or_else(|| ctx.skills.as_ref()?.call_macro(&owned, &args)))
        });
        match self.under_deadline(name, &call, work).await {
            Ok(Some(Ok(v))) => cap_result(name, v),
            Ok(Some(Err(e))) | Err(e) => ToolOutcome::Failed(e),
            Ok(None) => ToolOutcome::Denied(unknown),
        }
    }
}

/// The size of a value's JSON encoding, counted without building the string.
fn json_len(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A result larger than the message cap would flood a model's context: refuse it, saying so.
fn cap_result(name: &str, v: Value) -> ToolOutcome {
    let len = json_len(&v);
    if len > MAX_MESSAGE_BYTES / 2 {
        return ToolOutcome::Failed(ToolError::Unavailable(format!(
            "tool {name} produced {len} bytes, above the {} byte result cap; narrow the request (limit, path, line range)",
            MAX_MESSAGE_BYTES / 2
        )));
    }
    ToolOutcome::Ok(v)
}

/// What a boot step did.
pub enum StepDone {
    /// The subsystem is up; the detail says how.
    Ready(String),
    /// The subsystem has no tools in this build: nothing was started, and the boot report
    /// says so (`placeholder`) instead of claiming it is up.
    Placeholder(&'static str),
}

type StepFn = fn(&mut Ctx) -> Result<StepDone, String>;

fn placeholder(_ctx: &mut Ctx) -> Result<StepDone, String> {
    Ok(StepDone::Placeholder("no tools in this build"))
}

/// The function of every boot step of `contracts/subsystems.v1.yaml`, by step name. A step
/// without one is a start-up error ([`boot_step_table`]), never a silent "ready".
const STEP_FNS: &[(&str, StepFn)] = &[
    ("db", |ctx| {
        let path = ctx.workspace.db_path();
        let store = Store::open(&path).map_err(|e| e.to_string())?;
        let v = store.schema_version().map_err(|e| e.to_string())?;
        ctx.store = Some(Arc::new(store));
        Ok(StepDone::Ready(format!("{} (schema {v})", path.display())))
    }),
    ("model_registry", placeholder),
    ("routing_preferences", placeholder),
    ("llm_facade", placeholder),
    ("search_index", |ctx| {
        ctx.search = Some(crate::tools::search::Search::new(&ctx.workspace.root));
        Ok(StepDone::Ready("indexes build on first query".into()))
    }),
    ("memory", |ctx| {
        Ok(StepDone::Ready(if ctx.store.is_some() {
            "store-backed".into()
        } else {
            "no store: memory tools stay down".into()
        }))
    }),
    ("compiler", |ctx| {
        Ok(StepDone::Ready(if ctx.profile.is_dev() {
            ctx.workspace_tools = Some(crate::workspace_tools::WorkspaceTools::new(
                ctx.workspace.root.clone(),
            ));
            "vox-lang; workspace tools scan on first use".into()
        } else {
            "vox-lang".into()
        }))
    }),
    ("browser", placeholder),
    ("speech", placeholder),
    ("sessions", |ctx| match &ctx.store {
        Some(store) => {
            ctx.sessions = Some(Box::new(store.clone()));
            Ok(StepDone::Ready("sqlite".into()))
        }
        None => {
            let dir = ctx.workspace.session_files_dir();
            let files = FileSessions::open(&dir).map_err(|e| e.to_string())?;
            ctx.sessions = Some(Box::new(files));
            Ok(StepDone::Ready(format!(
                "file persistence at {} (store unavailable)",
                dir.display()
            )))
        }
    }),
    ("agent_fleet", |_ctx| {
        match std::env::var("VOX_MCP_AGENT_FLEET").as_deref() {
            Ok("0") | Ok("false") | Ok("off") => Err("disabled by VOX_MCP_AGENT_FLEET".into()),
            _ => Ok(StepDone::Placeholder("no tools in this build")),
        }
    }),
    ("populi_federation_poller", placeholder),
    ("a2a_remote_result_poller", placeholder),
    ("a2a_remote_worker_poller", placeholder),
    ("clarification_inbox", placeholder),
    ("socrates_research_poller", placeholder),
    ("flywheel", placeholder),
    ("attention_calibration", |ctx| {
        let budget = std::env::var("VOX_ATTENTION_BUDGET_TOKENS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(200_000);
        ctx.attention = Some(Attention::new(budget, ctx.store.is_some()));
        Ok(StepDone::Ready(format!("token budget {budget} per agent")))
    }),
];

/// The step functions in contract order. Errors name every contract step without a function
/// and every function without a contract step.
pub fn boot_step_table() -> Result<Vec<StepFn>, String> {
    let mut problems = Vec::new();
    let table: Vec<StepFn> = vox_mcp_registry::BOOT_STEPS
        .iter()
        .filter_map(|step| {
            let f = STEP_FNS.iter().find(|(n, _)| *n == step.name).map(|(_, f)| *f);
            if f.is_none() {
                problems.push(format!("boot step {} has no function", step.name));
            }
            f
        })
        .collect();
    for (name, _) in STEP_FNS {
        if !vox_mcp_registry::BOOT_STEPS.iter().any(|s| s.name == *name) {
            problems.push(format!("boot function {name} has no contract step"));
        }
    }
    if problems.is_empty() {
        Ok(table)
    } else {
        Err(problems.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_boot_step_has_a_function_and_every_function_a_step() {
        let table = boot_step_table().expect("contract steps and functions agree");
        assert_eq!(table.len(), vox_mcp_registry::BOOT_STEPS.len());
    }

    #[test]
    fn every_catalog_tool_has_a_handler_and_every_handler_a_row() {
        let table = handler_table().expect("catalog and handlers agree");
        assert_eq!(table.len(), TOOL_REGISTRY.len());
    }

    #[test]
    fn json_len_is_the_encoded_length() {
        let v = json!({"key": "ä", "n": [1, 2.5, null], "s": "a\"b"});
        assert_eq!(json_len(&v), serde_json::to_vec(&v).unwrap().len());
    }

    #[test]
    fn handler_schemas_are_plain_object_schemas() {
        for (name, h) in crate::tools::handlers() {
            assert_eq!(h.schema["type"], "object", "{name}");
            assert!(h.schema.get("$schema").is_none(), "{name}");
        }
    }
}
