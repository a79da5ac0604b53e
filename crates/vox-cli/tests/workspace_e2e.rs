//! End to end: federated `.vox` workspace tools and resources through `vox mcp`.

mod common;
use common::*;
use rmcp::model::ReadResourceRequestParams;
use serde_json::{Value, json};

const TOOLS: &str = "@tool \"Add two numbers\"\nfn add(a: int, b: int = 1) to int {\n    a + b\n}\n\n@tool\nfn vox_memory_store() to str {\n    \"shadowed\"\n}\n\n@mcp.resource(\"docs://team\", \"Who is on the team\")\nfn team() to str {\n    \"Ada, Grace\"\n}\n";

fn workspace() -> Ws {
    let ws = Ws::new();
    std::fs::create_dir_all(ws.root().join("tools")).unwrap();
    std::fs::write(ws.root().join("tools/math.vox"), TOOLS).unwrap();
    std::fs::write(
        ws.root().join("tools/zz_dup.vox"),
        "@tool\nfn add(a: int) to int {\n    a * 100\n}\n",
    )
    .unwrap();
    std::fs::write(ws.root().join("tools/broken.vox"), "@tool\nfn oops( {\n").unwrap();
    ws
}

#[tokio::test]
async fn workspace_tools_are_callable_under_dev_and_advertised_only_on_request() {
    let ws = workspace();
    let c = ws.client(&[]).await;
    let names = tool_names(&c).await;
    assert!(
        !names.contains(&"add".to_owned()),
        "not advertised without VOX_MCP_WORKSPACE_TOOLS=1"
    );
    assert_eq!(ok(&c, "add", json!({"a": 41})).await, json!({"result": 42}));
    let e = err(&c, "add", json!({"b": 2})).await;
    assert_eq!(e["code"], "invalid_arguments");
    // The static catalog wins: vox_memory_store is the catalog's tool.
    let r = ok(&c, "vox_memory_store", json!({"key": "k", "value": "v"})).await;
    assert_eq!(r["stored"], true);
    let res = c.list_all_resources().await.unwrap();
    let uris: Vec<&str> = res.iter().map(|r| r.uri.as_str()).collect();
    // Workspace resources first, then the skill index (no skill is installed here), then the
    // orchestrator's events.
    assert_eq!(
        uris,
        [
            "docs://team",
            "skill://index.json",
            "vox://orchestrator/events"
        ]
    );
    let read = c
        .read_resource(ReadResourceRequestParams::new("docs://team"))
        .await
        .unwrap();
    assert!(format!("{read:?}").contains("Ada, Grace"));
    let report = ok(&c, "vox_workspace_mcp_refresh", json!({})).await;
    assert_eq!(report["tool_count"], 1);
    assert_eq!(report["resource_count"], 1);
    assert_eq!(report["shadowed"][0]["name"], "vox_memory_store");
    assert_eq!(
        report["duplicate_tools"][0],
        json!({"name": "add", "file": "tools/zz_dup.vox", "kept_from": "tools/math.vox"})
    );
    assert_eq!(report["errors"][0]["file"], "tools/broken.vox");
    assert!(
        report["errors"][0]["diagnostic"]
            .as_str()
            .unwrap()
            .contains("broken.vox:")
    );
    // A new file is picked up by the next refresh.
    std::fs::write(
        ws.root().join("tools/more.vox"),
        "@tool\nfn twice(x: int) to int {\n    x * 2\n}\n",
    )
    .unwrap();
    let report = ok(&c, "vox_workspace_mcp_refresh", json!({})).await;
    assert_eq!(
        (report["tool_count"].as_u64(), report["changed"].as_bool()),
        (Some(2), Some(true))
    );
    assert_eq!(
        ok(&c, "twice", json!({"x": 21})).await,
        json!({"result": 42})
    );
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn workspace_tools_are_advertised_with_their_source_when_asked() {
    let ws = workspace().with_env("VOX_MCP_WORKSPACE_TOOLS", "1");
    let c = ws.client(&[]).await;
    let tools = tools(&c).await;
    let add = tools.iter().find(|t| t.name == "add").expect("advertised");
    let meta = add.meta.as_ref().unwrap();
    assert_eq!(
        (meta["vox_source"].as_str(), meta["vox_file"].as_str()),
        (Some("workspace"), Some("tools/math.vox"))
    );
    assert_eq!(add.input_schema["required"], json!(["a"]));
    // Static tools first (sorted), then workspace tools (sorted): a deterministic order.
    assert_eq!(tools.last().unwrap().name, "add");
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn named_profiles_serve_no_workspace_tools() {
    let ws = workspace().with_env("VOX_MCP_WORKSPACE_TOOLS", "1");
    let c = ws.client(&["--profile", "lang"]).await;
    assert!(!tool_names(&c).await.contains(&"add".to_owned()));
    assert_eq!(
        err(&c, "add", json!({"a": 1})).await["code"],
        "tool_not_in_profile"
    );
    assert!(c.list_all_resources().await.unwrap().is_empty());
    c.cancel().await.unwrap();
}

#[derive(Clone)]
struct Watcher(tokio::sync::mpsc::UnboundedSender<&'static str>);

impl rmcp::ClientHandler for Watcher {
    async fn on_tool_list_changed(
        &self,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        let _ = self.0.send("tools");
    }
    async fn on_resource_list_changed(
        &self,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        let _ = self.0.send("resources");
    }
}

#[tokio::test]
async fn a_refresh_that_changes_the_set_notifies_connected_clients() {
    use rmcp::ServiceExt;
    let ws = workspace();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let transport = rmcp::transport::TokioChildProcess::new(ws.mcp_command(&[])).unwrap();
    let c = Watcher(tx).serve(transport).await.unwrap();
    let call = |name: &'static str| rmcp::model::CallToolRequestParams::new(name);
    c.call_tool(call("vox_workspace_mcp_refresh"))
        .await
        .unwrap();
    // The first refresh after the lazy scan may or may not change the set; drain what came.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    while rx.try_recv().is_ok() {}
    c.call_tool(call("vox_workspace_mcp_refresh"))
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(rx.try_recv().is_err(), "an unchanged refresh sends nothing");
    std::fs::write(
        ws.root().join("tools/new.vox"),
        "@tool\nfn fresh() to int {\n    7\n}\n",
    )
    .unwrap();
    c.call_tool(call("vox_workspace_mcp_refresh"))
        .await
        .unwrap();
    let mut got = vec![];
    while got.len() < 2 {
        match tokio::time::timeout(std::time::Duration::from_secs(5), rx.recv()).await {
            Ok(Some(kind)) => got.push(kind),
            _ => break,
        }
    }
    got.sort();
    assert_eq!(got, ["resources", "tools"]);
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn a_new_vox_file_is_picked_up_by_the_watcher() {
    use rmcp::ServiceExt;
    let ws = workspace();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let transport = rmcp::transport::TokioChildProcess::new(ws.mcp_command(&[])).unwrap();
    let c = Watcher(tx).serve(transport).await.unwrap();
    // Make the daemon scan once, so the change below is a change.
    let first = c
        .call_tool(
            rmcp::model::CallToolRequestParams::new("add")
                .with_arguments(json!({"a": 1}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_eq!(first.structured_content, Some(json!({"result": 2})));
    std::fs::write(
        ws.root().join("tools/watched.vox"),
        "@tool\nfn watched() to int {\n    9\n}\n",
    )
    .unwrap();
    let kind = tokio::time::timeout(std::time::Duration::from_secs(10), rx.recv())
        .await
        .expect("a notification")
        .unwrap();
    assert!(kind == "tools" || kind == "resources");
    let r = c
        .call_tool(rmcp::model::CallToolRequestParams::new("watched"))
        .await
        .unwrap();
    assert_eq!(r.structured_content, Some(json!({"result": 9})));
    c.cancel().await.unwrap();
}

/// `vox mcp` answers a repeated `tools/list` from the encoded first answer (`list_cache`): the
/// answers are the same, and a change reaches the next list once the client is told of it.
#[tokio::test]
async fn repeated_lists_are_answered_alike_and_a_change_reaches_the_next_one() {
    use rmcp::ServiceExt;
    let ws = workspace()
        .with_env("VOX_MCP_WORKSPACE_TOOLS", "1")
        .with_env("VOX_WORKSPACE_WATCH", "0");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let transport = rmcp::transport::TokioChildProcess::new(ws.mcp_command(&[])).unwrap();
    let c = Watcher(tx).serve(transport).await.unwrap();
    let first = c.list_all_tools().await.unwrap();
    assert!(first.iter().any(|t| t.name == "add"));
    for _ in 0..3 {
        assert_eq!(c.list_all_tools().await.unwrap(), first);
    }
    std::fs::write(
        ws.root().join("tools/new.vox"),
        "@tool\nfn fresh() to int {\n    7\n}\n",
    )
    .unwrap();
    c.call_tool(rmcp::model::CallToolRequestParams::new(
        "vox_workspace_mcp_refresh",
    ))
    .await
    .unwrap();
    loop {
        match tokio::time::timeout(std::time::Duration::from_secs(10), rx.recv()).await {
            Ok(Some("tools")) => break,
            Ok(Some(_)) => continue,
            other => panic!("no tools/list_changed: {other:?}"),
        }
    }
    let after = c.list_all_tools().await.unwrap();
    assert!(after.iter().any(|t| t.name == "fresh"), "{after:?}");
    assert_eq!(after.len(), first.len() + 1);
    assert_eq!(c.list_all_tools().await.unwrap(), after);
    c.cancel().await.unwrap();

    // The 2026-07-28 era's answers (cache hints, no legacy stripping) are kept apart and alike.
    let m = ws.modern_client(&[]).await;
    let modern = m.list_all_tools().await.unwrap();
    assert!(modern.iter().any(|t| t.name == "fresh"));
    assert_eq!(m.list_all_tools().await.unwrap(), modern);
    m.cancel().await.unwrap();
}

/// `content.*` values: a tool answers with MCP content blocks (image, audio, embedded text and
/// binary resources, a resource link, mixed lists) instead of a JSON value.
#[tokio::test]
async fn a_vox_tool_answers_with_content_blocks() {
    let ws = workspace();
    std::fs::write(
        ws.root().join("tools/media.vox"),
        r#"let PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

@tool "An image"
fn picture() {
    content.image(PNG, "image/png")
}

@tool "Text and data"
fn counted() {
    [content.text("Found 2"), content.data({count: 2, names: ["a", "b"]})]
}

@tool "Data alone"
fn bare() {
    content.data(7)
}

@tool "Two results"
fn twice() {
    [content.data(1), content.data(2)]
}

@tool "Several kinds"
fn mixed() {
    [
        content.text("Here:"),
        content.image(PNG, "image/png"),
        content.audio("UklGRiQAAABXQVZF", "audio/wav"),
        content.resource("test://data", "{\"a\":1}", "application/json"),
        content.blob("test://bin", "AAEC", "application/octet-stream"),
        content.link("file:///README.md", "README", "text/markdown"),
    ]
}

@tool "A bad MIME type"
fn bad() {
    content.image(PNG, "png")
}

@mcp.resource("test://pixel", "One red pixel")
fn pixel() to Content {
    content.blob("test://pixel", PNG, "image/png")
}
"#,
    )
    .unwrap();
    let c = ws.client(&[]).await;
    let call = |name: &'static str| c.call_tool(rmcp::model::CallToolRequestParams::new(name));
    // `content.data` is the structured result beside the blocks; alone, its JSON is the text.
    let r = call("counted").await.unwrap();
    assert_ne!(r.is_error, Some(true));
    assert_eq!(
        r.structured_content,
        Some(json!({"count": 2, "names": ["a", "b"]}))
    );
    let v = serde_json::to_value(&r.content).unwrap();
    assert_eq!(v, json!([{"type": "text", "text": "Found 2"}]));
    let r = call("bare").await.unwrap();
    assert_eq!(r.structured_content, Some(json!({"result": 7})));
    assert_eq!(
        serde_json::to_value(&r.content).unwrap(),
        json!([{"type": "text", "text": "7"}])
    );
    let r = call("twice").await.unwrap();
    assert_eq!(r.is_error, Some(true));
    let text = serde_json::to_string(&r.content).unwrap();
    assert!(text.contains("more than one content.data"), "{text}");
    let r = call("picture").await.unwrap();
    assert_ne!(r.is_error, Some(true));
    let v = serde_json::to_value(&r.content).unwrap();
    assert_eq!(v[0]["type"], "image");
    assert_eq!(v[0]["mimeType"], "image/png");
    assert!(v[0]["data"].as_str().unwrap().starts_with("iVBOR"));
    assert_eq!(r.structured_content, None);
    let r = call("mixed").await.unwrap();
    let v = serde_json::to_value(&r.content).unwrap();
    let kinds: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "text",
            "image",
            "audio",
            "resource",
            "resource",
            "resource_link"
        ]
    );
    assert_eq!(v[3]["resource"]["text"], "{\"a\":1}");
    assert_eq!(v[4]["resource"]["blob"], "AAEC");
    assert_eq!(v[5]["uri"], "file:///README.md");
    let r = call("bad").await.unwrap();
    assert_eq!(r.is_error, Some(true));
    let text = serde_json::to_string(&r.content).unwrap();
    assert!(text.contains("not a MIME type"), "{text}");
    let read = c
        .read_resource(ReadResourceRequestParams::new("test://pixel"))
        .await
        .unwrap();
    let v = serde_json::to_value(&read.contents).unwrap();
    assert_eq!(v[0]["mimeType"], "image/png");
    assert!(v[0]["blob"].as_str().unwrap().starts_with("iVBOR"), "{v}");
    let read = c
        .read_resource(ReadResourceRequestParams::new("docs://team"))
        .await
        .unwrap();
    let v = serde_json::to_value(&read.contents).unwrap();
    assert_eq!(
        (v[0]["mimeType"].as_str(), v[0]["text"].as_str()),
        (Some("text/plain"), Some("Ada, Grace"))
    );
    // The listing says text/plain only for a resource that returns `str`; a `Content` one's
    // type is known when it is read.
    let listed = serde_json::to_value(c.list_all_resources().await.unwrap()).unwrap();
    let mime = |uri: &str| {
        listed
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["uri"] == uri)
            .map(|r| r.get("mimeType").cloned())
    };
    assert_eq!(
        mime("docs://team"),
        Some(Some(json!("text/plain"))),
        "{listed}"
    );
    assert_eq!(mime("test://pixel"), Some(None), "{listed}");
    c.cancel().await.unwrap();
}

/// `@mcp.prompt` functions are MCP prompts: arguments from the signature, a string or content
/// blocks as messages, first file wins.
#[tokio::test]
async fn vox_prompts_are_listed_and_got_with_their_arguments() {
    let ws = workspace();
    std::fs::write(
        ws.root().join("tools/prompts.vox"),
        "@mcp.prompt \"Review a file\"\nfn review(path: str, focus: Option[str]) to str {\n    match focus {\n        Some(f) => \"Review {path} for {f}\"\n        None => \"Review {path}\"\n    }\n}\n\n@mcp.prompt\nfn two() to list[Content] {\n    [content.text(\"one\"), content.resource(\"test://r\", \"two\")]\n}\n\n@complete(\"path\")\nfn paths(typed: str) to list[str] {\n    [\"README.md\", \"src/lib.rs\", \"src/main.rs\"].filter(p => p.starts_with(typed))\n}\n",
    )
    .unwrap();
    std::fs::write(
        ws.root().join("tools/zz_prompts.vox"),
        "@mcp.prompt \"A second review\"\nfn review() to str {\n    \"shadowed\"\n}\n",
    )
    .unwrap();
    let c = ws.client(&[]).await;
    let listed = c.list_all_prompts().await.unwrap();
    let v = serde_json::to_value(&listed).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 2, "{v}");
    let review = v
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "review")
        .unwrap();
    assert_eq!(review["description"], "Review a file");
    assert_eq!(
        review["arguments"],
        json!([{"name": "path", "required": true}, {"name": "focus", "required": false}])
    );
    let get = |name: &str, args: Value| {
        let mut p = rmcp::model::GetPromptRequestParams::new(name);
        if let Value::Object(o) = args {
            p = p.with_arguments(o);
        }
        c.get_prompt(p)
    };
    let r = serde_json::to_value(get("review", json!({"path": "a.rs"})).await.unwrap()).unwrap();
    assert_eq!(r["messages"][0]["role"], "user");
    assert_eq!(r["messages"][0]["content"]["text"], "Review a.rs");
    let r = serde_json::to_value(
        get("review", json!({"path": "a.rs", "focus": "bugs"}))
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(r["messages"][0]["content"]["text"], "Review a.rs for bugs");
    let r = serde_json::to_value(get("two", json!({})).await.unwrap()).unwrap();
    assert_eq!(r["messages"][1]["content"]["resource"]["text"], "two");
    let e = get("review", json!({})).await.unwrap_err().to_string();
    assert!(e.contains("path"), "{e}");
    let e = get("nope", json!({})).await.unwrap_err().to_string();
    assert!(e.contains("no prompt nope"), "{e}");
    // `@complete("path")` of the prompt's file suggests its values; `focus` has none.
    let complete = |arg: &str, value: &str| {
        c.complete(rmcp::model::CompleteRequestParams::new(
            rmcp::model::Reference::for_prompt("review"),
            rmcp::model::ArgumentInfo::new(arg, value),
        ))
    };
    let got = complete("path", "src/").await.unwrap();
    assert_eq!(got.completion.values, ["src/lib.rs", "src/main.rs"]);
    assert_eq!(got.completion.total, Some(2));
    assert!(
        complete("focus", "b")
            .await
            .unwrap()
            .completion
            .values
            .is_empty()
    );
    let report = ok(&c, "vox_workspace_mcp_refresh", json!({})).await;
    assert_eq!(report["prompt_count"], 2, "{report}");
    assert_eq!(
        report["duplicate_prompts"][0]["file"],
        "tools/zz_prompts.vox"
    );
    c.cancel().await.unwrap();
}

/// Records `notifications/resources/updated`.
#[derive(Clone)]
struct Updates(tokio::sync::mpsc::UnboundedSender<String>);

impl rmcp::ClientHandler for Updates {
    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        let _ = self.0.send(params.uri);
    }
}

/// `resources/subscribe`: a change to the resource's file sends `resources/updated` to the
/// clients that subscribed, until they unsubscribe; an unknown URI is refused.
#[tokio::test]
#[allow(deprecated)] // the 2025 era's resources/subscribe (2026-07-28 subscribes on listen streams)
async fn a_subscribed_resource_is_announced_when_its_file_changes() {
    use rmcp::ServiceExt;
    let ws = workspace().with_env("VOX_WORKSPACE_WATCH", "0");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let transport = rmcp::transport::TokioChildProcess::new(ws.mcp_command(&[])).unwrap();
    let c = Updates(tx).serve(transport).await.unwrap();
    let refresh = || {
        c.call_tool(rmcp::model::CallToolRequestParams::new(
            "vox_workspace_mcp_refresh",
        ))
    };
    refresh().await.unwrap();
    let sub = |uri: &str| c.subscribe(rmcp::model::SubscribeRequestParams::new(uri));
    assert!(sub("docs://nope").await.is_err());
    sub("docs://team").await.unwrap();
    std::fs::write(
        ws.root().join("tools/math.vox"),
        TOOLS.replace("Ada, Grace", "Ada, Grace, Linus"),
    )
    .unwrap();
    refresh().await.unwrap();
    let uri = tokio::time::timeout(std::time::Duration::from_secs(5), rx.recv())
        .await
        .expect("resources/updated")
        .unwrap();
    assert_eq!(uri, "docs://team");
    // An unchanged refresh announces nothing; after unsubscribing, a change neither.
    refresh().await.unwrap();
    c.unsubscribe(rmcp::model::UnsubscribeRequestParams::new("docs://team"))
        .await
        .unwrap();
    std::fs::write(ws.root().join("tools/math.vox"), TOOLS).unwrap();
    refresh().await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(rx.try_recv().is_err());
    c.cancel().await.unwrap();
}

/// `@mcp.resource("notes://{id}")` with parameters is a resource template: listed by
/// `resources/templates/list`, read for every URI it matches.
#[tokio::test]
async fn a_resource_template_is_listed_and_reads_the_uris_it_matches() {
    let ws = workspace();
    std::fs::write(
        ws.root().join("tools/notes.vox"),
        "@mcp.resource(\"notes://{id}\", \"A note by id\")\nfn note(id: str) to str {\n    \"Note {id}\"\n}\n",
    )
    .unwrap();
    let c = ws.client(&[]).await;
    let t = c.list_all_resource_templates().await.unwrap();
    let v = serde_json::to_value(&t).unwrap();
    assert_eq!(v[0]["uriTemplate"], "notes://{id}", "{v}");
    assert_eq!(v[0]["description"], "A note by id");
    let listed = c.list_all_resources().await.unwrap();
    assert!(
        listed.iter().all(|r| r.uri != "notes://{id}"),
        "a template is not a resource"
    );
    let read = c
        .read_resource(ReadResourceRequestParams::new("notes://42"))
        .await
        .unwrap();
    assert!(format!("{read:?}").contains("Note 42"), "{read:?}");
    assert!(
        c.read_resource(ReadResourceRequestParams::new("notes://4/2"))
            .await
            .is_err()
    );
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn a_file_that_loops_forever_at_load_or_call_is_a_clear_error_and_serving_goes_on() {
    let ws = workspace();
    // A module constant whose initializer never ends, and a tool that never returns.
    std::fs::write(
        ws.root().join("tools/spin_load.vox"),
        "fn spin() to int {\n    let mut i = 0\n    loop {\n        i += 1\n    }\n    i\n}\n\nlet FOREVER = spin()\n\n@tool\nfn uses_forever() to int {\n    FOREVER\n}\n",
    )
    .unwrap();
    std::fs::write(
        ws.root().join("tools/spin_call.vox"),
        "@tool\nfn spin_call(n: int) to int {\n    let mut i = 0\n    loop {\n        i += n\n    }\n    i\n}\n",
    )
    .unwrap();
    let c = ws.client(&[]).await;
    let started = std::time::Instant::now();
    let report = ok(&c, "vox_workspace_mcp_refresh", json!({})).await;
    let e = err(&c, "spin_call", json!({"n": 1})).await;
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    let msg = e["message"].as_str().unwrap();
    assert!(msg.contains("spin_call"), "{e}");
    assert!(
        msg.contains("step") || msg.contains("time") || msg.contains("budget"),
        "{e}"
    );
    // Constants are evaluated per call under the call's budget: the file loads, and the call
    // that needs the endless constant ends with the budget error.
    assert_eq!(report["tool_count"], 3, "{report}");
    assert!(!report["errors"].to_string().contains("spin"), "{report}");
    let e = err(&c, "uses_forever", json!({})).await;
    assert!(e["message"].as_str().unwrap().contains("step limit"), "{e}");
    // Still serving.
    assert_eq!(ok(&c, "add", json!({"a": 1})).await, json!({"result": 2}));
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn modern_era_clients_get_list_changes_on_their_listen_stream() {
    let ws = workspace().with_env("VOX_WORKSPACE_WATCH", "0");
    let c = ws.modern_client(&[]).await;
    let mut filter = rmcp::model::SubscriptionFilter::new();
    filter.tools_list_changed = Some(true);
    filter.resources_list_changed = Some(true);
    let mut sub = c.listen(filter).await.expect("subscriptions/listen");
    ok(&c, "vox_workspace_mcp_refresh", json!({})).await;
    std::fs::write(
        ws.root().join("tools/new.vox"),
        "@tool\nfn fresh() to int {\n    7\n}\n",
    )
    .unwrap();
    let report = ok(&c, "vox_workspace_mcp_refresh", json!({})).await;
    assert_eq!(report["changed"], true, "{report}");
    let mut got = vec![];
    while got.len() < 2 {
        match tokio::time::timeout(std::time::Duration::from_secs(5), sub.next()).await {
            Ok(Ok(Some(n))) => got.push(format!("{n:?}")),
            other => panic!("no notification on the listen stream: {other:?} after {got:?}"),
        }
    }
    let text = got.join(" ");
    assert!(text.contains("ToolListChanged"), "{text}");
    assert!(text.contains("ResourceListChanged"), "{text}");
    // The client ends its stream; the server's listen handler returns at once.
    sub.cancel().await.unwrap();
    c.cancel().await.unwrap();
}

/// A 2026-07-28 client names the resources it follows on its listen stream: a change to one's
/// file is announced there, a change to another resource is not.
#[tokio::test]
async fn modern_era_clients_get_resource_updates_on_their_listen_stream() {
    let ws = workspace().with_env("VOX_WORKSPACE_WATCH", "0");
    std::fs::write(
        ws.root().join("tools/other.vox"),
        "@mcp.resource(\"docs://other\", \"Another\")\nfn other() to str {\n    \"one\"\n}\n",
    )
    .unwrap();
    let c = ws.modern_client(&[]).await;
    let mut filter = rmcp::model::SubscriptionFilter::new();
    filter.resource_subscriptions = Some(vec!["docs://team".into()]);
    let mut sub = c.listen(filter).await.expect("subscriptions/listen");
    ok(&c, "vox_workspace_mcp_refresh", json!({})).await;
    std::fs::write(
        ws.root().join("tools/other.vox"),
        "@mcp.resource(\"docs://other\", \"Another\")\nfn other() to str {\n    \"two\"\n}\n",
    )
    .unwrap();
    ok(&c, "vox_workspace_mcp_refresh", json!({})).await;
    std::fs::write(
        ws.root().join("tools/math.vox"),
        TOOLS.replace("Ada, Grace", "Ada, Grace, Linus"),
    )
    .unwrap();
    ok(&c, "vox_workspace_mcp_refresh", json!({})).await;
    let n = match tokio::time::timeout(std::time::Duration::from_secs(5), sub.next()).await {
        Ok(Ok(Some(n))) => format!("{n:?}"),
        other => panic!("no notification on the listen stream: {other:?}"),
    };
    assert!(
        n.contains("ResourceUpdated") && n.contains("docs://team"),
        "{n}"
    );
    assert!(!n.contains("docs://other"), "{n}");
    sub.cancel().await.unwrap();
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn a_modern_client_that_disconnects_with_an_open_listen_stream_does_not_hold_vox_mcp() {
    let ws = workspace();
    let c = ws.modern_client(&[]).await;
    let mut filter = rmcp::model::SubscriptionFilter::new();
    filter.tools_list_changed = Some(true);
    let sub = c.listen(filter).await.expect("subscriptions/listen");
    // One more round trip: the stream is established on the server by then. (A client that
    // hangs up within the same instant it opens a stream can still catch rmcp between its
    // acknowledgment and `listen`; `vox mcp` then exits after rmcp's 5 s drain.)
    tool_names(&c).await;
    let started = std::time::Instant::now();
    // Close without cancelling the stream: stdin ends, and `vox mcp` must exit well before the
    // child-process transport's 3 s kill deadline.
    std::mem::forget(sub);
    c.cancel().await.unwrap();
    assert!(
        started.elapsed() < std::time::Duration::from_millis(2500),
        "took {:?}",
        started.elapsed()
    );
}
