//! Agents the daemon runs: real `codex app-server` workers (npm `@openai/codex@0.169.0`, found
//! through `CODEX_MMO_CODEX_JS`) driven by a scripted model process speaking the Responses API,
//! each in its own git worktree with `vox mcp` as its MCP server under the agent's credential.

mod common;
use common::*;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const PROFILE: &str = "knowledge,orchestrator";

/// The scripted model: a process answering `POST /v1/responses` from `script`.
struct Model {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Model {
    fn start(dir: &std::path::Path, script: &Value) -> Model {
        let bin = PathBuf::from(VOX).with_file_name("scripted-model");
        assert!(bin.is_file(), "{} is not built", bin.display());
        let script_path = dir.join("script.json");
        std::fs::write(&script_path, serde_json::to_vec_pretty(script).unwrap()).unwrap();
        let port_file = dir.join("model.port");
        let log = dir.join("model.jsonl");
        let child = Command::new(bin)
            .arg("--script")
            .arg(&script_path)
            .arg("--port-file")
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
                .and_then(|t| t.trim().parse().ok())
            {
                break p;
            }
            assert!(
                Instant::now() < deadline,
                "the scripted model did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        Model { child, port, log }
    }

    /// The requests it answered, as logged.
    fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A git workspace whose daemon runs Codex workers against `model`.
fn fleet_workspace(codex_js: &str, model: &Model, dir: &std::path::Path) -> Ws {
    let config = dir.join("codex-base.toml");
    std::fs::write(
        &config,
        format!(
            "model = \"scripted\"\nmodel_provider = \"local\"\n\n[model_providers.local]\nname = \"local\"\nbase_url = \"http://127.0.0.1:{}/v1\"\nwire_api = \"responses\"\nenv_key = \"LOCAL_KEY\"\n",
            model.port
        ),
    )
    .unwrap();
    let ws = Ws::new()
        .with_env("CODEX_MMO_CODEX_JS", codex_js)
        .with_env("VOX_FLEET_CODEX_CONFIG", config.to_str().unwrap())
        .with_env("LOCAL_KEY", "scripted")
        .with_env("VOX_DAEMON_IDLE_SECS", "0");
    std::fs::create_dir_all(ws.root().join("src")).unwrap();
    std::fs::write(ws.root().join("src/lib.rs"), "pub fn f() {}\n").unwrap();
    git(ws.root(), &["init", "-q"]);
    git(ws.root(), &["add", "."]);
    git(ws.root(), &["commit", "-q", "-m", "base"]);
    ws
}

/// A tool call of the vox MCP server, as the scripted model writes it.
fn vox(tool: &str, args: Value) -> Value {
    json!({"call": {"name": format!("mcp__vox__{tool}"), "arguments": args}})
}

/// Polls `f` until it says yes, or fails after `limit` naming `what`.
async fn until(limit: Duration, what: &str, mut f: impl AsyncFnMut() -> Option<Value>) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn task_state(op: &Client, id: &Value) -> Value {
    ok(op, "vox_task_status", json!({"task_id": id})).await["task"].clone()
}

#[tokio::test]
async fn a_codex_worker_takes_its_task_and_a_killed_one_is_requeued_and_restarted() {
    let Some(codex_js) = codex_js() else { return };
    let dir = tempfile::tempdir().unwrap();
    // Each turn: read the queue, then complete the first (running) task. The first turn hangs
    // instead, so that its worker can be killed mid-task.
    let script = json!({"actors": [{"name": "w1", "match": "Agent w1:", "steps": [
        [{"hang": true}],
        vox("vox_queue_status", json!({})),
        vox("vox_complete_task", json!({"task_id": "{{last_output/queues/0/tasks/0/id}}", "result": "built by w1"})),
        [{"say": "done"}]
    ]}]});
    let model = Model::start(dir.path(), &script);
    let ws = fleet_workspace(&codex_js, &model, dir.path());
    let op = ws.client(&["--profile", PROFILE]).await;
    let spawned = ok(
        &op,
        "vox_spawn_agent",
        json!({"agent_id": "w1", "runner": "codex", "profile": "orchestrator"}),
    )
    .await;
    assert_eq!(spawned["agent"]["runner"], "codex", "{spawned}");
    assert!(
        ws.root()
            .join(".vox/agents/w1/worktree/src/lib.rs")
            .is_file()
    );
    let t = ok(&op, "vox_submit_task", json!({"title": "build the crate"})).await;
    let task = t["task"]["id"].clone();

    // The worker starts the task, and its model hangs: kill the app-server.
    let pid = until(
        Duration::from_secs(60),
        "the worker to run the task",
        async || {
            let s = ok(&op, "vox_agent_status", json!({"agent_id": "w1"})).await;
            let w = &s["agents"][0]["worker"];
            (w["state"] == "working" && !model.requests().is_empty()).then(|| w["pid"].clone())
        },
    )
    .await;
    assert_eq!(task_state(&op, &task).await["state"], "running");
    // The app-server leads its own process group (node and the native codex under it): the
    // whole worker dies, as in a crash.
    unsafe { libc_kill(-(pid.as_i64().unwrap() as i32)) };

    // Requeued, then taken again by a restarted worker, which completes it.
    let deadline = Instant::now() + Duration::from_secs(90);
    let done = loop {
        let t = task_state(&op, &task).await;
        if t["state"] == "completed" {
            break t;
        }
        if Instant::now() > deadline {
            let s = ok(&op, "vox_agent_status", json!({"agent_id": "w1"})).await;
            let log = std::fs::read_to_string(ws.root().join(".vox/agents/w1/app-server.log"))
                .unwrap_or_default();
            let daemon =
                std::fs::read_to_string(ws.root().join(".vox/daemon.log")).unwrap_or_default();
            let reqs: Vec<Value> = model
                .requests()
                .iter()
                .map(|r| json!({"actor": r["actor"], "step": r["step"], "error": r["error"], "exhausted": r["exhausted"]}))
                .collect();
            panic!(
                "the task did not complete: {t}\nagent: {s}\nmodel: {reqs:?}\napp-server log (tail): {}\ndaemon log (tail): {}",
                &log[log.len().saturating_sub(3000)..],
                &daemon[daemon.len().saturating_sub(3000)..]
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(done["result"], "built by w1", "{done}");
    assert_eq!(done["attempts"], 2, "{done}");
    let ev = ok(&op, "vox_poll_events", json!({"subject": "task"})).await;
    let kinds: Vec<&str> = ev["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "submitted",
            "assigned",
            "running",
            "queued",
            "assigned",
            "running",
            "completed"
        ],
        "{ev}"
    );
    // Retiring the agent ends its worker.
    ok(&op, "vox_retire_agent", json!({"agent_id": "w1"})).await;
    until(Duration::from_secs(20), "the worker to stop", async || {
        let s = ok(&op, "vox_agent_status", json!({"agent_id": "w1"})).await;
        (s["agents"][0]["worker"]["state"] == "stopped").then_some(Value::Null)
    })
    .await;
    op.cancel().await.unwrap();
}

unsafe extern "C" {
    #[link_name = "kill"]
    fn c_kill(pid: i32, sig: i32) -> i32;
}

/// SIGKILL to `pid`.
unsafe fn libc_kill(pid: i32) {
    unsafe {
        c_kill(pid, 9);
    }
}
