//! The orchestrator families in process: agents, tasks and their dispatch, file locks, plans,
//! clarifications, and the agent path with its gate (a person's approval).

use serde_json::{Value, json};
use std::time::Duration;
use vox_tools_harness::Harness;

async fn spawn(h: &Harness, id: &str, capacity: i64) -> Value {
    h.ok(
        "vox_spawn_agent",
        json!({"agent_id": id, "role": "test", "capacity": capacity}),
    )
    .await
}

#[tokio::test]
async fn a_spawned_agent_gets_a_credential_that_names_it() {
    let h = Harness::boot();
    let made = spawn(&h, "a1", 1).await;
    let token = made["token"].as_str().unwrap();
    assert!(
        token.starts_with(vox_tools_orchestration::TOKEN_PREFIX),
        "{made}"
    );
    let store = h.ctx().get::<std::sync::Arc<vox_store::Store>>().unwrap();
    let agent = vox_tools_orchestration::agent_of_token(store, token)
        .unwrap()
        .unwrap();
    assert_eq!(agent.id, "a1");
    assert!(
        vox_tools_orchestration::agent_of_token(store, "voxa_nope")
            .unwrap()
            .is_none()
    );
    h.fails("vox_spawn_agent", json!({"agent_id": "a1"}), "conflict")
        .await;
}

#[tokio::test]
async fn a_submitted_task_is_assigned_to_an_agent_with_room_and_completed_by_it() {
    let h = Harness::boot();
    let queued = h
        .ok("vox_submit_task", json!({"title": "nobody yet"}))
        .await;
    assert_eq!(queued["task"]["state"], "queued", "{queued}");
    assert_eq!(queued["assigned"], json!([]));
    let id = queued["task"]["id"].as_i64().unwrap();

    // An agent with room takes it.
    let made = spawn(&h, "w1", 1).await;
    assert_eq!(made["assigned"][0]["task_id"], id, "{made}");
    let st = h.ok("vox_task_status", json!({"task_id": id})).await;
    assert_eq!(st["task"]["owner"], "w1");
    assert_eq!(st["task"]["state"], "assigned");

    // It is full: the next task waits, pinned or not.
    let second = h.ok("vox_submit_task", json!({"title": "second"})).await;
    assert_eq!(second["task"]["state"], "queued");
    let q = h.ok("vox_queue_status", json!({"agent_id": "w1"})).await;
    assert_eq!(q["queues"][0]["tasks"].as_array().unwrap().len(), 1, "{q}");

    // Completing the first frees room, and the second goes to it.
    let done = h
        .ok(
            "vox_complete_task",
            json!({"task_id": id, "result": "done", "agent_id": "w1"}),
        )
        .await;
    assert_eq!(done["task"]["state"], "completed", "{done}");
    assert_eq!(done["assigned"][0]["task_id"], second["task"]["id"]);
    h.fails(
        "vox_complete_task",
        json!({"task_id": id, "result": "again", "agent_id": "w1"}),
        "conflict",
    )
    .await;
    h.fails("vox_submit_task", json!({"title": ""}), "invalid_arguments")
        .await;

    let events = h.ok("vox_poll_events", json!({})).await;
    assert!(events["next_cursor"].as_i64().unwrap() > 0, "{events}");
}

/// `tool` (`vox_claim_file`, `vox_release_file`, `vox_check_file_owner`) on `path` for `agent`
/// (none: the operator's own view).
async fn on_file(h: &Harness, tool: &str, path: &str, agent: Option<&str>) -> Value {
    let mut args = json!({"path": path});
    if let Some(a) = agent {
        args["agent_id"] = json!(a);
    }
    h.ok(tool, args).await
}

#[tokio::test]
async fn a_file_lock_is_granted_renewed_refused_to_another_agent_and_released() {
    let h = Harness::boot();
    spawn(&h, "a", 1).await;
    spawn(&h, "b", 1).await;
    let (claim, release, owner) = ("vox_claim_file", "vox_release_file", "vox_check_file_owner");
    let got = on_file(&h, claim, "src/main.rs", Some("a")).await;
    assert_eq!(got["outcome"], "granted", "{got}");
    let again = on_file(&h, claim, "./src/main.rs", Some("a")).await;
    assert_eq!(again["outcome"], "renewed", "{again}");
    let held = on_file(&h, claim, "src/main.rs", Some("b")).await;
    assert_eq!(held["outcome"], "held", "{held}");
    assert_eq!(held["holder"]["agent"], "a");
    let conflicts = h.ok("vox_conflicts", json!({})).await;
    assert_eq!(conflicts["conflicts"][0]["requester"], "b", "{conflicts}");
    let holder = on_file(&h, owner, "src/main.rs", None).await;
    assert_eq!(holder["lock"]["agent"], "a");
    let mine = h.ok("vox_my_files", json!({"agent_id": "a"})).await;
    assert_eq!(mine["locks"].as_array().unwrap().len(), 1);

    // Only the holder releases it.
    let not = on_file(&h, release, "src/main.rs", Some("b")).await;
    assert_eq!(not["released"], false);
    let rel = on_file(&h, release, "src/main.rs", Some("a")).await;
    assert_eq!(rel["released"], true);
    let holder = on_file(&h, owner, "src/main.rs", None).await;
    assert_eq!(holder["lock"], json!(null));
    let now = on_file(&h, claim, "src/main.rs", Some("b")).await;
    assert_eq!(now["outcome"], "granted", "{now}");
    h.fails(
        claim,
        json!({"path": "../x", "agent_id": "a"}),
        "invalid_arguments",
    )
    .await;
    h.fails(claim, json!({"path": "x"}), "invalid_arguments")
        .await;
}

#[tokio::test]
async fn a_plans_steps_run_as_their_dependencies_complete_and_a_replan_changes_them() {
    let h = Harness::boot();
    let plan = h
        .ok(
            "vox_plan",
            json!({"goal": "ship it", "steps": [
                {"key": "build", "title": "build"},
                {"key": "test", "title": "test", "after": ["build"]},
            ]}),
        )
        .await;
    let id = plan["plan"]["id"].as_i64().unwrap();
    let steps = plan["plan"]["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{plan}");
    assert_eq!(
        steps[1]["task"]["depends_on"],
        json!([steps[0]["task"]["id"]])
    );
    let build = steps[0]["task"]["id"].as_i64().unwrap();

    spawn(&h, "p1", 2).await;
    let st = h.ok("vox_plan_status", json!({"plan_id": id})).await;
    assert_eq!(st["steps"][0]["task"]["owner"], "p1", "{st}");
    assert_eq!(
        st["steps"][1]["task"]["owner"],
        json!(null),
        "test waits for build"
    );
    h.ok(
        "vox_complete_task",
        json!({"task_id": build, "result": "built", "agent_id": "p1"}),
    )
    .await;
    let st = h.ok("vox_plan_status", json!({"plan_id": id})).await;
    assert_eq!(st["steps"][1]["task"]["owner"], "p1", "{st}");

    let re = h
        .ok(
            "vox_replan",
            json!({"plan_id": id, "reason": "docs too", "add": [{"key": "docs", "title": "docs", "after": ["test"]}]}),
        )
        .await;
    assert_eq!(re["plan"]["steps"].as_array().unwrap().len(), 3, "{re}");
    h.fails(
        "vox_plan",
        json!({"goal": "loop", "steps": [{"key": "a", "title": "a", "after": ["a"]}]}),
        "invalid_arguments",
    )
    .await;
    // Without steps a model plans them: there is none here.
    h.fails("vox_plan", json!({"goal": "think"}), "unavailable")
        .await;
}

#[tokio::test]
async fn an_agents_call_with_side_effects_waits_for_a_persons_approval() {
    let h = Harness::boot();
    spawn(&h, "r1", 1).await;
    let agent = h.agent("r1", "r1-session");
    // Read-only calls pass the gate; operator-only tools are not the agent's.
    h.ok_in(&agent, "vox_memory_list", json!({})).await;
    h.err_in(&agent, "vox_spawn_agent", json!({})).await;
    let names = h.tool_names(&agent);
    assert!(!names.contains(&"vox_spawn_agent".to_owned()), "{names:?}");

    let waiting = h.call_in(
        &agent,
        "vox_memory_store",
        json!({"key": "k", "value": "v"}),
    );
    let decide = async {
        let pending = loop {
            let p = h.ok("vox_pending_approvals", json!({})).await;
            if let Some(a) = p["approvals"].as_array().and_then(|a| a.first()).cloned() {
                break a;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert_eq!(pending["agent"], "r1", "{pending}");
        assert_eq!(pending["tool"], "vox_memory_store");
        h.ok(
            "vox_resolve_approval",
            json!({"approval_id": pending["id"], "decision": "approve"}),
        )
        .await;
    };
    // Bounded: a gate that stopped asking would otherwise wait out the approval timeout.
    let (out, ()) = tokio::time::timeout(Duration::from_secs(30), async {
        tokio::join!(waiting, decide)
    })
    .await
    .expect("the call waits for a person and runs once approved, within 30 s");
    assert!(!out.is_error(), "{}", out.to_json());
    let got = h.ok("vox_memory_recall", json!({"key": "k"})).await;
    assert_eq!(got["found"], true);

    // A retired agent's scope is refused.
    h.ok("vox_retire_agent", json!({"agent_id": "r1"})).await;
    h.fails_in(&agent, "vox_memory_list", json!({}), "unauthorized")
        .await;
}

#[tokio::test]
async fn a_clarification_holds_its_task_back_until_the_operator_answers() {
    let h = Harness::boot();
    let t = h.ok("vox_submit_task", json!({"title": "ambiguous"})).await;
    let task = t["task"]["id"].as_i64().unwrap();
    let q = h
        .ok(
            "vox_ask_clarification",
            json!({"question": "which region?", "options": ["eu-west", "us-east"], "gates": [task]}),
        )
        .await;
    let qid = q["id"].as_i64().unwrap();
    let inbox = h.ok("vox_feedback_list", json!({})).await;
    assert_eq!(inbox["clarifications"][0]["id"], qid, "{inbox}");
    spawn(&h, "c1", 1).await;
    let st = h.ok("vox_task_status", json!({"task_id": task})).await;
    assert_eq!(st["gated_by"], json!([qid]), "{st}");
    assert_eq!(st["task"]["owner"], json!(null));
    h.fails(
        "vox_resolve_feedback",
        json!({"id": qid, "action": "answer"}),
        "invalid_arguments",
    )
    .await;
    let done = h
        .ok(
            "vox_resolve_feedback",
            json!({"id": qid, "action": "answer", "answer": "eu-west"}),
        )
        .await;
    assert_eq!(done["assigned"][0]["task_id"], task, "{done}");
    let st = h.ok("vox_task_status", json!({"task_id": task})).await;
    assert_eq!(st["gated_by"], json!([]), "{st}");
    assert_eq!(st["task"]["owner"], "c1");
}

#[tokio::test]
async fn an_agent_changes_only_its_own_work_and_reserved_names_are_refused() {
    let h = Harness::boot();
    for reserved in ["operator", "Operator", "system"] {
        let e = h
            .fails(
                "vox_spawn_agent",
                json!({"agent_id": reserved}),
                "invalid_arguments",
            )
            .await;
        assert!(e.to_string().contains("reserved"), "{e}");
    }
    spawn(&h, "a", 4).await;
    spawn(&h, "b", 4).await;
    spawn(&h, "c", 4).await;
    let (a, b) = (h.agent("a", "sa"), h.agent("b", "sb"));
    let held = h
        .ok_in(
            &a,
            "vox_submit_task",
            json!({"title": "a's", "agent_id": "a"}),
        )
        .await["task"]["id"]
        .as_i64()
        .unwrap();
    let plan = h
        .ok_in(
            &a,
            "vox_plan",
            json!({"goal": "a's plan", "steps": [{"key": "one", "title": "one"}]}),
        )
        .await;
    let plan_id = plan["plan"]["id"].as_i64().unwrap();

    // b touches none of it: reorder, cancel, a question gating it, a replan.
    for (tool, args) in [
        ("vox_reorder_task", json!({"task_id": held, "priority": 9})),
        ("vox_cancel_task", json!({"task_id": held})),
        (
            "vox_ask_clarification",
            json!({"question": "stop?", "gates": [held]}),
        ),
        (
            "vox_replan",
            json!({"plan_id": plan_id, "reason": "mine now", "cancel": ["one"]}),
        ),
        (
            "vox_agent_handoff",
            json!({"to_agent": "c", "summary": "take it", "task_id": held}),
        ),
    ] {
        let e = h.fails_in(&b, tool, args, "conflict").await;
        assert!(e.to_string().contains("a"), "{tool} names whose it is: {e}");
    }
    let t = h.ok("vox_task_status", json!({"task_id": held})).await;
    assert_eq!(
        (
            t["task"]["priority"].as_i64(),
            t["task"]["state"].as_str(),
            &t["gated_by"]
        ),
        (Some(0), Some("assigned"), &json!([])),
        "b's refused calls changed nothing: {t}"
    );
    let p = h.ok("vox_plan_status", json!({"plan_id": plan_id})).await;
    assert_eq!(p["revision"], 1, "{p}");

    // a changes its own, and the operator anyone's.
    h.ok_in(
        &a,
        "vox_reorder_task",
        json!({"task_id": held, "priority": 5}),
    )
    .await;
    h.ok_in(
        &a,
        "vox_replan",
        json!({"plan_id": plan_id, "reason": "more", "add": [{"key": "two", "title": "two"}]}),
    )
    .await;
    h.ok("vox_reorder_task", json!({"task_id": held, "priority": 7}))
        .await;
    h.ok("vox_cancel_task", json!({"task_id": held})).await;
}
