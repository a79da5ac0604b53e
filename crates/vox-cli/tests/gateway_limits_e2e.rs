//! End to end: what bounds `vox serve` against clients that would exhaust it (issue #32,
//! finding 8): half-open requests, a crowd of connections, the descriptor limit, guessed
//! tokens and a WebSocket flood.

mod common;
use common::gateway::*;
use common::*;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Reads until the peer closes (or `limit` passes): how long it took, and what it sent.
async fn until_closed(conn: &mut tokio::net::TcpStream, limit: Duration) -> (Duration, String) {
    let started = Instant::now();
    let mut raw = Vec::new();
    let _ = tokio::time::timeout(limit, conn.read_to_end(&mut raw)).await;
    (
        started.elapsed(),
        String::from_utf8_lossy(&raw).into_owned(),
    )
}

#[tokio::test]
async fn half_open_requests_are_reaped_and_connections_past_the_limit_are_told_busy() {
    let s = Server::start(
        Ws::new(),
        "knowledge",
        &[
            ("VOX_MCP_HTTP_BEARER_TOKEN", WRITE),
            ("VOX_MCP_HTTP_MAX_CONNECTIONS", "4"),
            ("VOX_MCP_HTTP_HEADER_TIMEOUT_MS", "700"),
        ],
    )
    .unwrap();
    // Four clients start a request and never finish its headers.
    let mut stuck = Vec::new();
    for _ in 0..4 {
        let mut c = tokio::net::TcpStream::connect(s.addr).await.unwrap();
        c.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            .await
            .unwrap();
        stuck.push(c);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    // A fifth is answered at once: busy, not left waiting.
    let (status, text) = raw_request(
        s.addr,
        "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(status, 503, "{text}");
    assert!(text.contains("\"busy\""), "{text}");
    // The stuck ones are closed once their headers are late.
    for c in &mut stuck {
        let (took, _) = until_closed(c, Duration::from_secs(5)).await;
        assert!(
            took < Duration::from_secs(3),
            "a half-open request held {took:?}"
        );
    }
    let r = http(s.addr, "GET", "/health", None, None).await;
    assert_eq!(r.status, 200, "after the reaping a new client is served");
}

/// CPU seconds (user + system) process `pid` has used.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

#[tokio::test]
async fn at_the_descriptor_limit_the_accept_loop_backs_off_instead_of_spinning() {
    let s = Server::start(
        Ws::new(),
        "knowledge",
        &[
            ("VOX_MCP_HTTP_BEARER_TOKEN", WRITE),
            ("VOX_MCP_HTTP_MAX_CONNECTIONS", "10000"),
            ("VOX_MCP_HTTP_HEADER_TIMEOUT_MS", "60000"),
        ],
    )
    .unwrap();
    let pid = s.child.id();
    // Lower the running server's descriptor limit to what it has open plus a few.
    let open = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count();
    let limit = format!("--nofile={}:{}", open + 8, open + 8);
    let out = std::process::Command::new("prlimit")
        .args(["--pid", &pid.to_string(), &limit])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // More clients than descriptors: the rest wait in the listen backlog.
    let mut conns = Vec::new();
    for _ in 0..40 {
        if let Ok(c) = tokio::net::TcpStream::connect(s.addr).await {
            conns.push(c);
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = cpu_seconds(pid);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let used = cpu_seconds(pid) - before;
    assert!(
        used < 0.5,
        "the server used {used} CPU seconds in 2 s at its descriptor limit"
    );
    // Once clients leave, it serves again.
    drop(conns);
    let mut served = false;
    for _ in 0..50 {
        let (status, _) = raw_request(
            s.addr,
            "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
        )
        .await;
        if status == 200 {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(served, "served again after the clients left");
}

#[tokio::test]
async fn guessed_tokens_are_limited_per_address_and_then_even_the_right_one_waits() {
    let s = Server::start(
        Ws::new(),
        "knowledge",
        &[
            ("VOX_MCP_HTTP_BEARER_TOKEN", WRITE),
            ("VOX_MCP_HTTP_AUTH_FAILURES_PER_MIN", "5"),
        ],
    )
    .unwrap();
    let mut statuses = Vec::new();
    for i in 0..8 {
        let guess = format!("guess-{i:0>20}");
        statuses.push(
            http(s.addr, "GET", "/v1/tools", Some(&guess), None)
                .await
                .status,
        );
    }
    assert_eq!(statuses, [401, 401, 401, 401, 401, 429, 429, 429]);
    let r = http(s.addr, "GET", "/v1/tools", Some(WRITE), None).await;
    assert_eq!(
        (r.status, r.body["error"]["code"].as_str()),
        (429, Some("rate_limited")),
        "a right guess is not told apart from a wrong one: {}",
        r.body
    );
    // Another address is not affected.
    let r = http_from("127.0.0.2", s.addr, "GET", "/health", &[], None).await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn websocket_messages_are_under_the_callers_rate_limit() {
    let s = Server::start(
        Ws::new(),
        "knowledge",
        &[
            ("VOX_MCP_HTTP_BEARER_TOKEN", WRITE),
            ("VOX_MCP_HTTP_RATE_PER_SEC", "1"),
            ("VOX_MCP_HTTP_RATE_BURST", "5"),
        ],
    )
    .unwrap();
    let mut socket = ws_connect(s.addr, WRITE).await;
    let mut limited = 0;
    for id in 0..30 {
        let m = json!({"id": id, "type": "list_tools"}).to_string();
        socket
            .send(tokio_tungstenite::tungstenite::Message::Text(m.into()))
            .await
            .unwrap();
        let reply = socket.next().await.unwrap().unwrap();
        let v: Value = serde_json::from_str(reply.to_text().unwrap()).unwrap();
        if v["error"]["code"] == "rate_limited" {
            limited += 1;
        }
    }
    assert!(
        limited >= 20,
        "{limited} of 30 messages in a burst were limited"
    );
}
