//! The scripted model behind the real Codex app-server (through `codex-app-server`): a full
//! turn, an MCP tool call with a `{{last_output/...}}` template, `outputSchema` reaching
//! `text.format`, goals, and an interrupted hanging stream. Also the binary on its own: bad
//! input and SIGTERM.
//!
//! The Codex tests need `CODEX_MMO_CODEX_JS=<dir>/node_modules/@openai/codex/bin/codex.js`
//! (`npm install --prefix <dir> @openai/codex@0.169.0`). Unset, they fail under CI (`CI` set)
//! and otherwise print a notice and check nothing.

use codex_app_server::{
    AppServer, CODEX_JS_VAR, CodexCommand, Event, Events, GoalStatus, InitializeParams,
    SpawnOptions, ThreadGoalSetParams, ThreadStartParams,
};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_scripted-model");
const T: Duration = Duration::from_secs(90);

fn codex() -> Option<CodexCommand> {
    let Some(js) = std::env::var_os(CODEX_JS_VAR).filter(|v| !v.is_empty()) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "{CODEX_JS_VAR} is unset under CI: install @openai/codex@0.169.0 and export it"
        );
        let _ = writeln!(
            std::io::stderr().lock(),
            "NOTICE: scripted-model with_codex did not run: set {CODEX_JS_VAR} to \
             <dir>/node_modules/@openai/codex/bin/codex.js"
        );
        return None;
    };
    assert!(
        Path::new(&js).is_file(),
        "{CODEX_JS_VAR}={} is not a file",
        js.to_string_lossy()
    );
    Some(CodexCommand::node(js))
}

/// A running `scripted-model`, killed on drop.
struct Model {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Model {
    fn start(dir: &Path, script: Value) -> Model {
        let script_path = dir.join("script.json");
        std::fs::write(&script_path, script.to_string()).unwrap();
        let port_file = dir.join("port");
        let log = dir.join("model.jsonl");
        let child = Command::new(BIN)
            .arg("--script")
            .arg(&script_path)
            .args(["--port", "0", "--port-file"])
            .arg(&port_file)
            .arg("--log")
            .arg(&log)
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let port = loop {
            if let Some(p) = std::fs::read_to_string(&port_file)
                .ok()
                .and_then(|s| s.trim().parse().ok())
            {
                break p;
            }
            assert!(Instant::now() < deadline, "scripted-model wrote no port");
            std::thread::sleep(Duration::from_millis(20));
        };
        Model { child, port, log }
    }

    /// The logged requests, in order (whole lines only: the model may be writing one).
    fn requests(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let whole = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
        whole
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .collect()
    }

    fn assert_never_exhausted(&self) {
        for r in self.requests() {
            assert_eq!(r["exhausted"], false, "script exhausted: {}", r["actor"]);
            assert!(r["error"].is_null(), "script error: {}", r["error"]);
        }
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Codex {
    server: AppServer,
    events: Events,
    thread: String,
}

/// An app-server in a fresh CODEX_HOME pointed at `model`, initialized, with a thread.
async fn codex_with(cmd: CodexCommand, dir: &Path, model: &Model, extra: &[String]) -> Codex {
    let home = dir.join("home");
    let work = dir.join("work");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    let mut opts = SpawnOptions::new(cmd, &home)
        .cwd(&work)
        .env("LOCAL_KEY", "scripted")
        .config("model_provider=\"local\"")
        .config(format!(
            "model_providers.local={{name=\"local\", base_url=\"http://127.0.0.1:{}/v1\", \
             wire_api=\"responses\", env_key=\"LOCAL_KEY\"}}",
            model.port
        ))
        .config("model=\"scripted\"")
        .config("approval_policy=\"never\"")
        .config("sandbox_mode=\"read-only\"")
        .stderr_log(dir.join("codex-stderr.log"))
        .request_timeout(T);
    for c in extra {
        opts = opts.config(c.clone());
    }
    let server = AppServer::spawn(opts).unwrap();
    let events = server.events().unwrap();
    server
        .initialize(&InitializeParams::new("scripted-model-test", "0"))
        .await
        .unwrap();
    let thread = server
        .thread_start(&ThreadStartParams {
            cwd: Some(work.display().to_string()),
            ..Default::default()
        })
        .await
        .unwrap();
    Codex {
        server,
        events,
        thread,
    }
}

/// Collects events until `turn/completed` of `turn`; returns them and the completed turn.
async fn until_turn_completed(events: &mut Events, turn: &str) -> (Vec<Event>, Value) {
    let mut seen = vec![];
    let deadline = Instant::now() + T;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let e = tokio::time::timeout(left, events.recv())
            .await
            .unwrap_or_else(|_| panic!("no turn/completed within {T:?}; saw {seen:#?}"))
            .expect("the app-server is running");
        if let Some(p) = e.notification("turn/completed")
            && p["turn"]["id"] == turn
        {
            let turn = p["turn"].clone();
            return (seen, turn);
        }
        if let Event::Exited { .. } = e {
            panic!("the app-server exited: {seen:#?}");
        }
        seen.push(e);
    }
}

fn completed_items<'a>(events: &'a [Event], kind: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter_map(|e| e.notification("item/completed"))
        .map(|p| &p["item"])
        .filter(|i| i["type"] == kind)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_turn_shows_the_scripted_reply() {
    let Some(cmd) = codex() else { return };
    let dir = tempfile::tempdir().unwrap();
    let model = Model::start(
        dir.path(),
        json!({"usage": {"input_tokens": 321, "output_tokens": 12},
               "actors": [{"name": "root", "match": "CYCLE-TASK-7",
                           "steps": [[{"say": "hello from the script"}]]}]}),
    );
    let mut c = codex_with(cmd, dir.path(), &model, &[]).await;
    let turn = c
        .server
        .turn_start(&c.thread, "Please do CYCLE-TASK-7.", None)
        .await
        .unwrap();
    let (events, done) = until_turn_completed(&mut c.events, &turn).await;
    assert_eq!(done["status"], "completed", "{done}");
    let msgs = completed_items(&events, "agentMessage");
    assert_eq!(msgs.len(), 1, "{events:#?}");
    assert_eq!(msgs[0]["text"], "hello from the script");
    let usage = events
        .iter()
        .find_map(|e| e.notification("thread/tokenUsage/updated"))
        .expect("token usage is reported");
    assert_eq!(usage["tokenUsage"]["last"]["inputTokens"], 321);
    assert_eq!(usage["tokenUsage"]["last"]["outputTokens"], 12);

    let reqs = model.requests();
    assert_eq!(reqs.len(), 1, "{reqs:#?}");
    assert_eq!(reqs[0]["actor"], "root");
    assert_eq!(reqs[0]["body"]["stream"], true);
    model.assert_never_exhausted();
    c.server.shutdown().await;
}

/// A stdio MCP server with one tool, `agents_spawn`: each call is appended to `$MCP_LOG`
/// and answered with a new job id as JSON text (the second call: as structured content).
const MESH_MCP: &str = r#"
import json, os, sys
log = open(os.environ["MCP_LOG"], "a")
calls = 0
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    if m["method"] == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
             "serverInfo": {"name": "mesh", "version": "0"}}
    elif m["method"] == "tools/list":
        r = {"tools": [{"name": "agents_spawn", "description": "Spawn an agent.",
                        "inputSchema": {"type": "object", "properties": {"task": {"type": "string"}}}}]}
    elif m["method"] == "tools/call":
        calls += 1
        log.write(json.dumps(m["params"]) + "\n"); log.flush()
        r = {"content": [{"type": "text", "text": json.dumps({"job_id": "job-%d" % calls})}]}
        if calls == 2:
            r = {"content": [{"type": "text", "text": "spawned"}],
                 "structuredContent": {"job_id": "job-%d" % calls}}
    else:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "no"}}) + "\n")
        sys.stdout.flush()
        continue
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}) + "\n")
    sys.stdout.flush()
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_issued_mcp_call_and_a_template_from_its_output() {
    let Some(cmd) = codex() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mcp = dir.path().join("mesh_mcp.py");
    std::fs::write(&mcp, MESH_MCP).unwrap();
    let mcp_log = dir.path().join("mcp-calls.jsonl");
    let model = Model::start(
        dir.path(),
        json!({"actors": [{"name": "root", "match": "SPAWN-TASK", "steps": [
            {"call": {"name": "mcp__mmo_mesh__agents_spawn", "arguments": {"task": "first"}}},
            {"call": {"name": "mcp__mmo_mesh__agents_spawn",
                      "arguments": {"task": "after {{last_output/job_id}}"}}},
            {"call": {"name": "mcp__mmo_mesh__agents_spawn",
                      "arguments": {"task": "{{last_output/job_id}}"}}},
            {"say": "spawned"},
        ]}]}),
    );
    let server_cfg = format!(
        "mcp_servers.mmo_mesh={{command=\"python3\", args=[{:?}], env={{MCP_LOG={:?}}}, \
         default_tools_approval_mode=\"approve\"}}",
        mcp.display().to_string(),
        mcp_log.display().to_string()
    );
    let mut c = codex_with(cmd, dir.path(), &model, &[server_cfg]).await;
    let turn = c
        .server
        .turn_start(&c.thread, "SPAWN-TASK: spawn two agents", None)
        .await
        .unwrap();
    let (events, done) = until_turn_completed(&mut c.events, &turn).await;
    assert_eq!(done["status"], "completed", "{done}");

    let calls: Vec<Value> = std::fs::read_to_string(&mcp_log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(calls.len(), 3, "the MCP server got every call: {calls:#?}");
    assert_eq!(calls[0]["name"], "agents_spawn");
    assert_eq!(calls[0]["arguments"], json!({"task": "first"}));
    assert_eq!(calls[1]["arguments"], json!({"task": "after job-1"}));
    assert_eq!(calls[2]["arguments"], json!({"task": "job-2"}));

    let tool_items = completed_items(&events, "mcpToolCall");
    assert_eq!(tool_items.len(), 3, "{events:#?}");
    assert_eq!(tool_items[0]["server"], "mmo_mesh");
    assert_eq!(tool_items[0]["status"], "completed");
    assert_eq!(
        completed_items(&events, "agentMessage")
            .last()
            .map(|m| m["text"].clone()),
        Some(json!("spawned"))
    );

    let reqs = model.requests();
    assert_eq!(reqs.len(), 4, "{reqs:#?}");
    // How Codex shows the MCP tool: a namespace `mcp__<server>` holding the bare tool name.
    let ns = reqs[0]["body"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["type"] == "namespace" && t["name"] == "mcp__mmo_mesh")
        .unwrap_or_else(|| panic!("no mcp__mmo_mesh namespace in {}", reqs[0]["body"]["tools"]));
    assert_eq!(ns["tools"][0]["name"], "agents_spawn");
    assert_eq!(ns["tools"][0]["type"], "function");
    // How the result comes back: the call echoed, then its output as content parts.
    let input = reqs[1]["body"]["input"].as_array().unwrap();
    let call = input
        .iter()
        .rfind(|i| i["type"] == "function_call")
        .unwrap();
    assert_eq!(call["name"], "agents_spawn");
    assert_eq!(call["namespace"], "mcp__mmo_mesh");
    let out = input.last().unwrap();
    assert_eq!(out["type"], "function_call_output");
    assert_eq!(out["call_id"], call["call_id"]);
    let texts: Vec<&str> = out["output"]
        .as_array()
        .unwrap_or_else(|| panic!("content parts: {out}"))
        .iter()
        .map(|p| p["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts.last(), Some(&r#"{"job_id": "job-1"}"#), "{out}");
    // Structured content comes as one string after a wall-time header.
    let out = reqs[2]["body"]["input"].as_array().unwrap().last().unwrap();
    let text = out["output"]
        .as_str()
        .unwrap_or_else(|| panic!("a string: {out}"));
    assert!(text.starts_with("Wall time:"), "{text}");
    assert!(text.ends_with("Output:\n{\"job_id\":\"job-2\"}"), "{text}");
    model.assert_never_exhausted();
    c.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_output_schema_reaches_the_model_as_text_format() {
    let Some(cmd) = codex() else { return };
    let dir = tempfile::tempdir().unwrap();
    let model = Model::start(
        dir.path(),
        json!({"actors": [{"name": "root", "match": "SCHEMA-TASK",
                           "steps": [{"say": "{\"verdict\":\"ok\"}"}]}]}),
    );
    let mut c = codex_with(cmd, dir.path(), &model, &[]).await;
    let schema = json!({"type": "object", "properties": {"verdict": {"type": "string"}},
                        "required": ["verdict"], "additionalProperties": false});
    let turn = c
        .server
        .turn_start(&c.thread, "SCHEMA-TASK", Some(schema.clone()))
        .await
        .unwrap();
    let (events, done) = until_turn_completed(&mut c.events, &turn).await;
    assert_eq!(done["status"], "completed");
    assert_eq!(
        completed_items(&events, "agentMessage")[0]["text"],
        "{\"verdict\":\"ok\"}"
    );
    let reqs = model.requests();
    let format = &reqs[0]["body"]["text"]["format"];
    assert_eq!(format["type"], "json_schema", "{format}");
    assert_eq!(format["schema"], schema);
    assert_eq!(format["strict"], true);
    model.assert_never_exhausted();
    c.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_stream_is_interrupted() {
    let Some(cmd) = codex() else { return };
    let dir = tempfile::tempdir().unwrap();
    let model = Model::start(
        dir.path(),
        json!({"actors": [{"name": "root", "match": "HANG-TASK",
                           "steps": [[{"delay_ms": 50}, {"hang": true}]]}]}),
    );
    let mut c = codex_with(cmd, dir.path(), &model, &[]).await;
    let turn = c
        .server
        .turn_start(&c.thread, "HANG-TASK", None)
        .await
        .unwrap();
    let deadline = Instant::now() + T;
    while model.requests().is_empty() {
        assert!(Instant::now() < deadline, "the model got no request");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    c.server.turn_interrupt(&c.thread, &turn).await.unwrap();
    let (_, done) = until_turn_completed(&mut c.events, &turn).await;
    assert_eq!(done["status"], "interrupted", "{done}");
    model.assert_never_exhausted();
    c.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_goal_is_set_read_and_cleared() {
    let Some(cmd) = codex() else { return };
    let dir = tempfile::tempdir().unwrap();
    // Setting an active goal starts a turn by itself; the script answers it once.
    let model = Model::start(
        dir.path(),
        json!({"actors": [{"name": "goal", "match": "active thread goal",
                           "steps": [{"say": "working on it"}]}]}),
    );
    let mut c = codex_with(cmd, dir.path(), &model, &[]).await;
    let goal = c
        .server
        .thread_goal_set(&ThreadGoalSetParams {
            thread_id: c.thread.clone(),
            objective: Some("GOAL-OBJECTIVE-1".into()),
            status: None,
            // Small: the first answer (120 tokens) uses it up, so Codex does not go on and
            // on continuing the goal.
            token_budget: Some(100),
        })
        .await
        .unwrap();
    assert_eq!(goal.objective, "GOAL-OBJECTIVE-1");
    assert_eq!(goal.status, GoalStatus::Active);
    assert_eq!(goal.token_budget, Some(100));
    // The goal's update and the turn it starts, in whichever order they come.
    let (mut updated, mut turn) = (None, None);
    while updated.is_none() || turn.is_none() {
        match c
            .events
            .wait_for(T, |e| matches!(e, Event::Notification { .. }))
            .await
            .unwrap()
        {
            Event::Notification { method, params } if method == "thread/goal/updated" => {
                updated = Some(params);
            }
            Event::Notification { method, params } if method == "turn/started" => {
                turn = params["turn"]["id"].as_str().map(str::to_owned);
            }
            _ => {}
        }
    }
    assert_eq!(updated.unwrap()["goal"]["objective"], "GOAL-OBJECTIVE-1");
    let turn = turn.unwrap();
    let (_, done) = until_turn_completed(&mut c.events, &turn).await;
    assert_eq!(done["status"], "completed");
    let req = &model.requests()[0];
    assert_eq!(req["actor"], "goal");
    let got = c.server.thread_goal_get(&c.thread).await.unwrap().unwrap();
    assert_eq!(got.objective, "GOAL-OBJECTIVE-1");
    assert!(c.server.thread_goal_clear(&c.thread).await.unwrap());
    assert_eq!(c.server.thread_goal_get(&c.thread).await.unwrap(), None);
    c.server.shutdown().await;
}

fn http(port: u16, request: &[u8]) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

fn post(port: u16, body: &str) -> String {
    http(
        port,
        format!(
            "POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
             Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
}

#[test]
fn bad_requests_are_refused_and_the_model_goes_on_then_exits_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = Model::start(
        dir.path(),
        json!({"actors": [{"name": "a", "match": "HELLO", "steps": [{"say": "hi"}]}]}),
    );
    assert!(post(model.port, "{not json").starts_with("HTTP/1.1 400"));
    assert!(post(model.port, "[1]").starts_with("HTTP/1.1 400"));
    let too_big = format!(
        "POST /v1/responses HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
        40 * 1024 * 1024
    );
    assert!(http(model.port, too_big.as_bytes()).starts_with("HTTP/1.1 413"));
    assert!(
        http(
            model.port,
            b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .starts_with("HTTP/1.1 404")
    );

    let answer = post(model.port, r#"{"input": "HELLO"}"#);
    assert!(answer.contains("text/event-stream"), "{answer}");
    assert!(answer.contains("event: response.completed"), "{answer}");
    assert!(answer.contains(r#""delta":"hi""#), "{answer}");
    let answer = post(model.port, r#"{"input": "HELLO"}"#);
    assert!(
        answer.contains("scripted-model: script exhausted for a"),
        "{answer}"
    );
    let answer = post(model.port, r#"{"input": "nobody"}"#);
    assert!(
        answer.contains("scripted-model: script exhausted for"),
        "{answer}"
    );

    let log = model.requests();
    let exhausted: Vec<bool> = log
        .iter()
        .filter(|r| r.get("body").is_some())
        .map(|r| r["exhausted"].as_bool().unwrap())
        .collect();
    assert_eq!(exhausted, [false, true, true]);
    assert!(log.iter().any(|r| r["status"] == 400));

    let ok = Command::new("kill")
        .args(["-TERM", &model.child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = model.child.try_wait().unwrap() {
            assert!(status.success(), "{status:?}");
            break;
        }
        assert!(Instant::now() < deadline, "still running after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
}
