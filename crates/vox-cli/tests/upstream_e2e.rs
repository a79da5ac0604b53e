//! End to end: an upstream MCP server (the npm reference `server-everything`) declared in
//! `.vox/servers.toml`, started by the real daemon, called through `vox mcp` with the rmcp
//! client; `vox upstream status` / `approve`; and no server process left behind after
//! `vox daemon stop` or a `kill -9` of the daemon (checked by process tree).

mod common;
use common::*;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn everything() -> Option<PathBuf> {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/upstream/node_modules/.bin/mcp-server-everything");
    if bin.exists() {
        return Some(bin.canonicalize().unwrap());
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{} is missing: npm ci --prefix tests/upstream",
        bin.display()
    );
    eprintln!("skipped: {} is missing", bin.display());
    None
}

fn workspace(bin: &std::path::Path) -> Ws {
    let ws = Ws::new();
    std::fs::create_dir_all(ws.vox_dir()).unwrap();
    std::fs::write(
        ws.vox_dir().join("servers.toml"),
        format!(
            "[servers.every]\ncommand = {bin:?}\nargs = [\"stdio\"]\n[servers.every.tools.echo]\nexposure = \"public\"\nside_effect = \"read_only\"\n"
        ),
    )
    .unwrap();
    ws
}

/// `(pid, ppid)` of every process.
fn processes() -> Vec<(u32, u32)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let rest = &stat[stat.rfind(')')? + 1..];
            let ppid = rest.split_whitespace().nth(1)?.parse().ok()?;
            Some((pid, ppid))
        })
        .collect()
}

/// Every live descendant of `root`.
fn descendants(root: u32) -> Vec<u32> {
    let all = processes();
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        found.extend(all.iter().filter(|&&(_, pp)| pp == p).map(|&(c, _)| c));
        i += 1;
    }
    found.remove(0);
    found
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

async fn wait_for_tool(c: &Client, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if tool_names(c).await.iter().any(|n| n == name) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{name} never listed: {:?}", tool_names(c).await);
}

fn gone_within(pids: &[u32], limit: Duration) -> Vec<u32> {
    let deadline = Instant::now() + limit;
    loop {
        let left: Vec<u32> = pids.iter().copied().filter(|&p| alive(p)).collect();
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_calls_an_upstream_tool_through_vox_and_a_killed_daemon_leaves_no_server() {
    let Some(bin) = everything() else { return };
    let ws = workspace(&bin);
    let c = ws.client(&[]).await;
    wait_for_tool(&c, "every__echo").await;
    let tools = tools(&c).await;
    let echo = tools.iter().find(|t| t.name == "every__echo").unwrap();
    let meta = serde_json::to_value(&echo.meta).unwrap();
    assert_eq!(meta["vox_source"], "upstream", "{meta}");
    assert_eq!(meta["vox_server"], "every");
    let r = call(&c, "every__echo", json!({"message": "through vox"})).await;
    assert!(
        serde_json::to_string(&r)
            .unwrap()
            .contains("Echo: through vox")
    );

    let out = ws.vox(&["upstream", "status", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["servers"][0]["status"], "ready", "{status}");

    // The audit trail has the call: who, the decision, the code.
    let out = ws.vox(&["audit", "--json", "--tool", "every__*"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let echo = lines
        .iter()
        .find(|r| r["tool"] == "every__echo")
        .expect("every__echo audited");
    assert_eq!(
        (echo["decision"].as_str(), echo["code"].as_str()),
        (Some("allowed"), Some("ok"))
    );
    assert_eq!(
        (echo["source"].as_str(), echo["server"].as_str()),
        (Some("upstream"), Some("every"))
    );

    let daemon = daemon_pid(&ws) as u32;
    let servers = descendants(daemon);
    assert!(!servers.is_empty(), "the daemon runs the server");
    // SAFETY: kill(2) of the daemon this test's client spawned.
    unsafe { libc::kill(daemon as i32, libc::SIGKILL) };
    let left = gone_within(&servers, Duration::from_secs(10));
    assert!(
        left.is_empty(),
        "orphans after kill -9 of the daemon: {left:?}"
    );
    drop(c);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_stop_ends_every_server_and_status_and_approve_work_without_a_daemon() {
    let Some(bin) = everything() else { return };
    let ws = workspace(&bin);
    let out = ws.vox(&["daemon", "start"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let daemon = daemon_pid(&ws) as u32;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = ws.vox(&["upstream", "status"]);
        if out.status.success() {
            let text = String::from_utf8_lossy(&out.stdout).to_string();
            assert!(text.contains("every") && text.contains("ready"), "{text}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let servers = descendants(daemon);
    assert!(!servers.is_empty());
    let status = ws.daemon_status();
    assert_eq!(status["upstream"][0]["status"], "ready", "{status}");
    ws.stop_daemon();
    let left = gone_within(&servers, Duration::from_secs(5));
    assert!(left.is_empty(), "left after vox daemon stop: {left:?}");

    // No daemon: the declared servers and their pins, from the store.
    let out = ws.vox(&["upstream", "status", "--json"]);
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["servers"][0]["status"], "stopped", "{status}");
    assert!(
        status["servers"][0]["tools"].as_array().unwrap().len() >= 10,
        "{status}"
    );
    let out = ws.vox(&["upstream", "approve", "every", "echo"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("every__echo  approved"));
    let out = ws.vox(&["upstream", "approve", "nope"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_profile_serves_exactly_its_catalog_and_upstream_tools() {
    let Some(bin) = everything() else { return };
    let ws = workspace(&bin);
    let profiles = ws.vox_dir().join("profiles");
    std::fs::create_dir_all(&profiles).unwrap();
    std::fs::write(
        profiles.join("team.v1.yaml"),
        "id: team\ndescription: memories and the reference server's echo\ntools:\n  include: [vox_memory_recall, every__echo, every__get-env]\nrequires: [memory]\nmax_exposure: public\n",
    )
    .unwrap();
    let c = ws.client(&["--profile", "team"]).await;
    wait_for_tool(&c, "every__echo").await;
    let mut names = tool_names(&c).await;
    names.sort();
    // every__get-env is in the manifest but operator (unclassified): above max_exposure public.
    assert_eq!(names, ["every__echo", "vox_memory_recall"]);
    let r = call(&c, "every__echo", json!({"message": "team"})).await;
    assert!(serde_json::to_string(&r).unwrap().contains("Echo: team"));
    let denied = err(&c, "every__get-sum", json!({"a": 1, "b": 2})).await;
    assert_eq!(denied["code"], "tool_not_in_profile", "{denied}");
    let denied = err(&c, "vox_memory_store", json!({"key": "k", "value": "v"})).await;
    assert_eq!(denied["code"], "tool_not_in_profile", "{denied}");
    drop(c);
    ws.stop_daemon();

    // A manifest naming a server nobody declared: the start is refused, naming file and entry.
    std::fs::write(
        profiles.join("broken.v1.yaml"),
        "id: broken\ndescription: d\ntools:\n  include: [docs__*]\nrequires: []\nmax_exposure: public\n",
    )
    .unwrap();
    let out = ws.vox(&["daemon", "start", "--profile", "team"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("broken.v1.yaml")
            && stderr.contains("docs__*")
            && stderr.contains("no upstream server `docs`"),
        "{stderr}"
    );
}

#[test]
fn codex_lists_and_calls_an_upstream_tool_through_vox() {
    let Some(codex_js) = codex_js() else { return };
    let Some(bin) = everything() else { return };
    let ws = workspace(&bin);
    git(ws.root(), &["init", "-q"]);
    // The daemon first, so the upstream server is up when Codex lists vox's tools.
    let out = ws.vox(&["daemon", "start"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ws.vox(&["upstream", "status"]).status.success() {
        assert!(
            Instant::now() < deadline,
            "the upstream server did not start"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let model = Model::start(
        ws.home.path(),
        &json!({"actors": [{"name": "user", "match": "echo something", "steps": [
            {"call": {"name": "mcp__vox__every__echo", "arguments": {"message": "from codex"}}},
            {"say": "done"}
        ]}]}),
    );
    let codex_home = ws.home.path().join("codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    std::fs::write(
        codex_home.join("config.toml"),
        format!(
            "model = \"scripted\"\nmodel_provider = \"local\"\n\n[model_providers.local]\nname = \"local\"\nbase_url = \"http://127.0.0.1:{}/v1\"\nwire_api = \"responses\"\n\n[mcp_servers.vox]\ncommand = {:?}\nargs = [\"mcp\"]\nstartup_timeout_sec = 30\ndefault_tools_approval_mode = \"approve\"\n[mcp_servers.vox.env]\nVOX_HOME = {:?}\nVOX_WORKSPACE = {:?}\n",
            model.port,
            VOX,
            ws.home.path().display().to_string(),
            ws.root().display().to_string(),
        ),
    )
    .unwrap();
    let mut app = AppServer::start(&codex_js, &codex_home, ws.root(), &[]);
    let server = app.mcp_server("vox");
    assert!(server["tools"].get("every__echo").is_some(), "{server}");

    let thread = app.request(
        "thread/start",
        json!({"cwd": ws.root(), "approvalPolicy": "never", "sandbox": "read-only"}),
    );
    let thread_id = thread["result"]["thread"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{thread}"))
        .to_owned();
    app.request(
        "turn/start",
        json!({"threadId": thread_id, "input": [{"type": "text", "text": "echo something"}]}),
    );
    // The model's next request carries the tool's output: the call went through vox.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let log = std::fs::read_to_string(&model.log).unwrap_or_default();
        if log.contains("Echo: from codex") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no tool output reached the model: {log}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = ws.vox(&["audit", "--json", "--tool", "every__echo"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("\"code\":\"ok\""),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_the_websocket_each_token_reaches_exactly_its_upstream_tools() {
    use common::gateway::{READ, Server, WRITE, names, ws_ask, ws_connect};
    let Some(bin) = everything() else { return };
    let ws = workspace(&bin);
    std::fs::write(
        ws.vox_dir().join("servers.toml"),
        format!(
            "[servers.every]\ncommand = {bin:?}\nargs = [\"stdio\"]\n[servers.every.tools.echo]\nexposure = \"public\"\nside_effect = \"read_only\"\nread_role = true\n[servers.every.tools.get-sum]\nexposure = \"public\"\nside_effect = \"network\"\n"
        ),
    )
    .unwrap();
    let profiles = ws.vox_dir().join("profiles");
    std::fs::create_dir_all(&profiles).unwrap();
    std::fs::write(
        profiles.join("team.v1.yaml"),
        "id: team\ndescription: three tools of the reference server\ntools:\n  include: [every__echo, every__get-sum, every__get-env]\nrequires: []\nmax_exposure: operator\n",
    )
    .unwrap();
    let s = Server::tokens(ws, "team");
    for (token, expected) in [
        (
            WRITE,
            vec!["every__echo", "every__get-env", "every__get-sum"],
        ),
        (READ, vec!["every__echo"]),
    ] {
        let mut socket = ws_connect(s.addr, token).await;
        let mut ask = async |v: Value| -> Value { ws_ask(&mut socket, v).await };
        let deadline = Instant::now() + Duration::from_secs(20);
        let listed = loop {
            let l = names(&ask(json!({"id": 1, "type": "list_tools"})).await);
            if l.len() == expected.len() || Instant::now() > deadline {
                break l;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(listed, expected, "{token}");
        for (i, tool) in ["every__echo", "every__get-sum", "every__get-env"]
            .into_iter()
            .enumerate()
        {
            let r = ask(json!({"id": 10 + i, "type": "call_tool", "name": tool,
                               "args": {"message": "x", "a": 1, "b": 2}}))
            .await;
            let ran = r["is_error"] == false;
            assert_eq!(ran, expected.contains(&tool), "{token} {tool}: {r}");
        }
    }
}
