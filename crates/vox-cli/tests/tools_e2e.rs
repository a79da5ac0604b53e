//! End to end: the knowledge, attention and repo-read tools through a real client, the daemon
//! socket's handling of bad input, and profile selection from bundles and the config file.

mod common;
use common::*;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;

#[tokio::test]
async fn kb_ingest_query_list_delete_and_knowledge_query() {
    let ws = Ws::new();
    std::fs::create_dir_all(ws.root().join("docs")).unwrap();
    std::fs::write(
        ws.root().join("docs/deploy.md"),
        "# Deploy\nWe deploy with blue-green rollouts on Fridays.\n",
    )
    .unwrap();
    std::fs::write(ws.root().join("docs/ignored.md"), "blue-green secret\n").unwrap();
    std::fs::write(ws.root().join(".gitignore"), "docs/ignored.md\n").unwrap();
    let c = ws.client(&["--profile", "knowledge"]).await;
    let r = ok(&c, "vox_kb_ingest", json!({"path": "docs/*.md"})).await;
    assert_eq!(r["ingested"], 1, "gitignored files are skipped: {r}");
    ok(
        &c,
        "vox_kb_ingest",
        json!({"text": "Rollback runbook: revert the blue-green switch.", "title": "runbook"}),
    )
    .await;
    let q = ok(&c, "vox_kb_query", json!({"query": "blue-green rollouts"})).await;
    assert_eq!(q["results"][0]["source"], "file:docs/deploy.md", "{q}");
    // Re-ingesting an unchanged file changes nothing.
    let again = ok(&c, "vox_kb_ingest", json!({"path": "docs/deploy.md"})).await;
    assert_eq!(again["documents"][0]["changed"], false);
    ok(
        &c,
        "vox_memory_store",
        json!({"key": "release/day", "value": "We release blue-green on Fridays"}),
    )
    .await;
    let k = ok(
        &c,
        "vox_knowledge_query",
        json!({"query": "blue-green Fridays"}),
    )
    .await;
    let sources: Vec<&str> = k["answers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["source"].as_str().unwrap())
        .collect();
    assert!(
        sources.contains(&"kb") && sources.contains(&"memory"),
        "{k}"
    );
    assert!(k["best"].is_object());
    let list = ok(&c, "vox_kb_list", json!({})).await;
    let docs = list["documents"].as_array().unwrap();
    assert_eq!(docs.len(), 2);
    let id = docs[0]["id"].clone();
    ok(&c, "vox_kb_delete", json!({"id": id})).await;
    assert_eq!(
        err(&c, "vox_kb_delete", json!({"id": id})).await["code"],
        "not_found"
    );
    let e = err(&c, "vox_kb_ingest", json!({"path": "../outside/*.md"})).await;
    assert_eq!(e["code"], "invalid_arguments");
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn search_text_and_structural_respect_gitignore() {
    let ws = Ws::new();
    std::fs::create_dir_all(ws.root().join("src")).unwrap();
    std::fs::write(ws.root().join("src/lib.rs"), "pub struct RetryPolicy;\n\npub fn parse_config(text: &str) -> u32 {\n    // handles the frobnicate flag\n    0\n}\n").unwrap();
    std::fs::write(ws.root().join("build.log"), "frobnicate frobnicate\n").unwrap();
    std::fs::write(ws.root().join(".gitignore"), "*.log\n").unwrap();
    git(ws.root(), &["init", "-q"]);
    let c = ws.client(&["--profile", "knowledge"]).await;
    let t = ok(&c, "vox_search_text", json!({"query": "frobnicate"})).await;
    let files: Vec<&str> = t["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(files, ["src/lib.rs"], "{t}");
    assert_eq!(t["files"][0]["lines"][0]["line"], 4);
    let s = ok(
        &c,
        "vox_search_structural",
        json!({"query": "parse_config"}),
    )
    .await;
    assert_eq!(s["declarations"][0]["name"], "parse_config", "{s}");
    assert_eq!(s["declarations"][0]["line"], 3);
    let s = ok(
        &c,
        "vox_search_structural",
        json!({"query": "Retry", "kind": "struct"}),
    )
    .await;
    assert_eq!(s["declarations"][0]["name"], "RetryPolicy", "{s}");
    // A file written after the first search is found by the next one.
    std::fs::write(ws.root().join("src/new.rs"), "fn frobnicate_again() {}\n").unwrap();
    let t = ok(&c, "vox_search_text", json!({"query": "frobnicate_again"})).await;
    assert_eq!(t["files"][0]["path"], "src/new.rs", "{t}");
    let e = err(
        &c,
        "vox_search_text",
        json!({"query": "x", "path_glob": "src/[z"}),
    )
    .await;
    assert_eq!(e["code"], "invalid_arguments");
    // The search index's own code reaches the client as the error's detail.
    assert_eq!(e["detail"]["code"], "search_invalid_glob", "{e}");
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn sessions_lifecycle_and_errors() {
    let ws = Ws::new();
    let c = ws.client(&["--profile", "knowledge"]).await;
    let s = ok(
        &c,
        "vox_session_create",
        json!({"title": "t", "metadata": {"agent": "a"}}),
    )
    .await;
    let id = s["session"]["id"].as_str().unwrap().to_owned();
    ok(
        &c,
        "vox_session_append",
        json!({"id": id, "role": "user", "content": "hi"}),
    )
    .await;
    let closed = ok(
        &c,
        "vox_session_close",
        json!({"id": id, "summary": "done"}),
    )
    .await;
    assert_eq!(closed["session"]["status"], "closed");
    assert_eq!(
        err(
            &c,
            "vox_session_append",
            json!({"id": id, "role": "user", "content": "late"})
        )
        .await["code"],
        "conflict"
    );
    assert_eq!(
        err(&c, "vox_session_get", json!({"id": "s_0123"})).await["code"],
        "not_found"
    );
    let open = ok(&c, "vox_session_list", json!({"status": "open"})).await;
    assert_eq!(open["sessions"].as_array().unwrap().len(), 0);
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn attention_records_calls_and_stays_db_free() {
    let ws = Ws::new();
    let c = ws.client(&["--profile", "attention"]).await;
    let names = tool_names(&c).await;
    assert_eq!(names, registry_slice("attention"));
    assert!(!names.contains(&"vox_attention_summary".to_owned()));
    ok(&c, "vox_budget_status", json!({})).await;
    let h = ok(&c, "vox_attention_history", json!({})).await;
    let agent = h["events"][0]["agent"].as_str().unwrap().to_owned();
    assert!(agent.starts_with("stdio:"), "{h}");
    assert_eq!(h["events"][0]["tool"], "vox_budget_status");
    ok(
        &c,
        "vox_trust_override",
        json!({"agent": agent, "level": "high", "reason": "test"}),
    )
    .await;
    let b = ok(&c, "vox_budget_status", json!({"agent": agent})).await;
    assert_eq!(b["agents"][0]["trust"], "high");
    assert_eq!(b["agents"][0]["token_budget"], 400_000);
    let r = ok(&c, "vox_attention_reset", json!({})).await;
    assert!(r["cleared_events"].as_u64().unwrap() >= 3);
    assert!(
        !ws.vox_dir().join("journey.db").exists(),
        "the attention profile boots no store"
    );
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn attention_summary_and_cost_history_under_dev() {
    let ws = Ws::new();
    let c = ws.client(&[]).await;
    ok(&c, "vox_memory_store", json!({"key": "a", "value": "b"})).await;
    ok(&c, "vox_memory_recall", json!({"key": "a"})).await;
    let s = ok(&c, "vox_attention_summary", json!({})).await;
    let tools: Vec<&str> = s["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["tool"].as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"vox_memory_store") && tools.contains(&"vox_memory_recall"),
        "{s}"
    );
    let cost = ok(&c, "vox_cost_history", json!({"days": 1})).await;
    assert!(cost["days"][0]["calls"].as_i64().unwrap() >= 3, "{cost}");
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn repo_read_views_the_workspace_repository() {
    let ws = Ws::new();
    git(ws.root(), &["init", "-q", "-b", "main"]);
    std::fs::write(ws.root().join("README.md"), "line one\nline two\n").unwrap();
    git(ws.root(), &["add", "."]);
    git(ws.root(), &["commit", "-q", "-m", "first commit"]);
    std::fs::write(ws.root().join("README.md"), "line one\nline 2\n").unwrap();
    let c = ws.client(&["--profile", "repo-read"]).await;
    let status = ok(&c, "vox_repo_status", json!({})).await;
    assert_eq!(status["branch"], "main");
    let log = ok(&c, "vox_repo_log", json!({})).await;
    assert_eq!(log["commits"][0]["subject"], "first commit");
    let diff = ok(&c, "vox_repo_diff", json!({})).await;
    assert!(diff["patch"].as_str().unwrap().contains("+line 2"));
    let file = ok(
        &c,
        "vox_repo_file",
        json!({"path": "README.md", "start_line": 2, "end_line": 2}),
    )
    .await;
    assert_eq!(file["content"], "line two\n");
    let tree = ok(&c, "vox_repo_tree", json!({})).await;
    assert_eq!(tree["entries"][0]["path"], "README.md");
    let show = ok(&c, "vox_repo_show", json!({})).await;
    assert_eq!(show["subject"], "first commit");
    assert_eq!(
        err(&c, "vox_repo_log", json!({"rev": "--output=/tmp/x"})).await["code"],
        "invalid_arguments"
    );
    let e = err(&c, "vox_repo_file", json!({"path": "../etc/passwd"})).await;
    assert_eq!(e["code"], "invalid_arguments");
    // The repository's own code is the detail.
    assert_eq!(e["detail"]["code"], "path_escapes_repository", "{e}");
    // repo-read is public: none of its tools is operator or internal.
    for t in tools(&c).await {
        assert_eq!(t.meta.unwrap()["vox_exposure"], "public");
    }
    c.cancel().await.unwrap();
}

fn socket_request(
    stream: &mut UnixStream,
    reader: &mut BufReader<UnixStream>,
    line: &[u8],
) -> Value {
    stream.write_all(line).unwrap();
    stream.write_all(b"\n").unwrap();
    let mut answer = String::new();
    reader.read_line(&mut answer).unwrap();
    serde_json::from_str(&answer).unwrap()
}

#[tokio::test]
async fn the_daemon_socket_survives_malformed_and_oversized_messages() {
    let ws = Ws::new();
    let c = ws.client(&["--profile", "knowledge"]).await;
    let sock = ws.vox_dir().join("orchestrator.sock");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(
        std::fs::metadata(ws.vox_dir())
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o700,
        ".vox is private"
    );
    let mut stream = UnixStream::connect(&sock).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let a = socket_request(&mut stream, &mut reader, b"{not json");
    assert_eq!(a["error"]["code"], -32700);
    let big = vec![b'x'; 5 * 1024 * 1024];
    let a = socket_request(&mut stream, &mut reader, &big);
    assert_eq!(a["error"]["code"], -32600);
    assert!(a["error"]["message"].as_str().unwrap().contains("exceeds"));
    let a = socket_request(
        &mut stream,
        &mut reader,
        br#"{"jsonrpc":"2.0","id":7,"method":"orch.nope"}"#,
    );
    assert_eq!(a["error"]["code"], -32601);
    // Protocol 3: tools are MCP, not a control method.
    let a = socket_request(&mut stream, &mut reader, br#"{"jsonrpc":"2.0","id":8,"method":"orch.tool_call","params":{"name":"vox_memory_recall","arguments":[1]}}"#);
    assert_eq!(a["error"]["code"], -32601);
    let a = socket_request(
        &mut stream,
        &mut reader,
        br#"{"jsonrpc":"2.0","id":9,"method":"orch.ping"}"#,
    );
    assert_eq!(a["id"], 9);
    assert_eq!(a["result"]["profile"], "knowledge");
    assert_eq!(
        a["result"]["protocol_version"],
        vox_daemon::PROTOCOL_VERSION
    );
    // The MCP client on its own connection is unaffected.
    assert_eq!(tool_names(&c).await, registry_slice("knowledge"));
    c.cancel().await.unwrap();
    // A connection that opens with an MCP message is an MCP session (the operator's); a bad
    // argument comes back as a typed tool error.
    use rmcp::ServiceExt;
    let (r, w) = tokio::net::UnixStream::connect(&sock)
        .await
        .unwrap()
        .into_split();
    let mcp = ().serve((r, w)).await.unwrap();
    let args = json!({"key": 5}).as_object().cloned().unwrap();
    let res = mcp
        .call_tool(
            rmcp::model::CallToolRequestParams::new("vox_memory_recall").with_arguments(args),
        )
        .await
        .unwrap();
    assert_eq!(res.is_error, Some(true));
    assert_eq!(
        res.structured_content.unwrap()["error"]["code"],
        "invalid_arguments"
    );
    mcp.cancel().await.unwrap();
}

/// The answer line to `line`, as bytes.
fn socket_answer_line(
    stream: &mut UnixStream,
    reader: &mut BufReader<UnixStream>,
    line: &str,
) -> String {
    stream.write_all(line.as_bytes()).unwrap();
    stream.write_all(b"\n").unwrap();
    let mut answer = String::new();
    reader.read_line(&mut answer).unwrap();
    answer
}

#[tokio::test]
async fn the_daemon_socket_echoes_request_ids_byte_for_byte() {
    let ws = Ws::new();
    let c = ws.client(&["--profile", "knowledge"]).await;
    let sock = ws.vox_dir().join("orchestrator.sock");
    let mut stream = UnixStream::connect(&sock).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let ids = [
        "123456789012345678901234567890123456789",
        "-98765432109876543210987654321",
        "18446744073709551616",
        "1.0",
        "1e3",
        "0.30000000000000000000000001",
        r#""a \"quoted\" id \u00e9""#,
        "7",
    ];
    for id in ids {
        for (method, params) in [
            ("orch.ping", "null"),
            ("orch.nope", "null"),
            ("orch.boot_report", "null"),
            ("research.run", r#"{"bad":1}"#),
        ] {
            let line =
                format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#);
            let answer = socket_answer_line(&mut stream, &mut reader, &line);
            assert!(
                answer.contains(&format!(r#""id":{id}"#)),
                "{method} with id {id}: {answer}"
            );
            let v: Value = serde_json::from_str(&answer).unwrap();
            assert!(
                v.get("result").is_some() || v.get("error").is_some(),
                "{answer}"
            );
        }
    }
    // A notification (no id) still gets no answer, and an id of null is answered with null.
    let answer = socket_answer_line(
        &mut stream,
        &mut reader,
        r#"{"jsonrpc":"2.0","id":null,"method":"orch.ping"}"#,
    );
    assert!(answer.contains(r#""id":null"#), "{answer}");
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn bundle_apply_sets_the_default_profile_and_flags_win() {
    let ws = Ws::new();
    let out = ws.vox(&["bundle", "apply", "vox-edge"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let config = std::fs::read_to_string(ws.home.path().join("config.toml")).unwrap();
    assert!(config.contains("VOX_PROFILE = \"lang,skills\""), "{config}");
    let out = ws.vox(&["bundle", "apply", "vox-base"]);
    assert!(out.status.success());
    assert_eq!(
        std::fs::read_to_string(ws.home.path().join("config.toml")).unwrap(),
        config,
        "vox-base leaves it alone"
    );
    // The config file is the default; VOX_PROFILE overrides it; --profile overrides both.
    std::fs::write(
        ws.home.path().join("config.toml"),
        "VOX_PROFILE = \"repo-read\"\n",
    )
    .unwrap();
    let c = ws.client(&[]).await;
    assert_eq!(tool_names(&c).await, registry_slice("repo-read"));
    c.cancel().await.unwrap();
    ws.stop_daemon();
    let ws = ws.with_env("VOX_PROFILE", "attention");
    let c = ws.client(&[]).await;
    assert_eq!(tool_names(&c).await, registry_slice("attention"));
    c.cancel().await.unwrap();
    ws.stop_daemon();
    let c = ws.client(&["--profile", "knowledge"]).await;
    assert_eq!(tool_names(&c).await, registry_slice("knowledge"));
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn a_corrupt_config_file_is_named_in_the_error() {
    let ws = Ws::new();
    std::fs::write(
        ws.home.path().join("config.toml"),
        "VOX_PROFILE = [unclosed\n",
    )
    .unwrap();
    let out = ws.vox(&["mcp"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("config.toml") && stderr.contains("line 1"),
        "{stderr}"
    );
    let out = ws.vox(&["bundle", "apply", "nope"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown bundle `nope`"));
}

#[test]
fn profile_show_json_reports_tools_closure_and_exposure() {
    let ws = Ws::new();
    let out = ws.vox(&["profile", "show", "models,knowledge", "--json"]);
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["profile"], "knowledge,models");
    assert_eq!(v["max_exposure"], "operator");
    assert!(
        v["subsystem_closure"]
            .as_array()
            .unwrap()
            .contains(&json!("llm_facade"))
    );
    assert_eq!(
        v["tools"].as_array().unwrap().len(),
        registry_slice("knowledge").len() + registry_slice("models").len()
    );
    let out = ws.vox(&["profile", "list", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["id"], "dev");
}

const GREET: &str = "@tool \"greet: say hello\"\nfn greet(name: str, punct: str = \"!\") to str {\n    \"Hello {name}{punct}\"\n}\n\n@test\nfn greets() to bool {\n    greet(\"vox\") == \"Hello vox!\"\n}\n";

#[tokio::test]
async fn lang_profile_checks_tests_and_introspects_vox_files() {
    let ws = Ws::new();
    std::fs::create_dir_all(ws.root().join("tools")).unwrap();
    std::fs::write(ws.root().join("tools/greet.vox"), GREET).unwrap();
    let c = ws.client(&["--profile", "lang"]).await;
    assert_eq!(tool_names(&c).await, registry_slice("lang"));
    assert_eq!(registry_slice("lang").len(), 5);
    let r = ok(&c, "vox_check", json!({"path": "tools"})).await;
    assert!(r.to_string().contains("greet.vox"), "{r}");
    let bad = ok(
        &c,
        "vox_check",
        json!({"source": "fn f( {", "name": "bad.vox"}),
    )
    .await;
    assert!(
        bad.to_string().contains("\"ok\":false") || bad.to_string().contains("error"),
        "{bad}"
    );
    let v = ok(&c, "vox_validate_source", json!({"source": GREET})).await;
    assert!(v.to_string().contains("greet"), "{v}");
    let t = ok(&c, "vox_test", json!({"path": "tools/greet.vox"})).await;
    assert!(t.to_string().contains("greets"), "{t}");
    let g = ok(&c, "vox_grammar", json!({})).await;
    assert!(g["grammar"].as_str().unwrap().len() > 200);
    let h = ok(
        &c,
        "vox_compiler_introspect",
        json!({"path": "tools/greet.vox"}),
    )
    .await;
    assert!(h.to_string().contains("punct"), "{h}");
    // Imports load from the workspace: next to the file, then at the root (also for source
    // text, which is read as a file at the root).
    std::fs::create_dir_all(ws.root().join("lib")).unwrap();
    std::fs::write(
        ws.root().join("lib/twice.vox"),
        "fn twice(x: int) to int { x * 2 }\n",
    )
    .unwrap();
    std::fs::write(
        ws.root().join("tools/uses.vox"),
        "import lib.twice.{twice}\n@test\nfn doubles() { assert(twice(21) == 42) }\n",
    )
    .unwrap();
    let t = ok(&c, "vox_test", json!({"path": "tools/uses.vox"})).await;
    assert_eq!(
        (t["passed"].clone(), t["failed"].clone()),
        (json!(1), json!(0)),
        "{t}"
    );
    let r = ok(
        &c,
        "vox_check",
        json!({"source": "import lib.twice.{twice, thrice}\nfn f() { twice(1) }\n"}),
    )
    .await;
    assert!(r.to_string().contains("vox/import/unknown-name"), "{r}");
    assert_eq!(r["errors"], 1, "{r}");
    assert_eq!(
        err(&c, "vox_check", json!({"path": "../x.vox"})).await["code"],
        "invalid_arguments"
    );
    assert_eq!(
        err(&c, "vox_check", json!({"path": "tools", "source": "x"})).await["code"],
        "invalid_arguments"
    );
    c.cancel().await.unwrap();
}

#[test]
fn vox_check_run_and_test_commands() {
    let ws = Ws::new();
    std::fs::write(ws.root().join("greet.vox"), GREET).unwrap();
    let out = ws.vox(&["check", "greet.vox"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = ws.vox(&["run", "greet.vox", "greet", "--args", r#"{"name":"Ada"}"#]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "\"Hello Ada!\""
    );
    let out = ws.vox(&["run", "greet.vox", "greet", "--args", r#"{"nam":"Ada"}"#]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let out = ws.vox(&["test", "greet.vox"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed, 0 failed"));
    std::fs::write(ws.root().join("bad.vox"), "fn f( {\n").unwrap();
    let out = ws.vox(&["check", "bad.vox"]);
    assert_eq!(out.status.code(), Some(1));
    // A file importing another runs across both.
    std::fs::write(
        ws.root().join("uses.vox"),
        "import greet.{greet}\n@tool\nfn loud(name: str) to str { greet(name).to_upper() }\n",
    )
    .unwrap();
    let out = ws.vox(&["run", "uses.vox", "loud", "--args", r#"{"name":"Ada"}"#]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "\"HELLO ADA!\""
    );
    // vox fmt: --check reports, a plain run rewrites, bad.vox is refused and left alone.
    std::fs::write(ws.root().join("messy.vox"), "fn f(a:int)to int{a+1}\n").unwrap();
    let out = ws.vox(&["fmt", "--check", "messy.vox", "greet.vox"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("would reformat messy.vox"));
    let out = ws.vox(&["fmt", "messy.vox"]);
    assert!(out.status.success());
    assert_eq!(
        std::fs::read_to_string(ws.root().join("messy.vox")).unwrap(),
        "fn f(a: int) to int { a + 1 }\n"
    );
    let out = ws.vox(&["fmt", "bad.vox"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn a_closed_pipe_ends_a_report_quietly() {
    let ws = Ws::new();
    let out = std::process::Command::new("sh")
        .arg("-c")
        // The reader is gone before vox writes: the write meets a closed pipe every time.
        .arg(format!("(sleep 0.2; '{VOX}' profile show dev) | true"))
        .env("VOX_HOME", ws.home.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn ci_operations_verify_passes_on_this_build() {
    let ws = Ws::new();
    let out = ws.vox(&["ci", "operations-verify", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["problems"], json!([]));
    assert_eq!(
        v["tools"].as_u64().unwrap() as usize,
        vox_mcp_registry::TOOL_REGISTRY.len()
    );
}
