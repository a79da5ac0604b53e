//! The knowledge families in process: memory, sessions, search (kb and workspace), attention
//! and the boot report, called through the orchestrator as a transport would.

use serde_json::json;
use vox_tools_harness::{Harness, pluck};

#[tokio::test]
async fn memories_are_stored_recalled_listed_searched_and_forgotten() {
    let h = Harness::boot();
    let stored = h
        .ok(
            "vox_memory_store",
            json!({"key": "db.engine", "value": "sqlite in WAL mode", "tags": ["db"]}),
        )
        .await;
    assert_eq!(stored["stored"], true);
    assert_eq!(stored["replaced"], false);
    let again = h
        .ok(
            "vox_memory_store",
            json!({"key": "db.engine", "value": "postgres when VOX_DB_URL is set"}),
        )
        .await;
    assert_eq!(again["replaced"], true, "{again}");
    h.ok(
        "vox_memory_store",
        json!({"key": "ui.theme", "value": "dark", "tags": ["ui"]}),
    )
    .await;

    let got = h.ok("vox_memory_recall", json!({"key": "db.engine"})).await;
    assert_eq!(got["found"], true);
    assert_eq!(got["memory"]["value"], "postgres when VOX_DB_URL is set");
    let missing = h.ok("vox_memory_recall", json!({"key": "nope"})).await;
    assert_eq!(missing["found"], false, "{missing}");

    let all = h.ok("vox_memory_list", json!({})).await;
    let keys: Vec<&str> = pluck(&all["memories"], "key");
    assert_eq!(keys.len(), 2, "{all}");
    assert!(keys.contains(&"db.engine") && keys.contains(&"ui.theme"));
    let prefixed = h.ok("vox_memory_list", json!({"prefix": "ui."})).await;
    assert_eq!(prefixed["memories"].as_array().unwrap().len(), 1);
    assert_eq!(prefixed["memories"][0]["key"], "ui.theme");

    let hits = h
        .ok("vox_memory_search", json!({"query": "postgres"}))
        .await;
    assert_eq!(hits["results"][0]["key"], "db.engine", "{hits}");

    let gone = h.ok("vox_memory_forget", json!({"key": "db.engine"})).await;
    assert_eq!(gone["forgotten"], true);
    let hits = h
        .ok("vox_memory_search", json!({"query": "postgres"}))
        .await;
    assert_eq!(
        hits["results"],
        json!([]),
        "a forgotten memory leaves the index"
    );
    h.fails(
        "vox_memory_store",
        json!({"key": "", "value": "v"}),
        "invalid_arguments",
    )
    .await;
}

#[tokio::test]
async fn a_session_is_created_appended_to_read_listed_and_closed() {
    let h = Harness::boot();
    let made = h
        .ok(
            "vox_session_create",
            json!({"title": "triage", "metadata": {"ticket": 31}}),
        )
        .await;
    let id = made["session"]["id"].as_str().unwrap().to_owned();
    assert_eq!(made["session"]["status"], "open");
    for (role, content) in [("user", "what broke?"), ("assistant", "the parser")] {
        let a = h
            .ok(
                "vox_session_append",
                json!({"id": id, "role": role, "content": content}),
            )
            .await;
        assert_eq!(a["appended"], true);
    }
    let got = h.ok("vox_session_get", json!({"id": id})).await;
    assert_eq!(got["session"]["message_count"], 2, "{got}");
    assert_eq!(got["messages"][1]["content"], "the parser");
    let open = h.ok("vox_session_list", json!({"status": "open"})).await;
    assert_eq!(open["sessions"][0]["id"], json!(id), "{open}");

    let closed = h
        .ok("vox_session_close", json!({"id": id, "summary": "fixed"}))
        .await;
    assert_eq!(closed["session"]["status"], "closed");
    assert_eq!(closed["session"]["summary"], "fixed");
    let open = h.ok("vox_session_list", json!({"status": "open"})).await;
    assert_eq!(open["sessions"], json!([]));
    h.fails("vox_session_get", json!({"id": "no-such"}), "not_found")
        .await;
}

#[tokio::test]
async fn the_knowledge_base_ingests_text_and_files_and_answers_queries() {
    let h = Harness::boot_in(|root| {
        std::fs::create_dir_all(root.join("docs")).unwrap();
        std::fs::write(
            root.join("docs/deploy.md"),
            "# Deploying\nRun the canary first, then roll out region by region.\n",
        )
        .unwrap();
    });
    let text = h
        .ok(
            "vox_kb_ingest",
            json!({"text": "Rotating keys\nKeys rotate every ninety days.", "source": "runbook"}),
        )
        .await;
    assert_eq!(text["ingested"], 1);
    assert_eq!(text["documents"][0]["title"], "Rotating keys");
    let same = h
        .ok(
            "vox_kb_ingest",
            json!({"text": "Rotating keys\nKeys rotate every ninety days.", "source": "runbook"}),
        )
        .await;
    assert_eq!(same["documents"][0]["changed"], false, "{same}");
    let files = h.ok("vox_kb_ingest", json!({"path": "docs/*.md"})).await;
    assert_eq!(files["documents"][0]["source"], "file:docs/deploy.md");

    let hits = h.ok("vox_kb_query", json!({"query": "canary"})).await;
    assert_eq!(
        hits["results"][0]["source"], "file:docs/deploy.md",
        "{hits}"
    );
    let listed = h.ok("vox_kb_list", json!({})).await;
    assert_eq!(listed["documents"].as_array().unwrap().len(), 2, "{listed}");

    h.ok(
        "vox_memory_store",
        json!({"key": "keys", "value": "rotation is automated"}),
    )
    .await;
    let k = h
        .ok("vox_knowledge_query", json!({"query": "rotation"}))
        .await;
    let sources: Vec<&str> = pluck(&k["answers"], "source");
    assert!(sources.contains(&"memory"), "{k}");

    let found = h
        .ok(
            "vox_search_text",
            json!({"query": "region", "path_glob": "docs/**"}),
        )
        .await;
    assert_eq!(found["files"][0]["path"], "docs/deploy.md", "{found}");

    let id = hits["results"][0]["id"].clone();
    let del = h.ok("vox_kb_delete", json!({"id": id})).await;
    assert_eq!(del["deleted"], true);
    let hits = h.ok("vox_kb_query", json!({"query": "canary"})).await;
    assert_eq!(hits["results"], json!([]), "{hits}");
    h.fails(
        "vox_kb_ingest",
        json!({"text": "t", "path": "docs"}),
        "invalid_arguments",
    )
    .await;
}

#[tokio::test]
async fn attention_counts_each_callers_calls_and_the_boot_report_names_the_workspace() {
    let h = Harness::boot();
    h.ok("vox_memory_list", json!({})).await;
    h.ok("vox_memory_list", json!({})).await;
    let history = h
        .ok(
            "vox_attention_history",
            json!({"agent": vox_tools_harness::OPERATOR}),
        )
        .await;
    let tools: Vec<&str> = pluck(&history["events"], "tool");
    assert!(
        tools.iter().filter(|t| **t == "vox_memory_list").count() >= 2,
        "{history}"
    );
    let budget = h.ok("vox_budget_status", json!({})).await;
    assert!(budget.is_object(), "{budget}");

    let report = h.ok("vox_boot_report", json!({})).await;
    assert_eq!(report["profile"], "dev");
    assert_eq!(report["workspace"], json!(h.root()));
}
