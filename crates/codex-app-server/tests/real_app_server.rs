//! The client against the real Codex app-server (no model needed): the handshake, error
//! replies, and that no process (the app-server's MCP server child included) outlives
//! `shutdown` or `Drop`.
//!
//! Needs `CODEX_MMO_CODEX_JS=<dir>/node_modules/@openai/codex/bin/codex.js`
//! (`npm install --prefix <dir> @openai/codex@0.169.0`). Unset, the tests fail under CI (`CI`
//! set) and otherwise print a notice and check nothing.

use codex_app_server::{
    AppServer, ApprovalPolicy, CODEX_JS_VAR, CodexCommand, Error, InitializeParams, SandboxMode,
    SpawnOptions, ThreadStartParams, tree,
};
use serde_json::json;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

fn codex() -> Option<CodexCommand> {
    let Some(js) = std::env::var_os(CODEX_JS_VAR).filter(|v| !v.is_empty()) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "{CODEX_JS_VAR} is unset under CI: install @openai/codex@0.169.0 and export it"
        );
        let _ = writeln!(
            std::io::stderr().lock(),
            "NOTICE: codex-app-server real_app_server did not run: set {CODEX_JS_VAR} to \
             <dir>/node_modules/@openai/codex/bin/codex.js"
        );
        return None;
    };
    assert!(
        Path::new(&js).is_file(),
        "{CODEX_JS_VAR}={} is not a file",
        js.to_string_lossy()
    );
    Some(codex_app_server::find_codex().expect("the variable names a file"))
}

/// A stdio MCP server that answers the handshake and lists one tool, then idles.
const TINY_MCP: &str = r#"
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    if m["method"] == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
             "serverInfo": {"name": "tiny", "version": "0"}}
    elif m["method"] == "tools/list":
        r = {"tools": [{"name": "noop", "inputSchema": {"type": "object"}}]}
    else:
        r = {"content": [{"type": "text", "text": "ok"}]}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}) + "\n")
    sys.stdout.flush()
"#;

fn options(cmd: CodexCommand, dir: &Path) -> SpawnOptions {
    let home = dir.join("home");
    let work = dir.join("work");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    let mcp = dir.join("tiny_mcp.py");
    std::fs::write(&mcp, TINY_MCP).unwrap();
    SpawnOptions::new(cmd, home)
        .cwd(work)
        .config("approval_policy=\"never\"")
        .config("sandbox_mode=\"read-only\"")
        .config(format!(
            "mcp_servers.tiny={{command=\"python3\", args=[{:?}]}}",
            mcp.display().to_string()
        ))
        .stderr_log(dir.join("stderr.log"))
        .request_timeout(Duration::from_secs(60))
}

/// Starts a thread, waits until the MCP server is up, and returns its pid.
async fn start_with_mcp(server: &AppServer, dir: &Path) -> i32 {
    let mut events = server.events().unwrap();
    let init = server
        .initialize(&InitializeParams::new("codex-app-server-test", "0"))
        .await
        .unwrap();
    assert_eq!(
        Path::new(init["codexHome"].as_str().unwrap()),
        dir.join("home").canonicalize().unwrap()
    );
    let thread = server
        .thread_start(&ThreadStartParams {
            cwd: Some(dir.join("work").display().to_string()),
            approval_policy: Some(ApprovalPolicy::Never),
            sandbox: Some(SandboxMode::ReadOnly),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(!thread.is_empty());
    events
        .wait_for(Duration::from_secs(60), |e| {
            e.notification("mcpServer/startupStatus/updated")
                .is_some_and(|p| p["name"] == "tiny" && p["status"] == "ready")
        })
        .await
        .unwrap();
    let pgid = server.pid() as i32;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mcp = all_pids().into_iter().find(|&p| {
            // The Codex processes' own command lines name the script too (in `-c`).
            let c = cmdline(p);
            c.contains("tiny_mcp.py") && !c.contains("app-server") && descends_from(p, pgid)
        });
        if let Some(p) = mcp {
            return p;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no MCP server child found"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn all_pids() -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse().ok())
        .collect()
}

fn cmdline(pid: i32) -> String {
    String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default())
        .replace('\0', " ")
}

fn stat_field(pid: i32, n: usize) -> Option<i32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 1..];
    rest.split_whitespace().nth(n)?.parse().ok()
}

fn descends_from(mut pid: i32, root: i32) -> bool {
    for _ in 0..64 {
        match stat_field(pid, 1) {
            Some(pp) if pp == root => return true,
            Some(pp) if pp > 1 => pid = pp,
            _ => return false,
        }
    }
    false
}

async fn gone(pgid: i32, mcp: i32) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !tree::group_members(pgid).is_empty() || tree::is_alive(mcp) {
        assert!(
            std::time::Instant::now() < deadline,
            "left behind: group {pgid} has {:?}, MCP server {mcp} alive: {}",
            tree::group_members(pgid),
            tree::is_alive(mcp)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_leaves_no_process_behind_not_even_the_mcp_server() {
    let Some(cmd) = codex() else { return };
    let dir = tempfile::tempdir().unwrap();
    let server = AppServer::spawn(options(cmd, dir.path())).unwrap();
    let pgid = server.pid() as i32;
    let mcp = start_with_mcp(&server, dir.path()).await;
    assert_ne!(
        stat_field(mcp, 2),
        Some(pgid),
        "Codex puts its MCP servers in groups of their own (so killing the group is not enough)"
    );
    assert!(tree::is_alive(mcp));
    drop(server);
    gone(pgid, mcp).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_the_process_and_errors_come_back_as_rpc_errors() {
    let Some(cmd) = codex() else { return };
    let dir = tempfile::tempdir().unwrap();
    let server = AppServer::spawn(options(cmd, dir.path())).unwrap();
    let pgid = server.pid() as i32;
    let mcp = start_with_mcp(&server, dir.path()).await;

    match server.request("no/such/method", json!({})).await {
        Err(Error::Rpc { code, message, .. }) => {
            assert!(code < 0, "{code} {message}");
        }
        other => panic!("expected an RPC error, got {other:?}"),
    }
    match server.request("thread/start", json!({"cwd": 5})).await {
        Err(Error::Rpc { message, .. }) => assert!(!message.is_empty()),
        other => panic!("expected an RPC error, got {other:?}"),
    }

    let status = server.shutdown().await;
    assert!(status.is_some(), "the exit status is read");
    gone(pgid, mcp).await;
    assert!(matches!(
        server.request("thread/list", json!({})).await,
        Err(Error::Closed)
    ));
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_that_exits_ends_the_event_stream_with_exited() {
    // A stand-in "app-server" that prints garbage, an oversized line, a notification, exits.
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("fake.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\necho 'not json'\nhead -c 3000 /dev/zero | tr '\\0' x; echo\n\
         echo '{\"method\":\"hello\",\"params\":{\"a\":1}}'\nexit 3\n",
    )
    .unwrap();
    let opts = SpawnOptions::new(
        CodexCommand {
            program: "sh".into(),
            args: vec![script.into_os_string()],
        },
        dir.path(),
    )
    .max_line_bytes(1000);
    let server = AppServer::spawn(opts).unwrap();
    let mut events = server.events().unwrap();
    let mut seen = vec![];
    while let Some(e) = events.recv().await {
        seen.push(e);
    }
    assert!(
        matches!(&seen[0], codex_app_server::Event::Malformed { error } if error.contains("not JSON")),
        "{seen:?}"
    );
    assert!(
        matches!(&seen[1], codex_app_server::Event::Malformed { error } if error.contains("3000 bytes")),
        "{seen:?}"
    );
    assert_eq!(seen[2].notification("hello"), Some(&json!({"a": 1})));
    match &seen[3] {
        codex_app_server::Event::Exited { status: Some(s) } => assert_eq!(s.code(), Some(3)),
        other => panic!("{other:?}"),
    }
    assert_eq!(seen.len(), 4);
}
