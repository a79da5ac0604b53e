//! `codex-mmo smoke`: a pack's live smoke tasks, each in a session of its own. Smoke consumes
//! live provider access, so it first checks that every model a task needs is reachable and
//! exits 2 naming the first that is not.

use crate::runtime_cmd::{Fail, R, call, load, paths, print, start, tool};
use mmo_runtime::result::JobState;
use mmo_runtime::store::{Store, is_terminal_session};
use serde_json::{Value, json};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// What the harness appends to a goal-mode root's task: a goal only ends when the model says so.
const GOAL_COMPLETION: &str = "\n\nWhen all of the evidence above is ready, call update_goal with status \"complete\". Finishing with a message alone leaves the goal running.";

pub fn smoke(target: &str, workspace: Option<PathBuf>, json_out: bool) -> R<ExitCode> {
    let (dirs, paths) = paths()?;
    let profiles = mmo_profile::store::Store::new(dirs.clone());
    let report = profiles.compile(target, &[]).map_err(|r| {
        Fail(
            r.0.iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join("\n  "),
        )
    })?;
    let snap = dirs.snapshot_dir(&report.address);
    let read = |name: &str| -> R<Value> {
        Ok(serde_json::from_str(&std::fs::read_to_string(
            snap.join(name),
        )?)?)
    };
    let smoke = match read("smoke.json") {
        Ok(s) => s,
        Err(_) => {
            return Err(Fail(format!(
                "profile {} has no smoke.toml, so there is nothing to run",
                report.profile_id
            )));
        }
    };
    let profile = read("profile.json")?;
    let catalog = read("catalog.json")?;
    let tasks = smoke["tasks"].as_array().cloned().unwrap_or_default();
    for (i, t) in tasks.iter().enumerate() {
        let role = t["agent"].as_str().unwrap_or("");
        let model = profile["agents"][role]["model"].as_str().unwrap_or("");
        if let Err(why) = reachable(&catalog, model) {
            let msg = format!(
                "smoke needs a live model, and task {i} (role `{role}`, model `{model}`) has none reachable: {why}. Smoke tests consume live provider access; the offline tests are `cargo nextest run --workspace`."
            );
            if json_out {
                print(&json!({"ok": false, "reachable": false, "error": msg}).to_string());
            } else {
                let _ = std::io::Write::write_all(
                    &mut std::io::stderr(),
                    format!("error: {msg}\n").as_bytes(),
                );
            }
            return Ok(ExitCode::from(2));
        }
    }
    let store = paths.open()?;
    let mut results = Vec::new();
    for (i, t) in tasks.iter().enumerate() {
        let started = Instant::now();
        let outcome = run_task(&paths, &store, target, workspace.clone(), &profile, t);
        let mut r = match outcome {
            Ok(v) => v,
            Err(Fail(why)) => json!({"passed": false, "reason": why}),
        };
        r["task"] = json!(i);
        r["agent"] = t["agent"].clone();
        r["backend"] = t["backend"].clone();
        r["seconds"] = json!(started.elapsed().as_secs_f64());
        if !json_out {
            print(&format!(
                "task {i} [{} via {}]: {} {}",
                t["agent"].as_str().unwrap_or(""),
                t["backend"].as_str().unwrap_or(""),
                if r["passed"] == json!(true) {
                    "PASS"
                } else {
                    "FAIL"
                },
                r["reason"].as_str().unwrap_or("")
            ));
        }
        results.push(r);
    }
    let passed = results.iter().all(|r| r["passed"] == json!(true));
    if json_out {
        print(&json!({"ok": passed, "profile": report.profile_id, "snapshot": report.address, "tasks": results}).to_string());
    }
    Ok(if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Whether a model's route can be reached: its endpoint accepts a connection, and the
/// credential variable it names is set.
fn reachable(catalog: &Value, model: &str) -> Result<(), String> {
    let route_id = model.split_once("__").map(|(r, _)| r).unwrap_or("");
    let route = &catalog["routes"][route_id];
    if let Some(var) = route["credential_env"].as_str()
        && std::env::var_os(var).is_none_or(|v| v.is_empty())
    {
        return Err(format!(
            "route `{route_id}` takes its credential from ${var}, which is not set"
        ));
    }
    let Some(url) = route["base_url"].as_str() else {
        if route["provider"] == "openai" && std::env::var_os("OPENAI_API_KEY").is_none() {
            return Err(format!(
                "route `{route_id}` is Codex's built-in `openai` provider, and OPENAI_API_KEY is not set"
            ));
        }
        return Ok(());
    };
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    let authority = rest.split('/').next().unwrap_or("");
    let default_port = if url.starts_with("https") { 443 } else { 80 };
    let addr = if authority.contains(':') {
        authority.to_string()
    } else {
        format!("{authority}:{default_port}")
    };
    let addrs = addr
        .to_socket_addrs()
        .map_err(|e| format!("route `{route_id}` at {url}: {e}"))?;
    for a in addrs {
        if TcpStream::connect_timeout(&a, Duration::from_secs(3)).is_ok() {
            return Ok(());
        }
    }
    Err(format!("route `{route_id}` at {url} refuses connections"))
}

/// Whether every required `server.tool` had a successful direct call in a run's events.
fn required_tools(store: &Store, run: &str, required: &[Value]) -> Value {
    let kinds = ["mcpToolCall".to_string()];
    let calls = store
        .events(run, 0, usize::MAX, Some(&kinds))
        .unwrap_or_default();
    let mut out = serde_json::Map::new();
    for name in required.iter().filter_map(Value::as_str) {
        let (server, tool) = name.split_once('.').unwrap_or((name, ""));
        let ok = calls.iter().any(|e| {
            let b: Value = serde_json::from_str(&e.body).unwrap_or(Value::Null);
            b["server"] == server
                && b["tool"] == tool
                && b["status"] == "completed"
                && b["error"].is_null()
        });
        out.insert(name.to_string(), json!(ok));
    }
    Value::Object(out)
}

fn run_task(
    paths: &mmo_runtime::session::Paths,
    store: &Store,
    target: &str,
    workspace: Option<PathBuf>,
    profile: &Value,
    t: &Value,
) -> R<Value> {
    let wall = Duration::from_secs(t["wall_timeout_seconds"].as_u64().unwrap_or(300));
    let deadline = Instant::now() + wall;
    let required = t["required_mcp_tools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    match t["backend"].as_str().unwrap_or("") {
        "root" => {
            let mut task = t["task"].as_str().unwrap_or("").to_string();
            let role = t["agent"].as_str().unwrap_or("");
            if profile["agents"][role]["execution_mode"] == "goal" {
                task.push_str(GOAL_COMPLETION);
            }
            let ended = root_session(paths, store, target, workspace, task, deadline)?;
            let tools = required_tools(store, &ended.root, &required);
            let passed = ended.state == "completed" && all_true(&tools);
            let reason = if ended.timed_out {
                timeout_reason(wall)
            } else if !all_true(&tools) {
                format!("a required MCP tool had no successful direct call: {tools}")
            } else {
                format!("the root session ended {}", ended.state)
            };
            Ok(
                json!({"passed": passed, "reason": reason, "session": ended.session, "required_mcp_tools": tools}),
            )
        }
        "native" => {
            // A native role runs only as a Codex custom agent inside the root's host: the root
            // is asked to delegate the task to it. The behavioural marker is the runtime's
            // observation of that delegation (native.rs): a native run of this role under the
            // root whose turn completed.
            let role = t["agent"].as_str().unwrap_or("");
            let native_name = profile["agents"][role]["native_name"]
                .as_str()
                .ok_or_else(|| Fail(format!("role `{role}` has no native_name")))?;
            let root_role = profile["root"].as_str().unwrap_or("");
            let mut task = format!(
                "Smoke task for the native role `{role}`: delegate it to the Codex custom agent `{native_name}` with spawn_agent (agent_type = \"{native_name}\"), wait for its answer with wait_agent, and report that answer. Do not do the task yourself.\n\nTask: {}",
                t["task"].as_str().unwrap_or("")
            );
            if profile["agents"][root_role]["execution_mode"] == "goal" {
                task.push_str(GOAL_COMPLETION);
            }
            let ended = root_session(paths, store, target, workspace, task, deadline)?;
            let natives: Vec<_> = store
                .runs(&ended.session)?
                .into_iter()
                .filter(|r| r.is_native() && r.role == role)
                .collect();
            let marker = natives.iter().find(|r| r.state == JobState::Completed);
            let tools = match marker {
                Some(r) => required_tools(store, &r.run_ref, &required),
                None => required_tools(store, "", &required),
            };
            let passed = ended.state == "completed" && marker.is_some() && all_true(&tools);
            let reason = if ended.timed_out {
                timeout_reason(wall)
            } else if marker.is_none() {
                match natives.first() {
                    Some(r) => format!(
                        "the native run of `{role}` ({}) ended {}, not completed",
                        r.run_ref, r.state
                    ),
                    None => format!(
                        "the root never delegated to the custom agent `{native_name}`: no native run of role `{role}` was observed"
                    ),
                }
            } else if !all_true(&tools) {
                format!("a required MCP tool had no successful direct call: {tools}")
            } else {
                format!(
                    "the native run {} completed; the root session ended {}",
                    marker.map(|r| r.run_ref.as_str()).unwrap_or(""),
                    ended.state
                )
            };
            Ok(json!({
                "passed": passed,
                "reason": reason,
                "session": ended.session,
                "native_run": marker.map(|r| r.run_ref.clone()),
                "required_mcp_tools": tools,
            }))
        }
        "mcp" => {
            let (session, _) = start(target, &[], workspace, None)?;
            let socket = paths.socket(&session.id);
            let mut args = json!({"role": t["agent"]});
            for k in ["task", "task_kind", "literal_task"] {
                if !t[k].is_null() {
                    args[k] = t[k].clone();
                }
            }
            if t["write_scope"].as_array().is_some_and(|a| !a.is_empty()) {
                args["write_scope"] = t["write_scope"].clone();
            }
            let spawned = tool(&socket, "agents_spawn", args)?;
            let job = spawned["job"].as_str().unwrap_or("").to_string();
            let run = spawned["agent_run_ref"].as_str().unwrap_or("").to_string();
            let mut rev = spawned["progress_revision"].as_i64().unwrap_or(0);
            // `None` until the job has reported a state.
            let mut state: Option<JobState> = None;
            let settled = |s: Option<JobState>| {
                s.is_some_and(|s| s.is_terminal() || s == JobState::Suspended)
            };
            while Instant::now() < deadline && !settled(state) {
                let left = deadline
                    .saturating_duration_since(Instant::now())
                    .as_secs()
                    .clamp(1, 30);
                let w = tool(
                    &socket,
                    "agents_wait",
                    json!({"after_revision": {job.clone(): rev}, "timeout_seconds": left}),
                )?;
                rev = w["jobs"][&job]["progress_revision"].as_i64().unwrap_or(rev);
                state = w["jobs"][&job]["state"]
                    .as_str()
                    .and_then(|s| s.parse().ok());
            }
            let timed_out = !state.is_some_and(JobState::is_terminal);
            let tools = required_tools(store, &run, &required);
            // At the wall limit the unfinished worker is cancelled (its partial evidence kept).
            let _ = call(&socket, "session/stop", json!({"cancel": timed_out}));
            let _ = wait_terminal(store, &session.id);
            if timed_out {
                state = Some(store.run(&run)?.state);
            }
            let tools_ok = all_true(&tools);
            let passed = state == Some(JobState::Completed) && tools_ok && !timed_out;
            let reason = if timed_out {
                format!(
                    "the wall timeout of {} s passed; the worker was cancelled with its partial evidence kept",
                    wall.as_secs()
                )
            } else if !tools_ok {
                format!("a required MCP tool had no successful direct call: {tools}")
            } else {
                format!(
                    "the job ended {}",
                    state.map_or("starting", JobState::as_str)
                )
            };
            Ok(
                json!({"passed": passed, "reason": reason, "session": session.id, "job": job, "required_mcp_tools": tools}),
            )
        }
        other => Ok(
            json!({"passed": false, "reason": format!("backend `{other}` is not a smoke backend (root, mcp or native)")}),
        ),
    }
}

/// How a smoke task's root session ended.
struct RootEnded {
    session: String,
    root: String,
    state: String,
    timed_out: bool,
}

/// Runs a session with `task` as its root's task until it ends or `deadline` passes; at the
/// wall limit the harness detaches (it never attached) and stops the session through the normal
/// lifecycle, partial evidence kept.
fn root_session(
    paths: &mmo_runtime::session::Paths,
    store: &Store,
    target: &str,
    workspace: Option<PathBuf>,
    task: String,
    deadline: Instant,
) -> R<RootEnded> {
    let (session, _) = start(target, &[], workspace, Some(task))?;
    let mut state = String::new();
    while Instant::now() < deadline {
        state = load(store, &session.id)?.state;
        if is_terminal_session(&state) || state == "suspended" {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let timed_out = !is_terminal_session(&state);
    if timed_out {
        let _ = call(&paths.socket(&session.id), "session/stop", json!({}));
        state = wait_terminal(store, &session.id)?;
    }
    let root = store
        .runs(&session.id)?
        .into_iter()
        .find(|r| r.parent.is_none())
        .ok_or_else(|| Fail("the session has no root run".into()))?;
    Ok(RootEnded {
        session: session.id,
        root: root.run_ref,
        state,
        timed_out,
    })
}

fn all_true(tools: &Value) -> bool {
    tools
        .as_object()
        .is_none_or(|m| m.values().all(|v| *v == json!(true)))
}

fn timeout_reason(wall: Duration) -> String {
    format!(
        "the wall timeout of {} s passed; the session was stopped",
        wall.as_secs()
    )
}

fn wait_terminal(store: &Store, id: &str) -> R<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = store.session(id)?;
        if is_terminal_session(&s.state) || Instant::now() > deadline {
            return Ok(s.state);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
