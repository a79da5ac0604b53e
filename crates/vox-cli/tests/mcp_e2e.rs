//! End to end: the real `vox mcp` and `vox-orchestrator-d` binaries driven by the rmcp client.

mod common;
use common::*;
use serde_json::json;
use std::collections::BTreeSet;

#[tokio::test]
async fn knowledge_profile_lists_exactly_its_slice_with_meta_and_schemas() {
    let ws = Ws::new();
    let c = ws.client(&["--profile", "knowledge"]).await;
    let listed = tools(&c).await;
    let names: Vec<String> = listed.iter().map(|t| t.name.to_string()).collect();
    assert_eq!(names, registry_slice("knowledge"));
    assert!(names.contains(&"vox_memory_recall".to_owned()));
    assert!(
        !names
            .iter()
            .any(|n| n.starts_with("vox_repo_") || n.starts_with("vox_attention"))
    );
    for t in &listed {
        let meta = t.meta.as_ref().expect("_meta");
        assert!(
            meta.get("vox_exposure").is_some()
                && meta.get("vox_side_effect_class").is_some()
                && meta.get("vox_requires").is_some(),
            "{}",
            t.name
        );
        assert_eq!(
            t.input_schema.get("type").and_then(|v| v.as_str()),
            Some("object"),
            "{}",
            t.name
        );
        let ann = t.annotations.as_ref().expect("annotations");
        let read_only = meta["vox_side_effect_class"] == "read_only";
        assert_eq!(ann.read_only_hint, Some(read_only), "{}", t.name);
    }
    let store = listed
        .iter()
        .find(|t| t.name == "vox_memory_store")
        .unwrap();
    let required = store
        .input_schema
        .get("required")
        .cloned()
        .unwrap_or_default();
    assert_eq!(required, json!(["key", "value"]));
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn modern_era_discover_serves_the_same_slice() {
    let ws = Ws::new();
    let c = ws.modern_client(&["--profile", "repo-read"]).await;
    assert_eq!(tool_names(&c).await, registry_slice("repo-read"));
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn composed_profile_is_canonical_and_the_union() {
    let ws = Ws::new();
    let c = ws.client(&["--profile", "repo-read,attention"]).await;
    let names: BTreeSet<String> = tool_names(&c).await.into_iter().collect();
    let expected: BTreeSet<String> = registry_slice("attention")
        .into_iter()
        .chain(registry_slice("repo-read"))
        .collect();
    assert_eq!(names, expected);
    assert_eq!(ws.daemon_status()["ping"]["profile"], "attention,repo-read");
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn tool_outside_the_profile_is_denied_with_the_one_shape() {
    let ws = Ws::new();
    let c = ws.client(&["--profile", "knowledge"]).await;
    let e = err(&c, "vox_repo_log", json!({})).await;
    assert_eq!(e["code"], "tool_not_in_profile");
    assert!(e["message"].as_str().unwrap().contains("vox_repo_log"));
    // A non-registry name under a named profile is also tool_not_in_profile.
    assert_eq!(
        err(&c, "my_workspace_tool", json!({})).await["code"],
        "tool_not_in_profile"
    );
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn unknown_tool_under_dev_is_a_protocol_error() {
    let ws = Ws::new();
    let c = ws.client(&[]).await;
    let r = c
        .call_tool(rmcp::model::CallToolRequestParams::new("vox_no_such_tool"))
        .await;
    assert!(r.is_err(), "{r:?}");
    // Internal tools are served to loopback callers under dev.
    assert_eq!(ok(&c, "vox_boot_report", json!({})).await["profile"], "dev");
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn wrong_argument_types_name_the_argument() {
    let ws = Ws::new();
    let c = ws.client(&["--profile", "knowledge"]).await;
    let e = err(&c, "vox_memory_store", json!({"key": 5, "value": "v"})).await;
    assert_eq!(e["code"], "invalid_arguments");
    assert!(e["message"].as_str().unwrap().contains("key"), "{e}");
    let e = err(
        &c,
        "vox_memory_store",
        json!({"key": "k", "value": "v", "colour": "red"}),
    )
    .await;
    assert!(e["message"].as_str().unwrap().contains("colour"), "{e}");
    let e = err(&c, "vox_memory_recall", json!({})).await;
    assert!(e["message"].as_str().unwrap().contains("key"), "{e}");
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn memories_and_sessions_survive_a_daemon_restart() {
    let ws = Ws::new();
    let c = ws.client(&["--profile", "knowledge"]).await;
    ok(
        &c,
        "vox_memory_store",
        json!({"key": "deploy/target", "value": "staging cluster", "tags": ["ops"]}),
    )
    .await;
    let s = ok(&c, "vox_session_create", json!({"title": "release"})).await;
    let id = s["session"]["id"].as_str().unwrap().to_owned();
    ok(
        &c,
        "vox_session_append",
        json!({"id": id, "role": "user", "content": "ship it"}),
    )
    .await;
    c.cancel().await.unwrap();
    let pid_before = ws.daemon_status()["ping"]["pid"].clone();
    ws.stop_daemon();

    let c = ws.client(&["--profile", "knowledge"]).await;
    assert_ne!(
        ws.daemon_status()["ping"]["pid"],
        pid_before,
        "a new daemon was spawned"
    );
    let r = ok(&c, "vox_memory_recall", json!({"key": "deploy/target"})).await;
    assert_eq!(r["found"], true);
    assert_eq!(r["memory"]["value"], "staging cluster");
    let g = ok(&c, "vox_session_get", json!({"id": id})).await;
    assert_eq!(g["messages"][0]["content"], "ship it");
    let found = ok(&c, "vox_memory_search", json!({"query": "staging"})).await;
    assert_eq!(found["results"][0]["key"], "deploy/target");
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn concurrent_clients_adopt_one_daemon() {
    let ws = Ws::new();
    let (a, b, c) = tokio::join!(
        ws.client(&["--profile", "knowledge"]),
        ws.client(&["--profile", "knowledge"]),
        ws.client(&["--profile", "knowledge"])
    );
    for client in [&a, &b, &c] {
        assert_eq!(tool_names(client).await, registry_slice("knowledge"));
    }
    let log = std::fs::read_to_string(ws.vox_dir().join("daemon.log")).unwrap_or_default();
    assert!(!log.contains("already runs"), "{log}");
    // Every client talks to the same daemon: a memory written by one is read by another.
    ok(
        &a,
        "vox_memory_store",
        json!({"key": "k", "value": "from a"}),
    )
    .await;
    assert_eq!(
        ok(&c, "vox_memory_recall", json!({"key": "k"})).await["memory"]["value"],
        "from a"
    );
    for client in [a, b, c] {
        client.cancel().await.unwrap();
    }
}

#[tokio::test]
async fn a_client_with_another_profile_gets_profile_mismatch() {
    let ws = Ws::new();
    let c = ws.client(&["--profile", "knowledge"]).await;
    let out = ws
        .mcp_command(&["--profile", "attention"])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("profile_mismatch") && stderr.contains("knowledge"),
        "{stderr}"
    );
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn unknown_profile_exits_non_zero_with_profile_unknown() {
    let ws = Ws::new();
    let out = ws.vox(&["mcp", "--profile", "knowledge,nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("profile_unknown"));
    let out = std::process::Command::new(DAEMON)
        .args(["--profile", "nope", "--workspace"])
        .arg(ws.root())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("profile_unknown"));
}

#[tokio::test]
async fn named_profile_degrades_when_the_store_fails() {
    let ws = Ws::new();
    std::fs::write(ws.root().join("not-a-dir"), "x").unwrap();
    let bad = ws.root().join("not-a-dir/journey.db");
    let ws = ws.with_env("VOX_DB_PATH", bad.to_str().unwrap());
    let c = ws.client(&["--profile", "knowledge"]).await;
    let names = tool_names(&c).await;
    assert_eq!(
        names,
        ["vox_search_structural", "vox_search_text"],
        "only tools whose subsystems are up"
    );
    let e = err(&c, "vox_memory_recall", json!({"key": "k"})).await;
    assert_eq!(e["code"], "subsystem_not_booted");
    assert_eq!(e["subsystem"], "memory");
    let report = &ws.daemon_status()["boot_report"];
    assert_eq!(report["failed"]["memory"], "dependency db failed");
    assert_eq!(report["failed"]["sessions"], "dependency db failed");
    assert!(
        report["failed"]["db"]
            .as_str()
            .unwrap()
            .contains("not-a-dir")
    );
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn dev_keeps_sessions_on_files_when_the_store_fails() {
    let ws = Ws::new();
    std::fs::write(ws.root().join("blocker"), "x").unwrap();
    let bad = ws.root().join("blocker/journey.db");
    let ws = ws.with_env("VOX_DB_PATH", bad.to_str().unwrap());
    let c = ws.client(&[]).await;
    let names = tool_names(&c).await;
    assert!(names.contains(&"vox_session_create".to_owned()));
    assert!(!names.contains(&"vox_memory_store".to_owned()));
    let s = ok(&c, "vox_session_create", json!({"title": "offline"})).await;
    let id = s["session"]["id"].as_str().unwrap();
    assert!(
        ws.vox_dir()
            .join("sessions")
            .join(format!("{id}.json"))
            .exists()
    );
    assert_eq!(
        ok(&c, "vox_session_list", json!({})).await["backend"],
        "files"
    );
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn daemon_exits_non_zero_when_every_required_subsystem_fails() {
    let ws = Ws::new();
    std::fs::write(ws.root().join("blocker"), "x").unwrap();
    let out = std::process::Command::new(DAEMON)
        .args(["--profile", "research", "--workspace"])
        .arg(ws.root())
        .env("VOX_DB_PATH", ws.root().join("blocker/journey.db"))
        .env("VOX_HOME", ws.home.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("research") && stderr.contains("dependency db failed"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_journey_store_truncated_to_zero_bytes_stops_the_daemon_and_is_left_alone() {
    let ws = Ws::new();
    let c = ws.client(&["--profile", "knowledge"]).await;
    for i in 0..50 {
        ok(
            &c,
            "vox_memory_store",
            json!({"key": format!("k/{i}"), "value": "v"}),
        )
        .await;
    }
    c.cancel().await.unwrap();
    let pid = ws.daemon_status()["ping"]["pid"].as_u64().unwrap();
    ws.stop_daemon();
    // The stopped daemon releases its lock before its last store connection closes (and
    // checkpoints): wait until the process is gone.
    let started = std::time::Instant::now();
    let alive = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|st| {
            st.rsplit(')')
                .next()
                .is_some_and(|r| !r.trim_start().starts_with('Z'))
        })
    };
    while alive() {
        assert!(started.elapsed().as_secs() < 15, "daemon {pid} still runs");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let db = ws.vox_dir().join("journey.db");
    assert!(std::fs::metadata(&db).unwrap().len() > 0);
    std::fs::File::create(&db).unwrap(); // truncates to 0 bytes
    // The daemon runs in the foreground: one that started is killed and reported.
    let mut daemon = std::process::Command::new(DAEMON)
        .args(["--profile", "knowledge", "--workspace"])
        .arg(ws.root())
        .env("VOX_HOME", ws.home.path())
        .env_remove("VOX_DB_PATH")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while daemon.try_wait().unwrap().is_none() && started.elapsed().as_secs() < 20 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let running = daemon.try_wait().unwrap().is_none();
    if running {
        daemon.kill().unwrap();
    }
    let out = daemon.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !running && !out.status.success(),
        "the daemon started: {stderr}"
    );
    assert!(stderr.contains(&db.display().to_string()), "{stderr}");
    let out = ws.vox(&["daemon", "start", "--profile", "knowledge"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "vox daemon start started: {stderr}");
    assert!(stderr.contains(&db.display().to_string()), "{stderr}");
    assert_eq!(std::fs::metadata(&db).unwrap().len(), 0, "not overwritten");
    assert!(
        !ws.vox_dir().join("orchestrator.sock").exists(),
        "no daemon runs"
    );
}

/// `vox mcp` echoes request ids as rmcp decodes them: any string, and any integer within i64,
/// exactly. (rmcp 3.11 holds a numeric id as an i64: a larger one is answered with an id-less
/// "Invalid request", and `1.0` / `1e3` come back as `1` / `1000`; the daemon socket, which is
/// ours, echoes every id byte for byte: `the_daemon_socket_echoes_request_ids_byte_for_byte`.)
#[tokio::test]
async fn vox_mcp_echoes_string_and_i64_request_ids_exactly() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let ws = Ws::new();
    let mut child = ws
        .mcp_command(&["--profile", "knowledge"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = tokio::io::BufReader::new(child.stdout.take().unwrap());
    let mut answer = String::new();
    let mut ask = async |line: &str| {
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        answer.clear();
        if !line.contains(r#""id""#) {
            return String::new();
        }
        tokio::time::timeout(
            std::time::Duration::from_secs(15),
            out.read_line(&mut answer),
        )
        .await
        .expect("an answer within 15 s")
        .unwrap();
        answer.clone()
    };
    let init = ask(
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
    )
    .await;
    assert!(init.contains(r#""id":0"#), "{init}");
    ask(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).await;
    for id in [
        "9223372036854775807",
        "-9223372036854775808",
        r#""123456789012345678901234567890123456789""#,
        r#""x y""#,
    ] {
        let answer = ask(&format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#)).await;
        assert!(answer.contains(&format!(r#""id":{id}"#)), "{id}: {answer}");
    }
    drop(stdin);
    let _ = child.wait().await;
}

#[tokio::test]
async fn a_dead_daemon_is_reported_once_then_respawned() {
    let ws = Ws::new();
    let c = ws.client(&["--profile", "knowledge"]).await;
    ok(&c, "vox_memory_store", json!({"key": "k", "value": "v"})).await;
    let pid = ws.daemon_status()["ping"]["pid"].as_u64().unwrap();
    std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let e = err(&c, "vox_memory_recall", json!({"key": "k"})).await;
    assert_eq!(e["code"], "daemon_unavailable");
    assert!(
        e["message"].as_str().unwrap().contains(".vox/daemon.log"),
        "the error names the daemon's log: {e}"
    );
    let r = ok(&c, "vox_memory_recall", json!({"key": "k"})).await;
    assert_eq!(
        r["memory"]["value"], "v",
        "the acknowledged write survived the crash"
    );
    assert_ne!(ws.daemon_status()["ping"]["pid"].as_u64().unwrap(), pid);
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn an_unusable_vox_directory_is_a_clear_error() {
    let ws = Ws::new();
    std::fs::write(ws.root().join(".vox"), "a file, not a directory").unwrap();
    let out = ws
        .mcp_command(&["--profile", "knowledge"])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(".vox"), "{stderr}");
    assert!(stderr.contains("daemon log:"), "{stderr}");
}

#[tokio::test]
async fn an_oversized_stdio_message_is_dropped_and_the_session_continues() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let ws = Ws::new();
    let mut child = ws
        .mcp_command(&["--profile", "knowledge"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    stdin
        .write_all(format!("{init}\n").as_bytes())
        .await
        .unwrap();
    assert!(
        lines
            .next_line()
            .await
            .unwrap()
            .unwrap()
            .contains("\"id\":1")
    );
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .await
        .unwrap();
    let huge = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\",\"params\":{{\"pad\":\"{}\"}}}}\n",
        "x".repeat(5 << 20)
    );
    stdin.write_all(huge.as_bytes()).await.unwrap();
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\"}\n")
        .await
        .unwrap();
    let answer = lines.next_line().await.unwrap().unwrap();
    assert!(
        answer.contains("\"id\":3") && answer.contains("vox_memory_recall"),
        "{}",
        &answer[..answer.len().min(200)]
    );
    drop(stdin);
    let _ = child.wait().await;
}

#[tokio::test]
async fn a_profile_without_tools_in_this_build_warns_and_reports_placeholders() {
    let ws = Ws::new();
    let out = ws.vox(&["mcp", "--profile", "browser"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("warning: profile `browser` serves no tool in this build"),
        "{stderr}"
    );
    let report = &ws.daemon_status()["boot_report"];
    let placeholders: Vec<&str> = report["placeholders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(placeholders.contains(&"browser"), "{report}");
    let step = report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == "browser")
        .unwrap();
    assert_eq!(step["status"], "placeholder");
    // Its model steps, which the models family serves now, are not placeholders.
    let facade = report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == "llm_facade")
        .unwrap();
    assert_eq!(facade["status"], "ok", "{facade}");
    // A profile whose subsystems do real work has none, and does not warn.
    let ws = Ws::new();
    let out = ws.vox(&["mcp", "--profile", "knowledge"]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("warning"));
    assert_eq!(ws.daemon_status()["boot_report"]["placeholders"], json!([]));
}
