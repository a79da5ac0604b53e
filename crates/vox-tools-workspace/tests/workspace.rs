//! The workspace families in process: git views of a temp repository, the compiler tools, a
//! workspace `.vox` tool, and skills (the active skill as a session guard).

use serde_json::json;
use std::path::Path;
use std::process::Command;
use vox_tools_harness::{Harness, pluck};

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// Runs git in `root` with no user or system configuration.
fn git(root: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=Harness", "-c", "user.email=h@example.com"])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(root)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

#[tokio::test]
async fn repo_views_show_the_branch_changes_log_and_files_of_a_git_workspace() {
    let h = Harness::boot_in(|root| {
        git(root, &["init", "-q"]);
        write(root, "src/lib.rs", "pub fn one() -> i32 { 1 }\n");
        git(root, &["add", "."]);
        git(root, &["commit", "-q", "-m", "first commit"]);
        write(root, "src/lib.rs", "pub fn one() -> i32 { 2 }\n");
        write(root, "notes.txt", "new\n");
    });
    let st = h.ok("vox_repo_status", json!({})).await;
    assert_eq!(st["branch"], "main", "{st}");
    assert_eq!(st["detached"], false);
    let entries = &st["entries"];
    let mut changed: Vec<(&str, &str)> = pluck(entries, "path")
        .into_iter()
        .zip(pluck(entries, "worktree_status"))
        .collect();
    changed.sort();
    assert_eq!(changed, [("notes.txt", "?"), ("src/lib.rs", "M")], "{st}");
    let log = h.ok("vox_repo_log", json!({})).await;
    assert_eq!(log["commits"].as_array().unwrap().len(), 1);
    assert_eq!(log["commits"][0]["sha"], st["head"]);
    let file = h
        .ok(
            "vox_repo_file",
            json!({"path": "src/lib.rs", "rev": "HEAD"}),
        )
        .await;
    assert!(file.to_string().contains("{ 1 }"), "{file}");
    h.fails(
        "vox_repo_file",
        json!({"path": "../etc"}),
        "invalid_arguments",
    )
    .await;
}

#[tokio::test]
async fn repo_status_outside_a_repository_is_not_found_with_the_repository_code() {
    let h = Harness::boot();
    let e = h.fails("vox_repo_status", json!({}), "not_found").await;
    assert!(e["error"]["detail"]["code"].is_string(), "{e}");
}

const GREET: &str = "@tool \"greet: say hello\"\nfn greet(name: str, punct: str = \"!\") to str {\n    \"Hello {name}{punct}\"\n}\n\n@test\nfn greets() to bool {\n    greet(\"vox\") == \"Hello vox!\"\n}\n";

const NOISY: &str = "@tool \"Prints as it goes\"\nfn noisy(n: int) to int {\n    print(\"starting\")\n    let mut i = 0\n    while i < n {\n        i += 1\n        print(\"line {i}\")\n    }\n    n\n}\n";

#[tokio::test]
async fn a_workspace_vox_tool_is_listed_called_and_its_prints_reach_the_caller() {
    let h = Harness::boot_in(|root| {
        write(root, "tools/greet.vox", GREET);
        write(root, "tools/noisy.vox", NOISY);
    });
    let scope = h.operator("ws");
    let names = h.tool_names(&scope);
    assert!(names.contains(&"greet".to_owned()), "{names:?}");
    assert_eq!(
        h.ok("greet", json!({"name": "vox"})).await,
        json!("Hello vox!")
    );
    assert_eq!(
        h.ok("greet", json!({"name": "vox", "punct": "?"})).await,
        json!("Hello vox?")
    );
    h.fails("greet", json!({"name": 3}), "invalid_arguments")
        .await;

    let (out, rec) = h.call_recorded(&scope, "noisy", json!({"n": 2})).await;
    assert_eq!(
        out.to_json(),
        json!(2),
        "a non-object result is wrapped only on the wire"
    );
    let lines: Vec<_> = rec
        .logs
        .lock()
        .unwrap()
        .iter()
        .map(|m| (m.logger.clone(), m.data.clone()))
        .collect();
    assert_eq!(
        lines,
        [
            ("noisy".to_owned(), json!("starting")),
            ("noisy".to_owned(), json!("line 1")),
            ("noisy".to_owned(), json!("line 2")),
        ]
    );

    // A new file is served after a refresh.
    write(
        h.root(),
        "tools/add.vox",
        "@tool\nfn add(a: int) to int {\n    a + 1\n}\n",
    );
    h.ok("vox_workspace_mcp_refresh", json!({})).await;
    assert_eq!(h.ok("add", json!({"a": 1})).await, json!(2));
    // Off the scopes that do not reach workspace tools, the name is unknown.
    let off = std::sync::Arc::new(
        (*scope)
            .clone()
            .with_workspace_tools(vox_core::WorkspaceTools::Off),
    );
    h.fails_in(&off, "add", json!({"a": 1}), "unknown_tool")
        .await;
}

#[tokio::test]
async fn the_compiler_tools_check_validate_and_test_vox_files() {
    let h = Harness::boot_in(|root| write(root, "tools/greet.vox", GREET));
    let r = h.ok("vox_check", json!({"path": "tools"})).await;
    assert!(r.to_string().contains("greet.vox"), "{r}");
    let v = h.ok("vox_validate_source", json!({"source": GREET})).await;
    assert!(v.to_string().contains("greet"), "{v}");
    let t = h.ok("vox_test", json!({"path": "tools/greet.vox"})).await;
    assert_eq!(
        (t["passed"].clone(), t["failed"].clone()),
        (json!(1), json!(0)),
        "{t}"
    );
    h.fails(
        "vox_check",
        json!({"path": "../x.vox"}),
        "invalid_arguments",
    )
    .await;
}

const GIT_HELPER: &str = "---\nname: git-helper\ndescription: Find the commit that broke a test with git bisect.\nlicense: Apache-2.0\nmetadata:\n  vox-tools: vox_memory_* vox_repo_status\n  tags: git, regression\n---\n# Bisecting\nRun `git bisect start`, mark good and bad commits, then `git bisect run` a test script.\n";

#[tokio::test]
async fn an_active_skill_limits_its_session_to_its_tools_and_is_reported_as_a_session_effect() {
    let h = Harness::boot_in(|root| write(root, ".vox/skills/git-helper/SKILL.md", GIT_HELPER));
    let mine = h.operator("mine");
    let other = h.operator("other");
    let listed = h.ok_in(&mine, "vox_skill_list", json!({})).await;
    assert!(listed.to_string().contains("git-helper"), "{listed}");

    let (used, rec) = h
        .call_recorded(&mine, "vox_skill_use", json!({"id": "git-helper"}))
        .await;
    let used = used.to_json();
    assert_eq!(used["active"], "git-helper");
    assert!(
        used["instructions"].to_string().contains("Bisecting"),
        "{used}"
    );
    assert_eq!(
        *rec.effects.lock().unwrap(),
        [vox_core::SessionEffect {
            active_skill: Some("git-helper".into())
        }]
    );
    // Its tools (a prefix and an exact name) and the infrastructure tools are allowed.
    h.ok_in(&mine, "vox_memory_store", json!({"key": "k", "value": "v"}))
        .await;
    h.ok_in(&mine, "vox_skill_list", json!({})).await;
    // Anything else is denied, naming the skill.
    let e = h
        .fails_in(
            &mine,
            "vox_kb_query",
            json!({"query": "x"}),
            "skill_tool_not_allowed",
        )
        .await;
    assert!(e.to_string().contains("git-helper"), "{e}");
    assert!(e.to_string().contains("vox_kb_query"), "{e}");
    // Another session is not affected.
    h.ok_in(&other, "vox_kb_query", json!({"query": "x"})).await;

    // Leaving the skill lifts the limit; an unknown skill is not found.
    let left = h.ok_in(&mine, "vox_skill_use", json!({"id": null})).await;
    assert_eq!(left["active"], json!(null));
    h.ok_in(&mine, "vox_kb_query", json!({"query": "x"})).await;
    h.fails_in(
        &mine,
        "vox_skill_use",
        json!({"id": "missing"}),
        "not_found",
    )
    .await;

    // A session that ends forgets its skill.
    h.ok_in(&mine, "vox_skill_use", json!({"id": "git-helper"}))
        .await;
    h.orch().end_session("mine");
    h.ok_in(&mine, "vox_kb_query", json!({"query": "x"})).await;
}
