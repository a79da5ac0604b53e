//! End to end: `vox serve` over real TCP: REST, WebSocket, tokens and roles, denial codes with
//! their HTTP statuses, allowlists, Host/Origin checks, rate limits, loopback versus remote peers.

mod common;
use common::gateway::*;
use common::*;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::process::Command;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test]
async fn serve_refuses_to_start_without_auth_or_with_unknown_allowlisted_tools() {
    let err = Server::start(Ws::new(), "knowledge", &[]).err().unwrap();
    assert!(err.contains("gateway auth required"), "{err}");
    let err = Server::start(
        Ws::new(),
        "knowledge",
        &[
            ("VOX_MCP_HTTP_BEARER_TOKEN", WRITE),
            ("VOX_MCP_HTTP_ALLOWED_TOOLS", "vox_kb_query,vox_nope"),
        ],
    )
    .err()
    .unwrap();
    assert!(err.contains("vox_nope"), "{err}");
    // The configuration is checked before the daemon takes the workspace: nothing is left.
    let ws = Ws::new();
    let out = Command::new(VOX)
        .args(["serve", "--profile", "knowledge"])
        .current_dir(ws.root())
        .env("VOX_HOME", ws.home.path())
        .env("VOX_WORKSPACE", ws.root())
        .env("VOX_MCP_HTTP_PORT", "0")
        .env("VOX_MCP_HTTP_BEARER_TOKEN", WRITE)
        .env("VOX_MCP_HTTP_ALLOWED_TOOLS", "vox_nope")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    for left in ["orchestrator.json", "orchestrator.sock"] {
        assert!(!ws.vox_dir().join(left).exists(), "{left} left behind");
    }
    let err = Server::start(
        Ws::new(),
        "knowledge",
        &[
            ("VOX_MCP_HTTP_ALLOW_UNAUTHENTICATED", "1"),
            ("VOX_MCP_HTTP_HOST", "0.0.0.0"),
        ],
    )
    .err()
    .unwrap();
    assert!(err.contains("loopback"), "{err}");
}

#[tokio::test]
async fn serve_refuses_when_a_daemon_already_runs() {
    let ws = Ws::new();
    let c = ws.client(&["--profile", "knowledge"]).await;
    let mut cmd = Command::new(VOX);
    let out = cmd
        .args(["serve", "--profile", "knowledge"])
        .env("VOX_WORKSPACE", ws.root())
        .env("VOX_HOME", ws.home.path())
        .env("VOX_MCP_HTTP_BEARER_TOKEN", WRITE)
        .env("VOX_MCP_HTTP_PORT", "0")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("already runs"));
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn tokens_decide_the_role_and_listing_matches_calling() {
    let s = Server::tokens(Ws::new(), "knowledge");
    assert_eq!(http(s.addr, "GET", "/health", None, None).await.status, 200);
    let r = http(s.addr, "GET", "/v1/tools", None, None).await;
    assert_eq!(r.status, 401);
    assert!(
        r.headers.contains("www-authenticate: Bearer"),
        "{}",
        r.headers
    );
    assert_eq!(
        http(
            s.addr,
            "GET",
            "/v1/tools",
            Some("wrong-token-0123456789"),
            None
        )
        .await
        .status,
        401
    );
    let write = names(
        &http(s.addr, "GET", "/v1/tools", Some(WRITE), None)
            .await
            .body,
    );
    assert_eq!(write, registry_slice("knowledge"));
    let read = names(
        &http(s.addr, "GET", "/v1/tools", Some(READ), None)
            .await
            .body,
    );
    assert!(
        read.contains(&"vox_kb_query".to_owned()) && !read.contains(&"vox_memory_store".to_owned())
    );
    assert!(
        !read.contains(&"vox_search_structural".to_owned()),
        "structural search is never for the read role"
    );
    for name in &write {
        let r = rest_call(&s, Some(READ), name, json!({})).await;
        let allowed = r.status != 403;
        assert_eq!(allowed, read.contains(name), "{name}: {}", r.body);
    }
    let r = rest_call(
        &s,
        Some(WRITE),
        "vox_memory_store",
        json!({"key": "k", "value": "v"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["result"]["stored"], true);
    let r = rest_call(&s, Some(READ), "vox_memory_recall", json!({"key": "k"})).await;
    assert_eq!(r.body["result"]["memory"]["value"], "v");
    let r = rest_call(
        &s,
        Some(READ),
        "vox_memory_store",
        json!({"key": "k", "value": "w"}),
    )
    .await;
    assert_eq!(
        (r.status, r.body["error"]["code"].as_str()),
        (403, Some("insufficient_role"))
    );
    let info = http(s.addr, "GET", "/v1/info", Some(READ), None).await.body;
    assert_eq!(info["profile"], "knowledge");
    assert_eq!(info["you"]["role"], "read");
}

#[tokio::test]
async fn denial_codes_carry_their_http_status_on_rest_and_ws() {
    let s = Server::tokens(Ws::new(), "attention");
    let r = rest_call(&s, Some(WRITE), "vox_memory_store", json!({})).await;
    assert_eq!(
        (r.status, r.body["error"]["code"].as_str()),
        (404, Some("tool_not_in_profile"))
    );
    let r = rest_call(&s, Some(READ), "vox_trust_override", json!({"agent": "a"})).await;
    assert_eq!(
        (r.status, r.body["error"]["code"].as_str()),
        (403, Some("exposure_denied"))
    );
    let r = rest_call(&s, Some(WRITE), "vox_budget_status", json!({"agent": 7})).await;
    assert_eq!(
        (r.status, r.body["error"]["code"].as_str()),
        (400, Some("invalid_arguments"))
    );
    let r = http(
        s.addr,
        "POST",
        "/v1/tools/call",
        Some(WRITE),
        Some(&json!([1])),
    )
    .await;
    assert_eq!(r.status, 400);

    let mut socket = ws_connect(s.addr, READ).await;
    let mut ask = async |v: Value| -> Value { ws_ask(&mut socket, v).await };
    let listed = ask(json!({"id": 1, "type": "list_tools"})).await;
    assert_eq!(listed["type"], "list_tools_result");
    let read_names = names(&listed);
    assert_eq!(read_names, ["vox_attention_history", "vox_budget_status"]);
    let ok =
        ask(json!({"id": 2, "type": "call_tool", "name": "vox_budget_status", "args": {}})).await;
    assert_eq!(
        (
            ok["id"].as_i64(),
            ok["type"].as_str(),
            ok["is_error"].as_bool()
        ),
        (Some(2), Some("call_tool_result"), Some(false))
    );
    let denied =
        ask(json!({"id": 3, "type": "call_tool", "name": "vox_attention_reset", "args": {}})).await;
    assert_eq!(
        (
            denied["type"].as_str(),
            denied["status"].as_u64(),
            denied["error"]["code"].as_str()
        ),
        (Some("error"), Some(403), Some("exposure_denied"))
    );
    // An id that would come back rounded (30 digits parse as a float) is refused, not echoed.
    socket
        .send(tokio_tungstenite::tungstenite::Message::Text(
            r#"{"id": 123456789012345678901234567890, "type": "list_tools"}"#.into(),
        ))
        .await
        .unwrap();
    let m = socket.next().await.unwrap().unwrap();
    let long: Value = serde_json::from_str(m.to_text().unwrap()).unwrap();
    assert_eq!(
        (long["id"].clone(), long["error"]["code"].as_str()),
        (Value::Null, Some("invalid_request")),
        "{long}"
    );
    // Without a token the upgrade itself is refused.
    let plain = tokio_tungstenite::connect_async(format!("ws://{}/v1/ws", s.addr)).await;
    assert!(plain.is_err());
}

#[tokio::test]
async fn the_allowlist_intersects_the_profile_and_read_narrowing_applies() {
    let s = Server::start(
        Ws::new(),
        "knowledge",
        &[
            ("VOX_MCP_HTTP_BEARER_TOKEN", WRITE),
            ("VOX_MCP_HTTP_READ_BEARER_TOKEN", READ),
            (
                "VOX_MCP_HTTP_ALLOWED_TOOLS",
                "vox_kb_query,vox_memory_recall,vox_memory_store,vox_repo_log",
            ),
            ("VOX_MCP_HTTP_READ_ROLE_ALLOWED_TOOLS", "vox_kb_query"),
        ],
    )
    .unwrap();
    let write = names(
        &http(s.addr, "GET", "/v1/tools", Some(WRITE), None)
            .await
            .body,
    );
    assert_eq!(
        write,
        ["vox_kb_query", "vox_memory_recall", "vox_memory_store"],
        "vox_repo_log is outside the profile and dropped"
    );
    let read = names(
        &http(s.addr, "GET", "/v1/tools", Some(READ), None)
            .await
            .body,
    );
    assert_eq!(read, ["vox_kb_query"]);
    let r = rest_call(&s, Some(READ), "vox_memory_recall", json!({"key": "k"})).await;
    assert_eq!(
        (r.status, r.body["error"]["code"].as_str()),
        (403, Some("insufficient_role"))
    );
    let r = rest_call(&s, Some(WRITE), "vox_memory_search", json!({"query": "x"})).await;
    assert_eq!(
        (r.status, r.body["error"]["code"].as_str()),
        (404, Some("tool_not_in_profile"))
    );
    // It is in the profile: what refused it is this gateway's allowlist, and the message says so.
    let msg = r.body["error"]["message"].as_str().unwrap();
    assert!(msg.contains("not on this gateway's allowlist"), "{msg}");
}

#[tokio::test]
async fn internal_tools_are_judged_by_the_socket_peer_not_forwarded_headers() {
    let s = Server::start(
        Ws::new(),
        "dev",
        &[
            ("VOX_MCP_HTTP_BEARER_TOKEN", WRITE),
            (
                "VOX_MCP_HTTP_ALLOWED_TOOLS",
                "vox_boot_report,vox_memory_recall",
            ),
        ],
    )
    .unwrap();
    let auth = format!("Bearer {WRITE}");
    let body = json!({"name": "vox_boot_report", "args": {}});
    let local = http_from(
        "127.0.0.1",
        s.addr,
        "POST",
        "/v1/tools/call",
        &[("Authorization", &auth)],
        Some(&body),
    )
    .await;
    assert_eq!(local.status, 200, "{}", local.body);
    let remote = http_from(
        "127.0.0.2",
        s.addr,
        "POST",
        "/v1/tools/call",
        &[("Authorization", &auth), ("X-Forwarded-For", "127.0.0.1")],
        Some(&body),
    )
    .await;
    assert_eq!(
        (remote.status, remote.body["error"]["code"].as_str()),
        (403, Some("exposure_denied"))
    );
    let listed = http_from(
        "127.0.0.2",
        s.addr,
        "GET",
        "/v1/tools",
        &[("Authorization", &auth)],
        None,
    )
    .await;
    assert_eq!(names(&listed.body), ["vox_memory_recall"]);
    // Metrics: loopback peers, or the write token from elsewhere; a remote peer without it is refused.
    assert_eq!(
        http_from("127.0.0.1", s.addr, "GET", "/metrics", &[], None)
            .await
            .status,
        200
    );
    assert_eq!(
        http_from("127.0.0.2", s.addr, "GET", "/metrics", &[], None)
            .await
            .status,
        403
    );
    let m = http_from(
        "127.0.0.2",
        s.addr,
        "GET",
        "/metrics",
        &[("Authorization", &auth)],
        None,
    )
    .await;
    assert_eq!(m.status, 200);
    let text = m.body.as_str().unwrap();
    assert!(text.contains("vox_tool_calls_total"), "{text}");
    // Call latency is a histogram with buckets (true quantiles), not a summary.
    assert!(
        text.contains("# TYPE vox_tool_call_seconds histogram")
            && text.contains("vox_tool_call_seconds_bucket{")
            && text.contains("le=\"+Inf\"")
            && !text.contains("quantile="),
        "{text}"
    );
}

#[tokio::test]
async fn bad_host_or_origin_is_forbidden() {
    let s = Server::tokens(Ws::new(), "knowledge");
    let auth = format!("Bearer {WRITE}");
    let r = http_from(
        "127.0.0.1",
        s.addr,
        "GET",
        "/v1/tools",
        &[("Authorization", &auth), ("Origin", "http://evil.example")],
        None,
    )
    .await;
    assert_eq!(
        (r.status, r.body["error"]["code"].as_str()),
        (403, Some("origin_not_allowed"))
    );
    let r = http_from(
        "127.0.0.1",
        s.addr,
        "GET",
        "/v1/tools",
        &[
            ("Authorization", &auth),
            ("Origin", "http://localhost:5173"),
        ],
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    // A second Host header line is how a rebinding attacker's name would arrive; test the check directly.
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    let mut conn = sock.connect(s.addr).await.unwrap();
    conn.write_all(format!("GET /v1/tools HTTP/1.1\r\nHost: evil.example\r\nAuthorization: {auth}\r\nConnection: close\r\n\r\n").as_bytes()).await.unwrap();
    let mut raw = String::new();
    conn.read_to_string(&mut raw).await.unwrap();
    assert!(raw.starts_with("HTTP/1.1 403"), "{raw}");
}

#[tokio::test]
async fn the_rate_limit_answers_429_and_oversized_bodies_413() {
    let s = Server::start(
        Ws::new(),
        "knowledge",
        &[
            ("VOX_MCP_HTTP_BEARER_TOKEN", WRITE),
            ("VOX_MCP_HTTP_RATE_PER_SEC", "1"),
            ("VOX_MCP_HTTP_RATE_BURST", "3"),
        ],
    )
    .unwrap();
    let mut statuses = vec![];
    for _ in 0..6 {
        statuses.push(
            http(s.addr, "GET", "/v1/tools", Some(WRITE), None)
                .await
                .status,
        );
    }
    assert_eq!(&statuses[..3], [200, 200, 200]);
    assert!(statuses[3..].contains(&429), "{statuses:?}");
    let s2 = Server::tokens(Ws::new(), "knowledge");
    let big =
        json!({"name": "vox_memory_store", "args": {"key": "k", "value": "x".repeat(5 << 20)}});
    let r = http(s2.addr, "POST", "/v1/tools/call", Some(WRITE), Some(&big)).await;
    assert_eq!(r.status, 413);
}

#[tokio::test]
async fn subsystem_not_booted_is_503_on_rest_and_ws() {
    let ws = Ws::new();
    std::fs::write(ws.root().join("blocker"), "x").unwrap();
    let bad = ws
        .root()
        .join("blocker/journey.db")
        .to_string_lossy()
        .into_owned();
    let s = Server::start(
        ws,
        "knowledge",
        &[("VOX_MCP_HTTP_BEARER_TOKEN", WRITE), ("VOX_DB_PATH", &bad)],
    )
    .unwrap();
    let r = rest_call(&s, Some(WRITE), "vox_memory_recall", json!({"key": "k"})).await;
    assert_eq!(
        (
            r.status,
            r.body["error"]["code"].as_str(),
            r.body["error"]["subsystem"].as_str()
        ),
        (503, Some("subsystem_not_booted"), Some("memory"))
    );
    let listed = names(
        &http(s.addr, "GET", "/v1/tools", Some(WRITE), None)
            .await
            .body,
    );
    assert_eq!(listed, ["vox_search_structural", "vox_search_text"]);
    let mut socket = ws_connect(s.addr, WRITE).await;
    let msg =
        json!({"id": "a", "type": "call_tool", "name": "vox_kb_query", "args": {"query": "x"}});
    socket
        .send(tokio_tungstenite::tungstenite::Message::Text(
            msg.to_string().into(),
        ))
        .await
        .unwrap();
    let v: Value =
        serde_json::from_str(socket.next().await.unwrap().unwrap().to_text().unwrap()).unwrap();
    assert_eq!(
        (
            v["id"].as_str(),
            v["status"].as_u64(),
            v["error"]["code"].as_str(),
            v["error"]["subsystem"].as_str()
        ),
        (
            Some("a"),
            Some(503),
            Some("subsystem_not_booted"),
            Some("db")
        )
    );
}

#[tokio::test]
async fn sigterm_stops_serve_cleanly_and_keeps_acknowledged_writes() {
    let mut s = Server::tokens(Ws::new(), "knowledge");
    let inflight = tokio::spawn({
        let addr = s.addr;
        async move { call_at(addr, "vox_memory_store", json!({"key": "k", "value": "v"})).await }
    });
    let r = inflight.await.unwrap();
    assert_eq!(r.status, 200);
    Command::new("kill")
        .args(["-TERM", &s.child.id().to_string()])
        .status()
        .unwrap();
    let status = s.child.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(!s.ws.vox_dir().join("orchestrator.sock").exists());
    assert!(
        tokio::net::TcpStream::connect(s.addr).await.is_err(),
        "the port is closed"
    );
    // The acknowledged write is in the store for the next daemon.
    let c = s.ws.client(&["--profile", "knowledge"]).await;
    assert_eq!(
        ok(&c, "vox_memory_recall", json!({"key": "k"})).await["memory"]["value"],
        "v"
    );
    c.cancel().await.unwrap();
}

async fn call_at(addr: SocketAddr, name: &str, args: Value) -> Reply {
    let auth = format!("Bearer {WRITE}");
    http_from(
        "127.0.0.1",
        addr,
        "POST",
        "/v1/tools/call",
        &[("Authorization", &auth)],
        Some(&json!({"name": name, "args": args})),
    )
    .await
}

#[tokio::test]
async fn an_active_skill_is_scoped_to_the_rest_session_that_chose_it() {
    let ws = Ws::new();
    let dir = ws.root().join(".vox/skills/mem-only");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        "---\nname: mem-only\ndescription: Memories only.\nmetadata:\n  vox-tools: vox_memory_*\n---\nUse memories.\n",
    )
    .unwrap();
    let s = Server::tokens(ws, "knowledge,skills");
    let in_session = |session: &'static str, name: &'static str, args: Value| {
        let auth = format!("Bearer {WRITE}");
        let addr = s.addr;
        async move {
            http_from(
                "127.0.0.1",
                addr,
                "POST",
                "/v1/tools/call",
                &[("Authorization", &auth), ("X-Vox-Session", session)],
                Some(&json!({"name": name, "args": args})),
            )
            .await
        }
    };
    let r = in_session("a", "vox_skill_use", json!({"id": "mem-only"})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = in_session("a", "vox_kb_query", json!({"query": "x"})).await;
    assert_eq!(
        (
            r.status,
            r.body["error"]["code"].as_str(),
            r.body["error"]["skill"].as_str()
        ),
        (403, Some("skill_tool_not_allowed"), Some("mem-only")),
        "{}",
        r.body
    );
    let r = in_session("a", "vox_memory_list", json!({})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    // Another session of the same token, and a request without a session, are not limited.
    assert_eq!(
        in_session("b", "vox_kb_query", json!({"query": "x"}))
            .await
            .status,
        200
    );
    assert_eq!(
        rest_call(&s, Some(WRITE), "vox_kb_query", json!({"query": "x"}))
            .await
            .status,
        200
    );
    let r = in_session("bad session!", "vox_kb_query", json!({"query": "x"})).await;
    assert_eq!(r.status, 400, "{}", r.body);
    // Without a named session a skill cannot be activated: it would bind every request of the
    // token.
    let r = rest_call(&s, Some(WRITE), "vox_skill_use", json!({"id": "mem-only"})).await;
    assert_eq!(
        (r.status, r.body["error"]["code"].as_str()),
        (400, Some("invalid_arguments")),
        "{}",
        r.body
    );
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("X-Vox-Session")
    );
}

/// Waits until `needle` runs, then (after `close` is called) until it is gone; returns how long
/// it took to go.
async fn gone_after(needle: &str, close: impl FnOnce()) -> std::time::Duration {
    let started = std::time::Instant::now();
    while pids_running(needle).is_empty() {
        assert!(started.elapsed().as_secs() < 15, "{needle} never started");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    close();
    let closed = std::time::Instant::now();
    while !pids_running(needle).is_empty() {
        assert!(closed.elapsed().as_secs() < 5, "{needle} still running");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    closed.elapsed()
}

#[tokio::test]
async fn a_closed_rest_request_or_websocket_cancels_its_work() {
    let ws = Ws::new();
    let skill = ws.root().join(".vox/skills/sleeper/SKILL.md");
    std::fs::create_dir_all(skill.parent().unwrap()).unwrap();
    std::fs::write(
        &skill,
        "---\nname: sleeper\ndescription: Sleeps.\n---\nSleep.\n",
    )
    .unwrap();
    let s = Server::start(
        ws,
        "dev",
        &[
            ("VOX_MCP_HTTP_BEARER_TOKEN", WRITE),
            ("VOX_MCP_HTTP_ALLOWED_TOOLS", "vox_skill_run"),
        ],
    )
    .unwrap();
    let run = |marker: &str| json!({"name": "vox_skill_run", "args": {"id": "sleeper", "command": ["sleep", marker], "timeout_ms": 25000}});

    // REST: the client hangs up while the call runs.
    let marker = format!("30.{}1", std::process::id());
    let body = run(&marker).to_string();
    let mut conn = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    let req = format!(
        "POST /v1/tools/call HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {WRITE}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        s.addr.port(),
        body.len()
    );
    conn.write_all(req.as_bytes()).await.unwrap();
    let took = gone_after(&format!("sleep {marker}"), move || drop(conn)).await;
    assert!(took.as_millis() < 1000, "REST: gone after {took:?}");

    // WebSocket: the connection closes while the call runs.
    let marker = format!("30.{}2", std::process::id());
    let mut socket = ws_connect(s.addr, WRITE).await;
    let mut frame = run(&marker);
    frame["id"] = json!(1);
    frame["type"] = json!("call_tool");
    socket
        .send(tokio_tungstenite::tungstenite::Message::Text(
            frame.to_string().into(),
        ))
        .await
        .unwrap();
    let took = gone_after(&format!("sleep {marker}"), move || drop(socket)).await;
    assert!(took.as_millis() < 1000, "WebSocket: gone after {took:?}");
}

#[tokio::test]
async fn rest_lists_output_schemas_and_results_match_them() {
    let s = Server::tokens(Ws::new(), "knowledge");
    let listed = http(s.addr, "GET", "/v1/tools", Some(WRITE), None)
        .await
        .body;
    let tools = listed["tools"].as_array().unwrap();
    assert_eq!(names(&listed), registry_slice("knowledge"));
    for t in tools {
        assert_eq!(t["output_schema"]["type"], "object", "{t}");
        let problems = vox_core::family::portability_problems(&t["input_schema"]);
        assert!(problems.is_empty(), "{}: {problems:?}", t["name"]);
    }
    let r = rest_call(
        &s,
        Some(WRITE),
        "vox_memory_store",
        json!({"key": "k", "value": "v", "tags": null}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = rest_call(
        &s,
        Some(WRITE),
        "vox_memory_list",
        json!({"prefix": null, "cursor": null}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let schema = &tools
        .iter()
        .find(|t| t["name"] == "vox_memory_list")
        .unwrap()["output_schema"];
    let validator = jsonschema::validator_for(schema).unwrap();
    assert!(validator.is_valid(&r.body["result"]), "{}", r.body);
    assert_eq!(r.body["result"]["memories"][0]["key"], "k");
}

/// `GET /v1/tools` with the write token and these extra header lines.
async fn tools_with(addr: SocketAddr, header_lines: &str) -> (u16, String) {
    raw_request(
        addr,
        &format!("GET /v1/tools HTTP/1.1\r\n{header_lines}Authorization: Bearer {WRITE}\r\nConnection: close\r\n\r\n"),
    )
    .await
}

#[tokio::test]
async fn host_and_origin_are_parsed_as_authorities_and_compared_exactly() {
    let s = Server::tokens(Ws::new(), "knowledge");
    let port = s.addr.port();
    for host in [
        "[::1].evil.com",
        "[::1]evil.com",
        "[::1]:80evil.com",
        "127.0.0.1.evil.com",
        "localhost.evil.com",
        "localhost@evil.com",
        "evil.com@localhost",
        "localhost/evil",
        "localhost:80:80",
        "localhost:",
        "localhost:http",
        "[::2]",
        "",
    ] {
        let (status, text) = tools_with(s.addr, &format!("Host: {host}\r\n")).await;
        assert_eq!(status, 403, "Host: {host}: {text}");
        assert!(text.contains("host_not_allowed"), "Host: {host}: {text}");
    }
    for host in [
        format!("127.0.0.1:{port}"),
        "LOCALHOST".into(),
        "localhost:80".into(),
        "[::1]".into(),
        format!("[::1]:{port}"),
        "[0:0:0:0:0:0:0:1]:80".into(),
    ] {
        let (status, text) = tools_with(s.addr, &format!("Host: {host}\r\n")).await;
        assert_eq!(status, 200, "Host: {host}: {text}");
    }
    let host = format!("Host: 127.0.0.1:{port}\r\n");
    for origin in [
        "http://[::1]@evil.com",
        "http://localhost@evil.com",
        "http://localhost:5173@evil.com",
        "http://[::1].evil.com",
        "http://[::1]evil.com",
        "http://localhost.evil.com",
        "http://localhost:5173/",
        "http://localhost:5173/path",
        "http://localhost:5173?x",
        "http://localhost:5173#x",
        "http://localhost:5173x",
        "ftp://localhost",
        "http:localhost",
        "localhost",
        "null",
    ] {
        let (status, text) = tools_with(s.addr, &format!("{host}Origin: {origin}\r\n")).await;
        assert_eq!(status, 403, "Origin: {origin}: {text}");
        assert!(
            text.contains("origin_not_allowed"),
            "Origin: {origin}: {text}"
        );
    }
    for origin in [
        "http://localhost:5173",
        "https://LocalHost",
        "http://[::1]:5173",
        "http://127.0.0.1",
    ] {
        let (status, text) = tools_with(s.addr, &format!("{host}Origin: {origin}\r\n")).await;
        assert_eq!(status, 200, "Origin: {origin}: {text}");
    }
}

#[tokio::test]
async fn a_request_without_exactly_one_host_header_is_refused() {
    let s = Server::tokens(Ws::new(), "knowledge");
    let port = s.addr.port();
    for path in ["/v1/tools", "/health", "/mcp"] {
        let (status, text) = raw_request(
            s.addr,
            &format!(
                "GET {path} HTTP/1.1\r\nAuthorization: Bearer {WRITE}\r\nConnection: close\r\n\r\n"
            ),
        )
        .await;
        assert_eq!(status, 400, "{path} without Host: {text}");
        assert!(text.contains("host_required"), "{text}");
    }
    let (status, text) = tools_with(
        s.addr,
        &format!("Host: 127.0.0.1:{port}\r\nHost: evil.example\r\n"),
    )
    .await;
    assert_eq!(status, 400, "two Host headers: {text}");
    // An absolute request target names the host too, and is checked like Host.
    let (status, text) = raw_request(
        s.addr,
        &format!("GET http://evil.example/v1/tools HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {WRITE}\r\nConnection: close\r\n\r\n"),
    )
    .await;
    assert_eq!(status, 403, "absolute target: {text}");
    let (status, _) = tools_with(s.addr, &format!("Host: 127.0.0.1:{port}\r\n")).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn unauthenticated_mode_needs_a_127_0_0_1_or_ipv6_loopback_bind_and_tokens_must_differ() {
    for bind in ["127.0.0.2", "::ffff:127.0.0.1", "0.0.0.0"] {
        let err = Server::start(
            Ws::new(),
            "knowledge",
            &[
                ("VOX_MCP_HTTP_ALLOW_UNAUTHENTICATED", "1"),
                ("VOX_MCP_HTTP_HOST", bind),
            ],
        )
        .err()
        .unwrap_or_else(|| panic!("{bind}: started"));
        assert!(
            err.contains("VOX_MCP_HTTP_ALLOW_UNAUTHENTICATED") && err.contains(bind),
            "{bind}: {err}"
        );
    }
    let err = Server::start(
        Ws::new(),
        "knowledge",
        &[
            ("VOX_MCP_HTTP_BEARER_TOKEN", WRITE),
            ("VOX_MCP_HTTP_READ_BEARER_TOKEN", &format!(" {WRITE} ")),
        ],
    )
    .err()
    .unwrap();
    assert!(
        err.contains("VOX_MCP_HTTP_READ_BEARER_TOKEN") && err.contains("VOX_MCP_HTTP_BEARER_TOKEN"),
        "{err}"
    );
    assert!(
        !err.contains(WRITE),
        "the error does not print the token: {err}"
    );
    // 127.0.0.1 still serves without a token.
    let s = Server::start(
        Ws::new(),
        "knowledge",
        &[("VOX_MCP_HTTP_ALLOW_UNAUTHENTICATED", "1")],
    )
    .unwrap();
    assert_eq!(
        http(s.addr, "GET", "/v1/tools", None, None).await.status,
        200
    );
    // A peer the gateway does not count as loopback gets no role without a token.
    let r = http_from("127.0.0.2", s.addr, "GET", "/v1/tools", &[], None).await;
    assert_eq!(r.status, 401, "{}", r.body);
}

/// One `/mcp` request with JSON-RPC `body` (or none), optional token and session; returns the
/// reply.
async fn mcp(
    s: &Server,
    from: &str,
    method: &str,
    token: Option<&str>,
    session: Option<&str>,
    body: Option<&Value>,
) -> Reply {
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut headers: Vec<(&str, &str)> = vec![
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    if let Some(a) = &auth {
        headers.push(("Authorization", a));
    }
    if let Some(id) = session {
        headers.push(("Mcp-Session-Id", id));
    }
    if method == "POST" && body.is_none() {
        headers.push(("Content-Type", "application/json"));
    }
    http_from(from, s.addr, method, "/mcp", &headers, body).await
}

/// Opens a 2025-era `/mcp` session and returns its id.
async fn mcp_session(s: &Server, from: &str, token: Option<&str>) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let r = mcp(s, from, "POST", token, None, Some(&init)).await;
    assert_eq!(r.status, 200, "{} {}", r.headers, r.body);
    let id = r
        .headers
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("mcp-session-id")
                .then(|| v.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no session id: {}", r.headers));
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let r = mcp(s, from, "POST", token, Some(&id), Some(&note)).await;
    assert_eq!(r.status, 202, "{}", r.body);
    id
}

#[tokio::test]
async fn an_mcp_session_answers_only_the_credential_that_opened_it() {
    let s = Server::tokens(Ws::new(), "knowledge");
    let id = mcp_session(&s, "127.0.0.1", Some(WRITE)).await;
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    for (token, what) in [(Some(READ), "the read token"), (None, "no token")] {
        for method in ["POST", "GET", "DELETE"] {
            let body = (method == "POST").then_some(&list);
            let r = mcp(&s, "127.0.0.1", method, token, Some(&id), body).await;
            let expected = if token.is_none() { 401 } else { 404 };
            assert_eq!(r.status, expected, "{method} by {what}: {}", r.body);
        }
    }
    // The session is still there for its owner.
    let r = mcp(&s, "127.0.0.1", "POST", Some(WRITE), Some(&id), Some(&list)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        r.body.to_string().contains("vox_memory_store"),
        "{}",
        r.body
    );
    let r = mcp(&s, "127.0.0.1", "DELETE", Some(WRITE), Some(&id), None).await;
    // 200, as the SDKs' clients expect of an ended session (the Python one warns on 202).
    assert_eq!(r.status, 200, "{}", r.body);
    let r = mcp(&s, "127.0.0.1", "POST", Some(WRITE), Some(&id), Some(&list)).await;
    assert_eq!(r.status, 404, "a closed session is gone: {}", r.body);

    // Without tokens, a session belongs to the peer that opened it; a token is another caller.
    let s = Server::start(
        Ws::new(),
        "knowledge",
        &[
            ("VOX_MCP_HTTP_ALLOW_UNAUTHENTICATED", "1"),
            ("VOX_MCP_HTTP_BEARER_TOKEN", WRITE),
        ],
    )
    .unwrap();
    let id = mcp_session(&s, "127.0.0.1", None).await;
    let r = mcp(&s, "127.0.0.1", "DELETE", Some(WRITE), Some(&id), None).await;
    assert_eq!(r.status, 404, "{}", r.body);
    let r = mcp(&s, "127.0.0.2", "DELETE", None, Some(&id), None).await;
    assert_ne!(r.status / 100, 2, "another peer cannot end it: {}", r.body);
    let r = mcp(&s, "127.0.0.1", "POST", None, Some(&id), Some(&list)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    // And the other way: the write token's session is not the tokenless caller's.
    let id = mcp_session(&s, "127.0.0.1", Some(WRITE)).await;
    let r = mcp(&s, "127.0.0.1", "DELETE", None, Some(&id), None).await;
    assert_eq!(r.status, 404, "{}", r.body);
    let r = mcp(&s, "127.0.0.1", "POST", Some(WRITE), Some(&id), Some(&list)).await;
    assert_eq!(r.status, 200, "{}", r.body);
}

#[tokio::test]
async fn vox_skill_use_without_a_session_is_authorized_before_the_session_is_asked_for() {
    let s = Server::start(
        Ws::new(),
        "knowledge,skills",
        &[
            ("VOX_MCP_HTTP_BEARER_TOKEN", WRITE),
            ("VOX_MCP_HTTP_READ_BEARER_TOKEN", READ),
            (
                "VOX_MCP_HTTP_ALLOWED_TOOLS",
                "vox_skill_use,vox_skill_list,vox_memory_recall",
            ),
        ],
    )
    .unwrap();
    let r = rest_call(&s, Some(READ), "vox_skill_use", json!({"id": "x"})).await;
    assert_eq!(
        (r.status, r.body["error"]["code"].as_str()),
        (403, Some("insufficient_role")),
        "{}",
        r.body
    );
    let r = rest_call(&s, Some(WRITE), "vox_skill_use", json!({"id": "x"})).await;
    assert_eq!(
        (r.status, r.body["error"]["code"].as_str()),
        (400, Some("invalid_arguments")),
        "{}",
        r.body
    );
    // Not on the allowlist (the profile serves it): the allowlist's denial, not the session's.
    let s = Server::start(
        Ws::new(),
        "knowledge,skills",
        &[
            ("VOX_MCP_HTTP_BEARER_TOKEN", WRITE),
            ("VOX_MCP_HTTP_ALLOWED_TOOLS", "vox_skill_list"),
        ],
    )
    .unwrap();
    let r = rest_call(&s, Some(WRITE), "vox_skill_use", json!({"id": "x"})).await;
    assert_eq!(
        (r.status, r.body["error"]["code"].as_str()),
        (404, Some("tool_not_in_profile")),
        "{}",
        r.body
    );
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("allowlist"),
        "{}",
        r.body
    );
    // Outside the profile.
    let s = Server::tokens(Ws::new(), "knowledge");
    let r = rest_call(&s, Some(WRITE), "vox_skill_use", json!({"id": "x"})).await;
    assert_eq!(
        (r.status, r.body["error"]["code"].as_str()),
        (404, Some("tool_not_in_profile")),
        "{}",
        r.body
    );
}

/// The text of an `/mcp` reply (an SSE stream arrives as a string).
fn sse(r: &Reply) -> String {
    r.body
        .as_str()
        .map_or_else(|| r.body.to_string(), str::to_owned)
}

/// The start and the end of a reply, for failure messages.
fn clip(r: &Reply) -> String {
    let t = sse(r);
    let c: Vec<char> = t.chars().collect();
    if c.len() <= 600 {
        return t;
    }
    let head: String = c[..300].iter().collect();
    let tail: String = c[c.len() - 300..].iter().collect();
    format!("{head} … {tail}")
}

/// `VOX_MCP_HTTP_WORKSPACE_TOOLS=1`: `/mcp` serves the workspace's `.vox` tools and resources
/// to the write role under dev; never to the read token, never without the opt-in, and a named
/// profile refuses the setting at start.
#[tokio::test]
async fn mcp_serves_workspace_tools_to_the_write_role_when_the_operator_opts_in() {
    let ws = Ws::new();
    std::fs::create_dir_all(ws.root().join("tools")).unwrap();
    std::fs::write(
        ws.root().join("tools/t.vox"),
        "@tool \"Twice\"\nfn twice(x: int) to int {\n    log(\"info\", \"doubling\")\n    x * 2\n}\n\n@mcp.resource(\"docs://hello\", \"A greeting\")\nfn hello() to str {\n    \"hi\"\n}\n",
    )
    .unwrap();
    let e = Server::start(
        Ws::new(),
        "knowledge",
        &[
            ("VOX_MCP_HTTP_BEARER_TOKEN", WRITE),
            ("VOX_MCP_HTTP_WORKSPACE_TOOLS", "1"),
        ],
    )
    .err()
    .expect("a named profile refuses workspace tools over HTTP");
    assert!(
        e.contains("VOX_MCP_HTTP_WORKSPACE_TOOLS=1") && e.contains("knowledge"),
        "{e}"
    );

    let s = Server::start(
        ws,
        "dev",
        &[
            ("VOX_MCP_HTTP_BEARER_TOKEN", WRITE),
            ("VOX_MCP_HTTP_READ_BEARER_TOKEN", READ),
            ("VOX_MCP_HTTP_WORKSPACE_TOOLS", "1"),
        ],
    )
    .unwrap();
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "twice", "arguments": {"x": 21}}});
    let resources = json!({"jsonrpc": "2.0", "id": 4, "method": "resources/list"});
    let read = json!({"jsonrpc": "2.0", "id": 5, "method": "resources/read",
        "params": {"uri": "docs://hello"}});
    let id = mcp_session(&s, "127.0.0.1", Some(WRITE)).await;
    let level = json!({"jsonrpc": "2.0", "id": 6, "method": "logging/setLevel", "params": {"level": "info"}});
    mcp(
        &s,
        "127.0.0.1",
        "POST",
        Some(WRITE),
        Some(&id),
        Some(&level),
    )
    .await;
    let r = mcp(&s, "127.0.0.1", "POST", Some(WRITE), Some(&id), Some(&list)).await;
    assert!(sse(&r).contains("\"twice\""), "{}", clip(&r));
    let r = mcp(&s, "127.0.0.1", "POST", Some(WRITE), Some(&id), Some(&call)).await;
    assert!(sse(&r).contains("\"result\":42"), "{}", clip(&r));
    let r = mcp(
        &s,
        "127.0.0.1",
        "POST",
        Some(WRITE),
        Some(&id),
        Some(&resources),
    )
    .await;
    assert!(sse(&r).contains("docs://hello"), "{}", clip(&r));
    let r = mcp(&s, "127.0.0.1", "POST", Some(WRITE), Some(&id), Some(&read)).await;
    assert!(sse(&r).contains("\"hi\""), "{}", clip(&r));

    // The read token sees and reaches none of it.
    let id = mcp_session(&s, "127.0.0.1", Some(READ)).await;
    let r = mcp(&s, "127.0.0.1", "POST", Some(READ), Some(&id), Some(&list)).await;
    assert!(!sse(&r).contains("\"twice\""), "{}", clip(&r));
    let r = mcp(&s, "127.0.0.1", "POST", Some(READ), Some(&id), Some(&call)).await;
    assert!(!sse(&r).contains("\"result\":42"), "{}", clip(&r));
    let r = mcp(&s, "127.0.0.1", "POST", Some(READ), Some(&id), Some(&read)).await;
    assert!(!sse(&r).contains("\"hi\""), "{}", clip(&r));
    drop(s);

    // Without the opt-in, `/mcp` under dev serves the catalog only.
    let ws = Ws::new();
    std::fs::create_dir_all(ws.root().join("tools")).unwrap();
    std::fs::write(
        ws.root().join("tools/t.vox"),
        "@tool\nfn twice(x: int) to int {\n    x * 2\n}\n",
    )
    .unwrap();
    let s = Server::start(ws, "dev", &[("VOX_MCP_HTTP_BEARER_TOKEN", WRITE)]).unwrap();
    let id = mcp_session(&s, "127.0.0.1", Some(WRITE)).await;
    let r = mcp(&s, "127.0.0.1", "POST", Some(WRITE), Some(&id), Some(&list)).await;
    assert!(!sse(&r).contains("\"twice\""), "{}", clip(&r));
    let r = mcp(&s, "127.0.0.1", "POST", Some(WRITE), Some(&id), Some(&call)).await;
    assert!(!sse(&r).contains("\"result\":42"), "{}", clip(&r));
}

/// An agent's credential works over HTTP as on stdio: REST lists and calls exactly the
/// agent's own public tools (within the gateway's surface), a side effect waits for the
/// operator's approval, and a retired credential is refused.
#[tokio::test]
async fn an_agent_credential_is_the_agent_over_rest() {
    let s = Server::tokens(Ws::new(), "knowledge,orchestrator");
    let spawned = rest_call(
        &s,
        Some(WRITE),
        "vox_spawn_agent",
        json!({"agent_id": "remote", "profile": "knowledge"}),
    )
    .await;
    assert_eq!(spawned.status, 200, "{:?}", spawned.body);
    let token = spawned.body["result"]["token"].as_str().unwrap().to_owned();
    let listed = names(
        &http(s.addr, "GET", "/v1/tools", Some(&token), None)
            .await
            .body,
    );
    let public: Vec<String> = registry_slice("knowledge")
        .into_iter()
        .filter(|n| {
            vox_mcp_registry::tool_by_name(n).unwrap().exposure
                == vox_mcp_registry::Exposure::Public
        })
        .collect();
    assert_eq!(listed, public);
    let denied = rest_call(&s, Some(&token), "vox_submit_task", json!({"title": "t"})).await;
    assert_eq!(
        (denied.status, denied.body["error"]["code"].as_str()),
        (404, Some("tool_not_in_profile")),
        "{:?}",
        denied.body
    );
    assert_eq!(
        rest_call(&s, Some(&token), "vox_memory_list", json!({}))
            .await
            .status,
        200
    );
    // The write waits for the operator, who approves it.
    let addr = s.addr;
    let token2 = token.clone();
    let waiting = tokio::spawn(async move {
        http(
            addr,
            "POST",
            "/v1/tools/call",
            Some(&token2),
            Some(&json!({"name": "vox_memory_store", "args": {"key": "k", "value": "v"}})),
        )
        .await
    });
    let id = loop {
        let p = rest_call(&s, Some(WRITE), "vox_pending_approvals", json!({})).await;
        if let Some(id) = p.body["result"]["approvals"][0]["id"].as_i64() {
            assert_eq!(p.body["result"]["approvals"][0]["agent"], "remote");
            break id;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let decided = rest_call(
        &s,
        Some(WRITE),
        "vox_resolve_approval",
        json!({"approval_id": id, "decision": "approve"}),
    )
    .await;
    assert_eq!(decided.status, 200, "{:?}", decided.body);
    assert_eq!(waiting.await.unwrap().status, 200);
    rest_call(
        &s,
        Some(WRITE),
        "vox_retire_agent",
        json!({"agent_id": "remote"}),
    )
    .await;
    assert_eq!(
        http(s.addr, "GET", "/v1/tools", Some(&token), None)
            .await
            .status,
        401
    );
}

/// The JSON-RPC message of a `/mcp` reply (a JSON body, or the `data:` line of an SSE one).
fn mcp_message(r: &Reply) -> Value {
    if let Value::String(text) = &r.body {
        let data = text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .find(|d| !d.trim().is_empty())
            .unwrap_or_else(|| panic!("no message in {text}"));
        return serde_json::from_str(data.trim()).unwrap();
    }
    r.body.clone()
}

/// Whether a refusal is the profile's (the tool is not reachable here), not a call that ran.
fn refused(code: &Value) -> bool {
    matches!(code.as_str(), Some("tool_not_in_profile" | "unknown_tool"))
}

/// The profile leak matrix: under `knowledge`, every transport (stdio, the daemon socket, REST,
/// WebSocket, `/mcp`) lists exactly the profile's slice, and every other catalog tool is refused
/// by the profile on each of them. (The agent path's matrix is `orchestrator_e2e`'s and
/// `test_orchestrator.py`'s.)
#[tokio::test]
async fn the_profile_leak_matrix_holds_on_every_transport() {
    use rmcp::ServiceExt;
    let s = Server::tokens(Ws::new(), "knowledge");
    let mut slice = registry_slice("knowledge");
    slice.sort();
    let outside: Vec<&str> = vox_mcp_registry::TOOL_REGISTRY
        .iter()
        .map(|t| t.name)
        .filter(|n| !slice.iter().any(|s| s == n))
        .collect();
    assert!(outside.len() > 20, "{outside:?}");
    let mut leaks: Vec<String> = Vec::new();
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };

    // REST.
    let listed = names(
        &http(s.addr, "GET", "/v1/tools", Some(WRITE), None)
            .await
            .body,
    );
    assert_eq!(sorted(listed), slice, "REST lists the slice");
    for t in &outside {
        let r = rest_call(&s, Some(WRITE), t, json!({})).await;
        if !refused(&r.body["error"]["code"]) {
            leaks.push(format!("REST {t}: {} {}", r.status, r.body));
        }
    }

    // WebSocket.
    let mut ws = ws_connect(s.addr, WRITE).await;
    ws.send(tokio_tungstenite::tungstenite::Message::text(
        json!({"id": 0, "type": "list_tools"}).to_string(),
    ))
    .await
    .unwrap();
    let answer = |m: Option<Result<tokio_tungstenite::tungstenite::Message, _>>| -> Value {
        serde_json::from_str(m.unwrap().unwrap().to_text().unwrap()).unwrap()
    };
    let listed = answer(ws.next().await);
    assert_eq!(sorted(names(&listed)), slice, "WebSocket lists the slice");
    for (i, t) in outside.iter().enumerate() {
        let req = json!({"id": i + 1, "type": "call_tool", "name": t, "args": {}});
        ws.send(tokio_tungstenite::tungstenite::Message::text(
            req.to_string(),
        ))
        .await
        .unwrap();
        let a = answer(ws.next().await);
        if !refused(&a["error"]["code"]) {
            leaks.push(format!("WebSocket {t}: {a}"));
        }
    }

    // /mcp (a 2025-era session).
    let id = mcp_session(&s, "127.0.0.1", Some(WRITE)).await;
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let r = mcp(&s, "127.0.0.1", "POST", Some(WRITE), Some(&id), Some(&list)).await;
    let listed = mcp_message(&r)["result"].clone();
    assert_eq!(sorted(names(&listed)), slice, "/mcp lists the slice");
    for t in &outside {
        let req = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": t, "arguments": {}}});
        let m =
            mcp_message(&mcp(&s, "127.0.0.1", "POST", Some(WRITE), Some(&id), Some(&req)).await);
        let code = &m["result"]["structuredContent"]["error"]["code"];
        if !refused(code) {
            leaks.push(format!("/mcp {t}: {m}"));
        }
    }

    // stdio (`vox mcp` on the daemon `vox serve` runs) and the daemon socket (an MCP client).
    let stdio = s.ws.client(&["--profile", "knowledge"]).await;
    let (r, w) = tokio::net::UnixStream::connect(s.ws.vox_dir().join("orchestrator.sock"))
        .await
        .unwrap()
        .into_split();
    let socket = ().serve((r, w)).await.unwrap();
    for (what, c) in [("stdio", &stdio), ("socket", &socket)] {
        assert_eq!(sorted(tool_names(c).await), slice, "{what} lists the slice");
        for t in &outside {
            let r = c
                .call_tool(rmcp::model::CallToolRequestParams::new(t.to_string()))
                .await;
            let code = match &r {
                Ok(r) => r
                    .structured_content
                    .as_ref()
                    .map_or(Value::Null, |v| v["error"]["code"].clone()),
                Err(e) => json!(format!("{e}")),
            };
            if !refused(&code) {
                leaks.push(format!("{what} {t}: {r:?}"));
            }
        }
    }
    stdio.cancel().await.unwrap();
    socket.cancel().await.unwrap();
    assert!(leaks.is_empty(), "{} leaks: {leaks:#?}", leaks.len());
}

#[tokio::test]
async fn health_says_degraded_and_ready_refuses_while_a_subsystem_is_down() {
    let s = Server::tokens(Ws::new(), "knowledge");
    let h = http(s.addr, "GET", "/health", None, None).await;
    assert_eq!(
        (h.status, h.body["status"].as_str()),
        (200, Some("ok")),
        "{}",
        h.body
    );
    assert_eq!(http(s.addr, "GET", "/ready", None, None).await.status, 200);

    // A store that cannot be reached: alive, but not ready, and saying why.
    let down = Server::start(
        Ws::new(),
        "knowledge",
        &[
            ("VOX_MCP_HTTP_BEARER_TOKEN", WRITE),
            ("VOX_DB_URL", "postgres://vox@127.0.0.1:1/nowhere"),
        ],
    )
    .unwrap();
    let h = http(down.addr, "GET", "/health", None, None).await;
    assert_eq!(
        (h.status, h.body["status"].as_str()),
        (200, Some("degraded")),
        "{}",
        h.body
    );
    assert!(h.body["failed"]["db"].is_string(), "{}", h.body);
    let r = http(down.addr, "GET", "/ready", None, None).await;
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(r.body["failed"], h.body["failed"]);

    // And `vox serve` says so at the start, on stderr.
    let ws = Ws::new();
    let mut child = std::process::Command::new(VOX)
        .args(["serve", "--profile", "knowledge"])
        .env("VOX_WORKSPACE", ws.root())
        .env("VOX_HOME", ws.home.path())
        .env("VOX_MCP_HTTP_BEARER_TOKEN", WRITE)
        .env("VOX_MCP_HTTP_PORT", "0")
        .env("VOX_DB_URL", "postgres://vox@127.0.0.1:1/nowhere")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !line.contains("degraded") && std::time::Instant::now() < deadline {
        line.clear();
        if std::io::BufRead::read_line(&mut stderr, &mut line).unwrap_or(0) == 0 {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(line.contains("degraded: subsystem db is down"), "{line}");
}

#[test]
fn serve_host_and_port_flags_stand_in_for_the_variables() {
    let ws = Ws::new();
    // The flags win over the variables.
    let mut child = std::process::Command::new(VOX)
        .args([
            "serve",
            "--profile",
            "knowledge",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
        ])
        .env("VOX_WORKSPACE", ws.root())
        .env("VOX_HOME", ws.home.path())
        .env("VOX_MCP_HTTP_BEARER_TOKEN", WRITE)
        .env("VOX_MCP_HTTP_PORT", "3921")
        .env("VOX_MCP_HTTP_HOST", "0.0.0.0")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(line.contains("listening on http://127.0.0.1:"), "{line}");
    assert!(
        !line.contains(":3921"),
        "--port 0 picked a free port: {line}"
    );
    // A variable set to a bad value is refused even when a flag would replace it: the
    // environment is wrong, and saying so beats a surprise on the next start without the flag.
    let out = std::process::Command::new(VOX)
        .args(["serve", "--port", "0"])
        .env("VOX_WORKSPACE", ws.root())
        .env("VOX_HOME", ws.home.path())
        .env("VOX_MCP_HTTP_PORT", "not-a-port")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("VOX_MCP_HTTP_PORT: `not-a-port`"));
    // A bad flag is refused by name.
    let out = ws.vox(&["serve", "--host", "nowhere"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--host") && stderr.contains("nowhere"),
        "{stderr}"
    );
}
