//! The agent fleet: agents spawned with `runner: "codex"` run as real `codex app-server`
//! workers, each in its own git worktree, with `vox mcp` (this workspace, this daemon's
//! profile, the agent's credential) as its MCP server. A worker takes its assigned tasks one
//! at a time: a turn per task, which ends with the agent calling `vox_complete_task` or
//! `vox_fail_task`; a turn that ends without either fails the task, saying so.
//!
//! The worker is driven from here, not trusted: every call it makes goes through the agent
//! path (its profile, its budget, approvals). Pausing its agent holds new work; retiring it
//! ends the worker; a task that leaves the worker while its turn runs (cancelled, handed off,
//! emergency stop) interrupts the turn; a worker that dies puts its task back in the queue
//! (failed after [`MAX_ATTEMPTS`]); the daemon ending ends every worker with it (an
//! `AppServer` kills its process tree when dropped).

use codex_app_server::{
    AppServer, ApprovalPolicy, CodexCommand, Event, InitializeParams, SandboxMode, SpawnOptions,
    ThreadStartParams, TurnStartParams,
};
use serde::Serialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, watch};
use vox_core::ToolError;
use vox_store::{AgentState, Store, Task, TaskMove, TaskState};
use vox_tools_common::store::db;

/// Attempts after which a task whose worker keeps dying fails instead of going back.
const MAX_ATTEMPTS: i64 = 5;
/// The MCP server name the worker's Codex knows vox by (its tools are `mcp__vox__*`).
pub const MCP_SERVER: &str = "vox";

/// What a worker is doing, for `vox_agent_status`.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct WorkerStatus {
    /// `starting`, `idle`, `working`, `restarting` or `stopped`.
    pub state: String,
    /// The app-server's process id while one runs.
    pub pid: Option<u32>,
    /// The task of the running turn.
    pub task_id: Option<i64>,
    pub worktree: String,
    /// The last thing that went wrong, if anything did.
    pub last_error: Option<String>,
}

struct Worker {
    kick: Arc<Notify>,
    stop: watch::Sender<bool>,
    status: Arc<Mutex<WorkerStatus>>,
}

/// Every worker of this daemon.
pub struct Fleet {
    store: Arc<Store>,
    workspace: PathBuf,
    vox_dir: PathBuf,
    /// The daemon's canonical profile: a worker's `vox mcp` must ask for the same one.
    profile: String,
    workers: Mutex<HashMap<String, Worker>>,
    announce: crate::orchestration::Announcer,
}

/// Where the fleet keeps agent `id`'s worktree and Codex home.
fn agent_dir(vox_dir: &Path, id: &str) -> PathBuf {
    vox_dir.join("agents").join(id)
}

/// The `vox` binary a worker runs as its MCP server: `VOX_FLEET_VOX_BIN`, else the one beside
/// this daemon's executable.
fn vox_bin() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("VOX_FLEET_VOX_BIN") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(|e| format!("this daemon's executable: {e}"))?;
    let vox = exe.with_file_name("vox");
    if vox.is_file() {
        Ok(vox)
    } else {
        Err(format!(
            "no `vox` beside {} (set VOX_FLEET_VOX_BIN)",
            exe.display()
        ))
    }
}

/// The Codex configuration a worker starts from: `VOX_FLEET_CODEX_CONFIG`, else
/// `$CODEX_HOME/config.toml`, else `~/.codex/config.toml` (the model and provider the user set
/// up for Codex), with its directory (for `auth.json`).
fn base_config() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("VOX_FLEET_CODEX_CONFIG") {
        return Some(PathBuf::from(p));
    }
    let home = std::env::var_os("CODEX_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".codex")))?;
    Some(home.join("config.toml")).filter(|p| p.is_file())
}

fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// Runs git in `dir` with nothing the repository's configuration names run (no hooks, filter
/// drivers, fsmonitor ...: `vox_repo::safe_git_command`); its trimmed stdout, or its stderr.
fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = vox_repo::safe_git_command(dir)
        .map_err(|e| format!("git: {e}"))?
        .args(args)
        .output()
        .map_err(|e| format!("git: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(format!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Fleet {
    pub fn new(
        store: Arc<Store>,
        ws: &vox_core::Workspace,
        profile: &str,
        announce: crate::orchestration::Announcer,
    ) -> Self {
        Fleet {
            store,
            workspace: ws.root.clone(),
            vox_dir: ws.vox_dir.clone(),
            profile: profile.to_owned(),
            workers: Mutex::default(),
            announce,
        }
    }

    /// Whether this machine can run a worker now, and if not why.
    pub fn codex() -> Result<CodexCommand, String> {
        codex_app_server::find_codex().map_err(|e| e.to_string())
    }

    /// Makes agent `id`'s worktree (detached at `HEAD` of the workspace's repository) and its
    /// Codex home (the base configuration plus vox as its MCP server with the agent's
    /// credential, readable by this user only). Runs before the agent is stored.
    pub fn prepare(&self, id: &str, token: &str) -> Result<(), ToolError> {
        let unavailable = |m: String| ToolError::unavailable(format!("runner codex: {m}"));
        Self::codex().map_err(unavailable)?;
        let vox = vox_bin().map_err(unavailable)?;
        git(&self.workspace, &["rev-parse", "--verify", "HEAD"]).map_err(|e| {
            unavailable(format!(
                "the workspace {} must be a git repository with a commit, for the agent's worktree ({e})",
                self.workspace.display()
            ))
        })?;
        let dir = agent_dir(&self.vox_dir, id);
        let home = dir.join("codex-home");
        let worktree = dir.join("worktree");
        std::fs::create_dir_all(&home)
            .map_err(|e| unavailable(format!("{}: {e}", home.display())))?;
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
        let mut config = String::new();
        if let Some(base) = base_config() {
            config = std::fs::read_to_string(&base).map_err(|e| {
                unavailable(format!("the base Codex config {}: {e}", base.display()))
            })?;
            if let Some(auth) = base.parent().map(|d| d.join("auth.json"))
                && auth.is_file()
            {
                let _ = std::fs::copy(&auth, home.join("auth.json"));
            }
        }
        config.push_str(&format!(
            "\n# Added by the vox agent fleet for agent {id}: vox, as this agent.\n[mcp_servers.{MCP_SERVER}]\ncommand = {}\nargs = [\"mcp\", \"--workspace\", {}, \"--profile\", {}]\nstartup_timeout_sec = 30\ntool_timeout_sec = 3600\ndefault_tools_approval_mode = \"approve\"\n[mcp_servers.{MCP_SERVER}.env]\nVOX_AGENT_TOKEN = {}\n",
            toml_string(&vox.to_string_lossy()),
            toml_string(&self.workspace.to_string_lossy()),
            toml_string(&self.profile),
            toml_string(token),
        ));
        let path = home.join("config.toml");
        std::fs::write(&path, config)
            .and_then(|()| std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)))
            .map_err(|e| unavailable(format!("{}: {e}", path.display())))?;
        if !worktree.exists() {
            git(
                &self.workspace,
                &[
                    "worktree",
                    "add",
                    "--detach",
                    &worktree.to_string_lossy(),
                    "HEAD",
                ],
            )
            .map_err(unavailable)?;
        }
        Ok(())
    }

    /// Starts agent `id`'s worker loop (once).
    pub fn start(self: &Arc<Self>, id: &str) {
        let mut workers = self.workers.lock().unwrap_or_else(|p| p.into_inner());
        if workers.contains_key(id) {
            return;
        }
        let (stop, stopped) = watch::channel(false);
        let kick = Arc::new(Notify::new());
        let status = Arc::new(Mutex::new(WorkerStatus {
            state: "starting".into(),
            worktree: agent_dir(&self.vox_dir, id)
                .join("worktree")
                .display()
                .to_string(),
            ..WorkerStatus::default()
        }));
        workers.insert(
            id.to_owned(),
            Worker {
                kick: kick.clone(),
                stop,
                status: status.clone(),
            },
        );
        let fleet = self.clone();
        let id = id.to_owned();
        tokio::spawn(async move {
            fleet.run(&id, kick, stopped, status).await;
        });
    }

    /// Wakes every worker: tasks may have been assigned, or taken away.
    pub fn kick_all(&self) {
        for w in self
            .workers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
        {
            w.kick.notify_one();
        }
    }

    /// Ends agent `id`'s worker (it retired); its status stays, saying `stopped` once it is.
    pub fn stop(&self, id: &str) {
        if let Some(w) = self
            .workers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
        {
            let _ = w.stop.send(true);
        }
    }

    /// What agent `id`'s worker is doing, if it has one.
    pub fn status(&self, id: &str) -> Option<WorkerStatus> {
        self.workers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .map(|w| w.status.lock().unwrap_or_else(|p| p.into_inner()).clone())
    }

    fn set(status: &Mutex<WorkerStatus>, f: impl FnOnce(&mut WorkerStatus)) {
        f(&mut status.lock().unwrap_or_else(|p| p.into_inner()));
    }

    /// The worker loop of agent `id`.
    async fn run(
        self: Arc<Self>,
        id: &str,
        kick: Arc<Notify>,
        mut stopped: watch::Receiver<bool>,
        status: Arc<Mutex<WorkerStatus>>,
    ) {
        let mut host: Option<Host> = None;
        loop {
            if *stopped.borrow() {
                break;
            }
            let next = self.next_task(id).await;
            let task = match next {
                Next::Retired => break,
                Next::Wait => {
                    Self::set(&status, |s| {
                        s.state = "idle".into();
                        s.task_id = None;
                    });
                    tokio::select! {
                        () = kick.notified() => {}
                        () = tokio::time::sleep(Duration::from_secs(2)) => {}
                        _ = stopped.changed() => {}
                    }
                    continue;
                }
                Next::Task(t) => t,
            };
            if host.is_none() {
                match self.start_host(id).await {
                    Ok(h) => {
                        Self::set(&status, |s| {
                            s.pid = Some(h.server.pid());
                            s.last_error = None;
                        });
                        host = Some(h);
                    }
                    Err(e) => {
                        tracing::warn!(agent = id, "a worker could not start: {e}");
                        Self::set(&status, |s| {
                            s.state = "restarting".into();
                            s.pid = None;
                            s.last_error = Some(e.clone());
                        });
                        self.worker_lost(id, &format!("its worker could not start: {e}"))
                            .await;
                        tokio::select! {
                            () = tokio::time::sleep(Duration::from_secs(2)) => {}
                            _ = stopped.changed() => {}
                        }
                        continue;
                    }
                }
            }
            let Some(h) = host.as_mut() else { continue };
            Self::set(&status, |s| {
                s.state = "working".into();
                s.task_id = Some(task.id);
            });
            match self.run_task(id, h, &task, &mut stopped).await {
                TurnEnd::Done(last) => self.after_turn(id, task.id, last).await,
                TurnEnd::TaskLeft => {}
                TurnEnd::Stopped => break,
                TurnEnd::HostDied(why) => {
                    tracing::warn!(agent = id, "a worker died: {why}");
                    self.sweep(id);
                    Self::set(&status, |s| {
                        s.state = "restarting".into();
                        s.pid = None;
                        s.last_error = Some(why.clone());
                    });
                    host = None;
                    self.worker_lost(id, &format!("its worker died: {why}"))
                        .await;
                }
            }
            let store = self.store.clone();
            let _ = vox_core::family::run_blocking(move || store.dispatch(256).map_err(db)).await;
            self.announce.changed();
            self.kick_all();
        }
        Self::set(&status, |s| {
            s.state = "stopped".into();
            s.pid = None;
            s.task_id = None;
        });
        if let Some(h) = host {
            h.server.shutdown().await;
        }
        self.sweep(id);
    }

    /// Kills whatever still works in agent `id`'s directory: what a dead (or ended) worker
    /// left behind, such as a shell Codex started in a group of its own.
    pub fn sweep(&self, id: &str) {
        let n = codex_app_server::tree::kill_working_under(&agent_dir(&self.vox_dir, id));
        if n > 0 {
            tracing::info!(agent = id, "killed {n} processes a worker left behind");
        }
    }

    /// The next task of agent `id`: its running one first, then its assigned ones by priority;
    /// nothing while it is paused.
    async fn next_task(&self, id: &str) -> Next {
        let store = self.store.clone();
        let id = id.to_owned();
        let found = vox_core::family::run_blocking(move || {
            let agent = store.agent_get(&id).map_err(db)?;
            if agent.state == AgentState::Retired {
                return Ok(Next::Retired);
            }
            if agent.state == AgentState::Paused {
                return Ok(Next::Wait);
            }
            let tasks = store.tasks_of(&id, false, 1).map_err(db)?;
            Ok(tasks
                .into_iter()
                .next()
                .map_or(Next::Wait, |t| Next::Task(Box::new(t))))
        })
        .await;
        found.unwrap_or(Next::Wait)
    }

    async fn start_host(&self, id: &str) -> Result<Host, String> {
        let codex = Self::codex()?;
        let dir = agent_dir(&self.vox_dir, id);
        let worktree = dir.join("worktree");
        let opts = SpawnOptions::new(codex, dir.join("codex-home"))
            .cwd(&worktree)
            .stderr_log(dir.join("app-server.log"))
            .request_timeout(Duration::from_secs(120));
        let server =
            AppServer::spawn(opts).map_err(|e| format!("starting codex app-server: {e}"))?;
        let events = server
            .events()
            .ok_or("the app-server has no event stream")?;
        server
            .initialize(&InitializeParams::new(
                "vox-fleet",
                env!("CARGO_PKG_VERSION"),
            ))
            .await
            .map_err(|e| format!("initialize: {e}"))?;
        let thread = server
            .thread_start(&ThreadStartParams {
                cwd: Some(worktree.to_string_lossy().into_owned()),
                approval_policy: Some(ApprovalPolicy::Never),
                sandbox: Some(SandboxMode::WorkspaceWrite),
                developer_instructions: Some(format!(
                    "You are agent {id} of the vox orchestrator, working in your own git worktree. \
                     The orchestrator gives you one task per turn; its tools are in the MCP server `{MCP_SERVER}`. \
                     Claim a file with vox_claim_file before you change it; finish every task with \
                     vox_complete_task (a short result) or vox_fail_task (the reason)."
                )),
                ..ThreadStartParams::default()
            })
            .await
            .map_err(|e| format!("thread/start: {e}"))?;
        Ok(Host {
            server,
            events,
            thread,
        })
    }

    /// Runs one turn for `task`; interrupts it when the task leaves this agent.
    async fn run_task(
        &self,
        id: &str,
        host: &mut Host,
        task: &Task,
        stopped: &mut watch::Receiver<bool>,
    ) -> TurnEnd {
        if task.state == TaskState::Assigned {
            let store = self.store.clone();
            let (tid, who) = (task.id, id.to_owned());
            let started = vox_core::family::run_blocking(move || {
                store.task_move(tid, &TaskMove::Start, &who).map_err(db)
            })
            .await;
            if started.is_err() {
                return TurnEnd::TaskLeft;
            }
        }
        let turn = match host
            .server
            .turn_start_with(&TurnStartParams::text(&host.thread, prompt(id, task)))
            .await
        {
            Ok(t) => t,
            Err(e) => return TurnEnd::HostDied(format!("turn/start: {e}")),
        };
        let mut last = None;
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        loop {
            tokio::select! {
                e = host.events.recv() => match e {
                    None | Some(Event::Exited { .. }) => {
                        return TurnEnd::HostDied("the app-server exited".into());
                    }
                    Some(Event::Notification { method, params }) => match method.as_str() {
                        "item/completed"
                            if params.pointer("/item/type").and_then(|t| t.as_str())
                                == Some("agentMessage") =>
                        {
                            last = params
                                .pointer("/item/text")
                                .and_then(|t| t.as_str())
                                .map(str::to_owned);
                        }
                        "turn/completed"
                            if params.pointer("/turn/id").and_then(|t| t.as_str())
                                == Some(turn.as_str()) =>
                        {
                            return TurnEnd::Done(last);
                        }
                        _ => {}
                    },
                    Some(Event::ServerRequest { id: rid, method, .. }) => {
                        // Under approval_policy "never" nothing should ask; what asks anyway
                        // is refused, never left hanging (vox's approvals gate the MCP calls).
                        let _ = host
                            .server
                            .respond_error(&rid, -32601, &format!("the vox fleet answers no {method}"))
                            .await;
                    }
                    Some(Event::Malformed { .. }) => {}
                },
                _ = tick.tick() => {
                    // A task the agent finished itself lets its turn end as the model ends it;
                    // one taken away (cancelled, requeued, handed off) stops the turn now.
                    if self.taken_away(id, task.id).await {
                        let _ = host.server.turn_interrupt(&host.thread, &turn).await;
                        Self::await_turn_end(host, &turn).await;
                        return TurnEnd::TaskLeft;
                    }
                }
                _ = stopped.changed() => {
                    let _ = host.server.turn_interrupt(&host.thread, &turn).await;
                    return TurnEnd::Stopped;
                }
            }
        }
    }

    /// Waits (at most 10 s) until the interrupted `turn` has ended, so that the next turn does
    /// not start while Codex still runs this one.
    async fn await_turn_end(host: &mut Host, turn: &str) {
        let ended = |e: &Event| {
            matches!(e, Event::Exited { .. })
                || e.notification("turn/completed")
                    .is_some_and(|p| p.pointer("/turn/id").and_then(|t| t.as_str()) == Some(turn))
        };
        let _ = host.events.wait_for(Duration::from_secs(10), ended).await;
    }

    /// Whether task `task` stopped being agent `id`'s to work on without the agent ending it:
    /// cancelled, put back in the queue, or given to another agent.
    async fn taken_away(&self, id: &str, task: i64) -> bool {
        let store = self.store.clone();
        let t = vox_core::family::run_blocking(move || store.task_get(task).map_err(db)).await;
        !t.is_ok_and(|t| {
            t.owner.as_deref() == Some(id)
                && matches!(
                    t.state,
                    TaskState::Running | TaskState::Completed | TaskState::Failed
                )
        })
    }

    /// Whether task `task` is still running as agent `id`'s.
    async fn still_mine(&self, id: &str, task: i64) -> bool {
        let store = self.store.clone();
        let t = vox_core::family::run_blocking(move || store.task_get(task).map_err(db)).await;
        t.is_ok_and(|t| t.state == TaskState::Running && t.owner.as_deref() == Some(id))
    }

    /// A turn ended: a task still running was not finished by the agent, which fails it.
    async fn after_turn(&self, id: &str, task: i64, last: Option<String>) {
        if !self.still_mine(id, task).await {
            return;
        }
        let store = self.store.clone();
        let who = id.to_owned();
        let reason = format!(
            "the worker's turn ended without vox_complete_task or vox_fail_task; its last message: {}",
            last.as_deref().unwrap_or("(none)")
        );
        let _ = vox_core::family::run_blocking(move || {
            store
                .task_move(task, &TaskMove::Fail { reason }, &who)
                .map_err(db)
        })
        .await;
    }

    /// The worker is gone: its running task goes back to the queue, or fails once it has been
    /// tried [`MAX_ATTEMPTS`] times.
    async fn worker_lost(&self, id: &str, why: &str) {
        let store = self.store.clone();
        let (who, why) = (id.to_owned(), why.to_owned());
        let _ = vox_core::family::run_blocking(move || {
            for t in store.tasks_of(&who, false, 64).map_err(db)? {
                if t.state != TaskState::Running {
                    continue;
                }
                let m = if t.attempts >= MAX_ATTEMPTS {
                    TaskMove::Fail {
                        reason: format!("{why} ({} attempts)", t.attempts),
                    }
                } else {
                    TaskMove::Requeue {
                        reason: why.clone(),
                    }
                };
                store.task_move(t.id, &m, &who).map_err(db)?;
            }
            Ok(())
        })
        .await;
    }
}

impl Fleet {
    /// The daemon is stopping: every worker's process tree ends now, and whatever escaped a
    /// tree, working in an agent's directory, goes too; before the daemon lets go of the
    /// workspace, so a daemon started next never meets them.
    pub fn end_all(&self) {
        let workers = self.workers.lock().unwrap_or_else(|p| p.into_inner());
        for (id, w) in workers.iter() {
            let _ = w.stop.send(true);
            let pid = w.status.lock().unwrap_or_else(|p| p.into_inner()).pid;
            if let Some(pid) = pid {
                codex_app_server::tree::kill_tree(pid as i32);
            }
            self.sweep(id);
        }
    }
}

/// What a worker does next.
enum Next {
    Task(Box<Task>),
    Wait,
    Retired,
}

enum TurnEnd {
    /// The turn completed (its last agent message).
    Done(Option<String>),
    /// The task stopped being this agent's running task (cancelled, handed off, stopped).
    TaskLeft,
    /// The agent retired.
    Stopped,
    HostDied(String),
}

struct Host {
    server: AppServer,
    events: codex_app_server::Events,
    thread: String,
}

/// The turn's input: the task, and how to finish it.
fn prompt(id: &str, t: &Task) -> String {
    let mut p = format!(
        "Agent {id}: task {} is yours.\n\nTitle: {}\n",
        t.id, t.title
    );
    if !t.description.is_empty() {
        p.push_str(&format!("\n{}\n", t.description));
    }
    if !t.files.is_empty() {
        p.push_str(&format!("\nFiles: {}\n", t.files.join(", ")));
    }
    p.push_str(&format!(
        "\nWhen it is done, call vox_complete_task with task_id {} and a short result; if you cannot do it, call vox_fail_task with task_id {} and the reason.",
        t.id, t.id
    ));
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::process::Command;

    fn setup_git(dir: &Path, args: &[&str]) {
        let out = Command::new("git")
            .current_dir(dir)
            .args(args)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    #[test]
    fn an_agents_worktree_is_made_without_running_what_the_repository_configures() {
        let traps = tempfile::tempdir().unwrap();
        let marker = traps.path().join("ran");
        let script = traps.path().join("trap.sh");
        std::fs::write(
            &script,
            format!("#!/bin/sh\necho \"$0 $*\" >> '{}'\ncat\n", marker.display()),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let script = script.to_str().unwrap();

        let repo = tempfile::tempdir().unwrap();
        let root = repo.path();
        setup_git(root, &["init", "-q", "-b", "main"]);
        setup_git(root, &["config", "user.name", "T"]);
        setup_git(root, &["config", "user.email", "t@example.com"]);
        std::fs::write(root.join("README.md"), "readme\n").unwrap();
        setup_git(root, &["add", "README.md"]);
        setup_git(root, &["commit", "-q", "-m", "init"]);
        let hooks = traps.path().join("hooks");
        std::fs::create_dir_all(&hooks).unwrap();
        for name in [
            "post-checkout",
            "reference-transaction",
            "post-index-change",
        ] {
            std::fs::copy(script, hooks.join(name)).unwrap();
            std::fs::copy(script, root.join(".git/hooks").join(name)).unwrap();
        }
        std::fs::write(root.join(".git/info/attributes"), "* filter=evil\n").unwrap();
        for (key, value) in [
            ("core.hooksPath", hooks.to_str().unwrap()),
            ("hook.evil.command", script),
            ("hook.evil.event", "post-checkout"),
            ("filter.evil.smudge", script),
            ("filter.evil.clean", script),
            ("filter.evil.required", "true"),
            ("core.fsmonitor", script),
        ] {
            setup_git(root, &["config", key, value]);
        }

        // What `Fleet::prepare` runs.
        git(root, &["rev-parse", "--verify", "HEAD"]).expect("rev-parse");
        let worktree = traps.path().join("worktree");
        git(
            root,
            &[
                "worktree",
                "add",
                "--detach",
                &worktree.to_string_lossy(),
                "HEAD",
            ],
        )
        .expect("worktree add");
        let ran = std::fs::read_to_string(&marker).unwrap_or_default();
        assert!(ran.is_empty(), "configured programs ran:\n{ran}");
        assert_eq!(
            std::fs::read_to_string(worktree.join("README.md")).unwrap(),
            "readme\n"
        );
    }
}
