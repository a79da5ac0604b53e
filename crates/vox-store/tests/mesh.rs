//! The journey store's side of the mesh: messages from other nodes stored once however often
//! they arrive, and calls between nodes recorded so none runs twice.

use serde_json::json;
use support::open as store;
use vox_store::CallDirection;

mod support;

#[test]
fn a_message_from_another_node_is_stored_once() {
    let (_d, s) = store();
    let to = vec!["b".to_string()];
    let m = s
        .a2a_receive("N1:7", "a@N1", "b", &to, "t", "hello")
        .unwrap()
        .unwrap();
    assert!(
        s.a2a_receive("N1:7", "a@N1", "b", &to, "t", "hello")
            .unwrap()
            .is_none()
    );
    assert_eq!(s.a2a_inbox("b", 10).unwrap(), vec![m.clone()]);
    assert_eq!(s.a2a_ack("b", &[m.id]).unwrap(), 1);
    // Delivered again after the ack (the node crashed before acknowledging JetStream): the
    // agent does not see it twice.
    assert!(
        s.a2a_receive("N1:7", "a@N1", "b", &to, "t", "hello")
            .unwrap()
            .is_none()
    );
    assert!(s.a2a_inbox("b", 10).unwrap().is_empty());
    // A message that could not be sent on is forgotten with its deliveries.
    let local = s.a2a_send("b", "a@N1", &[], None, "x").unwrap();
    s.a2a_forget(local.id).unwrap();
    assert_eq!(s.a2a_history(None, None, None, 10).unwrap(), vec![m]);
}

#[test]
fn calls_are_recorded_on_both_sides_and_run_once() {
    let (_d, s) = store();
    let out = s
        .mesh_call_out("NME", "NTHEM", "vox_submit_task", &json!({"title": "x"}))
        .unwrap();
    assert!(out.call_id.starts_with("NME:c"), "{}", out.call_id);
    assert_eq!(s.mesh_calls_open(CallDirection::Out).unwrap(), 1);
    assert!(
        s.mesh_call_finish(CallDirection::Out, &out.call_id, true, &json!({"task": 1}))
            .unwrap()
    );
    assert!(
        !s.mesh_call_finish(CallDirection::Out, &out.call_id, false, &json!(null))
            .unwrap(),
        "a result that comes twice changes nothing"
    );
    let done = s
        .mesh_call(CallDirection::Out, &out.call_id)
        .unwrap()
        .unwrap();
    assert_eq!(
        (done.state.as_str(), done.result),
        ("done", Some(json!({"task": 1})))
    );

    // The callee: first delivery runs, a second one finds the record.
    assert!(
        s.mesh_call_in("NME:1", "NME", "t", &json!({}))
            .unwrap()
            .is_none()
    );
    let again = s
        .mesh_call_in("NME:1", "NME", "t", &json!({}))
        .unwrap()
        .unwrap();
    assert_eq!(again.state, "running");
    s.mesh_call_finish(CallDirection::In, "NME:1", false, &json!({"error": "no"}))
        .unwrap();
    let again = s
        .mesh_call_in("NME:1", "NME", "t", &json!({}))
        .unwrap()
        .unwrap();
    assert_eq!(again.state, "failed");
    assert_eq!(s.mesh_calls_open(CallDirection::In).unwrap(), 0);
}
