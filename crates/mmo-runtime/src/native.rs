//! Native sub-agents: threads Codex itself starts inside a host (`spawn_agent` of its
//! `multi_agent_v1` tools), for a profile's native roles (custom agents compiled into the
//! root's home as `agents/<native_name>.toml`) or for Codex's built-in agent types.
//!
//! They share their host's app-server connection, so the runtime cannot intercept them, but it
//! can observe them. Codex 0.169 sends no `thread/started` for a sub-agent: the spawning
//! thread's completed `collabAgentToolCall` item (`tool = "spawnAgent"`) names the new thread
//! (`receiverThreadIds`), and `thread/read` gives its `agentRole`. Each such thread becomes a
//! *native run* of the session (no job, parent = the run whose thread spawned it) with its own
//! trace, and its first turn's end is its state. Its notifications that arrive before the spawn
//! item completes are held (bounded) and replayed once it is known. That observation is the "native-role behavioural marker" smoke
//! needs: a thread whose `agentRole` is the role's `native_name`, started under the root, whose
//! turn completed. Native runs hold no Agent-MCP admission slot: Codex's own thread cap
//! (`agents.max_concurrent_threads_per_session`) bounds them. Their pause is logical: the run
//! is marked paused and its active turn interrupted through its spawner's host, which goes on;
//! a `continue` starts a turn on the same thread there.

use crate::result::JobState;
use crate::store::{NewRun, Run};
use crate::team::Team;
use serde_json::{Value, json};
use std::collections::HashMap;

/// The role a native run is recorded under when its thread's `agentRole` names no role of the
/// profile (a Codex built-in agent type such as `default` or `explorer`).
pub const BUILTIN_PREFIX: &str = "codex:";

/// Which run each thread of one host belongs to: the host's own thread and every native thread
/// started under it (nested native threads included).
pub struct Threads {
    runs: HashMap<String, Run>,
    /// The active turn of each thread that has one (a native run's logical pause interrupts it).
    turns: HashMap<String, String>,
    /// Notifications of threads not (yet) known, oldest first.
    pending: HashMap<String, Vec<(String, Value)>>,
}

/// Notifications held per unknown thread, and unknown threads held at once: a thread that never
/// becomes known costs at most this much.
const PENDING_PER_THREAD: usize = 256;
const PENDING_THREADS: usize = 64;

impl Threads {
    pub fn new(thread: &str, run: &Run) -> Threads {
        Threads {
            runs: HashMap::from([(thread.to_string(), run.clone())]),
            turns: HashMap::new(),
            pending: HashMap::new(),
        }
    }

    /// Follows a thread's active turn from its `turn/started` and `turn/completed`.
    pub fn track_turn(&mut self, thread: &str, method: &str, params: &Value) {
        match method {
            "turn/started" => {
                if let Some(turn) = params.pointer("/turn/id").and_then(Value::as_str)
                    && (self.turns.contains_key(thread) || self.turns.len() < PENDING_THREADS)
                {
                    self.turns.insert(thread.to_string(), turn.to_string());
                }
            }
            "turn/completed" => {
                self.turns.remove(thread);
            }
            _ => {}
        }
    }

    /// A thread's active turn, if it has one.
    pub fn turn(&self, thread: &str) -> Option<&str> {
        self.turns.get(thread).map(String::as_str)
    }

    /// Holds a notification of a thread that is not known yet (beyond the bounds it is dropped).
    pub fn hold(&mut self, thread: &str, method: &str, params: &Value) {
        if !self.pending.contains_key(thread) && self.pending.len() >= PENDING_THREADS {
            return;
        }
        let held = self.pending.entry(thread.to_string()).or_default();
        if held.len() < PENDING_PER_THREAD {
            held.push((method.to_string(), params.clone()));
        }
    }

    /// The notifications held for a thread that has just become known.
    pub fn take_pending(&mut self, thread: &str) -> Vec<(String, Value)> {
        self.pending.remove(thread).unwrap_or_default()
    }

    /// The run a known thread belongs to.
    pub fn run(&self, thread: &str) -> Option<&Run> {
        self.runs.get(thread)
    }

    /// The native runs not ended yet (active, or logically paused), for when their host ends.
    pub fn active_native(&self, team: &Team) -> Vec<String> {
        self.runs
            .values()
            .filter(|r| r.is_native())
            .filter_map(|r| team.store.run(&r.run_ref).ok())
            .filter(|r| r.is_active() || r.state == JobState::Paused)
            .map(|r| r.run_ref)
            .collect()
    }

    /// A sub-agent thread (`thread/read`'s `Thread`) spawned by the known thread `spawner`
    /// becomes a running native run. Returns its ref.
    pub fn started(&mut self, team: &Team, thread: &Value, spawner: &str) -> Option<String> {
        let id = thread.get("id")?.as_str()?;
        if self.runs.contains_key(id) {
            return None;
        }
        let parent_thread = thread
            .get("parentThreadId")
            .and_then(Value::as_str)
            .filter(|p| self.runs.contains_key(*p))
            .unwrap_or(spawner);
        let parent = self.runs.get(parent_thread)?.clone();
        let agent_role = thread
            .get("agentRole")
            .or_else(|| thread.pointer("/source/subAgent/thread_spawn/agent_role"))
            .and_then(Value::as_str);
        let role = role_of(team, agent_role);
        let run_ref = crate::ids::new_id("run");
        let mut lineage = parent.lineage.clone();
        lineage.push(parent.run_ref.clone());
        let run = team
            .store
            .create_run(&NewRun {
                run_ref: &run_ref,
                session: &team.session,
                job: None,
                role: &role,
                parent: Some(&parent.run_ref),
                depth: parent.depth + 1,
                lineage: &lineage,
                task_kind: None,
                task: thread.get("preview").and_then(Value::as_str),
                literal: None,
                write_scope: &[],
                is_writer: false,
                resource_group: None,
                units: 0,
            })
            .ok()?;
        let _ = team.store.set_host(
            &run_ref,
            parent.host_pid.map(|p| p as u32),
            Some(id),
            parent.home.as_deref().unwrap_or(""),
            thread
                .get("cwd")
                .and_then(Value::as_str)
                .or(parent.cwd.as_deref())
                .unwrap_or(""),
        );
        let _ = team.store.transition(&run_ref, JobState::Running, None);
        let _ = team.audit(
            &parent,
            "native_spawn",
            &run_ref,
            json!({"role": role, "agent_role": agent_role, "agent_nickname": thread.get("agentNickname"), "thread_id": id, "read_error": thread.get("readError")}),
        );
        self.runs.insert(id.to_string(), run);
        team.notify();
        Some(run_ref)
    }
}

/// The profile role whose `native_name` is `agent_role`, else `codex:<agent_role>`.
fn role_of(team: &Team, agent_role: Option<&str>) -> String {
    let name = agent_role.unwrap_or("default");
    team.profile
        .agents
        .iter()
        .find(|(_, a)| a.native_name.as_deref() == Some(name))
        .map(|(role, _)| role.clone())
        .unwrap_or_else(|| format!("{BUILTIN_PREFIX}{name}"))
}

/// A native thread's turn ended: its run takes that end (the first end counts; a later turn on
/// the same thread, after `send_input`, is traced but cannot reopen a terminal run). A run its
/// controller paused stays paused: the pause interrupted that turn.
pub fn turn_ended(team: &Team, run_ref: &str, status: &str, error: Option<&str>) {
    if team
        .store
        .run(run_ref)
        .is_ok_and(|r| r.state == JobState::Paused)
    {
        return;
    }
    let (state, reason) = match status {
        "completed" => (JobState::Completed, None),
        "interrupted" => (JobState::Stopped, Some("its turn was interrupted")),
        _ => (JobState::Failed, error.or(Some("its turn failed"))),
    };
    if team.store.transition(run_ref, state, reason).is_ok() {
        team.notify();
    }
}

/// The host is ending: its native runs still active end with it (`stopped` when the host was
/// stopped, `cancelled` otherwise; Codex ends them with their host).
pub fn end_with_host(team: &Team, threads: &Threads, stopped: bool) {
    let (state, reason) = if stopped {
        (JobState::Stopped, "its host was stopped")
    } else {
        (
            JobState::Cancelled,
            "its host ended while this native run was active",
        )
    };
    for run_ref in threads.active_native(team) {
        let _ = team.store.transition(&run_ref, state, Some(reason));
    }
    team.notify();
}

/// The thread a notification is about.
pub fn thread_of(params: &Value) -> Option<&str> {
    params.get("threadId").and_then(Value::as_str)
}

/// The threads a completed item spawned: a `collabAgentToolCall` of `spawnAgent`'s receivers.
pub fn spawned_threads(item: &Value) -> Vec<String> {
    if item.get("type").and_then(Value::as_str) != Some("collabAgentToolCall")
        || item.get("tool").and_then(Value::as_str) != Some("spawnAgent")
    {
        return Vec::new();
    }
    item.get("receiverThreadIds")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}
