//! An in-process harness for the tool families: [`Harness::boot`] boots an [`Orchestrator`]
//! with every family of `vox_tools::families()` on a fresh temp workspace (its `.vox/` and
//! journey store inside), and calls go through a [`CallScope`] with
//! `Orchestrator::call(&scope, name, args, CallRun::default())` and `list(&scope)`: the one
//! call path every transport takes, without a daemon, a socket or a spawned binary.
//!
//! The orchestrator reads the process environment as the daemon does (`VOX_LLM_*`,
//! `VOX_HOME`, `VOX_SKILL_PATH`, ...); the harness sets none of it.

use serde_json::Value;
use std::path::Path;
use std::sync::{Arc, Mutex};
use tempfile::TempDir;
use vox_core::{
    CallEvents, CallRun, CallScope, Ctx, LogLevel, LogMessage, Orchestrator, Progress,
    SessionEffect, ToolOutcome, Workspace, WorkspaceTools,
};
use vox_mcp_registry::Caller;
pub use vox_mcp_registry::ProfileSet;

/// The principal and session of [`Harness::operator`] scopes unless a test names another.
pub const OPERATOR: &str = "harness";

/// One booted orchestrator on its own temp workspace; the workspace goes with it.
pub struct Harness {
    orch: Arc<Orchestrator>,
    _dir: TempDir,
}

impl Harness {
    /// Every family under `dev`, on an empty workspace.
    pub fn boot() -> Self {
        Self::boot_with(ProfileSet::dev(), |_| {})
    }

    /// Every family under `dev`, on a workspace `setup` fills first (see [`Harness::boot_with`]).
    pub fn boot_in(setup: impl FnOnce(&Path)) -> Self {
        Self::boot_with(ProfileSet::dev(), setup)
    }

    /// Every family under `profile`, on a workspace `setup` fills first (files, a git
    /// repository, skills) before the orchestrator boots on it.
    pub fn boot_with(profile: ProfileSet, setup: impl FnOnce(&Path)) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("vox-harness")
            .tempdir()
            .expect("a temp workspace");
        setup(dir.path());
        let ws = Workspace::at(dir.path()).expect("the temp workspace");
        ws.ensure_vox_dir().expect("the workspace's .vox/");
        let orch = Orchestrator::boot(ws, profile, vox_tools::families())
            .unwrap_or_else(|e| panic!("boot: {e}"))
            .shared();
        Harness { orch, _dir: dir }
    }

    /// The workspace root (canonical, as the orchestrator knows it).
    pub fn root(&self) -> &Path {
        &self.orch.workspace().root
    }

    /// The booted orchestrator.
    pub fn orch(&self) -> &Arc<Orchestrator> {
        &self.orch
    }

    /// The families' shared context (their state, by type).
    pub fn ctx(&self) -> &Arc<Ctx> {
        self.orch.ctx()
    }

    /// A local operator's scope (a stdio or socket client: loopback, write role) on the
    /// orchestrator's profile, in its own named `session`, reaching workspace and skill tools.
    pub fn operator(&self, session: &str) -> Arc<CallScope> {
        Arc::new(
            self.local(session)
                .with_workspace_tools(WorkspaceTools::Listed),
        )
    }

    /// Orchestrator agent `id`'s scope (as if its credential was checked), in `session`.
    pub fn agent(&self, id: &str, session: &str) -> Arc<CallScope> {
        Arc::new(self.local(session).as_agent(id))
    }

    fn local(&self, session: &str) -> CallScope {
        CallScope::new(
            self.orch.profile().clone(),
            Caller::LOCAL,
            OPERATOR,
            session,
        )
    }

    /// Calls `name` under `scope`, as a transport would.
    pub async fn call_in(&self, scope: &Arc<CallScope>, name: &str, args: Value) -> ToolOutcome {
        self.orch.call(scope, name, args, CallRun::default()).await
    }

    /// Calls `name` under `scope` as a client that asked for progress and every log message:
    /// the outcome, and what the call sent its transport.
    pub async fn call_recorded(
        &self,
        scope: &Arc<CallScope>,
        name: &str,
        args: Value,
    ) -> (ToolOutcome, Arc<Recorded>) {
        let rec = Arc::new(Recorded::default());
        let run = CallRun {
            events: Some(rec.clone()),
            progress: true,
            log_level: Some(LogLevel::Debug),
            ..CallRun::default()
        };
        (self.orch.call(scope, name, args, run).await, rec)
    }

    /// Calls `name` as the operator in session [`OPERATOR`].
    pub async fn call(&self, name: &str, args: Value) -> ToolOutcome {
        self.call_in(&self.operator(OPERATOR), name, args).await
    }

    /// The value of a call under `scope` that must succeed (`{"content": blocks}` for content).
    pub async fn ok_in(&self, scope: &Arc<CallScope>, name: &str, args: Value) -> Value {
        match self.call_in(scope, name, args.clone()).await {
            o @ (ToolOutcome::Ok(_) | ToolOutcome::Content(_)) => o.to_json(),
            o => panic!("{name}({args}): {} {}", o.label(), o.to_json()),
        }
    }

    /// The value of an operator's call that must succeed.
    pub async fn ok(&self, name: &str, args: Value) -> Value {
        self.ok_in(&self.operator(OPERATOR), name, args).await
    }

    /// The error code (a denial's or a tool error's) and the one error shape of a call under
    /// `scope` that must fail.
    pub async fn err_in(&self, scope: &Arc<CallScope>, name: &str, args: Value) -> (String, Value) {
        let o = self.call_in(scope, name, args.clone()).await;
        assert!(o.is_error(), "{name}({args}) succeeded: {}", o.to_json());
        (o.label().to_owned(), o.to_json())
    }

    /// The error code and shape of an operator's call that must fail.
    pub async fn err(&self, name: &str, args: Value) -> (String, Value) {
        self.err_in(&self.operator(OPERATOR), name, args).await
    }

    /// The one error shape of a call under `scope` that must fail with `code` (a denial's or a
    /// tool error's).
    pub async fn fails_in(
        &self,
        scope: &Arc<CallScope>,
        name: &str,
        args: Value,
        code: &str,
    ) -> Value {
        let (got, e) = self.err_in(scope, name, args.clone()).await;
        assert_eq!(got, code, "{name}({args}): {e}");
        e
    }

    /// The one error shape of an operator's call that must fail with `code`.
    pub async fn fails(&self, name: &str, args: Value, code: &str) -> Value {
        self.fails_in(&self.operator(OPERATOR), name, args, code)
            .await
    }

    /// The tools `scope` lists, by name.
    pub fn tool_names(&self, scope: &CallScope) -> Vec<String> {
        self.orch
            .list(scope)
            .iter()
            .filter_map(|d| d["name"].as_str().map(str::to_owned))
            .collect()
    }
}

/// What one call sent its transport: progress, log messages, session effects.
#[derive(Default)]
pub struct Recorded {
    /// Progress reports, in order.
    pub progress: Mutex<Vec<Progress>>,
    /// Log messages at or above the call's level, in order.
    pub logs: Mutex<Vec<LogMessage>>,
    /// What the call changed in its session.
    pub effects: Mutex<Vec<SessionEffect>>,
}

impl CallEvents for Recorded {
    fn progress(&self, p: Progress) {
        self.progress.lock().unwrap().push(p);
    }
    fn log(&self, m: LogMessage) {
        self.logs.lock().unwrap().push(m);
    }
    fn session_changed(&self, effect: SessionEffect) {
        self.effects.lock().unwrap().push(effect);
    }
}

/// The string `field` of each element of the array `v` (in a result: `pluck(&page["memories"],
/// "key")`).
pub fn pluck<'a>(v: &'a Value, field: &str) -> Vec<&'a str> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|e| {
            e[field]
                .as_str()
                .unwrap_or_else(|| panic!("no string {field} in {e}"))
        })
        .collect()
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.orch.stopping();
    }
}
