//! `Orchestrator`: the booted families, the handler table, and the one call path.

use crate::MAX_MESSAGE_BYTES;
use crate::boot::{self, BootReport};
use crate::call::CallCtx;
use crate::ctx::{AgentIdentity, Ctx};
use crate::error::{ToolError, ToolOutcome};
use crate::family::{Family, HandlerEntry, HandlerFuture, StepFn, run_blocking};
use crate::workspace::Workspace;
use serde::Serialize;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};
use vox_mcp_registry::{
    BOOT_STEPS, BootStep, Caller, Denial, DenialCode, ProfileSet, SideEffectClass, TOOL_REGISTRY,
    ToolEntry, authorize_tool, visible_tools,
};

/// What a client sees of a tool (MCP field names).
#[derive(Debug, Clone, Serialize)]
pub struct ToolDescriptor {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    #[serde(rename = "inputSchema")]
    pub input_schema: Value,
    /// The schema `structuredContent` of a successful call validates against.
    #[serde(rename = "outputSchema", skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    pub annotations: Value,
    #[serde(rename = "_meta")]
    pub meta: Value,
    #[serde(skip)]
    pub index: usize,
}

/// The orchestrator of one workspace under one profile.
pub struct Orchestrator {
    ctx: Arc<Ctx>,
    handlers: Vec<Option<HandlerEntry>>,
    descriptors: Vec<ToolDescriptor>,
    /// `descriptors` as a loopback writer sees them, encoded once.
    local_tools: Arc<Vec<Value>>,
    timeout: Duration,
    /// The families' `on_stopping`.
    stopping: Vec<fn(&Ctx)>,
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

/// The families' handlers, indexed like `TOOL_REGISTRY`, and their boot steps, indexed like
/// `BOOT_STEPS`. Errors name every catalog row without a handler, every handler without a
/// catalog row, every contract step without a function and every step registered twice: the
/// daemon refuses to start on any of them.
pub fn assemble(families: Vec<Family>) -> Result<Assembled, String> {
    let mut handlers: Vec<Option<HandlerEntry>> = TOOL_REGISTRY.iter().map(|_| None).collect();
    let mut steps: Vec<Option<(StepFn, &str)>> = BOOT_STEPS.iter().map(|_| None).collect();
    let (mut after_boot, mut started, mut stopping) = (Vec::new(), Vec::new(), Vec::new());
    let mut problems = Vec::new();
    for f in families {
        for (name, entry) in f.handlers {
            match vox_mcp_registry::tool_by_name(name) {
                Some(t) if handlers[t.index].is_some() => {
                    problems.push(format!("tool {name} has two handlers"))
                }
                Some(t) => handlers[t.index] = Some(entry),
                None => problems.push(format!("handler {name} has no catalog row")),
            }
        }
        for (step, func) in f.steps {
            match &steps[step as usize] {
                Some((_, other)) => problems.push(format!(
                    "boot step {} is registered by {other} and {}",
                    step.name(),
                    f.name
                )),
                None => steps[step as usize] = Some((func, f.name)),
            }
        }
        after_boot.extend(f.after_boot);
        started.extend(f.on_started);
        stopping.extend(f.on_stopping);
    }
    for t in TOOL_REGISTRY.iter().filter(|t| t.built) {
        if handlers[t.index].is_none() {
            problems.push(format!("catalog tool {} has no handler", t.name));
        }
    }
    for step in BootStep::ALL {
        if steps[step as usize].is_none() {
            problems.push(format!("boot step {} has no function", step.name()));
        }
    }
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    Ok(Assembled {
        handlers,
        steps: steps.into_iter().flatten().map(|(f, _)| f).collect(),
        after_boot,
        started,
        stopping,
    })
}

/// The families, put together: handlers by catalog index, step functions by boot step.
pub struct Assembled {
    pub handlers: Vec<Option<HandlerEntry>>,
    pub steps: Vec<StepFn>,
    pub after_boot: Vec<fn(&mut Ctx)>,
    pub started: Vec<fn(Arc<Ctx>)>,
    pub stopping: Vec<fn(&Ctx)>,
}

impl Orchestrator {
    /// Boots `families` for `workspace` under `profile`: the contract's steps in order (only
    /// those of the profile's closure), then each family's `after_boot`, then `on_started`.
    pub fn boot(
        workspace: Workspace,
        profile: ProfileSet,
        families: Vec<Family>,
    ) -> Result<Self, String> {
        let Assembled {
            handlers,
            steps,
            after_boot,
            started,
            stopping,
        } = assemble(families)?;
        let mut ctx = Ctx::new(workspace, profile.clone());
        let report = boot::boot(&profile, |i| steps[i](&mut ctx));
        ctx.boot = report;
        for f in after_boot {
            f(&mut ctx);
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
                    output_schema: h.output_schema.clone(),
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
        for f in started {
            f(ctx.clone());
        }
        let mut orch = Orchestrator {
            ctx,
            handlers,
            descriptors,
            local_tools: Arc::default(),
            timeout: Duration::from_millis(timeout_ms),
            stopping,
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
    /// The shared context.
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

    /// Authorizes, dispatches with a deadline, caps the result, and tells the observers.
    /// The orchestrator in an `Arc`, reachable from its context ([`Ctx::orchestrator`]) so a
    /// handler may call other tools as its caller would.
    pub fn shared(self) -> Arc<Self> {
        let o = Arc::new(self);
        o.ctx.set_orchestrator(&o);
        o
    }

    pub async fn call(&self, name: &str, args: Value, call: CallCtx) -> ToolOutcome {
        self.call_inner(&self.ctx.profile, name, args, call, true)
            .await
    }

    /// The tools beyond the static catalog (under `dev`: workspace tools when the client asks
    /// for them, then skill macro tools). Providers are asked in order; a name an earlier
    /// provider serves is not listed again (that provider is the one called).
    pub fn dynamic_tool_descriptors(&self, advertise_workspace: bool) -> Vec<Value> {
        let providers = &self.ctx.hooks().dynamic;
        let mut tools = Vec::new();
        for (i, p) in providers.iter().enumerate() {
            tools.extend(p.descriptors(advertise_workspace).into_iter().filter(|d| {
                d["name"]
                    .as_str()
                    .is_some_and(|n| !providers[..i].iter().any(|q| q.has_tool(n)))
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

    /// Every provider's resources (workspace resources, then `skill://`).
    pub fn resources(&self) -> Vec<Value> {
        self.ctx
            .hooks()
            .dynamic
            .iter()
            .flat_map(|p| p.resources())
            .collect()
    }

    /// Reads a resource from the first provider that has it (blocking).
    pub fn read_resource(&self, uri: &str) -> Result<crate::ResourceBody, ToolError> {
        self.ctx
            .hooks()
            .dynamic
            .iter()
            .find_map(|p| p.read(uri))
            .unwrap_or_else(|| Err(ToolError::NotFound(format!("no resource {uri}"))))
    }

    /// Every provider's resource templates.
    pub fn resource_templates(&self) -> Vec<Value> {
        self.ctx
            .hooks()
            .dynamic
            .iter()
            .flat_map(|p| p.resource_templates())
            .collect()
    }

    /// Completes an argument of a prompt (`prompt`) or resource template (blocking).
    pub fn complete(
        &self,
        prompt: bool,
        name: &str,
        argument: &str,
        value: &str,
    ) -> Result<Value, ToolError> {
        self.ctx
            .hooks()
            .dynamic
            .iter()
            .find_map(|p| p.complete(prompt, name, argument, value))
            .unwrap_or_else(|| {
                let what = if prompt {
                    "prompt"
                } else {
                    "resource template"
                };
                Err(ToolError::NotFound(format!("no {what} {name}")))
            })
    }

    /// Every provider's prompts (workspace `@mcp.prompt` functions).
    pub fn prompts(&self) -> Vec<Value> {
        // A name two providers have is the first one's, as `get_prompt` answers it.
        let mut seen = std::collections::HashSet::new();
        let mut all: Vec<Value> = self
            .ctx
            .hooks()
            .dynamic
            .iter()
            .flat_map(|p| p.prompts())
            .filter(|p| seen.insert(p["name"].as_str().unwrap_or_default().to_owned()))
            .collect();
        all.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
        all
    }

    /// Gets a prompt from the first provider that has it (blocking).
    pub fn get_prompt(&self, name: &str, args: &Value) -> Result<Value, ToolError> {
        self.ctx
            .hooks()
            .dynamic
            .iter()
            .find_map(|p| p.get_prompt(name, args))
            .unwrap_or_else(|| Err(ToolError::NotFound(format!("no prompt {name}"))))
    }

    /// Forgets what was scoped to a session that ended (its active skill).
    pub fn end_session(&self, session: &str) {
        for g in &self.ctx.hooks().guards {
            g.end_session(session);
        }
    }

    /// The daemon is stopping: each family ends what it runs outside this process (blocking).
    pub fn stopping(&self) {
        for f in &self.stopping {
            f(&self.ctx);
        }
    }

    /// Persists what the observers recorded (blocking; periodically and at shutdown).
    pub fn flush_observers(&self) {
        for o in &self.ctx.hooks().observers {
            o.flush();
        }
    }

    /// [`Self::call`] for a surface narrower than the daemon's profile (the HTTP gateway's);
    /// `workspace`: a name outside the static catalog may be a workspace or skill tool (under
    /// `dev`, for a gateway whose operator opted in).
    pub async fn call_as(
        &self,
        surface: &ProfileSet,
        name: &str,
        args: Value,
        call: CallCtx,
        workspace: bool,
    ) -> ToolOutcome {
        let outcome = self.call_inner(surface, name, args, call, workspace).await;
        self.narrowed(name, outcome)
    }

    /// The agent a credential belongs to: `Unauthorized` when none (or it retired), or when
    /// this daemon runs no agent fleet.
    pub fn authenticate_agent(&self, credential: &str) -> Result<AgentIdentity, ToolError> {
        let dir = self.ctx.hooks().agents.as_ref().ok_or_else(|| {
            ToolError::Unauthorized(
                "an agent credential was given, but this daemon's profile runs no agent fleet"
                    .into(),
            )
        })?;
        dir.authenticate(credential)?.ok_or_else(|| {
            ToolError::Unauthorized(
                "the agent credential (VOX_AGENT_TOKEN) is unknown, or its agent is retired".into(),
            )
        })
    }

    /// What agent `a` may call on a transport serving `base` (the daemon's profile, or a
    /// gateway's narrower surface): `base` narrowed to the agent's public tools. Tools of
    /// `operator` (or `internal`) exposure are a person's (deciding approvals, spawning agents,
    /// trust overrides): no agent is offered them, whatever its profile.
    pub fn agent_surface(&self, base: &ProfileSet, a: &AgentIdentity) -> ProfileSet {
        base.restricted(&a.profile.public_tools())
    }

    /// Exactly the tools agent `a` could call on `base` as `caller`, in name order.
    pub fn list_tools_for_agent(
        &self,
        base: &ProfileSet,
        a: &AgentIdentity,
        caller: Caller,
    ) -> Vec<&ToolDescriptor> {
        self.list_tools_as(&self.agent_surface(base, a), caller)
    }

    /// What the daemon socket lists to agent `a`: MCP tool descriptors.
    pub fn agent_tool_list_json(&self, a: &AgentIdentity) -> Vec<Value> {
        self.list_tools_for_agent(&self.ctx.profile, a, Caller::LOCAL)
            .into_iter()
            .filter_map(|d| serde_json::to_value(d).ok())
            .collect()
    }

    /// A call on the agent path: the caller is agent `id` (its credential checked by the
    /// transport), whose current profile narrows the daemon's. Authorization comes first, then
    /// the families' gate (a person's approval, the budget), then the call as any other.
    /// Workspace and skill tools are not on this path: an agent's surface is its profile.
    pub async fn call_as_agent(
        &self,
        id: &str,
        name: &str,
        args: Value,
        call: CallCtx,
    ) -> ToolOutcome {
        self.call_as_agent_on(&self.ctx.profile, id, name, args, call)
            .await
    }

    /// [`Self::call_as_agent`] on a transport serving `base` (a gateway's surface).
    pub async fn call_as_agent_on(
        &self,
        base: &ProfileSet,
        id: &str,
        name: &str,
        args: Value,
        call: CallCtx,
    ) -> ToolOutcome {
        let agent = match self.ctx.hooks().agents.as_ref().map(|d| d.current(id)) {
            Some(Ok(Some(a))) => a,
            Some(Ok(None)) => {
                return ToolOutcome::Failed(ToolError::Unauthorized(format!(
                    "agent {id} is retired: its credential no longer works"
                )));
            }
            Some(Err(e)) => return ToolOutcome::Failed(e),
            None => {
                return ToolOutcome::Failed(ToolError::Unauthorized(
                    "this daemon's profile runs no agent fleet".into(),
                ));
            }
        };
        let surface = self.agent_surface(base, &agent);
        let call = call.as_agent(&agent.id);
        let _in_flight = self.ctx.agent_calls.enter(&agent.id, &call.cancel);
        let tool = match authorize_tool(&surface, name, call.caller, self.ctx.boot.booted_mask) {
            Ok(t) => t,
            Err(d)
                if d.code == DenialCode::ToolNotInProfile
                    && base.tools().iter().any(|t| t.name == name) =>
            {
                let mine = agent.profile.tools().iter().any(|t| t.name == name);
                let why = if mine {
                    format!(
                        "tool {name} is the operator's (a person's): no agent calls it, {} included",
                        agent.id
                    )
                } else {
                    format!(
                        "tool {name} is not in agent {}'s profile `{}`",
                        agent.id,
                        agent.profile.canonical()
                    )
                };
                let d = Denial::new(DenialCode::ToolNotInProfile, why);
                return self.recorded(&call, name, ToolOutcome::Denied(d));
            }
            Err(d) => return self.recorded(&call, name, ToolOutcome::Denied(d)),
        };
        let args = match &self.ctx.hooks().agent_gate {
            Some(gate) => match gate.admit(&agent.id, tool, args, &call.cancel).await {
                Ok(args) => args,
                Err(e) => return self.recorded(&call, name, ToolOutcome::Failed(e)),
            },
            None => args,
        };
        self.call_inner(&surface, name, args, call, false).await
    }

    /// Tells the observers of a call that ended before it ran (so an agent's refusals count).
    fn recorded(&self, call: &CallCtx, name: &str, outcome: ToolOutcome) -> ToolOutcome {
        for o in &self.ctx.hooks().observers {
            o.record(&call.agent, name, &outcome, Duration::ZERO);
        }
        outcome
    }

    /// The authorization [`Self::call_as`] starts with, on its own: `Err` holds the denial it
    /// would answer. For a transport's own check that must not run before authorization.
    pub fn authorize_as(
        &self,
        surface: &ProfileSet,
        name: &str,
        caller: Caller,
    ) -> Result<(), ToolOutcome> {
        authorize_tool(surface, name, caller, self.ctx.boot.booted_mask)
            .map(|_| ())
            .map_err(|d| self.narrowed(name, ToolOutcome::Denied(d)))
    }

    /// A denial on a narrower surface says so when the daemon's profile serves the tool.
    fn narrowed(&self, name: &str, outcome: ToolOutcome) -> ToolOutcome {
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
        for o in &self.ctx.hooks().observers {
            o.record(&agent, name, &outcome, elapsed);
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
        if matches!(
            &authorized,
            Ok(_)
                | Err(Denial {
                    code: DenialCode::UnknownTool,
                    ..
                })
        ) {
            for g in &self.ctx.hooks().guards {
                if let Err(d) = g.check(&call.session, name, &args) {
                    return ToolOutcome::Denied(d);
                }
            }
        }
        let tool = match authorized {
            Ok(t) => t,
            // Under dev, a name outside the static catalog may be a federated workspace tool
            // or a skill's macro tool.
            Err(d)
                if d.code == DenialCode::UnknownTool
                    && workspace
                    && !self.ctx.hooks().dynamic.is_empty() =>
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
        // A panicking handler still answers, and does not take its connection's task with it.
        let started = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            (handler.call)(self.ctx.clone(), call.clone(), args)
        }));
        let work = match started {
            Ok(work) => CatchPanic(work),
            Err(panic) => return ToolOutcome::Failed(panicked(name, &panic)),
        };
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
        let inner = call.clone();
        let work = run_blocking(move || {
            Ok(ctx
                .hooks()
                .dynamic
                .iter()
                .find_map(|p| p.call(&owned, &args, &inner)))
        });
        match self.under_deadline(name, &call, work).await {
            Ok(Some(ToolOutcome::Ok(v))) => cap_result(name, v),
            Ok(Some(ToolOutcome::Content(blocks))) => {
                match cap_result(name, Value::Array(blocks)) {
                    ToolOutcome::Ok(Value::Array(blocks)) => ToolOutcome::Content(blocks),
                    other => other,
                }
            }
            Ok(Some(other)) => other,
            Err(e) => ToolOutcome::Failed(e),
            Ok(None) => ToolOutcome::Denied(unknown),
        }
    }
}

/// A handler's future whose panics become [`ToolError::Internal`].
struct CatchPanic(HandlerFuture);

impl std::future::Future for CatchPanic {
    type Output = Result<Value, ToolError>;
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let polled =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.0.as_mut().poll(cx)));
        match polled {
            Ok(p) => p,
            Err(panic) => std::task::Poll::Ready(Err(panicked("a tool", &panic))),
        }
    }
}

fn panicked(name: &str, panic: &Box<dyn std::any::Any + Send>) -> ToolError {
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into());
    ToolError::Internal(format!("{name} panicked: {what}"))
}

/// The size of a value's JSON encoding, counted without building the string.
pub fn json_len(v: &Value) -> usize {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_len_is_the_encoded_length() {
        let v = json!({"key": "ä", "n": [1, 2.5, null], "s": "a\"b"});
        assert_eq!(json_len(&v), serde_json::to_vec(&v).unwrap().len());
    }

    #[tokio::test]
    async fn a_panicking_handler_future_becomes_an_internal_error() {
        let work: HandlerFuture = Box::pin(async { panic!("boom") });
        match CatchPanic(work).await {
            Err(ToolError::Internal(m)) => assert!(m.contains("boom"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn assembling_names_missing_steps_and_handlers() {
        let Err(e) = assemble(vec![]) else {
            panic!("an empty family list assembled")
        };
        assert!(e.contains("boot step db has no function"), "{e}");
        assert!(
            e.contains("catalog tool vox_memory_store has no handler"),
            "{e}"
        );
    }
}
