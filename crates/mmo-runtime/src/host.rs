//! App-server hosts: each run (the root and every Agent-MCP job) gets its own persistent
//! `codex app-server` process with a live copy of its role's Codex home, in the canonical
//! checkout (readers, the root) or an isolated git worktree (MCP writers). A worker's turn
//! events become its trace; its last agent message becomes its result, checked against the
//! role's contract (one repair turn for a strict role), and a writer's changes become its patch.

use crate::native;
use crate::result::JobState;
use crate::store::{Run, StoredPatch};
use crate::team::{Control, HostHandle, Team};
use codex_app_server::{
    AppServer, Event, Events, GoalStatus, InitializeParams, SpawnOptions, ThreadGoalSetParams,
    ThreadStartParams,
};
use mmo_contract::Contract;
use mmo_contract::correlate::CommandEvent;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// A string member of an app-server item, or a default.
fn field(v: &Value, key: &str, default: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or(default)
        .to_string()
}

/// Characters of the progress preview kept per run.
const PREVIEW_CHARS: usize = 200;

/// How a worker starts.
enum Start {
    /// A new thread on the job's task.
    Fresh,
    /// The job's own thread again (a continued job), with this input.
    Continue(String),
    /// A fork of another run's persisted thread, in that run's home, with this input.
    Fork { source: Box<Run>, message: String },
}

/// Starts a job's worker in the background.
pub fn start_worker(team: Arc<Team>, run: Run) {
    spawn_worker(team, run, Start::Fresh);
}

/// Continues a paused (or suspended) job's worker on its own thread, in its own home and
/// worktree, with `message` as the next turn's input. The run is already `running` (its
/// admission was taken again by the caller).
pub fn continue_worker(team: Arc<Team>, run: Run, message: String) {
    spawn_worker(team, run, Start::Continue(message));
}

/// Starts a new job's worker on a fork of `source`'s persisted thread (`thread/fork`), with
/// `message` as its first turn's input. The new run was admitted and recorded by the caller.
pub fn fork_worker(team: Arc<Team>, run: Run, source: Run, message: String) {
    spawn_worker(
        team,
        run,
        Start::Fork {
            source: Box::new(source),
            message,
        },
    );
}

fn spawn_worker(team: Arc<Team>, run: Run, start: Start) {
    tokio::spawn(async move {
        let run_ref = run.run_ref.clone();
        let outcome = drive_worker(&team, &run, start).await;
        if let Err(reason) = outcome {
            fail(&team, &run_ref, &reason);
        }
        team.hosts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&run_ref);
        team.notify();
    });
}

fn fail(team: &Team, run_ref: &str, reason: &str) {
    let _ = team.store.event(
        &team.session,
        run_ref,
        "failure",
        &json!({"reason": reason}).to_string(),
    );
    let _ = team
        .store
        .transition(run_ref, JobState::Failed, Some(reason));
}

/// Ends a run as `end` (`stopped` by a controller or the operator, `cancelled` by a harness
/// boundary or the end of its session): its host is ended, its partial evidence kept. Waits (a
/// bounded time) until the worker has recorded that.
pub async fn stop_run(team: &Arc<Team>, run_ref: &str, end: JobState, reason: &str) {
    let stop = team
        .hosts
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(run_ref)
        .map(|h| h.stop.clone());
    match stop {
        Some(tx) => {
            let _ = tx.send(Some((end, reason.to_string())));
            let mut rx = team.changed.subscribe();
            let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
            loop {
                // Ended, or paused: either way no longer active.
                let done = team
                    .store
                    .run(run_ref)
                    .map(|r| !r.is_active())
                    .unwrap_or(true);
                if done {
                    break;
                }
                tokio::select! {
                    _ = rx.changed() => {}
                    _ = tokio::time::sleep_until(deadline) => break,
                }
            }
        }
        None => {
            // No host yet (or any more, e.g. paused): the run ends here, with what evidence it
            // has, and a paused writer's kept worktree goes.
            if team.store.transition(run_ref, end, Some(reason)).is_ok()
                && let Ok(run) = team.store.run(run_ref)
                && let Some(job) = &run.job
            {
                if team.store.result(job).ok().flatten().is_none() {
                    keep_partial(team, job, None);
                }
                if run.is_writer
                    && !run.is_active()
                    && let Ok(wt) = read_json(&worktree_record(team, job))
                        .and_then(|v| serde_json::from_value(v).map_err(|e| e.to_string()))
                {
                    let _ = crate::worktree::remove(&team.workspace, &wt);
                }
            }
        }
    }
    team.notify();
}

/// The live Codex home of a run: a fresh, verified copy of its role's home, with `mmo_mesh`
/// registered when the role can spawn or control.
fn live_home(team: &Team, run: &Run) -> Result<PathBuf, String> {
    let dest = team.dir.join("runs").join(&run.run_ref);
    std::fs::create_dir_all(&dest).map_err(|e| format!("{}: {e}", dest.display()))?;
    let homes = mmo_profile::snapshot::materialize(&team.snapshot, &dest.join("homes"))
        .map_err(|e| e.to_string())?;
    let home = homes
        .homes
        .get(&run.role)
        .cloned()
        .ok_or_else(|| format!("the snapshot has no Codex home for role `{}`", run.role))?;
    let role = team.role(&run.role).map_err(|e| e.message)?;
    if !role.can_spawn.is_empty() || !role.controls.is_empty() {
        let q = |s: &str| serde_json::to_string(s).unwrap_or_default();
        let entry = format!(
            "\n# Added by the codex-mmo runtime for session {}: the Agent-MCP server.\n[mcp_servers.mmo_mesh]\ncommand = {}\nargs = [\"mesh-stdio\", \"--socket\", {}]\nstartup_timeout_sec = 30\ntool_timeout_sec = 900\ndefault_tools_approval_mode = \"approve\"\n",
            team.session,
            q(&team.exe.to_string_lossy()),
            q(&team.socket.to_string_lossy()),
        );
        let config = home.join("config.toml");
        let mut text =
            std::fs::read_to_string(&config).map_err(|e| format!("{}: {e}", config.display()))?;
        text.push_str(&entry);
        std::fs::write(&config, text).map_err(|e| format!("{}: {e}", config.display()))?;
    }
    Ok(home)
}

/// A started host and its event stream.
struct Host {
    server: AppServer,
    events: Events,
    thread: String,
    /// The host thread's active turn, if one is running.
    turn: Option<String>,
    /// Server→client requests waiting for a controller's `respond`, by their request id.
    pending: std::collections::HashMap<String, codex_app_server::RequestId>,
    controls: tokio::sync::mpsc::UnboundedReceiver<Control>,
    /// The runs of this host's threads: its own and its native sub-agents'.
    threads: native::Threads,
    stop: watch::Receiver<Option<(JobState, String)>>,
}

/// How a host starts its thread.
#[derive(Clone, Copy)]
enum Thread<'a> {
    /// A new thread in a fresh copy of the role's home.
    Fresh,
    /// The run's own persisted thread (`thread/resume`) in its existing home.
    Resume(&'a str),
    /// A fork (`thread/fork`) of another run's persisted thread, in that run's home.
    Fork(&'a Run),
}

/// The Codex home a run already has, which a resumed or forked thread needs.
fn existing_home(run: &Run, what: &str) -> Result<PathBuf, String> {
    run.home
        .as_deref()
        .map(PathBuf::from)
        .filter(|h| h.is_dir())
        .ok_or_else(|| format!("the run's Codex home is gone, so its thread cannot be {what}"))
}

async fn start_host(
    team: &Arc<Team>,
    run: &Run,
    cwd: &Path,
    thread: Thread<'_>,
) -> Result<Host, String> {
    let codex = team.codex.clone()?;
    let (home, log) = match thread {
        Thread::Fresh => (live_home(team, run)?, format!("{}.log", run.run_ref)),
        Thread::Resume(_) => (
            existing_home(run, "resumed")?,
            format!("{}-resumed-{}.log", run.run_ref, crate::store::now_ms()),
        ),
        // Codex forks only a rollout inside the home it runs in (its state database names the
        // rollout's path), so a fork runs in its source's home, as several Codex processes
        // share one home anywhere; its thread is a new rollout there.
        Thread::Fork(source) => (
            existing_home(source, "forked")?,
            format!("{}.log", run.run_ref),
        ),
    };
    let logs = team.dir.join("logs");
    std::fs::create_dir_all(&logs).map_err(|e| format!("{}: {e}", logs.display()))?;
    let opts = SpawnOptions::new(codex, &home)
        .cwd(cwd)
        .stderr_log(logs.join(log))
        .request_timeout(Duration::from_secs(120));
    let server =
        AppServer::spawn(opts).map_err(|e| format!("starting the app-server host: {e}"))?;
    let events = server
        .events()
        .ok_or("the app-server host has no event stream")?;
    let (stop_tx, stop) = watch::channel(None);
    let (control, controls) = tokio::sync::mpsc::unbounded_channel();
    team.hosts.lock().unwrap_or_else(|p| p.into_inner()).insert(
        run.run_ref.clone(),
        HostHandle {
            pid: Some(server.pid()),
            stop: stop_tx,
            control,
        },
    );
    team.store
        .set_host(
            &run.run_ref,
            Some(server.pid()),
            None,
            &home.to_string_lossy(),
            &cwd.to_string_lossy(),
        )
        .map_err(|e| e.to_string())?;
    team.notify();
    server
        .initialize(
            &InitializeParams::new("codex-mmo", crate::store::PACKAGE_VERSION).experimental_api(),
        )
        .await
        .map_err(|e| format!("initialize: {e}"))?;
    let thread = match thread {
        Thread::Fresh => server
            .thread_start(&ThreadStartParams {
                cwd: Some(cwd.to_string_lossy().into_owned()),
                ..Default::default()
            })
            .await
            .map_err(|e| format!("thread/start: {e}"))?,
        Thread::Resume(id) => {
            let r = server
                .request(
                    "thread/resume",
                    json!({"threadId": id, "cwd": cwd.to_string_lossy()}),
                )
                .await
                .map_err(|e| format!("thread/resume: {e}"))?;
            let resumed = r.pointer("/thread/id").and_then(Value::as_str);
            if resumed != Some(id) {
                return Err(format!("thread/resume of {id} answered thread {resumed:?}"));
            }
            id.to_string()
        }
        Thread::Fork(source) => {
            let id = source
                .thread_id
                .as_deref()
                .ok_or("the forked run never had a thread")?;
            let r = server
                .request(
                    "thread/fork",
                    json!({"threadId": id, "cwd": cwd.to_string_lossy()}),
                )
                .await
                .map_err(|e| format!("thread/fork: {e}"))?;
            r.pointer("/thread/id")
                .and_then(Value::as_str)
                .filter(|t| *t != id)
                .ok_or_else(|| format!("thread/fork of {id} answered no new thread: {r}"))?
                .to_string()
        }
    };
    team.store
        .set_host(
            &run.run_ref,
            Some(server.pid()),
            Some(&thread),
            &home.to_string_lossy(),
            &cwd.to_string_lossy(),
        )
        .map_err(|e| e.to_string())?;
    let me = team.store.run(&run.run_ref).map_err(|e| e.to_string())?;
    Ok(Host {
        server,
        events,
        threads: native::Threads::new(&thread, &me),
        thread,
        turn: None,
        pending: Default::default(),
        controls,
        stop,
    })
}

impl Host {
    /// Ends the host and every descendant; its native runs still active end with it.
    async fn end(&mut self, team: &Team) {
        // Requests still pending die with the host: no later respond can reach them.
        if let Some(run) = self.threads.run(&self.thread).map(|r| r.run_ref.clone()) {
            for request_id in self.pending.drain().map(|(k, _)| k) {
                let _ = team.store.event(
                    &team.session,
                    &run,
                    "serverResponse",
                    &json!({"request_id": request_id, "response": null, "dropped": "its host ended"}).to_string(),
                );
            }
        }
        let stopped = self.stop.borrow().is_some();
        native::end_with_host(team, &self.threads, stopped);
        self.server.shutdown().await;
    }
}

/// How a turn ended.
struct TurnEnd {
    status: String,
    error: Option<String>,
    last_message: Option<String>,
    /// How and why the run was ended from outside, if it was.
    stopped: Option<(JobState, String)>,
}

/// Runs one turn to its end, recording every completed item as a trace event.
async fn run_turn(
    team: &Team,
    run: &Run,
    host: &mut Host,
    text: &str,
    schema: Option<Value>,
    commands: &mut Vec<CommandEvent>,
) -> Result<TurnEnd, String> {
    let mut params = codex_app_server::TurnStartParams::text(&host.thread, text);
    params.output_schema = schema;
    // A controller's set_effort takes effect from the next turn.
    params.effort = team.store.effort(&run.run_ref).ok().flatten();
    let turn = host
        .server
        .turn_start_with(&params)
        .await
        .map_err(|e| format!("turn/start: {e}"))?;
    host.turn = Some(turn);
    pump(team, run, host, commands, false).await
}

/// Records a host's events until its turn ends or, for a goal (`goal = true`), until the goal
/// leaves `active` (Codex continues a goal over several turns by itself).
async fn pump(
    team: &Team,
    run: &Run,
    host: &mut Host,
    commands: &mut Vec<CommandEvent>,
    goal: bool,
) -> Result<TurnEnd, String> {
    let mut last_message = None;
    // A goal that left `active` while its turn was still running: how it ended.
    let mut goal_end: Option<String> = None;
    let mut armed = false;
    loop {
        let next = tokio::select! {
            e = host.events.recv() => Ok(e),
            end = host.stop.wait_for(|s| s.is_some()) => {
                let stopped = end.ok().and_then(|e| e.clone());
                return Ok(TurnEnd { status: "stopped".into(), error: None, last_message, stopped });
            }
            Some(c) = host.controls.recv() => Err(c),
        };
        let event = match next {
            Ok(e) => e,
            Err(control) => {
                deliver(host, control).await;
                continue;
            }
        };
        let Some(event) = event else {
            return Err("the app-server host closed its output".into());
        };
        match event {
            Event::Notification { method, params } => match method.as_str() {
                _ if native::thread_of(&params).is_some_and(|t| t != host.thread) => {
                    let thread = native::thread_of(&params).unwrap_or_default().to_string();
                    on_native(team, host, &thread, &method, &params).await;
                }
                "item/completed" => {
                    let item = params.get("item").cloned().unwrap_or(Value::Null);
                    if let Some(text) = record_item(team, &run.run_ref, &item, Some(commands)) {
                        last_message = Some(text);
                    }
                    let spawned = native::spawned_threads(&item);
                    if !spawned.is_empty() {
                        let me = host.thread.clone();
                        register_native(team, host, &me, spawned).await;
                    }
                }
                "turn/started" => {
                    host.turn = params
                        .pointer("/turn/id")
                        .and_then(Value::as_str)
                        .map(str::to_string);
                }
                "turn/completed" => {
                    host.turn = None;
                    let (status, error) = record_turn_end(team, &run.run_ref, &params);
                    if !goal || status == "failed" {
                        return Ok(TurnEnd {
                            status,
                            error,
                            last_message,
                            stopped: None,
                        });
                    }
                    if let Some(done) = goal_end.take() {
                        return Ok(TurnEnd {
                            status: done,
                            error: None,
                            last_message,
                            stopped: None,
                        });
                    }
                }
                "thread/goal/updated" if goal => {
                    let status = params
                        .pointer("/goal/status")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    let _ =
                        team.store
                            .event(&team.session, &run.run_ref, "goal", &params.to_string());
                    let _ = team.store.progress(&run.run_ref, &format!("goal {status}"));
                    team.notify();
                    // A resumed thread first reports the goal as it was (say `budgetLimited`);
                    // the goal this host set is the one from its `active` update on.
                    if status == "active" {
                        armed = true;
                    }
                    if armed && status != "active" {
                        let done = if status == "complete" {
                            "completed".to_string()
                        } else {
                            format!("goal {status}")
                        };
                        // The goal's last word is its turn's: a turn still running (the model
                        // answering after update_goal) ends first.
                        if host.turn.is_none() {
                            return Ok(TurnEnd {
                                status: done,
                                error: None,
                                last_message,
                                stopped: None,
                            });
                        }
                        goal_end = Some(done);
                    }
                }
                "thread/tokenUsage/updated" => {
                    let _ = team.store.event(
                        &team.session,
                        &run.run_ref,
                        "tokenUsage",
                        &params.to_string(),
                    );
                }
                "error" => {
                    let _ =
                        team.store
                            .event(&team.session, &run.run_ref, "error", &params.to_string());
                }
                _ => {}
            },
            Event::ServerRequest { id, method, params } => {
                let request_id = id.to_string();
                // Under approval_policy "never" nothing should ask, and nothing is escalated: a
                // request that arrives anyway is refused (and traced), never left hanging.
                // Otherwise it waits, as pending input, for a controller's `respond`.
                // The root's requests are refused too: no controller may answer for the root
                // (a root answering its own escalation would approve itself).
                let never = run.job.is_none()
                    || team
                        .role(&run.role)
                        .map(|r| r.approval_policy == "never")
                        .unwrap_or(true);
                let _ = team.store.event(
                    &team.session,
                    &run.run_ref,
                    "serverRequest",
                    &json!({"request_id": request_id, "method": method, "params": params, "pending": !never}).to_string(),
                );
                if never {
                    let _ = host
                        .server
                        .respond_error(
                            &id,
                            -32601,
                            "nothing answers this request: the role's approval_policy is never, or the run is the root",
                        )
                        .await;
                } else {
                    host.pending.insert(request_id, id);
                    let _ = team
                        .store
                        .progress(&run.run_ref, &format!("waiting for a respond to {method}"));
                    team.notify();
                }
            }
            Event::Malformed { error } => {
                let _ = team.store.event(
                    &team.session,
                    &run.run_ref,
                    "malformed",
                    &json!({"error": error}).to_string(),
                );
            }
            Event::Exited { status } => {
                return Err(format!("the app-server host exited ({status:?})"));
            }
        }
    }
}

/// Delivers one control to the host's app-server and answers its sender. The event loop waits
/// for it, but never past a stop of the run: a host that stops answering (frozen, or the reply
/// lost) cannot hold the run's stop back. An unanswered sender is a `delivery_unknown`.
async fn deliver(host: &mut Host, control: Control) {
    match control {
        Control::Steer { text, reply } => {
            let Some(turn) = host.turn.clone() else {
                let _ = reply.send(Err("the run has no active turn to steer".to_string()));
                return;
            };
            let params = json!({"threadId": host.thread, "expectedTurnId": turn, "input": [{"type": "text", "text": text}]});
            let request = host.server.request("turn/steer", params);
            tokio::select! {
                answer = request => {
                    answer_control(reply, "turn/steer", answer);
                }
                _ = host.stop.wait_for(|s| s.is_some()) => {}
            }
        }
        Control::Respond {
            request_id,
            result,
            reply,
        } => {
            let Some(id) = host.pending.get(&request_id).cloned() else {
                let _ = reply.send(Err(format!(
                    "no server request {request_id} is pending on this run"
                )));
                return;
            };
            let answer = host
                .server
                .respond(&id, result.clone())
                .await
                .map(|()| json!({"request_id": request_id}));
            if answer.is_ok() {
                host.pending.remove(&request_id);
            }
            answer_control(reply, &format!("answering {request_id}"), answer);
        }
        Control::InterruptThread { thread, reply } => {
            let Some(turn) = host.threads.turn(&thread).map(str::to_string) else {
                let _ = reply.send(Ok(json!({"interrupted": null})));
                return;
            };
            let request = host.server.turn_interrupt(&thread, &turn);
            tokio::select! {
                answer = request => {
                    answer_control(reply, "turn/interrupt", answer.map(|()| json!({"interrupted": turn})));
                }
                _ = host.stop.wait_for(|s| s.is_some()) => {}
            }
        }
        Control::StartTurn {
            thread,
            text,
            reply,
        } => {
            let params = json!({"threadId": thread, "input": [{"type": "text", "text": text}]});
            let request = host.server.request("turn/start", params);
            tokio::select! {
                answer = request => {
                    answer_control(reply, "turn/start", answer);
                }
                _ = host.stop.wait_for(|s| s.is_some()) => {}
            }
        }
        Control::Interrupt { reply } => {
            let Some(turn) = host.turn.clone() else {
                let _ = reply.send(Err("the run has no active turn to interrupt".to_string()));
                return;
            };
            let request = host.server.turn_interrupt(&host.thread, &turn);
            tokio::select! {
                answer = request => {
                    answer_control(reply, "turn/interrupt", answer.map(|()| Value::Null));
                }
                _ = host.stop.wait_for(|s| s.is_some()) => {}
            }
        }
    }
}

/// Answers a control's sender with the app-server's answer: its result, or the error it
/// answered (nothing was done: `failed`). An answer that never came, because the host exited,
/// closed its output or timed out mid-request, leaves the sender unanswered: the control may or
/// may not have reached the thread, and the delivery is `delivery_unknown`.
fn answer_control(
    reply: tokio::sync::oneshot::Sender<Result<Value, String>>,
    what: &str,
    answer: Result<Value, codex_app_server::Error>,
) {
    match answer {
        Ok(v) => {
            let _ = reply.send(Ok(v));
        }
        Err(e @ codex_app_server::Error::Rpc { .. }) => {
            let _ = reply.send(Err(format!("{what}: {e}")));
        }
        Err(_) => drop(reply),
    }
}

/// Records a `turn/completed` as a `turn` trace event of `run_ref`; returns its status and error.
fn record_turn_end(team: &Team, run_ref: &str, params: &Value) -> (String, Option<String>) {
    let turn = params.get("turn").cloned().unwrap_or(Value::Null);
    let status = field(&turn, "status", "completed");
    let error = turn
        .get("error")
        .filter(|e| !e.is_null())
        .map(|e| e.to_string());
    let _ = team.store.event(
        &team.session,
        run_ref,
        "turn",
        &json!({"status": status, "error": error}).to_string(),
    );
    (status, error)
}

/// Records a completed item as a trace event of `run_ref` and its preview as progress; the
/// commands a contract correlates against are collected into `commands`. Returns an agent
/// message's text.
fn record_item(
    team: &Team,
    run_ref: &str,
    item: &Value,
    commands: Option<&mut Vec<CommandEvent>>,
) -> Option<String> {
    let kind = field(item, "type", "item");
    let body = if kind == "reasoning" {
        // Private reasoning is never stored, so no trace can show it.
        json!({"type": "reasoning", "redacted": true})
    } else {
        item.clone()
    };
    let _ = team
        .store
        .event(&team.session, run_ref, &kind, &body.to_string());
    let mut message = None;
    let preview = match kind.as_str() {
        "agentMessage" => {
            let t = field(item, "text", "");
            message = Some(t.clone());
            Some(t)
        }
        "commandExecution" => {
            let command = field(item, "command", "");
            if let (Some(code), Some(commands)) =
                (item.get("exitCode").and_then(Value::as_i64), commands)
            {
                commands.push(CommandEvent {
                    command: command.clone(),
                    exit_code: code,
                });
            }
            Some(format!("$ {command}"))
        }
        "mcpToolCall" => Some(format!(
            "{}.{} {}",
            field(item, "server", "?"),
            field(item, "tool", "?"),
            field(item, "status", "")
        )),
        "fileChange" => Some("file change".into()),
        "collabAgentToolCall" => Some(format!(
            "agents.{} {}",
            field(item, "tool", "?"),
            field(item, "status", "")
        )),
        _ => None,
    };
    if let Some(p) = preview {
        let p: String = p.chars().take(PREVIEW_CHARS).collect();
        let _ = team.store.progress(run_ref, &p);
        team.notify();
    }
    message
}

/// Records a notification of a native thread of this host (`native.rs`) under its run.
/// Returns the threads it spawned, to be registered.
fn native_event(team: &Team, run_ref: &str, method: &str, params: &Value) -> Vec<String> {
    match method {
        "item/completed" => {
            let item = params.get("item").cloned().unwrap_or(Value::Null);
            record_item(team, run_ref, &item, None);
            return native::spawned_threads(&item);
        }
        "turn/completed" => {
            let (status, error) = record_turn_end(team, run_ref, params);
            native::turn_ended(team, run_ref, &status, error.as_deref());
        }
        "thread/tokenUsage/updated" => {
            let _ = team
                .store
                .event(&team.session, run_ref, "tokenUsage", &params.to_string());
        }
        "error" => {
            let _ = team
                .store
                .event(&team.session, run_ref, "error", &params.to_string());
        }
        _ => {}
    }
    Vec::new()
}

/// A notification of another thread than the host's own: a known native thread's is recorded,
/// an unknown thread's held until its spawn item names it.
async fn on_native(team: &Team, host: &mut Host, thread: &str, method: &str, params: &Value) {
    host.threads.track_turn(thread, method, params);
    match host.threads.run(thread).map(|r| r.run_ref.clone()) {
        Some(run_ref) => {
            let spawned = native_event(team, &run_ref, method, params);
            register_native(team, host, thread, spawned).await;
        }
        None => host.threads.hold(thread, method, params),
    }
}

/// `thread/read` of a just-spawned thread. Codex answers an error until the thread's rollout
/// has its first line, which can lag the spawn item under load: a few short retries (at most
/// about 1.5 s), then the thread is recorded without its role (`readError`).
async fn read_thread(host: &Host, thread: &str) -> Value {
    let mut delay = Duration::from_millis(25);
    let mut last = String::new();
    for _ in 0..10 {
        match host.server.thread_read(thread).await {
            Ok(m) => return m,
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_millis(250));
    }
    json!({"id": thread, "readError": last})
}

/// Makes threads that `spawner` spawned native runs (`thread/read` gives their role), then
/// replays what was held for them (which may name further threads).
async fn register_native(team: &Team, host: &mut Host, spawner: &str, spawned: Vec<String>) {
    let mut work: Vec<(String, String)> = spawned
        .into_iter()
        .map(|t| (spawner.to_string(), t))
        .collect();
    while let Some((spawner, thread)) = work.pop() {
        if host.threads.run(&thread).is_some() {
            continue;
        }
        let meta = read_thread(host, &thread).await;
        let Some(run_ref) = host.threads.started(team, &meta, &spawner) else {
            continue;
        };
        for (method, params) in host.threads.take_pending(&thread) {
            for t in native_event(team, &run_ref, &method, &params) {
                work.push((thread.clone(), t));
            }
        }
    }
}

/// What a worker is told: its task, its boundaries and, when it has one, its output contract.
fn worker_prompt(run: &Run, contract: Option<&Value>) -> String {
    let mut p = String::new();
    if run.literal.is_none() {
        p.push_str(&format!(
            "Task kind: {}\n",
            run.task_kind.as_deref().unwrap_or("other")
        ));
        if run.is_writer {
            p.push_str(&format!(
                "You work in an isolated git worktree. You may change only these paths: {}. Changes elsewhere fail the job.\n",
                run.write_scope.join(", ")
            ));
        } else {
            p.push_str("You are read-only: change no file.\n");
        }
        p.push('\n');
    }
    p.push_str(run.task.as_deref().unwrap_or(""));
    if let Some(c) = contract {
        p.push_str("\n\nYour final message is your result: exactly one JSON value (no prose around it) that satisfies this JSON Schema contract:\n```json\n");
        p.push_str(&serde_json::to_string_pretty(c).unwrap_or_default());
        p.push_str("\n```\n");
    }
    p
}

/// Where a writer job's worktree is described (`worktree::Worktree` as JSON).
fn worktree_record(team: &Team, job: &str) -> PathBuf {
    worktree_record_in(&team.dir, job)
}

fn read_json(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Durable-thread compaction of a paused or suspended job (`thread/compact/start`): a host is
/// started on the job's own thread for the compaction turn and retired after it; the job stays
/// paused, its thread shorter for the turn that continues it. Bounded by `wait`.
pub async fn compact_thread(team: &Arc<Team>, run: &Run, wait: Duration) -> Result<Value, String> {
    let thread = run
        .thread_id
        .as_deref()
        .ok_or("the run never had a thread to compact")?;
    let cwd = run
        .cwd
        .as_deref()
        .map(PathBuf::from)
        .filter(|c| c.is_dir())
        .unwrap_or_else(|| team.workspace.clone());
    let mut host = start_host(team, run, &cwd, Thread::Resume(thread)).await?;
    let compacted = async {
        host.server
            .request("thread/compact/start", json!({"threadId": host.thread}))
            .await
            .map_err(|e| format!("thread/compact/start: {e}"))?;
        let mut commands = Vec::new();
        pump(team, run, &mut host, &mut commands, false).await
    };
    let end = tokio::time::timeout(wait, compacted).await;
    host.end(team).await;
    team.hosts
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&run.run_ref);
    team.notify();
    match end {
        Err(_) => Err(format!(
            "the compaction turn did not end within {} ms",
            wait.as_millis()
        )),
        Ok(Err(e)) => Err(e),
        Ok(Ok(end)) if end.status == "completed" => Ok(json!({"compacted": true})),
        Ok(Ok(end)) => Err(format!(
            "the compaction turn ended `{}`{}",
            end.status,
            end.error.map(|e| format!(": {e}")).unwrap_or_default()
        )),
    }
}

async fn drive_worker(team: &Arc<Team>, run: &Run, start: Start) -> Result<(), String> {
    let resume = match &start {
        Start::Continue(m) => Some(m.clone()),
        _ => None,
    };
    let job = run.job.clone().ok_or("a worker run has a job")?;
    let role = team.role(&run.role).map_err(|e| e.message)?.clone();
    let worktree = if run.is_writer {
        let dir = team.dir.join("worktrees");
        let dest = dir.join(&job);
        // The worktree's record outlives a pause, so a continued writer works in it again.
        let record = worktree_record(team, &job);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let read = |path: &Path| -> Result<crate::worktree::Worktree, String> {
            serde_json::from_value(read_json(path)?).map_err(|e| format!("{}: {e}", path.display()))
        };
        Some(match &start {
            Start::Continue(_) => read(&record)?,
            Start::Fresh | Start::Fork { .. } => {
                let wt = match &start {
                    // A writer's fork starts from what its source has on disk.
                    Start::Fork { source, .. } => {
                        let source_job = source.job.as_deref().unwrap_or_default();
                        let from = read(&worktree_record(team, source_job))?;
                        crate::worktree::fork(&from, &dest, &job)
                    }
                    _ => crate::worktree::create(&team.workspace, &dest, &job),
                }
                .map_err(|e| e.to_string())?;
                std::fs::write(&record, serde_json::to_vec(&wt).unwrap_or_default())
                    .map_err(|e| format!("{}: {e}", record.display()))?;
                wt
            }
        })
    } else {
        None
    };
    let cwd = worktree
        .as_ref()
        .map(|w| w.path.clone())
        .unwrap_or_else(|| team.workspace.clone());
    let contract_value = match &role.output_contract {
        Some(rel) => Some(read_json(&team.snapshot.join(rel))?),
        None => None,
    };
    let contract = contract_value
        .as_ref()
        .map(|v| {
            Contract::new(v.clone())
                .map_err(|p| format!("the role's contract does not build: {p:?}"))
        })
        .transpose()?;
    let projection = team
        .snapshot
        .join("roles")
        .join(&run.role)
        .join("output-schema.json");
    let schema = if projection.is_file() {
        Some(read_json(&projection)?)
    } else {
        None
    };
    let strict = role.contract_enforcement == "strict";

    let thread = match &start {
        Start::Continue(_) => Thread::Resume(
            run.thread_id
                .as_deref()
                .ok_or("the run never had a thread to resume")?,
        ),
        Start::Fork { source, .. } => Thread::Fork(source),
        Start::Fresh => Thread::Fresh,
    };
    let mut host = start_host(team, run, &cwd, thread).await?;
    if resume.is_none()
        && team
            .store
            .transition(&run.run_ref, JobState::Running, None)
            .is_err()
    {
        // Stopped (or cancelled) while its host was starting: nothing to run.
        host.end(team).await;
        if let Some(wt) = &worktree {
            let _ = crate::worktree::remove(&team.workspace, wt);
        }
        return Ok(());
    }
    team.notify();
    // A continued run's earlier commands still count for its contract's correlation.
    let mut commands = match &start {
        Start::Continue(_) => recorded_commands(team, &run.run_ref),
        // A fork's history holds its source's commands.
        Start::Fork { source, .. } => recorded_commands(team, &source.run_ref),
        Start::Fresh => Vec::new(),
    };
    let mut prompt = match start {
        Start::Continue(m) | Start::Fork { message: m, .. } => m,
        Start::Fresh => worker_prompt(run, contract_value.as_ref()),
    };
    // A writer that pauses or stops keeps what it changed so far as its partial patch.
    let keep_patch_so_far = || {
        if let Some(wt) = &worktree {
            keep_partial_patch(&team.store, &job, wt);
        }
    };
    let mut repaired = run.repairs > 0;
    // A goal-mode job's work is its goal (the task, or on a continuation the goal its thread
    // already has); a repair after it is an ordinary turn.
    let mut goal = role.execution_mode == "goal";
    let outcome = loop {
        let end = if std::mem::take(&mut goal) {
            let objective = worker_prompt(run, contract_value.as_ref());
            match set_goal(team, run, &mut host, &objective).await {
                Ok(()) => pump(team, run, &mut host, &mut commands, true).await,
                Err(e) => Err(e),
            }
        } else {
            run_turn(team, run, &mut host, &prompt, schema.clone(), &mut commands).await
        };
        let end = match end {
            Ok(e) => e,
            Err(reason) => {
                keep_partial(team, &job, None);
                host.end(team).await;
                return Err(reason);
            }
        };
        if let Some((state, why)) = &end.stopped {
            keep_partial(team, &job, end.last_message.as_deref());
            host.end(team).await;
            keep_patch_so_far();
            let _ = team.store.transition(&run.run_ref, *state, Some(why));
            // A paused writer keeps its worktree for its continuation.
            if *state != JobState::Paused
                && let Some(wt) = &worktree
            {
                let _ = crate::worktree::remove(&team.workspace, wt);
            }
            return Ok(());
        }
        if let Some(status) = end.status.strip_prefix("goal ") {
            // The goal stopped short of complete (its token budget used up, or Codex paused
            // or blocked it): the job pauses with its partial evidence, and its controller may
            // continue it (with a larger budget, within max_goal_token_budget).
            keep_partial(team, &job, end.last_message.as_deref());
            host.end(team).await;
            keep_patch_so_far();
            let why = match status {
                "budgetLimited" => format!(
                    "its goal used its token budget ({}); a controller may continue it with a larger goal_token_budget, up to max_goal_token_budget ({})",
                    goal_budget(team, run)
                        .map(|b| format!("{b} tokens"))
                        .unwrap_or_else(|| "unset".into()),
                    role.max_goal_token_budget
                        .map(|b| b.to_string())
                        .unwrap_or_else(|| "unset".into()),
                ),
                other => format!("its goal is `{other}`"),
            };
            let _ = team
                .store
                .transition(&run.run_ref, JobState::Paused, Some(&why));
            return Ok(());
        }
        if end.status == "interrupted" {
            // Only a controller interrupts a worker's turn: the job pauses on its thread, its
            // partial evidence kept, and may continue.
            keep_partial(team, &job, end.last_message.as_deref());
            host.end(team).await;
            keep_patch_so_far();
            let _ = team.store.transition(
                &run.run_ref,
                JobState::Paused,
                Some("its turn was interrupted by its controller"),
            );
            return Ok(());
        }
        if end.status != "completed" {
            keep_partial(team, &job, end.last_message.as_deref());
            host.end(team).await;
            return Err(format!(
                "the worker's turn ended `{}`{}",
                end.status,
                end.error.map(|e| format!(": {e}")).unwrap_or_default()
            ));
        }
        let text = end.last_message.unwrap_or_default();
        let Some(contract) = &contract else {
            break (text, false, Vec::new());
        };
        let literal: Option<crate::literal::LiteralOperation> = run
            .literal
            .clone()
            .and_then(|l| serde_json::from_value(l).ok());
        let evidence = crate::result::ResultEvidence {
            commands: &commands,
            tree: &cwd,
            literal: literal.as_ref(),
            finality: crate::result::Finality::Final,
        };
        let problems = match crate::result::extract_json(&text) {
            Ok(v) => crate::result::check(contract, &v, &evidence),
            Err(e) => vec![e.into()],
        };
        if problems.is_empty() || !strict {
            break (text, true, problems);
        }
        if repaired {
            keep_partial(team, &job, Some(&text));
            host.end(team).await;
            return Err(format!(
                "the result breaks the role's strict contract after its one repair turn: {}",
                problems
                    .iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
        repaired = true;
        let _ = team.store.count_repair(&run.run_ref);
        let _ = team.store.progress(
            &run.run_ref,
            "repair turn: the first answer broke the contract",
        );
        let _ = team.store.event(
            &team.session,
            &run.run_ref,
            "repair",
            &json!({"problems": problems.iter().map(|p| p.to_string()).collect::<Vec<_>>()})
                .to_string(),
        );
        team.notify();
        prompt = crate::result::repair_prompt(contract, &problems);
    };
    host.end(team).await;
    let (text, checked, warnings) = outcome;
    if let Some(wt) = &worktree {
        let recorded = crate::worktree::record(wt).map_err(|e| format!("recording the patch: {e}"));
        let patch = match recorded {
            Ok(p) => p,
            Err(e) => {
                let _ = team.store.taint(&team.session, &format!("job {job}: {e}"));
                keep_partial(team, &job, Some(&text));
                let _ = crate::worktree::remove(&team.workspace, wt);
                return Err(e);
            }
        };
        let violations = crate::worktree::check(
            &patch,
            wt,
            &run.write_scope,
            &crate::worktree::ArtifactPolicy::default(),
        );
        let files = serde_json::to_value(&patch.files).unwrap_or(Value::Null);
        if !violations.is_empty() {
            let why = violations
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join("; ");
            let _ = team.store.put_patch(
                &job,
                &patch.base_commit,
                &patch.sha256,
                &patch.bytes,
                &files,
                "refused",
            );
            let _ = team
                .store
                .taint(&team.session, &format!("job {job}: {why}"));
            keep_partial(team, &job, Some(&text));
            let _ = crate::worktree::remove(&team.workspace, wt);
            return Err(format!(
                "the patch breaks the job's boundaries (the session is tainted): {why}"
            ));
        }
        if !patch.files.is_empty() {
            let _ = team.store.put_patch(
                &job,
                &patch.base_commit,
                &patch.sha256,
                &patch.bytes,
                &files,
                "recorded",
            );
        }
        let _ = crate::worktree::remove(&team.workspace, wt);
    }
    let is_json = checked && crate::result::extract_json(&text).is_ok();
    let stored = if is_json {
        crate::result::extract_json(&text)
            .map(|v| v.to_string())
            .unwrap_or(text.clone())
    } else {
        text.clone()
    };
    team.store
        .put_result(&job, &stored, is_json, true)
        .map_err(|e| e.to_string())?;
    if !warnings.is_empty() {
        let _ = team.store.event(
            &team.session,
            &run.run_ref,
            "contractWarning",
            &json!({"problems": warnings.iter().map(|p| p.to_string()).collect::<Vec<_>>()})
                .to_string(),
        );
    }
    team.store
        .transition(&run.run_ref, JobState::Completed, None)
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// The commands a run's trace recorded (command and exit code), oldest first.
fn recorded_commands(team: &Team, run_ref: &str) -> Vec<CommandEvent> {
    let kinds = ["commandExecution".to_string()];
    team.store
        .events(run_ref, 0, usize::MAX, Some(&kinds))
        .unwrap_or_default()
        .iter()
        .filter_map(|e| {
            let item: Value = serde_json::from_str(&e.body).ok()?;
            Some(CommandEvent {
                command: field(&item, "command", ""),
                exit_code: item.get("exitCode")?.as_i64()?,
            })
        })
        .collect()
}

/// Keeps a writer's changes so far as its patch in state `partial`: evidence, never integrated
/// (integration takes only a `recorded` patch), replaced by the patch its completion records.
pub(crate) fn keep_partial_patch(
    store: &crate::store::Store,
    job: &str,
    wt: &crate::worktree::Worktree,
) {
    if let Ok(p) = crate::worktree::record(wt)
        && !p.files.is_empty()
    {
        let files = serde_json::to_value(&p.files).unwrap_or(Value::Null);
        let _ = store.put_patch(job, &p.base_commit, &p.sha256, &p.bytes, &files, "partial");
    }
}

/// Where a writer job's worktree is described, under a session's directory.
pub(crate) fn worktree_record_in(session_dir: &Path, job: &str) -> PathBuf {
    session_dir.join("worktrees").join(format!("{job}.json"))
}

/// Keeps a job's partial evidence (never final, never acceptable).
pub(crate) fn keep_partial(team: &Team, job: &str, text: Option<&str>) {
    let _ = team.store.put_result(job, text.unwrap_or(""), false, false);
}

/// The root's host: its task as one turn (or its goal). The session ends with it.
pub fn start_root(team: Arc<Team>, run: Run, task: String) {
    spawn_root(team, run, task, None);
}

/// The root continues its own thread (`thread/resume` in its own home): after a resume of its
/// session, or its operator's `continue` of a paused root. A turn-mode root's next turn is
/// `message`; a goal-mode root's goal is made active again (with its current budget). The root
/// is `paused` or `suspended`; it becomes `running` here.
pub fn continue_root(team: Arc<Team>, run: Run, task: String, message: String) {
    spawn_root(team, run, task, Some(message));
}

/// How the root's host ended.
enum RootEnd {
    /// The session ends in this state.
    Ended(&'static str),
    /// The root is paused (by its operator, an interrupt, or its goal's budget): the session
    /// waits, its supervisor and jobs live on, for the operator's `continue`.
    Paused(String),
}

fn spawn_root(team: Arc<Team>, run: Run, task: String, resume: Option<String>) {
    tokio::spawn(async move {
        let outcome = drive_root(&team, &run, &task, resume).await;
        let ended = match outcome {
            Ok(RootEnd::Ended(state)) => {
                let _ = team.store.set_session_state(&team.session, state, None);
                true
            }
            Ok(RootEnd::Paused(why)) => {
                let _ = team
                    .store
                    .set_session_state(&team.session, "paused", Some(&why));
                false
            }
            Err(reason) => {
                fail(&team, &run.run_ref, &reason);
                let _ = team
                    .store
                    .set_session_state(&team.session, "failed", Some(&reason));
                true
            }
        };
        team.hosts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&run.run_ref);
        team.notify();
        if ended {
            finish(&team).await;
        }
    });
}

async fn drive_root(
    team: &Arc<Team>,
    run: &Run,
    task: &str,
    resume: Option<String>,
) -> Result<RootEnd, String> {
    let thread = match (&resume, run.thread_id.as_deref()) {
        (None, _) => Thread::Fresh,
        (Some(_), Some(id)) => Thread::Resume(id),
        (Some(_), None) => {
            return Err("the root never started its thread, so there is none to resume".into());
        }
    };
    if resume.is_some() {
        team.store
            .transition(
                &run.run_ref,
                JobState::Running,
                Some("resumed on its own thread"),
            )
            .map_err(|e| e.to_string())?;
        let _ = team.store.set_session_state(&team.session, "running", None);
    }
    let mut host = start_host(team, run, &team.workspace.clone(), thread).await?;
    if resume.is_none() {
        team.store
            .transition(&run.run_ref, JobState::Running, None)
            .map_err(|e| e.to_string())?;
    }
    team.notify();
    let mut commands = Vec::new();
    let role = team.role(&run.role).map_err(|e| e.message)?.clone();
    let end = if role.execution_mode == "goal" {
        match set_goal(team, run, &mut host, task).await {
            Ok(()) => pump(team, run, &mut host, &mut commands, true).await,
            Err(e) => Err(e),
        }
    } else {
        let text = resume.as_deref().unwrap_or(task);
        run_turn(team, run, &mut host, text, None, &mut commands).await
    };
    host.end(team).await;
    let end = end?;
    let paused = match (&end.stopped, end.status.as_str()) {
        (Some((JobState::Paused, why)), _) => Some(why.clone()),
        (Some((state, why)), _) => {
            let _ = team.store.transition(&run.run_ref, *state, Some(why));
            return Ok(RootEnd::Ended("stopped"));
        }
        (None, "interrupted") => Some("its turn was interrupted by its operator".to_string()),
        (None, s) if s.starts_with("goal budgetLimited") => Some(format!(
            "its goal used its token budget ({}); its operator may continue it with a larger goal_token_budget, up to max_goal_token_budget ({})",
            goal_budget(team, run)
                .map(|b| format!("{b} tokens"))
                .unwrap_or_else(|| "unset".into()),
            role.max_goal_token_budget
                .map(|b| b.to_string())
                .unwrap_or_else(|| "unset".into()),
        )),
        (None, s) if s.starts_with("goal ") => Some(format!("its goal is `{}`", &s[5..])),
        _ => None,
    };
    if let Some(why) = paused {
        team.store
            .transition(&run.run_ref, JobState::Paused, Some(&why))
            .map_err(|e| e.to_string())?;
        return Ok(RootEnd::Paused(why));
    }
    if end.status != "completed" {
        return Err(format!(
            "the root's turn ended `{}`{}",
            end.status,
            end.error.map(|e| format!(": {e}")).unwrap_or_default()
        ));
    }
    team.store
        .transition(&run.run_ref, JobState::Completed, None)
        .map_err(|e| e.to_string())?;
    Ok(RootEnd::Ended("completed"))
}

/// What a resumed turn-mode root is told.
pub const CONTINUE_ROOT_MESSAGE: &str =
    "Your session was interrupted and is resumed now. Continue your task from where you left off.";

/// Makes the run's goal active with its current token budget (`goal_budget`). Setting an active
/// goal starts a turn by itself; Codex continues it until the model marks it complete
/// (update_goal) or its cumulative token use reaches the budget. A thread that already has its
/// goal (a resumed or continued one) keeps its objective and its token count.
async fn set_goal(team: &Team, run: &Run, host: &mut Host, objective: &str) -> Result<(), String> {
    let existing = host
        .server
        .thread_goal_get(&host.thread)
        .await
        .map_err(|e| format!("thread/goal/get: {e}"))?;
    let token_budget = goal_budget(team, run);
    host.server
        .thread_goal_set(&ThreadGoalSetParams {
            thread_id: host.thread.clone(),
            objective: existing.is_none().then(|| objective.to_string()),
            status: Some(GoalStatus::Active),
            token_budget,
        })
        .await
        .map_err(|e| format!("thread/goal/set: {e}"))?;
    Ok(())
}

/// A goal-mode run's token budget now: the last one a controller's `continue` extended it to,
/// else its role's `goal_token_budget`.
pub fn goal_budget(team: &Team, run: &Run) -> Option<i64> {
    let extended = team
        .store
        .last_event(&run.run_ref, "goalBudget")
        .ok()
        .flatten()
        .and_then(|e| serde_json::from_str::<Value>(&e.body).ok())
        .and_then(|b| b["token_budget"].as_i64());
    extended.or_else(|| {
        team.role(&run.role)
            .ok()
            .and_then(|r| r.goal_token_budget)
            .map(|b| b as i64)
    })
}

/// A stored patch as the worktree module integrates it.
pub fn patch_from_store(p: &StoredPatch) -> crate::worktree::Patch {
    crate::worktree::Patch {
        name: p.job.clone(),
        base_commit: p.base_commit.clone(),
        bytes: p.bytes.clone(),
        sha256: p.sha256.clone(),
        files: serde_json::from_value(p.files.clone()).unwrap_or_default(),
    }
}

/// Ends the supervisor once the session is terminal: workers still active are stopped first.
pub async fn finish(team: &Arc<Team>) {
    let runs = team.store.runs(&team.session).unwrap_or_default();
    for r in runs
        .into_iter()
        .filter(|r| r.is_active() || r.state == JobState::Paused)
    {
        crate::host::stop_run(team, &r.run_ref, JobState::Cancelled, "the session ended").await;
    }
    team.notify();
    let _ = team.done.send(true);
}
