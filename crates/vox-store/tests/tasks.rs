//! The durable task model: the DAG, the state machine, events, emergency stop, restarts.

mod support;

use support::open;
use vox_store::*;

fn task(store: &Store, title: &str, priority: i64, deps: &[i64]) -> Task {
    store
        .task_submit(&NewTask {
            title: title.into(),
            priority,
            depends_on: deps.to_vec(),
            files: vec!["src/lib.rs".into()],
            ..NewTask::default()
        })
        .unwrap()
}

fn ids(tasks: &[Task]) -> Vec<i64> {
    tasks.iter().map(|t| t.id).collect()
}

#[test]
fn a_task_is_ready_once_everything_it_depends_on_has_completed() {
    let (_d, s) = open();
    let build = task(&s, "build", 0, &[]);
    let docs = task(&s, "docs", 5, &[]);
    let test = task(&s, "test", 9, &[build.id]);
    assert_eq!(test.depends_on, [build.id]);
    assert_eq!(
        ids(&s.tasks_ready(10).unwrap()),
        [docs.id, build.id],
        "priority first"
    );
    s.task_move(build.id, &TaskMove::Assign { agent: "a1".into() }, "lead")
        .unwrap();
    s.task_move(build.id, &TaskMove::Start, "a1").unwrap();
    assert_eq!(ids(&s.tasks_ready(10).unwrap()), [docs.id]);
    let done = s
        .task_move(
            build.id,
            &TaskMove::Complete {
                result: "ok".into(),
            },
            "a1",
        )
        .unwrap();
    assert_eq!(
        (
            done.state,
            done.attempts,
            done.result.as_deref(),
            done.owner.as_deref()
        ),
        (TaskState::Completed, 1, Some("ok"), Some("a1"))
    );
    assert_eq!(ids(&s.tasks_ready(10).unwrap()), [test.id, docs.id]);
}

#[test]
fn a_dependency_that_would_close_a_cycle_is_refused() {
    let (_d, s) = open();
    let a = task(&s, "a", 0, &[]);
    let b = task(&s, "b", 0, &[a.id]);
    let c = task(&s, "c", 0, &[b.id]);
    let e = s.task_add_dependency(a.id, c.id).unwrap_err().to_string();
    assert!(
        e.contains("already depends on task") && e.contains("no cycle"),
        "{e}"
    );
    assert!(s.task_add_dependency(a.id, a.id).is_err());
    let missing = s.task_submit(&NewTask {
        title: "x".into(),
        depends_on: vec![999],
        ..NewTask::default()
    });
    assert!(missing.unwrap_err().to_string().contains("task 999"));
    s.task_add_dependency(c.id, a.id).unwrap();
    assert_eq!(s.task_get(c.id).unwrap().depends_on, [a.id, b.id]);
}

#[test]
fn the_state_machine_refuses_moves_it_does_not_have_and_callers_who_do_not_own_the_task() {
    let (_d, s) = open();
    let t = task(&s, "t", 0, &[]);
    let e = s
        .task_move(t.id, &TaskMove::Start, "a1")
        .unwrap_err()
        .to_string();
    assert!(e.contains("is queued: it cannot become running"), "{e}");
    s.task_move(t.id, &TaskMove::Assign { agent: "a1".into() }, "lead")
        .unwrap();
    let e = s
        .task_move(t.id, &TaskMove::Start, "a2")
        .unwrap_err()
        .to_string();
    assert!(e.contains("assigned to a1, not to a2"), "{e}");
    s.task_move(t.id, &TaskMove::Start, "a1").unwrap();
    // A dead worker's task goes back to the queue, its attempt counted.
    let back = s
        .task_move(
            t.id,
            &TaskMove::Requeue {
                reason: "worker died".into(),
            },
            "daemon",
        )
        .unwrap();
    assert_eq!(
        (back.state, back.owner, back.attempts),
        (TaskState::Queued, None, 1)
    );
    s.task_move(
        t.id,
        &TaskMove::Cancel {
            reason: "not needed".into(),
        },
        "lead",
    )
    .unwrap();
    let e = s
        .task_move(
            t.id,
            &TaskMove::Cancel {
                reason: "again".into(),
            },
            "lead",
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("is cancelled"), "{e}");
}

#[test]
fn every_transition_is_an_event_read_by_cursor_and_everything_survives_reopening() {
    let (dir, s) = open();
    let t = task(&s, "t", 0, &[]);
    s.task_move(t.id, &TaskMove::Assign { agent: "a1".into() }, "lead")
        .unwrap();
    s.task_move(t.id, &TaskMove::Start, "a1").unwrap();
    s.task_move(
        t.id,
        &TaskMove::Fail {
            reason: "tests red".into(),
        },
        "a1",
    )
    .unwrap();
    drop(s);
    let s = dir.reopen();
    let events = s.task_events(0, 100).unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["submitted", "assigned", "running", "failed"]);
    assert_eq!(events[3].from_state, Some(TaskState::Running));
    assert_eq!(events[3].detail.as_deref(), Some("tests red"));
    let after = s.task_events(events[1].id, 100).unwrap();
    assert_eq!(after.len(), 2);
    assert_eq!(s.task_get(t.id).unwrap().state, TaskState::Failed);
}

#[test]
fn emergency_stop_cancels_every_active_task_and_no_ended_one() {
    let (_d, s) = open();
    let done = task(&s, "done", 0, &[]);
    s.task_move(done.id, &TaskMove::Assign { agent: "a".into() }, "l")
        .unwrap();
    s.task_move(done.id, &TaskMove::Start, "a").unwrap();
    s.task_move(done.id, &TaskMove::Complete { result: "r".into() }, "a")
        .unwrap();
    let queued = task(&s, "q", 0, &[]);
    let running = task(&s, "r", 0, &[]);
    s.task_move(running.id, &TaskMove::Assign { agent: "a".into() }, "l")
        .unwrap();
    s.task_move(running.id, &TaskMove::Start, "a").unwrap();
    let cancelled = s.tasks_cancel_active("operator", "emergency stop").unwrap();
    assert_eq!(cancelled, [queued.id, running.id]);
    assert_eq!(s.task_get(done.id).unwrap().state, TaskState::Completed);
    assert_eq!(
        ids(&s.tasks_in_state(Some(TaskState::Cancelled), 10).unwrap()),
        [queued.id, running.id]
    );
}

#[test]
fn oversized_or_empty_input_is_a_clear_error_and_stores_nothing() {
    let (_d, s) = open();
    let e = s.task_submit(&NewTask::default()).unwrap_err().to_string();
    assert!(e.contains("non-empty title"), "{e}");
    let e = s
        .task_submit(&NewTask {
            title: "t".repeat(1000),
            ..NewTask::default()
        })
        .unwrap_err()
        .to_string();
    assert!(e.contains("title is 1000 bytes"), "{e}");
    assert!(s.tasks_in_state(None, 10).unwrap().is_empty());
    assert!(s.task_events(0, 10).unwrap().is_empty());
}
