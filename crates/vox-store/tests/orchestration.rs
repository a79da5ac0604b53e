//! Agents, locks, routing, plans, handoffs, clarifications and approvals in the journey store.

mod support;

use support::open;
use vox_store::*;

fn agent(s: &Store, id: &str, capacity: i64) -> Agent {
    s.agent_spawn(
        &NewAgent {
            id: id.into(),
            profile: "orchestrator".into(),
            capacity,
            ..NewAgent::default()
        },
        &format!("hash-of-{id}"),
        "operator",
    )
    .unwrap()
}

fn task(s: &Store, title: &str, files: &[&str], pin: Option<&str>) -> Task {
    s.task_submit(&NewTask {
        title: title.into(),
        files: files.iter().map(|f| f.to_string()).collect(),
        pinned_agent: pin.map(str::to_owned),
        ..NewTask::default()
    })
    .unwrap()
}

fn routed(a: &[Assignment]) -> Vec<(i64, &str, &str)> {
    a.iter()
        .map(|x| (x.task_id, x.agent.as_str(), x.why))
        .collect()
}

#[test]
fn agent_ids_are_checked_and_never_reused_and_credentials_stop_at_retirement() {
    let (_d, s) = open();
    agent(&s, "a1", 1);
    let e = s
        .agent_spawn(
            &NewAgent {
                id: "a1".into(),
                profile: "dev".into(),
                capacity: 1,
                ..NewAgent::default()
            },
            "other",
            "operator",
        )
        .unwrap_err();
    assert!(e.to_string().contains("exists already"), "{e}");
    for bad in ["", "-x", "a b", &"x".repeat(65)] {
        let e = s
            .agent_spawn(
                &NewAgent {
                    id: bad.into(),
                    capacity: 1,
                    ..NewAgent::default()
                },
                "h",
                "operator",
            )
            .unwrap_err();
        assert!(e.to_string().contains("agent id"), "{bad:?}: {e}");
    }
    assert_eq!(s.agent_by_token("hash-of-a1").unwrap().unwrap().id, "a1");
    assert_eq!(s.agent_get("a1").unwrap().host, None);
    // A runner agent records where its worker runs.
    let w = s
        .agent_spawn(
            &NewAgent {
                id: "w1".into(),
                runner: Some("codex".into()),
                capacity: 1,
                host: Some("box:/srv/replica-1".into()),
                ..NewAgent::default()
            },
            "hash-of-w1",
            "operator",
        )
        .unwrap();
    assert_eq!(w.host.as_deref(), Some("box:/srv/replica-1"));
    s.agent_retire("w1", "operator", "done").unwrap();
    s.agent_retire("a1", "operator", "done").unwrap();
    assert!(s.agent_by_token("hash-of-a1").unwrap().is_none());
    assert!(s.agent_retire("a1", "operator", "again").is_err());
    assert!(s.agents(false).unwrap().is_empty());
    assert_eq!(s.agents(true).unwrap().len(), 2);
}

#[test]
fn dispatch_follows_pins_then_file_affinity_then_room() {
    let (_d, s) = open();
    agent(&s, "a1", 2);
    agent(&s, "a2", 2);
    assert!(matches!(
        s.lock_claim("src/lib.rs", "a2", None, 60_000).unwrap(),
        Claim::Granted { .. }
    ));
    let pinned = task(&s, "pinned", &[], Some("a1"));
    let near = task(&s, "near", &["./src//lib.rs"], None);
    let free = task(&s, "free", &[], None);
    let made = s.dispatch(100).unwrap();
    assert_eq!(
        routed(&made),
        [
            (pinned.id, "a1", "pinned"),
            (near.id, "a2", "file affinity"),
            (free.id, "a1", "least loaded")
        ]
    );
    // Both full now: a new task waits, then goes where room appears.
    let late = task(&s, "late", &["src/lib.rs"], None);
    let extra = task(&s, "extra", &[], None);
    assert_eq!(
        routed(&s.dispatch(100).unwrap()),
        [(late.id, "a2", "file affinity")]
    );
    assert!(s.dispatch(100).unwrap().is_empty());
    s.task_move(
        free.id,
        &TaskMove::Complete {
            result: "ok".into(),
        },
        "a1",
    )
    .unwrap();
    assert_eq!(
        routed(&s.dispatch(100).unwrap()),
        [(extra.id, "a1", "least loaded")]
    );
}

#[test]
fn a_task_whose_files_two_other_agents_hold_waits_and_paused_agents_get_nothing() {
    let (_d, s) = open();
    agent(&s, "a1", 4);
    agent(&s, "a2", 4);
    agent(&s, "a3", 4);
    s.lock_claim("x.rs", "a1", None, 60_000).unwrap();
    s.lock_claim("y.rs", "a2", None, 60_000).unwrap();
    task(&s, "both", &["x.rs", "y.rs"], None);
    assert!(s.dispatch(100).unwrap().is_empty());
    s.agent_set_active("a3", false, "operator").unwrap();
    s.agent_set_active("a1", false, "operator").unwrap();
    s.agent_set_active("a2", false, "operator").unwrap();
    task(&s, "free", &[], None);
    assert!(s.dispatch(100).unwrap().is_empty());
}

#[test]
fn a_claim_of_a_held_file_is_a_recorded_conflict_until_the_lease_lapses() {
    let (_d, s) = open();
    agent(&s, "a1", 1);
    agent(&s, "a2", 1);
    assert!(matches!(
        s.lock_claim("a.rs", "a1", None, 1_000).unwrap(),
        Claim::Granted {
            took_over: None,
            ..
        }
    ));
    assert!(matches!(
        s.lock_claim("a.rs", "a1", None, 1_000).unwrap(),
        Claim::Renewed { .. }
    ));
    let Claim::Held { holder, .. } = s.lock_claim("a.rs", "a2", None, 60_000).unwrap() else {
        panic!("a2 got a held file")
    };
    assert_eq!(holder.agent, "a1");
    let c = s.lock_conflicts(false, 10).unwrap();
    assert_eq!(
        (c.len(), c[0].requester.as_str(), c[0].active),
        (1, "a2", true)
    );
    // a1 stops beating: its lease lapses and the next claim takes the file.
    std::thread::sleep(std::time::Duration::from_millis(1_100));
    assert!(s.lock_owner("a.rs").unwrap().is_none());
    assert!(s.lock_conflicts(false, 10).unwrap().is_empty());
    assert_eq!(s.lock_conflicts(true, 10).unwrap().len(), 1);
    let Claim::Granted { took_over, lock } = s.lock_claim("a.rs", "a2", None, 60_000).unwrap()
    else {
        panic!("the lapsed lock was not taken over")
    };
    assert_eq!(
        (took_over.as_deref(), lock.agent.as_str()),
        (Some("a1"), "a2")
    );
}

#[test]
fn heartbeats_renew_leases_and_lapsed_locks_expire_as_events() {
    let (_d, s) = open();
    agent(&s, "a1", 1);
    s.lock_claim("keep.rs", "a1", None, 1_500).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(900));
    s.agent_heartbeat("a1").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(900));
    assert_eq!(s.lock_owner("keep.rs").unwrap().unwrap().agent, "a1");
    std::thread::sleep(std::time::Duration::from_millis(800));
    assert_eq!(s.locks_expire().unwrap(), ["keep.rs"]);
    let ev = s
        .events(
            &EventFilter {
                subject: Some(Subject::Lock),
                ..EventFilter::default()
            },
            10,
        )
        .unwrap();
    let kinds: Vec<_> = ev.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["claimed", "expired"]);
}

#[test]
fn paths_are_normalized_and_escapes_refused() {
    assert_eq!(normalize_path("./src//a.rs").unwrap(), "src/a.rs");
    for bad in ["/etc/passwd", "../x", "a/../../b", "", "./", "a\\b"] {
        assert!(normalize_path(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn completing_a_task_releases_its_locks_and_retiring_requeues_and_releases() {
    let (_d, s) = open();
    agent(&s, "a1", 2);
    let t = task(&s, "t", &["a.rs"], None);
    let u = task(&s, "u", &[], None);
    s.dispatch(10).unwrap();
    s.lock_claim("a.rs", "a1", Some(t.id), 60_000).unwrap();
    s.lock_claim("b.rs", "a1", None, 60_000).unwrap();
    s.task_move(
        t.id,
        &TaskMove::Complete {
            result: "ok".into(),
        },
        "a1",
    )
    .unwrap();
    assert_eq!(
        s.task_get(t.id).unwrap().attempts,
        1,
        "completing an assigned task starts it"
    );
    let held: Vec<_> = s
        .locks(Some("a1"), 10)
        .unwrap()
        .into_iter()
        .map(|l| l.path)
        .collect();
    assert_eq!(held, ["b.rs"]);
    s.task_move(u.id, &TaskMove::Start, "a1").unwrap();
    let r = s.agent_retire("a1", "operator", "worker died").unwrap();
    assert_eq!(
        (r.requeued, r.released),
        (vec![u.id], vec!["b.rs".to_owned()])
    );
    let u = s.task_get(u.id).unwrap();
    assert_eq!((u.state, u.owner, u.attempts), (TaskState::Queued, None, 1));
}

#[test]
fn rebalance_takes_waiting_tasks_from_paused_and_overloaded_agents() {
    let (_d, s) = open();
    agent(&s, "a1", 8);
    let ids: Vec<i64> = (0..4)
        .map(|i| task(&s, &format!("t{i}"), &[], None).id)
        .collect();
    s.dispatch(10).unwrap();
    agent(&s, "a2", 8);
    // The newest of equal priority go first.
    let moved = s.rebalance("operator").unwrap();
    assert_eq!(moved, [ids[3], ids[2]]);
    let made = s.dispatch(10).unwrap();
    assert_eq!(made.len(), 2, "{made:?}");
    assert!(made.iter().all(|a| a.agent == "a2"), "{made:?}");
    assert_eq!(s.tasks_of("a1", false, 10).unwrap().len(), 2);
    s.agent_set_active("a2", false, "operator").unwrap();
    assert_eq!(s.rebalance("operator").unwrap().len(), 2);
}

#[test]
fn a_plan_is_a_dag_of_tasks_stored_all_or_nothing() {
    let (_d, s) = open();
    let step = |key: &str, after: &[&str]| NewStep {
        key: key.into(),
        after: after.iter().map(|a| a.to_string()).collect(),
        task: NewTask {
            title: key.into(),
            ..NewTask::default()
        },
    };
    // Listed out of order on purpose: stored after what they follow.
    let p = s
        .plan_create(
            "ship",
            &[step("test", &["build"]), step("build", &[])],
            "operator",
        )
        .unwrap();
    assert_eq!(p.steps.len(), 2);
    let build = p.steps.iter().find(|x| x.key == "build").unwrap();
    let test = p.steps.iter().find(|x| x.key == "test").unwrap();
    assert_eq!(test.task.depends_on, [build.task.id]);
    let e = s
        .plan_create("loop", &[step("a", &["b"]), step("b", &["a"])], "operator")
        .unwrap_err();
    assert!(e.to_string().contains("no cycle"), "{e}");
    let e = s
        .plan_create("ghost", &[step("a", &["nope"])], "operator")
        .unwrap_err();
    assert!(e.to_string().contains("no step of the plan"), "{e}");
    assert_eq!(
        s.tasks_in_state(None, 100).unwrap().len(),
        2,
        "refused plans store no task"
    );
    let p = s
        .plan_replan(
            p.id,
            &[step("docs", &["build"])],
            &["test".into()],
            "no tests",
            "operator",
        )
        .unwrap();
    assert_eq!(p.revision, 2);
    assert_eq!(p.progress.get("cancelled"), Some(&1));
    assert!(
        s.plan_replan(p.id, &[step("docs", &[])], &[], "again", "operator")
            .is_err()
    );
}

#[test]
fn handoffs_move_the_task_and_form_a_lineage() {
    let (_d, s) = open();
    for a in ["a1", "a2", "a3"] {
        agent(&s, a, 1);
    }
    let t = task(&s, "t", &[], Some("a1"));
    s.dispatch(10).unwrap();
    let e = s
        .handoff_record("a2", "a3", Some(t.id), None, "x", "")
        .unwrap_err();
    assert!(e.to_string().contains("held by a1"), "{e}");
    let h1 = s
        .handoff_record("a1", "a2", Some(t.id), None, "over to you", "notes")
        .unwrap();
    assert_eq!(s.task_get(t.id).unwrap().owner.as_deref(), Some("a2"));
    let e = s
        .handoff_record("a3", "a1", None, Some(h1.id), "x", "")
        .unwrap_err();
    assert!(e.to_string().contains("only its receiver"), "{e}");
    let h2 = s
        .handoff_record("a2", "a3", Some(t.id), Some(h1.id), "further", "")
        .unwrap();
    let chain: Vec<i64> = s
        .handoffs(None, None, Some(h2.id), 10)
        .unwrap()
        .iter()
        .map(|h| h.id)
        .collect();
    assert_eq!(chain, [h1.id, h2.id]);
    assert_eq!(s.handoffs(None, Some("a3"), None, 10).unwrap().len(), 1);
}

#[test]
fn a_pending_clarification_gates_its_tasks_until_resolved() {
    let (dir, s) = open();
    agent(&s, "a1", 4);
    let t = task(&s, "t", &[], None);
    let q = s
        .clarification_ask("which db?", &["pg".into(), "sqlite".into()], &[t.id], "a1")
        .unwrap();
    assert!(s.dispatch(10).unwrap().is_empty());
    assert_eq!(s.task_gates(t.id).unwrap(), [q.id]);
    drop(s);
    let s = dir.reopen();
    assert_eq!(
        s.clarifications(false, 10).unwrap().len(),
        1,
        "pending survives a restart"
    );
    assert!(s.dispatch(10).unwrap().is_empty());
    let q = s
        .clarification_resolve(q.id, Some("pg"), "operator")
        .unwrap();
    assert_eq!(
        (q.state, q.answer.as_deref()),
        (ClarificationState::Answered, Some("pg"))
    );
    assert!(s.clarification_resolve(q.id, None, "operator").is_err());
    assert_eq!(s.dispatch(10).unwrap().len(), 1);
}

#[test]
fn approvals_are_decided_once_and_the_allowlist_matches_names_and_prefixes() {
    let (_d, s) = open();
    let a = s
        .approval_request(
            "a1",
            "vox_memory_store",
            &serde_json::json!({"key": "k"}),
            "writes_state",
        )
        .unwrap();
    assert_eq!(s.approvals(false, 10).unwrap().len(), 1);
    let new = serde_json::json!({"key": "k2"});
    assert!(
        s.approval_decide(a.id, ApprovalState::Rejected, Some(&new), None, "op")
            .is_err()
    );
    let d = s
        .approval_decide(a.id, ApprovalState::Approved, Some(&new), None, "op")
        .unwrap();
    assert_eq!(d.new_arguments, Some(new));
    assert!(
        s.approval_decide(a.id, ApprovalState::Rejected, None, None, "op")
            .is_err()
    );
    s.allowlist_add("vox_memory_*", "*", "", "op").unwrap();
    s.allowlist_add("vox_kb_ingest", "a2", "", "op").unwrap();
    assert!(s.allowlist_add("vox_kb_ingest", "a2", "", "op").is_err());
    assert!(s.allowlist_covers("a1", "vox_memory_forget").unwrap());
    assert!(!s.allowlist_covers("a1", "vox_kb_ingest").unwrap());
    assert!(s.allowlist_covers("a2", "vox_kb_ingest").unwrap());
    let p = s
        .approval_request("a1", "vox_kb_delete", &serde_json::json!({}), "destructive")
        .unwrap();
    assert_eq!(s.approvals_expire_pending("restart").unwrap(), 1);
    assert_eq!(s.approval_get(p.id).unwrap().state, ApprovalState::Expired);
}

#[test]
fn a_version_3_store_keeps_its_task_events_after_migrating() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".vox/journey.db");
    let s = Store::open(&path).unwrap();
    let t = task(&s, "old", &[], None);
    s.task_move(t.id, &TaskMove::Assign { agent: "a".into() }, "lead")
        .unwrap();
    drop(s);
    // Turn the file back into schema 3: events back in task_events.
    let c = rusqlite::Connection::open(&path).unwrap();
    c.execute_batch(
        "CREATE TABLE task_events (id INTEGER PRIMARY KEY AUTOINCREMENT, task_id INTEGER NOT NULL,
             kind TEXT NOT NULL, from_state TEXT, agent TEXT, detail TEXT, ts INTEGER NOT NULL);
         INSERT INTO task_events SELECT id, CAST(subject_id AS INTEGER), kind, from_state, agent, detail, ts FROM events;
         DROP TABLE events; DROP TABLE agents; DROP TABLE file_locks; DROP TABLE lock_conflicts;
         DROP TABLE plan_steps; DROP TABLE plans; DROP TABLE handoffs; DROP TABLE clarification_gates;
         DROP TABLE clarifications; DROP TABLE approvals; DROP TABLE approval_allowlist;
         DROP INDEX tasks_owner; ALTER TABLE tasks DROP COLUMN pinned_agent;
         DROP TABLE model_preferences; DROP TABLE model_benchmarks; DROP TABLE chat_messages;
         DROP TABLE submissions; DROP TABLE draft_approvals; DROP TABLE research_drafts;
         ALTER TABLE attention_events DROP COLUMN cost_micro_usd;
         DROP TABLE audit_log; DROP TABLE upstream_pins; DROP TABLE mesh_calls; DROP TABLE a2a_deliveries; DROP TABLE a2a_messages; DROP TABLE research_claims; DROP TABLE research_runs;
         PRAGMA user_version = 3;",
    )
    .unwrap();
    drop(c);
    let s = Store::open(&path).unwrap();
    let kinds: Vec<String> = s
        .task_events(0, 10)
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(kinds, ["submitted", "assigned"]);
    assert_eq!(s.task_get(t.id).unwrap().pinned_agent, None);
}
