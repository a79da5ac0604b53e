//! The booted context a handler receives: the workspace, the profile, the boot report, the
//! change notifier, each family's state (by type) and the hooks families put on the call path.
//! Boot steps fill it through `&mut Ctx`; after boot it is shared read-only.

use crate::boot::BootReport;
use crate::call::CallCtx;
use crate::error::{ToolError, ToolOutcome};
use crate::workspace::Workspace;
use serde_json::{Value, json};
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use vox_mcp_registry::{Denial, ProfileSet};

/// Tools and resources beyond the static catalog (workspace `.vox` tools, skill macro tools).
/// Providers are asked in registration order, and the first that has a name serves it.
pub trait DynamicTools: Send + Sync {
    /// MCP tool descriptors, in name order. `advertise_workspace` is the client's choice
    /// (`VOX_MCP_WORKSPACE_TOOLS`); a provider of workspace tools lists nothing without it.
    fn descriptors(&self, advertise_workspace: bool) -> Vec<Value>;
    /// Whether it serves `name` (listed or not).
    fn has_tool(&self, name: &str) -> bool;
    /// Calls `name` (blocking work; stops when `call.cancel` turns true, may log through
    /// `call.log`): a value, content blocks or a failure (never a denial); `None` if it has no
    /// such tool.
    fn call(&self, name: &str, args: &Value, call: &CallCtx) -> Option<ToolOutcome>;
    /// MCP resource descriptors, in URI order.
    fn resources(&self) -> Vec<Value>;
    /// Reads a resource (blocking); `None` if it has no such URI.
    fn read(&self, uri: &str) -> Option<Result<crate::ResourceBody, ToolError>>;
    /// MCP resource template descriptors (`uriTemplate`, `name`, `description`), in order.
    fn resource_templates(&self) -> Vec<Value> {
        Vec::new()
    }
    /// Completion values (`{"values", "total", "hasMore"}`) for argument `argument` of prompt
    /// `name` (`prompt`) or of the resource template `name` (not `prompt`), from the text
    /// `value` (blocking); `None` if it has no such prompt or template.
    fn complete(
        &self,
        _prompt: bool,
        _name: &str,
        _argument: &str,
        _value: &str,
    ) -> Option<Result<Value, ToolError>> {
        None
    }
    /// MCP prompt descriptors (`name`, `description`, `arguments`), in name order.
    fn prompts(&self) -> Vec<Value> {
        Vec::new()
    }
    /// Gets a prompt (blocking): `{"description", "messages"}`; `None` if it has no such
    /// prompt.
    fn get_prompt(&self, _name: &str, _args: &Value) -> Option<Result<Value, ToolError>> {
        None
    }
}

/// A check of every call against what its session chose (the active skill's allowlist).
pub trait SessionGuard: Send + Sync {
    /// Refuses a call the session may not make.
    fn check(&self, session: &str, tool: &str, args: &Value) -> Result<(), Denial>;
    /// Forgets a session that ended.
    fn end_session(&self, session: &str);
    /// Sets again what a session had chosen (`vox mcp` carrying a session on to a restarted
    /// daemon); `Err` when it no longer can be (the skill is gone).
    fn restore(
        &self,
        _scope: &crate::CallScope,
        _effect: &crate::SessionEffect,
    ) -> Result<(), ToolError> {
        Ok(())
    }
}

/// Sees every finished call (the attention ledger).
pub trait CallObserver: Send + Sync {
    /// Records one finished call of `tool` (its caller is `call.scope()`, its attention key
    /// `call.principal()`): its arguments when [`Self::wants_arguments`] said so, its outcome
    /// and how long it took.
    fn record(
        &self,
        call: &CallCtx,
        tool: &str,
        args: Option<&Value>,
        outcome: &ToolOutcome,
        latency: Duration,
    );
    /// Whether it keeps the arguments of calls of `tool` (they are copied for it).
    fn wants_arguments(&self, _tool: &str) -> bool {
        false
    }
    /// Persists what was recorded (called periodically and at shutdown; blocking).
    fn flush(&self) {}
}

/// An orchestrator agent as the call path sees it: who, and under which profile its own calls
/// are decided.
#[derive(Debug, Clone)]
pub struct AgentIdentity {
    /// The agent's id.
    pub id: String,
    /// The profile the agent's own calls are decided under.
    pub profile: ProfileSet,
}

/// The agents the daemon issued credentials to (the agent fleet registers it).
pub trait AgentDirectory: Send + Sync {
    /// The agent a credential belongs to; `None` for an unknown credential or a retired agent.
    fn authenticate(&self, credential: &str) -> Result<Option<AgentIdentity>, ToolError>;
    /// Agent `id` as it is now; `None` once it is retired.
    fn current(&self, id: &str) -> Result<Option<AgentIdentity>, ToolError>;
}

/// What an agent's call passes after authorization and before it runs: a person's approval of
/// a call with side effects, the agent's budget. `Ok` holds the arguments to run with (an
/// approver may change them).
pub trait AgentGate: Send + Sync {
    /// Lets agent `agent`'s call of `tool` run: the arguments to run it with, or why not (refused,
    /// over budget, cancelled while waiting for a person).
    fn admit<'a>(
        &'a self,
        agent: &'a str,
        tool: GatedTool<'a>,
        args: Value,
        cancel: &'a crate::Cancel,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Value, ToolError>> + Send + 'a>>;
}

/// What an agent's gate knows of the tool a call is for (a catalog row, or an upstream tool
/// as its server's config classifies it).
#[derive(Debug, Clone, Copy)]
pub struct GatedTool<'a> {
    /// The name the tool is served as.
    pub name: &'a str,
    /// Its catalog lane (`upstream` for an upstream server's tool).
    pub lane: &'a str,
    /// What calling it does to the world.
    pub side_effect_class: vox_mcp_registry::SideEffectClass,
}

impl From<&'static vox_mcp_registry::ToolEntry> for GatedTool<'static> {
    fn from(t: &'static vox_mcp_registry::ToolEntry) -> Self {
        GatedTool {
            name: t.name,
            lane: t.lane,
            side_effect_class: t.side_effect_class,
        }
    }
}

/// One tool of an upstream server, as it is served: its name (`<server>__<tool>`), its MCP
/// descriptor, and its class for the decision.
#[derive(Debug, Clone)]
pub struct UpstreamTool {
    /// The served name.
    pub name: String,
    /// The MCP tool descriptor (name already the served one, `_meta` saying where it is from).
    pub descriptor: Value,
    /// How the decision treats it.
    pub class: vox_mcp_registry::UpstreamClass,
}

/// Other people's MCP servers as a source of tools: listed and called only after
/// `vox_mcp_registry::authorize_upstream` on the caller's scope, like catalog tools.
pub trait UpstreamTools: Send + Sync {
    /// The tools served now (approved definitions only), in name order.
    fn tools(&self) -> Arc<[UpstreamTool]>;
    /// The class of served tool `name`, `None` when no server serves it now.
    fn class_of(&self, name: &str) -> Option<vox_mcp_registry::UpstreamClass>;
    /// Calls served tool `name` on its server, relaying progress, logs, the server's requests
    /// to the client and cancellation through `call`.
    fn call<'a>(
        &'a self,
        name: &'a str,
        args: Value,
        call: &'a CallCtx,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ToolOutcome> + Send + 'a>>;
    /// The servers' resources, their URIs namespaced (`upstream://<server>/<uri>`): each with
    /// its server's id.
    fn resources(&self) -> Vec<(String, Value)> {
        Vec::new()
    }
    /// The servers' prompts, named `<server>__<prompt>`: each with its server's id.
    fn prompts(&self) -> Vec<(String, Value)> {
        Vec::new()
    }
    /// The server a namespaced resource URI or prompt name belongs to.
    fn server_of(&self, _uri_or_name: &str) -> Option<String> {
        None
    }
    /// Reads a namespaced resource from its server.
    fn read<'a>(&'a self, uri: &'a str) -> UpstreamFuture<'a, crate::ResourceBody> {
        Box::pin(async move { Err(ToolError::not_found(format!("no resource {uri}"))) })
    }
    /// Gets a namespaced prompt from its server: `{"description"?, "messages"}`.
    fn get_prompt<'a>(&'a self, name: &'a str, _args: Value) -> UpstreamFuture<'a, Value> {
        Box::pin(async move { Err(ToolError::not_found(format!("no prompt {name}"))) })
    }
}

/// What an upstream server answers, when it does.
pub type UpstreamFuture<'a, T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, ToolError>> + Send + 'a>>;

/// The `notifications/resources/updated` frame for `uri`, as [`Ctx::notifier`] carries it.
pub fn resource_updated(uri: &str) -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}})
}

/// The hooks families registered at boot.
#[derive(Default)]
pub struct Hooks {
    /// Sources of tools beyond the static catalog (workspace `.vox` tools, skill macro tools).
    pub dynamic: Vec<Arc<dyn DynamicTools>>,
    /// Checks run before every call against the session's state (the active skill's tool list).
    pub guards: Vec<Arc<dyn SessionGuard>>,
    /// Everything that sees finished calls (the attention ledger).
    pub observers: Vec<Arc<dyn CallObserver>>,
    /// The agents the daemon issued credentials to, when the agent fleet is booted.
    pub agents: Option<Arc<dyn AgentDirectory>>,
    /// What an agent's call passes before it runs (approvals, budgets), when the fleet is booted.
    pub agent_gate: Option<Arc<dyn AgentGate>>,
    /// Other people's MCP servers, when the `upstream` subsystem is booted.
    pub upstream: Option<Arc<dyn UpstreamTools>>,
}

/// The booted context. Built once at boot, then read-only.
pub struct Ctx {
    /// The workspace the daemon serves.
    pub workspace: Workspace,
    /// The profile the daemon serves.
    pub profile: ProfileSet,
    /// What the boot started, skipped and failed on.
    pub boot: BootReport,
    /// Daemon → client notification frames (`notifications/tools/list_changed`, ...).
    pub notifier: tokio::sync::broadcast::Sender<Value>,
    state: HashMap<TypeId, Box<dyn Any + Send + Sync>>,
    hooks: Hooks,
    /// The calls agents have in flight.
    pub agent_calls: AgentCalls,
    /// The orchestrator serving this context once it is shared ([`crate::Orchestrator::shared`]),
    /// for a handler that calls other tools on its caller's behalf (chat's tool calls). Weak:
    /// the orchestrator owns the context.
    orchestrator: std::sync::OnceLock<std::sync::Weak<crate::Orchestrator>>,
}

/// The calls agents have in flight, each with its own cancellation signal: retiring an agent
/// or an emergency stop cancels them through the core's cancellation, as a client would.
#[derive(Default)]
pub struct AgentCalls {
    next: std::sync::atomic::AtomicU64,
    calls: std::sync::Mutex<HashMap<u64, (Arc<str>, crate::Cancel)>>,
}

/// Removes its call from [`AgentCalls`] when the call ends.
pub struct InFlight<'a> {
    calls: &'a AgentCalls,
    key: u64,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.calls.lock().remove(&self.key);
    }
}

impl AgentCalls {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, (Arc<str>, crate::Cancel)>> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }
    /// Records a call of `agent` until the guard drops.
    pub fn enter(&self, agent: &str, cancel: &crate::Cancel) -> InFlight<'_> {
        let key = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.lock().insert(key, (agent.into(), cancel.clone()));
        InFlight { calls: self, key }
    }
    /// Cancels the calls in flight of `agent` (of every agent with `None`); how many.
    pub fn cancel(&self, agent: Option<&str>) -> usize {
        let calls = self.lock();
        let mut n = 0;
        for (who, cancel) in calls.values() {
            if agent.is_none_or(|a| **who == *a) {
                cancel.cancel();
                n += 1;
            }
        }
        n
    }
}

impl Ctx {
    /// An empty context for `workspace` under `profile` (boot fills it).
    pub fn new(workspace: Workspace, profile: ProfileSet) -> Self {
        Ctx {
            workspace,
            profile,
            boot: BootReport::default(),
            notifier: tokio::sync::broadcast::channel(16).0,
            state: HashMap::new(),
            hooks: Hooks::default(),
            agent_calls: AgentCalls::default(),
            orchestrator: std::sync::OnceLock::new(),
        }
    }
    /// The orchestrator serving this context, when it is shared and still alive.
    pub fn orchestrator(&self) -> Option<Arc<crate::Orchestrator>> {
        self.orchestrator.get().and_then(std::sync::Weak::upgrade)
    }
    /// Records the shared orchestrator (once).
    pub(crate) fn set_orchestrator(&self, o: &Arc<crate::Orchestrator>) {
        let _ = self.orchestrator.set(Arc::downgrade(o));
    }
    /// A family's state of type `T`, if its boot step put one in.
    pub fn get<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.state
            .get(&TypeId::of::<T>())
            .and_then(|b| b.downcast_ref())
    }
    /// [`Self::get`], or the error a handler returns when that subsystem is not running.
    pub fn require<T: Send + Sync + 'static>(&self, what: &str) -> Result<&T, ToolError> {
        self.get()
            .ok_or_else(|| ToolError::unavailable(format!("{what} is not running")))
    }
    /// Puts a family's state in (at boot); one value per type.
    pub fn insert<T: Send + Sync + 'static>(&mut self, value: T) {
        self.state.insert(TypeId::of::<T>(), Box::new(value));
    }
    /// The hooks on the call path.
    pub fn hooks(&self) -> &Hooks {
        &self.hooks
    }
    /// Registers tools beyond the catalog (asked after those registered before).
    pub fn add_dynamic_tools(&mut self, p: Arc<dyn DynamicTools>) {
        self.hooks.dynamic.push(p);
    }
    /// Registers a per-session check of every call.
    pub fn add_session_guard(&mut self, g: Arc<dyn SessionGuard>) {
        self.hooks.guards.push(g);
    }
    /// Registers the directory of agent credentials (the agent path).
    pub fn set_agent_directory(&mut self, d: Arc<dyn AgentDirectory>) {
        self.hooks.agents = Some(d);
    }
    /// Registers what an agent's call passes before it runs.
    pub fn set_agent_gate(&mut self, g: Arc<dyn AgentGate>) {
        self.hooks.agent_gate = Some(g);
    }
    /// Registers the upstream servers' tools.
    pub fn set_upstream_tools(&mut self, u: Arc<dyn UpstreamTools>) {
        self.hooks.upstream = Some(u);
    }
    /// Registers an observer of every finished call.
    pub fn add_call_observer(&mut self, o: Arc<dyn CallObserver>) {
        self.hooks.observers.push(o);
    }
    /// Tells every connected client that the tool and resource lists changed. No receiver (no
    /// client connected) is not an error.
    pub fn notify_list_changed(&self) {
        for method in [
            "notifications/tools/list_changed",
            "notifications/resources/list_changed",
        ] {
            let _ = self
                .notifier
                .send(json!({"jsonrpc": "2.0", "method": method}));
        }
    }
    /// Tells every connected client that resource `uri` changed (clients forward it to the
    /// peers that subscribed to it).
    pub fn notify_resource_updated(&self, uri: &str) {
        let _ = self.notifier.send(resource_updated(uri));
    }
}
