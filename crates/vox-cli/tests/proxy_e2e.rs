//! End to end: the workspace daemon killed in the middle of a session, with the session handed
//! off to it and with `vox mcp` proxying (`VOX_MCP_HANDOFF=0`). The call in flight is answered
//! `daemon_unavailable`, the next call respawns the daemon, and the session carries on with
//! what it had set: its log level, its subscription and its active skill.
// rmcp marks logging and resources/subscribe deprecated; 2025-era clients still use them.
#![allow(deprecated)]

mod common;

use common::*;
use rmcp::model::{
    CallToolRequestParams, LoggingLevel, LoggingMessageNotificationParam,
    ResourceUpdatedNotificationParam, SetLevelRequestParams, SubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const EVENTS: &str = "vox://orchestrator/events";

/// The log messages and resource updates the client was sent.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<(Vec<LoggingMessageNotificationParam>, Vec<String>)>>);

impl ClientHandler for Seen {
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.0.lock().unwrap().0.push(params);
    }
    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.0.lock().unwrap().1.push(params.uri);
    }
}

impl Seen {
    /// Waits until `done` holds of what was seen (5 s at most).
    async fn wait(
        &self,
        what: &str,
        done: impl Fn(&(Vec<LoggingMessageNotificationParam>, Vec<String>)) -> bool,
    ) {
        for _ in 0..500 {
            if done(&self.0.lock().unwrap()) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("no {what} within 5 s");
    }
    fn clear(&self) {
        let mut s = self.0.lock().unwrap();
        s.0.clear();
        s.1.clear();
    }
}

fn write(ws: &Ws, rel: &str, text: &str) {
    let p = ws.root().join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A workspace with a tool that loops until cancelled, a skill that allows a few tools, and
/// documents to ingest (ingesting more than one logs at `info`).
fn workspace(env: Option<(&str, &str)>) -> Ws {
    let ws = match env {
        Some((k, v)) => Ws::new().with_env(k, v),
        None => Ws::new(),
    };
    write(
        &ws,
        "tools/spin.vox",
        "@tool \"Loop for ever\"\nfn spin() to int {\n    let mut i = 0\n    while true { i += 1 }\n    i\n}\n",
    );
    write(
        &ws,
        "contracts/mcp/workspace-mcp-surface.v1.yaml",
        "version: 1\nscan_globs: [\"tools/**/*.vox\"]\nbudgets:\n  tools:\n    spin:\n      max_steps: 1000000000\n      max_wall_ms: 300000\n",
    );
    write(
        &ws,
        ".vox/skills/narrow/SKILL.md",
        "---\nname: narrow\ndescription: Only a few tools.\nmetadata:\n  vox-tools: spin vox_spawn_agent vox_kb_ingest\n---\nStay narrow.\n",
    );
    write(&ws, "docs/a.md", "# A\nSome text.\n");
    write(&ws, "docs/b.md", "# B\nMore text.\n");
    ws
}

async fn call(
    c: &RunningService<RoleClient, Seen>,
    name: &str,
    args: Value,
) -> rmcp::model::CallToolResult {
    c.call_tool(
        CallToolRequestParams::new(name.to_owned())
            .with_arguments(args.as_object().cloned().unwrap_or_default()),
    )
    .await
    .unwrap()
}

fn code(r: &rmcp::model::CallToolResult) -> Value {
    assert_eq!(r.is_error, Some(true), "{r:?}");
    r.structured_content.as_ref().unwrap()["error"]["code"].clone()
}

async fn a_killed_daemon_leaves_the_session_intact(ws: Ws) {
    let seen = Seen::default();
    let t = TokioChildProcess::new(ws.mcp_command(&[])).unwrap();
    let c = seen.clone().serve(t).await.expect("MCP initialize");
    c.set_level(SetLevelRequestParams::new(LoggingLevel::Info))
        .await
        .unwrap();
    c.subscribe(SubscribeRequestParams::new(EVENTS))
        .await
        .unwrap();
    let used = call(&c, "vox_skill_use", json!({"id": "narrow"})).await;
    assert_ne!(used.is_error, Some(true), "{used:?}");
    assert_eq!(
        code(&call(&c, "vox_memory_list", json!({})).await),
        "skill_tool_not_allowed"
    );
    let pid = daemon_pid(&ws);

    let answered = kill_daemon_under_call(c.peer(), "spin", pid).await;
    assert_eq!(code(&answered), "daemon_unavailable");

    // The next call respawns the daemon, and the session is as it was.
    seen.clear();
    let spawned = call(&c, "vox_spawn_agent", json!({"agent_id": "a1"})).await;
    assert_ne!(spawned.is_error, Some(true), "{spawned:?}");
    assert_ne!(daemon_pid(&ws), pid, "a new daemon serves the session");
    seen.wait("resources/updated for the subscription", |s| {
        s.1.iter().any(|u| u == EVENTS)
    })
    .await;
    let ingested = call(&c, "vox_kb_ingest", json!({"path": "docs/**/*.md"})).await;
    assert_ne!(ingested.is_error, Some(true), "{ingested:?}");
    seen.wait("an info log message", |s| {
        s.0.iter().any(|l| l.logger.as_deref() == Some("kb"))
    })
    .await;
    assert_eq!(
        code(&call(&c, "vox_memory_list", json!({})).await),
        "skill_tool_not_allowed"
    );
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn a_daemon_killed_under_a_handed_off_session_leaves_it_intact() {
    a_killed_daemon_leaves_the_session_intact(workspace(None)).await;
}

#[tokio::test]
async fn a_daemon_killed_under_a_proxied_session_leaves_it_intact() {
    a_killed_daemon_leaves_the_session_intact(workspace(Some(("VOX_MCP_HANDOFF", "0")))).await;
}

/// A 2026-07-28 client (`server/discover`, no `initialize`) through the proxy: the daemon
/// session is opened in its era, and lists and calls pass through.
#[tokio::test]
async fn a_modern_client_is_proxied_in_its_own_era() {
    let ws = Ws::new().with_env("VOX_MCP_HANDOFF", "0");
    let c = ws.modern_client(&["--profile", "knowledge"]).await;
    assert_eq!(tool_names(&c).await, registry_slice("knowledge"));
    ok(&c, "vox_memory_store", json!({"key": "k", "value": "v"})).await;
    assert_eq!(
        ok(&c, "vox_memory_recall", json!({"key": "k"})).await["memory"]["value"],
        "v"
    );
    c.cancel().await.unwrap();
}
