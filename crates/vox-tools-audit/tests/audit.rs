//! The audit trail through the one call path: every call recorded with its caller, decision
//! and code; paging by `next`; arguments kept only for an upstream server that opted in.

use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use vox_core::CallScope;
use vox_mcp_registry::{Caller, ProfileSet, Role};
use vox_tools_harness::Harness;

fn records(v: &Value) -> Vec<Value> {
    v["records"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_is_recorded_with_its_caller_decision_and_code() {
    let h = Harness::boot();
    h.ok("vox_memory_store", json!({"key": "k", "value": "v"}))
        .await;
    let (code, _) = h.err("vox_memory_store", json!({"key": 3})).await;
    assert_eq!(code, "invalid_arguments");
    let reader = Arc::new(CallScope::new(
        ProfileSet::dev().public_only(),
        Caller {
            loopback: false,
            role: Role::Read,
        },
        "token:reader",
        "r",
    ));
    let (denied, _) = h
        .err_in(
            &reader,
            "vox_memory_store",
            json!({"key": "k", "value": "v"}),
        )
        .await;
    assert!(!denied.is_empty());

    let page = h.ok("vox_audit_query", json!({"limit": 10})).await;
    let r = records(&page);
    assert_eq!(r.len(), 3, "{page}");
    assert_eq!(
        (
            r[0]["tool"].as_str(),
            r[0]["decision"].as_str(),
            r[0]["code"].as_str()
        ),
        (Some("vox_memory_store"), Some("allowed"), Some("ok"))
    );
    assert_eq!(r[0]["source"], "catalog");
    assert_eq!(r[0]["role"], "write");
    assert_eq!(r[1]["code"], "invalid_arguments");
    assert_eq!(r[2]["decision"], "denied");
    assert_eq!(r[2]["code"], denied.as_str());
    assert_eq!(r[2]["principal"], "token:reader");
    assert_eq!(r[2]["role"], "read");
    assert_eq!(r[2]["loopback"], false);
    assert!(
        r.iter().all(|x| x["arguments"].is_null()),
        "arguments are not kept by default"
    );

    // Paging: after `next`, only what came since (the query itself is a call too).
    let next = page["next"].as_i64().unwrap();
    h.ok("vox_memory_recall", json!({"key": "k"})).await;
    let more = records(&h.ok("vox_audit_query", json!({"after": next})).await);
    let tools: Vec<&str> = more.iter().filter_map(|x| x["tool"].as_str()).collect();
    assert_eq!(tools, ["vox_audit_query", "vox_memory_recall"]);
    let only = records(
        &h.ok("vox_audit_query", json!({"tool": "vox_memory_*"}))
            .await,
    );
    assert!(
        only.iter()
            .all(|x| x["tool"].as_str().unwrap().starts_with("vox_memory_"))
    );
    assert_eq!(only.len(), 4);
    let (code, _) = h.err("vox_audit_query", json!({"limit": 0})).await;
    assert_eq!(code, "invalid_arguments");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_are_kept_only_for_a_server_that_opted_in() {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/upstream/node_modules/.bin/mcp-server-everything");
    if !bin.exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "npm ci --prefix tests/upstream"
        );
        return;
    }
    let bin = bin.canonicalize().unwrap();
    let toml = format!(
        "[servers.kept]\ncommand = {bin:?}\nargs = [\"stdio\"]\naudit_arguments = true\n[servers.plain]\ncommand = {bin:?}\nargs = [\"stdio\"]\n"
    );
    let h = Harness::boot_in(move |root| {
        std::fs::create_dir_all(root.join(".vox")).unwrap();
        std::fs::write(root.join(".vox/servers.toml"), toml).unwrap();
    });
    for _ in 0..200 {
        let names: Vec<Value> = h
            .orch()
            .list(&h.operator("s"))
            .into_iter()
            .map(|t| t["name"].clone())
            .collect();
        if names.contains(&json!("kept__echo")) && names.contains(&json!("plain__echo")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    h.ok("kept__echo", json!({"message": "keep me"})).await;
    h.ok("plain__echo", json!({"message": "not me"})).await;
    let r = records(&h.ok("vox_audit_query", json!({"tool": "*"})).await);
    let of = |tool: &str| r.iter().find(|x| x["tool"] == tool).cloned().unwrap();
    let kept = of("kept__echo");
    assert_eq!(kept["arguments"], json!({"message": "keep me"}));
    assert_eq!(
        (kept["source"].as_str(), kept["server"].as_str()),
        (Some("upstream"), Some("kept"))
    );
    assert!(of("plain__echo")["arguments"].is_null());
    assert!(
        !r.iter().any(|x| x.to_string().contains("Echo: keep me")),
        "results are never kept"
    );
}
