//! codex-mmo runs a team, end to end: the real `codex app-server` (npm @openai/codex@0.169.0)
//! for every agent, a scripted model process speaking the Responses API over SSE in place of
//! the hosted model, the supervisor, `mmo_mesh`, and the operator's `agent-mcp`.

mod common;

use common::review::*;
use common::{World, codex_js, sha256_file};
use serde_json::{Value, json};
use std::time::Duration;

#[test]
fn an_operator_drives_a_review_spawn_wait_page_accept() {
    let Some(js) = codex_js() else { return };
    let mut w = World::new(js);
    w.git_workspace(&[(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
    )]);
    let answer = verdict(&w);
    w.start_model(&json!({"actors": [{"name": "reviewer", "match": REVIEWER_MARK, "steps": [[{"say": answer}]]}]}));
    let pack = review_pack(&w);
    let session = w.start_session(&pack, None);
    let mut op = w.operator(&session);
    let tools = op.tool_names();
    for t in [
        "agents_spawn",
        "agents_wait",
        "agent_result",
        "agent_result_accept",
        "agent_control",
        "agent_trace",
    ] {
        assert!(tools.iter().any(|x| x == t), "{t} missing from {tools:?}");
    }
    let spawned = op.ok("agents_spawn", json!({"role": "reviewer", "task": "Review src/lib.rs for correctness.", "task_kind": "review"}));
    let job = spawned["job"].as_str().unwrap().to_string();
    assert_eq!(
        op.wait_terminal(&job, Duration::from_secs(120)),
        "completed",
        "{:#}",
        w.inspect(&session)
    );
    // Accepting before reading is refused: the lifecycle is unread → read → accepted.
    assert_eq!(
        op.refused(
            "agent_result_accept",
            json!({"job": job, "reason": "looks right"})
        ),
        "result_unread"
    );
    let r = op.ok("agent_result", json!({"job": job}));
    assert_eq!(r["disposition"], "read");
    assert_eq!(r["value"]["verdict"], "approve", "{r:#}");
    op.ok(
        "agent_result_accept",
        json!({"job": job, "reason": "evidence checks out"}),
    );
    assert_eq!(
        op.refused(
            "agent_result_reject",
            json!({"job": job, "reason": "changed my mind"})
        ),
        "state_transition"
    );
    // The model was asked with the contract's projection as the structured output format.
    let reqs = w.model_requests();
    assert!(
        reqs.iter().any(|r| r.to_string().contains("json_schema")),
        "no request carried text.format json_schema"
    );
    let trace = op.ok(
        "agent_trace",
        json!({"agent_run_ref": spawned["agent_run_ref"]}),
    );
    assert!(
        trace["records"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["kind"] == "agentMessage"),
        "{trace:#}"
    );
    let v = w.inspect(&session);
    let reviewer = v["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["role"] == "reviewer")
        .unwrap()
        .clone();
    assert_eq!(reviewer["state"], "completed");
    let o = w.run(&["stop", &session]);
    assert!(o.status.success());
    assert_eq!(w.inspect(&session)["state"], "stopped");
    // Credentials come from the environment at run time: the key's value is nowhere on disk.
    let db = std::fs::read(w.data().join("runtime/state.db")).unwrap();
    assert!(
        !db.windows(8).any(|x| x == b"test-key"),
        "the state store holds a credential"
    );
    let mut stack = vec![w.data()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "toml" || x == "json") {
                assert!(
                    !std::fs::read_to_string(&p)
                        .unwrap_or_default()
                        .contains("test-key"),
                    "{} holds a credential",
                    p.display()
                );
            }
        }
    }
}

#[test]
fn admission_refusals_name_the_limit() {
    let Some(js) = codex_js() else { return };
    let mut w = World::new(js);
    w.git_workspace(&[(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
    )]);
    w.start_model(&json!({"actors": [{"name": "reviewer", "match": REVIEWER_MARK, "steps": [[{"hang": true}]]}]}));
    let pack = review_pack(&w);
    let session = w.start_session(&pack, None);
    let mut op = w.operator(&session);
    assert_eq!(op.refused("agents_spawn", json!({"role": "reviewer", "task": "Review src/lib.rs please.", "task_kind": "implementation"})), "admission_task_kind");
    assert_eq!(
        op.refused(
            "agents_spawn",
            json!({"role": "reviewer", "task": "short", "task_kind": "review"})
        ),
        "admission_task_length"
    );
    assert_eq!(
        op.refused(
            "agents_spawn",
            json!({"role": "lead", "task": "Review src/lib.rs please.", "task_kind": "review"})
        ),
        "admission_root"
    );
    assert_eq!(
        op.refused(
            "agents_spawn",
            json!({"role": "nobody", "task": "Review src/lib.rs please.", "task_kind": "review"})
        ),
        "admission_unknown_role"
    );
    let first = op.ok(
        "agents_spawn",
        json!({"role": "reviewer", "task": "Review src/lib.rs please.", "task_kind": "review"}),
    );
    let (v, err) = op.call(
        "agents_spawn",
        json!({"role": "reviewer", "task": "Review src/lib.rs again.", "task_kind": "review"}),
    );
    assert!(err);
    assert_eq!(v["error"]["code"], "admission_max_active", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_active"),
        "{v}"
    );
    // Stop it through the control graph: a stale revision fails before delivery.
    let run = first["agent_run_ref"].as_str().unwrap();
    let seen = op.ok(
        "agent_control",
        json!({"agent_run_ref": run, "action": "inspect"}),
    );
    let rev = seen["control_revision"].as_i64().unwrap();
    assert_eq!(
        op.refused(
            "agent_control",
            json!({"agent_run_ref": run, "action": "stop", "control_revision": rev + 5})
        ),
        "stale_control_revision"
    );
    let stopped = op.ok(
        "agent_control",
        json!({"agent_run_ref": run, "action": "stop", "control_revision": rev}),
    );
    assert_eq!(stopped["state"], "stopped", "{stopped:#}");
    // A stopped job released its slot, and its partial evidence can never be accepted.
    let job = first["job"].as_str().unwrap();
    op.ok("agent_result", json!({"job": job}));
    assert_eq!(
        op.refused("agent_result_accept", json!({"job": job, "reason": "no"})),
        "result_not_acceptable"
    );
    let again = op.ok("agents_spawn", json!({"role": "reviewer", "task": "Review src/lib.rs a third time.", "task_kind": "review"}));
    assert!(again["job"].is_string());
    let host_pids: Vec<i64> = w.inspect(&session)["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["host_pid"].as_i64())
        .collect();
    assert!(w.run(&["stop", &session]).status.success());
    std::thread::sleep(Duration::from_millis(500));
    for pid in host_pids {
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "host {pid} outlived its session"
        );
    }
}

#[test]
fn kill_9_of_the_supervisor_mid_job_loses_nothing_acknowledged() {
    let Some(js) = codex_js() else { return };
    let mut w = World::new(js);
    w.git_workspace(&[(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
    )]);
    // The reviewer says something, then its model never finishes.
    w.start_model(&json!({"actors": [{"name": "reviewer", "match": REVIEWER_MARK, "steps": [[{"say": "looking at src/lib.rs"}, {"hang": true}]]}]}));
    let pack = review_pack(&w);
    let session = w.start_session(&pack, None);
    let mut op = w.operator(&session);
    let spawned = op.ok("agents_spawn", json!({"role": "reviewer", "task": "Review src/lib.rs for correctness.", "task_kind": "review"}));
    let job = spawned["job"].as_str().unwrap().to_string();
    // Wait until the worker is running with a host.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let (sup, host) = loop {
        let v = w.inspect(&session);
        let r = &runs_of(&v, "reviewer")[0];
        if r["state"] == "running" && r["host_pid"].is_i64() {
            break (
                v["supervisor_pid"].as_i64().unwrap(),
                r["host_pid"].as_i64().unwrap(),
            );
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the reviewer never ran: {v:#}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    drop(op);
    unsafe {
        libc::kill(sup as i32, libc::SIGKILL);
    }
    std::thread::sleep(Duration::from_millis(300));
    // The next look at the session recovers it: nothing acknowledged is lost, the running job
    // is suspended with its partial evidence, and its host is gone.
    let v = w.inspect(&session);
    assert_eq!(v["state"], "suspended", "{v:#}");
    let r = &runs_of(&v, "reviewer")[0];
    assert_eq!(r["state"], "suspended", "{r:#}");
    assert_eq!(r["job"], job);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !std::path::Path::new(&format!("/proc/{host}")).exists() || is_zombie(host),
        "host {host} outlived its supervisor"
    );
    let audit: Vec<String> = v["audit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["action"].as_str().unwrap().to_string())
        .collect();
    assert!(
        audit.contains(&"agents_spawn".to_string()) && audit.contains(&"recover".to_string()),
        "{audit:?}"
    );
    assert_eq!(r["result"]["final"], false, "{r:#}");
}

#[test]
fn a_read_only_worker_cannot_reach_the_supervisor() {
    let Some(js) = codex_js() else { return };
    let mut w = World::new(js);
    w.git_workspace(&[(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
    )]);
    let pack = review_pack(&w);
    let session = w.start_session(&pack, None);
    let exe = env!("CARGO_BIN_EXE_codex-mmo");
    let spawn = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "agents_spawn", "arguments": {"role": "reviewer", "task": "Review src/lib.rs as the root would.", "task_kind": "review"}}});
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "forger", "version": "1"}}});
    let lines = format!("{init}\n{spawn}\n");
    // The worker speaks to the session's socket the way its own mmo_mesh server would.
    let socket = w
        .data()
        .join("runtime/sessions")
        .join(&session)
        .join("mesh.sock");
    let pipe = format!(
        "printf '%s' '{lines}' | {exe} mesh-stdio --socket {}",
        socket.display()
    );
    // 1: run the operator's command from inside the worker; 2: the same from a process that
    // left the worker's tree (a double fork: it is reparented to the supervisor).
    let direct = format!("{pipe}; echo DIRECT-DONE");
    let orphan = format!(
        "sh -c '( {} & )'; sleep 3; echo ORPHAN-DONE",
        pipe.replace('\'', "'\\''")
    );
    w.start_model(
        &json!({"actors": [{"name": "reviewer", "match": REVIEWER_MARK, "steps": [
            {"call": {"name": "exec_command", "arguments": {"cmd": direct}}},
            {"call": {"name": "exec_command", "arguments": {"cmd": orphan}}},
            [{"say": verdict(&w)}]
        ]}]}),
    );
    let mut op = w.operator(&session);
    let spawned = op.ok("agents_spawn", json!({"role": "reviewer", "task": "Review src/lib.rs for correctness.", "task_kind": "review"}));
    let job = spawned["job"].as_str().unwrap().to_string();
    op.wait_terminal(&job, Duration::from_secs(120));
    // What the worker's commands printed reached the model as tool outputs.
    let outputs: Vec<String> = w
        .model_requests()
        .iter()
        .flat_map(|r| r["body"]["input"].as_array().cloned().unwrap_or_default())
        .filter(|i| i["type"] == "function_call_output")
        .map(|i| i["output"].to_string())
        .collect();
    // A read-only worker's sandbox has no network, Unix sockets included: it cannot even
    // reach the supervisor. (A networked writer can; see the build-squad test.)
    let direct_out = outputs
        .iter()
        .find(|o| o.contains("DIRECT-DONE"))
        .unwrap_or_else(|| panic!("no direct output in {outputs:#?}"));
    assert!(
        direct_out.contains("Operation not permitted"),
        "{direct_out}"
    );
    let orphan_out = outputs
        .iter()
        .find(|o| o.contains("ORPHAN-DONE"))
        .unwrap_or_else(|| panic!("no orphan output in {outputs:#?}"));
    assert!(
        orphan_out.contains("Operation not permitted"),
        "{orphan_out}"
    );
    // Only the operator's spawn happened.
    let v = w.inspect(&session);
    assert_eq!(runs_of(&v, "reviewer").len(), 1, "{v:#}");
}

#[test]
fn run_in_the_foreground_follows_the_session_until_the_root_ends() {
    let Some(js) = codex_js() else { return };
    let mut w = World::new(js);
    w.git_workspace(&[(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
    )]);
    w.start_model(&json!({"actors": [{"name": "lead", "match": LEAD_MARK, "steps": [[{"say": "Nothing to delegate; done."}]]}]}));
    let pack = review_pack(&w);
    let o = w.run(&[
        "run",
        "--profile",
        pack.to_str().unwrap(),
        "--task",
        "Say whether anything needs review.",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains("agentMessage: Nothing to delegate; done."),
        "{out}"
    );
    assert!(out.contains("[lead] root completed"), "{out}");
    let listed = w.run(&["sessions"]);
    assert!(String::from_utf8_lossy(&listed.stdout).contains("completed"));
}

const WRITER_MARK: &str = "IMPLEMENTER-ROLE-55d0";

fn squad_pack(w: &World) -> std::path::PathBuf {
    let profile = r#"schema_version = 8
id = "squad"
version = "8.0.0"
display_name = "Squad"
description = "A root and two isolated writers on a scripted model."
maturity = "lab"
root = "lead"

[agents.lead]
kind = "root"
description = "Root"
model = "scripted_responses__scripted_large"
reasoning = "none"
permissions = "workspace-write"
can_spawn = ["implementer"]
trust = "high"
instructions = "agents/lead.md"

[agents.lead.controls.implementer]
actions = ["inspect", "stop"]

[agents.implementer]
description = "Implements one scoped change"
model = "scripted_responses__scripted_large"
reasoning = "none"
permissions = "workspace-write"
backends = ["mcp"]
max_active = 3
allowed_task_kinds = ["implementation"]
network_access = true
instructions = "agents/implementer.md"

[coordination]
max_active_agents = 4
max_active_writers = 3
"#;
    w.pack(
        "squad",
        profile,
        &[
            ("agents/lead.md", &format!("{LEAD_MARK} You lead.")),
            (
                "agents/implementer.md",
                &format!("{WRITER_MARK} You implement."),
            ),
        ],
    )
}

fn git(ws: &std::path::Path, args: &[&str]) -> String {
    let o = std::process::Command::new("git")
        .args(args)
        .current_dir(ws)
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).to_string()
}

#[test]
fn writers_work_in_worktrees_a_patch_is_integrated_and_an_out_of_scope_write_taints() {
    let Some(js) = codex_js() else { return };
    let mut w = World::new(js);
    w.git_workspace(&[
        ("src/a.rs", "// a\n"),
        ("src/b.rs", "// b\n"),
        ("README.md", "readme\n"),
    ]);
    let exec = |cmd: &str| json!({"call": {"name": "exec_command", "arguments": {"cmd": cmd}}});
    w.start_model(&json!({"actors": [
        {"name": "a", "match": "TASK-A", "steps": [exec("printf 'pub fn a() {}\\n' > src/a.rs"), [{"say": "changed src/a.rs"}]]},
        {"name": "c", "match": "TASK-C", "steps": [[{"hang": true}]]},
        {"name": "b", "match": "TASK-B", "steps": [exec("printf 'b\\n' > src/b.rs; printf 'x\\n' > README.md"), [{"say": "changed src/b.rs"}]]},
    ]}));
    let pack = squad_pack(&w);
    let session = w.start_session(&pack, None);
    let mut op = w.operator(&session);
    let ws = w.ws();
    // A writer without a scope is refused; so is a scope outside the tree.
    assert_eq!(op.refused("agents_spawn", json!({"role": "implementer", "task": "TASK-A change src/a.rs", "task_kind": "implementation"})), "admission_write_scope_required");
    assert_eq!(op.refused("agents_spawn", json!({"role": "implementer", "task": "TASK-A change src/a.rs", "task_kind": "implementation", "write_scope": ["../x"]})), "admission_write_scope_invalid");
    let a = op.ok("agents_spawn", json!({"role": "implementer", "task": "TASK-A change src/a.rs", "task_kind": "implementation", "write_scope": ["src/a.rs"]}));
    let c = op.ok("agents_spawn", json!({"role": "implementer", "task": "TASK-C hold src/c", "task_kind": "implementation", "write_scope": ["src/c"]}));
    // Overlapping canonical scopes are rejected while a writer holds one.
    assert_eq!(op.refused("agents_spawn", json!({"role": "implementer", "task": "TASK-B change all of src", "task_kind": "implementation", "write_scope": ["src"]})), "admission_write_conflict");
    let ja = a["job"].as_str().unwrap().to_string();
    assert_eq!(
        op.wait_terminal(&ja, Duration::from_secs(120)),
        "completed",
        "{:#}",
        w.inspect(&session)
    );
    // The canonical checkout is untouched until integration.
    assert_eq!(
        std::fs::read_to_string(ws.join("src/a.rs")).unwrap(),
        "// a\n"
    );
    let insp = op.ok(
        "agent_inspect",
        json!({"agent_run_ref": a["agent_run_ref"]}),
    );
    assert_eq!(insp["patch"]["state"], "recorded", "{insp:#}");
    assert_eq!(
        op.refused("agent_patch_integrate", json!({"job": ja})),
        "patch_not_accepted"
    );
    op.ok("agent_result", json!({"job": ja}));
    op.ok(
        "agent_result_accept",
        json!({"job": ja, "reason": "the change is right"}),
    );
    let integrated = op.ok("agent_patch_integrate", json!({"job": ja}));
    assert!(integrated["commit"].is_string(), "{integrated:#}");
    assert_eq!(
        std::fs::read_to_string(ws.join("src/a.rs")).unwrap(),
        "pub fn a() {}\n"
    );
    assert!(git(&ws, &["log", "--oneline"]).lines().count() == 2);
    assert_eq!(
        op.refused("agent_patch_integrate", json!({"job": ja})),
        "patch_state"
    );
    // Stop the holder of src/c; then a writer that also writes outside its scope taints the
    // session and fails, and the canonical checkout never sees it.
    let seen = op.ok(
        "agent_control",
        json!({"agent_run_ref": c["agent_run_ref"], "action": "inspect"}),
    );
    op.ok("agent_control", json!({"agent_run_ref": c["agent_run_ref"], "action": "stop", "control_revision": seen["control_revision"]}));
    let b = op.ok("agents_spawn", json!({"role": "implementer", "task": "TASK-B change src/b.rs", "task_kind": "implementation", "write_scope": ["src/b.rs"]}));
    let jb = b["job"].as_str().unwrap().to_string();
    assert_eq!(op.wait_terminal(&jb, Duration::from_secs(120)), "failed");
    let v = w.inspect(&session);
    assert!(
        v["tainted"].as_str().unwrap_or("").contains("README.md"),
        "{v:#}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("README.md")).unwrap(),
        "readme\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("src/b.rs")).unwrap(),
        "// b\n"
    );
    assert!(git(&ws, &["status", "--porcelain"]).trim().is_empty());
    // Every worktree is gone.
    assert!(
        git(&ws, &["worktree", "list"]).lines().count() == 1,
        "{}",
        git(&ws, &["worktree", "list"])
    );
}

#[test]
fn a_networked_writer_is_itself_and_never_the_operator() {
    let Some(js) = codex_js() else { return };
    let mut w = World::new(js);
    w.git_workspace(&[("src/a.rs", "// a\n")]);
    let pack = squad_pack(&w);
    let session = w.start_session(&pack, None);
    let exe = env!("CARGO_BIN_EXE_codex-mmo");
    let socket = w
        .data()
        .join("runtime/sessions")
        .join(&session)
        .join("mesh.sock");
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "forger", "version": "1"}}});
    let spawn = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "agents_spawn", "arguments": {"role": "implementer", "task": "TASK-X spawned by a forger", "task_kind": "implementation", "write_scope": ["src/x.rs"]}}});
    let pipe = format!(
        "printf '%s\\n%s\\n' '{init}' '{spawn}' | {exe} mesh-stdio --socket {}",
        socket.display()
    );
    let direct = format!("{pipe}; echo DIRECT-DONE");
    let orphan = format!(
        "sh -c '( {} & )'; sleep 3; echo ORPHAN-DONE",
        pipe.replace('\'', "'\\''")
    );
    let exec = |cmd: &str| json!({"call": {"name": "exec_command", "arguments": {"cmd": cmd}}});
    w.start_model(&json!({"actors": [{"name": "w", "match": "TASK-F", "steps": [exec(&direct), exec(&orphan), [{"say": "done"}]]}]}));
    let mut op = w.operator(&session);
    let f = op.ok("agents_spawn", json!({"role": "implementer", "task": "TASK-F forge an identity", "task_kind": "implementation", "write_scope": ["src/f.rs"]}));
    op.wait_terminal(f["job"].as_str().unwrap(), Duration::from_secs(120));
    let outputs: Vec<String> = w
        .model_requests()
        .iter()
        .flat_map(|r| r["body"]["input"].as_array().cloned().unwrap_or_default())
        .filter(|i| i["type"] == "function_call_output")
        .map(|i| i["output"].to_string())
        .collect();
    let direct_out = outputs
        .iter()
        .find(|o| o.contains("DIRECT-DONE"))
        .unwrap_or_else(|| panic!("{outputs:#?}"));
    assert!(
        direct_out.contains("tool_not_granted"),
        "the writer is identified as itself (it cannot spawn): {direct_out}"
    );
    let orphan_out = outputs
        .iter()
        .find(|o| o.contains("ORPHAN-DONE"))
        .unwrap_or_else(|| panic!("{outputs:#?}"));
    // A daemonized process is reparented to the nearest subreaper: inside Codex's own tree it
    // is still the writer; had it reached the supervisor it would be nobody (see the unit test
    // `identity_comes_from_the_process_tree`). Either way it is never the operator.
    assert!(
        orphan_out.contains("tool_not_granted") || orphan_out.contains("no identity here"),
        "a daemonized process keeps its writer's identity or none: {orphan_out}"
    );
    assert_eq!(runs_of(&w.inspect(&session), "implementer").len(), 1);
}

#[test]
fn a_strict_contract_gets_one_repair_turn_and_fails_after_a_second_bad_answer() {
    let Some(js) = codex_js() else { return };
    let mut w = World::new(js);
    w.git_workspace(&[(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
    )]);
    let good = verdict(&w);
    let forged = json!({"verdict": "approve", "findings": [{"relative_path": "src/lib.rs", "sha256": "0".repeat(64), "claim": "made up"}]}).to_string();
    w.start_model(
        &json!({"actors": [{"name": "reviewer", "match": REVIEWER_MARK, "steps": [
            [{"say": "It looks fine to me."}], [{"say": good}],
            [{"say": forged}], [{"say": forged}]
        ]}]}),
    );
    let pack = review_pack(&w);
    let session = w.start_session(&pack, None);
    let mut op = w.operator(&session);
    let first = op.ok("agents_spawn", json!({"role": "reviewer", "task": "Review src/lib.rs for correctness.", "task_kind": "review"}));
    let j1 = first["job"].as_str().unwrap().to_string();
    assert_eq!(op.wait_terminal(&j1, Duration::from_secs(120)), "completed");
    let insp = op.ok(
        "agent_inspect",
        json!({"agent_run_ref": first["agent_run_ref"]}),
    );
    assert_eq!(insp["repairs"], 1, "{insp:#}");
    // The repair turn went to the same thread, shape-only, with the problems named.
    let repair = w
        .model_requests()
        .into_iter()
        .find(|r| {
            r["body"]
                .to_string()
                .contains("This is the only repair turn")
        })
        .expect("no repair turn reached the model");
    assert!(
        repair["body"].to_string().contains("Problems:"),
        "the repair names the problems"
    );
    assert_eq!(
        op.ok("agent_result", json!({"job": j1}))["value"]["verdict"],
        "approve"
    );
    // A hash that does not match the file fails correlation, twice: the job fails, and its
    // evidence can never be accepted.
    let second = op.ok(
        "agents_spawn",
        json!({"role": "reviewer", "task": "Review src/lib.rs once more.", "task_kind": "review"}),
    );
    let j2 = second["job"].as_str().unwrap().to_string();
    assert_eq!(op.wait_terminal(&j2, Duration::from_secs(120)), "failed");
    let insp = op.ok(
        "agent_inspect",
        json!({"agent_run_ref": second["agent_run_ref"]}),
    );
    assert!(
        insp["reason"]
            .as_str()
            .unwrap()
            .contains("after its one repair turn"),
        "{insp:#}"
    );
    let r = op.ok("agent_result", json!({"job": j2}));
    assert_eq!(r["final"], false);
    assert_eq!(
        op.refused("agent_result_accept", json!({"job": j2, "reason": "no"})),
        "result_not_acceptable"
    );
}

#[test]
fn a_low_trust_role_takes_only_a_literal_task_and_its_evidence_is_correlated() {
    let Some(js) = codex_js() else { return };
    let mut w = World::new(js);
    w.git_workspace(&[(
        "src/lib.rs",
        "// header\npub fn add(a: i32, b: i32) -> i32 { a + b }\n",
    )]);
    let sha = sha256_file(&w.ws().join("src/lib.rs"));
    let answer = json!({"matches": [{"relative_path": "src/lib.rs", "sha256": sha, "start_line": 2, "end_line": 2}]}).to_string();
    w.start_model(&json!({"actors": [{"name": "locator", "match": "src/lib.rs", "steps": [[{"say": answer}]]}]}));
    let profile = r#"schema_version = 8
id = "literal"
version = "8.0.0"
display_name = "Literal"
description = "A root and a low-trust locator."
maturity = "lab"
root = "lead"

[agents.lead]
kind = "root"
description = "Root"
model = "scripted_responses__scripted_large"
reasoning = "none"
permissions = "workspace-write"
can_spawn = ["locator"]
trust = "high"

[agents.locator]
description = "Returns literal locations"
model = "scripted_responses__scripted_literal"
reasoning = "none"
trust = "low"
backends = ["mcp"]
verification = "always"
contract_enforcement = "strict"
output_contract = "contracts/locate.json"
allowed_task_kinds = ["locate", "extract"]
max_task_chars = 2500
"#;
    let contract = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../profiles/build-squad/contracts/locate.json"
    ))
    .unwrap();
    let pack = w.pack("literal", profile, &[("contracts/locate.json", &contract)]);
    let session = w.start_session(&pack, None);
    let mut op = w.operator(&session);
    let (v, err) = op.call("agents_spawn", json!({"role": "locator", "task": "Find where add is defined please.", "task_kind": "locate"}));
    assert!(
        err && v["error"]["code"]
            .as_str()
            .unwrap()
            .starts_with("admission_"),
        "prose to a low-trust role is refused: {v}"
    );
    assert_eq!(op.refused("agents_spawn", json!({"role": "locator", "literal_task": {"operation": "locate", "path": "../etc/passwd", "query": "root"}})), "literal_path_invalid");
    let s = op.ok("agents_spawn", json!({"role": "locator", "literal_task": {"operation": "locate", "path": "src/lib.rs", "query": "fn add"}}));
    let job = s["job"].as_str().unwrap().to_string();
    assert_eq!(
        op.wait_terminal(&job, Duration::from_secs(120)),
        "completed",
        "{:#}",
        w.inspect(&session)
    );
    // The brief the runtime synthesized, not caller prose, reached the model; it names the
    // file's hash.
    assert!(
        w.model_requests()
            .iter()
            .any(|r| r["body"].to_string().contains(&sha)),
        "the brief carries the input hash"
    );
    let r = op.ok("agent_result", json!({"job": job}));
    assert_eq!(r["value"]["matches"][0]["start_line"], 2, "{r:#}");
}

/// The root's script: spawn the reviewer, wait until it is done, page its result, accept it.
fn root_review_steps(extra_last: Value) -> Vec<Value> {
    let mesh = |tool: &str, args: Value| json!({"call": {"name": format!("mcp__mmo_mesh__{tool}"), "arguments": args}});
    let mut steps = vec![
        mesh(
            "agents_spawn",
            json!({"role": "reviewer", "task": "Review src/lib.rs for correctness.", "task_kind": "review"}),
        ),
        mesh(
            "agents_wait",
            json!({"after_revision": {"{{first_output/job}}": "{{last_output/progress_revision}}"}, "timeout_seconds": 30}),
        ),
    ];
    for _ in 0..6 {
        steps.push(mesh("agents_wait", json!({"after_revision": {"{{first_output/job}}": "{{last_output/jobs/*/progress_revision}}"}, "timeout_seconds": 30})));
    }
    steps.push(mesh("agent_result", json!({"job": "{{first_output/job}}"})));
    steps.push(mesh(
        "agent_result_accept",
        json!({"job": "{{first_output/job}}", "reason": "the evidence checks out"}),
    ));
    steps.push(extra_last);
    steps
}

#[test]
fn a_model_driven_root_spawns_waits_pages_and_accepts() {
    let Some(js) = codex_js() else { return };
    let mut w = World::new(js);
    w.git_workspace(&[(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
    )]);
    let answer = verdict(&w);
    w.start_model(&json!({"actors": [
        {"name": "reviewer", "match": REVIEWER_MARK, "steps": [[{"say": answer}]]},
        {"name": "lead", "match": LEAD_MARK, "steps": root_review_steps(json!([{"say": "The reviewer approved; accepted."}]))},
    ]}));
    let pack = review_pack(&w);
    let o = w.run(&[
        "run",
        "--profile",
        pack.to_str().unwrap(),
        "--task",
        "Have src/lib.rs reviewed and accept a sound review.",
        "--json",
    ]);
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(v["state"], "completed", "{v:#}");
    let reviewer = &runs_of(&v, "reviewer")[0];
    assert_eq!(reviewer["state"], "completed");
    assert_eq!(reviewer["result"]["disposition"], "accepted", "{v:#}");
    // The root called the tools itself: the audit names the root's run as the actor.
    let root = runs_of(&v, "lead")[0]["agent_run_ref"]
        .as_str()
        .unwrap()
        .to_string();
    let accept = v["audit"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["action"] == "agent_result_accept")
        .unwrap();
    assert_eq!(accept["actor"], root);
    assert!(
        !w.model_requests()
            .iter()
            .any(|r| r["exhausted"] == true || !r["error"].is_null()),
        "the script ran as written"
    );
}

#[test]
fn a_goal_mode_root_runs_its_goal_until_it_marks_it_complete() {
    let Some(js) = codex_js() else { return };
    let mut w = World::new(js);
    w.git_workspace(&[(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
    )]);
    let answer = verdict(&w);
    let mut lead = root_review_steps(
        json!({"call": {"name": "update_goal", "arguments": {"status": "complete"}}}),
    );
    lead.push(json!([{"say": "Goal complete."}]));
    w.start_model(&json!({"actors": [
        {"name": "reviewer", "match": REVIEWER_MARK, "steps": [[{"say": answer}]]},
        {"name": "lead", "match": LEAD_MARK, "steps": lead},
    ]}));
    let goal =
        "execution_mode = \"goal\"\ngoal_token_budget = 600000\nmax_goal_token_budget = 1000000\n";
    let profile = review_profile("").replace(
        "instructions = \"agents/lead.md\"\n",
        &format!("instructions = \"agents/lead.md\"\n{goal}"),
    );
    let pack = w.pack(
        "review-team",
        &profile,
        &[
            ("agents/lead.md", &format!("{LEAD_MARK} You lead.")),
            (
                "agents/reviewer.md",
                &format!("{REVIEWER_MARK} You review code and answer with JSON only."),
            ),
            ("contracts/review.json", REVIEW_CONTRACT),
        ],
    );
    let session = w.start_session(
        &pack,
        Some("Have src/lib.rs reviewed and accept a sound review."),
    );
    let v = w.wait_state(
        &session,
        &["completed", "failed", "stopped"],
        Duration::from_secs(120),
    );
    let tools: Vec<String> = w
        .model_requests()
        .iter()
        .flat_map(|r| r["body"]["tools"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect();
    assert_eq!(
        v["state"], "completed",
        "{v:#}\ntools the model saw: {tools:?}"
    );
    let steps: Vec<String> = w
        .model_requests()
        .iter()
        .map(|r| {
            format!(
                "{}:{} {}",
                r["actor"],
                r["step"],
                r["body"]["input"]
                    .as_array()
                    .and_then(|a| a.last())
                    .map(|l| l.to_string().chars().take(300).collect::<String>())
                    .unwrap_or_default()
            )
        })
        .collect();
    assert_eq!(
        runs_of(&v, "reviewer")[0]["result"]["disposition"],
        "accepted",
        "{steps:#?}\n{v:#}"
    );
    // The goal was set with the role's token budget, and Codex started the turn by itself.
    let root = &runs_of(&v, "lead")[0];
    assert_eq!(root["state"], "completed");
    assert!(
        w.model_requests()
            .iter()
            .any(|r| r["body"].to_string().contains("update_goal"))
    );
}

/// An operator Tool MCP server: echoes its argument, and records each call in a file.
const ECHO_MCP: &str = r#"
import json, sys, os
log = os.environ.get("ECHO_MCP_LOG")
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    if m["method"] == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
             "serverInfo": {"name": "echo", "version": "0"}}
    elif m["method"] == "tools/list":
        r = {"tools": [{"name": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
                       {"name": "shout", "inputSchema": {"type": "object"}}]}
    else:
        if log:
            open(log, "a").write(json.dumps(m["params"]) + "\n")
        r = {"content": [{"type": "text", "text": "echo: " + str(m["params"].get("arguments", {}).get("text"))}]}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}) + "\n")
    sys.stdout.flush()
"#;

#[test]
fn smoke_runs_the_packs_tasks_and_counts_only_successful_direct_tool_calls() {
    let Some(js) = codex_js() else { return };
    let mut w = World::new(js);
    w.git_workspace(&[(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
    )]);
    let server = w.root.path().join("echo_mcp.py");
    std::fs::write(&server, ECHO_MCP).unwrap();
    std::fs::write(
        w.root.path().join("config/codex-mmo/tool-mcp.d/echo.toml"),
        format!("id = \"echo\"\ncommand = \"python3\"\nargs = [{:?}]\nallowed_tools = [\"echo\", \"shout\"]\nenv_vars = [\"ECHO_MCP_LOG\"]\n", server.display()),
    )
    .unwrap();
    let profile = r#"schema_version = 8
id = "smoked"
version = "8.0.0"
display_name = "Smoked"
description = "A root and a researcher with a Tool MCP grant."
maturity = "lab"
root = "lead"
smoke = "smoke.toml"

[agents.lead]
kind = "root"
description = "Root"
model = "scripted_responses__scripted_large"
reasoning = "none"
permissions = "workspace-write"
can_spawn = ["researcher"]
trust = "high"
instructions = "agents/lead.md"

[agents.researcher]
description = "Looks things up"
model = "scripted_responses__scripted_large"
reasoning = "none"
backends = ["mcp"]
allowed_task_kinds = ["research"]
instructions = "agents/researcher.md"

[agents.researcher.tool_mcp_servers.echo]
required = true
enabled_tools = ["echo"]
"#;
    let smoke = r#"schema_version = 8

[[tasks]]
agent = "researcher"
backend = "mcp"
task_kind = "research"
mode = "read-only"
wall_timeout_seconds = 60
required_mcp_tools = ["echo.echo"]
task = "TASK-ECHO: echo the word hello through the echo tool."

[[tasks]]
agent = "researcher"
backend = "mcp"
task_kind = "research"
mode = "read-only"
wall_timeout_seconds = 60
required_mcp_tools = ["echo.echo"]
task = "TASK-CLAIM: say that you used the echo tool."

[[tasks]]
agent = "lead"
backend = "root"
mode = "workspace-write"
wall_timeout_seconds = 60
task = "TASK-ROOT: say that the workspace is fine."

[[tasks]]
agent = "researcher"
backend = "mcp"
task_kind = "research"
mode = "read-only"
wall_timeout_seconds = 10
task = "TASK-SLOW: think about it for a very long time."
"#;
    let pack = w.pack(
        "smoked",
        profile,
        &[
            ("agents/lead.md", &format!("{LEAD_MARK} You lead.")),
            ("agents/researcher.md", "You research."),
            ("smoke.toml", smoke),
        ],
    );
    let calls = w.root.path().join("echo-calls.jsonl");
    w.start_model(&json!({"actors": [
        {"name": "echo", "match": "TASK-ECHO", "steps": [{"call": {"name": "mcp__echo__echo", "arguments": {"text": "hello"}}}, [{"say": "the echo tool said hello"}]]},
        {"name": "claim", "match": "TASK-CLAIM", "steps": [[{"say": "I used the echo tool (I did not)."}]]},
        {"name": "root", "match": "TASK-ROOT", "steps": [[{"say": "The workspace is fine."}]]},
        {"name": "slow", "match": "TASK-SLOW", "steps": [[{"say": "thinking"}, {"hang": true}]]},
    ]}));
    let o = w
        .cmd()
        .env("ECHO_MCP_LOG", &calls)
        .args(["smoke", pack.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    let v: Value = serde_json::from_str(out.trim())
        .unwrap_or_else(|e| panic!("{e}: {out}{}", String::from_utf8_lossy(&o.stderr)));
    let tasks = v["tasks"].as_array().unwrap();
    assert_eq!(tasks[0]["passed"], true, "{v:#}");
    assert_eq!(tasks[0]["required_mcp_tools"]["echo.echo"], true);
    // A claim in prose is not a call.
    assert_eq!(tasks[1]["passed"], false, "{v:#}");
    assert_eq!(tasks[1]["required_mcp_tools"]["echo.echo"], false);
    assert_eq!(tasks[2]["passed"], true, "{v:#}");
    // At its wall timeout the unfinished worker is cancelled, its partial evidence kept.
    assert_eq!(tasks[3]["passed"], false, "{v:#}");
    assert!(
        tasks[3]["reason"]
            .as_str()
            .unwrap()
            .contains("wall timeout"),
        "{v:#}"
    );
    let slow = w.inspect(tasks[3]["session"].as_str().unwrap());
    let slow_run = &runs_of(&slow, "researcher")[0];
    assert_eq!(slow_run["state"], "cancelled", "{slow:#}");
    assert_eq!(slow_run["result"]["final"], false);
    assert_eq!(v["ok"], false);
    assert_eq!(o.status.code(), Some(1));
    // The grant reached the worker's live home as compiled, narrowed to `echo`, and the call
    // really reached the operator's server.
    assert!(std::fs::read_to_string(&calls).unwrap().contains("hello"));

    // With the model gone, smoke says it needs one and exits 2.
    drop(w.model.take().map(|mut m| {
        let _ = m.kill();
        m.wait()
    }));
    let o = w.run(&["smoke", pack.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("smoke needs a live model") && err.contains("refuses connections"),
        "{err}"
    );
}

const SCOUT_MARK: &str = "SCOUT-ROLE-4d1e";

/// A root and a native-only scout (a Codex custom agent in the root's home).
fn native_pack(w: &World, smoke: Option<&str>) -> std::path::PathBuf {
    let profile = format!(
        r#"schema_version = 8
id = "native-team"
version = "8.0.0"
display_name = "Native team"
description = "A root and a native scout on a scripted model."
maturity = "lab"
root = "lead"
{}
[coordination]
orchestration = "native"
max_active_agents = 2
max_active_writers = 0

[agents.lead]
kind = "root"
description = "Root"
model = "scripted_responses__scripted_large"
reasoning = "none"
permissions = "workspace-write"
can_spawn = ["scout"]
trust = "high"
instructions = "agents/lead.md"

[agents.scout]
description = "Native scout that maps the repository"
model = "scripted_responses__scripted_large"
reasoning = "none"
permissions = "read-only"
backends = ["native"]
allowed_task_kinds = ["analysis"]
native_name = "test-scout"
instructions = "agents/scout.md"
"#,
        if smoke.is_some() {
            "smoke = \"smoke.toml\"\n"
        } else {
            ""
        }
    );
    let mut files = vec![
        ("agents/lead.md", format!("{LEAD_MARK} You lead.")),
        ("agents/scout.md", format!("{SCOUT_MARK} You scout.")),
    ];
    if let Some(s) = smoke {
        files.push(("smoke.toml", s.to_string()));
    }
    let files: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
    w.pack("native-team", &profile, &files)
}

/// A root's steps that delegate `message` to the agent type `agent_type` and wait for it.
fn delegate_steps(agent_type: &str, message: &str, last: &str) -> Vec<Value> {
    let collab = |tool: &str, args: Value| json!({"call": {"name": tool, "namespace": "multi_agent_v1", "arguments": args}});
    vec![
        collab(
            "spawn_agent",
            json!({"agent_type": agent_type, "message": message}),
        ),
        collab(
            "wait_agent",
            json!({"targets": ["{{last_output/agent_id}}"], "timeout_ms": 20000}),
        ),
        json!([{"say": last}]),
    ]
}

#[test]
fn a_native_scout_runs_in_the_roots_host_and_is_observed_as_a_native_run() {
    let Some(js) = codex_js() else { return };
    let mut w = World::new(js);
    w.git_workspace(&[(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
    )]);
    w.start_model(&json!({"actors": [
        {"name": "scout", "match": SCOUT_MARK, "steps": [[{"say": "SCOUT-ANSWER src/lib.rs defines add"}]]},
        {"name": "lead", "match": LEAD_MARK, "steps": delegate_steps("test-scout", "Map the repository.", "The scout mapped it.")},
    ]}));
    let pack = native_pack(&w, None);
    let o = w.run(&[
        "run",
        "--profile",
        pack.to_str().unwrap(),
        "--task",
        "Have the repository mapped.",
        "--json",
    ]);
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(v["state"], "completed", "{v:#}");
    let root = &runs_of(&v, "lead")[0];
    let scout = &runs_of(&v, "scout")
        .first()
        .cloned()
        .unwrap_or_else(|| panic!("no scout run: {v:#}"));
    assert_eq!(root["backend"], "root");
    assert_eq!(scout["backend"], "native", "{v:#}");
    assert_eq!(scout["state"], "completed", "{v:#}");
    assert_eq!(scout["parent"], root["agent_run_ref"]);
    assert!(scout["job"].is_null());
    // The root's turn is its own: the scout's turn ending did not end it (it went on to wait
    // and answer), and the scout's messages are the scout's trace, not the root's.
    assert_eq!(root["preview"], "The scout mapped it.", "{v:#}");
    // The foreground run prints each event with its run's ref.
    let said_by = |run: &Value| {
        format!(
            "{} agentMessage: SCOUT-ANSWER",
            run["agent_run_ref"].as_str().unwrap()
        )
    };
    assert!(out.contains(&said_by(scout)), "{out}");
    assert!(!out.contains(&said_by(root)), "{out}");
    let spawn = v["audit"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["action"] == "native_spawn")
        .unwrap_or_else(|| panic!("{v:#}"));
    assert_eq!(spawn["detail"]["agent_role"], "test-scout");
    assert_eq!(spawn["actor"], root["agent_run_ref"]);
    assert!(
        !w.model_requests()
            .iter()
            .any(|r| r["exhausted"] == true || !r["error"].is_null()),
        "the script ran as written"
    );
}

#[test]
fn smoke_passes_a_native_task_only_on_the_native_roles_marker() {
    let Some(js) = codex_js() else { return };
    let mut w = World::new(js);
    w.git_workspace(&[(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
    )]);
    let smoke = r#"schema_version = 8

[[tasks]]
agent = "scout"
backend = "native"
task_kind = "analysis"
mode = "read-only"
wall_timeout_seconds = 60
task = "TASK-NAT-OK: map the repository."

[[tasks]]
agent = "scout"
backend = "native"
task_kind = "analysis"
mode = "read-only"
wall_timeout_seconds = 60
task = "TASK-NAT-SELF: map the repository."

[[tasks]]
agent = "scout"
backend = "native"
task_kind = "analysis"
mode = "read-only"
wall_timeout_seconds = 60
task = "TASK-NAT-DEFAULT: map the repository."
"#;
    let pack = native_pack(&w, Some(smoke));
    w.start_model(&json!({"actors": [
        {"name": "scout", "match": SCOUT_MARK, "steps": [[{"say": "SCOUT-ANSWER src/lib.rs defines add"}]]},
        {"name": "ok", "match": "TASK-NAT-OK", "steps": delegate_steps("test-scout", "Map the repository.", "Mapped by the scout.")},
        // Answering without delegating is no native evidence, whatever the answer says.
        {"name": "self", "match": "TASK-NAT-SELF", "steps": [[{"say": "The scout mapped it (it did not)."}]]},
        // Neither is delegating to another agent type.
        {"name": "default", "match": "TASK-NAT-DEFAULT", "steps": delegate_steps("default", "DEFAULT-SUB: map the repository.", "Mapped by a default agent.")},
        {"name": "default-sub", "match": "DEFAULT-SUB", "steps": [[{"say": "mapped"}]]},
    ]}));
    let o = w.run(&["smoke", pack.to_str().unwrap(), "--json"]);
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    let v: Value = serde_json::from_str(out.trim())
        .unwrap_or_else(|e| panic!("{e}: {out}{}", String::from_utf8_lossy(&o.stderr)));
    let tasks = v["tasks"].as_array().unwrap();
    assert_eq!(tasks[0]["passed"], true, "{v:#}");
    assert!(tasks[0]["native_run"].is_string());
    assert_eq!(tasks[1]["passed"], false, "{v:#}");
    assert!(
        tasks[1]["reason"]
            .as_str()
            .unwrap()
            .contains("never delegated"),
        "{v:#}"
    );
    assert_eq!(tasks[2]["passed"], false, "{v:#}");
    let other = w.inspect(tasks[2]["session"].as_str().unwrap());
    let sub = &runs_of(&other, "codex:default")[0];
    assert_eq!(sub["backend"], "native", "{other:#}");
    assert_eq!(sub["state"], "completed");
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn max_active_holds_across_the_sessions_of_one_profile() {
    let Some(js) = codex_js() else { return };
    let mut w = World::new(js);
    w.git_workspace(&[(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
    )]);
    w.start_model(&json!({"actors": [{"name": "reviewer", "match": REVIEWER_MARK, "steps": [[{"hang": true}]]}]}));
    let files = [
        ("agents/lead.md", format!("{LEAD_MARK} You lead.")),
        ("agents/reviewer.md", format!("{REVIEWER_MARK} You review.")),
        ("contracts/review.json", REVIEW_CONTRACT.to_string()),
    ];
    let files: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
    // The same profile id in two packs: one lets two roots run at once, one does not.
    let one_root = review_profile("");
    let two_roots = one_root.replacen(
        "max_active = 1\ntrust = \"high\"",
        "max_active = 2\ntrust = \"high\"",
        1,
    );
    assert_ne!(one_root, two_roots);
    let wide = w.pack("review-team", &two_roots, &files);
    let a = w.start_session(&wide, None);
    let b = w.start_session(&wide, None);
    let mut op_a = w.operator(&a);
    let mut op_b = w.operator(&b);
    let review =
        json!({"role": "reviewer", "task": "Review src/lib.rs please.", "task_kind": "review"});
    op_a.ok("agents_spawn", review.clone());
    // The reviewer (max_active = 1) runs in session A, so session B may not start another.
    let (v, err) = op_b.call("agents_spawn", review.clone());
    assert!(err, "{v}");
    assert_eq!(v["error"]["code"], "admission_max_active", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("(1 in other sessions)"),
        "{v}"
    );
    // A terminal session releases its slots.
    assert!(w.run(&["stop", &a]).status.success());
    op_b.ok("agents_spawn", review);
    // Two roots (A stopped, B running) fit the wide pack; the narrow pack's root may not
    // start while B's runs.
    let narrow = w.root.path().join("packs/review-team-narrow");
    std::fs::rename(w.pack("review-team", &one_root, &files), &narrow).unwrap();
    let o = w.run(&["run", "--profile", narrow.to_str().unwrap(), "--detach"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr).to_string() + &String::from_utf8_lossy(&o.stdout);
    assert!(
        err.contains("admission_max_active") && err.contains("role `lead` (the root)"),
        "{err}"
    );
    drop(op_a);
    drop(op_b);
}

/// Waits until the scripted model has been asked by `actor`.
#[test]
fn steer_reaches_the_active_turn_and_a_lost_reply_is_delivery_unknown() {
    let Some(js) = codex_js() else { return };
    let mut w = World::new(js);
    w.git_workspace(&[(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
    )]);
    let answer = verdict(&w);
    let exec = |cmd: &str| json!({"call": {"name": "exec_command", "arguments": {"cmd": cmd}}});
    w.start_model(&json!({"actors": [
        {"name": "hang", "match": "TASK-HANG", "steps": [[{"hang": true}]]},
        {"name": "reviewer", "match": REVIEWER_MARK, "steps": [exec("sleep 3"), [{"say": answer}]]},
    ]}));
    let profile = review_profile("").replacen(
        r#"actions = ["inspect", "stop"]"#,
        r#"actions = ["inspect", "trace", "steer", "stop"]"#,
        1,
    );
    let session = review_session_with(&w, &profile, &[("CODEX_MMO_CONTROL_TIMEOUT_MS", "1500")]);
    let mut op = w.operator(&session);
    let spawned = op.ok(
        "agents_spawn",
        json!({"role": "reviewer", "task": "Review src/lib.rs for correctness.", "task_kind": "review"}),
    );
    let run = spawned["agent_run_ref"].as_str().unwrap().to_string();
    // Once the model has answered with its command (`sleep 3`), the turn is active: steer it.
    wait_for_actor(&w, "reviewer");
    std::thread::sleep(Duration::from_millis(300));
    let seen = op.ok(
        "agent_control",
        json!({"agent_run_ref": run, "action": "inspect"}),
    );
    let rev = seen["control_revision"].as_i64().unwrap();
    assert_eq!(
        op.refused(
            "agent_control",
            json!({"agent_run_ref": run, "action": "steer", "control_revision": rev})
        ),
        "invalid_arguments",
        "a steer needs a message"
    );
    let steered = op.ok(
        "agent_control",
        json!({"agent_run_ref": run, "action": "steer", "control_revision": rev, "message": "STEER-7c1: look closely at add"}),
    );
    assert_eq!(steered["delivery"]["status"], "delivered", "{steered:#}");
    assert_eq!(steered["control_revision"], rev + 1);
    assert_eq!(steered["last_control"]["action"], "steer");
    assert_eq!(steered["last_control"]["status"], "delivered");
    // A second control with the revision the first one used is stale.
    assert_eq!(
        op.refused("agent_control", json!({"agent_run_ref": run, "action": "steer", "control_revision": rev, "message": "again"})),
        "stale_control_revision"
    );
    let o = w.run(&["control", &session, &run, "inspect", "--json"]);
    let seen: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(seen["last_control"]["status"], "delivered", "{seen:#}");
    // The trace through the control graph, filtered: the task's message and nothing else.
    let t = op.ok(
        "agent_control",
        json!({"agent_run_ref": run, "action": "trace", "filter": ["userMessage"]}),
    );
    let records = t["records"].as_array().unwrap();
    assert!(!records.is_empty(), "{t:#}");
    assert!(records.iter().all(|r| r["kind"] == "userMessage"), "{t:#}");
    let o = w.run(&[
        "control",
        &session,
        &run,
        "steer",
        "--revision",
        "1",
        "--message",
        "x",
    ]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("stale"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let job = spawned["job"].as_str().unwrap();
    assert_eq!(op.wait_terminal(job, Duration::from_secs(60)), "completed");
    assert!(
        w.model_requests()
            .iter()
            .any(|r| r["actor"] == "reviewer" && r["body"].to_string().contains("STEER-7c1")),
        "the steer reached the model in the same turn"
    );

    // A host that stops answering mid-delivery: the reply is lost, the delivery unknown.
    let hung = op.ok(
        "agents_spawn",
        json!({"role": "reviewer", "task": "TASK-HANG: review src/lib.rs slowly.", "task_kind": "review"}),
    );
    let hung_run = hung["agent_run_ref"].as_str().unwrap().to_string();
    wait_for_actor(&w, "hang");
    let seen = op.ok(
        "agent_control",
        json!({"agent_run_ref": hung_run, "action": "inspect"}),
    );
    let pid = seen["host_pid"].as_i64().unwrap() as i32;
    // The host is its own process group (node and the Codex binary under it): freeze it all.
    unsafe { libc::kill(-pid, libc::SIGSTOP) };
    let rev = seen["control_revision"].as_i64().unwrap();
    assert_eq!(
        op.refused("agent_control", json!({"agent_run_ref": hung_run, "action": "steer", "control_revision": rev, "message": "hello?"})),
        "delivery_unknown"
    );
    let after = op.ok(
        "agent_control",
        json!({"agent_run_ref": hung_run, "action": "inspect"}),
    );
    assert_eq!(
        after["last_control"]["status"], "delivery_unknown",
        "{after:#}"
    );
    assert_eq!(
        after["control_revision"],
        rev + 1,
        "the revision was taken before delivery"
    );
    // The host still answers nothing; stopping the run is not held back by the lost reply.
    let t = std::time::Instant::now();
    // (through the operator's CLI this time)
    let o = w.run(&[
        "control",
        &session,
        &hung_run,
        "stop",
        "--revision",
        &(rev + 1).to_string(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stopped: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(stopped["state"], "stopped", "{stopped:#}");
    assert_eq!(stopped["last_control"]["action"], "stop");
    assert!(t.elapsed() < Duration::from_secs(15), "{:?}", t.elapsed());
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists() || is_zombie(pid as i64),
        "the frozen host is gone"
    );
    unsafe { libc::kill(-pid, libc::SIGKILL) };
    drop(op);
    assert!(w.run(&["stop", &session]).status.success());
}

#[test]
fn a_silent_run_gets_a_stall_warning_and_keeps_running() {
    let Some(js) = codex_js() else { return };
    let mut w = World::new(js);
    w.git_workspace(&[(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
    )]);
    w.start_model(&json!({"actors": [{"name": "reviewer", "match": REVIEWER_MARK, "steps": [[{"hang": true}]]}]}));
    let profile = review_profile("").replacen(
        "allowed_task_kinds = [\"review\"]",
        "allowed_task_kinds = [\"review\"]\nstall_warning_seconds = 60",
        1,
    );
    // One "second" of stall_warning_seconds lasts 20 ms here: 60 of them are 1.2 s.
    let session = review_session_with(&w, &profile, &[("CODEX_MMO_SECOND_MS", "20")]);
    let mut op = w.operator(&session);
    let spawned = op.ok(
        "agents_spawn",
        json!({"role": "reviewer", "task": "Review src/lib.rs for correctness.", "task_kind": "review"}),
    );
    let run = spawned["agent_run_ref"].as_str().unwrap().to_string();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let warned = loop {
        let v = op.ok(
            "agent_control",
            json!({"agent_run_ref": run, "action": "inspect"}),
        );
        if !v["stall_warning"].is_null() {
            break v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no stall warning: {v:#}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(
        warned["state"], "running",
        "a warning never interrupts: {warned:#}"
    );
    assert_eq!(warned["stall_warning"]["stall_warning_seconds"], 60);
    assert!(warned["stall_warning"]["silent_seconds"].as_i64().unwrap() >= 60);
    let o = w.run(&["sessions", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let mine = v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == session.as_str())
        .unwrap();
    assert_eq!(
        mine["stall_warnings"][0]["agent_run_ref"],
        run.as_str(),
        "{mine:#}"
    );
    let o = w.run(&["sessions"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("STALL WARNING"));
    drop(op);
    assert!(w.run(&["stop", &session]).status.success());
}

#[test]
fn pause_retires_the_host_and_continue_resumes_the_same_thread_after_admission_again() {
    let Some(js) = codex_js() else { return };
    let mut w = World::new(js);
    w.git_workspace(&[(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
    )]);
    let answer = verdict(&w);
    w.start_model(&json!({"actors": [
        {"name": "other", "match": "TASK-OTHER", "steps": [[{"hang": true}]]},
        {"name": "reviewer", "match": REVIEWER_MARK, "steps": [[{"say": "looking"}, {"hang": true}], [{"say": answer}]]},
    ]}));
    let profile = review_profile("")
        .replacen(
            r#"actions = ["inspect", "stop"]"#,
            r#"actions = ["inspect", "interrupt", "pause", "continue", "set_effort", "stop"]"#,
            1,
        )
        .replacen(
            "allowed_task_kinds = [\"review\"]",
            "allowed_task_kinds = [\"review\"]\nallowed_reasoning_efforts = [\"none\", \"low\"]",
            1,
        );
    let session = review_session_with(&w, &profile, &[]);
    let mut op = w.operator(&session);
    let spawned = op.ok(
        "agents_spawn",
        json!({"role": "reviewer", "task": "Review src/lib.rs for correctness.", "task_kind": "review"}),
    );
    let run = spawned["agent_run_ref"].as_str().unwrap().to_string();
    let job = spawned["job"].as_str().unwrap().to_string();
    wait_for_actor(&w, "reviewer");
    let seen = op.ok(
        "agent_control",
        json!({"agent_run_ref": run, "action": "inspect"}),
    );
    let thread = seen["thread_id"].as_str().unwrap().to_string();
    let pid = seen["host_pid"].as_i64().unwrap();
    let rev = seen["control_revision"].as_i64().unwrap();
    let paused = op.ok(
        "agent_control",
        json!({"agent_run_ref": run, "action": "pause", "control_revision": rev}),
    );
    assert_eq!(paused["state"], "paused", "{paused:#}");
    assert_eq!(
        paused["result"]["final"], false,
        "partial evidence is kept: {paused:#}"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists() || is_zombie(pid),
        "a cold pause retires the host"
    );
    // The paused job released its slot: another reviewer (max_active = 1) may run now, and
    // while it does the paused one may not continue.
    let other = op.ok(
        "agents_spawn",
        json!({"role": "reviewer", "task": "TASK-OTHER: review src/lib.rs too.", "task_kind": "review"}),
    );
    let (v, err) = op.call(
        "agent_control",
        json!({"agent_run_ref": run, "action": "continue", "control_revision": rev + 1}),
    );
    assert!(err, "{v}");
    assert_eq!(v["error"]["code"], "control_failed", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_active"),
        "{v}"
    );
    // The other one's turn is interrupted through the app-server: it pauses on its thread.
    let other_run = other["agent_run_ref"].as_str().unwrap();
    wait_for_actor(&w, "other");
    let o = op.ok(
        "agent_control",
        json!({"agent_run_ref": other_run, "action": "inspect"}),
    );
    let interrupted = op.ok(
        "agent_control",
        json!({"agent_run_ref": other_run, "action": "interrupt", "control_revision": o["control_revision"]}),
    );
    assert_eq!(interrupted["state"], "paused", "{interrupted:#}");
    assert!(
        interrupted["reason"]
            .as_str()
            .unwrap_or("")
            .contains("interrupted"),
        "{interrupted:#}"
    );
    // Its next turn runs at another effort its role allows (and not at one it does not).
    assert_eq!(
        op.refused("agent_control", json!({"agent_run_ref": run, "action": "set_effort", "control_revision": rev + 2, "effort": "high"})),
        "effort_not_allowed"
    );
    let set = op.ok(
        "agent_control",
        json!({"agent_run_ref": run, "action": "set_effort", "control_revision": rev + 2, "effort": "low"}),
    );
    assert_eq!(set["last_control"]["detail"], "low", "{set:#}");
    // Now it continues, on the same thread, and completes with its verdict.
    let continued = op.ok(
        "agent_control",
        json!({"agent_run_ref": run, "action": "continue", "control_revision": rev + 3}),
    );
    assert_eq!(continued["state"], "running", "{continued:#}");
    assert_eq!(op.wait_terminal(&job, Duration::from_secs(60)), "completed");
    let done = op.ok(
        "agent_control",
        json!({"agent_run_ref": run, "action": "inspect"}),
    );
    assert_eq!(
        done["thread_id"],
        thread.as_str(),
        "the same durable thread: {done:#}"
    );
    assert_eq!(done["result"]["final"], true);
    assert_eq!(done["last_control"]["action"], "continue");
    let r = op.ok("agent_result", json!({"job": job}));
    assert_eq!(r["value"]["verdict"], "approve", "{r:#}");
    // The resumed turn carried the earlier conversation (the same thread), and a terminal job
    // cannot be paused.
    let last = w
        .model_requests()
        .into_iter()
        .rfind(|r| r["actor"] == "reviewer")
        .unwrap();
    let body = last["body"].to_string();
    assert!(
        body.contains("Continue your task") && body.contains("Review src/lib.rs for correctness."),
        "the resumed turn's request holds the original task from the thread's history"
    );
    assert_eq!(
        last["body"]["reasoning"]["effort"], "low",
        "{}",
        last["body"]["reasoning"]
    );
    assert_eq!(
        op.refused("agent_control", json!({"agent_run_ref": run, "action": "pause", "control_revision": done["control_revision"]})),
        "already_terminal"
    );
    drop(op);
    assert!(w.run(&["stop", &session]).status.success());
}

#[test]
fn finalize_asks_for_the_final_result_and_stops_a_job_past_its_grace() {
    let Some(js) = codex_js() else { return };
    let mut w = World::new(js);
    w.git_workspace(&[(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
    )]);
    let answer = verdict(&w);
    let exec = |cmd: &str| json!({"call": {"name": "exec_command", "arguments": {"cmd": cmd}}});
    w.start_model(&json!({"actors": [
        // Codex may send the steered turn's request again: every request of it hangs.
        {"name": "hang", "match": "TASK-HANG", "steps": [[{"hang": true}], [{"hang": true}], [{"hang": true}]]},
        {"name": "reviewer", "match": REVIEWER_MARK, "steps": [exec("sleep 1"), [{"say": answer}]]},
    ]}));
    let profile = review_profile("")
        .replacen(
            r#"actions = ["inspect", "stop"]"#,
            r#"actions = ["inspect", "finalize", "stop"]"#,
            1,
        )
        .replacen(
            "allowed_task_kinds = [\"review\"]",
            "allowed_task_kinds = [\"review\"]\nfinalization_grace_seconds = 30",
            1,
        );
    // One "second" lasts 200 ms here: the grace of 30 is 6 s.
    let session = review_session_with(&w, &profile, &[("CODEX_MMO_SECOND_MS", "200")]);
    let mut op = w.operator(&session);
    let spawned = op.ok(
        "agents_spawn",
        json!({"role": "reviewer", "task": "Review src/lib.rs for correctness.", "task_kind": "review"}),
    );
    let run = spawned["agent_run_ref"].as_str().unwrap().to_string();
    wait_for_actor(&w, "reviewer");
    std::thread::sleep(Duration::from_millis(200));
    let seen = op.ok(
        "agent_control",
        json!({"agent_run_ref": run, "action": "inspect"}),
    );
    let f = op.ok(
        "agent_control",
        json!({"agent_run_ref": run, "action": "finalize", "control_revision": seen["control_revision"]}),
    );
    assert_eq!(
        f["delivery"]["answer"]["finalization_grace_seconds"], 30,
        "{f:#}"
    );
    let job = spawned["job"].as_str().unwrap();
    assert_eq!(op.wait_terminal(job, Duration::from_secs(30)), "completed");
    assert!(
        w.model_requests()
            .iter()
            .any(|r| r["actor"] == "reviewer" && r["body"].to_string().contains("Finish now")),
        "the finalize request reached the model in the active turn"
    );
    // A job that never answers is stopped once its grace has passed, its evidence kept.
    let hung = op.ok(
        "agents_spawn",
        json!({"role": "reviewer", "task": "TASK-HANG: review src/lib.rs slowly.", "task_kind": "review"}),
    );
    let hung_run = hung["agent_run_ref"].as_str().unwrap().to_string();
    wait_for_actor(&w, "hang");
    let seen = op.ok(
        "agent_control",
        json!({"agent_run_ref": hung_run, "action": "inspect"}),
    );
    let t = std::time::Instant::now();
    op.ok(
        "agent_control",
        json!({"agent_run_ref": hung_run, "action": "finalize", "control_revision": seen["control_revision"]}),
    );
    let hung_job = hung["job"].as_str().unwrap();
    assert_eq!(
        op.wait_terminal(hung_job, Duration::from_secs(30)),
        "stopped"
    );
    assert!(
        t.elapsed() >= Duration::from_secs(5),
        "not before its grace: {:?}",
        t.elapsed()
    );
    let after = op.ok(
        "agent_control",
        json!({"agent_run_ref": hung_run, "action": "inspect"}),
    );
    assert!(
        after["reason"]
            .as_str()
            .unwrap()
            .contains("finalization_grace_seconds"),
        "{after:#}"
    );
    assert_eq!(after["result"]["final"], false);
    drop(op);
    assert!(w.run(&["stop", &session]).status.success());
}

#[test]
fn an_approval_waits_as_pending_input_until_its_controller_responds() {
    let Some(js) = codex_js() else { return };
    let mut w = World::new(js);
    w.git_workspace(&[(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
    )]);
    let answer = verdict(&w);
    let marker = w.root.path().join("approved.txt");
    let escalated = json!({"call": {"name": "exec_command", "arguments": {
        "cmd": format!("touch {}", marker.display()),
        "sandbox_permissions": "require_escalated",
        // Not a login shell: hosts inherit the operator's HOME, whose profile may be slow.
        "login": false,
        "yield_time_ms": 5000,
        "justification": "APPROVE-ME: write outside the read-only sandbox",
    }}});
    w.start_model(&json!({"actors": [
        {"name": "reviewer", "match": REVIEWER_MARK, "steps": [escalated, [{"say": answer}]]},
    ]}));
    let profile = review_profile("")
        .replacen(
            r#"actions = ["inspect", "stop"]"#,
            r#"actions = ["inspect", "respond", "stop"]"#,
            1,
        )
        .replacen(
            "allowed_task_kinds = [\"review\"]",
            "allowed_task_kinds = [\"review\"]\napproval_policy = \"on-request\"",
            1,
        );
    let session = review_session_with(&w, &profile, &[]);
    let mut op = w.operator(&session);
    let spawned = op.ok(
        "agents_spawn",
        json!({"role": "reviewer", "task": "Review src/lib.rs for correctness.", "task_kind": "review"}),
    );
    let run = spawned["agent_run_ref"].as_str().unwrap().to_string();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let seen = loop {
        let v = op.ok(
            "agent_control",
            json!({"agent_run_ref": run, "action": "inspect"}),
        );
        if v["pending_inputs"]
            .as_array()
            .is_some_and(|p| !p.is_empty())
        {
            break v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no pending input: {v:#}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let pending = &seen["pending_inputs"][0];
    assert_eq!(
        pending["method"], "item/commandExecution/requestApproval",
        "{seen:#}"
    );
    assert!(pending["params"].to_string().contains("APPROVE-ME"));
    assert_eq!(seen["state"], "running");
    assert!(!marker.exists(), "nothing runs before the answer");
    let rev = seen["control_revision"].as_i64().unwrap();
    assert_eq!(
        op.refused("agent_control", json!({"agent_run_ref": run, "action": "respond", "control_revision": rev, "request_id": "nope", "response": {"decision": "accept"}})),
        "control_failed"
    );
    let answered = op.ok(
        "agent_control",
        json!({"agent_run_ref": run, "action": "respond", "control_revision": rev + 1, "request_id": pending["request_id"], "response": {"decision": "accept"}}),
    );
    assert_eq!(answered["delivery"]["status"], "delivered", "{answered:#}");
    let job = spawned["job"].as_str().unwrap();
    assert_eq!(op.wait_terminal(job, Duration::from_secs(60)), "completed");
    let t = op.ok("agent_trace", json!({"agent_run_ref": run}));
    assert!(marker.exists(), "the approved escalation ran: {t:#}");
    let done = op.ok(
        "agent_control",
        json!({"agent_run_ref": run, "action": "inspect"}),
    );
    assert_eq!(done["pending_inputs"], json!([]), "{done:#}");
    drop(op);
    assert!(w.run(&["stop", &session]).status.success());
}
