//! The embedded mesh in process (no VOX_MESH_NATS_URL): messages between agents on the
//! journey store, the bulletin board, queue statistics and this node's status.

use serde_json::json;
use vox_tools_harness::Harness;

#[tokio::test]
async fn a_message_waits_in_its_recipients_inbox_until_acknowledged() {
    let h = Harness::boot();
    for id in ["alice", "bob"] {
        h.ok("vox_spawn_agent", json!({"agent_id": id})).await;
    }
    // Sending has side effects: without an allowlist entry, an agent's send waits for a person.
    h.ok(
        "vox_add_approval_allowlist_entry",
        json!({"tool": "vox_a2a_*", "agent_id": "alice"}),
    )
    .await;
    let alice = h.agent("alice", "alice-session");
    let sent = h
        .ok_in(
            &alice,
            "vox_a2a_send",
            json!({"to": "bob", "body": "ready?"}),
        )
        .await;
    assert_eq!(
        sent["message"]["sender"], "alice",
        "the sender is the caller: {sent}"
    );
    assert_eq!(sent["recipients"], json!(["bob"]));
    h.fails_in(
        &alice,
        "vox_a2a_send",
        json!({"to": "nobody", "body": "hi"}),
        "not_found",
    )
    .await;

    let inbox = h.ok("vox_a2a_inbox", json!({"agent_id": "bob"})).await;
    let id = inbox["messages"][0]["id"].clone();
    assert_eq!(inbox["messages"][0]["body"], "ready?", "{inbox}");
    let stats = h.ok("vox_mesh_queue_stats", json!({})).await;
    assert!(stats["queues"].to_string().contains("bob"), "{stats}");
    // An agent reads only its own inbox.
    h.fails_in(
        &alice,
        "vox_a2a_inbox",
        json!({"agent_id": "bob"}),
        "invalid_arguments",
    )
    .await;

    let acked = h
        .ok(
            "vox_a2a_ack",
            json!({"agent_id": "bob", "message_ids": [id]}),
        )
        .await;
    assert_eq!(acked["acked"], 1);
    let inbox = h.ok("vox_a2a_inbox", json!({"agent_id": "bob"})).await;
    assert_eq!(inbox["messages"], json!([]));
    let hist = h.ok("vox_a2a_history", json!({"agent_id": "alice"})).await;
    assert_eq!(hist["messages"][0]["body"], "ready?", "{hist}");
}

#[tokio::test]
async fn the_bulletin_board_and_this_nodes_status_need_no_mesh_engine() {
    let h = Harness::boot();
    h.ok("vox_spawn_agent", json!({"agent_id": "n1"})).await;
    h.ok(
        "vox_publish_message",
        json!({"topic": "release", "body": "freeze on friday"}),
    )
    .await;
    let board = h
        .ok("vox_a2a_history", json!({"thread": "bulletin:release"}))
        .await;
    assert_eq!(board["messages"][0]["body"], "freeze on friday", "{board}");
    let me = h.ok("vox_populi_local_status", json!({})).await;
    assert_eq!(me["mode"], "embedded", "{me}");
    assert_eq!(me["agents"], json!(["n1"]));
    let nodes = h.ok("vox_mesh_nodes", json!({})).await;
    assert_eq!(nodes["nodes"].as_array().unwrap().len(), 1, "{nodes}");
    h.fails(
        "vox_mesh_dispatch",
        json!({"node": "x", "tool": "vox_memory_list"}),
        "unavailable",
    )
    .await;
}
