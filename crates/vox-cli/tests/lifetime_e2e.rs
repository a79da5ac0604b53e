//! End to end: refusals a client can show, and daemons that go away. Real `vox mcp`,
//! `vox-orchestrator-d` and `vox daemon`, the rmcp client, and the real Codex app-server.

mod common;
use common::*;
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

/// The pid of the workspace's daemon, from `vox daemon status --json`.
fn daemon_pid(ws: &Ws) -> Option<u64> {
    let out = ws.vox(&["daemon", "status", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).ok()?;
    v["ping"]["pid"].as_u64()
}

fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[tokio::test]
async fn initialize_answers_profile_mismatch_with_the_running_profile_and_the_remedy() {
    let ws = Ws::new();
    let held = ws.client(&["--profile", "knowledge"]).await;
    // 2025 era: the initialize request gets the JSON-RPC error.
    let t =
        rmcp::transport::TokioChildProcess::builder(ws.mcp_command(&["--profile", "repo-read"]))
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
    let (t, stderr) = t;
    let Err(refused) = rmcp::ServiceExt::serve((), t).await else {
        panic!("initialize should be refused");
    };
    let message = format!("{refused:?}");
    for needle in [
        "profile_mismatch",
        "`knowledge`",
        "repo-read",
        "knowledge,repo-read",
        "daemon.log",
    ] {
        assert!(message.contains(needle), "{needle} missing from {message}");
    }
    let mut logged = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut stderr.unwrap(), &mut logged)
        .await
        .unwrap();
    assert!(logged.contains("profile_mismatch"), "stderr: {logged}");
    // 2026-07-28 era: server/discover gets it.
    let t = rmcp::transport::TokioChildProcess::new(ws.mcp_command(&["--profile", "repo-read"]))
        .unwrap();
    let Err(refused) = rmcp::ClientServiceExt::serve_with_lifecycle(
        (),
        t,
        rmcp::ClientLifecycleMode::Discover {
            preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
        },
    )
    .await
    else {
        panic!("server/discover should be refused");
    };
    assert!(
        format!("{refused:?}").contains("profile_mismatch"),
        "{refused:?}"
    );
    held.cancel().await.unwrap();
}

#[tokio::test]
async fn codex_shows_the_refusal_of_the_second_profile() {
    let Some(codex_js) = codex_js() else {
        return;
    };
    let ws = Ws::new();
    git(ws.root(), &["init", "-q"]);
    let codex_home = tempfile::tempdir().unwrap();
    // The knowledge daemon runs first, so which server loses is certain.
    let held = ws.client(&["--profile", "knowledge"]).await;
    let server = |profile: &str| {
        format!(
            "[mcp_servers.vox-{profile}]\ncommand = {VOX:?}\nargs = [\"mcp\", \"--profile\", \"{profile}\", \"--workspace\", {:?}]\nenv = {{ VOX_HOME = {:?} }}\n",
            ws.root().display().to_string(),
            ws.home.path().display().to_string()
        )
    };
    std::fs::write(
        codex_home.path().join("config.toml"),
        server("knowledge") + &server("repo-read"),
    )
    .unwrap();
    let mut app = AppServer::start(&codex_js, codex_home.path(), ws.root(), &[]);
    app.request(
        "initialize",
        json!({"clientInfo": {"name": "vox-test", "version": "0"}}),
    );
    app.notify("initialized");
    let status = app.request("mcpServerStatus/list", json!({}));
    let servers = status["result"]["data"].as_array().expect("data").clone();
    let by_name = |n: &str| {
        servers
            .iter()
            .find(|s| s["name"] == n)
            .unwrap_or_else(|| panic!("{n} in {status}"))
            .clone()
    };
    let knowledge = by_name("vox-knowledge");
    assert_eq!(
        knowledge["tools"].as_object().map_or(0, |t| t.len()),
        registry_slice("knowledge").len(),
        "{knowledge}"
    );
    let repo = by_name("vox-repo-read");
    let error = repo["toolsError"].as_str().unwrap_or_default();
    assert!(
        error.contains("profile_mismatch") && error.contains("`knowledge`"),
        "Codex should show the refusal: {repo}"
    );
    drop(app);
    held.cancel().await.unwrap();
}

#[tokio::test]
async fn a_spawned_daemon_exits_after_its_last_client_and_says_when() {
    let ws = Ws::new().with_env("VOX_DAEMON_IDLE_SECS", "2");
    let c = ws.client(&["--profile", "knowledge"]).await;
    let status = ws.daemon_status();
    assert_eq!(status["ping"]["lifetime"]["kind"], "spawned", "{status}");
    assert_eq!(status["ping"]["lifetime"]["clients"], 1, "{status}");
    assert_eq!(status["ping"]["lifetime"]["idle_exit_secs"], 2);
    let text = String::from_utf8_lossy(&ws.vox(&["daemon", "status"]).stdout).into_owned();
    assert!(
        text.contains(
            "spawned by a client; 1 client(s) attached, exits 2 s after the last one leaves"
        ),
        "{text}"
    );
    assert!(text.contains("daemon.log"), "{text}");
    // A status probe attaches nothing: the client is still the only one, and it holds.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(ws.daemon_status()["ping"]["lifetime"]["clients"], 1);
    let pid = daemon_pid(&ws).unwrap();
    c.cancel().await.unwrap();
    let exits_in = ws.daemon_status()["ping"]["lifetime"]["exits_in_ms"].as_u64();
    assert!(exits_in.is_some_and(|ms| ms <= 2000), "{exits_in:?}");
    assert!(
        wait_until(Duration::from_secs(8), || !Path::new(&format!(
            "/proc/{pid}"
        ))
        .exists()),
        "the spawned daemon should exit about 2 s after its last client"
    );
    assert!(!ws.vox_dir().join("orchestrator.sock").exists());
    // The next client gets a fresh daemon with its own settings.
    let c = ws.client(&["--profile", "repo-read"]).await;
    assert_eq!(tool_names(&c).await, registry_slice("repo-read"));
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn a_daemon_started_on_purpose_stays() {
    let ws = Ws::new().with_env("VOX_DAEMON_IDLE_SECS", "1");
    let out = ws.vox(&["daemon", "start", "--profile", "knowledge", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ping: Value = serde_json::from_slice(&out.stdout).expect("daemon start --json is JSON");
    assert_eq!(ping["lifetime"]["kind"], "started");
    let c = ws.client(&["--profile", "knowledge"]).await;
    c.cancel().await.unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    let status = ws.daemon_status();
    assert_eq!(status["ping"]["pid"], ping["pid"], "still the same daemon");
    let text = String::from_utf8_lossy(&ws.vox(&["daemon", "status"]).stdout).into_owned();
    assert!(text.contains("stays until `vox daemon stop`"), "{text}");
}

#[tokio::test]
async fn daemon_start_keeps_a_daemon_a_client_spawned() {
    let ws = Ws::new().with_env("VOX_DAEMON_IDLE_SECS", "1");
    let c = ws.client(&["--profile", "knowledge"]).await;
    let out = ws.vox(&["daemon", "start", "--profile", "knowledge"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("stays until"));
    c.cancel().await.unwrap();
    std::thread::sleep(Duration::from_millis(2000));
    assert_eq!(ws.daemon_status()["ping"]["lifetime"]["kind"], "started");
}

#[tokio::test]
async fn a_client_with_another_profile_replaces_a_spawned_daemon_nobody_uses() {
    let ws = Ws::new();
    let c = ws.client(&["--profile", "knowledge"]).await;
    let first = daemon_pid(&ws).unwrap();
    c.cancel().await.unwrap();
    // Nobody is attached; the idle limit (300 s) has not passed: replaced, not refused.
    assert!(wait_until(
        Duration::from_secs(5),
        || ws.daemon_status()["ping"]["lifetime"]["clients"] == 0
    ));
    let c = ws.client(&["--profile", "repo-read"]).await;
    assert_eq!(tool_names(&c).await, registry_slice("repo-read"));
    let status = ws.daemon_status();
    assert_ne!(status["ping"]["pid"].as_u64(), Some(first));
    assert_eq!(status["ping"]["profile"], "repo-read");
    c.cancel().await.unwrap();
}

#[test]
fn status_json_without_a_daemon_is_json() {
    let ws = Ws::new();
    let out = ws.vox(&["daemon", "status", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["running"], false);
    assert!(v["log"].as_str().unwrap().ends_with(".vox/daemon.log"));
}

#[test]
fn a_bad_idle_limit_is_refused_with_the_variable_named() {
    let ws = Ws::new();
    let out = std::process::Command::new(DAEMON)
        .args(["--exit-when-idle", "--workspace"])
        .arg(ws.root())
        .env("VOX_HOME", ws.home.path())
        .env("VOX_DAEMON_IDLE_SECS", "5m")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("VOX_DAEMON_IDLE_SECS") && stderr.contains("5m"),
        "{stderr}"
    );
}

#[test]
fn a_daemon_log_past_its_limit_is_rotated_and_the_daemon_logs_to_a_fresh_one() {
    let ws = Ws::new()
        .with_env("VOX_LOG_MAX_BYTES", "65536")
        .with_env("VOX_LOG", "info");
    let log = ws.root().join(".vox/daemon.log");
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    std::fs::write(&log, "old line\n".repeat(8_000)).unwrap();
    let out = ws.vox(&["daemon", "start", "--profile", "knowledge"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(ws.vox(&["daemon", "stop"]).status.success());
    let rotated = std::fs::read_to_string(ws.root().join(".vox/daemon.log.1")).unwrap();
    assert!(rotated.starts_with("old line") && rotated.len() == 72_000);
    let fresh = std::fs::read_to_string(&log).unwrap();
    assert!(
        !fresh.contains("old line") && fresh.contains("daemon listening"),
        "{fresh}"
    );
}

fn environment_check(doctor: &Value) -> Value {
    doctor["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "environment")
        .unwrap()
        .clone()
}

#[test]
fn a_bad_value_of_any_vox_variable_stops_vox_naming_it_and_doctor_fails_on_it() {
    let ws = Ws::new();
    for (var, value) in [
        ("VOX_TOOL_TIMEOUT_MS", "abc"),
        ("VOX_APPROVAL_TIMEOUT_SECS", "x"),
        ("VOX_LOG", "garbage[[["),
        ("VOX_WORKSPACE_WATCH", "maybe"),
        ("VOX_LOG_FORMAT", "xml"),
    ] {
        let ws = Ws::new().with_env(var, value);
        let out = ws.vox(&["daemon", "start", "--profile", "knowledge"]);
        assert_eq!(out.status.code(), Some(2), "{var}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(var) && stderr.contains(value), "{stderr}");
        let doctor = ws.vox(&["doctor", "--json"]);
        assert_eq!(doctor.status.code(), Some(1), "{var}");
        let v: Value = serde_json::from_slice(&doctor.stdout).unwrap();
        assert_eq!(environment_check(&v)["status"], "fail", "{v}");
    }
    // A name vox does not read is a warning naming the nearest one.
    let ws = ws.with_env("VOX_PROFLE", "knowledge");
    let v: Value = serde_json::from_slice(&ws.vox(&["doctor", "--json"]).stdout).unwrap();
    let env = environment_check(&v);
    assert_eq!(env["status"], "warn", "{env}");
    assert!(
        env["message"].as_str().unwrap().contains("VOX_PROFILE"),
        "{env}"
    );
}

#[test]
fn vox_log_format_json_writes_one_json_object_per_line() {
    let ws = Ws::new()
        .with_env("VOX_LOG_FORMAT", "json")
        .with_env("VOX_LOG", "info");
    assert!(
        ws.vox(&["daemon", "start", "--profile", "knowledge"])
            .status
            .success()
    );
    assert!(ws.vox(&["daemon", "stop"]).status.success());
    let log = std::fs::read_to_string(ws.root().join(".vox/daemon.log")).unwrap();
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(
        lines.iter().any(|l| l["level"] == "INFO"
            && l["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("daemon listening"))
            && l["profile"] == "knowledge"),
        "{log}"
    );
}
