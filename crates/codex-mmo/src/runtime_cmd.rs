//! The runtime's commands: `run`, `sessions`, `inspect`, `attach`, `stop`, `resume`, `control`,
//! `agent-mcp`, and the two the runtime itself starts (`supervise`, `mesh-stdio`).

use clap::Subcommand;
use mmo_profile::store::{Dirs, Store as ProfileStore};
use mmo_runtime::result::JobState;
use mmo_runtime::session::{self, Paths};
use mmo_runtime::store::{Session, Store, is_terminal_session};
use mmo_runtime::supervisor;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(Subcommand)]
pub enum RuntimeCmd {
    /// Run a team: verify and materialize the profile's snapshot, start the session's
    /// supervisor and (with --task) the root agent. Without --detach, shows the session live
    /// until it ends (Ctrl-C stops it).
    Run {
        /// An installed profile id or a pack directory.
        #[arg(long)]
        profile: String,
        /// Rebind a role to another exact catalog key: `role=route__model`.
        #[arg(long = "bind", value_name = "ROLE=KEY", value_parser = crate::parse_bind)]
        binds: Vec<(String, String)>,
        /// The canonical checkout the team works on (default: the current directory).
        #[arg(long)]
        workspace: Option<PathBuf>,
        /// The root's task. Without it the session is operator-driven: drive it as its root
        /// with `codex-mmo agent-mcp --session <id>`.
        #[arg(long)]
        task: Option<String>,
        /// Print the session id and leave the supervisor running.
        #[arg(long)]
        detach: bool,
        #[arg(long)]
        json: bool,
    },
    /// List sessions.
    Sessions {
        #[arg(long)]
        json: bool,
    },
    /// Show a session: its state, runs, revisions, results and patches.
    Inspect {
        session: String,
        #[arg(long)]
        json: bool,
    },
    /// Follow a session live: its events and a progress line per agent (Ctrl-C detaches).
    Attach { session: String },
    /// Stop a session: every worker is stopped with its partial evidence kept.
    Stop {
        session: String,
        #[arg(long)]
        json: bool,
    },
    /// Control one agent run of a live session as its operator (the root's authority, within
    /// the root's controls table): any `agent_control` action (inspect, trace, steer,
    /// interrupt, pause, continue, detach, stop, finalize, compact, respond, set_effort, fork).
    /// A mutating action takes `--revision` (the control_revision you inspected); without it
    /// the command inspects first and acts on that revision, so a change in between still
    /// fails as stale rather than being overridden.
    Control {
        session: String,
        agent_run_ref: String,
        action: String,
        #[arg(long)]
        revision: Option<i64>,
        /// The text of a `steer`, a `continue`'s input, or a fork's first input.
        #[arg(long)]
        message: Option<String>,
        /// `set_effort`: the reasoning effort.
        #[arg(long)]
        effort: Option<String>,
        /// `continue` of a goal-mode run: the goal's new total token budget.
        #[arg(long)]
        goal_token_budget: Option<u64>,
        /// `respond`: the pending input's request id (from inspection's pending_inputs).
        #[arg(long)]
        request_id: Option<String>,
        /// `respond`: the answer, a JSON object (e.g. '{"decision":"accept"}').
        #[arg(long)]
        response: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Serve the session's Agent-MCP server on stdio, acting as its root (for an operator or
    /// a test driving a team without a model deciding).
    AgentMcp {
        #[arg(long)]
        session: String,
    },
    /// Run the pack's smoke tasks against its live models (each task in a session of its own,
    /// bounded by its wall_timeout_seconds). Needs the models to be reachable.
    Smoke {
        /// An installed profile id or a pack directory.
        profile: String,
        /// The checkout the tasks work on (default: the current directory).
        #[arg(long)]
        workspace: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Resume a suspended session (its supervisor stopped while it was live): a new
    /// supervisor takes it, its root continues its own thread, and its suspended jobs wait for
    /// an authorized controller's `continue`. A terminal session cannot be resumed.
    Resume {
        session: String,
        #[arg(long)]
        json: bool,
    },
    /// (started by the runtime) The supervisor of one session.
    #[command(hide = true)]
    Supervise {
        #[arg(long)]
        session: String,
        /// Take a session `codex-mmo resume` marked `resuming`.
        #[arg(long)]
        resume: bool,
    },
    /// (started by Codex) The `mmo_mesh` stdio server: a pipe to the session's supervisor.
    #[command(hide = true)]
    MeshStdio {
        #[arg(long)]
        socket: PathBuf,
    },
}

pub(crate) struct Fail(pub(crate) String);

impl<E: std::fmt::Display> From<E> for Fail {
    fn from(e: E) -> Fail {
        Fail(e.to_string())
    }
}

pub(crate) type R<T> = Result<T, Fail>;

pub fn main(cmd: RuntimeCmd) -> ExitCode {
    let r = match cmd {
        RuntimeCmd::Run {
            profile,
            binds,
            workspace,
            task,
            detach,
            json,
        } => run(&profile, &binds, workspace, task, detach, json),
        RuntimeCmd::Sessions { json } => sessions(json),
        RuntimeCmd::Inspect { session, json } => inspect(&session, json),
        RuntimeCmd::Attach { session } => attach(&session, false).map(|_| ExitCode::SUCCESS),
        RuntimeCmd::Stop { session, json } => stop(&session, json),
        RuntimeCmd::AgentMcp { session } => agent_mcp(&session),
        RuntimeCmd::Control {
            session,
            agent_run_ref,
            action,
            revision,
            message,
            effort,
            goal_token_budget,
            request_id,
            response,
            json,
        } => {
            let response = match response
                .map(|r| serde_json::from_str::<Value>(&r))
                .transpose()
            {
                Ok(r) => r,
                Err(e) => {
                    let _ = writeln!(std::io::stderr(), "error: --response is not JSON: {e}");
                    return ExitCode::from(1);
                }
            };
            let extra = json!({"message": message, "effort": effort, "goal_token_budget": goal_token_budget, "request_id": request_id, "response": response});
            control(&session, &agent_run_ref, &action, revision, extra, json)
        }
        RuntimeCmd::Smoke {
            profile,
            workspace,
            json,
        } => crate::smoke::smoke(&profile, workspace, json),
        RuntimeCmd::Resume { session, json } => resume(&session, json),
        RuntimeCmd::Supervise { session, resume } => supervise(session, resume),
        RuntimeCmd::MeshStdio { socket } => pipe(&socket),
    };
    match r {
        Ok(code) => code,
        Err(Fail(why)) => {
            let _ = writeln!(std::io::stderr(), "error: {why}");
            ExitCode::from(1)
        }
    }
}

pub(crate) fn paths() -> R<(Dirs, Paths)> {
    let dirs = Dirs::from_env().map_err(|e| Fail(e.to_string()))?;
    let paths = Paths {
        data: dirs.data.clone(),
    };
    Ok((dirs, paths))
}

pub(crate) fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}").and_then(|_| out.flush());
}

/// One JSON-RPC request to a session's supervisor.
pub(crate) fn call(socket: &Path, method: &str, params: Value) -> R<Value> {
    call_or_gone(socket, method, params)?.ok_or_else(|| {
        Fail(format!(
            "the session's supervisor at {} went away before answering",
            socket.display()
        ))
    })
}

/// [`call`], or `None` when the supervisor is gone or going: the socket is missing or refuses,
/// or the connection ends without an answer (a supervisor ending its session stops answering
/// and exits; what it left is in the store).
pub(crate) fn call_or_gone(socket: &Path, method: &str, params: Value) -> R<Option<Value>> {
    use std::io::ErrorKind::{BrokenPipe, ConnectionRefused, ConnectionReset, NotFound};
    let gone = |e: &std::io::Error| {
        matches!(
            e.kind(),
            NotFound | ConnectionRefused | ConnectionReset | BrokenPipe
        )
    };
    let mut s = match UnixStream::connect(socket) {
        Ok(s) => s,
        Err(e) if gone(&e) => return Ok(None),
        Err(e) => {
            return Err(Fail(format!(
                "the session's supervisor at {}: {e}",
                socket.display()
            )));
        }
    };
    let req = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut line = String::new();
    let sent = s
        .write_all(format!("{req}\n").as_bytes())
        .and_then(|()| BufReader::new(s.take(64 << 20)).read_line(&mut line));
    match sent {
        Ok(0) => return Ok(None),
        Ok(_) => {}
        Err(e) if gone(&e) => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let v: Value =
        serde_json::from_str(&line).map_err(|e| Fail(format!("the supervisor's answer: {e}")))?;
    if let Some(e) = v.get("error") {
        return Err(Fail(
            e["message"]
                .as_str()
                .unwrap_or("the supervisor refused")
                .to_string(),
        ));
    }
    Ok(Some(v["result"].clone()))
}

/// A `tools/call` of the session's `mmo_mesh` as the operator; a tool error is a failure
/// naming its code.
pub(crate) fn tool(socket: &Path, name: &str, args: Value) -> R<Value> {
    let r = call(
        socket,
        "tools/call",
        json!({"name": name, "arguments": args}),
    )?;
    if r["isError"] == json!(true) {
        return Err(Fail(format!(
            "{name}: {}",
            r["content"][0]["text"].as_str().unwrap_or("failed")
        )));
    }
    Ok(r["structuredContent"].clone())
}

fn control(
    id: &str,
    run: &str,
    action: &str,
    revision: Option<i64>,
    extra: Value,
    json_out: bool,
) -> R<ExitCode> {
    let (_, paths) = paths()?;
    let store = paths.open()?;
    let s = load(&store, id)?;
    if !live(&paths, &s) {
        return Err(Fail(format!(
            "session {id} is `{}` and has no live supervisor to control",
            s.state
        )));
    }
    let socket = paths.socket(id);
    let mut args = json!({"agent_run_ref": run, "action": action});
    // Inspection, traces and forks change nothing in the target: no revision.
    if !matches!(action, "inspect" | "trace" | "fork") {
        let rev = match revision {
            Some(r) => r,
            None => tool(
                &socket,
                "agent_control",
                json!({"agent_run_ref": run, "action": "inspect"}),
            )?["control_revision"]
                .as_i64()
                .ok_or_else(|| Fail("inspection gave no control_revision".into()))?,
        };
        args["control_revision"] = json!(rev);
    }
    for (k, v) in extra.as_object().into_iter().flatten() {
        if !v.is_null() {
            args[k] = v.clone();
        }
    }
    let v = tool(&socket, "agent_control", args)?;
    if json_out {
        print(&v.to_string());
    } else {
        print(&format!(
            "{} [{}] {} rev {}{}",
            v["agent_run_ref"].as_str().unwrap_or(run),
            v["role"].as_str().unwrap_or(""),
            v["state"].as_str().unwrap_or(""),
            v["control_revision"],
            v["last_control"]
                .as_object()
                .map(|c| format!(
                    " · last control {} {}",
                    c["action"].as_str().unwrap_or(""),
                    c["status"].as_str().unwrap_or("")
                ))
                .unwrap_or_default()
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// A session from the store, after recovering it when its supervisor is gone.
pub(crate) fn load(store: &Store, id: &str) -> R<Session> {
    let s = store.session(id)?;
    if session::recover(store, &s)? {
        return Ok(store.session(id)?);
    }
    Ok(s)
}

fn live(paths: &Paths, s: &Session) -> bool {
    !is_terminal_session(&s.state)
        && s.supervisor_pid.is_some()
        && UnixStream::connect(paths.socket(&s.id)).is_ok()
}

/// Compiles and verifies the profile, creates the session and starts its supervisor; returns
/// once the supervisor has taken the session.
pub(crate) fn start(
    target: &str,
    binds: &[(String, String)],
    workspace: Option<PathBuf>,
    task: Option<String>,
) -> R<(Session, String)> {
    let (dirs, paths) = paths()?;
    let profiles = ProfileStore::new(dirs.clone());
    let report = profiles.compile(target, binds).map_err(|r| {
        Fail(
            r.0.iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join("\n  "),
        )
    })?;
    let snapshot = dirs.snapshot_dir(&report.address);
    mmo_profile::snapshot::verify_snapshot(&snapshot).map_err(|r| {
        Fail(
            r.0.iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join("\n  "),
        )
    })?;
    let workspace = match workspace {
        Some(w) => w,
        None => std::env::current_dir()?,
    };
    let workspace = workspace
        .canonicalize()
        .map_err(|e| Fail(format!("--workspace {}: {e}", workspace.display())))?;
    if !workspace.is_dir() {
        return Err(Fail(format!(
            "--workspace {} is not a directory",
            workspace.display()
        )));
    }
    if task.as_deref().is_some_and(|t| t.trim().is_empty()) {
        return Err(Fail("--task is empty".into()));
    }
    let store = paths.open()?;
    let session = session::create_session(
        &paths,
        &store,
        &report.address,
        &snapshot,
        &workspace,
        task.as_deref(),
    )?;
    launch_supervisor(&store, &session, false)?;
    Ok((session, report.address))
}

/// Starts the supervisor of `session` (`supervise`, in a process group of its own, its output
/// in the session's `logs/supervisor.log`) and waits until it has taken the session: a new one
/// (`starting`), or with `resume` one marked `resuming`.
fn launch_supervisor(store: &Store, session: &Session, resume: bool) -> R<()> {
    let logs = Path::new(&session.dir).join("logs");
    std::fs::create_dir_all(&logs)?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(logs.join("supervisor.log"))?;
    let mut cmd = std::process::Command::new(std::env::current_exe()?);
    cmd.args(["supervise", "--session", &session.id])
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    if resume {
        cmd.arg("--resume");
    }
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.spawn()?;
    let taking = if resume { "resuming" } else { "starting" };
    // Wait until the supervisor has taken the session (or failed to).
    let deadline = Instant::now() + session::START_WAIT;
    loop {
        let s = store.session(&session.id)?;
        if s.state != taking {
            if s.state == "failed" || (resume && s.state == "suspended") {
                return Err(Fail(format!(
                    "session {} failed to {}: {}",
                    s.id,
                    if resume { "resume" } else { "start" },
                    s.reason.unwrap_or_default()
                )));
            }
            break;
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(Fail(format!(
                "the supervisor of session {} exited ({status}) before starting; see {}/logs/supervisor.log",
                session.id, session.dir
            )));
        }
        if Instant::now() > deadline {
            return Err(Fail(format!(
                "the supervisor of session {} did not start within 30 s; see {}/logs/supervisor.log",
                session.id, session.dir
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // The supervisor runs on by itself; it is reaped by whoever inherits it.
    std::mem::forget(child);
    Ok(())
}

/// `codex-mmo resume`: a suspended session (its supervisor died) gets a new supervisor. Its
/// root continues its own thread; its suspended and paused jobs keep their threads, homes and
/// worktrees for an authorized controller's `continue`. A terminal session cannot be resumed,
/// and a live one needs no resuming.
fn resume(id: &str, json_out: bool) -> R<ExitCode> {
    let (_, paths) = paths()?;
    let store = paths.open()?;
    let s = load(&store, id)?;
    if is_terminal_session(&s.state) {
        return Err(Fail(format!(
            "session {id} is `{}`: a terminal session cannot be resumed; start a new one with `codex-mmo run`",
            s.state
        )));
    }
    if s.state != "suspended" {
        return Err(Fail(format!(
            "session {id} is `{}` with a live supervisor; only a suspended session is resumed",
            s.state
        )));
    }
    if !store.mark_resuming(id)? {
        return Err(Fail(format!(
            "session {id} is no longer suspended (another resume took it?)"
        )));
    }
    let started = Instant::now();
    launch_supervisor(&store, &s, true)?;
    let s = store.session(id)?;
    // The root is continued by the new supervisor itself (it may not have moved it yet when this
    // reads the runs): only the jobs wait for a controller's `continue`.
    let waiting: Vec<String> = store
        .runs(id)?
        .into_iter()
        .filter(|r| r.parent.is_some() && matches!(r.state.as_str(), "suspended" | "paused"))
        .map(|r| r.run_ref)
        .collect();
    if json_out {
        print(&json!({"session": id, "state": s.state, "resumed_in_ms": started.elapsed().as_millis() as u64, "awaiting_continue": waiting}).to_string());
    } else {
        print(&format!("session {id} {}", s.state));
        for r in waiting {
            print(&format!(
                "  {r} waits for a controller's continue (codex-mmo control {id} {r} continue)"
            ));
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn run(
    target: &str,
    binds: &[(String, String)],
    workspace: Option<PathBuf>,
    task: Option<String>,
    detach: bool,
    json_out: bool,
) -> R<ExitCode> {
    let (_, paths) = paths()?;
    let (session, address) = start(target, binds, workspace, task)?;
    let store = paths.open()?;
    if detach {
        if json_out {
            print(&json!({"session": session.id, "profile": session.profile_id, "snapshot": address, "socket": paths.socket(&session.id), "state": "running"}).to_string());
        } else {
            print(&session.id);
        }
        return Ok(ExitCode::SUCCESS);
    }
    if !json_out {
        print(&format!(
            "session {} ({} @ {}), Ctrl-C stops it",
            session.id,
            session.profile_id,
            &address[..12]
        ));
    }
    let state = attach(&session.id, true)?;
    if json_out {
        let s = store.session(&session.id)?;
        print(&session::inspect_value(&store, &s, None).to_string());
    }
    Ok(if state == "completed" {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Follows a session until it ends; returns its final state. With `stop_on_interrupt`,
/// Ctrl-C stops the session (the foreground `run`); otherwise it detaches.
fn attach(id: &str, stop_on_interrupt: bool) -> R<String> {
    let (_, paths) = paths()?;
    let store = paths.open()?;
    let s = load(&store, id)?;
    let socket = paths.socket(id);
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_interrupt as *const () as libc::sighandler_t,
        );
    }
    let mut after = 0i64;
    let mut lines: std::collections::HashMap<String, String> = Default::default();
    let mut asked_stop = false;
    if !live(&paths, &s) {
        print(&format!(
            "session {id} is {} (no supervisor running)",
            s.state
        ));
        return Ok(s.state);
    }
    loop {
        if INTERRUPTED.swap(false, Ordering::SeqCst) {
            if !stop_on_interrupt {
                print("detached; the session goes on");
                return Ok("detached".into());
            }
            if !asked_stop {
                print("stopping the session ...");
                let _ = call(&socket, "session/stop", json!({}));
                asked_stop = true;
            }
        }
        let r = match call(
            &socket,
            "session/events",
            json!({"after": after, "wait_ms": 500}),
        ) {
            Ok(r) => r,
            Err(_) => {
                let s = load(&store, id)?;
                print(&format!("session {id} is {}", s.state));
                return Ok(s.state);
            }
        };
        for e in r["events"].as_array().into_iter().flatten() {
            after = after.max(e["seq"].as_i64().unwrap_or(0));
            let run = e["run"].as_str().unwrap_or("");
            let kind = e["kind"].as_str().unwrap_or("");
            let body: Value =
                serde_json::from_str(e["body"].as_str().unwrap_or("null")).unwrap_or(Value::Null);
            let summary = match kind {
                "agentMessage" => body["text"]
                    .as_str()
                    .unwrap_or("")
                    .chars()
                    .take(160)
                    .collect::<String>(),
                "commandExecution" => format!(
                    "$ {} → {}",
                    body["command"].as_str().unwrap_or(""),
                    body["exitCode"]
                ),
                "mcpToolCall" => format!(
                    "{}.{} {}",
                    body["server"].as_str().unwrap_or(""),
                    body["tool"].as_str().unwrap_or(""),
                    body["status"].as_str().unwrap_or("")
                ),
                _ => body.to_string().chars().take(160).collect(),
            };
            print(&format!("  {run} {kind}: {summary}"));
        }
        for run in r["runs"].as_array().into_iter().flatten() {
            let key = run["agent_run_ref"].as_str().unwrap_or("").to_string();
            let line = run_line(run);
            if lines.get(&key) != Some(&line) {
                print(&line);
                lines.insert(key, line);
            }
        }
        let state = r["state"].as_str().unwrap_or("").to_string();
        if is_terminal_session(&state) || state == "suspended" {
            print(&format!("session {id} {state}"));
            return Ok(state);
        }
    }
}

/// One agent's line in `attach`: its state, and what an operator acts on: goal budget use,
/// a stall warning, pending inputs (approvals, elicitations) waiting for `respond`, detached.
fn run_line(run: &Value) -> String {
    let mut line = format!(
        "[{}] {} {} rev {}",
        run["role"].as_str().unwrap_or("?"),
        run["job"].as_str().unwrap_or("root"),
        run["state"].as_str().unwrap_or("?"),
        run["progress_revision"],
    );
    let goal = &run["goal"];
    if goal.is_object() {
        line.push_str(&format!(
            " · goal {} {}/{} tokens",
            goal["status"].as_str().unwrap_or("?"),
            goal["tokens_used"],
            goal["token_budget"]
        ));
        if let Some(max) = goal["max_goal_token_budget"].as_u64() {
            line.push_str(&format!(" (ceiling {max})"));
        }
    }
    if run["detached"] == json!(true) {
        line.push_str(" · DETACHED");
    }
    if run["stall_warning"].is_object() {
        line.push_str(&format!(
            " · STALL WARNING: silent {} s",
            run["stall_warning"]["silent_seconds"]
        ));
    }
    let pending: Vec<String> = run["pending_inputs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            format!(
                "{} {}",
                p["method"].as_str().unwrap_or("?"),
                p["request_id"]
            )
        })
        .collect();
    if !pending.is_empty() {
        line.push_str(&format!(" · PENDING INPUT: {}", pending.join(", ")));
    }
    if let Some(p) = run["preview"].as_str() {
        line.push_str(&format!(" · {}", p.chars().take(80).collect::<String>()));
    }
    line
}

fn sessions(json_out: bool) -> R<ExitCode> {
    let (_, paths) = paths()?;
    let store = paths.open()?;
    let mut rows = Vec::new();
    let mut refused = Vec::new();
    for s in store.sessions()? {
        match s {
            Ok(s) => {
                let s = if session::recover(&store, &s)? {
                    store.session(&s.id)?
                } else {
                    s
                };
                rows.push(s);
            }
            Err(e) => refused.push(e.to_string()),
        }
    }
    // Stall warnings are the operator's to see: each live session's warned runs.
    let stalls: Vec<Vec<(String, Value)>> = rows
        .iter()
        .map(|s| {
            if is_terminal_session(&s.state) {
                Vec::new()
            } else {
                store.stall_warnings(&s.id).unwrap_or_default()
            }
        })
        .collect();
    if json_out {
        let rows: Vec<Value> = rows
            .iter()
            .zip(&stalls)
            .map(|(s, w)| {
                let mut v = serde_json::to_value(s).unwrap_or(Value::Null);
                v["stall_warnings"] = w
                    .iter()
                    .map(|(run, body)| json!({"agent_run_ref": run, "warning": body}))
                    .collect();
                v
            })
            .collect();
        print(&json!({"sessions": rows, "warnings": refused}).to_string());
    } else {
        for w in &refused {
            let _ = writeln!(std::io::stderr(), "warning: {w}");
        }
        if rows.is_empty() {
            print("no sessions");
        }
        for (s, w) in rows.into_iter().zip(&stalls) {
            print(&format!(
                "{}  {:<10} {}  {}{}{}",
                s.id,
                s.state,
                s.profile_id,
                s.workspace,
                s.tainted
                    .map(|t| format!("  TAINTED: {t}"))
                    .unwrap_or_default(),
                if w.is_empty() {
                    String::new()
                } else {
                    format!(
                        "  STALL WARNING: {}",
                        w.iter()
                            .map(|(r, _)| r.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            ));
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn inspect(id: &str, json_out: bool) -> R<ExitCode> {
    let (_, paths) = paths()?;
    let store = paths.open()?;
    let s = load(&store, id)?;
    let live_view = match live(&paths, &s) {
        true => call_or_gone(&paths.socket(id), "session/inspect", json!({}))?,
        false => None,
    };
    let v = match live_view {
        Some(v) => v,
        // No supervisor, or one that went away while asked: the store holds what it left.
        None => session::inspect_value(&store, &load(&store, id)?, None),
    };
    if json_out {
        print(&serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    print(&format!(
        "session {} · {} · profile {} · snapshot {}",
        v["session"].as_str().unwrap_or(""),
        v["state"].as_str().unwrap_or(""),
        v["profile"].as_str().unwrap_or(""),
        v["snapshot"].as_str().unwrap_or("")
    ));
    if let Some(r) = v["reason"].as_str() {
        print(&format!("  reason: {r}"));
    }
    if let Some(t) = v["tainted"].as_str() {
        print(&format!("  TAINTED: {t}"));
    }
    print(&format!(
        "  runner matches the installed codex-mmo: {}",
        v["runner_matches_installed"]
    ));
    for r in v["runs"].as_array().into_iter().flatten() {
        print(&format!(
            "  {} [{}] {} {} progress {} control {}{}",
            r["agent_run_ref"].as_str().unwrap_or(""),
            r["role"].as_str().unwrap_or(""),
            r["job"].as_str().unwrap_or("root"),
            r["state"].as_str().unwrap_or(""),
            r["progress_revision"],
            r["control_revision"],
            r["reason"]
                .as_str()
                .map(|x| format!(" · {x}"))
                .unwrap_or_default()
        ));
    }
    Ok(ExitCode::SUCCESS)
}

fn stop(id: &str, json_out: bool) -> R<ExitCode> {
    let (_, paths) = paths()?;
    let store = paths.open()?;
    let s = load(&store, id)?;
    if live(&paths, &s) {
        call(&paths.socket(id), "session/stop", json!({}))?;
        let deadline = Instant::now() + Duration::from_secs(60);
        while !is_terminal_session(&store.session(id)?.state) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    } else if !is_terminal_session(&s.state) {
        for r in store
            .runs(id)?
            .into_iter()
            .filter(|r| r.is_active() || r.state == JobState::Suspended)
        {
            let _ = store.transition(
                &r.run_ref,
                JobState::Stopped,
                Some("stopped by the operator"),
            );
        }
        store.set_session_state(id, "stopped", Some("stopped by the operator"))?;
    }
    let s = store.session(id)?;
    if json_out {
        print(&json!({"session": id, "state": s.state}).to_string());
    } else {
        print(&format!("session {id} {}", s.state));
    }
    Ok(ExitCode::SUCCESS)
}

fn agent_mcp(id: &str) -> R<ExitCode> {
    let (_, paths) = paths()?;
    let store = paths.open()?;
    let s = load(&store, id)?;
    if !live(&paths, &s) {
        return Err(Fail(format!(
            "session {id} is {} and has no running supervisor",
            s.state
        )));
    }
    pipe(&paths.socket(id))
}

/// Copies stdin to the socket and the socket to stdout until either side closes.
fn pipe(socket: &Path) -> R<ExitCode> {
    let s = UnixStream::connect(socket).map_err(|e| {
        Fail(format!(
            "the session's supervisor at {}: {e}",
            socket.display()
        ))
    })?;
    let mut to = s.try_clone()?;
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut to);
        let _ = to.shutdown(std::net::Shutdown::Write);
    });
    let mut from = s;
    let mut out = std::io::stdout().lock();
    let mut buf = [0u8; 64 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if out.write_all(&buf[..n]).and_then(|_| out.flush()).is_err() {
                    break;
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn supervise(session: String, resume: bool) -> R<ExitCode> {
    let (_, paths) = paths()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(supervisor::serve(paths, session, resume))?;
    Ok(ExitCode::SUCCESS)
}
