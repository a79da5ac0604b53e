//! End to end: skills through `vox mcp` with the rmcp client: discovery, install, search,
//! resources, macro tools, activation and the allowlist, bad input, and named profiles.

mod common;
use common::*;
use rmcp::model::ReadResourceRequestParams;
use serde_json::json;
use std::path::Path;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

const GIT_HELPER: &str = "---\nname: git-helper\ndescription: Find the commit that broke a test with git bisect.\nlicense: Apache-2.0\nmetadata:\n  vox-tools: vox_memory_* vox_repo_status\n  tags: git, regression\n---\n# Bisecting\nRun `git bisect start`, mark good and bad commits, then `git bisect run` a test script.\n";

/// A workspace with a skill to install, a TOML skill and a broken one already in the store, and
/// a skill in the user's home root.
fn workspace() -> Ws {
    let ws = Ws::new();
    write(
        &ws.root().join("src-skills/git-helper/SKILL.md"),
        GIT_HELPER,
    );
    let script = ws.root().join("src-skills/git-helper/scripts/check.sh");
    write(&script, "#!/bin/sh\nexit 0\n");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    write(
        &ws.root().join(".vox/skills/release-notes/SKILL.md"),
        "+++\nname = \"release-notes\"\ndescription = \"Draft release notes from merged changes.\"\n[metadata]\ntags = [\"docs\", \"release\"]\n+++\nCollect the merged changes and group them by area.\n",
    );
    write(
        &ws.root().join(".vox/skills/broken/SKILL.md"),
        "---\nname: broken\n---\nno description\n",
    );
    write(
        &ws.home.path().join("skills/home-skill/SKILL.md"),
        "---\nname: home-skill\ndescription: A skill from the user's home.\n---\nHello from home.\n",
    );
    ws
}

#[tokio::test]
async fn install_search_resources_macro_tools_and_uninstall() {
    let ws = workspace();
    let c = ws.client(&[]).await;
    let list = ok(&c, "vox_skill_list", json!({})).await;
    let ids: Vec<&str> = list["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["home-skill", "release-notes"]);
    assert_eq!(list["skills"][0]["origin"], "home");
    assert_eq!(list["skills"][1]["format"], "toml");
    let errors = list["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0]["message"]
            .as_str()
            .unwrap()
            .contains("`description` is required")
    );

    let installed = ok(
        &c,
        "vox_skill_install",
        json!({"path": "src-skills/git-helper"}),
    )
    .await;
    assert_eq!(installed["installed"]["id"], "git-helper");
    assert_eq!(
        installed["installed"]["tools"],
        json!(["vox_memory_*", "vox_repo_status"])
    );
    assert!(
        ws.root()
            .join(".vox/skills/git-helper/scripts/check.sh")
            .is_file()
    );
    let again = err(
        &c,
        "vox_skill_install",
        json!({"path": "src-skills/git-helper"}),
    )
    .await;
    assert_eq!(again["code"], "conflict");
    ok(
        &c,
        "vox_skill_install",
        json!({"path": "src-skills/git-helper", "replace": true}),
    )
    .await;

    let hits = ok(
        &c,
        "vox_skill_search",
        json!({"query": "bisect regression"}),
    )
    .await;
    assert_eq!(hits["hits"][0]["id"], "git-helper");
    let hits = ok(&c, "vox_skill_search", json!({"query": "release notes"})).await;
    assert_eq!(hits["hits"][0]["id"], "release-notes");

    let info = ok(&c, "vox_skill_info", json!({"id": "git-helper"})).await;
    assert_eq!(info["files"], json!(["SKILL.md", "scripts/check.sh"]));
    assert_eq!(info["license"], "Apache-2.0");
    assert_eq!(info["active"], false);

    // Each skill is an instructional macro tool under dev.
    let listed = tools(&c).await;
    let mac = listed
        .iter()
        .find(|t| t.name == "vox_skill_git_helper")
        .expect("macro tool listed");
    assert_eq!(
        mac.meta.as_ref().unwrap().get("vox_source"),
        Some(&json!("skill"))
    );
    let r = ok(&c, "vox_skill_git_helper", json!({})).await;
    assert!(
        r["instructions"]
            .as_str()
            .unwrap()
            .contains("git bisect run")
    );

    let uris: Vec<String> = c
        .list_all_resources()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.uri.clone())
        .collect();
    assert_eq!(
        uris,
        [
            "skill://index.json",
            "skill://git-helper/SKILL.md",
            "skill://home-skill/SKILL.md",
            "skill://release-notes/SKILL.md",
            // Under dev the orchestrator's events resource is served too.
            "vox://orchestrator/events"
        ]
    );
    let index = c
        .read_resource(ReadResourceRequestParams::new("skill://index.json"))
        .await
        .unwrap();
    let text = format!("{index:?}");
    assert!(
        text.contains("git-helper") && text.contains("vox_repo_status"),
        "{text}"
    );
    let md = c
        .read_resource(ReadResourceRequestParams::new(
            "skill://git-helper/SKILL.md",
        ))
        .await
        .unwrap();
    assert!(format!("{md:?}").contains("name: git-helper"));

    // Only the workspace store's skills can be uninstalled.
    let e = err(&c, "vox_skill_uninstall", json!({"id": "home-skill"})).await;
    assert_eq!(e["code"], "conflict");
    let e = err(&c, "vox_skill_uninstall", json!({"id": "nope"})).await;
    assert_eq!(e["code"], "not_found");
    ok(&c, "vox_skill_uninstall", json!({"id": "git-helper"})).await;
    assert!(!ws.root().join(".vox/skills/git-helper").exists());
    // The search index is rebuilt on uninstall too.
    let hits = ok(&c, "vox_skill_search", json!({"query": "bisect"})).await;
    assert_eq!(hits["hits"], json!([]), "{hits}");
    assert!(
        !tool_names(&c)
            .await
            .contains(&"vox_skill_git_helper".to_owned())
    );
    // Under dev an unknown name is a JSON-RPC error (-32602), as for any unknown tool.
    let gone = c
        .call_tool(rmcp::model::CallToolRequestParams::new(
            "vox_skill_git_helper",
        ))
        .await;
    assert!(format!("{gone:?}").contains("unknown_tool"), "{gone:?}");
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn an_active_skill_limits_its_session_to_its_tools() {
    let ws = workspace();
    let c = ws.client(&[]).await;
    let other = ws.client(&[]).await;
    ok(
        &c,
        "vox_skill_install",
        json!({"path": "src-skills/git-helper"}),
    )
    .await;
    let used = ok(&c, "vox_skill_use", json!({"id": "git-helper"})).await;
    assert_eq!(used["active"], "git-helper");
    assert!(used["instructions"].as_str().unwrap().contains("Bisecting"));
    // Listed tools (exact and prefix) are allowed.
    ok(&c, "vox_memory_store", json!({"key": "k", "value": "v"})).await;
    ok(&c, "vox_memory_recall", json!({"key": "k"})).await;
    // Anything else is refused, naming the skill.
    let e = err(&c, "vox_kb_query", json!({"query": "x"})).await;
    assert_eq!(e["code"], "skill_tool_not_allowed");
    assert_eq!(e["skill"], "git-helper");
    assert!(e["message"].as_str().unwrap().contains("vox_kb_query"));
    // Workspace tools too.
    write(
        &ws.root().join("t.vox"),
        "@tool\nfn add(a: int) to int {\n    a + 1\n}\n",
    );
    ok(&c, "vox_workspace_mcp_refresh", json!({})).await;
    let e = err(&c, "add", json!({"a": 1})).await;
    assert_eq!(e["code"], "skill_tool_not_allowed");
    // A workspace tool cannot pass for an infrastructure tool: `vox_*` names are the catalog's.
    write(
        &ws.root().join("sneak.vox"),
        "@tool\nfn vox_chat_sneak() to int {\n    1\n}\n",
    );
    let report = ok(&c, "vox_workspace_mcp_refresh", json!({})).await;
    assert!(
        report["shadowed"].to_string().contains("vox_chat_sneak"),
        "{report}"
    );
    let sneak = c
        .call_tool(rmcp::model::CallToolRequestParams::new("vox_chat_sneak"))
        .await;
    assert!(format!("{sneak:?}").contains("unknown_tool"), "{sneak:?}");
    // While the skill is active, vox_skill_run runs only its own commands.
    let e = err(
        &c,
        "vox_skill_run",
        json!({"id": "release-notes", "command": ["true"]}),
    )
    .await;
    assert_eq!(e["code"], "skill_tool_not_allowed", "{e}");
    // Infrastructure tools stay allowed.
    ok(&c, "vox_skill_list", json!({})).await;
    let info = ok(&c, "vox_skill_info", json!({"id": "git-helper"})).await;
    assert_eq!(info["active"], true);
    // Another session is not affected.
    ok(&other, "vox_kb_query", json!({"query": "x"})).await;
    assert_eq!(
        ok(&other, "add", json!({"a": 1})).await,
        json!({"result": 2})
    );
    // A skill with no tool list is unrestricted.
    ok(&c, "vox_skill_use", json!({"id": "release-notes"})).await;
    ok(&c, "vox_kb_query", json!({"query": "x"})).await;
    // Leaving the skill lifts the limit.
    ok(&c, "vox_skill_use", json!({"id": "git-helper"})).await;
    err(&c, "vox_kb_query", json!({"query": "x"})).await;
    let left = ok(&c, "vox_skill_use", json!({"id": null})).await;
    assert_eq!(left["active"], json!(null));
    ok(&c, "vox_kb_query", json!({"query": "x"})).await;
    let e = err(&c, "vox_skill_use", json!({"id": "missing"})).await;
    assert_eq!(e["code"], "not_found");
    c.cancel().await.unwrap();
    other.cancel().await.unwrap();
}

#[tokio::test]
async fn bad_skills_get_clear_errors_and_the_server_keeps_serving() {
    let ws = workspace();
    write(
        &ws.root().join("src-skills/bad-yaml/SKILL.md"),
        "---\nname: bad-yaml\ndescription: [unclosed\n---\n",
    );
    write(
        &ws.root().join("src-skills/huge/SKILL.md"),
        &format!(
            "---\nname: huge\ndescription: big\n---\n{}",
            "x".repeat(300 * 1024)
        ),
    );
    write(
        &ws.root().join("src-skills/wrong-dir/SKILL.md"),
        "---\nname: other-name\ndescription: d\n---\n",
    );
    let outside = tempfile::tempdir().unwrap();
    write(
        &outside.path().join("evil/SKILL.md"),
        "---\nname: evil\ndescription: d\n---\n",
    );
    let c = ws.client(&[]).await;
    let cases = [
        (json!({"path": "src-skills/bad-yaml"}), "line 3"),
        (json!({"path": "src-skills/huge"}), "limit of 262144 bytes"),
        (json!({"path": "src-skills/wrong-dir"}), "directory name"),
        (json!({"path": "../../../../etc"}), "outside the workspace"),
        (
            json!({"path": outside.path().join("evil").to_str().unwrap()}),
            "outside the workspace",
        ),
        (json!({"path": "src-skills/missing"}), "cannot be read"),
        (json!({"path": ""}), "must not be empty"),
        (
            json!({"path": "src-skills/git-helper", "extra": 1}),
            "unknown field",
        ),
    ];
    for (args, want) in cases {
        let e = err(&c, "vox_skill_install", args.clone()).await;
        assert_eq!(e["code"], "invalid_arguments", "{args}: {e}");
        assert!(e["message"].as_str().unwrap().contains(want), "{args}: {e}");
    }
    let e = err(&c, "vox_skill_uninstall", json!({"id": "../../etc"})).await;
    assert_eq!(e["code"], "invalid_arguments");
    let r = c
        .read_resource(ReadResourceRequestParams::new(
            "skill://../../etc/passwd/SKILL.md",
        ))
        .await;
    assert!(r.is_err(), "{r:?}");
    // Still serving, and nothing was installed.
    let list = ok(&c, "vox_skill_list", json!({})).await;
    assert_eq!(list["skills"].as_array().unwrap().len(), 2);
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn installed_skills_survive_a_daemon_restart() {
    let ws = workspace();
    let c = ws.client(&[]).await;
    ok(
        &c,
        "vox_skill_install",
        json!({"path": "src-skills/git-helper"}),
    )
    .await;
    c.cancel().await.unwrap();
    ws.stop_daemon();
    let c = ws.client(&[]).await;
    let hits = ok(&c, "vox_skill_search", json!({"query": "bisect"})).await;
    assert_eq!(hits["hits"][0]["id"], "git-helper");
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn named_profiles_serve_no_macro_tools_and_the_skills_profile_serves_the_tools() {
    let ws = workspace();
    write(
        &ws.root().join(".vox/skills/git-helper/SKILL.md"),
        GIT_HELPER,
    );
    let c = ws.client(&["--profile", "knowledge"]).await;
    let names = tool_names(&c).await;
    assert!(
        names.iter().all(|n| !n.starts_with("vox_skill_")),
        "{names:?}"
    );
    let e = err(&c, "vox_skill_git_helper", json!({})).await;
    assert_eq!(e["code"], "tool_not_in_profile");
    assert!(c.list_all_resources().await.unwrap().is_empty());
    c.cancel().await.unwrap();
    ws.stop_daemon();

    let c = ws.client(&["--profile", "skills"]).await;
    let names = tool_names(&c).await;
    assert_eq!(names, registry_slice("skills"));
    assert!(!names.contains(&"vox_skill_git_helper".to_owned()));
    let e = err(&c, "vox_skill_git_helper", json!({})).await;
    assert_eq!(e["code"], "tool_not_in_profile");
    let hits = ok(&c, "vox_skill_search", json!({"query": "bisect"})).await;
    assert_eq!(hits["hits"][0]["id"], "git-helper");
    // The skill resources are served wherever the skill tools are.
    let uris: Vec<String> = c
        .list_all_resources()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.uri.clone())
        .collect();
    assert!(
        uris.contains(&"skill://git-helper/SKILL.md".to_owned()),
        "{uris:?}"
    );
    // The allowlist holds under a named profile too.
    ok(&c, "vox_skill_use", json!({"id": "git-helper"})).await;
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn skill_run_is_sandboxed_and_each_denial_really_happens() {
    let ws = workspace();
    let c = ws.client(&[]).await;
    ok(
        &c,
        "vox_skill_install",
        json!({"path": "src-skills/git-helper"}),
    )
    .await;
    if let Err(e) = vox_sandbox::probe() {
        // Where the kernel cannot confine a run, the tool refuses rather than run unconfined.
        let e2 = err(
            &c,
            "vox_skill_run",
            json!({"id": "git-helper", "command": ["true"]}),
        )
        .await;
        assert_eq!(e2["code"], "unavailable", "{e}");
        assert!(e2["message"].as_str().unwrap().contains("unconfined"));
        return;
    }
    let run = |args: serde_json::Value| {
        let c = &c;
        async move { ok(c, "vox_skill_run", args).await }
    };
    // A normal command sees its scratch copy and may write inside it.
    let r = run(json!({"id": "git-helper", "command": ["sh", "-c", "head -2 SKILL.md; echo made > out.txt; cat out.txt; ./scripts/check.sh && echo script-ok; echo $HOME; env | wc -l"], "stdin": ""})).await;
    assert_eq!(r["exit_code"], 0, "{r}");
    let out = r["stdout"].as_str().unwrap();
    assert!(
        out.contains("name: git-helper") && out.contains("made") && out.contains("script-ok"),
        "{r}"
    );
    // The environment is scrubbed: a parent variable is not visible.
    let r = run(
        json!({"id": "git-helper", "command": ["sh", "-c", "echo \"[${VOX_WORKSPACE:-unset}]\""]}),
    )
    .await;
    assert_eq!(r["stdout"], "[unset]\n", "{r}");
    // A write outside the scratch copy fails: /tmp, and the installed skill itself.
    let outside = format!("/tmp/vox-skill-run-outside-{}", std::process::id());
    let installed = ws.root().join(".vox/skills/git-helper/SKILL.md");
    let before = std::fs::read_to_string(&installed).unwrap();
    let script = format!("echo x > {outside}; echo y >> {}", installed.display());
    let r = run(json!({"id": "git-helper", "command": ["sh", "-c", script]})).await;
    assert_ne!(r["exit_code"], 0, "{r}");
    assert!(!Path::new(&outside).exists());
    assert_eq!(std::fs::read_to_string(&installed).unwrap(), before);
    // No network: a connection to a listener on this machine's loopback never arrives.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let py = format!("import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)");
    let r = run(json!({"id": "git-helper", "command": ["python3", "-c", py]})).await;
    assert_ne!(r["exit_code"], 0, "{r}");
    assert!(
        listener.accept().is_err(),
        "the sandbox reached the host's loopback"
    );
    // Too many processes: forks beyond the process limit fail (bounded, so a broken sandbox
    // could not take the machine down), and the wall clock ends the run.
    let r = run(json!({"id": "git-helper", "timeout_ms": 2000, "command": ["sh", "-c", "i=0; while [ $i -lt 300 ]; do sleep 20 & i=$((i+1)); done; wait"]})).await;
    assert!(
        r["stderr"].as_str().unwrap().contains("fork")
            || r["stderr"]
                .as_str()
                .unwrap()
                .contains("Resource temporarily unavailable"),
        "{r}"
    );
    // A sleep past the limit is killed at the deadline.
    let r = run(json!({"id": "git-helper", "timeout_ms": 1000, "command": ["sleep", "30"]})).await;
    assert_eq!(r["limit"], "wall", "{r}");
    assert!(r["duration_ms"].as_u64().unwrap() < 5_000, "{r}");
    // Bad requests.
    let e = err(
        &c,
        "vox_skill_run",
        json!({"id": "nope", "command": ["true"]}),
    )
    .await;
    assert_eq!(e["code"], "not_found");
    let e = err(
        &c,
        "vox_skill_run",
        json!({"id": "git-helper", "command": []}),
    )
    .await;
    assert_eq!(e["code"], "invalid_arguments");
    let e = err(
        &c,
        "vox_skill_run",
        json!({"id": "git-helper", "command": ["no-such-program-xyz"]}),
    )
    .await;
    assert_eq!(e["code"], "invalid_arguments", "{e}");
    let e = err(
        &c,
        "vox_skill_run",
        json!({"id": "git-helper", "command": ["true"], "timeout_ms": 999999}),
    )
    .await;
    assert_eq!(e["code"], "invalid_arguments");
    c.cancel().await.unwrap();
}

#[test]
fn the_cli_lists_skills_and_runs_them_in_the_same_sandbox() {
    let ws = workspace();
    let out = ws.vox(&["skill", "list", "--json"]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["skills"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(v["errors"].as_array().unwrap().len(), 1, "{v}");
    if vox_sandbox::probe().is_err() {
        return;
    }
    let out = ws.vox(&[
        "skill",
        "run",
        "release-notes",
        "--",
        "sh",
        "-c",
        "head -2 SKILL.md; exit 3",
    ]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stdout).contains("release-notes"));
    let out = ws.vox(&[
        "skill",
        "run",
        "release-notes",
        "--timeout-ms",
        "300",
        "--",
        "sleep",
        "10",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("Wall"));
    let out = ws.vox(&["skill", "run", "missing", "--", "true"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no installed skill"));
}

#[tokio::test]
async fn an_active_skill_is_restored_when_the_daemon_restarts() {
    let ws = workspace();
    write(
        &ws.root().join(".vox/skills/git-helper/SKILL.md"),
        GIT_HELPER,
    );
    let c = ws.client(&[]).await;
    ok(&c, "vox_skill_use", json!({"id": "git-helper"})).await;
    err(&c, "vox_kb_query", json!({"query": "x"})).await;
    ws.stop_daemon();
    // The first call reports the lost daemon; the next respawns it and re-activates the skill
    // before it is forwarded, so the limit still holds.
    let lost = err(&c, "vox_kb_query", json!({"query": "x"})).await;
    assert_eq!(lost["code"], "daemon_unavailable", "{lost}");
    let e = err(&c, "vox_kb_query", json!({"query": "x"})).await;
    assert_eq!(e["code"], "skill_tool_not_allowed", "{e}");
    ok(&c, "vox_memory_list", json!({})).await;
    // If the skill is gone by then, calls fail (closed) until the client chooses again.
    ok(&c, "vox_skill_use", json!({"id": "git-helper"})).await;
    std::fs::remove_dir_all(ws.root().join(".vox/skills/git-helper")).unwrap();
    ws.stop_daemon();
    err(&c, "vox_memory_list", json!({})).await;
    let refused = c
        .call_tool(rmcp::model::CallToolRequestParams::new("vox_memory_list"))
        .await;
    assert!(
        format!("{refused:?}").contains("could not be activated again"),
        "{refused:?}"
    );
    let chosen = ok(&c, "vox_skill_use", json!({"id": null})).await;
    assert_eq!(chosen["active"], json!(null));
    ok(&c, "vox_kb_query", json!({"query": "x"})).await;
    c.cancel().await.unwrap();
}

/// Every skill is a prompt: listed by id with the arguments `metadata.vox-arguments` declares,
/// got as its instructions with each `{{argument}}` filled in (the others listed after them); a
/// missing required argument or an unknown one is an invalid-params error; a name a workspace
/// prompt also has is listed once, and got as listed.
#[tokio::test]
async fn skills_are_prompts_with_the_arguments_their_front_matter_declares() {
    let ws = workspace();
    write(
        &ws.root().join(".vox/skills/triage/SKILL.md"),
        "---\nname: triage\ndescription: Triage a change.\nmetadata:\n  vox-arguments: target, depth?\n---\nTriage {{target}} closely.\n",
    );
    write(
        &ws.root().join(".vox/skills/review/SKILL.md"),
        "---\nname: review\ndescription: The review skill.\n---\nReview it.\n",
    );
    write(
        &ws.root().join("tools/prompts.vox"),
        "@mcp.prompt \"The workspace's review\"\nfn review() to str { \"from the workspace\" }\n",
    );
    let c = ws.client(&[]).await;
    let prompts = c.list_all_prompts().await.unwrap();
    let triage = prompts
        .iter()
        .find(|p| p.name == "triage")
        .expect("the skill is a prompt");
    let args: Vec<(String, Option<bool>)> = triage
        .arguments
        .iter()
        .flatten()
        .map(|a| (a.name.clone(), a.required))
        .collect();
    assert_eq!(
        args,
        [
            ("target".to_string(), Some(true)),
            ("depth".to_string(), Some(false))
        ]
    );
    assert!(prompts.iter().any(|p| p.name == "home-skill"));
    let get = |name: &str, args: serde_json::Value| {
        let mut p = rmcp::model::GetPromptRequestParams::new(name);
        if let serde_json::Value::Object(o) = args {
            p = p.with_arguments(o);
        }
        c.get_prompt(p)
    };
    let got = get("triage", json!({"target": "PR 7", "depth": "3"}))
        .await
        .unwrap();
    let text = serde_json::to_value(&got.messages[0].content).unwrap();
    assert_eq!(
        text["text"], "Triage PR 7 closely.\n\n\nArguments:\n- depth: 3",
        "{text}"
    );
    for bad in [json!({}), json!({"target": "x", "colour": "red"})] {
        let e = get("triage", bad.clone()).await.unwrap_err().to_string();
        assert!(
            e.contains("needs argument `target`") || e.contains("no argument `colour`"),
            "{bad}: {e}"
        );
    }
    let reviews: Vec<_> = prompts.iter().filter(|p| p.name == "review").collect();
    assert_eq!(reviews.len(), 1, "one prompt per name: {reviews:?}");
    let got = get("review", json!({})).await.unwrap();
    assert_eq!(got.description, reviews[0].description, "got as listed");
    // The refresh reports the drop, as for tools.
    let report = ok(&c, "vox_workspace_mcp_refresh", json!({})).await;
    assert_eq!(
        report["hidden_prompts"],
        json!([{"name": "review", "file": "skill:review", "kept_from": "tools/prompts.vox"}]),
        "{report}"
    );
}
