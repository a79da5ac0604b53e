//! End to end: what bounds the daemon's socket against clients that would exhaust it (issue
//! #32, finding 8): a client that sends and never reads, and the descriptor limit.

mod common;
use common::*;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// Resident memory of process `pid`, in MiB.
fn rss_mib(pid: u64) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kb / 1024.0
}

/// CPU seconds (user + system) process `pid` has used.
fn cpu_seconds(pid: u64) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    (fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap()) / 100.0
}

fn started(profile: &str) -> (Ws, u64) {
    let ws = Ws::new();
    let out = ws.vox(&["daemon", "start", "--profile", profile]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pid = daemon_pid(&ws);
    (ws, pid)
}

/// Whether a new MCP client is served (a `tools/list` within 10 s).
async fn serves_a_new_client(ws: &Ws, profile: &str) -> bool {
    tokio::time::timeout(Duration::from_secs(10), async {
        let c = ws.client(&["--profile", profile]).await;
        !tool_names(&c).await.is_empty()
    })
    .await
    .unwrap_or(false)
}

#[tokio::test]
async fn a_client_that_sends_and_never_reads_does_not_grow_the_daemon() {
    let (ws, pid) = started("dev");
    let mut conn = tokio::net::UnixStream::connect(ws.vox_dir().join("orchestrator.sock"))
        .await
        .unwrap();
    let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"greedy","version":"1"}}}"#;
    conn.write_all(
        format!(
            "{init}\n{}\n",
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let before = rss_mib(pid);
    // Each tools/list answer of dev is large; the client never reads one. Its writes block
    // once the daemon stops reading, so they run in the background with a deadline.
    let list: Vec<u8> = (1..=20_000)
        .flat_map(|i| {
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"tools/list\"}}\n").into_bytes()
        })
        .collect();
    let (_read, mut write) = conn.into_split();
    let sending = tokio::spawn(async move {
        let _ = tokio::time::timeout(Duration::from_secs(8), write.write_all(&list)).await;
        write
    });
    tokio::time::sleep(Duration::from_secs(4)).await;
    let grown = rss_mib(pid) - before;
    assert!(
        grown < 64.0,
        "the daemon grew {grown:.0} MiB for a client that never reads"
    );
    assert!(
        serves_a_new_client(&ws, "dev").await,
        "other clients are served meanwhile"
    );
    let _write = sending.await.unwrap();
}

#[tokio::test]
async fn at_the_descriptor_limit_the_socket_backs_off_instead_of_spinning() {
    let (ws, pid) = started("knowledge");
    let open = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count();
    let limit = format!("--nofile={}:", open + 4);
    let out = std::process::Command::new("prlimit")
        .args(["--pid", &pid.to_string(), &limit])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sock = ws.vox_dir().join("orchestrator.sock");
    let mut conns = Vec::new();
    for _ in 0..30 {
        if let Ok(c) = tokio::net::UnixStream::connect(&sock).await {
            conns.push(c);
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = cpu_seconds(pid);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let used = cpu_seconds(pid) - before;
    assert!(
        used < 0.5,
        "the daemon used {used} CPU seconds in 2 s at its descriptor limit"
    );
    let log = std::fs::read_to_string(ws.vox_dir().join("daemon.log")).unwrap_or_default();
    assert!(
        log.len() < 64 * 1024,
        "the daemon log grew to {} bytes",
        log.len()
    );
    drop(conns);
    let out = std::process::Command::new("prlimit")
        .args(["--pid", &pid.to_string(), "--nofile=4096:"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        serves_a_new_client(&ws, "knowledge").await,
        "served again after the clients left"
    );
}
