//! The orchestrator profile and the agent path end to end, through the real `vox mcp` and
//! daemon with the rmcp client: agents the operator spawns present their credential
//! (`VOX_AGENT_TOKEN`) and are decided under their own profile; a call with side effects waits
//! for a person; an agent never acts as another, nor as the operator; a retired agent's
//! credential stops working; everything is durable across a daemon restart.

mod common;
use common::*;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Duration;

const PROFILE: &str = "knowledge,orchestrator";

/// A client of the daemon that is agent `token`'s.
async fn agent_client(ws: &Ws, token: &str) -> Client {
    let mut cmd = ws.mcp_command(&["--profile", PROFILE]);
    cmd.env("VOX_AGENT_TOKEN", token);
    rmcp::ServiceExt::serve((), rmcp::transport::TokioChildProcess::new(cmd).unwrap())
        .await
        .expect("MCP initialize")
}

/// A call that runs while the test goes on.
fn in_background(
    c: &Client,
    name: &'static str,
    args: Value,
) -> tokio::task::JoinHandle<rmcp::model::CallToolResult> {
    let peer = c.peer().clone();
    tokio::spawn(async move {
        let args = args.as_object().cloned().unwrap_or_default();
        peer.call_tool(rmcp::model::CallToolRequestParams::new(name).with_arguments(args))
            .await
            .unwrap()
    })
}

async fn spawn_agent(op: &Client, id: &str, profile: &str) -> String {
    let a = ok(
        op,
        "vox_spawn_agent",
        json!({"agent_id": id, "profile": profile, "capacity": 2}),
    )
    .await;
    a["token"].as_str().unwrap().to_owned()
}

/// Every tool an agent under `profile` lists is one it may call, and every tool it may not
/// call is refused with `tool_not_in_profile`, listed or not. An agent is offered the public
/// tools of its profile (the daemon's serving them): never the operator's.
async fn list_and_call_agree(agent: &Client, id: &str, profile: &str) {
    let listed: BTreeSet<String> = tool_names(agent).await.into_iter().collect();
    let allowed: BTreeSet<String> = registry_slice(profile)
        .into_iter()
        .filter(|n| registry_slice(PROFILE).contains(n))
        .filter(|n| {
            vox_mcp_registry::tool_by_name(n).unwrap().exposure
                == vox_mcp_registry::Exposure::Public
        })
        .collect();
    assert_eq!(listed, allowed, "agent {id} lists what its profile allows");
    for name in registry_slice("dev") {
        if allowed.contains(&name) {
            continue;
        }
        let e = err(agent, &name, json!({})).await;
        assert_eq!(e["code"], "tool_not_in_profile", "{id} {name}: {e}");
    }
}

#[tokio::test]
async fn agents_are_decided_under_their_own_profile_and_wait_for_a_person() {
    let ws = Ws::new().with_env("VOX_APPROVAL_TIMEOUT_SECS", "60");
    let op = ws.client(&["--profile", PROFILE]).await;
    let reader = spawn_agent(&op, "reader", "knowledge").await;
    let lead = spawn_agent(&op, "lead", "orchestrator").await;

    // The leak matrix on the agent path.
    let r = agent_client(&ws, &reader).await;
    list_and_call_agree(&r, "reader", "knowledge").await;
    let l = agent_client(&ws, &lead).await;
    list_and_call_agree(&l, "lead", "orchestrator").await;
    let e = err(&r, "vox_submit_task", json!({"title": "t"})).await;
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("agent reader's profile `knowledge`"),
        "{e}"
    );

    // A read-only call runs at once; one with side effects waits for a person, who may change
    // its arguments.
    ok(&r, "vox_memory_list", json!({})).await;
    let waiting = in_background(
        &r,
        "vox_memory_store",
        json!({"key": "draft", "value": "v"}),
    );
    let pending = loop {
        let p = ok(&op, "vox_pending_approvals", json!({})).await;
        if let Some(a) = p["approvals"].as_array().and_then(|a| a.first()).cloned() {
            break a;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        (pending["agent"].as_str(), pending["tool"].as_str()),
        (Some("reader"), Some("vox_memory_store")),
        "{pending}"
    );
    // An agent decides nothing, not even under a profile that lists the tool.
    let e = err(
        &l,
        "vox_resolve_approval",
        json!({"approval_id": pending["id"], "decision": "approve"}),
    )
    .await;
    assert!(
        e["message"].as_str().unwrap().contains("the operator's"),
        "{e}"
    );
    ok(
        &op,
        "vox_resolve_approval",
        json!({"approval_id": pending["id"], "decision": "approve", "arguments": {"key": "final", "value": "v"}}),
    )
    .await;
    let done = waiting.await.unwrap();
    assert_ne!(done.is_error, Some(true), "{done:?}");
    let got = ok(&op, "vox_memory_recall", json!({"key": "final"})).await;
    assert_eq!(got["found"], true, "the approver's arguments ran: {got}");

    // A rejected call fails with the reason; an allowlisted one runs without asking.
    let waiting = in_background(&r, "vox_memory_forget", json!({"key": "final"}));
    let id = loop {
        let p = ok(&op, "vox_pending_approvals", json!({})).await;
        if let Some(id) = p["approvals"][0]["id"].as_i64() {
            break id;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    ok(
        &op,
        "vox_resolve_approval",
        json!({"approval_id": id, "decision": "reject", "reason": "keep it"}),
    )
    .await;
    let refused = waiting.await.unwrap();
    let e = refused.structured_content.unwrap()["error"].clone();
    assert_eq!(e["code"], "refused", "{e}");
    assert!(e["message"].as_str().unwrap().contains("keep it"), "{e}");
    ok(
        &op,
        "vox_add_approval_allowlist_entry",
        json!({"tool": "vox_memory_*", "agent_id": "reader"}),
    )
    .await;
    ok(&r, "vox_memory_store", json!({"key": "free", "value": "v"})).await;

    // An agent over its budget is refused, until the operator raises it.
    ok(
        &op,
        "vox_set_agent_budget",
        json!({"agent_id": "reader", "tokens": 1}),
    )
    .await;
    let e = err(&r, "vox_memory_list", json!({})).await;
    assert_eq!(e["code"], "refused", "{e}");
    assert!(e["message"].as_str().unwrap().contains("tokens"), "{e}");
    ok(
        &op,
        "vox_set_agent_budget",
        json!({"agent_id": "reader", "tokens": 1000000}),
    )
    .await;
    ok(&r, "vox_memory_list", json!({})).await;

    // The lead coordinates as itself, never as another agent or as the operator.
    let t = ok(
        &op,
        "vox_submit_task",
        json!({"title": "plan", "agent_id": "lead"}),
    )
    .await;
    let task = t["task"]["id"].clone();
    assert_eq!(t["task"]["owner"], "lead", "{t}");
    let beat = ok(&l, "vox_heartbeat", json!({"task_id": task})).await;
    assert_eq!(beat["agent"]["id"], "lead");
    let e = err(&l, "vox_my_files", json!({"agent_id": "reader"})).await;
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("acts only as itself"),
        "{e}"
    );
    let e = err(&l, "vox_spawn_agent", json!({})).await;
    assert!(
        e["message"].as_str().unwrap().contains("the operator's"),
        "{e}"
    );
    ok(
        &l,
        "vox_claim_file",
        json!({"path": "src/main.rs", "task_id": task}),
    )
    .await;
    ok(
        &l,
        "vox_complete_task",
        json!({"task_id": task, "result": "planned"}),
    )
    .await;
    let owner = ok(&op, "vox_check_file_owner", json!({"path": "src/main.rs"})).await;
    assert_eq!(
        owner["lock"],
        Value::Null,
        "completing released the task's lock"
    );

    // The attention key of an agent's calls is the agent, and its budget is its own.
    let set = ok(
        &op,
        "vox_set_agent_budget",
        json!({"agent_id": "lead", "tokens": 100000}),
    )
    .await;
    let lead_budget = &set["budget"]["agents"][0];
    assert_eq!(lead_budget["agent"], "lead", "{set}");
    assert_eq!(lead_budget["token_budget"], 100000, "{set}");
    assert!(lead_budget["calls"].as_u64().unwrap() >= 4, "{set}");

    // Retiring the reader stops its credential, in its open session and at a new start.
    ok(&op, "vox_retire_agent", json!({"agent_id": "reader"})).await;
    let e = err(&r, "vox_memory_list", json!({})).await;
    assert_eq!(e["code"], "unauthorized", "{e}");
    r.cancel().await.unwrap();
    l.cancel().await.unwrap();
    op.cancel().await.unwrap();

    // Durable: after a restart the lead's credential still works and its history is there.
    ws.stop_daemon();
    let op = ws.client(&["--profile", PROFILE]).await;
    let l = agent_client(&ws, &lead).await;
    let me = ok(&l, "vox_agent_status", json!({})).await;
    assert_eq!(me["agents"][0]["agent"]["id"], "lead", "{me}");
    let ev = ok(&l, "vox_agent_events", json!({})).await;
    assert!(!ev["events"].as_array().unwrap().is_empty());
    let allow = ok(&op, "vox_list_approval_allowlist", json!({})).await;
    assert_eq!(allow["entries"][0]["agent"], "reader");
    l.cancel().await.unwrap();
    op.cancel().await.unwrap();
}

#[tokio::test]
async fn an_unknown_agent_credential_is_refused_at_the_handshake() {
    let ws = Ws::new();
    let op = ws.client(&["--profile", PROFILE]).await;
    let mut cmd = ws.mcp_command(&["--profile", PROFILE]);
    cmd.env("VOX_AGENT_TOKEN", format!("voxa_{}", "0".repeat(64)));
    let refused =
        rmcp::ServiceExt::serve((), rmcp::transport::TokioChildProcess::new(cmd).unwrap()).await;
    let Err(e) = refused else {
        panic!("an unknown credential was accepted")
    };
    let e = e.to_string();
    assert!(e.contains("unauthorized"), "{e}");
    op.cancel().await.unwrap();
}

struct Updates(tokio::sync::mpsc::UnboundedSender<String>);

impl rmcp::ClientHandler for Updates {
    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        let _ = self.0.send(params.uri);
    }
}

/// A client that subscribed to `vox://orchestrator/events` is told of every transition, and
/// reading the resource gives the newest events with a cursor for `vox_poll_events`.
#[tokio::test]
#[allow(deprecated)] // the 2025 era's resources/subscribe
async fn subscribers_are_told_of_each_transition_and_read_the_events() {
    use rmcp::ServiceExt;
    let ws = Ws::new();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let transport =
        rmcp::transport::TokioChildProcess::new(ws.mcp_command(&["--profile", PROFILE])).unwrap();
    let c = Updates(tx).serve(transport).await.unwrap();
    const URI: &str = "vox://orchestrator/events";
    let listed = c.list_all_resources().await.unwrap();
    assert!(listed.iter().any(|r| r.uri == URI), "{listed:?}");
    c.subscribe(rmcp::model::SubscribeRequestParams::new(URI))
        .await
        .unwrap();
    let call = |name: &'static str, args: Value| {
        c.call_tool(
            rmcp::model::CallToolRequestParams::new(name)
                .with_arguments(args.as_object().cloned().unwrap()),
        )
    };
    call("vox_spawn_agent", json!({"agent_id": "a1"}))
        .await
        .unwrap();
    let got = tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .expect("resources/updated after a spawn")
        .unwrap();
    assert_eq!(got, URI);
    while rx.try_recv().is_ok() {}
    call("vox_submit_task", json!({"title": "t"}))
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .expect("resources/updated after a submit");
    let read = c
        .read_resource(rmcp::model::ReadResourceRequestParams::new(URI))
        .await
        .unwrap();
    let text = match &read.contents[0] {
        rmcp::model::ResourceContents::TextResourceContents { text, .. } => text.clone(),
        other => panic!("{other:?}"),
    };
    let events: Value = serde_json::from_str(&text).unwrap();
    let kinds: Vec<&str> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["spawned", "submitted", "assigned"], "{events}");
    assert!(events["next_cursor"].as_i64().unwrap() >= 3);
    c.cancel().await.unwrap();
}

/// `vox_emergency_stop` reaches what agents are doing: a call waiting for a person is
/// cancelled (its approval expires), the agent is paused, its task cancelled.
#[tokio::test]
async fn an_emergency_stop_cancels_an_agents_call_in_flight() {
    let ws = Ws::new().with_env("VOX_APPROVAL_TIMEOUT_SECS", "60");
    let op = ws.client(&["--profile", PROFILE]).await;
    let token = spawn_agent(&op, "busy", "knowledge,orchestrator").await;
    let t = ok(
        &op,
        "vox_submit_task",
        json!({"title": "t", "agent_id": "busy"}),
    )
    .await;
    let a = agent_client(&ws, &token).await;
    let waiting = in_background(&a, "vox_memory_store", json!({"key": "k", "value": "v"}));
    loop {
        let p = ok(&op, "vox_pending_approvals", json!({})).await;
        if !p["approvals"].as_array().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let stop = ok(&op, "vox_emergency_stop", json!({"reason": "drill"})).await;
    assert_eq!(stop["cancelled_calls"], 1, "{stop}");
    assert_eq!(stop["paused_agents"], json!(["busy"]), "{stop}");
    assert_eq!(stop["cancelled"], json!([t["task"]["id"]]), "{stop}");
    // The cancelled call is answered (or dropped, as MCP allows); either way it did not run.
    let _ = tokio::time::timeout(Duration::from_secs(5), waiting).await;
    let all = ok(&op, "vox_pending_approvals", json!({"all": true})).await;
    assert_eq!(all["approvals"][0]["state"], "expired", "{all}");
    let got = ok(&op, "vox_memory_recall", json!({"key": "k"})).await;
    assert_eq!(got["found"], false, "{got}");
    a.cancel().await.unwrap();
    op.cancel().await.unwrap();
}

/// `VOX_MCP_AGENT_FLEET=0` turns the agent fleet off: its subsystem is failed in the boot
/// report and its tools are refused as not booted (the rest of the profile still serves).
#[tokio::test]
async fn vox_mcp_agent_fleet_0_turns_the_fleet_off() {
    let ws = Ws::new().with_env("VOX_MCP_AGENT_FLEET", "0");
    let op = ws.client(&["--profile", PROFILE]).await;
    let e = err(&op, "vox_submit_task", json!({"title": "t"})).await;
    assert_eq!(e["code"], "subsystem_not_booted", "{e}");
    assert_eq!(e["subsystem"], "agent_fleet", "{e}");
    ok(&op, "vox_feedback_list", json!({})).await;
    let names = tool_names(&op).await;
    assert!(!names.contains(&"vox_spawn_agent".to_owned()), "{names:?}");
    let status = ws.daemon_status();
    let failed = status
        .pointer("/boot_report/failed/agent_fleet")
        .or_else(|| status.pointer("/boot/failed/agent_fleet"));
    assert!(
        failed
            .and_then(Value::as_str)
            .is_some_and(|m| m.contains("VOX_MCP_AGENT_FLEET")),
        "{status}"
    );
    op.cancel().await.unwrap();
}
