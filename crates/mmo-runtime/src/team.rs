//! One running session as a team: what the Agent-MCP tools do, independent of how a caller
//! reached the supervisor. Every decision reads and writes the durable store first and then
//! wakes the waiters, so whatever a caller is told survives a `kill -9` of the supervisor.

use crate::result::JobState;
use crate::store::{Run, Store, StoreError};
use mmo_profile::model::{Agent, Profile};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// A refusal or failure of an Agent-MCP call: a stable code and a message naming what was wrong.
#[derive(Debug, Clone)]
pub struct MeshError {
    pub code: String,
    pub message: String,
}

impl MeshError {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> MeshError {
        MeshError {
            code: code.into(),
            message: message.into(),
        }
    }
}

impl From<StoreError> for MeshError {
    fn from(e: StoreError) -> MeshError {
        MeshError::new(e.code(), e.to_string())
    }
}

impl std::fmt::Display for MeshError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{}] {}", self.code, self.message)
    }
}

pub type MeshResult<T> = Result<T, MeshError>;

/// A live host the supervisor owns: how to stop it.
pub struct HostHandle {
    pub pid: Option<u32>,
    /// Set to the terminal state the run is to end in (`stopped`, `cancelled`) and why.
    pub stop: tokio::sync::watch::Sender<Option<(crate::result::JobState, String)>>,
    /// Live controls the host's event loop delivers to its app-server (`steer`, ...).
    pub control: tokio::sync::mpsc::UnboundedSender<Control>,
}

/// A live control for a host's event loop to deliver. `reply` answers with the app-server's
/// answer or why delivery failed; a reply sender dropped unanswered (the host died mid-call)
/// leaves the delivery unknown.
pub enum Control {
    /// `turn/steer`: more input for the active turn.
    Steer {
        text: String,
        reply: tokio::sync::oneshot::Sender<Result<Value, String>>,
    },
    /// `turn/interrupt`: the active turn ends `interrupted`, which pauses the job.
    Interrupt {
        reply: tokio::sync::oneshot::Sender<Result<Value, String>>,
    },
    /// `turn/interrupt` of a native thread's active turn, if it has one (its logical pause).
    InterruptThread {
        thread: String,
        reply: tokio::sync::oneshot::Sender<Result<Value, String>>,
    },
    /// `turn/start` on a native thread of this host (continuing its logically paused run).
    StartTurn {
        thread: String,
        text: String,
        reply: tokio::sync::oneshot::Sender<Result<Value, String>>,
    },
    /// The answer to a pending server→client request (an approval, an elicitation, user
    /// input), named by its `request_id` as `pending_inputs` shows it.
    Respond {
        request_id: String,
        result: Value,
        reply: tokio::sync::oneshot::Sender<Result<Value, String>>,
    },
}

/// The state of one session the supervisor runs.
pub struct Team {
    pub store: Arc<Store>,
    pub session: String,
    pub snapshot: PathBuf,
    /// The session's own directory (live homes, worktrees, logs, socket).
    pub dir: PathBuf,
    /// The canonical checkout.
    pub workspace: PathBuf,
    pub profile: Profile,
    /// The snapshot's effective ceilings and resource group capacities (admission reads them).
    pub ceilings: crate::admission::Ceilings,
    pub capacities: crate::admission::Capacities,
    pub root_ref: String,
    /// The `codex-mmo` binary, which Codex runs as the `mmo_mesh` stdio server.
    pub exe: PathBuf,
    pub socket: PathBuf,
    /// How to run Codex; `None` when it cannot be found (spawns then fail with that reason).
    pub codex: Result<codex_app_server::CodexCommand, String>,
    pub hosts: Mutex<HashMap<String, HostHandle>>,
    /// Serializes admission: two spawns never both take the last slot.
    pub admit: tokio::sync::Mutex<()>,
    /// One lock per controlled run: a mutating control holds it from its revision check through
    /// its delivery, so two controls of one target never interleave.
    pub control_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Bumped after every durable change a waiter may care about.
    pub changed: tokio::sync::watch::Sender<u64>,
    /// Set once the session is over: the supervisor then exits.
    pub done: tokio::sync::watch::Sender<bool>,
}

impl Team {
    /// What admission reads that does not change during the session.
    pub fn policy(&self) -> crate::admission::Policy<'_> {
        crate::admission::Policy {
            profile: &self.profile,
            ceilings: &self.ceilings,
            capacities: &self.capacities,
            elsewhere: &crate::admission::NOWHERE_ELSE,
        }
    }

    /// Wakes every `agents_wait` and attach view.
    pub fn notify(&self) {
        self.changed.send_modify(|n| *n += 1);
    }

    /// The role of a run.
    pub fn role(&self, role: &str) -> MeshResult<&Agent> {
        self.profile.agents.get(role).ok_or_else(|| {
            MeshError::new(
                "unknown_role",
                format!("role `{role}` is not in profile `{}`", self.profile.id),
            )
        })
    }

    /// A run of this session (another session's refs do not resolve here).
    pub fn run(&self, run_ref: &str) -> MeshResult<Run> {
        match self.store.run(run_ref) {
            Ok(r) if r.session == self.session => Ok(r),
            Ok(_) | Err(StoreError::NotFound(_)) => Err(MeshError::new(
                "unknown_agent_run",
                format!("agent run `{run_ref}` is not in this session"),
            )),
            Err(e) => Err(e.into()),
        }
    }

    /// The run of a job of this session.
    pub fn job(&self, job: &str) -> MeshResult<Run> {
        match self.store.run_of_job(job) {
            Ok(r) if r.session == self.session => Ok(r),
            Ok(_) | Err(StoreError::NotFound(_)) => Err(MeshError::new(
                "unknown_job",
                format!("job `{job}` is not in this session"),
            )),
            Err(e) => Err(e.into()),
        }
    }

    /// Whether `ancestor` is `run` itself or one of its ancestors.
    pub fn is_lineage(&self, ancestor: &str, run: &Run) -> bool {
        run.run_ref == ancestor || run.lineage.iter().any(|r| r == ancestor)
    }

    /// Results are visible to the job's ancestors, or to the whole session under
    /// `result_visibility = "session"`.
    pub fn may_see(&self, caller: &Run, target: &Run) -> MeshResult<()> {
        let session_wide = self.profile.coordination.result_visibility == "session";
        if session_wide || target.lineage.contains(&caller.run_ref) {
            return Ok(());
        }
        Err(MeshError::new(
            "not_visible",
            format!(
                "agent run `{}` (role `{}`) is not a descendant of the caller `{}` (role `{}`) and result_visibility is `{}`",
                target.run_ref,
                target.role,
                caller.run_ref,
                caller.role,
                self.profile.coordination.result_visibility
            ),
        ))
    }

    /// The result lifecycle (accept, reject, integrate) belongs to the caller that spawned the job.
    pub fn owns(&self, caller: &Run, target: &Run) -> MeshResult<()> {
        if target.parent.as_deref() == Some(caller.run_ref.as_str()) {
            return Ok(());
        }
        Err(MeshError::new(
            "not_result_owner",
            format!(
                "only the caller that spawned job `{}` (agent run `{}`) may accept, reject or integrate it",
                target.job.as_deref().unwrap_or("?"),
                target.parent.as_deref().unwrap_or("?")
            ),
        ))
    }

    /// Whether the caller's role may `action` the target's role (the control graph). Low-trust
    /// roles control nothing. Ancestors may always inspect and trace their descendants.
    pub fn may_control(&self, caller: &Run, target: &Run, action: &str) -> MeshResult<()> {
        let role = self.role(&caller.role)?;
        if role.trust == "low" {
            return Err(MeshError::new(
                "control_denied",
                format!("role `{}` is low-trust and controls nothing", caller.role),
            ));
        }
        let granted = role
            .controls
            .get(&target.role)
            .is_some_and(|a| a.iter().any(|x| x == action));
        let lineage_read =
            matches!(action, "inspect" | "trace") && target.lineage.contains(&caller.run_ref);
        if granted || lineage_read {
            return Ok(());
        }
        Err(MeshError::new(
            "control_denied",
            format!(
                "role `{}` has no `{action}` control over role `{}` (its controls table does not list it)",
                caller.role, target.role
            ),
        ))
    }

    /// The reasoning efforts the snapshot's catalog lists for a model (empty when it lists none).
    pub fn model_efforts(&self, model: &str) -> Vec<String> {
        std::fs::read_to_string(self.snapshot.join("catalog.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .and_then(|c| serde_json::from_value(c["models"][model]["reasoning"].clone()).ok())
            .unwrap_or_default()
    }

    /// The control lock of a run (see `control_locks`).
    pub fn control_lock(&self, run_ref: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.control_locks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(run_ref.to_string())
            .or_default()
            .clone()
    }

    /// Records an audit line (failures to audit are failures of the call).
    pub fn audit(&self, actor: &Run, action: &str, target: &str, detail: Value) -> MeshResult<()> {
        self.store
            .audit(&self.session, &actor.run_ref, action, target, &detail)?;
        Ok(())
    }

    /// A compact public view of a run, with its live host's pid.
    pub fn view(&self, run: &Run) -> Value {
        let live = self
            .hosts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&run.run_ref)
            .and_then(|h| h.pid);
        let mut v = view_of(&self.store, run, live);
        if v["goal"].is_object()
            && let Ok(role) = self.role(&run.role)
        {
            v["goal"]["max_goal_token_budget"] = json!(role.max_goal_token_budget);
        }
        v
    }
}

/// The server→client requests of a run that wait for a controller's `respond`: traced as
/// pending and not answered since.
fn pending_inputs(store: &Store, run_ref: &str) -> Vec<Value> {
    let kinds = ["serverRequest".to_string(), "serverResponse".to_string()];
    let events = store
        .events(run_ref, 0, usize::MAX, Some(&kinds))
        .unwrap_or_default();
    let mut pending: Vec<Value> = Vec::new();
    for e in events {
        let body: Value = serde_json::from_str(&e.body).unwrap_or(Value::Null);
        if e.kind == "serverRequest" && body["pending"] == json!(true) {
            pending.push(json!({
                "request_id": body["request_id"],
                "method": body["method"],
                "params": body["params"],
            }));
        } else if e.kind == "serverResponse" {
            pending.retain(|p| p["request_id"] != body["request_id"]);
        }
    }
    pending
}

/// Whether a running run's controller detached from it (and has not reattached).
pub fn is_detached(store: &Store, run: &Run) -> bool {
    if run.state != JobState::Running {
        return false;
    }
    let last = |kind| {
        store
            .last_event(&run.run_ref, kind)
            .ok()
            .flatten()
            .map(|e| e.seq)
    };
    last("detached") > last("reattached")
}

/// A run as inspection shows it: state, revisions, scope, and its result's and patch's status.
pub fn view_of(store: &Store, run: &Run, live_pid: Option<u32>) -> Value {
    let (result, patch) = match &run.job {
        Some(job) => (
            store
                .result(job)
                .ok()
                .flatten()
                .map(|r| json!({"disposition": r.disposition, "final": r.final_, "total_chars": r.text.chars().count()})),
            store.patch(job).ok().flatten().map(|p| json!({"sha256": p.sha256, "state": p.state, "files": p.files})),
        ),
        None => (None, None),
    };
    let last_control = store.last_control(&run.run_ref).ok().flatten();
    let pending_inputs = if run.is_active() {
        pending_inputs(store, &run.run_ref)
    } else {
        Vec::new()
    };
    // A stall warning holds until the run makes progress again.
    let stall_warning = store.stall_warning(run).ok().flatten();
    // A goal's state and Codex's cumulative token count, as its last `thread/goal/updated`.
    let goal = store
        .last_event(&run.run_ref, "goal")
        .ok()
        .flatten()
        .and_then(|e| serde_json::from_str::<Value>(&e.body).ok())
        .map(|p| {
            let g = &p["goal"];
            json!({"status": g["status"], "tokens_used": g["tokensUsed"], "token_budget": g["tokenBudget"]})
        });
    json!({
        "agent_run_ref": run.run_ref,
        "job": run.job,
        "role": run.role,
        "backend": run.backend(),
        "state": run.state,
        "reason": run.reason,
        "parent": run.parent,
        "depth": run.depth,
        "task_kind": run.task_kind,
        "write_scope": run.write_scope,
        "progress_revision": run.progress_revision,
        "control_revision": run.control_revision,
        "last_control": last_control,
        "stall_warning": stall_warning,
        "pending_inputs": pending_inputs,
        "goal": goal,
        "detached": is_detached(store, run),
        "preview": run.preview,
        "thread_id": run.thread_id,
        "host_pid": live_pid.map(i64::from).or(if run.is_active() { run.host_pid } else { None }),
        "home": run.home,
        "cwd": run.cwd,
        "repairs": run.repairs,
        "result": result,
        "patch": patch,
        "package_version": run.package_version,
        "runtime_digest": run.runtime_digest,
        // Whether the binary that runs (or last ran) this run is the installed one.
        "runner_matches_installed": run.runtime_digest == store.runtime_digest()
            && run.package_version == crate::store::PACKAGE_VERSION,
        "updated_at": run.updated_at,
    })
}
