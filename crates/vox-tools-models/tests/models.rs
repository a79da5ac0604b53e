//! The model families in process: the registry and preferences, chat's error paths with no
//! model to call, and research claims checked against the workspace.

use serde_json::{Value, json};
use vox_tools_harness::Harness;

/// A model of the registry whose provider's credentials are not set here, if there is one.
async fn model_without_credentials(h: &Harness) -> Option<String> {
    let listed = h.ok("vox_list_models", json!({})).await;
    listed["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["has_credentials"] == false)
        .and_then(|m| m["id"].as_str().map(str::to_owned))
}

#[tokio::test]
async fn chat_with_no_model_named_or_active_is_unavailable_and_keeps_no_history() {
    let h = Harness::boot();
    let active = h.ok("vox_get_active_model", json!({})).await;
    if active["model_id"] != Value::Null {
        // VOX_LLM_MODEL is set in this environment: there is an active model.
        return;
    }
    assert_eq!(active["source"], "none", "{active}");
    let e = h
        .fails(
            "vox_chat_message",
            json!({"message": "hello"}),
            "unavailable",
        )
        .await;
    assert!(
        e["error"]["message"].as_str().unwrap().contains("model_id"),
        "{e}"
    );
    let history = h.ok("vox_chat_history", json!({})).await;
    assert_eq!(history["messages"], json!([]), "{history}");
    // Research asks the same question first.
    h.fails(
        "vox_research_run",
        json!({"question": "why?"}),
        "unavailable",
    )
    .await;
}

#[tokio::test]
async fn chat_errors_keep_their_llm_codes_and_check_arguments_first() {
    let h = Harness::boot();
    let e = h
        .fails(
            "vox_chat_message",
            json!({"message": "hi", "model_id": "no-such/model"}),
            "not_found",
        )
        .await;
    assert_eq!(e["error"]["detail"]["code"], "unknown_model", "{e}");
    h.fails(
        "vox_chat_message",
        json!({"message": ""}),
        "invalid_arguments",
    )
    .await;
    h.fails(
        "vox_chat_message",
        json!({"message": "hi", "session": "x".repeat(200)}),
        "invalid_arguments",
    )
    .await;
    if let Some(model) = model_without_credentials(&h).await {
        let e = h
            .fails(
                "vox_chat_message",
                json!({"message": "hi", "model_id": model}),
                "unavailable",
            )
            .await;
        assert_eq!(e["error"]["detail"]["code"], "llm_credentials", "{e}");
    }
}

#[tokio::test]
async fn the_active_model_and_benchmarks_are_kept_in_the_store() {
    let h = Harness::boot();
    let listed = h.ok("vox_list_models", json!({})).await;
    let Some(model) = listed["models"][0]["id"].as_str().map(str::to_owned) else {
        return;
    };
    h.fails(
        "vox_set_active_model",
        json!({"model_id": "no-such/model"}),
        "not_found",
    )
    .await;
    let set = h
        .ok("vox_set_active_model", json!({"model_id": model}))
        .await;
    assert_eq!(set["scope"], "active");
    let active = h.ok("vox_get_active_model", json!({})).await;
    assert_eq!(
        (&active["model_id"], &active["source"]),
        (&json!(model), &json!("chosen"))
    );
    let listed = h.ok("vox_list_models", json!({})).await;
    assert_eq!(listed["active_model"], json!(model));

    h.ok(
        "vox_benchmark_record",
        json!({"model_id": model, "category": "codegen", "score": 0.5, "metric": "pass@1"}),
    )
    .await;
    h.ok(
        "vox_benchmark_record",
        json!({"model_id": model, "category": "codegen", "score": 1.0}),
    )
    .await;
    let b = h.ok("vox_benchmark_list", json!({"model_id": model})).await;
    assert_eq!(b["benchmarks"].as_array().unwrap().len(), 2, "{b}");
    assert_eq!(b["means"][0]["mean"], 0.75, "{b}");
    assert_eq!(b["means"][0]["runs"], 2);
    h.fails(
        "vox_benchmark_record",
        json!({"model_id": model, "category": "juggling", "score": 1.0}),
        "invalid_arguments",
    )
    .await;
    let s = h
        .ok("vox_suggest_model", json!({"task_category": "codegen"}))
        .await;
    assert!(s["ranked"].is_array(), "{s}");
}

#[tokio::test]
async fn research_keeps_only_claims_whose_citations_resolve_and_evaluates_them_later() {
    let h = Harness::boot_in(|root| {
        std::fs::write(root.join("NOTES.md"), "alpha\nbeta\ngamma\n").unwrap();
    });
    h.ok(
        "vox_memory_store",
        json!({"key": "fact", "value": "the sky is blue"}),
    )
    .await;
    let r = h
        .ok(
            "vox_research_persist_claims",
            json!({"question": "what do the notes say?", "source": "tester", "claims": [
                {"text": "beta follows alpha", "citations": [{"file": "NOTES.md", "lines": [1, 2]}]},
                {"text": "it is blue", "citations": [{"memory": "fact"}]},
                {"text": "made up", "citations": [{"file": "NOTES.md", "lines": [7, 9]}]},
                {"text": "escapes", "citations": [{"file": "../etc/passwd", "lines": [1, 1]}]},
            ]}),
        )
        .await;
    assert_eq!(r["run"]["state"], "done", "{r}");
    assert_eq!(r["kept"].as_array().unwrap().len(), 2, "{r}");
    assert_eq!(r["dropped"].as_array().unwrap().len(), 2, "{r}");
    let run = r["run"]["id"].clone();

    let ev = h.ok("vox_research_evaluate", json!({"run_id": run})).await;
    assert_eq!(
        (&ev["holding"], &ev["stale"]),
        (&json!(2), &json!(0)),
        "{ev}"
    );
    std::fs::write(h.root().join("NOTES.md"), "alpha\nBETA\ngamma\n").unwrap();
    let ev = h.ok("vox_research_evaluate", json!({"run_id": run})).await;
    assert_eq!(
        (&ev["holding"], &ev["stale"]),
        (&json!(1), &json!(1)),
        "{ev}"
    );

    let d = h.ok("vox_news_draft", json!({"run_id": run})).await;
    assert!(d.to_string().contains("beta follows alpha"), "{d}");
    let listed = h.ok("vox_research_list", json!({"state": "done"})).await;
    assert_eq!(listed["runs"][0]["id"], run);
    h.fails("vox_research_status", json!({"run_id": 999}), "not_found")
        .await;
}
