//! Agents the daemon runs: real `codex app-server` workers (npm `@openai/codex@0.169.0`, found
//! through `CODEX_MMO_CODEX_JS`) driven by a scripted model process speaking the Responses API,
//! each in its own git worktree with `vox mcp` as its MCP server under the agent's credential.

mod common;
use common::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const PROFILE: &str = "knowledge,orchestrator";

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

/// Polls `f` until it says yes, or fails after `limit` naming `what` and what the model was
/// asked (which actor, which step of its script).
async fn until(
    model: &Model,
    limit: Duration,
    what: &str,
    mut f: impl AsyncFnMut() -> Option<Value>,
) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        if Instant::now() > deadline {
            let asked: Vec<Value> = model
                .requests()
                .iter()
                .map(|r| json!([r["actor"], r["step"], r["exhausted"], r["error"]]))
                .collect();
            panic!(
                "timed out waiting for {what}; the model was asked (actor, step, exhausted, error): {asked:?}"
            );
        }
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
        &model,
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
    // SAFETY: `libc_kill` is kill(2) on plain integers; the group is the worker this test's
    // fleet started (its pid from `vox_agent_status`).
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
    until(
        &model,
        Duration::from_secs(20),
        "the worker to stop",
        async || {
            let s = ok(&op, "vox_agent_status", json!({"agent_id": "w1"})).await;
            (s["agents"][0]["worker"]["state"] == "stopped").then_some(Value::Null)
        },
    )
    .await;
    op.cancel().await.unwrap();
}

unsafe extern "C" {
    #[link_name = "kill"]
    fn c_kill(pid: i32, sig: i32) -> i32;
}

/// SIGKILL to `pid`.
///
/// # Safety
/// `kill` is declared by hand above, so calling it is unsafe; it has no memory preconditions,
/// but the caller must mean to kill `pid` (negative: a whole process group).
unsafe fn libc_kill(pid: i32) {
    // SAFETY: `c_kill` matches kill(2)'s C signature `int kill(pid_t, int)` (pid_t is i32 on
    // Linux), and it takes only integers.
    unsafe {
        c_kill(pid, 9);
    }
}

/// Fails unless every process working under `dir` (a worker, its `vox mcp`) is gone within 5 s
/// of the daemon's stop.
fn assert_no_worker_left(dir: &std::path::Path) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = pids_in(dir);
        if left.is_empty() {
            return;
        }
        if Instant::now() > deadline {
            let cmds: Vec<String> = left
                .iter()
                .map(|p| {
                    String::from_utf8_lossy(
                        &std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default(),
                    )
                    .replace('\0', " ")
                })
                .collect();
            panic!("workers outlived the daemon: {cmds:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Processes whose working directory is under `dir`.
fn pids_in(dir: &std::path::Path) -> Vec<u32> {
    let mut pids = vec![];
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|c| c.starts_with(dir)) {
            pids.push(pid);
        }
    }
    pids
}

fn step_task(plan: &Value, key: &str) -> Value {
    plan["plan"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["key"] == key)
        .unwrap()["task"]["id"]
        .clone()
}

/// The whole story with two real workers: a plan's DAG, a lock conflict between them, a call
/// that waits for a person's approval, a step gated by a clarification until it is answered,
/// a worker killed mid-task and its task requeued, and all of it still there after the daemon
/// restarts, with no process left behind.
#[tokio::test]
async fn two_codex_workers_run_a_plan_through_conflict_approval_clarification_and_a_crash() {
    let Some(codex_js) = codex_js() else { return };
    let dir = tempfile::tempdir().unwrap();
    let first_task = "{{first_output/queues/0/tasks/0/id}}";
    let script = json!({"actors": [
        {"name": "w1", "match": "Agent w1:", "steps": [
            // build: claim its file, remember something (waits for a person), complete.
            vox("vox_queue_status", json!({})),
            vox("vox_claim_file", json!({"path": "src/lib.rs", "task_id": "{{last_output/queues/0/tasks/0/id}}"})),
            vox("vox_memory_store", json!({"key": "build/notes", "value": "lib builds"})),
            vox("vox_complete_task", json!({"task_id": first_task, "result": "built"})),
            [{"say": "built"}],
            // ship, once the clarification is answered.
            vox("vox_queue_status", json!({})),
            vox("vox_complete_task", json!({"task_id": "{{last_output/queues/0/tasks/0/id}}", "result": "shipped"})),
            [{"say": "shipped"}]
        ]},
        {"name": "w2", "match": "Agent w2:", "steps": [
            [{"hang": true}],
            // docs, after the crash: the file w1 holds is refused, its own is granted.
            vox("vox_queue_status", json!({})),
            vox("vox_claim_file", json!({"path": "src/lib.rs"})),
            vox("vox_claim_file", json!({"path": "docs.md", "task_id": first_task})),
            vox("vox_complete_task", json!({"task_id": first_task, "result": "documented"})),
            [{"say": "documented"}]
        ]}
    ]});
    let model = Model::start(dir.path(), &script);
    let ws = fleet_workspace(&codex_js, &model, dir.path());
    let op = ws.client(&["--profile", PROFILE]).await;
    for id in ["w1", "w2"] {
        ok(
            &op,
            "vox_spawn_agent",
            json!({"agent_id": id, "runner": "codex", "profile": PROFILE}),
        )
        .await;
    }
    let plan = ok(
        &op,
        "vox_plan",
        json!({"goal": "release", "steps": [
            {"key": "build", "title": "build the library", "files": ["src/lib.rs"]},
            {"key": "docs", "title": "write the docs", "files": ["docs.md"]},
            {"key": "ship", "title": "ship it", "after": ["build", "docs"]}
        ]}),
    )
    .await;
    let (build, docs, ship) = (
        step_task(&plan, "build"),
        step_task(&plan, "docs"),
        step_task(&plan, "ship"),
    );
    let q = ok(
        &op,
        "vox_ask_clarification",
        json!({"question": "Ship to production?", "options": ["yes", "no"], "gates": [ship]}),
    )
    .await;

    // w1 holds src/lib.rs, and its memory write waits for a person.
    let approval = until(
        &model,
        Duration::from_secs(60),
        "w1's approval request",
        async || {
            let p = ok(&op, "vox_pending_approvals", json!({})).await;
            p["approvals"].as_array().unwrap().first().cloned()
        },
    )
    .await;
    assert_eq!(
        (approval["agent"].as_str(), approval["tool"].as_str()),
        (Some("w1"), Some("vox_memory_store")),
        "{approval}"
    );
    let owner = ok(&op, "vox_check_file_owner", json!({"path": "src/lib.rs"})).await;
    assert_eq!(owner["lock"]["agent"], "w1", "{owner}");

    // Meanwhile w2 hangs on docs: kill its worker.
    let pid = until(&model, Duration::from_secs(60), "w2 at work", async || {
        let s = ok(&op, "vox_agent_status", json!({"agent_id": "w2"})).await;
        let w = &s["agents"][0]["worker"];
        let asked = model.requests().iter().any(|r| r["actor"] == "w2");
        (w["state"] == "working" && asked).then(|| w["pid"].clone())
    })
    .await;
    // SAFETY: as above, kill(2) of the process group of a worker this test started.
    unsafe { libc_kill(-(pid.as_i64().unwrap() as i32)) };
    // Restarted, w2 asks for the file w1 holds while w1 waits: a conflict. Then the person
    // approves w1's call.
    let conflicts = until(
        &model,
        Duration::from_secs(60),
        "w2's refused claim",
        async || {
            let c = ok(&op, "vox_conflicts", json!({})).await;
            c["conflicts"].as_array().unwrap().first().cloned()
        },
    )
    .await;
    assert_eq!(
        (
            conflicts["path"].as_str(),
            conflicts["holder"].as_str(),
            conflicts["requester"].as_str()
        ),
        (Some("src/lib.rs"), Some("w1"), Some("w2")),
        "{conflicts}"
    );
    ok(
        &op,
        "vox_resolve_approval",
        json!({"approval_id": approval["id"], "decision": "approve"}),
    )
    .await;

    // Both finish; ship waits for the answer, then w1 ships.
    for (task, result) in [(&build, "built"), (&docs, "documented")] {
        let t = until(&model, Duration::from_secs(90), result, async || {
            let t = task_state(&op, task).await;
            (t["state"] == "completed").then_some(t)
        })
        .await;
        assert_eq!(t["result"], result, "{t}");
    }
    assert_eq!(
        task_state(&op, &docs).await["attempts"],
        2,
        "docs ran twice"
    );
    let held = ok(&op, "vox_task_status", json!({"task_id": ship})).await;
    assert_eq!(held["task"]["state"], "queued", "{held}");
    assert_eq!(held["gated_by"], json!([q["id"]]), "{held}");
    // The conflict is history once w1's task released the file.
    let past = ok(&op, "vox_conflicts", json!({"all": true})).await;
    assert_eq!(past["conflicts"][0]["active"], false, "{past}");
    ok(
        &op,
        "vox_resolve_feedback",
        json!({"id": q["id"], "action": "answer", "answer": "yes"}),
    )
    .await;
    let shipped = until(&model, Duration::from_secs(90), "ship", async || {
        let t = task_state(&op, &ship).await;
        (t["state"] == "completed").then_some(t)
    })
    .await;
    assert_eq!(
        (shipped["owner"].as_str(), shipped["result"].as_str()),
        (Some("w1"), Some("shipped"))
    );
    let notes = ok(&op, "vox_memory_recall", json!({"key": "build/notes"})).await;
    assert_eq!(notes["found"], true, "{notes}");
    assert!(
        model
            .requests()
            .iter()
            .all(|r| r["exhausted"] != true && r["error"].is_null()),
        "the model was asked more than the script says"
    );
    op.cancel().await.unwrap();

    // Durable across a restart, which starts the workers again (idle now); then nothing is
    // left running once the daemon stops.
    ws.stop_daemon();
    assert_no_worker_left(&ws.root().join(".vox/agents"));
    let op = ws.client(&["--profile", PROFILE]).await;
    let p = ok(
        &op,
        "vox_plan_status",
        json!({"plan_id": plan["plan"]["id"]}),
    )
    .await;
    assert_eq!(p["finished"], true, "{p}");
    assert_eq!(p["progress"], json!({"completed": 3}), "{p}");
    let all = ok(&op, "vox_pending_approvals", json!({"all": true})).await;
    assert_eq!(all["approvals"][0]["state"], "approved", "{all}");
    let asked = ok(&op, "vox_feedback_list", json!({"all": true})).await;
    assert_eq!(asked["clarifications"][0]["answer"], "yes", "{asked}");
    let lineage = ok(&op, "vox_agent_events", json!({"agent_id": "w2"})).await;
    assert!(!lineage["events"].as_array().unwrap().is_empty());
    op.cancel().await.unwrap();
    ws.stop_daemon();
    assert_no_worker_left(&ws.root().join(".vox/agents"));
}
