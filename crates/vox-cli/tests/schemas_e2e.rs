//! End to end through the real `vox mcp` and daemon under `dev`: every catalog tool is called
//! with valid arguments and each successful result's `structuredContent` is validated against
//! the `outputSchema` that `tools/list` advertises; every advertised input schema is portable
//! (no `"null"` type, no type array, no `$ref`), and `null` for an optional argument works like
//! leaving it out.

mod common;
use common::*;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

const PICK: &str = "@tool \"Pick y, else x\"\nfn pick(x: int, y: Option[int]) to int {\n    match y {\n        Some(v) => v,\n        None => x\n    }\n}\n\n@test \"picks x without y\"\nfn picks() {\n    assert(pick(1, None) == 1)\n}\n";

const SKILL: &str = "---\nname: demo\ndescription: A demonstration skill for schema checks.\nlicense: MIT\nmetadata:\n  tags: demo, schemas\n---\n# Demo\nRun `./scripts/ok.sh`.\n";

fn write(ws: &Ws, rel: &str, text: &str) {
    let p = ws.root().join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A git workspace with code, docs, a `.vox` tool and a skill to install.
/// A scripted model process (killed on drop) answering the chat and research calls below.
fn scripted_model(dir: &std::path::Path) -> scripted_model::process::Running {
    let research = json!({"claims": [{"text": "parse_config returns a u32", "citations": [{"file": "src/lib.rs", "lines": [3, 3]}]}]});
    let script = json!({"actors": [{"name": "any", "match": "", "steps": [
        [{"say": "hello from the model"}],
        [{"say": research.to_string()}],
    ]}]});
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_vox")).with_file_name("scripted-model");
    scripted_model::process::Running::start(&bin, &script, dir)
        .unwrap_or_else(|e| panic!("{e} (built with the workspace)"))
}

fn workspace() -> Ws {
    let ws = Ws::new().with_env("VOX_MCP_WORKSPACE_TOOLS", "1");
    write(
        &ws,
        "src/lib.rs",
        "pub struct RetryPolicy;\n\npub fn parse_config() -> u32 {\n    // the frobnicate flag\n    0\n}\n",
    );
    write(
        &ws,
        "docs/deploy.md",
        "# Deploy\nWe deploy with blue-green rollouts on Fridays.\n",
    );
    write(&ws, "tools/pick.vox", PICK);
    write(&ws, "src-skills/demo/SKILL.md", SKILL);
    write(&ws, "src-skills/demo/scripts/ok.sh", "#!/bin/sh\necho ok\n");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        ws.root().join("src-skills/demo/scripts/ok.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    git(ws.root(), &["init", "-q"]);
    git(ws.root(), &["add", "."]);
    git(ws.root(), &["commit", "-q", "-m", "initial"]);
    write(
        &ws,
        "src/lib.rs",
        "pub struct RetryPolicy;\n\npub fn parse_config() -> u32 {\n    1\n}\n",
    );
    ws
}

/// The advertised schemas, and which tools a validated call has exercised.
struct Checker {
    output: BTreeMap<String, Value>,
    /// Input schemas, to fill every optional argument with `null`.
    input: BTreeMap<String, Value>,
    read_only: BTreeSet<String>,
    exercised: BTreeSet<String>,
}

impl Checker {
    async fn new(c: &Client) -> Self {
        let mut k = Checker {
            output: BTreeMap::new(),
            input: BTreeMap::new(),
            read_only: BTreeSet::new(),
            exercised: BTreeSet::new(),
        };
        k.list(c).await;
        k
    }

    /// Reads `tools/list` (again), checking every input schema.
    async fn list(&mut self, c: &Client) {
        for t in tools(c).await {
            let schema = Value::Object(t.input_schema.as_ref().clone());
            let problems = vox_core::family::portability_problems(&schema);
            assert!(
                problems.is_empty(),
                "{}: input schema is not portable: {problems:?}\n{schema}",
                t.name
            );
            if let Some(o) = &t.output_schema {
                self.output
                    .insert(t.name.to_string(), Value::Object(o.as_ref().clone()));
            }
            if t.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(true) {
                self.read_only.insert(t.name.to_string());
            }
            self.input.insert(t.name.to_string(), schema);
        }
    }

    /// Calls `name`, which must succeed, and validates its structured content.
    async fn ok(&mut self, c: &Client, name: &str, args: Value) -> Value {
        let r = call(c, name, args.clone()).await;
        assert_ne!(
            r.is_error,
            Some(true),
            "{name} {args} failed: {:?}",
            r.structured_content
        );
        let content = r
            .structured_content
            .unwrap_or_else(|| panic!("{name} sent no structuredContent"));
        self.validate(name, &content);
        self.exercised.insert(name.to_owned());
        // The same call with every optional argument it left out given as null: read-only tools
        // answer it too, and validly.
        if self.read_only.contains(name) {
            let nulls = self.with_nulls(name, &args);
            if nulls != args {
                let again = call(c, name, nulls.clone()).await;
                assert_ne!(
                    again.is_error,
                    Some(true),
                    "{name} {nulls} failed: {:?}",
                    again.structured_content
                );
                self.validate(name, again.structured_content.as_ref().unwrap());
            }
        }
        content
    }

    fn validate(&self, name: &str, content: &Value) {
        let schema = self
            .output
            .get(name)
            .unwrap_or_else(|| panic!("{name} advertises no outputSchema"));
        assert_eq!(schema["type"], "object", "{name}: {schema}");
        let validator = jsonschema::validator_for(schema)
            .unwrap_or_else(|e| panic!("{name}: the outputSchema does not compile: {e}"));
        let errors: Vec<String> = validator
            .iter_errors(content)
            .map(|e| format!("{e} at {}", e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{name}: structuredContent does not match its outputSchema: {errors:?}\n{content}"
        );
    }

    /// `args` plus `null` for every property of the input schema it does not give.
    fn with_nulls(&self, name: &str, args: &Value) -> Value {
        let mut out = args.as_object().cloned().unwrap_or_default();
        if let Some(props) = self.input[name]["properties"].as_object() {
            for k in props.keys() {
                out.entry(k.clone()).or_insert(Value::Null);
            }
        }
        Value::Object(out)
    }
}

#[tokio::test]
async fn every_dev_catalog_tool_answers_what_its_output_schema_says() {
    let models = tempfile::tempdir().unwrap();
    let model = scripted_model(models.path());
    let ws = workspace()
        .with_env("VOX_LLM_API", "chat")
        .with_env("VOX_LLM_BASE_URL", &model.base_url)
        .with_env("VOX_LLM_MODEL", "m");
    write(
        &ws,
        ".vox/publish.toml",
        "[destinations.docs]\nkind = \"file\"\ndir = \"docs/news\"\n",
    );
    let c = ws.client(&[]).await;
    let mut k = Checker::new(&c).await;
    let catalog: BTreeSet<String> = registry_slice("dev").into_iter().collect();
    for name in &catalog {
        assert!(k.output.contains_key(name), "{name}: no outputSchema");
    }
    // The workspace tool is listed, with a portable schema and no output schema.
    let pick = &k.input["pick"];
    assert_eq!(pick["required"], json!(["x"]), "{pick}");
    assert_eq!(pick["properties"]["y"], json!({"type": "integer"}));
    assert!(!k.output.contains_key("pick"));

    k.ok(&c, "vox_boot_report", json!({})).await;

    // Memory.
    let stored = k
        .ok(
            &c,
            "vox_memory_store",
            json!({"key": "project/deploy", "value": "We deploy blue-green on Fridays", "tags": ["ops"]}),
        )
        .await;
    assert_eq!(stored["stored"], true);
    let found = k
        .ok(&c, "vox_memory_recall", json!({"key": "project/deploy"}))
        .await;
    assert_eq!(found["memory"]["tags"], json!(["ops"]));
    let missing = k
        .ok(&c, "vox_memory_recall", json!({"key": "nothing/here"}))
        .await;
    assert_eq!(missing, json!({"found": false, "key": "nothing/here"}));
    k.ok(&c, "vox_memory_list", json!({})).await;
    k.ok(&c, "vox_memory_search", json!({"query": "deploy"}))
        .await;

    // Sessions.
    let s = k
        .ok(
            &c,
            "vox_session_create",
            json!({"title": "t", "metadata": {"agent": "a"}}),
        )
        .await;
    let id = s["session"]["id"].as_str().unwrap().to_owned();
    k.ok(
        &c,
        "vox_session_append",
        json!({"id": id, "role": "user", "content": "hi"}),
    )
    .await;
    k.ok(&c, "vox_session_get", json!({"id": id})).await;
    k.ok(&c, "vox_session_list", json!({})).await;
    k.ok(
        &c,
        "vox_session_close",
        json!({"id": id, "summary": "done"}),
    )
    .await;

    // Knowledge base and search.
    k.ok(
        &c,
        "vox_kb_ingest",
        json!({"text": "Rollback runbook: revert the blue-green switch.", "title": "runbook"}),
    )
    .await;
    let ingested = k
        .ok(&c, "vox_kb_ingest", json!({"path": "docs/*.md"}))
        .await;
    assert_eq!(ingested["ingested"], 1);
    k.ok(&c, "vox_kb_query", json!({"query": "rollback"})).await;
    let list = k.ok(&c, "vox_kb_list", json!({})).await;
    let best = k
        .ok(&c, "vox_knowledge_query", json!({"query": "blue-green"}))
        .await;
    let sources: BTreeSet<&str> = best["answers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["source"].as_str().unwrap())
        .collect();
    assert_eq!(sources, BTreeSet::from(["kb", "memory"]), "{best}");
    let none = k
        .ok(&c, "vox_knowledge_query", json!({"query": "zebra"}))
        .await;
    assert_eq!(none["best"], Value::Null);
    k.ok(
        &c,
        "vox_kb_delete",
        json!({"id": list["documents"][0]["id"]}),
    )
    .await;
    k.ok(&c, "vox_search_text", json!({"query": "RetryPolicy"}))
        .await;
    k.ok(
        &c,
        "vox_search_structural",
        json!({"query": "parse_config"}),
    )
    .await;

    // Attention.
    k.ok(&c, "vox_attention_history", json!({})).await;
    k.ok(&c, "vox_budget_status", json!({})).await;
    let set = k
        .ok(
            &c,
            "vox_trust_override",
            json!({"agent": "a", "level": "high", "reason": "r"}),
        )
        .await;
    assert_eq!(set["override"]["level"], "high");
    let cleared = k.ok(&c, "vox_trust_override", json!({"agent": "a"})).await;
    assert_eq!(cleared["cleared"], true);
    k.ok(&c, "vox_attention_summary", json!({})).await;
    k.ok(&c, "vox_cost_history", json!({})).await;
    k.ok(&c, "vox_attention_reset", json!({})).await;

    // Repository views.
    k.ok(&c, "vox_repo_status", json!({})).await;
    k.ok(&c, "vox_repo_log", json!({})).await;
    let diff = k.ok(&c, "vox_repo_diff", json!({})).await;
    assert_eq!(diff["files"][0]["path"], "src/lib.rs");
    k.ok(&c, "vox_repo_show", json!({})).await;
    k.ok(&c, "vox_repo_tree", json!({"recursive": true})).await;
    k.ok(&c, "vox_repo_file", json!({"path": "src/lib.rs"}))
        .await;

    // The language tools, both on a path and on source text.
    k.ok(&c, "vox_check", json!({"path": "tools"})).await;
    k.ok(&c, "vox_check", json!({"source": "fn f() { nope }"}))
        .await;
    k.ok(&c, "vox_validate_source", json!({"source": PICK}))
        .await;
    let tested = k
        .ok(&c, "vox_test", json!({"path": "tools/pick.vox"}))
        .await;
    assert_eq!(tested["passed"], 1, "{tested}");
    let broken = k.ok(&c, "vox_test", json!({"source": "fn f( {"})).await;
    assert_eq!(broken["files"][0]["compiled"], false);
    k.ok(&c, "vox_grammar", json!({})).await;
    k.ok(
        &c,
        "vox_compiler_introspect",
        json!({"path": "tools/pick.vox"}),
    )
    .await;
    k.ok(&c, "vox_compiler_introspect", json!({"source": PICK}))
        .await;
    k.ok(&c, "vox_workspace_mcp_refresh", json!({})).await;

    // Skills, with the macro tool (a dynamic tool with an output schema).
    k.ok(&c, "vox_skill_install", json!({"path": "src-skills/demo"}))
        .await;
    k.ok(&c, "vox_skill_list", json!({})).await;
    let info = k.ok(&c, "vox_skill_info", json!({"id": "demo"})).await;
    assert_eq!(info["license"], "MIT");
    k.ok(&c, "vox_skill_search", json!({"query": "demonstration"}))
        .await;
    let active = k.ok(&c, "vox_skill_use", json!({"id": "demo"})).await;
    assert_eq!(active["active"], "demo");
    k.list(&c).await;
    let instructions = k.ok(&c, "vox_skill_demo", json!({})).await;
    assert_eq!(instructions["skill"], "demo");
    let mut unexercised = BTreeMap::new();
    match vox_sandbox::probe() {
        Ok(_) => {
            let run = k
                .ok(
                    &c,
                    "vox_skill_run",
                    json!({"id": "demo", "command": ["./scripts/ok.sh"]}),
                )
                .await;
            assert_eq!(run["stdout"], "ok\n", "{run}");
        }
        Err(e) => {
            // Where the kernel cannot confine a run, the tool refuses: nothing to validate.
            let e2 = err(
                &c,
                "vox_skill_run",
                json!({"id": "demo", "command": ["true"]}),
            )
            .await;
            assert_eq!(e2["code"], "unavailable", "{e2}");
            unexercised.insert("vox_skill_run", format!("no sandbox here: {e}"));
        }
    }
    let left = k.ok(&c, "vox_skill_use", json!({"id": null})).await;
    assert_eq!(left, json!({"active": null}));
    k.ok(&c, "vox_skill_uninstall", json!({"id": "demo"})).await;
    let forgotten = k
        .ok(&c, "vox_memory_forget", json!({"key": "project/deploy"}))
        .await;
    assert_eq!(forgotten["forgotten"], true);

    orchestrator_tools(&mut k, &c).await;
    model_tools(&mut k, &c).await;
    mesh_tools(&mut k, &c).await;
    // Embedded, there is no other node to hand work to.
    let e = err(
        &c,
        "vox_mesh_dispatch",
        json!({"node": "NX", "tool": "vox_mesh_nodes"}),
    )
    .await;
    assert_eq!(e["code"], "unavailable", "{e}");
    unexercised.insert(
        "vox_mesh_dispatch",
        "needs a second node over NATS: tests/python/test_mesh_nats.py".into(),
    );

    // Upstream servers and the audit trail: none declared here, so status lists none and an
    // approval names what is missing; the trail has this test's calls.
    let upstream = k.ok(&c, "vox_upstream_status", json!({})).await;
    assert_eq!(upstream["servers"], json!([]));
    let e = err(&c, "vox_upstream_approve", json!({"server": "none"})).await;
    assert_eq!(e["code"], "not_found", "{e}");
    unexercised.insert(
        "vox_upstream_approve",
        "needs an upstream server: crates/vox-tools-upstream/tests/faults.rs".into(),
    );
    let trail = k.ok(&c, "vox_audit_query", json!({"limit": 5})).await;
    assert_eq!(
        trail["records"].as_array().map(Vec::len),
        Some(5),
        "{trail}"
    );

    let missed: Vec<&String> = catalog
        .iter()
        .filter(|n| !k.exercised.contains(*n) && !unexercised.contains_key(n.as_str()))
        .collect();
    assert!(
        missed.is_empty(),
        "dev catalog tools not exercised: {missed:?}"
    );
    if !unexercised.is_empty() {
        eprintln!("exercised only on their error path: {unexercised:?}");
    }
    c.cancel().await.unwrap();
}

/// Every orchestrator tool, as the operator, over one story: two agents, a plan, a lock
/// conflict, a clarification, a handoff, an approval, a drain, an emergency stop.
/// The models, research and research-publish tools, against the scripted model.
async fn model_tools(k: &mut Checker, c: &Client) {
    k.ok(c, "vox_list_models", json!({})).await;
    k.ok(c, "vox_suggest_model", json!({"task_category": "chat"}))
        .await;
    k.ok(c, "vox_capability_model_manifest", json!({})).await;
    k.ok(c, "vox_credentials_status", json!({})).await;
    k.ok(c, "vox_set_active_model", json!({"model_id": "env/m"}))
        .await;
    let active = k.ok(c, "vox_get_active_model", json!({})).await;
    assert_eq!(active["model_id"], "env/m", "{active}");
    k.ok(
        c,
        "vox_benchmark_record",
        json!({"model_id": "env/m", "category": "chat", "score": 0.5}),
    )
    .await;
    k.ok(c, "vox_benchmark_list", json!({})).await;
    k.ok(c, "vox_spawn_agent", json!({"agent_id": "modeler"}))
        .await;
    k.ok(
        c,
        "vox_set_model",
        json!({"agent_id": "modeler", "model_id": "env/m"}),
    )
    .await;
    let chat = k
        .ok(c, "vox_chat_message", json!({"message": "hello"}))
        .await;
    assert_eq!(chat["text"], "hello from the model", "{chat}");
    k.ok(c, "vox_chat_history", json!({})).await;
    let run = k
        .ok(
            c,
            "vox_research_run",
            json!({"question": "What does parse_config return?"}),
        )
        .await;
    assert_eq!(run["kept"].as_array().unwrap().len(), 1, "{run}");
    let id = run["run"]["id"].clone();
    k.ok(
        c,
        "vox_research_persist_claims",
        json!({"question": "q", "claims": [{"text": "t", "citations": [{"file": "src/lib.rs", "lines": [1, 1]}]}]}),
    )
    .await;
    k.ok(c, "vox_research_status", json!({"run_id": id})).await;
    k.ok(c, "vox_research_list", json!({})).await;
    k.ok(c, "vox_research_evaluate", json!({"run_id": id}))
        .await;
    let draft = k.ok(c, "vox_news_draft", json!({"run_id": id})).await;
    k.ok(c, "vox_news_approve", json!({"draft_id": draft["id"]}))
        .await;
    let sub = k
        .ok(
            c,
            "vox_news_publish",
            json!({"draft_id": draft["id"], "destination": "docs"}),
        )
        .await;
    assert_eq!(sub["state"], "published", "{sub}");
    k.ok(c, "vox_scientia_submissions", json!({})).await;
    k.ok(
        c,
        "vox_external_job_status",
        json!({"submission_id": sub["id"]}),
    )
    .await;
}

/// The embedded mesh's tools, as the operator (agent `modeler` exists: model_tools made it).
async fn mesh_tools(k: &mut Checker, c: &Client) {
    let sent = k
        .ok(c, "vox_a2a_send", json!({"to": "modeler", "body": "hi"}))
        .await;
    k.ok(c, "vox_a2a_broadcast", json!({"body": "all"})).await;
    let inbox = k
        .ok(c, "vox_a2a_inbox", json!({"agent_id": "modeler"}))
        .await;
    assert!(!inbox["messages"].as_array().unwrap().is_empty(), "{inbox}");
    k.ok(
        c,
        "vox_a2a_ack",
        json!({"agent_id": "modeler", "message_ids": [sent["message"]["id"]]}),
    )
    .await;
    k.ok(c, "vox_a2a_history", json!({})).await;
    k.ok(c, "vox_publish_message", json!({"topic": "t", "body": "b"}))
        .await;
    k.ok(c, "vox_mesh_queue_stats", json!({})).await;
    k.ok(c, "vox_mesh_nodes", json!({})).await;
    k.ok(c, "vox_populi_local_status", json!({})).await;
}

async fn orchestrator_tools(k: &mut Checker, c: &Client) {
    let a1 = k
        .ok(
            c,
            "vox_spawn_agent",
            json!({"agent_id": "a1", "role": "writer", "capacity": 2}),
        )
        .await;
    assert!(a1["token"].as_str().unwrap().starts_with("voxa_"), "{a1}");
    k.ok(c, "vox_spawn_agent", json!({"budget_tokens": 5000}))
        .await;
    let t = k
        .ok(
            c,
            "vox_submit_task",
            json!({"title": "build", "files": ["src/lib.rs"], "priority": 3}),
        )
        .await;
    let task = t["task"]["id"].as_i64().unwrap();
    assert_eq!(t["task"]["state"], "assigned", "{t}");
    k.ok(c, "vox_task_status", json!({"task_id": task})).await;
    k.ok(
        c,
        "vox_heartbeat",
        json!({"agent_id": "a1", "task_id": task}),
    )
    .await;
    k.ok(
        c,
        "vox_claim_file",
        json!({"agent_id": "a1", "path": "src/lib.rs", "task_id": task}),
    )
    .await;
    let held = k
        .ok(
            c,
            "vox_claim_file",
            json!({"agent_id": "agent-1", "path": "src/lib.rs"}),
        )
        .await;
    assert_eq!(held["outcome"], "held", "{held}");
    k.ok(c, "vox_conflicts", json!({})).await;
    k.ok(c, "vox_check_file_owner", json!({"path": "./src/lib.rs"}))
        .await;
    k.ok(c, "vox_my_files", json!({"agent_id": "a1"})).await;
    k.ok(c, "vox_lock_status", json!({})).await;
    k.ok(
        c,
        "vox_claim_file",
        json!({"agent_id": "a1", "path": "README.md"}),
    )
    .await;
    k.ok(
        c,
        "vox_transfer_file",
        json!({"agent_id": "a1", "path": "README.md", "to_agent": "agent-1"}),
    )
    .await;
    k.ok(
        c,
        "vox_release_file",
        json!({"agent_id": "agent-1", "path": "README.md"}),
    )
    .await;
    let plan = k
        .ok(
            c,
            "vox_plan",
            json!({"goal": "ship", "steps": [
                {"key": "test", "title": "test", "after": ["lint"]},
                {"key": "lint", "title": "lint"}
            ]}),
        )
        .await;
    let plan_id = plan["plan"]["id"].as_i64().unwrap();
    k.ok(c, "vox_plan_status", json!({"plan_id": plan_id}))
        .await;
    k.ok(
        c,
        "vox_replan",
        json!({"plan_id": plan_id, "reason": "docs too", "add": [{"key": "docs", "title": "docs", "after": ["lint"]}]}),
    )
    .await;
    let q = k
        .ok(
            c,
            "vox_ask_clarification",
            json!({"question": "Which branch?", "options": ["main", "next"], "gates": [task]}),
        )
        .await;
    k.ok(c, "vox_feedback_list", json!({})).await;
    k.ok(
        c,
        "vox_resolve_feedback",
        json!({"id": q["id"], "action": "answer", "answer": "main"}),
    )
    .await;
    let h = k
        .ok(
            c,
            "vox_agent_handoff",
            json!({"agent_id": "a1", "to_agent": "agent-1", "task_id": task, "summary": "finish it", "context": "tests pass"}),
        )
        .await;
    k.ok(
        c,
        "vox_handoff_lineage",
        json!({"handoff_id": h["handoff"]["id"]}),
    )
    .await;
    k.ok(
        c,
        "vox_complete_task",
        json!({"agent_id": "agent-1", "task_id": task, "result": "built"}),
    )
    .await;
    let lint = plan["plan"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["key"] == "lint")
        .unwrap()["task"]["id"]
        .clone();
    k.ok(
        c,
        "vox_reorder_task",
        json!({"task_id": lint, "priority": 9}),
    )
    .await;
    let owner = lint_owner(k, c, &lint).await;
    k.ok(
        c,
        "vox_fail_task",
        json!({"agent_id": owner, "task_id": lint, "reason": "flaky", "retry": true}),
    )
    .await;
    k.ok(c, "vox_queue_status", json!({})).await;
    k.ok(c, "vox_a2a_tasks", json!({})).await;
    k.ok(c, "vox_rebalance", json!({})).await;
    k.ok(c, "vox_drain_agent", json!({"agent_id": "a1"})).await;
    k.ok(c, "vox_pause_agent", json!({"agent_id": "a1"})).await;
    k.ok(c, "vox_resume_agent", json!({"agent_id": "a1"})).await;
    k.ok(
        c,
        "vox_set_agent_budget",
        json!({"agent_id": "a1", "tokens": 1000}),
    )
    .await;
    k.ok(c, "vox_agent_status", json!({})).await;
    k.ok(c, "vox_agent_events", json!({"agent_id": "a1"})).await;
    k.ok(c, "vox_poll_events", json!({"subject": "task"})).await;
    k.ok(c, "vox_orchestrator_status", json!({})).await;
    k.ok(
        c,
        "vox_add_approval_allowlist_entry",
        json!({"tool": "vox_memory_*", "note": "memories are cheap"}),
    )
    .await;
    k.ok(c, "vox_list_approval_allowlist", json!({})).await;
    k.ok(c, "vox_pending_approvals", json!({"all": true})).await;
    // Nothing waits yet: deciding approval 1 is a clear not-found, on the error path.
    let e = err(
        c,
        "vox_resolve_approval",
        json!({"approval_id": 1, "decision": "approve"}),
    )
    .await;
    assert_eq!(e["code"], "not_found", "{e}");
    k.exercised.insert("vox_resolve_approval".into());
    let other = k.ok(c, "vox_submit_task", json!({"title": "later"})).await;
    k.ok(
        c,
        "vox_cancel_task",
        json!({"task_id": other["task"]["id"], "reason": "not needed"}),
    )
    .await;
    let stop = k
        .ok(c, "vox_emergency_stop", json!({"reason": "drill"}))
        .await;
    assert!(
        !stop["paused_agents"].as_array().unwrap().is_empty(),
        "{stop}"
    );
    let gone = k.ok(c, "vox_retire_agent", json!({"agent_id": "a1"})).await;
    assert_eq!(gone["agent"]["state"], "retired", "{gone}");
}

/// Who holds task `id` now.
async fn lint_owner(k: &mut Checker, c: &Client, id: &Value) -> Value {
    let s = k.ok(c, "vox_task_status", json!({"task_id": id})).await;
    s["task"]["owner"].clone()
}

#[tokio::test]
async fn null_for_an_optional_argument_works_like_leaving_it_out() {
    let ws = workspace();
    let c = ws.client(&[]).await;
    ok(
        &c,
        "vox_memory_store",
        json!({"key": "a/b", "value": "v", "tags": null}),
    )
    .await;
    for (name, args, nulls) in [
        (
            "vox_memory_list",
            json!({}),
            json!({"prefix": null, "tag": null, "cursor": null, "limit": null}),
        ),
        (
            "vox_repo_log",
            json!({}),
            json!({"rev": null, "path": null, "limit": null, "skip": null}),
        ),
        (
            "vox_repo_tree",
            json!({"path": "src"}),
            json!({"path": "src", "rev": null, "recursive": null, "limit": null}),
        ),
        (
            "vox_check",
            json!({"path": "tools"}),
            json!({"path": "tools", "source": null, "name": null}),
        ),
    ] {
        assert_eq!(
            ok(&c, name, args.clone()).await,
            ok(&c, name, nulls.clone()).await,
            "{name}: {args} and {nulls}"
        );
    }
    // A required argument given as null is still refused, naming it.
    let e = err(&c, "vox_memory_recall", json!({"key": null})).await;
    assert_eq!(e["code"], "invalid_arguments");
    assert!(e["message"].as_str().unwrap().contains("key"), "{e}");
    // A workspace tool's Option parameter may be left out or null.
    for args in [json!({"x": 1}), json!({"x": 1, "y": null})] {
        assert_eq!(ok(&c, "pick", args).await, json!({"result": 1}));
    }
    assert_eq!(
        ok(&c, "pick", json!({"x": 1, "y": 5})).await,
        json!({"result": 5})
    );
    c.cancel().await.unwrap();
}
