//! Agents: `vox_spawn_agent` (which issues the agent's credential), `vox_retire_agent`,
//! `vox_pause_agent`, `vox_resume_agent`, `vox_drain_agent` (internal), `vox_agent_status`,
//! `vox_agent_events`, `vox_heartbeat`, `vox_set_agent_budget`; and the `agent_fleet` boot step.
//!
//! An agent's credential is 32 random bytes shown once, at spawn; the store keeps its SHA-256.
//! A client presenting it (`VOX_AGENT_TOKEN`) is that agent on every call.

use crate::orchestration::{actor, agent_for, dispatch, operator_only};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::Digest;
use std::sync::Arc;
use vox_core::family::{blocking, quick};
use vox_core::{CallCtx, Ctx, Family, HandlerEntry, StepDone, ToolError};
use vox_mcp_registry::{BootStep, ProfileSet};
use vox_store::{Agent, Assignment, Event, EventFilter, FileLock, NewAgent, Retired, Store, Task};
use vox_tools_common::store::{db, store};

/// The prefix of every agent credential (so a leaked one is recognisable).
pub const TOKEN_PREFIX: &str = "voxa_";

/// A fresh credential: the prefix and 32 bytes from the kernel's random source, in hex.
fn new_token() -> Result<String, ToolError> {
    use std::io::Read;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| ToolError::internal(format!("no randomness for a credential: {e}")))?;
    Ok(format!("{TOKEN_PREFIX}{}", hex(&bytes)))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What the store keeps of a credential.
pub fn token_hash(token: &str) -> String {
    hex(&sha2::Sha256::digest(token.as_bytes()))
}

/// The agent (not retired) a credential belongs to. Comparing hashes by lookup leaks nothing
/// about the credential: the hash of a guess says nothing about the hash of the secret.
pub fn agent_of_token(store: &Store, token: &str) -> Result<Option<Agent>, ToolError> {
    if !token.starts_with(TOKEN_PREFIX) || token.len() != TOKEN_PREFIX.len() + 64 {
        return Ok(None);
    }
    store.agent_by_token(&token_hash(token)).map_err(db)
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SpawnArgs {
    /// Its id (1 to 64 letters, digits, '.', '_' or '-'); default `agent-<n>`.
    agent_id: Option<String>,
    /// What it is for, in a few words.
    #[serde(default)]
    role: String,
    /// The capability profile its own calls are decided under (default: the daemon's).
    profile: Option<String>,
    /// How many tasks it holds at once (default 1, at most 64).
    capacity: Option<i64>,
    /// Its token budget per attention window (default: the window's default).
    budget_tokens: Option<i64>,
    /// What runs it: `codex`, a `codex app-server` worker the daemon runs in its own git
    /// worktree; left out, the agent is a client of its own that presents the credential.
    runner: Option<Runner>,
}

/// What runs an agent.
#[derive(Deserialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum Runner {
    Codex,
}

#[derive(Serialize, JsonSchema)]
struct Spawned {
    agent: Agent,
    /// Its credential, shown this once: give it to the agent's MCP client as
    /// `VOX_AGENT_TOKEN`, and every call it makes is this agent's.
    token: String,
    assigned: Vec<Assignment>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AgentArgs {
    agent_id: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RetireArgs {
    agent_id: String,
    /// Why (recorded).
    reason: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct RetiredOut {
    #[serde(flatten)]
    retired: Retired,
    assigned: Vec<Assignment>,
}

#[derive(Serialize, JsonSchema)]
struct AgentOut {
    agent: Agent,
    assigned: Vec<Assignment>,
}

#[derive(Serialize, JsonSchema)]
struct Drained {
    agent: Agent,
    /// Tasks it had not started, back in the queue.
    requeued: Vec<i64>,
    assigned: Vec<Assignment>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct StatusArgs {
    /// The agent (an agent sees itself by default; the operator sees every agent).
    agent_id: Option<String>,
    /// Retired agents too, when listing all.
    #[serde(default)]
    retired: bool,
}

/// An agent with what it holds.
#[derive(Serialize, JsonSchema)]
struct AgentView {
    agent: Agent,
    /// Its queue: running first, then by priority.
    tasks: Vec<Task>,
    files: Vec<FileLock>,
    /// Milliseconds since its last heartbeat.
    silent_ms: i64,
    /// Its `codex app-server` worker, when the daemon runs it.
    #[serde(skip_serializing_if = "Option::is_none")]
    worker: Option<crate::fleet::WorkerStatus>,
}

#[derive(Serialize, JsonSchema)]
struct Agents {
    agents: Vec<AgentView>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EventsArgs {
    /// The agent (an agent sees its own by default).
    agent_id: Option<String>,
    /// The `next_cursor` of the previous read (default 0).
    #[serde(default)]
    cursor: i64,
    /// At most this many (default 100, at most 1000).
    limit: Option<u32>,
}

#[derive(Serialize, JsonSchema)]
struct AgentEvents {
    events: Vec<Event>,
    next_cursor: i64,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct HeartbeatArgs {
    /// The agent (the operator names it; an agent is itself).
    agent_id: Option<String>,
    /// The assigned task it is starting now (it becomes running).
    task_id: Option<i64>,
}

#[derive(Serialize, JsonSchema)]
struct Beat {
    agent: Agent,
    /// Its queue after the beat.
    tasks: Vec<Task>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct BudgetArgs {
    agent_id: String,
    /// Tokens per attention window; leave out to go back to the default.
    tokens: Option<i64>,
}

#[derive(Serialize, JsonSchema)]
struct BudgetSet {
    agent: Agent,
    /// Its budget now, as `vox_budget_status` reports it.
    budget: vox_tools_knowledge::attention_state::BudgetStatus,
}

fn next_id(s: &Store) -> Result<String, ToolError> {
    let taken: Vec<String> = s
        .agents(true)
        .map_err(db)?
        .into_iter()
        .map(|a| a.id)
        .collect();
    Ok((1..)
        .map(|n| format!("agent-{n}"))
        .find(|id| !taken.contains(id))
        .unwrap_or_default())
}

fn spawn(ctx: &Ctx, call: &CallCtx, a: SpawnArgs) -> Result<Spawned, ToolError> {
    operator_only(call, "spawns agents")?;
    let s = store(ctx)?;
    let profile = match a.profile {
        Some(p) => ProfileSet::parse(&p)
            .map_err(|e| ToolError::invalid_arguments(format!("`profile`: {e}")))?
            .canonical()
            .to_owned(),
        None => ctx.profile.canonical().to_owned(),
    };
    if a.budget_tokens.is_some_and(|b| b < 0) {
        return Err(ToolError::invalid_arguments(
            "`budget_tokens` must not be negative",
        ));
    }
    let id = match a.agent_id {
        Some(id) => id,
        None => next_id(s)?,
    };
    let token = new_token()?;
    let fleet = match a.runner {
        Some(Runner::Codex) => {
            vox_store::check_agent_id(&id).map_err(db)?;
            if s.agent_get(&id).is_ok() {
                return Err(ToolError::conflict(format!(
                    "agent {id} exists already; agent ids are never reused"
                )));
            }
            let fleet = ctx
                .require::<Arc<crate::fleet::Fleet>>("the agent fleet")?
                .clone();
            fleet.prepare(&id, &token)?;
            Some(fleet)
        }
        None => None,
    };
    let agent = s
        .agent_spawn(
            &NewAgent {
                id,
                role: a.role,
                profile,
                runner: fleet.as_ref().map(|_| "codex".to_owned()),
                capacity: a.capacity.unwrap_or(1),
                budget_tokens: a.budget_tokens,
                host: fleet.as_ref().map(|_| worker_host(ctx)),
            },
            &token_hash(&token),
            actor(call),
        )
        .map_err(db)?;
    if let (Some(att), Some(b)) = (
        ctx.get::<Arc<vox_tools_knowledge::Attention>>(),
        agent.budget_tokens,
    ) {
        att.set_agent_budget(&agent.id, Some(b as u64));
    }
    if let Some(f) = fleet {
        f.start(&agent.id);
    }
    Ok(Spawned {
        agent,
        token,
        assigned: dispatch(ctx)?,
    })
}

fn retire(ctx: &Ctx, call: &CallCtx, a: RetireArgs) -> Result<RetiredOut, ToolError> {
    operator_only(call, "retires agents")?;
    let reason = a.reason.unwrap_or_else(|| "retired".into());
    vox_tools_common::bounded("reason", &reason, 4096)?;
    let retired = store(ctx)?
        .agent_retire(&a.agent_id, actor(call), &reason)
        .map_err(db)?;
    if let Some(f) = ctx.get::<Arc<crate::fleet::Fleet>>() {
        f.stop(&a.agent_id);
    }
    ctx.agent_calls.cancel(Some(&a.agent_id));
    Ok(RetiredOut {
        retired,
        assigned: dispatch(ctx)?,
    })
}

fn set_active(ctx: &Ctx, call: &CallCtx, id: &str, active: bool) -> Result<AgentOut, ToolError> {
    operator_only(
        call,
        if active {
            "resumes agents"
        } else {
            "pauses agents"
        },
    )?;
    let agent = store(ctx)?
        .agent_set_active(id, active, actor(call))
        .map_err(db)?;
    Ok(AgentOut {
        agent,
        assigned: dispatch(ctx)?,
    })
}

fn pause(ctx: &Ctx, call: &CallCtx, a: AgentArgs) -> Result<AgentOut, ToolError> {
    set_active(ctx, call, &a.agent_id, false)
}

fn resume(ctx: &Ctx, call: &CallCtx, a: AgentArgs) -> Result<AgentOut, ToolError> {
    set_active(ctx, call, &a.agent_id, true)
}

fn drain(ctx: &Ctx, call: &CallCtx, a: AgentArgs) -> Result<Drained, ToolError> {
    operator_only(call, "drains agents")?;
    let s = store(ctx)?;
    let agent = s.agent_get(&a.agent_id).map_err(db)?;
    let requeued = s
        .agent_requeue(&agent.id, false, actor(call), "drained")
        .map_err(db)?;
    // The drained agent must not get the same tasks straight back.
    let paused = agent.state == vox_store::AgentState::Active;
    if paused {
        s.agent_set_active(&agent.id, false, actor(call))
            .map_err(db)?;
    }
    let assigned = dispatch(ctx)?;
    if paused {
        s.agent_set_active(&agent.id, true, actor(call))
            .map_err(db)?;
    }
    Ok(Drained {
        agent: s.agent_get(&agent.id).map_err(db)?,
        requeued,
        assigned,
    })
}

fn view(ctx: &Ctx, s: &Store, agent: Agent) -> Result<AgentView, ToolError> {
    Ok(AgentView {
        worker: ctx
            .get::<Arc<crate::fleet::Fleet>>()
            .and_then(|f| f.status(&agent.id)),
        tasks: s.tasks_of(&agent.id, false, 1000).map_err(db)?,
        files: s.locks(Some(&agent.id), 10_000).map_err(db)?,
        silent_ms: vox_store::now_ms().saturating_sub(agent.heartbeat_at),
        agent,
    })
}

fn status(ctx: &Ctx, call: &CallCtx, a: StatusArgs) -> Result<Agents, ToolError> {
    let s = store(ctx)?;
    let agents = match crate::orchestration::scope(call, a.agent_id)? {
        Some(id) => vec![s.agent_get(&id).map_err(db)?],
        None => s.agents(a.retired).map_err(db)?,
    };
    Ok(Agents {
        agents: agents
            .into_iter()
            .map(|agent| view(ctx, s, agent))
            .collect::<Result<_, _>>()?,
    })
}

fn events(ctx: &Ctx, call: &CallCtx, a: EventsArgs) -> Result<AgentEvents, ToolError> {
    let agent = agent_for(call, a.agent_id)?;
    let s = store(ctx)?;
    s.agent_get(&agent).map_err(db)?;
    let events = s
        .events(
            &EventFilter {
                after: a.cursor.max(0),
                agent: Some(&agent),
                ..EventFilter::default()
            },
            a.limit.unwrap_or(100).clamp(1, 1000) as usize,
        )
        .map_err(db)?;
    let next_cursor = events.last().map_or(a.cursor.max(0), |e| e.id);
    Ok(AgentEvents {
        events,
        next_cursor,
    })
}

fn heartbeat(ctx: &Ctx, call: &CallCtx, a: HeartbeatArgs) -> Result<Beat, ToolError> {
    let id = agent_for(call, a.agent_id)?;
    let s = store(ctx)?;
    let agent = s.agent_heartbeat(&id).map_err(db)?;
    if let Some(t) = a.task_id {
        s.task_move(t, &vox_store::TaskMove::Start, &id)
            .map_err(db)?;
        crate::orchestration::changed(ctx);
    }
    Ok(Beat {
        tasks: s.tasks_of(&id, false, 1000).map_err(db)?,
        agent,
    })
}

fn set_budget(ctx: &Ctx, call: &CallCtx, a: BudgetArgs) -> Result<BudgetSet, ToolError> {
    operator_only(call, "sets budgets")?;
    if a.tokens.is_some_and(|t| t < 0) {
        return Err(ToolError::invalid_arguments(
            "`tokens` must not be negative",
        ));
    }
    let attention =
        ctx.require::<Arc<vox_tools_knowledge::Attention>>("the attention subsystem")?;
    let agent = store(ctx)?
        .agent_set_budget(&a.agent_id, a.tokens, actor(call))
        .map_err(db)?;
    attention.set_agent_budget(&agent.id, a.tokens.map(|t| t as u64));
    crate::orchestration::changed(ctx);
    Ok(BudgetSet {
        budget: attention.budget_status(Some(&agent.id)),
        agent,
    })
}

/// The `agent_fleet` step: agents and tasks live in the store; `VOX_MCP_AGENT_FLEET=0` turns
/// the subsystem off.
fn boot(ctx: &mut Ctx) -> Result<StepDone, String> {
    if vox_core::env::flag("VOX_MCP_AGENT_FLEET").map_err(|e| e.to_string())? == Some(false) {
        return Err("disabled by VOX_MCP_AGENT_FLEET".into());
    }
    let Some(s) = ctx.get::<Arc<Store>>().cloned() else {
        return Err("needs the journey store, which is not open".into());
    };
    let agents = s.agents(false).map_err(|e| e.to_string())?;
    let store = s.clone();
    ctx.set_agent_directory(Arc::new(Directory { store }));
    let fleet = crate::fleet::Fleet::new(
        s.clone(),
        &ctx.workspace,
        ctx.profile.canonical(),
        crate::orchestration::Announcer::new(ctx),
    );
    ctx.insert(Arc::new(fleet));
    let codex_workers = agents.iter().filter(|a| a.runner.is_some()).count();
    let runner = match crate::fleet::Fleet::codex() {
        Ok(_) => "codex workers can run here".to_owned(),
        Err(e) => format!("codex workers cannot run here: {e}"),
    };
    ctx.insert(Arc::new(crate::approvals::ApprovalBell::default()));
    // Nothing that waited for a decision survives its call: those calls died with the daemon.
    let expired = s
        .approvals_expire_pending("the daemon restarted while the call waited")
        .map_err(|e| e.to_string())?;
    Ok(StepDone::Ready(format!(
        "{} agents in the store, {codex_workers} run by the daemon ({runner}); {expired} pending approvals expired",
        agents.len()
    )))
}

/// Once every step ran (attention boots after the fleet): the gate of the agent path, and the
/// budgets set with `vox_set_agent_budget`, which outlive the daemon.
fn after_boot(ctx: &mut Ctx) {
    let (Some(store), Some(bell)) = (
        ctx.get::<Arc<Store>>().cloned(),
        ctx.get::<Arc<crate::approvals::ApprovalBell>>().cloned(),
    ) else {
        return;
    };
    let attention = ctx.get::<Arc<vox_tools_knowledge::Attention>>().cloned();
    if let (Some(att), Ok(agents)) = (&attention, store.agents(false)) {
        for a in agents {
            if let Some(b) = a.budget_tokens {
                att.set_agent_budget(&a.id, Some(b as u64));
            }
        }
    }
    let announce = crate::orchestration::Announcer::new(ctx);
    ctx.set_agent_gate(Arc::new(crate::approvals::Gate {
        store: store.clone(),
        bell,
        attention,
        announce,
    }));
    ctx.add_dynamic_tools(Arc::new(crate::orchestration::EventsResource(store)));
}

/// The agents' credentials, for the transports.
struct Directory {
    store: Arc<Store>,
}

impl Directory {
    fn identity(a: Agent) -> Result<vox_core::AgentIdentity, ToolError> {
        let profile = ProfileSet::parse(&a.profile).map_err(|e| {
            ToolError::internal(format!("agent {}'s profile {}: {e}", a.id, a.profile))
        })?;
        Ok(vox_core::AgentIdentity { id: a.id, profile })
    }
}

impl vox_core::AgentDirectory for Directory {
    fn authenticate(&self, credential: &str) -> Result<Option<vox_core::AgentIdentity>, ToolError> {
        agent_of_token(&self.store, credential)?
            .map(Self::identity)
            .transpose()
    }
    fn current(&self, id: &str) -> Result<Option<vox_core::AgentIdentity>, ToolError> {
        match self.store.agent_get(id) {
            Ok(a) if a.state == vox_store::AgentState::Retired => Ok(None),
            Ok(a) => Self::identity(a).map(Some),
            Err(vox_store::StoreError::NotFound(_)) => Ok(None),
            Err(e) => Err(db(e)),
        }
    }
}

/// Where this daemon runs agents' workers: its host and workspace (a replica on a shared
/// store is told apart from the others by these).
fn worker_host(ctx: &Ctx) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    format!("{}:{}", host.trim(), ctx.workspace.root.display())
}

/// Whether this daemon (at `me`) runs the worker of runner agent `a`: one it spawned; on a
/// store only this daemon uses, also one spawned before workers' hosts were recorded.
fn runs_here(a: &Agent, me: &str, shared: bool) -> bool {
    match a.host.as_deref() {
        Some(h) => h == me,
        None => !shared,
    }
}

/// Once the daemon is up: the workers of agents it runs start again (a task one was running
/// when the daemon went away goes back to the queue first), and lapsed file leases are expired
/// every two seconds, letting the tasks that waited for those files go.
fn on_started(ctx: Arc<Ctx>) {
    let (Some(fleet), Some(store)) = (
        ctx.get::<Arc<crate::fleet::Fleet>>().cloned(),
        ctx.get::<Arc<Store>>().cloned(),
    ) else {
        return;
    };
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let me = worker_host(&ctx);
    let shared = store.postgres().is_some();
    for a in store.agents(false).unwrap_or_default() {
        if a.runner.as_deref() == Some("codex") && runs_here(&a, &me, shared) {
            if let Err(e) = store.agent_requeue(&a.id, true, "daemon", "the daemon restarted") {
                tracing::warn!(agent = a.id, "requeueing after a restart: {e}");
            }
            // A previous daemon killed outright leaves its workers' processes behind.
            fleet.sweep(&a.id);
            let _guard = rt.enter();
            fleet.start(&a.id);
        }
    }
    rt.spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(2));
        loop {
            tick.tick().await;
            let s = store.clone();
            let lapsed = vox_core::family::run_blocking(move || {
                let lapsed = s.locks_expire().map_err(db)?;
                if !lapsed.is_empty() {
                    s.dispatch(256).map_err(db)?;
                }
                Ok(lapsed)
            })
            .await;
            if lapsed.is_ok_and(|l| !l.is_empty()) {
                fleet.kick_all();
            }
        }
    });
}

pub fn family() -> Family {
    Family {
        name: "agents",
        steps: vec![(BootStep::AgentFleet, boot)],
        handlers: handlers(),
        after_boot: Some(after_boot),
        on_started: Some(on_started),
        on_stopping: Some(|ctx| {
            if let Some(f) = ctx.get::<Arc<crate::fleet::Fleet>>() {
                f.end_all();
            }
        }),
    }
}

fn handlers() -> Vec<(&'static str, HandlerEntry)> {
    vec![
        ("vox_spawn_agent", blocking(spawn)),
        ("vox_retire_agent", blocking(retire)),
        ("vox_pause_agent", blocking(pause)),
        ("vox_resume_agent", blocking(resume)),
        ("vox_drain_agent", blocking(drain)),
        ("vox_agent_status", blocking(status)),
        ("vox_agent_events", blocking(events)),
        (
            "vox_heartbeat",
            quick(heartbeat, vox_tools_common::store::free),
        ),
        ("vox_set_agent_budget", blocking(set_budget)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runner_on(host: Option<&str>) -> Agent {
        Agent {
            id: "w".into(),
            role: String::new(),
            profile: "orchestrator".into(),
            runner: Some("codex".into()),
            state: vox_store::AgentState::Active,
            capacity: 1,
            budget_tokens: None,
            heartbeat_at: 0,
            created_at: 0,
            updated_at: 0,
            host: host.map(str::to_owned),
        }
    }

    #[test]
    fn a_replica_restarts_only_the_workers_it_runs() {
        let me = "box:/srv/replica-1";
        assert!(runs_here(&runner_on(Some(me)), me, true));
        assert!(!runs_here(&runner_on(Some("box:/srv/replica-2")), me, true));
        assert!(!runs_here(
            &runner_on(Some("box:/srv/replica-2")),
            me,
            false
        ));
        // Spawned before hosts were recorded: its own on a store only it uses, on a shared
        // one no one's to guess.
        assert!(runs_here(&runner_on(None), me, false));
        assert!(!runs_here(&runner_on(None), me, true));
    }
}
