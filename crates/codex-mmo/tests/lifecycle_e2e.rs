//! codex-mmo's session and run lifecycle beyond one supervisor's life, end to end on the real
//! `codex app-server` and the scripted model: a suspended session resumed by a new supervisor
//! (the root on its own thread, jobs continued by their controller), terminal sessions refusing
//! to resume, goal-mode jobs and their token budgets, detach and reattach, fork and compact.

mod common;

use common::review::*;
use common::{World, codex_js};
use serde_json::{Value, json};
use std::time::Duration;

/// Waits until the run of `role` is running with a host and a thread; returns the inspection.
fn running_with_host(w: &World, session: &str, role: &str) -> (Value, Value) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let v = w.inspect(session);
        if let Some(r) = runs_of(&v, role).into_iter().next()
            && r["state"] == "running"
            && r["host_pid"].is_i64()
            && r["thread_id"].is_string()
        {
            return (v, r);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the {role} never ran: {v:#}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Inspects `run` until it is in `state` (at most 60 s); returns that inspection.
fn wait_run(op: &mut common::Mcp, run: &str, state: &str) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let v = op.ok(
            "agent_control",
            json!({"agent_run_ref": run, "action": "inspect"}),
        );
        if v["state"] == state {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{run} never became {state}: {v:#}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn kill_supervisor(v: &Value) {
    unsafe {
        libc::kill(v["supervisor_pid"].as_i64().unwrap() as i32, libc::SIGKILL);
    }
    std::thread::sleep(Duration::from_millis(300));
}

fn resume(w: &World, session: &str) -> Value {
    let o = w.run(&["resume", session, "--json"]);
    assert!(
        o.status.success(),
        "resume: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

fn resume_refused(w: &World, session: &str) -> String {
    let o = w.run(&["resume", session]);
    assert!(!o.status.success(), "resume of {session} was not refused");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_suspended_session_resumes_and_its_controller_continues_the_exact_thread() {
    let Some(js) = codex_js() else { return };
    let mut w = World::new(js);
    w.git_workspace(&[(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
    )]);
    let answer = verdict(&w);
    w.start_model(&json!({"actors": [
        {"name": "reviewer", "match": REVIEWER_MARK, "steps": [[{"say": "looking at src/lib.rs"}, {"hang": true}], [{"say": answer}]]},
    ]}));
    let profile = review_profile("").replacen(
        r#"actions = ["inspect", "stop"]"#,
        r#"actions = ["inspect", "continue", "stop"]"#,
        1,
    );
    let session = review_session_with(&w, &profile, &[]);
    let mut op = w.operator(&session);
    let spawned = op.ok(
        "agents_spawn",
        json!({"role": "reviewer", "task": "Review src/lib.rs for correctness.", "task_kind": "review"}),
    );
    let job = spawned["job"].as_str().unwrap().to_string();
    let run = spawned["agent_run_ref"].as_str().unwrap().to_string();
    let (v, r) = running_with_host(&w, &session, "reviewer");
    let thread = r["thread_id"].as_str().unwrap().to_string();
    wait_for_actor(&w, "reviewer");
    drop(op);
    kill_supervisor(&v);

    // The next look recovers it: suspended, with the job's partial evidence.
    let v = w.inspect(&session);
    assert_eq!(v["state"], "suspended", "{v:#}");
    assert_eq!(runs_of(&v, "reviewer")[0]["state"], "suspended");
    // A live session's control needs its supervisor; resuming brings one.
    let resumed = resume(&w, &session);
    assert_eq!(resumed["state"], "running", "{resumed:#}");
    assert_eq!(resumed["awaiting_continue"], json!([run]), "{resumed:#}");
    assert!(resume_refused(&w, &session).contains("only a suspended session is resumed"));
    let v = w.inspect(&session);
    assert_ne!(v["supervisor_pid"], Value::Null);
    assert_eq!(
        runs_of(&v, "lead")[0]["state"],
        "running",
        "the operator-driven root runs again: {v:#}"
    );
    let audit: Vec<&str> = v["audit"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["action"].as_str())
        .collect();
    assert!(audit.contains(&"session_resume"), "{audit:?}");

    // The job stays suspended until its controller continues it, on its exact thread.
    let mut op = w.operator(&session);
    let seen = op.ok(
        "agent_control",
        json!({"agent_run_ref": run, "action": "inspect"}),
    );
    assert_eq!(seen["state"], "suspended");
    assert_eq!(seen["result"]["final"], false, "{seen:#}");
    let continued = op.ok(
        "agent_control",
        json!({"agent_run_ref": run, "action": "continue", "control_revision": seen["control_revision"]}),
    );
    assert_eq!(continued["state"], "running", "{continued:#}");
    assert_eq!(op.wait_terminal(&job, Duration::from_secs(60)), "completed");
    let done = op.ok(
        "agent_control",
        json!({"agent_run_ref": run, "action": "inspect"}),
    );
    assert_eq!(done["thread_id"], thread.as_str(), "{done:#}");
    assert_eq!(done["result"]["final"], true);
    let r = op.ok("agent_result", json!({"job": job}));
    assert_eq!(r["value"]["verdict"], "approve", "{r:#}");
    let last = w
        .model_requests()
        .into_iter()
        .rfind(|r| r["actor"] == "reviewer")
        .unwrap();
    assert!(
        last["body"]
            .to_string()
            .contains("Review src/lib.rs for correctness."),
        "the continued turn carries the thread's history"
    );
    drop(op);

    // A terminal session cannot be resumed.
    assert!(w.run(&["stop", &session]).status.success());
    let why = resume_refused(&w, &session);
    assert!(why.contains("terminal session cannot be resumed"), "{why}");
}

#[test]
fn a_resumed_root_continues_its_own_thread_and_a_completed_root_session_stays_ended() {
    let Some(js) = codex_js() else { return };
    let mut w = World::new(js);
    w.git_workspace(&[("README.md", "hello\n")]);
    w.start_model(&json!({"actors": [
        {"name": "lead", "match": LEAD_MARK, "steps": [
            [{"say": "Starting on it."}, {"hang": true}],
            [{"say": "Resumed and done."}],
        ]},
    ]}));
    let pack = review_pack(&w);
    let session = w.start_session(&pack, Some("Say hello."));
    let (v, root) = running_with_host(&w, &session, "lead");
    let thread = root["thread_id"].as_str().unwrap().to_string();
    wait_for_actor(&w, "lead");
    kill_supervisor(&v);
    let v = w.inspect(&session);
    assert_eq!(v["state"], "suspended", "{v:#}");
    assert_eq!(runs_of(&v, "lead")[0]["state"], "suspended");

    resume(&w, &session);
    let v = w.wait_state(
        &session,
        &["completed", "failed", "stopped"],
        Duration::from_secs(60),
    );
    assert_eq!(v["state"], "completed", "{v:#}");
    let root = &runs_of(&v, "lead")[0];
    assert_eq!(root["state"], "completed");
    assert_eq!(root["thread_id"], thread.as_str(), "the root's own thread");
    let last = w
        .model_requests()
        .into_iter()
        .rfind(|r| r["actor"] == "lead")
        .unwrap();
    let body = last["body"].to_string();
    assert!(
        body.contains("Say hello.") && body.contains("resumed now"),
        "the resumed turn holds the root's history and the continuation: {body}"
    );
    let why = resume_refused(&w, &session);
    assert!(
        why.contains("`completed`: a terminal session cannot be resumed"),
        "{why}"
    );
}

#[test]
fn a_goal_mode_job_pauses_at_its_token_budget_and_continues_within_its_ceiling() {
    let Some(js) = codex_js() else { return };
    let mut w = World::new(js);
    w.git_workspace(&[(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
    )]);
    let answer = verdict(&w);
    // Every answer costs 6,020 tokens: the goal's 10,000 are used up by the second.
    let heavy = json!({"usage": {"input_tokens": 6000, "output_tokens": 20}});
    w.start_model(&json!({"actors": [
        {"name": "reviewer", "match": REVIEWER_MARK, "steps": [
            [{"say": "reading src/lib.rs"}, heavy],
            [{"say": "still reading"}, heavy],
            [{"say": answer}, {"call": {"name": "update_goal", "arguments": {"status": "complete"}}}, heavy],
            [{"say": answer}, heavy],
        ]},
    ]}));
    let profile = review_profile("")
        .replacen(
            r#"actions = ["inspect", "stop"]"#,
            r#"actions = ["inspect", "continue", "stop"]"#,
            1,
        )
        .replacen(
            "allowed_task_kinds = [\"review\"]",
            "allowed_task_kinds = [\"review\"]\nexecution_mode = \"goal\"\ngoal_token_budget = 10000\nmax_goal_token_budget = 30000",
            1,
        );
    let session = review_session_with(&w, &profile, &[]);
    let mut op = w.operator(&session);
    let spawned = op.ok(
        "agents_spawn",
        json!({"role": "reviewer", "task": "Review src/lib.rs for correctness.", "task_kind": "review"}),
    );
    let job = spawned["job"].as_str().unwrap().to_string();
    let run = spawned["agent_run_ref"].as_str().unwrap().to_string();
    let seen = wait_run(&mut op, &run, "paused");
    let thread = seen["thread_id"].as_str().unwrap().to_string();
    assert_eq!(seen["goal"]["status"], "budgetLimited", "{seen:#}");
    assert_eq!(seen["goal"]["token_budget"], 10000, "{seen:#}");
    assert!(
        seen["goal"]["tokens_used"].as_i64().unwrap() >= 10000,
        "{seen:#}"
    );
    assert_eq!(seen["goal"]["max_goal_token_budget"], 30000);
    assert!(
        seen["reason"].as_str().unwrap().contains("token budget"),
        "{seen:#}"
    );
    assert_eq!(seen["result"]["final"], false);
    let rev = seen["control_revision"].as_i64().unwrap();
    // The operator sees the goal's budget use live.
    let attach = w
        .cmd()
        .args(["attach", &session])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    unsafe {
        libc::kill(attach.id() as i32, libc::SIGINT);
    }
    let shown = attach.wait_with_output().unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains("paused rev")
            && shown.contains("· goal budgetLimited ")
            && shown.contains("/10000 tokens (ceiling 30000)"),
        "{shown}"
    );
    // Through the operator's CLI as through the tool: above the ceiling is refused.
    let o = w.run(&[
        "control",
        &session,
        &run,
        "continue",
        "--goal-token-budget",
        "40000",
    ]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("goal_budget_ceiling"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Above the ceiling, or not larger: refused before anything is delivered.
    assert_eq!(
        op.refused("agent_control", json!({"agent_run_ref": run, "action": "continue", "control_revision": rev, "goal_token_budget": 40000})),
        "goal_budget_ceiling"
    );
    assert_eq!(
        op.refused("agent_control", json!({"agent_run_ref": run, "action": "continue", "control_revision": rev, "goal_token_budget": 10000})),
        "invalid_arguments"
    );
    assert_eq!(
        op.refused("agent_control", json!({"agent_run_ref": run, "action": "continue", "control_revision": rev, "message": "go on"})),
        "invalid_arguments"
    );
    let continued = op.ok(
        "agent_control",
        json!({"agent_run_ref": run, "action": "continue", "control_revision": rev, "goal_token_budget": 30000}),
    );
    assert_eq!(continued["state"], "running", "{continued:#}");
    std::thread::sleep(Duration::from_secs(5));
    let dbg = op.ok(
        "agent_control",
        json!({"agent_run_ref": run, "action": "inspect"}),
    );
    let t = op.ok("agent_trace", json!({"agent_run_ref": run, "filter": ["goal", "turn", "tokenUsage", "agentMessage", "error"]}));
    let reqs: Vec<String> = w
        .model_requests()
        .iter()
        .map(|r| format!("{} {}", r["actor"], r["step"]))
        .collect();
    eprintln!("DEBUG {dbg:#} {reqs:?}\nTRACE {t:#}");
    assert_eq!(op.wait_terminal(&job, Duration::from_secs(60)), "completed");
    let done = op.ok(
        "agent_control",
        json!({"agent_run_ref": run, "action": "inspect"}),
    );
    assert_eq!(done["thread_id"], thread.as_str());
    assert_eq!(done["goal"]["status"], "complete", "{done:#}");
    assert_eq!(done["goal"]["token_budget"], 30000, "{done:#}");
    let r = op.ok("agent_result", json!({"job": job}));
    assert_eq!(r["value"]["verdict"], "approve", "{r:#}");
    drop(op);
    assert!(w.run(&["stop", &session]).status.success());
}

#[test]
fn detach_reattach_compact_and_fork_of_a_persisted_thread() {
    let Some(js) = codex_js() else { return };
    let mut w = World::new(js);
    w.git_workspace(&[(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
    )]);
    let answer = verdict(&w);
    w.start_model(&json!({"actors": [
        {"name": "reviewer", "match": REVIEWER_MARK, "steps": [
            [{"say": "looking at src/lib.rs"}, {"hang": true}],
            [{"say": "SUMMARY-OF-WORK: half of src/lib.rs reviewed"}],
            [{"say": answer}],
            [{"say": answer}],
        ]},
        {"name": "other", "match": "", "steps": [[{"say": "SUMMARY-OF-WORK: half of src/lib.rs reviewed"}]]},
    ]}));
    let profile = review_profile("").replacen(
        r#"actions = ["inspect", "stop"]"#,
        r#"actions = ["inspect", "pause", "continue", "detach", "compact", "fork", "stop"]"#,
        1,
    );
    let session = review_session_with(&w, &profile, &[]);
    let mut op = w.operator(&session);
    let spawned = op.ok(
        "agents_spawn",
        json!({"role": "reviewer", "task": "Review src/lib.rs for correctness.", "task_kind": "review"}),
    );
    let job = spawned["job"].as_str().unwrap().to_string();
    let run = spawned["agent_run_ref"].as_str().unwrap().to_string();
    wait_for_actor(&w, "reviewer");
    let seen = wait_run(&mut op, &run, "running");
    let pid = seen["host_pid"].clone();
    let thread = seen["thread_id"].as_str().unwrap().to_string();
    let ctl = |op: &mut common::Mcp, action: &str, extra: Value| {
        let rev = op.ok(
            "agent_control",
            json!({"agent_run_ref": run, "action": "inspect"}),
        )["control_revision"]
            .clone();
        let mut args = json!({"agent_run_ref": run, "action": action, "control_revision": rev});
        for (k, v) in extra.as_object().unwrap() {
            args[k] = v.clone();
        }
        op.call("agent_control", args)
    };

    // A running job's thread is not forked (pause it first), nor compacted.
    let (v, err) = ctl(&mut op, "fork", json!({}));
    assert!(err && v["error"]["code"] == "control_failed", "{v}");
    let (v, err) = ctl(&mut op, "compact", json!({}));
    assert!(err && v["error"]["code"] == "control_failed", "{v}");

    // Detach: the job goes on (same host, its admission kept), its evidence so far partial.
    let (v, err) = ctl(&mut op, "detach", json!({}));
    assert!(!err, "{v}");
    assert_eq!(v["state"], "running", "{v:#}");
    assert_eq!(v["detached"], true, "{v:#}");
    assert_eq!(v["host_pid"], pid);
    assert_eq!(v["result"]["final"], false, "{v:#}");
    let (v, err) = ctl(&mut op, "detach", json!({}));
    assert!(err && v["error"]["code"] == "control_failed", "{v}");
    // Continue reattaches: no new admission, no new host.
    let (v, err) = ctl(&mut op, "continue", json!({}));
    assert!(!err, "{v}");
    assert_eq!(v["detached"], false, "{v:#}");
    assert_eq!(v["host_pid"], pid);
    assert_eq!(v["delivery"]["answer"]["reattached"], true, "{v:#}");

    // Pause, then compact the durable thread: the job stays paused.
    let (v, err) = ctl(&mut op, "pause", json!({}));
    assert!(!err, "{v}");
    let before = w.model_requests().len();
    let (v, err) = ctl(&mut op, "compact", json!({}));
    assert!(!err, "{v}");
    assert_eq!(v["state"], "paused", "{v:#}");
    assert_eq!(v["delivery"]["answer"]["compacted"], true, "{v:#}");
    assert_eq!(v["thread_id"], thread.as_str());
    assert!(
        w.model_requests().len() > before,
        "the compaction asked the model"
    );
    let trace = op.ok(
        "agent_trace",
        json!({"agent_run_ref": run, "filter": ["contextCompaction"]}),
    );
    assert!(
        !trace["records"].as_array().unwrap().is_empty(),
        "{trace:#}"
    );

    // Fork: a new job of the same role and parent on a fork of the persisted thread.
    let (v, err) = ctl(&mut op, "fork", json!({}));
    assert!(!err, "{v}");
    let fork = v.clone();
    assert_eq!(
        fork["forked_from"]["agent_run_ref"],
        run.as_str(),
        "{fork:#}"
    );
    assert_eq!(fork["parent"], seen["parent"]);
    let fork_job = fork["job"].as_str().unwrap().to_string();
    assert_ne!(fork_job, job);
    let end = op.wait_terminal(&fork_job, Duration::from_secs(60));
    let dbg = op.ok(
        "agent_control",
        json!({"agent_run_ref": fork["agent_run_ref"], "action": "inspect"}),
    );
    let reqs: Vec<String> = w
        .model_requests()
        .iter()
        .map(|r| format!("{} {}", r["actor"], r["step"]))
        .collect();
    assert_eq!(end, "completed", "{dbg:#} {reqs:?}");
    let forked = op.ok(
        "agent_control",
        json!({"agent_run_ref": fork["agent_run_ref"], "action": "inspect"}),
    );
    assert_ne!(forked["thread_id"], thread.as_str(), "a new thread");
    let r = op.ok("agent_result", json!({"job": fork_job}));
    assert_eq!(r["value"]["verdict"], "approve", "{r:#}");
    let first_fork_request = w
        .model_requests()
        .into_iter()
        .filter(|r| r["actor"] == "reviewer")
        .nth(2)
        .unwrap();
    assert!(
        first_fork_request["body"]
            .to_string()
            .contains("You are a fork"),
        "the fork's turn"
    );
    // The source is unchanged by its fork, and continues on its own thread.
    let src = wait_run(&mut op, &run, "paused");
    assert_eq!(src["thread_id"], thread.as_str());
    let (v, err) = ctl(&mut op, "continue", json!({}));
    assert!(!err, "{v}");
    assert_eq!(op.wait_terminal(&job, Duration::from_secs(60)), "completed");
    drop(op);
    assert!(w.run(&["stop", &session]).status.success());
}

/// Inspects the root through the operator until it is in `state`.
fn root_state(w: &World, session: &str, state: &str) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let v = w.inspect(session);
        if runs_of(&v, "lead")[0]["state"] == state {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the root never became {state}: {v:#}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn lead_requests(w: &World) -> Vec<Value> {
    w.model_requests()
        .into_iter()
        .filter(|r| r["actor"] == "lead")
        .collect()
}

fn wait_lead_requests(w: &World, n: usize) -> Vec<Value> {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let r = lead_requests(w);
        if r.len() >= n {
            return r;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the root made {} model requests, not {n}",
            r.len()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_operator_pauses_interrupts_and_continues_the_root_on_its_own_thread() {
    let Some(js) = codex_js() else { return };
    let mut w = World::new(js);
    w.git_workspace(&[("README.md", "hello\n")]);
    w.start_model(&json!({"actors": [
        {"name": "lead", "match": LEAD_MARK, "steps": [
            [{"say": "Starting."}, {"hang": true}],
            [{"say": "Going on."}, {"hang": true}],
            [{"say": "Done."}],
        ]},
    ]}));
    let pack = review_pack(&w);
    let session = w.start_session(&pack, Some("Say hello."));
    wait_lead_requests(&w, 1);
    let v = root_state(&w, &session, "running");
    let root = runs_of(&v, "lead")[0].clone();
    let root_ref = root["agent_run_ref"].as_str().unwrap().to_string();
    let thread = root["thread_id"].as_str().unwrap().to_string();
    let host = root["host_pid"].as_i64().unwrap();

    // Pause: the root's host is retired, the session waits (its supervisor lives on).
    let o = w.run(&["control", &session, &root_ref, "pause", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = root_state(&w, &session, "paused");
    assert_eq!(v["state"], "paused", "{v:#}");
    assert_ne!(v["supervisor_pid"], Value::Null);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !std::path::Path::new(&format!("/proc/{host}")).exists() || is_zombie(host),
        "a paused root's host is retired"
    );

    // Continue with the operator's message, on the root's own thread.
    let o = w.run(&[
        "control",
        &session,
        &root_ref,
        "continue",
        "--message",
        "Go on, please.",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let reqs = wait_lead_requests(&w, 2);
    let body = reqs[1]["body"].to_string();
    assert!(
        body.contains("Say hello.") && body.contains("Go on, please."),
        "the continued turn holds the root's history: {body}"
    );
    let v = root_state(&w, &session, "running");
    assert_eq!(v["state"], "running");
    assert_eq!(runs_of(&v, "lead")[0]["thread_id"], thread.as_str());

    // Interrupt: its turn ends through the app-server and the root pauses.
    let o = w.run(&["control", &session, &root_ref, "interrupt"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = root_state(&w, &session, "paused");
    assert!(
        runs_of(&v, "lead")[0]["reason"]
            .as_str()
            .unwrap()
            .contains("interrupted"),
        "{v:#}"
    );
    // Finalize a paused root: it continues with the request for its final answer.
    let o = w.run(&["control", &session, &root_ref, "finalize"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = w.wait_state(
        &session,
        &["completed", "failed", "stopped"],
        Duration::from_secs(60),
    );
    assert_eq!(v["state"], "completed", "{v:#}");
    let root = &runs_of(&v, "lead")[0];
    assert_eq!(root["thread_id"], thread.as_str());
    assert_eq!(root["last_control"]["action"], "finalize");
    assert!(
        lead_requests(&w)[2]["body"]
            .to_string()
            .contains("Finish now"),
        "the finalizing turn"
    );
}

#[test]
fn a_goal_mode_root_pauses_at_its_budget_and_its_operator_extends_it() {
    let Some(js) = codex_js() else { return };
    let mut w = World::new(js);
    w.git_workspace(&[("README.md", "hello\n")]);
    let heavy = json!({"usage": {"input_tokens": 6000, "output_tokens": 20}});
    w.start_model(&json!({"actors": [
        {"name": "lead", "match": LEAD_MARK, "steps": [
            [{"say": "Working."}, heavy],
            [{"say": "Still working."}, heavy],
            [{"call": {"name": "update_goal", "arguments": {"status": "complete"}}}, heavy],
            [{"say": "Goal complete."}, heavy],
        ]},
    ]}));
    let goal =
        "execution_mode = \"goal\"\ngoal_token_budget = 10000\nmax_goal_token_budget = 30000\n";
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
                &format!("{REVIEWER_MARK} You review."),
            ),
            ("contracts/review.json", REVIEW_CONTRACT),
        ],
    );
    let session = w.start_session(&pack, Some("Say hello."));
    let v = root_state(&w, &session, "paused");
    assert_eq!(v["state"], "paused", "{v:#}");
    let root = runs_of(&v, "lead")[0].clone();
    assert_eq!(root["goal"]["status"], "budgetLimited", "{root:#}");
    let root_ref = root["agent_run_ref"].as_str().unwrap().to_string();
    // The operator stays within the ceiling.
    let o = w.run(&[
        "control",
        &session,
        &root_ref,
        "continue",
        "--goal-token-budget",
        "30001",
    ]);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("goal_budget_ceiling"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = w.run(&[
        "control",
        &session,
        &root_ref,
        "continue",
        "--goal-token-budget",
        "30000",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = w.wait_state(
        &session,
        &["completed", "failed", "stopped"],
        Duration::from_secs(60),
    );
    assert_eq!(v["state"], "completed", "{v:#}");
    let root = &runs_of(&v, "lead")[0];
    assert_eq!(root["goal"]["status"], "complete", "{root:#}");
    assert_eq!(root["goal"]["token_budget"], 30000);
}

#[test]
fn a_paused_writer_forks_into_a_worktree_holding_its_changes() {
    let Some(js) = codex_js() else { return };
    let mut w = World::new(js);
    w.git_workspace(&[("src/a.rs", "// a\n"), ("README.md", "readme\n")]);
    let exec = |cmd: &str| json!({"call": {"name": "exec_command", "arguments": {"cmd": cmd}}});
    w.start_model(&json!({"actors": [
        {"name": "w", "match": "TASK-W", "steps": [
            exec("printf 'pub fn a() {}\\n' > src/a.rs"),
            [{"say": "half done"}, {"hang": true}],
            [{"say": "the fork is done"}],
            [{"say": "the source is done"}],
        ]},
    ]}));
    let profile = r#"schema_version = 8
id = "forks"
version = "8.0.0"
display_name = "Forks"
description = "A root and a writer on a scripted model."
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
actions = ["inspect", "pause", "continue", "fork", "stop"]

[agents.implementer]
description = "Implements one scoped change"
model = "scripted_responses__scripted_large"
reasoning = "none"
permissions = "workspace-write"
backends = ["mcp"]
max_active = 2
allowed_task_kinds = ["implementation"]
network_access = true
instructions = "agents/implementer.md"

[coordination]
max_active_agents = 3
max_active_writers = 2
"#;
    let pack = w.pack(
        "forks",
        profile,
        &[
            ("agents/lead.md", &format!("{LEAD_MARK} You lead.")),
            ("agents/implementer.md", "You implement."),
        ],
    );
    let session = w.start_session(&pack, None);
    let mut op = w.operator(&session);
    let src = op.ok("agents_spawn", json!({"role": "implementer", "task": "TASK-W change src/a.rs", "task_kind": "implementation", "write_scope": ["src/a.rs"]}));
    let run = src["agent_run_ref"].as_str().unwrap().to_string();
    let job = src["job"].as_str().unwrap().to_string();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while w
        .model_requests()
        .iter()
        .filter(|r| r["actor"] == "w")
        .count()
        < 2
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the writer never wrote"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let seen = wait_run(&mut op, &run, "running");
    let paused = op.ok(
        "agent_control",
        json!({"agent_run_ref": run, "action": "pause", "control_revision": seen["control_revision"]}),
    );
    assert_eq!(paused["state"], "paused", "{paused:#}");
    // Its changes so far are kept as a partial patch (evidence, never integrated).
    assert_eq!(paused["patch"]["state"], "partial", "{paused:#}");
    assert!(paused["patch"]["files"].to_string().contains("src/a.rs"));
    let fork = op.ok(
        "agent_control",
        json!({"agent_run_ref": run, "action": "fork"}),
    );
    assert_eq!(fork["write_scope"], json!(["src/a.rs"]), "{fork:#}");
    let fork_job = fork["job"].as_str().unwrap().to_string();
    assert_eq!(
        op.wait_terminal(&fork_job, Duration::from_secs(60)),
        "completed"
    );
    // The fork never wrote src/a.rs itself: its patch holds the change it inherited.
    let forked = op.ok(
        "agent_inspect",
        json!({"agent_run_ref": fork["agent_run_ref"]}),
    );
    let files = forked["patch"]["files"].to_string();
    assert!(files.contains("src/a.rs"), "{forked:#}");
    assert_eq!(
        std::fs::read_to_string(w.ws().join("src/a.rs")).unwrap(),
        "// a\n",
        "nothing reached the canonical checkout"
    );
    // The source continues in its own kept worktree.
    let again = wait_run(&mut op, &run, "paused");
    op.ok(
        "agent_control",
        json!({"agent_run_ref": run, "action": "continue", "control_revision": again["control_revision"]}),
    );
    assert_eq!(op.wait_terminal(&job, Duration::from_secs(60)), "completed");
    let done = op.ok("agent_inspect", json!({"agent_run_ref": run}));
    assert!(
        done["patch"]["files"].to_string().contains("src/a.rs"),
        "{done:#}"
    );
    assert_eq!(
        done["patch"]["state"], "recorded",
        "the completed job's own patch"
    );
    drop(op);
    assert!(w.run(&["stop", &session]).status.success());
}

#[test]
fn in_a_hybrid_team_a_native_run_pauses_logically_beside_an_mcp_job() {
    let Some(js) = codex_js() else { return };
    let mut w = World::new(js);
    w.git_workspace(&[("README.md", "hello\n")]);
    const SCOUT: &str = "SCOUT-ROLE-5d1e";
    let collab = |tool: &str, args: Value| json!({"call": {"name": tool, "namespace": "multi_agent_v1", "arguments": args}});
    w.start_model(&json!({"actors": [
        {"name": "scout", "match": SCOUT, "steps": [
            [{"say": "scouting"}, {"hang": true}],
            [{"say": "SCOUT-ANSWER the repository has a README"}],
        ]},
        {"name": "reviewer", "match": REVIEWER_MARK, "steps": [[{"say": "the README is fine"}]]},
        {"name": "lead", "match": LEAD_MARK, "steps": [
            collab("spawn_agent", json!({"agent_type": "test-scout", "message": "Map the repository."})),
            [{"say": "waiting for the scout"}, {"hang": true}],
        ]},
    ]}));
    let profile = r#"schema_version = 8
id = "hybrid-team"
version = "8.0.0"
display_name = "Hybrid team"
description = "A root, a native scout and an MCP reviewer on a scripted model."
maturity = "lab"
root = "lead"

[coordination]
orchestration = "hybrid"
max_active_agents = 3
max_active_writers = 0

[agents.lead]
kind = "root"
description = "Root"
model = "scripted_responses__scripted_large"
reasoning = "none"
permissions = "workspace-write"
can_spawn = ["scout", "reviewer"]
trust = "high"
instructions = "agents/lead.md"

[agents.lead.controls.scout]
actions = ["inspect", "pause", "continue", "compact", "stop"]

[agents.reviewer]
description = "Reviewer"
model = "scripted_responses__scripted_large"
reasoning = "none"
permissions = "read-only"
backends = ["mcp"]
allowed_task_kinds = ["review"]
instructions = "agents/reviewer.md"

[agents.scout]
description = "Native scout that maps the repository"
model = "scripted_responses__scripted_large"
reasoning = "none"
permissions = "read-only"
backends = ["native"]
allowed_task_kinds = ["analysis"]
native_name = "test-scout"
instructions = "agents/scout.md"
"#;
    let pack = w.pack(
        "hybrid-team",
        profile,
        &[
            ("agents/lead.md", &format!("{LEAD_MARK} You lead.")),
            ("agents/scout.md", &format!("{SCOUT} You scout.")),
            (
                "agents/reviewer.md",
                &format!("{REVIEWER_MARK} You review."),
            ),
        ],
    );
    let session = w.start_session(&pack, Some("Have the repository mapped."));
    wait_for_actor(&w, "scout");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let scout = loop {
        let v = w.inspect(&session);
        if let Some(s) = runs_of(&v, "scout").into_iter().next()
            && s["state"] == "running"
        {
            break s;
        }
        assert!(std::time::Instant::now() < deadline, "no scout run: {v:#}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(scout["backend"], "native");
    let scout_ref = scout["agent_run_ref"].as_str().unwrap().to_string();
    let thread = scout["thread_id"].as_str().unwrap().to_string();
    let root_host = runs_of(&w.inspect(&session), "lead")[0]["host_pid"].clone();
    // Beside it, an Agent-MCP job of the same team, in a host of its own.
    let mut op = w.operator(&session);
    let job = op.ok(
        "agents_spawn",
        json!({"role": "reviewer", "task": "Review README.md.", "task_kind": "review"}),
    );
    assert_eq!(
        op.wait_terminal(job["job"].as_str().unwrap(), Duration::from_secs(60)),
        "completed"
    );
    let r = op.ok(
        "agent_inspect",
        json!({"agent_run_ref": job["agent_run_ref"]}),
    );
    assert_eq!(r["backend"], "mcp");
    assert!(
        r["home"].as_str().unwrap().ends_with("/homes/reviewer"),
        "its own host's home: {r:#}"
    );
    drop(op);

    // A logical pause: the scout's turn is interrupted, the run stays paused, the root's host
    // (which the scout's thread lives in) goes on.
    let o = w.run(&["control", &session, &scout_ref, "pause", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["state"], "paused", "{v:#}");
    assert!(v["delivery"]["answer"]["interrupted"].is_string(), "{v:#}");
    std::thread::sleep(Duration::from_millis(500));
    let v = w.inspect(&session);
    assert_eq!(runs_of(&v, "scout")[0]["state"], "paused", "{v:#}");
    assert_eq!(runs_of(&v, "lead")[0]["state"], "running");
    assert_eq!(runs_of(&v, "lead")[0]["host_pid"], root_host);
    // Pause and continue are all a native run takes beyond inspection: it has no host to
    // compact or fork from.
    let o = w.run(&["control", &session, &scout_ref, "compact"]);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("control_unsupported"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = w.run(&[
        "control",
        &session,
        &scout_ref,
        "continue",
        "--message",
        "Go on: finish the map.",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let v = w.inspect(&session);
        let s = &runs_of(&v, "scout")[0];
        if s["state"] == "completed" {
            assert_eq!(s["thread_id"], thread.as_str());
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the scout never completed: {v:#}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let last = w
        .model_requests()
        .into_iter()
        .rfind(|r| r["actor"] == "scout")
        .unwrap();
    assert!(
        last["body"].to_string().contains("Go on: finish the map."),
        "the continued turn on the scout's thread"
    );
    assert!(w.run(&["stop", &session]).status.success());
}

#[test]
fn a_host_killed_mid_delivery_leaves_the_control_delivery_unknown() {
    let Some(js) = codex_js() else { return };
    let mut w = World::new(js);
    w.git_workspace(&[(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
    )]);
    w.start_model(&json!({"actors": [
        {"name": "reviewer", "match": REVIEWER_MARK, "steps": [[{"say": "looking"}, {"hang": true}]]},
    ]}));
    let profile = review_profile("").replacen(
        r#"actions = ["inspect", "stop"]"#,
        r#"actions = ["inspect", "steer", "stop"]"#,
        1,
    );
    let session = review_session_with(&w, &profile, &[]);
    let mut op = w.operator(&session);
    let spawned = op.ok(
        "agents_spawn",
        json!({"role": "reviewer", "task": "Review src/lib.rs for correctness.", "task_kind": "review"}),
    );
    let run = spawned["agent_run_ref"].as_str().unwrap().to_string();
    wait_for_actor(&w, "reviewer");
    let seen = wait_run(&mut op, &run, "running");
    let pid = seen["host_pid"].as_i64().unwrap() as i32;
    let rev = seen["control_revision"].as_i64().unwrap();
    // The steer reaches a frozen host (delivery has begun), which is then killed before it
    // answers: whether the turn got the input is unknown.
    unsafe { libc::kill(-pid, libc::SIGSTOP) };
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(700));
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    });
    let t = std::time::Instant::now();
    assert_eq!(
        op.refused("agent_control", json!({"agent_run_ref": run, "action": "steer", "control_revision": rev, "message": "hello?"})),
        "delivery_unknown"
    );
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    killer.join().unwrap();
    let after = op.ok(
        "agent_control",
        json!({"agent_run_ref": run, "action": "inspect"}),
    );
    assert_eq!(
        after["last_control"]["status"], "delivery_unknown",
        "{after:#}"
    );
    assert_eq!(after["last_control"]["action"], "steer");
    assert_eq!(
        after["control_revision"],
        rev + 1,
        "inspect before retrying"
    );
    // The killed host failed the job, its partial evidence kept.
    let failed = wait_run(&mut op, &run, "failed");
    assert_eq!(failed["result"]["final"], false, "{failed:#}");
    drop(op);
    assert!(w.run(&["stop", &session]).status.success());
}
